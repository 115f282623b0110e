#!/usr/bin/env bash
#
# Where the usnic BTL's time goes: perf record -g on both ranks of a
# 1 MiB bandwidth run and of an 8-byte ping-pong (bench/perf.c's profiling
# mode), then a summary per rank: the split by binary (kernel, libc,
# libfabric, the BTL, ...), the kernel's send and receive paths, copies,
# locks, and the hottest symbols.
#
#   bash bench/profile.sh                     # as root; about 30 s
#   PROFILE_SECONDS=10 PROFILE_CASES="lat:8" bash bench/profile.sh
#
# Environment:
#   PROFILE_CASES    metric:size list, default "bw:1048576 lat:8"
#                    (metric lat, bw or rate, as in bench/perf.c)
#   PROFILE_SECONDS  length of each profiled run, default 5
#   PROFILE_FREQ     samples per second, default 2999
#   PROFILE_TOP      hottest symbols listed per rank, default 15
#
# Needs perf (Debian: apt-get install linux-perf).  Samples on the
# cpu-clock software event, which works in VMs without a PMU.  Libraries
# without symbols (Debian's libfabric and Open MPI are stripped) show up by
# their exported symbols only; the usnic BTL has its own.  A second run
# per case counts each rank's socket system calls (perf stat on the
# syscall tracepoints): receive calls per datagram received (= datagrams
# the peer sent) shows how much of the receive side is empty polling.  The data files stay in bench/build/profile/ for
# "perf report -i".

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"   # bench_build, transport_args
BUILD_DIR="$BENCH_DIR/build"
OUT="$BUILD_DIR/profile"
PROFILE_CASES=${PROFILE_CASES:-"bw:1048576 lat:8"}
PROFILE_SECONDS=${PROFILE_SECONDS:-5}
PROFILE_FREQ=${PROFILE_FREQ:-2999}
PROFILE_TOP=${PROFILE_TOP:-15}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "profile: $*" >&2; exit 1; }

for cmd in perf mpicc mpirun; do
    command -v "$cmd" >/dev/null || die "$cmd not found (perf: apt-get install linux-perf)"
done
ompi_info 2>/dev/null | grep -q 'MCA btl: usnic' || die "Open MPI lists no usnic BTL; install it first"
mkdir -p "$OUT" || die "cannot create $OUT"
bench_build perf || die "compiling bench/perf.c failed"

TA_USNIC=()   # transport_args usnic: no verbose lines, no statistics
transport_args usnic
USNIC="${TARGS[*]} ${PROFILE_USNIC_EXTRA:-}"

# report DATA: the summary of one rank's samples.
report() {
    local data=$1 flat children
    flat=$(perf report -i "$data" --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -v '^#' | grep .)
    children=$(perf report -i "$data" --children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep .)

    echo "    by binary (self time):"
    perf report -i "$data" --no-children --sort dso --stdio -g none 2>/dev/null |
        grep -v '^#' | grep . | head -6 | sed 's/^ */      /'

    # children %: time in a function and everything it called
    ch() { awk -v s="$1" '$NF == s { v = $1 } END { sub(/%/, "", v); print v + 0 }' <<<"$children"; }
    # self % summed over symbols matching a regex (on the "dso sym" lines)
    self() { awk -v re="$1" '$0 ~ re { v = $1; sub(/%/, "", v); s += v } END { printf "%.1f", s }' <<<"$flat"; }

    echo "    where the time goes (% of this rank's samples):"
    printf '      %-62s %6.1f%%\n' \
        "kernel send path (sendto/sendmsg syscalls, incl. loopback delivery)" "$(awk -v a="$(ch __sys_sendto)" -v b="$(ch __sys_sendmsg)" 'BEGIN { print a + b }')" \
        "  of which the receiver's softirq run on this CPU (net_rx_action)" "$(ch net_rx_action)" \
        "kernel receive syscalls (recvmsg/recvfrom)" "$(awk -v a="$(ch __sys_recvmsg)" -v b="$(ch __sys_recvfrom)" 'BEGIN { print a + b }')" \
        "  of which in udp_recvmsg (empty polls included)" "$(ch udp_recvmsg)" \
        "copies: kernel <-> user (_copy_to_iter, _copy_from_iter)" "$(awk -v a="$(ch _copy_to_iter)" -v b="$(ch _copy_from_iter)" 'BEGIN { print a + b }')" \
        "copies: user memcpy/memmove (libc)" "$(self 'libc[^ ]* +\[\.\] __(memmove|memcpy)')" \
        "locks: pthread_mutex_lock/unlock (libc, from libfabric)" "$(self 'pthread_mutex_(lock|unlock)')" \
        "libc syscall wrappers and cancellation (self)" "$(self 'libc[^ ]* +\[\.\] (__libc_(recv|send)|.*asynccancel)')" \
        "libfabric (self)" "$(self 'libfabric')" \
        "usnic BTL, mca_btl_usnic.so (self)" "$(self 'mca_btl_usnic')" \
        "Open MPI: libopen-pal, libmpi, ob1 (self)" "$(self 'libopen-pal|libmpi|mca_pml')"
    echo "    hottest symbols (self):"
    head -"$PROFILE_TOP" <<<"$flat" | sed 's/^ */      /'
}

echo "profile: the usnic BTL, 2 ranks bound to cores, perf record -g (cpu-clock, ${PROFILE_FREQ} Hz), ${PROFILE_SECONDS}s per case"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for c in $PROFILE_CASES; do
    metric=${c%%:*} size=${c#*:}
    prog="$BENCH_BIN/perf --only $metric --size $size --seconds $PROFILE_SECONDS --label profile-$metric-$size"
    rec="perf record -q -e cpu-clock -F $PROFILE_FREQ -g"
    echo
    echo "== $metric $size bytes"
    rm -f "$OUT/$metric-$size-r0.data" "$OUT/$metric-$size-r1.data"
    # shellcheck disable=SC2086  # word lists
    if ! timeout 300 mpirun --bind-to core --map-by core --mca oob_tcp_if_include lo $USNIC \
        -np 1 $rec -o "$OUT/$metric-$size-r0.data" $prog : \
        -np 1 $rec -o "$OUT/$metric-$size-r1.data" $prog >"$OUT/$metric-$size.log" 2>&1; then
        echo "  the profiled run failed; see bench/build/profile/$metric-$size.log"
        continue
    fi
    grep -E '^PERF' "$OUT/$metric-$size.log" | sed 's/^/  /'
    # A second run, without sampling, counts the socket system calls of
    # each rank (tracepoints), to show how many receive polls come per
    # datagram received.
    stat="perf stat -x, -e syscalls:sys_enter_recvmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_sendmsg"
    # shellcheck disable=SC2086  # word lists
    if timeout 300 mpirun --bind-to core --map-by core --mca oob_tcp_if_include lo $USNIC \
        -np 1 $stat -o "$OUT/$metric-$size-r0.stat" $prog : \
        -np 1 $stat -o "$OUT/$metric-$size-r1.stat" $prog >"$OUT/$metric-$size-stat.log" 2>&1; then
        # Datagrams a rank received = datagrams its peer sent (loopback
        # loses nothing unless a socket buffer overflows).
        for r in 0 1; do
            awk -F, -v r="$r" 'FNR == 1 { f++ }
                $3 ~ /sys_enter_/ { n = $3; sub(/.*sys_enter_/, "", n); c[f, n] = $1 + 0 }
                END { me = 1; peer = 2
                      s = c[me, "sendto"] + c[me, "sendmsg"]; rv = c[me, "recvmsg"] + c[me, "recvfrom"]
                      ps = c[peer, "sendto"] + c[peer, "sendmsg"]
                      printf "  rank %d system calls: %d sendto, %d sendmsg, %d recvmsg, %d recvfrom; %.1f receive calls per datagram received\n",
                          r, c[me, "sendto"], c[me, "sendmsg"], c[me, "recvmsg"], c[me, "recvfrom"], (ps > 0 ? rv / ps : 0) }' \
                "$OUT/$metric-$size-r$r.stat" "$OUT/$metric-$size-r$((1 - r)).stat"
        done
    else
        echo "  (the system call count run failed; see bench/build/profile/$metric-$size-stat.log)"
    fi
    for r in 0 1; do
        case $metric:$r in
            lat:0) role="(pings)" ;; lat:1) role="(echoes)" ;;
            *:0) role="(sender)" ;; *:1) role="(receiver)" ;;
        esac
        echo "  rank $r $role: $(perf report -i "$OUT/$metric-$size-r$r.data" --stdio 2>/dev/null |
            sed -n 's/^# Samples: \([^ ]*\).*/\1 samples/p' | head -1)"
        report "$OUT/$metric-$size-r$r.data"
    done
done
echo
echo "data: bench/build/profile/*.data (perf report -i FILE)"
