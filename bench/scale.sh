#!/usr/bin/env bash
#
# Scale mode of bench/perf.sh: what one MPI process costs as the job grows
# on this host, for the usnic BTL and btl/tcp.  2, 4, 8 and 16 ranks
# (oversubscribed: --oversubscribe --bind-to none), each running
# bench/scale.c: MPI_Init, an all-to-all among all ranks, and per process
# the open file descriptors, resident memory and MPI_Init time.
#
#   bash bench/perf.sh --scale          # or: bash bench/scale.sh
#   SCALE_RANKS="2 4 8" SCALE_REPS=1 bash bench/scale.sh
#
# Environment:
#   SCALE_RANKS       rank counts, default "2 4 8 16"
#   SCALE_REPS        runs per transport and rank count, default 3
#                     (interleaved; every rank of every run is one sample)
#   SCALE_TRANSPORTS  default "usnic tcp"
#   SCALE_BYTES       all-to-all block per peer, default 4096
#   RUN_TIMEOUT       seconds before one mpirun is killed, default 120
#
# Output: a table per transport and rank count (medians over all ranks of
# all runs, with the maximum where it matters), the memory per peer
# derived from it, and the target line on file descriptors.  CSV:
# bench/build/scale.csv (one row per rank per run); logs:
# bench/build/scale-logs/.  Exit status 0 if every run succeeded.

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"   # bench_build, transport_args
BUILD_DIR="$BENCH_DIR/build"
LOG_DIR="$BUILD_DIR/scale-logs"
CSV="$BUILD_DIR/scale.csv"

SCALE_RANKS=${SCALE_RANKS:-"2 4 8 16"}
SCALE_REPS=${SCALE_REPS:-3}
SCALE_TRANSPORTS=${SCALE_TRANSPORTS:-"usnic tcp"}
SCALE_BYTES=${SCALE_BYTES:-4096}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "scale: $*" >&2; exit 1; }

for n in $SCALE_RANKS; do [[ $n =~ ^[1-9][0-9]*$ && $n -ge 2 ]] || die "bad rank count '$n'"; done
[[ $SCALE_REPS =~ ^[1-9][0-9]*$ ]] || die "bad SCALE_REPS '$SCALE_REPS'"
[[ $SCALE_BYTES =~ ^[1-9][0-9]*$ && $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "bad SCALE_BYTES or RUN_TIMEOUT"
for t in $SCALE_TRANSPORTS; do
    case $t in usnic|tcp) ;; *) die "unknown transport '$t' (known: usnic tcp)" ;; esac
done
for cmd in mpicc mpirun timeout awk; do
    command -v "$cmd" >/dev/null || die "$cmd not found"
done
if [[ " $SCALE_TRANSPORTS " == *" usnic "* ]] && ! ompi_info 2>/dev/null | grep -q 'MCA btl: usnic'; then
    die "Open MPI lists no usnic BTL; install it first"
fi

START=$SECONDS
mkdir -p "$LOG_DIR" || die "cannot create $LOG_DIR"
rm -f "$LOG_DIR"/*.log
bench_build scale || die "compiling bench/scale.c failed"
TA_USNIC=()   # transport_args usnic: no verbose lines, no statistics

echo "scale: ranks {$SCALE_RANKS} x {$SCALE_TRANSPORTS}, $SCALE_REPS run(s) each, interleaved;" \
    "all-to-all of $SCALE_BYTES B per peer; $(nproc) CPUs, --oversubscribe --bind-to none"
echo "rep,transport,ranks,rank,init_s,fds_init,fds_a2a,rss_init_kb,rss_a2a_kb,anon_init_kb,anon_a2a_kb,heap_init,heap_a2a" >"$CSV"
FAILED=0
for rep in $(seq 1 "$SCALE_REPS"); do
    for n in $SCALE_RANKS; do
        for t in $SCALE_TRANSPORTS; do
            log="$LOG_DIR/$t-$n-$rep.log"
            t0=$EPOCHREALTIME
            load=$(cut -d' ' -f1 /proc/loadavg)
            transport_args "$t"
            timeout -k 10 "$RUN_TIMEOUT" mpirun -np "$n" --oversubscribe --bind-to none \
                --mca oob_tcp_if_include lo "${TARGS[@]}" \
                "$BENCH_BIN/scale" --bytes "$SCALE_BYTES" >"$log" 2>&1
            rc=$?
            wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
            got=$(grep -c '^SCALE rank=' "$log")
            if [[ $rc -ne 0 || $got -ne $n ]] || ! grep -q '^SCALE_DONE .*status=ok' "$log"; then
                echo "  rep $rep  $t  $n ranks: FAILED (exit $rc, $got of $n records); log: bench/build/scale-logs/$t-$n-$rep.log"
                FAILED=$((FAILED + 1))
                continue
            fi
            awk -v r="$rep" -v t="$t" -v n="$n" '$1 == "SCALE" {
                    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                    print r "," t "," n "," f["rank"] "," f["init_s"] "," f["fds_init"] "," f["fds_a2a"] "," \
                          f["rss_init_kb"] "," f["rss_a2a_kb"] "," f["anon_init_kb"] "," f["anon_a2a_kb"] "," \
                          f["heap_init"] "," f["heap_a2a"] }' "$log" >>"$CSV"
            printf '  rep %d  %-5s %2d ranks: ok  %5.1fs  load %s\n' "$rep" "$t" "$n" "$wall" "$load"
        done
    done
done

# Medians (and maxima) over every rank of every run, per transport and N.
SUMMARY=$(awk -F, 'NR > 1 {
        k = $2 "," $3; c = ++n[k]
        for (j = 5; j <= 13; j++) v[k, j, c] = $j + 0
        if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
    }
    function med(k, j,   c, a, b, y, x) {
        c = n[k]; for (a = 1; a <= c; a++) x[a] = v[k, j, a]
        for (a = 2; a <= c; a++) { y = x[a]; for (b = a - 1; b >= 1 && x[b] > y; b--) x[b + 1] = x[b]; x[b + 1] = y }
        return c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2
    }
    function mx(k, j,   a, m) { m = v[k, j, 1]; for (a = 2; a <= n[k]; a++) if (v[k, j, a] > m) m = v[k, j, a]; return m }
    END {
        for (i = 1; i <= nk; i++) {
            k = keys[i]
            # transport,N,samples,init_med,init_max,fds_init_max,fds_a2a_med,fds_a2a_max,rss_init,rss_a2a,anon_init,anon_a2a,heap_init,heap_a2a
            printf "%s,%d,%.3f,%.3f,%d,%d,%d,%d,%d,%d,%d,%d,%d\n", k, n[k], med(k, 5), mx(k, 5), mx(k, 6),
                med(k, 7), mx(k, 7), med(k, 8), med(k, 9), med(k, 10), med(k, 11), med(k, 12), med(k, 13)
        }
    }' "$CSV")

echo
echo "Per process, median over all ranks of all runs (max where marked):"
printf '%-6s %5s  %-17s  %-15s  %-15s  %-19s  %-19s  %s\n' "" "ranks" "MPI_Init s" "fds after init" "fds after a2a" \
    "VmRSS MiB" "RssAnon MiB" "malloc'ed MiB"
printf '%-6s %5s  %-17s  %-15s  %-15s  %-19s  %-19s  %s\n' "" "" "median (max)" "max" "median (max)" \
    "init -> after a2a" "init -> after a2a" "init -> after a2a"
for t in $SCALE_TRANSPORTS; do
    for n in $SCALE_RANKS; do
        line=$(grep "^$t,$n," <<<"$SUMMARY") || { printf '%-6s %5s  failed\n' "$t" "$n"; continue; }
        IFS=, read -r _ _ _ im ix fdi fm fx ri ra ai aa hi ha <<<"$line"
        printf '%-6s %5s  %-17s  %-15s  %-15s  %-19s  %-19s  %s\n' "$t" "$n" "$im ($ix)" "$fdi" "$fm ($fx)" \
            "$(awk -v a="$ri" -v b="$ra" 'BEGIN { printf "%.2f -> %.2f", a / 1024, b / 1024 }')" \
            "$(awk -v a="$ai" -v b="$aa" 'BEGIN { printf "%.2f -> %.2f", a / 1024, b / 1024 }')" \
            "$(awk -v a="$hi" -v b="$ha" 'BEGIN { printf "%.2f -> %.2f", a / 1048576, b / 1048576 }')"
    done
done

# Bytes per peer: going from N to 2N ranks adds N peers to every process;
# the growth of the median per-process memory after the all-to-all,
# divided by N.
echo
echo "Memory per peer: (median per-process memory after the all-to-all at 2N ranks"
echo "minus the same at N ranks) / N added peers, in bytes; VmRSS, its private part"
echo "RssAnon, and what malloc handed out.  This is everything a process holds per"
echo "peer (PML ob1's per-peer state and the runtime's too), not the BTL alone: the"
echo "tcp rows are the comparison."
printf '%-6s %-10s  %12s  %12s  %12s\n' "" "N -> 2N" "VmRSS" "RssAnon" "malloc"
for t in $SCALE_TRANSPORTS; do
    for n in $SCALE_RANKS; do
        m=$((2 * n))
        a=$(grep "^$t,$n," <<<"$SUMMARY") || continue
        b=$(grep "^$t,$m," <<<"$SUMMARY") || continue
        IFS=, read -r _ _ _ _ _ _ _ _ _ ra1 _ aa1 _ ha1 <<<"$a"
        IFS=, read -r _ _ _ _ _ _ _ _ _ ra2 _ aa2 _ ha2 <<<"$b"
        printf '%-6s %-10s  %12s  %12s  %12s\n' "$t" "$n -> $m" \
            "$(( (ra2 - ra1) * 1024 / n ))" "$(( (aa2 - aa1) * 1024 / n ))" "$(( (ha2 - ha1) / n ))"
    done
done

# Target: file descriptors per process constant in the number of peers.
echo
if [[ " $SCALE_TRANSPORTS " == *" usnic "* ]]; then
    fds=$(for n in $SCALE_RANKS; do grep "^usnic,$n," <<<"$SUMMARY" | cut -d, -f8; done | tr '\n' ' ')
    lo=$(tr ' ' '\n' <<<"$fds" | grep . | sort -n | head -1)
    hi=$(tr ' ' '\n' <<<"$fds" | grep . | sort -n | tail -1)
    tcpfds=""
    if [[ " $SCALE_TRANSPORTS " == *" tcp "* ]]; then
        tcpfds="; tcp: $(for n in $SCALE_RANKS; do grep "^tcp,$n," <<<"$SUMMARY" | cut -d, -f8; done | tr '\n' ' ' | sed 's/ $//')"
    fi
    if [[ -n $lo && $lo == "$hi" && $(wc -w <<<"$fds") -eq $(wc -w <<<"$SCALE_RANKS") ]]; then
        echo "target file descriptors per process constant in the number of peers: met (usnic, max per process at {$SCALE_RANKS} ranks: ${fds% }$tcpfds)"
    elif [[ -n $lo ]]; then
        echo "target file descriptors per process constant in the number of peers: NOT met (usnic, max per process at {$SCALE_RANKS} ranks: ${fds% }$tcpfds)"
    else
        echo "target file descriptors per process constant in the number of peers: not measured (no successful usnic run)"
    fi
fi
echo
echo "CSV: bench/build/scale.csv; logs: bench/build/scale-logs/"
echo "$FAILED failed run(s); total time $((SECONDS - START))s"
[[ $FAILED -eq 0 ]]
