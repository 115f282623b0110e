/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The usnic libfabric extension (btl_usnic_ext.c), compiled here with
 * OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC=1 against our stand-in
 * test/unit/ext-standin/rdma/fi_ext_usnic.h (Debian's libfabric has no
 * such header).  A fake fabric whose ops_open hands out a fake
 * "fabric_ops 1" table stands in for the usnic provider: the extension's
 * facts win where it gives them; zero facts fall back one by one (fabric
 * name, sysfs, address match, defaults); a provider without the
 * extension (-FI_ENOSYS), a too small ops table, a failing getinfo or an
 * empty reply leave the caller's facts untouched; the verbose line names
 * each source; opal_btl_usnic_ext_refine sets a module's netmask, link
 * speed and interface.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_usnic.h>

#include "btl_usnic.h"
#include "btl_usnic_ext.h"
#include "unit.h"

#if !OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC
#    error "test_ext must be built with -DOPAL_BTL_USNIC_HAVE_FI_EXT_USNIC=1 (test/unit/Makefile.inc)"
#endif

/* refine reads btl_usnic_link_speed and the verbose stream from here
 * (the component itself is not linked into unit tests) */
opal_btl_usnic_component_t opal_btl_usnic_globals;

/* ---- the fake provider ------------------------------------------------ */

typedef struct fake_provider_t {
    int ops_open_rc;          /* what ops_open returns */
    bool hand_out_ops;        /* ops_open sets *ops */
    size_t ops_size;          /* the table's size field */
    int getinfo_rc;
    struct fi_usnic_info_v1 reply;
    bool reply_fill_ifname;   /* write all IFNAMSIZ bytes of the name, no NUL */
    /* what the component did */
    int ops_open_calls;
    char ops_open_name[64];
    int getinfo_calls;
    uint32_t getinfo_version;
    struct fid_fabric *getinfo_fabric;
} fake_provider_t;

typedef struct fake_fabric_t {
    struct fid_fabric fabric; /* first: the component sees only this */
    struct fi_ops fid_ops;
    fake_provider_t prov;
} fake_fabric_t;

static struct fi_usnic_ops_fabric fake_ops_table;
static fake_provider_t *current; /* getinfo has no context pointer */

static int fake_getinfo(uint32_t version, struct fid_fabric *fabric, struct fi_usnic_info *info)
{
    fake_provider_t *p = current;
    ++p->getinfo_calls;
    p->getinfo_version = version;
    p->getinfo_fabric = fabric;
    if (0 != p->getinfo_rc) {
        memset(info, 0xa5, sizeof(*info)); /* garbage the caller must not use */
        return p->getinfo_rc;
    }
    info->ui_version = version;
    info->ui.v1 = p->reply;
    if (p->reply_fill_ifname) {
        memset(info->ui.v1.ui_ifname, 'x', sizeof(info->ui.v1.ui_ifname));
    }
    return 0;
}

static int fake_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
    (void) flags;
    (void) context;
    fake_fabric_t *ff = (fake_fabric_t *) fid; /* fid is the first member of fabric */
    fake_provider_t *p = &ff->prov;
    ++p->ops_open_calls;
    snprintf(p->ops_open_name, sizeof(p->ops_open_name), "%s", name);
    fake_ops_table.size = p->ops_size;
    fake_ops_table.getinfo = fake_getinfo;
    current = p;
    if (p->hand_out_ops) {
        *ops = &fake_ops_table; /* even on failure: the return code must decide */
    }
    if (0 != p->ops_open_rc) {
        return p->ops_open_rc;
    }
    return (0 == strcmp(name, FI_USNIC_FABRIC_OPS_1)) ? 0 : -FI_EINVAL;
}

/* A usnic fabric reporting 40 Gb/s, 255.255.255.0, eth4 */
static void fake_init(fake_fabric_t *ff)
{
    memset(ff, 0, sizeof(*ff));
    ff->fid_ops.size = sizeof(ff->fid_ops);
    ff->fid_ops.ops_open = fake_ops_open;
    ff->fabric.fid.fclass = FI_CLASS_FABRIC;
    ff->fabric.fid.ops = &ff->fid_ops;
    ff->prov.hand_out_ops = true;
    ff->prov.ops_size = sizeof(struct fi_usnic_ops_fabric);
    ff->prov.reply.ui_link_speed = 40000;
    ff->prov.reply.ui_netmask_be = htonl(0xffffff00u);
    snprintf(ff->prov.reply.ui_ifname, sizeof(ff->prov.reply.ui_ifname), "eth4");
    ff->prov.reply.ui_num_vf = 16;
    current = &ff->prov;
}

/* Facts filled with a pattern, to see that a failed query leaves them */
static void sentinel(opal_btl_usnic_if_facts_t *f)
{
    memset(f, 0x5a, sizeof(*f));
}

static bool is_sentinel(const opal_btl_usnic_if_facts_t *f)
{
    opal_btl_usnic_if_facts_t s;
    sentinel(&s);
    return 0 == memcmp(f, &s, sizeof(s));
}

/* The query of |ff| says "not available", called getinfo |getinfo_calls|
 * times and left the facts alone; false (after reporting) if not */
static bool query_refused(fake_fabric_t *ff, unsigned getinfo_calls)
{
    opal_btl_usnic_if_facts_t f;
    sentinel(&f);
    bool good = CHECK_EQ(opal_btl_usnic_ext_query(&ff->fabric, &f), OPAL_ERR_NOT_AVAILABLE);
    good &= CHECK_EQ(ff->prov.getinfo_calls, getinfo_calls);
    good &= CHECK(is_sentinel(&f));
    return good;
}

static uint32_t mask_of(const char *dotted)
{
    struct in_addr a;
    inet_pton(AF_INET, dotted, &a);
    return a.s_addr;
}

/* Fallbacks that differ from everything the fake extension says */
static opal_btl_usnic_if_fallbacks_t fallbacks(void)
{
    opal_btl_usnic_if_fallbacks_t fb = {
        .fabric_name = "10.1.2.0/20",
        .sysfs_speed_mbps = 25000,
        .matched_ifname = "enp1s0",
        .default_ifname = "usnic_3",
        .default_speed_mbps = 12345,
    };
    return fb;
}

/* ---- tests ------------------------------------------------------------- */

/* The stand-in has the documented layout (so the test exercises the real
 * offsets): version, 4 bytes of padding, then packed version 1 fields */
static void test_standin_layout(void)
{
    CHECK_EQ_U(offsetof(struct fi_usnic_info, ui_version), 0u);
    CHECK_EQ_U(offsetof(struct fi_usnic_info, ui), 8u);
    CHECK_EQ_U(offsetof(struct fi_usnic_info, ui.v1.ui_link_speed), 8u);
    CHECK_EQ_U(offsetof(struct fi_usnic_info, ui.v1.ui_netmask_be), 12u);
    CHECK_EQ_U(offsetof(struct fi_usnic_info, ui.v1.ui_ifname), 16u);
    CHECK_EQ_U(offsetof(struct fi_usnic_info, ui.v1.ui_num_vf), 16u + IFNAMSIZ);
    CHECK_EQ_U(offsetof(struct fi_usnic_info, ui.v1.ui_cq_per_vf), 24u + IFNAMSIZ);
    CHECK_EQ_U(sizeof(struct fi_usnic_info_v1), 20u + IFNAMSIZ);
    CHECK_EQ_U(offsetof(struct fi_usnic_ops_fabric, getinfo), sizeof(size_t));
}

/* The extension's three facts, asked for by name and version 1 */
static void test_query_reads_extension(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    opal_btl_usnic_if_facts_t f;
    sentinel(&f);
    REQUIRE_EQ(opal_btl_usnic_ext_query(&ff.fabric, &f), OPAL_SUCCESS);
    CHECK_EQ(ff.prov.ops_open_calls, 1);
    CHECK_STR(ff.prov.ops_open_name, "fabric_ops 1");
    CHECK_EQ(ff.prov.getinfo_calls, 1);
    CHECK_EQ_U(ff.prov.getinfo_version, 1u);
    CHECK_PTR_EQ(ff.prov.getinfo_fabric, &ff.fabric);
    CHECK_EQ_U(f.netmask, mask_of("255.255.255.0"));
    CHECK_EQ_U(f.link_speed_mbps, 40000u);
    CHECK_STR(f.if_name, "eth4");
    CHECK_EQ(f.netmask_src, OPAL_BTL_USNIC_FACT_EXTENSION);
    CHECK_EQ(f.link_speed_src, OPAL_BTL_USNIC_FACT_EXTENSION);
    CHECK_EQ(f.if_name_src, OPAL_BTL_USNIC_FACT_EXTENSION);
}

/* Merged with fallbacks that all say something else, the extension wins */
static void test_extension_wins(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    opal_btl_usnic_if_facts_t ext, f;
    REQUIRE_EQ(opal_btl_usnic_ext_query(&ff.fabric, &ext), OPAL_SUCCESS);
    opal_btl_usnic_if_fallbacks_t fb = fallbacks();
    opal_btl_usnic_if_facts_merge(&ext, &fb, &f);
    CHECK_EQ_U(f.netmask, mask_of("255.255.255.0"));
    CHECK_EQ(f.netmask_src, OPAL_BTL_USNIC_FACT_EXTENSION);
    CHECK_EQ_U(f.link_speed_mbps, 40000u);
    CHECK_EQ(f.link_speed_src, OPAL_BTL_USNIC_FACT_EXTENSION);
    CHECK_STR(f.if_name, "eth4");
    CHECK_EQ(f.if_name_src, OPAL_BTL_USNIC_FACT_EXTENSION);
}

/* Without the extension (NULL): the fallbacks the module always used */
static void test_no_extension_uses_fallbacks(void)
{
    opal_btl_usnic_if_fallbacks_t fb = fallbacks();
    opal_btl_usnic_if_facts_t f;
    opal_btl_usnic_if_facts_merge(NULL, &fb, &f);
    CHECK_EQ_U(f.netmask, mask_of("255.255.240.0"));
    CHECK_EQ(f.netmask_src, OPAL_BTL_USNIC_FACT_FABRIC_NAME);
    CHECK_EQ_U(f.link_speed_mbps, 25000u);
    CHECK_EQ(f.link_speed_src, OPAL_BTL_USNIC_FACT_SYSFS);
    CHECK_STR(f.if_name, "enp1s0");
    CHECK_EQ(f.if_name_src, OPAL_BTL_USNIC_FACT_ADDRESS_MATCH);

    /* and each one's own fallback */
    fb.fabric_name = "udp-fabric"; /* no prefix length */
    fb.sysfs_speed_mbps = -1;
    fb.matched_ifname = NULL;
    opal_btl_usnic_if_facts_merge(NULL, &fb, &f);
    CHECK_EQ_U(f.netmask, mask_of("255.255.255.0"));
    CHECK_EQ(f.netmask_src, OPAL_BTL_USNIC_FACT_DEFAULT);
    CHECK_EQ_U(f.link_speed_mbps, 12345u);
    CHECK_EQ(f.link_speed_src, OPAL_BTL_USNIC_FACT_DEFAULT);
    CHECK_STR(f.if_name, "usnic_3");
    CHECK_EQ(f.if_name_src, OPAL_BTL_USNIC_FACT_DEFAULT);

    fb.fabric_name = NULL;
    fb.sysfs_speed_mbps = 0;
    fb.matched_ifname = "";
    opal_btl_usnic_if_facts_merge(NULL, &fb, &f);
    CHECK_EQ(f.netmask_src, OPAL_BTL_USNIC_FACT_DEFAULT);
    CHECK_EQ(f.link_speed_src, OPAL_BTL_USNIC_FACT_DEFAULT);
    CHECK_EQ(f.if_name_src, OPAL_BTL_USNIC_FACT_DEFAULT);
    CHECK_STR(f.if_name, "usnic_3");
}

/* A fact the extension reports as zero falls back on its own; the others
 * still come from the extension */
static void test_zero_facts_fall_back_one_by_one(void)
{
    static const struct {
        const char *what;
        bool zero_mask, zero_speed, empty_name;
    } cases[] = {
        {"netmask", true, false, false},
        {"speed", false, true, false},
        {"name", false, false, true},
        {"netmask+speed", true, true, false},
        {"speed+name", false, true, true},
        {"netmask+name", true, false, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        fake_fabric_t ff;
        fake_init(&ff);
        if (cases[i].zero_mask) {
            ff.prov.reply.ui_netmask_be = 0;
        }
        if (cases[i].zero_speed) {
            ff.prov.reply.ui_link_speed = 0;
        }
        if (cases[i].empty_name) {
            memset(ff.prov.reply.ui_ifname, 0, sizeof(ff.prov.reply.ui_ifname));
        }
        opal_btl_usnic_if_facts_t ext, f;
        bool ok = CHECK_EQ(opal_btl_usnic_ext_query(&ff.fabric, &ext), OPAL_SUCCESS);
        opal_btl_usnic_if_fallbacks_t fb = fallbacks();
        opal_btl_usnic_if_facts_merge(ok ? &ext : NULL, &fb, &f);
        bool good = true;
        good &= CHECK_EQ(f.netmask_src,
                         cases[i].zero_mask ? OPAL_BTL_USNIC_FACT_FABRIC_NAME : OPAL_BTL_USNIC_FACT_EXTENSION);
        good &= CHECK_EQ_U(f.netmask, cases[i].zero_mask ? mask_of("255.255.240.0") : mask_of("255.255.255.0"));
        good &= CHECK_EQ(f.link_speed_src,
                         cases[i].zero_speed ? OPAL_BTL_USNIC_FACT_SYSFS : OPAL_BTL_USNIC_FACT_EXTENSION);
        good &= CHECK_EQ_U(f.link_speed_mbps, cases[i].zero_speed ? 25000u : 40000u);
        good &= CHECK_EQ(f.if_name_src,
                         cases[i].empty_name ? OPAL_BTL_USNIC_FACT_ADDRESS_MATCH : OPAL_BTL_USNIC_FACT_EXTENSION);
        good &= CHECK_STR(f.if_name, cases[i].empty_name ? "enp1s0" : "eth4");
        if (!good) {
            fprintf(stderr, "  case: zero %s\n", cases[i].what);
        }
    }
}

/* A provider without the extension: ops_open says -FI_ENOSYS (udp) */
static void test_enosys_not_available(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    ff.prov.ops_open_rc = -FI_ENOSYS;
    query_refused(&ff, 0);
    CHECK_EQ(ff.prov.ops_open_calls, 1);
}

/* ops_open "succeeds" but hands out no table */
static void test_no_table_not_available(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    ff.prov.hand_out_ops = false;
    query_refused(&ff, 0);
}

/* A table whose size does not reach getinfo is not called */
static void test_small_ops_table_not_available(void)
{
    static const size_t sizes[] = {0, 1, sizeof(size_t), sizeof(struct fi_usnic_ops_fabric) - 1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        fake_fabric_t ff;
        fake_init(&ff);
        ff.prov.ops_size = sizes[i];
        if (!query_refused(&ff, 0)) {
            fprintf(stderr, "  ops size %zu\n", sizes[i]);
        }
    }
    /* a larger (newer) table is fine */
    fake_fabric_t ff;
    fake_init(&ff);
    ff.prov.ops_size = sizeof(struct fi_usnic_ops_fabric) + 16;
    opal_btl_usnic_if_facts_t f;
    CHECK_EQ(opal_btl_usnic_ext_query(&ff.fabric, &f), OPAL_SUCCESS);
}

/* A fabric whose fi_ops cannot reach ops_open is not called at all */
static void test_fid_ops_without_ops_open(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    ff.fid_ops.size = offsetof(struct fi_ops, ops_open);
    opal_btl_usnic_if_facts_t f;
    sentinel(&f);
    CHECK_EQ(opal_btl_usnic_ext_query(&ff.fabric, &f), OPAL_ERR_NOT_AVAILABLE);
    CHECK_EQ(ff.prov.ops_open_calls, 0);
    fake_init(&ff);
    ff.fid_ops.ops_open = NULL;
    CHECK_EQ(opal_btl_usnic_ext_query(&ff.fabric, &f), OPAL_ERR_NOT_AVAILABLE);
    CHECK_EQ(opal_btl_usnic_ext_query(NULL, &f), OPAL_ERR_NOT_AVAILABLE);
    CHECK(is_sentinel(&f));
}

/* getinfo fails (e.g. a version the provider does not know) */
static void test_getinfo_failure_not_available(void)
{
    static const int rcs[] = {-FI_EINVAL, -FI_ENOSYS, 1};
    for (size_t i = 0; i < sizeof(rcs) / sizeof(rcs[0]); ++i) {
        fake_fabric_t ff;
        fake_init(&ff);
        ff.prov.getinfo_rc = rcs[i];
        if (!query_refused(&ff, 1)) {
            fprintf(stderr, "  getinfo rc %d\n", rcs[i]);
        }
    }
}

/* A reply with nothing in it counts as no extension */
static void test_empty_reply_not_available(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    memset(&ff.prov.reply, 0, sizeof(ff.prov.reply));
    ff.prov.reply.ui_num_vf = 8; /* not one of ours */
    query_refused(&ff, 1);
}

/* A name filling all IFNAMSIZ bytes without a NUL is cut there */
static void test_unterminated_ifname(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    ff.prov.reply_fill_ifname = true;
    opal_btl_usnic_if_facts_t f;
    REQUIRE_EQ(opal_btl_usnic_ext_query(&ff.fabric, &f), OPAL_SUCCESS);
    CHECK_EQ_U(strlen(f.if_name), (uint64_t) IFNAMSIZ);
    CHECK_EQ(f.if_name[0], 'x');
    CHECK_EQ(f.if_name_src, OPAL_BTL_USNIC_FACT_EXTENSION);
}

/* The verbose line names each fact's source */
static void test_describe_names_sources(void)
{
    CHECK_STR(opal_btl_usnic_fact_source_name(OPAL_BTL_USNIC_FACT_EXTENSION), "usnic extension");
    CHECK_STR(opal_btl_usnic_fact_source_name(OPAL_BTL_USNIC_FACT_FABRIC_NAME), "fabric name");
    CHECK_STR(opal_btl_usnic_fact_source_name(OPAL_BTL_USNIC_FACT_SYSFS), "sysfs");
    CHECK_STR(opal_btl_usnic_fact_source_name(OPAL_BTL_USNIC_FACT_ADDRESS_MATCH), "address match");
    CHECK_STR(opal_btl_usnic_fact_source_name(OPAL_BTL_USNIC_FACT_DEFAULT), "default");
    CHECK_STR(opal_btl_usnic_fact_source_name(OPAL_BTL_USNIC_FACT_NONE), "none");

    fake_fabric_t ff;
    fake_init(&ff);
    opal_btl_usnic_if_facts_t ext, f;
    REQUIRE_EQ(opal_btl_usnic_ext_query(&ff.fabric, &ext), OPAL_SUCCESS);
    opal_btl_usnic_if_fallbacks_t fb = fallbacks();
    opal_btl_usnic_if_facts_merge(&ext, &fb, &f);
    char line[256];
    opal_btl_usnic_if_facts_describe("usnic_0", &f, line, sizeof(line));
    CHECK_STR(line, "usnic_0: netmask 255.255.255.0 (usnic extension), link 40000 Mb/s (usnic extension), "
                    "interface eth4 (usnic extension)");

    opal_btl_usnic_if_facts_merge(NULL, &fb, &f);
    opal_btl_usnic_if_facts_describe("usnic_3", &f, line, sizeof(line));
    CHECK_STR(line, "usnic_3: netmask 255.255.240.0 (fabric name), link 25000 Mb/s (sysfs), "
                    "interface enp1s0 (address match)");

    fb.fabric_name = NULL;
    fb.sysfs_speed_mbps = -1;
    fb.matched_ifname = NULL;
    ext.netmask = 0; /* zero from the extension: falls back, says so */
    ext.netmask_src = OPAL_BTL_USNIC_FACT_NONE;
    opal_btl_usnic_if_facts_merge(&ext, &fb, &f);
    opal_btl_usnic_if_facts_describe("usnic_0", &f, line, sizeof(line));
    CHECK_STR(line, "usnic_0: netmask 255.255.255.0 (default), link 40000 Mb/s (usnic extension), "
                    "interface eth4 (usnic extension)");
    ext.link_speed_src = OPAL_BTL_USNIC_FACT_NONE;
    ext.if_name_src = OPAL_BTL_USNIC_FACT_NONE;
    opal_btl_usnic_if_facts_merge(&ext, &fb, &f);
    opal_btl_usnic_if_facts_describe("usnic_0", &f, line, sizeof(line));
    CHECK_STR(line, "usnic_0: netmask 255.255.255.0 (default), link 12345 Mb/s (default), "
                    "interface usnic_3 (default)");
}

/* A module as module_new leaves it, on an address no interface here has
 * (TEST-NET-1) and an interface name sysfs does not know, with the
 * fi_info its fabric was opened from */
typedef struct fake_module_t {
    opal_btl_usnic_module_t m;
    struct fi_info info;
    struct fi_fabric_attr fattr;
} fake_module_t;

static void module_init_fake(fake_module_t *fm)
{
    memset(fm, 0, sizeof(*fm));
    fm->fattr.name = "192.0.2.0/26";
    fm->info.fabric_attr = &fm->fattr;
    fm->m.ipv4 = mask_of("192.0.2.77");
    fm->m.if_name = strdup("usnic-test-9");
    fm->m.domain_name = strdup("usnic_9");
    fm->m.netmask = mask_of("255.0.0.0"); /* what neither source says */
    fm->m.link_speed_mbps = 777;
    opal_btl_usnic_globals.link_speed_default = 12345;
    opal_btl_usnic_globals.output = -1;
}

static void module_fini_fake(fake_module_t *fm)
{
    free(fm->m.if_name);
    free(fm->m.domain_name);
}

static void test_refine_module_from_extension(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    fake_module_t fm;
    module_init_fake(&fm);
    opal_btl_usnic_if_facts_t f;
    opal_btl_usnic_ext_refine(&fm.m, &ff.fabric, &fm.info, &f);
    CHECK_EQ(ff.prov.getinfo_calls, 1);
    CHECK_EQ_U(fm.m.netmask, mask_of("255.255.255.0"));
    CHECK_EQ_U(fm.m.link_speed_mbps, 40000u);
    CHECK_STR(fm.m.if_name, "eth4");
    CHECK_EQ(f.netmask_src, OPAL_BTL_USNIC_FACT_EXTENSION);
    CHECK_EQ(f.link_speed_src, OPAL_BTL_USNIC_FACT_EXTENSION);
    CHECK_EQ(f.if_name_src, OPAL_BTL_USNIC_FACT_EXTENSION);
    module_fini_fake(&fm);
}

static void test_refine_module_without_extension(void)
{
    fake_fabric_t ff;
    fake_init(&ff);
    ff.prov.ops_open_rc = -FI_ENOSYS;
    fake_module_t fm;
    module_init_fake(&fm);
    opal_btl_usnic_if_facts_t f;
    opal_btl_usnic_ext_refine(&fm.m, &ff.fabric, &fm.info, &f);
    CHECK_EQ_U(fm.m.netmask, mask_of("255.255.255.192"));
    CHECK_EQ(f.netmask_src, OPAL_BTL_USNIC_FACT_FABRIC_NAME);
    CHECK_EQ_U(fm.m.link_speed_mbps, 12345u);
    CHECK_EQ(f.link_speed_src, OPAL_BTL_USNIC_FACT_DEFAULT);
    CHECK_STR(fm.m.if_name, "usnic-test-9");
    CHECK_EQ(f.if_name_src, OPAL_BTL_USNIC_FACT_DEFAULT);

    /* a fabric name without a prefix: the default netmask */
    fm.fattr.name = "udp";
    opal_btl_usnic_ext_refine(&fm.m, &ff.fabric, &fm.info, &f);
    CHECK_EQ_U(fm.m.netmask, mask_of("255.255.255.0"));
    CHECK_EQ(f.netmask_src, OPAL_BTL_USNIC_FACT_DEFAULT);
    module_fini_fake(&fm);
}

UNIT_MAIN(UNIT_TEST(test_standin_layout), UNIT_TEST(test_query_reads_extension), UNIT_TEST(test_extension_wins),
          UNIT_TEST(test_no_extension_uses_fallbacks), UNIT_TEST(test_zero_facts_fall_back_one_by_one),
          UNIT_TEST(test_enosys_not_available), UNIT_TEST(test_no_table_not_available),
          UNIT_TEST(test_small_ops_table_not_available), UNIT_TEST(test_fid_ops_without_ops_open),
          UNIT_TEST(test_getinfo_failure_not_available), UNIT_TEST(test_empty_reply_not_available),
          UNIT_TEST(test_unterminated_ifname), UNIT_TEST(test_describe_names_sources),
          UNIT_TEST(test_refine_module_from_extension), UNIT_TEST(test_refine_module_without_extension))
