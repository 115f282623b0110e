/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Pairing (btl_usnic_peers.c): the initial sequence numbers of a pair,
 * opal_btl_usnic_pair_isn (btl_usnic_module_int.h), which endpoint_create
 * calls with both ends' modex ISNs.  Pure, no network.  The rest of
 * btl_usnic_peers.c (add_procs/del_procs, the modex) needs a live Open MPI:
 * test/mpi and test/dynamic.
 */
#include "opal_config.h"

#include "btl_usnic_module_int.h"
#include "fixture.h"
#include "unit.h"

typedef struct {
    uint32_t from, to, isn;
} isn_row_t;

/* Pinned: both ends compute the other's ISN from the modex, so a change
 * of the formula must come with a protocol version (the same build on
 * both ends is not guaranteed across a job that connects or spawns) */
static const isn_row_t isn_rows[] = {
    {0x00000000u, 0x00000000u, 0x00000000u}, /* to 0 scrambles to 0: the sender's ISN itself */
    {0x00000001u, 0x00000000u, 0x00000001u},
    {0x00000000u, 0x00000001u, 0x9e3645dfu},
    {0x12345678u, 0x9abcdef0u, 0x59b97373u},
    {0x9abcdef0u, 0x12345678u, 0x91944c45u}, /* the other direction of the same pair */
    {0xffffffffu, 0x00000001u, 0x9e3645deu}, /* the sum wraps */
    {0xfffffff0u, 0x80000000u, 0x8000fff0u},
    {0x00000007u, 0xffffffffu, 0x61c845e5u},
    {0xdeadbeefu, 0xdeadbeefu, 0x7b67823du}, /* equal ISNs on both ends */
};

static void test_pair_isn_pinned_values(void)
{
    for (size_t i = 0; i < sizeof(isn_rows) / sizeof(isn_rows[0]); ++i) {
        const isn_row_t *r = &isn_rows[i];
        if (!CHECK_EQ_U(opal_btl_usnic_pair_isn(r->from, r->to), r->isn)) {
            fprintf(stderr, "  from 0x%08x to 0x%08x\n", (unsigned) r->from, (unsigned) r->to);
        }
    }
}

/* The sender's ISN moves all its streams alike (across 2^32 too): the
 * receiver's ISN alone sets a stream apart from the sender's others */
static void test_pair_isn_offset_by_sender(void)
{
    static const uint32_t tos[] = {0, 1, 2, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu, 0x5bd1e995u};
    static const uint32_t shifts[] = {1, 2, 4096, 0x7fffffffu, 0x80000000u, 0xffffffffu};
    for (size_t t = 0; t < sizeof(tos) / sizeof(tos[0]); ++t) {
        uint32_t base = opal_btl_usnic_pair_isn(0, tos[t]);
        for (size_t s = 0; s < sizeof(shifts) / sizeof(shifts[0]); ++s) {
            uint32_t from = 0xfffff000u + shifts[s]; /* near and across the wrap */
            CHECK_EQ_U(opal_btl_usnic_pair_isn(from, tos[t]), (uint32_t) (base + from));
        }
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
    return (x > y) - (x < y);
}

/* One sender toward receivers whose ISNs a weak random source handed out
 * one after another (0..4095, and 4096 from 0xfffff800, across the wrap):
 * every two streams start distinct and more than two of the largest
 * windows apart (cyclically), so a datagram of one pair replayed to
 * another receiver of the same sender lands outside its window */
static void test_pair_isn_receivers_start_apart(void)
{
    enum { N = 4096 };
    static const uint32_t firsts[] = {0, 0xfffff800u};
    static const uint32_t senders[] = {0, 0x12345678u, 0xffffffffu};
    uint32_t *isn = (uint32_t *) malloc(N * sizeof(*isn));
    REQUIRE(NULL != isn);
    for (size_t f = 0; f < sizeof(firsts) / sizeof(firsts[0]); ++f) {
        for (size_t s = 0; s < sizeof(senders) / sizeof(senders[0]); ++s) {
            for (uint32_t i = 0; i < N; ++i) {
                isn[i] = opal_btl_usnic_pair_isn(senders[s], firsts[f] + i);
            }
            qsort(isn, N, sizeof(*isn), cmp_u32);
            uint32_t min_gap = UINT32_MAX;
            for (uint32_t i = 0; i < N; ++i) {
                uint32_t gap = isn[(i + 1) % N] - isn[i]; /* the last to the first: across 2^32 */
                min_gap = (gap < min_gap) ? gap : min_gap;
            }
            if (!CHECK_CMP_U(min_gap, >, 2 * OPAL_BTL_USNIC_WINDOW_LIMIT)) {
                fprintf(stderr, "  receivers from 0x%08x, sender 0x%08x\n", (unsigned) firsts[f],
                        (unsigned) senders[s]);
            }
        }
    }
    free(isn);
}

/* The scramble of the receiver's ISN is a bijection: distinct receivers,
 * distinct starts, whatever their ISNs (random ones checked) */
static void test_pair_isn_distinct_receivers(void)
{
    enum { N = 1 << 16 };
    uint32_t *isn = (uint32_t *) malloc(N * sizeof(*isn));
    uint32_t *tos = (uint32_t *) malloc(N * sizeof(*tos));
    REQUIRE(NULL != isn && NULL != tos);
    uint64_t x = 0x9e3779b97f4a7c15ull; /* splitmix64: reproducible */
    for (uint32_t i = 0; i < N; ++i) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        tos[i] = (uint32_t) (z ^ (z >> 31));
    }
    qsort(tos, N, sizeof(*tos), cmp_u32);
    uint32_t n = 0;
    for (uint32_t i = 0; i < N; ++i) {
        if (0 == i || tos[i] != tos[i - 1]) {
            isn[n++] = opal_btl_usnic_pair_isn(0xabcdef01u, tos[i]);
        }
    }
    qsort(isn, n, sizeof(*isn), cmp_u32);
    uint32_t dups = 0;
    for (uint32_t i = 1; i < n; ++i) {
        dups += (isn[i] == isn[i - 1]);
    }
    CHECK_EQ_U(dups, 0);
    CHECK_GT(n, N - 16);
    free(isn);
    free(tos);
}

/* What endpoint_create does on both ends of a pair: each end's first
 * sequence number toward the other is what the other expects first, and
 * the two directions of a pair start apart */
static void test_pair_isn_both_ends_agree(void)
{
    static const uint32_t pairs[][2] = {
        {0x11111111u, 0x22222222u}, {0, 0xffffffffu}, {0xfffffffeu, 0xffffffffu}, {0x7fffffffu, 0x80000000u}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); ++i) {
        uint32_t a = pairs[i][0], b = pairs[i][1];
        fx_t fa, fb;
        fx_init(&fa, NULL);
        fx_init(&fb, NULL);
        /* ep_a: A's endpoint for B (local_isn ours, peer_isn theirs), and back */
        opal_btl_usnic_endpoint_t *ep_a = fx_ep_new(&fa, 2, 16, opal_btl_usnic_pair_isn(a, b),
                                                    opal_btl_usnic_pair_isn(b, a));
        opal_btl_usnic_endpoint_t *ep_b = fx_ep_new(&fb, 1, 16, opal_btl_usnic_pair_isn(b, a),
                                                    opal_btl_usnic_pair_isn(a, b));
        REQUIRE(NULL != ep_a && NULL != ep_b);
        CHECK_EQ_U(ep_a->tx.next_seq, ep_b->rx.next_expected);
        CHECK_EQ_U(ep_b->tx.next_seq, ep_a->rx.next_expected);
        CHECK_NE(ep_a->tx.next_seq, ep_b->tx.next_seq);
        fx_ep_free(&fa, ep_a);
        fx_ep_free(&fb, ep_b);
        fx_fini(&fa);
        fx_fini(&fb);
    }
}

UNIT_MAIN(UNIT_TEST(test_pair_isn_pinned_values), UNIT_TEST(test_pair_isn_offset_by_sender),
          UNIT_TEST(test_pair_isn_receivers_start_apart), UNIT_TEST(test_pair_isn_distinct_receivers),
          UNIT_TEST(test_pair_isn_both_ends_agree))
