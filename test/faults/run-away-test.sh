#!/usr/bin/env bash
#
# The away thread (btl_usnic_away.c, btl_usnic_away_resend): a rank that
# sends a message and then stays out of MPI must not leave a lost copy of
# it unrepaired until it comes back.  In a private network namespace an
# nftables rule drops the first transmission of every 333-byte message
# (datagrams of that size without the header's RETX flag); rank 0 sends 5
# of them, each followed by PAUSE_MS ms away from MPI (test/faults/away.c).
#
#   default (away_resend 100 ms)  every message arrives well before rank 0
#                                 is back: max lateness < LATE_MAX_MS, and
#                                 rank 0 counted away_resends
#   btl_usnic_away_resend 0       the control: a lost copy waits for rank 0
#                                 to come back (lateness >= PAUSE_MS - 50),
#                                 which shows the test can fail
# Both must verify the data.  Ends with "N passed, N failed".
#
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"  # USNIC_OMPI (the Open MPI series), series_dir
BUILD=${FAULT_TEST_BUILD_DIR:-$(series_dir "$HERE/build")}
COUNT=${COUNT:-5}
PAUSE_MS=${PAUSE_MS:-700}
LATE_MAX_MS=${LATE_MAX_MS:-450}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=../report.sh
source "$HERE/../report.sh"
# shellcheck source=netns.sh
source "$HERE/netns.sh"
print_wire
mkdir -p "$BUILD/logs"
if ! mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/away" "$HERE/away.c" > "$BUILD/logs/away-build.log" 2>&1; then
    fail "build away" "mpicc failed" "$BUILD/logs/away-build.log"
    finish
fi

# The first copy of each message: UDP length = 8 + 52 (our header) + ob1's
# match header (14 bytes in Open MPI 4.1) + 333; flags at payload byte 23,
# RETX = 0x20.  A range for ob1's header keeps the rule honest if it grows.
drop_first_copies() {
    ip netns exec "$NETNS" nft flush chain inet usnic_faults input &&
        ip netns exec "$NETNS" nft add rule inet usnic_faults input \
            udp length 393-425 '@th,248,8 & 0x20 == 0x0' counter drop
}

if ! netns_create || ! drop_first_copies; then
    fail "drop rule" "cannot make a network namespace with an nftables rule (root, iproute2, nftables)"
    finish
fi

# run NAME ARGS...: the job in the namespace; sets LOG, MAX_LATE, AWAY
run() {
    LOG=$BUILD/logs/away-$1.log
    shift
    timeout 120 ip netns exec "$NETNS" mpirun --allow-run-as-root -np 2 --bind-to none --mca pml ob1 \
        --mca btl usnic,self --mca btl_usnic_if_include lo --mca btl_usnic_stats 3600 \
        ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"} "$@" \
        "$BUILD/away" "$COUNT" "$PAUSE_MS" > "$LOG" 2>&1
    RC=$?
    MAX_LATE=$(sed -nE 's/^PASS away max_late_ms ([0-9.]+)/\1/p' "$LOG")
    AWAY=$(grep 'final stats' "$LOG" | grep -v ' peer ' | grep -oE ' away_resends=[0-9]+' | cut -d= -f2 |
           awk '{s += $1} END {print s + 0}')
}

before=$(netns_udp_dropped)
run default
dropped=$(( $(netns_udp_dropped) - before ))
if [[ $RC -ne 0 || -z "$MAX_LATE" ]]; then
    fail "away thread resends for a sender out of MPI" "exit $RC, no PASS line" "$LOG"
elif [[ $dropped -lt $COUNT ]]; then
    fail "away thread resends for a sender out of MPI" "the rule dropped $dropped first copies, want $COUNT" "$LOG"
elif awk -v m="$MAX_LATE" -v l="$LATE_MAX_MS" 'BEGIN {exit !(m >= l)}' || [[ $AWAY -lt $COUNT ]]; then
    fail "away thread resends for a sender out of MPI" "max lateness ${MAX_LATE} ms (want < $LATE_MAX_MS), away_resends $AWAY (want >= $COUNT)" "$LOG"
else
    ok "away thread resends for a sender out of MPI: $COUNT messages, first copies dropped ($dropped), max lateness ${MAX_LATE} ms < $LATE_MAX_MS ms while rank 0 was away ${PAUSE_MS} ms each; away_resends=$AWAY"
fi

before=$(netns_udp_dropped)
run control --mca btl_usnic_away_resend 0
dropped=$(( $(netns_udp_dropped) - before ))
if [[ $RC -ne 0 || -z "$MAX_LATE" ]]; then
    fail "control without the away thread" "exit $RC, no PASS line" "$LOG"
elif awk -v m="$MAX_LATE" -v p="$PAUSE_MS" 'BEGIN {exit !(m < p - 50)}'; then
    fail "control without the away thread" "max lateness ${MAX_LATE} ms: the drop rule did not make the test bite" "$LOG"
else
    ok "control without the away thread: max lateness ${MAX_LATE} ms (rank 0 away ${PAUSE_MS} ms; $dropped first copies dropped)"
fi
netns_destroy
finish
