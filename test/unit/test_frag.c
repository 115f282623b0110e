/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Fragments and reassembly slots (btl_usnic_frag.c).  The fragment pool:
 * small fragments come in buffer size classes, each allocation from the
 * smallest class that fits, each fragment back to its own class, and
 * small messages held while a peer's window is full cost memory in
 * proportion to their size, not a whole datagram (what made a stream of
 * small sends to a slower receiver over 65000-byte datagrams grow by 65
 * KB a message).  The pure reassembly slot functions
 * (opal_btl_usnic_rx_frag_*, opal_btl_usnic_chunk_is_aligned).
 */
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define ISN 500u
#define RC(x) OPAL_BTL_USNIC_RX_FRAG_##x

static void init_with_mtu(fx_t *fx, size_t mtu)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.mtu = mtu;
    fx_init(fx, &p);
}

/* Bytes of every slab the pool carved buffers from */
static size_t slab_bytes(const opal_btl_usnic_frag_pool_t *pool)
{
    size_t n = 0;
    for (int i = 0; i < pool->slabs.num_slabs; ++i) {
        n += pool->slabs.slabs[i].len;
    }
    return n;
}

static void test_frag_classes_follow_the_datagram_size(void)
{
    static const struct {
        size_t mtu;
        int n;
        size_t sizes[OPAL_BTL_USNIC_SMALL_CLASSES];
    } cases[] = {
        {65000, 4, {1024, 4096, 16384, 65000}},
        {8972, 3, {1024, 4096, 8972}},
        {4096, 2, {1024, 4096}},
        {1472, 2, {1024, 1472}},
        {1024, 1, {1024}},
        {600, 1, {600}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        fx_t fx;
        init_with_mtu(&fx, cases[c].mtu);
        REQUIRE_EQ(fx.eng.pool.num_small_classes, cases[c].n);
        for (int i = 0; i < cases[c].n; ++i) {
            CHECK_EQ(fx.eng.pool.small[i].datagram, cases[c].sizes[i]);
        }
        fx_fini(&fx);
    }
}

static void test_frag_alloc_takes_the_smallest_class_that_fits(void)
{
    fx_t fx;
    init_with_mtu(&fx, 65000);
    static const struct {
        size_t len;
        uint32_t capacity;
    } cases[] = {{1, 1024}, {FX_HDR, 1024}, {1024, 1024}, {1025, 4096}, {4096, 4096},
                 {4097, 16384}, {16385, 65000}, {65000, 65000}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_small_frag_alloc(&fx.eng.pool, cases[c].len);
        REQUIRE(NULL != frag);
        CHECK_EQ(frag->seg.capacity, cases[c].capacity);
        CHECK_EQ(fx.eng.pool.small[frag->size_class].datagram, cases[c].capacity);
        memset(frag->seg.hdr, 0xa5, cases[c].len); /* ASan: the whole datagram fits its buffer */
        frag->seg.flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED;
        opal_btl_usnic_frag_free(&fx.eng, frag);
    }
    CHECK(NULL == opal_btl_usnic_small_frag_alloc(&fx.eng.pool, 65001));
    CHECK(fx_all_recycled(&fx)); /* each went back to its own class */
    fx_fini(&fx);
}

/* The BTL entry points size the buffer by what the PML asks for */
static void test_frag_entry_points_size_buffers_by_request(void)
{
    fx_t fx;
    init_with_mtu(&fx, 65000);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 64, ISN, 100);
    opal_btl_usnic_send_frag_t *a = fx_alloc(&fx, ep, 60, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    opal_btl_usnic_send_frag_t *b = fx_alloc(&fx, ep, 3000, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    uint8_t user[20000];
    fx_fill(user, sizeof(user), 3);
    opal_btl_usnic_send_frag_t *c = fx_prepare_src(&fx, ep, 14, user, sizeof(user), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    REQUIRE(NULL != a && NULL != b && NULL != c);
    CHECK_EQ(a->seg.capacity, 1024);
    CHECK_EQ(b->seg.capacity, 4096);
    CHECK_EQ(c->seg.capacity, 65000);
    fx_free(&fx, a);
    fx_free(&fx, b);
    fx_free(&fx, c);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* 4000 small messages queued behind a full window (a sender far ahead of
 * its receiver, through btl_send as ob1's request path does) hold about
 * 1 KiB each, not 65000 bytes: under 16 MB where whole datagrams would be
 * 260 MB */
static void test_frag_queued_small_messages_cost_their_size(void)
{
    fx_t fx;
    init_with_mtu(&fx, 65000);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, 100);
    size_t before = slab_bytes(&fx.eng.pool);
    enum { N = 4000 };
    uint8_t msg[60];
    for (int i = 0; i < N; ++i) {
        fx_fill(msg, sizeof(msg), (uint32_t) i);
        opal_btl_usnic_send_frag_t *frag = fx_alloc(&fx, ep, sizeof(msg), MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        REQUIRE(NULL != frag);
        memcpy(frag->segments[0].seg_addr.pval, msg, sizeof(msg));
        CHECK_GE(fx_send(&fx, ep, frag, 3), 0);
    }
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 32);
    size_t grown = slab_bytes(&fx.eng.pool) - before;
    CHECK_LT(grown, (size_t) 16 << 20);
    CHECK_GT(grown, (size_t) N * 1024 / 2); /* they do hold their copies */
    fx_fini(&fx);
}

static void test_rx_frag_classify(void)
{
    opal_btl_usnic_rx_frag_t slot;
    memset(&slot, 0, sizeof(slot));
    CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 5, 3000), RC(NEW));
    CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 0xffffffffu, 1), RC(NEW));
    bool done = true;
    uint8_t data[100] = {1};
    CHECK_EQ(opal_btl_usnic_rx_frag_add(&slot, 5, 3000, 100, 0, data, 100, 7, 77, &done), OPAL_SUCCESS);
    CHECK(!done);
    CHECK_EQ(slot.frag_id, 5);
    CHECK_EQ(slot.size, 3000);
    CHECK_EQ(slot.bytes_left, 2900);
    CHECK_EQ(slot.tag, 7);
    CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 5, 3000), RC(CONTINUE));
    CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 6, 3000), RC(BUSY));
    CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 5 + 64, 3000), RC(BUSY));
    CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 5, 3001), RC(MISMATCH));
    CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 5, 2999), RC(MISMATCH));
    opal_btl_usnic_rx_frag_reset(&slot);
    CHECK_EQ(slot.frag_id, 0);
    CHECK(NULL == slot.buf);
    CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 5, 3001), RC(NEW));
    opal_btl_usnic_rx_frag_reset(&slot); /* idempotent */
}

/* Add every chunk in the given order; complete exactly at the last one */
static void test_rx_frag_add_all_orders(void)
{
    static const size_t sizes[] = {1449, 2 * 1436, 10000, 65536, 65535, 3};
    static const size_t chunk_sizes[] = {1436, 1436, 1436, 1436, 1000, 1};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); ++si) {
        size_t size = sizes[si], cs = chunk_sizes[si];
        unsigned n = fx_nchunks(size, cs);
        uint8_t *src = (uint8_t *) malloc(size);
        unsigned *order = (unsigned *) malloc(n * sizeof(unsigned));
        fx_fill(src, size, (uint32_t) size);
        for (int kind = 0; kind < 5; ++kind) {
            fx_make_order(order, n, kind);
            opal_btl_usnic_rx_frag_t slot;
            memset(&slot, 0, sizeof(slot));
            unsigned completions = 0, completed_at = 0;
            for (unsigned k = 0; k < n; ++k) {
                unsigned c = order[k];
                size_t off = c * cs, len = (off + cs > size) ? size - off : cs;
                int want = (0 == k) ? RC(NEW) : RC(CONTINUE);
                CHECK_EQ(opal_btl_usnic_rx_frag_classify(&slot, 42, (uint32_t) size), want);
                bool done = false;
                CHECK(opal_btl_usnic_chunk_is_aligned((uint32_t) size, (uint32_t) cs, (uint32_t) off,
                                                      (uint32_t) len));
                if (0 != k) {
                    CHECK(!opal_btl_usnic_rx_frag_has(&slot, (uint32_t) off));
                }
                /* chunk c carries sequence number 0xfffffffe + c: across the wrap */
                CHECK_EQ(opal_btl_usnic_rx_frag_add(&slot, 42, (uint32_t) size, (uint32_t) cs, (uint32_t) off,
                                                    src + off, (uint32_t) len, 9, (opal_btl_usnic_seq_t) (0xfffffffeu + c),
                                                    &done),
                         OPAL_SUCCESS);
                if (done) {
                    ++completions;
                    completed_at = k;
                }
            }
            bool ok = CHECK_EQ(completions, 1);
            ok = CHECK_EQ(completed_at, n - 1) && ok;
            ok = CHECK_EQ(slot.bytes_left, 0) && ok;
            ok = CHECK_MEM(slot.buf, src, size) && ok;
            ok = CHECK_EQ_U(slot.last_seq, (opal_btl_usnic_seq_t) (0xfffffffeu + n - 1)) && ok; /* its last segment */
            if (!ok) {
                fprintf(stderr, "  size %zu, chunk %zu, %s order\n", size, cs, fx_order_name(kind));
            }
            opal_btl_usnic_rx_frag_reset(&slot);
        }
        free(order);
        free(src);
    }
}

/* The pure alignment rule: every chunk but the last is exactly
 * |chunk_size| bytes at a multiple of it, the last one is the rest */
static void test_chunk_is_aligned_table(void)
{
    static const struct {
        uint32_t size, chunk, offset, len;
        bool want;
    } cases[] = {
        {3000, 1436, 0, 1436, true},
        {3000, 1436, 1436, 1436, true},
        {3000, 1436, 2872, 128, true},     /* the last, short one */
        {2872, 1436, 1436, 1436, true},    /* the last, full one */
        {1000, 1436, 0, 1000, true},       /* one chunk only */
        {1, 1, 0, 1, true},
        {3000, 1436, 100, 1336, false},    /* not at a multiple */
        {3000, 1436, 1435, 1436, false},
        {3000, 1436, 0, 1435, false},      /* short, but not the last */
        {3000, 1436, 0, 1437, false},      /* too long */
        {3000, 1436, 2872, 127, false},    /* the last one, short of the end */
        {3000, 1436, 2872, 129, false},    /* beyond the end */
        {3000, 1436, 4308, 1436, false},   /* starts beyond the end */
        {3000, 1436, 3000, 0, false},      /* at the end */
        {3000, 1436, 0, 0, false},         /* empty */
        {3000, 0, 0, 3000, false},         /* no chunk size */
        {3000, 1000, 1436, 1436, false},   /* cut for another MTU */
        {0xffffffffu, 1436, 0xffffffffu - 0xffffffffu % 1436, 0xffffffffu % 1436, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        if (!CHECK_EQ(opal_btl_usnic_chunk_is_aligned(cases[i].size, cases[i].chunk, cases[i].offset, cases[i].len),
                      cases[i].want)) {
            fprintf(stderr, "  case %zu: size %u chunk %u offset %u len %u\n", i, cases[i].size, cases[i].chunk,
                    cases[i].offset, cases[i].len);
        }
    }
}

/* A row of the span tables: over a fragment of |frag| segments, the
 * range (offset, len) and at most |max| spans; the spans wanted */
typedef struct span_case_t {
    int frag;
    size_t offset, len;
    unsigned max, want_n;
    const uint8_t *a0;
    size_t l0;
    const uint8_t *a1;
    size_t l1;
} span_case_t;

/* A large fragment over |a| and, unless NULL, |b| (a header and the data) */
static void frag_over(opal_btl_usnic_send_frag_t *f, uint8_t *a, size_t alen, uint8_t *b, size_t blen)
{
    memset(f, 0, sizeof(*f));
    f->segments[0].seg_addr.pval = a;
    f->segments[0].seg_len = alen;
    f->segments[1].seg_addr.pval = b;
    f->segments[1].seg_len = blen;
    f->base.des_segment_count = (NULL == b) ? 1 : 2;
}

/* Are the |n| spans found the |want_n| wanted (up to two: a0/l0, a1/l1)? */
static bool spans_are(const opal_btl_usnic_data_span_t *spans, unsigned n, unsigned want_n, const uint8_t *a0,
                      size_t l0, const uint8_t *a1, size_t l1)
{
    bool ok = CHECK_EQ_U(n, want_n);
    if (ok && n >= 1) {
        ok = CHECK(spans[0].addr == a0) && CHECK_EQ_U(spans[0].len, l0);
    }
    if (ok && n >= 2) {
        ok = CHECK(spans[1].addr == a1) && CHECK_EQ_U(spans[1].len, l1);
    }
    return ok;
}

/* Where a range of a fragment's data lies (the copy into a chunk takes
 * it from there): in one segment, across two, clipped at the end, none
 * past it or for nothing, at most |max| */
static void test_frag_spans_table(void)
{
    static uint8_t hdr[100], data[1000];
    opal_btl_usnic_send_frag_t two;
    frag_over(&two, hdr, sizeof(hdr), data, sizeof(data));
    const span_case_t cases[] = {
        {2, 0, 100, 2, 1, hdr, 100, NULL, 0},
        {2, 90, 30, 2, 2, hdr + 90, 10, data, 20},
        {2, 90, 30, 1, 1, hdr + 90, 10, NULL, 0},
        {2, 100, 1000, 2, 1, data, 1000, NULL, 0},
        {2, 0, 1100, 2, 2, hdr, 100, data, 1000},
        {2, 1050, 500, 2, 1, data + 950, 50, NULL, 0},
        {2, 1100, 1, 2, 0, NULL, 0, NULL, 0},
        {2, 5, 0, 2, 0, NULL, 0, NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        opal_btl_usnic_data_span_t spans[2] = {{NULL, 0}, {NULL, 0}};
        unsigned n = opal_btl_usnic_frag_spans(&two, cases[i].offset, cases[i].len, spans, cases[i].max);
        bool ok = spans_are(spans, n, cases[i].want_n, cases[i].a0, cases[i].l0, cases[i].a1, cases[i].l1);
        if (!ok) {
            fprintf(stderr, "  case %zu: offset %zu, len %zu, max %u\n", i, cases[i].offset, cases[i].len,
                    cases[i].max);
        }
    }
}

/* The datagram after next's spans, table-driven over a fragment of one
 * segment (a PUT's source) and of two (a header and the user's data):
 * two datagrams on, clipped at the data's end, split across segments,
 * nothing past the end, nothing for datagrams above the limit, at most
 * |max| spans */
static void test_frag_ahead_spans_table(void)
{
    static uint8_t hdr[100], data[10000];
    opal_btl_usnic_send_frag_t one, two;
    frag_over(&one, data, sizeof(data), NULL, 0);
    frag_over(&two, hdr, sizeof(hdr), data, sizeof(data));
    REQUIRE_EQ(OPAL_BTL_USNIC_PREFETCH_MAX_PAYLOAD, 4096u); /* the table's rows at the limit */
    const span_case_t cases[] = {
        {1, 0, 1430, 2, 1, data + 2860, 1430, NULL, 0},
        {1, 4290, 1430, 2, 1, data + 7150, 1430, NULL, 0},
        {1, 5000, 1430, 2, 1, data + 7860, 1430, NULL, 0},
        {1, 6000, 1430, 2, 1, data + 8860, 1140, NULL, 0},  /* clipped at the end */
        {1, 7140, 1430, 2, 0, NULL, 0, NULL, 0},            /* exactly at the end */
        {1, 9000, 1430, 2, 0, NULL, 0, NULL, 0},            /* past it */
        {1, 0, 0, 2, 0, NULL, 0, NULL, 0},                  /* an empty datagram */
        {1, 0, 4096, 2, 1, data + 8192, 1808, NULL, 0},     /* the limit itself */
        {1, 0, 4097, 2, 0, NULL, 0, NULL, 0},               /* above it */
        {2, 0, 30, 2, 1, hdr + 60, 30, NULL, 0},            /* inside the header */
        {2, 0, 40, 2, 2, hdr + 80, 20, data, 20},           /* across the two */
        {2, 0, 40, 1, 1, hdr + 80, 20, NULL, 0},            /* at most max */
        {2, 50, 40, 2, 1, data + 30, 40, NULL, 0},          /* in the data */
        {2, 9900, 1430, 2, 0, NULL, 0, NULL, 0},            /* past the data */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        opal_btl_usnic_data_span_t spans[2] = {{NULL, 0}, {NULL, 0}};
        const opal_btl_usnic_send_frag_t *f = (1 == cases[i].frag) ? &one : &two;
        unsigned n = opal_btl_usnic_frag_ahead_spans(f, cases[i].offset, cases[i].len, spans, cases[i].max);
        bool ok = spans_are(spans, n, cases[i].want_n, cases[i].a0, cases[i].l0, cases[i].a1, cases[i].l1);
        if (!ok) {
            fprintf(stderr, "  case %zu: %d segment(s), offset %zu, len %zu, max %u\n", i, cases[i].frag,
                    cases[i].offset, cases[i].len, cases[i].max);
        }
    }
    /* the prefetch at the edges: nothing faults */
    opal_btl_usnic_frag_prefetch_ahead(&one, 0, 1430);
    opal_btl_usnic_frag_prefetch_ahead(&two, 9000, 1430);
    opal_btl_usnic_frag_prefetch_ahead(&two, 0, 40);
}

UNIT_MAIN(UNIT_TEST(test_rx_frag_classify), UNIT_TEST(test_rx_frag_add_all_orders),
          UNIT_TEST(test_chunk_is_aligned_table), UNIT_TEST(test_frag_spans_table),
          UNIT_TEST(test_frag_ahead_spans_table),
          UNIT_TEST(test_frag_classes_follow_the_datagram_size),
          UNIT_TEST(test_frag_alloc_takes_the_smallest_class_that_fits),
          UNIT_TEST(test_frag_entry_points_size_buffers_by_request),
          UNIT_TEST(test_frag_queued_small_messages_cost_their_size))
