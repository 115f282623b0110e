#!/usr/bin/env bash
#
# Parameter and selection tests of the installed usnic BTL:
#  - ompi_info lists every parameter with help text;
#  - OMPI_MCA_btl_usnic_<name> and --mca both set parameters;
#  - bad values give our show_help message (not "help file not found"),
#    the usnic BTL disqualifies itself, and the job still runs on tcp;
#  - the usnic BTL is really selected when asked for, and the shared-memory BTL (vader, or sm on 5.0) keeps
#    on-host traffic when it is listed too.
# Prints "N passed, N failed" last; exits non-zero on any failure.
#
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"  # OMPI_SERIES, SHM_BTL, OVERSUBSCRIBE, OOB_LO, series_dir
BUILD=${PARAM_TEST_BUILD_DIR:-$(series_dir "$HERE/build")}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root "${OVERSUBSCRIBE[@]}" --bind-to none --mca pml ob1
        ${OOB_LO[@]+"${OOB_LO[@]}"} --mca btl_tcp_if_include lo)
passed=0
failed=0
not_run=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; shift; [[ $# -gt 0 ]] && printf '%s\n' "$@" | tail -20 | sed 's/^/     /'; failed=$((failed + 1)); }

mkdir -p "$BUILD"
mpicc -O2 -Wall -Wextra -Werror -o "$BUILD/ring" "$HERE/ring.c" || { echo "cannot build ring.c"; exit 1; }

# run NAME EXPECT_RC [env assignments...] -- mpirun args...; output in $out
run() {
    local envs=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do envs+=("$1"); shift; done
    shift
    out=$(env "${envs[@]}" timeout 60 "${MPIRUN[@]}" "$@" "$BUILD/ring" 2>&1)
    rc=$?
}

# --- 1. ompi_info lists every parameter, each with help text ---
info=$(ompi_info --param btl usnic --level 9 2>&1)
expected=(provider_include if_include if_exclude max_btls sd_num rd_num prio_sd_num prio_rd_num
          retrans_timeout rto_min rto_max peer_timeout max_resends_per_iteration ack_iteration_delay ack_delay priority_limit window stats
          verbose link_speed inject_faults exclusivity flags eager_limit rndv_eager_limit max_send_size latency bandwidth
          numa_latency_penalty connectivity_check connectivity_timeout connectivity_retries connectivity_policy
          protection wire max_datagram sock_gso sock_gro sock_rcvbuf sock_sndbuf)
missing=()
for p in "${expected[@]}"; do
    # the line after the parameter line is its help text: it must not be empty
    if ! grep -A1 "\"btl_usnic_$p\"" <<<"$info" | tail -1 | grep -q '[A-Za-z]'; then
        missing+=("$p")
    fi
done
if [[ ${#missing[@]} -eq 0 ]]; then ok "ompi_info lists ${#expected[@]} parameters with help"; else bad "ompi_info lacks: ${missing[*]}" "$info"; fi

# Every registered usnic parameter has a line in README.txt
readme="$HERE/../../README.txt"
undocumented=()
for p in $(grep -o '"btl_usnic_[a-z_]*"' <<<"$info" | tr -d '"' | sort -u); do
    grep -q "$p" "$readme" || undocumented+=("$p")
done
if [[ ${#undocumented[@]} -eq 0 ]]; then ok "README.txt documents every parameter"; else bad "README.txt lacks: ${undocumented[*]}"; fi

# --- 2. the usnic BTL carries a usnic,self job, and says so ---
run -- -np 3 --mca btl usnic,self --mca btl_usnic_if_include lo --mca btl_base_verbose 100
if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && grep -q "Using usnic btl" <<<"$out"; then
    ok "usnic,self job selects usnic (3 ranks)"
else
    bad "usnic,self job (rc=$rc)" "$out"
fi

# --- 3. an environment variable sets a parameter ---
run OMPI_MCA_btl_usnic_window=8 OMPI_MCA_btl_usnic_verbose=5 -- -np 2 --mca btl usnic,self --mca btl_usnic_if_include lo
if [[ $rc -eq 0 ]] && grep -q "window 8," <<<"$out"; then
    ok "OMPI_MCA_btl_usnic_window=8 takes effect"
else
    bad "OMPI_MCA_btl_usnic_window did not take effect (rc=$rc)" "$out"
fi

# --- 3b. the connectivity map names each peer and the interface used ---
mapdir=$(mktemp -d)
run OMPI_MCA_btl_usnic_connectivity_map="$mapdir/map" -- -np 3 --mca btl usnic,self --mca btl_usnic_if_include lo
maps=$(ls "$mapdir"/map-*.txt 2>/dev/null | wc -l)
peers=$(cat "$mapdir"/map-*.txt 2>/dev/null | grep -cE '^lo 127\.0\.0\.1 -> rank [0-2] .* 127\.0\.0\.1 ports [0-9]+,[0-9]+ mtu [0-9]+ wire (socket|ofi)$')
if [[ $rc -eq 0 && $maps -eq 3 && $peers -eq 6 ]]; then
    ok "connectivity_map: 3 files, each rank's 2 peers over lo"
else
    bad "connectivity_map (rc=$rc, $maps files, $peers peer lines)" "$out"
    cat "$mapdir"/map-*.txt 2>/dev/null | sed 's/^/     /'
fi
rm -rf "$mapdir"

# --- 4. bad values: our message, usnic out, job continues on tcp ---
check_bad_value() {
    local label=$1 pattern=$2
    shift 2
    run "$@" -- -np 2 --mca btl usnic,tcp,self --mca btl_usnic_if_include lo --mca btl_base_verbose 100
    if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && grep -q "$pattern" <<<"$out" &&
       ! grep -qi "help file\|Sorry!" <<<"$out" && ! grep -q "Using usnic btl" <<<"$out"; then
        ok "$label: clear message, job runs on other BTLs"
    else
        bad "$label (rc=$rc)" "$out"
    fi
}
check_bad_value "retrans_timeout=1" "btl_usnic_retrans_timeout" OMPI_MCA_btl_usnic_retrans_timeout=1
check_bad_value "rto_min above rto_max" "rto_min" OMPI_MCA_btl_usnic_rto_min=50000 OMPI_MCA_btl_usnic_rto_max=1000
check_bad_value "ack_delay not below rto_min / 2" "ack_delay" OMPI_MCA_btl_usnic_ack_delay=300
check_bad_value "window=99999" "btl_usnic_window" OMPI_MCA_btl_usnic_window=99999
check_bad_value "max_resends_per_iteration=0" "btl_usnic_max_resends_per_iteration" \
    OMPI_MCA_btl_usnic_max_resends_per_iteration=0
check_bad_value "priority_limit=10" "btl_usnic_priority_limit" OMPI_MCA_btl_usnic_priority_limit=10
check_bad_value "eager_limit=100" "eager_limit" OMPI_MCA_btl_usnic_eager_limit=100
check_bad_value "if_include and if_exclude together" "mutually exclusive" OMPI_MCA_btl_usnic_if_exclude=eth0
check_bad_value "empty provider_include" "provider_include" OMPI_MCA_btl_usnic_provider_include=
check_bad_value "inject_faults=dup=x" "btl_usnic_inject_faults" OMPI_MCA_btl_usnic_inject_faults=dup=x
check_bad_value "connectivity_policy=sometimes" "btl_usnic_connectivity_policy" \
    OMPI_MCA_btl_usnic_connectivity_policy=sometimes
check_bad_value "connectivity_timeout=0" "btl_usnic_connectivity_timeout" OMPI_MCA_btl_usnic_connectivity_timeout=0
check_bad_value "numa_latency_penalty=-1" "btl_usnic_numa_latency_penalty" \
    OMPI_MCA_btl_usnic_numa_latency_penalty=-1
check_bad_value "protection=weak" "btl_usnic_protection" OMPI_MCA_btl_usnic_protection=weak
check_bad_value "wire=infiniband" "btl_usnic_wire" OMPI_MCA_btl_usnic_wire=infiniband
check_bad_value "max_datagram=100" "btl_usnic_max_datagram" OMPI_MCA_btl_usnic_max_datagram=100
check_bad_value "max_datagram=70000" "btl_usnic_max_datagram" OMPI_MCA_btl_usnic_max_datagram=70000
check_bad_value "sock_rcvbuf=1024" "btl_usnic_sock_rcvbuf" OMPI_MCA_btl_usnic_sock_rcvbuf=1024
check_bad_value "sock_sndbuf=-1" "btl_usnic_sock_sndbuf" OMPI_MCA_btl_usnic_sock_sndbuf=-1

# --- 5. an invalid if_include entry is named, a valid one still works ---
run -- -np 2 --mca btl usnic,self --mca btl_usnic_if_include "lo,10.0.0.0/99"
if [[ $rc -eq 0 ]] && grep -q "10.0.0.0/99" <<<"$out" && grep -q "PASS ring" <<<"$out"; then
    ok "invalid CIDR entry reported, lo still used"
else
    bad "invalid CIDR entry (rc=$rc)" "$out"
fi

# --- 6. with $SHM_BTL listed, $SHM_BTL keeps on-host traffic (exclusivity) ---
run -- -np 2 --mca btl usnic,$SHM_BTL,self --mca btl_usnic_if_include lo --mca btl_usnic_stats 3600
if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && grep -q "btl:usnic final stats" <<<"$out" &&
   ! grep "btl:usnic final stats" <<<"$out" | grep -q "total_sends="; then
    ok "usnic,$SHM_BTL,self: $SHM_BTL carries on-host traffic"
else
    bad "usnic,$SHM_BTL,self (rc=$rc)" "$out"
fi

# --- 7. a provider that does not exist: usnic out, job on tcp ---
run OMPI_MCA_btl_usnic_provider_include=nosuchprovider -- -np 2 --mca btl usnic,tcp,self --mca btl_base_verbose 100
if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && ! grep -q "Using usnic btl" <<<"$out"; then
    ok "unknown provider: usnic disqualified, job runs"
else
    bad "unknown provider (rc=$rc)" "$out"
fi

# --- 8. peers with different tiny limits agree on the smaller one ---
# (a datagram too big for the receiver's priority buffers would arrive
# truncated and be counted as an invalid drop; a retransmission alone may
# be a harmless spurious timeout on a busy host, so it is not the signal)
out=$(timeout 60 "${MPIRUN[@]}" --mca btl usnic,self --mca btl_usnic_if_include lo --mca btl_usnic_stats 3600 \
      -np 1 env OMPI_MCA_btl_usnic_priority_limit=200 "$BUILD/ring" : -np 1 "$BUILD/ring" 2>&1)
rc=$?
if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && [[ $(grep -c "btl:usnic final stats" <<<"$out") -eq 2 ]] &&
   ! grep "btl:usnic final stats" <<<"$out" | grep -q "drop_truncated\|invalid_recvs"; then
    ok "ranks with different priority_limit interoperate"
else
    bad "different priority_limit per rank (rc=$rc)" "$out"
fi

# --- 9. peers with different protection: reported with both hosts, no
# usnic traffic between them, the job runs on tcp ---
out=$(timeout 60 "${MPIRUN[@]}" --mca btl usnic,tcp,self --mca btl_usnic_if_include lo --mca btl_usnic_stats 3600 \
      -np 1 env OMPI_MCA_btl_usnic_protection=none "$BUILD/ring" : -np 1 "$BUILD/ring" 2>&1)
rc=$?
if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && grep -qE "Local protection: +(full|none)" <<<"$out" &&
   grep -qE "Peer protection: +(full|none)" <<<"$out" && grep -q "Peer host" <<<"$out" &&
   ! grep "btl:usnic final stats" <<<"$out" | grep -q "total_sends="; then
    ok "ranks with different protection: reported, no usnic traffic between them, job runs on tcp"
else
    bad "different protection per rank (rc=$rc)" "$out"
fi

# --- 10. one rank on each wire: the same datagrams on the network, the
# pair uses the smaller datagram (the ofi wire's 1472), every size class
# verified byte by byte (test/mpi/pingpong.c, up to 16 MiB) ---
mpicc -O2 -I"$HERE/../mpi" -o "$BUILD/pingpong" "$HERE/../mpi/pingpong.c" || { echo "cannot build pingpong.c"; exit 1; }
mapdir=$(mktemp -d)
out=$(timeout 180 "${MPIRUN[@]}" --mca btl usnic,self --mca btl_usnic_if_include lo --mca btl_usnic_stats 3600 \
      --mca btl_usnic_verbose 5 --mca btl_usnic_connectivity_map "$mapdir/map" \
      -np 1 env OMPI_MCA_btl_usnic_wire=ofi "$BUILD/pingpong" : -np 1 env OMPI_MCA_btl_usnic_wire=socket \
      "$BUILD/pingpong" 2>&1)
rc=$?
wires=$(grep -oE "lo: (ofi|socket) wire$" <<<"$out" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
crossed=$(cat "$mapdir"/map-*.txt 2>/dev/null | grep -cE ' mtu 1472 wire ofi$| mtu 65000 wire socket$')
if [[ $rc -eq 0 ]] && grep -q "PASS pingpong" <<<"$out" && [[ "$wires" == " 1 lo: ofi wire; 1 lo: socket wire;" ]] &&
   [[ $crossed -eq 2 ]] && [[ $(grep -c "btl:usnic final stats" <<<"$out") -eq 2 ]] &&
   ! grep "btl:usnic final stats" <<<"$out" | grep -qE "invalid_recvs|drop_oversized|drop_truncated"; then
    ok "one rank per wire: every size verified, each sees the other's wire in its map, no invalid datagram"
else
    bad "one rank per wire (rc=$rc, wires '$wires', map lines naming the peer's wire: $crossed)" "$out"
fi
rm -rf "$mapdir"

# --- 11. btl_usnic_max_datagram caps the socket wire's datagrams: 1472 on
# loopback makes it send GSO batches (what a 1500-MTU network sees) ---
run -- -np 2 --mca btl usnic,self --mca btl_usnic_if_include lo --mca btl_usnic_wire socket \
    --mca btl_usnic_max_datagram 1472 --mca btl_usnic_verbose 5 --mca btl_usnic_stats 3600
if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && [[ $(grep -c "socket wire: datagrams of 1472 bytes" <<<"$out") -eq 2 ]]; then
    ok "max_datagram=1472: both ranks send 1472-byte datagrams on the socket wire"
else
    bad "max_datagram=1472 (rc=$rc)" "$out"
fi

# --- 12. the socket wire stands without libfabric: with FI_PROVIDER
# naming a provider that has no datagrams (as a cluster exporting it for
# another library would), the default wire still carries the job and
# never loads libfabric (no "libfabric loaded" line; and no rank maps it,
# where Open MPI itself does not: 5.0 builds link it into its own
# components); the ofi wire loads it (the checks can tell) ---
run RING_SHOW_LIBFABRIC=1 -- -np 2 -x RING_SHOW_LIBFABRIC --mca btl tcp,self
if [[ $(grep -c "libfabric mapped: no" <<<"$out") -eq 2 ]]; then
    maps_check=1
else
    maps_check=0
    not_run=$((not_run + 1))
    echo "NOT RUN libfabric not mapped by a socket-wire job: Open MPI $OMPI_SERIES maps libfabric without the usnic BTL (btl tcp,self)"
fi
for prov in verbs tcp; do
    run FI_PROVIDER=$prov RING_SHOW_LIBFABRIC=1 -- -np 2 -x FI_PROVIDER -x RING_SHOW_LIBFABRIC --mca btl usnic,self \
        --mca btl_usnic_if_include lo --mca btl_usnic_verbose 5
    if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && [[ $(grep -c "lo: socket wire$" <<<"$out") -eq 2 ]] &&
       ! grep -q "libfabric loaded" <<<"$out" &&
       { [[ $maps_check -eq 0 ]] || [[ $(grep -c "libfabric mapped: no" <<<"$out") -eq 2 ]]; }; then
        ok "FI_PROVIDER=$prov: the job runs over the socket wire, libfabric never loaded$([[ $maps_check -eq 1 ]] && echo " (nor mapped)")"
    else
        bad "FI_PROVIDER=$prov (rc=$rc)" "$out"
    fi
done
run RING_SHOW_LIBFABRIC=1 -- -np 2 -x RING_SHOW_LIBFABRIC --mca btl usnic,self --mca btl_usnic_if_include lo \
    --mca btl_usnic_wire ofi --mca btl_usnic_verbose 5
if [[ $rc -eq 0 ]] && grep -q "PASS ring" <<<"$out" && [[ $(grep -c "lo: ofi wire$" <<<"$out") -eq 2 ]] &&
   [[ $(grep -c "libfabric loaded" <<<"$out") -eq 2 ]] && [[ $(grep -c "libfabric mapped: yes" <<<"$out") -eq 2 ]]; then
    ok "btl_usnic_wire=ofi: libfabric loaded on demand, the job runs over it"
else
    bad "btl_usnic_wire=ofi loads libfabric (rc=$rc)" "$out"
fi

# --- 13. an eager limit above max_send_size: ob1 hands an eager message
# to prepare_src whole and cannot take back less, so the BTL must take it
# all (it once cut it at max_send_size: a 64 KiB message arrived 14
# bytes short, ob1's header, and ob1 completed it); every pingpong size
# verified ---
out=$(timeout 180 "${MPIRUN[@]}" -np 2 --mca btl usnic,self --mca btl_usnic_if_include lo \
      --mca btl_usnic_eager_limit 131072 --mca btl_usnic_max_send_size 65536 "$BUILD/pingpong" 2>&1)
rc=$?
if [[ $rc -eq 0 ]] && grep -q "PASS pingpong" <<<"$out"; then
    ok "eager_limit 131072 above max_send_size 65536: every pingpong size verified"
else
    bad "eager_limit above max_send_size (rc=$rc)" "$out"
fi

echo "$passed passed, $failed failed$([[ $not_run -gt 0 ]] && echo ", $not_run not run")"
[[ $failed -eq 0 ]]
