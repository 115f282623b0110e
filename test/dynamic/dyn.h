/*
 * dyn.h - what the dynamic-process tests in test/dynamic/ share (header
 * only, static inline).  A program does "#define TEST_NAME ..." first.
 *
 * Builds on test/mpi/mpitest.h (fail(), CHECK_MPI(), xmalloc(), the
 * payload pattern) and adds the checks every test runs over an
 * intercommunicator between two groups, "side 0" (parents, the accepting
 * job, the listening process of a join) and "side 1" (children, the
 * connecting job, the connecting process):
 *
 *   dyn_exchange():   every rank of each side sends to and receives from
 *                     every rank of the other side at 8 B, 64 KiB (many
 *                     datagrams) and 4 MiB (rendezvous / PUT), at the same
 *                     time in both directions, each byte checked against a
 *                     pattern seeded by (cycle, sender side, sender rank,
 *                     receiver rank, size), poisoned receive buffers with a
 *                     guard that must stay untouched, count and source
 *                     checked;
 *   dyn_collectives(): MPI_Bcast over the intercommunicator from side 0
 *                     (1 MiB) and from side 1 (100 KB), MPI_Allreduce over it
 *                     (each side gets the other side's sum), then
 *                     MPI_Intercomm_merge (side 0 low) and on the merged
 *                     communicator MPI_Allreduce plus a 4 MiB MPI_Bcast from
 *                     its last rank, all checked element by element.
 */
#ifndef DYN_H
#define DYN_H

#include "../mpi/mpitest.h"

#include <unistd.h>

#define DYN_GUARD 64
#define DYN_POISON 0xA5

static const size_t dyn_sizes[3] = {8, 64 * 1024, 4 * 1024 * 1024};

static inline uint32_t dyn_seed(int cycle, int from_side, int from_rank,
                                int to_rank, int what)
{
    return mix32(0x5eed0000U ^ (uint32_t)cycle * 0x01000193U ^
                 (uint32_t)from_side << 28 ^ (uint32_t)from_rank << 20 ^
                 (uint32_t)to_rank << 12 ^ (uint32_t)what);
}

/* Check len pattern bytes followed by DYN_GUARD poison bytes. */
static inline void dyn_check_buf(const uint8_t *buf, size_t len,
                                 uint32_t seed, const char *what)
{
    size_t first = 0, bad = count_bad(buf, 0, len, seed, &first);
    if (bad)
        fail("%s: %zu of %zu bytes wrong, first at offset %zu", what, bad,
             len, first);
    size_t g = first_not(buf + len, DYN_GUARD, DYN_POISON);
    if (g != DYN_GUARD)
        fail("%s: guard byte %zu after the message overwritten", what, g);
}

static inline void dyn_exchange(MPI_Comm inter, int side, int cycle)
{
    int me, rsize;
    CHECK_MPI(MPI_Comm_rank(inter, &me));
    CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));
    uint8_t **sbuf = xmalloc(sizeof(*sbuf) * (size_t)rsize);
    uint8_t **rbuf = xmalloc(sizeof(*rbuf) * (size_t)rsize);
    MPI_Request *req = xmalloc(sizeof(*req) * 2 * (size_t)rsize);
    MPI_Status *st = xmalloc(sizeof(*st) * 2 * (size_t)rsize);

    for (int s = 0; s < 3; s++) {
        size_t len = dyn_sizes[s];
        for (int r = 0; r < rsize; r++) {
            sbuf[r] = xmalloc(len);
            rbuf[r] = xmalloc(len + DYN_GUARD);
            fill_pattern(sbuf[r], len, dyn_seed(cycle, side, me, r, s));
            memset(rbuf[r], DYN_POISON, len + DYN_GUARD);
            /* room for the guard: a longer message would show as a count */
            CHECK_MPI(MPI_Irecv(rbuf[r], (int)(len + DYN_GUARD), MPI_BYTE, r,
                                100 + s, inter, &req[2 * r]));
        }
        for (int r = 0; r < rsize; r++)
            CHECK_MPI(MPI_Isend(sbuf[r], (int)len, MPI_BYTE, r, 100 + s,
                                inter, &req[2 * r + 1]));
        CHECK_MPI(MPI_Waitall(2 * rsize, req, st));
        for (int r = 0; r < rsize; r++) {
            char what[128];
            int count = -1;
            MPI_Get_count(&st[2 * r], MPI_BYTE, &count);
            snprintf(what, sizeof(what),
                     "cycle %d: %zu B from remote rank %d to side %d rank %d",
                     cycle, len, r, side, me);
            if (count != (int)len)
                fail("%s: received %d bytes", what, count);
            if (st[2 * r].MPI_SOURCE != r || st[2 * r].MPI_TAG != 100 + s)
                fail("%s: status says source %d tag %d", what,
                     st[2 * r].MPI_SOURCE, st[2 * r].MPI_TAG);
            dyn_check_buf(rbuf[r], len, dyn_seed(cycle, 1 - side, r, me, s),
                          what);
            free(sbuf[r]);
            free(rbuf[r]);
        }
    }
    free(sbuf);
    free(rbuf);
    free(req);
    free(st);
}

/* Intercommunicator MPI_Bcast of len bytes from rank 0 of root_side. */
static inline void dyn_inter_bcast(MPI_Comm inter, int side, int root_side,
                                   size_t len, int cycle)
{
    int me;
    CHECK_MPI(MPI_Comm_rank(inter, &me));
    uint32_t seed = dyn_seed(cycle, root_side, 0, 0xff, 10);
    uint8_t *buf = xmalloc(len + DYN_GUARD);
    int root;
    if (side == root_side) {
        root = me == 0 ? MPI_ROOT : MPI_PROC_NULL;
        fill_pattern(buf, len, seed);
    } else {
        root = 0;
    }
    memset(buf + len, DYN_POISON, DYN_GUARD);
    if (side != root_side)
        memset(buf, DYN_POISON, len);
    CHECK_MPI(MPI_Bcast(buf, (int)len, MPI_BYTE, root, inter));
    if (side != root_side) {
        char what[96];
        snprintf(what, sizeof(what), "intercomm bcast of %zu B from side %d",
                 len, root_side);
        dyn_check_buf(buf, len, seed, what);
    }
    free(buf);
}

static inline int dyn_contrib(int side, int rank, int i)
{
    return (side + 1) * 1000003 + rank * 7919 + i;
}

static inline void dyn_collectives(MPI_Comm inter, int side, int cycle)
{
    int me, lsize, rsize;
    CHECK_MPI(MPI_Comm_rank(inter, &me));
    CHECK_MPI(MPI_Comm_size(inter, &lsize));
    CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));

    dyn_inter_bcast(inter, side, 0, 1024 * 1024, cycle);
    dyn_inter_bcast(inter, side, 1, 100000, cycle);

    /* intercomm allreduce: the result is the other side's reduction */
    enum { N = 20000 };
    int *in = xmalloc(N * sizeof(int)), *out = xmalloc(N * sizeof(int));
    for (int i = 0; i < N; i++) {
        in[i] = dyn_contrib(side, me, i);
        out[i] = -1;
    }
    CHECK_MPI(MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, inter));
    for (int i = 0; i < N; i++) {
        int want = 0;
        for (int r = 0; r < rsize; r++)
            want += dyn_contrib(1 - side, r, i);
        if (out[i] != want)
            fail("intercomm allreduce: element %d is %d, want %d", i, out[i],
                 want);
    }

    /* merge, side 0 first */
    MPI_Comm merged;
    int mrank, msize;
    CHECK_MPI(MPI_Intercomm_merge(inter, side == 1, &merged));
    MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
    CHECK_MPI(MPI_Comm_rank(merged, &mrank));
    CHECK_MPI(MPI_Comm_size(merged, &msize));
    if (msize != lsize + rsize)
        fail("merged communicator has %d ranks, want %d", msize,
             lsize + rsize);
    int want_rank = side == 0 ? me : rsize + me;
    if (mrank != want_rank)
        fail("merged rank is %d, want %d (side %d rank %d)", mrank, want_rank,
             side, me);
    for (int i = 0; i < N; i++)
        in[i] = (mrank + 1) * (i % 1000 + 1);
    CHECK_MPI(MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, merged));
    for (int i = 0; i < N; i++) {
        int want = msize * (msize + 1) / 2 * (i % 1000 + 1);
        if (out[i] != want)
            fail("merged allreduce: element %d is %d, want %d", i, out[i],
                 want);
    }
    size_t len = 4 * 1024 * 1024;
    uint32_t seed = dyn_seed(cycle, 2, msize - 1, 0xfe, 11);
    uint8_t *buf = xmalloc(len + DYN_GUARD);
    memset(buf, DYN_POISON, len + DYN_GUARD);
    if (mrank == msize - 1)
        fill_pattern(buf, len, seed);
    CHECK_MPI(MPI_Bcast(buf, (int)len, MPI_BYTE, msize - 1, merged));
    dyn_check_buf(buf, len, seed, "merged bcast of 4 MiB");
    CHECK_MPI(MPI_Barrier(merged));
    CHECK_MPI(MPI_Comm_free(&merged));
    free(buf);
    free(in);
    free(out);
}

/* Say what the job is (rank 0 only): "INFO <what>" lines for the logs. */
static inline void dyn_info(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static inline void dyn_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("INFO %s: rank %d: ", TEST_NAME, my_rank);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

#endif /* DYN_H */
