#!/usr/bin/env bash
#
# Compile every source of the component with -Wall -Wextra -Werror against
# libfabric 2.x headers (libfabric 2 deprecates FI_LOCAL_MR and friends:
# using one is a warning, so an error here), for each Open MPI series
# found: the one on PATH and, if given, OMPI5=/prefix.  Debian 12 ships
# libfabric 1.x only; name a 2.x include directory (one holding
# rdma/fabric.h) with LIBFABRIC2_INCLUDE=DIR.  Syntax only: nothing is
# linked.  Ends with "N passed, N failed".
#
#   LIBFABRIC2_INCLUDE=/path/include [OMPI5=/prefix] bash test/compat/check-libfabric2.sh
#
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
INC=${LIBFABRIC2_INCLUDE:?name a libfabric 2.x include directory with LIBFABRIC2_INCLUDE}
passed=0
failed=0

major=$(printf '#include <rdma/fabric.h>\nFI_MAJOR_VERSION\n' | gcc -E -P -I"$INC" - 2>/dev/null | tail -n 1)
if [[ "$major" != 2 ]]; then
    echo "FAIL $INC/rdma/fabric.h is not libfabric 2.x (FI_MAJOR_VERSION=${major:-?})"
    echo "0 passed, 1 failed"
    exit 1
fi

# check SERIES_NAME OMPI_PREFIX_OR_EMPTY
check() {
    local name=$1 prefix=$2 info=ompi_info
    [[ -n "$prefix" ]] && info=$prefix/bin/ompi_info
    local paths incdir pkginc
    paths=$("$info" --path all --parsable 2>/dev/null)
    pkginc=$(sed -n 's/^path:pkgincludedir://p' <<<"$paths" | head -n 1)
    incdir=$(sed -n 's/^path:incdir://p' <<<"$paths" | head -n 1)
    local bad=0 f
    for f in "$ROOT"/btl_usnic_*.c; do
        if ! gcc -fsyntax-only -std=gnu11 -mcx16 -O2 -Wall -Wextra -Werror -I"$INC" -I"$pkginc" -I"$incdir" \
                -I"$ROOT" -DOPAL_BTL_USNIC_STANDALONE=1 "$f" 2>&1 | sed 's/^/     /'; then
            bad=1
        fi
        [[ ${PIPESTATUS[0]} -ne 0 ]] && bad=1
    done
    if [[ $bad -eq 0 ]]; then
        echo "ok   every source compiles with -Werror against libfabric 2 ($INC) and Open MPI $name"
        passed=$((passed + 1))
    else
        echo "FAIL a source does not compile against libfabric 2 and Open MPI $name"
        failed=$((failed + 1))
    fi
}

check "$(ompi_info --parsable | sed -n 's/^ompi:version:full://p')" ""
[[ -n "${OMPI5:-}" ]] && check "$("$OMPI5/bin/ompi_info" --parsable | sed -n 's/^ompi:version:full://p')" "$OMPI5"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
