#!/usr/bin/env bash
#
# The engine's headers read bottom-up: each includes only headers of a
# lower layer (the layers of btl_usnic_engine_core.h's comment, below),
# and no header of the component is part of an include cycle.  Run by
# make's unit-tests target (test/unit/Makefile.inc), which also compiles
# every header on its own.
#
#   test/unit/check-headers.sh btl_usnic*.h
#
# Prints nothing and exits 0 when the headers are layered.
set -uo pipefail

# Layer of each engine header; a header may include only lower layers.
# A new engine header must be placed here (the check says so).
declare -A LAYER=(
    [btl_usnic_proto.h]=0 [btl_usnic_seq.h]=0 [btl_usnic_auth.h]=0 [btl_usnic_batch.h]=0
    [btl_usnic_stats.h]=0 [btl_usnic_slab.h]=0 [btl_usnic_reg.h]=0 [btl_usnic_charge.h]=0
    [btl_usnic_frag.h]=1 [btl_usnic_pmtu.h]=1 [btl_usnic_pieces.h]=1 [btl_usnic_cc.h]=1
    [btl_usnic_engine_core.h]=2
    [btl_usnic_endpoint.h]=3
    [btl_usnic_complete.h]=4 [btl_usnic_acktr.h]=4 [btl_usnic_ack.h]=4 [btl_usnic_post.h]=4
    [btl_usnic_put.h]=4 [btl_usnic_send.h]=4 [btl_usnic_recv.h]=4 [btl_usnic_probe.h]=4
    [btl_usnic_glue.h]=5 [btl_usnic_pml.h]=5
    [btl_usnic_engine.h]=6
)
# The component's other headers (module, transports, tools) sit above the
# engine and are checked for cycles only.
ENGINE_FILES="btl_usnic_engine_core.c btl_usnic_frag.c btl_usnic_cc.c btl_usnic_pmtu.c btl_usnic_pieces.c btl_usnic_endpoint.c btl_usnic_complete.c btl_usnic_acktr.c
btl_usnic_ack.c btl_usnic_post.c btl_usnic_put.c btl_usnic_probe.c btl_usnic_send.c btl_usnic_recv.c btl_usnic_reg.c btl_usnic_glue.c"

bad=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

# the btl_usnic headers |file| includes, one a line
includes_of() {
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(btl_usnic[^"]*\.h\)".*/\1/p' "$1"
}

for h in "$@"; do
    name=$(basename "$h")
    while read -r inc; do
        [[ -n $inc ]] || continue
        echo "$name $inc" >>"$edges"
        [[ -n ${LAYER[$name]+x} ]] || continue
        if [[ -z ${LAYER[$inc]+x} ]]; then
            echo "$name includes $inc, which is not an engine header" >&2
            bad=1
        elif ((LAYER[$inc] >= LAYER[$name])); then
            echo "$name (layer ${LAYER[$name]}) includes $inc (layer ${LAYER[$inc]}): not a lower layer" >&2
            bad=1
        fi
    done < <(includes_of "$h")
done

# Every engine source file is covered: an engine .c includes engine headers only
dir=$(dirname "${1:-.}")
for c in $ENGINE_FILES; do
    [[ -f $dir/$c ]] || continue
    while read -r inc; do
        if [[ -n $inc && -z ${LAYER[$inc]+x} ]]; then
            echo "$c includes $inc, which is not an engine header" >&2
            bad=1
        fi
    done < <(includes_of "$dir/$c")
done

# Engine headers not in the table
for h in "$@"; do
    name=$(basename "$h")
    case $name in
    btl_usnic_engine*.h | btl_usnic_endpoint.h | btl_usnic_frag.h | btl_usnic_complete.h | btl_usnic_acktr.h | \
        btl_usnic_ack.h | btl_usnic_post.h | btl_usnic_send.h | btl_usnic_recv.h | btl_usnic_put.h | btl_usnic_glue.h)
        [[ -n ${LAYER[$name]+x} ]] || { echo "$name: give it a layer in $0" >&2; bad=1; } ;;
    esac
done

if ! tsort "$edges" >/dev/null 2>"$edges.err"; then
    echo "include cycle among the headers:" >&2
    sed 's/^/  /' "$edges.err" >&2
    bad=1
fi
rm -f "$edges.err"
exit $bad
