/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The registration table a PUT target exposes (btl_usnic_reg.c): the
 * rules of opal_btl_usnic_reg_check (live region, key, peer, range;
 * tombstones of deregistered regions), slot reuse, and keys that cannot
 * be predicted.
 */
#include "fixture.h"
#include "unit.h"

static void test_reg_check_rules(void)
{
    opal_btl_usnic_reg_table_t t;
    opal_btl_usnic_reg_table_init(&t, 64);
    static uint8_t mem[4096];
    uint64_t base = (uint64_t) (uintptr_t) mem;
    opal_btl_usnic_reg_handle_t h, any;
    REQUIRE(opal_btl_usnic_reg_add(&t, mem, sizeof(mem), 3, &h));
    REQUIRE(opal_btl_usnic_reg_add(&t, mem, sizeof(mem), OPAL_BTL_USNIC_ANY_PEER, &any));
    CHECK_NE(h.key, any.key);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, base, 4096), OPAL_BTL_USNIC_PUT_WRITE);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, base + 4095, 1), OPAL_BTL_USNIC_PUT_WRITE);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 4, base, 1), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, any.region_id, any.key, 4, base, 1), OPAL_BTL_USNIC_PUT_WRITE);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key ^ 1, 3, base, 1), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, any.key, 3, base, 1), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, 60, h.key, 3, base, 1), OPAL_BTL_USNIC_PUT_REJECT); /* never used */
    CHECK_EQ(opal_btl_usnic_reg_check(&t, UINT32_MAX, h.key, 3, base, 1), OPAL_BTL_USNIC_PUT_REJECT);
    /* ranges */
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, base - 1, 2), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, base + 4095, 2), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, base + 4096, 0), OPAL_BTL_USNIC_PUT_WRITE);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, base + 4097, 0), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, base + 16, SIZE_MAX), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, UINT64_MAX, 2), OPAL_BTL_USNIC_PUT_REJECT);
    /* deregistered: a tombstone */
    opal_btl_usnic_reg_remove(&t, &h);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 3, base, 1), OPAL_BTL_USNIC_PUT_DEAD);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key ^ 1, 3, base, 1), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, h.region_id, h.key, 4, base, 1), OPAL_BTL_USNIC_PUT_REJECT);
    CHECK_EQ(t.nlive, 1);
    /* removing twice, or with a wrong key, changes nothing */
    opal_btl_usnic_reg_remove(&t, &h);
    opal_btl_usnic_reg_handle_t wrong = any;
    wrong.key ^= 1;
    opal_btl_usnic_reg_remove(&t, &wrong);
    CHECK_EQ(t.nlive, 1);
    CHECK_EQ(opal_btl_usnic_reg_check(&t, any.region_id, any.key, 9, base, 1), OPAL_BTL_USNIC_PUT_WRITE);
    opal_btl_usnic_reg_table_fini(&t);
}

/* Slots: never-used first, then tombstones oldest first; full of live
 * regions, registration fails (the PML then falls back to send/recv). */
static void test_reg_slot_reuse(void)
{
    opal_btl_usnic_reg_table_t t;
    opal_btl_usnic_reg_table_init(&t, 4);
    static uint8_t mem[64];
    opal_btl_usnic_reg_handle_t h[6];
    for (int i = 0; i < 4; ++i) {
        REQUIRE(opal_btl_usnic_reg_add(&t, mem, sizeof(mem), 1, &h[i]));
        CHECK_EQ(h[i].region_id, (uint32_t) i);
    }
    CHECK(!opal_btl_usnic_reg_add(&t, mem, sizeof(mem), 1, &h[4]));
    opal_btl_usnic_reg_remove(&t, &h[2]);
    opal_btl_usnic_reg_remove(&t, &h[0]);
    REQUIRE(opal_btl_usnic_reg_add(&t, mem, sizeof(mem), 1, &h[4]));
    CHECK_EQ(h[4].region_id, 2); /* the oldest tombstone */
    CHECK_NE(h[4].key, h[2].key);
    /* the old key of a reused slot no longer matches anything */
    CHECK_EQ(opal_btl_usnic_reg_check(&t, 2, h[2].key, 1, (uint64_t) (uintptr_t) mem, 1), OPAL_BTL_USNIC_PUT_REJECT);
    REQUIRE(opal_btl_usnic_reg_add(&t, mem, sizeof(mem), 1, &h[5]));
    CHECK_EQ(h[5].region_id, 0);
    CHECK(!opal_btl_usnic_reg_add(&t, mem, sizeof(mem), 1, &h[4]));
    opal_btl_usnic_reg_table_fini(&t);
}

/* Keys are not a counter: 1000 registrations give 1000 distinct keys with
 * both halves varying */
static void test_reg_keys_unpredictable(void)
{
    opal_btl_usnic_reg_table_t t;
    opal_btl_usnic_reg_table_init(&t, 2048);
    static uint8_t mem[8];
    uint64_t keys[1000], or_hi = 0, and_hi = UINT64_MAX;
    for (int i = 0; i < 1000; ++i) {
        opal_btl_usnic_reg_handle_t h;
        REQUIRE(opal_btl_usnic_reg_add(&t, mem, sizeof(mem), 1, &h));
        keys[i] = h.key;
        or_hi |= h.key;
        and_hi &= h.key;
        for (int j = 0; j < i; ++j) {
            if (!CHECK_NE(keys[j], keys[i])) {
                break;
            }
        }
    }
    CHECK_EQ_U(or_hi, UINT64_MAX); /* every bit seen set ... */
    CHECK_EQ_U(and_hi, 0);         /* ... and clear */
    opal_btl_usnic_reg_table_fini(&t);
}

UNIT_MAIN(UNIT_TEST(test_reg_check_rules), UNIT_TEST(test_reg_slot_reuse), UNIT_TEST(test_reg_keys_unpredictable))
