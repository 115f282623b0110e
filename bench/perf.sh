#!/usr/bin/env bash
#
# The usnic BTL against its peers, in one run, interleaved: latency,
# bandwidth and message rate between 2 ranks bound to the 2 cores of this
# host, over loopback, plus the raw limits of the datagram path.
#
#   bash bench/perf.sh                   # REPS=5, about 5-8 minutes
#   REPS=3 BUDGET=0.5 bash bench/perf.sh # shorter, about 2.5-3 minutes
#   TRANSPORTS="usnic tcp udp" bash bench/perf.sh
#   TRANSPORTS="usnic usnic_header usnic_none" bash bench/perf.sh   # protection only
#   TRANSPORTS="usnic tcp usnic_gso usnic_ofi udp" bash bench/perf.sh  # the wires only
#   bash bench/perf.sh --veth            # across two namespaced hosts (bench/veth.sh)
#   USNIC_OMPI=/opt/openmpi-5.0.10 bash bench/perf.sh   # against another Open MPI
#   bash bench/perf.sh --scale           # the scale mode (bench/scale.sh)
#
# Transports (TRANSPORTS, default all, run in this order, rotated by two
# places every other repetition so that none is always first, and the
# repetition after each one runs its order backwards, so that of two
# neighbours each runs first as often: the plugin's 8-byte message rate
# with the congestion control on against off was 0.975 x over 10 pairs
# that ran it first and 1.005 x over 10 that ran it second):
#   usnic   the usnic BTL: pml ob1, btl usnic,self on lo, with its default
#           wire (btl_usnic_wire auto: the socket wire on the udp provider's
#           interfaces, 65000-byte datagrams on lo) and its default datagram
#           protection (btl_usnic_protection full)
#   usnic_gso   the same on the socket wire with btl_usnic_max_datagram 1472:
#           segmentation offload batches of 44 datagrams of 1472 bytes, what
#           a 1500-MTU network would carry
#   usnic_ofi   the same on the ofi wire (btl_usnic_wire ofi: libfabric's udp
#           provider, one 1472-byte datagram per sendto)
#           Every usnic run logs its wire (btl_usnic_verbose 5) and its final
#           counters (btl_usnic_stats 3600); a run on another wire than its
#           name says (or, for usnic_gso, with other than 1472-byte datagrams
#           or no segmentation offload sends) is rejected as "wrongpath".
#   usnic_header, usnic_none   the same with btl_usnic_protection header /
#           none: the cost of each mode, as ratios to none from runs that
#           saw the same VM state (see below)
#   usnic_nocc, usnic_gso_nocc   usnic and usnic_gso with
#           btl_usnic_congestion_control 0: the table pairs each with its
#           twin (the controller's cost on a healthy path)
#   usnic_base  usnic with an older plugin: the one in BASE_DIR (a copy of
#           Open MPI's component directory holding it, as patterns.sh's
#           BASELINE_PLUGIN makes); the table then gives usnic against it,
#           paired within one VM state (a change's cost on the fast path)
#   dgcheck, dgcheck_nomr   the usnic BTL over test/provider's "dgcheck"
#           libfabric provider (usnic's contract: a 64-byte prefix, small
#           CQs), with FI_MR_LOCAL enforced (every buffer registered, every
#           descriptor checked) and without (DGCHECK_ENFORCE_MR=0: the BTL
#           registers nothing); their paired ratio is the per-message cost
#           of registered memory.  Its absolute speed means little.
#   tcp     btl/tcp: pml ob1, btl tcp,self on lo
#   rxd     libfabric's reliable datagrams (ofi_rxd over the udp
#           provider) through pml cm + mtl ofi; every run is checked to
#           have used that path, as in bench/loss-goodput.sh
#   ucx     pml ucx over UCX's tcp transport on lo (UCX_TLS=tcp,self;
#           pml_ucx_tls and pml_ucx_devices any, without which pml ucx
#           declines TCP), checked to have selected pml ucx on both ranks
#   ofi_rxm libfabric's tcp;ofi_rxm through pml cm + mtl ofi (mtl ofi
#           excludes tcp by default: mtl_ofi_provider_include names it),
#           checked like rxd
#   vader   shared memory, for reference: pml ob1, btl vader,self (Open
#           MPI 5: btl sm,self, shown as "sm")
#   udp     bench/udp_raw.c: a bare polling UDP socket ping-pong (0, 8,
#           1024, 1472 bytes, and 16 KiB as 12 datagrams each way) and a
#           polling stream of 1472-byte datagrams (goodput = bytes
#           received / time), no MPI; then the same with segmentation
#           offload: a 16 KiB ping-pong as one UDP_SEGMENT send each way
#           (12 segments of at most 1472 bytes) read with UDP_GRO, and a
#           stream of sends of 44 x 1472 B (UDP_SEGMENT) read with UDP_GRO
#           (goodput as above); where GSO or GRO is unavailable those rows
#           say "not available: <reason>"
#   fipp    fi_pingpong -p udp -e dgram (libfabric-bin), 8 and 1024 bytes
#
# One repetition runs every transport once; REPS repetitions give each
# cell's median and min-max.  Around every run bench/cacheline.c probes
# the VM's cross-core state (the median of 3 probes of a cache line's
# round trip between the two cores: about 60 ns fast, 350 ns slow;
# loopback throughput moves 2-3x with it); the protection table compares
# a mode with none only within one repetition and only when both runs saw
# the same state (and neither was disturbed), and reports the median of
# those paired ratios; the wire table does the same for usnic, usnic_gso
# and usnic_ofi against tcp and for the socket wire against the ofi wire,
# and adds the ratio of the per-state medians.  A cell whose spread
# (max-min) exceeds SPREAD_PCT of its median is flagged "!".  Every run
# also records the load average before and after and the CPU time that
# processes other than the benchmark used meanwhile (/proc/stat minus our
# own children's CPU time); a run where they took more than FOREIGN_PCT
# of the machine prints a warning line; such runs are left out of the
# medians and the pairs (DROP_DISTURBED).
#
# Environment:
#   REPS          repetitions, default 5
#   BUDGET        scale factor of perf.c's per-cell time budgets, default 1
#   SPREAD_PCT    flag threshold, default 25
#   FOREIGN_PCT   warning threshold, default 10
#   DROP_DISTURBED  1 (default): medians leave out the runs with a warning,
#                 as long as the transport has at least one quiet run, and
#                 the paired tables and per-state medians leave them out
#                 altogether; 0: every run counts
#   RAW_SECONDS   timed seconds per udp_raw ping-pong size, default 0.5
#   STREAM_SECONDS  timed seconds of the udp_raw stream, default 1
#   STALL_SECONDS  seconds of the host stall probe (bench/stalls.c), default 5
#   FI_ITERS      fi_pingpong iterations per size, default 20000
#   RUN_TIMEOUT   seconds before one run is killed, default 300
#   BIND          mpirun binding (default: probe "--bind-to core
#                 --map-by core", fall back to "--bind-to none")
#   USNIC_OMPI    an Open MPI installation to measure instead of the one on
#                 PATH (test/lib.sh: its bin/ and lib/ go first; output
#                 goes to bench/build-ompi<x.y>/)
#
# Output: per-run lines, then the tables, the target lines and the paths
# of the CSV files and the plot, all under bench/build/:
#   perf-runs.csv  every measured value: rep,transport,metric,size,value,
#                  disturbed (1 = the run had a noise warning),vmstate
#                  (fast, slow or mixed: the probes before and after)
#   perf.csv       per cell: transport,metric,size,unit,n,median,min,max,
#                  spread_pct,flag
#   perf.png       latency and bandwidth against size (bench/plot.py)
#   perf-logs/     the output of every run
# A run that fails or took the wrong path contributes no number; its cells
# show "-" if no run produced one.  Exit status 0 if every run succeeded.

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"   # REPO_DIR, test/lib.sh (USNIC_OMPI, SHM_BTL, OOB_LO, series_dir), bench_build,
                        # vm_state, measured, field, udp_rcvbuf_errors, transport_args, CPU_A/CPU_B
BUILD_DIR=$(series_dir "$BENCH_DIR/build")
LOG_DIR="$BUILD_DIR/perf-logs"

if [[ ${1:-} == --scale ]]; then
    shift
    exec bash "$BENCH_DIR/scale.sh" "$@"
fi
if [[ ${1:-} == --veth ]]; then
    shift
    exec bash "$BENCH_DIR/veth.sh" "$@"
fi
if [[ $# -gt 0 ]]; then
    echo "usage: bash bench/perf.sh [--scale | --veth]   (settings are environment variables; see the header)" >&2
    exit 2
fi

REPS=${REPS:-5}
BUDGET=${BUDGET:-1}
SPREAD_PCT=${SPREAD_PCT:-25}
FOREIGN_PCT=${FOREIGN_PCT:-10}
DROP_DISTURBED=${DROP_DISTURBED:-1}
RAW_SECONDS=${RAW_SECONDS:-0.5}
STREAM_SECONDS=${STREAM_SECONDS:-1}
STALL_SECONDS=${STALL_SECONDS:-5}
FI_ITERS=${FI_ITERS:-20000}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
# Neighbours in this list run next to each other (the rotation and the
# mirror keep them adjacent): the pairs compared within one VM state are
# close in time.
TRANSPORTS=${TRANSPORTS:-"usnic_header usnic_none usnic tcp usnic_gso usnic_ofi rxd vader udp fipp dgcheck dgcheck_nomr"}
RUNS_CSV="$BUILD_DIR/perf-runs.csv"
SUMMARY_CSV="$BUILD_DIR/perf.csv"
PLOT="$BUILD_DIR/perf.png"
NCPU=$(nproc)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "perf: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------
# Checks and build
# ---------------------------------------------------------------------------

[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "bad REPS '$REPS'"
[[ $BUDGET =~ ^[0-9]*\.?[0-9]+$ ]] || die "bad BUDGET '$BUDGET'"
[[ $SPREAD_PCT =~ ^[0-9]+$ && $FOREIGN_PCT =~ ^[0-9]+$ && $DROP_DISTURBED =~ ^[01]$ ]] ||
    die "bad SPREAD_PCT, FOREIGN_PCT or DROP_DISTURBED"
[[ $RAW_SECONDS =~ ^[0-9]*\.?[0-9]+$ && $STREAM_SECONDS =~ ^[0-9]*\.?[0-9]+$ ]] ||
    die "bad RAW_SECONDS or STREAM_SECONDS"
[[ $FI_ITERS =~ ^[1-9][0-9]*$ && $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "bad FI_ITERS or RUN_TIMEOUT"
for t in $TRANSPORTS; do
    case $t in
        usnic|usnic_gso|usnic_ofi|usnic_header|usnic_none|usnic_nocc|usnic_gso_nocc|tcp|rxd|ucx|ofi_rxm|vader|udp|fipp|dgcheck|dgcheck_nomr) ;;
        usnic_base) [[ -n ${BASE_DIR:-} && -f $BASE_DIR/mca_btl_usnic.so ]] || die "usnic_base: BASE_DIR must hold mca_btl_usnic.so" ;;
        *) die "unknown transport '$t' (known: usnic usnic_gso usnic_ofi usnic_header usnic_none usnic_nocc usnic_gso_nocc usnic_base tcp rxd ucx ofi_rxm vader udp fipp dgcheck dgcheck_nomr)" ;;
    esac
done
for cmd in mpicc mpirun cc timeout taskset awk; do
    command -v "$cmd" >/dev/null || die "$cmd not found"
done
has() { [[ " $TRANSPORTS " == *" $1 "* ]]; }
if [[ " $TRANSPORTS" == *" usnic"* ]] && ! ompi_info 2>/dev/null | grep -q 'MCA btl: usnic'; then
    die "Open MPI lists no usnic BTL (ompi_info | grep 'MCA btl: usnic'); install it first"
fi

START=$SECONDS
mkdir -p "$BUILD_DIR" "$LOG_DIR" || die "cannot create $LOG_DIR"
rm -f "$LOG_DIR"/*.log
echo "building ${BUILD_DIR#$REPO_DIR/}/perf and udp_raw"
bench_build perf udp_raw stalls cacheline || die "building the helper programs failed"
HAVE_FIPP=1
command -v fi_pingpong >/dev/null || HAVE_FIPP=0
if has dgcheck || has dgcheck_nomr; then
    make -C "$REPO_DIR/test/provider" >"$LOG_DIR/dgcheck-build.log" 2>&1 ||
        die "building the dgcheck test provider failed (see ${LOG_DIR#$REPO_DIR/}/dgcheck-build.log)"
fi

mpirun_2() {
    # shellcheck disable=SC2086  # BIND is a word list
    timeout -k 10 "$RUN_TIMEOUT" mpirun -np 2 $BIND ${OOB_LO[@]+"${OOB_LO[@]}"} "$@"
}
if [[ -z ${BIND:-} ]]; then
    BIND="--bind-to core --map-by core"
    mpirun_2 true >"$LOG_DIR/binding.log" 2>&1 || BIND="--bind-to none"
fi
# The non-MPI programs are pinned the same way: one side per core
# (CPU_A, CPU_B).  Every usnic run (not dgcheck) logs its wire and final
# counters (transport_args' default TA_USNIC): the verbose lines come at
# MPI_Init only, the counters print at finalize.  The usnic runs but
# usnic_header and usnic_none name their protection.
TA_PROTECTION=full

# The wire each usnic transport was seen on (from its runs' verbose
# lines): transport -> "socket 65000 B" etc.
declare -A WIRE_SEEN WIRE_ALL   # WIRE_ALL: transport -> every run's wire, ";"-separated
title() {
    case $1 in
        usnic) if [[ ${WIRE_SEEN[usnic]:-} == socket* ]]; then echo "usnic (def.=socket)";
               elif [[ -n ${WIRE_SEEN[usnic]:-} ]]; then echo "usnic (def.=${WIRE_SEEN[usnic]%% *})";
               else echo "usnic (default wire)"; fi ;;
        usnic_gso) echo "usnic socket 1472 B" ;;
        usnic_ofi) echo "usnic ofi wire" ;;
        usnic_header) echo "usnic header" ;;
        usnic_none) echo "usnic none" ;;
        usnic_base) echo "usnic before" ;;
        usnic_nocc) echo "usnic cc off" ;;
        usnic_gso_nocc) echo "usnic 1472 B cc off" ;;
        tcp)   echo "tcp" ;;
        rxd)   echo "udp;ofi_rxd" ;;
        ucx)   echo "UCX tcp" ;;
        ofi_rxm) echo "tcp;ofi_rxm" ;;
        vader) echo "$SHM_BTL" ;;
        udp)   echo "UDP socket" ;;
        fipp)  echo "fi_pingpong" ;;
        dgcheck) echo "dgcheck MR" ;;
        dgcheck_nomr) echo "dgcheck no MR" ;;
    esac
}

# ---------------------------------------------------------------------------
# Noise accounting
# ---------------------------------------------------------------------------

# measured LOG CMD... (bench/lib.sh) runs CMD with its output in LOG and
# sets RC, WALL, FOREIGN (percent of all CPUs used by others), LOAD0,
# LOAD1 and UDPDROPS (datagrams the kernel dropped for a full UDP socket
# receive buffer: real loss on loopback, as opposed to a spurious
# retransmission timeout).

# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------

declare -A STATUS   # transport,rep -> ok | fail ... (words)
DISTURBED=()        # "transport rep others%"
FAILED=0

# Rows of the current run (rep,transport,metric,size,value); run_one adds
# the run's "disturbed" flag and appends them to perf-runs.csv.
RUN_ROWS="$BUILD_DIR/.run-rows"
csv() { echo "$1,$2,$3,$4,$5" >>"$RUN_ROWS"; }

# wire_check TRANSPORT LOG: which wire both ranks of a usnic run opened on
# lo ("btl:usnic: lo: socket wire" / "... ofi wire" at btl_usnic_verbose
# 5), the socket wire's datagram size, and the socket wire counters of the
# final statistics of both ranks (btl_usnic_stats).  Sets WIRE_RUN (for
# the run's line), WIRE_KIND ("socket 65000 B", "ofi", ...) and WIRE_WHY
# (empty, or why the run is not on the path its name says).
wire_check() {
    local t=$1 log=$2 nsock nofi dg want_wire=socket counters
    nsock=$(grep -c 'btl:usnic: lo: socket wire$' "$log")
    nofi=$(grep -c 'btl:usnic: lo: ofi wire$' "$log")
    dg=$(sed -nE 's/.*btl:usnic: lo: socket wire: datagrams of ([0-9]+) bytes.*/\1/p' "$log" | sort -u | tr '\n' '/')
    dg=${dg%/}
    # sums over both ranks' module lines (not the per-peer lines)
    counters=$(awk '/btl:usnic final stats \[/ && !/\] peer / {
            n = split($0, kv, " ")
            for (i = 1; i <= n; i++) if (split(kv[i], p, "=") == 2) c[p[1]] += p[2]
        }
        END { printf "%d %d %d %d %d %d", c["gso_sends"], c["gso_segs"], c["mmsg_sends"], c["gro_recvs"], c["gro_segs"], c["gso_fallbacks"] }' "$log")
    local gs gsegs mm gr grsegs fb
    read -r gs gsegs mm gr grsegs fb <<<"$counters"
    [[ $t == usnic_ofi ]] && want_wire=ofi
    WIRE_WHY=""
    if [[ $nsock -eq 2 && $nofi -eq 0 ]]; then
        WIRE_KIND="socket ${dg:-?} B"
        WIRE_RUN="socket wire, ${dg:-?}-B datagrams, gso_sends $gs of $gsegs datagrams, mmsg_sends $mm, gro_recvs $gr of $grsegs datagrams${fb:+, gso_fallbacks $fb}"
        WIRE_RUN=${WIRE_RUN%, gso_fallbacks 0}
    elif [[ $nofi -eq 2 && $nsock -eq 0 ]]; then
        WIRE_KIND="ofi"
        WIRE_RUN="ofi wire"
    else
        WIRE_KIND="?"
        WIRE_RUN="wire unknown"
        WIRE_WHY="expected 2 ranks logging 'lo: $want_wire wire', got $nsock socket and $nofi ofi"
        return
    fi
    if [[ ${WIRE_KIND%% *} != "$want_wire" ]]; then
        WIRE_WHY="on the ${WIRE_KIND%% *} wire, expected $want_wire"
    elif [[ $t == usnic_gso* && $dg != 1472 ]]; then
        WIRE_WHY="socket wire with ${dg:-unknown}-byte datagrams, expected 1472"
    elif [[ $t == usnic_gso* && $gs -eq 0 ]]; then
        WIRE_WHY="no segmentation offload sends (gso_sends=0, mmsg_sends=$mm)"
    fi
}

run_mpi() {
    local t=$1 rep=$2 log="$LOG_DIR/$1-$2.log" line status note="" sends
    transport_args "$t"
    measured "$log" mpirun_2 "${TARGS[@]}" "$BENCH_BIN/perf" --label "$t" --budget "$BUDGET"
    line=$(grep -m1 '^PERF_RUN ' "$log")
    status=$(field status "$line")
    if [[ $RC -eq 124 || $RC -eq 137 ]]; then
        note="timeout (killed after ${RUN_TIMEOUT}s)"
    elif [[ $RC -ne 0 || $status != ok ]]; then
        note="fail (exit $RC${status:+, status $status})"
    fi
    case $t in
        usnic*|dgcheck*)
            sends=$(field num_total_sends "$line")
            if [[ -z $note && ! $sends =~ ^[1-9][0-9]*$ ]]; then
                note="wrongpath (no usnic BTL sends counted: num_total_sends=${sends:-none})"
            fi
            ;;
    esac
    local wire_note=""
    case $t in
        usnic*)
            wire_check "$t" "$log"
            WIRE_ALL[$t]+="${WIRE_KIND}${WIRE_WHY:+ (rejected)};"
            if [[ -z $note && -n $WIRE_WHY ]]; then
                note="wrongpath ($WIRE_WHY)"
            fi
            wire_note=$WIRE_RUN
            ;;
        rxd)
            local nprov ncm
            nprov=$(grep -c "mtl:ofi:prov: $RXD_PROVIDER\$" "$log")
            ncm=$(grep -c 'select: component cm selected' "$log")
            if [[ -z $note && ($nprov -ne 2 || $ncm -ne 2) ]]; then
                note="wrongpath (expected 2x 'mtl:ofi:prov: $RXD_PROVIDER' and 2x pml cm, got $nprov and $ncm)"
            fi
            ;;
        ofi_rxm)
            local nrxm
            nrxm=$(grep -c 'mtl:ofi:prov: tcp;ofi_rxm$' "$log")
            if [[ -z $note && $nrxm -ne 2 ]]; then
                note="wrongpath (expected 2x 'mtl:ofi:prov: tcp;ofi_rxm', got $nrxm)"
            fi
            ;;
        ucx)
            local nucx
            nucx=$(grep -c 'select: component ucx selected' "$log")
            if [[ -z $note && $nucx -ne 2 ]]; then
                note="wrongpath (expected 2 ranks selecting pml ucx, got $nucx)"
            fi
            ;;
    esac
    RUN_EXTRA="ranks' CPU share $(field cpu0 "$line")/$(field cpu1 "$line")${wire_note:+, $wire_note}"
    if [[ -n $note ]]; then
        STATUS[$t,$rep]=$note
        return 1
    fi
    awk -v r="$rep" -v t="$t" '$1 == "PERF" {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            print r "," t "," f["metric"] "," f["size"] "," f["value"] }' "$log" >>"$RUN_ROWS"
    if [[ $t == usnic* ]]; then
        WIRE_SEEN[$t]=$WIRE_KIND
    fi
    if [[ $t == usnic ]]; then
        csv "$rep" usnic resends 0 "$(field num_resends "$line")"
        csv "$rep" usnic timeout_retrans 0 "$(field num_timeout_retrans "$line")"
        csv "$rep" usnic fast_retrans 0 "$(field num_fast_retrans "$line")"
        csv "$rep" usnic spurious_timeouts 0 "$(field num_spurious_timeouts "$line")"
        csv "$rep" usnic total_sends 0 "$sends"
        csv "$rep" usnic steady_resends 0 "$(field steady_resends "$line")"
        RUN_EXTRA+=", retransmissions $(field num_resends "$line") of $sends sends"
    fi
    STATUS[$t,$rep]=ok
}

# All udp_raw cells of one repetition, as one run.
udp_cells() {
    local s
    for s in 0 8 1024 1472; do
        taskset -c "$CPU_A,$CPU_B" "$BENCH_BIN/udp_raw" pingpong --size "$s" \
            --seconds "$RAW_SECONDS" --cpus "$CPU_A,$CPU_B" || return 1
    done
    # 16 KiB the way the udp provider must carry it: 12 datagrams (of at
    # most 1472 bytes) each way, answered once all have arrived
    taskset -c "$CPU_A,$CPU_B" "$BENCH_BIN/udp_raw" pingpong --size 1366 --burst 12 \
        --seconds "$RAW_SECONDS" --cpus "$CPU_A,$CPU_B" || return 1
    taskset -c "$CPU_A,$CPU_B" "$BENCH_BIN/udp_raw" stream --size 1472 \
        --seconds "$STREAM_SECONDS" --cpus "$CPU_A,$CPU_B" || return 1
    # The same with segmentation offload (UDP_SEGMENT) on the sending side
    # and UDP_GRO on the receiving one: 16 KiB as one send of 12 segments
    # each way; a stream of 44 x 1472 B per send.  Where the kernel
    # refuses, udp_raw prints "status=unavailable -- not available: ...".
    taskset -c "$CPU_A,$CPU_B" "$BENCH_BIN/udp_raw" gso-pingpong --size 16384 --seg 1472 \
        --seconds "$RAW_SECONDS" --cpus "$CPU_A,$CPU_B" || return 1
    taskset -c "$CPU_A,$CPU_B" "$BENCH_BIN/udp_raw" gso-stream --size 1472 --batch 44 \
        --seconds "$STREAM_SECONDS" --cpus "$CPU_A,$CPU_B"
}

run_udp() {
    local rep=$1 log="$LOG_DIR/udp-$1.log"
    measured "$log" timeout -k 5 "$RUN_TIMEOUT" bash -c "$(declare -f udp_cells); BENCH_BIN='$BENCH_BIN' CPU_A=$CPU_A CPU_B=$CPU_B RAW_SECONDS=$RAW_SECONDS STREAM_SECONDS=$STREAM_SECONDS udp_cells"
    RUN_EXTRA=""
    if [[ $RC -ne 0 ]] || [[ $(grep -c '^RAW ' "$log") -ne 8 ]]; then
        STATUS[udp,$rep]="fail (exit $RC)"
        return 1
    fi
    # A GSO line with status=unavailable gives no number (the table shows
    # its reason instead).  The streams' received, sent and lost count
    # datagrams (GSO: segments).
    awk -v r="$rep" '$1 == "RAW" {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            if (f["status"] == "unavailable") next
            p = f["kind"] ~ /^gso_/ ? "gso_" : ""
            if (f["kind"] == "pingpong" && f["burst"] > 1) print r ",udp,lat," int(f["size"] * f["burst"] / 1024) * 1024 "," f["usec"]
            else if (f["kind"] ~ /pingpong$/) print r ",udp," p "lat," f["size"] "," f["usec"]
            else {
                print r ",udp," p "bw," f["size"] "," f["MBps"]
                print r ",udp," p "lost_pct," f["size"] "," (f["sent"] > 0 && f["lost"] > 0 ? 100 * f["lost"] / f["sent"] : 0)
                print r ",udp," p "send_bw," f["size"] "," f["send_MBps"]
            }
        }' "$log" >>"$RUN_ROWS"
    RUN_EXTRA="stream: $(awk '$2 == "kind=stream" { print $4, $5, $6 }' "$log")"
    RUN_EXTRA+="; GSO stream: $(awk '$2 == "kind=gso_stream" { if ($5 == "status=unavailable") print "not available"; else print $5, $6, $7 }' "$log")"
    STATUS[udp,$rep]=ok
}

# fi_pingpong for one size: the server pinned to one core, the client to
# the other; its own control port per run.
FI_PORT=47700
fipp_cells() {
    local s port server rc=0
    for s in 8 1024; do
        port=$((FI_PORT + s % 97))
        taskset -c "$CPU_B" timeout 60 fi_pingpong -p udp -e dgram -S "$s" -I "$FI_ITERS" -B "$port" \
            >"$BUILD_DIR/.fipp-server" 2>&1 &
        server=$!
        sleep 0.3
        echo "== size $s client"
        taskset -c "$CPU_A" timeout 60 fi_pingpong -p udp -e dgram -S "$s" -I "$FI_ITERS" -P "$port" 127.0.0.1 || rc=1
        wait "$server" || rc=1
        echo "== size $s server output"
        cat "$BUILD_DIR/.fipp-server"
    done
    return $rc
}

run_fipp() {
    local rep=$1 log="$LOG_DIR/fipp-$1.log" n
    RUN_EXTRA=""
    if [[ $HAVE_FIPP -eq 0 ]]; then
        echo "fi_pingpong not found (apt-get install libfabric-bin)" >"$log"
        STATUS[fipp,$rep]="fail (fi_pingpong not installed)"
        return 1
    fi
    FI_PORT=$((47700 + 100 * (rep % 5)))
    measured "$log" timeout -k 5 "$RUN_TIMEOUT" bash -c "$(declare -f fipp_cells); BUILD_DIR='$BUILD_DIR' CPU_A=$CPU_A CPU_B=$CPU_B FI_ITERS=$FI_ITERS FI_PORT=$FI_PORT fipp_cells"
    # The client's result line: bytes #sent #ack total time MB/sec usec/xfer
    # Mxfers/sec, bytes as "8" or "1k"; usec/xfer = time / (2 x iterations),
    # a half round trip.
    n=$(awk -v r="$rep" '
            /^== size [0-9]+ client/ { size = $3; client = 1; next }
            /^== / { client = 0; next }
            client && ($1 == size || $1 == size / 1024 "k") && $7 ~ /^[0-9.]+$/ {
                print r ",fipp,lat," size "," $7; client = 0 }' \
        "$log" | tee -a "$RUN_ROWS" | wc -l)
    if [[ $RC -ne 0 || $n -ne 2 ]]; then
        STATUS[fipp,$rep]="fail (exit $RC, $n of 2 results)"
        return 1
    fi
    STATUS[fipp,$rep]=ok
}

# vm_state (bench/lib.sh): "fast NS", "slow NS" (NS: the cache line's
# round trip in ns, bench/cacheline.c) or "unknown -"
declare -A VMSTATE  # transport,rep -> fast | slow | mixed (the probes before and after differed)
declare -A DISTURB  # transport,rep -> 1 if other processes used more than FOREIGN_PCT of the CPUs

run_one() {
    local t=$1 rep=$2 disturbed=0 before after ns0 ns1
    RUN_EXTRA=""
    : >"$RUN_ROWS"
    WALL=0 FOREIGN=0 LOAD0=- LOAD1=- UDPDROPS=0
    read -r before ns0 < <(vm_state)
    case $t in
        udp)  run_udp "$rep" ;;
        fipp) run_fipp "$rep" ;;
        *)    run_mpi "$t" "$rep" ;;
    esac
    read -r after ns1 < <(vm_state)
    VMSTATE[$t,$rep]=$before
    [[ $before == "$after" ]] || VMSTATE[$t,$rep]=mixed
    RUN_EXTRA+="${RUN_EXTRA:+, }VM $before ${ns0}ns -> $after ${ns1}ns"
    [[ ${STATUS[$t,$rep]} == ok ]] || FAILED=$((FAILED + 1))
    printf '  rep %d/%d  %-12s %-4s %5.1fs  load %s -> %s  others %s%% of the CPUs  UDP rcvbuf drops %s%s\n' \
        "$rep" "$REPS" "$t" "${STATUS[$t,$rep]%% *}" "$WALL" "$LOAD0" "$LOAD1" "$FOREIGN" \
        "$UDPDROPS" "${RUN_EXTRA:+  ($RUN_EXTRA)}"
    [[ ${STATUS[$t,$rep]} == ok ]] || echo "    ${STATUS[$t,$rep]}; log: ${LOG_DIR#$REPO_DIR/}/$t-$rep.log"
    if [[ $FOREIGN -gt $FOREIGN_PCT ]]; then
        echo "    warning: other processes used ${FOREIGN}% of the CPUs during this run (load $LOAD0 -> $LOAD1): its numbers are suspect"
        DISTURBED+=("$t/$rep:$FOREIGN%")
        disturbed=1
    fi
    DISTURB[$t,$rep]=$disturbed
    sed "s/\$/,$disturbed,${VMSTATE[$t,$rep]}/" "$RUN_ROWS" >>"$RUNS_CSV"
}

: >"$RUNS_CSV"
# shellcheck disable=SC2206
ORDER=($TRANSPORTS)
echo "perf: Open MPI $(ompi_info --parsable | sed -n 's/^ompi:version:full://p') ($(command -v mpirun)); $REPS repetitions of {$TRANSPORTS}, interleaved; $NCPU CPUs; mpirun $BIND; budget x$BUDGET"
echo "      load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# How long this host takes a polling process off its CPU: a peer stalled
# longer than the retransmit timeout makes a lossless path retransmit.
STALLS=$("$BENCH_BIN/stalls" --seconds "$STALL_SECONDS" --cpus "$CPU_A,$CPU_B" 2>&1 |
    awk '$1 == "STALLS" { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                          printf "%scpu%s: %s gaps > 0.1 ms, %s > 0.5 ms, %s > 2 ms, longest %s us",
                                 sep, f["cpu"], f["over100us"], f["over500us"], f["over2ms"], f["max_us"]; sep = "; " }')
echo "      host stalls of a pinned busy loop over ${STALL_SECONDS}s (bench/stalls.c): ${STALLS:-not measured}"
for rep in $(seq 1 "$REPS"); do
    n=${#ORDER[@]}
    rotation=$(( (rep - 1) / 2 * 2 ))   # odd repetitions rotate, even ones mirror the one before
    for ((i = 0; i < n; i++)); do
        j=$(( rep % 2 == 1 ? i : n - 1 - i ))
        run_one "${ORDER[$(( (j + rotation) % n ))]}" "$rep"
    done
done

# ---------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------

# perf.csv: median, min, max per transport/metric/size.
awk -F, -v spread="$SPREAD_PCT" -v drop="$DROP_DISTURBED" '
    function unit(m) { return m ~ /lat/ ? "us" : m ~ /bw/ ? "MBps" : m == "rate" ? "msgps" : m ~ /lost_pct/ ? "pct" : "count" }
    # pass 1: which transports have quiet runs
    NR == FNR { if ($6 == 0) quiet[$2] = 1; next }
    drop && $6 == 1 && ($2 in quiet) { next }
    { k = $2 "," $3 "," $4; v[k, ++n[k]] = $5 + 0; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k } }
    END {
        print "transport,metric,size,unit,n,median,min,max,spread_pct,flag"
        for (j = 1; j <= nk; j++) {
            k = keys[j]; c = n[k]
            for (a = 1; a <= c; a++) x[a] = v[k, a]
            for (a = 2; a <= c; a++) { y = x[a]; for (b = a - 1; b >= 1 && x[b] > y; b--) x[b + 1] = x[b]; x[b + 1] = y }
            med = c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2
            sp = med > 0 ? 100 * (x[c] - x[1]) / med : 0
            split(k, p, ",")
            flag = (p[2] ~ /^(gso_)?(lat|bw)$|^rate$/ && c > 1 && sp > spread) ? "noisy" : ""
            printf "%s,%.6g,%.6g,%.6g,%.1f,%s\n", k "," unit(p[2]) "," c, med, x[1], x[c], sp, flag
        }
    }' "$RUNS_CSV" "$RUNS_CSV" >"$SUMMARY_CSV"

# Lookups into perf.csv.
declare -A MED MIN MAX FLAG
while IFS=, read -r t m s _ _ med mn mx _ fl; do
    [[ $t == transport ]] && continue
    MED[$t,$m,$s]=$med MIN[$t,$m,$s]=$mn MAX[$t,$m,$s]=$mx FLAG[$t,$m,$s]=$fl
done <"$SUMMARY_CSV"

fmt() { # metric value
    case $1 in
        lat|gso_lat)  awk -v v="$2" 'BEGIN { printf (v < 100 ? "%.2f" : "%.0f"), v }' ;;
        rate) awk -v v="$2" 'BEGIN { printf "%.0fk", v / 1000 }' ;;
        *)    awk -v v="$2" 'BEGIN { printf "%.0f", v }' ;;
    esac
}
cell() { # transport metric size
    local k="$1,$2,$3"
    if [[ -z ${MED[$k]:-} ]]; then echo "-"; return; fi
    printf '%s (%s-%s)%s' "$(fmt "$2" "${MED[$k]}")" "$(fmt "$2" "${MIN[$k]}")" \
        "$(fmt "$2" "${MAX[$k]}")" "${FLAG[$k]:+!}"
}
ratio() { # a b -> a/b
    if [[ -n ${1:-} && -n ${2:-} ]] && awk -v b="$2" 'BEGIN { exit !(b > 0) }'; then
        awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'
    else
        echo "-"
    fi
}
human() {
    case $1 in
        0) echo "0 B" ;; 8) echo "8 B" ;; 1024) echo "1 KiB" ;; 1472) echo "1472 B" ;;
        16384) echo "16 KiB" ;; 65536) echo "64 KiB" ;; 1048576) echo "1 MiB" ;; 4194304) echo "4 MiB" ;;
        *) echo "$1 B" ;;
    esac
}

row_label() { # metric size
    case $1 in
        lat) echo "latency $(human "$2")" ;;
        bw) echo "bandwidth $(human "$2")" ;;
        rate) echo "msg rate 8 B" ;;
    esac
}

MPI_T=()
for t in usnic usnic_gso usnic_ofi tcp ucx ofi_rxm rxd vader; do has "$t" && MPI_T+=("$t"); done
short() { # a transport's name in a ratio column's header
    case $1 in
    usnic) echo "usnic" ;; usnic_ofi) echo "ofi" ;; usnic_gso) echo "gso1472" ;;
    usnic_header) echo "header" ;; usnic_none) echo "none" ;; *) title "$1" ;;
    esac
}
W=22
ROWS="lat:0 lat:8 lat:1024 lat:16384 lat:65536 bw:65536 bw:1048576 bw:4194304 rate:8"

if [[ ${#MPI_T[@]} -gt 0 ]]; then
    echo
    if [[ $DROP_DISTURBED -eq 1 && ${#DISTURBED[@]} -gt 0 ]]; then
        echo "Median (min-max) over the $REPS interleaved runs minus the ${#DISTURBED[@]} disturbed ones (listed at the"
        echo "end; a transport whose every run was disturbed keeps them all); \"!\" = spread above ${SPREAD_PCT}% of the median."
    else
        echo "Median (min-max) over $REPS interleaved runs; \"!\" = spread above ${SPREAD_PCT}% of the median."
    fi
    echo "latency: half round trip, us (lower is better); bandwidth: MB/s = 10^6 B/s (higher is better);"
    echo "rate: 8-byte messages per second, window of 64 MPI_Isend (higher is better)."
    echo "Ratios are usnic (the default wire) / peer, from the medians (unpaired: the wire table below pairs"
    echo "runs within one VM state); usnic/ofi = the default (socket) wire against the ofi wire."
    echo
    line=$(printf '%-18s' "")
    for t in "${MPI_T[@]}"; do line+=$(printf '  %-*s' $W "$(title "$t")"); done
    for t in "${MPI_T[@]}"; do [[ $t == usnic || $t == usnic_gso ]] || line+=$(printf '  %12s' "usnic/$(short "$t")"); done
    echo "$line"
    for row in $ROWS; do
        m=${row%%:*} s=${row#*:}
        label=$(row_label "$m" "$s")
        line=$(printf '%-18s' "$label")
        for t in "${MPI_T[@]}"; do line+=$(printf '  %-*s' $W "$(cell "$t" "$m" "$s")"); done
        for t in "${MPI_T[@]}"; do
            [[ $t == usnic || $t == usnic_gso ]] ||
                line+=$(printf '  %12s' "$(ratio "${MED[usnic,$m,$s]:-}" "${MED[$t,$m,$s]:-}")")
        done
        echo "$line"
    done
fi

if has usnic; then
    echo
    # Per run, in run order; "*" marks a disturbed run.
    resends=$(awk -F, '$2 == "usnic" && $3 == "resends" { printf "%s%s%s", sep, $5, $6 == 1 ? "*" : ""; sep = " " }' "$RUNS_CSV")
    steady=$(awk -F, '$2 == "usnic" && $3 == "steady_resends" { printf "%s%s%s", sep, $5, $6 == 1 ? "*" : ""; sep = " " }' "$RUNS_CSV")
    # the target counts the steady state: the timed batches only
    quiet_resends=$(awk -F, -v drop="$DROP_DISTURBED" '$2 == "usnic" && $3 == "steady_resends" { all = all " " $5; if ($6 == 0) q = q " " $5 }
        END { print (drop && q != "" ? q : all) }' "$RUNS_CSV")
    # "left out" only when some runs were quiet and others were not
    left_out=$(awk -F, -v drop="$DROP_DISTURBED" '$2 == "usnic" && $3 == "resends" { if ($6 == 0) q++; else d++ }
        END { if (drop && q > 0 && d > 0) print ", " d " disturbed run(s) left out" }' "$RUNS_CSV")
    sends=$(awk -F, '$2 == "usnic" && $3 == "total_sends" { printf "%s%s", sep, $5; sep = " " }' "$RUNS_CSV")
    tmo=$(awk -F, '$2 == "usnic" && $3 == "timeout_retrans" { s += $5 } END { print s + 0 }' "$RUNS_CSV")
    fast=$(awk -F, '$2 == "usnic" && $3 == "fast_retrans" { s += $5 } END { print s + 0 }' "$RUNS_CSV")
    spurious=$(awk -F, '$2 == "usnic" && $3 == "spurious_timeouts" { s += $5 } END { print s + 0 }' "$RUNS_CSV")
    echo "usnic retransmissions per run (MPI_T btl_usnic_num_resends, both ranks; * = disturbed run): ${resends:--}"
    echo "  of segments sent per run: ${sends:--}; all runs together: $tmo after a timeout ($spurious reported premature by the peer), $fast fast"
    echo "  in steady state (timed batches only, without warm-up and payload checks): ${steady:--}"
fi

# paired STAT MODE METRIC SIZE: median over qualifying reps of ratio
# (STAT=ratio) or difference (STAT=diff) of MODE to PAIR_BASE (default
# usnic_none); "-" if none.  The base's metric and size are METRIC and
# SIZE unless PAIR_BMETRIC / PAIR_BSIZE say otherwise (a raw udp cell).
paired() {
    local stat=$1 mode=$2 metric=$3 size=$4 base=${PAIR_BASE:-usnic_none} r vals="" states="" a b
    local bmetric=${PAIR_BMETRIC:-$3} bsize=${PAIR_BSIZE:-$4}
    for r in $(seq 1 "$REPS"); do
        [[ ${STATUS[$mode,$r]:-} == ok && ${STATUS[$base,$r]:-} == ok ]] || continue
        [[ ${VMSTATE[$mode,$r]:-} == "${VMSTATE[$base,$r]:-x}" && ${VMSTATE[$mode,$r]} != mixed ]] || continue
        # a run that shared the CPUs with other work pairs with nothing
        # (DROP_DISTURBED=0: it does)
        [[ $DROP_DISTURBED -eq 0 || (${DISTURB[$mode,$r]:-0} -eq 0 && ${DISTURB[$base,$r]:-0} -eq 0) ]] || continue
        a=$(awk -F, -v r="$r" -v t="$mode" -v m="$metric" -v s="$size" '$1 == r && $2 == t && $3 == m && $4 == s { print $5 }' "$RUNS_CSV")
        b=$(awk -F, -v r="$r" -v t="$base" -v m="$bmetric" -v s="$bsize" '$1 == r && $2 == t && $3 == m && $4 == s { print $5 }' "$RUNS_CSV")
        [[ -n $a && -n $b ]] || continue
        vals+="$(awk -v a="$a" -v b="$b" -v st="$stat" 'BEGIN { print (st == "diff" ? a - b : (b > 0 ? a / b : "")) }') "
        states+="${VMSTATE[$mode,$r]:0:1}"
    done
    tr ' ' '\n' <<<"$vals" | grep . | sort -g | awk -v st="$stat" -v states="$states" '
        { x[++n] = $1 }
        END {
            if (n == 0) { print "-"; exit }
            med = n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
            printf (st == "diff" ? "%+.2f us" : "%.3fx"), med; printf " (n=%d %s)", n, states }'
}

# This plugin against an older one (BASE_DIR), paired as below
if has usnic_base && has usnic; then
    echo
    echo "usnic against the plugin in BASE_DIR ($BASE_DIR), paired within a repetition and one VM state"
    echo "(median of the paired ratios; above 1 means this plugin is faster for bandwidth and rate, slower for latency)"
    for row in lat:8 lat:1024 lat:16384 bw:65536 bw:1048576 rate:8; do
        m=${row%%:*} s=${row#*:}
        printf '%-18s  %-22s  %-22s  %-26s\n' "$(row_label "$m" "$s")" "$(cell usnic "$m" "$s")" \
            "$(cell usnic_base "$m" "$s")" "$(PAIR_BASE=usnic_base paired ratio usnic "$m" "$s")"
    done
fi

# Congestion control on (the default) against off, paired as above: what
# the controller costs on a healthy path (issue 26: within 3%)
for pair in usnic:usnic_nocc usnic_gso:usnic_gso_nocc; do
    on=${pair%%:*} off=${pair#*:}
    has "$on" && has "$off" || continue
    echo
    echo "$(title "$on") with congestion control against btl_usnic_congestion_control 0, paired within a repetition and one VM state"
    echo "(median of the paired ratios; above 1 means on is faster for bandwidth and rate, slower for latency)"
    for row in lat:8 lat:1024 lat:16384 lat:65536 bw:65536 bw:1048576 rate:8; do
        m=${row%%:*} s=${row#*:}
        printf '%-18s  %-22s  %-22s  %-26s\n' "$(row_label "$m" "$s")" "$(cell "$on" "$m" "$s")" \
            "$(cell "$off" "$m" "$s")" "$(PAIR_BASE=$off paired ratio "$on" "$m" "$s")"
    done
done

# Datagram protection: each mode against none, paired within a repetition
# and within one VM state
if has usnic_none && { has usnic || has usnic_header; }; then
    echo
    echo "Datagram protection (btl_usnic_protection), each mode against none: per repetition, the mode's run and"
    echo "the none run are paired when both succeeded and both saw the same VM state (fast or slow, probed before"
    echo "and after each run)$([[ $DROP_DISTURBED -eq 1 ]] && echo ", neither disturbed by other work"); the table gives the median of the paired ratios (n = pairs,"
    echo "and their states)."
    echo "Latency rows also give the median paired difference in us."
    printf '%-18s  %-22s  %-22s  %-22s  %-26s  %-26s\n' "" "full" "header" "none" "full vs none" "header vs none"
    for row in lat:8 lat:1024 lat:16384 bw:65536 bw:1048576 rate:8; do
        m=${row%%:*} s=${row#*:}
        label=$(row_label "$m" "$s")
        full=- header=-
        has usnic && full="$(paired ratio usnic "$m" "$s")"
        has usnic_header && header="$(paired ratio usnic_header "$m" "$s")"
        printf '%-18s  %-22s  %-22s  %-22s  %-26s  %-26s\n' "$label" "$(cell usnic "$m" "$s")" \
            "$(cell usnic_header "$m" "$s")" "$(cell usnic_none "$m" "$s")" "$full" "$header"
        if [[ $m == lat ]]; then
            full=- header=-
            has usnic && full="$(paired diff usnic "$m" "$s")"
            has usnic_header && header="$(paired diff usnic_header "$m" "$s")"
            printf '%-18s  %-22s  %-22s  %-22s  %-26s  %-26s\n' "" "" "" "" "$full" "$header"
        fi
    done
fi

# by_state MODE BASE METRIC SIZE [BMETRIC BSIZE]: for each VM state in
# which both transports have runs (fast, slow; mixed runs left out, and
# disturbed ones unless DROP_DISTURBED=0), the ratio of MODE's median to
# BASE's median over that state's runs (unpaired), as "STATE RATIO NMODE
# NBASE" lines
by_state() {
    local mode=$1 base=$2 metric=$3 size=$4 bmetric=${5:-$3} bsize=${6:-$4}
    awk -F, -v t="$mode" -v b="$base" -v m="$metric" -v s="$size" -v bm="$bmetric" -v bs="$bsize" -v drop="$DROP_DISTURBED" '
        drop && $6 == 1 { next }
        function med(arr, n,   i, j, y, x) {
            for (i = 1; i <= n; i++) x[i] = arr[i]
            for (i = 2; i <= n; i++) { y = x[i]; for (j = i - 1; j >= 1 && x[j] > y; j--) x[j + 1] = x[j]; x[j + 1] = y }
            return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
        }
        $7 == "fast" || $7 == "slow" {
            if ($2 == t && $3 == m && $4 == s) { na[$7]++; A[$7, na[$7]] = $5 }
            if ($2 == b && $3 == bm && $4 == bs) { nb[$7]++; B[$7, nb[$7]] = $5 }
        }
        END {
            split("fast slow", st, " ")
            for (k = 1; k <= 2; k++) {
                z = st[k]
                if (!(na[z] > 0 && nb[z] > 0)) continue
                delete xa; delete xb
                for (i = 1; i <= na[z]; i++) xa[i] = A[z, i]
                for (i = 1; i <= nb[z]; i++) xb[i] = B[z, i]
                mb = med(xb, nb[z])
                if (mb > 0) printf "%s %.3f %d %d\n", z, med(xa, na[z]) / mb, na[z], nb[z]
            }
        }' "$RUNS_CSV"
}
# by_state_text ...: the same in one cell, "f 0.93x 3:2, s 1.10x 1:1" or "-"
by_state_text() {
    local out
    out=$(by_state "$@" | awk '{ printf "%s%s %.2fx %d:%d", sep, substr($1, 1, 1), $2, $3, $4; sep = ", " }')
    echo "${out:--}"
}

# The wires against btl/tcp and the ofi wire: each pair of runs of one
# repetition in one VM state, as for the protection table
WIRE_PAIRS=()
for p in usnic:tcp usnic_gso:tcp usnic_ofi:tcp usnic:usnic_ofi usnic_gso:usnic_ofi usnic_header:tcp usnic_none:tcp; do
    has "${p%%:*}" && has "${p#*:}" && WIRE_PAIRS+=("$p")
done
if [[ ${#WIRE_PAIRS[@]} -gt 0 ]]; then
    echo
    echo "The wires paired (issue 14): per repetition, a run and its base's run are paired when both succeeded,"
    echo "both saw the same VM state (probed before and after each run; a run whose probes differ is \"mixed\""
    echo "and left out)$([[ $DROP_DISTURBED -eq 1 ]] && echo " and neither was disturbed by other work"); each cell is the median of the"
    echo "paired ratios (n = pairs, their states f/s).  \"by state\": the ratio of the two transports' medians"
    echo "within each state (its runs$([[ $DROP_DISTURBED -eq 1 ]] && echo ", undisturbed"), unpaired; run counts of the first and of the base)."
    echo "usnic = the default wire (${WIRE_SEEN[usnic]:-not seen}), gso1472 = the socket wire with 1472-byte datagrams"
    echo "(${WIRE_SEEN[usnic_gso]:-not seen}), ofi = the ofi wire, header and none = the default wire with"
    echo "btl_usnic_protection header and none.  Latency: below 1 is better; bandwidth and rate: above 1."
    line=$(printf '%-18s' "")
    for p in "${WIRE_PAIRS[@]}"; do line+=$(printf '  %-24s' "$(short "${p%%:*}")/$(short "${p#*:}")"); done
    echo "$line"
    for row in lat:8 lat:16384 bw:65536 bw:1048576 rate:8; do
        m=${row%%:*} s=${row#*:}
        line=$(printf '%-18s' "$(row_label "$m" "$s")")
        line2=$(printf '%-18s' "  by state")
        for p in "${WIRE_PAIRS[@]}"; do
            line+=$(printf '  %-24s' "$(PAIR_BASE=${p#*:} paired ratio "${p%%:*}" "$m" "$s")")
            line2+=$(printf '  %-24s' "$(by_state_text "${p%%:*}" "${p#*:}" "$m" "$s")")
        done
        echo "$line"
        echo "$line2"
    done
    states=$(awk -F, '$7 != "" { k = $1 "," $2; if (!(k in seen)) { seen[k] = 1; n[$7]++ } }
        END { printf "fast %d, slow %d, mixed %d", n["fast"], n["slow"], n["mixed"] }' "$RUNS_CSV")
    echo "VM state of the successful runs (all transports): $states"
fi
for t in usnic usnic_gso usnic_ofi usnic_header usnic_none; do
    [[ -n ${WIRE_ALL[$t]:-} ]] || continue
    echo "wire of the $t runs (btl_usnic_verbose 5 on both ranks): $(tr ';' '\n' <<<"${WIRE_ALL[$t]}" | grep . | sort | uniq -c |
        awk '{ n = $1; $1 = ""; printf "%s%s in %d run(s)", sep, substr($0, 2), n; sep = ", " }')"
done

# Registered memory: dgcheck with FI_MR_LOCAL enforced against the same
# provider without it, paired within a repetition and one VM state
if has dgcheck && has dgcheck_nomr; then
    echo
    echo "Registered memory (test provider dgcheck, usnic's contract): FI_MR_LOCAL enforced (every buffer in a"
    echo "registered slab, every descriptor checked) against the same provider needing none (nothing registered);"
    echo "median of paired ratios, as above.  Absolute numbers of this test provider mean little."
    printf '%-18s  %-22s  %-22s  %-26s\n' "" "dgcheck MR" "dgcheck no MR" "MR vs no MR"
    for row in lat:8 lat:1024 lat:16384 bw:65536 bw:1048576 rate:8; do
        m=${row%%:*} s=${row#*:}
        printf '%-18s  %-22s  %-22s  %-26s\n' "$(row_label "$m" "$s")" "$(cell dgcheck "$m" "$s")" \
            "$(cell dgcheck_nomr "$m" "$s")" "$(PAIR_BASE=dgcheck_nomr paired ratio dgcheck "$m" "$s")"
    done
fi

if has udp || has fipp; then
    # cmp_lat PEER SIZE RAWMETRIC: the peer's latency at SIZE against the raw cell
    cmp_lat() {
        local a=${MED[$1,lat,$2]:-} b=${MED[udp,$3,$2]:-}
        if [[ -n $a && -n $b ]]; then
            awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f us (%+.2f us, %.2fx)", a, a - b, a / b }'
        else
            echo "-"
        fi
    }
    # cmp_bw PEER RAWMETRIC: the peer's 1 MiB bandwidth against the raw stream cell
    cmp_bw() {
        local a=${MED[$1,bw,1048576]:-} b=${MED[udp,$2,1472]:-}
        if [[ -n $a && -n $b ]]; then
            awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f MB/s at 1 MiB (%.2fx)", a, a / b }'
        else
            echo "-"
        fi
    }
    # raw_row LABEL RAW USNIC TCP: the tcp column only when tcp ran
    raw_row() {
        if has tcp; then
            printf '%-46s  %-22s  %-32s  %s\n' "$1" "$2" "$3" "$4"
        else
            printf '%-46s  %-22s  %s\n' "$1" "$2" "$3"
        fi
    }
    # gso_cell METRIC SIZE KIND: the cell, or why udp_raw could not measure it
    gso_cell() {
        local v na
        v=$(cell udp "$1" "$2")
        if [[ $v == - ]]; then
            na=$(grep -h "^RAW kind=$3 .*status=unavailable" "$LOG_DIR"/udp-*.log 2>/dev/null |
                sed 's/.* -- //' | head -1)
            [[ -n $na ]] && v=$na
        fi
        echo "$v"
    }
    echo
    echo "Raw datagram path (no MPI), median (min-max); usnic$(has tcp && echo " and tcp") compared at the same size"
    echo "(the streams with their 1 MiB bandwidth); x = peer / raw:"
    raw_row "" "raw" "usnic" "tcp"
    for s in 0 8 1024 1472 16384; do
        has udp || break
        label="UDP socket ping-pong $(human $s), us"
        [[ $s == 16384 ]] && label="UDP ping-pong 16 KiB = 12 datagrams, us"
        raw_row "$label" "$(cell udp lat "$s")" "$(cmp_lat usnic "$s" lat)" "$(cmp_lat tcp "$s" lat)"
    done
    if has udp; then
        if [[ -n ${MED[usnic,bw,1048576]:-} && -n ${MED[udp,bw,1472]:-} ]]; then
            cmp=$(awk -v a="${MED[usnic,bw,1048576]}" -v b="${MED[udp,bw,1472]}" 'BEGIN { printf "%.0f MB/s at 1 MiB (%.0f%%)", a, 100 * a / b }')
        else
            cmp="-"
        fi
        raw_row "UDP socket stream 1472 B goodput, MB/s" "$(cell udp bw 1472)" "$cmp" "$(cmp_bw tcp bw)"
        printf '%-46s  %-22s\n' "  sender's rate, MB/s" "$(cell udp send_bw 1472)"
        printf '%-46s  %-22s\n' "  datagrams lost to a full rcvbuf, %" "$(cell udp lost_pct 1472)"
        # segmentation offload: one send() per 16 KiB message or per 44 datagrams
        v=$(gso_cell gso_lat 16384 gso_pingpong)
        if [[ $v == "not available"* ]]; then
            printf '%-46s  %s\n' "GSO ping-pong 16 KiB (one send each way), us" "$v"
        else
            raw_row "GSO ping-pong 16 KiB (one send each way), us" "$v" \
                "$(cmp_lat usnic 16384 gso_lat)" "$(cmp_lat tcp 16384 gso_lat)"
        fi
        v=$(gso_cell gso_bw 1472 gso_stream)
        if [[ $v == "not available"* ]]; then
            printf '%-46s  %s\n' "GSO+GRO stream 44 x 1472 B goodput, MB/s" "$v"
        else
            raw_row "GSO+GRO stream 44 x 1472 B goodput, MB/s" "$v" "$(cmp_bw usnic gso_bw)" "$(cmp_bw tcp gso_bw)"
            printf '%-46s  %-22s\n' "  sender's rate, MB/s" "$(cell udp gso_send_bw 1472)"
            printf '%-46s  %-22s\n' "  segments lost to a full rcvbuf, %" "$(cell udp gso_lost_pct 1472)"
        fi
    fi
    if has fipp; then
        for s in 8 1024; do
            v=$(cell fipp lat "$s")
            if [[ $v == - ]]; then
                v="did not run here: $(for r in $(seq 1 "$REPS"); do echo "${STATUS[fipp,$r]:-}"; done | sort -u | head -1)"
            fi
            printf '%-46s  %-22s\n' "fi_pingpong -p udp -e dgram $(human $s), us" "$v"
        done
    fi
fi

# ---------------------------------------------------------------------------
# Targets (issue 5), from the medians
# ---------------------------------------------------------------------------

echo
target() { # text condition-awk value-text ; prints met / NOT met / not measured
    local text=$1 cond=$2 vals=$3
    if [[ -z $cond ]]; then
        echo "target $text: not measured ($vals)"
    elif awk "BEGIN { exit !($cond) }"; then
        echo "target $text: met ($vals)"
    else
        echo "target $text: NOT met ($vals)"
    fi
}
m() { echo "${MED[$1]:-}"; }
v() { local k=$1 metric; metric=${k#*,}; metric=${metric%%,*}; fmt "$metric" "$(m "$k")"; }
both() { [[ -n $(m "$1") && -n $(m "$2") ]]; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }

t="8 B latency no worse than btl/tcp"
if both usnic,lat,8 tcp,lat,8; then
    target "$t" "$(m usnic,lat,8) <= $(m tcp,lat,8)" "usnic $(v usnic,lat,8) us, tcp $(v tcp,lat,8) us"
else target "$t" "" "needs usnic and tcp"; fi
t="8 B latency within 2 us of the bare UDP ping-pong"
if both usnic,lat,8 udp,lat,8; then
    target "$t" "$(m usnic,lat,8) - $(m udp,lat,8) <= 2" \
        "usnic $(v usnic,lat,8) us, UDP socket $(v udp,lat,8) us, gap $(awk -v a="$(m usnic,lat,8)" -v b="$(m udp,lat,8)" 'BEGIN { printf "%.2f", a - b }') us"
else target "$t" "" "needs usnic and udp"; fi
t="16 KiB latency at most 0.75x udp;ofi_rxd"
if both usnic,lat,16384 rxd,lat,16384; then
    target "$t" "$(m usnic,lat,16384) <= 0.75 * $(m rxd,lat,16384)" \
        "usnic $(v usnic,lat,16384) us, rxd $(v rxd,lat,16384) us, $(ratio "$(m usnic,lat,16384)" "$(m rxd,lat,16384)")"
else target "$t" "" "needs usnic and rxd"; fi
t="1 MiB bandwidth at least 1.4x udp;ofi_rxd"
if both usnic,bw,1048576 rxd,bw,1048576; then
    target "$t" "$(m usnic,bw,1048576) >= 1.4 * $(m rxd,bw,1048576)" \
        "usnic $(v usnic,bw,1048576) MB/s, rxd $(v rxd,bw,1048576) MB/s, $(ratio "$(m usnic,bw,1048576)" "$(m rxd,bw,1048576)")"
else target "$t" "" "needs usnic and rxd"; fi
t="1 MiB bandwidth at least 85% of the bare UDP stream (1472 B)"
if both usnic,bw,1048576 udp,bw,1472; then
    target "$t" "$(m usnic,bw,1048576) >= 0.85 * $(m udp,bw,1472)" \
        "usnic $(v usnic,bw,1048576) MB/s, UDP stream $(v udp,bw,1472) MB/s, $(pct "$(m usnic,bw,1048576)" "$(m udp,bw,1472)")"
else target "$t" "" "needs usnic and udp"; fi
t="8 B message rate at least 1.5x btl/tcp"
if both usnic,rate,8 tcp,rate,8; then
    target "$t" "$(m usnic,rate,8) >= 1.5 * $(m tcp,rate,8)" \
        "usnic $(v usnic,rate,8) msg/s, tcp $(v tcp,rate,8) msg/s, $(ratio "$(m usnic,rate,8)" "$(m tcp,rate,8)")"
else target "$t" "" "needs usnic and tcp"; fi
t="no retransmissions in lossless runs, steady state"
if has usnic && [[ -n ${quiet_resends// /} ]]; then
    maxr=$(tr ' ' '\n' <<<"$quiet_resends" | sort -n | tail -1)
    target "$t" "$maxr == 0" "per run, timed batches:$quiet_resends$left_out; whole runs: $resends"
elif has usnic; then
    target "$t" "" "no successful usnic run"
fi
t="default protection (full): 8 B latency at most 0.3 us above none"
d=$(has usnic && has usnic_none && paired diff usnic lat 8)
if [[ -n $d && $d != - ]]; then
    target "$t" "$(awk '{ print $1 + 0 }' <<<"$d") <= 0.3" "full - none, paired: $d"
else target "$t" "" "needs usnic and usnic_none runs in one VM state"; fi
t="default protection (full): 1 MiB bandwidth at least 0.9x none"
d=$(has usnic && has usnic_none && paired ratio usnic bw 1048576)
if [[ -n $d && $d != - ]]; then
    target "$t" "$(awk '{ print $1 + 0 }' <<<"$d") >= 0.9" "full / none, paired: $d"
else target "$t" "" "needs usnic and usnic_none runs in one VM state"; fi
# Issue 14 on loopback: the new (socket) wire against btl/tcp and against
# the ofi wire, from paired ratios in one VM state; without any pair, from
# the per-state medians (then every state with runs of both must meet it).
# goal TEXT MODE BASE METRIC SIZE OP THRESHOLD EXTRA
goal() {
    local text=$1 mode=$2 base=$3 metric=$4 size=$5 op=$6 thr=$7 extra=$8 d cond="" vals bs
    if ! has "$mode" || ! has "$base"; then
        target "$text" "" "needs $mode and $base"
        return
    fi
    d=$(PAIR_BASE=$base paired ratio "$mode" "$metric" "$size")
    vals="medians $(short "$mode") $(fmtu "$metric" "$(m "$mode,$metric,$size")"), $(short "$base") $(fmtu "$metric" "$(m "$base,$metric,$size")")"
    if [[ $d != - ]]; then
        cond="$(awk '{ print $1 + 0 }' <<<"$d") $op $thr"
        vals="$(short "$mode")/$(short "$base") paired $d; $vals"
    else
        bs=$(by_state "$mode" "$base" "$metric" "$size")
        if [[ -n $bs ]]; then
            cond=$(awk -v op="$op" -v t="$thr" '{ printf "%s%s %s %s", sep, $2, op, t; sep = " && " }' <<<"$bs")
            vals="no pair in one VM state; per-state medians $(by_state_text "$mode" "$base" "$metric" "$size"); $vals"
        else
            target "$text" "" "no runs of $mode and $base in one VM state; $vals"
            return
        fi
    fi
    target "$text" "$cond" "$vals${extra:+; $extra}"
}
fmtu() { # metric value -> value with unit, or "-"
    [[ -n $2 ]] || { echo "-"; return; }
    case $1 in lat|gso_lat) echo "$(fmt "$1" "$2") us" ;; rate) echo "$(fmt rate "$2") msg/s" ;; *) echo "$(fmt "$1" "$2") MB/s" ;; esac
}
# ceiling MODE METRIC SIZE RAWMETRIC RAWSIZE LABEL: the raw cell of the
# same path and MODE against it (medians, and paired in one VM state)
ceiling() {
    local raw=${MED[udp,$4,$5]:-} na
    if [[ -z $raw && $4 != gso_* ]]; then
        echo "$6: not measured"
        return
    elif [[ -z $raw ]]; then
        na=$(grep -h "^RAW kind=$([[ $4 == gso_lat ]] && echo gso_pingpong || echo gso_stream) .*status=unavailable" \
            "$LOG_DIR"/udp-*.log 2>/dev/null | sed 's/.* -- //' | head -1)
        echo "$6: ${na:-not measured}"
        return
    fi
    echo "$6 $(fmtu "$4" "$raw") ($(short "$1") $(ratio "$(m "$1,$2,$3")" "$raw") of it, paired $(PAIR_BASE=udp PAIR_BMETRIC=$4 PAIR_BSIZE=$5 paired ratio "$1" "$2" "$3"))"
}
echo
echo "Issue 14 targets on loopback (same run, same VM state; paired ratios, else per-state medians):"
# (usnic_header: the default wire authenticating headers only, what the
# bandwidth targets cost once the payload's tag is left out)
for mode in usnic usnic_gso usnic_header; do
    has "$mode" || continue
    who="$(short "$mode")"
    [[ $mode == usnic ]] && who="usnic (default wire: ${WIRE_SEEN[usnic]:-not seen})"
    [[ $mode == usnic_gso ]] && who="usnic_gso (socket wire, 1472-byte datagrams)"
    [[ $mode == usnic_header ]] && who="usnic_header (default wire, btl_usnic_protection header)"
    goal "$who: 1 MiB bandwidth at least 1.0x btl/tcp" "$mode" tcp bw 1048576 ">=" 1.0 \
        "$(ceiling "$mode" bw 1048576 gso_bw 1472 "raw GSO+GRO stream 44 x 1472 B")"
    goal "$who: 16 KiB latency at most 1.0x btl/tcp" "$mode" tcp lat 16384 "<=" 1.0 \
        "$(ceiling "$mode" lat 16384 gso_lat 16384 "raw GSO ping-pong 16 KiB")"
    [[ $mode == usnic_header ]] && continue # the small-message targets are the default's
    goal "$who: 8 B latency no worse than the ofi wire" "$mode" usnic_ofi lat 8 "<=" 1.0 \
        "$(ceiling "$mode" lat 8 lat 8 "raw UDP ping-pong 8 B")"
    goal "$who: 8 B message rate no worse than the ofi wire" "$mode" usnic_ofi rate 8 ">=" 1.0 \
        "no raw message-rate ceiling measured"
done
noquiet=$(awk -F, '{ t[$2] = 1; if ($6 == 0) q[$2] = 1 } END { for (k in t) if (!(k in q)) printf "%s ", k }' "$RUNS_CSV")
if [[ -n $noquiet ]]; then
    echo "caution: every run of { ${noquiet}} was disturbed by other work; their medians, and the targets that use them, are suspect"
fi
echo "(the scale targets are checked by: bash bench/perf.sh --scale)"

# ---------------------------------------------------------------------------
# Plot, noise summary, end
# ---------------------------------------------------------------------------

echo
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    if /usr/bin/python3 "$BENCH_DIR/plot.py" "$SUMMARY_CSV" "$PLOT" \
        "$REPS runs, $(date -u +%Y-%m-%d), $NCPU CPUs"; then
        echo "plot: ${PLOT#$REPO_DIR/}"
    else
        echo "plot: bench/plot.py failed"
    fi
else
    echo "plot: skipped (no matplotlib for /usr/bin/python3: apt-get install python3-matplotlib)"
fi
echo "CSV: ${SUMMARY_CSV#$REPO_DIR/} (per cell), ${RUNS_CSV#$REPO_DIR/} (per run); logs: ${LOG_DIR#$REPO_DIR/}/"
if [[ ${#DISTURBED[@]} -gt 0 ]]; then
    echo "warning: ${#DISTURBED[@]} of $((REPS * ${#ORDER[@]})) runs shared the machine with other work (>${FOREIGN_PCT}% of the CPUs): ${DISTURBED[*]}"
fi
echo "$FAILED failed run(s); total time $((SECONDS - START))s"
[[ $FAILED -eq 0 ]]
