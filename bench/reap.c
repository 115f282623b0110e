/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * reap: run a command as a child subreaper, so that the CPU time of every
 * process it starts is charged to it, even of those whose parent exits
 * first.  bench/veth.sh needs it: mpirun's daemons on the namespaced
 * hosts (started through the rsh launch agent) and their ranks may outlive
 * the processes that started them, and the kernel then hands them to
 * init, which reaps them, so their CPU time never reaches the shell's
 * "times" and the benchmark would count its own ranks as "other work".
 *
 *   reap [--linger S] CMD [ARGS...]
 *
 * Waits for CMD, then for up to S seconds (default 5) for descendants that
 * are still running, reaping each; exits with CMD's status (128 + N if a
 * signal N ended it), or 127 if CMD cannot be run.  Descendants still
 * alive after S seconds are left alone (and are not charged).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    double linger = 5, deadline = 0;
    int first = 1, status = 0, code = 127, main_done = 0;
    pid_t child, pid;

    if (argc > 2 && strcmp(argv[1], "--linger") == 0) {
        char *end;
        linger = strtod(argv[2], &end);
        if (*end || linger < 0 || linger > 3600) {
            fprintf(stderr, "reap: bad --linger '%s'\n", argv[2]);
            return 2;
        }
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: reap [--linger S] CMD [ARGS...]\n");
        return 2;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        perror("reap: prctl(PR_SET_CHILD_SUBREAPER)");
        return 2;
    }
    child = fork();
    if (child < 0) {
        perror("reap: fork");
        return 2;
    }
    if (child == 0) {
        execvp(argv[first], argv + first);
        fprintf(stderr, "reap: cannot run %s: %s\n", argv[first], strerror(errno));
        _exit(127);
    }
    for (;;) {
        pid = waitpid(-1, &status, main_done ? WNOHANG : 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break; /* ECHILD: nothing left */
        }
        if (pid == 0) { /* descendants still running */
            if (now() > deadline)
                break;
            usleep(10000);
            continue;
        }
        if (pid == child) {
            code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
            main_done = 1;
            deadline = now() + linger;
        }
    }
    return code;
}
