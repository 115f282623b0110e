#!/usr/bin/env bash
#
# Prove the in-tree build of the usnic BTL in an Open MPI 4.1 or 5.0 source
# tree: replace the tree's opal/mca/btl/usnic with this repository's
# component, run autogen.pl, configure, make and make install into a private
# prefix, and check that the prefix's ompi_info lists the component (BTL API
# v3.1.0 for 4.1, v3.3.0 for 5.0) and its parameters, and that two ranks
# exchange messages over it.  Needs root (apt).  Takes a while: all of Open
# MPI is compiled (4.1: about 8 minutes on 2 cores; 5.0, with PMIx and
# PRRTE: about 30).
#
#   bash scripts/intree-build.sh [--series 4.1|5.0] [--ompi-src DIR]
#        [--ompi-git GITDIR [--ompi-ref REF] --submodule-git NAME=GITDIR...]
#        [--workdir DIR] [--jobs N] [--fresh] [--rev REV]
#        [--component-mode dso|static] [--stop-after N] [--no-smoke]
#
#   --series S     4.1 (default) or 5.0.  With --ompi-src/--ompi-git it
#                  defaults to the tree's own VERSION.
#   --workdir DIR  work directory (default $USNIC_INTREE_DIR, else
#                  /tmp/usnic-intree for 4.1, /tmp/usnic-intree-5.0 for 5.0)
#   --jobs N       make -jN (default 2)
#   --fresh        remove the work directory first (default: reuse the
#                  source tree; autogen/configure only rerun when the
#                  component's Makefile.am/configure.m4 changed)
#   --rev REV      take the component from git revision REV (default: the
#                  working tree as it is)
#   --component-mode M  build btl:usnic as a DSO or static (into
#                  libopen-pal) whatever the tree's default is (4.1: dso,
#                  5.0: static)
#   --stop-after N stop after step N (1-11), for debugging
#   --no-smoke     skip the last step (an MPI ping-pong over the in-tree btl)
#
# Where the Open MPI sources come from:
#   4.1 (default): Debian 12's source package openmpi 4.1.4 (apt-get
#       source; the script adds a deb-src entry for it).
#   5.0: Debian 12 has no Open MPI 5.0 source, so name one of:
#     --ompi-src DIR   an Open MPI 5.0.x source tree, copied into the work
#                      directory (DIR itself is not changed).  Either
#                      - a release tarball from open-mpi.org, unpacked
#                        (https://www.open-mpi.org/software/ompi/v5.0/,
#                        openmpi-5.0.x.tar.bz2: it contains PMIx, PRRTE and
#                        config/oac), or
#                      - a git checkout of a tag WITH its submodules:
#                        git clone --recursive --branch v5.0.10 \
#                            https://github.com/open-mpi/ompi.git
#                        GitHub's "Download ZIP"/tag archive is not enough:
#                        it lacks the submodules 3rd-party/openpmix,
#                        3rd-party/prrte and config/oac.
#                      Any 4.1.x tree works the same way with --series 4.1.
#     --ompi-git GITDIR  offline: extract the tree from a local git
#                      repository of open-mpi/ompi (a bare mirror is fine)
#                      at --ompi-ref REF (default v5.0.10), and each
#                      submodule, recursively, at the commit REF records,
#                      from --submodule-git NAME=GITDIR, NAME being the last
#                      part of the submodule's URL: openpmix, prrte, oac
#                      (v5.0.10 records openpmix 52275072f2, prrte
#                      643db1bd3d, config/oac dfff67569f, and PMIx's and
#                      PRRTE's config/oac 3064f7bd19).  A missing blob (a
#                      partial mirror) is tolerated only for the bundled
#                      hwloc/libevent tarballs, which this build does not
#                      use.  (This is the route our own runs take; the
#                      release tarball and a fresh recursive clone, which
#                      need the internet, are untested here.)
#   5.0 is configured like our prebuilt /opt/openmpi-5.0.10: the bundled
#   PMIx and PRRTE, Debian's hwloc and libevent (libhwloc-dev,
#   libevent-dev; autogen.pl --no-3rdparty hwloc,libevent), libfabric;
#   without Fortran, OSHMEM, ROMIO, Java, UCX, CUDA, ROCm.  4.1 uses
#   Debian's hwloc, libevent and PMIx (libpmix-dev), as Debian's package.
#
# Nothing is installed outside the work directory except apt packages and,
# for Debian's 4.1 source, the deb-src entry
# /etc/apt/sources.list.d/usnic-intree-deb-src.sources.  No system or
# shared Open MPI is touched.
#
# Exits 0 on PASS, non-zero on FAIL.  Logs: <workdir>/logs/.
#
set -euo pipefail

# The whole script is one brace group, so that bash has read all of it
# before running any: editing (or checking out) the file during a run that
# takes an hour cannot derail it.
{

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${USNIC_INTREE_DIR:-}
JOBS=2
FRESH=0
REV=
STOP_AFTER=99
SMOKE=1
HEARTBEAT=${USNIC_INTREE_HEARTBEAT:-60}
SERIES=
OMPI_SRC=
OMPI_GIT=
OMPI_REF=v5.0.10
SUBMODULE_GIT=()
COMPONENT_MODE=

usage() {
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --workdir) WORK=$2; shift 2 ;;
        --workdir=*) WORK=${1#*=}; shift ;;
        --jobs) JOBS=$2; shift 2 ;;
        --jobs=*) JOBS=${1#*=}; shift ;;
        --fresh) FRESH=1; shift ;;
        --no-smoke) SMOKE=0; shift ;;
        --stop-after) STOP_AFTER=$2; shift 2 ;;
        --rev) REV=$2; shift 2 ;;
        --rev=*) REV=${1#*=}; shift ;;
        --series) SERIES=$2; shift 2 ;;
        --series=*) SERIES=${1#*=}; shift ;;
        --ompi-src) OMPI_SRC=$2; shift 2 ;;
        --ompi-src=*) OMPI_SRC=${1#*=}; shift ;;
        --ompi-git) OMPI_GIT=$2; shift 2 ;;
        --ompi-git=*) OMPI_GIT=${1#*=}; shift ;;
        --ompi-ref) OMPI_REF=$2; shift 2 ;;
        --ompi-ref=*) OMPI_REF=${1#*=}; shift ;;
        --submodule-git) SUBMODULE_GIT+=("$2"); shift 2 ;;
        --submodule-git=*) SUBMODULE_GIT+=("${1#*=}"); shift ;;
        --component-mode) COMPONENT_MODE=$2; shift 2 ;;
        --component-mode=*) COMPONENT_MODE=${1#*=}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "intree-build: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

usage_error() { echo "intree-build: $*" >&2; exit 2; }

# The git directory of a repository given as a bare one or a work tree.
git_dir_of() {
    if [[ -d $1/.git ]]; then echo "$1/.git"; else echo "$1"; fi
}
# "major.minor" from an Open MPI VERSION file's text on stdin.
series_of_version() {
    awk -F= '/^major=/{a=$2} /^minor=/{b=$2} END{if (a != "") print a"."b}'
}

[[ -z $OMPI_SRC || -z $OMPI_GIT ]] || usage_error "--ompi-src and --ompi-git exclude each other"
[[ -z $COMPONENT_MODE || $COMPONENT_MODE == dso || $COMPONENT_MODE == static ]] ||
    usage_error "--component-mode takes dso or static, not '$COMPONENT_MODE'"
TREE_SERIES=
if [[ -n $OMPI_SRC ]]; then
    [[ -d $OMPI_SRC ]] || usage_error "--ompi-src $OMPI_SRC: no such directory"
    OMPI_SRC=$(cd "$OMPI_SRC" && pwd)
    [[ -f $OMPI_SRC/VERSION && -f $OMPI_SRC/autogen.pl ]] ||
        usage_error "--ompi-src $OMPI_SRC: not an Open MPI source tree (no VERSION and autogen.pl)"
    TREE_SERIES=$(series_of_version <"$OMPI_SRC/VERSION")
    SOURCE_KIND=dir
elif [[ -n $OMPI_GIT ]]; then
    [[ -d $OMPI_GIT ]] || usage_error "--ompi-git $OMPI_GIT: no such directory"
    OMPI_GIT=$(cd "$(git_dir_of "$OMPI_GIT")" && pwd)
    git --git-dir="$OMPI_GIT" rev-parse -q --verify "$OMPI_REF^{commit}" >/dev/null ||
        usage_error "--ompi-git $OMPI_GIT has no revision '$OMPI_REF' (--ompi-ref)"
    TREE_SERIES=$(git --git-dir="$OMPI_GIT" show "$OMPI_REF:VERSION" | series_of_version)
    SOURCE_KIND=git
else
    SOURCE_KIND=debian
fi
[[ ${#SUBMODULE_GIT[@]} -eq 0 || $SOURCE_KIND == git ]] || usage_error "--submodule-git only goes with --ompi-git"
if [[ -z $SERIES ]]; then
    SERIES=${TREE_SERIES:-4.1}
fi
case "$SERIES" in
    4.1|5.0) ;;
    *) usage_error "--series takes 4.1 or 5.0, not '$SERIES'" ;;
esac
[[ -z $TREE_SERIES || $TREE_SERIES == "$SERIES" ]] ||
    usage_error "--series $SERIES, but the tree's VERSION says $TREE_SERIES"
if [[ $SERIES == 5.0 && $SOURCE_KIND == debian ]]; then
    usage_error "Debian 12 has no Open MPI 5.0 source package: name a 5.0 tree with --ompi-src DIR
  (an unpacked release tarball openmpi-5.0.x.tar.bz2 from https://www.open-mpi.org/software/ompi/v5.0/,
  or 'git clone --recursive --branch v5.0.10 https://github.com/open-mpi/ompi.git'),
  or local git repositories with --ompi-git and --submodule-git (see --help)"
fi
if [[ -z $WORK ]]; then
    if [[ $SERIES == 4.1 ]]; then WORK=/tmp/usnic-intree; else WORK=/tmp/usnic-intree-$SERIES; fi
fi

case "$WORK" in
    /|/usr|/usr/*|/etc|/etc/*|/opt|/opt/*|"$REPO"|"$REPO"/*)
        echo "intree-build: refusing work directory '$WORK'" >&2; exit 2 ;;
esac
WORK=$(mkdir -p "$WORK" && cd "$WORK" && pwd)
# --fresh removes the work directory, and the copy goes into it.
if [[ -n $OMPI_SRC ]]; then
    case "$OMPI_SRC/" in
        "$WORK"/*) usage_error "--ompi-src $OMPI_SRC lies inside the work directory $WORK" ;;
    esac
fi

SRC_PARENT=$WORK/src        # the Open MPI tree is unpacked/copied here
BUILD=$WORK/build           # VPATH build directory
PREFIX=$WORK/prefix         # make install target
LOGS=$WORK/logs
STAMPS=$WORK/stamps
DEBSRC_FILE=/etc/apt/sources.list.d/usnic-intree-deb-src.sources
OMPI_UPSTREAM_VERSION=4.1.4

# Files named in the component's Makefile.am (sources, help file, EXTRA_DIST),
# read from directory $1.
makefile_am_files() {
    sed -e 's/#.*//' "$1/Makefile.am" | grep -oE '[A-Za-z0-9_.+-]+\.(c|h|txt)' | sort -u
}
# The .c files the standalone Makefile compiles into the plugin.
standalone_sources() {
    grep -E '^(ENGINE|COMPONENT)_SRCS[[:space:]]*[:+]?=' "$1/Makefile" | grep -oE '[A-Za-z0-9_.+-]+\.c' | sort -u
}

# Packages Open MPI's autogen.pl/configure/make need for this build (the
# same external libevent/hwloc/PMIx as Debian's build).  Not `apt-get
# build-dep openmpi`: that wants debhelper, gfortran, a JDK, UCX, verbs,
# PSM/PSM2 and numa, none of which this check needs, and it declares a
# Build-Conflicts with libopenmpi-dev, which the standalone build needs.
# 5.0 builds its bundled PMIx and PRRTE (Debian 12 has no PRRTE), so it
# needs no libpmix-dev.
DEPS=(build-essential autoconf automake libtool flex perl m4 pkg-config
      libfabric-dev libhwloc-dev libevent-dev zlib1g-dev libsodium-dev)
[[ $SERIES == 4.1 ]] && DEPS+=(libpmix-dev)
[[ $SOURCE_KIND == debian ]] && DEPS+=(dpkg-dev)
[[ $SOURCE_KIND == git ]] && DEPS+=(git)

# ---------------------------------------------------------------- progress
T0=$(date +%s)
STEP_NO=0
STEP_TOTAL=11
CURRENT_STEP=""
RESULT_LINES=()
CHILD=
# Interrupted: stop the running step's command too.
trap 'if [[ -n $CHILD ]]; then kill -TERM "$CHILD" 2>/dev/null || true; fi; echo "[intree] interrupted" >&2; exit 130' INT TERM

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
elapsed() { fmt_secs $(( $(date +%s) - T0 )); }
say() { echo "[intree $(elapsed)] $*" | tee -a "$LOGS/intree-build.log"; }

step() {
    STEP_NO=$((STEP_NO + 1))
    CURRENT_STEP=$1
    STEP_T0=$(date +%s)
    say "=== step $STEP_NO/$STEP_TOTAL: $1"
}
step_done() {
    say "    step $STEP_NO/$STEP_TOTAL done in $(fmt_secs $(( $(date +%s) - STEP_T0 ))): $CURRENT_STEP"
    if (( STEP_NO >= STOP_AFTER )); then
        say "stopping after step $STEP_NO as asked (--stop-after $STOP_AFTER): no verdict"
        exit 3
    fi
}

fail() {
    say "FAIL in step $STEP_NO/$STEP_TOTAL ($CURRENT_STEP): $*"
    echo
    echo "==================== usnic BTL in-tree build: FAIL ===================="
    echo "step:     $CURRENT_STEP"
    echo "reason:   $*"
    echo "elapsed:  $(elapsed)"
    echo "logs:     $LOGS"
    exit 1
}

# run_logged LOGNAME CMD...: run CMD with its output in $LOGS/LOGNAME.log,
# printing a heartbeat (elapsed time and the log's last line) every
# $HEARTBEAT seconds.  Returns CMD's exit status.
run_logged() {
    local log=$LOGS/$1.log; shift
    say "    \$ $* > ${log#$WORK/}"
    "$@" >"$log" 2>&1 &
    local pid=$! waited=0 rc=0
    CHILD=$pid
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5
        waited=$((waited + 5))
        if (( waited % HEARTBEAT == 0 )) && kill -0 "$pid" 2>/dev/null; then
            local last
            last=$(tail -n 1 "$log" 2>/dev/null | tr -d '\r' | cut -c1-110)
            say "    ... $(fmt_secs $waited) in this step, $(wc -l <"$log") log lines; last: $last"
        fi
    done
    wait "$pid" || rc=$?
    CHILD=
    if (( rc != 0 )); then
        say "    command failed (exit $rc); last lines of ${log#$WORK/}:"
        tail -n 25 "$log" | sed 's/^/    | /' | tee -a "$LOGS/intree-build.log"
    fi
    return "$rc"
}

# ---------------------------------------------------------------- setup
if [[ $FRESH -eq 1 && -d $WORK ]]; then
    echo "[intree] --fresh: removing $WORK"
    rm -rf "$WORK"
fi
mkdir -p "$WORK" "$LOGS" "$STAMPS"
: >"$LOGS/intree-build.log"
case "$SOURCE_KIND" in
    debian) SOURCE_DESC="Debian's source package" ;;
    dir) SOURCE_DESC="the tree $OMPI_SRC" ;;
    git) SOURCE_DESC="$OMPI_REF of $OMPI_GIT" ;;
esac
say "usnic BTL in-tree build, Open MPI $SERIES from $SOURCE_DESC: repo $REPO, work dir $WORK, make -j$JOBS${COMPONENT_MODE:+, btl:usnic $COMPONENT_MODE}"

[[ $(id -u) -eq 0 ]] || fail "must run as root (apt-get)"
export DEBIAN_FRONTEND=noninteractive
CODENAME=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ $CODENAME == bookworm ]] || say "    note: this is '$CODENAME', not Debian 12 bookworm; continuing"

# Assembling a tree from local git repositories (--ompi-git).
# submodule_git NAME: the git directory given for submodule NAME.
submodule_git() {
    local kv
    for kv in "${SUBMODULE_GIT[@]}"; do
        if [[ ${kv%%=*} == "$1" ]]; then git_dir_of "${kv#*=}"; return 0; fi
    done
    return 1
}
# plan_tree GITDIR COMMIT RELPATH: print "RELPATH<TAB>GITDIR<TAB>COMMIT"
# for this tree, then for every submodule it records, recursively, at the
# commit it records, from the --submodule-git repository named like the
# last part of the submodule's URL.  On a problem: PLAN_ERR, return 1.
PLAN_ERR=
plan_tree() {
    local gd=$1 commit=$2 rel=$3 meta path key url name sgd sha
    printf '%s\t%s\t%s\n' "${rel:-.}" "$gd" "$commit"
    while IFS=$'\t' read -r meta path; do
        [[ $meta == *" commit "* ]] || continue
        sha=${meta##* }
        key=$(git --git-dir="$gd" config --blob "$commit:.gitmodules" --get-regexp '^submodule\..*\.path$' 2>/dev/null |
              awk -v p="$path" '$2 == p { sub(/\.path$/, "", $1); print $1; exit }')
        url=
        [[ -n $key ]] && url=$(git --git-dir="$gd" config --blob "$commit:.gitmodules" --get "$key.url" 2>/dev/null || true)
        [[ -n $url ]] || { PLAN_ERR="${rel:+$rel/}$path: a submodule without an entry in .gitmodules"; return 1; }
        name=${url%/}; name=${name##*/}; name=${name%.git}
        sgd=$(submodule_git "$name") ||
            { PLAN_ERR="submodule ${rel:+$rel/}$path ($url) at ${sha:0:10}: give --submodule-git $name=GITDIR"; return 1; }
        [[ -d $sgd ]] || { PLAN_ERR="--submodule-git $name=$sgd: no such directory"; return 1; }
        git --git-dir="$sgd" cat-file -e "$sha^{commit}" 2>/dev/null ||
            { PLAN_ERR="submodule ${rel:+$rel/}$path needs commit $sha, which $sgd does not have"; return 1; }
        plan_tree "$sgd" "$sha" "${rel:+$rel/}$path" || return 1
    done < <(git --git-dir="$gd" ls-tree -r "$commit")
}
# extract_tree GITDIR COMMIT DEST TOP: write COMMIT's files into DEST,
# through a private index (nothing is written into GITDIR).  Blobs a
# partial mirror lacks are left out only where TOP=1 and they are the
# bundled hwloc/libevent tarballs (this build uses Debian's); returns 1
# with PLAN_ERR for any other.
extract_tree() {
    local gd=$1 commit=$2 dest=$3 top=$4 idx=$WORK/git-index.tmp sha path kind
    rm -f "$idx"
    mkdir -p "$dest"
    GIT_INDEX_FILE=$idx git --git-dir="$gd" read-tree "$commit" || { PLAN_ERR="git read-tree $commit in $gd failed"; return 1; }
    while IFS=$'\t' read -r sha path kind; do
        [[ $kind == missing ]] || continue
        if [[ $top -eq 1 && $path =~ ^3rd-party/(hwloc|libevent)-[^/]*\.tar\.(gz|bz2)$ ]]; then
            say "    note: $gd lacks the blob of $path ($sha); not needed with external hwloc/libevent, left out"
            GIT_INDEX_FILE=$idx git --git-dir="$gd" update-index --force-remove -- "$path"
        else
            PLAN_ERR="$gd lacks the blob of ${dest#$SRC_PARENT/}/$path ($sha): an incomplete mirror"
            return 1
        fi
    done < <(git --git-dir="$gd" ls-tree -r "$commit" | awk -F'\t' '{ split($1, m, " "); if (m[2] == "blob") print m[3] "\t" $2 }' >"$idx.blobs"
             # one line per object, in order: its type, or "<sha> missing"
             cut -f1 "$idx.blobs" | git --git-dir="$gd" cat-file --batch-check='%(objecttype)' |
                 awk '{ print ($2 == "missing" ? "missing" : $1) }' | paste "$idx.blobs" -)
    rm -f "$idx.blobs"
    GIT_INDEX_FILE=$idx git --git-dir="$gd" --work-tree="$dest" checkout-index -a -f ||
        { PLAN_ERR="git checkout-index of $commit from $gd failed"; return 1; }
    rm -f "$idx"
}

# Print the enabled apt source entries as "TYPE<TAB>URI<TAB>SUITE<TAB>COMPONENTS<TAB>SIGNED-BY",
# from one-line .list files and deb822 .sources files alike.
apt_entries() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -f $f ]] || continue
        awk '
            /^[ \t]*#/ || NF == 0 { next }
            $1 == "deb" || $1 == "deb-src" {
                type = $1; signed = ""; i = 2
                if ($2 ~ /^\[/) {
                    while (i <= NF) {
                        opt = $i; gsub(/[\[\]]/, "", opt)
                        if (opt ~ /^signed-by=/) { sub(/^signed-by=/, "", opt); signed = opt }
                        if ($i ~ /\]$/) { i++; break }
                        i++
                    }
                }
                uri = $i; suite = $(i + 1); comps = ""
                for (j = i + 2; j <= NF; j++) comps = comps (comps == "" ? "" : " ") $j
                printf "%s\t%s\t%s\t%s\t%s\n", type, uri, suite, comps, signed
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] || continue
        awk '
            function flush(   nt, nu, ns, a, b, c, ta, ua, sa) {
                if (types != "" && tolower(enabled) != "no") {
                    nt = split(types, ta, /[ \t]+/); nu = split(uris, ua, /[ \t]+/)
                    ns = split(suites, sa, /[ \t]+/)
                    for (a = 1; a <= nt; a++) for (b = 1; b <= nu; b++) for (c = 1; c <= ns; c++)
                        if (ta[a] != "" && ua[b] != "" && sa[c] != "")
                            printf "%s\t%s\t%s\t%s\t%s\n", ta[a], ua[b], sa[c], comps, signed
                }
                types = uris = suites = comps = signed = enabled = ""
            }
            /^[ \t]*#/ { next }
            NF == 0 { flush(); next }
            {
                key = tolower($1); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types:") types = val
                else if (key == "uris:") uris = val
                else if (key == "suites:") suites = val
                else if (key == "components:") comps = val
                else if (key == "signed-by:") signed = val
                else if (key == "enabled:") enabled = val
            }
            END { flush() }' "$f"
    done
}

# ---------------------------------------------------------------- 1. origin
ORIGIN=
case "$SOURCE_KIND" in
debian)
    step "deb-src entry for $CODENAME"
    ENTRIES=$(apt_entries)
    printf '%s\n' "$ENTRIES" >"$LOGS/apt-entries.txt"
    if printf '%s\n' "$ENTRIES" | awk -F'\t' -v cn="$CODENAME" \
            '$1 == "deb-src" && $3 == cn && $4 ~ /(^| )main( |$)/ { found = 1 } END { exit !found }'; then
        say "    a deb-src entry for $CODENAME main already exists; nothing added"
    else
        # Mirror every enabled "deb" entry of this release (main suite, -updates,
        # -security) as "deb-src", same mirror, components and key.
        NEW=$(printf '%s\n' "$ENTRIES" | awk -F'\t' -v cn="$CODENAME" '
            $1 == "deb" && ($3 == cn || index($3, cn "-") == 1) {
                printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents: %s\n", $2, $3, $4
                if ($5 != "") printf "Signed-By: %s\n", $5
                printf "\n"
            }')
        [[ -n $NEW ]] || fail "no enabled 'deb' entry for $CODENAME in /etc/apt/sources.list* to mirror (see $LOGS/apt-entries.txt)"
        {
            echo "# Added by usnic BTL scripts/intree-build.sh: source packages of $CODENAME,"
            echo "# mirroring the deb entries of this host.  Safe to remove."
            echo
            printf '%s\n' "$NEW"
        } >"$DEBSRC_FILE"
        say "    wrote $DEBSRC_FILE:"
        sed 's/^/    | /' "$DEBSRC_FILE" | tee -a "$LOGS/intree-build.log"
    fi
    ORIGIN="Debian source package openmpi (apt-get source)"
    ;;
dir)
    step "Open MPI $SERIES source tree $OMPI_SRC"
    [[ -f $OMPI_SRC/config.status ]] &&
        fail "$OMPI_SRC was configured in place (config.status); a VPATH build of a copy would refuse it: run 'make distclean' there first"
    if [[ $SERIES == 5.0 ]]; then
        # What autogen.pl needs and a GitHub tag archive or a clone
        # without --recursive lacks.
        for d in config/oac 3rd-party/openpmix 3rd-party/prrte; do
            [[ -n $(ls -A "$OMPI_SRC/$d" 2>/dev/null) ]] ||
                fail "$OMPI_SRC/$d is missing or empty: a 5.0 git checkout needs its submodules ('git submodule update --init --recursive'), or use a release tarball from https://www.open-mpi.org/software/ompi/v5.0/"
        done
    fi
    if [[ -e $OMPI_SRC/.git ]]; then
        say "    a git checkout: $(git -C "$OMPI_SRC" describe --tags --always 2>/dev/null || echo '?') ($(git -C "$OMPI_SRC" rev-parse --short HEAD 2>/dev/null || echo '?')); submodules:"
        git -C "$OMPI_SRC" submodule status --recursive 2>&1 | sed 's/^/    | /' | tee -a "$LOGS/intree-build.log" || true
    else
        say "    not a git checkout (a release tarball?)"
    fi
    ORIGIN="copy of $OMPI_SRC"
    ;;
git)
    step "Open MPI $SERIES from local git repositories ($OMPI_REF)"
    OMPI_COMMIT=$(git --git-dir="$OMPI_GIT" rev-parse "$OMPI_REF^{commit}")
    plan_tree "$OMPI_GIT" "$OMPI_COMMIT" "" >"$WORK/tree-plan.txt" || fail "$PLAN_ERR"
    say "    the tree and its submodules (path, repository, commit):"
    awk -F'\t' '{ printf "    | %-28s %-45s %s\n", $1, $2, $3 }' "$WORK/tree-plan.txt" | tee -a "$LOGS/intree-build.log"
    if [[ $SERIES == 5.0 ]]; then
        for d in config/oac 3rd-party/openpmix 3rd-party/prrte; do
            grep -q "^$d"$'\t' "$WORK/tree-plan.txt" || fail "$OMPI_REF records no submodule $d"
        done
    fi
    ORIGIN="git $(sha256sum "$WORK/tree-plan.txt" | cut -c1-16) $OMPI_GIT $OMPI_REF"
    ;;
esac
step_done

# ---------------------------------------------------------------- 2. apt-get update
MISSING=()
for p in "${DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || MISSING+=("$p")
done
step "apt-get update"
if [[ $SOURCE_KIND == debian ]]; then
    if ! run_logged apt-update apt-get update; then
        say "    apt-get update reported errors (some other repository may be unreachable); checking the source index anyway"
    fi
    if ! apt-cache showsrc openmpi 2>/dev/null | grep '^Package: openmpi' >/dev/null; then
        grep -E 'Err|Fail|W:|E:' "$LOGS/apt-update.log" | head -n 20 | sed 's/^/    | /'
        fail "no source package 'openmpi' known to apt after apt-get update (deb-src unreachable?); see $LOGS/apt-update.log"
    fi
    say "    source versions: $(apt-cache showsrc openmpi | awk '/^Version:/ {print $2}' | sort -u | tr '\n' ' ')"
elif [[ ${#MISSING[@]} -eq 0 ]]; then
    say "    skipped: no source package needed and no package missing"
else
    run_logged apt-update apt-get update ||
        say "    apt-get update reported errors (some other repository may be unreachable); trying the install anyway"
fi
step_done

# ---------------------------------------------------------------- 3. packages
step "build dependencies"
if [[ ${#MISSING[@]} -eq 0 ]]; then
    say "    all ${#DEPS[@]} packages installed: ${DEPS[*]}"
else
    say "    installing: ${MISSING[*]}"
    run_logged apt-install apt-get install -y -q --no-install-recommends "${MISSING[@]}" ||
        fail "apt-get install ${MISSING[*]} failed"
fi
step_done

# ---------------------------------------------------------------- 4. source
case "$SOURCE_KIND" in
    debian) step "Debian's Open MPI $OMPI_UPSTREAM_VERSION source (apt-get source)" ;;
    dir) step "copy of the Open MPI $SERIES tree" ;;
    git) step "Open MPI $SERIES tree from git ($OMPI_REF and its submodules)" ;;
esac
SRCDIR=""
# An existing tree is reused when it came from the same place (trees of
# earlier versions of this script recorded no origin: Debian's).
OLD_ORIGIN="Debian source package openmpi (apt-get source)"
[[ -f $STAMPS/source-origin ]] && OLD_ORIGIN=$(cat "$STAMPS/source-origin")
if [[ -f $STAMPS/source && -d $(cat "$STAMPS/source") && $OLD_ORIGIN == "$ORIGIN" ]]; then
    SRCDIR=$(cat "$STAMPS/source")
    say "    reusing $SRCDIR ($ORIGIN; use --fresh to start again)"
else
    rm -rf "$SRC_PARENT" "$BUILD"; mkdir -p "$SRC_PARENT"
    rm -f "$STAMPS/source" "$STAMPS/autogen" "$STAMPS/configure" "$STAMPS/replaced" "$STAMPS/upstream-usnic.txt"
    case "$SOURCE_KIND" in
    debian)
        # The same Debian revision as the installed libopenmpi-dev when known.
        WANT=$(dpkg-query -W -f='${source:Version}' libopenmpi-dev 2>/dev/null || true)
        FETCHED=0
        if [[ -n $WANT ]]; then
            (cd "$SRC_PARENT" && run_logged apt-source apt-get source -q "openmpi=$WANT") && FETCHED=1 ||
                say "    openmpi=$WANT not available as source; trying the newest"
        fi
        if [[ $FETCHED -eq 0 ]]; then
            (cd "$SRC_PARENT" && run_logged apt-source apt-get source -q openmpi) ||
                fail "apt-get source openmpi failed; see $LOGS/apt-source.log"
        fi
        SRCDIR=$(find "$SRC_PARENT" -mindepth 1 -maxdepth 1 -type d -name 'openmpi-*' | head -n 1)
        ;;
    dir)
        SRCDIR=$SRC_PARENT/openmpi-$(awk -F= '/^major=/{a=$2} /^minor=/{b=$2} /^release=/{c=$2} END{print a"."b"."c}' "$OMPI_SRC/VERSION")
        mkdir -p "$SRCDIR"
        say "    copying $OMPI_SRC to $SRCDIR (without .git)"
        (tar -C "$OMPI_SRC" --exclude=.git -cf - . | tar -C "$SRCDIR" -xf -) ||
            fail "copying $OMPI_SRC failed"
        ;;
    git)
        SRCDIR=$SRC_PARENT/openmpi-$(git --git-dir="$OMPI_GIT" show "$OMPI_COMMIT:VERSION" |
            awk -F= '/^major=/{a=$2} /^minor=/{b=$2} /^release=/{c=$2} END{print a"."b"."c}')
        while IFS=$'\t' read -r rel gd commit; do
            dest=$SRCDIR; [[ $rel == . ]] || dest=$SRCDIR/$rel
            say "    extracting ${commit:0:10} of $gd into ${dest#$WORK/}"
            top=0; [[ $rel == . ]] && top=1
            extract_tree "$gd" "$commit" "$dest" "$top" || fail "$PLAN_ERR"
        done <"$WORK/tree-plan.txt"
        cp "$WORK/tree-plan.txt" "$SRC_PARENT/tree-plan.txt"
        ;;
    esac
    [[ -n $SRCDIR && -f $SRCDIR/autogen.pl ]] || fail "no Open MPI tree with autogen.pl in $SRC_PARENT"
    echo "$SRCDIR" >"$STAMPS/source"
    echo "$ORIGIN" >"$STAMPS/source-origin"
fi
VER=$(awk -F= '/^major=/{a=$2} /^minor=/{b=$2} /^release=/{c=$2} END{print a"."b"."c}' "$SRCDIR/VERSION")
say "    tree: $SRCDIR (Open MPI $VER)"
[[ $VER == "$SERIES".* ]] || fail "the tree is Open MPI $VER, not $SERIES"
[[ $SOURCE_KIND != debian || $VER == "$OMPI_UPSTREAM_VERSION" ]] || say "    WARNING: expected Open MPI $OMPI_UPSTREAM_VERSION, got $VER"
step_done

# ---------------------------------------------------------------- 5. component
step "replace opal/mca/btl/usnic with this repository's component"
CDIR=$SRCDIR/opal/mca/btl/usnic
if [[ ! -f $STAMPS/upstream-usnic.txt && -d $CDIR ]]; then
    (cd "$CDIR" && find . -type f | sort) >"$STAMPS/upstream-usnic.txt"
    say "    upstream's usnic BTL had $(wc -l <"$STAMPS/upstream-usnic.txt") files (list: ${STAMPS#$WORK/}/upstream-usnic.txt); replacing it entirely"
fi
# The component's files come from the working tree, or with --rev from a
# committed revision (other work in progress then does not matter).
if [[ -n $REV ]]; then
    CSRC=$WORK/snapshot
    rm -rf "$CSRC"; mkdir -p "$CSRC"
    git -C "$REPO" archive "$REV" | tar -x -C "$CSRC" || fail "git archive $REV failed"
    say "    component from revision $REV ($(git -C "$REPO" rev-parse --short "$REV"))"
else
    CSRC=$REPO
    say "    component from the working tree of $REPO"
fi
[[ -f $CSRC/Makefile.am && -f $CSRC/configure.m4 ]] || fail "no Makefile.am/configure.m4 in $CSRC"
mapfile -t FILES < <(makefile_am_files "$CSRC")
FILES=(Makefile.am configure.m4 "${FILES[@]}")
# listed F: F is one of FILES.  (Not "printf ... | grep -q": with pipefail,
# grep leaving early can fail the pipeline through printf's SIGPIPE.)
listed() {
    local x
    for x in "${FILES[@]}"; do [[ $x == "$1" ]] && return 0; done
    return 1
}
for f in "${FILES[@]}"; do
    [[ -f $CSRC/$f ]] || fail "Makefile.am names $f, which does not exist"
done
# Makefile.am and the standalone Makefile must agree on what is compiled.
DRIFT=()
for f in $(standalone_sources "$CSRC"); do
    listed "$f" || DRIFT+=("$f")
done
[[ ${#DRIFT[@]} -eq 0 ]] || fail "compiled by ./Makefile but missing from Makefile.am: ${DRIFT[*]}"
# Every source and header of the component must be listed (only listed
# files are copied into the tree, and make dist ships only those).
UNLISTED=()
for f in $(cd "$CSRC" && ls -1 btl_usnic*.c btl_usnic*.h 2>/dev/null); do
    listed "$f" || UNLISTED+=("$f")
done
[[ ${#UNLISTED[@]} -eq 0 ]] || fail "in the repository but not in Makefile.am: ${UNLISTED[*]}"
if [[ -f $STAMPS/replaced ]]; then
    # Our component is already there: drop what is no longer listed, keep
    # the Makefile.in that autogen.pl generated, and copy only changed files
    # (unchanged ones keep their time stamps: make does not rebuild them).
    (cd "$CDIR" && find . -type f ! -name Makefile.in | sed 's|^\./||') | while read -r f; do
        listed "$f" || rm -f "$CDIR/$f"
    done
else
    rm -rf "$CDIR"
    mkdir -p "$CDIR"
    touch "$STAMPS/replaced"
fi
CHANGED=0
for f in "${FILES[@]}"; do
    if ! cmp -s "$CSRC/$f" "$CDIR/$f"; then
        cp "$CSRC/$f" "$CDIR/$f"
        CHANGED=$((CHANGED + 1))
    fi
done
say "    ${#FILES[@]} files ($CHANGED new or changed): ${FILES[*]}"
# autogen/configure depend on the build glue and the set of files only.
GLUE_SUM=$( (cd "$CDIR" && cat Makefile.am configure.m4 && printf '%s\n' "${FILES[@]}") | sha256sum | cut -c1-16)
if [[ -f $STAMPS/autogen && $(cat "$STAMPS/autogen") == "$GLUE_SUM" ]]; then
    say "    build glue unchanged since the last autogen ($GLUE_SUM)"
else
    rm -f "$STAMPS/autogen" "$STAMPS/configure"
fi
step_done

# ---------------------------------------------------------------- 6. autogen
step "autogen.pl"
if [[ -f $STAMPS/autogen ]]; then
    say "    skipped: autogen.pl already ran with this build glue"
else
    # --force: a release tarball refuses autogen.pl without it (debian/rules
    # uses it too); needed because the list of components changed.
    AUTOGEN_ARGS=(--force)
    # 5.0: Debian's hwloc and libevent are used (configure below), so the
    # bundled tarballs are not needed (a partial git mirror may lack them).
    [[ $SERIES == 5.0 ]] && AUTOGEN_ARGS+=(--no-3rdparty "hwloc,libevent")
    (cd "$SRCDIR" && run_logged autogen ./autogen.pl "${AUTOGEN_ARGS[@]}") || fail "autogen.pl failed; see $LOGS/autogen.log"
    grep -q -- '--- Found opal / btl / usnic component' "$LOGS/autogen.log" ||
        fail "autogen.pl did not pick up opal/mca/btl/usnic; see $LOGS/autogen.log"
    say "    autogen.pl: '$(grep -m1 -- '--- Found opal / btl / usnic' "$LOGS/autogen.log")';" \
        "$(grep -cE 'btl/usnic/(Makefile\.am|configure\.m4):[0-9]+: (warning|error)' "$LOGS/autogen.log" || true) warnings located in its Makefile.am/configure.m4"
    grep -E 'btl/usnic/(Makefile\.am|configure\.m4):[0-9]+: (warning|error)' "$LOGS/autogen.log" | sed 's/^/    | /' | tee -a "$LOGS/intree-build.log" || true
    echo "$GLUE_SUM" >"$STAMPS/autogen"
fi
step_done

# ---------------------------------------------------------------- 7. configure
step "configure"
if [[ $SERIES == 4.1 ]]; then
    # Debian's external PMIx lives in its own directory (as in debian/rules).
    PMIX_DIR=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)/pmix2
    [[ -f $PMIX_DIR/include/pmix.h ]] || fail "no external PMIx in $PMIX_DIR (libpmix-dev)"
    CONFIGURE_ARGS=(
        --prefix="$PREFIX"
        --disable-mpi-fortran --disable-oshmem --disable-mpi-java --disable-mpi-cxx
        --without-cuda --without-ucx --without-verbs --without-psm --without-psm2
        --disable-io-romio --disable-man-pages
        # Debian's own choice for the bundled third-party packages: use the
        # system's, which also saves compiling them.
        --with-hwloc=external --with-libevent=external --with-pmix="$PMIX_DIR"
        # Required: configure fails if libfabric is missing.
        --with-ofi
        # Components stay DSOs (4.1's default), so ompi_info proves that
        # mca_btl_usnic.so loads with the tree's libopen-pal.
    )
else
    # As our prebuilt /opt/openmpi-5.0.10 (without its --with-devel-headers):
    # bundled PMIx and PRRTE, Debian's hwloc and libevent.  Components are
    # built into the libraries (5.0's default) unless --component-mode dso.
    CONFIGURE_ARGS=(
        --prefix="$PREFIX"
        --with-hwloc=external --with-libevent=external
        --with-pmix=internal --with-prrte=internal
        --with-ofi
        --disable-mpi-fortran --disable-oshmem --disable-io-romio --disable-mpi-java
        --without-ucx --without-cuda --without-rocm
    )
fi
case "$COMPONENT_MODE" in
    dso) CONFIGURE_ARGS+=(--enable-mca-dso=btl-usnic) ;;
    static) CONFIGURE_ARGS+=(--enable-mca-static=btl-usnic) ;;
esac
CONF_SUM=$(printf '%s\n' "$GLUE_SUM" "${CONFIGURE_ARGS[@]}" | sha256sum | cut -c1-16)
if [[ -f $STAMPS/configure && $(cat "$STAMPS/configure") == "$CONF_SUM" ]]; then
    say "    skipped: configure already ran with this build glue and these arguments"
else
    rm -rf "$BUILD"; mkdir -p "$BUILD"
    (cd "$BUILD" && run_logged configure "$SRCDIR/configure" "${CONFIGURE_ARGS[@]}") ||
        fail "configure failed; see $LOGS/configure.log"
    echo "$CONF_SUM" >"$STAMPS/configure"
fi
say "    configure's lines about the usnic BTL:"
grep -E 'btl:usnic|usnic BTL' "$LOGS/configure.log" | sed 's/^/    | /' | tee -a "$LOGS/intree-build.log"
SUMMARY_LINE=$(grep -E '^checking for usnic BTL\.\.\. ' "$LOGS/configure.log" | tail -n 1 || true)
[[ -n $SUMMARY_LINE ]] || fail "configure printed no 'checking for usnic BTL...' line (our configure.m4 not run?)"
grep -qE '^checking if MCA component btl:usnic can compile\.\.\. yes' "$LOGS/configure.log" ||
    fail "configure will not build btl:usnic: $SUMMARY_LINE"
[[ -f $BUILD/opal/mca/btl/usnic/Makefile ]] || fail "configure generated no opal/mca/btl/usnic/Makefile"
MODE_LINE=$(grep -E '^checking for MCA component btl:usnic compile mode' "$LOGS/configure.log" | tail -n 1 || true)
if [[ -n $COMPONENT_MODE ]]; then
    [[ $MODE_LINE == *"... $COMPONENT_MODE" ]] || fail "--component-mode $COMPONENT_MODE, but configure says: $MODE_LINE"
fi
RESULT_LINES+=("configure: $SUMMARY_LINE")
RESULT_LINES+=("configure: $MODE_LINE")
RESULT_LINES+=("configure: $(grep -E '^checking if MCA component btl:usnic can compile' "$LOGS/configure.log" | tail -n 1)")
TRANSPORT_LINE=$(grep -E '^usnic BTL .*: (yes|no)$' "$LOGS/configure.log" | tail -n 1 || true)
[[ -n $TRANSPORT_LINE ]] && RESULT_LINES+=("configure summary, Transports: $TRANSPORT_LINE")
step_done

# ---------------------------------------------------------------- 8. make
step "make -j$JOBS (all of Open MPI)"
(cd "$BUILD" && run_logged make make -j"$JOBS") || fail "make failed; see $LOGS/make.log"
say "    warnings in the usnic BTL: $(grep -cE 'btl/usnic/[^ ]*: warning:|^[^ ]*btl_usnic[^ ]*: warning:' "$LOGS/make.log" || true)"
grep -E 'btl_usnic[^ ]*: warning:' "$LOGS/make.log" | sort -u | head -n 20 | sed 's/^/    | /' | tee -a "$LOGS/intree-build.log" || true
step_done

# ---------------------------------------------------------------- 9. install
step "make install into $PREFIX"
# Into an empty prefix: nothing left from an earlier build (say a DSO when
# the component is now static) can make the checks below pass.
rm -rf "$PREFIX"
(cd "$BUILD" && run_logged make-install make -j"$JOBS" install) || fail "make install failed; see $LOGS/make-install.log"
DSO=$(find "$PREFIX/lib" -name 'mca_btl_usnic.so' | head -n 1)
if [[ -n $DSO ]]; then
    say "    installed $DSO"
    RESULT_LINES+=("install: ${DSO#$WORK/}")
else
    say "    no mca_btl_usnic.so in $PREFIX/lib: component built into libopen-pal (static)"
    RESULT_LINES+=("install: static (inside libopen-pal)")
fi
[[ -f $PREFIX/share/openmpi/help-mpi-btl-usnic.txt ]] || fail "help-mpi-btl-usnic.txt not installed into $PREFIX/share/openmpi"
step_done

# ---------------------------------------------------------------- 10. ompi_info
step "ompi_info of the prefix"
OMPI_INFO=$PREFIX/bin/ompi_info
[[ -x $OMPI_INFO ]] || fail "$OMPI_INFO missing"
# Only the prefix: no user components, no system Open MPI.
export OPAL_PREFIX=$PREFIX
export LD_LIBRARY_PATH=$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The component directory is the prefix's pkglibdir: lib/openmpi3 with
# Debian's patches (libdir.patch), lib/openmpi upstream (5.0's bundled
# PMIx and PRRTE have their own beside it); ask ompi_info.
COMPDIR=$("$OMPI_INFO" --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p' | head -n 1 || true)
[[ -n $COMPDIR ]] || COMPDIR=$PREFIX/lib/openmpi
say "    component path: $COMPDIR only (not ~/.openmpi/components)"
export OMPI_MCA_mca_base_component_path=$COMPDIR
run_logged ompi-info-components "$OMPI_INFO" ||
    fail "ompi_info failed; see $LOGS/ompi-info-components.log"
run_logged ompi-info-usnic "$OMPI_INFO" --param btl usnic --level 9 ||
    fail "ompi_info --param btl usnic failed; see $LOGS/ompi-info-usnic.log"
run_logged ompi-info-usnic-parsable "$OMPI_INFO" --param btl usnic --level 9 --parsable ||
    fail "ompi_info --param btl usnic --parsable failed"

COMP_LINE=$(grep -E 'MCA btl: usnic' "$LOGS/ompi-info-components.log" || true)
[[ -n $COMP_LINE ]] || fail "ompi_info does not list 'MCA btl: usnic'"
RESULT_LINES+=("ompi_info: $(echo "$COMP_LINE" | sed 's/^ *//')")
# The BTL interface of the series: 3.1.0 in 4.1, 3.3.0 in 5.0.
case "$SERIES" in 4.1) WANT_API=3.1.0 ;; 5.0) WANT_API=3.3.0 ;; esac
[[ $COMP_LINE == *"API v$WANT_API,"* ]] || fail "ompi_info lists usnic, but not with BTL API v$WANT_API: $COMP_LINE"
MISSING_PARAMS=()
for p in btl_usnic_peer_timeout btl_usnic_retrans_timeout btl_usnic_if_include btl_usnic_stats; do
    line=$(grep -E "MCA btl usnic: parameter \"$p\"" "$LOGS/ompi-info-usnic.log" | head -n 1 || true)
    if [[ -n $line ]]; then
        RESULT_LINES+=("ompi_info: $(echo "$line" | sed 's/^ *//')")
    else
        MISSING_PARAMS+=("$p")
    fi
done
NPARAMS=$(grep -c '^mca:btl:usnic:param:[^:]*:value:' "$LOGS/ompi-info-usnic-parsable.log" || true)
RESULT_LINES+=("ompi_info: $NPARAMS btl_usnic parameters at level 9")
[[ ${#MISSING_PARAMS[@]} -eq 0 ]] || fail "ompi_info --param btl usnic --level 9 lacks: ${MISSING_PARAMS[*]}"
# Make sure it is ours, not upstream's usnic BTL: upstream has no peer_timeout.
grep -q 'btl_usnic_peer_timeout' "$LOGS/ompi-info-usnic.log" || fail "the usnic BTL listed is not this repository's"
step_done

# ---------------------------------------------------------------- 11. smoke
step "MPI ping-pong over the in-tree btl usnic (loopback)"
PINGPONG=$CSRC/test/mpi/pingpong.c
if [[ $SMOKE -eq 0 ]]; then
    say "    skipped (--no-smoke)"
    RESULT_LINES+=("smoke: skipped")
elif [[ ! -f $PINGPONG ]]; then
    say "    skipped: no $PINGPONG"
    RESULT_LINES+=("smoke: skipped (no test/mpi/pingpong.c)")
else
    mkdir -p "$WORK/smoke"
    run_logged smoke-build "$PREFIX/bin/mpicc" -O2 -I"$CSRC/test/mpi" -o "$WORK/smoke/pingpong" "$PINGPONG" ||
        fail "the prefix's mpicc cannot build test/mpi/pingpong.c; see $LOGS/smoke-build.log"
    # 5.0's mpirun is PRRTE's: oversubscription is a mapping modifier.
    case "$SERIES" in
        4.1) OVERSUB=(--oversubscribe) ;;
        *) OVERSUB=(--map-by :OVERSUBSCRIBE) ;;
    esac
    run_logged smoke-run timeout 300 "$PREFIX/bin/mpirun" --allow-run-as-root "${OVERSUB[@]}" -np 2 \
        --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo "$WORK/smoke/pingpong" ||
        fail "MPI ping-pong over btl usnic,self failed; see $LOGS/smoke-run.log"
    grep -q '^PASS' "$LOGS/smoke-run.log" || fail "ping-pong printed no PASS; see $LOGS/smoke-run.log"
    RESULT_LINES+=("smoke: mpirun -np 2 --mca btl usnic,self (lo) test/mpi/pingpong: $(grep -m1 '^PASS' "$LOGS/smoke-run.log")")
fi
step_done

echo
echo "==================== usnic BTL in-tree build: PASS ===================="
echo "Open MPI: $VER in $SRCDIR ($ORIGIN), prefix $PREFIX"
printf '%s\n' "${RESULT_LINES[@]}"
echo "elapsed:  $(elapsed)"
echo "logs:     $LOGS"
say "PASS"
exit 0
}
