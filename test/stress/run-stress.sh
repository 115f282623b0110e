#!/usr/bin/env bash
#
# run-stress.sh - the randomized differential stress (stress.c, README.md)
# over the usnic BTL, each run compared case by case with the same cases
# over vader (same PML and osc: only the BTL differs; on Open MPI 5.0 its
# successor sm, test/lib.sh's SHM_BTL).
#
#   bash test/stress/run-stress.sh                 CI: a few minutes
#   bash test/stress/run-stress.sh --minutes 30    soak: fresh seeds until then
#
# CI runs, each STRESS_SECONDS long (default 20):
#   - the named regression shapes of issue 12 (fixed; each failed before
#     its fix), and the fixed regression seeds below;
#   - a fresh seed (printed; replay with STRESS_SEED=S) at 2, 3 and 4 ranks
#     on a lossless loopback, at 2 and 4 ranks with 1% UDP loss (nftables
#     in a private namespace), at 3 ranks with the injector's duplication
#     and reordering, and at 2 and 4 ranks on a busy host (a CPU hog per
#     core, so that timeouts fire while peers hold their data).
# A run passes if its cases verify, it did not hang, its digests equal the
# vader run's, and the usnic BTL really carried it (MPI_T counter > 0).
#
# Environment: STRESS_SEED (fresh seed), STRESS_SECONDS, STRESS_WATCHDOG
# (120: seconds one case may take before the ranks report a hang and
# end), STRESS_BUILD_DIR, MPICC, MPIRUN, USNIC_OMPI (test/lib.sh).  Output: ok/FAIL lines, then "N passed, N failed".

set -u
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"  # OVERSUBSCRIBE, OOB_LO, series_dir (the Open MPI series)
ROOT=$(cd "$HERE/../.." && pwd)
SECONDS_PER_RUN=${STRESS_SECONDS:-20}
WATCHDOG=${STRESS_WATCHDOG:-120}   # seconds a case may take before a rank calls it a hang
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}
BUILD=${STRESS_BUILD_DIR:-$(series_dir "$HERE/build")}
SOAK_MINUTES=0
if [[ "${1:-}" == "--minutes" ]]; then
    SOAK_MINUTES=${2:?--minutes needs a number}
fi
mkdir -p "$BUILD/logs" || exit 2
BUILD=$(cd "$BUILD" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# shellcheck source=../report.sh
source "$HERE/../report.sh"
# shellcheck source=../faults/netns.sh
source "$HERE/../faults/netns.sh"

if ! "$MPICC" -O2 -g -Wall -Wextra -Werror -I"$ROOT/bench" -o "$BUILD/stress" \
        "$HERE"/stress.c "$HERE"/stress_types.c "$HERE"/stress_p2p.c "$HERE"/stress_osc.c -lpthread -lm \
        > "$BUILD/logs/build.log" 2>&1; then
    fail "build the stress program" "compiler errors" "$BUILD/logs/build.log"
    finish
fi

# Protocol boundaries the sizes cluster around: ob1's limits for this BTL
# and the datagram sizes (tiny, one datagram, two chunks)
param() {
    ompi_info --param btl usnic --level 9 --parsable 2>/dev/null |
        sed -nE "s/^mca:btl:usnic:param:btl_usnic_$1:value:([0-9]+)$/\1/p" | head -1
}
prio=$(param priority_limit)
[[ -z "$prio" || "$prio" -eq 0 ]] && prio=768
LIMITS="1,16,$((prio - 28)),1444,2864"
for p in rndv_eager_limit eager_limit max_send_size rdma_pipeline_send_length min_rdma_pipeline_size \
         rdma_pipeline_frag_size; do
    v=$(param "$p")
    [[ -n "$v" ]] && LIMITS="$LIMITS,$v"
done
LIMITS="$LIMITS,4194304"

COMMON=(--allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none --mca pml ob1 ${OSC_ARGS[@]+"${OSC_ARGS[@]}"}
        ${OOB_LO[@]+"${OOB_LO[@]}"})
USNIC=(--mca btl usnic,self --mca btl_usnic_if_include lo --mca btl_usnic_stats 15)
# the reference: Open MPI's shared-memory BTL (vader in 4.1, sm in 5.0,
# where "vader" is only an alias)
VADER=(--mca btl "$SHM_BTL,self")

# counter NAME LOG: a final-statistics counter summed over all ranks
counter() {
    grep 'final stats' "$2" | grep -v ' peer ' | grep -oE " $1=[0-9]+" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'
}

# What the condition did to the run, for its ok line and its proof
# (REQUIRE: "timeouts" = some retransmission timer fired, "injected" = the
# injector duplicated and reordered)
condition_summary() {
    local log=$1 dups reorders
    dups=$(injected "$log" duplicated)
    reorders=$(injected "$log" reordered)
    SUMMARY="resends $(counter resends "$log"), timeouts $(counter timeout_retrans "$log") ($(counter spurious_timeouts "$log") premature)"
    [[ $dups -gt 0 ]] && SUMMARY="$SUMMARY, $dups duplicated and $reorders reordered by the injector"
    case "${REQUIRE:-}" in
        timeouts) [[ $(counter timeout_retrans "$log") -gt 0 ]] ;;
        injected) [[ $dups -gt 0 && $reorders -gt 0 ]] ;;
        *) true ;;
    esac
}

# run_one NAME NP SEED ARGS -- [launcher prefix...]: usnic for the run's
# time (or its case count), then vader over the same cases; compares.
run_one() {
    local name=$1 np=$2 seed=$3
    shift 3
    local args=() prefix=() extra=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do args+=("$1"); shift; done
    [[ "${1:-}" == "--" ]] && shift
    while [[ $# -gt 0 && "$1" != "--mca" ]]; do prefix+=("$1"); shift; done
    extra=("$@")
    local tag=${name// /_}
    local ulog=$BUILD/logs/$tag.usnic.log vlog=$BUILD/logs/$tag.vader.log
    local udig=$BUILD/logs/$tag.usnic.digests vdig=$BUILD/logs/$tag.vader.digests
    local limit=$((SECONDS_PER_RUN + 240))
    timeout -k 10 "$limit" ${prefix[@]+"${prefix[@]}"} "$MPIRUN" "${COMMON[@]}" "${USNIC[@]}" \
        ${extra[@]+"${extra[@]}"} -np "$np" "$BUILD/stress" --seed "$seed" --limits "$LIMITS" \
        --digest-file "$udig" --watchdog "$WATCHDOG" "${args[@]}" > "$ulog" 2>&1 < /dev/null
    local urc=$?
    local cases sent
    cases=$(sed -nE 's/^stress: seed [0-9]+: ([0-9]+) cases.*/\1/p' "$ulog" | tail -1)
    sent=$(sed -nE 's/.*usnic segments sent: (-?[0-9]+).*/\1/p' "$ulog" | tail -1)
    TOTAL_CASES=$((TOTAL_CASES + ${cases:-0}))
    if [[ $urc -eq 124 || $urc -eq 137 ]]; then
        fail "$name: seed $seed" "hung (killed after ${limit}s)" "$ulog"
        return
    fi
    if [[ $urc -ne 0 || -z "$cases" ]]; then
        fail "$name: seed $seed" "$(grep -m1 -E '^FAIL' "$ulog" || echo "exit $urc")" "$ulog"
        return
    fi
    if [[ "${sent:--1}" -le 0 ]]; then
        fail "$name: seed $seed" "the usnic BTL carried nothing (segments sent: ${sent:-?})" "$ulog"
        return
    fi
    if ! condition_summary "$ulog"; then
        fail "$name: seed $seed" "the condition did not happen (${REQUIRE}): $SUMMARY" "$ulog"
        return
    fi
    # the same cases over vader
    local vargs=()
    for a in "${args[@]}"; do vargs+=("$a"); done
    timeout -k 10 "$limit" "$MPIRUN" "${COMMON[@]}" "${VADER[@]}" -np "$np" "$BUILD/stress" --seed "$seed" \
        --limits "$LIMITS" --digest-file "$vdig" --watchdog "$WATCHDOG" "${vargs[@]}" --cases "$cases" --seconds 0 \
        > "$vlog" 2>&1 < /dev/null
    local vrc=$?
    if [[ $vrc -ne 0 ]]; then
        fail "$name: seed $seed" "the $SHM_BTL reference failed (exit $vrc): not the usnic BTL's fault, but nothing was compared" "$vlog"
        return
    fi
    local first
    first=$(diff <(cut -d' ' -f1-4 "$udig") <(cut -d' ' -f1-4 "$vdig") | grep -m1 '^<' | cut -c3-)
    if [[ -n "$first" ]]; then
        fail "$name: seed $seed" "usnic and $SHM_BTL received different bytes, first in: $first" "$ulog"
        return
    fi
    ok "$name: seed $seed, $cases cases verified, digests equal to $SHM_BTL's ($sent usnic segments; $SUMMARY)"
}

# Busy host: hogs_start / hogs_stop (test/lib.sh) around a run
trap 'hogs_stop; netns_destroy' EXIT INT TERM

fresh_seed() { od -An -N6 -tu8 /dev/urandom | tr -d ' '; }

# One round of every condition with seed $1, $2 seconds per run
round() {
    local seed=$1 secs=$2
    local t=(--seconds "$secs")
    for np in 2 3 4; do
        run_one "lossless $np ranks" "$np" "$seed" "${t[@]}" --
    done
    if netns_create && netns_set_udp_loss 1; then
        for np in 2 4; do
            run_one "1% loss $np ranks" "$np" "$seed" "${t[@]}" -- ip netns exec "$NETNS"
        done
        echo "    (the 1% rule dropped $(netns_udp_dropped) datagrams)"
        netns_destroy
    else
        fail "1% loss" "cannot make a network namespace with an nftables drop rule (root, iproute2, nftables)"
        netns_destroy
    fi
    REQUIRE=injected run_one "duplication and reordering 3 ranks" 3 "$seed" "${t[@]}" -- \
        --mca btl_usnic_inject_faults dup=7,reorder=5
    hogs_start
    for np in 2 4; do
        REQUIRE=timeouts run_one "busy host $np ranks" "$np" "$seed" "${t[@]}" --
    done
    hogs_stop
}

TOTAL_CASES=0
start=$(date +%s)

if [[ "$SOAK_MINUTES" != 0 ]]; then
    end=$((start + SOAK_MINUTES * 60))
    while [[ $(date +%s) -lt $end ]]; do
        seed=$(fresh_seed)
        echo "=== soak round, seed $seed ==="
        round "$seed" 60
    done
    echo "soak: $TOTAL_CASES cases in $(( $(date +%s) - start ))s"
    finish
fi

# The shapes of issue 12, each of which failed before it was fixed
run_one "regression: sendrecv of 65530 ints into a nested type" 2 12 --regress sendrecv-nested --cases 30 --
run_one "regression: ping-ping of 65530 ints into a nested type" 2 12 --regress pingping-nested --cases 30 --
run_one "regression: put through nested types, fence and pscw" 4 12 --regress osc-nested-put --cases 20 --
if [[ "$LAUNCHER" == orte || -n "${STRESS_FULL:-}" ]]; then
    run_one "regression: put of int+double pairs through nested types" 4 12 --regress osc-nested-put-pair --cases 20 --
else
    not_run "regression: put of int+double pairs through nested types" \
        "Open MPI $OMPI_SERIES's reference for it (osc/rdma over sm) grows to 8.7 GB per rank and is OOM-killed after ~45 s (the usnic run passes): nothing to compare with; STRESS_FULL=1 runs it"
fi
run_one "regression: bcast of one int+double" 4 12 --regress bcast-pair --cases 5 --
run_one "regression: accumulate + flush_local loop" 3 12 --regress accumulate-flush-local --cases 3 --

# Open MPI 5.0.10 itself corrupts some of the generator's derived-datatype
# cases (README.md), whatever the BTL: the random rounds would compare
# usnic with a reference that fails the same cases.  Until the generator
# avoids 5.0's shapes, as it does 4.1.4's, they are not run there.
if [[ "$LAUNCHER" != orte && -z "${STRESS_FULL:-}" ]]; then
    not_run "regression seeds 7, 2, 22 and the fresh-seed rounds" \
        "Open MPI $OMPI_SERIES corrupts some random derived-datatype cases over every BTL (seed 7 case 80 at 3 ranks fails over sm as over usnic; seed 1918446976295 case 43 over tcp, sm and usnic, its case 25 over sm and tcp: bytes in gaps of the type map and in the data); the generator does not avoid 5.0's shapes yet, so a differential run has no sound reference (STRESS_FULL=1 runs them anyway)"
    echo "stress: $TOTAL_CASES cases over usnic in $(( $(date +%s) - start ))s"
    finish
fi

# Seeds (and rank counts) whose random cases found bugs before their fixes,
# with the limits above: at 3 ranks, lossless, 7 (a crash in ob1's unpack,
# or a hang in case 67) and 2 (wrong bytes in case 85, a one-sided get);
# 22 at 2 ranks, 1% loss: a receiver looping in ob1's unpack inside our
# progress function while its peer retransmits (the stall)
run_one "regression seed 7 at 3 ranks" 3 7 --cases 120 --
run_one "regression seed 2 at 3 ranks" 3 2 --cases 120 --
if netns_create && netns_set_udp_loss 1; then
    run_one "regression seed 22 at 2 ranks, 1% loss" 2 22 --cases 400 -- ip netns exec "$NETNS"
else
    fail "regression seed 22 at 2 ranks, 1% loss" "cannot make a network namespace with an nftables drop rule"
fi
netns_destroy

seed=${STRESS_SEED:-$(fresh_seed)}
echo "=== fresh seed $seed (replay: STRESS_SEED=$seed bash test/stress/run-stress.sh) ==="
round "$seed" "$SECONDS_PER_RUN"
echo "stress: $TOTAL_CASES cases over usnic in $(( $(date +%s) - start ))s"
finish
