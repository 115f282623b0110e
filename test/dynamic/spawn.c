/*
 * spawn.c - MPI_Comm_spawn / MPI_Comm_spawn_multiple over the usnic BTL.
 * One binary: run by mpirun it is the parent, spawned (argv[1] "child")
 * it is a child.
 *
 *   spawn basic NCHILD   the parents (any -np, root 0) spawn NCHILD
 *                        children, then dyn_exchange() and
 *                        dyn_collectives() (dyn.h), then disconnect
 *   spawn multiple       MPI_Comm_spawn_multiple of this binary as two
 *                        commands, 1 + 2 processes; each child checks its
 *                        MPI_APPNUM and argv; then as basic
 *   spawn cycles N       N times: spawn 1 child, exchange (the seed
 *                        includes the cycle number), disconnect
 *   spawn linger SECS    spawn 2 children, exchange, disconnect; the
 *                        children tell their pids first; the parent waits
 *                        until both processes are gone (or zombies), then
 *                        keeps calling MPI (MPI_Iprobe) for SECS seconds
 *
 * Rank 0 of the parents prints "PASS spawn-<mode>" when everything checked
 * out; any failure prints "FAIL ..." and aborts.
 */
#define TEST_NAME "spawn"
#include "dyn.h"

#include <errno.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* gone or a zombie */
static int pid_gone(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static int child_main(int argc, char **argv)
{
    /* argv: child MODE CYCLE NPARENTS NCHILDREN [APPNUM] */
    if (argc < 6)
        fail("child: %d arguments", argc);
    const char *mode = argv[2];
    int cycle = atoi(argv[3]), nparents = atoi(argv[4]),
        nchildren = atoi(argv[5]);
    MPI_Comm parent;
    int size, rsize;
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    if (parent == MPI_COMM_NULL)
        fail("child without a parent");
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK_MPI(MPI_Comm_remote_size(parent, &rsize));
    if (size != nchildren || rsize != nparents)
        fail("child of %s: world size %d, parents %d; want %d and %d", mode,
             size, rsize, nchildren, nparents);
    if (my_rank == 0)
        dyn_info("child of %s cycle %d started", mode, cycle);
    if (argc > 6) {
        int *appnum = NULL, flag = 0;
        CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum,
                                    &flag));
        if (!flag || *appnum != atoi(argv[6]))
            fail("child of %s: MPI_APPNUM %d, want %s", mode,
                 flag ? *appnum : -1, argv[6]);
    }
    if (0 == strcmp(mode, "linger")) {
        int pid = (int)getpid();
        CHECK_MPI(MPI_Send(&pid, 1, MPI_INT, 0, 7, parent));
    }
    dyn_exchange(parent, 1, cycle);
    if (0 != strcmp(mode, "cycles"))
        dyn_collectives(parent, 1, cycle);
    CHECK_MPI(MPI_Comm_disconnect(&parent));
    if (my_rank == 0)
        dyn_info("child of %s cycle %d done", mode, cycle);
    MPI_Finalize();
    return 0;
}

static MPI_Comm spawn_children(const char *prog, const char *mode, int cycle,
                               int nparents, int n)
{
    char c[16], np[16], nc[16];
    snprintf(c, sizeof(c), "%d", cycle);
    snprintf(np, sizeof(np), "%d", nparents);
    snprintf(nc, sizeof(nc), "%d", n);
    char *args[] = {"child", (char *)mode, c, np, nc, NULL};
    int *errs = xmalloc(sizeof(int) * (size_t)n);
    MPI_Comm inter;
    CHECK_MPI(MPI_Comm_spawn(prog, args, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                             &inter, errs));
    for (int i = 0; i < n; i++)
        if (errs[i] != MPI_SUCCESS)
            fail("spawn: child %d error code %d", i, errs[i]);
    free(errs);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int rsize;
    CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));
    if (rsize != n)
        fail("spawned %d children, intercomm has %d", n, rsize);
    return inter;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    if (argc > 1 && 0 == strcmp(argv[1], "child"))
        return child_main(argc, argv);
    if (argc < 2)
        fail("usage: spawn basic N | multiple | cycles N | linger SECS");

    const char *mode = argv[1];
    const char *prog = argv[0]; /* the runner passes an absolute path */
    int nparents;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nparents));
    MPI_Comm inter;

    if (0 == strcmp(mode, "basic")) {
        int n = argc > 2 ? atoi(argv[2]) : 2;
        inter = spawn_children(prog, mode, 0, nparents, n);
        dyn_exchange(inter, 0, 0);
        dyn_collectives(inter, 0, 0);
        CHECK_MPI(MPI_Comm_disconnect(&inter));
        if (my_rank == 0)
            dyn_info("%d parent(s), %d children: data and collectives checked",
                     nparents, n);
    } else if (0 == strcmp(mode, "multiple")) {
        char np[16];
        snprintf(np, sizeof(np), "%d", nparents);
        char *a0[] = {"child", "multiple", "0", np, "3", "0", NULL};
        char *a1[] = {"child", "multiple", "0", np, "3", "1", NULL};
        char *cmds[2] = {(char *)prog, (char *)prog};
        char **args[2] = {a0, a1};
        int maxprocs[2] = {1, 2}, errs[3];
        MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
        CHECK_MPI(MPI_Comm_spawn_multiple(2, cmds, args, maxprocs, infos, 0,
                                          MPI_COMM_WORLD, &inter, errs));
        for (int i = 0; i < 3; i++)
            if (errs[i] != MPI_SUCCESS)
                fail("spawn_multiple: child %d error code %d", i, errs[i]);
        MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
        int rsize;
        CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));
        if (rsize != 3)
            fail("spawn_multiple: intercomm has %d children, want 3", rsize);
        dyn_exchange(inter, 0, 0);
        dyn_collectives(inter, 0, 0);
        CHECK_MPI(MPI_Comm_disconnect(&inter));
        if (my_rank == 0)
            dyn_info("%d parent(s), spawn_multiple 1+2 children: checked",
                     nparents);
    } else if (0 == strcmp(mode, "cycles")) {
        int n = argc > 2 ? atoi(argv[2]) : 20;
        double t0 = now_s();
        for (int c = 1; c <= n; c++) {
            inter = spawn_children(prog, mode, c, nparents, 1);
            dyn_exchange(inter, 0, c);
            CHECK_MPI(MPI_Comm_disconnect(&inter));
            if (my_rank == 0)
                dyn_info("cycle %d checked (%.1fs)", c, now_s() - t0);
        }
    } else if (0 == strcmp(mode, "linger")) {
        double secs = argc > 2 ? atof(argv[2]) : 8;
        if (nparents != 1)
            fail("linger runs with one parent");
        inter = spawn_children(prog, mode, 0, 1, 2);
        int pids[2];
        for (int r = 0; r < 2; r++)
            CHECK_MPI(MPI_Recv(&pids[r], 1, MPI_INT, r, 7, inter,
                               MPI_STATUS_IGNORE));
        dyn_exchange(inter, 0, 0);
        dyn_collectives(inter, 0, 0);
        CHECK_MPI(MPI_Comm_disconnect(&inter));
        double t0 = now_s();
        while (!(pid_gone(pids[0]) && pid_gone(pids[1]))) {
            if (now_s() - t0 > 60)
                fail("children %d and %d still running 60 s after "
                     "disconnect", pids[0], pids[1]);
            usleep(10000);
        }
        double t1 = now_s();
        dyn_info("children (pids %d %d) exited %.2f s after disconnect; "
                 "calling MPI for %.1f s",
                 pids[0], pids[1], t1 - t0, secs);
        long calls = 0;
        while (now_s() - t1 < secs) {
            int flag = 0;
            CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                 &flag, MPI_STATUS_IGNORE));
            if (flag)
                fail("MPI_Iprobe found an unexpected message");
            calls++;
            if (calls % 64 == 0)
                usleep(1000);
        }
        dyn_info("%ld MPI_Iprobe calls in %.1f s after the children exited",
                 calls, now_s() - t1);
    } else {
        fail("unknown mode %s", mode);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (my_rank == 0) {
        printf("PASS spawn-%s\n", mode);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
