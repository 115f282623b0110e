/*
 * put_stress.c - large transfers that ob1 moves with the BTL's PUT:
 * every rank sends to and receives from every other rank at once, sizes
 * from 64 KiB (eager: the limit is 65 KiB with ob1's header) and 65 KiB + 1
 * (the least by rendezvous) to 64 MiB (capped by argv[1] in MiB), payload
 * verified.
 *
 * Every receive buffer is a fresh allocation with 4 KiB guard zones on both
 * sides, freed right after its receive completed and verified (so ob1
 * registers, deregisters and the allocator reuses the memory at once); a
 * guard byte that changed means a PUT wrote outside the region the receiver
 * exposed.  Rounds repeat for argv[2] seconds (default 2) after one full
 * pass over the sizes.
 *
 *   mpirun -np 3 ... put_stress [max_mib [seconds]]
 */
#define TEST_NAME "put_stress"
#include "mpitest.h"

#define GUARD 4096
#define GUARD_BYTE 0xa5

static const size_t SIZES[] = {
    64 * 1024, 65 * 1024 + 1, 200 * 1024, 1024 * 1024 - 3, 1024 * 1024,
    3 * 1024 * 1024 + 7, 16 * 1024 * 1024, 64 * 1024 * 1024,
};
#define NUM_SIZES (sizeof(SIZES) / sizeof(SIZES[0]))

typedef struct {
    uint8_t *block;     /* guard + payload + guard */
    size_t len;
    int peer;
    uint32_t seed;
} rbuf_t;

static uint32_t seed_of(int src, int dst, int round, int k)
{
    return mix32(((uint32_t)src << 24) ^ ((uint32_t)dst << 16) ^ ((uint32_t)round << 4) ^ (uint32_t)k);
}

static void rbuf_alloc(rbuf_t *r, size_t len, int peer, uint32_t seed)
{
    r->block = xmalloc(len + 2 * GUARD);
    memset(r->block, GUARD_BYTE, GUARD);
    memset(r->block + GUARD, 0, len);
    memset(r->block + GUARD + len, GUARD_BYTE, GUARD);
    r->len = len;
    r->peer = peer;
    r->seed = seed;
}

static void rbuf_check_and_free(rbuf_t *r, int round)
{
    size_t first = 0;
    size_t bad = count_bad(r->block + GUARD, 0, r->len, r->seed, &first);
    if (bad)
        fail("round %d: %zu of %zu bytes from rank %d wrong, first at %zu", round, bad, r->len, r->peer, first);
    if (first_not(r->block, GUARD, GUARD_BYTE) != GUARD ||
        first_not(r->block + GUARD + r->len, GUARD, GUARD_BYTE) != GUARD)
        fail("round %d: a guard zone around the %zu-byte buffer from rank %d changed", round, r->len, r->peer);
    free(r->block);
    r->block = NULL;
}

/* One round: message k of every pair has SIZES[k]; all in flight at once */
static void exchange(int nprocs, int round, size_t max_len, int k_first, int k_count)
{
    int n = (nprocs - 1) * k_count;
    MPI_Request *reqs = xmalloc(sizeof(*reqs) * 2 * (size_t)n);
    rbuf_t *rb = xmalloc(sizeof(*rb) * (size_t)n);
    uint8_t **sb = xmalloc(sizeof(*sb) * (size_t)n);
    int r = 0;
    for (int p = 0; p < nprocs; p++) {
        if (p == my_rank)
            continue;
        for (int k = k_first; k < k_first + k_count; k++) {
            size_t len = SIZES[k] < max_len ? SIZES[k] : max_len;
            rbuf_alloc(&rb[r], len, p, seed_of(p, my_rank, round, k));
            CHECK_MPI(MPI_Irecv(rb[r].block + GUARD, (int)len, MPI_BYTE, p, k, MPI_COMM_WORLD, &reqs[r]));
            sb[r] = xmalloc(len);
            fill_pattern(sb[r], len, seed_of(my_rank, p, round, k));
            CHECK_MPI(MPI_Isend(sb[r], (int)len, MPI_BYTE, p, k, MPI_COMM_WORLD, &reqs[n + r]));
            r++;
        }
    }
    /* receives are checked and freed as they complete, before the rest */
    for (int done = 0; done < n; done++) {
        int idx = MPI_UNDEFINED;
        CHECK_MPI(MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE));
        if (idx == MPI_UNDEFINED)
            fail("round %d: Waitany found nothing", round);
        rbuf_check_and_free(&rb[idx], round);
    }
    CHECK_MPI(MPI_Waitall(n, reqs + n, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; i++)
        free(sb[i]);
    free(sb);
    free(rb);
    free(reqs);
}

int main(int argc, char **argv)
{
    int nprocs = mpitest_init(&argc, &argv);
    size_t max_len = (argc > 1 ? (size_t)atoi(argv[1]) : 64) * 1024 * 1024;
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    if (max_len < SIZES[0])
        max_len = SIZES[0];

    /* one pass over all sizes, two at a time per pair */
    int round = 0;
    for (int k = 0; k < (int)NUM_SIZES; k += 2)
        exchange(nprocs, round++, max_len, k, (k + 1 < (int)NUM_SIZES) ? 2 : 1);
    /* then mid-size rounds, all pairs busy, until the time is up */
    double t0 = MPI_Wtime();
    int go = 1;
    while (go) {
        exchange(nprocs, round++, max_len, 0, 5);
        go = MPI_Wtime() - t0 < seconds;
        CHECK_MPI(MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (my_rank == 0)
        printf("put_stress: %d ranks, %d rounds, sizes up to %zu bytes\n", nprocs, round, max_len);
    mpitest_pass();
    MPI_Finalize();
    return 0;
}
