/*
 * Dead peers, two modes (argv[1]):
 *
 *   stop (default)  Rank 1 stops itself (SIGSTOP: alive to the kernel and
 *                   to mpirun, but it never progresses or ACKs again); rank
 *                   0 then sends to it.
 *   kill            Rank 0 streams 1 MiB messages to rank 1, which keeps
 *                   receiving them; in the middle of one transfer rank 0
 *                   kills rank 1 with SIGKILL (both run on this host: rank
 *                   1 sent its pid beforehand) and prints the CLOCK_REALTIME
 *                   time of the kill, then waits for that send and goes on
 *                   streaming.  mpirun must be told not to end the job when
 *                   a rank dies (the test script does that), so that the
 *                   usnic BTL's own detection is what ends it.
 *
 * In both modes the usnic BTL must declare rank 1 dead after
 * btl_usnic_peer_timeout and the job must end instead of hanging.  The
 * caller checks the exit status, the message and the time it took.  Any
 * line with "UNEXPECTED" means a send to the dead peer completed or the
 * program got further than it should have.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define MSG_BYTES (1 << 20)
#define WARMUP_MSGS 8       /* complete transfers before the kill */
#define STREAM_SECONDS 120  /* give up streaming after this (a hang) */

static double realtime_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static int stop_mode(int rank)
{
    if (1 == rank) {
        raise(SIGSTOP);
    } else if (0 == rank) {
        char *buf = malloc(MSG_BYTES);
        memset(buf, 7, MSG_BYTES);
        printf("deadpeer: rank 0 sending to stopped rank 1\n");
        fflush(stdout);
        MPI_Send(buf, MSG_BYTES, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
        printf("deadpeer: UNEXPECTED: send to a stopped peer completed\n");
        free(buf);
    }
    return 0;
}

/* Rank 1: receive until killed. */
static void kill_mode_receiver(void)
{
    char *buf = malloc(MSG_BYTES);
    char host[MPI_MAX_PROCESSOR_NAME];
    int len, pid = (int) getpid();
    MPI_Get_processor_name(host, &len);
    MPI_Send(&pid, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    MPI_Send(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    for (;;) {
        MPI_Recv(buf, MSG_BYTES, MPI_CHAR, 0, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

/* Rank 0: stream to rank 1, kill it in the middle of a transfer, go on
 * sending to it.  Returns only if the BTL never reports the dead peer. */
static int kill_mode_sender(void)
{
    char *buf = malloc(MSG_BYTES);
    char host0[MPI_MAX_PROCESSOR_NAME], host1[MPI_MAX_PROCESSOR_NAME];
    int len, pid;
    memset(buf, 7, MSG_BYTES);
    MPI_Get_processor_name(host0, &len);
    MPI_Recv(&pid, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(host1, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (0 != strcmp(host0, host1)) {
        printf("deadpeer: UNEXPECTED: rank 1 runs on %s, not on %s: cannot kill it\n", host1, host0);
        fflush(stdout);
        return 1;
    }
    printf("deadpeer: rank 0 streaming %d-byte messages to rank 1 (pid %d)\n", MSG_BYTES, pid);
    fflush(stdout);
    for (int i = 0; i < WARMUP_MSGS; ++i) {
        MPI_Send(buf, MSG_BYTES, MPI_CHAR, 1, 100 + i, MPI_COMM_WORLD);
    }
    /* Start one more transfer and let it get going: rank 1 is receiving
     * it, ACKs flow until the kill. */
    MPI_Request req;
    int done = 0;
    MPI_Isend(buf, MSG_BYTES, MPI_CHAR, 1, 100 + WARMUP_MSGS, MPI_COMM_WORLD, &req);
    for (int i = 0; i < 3 && !done; ++i) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    double t_kill = realtime_now();
    if (0 != kill((pid_t) pid, SIGKILL)) {
        perror("deadpeer: UNEXPECTED: kill");
        return 1;
    }
    printf("deadpeer: rank 0 killed rank 1 (pid %d on %s) %s a transfer at realtime %.6f\n", pid, host1,
           done ? "right after" : "during", t_kill);
    fflush(stdout);
    /* This one may still complete: its last segments may have been ACKed
     * just before the kill.  No later send can, as each needs rank 1's
     * rendezvous reply. */
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (!done) {
        printf("deadpeer: the transfer in flight at the kill completed %.3f s later (ACKed before the kill)\n",
               realtime_now() - t_kill);
        fflush(stdout);
    }
    for (int i = 1; realtime_now() - t_kill < STREAM_SECONDS; ++i) {
        MPI_Send(buf, MSG_BYTES, MPI_CHAR, 1, 100 + WARMUP_MSGS + i, MPI_COMM_WORLD);
        printf("deadpeer: UNEXPECTED: send %d to the killed rank completed after %.3f s\n", i,
               realtime_now() - t_kill);
        fflush(stdout);
    }
    printf("deadpeer: UNEXPECTED: still streaming %d s after the kill\n", STREAM_SECONDS);
    free(buf);
    return 1;
}

int main(int argc, char **argv)
{
    int rank, size, rc = 0;
    const char *mode = (argc > 1) ? argv[1] : "stop";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == strcmp(mode, "stop")) {
        rc = stop_mode(rank);
    } else if (0 == strcmp(mode, "kill") && size >= 2) {
        if (1 == rank) {
            kill_mode_receiver();
        } else if (0 == rank) {
            rc = kill_mode_sender();
        }
    } else {
        if (0 == rank) {
            fprintf(stderr, "usage: deadpeer [stop|kill] (kill needs 2 ranks on one host)\n");
        }
        rc = 2;
    }
    if (0 != rc) {
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    MPI_Finalize();
    return 0;
}
