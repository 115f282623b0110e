#!/usr/bin/env bash
#
# Dead-peer detection: a rank that stops (SIGSTOP) must be reported by the
# usnic BTL after btl_usnic_peer_timeout, naming its host and rank, and
# mpirun must end the job, well before the test's own time limit.
# Ends with "N passed, N failed".
#
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${FAULT_TEST_BUILD_DIR:-$HERE/build}
PEER_TIMEOUT=${PEER_TIMEOUT:-3}
LIMIT=${LIMIT:-60}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
passed=0
failed=0
mkdir -p "$BUILD"
mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/deadpeer" "$HERE/deadpeer.c" || { echo "0 passed, 1 failed"; exit 1; }

start=$(date +%s)
out=$(timeout "$LIMIT" mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 --mca pml ob1 \
      --mca btl usnic,self --mca btl_usnic_if_include lo --mca oob_tcp_if_include lo \
      --mca btl_usnic_peer_timeout "$PEER_TIMEOUT" "$BUILD/deadpeer" 2>&1)
rc=$?
secs=$(( $(date +%s) - start ))
# never leave a stopped rank behind
pkill -KILL -f "$BUILD/deadpeer" 2>/dev/null

check() {
    local label=$1 cond=$2
    if [[ "$cond" == 1 ]]; then echo "ok   $label"; passed=$((passed + 1)); else
        echo "FAIL $label"; printf '%s\n' "$out" | tail -25 | sed 's/^/     /'; failed=$((failed + 1)); fi
}
check "job ends (exit $rc after ${secs}s, limit ${LIMIT}s)" "$([[ $rc -ne 0 && $rc -ne 124 ]] && echo 1)"
check "not before the peer timeout (${PEER_TIMEOUT}s)" "$([[ $secs -ge $PEER_TIMEOUT ]] && echo 1)"
check "message names the dead peer" "$(grep -q 'has not acknowledged any data' <<<"$out" &&
                                         grep -q 'Peer rank: *1' <<<"$out" && echo 1)"
check "the send to the dead peer did not complete" "$(! grep -q UNEXPECTED <<<"$out" && echo 1)"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
