/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The pure parts of the socket wire's batches (btl_usnic_batch.[ch]), one
 * table per function:
 *
 *  - opal_btl_usnic_gso_path_init / _path_on: the limits a path starts with;
 *  - opal_btl_usnic_gso_run: how many of the datagrams queued for one peer
 *    go in one UDP_SEGMENT send (the first sets the segment size, later
 *    ones may not be longer, a shorter one ends the run; at most max_segs
 *    datagrams and max_bytes bytes; 1 without offload), at the kernel's
 *    boundaries (64 segments, 65507 bytes);
 *  - opal_btl_usnic_gso_failed: the verdict on a failed offload send and
 *    what it does to the path, alone and as the sequences a path goes
 *    through when the same failure repeats (plan, fail, plan again) down
 *    to OFF, with every RETRY and OFF counted as a fallback;
 *  - opal_btl_usnic_gro_split: a coalesced receive cut back into its
 *    datagrams, with and without the UDP_GRO cmsg, exact multiples and a
 *    remainder, truncated at every offset around the segment boundaries,
 *    and more datagrams than spans.
 *
 * No socket, no engine: these functions take numbers and return numbers.
 */
#include "unit.h"

#include <errno.h>

#include "btl_usnic_batch.h"

/* The kernel's own "not supported" (include/linux/errno.h), which user
 * space sees but glibc does not name */
#define KERNEL_ENOTSUPP 524

#define MAXB OPAL_BTL_USNIC_UDP_MAX_PAYLOAD /* 65507 */
#define MAXS OPAL_BTL_USNIC_GSO_MAX_SEGS    /* 64 */

static opal_btl_usnic_gso_path_t path_of(uint16_t max_segs, uint32_t max_bytes)
{
    opal_btl_usnic_gso_path_t p;
    p.max_segs = max_segs;
    p.max_bytes = max_bytes;
    p.fallbacks = 0;
    return p;
}

/* ---------------- path ---------------- */

static void test_gso_path_init(void)
{
    opal_btl_usnic_gso_path_t p;
    memset(&p, 0xa5, sizeof(p)); /* every field is set, none left over */
    opal_btl_usnic_gso_path_init(&p, true);
    CHECK_EQ(p.max_segs, 64);
    CHECK_EQ(p.max_bytes, 65507);
    CHECK_EQ(p.fallbacks, 0);
    CHECK(opal_btl_usnic_gso_path_on(&p));

    memset(&p, 0xa5, sizeof(p));
    opal_btl_usnic_gso_path_init(&p, false);
    CHECK_EQ(p.max_segs, 0);
    CHECK_EQ(p.max_bytes, 65507);
    CHECK_EQ(p.fallbacks, 0);
    CHECK(!opal_btl_usnic_gso_path_on(&p));

    /* "0 or 1 = no offload" */
    static const struct {
        uint16_t segs;
        bool on;
    } on[] = {{0, false}, {1, false}, {2, true}, {3, true}, {64, true}, {128, true}, {UINT16_MAX, true}};
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); ++i) {
        opal_btl_usnic_gso_path_t q = path_of(on[i].segs, MAXB);
        if (!CHECK_EQ(opal_btl_usnic_gso_path_on(&q), on[i].on)) {
            fprintf(stderr, "  max_segs %u\n", on[i].segs);
        }
    }
}

/* ---------------- gso_run ---------------- */

#define RUN_MAX 80

/* lens: |n| datagrams made of up to three blocks of equal lengths
 * (count1 x len1, count2 x len2, count3 x len3) */
typedef struct {
    const char *name;
    uint16_t max_segs;
    uint32_t max_bytes;
    unsigned count1;
    uint32_t len1;
    unsigned count2;
    uint32_t len2;
    unsigned count3;
    uint32_t len3;
    unsigned expect;
} run_case_t;

static const run_case_t run_cases[] = {
    /* no offload: always one datagram at a time */
    {"no offload (max_segs 0), 10 equal", 0, MAXB, 10, 1472, 0, 0, 0, 0, 1},
    {"no offload (max_segs 1), 10 equal", 1, MAXB, 10, 1472, 0, 0, 0, 0, 1},
    {"no offload, one datagram", 0, MAXB, 1, 1472, 0, 0, 0, 0, 1},
    /* a single datagram is a run of one */
    {"one datagram", 64, MAXB, 1, 1472, 0, 0, 0, 0, 1},
    {"one datagram of 65507", 64, MAXB, 1, 65507, 0, 0, 0, 0, 1},
    /* equal lengths */
    {"2 equal", 64, MAXB, 2, 1472, 0, 0, 0, 0, 2},
    {"10 equal", 64, MAXB, 10, 1472, 0, 0, 0, 0, 10},
    {"max_segs 2: 10 equal", 2, MAXB, 10, 100, 0, 0, 0, 0, 2},
    /* the segment cap: 64 */
    {"63 of 1000", 64, MAXB, 63, 1000, 0, 0, 0, 0, 63},
    {"64 of 1000", 64, MAXB, 64, 1000, 0, 0, 0, 0, 64},
    {"65 of 1000: 64", 64, MAXB, 65, 1000, 0, 0, 0, 0, 64},
    {"80 of 52 (headers only): 64", 64, MAXB, 80, 52, 0, 0, 0, 0, 64},
    {"a lowered cap, 32: 40 of 1000", 32, MAXB, 40, 1000, 0, 0, 0, 0, 32},
    {"a raised cap, 80: 80 of 100", 80, MAXB, 80, 100, 0, 0, 0, 0, 80},
    /* the byte cap: 65507 */
    {"44 of 1472 (64768 bytes)", 64, MAXB, 44, 1472, 0, 0, 0, 0, 44},
    {"45 of 1472 (66240 > 65507): 44", 64, MAXB, 45, 1472, 0, 0, 0, 0, 44},
    {"13 of 5039: exactly 65507", 64, MAXB, 13, 5039, 0, 0, 0, 0, 13},
    {"14 of 5039: 13", 64, MAXB, 14, 5039, 0, 0, 0, 0, 13},
    {"13 of 5040 (65520): 12", 64, MAXB, 13, 5040, 0, 0, 0, 0, 12},
    {"64 of 1023 (65472): both caps hold", 64, MAXB, 64, 1023, 0, 0, 0, 0, 64},
    {"64 of 1024 (65536): 63", 64, MAXB, 64, 1024, 0, 0, 0, 0, 63},
    {"44 of 1472 + 739: exactly 65507", 64, MAXB, 44, 1472, 1, 739, 0, 0, 45},
    {"44 of 1472 + 740: one byte too many", 64, MAXB, 44, 1472, 1, 740, 0, 0, 44},
    {"2 of 32768 (65536): 1", 64, MAXB, 2, 32768, 0, 0, 0, 0, 1},
    {"2 of 32753 (65506)", 64, MAXB, 2, 32753, 0, 0, 0, 0, 2},
    {"65000 + 507: exactly 65507 (loopback MTU)", 64, MAXB, 1, 65000, 1, 507, 0, 0, 2},
    {"65000 + 508", 64, MAXB, 1, 65000, 1, 508, 0, 0, 1},
    /* a lowered byte cap: a run stops at max_bytes exactly */
    {"max_bytes 5000: 10 of 1000 -> exactly 5000", 64, 5000, 10, 1000, 0, 0, 0, 0, 5},
    {"max_bytes 4999: 10 of 1000", 64, 4999, 10, 1000, 0, 0, 0, 0, 4},
    {"max_bytes 5001: 10 of 1000", 64, 5001, 10, 1000, 0, 0, 0, 0, 5},
    {"max_bytes 5000: 4 of 1000 + 1000", 64, 5000, 4, 1000, 1, 1000, 0, 0, 5},
    {"max_bytes 4500: 4 of 1000 + 500 (short, fits exactly)", 64, 4500, 4, 1000, 1, 500, 0, 0, 5},
    {"max_bytes 4500: 4 of 1000 + 501", 64, 4500, 4, 1000, 1, 501, 0, 0, 4},
    {"max_bytes below the first datagram: it goes alone", 64, 1000, 3, 1472, 0, 0, 0, 0, 1},
    {"max_bytes of one datagram exactly", 64, 1472, 3, 1472, 0, 0, 0, 0, 1},
    {"max_bytes of two datagrams exactly", 64, 2944, 3, 1472, 0, 0, 0, 0, 2},
    /* a shorter datagram ends the run (it is its last) */
    {"3 of 1472, 100, 3 of 1472", 64, MAXB, 3, 1472, 1, 100, 3, 1472, 4},
    {"1472, 1471 (one byte shorter), 1472", 64, MAXB, 1, 1472, 1, 1471, 1, 1472, 2},
    {"10 of 1000, then 10 of 999", 64, MAXB, 10, 1000, 10, 999, 0, 0, 11},
    {"shorter last of all", 64, MAXB, 5, 1000, 1, 1, 0, 0, 6},
    {"the first is the shortest: alone", 64, MAXB, 1, 100, 5, 1472, 0, 0, 1},
    /* a longer datagram is not taken (the segment size is the first's) */
    {"3 of 1000, then 1001", 64, MAXB, 3, 1000, 1, 1001, 0, 0, 3},
    {"1000 then 1472s", 64, MAXB, 1, 1000, 5, 1472, 0, 0, 1},
    /* the cap of segments hit by a short last one */
    {"63 of 1000 + 500", 64, MAXB, 63, 1000, 1, 500, 0, 0, 64},
    {"64 of 1000 + 500: 64", 64, MAXB, 64, 1000, 1, 500, 0, 0, 64},
};

static void test_gso_run_table(void)
{
    for (size_t i = 0; i < sizeof(run_cases) / sizeof(run_cases[0]); ++i) {
        const run_case_t *c = &run_cases[i];
        uint32_t lens[RUN_MAX];
        unsigned n = 0;
        for (unsigned k = 0; k < c->count1; ++k) {
            lens[n++] = c->len1;
        }
        for (unsigned k = 0; k < c->count2; ++k) {
            lens[n++] = c->len2;
        }
        for (unsigned k = 0; k < c->count3; ++k) {
            lens[n++] = c->len3;
        }
        REQUIRE(n <= RUN_MAX);
        /* exactly |n| readable lengths: ASan sees a read past them */
        uint32_t *exact = (uint32_t *) malloc(n * sizeof(*exact));
        memcpy(exact, lens, n * sizeof(*exact));
        opal_btl_usnic_gso_path_t p = path_of(c->max_segs, c->max_bytes);
        opal_btl_usnic_gso_path_t before = p;
        unsigned got = opal_btl_usnic_gso_run(&p, exact, n);
        if (!CHECK_EQ(got, c->expect)) {
            fprintf(stderr, "  case \"%s\"\n", c->name);
        }
        CHECK_MEM(&p, &before, sizeof(p)); /* planning changes nothing */
        free(exact);
    }
}

/* Properties over random queues: a run is never empty, never longer than
 * the queue or the caps, its datagrams all have the first one's length but
 * possibly the last (shorter), and it is maximal (the next datagram would
 * break one of the rules) */
static void test_gso_run_properties(void)
{
    uint64_t state = 0x1234567;
    static const uint32_t sizes[] = {52, 100, 1000, 1471, 1472, 1472, 1472, 8000, 9000, 32000, 65000};
    for (int iter = 0; iter < 4000; ++iter) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t) (state >> 33);
        unsigned n = 1 + r % RUN_MAX;
        uint16_t max_segs = (uint16_t) ((r >> 8) % 3 == 0 ? (r >> 12) % 70 : MAXS);
        uint32_t max_bytes = ((r >> 16) % 3 == 0) ? 1 + (r >> 4) % MAXB : MAXB;
        uint32_t lens[RUN_MAX];
        uint32_t base = sizes[(r >> 20) % (sizeof(sizes) / sizeof(sizes[0]))];
        for (unsigned i = 0; i < n; ++i) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t x = (uint32_t) (state >> 33);
            lens[i] = (x % 8 == 0) ? 1 + x % (base + 10) : base; /* mostly equal, some shorter or longer */
        }
        opal_btl_usnic_gso_path_t p = path_of(max_segs, max_bytes);
        unsigned k = opal_btl_usnic_gso_run(&p, lens, n);
        bool ok = CHECK(k >= 1 && k <= n);
        if (!opal_btl_usnic_gso_path_on(&p)) {
            ok = CHECK_EQ(k, 1) && ok;
        }
        if (k > 1) {
            uint64_t total = 0;
            for (unsigned i = 0; i < k; ++i) {
                total += lens[i];
                ok = CHECK_LE_U(lens[i], lens[0]) && ok;
                if (i + 1 < k) {
                    ok = CHECK_EQ(lens[i], lens[0]) && ok; /* only the last may be shorter */
                }
            }
            ok = CHECK_LE_U(total, max_bytes) && ok;
            ok = CHECK_LE_U(k, max_segs) && ok;
        }
        if (k < n && opal_btl_usnic_gso_path_on(&p)) {
            /* maximal: why not one more? */
            uint64_t total = 0;
            for (unsigned i = 0; i <= k; ++i) {
                total += lens[i];
            }
            bool stop = k >= max_segs || lens[k] > lens[0] || total > max_bytes || lens[k - 1] < lens[0];
            ok = CHECK(stop) && ok;
        }
        if (!ok) {
            fprintf(stderr, "  iteration %d: n %u, max_segs %u, max_bytes %u, run %u\n", iter, n, max_segs,
                    max_bytes, k);
            return;
        }
    }
}

/* ---------------- gso_failed ---------------- */

#define V_RETRY OPAL_BTL_USNIC_GSO_RETRY
#define V_OFF OPAL_BTL_USNIC_GSO_OFF
#define V_NOT_OURS OPAL_BTL_USNIC_GSO_NOT_OURS

typedef struct {
    const char *name;
    uint16_t max_segs;   /* path before */
    uint32_t max_bytes;
    int err;
    unsigned segs;       /* the failed send */
    size_t bytes;
    int expect;          /* verdict */
    uint16_t max_segs_after;
    uint32_t max_bytes_after;
} fail_case_t;

static const fail_case_t fail_cases[] = {
    /* the route cannot offload at all: off at once, whatever the run */
    {"EIO, 44 segments", 64, MAXB, EIO, 44, 44 * 1472, V_OFF, 0, MAXB},
    {"EIO, 2 segments", 64, MAXB, EIO, 2, 2944, V_OFF, 0, MAXB},
    {"ENOPROTOOPT", 64, MAXB, ENOPROTOOPT, 10, 14720, V_OFF, 0, MAXB},
    {"EOPNOTSUPP", 64, MAXB, EOPNOTSUPP, 10, 14720, V_OFF, 0, MAXB},
    {"ENOTSUPP (524)", 64, MAXB, KERNEL_ENOTSUPP, 10, 14720, V_OFF, 0, MAXB},
    {"EIO on a lowered path keeps its byte cap", 8, 20000, EIO, 8, 8000, V_OFF, 0, 20000},
    /* EINVAL: halve the segment cap (of the failed run) while it had more than 2 */
    {"EINVAL, 64 segments", 64, MAXB, EINVAL, 64, 64000, V_RETRY, 32, MAXB},
    {"EINVAL, 44 segments", 64, MAXB, EINVAL, 44, 44 * 1472, V_RETRY, 22, MAXB},
    {"EINVAL, 5 segments", 64, MAXB, EINVAL, 5, 5000, V_RETRY, 2, MAXB},
    {"EINVAL, 4 segments", 64, MAXB, EINVAL, 4, 4000, V_RETRY, 2, MAXB},
    {"EINVAL, 3 segments: half the cap is 1 (no offload): off", 64, MAXB, EINVAL, 3, 3000, V_OFF, 0, MAXB},
    {"EINVAL, 2 segments: off", 64, MAXB, EINVAL, 2, 2000, V_OFF, 0, MAXB},
    {"EINVAL keeps the byte cap", 64, 30000, EINVAL, 20, 20000, V_RETRY, 10, 30000},
    /* EMSGSIZE: halve the byte cap while two segments still fit it */
    {"EMSGSIZE, 44 x 1472", 64, MAXB, EMSGSIZE, 44, 44 * 1472, V_RETRY, 64, 44 * 736},
    {"EMSGSIZE, 4 x 1000: 2000 holds two", 64, MAXB, EMSGSIZE, 4, 4000, V_RETRY, 64, 2000},
    {"EMSGSIZE, 3 x 1000: 1500 holds one: off", 64, MAXB, EMSGSIZE, 3, 3000, V_OFF, 0, MAXB},
    {"EMSGSIZE, 2 segments: off", 64, MAXB, EMSGSIZE, 2, 2944, V_OFF, 0, MAXB},
    {"EMSGSIZE, 5 x 1000: 2500", 64, MAXB, EMSGSIZE, 5, 5000, V_RETRY, 64, 2500},
    {"EMSGSIZE keeps the segment cap", 16, MAXB, EMSGSIZE, 16, 16000, V_RETRY, 16, 8000},
    /* anything else is not the offload's doing: nothing changes, nothing counted */
    {"EAGAIN (socket buffer full)", 64, MAXB, EAGAIN, 44, 44 * 1472, V_NOT_OURS, 64, MAXB},
    {"EWOULDBLOCK", 64, MAXB, EWOULDBLOCK, 44, 44 * 1472, V_NOT_OURS, 64, MAXB},
    {"ENOBUFS", 64, MAXB, ENOBUFS, 10, 14720, V_NOT_OURS, 64, MAXB},
    {"ECONNREFUSED (an earlier ICMP error)", 64, MAXB, ECONNREFUSED, 10, 14720, V_NOT_OURS, 64, MAXB},
    {"EHOSTUNREACH", 64, MAXB, EHOSTUNREACH, 10, 14720, V_NOT_OURS, 64, MAXB},
    {"ENETUNREACH", 64, MAXB, ENETUNREACH, 10, 14720, V_NOT_OURS, 64, MAXB},
    {"EPERM (a firewall)", 64, MAXB, EPERM, 10, 14720, V_NOT_OURS, 64, MAXB},
    {"EINTR", 64, MAXB, EINTR, 10, 14720, V_NOT_OURS, 64, MAXB},
    {"errno 0", 64, MAXB, 0, 10, 14720, V_NOT_OURS, 64, MAXB},
    {"EBADF", 64, MAXB, EBADF, 10, 14720, V_NOT_OURS, 64, MAXB},
};

static void test_gso_failed_table(void)
{
    for (size_t i = 0; i < sizeof(fail_cases) / sizeof(fail_cases[0]); ++i) {
        const fail_case_t *c = &fail_cases[i];
        opal_btl_usnic_gso_path_t p = path_of(c->max_segs, c->max_bytes);
        p.fallbacks = 3; /* counts on from where it was */
        /* every row's run is of equal datagrams but maybe the last: the segment size rounds up */
        size_t seg = (c->bytes + c->segs - 1) / c->segs;
        int v = (int) opal_btl_usnic_gso_failed(&p, c->err, c->segs, seg, c->bytes);
        bool ok = CHECK_EQ(v, c->expect);
        ok = CHECK_EQ(p.max_segs, c->max_segs_after) && ok;
        ok = CHECK_EQ(p.max_bytes, c->max_bytes_after) && ok;
        ok = CHECK_EQ(p.fallbacks, (V_NOT_OURS == c->expect) ? 3 : 4) && ok; /* every RETRY and OFF counts */
        if (V_OFF == c->expect) {
            ok = CHECK(!opal_btl_usnic_gso_path_on(&p)) && ok;
        }
        if (!ok) {
            fprintf(stderr, "  case \"%s\"\n", c->name);
        }
    }
}

/* What the socket wire does (send_some): plan a run of |n| datagrams of
 * |lens|, "send" it, and while the kernel answers |err| to every offload
 * send, take the verdict and plan again; stops at OFF or when a run is a
 * single datagram.  Records the runs tried and the verdicts. */
typedef struct {
    unsigned runs[16];
    int verdicts[16];
    unsigned steps;
    opal_btl_usnic_gso_path_t path;
} fall_t;

static fall_t fall_down(const uint32_t *lens, unsigned n, int err)
{
    fall_t f;
    memset(&f, 0, sizeof(f));
    opal_btl_usnic_gso_path_init(&f.path, true);
    for (;;) {
        unsigned k = opal_btl_usnic_gso_run(&f.path, lens, n);
        if (k < 2 || f.steps == 16) {
            break;
        }
        size_t bytes = 0;
        for (unsigned i = 0; i < k; ++i) {
            bytes += lens[i];
        }
        f.runs[f.steps] = k;
        f.verdicts[f.steps] = (int) opal_btl_usnic_gso_failed(&f.path, err, k, lens[0], bytes);
        ++f.steps;
        if (V_RETRY != f.verdicts[f.steps - 1]) {
            break;
        }
    }
    return f;
}

/* Sequences of the same failure down to OFF, every step a counted fallback */
static void test_gso_failed_sequences(void)
{
    uint32_t lens[64];
    for (int i = 0; i < 64; ++i) {
        lens[i] = 1000;
    }
    /* EINVAL (a kernel that cuts fewer segments, or never): 64, 32, 16,
     * 8, 4, 2 segments, then off */
    fall_t f = fall_down(lens, 64, EINVAL);
    static const unsigned einval_runs[] = {64, 32, 16, 8, 4, 2};
    REQUIRE_EQ(f.steps, 6);
    for (unsigned i = 0; i < 6; ++i) {
        CHECK_EQ(f.runs[i], einval_runs[i]);
        CHECK_EQ(f.verdicts[i], i < 5 ? V_RETRY : V_OFF);
    }
    CHECK_EQ(f.path.fallbacks, 6);
    CHECK(!opal_btl_usnic_gso_path_on(&f.path));
    CHECK_EQ(opal_btl_usnic_gso_run(&f.path, lens, 64), 1);

    /* a kernel that takes 8: RETRY 64 -> 32 -> 16 -> 8, then it works */
    opal_btl_usnic_gso_path_t p;
    opal_btl_usnic_gso_path_init(&p, true);
    unsigned k;
    unsigned fails = 0;
    while ((k = opal_btl_usnic_gso_run(&p, lens, 64)) > 8) {
        CHECK_EQ(opal_btl_usnic_gso_failed(&p, EINVAL, k, 1000, (size_t) k * 1000), V_RETRY);
        ++fails;
    }
    CHECK_EQ(fails, 3);
    CHECK_EQ(k, 8);
    CHECK_EQ(p.fallbacks, 3);
    CHECK(opal_btl_usnic_gso_path_on(&p));

    /* EMSGSIZE with 44 x 1472 (the socket wire's batch on a 1500 MTU):
     * byte caps 32384 (22 segments), 16192 (11), 8096 (5), 3680 (2), off */
    for (int i = 0; i < 64; ++i) {
        lens[i] = 1472;
    }
    f = fall_down(lens, 44, EMSGSIZE);
    static const unsigned emsg_runs[] = {44, 22, 11, 5, 2};
    REQUIRE_EQ(f.steps, 5);
    for (unsigned i = 0; i < 5; ++i) {
        CHECK_EQ(f.runs[i], emsg_runs[i]);
        CHECK_EQ(f.verdicts[i], i < 4 ? V_RETRY : V_OFF);
    }
    CHECK_EQ(f.path.fallbacks, 5);
    CHECK(!opal_btl_usnic_gso_path_on(&f.path));

    /* EIO: off at the first failure */
    f = fall_down(lens, 44, EIO);
    CHECK_EQ(f.steps, 1);
    CHECK_EQ(f.verdicts[0], V_OFF);
    CHECK_EQ(f.path.fallbacks, 1);

    /* a path that is off stays off: gso_run plans single datagrams */
    CHECK_EQ(opal_btl_usnic_gso_run(&f.path, lens, 44), 1);

    /* NOT_OURS repeated: nothing ever changes */
    opal_btl_usnic_gso_path_init(&p, true);
    for (int i = 0; i < 10; ++i) {
        CHECK_EQ(opal_btl_usnic_gso_failed(&p, EAGAIN, 44, 1472, 44 * 1472), V_NOT_OURS);
    }
    CHECK_EQ(p.max_segs, 64);
    CHECK_EQ(p.max_bytes, 65507);
    CHECK_EQ(p.fallbacks, 0);

    /* mixed: EINVAL halves, EMSGSIZE halves the bytes of the smaller run, EIO ends it */
    opal_btl_usnic_gso_path_init(&p, true);
    CHECK_EQ(opal_btl_usnic_gso_failed(&p, EINVAL, 44, 1472, 44 * 1472), V_RETRY);
    CHECK_EQ(p.max_segs, 22);
    k = opal_btl_usnic_gso_run(&p, lens, 44);
    CHECK_EQ(k, 22);
    CHECK_EQ(opal_btl_usnic_gso_failed(&p, EMSGSIZE, k, 1472, (size_t) k * 1472), V_RETRY);
    CHECK_EQ(p.max_bytes, 11 * 1472);
    CHECK_EQ(opal_btl_usnic_gso_run(&p, lens, 44), 11);
    CHECK_EQ(opal_btl_usnic_gso_failed(&p, EIO, 11, 1472, 11 * 1472), V_OFF);
    CHECK_EQ(p.fallbacks, 3);
    CHECK_EQ(opal_btl_usnic_gso_run(&p, lens, 44), 1);

    /* EINVAL on a run of 3: half the cap would be 1, no offload: off */
    opal_btl_usnic_gso_path_init(&p, true);
    CHECK_EQ(opal_btl_usnic_gso_failed(&p, EINVAL, 3, 1000, 3000), V_OFF);
    CHECK(!opal_btl_usnic_gso_path_on(&p));
    CHECK_EQ(opal_btl_usnic_gso_run(&p, lens, 44), 1);
}

/*
 * Regression (an engine bug this test found): EMSGSIZE on a run whose
 * last datagram is shorter than the others once "halved" the byte cap
 * below two segments and still answered RETRY, because the verdict
 * compared the halved cap with two *average* datagrams; the segment size
 * of a run is its first datagram's length.  For 4 segments (1000, 1000,
 * 1000, 999; 3999 bytes) the cap would be 1999, one datagram: OFF.
 */
static void test_gso_emsgsize_short_last_datagram(void)
{
    static const uint32_t lens[4] = {1000, 1000, 1000, 999};
    opal_btl_usnic_gso_path_t p;
    opal_btl_usnic_gso_path_init(&p, true);
    unsigned k = opal_btl_usnic_gso_run(&p, lens, 4);
    REQUIRE_EQ(k, 4);
    opal_btl_usnic_gso_verdict_t v = opal_btl_usnic_gso_failed(&p, EMSGSIZE, k, lens[0], 3999);
    if (V_RETRY == v) {
        /* a RETRY must leave a path on which the same datagrams form a run */
        if (!CHECK_GE(opal_btl_usnic_gso_run(&p, lens, 4), 2)) {
            fprintf(stderr, "  RETRY with max_bytes %u, max_segs %u: the next run is a single datagram\n",
                    (unsigned) p.max_bytes, (unsigned) p.max_segs);
        }
    } else {
        CHECK_EQ(v, V_OFF);
    }
}

/* ---------------- gro_split ---------------- */

#define SPAN_MAX 160

/* The spans gro_split must give, computed the slow way: datagrams of |seg|
 * bytes (the last one shorter), each kept iff all its bytes were stored
 * and a span is left; *lost_p = the others */
static unsigned gro_expect(size_t len, size_t stored, size_t seg, unsigned max, opal_btl_usnic_span_t *spans,
                           unsigned *lost_p)
{
    if (0 == len) {
        *lost_p = 0;
        if (0 == max) {
            return 0;
        }
        spans[0].off = spans[0].len = 0;
        return 1;
    }
    if (0 == seg || seg > len) {
        seg = len;
    }
    unsigned n = 0, lost = 0;
    size_t count = (len + seg - 1) / seg;
    for (size_t i = 0; i < count; ++i) {
        size_t off = i * seg;
        size_t piece = (len - off < seg) ? len - off : seg;
        if (off + piece <= stored && n < max) {
            spans[n].off = (uint32_t) off;
            spans[n].len = (uint32_t) piece;
            ++n;
        } else {
            ++lost;
        }
    }
    *lost_p = lost;
    return n;
}

/* gro_split against the table or the slow way; |spans| of exactly |max| entries for ASan */
static bool gro_check(const char *what, size_t len, size_t stored, size_t seg, unsigned max, unsigned want_n,
                      unsigned want_lost, const opal_btl_usnic_span_t *want)
{
    opal_btl_usnic_span_t *spans = (opal_btl_usnic_span_t *) malloc((max ? max : 1) * sizeof(*spans));
    unsigned lost = 12345;
    unsigned n = opal_btl_usnic_gro_split(len, stored, seg, spans, max, &lost);
    bool ok = CHECK_EQ(n, want_n);
    ok = CHECK_EQ(lost, want_lost) && ok;
    for (unsigned i = 0; ok && i < n; ++i) {
        ok = CHECK_EQ(spans[i].off, want[i].off) && ok;
        ok = CHECK_EQ(spans[i].len, want[i].len) && ok;
    }
    if (!ok) {
        fprintf(stderr, "  %s: len %zu, stored %zu, seg %zu, max %u\n", what, len, stored, seg, max);
    }
    free(spans);
    return ok;
}

typedef struct {
    const char *name;
    size_t len, stored, seg;
    unsigned max;
    unsigned n, lost;
    uint32_t first_len, last_len; /* of spans[0] and spans[n - 1] (n > 0) */
} gro_case_t;

static const gro_case_t gro_cases[] = {
    /* without cmsg (seg 0): one datagram */
    {"no cmsg: one datagram", 1472, 1472, 0, 128, 1, 0, 1472, 1472},
    {"no cmsg: a header alone", 52, 52, 0, 128, 1, 0, 52, 52},
    {"no cmsg: 65000 bytes", 65000, 65000, 0, 128, 1, 0, 65000, 65000},
    {"no cmsg: cut short, lost whole", 70000, 65536, 0, 128, 0, 1, 0, 0},
    {"no cmsg: one byte short, lost whole", 1473, 1472, 0, 128, 0, 1, 0, 0},
    {"no cmsg: one span is enough", 1472, 1472, 0, 1, 1, 0, 1472, 1472},
    /* an empty datagram: one empty span (the engine drops it as truncated) */
    {"empty datagram", 0, 0, 0, 128, 1, 0, 0, 0},
    {"empty datagram, cmsg", 0, 0, 1472, 128, 1, 0, 0, 0},
    /* a cmsg of the whole length or more: one datagram */
    {"seg = len", 1472, 1472, 1472, 128, 1, 0, 1472, 1472},
    {"seg > len", 1000, 1000, 1472, 128, 1, 0, 1000, 1000},
    /* exact multiples */
    {"2 x 1472", 2944, 2944, 1472, 128, 2, 0, 1472, 1472},
    {"44 x 1472", 44 * 1472, 44 * 1472, 1472, 128, 44, 0, 1472, 1472},
    {"64 x 1000", 64000, 64000, 1000, 128, 64, 0, 1000, 1000},
    {"65536 in 1-byte datagrams, 128 spans: 65408 lost", 65536, 65536, 1, 128, 128, 65408, 1, 1},
    /* a remainder: the last datagram is shorter */
    {"3 x 1472 + 100", 3 * 1472 + 100, 3 * 1472 + 100, 1472, 128, 4, 0, 1472, 100},
    {"1472 + 1", 1473, 1473, 1472, 128, 2, 0, 1472, 1},
    {"44 x 1472 + 739 (65507)", 65507, 65507, 1472, 128, 45, 0, 1472, 739},
    /* the kernel cut it short: whole datagrams only */
    {"4 x 1000, 3999 stored", 4000, 3999, 1000, 128, 3, 1, 1000, 1000},
    {"4 x 1000, 3001 stored", 4000, 3001, 1000, 128, 3, 1, 1000, 1000},
    {"4 x 1000, 3000 stored", 4000, 3000, 1000, 128, 3, 1, 1000, 1000},
    {"4 x 1000, 2999 stored", 4000, 2999, 1000, 128, 2, 2, 1000, 1000},
    {"4 x 1000, 1000 stored", 4000, 1000, 1000, 128, 1, 3, 1000, 1000},
    {"4 x 1000, 999 stored", 4000, 999, 1000, 128, 0, 4, 0, 0},
    {"4 x 1000, nothing stored", 4000, 0, 1000, 128, 0, 4, 0, 0},
    {"3 x 1000 + 10, 3009 stored", 3010, 3009, 1000, 128, 3, 1, 1000, 1000},
    {"3 x 1000 + 10, 3010 stored", 3010, 3010, 1000, 128, 4, 0, 1000, 10},
    /* more datagrams than spans: the rest counted lost */
    {"130 x 100, 128 spans", 13000, 13000, 100, 128, 128, 2, 100, 100},
    {"128 x 100, 128 spans", 12800, 12800, 100, 128, 128, 0, 100, 100},
    {"129 x 100, 128 spans", 12900, 12900, 100, 128, 128, 1, 100, 100},
    {"10 x 100, 1 span", 1000, 1000, 100, 1, 1, 9, 100, 100},
    {"10 x 100, no span", 1000, 1000, 100, 0, 0, 10, 0, 0},
    {"10 x 100, 9 spans, cut at 850", 1000, 850, 100, 9, 8, 2, 100, 100},
    {"10 x 100, 5 spans, cut at 850", 1000, 850, 100, 5, 5, 5, 100, 100},
};

static void test_gro_split_table(void)
{
    for (size_t i = 0; i < sizeof(gro_cases) / sizeof(gro_cases[0]); ++i) {
        const gro_case_t *c = &gro_cases[i];
        opal_btl_usnic_span_t want[SPAN_MAX];
        unsigned want_lost;
        unsigned want_n = gro_expect(c->len, c->stored, c->seg, c->max, want, &want_lost);
        /* the table's numbers are what the slow way says, and so is gro_split */
        bool ok = CHECK_EQ(want_n, c->n);
        ok = CHECK_EQ(want_lost, c->lost) && ok;
        if (c->n > 0) {
            ok = CHECK_EQ(want[0].len, c->first_len) && ok;
            ok = CHECK_EQ(want[c->n - 1].len, c->last_len) && ok;
        }
        if (!ok) {
            fprintf(stderr, "  table case \"%s\"\n", c->name);
        }
        gro_check(c->name, c->len, c->stored, c->seg, c->max, c->n, c->lost, want);
    }
}

/* Cut short at every offset from one segment before to one after each
 * segment boundary, for several segment sizes and remainders, with and
 * without a span limit */
static void test_gro_split_every_truncation(void)
{
    static const struct {
        size_t seg;
        unsigned count;
        size_t rem;
    } shapes[] = {{1000, 4, 0}, {1000, 4, 1}, {1472, 3, 100}, {7, 9, 3}, {1, 20, 0}, {512, 5, 511}};
    static const unsigned maxes[] = {128, 3, 1};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); ++s) {
        size_t seg = shapes[s].seg, len = seg * shapes[s].count + shapes[s].rem;
        for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); ++m) {
            for (size_t stored = 0; stored <= len; ++stored) {
                /* around each boundary (every offset for small segments) */
                size_t to_boundary = stored % seg;
                if (seg > 8 && to_boundary > 2 && to_boundary < seg - 2 && stored != len && stored + 1 != len) {
                    continue;
                }
                opal_btl_usnic_span_t want[SPAN_MAX];
                unsigned want_lost;
                unsigned want_n = gro_expect(len, stored, seg, maxes[m], want, &want_lost);
                if (!gro_check("every truncation", len, stored, seg, maxes[m], want_n, want_lost, want)) {
                    return;
                }
                /* the spans and the lost ones add up to every datagram */
                size_t total = (len + seg - 1) / seg;
                CHECK_EQ(want_n + want_lost, total);
            }
        }
    }
}

/* Properties over random receives: spans in order, contiguous from 0,
 * inside the stored bytes, all of the segment size but the last datagram,
 * and spans + lost = datagrams */
static void test_gro_split_properties(void)
{
    uint64_t state = 99;
    for (int iter = 0; iter < 3000; ++iter) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t) (state >> 33);
        size_t len = 1 + r % 65536;
        size_t seg = (r >> 4) % 4 == 0 ? 0 : 1 + ((r >> 8) % 3000);
        size_t stored = (r >> 20) % 2 ? len : (r >> 3) % (len + 1);
        unsigned max = (r >> 22) % 2 ? 128 : 1 + (r >> 24) % 64;
        opal_btl_usnic_span_t spans[SPAN_MAX];
        unsigned lost;
        unsigned n = opal_btl_usnic_gro_split(len, stored, seg, spans, max, &lost);
        size_t eff = (0 == seg || seg > len) ? len : seg;
        size_t datagrams = (len + eff - 1) / eff;
        bool ok = CHECK_EQ(n + lost, datagrams);
        ok = CHECK_LE_U(n, max) && ok;
        for (unsigned i = 0; i < n; ++i) {
            ok = CHECK_EQ(spans[i].off, i * eff) && ok; /* contiguous from the start */
            ok = CHECK_LE_U(spans[i].off + spans[i].len, stored) && ok;
            size_t want_len = (len - spans[i].off < eff) ? len - spans[i].off : eff;
            ok = CHECK_EQ(spans[i].len, want_len) && ok;
        }
        if (!ok) {
            fprintf(stderr, "  iteration %d: len %zu, stored %zu, seg %zu, max %u\n", iter, len, stored, seg, max);
            return;
        }
    }
}

/* What the socket wire asks for: 128 spans (2 x 64) over a 64 KiB buffer */
static void test_gro_split_wire_sizes(void)
{
    opal_btl_usnic_span_t spans[2 * OPAL_BTL_USNIC_GSO_MAX_SEGS];
    unsigned lost;
    /* 44 x 1472 coalesced */
    unsigned n = opal_btl_usnic_gro_split(44 * 1472, 44 * 1472, 1472, spans, 128, &lost);
    CHECK_EQ(n, 44);
    CHECK_EQ(lost, 0);
    uint64_t sum = 0;
    for (unsigned i = 0; i < n; ++i) {
        sum += spans[i].len;
    }
    CHECK_EQ_U(sum, 44 * 1472);
    /* the largest receive of the smallest datagrams the engine sends (a
     * bare header, 52 bytes): 1259 datagrams in 65507 bytes, 128 spans */
    n = opal_btl_usnic_gro_split(65507, 65507, 52, spans, 128, &lost);
    CHECK_EQ(n, 128);
    CHECK_EQ(lost, 65507 / 52 + 1 - 128);
    CHECK_EQ(spans[127].off, 127 * 52);
}

UNIT_MAIN(UNIT_TEST(test_gso_path_init), UNIT_TEST(test_gso_run_table), UNIT_TEST(test_gso_run_properties),
          UNIT_TEST(test_gso_failed_table), UNIT_TEST(test_gso_failed_sequences),
          UNIT_TEST(test_gso_emsgsize_short_last_datagram), UNIT_TEST(test_gro_split_table),
          UNIT_TEST(test_gro_split_every_truncation), UNIT_TEST(test_gro_split_properties),
          UNIT_TEST(test_gro_split_wire_sizes))
