#!/usr/bin/env bash
#
# What the usnic BTL says when it cannot run (issue 29), through the real
# show_help path of the Open MPI tested (4.1, or 5.0 with USNIC_OMPI):
#  - every topic of help-mpi-btl-usnic.txt rendered by Open MPI's
#    show_help, FI_PROVIDER=tcp exported (help_topics.c; 5.0: opal_show_help
#    in both ranks, aggregated by mpirun; 4.1: opal_show_help_string, its
#    mpirun corrupting help messages of local ranks): each topic's text
#    once, no "Sorry!" fallback, no runtime error;
#    and a deliberately broken copy of the file (a topic renamed, a %s
#    added) is caught;
#  - interface filters: an unknown name, an unknown subnet, one good and
#    one bad entry, include and exclude together, each named in a message
#    while the job runs (on tcp, or on the interface that matched);
#  - no usable device, each cause forced: the filters, FI_PROVIDER hiding
#    the provider of the ofi wire (and the suggested FI_PROVIDER working),
#    the socket wire's sockets refused (an LD_PRELOAD shim): one message
#    per host saying why, the job running clean over tcp; silence where
#    the btl list does not name usnic and btl_base_warn_component_unused
#    is 0.  An interface failing its connectivity check is not run here.
# Uses the installed plugin, like the other suites.  Prints
# "N passed, N failed" last; exits non-zero on any failure.
#
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"  # OMPI_SERIES, OVERSUBSCRIBE, OOB_LO, series_dir
BUILD=$(series_dir "$HERE/build")
HELP_SRC="$HERE/../../help-mpi-btl-usnic.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none --mca pml ob1
        ${OOB_LO[@]+"${OOB_LO[@]}"} --mca btl_tcp_if_include lo)
passed=0
failed=0
not_run=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; shift; [[ $# -gt 0 ]] && printf '%s\n' "$@" | tail -30 | sed 's/^/     /'; failed=$((failed + 1)); }

mkdir -p "$BUILD"
mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/ring" "$HERE/../params/ring.c" || { echo "cannot build ring.c"; echo "0 passed, 1 failed"; exit 1; }
pkginc=$(ompi_info --path pkgincludedir --parsable | sed -n 's/^path:pkgincludedir://p')
inc=$(ompi_info --path incdir --parsable | sed -n 's/^path:incdir://p')
if ! mpicc -O2 -Wall -Wextra -Werror -I"$pkginc" -I"$inc" -o "$BUILD/help_topics" "$HERE/help_topics.c" -lopen-pal; then
    echo "cannot build help_topics.c"; echo "0 passed, 1 failed"; exit 1
fi
cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$BUILD/nosock_shim.so" "$HERE/nosock_shim.c" -ldl ||
    { echo "cannot build nosock_shim.c"; echo "0 passed, 1 failed"; exit 1; }

# run EXPECT... : mpirun ARGS ring; output in $out, exit code in $rc
run() {
    out=$(timeout 60 "${MPIRUN[@]}" "$@" "$BUILD/ring" 2>&1 | tr -d '\000')
    rc=$?   # pipefail: timeout's or mpirun's status
}
# count PATTERN: lines of $out matching the extended regex
count() { grep -cE "$1" <<<"$out"; }
# clean: the job ran (rc 0, PASS) with no show_help fallback or runtime error
clean() {
    [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && ! grep -qE "Sorry!|ORTE_ERROR_LOG|unpack|Unknown error" <<<"$out"
}

# --- 1. every help topic through Open MPI's show_help, 2 ranks ---
# 5.0: opal_show_help in both ranks, each topic's text exactly once
# (PRRTE aggregates the second rank's copy).  4.1: its mpirun corrupts
# help messages of processes on its own node (README.txt, "Help
# messages"), so the BTL does not send its own there and this renders
# with opal_show_help_string (the same renderer) in rank 0.  Either way:
# no "Sorry!" fallback, no runtime error, the rows of help_topics.c
# agreeing with the file.
TOPIC_MODE=()
[[ $LAUNCHER == orte ]] && TOPIC_MODE=(--string)
check_topics() {  # FILE: 0 if every topic rendered cleanly
    local file=$1
    # FI_PROVIDER=tcp exported, as where issue 29 saw help messages lost;
    # 5.0's runtime ends each message it forwards with a NUL byte
    topics_out=$(FI_PROVIDER=tcp timeout 60 "${MPIRUN[@]}" -np 2 -x FI_PROVIDER "$BUILD/help_topics" \
                 ${TOPIC_MODE[@]+"${TOPIC_MODE[@]}"} "$file" 2>&1 | tr -d '\000')
    local trc=$? missing=()   # pipefail: mpirun's status, not tr's
    while IFS= read -r topic; do
        # the topic's first line of text, as show_help prints it
        first=$(awk -v t="[$topic]" '$0 == t {on = 1; next} on && /^[^#]/ {print; exit}' "$file")
        [[ $(grep -cxF "$first" <<<"$topics_out") -eq 1 ]] || missing+=("$topic")
    done < <(sed -n 's/^\[\(.*\)\]$/\1/p' "$file")
    [[ $trc -eq 0 && ${#missing[@]} -eq 0 ]] && grep -q "0 disagreements" <<<"$topics_out" &&
        ! grep -qE "Sorry!|ORTE_ERROR_LOG|unpack|PMIX_ERROR" <<<"$topics_out"
    local verdict=$?
    [[ ${#missing[@]} -gt 0 ]] && topics_out+=$'\n'"not printed exactly once: ${missing[*]}"
    return $verdict
}
# under its own name: an installed help-mpi-btl-usnic.txt must not stand in for it
cp "$HELP_SRC" "$BUILD/help-usnic-topics.txt"
ntopics=$(grep -c '^\[' "$HELP_SRC")
how=$([[ $LAUNCHER == orte ]] && echo "opal_show_help_string, rank 0" || echo "opal_show_help, 2 ranks, aggregated")
if check_topics "$BUILD/help-usnic-topics.txt"; then
    ok "all $ntopics help topics rendered once each by Open MPI $OMPI_SERIES's show_help ($how)"
else
    bad "help topics through show_help ($how)" "$topics_out"
fi
if [[ $LAUNCHER == orte ]]; then
    # not a check (Open MPI's bug, not ours): how often 4.1's mpirun
    # corrupts the same messages sent with opal_show_help from 2 ranks
    lost=0
    for i in 1 2 3; do
        timeout 60 "${MPIRUN[@]}" -np 2 "$BUILD/help_topics" "$BUILD/help-usnic-topics.txt" 2>&1 |
            grep -q "ORTE_ERROR_LOG" && lost=$((lost + 1))
    done
    echo "note: opal_show_help from 2 ranks under Open MPI $OMPI_SERIES's mpirun: ORTE_ERROR_LOG (messages lost) in $lost of 3 runs"
fi
# the check can fail: a renamed topic, and a topic with one %s too many
sed 's/^\[no crypto\]$/[no cryptography]/' "$HELP_SRC" >"$BUILD/help-usnic-renamed.txt"
sed '/^\[peer unreachable\]$/,/^#/ s/^  Error:            %s$/  Error:            %s %s/' "$HELP_SRC" \
    >"$BUILD/help-usnic-extra.txt"
for broken in renamed extra; do
    if ! check_topics "$BUILD/help-usnic-$broken.txt" && grep -q "^FAIL topic" <<<"$topics_out"; then
        ok "a help file with a topic $([[ $broken == renamed ]] && echo renamed || echo "given an extra %s") fails the check"
    else
        bad "the $broken help file passed the check" "$topics_out"
    fi
done

# --- 2. interface filters: entries matching no interface ---
unmatched_case() {  # LABEL ENTRY PARAM BTLS USED(yes|no) mpirun-args...
    local label=$1 entry=$2 param=$3 btls=$4 used=$5
    shift 5
    run -np 2 --mca btl "$btls" --mca btl_base_verbose 100 "$@"
    local usnic
    usnic=$(count "Using usnic btl")
    if clean && [[ $(count "Entries not matched: +$entry$") -eq 1 ]] &&
       [[ $(count "Parameter: +$param$") -eq 1 ]] && grep -qE "Interfaces found: +.*lo 127\.0\.0\.1/8" <<<"$out" &&
       { [[ $used == yes && $usnic -gt 0 ]] || [[ $used == no && $usnic -eq 0 ]]; }; then
        ok "$label: named once with the interfaces found, job ran ($([[ $used == yes ]] && echo "over usnic" || echo "without usnic"))"
    else
        bad "$label (rc=$rc, usnic used by $usnic)" "$out"
    fi
}
unmatched_case "if_include eth7 (no such interface)" eth7 btl_usnic_if_include usnic,tcp,self no \
    --mca btl_usnic_if_include eth7
unmatched_case "if_include 10.99.0.0/16 (no interface in it)" "10\.99\.0\.0/16" btl_usnic_if_include usnic,tcp,self no \
    --mca btl_usnic_if_include 10.99.0.0/16
unmatched_case "if_include lo,eth7 (one good, one bad)" eth7 btl_usnic_if_include usnic,self yes \
    --mca btl_usnic_if_include lo,eth7
unmatched_case "if_exclude eth7 (no such interface; usnic on the others)" eth7 btl_usnic_if_exclude usnic,self yes \
    --mca btl_usnic_if_exclude eth7
# include and exclude together: refused, job on tcp
run -np 2 --mca btl usnic,tcp,self --mca btl_base_verbose 100 --mca btl_usnic_if_include lo \
    --mca btl_usnic_if_exclude eth0
if clean && [[ $(count "mutually exclusive") -eq 1 ]] && [[ $(count "Using usnic btl") -eq 0 ]]; then
    ok "if_include and if_exclude together: refused once, job ran on tcp"
else
    bad "if_include and if_exclude together (rc=$rc)" "$out"
fi

# --- 3. no usable device: one message per host saying why ---
NODEV="The usnic BTL found no interface it can use on this host"
nodev_case() {  # LABEL WHY-REGEX mpirun-args...
    local label=$1 why=$2
    shift 2
    run -np 2 --mca btl usnic,tcp,self --mca btl_base_verbose 100 "$@"
    if clean && [[ $(count "$NODEV") -eq 1 ]] && [[ $(count "Why: +.*$why") -eq 1 ]] &&
       [[ $(count "Using usnic btl") -eq 0 ]] && [[ $(count "Using tcp btl") -gt 0 ]]; then
        ok "no device, $label: said once for the host, job ran over tcp"
    else
        bad "no device, $label (rc=$rc, $(count "$NODEV") messages)" "$out"
    fi
}
nodev_case "every interface filtered out" "every interface was left out: loopback .*btl_usnic_if_exclude \"eth0\"" \
    --mca btl_usnic_if_exclude eth0
nodev_case "no interface matches if_include" "no interface matched btl_usnic_if_include \"eth7\"" \
    --mca btl_usnic_if_include eth7
# Debian's openmpi-mca-params.conf sets btl_base_warn_component_unused 0:
# usnic named in the btl list still says why
nodev_case "FI_PROVIDER=tcp hides udp from the ofi wire" \
    "FI_PROVIDER=tcp in the environment hides usnic,udp: unset FI_PROVIDER .*FI_PROVIDER=tcp,udp" \
    -x FI_PROVIDER=tcp --mca btl_usnic_wire ofi --mca btl_base_warn_component_unused 0
# the advice works: FI_PROVIDER=tcp,udp lets the ofi wire run
run -np 2 --mca btl usnic,self --mca btl_base_verbose 100 -x FI_PROVIDER=tcp,udp --mca btl_usnic_wire ofi \
    --mca btl_usnic_if_include lo
if clean && [[ $(count "Using usnic btl") -gt 0 ]] && [[ $(count "$NODEV") -eq 0 ]]; then
    ok "FI_PROVIDER=tcp,udp (the suggested fix): the ofi wire runs the job"
else
    bad "FI_PROVIDER=tcp,udp with the ofi wire (rc=$rc)" "$out"
fi
nodev_case "the socket wire's sockets refused (LD_PRELOAD shim, EACCES)" \
    "the socket wire could not open a UDP socket on eth0: socket: Permission denied \(errno 13\)" \
    -x LD_PRELOAD="$BUILD/nosock_shim.so" --mca btl_usnic_wire socket
# the interface's own message names the call and the error: once in all
# where it goes through show_help (5.0: mpirun aggregates), else once per
# process (4.1, or an older help-mpi-btl-usnic.txt in Open MPI's data
# directory: the BTL writes its own to stderr, README.txt "Help messages")
datadir=$(ompi_info --path pkgdatadir --parsable | sed -n 's/^path:pkgdatadir://p')
expect=2
if [[ $LAUNCHER != orte ]] && { [[ ! -e "$datadir/help-mpi-btl-usnic.txt" ]] ||
                                cmp -s "$datadir/help-mpi-btl-usnic.txt" "$HELP_SRC"; }; then
    expect=1
fi
if [[ $(count "could not set up its socket wire") -eq $expect ]] && [[ $(count "Call: +socket$") -eq $expect ]] &&
   [[ $(count "Error: +Permission denied$") -eq $expect ]]; then
    ok "socket wire failed: names the call (socket) and the error, $expect time(s) for 2 processes"
else
    bad "socket wire failed message (expected $expect)" "$out"
fi
# silence: the btl list does not name usnic (Open MPI's default list) and
# btl_base_warn_component_unused is 0
out=$(timeout 60 "${MPIRUN[@]}" -np 2 --mca btl_base_warn_component_unused 0 -x FI_PROVIDER=tcp \
      --mca btl_usnic_wire ofi --mca btl_usnic_verbose 5 "$BUILD/ring" 2>&1 | tr -d '\000')
rc=$?   # pipefail: timeout's or mpirun's status
if clean && [[ $(count "$NODEV") -eq 0 ]] && [[ $(count "no usable interface; not said") -eq 2 ]]; then
    ok "default btl list with btl_base_warn_component_unused 0: no message (verbose says why)"
else
    bad "silence with the default btl list (rc=$rc)" "$out"
fi
echo "NOT RUN no device because every interface failed its connectivity check: the checker runs at add_procs, after the modules exist (its own message, \"connectivity check failed\", is tested in test/hosts/run-connectivity-tests.sh)"
not_run=$((not_run + 1))

echo "$passed passed, $failed failed$([[ $not_run -gt 0 ]] && echo ", $not_run not run")"
[[ $failed -eq 0 ]]
