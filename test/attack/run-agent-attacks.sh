#!/usr/bin/env bash
#
# run-agent-attacks.sh - attacks on the usnic connectivity agent, on two
# simulated hosts (test/hosts/hosts.sh: network namespaces, veth1 on
# 10.77.1.0/24 with the head node at .254, veth2 on 10.77.2.0/24),
# launched by mpirun through test/hosts/ns-agent.sh.  Every attack is one
# ok/FAIL line that asserts both that the job's data stayed correct and
# that the attack was refused or counted.  The attacker is
# test/attack/agent_attack.c.
#
# Unprivileged attacker (uid nobody, setpriv), job A (a verified soak):
#   probe-flood   probes to host 2's agent: version-1 probes carrying the
#                 old cookie of every 16-bit job family, and version-2
#                 probes with random tags.  Before: one cookie was the
#                 job's and the agent echoed that probe to its source
#                 (a cookie oracle and a reflector).  Now: nothing comes
#                 back; the agent counts drop_malformed and, the source
#                 being nobody's own socket, drop_source_unpublished,
#                 before any tag is computed.
#   connect       every agent socket /proc/net/unix lists on host 2,
#                 asked to probe an address of the attacker's choice.
#                 Before: with a long session directory the socket was
#                 abstract, anyone could connect, and the agent probed
#                 whatever it was told.  Now: connect() is refused (the
#                 directory is the job user's, mode 0700), and no probe
#                 reaches the address.
#   connect-cap   the same with CAP_DAC_OVERRIDE (past the directory's
#                 permissions): the agent closes the connection after
#                 SO_PEERCRED (counted refused_client_uid), nothing probed.
# Attacker on the path (root in a host's namespace), job A:
#   reflect       capture a genuine probe on host 2's veth1 and replay it
#                 to host 2's agent from a forged source (the head node,
#                 where a socket listens).  Before: the echo went to the
#                 forged source (reflection, one echo per copy).  Then:
#                 the echoes went only to the address the probing agent
#                 published (echo_redirected, at most 64 per 200 ms).
#                 Now: a source no rank published is refused before the
#                 tag (drop_source_unpublished); nothing is echoed and the
#                 forged source gets nothing.
# Job B, UDP on veth1 dropped in host 2 (a broken path):
#   forge-echo    on host 1, every probe its agent sends on veth1 comes
#                 back at once "from" host 2's agent: the probe with its
#                 type byte made "echo", and echoes for guessed check ids
#                 (1, 2, ... as version 1 numbered them, and the real id)
#                 with random tags.  Before: the type-flipped copy was a
#                 valid echo and the broken path passed.  Now: all are
#                 drop_unauthentic or, beyond what host 2's address may
#                 send per connectivity_timeout, drop_source_rate (no
#                 tag computed), the veth1 pair fails ("no probe of any
#                 size") and the job completes over veth2.
# Jobs C1 and C2, with 2 ranks per host (local rank 1 finds the agent
# through the modex):
#   squat-names   before the job, the attacker binds every abstract name
#                 the old agent would use on both hosts (one per job
#                 family), and the job's session directory path is too
#                 long for a socket.  Before: the agent fell back to that
#                 abstract name, could not bind it, and no pair was
#                 checked.  Now: the agent listens in a private mkdtemp
#                 directory (removed at the end), every check passes.
#   squat-files   before the job, the attacker makes the top session
#                 directory of both hosts and, for every job family, a
#                 directory where the old agent's socket would go.  Now:
#                 the agent starts (in the session directory if it is
#                 ours and private, else a private one) and every check
#                 passes.
#
# Job D, an almost idle job (idle_victim.c):
#   junk          nobody floods host 2's agent for JUNK_SECONDS (3) with
#                 well-formed probes with random tags, 65000 bytes (3 of
#                 4) and 1200 bytes, from its own socket.  Before: the
#                 agent computed the tag of each (88 us for 65000 bytes),
#                 +640 to +1190 ms of rank 1's CPU in 3 s (21-40 % of a
#                 core).  Now:
#                 drop_too_large and drop_source_unpublished count them,
#                 no tag is computed (tags_checked stays at the job's own
#                 few), and rank 1's CPU time in the flood stays within
#                 JUNK_CPU_MS_PER_S (50) per second of the same job's
#                 quiet time.
#
# That these attacks work against the old behaviour was checked with a
# build whose agent echoes to the datagram's source, skips the tag check
# and skips SO_PEERCRED: probe-flood, connect-cap, reflect (190 echoes at
# the forged source) and forge-echo (host 1's check of the broken path
# passed, the job then lost its data on veth1) FAIL with it.
#
# Needs root (namespaces, raw sockets, setpriv).  Honours
# OMPI_MCA_mca_base_component_path (a private build's component
# directory; mpirun passes it on).  Environment: TEST_TIMEOUT (120 s per
# job), SOAK_SECONDS (12), ATTACK_BUILD_DIR, MPICC, MPIRUN, CC.  Output
# "ok"/"FAIL" lines and "N passed, N failed"; namespaces, attacker
# processes and files are removed on exit.

set -u
set -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HOSTS_DIR=$(cd "$SCRIPT_DIR/../hosts" && pwd)
AGENT=$HOSTS_DIR/ns-agent.sh
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
SOAK_SECONDS=${SOAK_SECONDS:-12}
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}
CC=${CC:-cc}
# shellcheck source=../lib.sh
. "$SCRIPT_DIR/../lib.sh"  # use_build_dir
use_build_dir "${ATTACK_BUILD_DIR:-$SCRIPT_DIR/build}"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# shellcheck source=../hosts/hosts.sh
source "$HOSTS_DIR/hosts.sh"
FAIL_TAIL=30
# shellcheck source=../report.sh
source "$SCRIPT_DIR/../report.sh"

NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
NOBODY_CAP=(setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=+dac_override
            --ambient-caps=+dac_override)
VICTIM_PORT=7777   # the forged source of replayed probes (head node)
TARGET_PORT=7778   # where connecting attackers ask the agent to probe (head node)
PIDS=()            # attacker processes of this run
ATTACK_TMP=""

cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null
    done
    wait 2>/dev/null
    [ -n "$ATTACK_TMP" ] && rm -rf "$ATTACK_TMP"
    for h in "${HOSTS[@]}"; do
        rm -rf "/tmp/ompi.$h.0" "/tmp/usnic-squat-$h"
    done
    hosts_destroy
}

if [ "$(id -u)" -ne 0 ]; then
    fail "setup" "needs root (namespaces, raw sockets, setpriv)"
    finish
fi
if [ -n "${OMPI_MCA_mca_base_component_path:-}" ]; then
    echo "# components from $OMPI_MCA_mca_base_component_path"
fi
if ! "$CC" -Wall -Wextra -Werror -O2 -g -o "$BUILD_DIR/agent_attack" "$SCRIPT_DIR/agent_attack.c" \
        > "$LOG_DIR/build.log" 2>&1 ||
   ! "$MPICC" -Wall -Wextra -Werror -O2 -g -o "$BUILD_DIR/soak" "$SCRIPT_DIR/../faults/soak.c" \
        >> "$LOG_DIR/build.log" 2>&1 ||
   ! "$MPICC" -Wall -Wextra -Werror -O2 -g -o "$BUILD_DIR/pingpong" "$SCRIPT_DIR/../mpi/pingpong.c" \
        >> "$LOG_DIR/build.log" 2>&1 ||
   ! "$MPICC" -Wall -Wextra -Werror -O2 -g -o "$BUILD_DIR/idle_victim" "$SCRIPT_DIR/idle_victim.c" \
        >> "$LOG_DIR/build.log" 2>&1; then
    fail "build" "compiler failed" "$LOG_DIR/build.log"
    finish
fi
HOSTFILE=$BUILD_DIR/hostfile
if ! hosts_setup 2 "$HOSTFILE" "$LOG_DIR/hosts.log"; then
    fail "setup 2 hosts" "$WHY" "$LOG_DIR/hosts.log"
    finish
fi
trap cleanup EXIT INT TERM
H1=${HOSTS[0]}
H2=${HOSTS[1]}
HEAD_IP=$HOSTS_NET1.254
# the attacker runs from a directory any user can read (the tree may not be)
ATTACK_TMP=$(mktemp -d /tmp/usnic-attack-XXXXXX) && chmod 755 "$ATTACK_TMP" &&
    cp "$BUILD_DIR/agent_attack" "$ATTACK_TMP/" && chmod 755 "$ATTACK_TMP/agent_attack" || exit 2
ATTACK=$ATTACK_TMP/agent_attack
ok "setup: hosts $H1 $H2, attacker $ATTACK"

BASE_ARGS=(--allow-run-as-root --hostfile "$HOSTFILE" --bind-to none
           $(rsh_agent_args "$AGENT") $(oob_net_args "$HOSTS_NET1.0/24")
           --mca pml ob1 --mca btl usnic,self --mca btl_usnic_stats 3600 --mca btl_usnic_verbose 5
           --mca btl_usnic_if_include "$HOSTS_NET1.0/24,$HOSTS_NET2.0/24"
           --mca btl_usnic_connectivity_timeout 100 --mca btl_usnic_connectivity_retries 3)

in_ns() {   # in_ns NS CMD...: CMD in namespace NS
    local ns=$1
    shift
    ip netns exec "$ns" "$@"
}

# start_job LOG ARGS...: mpirun in the head node, in the background (JOB)
start_job() {
    local log=$1 NS_ARGV
    shift
    ns_argv "$HOSTS_HEAD"
    timeout -k 10 "$TEST_TIMEOUT" "${NS_ARGV[@]}" "$MPIRUN" "${BASE_ARGS[@]}" "$@" > "$log" 2>&1 < /dev/null &
    JOB=$!
}

# wait_job: sets RC
wait_job() {
    wait "$JOB"
    RC=$?
}

# agent_port LOG HOST IP: the agent's UDP port on IP, from its verbose line
# (waits up to 60 s for it)
agent_port() {
    local log=$1 host=$2 ip=$3 port
    for _ in $(seq 1 600); do
        port=$(grep "connectivity agent on $host:" "$log" 2>/dev/null | grep -o "$ip:[0-9]*" | head -1 | cut -d: -f2)
        [ -n "$port" ] && { echo "$port"; return 0; }
        sleep 0.1
    done
    return 1
}

# counter LOG HOST NAME: NAME=N of HOST's agent line (0 if not printed)
counter() {
    grep -o "connectivity agent \[$2\]: .*" "$1" | grep -o " $3=[0-9]*" | head -1 | cut -d= -f2 | grep . || echo 0
}

# job_ok LOG NAME: the job's data were verified (sets WHY otherwise)
job_ok() {
    WHY=""
    if [ "$RC" -ne 0 ] || ! grep -q "^PASS $2" "$1"; then
        WHY="the job failed (exit $RC, no PASS $2)"
        return 1
    fi
}

# bg_attacker LOG NS CMD...: an attacker process in namespace NS, in the
# background (its pid in LAST_PID and PIDS: ip and setpriv exec it); it
# prints its totals when stopped (SIGTERM)
bg_attacker() {
    local log=$1 ns=$2
    shift 2
    ip netns exec "$ns" "$@" > "$log" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

# ---------------------------------------------------------------------
# Job A: a verified soak between the hosts, attacked from everywhere
# ---------------------------------------------------------------------
logA=$LOG_DIR/jobA.log
bg_attacker "$LOG_DIR/victim.log" "$HOSTS_HEAD" "$ATTACK" listen "$HEAD_IP" "$VICTIM_PORT" $((SOAK_SECONDS + 40))
victim_pid=$LAST_PID
bg_attacker "$LOG_DIR/target.log" "$HOSTS_HEAD" "$ATTACK" listen "$HEAD_IP" "$TARGET_PORT" $((SOAK_SECONDS + 40))
target_pid=$LAST_PID
bg_attacker "$LOG_DIR/replay.log" "$H2" "$ATTACK" replay veth1 "$HOSTS_NET1.2" "$HEAD_IP" "$VICTIM_PORT" 100 3 60
replay_pid=$LAST_PID
sleep 0.5   # listeners bound, capture open
start_job "$logA" -np 2 --map-by node "$BUILD_DIR/soak" "$SOAK_SECONDS"
if ! PORT2=$(agent_port "$logA" "$H2" "$HOSTS_NET1.2"); then
    kill "$JOB" 2>/dev/null
    wait_job
    fail "job A" "host 2's agent never said where it listens" "$logA"
    finish
fi
in_ns "$H2" "${NOBODY[@]}" "$ATTACK" flood "$HOSTS_NET1.2" "$PORT2" 2000 > "$LOG_DIR/flood.log" 2>&1
paths=$(in_ns "$H2" awk '/usnic-cagent/ { print $NF }' /proc/net/unix | sort -u)
: > "$LOG_DIR/connect.log"
: > "$LOG_DIR/connect-cap.log"
for p in $paths; do
    in_ns "$H2" "${NOBODY[@]}" "$ATTACK" connect "$p" "$HOSTS_NET1.2" "$HEAD_IP" "$TARGET_PORT" \
        >> "$LOG_DIR/connect.log" 2>&1
    in_ns "$H2" "${NOBODY_CAP[@]}" "$ATTACK" connect "$p" "$HOSTS_NET1.2" "$HEAD_IP" "$TARGET_PORT" \
        >> "$LOG_DIR/connect-cap.log" 2>&1
done
wait_job
wait "$replay_pid" 2>/dev/null
kill "$victim_pid" "$target_pid" 2>/dev/null
wait "$victim_pid" "$target_pid" 2>/dev/null
job_ok "$logA" soak
jobA_ok=$?
jobA_why=$WHY
victim=$(sed -n 's/.*received \([0-9]*\) datagrams.*/\1/p' "$LOG_DIR/victim.log")
target=$(sed -n 's/.*received \([0-9]*\) datagrams.*/\1/p' "$LOG_DIR/target.log")

# probe-flood
flood=$(grep '^flood' "$LOG_DIR/flood.log")
sent_v1=$(sed -n 's/.*sent \([0-9]*\) version-1.*/\1/p' <<< "$flood")
sent_v2=$(sed -n 's/.* and \([0-9]*\) version-2.*/\1/p' <<< "$flood")
echoes=$(sed -n 's/.*received \([0-9]*\) datagrams.*/\1/p' <<< "$flood")
malformed=$(counter "$logA" "$H2" drop_malformed)
unpublished=$(counter "$logA" "$H2" drop_source_unpublished)
name="probe-flood (nobody: $sent_v1 old-cookie probes, one per job family, and $sent_v2 forged tags)"
if [ "$jobA_ok" -ne 0 ]; then
    fail "$name" "$jobA_why" "$logA"
elif [ -z "$echoes" ] || [ "$echoes" -ne 0 ]; then
    fail "$name" "the attacker got ${echoes:-?} datagrams back" "$LOG_DIR/flood.log"
elif [ "$malformed" -lt 1 ] || [ "$unpublished" -lt $((sent_v2 / 2)) ]; then
    fail "$name" "counted drop_malformed=$malformed drop_source_unpublished=$unpublished" "$logA"
else
    ok "$name: no echo; agent counted drop_malformed=$malformed drop_source_unpublished=$unpublished; soak data verified"
fi

# connect
npaths=$(grep -c . <<< "$paths")
refused=$(grep -c ': refused' "$LOG_DIR/connect.log")
name="connect (nobody, to the $npaths agent socket(s) of /proc/net/unix on host 2)"
if [ "$jobA_ok" -ne 0 ]; then
    fail "$name" "$jobA_why" "$logA"
elif [ "$npaths" -lt 1 ] || [ "$refused" -ne "$npaths" ]; then
    fail "$name" "$refused of $npaths connections refused" "$LOG_DIR/connect.log"
elif [ "${target:-1}" -ne 0 ]; then
    fail "$name" "the attacker's target got $target probes" "$LOG_DIR/target.log"
else
    ok "$name: $(head -1 "$LOG_DIR/connect.log"); target got 0 probes; soak data verified"
fi

# connect-cap
closed=$(grep -c 'closed by the agent' "$LOG_DIR/connect-cap.log")
uid_refused=$(counter "$logA" "$H2" refused_client_uid)
name="connect-cap (nobody with CAP_DAC_OVERRIDE, past the directory's permissions)"
if [ "$jobA_ok" -ne 0 ]; then
    fail "$name" "$jobA_why" "$logA"
elif [ "$npaths" -lt 1 ] || [ "$closed" -ne "$npaths" ] || [ "$uid_refused" -lt "$npaths" ]; then
    fail "$name" "$closed of $npaths closed by the agent, refused_client_uid=$uid_refused" "$LOG_DIR/connect-cap.log"
elif [ "${target:-1}" -ne 0 ]; then
    fail "$name" "the attacker's target got $target probes" "$LOG_DIR/target.log"
else
    ok "$name: closed by the agent (refused_client_uid=$uid_refused), target got 0 probes; soak data verified"
fi

# reflect
captured=$(grep -c '^replay: captured' "$LOG_DIR/replay.log")
copies=$(sed -n 's/^replay: sent \([0-9]*\) copies.*/\1/p' "$LOG_DIR/replay.log")
redirected=$(counter "$logA" "$H2" echo_redirected)
unpublished=$(counter "$logA" "$H2" drop_source_unpublished)
name="reflect (root on host 2: a captured probe replayed from the forged source $HEAD_IP:$VICTIM_PORT)"
if [ "$jobA_ok" -ne 0 ]; then
    fail "$name" "$jobA_why" "$logA"
elif [ "$captured" -ne 1 ] || [ "${copies:-0}" -lt 1 ]; then
    fail "$name" "no probe captured or replayed" "$LOG_DIR/replay.log"
elif [ "${victim:-1}" -ne 0 ]; then
    fail "$name" "the forged source got $victim echoes" "$LOG_DIR/victim.log"
elif [ "$unpublished" -lt $(((sent_v2 + copies) / 2)) ] || [ "$redirected" -ne 0 ]; then
    # the probe-flood's forged probes count there too
    fail "$name" "drop_source_unpublished=$unpublished of $sent_v2 + $copies, echo_redirected=$redirected" "$logA"
else
    ok "$name: $copies copies, forged source got 0; drop_source_unpublished=$unpublished (before the tag), echo_redirected=0; soak data verified"
fi

# ---------------------------------------------------------------------
# Job B: a broken path (all UDP dropped on veth1 in host 2), forged echoes
# ---------------------------------------------------------------------
logB=$LOG_DIR/jobB.log
name="forge-echo (root on host 1: probes made echoes, and guessed check ids, on a broken path)"
if ! hosts_drop_udp 2 veth1 > "$LOG_DIR/nft.log" 2>&1; then
    fail "$name" "nft rules could not be added" "$LOG_DIR/nft.log"
else
    bg_attacker "$LOG_DIR/forge.log" "$H1" "$ATTACK" forge-echo veth1 "$HOSTS_NET1.1" 50 30
    forge_pid=$LAST_PID
    sleep 0.5
    start_job "$logB" -np 2 --map-by node "$BUILD_DIR/pingpong"
    wait_job
    kill -TERM "$forge_pid" 2>/dev/null
    wait "$forge_pid" 2>/dev/null
    hosts_undrop_udp 2
    forged=$(sed -n 's/.*sent \([0-9]*\) of them back as echoes and \([0-9]*\) echoes.*/\1 \2/p' "$LOG_DIR/forge.log")
    read -r flipped guessed <<< "${forged:-0 0}"
    unauth=$(counter "$logB" "$H1" drop_unauthentic)
    src_rate=$(counter "$logB" "$H1" drop_source_rate)
    failed=$(counter "$logB" "$H1" failed)
    msg=$(grep -A12 "^The usnic BTL.s connectivity checker" "$logB" | grep -c "Failed probe size: *64 and 1252 bytes (no probe")
    if [ "$flipped" -lt 1 ] || [ "$guessed" -lt 1 ]; then
        fail "$name" "nothing forged (the attacker saw no probe)" "$LOG_DIR/forge.log"
    elif [ "$failed" -lt 1 ] || [ "$msg" -lt 1 ]; then
        fail "$name" "the broken path PASSED its check on host 1 (failed=$failed; $msg failure messages; exit $RC)" "$logB"
    elif ! job_ok "$logB" pingpong; then
        fail "$name" "$WHY" "$logB"
    elif [ "$unauth" -lt 1 ] || [ $((unauth + src_rate)) -lt $(((flipped + guessed) / 2)) ]; then
        fail "$name" "host 1 counted drop_unauthentic=$unauth drop_source_rate=$src_rate of $((flipped + guessed)) forged" "$logB"
    else
        ok "$name: $flipped type-flipped and $guessed guessed echoes refused (drop_unauthentic=$unauth, drop_source_rate=$src_rate before the tag); the veth1 check FAILED as it must, pingpong completed over veth2"
    fi
fi

# ---------------------------------------------------------------------
# Jobs C: names squatted before the job, 2 ranks per host
# ---------------------------------------------------------------------

# check_squat_job LOG NAME DETAIL: the job passed, both agents started
# and every check passed, local rank 1 included
check_squat_job() {
    local log=$1 name=$2 detail=$3 h agents ok_pairs
    if ! job_ok "$log" pingpong; then
        fail "$name" "$WHY" "$log"
        return
    fi
    agents=$(grep -c "connectivity agent on .*listening on" "$log")
    ok_pairs=$(grep -o 'btl:usnic connectivity \[[^]]*\]: pairs=2 ok=2 failed=0 refused=0 unchecked=0' "$log" | grep -c .)
    for h in "$H1" "$H2"; do
        if [ "$(counter "$log" "$h" failed)" -ne 0 ] || [ "$(counter "$log" "$h" ok)" -lt 2 ]; then
            fail "$name" "$h's agent: ok=$(counter "$log" "$h" ok) failed=$(counter "$log" "$h" failed)" "$log"
            return
        fi
    done
    if [ "$agents" -ne 2 ] || [ "$ok_pairs" -ne 4 ]; then
        fail "$name" "$agents agents started, $ok_pairs of 4 processes had both pairs checked ok" "$log"
        return
    fi
    ok "$name: $detail; both agents started, all 4 processes' pairs checked ok; pingpong data verified"
}

# squat-names: the session directory path too long for a socket, every
# abstract name taken on both hosts
logC1=$LOG_DIR/jobC1.log
name="squat-names (nobody holds every abstract name of the old agent on both hosts; long session path)"
LONG_BASE=$ATTACK_TMP/$(printf 'l%.0s' $(seq 1 80))
mkdir -p "$LONG_BASE" && chmod 1777 "$LONG_BASE"
held=0
for h in "$H1" "$H2"; do
    for k in 0 1 2 3; do
        bg_attacker "$LOG_DIR/squat-$h-$k.log" "$h" "${NOBODY[@]}" "$ATTACK" squat-names "$h" $((k * 16384)) 16384
    done
done
for _ in $(seq 1 300); do
    held=$(for h in "$H1" "$H2"; do in_ns "$h" grep -c '@usnic-cagent-' /proc/net/unix; done | awk '{ s += $1 } END { print s + 0 }')
    [ "$held" -ge 131072 ] && break
    sleep 0.2
done
if [ "$held" -lt 131072 ]; then
    fail "$name" "only $held of 131072 names taken" "$LOG_DIR/squat-$H1-0.log"
else
    # the session directories' base: ORTE's orte_tmpdir_base; PRRTE's
    # prte_tmpdir_base, for mpirun and the daemons it starts (5.0's mpirun
    # ignores orte_tmpdir_base: the agents listened in /tmp/prted.PID/1)
    if [ "$LAUNCHER" = orte ]; then
        TMPDIR_ARGS=(--mca orte_tmpdir_base "$LONG_BASE")
    else
        TMPDIR_ARGS=(--prtemca prte_tmpdir_base "$LONG_BASE")
    fi
    start_job "$logC1" -np 4 "${TMPDIR_ARGS[@]}" "$BUILD_DIR/pingpong"
    wait_job
    dirs=$(grep -o 'listening on [^ ]*usnic-cagent-[A-Za-z0-9]*/' "$logC1" | sed 's/listening on //')
    left=$(for d in $dirs; do [ -e "$d" ] && echo "$d"; done | grep -c .)
    if [ "$(grep -c '(private directory)' "$logC1")" -ne 2 ] || [ "$left" -ne 0 ]; then
        fail "$name" "agents not in private directories, or $left left behind" "$logC1"
    else
        check_squat_job "$logC1" "$name" "$held names held; agents listened in private mkdtemp directories, removed at the end"
    fi
fi
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
wait "${PIDS[@]}" 2>/dev/null
PIDS=()

# squat-files: the top session directory and the old agent's socket path
# of every job family made by the attacker on both hosts
logC2=$LOG_DIR/jobC2.log
name="squat-files (nobody made every host's top session directory and the old socket path of every job family)"
made=0
if [ "$LAUNCHER" = orte ]; then
    for h in "$H1" "$H2"; do
        n=$(in_ns "$h" "${NOBODY[@]}" "$ATTACK" squat-files "$h" /tmp | sed -n 's/.*made \([0-9]*\) socket.*/\1/p')
        made=$((made + ${n:-0}))
    done
fi
if [ "$LAUNCHER" != orte ]; then
    # agent_attack.c's squat-files makes ORTE's layout (TMP/ompi.HOST.0/
    # jfN/...); PRRTE's session directories are TMP/prted.PID/JOB, made by
    # each daemon, so on 5.0 the attack squats nothing the job would use
    # (it "passed" only because of that).  A PRRTE attacker is C code not
    # written yet.
    not_run "$name" "the attacker squats ORTE's session paths (/tmp/ompi.HOST.0/...); PRRTE (Open MPI 5) uses /tmp/prted.PID/JOB, which agent_attack.c does not make yet"
elif [ "$made" -lt 131072 ]; then
    fail "$name" "only $made of 131072 paths made"
else
    start_job "$logC2" -np 4 "$BUILD_DIR/pingpong"
    wait_job
    where=$(grep -o 'listening on [^ ]*' "$logC2" | sed 's/listening on //' | tr '\n' ' ')
    check_squat_job "$logC2" "$name" "$made paths made; agents listened on $where"
fi
for h in "$H1" "$H2"; do
    rm -rf "/tmp/ompi.$h.0" "/tmp/usnic-squat-$h"
done

# ---------------------------------------------------------------------
# Job D: junk probes from nobody at host 2's agent while a victim runs
# ---------------------------------------------------------------------

# rank_pid NS PROG: the pid of the job's process PROG in namespace NS
# (waits up to 30 s; the namespaces share the pid space)
rank_pid() {
    local p
    for _ in $(seq 1 300); do
        for p in $(ip netns pids "$1" 2>/dev/null); do
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && { echo "$p"; return 0; }
        done
        sleep 0.1
    done
    return 1
}

# cpu_ms PID: the process's user + system time so far, in ms
cpu_ms() {
    awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat" 2>/dev/null || echo -1
}

logD=$LOG_DIR/jobD.log
JUNK_SECONDS=${JUNK_SECONDS:-3}
JUNK_SIZE=65000
name="junk (nobody: well-formed probes with random tags, $JUNK_SIZE and 1200 bytes, for $JUNK_SECONDS s at host 2's agent)"
start_job "$logD" -np 2 --map-by node "$BUILD_DIR/idle_victim" $((2 * JUNK_SECONDS + 4))
if ! PORT2=$(agent_port "$logD" "$H2" "$HOSTS_NET1.2") || ! vpid=$(rank_pid "$H2" idle_victim); then
    kill "$JOB" 2>/dev/null
    wait_job
    fail "$name" "host 2's agent never said where it listens, or its process was not found" "$logD"
else
    sleep 1 # the pairs' checks are over
    # the same victim, quiet then flooded, for the same time
    c0=$(cpu_ms "$vpid")
    sleep "$JUNK_SECONDS"
    c1=$(cpu_ms "$vpid")
    bg_attacker "$LOG_DIR/junk.log" "$H2" "${NOBODY[@]}" "$ATTACK" junk "$HOSTS_NET1.2" "$PORT2" "$JUNK_SECONDS" \
        "$JUNK_SIZE"
    junk_pid=$LAST_PID
    sleep "$JUNK_SECONDS"
    c2=$(cpu_ms "$vpid")
    wait "$junk_pid"
    wait_job
    quiet=$((c1 - c0))
    flooded=$((c2 - c1))
    junk=$(grep '^junk' "$LOG_DIR/junk.log")
    sent_large=$(sed -n 's/.*sent \([0-9]*\) probes of.*/\1/p' <<< "$junk")
    sent_small=$(sed -n 's/.* and \([0-9]*\) of 1200 bytes.*/\1/p' <<< "$junk")
    echoes=$(sed -n 's/.*received \([0-9]*\) datagrams.*/\1/p' <<< "$junk")
    too_large=$(counter "$logD" "$H2" drop_too_large)
    unpublished=$(counter "$logD" "$H2" drop_source_unpublished)
    tags=$(counter "$logD" "$H2" tags_checked)
    unauth=$(counter "$logD" "$H2" drop_unauthentic)
    # The bound: JUNK_CPU_MS_PER_S of rank 1's CPU time a second beyond
    # the quiet window's.  Measured (2-core VM, a CI run beside it, 3 s):
    # quiet 60-100 ms; flooded, with the cheap checks, 50-140 ms (-20 to
    # +40 ms over quiet on 4.1, +10 to +50 on 5.0); without them (the tag
    # first: the build before them) +640 to +1190 ms (36000-53000 tags).
    # 50 ms a second is 5 % of a core: 4 to 8 times below the tag-first
    # cost, 3 times above the largest difference seen with the checks.
    bound=$((${JUNK_CPU_MS_PER_S:-50} * JUNK_SECONDS))
    detail="quiet ${quiet} ms, flooded ${flooded} ms of CPU in $JUNK_SECONDS s; drop_too_large=$too_large drop_source_unpublished=$unpublished tags_checked=$tags drop_unauthentic=$unauth"
    if ! job_ok "$logD" idle_victim; then
        fail "$name" "$WHY" "$logD"
    elif [ -z "$echoes" ] || [ "$echoes" -ne 0 ]; then
        fail "$name" "the attacker got ${echoes:-?} datagrams back" "$LOG_DIR/junk.log"
    elif [ "${sent_large:-0}" -lt 100 ] || [ "${sent_small:-0}" -lt 100 ]; then
        fail "$name" "the flood sent too little to tell (${sent_large:-0} large, ${sent_small:-0} small)" "$LOG_DIR/junk.log"
    elif [ "$too_large" -lt 100 ] || [ "$unpublished" -lt 100 ]; then
        fail "$name" "the junk was not counted by reason: $detail" "$logD"
    elif [ "$tags" -gt 100 ] || [ "$unauth" -ne 0 ]; then
        # the job's own probes and echoes are a few dozen tags
        fail "$name" "tags were computed for junk: $detail" "$logD"
    elif [ "$quiet" -lt 0 ] || [ "$flooded" -lt 0 ] || [ "$flooded" -gt $((quiet + bound)) ]; then
        fail "$name" "the flood cost host 2's rank more than $bound ms of CPU: $detail" "$logD"
    else
        ok "$name: $sent_large large and $sent_small small sent, none answered; $detail; victim data verified"
    fi
fi

finish
