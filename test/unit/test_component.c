/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The component's pure decisions (btl_usnic_component.c), no network:
 * which wire serves a provider's devices, opal_btl_usnic_wire_choose
 * (btl_usnic_wire.h), as devices_of asks it for every provider of
 * btl_usnic_provider_include.  Discovery itself, module creation and
 * progress need a live Open MPI: test/params and test/mpi.
 */
#include "opal_config.h"

#include "btl_usnic.h"
#include "unit.h"

#define AUTO OPAL_BTL_USNIC_WIRE_AUTO
#define OFI OPAL_BTL_USNIC_WIRE_OFI
#define SOCK OPAL_BTL_USNIC_WIRE_SOCKET

typedef struct {
    int param;            /* btl_usnic_wire */
    const char *provider; /* a name of btl_usnic_provider_include */
    int wire;             /* expected: SOCK, OFI, or AUTO (socket if a socket can be had, else ofi) */
} choose_row_t;

static const choose_row_t choose_rows[] = {
    /* auto: udp's devices to the socket wire where a socket can be had ... */
    {AUTO, "udp", AUTO},
    /* ... every other provider's to the ofi wire (usnic hardware) */
    {AUTO, "usnic", OFI},
    {AUTO, "tcp", OFI},
    {AUTO, "verbs", OFI},
    {AUTO, "udp;ofi_rxd", OFI}, /* a utility provider over udp: libfabric's, not kernel sockets */
    {AUTO, "UDP", OFI},         /* names are exact, as libfabric's */
    {AUTO, "udpx", OFI},
    {AUTO, "", OFI},
    /* socket and ofi as asked, whatever the provider, without a fallback */
    {SOCK, "udp", SOCK},
    {SOCK, "usnic", SOCK},
    {OFI, "udp", OFI},
    {OFI, "usnic", OFI},
    /* values the parameter's enumerator refuses: the ofi wire, never a probe */
    {3, "udp", OFI},
    {-1, "udp", OFI},
};

static void test_wire_choose_table(void)
{
    for (size_t i = 0; i < sizeof(choose_rows) / sizeof(choose_rows[0]); ++i) {
        const choose_row_t *r = &choose_rows[i];
        if (!CHECK_EQ(opal_btl_usnic_wire_choose(r->param, r->provider), r->wire)) {
            fprintf(stderr, "  row %zu: btl_usnic_wire %d, provider \"%s\"\n", i, r->param, r->provider);
        }
    }
}

/* The default (btl_usnic_wire auto, btl_usnic_provider_include
 * "usnic,udp"): usnic hardware on the ofi wire, every other interface on
 * the socket wire where it can run */
static void test_wire_choose_default_providers(void)
{
    CHECK_EQ(opal_btl_usnic_wire_choose(AUTO, "usnic"), OFI);
    CHECK_EQ(opal_btl_usnic_wire_choose(AUTO, "udp"), AUTO);
}

/* FI_PROVIDER as libfabric reads it: a list keeps only those, "^list"
 * drops those, unset or empty keeps all */
static void test_fi_provider_hides(void)
{
    static const struct {
        const char *env, *prov;
        bool hides;
    } rows[] = {
        {NULL, "udp", false},       {"", "udp", false},        {"tcp", "udp", true},
        {"tcp", "usnic", true},     {"udp", "udp", false},     {"tcp,udp", "udp", false},
        {"udp,tcp", "udp", false},  {"tcp,udpx", "udp", true}, {"^udp", "udp", true},
        {"^tcp", "udp", false},     {"^tcp,udp", "udp", true}, {"ud", "udp", true},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); ++i) {
        if (!CHECK_EQ(opal_btl_usnic_fi_provider_hides(rows[i].env, rows[i].prov), rows[i].hides)) {
            fprintf(stderr, "  FI_PROVIDER=%s provider %s\n", rows[i].env ? rows[i].env : "(unset)", rows[i].prov);
        }
    }
}

UNIT_MAIN(UNIT_TEST(test_wire_choose_table), UNIT_TEST(test_wire_choose_default_providers), UNIT_TEST(test_fi_provider_hides))
