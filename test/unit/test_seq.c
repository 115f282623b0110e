/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Sequence arithmetic (btl_usnic_seq.h) across wrap-around, window
 * membership at its edges, the wire header's byte layout and the
 * engine's sizes.  The endpoint's derived window state is
 * test_endpoint.c's.
 */
#include "fixture.h"
#include "unit.h"

typedef struct {
    uint32_t a, b;
    int32_t diff; /* a - b */
} seq_case_t;

static const seq_case_t seq_cases[] = {
    {0, 0, 0},
    {1, 0, 1},
    {0, 1, -1},
    {0, 0xffffffffu, 1},            /* 0 follows 2^32 - 1 */
    {0xffffffffu, 0, -1},
    {5, 0xfffffffbu, 10},           /* across the wrap */
    {0xfffffffbu, 5, -10},
    {0x7fffffffu, 0, 0x7fffffff},   /* largest forward distance */
    {0, 0x7fffffffu, -0x7fffffff},
    {0x80000000u, 0x7fffffffu, 1},  /* the sign bit is just another bit */
    {0x7fffffffu, 0x80000000u, -1},
    {0xffffff00u, 0x100u, -0x200},
    {0x100u, 0xffffff00u, 0x200},
    {4096, 0, 4096},                /* a whole (maximum) window apart */
    {0xfffff800u, 0x800u, -4096},
};

static void test_seq_diff_table(void)
{
    for (size_t i = 0; i < sizeof(seq_cases) / sizeof(seq_cases[0]); ++i) {
        const seq_case_t *c = &seq_cases[i];
        CHECK_EQ(opal_btl_usnic_seq_diff(c->a, c->b), c->diff);
        CHECK_EQ(opal_btl_usnic_seq_lt(c->a, c->b), c->diff < 0);
        CHECK_EQ(opal_btl_usnic_seq_le(c->a, c->b), c->diff <= 0);
        CHECK_EQ(opal_btl_usnic_seq_gt(c->a, c->b), c->diff > 0);
        CHECK_EQ(opal_btl_usnic_seq_ge(c->a, c->b), c->diff >= 0);
    }
}

/* For pairs less than 2^31 apart the order is a strict total order,
 * wherever the pair sits on the circle */
static void test_seq_order_properties(void)
{
    uint64_t rng = 42;
    unsigned bad = 0;
    for (int i = 0; i < 20000; ++i) {
        uint32_t a = (uint32_t) fx_rand(&rng) << 16 ^ fx_rand(&rng);
        if (i % 4 == 0) {
            a = 0xffffffffu - (fx_rand(&rng) % 64); /* many near the wrap */
        }
        uint32_t d = ((uint32_t) fx_rand(&rng) << 16 ^ fx_rand(&rng)) & 0x7fffffffu;
        if (0 == d) {
            d = 1;
        }
        uint32_t b = a + d; /* b is after a */
        bad += !opal_btl_usnic_seq_lt(a, b) + !opal_btl_usnic_seq_gt(b, a) + opal_btl_usnic_seq_ge(a, b) +
               opal_btl_usnic_seq_le(b, a) + (opal_btl_usnic_seq_diff(b, a) != (int32_t) d) +
               !opal_btl_usnic_seq_le(a, a) + !opal_btl_usnic_seq_ge(a, a) + opal_btl_usnic_seq_lt(a, a);
    }
    CHECK_EQ(bad, 0);
}

typedef struct {
    uint32_t seq, start, size;
    bool in;
} win_case_t;

static const win_case_t win_cases[] = {
    {100, 100, 8, true},                     /* left edge */
    {107, 100, 8, true},                     /* right edge */
    {108, 100, 8, false},                    /* one past */
    {99, 100, 8, false},                     /* one before */
    {0xfffffffcu, 0xfffffffcu, 8, true},     /* window across the wrap */
    {0xffffffffu, 0xfffffffcu, 8, true},
    {0, 0xfffffffcu, 8, true},
    {3, 0xfffffffcu, 8, true},               /* right edge after the wrap */
    {4, 0xfffffffcu, 8, false},
    {0xfffffffbu, 0xfffffffcu, 8, false},
    {0, 0, 1, true},
    {1, 0, 1, false},
    {0xffffffffu, 0, 1, false},
    {5, 5, 0, false},                        /* empty window holds nothing */
    {4095, 0, 4096, true},
    {4096, 0, 4096, false},
    {0x80000000u, 0, 4096, false},
};

static void test_seq_in_window_edges(void)
{
    for (size_t i = 0; i < sizeof(win_cases) / sizeof(win_cases[0]); ++i) {
        const win_case_t *c = &win_cases[i];
        if (!CHECK_EQ(opal_btl_usnic_seq_in_window(c->seq, c->start, c->size), c->in)) {
            fprintf(stderr, "  case %zu: seq 0x%x start 0x%x size %u\n", i, c->seq, c->start, c->size);
        }
    }
}

/* Wire helpers are little-endian whatever the host, and the header layout
 * is the one drawn in btl_usnic_proto.h */
static void test_seq_wire_layout(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    fx.eng.p.my_name = 0x0102030405060708ull;
    uint8_t buf[64];
    memset(buf, 0xee, sizeof(buf));
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) buf;
    opal_btl_usnic_hdr_fill(&fx.eng, h, OPAL_BTL_USNIC_PKT_FRAG, 0xa1b2c3d4u, 0x1234, 0x42);
    static const uint8_t want[52] = {
        0x53, 0x55, OPAL_BTL_USNIC_PROTO_VERSION, OPAL_BTL_USNIC_PKT_FRAG,
        0x08, 0x07, 0x06, 0x05,       /* sender id: vpid, */
        0x04, 0x03, 0x02, 0x01,       /* then jobid */
        0xd4, 0xc3, 0xb2, 0xa1,       /* seq */
        0x00, 0x00, 0x00, 0x00,       /* ack */
        0x34, 0x12, 0x42, 0x00,       /* payload length, tag, flags */
        0x00, 0x00, 0x00, 0x00,       /* credit, selective ACK bits */
        0, 0, 0, 0, 0, 0, 0, 0,       /* nonce: set when sealed */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* tag: set when sealed */
    };
    CHECK_MEM(buf, want, sizeof(want));
    CHECK_EQ(buf[52], 0xee); /* nothing beyond the header written */
    CHECK_EQ(sizeof(opal_btl_usnic_hdr_t), 52);
    CHECK_EQ(offsetof(opal_btl_usnic_hdr_t, nonce), 28);
    CHECK_EQ(offsetof(opal_btl_usnic_hdr_t, mac), 36);
    CHECK_EQ(sizeof(opal_btl_usnic_chunk_hdr_t), 68);
    CHECK_EQ(offsetof(opal_btl_usnic_chunk_hdr_t, frag_id), 52);
    CHECK_EQ(offsetof(opal_btl_usnic_chunk_hdr_t, frag_size), 56);
    CHECK_EQ(offsetof(opal_btl_usnic_chunk_hdr_t, frag_offset), 60);
    CHECK_EQ(offsetof(opal_btl_usnic_chunk_hdr_t, chunk_size), 64);
    CHECK_EQ(sizeof(opal_btl_usnic_put_hdr_t), 72);
    CHECK_STR(opal_btl_usnic_seg_type_name(OPAL_BTL_USNIC_PKT_FRAG), "FRAG");
    CHECK_STR(opal_btl_usnic_seg_type_name(OPAL_BTL_USNIC_PKT_CHUNK), "CHUNK");
    CHECK_STR(opal_btl_usnic_seg_type_name(OPAL_BTL_USNIC_PKT_ACK), "ACK");
    CHECK_STR(opal_btl_usnic_seg_type_name(0), "UNKNOWN");
    CHECK_STR(opal_btl_usnic_seg_type_name(200), "UNKNOWN");
    CHECK_EQ_U(opal_btl_usnic_host32(opal_btl_usnic_wire32(0xdeadbeefu)), 0xdeadbeefu);
    CHECK_EQ_U(opal_btl_usnic_host16(opal_btl_usnic_wire16(0xbeefu)), 0xbeefu);
    fx_fini(&fx);
}

/* Engine sizes derived from the MTUs */
static void test_seq_engine_sizes(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    CHECK_EQ(fx.eng.max_frag_payload, FX_MTU - 52);
    CHECK_EQ(fx.eng.max_chunk_payload, FX_MTU - 68);
    CHECK_EQ(fx.eng.max_tiny_payload, FX_TINY_MTU - 52);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL], 1024);
    CHECK_EQ(fx.eng.credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL], 1024);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

UNIT_MAIN(UNIT_TEST(test_seq_diff_table), UNIT_TEST(test_seq_order_properties), UNIT_TEST(test_seq_in_window_edges),
          UNIT_TEST(test_seq_wire_layout), UNIT_TEST(test_seq_engine_sizes))
