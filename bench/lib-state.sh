# The VM's cross-core state and the CPU time other processes take, for the
# benchmarks (sourced, not run).  bench/patterns.sh and
# test/perf/run-pattern-tests.sh use it; perf.sh, veth.sh and
# loss-goodput.sh still carry their own copy of vm_state.
#
# This VM flips every few tens of seconds between a fast (~60 ns) and a
# slow (~350 ns) state for a cache line's round trip between its two
# cores (bench/cacheline.c), and loopback throughput moves 2-3x with it:
# ratios of two transports mean something only between runs that saw one
# state.  Probe before and after each run; a run whose probes differ is
# "mixed".
#
#   state_init BUILD_DIR       builds BUILD_DIR/cacheline (once per call);
#                              returns non-zero if it cannot
#   vm_state                   prints "fast NS", "slow NS" or "unknown -":
#                              the median of 3 probes (~10 ms each), so
#                              that one preempted probe does not flip it
#   state_letter STATE         f, s, m (mixed) or ? (unknown)
#   others_start / others_end  around a run: OTHERS_PCT = the share (%) of
#                              all CPUs that processes other than this
#                              shell's children used meanwhile (busy ticks
#                              of /proc/stat minus the CPU time of this
#                              script's finished children, /proc/$$/stat;
#                              they must have been waited for)
#
# Settings: SLOW_NS (150: a round trip above it is the slow state),
# STATE_CPUS ("0,1": the two CPUs probed).

SLOW_NS=${SLOW_NS:-150}
STATE_CPUS=${STATE_CPUS:-0,1}
STATE_BIN=

state_init() {
    local dir=$1 src
    src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cacheline.c"
    mkdir -p "$dir" || return 1
    cc -O2 -Wall -Wextra -Werror -pthread -o "$dir/cacheline" "$src" || return 1
    STATE_BIN="$dir/cacheline"
}

vm_state() {
    local ns
    ns=$(for _ in 1 2 3; do "$STATE_BIN" --cpus "$STATE_CPUS" 2>/dev/null; done |
        sed -nE 's/.*rtt_ns=([0-9]+).*/\1/p' | sort -n |
        awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    if [[ -z $ns ]]; then
        echo "unknown -"
    elif [[ $ns -gt $SLOW_NS ]]; then
        echo "slow $ns"
    else
        echo "fast $ns"
    fi
}

state_letter() {
    case $1 in
        fast) echo f ;;
        slow) echo s ;;
        mixed) echo m ;;
        *) echo '?' ;;
    esac
}

# busy ticks of all CPUs: user + nice + system + steal (irq and softirq
# left out: loopback delivery runs there and is charged to no process)
_state_busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $9 }' /proc/stat; }

# CPU seconds of the finished (waited for) children of this script's
# shell: cutime + cstime of /proc/$$/stat (fields 16 and 17), which a
# $(...) subshell reads as well as the shell itself
_state_children_cpu() {
    local rest
    rest=$(cat "/proc/$$/stat")
    rest=${rest##*) }
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f\n", ($14 + $15) / hz }' <<<"$rest"
}

others_start() {
    _OTH_B0=$(_state_busy_ticks)
    _OTH_C0=$(_state_children_cpu)
    _OTH_W0=$EPOCHREALTIME
}

others_end() {
    local b1 c1 w1
    b1=$(_state_busy_ticks)
    c1=$(_state_children_cpu)
    w1=$EPOCHREALTIME
    OTHERS_PCT=$(awk -v b0="$_OTH_B0" -v b1="$b1" -v c0="$_OTH_C0" -v c1="$c1" -v t0="$_OTH_W0" -v t1="$w1" \
        -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" 'BEGIN {
            w = t1 - t0; f = (b1 - b0) / hz - (c1 - c0); if (f < 0) f = 0
            printf "%.0f", (w > 0 ? 100 * f / (n * w) : 0) }')
}
