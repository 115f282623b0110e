# Helpers to run commands in a private network namespace whose UDP input
# drops a random share of datagrams (nftables).  Sourced by the fault
# tests.  Everything stays on the namespace's own loopback; the namespace
# is removed on exit, even on failure.

NETNS=""

netns_create() {
    NETNS="usnic-test-$$-$RANDOM"
    ip netns add "$NETNS" || return 1
    trap netns_destroy EXIT INT TERM
    ip -n "$NETNS" link set lo up || return 1
    ip netns exec "$NETNS" nft add table inet usnic_faults || return 1
    ip netns exec "$NETNS" nft add chain inet usnic_faults input \
        '{ type filter hook input priority 0; policy accept; }' || return 1
}

# netns_set_udp_loss PERCENT: replace the drop rule (0 = no rule)
netns_set_udp_loss() {
    ip netns exec "$NETNS" nft flush chain inet usnic_faults input || return 1
    if [[ "$1" -gt 0 ]]; then
        ip netns exec "$NETNS" nft add rule inet usnic_faults input \
            meta l4proto udp numgen random mod 100 '<' "$1" counter drop || return 1
    fi
}

# Datagrams the rule has dropped so far
netns_udp_dropped() {
    ip netns exec "$NETNS" nft list chain inet usnic_faults input |
        sed -nE 's/.*counter packets ([0-9]+).*/\1/p' | head -1
}

netns_exec() {
    ip netns exec "$NETNS" "$@"
}

netns_destroy() {
    if [[ -n "$NETNS" ]]; then
        ip netns del "$NETNS" 2>/dev/null
        NETNS=""
    fi
}

# netns_set_tcp_port_loss PERCENT MINPORT MAXPORT: drop PERCENT% of the TCP
# segments from or to ports MINPORT..MAXPORT (both directions of the
# connections to listeners in that range, e.g. btl_tcp pinned with
# btl_tcp_port_min_v4/btl_tcp_port_range_v4), in a chain of its own so the
# UDP rule above is left alone.  A counting rule without a verdict records
# every segment seen on those ports; 0 percent keeps only that one.
netns_set_tcp_port_loss() {
    local pct=$1 lo=$2 hi=$3 dir
    if ! ip netns exec "$NETNS" nft list chain inet usnic_faults tcp_ports >/dev/null 2>&1; then
        ip netns exec "$NETNS" nft add chain inet usnic_faults tcp_ports \
            '{ type filter hook input priority 1; policy accept; }' || return 1
    fi
    ip netns exec "$NETNS" nft flush chain inet usnic_faults tcp_ports || return 1
    ip netns exec "$NETNS" nft add rule inet usnic_faults tcp_ports \
        tcp dport "$lo-$hi" counter comment '"seen"' || return 1
    ip netns exec "$NETNS" nft add rule inet usnic_faults tcp_ports \
        tcp sport "$lo-$hi" counter comment '"seen"' || return 1
    if [[ "$pct" -gt 0 ]]; then
        for dir in dport sport; do
            ip netns exec "$NETNS" nft add rule inet usnic_faults tcp_ports \
                tcp "$dir" "$lo-$hi" numgen random mod 100 '<' "$pct" counter drop || return 1
        done
    fi
}

# Segments on the ports of netns_set_tcp_port_loss: "SEEN DROPPED"
netns_tcp_port_counts() {
    ip netns exec "$NETNS" nft list chain inet usnic_faults tcp_ports 2>/dev/null |
        awk '/counter packets/ {
                 for (i = 1; i < NF; i++) if ($i == "packets") n = $(i + 1)
                 if (/ drop/) d += n; else s += n
             }
             END { print s + 0, d + 0 }'
}
