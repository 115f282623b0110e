#!/usr/bin/env bash
#
# run-path-tests.sh - issue 25 across simulated hosts: the path between
# two hosts at MTU 9000 (test/hosts/hosts.sh, HOSTS_GSO=soft so the switch
# sees every datagram as the packet a wire would carry) changes under a
# running job, and the job must not notice more than a short stall.
# One rank per host, rank 0 on host 1 streaming verified 1 MiB messages to
# rank 1 on host 2 (test/hosts/path_stream.c) over subnet 1 (veth1) only.
#
#   bash test/hosts/run-path-tests.sh                 # the default wire
#   USNIC_WIRE=ofi bash test/hosts/run-path-tests.sh
#
# Cases (each check can fail; what cannot run says NOT RUN):
#   icmp-precondition  the forged ICMP of the attack (test/hosts/
#                  icmp_spray.c, from an attacker namespace on br1) lowers
#                  host 1's route MTU to host 2 to 552 when a UDP socket
#                  of host 1 is bound to the quoted port, and does nothing
#                  when none is
#   blackhole      with btl_usnic_peer_timeout 3, mid-run (BH_AT s after
#                  the stream started) for BH_FOR s the switch
#                  drops every UDP packet longer than BH_LEN bytes (IP
#                  length; nftables in the switch namespace's bridge
#                  forward hook, no ICMP): the job completes (PASS, every
#                  byte verified, no peer-timeout or unreachable message),
#                  pmtu_blackholes >= 1 and a "datagrams lowered" line,
#                  the un-ACKed large segments resent as pieces
#                  (pieces_sent on rank 0, pieces_reassembled on rank 1);
#                  the stream runs again within RECOVER_MS of the hole
#                  (the first message verified after rank 0 lowered
#                  its size; path_timeline.awk) and the longest gap
#                  between verified messages is printed
#   blackhole-lifted   BH_FOR s later the rule goes: the sender's
#                  last pmtu_raised rise comes within REPROBE_MS +
#                  RAISE_SLACK_MS of it (btl_usnic_pmtu_reprobe
#                  REPROBE_MS) and the last peer line says dgram = max
#   blackhole-control  the same hole with btl_usnic_pmtu_discovery 0
#                  (the old behaviour) and btl_usnic_peer_timeout 3: the
#                  job must fail with a usnic peer-timeout message
#   link-1280      the switch's ports toward both hosts on subnet 2 at
#                  MTU 1280 from the start (hosts still say 9000; the
#                  job on veth2, since mpirun's TCP runs on subnet 1):
#                  PASS, dgram <= 1252 at the end
#   icmp-attack    the attacker sprays "fragmentation needed, MTU 552" for
#                  every ephemeral port of host 1 (quoting host 1 -> host
#                  2) from before the job to its end: the route MTU shows
#                  552 during the job, and the job completes at full size
#                  (final dgram = max, no "datagrams lowered", no
#                  pmtu_lowered)
#   icmp-control-during, icmp-control-before   the same attack started 1 s
#                  into the stream / before the job, with
#                  btl_usnic_pmtu_discovery 0 and btl_usnic_peer_timeout
#                  3: the job must fail ("during": with a usnic peer-timeout
#                  message) (socket wire only:
#                  the ofi wire's sockets are libfabric's udp provider's,
#                  which fragment locally to an ICMP-lowered route MTU, so
#                  the attack never killed that wire: NOT RUN there)
#
# The per-peer "dgram=" and "max=" come from the last periodic statistics
# line (btl_usnic_stats 1).  Environment: PATH_CASES (the case names to
# run, default all), USNIC_WIRE (test/lib.sh; ofi: black hole at 1400 bytes,
# since the udp provider's datagrams are 1472 + 28 at most), HOSTS_GSO
# (default soft; the suite needs it), BH_LEN (1500 socket wire, 1400 ofi),
# BH_AT (1.5 s), BH_FOR (3.5 s: longer than the peer timeout of 3 s
# the case runs with, as its control does), REPROBE_MS (1500),
# RAISE_SLACK_MS (1500), RECOVER_MS (2000), STREAM_SECONDS (9), TEST_TIMEOUT (60 s per job),
# HOSTS_BUILD_DIR, MPICC, MPIRUN.  Output: ok/FAIL/NOT RUN lines, the
# recovery figures, and "N passed, N failed[, N not run]".

set -u
set -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
AGENT=$SCRIPT_DIR/ns-agent.sh
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
BH_AT=${BH_AT:-1.5}
BH_FOR=${BH_FOR:-3.5}
REPROBE_MS=${REPROBE_MS:-1500}
RAISE_SLACK_MS=${RAISE_SLACK_MS:-1500}
RECOVER_MS=${RECOVER_MS:-2000}
STREAM_SECONDS=${STREAM_SECONDS:-9}
CONTROL_PEER_TIMEOUT=3
export HOSTS_MTU=9000
export HOSTS_GSO=${HOSTS_GSO-soft}
# shellcheck source=../lib.sh
. "$SCRIPT_DIR/../lib.sh"
use_build_dir "${HOSTS_BUILD_DIR:-$SCRIPT_DIR/build}" "logs-path-$WIRE_NAME"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=hosts.sh
source "$SCRIPT_DIR/hosts.sh"
# shellcheck source=../report.sh
source "$SCRIPT_DIR/../report.sh"

print_wire
case "$WIRE_NAME" in
    ofi) WIRE=ofi BH_LEN=${BH_LEN:-1400} ;;
    *) WIRE=socket BH_LEN=${BH_LEN:-1500} ;;   # auto/default: the socket wire on these veths
esac
echo "path tests: $WIRE wire, black hole = UDP packets over $BH_LEN bytes dropped in the switch; btl_usnic_pmtu_reprobe $REPROBE_MS"

if [ "${HOSTS_GSO:-}" != soft ]; then
    # without it one GSO send crosses the bridge as one 64 KB packet: a
    # length rule would drop runs of small datagrams too (measured)
    not_run "every case" "HOSTS_GSO=${HOSTS_GSO:-unset}: the switch would see GSO batches, not packets (use soft)"
    finish
fi

# ---------------------------------------------------------------------
# Build, hosts, attacker
# ---------------------------------------------------------------------
if ! "$MPICC" -Wall -Wextra -Werror -O2 -g -o "$BUILD_DIR/path_stream" "$SCRIPT_DIR/path_stream.c" \
        > "$LOG_DIR/build.log" 2>&1 ||
   ! cc -O2 -Wall -Wextra -Werror -o "$BUILD_DIR/icmp_spray" "$SCRIPT_DIR/icmp_spray.c" >> "$LOG_DIR/build.log" 2>&1 ||
   ! cc -O2 -Wall -Wextra -Werror -o "$BUILD_DIR/xhost_stream" "$SCRIPT_DIR/xhost_stream.c" >> "$LOG_DIR/build.log" 2>&1; then
    fail "build path_stream, icmp_spray, xhost_stream" "compiler failed" "$LOG_DIR/build.log"
    finish
fi

HOSTFILE=$BUILD_DIR/hostfile-path
if ! hosts_setup 2 "$HOSTFILE" "$LOG_DIR/hosts.log"; then
    fail "setup 2 hosts" "$WHY" "$LOG_DIR/hosts.log"
    finish
fi
H1=${HOSTS[0]}
H2=${HOSTS[1]}
ATT=$HOSTS_PREFIX-at      # the attacker: its own namespace on br1
ATT_IP=$HOSTS_NET1.200
BG=()
path_cleanup() {
    local pid
    for pid in "${BG[@]}"; do kill "$pid" 2>/dev/null; done
    if [ -e "/run/netns/$ATT" ]; then
        for pid in $(ip netns pids "$ATT" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$ATT" 2>/dev/null
    fi
    hosts_destroy
}
trap path_cleanup EXIT
trap 'path_cleanup; exit 130' INT
trap 'path_cleanup; exit 143' TERM
if ! { ip netns add "$ATT" && ip -n "$ATT" link set lo up &&
       _hosts_link "$ATT" eth0 br1 atp1 "$ATT_IP/24" &&
       ip -n "$HOSTS_SW" link set atp1 mtu 9000 && ip -n "$ATT" link set eth0 mtu 9000; } > "$LOG_DIR/attacker.log" 2>&1; then
    fail "setup attacker namespace" "ip failed" "$LOG_DIR/attacker.log"
    finish
fi
ok "setup hosts $H1 $H2, attacker $ATT ($ATT_IP)"
hosts_describe

BASE_ARGS=(--allow-run-as-root --hostfile "$HOSTFILE" --map-by node --bind-to none
           $(rsh_agent_args "$AGENT") $(oob_net_args "$HOSTS_NET1.0/24"))
# statistics every second: the per-peer lines (dgram=, max=) of the
# job's own peers are printed periodically (at finalize the endpoints of
# MPI_COMM_WORLD are already gone), so the last periodic line is the size
# at the end
USNIC_ARGS=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_stats 1 --mca btl_usnic_verbose 2
            ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"})
IFACE=veth1     # the interface the jobs use (link-1280: veth2)
CASES=${PATH_CASES:-"icmp-precondition blackhole blackhole-control link-1280 icmp-attack icmp-control"}
want() { [[ " $CASES " == *" $1 "* ]]; }
SIZE=1048576

# ---------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------
wall() { date +%s.%N; }
fadd() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", a + b }'; }
sleep_until() { local d; d=$(awk -v t="$1" -v n="$(wall)" 'BEGIN { d = t - n; printf "%.3f", (d > 0 ? d : 0) }'); sleep "$d"; }

# start_job NAME SECONDS ARGS...: path_stream in the background (JOB_PID),
# its log LOG, ready file READY, times prefix TIMES
start_job() {
    local name=$1 secs=$2 NS_ARGV
    shift 2
    LOG=$LOG_DIR/$name.log READY=$LOG_DIR/$name.ready TIMES=$LOG_DIR/$name.times
    rm -f "$READY" "$TIMES".r0 "$TIMES".r1
    ns_argv "$HOSTS_HEAD"
    JOB_START=$(wall)
    timeout -k 10 "$TEST_TIMEOUT" "${NS_ARGV[@]}" "$MPIRUN" "${BASE_ARGS[@]}" -np 2 "${USNIC_ARGS[@]}" \
        --mca btl_usnic_if_include "$([ "$IFACE" = veth1 ] && echo "$HOSTS_NET1" || echo "$HOSTS_NET2").0/24" "$@" \
        "$BUILD_DIR/path_stream" --seconds "$secs" --ready "$READY" --times "$TIMES" > "$LOG" 2>&1 < /dev/null &
    JOB_PID=$!
}
# wait_ready: the stream started (T0 = its time); 1 if the job ended first
wait_ready() {
    local i
    for i in $(seq 1 400); do
        [ -s "$READY" ] && { T0=$(cat "$READY"); return 0; }
        kill -0 "$JOB_PID" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
end_job() { wait "$JOB_PID"; RC=$?; [ "$RC" -eq 137 ] && RC=124; SECS=$(elapsed "$JOB_START"); }

# rank 0's final statistics toward rank 1: DGRAM, DMAX; module counters
# STAT_<name> via stat_of NAME
peer_sizes() {
    local line
    line=$(grep -a -E "periodic stats \[[^]]* rank 0 $IFACE\] peer " "$LOG" | tail -1)
    DGRAM=$(sed -nE 's/.* dgram=([0-9]+) .*/\1/p' <<< "$line")
    DMAX=$(sed -nE 's/.* max=([0-9]+) .*/\1/p' <<< "$line")
}
stat_of() {     # NAME [RANK]: the counter on rank RANK's (0) module line
    grep -a -E "final stats \[[^]]* rank ${2:-0} $IFACE\]:" "$LOG" | tail -1 | sed -nE "s/.* $1=([0-9]+).*/\\1/p" | head -1
}
# usnic failure messages ([peer timeout], [peer unreachable] of
# help-mpi-btl-usnic.txt)
bad_msgs() { grep -a -cE "has not acknowledged any data|could not send to a peer any more" "$LOG"; }
passed() { [ "$RC" -eq 0 ] && grep -a -q '^PASS path_stream' "$LOG"; }
timeline() {
    awk -v ready="$T0" -v on="$1" -v off="$2" -v size="$SIZE" -f "$SCRIPT_DIR/path_timeline.awk" \
        "$TIMES".r1 "$TIMES".r0 2>/dev/null
}
kv() { sed -nE "s/.*(^| )$1=([^ ]+).*/\\2/p" <<< "$2"; }

# ---------------------------------------------------------------------
# icmp-precondition: does the forged ICMP take, and when?
# ---------------------------------------------------------------------
route_mtu() { ip -n "$H1" route get "$HOSTS_NET1.2" | sed -nE 's/.* mtu ([0-9]+).*/\1/p'; }
PORTS=$(ip netns exec "$H1" cat /proc/sys/net/ipv4/ip_local_port_range | awk '{ print $1 "-" $2 }')
spray() { ip netns exec "$ATT" "$BUILD_DIR/icmp_spray" "$HOSTS_NET1.1" "$HOSTS_NET1.1" "$HOSTS_NET1.2" "$@"; }
# spray_bg LOG: every ephemeral port, until killed (SPRAY_PID: the
# sprayer itself, not a subshell, so that kill stops it)
spray_bg() {
    ip netns exec "$ATT" "$BUILD_DIR/icmp_spray" "$HOSTS_NET1.1" "$HOSTS_NET1.1" "$HOSTS_NET1.2" \
        --ports "$PORTS" --seconds $((TEST_TIMEOUT + 10)) > "$1" 2>&1 &
    SPRAY_PID=$!
    BG+=("$SPRAY_PID")
}
if want icmp-precondition; then
name="icmp-precondition (forged 'fragmentation needed, MTU 552' quoting $HOSTS_NET1.1 -> $HOSTS_NET1.2)"
plog=$LOG_DIR/icmp-precondition.log
{
    ip -n "$H1" route flush cache
    spray --ports 40001-40001
    sleep 0.1
    echo "no socket on port 40001: route mtu '$(route_mtu)'"
    timeout 5 ip netns exec "$H1" "$BUILD_DIR/xhost_stream" udp-recv "$HOSTS_NET1.1" 40000 --timeout 3 > /dev/null &
    rp=$!
    sleep 0.3
    spray --ports 40000-40000
    sleep 0.1
    echo "a socket bound to $HOSTS_NET1.1:40000: route mtu '$(route_mtu)'"
    kill "$rp" 2>/dev/null; wait "$rp" 2>/dev/null
    ip -n "$H1" route get "$HOSTS_NET1.2"
    ip -n "$H1" route flush cache
    echo "after 'ip route flush cache': route mtu '$(route_mtu)'"
} > "$plog" 2>&1
if grep -a -q "no socket on port 40001: route mtu ''" "$plog" &&
   grep -a -q "bound to $HOSTS_NET1.1:40000: route mtu '552'" "$plog" &&
   grep -a -q "after 'ip route flush cache': route mtu ''" "$plog"; then
    ok "$name: ignored without a matching UDP socket; with one bound to the quoted port, host 1's route to $HOSTS_NET1.2 says mtu 552 (for 10 min; 'ip route flush cache' clears it); ephemeral ports $PORTS"
else
    fail "$name" "the route did not change as expected" "$plog"
fi
fi

# ---------------------------------------------------------------------
# blackhole, blackhole-lifted, blackhole-control
# ---------------------------------------------------------------------
run_blackhole() {   # NAME SECONDS LIFT(0|1) ARGS...: sets T0, T_ON, T_OFF, DROPPED
    local name=$1 secs=$2 lift=$3
    shift 3
    hosts_blackhole_off
    start_job "$name" "$secs" "$@"
    T0=0 T_ON=0 T_OFF=0 DROPPED=0
    if wait_ready; then
        sleep_until "$(fadd "$T0" "$BH_AT")"
        hosts_blackhole_on "$BH_LEN" >> "$LOG_DIR/nft.log" 2>&1
        T_ON=$(wall)
        if [ "$lift" = 1 ]; then
            sleep_until "$(fadd "$T_ON" "$BH_FOR")"
            DROPPED=$(hosts_blackhole_dropped)
            hosts_blackhole_off
            T_OFF=$(wall)
        fi
    fi
    end_job
    [ "$lift" = 1 ] || { DROPPED=$(hosts_blackhole_dropped); hosts_blackhole_off; }
    echo "    stream started $T0, black hole at +$(awk -v a="$T0" -v b="$T_ON" 'BEGIN { printf "%.3f", b - a }') s$([ "$T_OFF" != 0 ] && awk -v a="$T0" -v b="$T_OFF" 'BEGIN { printf ", lifted at +%.3f s", b - a }')"
}

if want blackhole; then
name="blackhole (UDP > $BH_LEN B dropped mid-run, no ICMP)"
# the same short peer timeout as the control, shorter than the hole: a
# job that stalled for good would be declared dead here too
run_blackhole blackhole "$STREAM_SECONDS" 1 --mca btl_usnic_pmtu_reprobe "$REPROBE_MS" \
    --mca btl_usnic_peer_timeout "$CONTROL_PEER_TIMEOUT"
TL=$(timeline "$T_ON" "$T_OFF")
peer_sizes
holes=$(stat_of pmtu_blackholes)
psent=$(stat_of pieces_sent 0)
preas=$(stat_of pieces_reassembled 1)
rec=$(kv recover_ms "$TL")
echo "    timeline: $TL"
# the lowering caused by the hole: a "datagrams lowered" line printed
# after the rule went on is not told apart by the log, so the counter's
# time (rank 0, MPI_T) says it: lowered_ms >= 0
low=$(kv lowered_ms "$TL")
if [ "$T_ON" = 0 ]; then
    fail "$name (${SECS}s)" "the stream never started (exit $RC)" "$LOG"
elif ! passed; then
    fail "$name (${SECS}s)" "exit $RC, no PASS ($(bad_msgs) usnic failure message(s)); $DROPPED packets dropped" "$LOG"
elif [ "$(bad_msgs)" -ne 0 ]; then
    fail "$name (${SECS}s)" "PASS, but $(bad_msgs) peer-timeout/unreachable message(s)" "$LOG"
elif [ "$DROPPED" -eq 0 ]; then
    fail "$name (${SECS}s)" "the rule dropped nothing: the case tested nothing" "$LOG"
elif [ "${holes:-0}" -lt 1 ] || ! grep -a -q "datagrams lowered" "$LOG" || ! awk -v l="$low" 'BEGIN { exit !(l >= 0) }'; then
    fail "$name (${SECS}s)" "pmtu_blackholes=${holes:-none}, $(grep -a -c 'datagrams lowered' "$LOG") 'datagrams lowered' line(s), lowered ${low} ms after the hole" "$LOG"
elif ! awk -v r="$rec" -v b="$RECOVER_MS" 'BEGIN { exit !(r >= 0 && r <= b) }'; then
    fail "$name (${SECS}s)" "recovery took ${rec} ms (bound $RECOVER_MS ms)" "$LOG"
elif [ "${psent:-0}" -eq 0 ] || [ "${preas:-0}" -eq 0 ]; then
    fail "$name (${SECS}s)" "pieces_sent=${psent:-0} on rank 0, pieces_reassembled=${preas:-0} on rank 1: the un-ACKed large segments were not resent as pieces" "$LOG"
else
    ok "$name (${SECS}s): PASS, $DROPPED packets dropped, pmtu_blackholes=$holes, pieces_sent=$psent (rank 0), pieces_reassembled=$preas (rank 1); size lowered ${low} ms after the hole, stream ran again ${rec} ms after it (bound $RECOVER_MS; longest gap $(kv stall_ms "$TL") ms): '$(grep -a -o 'datagrams lowered.*' "$LOG" | tail -1)'"
fi
name="blackhole-lifted (btl_usnic_pmtu_reprobe $REPROBE_MS)"
raised=$(kv raised_ms "$TL")
if [ "$T_OFF" = 0 ] || ! passed; then
    fail "$name" "the black-hole job did not complete (above)"
elif ! awk -v r="$raised" -v b="$((REPROBE_MS + RAISE_SLACK_MS))" 'BEGIN { exit !(r >= 0 && r <= b) }'; then
    fail "$name" "last raise ${raised} ms after the hole was lifted (bound $REPROBE_MS + $RAISE_SLACK_MS ms)" "$LOG"
elif [ -z "$DGRAM" ] || [ "$DGRAM" != "$DMAX" ]; then
    fail "$name" "last periodic peer line: dgram=${DGRAM:-?} max=${DMAX:-?}" "$LOG"
else
    ok "$name: back at full size ${raised} ms after the hole was lifted (the last raise; bound $REPROBE_MS + $RAISE_SLACK_MS), dgram=$DGRAM max=$DMAX at the end: '$(grep -a -o "datagrams raised.* to $DMAX bytes.*" "$LOG" | tail -1)'"
fi
fi

if want blackhole-control; then
name="blackhole-control (btl_usnic_pmtu_discovery 0, peer_timeout $CONTROL_PEER_TIMEOUT)"
run_blackhole blackhole-control "$STREAM_SECONDS" 0 --mca btl_usnic_pmtu_discovery 0 \
    --mca btl_usnic_peer_timeout "$CONTROL_PEER_TIMEOUT"
if [ "$T_ON" = 0 ]; then
    fail "$name (${SECS}s)" "the stream never started (exit $RC)" "$LOG"
elif passed; then
    fail "$name (${SECS}s)" "the old behaviour survived the black hole: the case shows nothing" "$LOG"
elif [ "$RC" -eq 124 ]; then
    fail "$name (${SECS}s)" "hung until the ${TEST_TIMEOUT}s timeout" "$LOG"
elif ! grep -a -q "has not acknowledged any data" "$LOG"; then
    fail "$name (${SECS}s)" "exit $RC without a usnic peer-timeout message ([peer timeout])" "$LOG"
else
    ok "$name: the job DIED as issue 25 says (exit $RC, ${SECS}s, $DROPPED packets dropped): $(grep -a -c 'has not acknowledged any data' "$LOG") peer-timeout message(s)"
fi
fi

# ---------------------------------------------------------------------
# link-1280: the switch ports of subnet 2 at MTU 1280, the hosts at 9000
# (subnet 2: mpirun's own TCP runs on subnet 1, and a 1280-byte port
# there would black-hole it too)
# ---------------------------------------------------------------------
if want link-1280; then
name="link-1280 (switch ports h1p2 h2p2 at MTU 1280, hosts at 9000)"
if ip -n "$HOSTS_SW" link set h1p2 mtu 1280 && ip -n "$HOSTS_SW" link set h2p2 mtu 1280; then
    IFACE=veth2
    start_job link-1280 3
    wait_ready
    end_job
    ip -n "$HOSTS_SW" link set h1p2 mtu 9000
    ip -n "$HOSTS_SW" link set h2p2 mtu 9000
    peer_sizes
    lost=$(stat_of pmtu_probes_lost)
    IFACE=veth1
    if ! passed; then
        fail "$name (${SECS}s)" "exit $RC, no PASS" "$LOG"
    elif [ -z "$DGRAM" ] || [ "$DGRAM" -gt 1252 ]; then
        fail "$name (${SECS}s)" "dgram=${DGRAM:-?} at the end (want <= 1252)" "$LOG"
    else
        ok "$name (${SECS}s): PASS, $(grep -a -oE 'messages=[0-9]+ .*MBps=[0-9.]+' "$LOG" | tail -1), dgram=$DGRAM max=$DMAX at the end, pmtu_probes_lost=${lost:-0}"
    fi
else
    fail "$name" "cannot set the ports' MTU"
fi
fi

# ---------------------------------------------------------------------
# icmp-attack, icmp-control
# ---------------------------------------------------------------------
# run_icmp NAME WHEN ARGS...: WHEN=before: the spray runs from before the
# job to its end (a sweep of every port takes ~0.1 s, so it reaches the
# job's sockets as soon as they are bound); WHEN=during: it starts once
# the stream runs.  ROUTE_AT = seconds into the job at which host 1's
# route said mtu 552 (empty: never)
run_icmp() {
    local name=$1 when=$2 spid=0 wpid
    shift 2
    ip -n "$H1" route flush cache
    if [ "$when" = before ]; then
        spray_bg "$LOG_DIR/$name-spray.log"
        spid=$SPRAY_PID
        sleep 0.5
    fi
    start_job "$name" 5 "$@"
    ( while kill -0 "$JOB_PID" 2>/dev/null; do
          [ "$(route_mtu)" = 552 ] && { elapsed "$JOB_START"; exit 0; }
          sleep 0.1
      done ) > "$LOG_DIR/$name-route.txt" &
    wpid=$!
    if wait_ready && [ "$when" = during ]; then
        sleep 1
        spray_bg "$LOG_DIR/$name-spray.log"
        spid=$SPRAY_PID
    fi
    end_job
    wait "$wpid"
    [ "$spid" != 0 ] && { kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; }
    ROUTE_AT=$(cat "$LOG_DIR/$name-route.txt")
    ip -n "$H1" route flush cache
}

# IP fragments host 1's kernel made (Ip: FragCreates of /proc/net/snmp)
frag_creates() {
    ip netns exec "$H1" awk '/^Ip:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["FragCreates"] }' /proc/net/snmp
}

if want icmp-attack; then
name="icmp-attack (forged MTU 552 for ports $PORTS, before and during the job, defaults)"
frags0=$(frag_creates)
run_icmp icmp-attack before
frags=$(( $(frag_creates) - frags0 ))
peer_sizes
if [ -z "$ROUTE_AT" ]; then
    fail "$name (${SECS}s)" "host 1's route never said mtu 552: the attack did not take, the case shows nothing" "$LOG"
elif ! passed; then
    fail "$name (${SECS}s)" "exit $RC, no PASS" "$LOG"
elif [ "$(bad_msgs)" -ne 0 ] || grep -a -q "datagrams lowered" "$LOG" || [ -n "$(stat_of pmtu_lowered)" ]; then
    fail "$name (${SECS}s)" "PASS, but lowered or failure lines: $(grep -a -m1 -oE 'datagrams lowered.*|has not acknowledged.*' "$LOG")" "$LOG"
elif [ -z "$DGRAM" ] || [ "$DGRAM" != "$DMAX" ]; then
    fail "$name (${SECS}s)" "dgram=${DGRAM:-?} max=${DMAX:-?} at the end: not at full size" "$LOG"
else
    ok "$name: route said mtu 552 ${ROUTE_AT}s into the job; PASS at full size ($(grep -a -oE 'MBps=[0-9.]+' "$LOG" | tail -1), dgram=$DGRAM max=$DMAX at the end, nothing lowered, $frags IP fragments made by host 1's kernel; ${SECS}s)"
fi
fi

if want icmp-control; then
for when in during before; do
    name="icmp-control-$when (the attack $when the stream, btl_usnic_pmtu_discovery 0, peer_timeout $CONTROL_PEER_TIMEOUT)"
    if [ "$WIRE" = ofi ]; then
        not_run "$name" "the ofi wire's sockets are libfabric's udp provider's: Linux's default IP_PMTUDISC_WANT fragments locally to the lowered route MTU, so the attack never killed the ofi wire (test/hosts/README.md)"
        continue
    fi
    run_icmp "icmp-control-$when" "$when" --mca btl_usnic_pmtu_discovery 0 --mca btl_usnic_peer_timeout "$CONTROL_PEER_TIMEOUT"
    if [ -z "$ROUTE_AT" ]; then
        fail "$name (${SECS}s)" "host 1's route never said mtu 552: the control shows nothing" "$LOG"
    elif passed; then
        fail "$name (${SECS}s)" "the old behaviour survived the attack: the control shows nothing" "$LOG"
    elif [ "$RC" -eq 124 ]; then
        fail "$name (${SECS}s)" "hung until the ${TEST_TIMEOUT}s timeout" "$LOG"
    elif [ "$when" = during ] && ! grep -a -q "has not acknowledged any data" "$LOG"; then
        fail "$name (${SECS}s)" "exit $RC without a usnic peer-timeout message" "$LOG"
    else
        ok "$name: route said mtu 552 ${ROUTE_AT}s into the job; the job DIED (exit $RC, ${SECS}s): $(grep -a -m1 -oE 'has not acknowledged any data|connectivity checker sent UDP probes|Message too long|peer unreachable' "$LOG" || echo 'no usnic message')"
    fi
done
fi

finish
