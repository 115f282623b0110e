# shellcheck shell=bash
# What every benchmark shares (sourced, not run; test/perf/run-pattern-tests.sh
# sources it too).  It sources test/lib.sh first (the Open MPI series:
# USNIC_OMPI, SHM_BTL, OOB_LO, OVERSUBSCRIBE, series_dir, hogs_start/_stop).
#
# Helper programs
#   BENCH_BIN                  where they are built: bench/build (Open MPI
#                              4.1), bench/build-ompi<x.y> for another series
#   bench_build NAME...        builds BENCH_BIN/NAME for each NAME: perf,
#                              patterns, goodput, scale, spawn_time, init_time and
#                              usnic_demo (demo/) with mpicc; cacheline,
#                              udp_raw, stalls, reap and xhost_stream
#                              (test/hosts/) with cc; -O2 -Wall -Wextra
#                              -Werror.  Only when the program is missing or
#                              its source (or a header it includes with "")
#                              is newer.  Returns non-zero, with the reason
#                              on stderr, if one cannot be built.
#   bench_build_in DIR NAME... the same into DIR
#
# The VM's cross-core state.  This VM flips every few tens of seconds
# between a fast (~60 ns) and a slow (~350 ns) state for a cache line's
# round trip between its two cores (bench/cacheline.c), and loopback
# throughput moves 2-3x with it: ratios of two transports mean something
# only between runs that saw one state.  Probe before and after each run;
# a run whose probes differ is "mixed".
#   vm_state                   prints "fast NS", "slow NS" or "unknown -":
#                              the median of 3 probes (~10 ms each) of
#                              BENCH_BIN/cacheline (bench_build cacheline
#                              first) on STATE_CPUS, so that one preempted
#                              probe does not flip it
#   state_init DIR             builds DIR/cacheline and probes with it
#                              (for a suite with its own build directory)
#   state_letter STATE         f, s, m (mixed) or ? (unknown)
#   CPU_A, CPU_B               the two CPUs a pinned pair of processes uses
#                              (0 and 1; 0 and 0 on a one-CPU machine)
#
# Other processes' share of the machine
#   others_start / others_end  around a run: OTHERS_PCT = the share (%) of
#                              all CPUs that processes other than this
#                              shell's children used meanwhile (busy ticks
#                              of /proc/stat minus the CPU time of this
#                              script's finished children, /proc/$$/stat;
#                              they must have been waited for), OTHERS_WALL
#                              = the seconds in between (%.1f)
#   measured LOG CMD...        runs CMD (stdin /dev/null, output to LOG)
#                              between the two; sets RC, WALL, FOREIGN
#                              (= OTHERS_PCT), LOAD0, LOAD1 (load average
#                              before, after) and UDPDROPS (udp_rcvbuf_errors
#                              after minus before)
#   udp_rcvbuf_errors [PREFIX...]  UDP datagrams the kernel dropped for a
#                              full socket receive buffer (Udp RcvbufErrors,
#                              /proc/net/snmp), read by PREFIX awk ... (for
#                              instance netns_exec: another namespace's)
#   loadavg                    the 1-minute load average
#   field KEY LINE             the value of KEY=value in LINE
#   median                     the median of the numbers on stdin ("-": none)
#
# Transports
#   transport_args NAME        TARGS = the mpirun options of transport NAME,
#                              TENV = the environment it needs (for env(1));
#                              returns non-zero for an unknown NAME.
#     usnic            pml ob1, btl usnic,self on TA_IF, the default wire
#     usnic_gso        the socket wire with 1472-byte datagrams (GSO
#                      batches of 44, GRO reads)
#     usnic_mmsg       the same without GSO (btl_usnic_sock_gso 0)
#     usnic_gso_nogro  the same without GRO (btl_usnic_sock_gro 0)
#     usnic_mmsg_nogro the same without either
#     usnic_ofi        the ofi wire (btl_usnic_wire ofi)
#     usnic_header, usnic_none   btl_usnic_protection header / none
#     usnic_base, usnic_ofi_base   usnic, usnic_ofi with the plugin of
#                      BASE_DIR (--mca mca_base_component_path, and TENV)
#     dgcheck, dgcheck_nomr   usnic over test/provider's dgcheck provider
#                      (DGCHECK_DIR), FI_MR_LOCAL enforced / not
#     tcp              pml ob1, btl tcp,self on TA_IF
#     tcploss          tcp on the ports TCP_PORT_MIN.. (TCP_PORT_RANGE of them)
#     rxd              pml cm, mtl ofi on RXD_PROVIDER ("udp;ofi_rxd")
#     ofi_rxm          pml cm, mtl ofi on "tcp;ofi_rxm"
#     ucx              pml ucx over UCX's tcp transport on TA_IF
#     vader, sm        pml ob1, btl SHM_BTL,self (vader on 4.1, sm on 5.0)
#   The usnic and dgcheck ones name every option they need (pml, btl,
#   interface); rxd, ofi_rxm and ucx add the verbose options whose lines
#   prove the path.  Set after sourcing:
#     TA_IF            the interface (lo)
#     TA_USNIC         options on every usnic job but dgcheck, an array
#                      (default: btl_usnic_verbose 5 and btl_usnic_stats
#                      3600: the wire at MPI_Init, the counters at finalize)
#     TA_PROTECTION    btl_usnic_protection for the usnic jobs but
#                      usnic_header/usnic_none (default: not named)
#
# Settings (environment): SLOW_NS (150: a round trip above it is the slow
# state), STATE_CPUS ("CPU_A,CPU_B": the two CPUs probed).

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
# shellcheck source=../test/lib.sh
. "$REPO_DIR/test/lib.sh"

BENCH_BIN=$(series_dir "$BENCH_DIR/build")
CPU_A=0 CPU_B=1
[[ $(nproc) -ge 2 ]] || CPU_B=0
SLOW_NS=${SLOW_NS:-150}
STATE_CPUS=${STATE_CPUS:-$CPU_A,$CPU_B}
STATE_BIN=

# ---------------------------------------------------------------------------
# Helper programs
# ---------------------------------------------------------------------------

bench_build_in() {
    local dir=$1 name src cc cflags stale hdr tmp
    shift
    mkdir -p "$dir" || return 1
    for name in "$@"; do
        cc=cc cflags=(-O2 -Wall -Wextra -Werror)
        case $name in
            perf | patterns | goodput | scale | spawn_time | init_time) cc=mpicc src=$BENCH_DIR/$name.c ;;
            usnic_demo) cc=mpicc src=$REPO_DIR/demo/usnic_demo.c ;;
            cacheline) src=$BENCH_DIR/cacheline.c cflags+=(-pthread) ;;
            udp_raw | stalls | reap) src=$BENCH_DIR/$name.c ;;
            xhost_stream) src=$REPO_DIR/test/hosts/xhost_stream.c ;;
            *) echo "bench_build: no helper program '$name'" >&2; return 1 ;;
        esac
        stale=0
        if [[ ! -x $dir/$name || $src -nt $dir/$name ]]; then
            stale=1
        else
            while read -r hdr; do
                [[ ${src%/*}/$hdr -nt $dir/$name ]] && stale=1
            done < <(sed -nE 's/^#include "([^"]+)".*/\1/p' "$src")
        fi
        [[ $stale == 1 ]] || continue
        # built aside and renamed: a run that starts meanwhile sees the
        # old program or the new one, never half of one
        tmp="$dir/.$name.$$"
        if ! "$cc" "${cflags[@]}" -o "$tmp" "$src"; then
            rm -f "$tmp"
            echo "bench_build: compiling ${src#"$REPO_DIR"/} ($cc) failed" >&2
            return 1
        fi
        mv -f "$tmp" "$dir/$name" || return 1
    done
}

bench_build() { bench_build_in "$BENCH_BIN" "$@"; }

# ---------------------------------------------------------------------------
# The VM's state
# ---------------------------------------------------------------------------

state_init() {
    bench_build_in "$1" cacheline || return 1
    STATE_BIN="$1/cacheline"
}

vm_state() {
    local ns
    ns=$(for _ in 1 2 3; do "${STATE_BIN:-$BENCH_BIN/cacheline}" --cpus "$STATE_CPUS" 2>/dev/null; done |
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

# ---------------------------------------------------------------------------
# Other processes' share of the machine
# ---------------------------------------------------------------------------

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
    read -r OTHERS_WALL OTHERS_PCT < <(awk -v b0="$_OTH_B0" -v b1="$b1" -v c0="$_OTH_C0" -v c1="$c1" \
        -v t0="$_OTH_W0" -v t1="$w1" -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" 'BEGIN {
            w = t1 - t0; f = (b1 - b0) / hz - (c1 - c0); if (f < 0) f = 0
            printf "%.1f %.0f\n", w, (w > 0 ? 100 * f / (n * w) : 0) }')
}

loadavg() { cut -d' ' -f1 /proc/loadavg; }

# shellcheck disable=SC2120  # PREFIX is optional
udp_rcvbuf_errors() {
    # shellcheck disable=SC2016  # an awk program
    "$@" awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) n[i] = $i; h = 1 }
                        else for (i = 1; i <= NF; i++) if (n[i] == "RcvbufErrors") print $i }' /proc/net/snmp
}

# shellcheck disable=SC2034,SC2119  # RC, WALL, ...: for the caller; no PREFIX
measured() {
    local log=$1 d0 d1
    shift
    LOAD0=$(loadavg); d0=$(udp_rcvbuf_errors); others_start
    "$@" >"$log" 2>&1 </dev/null
    RC=$?
    others_end; LOAD1=$(loadavg); d1=$(udp_rcvbuf_errors)
    UDPDROPS=$(( ${d1:-0} - ${d0:-0} ))
    WALL=$OTHERS_WALL FOREIGN=$OTHERS_PCT
}

field() { sed -nE "s/.* $1=([^ ]+).*/\\1/p" <<<"$2" | head -1; }

# median: the median of the numbers on stdin (separated by blanks or
# newlines), "-" if there are none
median() {
    tr -s ' \t' '\n\n' | grep . | sort -g |
        awk '{v[NR] = $1} END {if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# ---------------------------------------------------------------------------
# Transports
# ---------------------------------------------------------------------------

TA_IF=lo
TA_USNIC=(--mca btl_usnic_verbose 5 --mca btl_usnic_stats 3600)
TA_PROTECTION=
RXD_PROVIDER="udp;ofi_rxd"
DGCHECK_DIR="$REPO_DIR/test/provider/build"

# shellcheck disable=SC2034  # TARGS, TENV: for the caller
transport_args() {
    local usnic=(--mca pml ob1 --mca btl "usnic,self" --mca btl_usnic_if_include "$TA_IF")
    local socket1472=(--mca btl_usnic_wire socket --mca btl_usnic_max_datagram 1472)
    local logged=("${usnic[@]}" ${TA_USNIC[@]+"${TA_USNIC[@]}"})
    [[ -n $TA_PROTECTION ]] && logged+=(--mca btl_usnic_protection "$TA_PROTECTION")
    TENV=()
    case $1 in
        usnic) TARGS=("${logged[@]}") ;;
        usnic_gso) TARGS=("${logged[@]}" "${socket1472[@]}") ;;
        usnic_mmsg) TARGS=("${logged[@]}" "${socket1472[@]}" --mca btl_usnic_sock_gso 0) ;;
        usnic_gso_nogro) TARGS=("${logged[@]}" "${socket1472[@]}" --mca btl_usnic_sock_gro 0) ;;
        usnic_mmsg_nogro)
            TARGS=("${logged[@]}" "${socket1472[@]}" --mca btl_usnic_sock_gso 0 --mca btl_usnic_sock_gro 0) ;;
        usnic_ofi) TARGS=("${logged[@]}" --mca btl_usnic_wire ofi) ;;
        # congestion control switched off: what the controller costs on a healthy path
        usnic_nocc) TARGS=("${logged[@]}" --mca btl_usnic_congestion_control 0) ;;
        usnic_gso_nocc) TARGS=("${logged[@]}" "${socket1472[@]}" --mca btl_usnic_congestion_control 0) ;;
        usnic_header | usnic_none)
            TARGS=("${usnic[@]}" ${TA_USNIC[@]+"${TA_USNIC[@]}"} --mca btl_usnic_protection "${1#usnic_}") ;;
        # the older plugin: for the ranks (--mca) and for mpirun's own ompi_info-like checks (TENV)
        usnic_base)
            TARGS=("${logged[@]}" --mca mca_base_component_path "$BASE_DIR")
            TENV=(OMPI_MCA_mca_base_component_path="$BASE_DIR") ;;
        usnic_ofi_base)
            TARGS=("${logged[@]}" --mca btl_usnic_wire ofi --mca mca_base_component_path "$BASE_DIR")
            TENV=(OMPI_MCA_mca_base_component_path="$BASE_DIR") ;;
        dgcheck | dgcheck_nomr)
            TARGS=("${usnic[@]}" --mca btl_usnic_provider_include dgcheck -x "FI_PROVIDER_PATH=$DGCHECK_DIR"
                   -x "DGCHECK_ENFORCE_MR=$([[ $1 == dgcheck ]] && echo 1 || echo 0)") ;;
        tcp) TARGS=(--mca pml ob1 --mca btl "tcp,self" --mca btl_tcp_if_include "$TA_IF") ;;
        tcploss)
            TARGS=(--mca pml ob1 --mca btl "tcp,self" --mca btl_tcp_if_include "$TA_IF"
                   --mca btl_tcp_port_min_v4 "${TCP_PORT_MIN:-23000}" --mca btl_tcp_port_range_v4 "${TCP_PORT_RANGE:-32}") ;;
        # Debian's openmpi-mca-params.conf says "mtl = ^ofi": naming the
        # MTL overrides it.  The verbose options print the lines that
        # prove the path.
        rxd) TARGS=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$RXD_PROVIDER"
                    --mca mtl_ofi_verbose 1 --mca pml_base_verbose 10) ;;
        ofi_rxm) TARGS=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "tcp;ofi_rxm"
                        --mca mtl_ofi_verbose 1 --mca pml_base_verbose 10) ;;
        ucx) TARGS=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
                    -x "UCX_TLS=tcp,self" -x "UCX_NET_DEVICES=$TA_IF" --mca pml_base_verbose 10) ;;
        vader | sm) TARGS=(--mca pml ob1 --mca btl "$SHM_BTL,self") ;;
        *) TARGS=(); return 1 ;;
    esac
}
