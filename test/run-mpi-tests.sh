#!/usr/bin/env bash
#
# run-mpi-tests.sh - build and run the MPI integration tests in test/mpi/
# against one BTL, over loopback only.
#
# Environment:
#   BTL                 BTL list for "--mca btl" (default: usnic,self)
#   MPIRUN_EXTRA        extra mpirun arguments, split on whitespace
#                       (e.g. "--mca btl_usnic_if_include lo")
#   USNIC_WIRE          ofi | socket | auto: --mca btl_usnic_wire on every
#                       job (test/lib.sh); unset: the plugin's default
#   NETPIPE             1 (default) also runs NetPIPE's integrity check
#   VALGRIND            1 (default) also runs the small case under valgrind
#   MPI_TEST_BUILD_DIR  where binaries and logs go (default test/mpi/build)
#   TEST_TIMEOUT        seconds per mpirun before it counts as a hang (180)
#   VALGRIND_TIMEOUT    same for the valgrind run (300)
#   VG_PATTERN          what valgrind findings must mention to count as
#                       failures (default btl_usnic, see vg_filter below)
#   VG_SUPPRESSIONS     optional valgrind suppression file(s), separated by
#                       whitespace, for reviewed false positives
#   MPICC, MPIRUN       compiler wrapper / launcher (mpicc, mpirun)
#
# Output: one "ok   ..." or "FAIL ..." line per run, then "N passed,
# N failed". Exit status is non-zero if anything failed. Full logs are kept
# in $MPI_TEST_BUILD_DIR/logs.

set -u
set -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$SCRIPT_DIR/mpi

BTL=${BTL:-usnic,self}
MPIRUN_EXTRA=${MPIRUN_EXTRA:-}
NETPIPE=${NETPIPE:-1}
VALGRIND=${VALGRIND:-1}
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
VALGRIND_TIMEOUT=${VALGRIND_TIMEOUT:-300}
VG_PATTERN=${VG_PATTERN:-btl_usnic}
VG_SUPPRESSIONS=${VG_SUPPRESSIONS:-$SRC_DIR/valgrind.supp}
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}

. "$SCRIPT_DIR/lib.sh"  # use_build_dir, ensure_package, run_mpi
use_build_dir "${MPI_TEST_BUILD_DIR:-$SRC_DIR/build}"

# Open MPI refuses to run as root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Every job: the requested BTL under ob1, oversubscribed on this small
# machine, and every TCP socket (runtime and tcp BTL alike) kept on lo.
MPIRUN_ARGS=(--allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none
             --mca pml ob1 --mca btl "$BTL"
             --mca btl_tcp_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"}
             ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"})
read -r -a EXTRA_ARGS <<< "$MPIRUN_EXTRA"

PASSED=0
FAILED=0

# ---------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# "2 ranks", or "local" for steps that launch no MPI job (np given as -).
where() { if [ "$1" = - ]; then echo local; else echo "$1 ranks"; fi; }

report_ok() {      # name np secs
    printf 'ok   %s (%s, %ss)\n' "$1" "$(where "$2")" "$3"
    PASSED=$((PASSED + 1))
}

report_fail() {    # name np secs reason [logfile]
    printf 'FAIL %s (%s, %ss): %s\n' "$1" "$(where "$2")" "$3" "$4"
    if [ -n "${5:-}" ] && [ -f "$5" ]; then
        echo "    --- last 30 lines of $5 ---"
        tail -n 30 "$5" | sed 's/^/    | /'
    fi
    FAILED=$((FAILED + 1))
}


# Common verdict for our own programs: clean exit, a "PASS <program>"
# line and no FAIL line. Reports failures itself; returns 0 if all is well.
judge_program() {  # name program np secs rc log limit
    local name=$1 prog=$2 np=$3 secs=$4 rc=$5 log=$6 limit=$7
    if [ "$rc" -eq 124 ]; then
        report_fail "$name" "$np" "$secs" "TIMEOUT after ${limit}s (hang?)" "$log"
    elif [ "$rc" -ne 0 ]; then
        report_fail "$name" "$np" "$secs" "exit status $rc" "$log"
    elif grep -q '^FAIL ' "$log"; then
        report_fail "$name" "$np" "$secs" "reported a failure" "$log"
    elif ! grep -q "^PASS $prog\$" "$log"; then
        report_fail "$name" "$np" "$secs" "exited 0 without 'PASS $prog'" "$log"
    else
        return 0
    fi
    return 1
}

# ---------------------------------------------------------------------
# Packages
# ---------------------------------------------------------------------


# Debian's netpipe-openmpi ships /usr/bin/NPopenmpi; upstream calls it NPmpi.
find_netpipe() {
    local c
    for c in NPmpi NPopenmpi; do
        command -v "$c" && return 0
    done
    dpkg -L netpipe-openmpi 2>/dev/null | grep -E '/bin/NP(open)?mpi$' | head -n 1 |
        grep . || return 1
}

# ---------------------------------------------------------------------
# Valgrind log filter
# ---------------------------------------------------------------------
#
# Open MPI, PMIx and friends produce valgrind noise we cannot fix here
# (e.g. stock Open MPI 4.1 leaks a few bytes in its runtime and in
# mca_btl_tcp_component_init). So instead of valgrind's exit code we read
# its logs record by record (a record ends at a "==PID== " blank line) and
# fail only on records that mention VG_PATTERN (btl_usnic matches function
# names mca_btl_usnic_* / opal_btl_usnic_*, source files btl_usnic_*.c and
# the object mca_btl_usnic.so) anywhere in the record, i.e. in the access
# stack or in the "Address ... alloc'd / free'd" stack, and that are:
#   - "definitely lost" leak records, or
#   - Invalid read / Invalid write / Invalid free / Mismatched free /
#     Source and destination overlap errors.
# Uninitialised-value reports are only counted in a note: ob1 hands every
# BTL headers with uninitialised padding, so "Syscall param ... points to
# uninitialised byte(s)" shows up in the BTL's send path (it does for the
# tcp BTL) without being the BTL's bug.
#
# Prints the offending records, exits 1 if there are any.
vg_filter() {      # pattern logfile...
    local pat=$1
    shift
    awk -v pat="$pat" '
        function flush(   i, hdr, kind) {
            if (n > 0) {
                hdr = rec[1]
                kind = ""
                if (hdr ~ /are definitely lost in loss record/)
                    kind = "leak"
                else if (hdr ~ /^(Invalid (read|write|free)|Mismatched free|Source and destination overlap)/)
                    kind = "error"
                else if (hdr ~ /uninitialised/)
                    kind = "uninit"
                if (kind != "" && index(text, pat) > 0) {
                    if (kind == "uninit") {
                        nuninit++
                    } else {
                        nbad++
                        print "---- " recfile ":"
                        for (i = 1; i <= n; i++)
                            print "  " rec[i]
                    }
                }
            }
            n = 0
            text = ""
        }
        FNR == 1 { flush() }
        /^==[0-9]+==/ {
            line = $0
            sub(/^==[0-9]+== ?/, "", line)
            if (line ~ /^[ \t]*$/) { flush(); next }
            if (n == 0) recfile = FILENAME
            rec[++n] = line
            text = text "\n" line
        }
        END {
            flush()
            if (nuninit > 0)
                printf "note: %d uninitialised-value report(s) mention %s " \
                       "(not counted as failures)\n", nuninit, pat
            printf "%d valgrind record(s) mentioning %s are failures\n", nbad, pat
            exit (nbad > 0) ? 1 : 0
        }' "$@"
}

# Prove the filter catches what it must and ignores what it must, on a
# fabricated log: two usnic records must fail, the rest must not.
vg_filter_selftest() {
    local dir=$LOG_DIR/vg-selftest start out rc
    start=$(now)
    mkdir -p "$dir"
    cat > "$dir/bad.log" <<'EOF'
==111== Memcheck, a memory error detector
==111== 
==111== Invalid write of size 4
==111==    at 0x4C2F: opal_btl_usnic_frag_fill (btl_usnic_frag.c:120)
==111==    by 0x4C30: mca_pml_ob1_send (in /usr/lib/openmpi/mca_pml_ob1.so)
==111==  Address 0x5a0 is 0 bytes after a block of size 64 alloc'd
==111==    at 0x4841: malloc (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)
==111== 
==111== Invalid read of size 8
==111==    at 0x4841: memcpy (vg_replace_strmem.c:1035)
==111==    by 0x4C9B: opal_convertor_pack (in /usr/lib/libopen-pal.so.40)
==111==  Address 0x7b0 is 8 bytes inside a block of size 16 free'd
==111==    at 0x4843: free (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)
==111==    by 0x9377: ??? (in /usr/lib/openmpi/mca_btl_usnic.so)
==111== 
==111== Syscall param sendmsg(msg.msg_iov[0]) points to uninitialised byte(s)
==111==    at 0x4A9A: sendmsg (sendmsg.c:28)
==111==    by 0x9378: opal_btl_usnic_send (btl_usnic_send.c:77)
==111== 
==111== HEAP SUMMARY:
==111==     in use at exit: 42 bytes in 2 blocks
==111== 
==111== 40 bytes in 1 blocks are definitely lost in loss record 2 of 9
==111==    at 0x4841: malloc (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)
==111==    by 0x9376: mca_btl_usnic_component_init (btl_usnic_component.c:611)
==111==    by 0x4CB3: mca_btl_base_select (in /usr/lib/libopen-pal.so.40)
==111== 
==111== 2 bytes in 1 blocks are definitely lost in loss record 1 of 9
==111==    at 0x4841: malloc (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)
==111==    by 0x5C2F: pmix_bfrops_base_value_load (in /usr/lib/libpmix.so.2)
==111== 
==111== LEAK SUMMARY:
==111==    definitely lost: 42 bytes in 2 blocks
EOF
    # the same without usnic involvement: only noise, must pass
    sed -e 's/opal_btl_usnic_frag_fill (btl_usnic_frag.c:120)/opal_foo (foo.c:1)/' \
        -e 's/mca_btl_usnic.so/mca_btl_tcp.so/' \
        -e 's/opal_btl_usnic_send (btl_usnic_send.c:77)/bar (bar.c:2)/' \
        -e 's/mca_btl_usnic_component_init (btl_usnic_component.c:611)/mca_btl_tcp_component_init (btl_tcp_component.c:1)/' \
        "$dir/bad.log" > "$dir/clean.log"

    out=$(vg_filter btl_usnic "$dir/bad.log")
    rc=$?
    local flagged
    flagged=$(printf '%s\n' "$out" | grep -c '^---- ')
    if [ "$rc" -ne 1 ] || [ "$flagged" -ne 3 ] ||
       ! printf '%s\n' "$out" | grep -q 'mca_btl_usnic_component_init' ||
       ! printf '%s\n' "$out" | grep -q 'opal_btl_usnic_frag_fill' ||
       ! printf '%s\n' "$out" | grep -q 'mca_btl_usnic.so' ||
       ! printf '%s\n' "$out" | grep -q '^note: 1 uninit'; then
        printf '%s\n' "$out" > "$dir/bad.out"
        report_fail valgrind-filter-selftest - "$(elapsed "$start")" \
            "expected 3 usnic records flagged (rc 1), got $flagged (rc $rc)" "$dir/bad.out"
        return
    fi
    out=$(vg_filter btl_usnic "$dir/clean.log")
    rc=$?
    if [ "$rc" -ne 0 ]; then
        printf '%s\n' "$out" > "$dir/clean.out"
        report_fail valgrind-filter-selftest - "$(elapsed "$start")" \
            "flagged a log without usnic records" "$dir/clean.out"
        return
    fi
    report_ok valgrind-filter-selftest - "$(elapsed "$start")"
}

# ---------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------

build_all() {
    local src name start
    for src in "$SRC_DIR"/*.c; do
        name=$(basename "$src" .c)
        start=$(now)
        rm -f "$BUILD_DIR/$name"
        # -g only adds debug info (valgrind line numbers), -pthread is for
        # threads.c; warnings are errors.
        if ! "$MPICC" -Wall -Wextra -Werror -O2 -g -pthread \
                -o "$BUILD_DIR/$name" "$src" > "$LOG_DIR/build-$name.log" 2>&1; then
            report_fail "build-$name" - "$(elapsed "$start")" \
                "$MPICC failed" "$LOG_DIR/build-$name.log"
        fi
    done
}

# ---------------------------------------------------------------------
# Test runs
# ---------------------------------------------------------------------

run_program() {    # name np
    local name=$1 np=$2 log=$LOG_DIR/$1-np$2.log start rc secs
    start=$(now)
    if [ ! -x "$BUILD_DIR/$name" ]; then
        report_fail "$name" "$np" 0.0 "not built"
        return
    fi
    run_mpi "$TEST_TIMEOUT" "$np" "$log" "$BUILD_DIR/$name"
    rc=$?
    secs=$(elapsed "$start")
    judge_program "$name" "$name" "$np" "$secs" "$rc" "$log" \
        "$TEST_TIMEOUT" && report_ok "$name" "$np" "$secs"
}

run_leakcheck() {
    local name=small_leakcheck np=2 log=$LOG_DIR/small_leakcheck-valgrind.log
    local vgdir=$LOG_DIR/valgrind start rc secs
    start=$(now)
    if ! command -v valgrind > /dev/null && ! ensure_package valgrind; then
        report_fail "$name-valgrind" "$np" 0.0 "valgrind missing and could not be installed"
        return
    fi
    if [ ! -x "$BUILD_DIR/$name" ]; then
        report_fail "$name-valgrind" "$np" 0.0 "not built"
        return
    fi
    mkdir -p "$vgdir"
    local supp=() f
    for f in $VG_SUPPRESSIONS; do
        supp+=("--suppressions=$f")
    done
    # No --error-exitcode: Open MPI's own noise would always trip it, so
    # the exit status stays the program's and vg_filter judges the logs.
    # --keep-debuginfo=yes keeps symbols of components that Open MPI
    # dlclose()s in MPI_Finalize; without it their leak stacks show "???".
    run_mpi "$VALGRIND_TIMEOUT" "$np" "$log" \
        valgrind --leak-check=full --show-leak-kinds=definite \
        --errors-for-leak-kinds=definite --keep-debuginfo=yes \
        --num-callers=40 ${supp[@]+"${supp[@]}"} \
        --log-file="$vgdir/vg.%p.log" "$BUILD_DIR/$name"
    rc=$?
    secs=$(elapsed "$start")
    judge_program "$name-valgrind" "$name" "$np" "$secs" "$rc" "$log" \
        "$VALGRIND_TIMEOUT" || return
    local logs=("$vgdir"/vg.*.log)
    if [ ! -f "${logs[0]}" ]; then
        report_fail "$name-valgrind" "$np" "$secs" "no valgrind logs written" "$log"
        return
    fi
    if ! vg_filter "$VG_PATTERN" "${logs[@]}" > "$LOG_DIR/valgrind-findings.txt"; then
        report_fail "$name-valgrind" "$np" "$secs" \
            "valgrind findings in $VG_PATTERN" "$LOG_DIR/valgrind-findings.txt"
        return
    fi
    report_ok "$name-valgrind" "$np" "$secs"
}

run_netpipe() {
    local np=2 log=$LOG_DIR/netpipe.log start rc secs bin largest
    start=$(now)
    if ! bin=$(find_netpipe); then
        ensure_package netpipe-openmpi
        if ! bin=$(find_netpipe); then
            report_fail netpipe-integrity "$np" "$(elapsed "$start")" \
                "NetPIPE (netpipe-openmpi) not installed and install failed" \
                "$LOG_DIR/apt-get.log"
            return
        fi
    fi
    # -i: NetPIPE's integrity mode (NOT -I): before each send the sender
    #     writes the ints 0,1,2,... into the message, and after each
    #     receive both sides compare every whole int; a mismatch prints
    #     "Integrity check failed: Expecting X but received Y" to stderr and
    #     exits(-1), otherwise the sender prints "Integrity check passed"
    #     per size. Limits: the pattern is the same for every message and
    #     the last size%4 bytes are not compared, so stale or misplaced
    #     data is only caught by our own tests.
    # -I: separate send and receive buffers, the receive pointer walking
    #     through a 10 MB pool (pre-filled with 'a'), so for most sizes a
    #     receive that leaves its buffer untouched cannot pass by finding
    #     the pattern this rank itself just sent.
    # -u: sizes 5 B, 7 B, 9 B, 13 B, ... 6291457 B, 8388609 B (8 MiB + 1).
    run_mpi "$TEST_TIMEOUT" "$np" "$log" "$bin" -i -I -u 8388609 \
        -o "$LOG_DIR/netpipe.np.out"
    rc=$?
    secs=$(elapsed "$start")
    largest=$(awk '/Integrity check passed/ { n = $2 } END { print n + 0 }' "$log")
    if [ "$rc" -eq 124 ]; then
        report_fail netpipe-integrity "$np" "$secs" "TIMEOUT after ${TEST_TIMEOUT}s" "$log"
    elif grep -q 'Integrity check failed' "$log"; then
        report_fail netpipe-integrity "$np" "$secs" "data integrity error" "$log"
    elif [ "$rc" -ne 0 ]; then
        report_fail netpipe-integrity "$np" "$secs" "exit status $rc" "$log"
    elif [ "$largest" -lt 4194304 ]; then
        report_fail netpipe-integrity "$np" "$secs" \
            "stopped early: largest verified size $largest bytes" "$log"
    else
        report_ok netpipe-integrity "$np" "$secs"
    fi
}

# ---------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------

total_start=$(now)
print_wire
echo "MPI tests: btl=$BTL extra='${MPIRUN_EXTRA}' build=$BUILD_DIR"

vg_filter_selftest
build_all

run_program pingpong 2
run_program pingpong 3
run_program pingpong 4
run_program nonblocking 2
run_program nonblocking 4
run_program anysource 3
run_program anysource 4
run_program collectives 2
run_program collectives 3
run_program collectives 4
run_program datatypes 2
run_program threads 2
if [ "$VALGRIND" = 1 ]; then
    run_leakcheck
fi
if [ "$NETPIPE" = 1 ]; then
    run_netpipe
fi

echo "total time $(elapsed "$total_start")s, logs in $LOG_DIR"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
