#!/usr/bin/env bash
#
# Goodput of 1 MiB MPI messages under UDP loss, for several transports, in
# one table.  2 ranks on this host, inside a private network namespace whose
# nftables rule drops a random share of UDP datagrams (test/faults/netns.sh);
# all traffic stays on the namespace's loopback.  Must run as root.
#
#   bash bench/loss-goodput.sh
#   LOSS_RATES="0 1" DURATION=2 TRANSPORTS="usnic tcp" bash bench/loss-goodput.sh
#
# Transports (TRANSPORTS, default all, in this order):
#   usnic    the usnic BTL             pml ob1, btl usnic,self on lo, its
#            default wire (auto: the socket wire, 65000-byte datagrams on lo)
#   usnic_gso  the same on the socket wire with btl_usnic_max_datagram 1472
#            (segmentation offload batches of 44 datagrams of 1472 bytes)
#   usnic_ofi  the same on the ofi wire (btl_usnic_wire ofi: libfabric's udp
#            provider, 1472-byte datagrams, one sendto each)
#            Every usnic cell logs its wire (btl_usnic_verbose 5) and final
#            counters (btl_usnic_stats 3600); a cell on another wire than its
#            name says is "wrongpath".
#   rxd      libfabric udp under ofi_rxd, through pml cm + mtl ofi
#   tcp      btl/tcp; the UDP rule does not touch it (a control column)
#   tcploss  btl/tcp with its ports pinned and the same share of the TCP
#            segments on those ports dropped (mpirun's own TCP is spared)
#
# Environment:
#   LOSS_RATES    percentages, default "0 1 5 20"
#   DURATION      seconds of the measured stream per cell, default 3
#   WARMUP        seconds of the untimed warm-up stream, default 0.5
#   WINDOW        MPI_Isend in flight, default 4
#   SIZE          message bytes, default 1048576
#   CELL_TIMEOUT  seconds before one mpirun is killed, default 90
#   BIND          mpirun binding options (default: probe "--bind-to core
#                 --map-by core", fall back to "--bind-to none")
#   TCP_PORT_MIN  first btl_tcp port for tcploss, default 23000 (32 ports)
#   FOREIGN_PCT   warn when other processes used more than this share of
#                 the CPUs during a cell, default 10
#   DROP_DISTURBED  1 (default): a target line comparing a cell with such a
#                 warning says "not measured" (with the figures); 0: judged
#   SLOW_NS       cache-line round trip (ns) above which the VM counts as
#                 in its slow state, default 150
#
# Around every cell bench/cacheline.c probes the VM's cross-core state (fast
# ~60 ns / slow ~350 ns), shown on the cell's line with the share of the
# CPUs other processes used; the target lines say whether the two cells
# they compare saw one state.
#
# Output: per-cell lines while running, then the tables.  Logs of every
# cell are in bench/build/logs/.  A cell that fails prints "fail", one
# killed by the timeout "timeout", one on the wrong path "wrongpath"; no
# number is shown for such a cell.  Exit status 0 if every cell produced
# a verified result.

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"   # bench_build, vm_state, others_start/_end, udp_rcvbuf_errors, field, transport_args
BUILD_DIR="$BENCH_DIR/build"
LOG_DIR="$BUILD_DIR/logs"
BINARY="$BENCH_BIN/goodput"

LOSS_RATES=${LOSS_RATES:-"0 1 5 20"}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-0.5}
WINDOW=${WINDOW:-4}
SIZE=${SIZE:-1048576}
CELL_TIMEOUT=${CELL_TIMEOUT:-90}
TRANSPORTS=${TRANSPORTS:-"usnic usnic_gso usnic_ofi rxd tcp tcploss"}
TCP_PORT_MIN=${TCP_PORT_MIN:-23000}
FOREIGN_PCT=${FOREIGN_PCT:-10}
DROP_DISTURBED=${DROP_DISTURBED:-1}
TCP_PORT_RANGE=32
TCP_PORT_MAX=$((TCP_PORT_MIN + TCP_PORT_RANGE - 1))

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# shellcheck source=../test/faults/netns.sh
source "$ROOT/test/faults/netns.sh"

die() { echo "loss-goodput: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------

[[ $(id -u) -eq 0 ]] || die "must run as root (ip netns, nftables)"
for t in $TRANSPORTS; do
    case $t in
        usnic|usnic_gso|usnic_ofi|rxd|tcp|tcploss) ;;
        *) die "unknown transport '$t' in TRANSPORTS (known: usnic usnic_gso usnic_ofi rxd tcp tcploss)" ;;
    esac
done
for r in $LOSS_RATES; do
    [[ $r =~ ^[0-9]+$ && $r -le 100 ]] || die "bad loss rate '$r' (integer percent 0..100)"
done
[[ $DURATION =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad DURATION '$DURATION'"
[[ $WARMUP =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad WARMUP '$WARMUP'"
[[ $CELL_TIMEOUT =~ ^[0-9]+$ ]] || die "bad CELL_TIMEOUT '$CELL_TIMEOUT'"
[[ $FOREIGN_PCT =~ ^[0-9]+$ && $DROP_DISTURBED =~ ^[01]$ ]] || die "bad FOREIGN_PCT or DROP_DISTURBED"
for cmd in mpicc mpirun ip nft timeout; do
    command -v "$cmd" >/dev/null || die "$cmd not found"
done
if [[ " $TRANSPORTS" == *" usnic"* ]] && ! ompi_info 2>/dev/null | grep -q 'MCA btl: usnic'; then
    die "Open MPI lists no usnic BTL (ompi_info | grep 'MCA btl: usnic'); install it first"
fi

START=$SECONDS

# ---------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------

mkdir -p "$BUILD_DIR" "$LOG_DIR" || die "cannot create $BUILD_DIR"
rm -f "$LOG_DIR"/*.log
echo "building bench/build/goodput (mpicc -O2 -Wall -Wextra -Werror)"
bench_build goodput cacheline || die "building bench/goodput.c and bench/cacheline.c failed"

# The VM's cross-core state (vm_state, bench/lib.sh): "fast NS" or "slow
# NS" (a cache line's round trip between the two CPUs, ns; above SLOW_NS =
# slow), probed before and after each cell.  Loopback throughput moves 2-3x
# with it, so a share of "its own 0%" or a ratio to tcploss compares like
# with like only when both cells saw one state.  others_start/others_end:
# what other processes used during a cell.

# ---------------------------------------------------------------------------
# Namespace and mpirun
# ---------------------------------------------------------------------------

netns_create || die "cannot create a network namespace with nftables (need root, iproute2, nftables)"
echo "network namespace $NETNS (loopback only)"

# transport_args (bench/lib.sh): usnic, usnic_gso, usnic_ofi, rxd, tcp and
# tcploss (on TCP_PORT_MIN.., TCP_PORT_RANGE ports) on lo

# mpirun for 2 ranks inside the namespace, killed after CELL_TIMEOUT s
# (SIGTERM, then SIGKILL 10 s later).
mpirun_ns() {
    # shellcheck disable=SC2086
    netns_exec timeout -k 10 "$CELL_TIMEOUT" mpirun -np 2 $BIND \
        --mca oob_tcp_if_include lo "$@"
}

if [[ -z ${BIND:-} ]]; then
    BIND="--bind-to core --map-by core"
    if ! mpirun_ns true >"$LOG_DIR/binding.log" 2>&1; then
        BIND="--bind-to none"
    fi
fi
echo "binding: $BIND"

# ---------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------

declare -A GOODPUT RESENDS DROPS RCVBUF NOTE WIRE VMSTATE OTHERS

# Datagrams the namespace's kernel dropped because a UDP socket's receive
# buffer was full (not the nft rule): udp_rcvbuf_errors netns_exec.

# wire_check TRANSPORT LOG: the wire both ranks opened on lo (verbose
# lines), the socket wire's datagram size and segmentation offload sends
# (final statistics, both ranks).  Sets WIRE_KIND ("socket 65000 B, 1234
# GSO sends", "ofi") and WIRE_WHY (empty, or why the cell is on the wrong path).
wire_check() {
    local t=$1 log=$2 nsock nofi dg gs want=socket
    nsock=$(grep -c 'btl:usnic: lo: socket wire$' "$log")
    nofi=$(grep -c 'btl:usnic: lo: ofi wire$' "$log")
    dg=$(sed -nE 's/.*btl:usnic: lo: socket wire: datagrams of ([0-9]+) bytes.*/\1/p' "$log" | sort -u | tr '\n' '/')
    dg=${dg%/}
    gs=$(awk '/btl:usnic final stats \[/ && !/\] peer / { if (match($0, /gso_sends=[0-9]+/)) n += substr($0, RSTART + 10, RLENGTH - 10) }
              END { print n + 0 }' "$log")
    [[ $t == usnic_ofi ]] && want=ofi
    WIRE_WHY=""
    if [[ $nsock -eq 2 && $nofi -eq 0 ]]; then
        WIRE_KIND="socket ${dg:-?} B, $gs GSO sends"
    elif [[ $nofi -eq 2 && $nsock -eq 0 ]]; then
        WIRE_KIND="ofi"
    else
        WIRE_KIND="?"
        WIRE_WHY="expected 2 ranks logging 'lo: $want wire', got $nsock socket and $nofi ofi"
        return
    fi
    if [[ ${WIRE_KIND%% *} != "$want" ]]; then
        WIRE_WHY="on the ${WIRE_KIND%% *} wire, expected $want"
    elif [[ $t == usnic_gso && ($dg != 1472 || $gs -eq 0) ]]; then
        WIRE_WHY="socket wire with ${dg:-unknown}-byte datagrams and $gs GSO sends, expected 1472 and some"
    fi
}

# run_cell TRANSPORT RATE: one mpirun; fills GOODPUT (MB/s or a failure
# word), RESENDS (usnic only), DROPS (what the relevant nft rule dropped).
run_cell() {
    local t=$1 rate=$2 key="$1,$2" log="$LOG_DIR/$1-$2.log" rc line status
    local tcp_rate=0 seen=0 dropped t0=$SECONDS rcvbuf0 rcvbuf1

    [[ $t == tcploss ]] && tcp_rate=$rate
    # Fresh rules per cell, so their counters count this cell only.
    if ! netns_set_udp_loss "$rate" || ! netns_set_tcp_port_loss "$tcp_rate" "$TCP_PORT_MIN" "$TCP_PORT_MAX"; then
        GOODPUT[$key]=fail; NOTE[$key]="cannot install the nft rules"
        return
    fi

    local st0 ns0 st1 ns1
    read -r st0 ns0 < <(vm_state)
    rcvbuf0=$(udp_rcvbuf_errors netns_exec)
    transport_args "$t"
    others_start
    mpirun_ns "${TARGS[@]}" "$BINARY" --label "$t-$rate" \
        --size "$SIZE" --window "$WINDOW" --duration "$DURATION" --warmup "$WARMUP" \
        >"$log" 2>&1
    rc=$?
    others_end
    read -r st1 ns1 < <(vm_state)
    VMSTATE[$key]=$st0
    [[ $st0 == "$st1" ]] || VMSTATE[$key]=mixed
    OTHERS[$key]=$OTHERS_PCT
    rcvbuf1=$(udp_rcvbuf_errors netns_exec)
    RCVBUF[$key]=$(( ${rcvbuf1:-0} - ${rcvbuf0:-0} ))

    if [[ $t == tcploss ]]; then
        read -r seen dropped < <(netns_tcp_port_counts)
    else
        dropped=$(netns_udp_dropped)
    fi
    DROPS[$key]=${dropped:-0}

    line=$(grep -m1 '^GOODPUT ' "$log")
    status=$(field status "$line")
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        GOODPUT[$key]=timeout; NOTE[$key]="killed after ${CELL_TIMEOUT}s"
    elif [[ $rc -ne 0 || $status != ok ]]; then
        GOODPUT[$key]=fail; NOTE[$key]="exit code $rc${status:+, status $status}"
    else
        GOODPUT[$key]=$(field MBps "$line")
    fi

    # Proof that the cell used the path its column names.
    case $t in
        usnic*)
            RESENDS[$key]=$(field num_resends "$line")
            local sends
            sends=$(field num_total_sends "$line")
            wire_check "$t" "$log"
            WIRE[$key]=$WIRE_KIND
            if [[ -n $line && ! ${sends:-} =~ ^[1-9][0-9]*$ ]]; then
                GOODPUT[$key]=wrongpath; NOTE[$key]="no usnic BTL sends counted (num_total_sends=${sends:-none})"
            elif [[ -n $line && -n $WIRE_WHY ]]; then
                GOODPUT[$key]=wrongpath; NOTE[$key]=$WIRE_WHY
            fi
            ;;
        rxd)
            # Both ranks must report the provider the ofi MTL picked, and
            # both must have selected pml cm.
            local nprov ncm
            nprov=$(grep -c "mtl:ofi:prov: $RXD_PROVIDER\$" "$log")
            ncm=$(grep -c 'select: component cm selected' "$log")
            if [[ ${GOODPUT[$key]} =~ ^[0-9] ]] && [[ $nprov -ne 2 || $ncm -ne 2 ]]; then
                GOODPUT[$key]=wrongpath
                NOTE[$key]="expected 2x 'mtl:ofi:prov: $RXD_PROVIDER' and 2x pml cm, got $nprov and $ncm"
            fi
            ;;
        tcploss)
            if [[ ${GOODPUT[$key]} =~ ^[0-9] && ${seen:-0} -eq 0 ]]; then
                GOODPUT[$key]=wrongpath; NOTE[$key]="no TCP segment seen on ports $TCP_PORT_MIN-$TCP_PORT_MAX"
            fi
            ;;
    esac
    if [[ ${GOODPUT[$key]} =~ ^[0-9] && $rate -gt 0 && ${DROPS[$key]} -eq 0 && $t != tcp ]]; then
        NOTE[$key]="the ${rate}% rule dropped nothing"
    fi

    printf '  %-9s %3s%%  %-10s  nft drops %-7s rcvbuf drops %-6s %s%s%s  [%ds, VM %s %sns -> %s %sns, others %s%% of the CPUs]\n' \
        "$t" "$rate" "${GOODPUT[$key]}" "${DROPS[$key]}" "${RCVBUF[$key]}" \
        "${RESENDS[$key]:+resends ${RESENDS[$key]}  }" "${WIRE[$key]:+wire: ${WIRE[$key]}  }" \
        "${NOTE[$key]:+(${NOTE[$key]})}" $((SECONDS - t0)) "$st0" "$ns0" "$st1" "$ns1" "${OTHERS[$key]}"
    if [[ ${OTHERS[$key]} -gt $FOREIGN_PCT ]]; then
        echo "    warning: other processes used ${OTHERS[$key]}% of the CPUs during this cell: its goodput is suspect"
    fi
}

echo "cells: loss rates {$LOSS_RATES}% x transports {$TRANSPORTS}; ${DURATION}s measured + ${WARMUP}s warm-up each"
for rate in $LOSS_RATES; do
    for t in $TRANSPORTS; do
        run_cell "$t" "$rate"
    done
done
netns_destroy

# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

title() {
    case $1 in
        usnic)   echo "usnic (default: socket)" ;;
        usnic_gso) echo "usnic socket 1472 B" ;;
        usnic_ofi) echo "usnic ofi wire" ;;
        rxd)     echo "rxd (mtl ofi, udp;ofi_rxd)" ;;
        tcp)     echo "tcp (UDP-only loss: unaffected)" ;;
        tcploss) echo "tcp (same loss on its TCP ports)" ;;
    esac
}

has() { [[ " $TRANSPORTS " == *" $1 "* ]]; }

# Column widths: the title, at least 10.
declare -A WIDTH
for t in $TRANSPORTS; do
    w=$(title "$t"); w=${#w}; WIDTH[$t]=$(( w > 10 ? w : 10 ))
done

# share T RATE: T's cell / T's 0% cell, as a percentage, or "-"
share() {
    local v=${GOODPUT[$1,$2]:-} b=${GOODPUT[$1,0]:-}
    if [[ $v =~ ^[0-9] && $b =~ ^[0-9] ]] && awk -v b="$b" 'BEGIN { exit !(b > 0) }'; then
        awk -v v="$v" -v b="$b" 'BEGIN { printf "%.0f%%", 100 * v / b }'
    else
        echo "-"
    fi
}
ratio() { share usnic "$1"; }   # the usnic column's, as before
# vs_tcploss T RATE: T's goodput / tcploss's at RATE, "1.85x", or "-"
vs_tcploss() {
    local v=${GOODPUT[$1,$2]:-} b=${GOODPUT[tcploss,$2]:-}
    if [[ $v =~ ^[0-9] && $b =~ ^[0-9] ]] && awk -v b="$b" 'BEGIN { exit !(b > 0) }'; then
        awk -v v="$v" -v b="$b" 'BEGIN { printf "%.2fx", v / b }'
    else
        echo "-"
    fi
}
USNIC_COLS=()
for t in usnic usnic_gso usnic_ofi; do has "$t" && USNIC_COLS+=("$t"); done

dashes() { local n=$1 s=""; while ((n-- > 0)); do s+=-; done; printf '%s' "$s"; }

# print_table ARRAY [usnic-extras]: one row per loss rate, one column per
# transport; with "usnic-extras", the ratio and resends columns too.
print_table() {
    local -n cells=$1
    local extras=${2:-} line rule t rate
    line=$(printf '%5s' loss) rule=$(printf '%5s' "$(dashes 5)")
    for t in $TRANSPORTS; do
        line+=$(printf '  %*s' "${WIDTH[$t]}" "$(title "$t")")
        rule+="  $(dashes "${WIDTH[$t]}")"
    done
    if [[ -n $extras ]]; then
        line+=$(printf '  %15s  %13s' "usnic vs its 0%" "usnic resends")
        rule+="  $(dashes 15)  $(dashes 13)"
    fi
    echo "$line"
    echo "$rule"
    for rate in $LOSS_RATES; do
        line=$(printf '%4s%%' "$rate")
        for t in $TRANSPORTS; do line+=$(printf '  %*s' "${WIDTH[$t]}" "${cells[$t,$rate]:--}"); done
        if [[ -n $extras ]]; then
            line+=$(printf '  %15s  %13s' "$(ratio "$rate")" "${RESENDS[usnic,$rate]:--}")
        fi
        echo "$line"
    done
}

echo
echo "Goodput of $SIZE-byte messages, MB/s (10^6 bytes/s of verified payload),"
echo "2 ranks, $WINDOW sends in flight, ${DURATION}s per cell; $(nproc) cores, $BIND"
echo
print_table GOODPUT "$(has usnic && echo usnic-extras)"
if [[ ${#USNIC_COLS[@]} -gt 0 ]]; then
    echo
    echo "Per usnic column: goodput as a share of its own 0% cell (\"own 0%\"), as a multiple of btl/tcp's under"
    echo "the same loss on its TCP ports (\"/tcploss\"), and its retransmissions (MPI_T btl_usnic_num_resends,"
    echo "both ranks, measured stream):"
    echo
    line=$(printf '%5s' "")
    rule=$(printf '%5s' "$(dashes 5)")
    for t in "${USNIC_COLS[@]}"; do
        line+=$(printf '  %-28s' "$(title "$t")")
        rule+="  $(dashes 28)"
    done
    echo "$line"
    line=$(printf '%5s' loss)
    for t in "${USNIC_COLS[@]}"; do line+=$(printf '  %8s %9s %9s' "own 0%" "/tcploss" "resends"); done
    echo "$line"
    echo "$rule"
    for rate in $LOSS_RATES; do
        line=$(printf '%4s%%' "$rate")
        for t in "${USNIC_COLS[@]}"; do
            line+=$(printf '  %8s %9s %9s' "$(share "$t" "$rate")" "$(vs_tcploss "$t" "$rate")" "${RESENDS[$t,$rate]:--}")
        done
        echo "$line"
    done
fi
echo
echo "Packets the nft rule dropped during each cell (UDP datagrams; in the"
echo "\"same loss on its TCP ports\" column, TCP segments to/from ports $TCP_PORT_MIN-$TCP_PORT_MAX):"
echo
print_table DROPS
echo
echo "UDP datagrams the kernel dropped for a full socket receive buffer during"
echo "each cell (Udp RcvbufErrors in the namespace; not caused by the rule):"
echo
print_table RCVBUF

failed=0
notes=""
for rate in $LOSS_RATES; do
    for t in $TRANSPORTS; do
        [[ ${GOODPUT[$t,$rate]:-} =~ ^[0-9] ]] || failed=$((failed + 1))
        [[ -n ${NOTE[$t,$rate]:-} ]] && notes+="  $t at $rate%: ${NOTE[$t,$rate]} (bench/build/logs/$t-$rate.log)"$'\n'
    done
done
if [[ -n $notes ]]; then
    echo
    echo "Notes:"
    printf '%s' "$notes"
fi
# states_of KEY1 KEY2: the two cells' VM states, and whether they compare
states_of() {
    local a=${VMSTATE[$1]:-?} b=${VMSTATE[$2]:-?} o="others ${OTHERS[$1]:-?}%/${OTHERS[$2]:-?}%"
    if [[ $a == "$b" && $a != mixed ]]; then
        echo "both cells in the $a VM state, $o"
    else
        echo "VM states $a / $b: NOT one state, the ratio mixes the VM's states; $o"
    fi
}
# if_quiet COND KEY1 KEY2: COND, or nothing (= not measured) when another
# process used more than FOREIGN_PCT of the CPUs during either cell (with
# DROP_DISTURBED=1, the default): a ratio with a disturbed cell measures
# the other work
if_quiet() {
    if [[ $DROP_DISTURBED -eq 1 && (${OTHERS[$2]:-0} -gt $FOREIGN_PCT || ${OTHERS[$3]:-0} -gt $FOREIGN_PCT) ]]; then
        echo ""
    else
        echo "$1"
    fi
}
disturbed_note() {
    if [[ $DROP_DISTURBED -eq 1 && (${OTHERS[$1]:-0} -gt $FOREIGN_PCT || ${OTHERS[$2]:-0} -gt $FOREIGN_PCT) ]]; then
        echo "a cell shared the CPUs with other work (over ${FOREIGN_PCT}%): rerun on a quieter machine; "
    fi
}
# target TEXT CONDITION VALUES: met / NOT met / not measured (no condition)
target() {
    if [[ -z $2 ]]; then
        echo "target $1: not measured ($3)"
    elif awk "BEGIN { exit !($2) }"; then
        echo "target $1: met ($3)"
    else
        echo "target $1: NOT met ($3)"
    fi
}
if [[ ${#USNIC_COLS[@]} -gt 0 ]]; then
    echo
    if [[ " $LOSS_RATES " != *" 1 "* || " $LOSS_RATES " != *" 0 "* ]]; then
        echo "targets at 1% loss: not measured (LOSS_RATES must include 0 and 1)"
    fi
    for t in "${USNIC_COLS[@]}"; do
        [[ " $LOSS_RATES " == *" 1 "* && " $LOSS_RATES " == *" 0 "* ]] || break
        who="$(title "$t")"
        [[ -n ${WIRE[$t,0]:-} ]] && who+=" [${WIRE[$t,0]%%,*}]"
        g0=${GOODPUT[$t,0]:-} g1=${GOODPUT[$t,1]:-} r=$(share "$t" 1)
        if [[ $r != - ]]; then
            extra=""
            [[ $t == usnic ]] && extra="; the earlier target >= 70%: $([[ ${r%\%} -ge 70 ]] && echo met || echo NOT met)"
            target "$who at 1% loss keeps at least 85% of its lossless goodput" "$(if_quiet "${r%\%} >= 85" "$t,0" "$t,1")" \
                "$(disturbed_note "$t,0" "$t,1")$g1 of $g0 MB/s = $r$extra; $(states_of "$t,0" "$t,1")"
        else
            target "$who at 1% loss keeps at least 85% of its lossless goodput" "" "0%: ${g0:-not run}, 1%: ${g1:-not run}"
        fi
        x=$(vs_tcploss "$t" 1)
        if [[ $x != - ]]; then
            target "$who at 1% loss ahead of btl/tcp under the same loss on its TCP ports" "$(if_quiet "${x%x} > 1.0" "$t,1" tcploss,1)" \
                "$(disturbed_note "$t,1" tcploss,1)$g1 vs tcploss ${GOODPUT[tcploss,1]} MB/s = $x; $(states_of "$t,1" tcploss,1)"
        else
            target "$who at 1% loss ahead of btl/tcp under the same loss on its TCP ports" "" \
                "usnic: ${g1:-not run}, tcploss: ${GOODPUT[tcploss,1]:-not run}"
        fi
    done
fi
echo
echo "$failed failed cell(s); total time $((SECONDS - START))s; logs in bench/build/logs/"
[[ $failed -eq 0 ]]
