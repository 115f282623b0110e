/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * One receive-accept path: the same datagrams, fed to two engines, one
 * through the slow path only (opal_btl_usnic_recv_segment) and one the way
 * the module's progress offers a tiny receive (opal_btl_usnic_recv_fast
 * first, its finish before anything else happens, recv_segment when it
 * declines), leave the same engine state, the same deliveries, the same
 * counters (but the fast path's own) and post the same ACKs.
 */
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define ISN_TX 500u          /* our first sequence number */
#define ISN_RX 0xfffffff8u   /* the peer's: its stream crosses the wrap */
#define WINDOW 16

typedef struct side_t {
    fx_t fx;
    opal_btl_usnic_endpoint_t *ep;
    bool fast;                /* offer every datagram to the fast path first */
    unsigned taken;           /* datagrams the fast path took */
} side_t;

static void side_init(side_t *s, bool fast)
{
    memset(s, 0, sizeof(*s));
    fx_init(&s->fx, NULL);
    s->ep = fx_ep_new(&s->fx, PEER, WINDOW, ISN_TX, ISN_RX);
    s->fast = fast;
}

/* |s| receives |len| bytes at |buf| as its path does, sealed by the peer */
static void side_recv(side_t *s, const uint8_t *buf, size_t len)
{
    uint8_t copy[FX_MTU];
    memcpy(copy, buf, len);
    fx_seal(&s->fx, copy, len, PEER, ++s->fx.seal_nonce);
    if (s->fast) {
        opal_btl_usnic_endpoint_t *ep = NULL;
        opal_btl_usnic_engine_set_time(&s->fx.eng, s->fx.now);
        opal_btl_usnic_fast_t how = fx_hand_up_fast(&s->fx.eng, copy, len, &ep);
        if (OPAL_BTL_USNIC_FAST_TAKEN == how) {
            ++s->taken;
            opal_btl_usnic_recv_fast_finish(&s->fx.eng, ep, copy); /* the module's next pass, first thing */
            return;
        }
        if (OPAL_BTL_USNIC_FAST_DROPPED == how) {
            return;
        }
    }
    fx_recv_raw(&s->fx, copy, len);
}

typedef struct pair_t {
    side_t slow, fast;
} pair_t;

static void pair_init(pair_t *p)
{
    side_init(&p->slow, false);
    side_init(&p->fast, true);
}

static void pair_fini(pair_t *p)
{
    fx_fini(&p->slow.fx);
    fx_fini(&p->fast.fx);
}

static void pair_recv(pair_t *p, const uint8_t *buf, size_t len)
{
    side_recv(&p->slow, buf, len);
    side_recv(&p->fast, buf, len);
}

static void pair_time(pair_t *p, uint64_t now)
{
    fx_set_time(&p->slow.fx, now);
    fx_set_time(&p->fast.fx, now);
}

static void pair_progress(pair_t *p)
{
    fx_progress(&p->slow.fx);
    fx_progress(&p->fast.fx);
}

/* ----- comparing the two engines ----- */

#define SAME(field) ok = CHECK_EQ_U(a->field, b->field) && ok

static bool same_rx(const opal_btl_usnic_endpoint_t *a, const opal_btl_usnic_endpoint_t *b)
{
    bool ok = true;
    SAME(rx.next_expected);
    SAME(rx.highest);
    SAME(rx.nheld);
    SAME(rx.ack_owed);
    SAME(rx.on_ack_list);
    SAME(rx.ack_due_tick);
    SAME(rx.ack_due_time);
    SAME(rx.late_dup);
    SAME(rx.repaired);
    SAME(rx.last_ack_sent);
    SAME(rx.prev_ack_sent);
    SAME(rx.last_grant);
    SAME(rx.active_epoch);
    ok = CHECK_MEM(a->rx.rcvd, b->rx.rcvd, a->window) && ok;
    return ok;
}

static bool same_tx(const opal_btl_usnic_endpoint_t *a, const opal_btl_usnic_endpoint_t *b)
{
    bool ok = true;
    SAME(tx.next_seq);
    SAME(tx.acked_seq);
    SAME(tx.peer_credit);
    SAME(tx.dup_acks);
    SAME(timer.last_heard);
    SAME(timer.rto_floor);
    SAME(timer.last_loss);
    SAME(timer.in_recovery);
    SAME(timer.srtt);
    return ok;
}

/* Every counter but the fast path's own */
static bool same_stats(const opal_btl_usnic_stats_t *a, const opal_btl_usnic_stats_t *b)
{
    bool ok = true;
#define SAME_COUNTER(name, help)                                                       \
    if (0 != strcmp(#name, "num_fast_recvs") && a->name != b->name) {                  \
        FAILF("counter %s: slow path %llu, fast path %llu", #name,                     \
              (unsigned long long) a->name, (unsigned long long) b->name);             \
        ok = false;                                                                    \
    }
    OPAL_BTL_USNIC_COUNTERS(SAME_COUNTER)
#undef SAME_COUNTER
    return ok;
}

static bool same_deliveries(const fx_t *a, const fx_t *b)
{
    bool ok = CHECK_EQ(a->ndels, b->ndels);
    for (size_t i = 0; ok && i < a->ndels; ++i) {
        ok = CHECK_EQ(a->dels[i].tag, b->dels[i].tag) && CHECK_EQ(a->dels[i].len, b->dels[i].len) &&
             CHECK_MEM(a->dels[i].data, b->dels[i].data, a->dels[i].len);
    }
    return ok;
}

/* The same datagrams posted, byte for byte (ACK values, flags, grants,
 * selective-ACK ranges; both engines count the same nonces) */
static bool same_posts(const fx_t *a, const fx_t *b)
{
    bool ok = CHECK_EQ(a->nposts, b->nposts);
    for (size_t i = 0; ok && i < a->nposts; ++i) {
        ok = CHECK_EQ(a->posts[i].channel, b->posts[i].channel) && CHECK_EQ(a->posts[i].len, b->posts[i].len) &&
             CHECK_MEM(a->posts[i].bytes, b->posts[i].bytes, a->posts[i].len);
    }
    return ok;
}

static bool pair_same(pair_t *p, const char *what)
{
    fx_t *a = &p->slow.fx, *b = &p->fast.fx;
    bool ok = same_rx(p->slow.ep, p->fast.ep) && same_tx(p->slow.ep, p->fast.ep) &&
              same_stats(&a->eng.stats, &b->eng.stats) && same_deliveries(a, b) && same_posts(a, b) &&
              CHECK_EQ(opal_list_get_size(&a->eng.endpoints_needing_ack),
                       opal_list_get_size(&b->eng.endpoints_needing_ack));
    if (!ok) {
        fprintf(stderr, "  after %s\n", what);
    }
    return ok;
}

/* ----- datagrams from the peer ----- */

/* FRAG number |k| of the peer's stream: its tag and 4 payload bytes say k */
static size_t frag_k(uint8_t *buf, uint32_t k, uint8_t flags)
{
    size_t len = fx_build_frag(buf, PEER, ISN_RX + k, (uint8_t) (k & 0x3f), &k, sizeof(k));
    ((opal_btl_usnic_hdr_t *) buf)->flags = flags;
    return len;
}

/* ... carrying a cumulative ACK of our first |acked| segments */
static size_t frag_k_acking(uint8_t *buf, uint32_t k, uint8_t flags, uint32_t acked, uint16_t credit)
{
    size_t len = frag_k(buf, k, flags | OPAL_BTL_USNIC_HDR_FLAG_ACK);
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) buf;
    h->ack_seq = opal_btl_usnic_wire32(ISN_TX + acked - 1);
    h->credit = opal_btl_usnic_wire16(credit);
    return len;
}

/* A tiny stream in order, ACKed now and then: the fast path takes all of it */
static void test_accept_in_order_stream(void)
{
    pair_t p;
    pair_init(&p);
    uint8_t buf[FX_MTU];
    char what[64];
    for (uint32_t k = 0; k < 40; ++k) {
        pair_time(&p, 1000 + 10 * k);
        pair_recv(&p, buf, frag_k(buf, k, 0));
        snprintf(what, sizeof(what), "frag %u", k);
        if (!pair_same(&p, what)) {
            break;
        }
        if (2 == k % 3) {
            pair_time(&p, 1000 + 10 * k + 100); /* past ack_delay */
            for (int i = 0; i < 5; ++i) {
                pair_progress(&p);
            }
            if (!pair_same(&p, "progress")) {
                break;
            }
        }
    }
    CHECK_EQ(p.fast.taken, 40);
    CHECK_GT(p.slow.fx.eng.stats.num_ack_sends, 0);
    pair_fini(&p);
}

/* A retransmitted copy (FLAG_RETX) that fills a hole reports the loss
 * (FLAG_REPAIRED on the next ACK: the sender keeps its RTO floor low)
 * whichever path takes it.  The fast path used to ignore the flag. */
static void test_accept_retransmission_reports_repair(void)
{
    pair_t p;
    pair_init(&p);
    uint8_t buf[FX_MTU];
    pair_time(&p, 1000);
    pair_recv(&p, buf, frag_k(buf, 0, OPAL_BTL_USNIC_HDR_FLAG_RETX));
    CHECK_EQ(p.fast.taken, 1);
    CHECK(p.slow.ep->rx.repaired);
    CHECK(p.fast.ep->rx.repaired);
    pair_same(&p, "a retransmitted copy");
    pair_time(&p, 2000);
    for (int i = 0; i < 5; ++i) {
        pair_progress(&p);
    }
    REQUIRE(pair_same(&p, "its ACK"));
    REQUIRE_EQ(p.fast.fx.nposts, 1);
    CHECK(fx_post_hdr(&p.fast.fx.posts[0])->flags & OPAL_BTL_USNIC_HDR_FLAG_REPAIRED);
    pair_fini(&p);
}

/* Piggy-backed ACKs of our data: cumulative ACK, grant, duplicate ACKs
 * and the timer reports (LATE_DUP, REPAIRED) are taken alike */
static void test_accept_piggybacked_ack_information(void)
{
    pair_t p;
    pair_init(&p);
    uint8_t buf[FX_MTU];
    pair_time(&p, 1000);
    FX_SEND_TINY(&p.slow.fx, p.slow.ep, 6, NULL);
    FX_SEND_TINY(&p.fast.fx, p.fast.ep, 6, NULL);
    fx_complete_all(&p.slow.fx);
    fx_complete_all(&p.fast.fx);
    REQUIRE(pair_same(&p, "our sends"));
    static const struct {
        uint32_t acked;
        uint16_t credit;
        uint8_t flags;
    } acks[] = {
        {2, 16, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW},
        {2, 8, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW},                                     /* a duplicate ACK */
        {2, 8, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW | OPAL_BTL_USNIC_HDR_FLAG_LATE_DUP}, /* and again: fast retransmit */
        {4, 4, OPAL_BTL_USNIC_HDR_FLAG_REPAIRED},
        {3, 4, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW},                                     /* stale */
        {9, 4, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW},                                     /* beyond what we sent */
        {6, 16, 0},
    };
    char what[64];
    for (uint32_t k = 0; k < sizeof(acks) / sizeof(acks[0]); ++k) {
        pair_time(&p, 1100 + 300 * k);
        pair_recv(&p, buf, frag_k_acking(buf, k, acks[k].flags, acks[k].acked, acks[k].credit));
        snprintf(what, sizeof(what), "frag %u acking %u", k, acks[k].acked);
        if (!pair_same(&p, what)) {
            break;
        }
        pair_progress(&p);
        fx_complete_all(&p.slow.fx);
        fx_complete_all(&p.fast.fx);
        if (!pair_same(&p, "progress")) {
            break;
        }
    }
    CHECK_EQ_U(p.fast.ep->tx.acked_seq, ISN_TX + 5);
    CHECK_GT(p.fast.fx.eng.stats.num_fast_retrans, 0);
    pair_fini(&p);
}

/* A hole: the fragments behind it wait, the one that fills it is next in
 * order (the fast path may take it) and hands them over; the arrival
 * beyond the hole is ACKed at once */
static void test_accept_hole_filled(void)
{
    pair_t p;
    pair_init(&p);
    uint8_t buf[FX_MTU];
    static const uint32_t order[] = {0, 3, 2, 1, 4, 7, 5, 6, 8};
    char what[64];
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); ++i) {
        pair_time(&p, 1000 + 20 * i);
        pair_recv(&p, buf, frag_k(buf, order[i], 0));
        snprintf(what, sizeof(what), "frag %u", order[i]);
        if (!pair_same(&p, what)) {
            break;
        }
        pair_progress(&p);
        if (!pair_same(&p, "progress")) {
            break;
        }
    }
    CHECK_EQ(p.fast.fx.ndels, 9);
    CHECK_GT(p.fast.taken, 0);
    CHECK_LT(p.fast.taken, 9);
    pair_fini(&p);
}

/* Half a window received without an ACK: the ACK goes at once */
static void test_accept_half_window_is_urgent(void)
{
    pair_t p;
    pair_init(&p);
    uint8_t buf[FX_MTU];
    pair_time(&p, 1000);
    char what[64];
    for (uint32_t k = 0; k < WINDOW / 2; ++k) {
        pair_recv(&p, buf, frag_k(buf, k, 0));
        snprintf(what, sizeof(what), "frag %u", k);
        if (!pair_same(&p, what)) {
            break;
        }
    }
    CHECK_EQ_U(p.fast.ep->rx.ack_due_tick, p.fast.fx.eng.tick);
    pair_progress(&p);
    CHECK(pair_same(&p, "progress"));
    CHECK_EQ(p.fast.fx.nposts, 1);
    pair_fini(&p);
}

/* A segment that asks for its ACK at once (ACK_SOON) gets it at once */
static void test_accept_ack_soon(void)
{
    pair_t p;
    pair_init(&p);
    uint8_t buf[FX_MTU];
    pair_time(&p, 1000);
    pair_recv(&p, buf, frag_k(buf, 0, OPAL_BTL_USNIC_HDR_FLAG_ACK_SOON));
    CHECK_EQ(p.fast.taken, 1);
    CHECK(pair_same(&p, "a FRAG flagged ACK_SOON"));
    CHECK_EQ_U(p.fast.ep->rx.ack_due_tick, p.fast.fx.eng.tick);
    CHECK_EQ_U(p.fast.ep->rx.ack_due_time, 1000);
    pair_fini(&p);
}

/* The PML progresses from inside its callback and receives the next
 * fragments there (through the slow path, as the module's nested progress
 * does): they wait for the running upcall, then go in order */
static pair_t *nested_pair;
static void nested_hook(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data, size_t len)
{
    (void) ep;
    (void) tag;
    (void) len;
    uint32_t k;
    memcpy(&k, data, sizeof(k));
    if (0 != k % 4) {
        return;
    }
    uint8_t buf[FX_MTU];
    fx_recv(fx, buf, frag_k(buf, k + 2, 0));
    fx_recv(fx, buf, frag_k(buf, k + 1, 0));
}

static void test_accept_nested_upcall(void)
{
    pair_t p;
    pair_init(&p);
    nested_pair = &p;
    p.slow.fx.deliver_hook = nested_hook;
    p.fast.fx.deliver_hook = nested_hook;
    uint8_t buf[FX_MTU];
    char what[64];
    for (uint32_t k = 0; k < 12; k += 4) {
        pair_time(&p, 1000 + 100 * k);
        pair_recv(&p, buf, frag_k(buf, k, 0));
        pair_recv(&p, buf, frag_k(buf, k + 3, 0));
        snprintf(what, sizeof(what), "frags %u..%u", k, k + 3);
        if (!pair_same(&p, what)) {
            break;
        }
        pair_progress(&p);
    }
    CHECK_EQ(p.fast.fx.ndels, 12);
    CHECK_EQ(p.fast.taken, 6); /* k, and k + 3 once k + 1 and k + 2 came in its upcall */
    pair_fini(&p);
}

/* Random streams: in order, ahead, duplicates, old copies, retransmitted
 * copies, ACK information, progress passes and time in between */
static void test_accept_random_streams(void)
{
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        pair_t p;
        pair_init(&p);
        uint64_t rng = seed;
        uint8_t buf[FX_MTU];
        uint64_t now = 1000;
        pair_time(&p, now);
        FX_SEND_TINY(&p.slow.fx, p.slow.ep, 4, NULL);
        FX_SEND_TINY(&p.fast.fx, p.fast.ep, 4, NULL);
        bool ok = true;
        for (int step = 0; ok && step < 300; ++step) {
            uint32_t next = p.slow.ep->rx.next_expected - ISN_RX;
            uint32_t r = fx_rand(&rng);
            uint32_t k = next + r % 6;
            if (0 == r % 7 && next > 0) {
                k = next - 1 - (r >> 8) % (next < 20 ? next : 20); /* a copy of an old one */
            }
            uint8_t flags = (0 == (r >> 4) % 5) ? OPAL_BTL_USNIC_HDR_FLAG_RETX : 0;
            size_t len = (0 == (r >> 6) % 3)
                             ? frag_k_acking(buf, k, flags | OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW, 1 + (r >> 9) % 4, 16)
                             : frag_k(buf, k, flags);
            pair_recv(&p, buf, len);
            ok = pair_same(&p, "a random arrival");
            if (0 == (r >> 11) % 3) {
                now += 1 + (r >> 13) % 60;
                pair_time(&p, now);
                pair_progress(&p);
                fx_complete_all(&p.slow.fx);
                fx_complete_all(&p.fast.fx);
                ok = ok && pair_same(&p, "a progress pass");
            }
        }
        if (!ok) {
            fprintf(stderr, "  seed %llu\n", (unsigned long long) seed);
        }
        CHECK_GT(p.fast.taken, 0);
        pair_fini(&p);
    }
}

UNIT_MAIN(UNIT_TEST(test_accept_in_order_stream), UNIT_TEST(test_accept_retransmission_reports_repair),
          UNIT_TEST(test_accept_piggybacked_ack_information), UNIT_TEST(test_accept_hole_filled),
          UNIT_TEST(test_accept_half_window_is_urgent), UNIT_TEST(test_accept_ack_soon),
          UNIT_TEST(test_accept_nested_upcall), UNIT_TEST(test_accept_random_streams))
