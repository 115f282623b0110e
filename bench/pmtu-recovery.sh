#!/usr/bin/env bash
#
# Issue 25's benchmark row: goodput of a verified 1 MiB stream between two
# simulated hosts at MTU 9000 (test/hosts/hosts.sh, HOSTS_GSO=soft: the
# switch sees every datagram as the packet a wire would carry) before a
# black hole, while it recovers, settled below it, after the hole is
# lifted and after the size is back at full; and the time to recover.
# Must run as root.
#
#   bash bench/pmtu-recovery.sh                  # REPS=3, both wires: ~70 s
#   WIRES=socket REPS=5 bash bench/pmtu-recovery.sh
#
# Each run: test/hosts/path_stream.c, rank 0 on host 1 streaming 1 MiB
# messages (4 in flight, every byte checked by rank 1 on host 2) over
# veth1 for STREAM_SECONDS (9); BH_AT (1.5) s into the stream the switch's
# bridge starts dropping every UDP packet longer than the black hole's
# size (nftables, forward hook, no ICMP): 1500 bytes on the socket wire
# (8972-byte datagrams fall back), 1400 on the ofi wire (the udp
# provider's datagrams are 1472 bytes at most, so a 1500-byte hole would
# not touch them); BH_FOR (3.5) s later the rule goes.
# btl_usnic_pmtu_reprobe REPROBE_MS (1500).  The times come from the
# stream itself (the wall-clock time of every verified message, and of
# every change of rank 0's pmtu_lowered / pmtu_raised counters read
# through MPI_T; test/hosts/path_timeline.awk):
#   before      goodput from 0.5 s into the stream to the hole
#   first 250ms goodput over the first 250 ms of the hole (the stall, the
#               fall back and the pieces included)
#   holed       goodput from the recovery to the lifting (settled at the
#               size the search found below the hole)
#   lifted      goodput from the lifting to the size's last raise
#   raised      goodput from that raise (back at full size) to the end
#   recover ms  from the hole to the first message verified after rank
#               0 lowered its datagram size (the stream runs again)
#   lowered ms  from the hole to rank 0's pmtu_lowered rising
#   raise ms    from the lifting to rank 0's pmtu_raised rising for
#               the last time (back at full size)
# Per wire the median (min-max) over REPS runs.  A run that failed (no
# PASS, or no lowering) is listed and left out.  The VM has 2 cores and
# the stream needs both: other jobs on the machine move the goodputs
# (compare the phases of one run, not runs of different times).
#
# Environment: REPS (3), WIRES ("socket ofi"), STREAM_SECONDS (9), BH_AT
# (1.5), BH_FOR (3.5), REPROBE_MS (1500), RUN_TIMEOUT (60).  Logs in
# bench/build/pmtu-logs/, one row per run in bench/build/pmtu-runs.csv.
# Exit status 0 if every run succeeded.

set -u
set -o pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"          # REPO_DIR, test/lib.sh, median, field
# shellcheck source=../test/hosts/hosts.sh
. "$REPO_DIR/test/hosts/hosts.sh"
BUILD_DIR=$(series_dir "$BENCH_DIR/build")
LOG_DIR="$BUILD_DIR/pmtu-logs"
RUNS_CSV="$BUILD_DIR/pmtu-runs.csv"
AGENT="$REPO_DIR/test/hosts/ns-agent.sh"
TIMELINE="$REPO_DIR/test/hosts/path_timeline.awk"

REPS=${REPS:-3}
WIRES=${WIRES:-"socket ofi"}
STREAM_SECONDS=${STREAM_SECONDS:-9}
BH_AT=${BH_AT:-1.5}
BH_FOR=${BH_FOR:-3.5}
REPROBE_MS=${REPROBE_MS:-1500}
RUN_TIMEOUT=${RUN_TIMEOUT:-60}
SIZE=1048576

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
die() { echo "pmtu-recovery: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces, nftables)"
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "bad REPS '$REPS'"
for w in $WIRES; do [[ $w == socket || $w == ofi ]] || die "unknown wire '$w' (socket, ofi)"; done
for cmd in mpicc mpirun nft ip bridge ethtool unshare awk; do
    command -v "$cmd" >/dev/null || die "$cmd not found"
done
ompi_info 2>/dev/null | grep -q 'MCA btl: usnic' || die "Open MPI lists no usnic BTL"

START=$SECONDS
mkdir -p "$LOG_DIR" || die "cannot create $LOG_DIR"
rm -f "$LOG_DIR"/*
mpicc -O2 -Wall -Wextra -Werror -o "$BUILD_DIR/path_stream" "$REPO_DIR/test/hosts/path_stream.c" ||
    die "building path_stream failed"

HOSTFILE="$LOG_DIR/hostfile"
if ! HOSTS_MTU=9000 HOSTS_GSO=soft hosts_setup 2 "$HOSTFILE" "$LOG_DIR/hosts.log"; then
    cat "$LOG_DIR/hosts.log" >&2
    die "cannot build the hosts: $WHY"
fi
cleanup() { hosts_blackhole_off; hosts_destroy; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
wall() { date +%s.%N; }
fadd() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", a + b }'; }
sleep_until() { sleep "$(awk -v t="$1" -v n="$(wall)" 'BEGIN { d = t - n; printf "%.3f", (d > 0 ? d : 0) }')"; }

BASE_ARGS=(--allow-run-as-root --hostfile "$HOSTFILE" --map-by node --bind-to none
           $(rsh_agent_args "$AGENT") $(oob_net_args "$HOSTS_NET1.0/24")
           --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include "$HOSTS_NET1.0/24"
           --mca btl_usnic_pmtu_reprobe "$REPROBE_MS" --mca btl_usnic_stats 3600)
ns_argv "$HOSTS_HEAD"
NS_HEAD=("${NS_ARGV[@]}")

KEYS="gp_before gp_window gp_holed gp_lifted gp_raised recover_ms lowered_ms raised_ms"
echo "rep,wire,hole,$(tr ' ' ',' <<<"$KEYS")" > "$RUNS_CSV"
declare -A VALS      # wire,key -> values
FAILED=0
echo "pmtu-recovery: MTU 9000, HOSTS_GSO=soft, hole at +${BH_AT}s for ${BH_FOR}s, reprobe ${REPROBE_MS} ms, $REPS rep(s), wires: $WIRES"
for ((rep = 1; rep <= REPS; rep++)); do
    for wire in $WIRES; do
        hole=1500
        [[ $wire == ofi ]] && hole=1400
        log=$LOG_DIR/$wire-$rep.log ready=$LOG_DIR/$wire-$rep.ready times=$LOG_DIR/$wire-$rep.times
        hosts_blackhole_off
        timeout -k 10 "$RUN_TIMEOUT" "${NS_HEAD[@]}" mpirun "${BASE_ARGS[@]}" --mca btl_usnic_wire "$wire" -np 2 \
            "$BUILD_DIR/path_stream" --seconds "$STREAM_SECONDS" --ready "$ready" --times "$times" \
            > "$log" 2>&1 < /dev/null &
        pid=$!
        T0="" T_ON=0 T_OFF=0
        for _ in $(seq 1 400); do
            [[ -s $ready ]] && { T0=$(cat "$ready"); break; }
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        if [[ -n $T0 ]]; then
            sleep_until "$(fadd "$T0" "$BH_AT")"
            hosts_blackhole_on "$hole" >> "$LOG_DIR/nft.log" 2>&1
            T_ON=$(wall)
            sleep_until "$(fadd "$T_ON" "$BH_FOR")"
            hosts_blackhole_off
            T_OFF=$(wall)
        fi
        wait "$pid"
        rc=$?
        tl=""
        [[ -n $T0 ]] && tl=$(awk -v ready="$T0" -v on="$T_ON" -v off="$T_OFF" -v size="$SIZE" -v win=0.25 \
                              -f "$TIMELINE" "$times.r1" "$times.r0" 2>/dev/null)
        if [[ $rc -ne 0 ]] || ! grep -q '^PASS path_stream' "$log" || [[ $(field lowered_ms " $tl") == -1.0 || -z $tl ]]; then
            echo "  rep $rep $wire: FAILED (exit $rc; $tl; see ${log#$REPO_DIR/})"
            FAILED=$((FAILED + 1))
            continue
        fi
        row="$rep,$wire,$hole"
        for k in $KEYS; do
            v=$(field "$k" " $tl")
            row+=",$v"
            [[ $v != - && $v != -1.0 ]] && VALS[$wire,$k]+="$v "
        done
        echo "$row" >> "$RUNS_CSV"
        echo "  rep $rep $wire (hole > $hole B): $tl"
    done
done

# median (min-max) of the values of wire,key
cell() {
    local v=${VALS[$1,$2]:-}
    [[ -z $v ]] && { echo "-"; return; }
    local med lo hi
    med=$(median <<<"$v")
    lo=$(tr ' ' '\n' <<<"$v" | grep . | sort -g | head -1)
    hi=$(tr ' ' '\n' <<<"$v" | grep . | sort -g | tail -1)
    if [[ $lo == "$hi" ]]; then printf '%s' "$med"; else printf '%s (%s-%s)' "$med" "$lo" "$hi"; fi
}
echo
echo "1 MiB stream across two hosts at MTU 9000, black hole mid-run: goodput MB/s (10^6 B/s) and times in ms, median (min-max) of $REPS run(s)"
echo
echo "| wire (hole) | before | first 250 ms of the hole | holed (settled) | lifted, before the raise | raised again | recover ms | lowered ms | raise ms (reprobe $REPROBE_MS) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for wire in $WIRES; do
    hole=1500
    [[ $wire == ofi ]] && hole=1400
    printf '| %s (> %s B) |' "$wire" "$hole"
    for k in $KEYS; do printf ' %s |' "$(cell "$wire" "$k")"; done
    echo
done
echo
echo "runs: ${RUNS_CSV#$REPO_DIR/}, logs: ${LOG_DIR#$REPO_DIR/}; $((SECONDS - START)) s; $FAILED failed run(s)"
[[ $FAILED -eq 0 ]]
