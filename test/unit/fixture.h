/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Test fixture for the reliability engine: one engine bound to a
 * "recording" wire that never sends anything.  Posts are recorded (with a
 * copy of the bytes, as the provider would have sent them) and stay
 * "in the provider" until the test reports their completion; deliveries to
 * the PML are recorded.
 *
 * Time.  The engine owns its timers (the hotel, btl_usnic_ack.c): it
 * stamps seg->sent_time and seg->deadline at check-in, keeps
 * next_deadline, and evicts itself from opal_btl_usnic_engine_progress()
 * once the clock it was handed passed next_deadline.  The fixture is the
 * owner of the clock: fx->now is the owner's (virtual, microsecond)
 * clock, and fx_set_time() moves it and hands it to the engine, as the
 * module does once per progress pass.  The fixture reads the hotel
 * (fx_in_hotel, fx_hotel_guests, fx_hotel_consistent) but never computes
 * or fires a deadline.
 *
 * The BTL entry points (alloc, prepare_src, send, sendi, free) go through
 * the production glue (btl_usnic_glue.c) that btl_usnic_btl.c calls: the
 * module itself, which only adds its lock and Open MPI's convertor, needs
 * a live Open MPI.
 *
 * Open MPI runtime: none.  The engine's free lists are opal_free_list_t
 * without payload buffers (no mpool, no rcache), the object system
 * initialises classes lazily on first OBJ_NEW / OBJ_CONSTRUCT, and
 * opal_using_threads() is false until someone enables threads, so
 * opal_free_list_init() works in a plain program without opal_init() or
 * opal_init_util() (checked: the tests run clean under ASan/LSan without it).
 * Not calling them keeps the tests hermetic: no MCA parameter files or
 * environment are read.
 */
#ifndef USNIC_UNIT_FIXTURE_H
#define USNIC_UNIT_FIXTURE_H

#include "opal_config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_engine.h"

/* Engine parameters used unless a test says otherwise */
#define FX_MTU 1472
#define FX_TINY_MTU 768
#define FX_MAX_SEND 65536
#define FX_HDR ((size_t) sizeof(opal_btl_usnic_hdr_t))        /* 52 */
#define FX_CHUNK_HDR ((size_t) sizeof(opal_btl_usnic_chunk_hdr_t)) /* 64 */
#define FX_ACK_HDR ((size_t) sizeof(opal_btl_usnic_ack_hdr_t))     /* 88 */
#define FX_MAX_FRAG_PAYLOAD (FX_MTU - FX_HDR)        /* 1424 */
#define FX_MAX_CHUNK_PAYLOAD (FX_MTU - FX_CHUNK_HDR) /* 1412 */
#define FX_MAX_TINY_PAYLOAD (FX_TINY_MTU - FX_HDR)   /* 720 */
#define FX_MAX_PEERS 16
/* Retransmission timing (us) unless a test says otherwise; no peer timeout */
/* What every datagram costs a fixture engine's receive side (a posted
 * buffer of 2 KiB: two credit units) */
#define FX_DGRAM_CHARGE 2048u
#define FX_RTO_INITIAL 1000
#define FX_RTO_MIN 200
#define FX_RTO_MAX 64000
/* Duplicate ACKs of one value that trigger a fast retransmit: mirrors
 * OPAL_BTL_USNIC_DUPACK_THRESHOLD, private to btl_usnic_ack.c */
#define FX_DUPACK_THRESHOLD 2

/* One call of wire->post that the wire accepted */
typedef struct fx_post_t {
    opal_btl_usnic_send_seg_t *seg;
    opal_btl_usnic_endpoint_t *ep;
    int channel;
    uint32_t len;          /* seg->wire_len at post time */
    uint8_t *bytes;        /* copy of the header and payload */
    bool completed;        /* completion reported to the engine */
} fx_post_t;

/* One call of the deliver upcall */
typedef struct fx_delivery_t {
    opal_btl_usnic_endpoint_t *ep;
    uint8_t tag;
    size_t len;
    uint8_t *data;         /* copy */
} fx_delivery_t;

typedef struct fx_t fx_t;
typedef void (*fx_deliver_hook_t)(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data, size_t len);

struct fx_t {
    opal_btl_usnic_engine_t eng;  /* first: the wire ops map eng -> fixture */
    uint64_t now;                 /* the owner's clock (us); see fx_set_time() */

    fx_post_t *posts;
    size_t nposts, posts_cap;
    unsigned post_calls;          /* accepted or refused */
    /* Refuse the next |fail_count| posts with |fail_rc| */
    int fail_rc;
    unsigned fail_count;
    /* Complete every accepted post inside the post call, as the module
     * does after fi_inject (no completion will come from the provider) */
    bool complete_on_post;


    fx_delivery_t *dels;
    size_t ndels, dels_cap;
    fx_deliver_hook_t deliver_hook;
    unsigned send_dones;          /* send_done upcalls (PML send callbacks) */
    unsigned put_dones;           /* put_done upcalls (PML PUT callbacks) */

    unsigned flushes;             /* wire->flush calls */

    unsigned peer_failed_calls;
    int peer_failed_rc;
    uint64_t peer_failed_at;      /* engine time of the last peer_failed call */

    opal_btl_usnic_endpoint_t *peers[FX_MAX_PEERS]; /* by the peer's sender id */
    uint64_t seal_nonce;          /* the last nonce fx_recv sealed with */
    uint32_t seal_incarnation;    /* the peer's endpoint incarnation fx_seal keys for (0) */
};

/* PML side of a send: counts its completion callbacks */
typedef struct fx_cb_t {
    fx_t *fx;
    unsigned calls;
    int status;
    bool free_in_callback;        /* a PML that does not give us the descriptor frees it in the callback */
} fx_cb_t;

void fx_params_default(opal_btl_usnic_engine_params_t *p);
/* The recording wire and the recording upcalls (for a test that binds its
 * own variant of either) */
const opal_btl_usnic_wire_ops_t *fx_wire_ops(void);
const opal_btl_usnic_upcalls_t *fx_upcalls(void);
/* Set up |fx| (|p| NULL: defaults).  Aborts the program if the engine cannot start. */
void fx_init(fx_t *fx, const opal_btl_usnic_engine_params_t *p);
/* The same with another wire or other upcalls (NULL: the recording ones;
 * the pair simulation, the fuzzer); |fx| must then be the first member of
 * whatever they map the engine back to */
void fx_init_with_wire(fx_t *fx, const opal_btl_usnic_engine_params_t *p, const opal_btl_usnic_wire_ops_t *wire,
                       const opal_btl_usnic_upcalls_t *up);
void fx_fini(fx_t *fx);
fx_t *fx_of(opal_btl_usnic_engine_t *eng);

/* An endpoint to peer |peer_id| with the given window and ISNs */
opal_btl_usnic_endpoint_t *fx_ep_new(fx_t *fx, uint32_t peer_id, uint32_t window, opal_btl_usnic_seq_t local_isn,
                                     opal_btl_usnic_seq_t peer_isn);
void fx_ep_free(fx_t *fx, opal_btl_usnic_endpoint_t *ep);
opal_btl_usnic_endpoint_t *fx_lookup(opal_btl_usnic_engine_t *eng, uint64_t sender_id);
/* |len| bytes at |buf| handed up as a wire would, on the data channel
 * with no source (the fixture's engines check none unless a test sets
 * params.check_source) */
void fx_hand_up(opal_btl_usnic_engine_t *eng, void *buf, size_t len);
/* ... the wire saying it arrived at |arrival| (see fx_recv_at) */
void fx_hand_up_at(opal_btl_usnic_engine_t *eng, void *buf, size_t len, uint64_t arrival);
opal_btl_usnic_fast_t fx_hand_up_fast(opal_btl_usnic_engine_t *eng, void *buf, size_t len,
                                   opal_btl_usnic_endpoint_t **ep_p);

/* Posts */
fx_post_t *fx_last_post(fx_t *fx);
const opal_btl_usnic_hdr_t *fx_post_hdr(const fx_post_t *post);
uint32_t fx_post_seq(const fx_post_t *post);
/* Report the completion of every not yet completed post of |seg| */
void fx_complete(fx_t *fx, opal_btl_usnic_send_seg_t *seg);
void fx_complete_all(fx_t *fx);
/* Posts on |channel| (-1: any) whose header type is |type| (0: any) */
unsigned fx_count_posts(const fx_t *fx, int channel, int type);

/* Clock: move the owner's clock to |now| and hand it to the engine */
void fx_set_time(fx_t *fx, uint64_t now);
/* One progress pass as the module makes it: the engine gets the owner's
 * clock, then progresses (which expires due timers itself).  Returns the
 * number of segments posted. */
int fx_progress(fx_t *fx);
/* Move the clock to the engine's next deadline (if it is later than now)
 * and run the engine's expiry there, without reposting anything (the
 * resend list can be inspected before the next progress pass).  Returns
 * false if no deadline was set. */
bool fx_expire_next(fx_t *fx);
/* Sleep from deadline to deadline (fx_expire_next) until a retransmit
 * timer or the peer timeout actually fires: next_deadline may be early
 * (a stale deadline only costs a scan), never late.  Returns false if no
 * deadline is left or nothing fired within 64 wake-ups. */
bool fx_run_to_timeout(fx_t *fx);

/* The hotel: is |seg| checked in (its deadline runs)? */
bool fx_in_hotel(const opal_btl_usnic_send_seg_t *seg);
/* Segments checked in, over every endpoint of |fx| */
size_t fx_hotel_guests(const fx_t *fx);
/* The hotel's invariants hold for every endpoint of |fx|: a guest is in
 * the window and not queued for resend, its endpoint is on the register
 * (endpoints_in_flight), and next_deadline is never later than the
 * earliest deadline due */
bool fx_hotel_consistent(fx_t *fx);
/* The engine's own view: the earliest deadline it must act on (oldest
 * un-ACKed segment of each endpoint in flight whose timer runs and, if
 * |with_peer_timeout| and one is configured, the peer timeout);
 * UINT64_MAX if none */
uint64_t fx_true_next_deadline(fx_t *fx, bool with_peer_timeout);

/* Receive: hand a datagram to the engine (at the owner's clock), sealed
 * first as its sender would (a fresh nonce and the tag under the key of
 * that sender toward us, see fx_key) when the engine protects and the
 * sender is known, so that tests of the protocol need not care */
void fx_recv(fx_t *fx, const void *buf, size_t len);
/* The same, the wire saying it arrived at |arrival| (a kernel stamp, 0:
 * read at once, OPAL_BTL_USNIC_ARRIVAL_UNKNOWN: it may have waited) */
void fx_recv_at(fx_t *fx, const void *buf, size_t len, uint64_t arrival);
/* ... as it is: forged, replayed or another job's datagrams */
void fx_recv_raw(fx_t *fx, const void *buf, size_t len);
/* Seal |len| bytes at |buf| from |sender| to |fx| with nonce |nonce| (what
 * fx_recv does, for tests that replay or tamper afterwards) */
void fx_seal(fx_t *fx, uint8_t *buf, size_t len, uint32_t sender, uint64_t nonce);

/* The key of the direction |from| -> |to| in fixtures: every engine of a
 * test derives the same, so that two fixture engines talk (fx_ep_new
 * gives every endpoint these keys); the best algorithm this CPU has */
void fx_key(uint32_t from, uint32_t to, uint8_t key[OPAL_BTL_USNIC_KEY_BYTES]);
unsigned fx_mac_alg(void);

/* Segment builders (what a peer with id |sender| would send) */
size_t fx_build_frag(uint8_t *buf, uint32_t sender, uint32_t seq, uint8_t tag, const void *data, size_t len);
size_t fx_build_chunk(uint8_t *buf, uint32_t sender, uint32_t seq, uint8_t tag, uint32_t frag_id,
                      uint32_t frag_size, uint32_t offset, const void *data, size_t len);
size_t fx_build_ack(uint8_t *buf, uint32_t sender, uint32_t ack_seq); /* grants all */
size_t fx_build_ack_credit(uint8_t *buf, uint32_t sender, uint32_t ack_seq, uint16_t credit);

/* The BTL entry points at the fixture's clock, through the same glue as
 * btl_usnic_btl.c's (btl_usnic_glue.h: usnic_alloc, usnic_prepare_src,
 * usnic_send, usnic_sendi, usnic_free), with plain buffers for Open MPI's
 * convertor */
opal_btl_usnic_send_frag_t *fx_alloc(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t size, uint32_t flags);
/* prepare_src of a contiguous user buffer: reserve bytes of PML header, then |size| bytes referenced in place */
opal_btl_usnic_send_frag_t *fx_prepare_src(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t reserve,
                                           const void *data, size_t size, uint32_t flags);
/* ... of data that must be packed (a non-contiguous datatype): copied into the descriptor */
opal_btl_usnic_send_frag_t *fx_prepare_src_packed(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t reserve,
                                                  const void *data, size_t size, uint32_t flags);
/* btl_send: tiny fragments leave at once, a queued one's first datagrams before it returns */
int fx_send(fx_t *fx, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag);
int fx_sendi(fx_t *fx, opal_btl_usnic_endpoint_t *ep, const void *header, size_t header_size, const void *payload,
             size_t payload_size, uint8_t tag);
/* btl_sendi of |header_size| bytes alone, as ob1 sends a control message:
 * refused, *|instead| is the descriptor to btl_send (or NULL) */
int fx_sendi_or_descriptor(fx_t *fx, opal_btl_usnic_endpoint_t *ep, const void *header, size_t header_size,
                           uint32_t flags, opal_btl_usnic_send_frag_t **instead, uint8_t tag);
void fx_free(fx_t *fx, opal_btl_usnic_send_frag_t *frag);
void fx_set_callback(opal_btl_usnic_send_frag_t *frag, fx_cb_t *cb);
void fx_pml_callback(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep, mca_btl_base_descriptor_t *des,
                     int status);

/* Free-list accounting: items currently on |list|, and items it ever allocated */
size_t fx_free_list_available(opal_free_list_t *list);
size_t fx_free_list_allocated(const opal_free_list_t *list);
/* Small fragments of every size class on their free lists */
size_t fx_small_frags_available(fx_t *fx);
/* Every free list of |pool| with its name; returns how many (at most FX_POOL_LISTS) */
#define FX_POOL_LISTS (OPAL_BTL_USNIC_SMALL_CLASSES + 3)
size_t fx_pool_lists(opal_btl_usnic_frag_pool_t *pool, opal_free_list_t **lists, const char **names);
/* Every fragment and segment of the engine is back on its free list */
bool fx_all_recycled(fx_t *fx);

/* Deterministic bytes: pattern of (|seed|, index) */
void fx_fill(uint8_t *buf, size_t len, uint32_t seed);

/* Is state flag |f| (POSTED, ACKED, IN_HOTEL, ON_RESEND, IN_WINDOW) set on |seg|? */
#define FX_FLAG(seg, f) (0 != ((seg)->flags & OPAL_BTL_USNIC_SEG_FLAG_##f))

/**
 * Send |n| tiny BTL-owned fragments (100 bytes, no callback) to |ep| at the
 * fixture's clock; segs[i] (if |segs|) gets the segment holding sequence
 * number first + i.  Returns how many took the fast path, stopping at the
 * first that did not.
 */
unsigned fx_send_tiny(fx_t *fx, opal_btl_usnic_endpoint_t *ep, unsigned n, opal_btl_usnic_send_seg_t **segs);

/* fx_send_tiny() that fails the running test unless all |n| took the fast path */
#define FX_SEND_TINY(fx, ep, n, segs)                                                     \
    do {                                                                                  \
        unsigned fx_sent_ = fx_send_tiny((fx), (ep), (n), (segs));                        \
        if (fx_sent_ != (unsigned) (n)) {                                                 \
            FAILF("tiny send %u did not take the fast path", fx_sent_);                   \
        }                                                                                 \
    } while (0)

/* Chunks of a |size|-byte fragment cut at |chunk| bytes */
unsigned fx_nchunks(size_t size, size_t chunk);
/* order[0..n) := a permutation of the chunks: |kind| 0 forward, 1
 * reverse, 2+ shuffled with a seed of its own; and its name */
void fx_make_order(unsigned *order, unsigned n, int kind);
const char *fx_order_name(int kind);

/* A retransmission is the first transmission's bytes, but for the flags
 * |retx_flags| in its header (FLAG_RETX, and FLAG_RETX_TIMEOUT after a
 * timeout: how the receiver tells real losses and premature timeouts), a
 * later nonce and its own tag */
bool fx_same_but_flags(const fx_post_t *resend, const fx_post_t *first, uint8_t retx_flags);
#define FX_TIMEOUT_FLAGS (OPAL_BTL_USNIC_HDR_FLAG_RETX | OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT)

/* Segments waiting on the engine's resend list */
size_t fx_resend_len(fx_t *fx);
uint32_t fx_rand(uint64_t *state);

#endif /* USNIC_UNIT_FIXTURE_H */
