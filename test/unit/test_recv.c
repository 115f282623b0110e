/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The receive side (btl_usnic_recv.c).  Receive window:
 * opal_btl_usnic_seq_classify() against state built by real segments
 * through opal_btl_usnic_recv_segment(), at several ISNs including the
 * 32-bit wrap; a full receive window; no duplicate ever reaches the PML;
 * the fast receive path.
 *
 * One receive-accept path: the same datagrams, fed to two engines, one
 * through the slow path only (opal_btl_usnic_recv_segment) and one the way
 * the module's progress offers a tiny receive (opal_btl_usnic_recv_fast
 * first, its finish before anything else happens, recv_segment when it
 * declines), leave the same engine state, the same deliveries, the same
 * counters (but the fast path's own) and post the same ACKs.
 *
 * Reassembly of chunked fragments: whole CHUNK segments through
 * opal_btl_usnic_recv_segment(), in every order, with holes, duplicates,
 * busy slots, mismatched sizes, out-of-range, misaligned and overlapping
 * chunks (the pure slot functions are test_frag.c's).
 */
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define C(x) OPAL_BTL_USNIC_SEQ_##x

static const char *cls_name(int c)
{
    static const char *names[] = {"NEW_IN_ORDER", "NEW_OOO", "DUP", "OLD", "TOO_NEW"};
    return (c >= 0 && c < 5) ? names[c] : "?";
}

#define CHECK_CLASS(ep, seq, want) \
    do { \
        int got_ = (int) opal_btl_usnic_seq_classify((ep), (seq)); \
        if (!CHECK_EQ(got_, (want))) { \
            fprintf(stderr, "  seq 0x%x: got %s, want %s (next_expected 0x%x)\n", (unsigned) (seq), \
                    cls_name(got_), cls_name(want), (unsigned) (ep)->rx.next_expected); \
        } \
    } while (0)

/* Receive FRAG |seq| from PEER; the payload is the sequence number */
static void rx(fx_t *fx, uint32_t seq)
{
    uint8_t buf[64];
    size_t len = fx_build_frag(buf, PEER, seq, 7, &seq, sizeof(seq));
    fx_recv(fx, buf, len);
}

/* The fast path as the module calls it: on a datagram its sender sealed */
static opal_btl_usnic_fast_t fast(fx_t *fx, uint8_t *buf, size_t len, opal_btl_usnic_endpoint_t **ep_p)
{
    if (len >= sizeof(opal_btl_usnic_hdr_t)) {
        fx_seal(fx, buf, len, (uint32_t) opal_btl_usnic_host64(((opal_btl_usnic_hdr_t *) buf)->sender), ++fx->seal_nonce);
    }
    opal_btl_usnic_engine_set_time(&fx->eng, fx->now);
    return fx_hand_up_fast(&fx->eng, buf, len, ep_p);
}

#define TAKEN OPAL_BTL_USNIC_FAST_TAKEN
#define DECLINED OPAL_BTL_USNIC_FAST_DECLINED

static const uint32_t isns[] = {0, 1000, 0x7ffffffeu, 0xfffffffcu, 0xfffffffeu, 0xffffffffu};

/* Classification straight after setup, and the edges, at every ISN */
static void test_classify_edges(void)
{
    for (size_t i = 0; i < sizeof(isns) / sizeof(isns[0]); ++i) {
        uint32_t n = isns[i];
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, 0, n);
        CHECK_CLASS(ep, n, C(NEW_IN_ORDER));
        CHECK_CLASS(ep, n + 1, C(NEW_OOO));
        CHECK_CLASS(ep, n + 7, C(NEW_OOO));         /* right edge */
        CHECK_CLASS(ep, n + 8, C(TOO_NEW));         /* one past */
        CHECK_CLASS(ep, n + 0x7fffffffu, C(TOO_NEW));
        CHECK_CLASS(ep, n - 1, C(OLD));
        CHECK_CLASS(ep, n - 8, C(OLD));
        CHECK_CLASS(ep, n - 0x7fffffffu, C(OLD));
        CHECK_CLASS(ep, n + 0x80000000u, C(OLD));   /* exactly half the space away counts as behind */
        fx_fini(&fx);
    }
}

/* In order, out of order, duplicate, old, too new: the table walks one
 * receiver through a sequence of arrivals (offsets from the ISN) and checks
 * the class each had, what was delivered and where the window stands.
 * Fragments reach the PML in sequence order: after each step exactly
 * those before next_expected have, each once, in order; the ones ahead of
 * a hole wait (held). */
typedef struct {
    int32_t off;        /* arrival, relative to ISN */
    int cls;            /* its class before it was processed */
    int32_t next_after; /* next_expected - ISN afterwards = fragments delivered so far */
    uint32_t held;      /* fragments waiting for a hole afterwards */
} arrival_t;

static const arrival_t walk[] = {
    {0, C(NEW_IN_ORDER), 1, 0},
    {0, C(OLD), 1, 0},           /* retransmission of something delivered */
    {2, C(NEW_OOO), 1, 1},       /* hole at 1: waits, window does not move */
    {2, C(DUP), 1, 1},
    {4, C(NEW_OOO), 1, 2},
    {8, C(NEW_OOO), 1, 3},       /* right edge of [1, 9) */
    {9, C(TOO_NEW), 1, 3},
    {1, C(NEW_IN_ORDER), 3, 2},  /* fills the hole: 1, then 2, slides over 2 */
    {2, C(OLD), 3, 2},
    {4, C(DUP), 3, 2},
    {3, C(NEW_IN_ORDER), 5, 1},  /* 3, then 4 */
    {9, C(NEW_OOO), 5, 2},
    {12, C(NEW_OOO), 5, 3},      /* right edge of [5, 13) */
    {13, C(TOO_NEW), 5, 3},
    {7, C(NEW_OOO), 5, 4},
    {6, C(NEW_OOO), 5, 5},
    {5, C(NEW_IN_ORDER), 10, 1}, /* 5..9 */
    {8, C(OLD), 10, 1},
    {11, C(NEW_OOO), 10, 2},
    {10, C(NEW_IN_ORDER), 13, 0},
    {12, C(OLD), 13, 0},
};

static void test_classify_walk(void)
{
    for (size_t i = 0; i < sizeof(isns) / sizeof(isns[0]); ++i) {
        uint32_t n = isns[i];
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, 0, n);
        for (size_t k = 0; k < sizeof(walk) / sizeof(walk[0]); ++k) {
            const arrival_t *a = &walk[k];
            uint32_t seq = n + (uint32_t) a->off;
            CHECK_CLASS(ep, seq, a->cls);
            rx(&fx, seq);
            bool ok = CHECK_EQ_U(ep->rx.next_expected, n + (uint32_t) a->next_after);
            ok = CHECK_EQ(fx.ndels, (size_t) a->next_after) && ok;
            ok = CHECK_EQ(ep->rx.nheld, a->held) && ok;
            /* delivery d carries the fragment with sequence number ISN + d */
            for (size_t d = 0; d < fx.ndels; ++d) {
                uint32_t got;
                memcpy(&got, fx.dels[d].data, sizeof(got));
                ok = CHECK_EQ_U(got, n + (uint32_t) d) && ok;
                ok = CHECK_EQ(fx.dels[d].tag, 7) && ok;
                ok = CHECK_PTR_EQ(fx.dels[d].ep, ep) && ok;
            }
            if (!ok) {
                fprintf(stderr, "  isn 0x%x, step %zu (offset %d)\n", n, k, a->off);
            }
        }
        CHECK_EQ_U(fx.eng.stats.num_dup_recvs, 2);
        CHECK_EQ_U(fx.eng.stats.num_oow_low_recvs, 4);
        CHECK_EQ_U(fx.eng.stats.num_oow_high_recvs, 2);
        fx_fini(&fx);
    }
}

/* A full receive window: every slot but the first received out of order;
 * nothing beyond it is accepted; the first one slides the whole window */
static void test_full_receive_window(void)
{
    static const uint32_t w = 16;
    for (size_t i = 0; i < sizeof(isns) / sizeof(isns[0]); ++i) {
        uint32_t n = isns[i];
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, w, 0, n);
        for (uint32_t k = w - 1; k >= 1; --k) { /* reverse order: all wait for the first */
            CHECK_CLASS(ep, n + k, C(NEW_OOO));
            rx(&fx, n + k);
        }
        CHECK_EQ(fx.ndels, 0);
        CHECK_EQ(ep->rx.nheld, w - 1);
        CHECK_EQ_U(ep->rx.next_expected, n);
        for (uint32_t k = 1; k < w; ++k) {
            CHECK_CLASS(ep, n + k, C(DUP));
        }
        CHECK_CLASS(ep, n + w, C(TOO_NEW));
        rx(&fx, n + w);
        CHECK_EQ(fx.ndels, 0);
        /* the ACK still says "nothing": it is cumulative */
        CHECK_EQ_U(opal_btl_usnic_ack_value(ep), n - 1);
        rx(&fx, n);
        CHECK_EQ(fx.ndels, w);
        CHECK_EQ(ep->rx.nheld, 0);
        for (uint32_t d = 0; d < w; ++d) { /* in sequence order */
            uint32_t got;
            memcpy(&got, fx.dels[d].data, sizeof(got));
            CHECK_EQ_U(got, n + d);
        }
        CHECK_EQ_U(ep->rx.next_expected, n + w);
        CHECK_EQ_U(opal_btl_usnic_ack_value(ep), n + w - 1);
        for (uint32_t k = 0; k < w; ++k) {
            CHECK_EQ(ep->rx.rcvd[k], 0); /* bitmap cleared as it slid */
            CHECK_CLASS(ep, n + k, C(OLD));
            CHECK_CLASS(ep, n + w + k, k == 0 ? C(NEW_IN_ORDER) : C(NEW_OOO));
        }
        CHECK_CLASS(ep, n + 2 * w, C(TOO_NEW));
        /* replay everything: nothing more reaches the PML */
        for (uint32_t k = 0; k <= w; ++k) {
            rx(&fx, n + k);
        }
        CHECK_EQ(fx.ndels, w + 1); /* only n + w was new */
        fx_fini(&fx);
    }
}

/* Many windows' worth of traffic in a scrambled order across the wrap:
 * every sequence number is delivered exactly once, in order */
static void test_scrambled_stream_across_wrap(void)
{
    static const uint32_t windows[] = {8, 16, 64};
    for (size_t wi = 0; wi < 3; ++wi) {
        uint32_t w = windows[wi];
        uint32_t n = 0xffffffffu - 3 * w;
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, w, 0, n);
        uint64_t rng = 7 + w;
        const uint32_t total = 10 * w;
        unsigned *count = (unsigned *) calloc(total, sizeof(unsigned));
        /* each step: something from the current window (new or dup), sometimes an old one */
        for (unsigned step = 0; step < 40 * total && ep->rx.next_expected != n + total; ++step) {
            uint32_t base = ep->rx.next_expected - n;
            uint32_t off = base + fx_rand(&rng) % w;
            if (0 == fx_rand(&rng) % 5 && base > 0) {
                off = fx_rand(&rng) % base;
            }
            if (off < total) {
                rx(&fx, n + off);
            }
        }
        CHECK_EQ_U(ep->rx.next_expected, n + total);
        unsigned out_of_order = 0;
        for (size_t d = 0; d < fx.ndels; ++d) {
            uint32_t got;
            memcpy(&got, fx.dels[d].data, sizeof(got));
            out_of_order += got != n + (uint32_t) d;
            if (CHECK_LT(got - n, total)) {
                ++count[got - n];
            }
        }
        unsigned bad = 0;
        for (uint32_t k = 0; k < total; ++k) {
            bad += (1 != count[k]);
        }
        CHECK_EQ(out_of_order, 0);
        if (!CHECK_EQ(bad, 0)) {
            fprintf(stderr, "  window %u\n", w);
        }
        free(count);
        fx_fini(&fx);
    }
}

/* The fast receive path accepts only FRAGs that are next in order (and
 * whose successor has not arrived), marks them before the upcall, and
 * leaves ACK scheduling to recv_fast_finish() */
static void seen_as_dup_hook(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data, size_t len)
{
    (void) tag;
    (void) len;
    uint32_t seq;
    memcpy(&seq, data, sizeof(seq));
    /* re-entrant check from inside the PML callback */
    if (OPAL_BTL_USNIC_SEQ_DUP != opal_btl_usnic_seq_classify(ep, seq) &&
        OPAL_BTL_USNIC_SEQ_OLD != opal_btl_usnic_seq_classify(ep, seq)) {
        fx->peer_failed_rc = -999; /* flag for the test */
    }
}

static void test_fast_receive_path(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 50);
    fx.deliver_hook = seen_as_dup_hook;
    uint8_t buf[128];
    opal_btl_usnic_endpoint_t *got_ep = NULL;
    uint32_t seq = 50;
    size_t len = fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq));
    CHECK_EQ(fast(&fx, buf, len, &got_ep), TAKEN);
    CHECK_PTR_EQ(got_ep, ep);
    CHECK_EQ(fx.ndels, 1);
    CHECK_EQ(fx.peer_failed_rc, 0);
    CHECK(!ep->rx.ack_owed); /* deferred */
    CHECK(!opal_btl_usnic_recv_fast_ready(&fx.eng)); /* no second one before the bookkeeping */
    CHECK(opal_btl_usnic_recv_fast_finish(&fx.eng));
    CHECK(ep->rx.ack_owed);
    CHECK(opal_btl_usnic_recv_fast_ready(&fx.eng));
    CHECK(!opal_btl_usnic_recv_fast_finish(&fx.eng)); /* nothing owed twice */
    /* a duplicate (sent again: a new nonce) is not for the fast path;
     * a copy of the same datagram (the same nonce) is dropped as a replay */
    CHECK_EQ(fast(&fx, buf, len, &got_ep), DECLINED);
    CHECK_EQ(fx_hand_up_fast(&fx.eng, buf, len, &got_ep), DECLINED);
    fx_seal(&fx, buf, len, PEER, fx.seal_nonce - 1); /* the nonce the fast path took */
    uint64_t replays = fx.eng.stats.num_drop_replay;
    fx_recv_raw(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_replay, replays + 1);
    CHECK_EQ(fx.ndels, 1);
    /* nor a chunk, garbage, an unknown sender */
    seq = 51;
    static const uint8_t ten[10] = {0};
    len = fx_build_chunk(buf, PEER, seq, 3, 1, 3000, 0, ten, sizeof(ten));
    CHECK_EQ(fast(&fx, buf, len, &got_ep), DECLINED);
    len = fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq));
    CHECK_EQ(fast(&fx, buf, len - 1, &got_ep), DECLINED);
    CHECK_EQ(fast(&fx, buf, 10, &got_ep), DECLINED);
    len = fx_build_frag(buf, 6, seq, 3, &seq, sizeof(seq));
    CHECK_EQ(fast(&fx, buf, len, &got_ep), DECLINED);
    len = fx_build_frag(buf, PEER, 51 + 16, 3, &seq, sizeof(seq)); /* too new */
    CHECK_EQ(fast(&fx, buf, len, &got_ep), DECLINED);
    CHECK_EQ(fx.ndels, 1);
    CHECK_EQ_U(ep->rx.next_expected, 51);
    /* out of order is not: the slow path holds it back */
    seq = 53;
    len = fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq));
    CHECK_EQ(fast(&fx, buf, len, &got_ep), DECLINED);
    fx_recv(&fx, buf, len);
    CHECK_EQ(fx.ndels, 1);
    CHECK_EQ(ep->rx.nheld, 1);
    /* nor one whose successor waits: it would be handed over behind it */
    seq = 52;
    len = fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq));
    fx_recv(&fx, buf, len);
    CHECK_EQ(fx.ndels, 1);
    seq = 51;
    len = fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq));
    CHECK_EQ(fast(&fx, buf, len, &got_ep), DECLINED);
    fx_recv(&fx, buf, len);
    REQUIRE_EQ(fx.ndels, 4); /* 51, then 52 and 53 */
    for (uint32_t d = 1; d < 4; ++d) {
        uint32_t got;
        memcpy(&got, fx.dels[d].data, sizeof(got));
        CHECK_EQ_U(got, 50 + d);
    }
    /* in order again: the fast path takes it */
    seq = 54;
    len = fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq));
    CHECK_EQ(fast(&fx, buf, len, &got_ep), TAKEN);
    (void) opal_btl_usnic_recv_fast_finish(&fx.eng);
    CHECK_EQ(fx.ndels, 5);
    CHECK_EQ(fx.peer_failed_rc, 0);
    CHECK_EQ_U(fx.eng.stats.num_fast_recvs, 2);
    fx_fini(&fx);
}

/*
 * Windows are powers of two (opal_btl_usnic_endpoint_init_rel rounds the
 * requested size down), so the slots "seq % window" of tx.sent and rx.rcvd
 * stay distinct across the 32-bit wrap.  Requested windows that are not
 * powers of two used to alias there: with window 6 and ISN 2^32 - 2, seq 2
 * and the ISN shared slot 2; with 46 (this host's default before rounding)
 * and ISN 2^32 - 12, seq 0 and the ISN shared slot 0; the ISN was then
 * skipped (never delivered) and seq 2 / 0 delivered twice.  The same
 * arrivals now deliver every sequence number exactly once.
 */
static void test_rx_rounded_window_delivery_across_wrap(void)
{
    static const struct {
        uint32_t requested, effective, isn, first; /* |first| arrives before the ISN */
    } cases[] = {
        {6, 4, 0xfffffffeu, 1},
        {6, 4, 0xfffffffeu, 2},   /* beyond the rounded window: dropped, delivered later */
        {46, 32, 0xfffffff4u, 0},
        {46, 32, 0xfffffff4u, 19}, /* the right edge of [ISN, ISN + 32) */
        {100, 64, 0xffffffe0u, 0x1f},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        fx_t fx;
        fx_init(&fx, NULL);
        const uint32_t n = cases[i].isn;
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, cases[i].requested, 0, n);
        CHECK_EQ(ep->window, cases[i].effective);
        rx(&fx, cases[i].first);
        CHECK_EQ_U(ep->rx.next_expected, n); /* the ISN is still missing */
        CHECK_CLASS(ep, n, C(NEW_IN_ORDER));
        /* the sender retransmits everything up to |first| (it does that
         * until it gets a cumulative ACK), twice */
        for (int round = 0; round < 2; ++round) {
            for (uint32_t s = n; s != cases[i].first + 1; ++s) {
                rx(&fx, s);
            }
        }
        unsigned count[128] = {0};
        for (size_t d = 0; d < fx.ndels; ++d) {
            uint32_t got;
            memcpy(&got, fx.dels[d].data, sizeof(got));
            if (CHECK_LT(got - n, 128)) {
                ++count[got - n];
            }
        }
        uint32_t span = cases[i].first - n + 1;
        for (uint32_t k = 0; k < span; ++k) {
            if (!CHECK_EQ(count[k], 1)) {
                fprintf(stderr, "  window %u (%u): seq 0x%x delivered %u times\n", cases[i].requested,
                        cases[i].effective, n + k, count[k]);
            }
        }
        CHECK_EQ(fx.ndels, span);
        CHECK_EQ_U(ep->rx.next_expected, cases[i].first + 1);
        fx_fini(&fx);
    }
    /* and scrambled streams across the wrap with requested non-powers of two */
    static const uint32_t windows[] = {6, 46, 100};
    for (size_t wi = 0; wi < 3; ++wi) {
        fx_t fx;
        fx_init(&fx, NULL);
        uint32_t n = 0xffffffffu - 100;
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, windows[wi], 0, n);
        uint32_t w = ep->window;
        uint64_t rng = 99 + w;
        const uint32_t total = 400;
        unsigned *count = (unsigned *) calloc(total, sizeof(unsigned));
        for (unsigned step = 0; step < 60 * total && ep->rx.next_expected != n + total; ++step) {
            uint32_t base = ep->rx.next_expected - n;
            /* also beyond the effective window (up to the requested one) */
            uint32_t off = base + fx_rand(&rng) % windows[wi];
            if (0 == fx_rand(&rng) % 5 && base > 0) {
                off = fx_rand(&rng) % base;
            }
            if (off < total) {
                rx(&fx, n + off);
            }
        }
        CHECK_EQ_U(ep->rx.next_expected, n + total);
        unsigned bad = 0;
        for (size_t d = 0; d < fx.ndels; ++d) {
            uint32_t got;
            memcpy(&got, fx.dels[d].data, sizeof(got));
            if (got - n < total) {
                ++count[got - n];
            } else {
                ++bad;
            }
        }
        for (uint32_t k = 0; k < total; ++k) {
            bad += (1 != count[k]);
        }
        if (!CHECK_EQ(bad, 0)) {
            fprintf(stderr, "  requested window %u\n", windows[wi]);
        }
        free(count);
        fx_fini(&fx);
    }
}

/* A PML that makes progress from inside its receive callback: the first
 * upcall receives the next fragments (in order, and one ahead of a hole)
 * before it returns.  They must not be handed over inside it, but right
 * after, in order. */
static unsigned nested_depth, nested_max_depth;

static void nested_progress_hook(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data, size_t len)
{
    (void) ep;
    (void) tag;
    (void) len;
    uint32_t seq;
    memcpy(&seq, data, sizeof(seq));
    ++nested_depth;
    if (nested_depth > nested_max_depth) {
        nested_max_depth = nested_depth;
    }
    if (100 == seq) {
        rx(fx, 101); /* next in order: still waits for 100's upcall */
        rx(fx, 103); /* ahead of a hole */
        rx(fx, 102);
        rx(fx, 101); /* a copy of one that waits: dropped */
    }
    --nested_depth;
}

static void test_delivery_waits_for_running_upcall(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 100);
    fx.deliver_hook = nested_progress_hook;
    nested_depth = nested_max_depth = 0;
    rx(&fx, 100);
    REQUIRE_EQ(fx.ndels, 4);
    for (uint32_t d = 0; d < 4; ++d) {
        uint32_t got;
        memcpy(&got, fx.dels[d].data, sizeof(got));
        CHECK_EQ_U(got, 100 + d);
    }
    CHECK_EQ(nested_max_depth, 1); /* never an upcall inside an upcall */
    CHECK_EQ(ep->rx.nheld, 0);
    CHECK_EQ_U(ep->rx.next_expected, 104);
    CHECK_EQ_U(fx.eng.stats.num_oow_low_recvs, 1); /* the copy: below the window once 102 came */
    CHECK(!ep->rx.delivering);
    fx_fini(&fx);
}

/* The same through the fast path: what completed during its upcall is
 * handed over when the upcall returns, not at the next arrival */
static void nested_fast_hook(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data, size_t len)
{
    (void) ep;
    (void) tag;
    (void) len;
    uint32_t seq;
    memcpy(&seq, data, sizeof(seq));
    ++nested_depth;
    nested_max_depth = nested_depth > nested_max_depth ? nested_depth : nested_max_depth;
    if (200 == seq) {
        rx(fx, 202);
        rx(fx, 201);
    }
    --nested_depth;
}

static void test_fast_path_delivers_what_came_during_upcall(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 200);
    fx.deliver_hook = nested_fast_hook;
    nested_depth = nested_max_depth = 0;
    uint8_t buf[64];
    uint32_t seq = 200;
    size_t len = fx_build_frag(buf, PEER, seq, 7, &seq, sizeof(seq));
    opal_btl_usnic_endpoint_t *got = NULL;
    REQUIRE_EQ(fast(&fx, buf, len, &got), TAKEN);
    REQUIRE_EQ(fx.ndels, 3); /* 200, then 201 and 202 before recv_fast returned */
    for (uint32_t d = 0; d < 3; ++d) {
        uint32_t v;
        memcpy(&v, fx.dels[d].data, sizeof(v));
        CHECK_EQ_U(v, 200 + d);
    }
    CHECK_EQ(nested_max_depth, 1);
    CHECK_EQ(ep->rx.nheld, 0);
    (void) opal_btl_usnic_recv_fast_finish(&fx.eng);
    fx_fini(&fx);
}

/* The receive state the statistics print: ahead, holes, held, slots */
static void test_rx_state(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 0xfffffffeu);
    opal_btl_usnic_rx_state_t st;
    opal_btl_usnic_rx_state(ep, &st);
    CHECK_EQ_U(st.next_expected, 0xfffffffeu);
    CHECK_EQ(st.ahead + st.holes + st.held + st.slots, 0);
    rx(&fx, 0xfffffffeu + 2); /* hole at +0 and +1 */
    rx(&fx, 0xfffffffeu + 5); /* and at +3, +4 */
    opal_btl_usnic_rx_state(ep, &st);
    CHECK_EQ(st.ahead, 2);
    CHECK_EQ(st.holes, 4);
    CHECK_EQ(st.held, 2);
    CHECK_EQ(st.slots, 0);
    uint8_t buf[FX_MTU], data[FX_MAX_CHUNK_PAYLOAD] = {0};
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 0xfffffffeu + 3, 7, 9, 3000, 0, data, FX_MAX_CHUNK_PAYLOAD));
    opal_btl_usnic_rx_state(ep, &st);
    CHECK_EQ(st.ahead, 3);
    CHECK_EQ(st.holes, 3);
    CHECK_EQ(st.slots, 1);
    fx_fini(&fx);
}

#define ISN_TX 500u          /* our first sequence number */
#define ISN_RX 0xfffffff8u   /* the peer's: its stream crosses the wrap */
#define ACCEPT_WINDOW 16

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
    s->ep = fx_ep_new(&s->fx, PEER, ACCEPT_WINDOW, ISN_TX, ISN_RX);
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
            (void) opal_btl_usnic_recv_fast_finish(&s->fx.eng); /* the module's next pass, first thing */
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
    for (uint32_t k = 0; k < ACCEPT_WINDOW / 2; ++k) {
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

#define RC(x) OPAL_BTL_USNIC_RX_FRAG_##x

/* ---------------- whole segments ---------------- */

typedef struct {
    uint32_t size;
    uint32_t id;
    uint8_t *data;
} big_t;

/* Chunk |c| of |b| as sequence number |seq|; returns its length */
static size_t chunk_seg(uint8_t *buf, const big_t *b, unsigned c, uint32_t seq, uint8_t tag)
{
    size_t off = (size_t) c * FX_MAX_CHUNK_PAYLOAD;
    size_t len = (off + FX_MAX_CHUNK_PAYLOAD > b->size) ? b->size - off : FX_MAX_CHUNK_PAYLOAD;
    return fx_build_chunk(buf, PEER, seq, tag, b->id, b->size, (uint32_t) off, b->data + off, len);
}

static void slot_free_hook(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data, size_t len)
{
    (void) tag;
    (void) data;
    (void) len;
    /* the slot is free before the upcall (the PML may progress from it) */
    for (uint32_t i = 0; i < ep->window; ++i) {
        if (0 != ep->rx.frags[i].frag_id) {
            fx->peer_failed_rc = -999;
        }
    }
}

static void test_reassembly_segments_every_order(void)
{
    static const uint32_t sizes[] = {FX_MAX_FRAG_PAYLOAD + 1, 5000, 65536};
    static const uint32_t isns[] = {100, 0xfffffff0u};
    for (size_t ii = 0; ii < 2; ++ii) {
        for (size_t si = 0; si < 3; ++si) {
            for (int kind = 0; kind < 4; ++kind) {
                fx_t fx;
                opal_btl_usnic_engine_params_t p;
                fx_params_default(&p);
                p.ack_iteration_delay = 50;
                fx_init(&fx, &p);
                fx.deliver_hook = slot_free_hook;
                const uint32_t isn = isns[ii];
                opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, 0, isn);
                big_t b = {sizes[si], 0xfffffff0u + (uint32_t) kind, NULL};
                b.data = (uint8_t *) malloc(b.size);
                fx_fill(b.data, b.size, b.size + (uint32_t) kind);
                unsigned n = fx_nchunks(b.size, FX_MAX_CHUNK_PAYLOAD);
                unsigned order[64];
                fx_make_order(order, n, kind);
                uint8_t buf[FX_MTU];
                for (unsigned k = 0; k < n; ++k) {
                    fx_recv(&fx, buf, chunk_seg(buf, &b, order[k], isn + order[k], 0x77));
                    if (k + 1 < n) {
                        CHECK_EQ(fx.ndels, 0);
                    }
                }
                bool ok = CHECK_EQ(fx.ndels, 1);
                if (1 == fx.ndels) {
                    ok = CHECK_EQ(fx.dels[0].len, b.size) && ok;
                    ok = CHECK_EQ(fx.dels[0].tag, 0x77) && ok;
                    ok = CHECK_MEM(fx.dels[0].data, b.data, b.size) && ok;
                }
                ok = CHECK_EQ(fx.peer_failed_rc, 0) && ok;
                ok = CHECK_EQ_U(ep->rx.next_expected, isn + n) && ok;
                ok = CHECK_EQ_U(fx.eng.stats.num_chunk_recvs, n) && ok;
                /* completing a fragment does not hurry the ACK (the reply
                 * may carry it); it leaves on its own after the delay, or
                 * at once after half a window or an out-of-order arrival */
                for (uint32_t t = 0; t < p.ack_iteration_delay && 0 == fx.nposts; ++t) {
                    opal_btl_usnic_engine_progress(&fx.eng);
                }
                ok = CHECK_EQ(fx.nposts, 1) && ok;
                if (1 == fx.nposts) {
                    ok = CHECK_EQ(fx_post_hdr(&fx.posts[0])->type, OPAL_BTL_USNIC_PKT_ACK) && ok;
                    ok = CHECK_EQ_U(opal_btl_usnic_host32(fx_post_hdr(&fx.posts[0])->ack_seq), isn + n - 1) && ok;
                }
                /* replaying every chunk delivers nothing more */
                for (unsigned k = 0; k < n; ++k) {
                    fx_recv(&fx, buf, chunk_seg(buf, &b, k, isn + k, 0x77));
                }
                ok = CHECK_EQ(fx.ndels, 1) && ok;
                ok = CHECK_EQ(ep->rx.frags[b.id % 64].frag_id, 0) && ok;
                if (!ok) {
                    fprintf(stderr, "  size %u, %s order (%d), isn 0x%x\n", b.size, fx_order_name(kind), kind, isn);
                }
                free(b.data);
                fx_complete_all(&fx);
                fx_fini(&fx);
            }
        }
    }
}

/* Holes: every other chunk, then the rest; duplicates in between */
static void test_reassembly_holes_and_duplicates(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    const uint32_t isn = 7;
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, isn);
    big_t b = {10000, 3, NULL};
    b.data = (uint8_t *) malloc(b.size);
    fx_fill(b.data, b.size, 99);
    unsigned n = fx_nchunks(b.size, FX_MAX_CHUNK_PAYLOAD); /* 8 */
    uint8_t buf[FX_MTU];
    size_t odd_bytes = 0; /* what the chunks not sent yet carry */
    for (unsigned c = 0; c < n; ++c) {
        if (c % 2) {
            odd_bytes += (c + 1 < n) ? FX_MAX_CHUNK_PAYLOAD : b.size - c * FX_MAX_CHUNK_PAYLOAD;
        }
    }
    for (unsigned c = 0; c < n; c += 2) {
        fx_recv(&fx, buf, chunk_seg(buf, &b, c, isn + c, 1));
    }
    opal_btl_usnic_rx_frag_t *slot = &ep->rx.frags[3 % 16];
    CHECK_EQ(slot->frag_id, 3);
    uint32_t left = slot->bytes_left;
    CHECK_EQ(left, odd_bytes);
    /* duplicates are dropped by sequence number: the byte count is not touched */
    for (unsigned c = 0; c < n; c += 2) {
        fx_recv(&fx, buf, chunk_seg(buf, &b, c, isn + c, 1));
    }
    CHECK_EQ(slot->bytes_left, left);
    CHECK_EQ_U(fx.eng.stats.num_dup_recvs, 3);     /* 2, 4, 6 */
    CHECK_EQ_U(fx.eng.stats.num_oow_low_recvs, 1); /* 0 is below the window already */
    CHECK_EQ(fx.ndels, 0);
    CHECK_EQ_U(ep->rx.next_expected, isn + 1);
    for (unsigned c = 1; c < n; c += 2) {
        fx_recv(&fx, buf, chunk_seg(buf, &b, c, isn + c, 1));
    }
    REQUIRE_EQ(fx.ndels, 1);
    CHECK_MEM(fx.dels[0].data, b.data, b.size);
    CHECK_EQ_U(ep->rx.next_expected, isn + n);
    free(b.data);
    fx_fini(&fx);
}

/* Two fragments in flight at once in different slots, chunks interleaved */
static void test_reassembly_interleaved_fragments(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 0);
    big_t a = {4000, 1, NULL}, b = {3000, 2, NULL};
    a.data = (uint8_t *) malloc(a.size);
    b.data = (uint8_t *) malloc(b.size);
    fx_fill(a.data, a.size, 1);
    fx_fill(b.data, b.size, 2);
    uint8_t buf[FX_MTU];
    /* a: seqs 0,1,2  b: seqs 3,4,5 */
    fx_recv(&fx, buf, chunk_seg(buf, &b, 1, 4, 2));
    fx_recv(&fx, buf, chunk_seg(buf, &a, 2, 2, 1));
    fx_recv(&fx, buf, chunk_seg(buf, &b, 0, 3, 2));
    fx_recv(&fx, buf, chunk_seg(buf, &a, 0, 0, 1));
    fx_recv(&fx, buf, chunk_seg(buf, &b, 2, 5, 2)); /* b complete first: it waits for a */
    CHECK_EQ(fx.ndels, 0);
    CHECK_EQ(ep->rx.nheld, 1);
    CHECK_EQ(ep->rx.frags[2].frag_id, 0); /* b's slot is free already */
    fx_recv(&fx, buf, chunk_seg(buf, &a, 1, 1, 1)); /* a completes: a, then b */
    REQUIRE_EQ(fx.ndels, 2);
    CHECK_EQ(fx.dels[0].tag, 1);
    CHECK_MEM(fx.dels[0].data, a.data, a.size);
    CHECK_EQ(fx.dels[1].tag, 2);
    CHECK_MEM(fx.dels[1].data, b.data, b.size);
    CHECK_EQ(ep->rx.nheld, 0);
    CHECK_EQ_U(fx.eng.stats.num_held_frags, 2); /* both waited: a's last segment came after the hole */
    CHECK_EQ_U(ep->rx.next_expected, 6);
    free(a.data);
    free(b.data);
    fx_fini(&fx);
}

/* A chunk for a slot held by another fragment is not accepted (not even
 * its sequence number): the sender's retransmission gets it in later */
static void test_reassembly_busy_slot(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    const uint32_t w = 16;
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, w, 0, 0);
    big_t a = {3000, 5, NULL}, b = {3000, 5 + w, NULL}; /* same slot */
    a.data = (uint8_t *) malloc(a.size);
    b.data = (uint8_t *) malloc(b.size);
    fx_fill(a.data, a.size, 5);
    fx_fill(b.data, b.size, 6);
    uint8_t buf[FX_MTU];
    fx_recv(&fx, buf, chunk_seg(buf, &a, 0, 0, 1));
    fx_recv(&fx, buf, chunk_seg(buf, &b, 0, 3, 1)); /* seq 3: b's first chunk */
    CHECK_EQ_U(fx.eng.stats.num_badfrag_recvs, 1);
    CHECK_EQ(opal_btl_usnic_seq_classify(ep, 3), OPAL_BTL_USNIC_SEQ_NEW_OOO); /* not marked */
    CHECK_EQ(ep->rx.frags[5 % w].frag_id, 5);
    fx_recv(&fx, buf, chunk_seg(buf, &a, 1, 1, 1));
    fx_recv(&fx, buf, chunk_seg(buf, &a, 2, 2, 1));
    CHECK_EQ(fx.ndels, 1);
    /* the retransmission of b's chunk now fits */
    fx_recv(&fx, buf, chunk_seg(buf, &b, 0, 3, 1));
    fx_recv(&fx, buf, chunk_seg(buf, &b, 1, 4, 1));
    fx_recv(&fx, buf, chunk_seg(buf, &b, 2, 5, 1));
    REQUIRE_EQ(fx.ndels, 2);
    CHECK_MEM(fx.dels[0].data, a.data, a.size);
    CHECK_MEM(fx.dels[1].data, b.data, b.size);
    CHECK_EQ_U(ep->rx.next_expected, 6);
    free(a.data);
    free(b.data);
    fx_fini(&fx);
}

/* Chunks that do not fit their reassembly are dropped and not accepted */
static void test_reassembly_rejects_bad_chunks(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 0);
    uint8_t data[FX_MTU];
    fx_fill(data, sizeof(data), 1);
    uint8_t buf[FX_MTU];
    uint64_t bad = 0;

    /* start fragment 1: 3000 bytes, chunk at offset 0 (seq 0) */
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 0, 1, 1, 3000, 0, data, FX_MAX_CHUNK_PAYLOAD));
    CHECK_EQ_U(ep->rx.next_expected, 1);

    /* same id, another total size: corrupt */
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 1, 1, 1, 4000, FX_MAX_CHUNK_PAYLOAD, data, FX_MAX_CHUNK_PAYLOAD));
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, ++bad);
    /* beyond the fragment's end */
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 1, 1, 1, 3000, 2000, data, FX_MAX_CHUNK_PAYLOAD));
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, ++bad);
    /* a new fragment larger than max_send_size */
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 5, 1, 2, FX_MAX_SEND + 1, 0, data, FX_MAX_CHUNK_PAYLOAD));
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, ++bad);
    /* fragment id 0 (marks a free slot) */
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 6, 1, 0, 3000, 0, data, FX_MAX_CHUNK_PAYLOAD));
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, ++bad);
    /* zero-length chunk */
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 7, 1, 3, 3000, 0, data, 0));
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, ++bad);
    /* none of them took a sequence number or a slot */
    CHECK_EQ(opal_btl_usnic_seq_classify(ep, 5), OPAL_BTL_USNIC_SEQ_NEW_OOO);
    CHECK_EQ(opal_btl_usnic_seq_classify(ep, 6), OPAL_BTL_USNIC_SEQ_NEW_OOO);
    CHECK_EQ(opal_btl_usnic_seq_classify(ep, 7), OPAL_BTL_USNIC_SEQ_NEW_OOO);
    CHECK_EQ(ep->rx.frags[2].frag_id, 0);
    CHECK_EQ(ep->rx.frags[0].frag_id, 0);
    CHECK_EQ(ep->rx.frags[3].frag_id, 0);
    CHECK_EQ(fx.ndels, 0);
    CHECK_EQ(opal_btl_usnic_seq_classify(ep, 1), OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER);
    /* the genuine chunks still complete the fragment */
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 1, 1, 1, 3000, FX_MAX_CHUNK_PAYLOAD, data, FX_MAX_CHUNK_PAYLOAD));
    fx_recv(&fx, buf, fx_build_chunk(buf, PEER, 2, 1, 1, 3000, 2 * FX_MAX_CHUNK_PAYLOAD, data,
                                     3000 - 2 * FX_MAX_CHUNK_PAYLOAD));
    CHECK_EQ(fx.ndels, 1);
    fx_fini(&fx);
}

/* Chunks not cut at the endpoint's max_chunk_payload are dropped as bad
 * chunks and take no sequence number and no slot */
static void test_reassembly_rejects_misaligned_chunks(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 0);
    uint8_t data[FX_MTU];
    fx_fill(data, sizeof(data), 4);
    uint8_t buf[FX_MTU];
    uint64_t bad = 0;
    static const struct {
        uint32_t size, offset, len;
    } forged[] = {
        {3000, 1000, 1000},  /* chunks of 1000 bytes (another MTU) */
        {3000, 0, 1000},
        {3000, 100, 1336},
        {3000, 2872, 100},   /* short last chunk */
        {3000, 1436, 1200},  /* short middle chunk */
        {5000, 4308, 600},   /* last chunk too short: 5000 - 4308 = 692 */
    };
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); ++i) {
        fx_recv(&fx, buf, fx_build_chunk(buf, PEER, (uint32_t) i, 1, 7 + (uint32_t) i, forged[i].size,
                                         forged[i].offset, data, forged[i].len));
        if (!CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, ++bad)) {
            fprintf(stderr, "  forged chunk %zu\n", i);
        }
        CHECK_EQ(opal_btl_usnic_seq_classify(ep, (uint32_t) i),
                 0 == i ? OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER : OPAL_BTL_USNIC_SEQ_NEW_OOO);
        CHECK_EQ(ep->rx.frags[(7 + i) % 16].frag_id, 0);
    }
    CHECK_EQ_U(fx.eng.stats.num_chunk_recvs, 0);
    CHECK_EQ(fx.ndels, 0);
    CHECK_EQ_U(ep->rx.next_expected, 0);
    CHECK(!ep->rx.ack_owed);
    fx_fini(&fx);
}

/*
 * Overlapping chunks are rejected.  Reassembly used to count bytes, not
 * ranges, so a chunk re-covering received bytes under a new sequence
 * number (a corrupt datagram, or one from a peer that holds the key)
 * completed the fragment early with bytes that never arrived, and the
 * genuine chunk was then refused forever.  Now the receiver accepts only
 * chunks aligned to its max_chunk_payload and refuses one whose slot bit
 * is already set (opal_btl_usnic_rx_frag_has): the overlap is dropped and
 * counted, takes no sequence number, and the fragment completes only with
 * the genuine bytes.
 */
static void test_reassembly_overlapping_chunk_rejected(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 0);
    big_t b = {3000, 1, NULL}; /* three chunks: seq 0, 1, 2 (the last one short) */
    b.data = (uint8_t *) malloc(b.size);
    fx_fill(b.data, b.size, 11);
    uint8_t *evil = (uint8_t *) malloc(b.size);
    fx_fill(evil, b.size, 66);
    big_t e = {3000, 1, evil};
    uint8_t buf[FX_MTU];
    fx_recv(&fx, buf, chunk_seg(buf, &b, 0, 0, 1));
    CHECK(opal_btl_usnic_rx_frag_has(&ep->rx.frags[1], 0));
    CHECK(!opal_btl_usnic_rx_frag_has(&ep->rx.frags[1], FX_MAX_CHUNK_PAYLOAD));
    /* seq 3: claims fragment 1 at offset 0 again, other bytes */
    fx_recv(&fx, buf, chunk_seg(buf, &e, 0, 3, 1));
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, 1);
    CHECK_EQ(opal_btl_usnic_seq_classify(ep, 3), OPAL_BTL_USNIC_SEQ_NEW_OOO); /* not accepted */
    /* seq 4: a misaligned chunk overlapping both the received and the missing range */
    fx_recv(&fx, buf,
            fx_build_chunk(buf, PEER, 4, 1, 1, 3000, FX_MAX_CHUNK_PAYLOAD / 2, evil, FX_MAX_CHUNK_PAYLOAD));
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, 2);
    CHECK_EQ(opal_btl_usnic_seq_classify(ep, 4), OPAL_BTL_USNIC_SEQ_NEW_OOO);
    CHECK_EQ(ep->rx.frags[1].bytes_left, 3000 - FX_MAX_CHUNK_PAYLOAD);
    CHECK_EQ(fx.ndels, 0);
    fx_recv(&fx, buf, chunk_seg(buf, &b, 2, 2, 1));
    /* seq 5: the last piece again */
    fx_recv(&fx, buf, chunk_seg(buf, &e, 2, 5, 1));
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_chunk, 3);
    CHECK_EQ(fx.ndels, 0);
    fx_recv(&fx, buf, chunk_seg(buf, &b, 1, 1, 1));
    if (CHECK_EQ(fx.ndels, 1)) {
        CHECK_MEM(fx.dels[0].data, b.data, b.size); /* only genuine bytes */
    }
    CHECK_EQ_U(ep->rx.next_expected, 3);
    CHECK_EQ_U(fx.eng.stats.num_chunk_recvs, 3);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 3);
    CHECK_EQ(ep->rx.frags[1].frag_id, 0);
    free(evil);
    free(b.data);
    fx_fini(&fx);
}

/* A datagram handed up from |src| on the data channel, sealed by PEER */
static void rx_from(fx_t *fx, uint8_t *buf, size_t len, uint64_t src)
{
    fx_seal(fx, buf, len, PEER, ++fx->seal_nonce);
    opal_btl_usnic_engine_set_time(&fx->eng, fx->now);
    const opal_btl_usnic_datagram_t dg = {.buf = buf, .len = len, .channel = OPAL_BTL_USNIC_DATA_CHANNEL, .src = src};
    opal_btl_usnic_recv_segment(&fx->eng, &dg);
}

/* Where the wire reports sources, a datagram must come from the address
 * its claimed sender published for that channel: from elsewhere it is
 * dropped before its tag is even checked (drop_bad_source), the fast path
 * turns it down, and the real one still gets through; without
 * check_source the address is not looked at */
static void test_source_checked_in_the_one_lookup(void)
{
    const uint64_t real = 0x0100007f3039ull, forged = 0x0200007f3039ull;
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.check_source = true;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 16, 0, 10);
    ep->peer_addr[OPAL_BTL_USNIC_DATA_CHANNEL] = real;
    ep->peer_addr[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = forged; /* the other channel's address proves nothing */
    uint8_t buf[128];
    uint32_t seq = 10;
    size_t len = fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq));
    rx_from(&fx, buf, len, forged);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_source, 1);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 1);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_mac, 0);
    CHECK_EQ(fx.ndels, 0);
    fx_seal(&fx, buf, len, PEER, ++fx.seal_nonce);
    opal_btl_usnic_endpoint_t *got_ep = NULL;
    const opal_btl_usnic_datagram_t dg = {.buf = buf, .len = len, .channel = OPAL_BTL_USNIC_DATA_CHANNEL, .src = forged};
    CHECK_EQ(opal_btl_usnic_recv_fast(&fx.eng, &dg, &got_ep), DECLINED);
    CHECK_EQ(fx.ndels, 0);
    rx_from(&fx, buf, len, real);
    CHECK_EQ(fx.ndels, 1);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_source, 1);
    fx_fini(&fx);

    fx_init(&fx, NULL); /* check_source off: a wire that reports no source */
    ep = fx_ep_new(&fx, PEER, 16, 0, 10);
    ep->peer_addr[OPAL_BTL_USNIC_DATA_CHANNEL] = real;
    len = fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq));
    rx_from(&fx, buf, len, forged);
    CHECK_EQ(fx.ndels, 1);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_source, 0);
    fx_fini(&fx);
}

UNIT_MAIN(UNIT_TEST(test_source_checked_in_the_one_lookup), UNIT_TEST(test_reassembly_segments_every_order), UNIT_TEST(test_reassembly_holes_and_duplicates),
          UNIT_TEST(test_reassembly_interleaved_fragments), UNIT_TEST(test_reassembly_busy_slot),
          UNIT_TEST(test_reassembly_rejects_bad_chunks), UNIT_TEST(test_reassembly_rejects_misaligned_chunks),
          UNIT_TEST(test_reassembly_overlapping_chunk_rejected), UNIT_TEST(test_accept_in_order_stream),
          UNIT_TEST(test_accept_retransmission_reports_repair), UNIT_TEST(test_accept_piggybacked_ack_information),
          UNIT_TEST(test_accept_hole_filled), UNIT_TEST(test_accept_half_window_is_urgent),
          UNIT_TEST(test_accept_ack_soon), UNIT_TEST(test_accept_nested_upcall), UNIT_TEST(test_accept_random_streams),
          UNIT_TEST(test_classify_edges), UNIT_TEST(test_delivery_waits_for_running_upcall),
          UNIT_TEST(test_fast_path_delivers_what_came_during_upcall), UNIT_TEST(test_rx_state),
          UNIT_TEST(test_classify_walk), UNIT_TEST(test_full_receive_window),
          UNIT_TEST(test_scrambled_stream_across_wrap), UNIT_TEST(test_fast_receive_path),
          UNIT_TEST(test_rx_rounded_window_delivery_across_wrap))
