#!/usr/bin/env bash
#
# run-stamps-test.sh - the socket wire's arrival stamps follow bulk data.
#
# The kernel's receive timestamps (SO_TIMESTAMPING) give the congestion
# control the arrival of a datagram before any wait for the process
# (btl_usnic_wire_sock.c, "arrival stamps"); they cost every receive, so
# the wire turns them on only while batches flow and off 50 ms after.
# 2 ranks on loopback (--mca btl_usnic_stats 3600: each rank's final
# counters), test/faults/stamps.c (every byte checked):
#   - an 8-byte ping-pong, 20000 round trips: no batches, so (nearly) no
#     receive takes a stamp: stamped_recvs at most 1 % of total_recvs on
#     each rank
#   - a stream of 200 messages of 1 MiB: the receiver's data and the
#     sender's ACKs are stamped: on the receiver stamped_recvs at least
#     half of total_recvs, on the sender more than none, and each rank
#     switched them on (stamp_switches >= 2: off at the first pass, on
#     with the first batch)
#   - the same stream with btl_usnic_congestion_control 0: nothing uses
#     arrivals, so stamp_switches, stamped_recvs and unknown_arrivals are
#     0 on both ranks
#   - stream and ping-pong in turn (100 rounds of one 1 MiB message and
#     20 round trips, each round well within the 50 ms the stamps stay on):
#     the ping-pong's receives take the fast path, and on each rank more
#     receives are stamped than went another way (stamped_recvs >
#     total_recvs - fast_recvs): the fast path's stamps arrive (its
#     control buffer once had room for SO_TIMESTAMPNS's one timestamp,
#     not SO_TIMESTAMPING's three: 0.5 % of rank 0's receives stamped;
#     with room 40-45 %)
#   - the host's switch: a socket that asks for receive stamps makes the
#     kernel stamp every packet of the host on arrival, whoever it is
#     for; turning the stamps off must let that go (SO_TIMESTAMPNS, once
#     on, held it until the socket closed).  hoststamp.c sees the switch
#     from outside: it asks for no stamps itself and reports those its own
#     loopback datagrams already carry.  During a ping-pong of 200000
#     round trips (seconds; the ranks' sockets want stamps only from their
#     opening to their first pass without batches) at most 20 % of its
#     samples are stamped (it was 100 % of those taken while the sockets
#     were open), and, as a control that the probe sees the switch, some
#     are during a stream.  NOT RUN when something else on the host
#     holds the switch before the job (a time daemon, say).
# The ofi wire has no such stamps: under USNIC_WIRE=ofi every check is
# NOT RUN.  About 15 s.
#
# Environment: FAULT_TEST_BUILD_DIR (build and logs; default
# test/faults/build/<series>), USNIC_WIRE (test/lib.sh).

set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/../lib.sh"  # series_dir, WIRE_ARGS, print_wire
BUILD=${FAULT_TEST_BUILD_DIR:-$(series_dir "$HERE/build")}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$HERE/../report.sh"
print_wire
mkdir -p "$BUILD/logs"

CASES=("ping-pong takes no stamps" "a stream takes stamps on both ranks" "controller off: no stamps at all"
       "the fast path's receives take stamps while they are on" "a ping-pong leaves the host's packets unstamped" "the probe sees the host's stamps during a stream")
if [[ "${USNIC_WIRE:-}" == ofi ]]; then
    for c in "${CASES[@]}"; do not_run "$c" "arrival stamps are the socket wire's (USNIC_WIRE=ofi)"; done
    finish
fi
if ! mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/stamps" "$HERE/stamps.c" > "$BUILD/logs/stamps-build.log" 2>&1 ||
   ! cc -O2 -Wall -Wextra -Werror -o "$BUILD/hoststamp" "$HERE/hoststamp.c" >> "$BUILD/logs/stamps-build.log" 2>&1; then
    fail "build stamps and hoststamp" "the compiler failed" "$BUILD/logs/stamps-build.log"
    finish
fi

# run NAME MODE N [MPIRUN ARGS...]: one job; LOG, RC, and per rank R the
# counters S_SWITCH[R], S_STAMPED[R], S_UNKNOWN[R], S_TOTAL[R], S_FAST[R] (0 when absent)
run() {
    LOG=$BUILD/logs/stamps-$1.log
    local mode=$2 n=$3
    shift 3
    timeout 120 mpirun --allow-run-as-root -np 2 --bind-to none --mca pml ob1 --mca btl usnic,self \
        --mca btl_usnic_if_include lo --mca btl_usnic_stats 3600 ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"} "$@" \
        "$BUILD/stamps" "$mode" "$n" > "$LOG" 2>&1
    RC=$?
    for r in 0 1; do
        local line
        line=$(grep 'final stats' "$LOG" | grep -v ' peer ' | grep " rank $r ")
        S_SWITCH[r]=$(counter "$line" stamp_switches)
        S_STAMPED[r]=$(counter "$line" stamped_recvs)
        S_UNKNOWN[r]=$(counter "$line" unknown_arrivals)
        S_TOTAL[r]=$(counter "$line" total_recvs)
        S_FAST[r]=$(counter "$line" fast_recvs)
    done
    grep -q '^PASS stamps' "$LOG" && [[ $RC -eq 0 ]] && [[ $(grep -c 'final stats' "$LOG") -ge 2 ]]
}
counter() { grep -oE " $2=[0-9]+" <<< "$1" | cut -d= -f2 | awk '{v = $1} END {print v + 0}'; }
said() { echo "rank 0: switches ${S_SWITCH[0]} stamped ${S_STAMPED[0]} unknown ${S_UNKNOWN[0]} of ${S_TOTAL[0]}; rank 1: switches ${S_SWITCH[1]} stamped ${S_STAMPED[1]} unknown ${S_UNKNOWN[1]} of ${S_TOTAL[1]}"; }

if ! run pingpong pingpong 20000; then
    fail "${CASES[0]}" "exit $RC, no PASS line or no final counters" "$LOG"
elif [[ ${S_TOTAL[0]} -lt 20000 || ${S_TOTAL[1]} -lt 20000 ]]; then
    fail "${CASES[0]}" "fewer receives than round trips: $(said)" "$LOG"
elif [[ $((S_STAMPED[0] * 100)) -gt ${S_TOTAL[0]} || $((S_STAMPED[1] * 100)) -gt ${S_TOTAL[1]} ]]; then
    fail "${CASES[0]}" "more than 1 % of the receives stamped: $(said)" "$LOG"
else
    ok "${CASES[0]}: $(said)"
fi

if ! run stream stream 200; then
    fail "${CASES[1]}" "exit $RC, no PASS line or no final counters" "$LOG"
elif [[ $((S_STAMPED[1] * 2)) -lt ${S_TOTAL[1]} || ${S_STAMPED[0]} -eq 0 || ${S_SWITCH[0]} -lt 2 || ${S_SWITCH[1]} -lt 2 ]]; then
    fail "${CASES[1]}" "want the receiver's receives half stamped at least, the sender's some, both switched on: $(said)" "$LOG"
else
    ok "${CASES[1]}: $(said)"
fi

if ! run nocc stream 50 --mca btl_usnic_congestion_control 0; then
    fail "${CASES[2]}" "exit $RC, no PASS line or no final counters" "$LOG"
elif [[ $((S_SWITCH[0] + S_SWITCH[1] + S_STAMPED[0] + S_STAMPED[1] + S_UNKNOWN[0] + S_UNKNOWN[1])) -ne 0 ]]; then
    fail "${CASES[2]}" "$(said)" "$LOG"
else
    ok "${CASES[2]}: $(said)"
fi

if ! run mixed mixed 100; then
    fail "${CASES[3]}" "exit $RC, no PASS line or no final counters" "$LOG"
elif [[ ${S_FAST[0]} -lt 1000 || ${S_FAST[1]} -lt 1000 ]]; then
    fail "${CASES[3]}" "want 1000 fast-path receives on each rank at least, got ${S_FAST[0]} and ${S_FAST[1]}" "$LOG"
elif [[ ${S_STAMPED[0]} -le $((S_TOTAL[0] - S_FAST[0])) || ${S_STAMPED[1]} -le $((S_TOTAL[1] - S_FAST[1])) ]]; then
    fail "${CASES[3]}" "no more stamped than other receives (fast ${S_FAST[0]} and ${S_FAST[1]}): $(said)" "$LOG"
else
    ok "${CASES[3]}: fast ${S_FAST[0]} and ${S_FAST[1]}; $(said)"
fi

# watched NAME MODE N: run NAME MODE N with hoststamp sampling throughout;
# sets STAMPED and SAMPLES
watched() {
    "$BUILD/hoststamp" 300 > "$BUILD/logs/hoststamp-$1.log" 2>&1 &
    local probe=$!
    run "$@"
    local ran=$?
    kill -TERM "$probe" 2>/dev/null
    wait "$probe"
    read -r STAMPED SAMPLES < <(sed -nE 's/^hoststamp: ([0-9]+) of ([0-9]+) samples stamped$/\1 \2/p' \
                                    "$BUILD/logs/hoststamp-$1.log")
    STAMPED=${STAMPED:-0}
    SAMPLES=${SAMPLES:-0}
    return $ran
}
baseline=$("$BUILD/hoststamp" 0.3 2>&1)
if [[ "$baseline" != "hoststamp: 0 of "* ]]; then
    for c in "${CASES[@]:4}"; do not_run "$c" "before the job: '$baseline' (another socket of this host wants stamps)"; done
    finish
fi
if ! watched hostwide pingpong 200000; then
    fail "${CASES[4]}" "exit $RC, no PASS line or no final counters" "$LOG"
elif [[ $SAMPLES -lt 20 || $((STAMPED * 5)) -gt $SAMPLES ]]; then
    fail "${CASES[4]}" "$STAMPED of $SAMPLES samples stamped (want at least 20 samples, at most 20 % stamped)" "$LOG"
else
    ok "${CASES[4]}: $STAMPED of $SAMPLES samples stamped; $(said)"
fi
if ! watched control stream 400; then
    fail "${CASES[5]}" "exit $RC, no PASS line or no final counters" "$LOG"
elif [[ $STAMPED -eq 0 ]]; then
    fail "${CASES[5]}" "0 of $SAMPLES samples stamped" "$LOG"
else
    ok "${CASES[5]}: $STAMPED of $SAMPLES samples stamped"
fi
finish
