/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Communication patterns other than ping-pong and streaming (issue 23):
 * one MPI program that runs a chosen list of named patterns, each timed
 * and each verifying every byte it receives.
 *
 *   patterns [--patterns a,b,...|all] [--seed S] [--scale F] [--list]
 *
 * Every pattern
 *   - runs on a communicator of its own (a duplicate of MPI_COMM_WORLD),
 *     after a barrier; its time is the largest wall time of any rank;
 *   - is a pure function of the seed, its name and the job size: the
 *     payload of message k is a slice of a pool of random bytes (the same
 *     on every rank, built from the seed and the pattern's name), at an
 *     offset and of a size drawn from the same generator, so the receiver
 *     knows what the sender sent without being told;
 *   - checks every message it receives (payload, MPI_SOURCE, MPI_TAG,
 *     MPI_Get_count, and that the bytes after the message or between a
 *     datatype's blocks were not written), and afterwards that no stray
 *     message is left; the first mismatch prints
 *     "pattern <name> FAIL rank <r>: <what>" and calls MPI_Abort (exit 3);
 *   - needs a fixed number of ranks (2, 3 or 4); in a job of another size
 *     it prints "pattern <name> ranks <n> skipped (needs <k> ranks)".
 *
 * Output, one line per pattern, from rank 0:
 *   pattern <name> ranks <n> seconds <t> msgs <m> bytes <b> ok
 * msgs = messages (or collective operations) received, summed over the
 * ranks; bytes = their payload bytes.  --scale F multiplies every count
 * (at least 1 of each); --list prints "<name> <ranks> <count> <group>
 * <what>" per pattern, in the order the harnesses run them (one group per
 * mpirun).  Counts are sized so that each pattern takes roughly 0.1-0.5 s
 * over btl/tcp on loopback at scale 1 on a 2-core VM.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_BYTES ((size_t) 8 << 20) /* payload source; messages are slices */
#define POISON 0xA5
#define GUARD 64 /* bytes after a message that must stay poisoned */
#define SMALL_LO 8
#define SMALL_HI 1024

typedef struct ctx ctx_t;
typedef struct pattern pattern_t;

struct pattern {
    const char *name;
    int np;                          /* ranks it needs */
    long count;                      /* messages or iterations at scale 1 */
    const char *group;               /* run together in one job (see the list) */
    void (*fn)(ctx_t *, const pattern_t *);
    long a, b;                       /* pattern arguments (size, work, ...) */
    const char *what;
};

struct ctx {
    const pattern_t *p;
    MPI_Comm comm;
    int rank, size;
    long n;                          /* scaled count */
    uint64_t pseed;                  /* seed of this pattern */
    unsigned char *pool;             /* POOL_BYTES of seeded random bytes */
    long msgs;                       /* received by this rank */
    long long bytes;
};

/* ------------------------------------------------------------------ */
/* Generator, payload slices, failure                                   */
/* ------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h = (h ^ (unsigned char) *s) * 1099511628211ull;
    }
    return h;
}

/* The draw number `what` for message k of the pair (src, dst) */
static uint64_t draw(const ctx_t *c, long k, int src, int dst, int what)
{
    return mix64(c->pseed ^ mix64((uint64_t) k * 4099u + (uint64_t) src * 131u + (uint64_t) dst * 7u +
                                  ((uint64_t) what << 56)));
}

/* A size in [lo, hi] for message k from src to dst */
static size_t msg_size(const ctx_t *c, long k, int src, int dst, size_t lo, size_t hi)
{
    return lo + (size_t) (draw(c, k, src, dst, 1) % (hi - lo + 1));
}

/* Where in the pool message k from src to dst of n bytes starts (8-aligned) */
static const unsigned char *slice(const ctx_t *c, long k, int src, int dst, size_t n)
{
    size_t slots = (POOL_BYTES - n) / 8 + 1;
    return c->pool + 8 * (size_t) (draw(c, k, src, dst, 2) % slots);
}

static int tag_of(long k)
{
    return (int) (k % 30000);
}

static void fail(const ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(const ctx_t *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("pattern %s FAIL rank %d: %s\n", c->p ? c->p->name : "(setup)", c->rank, msg);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

static void *xmalloc(const ctx_t *c, size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fail(c, "out of memory (%zu bytes)", n);
    }
    return p;
}

static void check_bytes(const ctx_t *c, long k, const void *got, const void *want, size_t n)
{
    if (0 != memcmp(got, want, n)) {
        size_t i = 0;
        while (((const unsigned char *) got)[i] == ((const unsigned char *) want)[i]) {
            i++;
        }
        fail(c, "message %ld: byte %zu of %zu is 0x%02x, expected 0x%02x", k, i, n,
             ((const unsigned char *) got)[i], ((const unsigned char *) want)[i]);
    }
}

/* The GUARD bytes at p (after a message) must still be poison */
static void check_guard(const ctx_t *c, long k, const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != POISON) {
            fail(c, "message %ld: byte %zu past the message was written (0x%02x)", k, i, p[i]);
        }
    }
}

static void check_status(const ctx_t *c, long k, const MPI_Status *st, MPI_Datatype t, int src, int tag,
                         int count)
{
    int got = -1;
    MPI_Get_count(st, t, &got);
    if (st->MPI_SOURCE != src || (tag >= 0 && st->MPI_TAG != tag) || got != count) {
        fail(c, "message %ld: status source %d tag %d count %d, expected source %d tag %d count %d", k,
             st->MPI_SOURCE, st->MPI_TAG, got, src, tag, count);
    }
}

/* Busy work of us microseconds between receives, spinning on MPI_Wtime */
static void work(long us)
{
    if (us <= 0) {
        return;
    }
    double end = MPI_Wtime() + (double) us * 1e-6;
    while (MPI_Wtime() < end) {
    }
}

static void got(ctx_t *c, size_t n)
{
    c->msgs++;
    c->bytes += (long long) n;
}

/* Message k from |src| of |n| bytes received into |buf| as MPI_BYTE:
 * its status and bytes checked, the GUARD bytes after it untouched; the
 * buffer poisoned again for the next one */
static void check_byte_message(ctx_t *c, long k, const MPI_Status *st, unsigned char *buf, int src, size_t n)
{
    check_status(c, k, st, MPI_BYTE, src, tag_of(k), (int) n);
    check_bytes(c, k, buf, slice(c, k, src, c->rank, n), n);
    check_guard(c, k, buf + n, GUARD);
    memset(buf, POISON, n);
    got(c, n);
}

/* ------------------------------------------------------------------ */
/* One-way streams, rank 0 -> rank 1                                    */
/* ------------------------------------------------------------------ */

/* Receive message k of a small stream into buf (cap bytes posted) and
 * check it; the receiver's side of every contiguous one-way stream */
static void recv_small(ctx_t *c, long k, unsigned char *buf, size_t cap)
{
    MPI_Status st;
    size_t n = msg_size(c, k, 0, 1, SMALL_LO, SMALL_HI);
    MPI_Recv(buf, (int) cap, MPI_BYTE, 0, MPI_ANY_TAG, c->comm, &st);
    check_status(c, k, &st, MPI_BYTE, 0, tag_of(k), (int) n);
    check_bytes(c, k, buf, slice(c, k, 0, 1, n), n);
    got(c, n);
}

/* a = receiver's work per message (us), b = 0: MPI_Send; b = W: windows
 * of W MPI_Isend.  Receives post exactly the message's size. */
static void p_stream(ctx_t *c, const pattern_t *p)
{
    if (0 == c->rank) {
        int w = p->b > 0 ? (int) p->b : 1;
        MPI_Request *req = xmalloc(c, sizeof(*req) * (size_t) w);
        for (long k = 0; k < c->n; k += w) {
            int m = 0;
            for (long j = k; j < c->n && j < k + w; j++) {
                size_t n = msg_size(c, j, 0, 1, SMALL_LO, SMALL_HI);
                if (p->b > 0) {
                    MPI_Isend(slice(c, j, 0, 1, n), (int) n, MPI_BYTE, 1, tag_of(j), c->comm, &req[m++]);
                } else {
                    MPI_Send(slice(c, j, 0, 1, n), (int) n, MPI_BYTE, 1, tag_of(j), c->comm);
                }
            }
            if (m) {
                MPI_Waitall(m, req, MPI_STATUSES_IGNORE);
            }
        }
        free(req);
    } else if (1 == c->rank) {
        unsigned char *buf = xmalloc(c, SMALL_HI);
        for (long k = 0; k < c->n; k++) {
            size_t n = msg_size(c, k, 0, 1, SMALL_LO, SMALL_HI);
            MPI_Status st;
            MPI_Recv(buf, (int) n, MPI_BYTE, 0, MPI_ANY_TAG, c->comm, &st);
            check_status(c, k, &st, MPI_BYTE, 0, tag_of(k), (int) n);
            check_bytes(c, k, buf, slice(c, k, 0, 1, n), n);
            got(c, n);
            work(p->a);
        }
        free(buf);
    }
}

/* The reproducer of issue 23: struct { int; double; }, 1 element sent,
 * 2 posted; a = receiver's work (us), b = 0: MPI_Send, W: Isend windows */
typedef struct {
    int i;
    double d;
} pair_t;

static MPI_Datatype pair_type(void)
{
    int len[2] = {1, 1};
    MPI_Aint disp[2] = {offsetof(pair_t, i), offsetof(pair_t, d)};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, t;
    MPI_Type_create_struct(2, len, disp, types, &t);
    MPI_Type_commit(&t);
    return t;
}

static pair_t pair_value(const ctx_t *c, long k)
{
    uint64_t h = draw(c, k, 0, 1, 3);
    pair_t v;
    memset(&v, 0, sizeof(v));
    v.i = (int) (uint32_t) h;
    v.d = (double) (h >> 11) * (1.0 / 9007199254740992.0) + (double) k;
    return v;
}

static void p_struct(ctx_t *c, const pattern_t *p)
{
    MPI_Datatype t = pair_type();
    if (0 == c->rank) {
        int w = p->b > 0 ? (int) p->b : 1;
        pair_t *v = xmalloc(c, sizeof(*v) * (size_t) w);
        MPI_Request *req = xmalloc(c, sizeof(*req) * (size_t) w);
        for (long k = 0; k < c->n; k += w) {
            int m = 0;
            for (long j = k; j < c->n && j < k + w; j++, m++) {
                v[m] = pair_value(c, j);
                if (p->b > 0) {
                    MPI_Isend(&v[m], 1, t, 1, tag_of(j), c->comm, &req[m]);
                } else {
                    MPI_Send(&v[m], 1, t, 1, tag_of(j), c->comm);
                }
            }
            if (p->b > 0) {
                MPI_Waitall(m, req, MPI_STATUSES_IGNORE);
            }
        }
        free(req);
        free(v);
    } else if (1 == c->rank) {
        pair_t r[2];
        unsigned char poison[sizeof(pair_t)];
        memset(poison, POISON, sizeof(poison));
        for (long k = 0; k < c->n; k++) {
            MPI_Status st;
            memset(r, POISON, sizeof(r));
            MPI_Recv(r, 2, t, 0, MPI_ANY_TAG, c->comm, &st);
            check_status(c, k, &st, t, 0, tag_of(k), 1);
            pair_t want = pair_value(c, k);
            if (r[0].i != want.i || r[0].d != want.d) {
                fail(c, "message %ld: got {%d, %.17g}, expected {%d, %.17g}", k, r[0].i, r[0].d, want.i, want.d);
            }
            if (0 != memcmp(&r[1], poison, sizeof(poison))) {
                fail(c, "message %ld: the second posted element was written", k);
            }
            got(c, sizeof(int) + sizeof(double));
            work(p->a);
        }
    }
    MPI_Type_free(&t);
}

/* A vector of doubles (8 blocks of 2, stride 3) sent as 1 element from a
 * slice of the pool, received as 2 elements of the same type: values at
 * the type's positions, poison in the gaps and in the second element */
#define VEC_BLOCKS 8
#define VEC_LEN 2
#define VEC_STRIDE 3
static void p_vector(ctx_t *c, const pattern_t *p)
{
    MPI_Datatype t;
    MPI_Type_vector(VEC_BLOCKS, VEC_LEN, VEC_STRIDE, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(t, &lb, &ext);
    size_t span = (size_t) ext;
    if (0 == c->rank) {
        for (long k = 0; k < c->n; k++) {
            MPI_Send(slice(c, k, 0, 1, span), 1, t, 1, tag_of(k), c->comm);
        }
    } else if (1 == c->rank) {
        unsigned char *buf = xmalloc(c, 2 * span);
        memset(buf, POISON, 2 * span);
        for (long k = 0; k < c->n; k++) {
            MPI_Status st;
            MPI_Recv(buf, 2, t, 0, MPI_ANY_TAG, c->comm, &st);
            check_status(c, k, &st, t, 0, tag_of(k), 1);
            int el = -1;
            MPI_Get_elements(&st, MPI_DOUBLE, &el);
            if (el != VEC_BLOCKS * VEC_LEN) {
                fail(c, "message %ld: MPI_Get_elements %d, expected %d", k, el, VEC_BLOCKS * VEC_LEN);
            }
            const unsigned char *src = slice(c, k, 0, 1, span);
            for (int b = 0; b < VEC_BLOCKS; b++) {
                size_t at = (size_t) b * VEC_STRIDE * sizeof(double), len = VEC_LEN * sizeof(double);
                check_bytes(c, k, buf + at, src + at, len);
                size_t gap_end = b + 1 < VEC_BLOCKS ? at + VEC_STRIDE * sizeof(double) : 2 * span;
                check_guard(c, k, buf + at + len, gap_end - at - len);
                memset(buf + at, POISON, len);
            }
            got(c, VEC_BLOCKS * VEC_LEN * sizeof(double));
            work(p->a);
        }
        free(buf);
    }
    MPI_Type_free(&t);
}

/* An indexed type of ints sent as 1 element, received as contiguous ints
 * with a count four times the message's */
static const int idx_len[5] = {1, 3, 2, 4, 6};
static const int idx_disp[5] = {0, 2, 7, 12, 20};
#define IDX_INTS 16
#define IDX_SPAN 26
static void p_indexed(ctx_t *c, const pattern_t *p)
{
    MPI_Datatype t;
    MPI_Type_indexed(5, idx_len, idx_disp, MPI_INT, &t);
    MPI_Type_commit(&t);
    size_t span = IDX_SPAN * sizeof(int);
    if (0 == c->rank) {
        for (long k = 0; k < c->n; k++) {
            MPI_Send(slice(c, k, 0, 1, span), 1, t, 1, tag_of(k), c->comm);
        }
    } else if (1 == c->rank) {
        int cap = 4 * IDX_INTS;
        int *buf = xmalloc(c, sizeof(int) * (size_t) cap);
        memset(buf, POISON, sizeof(int) * (size_t) cap);
        for (long k = 0; k < c->n; k++) {
            MPI_Status st;
            MPI_Recv(buf, cap, MPI_INT, 0, MPI_ANY_TAG, c->comm, &st);
            check_status(c, k, &st, MPI_INT, 0, tag_of(k), IDX_INTS);
            const unsigned char *src = slice(c, k, 0, 1, span);
            size_t at = 0;
            for (int b = 0; b < 5; b++) {
                size_t len = (size_t) idx_len[b] * sizeof(int);
                check_bytes(c, k, (unsigned char *) buf + at, src + (size_t) idx_disp[b] * sizeof(int), len);
                at += len;
            }
            check_guard(c, k, (unsigned char *) buf + at, GUARD);
            memset(buf, POISON, at);
            got(c, IDX_INTS * sizeof(int));
            work(p->a);
        }
        free(buf);
    }
    MPI_Type_free(&t);
}

/* Contiguous messages of a..b bytes (a multiple of sizeof(int) for
 * MPI_INT) into a posted buffer of `cap` bytes (the pattern's b field is
 * the largest message, the cap is set below per pattern) */
static void posted_larger(ctx_t *c, size_t lo, size_t hi, size_t cap, MPI_Datatype t, size_t unit)
{
    if (0 == c->rank) {
        for (long k = 0; k < c->n; k++) {
            size_t n = msg_size(c, k, 0, 1, lo, hi) / unit * unit;
            MPI_Send(slice(c, k, 0, 1, n), (int) (n / unit), t, 1, tag_of(k), c->comm);
        }
    } else if (1 == c->rank) {
        unsigned char *buf = xmalloc(c, cap);
        memset(buf, POISON, cap);
        for (long k = 0; k < c->n; k++) {
            size_t n = msg_size(c, k, 0, 1, lo, hi) / unit * unit;
            MPI_Status st;
            MPI_Recv(buf, (int) (cap / unit), t, 0, MPI_ANY_TAG, c->comm, &st);
            check_status(c, k, &st, t, 0, tag_of(k), (int) (n / unit));
            check_bytes(c, k, buf, slice(c, k, 0, 1, n), n);
            check_guard(c, k, buf + n, n + GUARD <= cap ? GUARD : cap - n);
            memset(buf, POISON, n);
            got(c, n);
        }
        free(buf);
    }
}

/* ints, 8 B..1 KiB sent, a count of 4 KiB of ints posted */
static void p_recv_larger(ctx_t *c, const pattern_t *p)
{
    (void) p;
    posted_larger(c, SMALL_LO, SMALL_HI, 4096, MPI_INT, sizeof(int));
}

/* 8 B..1 KiB into a posted buffer of 4 MiB */
static void p_huge_posted(ctx_t *c, const pattern_t *p)
{
    (void) p;
    posted_larger(c, SMALL_LO, SMALL_HI, (size_t) 4 << 20, MPI_BYTE, 1);
}

/* sizes spread over 1 B..512 KiB (log-uniform: every protocol) into one
 * posted buffer of 1 MiB */
static void p_varsize(ctx_t *c, const pattern_t *p)
{
    (void) p;
    size_t cap = (size_t) 1 << 20;
    if (0 == c->rank) {
        for (long k = 0; k < c->n; k++) {
            uint64_t h = draw(c, k, 0, 1, 1);
            size_t n = ((size_t) 1 << (h % 19)) + (size_t) ((h >> 8) % ((size_t) 1 << (h % 19)));
            MPI_Send(slice(c, k, 0, 1, n), (int) n, MPI_BYTE, 1, tag_of(k), c->comm);
        }
    } else if (1 == c->rank) {
        unsigned char *buf = xmalloc(c, cap);
        memset(buf, POISON, cap);
        for (long k = 0; k < c->n; k++) {
            uint64_t h = draw(c, k, 0, 1, 1);
            size_t n = ((size_t) 1 << (h % 19)) + (size_t) ((h >> 8) % ((size_t) 1 << (h % 19)));
            MPI_Status st;
            MPI_Recv(buf, (int) cap, MPI_BYTE, 0, MPI_ANY_TAG, c->comm, &st);
            check_byte_message(c, k, &st, buf, 0, n);
        }
        free(buf);
    }
}

/* a stream of MPI_Send in batches of a messages, a barrier after each */
static void p_batch_barrier(ctx_t *c, const pattern_t *p)
{
    unsigned char *buf = xmalloc(c, SMALL_HI);
    for (long k = 0; k < c->n; k += p->a) {
        for (long j = k; j < c->n && j < k + p->a; j++) {
            if (0 == c->rank) {
                size_t n = msg_size(c, j, 0, 1, SMALL_LO, SMALL_HI);
                MPI_Send(slice(c, j, 0, 1, n), (int) n, MPI_BYTE, 1, tag_of(j), c->comm);
            } else if (1 == c->rank) {
                recv_small(c, j, buf, SMALL_HI);
            }
        }
        MPI_Barrier(c->comm);
    }
    free(buf);
}

/* Floods of unexpected messages: rank 0 MPI_Isend's a batch of a small
 * messages, then both enter a barrier; only after it does rank 1 post its
 * receives; a second barrier ends the round */
static void p_flood(ctx_t *c, const pattern_t *p)
{
    long batch = p->a;
    MPI_Request *req = xmalloc(c, sizeof(*req) * (size_t) batch);
    unsigned char *buf = xmalloc(c, SMALL_HI);
    for (long k = 0; k < c->n; k += batch) {
        long m = 0;
        if (0 == c->rank) {
            for (long j = k; j < c->n && j < k + batch; j++, m++) {
                size_t n = msg_size(c, j, 0, 1, SMALL_LO, SMALL_HI);
                MPI_Isend(slice(c, j, 0, 1, n), (int) n, MPI_BYTE, 1, tag_of(j), c->comm, &req[m]);
            }
        }
        MPI_Barrier(c->comm);
        if (0 == c->rank) {
            MPI_Waitall((int) m, req, MPI_STATUSES_IGNORE);
        } else if (1 == c->rank) {
            for (long j = k; j < c->n && j < k + batch; j++) {
                recv_small(c, j, buf, SMALL_HI);
            }
        }
        MPI_Barrier(c->comm);
    }
    free(buf);
    free(req);
}

/* MPI_Probe (a = 0), MPI_Iprobe (a = 1) or MPI_Mprobe (a = 2) on tag
 * MPI_ANY_TAG, then a receive of exactly the probed size; 8 B..4 KiB */
static void p_probe(ctx_t *c, const pattern_t *p)
{
    if (0 == c->rank) {
        for (long k = 0; k < c->n; k++) {
            size_t n = msg_size(c, k, 0, 1, SMALL_LO, 4096);
            MPI_Send(slice(c, k, 0, 1, n), (int) n, MPI_BYTE, 1, tag_of(k), c->comm);
        }
    } else if (1 == c->rank) {
        unsigned char *buf = xmalloc(c, 4096 + GUARD);
        memset(buf, POISON, 4096 + GUARD);
        for (long k = 0; k < c->n; k++) {
            size_t n = msg_size(c, k, 0, 1, SMALL_LO, 4096);
            MPI_Status st;
            MPI_Message msg = MPI_MESSAGE_NULL;
            if (0 == p->a) {
                MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &st);
            } else if (1 == p->a) {
                int flag = 0;
                while (!flag) {
                    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &flag, &st);
                }
            } else {
                MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &msg, &st);
            }
            check_status(c, k, &st, MPI_BYTE, 0, tag_of(k), (int) n);
            int cnt;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            if (2 == p->a) {
                MPI_Mrecv(buf, cnt, MPI_BYTE, &msg, &st);
            } else {
                MPI_Recv(buf, cnt, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, c->comm, &st);
            }
            check_byte_message(c, k, &st, buf, 0, n);
        }
        free(buf);
    }
}

/* MPI_Ssend stream of small messages */
static void p_ssend(ctx_t *c, const pattern_t *p)
{
    (void) p;
    if (0 == c->rank) {
        for (long k = 0; k < c->n; k++) {
            size_t n = msg_size(c, k, 0, 1, SMALL_LO, SMALL_HI);
            MPI_Ssend(slice(c, k, 0, 1, n), (int) n, MPI_BYTE, 1, tag_of(k), c->comm);
        }
    } else if (1 == c->rank) {
        unsigned char *buf = xmalloc(c, SMALL_HI);
        for (long k = 0; k < c->n; k++) {
            recv_small(c, k, buf, SMALL_HI);
        }
        free(buf);
    }
}

/* Persistent requests: a slots of b bytes each, MPI_Send_init /
 * MPI_Recv_init once, then rounds of MPI_Startall + MPI_Waitall; the
 * sender copies message k into its slot before each start */
static void p_persistent(ctx_t *c, const pattern_t *p)
{
    int w = (int) p->a;
    size_t n = (size_t) p->b;
    MPI_Request *req = xmalloc(c, sizeof(*req) * (size_t) w);
    unsigned char *buf = xmalloc(c, (size_t) w * n);
    if (c->rank > 1) {
        free(req);
        free(buf);
        return;
    }
    for (int s = 0; s < w; s++) {
        if (0 == c->rank) {
            MPI_Send_init(buf + (size_t) s * n, (int) n, MPI_BYTE, 1, s, c->comm, &req[s]);
        } else {
            MPI_Recv_init(buf + (size_t) s * n, (int) n, MPI_BYTE, 0, s, c->comm, &req[s]);
        }
    }
    MPI_Status *st = xmalloc(c, sizeof(*st) * (size_t) w);
    for (long k = 0; k < c->n; k += w) {
        int m = (int) (c->n - k < w ? c->n - k : w);
        if (0 == c->rank) {
            for (int s = 0; s < m; s++) {
                memcpy(buf + (size_t) s * n, slice(c, k + s, 0, 1, n), n);
            }
        }
        MPI_Startall(m, req);
        MPI_Waitall(m, req, st);
        if (1 == c->rank) {
            for (int s = 0; s < m; s++) {
                check_status(c, k + s, &st[s], MPI_BYTE, 0, s, (int) n);
                check_bytes(c, k + s, buf + (size_t) s * n, slice(c, k + s, 0, 1, n), n);
                got(c, n);
            }
        }
    }
    for (int s = 0; s < w; s++) {
        MPI_Request_free(&req[s]);
    }
    free(st);
    free(buf);
    free(req);
}

/* MPI_Sendrecv exchanges of a bytes each way */
static void p_sendrecv(ctx_t *c, const pattern_t *p)
{
    size_t n = (size_t) p->a;
    if (c->rank > 1) {
        return;
    }
    int peer = 1 - c->rank;
    unsigned char *buf = xmalloc(c, n + GUARD);
    memset(buf, POISON, n + GUARD);
    for (long k = 0; k < c->n; k++) {
        MPI_Status st;
        MPI_Sendrecv(slice(c, k, c->rank, peer, n), (int) n, MPI_BYTE, peer, tag_of(k), buf, (int) n, MPI_BYTE,
                     peer, tag_of(k), c->comm, &st);
        check_status(c, k, &st, MPI_BYTE, peer, tag_of(k), (int) n);
        check_bytes(c, k, buf, slice(c, k, peer, c->rank, n), n);
        check_guard(c, k, buf + n, GUARD);
        got(c, n);
    }
    free(buf);
}

/* ------------------------------------------------------------------ */
/* 3 and 4 ranks                                                        */
/* ------------------------------------------------------------------ */

/* Every rank above 0 sends n small messages to rank 0, which receives
 * them with MPI_ANY_SOURCE; each sender's messages must come in order */
static void p_many_to_one(ctx_t *c, const pattern_t *p)
{
    (void) p;
    if (0 != c->rank) {
        for (long k = 0; k < c->n; k++) {
            size_t n = msg_size(c, k, c->rank, 0, SMALL_LO, SMALL_HI);
            MPI_Send(slice(c, k, c->rank, 0, n), (int) n, MPI_BYTE, 0, tag_of(k), c->comm);
        }
        return;
    }
    long *next = calloc((size_t) c->size, sizeof(long));
    unsigned char *buf = xmalloc(c, SMALL_HI);
    for (long i = 0; i < c->n * (c->size - 1); i++) {
        MPI_Status st;
        MPI_Recv(buf, SMALL_HI, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &st);
        int src = st.MPI_SOURCE;
        if (src < 1 || src >= c->size || next[src] >= c->n) {
            fail(c, "receive %ld: from rank %d, which has nothing more to send", i, src);
        }
        long k = next[src]++;
        size_t n = msg_size(c, k, src, 0, SMALL_LO, SMALL_HI);
        check_status(c, k, &st, MPI_BYTE, src, tag_of(k), (int) n);
        check_bytes(c, k, buf, slice(c, k, src, 0, n), n);
        got(c, n);
    }
    free(buf);
    free(next);
}

/* Rank 0 sends n small messages to every other rank, round robin */
static void p_one_to_many(ctx_t *c, const pattern_t *p)
{
    (void) p;
    if (0 == c->rank) {
        for (long k = 0; k < c->n; k++) {
            for (int d = 1; d < c->size; d++) {
                size_t n = msg_size(c, k, 0, d, SMALL_LO, SMALL_HI);
                MPI_Send(slice(c, k, 0, d, n), (int) n, MPI_BYTE, d, tag_of(k), c->comm);
            }
        }
        return;
    }
    unsigned char *buf = xmalloc(c, SMALL_HI);
    for (long k = 0; k < c->n; k++) {
        size_t n = msg_size(c, k, 0, c->rank, SMALL_LO, SMALL_HI);
        MPI_Status st;
        MPI_Recv(buf, (int) n, MPI_BYTE, 0, MPI_ANY_TAG, c->comm, &st);
        check_status(c, k, &st, MPI_BYTE, 0, tag_of(k), (int) n);
        check_bytes(c, k, buf, slice(c, k, 0, c->rank, n), n);
        got(c, n);
    }
    free(buf);
}

/* ------------------------------------------------------------------ */
/* Collectives (a = bytes, or unsigned ints for the reductions)         */
/* ------------------------------------------------------------------ */

static void p_bcast(ctx_t *c, const pattern_t *p)
{
    size_t n = (size_t) p->a;
    unsigned char *buf = xmalloc(c, n + GUARD);
    memset(buf, POISON, n + GUARD);
    for (long k = 0; k < c->n; k++) {
        int root = (int) (k % c->size);
        const unsigned char *want = slice(c, k, root, 0, n);
        if (c->rank == root) {
            memcpy(buf, want, n);
        }
        MPI_Bcast(buf, (int) n, MPI_BYTE, root, c->comm);
        if (c->rank != root) {
            check_bytes(c, k, buf, want, n);
            got(c, n);
        }
        check_guard(c, k, buf + n, GUARD);
    }
    free(buf);
}

/* a unsigned ints per rank (each rank's contribution a slice of the pool),
 * MPI_SUM; b = 0: MPI_Reduce to a rotating root, 1: MPI_Allreduce */
static void p_reduce(ctx_t *c, const pattern_t *p)
{
    int cnt = (int) p->a;
    size_t n = (size_t) cnt * sizeof(unsigned);
    unsigned *out = xmalloc(c, n), *want = xmalloc(c, n);
    for (long k = 0; k < c->n; k++) {
        int root = (int) (k % c->size);
        const unsigned *mine = (const unsigned *) slice(c, k, c->rank, 0, n);
        if (p->b) {
            MPI_Allreduce(mine, out, cnt, MPI_UNSIGNED, MPI_SUM, c->comm);
        } else {
            MPI_Reduce(mine, out, cnt, MPI_UNSIGNED, MPI_SUM, root, c->comm);
        }
        if (p->b || c->rank == root) {
            memset(want, 0, n);
            for (int r = 0; r < c->size; r++) {
                const unsigned *in = (const unsigned *) slice(c, k, r, 0, n);
                for (int i = 0; i < cnt; i++) {
                    want[i] += in[i];
                }
            }
            check_bytes(c, k, out, want, n);
            got(c, n);
        }
    }
    free(want);
    free(out);
}

/* a bytes to every rank (itself included) */
static void p_alltoall(ctx_t *c, const pattern_t *p)
{
    size_t b = (size_t) p->a, all = b * (size_t) c->size;
    unsigned char *out = xmalloc(c, all + GUARD);
    memset(out, POISON, all + GUARD);
    for (long k = 0; k < c->n; k++) {
        MPI_Alltoall(slice(c, k, c->rank, 0, all), (int) b, MPI_BYTE, out, (int) b, MPI_BYTE, c->comm);
        for (int r = 0; r < c->size; r++) {
            check_bytes(c, k, out + (size_t) r * b, slice(c, k, r, 0, all) + (size_t) c->rank * b, b);
        }
        check_guard(c, k, out + all, GUARD);
        got(c, all);
    }
    free(out);
}

/* n barriers; afterwards every rank must have done as many */
static void p_barrier(ctx_t *c, const pattern_t *p)
{
    (void) p;
    long done = 0;
    for (long k = 0; k < c->n; k++) {
        MPI_Barrier(c->comm);
        done++;
    }
    long lo, hi;
    MPI_Allreduce(&done, &lo, 1, MPI_LONG, MPI_MIN, c->comm);
    MPI_Allreduce(&done, &hi, 1, MPI_LONG, MPI_MAX, c->comm);
    if (lo != c->n || hi != c->n) {
        fail(c, "barriers done: %ld..%ld over the ranks, expected %ld", lo, hi, c->n);
    }
    if (0 == c->rank) {
        c->msgs += done;
    }
}

/* ------------------------------------------------------------------ */
/* The list                                                             */
/* ------------------------------------------------------------------ */

/* The patterns, in groups: the harnesses (bench/patterns.sh,
 * test/perf/run-pattern-tests.sh) run one group per mpirun, its patterns
 * in this order.  What ran before in the same process can matter: on the
 * engine of issue 23, only the first stream of a derived datatype in a
 * process was slow (later ones in the same job were not), so every
 * datatype stream leads a group of its own and no other datatype stream
 * runs before it. */
#define COLL(np, g1, g2, bs, bm, rs, rm, as, am, ts, tm, bar)                                         \
    {"bcast_small_np" #np, np, bs, g1, p_bcast, 64, 0, "MPI_Bcast of 64 B, rotating root"},          \
        {"bcast_medium_np" #np, np, bm, g1, p_bcast, 65536, 0, "MPI_Bcast of 64 KiB, rotating root"}, \
        {"reduce_small_np" #np, np, rs, g1, p_reduce, 16, 0, "MPI_Reduce of 16 unsigned, SUM, rotating root"}, \
        {"reduce_medium_np" #np, np, rm, g1, p_reduce, 16384, 0,                                     \
         "MPI_Reduce of 16384 unsigned (64 KiB), SUM, rotating root"},                                \
        {"allreduce_small_np" #np, np, as, g2, p_reduce, 16, 1, "MPI_Allreduce of 16 unsigned, SUM"},  \
        {"allreduce_medium_np" #np, np, am, g2, p_reduce, 16384, 1,                                  \
         "MPI_Allreduce of 16384 unsigned (64 KiB), SUM"},                                            \
        {"alltoall_small_np" #np, np, ts, g2, p_alltoall, 8, 0, "MPI_Alltoall of 8 B per rank"},       \
        {"alltoall_medium_np" #np, np, tm, g2, p_alltoall, 8192, 0, "MPI_Alltoall of 8 KiB per rank"}, \
        {"barrier_np" #np, np, bar, g2, p_barrier, 0, 0, "MPI_Barrier"}

static const pattern_t patterns[] = {
    {"struct_send", 2, 40000, "struct", p_struct, 0, 0,
     "issue 23: MPI_Send of 1 struct{int,double}, 2 posted, receiver checks each"},
    {"send_w0", 2, 40000, "struct", p_stream, 0, 0, "MPI_Send stream 8 B..1 KiB, receiver does no work"},
    {"send_w1", 2, 40000, "struct", p_stream, 1, 0, "MPI_Send stream 8 B..1 KiB, 1 us of work per receive"},
    {"struct_send_w10", 2, 20000, "struct_w10", p_struct, 10, 0, "the struct stream, 10 us of work per receive"},
    {"send_w10", 2, 20000, "struct_w10", p_stream, 10, 0, "MPI_Send stream 8 B..1 KiB, 10 us of work per receive"},
    {"struct_isend", 2, 40000, "struct_isend", p_struct, 0, 16, "the struct stream, MPI_Isend windows of 16"},
    {"isend_w0", 2, 40000, "struct_isend", p_stream, 0, 16, "MPI_Isend windows of 16, 8 B..1 KiB, no work"},
    {"isend_w1", 2, 40000, "struct_isend", p_stream, 1, 16, "MPI_Isend windows of 16, 8 B..1 KiB, 1 us of work"},
    {"vector_send", 2, 40000, "vector", p_vector, 0, 0, "MPI_Send of 1 vector (8 x 2 doubles, stride 3), 2 posted"},
    {"isend_w10", 2, 20000, "vector", p_stream, 10, 16, "MPI_Isend windows of 16, 8 B..1 KiB, 10 us of work"},
    {"indexed_send", 2, 40000, "indexed", p_indexed, 0, 0, "MPI_Send of 1 indexed (16 ints), received as 64 MPI_INT"},
    {"recv_larger", 2, 60000, "indexed", p_recv_larger, 0, 0, "MPI_INT, 8 B..1 KiB sent, a count of 4 KiB posted"},
    {"posted_4mib", 2, 60000, "indexed", p_huge_posted, 0, 0, "8 B..1 KiB into a posted 4 MiB buffer"},
    {"varsize_1mib", 2, 6000, "unexpected", p_varsize, 0, 0, "1 B..512 KiB (log-uniform) into one posted 1 MiB buffer"},
    {"batch_barrier", 2, 25000, "unexpected", p_batch_barrier, 64, 0, "MPI_Send stream, a barrier after every 64"},
    {"unexpected_flood", 2, 30000, "unexpected", p_flood, 500, 0,
     "500 MPI_Isend before the receiver posts anything (barrier), then 500 receives"},
    {"probe", 2, 30000, "probe", p_probe, 0, 0, "MPI_Probe then MPI_Recv of the probed size, 8 B..4 KiB"},
    {"iprobe", 2, 30000, "probe", p_probe, 1, 0, "MPI_Iprobe loop then MPI_Recv, 8 B..4 KiB"},
    {"mprobe", 2, 30000, "probe", p_probe, 2, 0, "MPI_Mprobe then MPI_Mrecv, 8 B..4 KiB"},
    {"ssend", 2, 15000, "sync", p_ssend, 0, 0, "MPI_Ssend stream 8 B..1 KiB"},
    {"persistent", 2, 40000, "sync", p_persistent, 4, 256, "MPI_Send_init/MPI_Recv_init, 4 slots of 256 B, MPI_Startall"},
    {"sendrecv_32767", 2, 8000, "eager", p_sendrecv, 32767, 0, "MPI_Sendrecv exchange, 32 KiB - 1 (usnic's eager limit before issue 23)"},
    {"sendrecv_32768", 2, 8000, "eager", p_sendrecv, 32768, 0, "MPI_Sendrecv exchange, 32 KiB"},
    {"sendrecv_32769", 2, 8000, "eager", p_sendrecv, 32769, 0, "MPI_Sendrecv exchange, 32 KiB + 1"},
    {"sendrecv_65535", 2, 5000, "maxsend", p_sendrecv, 65535, 0, "tcp eager limit, usnic max send - 1"},
    {"sendrecv_65536", 2, 5000, "maxsend", p_sendrecv, 65536, 0, "tcp eager limit, usnic max send"},
    {"sendrecv_65537", 2, 5000, "maxsend", p_sendrecv, 65537, 0, "tcp eager limit, usnic max send + 1"},
    {"sendrecv_66561", 2, 5000, "eager", p_sendrecv, 66561, 0, "MPI_Sendrecv exchange, 65 KiB + 1 (the least usnic sends by rendezvous)"},
    {"sendrecv_131071", 2, 3000, "tcpmax", p_sendrecv, 131071, 0, "tcp max send - 1"},
    {"sendrecv_131072", 2, 3000, "tcpmax", p_sendrecv, 131072, 0, "tcp max send"},
    {"sendrecv_131073", 2, 3000, "tcpmax", p_sendrecv, 131073, 0, "tcp max send + 1"},
    {"sendrecv_1mib", 2, 500, "large", p_sendrecv, 1 << 20, 0, "MPI_Sendrecv exchange of 1 MiB"},
    {"sendrecv_4mib", 2, 120, "large", p_sendrecv, 4 << 20, 0, "MPI_Sendrecv exchange of 4 MiB"},
    COLL(2, "coll2a", "coll2b", 20000, 2500, 20000, 2000, 20000, 2000, 20000, 8000, 30000),
    {"many_to_one_np3", 3, 40000, "fan3", p_many_to_one, 0, 0, "2 senders x MPI_Send 8 B..1 KiB to rank 0 (ANY_SOURCE)"},
    {"one_to_many_np3", 3, 20000, "fan3", p_one_to_many, 0, 0, "rank 0 MPI_Send 8 B..1 KiB to 2 receivers in turn"},
    COLL(3, "coll3a", "coll3b", 10000, 1500, 10000, 800, 4000, 400, 4000, 2000, 5000),
    {"many_to_one_np4", 4, 30000, "fan4", p_many_to_one, 0, 0, "3 senders x MPI_Send 8 B..1 KiB to rank 0 (ANY_SOURCE)"},
    {"one_to_many_np4", 4, 15000, "fan4", p_one_to_many, 0, 0, "rank 0 MPI_Send 8 B..1 KiB to 3 receivers in turn"},
    COLL(4, "coll4a", "coll4b", 6000, 1200, 5000, 500, 2500, 300, 3000, 1400, 5000),
};
#define NPATTERNS ((int) (sizeof(patterns) / sizeof(patterns[0])))

/* ------------------------------------------------------------------ */
/* Driver                                                               */
/* ------------------------------------------------------------------ */

static void fill_pool(unsigned char *pool, uint64_t seed)
{
    uint64_t *w = (uint64_t *) pool;
    for (size_t i = 0; i < POOL_BYTES / 8; i++) {
        w[i] = mix64(seed + i);
    }
}

/* every pair of ranks talks once (connections, rendezvous) before timing */
static void warm_up(int size)
{
    size_t b = 65536 + 1024;
    unsigned char *s = calloc((size_t) size, b), *r = calloc((size_t) size, b);
    for (int i = 0; i < 3; i++) {
        MPI_Alltoall(s, 8, MPI_BYTE, r, 8, MPI_BYTE, MPI_COMM_WORLD);
        MPI_Alltoall(s, (int) b, MPI_BYTE, r, (int) b, MPI_BYTE, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(s);
    free(r);
}

static void run_pattern(const pattern_t *p, uint64_t seed, double scale, unsigned char *pool, int rank, int size)
{
    ctx_t c;
    memset(&c, 0, sizeof(c));
    c.p = p;
    c.rank = rank;
    c.size = size;
    c.pool = pool;
    c.pseed = mix64(seed ^ hash_name(p->name));
    c.n = (long) ((double) p->count * scale + 0.5);
    if (c.n < 1) {
        c.n = 1;
    }
    fill_pool(pool, c.pseed);
    MPI_Comm_dup(MPI_COMM_WORLD, &c.comm);
    MPI_Barrier(c.comm);
    double t0 = MPI_Wtime();
    p->fn(&c, p);
    double dt = MPI_Wtime() - t0, tmax = 0;
    MPI_Reduce(&dt, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, c.comm);
    /* nothing may be left over: a duplicated or stray message would show */
    MPI_Barrier(c.comm);
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c.comm, &flag, &st);
    if (flag) {
        fail(&c, "a stray message is left after the pattern (source %d, tag %d)", st.MPI_SOURCE, st.MPI_TAG);
    }
    long msgs = 0;
    long long bytes = 0;
    MPI_Reduce(&c.msgs, &msgs, 1, MPI_LONG, MPI_SUM, 0, c.comm);
    MPI_Reduce(&c.bytes, &bytes, 1, MPI_LONG_LONG, MPI_SUM, 0, c.comm);
    MPI_Comm_free(&c.comm);
    if (0 == rank) {
        printf("pattern %s ranks %d seconds %.6f msgs %ld bytes %lld ok\n", p->name, size, tmax, msgs, bytes);
        fflush(stdout);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: patterns [--patterns a,b,...|all] [--seed S] [--scale F] [--list]\n");
}

int main(int argc, char **argv)
{
    const char *want = "all";
    uint64_t seed = 1;
    double scale = 1.0;
    int list = 0;
    for (int i = 1; i < argc; i++) {
        if (0 == strcmp(argv[i], "--patterns") && i + 1 < argc) {
            want = argv[++i];
        } else if (0 == strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else if (0 == strcmp(argv[i], "--scale") && i + 1 < argc) {
            scale = strtod(argv[++i], NULL);
        } else if (0 == strcmp(argv[i], "--list")) {
            list = 1;
        } else {
            usage();
            return 2;
        }
    }
    if (list) {
        /* no MPI needed to list */
        for (int i = 0; i < NPATTERNS; i++) {
            printf("%s %d %ld %s %s\n", patterns[i].name, patterns[i].np, patterns[i].count, patterns[i].group,
                   patterns[i].what);
        }
        return 0;
    }
    if (!(scale > 0)) {
        usage();
        return 2;
    }

    /* which patterns, in the order given */
    int sel[4 * NPATTERNS], nsel = 0;
    if (0 == strcmp(want, "all")) {
        for (int i = 0; i < NPATTERNS; i++) {
            sel[nsel++] = i;
        }
    } else {
        char *copy = strdup(want), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int found = -1;
            for (int i = 0; i < NPATTERNS; i++) {
                if (0 == strcmp(tok, patterns[i].name)) {
                    found = i;
                }
            }
            if (found < 0) {
                fprintf(stderr, "patterns: unknown pattern '%s' (--list shows them)\n", tok);
                return 2;
            }
            if (nsel < 4 * NPATTERNS) {
                sel[nsel++] = found;
            }
        }
        free(copy);
    }

    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    unsigned char *pool = malloc(POOL_BYTES);
    if (!pool) {
        fprintf(stderr, "patterns: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    warm_up(size);
    for (int i = 0; i < nsel; i++) {
        const pattern_t *p = &patterns[sel[i]];
        if (p->np != size) {
            if (0 == rank) {
                printf("pattern %s ranks %d skipped (needs %d ranks)\n", p->name, size, p->np);
                fflush(stdout);
            }
            continue;
        }
        run_pattern(p, seed, scale, pool, rank, size);
    }
    free(pool);
    MPI_Finalize();
    return 0;
}
