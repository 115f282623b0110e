/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Test fixture for the reliability engine: one engine bound to a
 * "recording" wire that never sends anything.  Posts are recorded (with a
 * copy of the bytes, as the provider would have sent them) and stay
 * "in the provider" until the test reports their completion; timers are a
 * list of armed segments that the test fires by hand; deliveries to the PML
 * are recorded.  The small glue of btl_usnic_module.c (alloc, send, sendi,
 * free, prepare_src) is mirrored here, because the module itself needs a
 * live Open MPI.
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
#define FX_COOKIE 0x0b7c0de5u
#define FX_MTU 1472
#define FX_TINY_MTU 768
#define FX_MAX_SEND 65536
#define FX_HDR ((size_t) sizeof(opal_btl_usnic_hdr_t))        /* 24 */
#define FX_CHUNK_HDR ((size_t) sizeof(opal_btl_usnic_chunk_hdr_t)) /* 36 */
#define FX_MAX_FRAG_PAYLOAD (FX_MTU - FX_HDR)        /* 1448 */
#define FX_MAX_CHUNK_PAYLOAD (FX_MTU - FX_CHUNK_HDR) /* 1436 */
#define FX_MAX_TINY_PAYLOAD (FX_TINY_MTU - FX_HDR)   /* 744 */
#define FX_MAX_PEERS 8

/* One call of wire->post that the wire accepted */
typedef struct fx_post_t {
    opal_btl_usnic_send_seg_t *seg;
    opal_btl_usnic_endpoint_t *ep;
    int channel;
    uint32_t len;          /* seg->wire_len at post time */
    uint8_t *bytes;        /* copy of the header and payload */
    bool completed;        /* completion reported to the engine */
} fx_post_t;

/* One call of wire->deliver */
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
    uint64_t now;                 /* virtual time, stamped into seg->deadline */
    uint64_t rto;

    fx_post_t *posts;
    size_t nposts, posts_cap;
    unsigned post_calls;          /* accepted or refused */
    /* Refuse the next |fail_count| posts with |fail_rc| */
    int fail_rc;
    unsigned fail_count;

    opal_btl_usnic_send_seg_t **armed; /* segments with an armed timer */
    size_t narmed, armed_cap;
    unsigned arms, disarms;
    int arm_rc;                   /* what timer_arm returns */

    fx_delivery_t *dels;
    size_t ndels, dels_cap;
    fx_deliver_hook_t deliver_hook;

    unsigned peer_failed_calls;
    int peer_failed_rc;

    opal_btl_usnic_endpoint_t *peers[FX_MAX_PEERS]; /* by the peer's sender id */
};

/* PML side of a send: counts its completion callbacks */
typedef struct fx_cb_t {
    fx_t *fx;
    unsigned calls;
    int status;
    bool free_in_callback;        /* a PML that does not give us the descriptor frees it in the callback */
} fx_cb_t;

void fx_params_default(opal_btl_usnic_engine_params_t *p);
/* Set up |fx| (|p| NULL: defaults).  Aborts the program if the engine cannot start. */
void fx_init(fx_t *fx, const opal_btl_usnic_engine_params_t *p);
/* The same with another wire (the pair simulation); |fx| must then be the
 * first member of whatever the wire maps the engine back to */
void fx_init_with_wire(fx_t *fx, const opal_btl_usnic_engine_params_t *p, const opal_btl_usnic_wire_ops_t *wire);
void fx_fini(fx_t *fx);
fx_t *fx_of(opal_btl_usnic_engine_t *eng);

/* An endpoint to peer |peer_id| with the given window and ISNs */
opal_btl_usnic_endpoint_t *fx_ep_new(fx_t *fx, uint32_t peer_id, uint32_t window, opal_btl_usnic_seq_t local_isn,
                                     opal_btl_usnic_seq_t peer_isn);
void fx_ep_free(fx_t *fx, opal_btl_usnic_endpoint_t *ep);
opal_btl_usnic_endpoint_t *fx_lookup(opal_btl_usnic_engine_t *eng, uint32_t sender_id);

/* Posts */
fx_post_t *fx_last_post(fx_t *fx);
const opal_btl_usnic_hdr_t *fx_post_hdr(const fx_post_t *post);
uint32_t fx_post_seq(const fx_post_t *post);
/* Report the completion of every not yet completed post of |seg| */
void fx_complete(fx_t *fx, opal_btl_usnic_send_seg_t *seg);
void fx_complete_all(fx_t *fx);
/* Posts on |channel| (-1: any) whose header type is |type| (0: any) */
unsigned fx_count_posts(const fx_t *fx, int channel, int type);

/* Timers */
bool fx_is_armed(const fx_t *fx, const opal_btl_usnic_send_seg_t *seg);
/* Expire |seg|'s timer as the production wire's hotel eviction would */
void fx_fire_timer(fx_t *fx, opal_btl_usnic_send_seg_t *seg);
void fx_fire_all_timers(fx_t *fx);

/* Receive: hand a datagram to the engine */
void fx_recv(fx_t *fx, const void *buf, size_t len);

/* Segment builders (what a peer with id |sender| would send) */
size_t fx_build_frag(uint8_t *buf, uint32_t cookie, uint32_t sender, uint32_t seq, uint8_t tag, const void *data,
                     size_t len);
size_t fx_build_chunk(uint8_t *buf, uint32_t cookie, uint32_t sender, uint32_t seq, uint8_t tag, uint32_t frag_id,
                      uint32_t frag_size, uint32_t offset, const void *data, size_t len);
size_t fx_build_ack(uint8_t *buf, uint32_t cookie, uint32_t sender, uint32_t ack_seq);

/* The module glue, mirrored (usnic_alloc, usnic_prepare_src, usnic_send, usnic_sendi, usnic_free) */
opal_btl_usnic_send_frag_t *fx_alloc(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t size, uint32_t flags);
/* prepare_src of a contiguous user buffer: reserve bytes of PML header, then |size| bytes referenced in place */
opal_btl_usnic_send_frag_t *fx_prepare_src(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t reserve,
                                           const void *data, size_t size, uint32_t flags);
int fx_send(fx_t *fx, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag);
int fx_sendi(fx_t *fx, opal_btl_usnic_endpoint_t *ep, const void *header, size_t header_size, const void *payload,
             size_t payload_size, uint8_t tag);
void fx_free(fx_t *fx, opal_btl_usnic_send_frag_t *frag);
void fx_set_callback(opal_btl_usnic_send_frag_t *frag, fx_cb_t *cb);
void fx_pml_callback(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep, mca_btl_base_descriptor_t *des,
                     int status);

/* Free-list accounting: items currently on |list|, and items it ever allocated */
size_t fx_free_list_available(opal_free_list_t *list);
size_t fx_free_list_allocated(const opal_free_list_t *list);
/* Every fragment and segment of the engine is back on its free list */
bool fx_all_recycled(fx_t *fx);

/* Deterministic bytes: pattern of (|seed|, index) */
void fx_fill(uint8_t *buf, size_t len, uint32_t seed);
uint32_t fx_rand(uint64_t *state);

#endif /* USNIC_UNIT_FIXTURE_H */
