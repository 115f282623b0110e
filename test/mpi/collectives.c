/*
 * collectives.c - collectives whose results are checked against values
 * computed locally by every rank.
 *
 *   - MPI_Allreduce: SUM and MAX on MPI_INT and MPI_DOUBLE for counts from 1
 *     to 1M elements (also one MPI_IN_PLACE call per type). Inputs depend on
 *     rank and element index; doubles are multiples of 1/4 with small
 *     magnitude so the reduction is exact in any order and compared exactly.
 *     The send buffer must come back unmodified.
 *   - MPI_Alltoall with 1, 100 and 40000 ints per block.
 *   - MPI_Alltoallv with uneven (including zero) counts and gaps between
 *     the receive blocks that must stay untouched.
 *   - MPI_Bcast of 1 int, 100 bytes and 8 MiB from every root.
 *   - MPI_Barrier: a loop of plain barriers, then barriers where one rank
 *     arrives late: nobody may leave before the late rank entered (checked
 *     with CLOCK_MONOTONIC, only when all ranks share a host).
 *   - MPI_Allgather with 1, 1000 and 100000 ints per rank.
 */
#include <time.h>

#define TEST_NAME "collectives"
#include "mpitest.h"

static int nprocs = 0;

#define POISON_INT (-123456789)

/* ------------------------------------------------------------------ */
/* Allreduce                                                           */
/* ------------------------------------------------------------------ */

/* Contribution of rank r to element i: an int in [-1000, 1000]. */
static int int_input(int r, size_t i, int salt)
{
    return (int)(mix32((uint32_t)i * 4099U + (uint32_t)r * 31U +
                       (uint32_t)salt) % 2001U) - 1000;
}

static double dbl_input(int r, size_t i, int salt)
{
    return int_input(r, i, salt) * 0.25;  /* exact in binary */
}

/* What element i must be after reducing every rank's input with op. */
static double expected_reduction(MPI_Op op, int is_double, size_t i,
                                 int salt)
{
    double acc = is_double ? dbl_input(0, i, salt) : int_input(0, i, salt);
    for (int r = 1; r < nprocs; r++) {
        double v = is_double ? dbl_input(r, i, salt) : int_input(r, i, salt);
        if (op == MPI_SUM)
            acc += v;
        else if (v > acc)
            acc = v;
    }
    return acc;
}

static void check_allreduce(size_t count, MPI_Op op, int is_double,
                            int in_place)
{
    int salt = (int)count * 3 + (op == MPI_SUM) + 7 * is_double;
    const char *name = op == MPI_SUM ? "SUM" : "MAX";
    const char *tname = is_double ? "MPI_DOUBLE" : "MPI_INT";
    size_t esz = is_double ? sizeof(double) : sizeof(int);
    void *in = xmalloc(count * esz), *out = xmalloc(count * esz);
    MPI_Datatype type = is_double ? MPI_DOUBLE : MPI_INT;

    for (size_t i = 0; i < count; i++) {
        if (is_double) {
            ((double *)in)[i] = dbl_input(my_rank, i, salt);
            ((double *)out)[i] = -1e300;
        } else {
            ((int *)in)[i] = int_input(my_rank, i, salt);
            ((int *)out)[i] = POISON_INT;
        }
    }
    if (in_place) {
        memcpy(out, in, count * esz);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, out, (int)count, type, op,
                                MPI_COMM_WORLD));
    } else {
        CHECK_MPI(MPI_Allreduce(in, out, (int)count, type, op,
                                MPI_COMM_WORLD));
    }
    for (size_t i = 0; i < count; i++) {
        double want = expected_reduction(op, is_double, i, salt);
        double got = is_double ? ((double *)out)[i] : ((int *)out)[i];
        if (got != want)
            fail("Allreduce %s %s count %zu%s: element %zu is %.2f, "
                 "expected %.2f", name, tname, count,
                 in_place ? " (in place)" : "", i, got, want);
        double orig = is_double ? ((double *)in)[i] : ((int *)in)[i];
        double mine = is_double ? dbl_input(my_rank, i, salt)
                                : int_input(my_rank, i, salt);
        if (!in_place && orig != mine)
            fail("Allreduce %s %s count %zu modified the send buffer at %zu",
                 name, tname, count, i);
    }
    free(in);
    free(out);
}

static void test_allreduce(void)
{
    static const size_t counts[] = {1, 7, 1000, 65537, 1024 * 1024};
    static const MPI_Op ops[] = {MPI_SUM, MPI_MAX};

    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
        for (int o = 0; o < 2; o++)
            for (int d = 0; d < 2; d++)
                check_allreduce(counts[c], ops[o], d, 0);
    check_allreduce(4096, MPI_SUM, 0, 1);
    check_allreduce(4096, MPI_MAX, 1, 1);
}

/* ------------------------------------------------------------------ */
/* Alltoall / Alltoallv                                                */
/* ------------------------------------------------------------------ */

/* Element j of the block that src sends to dst. */
static int a2a_value(int src, int dst, int j, int salt)
{
    return (int)(mix32((uint32_t)salt * 977U + (uint32_t)src * 65599U +
                       (uint32_t)dst * 257U + (uint32_t)j) & 0x3fffffff);
}

static void check_alltoall(int per)
{
    size_t total = (size_t)per * (size_t)nprocs;
    int *sbuf = xmalloc(total * sizeof(int));
    int *rbuf = xmalloc(total * sizeof(int));

    for (int d = 0; d < nprocs; d++)
        for (int j = 0; j < per; j++)
            sbuf[(size_t)d * per + j] = a2a_value(my_rank, d, j, per);
    for (size_t i = 0; i < total; i++)
        rbuf[i] = POISON_INT;
    CHECK_MPI(MPI_Alltoall(sbuf, per, MPI_INT, rbuf, per, MPI_INT,
                           MPI_COMM_WORLD));
    for (int s = 0; s < nprocs; s++)
        for (int j = 0; j < per; j++)
            if (rbuf[(size_t)s * per + j] != a2a_value(s, my_rank, j, per))
                fail("Alltoall %d ints/block: element %d of the block from "
                     "rank %d is %d, expected %d", per, j, s,
                     rbuf[(size_t)s * per + j], a2a_value(s, my_rank, j, per));
    free(sbuf);
    free(rbuf);
}

/* Ints sent from src to dst by Alltoallv: uneven, some zero, some large. */
static int a2av_count(int src, int dst)
{
    return ((src * 3 + dst * 5) % 7) * 300 + ((src + dst) % 2) * 20000;
}

#define A2AV_GAP 13  /* untouched ints between receive blocks */

static void test_alltoallv(void)
{
    int *scount = xmalloc(sizeof(int) * (size_t)nprocs);
    int *sdispl = xmalloc(sizeof(int) * (size_t)nprocs);
    int *rcount = xmalloc(sizeof(int) * (size_t)nprocs);
    int *rdispl = xmalloc(sizeof(int) * (size_t)nprocs);
    int stotal = 0, rtotal = 0;

    /* lay blocks out with gaps on both sides, receive side in reverse
     * rank order so displacements are not monotonic */
    for (int p = 0; p < nprocs; p++) {
        scount[p] = a2av_count(my_rank, p);
        sdispl[p] = stotal + 5;
        stotal += scount[p] + 5;
    }
    for (int p = nprocs - 1; p >= 0; p--) {
        rcount[p] = a2av_count(p, my_rank);
        rdispl[p] = rtotal + A2AV_GAP;
        rtotal += rcount[p] + A2AV_GAP;
    }
    rtotal += A2AV_GAP;
    int *sbuf = xmalloc(sizeof(int) * (size_t)stotal);
    int *rbuf = xmalloc(sizeof(int) * (size_t)rtotal);
    for (int i = 0; i < stotal; i++)
        sbuf[i] = -1;
    for (int p = 0; p < nprocs; p++)
        for (int j = 0; j < scount[p]; j++)
            sbuf[sdispl[p] + j] = a2a_value(my_rank, p, j, 4242);
    for (int i = 0; i < rtotal; i++)
        rbuf[i] = POISON_INT;

    CHECK_MPI(MPI_Alltoallv(sbuf, scount, sdispl, MPI_INT, rbuf, rcount,
                            rdispl, MPI_INT, MPI_COMM_WORLD));

    /* mark which ints are payload, then check payload and gaps */
    char *is_payload = calloc((size_t)rtotal, 1);
    if (!is_payload)
        fail("out of memory");
    for (int p = 0; p < nprocs; p++) {
        for (int j = 0; j < rcount[p]; j++) {
            int want = a2a_value(p, my_rank, j, 4242);
            is_payload[rdispl[p] + j] = 1;
            if (rbuf[rdispl[p] + j] != want)
                fail("Alltoallv: element %d of %d from rank %d is %d, "
                     "expected %d", j, rcount[p], p, rbuf[rdispl[p] + j],
                     want);
        }
    }
    for (int i = 0; i < rtotal; i++)
        if (!is_payload[i] && rbuf[i] != POISON_INT)
            fail("Alltoallv: gap int %d of the receive buffer overwritten",
                 i);
    free(is_payload);
    free(sbuf);
    free(rbuf);
    free(scount);
    free(sdispl);
    free(rcount);
    free(rdispl);
}

/* ------------------------------------------------------------------ */
/* Bcast                                                               */
/* ------------------------------------------------------------------ */

static uint8_t bcast_byte(int root, size_t len, size_t i)
{
    return (uint8_t)mix32((uint32_t)root * 7919U ^ (uint32_t)len ^
                          ((uint32_t)i * 0x9e3779b9U));
}

static void check_bcast(size_t len, int root, uint8_t *buf)
{
    if (my_rank == root)
        for (size_t i = 0; i < len; i++)
            buf[i] = bcast_byte(root, len, i);
    else
        memset(buf, 0xEE, len + 8);
    CHECK_MPI(MPI_Bcast(buf, (int)len, MPI_BYTE, root, MPI_COMM_WORLD));
    for (size_t i = 0; i < len; i++)
        if (buf[i] != bcast_byte(root, len, i))
            fail("Bcast of %zu bytes from root %d: byte %zu is 0x%02x, "
                 "expected 0x%02x", len, root, i, buf[i],
                 bcast_byte(root, len, i));
    if (my_rank != root)
        for (size_t i = len; i < len + 8; i++)
            if (buf[i] != 0xEE)
                fail("Bcast of %zu bytes from root %d wrote past the end",
                     len, root);
}

static void test_bcast(void)
{
    static const size_t lens[] = {sizeof(int), 100, 8 * 1024 * 1024};
    uint8_t *buf = xmalloc(8 * 1024 * 1024 + 8);

    for (int root = 0; root < nprocs; root++)
        for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
            check_bcast(lens[l], root, buf);
    free(buf);
}

/* ------------------------------------------------------------------ */
/* Barrier                                                             */
/* ------------------------------------------------------------------ */

static double now_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CLOCK_MONOTONIC is only comparable between processes on one host. */
static int all_on_one_host(void)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    char *all = xmalloc((size_t)nprocs * MPI_MAX_PROCESSOR_NAME);
    int len = 0, same = 1;

    CHECK_MPI(MPI_Get_processor_name(name, &len));
    CHECK_MPI(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all,
                            MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                            MPI_COMM_WORLD));
    for (int r = 0; r < nprocs; r++)
        if (strcmp(all + (size_t)r * MPI_MAX_PROCESSOR_NAME, name) != 0)
            same = 0;
    free(all);
    return same;
}

#define LATE_ROUNDS 12
#define LATE_DELAY_NS 20000000L   /* 20 ms */

static void test_barrier(void)
{
    double enter[LATE_ROUNDS], leave[LATE_ROUNDS];
    double *all_enter = xmalloc(sizeof(double) * LATE_ROUNDS *
                                (size_t)nprocs);

    for (int i = 0; i < 500; i++)
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    for (int k = 0; k < LATE_ROUNDS; k++) {
        if (my_rank == k % nprocs) {
            struct timespec d = {0, LATE_DELAY_NS};
            nanosleep(&d, NULL);
        }
        enter[k] = now_monotonic();
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        leave[k] = now_monotonic();
    }
    CHECK_MPI(MPI_Allgather(enter, LATE_ROUNDS, MPI_DOUBLE, all_enter,
                            LATE_ROUNDS, MPI_DOUBLE, MPI_COMM_WORLD));
    if (all_on_one_host()) {
        for (int k = 0; k < LATE_ROUNDS; k++) {
            int late = k % nprocs;
            double late_enter = all_enter[(size_t)late * LATE_ROUNDS + k];
            if (leave[k] < late_enter)
                fail("Barrier round %d returned %.3f ms before rank %d "
                     "entered it", k, (late_enter - leave[k]) * 1e3, late);
        }
    } else if (my_rank == 0) {
        printf("note: ranks on several hosts, barrier timing not checked\n");
    }
    free(all_enter);
}

/* ------------------------------------------------------------------ */
/* Allgather                                                           */
/* ------------------------------------------------------------------ */

static void check_allgather(int per)
{
    size_t total = (size_t)per * (size_t)nprocs;
    int *sbuf = xmalloc(sizeof(int) * (size_t)per);
    int *rbuf = xmalloc(sizeof(int) * (total + 4));

    for (int j = 0; j < per; j++)
        sbuf[j] = a2a_value(my_rank, -1, j, per + 1);
    for (size_t i = 0; i < total + 4; i++)
        rbuf[i] = POISON_INT;
    CHECK_MPI(MPI_Allgather(sbuf, per, MPI_INT, rbuf, per, MPI_INT,
                            MPI_COMM_WORLD));
    for (int r = 0; r < nprocs; r++)
        for (int j = 0; j < per; j++)
            if (rbuf[(size_t)r * per + j] != a2a_value(r, -1, j, per + 1))
                fail("Allgather %d ints: element %d from rank %d is %d, "
                     "expected %d", per, j, r, rbuf[(size_t)r * per + j],
                     a2a_value(r, -1, j, per + 1));
    for (size_t i = total; i < total + 4; i++)
        if (rbuf[i] != POISON_INT)
            fail("Allgather %d ints wrote past the receive buffer", per);
    free(sbuf);
    free(rbuf);
}

int main(int argc, char **argv)
{
    nprocs = mpitest_init(&argc, &argv);

    test_allreduce();
    check_alltoall(1);
    check_alltoall(100);
    check_alltoall(40000);
    test_alltoallv();
    test_bcast();
    test_barrier();
    check_allgather(1);
    check_allgather(1000);
    check_allgather(100000);

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    mpitest_pass();
    MPI_Finalize();
    return 0;
}
