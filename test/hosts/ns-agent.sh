#!/bin/bash
#
# ns-agent.sh - an "ssh" for mpirun's rsh launcher (--mca plm_rsh_agent)
# whose hosts are network namespaces made by test/hosts/hosts.sh.
#
#   ns-agent.sh [-options ...] HOST COMMAND WORDS...
#
# Like ssh, the command words are joined with spaces and run by a shell,
# here /bin/sh inside namespace HOST with a private UTS namespace whose
# hostname is HOST (so each orted and its ranks see their own node name).
# Only namespaces whose names start with $USNH_PREFIX (exported by the
# test) are entered; anything else is refused.

while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do
    shift       # ssh-style options (-x, -o ...) mean nothing here
done
host=${1:-}
shift
if [ -z "$host" ] || [ $# -eq 0 ]; then
    echo "ns-agent: usage: ns-agent.sh HOST COMMAND..." >&2
    exit 255
fi
case "$host" in
    *[!A-Za-z0-9._-]*)
        echo "ns-agent: bad host name '$host'" >&2
        exit 255 ;;
esac
if [ -z "${USNH_PREFIX:-}" ] || [ "${host#"$USNH_PREFIX"-}" = "$host" ]; then
    echo "ns-agent: '$host' is not a namespace of this test (USNH_PREFIX=${USNH_PREFIX:-unset})" >&2
    exit 255
fi
if [ ! -e "/run/netns/$host" ]; then
    echo "ns-agent: no network namespace '$host'" >&2
    exit 255
fi
exec ip netns exec "$host" unshare --uts -- /bin/sh -c "hostname $host && { $*; }"
