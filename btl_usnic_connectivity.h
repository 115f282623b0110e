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
 * interface, peer agent) pair.  The agent sends a small probe and one of
 * the path's MTU (the smaller of the two modex MTUs) to the peer host's
 * agent, which echoes each probe back.  An echo of both sizes proves the
 * path in both directions; a size not echoed after
 * btl_usnic_connectivity_retries resends, btl_usnic_connectivity_timeout
 * ms apart, fails the pair.  The agent shares one check among all local
 * processes asking for the same pair, and tells the first one asking to
 * report a failure (show_help).
 *
 * What an agent trusts.  Only the modex, which only the job's processes
 * can read, and the kernel's word on who is at the other end of a Unix
 * socket.  Nothing derived from job ids, pids or clocks is a secret.
 *  - Probes and echoes carry a 128-bit tag (keyed BLAKE2b) under a key
 *    derived from rank 0's random agent key (its modex entry): nobody
 *    outside the job can make one, or turn a probe into an echo.
 *  - An agent echoes only to the address the probing agent published in
 *    the modex (its rank and address are in the probe, under the tag),
 *    never to the datagram's source, at most OPAL_BTL_USNIC_CECHO_BURST
 *    echoes per peer address per btl_usnic_connectivity_timeout: no
 *    reflection, no amplification.
 *  - An echo counts only if it is authentic, comes from the address that
 *    was probed and names a live check of this agent (random 64-bit ids).
 *  - The Unix socket is in a directory that only the job's user can enter
 *    (the job session directory if it is ours and mode 0700, else a fresh
 *    mkdtemp directory whose path local rank 0 publishes in the modex,
 *    local scope); the agent also refuses a client whose SO_PEERCRED uid
 *    is not its own, and a client refuses an agent that is not its uid.
 *  - A client may ask only for a peer agent address that some rank
 *    published in the modex (the agent looks it up by that rank); anything
 *    else is refused, never probed.  The agent computes the probe size
 *    itself, from the modex MTUs.
 *  - No tag is computed for a datagram before cheap checks pass: its
 *    shape and size, a published source address, that source's rate
 *    and the agent's tag budget (opal_btl_usnic_cprobe_gate, below).
 *  - Work is bounded: OPAL_BTL_USNIC_CTABLE_SIZE live checks (finished
 *    ones freed OPAL_BTL_USNIC_CHECK_GRACE_USEC after their verdict), a
 *    fixed number of client connections, and a cap on the datagrams and
 *    requests one service call handles.
 * Every datagram or client the agent refuses is counted by reason and
 * printed in its statistics line.  An attacker on the path who relays
 * genuine probes around a broken link can still make that link pass: a
 * path check cannot tell a relay from a wire.
 *
 * No thread: the agent's sockets are libevent events on
 * opal_sync_event_base (run by opal_progress), and a client that waits in
 * add_procs services its own process's agent from its waiting loop.
 *
 * The probe format, the check table, the table of published agents and
 * the verdict are pure (btl_usnic_connectivity.c, this header), for the
 * unit tests (test/unit/test_connectivity.c).
 */
#ifndef OPAL_BTL_USNIC_CONNECTIVITY_H
#define OPAL_BTL_USNIC_CONNECTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "btl_usnic_auth.h"

/* ----- probe datagrams (UDP payload, all fields big-endian) -----
 *
 *   0  magic      "uCk2"
 *   4  type       1 = probe, 2 = echo
 *   5  reserved   (0, 3 bytes)
 *   8  check      the probing agent's check id (64 bits, random)
 *  16  size       the datagram's own length, tag included
 *  20  attempt    0 = first send, then 1, 2, ...
 *  24  from_rank  the probing agent's rank: its modex publishes from_ip:from_port
 *  28  from_ip    the probing socket's IPv4 address
 *  32  to_ip      the probed agent's IPv4 address
 *  36  from_port  the probing socket's UDP port
 *  38  to_port    the probed agent's UDP port
 *  40  filler     bytes (i * 7) & 0xff, up to size - 16
 *  size - 16  tag  keyed BLAKE2b-128 of bytes 0 .. size - 17 under the
 *                  job's agent key (opal_btl_usnic_agent_tag)
 *
 * An echo is its probe with type 2 and a new tag.  Version 1 ("uCk1")
 * carried a cookie computable from the job id instead of the tag.
 */
#define OPAL_BTL_USNIC_CPROBE_MAGIC 0x75436b32u
#define OPAL_BTL_USNIC_CPROBE_HDR_LEN 40u
#define OPAL_BTL_USNIC_CPROBE_MIN (OPAL_BTL_USNIC_CPROBE_HDR_LEN + OPAL_BTL_USNIC_TAG_BYTES)
#define OPAL_BTL_USNIC_CPROBE_SMALL 64u
#define OPAL_BTL_USNIC_CPROBE_MAX 65000u
#define OPAL_BTL_USNIC_CPROBE_PROBE 1
#define OPAL_BTL_USNIC_CPROBE_ECHO 2

typedef struct opal_btl_usnic_cprobe_t {
    uint8_t type;
    uint64_t check_id;
    uint32_t size;
    uint32_t attempt;
    uint32_t from_vpid;
    uint32_t from_ipv4; /* network order */
    uint32_t to_ipv4;   /* network order */
    uint16_t from_port; /* host order */
    uint16_t to_port;   /* host order */
} opal_btl_usnic_cprobe_t;

typedef enum {
    OPAL_BTL_USNIC_CPROBE_VALID,
    OPAL_BTL_USNIC_CPROBE_MALFORMED,   /* length, magic, type, reserved bytes or size field */
    OPAL_BTL_USNIC_CPROBE_UNAUTHENTIC, /* well formed, but the tag is not ours */
} opal_btl_usnic_cprobe_status_t;

/**
 * Write probe |p| (p->size bytes, tagged under |key|) into |buf| of |len|
 * bytes.  Returns the datagram length, or 0 if the size is out of range
 * or |buf| too small.
 */
size_t opal_btl_usnic_cprobe_pack(uint8_t *buf, size_t len, const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES],
                                  const opal_btl_usnic_cprobe_t *p);

/* Is the |len|-byte datagram at |buf| shaped like a probe or an echo?
 * (magic, a known type, zero reserved bytes, a size field equal to |len|) */
bool opal_btl_usnic_cprobe_well_formed(const uint8_t *buf, size_t len);

/**
 * Parse a received datagram: well formed, then its tag under |key|.
 * |p| is set only for OPAL_BTL_USNIC_CPROBE_VALID.
 */
opal_btl_usnic_cprobe_status_t opal_btl_usnic_cprobe_parse(const uint8_t *buf, size_t len,
                                                           const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES],
                                                           opal_btl_usnic_cprobe_t *p);

/* Size of the large probe: the largest datagram both sides may use (the
 * smaller modex MTU, and at most |cap| when not 0: with the path MTU
 * search on, only its base size must cross at start, the search finds
 * the rest), never below the small probe. */
static inline uint32_t opal_btl_usnic_cprobe_large_size(uint32_t local_mtu, uint32_t remote_mtu, uint32_t cap)
{
    uint32_t m = (local_mtu < remote_mtu) ? local_mtu : remote_mtu;
    if (0 != cap && m > cap) {
        m = cap;
    }
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
    OPAL_BTL_USNIC_CV_UNCHECKED = 4,    /* no agent to ask / no answer: treated as OK */
    OPAL_BTL_USNIC_CV_REFUSED = 5       /* the agent would not probe that address (not published in
                                           the modex): not used */
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

/* ----- the agent's checks ----- */

#define OPAL_BTL_USNIC_CTABLE_SIZE 1024         /* checks an agent holds at once */
#define OPAL_BTL_USNIC_CHECK_GRACE_USEC 10000000u /* a verdict is kept this long for local processes
                                                     that ask later (they start within MPI_Init of
                                                     each other); a later one checks again */
#define OPAL_BTL_USNIC_CHECK_MAX_WAITERS 256    /* clients waiting for one check */

typedef struct opal_btl_usnic_cwaiter_t {
    int conn;
    uint32_t req_id;
} opal_btl_usnic_cwaiter_t;

typedef struct opal_btl_usnic_ccheck_t {
    uint64_t id;          /* random, never 0; 0 = a free slot */
    uint32_t local_ipv4;  /* the probing socket, network order */
    uint32_t peer_ipv4;   /* the peer agent as published in the modex, network order */
    uint16_t local_port;  /* host order */
    uint16_t peer_port;   /* host order */
    uint32_t peer_vpid;   /* the rank that published peer_ipv4:peer_port (as the client says) */
    uint32_t large;       /* the MTU-sized probe's length; 0 until the peer is known */
    int sock;             /* the agent's index of the probing socket */
    int rounds;           /* probe rounds sent; 0: waiting for the modex */
    uint64_t t_first, next_due, t_done;
    bool small_ok, large_ok;
    bool reported;        /* a client was told to print the failure */
    int verdict;          /* OPAL_BTL_USNIC_CV_* */
    uint32_t probes;
    uint32_t elapsed_usec;
    opal_btl_usnic_cwaiter_t *waiters;
    int nwaiters, cwaiters;
} opal_btl_usnic_ccheck_t;

/* A fixed array: lookups scan at most OPAL_BTL_USNIC_CTABLE_SIZE slots
 * and only for authentic echoes and same-user clients' requests. */
typedef struct opal_btl_usnic_ctable_t {
    opal_btl_usnic_ccheck_t *slots;
    int used;             /* slots with an id */
} opal_btl_usnic_ctable_t;

bool opal_btl_usnic_ctable_init(opal_btl_usnic_ctable_t *t);
void opal_btl_usnic_ctable_fini(opal_btl_usnic_ctable_t *t);

/* The check of the pair (|local_ipv4| -> |peer_ipv4|:|peer_port|), or NULL */
opal_btl_usnic_ccheck_t *opal_btl_usnic_ctable_find_pair(opal_btl_usnic_ctable_t *t, uint32_t local_ipv4,
                                                         uint32_t peer_ipv4, uint16_t peer_port);

/* The check |id| while it waits for its verdict, or NULL */
opal_btl_usnic_ccheck_t *opal_btl_usnic_ctable_find_live(opal_btl_usnic_ctable_t *t, uint64_t id);

/**
 * A new check at |now|: a zeroed slot with a fresh random id (getrandom;
 * unique among the table's checks), verdict PENDING.  A finished check
 * whose grace has passed gives up its slot.  NULL if every slot holds a
 * live or recently finished check (the table is full) or there is no
 * randomness.
 */
opal_btl_usnic_ccheck_t *opal_btl_usnic_ctable_add(opal_btl_usnic_ctable_t *t, uint64_t now);

/* Record the verdict of |ck| at |now| (the caller answers the waiters) */
void opal_btl_usnic_ccheck_finish(opal_btl_usnic_ccheck_t *ck, int verdict, uint64_t now);

/* Free every finished check without waiters whose grace has passed */
void opal_btl_usnic_ctable_expire(opal_btl_usnic_ctable_t *t, uint64_t now);

/* Add a waiting client; false if the check has OPAL_BTL_USNIC_CHECK_MAX_WAITERS
 * already or there is no memory */
bool opal_btl_usnic_ccheck_add_waiter(opal_btl_usnic_ccheck_t *ck, int conn, uint32_t req_id);

/* Client connection |conn| is gone: nobody to answer there any more */
void opal_btl_usnic_ctable_forget_conn(opal_btl_usnic_ctable_t *t, int conn);

typedef enum {
    OPAL_BTL_USNIC_CECHO_OK,           /* an echo of a probe of a live check: counts */
    OPAL_BTL_USNIC_CECHO_STALE,        /* no live check has that id (late, or not ours) */
    OPAL_BTL_USNIC_CECHO_WRONG_SOURCE, /* not from the address probed, or not of a probe of that check */
} opal_btl_usnic_cecho_t;

/**
 * Does the authentic echo |e|, received from |src_ipv4|:|src_port|
 * (network order address, host order port), count for a check of the
 * agent of rank |my_vpid|?  Sets *|ck_p| for OPAL_BTL_USNIC_CECHO_OK.
 */
opal_btl_usnic_cecho_t opal_btl_usnic_ctable_match_echo(opal_btl_usnic_ctable_t *t, const opal_btl_usnic_cprobe_t *e,
                                                        uint32_t my_vpid, uint32_t src_ipv4, uint16_t src_port,
                                                        opal_btl_usnic_ccheck_t **ck_p);

/* ----- token buckets ----- */

/* A bucket that holds at most |capacity| units and refills |capacity|
 * units per |period_usec|, full at first use.  The level is kept in
 * units times period_usec, so that the refill needs no division. */
typedef struct opal_btl_usnic_cbucket_t {
    uint64_t level; /* units * period_usec */
    uint64_t last;  /* time of the last refill */
    bool primed;    /* false: never used, full */
} opal_btl_usnic_cbucket_t;

/* Take |cost| units at |now| if the bucket holds them (false: it is left
 * as it was, apart from the refill) */
bool opal_btl_usnic_cbucket_take(opal_btl_usnic_cbucket_t *b, uint64_t now, uint64_t cost, uint64_t capacity,
                                 uint64_t period_usec);

/* ----- the agents published in the modex ----- */

#define OPAL_BTL_USNIC_CPEERS_MAX 65536 /* agent addresses an agent remembers */
#define OPAL_BTL_USNIC_CECHO_BURST 64   /* echoes to one agent address per connectivity_timeout */

typedef struct opal_btl_usnic_cpeer_t {
    uint32_t ipv4;        /* network order */
    uint16_t port;        /* host order; 0 = an empty slot */
    uint32_t vpid;        /* the rank that published it */
    uint32_t mtu;         /* its modex MTU */
    uint32_t echoes_left; /* in the window ending at window_end */
    uint64_t window_end;
    opal_btl_usnic_cbucket_t inbound; /* datagrams from this address that may reach the tag check */
} opal_btl_usnic_cpeer_t;

/* An open-addressing hash on (address, port), grown by doubling */
typedef struct opal_btl_usnic_cpeers_t {
    opal_btl_usnic_cpeer_t *slots;
    size_t cap, n;
} opal_btl_usnic_cpeers_t;

opal_btl_usnic_cpeer_t *opal_btl_usnic_cpeers_find(const opal_btl_usnic_cpeers_t *t, uint32_t ipv4, uint16_t port);

/* Remember an agent address published by |vpid| (the first publication
 * stays).  NULL if OPAL_BTL_USNIC_CPEERS_MAX are known, or no memory. */
opal_btl_usnic_cpeer_t *opal_btl_usnic_cpeers_add(opal_btl_usnic_cpeers_t *t, uint32_t ipv4, uint16_t port,
                                                  uint32_t vpid, uint32_t mtu);
void opal_btl_usnic_cpeers_fini(opal_btl_usnic_cpeers_t *t);

/* May |p| get one more echo at |now|?  At most |burst| per |window_usec| */
bool opal_btl_usnic_cpeer_take_echo(opal_btl_usnic_cpeer_t *p, uint64_t now, uint32_t burst, uint64_t window_usec);

/* ----- the cheap checks before a received datagram's tag -----
 *
 * Computing the tag costs about 1.4 ns a byte (88 us for a 65000-byte
 * probe), anyone can send a well-formed datagram with a random tag, and
 * the agent runs in local rank 0's MPI thread.  So a datagram reaches
 * the tag only past checks that cost next to nothing, cheapest first:
 *  1. well formed (opal_btl_usnic_cprobe_well_formed: magic, type, the
 *     size field equal to what arrived), and no larger than the
 *     receiving module's MTU: no genuine probe is (the large probe is
 *     the smaller of the two modex MTUs);
 *  2. its source (address and port, as the kernel says) is an agent
 *     address some rank published: genuine probes and echoes leave from
 *     the sockets whose ports are published, and an unprivileged user
 *     cannot send from another process's bound port without raw
 *     sockets (root or a host on the path can);
 *  3. no larger than the smaller of the two modex MTUs;
 *  4. the source's own token bucket (opal_btl_usnic_cgate_in_t), which a
 *     genuine agent never empties: what gets past it from a forged
 *     published source is bounded per source;
 *  5. a budget of tag bytes for the whole agent, which bounds the sum
 *     over every (forged) published source.
 * Each refusal has its own counter in the agent's statistics.
 */
typedef enum {
    OPAL_BTL_USNIC_CGATE_TAG,         /* past every cheap check: compute the tag */
    OPAL_BTL_USNIC_CGATE_MALFORMED,   /* 1: not a probe or echo of this version */
    OPAL_BTL_USNIC_CGATE_TOO_LARGE,   /* 1 or 3: larger than any probe between the two agents */
    OPAL_BTL_USNIC_CGATE_UNPUBLISHED, /* 2: no rank published the source address */
    OPAL_BTL_USNIC_CGATE_SOURCE_RATE, /* 4: the source's bucket is empty */
    OPAL_BTL_USNIC_CGATE_TAG_BUDGET,  /* 5: the agent's tag budget is spent */
} opal_btl_usnic_cgate_t;

typedef struct opal_btl_usnic_cgate_in_t {
    uint32_t local_mtu;  /* the receiving socket's module MTU */
    uint32_t src_ipv4;   /* the datagram's source, network order */
    uint16_t src_port;   /* host order */
    /* The published agent at |ipv4|:|port|, or NULL; |claimed_vpid| is
     * the datagram's from_rank, unauthenticated: only a hint of whose
     * modex to read */
    opal_btl_usnic_cpeer_t *(*find_source)(void *ctx, uint32_t ipv4, uint16_t port, uint32_t claimed_vpid);
    void *ctx;
    uint32_t source_burst;        /* datagrams per source per source_period_usec */
    uint64_t source_period_usec;
    opal_btl_usnic_cbucket_t *tag_budget; /* the agent's, in bytes */
    uint64_t tag_budget_bytes;            /* per tag_budget_period_usec */
    uint64_t tag_budget_period_usec;
} opal_btl_usnic_cgate_in_t;

/**
 * Run the cheap checks, in the order above, on the |len|-byte datagram
 * at |buf|, of which they read only the first
 * OPAL_BTL_USNIC_CPROBE_HDR_LEN bytes (the agent peeks at those alone).  Sets *|src_p| to the source's published agent when the
 * answer is OPAL_BTL_USNIC_CGATE_TAG.  A datagram takes one unit from
 * its source's bucket once past check 3, and its length from the tag
 * budget once past check 4: what a check refuses costs no later check.
 */
opal_btl_usnic_cgate_t opal_btl_usnic_cprobe_gate(const uint8_t *buf, size_t len, const opal_btl_usnic_cgate_in_t *in,
                                                  uint64_t now, opal_btl_usnic_cpeer_t **src_p);

/* ----- client <-> agent messages (SOCK_SEQPACKET, host byte order) ----- */
#define OPAL_BTL_USNIC_CREQ_MAGIC 0x75637132u /* "ucq2": version 1 sent the probe size */
typedef struct opal_btl_usnic_creq_t {
    uint32_t magic;
    uint32_t req_id;
    uint32_t local_ipv4;  /* network order */
    uint32_t peer_ipv4;   /* network order */
    uint16_t peer_port;   /* the peer agent's probe port, host order */
    uint16_t reserved;
    uint32_t peer_vpid;   /* the rank whose modex published peer_ipv4:peer_port */
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
/* One non-blocking pass over the agent's sockets and timers, of bounded work */
void opal_btl_usnic_cagent_service(void);
/* The agent's file descriptors (for a waiting client's poll), at most |max| */
int opal_btl_usnic_cagent_fds(int *fds, int max);
/* Microseconds until the agent's next resend or verdict is due (or |cap|) */
uint64_t opal_btl_usnic_cagent_due_in(uint64_t cap);
/* Ordered teardown: events, client connections, listener (its file and
 * private directory), probe sockets, keys. */
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
/* Note the agent addresses published in the modex entries of rank |vpid| */
void opal_btl_usnic_cclient_note_agents(const opal_btl_usnic_modex_t *remote, size_t n, uint32_t vpid);
/* Queue a check of |module| -> |remote| (the peer's paired interface) */
void opal_btl_usnic_cclient_add(opal_btl_usnic_module_t *module, opal_proc_t *proc,
                                const opal_btl_usnic_modex_t *remote);
/* Ask the agent for every queued pair and wait for the verdicts (bounded).
 * Failures are reported; with policy abort the job is aborted. */
int opal_btl_usnic_cclient_run(opal_btl_usnic_module_t *module);
/* May |module| talk to the peer interface |remote|?  (true if unchecked) */
bool opal_btl_usnic_cclient_usable(const opal_btl_usnic_module_t *module, const opal_btl_usnic_modex_t *remote);
/* Has (or had) this job a verdict on the path from |module| to |remote|'s address? */
bool opal_btl_usnic_cclient_checked(const opal_btl_usnic_module_t *module, const opal_btl_usnic_modex_t *remote);
void opal_btl_usnic_cclient_fini(void);
#endif

#endif /* OPAL_BTL_USNIC_CONNECTIVITY_H */
