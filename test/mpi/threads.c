/*
 * threads.c - concurrent point-to-point traffic from several threads.
 *
 * Requires MPI_THREAD_MULTIPLE (fails clearly if the library provides
 * less). Ranks are paired (0-1, 2-3, ...; an odd last rank idles). Each rank
 * starts NTHREADS threads that are released together by a pthread barrier;
 * thread t talks only to thread t of the partner rank, using its own tag
 * (threads 0/1 on MPI_COMM_WORLD, threads 2/3 on private duplicates of it).
 * Every iteration exchanges one message each way with a size from 0 B to
 * 64 KiB, rotating through blocking ping-pong, MPI_Sendrecv and an
 * MPI_Isend/MPI_Irecv exchange. Each payload byte depends on sender,
 * receiver, thread, iteration and position, so a message delivered to the
 * wrong thread or out of order is detected; counts, source and tag are
 * checked and receive buffers are poisoned and guarded.
 */
#include <pthread.h>

#define TEST_NAME "threads"
#include "mpitest.h"

#define NTHREADS 4
#define NITER 200
#define MAX_MSG (64 * 1024)
#define GUARD_BYTES 16
#define POISON 0x3C

static const size_t SIZES[] = {0, 1, 17, 256, 1024, 1473, 4096, 9000,
                               16384, 32768, 65535, MAX_MSG};
#define NUM_SIZES (sizeof(SIZES) / sizeof(SIZES[0]))

static uint32_t msg_seed(int src, int dst, int thread, int iter)
{
    return mix32(mix32(((uint32_t)src << 16) ^ ((uint32_t)dst << 8) ^
                       (uint32_t)thread) ^ ((uint32_t)iter * 0x9e3779b9U));
}

/* ------------------------------------------------------------------ */
/* Per-thread work                                                     */
/* ------------------------------------------------------------------ */

struct worker {
    int thread;            /* 0 .. NTHREADS-1                     */
    int peer;              /* partner rank                         */
    MPI_Comm comm;         /* communicator this thread uses        */
    pthread_barrier_t *start;
    uint8_t sbuf[MAX_MSG];
    uint8_t rbuf[MAX_MSG + GUARD_BYTES];
};

static void prepare_send(struct worker *w, int iter, size_t len)
{
    uint32_t seed = msg_seed(my_rank, w->peer, w->thread, iter);
    fill_pattern(w->sbuf, len, seed);
    memset(w->rbuf, POISON, len + GUARD_BYTES);
}

static void verify(struct worker *w, int iter, size_t len,
                   const MPI_Status *st)
{
    uint32_t seed = msg_seed(w->peer, my_rank, w->thread, iter);
    int count = -1;
    size_t i = 0;

    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    if (count != (int)len || st->MPI_SOURCE != w->peer ||
        st->MPI_TAG != w->thread)
        fail("thread %d iter %d: got %d bytes from %d tag %d, expected %zu "
             "bytes from %d tag %d", w->thread, iter, count, st->MPI_SOURCE,
             st->MPI_TAG, len, w->peer, w->thread);
    if (count_bad(w->rbuf, 0, len, seed, &i))
        fail("thread %d iter %d (%zu bytes): byte %zu is 0x%02x, "
             "expected 0x%02x (wrong thread's or stale data?)",
             w->thread, iter, len, i, w->rbuf[i], pattern_byte(seed, i));
    if (first_not(w->rbuf + len, GUARD_BYTES, POISON) < GUARD_BYTES)
        fail("thread %d iter %d: receive of %zu bytes overran its "
             "buffer", w->thread, iter, len);
}

/* One iteration: a message each way, in one of three styles. */
static void iteration(struct worker *w, int iter)
{
    size_t len = SIZES[(size_t)(iter + w->thread * 3) % NUM_SIZES];
    int tag = w->thread, n = (int)len;
    MPI_Status st;

    prepare_send(w, iter, len);
    switch (iter % 3) {
    case 0:  /* blocking ping-pong, lower rank first */
        if (my_rank < w->peer) {
            CHECK_MPI(MPI_Send(w->sbuf, n, MPI_BYTE, w->peer, tag, w->comm));
            CHECK_MPI(MPI_Recv(w->rbuf, n, MPI_BYTE, w->peer, tag, w->comm,
                               &st));
        } else {
            CHECK_MPI(MPI_Recv(w->rbuf, n, MPI_BYTE, w->peer, tag, w->comm,
                               &st));
            CHECK_MPI(MPI_Send(w->sbuf, n, MPI_BYTE, w->peer, tag, w->comm));
        }
        break;
    case 1:
        CHECK_MPI(MPI_Sendrecv(w->sbuf, n, MPI_BYTE, w->peer, tag, w->rbuf,
                               n, MPI_BYTE, w->peer, tag, w->comm, &st));
        break;
    default: {
        MPI_Request req[2];
        MPI_Status sts[2];
        CHECK_MPI(MPI_Irecv(w->rbuf, n, MPI_BYTE, w->peer, tag, w->comm,
                            &req[0]));
        CHECK_MPI(MPI_Isend(w->sbuf, n, MPI_BYTE, w->peer, tag, w->comm,
                            &req[1]));
        CHECK_MPI(MPI_Waitall(2, req, sts));
        st = sts[0];
        break;
    }
    }
    verify(w, iter, len, &st);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    pthread_barrier_wait(w->start);   /* all threads begin together */
    for (int iter = 0; iter < NITER; iter++)
        iteration(w, iter);
    return NULL;
}

static const char *level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "unknown";
    }
}

int main(int argc, char **argv)
{
    int provided = -1, nprocs;
    struct worker *w[NTHREADS];
    pthread_t tid[NTHREADS];
    pthread_barrier_t start;
    MPI_Comm dups[NTHREADS];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (provided < MPI_THREAD_MULTIPLE)
        fail("MPI_Init_thread provided %s, this test needs "
             "MPI_THREAD_MULTIPLE", level_name(provided));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (nprocs < 2)
        fail("needs at least 2 ranks, got %d", nprocs);

    /* threads 2 and 3 use duplicates (collective: every rank dups) */
    for (int t = 0; t < NTHREADS; t++) {
        dups[t] = MPI_COMM_NULL;
        if (t >= 2) {
            CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dups[t]));
            MPI_Comm_set_errhandler(dups[t], MPI_ERRORS_RETURN);
        }
    }

    int peer = my_rank ^ 1;
    if (peer < nprocs) {
        pthread_barrier_init(&start, NULL, NTHREADS);
        for (int t = 0; t < NTHREADS; t++) {
            w[t] = malloc(sizeof(struct worker));
            if (!w[t])
                fail("out of memory");
            w[t]->thread = t;
            w[t]->peer = peer;
            w[t]->comm = (t >= 2) ? dups[t] : MPI_COMM_WORLD;
            w[t]->start = &start;
            if (pthread_create(&tid[t], NULL, worker_main, w[t]) != 0)
                fail("pthread_create failed");
        }
        for (int t = 0; t < NTHREADS; t++) {
            pthread_join(tid[t], NULL);
            free(w[t]);
        }
        pthread_barrier_destroy(&start);
    }

    for (int t = 2; t < NTHREADS; t++)
        CHECK_MPI(MPI_Comm_free(&dups[t]));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    mpitest_pass();
    MPI_Finalize();
    return 0;
}
