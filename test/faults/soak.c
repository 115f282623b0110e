/*
 * Verified ping-pongs of varying sizes between rank pairs for a fixed time
 * (argv[1] seconds, default 4), so that a fault injector has a live job
 * to aim at.  Every byte is checked, in both directions; exits non-zero on
 * any mismatch.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i) {
        b[i] = (unsigned char) (i * 131 + seed);
    }
}

static int check(const unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i) {
        if (b[i] != (unsigned char) (i * 131 + seed)) {
            return (int) i;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = (argc > 1) ? atof(argv[1]) : 4.0;
    static const size_t sizes[] = {0, 8, 700, 1400, 3000, 40000, 300000};
    const int nsizes = (int) (sizeof(sizes) / sizeof(sizes[0]));
    unsigned char *buf = malloc(300000);
    int peer = rank ^ 1, iter = 0, stop = 0;
    double t0 = MPI_Wtime();
    while (!stop && peer < size) {
        size_t n = sizes[iter % nsizes];
        unsigned seed = (unsigned) iter * 7u;
        if (0 == rank % 2) {
            fill(buf, n, seed);
            MPI_Send(buf, (int) n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            fill(buf, n, seed + 1); /* differs in every byte from the echo expected */
            MPI_Recv(buf, (int) n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int bad = check(buf, n, seed);
            if (bad >= 0) {
                fprintf(stderr, "FAIL soak: rank %d iteration %d size %zu echo byte %d\n", rank, iter, n, bad);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            stop = (MPI_Wtime() - t0) > seconds;
            MPI_Send(&stop, 1, MPI_INT, peer, 3, MPI_COMM_WORLD);
        } else {
            MPI_Recv(buf, (int) n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int bad = check(buf, n, seed);
            if (bad >= 0) {
                fprintf(stderr, "FAIL soak: rank %d iteration %d size %zu byte %d\n", rank, iter, n, bad);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            MPI_Send(buf, (int) n, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
            MPI_Recv(&stop, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        ++iter;
    }
    free(buf);
    int total = 0;
    MPI_Reduce(&iter, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("PASS soak (%d ranks, %d verified round trips)\n", size, total);
    }
    MPI_Finalize();
    return 0;
}
