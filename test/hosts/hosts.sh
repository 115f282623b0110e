# Simulated hosts for multi-host tests of the usnic BTL (sourced, not run).
#
# hosts_create N (N = 2 or 3) builds, all inside network namespaces made
# for this run (names start with $HOSTS_PREFIX, unique per run):
#
#   $HOSTS_PREFIX-sw    a "switch": bridges br1 and br2, no addresses
#   $HOSTS_PREFIX-hd    the head node where mpirun runs: mgmt0 on br1,
#                       10.77.1.254/24 (mpirun's out-of-band TCP)
#   $HOSTS_PREFIX-h<i>  host i (1..N): veth1 on br1 = 10.77.1.<i>/24,
#                       veth2 on br2 = 10.77.2.<i>/24, and lo
#
# Every link is created directly inside the namespaces (ip -n ... netns),
# so no interface or address ever appears in the root namespace; there are
# no default routes and no NAT, so no traffic can leave.  hosts_destroy
# (installed as an EXIT/INT/TERM trap) kills what still runs inside the
# namespaces (by pid, from "ip netns pids") and deletes them.
#
# Processes run with their own UTS namespace whose hostname is the
# namespace's name (ns_run), so Open MPI sees one node name per host.
#
# Link options (environment, read by hosts_create):
#   HOSTS_MTU=N     MTU N (68..65535) on every veth (both ends: the hosts'
#                   veth1/veth2, the head's mgmt0, the switch's ports) and
#                   on both bridges; unset: the kernel's 1500
#   HOSTS_GSO=soft  a segmentation offload (GSO) send is cut into MTU-sized
#                   packets in software at the sender, travels the bridge
#                   as such, and is coalesced again (GRO) on the receiving
#                   host for a socket with UDP_GRO:
#                     hosts' veth1/veth2: tx-udp-segmentation off (else
#                       veth takes the whole GSO packet and nothing is ever
#                       cut), gro on (veth's NAPI receive path, where GRO
#                       runs), rx-udp-gro-forwarding on where the kernel
#                       has it
#                     the switch's ports: tso off.  veth hands a packet to
#                       its peer's GRO only if the sending end has no TSO
#                       or the packet belongs to a local socket
#                       (veth_skb_is_eligible_for_gro); what the bridge
#                       forwards belongs to no socket, so with TSO on the
#                       port the receiving host never coalesces
#                   (measured: test/hosts/README.md).  Needs ethtool.
#                   Unset: the kernel's defaults (a GSO send crosses the
#                   veths and the bridge as one 64 KB packet).

HOSTS_PREFIX=""
HOSTS_N=0
HOSTS_SW=""
HOSTS_HEAD=""
HOSTS=()            # host namespace names, index 0 = host 1
HOSTS_NET1=10.77.1
HOSTS_NET2=10.77.2

hosts_log() { [ -n "${HOSTS_VERBOSE:-}" ] && echo "hosts: $*" >&2; return 0; }

# ns_argv NS: sets NS_ARGV to the words that run a command in namespace
# NS with hostname NS ("${NS_ARGV[@]}" cmd args); each step execs, so the
# command keeps the pid (and "timeout ${NS_ARGV[@]} ..." times it out)
ns_argv() {
    NS_ARGV=(ip netns exec "$1" unshare --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' "$1")
}

# ns_run NS CMD...: run CMD in namespace NS with hostname NS
ns_run() {
    local NS_ARGV
    ns_argv "$1"
    shift
    "${NS_ARGV[@]}" "$@"
}

hosts_destroy() {
    local ns pid pass
    [ -n "$HOSTS_PREFIX" ] || return 0
    for ns in "${HOSTS[@]}" "$HOSTS_HEAD" "$HOSTS_SW"; do
        [ -n "$ns" ] && [ -e "/run/netns/$ns" ] || continue
        for pass in TERM KILL; do
            for pid in $(ip netns pids "$ns" 2>/dev/null); do
                kill -s "$pass" "$pid" 2>/dev/null
            done
            [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
            sleep 1
        done
        ip netns del "$ns" 2>/dev/null
    done
    hosts_log "destroyed $HOSTS_PREFIX"
    HOSTS_PREFIX=""
    HOSTS=()
    HOSTS_HEAD=""
    HOSTS_SW=""
}

# _hosts_link NS IFNAME BRIDGE PORTNAME [CIDR]: a veth from NS to a bridge
_hosts_link() {
    local ns=$1 ifname=$2 br=$3 port=$4 cidr=${5:-}
    ip -n "$HOSTS_SW" link add "$port" type veth peer name "$ifname" netns "$ns" || return 1
    ip -n "$HOSTS_SW" link set "$port" master "$br" up || return 1
    ip -n "$ns" link set "$ifname" up || return 1
    if [ -n "$cidr" ]; then
        ip -n "$ns" addr add "$cidr" dev "$ifname" || return 1
    fi
}

hosts_create() {
    local n=${1:-2} i ns
    if [ "$n" -lt 2 ] || [ "$n" -gt 3 ]; then
        echo "hosts_create: 2 or 3 hosts, not $n" >&2
        return 1
    fi
    HOSTS_PREFIX="usnh-$$-$RANDOM"
    HOSTS_N=$n
    HOSTS_SW=$HOSTS_PREFIX-sw
    HOSTS_HEAD=$HOSTS_PREFIX-hd
    HOSTS=()
    trap hosts_destroy EXIT
    trap 'hosts_destroy; exit 130' INT
    trap 'hosts_destroy; exit 143' TERM

    ip netns add "$HOSTS_SW" || return 1
    ip -n "$HOSTS_SW" link set lo up || return 1
    for i in 1 2; do
        ip -n "$HOSTS_SW" link add "br$i" type bridge || return 1
        ip -n "$HOSTS_SW" link set "br$i" up || return 1
    done

    ip netns add "$HOSTS_HEAD" || return 1
    ip -n "$HOSTS_HEAD" link set lo up || return 1
    _hosts_link "$HOSTS_HEAD" mgmt0 br1 hd1 "$HOSTS_NET1.254/24" || return 1

    for ((i = 1; i <= n; i++)); do
        ns=$HOSTS_PREFIX-h$i
        ip netns add "$ns" || return 1
        HOSTS+=("$ns")
        ip -n "$ns" link set lo up || return 1
        _hosts_link "$ns" veth1 br1 "h${i}p1" "$HOSTS_NET1.$i/24" || return 1
        _hosts_link "$ns" veth2 br2 "h${i}p2" "$HOSTS_NET2.$i/24" || return 1
    done
    hosts_links_options || return 1
    hosts_log "created $HOSTS_PREFIX: head $HOSTS_HEAD, hosts ${HOSTS[*]}"
}

# The switch's ports (the bridge side of every veth), one per line
_hosts_ports() {
    ip -n "$HOSTS_SW" -o link show type veth | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'
}

# _hosts_ethtool NS IF SETTING VALUE [SHOWN]: ethtool -K IF SETTING VALUE,
# then check that ethtool -k shows it under SHOWN (default SETTING; the
# short names tso and gro show as tcp-segmentation-offload and
# generic-receive-offload); a "[fixed]" one cannot change
_hosts_ethtool() {
    local ns=$1 ifname=$2 what=$3 val=$4 shown=${5:-$3} now
    ip netns exec "$ns" ethtool -K "$ifname" "$what" "$val" > /dev/null 2>&1
    now=$(ip netns exec "$ns" ethtool -k "$ifname" 2>/dev/null | sed -nE "s/^[[:space:]]*$shown: ([a-z]+).*/\\1/p")
    if [ "$now" != "$val" ]; then
        echo "hosts: $ns $ifname: ethtool -K $what $val did not take ($shown: '${now:-unknown}')" >&2
        return 1
    fi
}

# hosts_links_options: HOSTS_MTU and HOSTS_GSO (see the top of this file)
hosts_links_options() {
    local ns ifname port
    if [ -n "${HOSTS_MTU:-}" ]; then
        if ! [[ "$HOSTS_MTU" =~ ^[0-9]+$ ]] || [ "$HOSTS_MTU" -lt 68 ] || [ "$HOSTS_MTU" -gt 65535 ]; then
            echo "hosts: HOSTS_MTU='$HOSTS_MTU' is not an MTU (68..65535)" >&2
            return 1
        fi
        for port in $(_hosts_ports); do
            ip -n "$HOSTS_SW" link set "$port" mtu "$HOSTS_MTU" || return 1
        done
        for ifname in br1 br2; do
            ip -n "$HOSTS_SW" link set "$ifname" mtu "$HOSTS_MTU" || return 1
        done
        ip -n "$HOSTS_HEAD" link set mgmt0 mtu "$HOSTS_MTU" || return 1
        for ns in "${HOSTS[@]}"; do
            for ifname in veth1 veth2; do
                ip -n "$ns" link set "$ifname" mtu "$HOSTS_MTU" || return 1
            done
        done
        hosts_log "MTU $HOSTS_MTU on every veth and bridge"
    fi
    case "${HOSTS_GSO:-}" in
    "") ;;
    soft)
        command -v ethtool > /dev/null || { echo "hosts: HOSTS_GSO=soft needs ethtool" >&2; return 1; }
        for ns in "${HOSTS[@]}"; do
            for ifname in veth1 veth2; do
                _hosts_ethtool "$ns" "$ifname" tx-udp-segmentation off || return 1
                _hosts_ethtool "$ns" "$ifname" gro on generic-receive-offload || return 1
                if ip netns exec "$ns" ethtool -k "$ifname" | grep -q '^rx-udp-gro-forwarding:'; then
                    _hosts_ethtool "$ns" "$ifname" rx-udp-gro-forwarding on || return 1
                fi
            done
        done
        for port in $(_hosts_ports); do
            _hosts_ethtool "$HOSTS_SW" "$port" tso off tcp-segmentation-offload || return 1
        done
        hosts_log "HOSTS_GSO=soft: hosts' veths segment UDP in software and coalesce on receive; switch ports without TSO"
        ;;
    *)
        echo "hosts: HOSTS_GSO='$HOSTS_GSO': soft or unset" >&2
        return 1
        ;;
    esac
}

# hosts_describe: one line saying what the links are (for the suites' logs)
hosts_describe() {
    local mtu gso
    mtu=$(ip -n "${HOSTS[0]}" link show veth1 2>/dev/null | sed -nE 's/.* mtu ([0-9]+) .*/\1/p')
    gso=$(ip netns exec "${HOSTS[0]}" ethtool -k veth1 2>/dev/null |
          awk -F': ' '/^tx-udp-segmentation:|^generic-receive-offload:|^rx-udp-gro-forwarding:/ { printf "%s=%s ", $1, $2 }')
    echo "links: MTU ${mtu:-?} (HOSTS_MTU=${HOSTS_MTU:-unset}), HOSTS_GSO=${HOSTS_GSO:-unset}${gso:+; host veth1: $gso}"
}

# hosts_wait_ready: every bridge port forwards and every host interface
# is up (no STP, so this is quick)
hosts_wait_ready() {
    local try ns
    for try in $(seq 1 50); do
        if ! bridge -n "$HOSTS_SW" link show | grep -v -q 'state forwarding' &&
           [ "$(bridge -n "$HOSTS_SW" link show | grep -c 'state forwarding')" -eq $((2 * HOSTS_N + 1)) ]; then
            for ns in "${HOSTS[@]}"; do
                ip -n "$ns" -br link show up | grep -q '^veth1' || continue 2
                ip -n "$ns" -br link show up | grep -q '^veth2' || continue 2
            done
            return 0
        fi
        sleep 0.1
    done
    echo "hosts: links not ready" >&2
    bridge -n "$HOSTS_SW" link show >&2
    return 1
}

# hosts_hostfile FILE SLOTS: one line per host namespace
hosts_hostfile() {
    local h
    : > "$1" || return 1
    for h in "${HOSTS[@]}"; do
        echo "$h slots=$2" >> "$1"
    done
}

# hosts_setup N HOSTFILE LOG: the tools checked, N hosts built and ready
# (output in LOG), USNH_PREFIX exported for ns-agent.sh, and HOSTFILE with
# 2 slots per host.  On failure returns 1 with the reason in WHY.
hosts_setup() {
    local tool
    WHY=""
    for tool in ip bridge nft unshare; do
        command -v "$tool" > /dev/null || { WHY="$tool is missing"; return 1; }
    done
    if [ -n "${HOSTS_GSO:-}" ] && ! command -v ethtool > /dev/null; then
        WHY="HOSTS_GSO=$HOSTS_GSO needs ethtool (apt-get install ethtool)"
        return 1
    fi
    if ! hosts_create "$1" > "$3" 2>&1 || ! hosts_wait_ready >> "$3" 2>&1; then
        WHY="could not build the namespaces"
        return 1
    fi
    export USNH_PREFIX=$HOSTS_PREFIX
    hosts_hostfile "$2" 2
}

# hosts_job_passed LOG: the job's "PASS pingpong" line is in LOG.  Under
# Open MPI 5 it may land after mpirun returned (a CI log had it as
# " PASS pingpong" behind a NUL byte, written by a process still holding
# the log): wait up to 3 s for it
hosts_job_passed() {
    local i
    for i in $(seq 1 15); do
        grep -a -q '^[^[:alnum:]]*PASS pingpong' "$1" && return 0
        sleep 0.2
    done
    return 1
}

# hosts_drop_udp HOSTINDEX IFNAME [MINLEN]: drop UDP datagrams in and out
# of IFNAME inside host HOSTINDEX (1-based), with counters; with MINLEN,
# only those whose IP packet is longer than MINLEN bytes
hosts_drop_udp() {
    local ns=${HOSTS[$1 - 1]} ifname=$2 cond=()
    [ -n "${3:-}" ] && cond=(meta length \> "$3")
    ip netns exec "$ns" nft add table inet usnh_faults || return 1
    ip netns exec "$ns" nft add chain inet usnh_faults input \
        '{ type filter hook input priority 0; policy accept; }' || return 1
    ip netns exec "$ns" nft add chain inet usnh_faults output \
        '{ type filter hook output priority 0; policy accept; }' || return 1
    ip netns exec "$ns" nft add rule inet usnh_faults input \
        iifname "$ifname" meta l4proto udp ${cond[@]+"${cond[@]}"} counter drop || return 1
    ip netns exec "$ns" nft add rule inet usnh_faults output \
        oifname "$ifname" meta l4proto udp ${cond[@]+"${cond[@]}"} counter drop || return 1
}

hosts_undrop_udp() {
    ip netns exec "${HOSTS[$1 - 1]}" nft delete table inet usnh_faults 2>/dev/null
    return 0
}

# Datagrams dropped by hosts_drop_udp so far (in + out)
hosts_udp_dropped() {
    ip netns exec "${HOSTS[$1 - 1]}" nft list table inet usnh_faults 2>/dev/null |
        awk '/counter packets/ { for (i = 1; i < NF; i++) if ($i == "packets") n += $(i + 1) }
             END { print n + 0 }'
}

# A black hole in the switch: every UDP packet longer than SIZE bytes that
# crosses a bridge is dropped, without ICMP (nftables, bridge family,
# forward hook).  hosts_blackhole_on SIZE / hosts_blackhole_off /
# hosts_blackhole_dropped (packets dropped so far).
hosts_blackhole_on() {
    ip netns exec "$HOSTS_SW" nft -f - <<EOF
table bridge usnp {
    chain pathfwd {
        type filter hook forward priority 0; policy accept;
        ether type ip ip protocol udp ip length > $1 counter drop
    }
}
EOF
}
hosts_blackhole_off() { ip netns exec "$HOSTS_SW" nft delete table bridge usnp 2>/dev/null; return 0; }
hosts_blackhole_dropped() {
    ip netns exec "$HOSTS_SW" nft list table bridge usnp 2>/dev/null |
        awk '/counter packets/ { for (i = 1; i < NF; i++) if ($i == "packets") n += $(i + 1) } END { print n + 0 }'
}

# A bottleneck in the switch (issue 26): the switch's port toward host I
# on br1 (h<I>p1, the veth end in the -sw namespace; its egress is what
# host I receives on veth1) shaped by a token bucket at RATE with a
# drop-tail queue of LIMIT bytes, and with DELAY (netem) of base delay in
# front of it:
#   hosts_shape I RATE LIMIT [DELAY] [BURST]
#     e.g. hosts_shape 2 1gbit 100kb 1ms        (BURST default 32kb)
#   DELAY empty or 0: tbf alone as the root qdisc; else netem (delay
#   DELAY, a queue of 100000 packets, never the one that drops) as the
#   root and the tbf as its child, so a packet waits DELAY and then
#   queues behind the token bucket.  The tbf cuts a GSO packet longer
#   than BURST into segments before queueing them, so TCP's 64 KB
#   packets meet the same packet-sized queue as the usnic datagrams.
#   DELAY needs the kernel's sch_netem (hosts_have_netem says whether
#   it is there; this VM's 6.18 kernel has tbf, htb, pfifo and bfifo
#   only): without it hosts_shape with a DELAY fails and does nothing.
#   hosts_unshape I           removes it
#   hosts_shape_stat I NAME   the tbf's counter NAME: dropped (the
#                             drop-tail queue was full), overlimits
#                             (packets that had to wait for tokens),
#                             sent (packets), requeues
#   hosts_shape_show I        tc -s qdisc of the port (for the logs)
hosts_shape() {
    local port=h${1}p1 rate=$2 limit=$3 delay=${4:-0} burst=${5:-32kb}
    [ -n "$HOSTS_SW" ] || { echo "hosts_shape: no hosts" >&2; return 1; }
    ip netns exec "$HOSTS_SW" tc qdisc del dev "$port" root 2>/dev/null
    if [ "$delay" = 0 ]; then
        ip netns exec "$HOSTS_SW" tc qdisc add dev "$port" root handle 10: \
            tbf rate "$rate" burst "$burst" limit "$limit" || return 1
    else
        ip netns exec "$HOSTS_SW" tc qdisc add dev "$port" root handle 1: \
            netem delay "$delay" limit 100000 || return 1
        ip netns exec "$HOSTS_SW" tc qdisc add dev "$port" parent 1:1 handle 10: \
            tbf rate "$rate" burst "$burst" limit "$limit" || return 1
    fi
}
hosts_have_netem() {
    local ok=1
    ip netns exec "$HOSTS_SW" tc qdisc add dev hd1 root handle 7: netem delay 1ms > /dev/null 2>&1 && ok=0
    ip netns exec "$HOSTS_SW" tc qdisc del dev hd1 root > /dev/null 2>&1
    return $ok
}
hosts_unshape() {
    ip netns exec "$HOSTS_SW" tc qdisc del dev "h${1}p1" root 2>/dev/null
    return 0
}
hosts_shape_show() { ip netns exec "$HOSTS_SW" tc -s qdisc show dev "h${1}p1"; }
hosts_shape_stat() {
    hosts_shape_show "$1" | awk -v want="$2" '
        /^qdisc / { kind = $2 }
        kind == "tbf" && / Sent [0-9]+ bytes [0-9]+ pkt/ {
            for (i = 1; i < NF; i++) {
                k = $i; v = $(i + 1); gsub(/[(),]/, "", k); gsub(/[(),]/, "", v)
                if (k == "pkt" && want == "sent") n += $(i - 1)
                if (k == want) n += v
            }
        }
        END { print n + 0 }'
}
