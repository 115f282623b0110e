#!/bin/sh
# Run unit-test binaries (arguments), show their failures, and print the
# total as one line "N passed, N failed" (tests over all binaries).  A binary
# that crashes, times out or prints no result line counts as one more
# failure.  Exits non-zero if anything failed.
#   UNIT_TIMEOUT  seconds per binary (default 120)
T=${UNIT_TIMEOUT:-120}
passed=0
failed=0
log=$(mktemp "${TMPDIR:-/tmp}/usnic-unit.XXXXXX") || exit 2
trap 'rm -f "$log"' EXIT
for t in "$@"; do
    name=$(basename "$t")
    start=$(date +%s.%N)
    timeout "$T" "$t" >"$log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    grep -v '^unit-result ' "$log"
    res=$(grep '^unit-result ' "$log" | tail -n 1)
    if [ -z "$res" ]; then
        nf=$(grep -c '^FAIL ' "$log")
        failed=$((failed + nf + 1))
        if [ "$rc" -eq 124 ]; then
            echo "$name: TIMED OUT after ${T}s"
        else
            echo "$name: CRASHED (exit status $rc) before reporting"
        fi
        continue
    fi
    p=$(echo "$res" | awk '{ print $3 }')
    f=$(echo "$res" | awk '{ print $4 }')
    if [ "$f" -eq 0 ] && [ "$rc" -ne 0 ]; then
        # all tests passed but the process failed (e.g. LeakSanitizer at exit)
        f=1
        echo "$name: exit status $rc after all tests passed"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    echo "$name: $p/$((p + f)) ok (${secs}s)"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
