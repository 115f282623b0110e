#!/usr/bin/env bash
#
# build-gso-shim.sh [OUTDIR] - builds the GSO failure shim
# (test/faults/gso_shim.c -> OUTDIR/libgso_shim.so, an LD_PRELOAD library)
# and its raw checker (gso_shim_check.c -> OUTDIR/gso_shim_check), with
# warnings as errors.  OUTDIR defaults to test/faults/build.  Neither
# depends on MPI.  Exit status non-zero if a build failed (the compiler's
# output on stderr).
#
#   LD_PRELOAD=OUTDIR/libgso_shim.so GSO_SHIM_ERRNO=EINVAL GSO_SHIM_FAILS=1 \
#       GSO_SHIM_REPORT=/tmp/shim.txt PROGRAM ...
#
set -u
set -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:-$HERE/build}
CC=${CC:-cc}
mkdir -p "$OUT" || exit 2
"$CC" -shared -fPIC -O2 -Wall -Wextra -Werror -o "$OUT/libgso_shim.so" "$HERE/gso_shim.c" -ldl -lpthread || exit 1
"$CC" -O2 -Wall -Wextra -Werror -pthread -o "$OUT/gso_shim_check" "$HERE/gso_shim_check.c" || exit 1
