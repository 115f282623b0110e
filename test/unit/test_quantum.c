/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Batches in the send progression (engine parameter batch_segs, the
 * wire's max_batch) and the run retransmission of a timeout:
 *
 *  - progress_endpoint_sends gives each ready endpoint up to batch_segs
 *    consecutive segments per turn, round-robin (1 with batch_segs 0 or 1,
 *    as before): the post order over several endpoints, fragments and
 *    chunks alike, with and without credits to spare;
 *  - the wire's flush: once at the end of a progress pass that posted,
 *    of opal_btl_usnic_engine_send_now and of opal_btl_usnic_resend_away,
 *    after every post of it; never from a pass that posted nothing;
 *  - retransmit_run: a timeout of the oldest un-ACKed segment also queues
 *    the following in-flight segments sent no later than it (its batch),
 *    skipping SACKED and already queued ones, at most batch_segs in all;
 *    with batch_segs <= 1 only the oldest;
 *  - progress_resends posts at least batch_segs per pass
 *    (max(max_resends_per_iteration, batch_segs)).
 *
 * The fixture's recording wire, with its flush wrapped to remember how
 * many posts had been made at each flush.
 */
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define ISN 1000u
#define PEER_ISN 5000u
#define OWN MCA_BTL_DES_FLAGS_BTL_OWNERSHIP
#define DATA_SIZE 1000 /* one FRAG, too big for the priority channel: queued, posted by progress */

/* ---------------- a fixture that remembers its flushes ---------------- */

typedef struct {
    fx_t fx;                 /* first: the wire maps the engine back to it */
    size_t flush_at[256];    /* fx.nposts at each flush */
    unsigned nflush;
} qx_t;

static opal_btl_usnic_wire_ops_t qx_wire;

static void qx_flush(opal_btl_usnic_engine_t *eng)
{
    qx_t *q = (qx_t *) fx_of(eng);
    fx_wire_ops()->flush(eng); /* counts fx.flushes */
    if (q->nflush < 256) {
        q->flush_at[q->nflush] = q->fx.nposts;
    }
    ++q->nflush;
}

static void qx_init(qx_t *q, uint32_t batch_segs, uint32_t max_resends, uint32_t data_credits)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.batch_segs = batch_segs;
    if (max_resends) {
        p.max_resends_per_iteration = max_resends;
    }
    if (data_credits) {
        p.sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = data_credits;
    }
    qx_wire = *fx_wire_ops();
    qx_wire.flush = qx_flush;
    memset(q, 0, sizeof(*q));
    fx_init_with_wire(&q->fx, &p, &qx_wire, NULL);
}

/* Queue |n| fragments of |size| bytes to |ep| in the engine's queue alone
 * (opal_btl_usnic_frag_submit): btl_send (fx_send) would post them at
 * once while nothing is in flight, and these tests are about what the send
 * progression and send_now do with a queue */
static void queue_frags(fx_t *fx, opal_btl_usnic_endpoint_t *ep, unsigned n, size_t size)
{
    for (unsigned i = 0; i < n; ++i) {
        opal_btl_usnic_send_frag_t *frag = fx_alloc(fx, ep, size, OWN);
        if (NULL == frag) {
            FAILF("no fragment");
            return;
        }
        fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, size, i);
        opal_btl_usnic_engine_set_time(&fx->eng, fx->now);
        if (0 != opal_btl_usnic_frag_submit(ep, frag, 7)) {
            FAILF("fragment %u not queued", i);
        }
    }
}

/* The expected post order of one round-robin pass: endpoints 0..n-1 got
 * ready in that order, each with segs[i] segments; each turn posts up to
 * |quantum|, while |*credits| lasts; an endpoint with segments left goes
 * to the back of the list.  Writes endpoint indices to |out|; returns how
 * many.  |segs| and |*credits| are consumed (call again for the next pass). */
static unsigned rr_pass(unsigned n, unsigned *segs, int *list, unsigned *nlist, unsigned quantum, unsigned *credits,
                        int *out)
{
    unsigned k = 0;
    while (*nlist > 0 && *credits > 0) {
        int e = list[0];
        memmove(list, list + 1, (*nlist - 1) * sizeof(*list));
        --*nlist;
        for (unsigned t = 0; t < quantum && segs[e] > 0 && *credits > 0; ++t) {
            out[k++] = e;
            --segs[e];
            --*credits;
        }
        if (segs[e] > 0) {
            list[(*nlist)++] = e;
        }
    }
    (void) n;
    return k;
}

static void print_order(const char *what, const int *order, unsigned n)
{
    fprintf(stderr, "  %s:", what);
    for (unsigned i = 0; i < n; ++i) {
        fprintf(stderr, " %c", 'A' + order[i]);
    }
    fprintf(stderr, "\n");
}

/* ---------------- the quantum ---------------- */

/* One endpoint: one progress pass posts all that its window allows, in
 * sequence order, and flushes once, after the last post */
static void test_quantum_one_endpoint(void)
{
    static const uint32_t batches[] = {0, 1, 8, 44};
    for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); ++b) {
        qx_t q;
        qx_init(&q, batches[b], 0, 0);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
        queue_frags(&q.fx, ep, 20, DATA_SIZE);
        CHECK_EQ(q.fx.nposts, 0);
        CHECK_EQ(q.nflush, 0);
        CHECK_EQ(fx_progress(&q.fx), 20);
        REQUIRE_EQ(q.fx.nposts, 20);
        for (unsigned i = 0; i < 20; ++i) {
            CHECK_EQ_U(fx_post_seq(&q.fx.posts[i]), ISN + i);
            CHECK_EQ(q.fx.posts[i].channel, OPAL_BTL_USNIC_DATA_CHANNEL);
        }
        CHECK_EQ(q.nflush, 1);
        CHECK_EQ(q.flush_at[0], 20);
        CHECK_EQ(q.fx.flushes, 1);
        fx_complete_all(&q.fx);
        opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 19);
        CHECK(fx_all_recycled(&q.fx));
        fx_fini(&q.fx);
    }
    /* the window ends a turn: 16 of 20, the rest after the ACK */
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 16, ISN, PEER_ISN);
    queue_frags(&q.fx, ep, 20, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 16);
    CHECK_EQ(q.nflush, 1);
    CHECK_EQ(fx_progress(&q.fx), 0); /* nothing to post: no flush */
    CHECK_EQ(q.nflush, 1);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 15);
    CHECK_EQ(fx_progress(&q.fx), 4);
    CHECK_EQ(q.nflush, 2);
    CHECK_EQ(q.flush_at[1], 20);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 19);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* Several endpoints: turns of up to batch_segs segments each, round-robin
 * in the order the endpoints got ready */
static void test_quantum_round_robin_table(void)
{
    static const uint32_t batches[] = {0, 1, 2, 3, 5, 8, 16, 44};
    static const struct {
        const char *name;
        unsigned n;
        unsigned segs[3];
    } sets[] = {
        {"A 16, B 16", 2, {16, 16, 0}},
        {"A 20, B 5", 2, {20, 5, 0}},
        {"A 1, B 16", 2, {1, 16, 0}},
        {"A 10, B 10, C 10", 3, {10, 10, 10}},
        {"A 3, B 30, C 7", 3, {3, 30, 7}},
    };
    for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); ++b) {
        for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); ++s) {
            qx_t q;
            qx_init(&q, batches[b], 0, 0);
            opal_btl_usnic_endpoint_t *eps[3];
            for (unsigned e = 0; e < sets[s].n; ++e) {
                eps[e] = fx_ep_new(&q.fx, PEER + e, 64, ISN + 100 * e, PEER_ISN);
            }
            for (unsigned e = 0; e < sets[s].n; ++e) {
                queue_frags(&q.fx, eps[e], sets[s].segs[e], DATA_SIZE);
            }
            unsigned segs[3] = {sets[s].segs[0], sets[s].segs[1], sets[s].segs[2]};
            int list[3] = {0, 1, 2}, want[128], got[128];
            unsigned nlist = sets[s].n, credits = 1024;
            unsigned quantum = batches[b] > 1 ? batches[b] : 1;
            unsigned nwant = rr_pass(sets[s].n, segs, list, &nlist, quantum, &credits, want);
            int posted = fx_progress(&q.fx);
            bool ok = CHECK_EQ(posted, (int) nwant);
            ok = CHECK_EQ(q.fx.nposts, nwant) && ok;
            unsigned ngot = q.fx.nposts < 128 ? (unsigned) q.fx.nposts : 128;
            uint32_t next[3] = {ISN, ISN + 100, ISN + 200};
            for (unsigned i = 0; i < ngot; ++i) {
                got[i] = -1;
                for (unsigned e = 0; e < sets[s].n; ++e) {
                    if (q.fx.posts[i].ep == eps[e]) {
                        got[i] = (int) e;
                        /* and each endpoint's own segments in sequence order */
                        ok = CHECK_EQ_U(fx_post_seq(&q.fx.posts[i]), next[e]++) && ok;
                    }
                }
                ok = CHECK_EQ(got[i], want[i]) && ok;
            }
            ok = CHECK_EQ(q.nflush, 1) && ok;
            ok = CHECK_EQ(q.flush_at[0], nwant) && ok;
            if (!ok) {
                fprintf(stderr, "  batch_segs %u, %s\n", batches[b], sets[s].name);
                print_order("expected", want, nwant);
                print_order("posted  ", got, ngot);
            }
            fx_complete_all(&q.fx);
            for (unsigned e = 0; e < sets[s].n; ++e) {
                opal_btl_usnic_handle_ack(&q.fx.eng, eps[e], ISN + 100 * e + sets[s].segs[e] - 1);
            }
            CHECK(fx_all_recycled(&q.fx));
            fx_fini(&q.fx);
        }
    }
}

/* The quantum counts segments: a large fragment's chunks are cut by it
 * (A: one fragment of 11 chunks; B: 16 small ones) */
static void test_quantum_counts_chunks(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *a = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
    opal_btl_usnic_endpoint_t *b = fx_ep_new(&q.fx, PEER + 1, 64, ISN + 100, PEER_ISN);
    const size_t big = 10 * FX_MAX_CHUNK_PAYLOAD + 100; /* 11 chunks */
    queue_frags(&q.fx, a, 1, big);
    queue_frags(&q.fx, b, 16, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 27);
    REQUIRE_EQ(q.fx.nposts, 27);
    static const struct {
        unsigned from, to;
        int who;
    } turns[] = {{0, 8, 0}, {8, 16, 1}, {16, 19, 0}, {19, 27, 1}};
    for (size_t t = 0; t < 4; ++t) {
        for (unsigned i = turns[t].from; i < turns[t].to; ++i) {
            const fx_post_t *p = &q.fx.posts[i];
            if (!CHECK_PTR_EQ(p->ep, turns[t].who ? b : a)) {
                fprintf(stderr, "  post %u\n", i);
            }
            CHECK_EQ(fx_post_hdr(p)->type, turns[t].who ? OPAL_BTL_USNIC_PKT_FRAG : OPAL_BTL_USNIC_PKT_CHUNK);
        }
    }
    CHECK_EQ(q.nflush, 1);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, a, ISN + 10);
    opal_btl_usnic_handle_ack(&q.fx.eng, b, ISN + 115);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* Data credits end a pass (and may end a turn early); the next pass goes
 * on round-robin where this one stopped */
static void test_quantum_credit_limited(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 12);
    opal_btl_usnic_endpoint_t *eps[2];
    eps[0] = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
    eps[1] = fx_ep_new(&q.fx, PEER + 1, 64, ISN + 100, PEER_ISN);
    queue_frags(&q.fx, eps[0], 16, DATA_SIZE);
    queue_frags(&q.fx, eps[1], 16, DATA_SIZE);
    unsigned segs[2] = {16, 16};
    int list[2] = {0, 1};
    unsigned nlist = 2;
    size_t done = 0;
    for (int pass = 0; pass < 4; ++pass) {
        unsigned credits = (unsigned) q.fx.eng.credits[OPAL_BTL_USNIC_DATA_CHANNEL];
        int want[32];
        unsigned nwant = rr_pass(2, segs, list, &nlist, 8, &credits, want);
        int posted = fx_progress(&q.fx);
        bool ok = CHECK_EQ(posted, (int) nwant);
        ok = CHECK_LE(posted, 12) && ok;
        for (unsigned i = 0; ok && i < nwant; ++i) {
            ok = CHECK_PTR_EQ(q.fx.posts[done + i].ep, eps[want[i]]);
        }
        if (!ok) {
            fprintf(stderr, "  pass %d\n", pass);
            print_order("expected", want, nwant);
        }
        done = q.fx.nposts;
        fx_complete_all(&q.fx); /* the credits come back */
    }
    CHECK_EQ(q.fx.nposts, 32);
    CHECK_EQ(q.nflush, 3); /* passes that posted: 12, 12, 8; the fourth posted nothing */
    opal_btl_usnic_handle_ack(&q.fx.eng, eps[0], ISN + 15);
    opal_btl_usnic_handle_ack(&q.fx.eng, eps[1], ISN + 115);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* ---------------- flushes ---------------- */

static void test_flush_points(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
    /* progress with nothing to do: no flush */
    for (int i = 0; i < 5; ++i) {
        CHECK_EQ(fx_progress(&q.fx), 0);
    }
    CHECK_EQ(q.nflush, 0);
    /* the PML's send of a queued fragment leaves at once (send_now),
     * flushed after its posts */
    queue_frags(&q.fx, ep, 3, DATA_SIZE);
    CHECK_EQ(q.fx.nposts, 0); /* only submitted (btl_send would call send_now too) */
    CHECK_EQ(opal_btl_usnic_engine_send_now(&q.fx.eng), 3);
    CHECK_EQ(q.nflush, 1);
    CHECK_EQ(q.flush_at[0], 3);
    /* with data in flight send_now leaves it to progress: no post, no flush */
    queue_frags(&q.fx, ep, 2, DATA_SIZE);
    CHECK_EQ(opal_btl_usnic_engine_send_now(&q.fx.eng), 0);
    CHECK_EQ(q.nflush, 1);
    CHECK_EQ(fx_progress(&q.fx), 2);
    CHECK_EQ(q.nflush, 2);
    CHECK_EQ(q.flush_at[1], 5);
    /* a tiny fragment behind un-ACKed data follows it on the data
     * channel, flushed at once (the fast path) */
    FX_SEND_TINY(&q.fx, ep, 1, NULL);
    CHECK_EQ(q.fx.nposts, 6);
    CHECK_EQ(fx_last_post(&q.fx)->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
    CHECK_EQ(q.nflush, 3);
    CHECK_EQ(q.flush_at[2], 6);
    fx_complete_all(&q.fx);
    /* an expiry alone posts nothing */
    CHECK(fx_expire_next(&q.fx));
    CHECK_EQ(q.nflush, 3);
    /* the resends go by progress, flushed */
    size_t before = q.fx.nposts;
    int n = fx_progress(&q.fx);
    CHECK_GT(n, 0);
    CHECK_EQ(q.nflush, 4);
    CHECK_EQ(q.flush_at[3], before + (size_t) n);
    fx_complete_all(&q.fx);
    /* an explicit ACK alone is a post too: flushed */
    uint8_t buf[FX_MTU];
    uint32_t seq = PEER_ISN + 1; /* out of order: ACKed at the next pass */
    fx_recv(&q.fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)));
    before = q.fx.nposts;
    CHECK_EQ(fx_progress(&q.fx), 1);
    CHECK_EQ(fx_post_hdr(&q.fx.posts[before])->type, OPAL_BTL_USNIC_PKT_ACK);
    CHECK_EQ(q.nflush, 5);
    fx_complete_all(&q.fx);
    /* the owner away: resend_away flushes its copies */
    fx_set_time(&q.fx, q.fx.now + 100000);
    before = q.fx.nposts;
    int copies = opal_btl_usnic_resend_away(&q.fx.eng);
    CHECK_EQ(copies, 6);
    CHECK_EQ(q.nflush, 6);
    CHECK_EQ(q.flush_at[5], before + 6);
    /* within its back-off it does nothing, and flushes nothing */
    CHECK_EQ(opal_btl_usnic_resend_away(&q.fx.eng), 0);
    CHECK_EQ(q.nflush, 6);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 5);
    /* nothing un-ACKed: a tiny fragment takes the priority channel, which
     * holds nothing back: no flush */
    FX_SEND_TINY(&q.fx, ep, 1, NULL);
    CHECK_EQ(fx_last_post(&q.fx)->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    CHECK_EQ(q.nflush, 6);
    fx_complete_all(&q.fx);
    CHECK_EQ(q.fx.flushes, q.nflush);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 6);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* ---------------- the run retransmission ---------------- */

static bool queued_exactly(fx_t *fx, opal_btl_usnic_endpoint_t *ep, uint32_t first, unsigned count, uint64_t want)
{
    bool ok = true;
    for (unsigned i = 0; i < count; ++i) {
        opal_btl_usnic_send_seg_t *seg = ep->tx.sent[(first + i) % ep->window];
        bool is = NULL != seg && FX_FLAG(seg, ON_RESEND);
        if (is != (bool) ((want >> i) & 1)) {
            fprintf(stderr, "  seq 0x%x: ON_RESEND %d, expected %d\n", first + i, is, (int) ((want >> i) & 1));
            ok = false;
        }
    }
    /* nothing twice on the list */
    size_t n = 0;
    for (unsigned i = 0; i < count; ++i) {
        n += (want >> i) & 1;
    }
    if (fx_resend_len(fx) != n) {
        fprintf(stderr, "  %zu segments on the resend list, %zu expected\n", fx_resend_len(fx), n);
        ok = false;
    }
    return ok;
}

#define BITS(from, n) ((((1ull << (n)) - 1)) << (from))
#define BIT(i) (1ull << (i))

/* A timeout resends the oldest segment's batch: the following in-flight
 * segments sent at the same time, up to batch_segs in all; progress posts
 * the whole run in one pass even with max_resends_per_iteration 2 */
static void test_run_timeout_resends_batch(void)
{
    qx_t q;
    qx_init(&q, 8, 2, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
    queue_frags(&q.fx, ep, 12, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 12); /* all at 0 */
    fx_complete_all(&q.fx);
    CHECK(fx_expire_next(&q.fx));
    CHECK_EQ_U(q.fx.now, FX_RTO_INITIAL);
    CHECK(queued_exactly(&q.fx, ep, ISN, 12, BITS(0, 8)));
    CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, 8);
    for (unsigned i = 8; i < 12; ++i) {
        opal_btl_usnic_send_seg_t *seg = ep->tx.sent[(ISN + i) % 64];
        CHECK(FX_FLAG(seg, IN_HOTEL)); /* beyond the batch: still waiting */
    }
    CHECK(fx_hotel_consistent(&q.fx));
    size_t before = q.fx.nposts;
    unsigned flushes = q.nflush;
    CHECK_EQ(fx_progress(&q.fx), 8); /* the resend budget is at least a batch */
    REQUIRE_EQ(q.fx.nposts, before + 8);
    for (unsigned i = 0; i < 8; ++i) {
        const fx_post_t *p = &q.fx.posts[before + i];
        CHECK_EQ_U(fx_post_seq(p), ISN + i);
        CHECK_EQ(p->channel, OPAL_BTL_USNIC_DATA_CHANNEL);
        CHECK_EQ(fx_post_hdr(p)->flags & (OPAL_BTL_USNIC_HDR_FLAG_RETX | OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT),
                 OPAL_BTL_USNIC_HDR_FLAG_RETX | OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT);
    }
    CHECK_EQ(q.nflush, flushes + 1);
    CHECK_EQ(q.flush_at[q.nflush - 1], before + 8);
    fx_complete_all(&q.fx);
    /* the next timeout (backed off: 1000 + 2000) resends the same batch:
     * the 8 were resent together */
    CHECK(fx_expire_next(&q.fx));
    CHECK_EQ_U(q.fx.now, 3 * FX_RTO_INITIAL);
    CHECK(queued_exactly(&q.fx, ep, ISN, 12, BITS(0, 8)));
    CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, 16);
    CHECK_EQ(fx_progress(&q.fx), 8);
    fx_complete_all(&q.fx);
    /* the first 8 ACKed: a partial ACK in recovery resends the new oldest
     * (overdue) at once, alone */
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 7);
    CHECK(queued_exactly(&q.fx, ep, ISN + 8, 4, BIT(0)));
    CHECK_EQ(fx_progress(&q.fx), 1);
    fx_complete_all(&q.fx);
    /* its timeout takes along the segments sent no later than it: ISN+9..11
     * (sent at 0, before its resend) */
    CHECK(fx_run_to_timeout(&q.fx));
    CHECK(queued_exactly(&q.fx, ep, ISN + 8, 4, BITS(0, 4)));
    CHECK_EQ(fx_progress(&q.fx), 4);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 11);
    CHECK(fx_hotel_consistent(&q.fx));
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* Segments sent after the oldest are not in its run: it stops at the
 * first one sent later */
static void test_run_stops_at_later_segments(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
    queue_frags(&q.fx, ep, 3, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 3); /* at 0 */
    fx_set_time(&q.fx, 10);
    queue_frags(&q.fx, ep, 5, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 5); /* at 10 */
    fx_complete_all(&q.fx);
    CHECK(fx_expire_next(&q.fx));
    CHECK(queued_exactly(&q.fx, ep, ISN, 8, BITS(0, 3)));
    CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, 3);
    fx_progress(&q.fx);
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 7);
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* An explicit ACK from PEER with selective-ACK ranges {start, len} */
static void rx_ranges(fx_t *fx, uint32_t ack, const uint16_t (*r)[2], unsigned n)
{
    uint8_t buf[FX_ACK_HDR];
    size_t len = fx_build_ack(buf, PEER, ack);
    opal_btl_usnic_ack_hdr_t *a = (opal_btl_usnic_ack_hdr_t *) buf;
    a->nranges = (uint8_t) n;
    for (unsigned i = 0; i < n; ++i) {
        a->range[i].start = opal_btl_usnic_wire16(r[i][0]);
        a->range[i].len = opal_btl_usnic_wire16(r[i][1]);
    }
    fx_recv(fx, buf, len);
}

/* The run skips what the peer reported held (SACKED) and what is already
 * queued (no segment twice on the list), within the oldest's batch of
 * batch_segs positions */
static void test_run_skips_sacked_and_queued(void)
{
    qx_t q;
    qx_init(&q, 8, 0, 0);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
    queue_frags(&q.fx, ep, 10, DATA_SIZE);
    CHECK_EQ(fx_progress(&q.fx), 10);
    fx_complete_all(&q.fx);
    /* at once (not overdue): ISN+2 and ISN+3 held, nothing resent */
    static const uint16_t r[][2] = {{1, 2}};
    rx_ranges(&q.fx, ISN - 1, r, 1);
    CHECK_EQ(fx_resend_len(&q.fx), 0);
    /* ISN+5's own timer fired (the owner's view of a timer store that
     * fires per segment): queued before the oldest times out */
    fx_set_time(&q.fx, 500);
    opal_btl_usnic_retrans_expired(&q.fx.eng, ep->tx.sent[(ISN + 5) % 64]);
    CHECK_EQ(fx_resend_len(&q.fx), 1);
    CHECK(fx_expire_next(&q.fx));
    /* the batch: positions 0..7; ISN+2, ISN+3 held, ISN+5 queued already */
    CHECK(queued_exactly(&q.fx, ep, ISN, 10, BITS(0, 2) | BITS(4, 4)));
    CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, 1 + 5);
    opal_btl_usnic_send_seg_t *s2 = ep->tx.sent[(ISN + 2) % 64];
    CHECK(FX_FLAG(s2, SACKED) && !FX_FLAG(s2, ON_RESEND) && !FX_FLAG(s2, TIMED_OUT));
    size_t before = q.fx.nposts;
    CHECK_EQ(fx_progress(&q.fx), 6);
    for (size_t i = before; i < q.fx.nposts; ++i) {
        uint32_t s = fx_post_seq(&q.fx.posts[i]);
        CHECK(s != ISN + 2 && s != ISN + 3 && s < ISN + 8);
    }
    fx_complete_all(&q.fx);
    opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + 9);
    CHECK(fx_hotel_consistent(&q.fx));
    CHECK(fx_all_recycled(&q.fx));
    fx_fini(&q.fx);
}

/* How many a timeout queues: min(batch_segs, in flight) of one batch;
 * with batch_segs 0 or 1 only the oldest (test_timer's rule) */
static void test_run_length_table(void)
{
    static const struct {
        uint32_t batch;
        unsigned in_flight;
        unsigned expect;
    } cases[] = {
        {0, 12, 1}, {1, 12, 1}, {2, 12, 2}, {8, 12, 8}, {8, 5, 5}, {8, 8, 8}, {8, 1, 1},
        {16, 12, 12}, {44, 50, 44}, {44, 44, 44}, {64, 64, 64},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        qx_t q;
        qx_init(&q, cases[c].batch, 0, 0);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
        queue_frags(&q.fx, ep, cases[c].in_flight, DATA_SIZE);
        CHECK_EQ(fx_progress(&q.fx), (int) cases[c].in_flight);
        fx_complete_all(&q.fx);
        CHECK(fx_expire_next(&q.fx));
        uint64_t want = cases[c].expect >= 64 ? ~0ull : BITS(0, cases[c].expect);
        bool ok = CHECK(queued_exactly(&q.fx, ep, ISN, cases[c].in_flight, want));
        ok = CHECK_EQ_U(q.fx.eng.stats.num_timeout_retrans, cases[c].expect) && ok;
        /* and progress posts them all in one pass when batch_segs allows
         * (the budget is max(16, batch_segs)) */
        unsigned budget = cases[c].batch > 16 ? cases[c].batch : 16;
        ok = CHECK_EQ(fx_progress(&q.fx), (int) (cases[c].expect < budget ? cases[c].expect : budget)) && ok;
        if (!ok) {
            fprintf(stderr, "  batch_segs %u, %u in flight\n", cases[c].batch, cases[c].in_flight);
        }
        fx_complete_all(&q.fx);
        opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + cases[c].in_flight - 1);
        fx_progress(&q.fx);
        fx_complete_all(&q.fx);
        CHECK(fx_all_recycled(&q.fx));
        fx_fini(&q.fx);
    }
}

/* Resends per pass: max(max_resends_per_iteration, batch_segs) */
static void test_resend_budget(void)
{
    static const struct {
        uint32_t batch, max_resends;
        unsigned queued;
        unsigned per_pass;
    } cases[] = {
        {1, 2, 12, 2}, {0, 2, 12, 2}, {8, 2, 12, 8}, {8, 16, 12, 12}, {8, 4, 12, 8}, {44, 16, 50, 44},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        qx_t q;
        qx_init(&q, cases[c].batch, cases[c].max_resends, 0);
        opal_btl_usnic_endpoint_t *ep = fx_ep_new(&q.fx, PEER, 64, ISN, PEER_ISN);
        unsigned n = cases[c].queued + 1;
        queue_frags(&q.fx, ep, n, DATA_SIZE);
        fx_progress(&q.fx);
        fx_complete_all(&q.fx);
        /* the last one held, every other a hole overdue: all queued by the ranges */
        fx_set_time(&q.fx, FX_RTO_MIN);
        const uint16_t r[][2] = {{(uint16_t) (n - 2), 1}};
        rx_ranges(&q.fx, ISN - 1, r, 1);
        bool ok = CHECK_EQ(fx_resend_len(&q.fx), cases[c].queued);
        unsigned left = cases[c].queued, passes = 0;
        while (left > 0 && passes < 100) {
            unsigned want = left < cases[c].per_pass ? left : cases[c].per_pass;
            ok = CHECK_EQ(fx_progress(&q.fx), (int) want) && ok;
            fx_complete_all(&q.fx);
            left -= want;
            ++passes;
        }
        ok = CHECK_EQ(fx_resend_len(&q.fx), 0) && ok;
        if (!ok) {
            fprintf(stderr, "  batch_segs %u, max_resends_per_iteration %u\n", cases[c].batch, cases[c].max_resends);
        }
        opal_btl_usnic_handle_ack(&q.fx.eng, ep, ISN + n - 1);
        CHECK(fx_all_recycled(&q.fx));
        fx_fini(&q.fx);
    }
}

UNIT_MAIN(UNIT_TEST(test_quantum_one_endpoint), UNIT_TEST(test_quantum_round_robin_table),
          UNIT_TEST(test_quantum_counts_chunks), UNIT_TEST(test_quantum_credit_limited), UNIT_TEST(test_flush_points),
          UNIT_TEST(test_run_timeout_resends_batch), UNIT_TEST(test_run_stops_at_later_segments),
          UNIT_TEST(test_run_skips_sacked_and_queued), UNIT_TEST(test_run_length_table),
          UNIT_TEST(test_resend_budget))
