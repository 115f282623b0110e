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
#   usnic    the usnic BTL             pml ob1, btl usnic,self on lo
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
#
# Output: per-cell lines while running, then the tables.  Logs of every
# cell are in bench/build/logs/.  A cell that fails prints "fail", one
# killed by the timeout "timeout", one on the wrong path "wrongpath"; no
# number is shown for such a cell.  Exit status 0 if every cell produced
# a verified result.

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
BUILD_DIR="$BENCH_DIR/build"
LOG_DIR="$BUILD_DIR/logs"
BINARY="$BUILD_DIR/goodput"

LOSS_RATES=${LOSS_RATES:-"0 1 5 20"}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-0.5}
WINDOW=${WINDOW:-4}
SIZE=${SIZE:-1048576}
CELL_TIMEOUT=${CELL_TIMEOUT:-90}
TRANSPORTS=${TRANSPORTS:-"usnic rxd tcp tcploss"}
TCP_PORT_MIN=${TCP_PORT_MIN:-23000}
TCP_PORT_RANGE=32
TCP_PORT_MAX=$((TCP_PORT_MIN + TCP_PORT_RANGE - 1))
RXD_PROVIDER="udp;ofi_rxd"

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
        usnic|rxd|tcp|tcploss) ;;
        *) die "unknown transport '$t' in TRANSPORTS (known: usnic rxd tcp tcploss)" ;;
    esac
done
for r in $LOSS_RATES; do
    [[ $r =~ ^[0-9]+$ && $r -le 100 ]] || die "bad loss rate '$r' (integer percent 0..100)"
done
[[ $DURATION =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad DURATION '$DURATION'"
[[ $WARMUP =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad WARMUP '$WARMUP'"
[[ $CELL_TIMEOUT =~ ^[0-9]+$ ]] || die "bad CELL_TIMEOUT '$CELL_TIMEOUT'"
for cmd in mpicc mpirun ip nft timeout; do
    command -v "$cmd" >/dev/null || die "$cmd not found"
done
if [[ " $TRANSPORTS " == *" usnic "* ]] && ! ompi_info 2>/dev/null | grep -q 'MCA btl: usnic'; then
    die "Open MPI lists no usnic BTL (ompi_info | grep 'MCA btl: usnic'); install it first"
fi

START=$SECONDS

# ---------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------

mkdir -p "$BUILD_DIR" "$LOG_DIR" || die "cannot create $BUILD_DIR"
rm -f "$LOG_DIR"/*.log
echo "building bench/build/goodput (mpicc -O2 -Wall -Wextra -Werror)"
mpicc -O2 -Wall -Wextra -Werror -o "$BINARY" "$BENCH_DIR/goodput.c" ||
    die "compiling bench/goodput.c failed"

# ---------------------------------------------------------------------------
# Namespace and mpirun
# ---------------------------------------------------------------------------

netns_create || die "cannot create a network namespace with nftables (need root, iproute2, nftables)"
echo "network namespace $NETNS (loopback only)"

transport_args() {
    case $1 in
        usnic)   echo "--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo" ;;
        rxd)     echo "--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include $RXD_PROVIDER" \
                      "--mca mtl_ofi_verbose 1 --mca pml_base_verbose 10" ;;
        tcp)     echo "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo" ;;
        tcploss) echo "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo" \
                      "--mca btl_tcp_port_min_v4 $TCP_PORT_MIN --mca btl_tcp_port_range_v4 $TCP_PORT_RANGE" ;;
    esac
}

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

declare -A GOODPUT RESENDS DROPS RCVBUF NOTE

# Datagrams the namespace's kernel dropped because a UDP socket's receive
# buffer was full (not the nft rule): Udp RcvbufErrors of /proc/net/snmp.
udp_rcvbuf_errors() {
    # shellcheck disable=SC2016  # an awk program
    netns_exec awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) n[i] = $i; h = 1 }
                              else for (i = 1; i <= NF; i++) if (n[i] == "RcvbufErrors") print $i }' /proc/net/snmp
}

field() { sed -nE "s/.* $1=([^ ]+).*/\\1/p" <<<"$2" | head -1; }

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

    rcvbuf0=$(udp_rcvbuf_errors)
    # shellcheck disable=SC2046
    mpirun_ns $(transport_args "$t") "$BINARY" --label "$t-$rate" \
        --size "$SIZE" --window "$WINDOW" --duration "$DURATION" --warmup "$WARMUP" \
        >"$log" 2>&1
    rc=$?
    rcvbuf1=$(udp_rcvbuf_errors)
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
        usnic)
            RESENDS[$key]=$(field num_resends "$line")
            local sends
            sends=$(field num_total_sends "$line")
            if [[ -n $line && ! ${sends:-} =~ ^[1-9][0-9]*$ ]]; then
                GOODPUT[$key]=wrongpath; NOTE[$key]="no usnic BTL sends counted (num_total_sends=${sends:-none})"
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

    printf '  %-8s %3s%%  %-10s  nft drops %-7s rcvbuf drops %-6s %s%s  [%ds]\n' "$t" "$rate" \
        "${GOODPUT[$key]}" "${DROPS[$key]}" "${RCVBUF[$key]}" \
        "${RESENDS[$key]:+resends ${RESENDS[$key]}  }" \
        "${NOTE[$key]:+(${NOTE[$key]})}" $((SECONDS - t0))
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
        usnic)   echo "usnic BTL" ;;
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

ratio() { # usnic cell / usnic 0% cell, as a percentage
    local v=${GOODPUT[usnic,$1]:-} b=${GOODPUT[usnic,0]:-}
    if [[ $v =~ ^[0-9] && $b =~ ^[0-9] ]] && awk -v b="$b" 'BEGIN { exit !(b > 0) }'; then
        awk -v v="$v" -v b="$b" 'BEGIN { printf "%.0f%%", 100 * v / b }'
    else
        echo "-"
    fi
}

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
if has usnic && [[ " $LOSS_RATES " == *" 1 "* && " $LOSS_RATES " == *" 0 "* ]]; then
    r=$(ratio 1)
    echo
    if [[ $r != - ]] && [[ ${r%\%} -ge 70 ]]; then
        echo "usnic at 1% loss: $r of its 0% goodput (target >= 70%: met)"
    else
        echo "usnic at 1% loss: $r of its 0% goodput (target >= 70%: NOT met)"
    fi
fi
echo
echo "$failed failed cell(s); total time $((SECONDS - START))s; logs in bench/build/logs/"
[[ $failed -eq 0 ]]
