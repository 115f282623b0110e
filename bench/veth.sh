#!/usr/bin/env bash
#
# The usnic BTL across two simulated hosts (network namespaces joined by
# veth pairs and a bridge, test/hosts/hosts.sh) whose links cut segmentation
# offload sends in software and coalesce them again at the receiving host
# (HOSTS_GSO=soft), at several MTUs, in one run, interleaved and repeated:
# 1 MiB bandwidth and 16 KiB / 8 B latency (bench/perf.c, one rank per
# host) for the usnic BTL on its default (socket) wire, on the ofi wire and
# btl/tcp, all restricted to the hosts' veth1 (subnet 10.77.1.0/24), next
# to the raw ceiling of the same path (test/hosts/xhost_stream.c: a UDP
# GSO+GRO stream and a TCP stream).  Must run as root.
#
#   bash bench/veth.sh                       # REPS=3, MTUs 1500 and 9000: ~75 s
#   bash bench/perf.sh --veth                # the same
#   VETH_MTUS=1500 REPS=5 bash bench/veth.sh
#   TRANSPORTS="usnic usnic_gso tcp raw" VETH_MTUS=9000 bash bench/veth.sh
#
# Transports (TRANSPORTS, default "usnic usnic_ofi tcp raw"; each runs once
# per repetition and MTU, the order rotated by one place per repetition):
#   usnic      pml ob1, btl usnic,self, btl_usnic_if_include veth1, the
#              default wire (auto: the socket wire, datagrams of MTU - 28
#              bytes, runs of them as one UDP_SEGMENT send, UDP_GRO reads)
#   usnic_ofi  the same with btl_usnic_wire ofi (1472-byte datagrams, one
#              sendto each, whatever the MTU)
#   usnic_gso  (not in the default list) the socket wire with
#              btl_usnic_max_datagram 1472
#   tcp        pml ob1, btl tcp,self, btl_tcp_if_include veth1
#   raw        xhost_stream from host 1 to host 2 on 10.77.1.0/24, STREAM_SECONDS
#              each: UDP GSO sends of 44 x 1472 B read with UDP_GRO; at an
#              MTU above 1500 also (MTU - 28)-byte segments, as many as fit
#              in 65507 bytes (7 x 8972 B at 9000); a TCP stream of 64 KiB
#              writes.  Goodput = bytes received / (last - first receive).
# Every usnic run logs its wire (btl_usnic_verbose 5) and its final counters
# (btl_usnic_stats 3600): a run whose ranks did not both open the wire its
# name says on veth1, with the expected datagram size (MTU - 28, or 1472),
# or, on the socket wire, without segmentation offload sends and coalesced
# receives across the hosts, is rejected as "wrongpath".  For every cell the
# switch port toward host 2 (h2p1) counts packets and bytes: an average
# packet of at most MTU + 14 bytes shows the data crossed the bridge cut to
# the MTU (software segmentation), whatever the sender handed the kernel.
#
# Ranks: mpirun runs in the head namespace with the namespace launch agent
# (test/hosts/ns-agent.sh as rsh agent, out-of-band TCP on 10.77.1.0/24, as
# test/hosts/run-host-tests.sh), one rank per host: host 1 (rank 0) pinned
# to CPU 0, host 2 (rank 1) to CPU 1 (taskset; VETH_PIN=0: unpinned), as
# the raw streams' sender and receiver.  The namespaces share the VM's two
# CPUs, so bench/cacheline.c in the root namespace probes the VM's
# cross-core state before and after every cell (fast ~60 ns / slow ~350 ns
# round trip, SLOW_NS=150 splits them); ratios are paired within one
# repetition, MTU and VM state, as in bench/perf.sh.
#
# The MTU changes between cells on the same namespaces (hosts.sh's
# hosts_links_options with HOSTS_MTU: every veth end and both bridges), so
# that repetitions interleave the MTUs too.  The namespaces are removed on
# exit, also on failure or interruption (trap).
#
# Environment:
#   REPS           repetitions, default 3
#   VETH_MTUS      MTUs, default "1500 9000"
#   BUDGET         scale of perf.c's per-cell time budgets, default 1
#   VETH_CELLS     perf.c cells, default lat:8,lat:16384,bw:1048576
#   STREAM_SECONDS seconds of each raw stream, default 1
#   RUN_TIMEOUT    seconds before one mpirun is killed, default 180
#   FOREIGN_PCT    "others used more than this % of the CPUs" warning, 10;
#                  such a cell is "disturbed"
#   DROP_DISTURBED 1 (default): disturbed cells are left out of the medians
#                  (while a quiet one exists), of the pairs and of the
#                  per-state medians; 0: kept
#   VETH_PIN       1 (default): pin host 1's side to CPU 0, host 2's to CPU 1
#
# Output: a line per cell, then per MTU a table (median (min-max) per
# transport, the ratio to tcp paired within one VM state, the raw
# ceilings) and the target line "1 MiB bandwidth at least 0.6x btl/tcp
# over the same pair".  Logs and CSV (rep,mtu,transport,metric,size,value,
# disturbed,vmstate) under bench/build/veth-logs/ and bench/build/veth-runs.csv.
# Exit status 0 if every cell succeeded.

set -u
set -o pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"          # REPO_DIR, test/lib.sh (LAUNCHER, rsh_agent_args, oob_net_args,
                               # series_dir), bench_build, vm_state, measured, field, transport_args
# shellcheck source=../test/hosts/hosts.sh
. "$REPO_DIR/test/hosts/hosts.sh"
BUILD_DIR=$(series_dir "$BENCH_DIR/build")
LOG_DIR="$BUILD_DIR/veth-logs"
BIN_DIR="$BUILD_DIR/veth"
RUNS_CSV="$BUILD_DIR/veth-runs.csv"
AGENT="$REPO_DIR/test/hosts/ns-agent.sh"

REPS=${REPS:-3}
VETH_MTUS=${VETH_MTUS:-"1500 9000"}
BUDGET=${BUDGET:-1}
VETH_CELLS=${VETH_CELLS:-lat:8,lat:16384,bw:1048576}
STREAM_SECONDS=${STREAM_SECONDS:-1}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
FOREIGN_PCT=${FOREIGN_PCT:-10}
DROP_DISTURBED=${DROP_DISTURBED:-1}
VETH_PIN=${VETH_PIN:-1}
TRANSPORTS=${TRANSPORTS:-"usnic usnic_ofi tcp raw"}
NCPU=$(nproc)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "veth: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------
# Checks and build
# ---------------------------------------------------------------------------

[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces, ethtool)"
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "bad REPS '$REPS'"
[[ $BUDGET =~ ^[0-9]*\.?[0-9]+$ ]] || die "bad BUDGET '$BUDGET'"
[[ $STREAM_SECONDS =~ ^[0-9]*\.?[0-9]+$ ]] || die "bad STREAM_SECONDS '$STREAM_SECONDS'"
[[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ && $FOREIGN_PCT =~ ^[0-9]+$ && $VETH_PIN =~ ^[01]$ && $DROP_DISTURBED =~ ^[01]$ ]] ||
    die "bad RUN_TIMEOUT, FOREIGN_PCT, VETH_PIN or DROP_DISTURBED"
[[ $VETH_CELLS =~ ^(lat|bw|rate):[0-9]+(,(lat|bw|rate):[0-9]+)*$ ]] || die "bad VETH_CELLS '$VETH_CELLS'"
for mtu in $VETH_MTUS; do
    [[ $mtu =~ ^[0-9]+$ && $mtu -ge 1280 && $mtu -le 65535 ]] || die "bad MTU '$mtu' in VETH_MTUS (1280..65535)"
done
[[ -n ${VETH_MTUS// /} ]] || die "VETH_MTUS is empty"
for t in $TRANSPORTS; do
    case $t in
        usnic|usnic_ofi|usnic_gso|tcp|raw) ;;
        *) die "unknown transport '$t' (known: usnic usnic_ofi usnic_gso tcp raw)" ;;
    esac
done
for cmd in mpicc mpirun cc timeout taskset awk ip bridge ethtool unshare; do
    command -v "$cmd" >/dev/null || die "$cmd not found"
done
has() { [[ " $TRANSPORTS " == *" $1 "* ]]; }
if [[ " $TRANSPORTS" == *" usnic"* ]] && ! ompi_info 2>/dev/null | grep -q 'MCA btl: usnic'; then
    die "Open MPI lists no usnic BTL (ompi_info | grep 'MCA btl: usnic'); install it first"
fi

START=$SECONDS
mkdir -p "$BIN_DIR" "$LOG_DIR" || die "cannot create $LOG_DIR"
rm -f "$LOG_DIR"/*.log
echo "building ${BENCH_BIN#$REPO_DIR/}/perf, xhost_stream, cacheline and reap"
bench_build perf xhost_stream cacheline reap || die "building the helper programs failed"

# ---------------------------------------------------------------------------
# Hosts (removed on exit: hosts_destroy kills what still runs inside them)
# ---------------------------------------------------------------------------

BG_PIDS=()
cleanup() {
    local pid
    for pid in "${BG_PIDS[@]}"; do
        kill "$pid" 2>/dev/null
    done
    hosts_destroy
}

HOSTFILE="$BIN_DIR/hostfile"
read -r FIRST_MTU _ <<<"$VETH_MTUS"
# hosts_setup installs hosts_destroy as the EXIT/INT/TERM trap at once
if ! HOSTS_MTU=$FIRST_MTU HOSTS_GSO=soft hosts_setup 2 "$HOSTFILE" "$LOG_DIR/hosts.log"; then
    echo "veth: cannot build the hosts: $WHY (see ${LOG_DIR#$REPO_DIR/}/hosts.log)" >&2
    cat "$LOG_DIR/hosts.log" >&2
    exit 1
fi
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
H1=${HOSTS[0]} H2=${HOSTS[1]}
A1=$HOSTS_NET1.1 A2=$HOSTS_NET1.2
ns_argv "$HOSTS_HEAD"; NS_HEAD=("${NS_ARGV[@]}")
ns_argv "$H1"; NS_H1=("${NS_ARGV[@]}")
ns_argv "$H2"; NS_H2=("${NS_ARGV[@]}")

# set_mtu MTU: every veth end and both bridges to MTU, the GSO settings
# (re)applied; the hosts' veth1 must then show it
set_mtu() {
    local now
    # shellcheck disable=SC2034  # read by hosts.sh's functions
    HOSTS_MTU=$1 HOSTS_GSO=soft   # globals: hosts_links_options uses, hosts_describe reports them
    hosts_links_options >>"$LOG_DIR/hosts.log" 2>&1 || return 1
    hosts_wait_ready >>"$LOG_DIR/hosts.log" 2>&1 || return 1
    now=$(ip -n "$H1" link show veth1 | sed -nE 's/.* mtu ([0-9]+) .*/\1/p')
    [[ $now == "$1" ]]
}

# ---------------------------------------------------------------------------
# Noise accounting and the VM's state (as bench/perf.sh)
# ---------------------------------------------------------------------------

# bench/lib.sh: measured LOG CMD... (CMD's output to LOG; sets RC, WALL,
# FOREIGN (% of all CPUs used by other processes), LOAD0, LOAD1) and
# vm_state ("fast NS" / "slow NS" / "unknown -")

# port_counts: "PACKETS BYTES" the switch's port toward host 2 sent to it
port_counts() {
    ip -n "$HOSTS_SW" -s link show dev h2p1 | awk '/TX:/ { getline; print $2, $1; exit }'
}

# ---------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------

declare -A STATUS VMSTATE DISTURB WIRE_ALL   # mtu,transport,rep -> ...; WIRE_ALL: mtu,transport -> wires seen
DISTURBED=()
FAILED=0
RUN_ROWS="$BIN_DIR/.run-rows"
csv() { echo "$1,$2,$3,$4,$5,$6" >>"$RUN_ROWS"; }   # rep mtu transport metric size value

TA_IF=veth1   # transport_args (bench/lib.sh): usnic, usnic_ofi, usnic_gso and tcp on veth1

title() {
    case $1 in
        usnic) echo "usnic (default wire)" ;;
        usnic_ofi) echo "usnic ofi wire" ;;
        usnic_gso) echo "usnic socket 1472 B" ;;
        tcp) echo "btl/tcp" ;;
    esac
}

# wire_check TRANSPORT MTU LOG: as bench/perf.sh's, on veth1; sets WIRE_KIND,
# WIRE_RUN and WIRE_WHY (empty when the run is on the path its name says)
wire_check() {
    local t=$1 mtu=$2 log=$3 nsock nofi dg want_wire=socket want_dg counters gs gsegs mm gr grsegs fb
    nsock=$(grep -c 'btl:usnic: veth1: socket wire$' "$log")
    nofi=$(grep -c 'btl:usnic: veth1: ofi wire$' "$log")
    dg=$(sed -nE 's/.*btl:usnic: veth1: socket wire: datagrams of ([0-9]+) bytes.*/\1/p' "$log" | sort -u | tr '\n' '/')
    dg=${dg%/}
    counters=$(awk '/btl:usnic final stats \[/ && !/\] peer / {
            n = split($0, kv, " ")
            for (i = 1; i <= n; i++) if (split(kv[i], p, "=") == 2) c[p[1]] += p[2]
        }
        END { printf "%d %d %d %d %d %d", c["gso_sends"], c["gso_segs"], c["mmsg_sends"], c["gro_recvs"], c["gro_segs"], c["gso_fallbacks"] }' "$log")
    read -r gs gsegs mm gr grsegs fb <<<"$counters"
    want_dg=$((mtu - 28))
    [[ $want_dg -gt 65000 ]] && want_dg=65000
    [[ $t == usnic_gso ]] && want_dg=1472
    [[ $t == usnic_ofi ]] && want_wire=ofi
    WIRE_WHY=""
    if [[ $nsock -eq 2 && $nofi -eq 0 ]]; then
        WIRE_KIND="socket ${dg:-?} B"
        WIRE_RUN="socket wire, ${dg:-?}-B datagrams, gso_sends $gs of $gsegs datagrams, mmsg_sends $mm, gro_recvs $gr of $grsegs datagrams"
        [[ $fb -gt 0 ]] && WIRE_RUN+=", gso_fallbacks $fb"
    elif [[ $nofi -eq 2 && $nsock -eq 0 ]]; then
        WIRE_KIND="ofi"
        WIRE_RUN="ofi wire"
    else
        WIRE_KIND="?"
        WIRE_RUN="wire unknown"
        WIRE_WHY="expected 2 ranks logging 'veth1: $want_wire wire', got $nsock socket and $nofi ofi"
        return
    fi
    if [[ ${WIRE_KIND%% *} != "$want_wire" ]]; then
        WIRE_WHY="on the ${WIRE_KIND%% *} wire, expected $want_wire"
    elif [[ $want_wire == socket && $dg != "$want_dg" ]]; then
        WIRE_WHY="socket wire with ${dg:-unknown}-byte datagrams, expected $want_dg"
    elif [[ $want_wire == socket && ($gs -eq 0 || $grsegs -le $gr) ]]; then
        WIRE_WHY="no batches across the hosts (gso_sends=$gs, gro_recvs=$gr of $grsegs datagrams)"
    fi
}

# The MPI job: one rank per host, rank 0 on host 1
mpi_job() {
    local t=$1 label=$2 pin1=() pin2=()
    if [[ $VETH_PIN -eq 1 ]]; then
        pin1=(taskset -c "$CPU_A") pin2=(taskset -c "$CPU_B")
    fi
    # reap (bench/reap.c): the daemons and ranks on the hosts may outlive
    # their parents; as a subreaper it collects them, so that their CPU
    # time counts as ours in the "others" share.
    transport_args "$t"
    # shellcheck disable=SC2046  # rsh_agent_args, oob_net_args: word lists
    "$BENCH_BIN/reap" timeout -k 10 "$RUN_TIMEOUT" "${NS_HEAD[@]}" mpirun --allow-run-as-root --hostfile "$HOSTFILE" --bind-to none \
        $(rsh_agent_args "$AGENT") $(oob_net_args "$HOSTS_NET1.0/24") "${TARGS[@]}" \
        -np 1 --host "$H1" ${pin1[@]+"${pin1[@]}"} "$BENCH_BIN/perf" --label "$label" --budget "$BUDGET" --cells "$VETH_CELLS" : \
        -np 1 --host "$H2" ${pin2[@]+"${pin2[@]}"} "$BENCH_BIN/perf" --label "$label" --budget "$BUDGET" --cells "$VETH_CELLS"
}

run_mpi() {
    local t=$1 mtu=$2 rep=$3 log="$LOG_DIR/$1-$2-$3.log" line status note=""
    measured "$log" mpi_job "$t" "$t-$mtu"
    line=$(grep -m1 '^PERF_RUN ' "$log")
    status=$(field status "$line")
    if [[ $RC -eq 124 || $RC -eq 137 ]]; then
        note="timeout (killed after ${RUN_TIMEOUT}s)"
    elif [[ $RC -ne 0 || $status != ok ]]; then
        note="fail (exit $RC${status:+, status $status})"
    fi
    RUN_EXTRA="ranks' CPU share $(field cpu0 "$line")/$(field cpu1 "$line")"
    if [[ $t == usnic* ]]; then
        wire_check "$t" "$mtu" "$log"
        WIRE_ALL[$mtu,$t]+="${WIRE_KIND}${WIRE_WHY:+ (rejected)};"
        [[ -z $note && -n $WIRE_WHY ]] && note="wrongpath ($WIRE_WHY)"
        RUN_EXTRA+=", $WIRE_RUN, resends $(field num_resends "$line")"
    fi
    if [[ -n $note ]]; then
        STATUS[$mtu,$t,$rep]=$note
        return 1
    fi
    awk -v r="$rep" -v u="$mtu" -v t="$t" '$1 == "PERF" {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            print r "," u "," t "," f["metric"] "," f["size"] "," f["value"] }' "$log" >>"$RUN_ROWS"
    STATUS[$mtu,$t,$rep]=ok
}

# wait_ready LOG: until the receiver printed READY (at most 5 s)
wait_ready() {
    local i
    for i in $(seq 1 50); do
        grep -q '^READY' "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

PORT=9500
# udp_stream SEG BATCH: one GSO+GRO stream from host 1 to host 2; prints the
# receiver's and the sender's lines and the switch port's counts
udp_stream() {
    local seg=$1 batch=$2 rlog="$BIN_DIR/.recv" rp p0 p1 rc=0
    PORT=$((PORT + 1))
    : >"$rlog"
    timeout 60 "${NS_H2[@]}" taskset -c "$CPU_B" "$BENCH_BIN/xhost_stream" udp-recv "$A2" "$PORT" --idle 1 --timeout 40 \
        >"$rlog" 2>&1 &
    rp=$!
    BG_PIDS+=("$rp")
    wait_ready "$rlog" || { echo "udp receiver not ready"; kill "$rp" 2>/dev/null; wait "$rp"; return 1; }
    read -r p0 _ < <(port_counts)
    echo "== udp $batch x $seg"
    timeout 60 "${NS_H1[@]}" taskset -c "$CPU_A" "$BENCH_BIN/xhost_stream" udp-send "$A2" "$PORT" --seg "$seg" \
        --batch "$batch" --seconds "$STREAM_SECONDS" || rc=1
    wait "$rp" || rc=1
    read -r p1 _ < <(port_counts)
    cat "$rlog"
    echo "PORT h2p1_packets=$((p1 - p0))"
    return $rc
}

tcp_stream() {
    local rlog="$BIN_DIR/.recv" rp rc=0
    PORT=$((PORT + 1))
    : >"$rlog"
    timeout 60 "${NS_H2[@]}" taskset -c "$CPU_B" "$BENCH_BIN/xhost_stream" tcp-recv "$A2" "$PORT" --timeout 20 \
        >"$rlog" 2>&1 &
    rp=$!
    BG_PIDS+=("$rp")
    wait_ready "$rlog" || { echo "tcp receiver not ready"; kill "$rp" 2>/dev/null; wait "$rp"; return 1; }
    echo "== tcp 65536"
    timeout 60 "${NS_H1[@]}" taskset -c "$CPU_A" "$BENCH_BIN/xhost_stream" tcp-send "$A2" "$PORT" --size 65536 \
        --seconds "$STREAM_SECONDS" || rc=1
    wait "$rp" || rc=1
    cat "$rlog"
    return $rc
}

big_seg() { # MTU -> "SEG BATCH" of the largest datagrams at that MTU
    local seg=$(($1 - 28))
    [[ $seg -gt 65507 ]] && seg=65507
    echo "$seg $((65507 / seg))"
}

raw_cells() {
    local mtu=$1 rc=0 seg batch
    udp_stream 1472 44 || rc=1
    if [[ $mtu -gt 1500 ]]; then
        read -r seg batch < <(big_seg "$mtu")
        udp_stream "$seg" "$batch" || rc=1
    fi
    tcp_stream || rc=1
    return $rc
}

run_raw() {
    local mtu=$1 rep=$2 log="$LOG_DIR/raw-$1-$2.log" n want=2
    measured "$log" raw_cells "$mtu"
    BG_PIDS=()
    [[ $mtu -gt 1500 ]] && want=3
    # Per stream: goodput (MB/s received), the sender's rate, received
    # datagrams per read and packets on the switch port per datagram
    n=$(awk -v r="$rep" -v u="$mtu" '
            /^== udp / { split($3, a, "x"); kind = "udp"; batch = $3; seg = $5; next }
            /^== tcp / { kind = "tcp"; next }
            /^SEND / { for (i = 2; i <= NF; i++) { split($i, kv, "="); s[kv[1]] = kv[2] } next }
            /^RECV / { delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                       if (kind == "tcp") { print r "," u ",raw,tcp_bw,65536," f["MBps"]; print r "," u ",raw,tcp_send_bw,65536," s["MBps"]; got++ }
                       else { print r "," u ",raw,gso_bw," seg "," f["MBps"]; print r "," u ",raw,gso_send_bw," seg "," s["MBps"]
                              print r "," u ",raw,segs_per_read," seg "," f["segs_per_read"]
                              print r "," u ",raw,lost_pct," seg "," (s["datagrams"] > 0 ? 100 * (s["datagrams"] - f["datagrams"]) / s["datagrams"] : 0)
                              dg = f["datagrams"] }
                       next }
            /^PORT / { split($2, kv, "="); if (dg > 0) { print r "," u ",raw,pkts_per_dgram," seg "," kv[2] / dg; got++ } dg = 0 }
            END { print got + 0 > "/dev/stderr" }' "$log" 2>"$BIN_DIR/.got" >>"$RUN_ROWS"; cat "$BIN_DIR/.got")
    RUN_EXTRA=$(awk '/^== / { k = $2 " " $3 (($4 == "x") ? " x " $5 : "") }
                     /^RECV / { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                                line = line sep k ": " f["MBps"] " MB/s"; if (k ~ /^udp/) line = line ", " f["segs_per_read"] " datagrams/read"; sep = "; " }
                     /^PORT / { split($2, kv, "="); line = line ", " kv[2] " packets on h2p1" }
                     END { print line }' "$log")
    if [[ $RC -ne 0 || $n -ne $want ]]; then
        STATUS[$mtu,raw,$rep]="fail (exit $RC, $n of $want streams)"
        return 1
    fi
    STATUS[$mtu,raw,$rep]=ok
}

run_one() {
    local t=$1 mtu=$2 rep=$3 disturbed=0 before after ns0 ns1 p0 b0 p1 b1 port=""
    RUN_EXTRA=""
    : >"$RUN_ROWS"
    WALL=0 FOREIGN=0 LOAD0=- LOAD1=-
    read -r before ns0 < <(vm_state)
    read -r p0 b0 < <(port_counts)
    case $t in
        raw) run_raw "$mtu" "$rep" ;;
        *)   run_mpi "$t" "$mtu" "$rep" ;;
    esac
    read -r p1 b1 < <(port_counts)
    read -r after ns1 < <(vm_state)
    VMSTATE[$mtu,$t,$rep]=$before
    [[ $before == "$after" ]] || VMSTATE[$mtu,$t,$rep]=mixed
    if [[ $t != raw && $((p1 - p0)) -gt 0 ]]; then
        port="h2p1 $((p1 - p0)) packets, $(( (b1 - b0) / (p1 - p0) )) B each"
    fi
    RUN_EXTRA+="${RUN_EXTRA:+, }${port:+$port, }VM $before ${ns0}ns -> $after ${ns1}ns"
    [[ ${STATUS[$mtu,$t,$rep]} == ok ]] || FAILED=$((FAILED + 1))
    printf '  rep %d/%d  MTU %-5s %-10s %-4s %5.1fs  load %s -> %s  others %s%% of the CPUs%s\n' \
        "$rep" "$REPS" "$mtu" "$t" "${STATUS[$mtu,$t,$rep]%% *}" "$WALL" "$LOAD0" "$LOAD1" "$FOREIGN" \
        "${RUN_EXTRA:+  ($RUN_EXTRA)}"
    [[ ${STATUS[$mtu,$t,$rep]} == ok ]] ||
        echo "    ${STATUS[$mtu,$t,$rep]}; log: ${LOG_DIR#$REPO_DIR/}/$t-$mtu-$rep.log"
    if [[ $FOREIGN -gt $FOREIGN_PCT ]]; then
        echo "    warning: other processes used ${FOREIGN}% of the CPUs during this cell (load $LOAD0 -> $LOAD1): its numbers are suspect"
        DISTURBED+=("$mtu/$t/$rep:$FOREIGN%")
        disturbed=1
    fi
    DISTURB[$mtu,$t,$rep]=$disturbed
    sed "s/\$/,$disturbed,${VMSTATE[$mtu,$t,$rep]}/" "$RUN_ROWS" >>"$RUNS_CSV"
}

# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

: >"$RUNS_CSV"
# shellcheck disable=SC2206
ORDER=($TRANSPORTS)
# shellcheck disable=SC2206
MTUS=($VETH_MTUS)
echo "veth: Open MPI $(ompi_info --parsable | sed -n 's/^ompi:version:full://p'); $REPS repetitions of {$TRANSPORTS} at MTU {$VETH_MTUS}, interleaved"
echo "      two namespaced hosts $H1 and $H2 on a bridge (head $HOSTS_HEAD), HOSTS_GSO=soft; data on veth1 ($A1 -> $A2);"
echo "      one rank per host$([[ $VETH_PIN -eq 1 ]] && echo ", host 1 on CPU $CPU_A, host 2 on CPU $CPU_B"); perf.c cells $VETH_CELLS, budget x$BUDGET; $NCPU CPUs"
echo "      load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq 1 "$REPS"); do
    nm=${#MTUS[@]}
    for ((j = 0; j < nm; j++)); do
        mtu=${MTUS[$(( (j + rep - 1) % nm ))]}
        if ! set_mtu "$mtu"; then
            echo "veth: could not set MTU $mtu (see ${LOG_DIR#$REPO_DIR/}/hosts.log)" >&2
            exit 1
        fi
        echo "  $(hosts_describe)"
        n=${#ORDER[@]}
        for ((i = 0; i < n; i++)); do
            run_one "${ORDER[$(( (i + rep - 1) % n ))]}" "$mtu" "$rep"
        done
    done
done
cleanup
trap - EXIT INT TERM

# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

# val MTU TRANSPORT METRIC SIZE: "median min max n" over the successful
# runs (disturbed ones left out while a quiet one exists, with
# DROP_DISTURBED=1), or nothing
val() {
    awk -F, -v u="$1" -v t="$2" -v m="$3" -v s="$4" -v drop="$DROP_DISTURBED" '
        $2 == u && $3 == t && $4 == m && $5 == s { n++; v[n] = $6 + 0; d[n] = $7; if ($7 == 0) q++ }
        END {
            for (i = 1; i <= n; i++) if (!(drop && q > 0 && d[i] == 1)) x[++c] = v[i]
            if (c == 0) exit
            for (i = 2; i <= c; i++) { y = x[i]; for (j = i - 1; j >= 1 && x[j] > y; j--) x[j + 1] = x[j]; x[j + 1] = y }
            printf "%s %s %s %d\n", (c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2), x[1], x[c], c }' "$RUNS_CSV"
}
fmt() { # metric value
    case $1 in
        lat) awk -v v="$2" 'BEGIN { printf (v < 100 ? "%.2f" : "%.0f"), v }' ;;
        segs_per_read|pkts_per_dgram) awk -v v="$2" 'BEGIN { printf "%.2f", v }' ;;
        lost_pct) awk -v v="$2" 'BEGIN { printf "%.1f", v }' ;;
        *) awk -v v="$2" 'BEGIN { printf "%.0f", v }' ;;
    esac
}
cell() { # MTU TRANSPORT METRIC SIZE -> "median (min-max)" or "-"
    local med mn mx n
    read -r med mn mx n < <(val "$@")
    if [[ -z ${med:-} ]]; then echo "-"; return; fi
    if [[ $n -gt 1 ]]; then
        echo "$(fmt "$3" "$med") ($(fmt "$3" "$mn")-$(fmt "$3" "$mx"))"
    else
        fmt "$3" "$med"
    fi
}
med() { local m; read -r m _ < <(val "$@"); echo "${m:-}"; }

# paired MTU MODE METRIC SIZE BASE BMETRIC BSIZE: the median over the
# repetitions where both cells succeeded in one VM state of MODE / BASE,
# "0.95x (n=2 fs)", or "-"
paired() {
    local u=$1 mode=$2 metric=$3 size=$4 base=$5 bmetric=$6 bsize=$7 r vals="" states="" a b
    for r in $(seq 1 "$REPS"); do
        [[ ${STATUS[$u,$mode,$r]:-} == ok && ${STATUS[$u,$base,$r]:-} == ok ]] || continue
        [[ ${VMSTATE[$u,$mode,$r]:-} == "${VMSTATE[$u,$base,$r]:-x}" && ${VMSTATE[$u,$mode,$r]} != mixed ]] || continue
        [[ $DROP_DISTURBED -eq 0 || (${DISTURB[$u,$mode,$r]:-0} -eq 0 && ${DISTURB[$u,$base,$r]:-0} -eq 0) ]] || continue
        a=$(awk -F, -v r="$r" -v u="$u" -v t="$mode" -v m="$metric" -v s="$size" '$1 == r && $2 == u && $3 == t && $4 == m && $5 == s { print $6 }' "$RUNS_CSV")
        b=$(awk -F, -v r="$r" -v u="$u" -v t="$base" -v m="$bmetric" -v s="$bsize" '$1 == r && $2 == u && $3 == t && $4 == m && $5 == s { print $6 }' "$RUNS_CSV")
        [[ -n $a && -n $b ]] || continue
        vals+="$(awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) print a / b }') "
        states+="${VMSTATE[$u,$mode,$r]:0:1}"
    done
    tr ' ' '\n' <<<"$vals" | grep . | sort -g | awk -v states="$states" '
        { x[++n] = $1 }
        END {
            if (n == 0) { print "-"; exit }
            printf "%.2fx (n=%d %s)", (n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2), n, states }'
}
# by_state MTU MODE METRIC SIZE BASE BMETRIC BSIZE: per VM state with runs
# of both, "STATE RATIO NMODE NBASE" (ratio of the state's medians, unpaired)
by_state() {
    awk -F, -v u="$1" -v t="$2" -v m="$3" -v s="$4" -v b="$5" -v bm="$6" -v bs="$7" -v drop="$DROP_DISTURBED" '
        drop && $7 == 1 { next }
        function med(arr, n,   i, j, y, x) {
            for (i = 1; i <= n; i++) x[i] = arr[i]
            for (i = 2; i <= n; i++) { y = x[i]; for (j = i - 1; j >= 1 && x[j] > y; j--) x[j + 1] = x[j]; x[j + 1] = y }
            return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
        }
        $2 == u && ($8 == "fast" || $8 == "slow") {
            if ($3 == t && $4 == m && $5 == s) { na[$8]++; A[$8, na[$8]] = $6 }
            if ($3 == b && $4 == bm && $5 == bs) { nb[$8]++; B[$8, nb[$8]] = $6 }
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
by_state_text() {
    local out
    out=$(by_state "$@" | awk '{ printf "%s%s %.2fx %d:%d", sep, substr($1, 1, 1), $2, $3, $4; sep = ", " }')
    echo "${out:--}"
}
target() { # TEXT CONDITION VALUES
    if [[ -z $2 ]]; then
        echo "target $1: not measured ($3)"
    elif awk "BEGIN { exit !($2) }"; then
        echo "target $1: met ($3)"
    else
        echo "target $1: NOT met ($3)"
    fi
}

W=24
echo
echo "Across two namespaced hosts (veth1 -> bridge -> veth1, HOSTS_GSO=soft: UDP segmentation offload sends cut"
echo "into MTU-sized packets in software at the sender and coalesced again at the receiving host's veth; TCP cut"
echo "at the bridge port and coalesced the same way).  Median (min-max) over the $REPS repetitions$([[ $DROP_DISTURBED -eq 1 ]] && echo " (disturbed")"
[[ $DROP_DISTURBED -eq 1 ]] && echo "runs left out while a quiet one exists)."
echo "Latency: half round trip in us (lower is better); bandwidth: MB/s = 10^6 B/s (higher is better)."
echo "\"vs tcp, paired\": the median of the ratios to btl/tcp's cell of the same repetition and MTU when both"
echo "saw the same VM state$([[ $DROP_DISTURBED -eq 1 ]] && echo " and neither was disturbed") (n = pairs, states f/s); \"by state\": the ratio of the"
echo "two transports' medians within each state (unpaired; cells of each)."
for mtu in "${MTUS[@]}"; do
    read -r bigseg bigbatch < <(big_seg "$mtu")
    echo
    echo "MTU $mtu"
    printf '%-38s  %-*s  %-*s  %-*s\n' "" $W "1 MiB bandwidth, MB/s" $W "16 KiB latency, us" $W "8 B latency, us"
    for t in usnic usnic_gso usnic_ofi tcp; do
        has "$t" || continue
        label="$(title "$t")"
        [[ $t == usnic* ]] && label+=" [$(tr ';' '\n' <<<"${WIRE_ALL[$mtu,$t]:-}" | grep . | sort -u | paste -sd/)]"
        printf '%-38s  %-*s  %-*s  %-*s\n' "$label" $W "$(cell "$mtu" "$t" bw 1048576)" \
            $W "$(cell "$mtu" "$t" lat 16384)" $W "$(cell "$mtu" "$t" lat 8)"
        if [[ $t != tcp ]] && has tcp; then
            printf '%-38s  %-*s  %-*s  %-*s\n' "  vs tcp, paired" $W "$(paired "$mtu" "$t" bw 1048576 tcp bw 1048576)" \
                $W "$(paired "$mtu" "$t" lat 16384 tcp lat 16384)" $W "$(paired "$mtu" "$t" lat 8 tcp lat 8)"
            printf '%-38s  %-*s  %-*s  %-*s\n' "  vs tcp, by state" $W "$(by_state_text "$mtu" "$t" bw 1048576 tcp bw 1048576)" \
                $W "$(by_state_text "$mtu" "$t" lat 16384 tcp lat 16384)" $W "$(by_state_text "$mtu" "$t" lat 8 tcp lat 8)"
        fi
        if [[ $t == usnic && $(has usnic_ofi && echo y) == y ]]; then
            printf '%-38s  %-*s  %-*s  %-*s\n' "  vs usnic ofi wire, paired" $W "$(paired "$mtu" usnic bw 1048576 usnic_ofi bw 1048576)" \
                $W "$(paired "$mtu" usnic lat 16384 usnic_ofi lat 16384)" $W "$(paired "$mtu" usnic lat 8 usnic_ofi lat 8)"
        fi
    done
    if has raw; then
        echo "raw ceiling of the same path (xhost_stream, host 1 -> host 2, no MPI), goodput MB/s; vs tcp = raw / btl/tcp 1 MiB:"
        rows="1472:44"
        [[ $mtu -gt 1500 ]] && rows+=" $bigseg:$bigbatch"
        for r in $rows; do
            seg=${r%%:*} batch=${r#*:}
            printf '%-38s  %-*s  %s\n' "UDP GSO+GRO $batch x $seg B" $W "$(cell "$mtu" raw gso_bw "$seg")" \
                "vs tcp $(paired "$mtu" raw gso_bw "$seg" tcp bw 1048576); sender $(cell "$mtu" raw gso_send_bw "$seg") MB/s, lost $(cell "$mtu" raw lost_pct "$seg")%, $(cell "$mtu" raw segs_per_read "$seg") datagrams/read, $(cell "$mtu" raw pkts_per_dgram "$seg") packets/datagram on h2p1"
        done
        printf '%-38s  %-*s  %s\n' "TCP stream, 64 KiB writes" $W "$(cell "$mtu" raw tcp_bw 65536)" \
            "vs tcp $(paired "$mtu" raw tcp_bw 65536 tcp bw 1048576)"
        for t in usnic usnic_gso usnic_ofi tcp; do
            has "$t" || continue
            if [[ $t == tcp ]]; then
                printf '%-38s  %s\n' "  $(title "$t") / TCP stream" \
                    "1 MiB vs the raw TCP stream: paired $(paired "$mtu" tcp bw 1048576 raw tcp_bw 65536), by state $(by_state_text "$mtu" tcp bw 1048576 raw tcp_bw 65536)"
                continue
            fi
            seg=1472
            [[ $t == usnic && $mtu -gt 1500 ]] && seg=$bigseg
            printf '%-38s  %s\n' "  $(title "$t") / GSO ceiling" \
                "1 MiB vs the $([[ $seg == 1472 ]] && echo "44 x 1472" || echo "$bigbatch x $bigseg") B stream: paired $(paired "$mtu" "$t" bw 1048576 raw gso_bw "$seg"), by state $(by_state_text "$mtu" "$t" bw 1048576 raw gso_bw "$seg")"
        done
    fi
done

echo
for mtu in "${MTUS[@]}"; do
    read -r bigseg bigbatch < <(big_seg "$mtu")
    for t in usnic usnic_gso; do
        has "$t" || continue
        text="MTU $mtu, HOSTS_GSO=soft: $(title "$t") 1 MiB bandwidth at least 0.6x btl/tcp over the same pair"
        if ! has tcp; then target "$text" "" "needs tcp"; continue; fi
        d=$(paired "$mtu" "$t" bw 1048576 tcp bw 1048576)
        ceil="raw GSO+GRO 44 x 1472 B $(fmt bw "$(med "$mtu" raw gso_bw 1472)") MB/s"
        [[ $mtu -gt 1500 ]] && ceil+=", $bigbatch x $bigseg B $(fmt bw "$(med "$mtu" raw gso_bw "$bigseg")") MB/s"
        ceil+=", TCP stream $(fmt bw "$(med "$mtu" raw tcp_bw 65536)") MB/s"
        has raw || ceil="raw ceiling not measured"
        vals="medians $t $(fmt bw "$(med "$mtu" "$t" bw 1048576)") MB/s, tcp $(fmt bw "$(med "$mtu" tcp bw 1048576)") MB/s; $ceil"
        if [[ $d != - ]]; then
            target "$text" "$(awk '{ print $1 + 0 }' <<<"$d") >= 0.6" "paired $d; $vals"
        else
            bs=$(by_state "$mtu" "$t" bw 1048576 tcp bw 1048576)
            if [[ -n $bs ]]; then
                target "$text" "$(awk '{ printf "%s%s >= 0.6", sep, $2; sep = " && " }' <<<"$bs")" \
                    "no pair in one VM state; per-state medians $(by_state_text "$mtu" "$t" bw 1048576 tcp bw 1048576); $vals"
            else
                target "$text" "" "no runs of $t and tcp in one VM state; $vals"
            fi
        fi
    done
done

states=$(awk -F, '{ k = $1 "," $2 "," $3; if (!(k in seen)) { seen[k] = 1; n[$8]++ } }
    END { printf "fast %d, slow %d, mixed %d", n["fast"], n["slow"], n["mixed"] }' "$RUNS_CSV")
echo
echo "VM state of the successful cells: $states"
echo "CSV: ${RUNS_CSV#$REPO_DIR/} (rep,mtu,transport,metric,size,value,disturbed,vmstate); logs: ${LOG_DIR#$REPO_DIR/}/"
if [[ ${#DISTURBED[@]} -gt 0 ]]; then
    echo "warning: ${#DISTURBED[@]} of $((REPS * ${#MTUS[@]} * ${#ORDER[@]})) cells shared the machine with other work (>${FOREIGN_PCT}% of the CPUs): ${DISTURBED[*]}"
fi
echo "$FAILED failed cell(s); total time $((SECONDS - START))s"
[[ $FAILED -eq 0 ]]
