/*
 * Incast: every rank but 0 streams large messages to rank 0 at the same
 * time (argv[1] messages of argv[2] bytes each).  Rank 0 checks every
 * byte.  The caller checks the retransmission count.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char pattern(int src, int msg, size_t i)
{
    return (unsigned char) (i * 29 + (size_t) msg * 7 + (size_t) src * 101);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int count = (argc > 1) ? atoi(argv[1]) : 16;
    size_t bytes = (argc > 2) ? (size_t) atol(argv[2]) : (1u << 20);
    if (0 == rank) {
        int senders = size - 1;
        unsigned char *bufs = malloc((size_t) senders * count * bytes);
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t) senders * count);
        for (int s = 0; s < senders; ++s) {
            for (int m = 0; m < count; ++m) {
                MPI_Irecv(bufs + ((size_t) s * count + m) * bytes, (int) bytes, MPI_BYTE, s + 1, m, MPI_COMM_WORLD,
                          &reqs[s * count + m]);
            }
        }
        MPI_Waitall(senders * count, reqs, MPI_STATUSES_IGNORE);
        for (int s = 0; s < senders; ++s) {
            for (int m = 0; m < count; ++m) {
                const unsigned char *b = bufs + ((size_t) s * count + m) * bytes;
                for (size_t i = 0; i < bytes; ++i) {
                    if (b[i] != pattern(s + 1, m, i)) {
                        fprintf(stderr, "FAIL incast: message %d from rank %d, byte %zu\n", m, s + 1, i);
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    }
                }
            }
        }
        printf("PASS incast (%d senders x %d messages x %zu bytes)\n", senders, count, bytes);
        free(bufs);
        free(reqs);
    } else {
        unsigned char *buf = malloc((size_t) count * bytes);
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t) count);
        for (int m = 0; m < count; ++m) {
            for (size_t i = 0; i < bytes; ++i) {
                buf[(size_t) m * bytes + i] = pattern(rank, m, i);
            }
            MPI_Isend(buf + (size_t) m * bytes, (int) bytes, MPI_BYTE, 0, m, MPI_COMM_WORLD, &reqs[m]);
        }
        MPI_Waitall(count, reqs, MPI_STATUSES_IGNORE);
        free(buf);
        free(reqs);
    }
    MPI_Finalize();
    return 0;
}
