/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The connectivity checker's pure parts (btl_usnic_connectivity.[ch]):
 * the probe format and its tag (round trip, byte layout, every kind of
 * malformed, tampered or foreign datagram refused), echo matching, the
 * bounded check table, the table of published agents and its echo rate
 * limit, the probe size from both MTUs, the verdict, token buckets and
 * the cheap checks before a received datagram's tag (their order, and
 * that a genuine agent's rate always passes them).
 */
#include "opal_config.h"

#include <arpa/inet.h>

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "unit.h"

#define IP_A 0x0101a8c0u /* 192.168.1.1 in network order */
#define IP_B 0x0201a8c0u /* 192.168.1.2 */
#define IP_C 0x0301a8c0u /* 192.168.1.3 */
#define PORT_A 40001
#define PORT_B 40002
#define VPID_A 3u

static uint8_t key[OPAL_BTL_USNIC_KEY_BYTES];
static uint8_t buf[OPAL_BTL_USNIC_CPROBE_MAX + 16];

static void make_key(uint8_t k[OPAL_BTL_USNIC_KEY_BYTES], uint8_t seed)
{
    uint8_t job[OPAL_BTL_USNIC_KEY_BYTES];
    for (int i = 0; i < OPAL_BTL_USNIC_KEY_BYTES; ++i) {
        job[i] = (uint8_t) (seed + 11 * i);
    }
    opal_btl_usnic_derive_agent_key(job, k);
}

/* A probe of agent A (rank VPID_A, IP_A:PORT_A) to agent B */
static opal_btl_usnic_cprobe_t probe_a_to_b(uint64_t id, uint32_t size)
{
    opal_btl_usnic_cprobe_t p = {.type = OPAL_BTL_USNIC_CPROBE_PROBE,
                                 .check_id = id,
                                 .size = size,
                                 .attempt = 2,
                                 .from_vpid = VPID_A,
                                 .from_ipv4 = IP_A,
                                 .to_ipv4 = IP_B,
                                 .from_port = PORT_A,
                                 .to_port = PORT_B};
    return p;
}

static opal_btl_usnic_cprobe_status_t parse(size_t len, const uint8_t *k)
{
    opal_btl_usnic_cprobe_t q;
    return opal_btl_usnic_cprobe_parse(buf, len, k, &q);
}

static void test_cc_pack_parse_roundtrip(void)
{
    make_key(key, 1);
    const uint32_t sizes[] = {OPAL_BTL_USNIC_CPROBE_MIN, OPAL_BTL_USNIC_CPROBE_SMALL, 972, 1472, 8972,
                              OPAL_BTL_USNIC_CPROBE_MAX};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        opal_btl_usnic_cprobe_t p = probe_a_to_b(0x0123456789abcdefull + i, sizes[i]);
        size_t len = opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &p);
        CHECK_EQ_U(len, sizes[i]);
        opal_btl_usnic_cprobe_t q;
        memset(&q, 0, sizeof(q));
        REQUIRE_EQ(opal_btl_usnic_cprobe_parse(buf, len, key, &q), OPAL_BTL_USNIC_CPROBE_VALID);
        CHECK_EQ(q.type, OPAL_BTL_USNIC_CPROBE_PROBE);
        CHECK_EQ_U(q.check_id, 0x0123456789abcdefull + i);
        CHECK_EQ_U(q.size, sizes[i]);
        CHECK_EQ_U(q.attempt, 2);
        CHECK_EQ_U(q.from_vpid, VPID_A);
        CHECK_EQ_U(q.from_ipv4, IP_A);
        CHECK_EQ_U(q.to_ipv4, IP_B);
        CHECK_EQ_U(q.from_port, PORT_A);
        CHECK_EQ_U(q.to_port, PORT_B);
        /* the agent's echo: the same fields, type 2, a new tag */
        q.type = OPAL_BTL_USNIC_CPROBE_ECHO;
        REQUIRE_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &q), (int) len);
        opal_btl_usnic_cprobe_t e;
        REQUIRE_EQ(opal_btl_usnic_cprobe_parse(buf, len, key, &e), OPAL_BTL_USNIC_CPROBE_VALID);
        CHECK_EQ(e.type, OPAL_BTL_USNIC_CPROBE_ECHO);
        CHECK_EQ_U(e.check_id, q.check_id);
    }
}

static void test_cc_wire_layout(void)
{
    make_key(key, 1);
    opal_btl_usnic_cprobe_t p = probe_a_to_b(0x0102030405060708ull, 64);
    p.attempt = 9;
    REQUIRE_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &p), 64);
    const uint8_t want[40] = {'u', 'C', 'k', '2', 1, 0, 0, 0,        /* magic, type, reserved */
                              1, 2, 3, 4, 5, 6, 7, 8,                /* check id */
                              0, 0, 0, 64, 0, 0, 0, 9,               /* size, attempt */
                              0, 0, 0, 3,                            /* from rank */
                              192, 168, 1, 1, 192, 168, 1, 2,        /* from, to address */
                              0x9c, 0x41, 0x9c, 0x42};               /* from, to port */
    CHECK_MEM(buf, want, 40);
    CHECK_EQ(buf[40], (uint8_t) (40 * 7));
    CHECK_EQ(buf[47], (uint8_t) (47 * 7));
    uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES];
    opal_btl_usnic_agent_tag(key, buf, 48, tag); /* the tag covers everything before it */
    CHECK_MEM(buf + 48, tag, OPAL_BTL_USNIC_TAG_BYTES);
}

static void test_cc_malformed(void)
{
    make_key(key, 1);
    opal_btl_usnic_cprobe_t p = probe_a_to_b(77, 1472);
    REQUIRE_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &p), 1472);
    CHECK_EQ(parse(1472, key), OPAL_BTL_USNIC_CPROBE_VALID);
    CHECK_EQ(parse(1000, key), OPAL_BTL_USNIC_CPROBE_MALFORMED); /* truncated */
    CHECK_EQ(parse(OPAL_BTL_USNIC_CPROBE_MIN - 1, key), OPAL_BTL_USNIC_CPROBE_MALFORMED);
    CHECK_EQ(parse(10, key), OPAL_BTL_USNIC_CPROBE_MALFORMED);
    CHECK(!opal_btl_usnic_cprobe_well_formed(buf, 1473));     /* longer than its size field */
    buf[4] = 9;
    CHECK_EQ(parse(1472, key), OPAL_BTL_USNIC_CPROBE_MALFORMED); /* unknown type */
    buf[4] = OPAL_BTL_USNIC_CPROBE_PROBE;
    buf[6] = 1;
    CHECK_EQ(parse(1472, key), OPAL_BTL_USNIC_CPROBE_MALFORMED); /* reserved */
    buf[6] = 0;
    buf[3] = '1';
    CHECK_EQ(parse(1472, key), OPAL_BTL_USNIC_CPROBE_MALFORMED); /* version 1's magic "uCk1" */
    buf[3] = '2';
    CHECK_EQ(parse(1472, key), OPAL_BTL_USNIC_CPROBE_VALID);
    /* pack refuses what does not fit or is out of range */
    p.size = 1501;
    CHECK_EQ((int) opal_btl_usnic_cprobe_pack(buf, 1500, key, &p), 0);
    p.size = OPAL_BTL_USNIC_CPROBE_MIN - 1;
    CHECK_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &p), 0);
    p.size = OPAL_BTL_USNIC_CPROBE_MAX + 1;
    CHECK_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &p), 0);
}

/* A flipped bit in any byte after the magic, a probe made an echo by its
 * type byte (what forged an echo in version 1), a tampered tag, a
 * datagram resized with a matching size field: all unauthentic */
static void test_cc_tampered(void)
{
    make_key(key, 1);
    opal_btl_usnic_cprobe_t p = probe_a_to_b(77, 300);
    REQUIRE_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &p), 300);
    for (size_t i = 8; i < 300; ++i) {
        if (i >= 16 && i < 20) {
            continue; /* the size field: malformed, below */
        }
        buf[i] ^= 0x20;
        CHECK_EQ(parse(300, key), OPAL_BTL_USNIC_CPROBE_UNAUTHENTIC);
        buf[i] ^= 0x20;
    }
    buf[19] ^= 1;
    CHECK_EQ(parse(300, key), OPAL_BTL_USNIC_CPROBE_MALFORMED);
    buf[19] ^= 1;
    buf[4] = OPAL_BTL_USNIC_CPROBE_ECHO;
    CHECK_EQ(parse(300, key), OPAL_BTL_USNIC_CPROBE_UNAUTHENTIC);
    buf[4] = OPAL_BTL_USNIC_CPROBE_PROBE;
    /* one byte more, size field and all: the tag is not where it was */
    buf[300] = 0;
    buf[19] = (uint8_t) 301 & 0xff;
    buf[18] = (uint8_t) (301 >> 8);
    CHECK_EQ(parse(301, key), OPAL_BTL_USNIC_CPROBE_UNAUTHENTIC);
    REQUIRE_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &p), 300);
    CHECK_EQ(parse(300, key), OPAL_BTL_USNIC_CPROBE_VALID);
}

/* Another job's key, a random tag, all-zero tag: nothing passes */
static void test_cc_wrong_key(void)
{
    uint8_t other[OPAL_BTL_USNIC_KEY_BYTES];
    make_key(key, 1);
    make_key(other, 2);
    opal_btl_usnic_cprobe_t p = probe_a_to_b(5, 64);
    REQUIRE_EQ((int) opal_btl_usnic_cprobe_pack(buf, sizeof(buf), other, &p), 64);
    CHECK_EQ(parse(64, other), OPAL_BTL_USNIC_CPROBE_VALID);
    CHECK_EQ(parse(64, key), OPAL_BTL_USNIC_CPROBE_UNAUTHENTIC);
    REQUIRE(0 == opal_btl_usnic_random(buf + 48, OPAL_BTL_USNIC_TAG_BYTES));
    CHECK_EQ(parse(64, key), OPAL_BTL_USNIC_CPROBE_UNAUTHENTIC);
    memset(buf + 48, 0, OPAL_BTL_USNIC_TAG_BYTES);
    CHECK_EQ(parse(64, key), OPAL_BTL_USNIC_CPROBE_UNAUTHENTIC);
}

/* A live check of agent A probing B, as the agent sets it up */
static opal_btl_usnic_ccheck_t *live_check(opal_btl_usnic_ctable_t *t, uint64_t now)
{
    opal_btl_usnic_ccheck_t *ck = opal_btl_usnic_ctable_add(t, now);
    if (NULL != ck) {
        ck->local_ipv4 = IP_A;
        ck->local_port = PORT_A;
        ck->peer_ipv4 = IP_B;
        ck->peer_port = PORT_B;
        ck->large = 1472;
    }
    return ck;
}

static void test_cc_echo_match(void)
{
    opal_btl_usnic_ctable_t t;
    REQUIRE(opal_btl_usnic_ctable_init(&t));
    opal_btl_usnic_ccheck_t *ck = live_check(&t, 1000), *got = NULL;
    REQUIRE(NULL != ck);
    opal_btl_usnic_cprobe_t e = probe_a_to_b(ck->id, 64);
    e.type = OPAL_BTL_USNIC_CPROBE_ECHO;
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_B, PORT_B, &got), OPAL_BTL_USNIC_CECHO_OK);
    CHECK(got == ck);
    e.size = 1472;
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_B, PORT_B, &got), OPAL_BTL_USNIC_CECHO_OK);
    /* a check id that is not ours (guessed, or version 1's sequential ids) */
    for (uint64_t id = 0; id < 1000; ++id) {
        e.check_id = (id == ck->id) ? id + 1000 : id;
        CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_B, PORT_B, &got), OPAL_BTL_USNIC_CECHO_STALE);
    }
    e.check_id = ck->id ^ 1;
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_B, PORT_B, &got), OPAL_BTL_USNIC_CECHO_STALE);
    e.check_id = ck->id;
    /* not from the address probed */
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_C, PORT_B, &got),
             OPAL_BTL_USNIC_CECHO_WRONG_SOURCE);
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_B, PORT_B + 1, &got),
             OPAL_BTL_USNIC_CECHO_WRONG_SOURCE);
    /* an echo of another agent's probe (another rank, address, target) */
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A + 1, IP_B, PORT_B, &got),
             OPAL_BTL_USNIC_CECHO_WRONG_SOURCE);
    e.to_ipv4 = IP_C;
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_B, PORT_B, &got),
             OPAL_BTL_USNIC_CECHO_WRONG_SOURCE);
    e.to_ipv4 = IP_B;
    e.size = 1000; /* a size this check never sent */
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_B, PORT_B, &got),
             OPAL_BTL_USNIC_CECHO_WRONG_SOURCE);
    e.size = 64;
    /* decided: no echo counts any more */
    opal_btl_usnic_ccheck_finish(ck, OPAL_BTL_USNIC_CV_ALL_FAILED, 2000);
    CHECK_EQ(opal_btl_usnic_ctable_match_echo(&t, &e, VPID_A, IP_B, PORT_B, &got), OPAL_BTL_USNIC_CECHO_STALE);
    opal_btl_usnic_ctable_fini(&t);
}

/* At most OPAL_BTL_USNIC_CTABLE_SIZE checks; a finished one gives its
 * slot up after the grace, a live one never */
static void test_cc_table_bound(void)
{
    opal_btl_usnic_ctable_t t;
    REQUIRE(opal_btl_usnic_ctable_init(&t));
    static opal_btl_usnic_ccheck_t *all[OPAL_BTL_USNIC_CTABLE_SIZE];
    uint64_t now = 5000000;
    for (int i = 0; i < OPAL_BTL_USNIC_CTABLE_SIZE; ++i) {
        all[i] = opal_btl_usnic_ctable_add(&t, now);
        REQUIRE(NULL != all[i]);
        CHECK(0 != all[i]->id);
        CHECK_EQ(all[i]->verdict, OPAL_BTL_USNIC_CV_PENDING);
        all[i]->peer_ipv4 = (uint32_t) i;
    }
    CHECK_EQ(t.used, OPAL_BTL_USNIC_CTABLE_SIZE);
    for (int i = 1; i < OPAL_BTL_USNIC_CTABLE_SIZE; ++i) {
        CHECK(all[i]->id != all[i - 1]->id); /* random, unique */
        CHECK(opal_btl_usnic_ctable_find_live(&t, all[i]->id) == all[i]);
    }
    CHECK(NULL == opal_btl_usnic_ctable_add(&t, now));                 /* full of live checks */
    CHECK(NULL == opal_btl_usnic_ctable_add(&t, now + 3600000000ull)); /* live checks never expire */
    /* one finished, with a client still to answer: kept */
    opal_btl_usnic_ccheck_finish(all[7], OPAL_BTL_USNIC_CV_OK, now);
    REQUIRE(opal_btl_usnic_ccheck_add_waiter(all[7], 3, 33));
    CHECK(NULL == opal_btl_usnic_ctable_add(&t, now + OPAL_BTL_USNIC_CHECK_GRACE_USEC));
    all[7]->nwaiters = 0; /* answered */
    CHECK(NULL == opal_btl_usnic_ctable_add(&t, now + OPAL_BTL_USNIC_CHECK_GRACE_USEC - 1));
    CHECK(all[7] == opal_btl_usnic_ctable_find_pair(&t, 0, 7, 0)); /* its verdict is still shared */
    uint64_t old = all[7]->id;
    opal_btl_usnic_ccheck_t *ck = opal_btl_usnic_ctable_add(&t, now + OPAL_BTL_USNIC_CHECK_GRACE_USEC);
    CHECK(ck == all[7]);
    CHECK(NULL != ck && ck->id != old && OPAL_BTL_USNIC_CV_PENDING == ck->verdict && 0 == ck->peer_ipv4);
    CHECK(NULL == opal_btl_usnic_ctable_find_live(&t, old));
    CHECK_EQ(t.used, OPAL_BTL_USNIC_CTABLE_SIZE);
    /* expire frees every finished check past its grace */
    for (int i = 0; i < 100; ++i) {
        opal_btl_usnic_ccheck_finish(all[i], OPAL_BTL_USNIC_CV_ALL_FAILED, now);
    }
    opal_btl_usnic_ctable_expire(&t, now + OPAL_BTL_USNIC_CHECK_GRACE_USEC - 1);
    CHECK_EQ(t.used, OPAL_BTL_USNIC_CTABLE_SIZE);
    opal_btl_usnic_ctable_expire(&t, now + OPAL_BTL_USNIC_CHECK_GRACE_USEC);
    CHECK_EQ(t.used, OPAL_BTL_USNIC_CTABLE_SIZE - 100);
    CHECK(NULL == opal_btl_usnic_ctable_find_pair(&t, 0, 50, 0));
    CHECK(NULL != opal_btl_usnic_ctable_find_pair(&t, 0, 500, 0));
    opal_btl_usnic_ctable_fini(&t);
}

static void test_cc_waiters(void)
{
    opal_btl_usnic_ctable_t t;
    REQUIRE(opal_btl_usnic_ctable_init(&t));
    opal_btl_usnic_ccheck_t *ck = live_check(&t, 1);
    REQUIRE(NULL != ck);
    for (int i = 0; i < OPAL_BTL_USNIC_CHECK_MAX_WAITERS; ++i) {
        CHECK(opal_btl_usnic_ccheck_add_waiter(ck, i % 5, (uint32_t) i));
    }
    CHECK(!opal_btl_usnic_ccheck_add_waiter(ck, 1, 9999)); /* bounded */
    int of_conn2 = 0;
    for (int i = 0; i < OPAL_BTL_USNIC_CHECK_MAX_WAITERS; ++i) {
        of_conn2 += (2 == i % 5);
    }
    opal_btl_usnic_ctable_forget_conn(&t, 2);
    CHECK_EQ(ck->nwaiters, OPAL_BTL_USNIC_CHECK_MAX_WAITERS - of_conn2);
    for (int j = 0; j < ck->nwaiters; ++j) {
        CHECK(2 != ck->waiters[j].conn);
    }
    opal_btl_usnic_ctable_fini(&t);
}

static void test_cc_published_agents(void)
{
    opal_btl_usnic_cpeers_t t = {0};
    CHECK(NULL == opal_btl_usnic_cpeers_find(&t, IP_A, PORT_A));
    opal_btl_usnic_cpeer_t *p = opal_btl_usnic_cpeers_add(&t, IP_A, PORT_A, 4, 1472);
    REQUIRE(NULL != p);
    CHECK_EQ_U(p->vpid, 4);
    CHECK(p == opal_btl_usnic_cpeers_add(&t, IP_A, PORT_A, 9, 9000)); /* the first publication stays */
    CHECK_EQ_U(p->mtu, 1472);
    CHECK(NULL == opal_btl_usnic_cpeers_find(&t, IP_A, PORT_A + 1));
    CHECK(NULL == opal_btl_usnic_cpeers_find(&t, IP_B, PORT_A));
    CHECK(NULL == opal_btl_usnic_cpeers_add(&t, IP_B, 0, 1, 1472)); /* port 0: no agent */
    /* up to the bound, all found again after the table grew */
    for (uint32_t i = 1; i < OPAL_BTL_USNIC_CPEERS_MAX; ++i) {
        REQUIRE(NULL != opal_btl_usnic_cpeers_add(&t, htonl(0x0a000000u + i), (uint16_t) (1 + i % 7), i, 1500));
    }
    CHECK_EQ_U(t.n, OPAL_BTL_USNIC_CPEERS_MAX);
    CHECK(NULL == opal_btl_usnic_cpeers_add(&t, IP_C, PORT_B, 1, 1500));
    for (uint32_t i = 1; i < OPAL_BTL_USNIC_CPEERS_MAX; i += 97) {
        opal_btl_usnic_cpeer_t *q = opal_btl_usnic_cpeers_find(&t, htonl(0x0a000000u + i), (uint16_t) (1 + i % 7));
        CHECK(NULL != q && q->vpid == i);
    }
    CHECK(NULL != opal_btl_usnic_cpeers_find(&t, IP_A, PORT_A));
    opal_btl_usnic_cpeers_fini(&t);
}

static void test_cc_echo_rate_limit(void)
{
    opal_btl_usnic_cpeer_t p = {.ipv4 = IP_A, .port = PORT_A};
    const uint64_t window = 200000;
    uint64_t now = 1000;
    for (int i = 0; i < OPAL_BTL_USNIC_CECHO_BURST; ++i) {
        CHECK(opal_btl_usnic_cpeer_take_echo(&p, now + (uint64_t) i, OPAL_BTL_USNIC_CECHO_BURST, window));
    }
    CHECK(!opal_btl_usnic_cpeer_take_echo(&p, now + 100, OPAL_BTL_USNIC_CECHO_BURST, window));
    CHECK(!opal_btl_usnic_cpeer_take_echo(&p, now + window - 1, OPAL_BTL_USNIC_CECHO_BURST, window));
    CHECK(opal_btl_usnic_cpeer_take_echo(&p, now + window, OPAL_BTL_USNIC_CECHO_BURST, window));
    /* a flood gets exactly the burst per window */
    int taken = 0;
    for (uint64_t t = now + window; t < now + 11 * window; t += 50) {
        taken += opal_btl_usnic_cpeer_take_echo(&p, t, OPAL_BTL_USNIC_CECHO_BURST, window);
    }
    CHECK_EQ(taken, 10 * OPAL_BTL_USNIC_CECHO_BURST - 1);
}

static void test_cc_large_size(void)
{
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(1472, 1472, 0), 1472);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(1472, 8972, 0), 1472);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(8972, 972, 0), 972);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(65535, 65535, 0), OPAL_BTL_USNIC_CPROBE_MAX);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(10, 1472, 0), OPAL_BTL_USNIC_CPROBE_SMALL);
    /* capped at the path MTU search's base size */
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(8972, 8972, 1252), 1252);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(972, 8972, 1252), 972);
    CHECK_EQ_U(opal_btl_usnic_cprobe_large_size(8972, 8972, 10), OPAL_BTL_USNIC_CPROBE_SMALL);
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
    CHECK(!opal_btl_usnic_cverdict_usable(OPAL_BTL_USNIC_CV_REFUSED));
}

static void test_cc_bucket(void)
{
    opal_btl_usnic_cbucket_t b = {0};
    const uint64_t period = 1000;
    uint64_t now = 5000;
    for (int i = 0; i < 10; ++i) { /* full at first use */
        CHECK(opal_btl_usnic_cbucket_take(&b, now, 1, 10, period));
    }
    CHECK(!opal_btl_usnic_cbucket_take(&b, now, 1, 10, period));
    CHECK(!opal_btl_usnic_cbucket_take(&b, now + 99, 1, 10, period)); /* a unit takes period / capacity */
    CHECK(opal_btl_usnic_cbucket_take(&b, now + 100, 1, 10, period));
    CHECK(!opal_btl_usnic_cbucket_take(&b, now + 100, 1, 10, period));
    /* a refused take leaves the level: half a period later, 5 units */
    CHECK(!opal_btl_usnic_cbucket_take(&b, now + 600, 6, 10, period));
    CHECK(opal_btl_usnic_cbucket_take(&b, now + 600, 5, 10, period));
    CHECK(!opal_btl_usnic_cbucket_take(&b, now + 600, 1, 10, period));
    /* never above capacity, however long the gap (no overflow) */
    CHECK(!opal_btl_usnic_cbucket_take(&b, UINT64_MAX / 2, 11, 10, period));
    CHECK(opal_btl_usnic_cbucket_take(&b, UINT64_MAX / 2, 10, 10, period));
    CHECK(!opal_btl_usnic_cbucket_take(&b, UINT64_MAX / 2, 1, 10, period));
    /* a flood takes exactly the refill: capacity per period */
    opal_btl_usnic_cbucket_t f = {0};
    int taken = 0;
    for (uint64_t t = 0; t < 100 * period; t += 7) {
        taken += opal_btl_usnic_cbucket_take(&f, t, 1, 10, period);
    }
    CHECK_GE(taken, 10 + 99 * 10);
    CHECK_LE(taken, 10 + 100 * 10);
    /* bytes: a 32 MiB-per-second budget with 65000-byte costs */
    opal_btl_usnic_cbucket_t g = {0};
    taken = 0;
    for (int i = 0; i < 1000; ++i) {
        taken += opal_btl_usnic_cbucket_take(&g, 1, 65000, 32u << 20, 1000000);
    }
    CHECK_EQ(taken, (32 << 20) / 65000);
}

/* ----- the cheap checks: a fake modex of published agents ----- */

typedef struct {
    opal_btl_usnic_cpeers_t peers;
    int lookups;
    uint32_t claimed;
} gate_fake_t;

static opal_btl_usnic_cpeer_t *fake_find(void *ctx, uint32_t ipv4, uint16_t port, uint32_t claimed_vpid)
{
    gate_fake_t *f = (gate_fake_t *) ctx;
    ++f->lookups;
    f->claimed = claimed_vpid;
    return opal_btl_usnic_cpeers_find(&f->peers, ipv4, port);
}

static opal_btl_usnic_cbucket_t gate_budget;

static opal_btl_usnic_cgate_in_t gate_in(gate_fake_t *f, uint32_t src_ipv4, uint16_t src_port)
{
    opal_btl_usnic_cgate_in_t in = {.local_mtu = 9000,
                                    .src_ipv4 = src_ipv4,
                                    .src_port = src_port,
                                    .find_source = fake_find,
                                    .ctx = f,
                                    .source_burst = 8,
                                    .source_period_usec = 200000,
                                    .tag_budget = &gate_budget,
                                    .tag_budget_bytes = 20000,
                                    .tag_budget_period_usec = 1000000};
    return in;
}

/* A well-formed datagram of |size| bytes from agent A, in buf */
static size_t gate_dgram(uint32_t size)
{
    opal_btl_usnic_cprobe_t p = probe_a_to_b(42, size);
    return opal_btl_usnic_cprobe_pack(buf, sizeof(buf), key, &p);
}

static void test_cc_gate_order(void)
{
    make_key(key, 1);
    memset(&gate_budget, 0, sizeof(gate_budget));
    gate_fake_t f = {0};
    REQUIRE(NULL != opal_btl_usnic_cpeers_add(&f.peers, IP_A, PORT_A, VPID_A, 1500));
    opal_btl_usnic_cpeer_t *a = opal_btl_usnic_cpeers_find(&f.peers, IP_A, PORT_A), *src = NULL;
    opal_btl_usnic_cgate_in_t in = gate_in(&f, IP_A, PORT_A);
    uint64_t now = 1000;
    /* 1. malformed, and larger than our MTU: no lookup */
    size_t n = gate_dgram(1500);
    REQUIRE(1500 == n);
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n - 1, &in, now, &src), OPAL_BTL_USNIC_CGATE_MALFORMED);
    buf[0] ^= 1;
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &in, now, &src), OPAL_BTL_USNIC_CGATE_MALFORMED);
    buf[0] ^= 1;
    n = gate_dgram(9001);
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &in, now, &src), OPAL_BTL_USNIC_CGATE_TOO_LARGE);
    CHECK_EQ(f.lookups, 0);
    /* 2. a source nobody published: looked up with the claimed rank, refused */
    n = gate_dgram(1500);
    opal_btl_usnic_cgate_in_t stranger = gate_in(&f, IP_C, PORT_A);
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &stranger, now, &src), OPAL_BTL_USNIC_CGATE_UNPUBLISHED);
    CHECK_EQ(f.lookups, 1);
    CHECK_EQ_U(f.claimed, VPID_A);
    stranger.src_ipv4 = IP_A;
    stranger.src_port = PORT_A + 1; /* the right address, another port */
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &stranger, now, &src), OPAL_BTL_USNIC_CGATE_UNPUBLISHED);
    /* 3. larger than the source's MTU (within ours) */
    n = gate_dgram(1501);
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &in, now, &src), OPAL_BTL_USNIC_CGATE_TOO_LARGE);
    /* none of these took from a bucket */
    CHECK(!a->inbound.primed);
    CHECK(!gate_budget.primed);
    /* 4. the source's bucket: 8 pass (13 * 1500 bytes of budget left) */
    n = gate_dgram(1500);
    for (int i = 0; i < 8; ++i) {
        src = NULL;
        CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &in, now, &src), OPAL_BTL_USNIC_CGATE_TAG);
        CHECK(src == a);
    }
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &in, now, &src), OPAL_BTL_USNIC_CGATE_SOURCE_RATE);
    uint64_t budget_left = gate_budget.level;
    CHECK_EQ_U(budget_left, (20000ull - 8ull * 1500ull) * 1000000ull); /* the refused one took no budget */
    /* 5. the agent's budget, spent by another source whose bucket is full */
    REQUIRE(NULL != opal_btl_usnic_cpeers_add(&f.peers, IP_B, PORT_B, 7, 1500));
    opal_btl_usnic_cgate_in_t b_in = gate_in(&f, IP_B, PORT_B);
    for (int i = 0; i < 5; ++i) {
        CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &b_in, now, &src), OPAL_BTL_USNIC_CGATE_TAG);
    }
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &b_in, now, &src), OPAL_BTL_USNIC_CGATE_TAG_BUDGET);
    /* a small probe still fits what is left */
    n = gate_dgram(OPAL_BTL_USNIC_CPROBE_SMALL);
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &b_in, now, &src), OPAL_BTL_USNIC_CGATE_TAG);
    /* a period later both refilled */
    now += 1000000;
    n = gate_dgram(1500);
    CHECK_EQ(opal_btl_usnic_cprobe_gate(buf, n, &in, now, &src), OPAL_BTL_USNIC_CGATE_TAG);
    /* the header is all it reads (the agent peeks at that alone; ASan
     * sees an overread of this buffer) */
    uint8_t *hdr = (uint8_t *) malloc(OPAL_BTL_USNIC_CPROBE_HDR_LEN);
    REQUIRE(NULL != hdr);
    memcpy(hdr, buf, OPAL_BTL_USNIC_CPROBE_HDR_LEN);
    CHECK_EQ(opal_btl_usnic_cprobe_gate(hdr, n, &in, now, &src), OPAL_BTL_USNIC_CGATE_TAG);
    free(hdr);
    opal_btl_usnic_cpeers_fini(&f.peers);
}

/* A genuine agent's datagrams (2 probes and 2 echoes per our socket per
 * connectivity_timeout, with a round arriving late into the next window)
 * always pass the source's bucket sized as the agent sizes it (8 per
 * socket per timeout); a flood from the same source gets that much. */
static void test_cc_gate_genuine_rate(void)
{
    make_key(key, 1);
    gate_fake_t f = {0};
    REQUIRE(NULL != opal_btl_usnic_cpeers_add(&f.peers, IP_A, PORT_A, VPID_A, 9000));
    const int nsocks = 2;
    const uint64_t timeout = 200000;
    opal_btl_usnic_cgate_in_t in = gate_in(&f, IP_A, PORT_A);
    in.source_burst = 2u * 4u * (uint32_t) nsocks;
    in.source_period_usec = timeout;
    in.tag_budget_bytes = UINT32_MAX; /* not under test here */
    size_t n = gate_dgram(OPAL_BTL_USNIC_CPROBE_SMALL);
    opal_btl_usnic_cpeer_t *src;
    int refused = 0;
    uint64_t now = 1;
    for (int round = 0; round < 50; ++round) {
        /* 4 * nsocks datagrams at once; every third round, the next one
         * right behind it (a late round) */
        int burst = (0 == round % 3) ? 2 * 4 * nsocks : 4 * nsocks;
        for (int i = 0; i < burst; ++i) {
            refused += OPAL_BTL_USNIC_CGATE_TAG != opal_btl_usnic_cprobe_gate(buf, n, &in, now, &src);
        }
        now += (0 == round % 3) ? 2 * timeout : timeout;
    }
    CHECK_EQ(refused, 0);
    /* control: a flood of 10 per microsecond for 10 timeouts gets the burst per timeout */
    int passed = 0;
    for (uint64_t t = now; t < now + 10 * timeout; t += 1) {
        for (int i = 0; i < 10; ++i) {
            passed += OPAL_BTL_USNIC_CGATE_TAG == opal_btl_usnic_cprobe_gate(buf, n, &in, t, &src);
        }
    }
    CHECK_LE(passed, 11 * 2 * 4 * nsocks);
    CHECK_GE(passed, 10 * 2 * 4 * nsocks);
    opal_btl_usnic_cpeers_fini(&f.peers);
}

UNIT_MAIN(UNIT_TEST(test_cc_pack_parse_roundtrip), UNIT_TEST(test_cc_wire_layout), UNIT_TEST(test_cc_malformed),
          UNIT_TEST(test_cc_tampered), UNIT_TEST(test_cc_wrong_key), UNIT_TEST(test_cc_echo_match),
          UNIT_TEST(test_cc_table_bound), UNIT_TEST(test_cc_waiters), UNIT_TEST(test_cc_published_agents),
          UNIT_TEST(test_cc_echo_rate_limit), UNIT_TEST(test_cc_large_size), UNIT_TEST(test_cc_verdict),
          UNIT_TEST(test_cc_bucket), UNIT_TEST(test_cc_gate_order), UNIT_TEST(test_cc_gate_genuine_rate))
