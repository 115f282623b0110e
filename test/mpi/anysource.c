/*
 * anysource.c - wildcard receives (MPI_ANY_SOURCE / MPI_ANY_TAG).
 *
 * Every rank sends NPER messages of assorted sizes (0 B .. 200 KB, so both
 * eager and rendezvous protocols are used) to every other rank, while
 * receiving the (nprocs-1)*NPER messages addressed to it with wildcards.
 * The receiver cannot know who sends next, so it identifies each message
 * from MPI_Status and then checks:
 *   - MPI_SOURCE is a valid peer and agrees with the sender encoded in the
 *     tag (phases where the tag encodes it);
 *   - MPI_Get_count equals the size that message must have;
 *   - every payload byte (pattern depends on sender, receiver, phase and
 *     message number) and the guard bytes after it;
 *   - no message is received twice or missed, and messages from one sender
 *     arrive in the order sent (MPI non-overtaking).
 * Phases:
 *   0: blocking MPI_Recv(MPI_ANY_SOURCE, MPI_ANY_TAG)
 *   1: MPI_Recv(MPI_ANY_SOURCE, specific tag), tag = message number only
 *   2: all MPI_Irecv(MPI_ANY_SOURCE, MPI_ANY_TAG) pre-posted before any
 *      send, then MPI_Waitall
 *   3: MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG), then an exact-size MPI_Recv
 *      from the probed source/tag
 */
#define TEST_NAME "anysource"
#include "mpitest.h"

static int nprocs = 0;

#define NPER 16              /* messages per (sender, receiver) and phase */
#define NPHASES 4
#define GUARD_BYTES 16
#define POISON 0xC3
#define MAX_MSG 200000

static const size_t MSG_SIZES[8] = {0, 1, 100, 1500, 4000, 20000, 70000,
                                    MAX_MSG};

static uint32_t msg_seed(int phase, int src, int dst, int k)
{
    uint32_t s = mix32(((uint32_t)phase << 20) ^ ((uint32_t)src << 10) ^
                       (uint32_t)dst);
    return mix32(s ^ ((uint32_t)k * 0x9e3779b9U));
}

/* Size of message k; the rotation differs per sender so that concurrent
 * messages from different senders have different sizes. */
static size_t msg_size(int src, int k)
{
    return MSG_SIZES[(k + src) % 8];
}

/* Tag of message k from src in a phase. In phase 1 the tag is only the
 * message number (the receiver names it explicitly); elsewhere it also
 * encodes the sender so MPI_SOURCE can be cross-checked. */
static int msg_tag(int phase, int src, int k)
{
    if (phase == 1)
        return 1000 + k;
    return 2000 * (phase + 1) + src * NPER + k;
}

/* ------------------------------------------------------------------ */
/* Bookkeeping of what has been received                               */
/* ------------------------------------------------------------------ */

struct tally {
    int *next_k;     /* per source: message number expected next */
    int received;
};

/*
 * Decode and verify one received message (buffer buf with room for
 * MAX_MSG + GUARD_BYTES, poisoned before the receive; status st).
 */
static void verify_message(struct tally *t, int phase, const uint8_t *buf,
                           const MPI_Status *st)
{
    int src = st->MPI_SOURCE, tag = st->MPI_TAG, count = -1, k;

    if (src < 0 || src >= nprocs || src == my_rank)
        fail("phase %d: MPI_SOURCE=%d is not a valid peer", phase, src);
    if (phase == 1) {
        k = tag - 1000;
    } else {
        int base = 2000 * (phase + 1);
        if (tag < base || tag >= base + nprocs * NPER)
            fail("phase %d: MPI_TAG=%d outside this phase's tags", phase,
                 tag);
        if ((tag - base) / NPER != src)
            fail("phase %d: MPI_SOURCE=%d but the tag %d was sent by rank "
                 "%d", phase, src, tag, (tag - base) / NPER);
        k = (tag - base) % NPER;
    }
    if (k < 0 || k >= NPER)
        fail("phase %d: MPI_TAG=%d is not a tag of this phase", phase, tag);
    /* non-overtaking: from one source, message numbers come in order */
    if (k != t->next_k[src])
        fail("phase %d: from rank %d got message #%d, expected #%d "
             "(duplicate or out of order)", phase, src, k, t->next_k[src]);
    t->next_k[src]++;
    t->received++;

    size_t len = msg_size(src, k);
    uint32_t seed = msg_seed(phase, src, my_rank, k);
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    if (count != (int)len)
        fail("phase %d: message #%d from rank %d has %d bytes, expected %zu",
             phase, k, src, count, len);
    size_t i = 0;
    if (count_bad(buf, 0, len, seed, &i))
        fail("phase %d: message #%d from rank %d (%zu bytes): byte %zu "
             "is 0x%02x, expected 0x%02x", phase, k, src, len, i, buf[i],
             pattern_byte(seed, i));
    if (first_not(buf + len, GUARD_BYTES, POISON) < GUARD_BYTES)
        fail("phase %d: message #%d from rank %d wrote past its end",
             phase, k, src);
}

static void tally_init(struct tally *t)
{
    t->next_k = calloc((size_t)nprocs, sizeof(int));
    if (!t->next_k)
        fail("out of memory");
    t->received = 0;
}

/* Everything expected must have arrived, from every peer. */
static void tally_finish(struct tally *t, int phase)
{
    for (int p = 0; p < nprocs; p++)
        if (p != my_rank && t->next_k[p] != NPER)
            fail("phase %d: got %d of %d messages from rank %d", phase,
                 t->next_k[p], NPER, p);
    free(t->next_k);
}

/* ------------------------------------------------------------------ */
/* Sending                                                             */
/* ------------------------------------------------------------------ */

struct outbox {
    uint8_t **bufs;
    MPI_Request *reqs;
    int n;
};

/* Isend this rank's NPER messages to every peer, interleaving peers. */
static void send_all(struct outbox *o, int phase)
{
    int total = (nprocs - 1) * NPER;

    o->bufs = calloc((size_t)total, sizeof(uint8_t *));
    o->reqs = malloc(sizeof(MPI_Request) * (size_t)total);
    if (!o->bufs || !o->reqs)
        fail("out of memory");
    o->n = 0;
    for (int k = 0; k < NPER; k++) {
        for (int d = 0; d < nprocs; d++) {
            if (d == my_rank)
                continue;
            size_t len = msg_size(my_rank, k);
            uint32_t seed = msg_seed(phase, my_rank, d, k);
            uint8_t *b = malloc(len + 1);
            if (!b)
                fail("out of memory");
            fill_pattern(b, len, seed);
            o->bufs[o->n] = b;
            CHECK_MPI(MPI_Isend(b, (int)len, MPI_BYTE, d,
                                msg_tag(phase, my_rank, k), MPI_COMM_WORLD,
                                &o->reqs[o->n]));
            o->n++;
        }
    }
}

static void finish_sends(struct outbox *o)
{
    CHECK_MPI(MPI_Waitall(o->n, o->reqs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < o->n; i++)
        free(o->bufs[i]);
    free(o->bufs);
    free(o->reqs);
}

/* ------------------------------------------------------------------ */
/* Receiving phases                                                    */
/* ------------------------------------------------------------------ */

static uint8_t *fresh_buffer(uint8_t *buf)
{
    memset(buf, POISON, MAX_MSG + GUARD_BYTES);
    return buf;
}

/* Phase 0: fully wildcarded blocking receives. */
static void phase_any_any(struct tally *t, uint8_t *buf)
{
    MPI_Status st;
    for (int i = 0; i < (nprocs - 1) * NPER; i++) {
        CHECK_MPI(MPI_Recv(fresh_buffer(buf), MAX_MSG, MPI_BYTE,
                           MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        verify_message(t, 0, buf, &st);
    }
}

/* Phase 1: wildcard source, explicit tag; each tag once from every peer. */
static void phase_any_source(struct tally *t, uint8_t *buf)
{
    MPI_Status st;
    for (int k = 0; k < NPER; k++) {
        for (int i = 0; i < nprocs - 1; i++) {
            CHECK_MPI(MPI_Recv(fresh_buffer(buf), MAX_MSG, MPI_BYTE,
                               MPI_ANY_SOURCE, 1000 + k, MPI_COMM_WORLD,
                               &st));
            if (st.MPI_TAG != 1000 + k)
                fail("phase 1: asked for tag %d, status says %d", 1000 + k,
                     st.MPI_TAG);
            verify_message(t, 1, buf, &st);
        }
    }
}

/* Phase 2: pre-posted wildcard Irecvs; caller sends after a barrier. */
static void phase_preposted(struct tally *t, struct outbox *o)
{
    int n = (nprocs - 1) * NPER;
    size_t slot = MAX_MSG + GUARD_BYTES;
    uint8_t *bufs = malloc(slot * (size_t)n);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)n);
    MPI_Status *stats = malloc(sizeof(MPI_Status) * (size_t)n);

    if (!bufs || !reqs || !stats)
        fail("out of memory");
    for (int i = 0; i < n; i++)
        CHECK_MPI(MPI_Irecv(fresh_buffer(bufs + slot * (size_t)i), MAX_MSG,
                            MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                            MPI_COMM_WORLD, &reqs[i]));
    /* everybody has pre-posted before anybody sends */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    send_all(o, 2);
    CHECK_MPI(MPI_Waitall(n, reqs, stats));
    /* receives match in posting order, so walking them in that order must
     * see each sender's messages in sending order */
    for (int i = 0; i < n; i++)
        verify_message(t, 2, bufs + slot * (size_t)i, &stats[i]);
    free(bufs);
    free(reqs);
    free(stats);
}

/* Phase 3: probe with wildcards, then receive exactly what was probed. */
static void phase_probe(struct tally *t, uint8_t *buf)
{
    MPI_Status pst, st;
    int count = -1;

    for (int i = 0; i < (nprocs - 1) * NPER; i++) {
        CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                            &pst));
        CHECK_MPI(MPI_Get_count(&pst, MPI_BYTE, &count));
        if (count < 0 || count > MAX_MSG)
            fail("phase 3: MPI_Probe reports %d bytes from rank %d tag %d",
                 count, pst.MPI_SOURCE, pst.MPI_TAG);
        CHECK_MPI(MPI_Recv(fresh_buffer(buf), count, MPI_BYTE,
                           pst.MPI_SOURCE, pst.MPI_TAG, MPI_COMM_WORLD, &st));
        if (st.MPI_SOURCE != pst.MPI_SOURCE || st.MPI_TAG != pst.MPI_TAG)
            fail("phase 3: probed %d/%d but received %d/%d",
                 pst.MPI_SOURCE, pst.MPI_TAG, st.MPI_SOURCE, st.MPI_TAG);
        verify_message(t, 3, buf, &st);
    }
}

static void run_phase(int phase, uint8_t *buf)
{
    struct tally t;
    struct outbox o;

    tally_init(&t);
    if (phase == 2) {
        phase_preposted(&t, &o);
    } else {
        send_all(&o, phase);
        if (phase == 0)
            phase_any_any(&t, buf);
        else if (phase == 1)
            phase_any_source(&t, buf);
        else
            phase_probe(&t, buf);
    }
    finish_sends(&o);
    tally_finish(&t, phase);
    if (t.received != (nprocs - 1) * NPER)
        fail("phase %d: received %d messages, expected %d", phase,
             t.received, (nprocs - 1) * NPER);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    int tag_ub_ok = 0;
    int *tag_ub = NULL;

    nprocs = mpitest_init(&argc, &argv);
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub,
                                &tag_ub_ok));
    if (!tag_ub_ok || *tag_ub < 2000 * (NPHASES + 1) + nprocs * NPER)
        fail("MPI_TAG_UB too small for this test");

    uint8_t *buf = malloc(MAX_MSG + GUARD_BYTES);
    if (!buf)
        fail("out of memory");
    for (int phase = 0; phase < NPHASES; phase++)
        run_phase(phase, buf);
    free(buf);

    mpitest_pass();
    MPI_Finalize();
    return 0;
}
