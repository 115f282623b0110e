/*
 * Rank 1 stops itself (SIGSTOP: alive to the kernel and to mpirun, but it
 * never progresses or ACKs again); rank 0 then sends to it.  The usnic
 * BTL must declare rank 1 dead after btl_usnic_peer_timeout and the job
 * must end instead of hanging.  The caller checks the exit status, the
 * message and the time it took.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (1 == rank) {
        raise(SIGSTOP);
    } else if (0 == rank) {
        size_t n = 1 << 20;
        char *buf = malloc(n);
        memset(buf, 7, n);
        printf("deadpeer: rank 0 sending to stopped rank 1\n");
        fflush(stdout);
        MPI_Send(buf, (int) n, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
        printf("deadpeer: UNEXPECTED: send to a stopped peer completed\n");
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
