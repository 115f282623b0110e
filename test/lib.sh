# Shell helpers shared by the test suites (sourced, not run).

# use_build_dir DIR [LOGS]: BUILD_DIR = DIR made and absolute, LOG_DIR =
# a fresh, empty BUILD_DIR/LOGS (default "logs"); exits 2 if it cannot
use_build_dir() {
    mkdir -p "$1" || exit 2
    BUILD_DIR=$(cd "$1" && pwd)
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
