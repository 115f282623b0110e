/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * NUMA preference (btl_usnic_hwloc.c): the pure part, NUMA distance ->
 * module latency (opal_btl_usnic_numa_latency in btl_usnic.h).  No hwloc
 * calls: the topology side is exercised by the MPI runs with
 * btl_usnic_verbose=5.
 */
#include "opal_config.h"

#include "btl_usnic.h"
#include "unit.h"

/* A device on a node of the binding keeps the configured latency. */
static void test_local_keeps_latency(void)
{
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 10, 10, 1), 2u);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 10, 10, 1000), 2u);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(7, 1, 1, 5), 7u);   /* same node, no matrix */
    CHECK_EQ_U(opal_btl_usnic_numa_latency(0, 10, 10, 3), 0u);
    /* a matrix saying "closer than local" is still local */
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 10, 5, 4), 2u);
}

/* SLIT values: one hop (20, 21) is one step; each further multiple of the
 * local distance, rounded to the nearest, is one more. */
static void test_steps_by_distance(void)
{
    static const struct {
        uint64_t dist;
        uint32_t steps;
    } cases[] = {{11, 1}, {12, 1}, {16, 1}, {20, 1}, {21, 1}, {24, 1}, {25, 2},
                 {30, 2}, {32, 2}, {34, 2}, {35, 3}, {40, 3}, {100, 9}, {255, 25}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        uint32_t got = opal_btl_usnic_numa_latency(2, 10, cases[i].dist, 3);
        if (!CHECK_EQ_U(got, 2u + 3u * cases[i].steps)) {
            fprintf(stderr, "  distance %llu\n", (unsigned long long) cases[i].dist);
        }
    }
    /* a farther device never gets a lower latency than a nearer one */
    uint32_t prev = opal_btl_usnic_numa_latency(2, 10, 10, 1);
    for (uint64_t d = 11; d < 1000; ++d) {
        uint32_t l = opal_btl_usnic_numa_latency(2, 10, d, 1);
        if (!CHECK_LE_U(prev, l) || !CHECK_LT(2, (int) l)) {
            fprintf(stderr, "  distance %llu\n", (unsigned long long) d);
            break;
        }
        prev = l;
    }
}

/* Another node whose distance hwloc does not know: one step. */
static void test_unknown_distance_is_one_step(void)
{
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 0, 0, 1), 3u);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 10, 0, 5), 7u);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 0, 20, 5), 7u);
}

/* penalty 0 (btl_usnic_numa_latency_penalty=0) turns the preference off */
static void test_penalty_zero_is_off(void)
{
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 10, 40, 0), 2u);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 0, 0, 0), 2u);
}

/* huge latencies, penalties and distances saturate instead of wrapping */
static void test_saturates(void)
{
    CHECK_EQ_U(opal_btl_usnic_numa_latency(UINT32_MAX, 10, 20, 1), UINT32_MAX);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(UINT32_MAX - 1, 10, 20, 1), UINT32_MAX);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(UINT32_MAX - 2, 10, 20, 1), UINT32_MAX - 1);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 10, 40, UINT32_MAX), UINT32_MAX);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 1, UINT64_MAX, 1), UINT32_MAX);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(2, 1, (uint64_t) UINT32_MAX + 1, 1), UINT32_MAX);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(UINT32_MAX, UINT64_MAX, UINT64_MAX, UINT32_MAX), UINT32_MAX);
    CHECK_EQ_U(opal_btl_usnic_numa_latency(5, UINT64_MAX - 1, UINT64_MAX, 7), 12u);
}

UNIT_MAIN(UNIT_TEST(test_local_keeps_latency), UNIT_TEST(test_steps_by_distance),
          UNIT_TEST(test_unknown_distance_is_one_step), UNIT_TEST(test_penalty_zero_is_off),
          UNIT_TEST(test_saturates))
