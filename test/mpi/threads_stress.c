/*
 * threads_stress.c - MPI_THREAD_MULTIPLE stress: every thread of every rank
 * talks to every other rank at once.
 *
 * Usage: threads_stress [ITERATIONS [MAX_BYTES [SECONDS]]]
 *   ITERATIONS  rounds per thread (default 60)
 *   MAX_BYTES   largest message (default 262144); sizes above are skipped
 *   SECONDS     watchdog: the job fails if it is not done by then (default
 *               150); the test is bounded by ITERATIONS, not by a clock,
 *               so both sides always agree on how many messages there are
 *
 * Requires MPI_THREAD_MULTIPLE (fails clearly if the library provides
 * less) and 2 or more ranks. Each rank starts NWORKERS worker threads; worker
 * t uses its own duplicate of MPI_COMM_WORLD and tag 100 + t, and in every
 * round exchanges one message with each other rank (all peers at once,
 * nonblocking), with a size rotating from 8 B to 256 KiB so that the
 * eager, rendezvous (send/receive fragments) and RDMA PUT pipeline paths of
 * the BTL all run concurrently. Even workers complete with MPI_Waitall;
 * odd workers find each incoming message with an MPI_Iprobe loop (checking
 * the probed size), receive it with MPI_Recv and complete their sends with
 * an MPI_Testall loop. NPROBERS more threads spin in MPI_Iprobe (on a tag
 * nobody sends) and MPI_Test (on a receive that only completes at the end)
 * until the workers are done, so progress runs from several threads at
 * once. Payload bytes depend on sender, receiver, worker, round and
 * position; counts, sources and tags are checked; receive buffers are
 * poisoned and guarded.
 */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define TEST_NAME "threads_stress"
#include "mpitest.h"

/* Under helgrind: ob1 completes requests with atomics that helgrind cannot
 * see, so a buffer handed back by MPI_Wait/MPI_Test looks "racy" against
 * the BTL's earlier copy-out (send) or placement (receive, PUT) in another
 * thread's progress call. OWNED_BY_US(buf, len) tells helgrind to forget
 * the buffer's history at the point where MPI has returned it to us; it is
 * a no-op outside valgrind. What it hides - the BTL touching a buffer after
 * reporting completion - is what the payload check catches: every round's
 * pattern differs, so a late copy-out sends the next round's bytes and a
 * late placement overwrites the verified data or the next poison. */
#if defined(__has_include)
#if __has_include(<valgrind/helgrind.h>)
#include <valgrind/helgrind.h>
#define OWNED_BY_US(buf, len) VALGRIND_HG_CLEAN_MEMORY((buf), (len))
#endif
#endif
#ifndef OWNED_BY_US
#define OWNED_BY_US(buf, len) ((void)(buf), (void)(len))
#endif

#define NWORKERS 4
#define NPROBERS 2
#define TAG_BASE 100
#define TAG_NEVER 999       /* probed for, never sent */
#define TAG_STOP 998        /* the probers' pending receive */
#define MAX_MSG (256 * 1024)
#define GUARD_BYTES 16
#define POISON 0xA5

/* 8 B .. 256 KiB: eager (the limit is 65 KiB with ob1's header, so 64 KiB
 * goes eager and 65 KiB + 1 by rendezvous), rendezvous fragments, and PUT
 * (ob1's RDMA pipeline starts at eager_limit + rdma_pipeline_send_length). */
static const size_t SIZES[] = {8,     100,   1024,  4096,   4097,   9000,   32768,
                               32769, 65536, 66561, 98304, 131072, 200001, MAX_MSG};
#define NUM_SIZES (sizeof(SIZES) / sizeof(SIZES[0]))

static int nprocs;
static int iterations = 60;
static size_t max_bytes = MAX_MSG;
static volatile int workers_done;   /* written under done_lock */
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t msg_seed(int src, int dst, int worker, int iter)
{
    return mix32(mix32(((uint32_t)src << 20) ^ ((uint32_t)dst << 10) ^
                       (uint32_t)worker) ^ ((uint32_t)iter * 0x85ebca6bU));
}

static size_t msg_len(int worker, int iter, int src, int dst)
{
    size_t len;
    int k = iter + worker * 5 + src * 3 + dst;
    do {
        len = SIZES[(size_t)k++ % NUM_SIZES];
    } while (len > max_bytes);
    return len;
}

struct worker {
    int id;
    MPI_Comm comm;
    pthread_barrier_t *start;
    uint8_t **sbuf;         /* per peer rank (NULL for self) */
    uint8_t **rbuf;
    long messages;
};

static int is_prober_thread_done(void)
{
    int d;
    pthread_mutex_lock(&done_lock);
    d = workers_done;
    pthread_mutex_unlock(&done_lock);
    return d == NWORKERS;
}

static void verify(struct worker *w, int peer, int iter, size_t len,
                   const MPI_Status *st)
{
    uint32_t seed = msg_seed(peer, my_rank, w->id, iter);
    const uint8_t *buf = w->rbuf[peer];
    int count = -1;
    size_t i = 0;

    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    if (count != (int)len || st->MPI_SOURCE != peer ||
        st->MPI_TAG != TAG_BASE + w->id)
        fail("worker %d round %d: got %d bytes from %d tag %d, expected %zu "
             "bytes from %d tag %d", w->id, iter, count, st->MPI_SOURCE,
             st->MPI_TAG, len, peer, TAG_BASE + w->id);
    if (count_bad(buf, 0, len, seed, &i))
        fail("worker %d round %d from rank %d (%zu bytes): byte %zu is "
             "0x%02x, expected 0x%02x (another thread's or stale data?)",
             w->id, iter, peer, len, i, buf[i], pattern_byte(seed, i));
    if (first_not(buf + len, GUARD_BYTES, POISON) < GUARD_BYTES)
        fail("worker %d round %d: receive of %zu bytes from %d overran its "
             "buffer", w->id, iter, len, peer);
}

/* One round: a message to and from every other rank, all in flight. */
static void round_waitall(struct worker *w, int iter)
{
    MPI_Request req[2 * 64];
    MPI_Status st[2 * 64];
    int n = 0, tag = TAG_BASE + w->id;

    for (int p = 0; p < nprocs; p++) {
        if (p == my_rank)
            continue;
        size_t rlen = msg_len(w->id, iter, p, my_rank);
        memset(w->rbuf[p], POISON, rlen + GUARD_BYTES);
        CHECK_MPI(MPI_Irecv(w->rbuf[p], (int)rlen, MPI_BYTE, p, tag, w->comm,
                            &req[n++]));
    }
    for (int p = 0; p < nprocs; p++) {
        if (p == my_rank)
            continue;
        size_t slen = msg_len(w->id, iter, my_rank, p);
        fill_pattern(w->sbuf[p], slen, msg_seed(my_rank, p, w->id, iter));
        CHECK_MPI(MPI_Isend(w->sbuf[p], (int)slen, MPI_BYTE, p, tag, w->comm,
                            &req[n++]));
    }
    CHECK_MPI(MPI_Waitall(n, req, st));
    for (int p = 0, k = 0; p < nprocs; p++) {
        if (p == my_rank)
            continue;
        OWNED_BY_US(w->sbuf[p], MAX_MSG);
        OWNED_BY_US(w->rbuf[p], MAX_MSG + GUARD_BYTES);
        verify(w, p, iter, msg_len(w->id, iter, p, my_rank), &st[k++]);
        w->messages++;
    }
}

static void round_probe(struct worker *w, int iter)
{
    MPI_Request sreq[64];
    int n = 0, tag = TAG_BASE + w->id, done = 0;

    for (int p = 0; p < nprocs; p++) {
        if (p == my_rank)
            continue;
        size_t slen = msg_len(w->id, iter, my_rank, p);
        fill_pattern(w->sbuf[p], slen, msg_seed(my_rank, p, w->id, iter));
        CHECK_MPI(MPI_Isend(w->sbuf[p], (int)slen, MPI_BYTE, p, tag, w->comm,
                            &sreq[n++]));
    }
    for (int p = 0; p < nprocs; p++) {
        MPI_Status st;
        int flag = 0, count = -1;
        if (p == my_rank)
            continue;
        size_t rlen = msg_len(w->id, iter, p, my_rank);
        while (!flag) {
            CHECK_MPI(MPI_Iprobe(p, tag, w->comm, &flag, &st));
            if (!flag)
                CHECK_MPI(MPI_Testall(n, sreq, &done, MPI_STATUSES_IGNORE));
        }
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        if (count != (int)rlen || st.MPI_SOURCE != p)
            fail("worker %d round %d: MPI_Iprobe saw %d bytes from %d, "
                 "expected %zu from %d", w->id, iter, count, st.MPI_SOURCE,
                 rlen, p);
        memset(w->rbuf[p], POISON, rlen + GUARD_BYTES);
        CHECK_MPI(MPI_Recv(w->rbuf[p], (int)rlen, MPI_BYTE, p, tag, w->comm,
                           &st));
        OWNED_BY_US(w->rbuf[p], MAX_MSG + GUARD_BYTES);
        verify(w, p, iter, rlen, &st);
        w->messages++;
    }
    while (!done)
        CHECK_MPI(MPI_Testall(n, sreq, &done, MPI_STATUSES_IGNORE));
    for (int p = 0; p < nprocs; p++)
        if (p != my_rank)
            OWNED_BY_US(w->sbuf[p], MAX_MSG);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    pthread_barrier_wait(w->start);
    for (int iter = 0; iter < iterations; iter++) {
        if (w->id & 1)
            round_probe(w, iter);
        else
            round_waitall(w, iter);
    }
    pthread_mutex_lock(&done_lock);
    workers_done++;
    pthread_mutex_unlock(&done_lock);
    return NULL;
}

/* Spins in MPI_Iprobe and MPI_Test until every worker of this rank is
 * done; the pending receive is completed by this rank itself at the end. */
struct prober {
    int id;
    MPI_Comm comm;
    pthread_barrier_t *start;
    long probes;
};

static void *prober_main(void *arg)
{
    struct prober *pr = arg;
    MPI_Request req;
    int stop = 0, flag = 0, got = 0;

    CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, my_rank, TAG_STOP,
                        pr->comm, &req));
    pthread_barrier_wait(pr->start);
    while (!is_prober_thread_done()) {
        MPI_Status st;
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, TAG_NEVER, pr->comm, &flag, &st));
        if (flag)
            fail("prober %d: MPI_Iprobe found a message with tag %d that "
                 "nobody sent (from %d)", pr->id, TAG_NEVER, st.MPI_SOURCE);
        CHECK_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
        if (flag)
            fail("prober %d: receive completed before its message was sent",
                 pr->id);
        pr->probes++;
    }
    /* complete our own receive: a self message on the prober's comm */
    CHECK_MPI(MPI_Send(&stop, 1, MPI_INT, my_rank, TAG_STOP, pr->comm));
    while (!flag)
        CHECK_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    return NULL;
}

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL threads_stress: watchdog expired "
                              "(hang or far too slow)\n";
    (void)!write(1, msg, sizeof(msg) - 1);
    _exit(3);
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
    int provided = -1, seconds = 150;
    struct worker w[NWORKERS];
    struct prober pr[NPROBERS];
    pthread_t tid[NWORKERS + NPROBERS];
    pthread_barrier_t start;
    long sent = 0, total = 0;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (provided < MPI_THREAD_MULTIPLE)
        fail("MPI_Init_thread provided %s, this test needs "
             "MPI_THREAD_MULTIPLE", level_name(provided));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (nprocs < 2 || nprocs > 64)
        fail("needs 2 to 64 ranks, got %d", nprocs);
    if (argc > 1)
        iterations = atoi(argv[1]);
    if (argc > 2)
        max_bytes = (size_t)atol(argv[2]);
    if (argc > 3)
        seconds = atoi(argv[3]);
    if (iterations < 1 || max_bytes < SIZES[0] || max_bytes > MAX_MSG ||
        seconds < 1)
        fail("usage: threads_stress [ITERATIONS>=1 [MAX_BYTES 8..%d "
             "[SECONDS>=1]]]", MAX_MSG);
    signal(SIGALRM, watchdog);
    alarm((unsigned)seconds);

    pthread_barrier_init(&start, NULL, NWORKERS + NPROBERS);
    for (int t = 0; t < NWORKERS; t++) {
        w[t].id = t;
        w[t].start = &start;
        w[t].messages = 0;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm));
        MPI_Comm_set_errhandler(w[t].comm, MPI_ERRORS_RETURN);
        w[t].sbuf = xmalloc(sizeof(uint8_t *) * (size_t)nprocs);
        w[t].rbuf = xmalloc(sizeof(uint8_t *) * (size_t)nprocs);
        for (int p = 0; p < nprocs; p++) {
            w[t].sbuf[p] = (p == my_rank) ? NULL : xmalloc(MAX_MSG);
            w[t].rbuf[p] = (p == my_rank) ? NULL : xmalloc(MAX_MSG + GUARD_BYTES);
        }
    }
    for (int t = 0; t < NPROBERS; t++) {
        pr[t].id = t;
        pr[t].start = &start;
        pr[t].probes = 0;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &pr[t].comm));
        MPI_Comm_set_errhandler(pr[t].comm, MPI_ERRORS_RETURN);
    }
    for (int t = 0; t < NWORKERS; t++)
        if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0)
            fail("pthread_create failed");
    for (int t = 0; t < NPROBERS; t++)
        if (pthread_create(&tid[NWORKERS + t], NULL, prober_main, &pr[t]) != 0)
            fail("pthread_create failed");
    for (int t = 0; t < NWORKERS + NPROBERS; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&start);

    for (int t = 0; t < NWORKERS; t++) {
        sent += w[t].messages;
        for (int p = 0; p < nprocs; p++) {
            free(w[t].sbuf[p]);
            free(w[t].rbuf[p]);
        }
        free(w[t].sbuf);
        free(w[t].rbuf);
        CHECK_MPI(MPI_Comm_free(&w[t].comm));
    }
    for (int t = 0; t < NPROBERS; t++)
        CHECK_MPI(MPI_Comm_free(&pr[t].comm));
    if (sent != (long)NWORKERS * iterations * (nprocs - 1))
        fail("received %ld messages, expected %ld", sent,
             (long)NWORKERS * iterations * (nprocs - 1));
    CHECK_MPI(MPI_Reduce(&sent, &total, 1, MPI_LONG, MPI_SUM, 0,
                         MPI_COMM_WORLD));
    if (my_rank == 0)
        printf("threads_stress: %d ranks x %d workers x %d rounds, %ld "
               "messages verified, largest %zu bytes\n", nprocs, NWORKERS,
               iterations, total, max_bytes);
    alarm(0);
    mpitest_pass();
    MPI_Finalize();
    return 0;
}
