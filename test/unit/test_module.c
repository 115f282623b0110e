/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The pure parts of module setup and of the receive check both wires
 * share (btl_usnic_module.c, btl_usnic_module_int.h), no network:
 *
 *   opal_btl_usnic_wire_choose   which wire a module gets for
 *                                btl_usnic_wire auto/socket/ofi and the
 *                                provider (choose_transport's logic)
 *   opal_btl_usnic_source_ok     a datagram from an address other than the
 *                                one its claimed sender published is refused
 *                                and counted (drop_bad_source), on either
 *                                channel, in either wire's address form
 *
 * The module's resources (endpoints, queues, the engine's wire) need a
 * live Open MPI and libfabric: test/mpi and test/faults.
 */
#include "opal_config.h"

#include <arpa/inet.h>

#include "btl_usnic_module_int.h"
#include "unit.h"

/* ===================== the wire choice ===================== */

/* The socket probe of a test: its verdict, and how often it was asked */
static struct {
    bool usable;
    int calls;
    uint32_t ipv4;
} probe;

static bool fake_sock_usable(uint32_t ipv4, char *why, size_t len)
{
    ++probe.calls;
    probe.ipv4 = ipv4;
    if (!probe.usable) {
        snprintf(why, len, "a UDP socket on the interface's address: Cannot assign requested address");
    }
    return probe.usable;
}

typedef struct {
    int param;            /* btl_usnic_wire */
    const char *provider;
    bool usable;          /* the probe's verdict */
    int wire;             /* expected */
    int probes;           /* expected probe calls */
    const char *why;      /* expected in the verbose reason ("": none) */
} choose_row_t;

#define AUTO OPAL_BTL_USNIC_WIRE_AUTO
#define OFI OPAL_BTL_USNIC_WIRE_OFI
#define SOCK OPAL_BTL_USNIC_WIRE_SOCKET

static const choose_row_t choose_rows[] = {
    /* auto: the socket wire where the provider is udp and a socket can be had */
    {AUTO, "udp", true, SOCK, 1, ""},
    {AUTO, "udp", false, OFI, 1, "the socket wire cannot run (a UDP socket on the interface's address: "
                                 "Cannot assign requested address): the ofi wire"},
    /* ... ofi for every other provider, without probing a socket */
    {AUTO, "usnic", true, OFI, 0, "provider usnic: the ofi wire (btl_usnic_wire auto)"},
    {AUTO, "usnic", false, OFI, 0, "provider usnic: the ofi wire (btl_usnic_wire auto)"},
    {AUTO, "tcp", true, OFI, 0, "provider tcp: the ofi wire (btl_usnic_wire auto)"},
    {AUTO, "verbs", true, OFI, 0, "provider verbs: the ofi wire (btl_usnic_wire auto)"},
    {AUTO, "UDP", true, OFI, 0, "provider UDP: the ofi wire (btl_usnic_wire auto)"}, /* names are exact */
    {AUTO, "udp;ofi_rxd", true, OFI, 0, "provider udp;ofi_rxd: the ofi wire (btl_usnic_wire auto)"},
    {AUTO, "", true, OFI, 0, "provider : the ofi wire (btl_usnic_wire auto)"},
    /* ofi and socket as asked, whatever the provider, never probing */
    {OFI, "udp", true, OFI, 0, ""},
    {OFI, "usnic", true, OFI, 0, ""},
    {SOCK, "usnic", true, SOCK, 0, ""},
    {SOCK, "udp", false, SOCK, 0, ""}, /* asked for: its open says what fails */
    /* a value the parameter's enumerator would refuse: auto */
    {3, "udp", true, SOCK, 1, ""},
    {-1, "usnic", true, OFI, 0, "provider usnic: the ofi wire (btl_usnic_wire auto)"},
};

static void test_wire_choose_table(void)
{
    for (size_t i = 0; i < sizeof(choose_rows) / sizeof(choose_rows[0]); ++i) {
        const choose_row_t *r = &choose_rows[i];
        char why[192];
        memset(why, 'x', sizeof(why));
        probe.usable = r->usable;
        probe.calls = 0;
        probe.ipv4 = 0;
        int wire = opal_btl_usnic_wire_choose(r->param, r->provider, 0x0100007fu, fake_sock_usable, why,
                                              sizeof(why));
        bool ok = CHECK_EQ(wire, r->wire);
        ok &= CHECK_EQ(probe.calls, r->probes);
        ok &= CHECK_STR(why, r->why);
        if (r->probes > 0) {
            ok &= CHECK_EQ_U(probe.ipv4, 0x0100007fu); /* the interface's address, as given */
        }
        if (!ok) {
            fprintf(stderr, "  row %zu: btl_usnic_wire %d, provider \"%s\", socket %s\n", i, r->param, r->provider,
                    r->usable ? "usable" : "unusable");
        }
    }
}

/* A reason longer than the caller's buffer is cut, still terminated (the
 * length through a volatile: gcc would otherwise see the truncation of
 * the inlined snprintf at compile time, -Werror=format-truncation) */
static void test_wire_choose_short_buffer(void)
{
    char why[16];
    volatile size_t len = sizeof(why);
    memset(why, 'x', sizeof(why));
    probe.usable = false;
    CHECK_EQ(opal_btl_usnic_wire_choose(AUTO, "udp", 0, fake_sock_usable, why, len), OFI);
    CHECK_EQ_U(strlen(why), sizeof(why) - 1);
    CHECK(0 == strncmp(why, "the socket wire", sizeof(why) - 1));
    memset(why, 'x', sizeof(why));
    CHECK_EQ(opal_btl_usnic_wire_choose(AUTO, "a-long-provider-name", 0, fake_sock_usable, why, len), OFI);
    CHECK_EQ_U(strlen(why), sizeof(why) - 1);
}

/* ===================== the source check ===================== */

/* A module with peers at ranks 1 and 3 of our job (slots 0 and 2 empty)
 * and rank 5 of another job (other_job_peers); only what
 * opal_btl_usnic_source_ok reads is set up */
typedef struct {
    opal_btl_usnic_module_t *module;
    opal_btl_usnic_endpoint_t *slots[4];
    opal_btl_usnic_endpoint_t *r1, *r3, *other;
    uint32_t my_job, other_job;
} src_fx_t;

/* Channel addresses in the two wires' forms (as in ep->peer_addr): the
 * socket wire's IPv4 address (network order) above the port, the ofi
 * wire's fi_addr_t (an index into the channel's address vector) */
static uint64_t sock_addr(uint32_t host, uint16_t port)
{
    uint32_t ipv4 = htonl(0x0a000000u | host); /* 10.0.0.<host> */
    return ((uint64_t) ipv4 << 16) | port;
}

static opal_btl_usnic_endpoint_t *src_ep(uint64_t prio_addr, uint64_t data_addr)
{
    opal_btl_usnic_endpoint_t *ep = (opal_btl_usnic_endpoint_t *) calloc(1, sizeof(*ep));
    if (NULL != ep) {
        ep->peer_addr[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = prio_addr;
        ep->peer_addr[OPAL_BTL_USNIC_DATA_CHANNEL] = data_addr;
    }
    return ep;
}

/* |ofi|: the ofi wire's address form, else the socket wire's */
static bool src_fx_init(src_fx_t *f, bool ofi)
{
    memset(f, 0, sizeof(*f));
    f->my_job = OPAL_PROC_MY_NAME.jobid; /* whatever it is without opal_init */
    f->other_job = f->my_job ^ 0x00010000u;
    f->module = (opal_btl_usnic_module_t *) calloc(1, sizeof(*f->module));
    if (NULL == f->module) {
        return false;
    }
    if (ofi) {
        f->r1 = src_ep(0, 1);
        f->r3 = src_ep(2, 3);
        f->other = src_ep(4, 5);
    } else {
        /* the priority and data channels of one process: one address, two ports */
        f->r1 = src_ep(sock_addr(1, 40001), sock_addr(1, 40002));
        f->r3 = src_ep(sock_addr(3, 40001), sock_addr(3, 40002)); /* the same ports on another host */
        f->other = src_ep(sock_addr(1, 50001), sock_addr(1, 50002)); /* another process on r1's host */
    }
    if (NULL == f->r1 || NULL == f->r3 || NULL == f->other) {
        return false;
    }
    f->slots[1] = f->r1;
    f->slots[3] = f->r3;
    f->module->peers = f->slots;
    f->module->num_peer_slots = 4;
    f->module->caps.reports_source = true;
    OBJ_CONSTRUCT(&f->module->other_job_peers, opal_hash_table_t);
    if (OPAL_SUCCESS != opal_hash_table_init(&f->module->other_job_peers, 8)) {
        return false;
    }
    uint64_t other_id = ((uint64_t) f->other_job << 32) | 5;
    return OPAL_SUCCESS == opal_hash_table_set_value_uint64(&f->module->other_job_peers, other_id, f->other);
}

static void src_fx_fini(src_fx_t *f)
{
    if (NULL != f->module) {
        OBJ_DESTRUCT(&f->module->other_job_peers);
    }
    free(f->module);
    free(f->r1);
    free(f->r3);
    free(f->other);
}

/* A datagram header claiming to come from rank |vpid| of job |job|
 * (only the sender field matters here: the tag is checked later) */
static opal_btl_usnic_hdr_t claim(uint32_t job, uint32_t vpid)
{
    opal_btl_usnic_hdr_t h;
    memset(&h, 0, sizeof(h));
    h.magic = 0xffff;
    h.sender = opal_btl_usnic_wire64(((uint64_t) job << 32) | vpid);
    return h;
}

typedef struct {
    uint64_t total, invalid, bad_source;
} src_counts_t;

static src_counts_t counts(const src_fx_t *f)
{
    const opal_btl_usnic_stats_t *s = &f->module->eng.stats;
    return (src_counts_t){s->num_total_recvs, s->num_invalid_recvs, s->num_drop_bad_source};
}

/* source_ok of |h| on |channel| from |src|: |want| and, if refused, each
 * counter once more (accepted: none, the engine counts what it takes) */
static bool src_check(src_fx_t *f, const opal_btl_usnic_hdr_t *h, size_t len, int channel, uint64_t src, bool want,
                      const char *what)
{
    src_counts_t before = counts(f);
    bool got = opal_btl_usnic_source_ok(f->module, channel, (const uint8_t *) h, len, src);
    src_counts_t after = counts(f);
    uint64_t d = want ? 0 : 1;
    bool ok = CHECK_EQ(got, want);
    ok &= CHECK_EQ_U(after.total - before.total, d);
    ok &= CHECK_EQ_U(after.invalid - before.invalid, d);
    ok &= CHECK_EQ_U(after.bad_source - before.bad_source, d);
    if (!ok) {
        fprintf(stderr, "  %s (channel %d, source 0x%" PRIx64 ")\n", what, channel, src);
    }
    return ok;
}

static void source_checks(src_fx_t *f)
{
    const size_t L = sizeof(opal_btl_usnic_hdr_t);
    opal_btl_usnic_hdr_t r1 = claim(f->my_job, 1), r3 = claim(f->my_job, 3), other = claim(f->other_job, 5);
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        int o = 1 - c; /* the other channel */
        /* from where the sender published it: accepted, on either channel */
        src_check(f, &r1, L, c, f->r1->peer_addr[c], true, "rank 1 from its own address");
        src_check(f, &r3, L, c, f->r3->peer_addr[c], true, "rank 3 from its own address");
        src_check(f, &other, L, c, f->other->peer_addr[c], true, "another job's rank from its own address");
        /* from anywhere else: refused and counted */
        src_check(f, &r1, L, c, f->r1->peer_addr[o], false, "rank 1 from its other channel's address");
        src_check(f, &r1, L, c, f->r3->peer_addr[c], false, "rank 1 claimed from rank 3's address");
        src_check(f, &r3, L, c, f->r1->peer_addr[c], false, "rank 3 claimed from rank 1's address");
        src_check(f, &r1, L, c, f->other->peer_addr[c], false, "rank 1 claimed from another job's rank");
        src_check(f, &other, L, c, f->r1->peer_addr[c], false, "another job's rank claimed from rank 1's address");
        src_check(f, &other, L, c, f->other->peer_addr[o], false, "another job's rank, other channel's address");
        src_check(f, &r1, L, c, 0x7777, false, "rank 1 from an unknown address");
        /* a longer datagram: the same verdicts (only the header is read) */
        src_check(f, &r1, 1400, c, f->r1->peer_addr[c], true, "a full datagram from rank 1");
        src_check(f, &r1, 1400, c, f->r1->peer_addr[o], false, "a full datagram from rank 1's other channel");
    }
    /* the engine's to count: unknown senders, datagrams too short to claim one */
    opal_btl_usnic_hdr_t empty_slot = claim(f->my_job, 2), past = claim(f->my_job, 4), nobody = claim(f->other_job, 6);
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        src_check(f, &empty_slot, L, c, 0x7777, true, "a rank without endpoint");
        src_check(f, &past, L, c, 0x7777, true, "a rank past the slots");
        src_check(f, &nobody, L, c, 0x7777, true, "another job's unknown rank");
        src_check(f, &r1, L - 1, c, 0x7777, true, "a datagram shorter than a header");
        src_check(f, &r1, 0, c, 0x7777, true, "an empty datagram");
    }
    /* a wire that reports no source (or protection none): everything passes */
    f->module->caps.reports_source = false;
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        src_check(f, &r1, L, c, f->r3->peer_addr[c], true, "no source reported");
    }
    /* the counters add up over the run: 2 channels x 8 refusals */
    CHECK_EQ_U(f->module->eng.stats.num_drop_bad_source, 16);
}

static void run_source_checks(bool ofi)
{
    src_fx_t f;
    if (CHECK(src_fx_init(&f, ofi))) {
        source_checks(&f);
    }
    src_fx_fini(&f);
}

static void test_source_ok_sock_addresses(void)
{
    run_source_checks(false);
}

static void test_source_ok_ofi_addresses(void)
{
    run_source_checks(true);
}

UNIT_MAIN(UNIT_TEST(test_wire_choose_table), UNIT_TEST(test_wire_choose_short_buffer),
          UNIT_TEST(test_source_ok_sock_addresses), UNIT_TEST(test_source_ok_ofi_addresses))
