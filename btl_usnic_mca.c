/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * MCA parameters (one register function for all of them) and the MPI_T
 * performance variables.
 */
#include "opal_config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_help.h"

/* Bad values found at registration.  They are reported from component
 * init, where the process knows its local rank (one message per host). */
#define MAX_BAD_PARAMS 8
static struct {
    char name[64];
    char value[128];
    char allowed[96];
} bad_params[MAX_BAD_PARAMS];
static int num_bad_params = 0;

static void note_bad_param(const char *name, const char *value, const char *allowed)
{
    if (num_bad_params < MAX_BAD_PARAMS) {
        snprintf(bad_params[num_bad_params].name, sizeof(bad_params[0].name), "%s", name);
        snprintf(bad_params[num_bad_params].value, sizeof(bad_params[0].value), "%s", value);
        snprintf(bad_params[num_bad_params].allowed, sizeof(bad_params[0].allowed), "%s", allowed);
        ++num_bad_params;
    }
}

bool opal_btl_usnic_help_speaks(bool once_per_host)
{
    return !once_per_host || 0 == opal_process_info.my_local_rank;
}

void opal_btl_usnic_show_help_own(const char *topic, ...)
{
    va_list ap;
    va_start(ap, topic);
    char *msg = opal_btl_usnic_help_vrender(topic, ap);
    va_end(ap);
    if (NULL != msg) {
        fprintf(stderr, "%s", msg);
        fflush(stderr);
        free(msg);
    }
}

void opal_btl_usnic_report_bad_params(void)
{
    /* Every process sees the same parameters: one message per host */
    for (int i = 0; i < num_bad_params; ++i) {
        opal_btl_usnic_show_help(true, "bad parameter value", opal_process_info.nodename, bad_params[i].name,
                                 bad_params[i].value, bad_params[i].allowed);
    }
    num_bad_params = 0;
}

/* Register one integer parameter and check it against [lo, hi]. */
static bool reg_int(const char *name, const char *help, int deflt, int lo, int hi, int level, int *storage)
{
    *storage = deflt;
    (void) mca_base_component_var_register(opal_btl_usnic_globals.version, name, help,
                                           MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, level, MCA_BASE_VAR_SCOPE_READONLY,
                                           storage);
    if (*storage < lo || *storage > hi) {
        char range[64];
        snprintf(range, sizeof(range), "%d to %d", lo, hi);
        char value[32];
        snprintf(value, sizeof(value), "%d", *storage);
        note_bad_param(name, value, range);
        return false;
    }
    return true;
}

static void reg_string(const char *name, const char *help, const char *deflt, int level, char **storage)
{
    *storage = (char *) deflt;
    (void) mca_base_component_var_register(opal_btl_usnic_globals.version, name, help,
                                           MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, level, MCA_BASE_VAR_SCOPE_READONLY,
                                           storage);
}

static bool is_set(const char *s)
{
    return NULL != s && '\0' != s[0];
}

/* "dup=N,reorder=M,forge_put=K" (every part optional) */
static int parse_inject_faults(const char *spec, uint32_t *dup_p, uint32_t *reorder_p, uint32_t *forge_p)
{
    *dup_p = *reorder_p = *forge_p = 0;
    if (!is_set(spec)) {
        return OPAL_SUCCESS;
    }
    char *copy = strdup(spec);
    char *save = NULL;
    int rc = OPAL_SUCCESS;
    for (char *tok = strtok_r(copy, ",", &save); NULL != tok && OPAL_SUCCESS == rc; tok = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        unsigned long v;
        if (0 == strncmp(tok, "dup=", 4)) {
            v = strtoul(tok + 4, &end, 10);
            *dup_p = (uint32_t) v;
        } else if (0 == strncmp(tok, "reorder=", 8)) {
            v = strtoul(tok + 8, &end, 10);
            *reorder_p = (uint32_t) v;
        } else if (0 == strncmp(tok, "forge_put=", 10)) {
            v = strtoul(tok + 10, &end, 10);
            *forge_p = (uint32_t) v;
        } else {
            rc = OPAL_ERR_BAD_PARAM;
            break;
        }
        if (NULL == end || '\0' != *end || v > 1000000) {
            rc = OPAL_ERR_BAD_PARAM;
        }
    }
    free(copy);
    return rc;
}

int opal_btl_usnic_component_register_params(mca_btl_base_module_t *tmpl)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    bool ok = true;

    reg_string("provider_include",
               "Comma-separated list of providers to try, in order; the first one that yields a usable interface "
               "is used (default: the Cisco usnic provider where present, else udp).  \"udp\" is served by the "
               "socket wire (btl_usnic_wire auto or socket: the host's interfaces, no libfabric); other names by "
               "libfabric (the ofi wire), loaded only then, and for \"usnic\" only where /sys/class/infiniband "
               "has a usnic_* device",
               "usnic,udp", OPAL_INFO_LVL_3, &c->provider_include);
    reg_string("if_include",
               "Comma-separated list of interfaces to use: Linux interface names (e.g. eth0, lo), libfabric domain "
               "names (e.g. usnic_0) or IPv4 subnets in CIDR notation (e.g. 10.10.0.0/16).  Loopback is used only if "
               "named here.  Mutually exclusive with btl_usnic_if_exclude",
               NULL, OPAL_INFO_LVL_1, &c->if_include);
    reg_string("if_exclude",
               "Comma-separated list of interfaces (names or IPv4 CIDR subnets) not to use.  Mutually exclusive "
               "with btl_usnic_if_include",
               NULL, OPAL_INFO_LVL_1, &c->if_exclude);
    ok &= reg_int("max_btls", "Maximum number of interfaces (modules) to use; 0 means all usable ones", 0, 0, 1024,
                  OPAL_INFO_LVL_2, &c->max_btls);
    ok &= reg_int("sd_num",
                  "Send queue depth of the data channel (-1: the provider's default, at most 1024)", -1, -1, 65536,
                  OPAL_INFO_LVL_5, &c->sd_num);
    ok &= reg_int("rd_num", "Receive buffers posted on the data channel (-1: the provider's default, at most 512)",
                  -1, -1, 65536, OPAL_INFO_LVL_5, &c->rd_num);
    ok &= reg_int("prio_sd_num", "Send queue depth of the priority channel (-1: 256)", -1, -1, 65536,
                  OPAL_INFO_LVL_5, &c->prio_sd_num);
    ok &= reg_int("prio_rd_num", "Receive buffers posted on the priority channel (-1: 256)", -1, -1, 65536,
                  OPAL_INFO_LVL_5, &c->prio_rd_num);
    ok &= reg_int("retrans_timeout",
                  "Microseconds a segment waits for its ACK before it is retransmitted, until round-trip times have "
                  "been measured; afterwards the timeout adapts to the path (RFC 6298) above a floor that starts "
                  "here (see btl_usnic_rto_min), at most btl_usnic_rto_max, and doubles per timeout until the ACK "
                  "advances again.  With btl_usnic_congestion_control, at least a round trip plus the longest time "
                  "the peer reported being away from its ACKs in the last 1-2 s",
                  5000, 10, 60000000, OPAL_INFO_LVL_5, &c->retrans_timeout);
    ok &= reg_int("rto_min",
                  "Lowest floor (microseconds) of the adaptive retransmit timeout.  Per peer the floor starts at "
                  "btl_usnic_retrans_timeout, falls to this value once the peer reports a loss that a "
                  "retransmission repaired (short timeouts recover lost tails), and doubles, up to "
                  "btl_usnic_rto_max, when the peer reports a timeout as premature (it had the data but was "
                  "descheduled) and has reported no loss for 2 s",
                  500, 10, 60000000, OPAL_INFO_LVL_5, &c->rto_min);
    ok &= reg_int("tail_probes",
                  "Tail-loss probes (RFC 9002's probe timeout): when a peer's ACK has not advanced for srtt + 4 "
                  "rttvar + btl_usnic_ack_delay (at least btl_usnic_rto_min, at most the retransmit timeout), "
                  "its oldest un-ACKed segment is sent again alone, up to this many times, before a timeout "
                  "resends its batch and backs off.  A lost last datagram or last ACK of a burst then costs one "
                  "datagram per probe instead of a batch after a full timeout.  0 = no probes",
                  2, 0, 2, OPAL_INFO_LVL_5, &c->tail_probes);
    c->congestion_control = true;
    (void) mca_base_component_var_register(
        c->version, "congestion_control",
        "Congestion control per peer: a window of bytes in flight that keeps the queueing delay of the "
        "path (round trips less the receiver's ACK hold, above the path's least round trip) under "
        "btl_usnic_cc_target, cut at most once per round trip for delay or loss, switching to loss only "
        "beside flows that keep the queue full; sends are paced at the window's rate in bursts of at most "
        "one segmentation-offload batch.  The receiver's grants still apply: the smaller limit wins.  "
        "false = send whatever the sequence window and the grants allow (the behaviour before issue 26)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &c->congestion_control);
    ok &= reg_int("cc_target",
                  "Microseconds of queueing delay the congestion window aims to keep the path under: a round "
                  "trip longer than the path's least by more than this cuts the window.  Lower keeps queues "
                  "shorter (small messages wait less behind bulk data) but takes scheduling noise of busy "
                  "hosts for congestion more often",
                  300, 10, 1000000, OPAL_INFO_LVL_5, &c->cc_target);
    ok &= reg_int("rto_max",
                  "Ceiling (microseconds) of the adaptive retransmit timeout and of its exponential back-off",
                  10000, 100, 600000000, OPAL_INFO_LVL_5, &c->rto_max);
    ok &= reg_int("away_resend",
                  "Milliseconds (also how often a helper thread looks) the process may leave the usnic BTL unprogressed (a blocking runtime call such "
                  "as MPI_Comm_disconnect's fence, or computation) while data it sent is un-ACKed, before a "
                  "helper thread resends the overdue data (copies, backing off from rto_max to 1 s).  "
                  "Without it a lost last message waits for the next MPI call, and a disconnect can deadlock.  "
                  "0 = no helper thread",
                  100, 0, 60000, OPAL_INFO_LVL_5, &c->away_resend);
    c->yield_when_busy = true;
    (void) mca_base_component_var_register(
        c->version, "yield_when_busy",
        "A progress call that finds nothing gives up the core (sched_yield) while this process shares it: "
        "in the last 0.1 s it got less than 3/4 of the wall time on the CPU and the kernel preempted it at "
        "least 3 times (more busy processes than cores).  What it waits for, a receiver's ACKs or a sender's "
        "data, then runs in its place, as "
        "Open MPI's mpi_yield_when_idle does on nodes it knows are oversubscribed.  false = always poll",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &c->yield_when_busy);
    ok &= reg_int("peer_timeout",
                  "Seconds a peer may leave our data un-ACKed before it is declared dead: its messages fail and "
                  "the job is told (mpirun then ends it).  A peer that does not enter MPI for longer than this "
                  "while we have data for it looks dead too.  0 = never",
                  60, 0, 86400, OPAL_INFO_LVL_4, &c->peer_timeout);
    ok &= reg_int("max_resends_per_iteration",
                  "Maximum number of retransmissions posted per progress call (prevents retransmission storms)", 16,
                  1, 65536, OPAL_INFO_LVL_5, &c->max_resends_per_iteration);
    ok &= reg_int("ack_iteration_delay",
                  "Progress iterations an ACK may wait for data to piggy-back on before it is sent on its own "
                  "(it also waits btl_usnic_ack_delay microseconds)", 4, 0,
                  1000000, OPAL_INFO_LVL_5, &c->ack_iteration_delay);
    ok &= reg_int("ack_delay",
                  "Microseconds an ACK may wait for data to piggy-back on before it is sent on its own (it also "
                  "waits btl_usnic_ack_iteration_delay progress iterations).  A reply within this time carries the "
                  "ACK for free; streams are ACKed every half window regardless.  Must stay below half of "
                  "btl_usnic_rto_min",
                  50, 0, 1000000, OPAL_INFO_LVL_5, &c->ack_delay);
    ok &= reg_int("priority_limit",
                  "Largest datagram (bytes, header included) sent as a tiny message on the priority channel; it is "
                  "also the receive buffer size of that channel (0: 768)",
                  0, 0, 65536, OPAL_INFO_LVL_5, &c->priority_limit);
    ok &= reg_int("window",
                  "Send window: segments that may await an ACK per peer (0: half of the smallest datagrams the "
                  "receive side holds, at most 1024; the receiver's credit, counted in what each datagram costs "
                  "its buffer, limits larger datagrams further).  Rounded down to a power of two; both peers use "
                  "the smaller of their values",
                  0, 0, (int) OPAL_BTL_USNIC_WINDOW_LIMIT, OPAL_INFO_LVL_4, &c->window);
    ok &= reg_int("stats",
                  "If > 0, print per-module statistics every this many seconds and once more at finalize", 0, 0,
                  86400, OPAL_INFO_LVL_4, &c->stats);
    ok &= reg_int("verbose", "Verbosity of the usnic BTL's diagnostic output (0 = quiet, 100 = everything)", 0, 0,
                  100, OPAL_INFO_LVL_5, &c->verbose);
    ok &= reg_int("link_speed", "Link speed (Mbps) assumed when the interface does not report one", 10000, 1,
                  1000000, OPAL_INFO_LVL_5, &c->link_speed_default);

    reg_string("wire",
               "Transport under the reliability engine: \"socket\" = kernel UDP sockets, sending runs of "
               "datagrams to one peer as one segmentation-offload send (UDP_SEGMENT) and reading coalesced runs "
               "(UDP_GRO) where the kernel and the path allow it (else sendmmsg), with datagrams as large as the "
               "interface MTU; \"ofi\" = libfabric's datagram endpoints of the provider (at most 1472 bytes a "
               "datagram on udp); \"auto\" = socket for the udp provider (libfabric's udp is kernel sockets too), "
               "ofi for others (usnic hardware).  Both put the same datagrams on the network, so "
               "processes may differ; a pair uses the smaller of their datagram sizes",
               "auto", OPAL_INFO_LVL_3, &c->wire_name);
    if (is_set(c->wire_name) && 0 == strcmp(c->wire_name, "auto")) {
        c->wire = OPAL_BTL_USNIC_WIRE_AUTO;
    } else if (is_set(c->wire_name) && 0 == strcmp(c->wire_name, "ofi")) {
        c->wire = OPAL_BTL_USNIC_WIRE_OFI;
    } else if (is_set(c->wire_name) && 0 == strcmp(c->wire_name, "socket")) {
        c->wire = OPAL_BTL_USNIC_WIRE_SOCKET;
    } else {
        note_bad_param("wire", is_set(c->wire_name) ? c->wire_name : "(empty)", "auto, ofi or socket");
        ok = false;
    }
    ok &= reg_int("max_datagram",
                  "Largest datagram (bytes, our header included) on the data channel; 0 = as large as the wire and "
                  "the interface MTU allow (the socket wire: MTU - 28, at most 65000; ofi on udp: 1472).  Values "
                  "above 65000 act as 65000.  Peers use the smaller of their two values",
                  0, 0, 65507, OPAL_INFO_LVL_5, &c->max_datagram);
    if (0 != c->max_datagram && c->max_datagram < OPAL_BTL_USNIC_MIN_MTU) {
        char value[32];
        snprintf(value, sizeof(value), "%d", c->max_datagram);
        note_bad_param("max_datagram", value, "0, or 256 to 65507");
        ok = false;
    }
    c->pmtu_discovery = true;
    (void) mca_base_component_var_register(
        c->version, "pmtu_discovery",
        "Find the datagram size each path carries end to end: start every peer at btl_usnic_pmtu_base, raise "
        "it when the peer echoes a larger probe (up to both interfaces' limit), fall back when large "
        "datagrams vanish while small ones cross (a black hole), probe up again every btl_usnic_pmtu_reprobe "
        "ms; ICMP is ignored (the socket wire sends with IP_PMTUDISC_PROBE), so a forged \"fragmentation "
        "needed\" changes nothing.  false = the size is the smaller interface limit, fixed when the peers "
        "meet, and the socket wire lets the kernel's ICMP-learned path MTU refuse larger sends",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &c->pmtu_discovery);
    ok &= reg_int("pmtu_base",
                  "Datagram bytes (our header included, IP and UDP headers not) that surely cross every path "
                  "between the hosts: new peers start here, and a black hole falls back here.  1252 fits a "
                  "1280-byte link (IPv6's minimum MTU); set it lower only for paths below that",
                  1252, OPAL_BTL_USNIC_MIN_MTU, 65000, OPAL_INFO_LVL_5, &c->pmtu_base);
    ok &= reg_int("pmtu_reprobe",
                  "Milliseconds after a path MTU search ended below the interfaces' limit (or fell back from a "
                  "black hole) before it probes upward again, so that a repaired path returns to full size",
                  60000, 100, 86400000, OPAL_INFO_LVL_5, &c->pmtu_reprobe);
    c->sock_gso = true;
    (void) mca_base_component_var_register(
        c->version, "sock_gso",
        "Socket wire: send runs of datagrams to one peer as one UDP_SEGMENT send (segmentation offload; kernel "
        ">= 4.18).  Support is probed per interface at start and per peer at the first such send; a path where "
        "it fails falls back (a smaller run, then sendmmsg), counted as gso_fallbacks.  false = sendmmsg only",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &c->sock_gso);
    c->sock_gro = true;
    (void) mca_base_component_var_register(
        c->version, "sock_gro",
        "Socket wire: let the kernel coalesce runs of datagrams from one peer into one receive (UDP_GRO; "
        "kernel >= 5.0).  false = one datagram per receive",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY, &c->sock_gro);
    ok &= reg_int("sock_rcvbuf",
                  "Bytes of kernel receive buffer asked for on each channel's UDP socket: the socket wire's, "
                  "and the udp provider's under the ofi wire.  Privileged processes get it (SO_RCVBUFFORCE); "
                  "others at most net.core.rmem_max.  What was granted is reported at verbose level 5; the "
                  "smaller channel's is the receive capacity the receiver's grants share",
                  4 << 20, 65536, 1 << 30, OPAL_INFO_LVL_5, &c->sock_rcvbuf);
    ok &= reg_int("sock_sndbuf",
                  "Socket wire: bytes of kernel send buffer asked for (SO_SNDBUFFORCE if privileged, else at most "
                  "net.core.wmem_max); a send that finds it full waits for the next progress pass",
                  4 << 20, 65536, 1 << 30, OPAL_INFO_LVL_5, &c->sock_sndbuf);

    if (is_set(c->if_include) && is_set(c->if_exclude)) {
        note_bad_param("if_include / btl_usnic_if_exclude", "both set",
                       "one of them: they are mutually exclusive");
        ok = false;
    }
    reg_string("connectivity_map",
               "Write which local interface talks to which peer interface to PREFIX-HOST-PID.txt, one line per peer "
               "and module, as peers are added (unset = no file)",
               NULL, OPAL_INFO_LVL_3, &c->connectivity_map);
    c->connectivity_check = true;
    (void) mca_base_component_var_register(
        c->version, "connectivity_check",
        "Check every path to a peer interface before it is used: an agent per host sends a small and an "
        "MTU-sized UDP probe to the peer host's agent and waits for their echoes; a path that loses either size "
        "(MTU mismatch, firewall) is reported and handled by btl_usnic_connectivity_policy.  Costs one round trip "
        "per interface pair at MPI_Init; off = no sockets, no events",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY, &c->connectivity_check);
    ok &= reg_int("connectivity_timeout",
                  "Milliseconds the connectivity agent waits for the echoes of one probe round before it resends; a "
                  "check fails after (btl_usnic_connectivity_retries + 1) rounds",
                  200, 1, 600000, OPAL_INFO_LVL_4, &c->connectivity_timeout);
    ok &= reg_int("connectivity_retries", "Probe rounds the connectivity agent sends after the first one", 5, 0,
                  1000, OPAL_INFO_LVL_4, &c->connectivity_retries);
    reg_string("connectivity_policy",
               "What a failed connectivity check does: \"unreachable\" = that local interface does not talk to "
               "that peer interface (other usnic modules or other BTLs carry the traffic); \"abort\" = the job is "
               "aborted.  The failure is reported either way",
               "unreachable", OPAL_INFO_LVL_3, &c->connectivity_policy);
    if (is_set(c->connectivity_policy) && 0 == strcmp(c->connectivity_policy, "abort")) {
        c->connectivity_abort = true;
    } else if (is_set(c->connectivity_policy) && 0 == strcmp(c->connectivity_policy, "unreachable")) {
        c->connectivity_abort = false;
    } else {
        note_bad_param("connectivity_policy", is_set(c->connectivity_policy) ? c->connectivity_policy : "(empty)",
                       "unreachable or abort");
        ok = false;
    }
    if ((long) c->connectivity_timeout * (c->connectivity_retries + 1) > 3600000L) {
        char value[64];
        snprintf(value, sizeof(value), "timeout=%d retries=%d", c->connectivity_timeout, c->connectivity_retries);
        note_bad_param("connectivity_timeout / btl_usnic_connectivity_retries", value,
                       "timeout * (retries + 1) at most 3600000 ms");
        ok = false;
    }
    reg_string("protection",
               "What every datagram's 128-bit tag (AES-256-GCM, or ChaCha20-Poly1305 where a CPU lacks AES-NI; "
               "keys from getrandom, shared only through the job's modex) authenticates: \"full\" = the whole "
               "datagram (stops injection, replay and splicing by anyone, also a sniffer on the path), "
               "\"header\" = the header only (stops anyone who cannot read the job's traffic: other users, other "
               "jobs, hosts off the path; a sniffer could splice a payload onto a header it saw), \"none\" = "
               "nothing (a trusted private fabric only: anyone who can reach the ports can inject).  Every "
               "process of a job must use the same value",
               "full", OPAL_INFO_LVL_4, &c->protection_name);
    if (is_set(c->protection_name) && 0 == strcmp(c->protection_name, "full")) {
        c->protection = OPAL_BTL_USNIC_PROTECT_FULL;
    } else if (is_set(c->protection_name) && 0 == strcmp(c->protection_name, "header")) {
        c->protection = OPAL_BTL_USNIC_PROTECT_HEADER;
    } else if (is_set(c->protection_name) && 0 == strcmp(c->protection_name, "none")) {
        c->protection = OPAL_BTL_USNIC_PROTECT_NONE;
    } else {
        note_bad_param("protection", is_set(c->protection_name) ? c->protection_name : "(empty)",
                       "full, header or none");
        ok = false;
    }
    reg_string("inject_faults",
               "Testing only: inject faults into this process's own sends, \"dup=N,reorder=M,forge_put=K\": every "
               "N-th datagram is sent twice, every M-th is held back and sent after the next one, and every K-th PUT "
               "datagram is preceded by a forged copy with a wrong key (0 or absent = never).  Leave unset in "
               "production",
               NULL, OPAL_INFO_LVL_9, &c->inject_faults);
    if (OPAL_SUCCESS != parse_inject_faults(c->inject_faults, &c->inject_dup_every, &c->inject_reorder_every,
                                            &c->inject_forge_put_every)) {
        note_bad_param("inject_faults", c->inject_faults,
                       "dup=N,reorder=M,forge_put=K with N, M, K from 0 to 1000000");
        ok = false;
    }
    if (2 * (long) c->ack_delay >= (long) c->rto_min) {
        char value[96];
        snprintf(value, sizeof(value), "ack_delay=%d rto_min=%d", c->ack_delay, c->rto_min);
        note_bad_param("ack_delay / btl_usnic_rto_min", value,
                       "ack_delay < rto_min / 2 (a delayed ACK must never look like a loss)");
        ok = false;
    }
    if (c->rto_min > c->rto_max || c->retrans_timeout > c->rto_max) {
        char value[96];
        snprintf(value, sizeof(value), "retrans_timeout=%d rto_min=%d rto_max=%d", c->retrans_timeout, c->rto_min,
                 c->rto_max);
        note_bad_param("retrans_timeout / btl_usnic_rto_min / btl_usnic_rto_max", value,
                       "rto_min <= rto_max and retrans_timeout <= rto_max");
        ok = false;
    }
    if (!is_set(c->provider_include)) {
        note_bad_param("provider_include", "(empty)", "a non-empty list of libfabric provider names");
        ok = false;
    }
    if (0 != c->priority_limit && c->priority_limit < (int) sizeof(opal_btl_usnic_hdr_t) + 64) {
        char value[32];
        snprintf(value, sizeof(value), "%d", c->priority_limit);
        note_bad_param("priority_limit", value, "0, or at least 88 bytes");
        ok = false;
    }
    /* latency and bandwidth are not registered by the BTL base in 4.1 */
    ok &= reg_int("latency", "Relative latency of this BTL; the BML sends eager and short messages over the BTLs "
                  "with the lowest value", (int) tmpl->btl_latency, 0, 1000000,
                  OPAL_INFO_LVL_5, &c->latency);
    tmpl->btl_latency = (uint32_t) c->latency;
    ok &= reg_int("numa_latency_penalty",
                  "Latency added to a module per NUMA step between the process's binding and the interface's "
                  "PCI device (hwloc distances; a device on another node at an unknown distance counts one step), "
                  "so that the BML prefers near interfaces.  Only where the process is bound and hwloc knows the "
                  "device; 0 = no NUMA preference",
                  1, 0, 1000000, OPAL_INFO_LVL_5, &c->numa_latency_penalty);
    ok &= reg_int("bandwidth",
                  "Bandwidth (Mbps) the BML uses to stripe large messages across BTLs (0: the interface's link "
                  "speed, or btl_usnic_link_speed if it reports none)",
                  0, 0, 100000000, OPAL_INFO_LVL_5, &c->bandwidth);
    c->params_valid = ok;

    /* The standard btl_usnic_* parameters (exclusivity, flags, eager_limit,
     * rndv_eager_limit, max_send_size, latency, bandwidth, ...) with the
     * module template's values as defaults. */
    return mca_btl_base_param_register(c->version, tmpl);
}

/* ----- MPI_T performance variables: one array element per module ----- */

typedef struct {
    const char *name;
    const char *help;
    size_t offset;
} counter_desc_t;

static const counter_desc_t counters[] = {
#define OPAL_BTL_USNIC_COUNTER_DESC(n, h) {#n, h, offsetof(opal_btl_usnic_stats_t, n)},
    OPAL_BTL_USNIC_COUNTERS(OPAL_BTL_USNIC_COUNTER_DESC)
#undef OPAL_BTL_USNIC_COUNTER_DESC
};

static int pvar_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void) obj;
    size_t offset = (size_t) (uintptr_t) pvar->ctx;
    unsigned long *out = (unsigned long *) value;
    OPAL_BTL_USNIC_LOCK(); /* an MPI_T reader thread races with progress otherwise */
    for (int i = 0; i < opal_btl_usnic_globals.num_modules; ++i) {
        const char *stats = (const char *) &opal_btl_usnic_globals.modules[i]->eng.stats;
        out[i] = (unsigned long) *(const uint64_t *) (stats + offset);
    }
    OPAL_BTL_USNIC_UNLOCK();
    return OPAL_SUCCESS;
}

static int pvar_notify(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj, int *count)
{
    (void) pvar;
    (void) obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = opal_btl_usnic_globals.num_modules;
    }
    return OPAL_SUCCESS;
}

int opal_btl_usnic_register_pvars(void)
{
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); ++i) {
        int rc = mca_base_component_pvar_register(
            opal_btl_usnic_globals.version, counters[i].name, counters[i].help, OPAL_INFO_LVL_4,
            /* a high-water mark is no counter: MPI_T must not report its growth */
            0 == strncmp(counters[i].name, "max_", 4) ? MCA_BASE_PVAR_CLASS_HIGHWATERMARK : MCA_BASE_PVAR_CLASS_COUNTER,
            MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
            MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, pvar_get, NULL, pvar_notify,
            (void *) (uintptr_t) counters[i].offset);
        if (rc < 0) {
            return rc;
        }
    }
    return OPAL_SUCCESS;
}

/* " (oldest: seq S, FRAG, tag T, flags F, 3 resends)": what a peer has
 * not ACKed first, for the per-peer statistics line; "" with nothing in
 * flight */
/* The congestion controller of |ep|'s path: window, pacing rate, least
 * and smoothed RTT, queueing delay, and its mode */
static void describe_congestion(const opal_btl_usnic_endpoint_t *ep, char *buf, size_t len)
{
    if (!ep->eng->p.cc_enabled) {
        snprintf(buf, len, "cc=off");
        return;
    }
    opal_btl_usnic_cc_path_t path;
    opal_btl_usnic_endpoint_cc_path(ep, &path);
    snprintf(buf, len, "cwnd=%llu rate=%.0fMB/s minrtt=%lluus qdelay=%lluus%s",
             (unsigned long long) ep->cc.cwnd, opal_btl_usnic_cc_rate(&ep->cc, &path),
             (unsigned long long) ep->cc.base_rtt, (unsigned long long) ep->cc.qdelay_avg,
             ep->cc.slow_start ? " slow-start" : ep->cc.loss_mode ? " loss-mode" : "");
}

static void describe_oldest(const opal_btl_usnic_endpoint_t *ep, char *buf, size_t len)
{
    if (0 == opal_btl_usnic_endpoint_in_flight(ep)) {
        return;
    }
    const opal_btl_usnic_send_seg_t *seg = ep->tx.sent[opal_btl_usnic_slot(ep, (ep->tx.acked_seq + 1))];
    if (NULL == seg) {
        return;
    }
    snprintf(buf, len, " (oldest: seq %u, %s, tag %u, flags 0x%x, %u resends)", (unsigned) seg->seq,
             opal_btl_usnic_seg_type_name(seg->hdr->type), (unsigned) seg->hdr->tag, (unsigned) seg->hdr->flags,
             (unsigned) seg->retries);
}

void opal_btl_usnic_module_print_stats(opal_btl_usnic_module_t *module, const char *when)
{
    char line[4096];
    int n = snprintf(line, sizeof(line), "btl:usnic %s stats [%s rank %u %s]:", when, opal_process_info.nodename,
                     (unsigned) OPAL_PROC_MY_NAME.vpid, module->if_name);
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]) && n < (int) sizeof(line) - 64; ++i) {
        uint64_t v = *(const uint64_t *) ((const char *) &module->eng.stats + counters[i].offset);
        if (0 != v) {
            n += snprintf(line + n, sizeof(line) - n, " %s=%llu", counters[i].name + 4 * (0 == strncmp(counters[i].name, "num_", 4)),
                          (unsigned long long) v);
        }
    }
    opal_output(0, "%s", line);
    opal_list_item_t *item;
    OPAL_LIST_FOREACH (item, &module->all_endpoints, opal_list_item_t) {
        opal_btl_usnic_endpoint_t *ep = (opal_btl_usnic_endpoint_t *) item;
        opal_btl_usnic_rx_state_t rx;
        opal_btl_usnic_rx_state(ep, &rx);
        /* the sending side (what we wait for) and the receiving side
         * (what the peer may be waiting for from us) of this peer */
        char oldest[96] = "", path[48] = "", cc[128] = "";
        describe_oldest(ep, oldest, sizeof(oldest));
        describe_congestion(ep, cc, sizeof(cc));
        if (NULL != module->transport->describe_peer) {
            module->transport->describe_peer(module, ep, path, sizeof(path));
        }
        opal_output(0, "btl:usnic %s stats [%s rank %u %s] peer %s: srtt=%lluus rttvar=%lluus rto=%lluus backoff=%u "
                    "in_flight=%u (%llu bytes of its buffer)%s queued=%zu credit=%llu window=%u dgram=%u max=%u probes=%u/%u/%u%s %s; rx next=%u ahead=%u holes=%u held=%u slots=%u "
                    "ack_owed=%d%s",
                    when, opal_process_info.nodename, (unsigned) OPAL_PROC_MY_NAME.vpid, module->if_name,
                    opal_btl_usnic_id_str(ep->peer_id).s, (unsigned long long) ep->timer.srtt, (unsigned long long) ep->timer.rttvar,
                    (unsigned long long) ep->timer.rto, ep->timer.backoff, opal_btl_usnic_endpoint_in_flight(ep),
                    (unsigned long long) ep->tx.in_flight_charge, oldest, opal_list_get_size(&ep->tx.queue),
                    (unsigned long long) ep->tx.peer_credit, ep->window, ep->pmtu.cur, ep->pmtu.max,
                    ep->pmtu.probes_sent, ep->pmtu.probes_acked, ep->pmtu.probes_lost, path, cc, (unsigned) rx.next_expected,
                    rx.ahead, rx.holes, rx.held, rx.slots, (int) ep->rx.ack_owed,
                    ep->departed ? " DEPARTED" : ep->failed ? " FAILED" : "");
    }
}
