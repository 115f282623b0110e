/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Registered buffer slabs (btl_usnic_slab.c): one registration per slab,
 * descriptor lookup at the edges of a slab, registration failures, and
 * the engine's segment pools carrying the descriptor of the slab their
 * buffer lies in (what every post passes to an FI_MR_LOCAL provider).
 */
#include <errno.h>

#include "fixture.h"
#include "unit.h"

#include "btl_usnic_slab.h"

/* A registrar that records what it was asked; its descriptors are fake
 * tokens that name the registration */
#define FAKE_MAX_REGS 64
typedef struct fake_reg_t {
    int regs, unregs;
    int fail_next;         /* errno-style code for the next reg, 0 = succeed */
    struct {
        uint8_t *base;
        size_t len;
        bool live;
    } r[FAKE_MAX_REGS];
} fake_reg_t;

static int fake_reg(void *ctx, void *base, size_t len, void **handle_p, void **desc_p)
{
    fake_reg_t *f = (fake_reg_t *) ctx;
    if (0 != f->fail_next) {
        int rc = f->fail_next;
        f->fail_next = 0;
        return rc;
    }
    if (f->regs >= FAKE_MAX_REGS) {
        return -ENOSPC;
    }
    int i = f->regs++;
    f->r[i].base = (uint8_t *) base;
    f->r[i].len = len;
    f->r[i].live = true;
    *handle_p = &f->r[i];
    *desc_p = (void *) (uintptr_t) (0x1000 + i);
    return 0;
}

static void fake_unreg(void *ctx, void *handle)
{
    fake_reg_t *f = (fake_reg_t *) ctx;
    ((__typeof__(&f->r[0])) handle)->live = false;
    ++f->unregs;
}

/* The registration the fake registrar made for |desc| covers [p, p+len) */
static bool desc_covers(const fake_reg_t *f, void *desc, const void *p, size_t len)
{
    uintptr_t i = (uintptr_t) desc - 0x1000;
    if ((uintptr_t) desc < 0x1000 || i >= (uintptr_t) f->regs || !f->r[i].live) {
        return false;
    }
    const uint8_t *b = (const uint8_t *) p;
    return b >= f->r[i].base && b + len <= f->r[i].base + f->r[i].len;
}

static void test_slab_plain_memory_without_registrar(void)
{
    opal_btl_usnic_slab_set_t set;
    opal_btl_usnic_slab_set_init(&set, NULL, 0);
    CHECK_EQ_U(set.slab_bytes, OPAL_BTL_USNIC_SLAB_MIN_BYTES);
    uint8_t *prev = NULL;
    for (int i = 0; i < 400; ++i) {
        void *desc = (void *) 1;
        uint8_t *b = (uint8_t *) opal_btl_usnic_slab_alloc(&set, 1000, &desc);
        REQUIRE(NULL != b);
        CHECK_PTR_EQ(desc, NULL);
        CHECK_EQ_U((uintptr_t) b % 64, 0);
        CHECK_EQ(b[0] | b[999], 0);
        if (NULL != prev && b > prev) {
            CHECK_LE_U((uintptr_t) prev + 1024, (uintptr_t) b); /* no overlap */
        }
        memset(b, 0xab, 1000);
        prev = b;
    }
    CHECK_EQ(set.num_slabs, 2); /* 400 x 1024 bytes in 256 KiB slabs */
    CHECK_EQ_U(set.registrations, 0);
    opal_btl_usnic_slab_set_fini(&set);
    opal_btl_usnic_slab_set_fini(&set); /* twice is harmless */
}

static void test_slab_registers_once_per_slab(void)
{
    fake_reg_t f;
    memset(&f, 0, sizeof(f));
    opal_btl_usnic_mem_ops_t ops = {.reg = fake_reg, .unreg = fake_unreg, .ctx = &f};
    opal_btl_usnic_slab_set_t set;
    opal_btl_usnic_slab_set_init(&set, &ops, 64 * 1536);
    for (int i = 0; i < 1000; ++i) {
        void *desc = NULL;
        uint8_t *b = (uint8_t *) opal_btl_usnic_slab_alloc(&set, 1500, &desc);
        REQUIRE(NULL != b);
        CHECK(desc_covers(&f, desc, b, 1500));
        void *found = NULL;
        CHECK(opal_btl_usnic_slab_lookup(&set, b, 1500, &found));
        CHECK_PTR_EQ(found, desc);
    }
    /* 1000 buffers of 1536 bytes, 170 to a 256 KiB slab: 6 slabs, 6 registrations */
    CHECK_EQ(f.regs, 6);
    CHECK_EQ_U(set.registrations, 6);
    opal_btl_usnic_slab_set_fini(&set);
    CHECK_EQ(f.unregs, 6);
    for (int i = 0; i < f.regs; ++i) {
        CHECK(!f.r[i].live);
    }
}

static void test_slab_lookup_edges(void)
{
    fake_reg_t f;
    memset(&f, 0, sizeof(f));
    opal_btl_usnic_mem_ops_t ops = {.reg = fake_reg, .unreg = fake_unreg, .ctx = &f};
    opal_btl_usnic_slab_set_t set;
    opal_btl_usnic_slab_set_init(&set, &ops, 0);
    void *desc = NULL;
    uint8_t *b = (uint8_t *) opal_btl_usnic_slab_alloc(&set, 100, &desc);
    REQUIRE(NULL != b);
    const opal_btl_usnic_slab_t *s = &set.slabs[0];
    void *found = NULL;
    CHECK(opal_btl_usnic_slab_lookup(&set, s->base, s->len, &found)); /* all of it */
    CHECK_PTR_EQ(found, desc);
    CHECK(opal_btl_usnic_slab_lookup(&set, s->base + s->len - 1, 1, &found)); /* its last byte */
    CHECK(!opal_btl_usnic_slab_lookup(&set, s->base + s->len - 1, 2, &found)); /* one past */
    CHECK(!opal_btl_usnic_slab_lookup(&set, s->base - 1, 2, &found));          /* one before */
    CHECK(!opal_btl_usnic_slab_lookup(&set, s->base + s->len, 1, &found));     /* just after */
    uint8_t stack[16];
    CHECK(!opal_btl_usnic_slab_lookup(&set, stack, sizeof(stack), &found));    /* elsewhere */
    CHECK(!opal_btl_usnic_slab_lookup(&set, s->base, SIZE_MAX, &found));       /* no wrap-around */
    opal_btl_usnic_slab_set_fini(&set);
}

static void test_slab_big_request_gets_its_own_slab(void)
{
    fake_reg_t f;
    memset(&f, 0, sizeof(f));
    opal_btl_usnic_mem_ops_t ops = {.reg = fake_reg, .unreg = fake_unreg, .ctx = &f};
    opal_btl_usnic_slab_set_t set;
    opal_btl_usnic_slab_set_init(&set, &ops, 0);
    void *d1 = NULL, *d2 = NULL, *d3 = NULL;
    uint8_t *small1 = (uint8_t *) opal_btl_usnic_slab_alloc(&set, 64, &d1);
    uint8_t *big = (uint8_t *) opal_btl_usnic_slab_alloc(&set, 3 * OPAL_BTL_USNIC_SLAB_MIN_BYTES, &d2);
    uint8_t *small2 = (uint8_t *) opal_btl_usnic_slab_alloc(&set, 64, &d3);
    REQUIRE(NULL != small1 && NULL != big && NULL != small2);
    CHECK_EQ(f.regs, 2);          /* the small ones share the ordinary slab */
    CHECK_PTR_EQ(d1, d3);
    CHECK_PTR_NE(d1, d2);
    CHECK_PTR_EQ(small2, small1 + 64);
    CHECK(desc_covers(&f, d2, big, 3 * OPAL_BTL_USNIC_SLAB_MIN_BYTES));
    opal_btl_usnic_slab_set_fini(&set);
    CHECK_EQ(f.unregs, 2);
}

static void test_slab_registration_failure(void)
{
    fake_reg_t f;
    memset(&f, 0, sizeof(f));
    opal_btl_usnic_mem_ops_t ops = {.reg = fake_reg, .unreg = fake_unreg, .ctx = &f};
    opal_btl_usnic_slab_set_t set;
    opal_btl_usnic_slab_set_init(&set, &ops, 0);
    f.fail_next = -EPERM; /* memlock limit, say */
    void *desc = NULL;
    CHECK_PTR_EQ(opal_btl_usnic_slab_alloc(&set, 100, &desc), NULL);
    CHECK_EQ(set.last_error, -EPERM);
    CHECK_EQ(set.num_slabs, 0);
    CHECK(NULL != opal_btl_usnic_slab_alloc(&set, 100, &desc)); /* the next one may work */
    CHECK_EQ(set.num_slabs, 1);
    opal_btl_usnic_slab_set_fini(&set);
    CHECK_EQ(f.unregs, 1);
}

/* Every pool of the engine hands out buffers whose descriptor is the
 * registration that covers the whole datagram, prefix included */
static void test_engine_segments_carry_descriptors(void)
{
    fake_reg_t f;
    memset(&f, 0, sizeof(f));
    opal_btl_usnic_mem_ops_t ops = {.reg = fake_reg, .unreg = fake_unreg, .ctx = &f};
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.prefix = 64;
    p.mem = &ops;
    fx_t fx;
    fx_init(&fx, &p);
    size_t full = p.prefix + p.mtu;
    enum { N = 40 };
    opal_btl_usnic_send_seg_t *chunks[N], *acks[N];
    opal_btl_usnic_send_frag_t *smalls[N];
    for (int i = 0; i < N; ++i) {
        chunks[i] = opal_btl_usnic_chunk_seg_alloc(&fx.eng.pool);
        acks[i] = opal_btl_usnic_ack_seg_alloc(&fx.eng.pool);
        smalls[i] = opal_btl_usnic_small_frag_alloc(&fx.eng.pool, p.mtu);
        REQUIRE(NULL != chunks[i] && NULL != acks[i] && NULL != smalls[i]);
        CHECK(desc_covers(&f, chunks[i]->desc, chunks[i]->buf, full));
        CHECK(desc_covers(&f, acks[i]->desc, acks[i]->buf, p.prefix + sizeof(opal_btl_usnic_hdr_t)));
        CHECK(desc_covers(&f, smalls[i]->seg.desc, smalls[i]->seg.buf, full));
        CHECK_PTR_EQ((uint8_t *) chunks[i]->hdr, chunks[i]->buf + p.prefix);
    }
    /* a copy (fault injection, the away thread) lies in registered memory too */
    chunks[0]->wire_len = 200;
    memset(chunks[0]->hdr, 0x5a, 200);
    opal_btl_usnic_send_seg_t *copy = opal_btl_usnic_seg_copy(&fx.eng, chunks[0]);
    REQUIRE(NULL != copy);
    CHECK(desc_covers(&f, copy->desc, copy->buf, full));
    CHECK_MEM(copy->hdr, chunks[0]->hdr, 200);
    int regs_at_setup = f.regs;
    CHECK_LE(regs_at_setup, 16); /* a few slabs, not one per segment */
    CHECK_GT(regs_at_setup, 0);
    copy->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED;
    opal_btl_usnic_seg_release_if_done(&fx.eng.pool, copy);
    for (int i = 0; i < N; ++i) {
        chunks[i]->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED;
        opal_btl_usnic_seg_release_if_done(&fx.eng.pool, chunks[i]);
        acks[i]->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED;
        opal_btl_usnic_seg_release_if_done(&fx.eng.pool, acks[i]);
        opal_btl_usnic_frag_free(&fx.eng, smalls[i]);
    }
    fx_fini(&fx);
    CHECK_EQ(f.unregs, regs_at_setup); /* all released with the engine */
}

UNIT_MAIN(UNIT_TEST(test_slab_plain_memory_without_registrar), UNIT_TEST(test_slab_registers_once_per_slab),
          UNIT_TEST(test_slab_lookup_edges), UNIT_TEST(test_slab_big_request_gets_its_own_slab),
          UNIT_TEST(test_slab_registration_failure), UNIT_TEST(test_engine_segments_carry_descriptors))
