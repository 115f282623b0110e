# shellcheck shell=bash
# The bottleneck test bed of issue 26 (congestion control), shared by
# test/hosts/run-congestion-tests.sh and bench/congestion.sh (sourced, not
# run; test/lib.sh and test/hosts/hosts.sh first, BUILD_DIR and LOG_DIR
# set).
#
# Three simulated hosts (hosts.sh, HOSTS_GSO=soft so the switch sees every
# datagram as the packet a wire would carry, MTU 1500 unless HOSTS_MTU
# says otherwise), the switch's ports toward host 2 and host 3 on br1
# shaped: tbf at CC_RATE (1gbit), a drop-tail queue of CC_LIMIT (100kb),
# CC_BURST (32kb) of token bucket, and CC_DELAY of base delay (netem; 0 =
# none, the default: this VM's kernel has no sch_netem).  Every job runs
# on subnet 1 (veth1) only, so it crosses the shaped port; mpirun's own
# TCP runs there too (a few KB).
#
#   cc_build DIR             DIR/cc_flows (mpicc); log in LOG_DIR/build.log
#   cc_hosts_up              the hosts, the shapers, two hostfiles
#                            (CC_HF12: hosts 1 and 2; CC_HF123: all three);
#                            returns 1 with WHY on failure
#   cc_run NAME TRANSPORT KIND [iperf]
#       one job, output in LOG_DIR/NAME.log (CC_LOG), exit status CC_RC
#       (124: timed out), wall time CC_SECS.  TRANSPORT:
#         usnic_on   pml ob1, btl usnic,self, the controller on
#                    (--mca btl_usnic_congestion_control 1)
#         usnic_off  the same with the controller off (... 0)
#         tcp        pml ob1, btl tcp,self
#       (both usnic ones on the suite's wire: WIRE_ARGS).  KIND:
#         pair     4 ranks, hosts 1 and 2: rank 0 (host 1) streams to rank
#                  1 (host 2), rank 2 (host 1) ping-pongs with rank 3
#                  (host 2): both cross the port toward host 2
#         stream   2 ranks: rank 0 (host 1) streams to rank 1 (host 2)
#         incast2  3 ranks: ranks 0 (host 1) and 1 (host 2) stream to rank
#                  2 (host 3): the port toward host 3
#         incast4  5 ranks: ranks 0, 3 (host 1) and 1, 4 (host 2) to rank 2
#       "iperf": an iperf3 TCP cubic flow from host 1 to host 2 runs from
#       1 s before the job to its end (then interrupted); CC_TCP_MBIT = its receiver's Mbit/s
#       over the half-second intervals that lie inside the job's timed
#       window ("-" if none)
#   cc_val KEY       the value of KEY= on the job's summary lines (FLOW
#                    lines excluded): MBps, jain, p50_us, p99_us, rounds,
#                    resent_pct, sends, resends, start; "" if absent
#   cc_flow_list     the per-sender MB/s, space-separated
#   cc_bad_msgs      usnic dead-peer / unreachable messages in the log
#   cc_passed        the job exited 0 and printed PASS (every byte verified)
#   cc_iperf_alone SECONDS LOG   iperf3 alone host 1 -> host 2: CC_TCP_MBIT
#
# Environment: CC_RATE, CC_LIMIT, CC_BURST, CC_DELAY, CC_SECONDS (5: the
# timed part of each job), CC_TIMEOUT (40 s per job: a job takes 6-8 s), CC_PARAM
# (btl_usnic_congestion_control), CC_MPIRUN_EXTRA (more mpirun words for
# every job, e.g. "--mca mpi_yield_when_idle 1").  OMPI_MCA_mca_base_component_path (a
# private build's component directory) reaches the ranks: ns-agent.sh
# inherits mpirun's environment.

CC_RATE=${CC_RATE:-1gbit}
CC_LIMIT=${CC_LIMIT:-100kb}
CC_BURST=${CC_BURST:-32kb}
CC_DELAY=${CC_DELAY:-0}
CC_SECONDS=${CC_SECONDS:-5}
CC_TIMEOUT=${CC_TIMEOUT:-40}
CC_PARAM=${CC_PARAM:-btl_usnic_congestion_control}
CC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CC_IPERF_PORT=5201

cc_build() {
    CC_BIN=$1/cc_flows
    mpicc -Wall -Wextra -Werror -O2 -g -o "$CC_BIN" "$CC_DIR/cc_flows.c" > "$LOG_DIR/build.log" 2>&1
}

# cc_param_state: "present" if this plugin registers CC_PARAM, else
# "absent" (then on and off run the same code: Open MPI ignores an
# unknown btl_usnic_* parameter)
cc_param_state() {
    if ompi_info --param btl usnic --level 9 --parsable 2>/dev/null | grep -q ":$CC_PARAM:"; then
        echo present
    else
        echo absent
    fi
}

cc_hosts_up() {
    export HOSTS_GSO=${HOSTS_GSO-soft}
    WHY=""
    if ! hosts_setup 3 "$BUILD_DIR/hostfile-cc" "$LOG_DIR/hosts.log"; then
        return 1
    fi
    CC_HF12=$BUILD_DIR/hostfile-cc12
    CC_HF123=$BUILD_DIR/hostfile-cc123
    printf '%s slots=2\n' "${HOSTS[0]}" "${HOSTS[1]}" > "$CC_HF12"
    printf '%s slots=2\n' "${HOSTS[@]}" > "$CC_HF123"
    if [ "$CC_DELAY" != 0 ] && ! hosts_have_netem; then
        WHY="CC_DELAY=$CC_DELAY needs sch_netem, which this kernel does not have"
        return 1
    fi
    if ! hosts_shape 2 "$CC_RATE" "$CC_LIMIT" "$CC_DELAY" "$CC_BURST" >> "$LOG_DIR/hosts.log" 2>&1 ||
       ! hosts_shape 3 "$CC_RATE" "$CC_LIMIT" "$CC_DELAY" "$CC_BURST" >> "$LOG_DIR/hosts.log" 2>&1; then
        WHY="tc could not shape the switch's ports (tbf${CC_DELAY:+, netem})"
        return 1
    fi
    ns_argv "$HOSTS_HEAD"
    CC_NS_HEAD=("${NS_ARGV[@]}")
    # 2 slots a host: 4 ranks on two hosts, 5 on three, so no oversubscribe
    # option (5.0's is a --map-by modifier, which would clash with
    # --map-by node); the VM's 2 cores are oversubscribed all the same,
    # hence --bind-to none
    CC_BASE=(--allow-run-as-root --map-by node --bind-to none
             $(rsh_agent_args "$CC_DIR/ns-agent.sh") $(oob_net_args "$HOSTS_NET1.0/24"))
}

cc_describe() {
    echo "bottleneck: the switch's ports toward hosts 2 and 3 (h2p1, h3p1): tbf rate $CC_RATE burst $CC_BURST limit $CC_LIMIT (drop-tail), base delay ${CC_DELAY} (netem: $(hosts_have_netem && echo available || echo 'not in this kernel'))"
}

cc_transport() {
    case $1 in
        usnic_on | usnic_off)
            CC_TARGS=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include "$HOSTS_NET1.0/24"
                      --mca "$CC_PARAM" "$([ "$1" = usnic_on ] && echo 1 || echo 0)"
                      ${WIRE_ARGS[@]+"${WIRE_ARGS[@]}"}) ;;
        tcp)
            CC_TARGS=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$HOSTS_NET1.0/24") ;;
        *) return 1 ;;
    esac
}

cc_kind() {
    case $1 in
        pair) CC_HF=$CC_HF12 CC_NP=4 CC_PARGS=(--receiver 1 --senders 0 --pingpong 2,3) ;;
        stream) CC_HF=$CC_HF12 CC_NP=2 CC_PARGS=(--receiver 1 --senders 0) ;;
        incast2) CC_HF=$CC_HF123 CC_NP=3 CC_PARGS=(--receiver 2 --senders 0,1) ;;
        incast4) CC_HF=$CC_HF123 CC_NP=5 CC_PARGS=(--receiver 2 --senders 0,1,3,4) ;;
        *) return 1 ;;
    esac
}

_cc_wall() { date +%s.%N; }

# iperf3 server on host 2 (one test, half-second intervals) and client on
# host 1 for SECONDS; sets CC_IPERF_PIDS, CC_IPERF_T0 (the client's start)
_cc_iperf_start() {
    local secs=$1 log=$2
    ip netns exec "${HOSTS[1]}" iperf3 -s -1 -B "$HOSTS_NET1.2" -p "$CC_IPERF_PORT" -i 0.5 -f m --forceflush \
        > "$log.server" 2>&1 &
    CC_IPERF_PIDS=($!)
    sleep 0.3
    CC_IPERF_T0=$(_cc_wall)
    ip netns exec "${HOSTS[0]}" iperf3 -c "$HOSTS_NET1.2" -p "$CC_IPERF_PORT" -B "$HOSTS_NET1.1" -C cubic \
        -t "$secs" -i 0.5 -f m --forceflush > "$log.client" 2>&1 &
    CC_IPERF_PIDS+=($!)
}
_cc_iperf_wait() {
    local pid
    for pid in "${CC_IPERF_PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    CC_IPERF_PIDS=()
}
# _cc_iperf_mbit LOG FROM TO: the server's mean Mbit/s over its intervals
# [a, b] (seconds since CC_IPERF_T0) that lie within [FROM, TO]
# (seconds since CC_IPERF_T0); "-" if none
_cc_iperf_mbit() {
    awk -v from="$2" -v to="$3" '
        /^\[ *[0-9]+\] +[0-9.]+-[0-9.]+ +sec .* Mbits\/sec/ && !/sender|receiver/ {
            for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+-[0-9.]+$/) { split($i, ab, "-"); break }
            if (ab[1] + 0 >= from && ab[2] + 0 <= to) {
                for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") { s += $(i - 1) * (ab[2] - ab[1]); d += ab[2] - ab[1] }
            }
        }
        END { if (d > 0) printf "%.0f", s / d; else print "-" }' "$1"
}

cc_iperf_alone() {
    local secs=$1 log=$2
    _cc_iperf_start "$secs" "$log"
    _cc_iperf_wait
    CC_TCP_MBIT=$(_cc_iperf_mbit "$log.server" 0.4 "$secs")
    cat "$log.client" "$log.server" > "$log"
}

cc_run() {
    local name=$1 transport=$2 kind=$3 with=${4:-} start t0 from to
    CC_LOG=$LOG_DIR/$name.log
    CC_TCP_MBIT="-"
    cc_transport "$transport" || { echo "cc_run: unknown transport $transport" >&2; return 1; }
    cc_kind "$kind" || { echo "cc_run: unknown kind $kind" >&2; return 1; }
    if [ "$with" = iperf ]; then
        # long enough to cover the launch (a few s) and the timed part
        _cc_iperf_start "$((CC_SECONDS + 12))" "$CC_LOG.iperf"
        sleep 1
    fi
    t0=$(_cc_wall)
    {
        echo "+ mpirun ${CC_BASE[*]} --hostfile $CC_HF -np $CC_NP ${CC_TARGS[*]} ${CC_MPIRUN_EXTRA:-} $CC_BIN ${CC_PARGS[*]} --seconds $CC_SECONDS"
        # shellcheck disable=SC2086 # CC_MPIRUN_EXTRA: words on purpose
        timeout -k 10 "$CC_TIMEOUT" "${CC_NS_HEAD[@]}" mpirun "${CC_BASE[@]}" --hostfile "$CC_HF" -np "$CC_NP" \
            "${CC_TARGS[@]}" ${CC_MPIRUN_EXTRA:-} "$CC_BIN" "${CC_PARGS[@]}" --seconds "$CC_SECONDS"
    } > "$CC_LOG" 2>&1 < /dev/null
    CC_RC=$?
    [ "$CC_RC" -eq 137 ] && CC_RC=124
    CC_SECS=$(awk -v a="$t0" -v b="$(_cc_wall)" 'BEGIN { printf "%.1f", b - a }')
    if [ "$with" = iperf ]; then
        # the job is over: stop the client (SIGINT: it ends the test
        # cleanly, and the server, started for one test, exits too)
        kill -INT "${CC_IPERF_PIDS[1]}" 2>/dev/null
        _cc_iperf_wait
        start=$(cc_val start)
        if [ -n "$start" ]; then
            from=$(awk -v a="$CC_IPERF_T0" -v b="$start" 'BEGIN { printf "%.3f", b - a }')
            to=$(awk -v f="$from" -v s="$CC_SECONDS" 'BEGIN { printf "%.3f", f + s }')
            CC_TCP_MBIT=$(_cc_iperf_mbit "$CC_LOG.iperf.server" "$from" "$to")
        fi
        cat "$CC_LOG.iperf.client" "$CC_LOG.iperf.server" > "$CC_LOG.iperf"
        rm -f "$CC_LOG.iperf.client" "$CC_LOG.iperf.server"
    fi
    return 0
}

cc_val() {
    grep -a -E '^(AGG|PINGPONG|USNIC|WINDOW) ' "$CC_LOG" | tr ' ' '\n' | sed -nE "s/^$1=([^ ]+)$/\\1/p" | tail -1
}
cc_flow_list() { grep -a '^FLOW ' "$CC_LOG" | sed -nE 's/.* MBps=([0-9.]+).*/\1/p' | tr '\n' ' ' | sed 's/ $//'; }
cc_bad_msgs() { grep -a -cE "has not acknowledged any data|could not send to a peer any more|peer timeout|peer unreachable" "$CC_LOG"; }
cc_passed() { [ "$CC_RC" -eq 0 ] && grep -a -q '^PASS cc_flows' "$CC_LOG"; }
