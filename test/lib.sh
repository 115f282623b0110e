# Shell helpers shared by the test suites (sourced, not run).

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
