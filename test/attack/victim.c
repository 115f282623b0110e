/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The attackers' target: every rank sends its ring neighbour a stream of
 * 8-byte counters (tag 7, one every PACE_US, so a sniffer can answer each
 * before the next one leaves) and, every BULK_EVERY messages, a 256 KiB
 * block of known bytes (chunks and PUTs, many datagrams back to back).
 * Every value and byte received is checked, so an injected message shows
 * up as a wrong value, a lost one as a hang.
 *
 *   victim SECONDS
 *
 * Prints "victim: rank R: N counters, W wrong, B blocks, X bad bytes"
 * and "PASS victim" on rank 0 when nothing was wrong anywhere; exits 1
 * otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PACE_US 2000
#define BULK_EVERY 25
#define BULK_BYTES (256 * 1024)
#define TAG_COUNTER 7
#define TAG_BULK 8

static uint8_t block_byte(uint64_t block, size_t i)
{
    return (uint8_t) (i * 131u + block * 7u + 1u);
}

/* One round: a counter to the right, one from the left; a block now and then */
static void round_trip(int rank, int size, uint64_t k, uint8_t *out, uint8_t *in, uint64_t *wrong, uint64_t *blocks,
                       uint64_t *bad_bytes)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    uint64_t sent = k, got = 0;
    MPI_Sendrecv(&sent, 1, MPI_UINT64_T, right, TAG_COUNTER, &got, 1, MPI_UINT64_T, left, TAG_COUNTER,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (got != k) {
        if (*wrong < 5) {
            fprintf(stderr, "victim: rank %d: counter %llu arrived as 0x%016llx\n", rank, (unsigned long long) k,
                    (unsigned long long) got);
        }
        ++*wrong;
    }
    if (0 == k % BULK_EVERY) {
        for (size_t i = 0; i < BULK_BYTES; ++i) {
            out[i] = block_byte(k, i);
        }
        memset(in, 0, BULK_BYTES);
        MPI_Sendrecv(out, BULK_BYTES, MPI_BYTE, right, TAG_BULK, in, BULK_BYTES, MPI_BYTE, left, TAG_BULK,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < BULK_BYTES; ++i) {
            *bad_bytes += in[i] != block_byte(k, i);
        }
        ++*blocks;
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = (argc > 1) ? atof(argv[1]) : 10.0;
    uint8_t *out = malloc(BULK_BYTES), *in = malloc(BULK_BYTES);
    if (NULL == out || NULL == in) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint64_t k = 0, wrong = 0, blocks = 0, bad_bytes = 0;
    int go = 1;
    double t0 = MPI_Wtime();
    while (go) {
        round_trip(rank, size, k++, out, in, &wrong, &blocks, &bad_bytes);
        usleep(PACE_US);
        if (0 == k % 64) {
            go = (MPI_Wtime() - t0) < seconds;
            MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD); /* all stop after the same round */
        }
    }
    printf("victim: rank %d: %llu counters, %llu wrong, %llu blocks, %llu bad bytes\n", rank, (unsigned long long) k,
           (unsigned long long) wrong, (unsigned long long) blocks, (unsigned long long) bad_bytes);
    uint64_t mine = wrong + bad_bytes, all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank && 0 == all) {
        printf("PASS victim\n");
    }
    fflush(stdout);
    free(out);
    free(in);
    MPI_Finalize();
    return 0 == rank && 0 != all ? 1 : 0;
}
