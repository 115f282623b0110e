/*
 * A token travels around all ranks twice, then every rank passes a
 * 500-byte message to its neighbour; every rank checks what it gets.
 * Used by run-param-tests.sh to prove that a job still works (and which
 * BTL carried it) while the usnic BTL's parameters are varied.  With
 * RING_SHOW_LIBFABRIC set, every rank also says whether libfabric is
 * mapped into it after MPI_Init ("libfabric mapped: yes|no").
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int libfabric_mapped(void)
{
    char line[512];
    int found = 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (NULL == maps) {
        return -1;
    }
    while (!found && NULL != fgets(line, sizeof(line), maps)) {
        found = (NULL != strstr(line, "/libfabric.so"));
    }
    fclose(maps);
    return found;
}

int main(int argc, char **argv)
{
    int rank, size, token = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (NULL != getenv("RING_SHOW_LIBFABRIC")) {
        int mapped = libfabric_mapped();
        printf("rank %d: libfabric mapped: %s\n", rank, mapped < 0 ? "unknown" : mapped ? "yes" : "no");
    }
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int lap = 0; lap < 2; ++lap) {
        if (0 == rank) {
            token = 1000 * lap + 1;
            MPI_Send(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (token != 1000 * lap + size) {
                fprintf(stderr, "FAIL ring: lap %d token %d, expected %d\n", lap, token, 1000 * lap + size);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        } else {
            MPI_Recv(&token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (token != 1000 * lap + rank) {
                fprintf(stderr, "FAIL ring: rank %d got %d\n", rank, token);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            ++token;
            MPI_Send(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
        }
    }
    /* a medium message each way: bigger than a small priority_limit,
     * smaller than the default one */
    unsigned char out[500], in[500];
    for (int i = 0; i < (int) sizeof(out); ++i) {
        out[i] = (unsigned char) (i * 31 + rank);
    }
    MPI_Sendrecv(out, sizeof(out), MPI_BYTE, next, 8, in, sizeof(in), MPI_BYTE, prev, 8, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (int i = 0; i < (int) sizeof(in); ++i) {
        if (in[i] != (unsigned char) (i * 31 + prev)) {
            fprintf(stderr, "FAIL ring: rank %d byte %d of the medium message\n", rank, i);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (0 == rank) {
        printf("PASS ring (%d ranks)\n", size);
    }
    MPI_Finalize();
    return 0;
}
