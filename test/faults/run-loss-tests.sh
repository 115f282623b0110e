#!/usr/bin/env bash
#
# The MPI integration tests under kernel-level UDP loss: a private network
# namespace, an nftables rule dropping N% of UDP datagrams, and the whole
# suite of test/run-mpi-tests.sh (payload verification included) inside it
# at each loss rate (default 1, 5 and 20 percent).  Proves nothing is lost
# or corrupted and nothing hangs, and reports the datagrams the kernel
# dropped.  Ends with "N passed, N failed".
#
#   LOSS_RATES="1 5 20" bash test/faults/run-loss-tests.sh
#
# USNIC_WIRE (test/lib.sh) reaches the nested run-mpi-tests.sh through the
# environment, which puts --mca btl_usnic_wire on its jobs.
#
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LOSS_RATES=${LOSS_RATES:-"1 5 20"}
# shellcheck source=../lib.sh
. "$ROOT/test/lib.sh"  # print_wire (USNIC_WIRE)
print_wire
# shellcheck source=netns.sh
source "$HERE/netns.sh"

passed=0
failed=0
if ! netns_create; then
    echo "FAIL cannot create a network namespace with nftables (need root, iproute2, nftables)"
    echo "0 passed, 1 failed"
    exit 1
fi

for rate in $LOSS_RATES; do
    netns_set_udp_loss "$rate" || { echo "FAIL cannot install the ${rate}% drop rule"; failed=$((failed + 1)); continue; }
    echo "=== ${rate}% UDP loss (namespace $NETNS) ==="
    log=$(mktemp)
    start=$(date +%s)
    netns_exec env BTL=usnic,self MPIRUN_EXTRA="--mca btl_usnic_if_include lo" NETPIPE=1 VALGRIND=0 \
        MPI_TEST_BUILD_DIR="$ROOT/test/mpi/build-loss" bash "$ROOT/test/run-mpi-tests.sh" 2>&1 | tee "$log"
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
    p=$(grep -oE '^[0-9]+' <<<"$summary")
    f=$(grep -oE '[0-9]+ failed' <<<"$summary" | grep -oE '[0-9]+')
    dropped=$(netns_udp_dropped)
    echo "--- ${rate}% loss: ${summary:-no result} in $(( $(date +%s) - start ))s; kernel dropped ${dropped:-?} datagrams so far"
    if [[ -z "$summary" ]]; then
        failed=$((failed + 1))
    else
        passed=$((passed + p))
        failed=$((failed + f))
    fi
    if [[ "$rate" -gt 0 && "${dropped:-0}" -eq 0 ]]; then
        echo "FAIL the ${rate}% rule dropped nothing: the loss test tested nothing"
        failed=$((failed + 1))
    fi
    rm -f "$log"
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
