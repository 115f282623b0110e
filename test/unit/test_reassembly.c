/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Reassembly of chunked fragments: the pure slot functions
 * (opal_btl_usnic_rx_frag_*, opal_btl_usnic_chunk_is_aligned) and whole
 * CHUNK segments through opal_btl_usnic_recv_segment(), in every order,
 * with holes, duplicates, busy slots, mismatched sizes, out-of-range,
 * misaligned and overlapping chunks.
 */
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define RC(x) OPAL_BTL_USNIC_RX_FRAG_##x

/* Chunk layout of a |size|-byte fragment cut at |chunk| bytes */
static unsigned nchunks(size_t size, size_t chunk)
{
    return (unsigned) ((size + chunk - 1) / chunk);
}

/* order[0..n) := a permutation: 0 forward, 1 reverse, 2+ shuffled with seed */
static void make_order(unsigned *order, unsigned n, int kind)
{
    for (unsigned i = 0; i < n; ++i) {
        order[i] = (1 == kind) ? n - 1 - i : i;
    }
    if (kind >= 2) {
        uint64_t rng = (uint64_t) kind * 1000 + n;
        for (unsigned i = n; i > 1; --i) {
            unsigned j = fx_rand(&rng) % i;
            unsigned t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
    }
}

static const char *order_name(int kind)
{
    return kind == 0 ? "forward" : kind == 1 ? "reverse" : "shuffled";
}

/* ---------------- pure slot functions ---------------- */

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
        unsigned n = nchunks(size, cs);
        uint8_t *src = (uint8_t *) malloc(size);
        unsigned *order = (unsigned *) malloc(n * sizeof(unsigned));
        fx_fill(src, size, (uint32_t) size);
        for (int kind = 0; kind < 5; ++kind) {
            make_order(order, n, kind);
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
                fprintf(stderr, "  size %zu, chunk %zu, %s order\n", size, cs, order_name(kind));
            }
            opal_btl_usnic_rx_frag_reset(&slot);
        }
        free(order);
        free(src);
    }
}

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
                unsigned n = nchunks(b.size, FX_MAX_CHUNK_PAYLOAD);
                unsigned order[64];
                make_order(order, n, kind);
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
                    fprintf(stderr, "  size %u, %s order (%d), isn 0x%x\n", b.size, order_name(kind), kind, isn);
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
    unsigned n = nchunks(b.size, FX_MAX_CHUNK_PAYLOAD); /* 8 */
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

UNIT_MAIN(UNIT_TEST(test_rx_frag_classify), UNIT_TEST(test_rx_frag_add_all_orders),
          UNIT_TEST(test_reassembly_segments_every_order), UNIT_TEST(test_reassembly_holes_and_duplicates),
          UNIT_TEST(test_reassembly_interleaved_fragments), UNIT_TEST(test_reassembly_busy_slot),
          UNIT_TEST(test_reassembly_rejects_bad_chunks), UNIT_TEST(test_chunk_is_aligned_table),
          UNIT_TEST(test_reassembly_rejects_misaligned_chunks), UNIT_TEST(test_reassembly_overlapping_chunk_rejected))
