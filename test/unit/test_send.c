/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The send progression (btl_usnic_send.c), driven the way btl_usnic_btl.c
 * drives it: small fragments through the queue and the fast path, large
 * fragments cut into chunks, the window closing and reopening,
 * back-pressure from the provider, hard errors, PML callbacks made
 * exactly once, and the copies resend_away posts while the owner is away
 * (back-off, credits, failed peers).
 *
 * Batches (engine parameter batch_segs, the wire's max_batch), with the
 * fixture's recording wire wrapped to remember how many posts had been
 * made at each flush:
 *  - progress_endpoint_sends gives each ready endpoint up to batch_segs
 *    consecutive segments per turn, round-robin (1 with batch_segs 0 or 1):
 *    the post order over several endpoints, fragments and chunks alike,
 *    with and without credits to spare;
 *  - the wire's flush: once at the end of a progress pass that posted, of
 *    opal_btl_usnic_engine_send_now and of opal_btl_usnic_resend_away,
 *    after every post of it; never from a pass that posted nothing;
 *  - the run a timeout queues (btl_usnic_ack.c's retransmit_run, here for
 *    the batch harness): the following in-flight segments sent no later
 *    than the oldest, skipping SACKED and already queued ones, at most
 *    batch_segs in all; with batch_segs <= 1 only the oldest;
 *  - the posting layer's resends per pass: max(max_resends_per_iteration,
 *    batch_segs).
 */
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define ISN 77u
#define PEER_ISN 5000u
#define OWN MCA_BTL_DES_FLAGS_BTL_OWNERSHIP
#define ALWAYS MCA_BTL_DES_SEND_ALWAYS_CALLBACK

static opal_btl_usnic_send_frag_t *alloc_filled(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t size, uint32_t flags,
                                                uint32_t seed, fx_cb_t *cb)
{
    opal_btl_usnic_send_frag_t *frag = fx_alloc(fx, ep, size, flags);
    if (NULL == frag) {
        return NULL;
    }
    fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, size, seed);
    if (NULL != cb) {
        cb->fx = fx;
        fx_set_callback(frag, cb);
    }
    return frag;
}

static bool is_data_seg(const fx_post_t *p)
{
    return OPAL_BTL_USNIC_PKT_ACK != fx_post_hdr(p)->type;
}

/* Reassemble what the posts [from, to) carry for fragment |frag_id| and
 * compare with |want|; checks every chunk header on the way */
static bool check_chunks(fx_t *fx, size_t from, size_t to, uint32_t frag_id, const uint8_t *want, size_t size,
                         uint8_t tag)
{
    uint8_t *got = (uint8_t *) calloc(1, size);
    size_t expect_off = 0;
    unsigned n = 0;
    bool ok = true;
    for (size_t i = from; i < to; ++i) {
        fx_post_t *p = &fx->posts[i];
        const opal_btl_usnic_chunk_hdr_t *ch = (const opal_btl_usnic_chunk_hdr_t *) p->bytes;
        if (OPAL_BTL_USNIC_PKT_CHUNK != ch->hdr.type || opal_btl_usnic_host32(ch->frag_id) != frag_id) {
            continue;
        }
        size_t len = opal_btl_usnic_host16(ch->hdr.payload_len);
        size_t off = opal_btl_usnic_host32(ch->frag_offset);
        ok = CHECK_EQ(opal_btl_usnic_hdr_check(p->bytes, p->len), OPAL_BTL_USNIC_VALID) && ok;
        ok = CHECK_EQ(p->channel, OPAL_BTL_USNIC_DATA_CHANNEL) && ok;
        ok = CHECK_EQ(opal_btl_usnic_host32(ch->frag_size), size) && ok;
        ok = CHECK_EQ(off, expect_off) && ok; /* chunks leave in order, contiguous */
        ok = CHECK_EQ(ch->hdr.tag, tag) && ok;
        ok = CHECK_EQ(p->len, FX_CHUNK_HDR + len) && ok;
        size_t want_len = (size - off < FX_MAX_CHUNK_PAYLOAD) ? size - off : FX_MAX_CHUNK_PAYLOAD;
        ok = CHECK_EQ(len, want_len) && ok;
        if (off + len <= size) {
            memcpy(got + off, p->bytes + FX_CHUNK_HDR, len);
        }
        expect_off = off + len;
        ++n;
    }
    ok = CHECK_EQ(expect_off, size) && ok;
    ok = CHECK_EQ(n, (size + FX_MAX_CHUNK_PAYLOAD - 1) / FX_MAX_CHUNK_PAYLOAD) && ok;
    ok = CHECK_MEM(got, want, size) && ok;
    free(got);
    return ok;
}

/* Sequence numbers of the data posts [from, to) are ISN+first, +1, ... */
static bool check_seq_run(fx_t *fx, size_t from, size_t to, uint32_t first)
{
    bool ok = true;
    for (size_t i = from; i < to; ++i) {
        if (is_data_seg(&fx->posts[i])) {
            ok = CHECK_EQ_U(fx_post_seq(&fx->posts[i]), first++) && ok;
        }
    }
    return ok;
}

static void ack_and_complete_all(fx_t *fx, opal_btl_usnic_endpoint_t *ep)
{
    fx_complete_all(fx);
    if (0 != opal_btl_usnic_endpoint_in_flight(ep)) {
        opal_btl_usnic_handle_ack(&fx->eng, ep, ep->tx.next_seq - 1);
    }
}

/* ---------------- small fragments ---------------- */

static void test_send_small_via_queue(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, 300);
    fx_cb_t cb;
    memset(&cb, 0, sizeof(cb));
    opal_btl_usnic_send_frag_t *frag = alloc_filled(&fx, ep, 1000, OWN | ALWAYS, 1, &cb);
    uint8_t want[1000];
    fx_fill(want, sizeof(want), 1);
    CHECK_EQ(fx_send(&fx, ep, frag, 0x21), 0); /* too big for the fast path: queued, and posted at once */
    REQUIRE_EQ(fx.nposts, 1);
    CHECK(!frag->queued);
    CHECK(!ep->tx.on_rts_list);
    CHECK_EQ(cb.calls, 0); /* never from inside the PML's send call */
    CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 0);
    fx_post_t *p = &fx.posts[0];
    const opal_btl_usnic_hdr_t *h = fx_post_hdr(p);
    CHECK_EQ(p->channel, OPAL_BTL_USNIC_DATA_CHANNEL); /* 1024 bytes > tiny_mtu */
    CHECK_EQ(p->len, FX_HDR + 1000);
    CHECK_EQ(h->type, OPAL_BTL_USNIC_PKT_FRAG);
    CHECK_EQ(h->tag, 0x21);
    CHECK_EQ_U(opal_btl_usnic_host32(h->seq), ISN);
    CHECK_EQ_U(opal_btl_usnic_host64(h->sender), fx.eng.p.my_name);
    CHECK_EQ(opal_btl_usnic_hdr_check(p->bytes, p->len), OPAL_BTL_USNIC_VALID);
    CHECK_MEM(p->bytes + FX_HDR, want, 1000);
    CHECK_EQ(cb.calls, 1); /* all of it is in our buffer: the PML may go on */
    CHECK_EQ(cb.status, OPAL_SUCCESS);
    CHECK_EQ(fx.send_dones, 1); /* through the engine's send_done upcall */
    CHECK(!frag->queued);
    CHECK(!ep->tx.on_rts_list);
    CHECK_EQ_U(fx.eng.stats.num_frag_sends, 1);
    CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 0);
    ack_and_complete_all(&fx, ep);
    CHECK_EQ(cb.calls, 1);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* prepare_src style descriptors reference the user's buffer: the engine
 * copies it when the fragment is queued, so the user may reuse it after
 * the callback (and even before the post) */
static void test_send_small_copies_user_buffer_at_enqueue(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, 300);
    uint8_t user[1200], want[16 + 1200];
    fx_fill(user, sizeof(user), 5);
    opal_btl_usnic_send_frag_t *frag = fx_prepare_src(&fx, ep, 16, user, sizeof(user), OWN);
    REQUIRE(NULL != frag);
    CHECK_EQ(frag->base.des_segment_count, 2);
    memset(frag->segments[0].seg_addr.pval, 0xab, 16); /* the PML's header */
    memset(want, 0xab, 16);
    memcpy(want + 16, user, sizeof(user));
    CHECK_EQ(fx_send(&fx, ep, frag, 3), 0);
    memset(user, 0, sizeof(user)); /* the user reuses the buffer */
    opal_btl_usnic_engine_progress(&fx.eng);
    REQUIRE_EQ(fx.nposts, 1);
    CHECK_EQ(fx.posts[0].len, FX_HDR + sizeof(want));
    CHECK_MEM(fx.posts[0].bytes + FX_HDR, want, sizeof(want));
    /* and a retransmission has the same bytes */
    fx_complete_all(&fx);
    CHECK(fx_run_to_timeout(&fx));
    fx_progress(&fx);
    REQUIRE_EQ(fx.nposts, 2);
    CHECK_MEM(fx.posts[1].bytes + FX_HDR, want, sizeof(want));
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_send_fast_path(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, 300);
    fx_cb_t cb_none, cb_always, cb_pml;
    memset(&cb_none, 0, sizeof(cb_none));
    memset(&cb_always, 0, sizeof(cb_always));
    memset(&cb_pml, 0, sizeof(cb_pml));
    cb_pml.free_in_callback = true;

    /* BTL-owned, no callback wanted: done at once */
    opal_btl_usnic_send_frag_t *f1 = alloc_filled(&fx, ep, FX_MAX_TINY_PAYLOAD, OWN, 1, &cb_none);
    CHECK_EQ(fx_send(&fx, ep, f1, 1), 1);
    REQUIRE_EQ(fx.nposts, 1); /* posted inside btl_send */
    CHECK_EQ(fx.posts[0].channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    CHECK_EQ(fx.posts[0].len, FX_TINY_MTU);
    CHECK_EQ_U(fx.eng.stats.num_fast_sends, 1);
    /* BTL-owned, callback always: deferred to progress */
    opal_btl_usnic_send_frag_t *f2 = alloc_filled(&fx, ep, 10, OWN | ALWAYS, 2, &cb_always);
    CHECK_EQ(fx_send(&fx, ep, f2, 1), 0);
    CHECK_EQ(fx.nposts, 2);
    /* PML-owned: callback, and the PML frees it in there */
    opal_btl_usnic_send_frag_t *f3 = alloc_filled(&fx, ep, 0, 0, 3, &cb_pml);
    CHECK_EQ(fx_send(&fx, ep, f3, 1), 0);
    CHECK_EQ(fx.nposts, 3);
    CHECK_EQ(fx.posts[2].len, FX_HDR); /* empty fragment: header only */
    CHECK_EQ(cb_always.calls + cb_pml.calls, 0); /* never from inside btl_send */
    CHECK_EQ_U(fx.eng.stats.num_fast_sends, 3);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb_none.calls, 0);
    CHECK_EQ(cb_always.calls, 1);
    CHECK_EQ(cb_pml.calls, 1);
    for (int i = 0; i < 3; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(cb_always.calls, 1);
    CHECK_EQ(cb_pml.calls, 1);
    CHECK(check_seq_run(&fx, 0, fx.nposts, ISN));
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* The fast-path callback is still pending when the ACK and the completion
 * come in: the fragment must survive until its callback ran */
static void test_send_fast_path_ack_before_callback(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, 300);
    size_t full = fx_small_frags_available(&fx);
    fx_cb_t cb;
    memset(&cb, 0, sizeof(cb));
    opal_btl_usnic_send_frag_t *f = alloc_filled(&fx, ep, 50, OWN | ALWAYS, 2, &cb);
    CHECK_EQ(fx_send(&fx, ep, f, 1), 0);
    ack_and_complete_all(&fx, ep);
    CHECK_EQ(fx_small_frags_available(&fx), full - 1);
    CHECK_EQ(cb.calls, 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb.calls, 1);
    CHECK_EQ(fx_small_frags_available(&fx), full);
    fx_fini(&fx);
}

static void test_send_fast_path_refusals(void)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.sd_credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = 4;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 4, ISN, 300);
    fx_cb_t cb[8];
    memset(cb, 0, sizeof(cb));

    /* something queued (the provider refused the post btl_send tried): a
     * tiny fragment must wait behind it (order) */
    opal_btl_usnic_send_frag_t *big = alloc_filled(&fx, ep, 1000, OWN, 0, &cb[0]);
    fx.fail_count = 1;
    CHECK_EQ(fx_send(&fx, ep, big, 1), 0);
    CHECK_EQ(fx.nposts, 0);
    CHECK(big->queued);
    opal_btl_usnic_send_frag_t *tiny = alloc_filled(&fx, ep, 10, OWN, 1, &cb[1]);
    CHECK_EQ(fx_send(&fx, ep, tiny, 2), 0); /* queued, so a callback will come; both leave, in order */
    CHECK_EQ(cb[0].calls + cb[1].calls, 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    REQUIRE_EQ(fx.nposts, 2);
    CHECK_EQ(fx_post_hdr(&fx.posts[0])->tag, 1);
    CHECK_EQ(fx_post_hdr(&fx.posts[1])->tag, 2);
    CHECK(check_seq_run(&fx, 0, 2, ISN));
    /* the data segment before it is un-ACKed: the tiny one follows it on
     * its channel (overtaking it would only make the receiver hold it) */
    CHECK_EQ(fx.posts[1].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    CHECK_EQ(cb[0].calls + cb[1].calls, 2);
    ack_and_complete_all(&fx, ep);

    /* nothing of the data channel un-ACKed: tiny ones take the priority
     * channel again; window closed (4): the fast path refuses and the
     * fragment queues */
    for (int i = 2; i < 6; ++i) {
        CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 10, OWN, (uint32_t) i, &cb[i]), 1), 1);
        CHECK_EQ(fx_last_post(&fx)->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    }
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 4);
    opal_btl_usnic_send_frag_t *waiting = alloc_filled(&fx, ep, 10, OWN, 6, &cb[6]);
    CHECK_EQ(fx_send(&fx, ep, waiting, 1), 0);
    CHECK_EQ(fx.nposts, 6);
    CHECK(waiting->queued);
    /* the window opens, but no priority credit is left (4 posts outstanding) */
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL], 0);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 5);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.nposts, 6);
    opal_btl_usnic_send_frag_t *nocredit = alloc_filled(&fx, ep, 10, OWN, 7, &cb[7]);
    CHECK_EQ(fx_send(&fx, ep, nocredit, 1), 0);
    CHECK(nocredit->queued);
    fx_complete_all(&fx);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.nposts, 8);
    CHECK(check_seq_run(&fx, 0, fx.nposts, ISN));
    ack_and_complete_all(&fx, ep);
    for (int i = 0; i < 8; ++i) {
        CHECK_EQ(cb[i].calls, (i >= 2 && i < 6) ? 0 : 1);
    }
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_send_sendi(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, 300);
    uint8_t hdr[20], payload[1400], want[1420];
    fx_fill(hdr, sizeof(hdr), 1);
    fx_fill(payload, sizeof(payload), 2);
    memcpy(want, hdr, 20);
    memcpy(want + 20, payload, 1400);
    CHECK_EQ(fx_sendi(&fx, ep, hdr, 20, payload, 100, 5), OPAL_SUCCESS); /* fast */
    CHECK_EQ(fx.nposts, 1);
    CHECK_EQ(fx_sendi(&fx, ep, hdr, 20, payload, 1400, 6), OPAL_SUCCESS); /* queued */
    CHECK_EQ(fx.nposts, 1);
    CHECK_EQ(fx_sendi(&fx, ep, hdr, 20, payload, 1429, 7), OPAL_ERR_RESOURCE_BUSY); /* > one datagram */
    opal_btl_usnic_engine_progress(&fx.eng);
    REQUIRE_EQ(fx.nposts, 2);
    CHECK_MEM(fx.posts[0].bytes + FX_HDR, want, 120);
    CHECK_MEM(fx.posts[1].bytes + FX_HDR, want, 1420);
    CHECK_EQ(fx.posts[1].len, FX_HDR + 1420);
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A refused sendi hands back a descriptor when asked for one (Open MPI
 * 5's ob1 sends its FIN and ACK control messages this way): the caller
 * fills it and btl_sends it, and its callback comes when it leaves, as
 * the callback that retries ob1's parked messages must.  Not asked, or
 * toward a failed peer, nothing is allocated. */
static void test_send_refused_sendi_hands_back_a_descriptor(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 2, ISN, 300);
    uint8_t hdr[24];
    fx_fill(hdr, sizeof(hdr), 3);
    opal_btl_usnic_send_frag_t *instead = (opal_btl_usnic_send_frag_t *) &fx; /* must be overwritten */
    for (int i = 0; i < 2; ++i) {
        CHECK_EQ(fx_sendi_or_descriptor(&fx, ep, hdr, sizeof(hdr), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, &instead,
                                        (uint8_t) i),
                 OPAL_SUCCESS);
        CHECK(NULL == instead);
    }
    CHECK(!opal_btl_usnic_endpoint_window_open(ep));
    uint32_t flags = MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP | MCA_BTL_DES_FLAGS_SIGNAL;
    CHECK_EQ(fx_sendi_or_descriptor(&fx, ep, hdr, sizeof(hdr), flags, &instead, 2), OPAL_ERR_RESOURCE_BUSY);
    REQUIRE(NULL != instead);
    CHECK_EQ_U(instead->segments[0].seg_len, sizeof(hdr));
    CHECK_EQ_U(instead->base.des_flags, flags);
    CHECK(opal_list_is_empty(&ep->tx.queue)); /* nothing sent for the refused sendi itself */

    fx_cb_t cb;
    memset(&cb, 0, sizeof(cb));
    cb.fx = &fx;
    memcpy(instead->segments[0].seg_addr.pval, hdr, sizeof(hdr));
    fx_set_callback(instead, &cb);
    CHECK_EQ(fx_send(&fx, ep, instead, 2), 0);
    CHECK_EQ(cb.calls, 0);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 1);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb.calls, 1); /* it left: the PML hears of it */
    REQUIRE_EQ(fx.nposts, 3);
    CHECK_EQ(memcmp(fx_post_hdr(&fx.posts[2]) + 1, hdr, sizeof(hdr)), 0); /* the bytes the caller filled in */

    /* window full again: refused, and not asked for a descriptor */
    CHECK_EQ(fx_sendi(&fx, ep, hdr, sizeof(hdr), NULL, 0, 3), OPAL_SUCCESS);
    CHECK(!opal_btl_usnic_endpoint_window_open(ep));
    CHECK_EQ(fx_sendi(&fx, ep, hdr, sizeof(hdr), NULL, 0, 4), OPAL_ERR_RESOURCE_BUSY);

    /* a failed peer: refused, nothing to send it with */
    ep->failed = true;
    instead = (opal_btl_usnic_send_frag_t *) &fx;
    CHECK_EQ(fx_sendi_or_descriptor(&fx, ep, hdr, sizeof(hdr), flags, &instead, 5), OPAL_ERR_RESOURCE_BUSY);
    CHECK(NULL == instead);
    ep->failed = false;
    ack_and_complete_all(&fx, ep);
    fx_fini(&fx);
}

/* sendi sends now or not at all: with the window full it refuses (the PML
 * then sends through a request that completes when the fragment leaves),
 * so a sender ahead of its receiver cannot pile up messages in our
 * buffers; refused too while fragments wait before it, which keeps the
 * order; it takes messages again once an ACK opens the window */
static void test_send_sendi_refused_when_the_peer_cannot_take_it_now(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 4, ISN, 300);
    uint8_t hdr[14], payload[40];
    fx_fill(hdr, sizeof(hdr), 1);
    fx_fill(payload, sizeof(payload), 2);
    for (int i = 0; i < 4; ++i) {
        CHECK_EQ(fx_sendi(&fx, ep, hdr, sizeof(hdr), payload, sizeof(payload), (uint8_t) i), OPAL_SUCCESS);
    }
    CHECK_EQ(fx.nposts, 4);
    CHECK(!opal_btl_usnic_endpoint_window_open(ep));
    CHECK_EQ(fx_sendi(&fx, ep, hdr, sizeof(hdr), payload, sizeof(payload), 4), OPAL_ERR_RESOURCE_BUSY);
    CHECK_EQ_U(fx.eng.stats.num_sendi_refused, 1);
    CHECK(opal_list_is_empty(&ep->tx.queue)); /* nothing held for it */

    /* the PML's request path: queued behind the full window */
    fx_cb_t cb;
    memset(&cb, 0, sizeof(cb));
    cb.fx = &fx;
    opal_btl_usnic_send_frag_t *frag = fx_alloc(&fx, ep, sizeof(payload), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP |
                                                                             MCA_BTL_DES_SEND_ALWAYS_CALLBACK);
    REQUIRE(NULL != frag);
    memcpy(frag->segments[0].seg_addr.pval, payload, sizeof(payload));
    fx_set_callback(frag, &cb);
    CHECK_EQ(fx_send(&fx, ep, frag, 4), 0);
    CHECK_EQ(cb.calls, 0); /* it waits for the window, and so does the PML's request */

    /* an ACK opens the window, but a fragment still waits before sendi's */
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN); /* the first segment */
    CHECK(opal_btl_usnic_endpoint_window_open(ep));
    CHECK_EQ(fx_sendi(&fx, ep, hdr, sizeof(hdr), payload, sizeof(payload), 5), OPAL_ERR_RESOURCE_BUSY);
    CHECK_EQ_U(fx.eng.stats.num_sendi_refused, 2);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb.calls, 1);
    CHECK_EQ(fx.nposts, 5);
    CHECK(!opal_btl_usnic_endpoint_window_open(ep));

    /* room again and nothing queued: sendi takes it, in order */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK_EQ(fx_sendi(&fx, ep, hdr, sizeof(hdr), payload, sizeof(payload), 5), OPAL_SUCCESS);
    REQUIRE_EQ(fx.nposts, 6);
    for (int i = 0; i < 6; ++i) {
        CHECK_EQ(fx_post_hdr(&fx.posts[i])->tag, i);
    }
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* ---------------- large fragments ---------------- */

static void test_send_large_chunking(void)
{
    static const size_t sizes[] = {FX_MAX_FRAG_PAYLOAD + 1, 3 * FX_MAX_CHUNK_PAYLOAD, 3 * FX_MAX_CHUNK_PAYLOAD + 1,
                                   10000, FX_MAX_SEND};
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    uint32_t next_seq = ISN;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        size_t size = sizes[i];
        fx_cb_t cb;
        memset(&cb, 0, sizeof(cb));
        opal_btl_usnic_send_frag_t *frag = alloc_filled(&fx, ep, size, OWN | ALWAYS, (uint32_t) size, &cb);
        REQUIRE(NULL != frag);
        CHECK_EQ(frag->kind, OPAL_BTL_USNIC_FRAG_LARGE);
        uint8_t *want = (uint8_t *) malloc(size);
        fx_fill(want, size, (uint32_t) size);
        size_t before = fx.nposts;
        size_t large_free = fx_free_list_available(&fx.eng.pool.large_frags);
        CHECK_EQ(fx_send(&fx, ep, frag, (uint8_t) (0x40 + i)), 0);
        opal_btl_usnic_engine_progress(&fx.eng);
        unsigned n = (unsigned) ((size + FX_MAX_CHUNK_PAYLOAD - 1) / FX_MAX_CHUNK_PAYLOAD);
        bool ok = CHECK_EQ(fx.nposts - before, n);
        uint32_t id = opal_btl_usnic_host32(((opal_btl_usnic_chunk_hdr_t *) fx.posts[before].bytes)->frag_id);
        ok = CHECK_EQ_U(id, i + 1) && ok; /* ids 1, 2, 3 ... */
        ok = check_chunks(&fx, before, fx.nposts, id, want, size, (uint8_t) (0x40 + i)) && ok;
        ok = check_seq_run(&fx, before, fx.nposts, next_seq) && ok;
        next_seq += n;
        /* the callback once all bytes are copied into chunks; then the frag is free */
        ok = CHECK_EQ(cb.calls, 1) && ok;
        ok = CHECK_EQ(fx_free_list_available(&fx.eng.pool.large_frags), large_free + 1) && ok;
        ok = CHECK_EQ_U(fx.eng.stats.num_chunk_sends, next_seq - ISN) && ok;
        if (!ok) {
            fprintf(stderr, "  size %zu\n", size);
        }
        ack_and_complete_all(&fx, ep);
        free(want);
    }
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* btl_send of a chunked fragment posts its chunks from inside the call
 * (opal_btl_usnic_btl_send calls opal_btl_usnic_engine_send_now), but
 * calls the PML back only from the next progress pass */
static void test_send_now_defers_callback(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    fx_cb_t cb;
    memset(&cb, 0, sizeof(cb));
    size_t size = 10000;
    opal_btl_usnic_send_frag_t *frag = alloc_filled(&fx, ep, size, OWN | ALWAYS, 77, &cb);
    REQUIRE(NULL != frag);
    CHECK_EQ(fx_send(&fx, ep, frag, 0x41), 0);
    unsigned n = (unsigned) ((size + FX_MAX_CHUNK_PAYLOAD - 1) / FX_MAX_CHUNK_PAYLOAD);
    CHECK_EQ(fx.nposts, n);
    CHECK_EQ(opal_btl_usnic_engine_send_now(&fx.eng), 0); /* nothing left */
    CHECK_EQ(cb.calls, 0); /* never from inside the PML's send call */
    CHECK(!fx.eng.defer_callbacks);
    uint8_t want[10000];
    fx_fill(want, size, 77);
    uint32_t id = opal_btl_usnic_host32(((opal_btl_usnic_chunk_hdr_t *) fx.posts[0].bytes)->frag_id);
    CHECK(check_chunks(&fx, 0, fx.nposts, id, want, size, 0x41));
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb.calls, 1);
    CHECK_EQ(fx.nposts, n); /* nothing sent twice */
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* btl_send posts what it queued before it returns (the send-now of
 * btl_usnic_btl.c's usnic_send, which the fixture calls through the same
 * glue, opal_btl_usnic_btl_send): a whole fragment too big for the
 * priority channel, and the chunks of a large one.  A fixture that only
 * submitted the descriptor, as its old copy of usnic_send did, posts
 * nothing here until a progress pass. */
static void test_btl_send_posts_queued_fragments_now(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    fx_cb_t cb[2];
    memset(cb, 0, sizeof(cb));
    opal_btl_usnic_send_frag_t *whole = alloc_filled(&fx, ep, FX_MAX_TINY_PAYLOAD + 1, OWN | ALWAYS, 1, &cb[0]);
    CHECK_EQ(fx_send(&fx, ep, whole, 0x11), 0);
    REQUIRE_EQ(fx.nposts, 1);
    CHECK_EQ(fx.posts[0].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    CHECK_EQ(fx_post_hdr(&fx.posts[0])->type, OPAL_BTL_USNIC_PKT_FRAG);
    CHECK_EQ(fx_post_hdr(&fx.posts[0])->tag, 0x11);
    CHECK_EQ(cb[0].calls, 0);
    ack_and_complete_all(&fx, ep);
    fx_progress(&fx);
    CHECK_EQ(cb[0].calls, 1);
    size_t size = 5 * FX_MAX_CHUNK_PAYLOAD + 7;
    opal_btl_usnic_send_frag_t *large = alloc_filled(&fx, ep, size, OWN | ALWAYS, 2, &cb[1]);
    CHECK_EQ(fx_send(&fx, ep, large, 0x12), 0);
    CHECK_EQ(fx.nposts, 1 + 6);
    uint8_t *want = (uint8_t *) malloc(size);
    fx_fill(want, size, 2);
    uint32_t id = opal_btl_usnic_host32(((opal_btl_usnic_chunk_hdr_t *) fx.posts[1].bytes)->frag_id);
    CHECK(check_chunks(&fx, 1, fx.nposts, id, want, size, 0x12));
    CHECK_EQ(cb[1].calls, 0);
    CHECK_EQ(fx_progress(&fx), 0); /* nothing was left for progress */
    CHECK_EQ(cb[1].calls, 1);
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    free(want);
    fx_fini(&fx);
}

/* prepare_src of data that must be packed (a derived datatype): the glue
 * copies it into the descriptor (small: behind the PML's header; large:
 * into the fragment's buffer), so the user's buffer is free at once */
static void test_send_prepare_src_packed(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    static const size_t sizes[] = {500, 5000};
    const size_t reserve = 24;
    for (size_t i = 0; i < 2; ++i) {
        size_t size = sizes[i];
        uint8_t *user = (uint8_t *) malloc(size), *want = (uint8_t *) malloc(reserve + size);
        fx_fill(user, size, (uint32_t) i);
        opal_btl_usnic_send_frag_t *frag = fx_prepare_src_packed(&fx, ep, reserve, user, size, OWN);
        REQUIRE(NULL != frag);
        memset(frag->segments[0].seg_addr.pval, 0x3c, reserve);
        memset(want, 0x3c, reserve);
        memcpy(want + reserve, user, size);
        memset(user, 0, size); /* packed: the user's buffer is no longer read */
        size_t before = fx.nposts;
        CHECK_GE(fx_send(&fx, ep, frag, 5), 0); /* the small one is tiny: sent at once, no callback */
        if (reserve + size <= FX_MAX_FRAG_PAYLOAD) {
            CHECK_EQ(frag->base.des_segment_count, 1);
            REQUIRE_EQ(fx.nposts, before + 1);
            CHECK_EQ(fx.posts[before].len, FX_HDR + reserve + size);
            CHECK_MEM(fx.posts[before].bytes + FX_HDR, want, reserve + size);
        } else {
            uint32_t id = opal_btl_usnic_host32(((opal_btl_usnic_chunk_hdr_t *) fx.posts[before].bytes)->frag_id);
            CHECK(check_chunks(&fx, before, fx.nposts, id, want, reserve + size, 5));
        }
        ack_and_complete_all(&fx, ep);
        fx_progress(&fx);
        free(user);
        free(want);
    }
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A prepare_src descriptor: PML header in hdr_space + user data in place */
static void test_send_large_two_segments(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    const size_t reserve = 40, size = 20000;
    uint8_t *user = (uint8_t *) malloc(size), *want = (uint8_t *) malloc(reserve + size);
    fx_fill(user, size, 9);
    opal_btl_usnic_send_frag_t *frag = fx_prepare_src(&fx, ep, reserve, user, size, OWN);
    REQUIRE(NULL != frag);
    memset(frag->segments[0].seg_addr.pval, 0x5a, reserve);
    memset(want, 0x5a, reserve);
    memcpy(want + reserve, user, size);
    fx_cb_t cb;
    memset(&cb, 0, sizeof(cb));
    cb.fx = &fx;
    fx_set_callback(frag, &cb);
    CHECK_EQ(fx_send(&fx, ep, frag, 1), 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK(check_chunks(&fx, 0, fx.nposts, 1, want, reserve + size, 1));
    CHECK_EQ(cb.calls, 1);
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    free(user);
    free(want);
    fx_fini(&fx);
}

static void test_send_frag_ids_never_zero(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    ep->tx.next_frag_id = 0xfffffffeu;
    static const uint32_t want_ids[] = {0xfffffffeu, 0xffffffffu, 1, 2};
    for (int i = 0; i < 4; ++i) {
        /* small fragments in between take no id */
        CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 10, OWN, 0, NULL), 1), 1);
        size_t before = fx.nposts;
        CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 2000, OWN, 0, NULL), 1), 0);
        opal_btl_usnic_engine_progress(&fx.eng);
        REQUIRE_EQ(fx.nposts, before + 2);
        for (size_t k = before; k < fx.nposts; ++k) {
            const opal_btl_usnic_chunk_hdr_t *ch = (const opal_btl_usnic_chunk_hdr_t *) fx.posts[k].bytes;
            CHECK_EQ_U(opal_btl_usnic_host32(ch->frag_id), want_ids[i]);
        }
        ack_and_complete_all(&fx, ep);
    }
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* ---------------- window and back-pressure ---------------- */

static void test_send_window_closes_and_reopens(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 4, ISN, 300);
    fx_cb_t cb[10];
    memset(cb, 0, sizeof(cb));
    for (int i = 0; i < 10; ++i) {
        CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 1000, OWN, (uint32_t) i, &cb[i]), (uint8_t) i), 0);
    }
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.nposts, 4);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 4);
    CHECK(!opal_btl_usnic_endpoint_window_open(ep));
    CHECK(!ep->tx.on_rts_list);
    for (int i = 0; i < 3; ++i) {
        CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 0);
    }
    fx_complete_all(&fx);
    CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 0); /* completions do not open the window */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 1);
    CHECK(ep->tx.on_rts_list);
    CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 2);
    CHECK_EQ(fx.nposts, 6);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 5);
    CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 4);
    CHECK_EQ(fx.nposts, 10);
    CHECK(check_seq_run(&fx, 0, 10, ISN));
    for (int i = 0; i < 10; ++i) {
        CHECK_EQ(fx_post_hdr(&fx.posts[i])->tag, i); /* FIFO */
        CHECK_EQ(cb[i].calls, 1);
    }
    CHECK_EQ_U(fx.eng.stats.max_sent_window, 4);

    /* a large fragment stalls half-way through the window, and its
     * callback waits for its last chunk */
    fx_cb_t big_cb;
    memset(&big_cb, 0, sizeof(big_cb));
    ack_and_complete_all(&fx, ep);
    size_t before = fx.nposts;
    CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 10000, OWN, 1, &big_cb), 1), 0); /* 8 chunks */
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.nposts - before, 4);
    CHECK_EQ(big_cb.calls, 0);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ep->tx.next_seq - 1);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.nposts - before, (10000 + FX_MAX_CHUNK_PAYLOAD - 1) / FX_MAX_CHUNK_PAYLOAD);
    CHECK_EQ(big_cb.calls, 1);
    uint8_t want[10000];
    fx_fill(want, sizeof(want), 1);
    CHECK(check_chunks(&fx, before, fx.nposts, 1, want, sizeof(want), 1));
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* OPAL_ERR_TEMP_OUT_OF_RESOURCE from the wire: nothing lost, no sequence
 * number consumed, no callback early, retried on the next pass */
static void test_send_backpressure(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    size_t chunks_full = fx_free_list_available(&fx.eng.pool.chunk_segs);
    fx_cb_t cb_small;
    memset(&cb_small, 0, sizeof(cb_small));
    fx.fail_count = 1; /* refuses the post btl_send tries before returning */
    CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 1000, OWN, 3, &cb_small), 1), 0);
    CHECK_EQ(fx.nposts, 0);
    CHECK_EQ_U(ep->tx.next_seq, ISN);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 0);
    CHECK_EQ(cb_small.calls, 0);
    CHECK(ep->tx.on_rts_list); /* still ready to send */
    CHECK_EQ_U(fx.eng.stats.num_send_eagain, 1);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1024);
    CHECK_EQ(fx_hotel_guests(&fx), 0);
    CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 1);
    CHECK_EQ_U(fx_post_seq(&fx.posts[0]), ISN);
    CHECK_EQ(cb_small.calls, 1);

    /* large: the provider refuses the 3rd chunk */
    ack_and_complete_all(&fx, ep);
    fx_cb_t cb_mid;
    memset(&cb_mid, 0, sizeof(cb_mid));
    size_t before = fx.nposts;
    uint32_t seq0 = ep->tx.next_seq;
    opal_btl_usnic_send_frag_t *big = alloc_filled(&fx, ep, 10000, OWN, 5, &cb_mid);
    fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL] = 2; /* two chunks per pass */
    CHECK_EQ(fx_send(&fx, ep, big, 3), 0);
    CHECK_EQ(fx.nposts - before, 2); /* btl_send posted what the credits allow */
    fx.fail_count = 1;
    fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL] += 2;
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.nposts - before, 2);
    CHECK_EQ_U(ep->tx.next_seq, seq0 + 2);
    CHECK_EQ(big->offset, 2 * FX_MAX_CHUNK_PAYLOAD); /* not advanced by the refused chunk */
    CHECK_EQ(fx_free_list_available(&fx.eng.pool.chunk_segs), chunks_full - 2); /* refused chunk returned */
    CHECK_EQ(cb_mid.calls, 0);
    fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL] = 1024 - 2;
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.nposts - before, (10000 + FX_MAX_CHUNK_PAYLOAD - 1) / FX_MAX_CHUNK_PAYLOAD);
    CHECK_EQ(cb_mid.calls, 1);
    uint8_t want[10000];
    fx_fill(want, sizeof(want), 5);
    CHECK(check_chunks(&fx, before, fx.nposts, opal_btl_usnic_host32(((opal_btl_usnic_chunk_hdr_t *) fx.posts[before].bytes)->frag_id),
                       want, sizeof(want), 3));
    CHECK(check_seq_run(&fx, before, fx.nposts, seq0));
    ack_and_complete_all(&fx, ep);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1024);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Few provider send slots: one post per completion */
static void test_send_credit_limited(void)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = 1;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    for (int i = 0; i < 5; ++i) {
        CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 1000, OWN, (uint32_t) i, NULL), 1), 0);
    }
    CHECK_EQ(fx.nposts, 1); /* btl_send posted the first, with the one credit */
    for (int i = 1; i < 5; ++i) {
        CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 0);
        fx_complete_all(&fx);
        CHECK_EQ(opal_btl_usnic_engine_progress(&fx.eng), 1);
    }
    fx_complete_all(&fx);
    CHECK_EQ(fx.nposts, 5);
    CHECK(check_seq_run(&fx, 0, 5, ISN));
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A hard post error fails the peer: every queued fragment gets exactly one
 * callback with OPAL_ERR_UNREACH, later sends fail at once, nothing leaks */
static void test_send_hard_error_fails_peer(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    fx_cb_t cb[5];
    memset(cb, 0, sizeof(cb));
    /* one in flight already */
    CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 1000, OWN, 0, &cb[0]), 1), 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb[0].calls, 1);
    CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 1000, OWN, 1, &cb[1]), 1), 0);
    CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 9000, OWN, 2, &cb[2]), 1), 0);
    cb[3].free_in_callback = true;
    CHECK_EQ(fx_send(&fx, ep, alloc_filled(&fx, ep, 1000, 0, 3, &cb[3]), 1), 0);
    fx.fail_rc = OPAL_ERR_UNREACH;
    fx.fail_count = 1;
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.peer_failed_calls, 1);
    CHECK(ep->failed);
    for (int i = 1; i < 4; ++i) {
        CHECK_EQ(cb[i].calls, 1);
        CHECK_EQ(cb[i].status, OPAL_ERR_UNREACH);
    }
    CHECK_EQ(cb[0].status, OPAL_SUCCESS);
    CHECK(opal_btl_usnic_endpoint_drained(ep)); /* in-flight data forgotten */
    opal_btl_usnic_send_frag_t *refused = alloc_filled(&fx, ep, 10, OWN, 4, &cb[4]);
    CHECK_EQ(fx_send(&fx, ep, refused, 1), OPAL_ERR_UNREACH);
    for (int i = 0; i < 5; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(fx.nposts, 1);
    CHECK_EQ(cb[4].calls, 0); /* a refused btl_send makes no callback ... */
    fx_free(&fx, refused);    /* ... and the descriptor is still the PML's to free */
    for (int i = 0; i < 4; ++i) {
        CHECK_EQ(cb[i].calls, 1);
    }
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1024);
    fx_fini(&fx);
}

/* ---------------- different MTUs ---------------- */

/* Hand every not yet shuttled post of |from| to |to| as a received datagram */
static void shuttle(fx_t *from, size_t *cursor, fx_t *to)
{
    for (; *cursor < from->nposts; ++*cursor) {
        fx_recv(to, from->posts[*cursor].bytes, from->posts[*cursor].len);
    }
}

/* Largest post of |fx| on |channel| since |from| */
static uint32_t largest_post(const fx_t *fx, size_t from, int channel)
{
    uint32_t m = 0;
    for (size_t i = from; i < fx->nposts; ++i) {
        if (fx->posts[i].channel == channel && fx->posts[i].len > m) {
            m = fx->posts[i].len;
        }
    }
    return m;
}

/*
 * Two engines with different MTUs (A: 9000 / tiny 1500, B: 1472 / tiny 768)
 * interoperate once each endpoint is limited to the peer's MTUs, as the
 * module does from the modex (opal_btl_usnic_endpoint_limit_mtu): A cuts
 * its chunks, whole fragments and tiny fragments for B's buffers, B's
 * receiver accepts them (its alignment check uses the same limit), and the
 * other way round nothing changes.  Without the limit, B refuses A's
 * chunks (cut at A's size) as bad chunks.
 */
static void test_send_interop_different_mtus(void)
{
    for (int limited = 1; limited >= 0; --limited) {
        opal_btl_usnic_engine_params_t pa, pb;
        fx_params_default(&pa);
        fx_params_default(&pb);
        pa.my_name = 0;
        pa.mtu = 9000;
        pa.tiny_mtu = 1500;
        pb.my_name = 1;
        fx_t a, b;
        fx_init(&a, &pa);
        fx_init(&b, &pb);
        opal_btl_usnic_endpoint_t *ab = fx_ep_new(&a, 1, 64, ISN, 500); /* A's endpoint for B */
        opal_btl_usnic_endpoint_t *ba = fx_ep_new(&b, 0, 64, 500, ISN); /* B's endpoint for A */
        if (limited) {
            opal_btl_usnic_endpoint_limit_mtu(ab, pb.mtu, pb.tiny_mtu);
            opal_btl_usnic_endpoint_limit_mtu(ba, pa.mtu, pa.tiny_mtu);
        }
        if (limited) {
            /* the module glue sizes descriptors by the endpoint's limits */
            static uint8_t data[2000];
            opal_btl_usnic_send_frag_t *f;
            f = fx_alloc(&a, NULL, 1460, OWN); /* no endpoint: the engine's own limit (8964) */
            CHECK_EQ(f->kind, OPAL_BTL_USNIC_FRAG_SMALL);
            fx_free(&a, f);
            f = fx_alloc(&a, ab, 1460, OWN);
            CHECK_EQ(f->kind, OPAL_BTL_USNIC_FRAG_LARGE);
            fx_free(&a, f);
            f = fx_prepare_src(&a, ab, 8, data, FX_MAX_FRAG_PAYLOAD - 8, OWN);
            CHECK_EQ(f->kind, OPAL_BTL_USNIC_FRAG_SMALL);
            fx_free(&a, f);
            f = fx_prepare_src(&a, ab, 8, data, FX_MAX_FRAG_PAYLOAD - 7, OWN);
            CHECK_EQ(f->kind, OPAL_BTL_USNIC_FRAG_LARGE);
            fx_free(&a, f);
            CHECK_EQ(fx_sendi(&a, ab, data, 8, data, FX_MAX_FRAG_PAYLOAD - 7, 1), OPAL_ERR_RESOURCE_BUSY);
            CHECK_EQ(a.nposts, 0);
        }
        /* A -> B: every kind of fragment */
        static const size_t sizes[] = {10,   700,  1000, 1400,  FX_MAX_FRAG_PAYLOAD, FX_MAX_FRAG_PAYLOAD + 1,
                                       1460, 5000, 9000, 20000, 65536};
        const size_t n = sizeof(sizes) / sizeof(sizes[0]);
        size_t cursor = 0, cb = 0;
        for (size_t i = 0; i < n; ++i) {
            opal_btl_usnic_send_frag_t *frag = alloc_filled(&a, ab, sizes[i], OWN, (uint32_t) i, NULL);
            REQUIRE(NULL != frag);
            (void) fx_send(&a, ab, frag, (uint8_t) i);
            for (int k = 0; k < 12; ++k) { /* B's ACKs reopen A's window */
                fx_progress(&a);
                shuttle(&a, &cursor, &b);
                fx_progress(&b);
                shuttle(&b, &cb, &a);
            }
        }
        if (limited) {
            /* what A posted fits B's buffers */
            CHECK_LE_U(largest_post(&a, 0, OPAL_BTL_USNIC_DATA_CHANNEL), pb.mtu);
            CHECK_LE_U(largest_post(&a, 0, OPAL_BTL_USNIC_PRIORITY_CHANNEL), pb.tiny_mtu);
            CHECK_EQ(ab->max_chunk_payload, ba->max_chunk_payload); /* both cut alike */
            REQUIRE_EQ(b.ndels, n);
            for (size_t i = 0; i < n; ++i) {
                uint8_t *want = (uint8_t *) malloc(sizes[i]);
                fx_fill(want, sizes[i], (uint32_t) i);
                CHECK_EQ(b.dels[i].tag, i);
                CHECK_EQ(b.dels[i].len, sizes[i]);
                CHECK_MEM(b.dels[i].data, want, sizes[i]);
                free(want);
            }
            CHECK_EQ_U(b.eng.stats.num_invalid_recvs, 0);
            /* FX_MAX_FRAG_PAYLOAD + 1 and 1460 bytes no longer fit one datagram toward B: chunked */
            CHECK_EQ_U(a.eng.stats.num_frag_sends, 5);
            /* B -> A: B's own sizes, accepted by A's limited endpoint */
            size_t a_dels = a.ndels;
            for (size_t i = 0; i < n; ++i) {
                opal_btl_usnic_send_frag_t *frag = alloc_filled(&b, ba, sizes[i], OWN, 100 + (uint32_t) i, NULL);
                (void) fx_send(&b, ba, frag, (uint8_t) i);
                for (int k = 0; k < 12; ++k) {
                    fx_progress(&b);
                    shuttle(&b, &cb, &a);
                    fx_progress(&a);
                    shuttle(&a, &cursor, &b);
                }
            }
            CHECK_EQ(a_dels, 0);
            CHECK_EQ(a.ndels, n);
            CHECK_EQ_U(a.eng.stats.num_invalid_recvs, 0);
            /* ACKs both ways release everything */
            for (int k = 0; k < 8; ++k) {
                fx_progress(&a);
                fx_progress(&b);
                shuttle(&a, &cursor, &b);
                shuttle(&b, &cb, &a);
                fx_complete_all(&a);
                fx_complete_all(&b);
            }
            CHECK(opal_btl_usnic_endpoint_drained(ab));
            CHECK(opal_btl_usnic_endpoint_drained(ba));
            CHECK(fx_all_recycled(&a));
            CHECK(fx_all_recycled(&b));
        } else {
            /* A cut its chunks for a 9000-byte MTU: B, which cuts for 1472,
             * refuses every one of them (and a real B could not even
             * receive them) */
            CHECK_GT(largest_post(&a, 0, OPAL_BTL_USNIC_DATA_CHANNEL), pb.mtu);
            CHECK_GT(b.eng.stats.num_drop_bad_chunk, 0);
            CHECK_EQ_U(b.eng.stats.num_chunk_recvs, 0);
            /* teardown: A's refused chunks are never ACKed */
            opal_btl_usnic_endpoint_flush(ab, OPAL_ERR_UNREACH);
        }
        fx_complete_all(&a);
        fx_complete_all(&b);
        fx_fini(&a);
        fx_fini(&b);
    }
}

/* The BTL base's AM RDMA emulation (Open MPI 5) sends one descriptor
 * again and again, refilled after each callback: every send starts at
 * offset 0 under a new fragment id (the second send once began at the
 * old end, as one empty chunk every receiver refused: a stalled peer) */
static void test_send_large_descriptor_sent_again(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 300);
    fx_cb_t cb;
    memset(&cb, 0, sizeof(cb));
    const size_t first = 3 * FX_MAX_CHUNK_PAYLOAD + 5, second = FX_MAX_FRAG_PAYLOAD + 7;
    opal_btl_usnic_send_frag_t *frag = alloc_filled(&fx, ep, first, ALWAYS, 11, &cb);
    REQUIRE(NULL != frag);
    CHECK_EQ(fx_send(&fx, ep, frag, 0x41), 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    REQUIRE_EQ(cb.calls, 1);
    size_t before = fx.nposts;
    fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, second, 12);
    frag->segments[0].seg_len = second;
    CHECK_EQ(fx_send(&fx, ep, frag, 0x42), 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb.calls, 2);
    uint8_t *want = (uint8_t *) malloc(second);
    fx_fill(want, second, 12);
    REQUIRE(fx.nposts > before);
    uint32_t id = opal_btl_usnic_host32(((opal_btl_usnic_chunk_hdr_t *) fx.posts[before].bytes)->frag_id);
    CHECK_EQ_U(id, 2);
    CHECK(check_chunks(&fx, before, fx.nposts, id, want, second, 0x42));
    free(want);
    fx_free(&fx, frag);
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A small descriptor sent again while its own segment is un-ACKed (and
 * may be retransmitted): the new data leaves in a copy, the old segment
 * keeps its sequence number and bytes, and both are released by ACKs */
static void test_send_small_descriptor_sent_again_before_ack(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, 300);
    fx_cb_t cb;
    memset(&cb, 0, sizeof(cb));
    opal_btl_usnic_send_frag_t *frag = alloc_filled(&fx, ep, 1000, ALWAYS, 21, &cb);
    REQUIRE(NULL != frag);
    CHECK_EQ(fx_send(&fx, ep, frag, 0x21), 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    REQUIRE_EQ(fx.nposts, 1);
    REQUIRE_EQ(cb.calls, 1);
    fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, 1000, 22);
    CHECK_EQ(fx_send(&fx, ep, frag, 0x22), 0);
    CHECK_EQ_U(fx.eng.stats.num_resubmit_copies, 1);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb.calls, 2);
    REQUIRE_EQ(fx.nposts, 2);
    uint8_t want[1000];
    fx_fill(want, sizeof(want), 22);
    const opal_btl_usnic_hdr_t *h = fx_post_hdr(&fx.posts[1]);
    CHECK_EQ(h->tag, 0x22);
    CHECK_EQ_U(opal_btl_usnic_host32(h->seq), ISN + 1);
    CHECK_MEM(fx.posts[1].bytes + FX_HDR, want, 1000);
    /* the first send's segment still holds the first data and sequence */
    CHECK_EQ_U(frag->seg.seq, ISN);
    fx_free(&fx, frag);
    CHECK(!fx_all_recycled(&fx)); /* un-ACKed: not yet */
    ack_and_complete_all(&fx, ep);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Overdue un-ACKed segments get copies (same sequence number, RETX, fresh
 * nonce), once per back-off interval; nothing else changes: the originals
 * stay un-ACKed and armed, no peer is declared dead, and the copies are
 * recycled when the provider releases them */
/* A released endpoint's un-ACKed segments go once more, timers or not,
 * except those the peer reported held; no upcall; nothing to a failed peer */
static void test_parting_resend_copies_the_tail(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[3];
    FX_SEND_TINY(&fx, ep, 3, segs);
    fx_complete_all(&fx);
    segs[1]->flags |= OPAL_BTL_USNIC_SEG_FLAG_SACKED;
    unsigned calls = fx.peer_failed_calls;
    CHECK_EQ(opal_btl_usnic_parting_resend(&fx.eng, ep), 2); /* at once: no timer had to pass */
    CHECK_EQ(fx.nposts, 5);
    CHECK_EQ_U(opal_btl_usnic_host32(fx_post_hdr(&fx.posts[3])->seq), ISN);
    CHECK_EQ_U(opal_btl_usnic_host32(fx_post_hdr(&fx.posts[4])->seq), ISN + 2);
    CHECK(fx_post_hdr(&fx.posts[3])->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX);
    CHECK_EQ_U(fx.eng.stats.num_parting_resends, 2);
    CHECK_EQ_U(fx.eng.stats.num_away_resends, 0);
    CHECK_EQ(fx.peer_failed_calls, calls);
    ep->failed = true;
    CHECK_EQ(opal_btl_usnic_parting_resend(&fx.eng, ep), 0);
    ep->failed = false;
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(opal_btl_usnic_parting_resend(&fx.eng, ep), 0); /* nothing un-ACKed */
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_away_resends_copies_with_backoff(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[3];
    FX_SEND_TINY(&fx, ep, 3, segs);
    fx_complete_all(&fx);
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 0); /* not overdue yet */
    fx_set_time(&fx, fx.now + FX_RTO_INITIAL);
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 3);
    CHECK_EQ(fx.nposts, 6);
    for (unsigned i = 0; i < 3; ++i) {
        const opal_btl_usnic_hdr_t *copy = fx_post_hdr(&fx.posts[3 + i]);
        const opal_btl_usnic_hdr_t *orig = fx_post_hdr(&fx.posts[i]);
        CHECK_EQ_U(opal_btl_usnic_host32(copy->seq), ISN + i);
        CHECK(copy->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX);
        CHECK(!(copy->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT));
        CHECK(opal_btl_usnic_host64(copy->nonce) > opal_btl_usnic_host64(orig->nonce));
        CHECK_EQ(fx.posts[3 + i].len, fx.posts[i].len);
        CHECK_MEM(fx.posts[3 + i].bytes + sizeof(opal_btl_usnic_hdr_t), fx.posts[i].bytes + sizeof(opal_btl_usnic_hdr_t),
                  fx.posts[i].len - sizeof(opal_btl_usnic_hdr_t));
        CHECK(fx_in_hotel(segs[i]));
    }
    CHECK_EQ_U(fx.eng.stats.num_away_resends, 3);
    CHECK_EQ_U(fx.eng.stats.num_resends, 0);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 3);
    CHECK_EQ(fx.peer_failed_calls, 0);
    /* back-off: nothing before rto_max has passed, then again, then after twice that */
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 0);
    fx_set_time(&fx, fx.now + FX_RTO_MAX - 1);
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 0);
    fx_set_time(&fx, fx.now + 1);
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 3);
    fx_set_time(&fx, fx.now + FX_RTO_MAX);
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 0);
    fx_set_time(&fx, fx.now + FX_RTO_MAX);
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 3);
    /* ... up to a second at most */
    for (int round = 0; round < 8; ++round) {
        fx_set_time(&fx, fx.now + OPAL_BTL_USNIC_AWAY_INTERVAL_MAX);
        CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 3);
        fx_complete_all(&fx);
    }
    CHECK_EQ_U(fx.eng.away_interval, OPAL_BTL_USNIC_AWAY_INTERVAL_MAX);
    /* the owner is back: the back-off starts afresh */
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 0);
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 0); /* nothing un-ACKed */
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Without send credits it waits; a peer that failed gets nothing */
static void test_away_respects_credits_and_failed_peers(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    opal_btl_usnic_endpoint_t *ep2 = fx_ep_new(&fx, PEER + 1, 8, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[2];
    FX_SEND_TINY(&fx, ep, 2, segs);
    FX_SEND_TINY(&fx, ep2, 2, segs);
    fx_complete_all(&fx);
    fx_set_time(&fx, fx.now + FX_RTO_INITIAL);
    int saved = fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL];
    fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL] = 1;
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 1);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 0);
    fx_complete_all(&fx);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1); /* the copy's credit came back */
    fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL] = saved;
    ep->failed = true;
    fx_set_time(&fx, fx.now + FX_RTO_MAX);
    CHECK_EQ(opal_btl_usnic_resend_away(&fx.eng), 2); /* ep2's only */
    CHECK_PTR_EQ(fx.posts[fx.nposts - 1].ep, ep2);
    CHECK_PTR_EQ(fx.posts[fx.nposts - 2].ep, ep2);
    ep->failed = false;
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 1);
    opal_btl_usnic_handle_ack(&fx.eng, ep2, ISN + 1);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

#define Q_ISN 1000u
#define DATA_SIZE 1000 /* one FRAG, too big for the priority channel: queued, posted by progress */

/* ---------------- a fixture that remembers its flushes ---------------- */

typedef struct {
    fx_t fx;                 /* first: the wire maps the engine back to it */
    size_t flush_at[256];    /* fx.nposts at each flush */
    unsigned nflush;
} qx_t;

static opal_btl_usnic_wire_ops_t qx_wire;

static void qx_flush(opal_btl_usnic_engine_t *eng)
{
    qx_t *q = (qx_t *) fx_of(eng);
    fx_wire_ops()->flush(eng); /* counts fx.flushes */
    if (q->nflush < 256) {
        q->flush_at[q->nflush] = q->fx.nposts;
    }
    ++q->nflush;
}

static void qx_init(qx_t *q, uint32_t batch_segs, uint32_t max_resends, uint32_t data_credits)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.batch_segs = batch_segs;
    if (max_resends) {
        p.max_resends_per_iteration = max_resends;
    }
    if (data_credits) {
        p.sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = data_credits;
    }
    qx_wire = *fx_wire_ops();
    qx_wire.flush = qx_flush;
    memset(q, 0, sizeof(*q));
    fx_init_with_wire(&q->fx, &p, &qx_wire, NULL);
}

/* Queue |n| fragments of |size| bytes to |ep| in the engine's queue alone
 * (opal_btl_usnic_frag_submit): btl_send (fx_send) would post them at
 * once while nothing is in flight, and these tests are about what the send
 * progression and send_now do with a queue */
static void queue_frags(fx_t *fx, opal_btl_usnic_endpoint_t *ep, unsigned n, size_t size)
{
    for (unsigned i = 0; i < n; ++i) {
        opal_btl_usnic_send_frag_t *frag = fx_alloc(fx, ep, size, OWN);
        if (NULL == frag) {
            FAILF("no fragment");
            return;
        }
        fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, size, i);
        opal_btl_usnic_engine_set_time(&fx->eng, fx->now);
        if (0 != opal_btl_usnic_frag_submit(ep, frag, 7)) {
            FAILF("fragment %u not queued", i);
        }
    }
}

/* The expected post order of one round-robin pass: endpoints 0..n-1 got
 * ready in that order, each with segs[i] segments; each turn posts up to
 * |quantum|, while |*credits| lasts; an endpoint with segments left goes
 * to the back of the list.  Writes endpoint indices to |out|; returns how
 * many.  |segs| and |*credits| are consumed (call again for the next pass). */
static unsigned rr_pass(unsigned n, unsigned *segs, int *list, unsigned *nlist, unsigned quantum, unsigned *credits,
                        int *out)
{
    unsigned k = 0;
    while (*nlist > 0 && *credits > 0) {
        int e = list[0];
        memmove(list, list + 1, (*nlist - 1) * sizeof(*list));
        --*nlist;
        for (unsigned t = 0; t < quantum && segs[e] > 0 && *credits > 0; ++t) {
            out[k++] = e;
            --segs[e];
            --*credits;
        }
        if (segs[e] > 0) {
            list[(*nlist)++] = e;
        }
    }
    (void) n;
    return k;
}

static void print_order(const char *what, const int *order, unsigned n)
{
    fprintf(stderr, "  %s:", what);
    for (unsigned i = 0; i < n; ++i) {
        fprintf(stderr, " %c", 'A' + order[i]);
    }
    fprintf(stderr, "\n");
}

/* ---------------- the quantum ---------------- */

/* One endpoint: one progress pass posts all that its window allows, in
 * sequence order, and flushes once, after the last post */
static void test_quantum_one_endpoint(void)
{
    static const uint32_t batches[] = {0, 1, 8, 44};
    for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); ++b) {
        qx_t q;
        qx_init(&q, batches[b], 0, 0);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
        queue_frags(&q.fx, ep, 20, DATA_SIZE);
        CHECK_EQ(q.fx.nposts, 0);
        CHECK_EQ(q.nflush, 0);
        CHECK_EQ(fx_progress(&q.fx), 20);
        REQUIRE_EQ(q.fx.nposts, 20);
        for (unsigned i = 0; i < 20; ++i) {
            CHECK_EQ_U(fx_post_seq(&q.fx.posts[i]), Q_ISN + i);
            CHECK_EQ(q.fx.posts[i].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
        }
        CHECK_EQ(q.nflush, 1);
        CHECK_EQ(q.flush_at[0], 20);
        CHECK_EQ(q.fx.flushes, 1);
        fx_complete_all(&q.fx);
        opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 19);
        CHECK(fx_all_recycled(&q.fx));
        fx_fini(&q.fx);
    }
    /* the window ends a turn: 16 of 20, the rest after the ACK */
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 16, Q_ISN, PEER_ISN);
    queue_frags(&q.fx, ep, 20, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 16);
    CHECK_EQ(q.nflush, 1);
    CHECK_EQ(fx_progress(&q.fx), 0); /* nothing to post: no flush */
    CHECK_EQ(q.nflush, 1);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 15);
    CHECK_EQ(fx_progress(&q.fx), 4);
    CHECK_EQ(q.nflush, 2);
    CHECK_EQ(q.flush_at[1], 20);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 19);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* Several endpoints: turns of up to batch_segs segments each, round-robin
 * in the order the endpoints got ready */
static void test_quantum_round_robin_table(void)
{
    static const uint32_t batches[] = {0, 1, 2, 3, 5, 8, 16, 44};
    static const struct {
        const char *name;
        unsigned n;
        unsigned segs[3];
    } sets[] = {
        {"A 16, B 16", 2, {16, 16, 0}},
        {"A 20, B 5", 2, {20, 5, 0}},
        {"A 1, B 16", 2, {1, 16, 0}},
        {"A 10, B 10, C 10", 3, {10, 10, 10}},
        {"A 3, B 30, C 7", 3, {3, 30, 7}},
    };
    for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); ++b) {
        for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); ++s) {
            qx_t q;
            qx_init(&q, batches[b], 0, 0);
            opal_btl_usnic_endpoint_t *eps[3];
            for (unsigned e = 0; e < sets[s].n; ++e) {
                eps[e] = fx_ep_new(&q.fx, PEER + e, 64, Q_ISN + 100 * e, PEER_ISN);
            }
            for (unsigned e = 0; e < sets[s].n; ++e) {
                queue_frags(&q.fx, eps[e], sets[s].segs[e], DATA_SIZE);
            }
            unsigned segs[3] = {sets[s].segs[0], sets[s].segs[1], sets[s].segs[2]};
            int list[3] = {0, 1, 2}, want[128], got[128];
            unsigned nlist = sets[s].n, credits = 1024;
            unsigned quantum = batches[b] > 1 ? batches[b] : 1;
            unsigned nwant = rr_pass(sets[s].n, segs, list, &nlist, quantum, &credits, want);
            int posted = fx_progress(&q.fx);
            bool ok = CHECK_EQ(posted, (int) nwant);
            ok = CHECK_EQ(q.fx.nposts, nwant) && ok;
            unsigned ngot = q.fx.nposts < 128 ? (unsigned) q.fx.nposts : 128;
            uint32_t next[3] = {Q_ISN, Q_ISN + 100, Q_ISN + 200};
            for (unsigned i = 0; i < ngot; ++i) {
                got[i] = -1;
                for (unsigned e = 0; e < sets[s].n; ++e) {
                    if (q.fx.posts[i].ep == eps[e]) {
                        got[i] = (int) e;
                        /* and each endpoint's own segments in sequence order */
                        ok = CHECK_EQ_U(fx_post_seq(&q.fx.posts[i]), next[e]++) && ok;
                    }
                }
                ok = CHECK_EQ(got[i], want[i]) && ok;
            }
            ok = CHECK_EQ(q.nflush, 1) && ok;
            ok = CHECK_EQ(q.flush_at[0], nwant) && ok;
            if (!ok) {
                fprintf(stderr, "  batch_segs %u, %s\n", batches[b], sets[s].name);
                print_order("expected", want, nwant);
                print_order("posted  ", got, ngot);
            }
            fx_complete_all(&q.fx);
            for (unsigned e = 0; e < sets[s].n; ++e) {
                opal_btl_usnic_handle_ack(&q.fx.eng, eps[e], Q_ISN + 100 * e + sets[s].segs[e] - 1);
            }
            CHECK(fx_all_recycled(&q.fx));
            fx_fini(&q.fx);
        }
    }
}

/* The quantum counts segments: a large fragment's chunks are cut by it
 * (A: one fragment of 11 chunks; B: 16 small ones) */
static void test_quantum_counts_chunks(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *a = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
    opal_btl_usnic_endpoint_t *b = fx_ep_new(&q.fx, PEER + 1, 64, Q_ISN + 100, PEER_ISN);
    const size_t big = 10 * FX_MAX_CHUNK_PAYLOAD + 100; /* 11 chunks */
    queue_frags(&q.fx, a, 1, big);
    queue_frags(&q.fx, b, 16, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 27);
    REQUIRE_EQ(q.fx.nposts, 27);
    static const struct {
        unsigned from, to;
        int who;
    } turns[] = {{0, 8, 0}, {8, 16, 1}, {16, 19, 0}, {19, 27, 1}};
    for (size_t t = 0; t < 4; ++t) {
        for (unsigned i = turns[t].from; i < turns[t].to; ++i) {
            const fx_post_t *p = &q.fx.posts[i];
            if (!CHECK_PTR_EQ(p->ep, turns[t].who ? b : a)) {
                fprintf(stderr, "  post %u\n", i);
            }
            CHECK_EQ(fx_post_hdr(p)->type, turns[t].who ? OPAL_BTL_USNIC_PKT_FRAG : OPAL_BTL_USNIC_PKT_CHUNK);
        }
    }
    CHECK_EQ(q.nflush, 1);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, a, Q_ISN + 10);
    opal_btl_usnic_handle_ack(&q.fx.eng, b, Q_ISN + 115);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* Data credits end a pass (and may end a turn early); the next pass goes
 * on round-robin where this one stopped */
static void test_quantum_credit_limited(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 12);
    opal_btl_usnic_endpoint_t *eps[2];
    eps[0] = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
    eps[1] = fx_ep_new(&q.fx, PEER + 1, 64, Q_ISN + 100, PEER_ISN);
    queue_frags(&q.fx, eps[0], 16, DATA_SIZE);
    queue_frags(&q.fx, eps[1], 16, DATA_SIZE);
    unsigned segs[2] = {16, 16};
    int list[2] = {0, 1};
    unsigned nlist = 2;
    size_t done = 0;
    for (int pass = 0; pass < 4; ++pass) {
        unsigned credits = (unsigned) q.fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL];
        int want[32];
        unsigned nwant = rr_pass(2, segs, list, &nlist, 8, &credits, want);
        int posted = fx_progress(&q.fx);
        bool ok = CHECK_EQ(posted, (int) nwant);
        ok = CHECK_LE(posted, 12) && ok;
        for (unsigned i = 0; ok && i < nwant; ++i) {
            ok = CHECK_PTR_EQ(q.fx.posts[done + i].ep, eps[want[i]]);
        }
        if (!ok) {
            fprintf(stderr, "  pass %d\n", pass);
            print_order("expected", want, nwant);
        }
        done = q.fx.nposts;
        fx_complete_all(&q.fx); /* the credits come back */
    }
    CHECK_EQ(q.fx.nposts, 32);
    CHECK_EQ(q.nflush, 3); /* passes that posted: 12, 12, 8; the fourth posted nothing */
    opal_btl_usnic_handle_ack(&q.fx.eng, eps[0], Q_ISN + 15);
    opal_btl_usnic_handle_ack(&q.fx.eng, eps[1], Q_ISN + 115);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* ---------------- flushes ---------------- */

static void test_flush_points(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
    /* progress with nothing to do: no flush */
    for (int i = 0; i < 5; ++i) {
        CHECK_EQ(fx_progress(&q.fx), 0);
    }
    CHECK_EQ(q.nflush, 0);
    /* the PML's send of a queued fragment leaves at once (send_now),
     * flushed after its posts */
    queue_frags(&q.fx, ep, 3, DATA_SIZE);
    CHECK_EQ(q.fx.nposts, 0); /* only submitted (btl_send would call send_now too) */
    CHECK_EQ(opal_btl_usnic_engine_send_now(&q.fx.eng), 3);
    CHECK_EQ(q.nflush, 1);
    CHECK_EQ(q.flush_at[0], 3);
    /* with data in flight send_now leaves it to progress: no post, no flush */
    queue_frags(&q.fx, ep, 2, DATA_SIZE);
    CHECK_EQ(opal_btl_usnic_engine_send_now(&q.fx.eng), 0);
    CHECK_EQ(q.nflush, 1);
    CHECK_EQ(fx_progress(&q.fx), 2);
    CHECK_EQ(q.nflush, 2);
    CHECK_EQ(q.flush_at[1], 5);
    /* a tiny fragment behind un-ACKed data follows it on the data
     * channel, flushed at once (the fast path) */
    FX_SEND_TINY(&q.fx, ep, 1, NULL);
    CHECK_EQ(q.fx.nposts, 6);
    CHECK_EQ(fx_last_post(&q.fx)->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    CHECK_EQ(q.nflush, 3);
    CHECK_EQ(q.flush_at[2], 6);
    fx_complete_all(&q.fx);
    /* an expiry alone posts nothing */
    CHECK(fx_expire_next(&q.fx));
    CHECK_EQ(q.nflush, 3);
    /* the resends go by progress, flushed */
    size_t before = q.fx.nposts;
    int n = fx_progress(&q.fx);
    CHECK_GT(n, 0);
    CHECK_EQ(q.nflush, 4);
    CHECK_EQ(q.flush_at[3], before + (size_t) n);
    fx_complete_all(&q.fx);
    /* an explicit ACK alone is a post too: flushed */
    uint8_t buf[FX_MTU];
    uint32_t seq = PEER_ISN + 1; /* out of order: ACKed at the next pass */
    fx_recv(&q.fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)));
    before = q.fx.nposts;
    CHECK_EQ(fx_progress(&q.fx), 1);
    CHECK_EQ(fx_post_hdr(&q.fx.posts[before])->type, OPAL_BTL_USNIC_PKT_ACK);
    CHECK_EQ(q.nflush, 5);
    fx_complete_all(&q.fx);
    /* the owner away: resend_away flushes its copies */
    fx_set_time(&q.fx, q.fx.now + 100000);
    before = q.fx.nposts;
    int copies = opal_btl_usnic_resend_away(&q.fx.eng);
    CHECK_EQ(copies, 6);
    CHECK_EQ(q.nflush, 6);
    CHECK_EQ(q.flush_at[5], before + 6);
    /* within its back-off it does nothing, and flushes nothing */
    CHECK_EQ(opal_btl_usnic_resend_away(&q.fx.eng), 0);
    CHECK_EQ(q.nflush, 6);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 5);
    /* nothing un-ACKed: a tiny fragment takes the priority channel, which
     * holds nothing back: no flush */
    FX_SEND_TINY(&q.fx, ep, 1, NULL);
    CHECK_EQ(fx_last_post(&q.fx)->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    CHECK_EQ(q.nflush, 6);
    fx_complete_all(&q.fx);
    CHECK_EQ(q.fx.flushes, q.nflush);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 6);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* ---------------- the run retransmission ---------------- */

static bool queued_exactly(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint32_t first, unsigned count, uint64_t want)
{
    bool ok = true;
    for (unsigned i = 0; i < count; ++i) {
        opal_btl_usnic_send_seg_t *seg = ep->tx.sent[(first + i) % ep->window];
        bool is = NULL != seg && FX_FLAG(seg, ON_RESEND);
        if (is != (bool) ((want >> i) & 1)) {
            fprintf(stderr, "  seq 0x%x: ON_RESEND %d, expected %d\n", first + i, is, (int) ((want >> i) & 1));
            ok = false;
        }
    }
    /* nothing twice on the list */
    size_t n = 0;
    for (unsigned i = 0; i < count; ++i) {
        n += (want >> i) & 1;
    }
    if (fx_resend_len(fx) != n) {
        fprintf(stderr, "  %zu segments on the resend list, %zu expected\n", fx_resend_len(fx), n);
        ok = false;
    }
    return ok;
}

#define BITS(from, n) ((((1ull << (n)) - 1)) << (from))
#define BIT(i) (1ull << (i))

/* A timeout resends the oldest segment's batch: the following in-flight
 * segments sent at the same time, up to batch_segs in all; progress posts
 * the whole run in one pass even with max_resends_per_iteration 2 */
static void test_run_timeout_resends_batch(void)
{
    qx_t q;
    qx_init(&q, 8, 2, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
    queue_frags(&q.fx, ep, 12, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 12); /* all at 0 */
    fx_complete_all(&q.fx);
    CHECK(fx_expire_next(&q.fx));
    CHECK_EQ_U(q.fx.now, FX_RTO_INITIAL);
    CHECK(queued_exactly(&q.fx, ep, Q_ISN, 12, BITS(0, 8)));
    CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, 8);
    for (unsigned i = 8; i < 12; ++i) {
        opal_btl_usnic_send_seg_t *seg = ep->tx.sent[(Q_ISN + i) % 64];
        CHECK(FX_FLAG(seg, IN_HOTEL)); /* beyond the batch: still waiting */
    }
    CHECK(fx_hotel_consistent(&q.fx));
    size_t before = q.fx.nposts;
    unsigned flushes = q.nflush;
    CHECK_EQ(fx_progress(&q.fx), 8); /* the resend budget is at least a batch */
    REQUIRE_EQ(q.fx.nposts, before + 8);
    for (unsigned i = 0; i < 8; ++i) {
        const fx_post_t *p = &q.fx.posts[before + i];
        CHECK_EQ_U(fx_post_seq(p), Q_ISN + i);
        CHECK_EQ(p->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
        CHECK_EQ(fx_post_hdr(p)->flags & (OPAL_BTL_USNIC_HDR_FLAG_RETX | OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT),
                 OPAL_BTL_USNIC_HDR_FLAG_RETX | OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT);
    }
    CHECK_EQ(q.nflush, flushes + 1);
    CHECK_EQ(q.flush_at[q.nflush - 1], before + 8);
    fx_complete_all(&q.fx);
    /* the next timeout (backed off: 1000 + 2000) resends the same batch:
     * the 8 were resent together */
    CHECK(fx_expire_next(&q.fx));
    CHECK_EQ_U(q.fx.now, 3 * FX_RTO_INITIAL);
    CHECK(queued_exactly(&q.fx, ep, Q_ISN, 12, BITS(0, 8)));
    CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, 16);
    CHECK_EQ(fx_progress(&q.fx), 8);
    fx_complete_all(&q.fx);
    /* the first 8 ACKed: a partial ACK in recovery resends the new oldest
     * (overdue) at once, alone */
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 7);
    CHECK(queued_exactly(&q.fx, ep, Q_ISN + 8, 4, BIT(0)));
    CHECK_EQ(fx_progress(&q.fx), 1);
    fx_complete_all(&q.fx);
    /* its timeout takes along the segments sent no later than it: Q_ISN+9..11
     * (sent at 0, before its resend) */
    CHECK(fx_run_to_timeout(&q.fx));
    CHECK(queued_exactly(&q.fx, ep, Q_ISN + 8, 4, BITS(0, 4)));
    CHECK_EQ(fx_progress(&q.fx), 4);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 11);
    CHECK(fx_hotel_consistent(&q.fx));
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* Segments sent after the oldest are not in its run: it stops at the
 * first one sent later */
static void test_run_stops_at_later_segments(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
    queue_frags(&q.fx, ep, 3, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 3); /* at 0 */
    fx_set_time(&q.fx, 10);
    queue_frags(&q.fx, ep, 5, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 5); /* at 10 */
    fx_complete_all(&q.fx);
    CHECK(fx_expire_next(&q.fx));
    CHECK(queued_exactly(&q.fx, ep, Q_ISN, 8, BITS(0, 3)));
    CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, 3);
    fx_progress(&q.fx);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 7);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* An explicit ACK from PEER with selective-ACK ranges {start, len} */
static void rx_ranges(fx_t *fx, uint32_t ack, const uint16_t (*r)[2], unsigned n)
{
    uint8_t buf[FX_ACK_HDR];
    size_t len = fx_build_ack(buf, PEER, ack);
    opal_btl_usnic_ack_hdr_t *a = (opal_btl_usnic_ack_hdr_t *) buf;
    a->nranges = (uint8_t) n;
    for (unsigned i = 0; i < n; ++i) {
        a->range[i].start = opal_btl_usnic_wire16(r[i][0]);
        a->range[i].len = opal_btl_usnic_wire16(r[i][1]);
    }
    fx_recv(fx, buf, len);
}

/* The run skips what the peer reported held (SACKED) and what is already
 * queued (no segment twice on the list), within the oldest's batch of
 * batch_segs positions */
static void test_run_skips_sacked_and_queued(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
    queue_frags(&q.fx, ep, 10, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 10);
    fx_complete_all(&q.fx);
    /* at once (not overdue): Q_ISN+2 and Q_ISN+3 held, nothing resent */
    static const uint16_t r[][2] = {{1, 2}};
    rx_ranges(&q.fx, Q_ISN - 1, r, 1);
    CHECK_EQ(fx_resend_len(&q.fx), 0);
    /* Q_ISN+5's own timer fired (the owner's view of a timer store that
     * fires per segment): queued before the oldest times out */
    fx_set_time(&q.fx, 500);
    opal_btl_usnic_retrans_expired(&q.fx.eng, ep->tx.sent[(Q_ISN + 5) % 64]);
    CHECK_EQ(fx_resend_len(&q.fx), 1);
    CHECK(fx_expire_next(&q.fx));
    /* the batch: positions 0..7; Q_ISN+2, Q_ISN+3 held, Q_ISN+5 queued already */
    CHECK(queued_exactly(&q.fx, ep, Q_ISN, 10, BITS(0, 2) | BITS(4, 4)));
    CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, 1 + 5);
    opal_btl_usnic_send_seg_t *s2 = ep->tx.sent[(Q_ISN + 2) % 64];
    CHECK(FX_FLAG(s2, SACKED) && !FX_FLAG(s2, ON_RESEND) && !FX_FLAG(s2, TIMED_OUT));
    size_t before = q.fx.nposts;
    CHECK_EQ(fx_progress(&q.fx), 6);
    for (size_t i = before; i < q.fx.nposts; ++i) {
        uint32_t s = fx_post_seq(&q.fx.posts[i]);
        CHECK(s != Q_ISN + 2 && s != Q_ISN + 3 && s < Q_ISN + 8);
    }
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + 9);
    CHECK(fx_hotel_consistent(&q.fx));
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* How many a timeout queues: min(batch_segs, in flight) of one batch;
 * with batch_segs 0 or 1 only the oldest (test_ack_hotel's rule) */
static void test_run_length_table(void)
{
    static const struct {
        uint32_t batch;
        unsigned in_flight;
        unsigned expect;
    } cases[] = {
        {0, 12, 1}, {1, 12, 1}, {2, 12, 2}, {8, 12, 8}, {8, 5, 5}, {8, 8, 8}, {8, 1, 1},
        {16, 12, 12}, {44, 50, 44}, {44, 44, 44}, {64, 64, 64},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        qx_t q;
        qx_init(&q, cases[c].batch, 0, 0);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
        queue_frags(&q.fx, ep, cases[c].in_flight, DATA_SIZE);
        CHECK_EQ(fx_progress(&q.fx), (int) cases[c].in_flight);
        fx_complete_all(&q.fx);
        CHECK(fx_expire_next(&q.fx));
        uint64_t want = cases[c].expect >= 64 ? ~0ull : BITS(0, cases[c].expect);
        bool ok = CHECK(queued_exactly(&q.fx, ep, Q_ISN, cases[c].in_flight, want));
        ok = CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, cases[c].expect) && ok;
        /* and progress posts them all in one pass when batch_segs allows
         * (the budget is max(16, batch_segs)) */
        unsigned budget = cases[c].batch > 16 ? cases[c].batch : 16;
        ok = CHECK_EQ(fx_progress(&q.fx), (int) (cases[c].expect < budget ? cases[c].expect : budget)) && ok;
        if (!ok) {
            fprintf(stderr, "  batch_segs %u, %u in flight\n", cases[c].batch, cases[c].in_flight);
        }
        fx_complete_all(&q.fx);
        opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + cases[c].in_flight - 1);
        fx_progress(&q.fx);
        fx_complete_all(&q.fx);
        CHECK(fx_all_recycled(&q.fx));
        fx_fini(&q.fx);
    }
}

/* Resends per pass: max(max_resends_per_iteration, batch_segs) */
static void test_resend_budget(void)
{
    static const struct {
        uint32_t batch, max_resends;
        unsigned queued;
        unsigned per_pass;
    } cases[] = {
        {1, 2, 12, 2}, {0, 2, 12, 2}, {8, 2, 12, 8}, {8, 16, 12, 12}, {8, 4, 12, 8}, {44, 16, 50, 44},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        qx_t q;
        qx_init(&q, cases[c].batch, cases[c].max_resends, 0);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, Q_ISN, PEER_ISN);
        unsigned n = cases[c].queued + 1;
        queue_frags(&q.fx, ep, n, DATA_SIZE);
        fx_progress(&q.fx);
        fx_complete_all(&q.fx);
        /* the last one held, every other a hole overdue: all queued by the ranges */
        fx_set_time(&q.fx, FX_RTO_MIN);
        const uint16_t r[][2] = {{(uint16_t) (n - 2), 1}};
        rx_ranges(&q.fx, Q_ISN - 1, r, 1);
        bool ok = CHECK_EQ(fx_resend_len(&q.fx), cases[c].queued);
        unsigned left = cases[c].queued, passes = 0;
        while (left > 0 && passes < 100) {
            unsigned want = left < cases[c].per_pass ? left : cases[c].per_pass;
            ok = CHECK_EQ(fx_progress(&q.fx), (int) want) && ok;
            fx_complete_all(&q.fx);
            left -= want;
            ++passes;
        }
        ok = CHECK_EQ(fx_resend_len(&q.fx), 0) && ok;
        if (!ok) {
            fprintf(stderr, "  batch_segs %u, max_resends_per_iteration %u\n", cases[c].batch, cases[c].max_resends);
        }
        opal_btl_usnic_handle_ack(&q.fx.eng, ep, Q_ISN + n - 1);
        CHECK(fx_all_recycled(&q.fx));
        fx_fini(&q.fx);
    }
}

UNIT_MAIN(UNIT_TEST(test_resend_budget), UNIT_TEST(test_quantum_one_endpoint),
          UNIT_TEST(test_quantum_round_robin_table), UNIT_TEST(test_quantum_counts_chunks),
          UNIT_TEST(test_quantum_credit_limited), UNIT_TEST(test_flush_points),
          UNIT_TEST(test_run_timeout_resends_batch), UNIT_TEST(test_run_stops_at_later_segments),
          UNIT_TEST(test_run_skips_sacked_and_queued), UNIT_TEST(test_run_length_table),
          UNIT_TEST(test_away_resends_copies_with_backoff), UNIT_TEST(test_parting_resend_copies_the_tail), UNIT_TEST(test_away_respects_credits_and_failed_peers),
          UNIT_TEST(test_send_small_via_queue), UNIT_TEST(test_send_small_copies_user_buffer_at_enqueue),
          UNIT_TEST(test_send_fast_path), UNIT_TEST(test_send_fast_path_ack_before_callback),
          UNIT_TEST(test_send_fast_path_refusals), UNIT_TEST(test_send_sendi),
          UNIT_TEST(test_send_sendi_refused_when_the_peer_cannot_take_it_now),
          UNIT_TEST(test_send_refused_sendi_hands_back_a_descriptor), UNIT_TEST(test_send_large_chunking),
          UNIT_TEST(test_send_large_two_segments), UNIT_TEST(test_send_frag_ids_never_zero),
          UNIT_TEST(test_send_window_closes_and_reopens), UNIT_TEST(test_send_backpressure),
          UNIT_TEST(test_send_credit_limited), UNIT_TEST(test_send_hard_error_fails_peer),
          UNIT_TEST(test_send_interop_different_mtus), UNIT_TEST(test_send_now_defers_callback),
          UNIT_TEST(test_send_large_descriptor_sent_again), UNIT_TEST(test_send_small_descriptor_sent_again_before_ack),
          UNIT_TEST(test_btl_send_posts_queued_fragments_now), UNIT_TEST(test_send_prepare_src_packed))
