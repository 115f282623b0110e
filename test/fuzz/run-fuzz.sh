#!/usr/bin/env bash
#
# Build and run the receive-side fuzzer of the usnic BTL (see README.md).
#
#   bash test/fuzz/run-fuzz.sh
#
# Steps, each reported as "ok   ..." or "FAIL ...": build; the checked-in
# corpus is what make-corpus writes; every seed runs clean and produces the
# counters make-corpus --expect says; reproducers in crashes/ (if any) no
# longer crash; FUZZ_SECONDS of fuzzing on a copy of the corpus; a planted
# bug (-DFUZZ_SELFTEST) is found.  Last line: "N passed, N failed".
#
#   FUZZ_SECONDS=60     fuzzing time (0: skip that step)
#   FUZZ_SELFTEST=1     0 skips the planted-bug check
#   FUZZ_SELFTEST_SECONDS=60  time the fuzzer gets to find the planted bug
#   FUZZ_CC=clang       compiler with libFuzzer (clang + libclang-rt-14-dev)
#
# A crash found while fuzzing is saved under test/fuzz/crashes/.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$HERE/build
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_SELFTEST=${FUZZ_SELFTEST:-1}
FUZZ_SELFTEST_SECONDS=${FUZZ_SELFTEST_SECONDS:-60}
CC=${FUZZ_CC:-clang}
OMPI_INC=${OMPI_INC:-/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi}
MAX_LEN=4096

passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
finish() {
    echo "$passed passed, $failed failed"
    [[ $failed -eq 0 ]]
    exit
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/usnic-fuzz.XXXXXX") || { fail "mktemp"; finish; }
trap 'rm -rf "$TMP"' EXIT

# ----- prerequisites: clang with the libFuzzer runtime -----
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void) d; (void) n; return 0; }' \
    >"$TMP/probe.c"
if ! command -v "$CC" >/dev/null 2>&1; then
    fail "prerequisites: $CC not found (apt-get install clang libclang-rt-14-dev)"
    finish
fi
if ! "$CC" -fsanitize=fuzzer,address,undefined "$TMP/probe.c" -o "$TMP/probe" >"$TMP/probe.log" 2>&1; then
    sed 's/^/    /' "$TMP/probe.log" | head -5
    fail "prerequisites: $CC cannot link -fsanitize=fuzzer (apt-get install libclang-rt-14-dev)"
    finish
fi

# ----- build -----
# The engine sources come from the Makefile, so a new engine file is fuzzed too.
ENGINE_SRCS=$(sed -n 's/^ENGINE_SRCS *= *//p' "$ROOT/Makefile")
CPPFLAGS=(-I"$OMPI_INC" -I"$ROOT" -I"$ROOT/test/unit" -DOPAL_BTL_USNIC_STANDALONE=1)
read -r -a FABRIC_CFLAGS <<<"$(pkg-config --cflags libfabric 2>/dev/null)"
CPPFLAGS+=("${FABRIC_CFLAGS[@]}")
# -mcx16: Open MPI's lock-free lists use 128-bit compare-and-swap
CFLAGS=(-std=gnu11 -g -O1 -Wall -Wextra -Werror -mcx16 -fno-omit-frame-pointer)
SAN=("-fsanitize=address,undefined" -fno-sanitize-recover=all)
LIBS=(-L/usr/lib/x86_64-linux-gnu -lopen-pal -lsodium)
# as the component is built: large datagrams tagged by OpenSSL where libcrypto is there
if pkg-config --exists libcrypto 2>/dev/null; then
    CPPFLAGS+=(-DOPAL_BTL_USNIC_HAVE_LIBCRYPTO=1)
    LIBS+=(-lcrypto)
fi

build() {
    mkdir -p "$BUILD/obj" || return 1
    local objs=() src obj
    # btl_usnic_pml.c: the production upcall, against Open MPI's table
    for src in $ENGINE_SRCS btl_usnic_pml.c test/unit/fixture.c; do
        obj=$BUILD/obj/$(basename "$src" .c).o
        "$CC" "${CPPFLAGS[@]}" "${CFLAGS[@]}" "${SAN[@]}" -fsanitize=fuzzer-no-link -c "$ROOT/$src" -o "$obj" ||
            return 1
        objs+=("$obj")
    done
    for variant in fuzz_recv fuzz_recv_selftest; do
        local def=()
        [[ $variant == fuzz_recv_selftest ]] && def=(-DFUZZ_SELFTEST)
        "$CC" "${CPPFLAGS[@]}" "${CFLAGS[@]}" "${SAN[@]}" "${def[@]}" -fsanitize=fuzzer-no-link \
            -c "$HERE/fuzz_recv.c" -o "$BUILD/obj/$variant.o" || return 1
        "$CC" "${CFLAGS[@]}" "${SAN[@]}" -fsanitize=fuzzer -o "$BUILD/$variant" "$BUILD/obj/$variant.o" \
            "${objs[@]}" "${LIBS[@]}" || return 1
    done
    "$CC" "${CPPFLAGS[@]}" "${CFLAGS[@]}" -o "$BUILD/make-corpus" "$HERE/make-corpus.c"
}
t0=$(date +%s)
if build >"$TMP/build.log" 2>&1; then
    ok "build ($(($(date +%s) - t0))s)"
else
    tail -30 "$TMP/build.log"
    fail "build"
    finish
fi
FUZZER=$BUILD/fuzz_recv

# ----- the corpus is what make-corpus writes -----
mkdir -p "$TMP/gen"
if "$BUILD/make-corpus" "$TMP/gen" && diff -r "$TMP/gen" "$HERE/corpus" >"$TMP/diff.log" 2>&1; then
    ok "corpus matches make-corpus ($(find "$HERE/corpus" -type f | wc -l) seeds)"
else
    head -5 "$TMP/diff.log"
    fail "corpus differs from make-corpus output: regenerate with $BUILD/make-corpus $HERE/corpus"
fi

# ----- regression: every seed once, with the counters it must produce -----
"$BUILD/make-corpus" --expect >"$TMP/expect.txt"
FUZZ_REPORT=1 timeout -k 5 120 "$FUZZER" "$HERE"/corpus/* >"$TMP/seeds.log" 2>&1
rc=$?
if [[ $rc -eq 0 ]]; then
    ok "every seed runs clean under ASan, UBSan and LSan"
else
    # libFuzzer stops at the first crash: run them one by one to name them all
    : >"$TMP/seeds.log"
    for seed in "$HERE"/corpus/*; do
        if ! FUZZ_REPORT=1 timeout -k 5 60 "$FUZZER" "$seed" >"$TMP/seed.log" 2>&1; then
            grep -E 'invariant violated|ERROR: |SUMMARY: |^ +#[0-9] ' "$TMP/seed.log" | head -12
            fail "seed $(basename "$seed") crashed or leaked"
        fi
        cat "$TMP/seed.log" >>"$TMP/seeds.log"
    done
fi
while IFS= read -r line; do
    case $line in
    ok*) ok "${line#ok   }" ;;
    *) fail "${line#FAIL }" ;;
    esac
done < <(awk '
    FNR == NR { want[$1] = $0; order[++n] = $1; next }
    /^Running: / { name = $2; sub(".*/", "", name); next }
    /^fuzz-report: / { if (!(name in got)) got[name] = $0 " "; next }
    END {
        for (i = 1; i <= n; ++i) {
            s = order[i]
            if (!(s in got)) { print "FAIL seed " s ": no report"; continue }
            m = split(want[s], kv, " ")
            bad = ""
            for (k = 2; k <= m; ++k) {
                if (index(got[s], " " kv[k] " ") == 0) {
                    split(kv[k], p, "=")
                    match(got[s], " " p[1] "=[^ ]*")
                    bad = bad " want " kv[k] ", got " (RSTART ? substr(got[s], RSTART + 1, RLENGTH - 1) : "nothing") ";"
                }
            }
            print (bad == "" ? "ok   seed " s ": " substr(want[s], length(s) + 2) : "FAIL seed " s ":" bad)
        }
    }' "$TMP/expect.txt" "$TMP/seeds.log")

# ----- reproducers of earlier findings -----
if compgen -G "$HERE/crashes/*" >/dev/null; then
    if timeout -k 5 120 "$FUZZER" "$HERE"/crashes/* >"$TMP/crashes.log" 2>&1; then
        ok "reproducers in crashes/ run clean"
    else
        grep -E 'ERROR|invariant|SUMMARY|#[0-9]+ ' "$TMP/crashes.log" | head -20
        fail "a reproducer in crashes/ still crashes"
    fi
fi

# ----- fuzzing, on a copy of the corpus -----
if [[ $FUZZ_SECONDS -gt 0 ]]; then
    cp -r "$HERE/corpus" "$TMP/work"
    mkdir -p "$TMP/artifacts"
    timeout -k 10 $((FUZZ_SECONDS + 60)) "$FUZZER" -max_len=$MAX_LEN -max_total_time="$FUZZ_SECONDS" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$TMP/artifacts/" "$TMP/work" \
        >"$TMP/fuzz.log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$TMP/fuzz.log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$TMP/fuzz.log")
    last=$(grep -E '^#[0-9]+' "$TMP/fuzz.log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
    ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
    corp=$(grep -oE 'corp: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
    if [[ $rc -eq 0 ]]; then
        ok "fuzz ${FUZZ_SECONDS}s: ${execs:-?} inputs (${rate:-?}/s), cov ${cov:-?} ft ${ft:-?}, corpus ${corp:-?}"
    else
        grep -vE '^(#[0-9]+|INFO:|fuzz-report:)' "$TMP/fuzz.log" | tail -60
        saved=""
        if compgen -G "$TMP/artifacts/*" >/dev/null; then
            mkdir -p "$HERE/crashes"
            for a in "$TMP"/artifacts/*; do
                cp "$a" "$HERE/crashes/" && saved="$saved crashes/$(basename "$a")"
            done
        fi
        fail "fuzz: exit $rc after ${execs:-?} inputs;${saved:+ reproducer:$saved (rerun: $FUZZER <file>)}"
    fi
else
    echo "skip fuzz (FUZZ_SECONDS=0)"
fi

# ----- the harness can fail: a planted bug is found -----
if [[ $FUZZ_SELFTEST != 0 ]]; then
    cp -r "$HERE/corpus" "$TMP/selftest"
    mkdir -p "$TMP/selftest-artifacts"
    t0=$(date +%s)
    timeout -k 10 $((FUZZ_SELFTEST_SECONDS + 60)) "$BUILD/fuzz_recv_selftest" -max_len=$MAX_LEN -seed=1 \
        -max_total_time="$FUZZ_SELFTEST_SECONDS" -timeout=10 -artifact_prefix="$TMP/selftest-artifacts/" \
        "$TMP/selftest" >"$TMP/selftest.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    crash=$(compgen -G "$TMP/selftest-artifacts/crash-*" | head -1)
    # found by fuzzing (after the seeds loaded), the reproducer replays, and
    # it is the planted bug: the real target survives it
    if [[ $rc -ne 0 && -n $crash ]] && grep -q 'INITED' "$TMP/selftest.log" &&
        grep -q 'deadly signal' "$TMP/selftest.log" && ! "$BUILD/fuzz_recv_selftest" "$crash" >/dev/null 2>&1; then
        if "$FUZZER" "$crash" >/dev/null 2>&1; then
            ok "self-test: planted bug found in ${secs}s"
        else
            mkdir -p "$HERE/crashes" && cp "$crash" "$HERE/crashes/"
            tail -40 "$TMP/selftest.log"
            fail "self-test found a real crash: crashes/$(basename "$crash")"
        fi
    else
        tail -20 "$TMP/selftest.log"
        fail "self-test: planted bug not found in ${FUZZ_SELFTEST_SECONDS}s (exit $rc)"
    fi
fi

finish
