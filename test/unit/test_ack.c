/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The reliability core (btl_usnic_ack.c): ACK processing on the sender
 * (cumulative release, duplicate ACK -> one fast retransmit per value,
 * stale and impossible ACKs, ACK before the send completion, ACK while
 * queued for retransmission, timer expiry through the engine's own clock,
 * resend pacing) and ACK scheduling on the receiver (piggy-back, delayed
 * explicit ACK, urgent ACKs).  The retransmission rules themselves (RTO,
 * back-off, oldest only, partial ACKs, overdue duplicates, peer timeout)
 * are in test_timer.c.
 */
#include "fixture.h"
#include "unit.h"

/* A retransmission is the first transmission's bytes, but for the flags
 * |retx_flags| in its header (FLAG_RETX, and FLAG_RETX_TIMEOUT after a
 * timeout: how the receiver tells real losses and premature timeouts) */
static bool same_but_flags(const fx_post_t *resend, const fx_post_t *first, uint8_t retx_flags)
{
    if (resend->len != first->len || resend->len < sizeof(opal_btl_usnic_hdr_t)) {
        return false;
    }
    const opal_btl_usnic_hdr_t *h = (const opal_btl_usnic_hdr_t *) resend->bytes;
    if ((h->flags & retx_flags) != retx_flags) {
        return false;
    }
    /* a retransmission is a new datagram: a later nonce, its own tag */
    const opal_btl_usnic_hdr_t *f = (const opal_btl_usnic_hdr_t *) first->bytes;
    if (opal_btl_usnic_host64(h->nonce) <= opal_btl_usnic_host64(f->nonce)) {
        return false;
    }
    uint8_t copy[FX_MTU], orig[FX_MTU];
    memcpy(copy, resend->bytes, resend->len);
    memcpy(orig, first->bytes, first->len);
    opal_btl_usnic_hdr_t *c = (opal_btl_usnic_hdr_t *) copy, *o = (opal_btl_usnic_hdr_t *) orig;
    c->flags &= (uint8_t) ~retx_flags;
    c->nonce = o->nonce = 0;
    memset(c->mac, 0, sizeof(c->mac));
    memset(o->mac, 0, sizeof(o->mac));
    return 0 == memcmp(copy, orig, first->len);
}

#define TIMEOUT_FLAGS (OPAL_BTL_USNIC_HDR_FLAG_RETX | OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT)

#define PEER 1
#define ISN 1000u
#define PEER_ISN 5000u


static size_t small_avail(fx_t *fx)
{
    return fx_small_frags_available(fx);
}

/* ---------------- sender: ACK processing ---------------- */

static void test_ack_cumulative_release(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    size_t full = small_avail(&fx);
    opal_btl_usnic_send_seg_t *segs[5];
    FX_SEND_TINY(&fx, ep, 5, segs);
    CHECK_EQ(fx.nposts, 5);
    for (unsigned i = 0; i < 5; ++i) {
        CHECK_EQ_U(fx_post_seq(&fx.posts[i]), ISN + i);
        CHECK_EQ_U(segs[i]->seq, ISN + i);
        CHECK_PTR_EQ(ep->tx.sent[(ISN + i) % 8], segs[i]);
        CHECK(fx_in_hotel(segs[i]));
    }
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 5);
    fx_complete_all(&fx);
    CHECK_EQ(small_avail(&fx), full - 5); /* posted-complete but un-ACKed: kept */

    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 2);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 2);
    CHECK_EQ(small_avail(&fx), full - 2);
    for (unsigned i = 0; i < 3; ++i) {
        CHECK(NULL == ep->tx.sent[(ISN + i) % 8]);
    }
    CHECK(!fx_in_hotel(segs[0]) && !fx_in_hotel(segs[1]) && !fx_in_hotel(segs[2])); /* checked out */
    CHECK_EQ(fx_hotel_guests(&fx), 2);
    CHECK(fx_in_hotel(segs[3]) && fx_in_hotel(segs[4]));

    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 0);
    CHECK(opal_btl_usnic_endpoint_drained(ep));
    CHECK_EQ(fx_hotel_guests(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 2);
    CHECK_EQ_U(fx.eng.stats.num_resends, 0);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Cumulative ACKs across the 32-bit wrap */
static void test_ack_release_across_wrap(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    const uint32_t isn = 0xfffffffdu;
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, isn, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[10];
    FX_SEND_TINY(&fx, ep, 10, segs);
    CHECK_EQ_U(ep->tx.next_seq, 7);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, 0xffffffffu);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 7);
    opal_btl_usnic_handle_ack(&fx.eng, ep, 0xfffffffeu); /* stale now */
    CHECK_EQ_U(fx.eng.stats.num_old_dup_acks, 1);
    opal_btl_usnic_handle_ack(&fx.eng, ep, 3);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 3);
    opal_btl_usnic_handle_ack(&fx.eng, ep, 7); /* never sent */
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 1);
    opal_btl_usnic_handle_ack(&fx.eng, ep, 6);
    CHECK(opal_btl_usnic_endpoint_drained(ep));
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* |n| duplicate ACKs of |value| */
static void dup_acks(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint32_t value, int n)
{
    for (int i = 0; i < n; ++i) {
        opal_btl_usnic_handle_ack(&fx->eng, ep, value);
    }
}

/* FX_DUPACK_THRESHOLD duplicates of one value fast-retransmit the oldest
 * segment once; further ones do nothing until it is overdue (test_timer) */
static void test_ack_duplicate_one_fast_retransmit_per_value(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[8];
    FX_SEND_TINY(&fx, ep, 5, segs);
    fx_complete_all(&fx);

    /* "I have everything before ISN", again: the receiver saw something beyond a hole */
    dup_acks(&fx, ep, ISN - 1, FX_DUPACK_THRESHOLD - 1);
    CHECK_EQ_U(fx.eng.stats.num_dup_acks, FX_DUPACK_THRESHOLD - 1);
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 0); /* below the threshold: maybe reordering */
    CHECK(!ep->timer.in_recovery);
    dup_acks(&fx, ep, ISN - 1, 1);
    CHECK_EQ_U(fx.eng.stats.num_dup_acks, FX_DUPACK_THRESHOLD);
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 1);
    CHECK(FX_FLAG(segs[0], ON_RESEND));
    CHECK(!fx_in_hotel(segs[0])); /* its timer stopped while it waits */
    CHECK(ep->timer.in_recovery);
    CHECK_EQ_U(ep->timer.recover, ISN + 4); /* everything sent so far */
    CHECK_EQ(fx_resend_len(&fx), 1);
    dup_acks(&fx, ep, ISN - 1, 3);
    CHECK_EQ_U(fx.eng.stats.num_dup_acks, FX_DUPACK_THRESHOLD + 3);
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 1); /* a burst of duplicates is one retransmission */
    CHECK_EQ(fx_resend_len(&fx), 1);

    size_t before = fx.nposts;
    CHECK_EQ(fx_progress(&fx), 1);
    REQUIRE_EQ(fx.nposts, before + 1);
    fx_post_t *p = fx_last_post(&fx);
    CHECK_PTR_EQ(p->seg, segs[0]);
    CHECK_EQ_U(fx_post_seq(p), ISN);
    CHECK_EQ(p->channel, OPAL_BTL_USNIC_DATA_CHANNEL); /* retransmissions use the data channel */
    CHECK(same_but_flags(p, &fx.posts[0], OPAL_BTL_USNIC_HDR_FLAG_RETX)); /* the first transmission's bytes */
    CHECK_EQ(segs[0]->retries, 1);
    CHECK(fx_in_hotel(segs[0]));
    CHECK(!FX_FLAG(segs[0], ON_RESEND));
    CHECK_EQ_U(fx.eng.stats.num_resends, 1);
    fx_complete_all(&fx);
    /* more duplicates right after the retransmission: it is not overdue */
    dup_acks(&fx, ep, ISN - 1, 3);
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 1);
    CHECK_EQ(fx_resend_len(&fx), 0);

    /* everything ACKed: recovery is over */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK(!ep->timer.in_recovery);
    CHECK(opal_btl_usnic_endpoint_drained(ep));

    /* a new value outside recovery: again one fast retransmit for it */
    FX_SEND_TINY(&fx, ep, 3, segs + 5);
    fx_complete_all(&fx);
    dup_acks(&fx, ep, ISN + 4, FX_DUPACK_THRESHOLD);
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 2);
    CHECK(FX_FLAG(segs[5], ON_RESEND));
    CHECK_EQ_U(ep->timer.recover, ISN + 7);
    dup_acks(&fx, ep, ISN + 4, 2);
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 2);
    CHECK_EQ(fx_resend_len(&fx), 1);

    /* with nothing in flight an equal ACK is not a duplicate */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 7);
    CHECK_EQ(fx_resend_len(&fx), 0); /* the queued one was ACKed: off the list */
    uint64_t dups = fx.eng.stats.num_dup_acks;
    dup_acks(&fx, ep, ISN + 7, FX_DUPACK_THRESHOLD + 1);
    CHECK_EQ_U(fx.eng.stats.num_dup_acks, dups);
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 2);
    CHECK_EQ(fx_progress(&fx), 0);
    CHECK(fx_hotel_consistent(&fx));
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_ack_stale_ignored(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    FX_SEND_TINY(&fx, ep, 5, NULL);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
    size_t avail = small_avail(&fx);
    static const uint32_t stale[] = {ISN + 1, ISN, ISN - 1, ISN - 1000, ISN + 2 - 0x7fffffffu};
    for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); ++i) {
        opal_btl_usnic_handle_ack(&fx.eng, ep, stale[i]);
    }
    CHECK_EQ_U(fx.eng.stats.num_old_dup_acks, 5);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 2);
    CHECK_EQ(small_avail(&fx), avail);
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 0);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ(fx_hotel_guests(&fx), 2);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_ack_beyond_sent_ignored_and_counted(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    /* nothing sent at all */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 1);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1);
    FX_SEND_TINY(&fx, ep, 5, NULL);
    fx_complete_all(&fx);
    size_t avail = small_avail(&fx);
    static const uint32_t bogus[] = {ISN + 5, ISN + 8, ISN + 0x10000, ISN + 0x7ffffffeu};
    for (size_t i = 0; i < sizeof(bogus) / sizeof(bogus[0]); ++i) {
        opal_btl_usnic_handle_ack(&fx.eng, ep, bogus[i]);
    }
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 5);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 5);
    CHECK_EQ(small_avail(&fx), avail);
    CHECK_EQ(fx_hotel_guests(&fx), 5);
    /* the same through a forged ACK datagram */
    uint8_t buf[128];
    fx_recv(&fx, buf, fx_build_ack(buf, PEER, ISN + 100));
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 6);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1);
    fx_recv(&fx, buf, fx_build_ack(buf, PEER, ISN + 4));
    CHECK(opal_btl_usnic_endpoint_drained(ep));
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* ACK before the provider released the buffer: the segment must not be
 * recycled (it would be reused while the NIC still reads it) */
static void test_ack_before_send_completion(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, PEER_ISN);
    size_t full_small = small_avail(&fx);
    size_t full_chunks = fx_free_list_available(&fx.eng.pool.chunk_segs);
    opal_btl_usnic_send_seg_t *segs[1];
    FX_SEND_TINY(&fx, ep, 1, segs);
    /* a large fragment too: 3 chunks */
    opal_btl_usnic_send_frag_t *big = fx_alloc(&fx, ep, 3000, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    fx_fill((uint8_t *) big->pack_buf, 3000, 77);
    CHECK_EQ(fx_send(&fx, ep, big, 9), 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(fx.nposts, 4);
    CHECK_EQ(fx_free_list_available(&fx.eng.pool.chunk_segs), full_chunks - 3);

    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 3);
    CHECK(FX_FLAG(segs[0], ACKED));
    CHECK(FX_FLAG(segs[0], POSTED));
    CHECK(!FX_FLAG(segs[0], IN_WINDOW));
    CHECK(!fx_in_hotel(segs[0]));
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 0);
    CHECK_EQ(small_avail(&fx), full_small - 1);                          /* still held */
    CHECK_EQ(fx_free_list_available(&fx.eng.pool.chunk_segs), full_chunks - 3); /* still held */
    /* a new allocation cannot get the held segment */
    opal_btl_usnic_send_frag_t *other = opal_btl_usnic_small_frag_alloc(&fx.eng.pool, segs[0]->wire_len);
    CHECK_PTR_NE(&other->seg, segs[0]);
    opal_btl_usnic_frag_return(&fx.eng.pool, other);

    for (size_t i = 0; i < fx.nposts; ++i) {
        fx_complete(&fx, fx.posts[i].seg);
    }
    CHECK_EQ(small_avail(&fx), full_small);
    CHECK_EQ(fx_free_list_available(&fx.eng.pool.chunk_segs), full_chunks);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1024);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL], 1024);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A descriptor the PML kept: ACKed and completed, it stays until btl_free */
static void test_ack_pml_owned_frag_waits_for_free(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    size_t full = small_avail(&fx);
    fx_cb_t cb = {.fx = &fx};
    opal_btl_usnic_send_frag_t *frag = fx_alloc(&fx, ep, 100, 0);
    fx_set_callback(frag, &cb);
    CHECK_EQ(fx_send(&fx, ep, frag, 9), 0); /* fast path, but the PML wants its callback */
    CHECK_EQ(cb.calls, 0);                  /* never from inside btl_send */
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb.calls, 1);
    CHECK_EQ(cb.status, OPAL_SUCCESS);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    fx_complete_all(&fx);
    CHECK_EQ(small_avail(&fx), full - 1);
    fx_free(&fx, frag);
    CHECK_EQ(small_avail(&fx), full);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(cb.calls, 1);
    fx_fini(&fx);
}

/* An ACK for a segment waiting on the resend list takes it off the list */
static void test_ack_while_queued_for_retransmit(void)
{
    for (int partial = 0; partial < 2; ++partial) {
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
        opal_btl_usnic_send_seg_t *segs[3];
        FX_SEND_TINY(&fx, ep, 3, segs);
        fx_complete_all(&fx);
        CHECK(fx_run_to_timeout(&fx)); /* the oldest times out */
        CHECK(FX_FLAG(segs[0], ON_RESEND));
        CHECK_EQ(fx_resend_len(&fx), 1);
        CHECK_EQ_U(fx.eng.stats.num_timeout_retrans, 1);
        size_t before = fx.nposts;
        if (partial) {
            /* ACK of the queued one only: off the list, and (partial ACK
             * in recovery) the next hole goes out at once instead */
            opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
            CHECK(!FX_FLAG(segs[0], ON_RESEND));
            CHECK(FX_FLAG(segs[1], ON_RESEND));
            CHECK_EQ(fx_resend_len(&fx), 1);
            CHECK_EQ(fx_progress(&fx), 1);
            CHECK_EQ(fx.nposts, before + 1);
            CHECK_PTR_EQ(fx_last_post(&fx)->seg, segs[1]);
        } else {
            opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
            CHECK(!FX_FLAG(segs[0], ON_RESEND));
            CHECK_EQ(fx_resend_len(&fx), 0);
            CHECK(!ep->timer.in_recovery);
            CHECK_EQ(fx_progress(&fx), 0);
            CHECK_EQ(fx.nposts, before);
        }
        fx_complete_all(&fx);
        opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
        CHECK(fx_hotel_consistent(&fx));
        CHECK(fx_all_recycled(&fx));
        fx_fini(&fx);
    }
}

/* Queued for retransmit while the provider still holds the buffer: it is
 * not reposted until the completion, and an ACK meanwhile cancels it */
static void test_ack_while_queued_and_posted(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    size_t full = small_avail(&fx);
    opal_btl_usnic_send_seg_t *segs[3];
    FX_SEND_TINY(&fx, ep, 3, segs);
    /* no completions yet; duplicate ACKs */
    dup_acks(&fx, ep, ISN - 1, FX_DUPACK_THRESHOLD);
    CHECK(FX_FLAG(segs[0], ON_RESEND) && FX_FLAG(segs[0], POSTED));
    CHECK_EQ(fx_resend_len(&fx), 1);
    CHECK_EQ(fx_progress(&fx), 0); /* still posted */
    CHECK_EQ(fx.nposts, 3);
    /* its timer does not run while it waits: no expiry queues anything else */
    fx_set_time(&fx, 10 * FX_RTO_INITIAL);
    CHECK_EQ(fx_progress(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_timeout_retrans, 0);
    CHECK_EQ(fx_resend_len(&fx), 1);
    fx_complete(&fx, segs[1]);
    CHECK_EQ(fx_progress(&fx), 0);
    fx_complete(&fx, segs[0]);
    CHECK_EQ(fx_progress(&fx), 1); /* seg 0 now */
    CHECK_PTR_EQ(fx_last_post(&fx)->seg, segs[0]);
    CHECK(FX_FLAG(segs[0], POSTED));
    /* once overdue, a later duplicate queues it again while it is still posted */
    fx_set_time(&fx, fx.now + FX_RTO_MIN);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN - 1);
    CHECK(FX_FLAG(segs[0], ON_RESEND) && FX_FLAG(segs[0], POSTED));
    CHECK_EQ(fx_progress(&fx), 0);
    /* ACK everything while seg 0 is queued and posted */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK(!FX_FLAG(segs[0], ON_RESEND));
    CHECK_EQ(small_avail(&fx), full - 2); /* seg 0 and seg 2 still held by the provider */
    fx_complete_all(&fx);
    CHECK_EQ(fx_progress(&fx), 0);
    CHECK(fx_hotel_consistent(&fx));
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* The engine's own timers: a timeout queues the oldest segment, progress
 * reposts it with the same bytes on the data channel and a doubled timeout */
static void test_timer_expiry_then_resend(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[3];
    fx_set_time(&fx, 50);
    FX_SEND_TINY(&fx, ep, 3, segs);
    for (int i = 0; i < 3; ++i) {
        CHECK_EQ_U(segs[i]->sent_time, 50);
        CHECK_EQ_U(segs[i]->deadline, 50 + FX_RTO_INITIAL);
        CHECK(fx_in_hotel(segs[i]));
    }
    CHECK_EQ_U(opal_btl_usnic_engine_next_deadline(&fx.eng), 50 + FX_RTO_INITIAL);
    fx_complete_all(&fx);
    /* one microsecond early: nothing */
    fx_set_time(&fx, 50 + FX_RTO_INITIAL - 1);
    CHECK_EQ(fx_progress(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_timeout_retrans, 0);
    /* at the deadline: the oldest only */
    fx_set_time(&fx, 50 + FX_RTO_INITIAL);
    opal_btl_usnic_hotel_evict_due(&fx.eng);
    CHECK(FX_FLAG(segs[0], ON_RESEND));
    CHECK(!FX_FLAG(segs[0], IN_HOTEL));
    CHECK(!fx_in_hotel(segs[0]));
    CHECK(!FX_FLAG(segs[1], ON_RESEND) && FX_FLAG(segs[1], IN_HOTEL));
    CHECK(!FX_FLAG(segs[2], ON_RESEND) && FX_FLAG(segs[2], IN_HOTEL));
    CHECK_EQ_U(fx.eng.stats.num_timeout_retrans, 1);
    CHECK_EQ(ep->timer.backoff, 1);
    CHECK(ep->timer.in_recovery);
    /* a second expiry report does not queue it twice */
    opal_btl_usnic_retrans_expired(&fx.eng, segs[0]);
    CHECK_EQ_U(fx.eng.stats.num_timeout_retrans, 1);
    CHECK_EQ(fx_resend_len(&fx), 1);
    CHECK_EQ(fx.nposts, 3);

    CHECK_EQ(fx_progress(&fx), 1);
    REQUIRE_EQ(fx.nposts, 4);
    fx_post_t *p = fx_last_post(&fx);
    CHECK_PTR_EQ(p->seg, segs[0]);
    CHECK_EQ_U(fx_post_seq(p), ISN);
    CHECK_EQ(p->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    CHECK(same_but_flags(p, &fx.posts[0], TIMEOUT_FLAGS));
    CHECK(fx_in_hotel(segs[0]));
    CHECK_EQ_U(segs[0]->sent_time, 50 + FX_RTO_INITIAL);
    CHECK_EQ_U(segs[0]->deadline, 50 + FX_RTO_INITIAL + 2 * FX_RTO_INITIAL); /* backed off */
    CHECK_EQ_U(opal_btl_usnic_engine_next_deadline(&fx.eng), segs[0]->deadline);
    CHECK_EQ(segs[0]->retries, 1);
    /* credits: the retransmission took a data-channel credit, returned at completion */
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1023);
    CHECK(fx_hotel_consistent(&fx));

    /* an expiry racing with the ACK (reported after it) is ignored */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    CHECK(!fx_in_hotel(segs[0]));
    CHECK_EQ(ep->timer.backoff, 0);
    opal_btl_usnic_retrans_expired(&fx.eng, segs[0]);
    CHECK_EQ_U(fx.eng.stats.num_timeout_retrans, 1);
    /* (the ACK was partial: seg 1 is the next hole and queued at once) */
    CHECK(FX_FLAG(segs[1], ON_RESEND));
    CHECK_EQ(fx_resend_len(&fx), 1);
    fx_complete_all(&fx);
    CHECK_EQ(fx_progress(&fx), 1);
    fx_complete_all(&fx);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1024);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL], 1024);
    /* the ACK of seg 1 is partial too: seg 2 goes out at once */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 1);
    CHECK(FX_FLAG(segs[2], ON_RESEND));
    CHECK_EQ_U(fx.eng.stats.num_fast_retrans, 2);
    CHECK_EQ(fx_progress(&fx), 1);
    fx_complete_all(&fx);
    /* then seg 2 is lost again and again: timeouts 1x, 2x, 4x the RTO apart */
    uint64_t last = fx.now;
    for (int round = 0; round < 3; ++round) {
        CHECK(fx_run_to_timeout(&fx));
        CHECK_EQ_U(fx.now - last, (uint64_t) FX_RTO_INITIAL << round);
        last = fx.now;
        CHECK(FX_FLAG(segs[2], ON_RESEND));
        CHECK_EQ(fx_progress(&fx), 1);
        fx_complete_all(&fx);
    }
    CHECK_EQ(segs[2]->retries, 4);
    CHECK_EQ_U(fx.eng.stats.num_timeout_retrans, 4);
    CHECK_EQ_U(fx.eng.stats.num_resends, 6);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
    CHECK(fx_hotel_consistent(&fx));
    CHECK_EQ(fx_hotel_guests(&fx), 0);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* The timeout of a chunk segment: the copy in the chunk is resent even
 * though the large fragment itself was recycled long ago */
static void test_timer_expiry_chunk_resend(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    opal_btl_usnic_send_frag_t *big = fx_alloc(&fx, ep, 4000, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    fx_fill((uint8_t *) big->pack_buf, 4000, 3);
    CHECK_EQ(fx_send(&fx, ep, big, 4), 0);
    fx_progress(&fx);
    CHECK_EQ(fx.nposts, 3);
    CHECK_EQ(fx_free_list_available(&fx.eng.pool.large_frags), fx_free_list_allocated(&fx.eng.pool.large_frags));
    fx_complete_all(&fx);
    /* the first chunk got through: the middle one is now the oldest */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    CHECK(fx_run_to_timeout(&fx));
    CHECK_EQ(fx_progress(&fx), 1);
    REQUIRE_EQ(fx.nposts, 4);
    CHECK_PTR_EQ(fx.posts[3].seg, fx.posts[1].seg);
    CHECK(same_but_flags(&fx.posts[3], &fx.posts[1], TIMEOUT_FLAGS));
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 2);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Timeouts on many endpoints at once: at most max_resends_per_iteration
 * reposts per pass, each segment exactly once */
static void test_max_resends_per_iteration(void)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.max_resends_per_iteration = 3;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *eps[10];
    for (uint32_t i = 0; i < 10; ++i) {
        eps[i] = fx_ep_new(&fx, PEER + i, 16, ISN + 100 * i, PEER_ISN);
        FX_SEND_TINY(&fx, eps[i], 1, NULL);
    }
    fx_complete_all(&fx);
    CHECK(fx_run_to_timeout(&fx)); /* all ten oldest segments share the deadline */
    CHECK_EQ(fx_resend_len(&fx), 10);
    unsigned seen[10] = {0};
    static const int per_pass[] = {3, 3, 3, 1, 0};
    for (int pass = 0; pass < 5; ++pass) {
        size_t before = fx.nposts;
        CHECK_EQ(fx_progress(&fx), per_pass[pass]);
        CHECK_EQ(fx.nposts - before, per_pass[pass]);
        for (size_t i = before; i < fx.nposts; ++i) {
            uint32_t off = (fx_post_seq(&fx.posts[i]) - ISN) / 100;
            if (CHECK_LT(off, 10)) {
                ++seen[off];
                CHECK_PTR_EQ(fx.posts[i].ep, eps[off]);
            }
        }
    }
    for (int i = 0; i < 10; ++i) {
        CHECK_EQ(seen[i], 1);
    }
    fx_complete_all(&fx);
    for (int i = 0; i < 10; ++i) {
        opal_btl_usnic_handle_ack(&fx.eng, eps[i], ISN + 100 * i);
    }
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Retransmissions also stop when the data channel runs out of credits or
 * the provider pushes back; nothing is lost */
static void test_resend_credit_and_backpressure(void)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = 2;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *eps[5];
    for (uint32_t i = 0; i < 5; ++i) {
        eps[i] = fx_ep_new(&fx, PEER + i, 16, ISN + i, PEER_ISN);
        FX_SEND_TINY(&fx, eps[i], 1, NULL); /* priority channel */
    }
    fx_complete_all(&fx);
    CHECK(fx_run_to_timeout(&fx));
    CHECK_EQ(fx_resend_len(&fx), 5);
    CHECK_EQ(fx_progress(&fx), 2); /* two data credits */
    CHECK_EQ(fx_progress(&fx), 0);
    CHECK_EQ(fx_resend_len(&fx), 3);
    fx_complete_all(&fx);
    fx.fail_count = 1; /* EAGAIN on the next post */
    CHECK_EQ(fx_progress(&fx), 0);
    CHECK_EQ(fx_resend_len(&fx), 3);
    CHECK_EQ_U(fx.eng.stats.num_send_eagain, 1);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 2);
    CHECK_EQ(fx_progress(&fx), 2);
    fx_complete_all(&fx);
    CHECK_EQ(fx_progress(&fx), 1);
    fx_complete_all(&fx);
    CHECK_EQ(fx_resend_len(&fx), 0);
    unsigned seen[5] = {0};
    for (size_t i = 5; i < fx.nposts; ++i) {
        ++seen[fx_post_seq(&fx.posts[i]) - ISN];
    }
    for (int i = 0; i < 5; ++i) {
        CHECK_EQ(seen[i], 1);
        opal_btl_usnic_handle_ack(&fx.eng, eps[i], ISN + i);
    }
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Piggy-backed ACK in a data segment from the peer releases our segments */
static void test_ack_piggybacked_in_peer_data(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    FX_SEND_TINY(&fx, ep, 4, NULL);
    fx_complete_all(&fx);
    uint8_t buf[128];
    size_t len = fx_build_frag(buf, PEER, PEER_ISN, 3, "hi", 2);
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) buf;
    h->flags = OPAL_BTL_USNIC_HDR_FLAG_ACK | OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW;
    h->ack_seq = opal_btl_usnic_wire32(ISN + 1);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 1);
    CHECK_EQ(fx.ndels, 1);
    /* the same segment again (a retransmission): its ACK is stale, the data a duplicate */
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_old_dup_acks, 0); /* equal, not older ... */
    CHECK_EQ_U(fx.eng.stats.num_dup_acks, 1);     /* ... and flagged ACK_NEW: a duplicate ACK */
    CHECK_EQ(fx.ndels, 1);
    /* a data segment that merely repeats the current ACK (no ACK_NEW) is no duplicate ACK */
    h->flags = OPAL_BTL_USNIC_HDR_FLAG_ACK;
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_dup_acks, 1);
    CHECK_EQ(fx.ndels, 1);
    /* ack_seq without the flag means nothing */
    len = fx_build_frag(buf, PEER, PEER_ISN + 1, 3, "ho", 2);
    h->ack_seq = opal_btl_usnic_wire32(ISN + 3);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 1);
    CHECK_EQ(fx.ndels, 2);
    fx_recv(&fx, buf, fx_build_ack(buf, PEER, ISN + 3));
    CHECK(opal_btl_usnic_endpoint_drained(ep));
    fx_fini(&fx);
}

/* ---------------- receiver: ACK scheduling ---------------- */

static void rx_frag(fx_t *fx, uint32_t seq)
{
    uint8_t buf[128];
    fx_recv(fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)));
}

/* Explicit ACK posts since the last look; checks each is a well-formed ACK */
static unsigned explicit_acks(fx_t *fx, size_t *cursor, uint32_t *last_value)
{
    unsigned n = 0;
    for (; *cursor < fx->nposts; ++*cursor) {
        fx_post_t *p = &fx->posts[*cursor];
        const opal_btl_usnic_hdr_t *h = fx_post_hdr(p);
        if (OPAL_BTL_USNIC_PKT_ACK != h->type) {
            continue;
        }
        ++n;
        CHECK_EQ(p->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
        CHECK_EQ(p->len, FX_ACK_HDR);
        CHECK_EQ(h->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK, OPAL_BTL_USNIC_HDR_FLAG_ACK);
        CHECK_EQ(opal_btl_usnic_hdr_check(p->bytes, p->len), OPAL_BTL_USNIC_VALID);
        *last_value = opal_btl_usnic_host32(h->ack_seq);
    }
    return n;
}

static opal_btl_usnic_engine_params_t sched_params(void)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.ack_iteration_delay = 3;
    return p;
}

static void test_ack_explicit_after_delay(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, PEER_ISN);
    size_t cur = 0;
    uint32_t value = 0;
    rx_frag(&fx, PEER_ISN);
    CHECK(ep->rx.ack_owed);
    CHECK_EQ(fx.nposts, 0); /* never sent from the receive path */
    opal_btl_usnic_engine_progress(&fx.eng);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    opal_btl_usnic_engine_progress(&fx.eng); /* third tick */
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ_U(value, PEER_ISN);
    CHECK(!ep->rx.ack_owed);
    CHECK_EQ_U(fx.eng.stats.num_ack_sends, 1);
    for (int i = 0; i < 10; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    /* a later arrival does not postpone an ACK already due; several arrivals share one ACK */
    rx_frag(&fx, PEER_ISN + 1);
    opal_btl_usnic_engine_progress(&fx.eng);
    rx_frag(&fx, PEER_ISN + 2);
    opal_btl_usnic_engine_progress(&fx.eng);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1); /* due 3 ticks after the first arrival */
    CHECK_EQ_U(value, PEER_ISN + 2);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx)); /* ACK segments are recycled at completion */
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL], 1024);
    fx_fini(&fx);
}

static void test_ack_piggyback_clears_debt(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, PEER_ISN);
    size_t cur = 0;
    uint32_t value = 0;
    rx_frag(&fx, PEER_ISN);
    rx_frag(&fx, PEER_ISN + 1);
    FX_SEND_TINY(&fx, ep, 1, NULL);
    REQUIRE_EQ(fx.nposts, 1);
    const opal_btl_usnic_hdr_t *h = fx_post_hdr(&fx.posts[0]);
    CHECK_EQ(h->type, OPAL_BTL_USNIC_PKT_FRAG);
    CHECK_EQ(h->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK, OPAL_BTL_USNIC_HDR_FLAG_ACK);
    CHECK_EQ_U(opal_btl_usnic_host32(h->ack_seq), PEER_ISN + 1);
    CHECK(!ep->rx.ack_owed);
    CHECK(!ep->rx.on_ack_list);
    CHECK_EQ_U(fx.eng.stats.num_piggy_acks, 1);
    for (int i = 0; i < 10; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    /* nothing owed: the next data segment repeats the ACK without ACK_NEW */
    FX_SEND_TINY(&fx, ep, 1, NULL);
    CHECK_EQ(fx_post_hdr(fx_last_post(&fx))->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK, OPAL_BTL_USNIC_HDR_FLAG_ACK);
    CHECK_EQ(fx_post_hdr(fx_last_post(&fx))->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW, 0);

    /* piggy-back on a segment sent from the queue (a large fragment's chunk) */
    rx_frag(&fx, PEER_ISN + 2);
    opal_btl_usnic_send_frag_t *big = fx_alloc(&fx, ep, 2000, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    CHECK_EQ(fx_send(&fx, ep, big, 1), 0);
    opal_btl_usnic_engine_progress(&fx.eng);
    REQUIRE_EQ(fx.nposts, 4);
    h = fx_post_hdr(&fx.posts[2]);
    CHECK_EQ(h->type, OPAL_BTL_USNIC_PKT_CHUNK);
    CHECK_EQ(h->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW);
    CHECK_EQ_U(opal_btl_usnic_host32(h->ack_seq), PEER_ISN + 2);
    CHECK_EQ(fx_post_hdr(&fx.posts[3])->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW, 0);
    CHECK_EQ_U(opal_btl_usnic_host32(fx_post_hdr(&fx.posts[3])->ack_seq), PEER_ISN + 2);

    /* piggy-back on a retransmission */
    fx_complete_all(&fx);
    rx_frag(&fx, PEER_ISN + 3);
    CHECK(fx_run_to_timeout(&fx)); /* the oldest (posts[0]) times out */
    fx_progress(&fx);
    h = fx_post_hdr(fx_last_post(&fx));
    CHECK_PTR_EQ(fx_last_post(&fx)->seg, fx.posts[0].seg);
    CHECK_EQ(h->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK, OPAL_BTL_USNIC_HDR_FLAG_ACK);
    CHECK_EQ_U(opal_btl_usnic_host32(h->ack_seq), PEER_ISN + 3);
    CHECK(!ep->rx.ack_owed);
    for (int i = 0; i < 10; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ep->tx.next_seq - 1);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A post refused by the provider does not pay the ACK debt */
static void test_ack_piggyback_not_paid_on_backpressure(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, PEER_ISN);
    size_t cur = 0;
    uint32_t value = 0;
    rx_frag(&fx, PEER_ISN);
    fx.fail_count = 2; /* the fast path's post and the one btl_send tries before returning */
    opal_btl_usnic_send_frag_t *frag = fx_alloc(&fx, ep, 100, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    CHECK_EQ(fx_send(&fx, ep, frag, 9), 0); /* refused: queued instead */
    CHECK_EQ(fx.nposts, 0);
    CHECK(ep->rx.ack_owed);
    CHECK_EQ_U(ep->tx.next_seq, ISN); /* no sequence number consumed */
    opal_btl_usnic_engine_progress(&fx.eng);
    REQUIRE_EQ(fx.nposts, 1);
    CHECK_EQ_U(fx_post_seq(&fx.posts[0]), ISN);
    CHECK_EQ(fx_post_hdr(&fx.posts[0])->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK, OPAL_BTL_USNIC_HDR_FLAG_ACK);
    CHECK(!ep->rx.ack_owed);
    /* explicit ACK refused: still owed, retried */
    rx_frag(&fx, PEER_ISN + 1);
    for (int i = 0; i < 2; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    fx.fail_count = 1;
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    CHECK(ep->rx.ack_owed);
    CHECK_EQ_U(fx.eng.stats.num_send_eagain, 3);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ_U(value, PEER_ISN + 1);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    CHECK(fx_all_recycled(&fx)); /* the refused ACK segment went back too */
    fx_fini(&fx);
}

/* No priority credit: the ACK waits for a send completion */
static void test_ack_waits_for_priority_credit(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    p.sd_credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = 1;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, PEER_ISN);
    size_t cur = 0;
    uint32_t value = 0;
    FX_SEND_TINY(&fx, ep, 1, NULL); /* takes the only priority credit */
    rx_frag(&fx, PEER_ISN);
    for (int i = 0; i < 5; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    CHECK(ep->rx.ack_owed);
    fx_complete_all(&fx);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_ack_urgent_on_duplicates(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    p.ack_iteration_delay = 100;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, PEER_ISN);
    size_t cur = 0;
    uint32_t value = 0;
    rx_frag(&fx, PEER_ISN);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    rx_frag(&fx, PEER_ISN); /* OLD: our ACK was probably lost */
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ_U(value, PEER_ISN);
    /* out of order: ACKed at once, the arrival in the selective ACK bits
     * (bit i = next_expected + 1 + i, next_expected being PEER_ISN + 1) */
    rx_frag(&fx, PEER_ISN + 3);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ_U(value, PEER_ISN);
    CHECK_EQ_U(opal_btl_usnic_host16(fx_post_hdr(fx_last_post(&fx))->sack), 1u << 1);
    /* a DUP inside the window too */
    rx_frag(&fx, PEER_ISN + 3);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ_U(value, PEER_ISN); /* the hole at +1 holds the cumulative ACK */
    /* beyond the window: dropped, no ACK owed */
    rx_frag(&fx, PEER_ISN + 1 + 16);
    CHECK(!ep->rx.ack_owed);
    CHECK_EQ_U(fx.eng.stats.num_oow_high_recvs, 1);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* An ACK that is not urgent waits ack_delay microseconds as well as the
 * ticks: a fast progress loop must not turn every arrival into an
 * explicit ACK before the reply could carry it. */
static void test_ack_waits_for_time_too(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    p.ack_iteration_delay = 1;
    p.ack_delay = 100;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, PEER_ISN);
    size_t cur = 0;
    uint32_t value = 0;
    fx_set_time(&fx, 1000);
    rx_frag(&fx, PEER_ISN);
    for (int i = 0; i < 50; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    fx_set_time(&fx, 1099);
    rx_frag(&fx, PEER_ISN + 1); /* does not postpone the ACK already owed */
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    fx_set_time(&fx, 1100);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ_U(value, PEER_ISN + 1);
    /* a reply within the delay carries the ACK: no explicit one follows */
    rx_frag(&fx, PEER_ISN + 2);
    opal_btl_usnic_engine_progress(&fx.eng);
    FX_SEND_TINY(&fx, ep, 1, NULL);
    CHECK(!ep->rx.ack_owed);
    fx_set_time(&fx, 5000);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    CHECK_EQ_U(fx.eng.stats.num_piggy_acks, 1);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* ... and the ticks as well as the time: */
static void test_ack_ticks_and_time_both_count(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    p.ack_iteration_delay = 5;
    p.ack_delay = 10;
    fx_t fx;
    fx_init(&fx, &p);
    (void) fx_ep_new(&fx, PEER, 64, ISN, PEER_ISN);
    size_t cur = 0;
    uint32_t value = 0;
    fx_set_time(&fx, 1000);
    rx_frag(&fx, PEER_ISN);
    fx_set_time(&fx, 2000); /* long past the time */
    for (int i = 0; i < 4; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    opal_btl_usnic_engine_progress(&fx.eng); /* fifth tick */
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A wire that completes sends inside the post call (fi_inject): tiny
 * frags, chunks, explicit ACKs, retransmissions; nothing leaks and every
 * credit comes back. */
static void test_completion_inside_post(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    fx_t fx;
    fx_init(&fx, &p);
    fx.complete_on_post = true;
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, PEER_ISN);
    size_t cur = 0;
    uint32_t value = 0;
    FX_SEND_TINY(&fx, ep, 3, NULL);
    uint8_t big[5000];
    fx_fill(big, sizeof(big), 7);
    opal_btl_usnic_send_frag_t *frag = fx_prepare_src(&fx, ep, 0, big, sizeof(big), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    REQUIRE(NULL != frag);
    CHECK_EQ(fx_send(&fx, ep, frag, 4), 0);
    fx_progress(&fx);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL], 1024);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1024);
    /* explicit ACKs for the peer's data: their segments recycle at once */
    for (uint32_t i = 0; i < 3; ++i) {
        rx_frag(&fx, PEER_ISN + i);
    }
    for (int i = 0; i < 5; ++i) {
        fx_progress(&fx);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ(fx_free_list_available(&fx.eng.pool.ack_segs), fx_free_list_allocated(&fx.eng.pool.ack_segs));
    /* a timeout retransmission, then everything ACKed */
    CHECK(fx_run_to_timeout(&fx));
    fx_progress(&fx);
    CHECK_GT(fx.eng.stats.num_resends, 0);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ep->tx.next_seq - 1);
    fx_progress(&fx);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL], 1024);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1024);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_ack_urgent_after_half_window(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    p.ack_iteration_delay = 100;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN); /* half = 4 */
    size_t cur = 0;
    uint32_t value = 0;
    for (uint32_t i = 0; i < 3; ++i) {
        rx_frag(&fx, PEER_ISN + i);
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    rx_frag(&fx, PEER_ISN + 3); /* the 4th un-ACKed segment */
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ_U(value, PEER_ISN + 3);
    /* counted from the last ACK sent */
    for (uint32_t i = 4; i < 7; ++i) {
        rx_frag(&fx, PEER_ISN + i);
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    rx_frag(&fx, PEER_ISN + 7);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 1);
    CHECK_EQ_U(value, PEER_ISN + 7);
    /* a piggy-backed ACK resets the count too */
    for (uint32_t i = 8; i < 11; ++i) {
        rx_frag(&fx, PEER_ISN + i);
    }
    FX_SEND_TINY(&fx, ep, 1, NULL);
    rx_frag(&fx, PEER_ISN + 11);
    opal_btl_usnic_engine_progress(&fx.eng);
    CHECK_EQ(explicit_acks(&fx, &cur, &value), 0);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Teardown: forgetting an endpoint's ACK debt, and an endpoint destroyed
 * while it still owes one (seed 001) */
static void test_ack_forget_on_teardown(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, PEER_ISN);
    opal_btl_usnic_endpoint_t *ep2 = fx_ep_new(&fx, PEER + 1, 16, ISN, PEER_ISN);
    rx_frag(&fx, PEER_ISN);
    uint8_t buf[128];
    uint32_t seq = PEER_ISN;
    fx_recv(&fx, buf, fx_build_frag(buf, PEER + 1, seq, 3, &seq, sizeof(seq)));
    CHECK_EQ(opal_list_get_size(&fx.eng.endpoints_needing_ack), 2);
    fx_ep_free(&fx, ep);
    CHECK_EQ(opal_list_get_size(&fx.eng.endpoints_needing_ack), 1);
    for (int i = 0; i < 5; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(fx.nposts, 1);
    CHECK_PTR_EQ(fx.posts[0].ep, ep2);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* ---------------- goodbye (BYE) ---------------- */

/* Our goodbye: one explicit ACK of everything received, flagged BYE, on
 * the priority channel; nothing more owed afterwards */
static void test_bye_send_is_final_ack(void)
{
    opal_btl_usnic_engine_params_t p = sched_params();
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, ISN, PEER_ISN);
    rx_frag(&fx, PEER_ISN);
    rx_frag(&fx, PEER_ISN + 1);
    CHECK(ep->rx.ack_owed);
    CHECK_EQ(opal_btl_usnic_bye_send(&fx.eng, ep), OPAL_SUCCESS);
    CHECK_EQ(fx.nposts, 1);
    const opal_btl_usnic_hdr_t *h = fx_post_hdr(&fx.posts[0]);
    CHECK_EQ(h->type, OPAL_BTL_USNIC_PKT_ACK);
    CHECK(h->flags & OPAL_BTL_USNIC_HDR_FLAG_BYE);
    CHECK(h->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK);
    CHECK_EQ_U(opal_btl_usnic_host32(h->ack_seq), PEER_ISN + 1);
    CHECK_EQ(fx.posts[0].channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    CHECK(!ep->rx.ack_owed);
    CHECK_EQ_U(fx.eng.stats.num_bye_sends, 1);
    for (int i = 0; i < 5; ++i) {
        opal_btl_usnic_engine_progress(&fx.eng);
    }
    CHECK_EQ(fx.nposts, 1); /* no explicit ACK after it */
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* The peer's goodbye: its ACK is taken, what it left un-ACKed is released
 * (counted), its timer stops, it is marked failed, and its later datagrams
 * (another copy of the goodbye, a late data segment) are dropped as
 * departed, not as invalid and never delivered */
static void test_bye_recv_releases_and_refuses(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    size_t full = small_avail(&fx);
    opal_btl_usnic_send_seg_t *segs[4];
    FX_SEND_TINY(&fx, ep, 4, segs);
    fx_complete_all(&fx);
    uint8_t buf[FX_MTU];
    size_t len = fx_build_ack(buf, PEER, ISN + 1);
    ((opal_btl_usnic_hdr_t *) buf)->flags |= OPAL_BTL_USNIC_HDR_FLAG_BYE;
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_bye_recvs, 1);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 3);              /* everything released */
    CHECK_EQ_U(fx.eng.stats.num_departed_unacked, 2); /* two of them by the goodbye, not by its ACK */
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 0);
    CHECK_EQ(small_avail(&fx), full);
    CHECK(ep->departed);
    CHECK(!fx_run_to_timeout(&fx)); /* no timer left to fire */
    CHECK_EQ(fx.nposts, 4);
    CHECK(ep->failed); /* the module fails sends to it (btl_usnic_module.c, up_peer_failed) */
    /* its later datagrams: dropped as departed, not invalid, not delivered */
    fx_recv(&fx, buf, len);
    uint32_t seq = PEER_ISN;
    fx_recv(&fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)));
    CHECK_EQ_U(fx.eng.stats.num_drop_departed, 2);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 0);
    CHECK_EQ_U(fx.eng.stats.num_bye_recvs, 1);
    CHECK_EQ(fx.ndels, 0);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A forged goodbye (wrong tag) changes nothing */
static void test_bye_forged_ignored(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[2];
    FX_SEND_TINY(&fx, ep, 2, segs);
    uint8_t buf[FX_MTU];
    size_t len = fx_build_ack(buf, PEER, ISN - 1);
    ((opal_btl_usnic_hdr_t *) buf)->flags |= OPAL_BTL_USNIC_HDR_FLAG_BYE;
    fx_seal(&fx, buf, len, PEER, 77);
    buf[len - 1] ^= 1; /* the tag no longer matches */
    fx_recv_raw(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_mac, 1);
    CHECK(!ep->departed);
    CHECK_EQ_U(fx.eng.stats.num_bye_recvs, 0);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 2);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 1);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* ---------------- the owner away (resend_away) ---------------- */

/* Overdue un-ACKed segments get copies (same sequence number, RETX, fresh
 * nonce), once per back-off interval; nothing else changes: the originals
 * stay un-ACKed and armed, no peer is declared dead, and the copies are
 * recycled when the provider releases them */
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

UNIT_MAIN(UNIT_TEST(test_ack_cumulative_release), UNIT_TEST(test_ack_release_across_wrap),
          UNIT_TEST(test_ack_duplicate_one_fast_retransmit_per_value), UNIT_TEST(test_ack_stale_ignored),
          UNIT_TEST(test_ack_beyond_sent_ignored_and_counted), UNIT_TEST(test_ack_before_send_completion),
          UNIT_TEST(test_ack_pml_owned_frag_waits_for_free), UNIT_TEST(test_ack_while_queued_for_retransmit),
          UNIT_TEST(test_ack_while_queued_and_posted), UNIT_TEST(test_timer_expiry_then_resend),
          UNIT_TEST(test_timer_expiry_chunk_resend), UNIT_TEST(test_max_resends_per_iteration),
          UNIT_TEST(test_resend_credit_and_backpressure), UNIT_TEST(test_ack_piggybacked_in_peer_data),
          UNIT_TEST(test_ack_explicit_after_delay), UNIT_TEST(test_ack_piggyback_clears_debt),
          UNIT_TEST(test_ack_piggyback_not_paid_on_backpressure), UNIT_TEST(test_ack_waits_for_priority_credit),
          UNIT_TEST(test_ack_urgent_on_duplicates), UNIT_TEST(test_ack_urgent_after_half_window), UNIT_TEST(test_completion_inside_post),
          UNIT_TEST(test_ack_waits_for_time_too), UNIT_TEST(test_ack_ticks_and_time_both_count),
          UNIT_TEST(test_ack_forget_on_teardown), UNIT_TEST(test_bye_send_is_final_ack),
          UNIT_TEST(test_bye_recv_releases_and_refuses), UNIT_TEST(test_bye_forged_ignored),
          UNIT_TEST(test_away_resends_copies_with_backoff), UNIT_TEST(test_away_respects_credits_and_failed_peers))
