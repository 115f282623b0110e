/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The engine's core types: its parameters, the two tables that bind it
 * to the world (downward the wire, upward its owner and the PML), the
 * engine itself, its lifecycle and its clock.  Layers of the engine,
 * bottom-up (btl_usnic_*.h; each header includes only lower layers, and
 * test/unit/check-headers.sh checks that):
 *
 *   proto seq auth batch stats slab reg charge   pure building blocks
 *   frag pmtu pieces       segments, fragments, their pool, reassembly slots;
 *                          one peer's path MTU search; reassembly of pieces
 *   engine_core            this header
 *   endpoint               per-peer state, bound to an engine, its ready-to-send list
 *   complete acktr ack post put probe send recv
 *                          the reliability engine's layers (no header
 *                          includes another); their calls go one way
 *                          (test/unit/check-calls.sh): completions; what
 *                          we owe a peer; the sender's reliability and
 *                          the hotel; posting (pieces and probes too);
 *                          PUT; the path MTU searches' driver; the send
 *                          progression and the progress pass; the
 *                          receive side
 *   glue pml               the engine side of the BTL entry points; the
 *                          module's side of the deliver upcall
 *   engine                 all but pml (what the module and the tests include)
 *
 * Below endpoint.h a peer is Open MPI's opaque BTL endpoint (btl.h
 * declares the tag, btl_usnic_endpoint.h defines it): the engine holds
 * lists threaded through its endpoints, never an endpoint, while every
 * endpoint points at its engine and reads its parameters.  So the core
 * types sit under the endpoint, not over it.
 */
#ifndef OPAL_BTL_USNIC_ENGINE_CORE_H
#define OPAL_BTL_USNIC_ENGINE_CORE_H

#include "opal_config.h"
#include "opal/class/opal_hash_table.h"
#include "opal/class/opal_list.h"
#include "opal/mca/btl/btl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_charge.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_reg.h"
#include "btl_usnic_slab.h"
#include "btl_usnic_stats.h"

/* Channels */
enum {
    OPAL_BTL_USNIC_PRIORITY_CHANNEL = 0, /* ACKs and tiny fragments */
    OPAL_BTL_USNIC_DATA_CHANNEL = 1,     /* everything else, and all retransmissions */
    OPAL_BTL_USNIC_NUM_CHANNELS = 2,
};

/* A peer: defined by btl_usnic_endpoint.h, the layer above */
typedef struct mca_btl_base_endpoint_t opal_btl_usnic_endpoint_t;

struct opal_btl_usnic_engine_t;

/*
 * The engine meets the world through two tables of functions, each bound
 * once by opal_btl_usnic_engine_init (the module binds its own, the tests
 * theirs).  Downward, the wire ops: what the engine asks of the transport
 * below (post a datagram, watch a timer, send what was held back).
 * Upward, the upcalls: what it tells its owner for the PML above (a
 * fragment arrived, a send or a PUT is done, a peer failed).  Two tables,
 * not one, because they face opposite ways: the engine calls down while
 * it works and up when work ends, and an implementation of one needs
 * nothing of the other (the pair simulation swaps the wire for its
 * links, the fuzzer the delivery for Open MPI's table of tags).  Nothing
 * else of the engine reaches its owner or the PML.
 */

/* Downward: the wire under the engine */
typedef struct opal_btl_usnic_wire_ops_t {
    /**
     * Post |seg| (|seg->wire_len| bytes at |seg->hdr|) to |ep| on |channel|
     * (the engine has set seg->channel to |channel|).
     * Returns OPAL_SUCCESS (the wire reports the completion via
     * opal_btl_usnic_seg_send_complete(): later, or already before it
     * returns when the provider took the bytes at once, as fi_inject does;
     * the engine must not touch an ACKed segment after posting it),
     * OPAL_ERR_TEMP_OUT_OF_RESOURCE
     * (back-pressure: nothing was sent, try again later), or another error
     * (the peer is unreachable).
     */
    int (*post)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                opal_btl_usnic_send_seg_t *seg, int channel);
    /**
     * Send what post held back.  A wire that batches (params.batch_segs
     * > 1: the socket wire cuts the data segments posted to one peer in a
     * row into one segmentation-offload send) may keep a data-channel
     * segment until then; the engine flushes at the end of every entry
     * that posts on the data channel (engine_progress, engine_send_now,
     * resend_away).  Completions of what leaves come as usual.
     */
    void (*flush)(struct opal_btl_usnic_engine_t *eng);
} opal_btl_usnic_wire_ops_t;

/* Upward: the owner of the engine, and through it the PML */
typedef struct opal_btl_usnic_upcalls_t {
    /**
     * The endpoint that sends as |sender| (a header's claim, not yet
     * proven: the engine authenticates what it finds), or NULL.  Called
     * once per received datagram.
     */
    opal_btl_usnic_endpoint_t *(*lookup)(struct opal_btl_usnic_engine_t *eng, uint64_t sender);
    /**
     * Hand the complete fragment |data| (|len| bytes, tag |tag|) from |ep|
     * to the PML; |data| is valid only during the call.  The callee may
     * progress the engine again (a fragment completing meanwhile waits for
     * this call to return).
     */
    void (*deliver)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data,
                    size_t len);
    /**
     * The send of the PML's descriptor |frag| ended with |status|
     * (OPAL_SUCCESS: its data left and the BTL holds what is retransmitted;
     * else it never will): call the PML back.  Made only for a descriptor
     * with a callback (des_cbfunc), never from inside the PML's own send
     * call; the callee may free |frag| (btl_free).
     */
    void (*send_done)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status);
    /**
     * The PUT |frag| ended with |status| (OPAL_SUCCESS: the target ACKed
     * every byte): call the PML back with what frag->put keeps of its
     * request (callback, context, data, local handle).  Made only for a PUT
     * with a callback, from a progress pass; the engine recycles |frag|
     * afterwards.
     */
    void (*put_done)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status);
    /**
     * |ep| stopped being reachable (|rc|: a hard post error, or
     * OPAL_ERR_TIMEOUT when it ACKed nothing for peer_timeout): the owner
     * marks it failed, fails its fragments (opal_btl_usnic_endpoint_flush)
     * and tells the PML.  May be called again for a peer already failed.
     */
    void (*peer_failed)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, int rc);
    /**
     * The datagram size toward |ep| changed from |old| to |now| bytes for
     * |why| (a sentence): the owner tells the user at its verbose level.
     * May be NULL.
     */
    void (*path_changed)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t old,
                         size_t now, const char *why);
} opal_btl_usnic_upcalls_t;

typedef struct opal_btl_usnic_engine_params_t {
    int protect;                  /* opal_btl_usnic_protect_t: what every datagram's tag covers */
    uint64_t my_name;             /* our sender id: process name, jobid << 32 | vpid */
    size_t prefix;                /* provider prefix bytes before each header */
    bool check_source;            /* the wire reports where each datagram came from: one that does not
                                     come from its claimed sender's address is dropped (drop_bad_source) */
    size_t mtu;                   /* max datagram (header + payload) on the data channel */
    size_t tiny_mtu;              /* max datagram on the priority channel */
    uint32_t ack_iteration_delay; /* progress ticks an ACK may wait for a piggy-back */
    uint64_t ack_delay;           /* us an ACK may wait for a piggy-back (as well as the ticks) */
    uint32_t max_resends_per_iteration;
    uint32_t sd_credits[OPAL_BTL_USNIC_NUM_CHANNELS]; /* provider send queue depth */
    size_t max_send_size;         /* largest fragment the PML may hand us (max_send_size or eager_limit) */
    uint64_t rto_initial;         /* us: retransmit timeout before the first RTT sample */
    uint64_t rto_min;             /* us: floor of the computed timeout */
    uint64_t rto_floor_start;     /* us: the floor until the path proves lossy (0: rto_min) */
    uint64_t rto_max;             /* us: ceiling, also of the exponential back-off */
    uint64_t peer_timeout;        /* us without ACK progress before a peer is declared dead; 0 = never */
    uint32_t tail_probes;         /* tail-loss probes (one datagram each, after the probe timeout) before
                                     the first timeout of an episode; 0 = a timeout and its batch at once */
    bool gather_send;             /* the wire sends a header and a payload from elsewhere as one
                                     datagram: PUT segments then reference the source, uncopied */
    const opal_btl_usnic_mem_ops_t *mem; /* registers segment slabs with the provider; NULL when it
                                     needs no registered memory */
    uint64_t rx_capacity;         /* charge (bytes, btl_usnic_charge.h) our receive side holds
                                     between two progress passes (kernel socket buffer, or posted
                                     buffers on OS-bypass NICs); 0 = unknown: no limit but the window */
    opal_btl_usnic_charge_t rx_charge; /* what one datagram costs of it, by size (published in the
                                     modex: peers count what they have in flight to us with it) */
    bool pmtu_discovery;          /* search each path's MTU (btl_usnic_pmtu.c); false: the datagram
                                     size is the smaller of both interfaces' limits, fixed */
    size_t pmtu_base;             /* datagram bytes that surely cross any path: the search starts here */
    uint64_t pmtu_reprobe;        /* us after a search ended below the limit before it starts again */
    bool cc_enabled;              /* congestion control and pacing per peer (btl_usnic_cc.c) */
    uint64_t cc_target;           /* us of queueing delay the congestion window aims to keep under */
    uint32_t batch_segs;          /* data segments the wire sends to one peer as one batch (one
                                     segmentation-offload send); the send progression gives each
                                     endpoint up to this many in a row.  0 or 1: no batches */
} opal_btl_usnic_engine_params_t;

/* A received datagram's arrival that the wire cannot vouch for: it may
 * have waited in the kernel for a while of unknown length (read after a
 * gap in the polling, without a timestamp).  It gives no delay sample
 * and no ACK hold: a guess would take the wait for the path's. */
#define OPAL_BTL_USNIC_ARRIVAL_UNKNOWN UINT64_MAX

typedef struct opal_btl_usnic_engine_t {
    opal_btl_usnic_engine_params_t p;
    const opal_btl_usnic_wire_ops_t *wire; /* downward */
    const opal_btl_usnic_upcalls_t *up;    /* upward */

    size_t max_frag_payload;      /* PML bytes in one FRAG segment */
    size_t max_chunk_payload;     /* bytes in one CHUNK segment */
    size_t max_tiny_payload;      /* PML bytes that fit the priority channel */

    uint64_t tick;                /* progress passes (paces explicit ACKs) */
    uint32_t nonce_generation;    /* endpoints made so far: each one's nonces start above the last's */
    opal_hash_table_t released;   /* by peer id: endpoints to it released so far (its next one's
                                     incarnation, btl_usnic_endpoint.c) */
    struct mca_btl_base_endpoint_t *nonces_spent; /* endpoints whose nonces ran out, failed at
                                     the next progress pass (linked by tx.spent_next) */
    uint64_t now;                 /* us; set by the owner once per progress pass */
    uint64_t next_deadline;       /* the hotel's earliest deadline (btl_usnic_ack.c); UINT64_MAX = none */
    uint64_t away_next;           /* resend_away: engine time of its next round (0: at once) */
    uint64_t away_interval;       /* resend_away: its current back-off (0: none yet) */
    int32_t credits[OPAL_BTL_USNIC_NUM_CHANNELS]; /* free provider send slots */

    /* Receiver grants (btl_usnic_acktr.c): peers that sent us data in the
     * current and the previous epoch share rx_capacity. */
    uint64_t rx_epoch;            /* number of the current epoch */
    uint64_t rx_epoch_start;      /* us */
    uint32_t rx_senders_now;      /* distinct senders seen in the current epoch */
    uint32_t rx_senders_prev;     /* ... in the previous one */
    uint32_t rx_buffers_held;     /* receive buffers being processed, not yet re-posted (each
                                     counts as a largest datagram's charge) */

    opal_list_t resend_segs;      /* segments awaiting retransmission */
    opal_list_t endpoints_with_sends;
    opal_list_t endpoints_needing_ack;
    opal_list_t pending_callbacks; /* frags whose PML callback is deferred to progress */
    opal_list_t endpoints_in_flight; /* the hotel's register: endpoints with un-ACKed segments */
    opal_list_t endpoints_probing; /* endpoints whose path MTU search has a probe due or out */
    uint64_t next_probe_event;    /* the earliest time one of them needs attention (UINT64_MAX: none) */
    opal_list_t endpoints_paced;  /* endpoints with sends their pacer holds back */
    uint64_t next_pace_event;     /* the earliest time one of them may send (UINT64_MAX: none) */

    opal_btl_usnic_frag_pool_t pool; /* fragments, segments and the memory of their buffers */
    bool constructed;             /* engine_init got as far as its lists: engine_fini has work */
    bool defer_callbacks;         /* inside the PML's send call: PML callbacks wait for progress */

    opal_btl_usnic_reg_table_t regs; /* regions exposed to PUTs (btl_usnic_reg.c) */

    /* The fast receive path's state (btl_usnic_recv.c), one for every wire */
    opal_btl_usnic_endpoint_t *fast_deferred; /* whose datagram it took: bookkeeping owed */
    bool fast_in_upcall;          /* a datagram it took is with the PML right now */
    uint64_t arrival;             /* us: when the datagram being processed reached the host (its
                                     wire's timestamp, else now, or OPAL_BTL_USNIC_ARRIVAL_UNKNOWN);
                                     0 outside a datagram */

    opal_btl_usnic_stats_t stats;
} opal_btl_usnic_engine_t;

/* The one way to change a counter, the engine's own and those a wire keeps
 * in the engine's block (printed and published with it) */
#define OPAL_BTL_USNIC_STAT_INC(eng, name) ((eng)->stats.name++)
#define OPAL_BTL_USNIC_STAT_ADD(eng, name, n) ((eng)->stats.name += (n))

/* A receive buffer the wire holds while the engine works on its datagram
 * (it counts against what ACKs grant until the wire re-posts it) */
static inline void opal_btl_usnic_engine_rx_hold(opal_btl_usnic_engine_t *eng)
{
    ++eng->rx_buffers_held;
}

static inline void opal_btl_usnic_engine_rx_return(opal_btl_usnic_engine_t *eng)
{
    --eng->rx_buffers_held;
}

/**
 * Set up |eng| with |params|, bound to |wire| below and |up| above (both
 * must outlive the engine).  Returns OPAL_SUCCESS or
 * OPAL_ERR_OUT_OF_RESOURCE.
 */
int opal_btl_usnic_engine_init(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_engine_params_t *params,
                               const opal_btl_usnic_wire_ops_t *wire, const opal_btl_usnic_upcalls_t *up);
/* Undo engine_init; safe on a zeroed engine that was never (or only
 * partly) initialised, and twice */
void opal_btl_usnic_engine_fini(opal_btl_usnic_engine_t *eng);

/* The engine's clock: the owner reads its clock once per progress pass
 * and hands it in (microseconds, monotonic). */
static inline void opal_btl_usnic_engine_set_time(opal_btl_usnic_engine_t *eng, uint64_t now)
{
    eng->now = now;
}

/* Earliest time a retransmit timer may fire (UINT64_MAX: none armed). */
static inline uint64_t opal_btl_usnic_engine_next_deadline(const opal_btl_usnic_engine_t *eng)
{
    return eng->next_deadline;
}

/* The RTO floor of a new endpoint: rto_floor_start within [rto_min, rto_max] */
static inline uint64_t opal_btl_usnic_rto_floor_start(const opal_btl_usnic_engine_params_t *p)
{
    uint64_t f = p->rto_floor_start > p->rto_min ? p->rto_floor_start : p->rto_min;
    return f < p->rto_max ? f : p->rto_max;
}

#endif /* OPAL_BTL_USNIC_ENGINE_CORE_H */
