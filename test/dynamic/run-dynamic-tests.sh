#!/usr/bin/env bash
#
# Dynamic processes over the usnic BTL (issue 17): MPI_Comm_spawn from one
# and from two parents, MPI_Comm_spawn_multiple, 20 spawn/disconnect
# cycles (and 3 with the parent under valgrind), a parent that keeps
# calling MPI after its children left, MPI_Comm_connect/accept and
# MPI_Comm_join between separately launched jobs, mpi4py.futures'
# MPIPoolExecutor, and all but the valgrind and linger cases again at 1%
# UDP loss in a private network namespace.  Every job runs with
#   --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo
# so only usnic can carry traffic between processes, and with
# btl_usnic_stats, whose "final stats" lines ("peer N of job 0x...") prove
# usnic carried the traffic to the other job: their number is asserted,
# and each must show an RTT sample (srtt > 0: data sent and ACKed).
#
#   bash test/dynamic/run-dynamic-tests.sh       # as root, about 2 minutes
#
# Open MPI 5.0 (PRRTE; test/lib.sh's LAUNCHER=prrte) differs in three
# ways, handled here:
#   - there is no ompi-server: the pair cases (connect/accept, join) start
#     a persistent PRRTE DVM ("prte --report-uri FILE"), whose PMIx server
#     is the name server both jobs share, and launch both jobs into it
#     with "prun --dvm-uri file:FILE".  The suite's --mca settings go into
#     the DVM's environment as OMPI_MCA_K=V (its ranks inherit it; prun's
#     own "-x K=V" loses every variable after the second here), and
#     --tag-output becomes --output tag.  "mpirun --dvm file:FILE" (and pid:, uri:) is the
#     documented way, but Open MPI 5.0.10's mpirun/prterun die of SIGSEGV
#     with any --dvm argument here, and two plain mpiruns hang in
#     MPI_Comm_connect (no common server);
#   - --tag-output tags mpirun's own job only ("[1,0]<stdout>: ", with a
#     space); the jobs it spawns print untagged, so on PRRTE the spawned
#     children's lines are the untagged ones (CHILD);
#   - nothing else: spawn, spawn_multiple, cycles, valgrind, linger and
#     mpi4py.futures run as on 4.1.
#
# Environment: DYN_TEST_BUILD_DIR (default test/dynamic/build; logs in its
# logs/), TEST_TIMEOUT (seconds per mpirun, 90), CYCLES (20), VG_CYCLES (3),
# LOSS_RATE (1), PYTHON (/usr/bin/python3, where Debian's mpi4py is).
# Prints "ok   ..." / "FAIL ..." per case and "N passed, N failed".
#
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$ROOT/test/lib.sh"      # use_build_dir, ensure_package, run_mpi
. "$ROOT/test/report.sh"   # ok, fail, finish, now, elapsed
. "$ROOT/test/faults/netns.sh"
use_build_dir "${DYN_TEST_BUILD_DIR:-$HERE/build}"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}
PYTHON=${PYTHON:-/usr/bin/python3}
TEST_TIMEOUT=${TEST_TIMEOUT:-90}
CYCLES=${CYCLES:-20}
VG_CYCLES=${VG_CYCLES:-3}
LOSS_RATE=${LOSS_RATE:-1}
PEER_TIMEOUT=3   # btl_usnic_peer_timeout of the linger and cycles cases
LINGER=10        # seconds the lingering parent calls MPI after its children left
# --tag-output prefixes every line with [JOB,RANK]: the mpirun's own job is
# 1, the jobs it spawns 2, 3, ...; the stats lines are told apart by it.
MPIRUN_ARGS=(--allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none --tag-output
             --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo
             --mca btl_tcp_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"}
             --mca btl_usnic_stats 15)
EXTRA_ARGS=()
# the lines of the (first) spawned job: its --tag-output tag on ORTE,
# untagged on PRRTE (see above; job_lines takes "-" for untagged)
if [ "$LAUNCHER" = orte ]; then CHILD="[2,"; else CHILD=-; fi
DYN_PIDS=()      # background jobs (ompi-server, servers) to end on exit
cleanup() {
    local p
    for p in ${DYN_PIDS[@]+"${DYN_PIDS[@]}"}; do
        kill "$p" 2> /dev/null
    done
    netns_destroy
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------
# Verdicts on a log
# ---------------------------------------------------------------------

# judge NAME LOG RC PASSLINE...: mpirun's status, no FAIL line, every PASS
# line present.  Reports a failure itself; 0 if all is well.
judge() {
    local name=$1 log=$2 rc=$3 p
    shift 3
    if [ "$rc" -eq 124 ]; then
        fail "$name" "TIMEOUT after ${TEST_TIMEOUT}s (hang?)" "$log"
    elif grep -qE '(^|<std(out|err)>: ?)FAIL ' "$log"; then
        fail "$name" "$(grep -m1 -oE 'FAIL .*' "$log")" "$log"
    elif [ "$rc" -ne 0 ]; then
        fail "$name" "exit status $rc" "$log"
    else
        for p in "$@"; do
            if ! grep -qE "(^|<stdout>: ?)$p( |:|\$)" "$log"; then
                fail "$name" "exited 0 without '$p'" "$log"
                return 1
            fi
        done
        return 0
    fi
    return 1
}

# peer_lines LOG [PREFIX]: the final-stats lines of peers of other jobs
# ("... lo] peer N of job 0x..."), only of lines starting with PREFIX (a
# --tag-output tag such as "[1," for the mpirun's own job).  The line's
# head is not required: mpirun now and then ends a long line early, puts
# another job's line after it, and tags the rest anew ("[vm ra" ...
# "[1,0]<stderr>:nk 0 lo] peer 0 of job 0x2faf000e: ..."); the part that
# names the peer is counted once either way.
peer_lines() {
    job_lines "$1" "${2:-}" | grep -E 'lo\] peer [0-9]+ of job 0x[0-9a-f]+:'
}

# job_lines LOG [PREFIX]: the lines starting with PREFIX ("-": the lines
# without a tag, a spawned job's on PRRTE).  mpirun's
# --tag-output now and then cuts a long line and tags the rest again in
# the middle: the same tag continues the line ("of job 0x449[1,0]<stderr>:
# 70011:") and is taken out; another tag starts another process's line
# ("... ack_[21,0]<stderr>:[vm:20793] btl:usnic final stats ...") and is
# split off, so one job's lines never carry another job's peers.
job_lines() {
    # a tag: [JOB,RANK]<stdout>: (mpirun), [NSPACE,RANK]<stdout>: (prun)
    awk -v p="${2:-}" -v tagre='\\[[A-Za-z0-9._-]+,[0-9]+\\]<std(out|err)>:' '
        function emit(s) {
            if (p == "-" ? s !~ "^" tagre : index(s, p) == 1) print s
        }
        {
            rest = $0; out = ""; tag = ""
            if (match(rest, "^" tagre)) {
                tag = substr(rest, 1, RLENGTH); out = tag; rest = substr(rest, RLENGTH + 1)
            }
            while (match(rest, tagre)) {
                t = substr(rest, RSTART, RLENGTH)
                out = out substr(rest, 1, RSTART - 1)
                rest = substr(rest, RSTART + RLENGTH)
                if (t != tag) { emit(out); out = t; tag = t }
            }
            emit(out rest)
        }' "$1"
}

# check_peers NAME LOG PREFIX WANT [WANT_JOBS]: exactly WANT such lines
# (from distinct jobs: exactly WANT_JOBS job ids, if given), each with an
# RTT sample; also the module's own final line with sends and receives.
# Returns 0 or sets WHY.
check_peers() {
    local log=$2 prefix=$3 want=$4 jobs=${5:-} n nj zero
    n=$(peer_lines "$log" "$prefix" | wc -l)
    if [ "$n" -ne "$want" ]; then
        WHY="$n final-stats lines of peers of other jobs from ${prefix:-the job}, want $want"
        return 1
    fi
    zero=$(peer_lines "$log" "$prefix" | grep -cE ' srtt=0us' || true)
    if [ "$zero" -ne 0 ]; then
        WHY="$zero peer(s) of other jobs without an RTT sample (srtt=0: nothing ACKed)"
        return 1
    fi
    if [ -n "$jobs" ]; then
        nj=$(peer_lines "$log" "$prefix" | grep -oE 'of job 0x[0-9a-f]+' | sort -u | wc -l)
        if [ "$nj" -ne "$jobs" ]; then
            WHY="peers from $nj distinct jobs, want $jobs"
            return 1
        fi
    fi
    if ! job_lines "$log" "$prefix" | grep -E 'btl:usnic final stats \[.* lo\]: ' |
            grep -E ' total_sends=[1-9]' | grep -qE ' total_recvs=[1-9]'; then
        WHY="no final module stats line with sends and receives from ${prefix:-the job}"
        return 1
    fi
    return 0
}

# no_peer_timeout LOG: the "peer timeout" help text must not appear
no_peer_timeout() {
    if grep -qiE 'has not acknowledged|considered dead|peer timeout' "$1"; then
        WHY="peer timeout reported: $(grep -m1 -iE 'has not acknowledged|considered dead|peer timeout' "$1")"
        return 1
    fi
    return 0
}

# ---------------------------------------------------------------------
# valgrind: definitely-lost leaks and invalid accesses in the BTL
# ---------------------------------------------------------------------
# Debian's Open MPI 4.1.4 runtime leaks on its own (about 50 definitely
# lost blocks in a spawning parent, none in the BTL), so as in
# test/run-mpi-tests.sh valgrind's exit status is not used: a record fails
# only if it is a "definitely lost" leak or an Invalid read/write/free and
# mentions btl_usnic in any frame (functions, btl_usnic_*.c, the .so).
vg_usnic_records() {
    awk '
        function flush() {
            if (n > 0 && (hdr ~ /are definitely lost in loss record/ ||
                          hdr ~ /^(Invalid (read|write|free)|Mismatched free)/) &&
                index(text, "btl_usnic") > 0) {
                bad++
                print "---- " FILENAME ": " text
            }
            n = 0; text = ""; hdr = ""
        }
        FNR == 1 { flush() }
        /^==[0-9]+==/ {
            line = $0
            sub(/^==[0-9]+== ?/, "", line)
            if (line ~ /^[ \t]*$/) { flush(); next }
            if (n++ == 0) hdr = line
            text = text "\n  " line
        }
        END { flush(); print bad + 0 " record(s) in btl_usnic"; exit bad > 0 }' "$@"
}

vg_selftest() {
    local d=$LOG_DIR/vg-selftest start
    start=$(now)
    mkdir -p "$d"
    cat > "$d/vg.1.log" <<'EOF'
==1== 64 bytes in 1 blocks are definitely lost in loss record 3 of 9
==1==    at 0x4841: malloc (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)
==1==    by 0x9376: opal_btl_usnic_endpoint_create (btl_usnic_endpoint.c:90)
==1== 
==1== 2 bytes in 1 blocks are definitely lost in loss record 1 of 9
==1==    at 0x4841: malloc (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)
==1==    by 0x5C2F: pmix_bfrops_base_value_load (in /usr/lib/libpmix.so.2)
==1== 
==1== 8 bytes in 1 blocks are indirectly lost in loss record 2 of 9
==1==    by 0x9377: opal_btl_usnic_foo (btl_usnic_module.c:1)
==1== 
EOF
    if vg_usnic_records "$d/vg.1.log" > "$d/out" ||
            ! grep -q '^1 record(s) in btl_usnic' "$d/out"; then
        fail "valgrind filter self-test" "did not flag exactly the one usnic leak" "$d/out"
    else
        ok "valgrind filter self-test ($(elapsed "$start")s)"
    fi
}

# ---------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------

build() {
    local p start all=0
    start=$(now)
    for p in spawn connect join; do
        rm -f "$BUILD_DIR/$p"
        if ! "$MPICC" -Wall -Wextra -Werror -O2 -g -o "$BUILD_DIR/$p" "$HERE/$p.c" \
                > "$LOG_DIR/build-$p.log" 2>&1; then
            fail "build $p" "$MPICC failed" "$LOG_DIR/build-$p.log"
            all=1
        fi
    done
    [ "$all" -eq 0 ] && ok "build spawn, connect, join with -Wall -Wextra -Werror ($(elapsed "$start")s)"
}

# ---------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------

# spawn_case NAME NP MODE ARG PARENT_PEERS CHILD_PEERS [CHILD_JOBS]
spawn_case() {
    local name=$1 np=$2 mode=$3 arg=$4 ppeers=$5 cpeers=$6 log start rc
    log=$LOG_DIR/${name// /_}.log
    start=$(now)
    [ -x "$BUILD_DIR/spawn" ] || { fail "$name" "spawn not built"; return; }
    run_mpi "$TEST_TIMEOUT" "$np" "$log" "$BUILD_DIR/spawn" "$mode" $arg
    rc=$?
    judge "$name" "$log" "$rc" "PASS spawn-$mode" || return
    if ! check_peers "$name" "$log" "[1," "$ppeers" 1 ||
       ! check_peers "$name" "$log" "$CHILD" "$cpeers" 1; then
        fail "$name" "$WHY" "$log"
        return
    fi
    ok "$name ($(elapsed "$start")s${DROP_NOTE:-})"
}

# CASE_PREFIX / CASE_TAG (optional): put before the names / log files of
# cycles_case and futures_case, for their runs under loss
cycles_case() {
    local name="${CASE_PREFIX:-}$CYCLES spawn/disconnect cycles, 1 child each, peer_timeout $PEER_TIMEOUT"
    local log=$LOG_DIR/${CASE_TAG:-}cycles.log start rc n attempt note=""
    start=$(now)
    for attempt in 1 2; do
        EXTRA_ARGS=(--mca btl_usnic_peer_timeout "$PEER_TIMEOUT")
        run_mpi "$TEST_TIMEOUT" 1 "$log" "$BUILD_DIR/spawn" cycles "$CYCLES"
        rc=$?
        EXTRA_ARGS=()
        # one retry, only for Open MPI's own spawn hang (README.md): a
        # child that never got out of MPI_Init; the first log is kept
        [ "$rc" -eq 124 ] && [ "$attempt" -eq 1 ] || break
        n=$(grep -oE '^\[1,0\]<stdout>: ?INFO spawn: rank 0: cycle [0-9]+ checked' "$log" | wc -l)
        grep -qE "child of cycles cycle $((n + 1)) started" "$log" && break
        mv "$log" "$LOG_DIR/${CASE_TAG:-}cycles-attempt1.log"
        note="; retried once: attempt 1 hung in cycle $((n + 1)) with the child in MPI_Init, Open MPI's spawn hang, see ${CASE_TAG:-}cycles-attempt1.log"
    done
    if [ "$rc" -eq 124 ]; then
        # say where it stopped: a child stuck in MPI_Init (before it could
        # print "started") is the Open MPI runtime's PMIx hang (README.md)
        local last
        last=$(grep -oE '^\[1,0\]<stdout>: ?INFO spawn: rank 0: cycle [0-9]+ checked' "$log" | tail -1 | grep -oE '[0-9]+ checked' | grep -oE '[0-9]+')
        last=${last:-0}
        if grep -qE "child of cycles cycle $((last + 1)) started" "$log"; then
            fail "$name" "TIMEOUT after ${TEST_TIMEOUT}s in cycle $((last + 1)): its child started (MPI_Init returned), data or disconnect hung" "$log"
        else
            fail "$name" "TIMEOUT after ${TEST_TIMEOUT}s in cycle $((last + 1)): its child never returned from MPI_Init (MPI_Comm_spawn hung)" "$log"
        fi
        return
    fi
    judge "$name" "$log" "$rc" "PASS spawn-cycles" || return
    n=$(grep -cE '^\[1,0\]<stdout>: ?INFO spawn: rank 0: cycle [0-9]+ checked' "$log")
    if [ "$n" -ne "$CYCLES" ]; then
        fail "$name" "$n cycles reported checked, want $CYCLES" "$log"
    elif ! check_peers "$name" "$log" "[1," "$CYCLES" "$CYCLES"; then
        fail "$name" "parent: $WHY (one endpoint per child ever spawned)" "$log"
    elif ! no_peer_timeout "$log"; then
        fail "$name" "$WHY" "$log"
    else
        ok "$name: parent ends with exactly $CYCLES endpoints of $CYCLES jobs ($(elapsed "$start")s$note)"
    fi
}

valgrind_case() {
    local name="$VG_CYCLES spawn/disconnect cycles, parent under valgrind"
    local log=$LOG_DIR/cycles-valgrind.log vgdir=$LOG_DIR/valgrind start rc nlogs
    start=$(now)
    if ! command -v valgrind > /dev/null && ! ensure_package valgrind; then
        fail "$name" "valgrind missing and could not be installed"
        return
    fi
    # the children are spawned natively (argv[0] is the program, not
    # valgrind); only the parent, which holds the endpoints of every
    # child, runs under valgrind.  Open MPI 4.1's runtime now and then
    # leaves a child of this slow parent in PMIx_Init (seen 1 in ~20 runs,
    # at the third spawn, with gdb: orte_init -> PMIx_Init, before any BTL
    # is opened); a timeout while the next child has not started is
    # retried once, and said so.
    local attempt retried=""
    for attempt in 1 2; do
        rm -rf "$vgdir"
        mkdir -p "$vgdir"
        run_mpi 120 1 "$log" valgrind --leak-check=full --show-leak-kinds=definite \
            --errors-for-leak-kinds=definite --keep-debuginfo=yes --num-callers=40 \
            --suppressions="$ROOT/test/mpi/valgrind.supp" \
            --log-file="$vgdir/vg.%p.log" "$BUILD_DIR/spawn" cycles "$VG_CYCLES"
        rc=$?
        [[ $rc -eq 124 && $attempt -eq 1 ]] || break
        [[ $(grep -c 'child of cycles cycle [0-9]* started' "$log") -eq $(grep -c 'cycle [0-9]* checked' "$log") ]] || break
        cp "$log" "$log.hung"
        retried="; retried once: the first run's child $(($(grep -c 'cycle [0-9]* checked' "$log") + 1)) never got through MPI_Init (Open MPI runtime), log $log.hung"
        echo "note: $name: a spawned child never started; retrying once (log $log.hung)"
    done
    judge "$name" "$log" "$rc" "PASS spawn-cycles" || return
    nlogs=$(find "$vgdir" -name 'vg.*.log' | wc -l)
    if [ "$nlogs" -ne 1 ] || ! grep -q 'LEAK SUMMARY\|All heap blocks were freed' "$vgdir"/vg.*.log; then
        fail "$name" "expected one complete valgrind log, found $nlogs" "$log"
        return
    fi
    if ! check_peers "$name" "$log" "[1," "$VG_CYCLES" "$VG_CYCLES"; then
        fail "$name" "$WHY" "$log"
        return
    fi
    if ! vg_usnic_records "$vgdir"/vg.*.log > "$LOG_DIR/valgrind-findings.txt"; then
        fail "$name" "definitely lost / invalid access in btl_usnic" "$LOG_DIR/valgrind-findings.txt"
        return
    fi
    ok "$name: no definitely lost block or invalid access in btl_usnic ($(grep -m1 -oE 'definitely lost: [0-9,]+ bytes in [0-9,]+ blocks' "$vgdir"/vg.*.log) elsewhere, Open MPI's own; $(elapsed "$start")s$retried)"
}

linger_case() {
    local name="parent calls MPI ${LINGER}s after its 2 children exited, peer_timeout $PEER_TIMEOUT"
    local log=$LOG_DIR/linger.log start rc bye
    start=$(now)
    EXTRA_ARGS=(--mca btl_usnic_peer_timeout "$PEER_TIMEOUT")
    run_mpi "$TEST_TIMEOUT" 1 "$log" "$BUILD_DIR/spawn" linger "$LINGER"
    rc=$?
    EXTRA_ARGS=()
    judge "$name" "$log" "$rc" "PASS spawn-linger" || return
    if ! grep -qE 'MPI_Iprobe calls in ([0-9]+)' "$log"; then
        fail "$name" "the parent did not report its MPI calls after the children exited" "$log"
    elif ! no_peer_timeout "$log"; then
        fail "$name" "$WHY" "$log"
    elif ! check_peers "$name" "$log" "[1," 2 1; then
        fail "$name" "$WHY" "$log"
    else
        bye=$(grep -E '^\[1,0\].*final stats \[.* lo\]: ' "$log" | grep -oE ' bye_recvs=[0-9]+' | head -1)
        ok "$name: no peer timeout ($(grep -oE '[0-9]+ MPI_Iprobe calls' "$log" | head -1),${bye:- no bye_recvs counter}; $(elapsed "$start")s)"
    fi
}

# start_name_server DIR: the name server both jobs of a pair share,
# reporting its URI in DIR/uri; sets SERVER_PID, SERVER_NAME and PAIR_RUN
# (the launcher of the pair's jobs) and EXTRA_ARGS.  In the namespace when
# NS_PREFIX is set.
#   ORTE (4.1): ompi-server (all TCP on lo); both mpiruns get
#               --ompi-server file:DIR/uri.
#   PRRTE (5.0): a persistent DVM, prte --report-uri DIR/uri; both jobs
#               go into it through DIR/prun-dvm, which runs prun
#               --dvm-uri file:DIR/uri with the suite's mpirun arguments
#               less the --mca ones (given to prte as OMPI_MCA_K=V in its
#               environment, which its ranks inherit) and --tag-output as
#               --output tag: the DVM's PMIx server holds the port names
#               (see the header: mpirun --dvm crashes).
start_name_server() {
    local dir=$1 i
    rm -f "$dir/uri"
    if [ "$LAUNCHER" = orte ]; then
        SERVER_NAME=ompi-server
        ${NS_PREFIX[@]+"${NS_PREFIX[@]}"} timeout -k 5 $((TEST_TIMEOUT + 30)) ompi-server --no-daemonize \
            ${OOB_LO[@]+"${OOB_LO[@]}"} --report-uri "$dir/uri" > "$dir/ompi-server.log" 2>&1 &
        PAIR_RUN=$MPIRUN
        EXTRA_ARGS=(--ompi-server "file:$dir/uri")
    else
        SERVER_NAME="prte (DVM)"
        local mca=() i=0
        while [ "$i" -lt "${#MPIRUN_ARGS[@]}" ]; do
            if [ "${MPIRUN_ARGS[i]}" = --mca ]; then
                mca+=("OMPI_MCA_${MPIRUN_ARGS[i + 1]}=${MPIRUN_ARGS[i + 2]}")
                i=$((i + 3))
            else
                i=$((i + 1))
            fi
        done
        ${NS_PREFIX[@]+"${NS_PREFIX[@]}"} env "${mca[@]}" timeout -k 5 $((TEST_TIMEOUT + 30)) prte --allow-run-as-root \
            --no-ready-msg --report-uri "$dir/uri" > "$dir/prte.log" 2>&1 &
        {
            echo '#!/usr/bin/env bash'
            echo '# this suite'"'"'s mpirun arguments, for prun into the DVM of one pair case'
            echo 'args=()'
            echo 'while [ $# -gt 0 ]; do'
            echo '    case $1 in'
            echo '        --mca) shift 3 ;;   # in the DVM'"'"'s environment'
            echo '        --tag-output) args+=(--output tag); shift ;;'
            echo '        -np) args+=("$@"); break ;;'
            echo '        *) args+=("$1"); shift ;;'
            echo '    esac'
            echo 'done'
            printf 'exec %s prun --dvm-uri file:%q "${args[@]}"\n' "${NS_PREFIX[*]+${NS_PREFIX[*]}}" "$dir/uri"
        } > "$dir/prun-dvm"
        chmod +x "$dir/prun-dvm"
        PAIR_RUN=$dir/prun-dvm
        EXTRA_ARGS=()
    fi
    SERVER_PID=$!
    DYN_PIDS+=("$SERVER_PID")
    for i in $(seq 100); do
        [ -s "$dir/uri" ] && return 0
        sleep 0.1
    done
    return 1
}

stop_name_server() {
    kill "$SERVER_PID" 2> /dev/null
    wait "$SERVER_PID" 2> /dev/null
}

# pair_case NAME PROGRAM NP_SERVER NP_CLIENT: two jobs, server and
# client, launched separately and sharing one name server
# (start_name_server); each side must have NP_OTHER peers of the other job
# per rank
pair_case() {
    local name=$1 prog=$2 nps=$3 npc=$4 dir start rc_s rc_c spid mpirun_saved=$MPIRUN
    dir=$LOG_DIR/${name// /_}
    mkdir -p "$dir"
    start=$(now)
    [ -x "$BUILD_DIR/$prog" ] || { fail "$name" "$prog not built"; return; }
    # the keys' verbose lines (KEYS_LINE=1): exported before the name
    # server starts, so that PRRTE's DVM, whose environment its ranks
    # inherit, has it too (mpirun passes it on by itself)
    [ "${KEYS_LINE:-0}" = 1 ] && export OMPI_MCA_btl_usnic_verbose=5
    if ! start_name_server "$dir"; then
        fail "$name" "$SERVER_NAME wrote no URI" "$(ls "$dir"/ompi-server.log "$dir"/prte.log 2> /dev/null | head -1)"
        unset OMPI_MCA_btl_usnic_verbose
        stop_name_server
        EXTRA_ARGS=()
        return
    fi
    MPIRUN=$PAIR_RUN
    rm -f "$dir/port" # a rerun's client must not read the last run's port
    run_mpi "$TEST_TIMEOUT" "$nps" "$dir/server.log" "$BUILD_DIR/$prog" server "$dir/port" &
    spid=$!
    DYN_PIDS+=("$spid")
    run_mpi "$TEST_TIMEOUT" "$npc" "$dir/client.log" "$BUILD_DIR/$prog" client "$dir/port"
    rc_c=$?
    wait "$spid"
    rc_s=$?
    MPIRUN=$mpirun_saved
    unset OMPI_MCA_btl_usnic_verbose
    EXTRA_ARGS=()
    stop_name_server
    judge "$name (server)" "$dir/server.log" "$rc_s" "PASS $prog-server" || return
    judge "$name (client)" "$dir/client.log" "$rc_c" "PASS $prog-client" || return
    # each log holds one job's lines: tagged [1,r] by mpirun; prun tags
    # the first line of each chunk of output only ([NSPACE,r]), so there
    # every line of the log is the job's
    local own="[1,"
    [ "$LAUNCHER" = orte ] || own=""
    if ! check_peers "$name" "$dir/server.log" "$own" $((nps * npc)) 1; then
        fail "$name" "server: $WHY" "$dir/server.log"
    elif ! check_peers "$name" "$dir/client.log" "$own" $((nps * npc)) 1; then
        fail "$name" "client: $WHY" "$dir/client.log"
    elif [ "${KEYS_LINE:-0}" = 1 ] && ! keys_said "$dir/server.log" "$dir/client.log"; then
        fail "$name" "$WHY" "$dir/client.log"
    else
        ok "$name ($(elapsed "$start")s${DROP_NOTE:-})"
    fi
}

# keys_said LOG...: each job said how its pairs with the other job are
# keyed (README.txt, Security).  Open MPI 4.1's mpiruns give each job its
# own launcher's secret, so the pairs across them have X25519 alone;
# PRRTE gives none.
keys_said() {
    local log want
    if [ "$LAUNCHER" = orte ]; then
        want="keyed by X25519 alone"
    else
        want="launcher's secret: none"
    fi
    for log in "$@"; do
        if ! grep -q "$want" "$log"; then
            WHY="$(basename "$log"): no verbose line \"$want\" about the keys of pairs across jobs"
            return 1
        fi
    done
}

futures_case() {
    local name="${CASE_PREFIX:-}mpi4py.futures MPIPoolExecutor, 2 spawned workers, 200-task map"
    local log=$LOG_DIR/${CASE_TAG:-}futures.log start rc
    start=$(now)
    if ! "$PYTHON" -c 'import mpi4py.futures' 2> /dev/null; then
        ensure_package python3-mpi4py
        if ! "$PYTHON" -c 'import mpi4py.futures' 2> "$LOG_DIR/mpi4py-import.log"; then
            fail "$name" "mpi4py not importable by $PYTHON (python3-mpi4py)" "$LOG_DIR/mpi4py-import.log"
            return
        fi
    fi
    run_mpi "$TEST_TIMEOUT" 1 "$log" "$PYTHON" "$HERE/futures_map.py" 2
    rc=$?
    judge "$name" "$log" "$rc" "PASS futures-map" || return
    if ! check_peers "$name" "$log" "[1," 2 1 || ! check_peers "$name" "$log" "$CHILD" 2 1; then
        fail "$name" "$WHY" "$log"
    else
        ok "$name ($(elapsed "$start")s)"
    fi
}

# under_loss NAME CASE ARGS...: the case in the namespace; DROP_NOTE
# reports the datagrams the rule dropped during it, which must be > 0.
# A short case sends a few hundred datagrams (join: 2-7 dropped per run,
# now and then none): a run the rule happened to spare tested nothing,
# so it is run again, up to 3 times, before that counts as a failure.
under_loss() {
    local name=$1 before after
    shift
    DROP_NOTE=""
    local p0=$PASSED f0=$FAILED out dropped np nf attempt
    for attempt in 1 2 3; do
        before=$(netns_udp_dropped)
        # run the case but hold back its ok until the drop count is known
        out=$("$@")
        after=$(netns_udp_dropped)
        dropped=$(( ${after:-0} - ${before:-0} ))
        np=$(grep -c '^ok ' <<< "$out")
        nf=$(grep -c '^FAIL ' <<< "$out")
        if [ "$nf" -gt 0 ] || [ "$dropped" -gt 0 ] || [ "$attempt" -eq 3 ]; then
            break
        fi
        echo "     $name: the ${LOSS_RATE}% rule dropped no datagram in run $attempt; run again"
    done
    printf '%s\n' "$out" | sed -E "s/^(ok   .*)\)$/\1, $dropped UDP datagrams dropped)/"
    PASSED=$((p0 + np))
    FAILED=$((f0 + nf))
    if [ "$nf" -eq 0 ] && [ "$dropped" -le 0 ]; then
        fail "$name" "the ${LOSS_RATE}% rule dropped no datagram in 3 runs: nothing was tested under loss"
        PASSED=$((PASSED - np))
    fi
}

# ---------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------

total_start=$(now)
echo "dynamic processes over usnic,self (lo); logs in $LOG_DIR"
vg_selftest
build

spawn_case "MPI_Comm_spawn, 1 parent, 2 children" 1 basic 2 2 2
spawn_case "MPI_Comm_spawn, 2 parents (root 0), 2 children" 2 basic 2 4 4
spawn_case "MPI_Comm_spawn_multiple, 2 parents, 1+2 children" 2 multiple "" 6 6
cycles_case
valgrind_case
linger_case
KEYS_LINE=1 pair_case "MPI_Comm_connect/accept, 2+2 ranks, separate mpiruns (keys across jobs said)" connect 2 2
pair_case "MPI_Comm_join, 1+1 ranks, separate mpiruns" join 1 1
futures_case

if ! netns_create; then
    fail "UDP loss cases" "cannot create a network namespace with nftables (need root, iproute2, nftables); not run"
elif ! netns_set_udp_loss "$LOSS_RATE"; then
    fail "UDP loss cases" "cannot install the ${LOSS_RATE}% drop rule; not run"
else
    trap cleanup EXIT   # netns_create replaced these
    trap 'exit 130' INT TERM
    MPIRUN_NS=$BUILD_DIR/mpirun-in-netns
    printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$NETNS" "$(command -v "$MPIRUN")" > "$MPIRUN_NS"
    chmod +x "$MPIRUN_NS"
    MPIRUN_HOST=$MPIRUN
    MPIRUN=$MPIRUN_NS
    NS_PREFIX=(ip netns exec "$NETNS")
    L="at ${LOSS_RATE}% UDP loss:"
    under_loss "$L spawn 1 parent" spawn_case "$L MPI_Comm_spawn, 1 parent, 2 children" 1 basic 2 2 2
    under_loss "$L spawn 2 parents" spawn_case "$L MPI_Comm_spawn, 2 parents, 2 children" 2 basic 2 4 4
    under_loss "$L spawn_multiple" spawn_case "$L MPI_Comm_spawn_multiple, 2 parents, 1+2 children" 2 multiple "" 6 6
    under_loss "$L connect/accept" pair_case "$L MPI_Comm_connect/accept, 2+2 ranks" connect 2 2
    under_loss "$L join" pair_case "$L MPI_Comm_join, 1+1 ranks" join 1 1
    CASE_PREFIX="$L " CASE_TAG=loss- under_loss "$L cycles" cycles_case
    CASE_PREFIX="$L " CASE_TAG=loss- under_loss "$L mpi4py.futures" futures_case
    MPIRUN=$MPIRUN_HOST
    NS_PREFIX=()
    echo "(the ${LOSS_RATE}% rule dropped $(netns_udp_dropped) UDP datagrams in all)"
fi

echo "total time $(elapsed "$total_start")s, logs in $LOG_DIR"
finish
