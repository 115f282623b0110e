#!/usr/bin/env bash
#
# The whole test suite of the usnic BTL, from a fresh clone on Debian 12:
# installs what it needs, builds with -Werror, installs the plugin, then
# runs every suite and prints one closing line "N passed, N failed".
#
#   bash test/run-all.sh
#
# Suites: unit tests of the reliability engine (plain and under
# AddressSanitizer), a bounded libFuzzer run of the receive side, parameter
# and selection tests, MPI integration tests over "--mca pml ob1 --mca btl
# usnic,self" (2-4 ranks, NetPIPE, valgrind), hostile datagrams, dead peers
# (SIGSTOP and kill -9), attacks on the datagrams and the connectivity
# agent (each also shown to work against btl_usnic_protection=none),
# duplication/reordering/forged PUTs, incast, the MPI
# tests again under 1%, 5% and 20% UDP loss in a private network namespace,
# real clients (LAMMPS, HPCC, NetPIPE, mpi4py) against vader, dynamic
# processes (spawn, spawn_multiple, connect/accept, join, mpi4py.futures,
# also under 1% loss), and the
# randomized differential stress (random patterns, sizes and datatypes,
# every byte checked and compared with vader, lossless, at 1% loss, with
# duplication and reordering, on a busy host).  All
# traffic stays on loopback (the host's or the namespace's).
#
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOGDIR=${TEST_LOG_DIR:-$ROOT/test/logs}
mkdir -p "$LOGDIR"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

total_passed=0
total_failed=0
start_all=$(date +%s)

banner() { printf '\n===== %s =====\n' "$*"; }

# run_suite NAME COMMAND...: runs it, shows its output, adds its closing
# "N passed, N failed" line to the totals.  A suite that fails without
# such a line counts as one failure.
run_suite() {
    local name=$1
    shift
    banner "$name"
    local log="$LOGDIR/${name//[ \/]/_}.log"   # a suite name may hold "/"
    local start
    start=$(date +%s)
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    local summary
    summary=$(grep -E '^[A-Za-z-]*:? *[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    local p f
    p=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+')
    f=$(grep -oE '[0-9]+ failed' <<<"$summary" | grep -oE '[0-9]+')
    if [[ -z "$summary" ]]; then
        p=0
        f=1
        echo "!! $name ended (exit $rc) without a result line"
    elif [[ $rc -ne 0 && ${f:-0} -eq 0 ]]; then
        f=1
        echo "!! $name exited $rc although it reported no failure"
    fi
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
    echo "-- $name: $p passed, $f failed ($(( $(date +%s) - start ))s)"
}

banner "dependencies"
bash "$ROOT/scripts/install-deps.sh" test || { echo "cannot install dependencies"; echo "0 passed, 1 failed"; exit 1; }

banner "build and install"
if ! { make -C "$ROOT" clean >/dev/null && make -C "$ROOT" -j2 >"$LOGDIR/build.log" 2>&1 && make -C "$ROOT" install; }; then
    tail -40 "$LOGDIR/build.log"
    echo "build failed"
    echo "0 passed, 1 failed"
    exit 1
fi
ompi_info | grep 'MCA btl: usnic' || { echo "ompi_info does not list the usnic BTL"; echo "0 passed, 1 failed"; exit 1; }

run_suite "unit tests" make -C "$ROOT" --no-print-directory check
run_suite "unit tests under ASan" make -C "$ROOT" --no-print-directory check-asan
run_suite "receive-side fuzzing" bash "$ROOT/test/fuzz/run-fuzz.sh"
run_suite "parameters and selection" bash "$ROOT/test/params/run-param-tests.sh"
run_suite "MPI_THREAD_MULTIPLE stress (and helgrind)" bash "$ROOT/test/mpi/run-threads-stress.sh"
run_suite "MPI integration over usnic" env BTL=usnic,self MPIRUN_EXTRA="--mca btl_usnic_if_include lo" \
    NETPIPE=1 bash "$ROOT/test/run-mpi-tests.sh"
run_suite "hostile datagrams" bash "$ROOT/test/faults/run-hostile-test.sh"
run_suite "attacks on the datagrams (sniffer, unprivileged user, failed interface)" \
    bash "$ROOT/test/attack/run-dgram-attacks.sh"
run_suite "dead peer" bash "$ROOT/test/faults/run-deadpeer-test.sh"
run_suite "a sender away from MPI (the away thread)" bash "$ROOT/test/faults/run-away-test.sh"
run_suite "duplication and reordering" bash "$ROOT/test/faults/run-dupreorder-test.sh"
run_suite "PUT: large transfers, one-sided, forged PUTs" bash "$ROOT/test/faults/run-put-tests.sh"
run_suite "incast" bash "$ROOT/test/faults/run-incast-test.sh"
run_suite "two hosts, two interfaces each (namespaces)" bash "$ROOT/test/hosts/run-host-tests.sh"
run_suite "connectivity checker across hosts (namespaces)" bash "$ROOT/test/hosts/run-connectivity-tests.sh"
run_suite "attacks on the connectivity agent (namespaces)" bash "$ROOT/test/attack/run-agent-attacks.sh"
run_suite "UDP loss 1, 5, 20 percent" env LOSS_RATES="1 5 20" bash "$ROOT/test/faults/run-loss-tests.sh"
run_suite "real MPI clients" bash "$ROOT/test/clients/run-client-tests.sh"
run_suite "dynamic processes (spawn, connect/accept, join, mpi4py.futures)" bash "$ROOT/test/dynamic/run-dynamic-tests.sh"
run_suite "randomized differential stress (usnic vs vader)" bash "$ROOT/test/stress/run-stress.sh"

banner "summary"
echo "suite logs: $LOGDIR"
echo "total time: $(( $(date +%s) - start_all ))s"
echo "$total_passed passed, $total_failed failed"
[[ $total_failed -eq 0 ]]
