/*
 * stalls: how long this host takes a busy-polling process off its CPU.
 *
 * One process per CPU (--cpus A,B, default 0,1), each pinned to its CPU,
 * reads CLOCK_MONOTONIC in a tight loop for --seconds S (default 5) and
 * counts the gaps between two consecutive reads above 100 us, 500 us and
 * 2 ms, and the longest.  A gap is time the loop did not run: preemption
 * by other threads, interrupts, or the hypervisor descheduling the vCPU.
 * A polling MPI rank stalls the same way, and a peer stalled longer than
 * the retransmit timeout makes that timeout fire although nothing was
 * lost: this is the context of the usnic BTL's lossless retransmissions.
 *
 * Output, one line per CPU:
 *   STALLS cpu=N seconds=S over100us=.. over500us=.. over2ms=.. max_us=..
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void probe(int cpu, double seconds)
{
    cpu_set_t set;
    double start, prev, gap, longest = 0;
    long over100 = 0, over500 = 0, over2000 = 0;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        perror("sched_setaffinity");
        exit(1);
    }
    start = prev = now_us();
    while (prev - start < seconds * 1e6) {
        double t = now_us();
        gap = t - prev;
        over100 += gap > 100;
        over500 += gap > 500;
        over2000 += gap > 2000;
        longest = gap > longest ? gap : longest;
        prev = t;
    }
    printf("STALLS cpu=%d seconds=%.1f over100us=%ld over500us=%ld over2ms=%ld max_us=%.0f\n", cpu, seconds,
           over100, over500, over2000, longest);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int cpus[2] = {0, 1}, i, status, rc = 0;
    double seconds = 5;
    pid_t pid[2];

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0) {
            seconds = atof(argv[i + 1]);
        } else if (strcmp(argv[i], "--cpus") == 0) {
            if (sscanf(argv[i + 1], "%d,%d", &cpus[0], &cpus[1]) != 2) {
                break;
            }
        } else {
            break;
        }
    }
    if (i != argc || !(seconds > 0 && seconds < 3600)) {
        fprintf(stderr, "usage: stalls [--seconds S] [--cpus A,B]\n");
        return 2;
    }
    for (i = 0; i < 2; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            perror("fork");
            return 1;
        }
        if (pid[i] == 0) {
            probe(cpus[i], seconds);
            _exit(0);
        }
    }
    for (i = 0; i < 2; i++) {
        if (waitpid(pid[i], &status, 0) != pid[i] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            rc = 1;
        }
    }
    return rc;
}
