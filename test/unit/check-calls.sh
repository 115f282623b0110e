#!/usr/bin/env bash
#
# Calls between the component's objects go one way: resolve every
# undefined symbol of each object (nm -u) to the object that defines it
# (nm --defined-only, types T D B R C), and fail if the objects checked
# form a circle.  A reference to a global data object is an edge too.
# check-headers.sh reads #include lines only, which hide such circles.
#
#   test/unit/check-calls.sh [-v] BUILD_DIR [SOURCE.c ...]
#
# BUILD_DIR holds btl_usnic_*.o (the Makefile's $(BUILD)).  The sources
# name the objects checked (default: ENGINE_SRCS of the Makefile beside
# this script's test/unit/; make checks COMPONENT_SRCS, every object of
# the plugin); a circle among them prints its objects and
# the symbols of each edge, and fails.  Circles through the other objects
# print as "not yet checked:" warnings.  -v also prints every edge among
# the objects checked.  Run by make's unit-tests target
# (test/unit/Makefile.inc, CALLS_CHECKED).
set -uo pipefail

verbose=0
if [[ ${1:-} == -v ]]; then
    verbose=1
    shift
fi
build=${1:?usage: $0 [-v] BUILD_DIR [SOURCE.c ...]}
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
if (($# == 0)); then
    # shellcheck disable=SC2046
    set -- $(sed -n 's/^ENGINE_SRCS[[:space:]]*=//p' "$top/Makefile")
fi

declare -A checked=()
for src in "$@"; do
    obj=$(basename "${src%.c}").o
    [[ -f $build/$obj ]] || { echo "$0: no $build/$obj (build first)" >&2; exit 2; }
    checked[$obj]=1
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# symbol -> defining object; object -> undefined symbol
for o in "$build"/btl_usnic_*.o; do
    name=$(basename "$o")
    nm --defined-only "$o" | awk -v o="$name" '$2 ~ /^[TDBRC]$/ {print $3, o}' >>"$work/defs"
    nm -u "$o" | awk -v o="$name" '{print o, $NF}' >>"$work/uses"
done

# edges "from to sym1,sym2,..." (one line per pair of objects)
awk 'NR == FNR { def[$1] = $2; next }
     ($2 in def) && def[$2] != $1 { e = $1 " " def[$2]; if (e in syms) syms[e] = syms[e] "," $2; else syms[e] = $2 }
     END { for (e in syms) print e, syms[e] }' "$work/defs" "$work/uses" | sort >"$work/edges"

# Circles by depth-first search; prints "from to syms" lines of each
# circle, one circle a paragraph (the back edge closes it).
find_circles() {
    awk '{ n = ++deg[$1]; to[$1, n] = $2; syms[$1, $2] = $3
           if (!($1 in seen)) { seen[$1]; names[++count] = $1 } }
    function dfs(v,    i, w, k) {
        color[v] = 1; stack[++depth] = v
        for (i = 1; i <= deg[v]; ++i) {
            w = to[v, i]
            if (color[w] == 1) {
                for (k = depth; stack[k] != w; --k) {}
                for (; k < depth; ++k) print stack[k], stack[k + 1], syms[stack[k], stack[k + 1]]
                print v, w, syms[v, w]
                print ""
            } else if (color[w] == 0) {
                dfs(w)
            }
        }
        --depth; color[v] = 2
    }
    END { for (i = 1; i <= count; ++i) if (color[names[i]] == 0) dfs(names[i]) }'
}

# edges among the objects checked
while read -r from to syms; do
    if [[ -n ${checked[$from]+x} && -n ${checked[$to]+x} ]]; then
        echo "$from $to $syms" >>"$work/checked_edges"
        ((verbose)) && echo "$from -> $to: $syms"
    fi
done <"$work/edges"
touch "$work/checked_edges"

bad=0
find_circles <"$work/checked_edges" >"$work/circles"
if [[ -s $work/circles ]]; then
    echo "call circle among the objects checked (each edge: caller -> callee: symbols):" >&2
    awk 'NF == 0 { print "" ; next } { print "  " $1 " -> " $2 ": " $3 }' "$work/circles" >&2
    bad=1
fi

# circles through the other objects: warnings until they are checked too
find_circles <"$work/edges" | awk -v list="${!checked[*]}" '
    BEGIN { n = split(list, a, " "); for (i = 1; i <= n; ++i) chk[a[i]] }
    NF == 0 { if (par != "" && other) printf "not yet checked: call circle %s\n", par; par = ""; other = 0; next }
    { par = par (par == "" ? "" : ", ") $1 " -> " $2 " (" $3 ")"; if (!($1 in chk) || !($2 in chk)) other = 1 }' >&2
exit $bad
