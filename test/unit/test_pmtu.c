/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The path MTU search of one peer (btl_usnic_pmtu.c), with time passed in:
 * start at the base, the limit first, losses, the common sizes and the
 * bisection, rest and re-probe, black holes and what does not prove one.
 */
#include "fixture.h"
#include "unit.h"

#include "btl_usnic_pmtu.h"

#define BASE 1252
#define LIMIT 8972
#define REPROBE 5000000 /* us */
#define TIMEOUT 5000

static opal_btl_usnic_pmtu_t started(uint64_t now)
{
    opal_btl_usnic_pmtu_t st;
    opal_btl_usnic_pmtu_init(&st, true, BASE, LIMIT, REPROBE);
    opal_btl_usnic_pmtu_start(&st, now);
    return st;
}

/* Send the due probe at |now|; returns its size (0: none due) */
static uint32_t probe(opal_btl_usnic_pmtu_t *st, uint64_t now)
{
    uint32_t size = opal_btl_usnic_pmtu_probe_due(st, now);
    if (0 != size) {
        opal_btl_usnic_pmtu_probe_sent(st, size, now, TIMEOUT);
    }
    return size;
}

/* Lose every probe of the size due now (MAX_PROBES of them); returns the
 * time after and that size */
static uint64_t lose_size(opal_btl_usnic_pmtu_t *st, uint64_t now, uint32_t *size_p)
{
    *size_p = opal_btl_usnic_pmtu_probe_due(st, now);
    for (int i = 0; i < OPAL_BTL_USNIC_PMTU_MAX_PROBES; ++i) {
        CHECK_EQ_U(probe(st, now), *size_p);
        now += TIMEOUT;
        CHECK(opal_btl_usnic_pmtu_probe_expire(st, now));
    }
    return now;
}

static void test_disabled_is_fixed_at_the_limit(void)
{
    opal_btl_usnic_pmtu_t st;
    opal_btl_usnic_pmtu_init(&st, false, BASE, LIMIT, REPROBE);
    CHECK_EQ_U(st.cur, LIMIT);
    CHECK(!opal_btl_usnic_pmtu_start(&st, 0));
    CHECK_EQ_U(opal_btl_usnic_pmtu_probe_due(&st, 0), 0);
    CHECK_EQ(opal_btl_usnic_pmtu_timeout(&st, LIMIT, 7, 0), OPAL_BTL_USNIC_PMTU_NOTHING);
    CHECK_EQ_U(opal_btl_usnic_pmtu_next_event(&st), OPAL_BTL_USNIC_PMTU_NEVER);
    /* a base at or above the limit: nothing to search either */
    opal_btl_usnic_pmtu_init(&st, true, 9000, LIMIT, REPROBE);
    CHECK_EQ_U(st.cur, LIMIT);
    CHECK_EQ_U(opal_btl_usnic_pmtu_next_event(&st), OPAL_BTL_USNIC_PMTU_NEVER);
}

/* Base until the peer first answers; then the limit is probed first, and
 * its echo ends the search there */
static void test_starts_at_base_and_confirms_the_limit(void)
{
    opal_btl_usnic_pmtu_t st;
    opal_btl_usnic_pmtu_init(&st, true, BASE, LIMIT, REPROBE);
    CHECK_EQ_U(st.cur, BASE);
    CHECK_EQ_U(opal_btl_usnic_pmtu_probe_due(&st, 100), 0); /* the peer may not know us yet */
    CHECK(opal_btl_usnic_pmtu_start(&st, 100));
    CHECK(!opal_btl_usnic_pmtu_start(&st, 100));
    CHECK_EQ_U(probe(&st, 100), LIMIT);
    CHECK_EQ_U(opal_btl_usnic_pmtu_probe_due(&st, 100), 0); /* one at a time */
    CHECK_EQ_U(opal_btl_usnic_pmtu_next_event(&st), 100 + TIMEOUT);
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, LIMIT, 0, 150), LIMIT);
    CHECK_EQ_U(st.cur, LIMIT);
    CHECK_EQ_U(st.probes_sent, 1);
    CHECK_EQ_U(st.probes_acked, 1);
    CHECK_EQ_U(opal_btl_usnic_pmtu_next_event(&st), OPAL_BTL_USNIC_PMTU_NEVER); /* at the limit: done */
}

/* Losses: three of the limit, then 1472 (common Ethernet) is tried and
 * echoed, then the range above is bisected down to the granularity; the
 * search then rests until the re-probe time, and starts again at the limit */
static void test_losses_common_sizes_and_bisection(void)
{
    opal_btl_usnic_pmtu_t st = started(0);
    uint32_t size;
    uint64_t now = lose_size(&st, 0, &size);
    CHECK_EQ_U(size, LIMIT);
    CHECK_EQ_U(st.cur, BASE); /* losses never lower what is confirmed */
    CHECK_EQ_U(probe(&st, now), 1472);
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, 1472, 0, now + 10), 1472);
    now += 10;
    /* the path passes up to 2000 bytes: bisect (1472, 8971] */
    uint32_t path = 2000;
    int steps = 0;
    while (0 != (size = opal_btl_usnic_pmtu_probe_due(&st, now)) && steps < 64) {
        ++steps;
        if (size <= path) {
            CHECK_EQ_U(probe(&st, now), size);
            opal_btl_usnic_pmtu_echo(&st, size, 0, now + 10);
            now += 10;
        } else {
            now = lose_size(&st, now, &size);
        }
    }
    CHECK_LT(steps, 20);
    CHECK_LE_U(st.cur, path);
    CHECK(st.cur + OPAL_BTL_USNIC_PMTU_GRANULARITY > path);
    CHECK_EQ_U(st.probes_lost % OPAL_BTL_USNIC_PMTU_MAX_PROBES, 0);
    /* resting: the next probe is the limit, after the re-probe interval */
    CHECK_EQ_U(opal_btl_usnic_pmtu_next_event(&st), now + REPROBE);
    CHECK_EQ_U(opal_btl_usnic_pmtu_probe_due(&st, now + REPROBE - 1), 0);
    CHECK_EQ_U(probe(&st, now + REPROBE), LIMIT);
    /* the path was repaired: the limit is echoed */
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, LIMIT, 0, now + REPROBE + 10), LIMIT);
}

/* One lost probe is not a verdict: the same size goes again */
static void test_single_loss_retries_the_size(void)
{
    opal_btl_usnic_pmtu_t st = started(0);
    CHECK_EQ_U(probe(&st, 0), LIMIT);
    CHECK(!opal_btl_usnic_pmtu_probe_expire(&st, TIMEOUT - 1));
    CHECK(opal_btl_usnic_pmtu_probe_expire(&st, TIMEOUT));
    CHECK_EQ_U(probe(&st, TIMEOUT), LIMIT);
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, LIMIT, 0, TIMEOUT + 5), LIMIT);
    CHECK_EQ_U(st.probes_lost, 1);
}

/* Echoes that are not ours to believe */
static void test_echo_bounds(void)
{
    opal_btl_usnic_pmtu_t st = started(0);
    CHECK_EQ_U(probe(&st, 0), LIMIT);
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, LIMIT + 1, 0, 1), 0); /* above the limit */
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, 0, 0, 1), 0);
    CHECK_EQ_U(st.cur, BASE);
    /* a late echo of a size between: it crosses, use it */
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, 4000, 0, 2), 4000);
    CHECK_EQ_U(st.cur, 4000);
}

/* Black hole: a large segment times out (a base probe is asked for),
 * the base probe is echoed, the second timeout falls back to the base and
 * the search starts again at once */
static void test_black_hole_falls_back(void)
{
    opal_btl_usnic_pmtu_t st = started(0);
    probe(&st, 0);
    opal_btl_usnic_pmtu_echo(&st, LIMIT, 0, 10);
    CHECK_EQ_U(st.cur, LIMIT);
    CHECK_EQ(opal_btl_usnic_pmtu_timeout(&st, BASE, 41, 100), OPAL_BTL_USNIC_PMTU_NOTHING); /* small: no sign */
    CHECK_EQ(opal_btl_usnic_pmtu_timeout(&st, LIMIT, 41, 100), OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE);
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, BASE, 41, 150), 0);
    CHECK_EQ(opal_btl_usnic_pmtu_timeout(&st, LIMIT, 41, 300), OPAL_BTL_USNIC_PMTU_FELL_BACK);
    CHECK_EQ_U(st.cur, BASE);
    CHECK_EQ_U(opal_btl_usnic_pmtu_probe_due(&st, 300), LIMIT); /* search again */
    /* the echo may also come after the second timeout */
    st = started(0);
    probe(&st, 0);
    opal_btl_usnic_pmtu_echo(&st, LIMIT, 0, 10);
    CHECK_EQ(opal_btl_usnic_pmtu_timeout(&st, LIMIT, 5, 100), OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE);
    CHECK_EQ(opal_btl_usnic_pmtu_timeout(&st, LIMIT, 5, 300), OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE);
    CHECK_EQ_U(opal_btl_usnic_pmtu_echo(&st, BASE, 5, 350), BASE);
}

/* What does not prove a black hole: a silent peer (no base echo), an ACK
 * that moved between the timeouts, a segment at the base size */
static void test_no_black_hole_without_proof(void)
{
    opal_btl_usnic_pmtu_t st = started(0);
    probe(&st, 0);
    opal_btl_usnic_pmtu_echo(&st, LIMIT, 0, 10);
    for (int i = 0; i < 5; ++i) {
        CHECK_EQ(opal_btl_usnic_pmtu_timeout(&st, LIMIT, 9, 100 * (i + 1)), OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE);
    }
    CHECK_EQ_U(st.cur, LIMIT); /* a dead or stalled peer: the peer timeout decides */
    /* the echo came, but the ACK had moved: it counts for the new suspicion only */
    st = started(0);
    probe(&st, 0);
    opal_btl_usnic_pmtu_echo(&st, LIMIT, 0, 10);
    opal_btl_usnic_pmtu_timeout(&st, LIMIT, 9, 100);
    opal_btl_usnic_pmtu_echo(&st, BASE, 9, 110);
    CHECK_EQ(opal_btl_usnic_pmtu_timeout(&st, LIMIT, 12, 300), OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE);
    CHECK_EQ_U(st.cur, LIMIT);
}

UNIT_MAIN(UNIT_TEST(test_disabled_is_fixed_at_the_limit), UNIT_TEST(test_starts_at_base_and_confirms_the_limit),
          UNIT_TEST(test_losses_common_sizes_and_bisection), UNIT_TEST(test_single_loss_retries_the_size),
          UNIT_TEST(test_echo_bounds), UNIT_TEST(test_black_hole_falls_back),
          UNIT_TEST(test_no_black_hole_without_proof))
