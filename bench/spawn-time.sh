#!/usr/bin/env bash
#
# spawn-time.sh: MPI_Comm_spawn time and the first message with the new
# process, for the usnic BTL and btl/tcp (bench/spawn_time.c), in one
# table.  Runs alternate between the transports; each run spawns one
# child CYCLES times from one parent; the first cycle of each run (cold
# caches, first spawn of the parent) is reported apart.
#
#   bash bench/spawn-time.sh
#   SPAWN_RUNS=5 SPAWN_CYCLES=10 bash bench/spawn-time.sh
#
# Output: per transport, the medians of spawn time, the first 8-byte
# round trip after the spawn (where the BTL meets a process of another
# job) and the steady-state round trip.  Logs in bench/build/spawn-logs/.

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"   # bench_build, transport_args, median
BUILD_DIR="$BENCH_DIR/build"
LOG_DIR="$BUILD_DIR/spawn-logs"
RUNS=${SPAWN_RUNS:-3}
CYCLES=${SPAWN_CYCLES:-8}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$LOG_DIR" || exit 2
bench_build spawn_time || exit 2
TA_USNIC=()   # transport_args usnic: no verbose lines, no statistics
rc=0
for run in $(seq 1 "$RUNS"); do
    for t in usnic tcp; do
        log="$LOG_DIR/$t-$run.log"
        transport_args "$t"
        if ! timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 1 \
                "${TARGS[@]}" "$BENCH_BIN/spawn_time" "$CYCLES" 1 >"$log" 2>&1; then
            echo "run $run over $t failed: $log"
            rc=1
        fi
    done
done

col() { awk -v k="$2" -v first="$3" '$1 == "cycle" { for (i = 2; i < NF; ++i) if ($i == k && ((first && $2 == 0) || (!first && $2 > 0))) print $(i + 1) }' "$LOG_DIR"/"$1"-*.log | median; }

printf "%-6s %14s %16s %16s %16s %14s\n" "btl" "spawn ms" "first RTT us" "spawn ms (1st)" "first RTT (1st)" "steady RTT us"
for t in usnic tcp; do
    printf "%-6s %14s %16s %16s %16s %14s\n" "$t" "$(col "$t" spawn_ms 0)" "$(col "$t" first_rtt_us 0)" \
        "$(col "$t" spawn_ms 1)" "$(col "$t" first_rtt_us 1)" "$(col "$t" next_rtt_us 0)"
done
echo "($RUNS runs x $CYCLES spawns of one child per transport, alternating; medians; (1st) = each run's first spawn)"
exit $rc
