#!/usr/bin/env bash
#
# init-time.sh: MPI_Init + MPI_Finalize of a 2-rank job on this host, for
# the usnic BTL on each wire and btl/tcp (bench/init_time.c), in one
# table.  Runs interleave the transports; the table gives medians of
# MPI_Init (to the end of a first broadcast, slowest rank), MPI_Finalize
# (rank 0) and the whole mpirun, and usnic's ratios to tcp.
#
#   bash bench/init-time.sh
#   INIT_RUNS=11 bash bench/init-time.sh

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_DIR="$BENCH_DIR/build"
RUNS=${INIT_RUNS:-7}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$BUILD_DIR" || exit 2
mpicc -O2 -Wall -Wextra -Werror -o "$BUILD_DIR/init_time" "$BENCH_DIR/init_time.c" || exit 2

TRANSPORTS=(usnic usnic_ofi tcp)
declare -A BTL=([usnic]="usnic,self --mca btl_usnic_if_include lo"
                [usnic_ofi]="usnic,self --mca btl_usnic_if_include lo --mca btl_usnic_wire ofi"
                [tcp]="tcp,self --mca btl_tcp_if_include lo")
declare -A INIT FIN WALL
for run in $(seq 1 "$RUNS"); do
    for t in "${TRANSPORTS[@]}"; do
        start=$(date +%s%N)
        # shellcheck disable=SC2086
        line=$(timeout 120 mpirun --allow-run-as-root --bind-to core -np 2 --mca pml ob1 \
               --mca btl ${BTL[$t]} "$BUILD_DIR/init_time" 2>&1 | grep '^init_ms')
        wall=$(( ($(date +%s%N) - start) / 1000000 ))
        read -r _ init _ fin <<<"$line"
        [[ -n "$init" ]] || { echo "run $run over $t failed"; continue; }
        INIT[$t]+="$init "; FIN[$t]+="$fin "; WALL[$t]+="$wall "
    done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "-"; else print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b>0 && a!="-") printf "%.2fx", a/b; else print "-"}'; }

printf '%-10s %10s %12s %10s %10s %10s\n' transport init_ms finalize_ms mpirun_ms init/tcp mpirun/tcp
ti=$(median <<<"${INIT[tcp]:-}"); tw=$(median <<<"${WALL[tcp]:-}")
for t in "${TRANSPORTS[@]}"; do
    i=$(median <<<"${INIT[$t]:-}"); f=$(median <<<"${FIN[$t]:-}"); w=$(median <<<"${WALL[$t]:-}")
    printf '%-10s %10s %12s %10s %10s %10s\n' "$t" "$i" "$f" "$w" "$(ratio "$i" "$ti")" "$(ratio "$w" "$tw")"
done
echo "(medians of $RUNS interleaved runs, 2 ranks bound to cores)"
