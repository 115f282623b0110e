/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The reliability engine: sequence numbers, windows, ACKs, retransmission,
 * chunking and reassembly.  It never reads a clock and never calls
 * libfabric: events come in with the current progress tick, and segments go
 * out through a small "wire" interface.  The module binds the libfabric
 * wire; tests bind an in-memory wire and a virtual clock.
 *
 * Events in:   opal_btl_usnic_recv_segment()      a datagram arrived
 *              opal_btl_usnic_seg_send_complete() the provider released a buffer
 *              opal_btl_usnic_retrans_expired()   a retransmit timer fired
 *              opal_btl_usnic_engine_progress()   one pass of the send progression
 * Actions out: wire->post()  (segments and ACKs), wire->timer_arm/disarm(),
 *              wire->deliver() (a fragment for the PML), descriptor callbacks.
 */
#ifndef OPAL_BTL_USNIC_ENGINE_H
#define OPAL_BTL_USNIC_ENGINE_H

#include "opal_config.h"
#include "opal/class/opal_list.h"
#include "opal/class/opal_free_list.h"
#include "opal/mca/btl/btl.h"

#include <string.h>

#include "btl_usnic_auth.h"
#include "btl_usnic_endpoint.h"
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

struct opal_btl_usnic_engine_t;

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
    /* Start / stop the retransmit timer of |seg|. */
    int (*timer_arm)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                     opal_btl_usnic_send_seg_t *seg);
    void (*timer_disarm)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                         opal_btl_usnic_send_seg_t *seg);
    /* Hand a complete fragment to the PML; |data| is valid only during the call. */
    void (*deliver)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                    uint8_t tag, void *data, size_t len);
    /* Tell the owner that |ep| stopped being reachable (hard post error). */
    void (*peer_failed)(struct opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, int rc);
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

typedef struct opal_btl_usnic_engine_params_t {
    int protect;                  /* opal_btl_usnic_protect_t: what every datagram's tag covers */
    uint64_t my_name;             /* our sender id: process name, jobid << 32 | vpid */
    size_t prefix;                /* provider prefix bytes before each header */
    size_t mtu;                   /* max datagram (header + payload) on the data channel */
    size_t tiny_mtu;              /* max datagram on the priority channel */
    uint32_t ack_iteration_delay; /* progress ticks an ACK may wait for a piggy-back */
    uint64_t ack_delay;           /* us an ACK may wait for a piggy-back (as well as the ticks) */
    uint32_t max_resends_per_iteration;
    uint32_t sd_credits[OPAL_BTL_USNIC_NUM_CHANNELS]; /* provider send queue depth */
    size_t max_send_size;         /* largest fragment the PML may hand us */
    uint64_t rto_initial;         /* us: retransmit timeout before the first RTT sample */
    uint64_t rto_min;             /* us: floor of the computed timeout */
    uint64_t rto_floor_start;     /* us: the floor until the path proves lossy (0: rto_min) */
    uint64_t rto_max;             /* us: ceiling, also of the exponential back-off */
    uint64_t peer_timeout;        /* us without ACK progress before a peer is declared dead; 0 = never */
    bool gather_send;             /* the wire sends a header and a payload from elsewhere as one
                                     datagram: PUT segments then reference the source, uncopied */
    const opal_btl_usnic_mem_ops_t *mem; /* registers segment slabs with the provider; NULL when it
                                     needs no registered memory */
    uint32_t rx_capacity;         /* datagrams our receive side holds between two progress passes
                                     (kernel socket buffer, or posted buffers on OS-bypass NICs);
                                     0 = unknown: grant every peer its whole window */
    uint32_t batch_segs;          /* data segments the wire sends to one peer as one batch (one
                                     segmentation-offload send); the send progression gives each
                                     endpoint up to this many in a row.  0 or 1: no batches */
} opal_btl_usnic_engine_params_t;

typedef struct opal_btl_usnic_engine_t {
    opal_btl_usnic_engine_params_t p;
    const opal_btl_usnic_wire_ops_t *wire;
    mca_btl_base_module_t *btl;   /* passed back in PML callbacks */

    size_t max_frag_payload;      /* PML bytes in one FRAG segment */
    size_t max_chunk_payload;     /* bytes in one CHUNK segment */
    size_t max_tiny_payload;      /* PML bytes that fit the priority channel */

    uint64_t tick;                /* progress passes (paces explicit ACKs) */
    uint32_t nonce_generation;    /* endpoints made so far: each one's nonces start above the last's */
    uint64_t now;                 /* us; set by the owner once per progress pass */
    uint64_t next_deadline;       /* earliest retransmit deadline; UINT64_MAX = none */
    uint64_t away_next;           /* resend_away: engine time of its next round (0: at once) */
    uint64_t away_interval;       /* resend_away: its current back-off (0: none yet) */
    int32_t credits[OPAL_BTL_USNIC_NUM_CHANNELS]; /* free provider send slots */

    /* Receiver grants (btl_usnic_ack.c): peers that sent us data in the
     * current and the previous epoch share rx_capacity. */
    uint64_t rx_epoch;            /* number of the current epoch */
    uint64_t rx_epoch_start;      /* us */
    uint32_t rx_senders_now;      /* distinct senders seen in the current epoch */
    uint32_t rx_senders_prev;     /* ... in the previous one */
    uint32_t rx_buffers_held;     /* receive buffers being processed, not yet re-posted */

    opal_list_t resend_segs;      /* segments awaiting retransmission */
    opal_list_t endpoints_with_sends;
    opal_list_t endpoints_needing_ack;
    opal_list_t pending_callbacks; /* frags whose PML callback is deferred to progress */
    opal_list_t endpoints_in_flight; /* endpoints with un-ACKed segments */

    opal_btl_usnic_frag_pool_t pool; /* fragments, segments and the memory of their buffers */
    bool constructed;             /* engine_init got as far as its lists: engine_fini has work */
    bool defer_callbacks;         /* inside the PML's send call: PML callbacks wait for progress */

    opal_btl_usnic_reg_table_t regs; /* regions exposed to PUTs (btl_usnic_reg.c) */

    opal_btl_usnic_stats_t stats;
} opal_btl_usnic_engine_t;

#define OPAL_BTL_USNIC_STAT_INC(eng, name) ((eng)->stats.name++)

/**
 * Set up |eng| with |params| and |wire|.  Returns OPAL_SUCCESS or
 * OPAL_ERR_OUT_OF_RESOURCE.  |btl| may be NULL in tests.
 */
int opal_btl_usnic_engine_init(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_engine_params_t *params,
                               const opal_btl_usnic_wire_ops_t *wire, mca_btl_base_module_t *btl);
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

/* ----- send side (btl_usnic_send.c) ----- */

/**
 * A copy of |seg| (header, payload and gathered tail) in a chunk segment
 * of the engine's (registered) memory, for the owner to post as an extra
 * datagram that is never ACKed nor timed; NULL if none is free.  The copy
 * has no flags: mark it ACKED so that its completion recycles it.
 */
opal_btl_usnic_send_seg_t *opal_btl_usnic_seg_copy(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_send_seg_t *seg);

/* Largest whole fragment toward |ep| (the engine's if |ep| is NULL) */
static inline size_t opal_btl_usnic_max_frag_payload(const opal_btl_usnic_engine_t *eng,
                                                     const opal_btl_usnic_endpoint_t *ep)
{
    return (NULL != ep) ? ep->max_frag_payload : eng->max_frag_payload;
}

/**
 * A descriptor for |size| bytes the PML will write (btl_alloc): a small
 * fragment if it fits one datagram toward |ep| (the engine's limit if |ep|
 * is NULL), a large one up to max_send_size, else NULL.
 */
opal_btl_usnic_send_frag_t *opal_btl_usnic_frag_alloc(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                                      size_t size, uint32_t flags);

/**
 * Hand a PML descriptor to the engine (btl_send), with the engine's clock
 * already set.  Tiny small fragments go out at once on the priority
 * channel; everything else is queued.  Returns 1 if the send completed and
 * the PML gets no callback, 0 if the callback will come, OPAL_ERR_UNREACH
 * for a failed peer.
 */
int opal_btl_usnic_frag_submit(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag);

/**
 * Send a small fragment the BTL owns whose first |len| payload bytes are
 * filled (btl_sendi): at once if possible, else queued.  No PML callback.
 */
void opal_btl_usnic_frag_submit_owned(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag,
                                      size_t len);

/* The PML lets go of |frag| (btl_free): recycle it now or when nothing
 * refers to it any more. */
void opal_btl_usnic_frag_free(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag);

/**
 * Queue |frag| for |ep| and make the endpoint ready to send if it can.
 * |frag| must have its segments, tag and total length set.
 */
void opal_btl_usnic_endpoint_enqueue_frag(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag);

/**
 * Try to send a small fragment right now on the priority channel.  Returns
 * true if it was posted (the caller then owns completion semantics), false
 * if the window, credits or size do not allow it (nothing changed).
 */
bool opal_btl_usnic_send_fast(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag);

/* Put |ep| on the ready-to-send list if it has work, window and credits. */
void opal_btl_usnic_check_rts(opal_btl_usnic_endpoint_t *ep);

/**
 * Post the queued segments of ready endpoints now, from inside the PML's
 * send call (btl_send of a chunked fragment: its first datagrams are on
 * the latency path, and the next progress pass would first poll both
 * channels).  Nothing happens while retransmissions wait: progress sends
 * those ahead of new data.  A fragment that gets fully posted calls back
 * from the next progress pass, never from inside the PML's call.  Returns
 * the number of segments posted.
 */
int opal_btl_usnic_engine_send_now(opal_btl_usnic_engine_t *eng);

/**
 * One pass of the send progression: expired retransmit timers (if the
 * clock passed the next deadline), retransmissions (data channel, at most
 * max_resends_per_iteration), new segments from ready endpoints, then
 * explicit ACKs that are due.  Advances the tick.  Returns the number of
 * segments posted.
 */
int opal_btl_usnic_engine_progress(opal_btl_usnic_engine_t *eng);

/**
 * The provider released |seg|'s buffer.  Returns a channel credit and
 * recycles the segment if it is also ACKed.
 */
void opal_btl_usnic_seg_send_complete(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg);

/* Fail |frag| (not queued any more) with |status|: PML callback with the
 * error if it wants one, then recycle it if the BTL owns it. */
void opal_btl_usnic_frag_fail(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status);

/* Make the PML send callback for |frag| if one is pending, and recycle the
 * fragment if the BTL owns it and nothing references it. */
void opal_btl_usnic_frag_send_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag);

/* ----- receive side (btl_usnic_recv.c) ----- */

/* Where a received sequence number falls */
typedef enum {
    OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER, /* == next expected */
    OPAL_BTL_USNIC_SEQ_NEW_OOO,      /* inside the window, beyond a hole */
    OPAL_BTL_USNIC_SEQ_DUP,          /* inside the window, already received */
    OPAL_BTL_USNIC_SEQ_OLD,          /* below the window: delivered long ago */
    OPAL_BTL_USNIC_SEQ_TOO_NEW,      /* beyond the window */
} opal_btl_usnic_seq_class_t;

/* Pure classification of |seq| against |ep|'s receive window. */
opal_btl_usnic_seq_class_t opal_btl_usnic_seq_classify(const opal_btl_usnic_endpoint_t *ep,
                                                       opal_btl_usnic_seq_t seq);

/**
 * Post |seg|, a segment nobody ACKs and no timer watches (an explicit ACK,
 * a copy from resend_away): sealed, and recycled when the provider
 * releases it.  Takes the channel's credit; on failure the segment is
 * released and the post error returned.
 */
int opal_btl_usnic_post_unacked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                opal_btl_usnic_send_seg_t *seg, int channel);

#define OPAL_BTL_USNIC_AWAY_INTERVAL_MAX 1000000 /* us: slowest back-off of resend_away */

/**
 * The owner is away (inside a runtime call that never progresses us, such
 * as MPI_Comm_disconnect's blocking fence, or computing): post a copy of
 * each un-ACKed segment that is overdue, every peer, once per back-off
 * interval (rto_max, doubling to OPAL_BTL_USNIC_AWAY_INTERVAL_MAX: a
 * window of copies per peer per round is no burden then), so that a peer
 * waiting for our last message gets it although we cannot read its ACKs.
 * Makes no upcall, reads no completion, declares no peer dead, takes no
 * ACK: the owner does all that when it progresses again.  Progress and
 * every new post reset the back-off.  Copies go in chunk segments recycled at their completion.
 * Returns the number of copies posted.
 */
int opal_btl_usnic_resend_away(opal_btl_usnic_engine_t *eng);

/**
 * Say goodbye to |ep| (at finalize): an ACK of everything we hold, flagged
 * BYE, so that the peer stops waiting for ACKs a finalized process will
 * never send.  OPAL_ERR_TEMP_OUT_OF_RESOURCE if it cannot be posted now.
 */
int opal_btl_usnic_bye_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* |ep| said goodbye: release what it never ACKed, refuse it from now on */
void opal_btl_usnic_peer_departed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/**
 * Process one datagram (|len| bytes at |buf|, provider prefix skipped) that
 * arrived on some channel.  Validates it, finds the sender through
 * |lookup|, handles ACK information, accepts or drops the segment, delivers
 * complete fragments to the PML and notes that an ACK is owed.  |buf| may be
 * reused when this returns.  Never trusts a header field it did not check.
 */
typedef opal_btl_usnic_endpoint_t *(*opal_btl_usnic_lookup_fn_t)(opal_btl_usnic_engine_t *eng,
                                                                 uint64_t sender);
void opal_btl_usnic_recv_segment(opal_btl_usnic_engine_t *eng, opal_btl_usnic_lookup_fn_t lookup,
                                 void *buf, size_t len);

typedef enum {
    OPAL_BTL_USNIC_FAST_DECLINED, /* not for the fast path: nothing changed, use recv_segment */
    OPAL_BTL_USNIC_FAST_TAKEN,    /* delivered: call opal_btl_usnic_recv_fast_finish() later */
    OPAL_BTL_USNIC_FAST_DROPPED,  /* not authentic, or a replay: dropped and counted */
} opal_btl_usnic_fast_t;

/**
 * Fast receive path, step 1: if |buf| is a FRAG segment that is next in
 * order (and its successor has not arrived), authenticate it, mark it
 * received and deliver it to the PML (TAKEN: set *|ep_p|; the caller later
 * calls opal_btl_usnic_recv_fast_finish()).
 */
opal_btl_usnic_fast_t opal_btl_usnic_recv_fast(opal_btl_usnic_engine_t *eng, opal_btl_usnic_lookup_fn_t lookup,
                                               void *buf, size_t len, opal_btl_usnic_endpoint_t **ep_p);
/* What a receiver holds of one peer's stream (statistics: why a sender
 * might wait) */
typedef struct opal_btl_usnic_rx_state_t {
    opal_btl_usnic_seq_t next_expected; /* the first sequence number not yet received */
    uint32_t ahead;                     /* segments received beyond it */
    uint32_t holes;                     /* missing sequence numbers below the highest received */
    uint32_t held;                      /* complete fragments waiting for earlier ones */
    uint32_t slots;                     /* reassembly slots in use */
} opal_btl_usnic_rx_state_t;

void opal_btl_usnic_rx_state(const opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_rx_state_t *st);

/* Free the fragments |ep| holds back for in-order delivery (teardown). */
void opal_btl_usnic_held_free_all(opal_btl_usnic_endpoint_t *ep);

/* Fast receive path, step 2: the deferred bookkeeping (ACK scheduling). */
void opal_btl_usnic_recv_fast_finish(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                     void *buf);

/* ----- ACKs and retransmission (btl_usnic_ack.c) ----- */

/**
 * A cumulative ACK for everything <= |ack_seq| arrived from |ep|: release
 * newly ACKed segments, fast-retransmit on duplicate ACKs, ignore stale
 * ones.  |reports_arrival|: the peer sent this ACK because something
 * arrived (an explicit ACK, or a piggy-back flagged ACK_NEW); only such an
 * ACK that repeats acked_seq is a duplicate ACK.  Data segments repeat the
 * current ACK every time, which says nothing about holes.  Returns false
 * for a stale ACK or one beyond anything sent: nothing else of it (its
 * flags, the peer being alive) may be taken then.
 */
bool opal_btl_usnic_handle_ack_info(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                    opal_btl_usnic_seq_t ack_seq, uint32_t credit, uint16_t sack,
                                    bool reports_arrival);

/**
 * The selective-ACK ranges of an explicit ACK from |ep| whose cumulative
 * ACK was just taken (opal_btl_usnic_handle_ack_info returned true):
 * marks the segments the peer holds (never resent), and resends at once
 * every one below the highest held that the peer lacks and that waited a
 * round trip.  Ranges beyond what was sent are ignored.
 */
void opal_btl_usnic_sack_ranges_take(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                     const opal_btl_usnic_sack_range_t *ranges, unsigned n);

/* opal_btl_usnic_handle_ack_info() for an ACK that reports an arrival and
 * grants the whole window */
static inline void opal_btl_usnic_handle_ack(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                             opal_btl_usnic_seq_t ack_seq)
{
    (void) opal_btl_usnic_handle_ack_info(eng, ep, ack_seq, ep->window, 0, true);
}

/* Length of a receive epoch: peers silent for longer stop holding a share
 * of our receive capacity. */
#define OPAL_BTL_USNIC_RX_EPOCH_USEC 1000u
/* Smallest grant: every active sender keeps a trickle going */
#define OPAL_BTL_USNIC_MIN_GRANT 2u

/* |ep| sent us a data segment: it holds a share of our capacity. */
void opal_btl_usnic_rx_note_sender(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* Segments |ep| may have un-ACKed toward us (the credit of our next ACK) */
uint32_t opal_btl_usnic_rx_grant(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep);

/* Set the ACK fields of |hdr| (cumulative ACK and credit) for |ep| */
void opal_btl_usnic_ack_stamp(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_hdr_t *hdr);

/**
 * Check every endpoint with un-ACKed data against the clock: retransmit
 * the oldest segment whose timer expired, declare dead a peer that has not
 * ACKed anything for peer_timeout, and recompute next_deadline.  Called by
 * opal_btl_usnic_engine_progress() when the clock passed next_deadline.
 */
void opal_btl_usnic_engine_expire(opal_btl_usnic_engine_t *eng);

/* When |ep| was last heard from (any ACK, also on data), in words, for
 * the peer timeout message: a peer heard from lately is stuck, not dead. */
void opal_btl_usnic_describe_last_heard(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep,
                                        char *out, size_t len);

/* The retransmit timer of |seg| expired: queue it for retransmission. */
void opal_btl_usnic_retrans_expired(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg);

/* Arm |seg|'s retransmit timer: now + the endpoint's RTO backed off by
 * the timeouts since its ACK last advanced (at most ALIVE_MAX_BACKOFF
 * doublings while the peer was heard from within rto_max). */
void opal_btl_usnic_timer_start(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                opal_btl_usnic_send_seg_t *seg);

/* A peer that answered within rto_max is alive: its losses are random,
 * not a dead or congested path, and waiting 8x, 16x ... the RTO for each
 * lost retransmission only stalls the window (one segment per timeout is
 * resent, so this adds no load worth backing off from). */
#define OPAL_BTL_USNIC_ALIVE_MAX_BACKOFF 2u

/* A raised RTO floor halves back toward rto_min after this long without
 * another premature timeout (see "Premature timeouts" in btl_usnic_ack.c) */
#define OPAL_BTL_USNIC_FLOOR_DECAY_USEC 10000000u
/* ... and is not raised within this long after a reported hole */
#define OPAL_BTL_USNIC_LOSS_MEMORY_USEC 2000000u

/* The RTO floor of a new endpoint: rto_floor_start within [rto_min, rto_max] */
static inline uint64_t opal_btl_usnic_rto_floor_start(const opal_btl_usnic_engine_params_t *p)
{
    uint64_t f = p->rto_floor_start > p->rto_min ? p->rto_floor_start : p->rto_min;
    return f < p->rto_max ? f : p->rto_max;
}

/* The ACK from |ep| says our last timeout was premature (FLAG_LATE_DUP):
 * raise its RTO floor. */
void opal_btl_usnic_premature_timeout(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* The ACK from |ep| says a retransmission of ours filled a hole
 * (FLAG_REPAIRED): the path loses datagrams, keep the RTO floor low. */
void opal_btl_usnic_loss_reported(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* Exponential back-off: |rto| doubled |retries| times, at most |rto_max|. */
static inline uint64_t opal_btl_usnic_rto_backoff(uint64_t rto, unsigned retries, uint64_t rto_max)
{
    unsigned shift = retries < 20 ? retries : 20;
    uint64_t t = rto << shift;
    return t < rto_max ? t : rto_max;
}

/**
 * RFC 6298 estimator: fold one RTT |sample| (us) into srtt/rttvar and
 * return the new RTO clamped to [|rto_min|, |rto_max|].
 */
uint64_t opal_btl_usnic_rtt_update(uint64_t *srtt, uint64_t *rttvar, uint64_t sample, uint64_t rto_min,
                                   uint64_t rto_max);

/**
 * We accepted (or were sent a stale copy of) a segment from |ep|: owe it an
 * ACK.  |urgent| sends it at the next progress pass instead of waiting
 * ack_iteration_delay ticks for a piggy-back.
 */
void opal_btl_usnic_ack_schedule(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, bool urgent);

/* A data segment whose header was stamped (opal_btl_usnic_ack_stamp, done
 * on every data segment: a lost explicit ACK must not leave the peer
 * retransmitting forever) has left: if an ACK was owed, it is paid. */
void opal_btl_usnic_ack_piggyback(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_hdr_t *hdr);

/* Post explicit ACKs that are due.  Returns the number posted. */
int opal_btl_usnic_ack_send_due(opal_btl_usnic_engine_t *eng);

/* Stop owing ACKs to |ep| (teardown). */
void opal_btl_usnic_ack_forget(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* The cumulative ACK value |ep|'s peer should hear from us */
static inline opal_btl_usnic_seq_t opal_btl_usnic_ack_value(const opal_btl_usnic_endpoint_t *ep)
{
    return ep->rx.next_expected - 1;
}

/* Fill the common header of an outgoing segment */
static inline void opal_btl_usnic_hdr_fill(const opal_btl_usnic_engine_t *eng, opal_btl_usnic_hdr_t *hdr,
                                           uint8_t type, opal_btl_usnic_seq_t seq, size_t payload_len,
                                           uint8_t tag)
{
    hdr->magic = opal_btl_usnic_wire16(OPAL_BTL_USNIC_MAGIC);
    hdr->version = OPAL_BTL_USNIC_PROTO_VERSION;
    hdr->type = type;
    hdr->sender = opal_btl_usnic_wire64(eng->p.my_name);
    hdr->seq = opal_btl_usnic_wire32(seq);
    hdr->ack_seq = 0;
    hdr->payload_len = opal_btl_usnic_wire16((uint16_t) payload_len);
    hdr->tag = tag;
    hdr->flags = 0;
    hdr->credit = 0;
    hdr->sack = 0;
    hdr->nonce = 0; /* both set by opal_btl_usnic_seg_seal() when it is posted */
    memset(hdr->mac, 0, sizeof(hdr->mac));
}

/**
 * Give |seg| (to |ep|, header and payload final) its nonce and its tag,
 * right before it is posted: every transmission, a retransmission too, is
 * a new datagram with a new nonce.
 */
void opal_btl_usnic_seg_seal(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *seg);
/* The same for a datagram of |len| bytes laid out at |hdr| (the
 * test-only injector's forgeries, which must pass the tag to reach the
 * checks behind it) */
void opal_btl_usnic_seal(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_hdr_t *hdr,
                         size_t len);

/* ----- the upward interface (btl_usnic_pml.c) ----- */

/**
 * Hand a complete fragment to the PML through Open MPI's table of receive
 * callbacks.  A tag outside the table, or one nobody registered, is
 * dropped and counted (num_drop_bad_tag); returns whether it was handed.
 */
bool opal_btl_usnic_pml_deliver(opal_btl_usnic_engine_t *eng, mca_btl_base_module_t *btl,
                                struct mca_btl_base_endpoint_t *ep, uint8_t tag, void *data, size_t len);

/* ----- emulated PUT (btl_usnic_put.c) ----- */

/* Most regions a module exposes at once (live + tombstones) */
#define OPAL_BTL_USNIC_MAX_REGIONS (1u << 16)

/**
 * Queue a PUT of |size| bytes from |local_address| to |remote_addr| inside
 * the peer's region |remote_handle|.  |cbfunc| runs from a later progress
 * pass once every byte is ACKed by the target (or with an error status).
 * Returns OPAL_SUCCESS, OPAL_ERR_UNREACH, OPAL_ERR_BAD_PARAM (no remote
 * region) or OPAL_ERR_OUT_OF_RESOURCE.
 */
int opal_btl_usnic_put_submit(opal_btl_usnic_endpoint_t *ep, void *local_address, uint64_t remote_addr,
                              struct mca_btl_base_registration_handle_t *local_handle,
                              const opal_btl_usnic_reg_handle_t *remote_handle, size_t size,
                              mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);

/* Post the next segment of the queued PUT |frag| (send progression). */
int opal_btl_usnic_put_send_next(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                 opal_btl_usnic_send_frag_t *frag);

/* |frag| left the send queue: all posted (OPAL_SUCCESS) or failed. */
void opal_btl_usnic_put_posted_or_failed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag,
                                         int status);

/* A PUT segment was ACKed (or forgotten at teardown). */
void opal_btl_usnic_put_seg_acked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg);

/* Teardown: the PUT owning |seg|, if any, ends with |status|. */
void opal_btl_usnic_put_mark_failed(opal_btl_usnic_send_seg_t *seg, int status);

/* Deferred completion: the PML's callback, then recycling. */
void opal_btl_usnic_put_complete(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag);

/* Target side: write the in-window PUT |ph| from |ep| into its region if
 * opal_btl_usnic_reg_check allows it; returns that verdict. */
opal_btl_usnic_put_verdict_t opal_btl_usnic_recv_put(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                                     const opal_btl_usnic_put_hdr_t *ph);

/* Post the chunk segment |seg| (sequence number, ACK, timer) on the data
 * channel; if the post fails, |seg| goes back to its free list. */
int opal_btl_usnic_chunk_seg_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_send_seg_t *seg);

#endif /* OPAL_BTL_USNIC_ENGINE_H */
