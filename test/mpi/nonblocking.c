/*
 * nonblocking.c - many outstanding nonblocking operations, and MPI ordering.
 *
 * Part 1 (flood): every rank keeps NMSG MPI_Irecv and NMSG MPI_Isend
 * outstanding with *every* other rank at once, in both directions, with a
 * distinct tag per message and a mix of small (<= 1 KiB), medium (<= 64 KiB)
 * and large (<= 256 KiB) sizes. Receives are posted in the reverse order of
 * the sends so that matching by tag is exercised. Two rounds are made:
 *   round 0: receives posted first (expected-message path), then sends,
 *            completed with MPI_Waitall;
 *   round 1: sends posted first, then a barrier so eager data arrives
 *            unexpected, then receives; completed with an MPI_Waitsome loop.
 *
 * Part 2 (ordering): for every ordered pair of ranks, the sender streams
 * NORDER messages with the *same* tag (a sequence-numbered mix of 0-byte,
 * small, medium and large messages, all sent with MPI_Isend at once). The
 * receiver pre-posts the first half as MPI_Irecv and receives the rest with
 * blocking MPI_Recv, always with a buffer big enough for any message.
 * MPI's non-overtaking rule says message i must land in receive i; this is
 * checked via the count, an embedded sequence number and the payload.
 *
 * Every payload byte depends on sender, receiver, message number and
 * position; receive buffers are poisoned and guarded.
 */
#define TEST_NAME "nonblocking"
#include "mpitest.h"

static int nprocs = 0;

#define NMSG 200            /* outstanding messages per peer and direction */
#define NORDER 256          /* length of each ordered stream */
#define NPREPOST (NORDER / 2)
#define ORDER_TAG 7
#define GO_TAG 8
#define GUARD_BYTES 16
#define POISON 0x5A

/* ------------------------------------------------------------------ */
/* Patterns (fail(), pattern_byte() etc. are in mpitest.h)             */
/* ------------------------------------------------------------------ */

/* Seed for message 'n' of kind 'part' sent from src to dst. */
static uint32_t msg_seed(int part, int src, int dst, int n)
{
    uint32_t s = mix32(((uint32_t)part << 24) ^ ((uint32_t)src << 12) ^
                       (uint32_t)dst);
    return mix32(s ^ ((uint32_t)n * 0x9e3779b9U));
}

static void check_guard(const uint8_t *guard, const char *what)
{
    size_t i = first_not(guard, GUARD_BYTES, POISON);
    if (i < GUARD_BYTES)
        fail("%s: guard byte %zu past the receive buffer overwritten",
             what, i);
}

/* ------------------------------------------------------------------ */
/* Part 1: flood of outstanding requests                               */
/* ------------------------------------------------------------------ */

/* Size of flood message 'tag' from src to dst: 60% small, 30% medium,
 * 10% large. Depends on both ranks so the two directions differ. */
static size_t flood_size(int tag, int src, int dst)
{
    uint32_t h = mix32((uint32_t)tag * 131U + (uint32_t)src * 7U +
                       (uint32_t)dst * 3U);
    switch (tag % 10) {
    case 0: case 1: case 2: case 3: case 4: case 5:
        return h % 1025;                        /* 0 .. 1 KiB       */
    case 6: case 7: case 8:
        return 1025 + h % (64 * 1024 - 1024);   /* .. 64 KiB        */
    default:
        return 64 * 1024 + h % (192 * 1024 + 1); /* 64 .. 256 KiB   */
    }
}

/* Byte offset of message 'tag' inside a per-peer slab (with guards). */
static size_t flood_offset(int tag, int src, int dst)
{
    size_t off = 0;
    for (int t = 0; t < tag; t++)
        off += flood_size(t, src, dst) + GUARD_BYTES;
    return off;
}

struct flood {
    uint8_t **sslab, **rslab;      /* per-peer send / receive slabs       */
    MPI_Request *reqs;             /* [0, nrecv) receives, then sends     */
    MPI_Status *stats;
    int *req_peer, *req_tag;       /* what each receive request is for    */
};

/* Post the receives into request slots [0, nrecv). */
static void flood_post_recvs(struct flood *f, int round)
{
    int i = 0;

    /* reverse tag order, interleaved over peers */
    for (int t = NMSG - 1; t >= 0; t--) {
        for (int p = 0; p < nprocs; p++) {
            if (p == my_rank)
                continue;
            size_t len = flood_size(t, p, my_rank);
            uint8_t *buf = f->rslab[p] + flood_offset(t, p, my_rank);
            memset(buf, POISON, len + GUARD_BYTES);
            f->req_peer[i] = p;
            f->req_tag[i] = t;
            CHECK_MPI(MPI_Irecv(buf, (int)len, MPI_BYTE, p,
                                t + round * NMSG, MPI_COMM_WORLD,
                                &f->reqs[i]));
            i++;
        }
    }
}

/* Post the sends into request slots [nrecv, nrecv + nsend). */
static void flood_post_sends(struct flood *f, int round)
{
    int i = (nprocs - 1) * NMSG;

    for (int p = 0; p < nprocs; p++) {
        if (p == my_rank)
            continue;
        for (int t = 0; t < NMSG; t++) {
            size_t len = flood_size(t, my_rank, p);
            uint8_t *buf = f->sslab[p] + flood_offset(t, my_rank, p);
            fill_pattern(buf, len, msg_seed(round, my_rank, p, t));
            f->req_peer[i] = -1;   /* marks a send */
            CHECK_MPI(MPI_Isend(buf, (int)len, MPI_BYTE, p,
                                t + round * NMSG, MPI_COMM_WORLD,
                                &f->reqs[i]));
            i++;
        }
    }
}

/* Verify receive request i once it has completed with status st. */
static void flood_verify(struct flood *f, int i, const MPI_Status *st,
                         int round)
{
    int p = f->req_peer[i], t = f->req_tag[i], count = -1;
    size_t len = flood_size(t, p, my_rank), first = 0, bad;
    uint8_t *buf = f->rslab[p] + flood_offset(t, p, my_rank);
    char what[128];

    snprintf(what, sizeof(what), "flood round %d, tag %d from rank %d "
             "(%zu bytes)", round, t + round * NMSG, p, len);
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    if (count != (int)len)
        fail("%s: MPI_Get_count=%d", what, count);
    if (st->MPI_SOURCE != p || st->MPI_TAG != t + round * NMSG)
        fail("%s: status says source %d tag %d", what, st->MPI_SOURCE,
             st->MPI_TAG);
    bad = count_bad(buf, 0, len, msg_seed(round, p, my_rank, t), &first);
    if (bad)
        fail("%s: %zu bytes corrupt, first at offset %zu", what, bad, first);
    check_guard(buf + len, what);
}

/* Complete everything with MPI_Waitsome, verifying receives as they land. */
static void flood_complete_waitsome(struct flood *f, int nreq, int round)
{
    int *idx = malloc(sizeof(int) * (size_t)nreq);
    int left = nreq;

    if (!idx)
        fail("out of memory");
    while (left > 0) {
        int outcount = 0;
        CHECK_MPI(MPI_Waitsome(nreq, f->reqs, &outcount, idx, f->stats));
        if (outcount == MPI_UNDEFINED || outcount <= 0)
            fail("MPI_Waitsome returned outcount %d with %d requests left",
                 outcount, left);
        for (int k = 0; k < outcount; k++)
            if (f->req_peer[idx[k]] >= 0)
                flood_verify(f, idx[k], &f->stats[k], round);
        left -= outcount;
    }
    free(idx);
}

static void flood_round(struct flood *f, int round)
{
    int nreq = 2 * (nprocs - 1) * NMSG;

    if (round == 0) {
        flood_post_recvs(f, round);
        flood_post_sends(f, round);
        CHECK_MPI(MPI_Waitall(nreq, f->reqs, f->stats));
        for (int i = 0; i < nreq; i++)
            if (f->req_peer[i] >= 0)
                flood_verify(f, i, &f->stats[i], round);
    } else {
        /* sends first and a barrier, so eager data arrives unexpected */
        flood_post_sends(f, round);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        flood_post_recvs(f, round);
        flood_complete_waitsome(f, nreq, round);
    }
}

static void test_flood(void)
{
    struct flood f;
    int maxreq = 2 * (nprocs - 1) * NMSG;

    f.sslab = calloc((size_t)nprocs, sizeof(uint8_t *));
    f.rslab = calloc((size_t)nprocs, sizeof(uint8_t *));
    f.reqs = malloc(sizeof(MPI_Request) * (size_t)maxreq);
    f.stats = malloc(sizeof(MPI_Status) * (size_t)maxreq);
    f.req_peer = malloc(sizeof(int) * (size_t)maxreq);
    f.req_tag = malloc(sizeof(int) * (size_t)maxreq);
    if (!f.sslab || !f.rslab || !f.reqs || !f.stats || !f.req_peer ||
        !f.req_tag)
        fail("out of memory");
    for (int p = 0; p < nprocs; p++) {
        if (p == my_rank)
            continue;
        f.sslab[p] = malloc(flood_offset(NMSG, my_rank, p));
        f.rslab[p] = malloc(flood_offset(NMSG, p, my_rank));
        if (!f.sslab[p] || !f.rslab[p])
            fail("out of memory");
    }

    for (int round = 0; round < 2; round++) {
        flood_round(&f, round);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    for (int p = 0; p < nprocs; p++) {
        free(f.sslab[p]);
        free(f.rslab[p]);
    }
    free(f.sslab);
    free(f.rslab);
    free(f.reqs);
    free(f.stats);
    free(f.req_peer);
    free(f.req_tag);
}

/* ------------------------------------------------------------------ */
/* Part 2: ordering of same-tag streams                                */
/* ------------------------------------------------------------------ */

#define ORDER_MAX (160 * 1024)

/* Sequence n of a stream: a 0-byte message every 16th, a large (rendezvous
 * sized) one every 8th, medium every 8th, small otherwise. */
static size_t order_size(int n)
{
    if (n % 16 == 0)
        return 0;
    if (n % 8 == 7)
        return 128 * 1024 + (size_t)n * 13;
    if (n % 8 == 3)
        return 20000 + (size_t)n;
    return 4 + (size_t)(n * 29) % 1400;
}

/* Stamp the sequence number into the first 4 bytes (when they exist) so a
 * misordered message can be identified in the diagnostic. */
static void order_fill(uint8_t *buf, int src, int dst, int n)
{
    size_t len = order_size(n);
    uint32_t seq = (uint32_t)n;

    fill_pattern(buf, len, msg_seed(2, src, dst, n));
    if (len >= 4)
        memcpy(buf, &seq, 4);
}

static void order_verify(const uint8_t *buf, const MPI_Status *st, int src,
                         int n)
{
    size_t len = order_size(n);
    uint32_t seed = msg_seed(2, src, my_rank, n), seq;
    int count = -1;
    size_t i = 0;

    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    if (count >= 4) {
        memcpy(&seq, buf, 4);
        if (seq != (uint32_t)n)
            fail("ordering from rank %d: receive #%d got message #%u "
                 "(non-overtaking violated)", src, n, seq);
    }
    if (count != (int)len)
        fail("ordering from rank %d: receive #%d has %d bytes, message #%d "
             "has %zu (out of order?)", src, n, count, n, len);
    if (st->MPI_SOURCE != src || st->MPI_TAG != ORDER_TAG)
        fail("ordering from rank %d: status source/tag %d/%d", src,
             st->MPI_SOURCE, st->MPI_TAG);
    /* bytes 0-3 hold the sequence number checked above */
    if (count_bad(buf, len >= 4 ? 4 : 0, len, seed, &i))
        fail("ordering from rank %d: message #%d byte %zu corrupt "
             "(got 0x%02x, expected 0x%02x)", src, n, i, buf[i],
             pattern_byte(seed, i));
    /* the receive buffer is bigger than the message: the rest of it and
     * the guard behind it must be untouched */
    i = len + first_not(buf + len, ORDER_MAX - len, POISON);
    if (i < ORDER_MAX)
        fail("ordering from rank %d: message #%d (%zu bytes) wrote "
             "byte %zu of the receive buffer", src, n, len, i);
    check_guard(buf + ORDER_MAX, "ordering receive");
}

static void order_send_stream(int dst)
{
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * NORDER);
    uint8_t **bufs = malloc(sizeof(uint8_t *) * NORDER);

    if (!reqs || !bufs)
        fail("out of memory");
    /* wait until the receiver has pre-posted its first half */
    CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, dst, GO_TAG, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE));
    for (int n = 0; n < NORDER; n++) {
        bufs[n] = malloc(order_size(n) + 1);
        if (!bufs[n])
            fail("out of memory");
        order_fill(bufs[n], my_rank, dst, n);
        CHECK_MPI(MPI_Isend(bufs[n], (int)order_size(n), MPI_BYTE, dst,
                            ORDER_TAG, MPI_COMM_WORLD, &reqs[n]));
    }
    CHECK_MPI(MPI_Waitall(NORDER, reqs, MPI_STATUSES_IGNORE));
    for (int n = 0; n < NORDER; n++)
        free(bufs[n]);
    free(bufs);
    free(reqs);
}

static void order_recv_stream(int src)
{
    size_t slot = ORDER_MAX + GUARD_BYTES;
    uint8_t *bufs = malloc(slot * NPREPOST);
    uint8_t *one = malloc(slot);
    MPI_Request reqs[NPREPOST];
    MPI_Status stats[NPREPOST], st;

    if (!bufs || !one)
        fail("out of memory");
    memset(bufs, POISON, slot * NPREPOST);
    for (int n = 0; n < NPREPOST; n++)
        CHECK_MPI(MPI_Irecv(bufs + slot * (size_t)n, ORDER_MAX, MPI_BYTE,
                            src, ORDER_TAG, MPI_COMM_WORLD, &reqs[n]));
    CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, src, GO_TAG, MPI_COMM_WORLD));
    /* the rest of the stream is matched by blocking receives posted now,
     * while earlier messages may still be in flight or unexpected */
    for (int n = NPREPOST; n < NORDER; n++) {
        memset(one, POISON, slot);
        CHECK_MPI(MPI_Recv(one, ORDER_MAX, MPI_BYTE, src, ORDER_TAG,
                           MPI_COMM_WORLD, &st));
        order_verify(one, &st, src, n);
    }
    CHECK_MPI(MPI_Waitall(NPREPOST, reqs, stats));
    for (int n = 0; n < NPREPOST; n++)
        order_verify(bufs + slot * (size_t)n, &stats[n], src, n);
    free(bufs);
    free(one);
}

static void test_ordering(void)
{
    /* Ordered pairs in one global order: deadlock free, one at a time. */
    for (int s = 0; s < nprocs; s++) {
        for (int d = 0; d < nprocs; d++) {
            if (s == d)
                continue;
            if (my_rank == s)
                order_send_stream(d);
            else if (my_rank == d)
                order_recv_stream(s);
        }
    }
}

int main(int argc, char **argv)
{
    nprocs = mpitest_init(&argc, &argv);

    test_flood();
    test_ordering();

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    mpitest_pass();
    MPI_Finalize();
    return 0;
}
