/*
 * scale: what each MPI process costs as the job grows, for bench/scale.sh.
 *
 * Every rank records, for itself:
 *   init_s      seconds spent in MPI_Init (clock read just before and just
 *               after; process start-up before main is not included)
 *   fds_init    open file descriptors after MPI_Init (entries of
 *               /proc/self/fd, minus the one opendir itself holds)
 *   rss_init    resident memory after MPI_Init (VmRSS of /proc/self/status)
 *   anon_init   its private anonymous part (RssAnon): VmRSS also counts
 *               the shared libraries' and shared memory pages touched
 *   heap_init   bytes malloc has handed out (mallinfo2: uordblks + hblkhd)
 *   ... and the same four after the all-to-all phase: fds_a2a, rss_a2a,
 *   anon_a2a, heap_a2a.
 *
 * The all-to-all phase: --rounds (default 20) MPI_Alltoall of --bytes
 * (default 4096) per peer, so that every rank has exchanged messages with
 * every other rank (a transport that connects lazily has connected to
 * all), with the first and last byte of every block checked; then one
 * MPI_Barrier.  The exchange buffers are mmap'ed and unmapped before the
 * second measurement.
 *
 * Rank 0 gathers the records and prints one line per rank,
 *   SCALE rank=R init_s=.. fds_init=.. fds_a2a=.. rss_init_kb=..
 *         rss_a2a_kb=.. anon_init_kb=.. anon_a2a_kb=.. heap_init=..
 *         heap_a2a=..
 * and a last line "SCALE_DONE ranks=N a2a_s=.. status=ok|FAILED".
 *
 * Usage: mpirun -np N scale [--bytes B] [--rounds R]
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define NFIELDS 9

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

/* A "Name:  N kB" line of /proc/self/status, in kB (-1 if absent). */
static long status_kb(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t len = strlen(name);
    long kb = -1;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, name, len) == 0 && line[len] == ':' &&
            sscanf(line + len + 1, "%ld", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* The exchange buffers come straight from mmap and go back with munmap,
 * so they leave nothing resident behind in malloc's heap. */
static unsigned char *map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static long heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();

    return (long)(mi.uordblks + mi.hblkhd);
}

int main(int argc, char **argv)
{
    double t0, t1, a0, a2a_s;
    long rec[NFIELDS], *all = NULL;
    int rank, n, i, r, rounds = 20, ok = 1, all_ok = 0;
    size_t bytes = 4096;
    unsigned char *sbuf, *rbuf;

    t0 = now();
    MPI_Init(&argc, &argv);
    t1 = now();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    rec[0] = (long)((t1 - t0) * 1e6); /* microseconds */
    rec[1] = count_fds();
    rec[3] = status_kb("VmRSS");
    rec[5] = heap_bytes();
    rec[7] = status_kb("RssAnon");

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--bytes") == 0)
            bytes = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
    }
    if (bytes < 1 || rounds < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: scale [--bytes B>=1] [--rounds R>=1]\n");
        MPI_Finalize();
        return 2;
    }

    sbuf = map(bytes * (size_t)n);
    rbuf = map(bytes * (size_t)n);
    if (sbuf == NULL || rbuf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    a0 = now();
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < n; i++) {
            memset(sbuf + (size_t)i * bytes, (rank * 31 + i * 7 + r) & 0xff, bytes);
        }
        memset(rbuf, 0, bytes * (size_t)n);
        MPI_Alltoall(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE,
                     MPI_COMM_WORLD);
        for (i = 0; i < n; i++) {
            unsigned char want = (unsigned char)((i * 31 + rank * 7 + r) & 0xff);
            if (rbuf[(size_t)i * bytes] != want ||
                rbuf[(size_t)i * bytes + bytes - 1] != want)
                ok = 0;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    a2a_s = now() - a0;
    munmap(sbuf, bytes * (size_t)n);
    munmap(rbuf, bytes * (size_t)n);

    rec[2] = count_fds();
    rec[4] = status_kb("VmRSS");
    rec[6] = heap_bytes();
    rec[8] = status_kb("RssAnon");

    if (rank == 0)
        all = malloc(sizeof(long) * NFIELDS * (size_t)n);
    MPI_Gather(rec, NFIELDS, MPI_LONG, all, NFIELDS, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (i = 0; i < n; i++) {
            long *x = all + (size_t)i * NFIELDS;
            printf("SCALE rank=%d init_s=%.3f fds_init=%ld fds_a2a=%ld "
                   "rss_init_kb=%ld rss_a2a_kb=%ld anon_init_kb=%ld "
                   "anon_a2a_kb=%ld heap_init=%ld heap_a2a=%ld\n",
                   i, (double)x[0] / 1e6, x[1], x[2], x[3], x[4], x[7], x[8],
                   x[5], x[6]);
        }
        printf("SCALE_DONE ranks=%d a2a_s=%.3f status=%s\n", n, a2a_s,
               all_ok ? "ok" : "FAILED");
        fflush(stdout);
        free(all);
    }
    MPI_Finalize();
    return rank == 0 && !all_ok ? 1 : 0;
}
