/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * This process's share of a core (btl_usnic_share.c): the verdict of
 * each interval from wall time, CPU time and involuntary context
 * switches; the interval's length; clocks that do not move.
 */
#include "opal_config.h"

#include "btl_usnic_share.h"
#include "unit.h"

#define IV OPAL_BTL_USNIC_SHARE_INTERVAL_USEC
#define PRE OPAL_BTL_USNIC_SHARE_PREEMPTIONS

/* A whole core: not shared; 40 % of one, taken by the kernel (5 polling
 * ranks on 2 cores): shared; the bounds of both */
static void test_share_verdicts(void)
{
    opal_btl_usnic_share_t s;
    opal_btl_usnic_share_init(&s, 1000, 500, 7);
    CHECK(!s.shared);
    CHECK(!opal_btl_usnic_share_due(&s, 1000 + IV - 1));
    CHECK(opal_btl_usnic_share_due(&s, 1000 + IV));
    CHECK(!opal_btl_usnic_share_sample(&s, 1000 + IV, 500 + IV, 7 + 2 * PRE)); /* all of it */
    CHECK(!s.shared);
    CHECK(!opal_btl_usnic_share_due(&s, 1000 + IV + IV / 2)); /* the next interval began */
    uint64_t t = 1000 + IV, cpu = 500 + IV, pre = 7 + 2 * PRE;
    CHECK(opal_btl_usnic_share_sample(&s, t + IV, cpu + 4 * IV / 10, pre + 25)); /* 40 % */
    CHECK(s.shared);
    t += IV, cpu += 4 * IV / 10, pre += 25;
    /* 3/4 is still a whole core's share, a little less is not */
    CHECK(!opal_btl_usnic_share_sample(&s, t + IV, cpu + 3 * IV / 4, pre + PRE));
    t += IV, cpu += 3 * IV / 4, pre += PRE;
    CHECK(opal_btl_usnic_share_sample(&s, t + IV, cpu + 3 * IV / 4 - 1, pre + PRE));
    t += IV, cpu += 3 * IV / 4 - 1, pre += PRE;
    /* so little CPU, but fewer preemptions than the bound: the process gave
     * the core up itself (it blocked), nobody took it */
    CHECK(!opal_btl_usnic_share_sample(&s, t + IV, cpu + IV / 10, pre + PRE - 1));
}

/* An interval longer than two was not spent polling (away computing, or
 * in MPI_Init's fences): never judged, whatever its figures */
static void test_share_long_intervals(void)
{
    opal_btl_usnic_share_t s;
    opal_btl_usnic_share_init(&s, 0, 0, 0);
    CHECK(!opal_btl_usnic_share_sample(&s, 10 * IV, 10 * IV - 1000, 50)); /* computed */
    CHECK(!opal_btl_usnic_share_sample(&s, 20 * IV, 10 * IV, 50 + 10 * PRE)); /* crowded out, but long */
    CHECK(!opal_btl_usnic_share_sample(&s, 22 * IV + 1, 10 * IV, 50 + 20 * PRE)); /* just over two */
    CHECK(opal_btl_usnic_share_sample(&s, 24 * IV + 1, 10 * IV, 50 + 30 * PRE)); /* two: judged */
}

/* Clocks that do not move, or a kernel that will not say (0, 0): never a
 * division by zero, never "shared" for want of figures */
static void test_share_odd_clocks(void)
{
    opal_btl_usnic_share_t s;
    opal_btl_usnic_share_init(&s, 5000, 7000, 9);
    CHECK(!opal_btl_usnic_share_sample(&s, 5000, 7000, 9 + PRE)); /* no wall time */
    CHECK(!opal_btl_usnic_share_sample(&s, 5000 + IV, 0, 0));       /* unknown */
    CHECK_EQ_U(s.cpu_start, 0);
    CHECK(!opal_btl_usnic_share_sample(&s, 5000 + 2 * IV, IV, PRE)); /* a whole core again */
}

UNIT_MAIN(UNIT_TEST(test_share_verdicts), UNIT_TEST(test_share_long_intervals), UNIT_TEST(test_share_odd_clocks))
