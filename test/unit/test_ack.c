/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The sender's side of ACKs (btl_usnic_ack.c): cumulative release (also
 * across the wrap), duplicate ACK -> one fast retransmit per value, stale
 * and impossible ACKs, ACK before the send completion, ACK while queued
 * for retransmission, an ACK piggy-backed on the peer's data, a departed
 * peer (BYE) and a forged goodbye; and the sender's side of selective
 * ACKs (opal_btl_usnic_sack_ranges_take, called from recv.c for an ACK
 * whose cumulative ACK was taken): the ranges mark exactly the held
 * segments SACKED; a hole below the highest held segment is resent only
 * once a held segment of its own channel sent no later proves it lost and
 * it waited a round trip (fixture clock); a range beyond what was sent
 * marks nothing; a SACKED segment waiting on the resend list is dropped
 * from it unsent, and resend_away copies none; only the cumulative ACK
 * releases segments; the ranges of a stale ACK, or of one beyond anything
 * sent, are not taken; an ACK claiming 9 ranges, or shorter than 88
 * bytes, is dropped; the ranges are inside what the tag covers
 * (protection full and header); and the whole loop between two fixture
 * engines.  The hotel and the timing rules are test_ack_hotel.c's; what
 * a receiver owes is test_acktr.c's.
 */
#include "ack_sched.h"
#include "fixture.h"
#include "unit.h"

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
 * segment once; further ones do nothing until it is overdue (test_ack_hotel) */
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
    CHECK(fx_same_but_flags(p, &fx.posts[0], OPAL_BTL_USNIC_HDR_FLAG_RETX)); /* the first transmission's bytes */
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

/* ---------------- goodbye (BYE) ---------------- */

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

#define NR OPAL_BTL_USNIC_SACK_RANGES


/* ---------------- receiver: the ranges of the ACK it sends ---------------- */

typedef struct {
    uint16_t start, len;
} range_t;

/* An explicit ACK from PEER of |ack| with |n| ranges (|nranges| says how
 * many; normally n) and |flags| added */
static size_t build_sack_ack(uint8_t *buf, uint32_t ack, const range_t *r, unsigned n, unsigned nranges,
                             uint8_t flags)
{
    size_t len = fx_build_ack(buf, PEER, ack);
    opal_btl_usnic_ack_hdr_t *a = (opal_btl_usnic_ack_hdr_t *) buf;
    a->hdr.flags |= flags;
    a->nranges = (uint8_t) nranges;
    for (unsigned i = 0; i < n && i < NR; ++i) {
        a->range[i].start = opal_btl_usnic_wire16(r[i].start);
        a->range[i].len = opal_btl_usnic_wire16(r[i].len);
    }
    return len;
}

static void rx_sack(fx_t *fx, uint32_t ack, const range_t *r, unsigned n)
{
    uint8_t buf[FX_ACK_HDR];
    fx_recv(fx, buf, build_sack_ack(buf, ack, r, n, n, 0));
}

/* |segs[0..count)| SACKED exactly where |want| (bit i: segs[i]) says */
static bool sacked_exactly(opal_btl_usnic_send_seg_t **segs, unsigned count, uint64_t want)
{
    bool ok = true;
    for (unsigned i = 0; i < count; ++i) {
        bool is = FX_FLAG(segs[i], SACKED);
        bool should = (want >> i) & 1;
        if (is != should) {
            fprintf(stderr, "  segment %u (seq 0x%x): SACKED %d, expected %d\n", i, (unsigned) segs[i]->seq, is,
                    should);
            ok = false;
        }
    }
    return ok;
}

/* The sequence numbers on the resend list, in order */
static unsigned resend_seqs(fx_t *fx, uint32_t *out, unsigned max)
{
    unsigned n = 0;
    opal_list_item_t *item;
    OPAL_LIST_FOREACH (item, &fx->eng.resend_segs, opal_list_item_t) {
        if (n < max) {
            out[n] = ((opal_btl_usnic_send_seg_t *) item)->seq;
        }
        ++n;
    }
    return n;
}

static bool resend_list_is(fx_t *fx, const uint32_t *want, unsigned n)
{
    uint32_t got[64];
    unsigned k = resend_seqs(fx, got, 64);
    bool ok = CHECK_EQ(k, n);
    for (unsigned i = 0; ok && i < n; ++i) {
        ok = CHECK_EQ_U(got[i], want[i]);
    }
    if (!ok) {
        fprintf(stderr, "  resend list:");
        for (unsigned i = 0; i < k && i < 64; ++i) {
            fprintf(stderr, " 0x%x", got[i]);
        }
        fprintf(stderr, "\n");
    }
    return ok;
}

#define BIT(i) (1ull << (i))
#define BITS(from, n) ((((1ull << (n)) - 1)) << (from))

/* The ranges mark exactly the segments the peer holds; nothing is resent
 * while the holes have not waited a round trip */
static void test_sack_marks_exactly_held(void)
{
    static const struct {
        const char *name;
        uint32_t ack_off;     /* ACK value = ISN - 1 + ack_off */
        range_t r[NR];
        unsigned n;
        uint64_t want;        /* bit i: ISN + i SACKED */
    } cases[] = {
        {"one range", 0, {{1, 3}}, 1, BITS(2, 3)},
        {"two ranges", 0, {{1, 3}, {7, 2}}, 2, BITS(2, 3) | BITS(8, 2)},
        {"right after the hole", 0, {{0, 1}}, 1, BIT(1)},
        {"all but the hole", 0, {{0, 19}}, 1, BITS(1, 19)},
        {"eight ranges of one", 0, {{0, 1}, {2, 1}, {4, 1}, {6, 1}, {8, 1}, {10, 1}, {12, 1}, {14, 1}}, 8,
         BIT(1) | BIT(3) | BIT(5) | BIT(7) | BIT(9) | BIT(11) | BIT(13) | BIT(15)},
        {"after a cumulative ACK of 5", 5, {{0, 2}, {5, 1}}, 2, BITS(6, 2) | BIT(11)},
        {"an empty range", 0, {{3, 0}, {5, 1}}, 2, BIT(6)},
        {"overlapping ranges", 0, {{1, 4}, {3, 4}}, 2, BITS(2, 6)},
        {"ranges out of order", 0, {{9, 1}, {1, 1}}, 2, BIT(10) | BIT(2)},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
        opal_btl_usnic_send_seg_t *segs[20];
        FX_SEND_TINY(&fx, ep, 20, segs);
        fx_complete_all(&fx);
        fx_set_time(&fx, 50); /* less than a round trip (rto_min, no sample yet) */
        uint32_t a = cases[c].ack_off;
        rx_sack(&fx, ISN - 1 + a, cases[c].r, cases[c].n);
        CHECK_EQ_U(ep->tx.acked_seq, ISN - 1 + a);
        /* the ACKed ones are gone; of the rest, exactly the held are SACKED */
        bool ok = sacked_exactly(segs + a, 20 - a, cases[c].want >> a);
        ok = CHECK_EQ(fx_resend_len(&fx), 0) && ok;
        ok = CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 0) && ok;
        ok = CHECK(fx_hotel_consistent(&fx)) && ok; /* marking stops no timer */
        if (!ok) {
            fprintf(stderr, "  case \"%s\"\n", cases[c].name);
        }
        opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 19);
        CHECK(fx_all_recycled(&fx));
        fx_fini(&fx);
    }
}

/* Holes below the highest held segment are resent once they waited a
 * round trip: not before, never a held one, never one above the highest
 * held; a copy only once a segment sent after it is held (a round trip
 * alone proves nothing: behind a slow receiver it may still be queued) */
static void test_sack_holes_resent_when_overdue(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[20];
    FX_SEND_TINY(&fx, ep, 20, segs);
    fx_complete_all(&fx);
    const range_t r[] = {{1, 3}, {7, 2}}; /* held: ISN+2..4, ISN+8..9 */
    /* a round trip is rto_min (200) without an RTT sample */
    fx_set_time(&fx, FX_RTO_MIN - 1);
    rx_sack(&fx, ISN - 1, r, 2);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK(sacked_exactly(segs, 20, BITS(2, 3) | BITS(8, 2)));
    fx_set_time(&fx, FX_RTO_MIN);
    rx_sack(&fx, ISN - 1, r, 2);
    static const uint32_t holes[] = {ISN, ISN + 1, ISN + 5, ISN + 6, ISN + 7};
    CHECK(resend_list_is(&fx, holes, 5));
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 5);
    CHECK_EQ_U(fx.eng.stats.num_timeout_retrans + fx.eng.stats.num_fast_retrans, 0);
    for (unsigned i = 10; i < 20; ++i) {
        CHECK(!FX_FLAG(segs[i], ON_RESEND)); /* above the highest held: maybe in flight still */
    }
    /* progress posts them, on the data channel, flagged as retransmissions */
    size_t first = fx.nposts;
    CHECK_EQ(fx_progress(&fx), 5);
    REQUIRE_EQ(fx.nposts, first + 5);
    for (unsigned i = 0; i < 5; ++i) {
        const fx_post_t *p = &fx.posts[first + i];
        CHECK_EQ_U(fx_post_seq(p), holes[i]);
        CHECK_EQ(p->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
        CHECK(fx_post_hdr(p)->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX);
        CHECK(!(fx_post_hdr(p)->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT));
    }
    fx_complete_all(&fx);
    /* the same report a moment later: the holes were just resent */
    fx_set_time(&fx, FX_RTO_MIN + FX_RTO_MIN / 2);
    rx_sack(&fx, ISN - 1, r, 2);
    CHECK_EQ(fx_resend_len(&fx), 0);
    /* a round trip after the resend: nothing held was sent after the
     * copies, so nothing proves them lost (behind a slow receiver they may
     * still be queued): their timeout decides */
    fx_set_time(&fx, 2 * FX_RTO_MIN);
    rx_sack(&fx, ISN - 1, r, 2);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 5);
    /* two fragments sent after the copies (on the data channel, behind
     * them) are held: the copies are lost too (not ISN+10..19: priority
     * originals, which a later data segment does not prove lost) */
    opal_btl_usnic_send_seg_t *later[2];
    FX_SEND_TINY(&fx, ep, 2, later);
    CHECK_EQ(later[0]->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    fx_complete_all(&fx);
    fx_set_time(&fx, 3 * FX_RTO_MIN);
    const range_t r_later[] = {{1, 3}, {7, 2}, {19, 2}}; /* ... and ISN+20, ISN+21 */
    rx_sack(&fx, ISN - 1, r_later, 3);
    CHECK(resend_list_is(&fx, holes, 5));
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 10);
    CHECK_EQ(fx_progress(&fx), 5);
    fx_complete_all(&fx);
    /* a partial cumulative ACK: the ranges are relative to the new value;
     * one more fragment sent with the second copies (same time, later
     * position) proves ISN+7's lost */
    FX_SEND_TINY(&fx, ep, 1, NULL);
    fx_complete_all(&fx);
    fx_set_time(&fx, 4 * FX_RTO_MIN);
    const range_t r2[] = {{0, 15}}; /* ACK ISN+6: ISN+8..ISN+22 held, ISN+7 the hole */
    rx_sack(&fx, ISN + 6, r2, 1);
    static const uint32_t hole7[] = {ISN + 7};
    CHECK(resend_list_is(&fx, hole7, 1));
    fx_progress(&fx);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 22);
    CHECK(fx_hotel_consistent(&fx));
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* One 1000-byte fragment to |ep|, posted (on the data channel: larger
 * than the priority channel's datagrams) */
static void send_data_frag(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint8_t tag)
{
    opal_btl_usnic_send_frag_t *frag = fx_alloc(fx, ep, 1000, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    REQUIRE(NULL != frag);
    fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, 1000, tag);
    CHECK_EQ(fx_send(fx, ep, frag, tag), 0);
    opal_btl_usnic_engine_progress(&fx->eng);
}

/* A channel is a socket, and a socket delivers in order.  A large
 * fragment on the data channel (ISN), a tiny one behind it (ISN+1: the
 * data channel too, since ISN is un-ACKed), and once both are ACKed three
 * tiny ones on the priority channel (ISN+2..4) and a large one (ISN+5,
 * data).  A later priority segment held proves a priority hole lost; a
 * later data one does not (a receiver reads each channel in bounded turns,
 * and behind a slow one data overtakes queued priority datagrams). */
static void test_sack_needs_a_later_segment_of_the_same_channel(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    send_data_frag(&fx, ep, 7);
    FX_SEND_TINY(&fx, ep, 1, NULL);
    REQUIRE_EQ(fx.nposts, 2);
    CHECK_EQ(fx.posts[0].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    CHECK_EQ(fx.posts[1].channel, OPAL_BTL_USNIC_DATA_CHANNEL); /* behind the un-ACKed data segment */
    fx_complete_all(&fx);
    fx_set_time(&fx, 10 * FX_RTO_MIN);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 1);
    FX_SEND_TINY(&fx, ep, 3, NULL);
    send_data_frag(&fx, ep, 8);
    REQUIRE_EQ(fx.nposts, 6);
    for (size_t i = 2; i < 5; ++i) {
        CHECK_EQ(fx.posts[i].channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL); /* nothing of the data channel un-ACKed */
    }
    CHECK_EQ(fx.posts[5].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    fx_complete_all(&fx);
    fx_set_time(&fx, 20 * FX_RTO_MIN); /* long overdue */
    /* ACK ISN+2; ISN+4 (priority) held: ISN+3 (priority) is proven lost,
     * ISN+5 (above the highest held) may still be on its way */
    const range_t prio_held[] = {{0, 1}}; /* ACK ISN+2: ISN+4 held */
    rx_sack(&fx, ISN + 2, prio_held, 1);
    static const uint32_t lost3[] = {ISN + 3};
    CHECK(resend_list_is(&fx, lost3, 1));
    fx_progress(&fx);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 5);
    /* a priority segment (ISN+6, nothing un-ACKed) then a data one (ISN+7):
     * the data one held proves nothing about the priority hole, however
     * overdue */
    FX_SEND_TINY(&fx, ep, 1, NULL);
    CHECK_EQ(fx_last_post(&fx)->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    send_data_frag(&fx, ep, 9);
    fx_complete_all(&fx);
    fx_set_time(&fx, 30 * FX_RTO_MIN);
    const range_t data_held[] = {{0, 1}}; /* ACK ISN+5: ISN+6 missing, ISN+7 held */
    rx_sack(&fx, ISN + 5, data_held, 1);
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 1);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 7);
    CHECK(fx_hotel_consistent(&fx));
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A data hole is not proven by later priority segments, however
 * overdue: tiny ones overtake data ones */
static void test_sack_priority_segments_prove_no_data_loss(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    send_data_frag(&fx, ep, 7);
    /* tiny ones that took the priority channel past it (as a peer that
     * overtakes would send them): their channel says so */
    FX_SEND_TINY(&fx, ep, 3, NULL);
    REQUIRE_EQ(fx.nposts, 4);
    for (size_t i = 1; i < 4; ++i) {
        fx.posts[i].seg->channel = OPAL_BTL_USNIC_PRIORITY_CHANNEL;
    }
    fx_complete_all(&fx);
    fx_set_time(&fx, 10 * FX_RTO_MIN);
    const range_t r[] = {{0, 3}}; /* ISN+1..3 held, ISN the hole */
    rx_sack(&fx, ISN - 1, r, 1);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 0);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 3);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* With an RTT estimate the round trip is srtt + rttvar (under rto_min) */
static void test_sack_overdue_uses_rtt(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    /* one sample of 40 us: srtt 40, rttvar 20: a round trip is 60 us */
    FX_SEND_TINY(&fx, ep, 1, NULL);
    fx_complete_all(&fx);
    fx_set_time(&fx, 40);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    REQUIRE_EQ(ep->timer.srtt, 40);
    REQUIRE_EQ(ep->timer.rttvar, 20);
    opal_btl_usnic_send_seg_t *segs[6];
    FX_SEND_TINY(&fx, ep, 6, segs); /* ISN+1..ISN+6, sent at 40 */
    fx_complete_all(&fx);
    const range_t r[] = {{2, 1}}; /* ACK ISN: ISN+4 held; holes ISN+1..ISN+3 */
    fx_set_time(&fx, 40 + 59);
    rx_sack(&fx, ISN, r, 1);
    CHECK_EQ(fx_resend_len(&fx), 0);
    fx_set_time(&fx, 40 + 60);
    rx_sack(&fx, ISN, r, 1);
    static const uint32_t holes[] = {ISN + 1, ISN + 2, ISN + 3};
    CHECK(resend_list_is(&fx, holes, 3));
    CHECK(FX_FLAG(segs[3], SACKED));
    fx_progress(&fx);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 6);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A range that runs past what was sent marks what was sent of it; one
 * that starts past it marks nothing; nothing crashes (ASan) */
static void test_sack_range_past_sent_clamped(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[5];
    FX_SEND_TINY(&fx, ep, 5, segs);
    fx_complete_all(&fx);
    /* at once (not overdue): only the marks are looked at here */
    const range_t r[] = {{2, 100}, {60000, 65535}, {65535, 65535}, {4, 1}, {31, 1}, {0, 0}, {65535, 0}, {5, 65535}};
    rx_sack(&fx, ISN - 1, r, NR);
    CHECK(sacked_exactly(segs, 5, BITS(3, 2))); /* ISN+3 and ISN+4: sent, and inside the first range */
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1);
    /* nothing beyond next_seq exists to be marked: the window slots past
     * it are empty */
    for (uint32_t s = ISN + 5; s != ISN - 1 + 32; ++s) {
        CHECK(NULL == ep->tx.sent[s % ep->window]);
    }
    /* the largest values on an ACK that also advances */
    const range_t big[] = {{65535, 65535}};
    rx_sack(&fx, ISN + 1, big, 1);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 1);
    CHECK(sacked_exactly(segs + 2, 3, BITS(1, 2)));
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/*
 * Regression (an engine bug this test found): a range wholly beyond what
 * was sent once raised the top of the holes anyway (its end clamped to
 * what is in flight), so every overdue in-flight segment was resent as a
 * hole.  Such a range teaches nothing: nothing marked, nothing resent.
 */
static void test_sack_range_wholly_past_sent_ignored(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[5];
    FX_SEND_TINY(&fx, ep, 5, segs);
    fx_complete_all(&fx);
    fx_set_time(&fx, 300); /* overdue (a round trip is rto_min, 200), before the timeout (1000) */
    const range_t r[] = {{10, 5}};
    rx_sack(&fx, ISN - 1, r, 1);
    CHECK(sacked_exactly(segs, 5, 0));
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 0);
    fx_progress(&fx);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK(fx_all_recycled(&fx));
    (void) ep;
    fx_fini(&fx);
}

/* A segment queued for retransmission that the peer then reports held
 * leaves the resend list unsent; resend_away copies no SACKED segment */
static void test_sack_skips_queued_and_away(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[8];
    FX_SEND_TINY(&fx, ep, 8, segs);
    fx_complete_all(&fx);
    fx_set_time(&fx, FX_RTO_MIN);
    const range_t r1[] = {{2, 1}}; /* ISN+3 held: ISN..ISN+2 are holes, overdue */
    rx_sack(&fx, ISN - 1, r1, 1);
    static const uint32_t holes[] = {ISN, ISN + 1, ISN + 2};
    REQUIRE(resend_list_is(&fx, holes, 3));
    /* before the next progress pass, ISN+1 and ISN+2 arrive after all */
    const range_t r2[] = {{0, 3}};
    rx_sack(&fx, ISN - 1, r2, 1);
    CHECK(sacked_exactly(segs, 8, BITS(1, 3)));
    CHECK(FX_FLAG(segs[1], ON_RESEND) && FX_FLAG(segs[2], ON_RESEND)); /* still queued ... */
    size_t first = fx.nposts;
    CHECK_EQ(fx_progress(&fx), 1); /* ... but only ISN goes */
    REQUIRE_EQ(fx.nposts, first + 1);
    CHECK_EQ_U(fx_post_seq(&fx.posts[first]), ISN);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK(!FX_FLAG(segs[1], ON_RESEND) && !FX_FLAG(segs[2], ON_RESEND));
    CHECK_EQ_U(fx.eng.stats.num_resends, 1);
    fx_complete_all(&fx);
    /* held, unsent again, kept until the cumulative ACK */
    CHECK(!FX_FLAG(segs[1], ACKED) && FX_FLAG(segs[1], IN_WINDOW));
    CHECK(fx_hotel_consistent(&fx));

    /* resend_away: copies of overdue segments, but not of held ones */
    fx_set_time(&fx, 5000); /* everything overdue by far */
    unsigned flushes = fx.flushes;
    first = fx.nposts;
    int copies = opal_btl_usnic_resend_away(&fx.eng);
    /* not held: ISN, ISN+4..ISN+7 (ISN+1..ISN+3 are SACKED) */
    CHECK_EQ(copies, 5);
    REQUIRE_EQ(fx.nposts, first + 5);
    static const uint32_t away[] = {ISN, ISN + 4, ISN + 5, ISN + 6, ISN + 7};
    for (unsigned i = 0; i < 5; ++i) {
        CHECK_EQ_U(fx_post_seq(&fx.posts[first + i]), away[i]);
        CHECK_EQ(fx.posts[first + i].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    }
    CHECK_EQ(fx.flushes, flushes + 1);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 7);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Only the cumulative ACK releases: a SACKED segment keeps its slot, its
 * buffer and its timer until the ACK passes it (a selective ACK is advice:
 * the peer could still lose what it reported, as far as the protocol goes) */
static void test_sack_only_cumulative_releases(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    size_t full = fx_small_frags_available(&fx);
    opal_btl_usnic_send_seg_t *segs[10];
    FX_SEND_TINY(&fx, ep, 10, segs);
    /* ISN+8, ISN+9 not yet completed by the provider */
    for (int i = 0; i < 8; ++i) {
        fx_complete(&fx, segs[i]);
    }
    const range_t r[] = {{0, 4}, {6, 3}}; /* held: ISN+1..ISN+4, ISN+7..ISN+9 */
    rx_sack(&fx, ISN - 1, r, 2);
    CHECK(sacked_exactly(segs, 10, BITS(1, 4) | BITS(7, 3)));
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 10);
    CHECK_EQ(fx_small_frags_available(&fx), full - 10);
    for (int i = 0; i < 10; ++i) {
        CHECK(FX_FLAG(segs[i], IN_WINDOW) && !FX_FLAG(segs[i], ACKED));
        CHECK_PTR_EQ(ep->tx.sent[(ISN + i) % 32], segs[i]);
        CHECK(FX_FLAG(segs[i], IN_HOTEL));
    }
    CHECK(fx_hotel_consistent(&fx));
    /* the oldest is no SACKED segment: the timer still watches the hole */
    CHECK_EQ_U(opal_btl_usnic_engine_next_deadline(&fx.eng), segs[0]->deadline);
    /* a cumulative ACK to ISN+4 releases ISN..ISN+4, held ones included */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 5);
    CHECK_EQ(fx_small_frags_available(&fx), full - 5);
    CHECK(FX_FLAG(segs[7], SACKED) && FX_FLAG(segs[8], SACKED) && FX_FLAG(segs[9], SACKED));
    /* to the end: ISN+8 and ISN+9 wait for their completions */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 9);
    CHECK(opal_btl_usnic_endpoint_drained(ep));
    CHECK_EQ(fx_small_frags_available(&fx), full - 2);
    fx_complete_all(&fx);
    CHECK_EQ(fx_small_frags_available(&fx), full);
    CHECK(fx_hotel_consistent(&fx));
    CHECK(fx_all_recycled(&fx));
    /* a recycled segment starts clean: no SACKED left on its next send */
    opal_btl_usnic_send_seg_t *again[10];
    FX_SEND_TINY(&fx, ep, 10, again);
    for (int i = 0; i < 10; ++i) {
        CHECK(!FX_FLAG(again[i], SACKED));
    }
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 19);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* The ranges of an ACK whose cumulative ACK is not taken are not taken
 * either: a stale ACK (below acked_seq) and one beyond anything sent */
static void test_sack_stale_and_impossible_ignored(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[16];
    FX_SEND_TINY(&fx, ep, 16, segs);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    fx_set_time(&fx, 4 * FX_RTO_MIN); /* every hole overdue (before the timeout): any taken range would resend */
    /* stale: ACK ISN+1 with ranges that would mark ISN+3.. (relative to it) */
    const range_t r[] = {{0, 10}};
    uint64_t old = fx.eng.stats.num_old_dup_acks;
    rx_sack(&fx, ISN + 1, r, 1);
    CHECK_EQ_U(fx.eng.stats.num_old_dup_acks, old + 1);
    CHECK(sacked_exactly(segs + 5, 11, 0));
    CHECK_EQ(fx_resend_len(&fx), 0);
    /* beyond anything sent */
    uint64_t invalid = fx.eng.stats.num_invalid_recvs;
    rx_sack(&fx, ISN + 16, r, 1);
    rx_sack(&fx, ISN + 1000, r, 1);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, invalid + 2);
    CHECK(sacked_exactly(segs + 5, 11, 0));
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 4);
    /* a duplicate of the current value is taken (the ranges are relative to it) */
    const range_t d[] = {{1, 2}};
    rx_sack(&fx, ISN + 4, d, 1);
    CHECK(sacked_exactly(segs + 5, 11, BITS(2, 2)));
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 15);
    fx_progress(&fx);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* hdr_check through the engine: 8 ranges taken, 9 dropped (BAD_SACK), an
 * ACK shorter than 88 bytes dropped (TRUNCATED); a dropped ACK changes
 * nothing */
static void test_sack_nranges_checked(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[20];
    FX_SEND_TINY(&fx, ep, 20, segs);
    fx_complete_all(&fx);
    const range_t r[NR] = {{0, 1}, {2, 1}, {4, 1}, {6, 1}, {8, 1}, {10, 1}, {12, 1}, {14, 1}};
    uint8_t buf[FX_ACK_HDR + 8];
    /* 9 claimed */
    size_t len = build_sack_ack(buf, ISN + 1, r, NR, NR + 1, 0);
    CHECK_EQ(opal_btl_usnic_hdr_check(buf, len), 1 + OPAL_BTL_USNIC_DROP_BAD_SACK);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_sack, 1);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 1);
    CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 0);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1); /* not even the cumulative ACK */
    CHECK(sacked_exactly(segs, 20, 0));
    /* 255 claimed */
    len = build_sack_ack(buf, ISN + 1, r, NR, 255, 0);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_sack, 2);
    /* the ACK of version 3 (52 bytes), and one byte short of 88 */
    static const size_t shorts[] = {FX_HDR, FX_ACK_HDR - 1, FX_HDR + 4};
    for (size_t i = 0; i < 3; ++i) {
        len = build_sack_ack(buf, ISN + 1, r, NR, NR, 0);
        fx_recv(&fx, buf, shorts[i]);
    }
    CHECK_EQ_U(fx.eng.stats.num_drop_truncated, 3);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1);
    CHECK(sacked_exactly(segs, 20, 0));
    /* trailing bytes beyond 88 are allowed (the tag covers them with protection full) */
    len = build_sack_ack(buf, ISN + 1, r, NR, NR, 0);
    memset(buf + len, 0, 8);
    CHECK_EQ(opal_btl_usnic_hdr_check(buf, len + 8), OPAL_BTL_USNIC_VALID);
    /* exactly 8: taken */
    len = build_sack_ack(buf, ISN + 1, r, NR, NR, 0);
    CHECK_EQ(opal_btl_usnic_hdr_check(buf, len), OPAL_BTL_USNIC_VALID);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 1);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_sack, 2);
    /* relative to ISN+1: ISN+3, ISN+5, ..., ISN+17 */
    CHECK(sacked_exactly(segs, 20,
                         BIT(3) | BIT(5) | BIT(7) | BIT(9) | BIT(11) | BIT(13) | BIT(15) | BIT(17)));
    /* nranges 0 with stale bytes in the range fields: nothing marked */
    len = build_sack_ack(buf, ISN + 2, r, NR, 0, 0);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 2);
    CHECK(sacked_exactly(segs + 3, 17, BIT(0) | BIT(2) | BIT(4) | BIT(6) | BIT(8) | BIT(10) | BIT(12) | BIT(14)));
    /* nranges 2: only the first two of the 8 filled in */
    len = build_sack_ack(buf, ISN + 2, r, NR, 2, 0);
    fx_recv(&fx, buf, len);
    CHECK(sacked_exactly(segs + 3, 17, BIT(0) | BIT(2) | BIT(4) | BIT(6) | BIT(8) | BIT(10) | BIT(12) | BIT(14) |
                                           BIT(1) | BIT(3)));
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 19);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* The tag covers the ranges (protection full, and header: the 88 bytes of
 * the ACK header): any byte of nranges, reserved or the ranges changed
 * after sealing makes the ACK unauthentic; nothing of it is taken */
static void test_sack_ranges_inside_mac(void)
{
    static const int modes[] = {OPAL_BTL_USNIC_PROTECT_FULL, OPAL_BTL_USNIC_PROTECT_HEADER};
    for (size_t m = 0; m < 2; ++m) {
        opal_btl_usnic_engine_params_t p;
        fx_params_default(&p);
        p.protect = modes[m];
        fx_t fx;
        fx_init(&fx, &p);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
        opal_btl_usnic_send_seg_t *segs[20];
        FX_SEND_TINY(&fx, ep, 20, segs);
        fx_complete_all(&fx);
        const range_t r[] = {{1, 2}, {5, 1}, {9, 4}};
        uint8_t good[FX_ACK_HDR], bad[FX_ACK_HDR];
        size_t len = build_sack_ack(good, ISN - 1, r, 3, 3, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW);
        uint64_t nonce = 100;
        unsigned tampered = 0;
        for (size_t off = FX_HDR; off < FX_ACK_HDR; ++off) {
            memcpy(bad, good, len);
            fx_seal(&fx, bad, len, PEER, ++nonce);
            bad[off] ^= (off == FX_HDR) ? 0x01 : 0x10; /* nranges stays <= 8 */
            fx_recv_raw(&fx, bad, len);
            ++tampered;
        }
        bool ok = CHECK_EQ_U(fx.eng.stats.num_drop_bad_mac, tampered);
        ok = CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 0) && ok;
        ok = CHECK(sacked_exactly(segs, 20, 0)) && ok;
        /* the genuine one is taken */
        memcpy(bad, good, len);
        fx_seal(&fx, bad, len, PEER, ++nonce);
        fx_recv_raw(&fx, bad, len);
        ok = CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 1) && ok;
        ok = CHECK(sacked_exactly(segs, 20, BITS(2, 2) | BIT(6) | BITS(10, 4))) && ok;
        /* its replay is not taken (ranges included) */
        const range_t more[] = {{14, 1}};
        build_sack_ack(good, ISN - 1, more, 1, 1, 0);
        fx_seal(&fx, good, len, PEER, nonce); /* the nonce of the one already taken */
        fx_recv_raw(&fx, good, len);
        ok = CHECK_EQ_U(fx.eng.stats.num_drop_replay, 1) && ok;
        ok = CHECK(!FX_FLAG(segs[15], SACKED)) && ok;
        if (!ok) {
            fprintf(stderr, "  protection %d\n", modes[m]);
        }
        opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 19);
        CHECK(fx_all_recycled(&fx));
        fx_fini(&fx);
    }
}

/* ---------------- both ends ---------------- */

/* Two fixture engines: A sends 40 tiny fragments, some are lost on the
 * way to B, B's ACK (built by the engine, ranges and all) goes back to A:
 * A marks exactly what B holds beyond its first hole (the first 8 runs),
 * resends the holes below the highest once overdue, and B then has
 * everything; A releases everything on B's cumulative ACK. */
static void test_sack_between_two_engines(void)
{
    opal_btl_usnic_engine_params_t pa, pb;
    fx_params_default(&pa);
    fx_params_default(&pb);
    pa.my_name = 0;
    pb.my_name = 1;
    fx_t a, b;
    fx_init(&a, &pa);
    fx_init(&b, &pb);
    opal_btl_usnic_endpoint_t *ea = fx_ep_new(&a, 1, 64, ISN, PEER_ISN);
    opal_btl_usnic_endpoint_t *eb = fx_ep_new(&b, 0, 64, PEER_ISN, ISN);
    opal_btl_usnic_send_seg_t *segs[41];
    FX_SEND_TINY(&a, ea, 40, segs);
    REQUIRE_EQ(a.nposts, 40);
    /* lost on the way: 0, 4, 5, 9, 12..14, 20, 22, 24, 26, 28, 30, 35 (11 runs held beyond the first hole) */
    static const int lost[] = {0, 4, 5, 9, 12, 13, 14, 20, 22, 24, 26, 28, 30, 35};
    uint64_t lost_mask = 0;
    for (size_t i = 0; i < sizeof(lost) / sizeof(lost[0]); ++i) {
        lost_mask |= BIT(lost[i]);
    }
    for (int i = 0; i < 40; ++i) {
        if (!((lost_mask >> i) & 1)) {
            fx_recv_raw(&b, a.posts[i].bytes, a.posts[i].len);
        }
    }
    fx_complete_all(&a);
    CHECK_EQ(b.ndels, 0); /* nothing in order yet */
    fx_progress(&b);
    ack_view_t v;
    REQUIRE(ack_sched_last_ack(&b, &v));
    CHECK_EQ_U(v.ack, ISN - 1);
    CHECK_EQ(v.n, NR); /* 11 runs held: the first 8 */
    /* B holds 1..3, 6..8, 10..11, 15..19, 21, 23, 25, 27 in its first 8 runs */
    uint64_t held8 = BITS(1, 3) | BITS(6, 3) | BITS(10, 2) | BITS(15, 5) | BIT(21) | BIT(23) | BIT(25) | BIT(27);
    fx_recv_raw(&a, b.posts[b.nposts - 1].bytes, b.posts[b.nposts - 1].len);
    CHECK(sacked_exactly(segs, 40, held8));
    CHECK_EQ(fx_resend_len(&a), 0); /* no time passed: not overdue */
    /* a round trip later: the same ACK again is a replay (dropped, as a
     * copy the network made), a copy of a datagram B has too */
    fx_set_time(&a, FX_RTO_MIN);
    fx_set_time(&b, FX_RTO_MIN);
    fx_recv_raw(&a, b.posts[b.nposts - 1].bytes, b.posts[b.nposts - 1].len);
    CHECK_EQ_U(a.eng.stats.num_drop_replay, 1);
    fx_recv_raw(&b, a.posts[1].bytes, a.posts[1].len);
    CHECK_EQ_U(b.eng.stats.num_drop_replay, 1);
    /* A sends one more (ISN+40), B ACKs it at once (out of order), and A
     * resends every hole below the highest held of the 8 ranges, ISN+27 */
    FX_SEND_TINY(&a, ea, 1, &segs[40]);
    fx_recv_raw(&b, a.posts[a.nposts - 1].bytes, a.posts[a.nposts - 1].len);
    size_t bp = b.nposts;
    fx_progress(&b);
    REQUIRE_EQ(b.nposts, bp + 1);
    fx_recv_raw(&a, b.posts[bp].bytes, b.posts[bp].len);
    uint32_t want[16];
    unsigned nw = 0;
    for (int i = 0; i < 27; ++i) {
        if (!((held8 >> i) & 1)) {
            want[nw++] = ISN + (uint32_t) i;
        }
    }
    CHECK(resend_list_is(&a, want, nw)); /* 0, 4, 5, 9, 12, 13, 14, 20, 22, 24, 26 */
    size_t ap = a.nposts;
    fx_progress(&a);
    REQUIRE_EQ(a.nposts, ap + nw);
    for (size_t i = ap; i < a.nposts; ++i) {
        fx_recv_raw(&b, a.posts[i].bytes, a.posts[i].len);
    }
    fx_complete_all(&a);
    /* B has everything up to ISN+27 now; 28, 30 and 35 were beyond its 8th range */
    CHECK_EQ_U(eb->rx.next_expected, ISN + 28);
    bp = b.nposts;
    for (int i = 0; i < 6; ++i) { /* the holes came in order: an ACK after the delay */
        fx_progress(&b);
    }
    REQUIRE_EQ(b.nposts, bp + 1);
    REQUIRE(ack_sched_last_ack(&b, &v));
    CHECK_EQ_U(v.ack, ISN + 27);
    CHECK_EQ(v.n, 3); /* 29, 31..34 and 36..40, relative to ISN+27 */
    CHECK_EQ(v.start[0], 0);
    CHECK_EQ(v.len[0], 1);
    CHECK_EQ(v.start[1], 2);
    CHECK_EQ(v.len[1], 4);
    CHECK_EQ(v.start[2], 7);
    CHECK_EQ(v.len[2], 5);
    fx_recv_raw(&a, b.posts[bp].bytes, b.posts[bp].len);
    CHECK_EQ_U(ea->tx.acked_seq, ISN + 27);
    /* the last holes were sent at 0: overdue, they go at once */
    static const uint32_t last_holes[] = {ISN + 28, ISN + 30, ISN + 35};
    CHECK(resend_list_is(&a, last_holes, 3));
    CHECK(sacked_exactly(segs + 28, 13, BIT(1) | BITS(3, 4) | BITS(8, 5)));
    ap = a.nposts;
    fx_progress(&a);
    CHECK_EQ(a.nposts, ap + 3);
    for (size_t i = ap; i < a.nposts; ++i) {
        fx_recv_raw(&b, a.posts[i].bytes, a.posts[i].len);
    }
    fx_complete_all(&a);
    CHECK_EQ_U(eb->rx.next_expected, ISN + 41);
    CHECK_EQ(b.ndels, 41);
    for (size_t i = 0; i < b.ndels; ++i) {
        CHECK_EQ(b.dels[i].len, 100);
    }
    bp = b.nposts;
    fx_set_time(&b, 1000000);
    for (int i = 0; i < 6; ++i) {
        fx_progress(&b);
    }
    REQUIRE(ack_sched_last_ack(&b, &v));
    CHECK_EQ_U(v.ack, ISN + 40);
    CHECK_EQ(v.n, 0);
    fx_recv_raw(&a, b.posts[b.nposts - 1].bytes, b.posts[b.nposts - 1].len);
    CHECK(opal_btl_usnic_endpoint_drained(ea));
    CHECK_EQ_U(a.eng.stats.num_resends, nw + 3);
    CHECK_EQ_U(a.eng.stats.num_timeout_retrans, 0);
    CHECK(fx_all_recycled(&a));
    fx_complete_all(&b);
    CHECK(fx_all_recycled(&b));
    fx_fini(&a);
    fx_fini(&b);
}

UNIT_MAIN(UNIT_TEST(test_sack_marks_exactly_held), UNIT_TEST(test_sack_holes_resent_when_overdue),
          UNIT_TEST(test_sack_needs_a_later_segment_of_the_same_channel),
          UNIT_TEST(test_sack_priority_segments_prove_no_data_loss), UNIT_TEST(test_sack_overdue_uses_rtt),
          UNIT_TEST(test_sack_range_past_sent_clamped), UNIT_TEST(test_sack_range_wholly_past_sent_ignored),
          UNIT_TEST(test_sack_skips_queued_and_away), UNIT_TEST(test_sack_only_cumulative_releases),
          UNIT_TEST(test_sack_stale_and_impossible_ignored), UNIT_TEST(test_sack_nranges_checked),
          UNIT_TEST(test_sack_ranges_inside_mac), UNIT_TEST(test_sack_between_two_engines),
          UNIT_TEST(test_ack_cumulative_release), UNIT_TEST(test_ack_release_across_wrap),
          UNIT_TEST(test_ack_duplicate_one_fast_retransmit_per_value), UNIT_TEST(test_ack_stale_ignored),
          UNIT_TEST(test_ack_beyond_sent_ignored_and_counted), UNIT_TEST(test_ack_before_send_completion),
          UNIT_TEST(test_ack_pml_owned_frag_waits_for_free), UNIT_TEST(test_ack_while_queued_for_retransmit),
          UNIT_TEST(test_ack_while_queued_and_posted), UNIT_TEST(test_ack_piggybacked_in_peer_data),
          UNIT_TEST(test_bye_recv_releases_and_refuses), UNIT_TEST(test_bye_forged_ignored))
