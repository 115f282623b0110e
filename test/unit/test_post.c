/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The posting layer (btl_usnic_post.c): retransmissions from the resend
 * list (at most max(max_resends_per_iteration, batch_segs) per pass, only
 * while data credits last, back-pressure), explicit ACKs (the debt is
 * paid only by a post that really left, an ACK waits for a priority
 * credit, a completion inside the post), the goodbye (BYE, the final
 * ACK), and a segment's round trip starting when the wire sends it.
 */
#include "ack_sched.h"
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define ISN 1000u
#define PEER_ISN 5000u

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

/* An endpoint whose nonce count reaches the stop fails its peer at the
 * next progress pass (not inside the post), and no nonce it sealed left
 * its generation */
static void test_nonces_spent_fail_the_peer(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, 1, 64, 100, 200);
    uint64_t generation = ep->tx.nonce >> OPAL_BTL_USNIC_NONCE_COUNT_BITS;
    ep->tx.nonce = (generation << OPAL_BTL_USNIC_NONCE_COUNT_BITS) | (OPAL_BTL_USNIC_NONCE_COUNT_STOP - 2);
    FX_SEND_TINY(&fx, ep, 4, NULL);
    CHECK(ep->tx.nonces_spent);
    CHECK_EQ(fx.peer_failed_calls, 0);
    fx_progress(&fx);
    CHECK_EQ(fx.peer_failed_calls, 1);
    CHECK_EQ(fx.peer_failed_rc, OPAL_ERR_OUT_OF_RESOURCE);
    CHECK(ep->failed);
    CHECK_PTR_EQ(fx.eng.nonces_spent, NULL);
    CHECK(fx.nposts >= 4);
    for (size_t i = 0; i < fx.nposts; ++i) {
        uint64_t nonce = opal_btl_usnic_host64(fx_post_hdr(&fx.posts[i])->nonce);
        CHECK_EQ_U(nonce >> OPAL_BTL_USNIC_NONCE_COUNT_BITS, generation);
        CHECK((nonce & OPAL_BTL_USNIC_NONCE_COUNT_MASK) < OPAL_BTL_USNIC_NONCE_COUNT_STOP + 8);
    }
    /* control: one below the stop is not spent */
    CHECK(!opal_btl_usnic_nonce_spent(OPAL_BTL_USNIC_NONCE_COUNT_STOP - 1));
    CHECK(opal_btl_usnic_nonce_spent(OPAL_BTL_USNIC_NONCE_COUNT_STOP));
    fx_fini(&fx);
}

/* A segment the wire queued and sent later: its round trip (the delay
 * sample of the congestion control) starts when it left, never earlier */
static void test_round_trip_starts_when_the_segment_leaves(void)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.cc_enabled = true;
    fx_t fx;
    fx_init(&fx, &p);
    fx.complete_on_post = true;
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, PEER_ISN);
    fx_set_time(&fx, 1000);
    opal_btl_usnic_send_seg_t *seg = NULL;
    CHECK_EQ_U(fx_send_tiny(&fx, ep, 1, &seg), 1);
    CHECK_EQ_U(seg->sent_time, 1000);
    opal_btl_usnic_seg_leaves(seg, 1400);
    CHECK_EQ_U(seg->sent_time, 1400);
    opal_btl_usnic_seg_leaves(seg, 1200); /* never back */
    CHECK_EQ_U(seg->sent_time, 1400);
    fx_set_time(&fx, 1900);
    uint8_t buf[FX_MTU];
    fx_recv(&fx, buf, fx_build_ack(buf, PEER, ISN)); /* hold 0 */
    CHECK_EQ_U(opal_btl_usnic_endpoint_in_flight(ep), 0);
    CHECK_EQ_U(ep->cc.base_rtt, 500);
    fx_ep_free(&fx, ep);
    fx_fini(&fx);
}

UNIT_MAIN(UNIT_TEST(test_max_resends_per_iteration), UNIT_TEST(test_resend_credit_and_backpressure),
          UNIT_TEST(test_ack_piggyback_not_paid_on_backpressure), UNIT_TEST(test_ack_waits_for_priority_credit),
          UNIT_TEST(test_completion_inside_post), UNIT_TEST(test_bye_send_is_final_ack),
          UNIT_TEST(test_nonces_spent_fail_the_peer), UNIT_TEST(test_round_trip_starts_when_the_segment_leaves))
