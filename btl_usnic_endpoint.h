/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * One endpoint per (local module, peer process).  It embeds the reliability
 * state of both directions and points at the engine it belongs to (the
 * core types below it, btl_usnic_engine_core.h).
 */
#ifndef OPAL_BTL_USNIC_ENDPOINT_H
#define OPAL_BTL_USNIC_ENDPOINT_H

#include "opal_config.h"
#include "opal/class/opal_list.h"
#include "opal/util/proc.h"

#include "btl_usnic_auth.h"
#include "btl_usnic_cc.h"
#include "btl_usnic_engine_core.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_pieces.h"
#include "btl_usnic_pmtu.h"
#include "btl_usnic_seq.h"

/* opal_btl_usnic_endpoint_t (btl_usnic_engine_core.h names it) */
struct mca_btl_base_endpoint_t {
    opal_list_item_t super;              /* on the module's list of endpoints */
    opal_btl_usnic_engine_t *eng;
    opal_proc_t *proc;                   /* NULL in engine tests */
    uint64_t peer_id;                    /* peer's sender id: its process name, jobid << 32 | vpid */
    bool keyed;                          /* set_keys ran: its release counts (an incarnation) */
    uint64_t peer_addr[2];               /* the wire's address of the peer, per channel */
    void *wire_peer;                     /* the wire's own state of this peer (socket wire: what it
                                            learned of the path's offload); the engine never reads it */
    bool failed;                         /* unreachable: fail all sends */
    bool departed;                       /* said goodbye (BYE): finalized, takes nothing more */

    /* tx: invariant acked_seq + 1 <= seq of every un-ACKed segment < next_seq,
     * next_seq - (acked_seq + 1) <= window.  sent[s % window] holds the
     * segment with sequence s while it is un-ACKed. */
    struct {
        opal_list_t queue;               /* frags not yet fully posted */
        opal_btl_usnic_seq_t next_seq;
        opal_btl_usnic_seq_t acked_seq;
        uint64_t peer_credit;            /* the peer's last grant: charge (bytes, btl_usnic_charge.h)
                                            we may have un-ACKed past acked_seq */
        uint64_t in_flight_charge;       /* what our un-ACKed segments cost the peer */
        uint64_t in_flight_bytes;        /* their datagrams' bytes (what the congestion window counts) */
        uint32_t data_unacked;           /* un-ACKed segments last posted on the data channel: while
                                            any, tiny fragments follow them there (send.c) */
        opal_btl_usnic_charge_t peer_charge; /* the peer's charge per datagram, by size (its modex) */
        opal_btl_usnic_send_seg_t **sent;
        uint32_t next_frag_id;
        uint32_t dup_acks;               /* duplicate ACKs in a row */
        bool on_rts_list;
        opal_list_item_t rts_item;       /* on the engine's endpoints_with_sends */
        bool on_flight_list;
        opal_list_item_t flight_item;    /* on the engine's endpoints_in_flight */
        bool on_pace_list;
        opal_list_item_t pace_item;      /* on the engine's endpoints_paced */
        uint64_t nonce;                  /* of the next datagram we send it (btl_usnic_auth.h) */
        bool nonces_spent;               /* its count reached OPAL_BTL_USNIC_NONCE_COUNT_STOP */
        struct mca_btl_base_endpoint_t *spent_next; /* on the engine's nonces_spent */
        opal_btl_usnic_mac_t mac;        /* our key toward it */
    } tx;

    /* Retransmission timing (RFC 6298).  The retransmit timer of an
     * endpoint is that of its oldest un-ACKed segment; each timeout doubles
     * the timeout of later (re)transmissions until the ACK advances.  While in recovery
     * (a segment was retransmitted and the ACK has not yet passed
     * |recover|), every ACK that advances retransmits the next oldest
     * segment at once (NewReno's partial ACK). */
    struct {
        uint64_t srtt;                   /* us; 0 = no sample yet */
        uint64_t rttvar;                 /* us */
        uint64_t rto;                    /* us */
        unsigned backoff;                /* timeouts since the ACK last advanced */
        unsigned tail_probes;            /* tail-loss probes since the ACK last advanced */
        bool probe_out;                  /* a probe of probe_seq awaits the ACK that covers it */
        opal_btl_usnic_seq_t probe_seq;
        uint64_t pto_floor;              /* us: the probe timeout's floor, raised by spurious probes
                                            (0: rto_min) */
        uint64_t last_ack_time;          /* last time the ACK advanced or data started to flow */
        uint64_t last_heard;             /* last time any ACK (even a duplicate) came; 0 = never */
        bool in_recovery;
        opal_btl_usnic_seq_t recover;
        uint64_t rto_floor;              /* us: rto_min, raised after premature timeouts */
        uint64_t floor_changed;          /* when rto_floor last changed */
        uint64_t last_timeout;           /* time of the last timeout retransmission; 0 = none pending judgement */
        uint64_t last_loss;              /* last time the peer reported a hole; 0 = never */
        uint64_t fresh_rtt;              /* us: the RTT sample the ACK being taken gave (0: none) */
    } timer;

    opal_btl_usnic_cc_t cc;              /* congestion window and pacing of the path (btl_usnic_cc.c) */

    /* rx: every sequence < next_expected was received; rcvd[s % window] is
     * set for received s in [next_expected, next_expected + window).
     * Fragments reach the PML in sequence order: one complete ahead of a
     * hole waits in |held| (seq >= next_expected), and every held one has
     * been handed over once next_expected passed it. */
    struct {
        opal_btl_usnic_seq_t next_expected;
        opal_btl_usnic_seq_t highest;    /* highest sequence number accepted (the end of what the
                                            selective-ACK ranges must describe) */
        uint8_t *rcvd;
        opal_btl_usnic_rx_frag_t *frags; /* reassembly slots, [window] */
        opal_btl_usnic_held_t *held;     /* complete fragments waiting for earlier ones, by seq */
        uint32_t nheld;
        bool delivering;                 /* inside a PML upcall: later fragments wait for it */
        bool ack_owed;
        bool late_dup;                   /* a copy of a received, un-ACKed segment came again */
        bool repaired;                   /* a retransmitted copy filled a hole */
        bool fast_ack_urgent;            /* the fast path's decision for the ACK that
                                            opal_btl_usnic_recv_fast_finish schedules */
        opal_btl_usnic_seq_t last_ack_sent; /* last cumulative ACK value we sent */
        opal_btl_usnic_seq_t prev_ack_sent; /* the value before it */
        uint64_t last_ack_time;          /* when last_ack_sent first left */
        uint64_t last_grant;             /* credit we granted with it (bytes of our charge) */
        uint64_t last_arrival;           /* when a segment was last taken (0: never;
                                            OPAL_BTL_USNIC_ARRIVAL_UNKNOWN): explicit ACKs say how
                                            long after it they left */
        uint64_t charge_since_ack;       /* what the segments accepted since an ACK last left cost us */
        uint64_t active_epoch;           /* engine rx epoch in which it last sent us data, + 1 */
        uint64_t ack_due_tick;           /* send an explicit ACK at this tick ... */
        uint64_t ack_due_time;           /* ... and not before this time (us) */
        bool on_ack_list;
        opal_list_item_t ack_item;       /* on the engine's endpoints_needing_ack */
        opal_btl_usnic_mac_t mac;        /* its key toward us */
        opal_btl_usnic_replay_t replay;  /* the nonces of its authentic datagrams */
        opal_btl_usnic_pieces_t pieces;  /* its datagrams that come as pieces */
    } rx;

    uint32_t window;                     /* segments; same on both sides */

    /* Datagram limits toward this peer: the smaller of both sides' MTUs,
     * and on the data channel what the path MTU search confirmed
     * (pmtu.cur; opal_btl_usnic_endpoint_set_datagram) */
    opal_btl_usnic_pmtu_t pmtu;
    bool on_probe_list;
    opal_list_item_t probe_item;         /* on the engine's endpoints_probing */
    size_t pair_tiny_mtu;                /* the priority channel's limit of both sides */
    size_t tiny_mtu;                     /* largest datagram for the priority channel */
    size_t max_frag_payload;             /* PML bytes in one FRAG segment */
    size_t max_chunk_payload;            /* bytes in one CHUNK segment */
    size_t max_tiny_payload;             /* PML bytes of a tiny (priority) fragment */
};
typedef struct mca_btl_base_endpoint_t mca_btl_base_endpoint_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_endpoint_t);

/* The slot of sequence (or fragment id) |n| in |ep|'s per-window arrays:
 * the window is a power of two (opal_btl_usnic_endpoint_init_rel), so a
 * mask, not a division, on every datagram's path */
static inline uint32_t opal_btl_usnic_slot(const opal_btl_usnic_endpoint_t *ep, uint32_t n)
{
    return n & (ep->window - 1);
}

/* The largest window (btl_usnic_window's range): sequence numbers,
 * bitmaps and reassembly slots per endpoint, and the stack of the loss
 * detection (btl_usnic_ack.c) are sized by it */
#define OPAL_BTL_USNIC_WINDOW_LIMIT 4096u
_Static_assert(OPAL_BTL_USNIC_REPLAY_WINDOW >= 4 * OPAL_BTL_USNIC_WINDOW_LIMIT,
               "a full window, its copies and the ACKs overtaking them must stay inside the anti-replay window");

/**
 * Give |ep| its reliability state: window of |window| segments (at most
 * OPAL_BTL_USNIC_WINDOW_LIMIT), our first
 * sequence |local_isn|, the peer's first sequence |peer_isn|.
 * Returns OPAL_SUCCESS or OPAL_ERR_OUT_OF_RESOURCE.
 */
int opal_btl_usnic_endpoint_init_rel(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_engine_t *eng,
                                     uint32_t window, opal_btl_usnic_seq_t local_isn,
                                     opal_btl_usnic_seq_t peer_isn);

/**
 * The keys of both directions: |alg| (OPAL_BTL_USNIC_MAC_*), our key
 * toward the peer and the peer's toward us (btl_usnic_auth.h), made
 * this endpoint's own by the number of endpoints to the same peer
 * (ep->peer_id, set before) this engine released before it.  Needed
 * unless the engine's protection is none.
 */
void opal_btl_usnic_endpoint_set_keys(opal_btl_usnic_endpoint_t *ep, unsigned alg,
                                      const uint8_t tx_key[OPAL_BTL_USNIC_KEY_BYTES],
                                      const uint8_t rx_key[OPAL_BTL_USNIC_KEY_BYTES]);

/**
 * What the peer's receive side holds (|capacity|, bytes of its charge)
 * and what one datagram costs of it (|charge|), from its modex: the
 * sender counts its un-ACKed segments with this table, and before the
 * first grant may have a quarter of |capacity| in flight, at least two of
 * its largest datagrams (0: unknown, no limit but the window).  Until called, the peer is taken to be like us.
 */
void opal_btl_usnic_endpoint_set_peer_rx(opal_btl_usnic_endpoint_t *ep, const opal_btl_usnic_charge_t *charge,
                                         uint64_t capacity);

/**
 * Lower |ep|'s datagram limits to what the peer can receive: |mtu| on its
 * data channel and |tiny_mtu| on its priority channel (limits never grow
 * beyond our own).
 */
void opal_btl_usnic_endpoint_limit_mtu(opal_btl_usnic_endpoint_t *ep, size_t mtu, size_t tiny_mtu);

/* Use datagrams of at most |size| bytes toward |ep| from now on (the path
 * MTU search's confirmed size): new segments are cut to it, larger ones
 * already cut go as pieces */
void opal_btl_usnic_endpoint_set_datagram(opal_btl_usnic_endpoint_t *ep, size_t size);

/**
 * The path MTU search of |ep| moved: use its size (pmtu.cur, which was
 * |old| bytes) from now on, count and report the change with |why| (the
 * path_changed upcall), and watch the search's next event.
 */
void opal_btl_usnic_endpoint_path_update(opal_btl_usnic_endpoint_t *ep, size_t old, const char *why);

/* Put |ep| on the engine's list of searches that have an event coming
 * (a probe due or out), or take it off when it has none */
void opal_btl_usnic_endpoint_probe_watch(opal_btl_usnic_endpoint_t *ep);

/* Number of un-ACKed segments */
static inline uint32_t opal_btl_usnic_endpoint_in_flight(const opal_btl_usnic_endpoint_t *ep)
{
    return (uint32_t) (ep->tx.next_seq - ep->tx.acked_seq - 1);
}

/* What the congestion controller of |ep| is told about its path */
static inline void opal_btl_usnic_endpoint_cc_path(const opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_cc_path_t *path)
{
    const opal_btl_usnic_engine_t *eng = ep->eng;
    size_t mss = ep->max_chunk_payload + sizeof(opal_btl_usnic_chunk_hdr_t);
    size_t batch = (eng->p.batch_segs > 1 ? eng->p.batch_segs : 1) * mss;
    path->target = eng->p.cc_target;
    path->srtt = ep->timer.srtt;
    path->mss = mss;
    path->max_window = (uint64_t) ep->window * mss;
    path->in_flight = ep->tx.in_flight_bytes;
    path->burst = (batch > OPAL_BTL_USNIC_CC_MAX_BURST && mss < OPAL_BTL_USNIC_CC_MAX_BURST) ? OPAL_BTL_USNIC_CC_MAX_BURST
                                                                                          : batch;
}

/* Room in |ep|'s congestion window for a datagram of |len| bytes, and its
 * pacer lets one out now */
static inline bool opal_btl_usnic_endpoint_cc_room(const opal_btl_usnic_endpoint_t *ep, size_t len)
{
    if (!opal_btl_usnic_cc_pacing(&ep->cc)) {
        return ep->tx.in_flight_bytes + len <= ep->cc.cwnd;
    }
    opal_btl_usnic_cc_path_t path;
    opal_btl_usnic_endpoint_cc_path(ep, &path);
    return ep->tx.in_flight_bytes + len <= opal_btl_usnic_cc_limit(&ep->cc, &path) &&
           opal_btl_usnic_cc_pace_ready(&ep->cc, &path, ep->eng->now);
}

/* A datagram of |len| bytes left for |ep|: its pacer takes the tokens */
static inline void opal_btl_usnic_endpoint_cc_sent(opal_btl_usnic_endpoint_t *ep, size_t len)
{
    if (!opal_btl_usnic_cc_pacing(&ep->cc)) {
        opal_btl_usnic_cc_sent_unpaced(&ep->cc, ep->eng->now);
        return;
    }
    opal_btl_usnic_cc_path_t path;
    opal_btl_usnic_endpoint_cc_path(ep, &path);
    opal_btl_usnic_cc_sent(&ep->cc, &path, len, ep->eng->now);
}

/* Room for one more datagram of |len| bytes (header included): a sequence
 * number inside our window, and its charge at the receiver inside the
 * receiver's last grant together with what is in flight, and (congestion
 * control on) inside the congestion window, with the pacer's leave.  With
 * nothing in flight one datagram always fits: only data can draw the ACK
 * that brings a larger grant or window. */
static inline bool opal_btl_usnic_endpoint_room_for(const opal_btl_usnic_endpoint_t *ep, size_t len)
{
    uint32_t in_flight = opal_btl_usnic_endpoint_in_flight(ep);
    if (in_flight >= ep->window) {
        return false;
    }
    if (0 == in_flight) {
        return true;
    }
    if (ep->tx.in_flight_charge + opal_btl_usnic_charge_of(&ep->tx.peer_charge, len) > ep->tx.peer_credit) {
        return false;
    }
    return !ep->eng->p.cc_enabled || opal_btl_usnic_endpoint_cc_room(ep, len);
}

/* Room for one more datagram of the smallest size */
static inline bool opal_btl_usnic_endpoint_window_open(const opal_btl_usnic_endpoint_t *ep)
{
    return opal_btl_usnic_endpoint_room_for(ep, 0);
}

/* Nothing queued and nothing un-ACKed */
static inline bool opal_btl_usnic_endpoint_drained(opal_btl_usnic_endpoint_t *ep)
{
    return 0 == opal_btl_usnic_endpoint_in_flight(ep) && opal_list_is_empty(&ep->tx.queue);
}

/* Largest whole fragment toward |ep| (the engine's if |ep| is NULL) */
static inline size_t opal_btl_usnic_max_frag_payload(const opal_btl_usnic_engine_t *eng,
                                                     const opal_btl_usnic_endpoint_t *ep)
{
    return (NULL != ep) ? ep->max_frag_payload : eng->max_frag_payload;
}

/* Free the fragments |ep| holds back for in-order delivery (teardown). */
void opal_btl_usnic_held_free_all(opal_btl_usnic_endpoint_t *ep);

/* Take |ep| off every list of its engine (ACKs owed, ready to send, data
 * in flight) and forget the ACK it is owed; its state stays (teardown) */
void opal_btl_usnic_endpoint_detach(opal_btl_usnic_endpoint_t *ep);

/* The ready-to-send list (the engine's endpoints_with_sends): */
/* Put |ep| on it if it has work, window and credits. */
void opal_btl_usnic_check_rts(opal_btl_usnic_endpoint_t *ep);
/* Endpoints whose pacer held them back and whose time has come go back to
 * it (called when the clock passed the engine's next_pace_event) */
void opal_btl_usnic_pace_release(opal_btl_usnic_engine_t *eng);
/* Take |ep| off it (its turn has come) */
void opal_btl_usnic_rts_remove(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);
/* Has |ep| a queued fragment whose next datagram fits its window and
 * the peer's grant? */
bool opal_btl_usnic_endpoint_can_send(opal_btl_usnic_endpoint_t *ep);

#endif /* OPAL_BTL_USNIC_ENDPOINT_H */
