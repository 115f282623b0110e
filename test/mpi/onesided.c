/*
 * onesided.c - MPI one-sided communication over the BTL (osc pt2pt, which
 * uses the BTL's send path, run with --mca osc pt2pt): MPI_Put, MPI_Get
 * and MPI_Accumulate under fences, and a passive-target epoch with
 * MPI_Win_lock, each verified.  Windows of 1 MiB + 3 bytes per rank so
 * that large puts and gets cross the eager limit.
 */
#define TEST_NAME "onesided"
#include "mpitest.h"

#define WIN_BYTES (1024 * 1024 + 3)
#define NINTS 4096

int main(int argc, char **argv)
{
    int nprocs = mpitest_init(&argc, &argv);
    int right = (my_rank + 1) % nprocs, left = (my_rank + nprocs - 1) % nprocs;
    uint8_t *base;
    MPI_Win win;
    CHECK_MPI(MPI_Alloc_mem(WIN_BYTES, MPI_INFO_NULL, &base));
    memset(base, 0, WIN_BYTES);
    CHECK_MPI(MPI_Win_create(base, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));

    /* 1. Put my pattern into my right neighbour's window */
    uint8_t *mine = xmalloc(WIN_BYTES);
    fill_pattern(mine, WIN_BYTES, 1000u + (uint32_t)my_rank);
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(mine, WIN_BYTES, MPI_BYTE, right, 0, WIN_BYTES, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    size_t first = 0, bad = count_bad(base, 0, WIN_BYTES, 1000u + (uint32_t)left, &first);
    if (bad)
        fail("put: %zu bytes from rank %d wrong, first at %zu", bad, left, first);

    /* 2. Get my left neighbour's window (its content: the pattern of ITS left) */
    uint8_t *got = xmalloc(WIN_BYTES);
    CHECK_MPI(MPI_Get(got, WIN_BYTES, MPI_BYTE, left, 0, WIN_BYTES, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    bad = count_bad(got, 0, WIN_BYTES, 1000u + (uint32_t)((left + nprocs - 1) % nprocs), &first);
    if (bad)
        fail("get: %zu bytes from rank %d wrong, first at %zu", bad, left, first);

    /* 3. Everybody accumulates (SUM) into rank 0's first NINTS ints */
    CHECK_MPI(MPI_Win_fence(0, win));
    if (my_rank == 0)
        memset(base, 0, NINTS * sizeof(int));
    CHECK_MPI(MPI_Win_fence(0, win));
    int *contrib = xmalloc(NINTS * sizeof(int));
    for (int i = 0; i < NINTS; i++)
        contrib[i] = (my_rank + 1) * (i + 1);
    CHECK_MPI(MPI_Accumulate(contrib, NINTS, MPI_INT, 0, 0, NINTS, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (my_rank == 0) {
        int sum_ranks = nprocs * (nprocs + 1) / 2;
        for (int i = 0; i < NINTS; i++) {
            int v;
            memcpy(&v, base + (size_t)i * sizeof(int), sizeof(v));
            if (v != sum_ranks * (i + 1))
                fail("accumulate: element %d is %d, want %d", i, v, sum_ranks * (i + 1));
        }
    }

    /* 4. Passive target: each rank writes its rank into its slot of rank 0 */
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    int me = my_rank + 7;
    CHECK_MPI(MPI_Put(&me, 1, MPI_INT, 0, (MPI_Aint)((size_t)(NINTS + my_rank) * sizeof(int)), 1, MPI_INT, win));
    CHECK_MPI(MPI_Win_unlock(0, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (my_rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        for (int r = 0; r < nprocs; r++) {
            int v;
            memcpy(&v, base + (size_t)(NINTS + r) * sizeof(int), sizeof(v));
            if (v != r + 7)
                fail("passive put from rank %d: %d, want %d", r, v, r + 7);
        }
        CHECK_MPI(MPI_Win_unlock(0, win));
    }

    CHECK_MPI(MPI_Win_free(&win));
    CHECK_MPI(MPI_Free_mem(base));
    free(mine);
    free(got);
    free(contrib);
    mpitest_pass();
    MPI_Finalize();
    return 0;
}
