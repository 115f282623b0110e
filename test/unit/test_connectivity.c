/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The connectivity checker's pure parts (btl_usnic_connectivity.h): the
 * probe datagram format, the probe size from both MTUs, the verdict.
 */
#include "opal_config.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "unit.h"

#define COOKIE 0x12345678u

static void test_cc_pack_parse_roundtrip(void)
{
    static uint8_t buf[OPAL_BTL_USNIC_CPROBE_MAX];
    const uint32_t sizes[] = {OPAL_BTL_USNIC_CPROBE_HDR_LEN, OPAL_BTL_USNIC_CPROBE_SMALL, 972, 1472, 8972,
                              OPAL_BTL_USNIC_CPROBE_MAX};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        opal_btl_usnic_cprobe_t p = {.type = OPAL_BTL_USNIC_CPROBE_PROBE, .cookie = COOKIE, .check_id = 77 + (uint32_t) i,
                                     .size = sizes[i], .attempt = 3};
        size_t len = opal_btl_usnic_cprobe_pack(buf, sizeof(buf), &p);
        CHECK_EQ_U(len, sizes[i]);
        opal_btl_usnic_cprobe_t q;
        memset(&q, 0, sizeof(q));
        REQUIRE(opal_btl_usnic_cprobe_parse(buf, len, COOKIE, &q));
        CHECK_EQ(q.type, OPAL_BTL_USNIC_CPROBE_PROBE);
        CHECK_EQ_U(q.check_id, 77 + (uint32_t) i);
        CHECK_EQ_U(q.size, sizes[i]);
        CHECK_EQ_U(q.attempt, 3);
        /* the agent's echo: only the type byte changes */
        buf[4] = OPAL_BTL_USNIC_CPROBE_ECHO;
        REQUIRE(opal_btl_usnic_cprobe_parse(buf, len, COOKIE, &q));
        CHECK_EQ(q.type, OPAL_BTL_USNIC_CPROBE_ECHO);
    }
}

static void test_cc_wire_layout(void)
{
    uint8_t buf[64];
    opal_btl_usnic_cprobe_t p = {.type = OPAL_BTL_USNIC_CPROBE_PROBE, .cookie = 0x01020304u, .check_id = 0x0a0b0c0du,
                                 .size = 64, .attempt = 2};
    REQUIRE_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), &p), 64);
    const uint8_t want[24] = {'u', 'C', 'k', '1', 1, 0, 0, 0, 1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 64,
                              0, 0, 0, 2};
    CHECK_MEM(buf, want, 24);
    CHECK_EQ(buf[24], (uint8_t) (24 * 7));
    CHECK_EQ(buf[63], (uint8_t) (63 * 7));
}

static void test_cc_parse_rejects(void)
{
    uint8_t buf[1500];
    opal_btl_usnic_cprobe_t p = {.type = OPAL_BTL_USNIC_CPROBE_PROBE, .cookie = COOKIE, .check_id = 1, .size = 1472};
    opal_btl_usnic_cprobe_t q;
    REQUIRE_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), &p), 1472);
    CHECK(!opal_btl_usnic_cprobe_parse(buf, 1000, COOKIE, &q));        /* truncated */
    CHECK(!opal_btl_usnic_cprobe_parse(buf, 1472, COOKIE + 1, &q));    /* another job */
    CHECK(!opal_btl_usnic_cprobe_parse(buf, 10, COOKIE, &q));          /* shorter than a header */
    buf[4] = 9;
    CHECK(!opal_btl_usnic_cprobe_parse(buf, 1472, COOKIE, &q));        /* unknown type */
    buf[4] = OPAL_BTL_USNIC_CPROBE_PROBE;
    buf[0] ^= 0xff;
    CHECK(!opal_btl_usnic_cprobe_parse(buf, 1472, COOKIE, &q));        /* magic */
    buf[0] ^= 0xff;
    CHECK(opal_btl_usnic_cprobe_parse(buf, 1472, COOKIE, &q));
    /* pack refuses what does not fit or is out of range */
    p.size = 1501;
    CHECK_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), &p), 0);
    p.size = 10;
    CHECK_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), &p), 0);
}

static void test_cc_large_size(void)
{
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(1472, 1472), 1472);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(1472, 8972), 1472);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(8972, 972), 972);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(65535, 65535), OPAL_BTL_USNIC_CPROBE_MAX);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(10, 1472), OPAL_BTL_USNIC_CPROBE_SMALL);
}

static void test_cc_verdict(void)
{
    CHECK_EQ(opal_btl_usnic_cverdict(true, true, false), OPAL_BTL_USNIC_CV_OK);
    CHECK_EQ(opal_btl_usnic_cverdict(true, true, true), OPAL_BTL_USNIC_CV_OK);
    CHECK_EQ(opal_btl_usnic_cverdict(true, false, false), OPAL_BTL_USNIC_CV_PENDING);
    CHECK_EQ(opal_btl_usnic_cverdict(false, false, false), OPAL_BTL_USNIC_CV_PENDING);
    CHECK_EQ(opal_btl_usnic_cverdict(true, false, true), OPAL_BTL_USNIC_CV_LARGE_FAILED);
    CHECK_EQ(opal_btl_usnic_cverdict(false, true, true), OPAL_BTL_USNIC_CV_SMALL_FAILED);
    CHECK_EQ(opal_btl_usnic_cverdict(false, false, true), OPAL_BTL_USNIC_CV_ALL_FAILED);
    CHECK(opal_btl_usnic_cverdict_usable(OPAL_BTL_USNIC_CV_OK));
    CHECK(opal_btl_usnic_cverdict_usable(OPAL_BTL_USNIC_CV_UNCHECKED));
    CHECK(!opal_btl_usnic_cverdict_usable(OPAL_BTL_USNIC_CV_LARGE_FAILED));
    CHECK(!opal_btl_usnic_cverdict_usable(OPAL_BTL_USNIC_CV_ALL_FAILED));
    CHECK(!opal_btl_usnic_cverdict_usable(OPAL_BTL_USNIC_CV_SMALL_FAILED));
    CHECK(!opal_btl_usnic_cverdict_usable(OPAL_BTL_USNIC_CV_PENDING));
}

UNIT_MAIN(UNIT_TEST(test_cc_pack_parse_roundtrip), UNIT_TEST(test_cc_wire_layout), UNIT_TEST(test_cc_parse_rejects),
          UNIT_TEST(test_cc_large_size), UNIT_TEST(test_cc_verdict))
