#!/usr/bin/env bash
#
# Install the Debian 12 packages the usnic BTL needs, only if missing.
#
#   bash scripts/install-deps.sh          build and run (Open MPI, libfabric)
#   bash scripts/install-deps.sh test     also what the test suite uses
#
set -euo pipefail

BUILD_PACKAGES=(
    build-essential pkg-config libopenmpi-dev openmpi-bin libfabric-dev libfabric-bin
    libhwloc-dev libevent-dev libsodium-dev libssl-dev
)
# clang + libclang-rt-14-dev: the libFuzzer target; lammps hpcc python3-mpi4py
# python3-numpy: the real MPI clients suite; python3-mpi4py also the
# dynamic-process suite (mpi4py.futures); ethtool: the two-host suite's
# HOSTS_GSO=soft (segmentation and GRO settings of the veths)
TEST_PACKAGES=(valgrind netpipe-openmpi iproute2 nftables bc procps clang libclang-rt-14-dev ethtool
    lammps hpcc python3-mpi4py python3-numpy)

packages=("${BUILD_PACKAGES[@]}")
if [[ "${1:-}" == "test" ]]; then
    packages+=("${TEST_PACKAGES[@]}")
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-deps: all ${#packages[@]} packages already installed"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages (${missing[*]}); run as root to install them" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
