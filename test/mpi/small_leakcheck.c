/*
 * small_leakcheck.c - a deliberately tiny program to run under valgrind.
 *
 * Ranks 0 and 1 exchange one message each of 0 B, 100 B, 5000 B and
 * 100 KB (eager and rendezvous paths) in both directions, verify every
 * byte, then do one MPI_Allreduce. Everything it allocates is freed, all
 * buffers are fully initialised, so anything valgrind reports comes from
 * the MPI stack. Extra ranks only join the Allreduce.
 */
#define TEST_NAME "small_leakcheck"
#include "mpitest.h"

static const int SIZES[] = {0, 100, 5000, 100000};
#define NUM_SIZES ((int)(sizeof(SIZES) / sizeof(SIZES[0])))

/* Byte i of the message of size index s sent by rank src. */
static uint8_t small_byte(int src, int s, int i)
{
    uint32_t x = (uint32_t)i * 2654435761U ^ (uint32_t)(src * 131 + s * 17);
    x ^= x >> 13;
    x *= 0x5bd1e995U;
    return (uint8_t)(x ^ (x >> 15));
}

/* Rank 0 sends first, rank 1 answers with its own message. */
static void exchange(int s, uint8_t *sbuf, uint8_t *rbuf)
{
    int peer = 1 - my_rank, len = SIZES[s], count = -1;
    MPI_Status st;

    for (int i = 0; i < len; i++)
        sbuf[i] = small_byte(my_rank, s, i);
    memset(rbuf, 0, (size_t)len + 1);
    if (my_rank == 0) {
        MPI_Send(sbuf, len, MPI_BYTE, peer, s, MPI_COMM_WORLD);
        MPI_Recv(rbuf, len, MPI_BYTE, peer, s, MPI_COMM_WORLD, &st);
    } else {
        MPI_Recv(rbuf, len, MPI_BYTE, peer, s, MPI_COMM_WORLD, &st);
        MPI_Send(sbuf, len, MPI_BYTE, peer, s, MPI_COMM_WORLD);
    }
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count != len)
        fail("%d-byte message arrived with %d bytes", len, count);
    for (int i = 0; i < len; i++)
        if (rbuf[i] != small_byte(peer, s, i))
            fail("%d-byte message: byte %d is 0x%02x, expected 0x%02x", len,
                 i, rbuf[i], small_byte(peer, s, i));
}

int main(int argc, char **argv)
{
    int nprocs, mine, sum = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs < 2)
        fail("needs at least 2 ranks, got %d", nprocs);

    if (my_rank <= 1) {
        uint8_t *sbuf = malloc(100000 + 1), *rbuf = malloc(100000 + 1);
        if (!sbuf || !rbuf)
            fail("out of memory");
        for (int s = 0; s < NUM_SIZES; s++)
            exchange(s, sbuf, rbuf);
        free(sbuf);
        free(rbuf);
    }

    mine = 3 * my_rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* sum of 3r+1 over r = 0..n-1 */
    if (sum != 3 * nprocs * (nprocs - 1) / 2 + nprocs)
        fail("Allreduce sum is %d, expected %d", sum,
             3 * nprocs * (nprocs - 1) / 2 + nprocs);

    mpitest_pass();
    MPI_Finalize();
    return 0;
}
