#!/usr/bin/env bash
#
# run-threads-stress.sh - MPI_THREAD_MULTIPLE stress test of the usnic BTL
# (threads_stress.c) over loopback, plain and under valgrind's helgrind.
#
# Environment:
#   BTL                 BTL list for "--mca btl" (default: usnic,self)
#   MPIRUN_EXTRA        extra mpirun arguments, split on whitespace
#                       (default: "--mca btl_usnic_if_include lo")
#   USNIC_WIRE          ofi | socket | auto: --mca btl_usnic_wire on every
#                       job (test/lib.sh); unset: the plugin's default
#   ROUNDS              rounds per worker thread in the plain runs (200)
#   HELGRIND            1 (default) also runs a small case under helgrind
#   HG_ROUNDS           rounds per worker under helgrind (3; every size up
#                       to 256 KiB is still sent, so eager, rendezvous and
#                       PUT all run)
#   HG_PATTERN          what a racing access must mention to count
#                       (default btl_usnic, see hg_filter below)
#   TEST_TIMEOUT        seconds per plain mpirun (180)
#   HELGRIND_TIMEOUT    seconds for the helgrind run (600)
#   THREADS_BUILD_DIR   binaries and logs (default test/mpi/build-threads)
#   MPICC, MPIRUN       compiler wrapper / launcher (mpicc, mpirun)
#
# To test a build that is not installed, point Open MPI at a private
# component directory: OMPI_MCA_mca_base_component_path=DIR.
#
# Output: one "ok   ..." or "FAIL ..." line per step, then "N passed,
# N failed". Exit status is non-zero if anything failed.

set -u
set -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BTL=${BTL:-usnic,self}
MPIRUN_EXTRA=${MPIRUN_EXTRA:---mca btl_usnic_if_include lo}
ROUNDS=${ROUNDS:-200}
HELGRIND=${HELGRIND:-1}
HG_ROUNDS=${HG_ROUNDS:-3}
HG_PATTERN=${HG_PATTERN:-btl_usnic}
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
HELGRIND_TIMEOUT=${HELGRIND_TIMEOUT:-600}
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}

. "$SCRIPT_DIR/../lib.sh"  # run_mpi, OVERSUBSCRIBE, OOB_LO, series_dir

BUILD_DIR=${THREADS_BUILD_DIR:-$(series_dir "$SCRIPT_DIR/build-threads")}
mkdir -p "$BUILD_DIR" || exit 2
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
LOG_DIR=$BUILD_DIR/logs
rm -rf "$LOG_DIR"
mkdir -p "$LOG_DIR" || exit 2
BIN=$BUILD_DIR/threads_stress

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

MPIRUN_ARGS=(--allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none
             --mca pml ob1 --mca btl "$BTL"
             --mca btl_tcp_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"}
             ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"})
read -r -a EXTRA_ARGS <<< "$MPIRUN_EXTRA"

PASSED=0
FAILED=0

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

report_ok() {      # name secs
    printf 'ok   %s (%ss)\n' "$1" "$2"
    PASSED=$((PASSED + 1))
}

report_fail() {    # name secs reason [logfile]
    printf 'FAIL %s (%ss): %s\n' "$1" "$2" "$3"
    if [ -n "${4:-}" ] && [ -f "$4" ]; then
        echo "    --- last 40 lines of $4 ---"
        tail -n 40 "$4" | sed 's/^/    | /'
    fi
    FAILED=$((FAILED + 1))
}

judge() {          # name secs rc log limit  -> 0 if the run passed
    local name=$1 secs=$2 rc=$3 log=$4 limit=$5
    if [ "$rc" -eq 124 ]; then
        report_fail "$name" "$secs" "TIMEOUT after ${limit}s (hang?)" "$log"
    elif [ "$rc" -ne 0 ]; then
        report_fail "$name" "$secs" "exit status $rc" "$log"
    elif grep -q '^FAIL ' "$log"; then
        report_fail "$name" "$secs" "reported a failure" "$log"
    elif ! grep -q '^PASS threads_stress$' "$log"; then
        report_fail "$name" "$secs" "exited 0 without 'PASS threads_stress'" "$log"
    else
        return 0
    fi
    return 1
}

# ---------------------------------------------------------------------
# Helgrind log filter
# ---------------------------------------------------------------------
#
# Open MPI 4.1, PMIx and libevent are not helgrind-clean (ob1 completes
# requests and libevent hands over events with atomics helgrind cannot see)
# and we cannot fix them here. A helgrind record (records are separated by
# "==PID== ------" lines) is a failure only when the BTL is the one racing:
#   - "Possible data race": the first frame (outside valgrind's own
#     preload objects and string replacements) of the racing access, or of
#     the conflicting earlier access ("This conflicts with ..."), mentions
#     HG_PATTERN (btl_usnic: function names, source files btl_usnic_*.c and
#     mca_btl_usnic.so). A race whose stack merely passes through the BTL
#     (ob1's matching code called from the BTL's receive upcall) is ob1's.
#   - lock order violations and lock misuse (unlocking a lock not held,
#     destroying a held lock, ...): the first frame of one of the
#     acquisitions / of the call mentions HG_PATTERN.
# Prints the offending records; exits 1 if there are any.
# Open MPI 5.0 (run-all.sh's Open MPI 5 leg) needs nothing more: the rule
# names the BTL, not the series.  There a run shows about 200 records, all
# in libmpi/libopen-pal (ob1's request completion, opal_progress,
# opal_convertor_unpack, libevent's event_assign) or PMIx, and none whose
# first frame is in btl_usnic, while btl_usnic_*.c frames appear in
# hundreds of stacks below them.
hg_filter() {      # pattern logfile...
    local pat=$1
    shift
    awk -v pat="$pat" '
        function frame_after(start,   i) {
            for (i = start; i <= n; i++) {
                if (i > start + 1 && rec[i] !~ /^ *(at|by) 0x/)
                    return ""
                if (rec[i] ~ /^ *(at|by) 0x/ &&
                    rec[i] !~ /vgpreload_|vg_replace_|hg_intercepts/)
                    return rec[i]
            }
            return ""
        }
        function flush(   i, kind, bad) {
            kind = ""
            for (i = 1; i <= n && kind == ""; i++) {
                if (rec[i] ~ /^Possible data race/) kind = "race"
                else if (rec[i] ~ /lock order .* violated/) kind = "order"
                else if (rec[i] ~ /^Thread #[0-9]+: /) kind = "misuse"
            }
            bad = 0
            for (i = 1; i <= n && kind != ""; i++) {
                if (kind == "race" &&
                    rec[i] ~ /^(Possible data race|This conflicts with)/ &&
                    index(frame_after(i + 1), pat) > 0)
                    bad = 1
                else if (kind == "order" && rec[i] ~ /acquisition of lock/ &&
                         index(frame_after(i + 1), pat) > 0)
                    bad = 1
                else if (kind == "misuse" && rec[i] ~ /^Thread #[0-9]+: / &&
                         index(frame_after(i + 1), pat) > 0)
                    bad = 1
            }
            if (kind != "" && bad) {
                nbad++
                print "---- " recfile ":"
                for (i = 1; i <= n; i++)
                    print "  " rec[i]
            } else if (kind != "") {
                nother++
            }
            n = 0
        }
        FNR == 1 { flush() }
        /^==[0-9]+== -+(Thread-Announcement-+)?$/ { flush(); next }
        /^==[0-9]+==/ {
            line = $0
            sub(/^==[0-9]+== ?/, "", line)
            if (n == 0) recfile = FILENAME
            rec[++n] = line
        }
        END {
            flush()
            printf "note: %d helgrind record(s) with the race outside %s " \
                   "(Open MPI, PMIx, libevent) ignored\n", nother, pat
            printf "%d helgrind record(s) racing in %s are failures\n", nbad, pat
            exit (nbad > 0) ? 1 : 0
        }' "$@"
}

# The filter on a fabricated log: a race whose conflicting access is the
# BTL's copy-out and a lock-order violation with a BTL acquisition must
# fail; a race in ob1 that merely has the BTL below it must not.
hg_filter_selftest() {
    local dir=$LOG_DIR/hg-selftest start out rc
    start=$(now)
    mkdir -p "$dir"
    cat > "$dir/bad.log" <<'EOF'
==222== Helgrind, a thread error detector
==222== ---Thread-Announcement------------------------------------------
==222== 
==222== Thread #9 was created
==222==    at 0x4AAEB3F: clone (clone.S:76)
==222== 
==222== ----------------------------------------------------------------
==222== 
==222== Possible data race during read of size 8 at 0x9F38B18 by thread #9
==222== Locks held: 1, at address 0x938A4E8
==222==    at 0x9D1F53B: mca_pml_ob1_recv_frag_callback_match (in /usr/lib/mca_pml_ob1.so)
==222==    by 0x937F6F0: wire_deliver (btl_usnic_module.c:228)
==222==    by 0x937E526: usnic_component_progress (btl_usnic_component.c:418)
==222== 
==222== This conflicts with a previous write of size 8 by thread #7
==222== Locks held: none
==222==    at 0x9D1A777: mca_pml_ob1_isend (in /usr/lib/mca_pml_ob1.so)
==222== 
==222== ----------------------------------------------------------------
==222== 
==222== Possible data race during write of size 1 at 0x9FBCEB0 by thread #7
==222== Locks held: none
==222==    at 0x10B51F: fill_pattern (mpitest.h:110)
==222== 
==222== This conflicts with a previous read of size 2 by thread #9
==222== Locks held: 1, at address 0x938A4E8
==222==    at 0x4851DA0: memmove (in /usr/libexec/valgrind/vgpreload_helgrind-amd64-linux.so)
==222==    by 0x937CADC: large_frag_copy_out (btl_usnic_send.c:302)
==222== 
==222== ----------------------------------------------------------------
==222== 
==222== Thread #3: lock order "0x1 before 0x2" violated
==222== 
==222== Observed (incorrect) order is: acquisition of lock at 0x2
==222==    at 0x484976E: ??? (in /usr/libexec/valgrind/vgpreload_helgrind-amd64-linux.so)
==222==    by 0x937E000: usnic_send (btl_usnic_module.c:605)
==222== 
==222==  followed by a later acquisition of lock at 0x1
==222==    at 0x484976E: ??? (in /usr/libexec/valgrind/vgpreload_helgrind-amd64-linux.so)
==222==    by 0x9D1A000: mca_pml_ob1_send_request_start (in /usr/lib/mca_pml_ob1.so)
==222== 
==222== ----------------------------------------------------------------
==222== 
==222== Thread #1: lock order "0x97A4D60 before 0x4033A28" violated
==222== 
==222== Observed (incorrect) order is: acquisition of lock at 0x4033A28
==222==    at 0x484976E: ??? (in /usr/libexec/valgrind/vgpreload_helgrind-amd64-linux.so)
==222==    by 0x4002008: _dl_close (dl-close.c:748)
==222==    by 0x937E994: getinfo_for (btl_usnic_component.c:119)
==222== 
==222== ----------------------------------------------------------------
EOF
    out=$(hg_filter btl_usnic "$dir/bad.log")
    rc=$?
    local flagged
    flagged=$(printf '%s\n' "$out" | grep -c '^---- ')
    if [ "$rc" -ne 1 ] || [ "$flagged" -ne 2 ] ||
       ! printf '%s\n' "$out" | grep -q 'large_frag_copy_out' ||
       ! printf '%s\n' "$out" | grep -q 'usnic_send (btl_usnic_module.c:605)' ||
       printf '%s\n' "$out" | grep -q '_dl_close' ||
       ! printf '%s\n' "$out" | grep -q '^note: 2 helgrind'; then
        printf '%s\n' "$out" > "$dir/bad.out"
        report_fail helgrind-filter-selftest "$(elapsed "$start")" \
            "expected 2 usnic records flagged (rc 1), got $flagged (rc $rc)" "$dir/bad.out"
        return
    fi
    report_ok helgrind-filter-selftest "$(elapsed "$start")"
}

# ---------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------

build() {
    local start log=$LOG_DIR/build.log
    start=$(now)
    rm -f "$BIN"
    if "$MPICC" -Wall -Wextra -Werror -O2 -g -pthread -o "$BIN" \
            "$SCRIPT_DIR/threads_stress.c" > "$log" 2>&1; then
        report_ok build-threads_stress "$(elapsed "$start")"
    else
        report_fail build-threads_stress "$(elapsed "$start")" "$MPICC failed" "$log"
    fi
}

run_plain() {      # label np rounds [extra mpirun args...]
    local label=$1 np=$2 rounds=$3 start rc log
    shift 3
    log=$LOG_DIR/$label.log
    start=$(now)
    if [ ! -x "$BIN" ]; then
        report_fail "$label" 0.0 "not built"
        return
    fi
    run_mpi "$TEST_TIMEOUT" "$np" "$log" "$@" "$BIN" "$rounds" 262144 \
        $((TEST_TIMEOUT - 10))
    rc=$?
    judge "$label" "$(elapsed "$start")" "$rc" "$log" "$TEST_TIMEOUT" &&
        report_ok "$label ($(grep -o '[0-9]* messages verified' "$log"))" \
            "$(elapsed "$start")"
}

run_helgrind() {   # np
    local np=$1 label=threads_stress-helgrind-np$1 start rc log vgdir secs
    log=$LOG_DIR/$label.log
    vgdir=$LOG_DIR/helgrind-np$np
    start=$(now)
    if ! command -v valgrind > /dev/null; then
        report_fail "$label" 0.0 "valgrind not installed (apt-get install valgrind)"
        return
    fi
    if [ ! -x "$BIN" ]; then
        report_fail "$label" 0.0 "not built"
        return
    fi
    mkdir -p "$vgdir"
    # --keep-debuginfo: Open MPI dlclose()s the BTL in MPI_Finalize.
    run_mpi "$HELGRIND_TIMEOUT" "$np" "$log" \
        valgrind --tool=helgrind --keep-debuginfo=yes --num-callers=40 \
        --history-level=full --log-file="$vgdir/hg.%p.log" \
        "$BIN" "$HG_ROUNDS" 262144 $((HELGRIND_TIMEOUT - 20))
    rc=$?
    secs=$(elapsed "$start")
    judge "$label" "$secs" "$rc" "$log" "$HELGRIND_TIMEOUT" || return
    local logs=("$vgdir"/hg.*.log)
    if [ ! -f "${logs[0]}" ]; then
        report_fail "$label" "$secs" "no helgrind logs written" "$log"
        return
    fi
    if ! hg_filter "$HG_PATTERN" "${logs[@]}" > "$LOG_DIR/helgrind-findings-np$np.txt"; then
        report_fail "$label" "$secs" "helgrind: races in $HG_PATTERN" \
            "$LOG_DIR/helgrind-findings-np$np.txt"
        return
    fi
    report_ok "$label ($(tail -n 2 "$LOG_DIR/helgrind-findings-np$np.txt" | head -n 1 | sed 's/^note: //'))" "$secs"
}

total_start=$(now)
print_wire
echo "threads stress: btl=$BTL extra='$MPIRUN_EXTRA' build=$BUILD_DIR"
hg_filter_selftest
build
run_plain threads_stress-np2 2 "$ROUNDS"
run_plain threads_stress-np3 3 "$ROUNDS"
# the same with duplicated and reordered datagrams and forged PUTs
run_plain threads_stress-np2-faults 2 $((ROUNDS / 2)) \
    --mca btl_usnic_inject_faults dup=7,reorder=5,forge_put=11
if [ "$HELGRIND" = 1 ]; then
    run_helgrind 2
fi
echo "total time $(elapsed "$total_start")s, logs in $LOG_DIR"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
