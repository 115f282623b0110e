/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * away.c - a sender that leaves MPI right after each send (the away
 * thread's case, btl_usnic_away.c).  Rank 0 sends COUNT messages of
 * AWAY_BYTES bytes, each carrying its send time (CLOCK_MONOTONIC), and after each one stays
 * out of MPI for PAUSE_MS (usleep: no progress); rank 1 receives them and
 * prints how late each arrived.  run-away-test.sh drops the first copy of
 * every such message, so each arrives only through a resend: the away
 * thread's, or rank 0's own once it is back.
 *
 *   mpirun -np 2 ./away COUNT PAUSE_MS
 *
 * Rank 1 prints "away: message I late_ms L" per message and
 * "PASS away max_late_ms M" (or FAIL on wrong data).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AWAY_BYTES 333 /* the size the drop rule picks out */

/* Seconds on a clock both ranks of one host share (MPI_Wtime need not be) */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int count = argc > 1 ? atoi(argv[1]) : 5;
    int pause_ms = argc > 2 ? atoi(argv[2]) : 700;
    unsigned char buf[AWAY_BYTES];
    double max_late = 0;
    int bad = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < count; ++i) {
        if (0 == rank) {
            double t = now_s();
            memset(buf, 0xa0 + i, sizeof(buf));
            memcpy(buf, &t, sizeof(t));
            MPI_Send(buf, AWAY_BYTES, MPI_BYTE, 1, i, MPI_COMM_WORLD);
            usleep((useconds_t) pause_ms * 1000); /* away: no MPI call, no progress */
        } else {
            MPI_Recv(buf, AWAY_BYTES, MPI_BYTE, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t;
            memcpy(&t, buf, sizeof(t));
            double late = 1e3 * (now_s() - t);
            for (size_t k = sizeof(t); k < sizeof(buf); ++k) {
                bad |= buf[k] != (unsigned char) (0xa0 + i);
            }
            printf("away: message %d late_ms %.1f\n", i, late);
            max_late = late > max_late ? late : max_late;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (1 == rank) {
        printf("%s away max_late_ms %.1f\n", bad ? "FAIL wrong data:" : "PASS", max_late);
    }
    MPI_Finalize();
    return bad;
}
