/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * spawn_time: how long MPI_Comm_spawn of CHILDREN processes takes, and
 * then the first message round trip with each child (the moment the BTL
 * pairs with a process of another job), repeated in one parent.
 *
 *   mpirun -np 1 ./spawn_time CYCLES CHILDREN
 *
 * Prints one line per cycle: "cycle N spawn_ms S first_rtt_us R
 * next_rtt_us Q" (R: the first 8-byte round trip with child 0; Q: the
 * median of 100 more, the steady state).  Exit 1 if a reply is wrong.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double round_trip(MPI_Comm child, long value, int *bad)
{
    long reply = 0;
    double t0 = MPI_Wtime();
    MPI_Send(&value, 1, MPI_LONG, 0, 1, child);
    MPI_Recv(&reply, 1, MPI_LONG, 0, 2, child, MPI_STATUS_IGNORE);
    double t = MPI_Wtime() - t0;
    *bad |= reply != value + 1;
    return t;
}

static int parent(const char *self, int cycles, int children)
{
    int bad = 0;
    for (int c = 0; c < cycles; ++c) {
        MPI_Comm child;
        double t0 = MPI_Wtime();
        MPI_Comm_spawn(self, MPI_ARGV_NULL, children, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child,
                       MPI_ERRCODES_IGNORE);
        double spawn = MPI_Wtime() - t0;
        double first = round_trip(child, 1000 * c, &bad);
        double next[100];
        for (int i = 0; i < 100; ++i) {
            next[i] = round_trip(child, 1000 * c + i + 1, &bad);
        }
        long stop = -1;
        MPI_Send(&stop, 1, MPI_LONG, 0, 1, child);
        MPI_Comm_disconnect(&child);
        qsort(next, 100, sizeof(next[0]), cmp_double);
        printf("cycle %d spawn_ms %.1f first_rtt_us %.1f next_rtt_us %.1f\n", c, spawn * 1e3, first * 1e6,
               next[50] * 1e6);
        fflush(stdout);
    }
    return bad;
}

static void child(MPI_Comm parent_comm)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long v = 0; 0 == rank;) {
        MPI_Recv(&v, 1, MPI_LONG, 0, 1, parent_comm, MPI_STATUS_IGNORE);
        if (v < 0) {
            break;
        }
        ++v;
        MPI_Send(&v, 1, MPI_LONG, 0, 2, parent_comm);
    }
    MPI_Comm_disconnect(&parent_comm);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent_comm;
    MPI_Comm_get_parent(&parent_comm);
    int bad = 0;
    if (MPI_COMM_NULL == parent_comm) {
        bad = parent(argv[0], argc > 1 ? atoi(argv[1]) : 5, argc > 2 ? atoi(argv[2]) : 1);
    } else {
        child(parent_comm);
    }
    MPI_Finalize();
    if (bad) {
        fprintf(stderr, "spawn_time: a wrong reply\n");
    }
    return bad;
}
