/*
 * onesided.c - MPI one-sided communication over the BTL (Open MPI 4.1:
 * osc pt2pt over the BTL's send path, run with --mca osc pt2pt; 5.0: osc
 * rdma, which reaches a BTL without native GET or atomics through the BTL
 * base's active-message emulation): MPI_Put, MPI_Get and MPI_Accumulate
 * under fences; passive target with MPI_Win_lock; MPI_Fetch_and_op,
 * MPI_Compare_and_swap and MPI_Get_accumulate under MPI_Win_lock_all with
 * flushes; a generalized active-target (post/start/complete/wait) epoch.
 * Each verified.  Windows of 1 MiB + 3 bytes per rank so that large puts
 * and gets cross the eager limit.
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

    /* 5. Atomics on rank 0 under lock_all: a fetch-and-add counter every
     * rank bumps 10 times (the values fetched are distinct), then a
     * compare-and-swap race for one slot (exactly one rank wins), then
     * MPI_Get_accumulate (SUM) whose fetched values are distinct too */
    const MPI_Aint counter = (MPI_Aint)((size_t)(NINTS + nprocs) * sizeof(int));
    const MPI_Aint slot = counter + (MPI_Aint)sizeof(int);
    const MPI_Aint gacc = slot + (MPI_Aint)sizeof(int);
    if (my_rank == 0) {
        int init[3] = {0, -1, 0};
        memcpy(base + counter, init, sizeof(init));
    }
    CHECK_MPI(MPI_Win_fence(0, win));
    enum { BUMPS = 10 };
    int fetched[BUMPS], one = 1, got_acc[BUMPS];
    CHECK_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < BUMPS; i++) {
        CHECK_MPI(MPI_Fetch_and_op(&one, &fetched[i], MPI_INT, 0, counter, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(0, win));
    }
    int mine_id = my_rank, expect = -1, prev = -2;
    CHECK_MPI(MPI_Compare_and_swap(&mine_id, &expect, &prev, MPI_INT, 0, slot, win));
    CHECK_MPI(MPI_Win_flush(0, win));
    for (int i = 0; i < BUMPS; i++) {
        CHECK_MPI(MPI_Get_accumulate(&one, 1, MPI_INT, &got_acc[i], 1, MPI_INT, 0, gacc, 1, MPI_INT, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(0, win));
    }
    CHECK_MPI(MPI_Win_unlock_all(win));
    for (int i = 1; i < BUMPS; i++) {
        if (fetched[i] <= fetched[i - 1] || got_acc[i] <= got_acc[i - 1])
            fail("atomics: fetched values not increasing (%d then %d; %d then %d)", fetched[i - 1], fetched[i],
                 got_acc[i - 1], got_acc[i]);
    }
    int *all_fetched = xmalloc((size_t)nprocs * BUMPS * sizeof(int));
    int *winners = xmalloc((size_t)nprocs * sizeof(int));
    CHECK_MPI(MPI_Allgather(fetched, BUMPS, MPI_INT, all_fetched, BUMPS, MPI_INT, MPI_COMM_WORLD));
    int won = (prev == -1);
    CHECK_MPI(MPI_Allgather(&won, 1, MPI_INT, winners, 1, MPI_INT, MPI_COMM_WORLD));
    if (my_rank == 0) {
        int total = nprocs * BUMPS, vals[3];
        memcpy(vals, base + counter, sizeof(vals));
        if (vals[0] != total)
            fail("fetch_and_op: counter %d, want %d", vals[0], total);
        if (vals[2] != total)
            fail("get_accumulate: sum %d, want %d", vals[2], total);
        char *seen = xmalloc((size_t)total);
        memset(seen, 0, (size_t)total);
        for (int i = 0; i < total; i++) {
            int v = all_fetched[i];
            if (v < 0 || v >= total || seen[v]++)
                fail("fetch_and_op: value %d fetched twice or out of range", v);
        }
        int n_won = 0, winner = -1;
        for (int r = 0; r < nprocs; r++) {
            n_won += winners[r];
            if (winners[r])
                winner = r;
        }
        if (n_won != 1 || vals[1] != winner)
            fail("compare_and_swap: %d winners, slot holds %d (winner %d)", n_won, vals[1], winner);
        free(seen);
    }
    free(all_fetched);
    free(winners);

    /* 6. Generalized active target: rank 0 exposes its window to all
     * others (post/wait); each puts its rank + 100 into its slot
     * (start/complete) */
    MPI_Group world, others, zero;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int rank0 = 0;
    CHECK_MPI(MPI_Group_incl(world, 1, &rank0, &zero));
    CHECK_MPI(MPI_Group_excl(world, 1, &rank0, &others));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (my_rank == 0) {
        if (nprocs > 1) {
            CHECK_MPI(MPI_Win_post(others, 0, win));
            CHECK_MPI(MPI_Win_wait(win));
        }
        for (int r = 1; r < nprocs; r++) {
            int v;
            memcpy(&v, base + (size_t)(NINTS + r) * sizeof(int), sizeof(v));
            if (v != r + 100)
                fail("post/start: put from rank %d: %d, want %d", r, v, r + 100);
        }
    } else {
        int val = my_rank + 100;
        CHECK_MPI(MPI_Win_start(zero, 0, win));
        CHECK_MPI(MPI_Put(&val, 1, MPI_INT, 0, (MPI_Aint)((size_t)(NINTS + my_rank) * sizeof(int)), 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_complete(win));
    }
    CHECK_MPI(MPI_Group_free(&world));
    CHECK_MPI(MPI_Group_free(&others));
    CHECK_MPI(MPI_Group_free(&zero));

    CHECK_MPI(MPI_Win_free(&win));
    CHECK_MPI(MPI_Free_mem(base));
    free(mine);
    free(got);
    free(contrib);
    mpitest_pass();
    MPI_Finalize();
    return 0;
}
