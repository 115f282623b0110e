/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * stamps.c - traffic for run-stamps-test.sh: an 8-byte ping-pong
 * ("pingpong N": N round trips), a one-way stream ("stream N": N
 * messages of 1 MiB from rank 0 to rank 1, then a reply) or both in turn
 * ("mixed N": N rounds of one such message and MIXED_ROUND_TRIPS round
 * trips, each round within the time the stamps stay on after a batch),
 * every byte checked.  Prints "PASS stamps MODE" on rank 0.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_BYTES (1 << 20)
#define MIXED_ROUND_TRIPS 20

static int bad(const char *what, long i)
{
    fprintf(stderr, "FAIL stamps: %s (message %ld)\n", what, i);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

static void fill(unsigned char *buf, size_t len, long seed)
{
    for (size_t k = 0; k < len; ++k) {
        buf[k] = (unsigned char) (k * 131 + (size_t) seed * 7 + 1);
    }
}

static void pingpong(int rank, long n)
{
    for (long i = 0; i < n; ++i) {
        uint64_t v = (uint64_t) i * 2654435761u, got = 0;
        if (0 == rank) {
            MPI_Send(&v, 1, MPI_UINT64_T, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&got, 1, MPI_UINT64_T, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (got != v + 1) {
                bad("wrong reply", i);
            }
        } else {
            MPI_Recv(&got, 1, MPI_UINT64_T, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (got != v) {
                bad("wrong ping", i);
            }
            ++got;
            MPI_Send(&got, 1, MPI_UINT64_T, 0, 0, MPI_COMM_WORLD);
        }
    }
}

static void stream(int rank, long n)
{
    unsigned char *buf = malloc(STREAM_BYTES), *want = malloc(STREAM_BYTES);
    if (NULL == buf || NULL == want) {
        bad("out of memory", 0);
    }
    for (long i = 0; i < n; ++i) {
        fill(want, STREAM_BYTES, i);
        if (0 == rank) {
            MPI_Send(want, STREAM_BYTES, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        } else {
            memset(buf, 0, STREAM_BYTES);
            MPI_Recv(buf, STREAM_BYTES, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (0 != memcmp(buf, want, STREAM_BYTES)) {
                bad("stream data differ", i);
            }
        }
    }
    int done = 1;
    if (0 == rank) {
        MPI_Recv(&done, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Send(&done, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
    }
    free(buf);
    free(want);
}

static void mixed(int rank, long n)
{
    for (long i = 0; i < n; ++i) {
        stream(rank, 1);
        pingpong(rank, MIXED_ROUND_TRIPS);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bool known = 3 == argc && (0 == strcmp(argv[1], "pingpong") || 0 == strcmp(argv[1], "stream") ||
                                0 == strcmp(argv[1], "mixed"));
    if (!known || 2 != size) {
        if (0 == rank) {
            fprintf(stderr, "usage: mpirun -np 2 stamps pingpong|stream|mixed N\n");
        }
        MPI_Finalize();
        return 2;
    }
    long n = atol(argv[2]);
    if (0 == strcmp(argv[1], "pingpong")) {
        pingpong(rank, n);
    } else if (0 == strcmp(argv[1], "mixed")) {
        mixed(rank, n);
    } else {
        stream(rank, n);
    }
    if (0 == rank) {
        printf("PASS stamps %s %ld\n", argv[1], n);
    }
    MPI_Finalize();
    return 0;
}
