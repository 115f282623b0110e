#!/usr/bin/env bash
#
# Tests mirror files: every btl_usnic_<name>.c has test/unit/test_<name>.c
# or a row in test/unit/test-map.txt saying where else it is tested (a
# suite, another unit test) or that it has no logic ("-"); every
# test/unit/test_<name>.c either tests btl_usnic_<name>.c or is named in
# the table; and every row of the table names files that exist.  Run by
# make's unit-tests target (test/unit/Makefile.inc).
#
#   test/unit/check-test-map.sh [top]     (top: the component's directory,
#                                          by default two levels above this script)
#
# Prints nothing and exits 0 when everything is mapped.
set -uo pipefail

top=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
map=$top/test/unit/test-map.txt
bad=0

declare -A SRC_ROWS=() TEST_ROWS=()
n=0
while read -r src where why; do
    n=$((n + 1))
    [[ -z $src || $src == \#* ]] && continue
    if [[ -z ${where:-} || -z ${why:-} ]]; then
        echo "test-map.txt:$n: needs three columns: source, test file or suite (or -), why" >&2
        bad=1
        continue
    fi
    if [[ $src != btl_usnic_* || ! -f $top/$src ]]; then
        echo "test-map.txt:$n: $src: no such source file (renamed or split? edit its rows)" >&2
        bad=1
    fi
    if [[ $where != - && ! -e $top/$where ]]; then
        echo "test-map.txt:$n: $where: no such test file or suite" >&2
        bad=1
    fi
    SRC_ROWS[$src]=1
    TEST_ROWS[$where]=1
done <"$map"

# |heading| and |hint| around the files that follow, if any
complain() {
    local heading=$1 hint=$2
    shift 2
    (($#)) || return 0
    echo "$heading" >&2
    printf '    %s\n' "$@" >&2
    echo "  $hint" >&2
    bad=1
}

unmapped=()
for c in "$top"/btl_usnic_*.c; do
    c=$(basename "$c")
    [[ -f $top/test/unit/test_${c#btl_usnic_} || -n ${SRC_ROWS[$c]+x} ]] || unmapped+=("$c")
done
complain "source files without test/unit/test_<name>.c and without a row in test/unit/test-map.txt:" \
    "add the test, or a row: source, where it is tested (or - if it has no logic), why" \
    ${unmapped[@]+"${unmapped[@]}"}

unexplained=()
for t in "$top"/test/unit/test_*.c; do
    t=$(basename "$t")
    [[ -f $top/btl_usnic_${t#test_} || -n ${TEST_ROWS[test/unit/$t]+x} ]] || unexplained+=("test/unit/$t")
done
complain "unit tests named after no btl_usnic_<name>.c and without a row in test/unit/test-map.txt:" \
    "add a row: the source it tests, the test, what it tests" \
    ${unexplained[@]+"${unexplained[@]}"}

exit $bad
