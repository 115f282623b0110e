/*
 * MPI_Init and MPI_Finalize wall time (init-time.sh).  Rank 0 prints
 * "init_ms N finalize_ms N": init is the slowest rank's time from before
 * MPI_Init to the end of a first broadcast (so every BTL has met its
 * peers), finalize is rank 0's own MPI_Finalize.
 */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    double t0 = now_ms();
    MPI_Init(&argc, &argv);
    int rank, token = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double init_ms = now_ms() - t0, worst_ms = 0;
    MPI_Reduce(&init_ms, &worst_ms, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    double t1 = now_ms();
    MPI_Finalize();
    if (0 == rank) {
        printf("init_ms %.1f finalize_ms %.1f\n", worst_ms, now_ms() - t1);
    }
    return 0;
}
