#!/usr/bin/env bash
#
# Real MPI applications over the usnic BTL: LAMMPS, HPC Challenge,
# NetPIPE and a set of mpi4py programs, run with
#
#   mpirun --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo
#
# on this host.  Every run is checked against the application's own notion
# of a correct result AND against the same run over "--mca btl vader,self" (sm,self on Open MPI 5)
# (see README.md beside this file for what is compared and the tolerances).
# Then the same clients run over usnic in a private network namespace whose
# nftables rule drops LOSS_RATE% of all UDP datagrams, and must still give
# the same results.
#
#   bash test/clients/run-client-tests.sh
#
# Environment:
#   USNIC_WIRE       ofi | socket | auto: --mca btl_usnic_wire on every run
#                    over usnic (test/lib.sh); unset: the plugin's default
#   LOSS_RATE        percent of UDP datagrams dropped in the namespace (1);
#                    0 skips the namespace part (it then counts as a FAIL,
#                    never as a pass)
#   CLIENT_LOG_DIR   logs and work directories (test/clients/logs)
#   MPIRUN           launcher (mpirun)
#
# Output: one "ok   ..." or "FAIL ..." line per check, the HPCC
# latency/bandwidth figures, then "N passed, N failed"; exit status 1 if
# anything failed.  Takes about 3-4 minutes on 2 shared cores.

set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LOSS_RATE=${LOSS_RATE:-1}
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"  # ensure_package, SHM_BTL, OVERSUBSCRIBE, OOB_LO, series_dir
LOG_DIR=${CLIENT_LOG_DIR:-$(series_dir "$HERE/logs")}
MPIRUN=${MPIRUN:-mpirun}
PYTHON=/usr/bin/python3     # Debian's python3-mpi4py lives there, not in a pyenv

# Seconds per mpirun before it counts as a hang.
T_LAMMPS=120
T_HPCC=240
T_NETPIPE=180
T_PY=180

# NetPIPE: message sizes 5 B ... 4194305 B (4 MiB + 1), 41 sizes, 10
# round trips each; the integrity mode checks every one of them.
NP_UPPER=4194307
NP_SIZES=41
NP_REPEATS=10

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$LOG_DIR" || exit 2
LOG_DIR=$(cd "$LOG_DIR" && pwd)
rm -rf "$LOG_DIR"/lammps-* "$LOG_DIR"/hpcc-* "$LOG_DIR"/netpipe-* "$LOG_DIR"/mpi4py-* \
       "$LOG_DIR"/apt-get.log "$LOG_DIR"/python-import.log

PASSED=0
FAILED=0
START_ALL=$(date +%s)
print_wire

# ---------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

ok() {            # message
    printf 'ok   %s\n' "$1"
    PASSED=$((PASSED + 1))
}

fail() {          # message [logfile...]
    printf 'FAIL %s\n' "$1"
    shift
    local f
    for f in "$@"; do
        [ -s "$f" ] || continue
        echo "    --- last 30 lines of $f ---"
        tail -n 30 "$f" | sed 's/^/    | /'
    done
    FAILED=$((FAILED + 1))
}

info() { printf '     %s\n' "$1"; }

# ---------------------------------------------------------------------
# Running jobs
# ---------------------------------------------------------------------

NETNS=""        # set by netns_create; jobs run inside it when IN_NETNS=1
STATS_EVERY=10
IN_NETNS=0
JOB_SECS=0

# run_job LOG WORKDIR LIMIT BTL NP CMD...: runs CMD under mpirun in
# WORKDIR (standard output to LOG, standard error to LOG.err) with the standard arguments for BTL, inside the
# loss namespace when IN_NETNS=1.  Returns mpirun's status, 124 on timeout.
# Runs over usnic print the BTL's counters every STATS_EVERY (10) s and at
# finalize (btl_usnic_stats), so a failure's log carries them.
run_job() {
    local log=$1 dir=$2 limit=$3 btl=$4 np=$5
    shift 5
    local args=(--allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none
                --mca pml ob1 --mca btl "$btl" ${OOB_LO[@]+"${OOB_LO[@]}"})
    if [[ $btl == *usnic* ]]; then
        args+=(--mca btl_usnic_if_include lo --mca btl_usnic_stats "$STATS_EVERY" ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"})
    fi
    local pre=()
    [ "$IN_NETNS" = 1 ] && pre=(ip netns exec "$NETNS")
    local start rc
    start=$(now)
    mkdir -p "$dir"
    (
        echo "+ (cd $dir; ${pre[*]+${pre[*]} }$MPIRUN ${args[*]} -np $np $*)"
        cd "$dir" && exec timeout -k 15 "$limit" ${pre[@]+"${pre[@]}"} "$MPIRUN" "${args[@]}" -np "$np" "$@"
    ) > "$log" 2> "$log.err" < /dev/null
    rc=$?
    [ "$rc" -eq 137 ] && rc=124
    JOB_SECS=$(elapsed "$start")
    return "$rc"
}

# rc_problem RC LIMIT: empty if RC is 0, else a reason
rc_problem() {
    if [ "$1" -eq 124 ]; then
        echo "TIMEOUT after ${2}s (hang?)"
    elif [ "$1" -ne 0 ]; then
        echo "exit status $1"
    fi
}

# usnic_counters LOG NP: the BTL's final counters summed over all ranks
# ("sends=... resends=..."), or a reason and status 1 if fewer than NP
# ranks printed them or nothing was sent (then the traffic did not go
# through the usnic BTL at all).
usnic_counters() {
    awk -v np="$2" '
        /btl:usnic final stats/ {
            n++
            for (i = 1; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[2] ~ /^[0-9]+$/) {
                    if (kv[1] == "max_sent_window") { if (kv[2] > w) w = kv[2] }
                    else c[kv[1]] += kv[2]
                }
            }
        }
        END {
            if (n < np || c["total_sends"] == 0) {
                printf "usnic final stats from %d of %d ranks, %d segments sent", n, np, c["total_sends"]
                exit 1
            }
            printf "usnic counters (%d ranks): sends=%d resends=%d (timer %d, dup-ACK %d) " \
                   "already-delivered=%d dup_recvs=%d invalid_recvs=%d recv_errors=%d max_window=%d",
                   n, c["total_sends"], c["resends"], c["timeout_retrans"], c["fast_retrans"],
                   c["oow_low_recvs"], c["dup_recvs"], c["invalid_recvs"], c["recv_errors"], w
        }' "$1" "$1.err"
}

# usnic_verdict NAME LOG NP: prints the counters as info; FAIL if missing
usnic_verdict() {
    local line
    if line=$(usnic_counters "$2" "$3"); then
        info "$1: $line"
        return 0
    fi
    fail "$1: $line" "$2" "$2.err"
    return 1
}

# ---------------------------------------------------------------------
# Dependencies (installed by scripts/install-deps.sh; installed here too
# if missing, a client that still cannot be found is a FAIL)
# ---------------------------------------------------------------------


find_cmd() {        # name... : first one on PATH
    local c
    for c in "$@"; do
        command -v "$c" && return 0
    done
    return 1
}

LMP="" HPCC="" NETPIPE="" HAVE_PY=0
check_deps() {
    local start
    start=$(now)
    LMP=$(find_cmd lmp lmp_openmpi lmp_stable) ||
        { ensure_package lammps; LMP=$(find_cmd lmp lmp_openmpi lmp_stable); }
    HPCC=$(find_cmd hpcc) || { ensure_package hpcc; HPCC=$(find_cmd hpcc); }
    # Debian's netpipe-openmpi installs NPopenmpi; upstream calls it NPmpi
    NETPIPE=$(find_cmd NPmpi NPopenmpi) ||
        { ensure_package netpipe-openmpi; NETPIPE=$(find_cmd NPmpi NPopenmpi); }
    if ! "$PYTHON" -c 'import mpi4py, numpy' 2> /dev/null; then
        ensure_package python3-mpi4py
        ensure_package python3-numpy
    fi
    "$PYTHON" -c 'import mpi4py, numpy' 2> "$LOG_DIR/python-import.log" && HAVE_PY=1
    local missing=()
    [ -n "$LMP" ] || missing+=("LAMMPS (lammps: lmp)")
    [ -n "$HPCC" ] || missing+=("HPC Challenge (hpcc)")
    [ -n "$NETPIPE" ] || missing+=("NetPIPE (netpipe-openmpi: NPopenmpi)")
    [ "$HAVE_PY" = 1 ] || missing+=("mpi4py/numpy for $PYTHON (python3-mpi4py, python3-numpy)")
    if [ ${#missing[@]} -gt 0 ]; then
        fail "clients installed: missing ${missing[*]}" "$LOG_DIR/apt-get.log" "$LOG_DIR/python-import.log"
    else
        ok "clients installed: $LMP, $HPCC, $NETPIPE, $PYTHON with mpi4py $("$PYTHON" -c 'import mpi4py; print(mpi4py.__version__)') ($(elapsed "$start")s)"
    fi
}

# ---------------------------------------------------------------------
# LAMMPS
# ---------------------------------------------------------------------
#
# Correct result: the run ends "for 500 steps with 4000 atoms" without
# ERROR or lost atoms, total energy (NVE) stays within 1% of its start,
# and every thermo value is within 1e-6 (relative, or absolute below 1) of
# a 1-rank run, which sends no message at all.  Rounding differs between
# decompositions and molecular dynamics amplifies it (about 1e-15 at step 0,
# 1e-10 by step 500 here), so 1e-6 leaves four orders of margin, while a
# lost, stale or corrupted ghost atom or migration shows up as a jump in
# energy or pressure of order 1 or more.
#
# Versus vader: the thermo table must be bit-identical (all 17 digits).
# Same rank count => same processor grid and domain decomposition; LAMMPS's
# ghost exchange has fixed partners and order, and MPI_Allreduce
# (coll/tuned) picks its algorithm by communicator and message size only,
# so the floating-point operations and their order are the same whatever
# carries the bytes.  Any difference means different data arrived.

LAMMPS_IN=$HERE/in.lj-melt
LAMMPS_STEPS=500
LAMMPS_ATOMS=4000

thermo_table() {    # screen file -> rows of the thermo table
    awk '/^ *Step /{ f = 1; next } /^Loop time/{ f = 0 } f && $1 ~ /^[0-9]+$/' "$1" 2> /dev/null
}

# lammps_self_check SCREEN SERIAL_SCREEN: empty if fine, else the reason
lammps_self_check() {
    local screen=$1 ref=$2 rows
    if [ ! -s "$screen" ]; then echo "no LAMMPS output"; return; fi
    if grep -q -E 'ERROR|Lost atoms' "$screen"; then
        grep -m1 -E 'ERROR|Lost atoms' "$screen"; return
    fi
    if ! grep -q "^Loop time of .* for $LAMMPS_STEPS steps with $LAMMPS_ATOMS atoms" "$screen"; then
        echo "no 'Loop time ... $LAMMPS_STEPS steps with $LAMMPS_ATOMS atoms' line"; return
    fi
    rows=$(thermo_table "$screen" | wc -l)
    if [ "$rows" -ne $((LAMMPS_STEPS / 25 + 1)) ]; then
        echo "$rows thermo rows, expected $((LAMMPS_STEPS / 25 + 1))"; return
    fi
    # columns: step temp pe ke etotal press atoms
    thermo_table "$screen" | awk -v atoms=$LAMMPS_ATOMS '
        NR == 1 { e0 = $5 }
        { d = ($5 - e0) / e0; if (d < 0) d = -d; if (d > dmax) dmax = d
          if ($7 != atoms) { printf "step %s has %s atoms\n", $1, $7; bad = 1; exit } }
        END { if (!bad && dmax > 0.01) printf "total energy drifted by %.3g (relative) > 1%%\n", dmax }'
    [ -n "$ref" ] || return
    paste -d' ' <(thermo_table "$screen") <(thermo_table "$ref") | awk '
        { for (i = 1; i <= 7; i++) {
              a = $i; b = $(i + 7); d = a - b; if (d < 0) d = -d
              s = (b < 0 ? -b : b); if (s < 1) s = 1
              if (d / s > worst) { worst = d / s; where = "step " $1 " column " i }
          } }
        END { if (worst > 1e-6) printf "differs from the 1-rank run by %.3g at %s (tolerance 1e-6)\n", worst, where }'
}

LAMMPS_SERIAL=""
lammps_serial() {
    local dir=$LOG_DIR/lammps-serial rc why
    [ -n "$LMP" ] || { fail "lammps 1-rank reference: lmp not installed"; return; }
    run_job "$LOG_DIR/lammps-serial.log" "$dir" "$T_LAMMPS" self 1 \
        "$LMP" -in "$LAMMPS_IN" -log none -echo none -screen "$dir/screen"
    rc=$?
    why=$(rc_problem $rc $T_LAMMPS)
    [ -n "$why" ] || why=$(lammps_self_check "$dir/screen" "")
    if [ -n "$why" ]; then
        fail "lammps 1-rank reference (${JOB_SECS}s): $why" "$LOG_DIR/lammps-serial.log" "$LOG_DIR/lammps-serial.log.err" "$dir/screen"
        return
    fi
    LAMMPS_SERIAL=$dir/screen
    ok "lammps 1-rank reference: $LAMMPS_STEPS steps, $LAMMPS_ATOMS atoms, energy conserved (${JOB_SECS}s)"
}

# lammps_run TAG BTL NP [VADER_SCREEN]: one run, checked; with a vader
# screen file also compared with it bit for bit
lammps_run() {
    local btl=$2 np=$3 vref=${4:-} dir=$LOG_DIR/lammps-$1 rc why
    local name="lammps $np ranks over $btl"
    [ "$IN_NETNS" = 1 ] && name="$name, ${LOSS_RATE}% UDP loss"
    [ -n "$LMP" ] || { fail "$name: lmp not installed"; return 1; }
    run_job "$dir.log" "$dir" "$T_LAMMPS" "$btl" "$np" \
        "$LMP" -in "$LAMMPS_IN" -log none -echo none -screen "$dir/screen"
    rc=$?
    why=$(rc_problem $rc $T_LAMMPS)
    [ -n "$why" ] || why=$(lammps_self_check "$dir/screen" "$LAMMPS_SERIAL")
    [ -n "$why" ] || [ -n "$LAMMPS_SERIAL" ] || why="no 1-rank reference to compare with"
    if [ -n "$why" ]; then
        fail "$name (${JOB_SECS}s): $why" "$dir.log" "$dir.log.err" "$dir/screen"
        return 1
    fi
    ok "$name: correct, thermo within 1e-6 of the 1-rank run (${JOB_SECS}s)"
    if [[ $btl == *usnic* ]]; then
        usnic_verdict "$name" "$dir.log" "$np" || return 1
    fi
    [ -n "$vref" ] || return 0
    if [ ! -s "$vref" ]; then
        fail "$name = $SHM_BTL: the $SHM_BTL run failed, nothing to compare with"
    elif cmp -s <(thermo_table "$dir/screen") <(thermo_table "$vref"); then
        ok "$name = $SHM_BTL: thermo table bit-identical ($(thermo_table "$vref" | wc -l) rows x 7 columns, %.17g)"
    else
        diff <(thermo_table "$vref") <(thermo_table "$dir/screen") > "$dir.diff"
        fail "$name = $SHM_BTL: thermo output differs from the $SHM_BTL run (< $SHM_BTL, > usnic)" "$dir.diff"
    fi
}

# ---------------------------------------------------------------------
# HPC Challenge
# ---------------------------------------------------------------------
#
# Correct result (hpccoutf.txt): HPCC's own verdicts - the summary's
# Success=1, the HPL scaled residual "PASSED" (threshold 16), every PTRANS
# row "PASSED", RandomAccess (MPI, Star, Single, both generators) with 0
# errors (stricter than HPCC's 1% allowance: the default algorithm does not
# race, so any error is a lost or corrupted update), every "Node(s) with
# error" 0, STREAM "Solution Validates", MPIFFT max|x-x0| below HPCC's
# bound 16 * eps * ln(N).
# Versus vader: the numerical results that do not depend on timing are
# equal as printed (HPL residual and norms, FFT error, RandomAccess errors
# and table sizes, PTRANS residual): the inputs come from fixed seeds and
# the same process grid computes them in the same order.

HPCC_FIELDS="HPL_N HPL_RnormI HPL_Anorm1 HPL_AnormI HPL_Xnorm1 HPL_XnormI HPL_BnormI
PTRANS_n PTRANS_residual MPIRandomAccess_N MPIRandomAccess_Errors MPIRandomAccess_LCG_N
MPIRandomAccess_LCG_Errors RandomAccess_N MPIFFT_N MPIFFT_maxErr FFT_N"

# hpcc_input P Q > hpccinf.txt
hpcc_input() {
    sed -e "s/@P@/$1/" -e "s/@Q@/$2/" "$HERE/hpccinf.txt.in"
}

hpcc_self_check() {  # hpccoutf.txt: empty if fine, else the reason
    local f=$1
    [ -s "$f" ] || { echo "no hpccoutf.txt"; return; }
    grep -q '^End of HPC Challenge tests' "$f" || { echo "hpccoutf.txt is incomplete"; return; }
    awk '
        function bad(msg) { if (!why) why = msg }
        /^Success=/                       { success = substr($0, 9) }
        /\|\|Ax-b\|\|_oo.*PASSED *$/       { hpl_pass++ }
        /\|\|Ax-b\|\|_oo.*FAILED/          { bad("HPL residual check FAILED: " $0) }
        /^(WALL|CPU) .* PASSED /           { ptrans_pass++ }
        /^(WALL|CPU) .* FAILED /           { bad("PTRANS FAILED: " $0) }
        /^Found [0-9]+ errors in/          { ra++; if ($2 != 0) bad("RandomAccess: " $0) }
        /^Node\(s\) with error/            { nodes++; if ($4 != 0) bad($0) }
        /Solution Validates/               { stream++ }
        /^MPIFFT_maxErr=/                  { fft_err = substr($0, 15) + 0; have_fft = 1 }
        /^MPIFFT_N=/                       { fft_n = substr($0, 10) + 0 }
        /^HPL_dMACH_EPS=/                  { eps = substr($0, 15) + 0 }
        /^(MPIRandomAccess|MPIRandomAccess_LCG)_Errors=/ { split($0, kv, "="); if (kv[2] != 0) bad($0) }
        END {
            if (success != "1") bad("Success=" success " in the summary")
            if (hpl_pass < 1) bad("no HPL residual PASSED line")
            if (ptrans_pass < 1) bad("no PTRANS PASSED row")
            if (ra < 4) bad("only " ra " RandomAccess verifications (expected 4)")
            if (nodes < 10) bad("only " nodes " \"Node(s) with error\" lines")
            if (stream < 1) bad("STREAM did not validate")
            if (!have_fft || fft_n < 2 || eps <= 0) bad("no MPIFFT result")
            else if (fft_err >= 16 * eps * log(fft_n))
                bad(sprintf("MPIFFT max error %g >= 16*eps*ln(%d) = %g", fft_err, fft_n, 16 * eps * log(fft_n)))
            if (why) print why
        }' "$f"
}

hpcc_fields() {      # hpccoutf.txt -> "field=value" lines compared with vader
    local k
    for k in $HPCC_FIELDS; do
        grep -m1 "^$k=" "$1" || echo "$k=(missing)"
    done
}

# hpcc_figures LABEL FILE: the latency/bandwidth results for the report
hpcc_figures() {
    awk -v label="$1" -F= '
        { v[$1] = $2 }
        END {
            printf "     %s PingPong   latency min/avg/max %.2f / %.2f / %.2f us, bandwidth min/avg/max %.1f / %.1f / %.1f MB/s\n",
                label, v["MinPingPongLatency_usec"], v["AvgPingPongLatency_usec"], v["MaxPingPongLatency_usec"],
                v["MinPingPongBandwidth_GBytes"] * 1000, v["AvgPingPongBandwidth_GBytes"] * 1000,
                v["MaxPingPongBandwidth_GBytes"] * 1000
            printf "     %s RandomRing latency %.2f us, bandwidth %.1f MB/s; NaturalRing latency %.2f us, bandwidth %.1f MB/s\n",
                label, v["RandomlyOrderedRingLatency_usec"], v["RandomlyOrderedRingBandwidth_GBytes"] * 1000,
                v["NaturallyOrderedRingLatency_usec"], v["NaturallyOrderedRingBandwidth_GBytes"] * 1000
        }' "$2"
}

FIGURES=$LOG_DIR/hpcc-figures.txt
: > "$FIGURES"

# hpcc_run TAG BTL NP [VADER_OUT]
hpcc_run() {
    local btl=$2 np=$3 vref=${4:-} dir=$LOG_DIR/hpcc-$1 rc why p q
    local name="hpcc $np ranks over $btl"
    [ "$IN_NETNS" = 1 ] && name="$name, ${LOSS_RATE}% UDP loss"
    [ -n "$HPCC" ] || { fail "$name: hpcc not installed"; return 1; }
    case $np in 2) p=1 q=2 ;; 4) p=2 q=2 ;; *) p=1 q=$np ;; esac
    mkdir -p "$dir"
    hpcc_input $p $q > "$dir/hpccinf.txt"
    run_job "$dir.log" "$dir" "$T_HPCC" "$btl" "$np" "$HPCC"
    rc=$?
    why=$(rc_problem $rc $T_HPCC)
    [ -n "$why" ] || why=$(hpcc_self_check "$dir/hpccoutf.txt")
    if [ -n "$why" ]; then
        fail "$name (${JOB_SECS}s): $why" "$dir.log" "$dir.log.err" "$dir/hpccoutf.txt"
        return 1
    fi
    ok "$name: HPL, PTRANS, RandomAccess, FFT, DGEMM, STREAM verified, Success=1 (${JOB_SECS}s)"
    hpcc_figures "$name:" "$dir/hpccoutf.txt" >> "$FIGURES"
    if [[ $btl == *usnic* ]]; then
        usnic_verdict "$name" "$dir.log" "$np" || return 1
    fi
    [ -n "$vref" ] || return 0
    if [ ! -s "$vref" ]; then
        fail "$name = $SHM_BTL: the $SHM_BTL run failed, nothing to compare with"
    elif cmp -s <(hpcc_fields "$dir/hpccoutf.txt") <(hpcc_fields "$vref"); then
        ok "$name = $SHM_BTL: $(echo $HPCC_FIELDS | wc -w) timing-independent results equal (HPL_RnormI=$(grep -m1 '^HPL_RnormI=' "$vref" | cut -d= -f2), MPIFFT_maxErr=$(grep -m1 '^MPIFFT_maxErr=' "$vref" | cut -d= -f2))"
    else
        diff <(hpcc_fields "$vref") <(hpcc_fields "$dir/hpccoutf.txt") > "$dir.diff"
        fail "$name = $SHM_BTL: results differ from the $SHM_BTL run (< $SHM_BTL, > usnic)" "$dir.diff"
    fi
}

# ---------------------------------------------------------------------
# NetPIPE
# ---------------------------------------------------------------------
#
# -i is NetPIPE's integrity mode (not -I): the sender fills every message
# with 0,1,2,... and both sides compare every word after each receive; a
# mismatch prints "Integrity check failed" and exits.  -n fixes the round
# trips per size, -u bounds the size.  Two variants: -I (receive buffers
# walk through a 10 MB pool, so a receive that leaves its buffer untouched
# cannot pass by finding the pattern from the previous message there) and
# -a -2 (pre-posted receives, both directions at once).
# Correct result: exit 0, no failure, all $NP_SIZES sizes "Integrity check
# passed" up to 4 MiB + 1.  Versus vader: the same list of verified sizes.

# np_sizes LOG: the verified sizes.  NetPIPE reports on standard error,
# where rank 1's usnic counters may land inside rank 0's "N: SIZE bytes
# ... --> Integrity check passed" line: counter lines are cut out first.
# With Open MPI 5 the "N: SIZE bytes ... -->" of a line and its verdict
# may even land in different streams, so sizes and verdicts are counted
# apart: np_sizes lists the sizes run (sorted: which stream a line lands
# in, and so its place in the concatenation, varies from run to run),
# np_passes counts the verdicts.
np_sizes() {
    cat "$1" "$1.err" 2> /dev/null |
        perl -0pe 's/\[[^\]\n]*\] btl:usnic \w+ stats[^\n]*\n//g' |
        perl -ne 'print "$1\n" while /\b(\d+) bytes +\d+ times -->/g' | sort -n
}
np_passes() {
    cat "$1" "$1.err" 2> /dev/null | grep -o 'Integrity check passed' | wc -l
}

# netpipe_run TAG BTL [VADER_LOG] -- NetPIPE options
netpipe_run() {
    local btl=$2 vref=$3 dir=$LOG_DIR/netpipe-$1 rc why n
    shift 4
    local name="netpipe $* over $btl"
    [ "$IN_NETNS" = 1 ] && name="$name, ${LOSS_RATE}% UDP loss"
    [ -n "$NETPIPE" ] || { fail "$name: NetPIPE not installed"; return 1; }
    # counters only at the end: a periodic line from rank 1 can split one
    # of rank 0's result lines across the two output streams
    STATS_EVERY=3600 run_job "$dir.log" "$dir" "$T_NETPIPE" "$btl" 2 \
        "$NETPIPE" "$@" -n $NP_REPEATS -u $NP_UPPER -o "$dir/np.out"
    rc=$?
    why=$(rc_problem $rc $T_NETPIPE)
    n=$(np_sizes "$dir.log" | wc -l)
    if grep -q 'Integrity check failed' "$dir.log" "$dir.log.err"; then
        why="data integrity error: $(cat "$dir.log" "$dir.log.err" | grep -m1 'Integrity check failed')"
    elif [ -z "$why" ] && [ "$n" -ne $NP_SIZES ]; then
        why="$n sizes run, expected $NP_SIZES"
    elif [ -z "$why" ] && [ "$(np_passes "$dir.log")" -ne "$n" ]; then
        why="$(np_passes "$dir.log") integrity checks passed for $n sizes"
    elif [ -z "$why" ] && [ "$(np_sizes "$dir.log" | tail -n 1)" -lt 4194304 ]; then
        why="largest verified size $(np_sizes "$dir.log" | tail -n 1) < 4 MiB"
    fi
    if [ -n "$why" ]; then
        fail "$name (${JOB_SECS}s): $why" "$dir.log" "$dir.log.err"
        return 1
    fi
    ok "$name: integrity check passed for all $n sizes, 5 B .. $(np_sizes "$dir.log" | tail -n 1) B (${JOB_SECS}s)"
    if [[ $btl == *usnic* ]]; then
        usnic_verdict "$name" "$dir.log" 2 || return 1
    fi
    [ "$vref" != - ] || return 0
    if [ "$(np_sizes "$vref" | wc -l)" -eq 0 ]; then
        fail "$name = $SHM_BTL: the $SHM_BTL run failed, nothing to compare with"
    elif cmp -s <(np_sizes "$dir.log") <(np_sizes "$vref"); then
        ok "$name = $SHM_BTL: the same $n sizes verified"
    else
        diff <(np_sizes "$vref") <(np_sizes "$dir.log") > "$dir.diff"
        fail "$name = $SHM_BTL: verified sizes differ (< $SHM_BTL, > usnic)" "$dir.diff"
    fi
}

# ---------------------------------------------------------------------
# mpi4py
# ---------------------------------------------------------------------
#
# mpi4py_checks.py checks every value it receives and prints "PASS
# <section> digest=..." per section (pickle, buffer, coll, win) and exits
# non-zero on a mismatch.  Versus vader: the digests (hashes of all data
# received; integers and exactly representable doubles) must be equal.
# On Open MPI 4.1 "--mca osc pt2pt" puts the one-sided window section on
# ob1 and thus on the BTL (Debian disables osc/pt2pt by default; 4.1's
# osc/rdma cannot use a BTL without RDMA), for both BTLs alike.  5.0 has
# no osc/pt2pt: its osc/rdma takes MPI.Win.Create over any BTL (OSC_ARGS
# in test/lib.sh).

PY_SECTIONS=4

py_digests() { grep -a -E '^PASS [a-z]+ digest=' "$1" 2> /dev/null; }

# mpi4py_run TAG BTL NP [VADER_LOG]
mpi4py_run() {
    local btl=$2 np=$3 vref=${4:-} dir=$LOG_DIR/mpi4py-$1 rc why
    local name="mpi4py $np ranks over $btl"
    [ "$IN_NETNS" = 1 ] && name="$name, ${LOSS_RATE}% UDP loss"
    [ "$HAVE_PY" = 1 ] || { fail "$name: mpi4py/numpy not installed for $PYTHON"; return 1; }
    run_job "$dir.log" "$dir" "$T_PY" "$btl" "$np" ${OSC_ARGS[@]+"${OSC_ARGS[@]}"} \
        "$PYTHON" "$HERE/mpi4py_checks.py"
    rc=$?
    why=$(rc_problem $rc $T_PY)
    if grep -a -q '^FAIL ' "$dir.log"; then
        why="$(grep -a -m1 '^FAIL ' "$dir.log" | cut -c1-300)"
    elif [ -z "$why" ] && [ "$(py_digests "$dir.log" | wc -l)" -ne $PY_SECTIONS ]; then
        why="$(py_digests "$dir.log" | wc -l) of $PY_SECTIONS sections passed"
    fi
    if [ -n "$why" ]; then
        fail "$name (${JOB_SECS}s): $why" "$dir.log" "$dir.log.err"
        return 1
    fi
    ok "$name: pickle, buffer, coll, win sections correct (${JOB_SECS}s)"
    if [[ $btl == *usnic* ]]; then
        usnic_verdict "$name" "$dir.log" "$np" || return 1
    fi
    [ -n "$vref" ] || return 0
    if [ "$(py_digests "$vref" | wc -l)" -ne $PY_SECTIONS ]; then
        fail "$name = $SHM_BTL: the $SHM_BTL run failed, nothing to compare with"
    elif cmp -s <(py_digests "$dir.log") <(py_digests "$vref"); then
        ok "$name = $SHM_BTL: all $PY_SECTIONS section digests equal"
    else
        diff <(py_digests "$vref") <(py_digests "$dir.log") > "$dir.diff"
        fail "$name = $SHM_BTL: digests differ (< $SHM_BTL, > usnic)" "$dir.diff"
    fi
}

# ---------------------------------------------------------------------
# The suite
# ---------------------------------------------------------------------

U=usnic,self
V=$SHM_BTL,self

echo "=== clients over the usnic BTL on this host (logs: $LOG_DIR) ==="
check_deps

lammps_serial
for np in 2 4; do
    lammps_run $SHM_BTL-np$np $V $np
    lammps_run usnic-np$np $U $np "$LOG_DIR/lammps-$SHM_BTL-np$np/screen"
done

hpcc_run $SHM_BTL-np4 $V 4
hpcc_run usnic-np4 $U 4 "$LOG_DIR/hpcc-$SHM_BTL-np4/hpccoutf.txt"
hpcc_run $SHM_BTL-np2 $V 2            # reference for the run under loss

netpipe_run $SHM_BTL-I $V - -- -i -I
netpipe_run usnic-I $U "$LOG_DIR/netpipe-$SHM_BTL-I.log" -- -i -I
netpipe_run $SHM_BTL-a2 $V - -- -i -a -2
netpipe_run usnic-a2 $U "$LOG_DIR/netpipe-$SHM_BTL-a2.log" -- -i -a -2

for np in 2 4; do
    mpi4py_run $SHM_BTL-np$np $V $np
    mpi4py_run usnic-np$np $U $np "$LOG_DIR/mpi4py-$SHM_BTL-np$np.log"
done

if [ "$LOSS_RATE" -gt 0 ]; then
    echo "=== the same clients over usnic with ${LOSS_RATE}% UDP loss (network namespace) ==="
    # shellcheck source=../faults/netns.sh
    source "$ROOT/test/faults/netns.sh"
    if ! netns_create || ! netns_set_udp_loss "$LOSS_RATE"; then
        fail "cannot create a network namespace dropping ${LOSS_RATE}% of UDP (need root, iproute2, nftables)"
    else
        IN_NETNS=1
        before=$(netns_udp_dropped)
        for np in 2 4; do
            lammps_run loss-usnic-np$np $U $np "$LOG_DIR/lammps-$SHM_BTL-np$np/screen"
        done
        hpcc_run loss-usnic-np2 $U 2 "$LOG_DIR/hpcc-$SHM_BTL-np2/hpccoutf.txt"
        netpipe_run loss-usnic-I $U "$LOG_DIR/netpipe-$SHM_BTL-I.log" -- -i -I
        netpipe_run loss-usnic-a2 $U "$LOG_DIR/netpipe-$SHM_BTL-a2.log" -- -i -a -2
        for np in 2 4; do
            mpi4py_run loss-usnic-np$np $U $np "$LOG_DIR/mpi4py-$SHM_BTL-np$np.log"
        done
        dropped=$(( $(netns_udp_dropped) - before ))
        IN_NETNS=0
        if [ "$dropped" -gt 0 ]; then
            ok "${LOSS_RATE}% UDP loss rule dropped $dropped datagrams during these runs"
        else
            fail "${LOSS_RATE}% UDP loss rule dropped nothing: the loss runs tested nothing"
        fi
        netns_destroy
    fi
else
    fail "UDP loss runs not done (LOSS_RATE=0)"
fi

echo "=== HPCC latency and bandwidth (also in $FIGURES) ==="
cat "$FIGURES"
echo "total time: $(( $(date +%s) - START_ALL ))s"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
