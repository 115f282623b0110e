/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Point-to-point and collective cases: ping-pong, ping-ping, sendrecv
 * rings, many nonblocking messages in both directions (some synchronous,
 * same tags so that MPI's non-overtaking order is tested), ANY_SOURCE,
 * probes, persistent requests, and broadcasts, each message with random
 * types on both sides and a receive count larger than the message.
 */
#include "stress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int src, dst, tag;
    dtype_t st, rt;
    size_t scount, rcount, elems;
    uint64_t salt;
    bool sync;             /* MPI_Issend / MPI_Ssend */
    uint8_t fill;          /* what the receive buffer holds where nothing lands */
    tbuf_t sbuf, rbuf;
    MPI_Request sreq, rreq;
    MPI_Status status;
} msg_t;

#define MAX_MSGS 24

/* ----- planning (identical on every rank) ----- */

static int pick_base(stress_case_t *c)
{
    return (int) rng_range(&c->rng, 0, BASE_COUNT - 1);
}

static dtype_opts_t type_opts(stress_case_t *c, size_t bytes)
{
    dtype_opts_t o = {.max_depth = 3, .simple = bytes > (8u << 20) || rng_pct(&c->rng, 20)};
    return o;
}

static size_t div_up(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* Plan message |m|: types, counts (the receive count may exceed the
 * message), values */
static void msg_plan(stress_case_t *c, msg_t *m, int src, int dst, int tag, int base, size_t bytes)
{
    memset(m, 0, sizeof(*m));
    m->src = src;
    m->dst = dst;
    m->tag = tag;
    dtype_opts_t o = type_opts(c, bytes);
    dtype_random(&c->rng, base, &o, &m->st);
    dtype_random(&c->rng, base, &o, &m->rt);
    size_t want = bytes / base_payload(base);
    m->scount = (want + (size_t) m->st.nmap / 2) / (size_t) m->st.nmap;
    m->elems = m->scount * (size_t) m->st.nmap;
    m->rcount = div_up(m->elems, (size_t) m->rt.nmap) + (size_t) rng_range(&c->rng, 0, 2);
    m->salt = rng_next(&c->rng);
    m->sync = rng_pct(&c->rng, 15);
    m->fill = (uint8_t) (0xa5 ^ (m->salt >> 56));
}

static void msg_unplan(msg_t *m)
{
    dtype_free(&m->st);
    dtype_free(&m->rt);
}

/* ----- the sender's and the receiver's side ----- */

static void msg_fill(msg_t *m)
{
    tbuf_alloc(&m->sbuf, &m->st, m->scount, -1, m->salt ^ 0x5e4d);
    tbuf_store(&m->sbuf, &m->st, m->elems, m->salt);
}

static void msg_expect_room(msg_t *m)
{
    tbuf_alloc(&m->rbuf, &m->rt, m->rcount, m->fill, 0);
}

static void msg_isend(msg_t *m)
{
    msg_fill(m);
    if (m->sync) {
        MPI_Issend(m->sbuf.origin, (int) m->scount, m->st.dt, m->dst, m->tag, MPI_COMM_WORLD, &m->sreq);
    } else {
        MPI_Isend(m->sbuf.origin, (int) m->scount, m->st.dt, m->dst, m->tag, MPI_COMM_WORLD, &m->sreq);
    }
}

static void msg_irecv(msg_t *m, int src)
{
    msg_expect_room(m);
    MPI_Irecv(m->rbuf.origin, (int) m->rcount, m->rt.dt, src, m->tag, MPI_COMM_WORLD, &m->rreq);
}

/* Check what |m| received against the model; fold it into the digest */
static void msg_verify(stress_case_t *c, msg_t *m, const char *how)
{
    char what[96];
    tbuf_t want;
    tbuf_alloc(&want, &m->rt, m->rcount, m->fill, 0);
    tbuf_store(&want, &m->rt, m->elems, m->salt);
    snprintf(what, sizeof(what), "%s %d->%d tag %d, %zu B", how, m->src, m->dst, m->tag,
             m->elems * base_payload(m->st.base));
    if (!case_check(c, what, &m->rbuf, &want, &m->rt, m->rcount)) {
        printf("    send type %s x %zu; receive type %s x %zu\n", m->st.desc, m->scount, m->rt.desc, m->rcount);
    }
    int n = -1;
    MPI_Get_elements(&m->status, m->rt.dt, &n);
    if (m->status.MPI_SOURCE != m->src || (long) n != (long) m->elems * base_basics(m->st.base)) {
        case_fail(c, "%s: status says source %d, %d basic elements; sent %zu", what, m->status.MPI_SOURCE, n,
                  m->elems * (size_t) base_basics(m->st.base));
    }
    c->digest = digest_bytes(c->digest ^ (uint64_t) m->src, m->rbuf.mem, m->rbuf.span);
    tbuf_free(&want);
}

static void msg_release(msg_t *m)
{
    tbuf_free(&m->sbuf);
    tbuf_free(&m->rbuf);
    msg_unplan(m);
}

static void msgs_release(msg_t *ms, int n)
{
    for (int i = 0; i < n; ++i) {
        msg_release(&ms[i]);
    }
}

/* ----- patterns ----- */

static void pick_pair(stress_case_t *c, int *a, int *b)
{
    *a = (int) rng_range(&c->rng, 0, c->nranks - 1);
    *b = (*a + (int) rng_range(&c->rng, 1, c->nranks - 1)) % c->nranks;
}

/* Blocking send or receive of |m| by whoever it concerns */
static void msg_blocking(stress_case_t *c, msg_t *m, const char *how)
{
    if (c->rank == m->src) {
        msg_fill(m);
        if (m->sync) {
            MPI_Ssend(m->sbuf.origin, (int) m->scount, m->st.dt, m->dst, m->tag, MPI_COMM_WORLD);
        } else {
            MPI_Send(m->sbuf.origin, (int) m->scount, m->st.dt, m->dst, m->tag, MPI_COMM_WORLD);
        }
    } else if (c->rank == m->dst) {
        msg_expect_room(m);
        MPI_Recv(m->rbuf.origin, (int) m->rcount, m->rt.dt, m->src, m->tag, MPI_COMM_WORLD, &m->status);
        msg_verify(c, m, how);
    }
}

static void pat_pingpong(stress_case_t *c, int base)
{
    msg_t ms[6];
    int a, b, reps = (int) rng_range(&c->rng, 1, 3);
    pick_pair(c, &a, &b);
    snprintf(c->what, sizeof(c->what), "ping-pong %d<->%d x%d, %s", a, b, reps, base_name(base));
    for (int i = 0; i < 2 * reps; ++i) {
        msg_plan(c, &ms[i], i % 2 ? b : a, i % 2 ? a : b, 7, base, case_pick_bytes(c));
    }
    case_enter(c, "ping-pong");
    for (int i = 0; i < 2 * reps; ++i) {
        msg_blocking(c, &ms[i], "ping-pong");
    }
    msgs_release(ms, 2 * reps);
}

/* Both peers send first, then receive */
static void pat_pingping(stress_case_t *c, int base)
{
    msg_t ms[2];
    int a, b;
    pick_pair(c, &a, &b);
    snprintf(c->what, sizeof(c->what), "ping-ping %d<->%d, %s", a, b, base_name(base));
    msg_plan(c, &ms[0], a, b, 9, base, case_pick_bytes(c));
    msg_plan(c, &ms[1], b, a, 9, base, case_pick_bytes(c));
    case_enter(c, "ping-ping");
    if (c->rank == a || c->rank == b) {
        msg_t *out = c->rank == a ? &ms[0] : &ms[1], *in = c->rank == a ? &ms[1] : &ms[0];
        msg_isend(out);
        msg_expect_room(in);
        MPI_Recv(in->rbuf.origin, (int) in->rcount, in->rt.dt, in->src, in->tag, MPI_COMM_WORLD, &in->status);
        MPI_Wait(&out->sreq, MPI_STATUS_IGNORE);
        msg_verify(c, in, "ping-ping");
    }
    msgs_release(ms, 2);
}

/* Everybody MPI_Sendrecv's along a ring shifted by |shift| */
static void pat_sendrecv(stress_case_t *c, int base)
{
    msg_t ms[8];
    int n = c->nranks, shift = (int) rng_range(&c->rng, 1, n - 1);
    snprintf(c->what, sizeof(c->what), "sendrecv ring shift %d, %s", shift, base_name(base));
    for (int r = 0; r < n; ++r) {
        msg_plan(c, &ms[r], r, (r + shift) % n, 11, base, case_pick_bytes(c));
    }
    case_enter(c, "sendrecv");
    msg_t *out = &ms[c->rank], *in = &ms[(c->rank - shift + n) % n];
    msg_fill(out);
    msg_expect_room(in);
    MPI_Sendrecv(out->sbuf.origin, (int) out->scount, out->st.dt, out->dst, out->tag, in->rbuf.origin,
                 (int) in->rcount, in->rt.dt, in->src, in->tag, MPI_COMM_WORLD, &in->status);
    msg_verify(c, in, "sendrecv");
    msgs_release(ms, n);
}

/* Many nonblocking messages between random pairs, both directions, with
 * few distinct tags: messages of one pair and tag must match in order */
static void pat_many(stress_case_t *c, int base, bool probe)
{
    msg_t ms[MAX_MSGS];
    int n = (int) rng_range(&c->rng, 2, probe ? 8 : MAX_MSGS);
    snprintf(c->what, sizeof(c->what), "%s %d messages, %s", probe ? "probe+recv" : "nonblocking", n,
             base_name(base));
    for (int i = 0; i < n; ++i) {
        int a, b;
        pick_pair(c, &a, &b);
        /* probes need one message per (source, tag) to know which came */
        msg_plan(c, &ms[i], a, b, probe ? 100 + i : (int) rng_range(&c->rng, 20, 22), base, case_pick_bytes(c));
        ms[i].sync = ms[i].sync && !probe;
    }
    case_enter(c, probe ? "probe: isend" : "nonblocking: post");
    bool recv_first = rng_pct(&c->rng, 50);
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < n; ++i) {
            if ((0 == pass) == recv_first && c->rank == ms[i].dst && !probe) {
                msg_irecv(&ms[i], ms[i].src);
            } else if ((0 == pass) != recv_first && c->rank == ms[i].src) {
                msg_isend(&ms[i]);
            }
        }
    }
    if (probe) {
        case_enter(c, "probe: probe and receive");
        for (int i = 0; i < n; ++i) {
            if (c->rank != ms[i].dst) {
                continue;
            }
            MPI_Status st;
            MPI_Probe(i % 2 ? MPI_ANY_SOURCE : ms[i].src, ms[i].tag, MPI_COMM_WORLD, &st);
            int elems = -1;
            MPI_Get_elements(&st, ms[i].rt.dt, &elems);
            if (st.MPI_SOURCE != ms[i].src || (long) elems != (long) ms[i].elems * base_basics(base)) {
                case_fail(c, "probe of message %d: source %d, %d basic elements; sent %zu from %d", i, st.MPI_SOURCE,
                          elems, ms[i].elems * (size_t) base_basics(base), ms[i].src);
            }
            msg_expect_room(&ms[i]);
            MPI_Recv(ms[i].rbuf.origin, (int) ms[i].rcount, ms[i].rt.dt, st.MPI_SOURCE, ms[i].tag, MPI_COMM_WORLD,
                     &ms[i].status);
        }
    }
    case_enter(c, probe ? "probe: wait" : "nonblocking: wait");
    for (int i = 0; i < n; ++i) {
        if (c->rank == ms[i].src) {
            MPI_Wait(&ms[i].sreq, MPI_STATUS_IGNORE);
        }
        if (c->rank == ms[i].dst && !probe) {
            MPI_Wait(&ms[i].rreq, &ms[i].status);
        }
    }
    for (int i = 0; i < n; ++i) {
        if (c->rank == ms[i].dst) {
            msg_verify(c, &ms[i], probe ? "probe" : "nonblocking");
        }
    }
    msgs_release(ms, n);
}

/* Make |m| receive into the shared type |rt| (|rcount| of it) */
static void msg_share_rtype(msg_t *m, const dtype_t *rt, size_t rcount, uint8_t fill)
{
    dtype_free(&m->rt);
    m->rt = *rt;
    m->rt.owned = false; /* the caller frees rt */
    m->rt.map = (MPI_Aint *) malloc((size_t) rt->nmap * sizeof(MPI_Aint));
    memcpy(m->rt.map, rt->map, (size_t) rt->nmap * sizeof(MPI_Aint));
    m->rcount = rcount;
    m->fill = fill;
}

/* The |k|-th message (in sending order) from |src| among |ms| */
static msg_t *nth_from(msg_t **ms, int n, int src, int k)
{
    for (int j = 0; j < n; ++j) {
        if (ms[j]->src == src && 0 == k--) {
            return ms[j];
        }
    }
    return NULL;
}

/* One root receives from everybody with MPI_ANY_SOURCE into one type and
 * count; the messages of one source match its receives in order */
static void pat_anysource(stress_case_t *c, int base)
{
    msg_t ms[MAX_MSGS];
    int root = (int) rng_range(&c->rng, 0, c->nranks - 1), per = (int) rng_range(&c->rng, 1, 3), n = 0;
    snprintf(c->what, sizeof(c->what), "ANY_SOURCE into %d, %d per sender, %s", root, per, base_name(base));
    dtype_t rt;
    dtype_opts_t o = type_opts(c, 1u << 20);
    dtype_random(&c->rng, base, &o, &rt);
    size_t rcount = 0;
    for (int k = 0; k < per; ++k) {
        for (int s = 0; s < c->nranks && n < MAX_MSGS; ++s) {
            if (s != root) {
                msg_plan(c, &ms[n], s, root, 33, base, case_pick_bytes(c) / 4);
                size_t need = div_up(ms[n].elems, (size_t) rt.nmap) + 1;
                rcount = need > rcount ? need : rcount;
                ++n;
            }
        }
    }
    uint8_t fill = ms[0].fill;
    case_enter(c, "ANY_SOURCE");
    for (int i = 0; i < n; ++i) {
        if (c->rank == ms[i].src) {
            msg_isend(&ms[i]);
        }
    }
    if (c->rank == root) {
        msg_t *mine[MAX_MSGS];
        tbuf_t rb[MAX_MSGS];
        MPI_Request rq[MAX_MSGS];
        MPI_Status st[MAX_MSGS];
        int next_of[64] = {0};
        for (int i = 0; i < n; ++i) {
            msg_share_rtype(&ms[i], &rt, rcount, fill);
            mine[i] = &ms[i];
            tbuf_alloc(&rb[i], &rt, rcount, fill, 0);
            MPI_Irecv(rb[i].origin, (int) rcount, rt.dt, MPI_ANY_SOURCE, 33, MPI_COMM_WORLD, &rq[i]);
        }
        MPI_Waitall(n, rq, st);
        for (int i = 0; i < n; ++i) {
            int s = st[i].MPI_SOURCE;
            msg_t *m = s >= 0 && s < 64 ? nth_from(mine, n, s, next_of[s]++) : NULL;
            if (NULL == m) {
                case_fail(c, "ANY_SOURCE receive %d matched an unexpected message from %d", i, s);
                tbuf_free(&rb[i]);
                continue;
            }
            m->rbuf = rb[i];
            m->status = st[i];
        }
        /* in message order, not arrival order: the digest must not depend
         * on which sender came first */
        for (int i = 0; i < n; ++i) {
            if (NULL != ms[i].rbuf.mem) {
                msg_verify(c, &ms[i], "ANY_SOURCE");
            }
        }
    }
    for (int i = 0; i < n; ++i) {
        if (c->rank == ms[i].src) {
            MPI_Wait(&ms[i].sreq, MPI_STATUS_IGNORE);
        }
    }
    msgs_release(ms, n);
    dtype_free(&rt);
}

/* Persistent requests, started several times with new data each time */
static void pat_persistent(stress_case_t *c, int base)
{
    msg_t m;
    int a, b, reps = (int) rng_range(&c->rng, 2, 4);
    pick_pair(c, &a, &b);
    snprintf(c->what, sizeof(c->what), "persistent %d->%d x%d, %s", a, b, reps, base_name(base));
    msg_plan(c, &m, a, b, 44, base, case_pick_bytes(c));
    case_enter(c, "persistent");
    MPI_Request rq = MPI_REQUEST_NULL;
    if (c->rank == a) {
        msg_fill(&m);
        MPI_Send_init(m.sbuf.origin, (int) m.scount, m.st.dt, b, m.tag, MPI_COMM_WORLD, &rq);
    } else if (c->rank == b) {
        msg_expect_room(&m);
        MPI_Recv_init(m.rbuf.origin, (int) m.rcount, m.rt.dt, a, m.tag, MPI_COMM_WORLD, &rq);
    }
    for (int r = 0; r < reps; ++r) {
        m.salt = mix64(m.salt + (uint64_t) r);
        if (c->rank == a) {
            tbuf_store(&m.sbuf, &m.st, m.elems, m.salt);
        } else if (c->rank == b) {
            memset(m.rbuf.mem, m.fill, m.rbuf.span);
        }
        if (MPI_REQUEST_NULL != rq) {
            MPI_Start(&rq);
            MPI_Wait(&rq, &m.status);
        }
        if (c->rank == b) {
            msg_verify(c, &m, "persistent");
        }
    }
    if (MPI_REQUEST_NULL != rq) {
        MPI_Request_free(&rq);
    }
    msg_release(&m);
}

void p2p_case(stress_case_t *c)
{
    int base = pick_base(c);
    switch (rng_range(&c->rng, 0, 7)) {
    case 0: pat_pingpong(c, base); break;
    case 1: pat_pingping(c, base); break;
    case 2: pat_sendrecv(c, base); break;
    case 3:
    case 4: pat_many(c, base, false); break;
    case 5: pat_many(c, base, true); break;
    case 6: pat_anysource(c, base); break;
    default: pat_persistent(c, base); break;
    }
}

/* ----- collectives ----- */

/* A broadcast where every rank has its own type: counts must carry the
 * same number of base elements on every rank */
void coll_case(stress_case_t *c)
{
    int base = pick_base(c), root = (int) rng_range(&c->rng, 0, c->nranks - 1);
    size_t bytes = case_pick_bytes(c) / 2;
    dtype_t t[16];
    int nmaps[16];
    for (int r = 0; r < c->nranks; ++r) {
        dtype_opts_t o = type_opts(c, bytes);
        dtype_random(&c->rng, base, &o, &t[r]);
        nmaps[r] = t[r].nmap;
    }
    size_t elems = elems_round_up(bytes / base_payload(base), nmaps, c->nranks);
    uint64_t salt = rng_next(&c->rng);
    snprintf(c->what, sizeof(c->what), "bcast from %d, %zu B, %s", root, elems * base_payload(base), base_name(base));
    case_enter(c, "bcast");
    dtype_t *me = &t[c->rank];
    size_t count = elems / (size_t) me->nmap;
    tbuf_t buf, want;
    uint8_t fill = (uint8_t) (0x5a ^ salt);
    tbuf_alloc(&buf, me, count, fill, 0);
    tbuf_alloc(&want, me, count, fill, 0);
    tbuf_store(&want, me, elems, salt);
    if (c->rank == root) {
        tbuf_store(&buf, me, elems, salt);
    }
    MPI_Bcast(buf.origin, (int) count, me->dt, root, MPI_COMM_WORLD);
    if (!case_check(c, "bcast", &buf, &want, me, count)) {
        printf("    my type %s x %zu\n", me->desc, count);
    }
    c->digest = digest_bytes(c->digest, buf.mem, buf.span);
    tbuf_free(&buf);
    tbuf_free(&want);
    for (int r = 0; r < c->nranks; ++r) {
        dtype_free(&t[r]);
    }
}

/* ----- named regression shapes ----- */

/* The shape of issue 12's first two reports: 65530 ints sent as a
 * block-hindexed type, received into a three-level type with twice the
 * count; |both_first|: both peers send before they receive (ping-ping) */
static void regress_nested(stress_case_t *c, bool both_first)
{
    msg_t ms[2];
    snprintf(c->what, sizeof(c->what), "%s of 65530 ints, nested receive type",
             both_first ? "ping-ping" : "sendrecv");
    for (int i = 0; i < 2; ++i) {
        memset(&ms[i], 0, sizeof(ms[i]));
        ms[i].src = i;
        ms[i].dst = 1 - i;
        ms[i].tag = 5;
        (void) dtype_named("issue12-send", BASE_INT, &ms[i].st);
        (void) dtype_named("issue12-recv", BASE_INT, &ms[i].rt);
        ms[i].scount = 65530 / 2;
        ms[i].elems = 65530;
        ms[i].rcount = 2 * ms[i].scount;
        ms[i].salt = rng_next(&c->rng);
        ms[i].fill = 0xa5;
    }
    case_enter(c, c->what);
    if (c->rank < 2) {
        msg_t *out = &ms[c->rank], *in = &ms[1 - c->rank];
        msg_expect_room(in);
        if (both_first) {
            msg_isend(out);
            MPI_Recv(in->rbuf.origin, (int) in->rcount, in->rt.dt, in->src, in->tag, MPI_COMM_WORLD, &in->status);
            MPI_Wait(&out->sreq, MPI_STATUS_IGNORE);
        } else {
            msg_fill(out);
            MPI_Sendrecv(out->sbuf.origin, (int) out->scount, out->st.dt, out->dst, out->tag, in->rbuf.origin,
                         (int) in->rcount, in->rt.dt, in->src, in->tag, MPI_COMM_WORLD, &in->status);
        }
        msg_verify(c, in, c->what);
    }
    msgs_release(ms, 2);
}

/* Issue 12: a 4-rank broadcast of one int+double element, many times */
static void regress_bcast_pair(stress_case_t *c)
{
    snprintf(c->what, sizeof(c->what), "bcast of one int+double");
    case_enter(c, c->what);
    for (int i = 0; i < 200; ++i) {
        uint8_t buf[16], want[16];
        uint32_t v = (uint32_t) rng_next(&c->rng);
        int root = i % c->nranks;
        memset(buf, 0x77, sizeof(buf));
        memset(want, 0x77, sizeof(want));
        base_store(BASE_PAIR, want, v);
        if (c->rank == root) {
            base_store(BASE_PAIR, buf, v);
        }
        MPI_Bcast(buf, 1, base_mpi_type(BASE_PAIR), root, MPI_COMM_WORLD);
        (void) case_check_bytes(c, "bcast of one int+double", buf, want, sizeof(buf), NULL, 0, 0);
        c->digest = digest_bytes(c->digest, buf, sizeof(buf));
    }
}

bool regress_case(stress_case_t *c, const char *name)
{
    if (0 == strcmp(name, "sendrecv-nested")) {
        regress_nested(c, false);
    } else if (0 == strcmp(name, "pingping-nested")) {
        regress_nested(c, true);
    } else if (0 == strcmp(name, "bcast-pair")) {
        regress_bcast_pair(c);
    } else {
        return osc_regress_case(c, name);
    }
    return true;
}
