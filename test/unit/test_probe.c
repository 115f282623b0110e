/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The path MTU search's driver (btl_usnic_probe.c) and the posting
 * layer's part in it, on one engine with the fixture's wire: the search
 * starts at the peer's first answer, a probe goes from the progress
 * function, an echo changes the sizes the endpoint uses, a probe we get
 * is echoed at once, and a datagram larger than the path leaves as pieces
 * that put the sealed datagram back together byte for byte.
 */
#include "fixture.h"
#include "unit.h"

#include "btl_usnic_pmtu.h"
#include "btl_usnic_probe.h"

#define PEER 1
#define LISN 100
#define PISN 500
#define MTU 8972

static opal_btl_usnic_endpoint_t *setup(fx_t *fx)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.mtu = MTU;
    p.pmtu_discovery = true;
    p.pmtu_base = 1252;
    p.pmtu_reprobe = 1000000;
    fx_init(fx, &p);
    return fx_ep_new(fx, PEER, 64, LISN, PISN);
}

/* An ACK from the peer (nothing new) with |echo| as its probe echo */
static void recv_ack(fx_t *fx, uint16_t echo)
{
    uint8_t buf[FX_ACK_HDR];
    size_t len = fx_build_ack(buf, PEER, LISN - 1);
    ((opal_btl_usnic_ack_hdr_t *) buf)->probe_echo = opal_btl_usnic_wire16(echo);
    fx_recv(fx, buf, len);
}

static void test_search_starts_at_first_answer(void)
{
    fx_t fx;
    opal_btl_usnic_endpoint_t *ep = setup(&fx);
    CHECK_EQ_U(ep->pmtu.cur, 1252);
    CHECK_EQ_U(ep->max_frag_payload, 1252 - FX_HDR);
    CHECK_EQ_U(ep->max_chunk_payload, 1252 - FX_CHUNK_HDR);
    fx_set_time(&fx, 10);
    fx_progress(&fx);
    CHECK_EQ(fx_count_posts(&fx, -1, OPAL_BTL_USNIC_PKT_PROBE), 0); /* it may not know us yet */
    recv_ack(&fx, 0);
    fx_set_time(&fx, 20);
    fx_progress(&fx);
    CHECK_EQ(fx_count_posts(&fx, OPAL_BTL_USNIC_DATA_CHANNEL, OPAL_BTL_USNIC_PKT_PROBE), 1);
    fx_post_t *pr = fx_last_post(&fx);
    CHECK_EQ_U(pr->len, MTU);
    CHECK_EQ_U(fx.eng.stats.num_pmtu_probes, 1);
    fx_complete_all(&fx);
    recv_ack(&fx, MTU);
    CHECK_EQ_U(ep->pmtu.cur, MTU);
    CHECK_EQ_U(ep->max_frag_payload, MTU - FX_HDR);
    CHECK_EQ_U(fx.eng.stats.num_pmtu_raised, 1);
    CHECK_EQ_U(fx.eng.stats.num_pmtu_probes_acked, 1);
    CHECK(!ep->on_probe_list); /* at the limit: nothing more to do */
    fx_fini(&fx);
}

/* A probe that is never echoed counts lost after its timeout, and the same
 * size goes again */
static void test_lost_probe_goes_again(void)
{
    fx_t fx;
    opal_btl_usnic_endpoint_t *ep = setup(&fx);
    recv_ack(&fx, 0);
    fx_set_time(&fx, 20);
    fx_progress(&fx);
    fx_complete_all(&fx);
    CHECK_EQ(fx_count_posts(&fx, -1, OPAL_BTL_USNIC_PKT_PROBE), 1);
    CHECK(fx.eng.next_probe_event > 20);
    fx_set_time(&fx, fx.eng.next_probe_event);
    fx_progress(&fx);
    CHECK_EQ_U(fx.eng.stats.num_pmtu_probes_lost, 1);
    CHECK_EQ(fx_count_posts(&fx, -1, OPAL_BTL_USNIC_PKT_PROBE), 2);
    CHECK_EQ_U(fx_last_post(&fx)->len, MTU);
    CHECK_EQ_U(ep->pmtu.cur, 1252);
    fx_fini(&fx);
}

/* A probe from the peer is answered at once by an ACK that echoes its
 * length and, with nothing new to report, is not marked as new (else the
 * prober would count it as a duplicate ACK) */
static void test_probe_is_echoed(void)
{
    fx_t fx;
    setup(&fx);
    static uint8_t buf[4000];
    memset(buf, 0, sizeof(buf));
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) buf;
    h->magic = opal_btl_usnic_wire16(OPAL_BTL_USNIC_MAGIC);
    h->version = OPAL_BTL_USNIC_PROTO_VERSION;
    h->type = OPAL_BTL_USNIC_PKT_PROBE;
    h->sender = opal_btl_usnic_wire64(PEER);
    h->payload_len = opal_btl_usnic_wire16(4000 - FX_HDR);
    fx_recv(&fx, buf, sizeof(buf));
    CHECK_EQ(fx_count_posts(&fx, OPAL_BTL_USNIC_PRIORITY_CHANNEL, OPAL_BTL_USNIC_PKT_ACK), 1);
    const opal_btl_usnic_ack_hdr_t *a = (const opal_btl_usnic_ack_hdr_t *) fx_post_hdr(fx_last_post(&fx));
    CHECK_EQ(opal_btl_usnic_host16(a->probe_echo), 4000);
    CHECK_EQ(a->hdr.flags & OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW, 0);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 0);
    fx_fini(&fx);
}

/* A datagram larger than the path leaves as pieces; their bytes, put
 * back together, are the sealed datagram (its own tag included) */
static void test_oversized_segment_goes_as_pieces(void)
{
    fx_t fx;
    opal_btl_usnic_endpoint_t *ep = setup(&fx);
    recv_ack(&fx, 0);
    recv_ack(&fx, MTU);
    CHECK_EQ_U(ep->pmtu.cur, MTU);
    fx_set_time(&fx, 50);
    size_t n = 5000;
    opal_btl_usnic_send_frag_t *frag = fx_alloc(&fx, ep, n, 0);
    if (!CHECK(NULL != frag)) {
        fx_fini(&fx);
        return;
    }
    fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, n, 11);
    /* the path shrinks between the alloc and the send */
    ep->pmtu.cur = 1252;
    opal_btl_usnic_endpoint_set_datagram(ep, 1252);
    size_t before = fx.nposts;
    CHECK(fx_send(&fx, ep, frag, 42) >= 0);
    fx_progress(&fx);
    size_t room = 1252 - sizeof(opal_btl_usnic_piece_hdr_t), whole = FX_HDR + n;
    unsigned want = (unsigned) ((whole + room - 1) / room);
    CHECK_EQ(fx_count_posts(&fx, OPAL_BTL_USNIC_DATA_CHANNEL, OPAL_BTL_USNIC_PKT_PIECE), want);
    CHECK_EQ_U(fx.eng.stats.num_pieces_sent, want);
    uint8_t *rebuilt = (uint8_t *) calloc(1, whole);
    size_t covered = 0;
    for (size_t i = before; i < fx.nposts; ++i) {
        const opal_btl_usnic_piece_hdr_t *ph = (const opal_btl_usnic_piece_hdr_t *) fx_post_hdr(&fx.posts[i]);
        if (OPAL_BTL_USNIC_PKT_PIECE != ph->hdr.type) {
            continue;
        }
        CHECK_LE_U(fx.posts[i].len, 1252);
        CHECK_EQ_U(opal_btl_usnic_host16(ph->whole_len), whole);
        size_t off = opal_btl_usnic_host16(ph->offset), len = opal_btl_usnic_host16(ph->hdr.payload_len);
        memcpy(rebuilt + off, ph + 1, len);
        covered += len;
    }
    CHECK_EQ_U(covered, whole);
    const opal_btl_usnic_hdr_t *inner = (const opal_btl_usnic_hdr_t *) rebuilt;
    CHECK_EQ(inner->type, OPAL_BTL_USNIC_PKT_FRAG);
    CHECK_EQ_U(opal_btl_usnic_host32(inner->seq), LISN);
    CHECK_MEM(rebuilt + FX_HDR, frag->segments[0].seg_addr.pval, n);
    free(rebuilt);
    /* the segment waits for its ACK in the hotel like any other */
    CHECK_EQ_U(opal_btl_usnic_endpoint_in_flight(ep), 1);
    fx_complete_all(&fx);
    fx_fini(&fx);
}

UNIT_MAIN(UNIT_TEST(test_search_starts_at_first_answer), UNIT_TEST(test_lost_probe_goes_again),
          UNIT_TEST(test_probe_is_echoed), UNIT_TEST(test_oversized_segment_goes_as_pieces))
