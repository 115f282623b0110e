#!/usr/bin/env bash
#
# What each fallback of the socket wire costs, in one run: the usnic BTL
# over loopback with 1472-byte datagrams (what a 1500-MTU network sees;
# btl_usnic_max_datagram 1472), interleaved and repeated, in the
# configurations a kernel or a path may leave it with:
#
#   gso+gro    segmentation offload and coalesced receives (the default)
#   mmsg+gro   no offload (btl_usnic_sock_gso 0: what a path whose GSO
#              send failed with EIO falls back to, and a kernel < 4.18)
#   gso        offload, single receives (btl_usnic_sock_gro 0: a kernel
#              < 5.0)
#   mmsg       neither
#   ofi        the libfabric wire (one sendto per datagram)
#
# Each run is bracketed by vm_state (bench/lib.sh: the VM's cross-core
# state, the median of three bench/cacheline probes: ~60 ns fast, ~350 ns
# slow, split at SLOW_NS); a configuration is
# compared with gso+gro of the same repetition only when both runs saw one
# state, and the table gives the median of those paired ratios.
#
#   bash bench/fallback-cost.sh                # REPS=5, about 3 minutes
#   REPS=3 BUDGET=0.5 bash bench/fallback-cost.sh
#
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"   # bench_build, vm_state, state_letter, transport_args
BUILD_DIR="$BENCH_DIR/build"
REPS=${REPS:-5}
BUDGET=${BUDGET:-0.5}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
CONFIGS=(gso+gro mmsg+gro gso mmsg ofi)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "fallback-cost: $*" >&2; exit 1; }

mkdir -p "$BUILD_DIR/fallback-logs" || die "cannot create $BUILD_DIR"
bench_build perf cacheline || die "building perf.c and cacheline.c failed"

# The configurations as transport_args (bench/lib.sh) names them; every
# run prints its final statistics (btl_usnic_stats), no verbose lines.
declare -A TRANSPORT=([gso+gro]=usnic_gso [mmsg+gro]=usnic_mmsg [gso]=usnic_gso_nogro
                      [mmsg]=usnic_mmsg_nogro [ofi]=usnic_ofi)
TA_USNIC=(--mca btl_usnic_stats 3600)

state() { # f, s or ? (unknown) from vm_state
    local st
    read -r st _ < <(vm_state)
    state_letter "$st"
}

BIND="--bind-to core --map-by core"
timeout 30 mpirun --allow-run-as-root -np 2 $BIND true >/dev/null 2>&1 || BIND="--bind-to none"

CSV="$BUILD_DIR/fallback-runs.csv"
: >"$CSV"
echo "fallback-cost: $REPS repetitions of {${CONFIGS[*]}}, interleaved, 1472-byte datagrams on lo; mpirun $BIND; budget x$BUDGET"
for ((rep = 1; rep <= REPS; ++rep)); do
    # rotate the order each repetition, so that none always runs first
    for ((k = 0; k < ${#CONFIGS[@]}; ++k)); do
        c=${CONFIGS[$(((k + rep - 1) % ${#CONFIGS[@]}))]}
        log="$BUILD_DIR/fallback-logs/$c-$rep.log"
        before=$(state)
        transport_args "${TRANSPORT[$c]}"
        # shellcheck disable=SC2086
        timeout "$RUN_TIMEOUT" mpirun --allow-run-as-root -np 2 $BIND "${TARGS[@]}" \
            "$BENCH_BIN/perf" --budget "$BUDGET" --only lat,bw,rate >"$log" 2>&1
        rc=$?
        after=$(state)
        st=$([[ "$before" == "$after" ]] && echo "$before" || echo m)
        if [[ $rc -ne 0 ]]; then
            echo "  rep $rep/$REPS  $c: FAILED (exit $rc, $log)"
            continue
        fi
        gso=$(grep "final stats" "$log" | grep -oE "\bgso_sends=[0-9]+" | cut -d= -f2 | paste -sd+ | bc 2>/dev/null)
        mm=$(grep "final stats" "$log" | grep -oE "\bmmsg_sends=[0-9]+" | cut -d= -f2 | paste -sd+ | bc 2>/dev/null)
        gro=$(grep "final stats" "$log" | grep -oE "\bgro_recvs=[0-9]+" | cut -d= -f2 | paste -sd+ | bc 2>/dev/null)
        awk -v rep="$rep" -v c="$c" -v st="$st" '/^PERF label/ {
                for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
                printf "%s,%s,%s,%s,%s,%s\n", rep, c, st, v["metric"], v["size"], v["value"]
            }' "$log" >>"$CSV"
        printf '  rep %d/%d  %-9s ok  VM %s  (gso_sends %s, mmsg_sends %s, gro_recvs %s)\n' "$rep" "$REPS" "$c" \
            "$before->$after" "${gso:-0}" "${mm:-0}" "${gro:-0}"
    done
done

echo
echo "Median of each configuration (all runs), and of its paired ratio to gso+gro of the same"
echo "repetition when both saw one VM state (n = pairs); latency: us, lower is better; bandwidth:"
echo "MB/s and rate: messages/s, higher is better."
awk -F, -v configs="${CONFIGS[*]}" '
    function median(list,   a, n, i, t, j) {
        n = split(list, a, " ")
        for (i = 2; i <= n; ++i) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; --j) a[j + 1] = a[j]; a[j + 1] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        key = $4 " " $5
        val[$1, $2, key] = $6; st[$1, $2] = $3; all[$2, key] = all[$2, key] " " $6
        if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
        if ($1 > reps) reps = $1
    }
    END {
        nc = split(configs, c, " ")
        printf "%-16s", "cell"
        for (j = 1; j <= nc; ++j) printf "  %-20s", c[j]
        printf "\n"
        for (k = 1; k <= nk; ++k) {
            split(keys[k], kk, " ")
            if (!((kk[1] == "lat" && (kk[2] == 8 || kk[2] == 16384)) || (kk[1] == "bw" && kk[2] == 1048576) ||
                  kk[1] == "rate")) continue
            printf "%-16s", keys[k]
            for (j = 1; j <= nc; ++j) {
                if (!((c[j], keys[k]) in all)) { printf "  %-20s", "-"; continue }
                m = median(all[c[j], keys[k]])
                r = ""; n = 0
                for (i = 1; i <= reps; ++i) {
                    if (((i, c[j], keys[k]) in val) && ((i, "gso+gro", keys[k]) in val) &&
                        st[i, c[j]] == st[i, "gso+gro"] && st[i, c[j]] != "m" && val[i, "gso+gro", keys[k]] > 0) {
                        r = r " " val[i, c[j], keys[k]] / val[i, "gso+gro", keys[k]]; ++n
                    }
                }
                cell = sprintf("%.4g", m)
                if (c[j] != "gso+gro") cell = cell sprintf(" (%s, n=%d)", n ? sprintf("%.2fx", median(r)) : "-", n)
                printf "  %-20s", cell
            }
            printf "\n"
        }
    }' "$CSV"
echo "runs: $CSV; logs: $BUILD_DIR/fallback-logs/"
