# Shell helpers shared by the test suites (sourced, not run), and the one
# place that knows how the Open MPI series differ for the tests.

# ---------------------------------------------------------------------
# Which Open MPI the suites test.  Default: the one on PATH (Debian 12's
# 4.1).  USNIC_OMPI=/prefix names another installation (run-all.sh's
# Open MPI 5 leg sets it): its bin/ goes first on PATH and its lib/ on
# LD_LIBRARY_PATH, so that Debian's prebuilt MPI programs (LAMMPS,
# NetPIPE, mpi4py: linked against libmpi.so.40, whose C ABI 5.0 keeps)
# run on it too.  Sets, for the suites:
#   OMPI_SERIES     "4.1", "5.0", ... (major.minor of the Open MPI tested)
#   LAUNCHER        orte (4.1 and older) or prrte (5.0 on)
#   SHM_BTL         the shared-memory BTL: vader (4.1) or sm (5.0)
#   OSC_ARGS        what one-sided MPI over a send-only BTL needs: 4.1's
#                   osc/pt2pt must be asked for; 5.0 has no pt2pt, and its
#                   default osc/rdma reaches the BTL through the BTL
#                   base's active-message RDMA emulation (no flags)
#   OVERSUBSCRIBE   mpirun's way to allow more ranks than cores
#   OOB_LO          keeps the runtime's own TCP on loopback: ORTE needs
#                   --mca oob_tcp_if_include lo; PRRTE never takes lo for
#                   its out-of-band network (it fails with "No network
#                   interfaces were found"), and needs none for local jobs
#   rsh_agent_args AGENT   mpirun arguments for a private rsh agent
#                   (ORTE: --mca plm_rsh_agent; PRRTE: --prtemca plm_ssh_agent)
#   oob_net_args NET   mpirun arguments keeping the runtime's TCP on NET
#   series_dir DIR  DIR for 4.1, DIR-ompi<series> otherwise: binaries
#                   built by one series' mpicc never run on the other
#
# Which wire (transport under the usnic BTL's engine) the suites run.
# USNIC_WIRE=ofi|socket|auto puts "--mca btl_usnic_wire VALUE" on every
# mpirun of a suite that honours it; unset or empty, nothing is added and
# the plugin's default applies.  Command-line --mca, not an OMPI_MCA_
# variable, so that it reaches the ranks on the namespaced "hosts" of
# test/hosts the same way as on this one.  Sets, for the suites:
#   WIRE_ARGS       the mpirun arguments (an array, empty when unset);
#                   use as ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"}
#   WIRE_NAME       USNIC_WIRE, or "default"
#   print_wire      prints "wire: WIRE_NAME ..." (every suite's first line,
#                   so a log says which wire it ran on)
# ---------------------------------------------------------------------
# Logs are text, whatever a runtime writes into them: Open MPI 5.0's
# mpirun now and then writes a NUL byte after a show_help message it
# relays (seen in CI before "[host:pid] btl:usnic final stats"), and grep
# would then call the whole log binary and print "binary file matches"
# instead of the lines a check counts.
grep() { command grep -a "$@"; }

if [ -n "${USNIC_OMPI:-}" ] && [ "${USNIC_OMPI_ACTIVE:-}" != "$USNIC_OMPI" ]; then
    export PATH=$USNIC_OMPI/bin:$PATH
    export LD_LIBRARY_PATH=$USNIC_OMPI/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export USNIC_OMPI_ACTIVE=$USNIC_OMPI   # a nested suite does not add it again
fi
OMPI_SERIES=$(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full:\([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)
OMPI_SERIES=${OMPI_SERIES:-unknown}
case "$OMPI_SERIES" in
    4.*|3.*|unknown)
        LAUNCHER=orte
        SHM_BTL=vader
        OSC_ARGS=(--mca osc pt2pt)
        OVERSUBSCRIBE=(--oversubscribe)
        OOB_LO=(--mca oob_tcp_if_include lo)
        ;;
    *)
        LAUNCHER=prrte
        SHM_BTL=sm
        OSC_ARGS=()
        OVERSUBSCRIBE=(--map-by :OVERSUBSCRIBE)
        OOB_LO=()
        ;;
esac

case "${USNIC_WIRE:-}" in
    "")
        WIRE_ARGS=()
        WIRE_NAME=default
        ;;
    ofi | socket | auto)
        WIRE_ARGS=(--mca btl_usnic_wire "$USNIC_WIRE")
        WIRE_NAME=$USNIC_WIRE
        ;;
    *)
        echo "USNIC_WIRE='$USNIC_WIRE': ofi, socket, auto or unset" >&2
        echo "0 passed, 1 failed"
        exit 2
        ;;
esac

print_wire() {
    if [ ${#WIRE_ARGS[@]} -gt 0 ]; then
        echo "wire: $WIRE_NAME (${WIRE_ARGS[*]} on every usnic job)"
    elif [ -n "${OMPI_MCA_btl_usnic_wire:-}" ]; then
        echo "wire: $OMPI_MCA_btl_usnic_wire (OMPI_MCA_btl_usnic_wire in the environment of this host's ranks)"
    else
        echo "wire: default (USNIC_WIRE unset: no btl_usnic_wire given, the plugin's default applies)"
    fi
}

rsh_agent_args() {
    if [ "$LAUNCHER" = orte ]; then
        printf '%s\n' --mca plm_rsh_agent "$1" --mca plm_rsh_no_tree_spawn 1
    else
        printf '%s\n' --prtemca plm_ssh_agent "$1" --prtemca plm_ssh_no_tree_spawn 1
    fi
}

oob_net_args() {
    if [ "$LAUNCHER" = orte ]; then
        printf '%s\n' --mca oob_tcp_if_include "$1"
    else
        printf '%s\n' --prtemca oob_tcp_if_include "$1"
    fi
}

series_dir() {
    if [ "$LAUNCHER" = orte ]; then
        printf '%s\n' "$1"
    else
        printf '%s\n' "$1-ompi$OMPI_SERIES"
    fi
}

# use_build_dir DIR [LOGS]: BUILD_DIR = DIR made and absolute, LOG_DIR =
# a fresh, empty BUILD_DIR/LOGS (default "logs"); exits 2 if it cannot
# (DIR goes through series_dir)
use_build_dir() {
    local dir
    dir=$(series_dir "$1")
    mkdir -p "$dir" || exit 2
    BUILD_DIR=$(cd "$dir" && pwd)
    LOG_DIR=$BUILD_DIR/${2:-logs}
    rm -rf "$LOG_DIR"
    mkdir -p "$LOG_DIR" || exit 2
}

# ensure_package PACKAGE: install a Debian package if it is missing (the
# suites run as root on Debian); apt-get's output goes to
# $LOG_DIR/apt-get.log.  Returns non-zero if it still is not installed.
ensure_package() {
    dpkg -s "$1" > /dev/null 2>&1 && return 0
    command -v apt-get > /dev/null || return 1
    export DEBIAN_FRONTEND=noninteractive
    {
        apt-get install -y "$1" ||
            { apt-get update && apt-get install -y "$1"; }
    } >> "${LOG_DIR:-/tmp}/apt-get.log" 2>&1
}

# run_mpi TIMEOUT NP LOG CMD...: "$MPIRUN ${MPIRUN_ARGS[@]} ${EXTRA_ARGS[@]}
# -np NP CMD..." under a timeout, all output to LOG.  Returns mpirun's
# status, or 124 when it had to be killed (also with the SIGKILL).
run_mpi() {
    local limit=$1 np=$2 log=$3
    shift 3
    {
        echo "+ $MPIRUN ${MPIRUN_ARGS[*]} ${EXTRA_ARGS[*]+${EXTRA_ARGS[*]}} -np $np $*"
        timeout -k 15 "$limit" "$MPIRUN" "${MPIRUN_ARGS[@]}" \
            ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"} -np "$np" "$@"
    } > "$log" 2>&1 < /dev/null
    local rc=$?
    [ "$rc" -eq 137 ] && rc=124
    return "$rc"
}

# injected LOG WHAT: a count from the fault injector's closing line
# (btl_usnic_inject.c, "fault injection: N duplicated (N with data), N
# reordered datagrams, N forged PUTs"), summed over the ranks in LOG;
# WHAT: duplicated, data (duplicated with data), reordered or forged
injected() {
    local re
    case $2 in
        duplicated) re='fault injection: ([0-9]+) duplicated' ;;
        data) re='duplicated \(([0-9]+) with data\)' ;;
        reordered) re='with data\), ([0-9]+) reordered' ;;
        forged) re='reordered datagrams, ([0-9]+) forged PUTs' ;;
        *) echo 0; return 1 ;;
    esac
    sed -nE "s/.*$re.*/\1/p" "$1" | awk '{s += $1} END {print s + 0}'
}

# A busy host: one spinning process pinned to each core (hogs_start),
# killed and waited for by hogs_stop (safe to call twice)
HOGS=()
hogs_start() {
    local cpu
    for cpu in $(seq 0 $(($(nproc) - 1))); do
        taskset -c "$cpu" sh -c 'while :; do :; done' &
        HOGS+=($!)
    done
}
hogs_stop() {
    [[ ${#HOGS[@]} -gt 0 ]] || return 0
    kill "${HOGS[@]}" 2>/dev/null
    wait "${HOGS[@]}" 2>/dev/null
    HOGS=()
}
