/*
 * pingpong.c - point-to-point ping-pong across every message size class.
 *
 * For each pair of ranks (every pair when run on 2-4 ranks, rank 0 with
 * every other rank beyond that) and for every size in SIZES[], the pair
 * exchanges messages in three modes:
 *   - MODE_SEND:  MPI_Send  / MPI_Recv ping, then the reply the same way
 *   - MODE_SSEND: MPI_Ssend / MPI_Recv ping, then the reply the same way
 *   - MODE_IXCHG: both sides MPI_Irecv + MPI_Isend at once (bidirectional)
 *
 * Every payload byte is generated from a seed that depends on sender,
 * receiver, size, mode and iteration, so misplaced, stale, truncated,
 * shifted or cross-delivered data is detected. Receive buffers are poisoned
 * before each receive and followed by guard bytes that must stay intact,
 * and MPI_Get_count / MPI_SOURCE / MPI_TAG are checked as well. Odd
 * iterations use deliberately misaligned buffers.
 *
 * Disjoint pairs run concurrently (round-robin schedule), so on 4 ranks two
 * ping-pongs are on the wire at the same time.
 */
#define TEST_NAME "pingpong"
#include "mpitest.h"

#define GUARD_BYTES 64
#define POISON 0xA5

static const size_t SIZES[] = {
    0, 1, 7, 8, 64, 255, 256, 700, 735, 736, 737, 768, 1023, 1024,
    1400, 1424, 1448, 1472, 1473, 2048, 2897, 4096, 8192,
    12 * 1024, 16 * 1024, 32 * 1024 - 1, 32 * 1024, 32 * 1024 + 1,
    64 * 1024, 100000, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024,
    16 * 1024 * 1024,
};
#define NUM_SIZES (sizeof(SIZES) / sizeof(SIZES[0]))

enum mode { MODE_SEND, MODE_SSEND, MODE_IXCHG, MODE_COUNT };
static const char *MODE_NAMES[MODE_COUNT] = {"Send/Recv", "Ssend/Recv",
                                             "Isend/Irecv"};

/* ------------------------------------------------------------------ */
/* Payload patterns (pattern_byte() etc. are in mpitest.h)             */
/* ------------------------------------------------------------------ */

/* Seed identifying one message: who sent it to whom, and which one. */
static uint32_t msg_seed(int src, int dst, int size_idx, int mode, int iter)
{
    uint32_t s = mix32((uint32_t)src + 0x1000U);
    s = mix32(s ^ ((uint32_t)dst + 0x20000U));
    s = mix32(s ^ ((uint32_t)size_idx << 8) ^ (uint32_t)mode);
    return mix32(s ^ ((uint32_t)iter * 0x9e3779b9U));
}

/* Poison the receive area and the guard bytes that follow it. */
static void poison(uint8_t *buf, size_t len)
{
    memset(buf, POISON, len + GUARD_BYTES);
}

/*
 * Verify a received message: status fields, element count, every payload
 * byte and the guard bytes behind it. 'what' names the exchange in the
 * diagnostic.
 */
static void verify_recv(const uint8_t *buf, size_t len, uint32_t seed,
                        const MPI_Status *st, int src, int tag,
                        const char *what)
{
    int count = -1;
    size_t bad, first_bad = 0, g;

    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    if (count != (int)len)
        fail("%s: MPI_Get_count=%d, expected %zu", what, count, len);
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag)
        fail("%s: status source/tag %d/%d, expected %d/%d", what,
             st->MPI_SOURCE, st->MPI_TAG, src, tag);
    bad = count_bad(buf, 0, len, seed, &first_bad);
    if (bad)
        fail("%s: %zu of %zu bytes corrupt, first at offset %zu "
             "(got 0x%02x, expected 0x%02x)", what, bad, len, first_bad,
             buf[first_bad], pattern_byte(seed, first_bad));
    g = first_not(buf + len, GUARD_BYTES, POISON);
    if (g < GUARD_BYTES)
        fail("%s: guard byte %zu after a %zu-byte receive overwritten "
             "(0x%02x)", what, g, len, buf[len + g]);
}

/* ------------------------------------------------------------------ */
/* One exchange                                                        */
/* ------------------------------------------------------------------ */

struct xfer {
    int peer;        /* the other rank of the pair                */
    int initiator;   /* nonzero on the rank that pings first      */
    int size_idx;    /* index into SIZES                          */
    int mode;        /* enum mode                                 */
    int iter;        /* repetition number                         */
    uint8_t *sbuf;   /* send buffer (already offset if misaligned) */
    uint8_t *rbuf;   /* receive buffer (ditto)                    */
};

static void describe(const struct xfer *x, char *out, size_t n)
{
    snprintf(out, n, "%s %zu bytes from rank %d, iter %d%s",
             MODE_NAMES[x->mode], SIZES[x->size_idx], x->peer, x->iter,
             (x->iter & 1) ? " (misaligned buffers)" : "");
}

/* Send this rank's message of the exchange to the peer. */
static void send_one(const struct xfer *x, int synchronous)
{
    size_t len = SIZES[x->size_idx];
    int tag = 100 + x->size_idx;

    fill_pattern(x->sbuf, len,
                 msg_seed(my_rank, x->peer, x->size_idx, x->mode, x->iter));
    if (synchronous)
        CHECK_MPI(MPI_Ssend(x->sbuf, (int)len, MPI_BYTE, x->peer, tag,
                            MPI_COMM_WORLD));
    else
        CHECK_MPI(MPI_Send(x->sbuf, (int)len, MPI_BYTE, x->peer, tag,
                           MPI_COMM_WORLD));
}

/* Receive the peer's message of the exchange and verify it. */
static void recv_one(const struct xfer *x)
{
    size_t len = SIZES[x->size_idx];
    int tag = 100 + x->size_idx;
    MPI_Status st;
    char what[160];

    poison(x->rbuf, len);
    CHECK_MPI(MPI_Recv(x->rbuf, (int)len, MPI_BYTE, x->peer, tag,
                       MPI_COMM_WORLD, &st));
    describe(x, what, sizeof(what));
    verify_recv(x->rbuf, len,
                msg_seed(x->peer, my_rank, x->size_idx, x->mode, x->iter),
                &st, x->peer, tag, what);
}

/* Both sides post a receive and a send at once, then wait for both. */
static void exchange_nonblocking(const struct xfer *x)
{
    size_t len = SIZES[x->size_idx];
    int tag = 100 + x->size_idx;
    MPI_Request req[2];
    MPI_Status st[2];
    char what[160];

    poison(x->rbuf, len);
    CHECK_MPI(MPI_Irecv(x->rbuf, (int)len, MPI_BYTE, x->peer, tag,
                        MPI_COMM_WORLD, &req[0]));
    fill_pattern(x->sbuf, len,
                 msg_seed(my_rank, x->peer, x->size_idx, x->mode, x->iter));
    CHECK_MPI(MPI_Isend(x->sbuf, (int)len, MPI_BYTE, x->peer, tag,
                        MPI_COMM_WORLD, &req[1]));
    CHECK_MPI(MPI_Waitall(2, req, st));
    describe(x, what, sizeof(what));
    verify_recv(x->rbuf, len,
                msg_seed(x->peer, my_rank, x->size_idx, x->mode, x->iter),
                &st[0], x->peer, tag, what);
}

static void run_exchange(const struct xfer *x)
{
    int sync = (x->mode == MODE_SSEND);

    if (x->mode == MODE_IXCHG) {
        exchange_nonblocking(x);
    } else if (x->initiator) {
        send_one(x, sync);
        recv_one(x);
    } else {
        recv_one(x);
        send_one(x, sync);
    }
}

/* Fewer repetitions for big messages keep the runtime bounded. */
static int iterations_for(size_t len)
{
    if (len <= 64 * 1024)
        return 3;
    if (len <= 1024 * 1024)
        return 2;
    return 1;
}

/* All sizes, modes and repetitions with one peer. */
static void pingpong_with(int peer, uint8_t *sbase, uint8_t *rbase)
{
    for (int s = 0; s < (int)NUM_SIZES; s++) {
        for (int mode = 0; mode < MODE_COUNT; mode++) {
            for (int it = 0; it < iterations_for(SIZES[s]); it++) {
                struct xfer x = {
                    .peer = peer,
                    .initiator = my_rank < peer,
                    .size_idx = s,
                    .mode = mode,
                    .iter = it,
                    /* odd iterations: send and receive at odd addresses */
                    .sbuf = sbase + ((it & 1) ? 1 : 0),
                    .rbuf = rbase + ((it & 1) ? 3 : 0),
                };
                run_exchange(&x);
            }
        }
    }
}

/* ------------------------------------------------------------------ */
/* Pair schedule                                                       */
/* ------------------------------------------------------------------ */

/*
 * Partner of 'rank' in round 'round', or -1 when it sits the round out.
 * On up to 4 ranks this is the circle method for a round-robin tournament
 * (every pair meets exactly once, disjoint pairs share a round); beyond
 * that only rank 0 talks to everybody, one rank per round.
 */
static int partner(int rank, int round, int nprocs)
{
    if (nprocs > 4) {
        if (rank == 0)
            return round + 1;
        return (rank == round + 1) ? 0 : -1;
    }
    int n = nprocs + (nprocs & 1);       /* even number of slots */
    int p;
    if (rank == n - 1)
        p = round;
    else if (rank == round)
        p = n - 1;
    else
        p = ((2 * round - rank) % (n - 1) + (n - 1)) % (n - 1);
    return (p >= nprocs) ? -1 : p;       /* slot nprocs is the bye */
}

static int num_rounds(int nprocs)
{
    if (nprocs > 4)
        return nprocs - 1;
    return nprocs + (nprocs & 1) - 1;
}

/* Make sure the schedule covers every required pair exactly once. */
static void check_schedule(int nprocs)
{
    for (int a = 0; a < nprocs; a++) {
        for (int b = a + 1; b < nprocs; b++) {
            int meetings = 0;
            for (int r = 0; r < num_rounds(nprocs); r++) {
                int pa = partner(a, r, nprocs), pb = partner(b, r, nprocs);
                if ((pa == b) != (pb == a))
                    fail("schedule is asymmetric for %d/%d", a, b);
                meetings += (pa == b);
            }
            int wanted = (nprocs <= 4 || a == 0) ? 1 : 0;
            if (meetings != wanted)
                fail("schedule meets %d/%d %d times", a, b, meetings);
        }
    }
}

int main(int argc, char **argv)
{
    size_t max = SIZES[NUM_SIZES - 1];
    int nprocs = mpitest_init(&argc, &argv);

    check_schedule(nprocs);

    /* room for the misalignment offset plus the guard bytes */
    uint8_t *sbase = malloc(max + 16);
    uint8_t *rbase = malloc(max + 16 + GUARD_BYTES);
    if (!sbase || !rbase)
        fail("out of memory");

    for (int r = 0; r < num_rounds(nprocs); r++) {
        int peer = partner(my_rank, r, nprocs);
        if (peer >= 0)
            pingpong_with(peer, sbase, rbase);
    }

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    mpitest_pass();
    free(sbase);
    free(rbase);
    MPI_Finalize();
    return 0;
}
