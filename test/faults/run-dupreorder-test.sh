#!/usr/bin/env bash
#
# Duplication and reordering: the test-only injector of the usnic BTL
# (btl_usnic_inject_faults) sends every 7th datagram twice and holds every
# 5th back behind the next one, in every rank.  The MPI integration tests
# must still verify every byte (the PML never sees a duplicate), and the
# counters must show the duplicates were dropped (a copy of a datagram
# by the replay window, drop_replay; a segment sent anew by its sequence
# number, dup_recvs or oow_low_recvs).  Then forged PUTs: every
# 3rd PUT datagram is preceded by a copy with a wrong key and junk bytes,
# sealed with the sender's real key (a job process gone wrong: the tag
# passes, the PUT checks must stop it); the ping-pong still verifies every byte and the targets count the
# forgeries as drop_bad_put.  Ends with "N passed, N failed".
# USNIC_WIRE (test/lib.sh): --mca btl_usnic_wire on every job (the nested
# run-mpi-tests.sh takes it from the environment).
#
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"  # OVERSUBSCRIBE, OOB_LO, series_dir (the Open MPI series)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${FAULT_TEST_BUILD_DIR:-$(series_dir "$HERE/build")}
SPEC=${INJECT:-dup=7,reorder=5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; [[ -n "${2:-}" ]] && tail -25 "$2" | sed 's/^/     /'; failed=$((failed + 1)); }
print_wire

mkdir -p "$BUILD"
mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/soak" "$HERE/soak.c" || { echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
timeout 120 mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none -np 2 --mca pml ob1 --mca btl usnic,self \
    --mca btl_usnic_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"} --mca btl_usnic_stats 3600 ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"} \
    --mca btl_usnic_inject_faults "$SPEC" "$BUILD/soak" 3 >"$log" 2>&1
rc=$?
if [[ $rc -eq 0 ]] && grep -q "PASS soak" "$log"; then ok "soak with $SPEC: data verified"; else bad "soak with $SPEC (rc=$rc)" "$log"; fi
dups=$(injected "$log" duplicated)
data_dups=$(injected "$log" data)
reorders=$(injected "$log" reordered)
dropped=$(grep "final stats" "$log" | grep -v " peer " | grep -oE "(dup_recvs|oow_low_recvs|drop_replay)=[0-9]+" |
          cut -d= -f2 | awk '{s += $1} END {print s + 0}')
if [[ $dups -gt 0 && $reorders -gt 0 ]]; then ok "injected $dups duplicates and $reorders reorderings"; else bad "injector idle (dups=$dups reorders=$reorders)" "$log"; fi
# On lossless loopback every duplicated data segment arrives twice, so the
# receivers must have dropped at least that many (retransmissions add more).
if [[ $data_dups -gt 0 && $dropped -ge $data_dups ]]; then
    ok "every duplicated data segment dropped below the PML ($dropped drops >= $data_dups)"
else
    bad "duplicates not accounted for (dropped=$dropped, data duplicates=$data_dups)" "$log"
fi
rm -f "$log"

# Forged PUTs among genuine ones (large ping-pongs move by PUT)
mpicc -O2 -Wall -Wextra -Werror -I"$ROOT/test/mpi" -o "$BUILD/pingpong" "$ROOT/test/mpi/pingpong.c" ||
    { echo "$passed passed, $((failed + 1)) failed"; exit 1; }
log=$(mktemp)
timeout 180 mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none -np 2 --mca pml ob1 --mca btl usnic,self \
    --mca btl_usnic_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"} --mca btl_usnic_stats 3600 ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"} \
    --mca btl_usnic_inject_faults forge_put=3 "$BUILD/pingpong" >"$log" 2>&1
rc=$?
if [[ $rc -eq 0 ]] && grep -q "PASS pingpong" "$log"; then ok "ping-pong with forged PUTs: data verified"; else bad "ping-pong with forged PUTs (rc=$rc)" "$log"; fi
forged=$(injected "$log" forged)
bad_put=$(grep "final stats" "$log" | grep -oE " drop_bad_put=[0-9]+" | cut -d= -f2 | awk '{s += $1} END {print s + 0}')
written=$(grep "final stats" "$log" | grep -oE " put_recvs=[0-9]+" | cut -d= -f2 | awk '{s += $1} END {print s + 0}')
# A forged copy the kernel dropped (full socket buffer) is not counted, so
# at least most of them, and never more than were sent
if [[ $forged -gt 0 && $written -gt 0 && $bad_put -le $forged && $((bad_put * 10)) -ge $((forged * 9)) ]]; then
    ok "forged PUTs dropped unwritten ($bad_put of $forged counted; $written genuine PUT datagrams written)"
else
    bad "forged PUTs not accounted for (forged=$forged drop_bad_put=$bad_put put_recvs=$written)" "$log"
fi
rm -f "$log"

# The MPI integration programs (payload verification) under the same faults
out=$(env BTL=usnic,self MPIRUN_EXTRA="--mca btl_usnic_if_include lo --mca btl_usnic_inject_faults $SPEC" \
      NETPIPE=0 VALGRIND=0 MPI_TEST_BUILD_DIR="$ROOT/test/mpi/build-faults" bash "$ROOT/test/run-mpi-tests.sh" 2>&1)
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -1)
echo "$out" | grep -E "^(ok|FAIL)"
p=$(grep -oE '^[0-9]+' <<<"$summary")
f=$(grep -oE '[0-9]+ failed' <<<"$summary" | grep -oE '[0-9]+')
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-1}))
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
