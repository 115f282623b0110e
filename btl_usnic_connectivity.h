/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The connectivity checker (btl_usnic_connectivity_check).
 *
 * One agent per host (btl_usnic_cagent.c, in local rank 0) owns a UDP
 * socket per local interface, bound to the interface's address; its port
 * is published in that module's modex entry (probe_port; 0 in every other
 * process).  Every process has a client (btl_usnic_cclient.c) that asks
 * its host's agent, over a SOCK_SEQPACKET Unix socket, to check a (local
 * interface, peer interface) pair.  The socket is in a directory only the
 * job's user can enter: the job session directory if it is ours and mode
 * 0700 and the path fits, else a fresh mkdtemp directory; local rank 0
 * publishes the socket's path in the modex (local scope), never a name
 * anyone could predict and take first.  The agent closes a client whose
 * SO_PEERCRED uid is not its own, and a client talks only to an agent of
 * its own uid.  The agent
 * sends a small probe and one of the path's MTU (the smaller of the two
 * modex MTUs) to the peer host's agent, which echoes each probe back
 * unchanged except for its type.  An echo of both sizes proves the path
 * in both directions; a size not echoed after btl_usnic_connectivity_retries
 * resends, btl_usnic_connectivity_timeout ms apart, fails the pair.  The
 * agent shares one check among all local processes asking for the same
 * pair, and tells the first one asking to report a failure (show_help).
 *
 * No thread: the agent's sockets are libevent events on
 * opal_sync_event_base (run by opal_progress), and a client that waits in
 * add_procs services its own process's agent from its waiting loop.
 *
 * The probe format and the verdict are pure functions, here, for the unit
 * tests (test/unit/test_connectivity.c).
 */
#ifndef OPAL_BTL_USNIC_CONNECTIVITY_H
#define OPAL_BTL_USNIC_CONNECTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* ----- probe datagrams (UDP payload, all fields big-endian) -----
 *
 *   0  magic    "uCk1"
 *   4  type     1 = probe, 2 = echo
 *   5  reserved (0)
 *   6  reserved (0)
 *   8  cookie   the job's cookie: probes of other jobs are ignored
 *  12  check    the sending agent's check id
 *  16  size     the datagram's own length (a truncated one is invalid)
 *  20  attempt  0 = first send, then 1, 2, ...
 *  24  filler   bytes (i * 7) & 0xff, up to size
 */
#define OPAL_BTL_USNIC_CPROBE_MAGIC 0x75436b31u
#define OPAL_BTL_USNIC_CPROBE_HDR_LEN 24u
#define OPAL_BTL_USNIC_CPROBE_SMALL 64u
#define OPAL_BTL_USNIC_CPROBE_MAX 65000u
#define OPAL_BTL_USNIC_CPROBE_PROBE 1
#define OPAL_BTL_USNIC_CPROBE_ECHO 2

typedef struct opal_btl_usnic_cprobe_t {
    uint8_t type;
    uint32_t cookie;
    uint32_t check_id;
    uint32_t size;
    uint32_t attempt;
} opal_btl_usnic_cprobe_t;

static inline void opal_btl_usnic_cprobe_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;
}

static inline uint32_t opal_btl_usnic_cprobe_get32(const uint8_t *p)
{
    return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | (uint32_t) p[3];
}

/* Write probe |p| (p->size bytes) into |buf| of |len| bytes.  Returns
 * the datagram length, or 0 if the size is out of range or |buf| too small. */
static inline size_t opal_btl_usnic_cprobe_pack(uint8_t *buf, size_t len, const opal_btl_usnic_cprobe_t *p)
{
    if (p->size < OPAL_BTL_USNIC_CPROBE_HDR_LEN || p->size > OPAL_BTL_USNIC_CPROBE_MAX || len < p->size) {
        return 0;
    }
    opal_btl_usnic_cprobe_put32(buf, OPAL_BTL_USNIC_CPROBE_MAGIC);
    buf[4] = p->type;
    buf[5] = 0;
    buf[6] = 0;
    buf[7] = 0;
    opal_btl_usnic_cprobe_put32(buf + 8, p->cookie);
    opal_btl_usnic_cprobe_put32(buf + 12, p->check_id);
    opal_btl_usnic_cprobe_put32(buf + 16, p->size);
    opal_btl_usnic_cprobe_put32(buf + 20, p->attempt);
    for (uint32_t i = OPAL_BTL_USNIC_CPROBE_HDR_LEN; i < p->size; ++i) {
        buf[i] = (uint8_t) (i * 7u);
    }
    return p->size;
}

/* Parse a received datagram of |len| bytes.  Valid: magic, a known type,
 * our |cookie|, and a size field equal to |len|. */
static inline bool opal_btl_usnic_cprobe_parse(const uint8_t *buf, size_t len, uint32_t cookie,
                                               opal_btl_usnic_cprobe_t *p)
{
    if (len < OPAL_BTL_USNIC_CPROBE_HDR_LEN || len > OPAL_BTL_USNIC_CPROBE_MAX ||
        OPAL_BTL_USNIC_CPROBE_MAGIC != opal_btl_usnic_cprobe_get32(buf)) {
        return false;
    }
    p->type = buf[4];
    p->cookie = opal_btl_usnic_cprobe_get32(buf + 8);
    p->check_id = opal_btl_usnic_cprobe_get32(buf + 12);
    p->size = opal_btl_usnic_cprobe_get32(buf + 16);
    p->attempt = opal_btl_usnic_cprobe_get32(buf + 20);
    if ((OPAL_BTL_USNIC_CPROBE_PROBE != p->type && OPAL_BTL_USNIC_CPROBE_ECHO != p->type) || cookie != p->cookie ||
        p->size != len) {
        return false;
    }
    return true;
}

/* Size of the large probe: the largest datagram both sides use (the
 * smaller modex MTU), never below the small probe. */
static inline uint32_t opal_btl_usnic_cprobe_large_size(uint32_t local_mtu, uint32_t remote_mtu)
{
    uint32_t m = (local_mtu < remote_mtu) ? local_mtu : remote_mtu;
    if (m > OPAL_BTL_USNIC_CPROBE_MAX) {
        m = OPAL_BTL_USNIC_CPROBE_MAX;
    }
    return (m < OPAL_BTL_USNIC_CPROBE_SMALL) ? OPAL_BTL_USNIC_CPROBE_SMALL : m;
}

/* ----- verdicts ----- */
enum {
    OPAL_BTL_USNIC_CV_PENDING = -1,
    OPAL_BTL_USNIC_CV_OK = 0,
    OPAL_BTL_USNIC_CV_LARGE_FAILED = 1, /* small echoed, large not: MTU mismatch on the path */
    OPAL_BTL_USNIC_CV_ALL_FAILED = 2,   /* nothing echoed */
    OPAL_BTL_USNIC_CV_SMALL_FAILED = 3, /* large echoed, small not (odd filter) */
    OPAL_BTL_USNIC_CV_UNCHECKED = 4     /* no agent to ask / no answer: treated as OK */
};

/* The verdict of a check: |small_ok| / |large_ok| = that size was echoed;
 * |expired| = every attempt has been sent and waited for. */
static inline int opal_btl_usnic_cverdict(bool small_ok, bool large_ok, bool expired)
{
    if (small_ok && large_ok) {
        return OPAL_BTL_USNIC_CV_OK;
    }
    if (!expired) {
        return OPAL_BTL_USNIC_CV_PENDING;
    }
    if (small_ok) {
        return OPAL_BTL_USNIC_CV_LARGE_FAILED;
    }
    return large_ok ? OPAL_BTL_USNIC_CV_SMALL_FAILED : OPAL_BTL_USNIC_CV_ALL_FAILED;
}

static inline bool opal_btl_usnic_cverdict_usable(int verdict)
{
    return OPAL_BTL_USNIC_CV_OK == verdict || OPAL_BTL_USNIC_CV_UNCHECKED == verdict;
}

/* ----- client <-> agent messages (SOCK_SEQPACKET, host byte order) ----- */
#define OPAL_BTL_USNIC_CREQ_MAGIC 0x75636371u
typedef struct opal_btl_usnic_creq_t {
    uint32_t magic;
    uint32_t req_id;
    uint32_t local_ipv4;  /* network order */
    uint32_t peer_ipv4;   /* network order */
    uint16_t peer_port;   /* the peer agent's probe port, host order */
    uint16_t reserved;
    uint32_t large_size;
} opal_btl_usnic_creq_t;

typedef struct opal_btl_usnic_crep_t {
    uint32_t req_id;
    int32_t verdict;
    uint32_t large_size;
    uint32_t probes_sent;   /* by the agent for this check */
    uint32_t elapsed_usec;  /* first probe to verdict */
    uint32_t report;        /* 1: the first asker of a failed check: print the message */
} opal_btl_usnic_crep_t;

#ifdef OPAL_BTL_USNIC_H
/* ----- the agent (btl_usnic_cagent.c) ----- */

/* Component init, after the modules exist and before the modex is sent:
 * in local rank 0 with the checker on, open the probe sockets (setting
 * each module's local_modex.probe_port) and the Unix listener, and
 * publish the listener's path (local scope).  On failure it says why
 * (show_help) and the job runs without the checker. */
int opal_btl_usnic_cagent_init(void);
bool opal_btl_usnic_cagent_running(void);
/* One non-blocking pass over the agent's sockets and timers. */
void opal_btl_usnic_cagent_service(void);
/* The agent's file descriptors (for a waiting client's poll), at most |max| */
int opal_btl_usnic_cagent_fds(int *fds, int max);
/* Microseconds until the agent's next resend or verdict is due (or |cap|) */
uint64_t opal_btl_usnic_cagent_due_in(uint64_t cap);
/* Ordered teardown: events, client connections, listener (its file and
 * private directory), probe sockets. */
void opal_btl_usnic_cagent_fini(void);
/* The path of this process's agent's Unix socket, NULL if none runs here */
const char *opal_btl_usnic_cagent_path(void);
/* The modex key (local scope) under which local rank 0 publishes that path */
#define OPAL_BTL_USNIC_CAGENT_PATH_KEY "btl.usnic.cagent_path"
/**
 * Read |key| of rank |vpid| of our job from the modex into |data_p|
 * (OPAL_MODEX_RECV_VALUE conventions) without waiting for a fence: from
 * the local store, or, when the modex is not collected by the fence
 * (async modex), by asking its owner.  A miss before the fence's data is
 * here is a miss: the callers ask again later.
 */
int opal_btl_usnic_cmodex_get(uint32_t vpid, const char *key, void *data_p, int type);

/* ----- the client (btl_usnic_cclient.c) ----- */

bool opal_btl_usnic_cclient_enabled(void);
/* Note the probe ports published in a peer's modex entries */
void opal_btl_usnic_cclient_note_agents(const opal_btl_usnic_modex_t *remote, size_t n);
/* Queue a check of |module| -> |remote| (the peer's paired interface) */
void opal_btl_usnic_cclient_add(opal_btl_usnic_module_t *module, opal_proc_t *proc,
                                const opal_btl_usnic_modex_t *remote);
/* Ask the agent for every queued pair and wait for the verdicts (bounded).
 * Failures are reported; with policy abort the job is aborted. */
int opal_btl_usnic_cclient_run(opal_btl_usnic_module_t *module);
/* May |module| talk to the peer interface |remote|?  (true if unchecked) */
bool opal_btl_usnic_cclient_usable(const opal_btl_usnic_module_t *module, const opal_btl_usnic_modex_t *remote);
void opal_btl_usnic_cclient_fini(void);
#endif

#endif /* OPAL_BTL_USNIC_CONNECTIVITY_H */
