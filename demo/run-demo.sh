#!/usr/bin/env bash
#
# usnic BTL demo: builds demo/usnic_demo.c and runs it on 2 local ranks over
# the usnic BTL and over Open MPI's TCP BTL, then compares the two.
#
#   bash demo/run-demo.sh                     # usnic and tcp
#   DEMO_TRANSPORTS=tcp bash demo/run-demo.sh # tcp only
#
# All traffic stays on the loopback interface.  Logs and CSV results go to
# demo/build/.  Exits non-zero if any run fails.

set -uo pipefail

DEMO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_DIR="$DEMO_DIR/build"
BINARY="$BUILD_DIR/usnic_demo"
CSV="$BUILD_DIR/results.csv"
TRANSPORTS=${DEMO_TRANSPORTS:-"usnic tcp"}
RUN_TIMEOUT=${DEMO_TIMEOUT:-120}   # seconds per mpirun

# mpirun refuses to run as root unless told twice.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

START_SECONDS=$SECONDS
FAILED=()        # transports whose runs failed
SUCCEEDED=()     # transports with results in $CSV

# ---------------------------------------------------------------------------
# Output helpers
# ---------------------------------------------------------------------------

if [[ -t 1 ]]; then
    BOLD=$'\e[1m' RED=$'\e[31m' GREEN=$'\e[32m' YELLOW=$'\e[33m' RESET=$'\e[0m'
else
    BOLD='' RED='' GREEN='' YELLOW='' RESET=''
fi

step()  { printf '\n%s==> %s%s\n' "$BOLD" "$*" "$RESET"; }
info()  { printf '    %s\n' "$*"; }
ok()    { printf '    %s%s%s\n' "$GREEN" "$*" "$RESET"; }
warn()  { printf '    %swarning:%s %s\n' "$YELLOW" "$RESET" "$*"; }
error() { printf '    %sERROR:%s %s\n' "$RED" "$RESET" "$*" >&2; }

# Lines of a log file, indented, so they read as quoted material.
quote() { sed 's/^/      | /'; }

# ---------------------------------------------------------------------------
# mpirun command lines
# ---------------------------------------------------------------------------

# Options that select a transport.  pml ob1 is forced because only ob1
# drives BTLs; "self" carries a rank's messages to itself.
transport_args() {
    case "$1" in
        usnic) echo "--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo" ;;
        tcp)   echo "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo" ;;
        *)     return 1 ;;
    esac
}

BIND_ARGS="--bind-to core --map-by core"

# mpirun for 2 ranks with the chosen binding; runtime wire-up on loopback.
mpirun_2() {
    # shellcheck disable=SC2086  # the *_ARGS strings are word lists
    timeout "$RUN_TIMEOUT" mpirun -np 2 --allow-run-as-root --oversubscribe \
        $BIND_ARGS --mca oob_tcp_if_include lo "$@"
}

describe_exit() {
    case "$1" in
        124) echo "timed out after ${RUN_TIMEOUT}s" ;;
        *)   echo "exit code $1" ;;
    esac
}

# ---------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------

build_demo() {
    step "Building the demo program"
    if ! command -v mpicc >/dev/null; then
        error "mpicc not found: install Open MPI (scripts/setup.sh does it)"
        exit 1
    fi
    mkdir -p "$BUILD_DIR"
    info "mpicc -O2 -Wall -Wextra -Werror -o demo/build/usnic_demo demo/usnic_demo.c"
    if ! mpicc -O2 -Wall -Wextra -Werror -o "$BINARY" "$DEMO_DIR/usnic_demo.c"; then
        error "compiling demo/usnic_demo.c failed"
        exit 1
    fi
    ok "built demo/build/usnic_demo"
}

# Binding one rank per core makes the numbers steadier, but fails on
# machines with one core or restricted cpusets: probe once and fall back.
choose_binding() {
    step "Checking process binding (one rank per core)"
    if mpirun_2 true >"$BUILD_DIR/binding.log" 2>&1; then
        ok "ranks bound one per core (--bind-to core --map-by core)"
    else
        BIND_ARGS="--bind-to none"
        warn "binding to cores failed; running unbound (--bind-to none)"
        warn "see demo/build/binding.log"
    fi
}

check_transports() {
    local t
    for t in $TRANSPORTS; do
        if ! transport_args "$t" >/dev/null; then
            error "unknown transport '$t' in DEMO_TRANSPORTS (known: usnic tcp)"
            exit 2
        fi
    done
}

# The usnic BTL must be (1) installed where Open MPI finds components, and
# (2) actually chosen at run time: a BTL that initializes but is not picked
# for the peer would leave the traffic to another BTL.  Open MPI's BML prints
# "mca: bml: Using <btl> btl for send to <peer>" (btl_base_verbose >= 1) for
# the BTL it will use towards each peer; that line is the proof.  Returns
# non-zero when usnic cannot be used, so the measured run is skipped.
prove_usnic_selected() {
    local log="$BUILD_DIR/usnic-selection.log" rc line

    step "Checking that the usnic BTL is installed"
    line=$(ompi_info 2>/dev/null | grep 'MCA btl: usnic')
    if [[ -z $line ]]; then
        error "Open MPI does not list a usnic BTL (ompi_info | grep 'MCA btl: usnic' is empty)"
        error "build and install it first: scripts/setup.sh (or make && make install)"
        return 1
    fi
    ok "ompi_info: ${line#"${line%%[![:space:]]*}"}"

    step "Checking that the usnic BTL is selected (short run, btl_base_verbose 100)"
    # shellcheck disable=SC2046
    mpirun_2 $(transport_args usnic) --mca btl_base_verbose 100 \
        "$BINARY" --quick --label usnic-check >"$log" 2>&1
    rc=$?
    if [[ $rc -ne 0 ]]; then
        error "the usnic check run failed ($(describe_exit $rc)); last lines of demo/build/usnic-selection.log:"
        tail -n 25 "$log" | quote >&2
        return 1
    fi

    grep -E 'select: init of component usnic returned' "$log" | sort -u | quote
    if grep -q 'mca: bml: Using usnic btl for send to' "$log"; then
        grep 'mca: bml: Using usnic btl for send to' "$log" | quote
        ok "usnic is the BTL that carries traffic between the two ranks"
    elif grep -Eq '^\[usnic-check\] +btl_usnic_num_total_sends +[1-9]' "$log"; then
        grep -E '^\[usnic-check\] +btl_usnic_num_total_sends' "$log" | quote
        ok "usnic sent segments (nonzero btl_usnic_num_total_sends)"
    else
        warn "no 'mca: bml: Using usnic btl' line and no usnic send counter found;"
        warn "the run only succeeded, with 'btl usnic,self' as the only choice."
        warn "see demo/build/usnic-selection.log"
    fi
    return 0
}

# One measured run.  The demo's own lines are tagged "[transport]", so they
# are shown as they come; the full output is kept in a log.
run_transport() {
    local t=$1 log="$BUILD_DIR/$1.log" rc

    step "Running $t (2 ranks, latency and bandwidth)"
    # shellcheck disable=SC2046,SC2086
    info "mpirun -np 2 $BIND_ARGS $(transport_args "$t") --mca oob_tcp_if_include lo demo/build/usnic_demo --label $t"
    # shellcheck disable=SC2046
    mpirun_2 $(transport_args "$t") "$BINARY" --label "$t" --csv "$CSV" 2>&1 \
        | tee "$log"
    rc=${PIPESTATUS[0]}
    if [[ $rc -ne 0 ]]; then
        error "$t run FAILED ($(describe_exit "$rc")); full output in demo/build/$t.log"
        FAILED+=("$t")
        return 1
    fi
    ok "$t run finished"
    SUCCEEDED+=("$t")
}

# Side-by-side tables from the CSV rows (label,kind,size,value).  With two
# transports, a ratio column compares the first against the second.
print_comparison() {
    step "Comparison"
    awk -F, -v order="${SUCCEEDED[*]}" '
        function human(b) {
            if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) " MiB"
            if (b >= 1024 && b % 1024 == 0) return (b / 1024) " KiB"
            return b " B"
        }
        function rule(n,   s) { s = ""; while (n-- > 0) s = s "-"; return s }
        function table(kind, title, unit, better,   i, j, s, line, a, b) {
            if (!(kind in nsizes)) return
            printf "\n  %s (%s, %s is better)\n", title, unit, better
            line = sprintf("  %10s", "size")
            for (j = 1; j <= nt; j++) line = line sprintf("  %12s", t[j])
            if (nt == 2) line = line sprintf("  %12s", t[1] "/" t[2])
            print line
            line = sprintf("  %10s", rule(10))
            for (j = 1; j <= nt + (nt == 2); j++) line = line sprintf("  %12s", rule(12))
            print line
            for (i = 1; i <= nsizes[kind]; i++) {
                s = size[kind, i]
                line = sprintf("  %10s", human(s))
                for (j = 1; j <= nt; j++) {
                    if ((t[j], kind, s) in val)
                        line = line sprintf("  %12.2f", val[t[j], kind, s])
                    else
                        line = line sprintf("  %12s", "-")
                }
                if (nt == 2) {
                    a = val[t[1], kind, s]; b = val[t[2], kind, s]
                    if (((t[1], kind, s) in val) && ((t[2], kind, s) in val) && b > 0)
                        line = line sprintf("  %11.2fx", a / b)
                    else
                        line = line sprintf("  %12s", "-")
                }
                print line
            }
        }
        BEGIN { nt = split(order, t, " ") }
        NF == 4 {
            val[$1, $2, $3] = $4
            if (!(($2, $3) in seen)) {
                seen[$2, $3] = 1
                size[$2, ++nsizes[$2]] = $3
            }
        }
        END {
            table("latency_us", "Latency, half round trip", "microseconds", "lower")
            table("bandwidth_MBps", "Bandwidth", "MB/s, 1 MB = 10^6 bytes", "higher")
        }
    ' "$CSV"
}

# The usnic counters come from the measured run: the demo prints them as a
# block starting with "BTL counters" and ending with an empty line.
print_usnic_counters() {
    step "usnic BTL counters from the measured run (retransmissions, ACKs, ...)"
    local block
    block=$(sed -n '/^\[usnic\] BTL counters/,/^\[usnic\]$/p' "$BUILD_DIR/usnic.log" \
        | sed -e 's/^\[usnic\] \{0,1\}//' -e '/^$/d')
    printf '%s\n' "$block" | sed 's/^/  /'

    # One sentence a newcomer can read: how much was sent again, per rank.
    printf '%s\n' "$block" | awk '
        $1 == "btl_usnic_num_total_sends" { for (r = 0; r < 2; r++) sends[r] = $(2 + r) }
        $1 == "btl_usnic_num_resends"     { for (r = 0; r < 2; r++) resends[r] = $(2 + r) }
        END {
            for (r = 0; r < 2; r++) {
                if (!(r in sends) || !(r in resends) || sends[r] !~ /^[0-9]+$/ || sends[r] == 0)
                    continue
                printf "\n  rank %d retransmitted %.0f of %.0f segments (%.3f%%)", r,
                    resends[r], sends[r], 100 * resends[r] / sends[r]
            }
            print ""
        }'
}

# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

main() {
    local t

    printf '%s\n' "${BOLD}usnic BTL demo${RESET}: reliable MPI transport over libfabric UDP datagrams"
    printf '%s\n' "2 MPI ranks on this machine, loopback only; transports: $TRANSPORTS"

    check_transports
    build_demo
    choose_binding
    rm -f "$CSV"

    for t in $TRANSPORTS; do
        if [[ $t == usnic ]] && ! prove_usnic_selected; then
            error "skipping the usnic measurements: the usnic BTL cannot be used"
            FAILED+=("usnic")
            continue
        fi
        run_transport "$t"
    done

    if [[ ${#SUCCEEDED[@]} -gt 0 ]]; then
        print_comparison
    fi
    if [[ " ${SUCCEEDED[*]} " == *" usnic "* ]]; then
        print_usnic_counters
    fi

    echo
    if [[ ${#FAILED[@]} -gt 0 ]]; then
        printf '%sDemo FAILED%s for: %s (logs in demo/build/)  [%ds]\n' \
            "$RED" "$RESET" "${FAILED[*]}" $((SECONDS - START_SECONDS))
        exit 1
    fi
    printf '%sDemo complete%s: %s  [%ds]\n' "$GREEN" "$RESET" \
        "${SUCCEEDED[*]}" $((SECONDS - START_SECONDS))
}

main "$@"
