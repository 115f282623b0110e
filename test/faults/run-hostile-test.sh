#!/usr/bin/env bash
#
# Hostile datagrams: while a 2-rank job does verified ping-pongs over the
# usnic BTL, a separate process sends malformed, foreign and out-of-window
# datagrams to both channels of both ranks (127.0.0.1 only).  The job must
# finish with correct data, and the BTL's counters must show each kind of
# forgery dropped.  Ends with "N passed, N failed".
#
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${FAULT_TEST_BUILD_DIR:-$HERE/build}
ROUNDS=${ROUNDS:-64}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; [[ -n "${2:-}" ]] && tail -25 "$2" | sed 's/^/     /'; failed=$((failed + 1)); }

mkdir -p "$BUILD"
mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/soak" "$HERE/soak.c" &&
    cc -O2 -Wall -Wextra -Werror -o "$BUILD/inject" "$HERE/inject.c" || { echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 --mca pml ob1 --mca btl usnic,self \
    --mca btl_usnic_if_include lo --mca oob_tcp_if_include lo --mca btl_usnic_verbose 5 \
    --mca btl_usnic_stats 3600 "$BUILD/soak" 6 >"$log" 2>&1 &
job=$!

# wait for both ranks' ports and the cookie
for _ in $(seq 1 100); do
    [[ $(grep -c "ports [0-9]*/[0-9]*" "$log") -ge 2 ]] && grep -q "job cookie" "$log" && break
    sleep 0.1
done
cookie=$(sed -nE 's/.*job cookie 0x([0-9a-f]+).*/\1/p' "$log" | head -1)
ports=$(sed -nE 's/.*ports ([0-9]+)\/([0-9]+).*/\1 \2/p' "$log" | tr '\n' ' ')
if [[ -z "$cookie" || $(wc -w <<<"$ports") -lt 4 ]]; then
    bad "could not learn the job's cookie and ports" "$log"
    wait $job
    echo "$passed passed, $failed failed"
    exit 1
fi
sleep 0.5
# shellcheck disable=SC2086
"$BUILD/inject" "$cookie" "$ROUNDS" $ports
wait $job
rc=$?

if [[ $rc -eq 0 ]] && grep -q "PASS soak" "$log"; then ok "job completes with verified data under attack"; else bad "job under attack (rc=$rc)" "$log"; fi
final=$(grep "final stats" "$log" | grep -v " peer ")
sum() { grep -oE "$1=[0-9]+" <<<"$final" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'; }
for counter in drop_truncated drop_bad_magic drop_bad_version drop_bad_cookie drop_bad_type drop_unknown_peer \
               drop_bad_chunk "oow_(low|high)_recvs"; do
    n=$(sum "$counter")
    if [[ $n -gt 0 ]]; then ok "forgeries counted as $counter ($n)"; else bad "no $counter counted" "$log"; fi
done
rm -f "$log"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
