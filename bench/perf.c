/*
 * perf: latency, bandwidth and message rate between two MPI ranks, for the
 * interleaved transport comparison of bench/perf.sh.
 *
 * Transport-agnostic: mpirun's options pick the transport.  Rank 0 prints
 * one line per measured cell,
 *
 *   PERF label=L metric=lat|bw|rate size=BYTES window=W value=V unit=U
 *        batches=B iters=I bworst=... bbest=... steady_resends=R
 *
 * and one summary line
 *
 *   PERF_RUN label=L cpu0=.. cpu1=.. num_resends=.. num_total_sends=..
 *        num_timeout_retrans=.. num_fast_retrans=.. num_spurious_timeouts=..
 *        steady_resends=..
 *        steady_timeout_retrans=.. status=ok|FAILED
 *
 * Metrics:
 *   lat   half round trip of a blocking ping-pong, microseconds
 *   bw    windowed bandwidth: rank 0 posts `window` MPI_Isend of `size`
 *         bytes, rank 1 receives them into separate buffers and answers
 *         with a 0-byte message; MB/s (10^6 bytes/s) of delivered data
 *   rate  8-byte message rate: as bw with 64 messages per window, in
 *         messages per second
 *
 * Time-budgeted iterations: each cell first runs a fixed warm-up in 5
 * chunks, rank 0 turns the median chunk time into an iteration count that fills the cell's
 * budget (scaled by --budget) and shares it; the timed part is split into
 * `batches` (5) equal batches, each timed on rank 0, and the cell's value
 * is the median batch (a batch hit by a scheduler hiccup is discarded that
 * way); bmin/bmax are the worst and best batches.  Payloads are checked
 * once before and once after each cell, never while timing.
 *
 * Counters: the usnic BTL's MPI_T pvars btl_usnic_num_resends (and
 * friends) are read on both ranks right after MPI_Init and at the end;
 * the differences are summed over the ranks ("-" when the BTL is not
 * loaded).  steady_*: the same counters summed over the timed batches only
 * (steady state: no warm-up, no payload checks, during which one rank
 * computes outside MPI while the other waits for its ACKs).  cpu0/cpu1: CPU time / wall time of each rank over the
 * measurements (a polling rank that owns its core shows ~1.00; less means
 * something else ran on its core).
 *
 * Profiling mode: --only lat|bw|rate --size N --seconds S repeats one
 * metric for S seconds (one cell, one batch; rank 0 checks the clock every
 * ~0.1 s of work and tells rank 1 whether to go on), for perf record.
 *
 * Selection: --cells lat:8,lat:16384,bw:1048576 runs only the named cells
 * of the default set (metric:size, comma-separated; the rate cell is
 * rate:8), in the default order (bench/veth.sh uses it).
 *
 * Usage: perf [--label L] [--budget F] [--only lat,bw,rate] [--size N]
 *             [--seconds S] [--cells LIST]
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "usnic_pvars.h"

#define TAG_DATA 1
#define TAG_ACK 2

#define KIB 1024
#define MIB (1024 * 1024)
#define NBATCH 5
#define RATE_WINDOW 64
#define RATE_SIZE 8

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

typedef enum { M_LAT, M_BW, M_RATE } metric_t;
static const char *const metric_name[] = {"lat", "bw", "rate"};
static const char *const metric_unit[] = {"us", "MBps", "msgps"};

typedef struct {
    metric_t metric;
    size_t size;
    int window;      /* messages per window (bw, rate); 1 for lat */
    int warmup;      /* untimed operations per warm-up chunk (NBATCH chunks) */
    int max_iters;   /* per batch */
    double budget_s; /* timed part, before --budget scaling */
} cell_t;

static const cell_t default_cells[] = {
    {M_LAT, 0, 1, 100, 200000, 0.30},
    {M_LAT, 8, 1, 100, 200000, 0.30},
    {M_LAT, 1 * KIB, 1, 100, 200000, 0.30},
    {M_LAT, 16 * KIB, 1, 40, 200000, 0.30},
    {M_LAT, 64 * KIB, 1, 20, 100000, 0.30},
    {M_BW, 64 * KIB, 64, 1, 100000, 0.50},
    {M_BW, 1 * MIB, 16, 1, 100000, 0.60},
    {M_BW, 4 * MIB, 8, 1, 100000, 0.60},
    {M_RATE, RATE_SIZE, RATE_WINDOW, 10, 1000000, 0.50},
};

typedef struct {
    const char *label;
    double budget;      /* scale factor for every budget */
    int only[3];        /* which metrics run (all when none named) */
    size_t size;        /* profiling: the one size */
    double seconds;     /* profiling: > 0 = one cell of this length */
    const char *cells;  /* --cells: "metric:size,..." or NULL (all) */
} options_t;

static int my_rank;
static options_t opt;

/* ------------------------------------------------------------------------ */
/* usnic counters through MPI_T (absent = -1)                               */
/* ------------------------------------------------------------------------ */

static const char *const pvar_names[] = {
    "btl_usnic_num_resends",
    "btl_usnic_num_total_sends",
    "btl_usnic_num_timeout_retrans",
    "btl_usnic_num_fast_retrans",
    "btl_usnic_num_spurious_timeouts",
};
#define NPVARS NELEMS(pvar_names) /* at most USNIC_PVARS_MAX */

/* ------------------------------------------------------------------------ */
/* Payload check                                                            */
/* ------------------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* Byte i of the message identified by `key`. */
static unsigned char pattern_byte(uint64_t key, size_t i)
{
    return (unsigned char)(mix(key ^ ((uint64_t)(i / 8) << 20)) >> (8 * (i % 8)));
}

static void pattern_fill(unsigned char *b, size_t n, uint64_t key)
{
    size_t i;

    for (i = 0; i < n; i++)
        b[i] = pattern_byte(key, i);
}

static int pattern_ok(const unsigned char *b, size_t n, uint64_t key)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (b[i] != pattern_byte(key, i))
            return 0;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* The operations                                                           */
/* ------------------------------------------------------------------------ */

typedef struct {
    unsigned char *sbuf, *rbuf;
    MPI_Request *reqs;
} bufs_t;

static void pingpong(const bufs_t *b, size_t size)
{
    int peer = 1 - my_rank;

    if (my_rank == 0) {
        MPI_Send(b->sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(b->rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(b->rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Send(b->sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
    }
}

/* One window: rank 0 -> rank 1, then a 0-byte answer.  For the message
 * rate every send uses the same buffer (8 bytes, read-only); receives go
 * to separate slots. */
static void window_op(const bufs_t *b, size_t size, int window, int same_sbuf)
{
    int k, peer = 1 - my_rank;

    if (my_rank == 0) {
        for (k = 0; k < window; k++)
            MPI_Isend(b->sbuf + (same_sbuf ? 0 : (size_t)k * size), (int)size,
                      MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &b->reqs[k]);
        MPI_Waitall(window, b->reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else {
        for (k = 0; k < window; k++)
            MPI_Irecv(b->rbuf + (size_t)k * size, (int)size, MPI_BYTE, peer,
                      TAG_DATA, MPI_COMM_WORLD, &b->reqs[k]);
        MPI_Waitall(window, b->reqs, MPI_STATUSES_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
    }
}

static void run_op(const cell_t *c, const bufs_t *b)
{
    if (c->metric == M_LAT)
        pingpong(b, c->size);
    else
        window_op(b, c->size, c->window, c->metric == M_RATE);
}

/* A checked operation: distinct patterns per direction/slot and per call
 * (`round`), receive buffers poisoned first.  Returns 1 if this rank
 * received what it should. */
static int checked_op(const cell_t *c, const bufs_t *b, int round)
{
    int k, n = c->metric == M_LAT ? 1 : c->window, ok = 1;
    uint64_t base = ((uint64_t)c->metric << 56) ^ ((uint64_t)c->size << 8) ^
                    (uint64_t)round;

    if (c->metric == M_LAT) {
        pattern_fill(b->sbuf, c->size, base ^ ((uint64_t)my_rank << 48));
        memset(b->rbuf, 0xa5, c->size);
    } else if (my_rank == 0) {
        for (k = 0; k < (c->metric == M_RATE ? 1 : n); k++)
            pattern_fill(b->sbuf + (size_t)k * c->size, c->size,
                         base ^ ((uint64_t)(k + 1) << 32));
    } else {
        memset(b->rbuf, 0xa5, (size_t)n * c->size);
    }
    run_op(c, b);
    if (c->metric == M_LAT) {
        ok = pattern_ok(b->rbuf, c->size, base ^ ((uint64_t)(1 - my_rank) << 48));
    } else if (my_rank == 1) {
        for (k = 0; k < n && ok; k++)
            ok = pattern_ok(b->rbuf + (size_t)k * c->size, c->size,
                            base ^ ((uint64_t)(c->metric == M_RATE ? 1 : k + 1) << 32));
    }
    return ok;
}

/* ------------------------------------------------------------------------ */
/* One cell                                                                 */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The value of `iters` operations that took `sec` seconds. */
static double cell_value(const cell_t *c, long iters, double sec)
{
    switch (c->metric) {
    case M_LAT:
        return sec * 1e6 / (2.0 * (double)iters);
    case M_BW:
        return (double)c->size * c->window * (double)iters / sec / 1e6;
    default:
        return (double)c->window * (double)iters / sec;
    }
}

/* Retransmissions of this rank inside the timed batches only (steady
 * state), apart from warm-up and the payload checks, where one rank
 * computes outside MPI while the other already waits for ACKs. */
static usnic_pvars_t *steady_pv;
static long long steady_resends[NPVARS];

static void steady_begin(long long mark[NPVARS])
{
    usnic_pvars_read(steady_pv, mark);
}

static void steady_end(const long long mark[NPVARS])
{
    long long now[NPVARS];
    size_t i;

    usnic_pvars_read(steady_pv, now);
    for (i = 0; i < NPVARS; i++)
        if (mark[i] >= 0 && now[i] >= 0)
            steady_resends[i] += now[i] - mark[i];
}

static int run_cell(const cell_t *c, const bufs_t *b)
{
    long long mark[NPVARS], cell_resends = steady_resends[0];
    double vals[NBATCH], t0, warm, budget;
    long iters = 1;
    int i, nb, ok = 1, all = 0, lower_better = c->metric == M_LAT;
    long k;

    ok &= checked_op(c, b, 0);
    /* Warm-up in NBATCH chunks; the median chunk gives the cost of one
     * operation, so one unlucky chunk does not shrink the count. */
    for (i = 0; i < NBATCH; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (k = 0; k < c->warmup; k++)
            run_op(c, b);
        vals[i] = MPI_Wtime() - t0;
    }
    qsort(vals, NBATCH, sizeof(double), cmp_double);
    warm = vals[NBATCH / 2];

    nb = opt.seconds > 0 ? 1 : NBATCH;
    /* Profiling: chunks of ~0.1 s until rank 0 has seen --seconds pass. */
    budget = opt.seconds > 0 ? 0.1 * nb : c->budget_s * opt.budget;
    if (my_rank == 0 && warm > 0) {
        double per_op = warm / c->warmup;
        double want = budget / nb / per_op;
        iters = want < 1 ? 1 : want > c->max_iters ? c->max_iters : (long)want;
    }
    MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);

    if (opt.seconds > 0) {
        long done = 0;
        int more = 1;

        MPI_Barrier(MPI_COMM_WORLD);
        steady_begin(mark);
        t0 = MPI_Wtime();
        while (more) {
            for (k = 0; k < iters; k++)
                run_op(c, b);
            done += iters;
            more = MPI_Wtime() - t0 < opt.seconds;
            MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
        vals[0] = cell_value(c, done, MPI_Wtime() - t0);
        steady_end(mark);
        iters = done;
    }
    for (i = 0; i < nb && opt.seconds <= 0; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        steady_begin(mark);
        t0 = MPI_Wtime();
        for (k = 0; k < iters; k++)
            run_op(c, b);
        vals[i] = cell_value(c, iters, MPI_Wtime() - t0);
        steady_end(mark);
    }
    ok &= checked_op(c, b, 1);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    cell_resends = steady_resends[0] - cell_resends;
    MPI_Allreduce(MPI_IN_PLACE, &cell_resends, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    if (my_rank == 0) {
        qsort(vals, (size_t)nb, sizeof(double), cmp_double);
        printf("PERF label=%s metric=%s size=%zu window=%d value=%.4g unit=%s "
               "batches=%d iters=%ld bworst=%.4g bbest=%.4g steady_resends=%lld%s\n",
               opt.label, metric_name[c->metric], c->size, c->window,
               vals[nb / 2], metric_unit[c->metric], nb, iters,
               lower_better ? vals[nb - 1] : vals[0],
               lower_better ? vals[0] : vals[nb - 1], cell_resends,
               all ? "" : " DATA_MISMATCH");
        fflush(stdout);
    }
    return all;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

static int parse(int argc, char **argv)
{
    int i, any = 0;

    opt.label = "perf";
    opt.budget = 1.0;
    opt.size = 0;
    opt.seconds = 0;
    opt.cells = NULL;
    for (i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;

        if (v == NULL)
            return 0;
        if (strcmp(argv[i], "--label") == 0) {
            opt.label = v;
        } else if (strcmp(argv[i], "--budget") == 0) {
            opt.budget = strtod(v, &end);
            if (*end || !(opt.budget > 0 && opt.budget <= 100))
                return 0;
        } else if (strcmp(argv[i], "--seconds") == 0) {
            opt.seconds = strtod(v, &end);
            if (*end || !(opt.seconds > 0 && opt.seconds <= 3600))
                return 0;
        } else if (strcmp(argv[i], "--size") == 0) {
            opt.size = strtoull(v, &end, 10);
            if (*end || opt.size > 64 * MIB)
                return 0;
        } else if (strcmp(argv[i], "--cells") == 0) {
            if (*v == '\0' || strlen(v) > 200)
                return 0;
            opt.cells = v;
        } else if (strcmp(argv[i], "--only") == 0) {
            opt.only[M_LAT] = strstr(v, "lat") != NULL;
            opt.only[M_BW] = strstr(v, "bw") != NULL;
            opt.only[M_RATE] = strstr(v, "rate") != NULL;
            any = opt.only[0] + opt.only[1] + opt.only[2];
            if (!any)
                return 0;
        } else {
            return 0;
        }
        i++;
    }
    if (!any)
        opt.only[M_LAT] = opt.only[M_BW] = opt.only[M_RATE] = 1;
    return 1;
}

/* Is cell |c| in the --cells list (always, without one)? */
static int cell_wanted(const cell_t *c)
{
    char item[64], list[256];

    if (opt.cells == NULL)
        return 1;
    snprintf(item, sizeof(item), ",%s:%zu,", metric_name[c->metric], c->size);
    snprintf(list, sizeof(list), ",%s,", opt.cells);
    return strstr(list, item) != NULL;
}

static double cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    static usnic_pvars_t pv;
    cell_t cells[NELEMS(default_cells)];
    long long before[NPVARS], after[NPVARS], d[NPVARS], sum[NPVARS],
        mn[NPVARS], steady_sum[NPVARS];
    double cpu0, wall0, share, shares[2];
    size_t ncells = 0, i, bytes = 0;
    int nranks, ok = 1, maxwin = 1, good, all_good;
    bufs_t b;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!parse(argc, argv) || nranks != 2) {
        if (my_rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 %s [--label L] [--budget F] "
                    "[--only lat,bw,rate] [--size N --seconds S] "
                    "[--cells lat:8,bw:1048576,...]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    usnic_pvars_open(&pv, pvar_names, NPVARS);
    steady_pv = &pv;

    for (i = 0; i < NELEMS(default_cells); i++) {
        cell_t c = default_cells[i];
        if (!opt.only[c.metric] || !cell_wanted(&c))
            continue;
        if (opt.seconds > 0) {
            /* profiling: one cell of the first matching metric */
            if (c.metric != M_RATE)
                c.size = opt.size;
            if (c.metric == M_BW)
                c.window = c.size >= 4 * MIB ? 8 : c.size >= 1 * MIB ? 16 : 64;
            cells[ncells++] = c;
            break;
        }
        if (opt.size > 0 && c.size != opt.size)
            continue;
        cells[ncells++] = c;
    }
    if (ncells == 0) {
        if (my_rank == 0)
            fprintf(stderr, "perf: no cell selected (--only/--size/--cells)\n");
        MPI_Finalize();
        return 2;
    }
    for (i = 0; i < ncells; i++) {
        size_t need = cells[i].size * (size_t)cells[i].window;
        bytes = need > bytes ? need : bytes;
        maxwin = cells[i].window > maxwin ? cells[i].window : maxwin;
    }
    bytes = bytes < 64 ? 64 : bytes;
    b.sbuf = malloc(bytes);
    b.rbuf = malloc(bytes);
    b.reqs = malloc(sizeof(MPI_Request) * (size_t)maxwin);
    good = b.sbuf && b.rbuf && b.reqs;
    MPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all_good) {
        fprintf(stderr, "perf: rank %d: cannot allocate %zu bytes\n", my_rank,
                2 * bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(b.sbuf, 0, bytes); /* fault the pages in before timing */
    memset(b.rbuf, 0, bytes);

    usnic_pvars_read(&pv, before);
    MPI_Barrier(MPI_COMM_WORLD);
    cpu0 = cpu_seconds();
    wall0 = MPI_Wtime();
    for (i = 0; i < ncells; i++)
        ok &= run_cell(&cells[i], &b);
    share = (cpu_seconds() - cpu0) / (MPI_Wtime() - wall0);
    usnic_pvars_read(&pv, after);

    for (i = 0; i < NPVARS; i++)
        d[i] = before[i] < 0 || after[i] < 0 ? -1 : after[i] - before[i];
    MPI_Allreduce(d, sum, (int)NPVARS, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(d, mn, (int)NPVARS, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(steady_resends, steady_sum, (int)NPVARS, MPI_LONG_LONG,
                  MPI_SUM, MPI_COMM_WORLD);
    MPI_Gather(&share, 1, MPI_DOUBLE, shares, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (my_rank == 0) {
        printf("PERF_RUN label=%s cpu0=%.2f cpu1=%.2f", opt.label, shares[0],
               shares[1]);
        for (i = 0; i < NPVARS; i++) {
            if (mn[i] < 0)
                printf(" %s=-", pvar_names[i] + strlen("btl_usnic_"));
            else
                printf(" %s=%lld", pvar_names[i] + strlen("btl_usnic_"), sum[i]);
        }
        /* the same, counted inside the timed batches only */
        printf(" steady_resends=%s", mn[0] < 0 ? "-" : "");
        if (mn[0] >= 0)
            printf("%lld", steady_sum[0]);
        printf(" steady_timeout_retrans=%s", mn[2] < 0 ? "-" : "");
        if (mn[2] >= 0)
            printf("%lld", steady_sum[2]);
        printf(" status=%s\n", ok ? "ok" : "FAILED");
        fflush(stdout);
    }

    usnic_pvars_close(&pv);
    free(b.sbuf);
    free(b.rbuf);
    free(b.reqs);
    MPI_Finalize();
    return ok ? 0 : 1;
}
