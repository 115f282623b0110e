#!/usr/bin/env bash
#
# Emulated PUT under MPI: large transfers among 3 and 4 ranks that ob1
# moves with btl_put (the BTL's counters must show PUT datagrams written),
# receive buffers with guard zones freed right after use, one-sided MPI
# (Open MPI 4.1: osc pt2pt; 5.0: osc rdma through the BTL base's AM RDMA
# emulation, with no flags), and an on-path attacker (forge_put) answering every PUT
# datagram with forgeries (wrong key, out of range, stale key, wrong peer)
# while the job runs, with protection full (the tag stops them) and none
# (the PUT checks must): the data and the guard zones must stay intact and
# the counters must show the forgeries dropped.  Ends with
# "N passed, N failed".  USNIC_WIRE (test/lib.sh): --mca btl_usnic_wire on
# every job.
#
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../lib.sh
. "$ROOT/test/lib.sh"  # OVERSUBSCRIBE, OOB_LO, OSC_ARGS, series_dir
BUILD=${FAULT_TEST_BUILD_DIR:-$(series_dir "$HERE/build")}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; [[ -n "${2:-}" ]] && tail -25 "$2" | sed 's/^/     /'; failed=$((failed + 1)); }

mkdir -p "$BUILD"
for prog in put_stress onesided; do
    mpicc -O2 -Wall -Wextra -Werror -I"$ROOT/test/mpi" -o "$BUILD/$prog" "$ROOT/test/mpi/$prog.c" ||
        { echo "0 passed, 1 failed"; exit 1; }
done
cc -O2 -Wall -Wextra -Werror -o "$BUILD/forge_put" "$HERE/forge_put.c" || { echo "0 passed, 1 failed"; exit 1; }

MPIRUN=(mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none --mca pml ob1 --mca btl usnic,self
        --mca btl_usnic_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"} --mca btl_usnic_stats 3600
        ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"})
print_wire
log=$(mktemp)
flog=$(mktemp)
trap 'rm -f "$log" "$flog"' EXIT

# sum of counter NAME over the final stats lines of all ranks
counter() { grep "final stats" "$log" | grep -oE " $1=[0-9]+" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'; }
# ranks whose final stats show PUT datagrams written into their memory
ranks_with_puts() { grep "final stats" "$log" | grep -cE " put_recvs=[1-9]"; }

# --- 1. large transfers by PUT, 3 and 4 ranks ---
for spec in "3 64 1" "4 16 1"; do
    read -r np mib secs <<<"$spec"
    timeout 240 "${MPIRUN[@]}" -np "$np" "$BUILD/put_stress" "$mib" "$secs" >"$log" 2>&1
    rc=$?
    if [[ $rc -eq 0 ]] && grep -q "PASS put_stress" "$log"; then
        ok "put_stress $np ranks, 64 KiB..$mib MiB: data and guard zones verified"
    else
        bad "put_stress $np ranks (rc=$rc)" "$log"
    fi
    if [[ $(ranks_with_puts) -eq $np && $(counter drop_bad_put) -eq 0 ]]; then
        ok "put_stress $np ranks: every rank received by PUT ($(counter put_recvs) datagrams, $(counter puts) PUTs)"
    else
        bad "put_stress $np ranks: PUT not used by every rank ($(ranks_with_puts) of $np) or bad PUTs counted" "$log"
    fi
done

# --- 2. one-sided MPI (only usnic joins the ranks: it carries it all) ---
osc_name="osc ${OSC_ARGS[2]:-rdma, no flags}"
for np in 2 3 4; do
    timeout 120 "${MPIRUN[@]}" -np "$np" ${OSC_ARGS[@]+"${OSC_ARGS[@]}"} "$BUILD/onesided" >"$log" 2>&1
    rc=$?
    if [[ $rc -eq 0 ]] && grep -q "PASS onesided" "$log" &&
       [[ $(grep "final stats" "$log" | grep -cE " frag_sends=[1-9]") -eq $np ]]; then
        ok "onesided $np ranks ($osc_name): put, get, accumulate, passive target, fetch_and_op, compare_and_swap, get_accumulate, post/start verified, over usnic"
    else
        bad "onesided $np ranks, $osc_name (rc=$rc)" "$log"
    fi
done

# --- 3. forged PUTs from an on-path attacker during the job ---
# run_forger MODE: the attack with btl_usnic_protection MODE.  With "full"
# no forgery passes the tag (drop_bad_mac); with "none" they all reach
# the PUT checks behind it, which must drop them just as well.
run_forger() {
    local mode=$1
    timeout 180 "${MPIRUN[@]}" --mca btl_usnic_protection "$mode" --mca btl_usnic_verbose 5 -np 3 \
        "$BUILD/put_stress" 16 8 >"$log" 2>&1 &
    local job=$!
    for _ in $(seq 1 100); do
        [[ $(grep -c "ports [0-9]*/[0-9]*" "$log") -ge 3 ]] && break
        sleep 0.1
    done
    local ports
    ports=$(sed -nE 's/.*ports ([0-9]+)\/([0-9]+).*/\1 \2/p' "$log" | tr '\n' ' ')
    if [[ $(wc -w <<<"$ports") -lt 6 ]]; then
        bad "protection $mode: could not learn the ranks' ports" "$log"
        wait $job
        return
    fi
    # shellcheck disable=SC2086
    timeout 60 "$BUILD/forge_put" 6 $ports >"$flog" 2>&1
    local frc=$?
    wait $job
    local rc=$?
    sed 's/^/     /' "$flog"
    if [[ $rc -eq 0 ]] && grep -q "PASS put_stress" "$log"; then
        ok "protection $mode: put_stress under forged PUTs: data and guard zones verified"
    else
        bad "protection $mode: put_stress under forged PUTs (rc=$rc)" "$log"
    fi
    local kinds_sent=0 k n
    for k in wrong-key out-of-range wrong-peer stale-key; do
        n=$(sed -nE "s/^forge_put: $k ([0-9]+)$/\1/p" "$flog")
        [[ ${n:-0} -gt 0 ]] && kinds_sent=$((kinds_sent + 1))
    done
    if [[ $frc -eq 0 && $kinds_sent -eq 4 ]]; then
        ok "protection $mode: forge_put sent all 4 kinds of forgery"
    else
        bad "protection $mode: forge_put (rc=$frc, $kinds_sent of 4 kinds sent)" "$flog"
    fi
    local bad_put after_dereg bad_mac
    bad_put=$(counter drop_bad_put)
    after_dereg=$(counter put_after_dereg)
    bad_mac=$(counter drop_bad_mac)
    if [[ $mode == full && $bad_mac -gt 0 && $bad_put -eq 0 ]]; then
        ok "protection full: forgeries fail the tag (drop_bad_mac=$bad_mac), none reaches the PUT checks"
    elif [[ $mode == none && $bad_put -gt 0 && $after_dereg -gt 0 && $bad_mac -eq 0 ]]; then
        ok "protection none: the PUT checks drop the forgeries unwritten: drop_bad_put=$bad_put put_after_dereg=$after_dereg"
    else
        bad "protection $mode: forgeries not accounted for (drop_bad_mac=$bad_mac drop_bad_put=$bad_put put_after_dereg=$after_dereg)" "$log"
    fi
}
run_forger full
run_forger none
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
