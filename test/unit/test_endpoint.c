/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Per-peer state (btl_usnic_endpoint.c): the window state derived from
 * both ISNs, window rounding in opal_btl_usnic_endpoint_init_rel (down to
 * a power of two, 0 refused), and the per-peer limits of
 * opal_btl_usnic_endpoint_limit_mtu (defaults from the engine, lowered
 * never raised, each channel on its own).
 */
#include "fixture.h"
#include "unit.h"

/* Endpoint tx/rx state derived from the ISNs, at and around the wrap */
static void test_seq_endpoint_isn_state(void)
{
    static const uint32_t isns[] = {0, 1, 1000, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    for (size_t i = 0; i < sizeof(isns) / sizeof(isns[0]); ++i) {
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, 1, 16, isns[i], isns[i] + 7);
        CHECK_EQ_U(ep->tx.next_seq, isns[i]);
        CHECK_EQ_U(ep->tx.acked_seq, (uint32_t) (isns[i] - 1));
        CHECK_EQ_U(opal_btl_usnic_endpoint_in_flight(ep), 0);
        CHECK(opal_btl_usnic_endpoint_window_open(ep));
        CHECK(opal_btl_usnic_endpoint_drained(ep));
        CHECK_EQ_U(ep->rx.next_expected, (uint32_t) (isns[i] + 7));
        /* nothing received yet: the cumulative ACK is "everything before the peer's ISN" */
        CHECK_EQ_U(opal_btl_usnic_ack_value(ep), (uint32_t) (isns[i] + 6));
        /* in_flight across the wrap */
        ep->tx.next_seq = isns[i] + 16;
        CHECK_EQ_U(opal_btl_usnic_endpoint_in_flight(ep), 16);
        CHECK(!opal_btl_usnic_endpoint_window_open(ep));
        ep->tx.next_seq = isns[i] + 15;
        CHECK(opal_btl_usnic_endpoint_window_open(ep));
        ep->tx.next_seq = isns[i];
        fx_fini(&fx);
    }
}

/* opal_btl_usnic_endpoint_init_rel rounds the window down to a power of
 * two (only those divide 2^32, so "seq % window" slots never alias across
 * the wrap) and refuses 0 */
static void test_seq_window_rounding(void)
{
    static const struct {
        uint32_t requested, effective;
    } cases[] = {
        {1, 1}, {2, 2}, {3, 2}, {4, 4}, {5, 4}, {6, 4}, {7, 4}, {46, 32}, {63, 32},
        {64, 64}, {65, 64}, {100, 64}, {4095, 2048}, {4096, 4096}, {4097, 4096},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
        int rc = opal_btl_usnic_endpoint_init_rel(ep, &fx.eng, cases[i].requested, 10, 20);
        CHECK_EQ(rc, OPAL_SUCCESS);
        if (!CHECK_EQ(ep->window, cases[i].effective)) {
            fprintf(stderr, "  requested %u\n", cases[i].requested);
        }
        CHECK_EQ(ep->window & (ep->window - 1), 0);
        /* the window really is that big: exactly |effective| may be in flight */
        ep->tx.next_seq = 10 + cases[i].effective - 1;
        CHECK(opal_btl_usnic_endpoint_window_open(ep));
        ep->tx.next_seq = 10 + cases[i].effective;
        CHECK(!opal_btl_usnic_endpoint_window_open(ep));
        ep->tx.next_seq = 10;
        CHECK(opal_btl_usnic_seq_in_window(20 + cases[i].effective - 1, ep->rx.next_expected, ep->window));
        CHECK(!opal_btl_usnic_seq_in_window(20 + cases[i].effective, ep->rx.next_expected, ep->window));
        OBJ_RELEASE(ep);
        fx_fini(&fx);
    }
    /* 0 is refused and leaves the endpoint unset (safe to release) */
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
    CHECK_EQ(opal_btl_usnic_endpoint_init_rel(ep, &fx.eng, 0, 10, 20), OPAL_ERR_BAD_PARAM);
    CHECK_EQ(ep->window, 0);
    CHECK(NULL == ep->tx.sent);
    CHECK(NULL == ep->eng);
    OBJ_RELEASE(ep);
    fx_fini(&fx);
}

/* Per-peer datagram limits: defaults from the engine, lowered (never
 * raised) by opal_btl_usnic_endpoint_limit_mtu, each channel on its own */
static void test_seq_endpoint_limits(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, 1, 16, 0, 0);
    CHECK_EQ(ep->tiny_mtu, FX_TINY_MTU);
    CHECK_EQ(ep->max_frag_payload, FX_MAX_FRAG_PAYLOAD);
    CHECK_EQ(ep->max_chunk_payload, FX_MAX_CHUNK_PAYLOAD);
    CHECK_EQ(ep->max_tiny_payload, FX_MAX_TINY_PAYLOAD);
    /* a peer with larger MTUs: nothing grows */
    opal_btl_usnic_endpoint_limit_mtu(ep, 9000, 4000);
    CHECK_EQ(ep->tiny_mtu, FX_TINY_MTU);
    CHECK_EQ(ep->max_frag_payload, FX_MAX_FRAG_PAYLOAD);
    CHECK_EQ(ep->max_chunk_payload, FX_MAX_CHUNK_PAYLOAD);
    CHECK_EQ(ep->max_tiny_payload, FX_MAX_TINY_PAYLOAD);
    /* equal MTUs: nothing changes */
    opal_btl_usnic_endpoint_limit_mtu(ep, FX_MTU, FX_TINY_MTU);
    CHECK_EQ(ep->max_chunk_payload, FX_MAX_CHUNK_PAYLOAD);
    CHECK_EQ(ep->tiny_mtu, FX_TINY_MTU);
    /* smaller data MTU only */
    opal_btl_usnic_endpoint_limit_mtu(ep, 1000, 4000);
    CHECK_EQ(ep->max_frag_payload, 1000 - FX_HDR);
    CHECK_EQ(ep->max_chunk_payload, 1000 - FX_CHUNK_HDR);
    CHECK_EQ(ep->tiny_mtu, FX_TINY_MTU);
    CHECK_EQ(ep->max_tiny_payload, FX_MAX_TINY_PAYLOAD);
    /* then a smaller tiny MTU only; and a later larger data MTU does not undo the first */
    opal_btl_usnic_endpoint_limit_mtu(ep, 1400, 300);
    CHECK_EQ(ep->max_frag_payload, 1000 - FX_HDR);
    CHECK_EQ(ep->max_chunk_payload, 1000 - FX_CHUNK_HDR);
    CHECK_EQ(ep->tiny_mtu, 300);
    CHECK_EQ(ep->max_tiny_payload, 300 - FX_HDR);
    /* the engine's own sizes are untouched (other peers keep them) */
    CHECK_EQ(fx.eng.max_frag_payload, FX_MAX_FRAG_PAYLOAD);
    CHECK_EQ(fx.eng.max_chunk_payload, FX_MAX_CHUNK_PAYLOAD);
    opal_btl_usnic_endpoint_t *other = fx_ep_new(&fx, 2, 16, 0, 0);
    CHECK_EQ(other->max_chunk_payload, FX_MAX_CHUNK_PAYLOAD);
    fx_fini(&fx);
}

/* An endpoint made again to the same peer (same keys from the pair, same
 * first sequence numbers) takes no datagram of the earlier one: its keys
 * are the next incarnation's (btl_usnic_auth.c, "Incarnations") */
static void test_endpoint_incarnation_refuses_earlier_datagrams(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    enum { PEER = 3 };
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, 100, 500);
    uint8_t recorded[256];
    uint32_t v = 7;
    size_t len = fx_build_frag(recorded, PEER, 500, 3, &v, sizeof(v));
    fx_seal(&fx, recorded, len, PEER, 1);
    fx_recv_raw(&fx, recorded, len);
    CHECK_EQ(fx.ndels, 1);
    fx_ep_free(&fx, ep);

    ep = fx_ep_new(&fx, PEER, 64, 100, 500);
    uint64_t bad = fx.eng.stats.num_drop_bad_mac;
    fx_recv_raw(&fx, recorded, len); /* recorded from the first, replayed to the second */
    CHECK_EQ(fx.ndels, 1);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_mac, bad + 1);
    /* control: the same datagram from the peer's second incarnation is taken */
    fx.seal_incarnation = 1;
    uint8_t fresh[256];
    len = fx_build_frag(fresh, PEER, 500, 3, &v, sizeof(v));
    fx_seal(&fx, fresh, len, PEER, 1);
    fx_recv_raw(&fx, fresh, len);
    CHECK_EQ(fx.ndels, 2);
    /* a third incarnation refuses the second's */
    fx_ep_free(&fx, ep);
    ep = fx_ep_new(&fx, PEER, 64, 100, 500);
    bad = fx.eng.stats.num_drop_bad_mac;
    fx_recv_raw(&fx, fresh, len);
    CHECK_EQ(fx.ndels, 2);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_mac, bad + 1);
    (void) ep;
    fx_fini(&fx);
}

/* Each endpoint a module makes takes the next nonce generation; past the
 * last one it refuses (its nonces would repeat an earlier endpoint's) */
static void test_endpoint_generations_bounded(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    fx.eng.nonce_generation = OPAL_BTL_USNIC_NONCE_GENERATIONS - 1;
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, 1, 16, 1, 1);
    CHECK_EQ_U(ep->tx.nonce >> OPAL_BTL_USNIC_NONCE_COUNT_BITS, OPAL_BTL_USNIC_NONCE_GENERATIONS - 1);
    opal_btl_usnic_endpoint_t *more = OBJ_NEW(opal_btl_usnic_endpoint_t);
    CHECK_EQ(opal_btl_usnic_endpoint_init_rel(more, &fx.eng, 16, 1, 1), OPAL_ERR_OUT_OF_RESOURCE);
    OBJ_RELEASE(more);
    fx_fini(&fx);
}

UNIT_MAIN(UNIT_TEST(test_seq_endpoint_isn_state), UNIT_TEST(test_seq_window_rounding),
          UNIT_TEST(test_seq_endpoint_limits), UNIT_TEST(test_endpoint_incarnation_refuses_earlier_datagrams),
          UNIT_TEST(test_endpoint_generations_bounded))
