#!/usr/bin/env bash
#
# Prove the in-tree build of the usnic BTL: fetch Debian 12's Open MPI 4.1.4
# source package, replace its opal/mca/btl/usnic with this repository's
# component, run autogen.pl, configure, make and make install into a private
# prefix, and check that the prefix's ompi_info lists the component and its
# parameters, and that two ranks exchange messages over it.  Needs root
# (apt).  Takes a while: all of Open MPI is compiled.
#
#   bash scripts/intree-build.sh [--workdir DIR] [--jobs N] [--fresh] [--rev REV]
#
#   --workdir DIR  work directory (default $USNIC_INTREE_DIR or /tmp/usnic-intree)
#   --jobs N       make -jN (default 2)
#   --fresh        remove the work directory first (default: reuse the
#                  unpacked source; autogen/configure only rerun when the
#                  component's Makefile.am/configure.m4 changed)
#   --rev REV      take the component from git revision REV (default: the
#                  working tree as it is)
#   --stop-after N stop after step N (1-11), for debugging
#   --no-smoke     skip the last step (an MPI ping-pong over the in-tree btl)
#
# Nothing is installed outside the work directory except apt packages and
# the deb-src entry /etc/apt/sources.list.d/usnic-intree-deb-src.sources.
# The system Open MPI is never touched.
#
# Exits 0 on PASS, non-zero on FAIL.  Logs: <workdir>/logs/.
#
set -euo pipefail

# The whole script is one brace group, so that bash has read all of it
# before running any: editing (or checking out) the file during a run that
# takes an hour cannot derail it.
{

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${USNIC_INTREE_DIR:-/tmp/usnic-intree}
JOBS=2
FRESH=0
REV=
STOP_AFTER=99
SMOKE=1
HEARTBEAT=${USNIC_INTREE_HEARTBEAT:-60}

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
        -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "intree-build: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

case "$WORK" in
    /|/usr|/usr/*|/etc|/etc/*|"$REPO"|"$REPO"/*)
        echo "intree-build: refusing work directory '$WORK'" >&2; exit 2 ;;
esac

SRC_PARENT=$WORK/src        # apt-get source unpacks here
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
DEPS=(dpkg-dev build-essential autoconf automake libtool flex perl m4 pkg-config
      libfabric-dev libhwloc-dev libevent-dev libpmix-dev zlib1g-dev libsodium-dev)

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
say "usnic BTL in-tree build: repo $REPO, work dir $WORK, make -j$JOBS"

[[ $(id -u) -eq 0 ]] || fail "must run as root (apt-get)"
export DEBIAN_FRONTEND=noninteractive
CODENAME=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ $CODENAME == bookworm ]] || say "    note: this is '$CODENAME', not Debian 12 bookworm; continuing"

# ---------------------------------------------------------------- 1. deb-src
step "deb-src entry for $CODENAME"

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
step_done

# ---------------------------------------------------------------- 2. apt-get update
step "apt-get update"
if ! run_logged apt-update apt-get update; then
    say "    apt-get update reported errors (some other repository may be unreachable); checking the source index anyway"
fi
if ! apt-cache showsrc openmpi 2>/dev/null | grep -q '^Package: openmpi'; then
    grep -E 'Err|Fail|W:|E:' "$LOGS/apt-update.log" | head -n 20 | sed 's/^/    | /'
    fail "no source package 'openmpi' known to apt after apt-get update (deb-src unreachable?); see $LOGS/apt-update.log"
fi
say "    source versions: $(apt-cache showsrc openmpi | awk '/^Version:/ {print $2}' | sort -u | tr '\n' ' ')"
step_done

# ---------------------------------------------------------------- 3. packages
step "build dependencies"
MISSING=()
for p in "${DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || MISSING+=("$p")
done
if [[ ${#MISSING[@]} -eq 0 ]]; then
    say "    all ${#DEPS[@]} packages installed: ${DEPS[*]}"
else
    say "    installing: ${MISSING[*]}"
    run_logged apt-install apt-get install -y -q --no-install-recommends "${MISSING[@]}" ||
        fail "apt-get install ${MISSING[*]} failed"
fi
step_done

# ---------------------------------------------------------------- 4. source
step "Debian's Open MPI $OMPI_UPSTREAM_VERSION source (apt-get source)"
SRCDIR=""
if [[ -f $STAMPS/source && -d $(cat "$STAMPS/source") ]]; then
    SRCDIR=$(cat "$STAMPS/source")
    say "    reusing $SRCDIR (use --fresh to fetch again)"
else
    rm -rf "$SRC_PARENT"; mkdir -p "$SRC_PARENT"
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
    [[ -n $SRCDIR && -f $SRCDIR/autogen.pl ]] || fail "no unpacked openmpi-* tree with autogen.pl in $SRC_PARENT"
    echo "$SRCDIR" >"$STAMPS/source"
    rm -f "$STAMPS/autogen" "$STAMPS/configure" "$STAMPS/replaced" "$STAMPS/upstream-usnic.txt"
fi
VER=$(awk -F= '/^major=/{a=$2} /^minor=/{b=$2} /^release=/{c=$2} END{print a"."b"."c}' "$SRCDIR/VERSION")
say "    tree: $SRCDIR (Open MPI $VER)"
[[ $VER == "$OMPI_UPSTREAM_VERSION" ]] || say "    WARNING: expected Open MPI $OMPI_UPSTREAM_VERSION, got $VER"
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
for f in "${FILES[@]}"; do
    [[ -f $CSRC/$f ]] || fail "Makefile.am names $f, which does not exist"
done
# Makefile.am and the standalone Makefile must agree on what is compiled.
DRIFT=()
for f in $(standalone_sources "$CSRC"); do
    printf '%s\n' "${FILES[@]}" | grep -qxF "$f" || DRIFT+=("$f")
done
[[ ${#DRIFT[@]} -eq 0 ]] || fail "compiled by ./Makefile but missing from Makefile.am: ${DRIFT[*]}"
for f in $(cd "$CSRC" && ls -1 btl_usnic*.c btl_usnic*.h 2>/dev/null); do
    printf '%s\n' "${FILES[@]}" | grep -qxF "$f" ||
        say "    note: $f is in neither Makefile.am nor ./Makefile's sources: not copied"
done
if [[ -f $STAMPS/replaced ]]; then
    # Our component is already there: drop what is no longer listed, keep
    # the Makefile.in that autogen.pl generated, and copy only changed files
    # (unchanged ones keep their time stamps: make does not rebuild them).
    (cd "$CDIR" && find . -type f ! -name Makefile.in | sed 's|^\./||') | while read -r f; do
        printf '%s\n' "${FILES[@]}" | grep -qxF "$f" || rm -f "$CDIR/$f"
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
    (cd "$SRCDIR" && run_logged autogen ./autogen.pl --force) || fail "autogen.pl failed; see $LOGS/autogen.log"
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
    # Components stay DSOs (the default), so ompi_info proves that
    # mca_btl_usnic.so loads with the tree's libopen-pal.
)
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
RESULT_LINES+=("configure: $SUMMARY_LINE")
RESULT_LINES+=("configure: $(grep -E '^checking for MCA component btl:usnic compile mode' "$LOGS/configure.log" | tail -n 1)")
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
# Debian's patches (libdir.patch), lib/openmpi upstream; find it.
COMPDIR=$(find "$PREFIX/lib" -name 'mca_*.so' -printf '%h\n' | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
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
    run_logged smoke-run timeout 300 "$PREFIX/bin/mpirun" --allow-run-as-root --oversubscribe -np 2 \
        --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo "$WORK/smoke/pingpong" ||
        fail "MPI ping-pong over btl usnic,self failed; see $LOGS/smoke-run.log"
    grep -q '^PASS' "$LOGS/smoke-run.log" || fail "ping-pong printed no PASS; see $LOGS/smoke-run.log"
    RESULT_LINES+=("smoke: mpirun -np 2 --mca btl usnic,self (lo) test/mpi/pingpong: $(grep -m1 '^PASS' "$LOGS/smoke-run.log")")
fi
step_done

echo
echo "==================== usnic BTL in-tree build: PASS ===================="
echo "Open MPI: $VER from $(basename "$SRCDIR") (Debian source), prefix $PREFIX"
printf '%s\n' "${RESULT_LINES[@]}"
echo "elapsed:  $(elapsed)"
echo "logs:     $LOGS"
say "PASS"
exit 0
}
