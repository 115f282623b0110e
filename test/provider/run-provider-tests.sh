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
# 3. runs a ping-pong with message prefixes of 13 (headers unaligned) and
#    1000 bytes;
# 4. shows that the checker bites: a plugin built to post ACKs without
#    their descriptor (OPAL_BTL_USNIC_TEST_BREAK_ACK_DESC) must be caught;
# 5. runs the usnic extension end to end: a plugin built against the unit
#    tests' stand-in rdma/fi_ext_usnic.h must take netmask, link speed and
#    interface name from dgcheck's answer (verbose line);
# 6. shows that a provider that needs no registration gets none
#    (DGCHECK_ENFORCE_MR=0).
#
# Environment: SUITES (default "mpi threads dupreorder put loss hosts";
# empty: only the provider and the checks of 3 to 6), USNIC_OMPI (another
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

# build_variant NAME CPPFLAGS: a component directory holding a plugin built
# with CPPFLAGS and every other component of this Open MPI (two usnic BTLs
# on the path would clash); prints its path, empty if the build failed
pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
build_variant() {
    local dir=$WORK/components-$1
    mkdir -p "$dir"
    for f in "$pkglibdir"/mca_*.so; do
        [ "$(basename "$f")" = mca_btl_usnic.so ] || ln -s "$f" "$dir/"
    done
    if make -C "$ROOT" --no-print-directory ${USNIC_OMPI:+OMPI="$USNIC_OMPI"} BUILD="$WORK/build-$1" \
           SO="$dir/mca_btl_usnic.so" CPPFLAGS_EXTRA="$2" "$dir/mca_btl_usnic.so" >"$WORK/build-$1.log" 2>&1; then
        cp "$ROOT/help-mpi-btl-usnic.txt" "$dir/"
        echo "$dir"
    fi
}

# pingpong_on_dgcheck LOG REPORT [VAR=value...] [-- mpirun args]: a
# 2-rank ping-pong with the BTL on dgcheck; sets RC
mpicc -O2 -I"$ROOT/test/mpi" -o "$WORK/pingpong" "$ROOT/test/mpi/pingpong.c"
pingpong_on_dgcheck() {
    local log=$1 report=$2
    shift 2
    local vars=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    : >"$report"
    timeout "$TEST_TIMEOUT" env FI_PROVIDER_PATH="$PROV_DIR" DGCHECK_REPORT="$report" ${vars[@]+"${vars[@]}"} \
        mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none -np 2 --mca pml ob1 --mca btl usnic,self \
        --mca btl_usnic_provider_include dgcheck --mca btl_usnic_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"} \
        "$@" "$WORK/pingpong" >"$log" 2>&1
    RC=$?
}

# ---- prefixes of other sizes: odd (headers unaligned) and large ----
for prefix in 13 1000; do
    pingpong_on_dgcheck "$WORK/prefix-$prefix.log" "$WORK/report.prefix-$prefix" DGCHECK_PREFIX=$prefix
    if [ $RC -eq 0 ] && grep -q "PASS pingpong" "$WORK/prefix-$prefix.log"; then
        ok "ping-pong over dgcheck with a $prefix-byte message prefix"
    else
        fail "ping-pong with a $prefix-byte prefix" "exit $RC" "$WORK/prefix-$prefix.log"
    fi
    report_check "$prefix-byte prefix" "$WORK/report.prefix-$prefix" 2
done

# ---- the injector's held datagram meets a full transmit queue ----
# Duplicates take transmit slots the engine does not count, so with 4
# slots the datagram held back for reordering often finds the queue full.
# It must go out or be released as lost (retransmission resends it), never
# be waited for inside a progress pass: only reading completions frees a
# slot (the hang of CI run 42: 6 in about 245 looped duplication runs)
TEST_TIMEOUT=60 pingpong_on_dgcheck "$WORK/txfull.log" "$WORK/report.txfull" DGCHECK_TX_SIZE=4 \
    -- --mca btl_usnic_inject_faults dup=2,reorder=3
reorders=$(injected "$WORK/txfull.log" reordered)
if [ $RC -eq 0 ] && grep -q "PASS pingpong" "$WORK/txfull.log" && [ "$reorders" -gt 0 ]; then
    ok "held datagrams with 4 transmit slots and every 2nd datagram duplicated: ping-pong passed ($reorders reordered)"
else
    fail "held datagram, full transmit queue" "exit $RC, $reorders reordered" "$WORK/txfull.log"
fi
report_check "full transmit queue" "$WORK/report.txfull" 2

# ---- the checker bites: a plugin that posts ACKs without descriptor ----
broken_dir=$(build_variant broken -DOPAL_BTL_USNIC_TEST_BREAK_ACK_DESC=1)
if [ -n "$broken_dir" ]; then
    report="$WORK/report.broken"
    pingpong_on_dgcheck "$WORK/broken-run.log" "$report" OMPI_MCA_mca_base_component_path="$broken_dir"
    viol=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^violations=/) { split($i, kv, "="); if (kv[2] > m) m = kv[2] } }
                END { print m + 0 }' "$report")
    if [ "$viol" -gt 0 ] && ! grep -q "PASS pingpong" "$WORK/broken-run.log"; then
        ok "a plugin posting ACKs without their descriptor is caught ($viol violations, job failed with exit $RC)"
    else
        fail "broken plugin caught" "violations=$viol, exit $RC" "$WORK/broken-run.log"
    fi
else
    fail "build the deliberately broken plugin" "make failed" "$WORK/build-broken.log"
fi

# ---- the usnic extension end to end ----
# Debian has no rdma/fi_ext_usnic.h: a plugin built against the unit
# tests' stand-in header asks dgcheck (which answers it, built against the
# same stand-in) for netmask, link speed and interface name.  This proves
# the plumbing, not the real ABI (README.txt, Known problems).
ext_dir=$(build_variant ext "-I$ROOT/test/unit/ext-standin -DOPAL_BTL_USNIC_HAVE_FI_EXT_USNIC=1")
if [ -n "$ext_dir" ]; then
    pingpong_on_dgcheck "$WORK/ext-run.log" "$WORK/report.ext" OMPI_MCA_mca_base_component_path="$ext_dir" \
        -- --mca btl_usnic_verbose 5
    line=$(grep -m1 'netmask .* (usnic extension), link .*, interface lo (usnic extension)' \
           "$WORK/ext-run.log")
    if [ $RC -eq 0 ] && grep -q "PASS pingpong" "$WORK/ext-run.log" && [ -n "$line" ]; then
        ok "usnic extension answered end to end:${line#*btl:usnic:}"
    else
        fail "usnic extension end to end" "exit $RC, no '(usnic extension)' line" "$WORK/ext-run.log"
    fi
else
    fail "build the plugin against the stand-in extension header" "make failed" "$WORK/build-ext.log"
fi

# ---- no registration where none is needed ----
pingpong_on_dgcheck "$WORK/noenforce.log" "$WORK/report.noenforce" DGCHECK_ENFORCE_MR=0 -- --mca btl_usnic_verbose 5
regs=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^regs=/) { split($i, kv, "="); s += kv[2] } } END { print s + 0 }' \
       "$WORK/report.noenforce")
if [ $RC -eq 0 ] && grep -q "PASS pingpong" "$WORK/noenforce.log" && [ "$regs" -eq 0 ] &&
   grep -q "the provider needs no memory registration" "$WORK/noenforce.log"; then
    ok "without FI_MR_LOCAL nothing is registered (ping-pong passed, 0 registrations)"
else
    fail "no registration without FI_MR_LOCAL" "exit $RC, $regs registrations" "$WORK/noenforce.log"
fi
finish
