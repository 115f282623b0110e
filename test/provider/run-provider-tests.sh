#!/usr/bin/env bash
#
# run-provider-tests.sh - the usnic BTL over "dgcheck", a libfabric test
# provider with the contract of Cisco's usnic provider (registered memory,
# a message prefix, the caller's FI_CONTEXT space, small CQs that
# overrun), which counts every violation of that contract (README.md).
#
#   bash test/provider/run-provider-tests.sh
#
# 1. builds the provider and runs its self-test;
# 2. runs the MPI integration, THREAD_MULTIPLE, duplication/reordering,
#    PUT, 1% loss and two-host suites with the BTL on dgcheck only
#    (OMPI_MCA_btl_usnic_provider_include=dgcheck), each suite's own
#    verdict first, then the provider's reports: every process that
#    opened it must have posted and committed no violation;
# 3. shows that the checker bites: a plugin built to post ACKs without
#    their descriptor (OPAL_BTL_USNIC_TEST_BREAK_ACK_DESC) must be caught;
# 4. shows that a provider that needs no registration gets none
#    (DGCHECK_ENFORCE_MR=0).
#
# Environment: SUITES (default "mpi threads dupreorder put loss hosts";
# empty: only the provider and the checks of 3 and 4), USNIC_OMPI (another
# Open MPI, test/lib.sh),
# TEST_TIMEOUT (per mpirun of this script, 120 s).  Needs the plugin
# installed (make install) and root for the loss and host suites.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$ROOT/test/lib.sh"
. "$ROOT/test/report.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SUITES=${SUITES-mpi threads dupreorder put loss hosts}
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
PROV_DIR=$HERE/build
WORK=$(mktemp -d /tmp/dgcheck-tests.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# ---- the provider itself ----
if ! make -C "$HERE" >"$WORK/build.log" 2>&1; then
    fail "build the dgcheck provider" "make -C test/provider failed" "$WORK/build.log"
    finish
fi
ok "build the dgcheck provider (-Wall -Wextra -Werror)"
if make -C "$HERE" --no-print-directory check >"$WORK/selftest.log" 2>&1; then
    ok "provider self-test: $(grep -E '^[0-9]+ passed' "$WORK/selftest.log" | tail -1)"
else
    fail "provider self-test" "$(grep -E '^[0-9]+ passed' "$WORK/selftest.log" | tail -1)" "$WORK/selftest.log"
fi

# report_check NAME REPORT MIN_PROCS: every process's last report line
# says violations=0, at least MIN_PROCS processes reported, and they
# posted (so the BTL really ran over dgcheck)
report_check() {
    local name=$1 report=$2 min=$3
    if [ ! -s "$report" ]; then
        fail "$name: dgcheck report" "no process reported (did the BTL open dgcheck?)"
        return
    fi
    local summary
    summary=$(awk '
        { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          last_viol[v["pid"]] = v["violations"]; last_posts[v["pid"]] = v["posts"];
          last_enf[v["pid"]] = v["enforce"] }
        END { n = 0; viol = 0; posts = 0; unenforced = 0
              for (p in last_viol) { n++; viol += last_viol[p]; posts += last_posts[p]; if (last_enf[p] != 1) unenforced++ }
              printf "%d %d %d %d\n", n, viol, posts, unenforced }' "$report")
    local n viol posts unenforced
    read -r n viol posts unenforced <<<"$summary"
    if [ "$viol" -ne 0 ]; then
        fail "$name: contract" "$viol violation(s) in $n process(es)" "$report"
    elif [ "$n" -lt "$min" ] || [ "$posts" -eq 0 ]; then
        fail "$name: contract" "only $n process(es) reported ($min expected), $posts posts" "$report"
    elif [ "$unenforced" -ne 0 ]; then
        fail "$name: contract" "$unenforced process(es) ran without enforcement" "$report"
    else
        ok "$name: $n processes, $posts posts over dgcheck, 0 contract violations"
    fi
}

# on_dgcheck NAME MIN_PROCS COMMAND...: COMMAND with the BTL on dgcheck
# only; its own closing line must say 0 failed, then the reports are checked
on_dgcheck() {
    local name=$1 min=$2
    shift 2
    local report="$WORK/report.$RANDOM" log="$WORK/suite.$RANDOM"
    : >"$report"
    local start
    start=$(now)
    env FI_PROVIDER_PATH="$PROV_DIR" DGCHECK_REPORT="$report" OMPI_MCA_btl_usnic_provider_include=dgcheck \
        "$@" >"$log" 2>&1
    local rc=$?
    local summary
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    if [ $rc -eq 0 ] && [ -n "$summary" ] && [[ "$summary" == *" 0 failed"* ]]; then
        ok "$name over dgcheck: $summary ($(elapsed "$start")s)"
    else
        grep -E '^(FAIL|NOT RUN)' "$log" | head -20 | sed 's/^/    /'
        fail "$name over dgcheck" "exit $rc, ${summary:-no result line}" "$log"
    fi
    report_check "$name" "$report" "$min"
}

for suite in $SUITES; do
    case $suite in
        mpi) on_dgcheck "MPI integration (valgrind included)" 4 env BTL=usnic,self \
                 MPIRUN_EXTRA="--mca btl_usnic_if_include lo" NETPIPE=1 VALGRIND=1 \
                 MPI_TEST_BUILD_DIR="$(series_dir "$ROOT/test/mpi/build-dgcheck")" bash "$ROOT/test/run-mpi-tests.sh" ;;
        threads) on_dgcheck "MPI_THREAD_MULTIPLE stress" 2 env HELGRIND=0 \
                 bash "$ROOT/test/mpi/run-threads-stress.sh" ;;
        dupreorder) on_dgcheck "duplication and reordering" 2 bash "$ROOT/test/faults/run-dupreorder-test.sh" ;;
        put) on_dgcheck "PUT (large transfers, one-sided, forged PUTs)" 3 bash "$ROOT/test/faults/run-put-tests.sh" ;;
        loss) on_dgcheck "1% UDP loss" 2 env LOSS_RATES=1 bash "$ROOT/test/faults/run-loss-tests.sh" ;;
        hosts) on_dgcheck "two hosts, two interfaces each" 2 bash "$ROOT/test/hosts/run-host-tests.sh" ;;
        *) fail "suite $suite" "unknown (SUITES: mpi threads dupreorder put loss hosts)" ;;
    esac
done

# ---- the checker bites: a plugin that posts ACKs without descriptor ----
# A component directory holding the broken plugin and every other
# component of this Open MPI (two usnic BTLs on the path would clash).
pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
broken_dir=$WORK/components
mkdir -p "$broken_dir"
for f in "$pkglibdir"/mca_*.so; do
    [ "$(basename "$f")" = mca_btl_usnic.so ] || ln -s "$f" "$broken_dir/"
done
if make -C "$ROOT" --no-print-directory ${USNIC_OMPI:+OMPI="$USNIC_OMPI"} BUILD="$WORK/broken-build" SO="$broken_dir/mca_btl_usnic.so" \
       CPPFLAGS_EXTRA=-DOPAL_BTL_USNIC_TEST_BREAK_ACK_DESC "$broken_dir/mca_btl_usnic.so" >"$WORK/broken.log" 2>&1; then
    cp "$ROOT/help-mpi-btl-usnic.txt" "$broken_dir/"
    mpicc -O2 -I"$ROOT/test/mpi" -o "$WORK/pingpong" "$ROOT/test/mpi/pingpong.c"
    report="$WORK/report.broken"
    : >"$report"
    timeout "$TEST_TIMEOUT" env FI_PROVIDER_PATH="$PROV_DIR" DGCHECK_REPORT="$report" \
        OMPI_MCA_mca_base_component_path="$broken_dir" \
        mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none -np 2 --mca pml ob1 --mca btl usnic,self \
        --mca btl_usnic_provider_include dgcheck --mca btl_usnic_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"} \
        "$WORK/pingpong" >"$WORK/broken-run.log" 2>&1
    rc=$?
    viol=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^violations=/) { split($i, kv, "="); if (kv[2] > m) m = kv[2] } }
                END { print m + 0 }' "$report")
    if [ "$viol" -gt 0 ] && ! grep -q "PASS pingpong" "$WORK/broken-run.log"; then
        ok "a plugin posting ACKs without their descriptor is caught ($viol violations, job failed with exit $rc)"
    else
        fail "broken plugin caught" "violations=$viol, exit $rc" "$WORK/broken-run.log"
    fi
else
    fail "build the deliberately broken plugin" "make failed" "$WORK/broken.log"
fi

# ---- no registration where none is needed ----
report="$WORK/report.noenforce"
: >"$report"
mpicc -O2 -I"$ROOT/test/mpi" -o "$WORK/pingpong" "$ROOT/test/mpi/pingpong.c" 2>/dev/null
timeout "$TEST_TIMEOUT" env FI_PROVIDER_PATH="$PROV_DIR" DGCHECK_REPORT="$report" DGCHECK_ENFORCE_MR=0 \
    mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none -np 2 --mca pml ob1 --mca btl usnic,self \
    --mca btl_usnic_provider_include dgcheck --mca btl_usnic_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"} \
    --mca btl_usnic_verbose 5 "$WORK/pingpong" >"$WORK/noenforce.log" 2>&1
rc=$?
regs=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^regs=/) { split($i, kv, "="); s += kv[2] } } END { print s + 0 }' "$report")
if [ $rc -eq 0 ] && grep -q "PASS pingpong" "$WORK/noenforce.log" && [ "$regs" -eq 0 ] &&
   grep -q "the provider needs no memory registration" "$WORK/noenforce.log"; then
    ok "without FI_MR_LOCAL nothing is registered (ping-pong passed, 0 registrations)"
else
    fail "no registration without FI_MR_LOCAL" "exit $rc, $regs registrations" "$WORK/noenforce.log"
fi
finish
