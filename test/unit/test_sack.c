/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Selective-ACK ranges (protocol version 4): the up to 8 runs {start, len}
 * an explicit ACK (opal_btl_usnic_ack_hdr_t, 88 bytes) carries of the
 * segments its sender holds beyond the first one it lacks.  A range covers
 * ack_seq + 2 + start ... ack_seq + 1 + start + len.
 *
 * Receiver (sack_ranges in btl_usnic_ack.c, built by ack_send from
 * ep->rx.rcvd between next_expected + 1 and ep->rx.highest): a table of
 * hole patterns received, then one progress pass, and the ranges decoded
 * from the bytes of the ACK the fixture recorded (one hole then a run,
 * several runs, more than 8 runs, a run up to the window's end, across the
 * 2^32 wrap, nothing beyond next_expected, duplicates and too-new segments
 * that change nothing).
 *
 * Sender (opal_btl_usnic_sack_ranges_take, called from recv.c for an ACK
 * whose cumulative ACK was taken): the ranges mark exactly the held
 * segments SACKED; every hole below the highest held segment is resent
 * only once it waited a round trip (fixture clock); a range beyond what was
 * sent marks nothing; a SACKED segment waiting on the resend list is dropped
 * from it unsent, and resend_away copies none; only the cumulative ACK
 * releases segments (SACKED ones stay until then); the ranges of a stale
 * ACK, or of one beyond anything sent, are not taken; an ACK claiming 9
 * ranges, or shorter than 88 bytes, is dropped; the ranges are inside what
 * the tag covers (protection full and header).  And the whole loop between
 * two fixture engines: what the receiver holds is what the sender marks.
 */
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define ISN 1000u
#define PEER_ISN 5000u
#define NR OPAL_BTL_USNIC_SACK_RANGES

/* ---------------- decoding an ACK ---------------- */

typedef struct {
    uint32_t ack;
    uint16_t sack;
    uint8_t flags;
    unsigned n;
    uint16_t start[NR], len[NR];
} ack_view_t;

/* The last explicit ACK |fx| posted, decoded from the recorded bytes */
static bool last_ack(fx_t *fx, ack_view_t *v)
{
    for (size_t i = fx->nposts; i-- > 0;) {
        const fx_post_t *p = &fx->posts[i];
        const opal_btl_usnic_hdr_t *h = fx_post_hdr(p);
        if (OPAL_BTL_USNIC_PKT_ACK != h->type) {
            continue;
        }
        bool ok = CHECK_EQ(p->len, FX_ACK_HDR);
        ok = CHECK_EQ(p->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL) && ok;
        ok = CHECK_EQ(opal_btl_usnic_hdr_check(p->bytes, p->len), OPAL_BTL_USNIC_VALID) && ok;
        const opal_btl_usnic_ack_hdr_t *a = (const opal_btl_usnic_ack_hdr_t *) p->bytes;
        memset(v, 0, sizeof(*v));
        v->ack = opal_btl_usnic_host32(h->ack_seq);
        v->sack = opal_btl_usnic_host16(h->sack);
        v->flags = h->flags;
        v->n = a->nranges;
        ok = CHECK_LE(v->n, NR) && ok;
        for (unsigned r = 0; r < NR; ++r) {
            if (r < v->n) {
                v->start[r] = opal_btl_usnic_host16(a->range[r].start);
                v->len[r] = opal_btl_usnic_host16(a->range[r].len);
            } else {
                /* unused ranges are zero (no stale bytes of an earlier ACK) */
                ok = CHECK_EQ(a->range[r].start, 0) && ok;
                ok = CHECK_EQ(a->range[r].len, 0) && ok;
            }
        }
        ok = CHECK_EQ(a->reserved[0] | a->reserved[1] | a->reserved[2], 0) && ok;
        return ok;
    }
    return false;
}

static unsigned count_acks(const fx_t *fx)
{
    return fx_count_posts(fx, -1, OPAL_BTL_USNIC_PKT_ACK);
}

/* ---------------- receiver: the ranges of the ACK it sends ---------------- */

#define MAXRX 80

typedef struct {
    const char *name;
    uint32_t window;
    uint32_t isn;          /* the peer's first sequence number */
    int rx[MAXRX];         /* offsets from isn received, in order; terminated by -1 */
    int ack;               /* expected cumulative ACK, as an offset from isn (-1: isn - 1) */
    unsigned n;            /* expected ranges */
    uint16_t start[NR], len[NR];
} rx_case_t;

#define END -1

static const rx_case_t rx_cases[] = {
    {"in order only: no ranges", 64, PEER_ISN, {0, 1, 2, END}, 2, 0, {0}, {0}},
    {"one hole, then a run", 64, PEER_ISN, {1, 2, 3, 4, 5, END}, -1, 1, {0}, {5}},
    {"a run in reverse order", 64, PEER_ISN, {5, 4, 3, 2, 1, END}, -1, 1, {0}, {5}},
    {"in order, then a hole and a run", 64, PEER_ISN, {0, 1, 3, 4, END}, 1, 1, {0}, {2}},
    {"a single segment past the hole", 64, PEER_ISN, {2, END}, -1, 1, {1}, {1}},
    {"several runs", 64, PEER_ISN, {0, 2, 3, 6, 9, 10, 11, END}, 0, 3, {0, 4, 7}, {2, 1, 3}},
    {"runs of one, exactly 8", 64, PEER_ISN, {1, 3, 5, 7, 9, 11, 13, 15, END}, -1, 8,
     {0, 2, 4, 6, 8, 10, 12, 14}, {1, 1, 1, 1, 1, 1, 1, 1}},
    {"10 runs: the first 8 only", 64, PEER_ISN, {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, END}, -1, 8,
     {0, 2, 4, 6, 8, 10, 12, 14}, {1, 1, 1, 1, 1, 1, 1, 1}},
    {"9 runs of varied length: the first 8", 64, PEER_ISN,
     {2, 3, 5, 8, 9, 10, 12, 20, 21, 30, 40, 41, 42, 43, 50, 60, END}, -1, 8, {1, 4, 7, 11, 19, 29, 39, 49},
     {2, 1, 3, 1, 2, 1, 4, 1}},
    {"the last slot of the window only", 64, PEER_ISN, {63, END}, -1, 1, {62}, {1}},
    {"a run up to the window's end", 64, PEER_ISN,
     {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
      22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42,
      43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, END},
     -1, 1, {0}, {63}},
    {"two runs, the second up to the window's end", 64, PEER_ISN,
     {1, 2, 3, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, END}, -1, 2, {0, 49}, {3, 14}},
    {"too new (beyond the window) is no range", 64, PEER_ISN, {1, 64, 70, END}, -1, 1, {0}, {1}},
    {"duplicates change nothing", 64, PEER_ISN, {2, 2, 3, 3, 2, END}, -1, 1, {1}, {2}},
    {"the hole filled: no ranges", 64, PEER_ISN, {1, 2, 3, 0, END}, 3, 0, {0}, {0}},
    {"the first hole filled, a second one left", 64, PEER_ISN, {2, 3, 5, 0, 1, END}, 3, 1, {0}, {1}},
    {"one of two holes filled", 64, PEER_ISN, {2, 3, 5, 0, END}, 0, 2, {0, 3}, {2, 1}},
    {"old copies after the hole filled", 64, PEER_ISN, {1, 0, 0, 1, END}, 1, 0, {0}, {0}},
    {"across 2^32: a hole just below", 64, 0xfffffffau, {0, 2, 3, 4, 5, 6, 7, 8, END}, 0, 1, {0}, {7}},
    {"across 2^32: runs on both sides", 64, 0xfffffffcu, {1, 2, 5, 6, 9, END}, -1, 3, {0, 4, 8}, {2, 2, 1}},
    {"across 2^32: hole at 2^32 - 1", 64, 0xfffffff0u, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, END},
     14, 1, {0}, {2}},
    {"across 2^32: hole at 0", 64, 0xfffffff0u, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18, END},
     15, 1, {0}, {2}},
    {"window 16, a run to its end", 16, PEER_ISN, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, END}, -1, 1,
     {0}, {15}},
    {"window 16, 8 runs to its end", 16, PEER_ISN, {1, 3, 5, 7, 9, 11, 13, 15, END}, -1, 8,
     {0, 2, 4, 6, 8, 10, 12, 14}, {1, 1, 1, 1, 1, 1, 1, 1}},
    {"window 4", 4, PEER_ISN, {1, 3, END}, -1, 2, {0, 2}, {1, 1}},
    {"window 2", 2, PEER_ISN, {1, END}, -1, 1, {0}, {1}},
    {"window 1: nothing beyond the next one", 1, PEER_ISN, {1, 0, END}, 0, 0, {0}, {0}},
};

/* The 16 selective ACK bits of the common header: bit i = ack + 2 + i held
 * (the receiver's view, recomputed from what it received) */
static uint16_t sack_bits_of(const rx_case_t *c, uint32_t next_expected)
{
    uint16_t bits = 0;
    for (int k = 0; k < MAXRX && END != c->rx[k]; ++k) {
        uint32_t seq = c->isn + (uint32_t) c->rx[k];
        uint32_t d = seq - next_expected; /* >= 1 for one held beyond the hole */
        if (d >= 1 && d <= 16 && d < c->window) {
            bits |= (uint16_t) (1u << (d - 1));
        }
    }
    return bits;
}

static void run_rx_case(const void *arg)
{
    const rx_case_t *c = (const rx_case_t *) arg;
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, c->window, ISN, c->isn);
    for (int k = 0; k < MAXRX && END != c->rx[k]; ++k) {
        uint8_t buf[FX_MTU];
        uint32_t seq = c->isn + (uint32_t) c->rx[k];
        fx_recv(&fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)));
    }
    /* all the ACKs that are owed go now (past the delay, if none was urgent) */
    unsigned before = count_acks(&fx);
    fx_set_time(&fx, 1000000);
    for (int i = 0; i < 8; ++i) {
        fx_progress(&fx);
    }
    REQUIRE_EQ(count_acks(&fx), before + 1);
    ack_view_t v;
    REQUIRE(last_ack(&fx, &v));
    uint32_t want_ack = c->isn + (uint32_t) c->ack;
    CHECK_EQ_U(v.ack, want_ack);
    CHECK_EQ_U(opal_btl_usnic_ack_value(ep), want_ack);
    CHECK(v.flags & OPAL_BTL_USNIC_HDR_FLAG_ACK);
    CHECK_EQ(v.sack, sack_bits_of(c, want_ack + 1));
    if (CHECK_EQ(v.n, c->n)) {
        for (unsigned r = 0; r < c->n; ++r) {
            if (!CHECK_EQ(v.start[r], c->start[r]) || !CHECK_EQ(v.len[r], c->len[r])) {
                fprintf(stderr, "  range %u\n", r);
            }
        }
    } else {
        for (unsigned r = 0; r < v.n; ++r) {
            fprintf(stderr, "  got range %u: start %u len %u\n", r, v.start[r], v.len[r]);
        }
    }
    /* the ranges are what the receiver holds beyond the hole: sorted,
     * disjoint, not touching, none empty, each segment in one of them held */
    for (unsigned r = 0; r < v.n; ++r) {
        CHECK_GT(v.len[r], 0);
        if (r > 0) {
            CHECK_GT(v.start[r], v.start[r - 1] + v.len[r - 1]); /* a hole between two ranges */
        }
        for (uint32_t i = 0; i < v.len[r]; ++i) {
            uint32_t seq = v.ack + 2 + v.start[r] + i;
            CHECK_EQ(ep->rx.rcvd[seq % ep->window], 1);
        }
    }
    fx_fini(&fx);
}

/* Nothing received, or only in order: no ACK has ranges, even after many */
static void test_sack_rx_in_order_never_ranges(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    (void) fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    for (uint32_t i = 0; i < 100; ++i) {
        uint8_t buf[FX_MTU];
        uint32_t seq = PEER_ISN + i;
        fx_set_time(&fx, 10 * i);
        fx_recv(&fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)));
        for (int k = 0; k < 6; ++k) {
            fx_progress(&fx);
        }
    }
    fx_set_time(&fx, 100000);
    fx_progress(&fx);
    unsigned acks = 0;
    for (size_t i = 0; i < fx.nposts; ++i) {
        const opal_btl_usnic_ack_hdr_t *a = (const opal_btl_usnic_ack_hdr_t *) fx.posts[i].bytes;
        if (OPAL_BTL_USNIC_PKT_ACK == a->hdr.type) {
            ++acks;
            CHECK_EQ(a->nranges, 0);
            CHECK_EQ(a->hdr.sack, 0);
        }
    }
    CHECK_GT(acks, 0);
    fx_fini(&fx);
}

/* The ranges follow the receiver's state from ACK to ACK: each ACK
 * describes what is held when it leaves */
static void test_sack_rx_ranges_follow_state(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    (void) fx_ep_new(&fx, PEER, 64, ISN, PEER_ISN);
    static const struct {
        int seq;         /* offset received before this ACK */
        int ack;         /* offset of the ACK value */
        unsigned n;
        uint16_t start0, len0, start_last, len_last;
    } steps[] = {
        {3, -1, 1, 2, 1, 2, 1},   /* holes 0, 1, 2 */
        {1, -1, 2, 0, 1, 2, 1},   /* 1 and 3 */
        {2, -1, 1, 0, 3, 0, 3},   /* 1..3 */
        {10, -1, 2, 0, 3, 9, 1},  /* 1..3, 10 */
        {0, 3, 1, 5, 1, 5, 1},    /* 0..3 in: ACK 3, 10 held (start 10 - 5) */
        {5, 3, 2, 0, 1, 5, 1},    /* 5 and 10 */
        {4, 5, 1, 3, 1, 3, 1},    /* 0..5 in: 10 held */
        {7, 5, 2, 0, 1, 3, 1},
        {6, 7, 1, 1, 1, 1, 1},
        {9, 7, 1, 0, 2, 0, 2},    /* 9, 10 */
        {8, 10, 0, 0, 0, 0, 0},   /* everything */
    };
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); ++s) {
        uint8_t buf[FX_MTU];
        uint32_t seq = PEER_ISN + (uint32_t) steps[s].seq;
        fx_set_time(&fx, 1000 * (s + 1));
        fx_recv(&fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)));
        fx_set_time(&fx, 1000 * (s + 1) + 500);
        for (int k = 0; k < 6; ++k) {
            fx_progress(&fx);
        }
        ack_view_t v;
        REQUIRE(last_ack(&fx, &v));
        bool ok = CHECK_EQ_U(v.ack, PEER_ISN + (uint32_t) steps[s].ack);
        ok = CHECK_EQ(v.n, steps[s].n) && ok;
        if (v.n > 0 && v.n == steps[s].n) {
            ok = CHECK_EQ(v.start[0], steps[s].start0) && ok;
            ok = CHECK_EQ(v.len[0], steps[s].len0) && ok;
            ok = CHECK_EQ(v.start[v.n - 1], steps[s].start_last) && ok;
            ok = CHECK_EQ(v.len[v.n - 1], steps[s].len_last) && ok;
        }
        if (!ok) {
            fprintf(stderr, "  step %zu\n", s);
        }
    }
    fx_fini(&fx);
}

/* ---------------- sender: taking the ranges ---------------- */

typedef struct {
    uint16_t start, len;
} range_t;

/* An explicit ACK from PEER of |ack| with |n| ranges (|nranges| says how
 * many; normally n) and |flags| added */
static size_t build_sack_ack(uint8_t *buf, uint32_t ack, const range_t *r, unsigned n, unsigned nranges,
                             uint8_t flags)
{
    size_t len = fx_build_ack(buf, PEER, ack);
    opal_btl_usnic_ack_hdr_t *a = (opal_btl_usnic_ack_hdr_t *) buf;
    a->hdr.flags |= flags;
    a->nranges = (uint8_t) nranges;
    for (unsigned i = 0; i < n && i < NR; ++i) {
        a->range[i].start = opal_btl_usnic_wire16(r[i].start);
        a->range[i].len = opal_btl_usnic_wire16(r[i].len);
    }
    return len;
}

static void rx_sack(fx_t *fx, uint32_t ack, const range_t *r, unsigned n)
{
    uint8_t buf[FX_ACK_HDR];
    fx_recv(fx, buf, build_sack_ack(buf, ack, r, n, n, 0));
}

/* |segs[0..count)| SACKED exactly where |want| (bit i: segs[i]) says */
static bool sacked_exactly(opal_btl_usnic_send_seg_t **segs, unsigned count, uint64_t want)
{
    bool ok = true;
    for (unsigned i = 0; i < count; ++i) {
        bool is = FX_FLAG(segs[i], SACKED);
        bool should = (want >> i) & 1;
        if (is != should) {
            fprintf(stderr, "  segment %u (seq 0x%x): SACKED %d, expected %d\n", i, (unsigned) segs[i]->seq, is,
                    should);
            ok = false;
        }
    }
    return ok;
}

/* The sequence numbers on the resend list, in order */
static unsigned resend_seqs(fx_t *fx, uint32_t *out, unsigned max)
{
    unsigned n = 0;
    opal_list_item_t *item;
    OPAL_LIST_FOREACH (item, &fx->eng.resend_segs, opal_list_item_t) {
        if (n < max) {
            out[n] = ((opal_btl_usnic_send_seg_t *) item)->seq;
        }
        ++n;
    }
    return n;
}

static bool resend_list_is(fx_t *fx, const uint32_t *want, unsigned n)
{
    uint32_t got[64];
    unsigned k = resend_seqs(fx, got, 64);
    bool ok = CHECK_EQ(k, n);
    for (unsigned i = 0; ok && i < n; ++i) {
        ok = CHECK_EQ_U(got[i], want[i]);
    }
    if (!ok) {
        fprintf(stderr, "  resend list:");
        for (unsigned i = 0; i < k && i < 64; ++i) {
            fprintf(stderr, " 0x%x", got[i]);
        }
        fprintf(stderr, "\n");
    }
    return ok;
}

#define BIT(i) (1ull << (i))
#define BITS(from, n) ((((1ull << (n)) - 1)) << (from))

/* The ranges mark exactly the segments the peer holds; nothing is resent
 * while the holes have not waited a round trip */
static void test_sack_marks_exactly_held(void)
{
    static const struct {
        const char *name;
        uint32_t ack_off;     /* ACK value = ISN - 1 + ack_off */
        range_t r[NR];
        unsigned n;
        uint64_t want;        /* bit i: ISN + i SACKED */
    } cases[] = {
        {"one range", 0, {{1, 3}}, 1, BITS(2, 3)},
        {"two ranges", 0, {{1, 3}, {7, 2}}, 2, BITS(2, 3) | BITS(8, 2)},
        {"right after the hole", 0, {{0, 1}}, 1, BIT(1)},
        {"all but the hole", 0, {{0, 19}}, 1, BITS(1, 19)},
        {"eight ranges of one", 0, {{0, 1}, {2, 1}, {4, 1}, {6, 1}, {8, 1}, {10, 1}, {12, 1}, {14, 1}}, 8,
         BIT(1) | BIT(3) | BIT(5) | BIT(7) | BIT(9) | BIT(11) | BIT(13) | BIT(15)},
        {"after a cumulative ACK of 5", 5, {{0, 2}, {5, 1}}, 2, BITS(6, 2) | BIT(11)},
        {"an empty range", 0, {{3, 0}, {5, 1}}, 2, BIT(6)},
        {"overlapping ranges", 0, {{1, 4}, {3, 4}}, 2, BITS(2, 6)},
        {"ranges out of order", 0, {{9, 1}, {1, 1}}, 2, BIT(10) | BIT(2)},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        fx_t fx;
        fx_init(&fx, NULL);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
        opal_btl_usnic_send_seg_t *segs[20];
        FX_SEND_TINY(&fx, ep, 20, segs);
        fx_complete_all(&fx);
        fx_set_time(&fx, 50); /* less than a round trip (rto_min, no sample yet) */
        uint32_t a = cases[c].ack_off;
        rx_sack(&fx, ISN - 1 + a, cases[c].r, cases[c].n);
        CHECK_EQ_U(ep->tx.acked_seq, ISN - 1 + a);
        /* the ACKed ones are gone; of the rest, exactly the held are SACKED */
        bool ok = sacked_exactly(segs + a, 20 - a, cases[c].want >> a);
        ok = CHECK_EQ(fx_resend_len(&fx), 0) && ok;
        ok = CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 0) && ok;
        ok = CHECK(fx_hotel_consistent(&fx)) && ok; /* marking stops no timer */
        if (!ok) {
            fprintf(stderr, "  case \"%s\"\n", cases[c].name);
        }
        opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 19);
        CHECK(fx_all_recycled(&fx));
        fx_fini(&fx);
    }
}

/* Holes below the highest held segment are resent once they waited a
 * round trip: not before, never a held one, never one above the highest
 * held; a copy only once a segment sent after it is held (a round trip
 * alone proves nothing: behind a slow receiver it may still be queued) */
static void test_sack_holes_resent_when_overdue(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[20];
    FX_SEND_TINY(&fx, ep, 20, segs);
    fx_complete_all(&fx);
    const range_t r[] = {{1, 3}, {7, 2}}; /* held: ISN+2..4, ISN+8..9 */
    /* a round trip is rto_min (200) without an RTT sample */
    fx_set_time(&fx, FX_RTO_MIN - 1);
    rx_sack(&fx, ISN - 1, r, 2);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK(sacked_exactly(segs, 20, BITS(2, 3) | BITS(8, 2)));
    fx_set_time(&fx, FX_RTO_MIN);
    rx_sack(&fx, ISN - 1, r, 2);
    static const uint32_t holes[] = {ISN, ISN + 1, ISN + 5, ISN + 6, ISN + 7};
    CHECK(resend_list_is(&fx, holes, 5));
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 5);
    CHECK_EQ_U(fx.eng.stats.num_timeout_retrans + fx.eng.stats.num_fast_retrans, 0);
    for (unsigned i = 10; i < 20; ++i) {
        CHECK(!FX_FLAG(segs[i], ON_RESEND)); /* above the highest held: maybe in flight still */
    }
    /* progress posts them, on the data channel, flagged as retransmissions */
    size_t first = fx.nposts;
    CHECK_EQ(fx_progress(&fx), 5);
    REQUIRE_EQ(fx.nposts, first + 5);
    for (unsigned i = 0; i < 5; ++i) {
        const fx_post_t *p = &fx.posts[first + i];
        CHECK_EQ_U(fx_post_seq(p), holes[i]);
        CHECK_EQ(p->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
        CHECK(fx_post_hdr(p)->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX);
        CHECK(!(fx_post_hdr(p)->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT));
    }
    fx_complete_all(&fx);
    /* the same report a moment later: the holes were just resent */
    fx_set_time(&fx, FX_RTO_MIN + FX_RTO_MIN / 2);
    rx_sack(&fx, ISN - 1, r, 2);
    CHECK_EQ(fx_resend_len(&fx), 0);
    /* a round trip after the resend: nothing held was sent after the
     * copies, so nothing proves them lost (behind a slow receiver they may
     * still be queued): their timeout decides */
    fx_set_time(&fx, 2 * FX_RTO_MIN);
    rx_sack(&fx, ISN - 1, r, 2);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 5);
    /* two fragments sent after the copies (on the data channel, behind
     * them) are held: the copies are lost too (not ISN+10..19: priority
     * originals, which a later data segment does not prove lost) */
    opal_btl_usnic_send_seg_t *later[2];
    FX_SEND_TINY(&fx, ep, 2, later);
    CHECK_EQ(later[0]->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    fx_complete_all(&fx);
    fx_set_time(&fx, 3 * FX_RTO_MIN);
    const range_t r_later[] = {{1, 3}, {7, 2}, {19, 2}}; /* ... and ISN+20, ISN+21 */
    rx_sack(&fx, ISN - 1, r_later, 3);
    CHECK(resend_list_is(&fx, holes, 5));
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 10);
    CHECK_EQ(fx_progress(&fx), 5);
    fx_complete_all(&fx);
    /* a partial cumulative ACK: the ranges are relative to the new value;
     * one more fragment sent with the second copies (same time, later
     * position) proves ISN+7's lost */
    FX_SEND_TINY(&fx, ep, 1, NULL);
    fx_complete_all(&fx);
    fx_set_time(&fx, 4 * FX_RTO_MIN);
    const range_t r2[] = {{0, 15}}; /* ACK ISN+6: ISN+8..ISN+22 held, ISN+7 the hole */
    rx_sack(&fx, ISN + 6, r2, 1);
    static const uint32_t hole7[] = {ISN + 7};
    CHECK(resend_list_is(&fx, hole7, 1));
    fx_progress(&fx);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 22);
    CHECK(fx_hotel_consistent(&fx));
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* One 1000-byte fragment to |ep|, posted (on the data channel: larger
 * than the priority channel's datagrams) */
static void send_data_frag(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint8_t tag)
{
    opal_btl_usnic_send_frag_t *frag = fx_alloc(fx, ep, 1000, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    REQUIRE(NULL != frag);
    fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, 1000, tag);
    CHECK_EQ(fx_send(fx, ep, frag, tag), 0);
    opal_btl_usnic_engine_progress(&fx->eng);
}

/* A channel is a socket, and a socket delivers in order.  A large
 * fragment on the data channel (ISN), a tiny one behind it (ISN+1: the
 * data channel too, since ISN is un-ACKed), and once both are ACKed three
 * tiny ones on the priority channel (ISN+2..4) and a large one (ISN+5,
 * data).  A later priority segment held proves a priority hole lost; a
 * later data one does not (a receiver reads each channel in bounded turns,
 * and behind a slow one data overtakes queued priority datagrams). */
static void test_sack_needs_a_later_segment_of_the_same_channel(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    send_data_frag(&fx, ep, 7);
    FX_SEND_TINY(&fx, ep, 1, NULL);
    REQUIRE_EQ(fx.nposts, 2);
    CHECK_EQ(fx.posts[0].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    CHECK_EQ(fx.posts[1].channel, OPAL_BTL_USNIC_DATA_CHANNEL); /* behind the un-ACKed data segment */
    fx_complete_all(&fx);
    fx_set_time(&fx, 10 * FX_RTO_MIN);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 1);
    FX_SEND_TINY(&fx, ep, 3, NULL);
    send_data_frag(&fx, ep, 8);
    REQUIRE_EQ(fx.nposts, 6);
    for (size_t i = 2; i < 5; ++i) {
        CHECK_EQ(fx.posts[i].channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL); /* nothing of the data channel un-ACKed */
    }
    CHECK_EQ(fx.posts[5].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    fx_complete_all(&fx);
    fx_set_time(&fx, 20 * FX_RTO_MIN); /* long overdue */
    /* ACK ISN+2; ISN+4 (priority) held: ISN+3 (priority) is proven lost,
     * ISN+5 (above the highest held) may still be on its way */
    const range_t prio_held[] = {{0, 1}}; /* ACK ISN+2: ISN+4 held */
    rx_sack(&fx, ISN + 2, prio_held, 1);
    static const uint32_t lost3[] = {ISN + 3};
    CHECK(resend_list_is(&fx, lost3, 1));
    fx_progress(&fx);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 5);
    /* a priority segment (ISN+6, nothing un-ACKed) then a data one (ISN+7):
     * the data one held proves nothing about the priority hole, however
     * overdue */
    FX_SEND_TINY(&fx, ep, 1, NULL);
    CHECK_EQ(fx_last_post(&fx)->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    send_data_frag(&fx, ep, 9);
    fx_complete_all(&fx);
    fx_set_time(&fx, 30 * FX_RTO_MIN);
    const range_t data_held[] = {{0, 1}}; /* ACK ISN+5: ISN+6 missing, ISN+7 held */
    rx_sack(&fx, ISN + 5, data_held, 1);
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 1);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 7);
    CHECK(fx_hotel_consistent(&fx));
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A data hole is not proven by later priority segments, however
 * overdue: tiny ones overtake data ones */
static void test_sack_priority_segments_prove_no_data_loss(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    send_data_frag(&fx, ep, 7);
    /* tiny ones that took the priority channel past it (as a peer that
     * overtakes would send them): their channel says so */
    FX_SEND_TINY(&fx, ep, 3, NULL);
    REQUIRE_EQ(fx.nposts, 4);
    for (size_t i = 1; i < 4; ++i) {
        fx.posts[i].seg->channel = OPAL_BTL_USNIC_PRIORITY_CHANNEL;
    }
    fx_complete_all(&fx);
    fx_set_time(&fx, 10 * FX_RTO_MIN);
    const range_t r[] = {{0, 3}}; /* ISN+1..3 held, ISN the hole */
    rx_sack(&fx, ISN - 1, r, 1);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 0);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 3);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* With an RTT estimate the round trip is srtt + rttvar (under rto_min) */
static void test_sack_overdue_uses_rtt(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    /* one sample of 40 us: srtt 40, rttvar 20: a round trip is 60 us */
    FX_SEND_TINY(&fx, ep, 1, NULL);
    fx_complete_all(&fx);
    fx_set_time(&fx, 40);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN);
    REQUIRE_EQ(ep->timer.srtt, 40);
    REQUIRE_EQ(ep->timer.rttvar, 20);
    opal_btl_usnic_send_seg_t *segs[6];
    FX_SEND_TINY(&fx, ep, 6, segs); /* ISN+1..ISN+6, sent at 40 */
    fx_complete_all(&fx);
    const range_t r[] = {{2, 1}}; /* ACK ISN: ISN+4 held; holes ISN+1..ISN+3 */
    fx_set_time(&fx, 40 + 59);
    rx_sack(&fx, ISN, r, 1);
    CHECK_EQ(fx_resend_len(&fx), 0);
    fx_set_time(&fx, 40 + 60);
    rx_sack(&fx, ISN, r, 1);
    static const uint32_t holes[] = {ISN + 1, ISN + 2, ISN + 3};
    CHECK(resend_list_is(&fx, holes, 3));
    CHECK(FX_FLAG(segs[3], SACKED));
    fx_progress(&fx);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 6);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* A range that runs past what was sent marks what was sent of it; one
 * that starts past it marks nothing; nothing crashes (ASan) */
static void test_sack_range_past_sent_clamped(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[5];
    FX_SEND_TINY(&fx, ep, 5, segs);
    fx_complete_all(&fx);
    /* at once (not overdue): only the marks are looked at here */
    const range_t r[] = {{2, 100}, {60000, 65535}, {65535, 65535}, {4, 1}, {31, 1}, {0, 0}, {65535, 0}, {5, 65535}};
    rx_sack(&fx, ISN - 1, r, NR);
    CHECK(sacked_exactly(segs, 5, BITS(3, 2))); /* ISN+3 and ISN+4: sent, and inside the first range */
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1);
    /* nothing beyond next_seq exists to be marked: the window slots past
     * it are empty */
    for (uint32_t s = ISN + 5; s != ISN - 1 + 32; ++s) {
        CHECK(NULL == ep->tx.sent[s % ep->window]);
    }
    /* the largest values on an ACK that also advances */
    const range_t big[] = {{65535, 65535}};
    rx_sack(&fx, ISN + 1, big, 1);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 1);
    CHECK(sacked_exactly(segs + 2, 3, BITS(1, 2)));
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/*
 * Regression (an engine bug this test found): a range wholly beyond what
 * was sent once raised the top of the holes anyway (its end clamped to
 * what is in flight), so every overdue in-flight segment was resent as a
 * hole.  Such a range teaches nothing: nothing marked, nothing resent.
 */
static void test_sack_range_wholly_past_sent_ignored(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[5];
    FX_SEND_TINY(&fx, ep, 5, segs);
    fx_complete_all(&fx);
    fx_set_time(&fx, 300); /* overdue (a round trip is rto_min, 200), before the timeout (1000) */
    const range_t r[] = {{10, 5}};
    rx_sack(&fx, ISN - 1, r, 1);
    CHECK(sacked_exactly(segs, 5, 0));
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(fx.eng.stats.num_sack_retrans, 0);
    fx_progress(&fx);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK(fx_all_recycled(&fx));
    (void) ep;
    fx_fini(&fx);
}

/* A segment queued for retransmission that the peer then reports held
 * leaves the resend list unsent; resend_away copies no SACKED segment */
static void test_sack_skips_queued_and_away(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[8];
    FX_SEND_TINY(&fx, ep, 8, segs);
    fx_complete_all(&fx);
    fx_set_time(&fx, FX_RTO_MIN);
    const range_t r1[] = {{2, 1}}; /* ISN+3 held: ISN..ISN+2 are holes, overdue */
    rx_sack(&fx, ISN - 1, r1, 1);
    static const uint32_t holes[] = {ISN, ISN + 1, ISN + 2};
    REQUIRE(resend_list_is(&fx, holes, 3));
    /* before the next progress pass, ISN+1 and ISN+2 arrive after all */
    const range_t r2[] = {{0, 3}};
    rx_sack(&fx, ISN - 1, r2, 1);
    CHECK(sacked_exactly(segs, 8, BITS(1, 3)));
    CHECK(FX_FLAG(segs[1], ON_RESEND) && FX_FLAG(segs[2], ON_RESEND)); /* still queued ... */
    size_t first = fx.nposts;
    CHECK_EQ(fx_progress(&fx), 1); /* ... but only ISN goes */
    REQUIRE_EQ(fx.nposts, first + 1);
    CHECK_EQ_U(fx_post_seq(&fx.posts[first]), ISN);
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK(!FX_FLAG(segs[1], ON_RESEND) && !FX_FLAG(segs[2], ON_RESEND));
    CHECK_EQ_U(fx.eng.stats.num_resends, 1);
    fx_complete_all(&fx);
    /* held, unsent again, kept until the cumulative ACK */
    CHECK(!FX_FLAG(segs[1], ACKED) && FX_FLAG(segs[1], IN_WINDOW));
    CHECK(fx_hotel_consistent(&fx));

    /* resend_away: copies of overdue segments, but not of held ones */
    fx_set_time(&fx, 5000); /* everything overdue by far */
    unsigned flushes = fx.flushes;
    first = fx.nposts;
    int copies = opal_btl_usnic_resend_away(&fx.eng);
    /* not held: ISN, ISN+4..ISN+7 (ISN+1..ISN+3 are SACKED) */
    CHECK_EQ(copies, 5);
    REQUIRE_EQ(fx.nposts, first + 5);
    static const uint32_t away[] = {ISN, ISN + 4, ISN + 5, ISN + 6, ISN + 7};
    for (unsigned i = 0; i < 5; ++i) {
        CHECK_EQ_U(fx_post_seq(&fx.posts[first + i]), away[i]);
        CHECK_EQ(fx.posts[first + i].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    }
    CHECK_EQ(fx.flushes, flushes + 1);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 7);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* Only the cumulative ACK releases: a SACKED segment keeps its slot, its
 * buffer and its timer until the ACK passes it (a selective ACK is advice:
 * the peer could still lose what it reported, as far as the protocol goes) */
static void test_sack_only_cumulative_releases(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    size_t full = fx_small_frags_available(&fx);
    opal_btl_usnic_send_seg_t *segs[10];
    FX_SEND_TINY(&fx, ep, 10, segs);
    /* ISN+8, ISN+9 not yet completed by the provider */
    for (int i = 0; i < 8; ++i) {
        fx_complete(&fx, segs[i]);
    }
    const range_t r[] = {{0, 4}, {6, 3}}; /* held: ISN+1..ISN+4, ISN+7..ISN+9 */
    rx_sack(&fx, ISN - 1, r, 2);
    CHECK(sacked_exactly(segs, 10, BITS(1, 4) | BITS(7, 3)));
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 10);
    CHECK_EQ(fx_small_frags_available(&fx), full - 10);
    for (int i = 0; i < 10; ++i) {
        CHECK(FX_FLAG(segs[i], IN_WINDOW) && !FX_FLAG(segs[i], ACKED));
        CHECK_PTR_EQ(ep->tx.sent[(ISN + i) % 32], segs[i]);
        CHECK(FX_FLAG(segs[i], IN_HOTEL));
    }
    CHECK(fx_hotel_consistent(&fx));
    /* the oldest is no SACKED segment: the timer still watches the hole */
    CHECK_EQ_U(opal_btl_usnic_engine_next_deadline(&fx.eng), segs[0]->deadline);
    /* a cumulative ACK to ISN+4 releases ISN..ISN+4, held ones included */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(ep), 5);
    CHECK_EQ(fx_small_frags_available(&fx), full - 5);
    CHECK(FX_FLAG(segs[7], SACKED) && FX_FLAG(segs[8], SACKED) && FX_FLAG(segs[9], SACKED));
    /* to the end: ISN+8 and ISN+9 wait for their completions */
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 9);
    CHECK(opal_btl_usnic_endpoint_drained(ep));
    CHECK_EQ(fx_small_frags_available(&fx), full - 2);
    fx_complete_all(&fx);
    CHECK_EQ(fx_small_frags_available(&fx), full);
    CHECK(fx_hotel_consistent(&fx));
    CHECK(fx_all_recycled(&fx));
    /* a recycled segment starts clean: no SACKED left on its next send */
    opal_btl_usnic_send_seg_t *again[10];
    FX_SEND_TINY(&fx, ep, 10, again);
    for (int i = 0; i < 10; ++i) {
        CHECK(!FX_FLAG(again[i], SACKED));
    }
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 19);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* The ranges of an ACK whose cumulative ACK is not taken are not taken
 * either: a stale ACK (below acked_seq) and one beyond anything sent */
static void test_sack_stale_and_impossible_ignored(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[16];
    FX_SEND_TINY(&fx, ep, 16, segs);
    fx_complete_all(&fx);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 4);
    fx_set_time(&fx, 4 * FX_RTO_MIN); /* every hole overdue (before the timeout): any taken range would resend */
    /* stale: ACK ISN+1 with ranges that would mark ISN+3.. (relative to it) */
    const range_t r[] = {{0, 10}};
    uint64_t old = fx.eng.stats.num_old_dup_acks;
    rx_sack(&fx, ISN + 1, r, 1);
    CHECK_EQ_U(fx.eng.stats.num_old_dup_acks, old + 1);
    CHECK(sacked_exactly(segs + 5, 11, 0));
    CHECK_EQ(fx_resend_len(&fx), 0);
    /* beyond anything sent */
    uint64_t invalid = fx.eng.stats.num_invalid_recvs;
    rx_sack(&fx, ISN + 16, r, 1);
    rx_sack(&fx, ISN + 1000, r, 1);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, invalid + 2);
    CHECK(sacked_exactly(segs + 5, 11, 0));
    CHECK_EQ(fx_resend_len(&fx), 0);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 4);
    /* a duplicate of the current value is taken (the ranges are relative to it) */
    const range_t d[] = {{1, 2}};
    rx_sack(&fx, ISN + 4, d, 1);
    CHECK(sacked_exactly(segs + 5, 11, BITS(2, 2)));
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 15);
    fx_progress(&fx);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* hdr_check through the engine: 8 ranges taken, 9 dropped (BAD_SACK), an
 * ACK shorter than 88 bytes dropped (TRUNCATED); a dropped ACK changes
 * nothing */
static void test_sack_nranges_checked(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
    opal_btl_usnic_send_seg_t *segs[20];
    FX_SEND_TINY(&fx, ep, 20, segs);
    fx_complete_all(&fx);
    const range_t r[NR] = {{0, 1}, {2, 1}, {4, 1}, {6, 1}, {8, 1}, {10, 1}, {12, 1}, {14, 1}};
    uint8_t buf[FX_ACK_HDR + 8];
    /* 9 claimed */
    size_t len = build_sack_ack(buf, ISN + 1, r, NR, NR + 1, 0);
    CHECK_EQ(opal_btl_usnic_hdr_check(buf, len), 1 + OPAL_BTL_USNIC_DROP_BAD_SACK);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_sack, 1);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 1);
    CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 0);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1); /* not even the cumulative ACK */
    CHECK(sacked_exactly(segs, 20, 0));
    /* 255 claimed */
    len = build_sack_ack(buf, ISN + 1, r, NR, 255, 0);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_sack, 2);
    /* the ACK of version 3 (52 bytes), and one byte short of 88 */
    static const size_t shorts[] = {FX_HDR, FX_ACK_HDR - 1, FX_HDR + 4};
    for (size_t i = 0; i < 3; ++i) {
        len = build_sack_ack(buf, ISN + 1, r, NR, NR, 0);
        fx_recv(&fx, buf, shorts[i]);
    }
    CHECK_EQ_U(fx.eng.stats.num_drop_truncated, 3);
    CHECK_EQ_U(ep->tx.acked_seq, ISN - 1);
    CHECK(sacked_exactly(segs, 20, 0));
    /* trailing bytes beyond 88 are allowed (the tag covers them with protection full) */
    len = build_sack_ack(buf, ISN + 1, r, NR, NR, 0);
    memset(buf + len, 0, 8);
    CHECK_EQ(opal_btl_usnic_hdr_check(buf, len + 8), OPAL_BTL_USNIC_VALID);
    /* exactly 8: taken */
    len = build_sack_ack(buf, ISN + 1, r, NR, NR, 0);
    CHECK_EQ(opal_btl_usnic_hdr_check(buf, len), OPAL_BTL_USNIC_VALID);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 1);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_sack, 2);
    /* relative to ISN+1: ISN+3, ISN+5, ..., ISN+17 */
    CHECK(sacked_exactly(segs, 20,
                         BIT(3) | BIT(5) | BIT(7) | BIT(9) | BIT(11) | BIT(13) | BIT(15) | BIT(17)));
    /* nranges 0 with stale bytes in the range fields: nothing marked */
    len = build_sack_ack(buf, ISN + 2, r, NR, 0, 0);
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(ep->tx.acked_seq, ISN + 2);
    CHECK(sacked_exactly(segs + 3, 17, BIT(0) | BIT(2) | BIT(4) | BIT(6) | BIT(8) | BIT(10) | BIT(12) | BIT(14)));
    /* nranges 2: only the first two of the 8 filled in */
    len = build_sack_ack(buf, ISN + 2, r, NR, 2, 0);
    fx_recv(&fx, buf, len);
    CHECK(sacked_exactly(segs + 3, 17, BIT(0) | BIT(2) | BIT(4) | BIT(6) | BIT(8) | BIT(10) | BIT(12) | BIT(14) |
                                           BIT(1) | BIT(3)));
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 19);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

/* The tag covers the ranges (protection full, and header: the 88 bytes of
 * the ACK header): any byte of nranges, reserved or the ranges changed
 * after sealing makes the ACK unauthentic; nothing of it is taken */
static void test_sack_ranges_inside_mac(void)
{
    static const int modes[] = {OPAL_BTL_USNIC_PROTECT_FULL, OPAL_BTL_USNIC_PROTECT_HEADER};
    for (size_t m = 0; m < 2; ++m) {
        opal_btl_usnic_engine_params_t p;
        fx_params_default(&p);
        p.protect = modes[m];
        fx_t fx;
        fx_init(&fx, &p);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 32, ISN, PEER_ISN);
        opal_btl_usnic_send_seg_t *segs[20];
        FX_SEND_TINY(&fx, ep, 20, segs);
        fx_complete_all(&fx);
        const range_t r[] = {{1, 2}, {5, 1}, {9, 4}};
        uint8_t good[FX_ACK_HDR], bad[FX_ACK_HDR];
        size_t len = build_sack_ack(good, ISN - 1, r, 3, 3, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW);
        uint64_t nonce = 100;
        unsigned tampered = 0;
        for (size_t off = FX_HDR; off < FX_ACK_HDR; ++off) {
            memcpy(bad, good, len);
            fx_seal(&fx, bad, len, PEER, ++nonce);
            bad[off] ^= (off == FX_HDR) ? 0x01 : 0x10; /* nranges stays <= 8 */
            fx_recv_raw(&fx, bad, len);
            ++tampered;
        }
        bool ok = CHECK_EQ_U(fx.eng.stats.num_drop_bad_mac, tampered);
        ok = CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 0) && ok;
        ok = CHECK(sacked_exactly(segs, 20, 0)) && ok;
        /* the genuine one is taken */
        memcpy(bad, good, len);
        fx_seal(&fx, bad, len, PEER, ++nonce);
        fx_recv_raw(&fx, bad, len);
        ok = CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 1) && ok;
        ok = CHECK(sacked_exactly(segs, 20, BITS(2, 2) | BIT(6) | BITS(10, 4))) && ok;
        /* its replay is not taken (ranges included) */
        const range_t more[] = {{14, 1}};
        build_sack_ack(good, ISN - 1, more, 1, 1, 0);
        fx_seal(&fx, good, len, PEER, nonce); /* the nonce of the one already taken */
        fx_recv_raw(&fx, good, len);
        ok = CHECK_EQ_U(fx.eng.stats.num_drop_replay, 1) && ok;
        ok = CHECK(!FX_FLAG(segs[15], SACKED)) && ok;
        if (!ok) {
            fprintf(stderr, "  protection %d\n", modes[m]);
        }
        opal_btl_usnic_handle_ack(&fx.eng, ep, ISN + 19);
        CHECK(fx_all_recycled(&fx));
        fx_fini(&fx);
    }
}

/* ---------------- both ends ---------------- */

/* Two fixture engines: A sends 40 tiny fragments, some are lost on the
 * way to B, B's ACK (built by the engine, ranges and all) goes back to A:
 * A marks exactly what B holds beyond its first hole (the first 8 runs),
 * resends the holes below the highest once overdue, and B then has
 * everything; A releases everything on B's cumulative ACK. */
static void test_sack_between_two_engines(void)
{
    opal_btl_usnic_engine_params_t pa, pb;
    fx_params_default(&pa);
    fx_params_default(&pb);
    pa.my_name = 0;
    pb.my_name = 1;
    fx_t a, b;
    fx_init(&a, &pa);
    fx_init(&b, &pb);
    opal_btl_usnic_endpoint_t *ea = fx_ep_new(&a, 1, 64, ISN, PEER_ISN);
    opal_btl_usnic_endpoint_t *eb = fx_ep_new(&b, 0, 64, PEER_ISN, ISN);
    opal_btl_usnic_send_seg_t *segs[41];
    FX_SEND_TINY(&a, ea, 40, segs);
    REQUIRE_EQ(a.nposts, 40);
    /* lost on the way: 0, 4, 5, 9, 12..14, 20, 22, 24, 26, 28, 30, 35 (11 runs held beyond the first hole) */
    static const int lost[] = {0, 4, 5, 9, 12, 13, 14, 20, 22, 24, 26, 28, 30, 35};
    uint64_t lost_mask = 0;
    for (size_t i = 0; i < sizeof(lost) / sizeof(lost[0]); ++i) {
        lost_mask |= BIT(lost[i]);
    }
    for (int i = 0; i < 40; ++i) {
        if (!((lost_mask >> i) & 1)) {
            fx_recv_raw(&b, a.posts[i].bytes, a.posts[i].len);
        }
    }
    fx_complete_all(&a);
    CHECK_EQ(b.ndels, 0); /* nothing in order yet */
    fx_progress(&b);
    ack_view_t v;
    REQUIRE(last_ack(&b, &v));
    CHECK_EQ_U(v.ack, ISN - 1);
    CHECK_EQ(v.n, NR); /* 11 runs held: the first 8 */
    /* B holds 1..3, 6..8, 10..11, 15..19, 21, 23, 25, 27 in its first 8 runs */
    uint64_t held8 = BITS(1, 3) | BITS(6, 3) | BITS(10, 2) | BITS(15, 5) | BIT(21) | BIT(23) | BIT(25) | BIT(27);
    fx_recv_raw(&a, b.posts[b.nposts - 1].bytes, b.posts[b.nposts - 1].len);
    CHECK(sacked_exactly(segs, 40, held8));
    CHECK_EQ(fx_resend_len(&a), 0); /* no time passed: not overdue */
    /* a round trip later: the same ACK again is a replay (dropped, as a
     * copy the network made), a copy of a datagram B has too */
    fx_set_time(&a, FX_RTO_MIN);
    fx_set_time(&b, FX_RTO_MIN);
    fx_recv_raw(&a, b.posts[b.nposts - 1].bytes, b.posts[b.nposts - 1].len);
    CHECK_EQ_U(a.eng.stats.num_drop_replay, 1);
    fx_recv_raw(&b, a.posts[1].bytes, a.posts[1].len);
    CHECK_EQ_U(b.eng.stats.num_drop_replay, 1);
    /* A sends one more (ISN+40), B ACKs it at once (out of order), and A
     * resends every hole below the highest held of the 8 ranges, ISN+27 */
    FX_SEND_TINY(&a, ea, 1, &segs[40]);
    fx_recv_raw(&b, a.posts[a.nposts - 1].bytes, a.posts[a.nposts - 1].len);
    size_t bp = b.nposts;
    fx_progress(&b);
    REQUIRE_EQ(b.nposts, bp + 1);
    fx_recv_raw(&a, b.posts[bp].bytes, b.posts[bp].len);
    uint32_t want[16];
    unsigned nw = 0;
    for (int i = 0; i < 27; ++i) {
        if (!((held8 >> i) & 1)) {
            want[nw++] = ISN + (uint32_t) i;
        }
    }
    CHECK(resend_list_is(&a, want, nw)); /* 0, 4, 5, 9, 12, 13, 14, 20, 22, 24, 26 */
    size_t ap = a.nposts;
    fx_progress(&a);
    REQUIRE_EQ(a.nposts, ap + nw);
    for (size_t i = ap; i < a.nposts; ++i) {
        fx_recv_raw(&b, a.posts[i].bytes, a.posts[i].len);
    }
    fx_complete_all(&a);
    /* B has everything up to ISN+27 now; 28, 30 and 35 were beyond its 8th range */
    CHECK_EQ_U(eb->rx.next_expected, ISN + 28);
    bp = b.nposts;
    for (int i = 0; i < 6; ++i) { /* the holes came in order: an ACK after the delay */
        fx_progress(&b);
    }
    REQUIRE_EQ(b.nposts, bp + 1);
    REQUIRE(last_ack(&b, &v));
    CHECK_EQ_U(v.ack, ISN + 27);
    CHECK_EQ(v.n, 3); /* 29, 31..34 and 36..40, relative to ISN+27 */
    CHECK_EQ(v.start[0], 0);
    CHECK_EQ(v.len[0], 1);
    CHECK_EQ(v.start[1], 2);
    CHECK_EQ(v.len[1], 4);
    CHECK_EQ(v.start[2], 7);
    CHECK_EQ(v.len[2], 5);
    fx_recv_raw(&a, b.posts[bp].bytes, b.posts[bp].len);
    CHECK_EQ_U(ea->tx.acked_seq, ISN + 27);
    /* the last holes were sent at 0: overdue, they go at once */
    static const uint32_t last_holes[] = {ISN + 28, ISN + 30, ISN + 35};
    CHECK(resend_list_is(&a, last_holes, 3));
    CHECK(sacked_exactly(segs + 28, 13, BIT(1) | BITS(3, 4) | BITS(8, 5)));
    ap = a.nposts;
    fx_progress(&a);
    CHECK_EQ(a.nposts, ap + 3);
    for (size_t i = ap; i < a.nposts; ++i) {
        fx_recv_raw(&b, a.posts[i].bytes, a.posts[i].len);
    }
    fx_complete_all(&a);
    CHECK_EQ_U(eb->rx.next_expected, ISN + 41);
    CHECK_EQ(b.ndels, 41);
    for (size_t i = 0; i < b.ndels; ++i) {
        CHECK_EQ(b.dels[i].len, 100);
    }
    bp = b.nposts;
    fx_set_time(&b, 1000000);
    for (int i = 0; i < 6; ++i) {
        fx_progress(&b);
    }
    REQUIRE(last_ack(&b, &v));
    CHECK_EQ_U(v.ack, ISN + 40);
    CHECK_EQ(v.n, 0);
    fx_recv_raw(&a, b.posts[b.nposts - 1].bytes, b.posts[b.nposts - 1].len);
    CHECK(opal_btl_usnic_endpoint_drained(ea));
    CHECK_EQ_U(a.eng.stats.num_resends, nw + 3);
    CHECK_EQ_U(a.eng.stats.num_timeout_retrans, 0);
    CHECK(fx_all_recycled(&a));
    fx_complete_all(&b);
    CHECK(fx_all_recycled(&b));
    fx_fini(&a);
    fx_fini(&b);
}

int main(int argc, char **argv)
{
    static unit_test_t tests[sizeof(rx_cases) / sizeof(rx_cases[0]) + 16] = {
        UNIT_TEST(test_sack_rx_in_order_never_ranges),
        UNIT_TEST(test_sack_rx_ranges_follow_state),
        UNIT_TEST(test_sack_marks_exactly_held),
        UNIT_TEST(test_sack_holes_resent_when_overdue),
        UNIT_TEST(test_sack_needs_a_later_segment_of_the_same_channel),
        UNIT_TEST(test_sack_priority_segments_prove_no_data_loss),
        UNIT_TEST(test_sack_overdue_uses_rtt),
        UNIT_TEST(test_sack_range_past_sent_clamped),
        UNIT_TEST(test_sack_range_wholly_past_sent_ignored),
        UNIT_TEST(test_sack_skips_queued_and_away),
        UNIT_TEST(test_sack_only_cumulative_releases),
        UNIT_TEST(test_sack_stale_and_impossible_ignored),
        UNIT_TEST(test_sack_nranges_checked),
        UNIT_TEST(test_sack_ranges_inside_mac),
        UNIT_TEST(test_sack_between_two_engines),
    };
    size_t n = 0;
    while (NULL != tests[n].name) {
        ++n; /* the named tests above */
    }
    static char names[sizeof(rx_cases) / sizeof(rx_cases[0])][128];
    for (size_t i = 0; i < sizeof(rx_cases) / sizeof(rx_cases[0]); ++i) {
        snprintf(names[i], sizeof(names[i]), "receiver ranges: %s", rx_cases[i].name);
        tests[n].name = names[i];
        tests[n].fn = NULL;
        tests[n].fn_arg = run_rx_case;
        tests[n].arg = &rx_cases[i];
        ++n;
    }
    return unit_run(argv[0], tests, n, argc, argv);
}
