#!/usr/bin/env bash
#
# Communication patterns (issue 23), one table from one run: every
# pattern of bench/patterns.c over the usnic BTL's two wires and btl/tcp,
# interleaved, each pattern's median wall time and its ratio to btl/tcp
# paired within one repetition and one VM state.
#
#   bash bench/patterns.sh                         # REPS=3, ~4.5 min (259 s measured; 399 s loaded)
#   REPS=1 SCALE=0.3 bash bench/patterns.sh        # a quick look
#   PATTERNS=struct_send,send_w0 bash bench/patterns.sh
#   BUSY=1 bash bench/patterns.sh                  # a CPU hog on every core
#   LOSS=1 REPS=1 bash bench/patterns.sh           # 1% UDP loss (namespace)
#   BASELINE_PLUGIN=/work/baseline/mca_btl_usnic.so bash bench/patterns.sh
#   TRANSPORTS="usnic usnic_ofi tcp ucx ofi_rxm" bash bench/patterns.sh
#
# Transports (TRANSPORTS, default "usnic usnic_ofi tcp"):
#   usnic      --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo
#              (the default wire: the socket wire on loopback); every job
#              logs its wire (btl_usnic_verbose 5) and final counters
#              (btl_usnic_stats 3600), and a job whose ranks did not all
#              open the socket wire, or that counted no usnic sends, is
#              "wrongpath"
#   usnic_ofi  the same plus --mca btl_usnic_wire ofi (checked likewise)
#   tcp        --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
#   ucx        (optional) pml ucx over UCX's tcp transport on lo
#              (UCX_TLS=tcp,self, pml_ucx_tls/devices any), checked to have
#              selected pml ucx
#   ofi_rxm    (optional) pml cm + mtl ofi on "tcp;ofi_rxm", checked to
#              have used that provider
#   The optional ones are tried once first; if they do not run, the
#   output says "not run" with the reason and leaves them out.
#   BASELINE_PLUGIN=/path/mca_btl_usnic.so adds usnic_base (and
#   usnic_ofi_base when usnic_ofi runs): the same options with an older
#   build of the plugin, through OMPI_MCA_mca_base_component_path set to
#   bench/build/baseline-components/ (a symlink to every component of Open
#   MPI's component directory but mca_btl_usnic.so, and a copy of the given
#   plugin; checked once with LD_DEBUG=files that ompi_info loads the copy).
#   Their columns add the ratio of the current build to the baseline.
#
# Cells.  bench/patterns.c --list gives the patterns in groups; one cell
# is one mpirun of one group for one transport (2-rank groups bound
# --bind-to core --map-by core, 3-4 ranks --oversubscribe --bind-to none),
# so that startup cost is not in the timings (each pattern is timed
# inside the program: after a barrier, the largest wall time of any rank)
# and a group's patterns always run in the same order after the same
# ones.  Per repetition the groups come in a shuffled order and, within a
# group, the transports in a shuffled order (seeded by SEED: one run is
# reproducible), so the cells a ratio pairs are next to each other in time.
# Around every cell bench/lib.sh probes the VM's cross-core state
# (the median of three bench/cacheline.c probes; fast ~60 ns, slow
# ~350 ns, SLOW_NS=150 splits them) and measures the share of the CPUs
# other processes used (FOREIGN_PCT, 10%: above it the cell is disturbed).
# Every received message is verified by the program; a cell whose program
# failed shows "fail", one killed after CELL_TIMEOUT "timeout".
#
# Ratios.  For a pattern, transport T and repetition r, T's time / tcp's
# time is a pair when both cells of r succeeded and saw one state (fast or
# slow, not mixed); with DROP_DISTURBED=1 (default) pairs with a
# disturbed cell are left out unless no other pair exists (their states
# are then printed in capitals).  A cell of the table is the median of
# the pairs, with n and the states (f/s); "-" where no pair exists, then
# "~R" is the ratio of the medians, unpaired.  The geometric mean of each
# ratio column goes under the table; every pattern whose ratio exceeds
# FLAG_RATIO (1.2) is flagged and listed.
#
# Modes:
#   BUSY=1   a CPU hog per core (a plain spinning process pinned to it,
#            started after the first state probe of each cell and killed
#            before the second); every job's ranks are oversubscribed
#            (--bind-to none) next to them
#   LOSS=1   everything inside a private network namespace (test/faults/
#            netns.sh) whose nftables rule drops LOSS_PCT (1) percent of
#            UDP datagrams at random; traffic only on its loopback; tcp,
#            ucx and ofi_rxm are a control there (the rule drops UDP only);
#            each usnic cell line shows the datagrams the rule dropped
#
# Environment:
#   REPS (3), SCALE (multiplies every pattern's count: 1; 0.2 with BUSY,
#   where patterns stretch up to 10-100x; 0.5 with LOSS), SEED (1),
#   PATTERNS (all: names or group names, comma- or space-separated),
#   TRANSPORTS, BASELINE_PLUGIN, BUSY, LOSS, LOSS_PCT, CELL_TIMEOUT (60 s,
#   180 with BUSY or LOSS), FLAG_RATIO (1.2), FOREIGN_PCT (10),
#   DROP_DISTURBED (1), SLOW_NS (150), QUIET (1: no per-cell lines),
#   BIND (2-rank binding; default: "--bind-to core --map-by core" if it
#   works, else "--bind-to none"), USNIC_OMPI (another Open MPI: test/lib.sh)
#
# Output: per-cell lines (unless QUIET=1), the table, the usnic
# retransmissions per cell, the flagged patterns, failures, the total
# time; a warning if the installed plugin
# was replaced during the run (another session's `make install`: the
# columns then mix two builds).  bench/build/patterns-runs.csv has
# every pattern of every cell (rep,transport,group,pattern,np,seconds,
# status,vmstate,disturbed,others_pct,resends,nft_drops); the logs are in
# bench/build/patterns-logs/.  Exit status 0 if every cell succeeded.

set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"  # REPO_DIR, test/lib.sh (OOB_LO, OVERSUBSCRIBE, series_dir, USNIC_OMPI), bench_build,
                       # vm_state, state_letter, others_start/_end, transport_args
BUILD_DIR=$(series_dir "$BENCH_DIR/build")
LOG_DIR="$BUILD_DIR/patterns-logs"
BIN="$BENCH_BIN/patterns"
RUNS_CSV="$BUILD_DIR/patterns-runs.csv"

REPS=${REPS:-3}
SEED=${SEED:-1}
PATTERNS=${PATTERNS:-all}
TRANSPORTS=${TRANSPORTS:-"usnic usnic_ofi tcp"}
BUSY=${BUSY:-0}
LOSS=${LOSS:-0}
LOSS_PCT=${LOSS_PCT:-1}
# a busy host stretches patterns up to 10-100x, 1% loss 1-5x: shorter ones
if [[ $BUSY == 1 ]]; then
    SCALE=${SCALE:-0.2}
elif [[ $LOSS == 1 ]]; then
    SCALE=${SCALE:-0.5}
else
    SCALE=${SCALE:-1}
fi
if [[ $BUSY == 1 || $LOSS == 1 ]]; then
    CELL_TIMEOUT=${CELL_TIMEOUT:-180}
else
    CELL_TIMEOUT=${CELL_TIMEOUT:-60}
fi
FLAG_RATIO=${FLAG_RATIO:-1.2}
FOREIGN_PCT=${FOREIGN_PCT:-10}
DROP_DISTURBED=${DROP_DISTURBED:-1}
QUIET=${QUIET:-0}
BASELINE_PLUGIN=${BASELINE_PLUGIN:-}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "patterns: $*" >&2; exit 1; }

[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "bad REPS '$REPS'"
[[ $SCALE =~ ^[0-9]*\.?[0-9]+$ ]] || die "bad SCALE '$SCALE'"
[[ $SEED =~ ^[0-9]+$ ]] || die "bad SEED '$SEED'"
[[ $BUSY =~ ^[01]$ && $LOSS =~ ^[01]$ && $QUIET =~ ^[01]$ && $DROP_DISTURBED =~ ^[01]$ ]] ||
    die "BUSY, LOSS, QUIET and DROP_DISTURBED are 0 or 1"
[[ $LOSS_PCT =~ ^[0-9]+$ && $LOSS_PCT -le 100 ]] || die "bad LOSS_PCT '$LOSS_PCT'"
[[ $CELL_TIMEOUT =~ ^[1-9][0-9]*$ && $FOREIGN_PCT =~ ^[0-9]+$ ]] || die "bad CELL_TIMEOUT or FOREIGN_PCT"
[[ $FLAG_RATIO =~ ^[0-9]*\.?[0-9]+$ ]] || die "bad FLAG_RATIO '$FLAG_RATIO'"
for t in $TRANSPORTS; do
    case $t in
        usnic | usnic_ofi | tcp | ucx | ofi_rxm) ;;
        *) die "unknown transport '$t' (known: usnic usnic_ofi tcp ucx ofi_rxm; BASELINE_PLUGIN adds usnic_base, usnic_ofi_base)" ;;
    esac
done
for cmd in mpicc mpirun cc timeout taskset awk; do
    command -v "$cmd" >/dev/null || die "$cmd not found"
done
if [[ " $TRANSPORTS" == *" usnic"* ]] && ! ompi_info 2>/dev/null | grep -q 'MCA btl: usnic'; then
    die "Open MPI lists no usnic BTL (ompi_info | grep 'MCA btl: usnic'); install it first (bash scripts/setup.sh)"
fi
if [[ $LOSS == 1 ]]; then
    [[ $(id -u) -eq 0 ]] || die "LOSS=1 needs root (ip netns, nftables)"
    for cmd in ip nft; do command -v "$cmd" >/dev/null || die "LOSS=1 needs $cmd"; done
fi

START=$SECONDS
mkdir -p "$BUILD_DIR" "$LOG_DIR" || die "cannot create $LOG_DIR"
rm -f "$LOG_DIR"/*.log
bench_build patterns cacheline || die "building bench/patterns.c and bench/cacheline.c failed"

# ---------------------------------------------------------------------------
# Patterns and groups (from the program's own list)
# ---------------------------------------------------------------------------

declare -A PNP PGROUP GNP GPATS WANT
ALL_PATTERNS=() GROUPS_ALL=()
while read -r name np _count group _what; do
    PNP[$name]=$np
    PGROUP[$name]=$group
    ALL_PATTERNS+=("$name")
    [[ -n ${GNP[$group]:-} ]] || { GNP[$group]=$np; GROUPS_ALL+=("$group"); }
done < <("$BIN" --list)
if [[ $PATTERNS == all ]]; then
    for p in "${ALL_PATTERNS[@]}"; do WANT[$p]=1; done
else
    for w in ${PATTERNS//,/ }; do
        if [[ -n ${PNP[$w]:-} ]]; then
            WANT[$w]=1
        elif [[ -n ${GNP[$w]:-} ]]; then
            for p in "${ALL_PATTERNS[@]}"; do [[ ${PGROUP[$p]} == "$w" ]] && WANT[$p]=1; done
        else
            die "unknown pattern or group '$w' ($BIN --list shows them)"
        fi
    done
fi
PLIST=() GROUPS_RUN=()
for p in "${ALL_PATTERNS[@]}"; do
    [[ -n ${WANT[$p]:-} ]] || continue
    PLIST+=("$p")
    g=${PGROUP[$p]}
    [[ -n ${GPATS[$g]:-} ]] || GROUPS_RUN+=("$g")
    GPATS[$g]+="${GPATS[$g]:+,}$p"
done

# ---------------------------------------------------------------------------
# Namespace (LOSS=1), hogs (BUSY=1), cleanup
# ---------------------------------------------------------------------------

PREFIX=()
NETNS=""
cleanup() {
    hogs_stop
    [[ -n $NETNS ]] && netns_destroy
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $LOSS == 1 ]]; then
    # shellcheck source=../test/faults/netns.sh
    . "$REPO_DIR/test/faults/netns.sh"
    netns_create || die "cannot create a network namespace with nftables"
    trap cleanup EXIT   # netns_create set its own trap
    trap 'exit 130' INT TERM
    PREFIX=(ip netns exec "$NETNS")
fi

# ---------------------------------------------------------------------------
# Transports
# ---------------------------------------------------------------------------

# transport_args T (bench/lib.sh): TARGS = the mpirun options of T, TENV =
# its environment (usnic_base, usnic_ofi_base: the plugin in BASE_DIR)

# launch NP LOG PATTERNS...: one job of the program for transport $T
launch() {
    local np=$1 log=$2 map
    shift 2
    if [[ $BUSY == 1 || $np -gt 2 ]]; then
        map=("${OVERSUBSCRIBE[@]}" --bind-to none)
    else
        # shellcheck disable=SC2206  # BIND is a word list
        map=($BIND)
    fi
    {
        echo "+ ${TENV[*]+${TENV[*]} }mpirun -np $np ${map[*]} ${TARGS[*]} $BIN $*"
        ${PREFIX[@]+"${PREFIX[@]}"} env ${TENV[@]+"${TENV[@]}"} timeout -k 10 "$CELL_TIMEOUT" \
            mpirun -np "$np" "${map[@]}" ${OOB_LO[@]+"${OOB_LO[@]}"} "${TARGS[@]}" "$BIN" "$@"
    } >"$log" 2>&1 </dev/null
}

# path_check T NP LOG: WHY = empty if the job took T's path, else why not;
# RESENDS = (usnic) retransmissions summed over the ranks, else "-"
path_check() {
    local t=$1 np=$2 log=$3 want n sends
    RESENDS=- WHY=$(path_why "$@")
    if [[ $t == usnic* ]]; then
        RESENDS=$(awk '/btl:usnic final stats \[/ && !/\] peer / { if (match($0, / resends=[0-9]+/)) s += substr($0, RSTART + 9, RLENGTH - 9) }
                       END { print s + 0 }' "$log")
    fi
}
path_why() {
    local t=$1 np=$2 log=$3 want n sends
    case $t in
        usnic* )
            want=socket
            [[ $t == usnic_ofi* ]] && want=ofi
            n=$(grep -c "btl:usnic: lo: $want wire\$" "$log")
            sends=$(awk '/btl:usnic final stats \[/ && !/\] peer / { if (match($0, / total_sends=[0-9]+/)) s += substr($0, RSTART + 13, RLENGTH - 13) }
                         END { print s + 0 }' "$log")
            if [[ $n -ne $np ]]; then
                echo "$n of $np ranks logged 'lo: $want wire'"
            elif [[ $sends -eq 0 ]] && grep -q '^pattern .* ok$' "$log"; then
                echo "no usnic sends counted"
            fi
            ;;
        ucx)
            n=$(grep -c 'select: component ucx selected' "$log")
            [[ $n -eq $np ]] || echo "$n of $np ranks selected pml ucx"
            ;;
        ofi_rxm)
            n=$(grep -c 'mtl:ofi:prov: tcp;ofi_rxm$' "$log")
            [[ $n -eq $np ]] || echo "$n of $np ranks logged 'mtl:ofi:prov: tcp;ofi_rxm'"
            ;;
    esac
}

if [[ -z ${BIND:-} ]]; then
    BIND="--bind-to core --map-by core"
    TARGS=(--mca pml ob1 --mca btl self) TENV=()
    launch 1 "$LOG_DIR/binding.log" --patterns barrier_np2 || BIND="--bind-to none"
fi

RUN_T=()
NOT_RUN=()
BASE_DIR=""
if [[ -n $BASELINE_PLUGIN ]]; then
    [[ -f $BASELINE_PLUGIN ]] || die "BASELINE_PLUGIN=$BASELINE_PLUGIN: no such file"
    COMP_DIR=$(ompi_info --parsable --path pkglibdir | sed -n 's/^path:pkglibdir://p')
    [[ -d $COMP_DIR ]] || die "cannot find Open MPI's component directory (ompi_info --path pkglibdir)"
    BASE_DIR="$BUILD_DIR/baseline-components"
    rm -rf "$BASE_DIR"
    mkdir -p "$BASE_DIR" || die "cannot create $BASE_DIR"
    for f in "$COMP_DIR"/*; do
        [[ $(basename "$f") == mca_btl_usnic.so ]] || ln -s "$f" "$BASE_DIR/"
    done
    cp "$BASELINE_PLUGIN" "$BASE_DIR/mca_btl_usnic.so" || die "cannot copy $BASELINE_PLUGIN"
    loaded=$(OMPI_MCA_mca_base_component_path="$BASE_DIR" LD_DEBUG=files ompi_info 2>&1 |
        sed -nE 's/.*file=([^ ]*mca_btl_usnic\.so).*/\1/p' | sort -u | tr '\n' ' ')
    [[ $loaded == "$BASE_DIR/mca_btl_usnic.so " ]] ||
        die "with OMPI_MCA_mca_base_component_path=$BASE_DIR, ompi_info loaded '${loaded:-no usnic BTL}', not the baseline copy"
    echo "baseline: $BASELINE_PLUGIN ($(stat -c '%y' "$BASELINE_PLUGIN" | cut -d. -f1)) as $BASE_DIR/mca_btl_usnic.so; installed: $COMP_DIR/mca_btl_usnic.so ($(stat -c '%y' "$COMP_DIR/mca_btl_usnic.so" | cut -d. -f1))"
fi
for t in $TRANSPORTS; do
    case $t in
        ucx | ofi_rxm)
            # optional: tried once; left out, and said so, if they do not run
            transport_args "$t"
            log="$LOG_DIR/try-$t.log"
            if ! launch 2 "$log" --scale 0.01 --patterns send_w0 || ! grep -q '^pattern send_w0 .* ok$' "$log"; then
                NOT_RUN+=("$t: not run ($(grep -m1 -iE 'error|cannot|failed|not available' "$log" | cut -c1-120 || true); see ${log#"$REPO_DIR"/})")
                continue
            fi
            path_check "$t" 2 "$log"
            if [[ -n $WHY ]]; then
                NOT_RUN+=("$t: not run (wrong path: $WHY; see ${log#"$REPO_DIR"/})")
                continue
            fi
            ;;
    esac
    RUN_T+=("$t")
    if [[ -n $BASE_DIR && ($t == usnic || $t == usnic_ofi) ]]; then
        RUN_T+=("${t}_base")
    fi
done
has() { [[ " ${RUN_T[*]} " == *" $1 "* ]]; }

# ---------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------

declare -A TIME STAT CVM CDIST
FAILED_CELLS=()
# The installed plugin may be reinstalled while this runs (another
# session building): each cell notes whether it still is the one found at
# the start
COMP_DIR=${COMP_DIR:-$(ompi_info --parsable --path pkglibdir | sed -n 's/^path:pkglibdir://p')}
plugin_id() { stat -c '%Y %s' "$COMP_DIR/mca_btl_usnic.so" 2>/dev/null; }
PLUGIN0=$(plugin_id)
PLUGIN_CHANGED=()
echo "rep,transport,group,pattern,np,seconds,status,vmstate,disturbed,others_pct,resends,nft_drops" >"$RUNS_CSV"

mode="quiet host"
[[ $BUSY == 1 ]] && mode="busy host (a spinning process pinned to each of the $(nproc) CPUs during every cell, ranks oversubscribed)"
if [[ $LOSS == 1 ]]; then
    if [[ $BUSY == 1 ]]; then mode+="; "; else mode=""; fi
    mode+="${LOSS_PCT}% random UDP loss (nftables) in network namespace $NETNS, its loopback only"
fi
echo "patterns: Open MPI $(ompi_info --parsable | sed -n 's/^ompi:version:full://p') ($(command -v mpirun)); ${#PLIST[@]} patterns in ${#GROUPS_RUN[@]} groups x {${RUN_T[*]}} x $REPS repetitions; scale $SCALE, seed $SEED"
echo "          mode: $mode; 2-rank jobs: $([[ $BUSY == 1 ]] && echo "${OVERSUBSCRIBE[*]} --bind-to none" || echo "$BIND"); 3-4 ranks: ${OVERSUBSCRIBE[*]} --bind-to none; cell timeout ${CELL_TIMEOUT}s"
echo "          load average at start: $(cut -d' ' -f1-3 /proc/loadavg); installed plugin $COMP_DIR/mca_btl_usnic.so of $(date -d "@${PLUGIN0%% *}" '+%F %T')"
for nr in ${NOT_RUN[@]+"${NOT_RUN[@]}"}; do echo "          $nr"; done

# run_cell REP T GROUP
run_cell() {
    local rep=$1 t=$2 g=$3 np=${GNP[$3]} log="$LOG_DIR/r$1-$2-$3.log" rc st0 ns0 st1 ns1 vm why p line
    local t0=$EPOCHREALTIME drops=- cellstat=ok
    transport_args "$t"
    read -r st0 ns0 < <(vm_state)
    [[ $LOSS == 1 ]] && netns_set_udp_loss "$LOSS_PCT"
    others_start
    [[ $BUSY == 1 ]] && hogs_start
    launch "$np" "$log" --seed "$SEED" --scale "$SCALE" --patterns "${GPATS[$g]}"
    rc=$?
    [[ $BUSY == 1 ]] && hogs_stop
    others_end
    read -r st1 ns1 < <(vm_state)
    [[ $LOSS == 1 ]] && drops=$(netns_udp_dropped)
    [[ $(plugin_id) == "$PLUGIN0" ]] || PLUGIN_CHANGED+=("rep $rep $t $g")
    vm=$st0
    [[ $st0 == "$st1" ]] || vm=mixed
    CVM[$t,$rep,$g]=$vm
    CDIST[$t,$rep,$g]=0
    [[ $OTHERS_PCT -gt $FOREIGN_PCT ]] && CDIST[$t,$rep,$g]=1
    path_check "$t" "$np" "$log"
    why=$WHY
    local times=""
    for p in ${GPATS[$g]//,/ }; do
        line=$(grep -m1 -E "^pattern $p (ranks [0-9]+ seconds|FAIL)" "$log")
        if [[ -n $why ]]; then
            STAT[$t,$rep,$p]=wrongpath
        elif [[ $line == *" ok" ]]; then
            STAT[$t,$rep,$p]=ok
            TIME[$t,$rep,$p]=$(awk '{ print $6 }' <<<"$line")
        elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
            STAT[$t,$rep,$p]=timeout
        else
            STAT[$t,$rep,$p]=fail
        fi
        [[ ${STAT[$t,$rep,$p]} == ok ]] || cellstat=${STAT[$t,$rep,$p]}
        times+=" $p $([[ ${STAT[$t,$rep,$p]} == ok ]] && printf '%.3f' "${TIME[$t,$rep,$p]}" || echo "${STAT[$t,$rep,$p]}")"
        echo "$rep,$t,$g,$p,$np,${TIME[$t,$rep,$p]:-},${STAT[$t,$rep,$p]},$vm,${CDIST[$t,$rep,$g]},$OTHERS_PCT,$RESENDS,$drops" >>"$RUNS_CSV"
    done
    if [[ $cellstat != ok ]]; then
        FAILED_CELLS+=("rep $rep $t $g: $cellstat (exit $rc${why:+; $why}); log ${log#"$REPO_DIR"/}")
    fi
    if [[ $QUIET == 0 || $cellstat != ok ]]; then
        printf '  r%d %-12s %-14s %-9s %5.1fs  VM %s %s -> %s %s  others %s%%%s%s%s %s\n' "$rep" "$g" "$t" "$cellstat" \
            "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" "$st0" "$ns0" "$st1" "$ns1" "$OTHERS_PCT" \
            "$([[ ${CDIST[$t,$rep,$g]} == 1 ]] && echo ' (disturbed)')" \
            "$([[ $RESENDS != - ]] && echo "  resends $RESENDS")" \
            "$([[ $drops != - && $t == usnic* ]] && echo "  nft drops $drops")" "$times"
    fi
}

# a shuffled copy of the arguments (bash's RANDOM, seeded below)
shuffled() {
    local a=("$@") i j x
    for ((i = ${#a[@]} - 1; i > 0; i--)); do
        j=$((RANDOM % (i + 1)))
        x=${a[i]} a[i]=${a[j]} a[j]=$x
    done
    printf '%s\n' "${a[@]}"
}

RANDOM=$SEED
for rep in $(seq 1 "$REPS"); do
    [[ $QUIET == 1 ]] && echo "  repetition $rep of $REPS ($((SECONDS - START))s so far)"
    mapfile -t gorder < <(shuffled "${GROUPS_RUN[@]}")
    for g in "${gorder[@]}"; do
        mapfile -t torder < <(shuffled "${RUN_T[@]}")
        for t in "${torder[@]}"; do
            run_cell "$rep" "$t" "$g"
        done
    done
done
hogs_stop

# ---------------------------------------------------------------------------
# Table
# ---------------------------------------------------------------------------

# median of the arguments (numbers)
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (!NR) exit; print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# med_time T P: median over the ok cells (undisturbed ones when there are any)
med_time() {
    local t=$1 p=$2 r quiet=() all=()
    for r in $(seq 1 "$REPS"); do
        [[ ${STAT[$t,$r,$p]:-} == ok ]] || continue
        all+=("${TIME[$t,$r,$p]}")
        [[ ${CDIST[$t,$r,${PGROUP[$p]}]} == 0 ]] && quiet+=("${TIME[$t,$r,$p]}")
    done
    if [[ $DROP_DISTURBED == 1 && ${#quiet[@]} -gt 0 ]]; then
        median "${quiet[@]}"
    elif [[ ${#all[@]} -gt 0 ]]; then
        median "${all[@]}"
    fi
}

# cell_status T P: the worst status of its cells, for a cell without time
cell_status() {
    local r s=""
    for r in $(seq 1 "$REPS"); do
        case ${STAT[$1,$r,$2]:-} in ok | "") ;; *) s=${STAT[$1,$r,$2]} ;; esac
    done
    echo "${s:--}"
}

# paired A B P: "RATIO N STATES" (the median of A/B over the pairs of one
# repetition and one VM state; capitals: a disturbed cell was in the pair,
# used only when there is no other) or empty
paired() {
    local a=$1 b=$2 p=$3 g=${PGROUP[$3]} r va vb qs="" as="" l
    local -a quiet=() all=()
    for r in $(seq 1 "$REPS"); do
        [[ ${STAT[$a,$r,$p]:-} == ok && ${STAT[$b,$r,$p]:-} == ok ]] || continue
        va=${CVM[$a,$r,$g]} vb=${CVM[$b,$r,$g]}
        [[ $va == "$vb" && ($va == fast || $va == slow) ]] || continue
        l=$(state_letter "$va")
        local x
        x=$(awk -v x="${TIME[$a,$r,$p]}" -v y="${TIME[$b,$r,$p]}" 'BEGIN { if (y > 0) printf "%.6g", x / y }')
        [[ -n $x ]] || continue
        if [[ ${CDIST[$a,$r,$g]} == 0 && ${CDIST[$b,$r,$g]} == 0 ]] || [[ $DROP_DISTURBED == 0 ]]; then
            quiet+=("$x") qs+=$l
        else
            all+=("$x") as+=${l^^}
        fi
    done
    if [[ ${#quiet[@]} -gt 0 ]]; then
        echo "$(median "${quiet[@]}") ${#quiet[@]} $qs"
    elif [[ ${#all[@]} -gt 0 ]]; then
        echo "$(median "${all[@]}") ${#all[@]} $as"
    fi
}

fmt_t() { awk -v v="$1" 'BEGIN { printf (v < 1 ? "%.3f" : v < 10 ? "%.2f" : "%.1f"), v }'; }
fmt_r() { awk -v v="$1" 'BEGIN { printf (v < 10 ? "%.2fx" : "%.1fx"), v }'; }

# the ratio columns: A/B
RCOLS=()
if has tcp; then
    for t in "${RUN_T[@]}"; do [[ $t == tcp ]] || RCOLS+=("$t/tcp"); done
fi
has usnic_base && RCOLS+=("usnic/usnic_base")
has usnic_ofi_base && RCOLS+=("usnic_ofi/usnic_ofi_base")

echo
echo "Median wall time (s) per pattern (largest over the ranks, after a barrier; every message verified), over $REPS"
echo "interleaved repetitions$([[ $DROP_DISTURBED == 1 ]] && echo " (cells disturbed by other work left out while a quiet one exists)")."
echo "Ratios: median of A/B over the pairs of one repetition and one VM state (n, states f/s; capitals = a"
echo "disturbed cell, used only without a quiet pair); \"-\" = no pair, then ~R = the ratio of the medians, unpaired."
echo "\"<<\" flags a ratio to tcp above ${FLAG_RATIO}x."
hdr=$(printf '%-21s %2s' pattern np)
declare -A TW   # column widths
for t in "${RUN_T[@]}"; do
    TW[$t]=$((${#t} > 9 ? ${#t} : 9))
    hdr+=$(printf ' %*s' "${TW[$t]}" "$t")
done
declare -A RW
for c in "${RCOLS[@]}"; do
    RW[$c]=$((${#c} > 10 + REPS ? ${#c} : 10 + REPS))
    hdr+=$(printf '  %-*s' "${RW[$c]}" "$c")
done
echo "$hdr"
declare -A RATIOS   # column -> space-separated ratios (for the geometric mean)
FLAGGED=()
for p in "${PLIST[@]}"; do
    line=$(printf '%-21s %2s' "$p" "${PNP[$p]}")
    declare -A MED=()
    for t in "${RUN_T[@]}"; do
        MED[$t]=$(med_time "$t" "$p")
        if [[ -n ${MED[$t]} ]]; then
            line+=$(printf ' %*s' "${TW[$t]}" "$(fmt_t "${MED[$t]}")")
        else
            line+=$(printf ' %*s' "${TW[$t]}" "$(cell_status "$t" "$p")")
        fi
    done
    flags=""
    for c in "${RCOLS[@]}"; do
        a=${c%/*} b=${c#*/}
        read -r rv rn rs < <(paired "$a" "$b" "$p"; echo)
        if [[ -n ${rv:-} ]]; then
            cell="$(fmt_r "$rv") n$rn $rs"
            RATIOS[$c]+=" $rv"
            used=$rv
        elif [[ -n ${MED[$a]} && -n ${MED[$b]} ]]; then
            used=$(awk -v x="${MED[$a]}" -v y="${MED[$b]}" 'BEGIN { if (y > 0) printf "%.6g", x / y }')
            cell="- ~$(fmt_r "$used")"
        else
            used="" cell="-"
        fi
        line+=$(printf '  %-*s' "${RW[$c]}" "$cell")
        if [[ $b == tcp && -n $used ]] && awk -v x="$used" -v f="$FLAG_RATIO" 'BEGIN { exit !(x > f) }'; then
            flags+=" $a"
            FLAGGED+=("$a: $p $(fmt_r "$used")$([[ -z ${rv:-} ]] && echo " (unpaired)")")
        fi
    done
    [[ -n $flags ]] && line+="  <<$flags"
    echo "$line"
    unset MED
done
line=$(printf '%-21s %2s' "geometric mean" "")
for t in "${RUN_T[@]}"; do line+=$(printf ' %*s' "${TW[$t]}" ""); done
for c in "${RCOLS[@]}"; do
    # shellcheck disable=SC2086
    gm=$(awk 'BEGIN { s = 0; n = 0; for (i = 1; i < ARGC; i++) { s += log(ARGV[i]); n++ } if (n) printf "%.2fx (%d)", exp(s / n), n }' ${RATIOS[$c]:-})
    line+=$(printf '  %-*s' "${RW[$c]}" "${gm:--}")
done
echo "$line"
echo "(geometric mean over the patterns with a paired ratio, their number in parentheses)"

# cells per state
declare -A NSTATE=()
for k in "${!CVM[@]}"; do NSTATE[${CVM[$k]}]=$((${NSTATE[${CVM[$k]}]:-0} + 1)); done
nd=0
for k in "${!CDIST[@]}"; do [[ ${CDIST[$k]} == 1 ]] && nd=$((nd + 1)); done
st=""
for s in fast slow mixed unknown; do [[ -n ${NSTATE[$s]:-} ]] && st+=" $s ${NSTATE[$s]},"; done
echo "cells per VM state:${st%,}; disturbed (others above ${FOREIGN_PCT}% of the CPUs): $nd of ${#CVM[@]}"

# retransmissions of the usnic columns (a quiet lossless cell has a few)
for t in "${RUN_T[@]}"; do
    [[ $t == usnic* ]] || continue
    awk -F, -v t="$t" 'NR > 1 && $2 == t && $11 ~ /^[0-9]+$/ && !seen[$1 "," $3]++ {
            n++; v[n] = $11; g[$3] += $11; c[$3]++ }
        END {
            if (!n) exit
            for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
            top = ""
            for (k = 0; k < 3; k++) { best = ""; for (q in g) if (!(q in used) && (best == "" || g[q] / c[q] > g[best] / c[best])) best = q
                                      if (best == "") break; used[best] = 1; top = top sprintf("%s%s %.0f", top == "" ? "" : ", ", best, g[best] / c[best]) }
            printf "%s retransmissions per cell: median %s, max %s; most (mean per cell): %s\n", t, v[int((n + 1) / 2)], v[n], top
        }' "$RUNS_CSV"
done

echo
if [[ ${#FLAGGED[@]} -gt 0 ]]; then
    echo "Patterns worse than ${FLAG_RATIO}x btl/tcp:"
    printf '  %s\n' "${FLAGGED[@]}" | sort -s -t: -k1,1
else
    echo "No pattern worse than ${FLAG_RATIO}x btl/tcp."
fi
for nr in ${NOT_RUN[@]+"${NOT_RUN[@]}"}; do echo "$nr"; done
if [[ ${#FAILED_CELLS[@]} -gt 0 ]]; then
    echo "Cells that failed, timed out or took the wrong path (${#FAILED_CELLS[@]}):"
    printf '  %s\n' "${FAILED_CELLS[@]}"
fi
if [[ ${#PLUGIN_CHANGED[@]} -gt 0 ]]; then
    echo "WARNING: the installed plugin changed during the run (now $(date -d "@$(plugin_id | cut -d' ' -f1)" '+%F %T')):"
    echo "  ${#PLUGIN_CHANGED[@]} cells ended after the change, first: ${PLUGIN_CHANGED[0]}; the columns mix two builds"
fi
echo "CSV: ${RUNS_CSV#$REPO_DIR/}; logs: ${LOG_DIR#$REPO_DIR/}/"
echo "total time: $((SECONDS - START))s"
[[ ${#FAILED_CELLS[@]} -eq 0 ]]
