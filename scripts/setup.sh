#!/usr/bin/env bash
#
# One-command setup for a fresh Debian 12 machine, run as root:
#
#   bash scripts/setup.sh
#
# 1. installs the build and run dependencies (Open MPI, libfabric, ...),
# 2. builds the usnic BTL (mca_btl_usnic.so) with the repository's Makefile,
# 3. installs it where Open MPI looks for components,
# 4. runs the demo (demo/run-demo.sh), which compares usnic with TCP.

set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)


if [[ -t 1 ]]; then BOLD=$'\e[1m' RESET=$'\e[0m'; else BOLD='' RESET=''; fi
step() { printf '\n%s==> [%s/4] %s%s\n' "$BOLD" "$1" "$2" "$RESET"; }
fail() { printf '\nERROR: %s\n' "$*" >&2; exit 1; }

# Say which step broke, since set -e alone would exit silently.
trap 'fail "setup stopped: the command on line $LINENO of scripts/setup.sh failed (exit $?)"' ERR

if [[ $(id -u) -ne 0 ]]; then
    fail "run this as root (it installs packages with apt-get)"
fi
if ! command -v apt-get >/dev/null; then
    fail "apt-get not found: this script is for Debian 12"
fi

step 1 "Installing missing packages (Open MPI, libfabric, build tools)"
bash "$REPO_ROOT/scripts/install-deps.sh"

step 2 "Building the usnic BTL (make -C $REPO_ROOT)"
make -C "$REPO_ROOT"

step 3 "Installing the usnic BTL into Open MPI (make -C $REPO_ROOT install)"
make -C "$REPO_ROOT" install
if ompi_info | grep -q 'MCA btl: usnic'; then
    echo "Open MPI now lists: $(ompi_info | grep 'MCA btl: usnic' | sed 's/^ *//')"
else
    fail "installed, but 'ompi_info' does not list a usnic BTL; check where 'make install' put mca_btl_usnic.so"
fi

step 4 "Running the demo (demo/run-demo.sh)"
trap - ERR
bash "$REPO_ROOT/demo/run-demo.sh"
