#!/usr/bin/env bash
#
# PMIx impersonation (issue 27): a local user of another uid reads every
# rank's usnic modex through the job's own PMIx server, and a sniffer on
# the path forges the job's next message with the datagram keys that
# modex would give if keys came from it alone.
#
# The job: test/attack/victim.c on 2 ranks over --mca btl usnic,self in a
# network namespace this script makes (its loopback only), launched with
# PMIX_MCA_gds=hash (exported for mpirun's own PMIx server and passed to
# the ranks with -x): the server's hash store serves modex data over its
# TCP socket, where the default shared-memory store would keep it in
# files of the job's owner.  The attack:
#   1. pmix_thief, as user nobody with LD_PRELOAD=uid_shim.so (getuid &
#      co. return 0), finds the server's port in the namespace's
#      /proc/net/tcp (a listening socket of uid 0 on 127.0.0.1), connects
#      as rank 1 of the job's namespace (the job id, which a local user
#      predicts from mpirun's pid and the host name; here read off the
#      victim's log) and PMIx_Gets every rank's "btl.usnic.<major>.<minor>"
#      entry;
#   2. dgram_attack frag-ahead-keyed (root, raw sockets: on the path)
#      answers every counter message with a forged next one, sealed with
#      opal_btl_usnic_derive_key(receiver's modex key field, sender's
#      node_id): the keys of protocol 5, which came from the modex alone.
# Cases (each a build of this tree's component in a private component
# directory, OMPI_MCA_mca_base_component_path):
#   default      the thief must read every rank's entry (else the case
#                proves nothing), and the forgeries must be refused: the
#                victim's data verified, drop_bad_mac grown by at least
#                half of what was sent.  FAILS while the component's keys
#                still come from the modex alone.
#   modex-keys   the control: the component built with
#                -DOPAL_BTL_USNIC_TEST_MODEX_KEYS=1 (keys
#                derived the old way, from the modex, a test-only
#                build); the same attack must put forged values into
#                MPI_Recv ("counter N arrived as 0xf0f0..."): the test can
#                fail.
#   Also checked, in a short job of its own: without uid_shim.c the
#   server refuses nobody (what the shim changes is what lets it in).
#   Measured on 4.1 and 5.0.10: after that refused connection mpirun
#   does not exit although the ranks finished (the runtime's, not the
#   BTL's: noted only).
# Open MPI 5.0 (USNIC_OMPI=/prefix, test/lib.sh): the namespace is
# "prterun-HOST-PID@1" (PID: prterun's, public in /proc).  Measured on
# 5.0.10: the same as on 4.1 (refused without the shim, every entry read
# with it).  Should a later 5.x server refuse the thief, its cases say
# NOT RUN with what it got (on 4.1 that is a FAIL: the attack is known to
# work there, and a case whose thief read nothing proves nothing).
#
# Needs root (namespaces, raw sockets, runuser), libpmix-dev (pmix.h,
# libpmix), libsodium-dev, and the build tools of the component (make).
# Environment: VICTIM_SECONDS (6), VICTIM_GRACE (30: a victim running
# that long past its time counts as stalled), USNIC_OMPI.  About 1
# minute (two component builds, 3 jobs).  Ends with "N passed, N failed[,
# N not run]".
#
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"  # OVERSUBSCRIBE, OOB_LO, LAUNCHER (the Open MPI series)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../report.sh
source "$ROOT/test/report.sh"
# shellcheck source=../faults/netns.sh
source "$ROOT/test/faults/netns.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# mpirun's own PMIx server must use the hash store too, not only the ranks
export PMIX_MCA_gds=hash
VICTIM_SECONDS=${VICTIM_SECONDS:-6}
VICTIM_GRACE=${VICTIM_GRACE:-30}
NP=2
echo "# Open MPI $OMPI_SERIES ($LAUNCHER), $(command -v mpirun)"

ompi_path() { ompi_info --path "$1" --parsable 2>/dev/null | cut -d: -f3; }
PKGINC=$(ompi_path pkgincludedir)
PKGLIBDIR=$(ompi_path pkglibdir)

# nobody must be able to run the thief: build into a world-readable place
BUILD=$(mktemp -d /tmp/usnic-pmix.XXXXXX)
chmod 755 "$BUILD"
LOG=$BUILD/victim.log
# KEEP=1 keeps the logs and builds
cleanup() { netns_destroy; if [ -n "${KEEP:-}" ]; then echo "# kept $BUILD"; else rm -rf "$BUILD"; fi; }
trap cleanup EXIT
T0=$(now)
# shellcheck disable=SC2046 # pkg-config's output is words
if ! { mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/victim" "$HERE/victim.c" &&
       cc -O2 -Wall -Wextra -Werror -I"$PKGINC" -o "$BUILD/dgram_attack" "$HERE/dgram_attack.c" \
           "$ROOT/btl_usnic_auth.c" $(pkg-config --cflags --libs libsodium 2>/dev/null || echo -lsodium) &&
       cc -O2 -Wall -Wextra -Werror -o "$BUILD/pmix_thief" "$HERE/pmix_thief.c" \
           $(pkg-config --cflags --libs pmix 2>/dev/null || echo -lpmix) &&
       cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$BUILD/libuid_shim.so" "$HERE/uid_shim.c"; } \
       >"$BUILD/build.log" 2>&1; then
    fail "build the thief, the forger and the victim" "compiler errors (libpmix-dev, libsodium-dev?)" "$BUILD/build.log"
    finish
fi
chmod 755 "$BUILD"/*

# component NAME CPPFLAGS: this tree's component built with CPPFLAGS into
# a private component directory (Open MPI's other components linked in);
# prints the directory, nothing if the build failed.  The flags go in as
# the Makefile's CPPFLAGS_EXTRA, and as EXTRA_CFLAGS for a Makefile that
# names them so.
component() {
    local dir=$BUILD/components-$1 f
    mkdir -p "$dir"
    for f in "$PKGLIBDIR"/mca_*.so; do
        [ "$(basename "$f")" = mca_btl_usnic.so ] || ln -s "$f" "$dir/"
    done
    if make -C "$ROOT" --no-print-directory -j2 ${USNIC_OMPI:+OMPI="$USNIC_OMPI"} BUILD="$BUILD/build-$1" \
           SO="$dir/mca_btl_usnic.so" CPPFLAGS_EXTRA="$2" EXTRA_CFLAGS="$2" "$dir/mca_btl_usnic.so" >"$BUILD/build-$1.log" 2>&1; then
        cp "$ROOT/help-mpi-btl-usnic.txt" "$dir/"
        echo "$dir"
    fi
}

# shellcheck disable=SC2054 # usnic,self is one argument
MPIRUN=(mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none --mca pml ob1 --mca btl usnic,self
        --mca btl_usnic_if_include lo ${OOB_LO[@]+"${OOB_LO[@]}"} --mca btl_usnic_verbose 5
        --mca btl_usnic_stats 1 -x PMIX_MCA_gds=hash)

# counter NAME: summed over the ranks' final statistics
counter() {
    grep 'final stats' "$LOG" | grep -v ' peer ' | grep -oE " $1=[0-9]+" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'
}

job_ports() {
    sed -nE 's/.*rank ([0-9]+): module on .* ports ([0-9]+)\/([0-9]+).*/\1 \2 \3/p' "$LOG" | sort -n |
        awk '{print $2, $3}' | tr '\n' ' '
}

# The job's PMIx namespace, as a local user predicts it.  ORTE (4.1): the
# job id in decimal (a hash of the host name and mpirun's pid; the
# victim's verbose line saves us the hash).  PRRTE (5.0):
# "prterun-HOST-PID@1", PID that of prterun (/proc is public).
job_nspace() {
    if [ "$LAUNCHER" = orte ]; then
        local id
        id=$(sed -nE 's/.*rank [0-9]+: module on .*, job (0x[0-9a-f]+).*/\1/p' "$LOG" | head -1)
        [ -n "$id" ] && echo $((id))
    else
        local pid
        pid=$(launcher_pid "$JOB")
        [ -n "$pid" ] && echo "prterun-$(hostname)-$pid@1"
    fi
}

# launcher_pid PID: the first process named prterun or mpirun at or below PID
launcher_pid() {
    local p=$1 c
    for _ in 1 2 3 4; do
        case "$(cat "/proc/$p/comm" 2>/dev/null)" in prterun | mpirun) echo "$p"; return ;; esac
        c=$(pgrep -P "$p" | head -1)
        [ -n "$c" ] || return
        p=$c
    done
}

# start_victim COMPONENT_DIR [SECONDS [GRACE]]: the job in the background
# in the namespace (JOB), once every rank printed its ports (PORTS);
# returns 1 if not
start_victim() {
    local secs=${2:-$VICTIM_SECONDS} grace=${3:-$VICTIM_GRACE}
    : >"$LOG"  # not an older job's ports, before the job's own redirection empties it
    netns_exec env OMPI_MCA_mca_base_component_path="$1" \
        timeout -k 5 $((secs + grace)) "${MPIRUN[@]}" -np "$NP" \
        "$BUILD/victim" "$secs" >"$LOG" 2>&1 &
    JOB=$!
    for _ in $(seq 1 300); do
        [[ $(grep -c "ports [0-9]*/[0-9]*" "$LOG" 2>/dev/null) -ge $NP ]] && break
        sleep 0.1
    done
    PORTS=$(job_ports)
    [[ $(wc -w <<<"$PORTS") -eq $((2 * NP)) ]]
}

# stalled: ", killed N s past its time" when the victim was killed
stalled() {
    if [[ $VRC -eq 124 || $VRC -eq 137 ]]; then
        echo ", killed $VICTIM_GRACE s past its time: stalled"
    fi
}

finish_victim() {
    wait "$JOB"
    VRC=$?
    VPASS=0
    if [[ $VRC -eq 0 ]] && grep -q '^PASS victim' "$LOG"; then
        VPASS=1
    fi
}

# thief NAME [LD_PRELOAD]: pmix_thief as nobody in the namespace, its
# entries in $BUILD/NAME.dump, its messages in $BUILD/NAME.err; sets
# STOLEN (entries read) and THIEF_SAID (its last message)
thief() {
    local name=$1 preload=${2:-} ns
    ns=$(job_nspace)
    netns_exec runuser -u nobody -- env ${preload:+LD_PRELOAD="$preload"} timeout 30 \
        "$BUILD/pmix_thief" "${ns:-unknown}" "$NP" 1 0 "btl.usnic.$OMPI_SERIES" </dev/null >"$BUILD/$name.dump" 2>"$BUILD/$name.err"
    STOLEN=$(grep -c '^entry rank=' "$BUILD/$name.dump")
    THIEF_SAID=$(grep -E 'PMIx_Init|PMIx_Get|layout' "$BUILD/$name.err" | head -1)
    [ -n "$THIEF_SAID" ] || THIEF_SAID=$(tail -1 "$BUILD/$name.dump")
}

# forge NAME: the sniffer, sealing with the keys of NAME's dump
forge() {
    # shellcheck disable=SC2086
    netns_exec env ATTACK_MODEX="$BUILD/$1.dump" timeout $((VICTIM_SECONDS + 10)) "$BUILD/dgram_attack" \
        frag-ahead-keyed "$VICTIM_SECONDS" $PORTS >"$BUILD/$1.forge" 2>&1
    SENT=$(sed -nE 's/.*sent ([0-9]+) forgeries.*/\1/p' "$BUILD/$1.forge" | tail -1)
}

# attack NAME COMPONENT_DIR [GRACE]: victim (GRACE: its VICTIM_GRACE),
# thief with the shim, forger, the victim's end.  Returns 1 if the thief read fewer entries than ranks
# (RESULT: why), 2 if the case failed before (reported)
attack() {
    local name=$1 dir=$2 grace=${3:-$VICTIM_GRACE}
    LOG=$BUILD/victim-$name.log
    if ! netns_create; then
        fail "$name" "cannot make a network namespace"
        return 2
    fi
    trap cleanup EXIT  # netns_create set its own
    if ! start_victim "$dir" "$VICTIM_SECONDS" "$grace"; then
        finish_victim
        fail "$name" "the job did not start (ports of $(wc -w <<<"$PORTS") of $((2 * NP)) channels)" "$LOG"
        netns_destroy
        return 2
    fi
    thief "$name" "$BUILD/libuid_shim.so"
    if [ "$STOLEN" -lt "$NP" ]; then
        finish_victim
        netns_destroy
        RESULT="the thief read $STOLEN of $NP ranks' entries (${THIEF_SAID:-no message})"
        return 1
    fi
    ok "$name: nobody read every rank's usnic modex through PMIx ($(tail -1 "$BUILD/$name.dump" | sed 's/^pmix_thief: //'))"
    forge "$name"
    finish_victim
    netns_destroy
    return 0
}

# With nothing read the verdict is NOT RUN on Open MPI 5 (what PMIx 5's
# server allows is measured, not assumed) and FAIL on 4.1, where the read
# is known to work: a thief that stops reading there proves nothing.
not_read() {
    if [ "$LAUNCHER" = orte ]; then
        fail "$1" "$RESULT: the attack proves nothing" "$BUILD/$2.err"
    else
        not_run "$1" "$RESULT"
    fi
}

DEFAULT_DIR=$(component default "")
MODEX_DIR=$(component modex-keys -DOPAL_BTL_USNIC_TEST_MODEX_KEYS=1)
echo "# builds: $(elapsed "$T0") s"

# --- (a) the component as built: keys beyond the modex ---
if [ -z "$DEFAULT_DIR" ]; then
    fail "build the component" "make failed" "$BUILD/build-default.log"
elif attack default "$DEFAULT_DIR"; then
    n=$(counter drop_bad_mac)
    if [[ $VPASS -ne 1 ]] && grep -q '^PASS victim' "$LOG"; then
        fail "forgery sealed with modex-derived keys" "the data verified, but the job did not end (exit $VRC$(stalled))" "$LOG"
    elif [[ $VPASS -ne 1 ]]; then
        fail "forgery sealed with modex-derived keys" "the job's data did not survive (exit $VRC$(stalled); $(grep -m1 -oE 'counter [0-9]+ arrived as 0x[0-9a-f]+' "$LOG" || echo no wrong value shown))" "$LOG"
    elif [[ ${SENT:-0} -le 0 ]]; then
        fail "forgery sealed with modex-derived keys" "the forger sent nothing" "$BUILD/default.forge"
    elif [[ $((2 * n)) -lt $SENT ]]; then
        fail "forgery sealed with modex-derived keys" "only $n counted as drop_bad_mac for $SENT forgeries" "$LOG"
    else
        ok "forgery sealed with modex-derived keys: refused, $n counted as drop_bad_mac for $SENT forgeries, the job's data verified"
    fi
elif [ $? -eq 1 ]; then
    not_read "default: thief" default
fi

# --- (b) the control: keys from the modex alone ---
if [ -z "$MODEX_DIR" ]; then
    fail "build the control component (-DOPAL_BTL_USNIC_TEST_MODEX_KEYS=1)" "make failed" "$BUILD/build-modex-keys.log"
# (forged counters stall the ring: 10 s of grace is enough to see them)
elif attack modex-keys "$MODEX_DIR" 10; then
    if [[ ${SENT:-0} -le 0 ]]; then
        fail "control, keys from the modex" "the forger sent nothing" "$BUILD/modex-keys.forge"
    elif grep -q 'arrived as' "$LOG"; then
        ok "control, keys from the modex: forged values reached MPI_Recv ($(grep -m1 -oE 'counter [0-9]+ arrived as 0x[0-9a-f]+' "$LOG"); $SENT forgeries, drop_bad_mac $(counter drop_bad_mac))"
    else
        fail "control, keys from the modex" "$SENT forgeries, no forged value reached MPI_Recv (pass=$VPASS, exit $VRC): the control is broken" "$LOG"
    fi
elif [ $? -eq 1 ]; then
    not_read "control: thief" modex-keys
fi

# --- nobody as itself: what the shim changes.  A job of its own, last:
# mpirun did not exit after such a refused connection (the ranks had
# finished; 4.1: 3 times of 3, 5.0.10: once of once), so it gets a short
# time limit, and that is noted, not judged (the runtime's, not the BTL's) ---
if [ -n "$DEFAULT_DIR" ] && netns_create; then
    trap cleanup EXIT
    LOG=$BUILD/victim-noshim.log
    if start_victim "$DEFAULT_DIR" 2 8; then
        thief noshim
        if [ "$STOLEN" -eq 0 ] && grep -q 'PMIx_Init' "$BUILD/noshim.err"; then
            ok "without uid_shim the PMIx server refuses nobody (${THIEF_SAID:-no message})"
        elif [ "$STOLEN" -eq 0 ]; then
            fail "without uid_shim" "the thief found no server to try (${THIEF_SAID:-no message})" "$BUILD/noshim.err"
        else
            fail "without uid_shim" "nobody read $STOLEN entries as itself" "$BUILD/noshim.dump"
        fi
        finish_victim
        if [[ $VPASS -ne 1 ]]; then
            echo "# note: after the refused connection the job did not end normally (exit $VRC, PASS printed: $(grep -c '^PASS victim' "$LOG"))"
        fi
    else
        finish_victim
        fail "without uid_shim" "the job did not start" "$LOG"
    fi
    netns_destroy
fi

echo "# $(elapsed "$T0") s"
finish
