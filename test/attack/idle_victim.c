/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * A job that is almost idle, for measuring what an attack on the
 * connectivity agent costs local rank 0 (run-agent-attacks.sh, "junk"):
 * every rank sends its ring neighbour a checked counter every PACE_US
 * and waits for its own by polling MPI_Test with short sleeps.  Each
 * poll is a progress call, which is where the agent runs; between polls
 * the process sleeps, so its CPU time stays small unless the agent's
 * work grows (victim.c waits in MPI_Sendrecv, whose spinning takes a
 * variable share of a core and hides the agent's).
 *   idle_victim SECONDS
 * Prints "idle_victim: rank R: N counters, W wrong" and "PASS idle_victim"
 * on rank 0 when nothing was wrong anywhere; exits 1 otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PACE_US 2000
#define POLL_US 100
#define TAG_COUNTER 9

/* Wait for |req| with a progress call every POLL_US */
static void wait_polling(MPI_Request *req)
{
    int done = 0;
    while (!done) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (!done) {
            usleep(POLL_US);
        }
    }
}

/* One counter to the right, one from the left; false if it was wrong */
static int exchange(int rank, int size, uint64_t k)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    uint64_t sent = k, got = ~k;
    MPI_Request rr, sr;
    MPI_Irecv(&got, 1, MPI_UINT64_T, left, TAG_COUNTER, MPI_COMM_WORLD, &rr);
    MPI_Isend(&sent, 1, MPI_UINT64_T, right, TAG_COUNTER, MPI_COMM_WORLD, &sr);
    wait_polling(&rr);
    wait_polling(&sr);
    return got == k;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = (argc > 1) ? atof(argv[1]) : 10.0;
    uint64_t k = 0, wrong = 0;
    int go = 1;
    double t0 = MPI_Wtime();
    while (go) {
        wrong += !exchange(rank, size, k++);
        usleep(PACE_US);
        if (0 == k % 64) {
            go = (MPI_Wtime() - t0) < seconds;
            MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD); /* all stop after the same round */
        }
    }
    printf("idle_victim: rank %d: %llu counters, %llu wrong\n", rank, (unsigned long long) k,
           (unsigned long long) wrong);
    uint64_t all = 0;
    MPI_Reduce(&wrong, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank && 0 == all) {
        printf("PASS idle_victim\n");
    }
    fflush(stdout);
    MPI_Finalize();
    return 0 == rank && 0 != all ? 1 : 0;
}
