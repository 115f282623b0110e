/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The randomized differential stress: the case loop, its reports and its
 * watchdog.  See README.md for what a case is and how runs are compared.
 *
 *   stress [--seed S] [--cases N] [--seconds T | --minutes M]
 *          [--only-case K] [--regress NAME] [--kinds p2p,coll,osc]
 *          [--max-bytes B] [--limits b1,b2,...] [--digest-file F]
 *          [--watchdog SECONDS]
 */
#include "stress.h"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "usnic_pvars.h"

typedef struct {
    uint64_t seed;
    long cases;            /* at most this many (0: no limit) */
    double seconds;        /* stop starting cases after this long (0: no limit) */
    long only_case;        /* -1: all */
    const char *regress;   /* a named regression shape instead of random cases */
    bool kind_p2p, kind_coll, kind_osc;
    size_t max_bytes;
    size_t limits[32];
    const char *digest_file;
    int watchdog;          /* seconds a case may take before the rank gives up */
} opts_t;

/* ===================== watchdog ===================== */

static volatile long wd_case = -1;
static volatile const char *wd_phase = "start";
static volatile time_t wd_since;
static int wd_limit;
static int wd_rank;
static pthread_t wd_main;
static volatile int wd_dumped;

/* SIGUSR1 in the main thread: where it is stuck, for the log */
static void dump_stack(int sig)
{
    (void) sig;
    void *frames[48];
    int n = backtrace(frames, 48);
    backtrace_symbols_fd(frames, n, STDOUT_FILENO);
    wd_dumped = 1;
}

static void *watchdog_main(void *arg)
{
    (void) arg;
    for (;;) {
        sleep(1);
        time_t now = time(NULL);
        if (wd_limit > 0 && wd_case >= 0 && now - wd_since > wd_limit) {
            fprintf(stdout, "FAIL stress: rank %d: case %ld stuck in \"%s\" for %ld s: a hang; its stack:\n", wd_rank,
                    wd_case, (const char *) wd_phase, (long) (now - wd_since));
            fflush(stdout);
            pthread_kill(wd_main, SIGUSR1);
            for (int i = 0; i < 20 && !wd_dumped; ++i) {
                usleep(100000);
            }
            fflush(stdout);
            _exit(3);
        }
    }
    return NULL;
}

void case_enter(stress_case_t *c, const char *phase)
{
    c->phase = phase;
    wd_phase = phase;
    wd_since = time(NULL);
}

/* ===================== reports ===================== */

void case_fail(stress_case_t *c, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("FAIL case %ld (%s): rank %d: %s; replay: --seed %llu --only-case %ld\n", c->case_no, c->what, c->rank, msg,
           (unsigned long long) c->seed, c->case_no);
    fflush(stdout);
    ++c->failures;
}

/* The base element of |t| that holds byte |off| from the buffer's
 * origin, or -1 */
static long element_at(const dtype_t *t, size_t count, MPI_Aint off)
{
    size_t n = count * (size_t) t->nmap;
    for (size_t e = 0; e < n; ++e) {
        MPI_Aint at = dtype_offset(t, e);
        if (off >= at && off < at + (MPI_Aint) base_span(t->base)) {
            return (long) e;
        }
    }
    return -1;
}

bool case_check(stress_case_t *c, const char *what, const tbuf_t *got, const tbuf_t *want, const dtype_t *t,
                size_t count)
{
    return case_check_bytes(c, what, got->mem, want->mem, want->span, t, count, got->origin - got->mem);
}

bool case_check_bytes(stress_case_t *c, const char *what, const uint8_t *got, const uint8_t *want, size_t n,
                      const dtype_t *t, size_t count, ptrdiff_t origin)
{
    if (0 == memcmp(got, want, n)) {
        return true;
    }
    size_t first = 0, bad = 0;
    while (got[first] == want[first]) {
        ++first;
    }
    for (size_t i = first; i < n; ++i) {
        bad += got[i] != want[i];
    }
    long e = NULL != t ? element_at(t, count, (MPI_Aint) first - origin) : -1;
    case_fail(c, "%s: %zu of %zu bytes wrong, first at byte %zu (%s %ld): expected 0x%02x, found 0x%02x", what, bad, n,
              first, e >= 0 ? "base element" : "a gap, not in the type map", e, want[first], got[first]);
    return false;
}

/* ===================== sizes ===================== */

static size_t log_uniform(rng_t *r, size_t lo, size_t hi)
{
    double a = (double) (lo ? lo : 1), b = (double) hi;
    double x = a * __builtin_exp((double) (rng_next(r) % 1000000) / 1e6 * __builtin_log(b / a));
    return (size_t) x;
}

size_t case_pick_bytes(stress_case_t *c)
{
    size_t n;
    int k = (int) rng_range(&c->rng, 0, 99);
    if (k < 6) {
        n = 0;
    } else if (k < 46) {
        int nl = 0;
        while (0 != c->limits[nl]) {
            ++nl;
        }
        size_t at = c->limits[rng_range(&c->rng, 0, nl - 1)];
        int64_t jitter = rng_range(&c->rng, -48, 48);
        n = (int64_t) at + jitter > 0 ? (size_t) ((int64_t) at + jitter) : 0;
    } else if (k < 94) {
        n = log_uniform(&c->rng, 1, 1u << 20);
    } else {
        n = log_uniform(&c->rng, 1u << 20, c->max_bytes);
    }
    return n < c->max_bytes ? n : c->max_bytes;
}

/* ===================== options ===================== */

static void usage(void)
{
    fprintf(stderr, "usage: stress [--seed S] [--cases N] [--seconds T | --minutes M] [--only-case K]\n"
                    "              [--regress NAME] [--kinds p2p,coll,osc] [--max-bytes B]\n"
                    "              [--limits b1,b2,...] [--digest-file F] [--watchdog SECONDS]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void parse_limits(opts_t *o, const char *s)
{
    size_t n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); NULL != tok && n + 1 < 32; tok = strtok_r(NULL, ",", &save)) {
        size_t v = strtoull(tok, NULL, 0);
        if (v > 0) {
            o->limits[n++] = v;
        }
    }
    o->limits[n] = 0;
    free(copy);
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->seed = 1;
    o->only_case = -1;
    o->kind_p2p = o->kind_coll = o->kind_osc = true;
    o->max_bytes = 64u << 20;
    o->watchdog = 120;
    /* Open MPI 4.1's ob1 over this BTL: tiny, single datagram, rndv eager,
     * eager, max send, min RDMA pipeline, RDMA pipeline fragment */
    parse_limits(o, "1,16,740,1444,4096,32768,65536,98304,1048576");
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (NULL == v) {
            usage();
        }
        ++i;
        if (0 == strcmp(a, "--seed")) {
            o->seed = strtoull(v, NULL, 0);
        } else if (0 == strcmp(a, "--cases")) {
            o->cases = strtol(v, NULL, 0);
        } else if (0 == strcmp(a, "--seconds")) {
            o->seconds = strtod(v, NULL);
        } else if (0 == strcmp(a, "--minutes")) {
            o->seconds = 60 * strtod(v, NULL);
        } else if (0 == strcmp(a, "--only-case")) {
            o->only_case = strtol(v, NULL, 0);
        } else if (0 == strcmp(a, "--regress")) {
            o->regress = v;
        } else if (0 == strcmp(a, "--kinds")) {
            o->kind_p2p = NULL != strstr(v, "p2p");
            o->kind_coll = NULL != strstr(v, "coll");
            o->kind_osc = NULL != strstr(v, "osc");
        } else if (0 == strcmp(a, "--max-bytes")) {
            o->max_bytes = strtoull(v, NULL, 0);
        } else if (0 == strcmp(a, "--limits")) {
            parse_limits(o, v);
        } else if (0 == strcmp(a, "--digest-file")) {
            o->digest_file = v;
        } else if (0 == strcmp(a, "--watchdog")) {
            o->watchdog = atoi(v);
        } else {
            usage();
        }
    }
    if (0 == o->cases && 0 == o->seconds && o->only_case < 0) {
        o->cases = 100;
    }
}

/* ===================== the case loop ===================== */

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* Run case |k|: returns its failures (all ranks) and sets *digest_p */
static long run_case(const opts_t *o, long k, int rank, int nranks, uint64_t *digest_p, char *what, size_t what_len)
{
    stress_case_t c;
    memset(&c, 0, sizeof(c));
    c.seed = o->seed;
    c.case_no = k;
    c.rank = rank;
    c.nranks = nranks;
    c.max_bytes = o->max_bytes;
    c.limits = o->limits;
    c.rng = rng_for(o->seed, (uint64_t) k);
    wd_case = k;
    case_enter(&c, "setup");
    if (NULL != o->regress) {
        if (!regress_case(&c, o->regress)) {
            if (0 == rank) {
                fprintf(stderr, "stress: unknown regression case \"%s\"\n", o->regress);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        int kinds[3], nk = 0;
        if (o->kind_p2p) {
            kinds[nk++] = 0;
            kinds[nk++] = 0; /* point-to-point gets twice the share */
        }
        if (o->kind_coll) {
            kinds[nk++] = 1;
        }
        if (o->kind_osc) {
            kinds[nk++] = 2;
        }
        switch (kinds[rng_range(&c.rng, 0, nk - 1)]) {
        case 0: p2p_case(&c); break;
        case 1: coll_case(&c); break;
        default: osc_case(&c); break;
        }
    }
    case_enter(&c, "case results (MPI_Allreduce)");
    uint64_t mine = mix64(c.digest ^ (0x1000003ull * (uint64_t) (rank + 1))), all = 0;
    long fails = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    MPI_Allreduce(&c.failures, &fails, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    wd_case = -1;
    *digest_p = all;
    snprintf(what, what_len, "%s", c.what);
    return fails;
}

/* Segments the usnic BTL sent (all ranks), or -1 if it was not loaded */
static long long usnic_segments_sent(usnic_pvars_t *pv)
{
    long long mine = -1, all = 0;
    usnic_pvars_read(pv, &mine);
    MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (all < 0) {
        return -1;
    }
    MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    opts_t o;
    parse_opts(argc, argv, &o);
    wd_rank = rank;
    wd_limit = o.watchdog;
    pthread_t wd;
    wd_main = pthread_self();
    signal(SIGUSR1, dump_stack);
    pthread_create(&wd, NULL, watchdog_main, NULL);
    static const char *const pvar_names[] = {"btl_usnic_num_total_sends"};
    usnic_pvars_t pv;
    usnic_pvars_open(&pv, pvar_names, 1);

    FILE *df = (0 == rank && NULL != o.digest_file) ? fopen(o.digest_file, "w") : NULL;
    if (0 == rank) {
        printf("stress: seed %llu, %d ranks%s%s\n", (unsigned long long) o.seed, nranks,
               o.regress ? ", regression case " : "", o.regress ? o.regress : "");
        fflush(stdout);
    }
    double start = now_sec(), last_report = start;
    long done = 0, failed_cases = 0;
    long first = o.only_case >= 0 ? o.only_case : 0;
    for (long k = first;; ++k) {
        int stop = (o.cases > 0 && done >= o.cases) || (o.only_case >= 0 && done >= 1) ||
                   (o.seconds > 0 && now_sec() - start >= o.seconds);
        MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD); /* rank 0's clock decides */
        if (stop) {
            break;
        }
        uint64_t digest;
        char what[160];
        long fails = run_case(&o, k, rank, nranks, &digest, what, sizeof(what));
        ++done;
        failed_cases += fails > 0;
        if (NULL != df) {
            fprintf(df, "case %ld digest %016llx %s\n", k, (unsigned long long) digest, what);
            fflush(df);
        }
        if (0 == rank && now_sec() - last_report >= 10) {
            last_report = now_sec();
            printf("stress: %ld cases, %ld failed, %.0f s\n", done, failed_cases, last_report - start);
            fflush(stdout);
        }
    }
    if (NULL != df) {
        fclose(df);
    }
    long long sent = usnic_segments_sent(&pv);
    if (0 == rank) {
        printf("stress: seed %llu: %ld cases, %ld failed, %.1f s; usnic segments sent: %lld\n",
               (unsigned long long) o.seed, done, failed_cases, now_sec() - start, sent);
        printf("%s stress: %ld cases\n", failed_cases ? "FAIL" : "PASS", done);
        fflush(stdout);
    }
    usnic_pvars_close(&pv);
    MPI_Finalize();
    return failed_cases ? 1 : 0;
}
