#!/usr/bin/env bash
#
# Hostile datagrams: while a 2-rank job does verified ping-pongs over the
# usnic BTL, separate processes send malformed, forged (a guessed tag, an
# unknown sender, another source address) and oversized datagrams to both
# channels of both ranks, most of them from the claimed sender's own port
# so that they reach the checks behind the source check, and replay
# genuine datagrams of the job captured on loopback, at once and in bursts
# seconds later (127.0.0.1 only).  The job must finish with correct data,
# and the BTL's counters must show each kind of forgery and the replays
# dropped.  Needs root (raw sockets).  test/attack has the attacker suite.  Ends with
# "N passed, N failed".
#
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"  # OVERSUBSCRIBE, OOB_LO, series_dir (the Open MPI series)
print_wire
BUILD=${FAULT_TEST_BUILD_DIR:-$(series_dir "$HERE/build")}
ROUNDS=${ROUNDS:-64}
SOAK_SECONDS=${SOAK_SECONDS:-10}   # outlasts capture (<= 1.5 s) and the bursts
REPLAY_CAPTURE=${REPLAY_CAPTURE:-2000}  # genuine datagrams to capture
REPLAY_BURSTS=${REPLAY_BURSTS:-4}       # each sent this many times,
REPLAY_GAP_MS=${REPLAY_GAP_MS:-1000}    # this far apart
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; [[ -n "${2:-}" ]] && tail -25 "$2" | sed 's/^/     /'; failed=$((failed + 1)); }

mkdir -p "$BUILD"
mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/soak" "$HERE/soak.c" &&
    cc -O2 -Wall -Wextra -Werror -o "$BUILD/inject" "$HERE/inject.c" &&
    cc -O2 -Wall -Wextra -Werror -o "$BUILD/replay" "$HERE/replay.c" || { echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
injlog=$(mktemp)
replog=$(mktemp)
trap 'rm -f "$log" "$injlog" "$replog"' EXIT
timeout 120 mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none -np 2 --mca pml ob1 --mca btl usnic,self \
    --mca btl_usnic_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"} --mca btl_usnic_verbose 5 \
    --mca btl_usnic_stats 3600 ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"} "$BUILD/soak" "$SOAK_SECONDS" >"$log" 2>&1 &
job=$!

# wait for both ranks' ports (priority/data, in rank order)
for _ in $(seq 1 100); do
    [[ $(grep -c "ports [0-9]*/[0-9]*" "$log") -ge 2 ]] && break
    sleep 0.1
done
ports=$(sed -nE 's/.*rank ([0-9]+): module on .* ports ([0-9]+)\/([0-9]+).*/\1 \2 \3/p' "$log" | sort -n |
        awk '{print $2, $3}' | tr '\n' ' ')
if [[ $(wc -w <<<"$ports") -lt 4 ]]; then
    bad "could not learn the job's ports" "$log"
    wait $job
    echo "$passed passed, $failed failed"
    exit 1
fi
sleep 0.5
# Replays (captured from the job's own traffic between these ports only)
# run while the forgeries go out; the last burst comes seconds later.  The
# forgeries start once the capture is over: they come from the job's
# ports too, and a captured forgery replayed is no replay of a genuine
# datagram (with 65000-byte datagrams, which the socket wire sends on
# loopback, the job's small datagrams are fewer and forgeries made up a
# quarter of the capture).
# shellcheck disable=SC2086
timeout 60 "$BUILD/replay" "$REPLAY_CAPTURE" 1.5 "$REPLAY_BURSTS" "$REPLAY_GAP_MS" $ports >"$replog" 2>&1 &
replayer=$!
for _ in $(seq 1 50); do
    grep -q "^replay: captured" "$replog" && break
    sleep 0.1
done
# shellcheck disable=SC2086
timeout 60 "$BUILD/inject" "$ROUNDS" $ports >"$injlog" 2>&1
inj_rc=$?
wait $replayer
rep_rc=$?
kill -0 $job 2>/dev/null && job_alive=1 || job_alive=0
wait $job
rc=$?
cat "$injlog" "$replog"

if [[ $rc -eq 0 ]] && grep -q "PASS soak" "$log"; then ok "job completes with verified data under attack"; else bad "job under attack (rc=$rc)" "$log"; fi
if [[ $inj_rc -eq 0 ]]; then ok "injector ran"; else bad "injector failed (rc=$inj_rc)" "$injlog"; fi

captured=$(sed -nE 's/^replay: captured ([0-9]+) .*/\1/p' "$replog")
replayed=$(sed -nE 's/^replay: total ([0-9]+) datagrams \(([0-9]+) data segments\) in ([0-9]+) bursts/\1 \2 \3/p' "$replog")
read -r rep_total rep_data rep_bursts <<<"${replayed:-0 0 0}"
if [[ $rep_rc -eq 0 && ${captured:-0} -gt 0 && $rep_data -gt 0 && $rep_bursts -eq $REPLAY_BURSTS ]]; then
    ok "captured ${captured} genuine datagrams, replayed $rep_total ($rep_data data segments) in $rep_bursts bursts"
else
    bad "capture/replay did not happen (rc=$rep_rc, captured ${captured:-0}, replayed $rep_total/$rep_data)" "$replog"
fi
if [[ $job_alive -eq 1 ]]; then ok "the last replay burst reached a running job"; else bad "job ended before the replays did (raise SOAK_SECONDS)"; fi

final=$(grep "final stats" "$log" | grep -v " peer ")
sum() { grep -oE "\b($1)=[0-9]+" <<<"$final" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'; }
for counter in drop_truncated drop_bad_magic drop_bad_version drop_bad_mac drop_bad_type drop_unknown_peer \
               drop_bad_source drop_bad_chunk drop_oversized; do
    n=$(sum "$counter")
    if [[ $n -gt 0 ]]; then ok "forgeries counted as $counter ($n)"; else bad "no $counter counted" "$log"; fi
done

# Every oversized datagram is counted as such, whatever its head looks like
# (garbage longer than the priority channel's MTU adds to the count).
oversized_sent=$(grep "inject: oversized" "$injlog" | awk '{s += $(NF - 1)} END {print s + 0}')
n=$(sum drop_oversized)
if [[ $oversized_sent -gt 0 && $((2 * n)) -ge $oversized_sent ]]; then
    ok "oversized datagrams counted as drop_oversized ($n of $oversized_sent sent)"
else
    bad "oversized: $n counted of $oversized_sent sent" "$log"
fi

# Every replayed datagram carries a nonce the receiver has taken (the
# capture holds only the job's own datagrams, of every size): at least 90%
# of them must show up as drop_replay (the kernel may drop a few on a full
# socket buffer).
n=$(sum drop_replay)
if [[ $rep_total -gt 0 && $((10 * n)) -ge $((9 * rep_total)) ]]; then
    ok "replayed datagrams dropped as drop_replay ($n for $rep_total replayed, $rep_data of them data)"
else
    bad "replays: only $n drop_replay for $rep_total replayed datagrams" "$log"
fi
for counter in drop_replay dup_recvs oow_low_recvs old_dup_acks dup_acks resends; do
    echo "     $counter: $(sum "$counter")"
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
