/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * CIDR parsing and the if_include / if_exclude filter (btl_usnic_if.c):
 * pure functions, no network.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <string.h>

#include "btl_usnic.h"
#include "unit.h"

static uint32_t ip(const char *dotted)
{
    struct in_addr a;
    if (1 != inet_pton(AF_INET, dotted, &a)) {
        fprintf(stderr, "bad test address %s\n", dotted);
        abort();
    }
    return a.s_addr; /* network order */
}

typedef struct {
    const char *text;
    const char *net;   /* expected (already masked) network, dotted */
    uint32_t mask_host; /* expected mask in host order */
} cidr_ok_t;

static const cidr_ok_t cidr_ok[] = {
    {"10.1.2.3/8", "10.0.0.0", 0xff000000u},
    {"192.168.1.77/24", "192.168.1.0", 0xffffff00u},
    {"192.168.1.77/23", "192.168.0.0", 0xfffffe00u},
    {"172.16.5.4/12", "172.16.0.0", 0xfff00000u},
    {"1.2.3.4/32", "1.2.3.4", 0xffffffffu},
    {"255.255.255.255/31", "255.255.255.254", 0xfffffffeu},
    {"1.2.3.4/1", "0.0.0.0", 0x80000000u},
    {"200.1.1.1/1", "128.0.0.0", 0x80000000u},
    {"127.0.0.1/8", "127.0.0.0", 0xff000000u},
    {"10.0.0.0/16", "10.0.0.0", 0xffff0000u},
};

static void test_parse_cidr_valid(void)
{
    for (size_t i = 0; i < sizeof(cidr_ok) / sizeof(cidr_ok[0]); ++i) {
        uint32_t addr = 0xdeadbeefu, mask = 0xdeadbeefu;
        int rc = opal_btl_usnic_parse_cidr(cidr_ok[i].text, &addr, &mask);
        if (!CHECK_EQ(rc, OPAL_SUCCESS)) {
            fprintf(stderr, "  \"%s\"\n", cidr_ok[i].text);
            continue;
        }
        /* both results in network byte order, the address masked */
        if (!CHECK_EQ_U(mask, htonl(cidr_ok[i].mask_host)) || !CHECK_EQ_U(addr, ip(cidr_ok[i].net))) {
            fprintf(stderr, "  \"%s\"\n", cidr_ok[i].text);
        }
        CHECK_EQ_U(addr & mask, addr);
    }
}

static const char *const cidr_bad[] = {
    "10.0.0.0",          /* no length */
    "10.0.0.0/",         /* empty length */
    "10.0.0.0/0",        /* /0 is refused (it would match everything) */
    "10.0.0.0/33",
    "10.0.0.0/-1",
    "10.0.0.0/8x",
    "10.0.0.0/8/8",
    "10.0.0/8",          /* three parts */
    "256.0.0.1/8",
    "/8",
    "abc/8",
    "10.0.0.0.0/8",
    "::1/128",           /* IPv6 is not supported here */
    "",
    "/",
    "1234567890123456789012345678901234567890123456789012345678901234567890/8", /* longer than the buffer */
};

static void test_parse_cidr_invalid(void)
{
    for (size_t i = 0; i < sizeof(cidr_bad) / sizeof(cidr_bad[0]); ++i) {
        uint32_t addr = 0x11111111u, mask = 0x22222222u;
        int rc = opal_btl_usnic_parse_cidr(cidr_bad[i], &addr, &mask);
        if (!CHECK_EQ(rc, OPAL_ERR_BAD_PARAM)) {
            fprintf(stderr, "  \"%s\" accepted\n", cidr_bad[i]);
        }
        /* output parameters are set only on success */
        CHECK_EQ_U(addr, 0x11111111u);
        CHECK_EQ_U(mask, 0x22222222u);
    }
}

typedef struct {
    const char *list;
    const char *ifname, *domain, *addr;
    bool match;
    const char *bad; /* first bad entry reported, or NULL */
} filter_case_t;

static const filter_case_t filter_cases[] = {
    {"lo", "lo", "lo", "127.0.0.1", true, NULL},
    {"eth0", "lo", "lo", "127.0.0.1", false, NULL},
    {"eth0,lo", "lo", "lo", "127.0.0.1", true, NULL},
    {"eth0, lo", "lo", "lo", "127.0.0.1", true, NULL},
    {"eth0 lo", "lo", "lo", "127.0.0.1", true, NULL},
    {",,lo,,", "lo", "lo", "127.0.0.1", true, NULL},
    {"", "lo", "lo", "127.0.0.1", false, NULL},
    {"lo0", "lo", "lo", "127.0.0.1", false, NULL},        /* no prefix matching */
    {"eth", "eth0", "eth0", "10.1.2.3", false, NULL},
    {"LO", "lo", "lo", "127.0.0.1", false, NULL},         /* names are case-sensitive */
    {"usnic_0", "eth4", "usnic_0", "10.1.2.3", true, NULL}, /* matches the domain name */
    {"usnic_0", NULL, "usnic_0", "10.1.2.3", true, NULL},
    {"eth4", NULL, "usnic_0", "10.1.2.3", false, NULL},
    {"10.0.0.0/8", "eth0", "eth0", "10.1.2.3", true, NULL},
    {"10.1.2.3/32", "eth0", "eth0", "10.1.2.3", true, NULL},
    {"10.1.2.4/32", "eth0", "eth0", "10.1.2.3", false, NULL},
    {"10.1.2.99/24", "eth0", "eth0", "10.1.2.3", true, NULL}, /* host bits in the entry are masked */
    {"192.168.0.0/16", "eth0", "eth0", "10.1.2.3", false, NULL},
    {"192.168.0.0/16,10.0.0.0/8", "eth0", "eth0", "10.1.2.3", true, NULL},
    {"127.0.0.0/8", "lo", "lo", "127.0.0.1", true, NULL},
    {"11.0.0.0/8", "eth0", "eth0", "10.1.2.3", false, NULL},
    {"8.0.0.0/6", "eth0", "eth0", "10.1.2.3", true, NULL},   /* 8.0.0.0-11.255.255.255 */
    {"12.0.0.0/6", "eth0", "eth0", "10.1.2.3", false, NULL},
    /* bad entries never match, the first one is reported, the rest still work */
    {"10.0.0.0/33,lo", "lo", "lo", "127.0.0.1", true, "10.0.0.0/33"},
    {"10.0.0.0/33", "eth0", "eth0", "10.1.2.3", false, "10.0.0.0/33"},
    {"1.2.3/8, 999.0.0.0/8, eth0", "eth0", "eth0", "10.1.2.3", true, "1.2.3/8"},
    {"10.1.2.3", "eth0", "eth0", "10.1.2.3", false, "10.1.2.3"}, /* an address is not a subnet */
    {"eth0,10.0.0.0/", "eth0", "eth0", "10.1.2.3", true, "10.0.0.0/"},
};

static void test_if_list_matches(void)
{
    for (size_t i = 0; i < sizeof(filter_cases) / sizeof(filter_cases[0]); ++i) {
        const filter_case_t *c = &filter_cases[i];
        char *bad = NULL;
        bool m = opal_btl_usnic_if_list_matches(c->list, c->ifname, c->domain, ip(c->addr), &bad);
        bool ok = CHECK_EQ(m, c->match);
        ok = CHECK_STR(bad, c->bad) && ok;
        if (!ok) {
            fprintf(stderr, "  list \"%s\" if %s domain %s addr %s\n", c->list, c->ifname ? c->ifname : "(null)",
                    c->domain ? c->domain : "(null)", c->addr);
        }
        free(bad);
        /* a NULL report pointer is allowed and changes nothing */
        CHECK_EQ(opal_btl_usnic_if_list_matches(c->list, c->ifname, c->domain, ip(c->addr), NULL), c->match);
    }
}

/* A report already made is not overwritten by a later call */
static void test_if_list_keeps_first_report(void)
{
    char *bad = NULL;
    (void) opal_btl_usnic_if_list_matches("x/1,1.1.1.1/40", "lo", "lo", ip("127.0.0.1"), &bad);
    CHECK_STR(bad, "1.1.1.1/40");
    char *first = bad;
    (void) opal_btl_usnic_if_list_matches("2.2.2.2/99", "lo", "lo", ip("127.0.0.1"), &bad);
    CHECK_PTR_EQ(bad, first);
    CHECK_STR(bad, "1.1.1.1/40");
    free(bad);
}

/* Entries that match nothing: masks ORed over interfaces, then named */
static void test_if_list_unmatched(void)
{
    const char *list = "lo, eth7,10.99.0.0/16 192.0.2.0/24,10.0.0.0/99";
    uint32_t m = opal_btl_usnic_if_list_match_mask(list, "lo", NULL, ip("127.0.0.1"));
    CHECK_EQ(m, 0x1u | 0x10u); /* lo, and the invalid entry (reported on its own) */
    m |= opal_btl_usnic_if_list_match_mask(list, "eth0", "eth0", ip("192.0.2.2"));
    CHECK_EQ(m, 0x1u | 0x8u | 0x10u);
    char buf[128];
    opal_btl_usnic_if_list_unmatched(list, m, buf, sizeof(buf));
    CHECK_STR(buf, "eth7, 10.99.0.0/16");
    /* a domain name matches too (usnic_0 of the ofi wire) */
    CHECK_EQ(opal_btl_usnic_if_list_match_mask("usnic_0", "eth4", "usnic_0", ip("10.0.0.1")), 0x1u);
    opal_btl_usnic_if_list_unmatched("lo,eth0", 0x3u, buf, sizeof(buf));
    CHECK_STR(buf, "");
    /* entries past the 32nd are never called unmatched */
    char many[33 * 4 + 8] = "";
    for (int i = 0; i < 33; ++i) {
        strcat(many, "x,");
    }
    strcat(many, "y");
    CHECK_EQ(opal_btl_usnic_if_list_match_mask(many, "z", NULL, 0), 0u);
    opal_btl_usnic_if_list_unmatched(many, 0, buf, sizeof(buf));
    CHECK_EQ(strstr(buf, "y") == NULL, true);
}

/* The interfaces found, as messages name them */
static void test_if_describe(void)
{
    opal_btl_usnic_host_if_t ifs[2] = {{"lo", 0, 0}, {"eth0", 0, 0}};
    ifs[0].ipv4 = ip("127.0.0.1");
    ifs[0].netmask = ip("255.0.0.0");
    ifs[1].ipv4 = ip("192.0.2.2");
    ifs[1].netmask = ip("255.255.255.0");
    char buf[128];
    opal_btl_usnic_if_describe(ifs, 2, buf, sizeof(buf));
    CHECK_STR(buf, "lo 127.0.0.1/8, eth0 192.0.2.2/24");
    opal_btl_usnic_if_describe(ifs, 0, buf, sizeof(buf));
    CHECK_STR(buf, "(no IPv4 interface is up)");
    char tiny[12];
    opal_btl_usnic_if_describe(ifs, 2, tiny, sizeof(tiny)); /* cut, terminated */
    CHECK_EQ(strlen(tiny) < sizeof(tiny), true);
}

static opal_btl_usnic_modex_t mod(const char *addr, int prefix)
{
    opal_btl_usnic_modex_t m;
    memset(&m, 0, sizeof(m));
    m.ipv4 = ip(addr);
    m.netmask = htonl(0 == prefix ? 0 : 0xffffffffu << (32 - prefix));
    return m;
}

/* Pairing is by subnet, one to one, then routed leftovers of the same
 * loopback-ness; never two modules onto one remote module. */
static void test_pair_modules(void)
{
    int map[4];
    opal_btl_usnic_modex_t a2[] = {mod("10.77.1.1", 24), mod("10.77.2.1", 24)};
    opal_btl_usnic_modex_t b2[] = {mod("10.77.2.2", 24), mod("10.77.1.2", 24)};
    opal_btl_usnic_pair_modules(a2, 2, b2, 2, map);
    CHECK_EQ(map[0], 1);
    CHECK_EQ(map[1], 0);
    /* the peer is on subnet 2 only: subnet 1 gets nothing (it used to be
     * paired across subnets and fed a second stream into one module) */
    opal_btl_usnic_modex_t b1[] = {mod("10.77.2.2", 24)};
    opal_btl_usnic_pair_modules(a2, 2, b1, 1, map);
    CHECK_EQ(map[0], -1);
    CHECK_EQ(map[1], 0);
    /* routed: different subnets still pair, in list order */
    opal_btl_usnic_modex_t r1[] = {mod("10.1.0.1", 24), mod("10.3.0.1", 24)};
    opal_btl_usnic_modex_t r2[] = {mod("10.2.0.1", 24), mod("10.4.0.1", 24)};
    opal_btl_usnic_pair_modules(r1, 2, r2, 2, map);
    CHECK_EQ(map[0], 0);
    CHECK_EQ(map[1], 1);
    /* loopback never pairs with a real interface */
    opal_btl_usnic_modex_t lo[] = {mod("127.0.0.1", 8)};
    opal_btl_usnic_modex_t eth[] = {mod("192.168.1.5", 24)};
    opal_btl_usnic_pair_modules(lo, 1, eth, 1, map);
    CHECK_EQ(map[0], -1);
    opal_btl_usnic_pair_modules(lo, 1, lo, 1, map);
    CHECK_EQ(map[0], 0);
    /* two modules on one subnet, the peer has one: one to one */
    opal_btl_usnic_modex_t same[] = {mod("10.5.0.1", 16), mod("10.5.0.2", 16)};
    opal_btl_usnic_modex_t one[] = {mod("10.5.0.9", 16)};
    opal_btl_usnic_pair_modules(same, 2, one, 1, map);
    CHECK_EQ(map[0], 0);
    CHECK_EQ(map[1], -1);
}

/* The provider's max_msg_size counts its prefix; the interface MTU counts
 * IPv4 and UDP headers; 16 bits of payload length cap the rest */
static void test_datagram_mtu_arithmetic(void)
{
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(1472, 0, 1500), 1472);   /* udp on Ethernet */
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(1472, 0, 65536), 1472);  /* udp on loopback */
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(1458, 64, 1500), 1394);  /* usnic: MTU - 42, 64-byte prefix */
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(1536, 64, 1500), 1472);  /* the prefix is not on the wire */
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(9000, 0, 9000), 8972);   /* jumbo frames */
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(65507, 64, 65536), 65000);
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(2000, 0, -1), 2000);     /* MTU unknown */
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(64, 64, 1500), 0);       /* nothing after the prefix */
    CHECK_EQ_U(opal_btl_usnic_datagram_mtu(10, 64, 1500), 0);
}

UNIT_MAIN(UNIT_TEST(test_datagram_mtu_arithmetic), UNIT_TEST(test_parse_cidr_valid), UNIT_TEST(test_parse_cidr_invalid), UNIT_TEST(test_if_list_matches),
          UNIT_TEST(test_if_list_keeps_first_report), UNIT_TEST(test_if_list_unmatched), UNIT_TEST(test_if_describe),
          UNIT_TEST(test_pair_modules))
