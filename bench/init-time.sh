#!/usr/bin/env bash
#
# init-time.sh: MPI_Init and MPI_Finalize of a 2-rank job on this host
# (bench/init_time.c) for the usnic BTL on each wire and btl/tcp, in one
# table.  Runs interleave the transports; the table gives medians of
# MPI_Init (to the end of a first broadcast, slowest rank), MPI_Finalize
# (rank 0) and the whole mpirun over the rounds of the VM state most
# rounds saw (probed before and after each round; a round whose probes
# differ counts in none), and usnic's ratios to tcp from those.
#
#   bash bench/init-time.sh
#   INIT_RUNS=11 bash bench/init-time.sh
#   BASE_DIR=bench/build/baseline-components bash bench/init-time.sh
#       (adds usnic_base: the plugin in that component directory, as
#        patterns.sh's BASELINE_PLUGIN leaves it)

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"   # bench_build, transport_args, vm_state, median
RUNS=${INIT_RUNS:-7}
BASE_DIR=${BASE_DIR:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

bench_build init_time cacheline || exit 2
TA_USNIC=()   # no verbose lines, no statistics
TRANSPORTS=(usnic usnic_ofi tcp)
[[ -n $BASE_DIR && -f $BASE_DIR/mca_btl_usnic.so ]] && TRANSPORTS+=(usnic_base)

declare -A INIT FIN WALL   # by "state transport": blank-separated values
states=""
for run in $(seq 1 "$RUNS"); do
    read -r st0 _ < <(vm_state)
    declare -A round_init=() round_fin=() round_wall=()
    for t in "${TRANSPORTS[@]}"; do
        transport_args "$t"
        start=$(date +%s%N)
        line=$(env ${TENV[@]+"${TENV[@]}"} timeout 120 mpirun --allow-run-as-root --bind-to core -np 2 \
               "${TARGS[@]}" "$BENCH_BIN/init_time" 2>&1 | grep '^init_ms')
        wall=$(( ($(date +%s%N) - start) / 1000000 ))
        read -r _ init _ fin <<<"$line"
        [[ -n ${init:-} ]] || { echo "run $run over $t failed"; continue; }
        round_init[$t]=$init round_fin[$t]=$fin round_wall[$t]=$wall
    done
    read -r st1 _ < <(vm_state)
    [[ $st0 == "$st1" ]] || st0=mixed
    states+="$(state_letter "$st0")"
    for t in "${!round_init[@]}"; do
        INIT["$st0 $t"]+="${round_init[$t]} " FIN["$st0 $t"]+="${round_fin[$t]} " WALL["$st0 $t"]+="${round_wall[$t]} "
    done
done
# the state most rounds saw, mixed rounds left out
st=$(grep -o '[fs]' <<<"$states" | sort | uniq -c | sort -rn | awk 'NR == 1 {print ($2 == "f") ? "fast" : "slow"}')
st=${st:-none}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b>0 && a!="-") printf "%.2fx", a/b; else print "-"}'; }

printf '%-10s %10s %12s %10s %10s %10s\n' transport init_ms finalize_ms mpirun_ms init/tcp mpirun/tcp
ti=$(median <<<"${INIT["$st tcp"]:-}"); tw=$(median <<<"${WALL["$st tcp"]:-}")
for t in "${TRANSPORTS[@]}"; do
    i=$(median <<<"${INIT["$st $t"]:-}"); f=$(median <<<"${FIN["$st $t"]:-}"); w=$(median <<<"${WALL["$st $t"]:-}")
    printf '%-10s %10s %12s %10s %10s %10s\n' "$t" "$i" "$f" "$w" "$(ratio "$i" "$ti")" "$(ratio "$w" "$tw")"
done
echo "(medians over the $st rounds of $RUNS interleaved ones, 2 ranks bound to cores; VM state per round, f/s/m(ixed): $states)"
