#!/usr/bin/env bash
#
# Large messages over the usnic BTL with emulated PUT on and off, same
# binary, interleaved in one run (btl_usnic_flags with and without "put").
#
#   bash bench/put-vs-send.sh            # REPS=5 runs of each, medians
#   REPS=3 bash bench/put-vs-send.sh
#
# With PUT, ob1 registers the receive buffer piece by piece and the BTL
# writes each datagram straight into it; without, each fragment is
# reassembled in a BTL buffer and then copied again by the PML.  The table
# shows median (min-max) bandwidth and 64 KiB latency from usnic_demo, and
# proves from the BTL's counters that PUT was really used (or not).
#
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"   # bench_build, transport_args
BUILD=$HERE/build
REPS=${REPS:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$BUILD"
bench_build usnic_demo || exit 1
TA_USNIC=()   # transport_args usnic: no verbose lines, no statistics
transport_args usnic
csv=$BUILD/put-vs-send.csv
: >"$csv"

declare -A FLAGS=([put]="send,inplace,static,put" [send]="send,inplace,static")
declare -A PUTS=([put]=0 [send]=0)

run_one() { # label rep
    local label=$1 rep=$2 out
    out=$(timeout 300 mpirun -np 2 --bind-to core "${TARGS[@]}" --mca btl_usnic_flags "${FLAGS[$label]}" \
        "$BENCH_BIN/usnic_demo" --label "$label" --csv "$csv" 2>&1)
    local rc=$?
    if [[ $rc -ne 0 ]]; then
        echo "run $rep ($label) failed (exit $rc):"
        tail -20 <<<"$out"
        return 1
    fi
    # the demo prints each counter as: [label] name  rank0  rank1
    local puts
    puts=$(awk '{for (i = 1; i + 2 <= NF; ++i) if ($i == "btl_usnic_num_put_recvs") print $(i + 1) + $(i + 2)}' \
        <<<"$out" | tail -1)
    PUTS[$label]=$(( ${PUTS[$label]} + ${puts:-0} ))
    printf '  run %d/%d %-4s done (PUT segments received: %s)\n' "$rep" "$REPS" "$label" "${puts:-0}"
}

echo "put-vs-send: $REPS interleaved runs of each setting (2 ranks bound to cores, loopback)"
for rep in $(seq 1 "$REPS"); do
    run_one put "$rep" || exit 1
    run_one send "$rep" || exit 1
done

# median (min-max) of label,kind,size over the runs
stat() {
    awk -F, -v l="$1" -v k="$2" -v s="$3" '$1 == l && $2 == k && $3 == s {print $4}' "$csv" | sort -g |
        awk '{v[NR] = $1} END {if (NR == 0) {print "-"; exit} m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
             printf "%.1f (%.0f-%.0f)", m, v[1], v[NR]}'
}
median() { stat "$@" | awk '{print $1}'; }

echo
printf '%-26s %-22s %-22s %s\n' "" "PUT on" "PUT off" "on/off"
for size in 65536 1048576 4194304; do
    on=$(median put bandwidth_MBps $size)
    off=$(median send bandwidth_MBps $size)
    printf '%-26s %-22s %-22s %s\n' "bandwidth $((size / 1024)) KiB (MB/s)" "$(stat put bandwidth_MBps $size)" \
        "$(stat send bandwidth_MBps $size)" "$(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.2fx", a / b}')"
done
on=$(median put latency_us 65536)
off=$(median send latency_us 65536)
printf '%-26s %-22s %-22s %s\n' "latency 64 KiB (us)" "$(stat put latency_us 65536)" "$(stat send latency_us 65536)" \
    "$(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.2fx", a / b}')"
echo
echo "PUT segments received over all runs: PUT on ${PUTS[put]}, PUT off ${PUTS[send]}"
if [[ ${PUTS[put]} -eq 0 || ${PUTS[send]} -ne 0 ]]; then
    echo "put-vs-send: the flag did not switch PUT as expected"
    exit 1
fi
