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
# and selection tests, the BTL's messages (every help topic through
# show_help, interface filters matching nothing, each cause of "no usable
# device"), MPI integration tests over "--mca pml ob1 --mca btl
# usnic,self" (2-4 ranks, NetPIPE, valgrind), hostile datagrams, dead peers
# (SIGSTOP and kill -9), attacks on the datagrams and the connectivity
# agent (each also shown to work against btl_usnic_protection=none), a
# local user who reads the modex through PMIx and forges with it (shown
# to work against keys made from the modex alone),
# duplication/reordering/forged PUTs, incast, the MPI
# tests again under 1%, 5% and 20% UDP loss in a private network namespace,
# real clients (LAMMPS, HPCC, NetPIPE, mpi4py) against vader, dynamic
# processes (spawn, spawn_multiple, connect/accept, join, mpi4py.futures,
# also under 1% loss), and the
# randomized differential stress (random patterns, sizes and datatypes,
# every byte checked and compared with vader, lossless, at 1% loss, with
# duplication and reordering, on a busy host), communication patterns
# (bench/patterns.c: one-way streams to a busy receiver, derived
# datatypes, unexpected floods, probes, protocol boundaries, collectives;
# data verified over both wires and tcp, and usnic's time at most 3x
# btl/tcp's per pattern, test/perf), and the MPI, threads,
# duplication/reordering, PUT, 1% loss and two-host suites again over
# test/provider's "dgcheck", a libfabric provider with the usnic
# provider's contract (registered memory, a message prefix, small CQs)
# that counts every violation of it (zero asserted).  All of those run on
# the default wire (btl_usnic_wire auto: the socket wire on the udp
# provider's interfaces); then the socket wire's own cases (segmentation
# offload refused at run time by an LD_PRELOAD shim; two hosts over veth
# pairs that cut GSO batches in software, MTU 1500 and 9000), the path
# MTU cases across two hosts at MTU 9000 (a black hole mid-run and
# lifted, a 1280-byte link, forged ICMP "fragmentation needed", each
# control with btl_usnic_pmtu_discovery 0 shown to die; on the ofi wire
# too), the congestion cases on the socket wire (three hosts, the
# switch's ports toward the receivers shaped to 1 Gbit/s with a 100 KB
# drop-tail queue: a stream beside a ping-pong, beside iperf3 TCP cubic,
# incast 2 and 4 to 1, usnic against btl/tcp in the same run, with a
# control that the bottleneck drops), and the
# MPI, thread, dead-peer, hostile-datagram, away, incast,
# duplication/reordering, PUT, 1% loss, two-host and client suites again
# over the libfabric wire (btl_usnic_wire ofi).
# All traffic stays on loopback (the host's or the namespace's).
#
# Then the Open MPI 5 leg: the same sources built against Open MPI 5.0
# (with -Werror), installed there, and the unit, parameter, message, MPI
# integration (NetPIPE included), PUT and one-sided (osc/rdma), 1% loss,
# duplication/reordering, incast, two-host, path MTU, real-client and dgcheck (MPI,
# PUT, 1% loss) suites run again on it, then what else the 4.1 leg runs:
# the MPI_THREAD_MULTIPLE stress with helgrind (the same filter: only
# races whose first frame is in btl_usnic fail), dead peer (the kill -9
# case under PRRTE's "--runtime-options recoverable"), the away thread,
# the attacks on the datagrams, on the connectivity agent (squat-files
# says "not run": its attacker makes ORTE's session paths) and through
# PMIx (the impersonation, as on 4.1), dynamic
# processes (connect/accept and join through a prte DVM, 5.0's own name
# server, there being no ompi-server) and the stress's named regression
# shapes against sm (its random rounds say "not run": Open MPI 5.0.10
# corrupts some of their derived datatypes over sm and tcp too,
# test/stress/README.md).  The long ones run shortened by their own knobs,
# named in the suite's title (fewer cycles, shorter victims and stress
# runs, hangs called sooner).  Which 5.0:
#   OMPI5=/prefix   an installation of yours
#   (unset)         /opt/openmpi-5.0.10 if it is there, else the prebuilt
#                   tarball in ../shared/openmpi-5/ beside the clone (our
#                   CI), unpacked to /opt
#   OMPI5=none      skip the leg
# Without one the summary says, plainly, that the leg was not run.
# Last, with LIBFABRIC2_INCLUDE=DIR (libfabric 2.x headers, which Debian 12
# lacks), every source is compiled with -Werror against them for both
# series (test/compat/check-libfabric2.sh); otherwise "not run".
#
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOGDIR=${TEST_LOG_DIR:-$ROOT/test/logs}
mkdir -p "$LOGDIR"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

total_passed=0
total_failed=0
total_not_run=0
not_run_list=()
failed_list=()
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
    summary=$(grep -aE '^[A-Za-z-]*:? *[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    local p f n
    p=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+')
    f=$(grep -oE '[0-9]+ failed' <<<"$summary" | grep -oE '[0-9]+')
    n=$(grep -oE '[0-9]+ not run' <<<"$summary" | grep -oE '[0-9]+')
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
    if [[ ${f:-0} -gt 0 ]]; then
        failed_list+=("$name: $f failed")
        local line
        while IFS= read -r line; do
            failed_list+=("    $line")
        done < <( { grep -aE '^(FAIL|!!)' "$log" || tail -n 3 "$log"; } | head -n 5 | cut -c1-300)
    fi
    if [[ -n "$n" && "$n" -gt 0 ]]; then
        total_not_run=$((total_not_run + n))
        not_run_list+=("$name: $n check(s) (see NOT RUN lines above)")
    fi
    echo "-- $name: $p passed, $f failed${n:+, $n not run} ($(( $(date +%s) - start ))s)"
}

# not_run_leg NAME WHY: a whole part this run could not do
not_run_leg() {
    banner "$1"
    echo "NOT RUN $1: $2"
    total_not_run=$((total_not_run + 1))
    not_run_list+=("$1: $2")
}

# find_ompi5: OMPI5 = the Open MPI 5 installation to test, or empty (WHY
# says why)
find_ompi5() {
    WHY=
    if [[ "${OMPI5:-}" == none ]]; then
        OMPI5=
        WHY="OMPI5=none"
        return
    fi
    if [[ -n "${OMPI5:-}" ]]; then
        [[ -x "$OMPI5/bin/ompi_info" ]] || { WHY="OMPI5=$OMPI5 has no bin/ompi_info"; OMPI5=; }
        return
    fi
    # the prebuilt unpacks to /opt/openmpi-<version> (its README)
    local tarball
    tarball=$(ls "$ROOT"/../shared/openmpi-5/openmpi-5.*-debian12-x86_64.tar.xz 2>/dev/null | tail -n 1)
    OMPI5=/opt/openmpi-5.0.10
    if [[ -n "$tarball" ]]; then
        OMPI5=/opt/$(basename "$tarball" | sed 's/-debian12-x86_64\.tar\.xz$//')
        if [[ ! -x "$OMPI5/bin/ompi_info" ]]; then
            echo "unpacking $tarball to / (creates $OMPI5)"
            tar -xJf "$tarball" -C / || { WHY="cannot unpack $tarball"; OMPI5=; return; }
        fi
    fi
    if [[ ! -x "$OMPI5/bin/ompi_info" ]]; then
        WHY="no Open MPI 5 found (name one with OMPI5=/prefix)"
        OMPI5=
    fi
}

# ompi5_installed: the 5.0 build is installed and listed with BTL API 3.3.0
ompi5_installed() {
    local line
    line=$("$OMPI5/bin/ompi_info" | grep 'MCA btl: usnic')
    echo "$line"
    if [[ "$line" == *"API v3.3.0"* ]]; then
        echo "ok   ompi_info of $OMPI5 lists the usnic BTL with API v3.3.0"
        echo "1 passed, 0 failed"
    else
        echo "FAIL ompi_info of $OMPI5 does not list the usnic BTL with API v3.3.0"
        echo "0 passed, 1 failed"
        return 1
    fi
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
run_suite "messages: help topics, interface filters, no usable device" bash "$ROOT/test/help/run-help-tests.sh"
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
run_suite "PMIx impersonation: nobody reads the modex, forges with it" bash "$ROOT/test/attack/run-pmix-attacks.sh"
run_suite "UDP loss 1, 5, 20 percent" env LOSS_RATES="1 5 20" bash "$ROOT/test/faults/run-loss-tests.sh"
run_suite "real MPI clients" bash "$ROOT/test/clients/run-client-tests.sh"
run_suite "dynamic processes (spawn, connect/accept, join, mpi4py.futures)" bash "$ROOT/test/dynamic/run-dynamic-tests.sh"
run_suite "randomized differential stress (usnic vs vader; shortened: STRESS_SECONDS=10)" env STRESS_SECONDS=10 \
    bash "$ROOT/test/stress/run-stress.sh"
run_suite "communication patterns: data on both wires and tcp, usnic/tcp time at most 3x" \
    bash "$ROOT/test/perf/run-pattern-tests.sh"
run_suite "dgcheck test provider (usnic contract: registered memory, prefix, small CQs)" \
    bash "$ROOT/test/provider/run-provider-tests.sh"

# The socket wire's own cases, then suites again over the libfabric wire
run_suite "socket wire: segmentation offload failing at run time (LD_PRELOAD shim)" \
    bash "$ROOT/test/faults/run-gso-fallback-test.sh"
run_suite "socket wire: arrival stamps only while bulk data flows" bash "$ROOT/test/faults/run-stamps-test.sh"
run_suite "socket wire: two hosts over veth, MTU 1500, GSO cut in software, GRO" \
    env USNIC_WIRE=socket HOSTS_MTU=1500 HOSTS_GSO=soft bash "$ROOT/test/hosts/run-host-tests.sh"
run_suite "socket wire: two hosts over veth, MTU 9000, GSO cut in software, GRO" \
    env USNIC_WIRE=socket HOSTS_MTU=9000 HOSTS_GSO=soft bash "$ROOT/test/hosts/run-host-tests.sh"
run_suite "path MTU across two hosts at 9000: black hole mid-run and lifted, 1280-byte link, forged ICMP (controls: pmtu_discovery 0 dies)" \
    bash "$ROOT/test/hosts/run-path-tests.sh"
run_suite "socket wire: congestion across a 1 Gbit/s bottleneck with a 100 KB drop-tail queue (stream, ping-pong, beside TCP cubic, incast 2 and 4 to 1; usnic vs btl/tcp in the same run)" \
    env USNIC_WIRE=socket bash "$ROOT/test/hosts/run-congestion-tests.sh"
W="ofi wire"
run_suite "$W: MPI integration over usnic" env USNIC_WIRE=ofi BTL=usnic,self \
    MPIRUN_EXTRA="--mca btl_usnic_if_include lo" NETPIPE=1 bash "$ROOT/test/run-mpi-tests.sh"
run_suite "$W: MPI_THREAD_MULTIPLE stress" env USNIC_WIRE=ofi bash "$ROOT/test/mpi/run-threads-stress.sh"
run_suite "$W: dead peer" env USNIC_WIRE=ofi bash "$ROOT/test/faults/run-deadpeer-test.sh"
# these launch on this host only: the environment reaches the ranks
run_suite "$W: hostile datagrams" env USNIC_WIRE=ofi bash "$ROOT/test/faults/run-hostile-test.sh"
run_suite "$W: a sender away from MPI" env USNIC_WIRE=ofi bash "$ROOT/test/faults/run-away-test.sh"
run_suite "$W: incast" env USNIC_WIRE=ofi bash "$ROOT/test/faults/run-incast-test.sh"
run_suite "$W: duplication and reordering" env USNIC_WIRE=ofi bash "$ROOT/test/faults/run-dupreorder-test.sh"
run_suite "$W: PUT, one-sided, forged PUTs" env USNIC_WIRE=ofi bash "$ROOT/test/faults/run-put-tests.sh"
run_suite "$W: UDP loss 1 percent" env USNIC_WIRE=ofi LOSS_RATES=1 bash "$ROOT/test/faults/run-loss-tests.sh"
run_suite "$W: two hosts over veth, MTU 9000, GSO cut in software" \
    env USNIC_WIRE=ofi HOSTS_MTU=9000 HOSTS_GSO=soft bash "$ROOT/test/hosts/run-host-tests.sh"
run_suite "$W: path MTU across two hosts (black hole at 1400 B mid-run and lifted, 1280-byte link, forged ICMP)" \
    env USNIC_WIRE=ofi bash "$ROOT/test/hosts/run-path-tests.sh"
run_suite "$W: real MPI clients" env USNIC_WIRE=ofi bash "$ROOT/test/clients/run-client-tests.sh"

find_ompi5
if [[ -z "$OMPI5" ]]; then
    not_run_leg "Open MPI 5 leg" "$WHY"
else
    banner "Open MPI 5 leg: build against $OMPI5 and install there"
    if ! { make -C "$ROOT" OMPI="$OMPI5" clean >/dev/null && make -C "$ROOT" OMPI="$OMPI5" -j2 >"$LOGDIR/build-ompi5.log" 2>&1 &&
           make -C "$ROOT" OMPI="$OMPI5" install; }; then
        tail -40 "$LOGDIR/build-ompi5.log"
        echo "!! the build against $OMPI5 failed"
        total_failed=$((total_failed + 1))
    else
        L5="Open MPI 5"
        # the 5.0 leg's shorter runs of the long suites (4.1's defaults:
        # VICTIM_SECONDS 6, VICTIM_GRACE 30, SOAK_SECONDS 12, CYCLES 20,
        # TEST_TIMEOUT 90, STRESS_SECONDS 20, STRESS_WATCHDOG 120)
        L5_VICTIM_SECONDS=3 L5_VICTIM_GRACE=10 L5_SOAK_SECONDS=6 L5_CYCLES=10 L5_DYN_TIMEOUT=30
        L5_STRESS_SECONDS=3 L5_STRESS_WATCHDOG=30
        run_suite "$L5: installed, API v3.3.0" ompi5_installed
        run_suite "$L5: unit tests" make -C "$ROOT" --no-print-directory OMPI="$OMPI5" check
        run_suite "$L5: parameters and selection" env USNIC_OMPI="$OMPI5" bash "$ROOT/test/params/run-param-tests.sh"
        run_suite "$L5: messages: help topics, interface filters, no usable device" env USNIC_OMPI="$OMPI5" \
            bash "$ROOT/test/help/run-help-tests.sh"
        run_suite "$L5: MPI integration over usnic" env USNIC_OMPI="$OMPI5" BTL=usnic,self \
            MPIRUN_EXTRA="--mca btl_usnic_if_include lo" NETPIPE=1 bash "$ROOT/test/run-mpi-tests.sh"
        run_suite "$L5: PUT, one-sided over osc rdma, forged PUTs" env USNIC_OMPI="$OMPI5" \
            bash "$ROOT/test/faults/run-put-tests.sh"
        run_suite "$L5: UDP loss 1 percent" env USNIC_OMPI="$OMPI5" LOSS_RATES=1 bash "$ROOT/test/faults/run-loss-tests.sh"
        run_suite "$L5: duplication and reordering" env USNIC_OMPI="$OMPI5" bash "$ROOT/test/faults/run-dupreorder-test.sh"
        run_suite "$L5: incast" env USNIC_OMPI="$OMPI5" bash "$ROOT/test/faults/run-incast-test.sh"
        run_suite "$L5: two hosts, two interfaces each (namespaces)" env USNIC_OMPI="$OMPI5" \
            bash "$ROOT/test/hosts/run-host-tests.sh"
        run_suite "$L5: path MTU across two hosts (black hole, 1280-byte link, forged ICMP)" env USNIC_OMPI="$OMPI5" \
            bash "$ROOT/test/hosts/run-path-tests.sh"
        run_suite "$L5: real MPI clients" env USNIC_OMPI="$OMPI5" bash "$ROOT/test/clients/run-client-tests.sh"
        run_suite "$L5: over the dgcheck test provider" env USNIC_OMPI="$OMPI5" SUITES="mpi put loss" \
            bash "$ROOT/test/provider/run-provider-tests.sh"
        # What the 4.1 leg runs besides, on 5.0; the long ones shortened by
        # their own knobs (the suite name says how) to keep the leg's cost
        # near 6 minutes
        run_suite "$L5: MPI_THREAD_MULTIPLE stress (and helgrind)" env USNIC_OMPI="$OMPI5" \
            bash "$ROOT/test/mpi/run-threads-stress.sh"
        run_suite "$L5: dead peer" env USNIC_OMPI="$OMPI5" bash "$ROOT/test/faults/run-deadpeer-test.sh"
        run_suite "$L5: a sender away from MPI (the away thread)" env USNIC_OMPI="$OMPI5" \
            bash "$ROOT/test/faults/run-away-test.sh"
        run_suite "$L5: attacks on the datagrams (shortened: VICTIM_SECONDS=$L5_VICTIM_SECONDS VICTIM_GRACE=$L5_VICTIM_GRACE)" \
            env USNIC_OMPI="$OMPI5" VICTIM_SECONDS="$L5_VICTIM_SECONDS" VICTIM_GRACE="$L5_VICTIM_GRACE" \
            bash "$ROOT/test/attack/run-dgram-attacks.sh"
        run_suite "$L5: attacks on the connectivity agent (namespaces; shortened: SOAK_SECONDS=$L5_SOAK_SECONDS)" \
            env USNIC_OMPI="$OMPI5" SOAK_SECONDS="$L5_SOAK_SECONDS" bash "$ROOT/test/attack/run-agent-attacks.sh"
        run_suite "$L5: PMIx impersonation: nobody reads the modex, forges with it" env USNIC_OMPI="$OMPI5" \
            bash "$ROOT/test/attack/run-pmix-attacks.sh"
        run_suite "$L5: dynamic processes, prte DVM as name server (shortened: CYCLES=$L5_CYCLES, TEST_TIMEOUT=$L5_DYN_TIMEOUT)" \
            env USNIC_OMPI="$OMPI5" CYCLES="$L5_CYCLES" TEST_TIMEOUT="$L5_DYN_TIMEOUT" \
            bash "$ROOT/test/dynamic/run-dynamic-tests.sh"
        run_suite "$L5: differential stress, regression shapes, usnic vs sm (shortened: STRESS_SECONDS=$L5_STRESS_SECONDS STRESS_WATCHDOG=$L5_STRESS_WATCHDOG)" \
            env USNIC_OMPI="$OMPI5" STRESS_SECONDS="$L5_STRESS_SECONDS" STRESS_WATCHDOG="$L5_STRESS_WATCHDOG" \
            bash "$ROOT/test/stress/run-stress.sh"
    fi
fi

if [[ -n "${LIBFABRIC2_INCLUDE:-}" ]]; then
    run_suite "build against libfabric 2.x headers" env OMPI5="${OMPI5:-}" bash "$ROOT/test/compat/check-libfabric2.sh"
else
    not_run_leg "build against libfabric 2.x headers" \
        "Debian 12 has libfabric 1.x only; LIBFABRIC2_INCLUDE=DIR (a 2.x include directory) runs it"
fi

banner "summary"
echo "suite logs: $LOGDIR"
echo "total time: $(( $(date +%s) - start_all ))s"
# the failures again, here, so that a reader of the log's tail sees them
if [[ $total_failed -gt 0 ]]; then
    echo "failed:"
    printf '  %s\n' "${failed_list[@]}"
fi
if [[ $total_not_run -gt 0 ]]; then
    echo "not run:"
    printf '  %s\n' "${not_run_list[@]}"
    echo "$total_passed passed, $total_failed failed, $total_not_run not run"
else
    echo "$total_passed passed, $total_failed failed"
fi
[[ $total_failed -eq 0 ]]
