# Result reporting shared by test suites (sourced, not run): "ok   NAME" /
# "FAIL NAME: REASON" / "NOT RUN NAME: WHY" lines, counted, and a closing
# "N passed, N failed" (", N not run" when some were not run: never
# counted as passes).

PASSED=0
FAILED=0
NOT_RUN=0
FAIL_TAIL=${FAIL_TAIL:-25}   # lines of a failed case's log that fail shows

now() { date +%s.%N; }
# elapsed START: seconds since START (from now), one decimal
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
ok() { printf 'ok   %s\n' "$1"; PASSED=$((PASSED + 1)); }
# fail NAME REASON [LOG]: also shows the end of LOG
fail() {
    printf 'FAIL %s: %s\n' "$1" "$2"
    if [ -n "${3:-}" ] && [ -f "$3" ]; then
        echo "    --- last $FAIL_TAIL lines of $3 ---"
        tail -n "$FAIL_TAIL" "$3" | sed 's/^/    /'
    fi
    FAILED=$((FAILED + 1))
}
# not_run NAME WHY: a check this run cannot make, said plainly
not_run() {
    printf 'NOT RUN %s: %s\n' "$1" "$2"
    NOT_RUN=$((NOT_RUN + 1))
}
# finish: the closing line; exits non-zero if anything failed
finish() {
    if [ "$NOT_RUN" -gt 0 ]; then
        echo "$PASSED passed, $FAILED failed, $NOT_RUN not run"
    else
        echo "$PASSED passed, $FAILED failed"
    fi
    [ "$FAILED" -eq 0 ]
    exit $?
}
