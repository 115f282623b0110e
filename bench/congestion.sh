#!/usr/bin/env bash
#
# Issue 26's table: usnic with the congestion controller on, usnic with it
# off, and btl/tcp, on the same bottleneck in one run.  Must run as root.
#
#   bash bench/congestion.sh                 # REPS=3, about 5 min
#   REPS=5 CC_SECONDS=8 bash bench/congestion.sh
#
# The bottleneck (test/hosts/cc_lib.sh): three simulated hosts
# (test/hosts/hosts.sh, HOSTS_GSO=soft, MTU 1500), the switch's ports
# toward hosts 2 and 3 shaped by tbf at 1gbit, burst 32kb, limit 100kb
# (drop-tail), CC_DELAY of base delay (netem; 0, this VM's kernel has no
# sch_netem).  The jobs (test/hosts/cc_flows.c, CC_SECONDS = 5 s timed
# each, every byte verified):
#   alone    rank 0 (host 1) streams 1 MiB messages (4 in flight) to rank
#            1 (host 2), nothing else on the hosts: the issue's "stream
#            alone", MB/s and "resent %" (its goals: 0.9 x btl/tcp, 1 %)
#   pair     rank 0 (host 1) streams 1 MiB messages (4 in flight) to rank
#            1 (host 2) while ranks 2 (host 1) and 3 (host 2) ping-pong 8
#            bytes: "stream" MB/s (10^6 B/s), "resent %" (usnic's
#            num_resends / num_total_sends, all ranks), "ping-pong p50/p99"
#            (round trip, us); 4 busy-polling ranks on the VM's 2 cores:
#            the stream's goodput here is reported, not a goal (a rank
#            descheduled half the time sends, or ACKs, nothing meanwhile;
#            btl/tcp's kernel sends and ACKs in softirq for its process)
#   beside   rank 0 -> rank 1 alone beside an iperf3 TCP cubic flow from
#            host 1 to host 2 through the same port: the stream's MB/s,
#            TCP's Mbit/s over the stream's timed window (the iperf3
#            server's half-second intervals inside it), and the share =
#            the stream's Mbit/s / TCP's
#   incast2, incast4   2 / 4 senders on hosts 1 and 2 to one receiver on
#            host 3: aggregate MB/s and Jain's fairness index of the
#            per-sender goodputs
# Rows: usnic_on (--mca btl_usnic_congestion_control 1), usnic_off (... 0),
# tcp (btl tcp,self); usnic on USNIC_WIRE (default socket).  Until the
# plugin registers the parameter, on and off run the same code (the first
# line says whether it is registered).  Per cell the median of REPS runs;
# the runs are interleaved (rep by rep, job by job, the three transports
# one after the other in an order that rotates per rep), so a slow phase
# of the shared VM hits every row; with REPS > 1 a second table gives the
# min-max of every cell.  Under the tables: the issue's goals
# for "usnic cc on", met or not, against btl/tcp's medians.
#
# Environment: REPS (3), CC_SECONDS (5), CC_RATE, CC_LIMIT, CC_BURST,
# CC_DELAY, CC_TIMEOUT (test/hosts/cc_lib.sh), USNIC_WIRE (socket),
# ROWS ("usnic_on usnic_off tcp"), KINDS ("alone pair beside incast2 incast4").  Logs in bench/build/cc-logs/, one row
# per run in bench/build/cc-runs.csv (with the packets the shaper's queue
# dropped in each job).  Exit status 0 if every run passed.

set -u
set -o pipefail

export USNIC_WIRE=${USNIC_WIRE-socket}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"          # REPO_DIR, test/lib.sh, median
# shellcheck source=../test/hosts/hosts.sh
. "$REPO_DIR/test/hosts/hosts.sh"
# shellcheck source=../test/hosts/cc_lib.sh
. "$REPO_DIR/test/hosts/cc_lib.sh"
BUILD_DIR=$(series_dir "$BENCH_DIR/build")
LOG_DIR="$BUILD_DIR/cc-logs"
RUNS_CSV="$BUILD_DIR/cc-runs.csv"
REPS=${REPS:-3}
ROWS=${ROWS:-"usnic_on usnic_off tcp"}
KINDS=${KINDS:-"alone pair beside incast2 incast4"}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
die() { echo "congestion: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces, tc)"
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "bad REPS '$REPS'"
for r in $ROWS; do [[ $r == usnic_on || $r == usnic_off || $r == tcp ]] || die "unknown row '$r'"; done
START=$SECONDS
mkdir -p "$LOG_DIR" || die "cannot create $LOG_DIR"
rm -f "$LOG_DIR"/*
command -v iperf3 > /dev/null || ensure_package iperf3 || die "cannot install iperf3 (see $LOG_DIR/apt-get.log)"
for cmd in mpicc mpirun tc ip bridge ethtool unshare awk; do
    command -v "$cmd" > /dev/null || die "$cmd not found"
done
cc_build "$BUILD_DIR" || die "building cc_flows failed (see $LOG_DIR/build.log)"
cc_hosts_up || { cat "$LOG_DIR/hosts.log" >&2; die "cannot build the hosts: $WHY"; }

print_wire
echo "congestion: $(cc_describe)"
hosts_describe
echo "controller parameter $CC_PARAM: $(cc_param_state) in this plugin; $REPS rep(s) of ${CC_SECONDS} s per job"

KEYS="a_stream a_resent stream resent p50 p99 b_stream b_tcp b_share i2_agg i2_jain i4_agg i4_jain alone_drops pair_drops beside_drops incast2_drops incast4_drops"
echo "rep,row,$(tr ' ' ',' <<< "$KEYS")" > "$RUNS_CSV"
declare -A VALS       # row,key -> values
declare -A RUN        # row,key -> this rep's value
FAILED=0
read -r -a rows <<< "$ROWS"
nrows=${#rows[@]}
for ((rep = 1; rep <= REPS; rep++)); do
    for kind in $KINDS; do
        for ((i = 0; i < nrows; i++)); do
            row=${rows[(i + rep - 1) % nrows]}
            name=$kind-$row-$rep
            port=2
            [[ $kind == incast* ]] && port=3
            d0=$(hosts_shape_stat "$port" dropped)
            case $kind in
                alone) cc_run "$name" "$row" stream ;;
                beside) cc_run "$name" "$row" stream iperf ;;
                *) cc_run "$name" "$row" "$kind" ;;
            esac
            drops=$(( $(hosts_shape_stat "$port" dropped) - d0 ))
            if ! cc_passed || [ "$(cc_bad_msgs)" -ne 0 ]; then
                echo "  rep $rep $kind $row: FAILED (exit $CC_RC, $(cc_bad_msgs) dead-peer message(s); ${CC_LOG#$REPO_DIR/})"
                FAILED=$((FAILED + 1))
                continue
            fi
            case $kind in
                alone)
                    RUN[$row,a_stream]=$(cc_val MBps)
                    RUN[$row,a_resent]=$(cc_val resent_pct) ;;
                pair)
                    RUN[$row,stream]=$(cc_val MBps)
                    RUN[$row,resent]=$(cc_val resent_pct)
                    RUN[$row,p50]=$(cc_val p50_us)
                    RUN[$row,p99]=$(cc_val p99_us) ;;
                beside)
                    RUN[$row,b_stream]=$(cc_val MBps)
                    RUN[$row,b_tcp]=$CC_TCP_MBIT
                    RUN[$row,b_share]=$(awk -v u="$(cc_val MBps)" -v t="$CC_TCP_MBIT" \
                        'BEGIN { if (t != "-" && t > 0) printf "%.2f", u * 8 / t; else print "-" }') ;;
                incast2 | incast4)
                    RUN[$row,i${kind#incast}_agg]=$(cc_val MBps)
                    RUN[$row,i${kind#incast}_jain]=$(cc_val jain) ;;
            esac
            RUN[$row,${kind}_drops]=$drops
            echo "  rep $rep $kind $row: $(grep -a -E '^(AGG|PINGPONG|USNIC) ' "$CC_LOG" | tr '\n' ' ')$([ "$kind" = beside ] && echo "TCP ${CC_TCP_MBIT} Mbit/s ")queue drops $drops"
        done
    done
    for row in $ROWS; do
        line="$rep,$row"
        for k in $KEYS; do
            v=${RUN[$row,$k]:--}
            line+=",$v"
            [[ $v != - && -n $v ]] && VALS[$row,$k]+="$v "
        done
        echo "$line" >> "$RUNS_CSV"
    done
    RUN=()
done

med() { median <<< "${VALS[$1,$2]:-}"; }
label() {
    case $1 in
        usnic_on) echo "usnic, cc on" ;;
        usnic_off) echo "usnic, cc off" ;;
        tcp) echo "btl/tcp" ;;
    esac
}
echo
echo "Bottleneck: tbf $CC_RATE, limit $CC_LIMIT drop-tail, base delay $CC_DELAY, MTU $(ip -n "${HOSTS[0]}" link show veth1 | sed -nE 's/.* mtu ([0-9]+) .*/\1/p'); ${USNIC_WIRE} wire; median of $REPS interleaved run(s), ${CC_SECONDS} s each; MB/s = 10^6 B/s"
echo
echo "| row | stream alone MB/s | resent % | stream beside the ping-pong MB/s | resent % | ping-pong p50 / p99 us (beside the stream) | stream beside TCP cubic MB/s | TCP Mbit/s | share (stream / TCP) | incast 2->1 MB/s | Jain 2->1 | incast 4->1 MB/s | Jain 4->1 |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for row in $ROWS; do
    resent=$(med "$row" resent) a_resent=$(med "$row" a_resent)
    [ "$row" = tcp ] && resent="-" a_resent="-"
    printf '| %s | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(label "$row")" \
        "$(med "$row" a_stream)" "$a_resent" "$(med "$row" stream)" "$resent" "$(med "$row" p50)" "$(med "$row" p99)" \
        "$(med "$row" b_stream)" "$(med "$row" b_tcp)" "$(med "$row" b_share)" \
        "$(med "$row" i2_agg)" "$(med "$row" i2_jain)" "$(med "$row" i4_agg)" "$(med "$row" i4_jain)"
done

if [ "$REPS" -gt 1 ]; then
    range() {
        local v=${VALS[$1,$2]:-}
        [ -z "$v" ] && { echo "-"; return; }
        tr ' ' '\n' <<< "$v" | grep . | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print (lo == hi) ? lo : lo "-" hi }'
    }
    echo
    echo "The same cells, min-max of the $REPS runs (the spread is this shared VM's scheduling as much as the network):"
    echo
    echo "| row | alone MB/s | resent % | beside ping-pong MB/s | resent % | ping-pong p50 / p99 us | beside TCP MB/s | TCP Mbit/s | share | incast 2->1 MB/s | Jain 2->1 | incast 4->1 MB/s | Jain 4->1 |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for row in $ROWS; do
        resent=$(range "$row" resent) a_resent=$(range "$row" a_resent)
        [ "$row" = tcp ] && resent="-" a_resent="-"
        printf '| %s | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(label "$row")" \
            "$(range "$row" a_stream)" "$a_resent" "$(range "$row" stream)" "$resent" "$(range "$row" p50)" "$(range "$row" p99)" \
            "$(range "$row" b_stream)" "$(range "$row" b_tcp)" "$(range "$row" b_share)" \
            "$(range "$row" i2_agg)" "$(range "$row" i2_jain)" "$(range "$row" i4_agg)" "$(range "$row" i4_jain)"
    done
fi

# the issue's goals for usnic with the controller on, against btl/tcp
goal() {   # TEXT CONDITION(awk, on u, t)
    local u=$2 t=$3 cond=$4
    if [[ $u == - || $t == - || -z $u || -z $t ]]; then
        printf '  %-58s n/a (no figure)\n' "$1"
    elif awk -v u="$u" -v t="$t" "BEGIN { exit !($cond) }"; then
        printf '  %-58s met     (%s vs %s)\n' "$1" "$u" "$t"
    else
        printf '  %-58s MISSED  (%s vs %s)\n' "$1" "$u" "$t"
    fi
}
if [[ " $ROWS " == *" usnic_on "* && " $ROWS " == *" tcp "* ]]; then
    echo
    echo "Issue 26's goals for usnic with the controller on (medians; usnic vs btl/tcp):"
    goal "stream alone: goodput >= 0.9 x btl/tcp" "$(med usnic_on a_stream)" "$(med tcp a_stream)" "u >= 0.9 * t"
    goal "stream alone: resent <= 1 % of sent (vs the bound)" "$(med usnic_on a_resent)" 1 "u <= t"
    echo "  (not a goal: the stream beside the ping-pong, 4 ranks on 2 cores: $(med usnic_on stream) vs $(med tcp stream) MB/s, resent $(med usnic_on resent) %)"
    goal "ping-pong p99 <= btl/tcp's beside its stream" "$(med usnic_on p99)" "$(med tcp p99)" "u <= t"
    goal "share beside TCP cubic within 0.5..2 (vs btl/tcp's share)" "$(med usnic_on b_share)" "$(med tcp b_share)" "u >= 0.5 && u <= 2"
    goal "incast 2->1 aggregate >= 0.9 x btl/tcp" "$(med usnic_on i2_agg)" "$(med tcp i2_agg)" "u >= 0.9 * t"
    goal "incast 2->1 Jain >= 0.9 (vs btl/tcp's)" "$(med usnic_on i2_jain)" "$(med tcp i2_jain)" "u >= 0.9"
    goal "incast 4->1 aggregate >= 0.9 x btl/tcp" "$(med usnic_on i4_agg)" "$(med tcp i4_agg)" "u >= 0.9 * t"
    goal "incast 4->1 Jain >= 0.9 (vs btl/tcp's)" "$(med usnic_on i4_jain)" "$(med tcp i4_jain)" "u >= 0.9"
fi
echo
echo "runs: ${RUNS_CSV#$REPO_DIR/}, logs: ${LOG_DIR#$REPO_DIR/}; $((SECONDS - START)) s; $FAILED failed run(s)"
[[ $FAILED -eq 0 ]]
