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
