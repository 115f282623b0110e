/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The usnic BTL: reliable MPI messaging over datagrams: kernel UDP
 * sockets with segmentation offload (the socket wire, the default where
 * there is no usNIC) or libfabric FI_EP_DGRAM endpoints (the ofi wire:
 * the "usnic" provider on Cisco VICs, any other datagram provider).
 */
#ifndef OPAL_BTL_USNIC_H
#define OPAL_BTL_USNIC_H

#include "opal_config.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "opal/class/opal_hash_table.h"
#include "opal/class/opal_list.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"
#include "opal/util/show_help.h"

#include "btl_usnic_compat.h"

#include "btl_usnic_engine.h"
#include "btl_usnic_help.h"
#include "btl_usnic_share.h"
#include "btl_usnic_wire.h"

BEGIN_C_DECLS

#define OPAL_BTL_USNIC_MAX_PROVIDER_NAME 32


/* What a module publishes in the modex, one per module.  Fixed-size
 * fields, little-endian, so heterogeneous builds read the same bytes. */
typedef struct __attribute__((packed)) opal_btl_usnic_modex_t {
    uint32_t proto_version;
    uint32_t ipv4;              /* network byte order */
    uint32_t netmask;           /* network byte order */
    uint16_t ports[OPAL_BTL_USNIC_NUM_CHANNELS]; /* host byte order */
    uint32_t mtu;               /* max datagram on the data channel */
    uint32_t tiny_mtu;          /* max datagram on the priority channel */
    uint32_t isn;               /* random; a pair's first sequence numbers derive from both ends' (opal_btl_usnic_pair_isn) */
    uint32_t window;            /* segments we accept un-ACKed */
    uint32_t link_speed_mbps;
    char provider[OPAL_BTL_USNIC_MAX_PROVIDER_NAME];
    char if_name[16];           /* Linux interface, for messages */
    uint16_t probe_port;        /* connectivity agent's UDP port (host order), 0 = none */
    uint8_t protection;         /* opal_btl_usnic_protect_t: both ends must agree */
    uint8_t mac_algs;           /* OPAL_BTL_USNIC_MAC_* this process can run */
    uint8_t dh_public[OPAL_BTL_USNIC_DH_BYTES]; /* X25519: pair keys come from it (btl_usnic_auth.c) */
    uint8_t node_id[OPAL_BTL_USNIC_ID_BYTES];   /* who we are when we send (random) */
    uint8_t agent_key[OPAL_BTL_USNIC_KEY_BYTES]; /* the connectivity agents' key (rank 0's is the job's);
                                                    all zero where the launcher's secret keys them */
    uint8_t secret_id[OPAL_BTL_USNIC_ID_BYTES]; /* the launcher's secret's public name, zero = none */
    uint8_t wire;               /* opal_btl_usnic_wire_kind_t the module runs (both put the same
                                   datagrams on the network; for messages and statistics) */
    uint8_t wire_flags;         /* OPAL_BTL_USNIC_WIRE_FLAG_*: what its wire does, for messages */
    uint16_t reserved;
    uint64_t rx_capacity;       /* what our receive side holds, in bytes of its charge */
    opal_btl_usnic_charge_t rx_charge; /* what one datagram costs of it, by size (btl_usnic_charge.h):
                                   senders count what they have in flight to us with it */
} opal_btl_usnic_modex_t;

#define OPAL_BTL_USNIC_WIRE_FLAG_GSO 0x01 /* sends batches with UDP segmentation offload */
#define OPAL_BTL_USNIC_WIRE_FLAG_GRO 0x02 /* receives coalesced batches (UDP_GRO) */


struct opal_btl_usnic_ofi_state;
struct opal_btl_usnic_sock_state;
struct opal_btl_usnic_inject_state;

typedef struct opal_btl_usnic_module_t {
    mca_btl_base_module_t super;
    opal_btl_usnic_engine_t eng;

    char *if_name;              /* Linux interface */
    char *domain_name;          /* libfabric domain (= if name on udp) */
    char *provider;
    uint32_t ipv4;              /* network byte order */
    uint32_t netmask;           /* network byte order */
    opal_btl_usnic_mem_ops_t mem_ops; /* how the engine registers its slabs (if caps.needs_mr) */
    uint32_t link_speed_mbps;
    uint8_t dh_secret[OPAL_BTL_USNIC_DH_BYTES]; /* X25519, never leaves the process */
    uint8_t dh_public[OPAL_BTL_USNIC_DH_BYTES]; /* published in the modex */
    uint8_t node_id[OPAL_BTL_USNIC_ID_BYTES];

    /* The transport (btl_usnic_wire.h), chosen once at setup, and what it
     * can do (filled by its open).  Each wire keeps its state behind its
     * own pointer, which only its file may follow: libfabric's fabric,
     * domain, AV, endpoints, CQs, receive buffers and registrations are
     * btl_usnic_wire_ofi.c's alone; the kernel sockets of the socket wire
     * btl_usnic_wire_sock.c's; the fault injector's (NULL when off)
     * btl_usnic_inject.c's. */
    const opal_btl_usnic_transport_t *transport;
    opal_btl_usnic_transport_caps_t caps;
    opal_btl_usnic_wire_kind_t wire_kind; /* the transport's, wrapped or not (published in the modex) */
    uint8_t wire_flags;         /* OPAL_BTL_USNIC_WIRE_FLAG_* (published in the modex) */
    struct opal_btl_usnic_ofi_state *ofi;
    struct opal_btl_usnic_sock_state *sock;
    struct opal_btl_usnic_inject_state *inject;

    opal_btl_usnic_modex_t local_modex;
    opal_list_t all_endpoints;
    opal_btl_usnic_endpoint_t **peers; /* peers of our job, by vpid */
    size_t num_peer_slots;
    opal_hash_table_t other_job_peers; /* peers of spawned or connected jobs, by sender id */

    mca_btl_base_module_error_cb_fn_t pml_error_cb;
    uint64_t on_demand_last_usec; /* last try to add an unknown sender (btl_usnic_peers.c) */
    bool prio_found_empty;     /* the fast path just found the priority channel empty: the full pass
                                  that follows need not read it again (the transport reads and sets
                                  it, the component's progress clears it when it goes stale) */
} opal_btl_usnic_module_t;

/*
 * The component's parameters and state, shared by every file: one
 * instance, opal_btl_usnic_globals (btl_usnic_globals.c, data only).  The
 * MCA component structure Open MPI loads, mca_btl_usnic_component, is
 * btl_usnic_component.c's alone: a file that reached it would call into
 * the component's top (calls between objects go one way; see
 * test/unit/check-calls.sh).
 */
typedef struct opal_btl_usnic_component_t {
    mca_base_component_t *version; /* mca_btl_usnic_component's, set when it registers */

    /* MCA parameters */
    char *provider_include;
    char *if_include;
    char *if_exclude;
    int max_btls;
    int sd_num;
    int rd_num;
    int prio_sd_num;
    int prio_rd_num;
    int retrans_timeout;        /* microseconds: RTO before the first RTT sample */
    int rto_min;                /* microseconds */
    int rto_max;                /* microseconds */
    int peer_timeout;           /* seconds; 0 = never */
    int tail_probes;            /* tail-loss probes before a timeout */
    bool congestion_control;    /* congestion window and pacing per peer (btl_usnic_cc.c) */
    int cc_target;              /* us of queueing delay the window aims to keep under */
    int max_resends_per_iteration;
    int ack_iteration_delay;
    int ack_delay;
    int priority_limit;         /* bytes of a tiny datagram */
    int window;                 /* 0 = derive from the socket buffer */
    int stats;                  /* seconds between statistics lines, 0 = off */
    int verbose;
    int link_speed_default;     /* Mbps when the interface does not say */
    char *wire_name;            /* btl_usnic_wire */
    int wire;                   /* opal_btl_usnic_wire_kind_t */
    int max_datagram;           /* bytes of our largest datagram; 0 = what the path allows */
    bool pmtu_discovery;        /* search each path's MTU end to end (btl_usnic_pmtu.c) */
    int pmtu_base;              /* bytes of a datagram that surely crosses any path */
    int pmtu_reprobe;           /* ms between a search that ended below the limit and the next */
    bool sock_gso;              /* socket wire: send batches with UDP_SEGMENT where it works */
    bool sock_gro;              /* socket wire: receive coalesced batches (UDP_GRO) */
    int sock_rcvbuf;            /* socket wire: bytes of kernel receive buffer asked for (data channel) */
    int sock_sndbuf;            /* socket wire: bytes of kernel send buffer asked for */
    char *connectivity_map;     /* file name prefix, or NULL/"" for none */
    FILE *map_file;             /* opened at the first peer */
    char *inject_faults;        /* testing only: "dup=N,reorder=M" */
    uint32_t inject_dup_every;
    uint32_t inject_reorder_every;
    uint32_t inject_forge_put_every;
    bool connectivity_check;    /* the connectivity checker (btl_usnic_connectivity.h) */
    int connectivity_timeout;   /* ms an agent waits for the echo of one probe round */
    int connectivity_retries;   /* probe rounds after the first */
    char *connectivity_policy;  /* "unreachable" or "abort" */
    bool connectivity_abort;    /* policy == abort */
    int bandwidth;              /* Mbps for the BML; 0 = link speed */
    int latency;                /* relative latency for the BML */
    int numa_latency_penalty;   /* latency added per NUMA step to a far device; 0 = off */
    char *protection_name;      /* btl_usnic_protection */
    int protection;             /* opal_btl_usnic_protect_t */
    unsigned mac_algs;          /* OPAL_BTL_USNIC_MAC_* this process can run (libsodium, CPU) */
    uint8_t agent_key[OPAL_BTL_USNIC_KEY_BYTES]; /* published; rank 0's keys the connectivity agents */
    opal_btl_usnic_job_secret_t job_secret; /* the launcher's (btl_usnic_auth.h) */
    bool said_no_shared_secret; /* the verbose line for pairs keyed by X25519 alone, once */

    bool params_valid;
    char open_why[160];         /* why the last interface a wire could not open failed (the message
                                   when none opens: component init) */
    int output;                 /* opal_output stream */
    int num_modules;
    opal_btl_usnic_module_t **modules;
    opal_recursive_mutex_t lock;
    bool lock_always;           /* lock even without MPI threads: the away thread runs */
    int away_resend;            /* ms away before the away thread resends; 0 = no thread */
    bool yield_when_busy;       /* idle progress gives up a core it shares (btl_usnic_share.c) */
    opal_btl_usnic_share_t share; /* this process's share of its core (under the lock) */
    bool away_running;
    uint64_t last_progress_usec; /* the last progress call (under the lock) */
    bool fastpath_ok;
    opal_event_t stats_event;
    bool stats_event_active;
} opal_btl_usnic_component_t;

extern opal_btl_usnic_component_t opal_btl_usnic_globals;

/* The largest probe the connectivity checker needs to cross: with the
 * path MTU search on, its base size (the search finds the rest); else
 * no cap (0) */
static inline uint32_t opal_btl_usnic_connectivity_probe_cap(void)
{
    return opal_btl_usnic_globals.pmtu_discovery ? (uint32_t) opal_btl_usnic_globals.pmtu_base : 0;
}
extern mca_btl_base_module_t opal_btl_usnic_module_template;

/* A real lock with MPI threads, or while the away thread may run */
#define OPAL_BTL_USNIC_LOCK()                                                  \
    do {                                                                       \
        if (opal_using_threads() || opal_btl_usnic_globals.lock_always) {     \
            opal_mutex_lock(&opal_btl_usnic_globals.lock);                    \
        }                                                                      \
    } while (0)
#define OPAL_BTL_USNIC_UNLOCK()                                                \
    do {                                                                       \
        if (opal_using_threads() || opal_btl_usnic_globals.lock_always) {     \
            opal_mutex_unlock(&opal_btl_usnic_globals.lock);                  \
        }                                                                      \
    } while (0)

/* The away thread (btl_usnic_away.c): resends for a process that stays
 * out of MPI with data in flight.  Started after the modules exist,
 * stopped before they go. */
void opal_btl_usnic_away_start(void);
void opal_btl_usnic_away_stop(void);

#define opal_btl_usnic_verbose(level, ...) \
    opal_output_verbose(level, opal_btl_usnic_globals.output, "btl:usnic: " __VA_ARGS__)

/* The engines' clock: microseconds, monotonic.  Read once per progress
 * pass, and before a send posts outside progress (the fast path), so that
 * send times and RTT samples are never stale. */
static inline uint64_t opal_btl_usnic_clock_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* Sender ids: a process name as one 64-bit number, jobid << 32 | vpid,
 * unique across the jobs Open MPI connects (a vpid alone is not) */
static inline uint64_t opal_btl_usnic_proc_id(const opal_process_name_t *name)
{
    return ((uint64_t) name->jobid << 32) | (uint64_t) name->vpid;
}

static inline uint32_t opal_btl_usnic_id_jobid(uint64_t id)
{
    return (uint32_t) (id >> 32);
}

static inline uint32_t opal_btl_usnic_id_vpid(uint64_t id)
{
    return (uint32_t) id;
}

/* "3" for rank 3 of our job, "3 of job 0x1a2b0002" for a rank of another */
typedef struct {
    char s[48];
} opal_btl_usnic_id_str_t;

static inline opal_btl_usnic_id_str_t opal_btl_usnic_id_str(uint64_t id)
{
    opal_btl_usnic_id_str_t r;
    if (opal_btl_usnic_id_jobid(id) == OPAL_PROC_MY_NAME.jobid) {
        snprintf(r.s, sizeof(r.s), "%u", (unsigned) opal_btl_usnic_id_vpid(id));
    } else {
        snprintf(r.s, sizeof(r.s), "%u of job 0x%x", (unsigned) opal_btl_usnic_id_vpid(id),
                 (unsigned) opal_btl_usnic_id_jobid(id));
    }
    return r;
}

static inline opal_btl_usnic_module_t *opal_btl_usnic_module_of(opal_btl_usnic_engine_t *eng)
{
    return (opal_btl_usnic_module_t *) ((char *) eng - offsetof(opal_btl_usnic_module_t, eng));
}

/* btl_usnic_mca.c */
/* Register every parameter (the BTL base's ones into |tmpl|, the module
 * template, whose values are their defaults) */
int opal_btl_usnic_component_register_params(mca_btl_base_module_t *tmpl);
int opal_btl_usnic_register_pvars(void);
/**
 * Show a help message of help-mpi-btl-usnic.txt.  On Open MPI 5.0
 * through opal_show_help itself, so that mpirun aggregates the copies of
 * all processes (a macro, not a va_list wrapper: the runtime replaces
 * opal_show_help).  Where show_help would lose the message or not render
 * our own file (opal_btl_usnic_help_via_runtime false: 4.1's mpirun,
 * 6.0 and later, a different copy in Open MPI's data directory; see
 * add_help_dirs) our renderer writes it to stderr, which mpirun forwards.
 * |once_per_host|: only local rank 0 speaks (messages every process of a
 * host would repeat).
 */
bool opal_btl_usnic_help_speaks(bool once_per_host);
void opal_btl_usnic_show_help_own(const char *topic, ...);
#define opal_btl_usnic_show_help(once_per_host, topic, ...)                                                      \
    do {                                                                                                         \
        if (!opal_btl_usnic_help_speaks(once_per_host)) {                                                        \
        } else if (opal_btl_usnic_help_via_runtime) {                                                            \
            (void) opal_show_help(OPAL_BTL_USNIC_HELP_FILE, (topic), true, __VA_ARGS__);                         \
        } else {                                                                                                 \
            opal_btl_usnic_show_help_own((topic), __VA_ARGS__);                                                  \
        }                                                                                                        \
    } while (0)
/* show_help for every bad parameter value found at registration */
void opal_btl_usnic_report_bad_params(void);

/* btl_usnic_module.c */
int opal_btl_usnic_module_init(opal_btl_usnic_module_t *module, const opal_btl_usnic_transport_t *wire,
                               const opal_btl_usnic_device_t *dev);
int opal_btl_usnic_module_progress(opal_btl_usnic_module_t *module, uint64_t now);
bool opal_btl_usnic_module_progress_fast(opal_btl_usnic_module_t *module, uint64_t now);
void opal_btl_usnic_module_print_stats(opal_btl_usnic_module_t *module, const char *when);

/* btl_usnic_hwloc.c: where the process is bound and hwloc knows an
 * interface's PCI device, raise the btl_latency of modules farther (in NUMA
 * distance) from the binding; verbose(5) says why nothing changed. */
void opal_btl_usnic_hwloc_prefer_near(void);

/**
 * Latency of a module whose device is at NUMA distance |dist| from the
 * process's binding, |local| being the distance of a NUMA node to itself
 * (hwloc's latency matrix holds ACPI SLIT values: 10 local, 20/21 one hop,
 * 30-40 two hops).  A device on a node of the binding (0 < dist <= local)
 * keeps |base|.  A farther one gets |base| + |penalty| * steps, steps =
 * dist / local rounded to the nearest integer, minus one, but at least one
 * (SLIT 11..24: 1, 25..34: 2, ...); dist or local 0 means "another node, no
 * distance known": one step.  Saturates at UINT32_MAX; |penalty| 0: |base|.
 * Pure: unit-tested in test/unit/test_hwloc.c.
 */
static inline uint32_t opal_btl_usnic_numa_latency(uint32_t base, uint64_t local, uint64_t dist, uint32_t penalty)
{
    uint64_t steps;
    if (0 == penalty) {
        return base;
    }
    if (0 == local || 0 == dist) {
        steps = 1;
    } else if (dist <= local) {
        return base;
    } else {
        steps = dist / local + (dist % local >= (local + 1) / 2 ? 1 : 0) - 1;
        if (steps < 1) {
            steps = 1;
        }
    }
    if (steps > UINT32_MAX) {
        return UINT32_MAX;
    }
    uint64_t v = (uint64_t) base + steps * (uint64_t) penalty; /* < 2^64: both factors < 2^32 */
    return (v > UINT32_MAX) ? UINT32_MAX : (uint32_t) v;
}

/* btl_usnic_if.c: interface facts the udp provider does not give us */
int opal_btl_usnic_parse_cidr(const char *text, uint32_t *addr_p, uint32_t *mask_p);
/* 127.0.0.0/8 (|ipv4| in network order) */
bool opal_btl_usnic_is_loopback(uint32_t ipv4);
int opal_btl_usnic_ifname_for_ipv4(uint32_t ipv4, char *name, size_t len);
int opal_btl_usnic_if_mtu(const char *ifname);
/* Largest datagram of ours (header and payload, after the provider's
 * |prefix|) for a provider's |max_msg_size| (which counts the prefix) on
 * an interface of MTU |if_mtu| (<= 0: unknown); 0 if none fits */
size_t opal_btl_usnic_datagram_mtu(size_t max_msg_size, size_t prefix, int if_mtu);
/* Below this a module is not worth having: a chunk header and some payload */
#define OPAL_BTL_USNIC_MIN_MTU 256
/* |mtu| within btl_usnic_max_datagram (0: no cap) */
static inline size_t opal_btl_usnic_datagram_cap(size_t mtu)
{
    int cap = opal_btl_usnic_globals.max_datagram;
    return (cap > 0 && (size_t) cap < mtu) ? (size_t) cap : mtu;
}
int opal_btl_usnic_if_speed_mbps(const char *ifname);
/* A socket buffer of |want| bytes for |fd| (|opt| SO_RCVBUF or SO_SNDBUF):
 * forced where we may (|force_opt|: root, or CAP_NET_ADMIN), else as much
 * as net.core.[rw]mem_max allows.  Returns what the kernel granted (-1:
 * unknown). */
long opal_btl_usnic_socket_buffer(int fd, int force_opt, int opt, int want);
/**
 * What this kernel charges a UDP socket's receive buffer for one datagram
 * of each size class up to |mtu| (btl_usnic_charge.h; larger classes: the
 * charge of |mtu|), measured on a scratch socket bound to |ipv4| (network
 * order); off loopback never less than a NIC's half-page buffer.  Sizes it
 * cannot measure are estimated.  Returns how many classes it measured.
 */
int opal_btl_usnic_kernel_charges(uint32_t ipv4, size_t mtu, opal_btl_usnic_charge_t *table);
/* Our UDP socket bound to |ipv4|:|port| (network order address, host
 * order port), found among our descriptors; -1 if none (hardware providers). */
int opal_btl_usnic_socket_fd(uint32_t ipv4, uint16_t port);
/* The kernel receive buffer (bytes) of socket |fd|; -1 if unknown. */
long opal_btl_usnic_socket_rcvbuf(int fd);

/**
 * Does interface (|ifname|, |domain|, |ipv4|) pass the filter list
 * |list| (comma-separated names and a.b.c.d/len subnets)?  Invalid
 * entries are reported through *|bad_entry_p| (first one) and never match.
 */
bool opal_btl_usnic_if_list_matches(const char *list, const char *ifname, const char *domain, uint32_t ipv4,
                                    char **bad_entry_p);

/**
 * Bit i set: entry i of |list| (counted as opal_btl_usnic_if_list_matches
 * splits it) matches interface (|ifname|, |domain|, |ipv4|).  Invalid
 * entries and entries past the 32nd always count as matched (an invalid
 * one is reported as such).  OR it over every interface to find the
 * entries that match nothing.  Pure.
 */
uint32_t opal_btl_usnic_if_list_match_mask(const char *list, const char *ifname, const char *domain, uint32_t ipv4);
/* The entries of |list| whose bit is clear in |matched|, ", "-separated
 * into |buf| (empty if none).  Pure. */
void opal_btl_usnic_if_list_unmatched(const char *list, uint32_t matched, char *buf, size_t len);

/* An IPv4 interface of this host that is up (getifaddrs) */
typedef struct opal_btl_usnic_host_if_t {
    char name[16];
    uint32_t ipv4;    /* network order */
    uint32_t netmask; /* network order */
} opal_btl_usnic_host_if_t;
/* Up to |max| of this host's interfaces into |ifs|; returns how many */
int opal_btl_usnic_if_host_list(opal_btl_usnic_host_if_t *ifs, int max);
/* "lo 127.0.0.1/8, eth0 192.0.2.2/24" into |buf|.  Pure. */
void opal_btl_usnic_if_describe(const opal_btl_usnic_host_if_t *ifs, int n, char *buf, size_t len);

/**
 * Pair the modules of two processes, one to one: a_to_b[i] is the index
 * in |b| of the module that |a|'s module i talks to, or -1.  Same subnet
 * first, then (routed networks) any left of the same loopback-ness, both
 * in list order.  The result depends only on the two lists, so when |a| is
 * always the process with the lower rank both sides compute the same
 * pairing; one to one because the receiver keys a sender by its rank, so
 * two of its modules must never feed one remote module.
 */
#define OPAL_BTL_USNIC_MAX_MODULES_PAIRED 64
void opal_btl_usnic_pair_modules(const opal_btl_usnic_modex_t *a, size_t na, const opal_btl_usnic_modex_t *b,
                                 size_t nb, int *a_to_b);

END_C_DECLS

#endif /* OPAL_BTL_USNIC_H */
