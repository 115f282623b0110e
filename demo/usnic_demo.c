/*
 * usnic_demo: latency, bandwidth and transport counters between two MPI ranks.
 *
 * The program is transport-agnostic: which BTL carries the traffic is chosen
 * on the mpirun command line (see run-demo.sh).  It measures
 *
 *   - ping-pong latency (half a round trip, in microseconds) for small and
 *     medium messages, and
 *   - windowed bandwidth (MB/s, 1 MB = 10^6 bytes): the sender keeps a window
 *     of non-blocking sends in flight and the receiver acknowledges each
 *     window, so the link is never idle waiting for a single message,
 *
 * then reads the BTL's own counters (retransmissions, ACKs, ...) through the
 * MPI tool information interface (MPI_T) on both ranks and prints them from
 * rank 0.
 *
 * Usage: usnic_demo [--label NAME] [--csv FILE] [--quick] [--pvar-prefix P]
 */
#include <mpi.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

#define TAG_DATA 1
#define TAG_ACK 2
#define TAG_PVARS 3

#define KIB 1024
#define MIB (1024 * 1024)

static const size_t latency_sizes[] = {0, 8, 1 * KIB, 16 * KIB, 64 * KIB};

/* Small messages need a deep window to fill the pipe; big ones already do,
 * and a smaller window keeps the receive buffers (window * size) modest. */
typedef struct {
    size_t size;
    int window;
} bw_case_t;
static const bw_case_t bandwidth_cases[] = {
    {64 * KIB, 64},
    {1 * MIB, 16},
    {4 * MIB, 16},
};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Counters that are always listed, even when zero: a zero here is itself the
 * interesting result (e.g. "no retransmissions were needed"). */
static const char *always_shown_pvars[] = {
    "btl_usnic_num_total_sends",
    "btl_usnic_num_resends",
};

/* Iteration policy.  Each size gets a time budget; the number of timed
 * iterations is derived from how long the warm-up took, so a slow transport
 * (or a loaded machine) still finishes in a few seconds instead of running a
 * fixed count that was tuned for a fast one. */
typedef struct {
    int warmup;      /* untimed iterations before timing starts */
    int min_iters;   /* timed iterations, lower bound */
    int max_iters;   /* timed iterations, upper bound */
    double budget_s; /* target duration of the timed part */
} iter_policy_t;

static const iter_policy_t latency_policy = {100, 10, 20000, 0.10};
static const iter_policy_t bandwidth_policy = {2, 3, 2000, 0.25};
/* --quick: just enough traffic to prove the transport works. */
static const iter_policy_t quick_policy = {1, 2, 2, 0.0};

typedef struct {
    const char *label;       /* tag for output lines and CSV rows, or NULL */
    const char *csv_path;    /* CSV file to append to, or NULL */
    const char *pvar_prefix; /* which MPI_T pvars to report */
    int quick;
} options_t;

static int my_rank;
static const options_t *opts;

/* ------------------------------------------------------------------------ */
/* Output helpers                                                           */
/* ------------------------------------------------------------------------ */

/* Print one line from rank 0, tagged with the label so that the output of
 * several runs can be told apart when shown one after the other. */
static void say(const char *fmt, ...)
{
    va_list ap;

    if (my_rank != 0) {
        return;
    }
    if (opts->label != NULL) {
        /* no trailing blank on empty lines */
        printf("[%s]%s", opts->label, fmt[0] != '\0' ? " " : "");
    }
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* Errors are printed by whichever rank sees them, tagged with the rank. */
static void complain(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s%s%srank %d: ", opts->label ? "[" : "",
            opts->label ? opts->label : "", opts->label ? "] " : "", my_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

static void format_size(size_t bytes, char *out, size_t outlen)
{
    if (bytes >= MIB && bytes % MIB == 0) {
        snprintf(out, outlen, "%zu MiB", bytes / MIB);
    } else if (bytes >= KIB && bytes % KIB == 0) {
        snprintf(out, outlen, "%zu KiB", bytes / KIB);
    } else {
        snprintf(out, outlen, "%zu B", bytes);
    }
}

/* Append one result row; the file is opened per row so that a crash later in
 * the run still leaves the rows measured so far. */
static void csv_row(const char *kind, size_t size, double value)
{
    FILE *f;

    if (my_rank != 0 || opts->csv_path == NULL) {
        return;
    }
    f = fopen(opts->csv_path, "a");
    if (f == NULL) {
        complain("cannot open CSV file %s", opts->csv_path);
        return;
    }
    fprintf(f, "%s,%s,%zu,%.3f\n", opts->label ? opts->label : "", kind, size,
            value);
    fclose(f);
}

/* ------------------------------------------------------------------------ */
/* Payload patterns                                                         */
/* ------------------------------------------------------------------------ */

/* A position-dependent pattern: every 8-byte word differs from its
 * neighbours and from the same word of another message (seed), so a
 * reordered, shifted, duplicated or stale chunk is caught, not only a
 * corrupted byte. */
static uint64_t pattern_word(uint64_t seed, size_t word_index)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ULL + word_index + 1;

    /* splitmix64 finalizer: cheap, and flips about half the bits per step */
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x;
}

static void fill_pattern(unsigned char *buf, size_t len, uint64_t seed)
{
    size_t i;

    for (i = 0; i < len; i += sizeof(uint64_t)) {
        uint64_t w = pattern_word(seed, i / sizeof(uint64_t));
        size_t n = len - i < sizeof(w) ? len - i : sizeof(w);
        memcpy(buf + i, &w, n);
    }
}

/* Returns the offset of the first wrong byte, or -1 if the buffer is right. */
static long check_pattern(const unsigned char *buf, size_t len, uint64_t seed)
{
    size_t i, j;

    for (i = 0; i < len; i += sizeof(uint64_t)) {
        uint64_t w = pattern_word(seed, i / sizeof(uint64_t));
        size_t n = len - i < sizeof(w) ? len - i : sizeof(w);
        if (memcmp(buf + i, &w, n) != 0) {
            for (j = 0; j < n && buf[i + j] == ((unsigned char *)&w)[j]; j++) {
            }
            return (long)(i + j);
        }
    }
    return -1;
}

/* Distinct seeds per size, direction and window slot.  The first and the
 * last verified iteration also differ, so the last check cannot be passed
 * by data left over from the first. */
static uint64_t make_seed(size_t size, int direction, int slot, int last)
{
    return ((uint64_t)size << 20) ^ ((uint64_t)slot << 4) ^
           ((uint64_t)direction << 1) ^ (uint64_t)last;
}

/* Receive buffers are poisoned before a verified iteration, so a message
 * that never arrived cannot pass the check by leaving old bytes behind. */
static void poison(unsigned char *buf, size_t len)
{
    memset(buf, 0xA5, len);
}

static int verify(const char *what, const unsigned char *buf, size_t len,
                  uint64_t seed)
{
    long bad = check_pattern(buf, len, seed);

    if (bad >= 0) {
        complain("payload mismatch in %s (%zu bytes): first bad byte at "
                 "offset %ld",
                 what, len, bad);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Iteration count                                                          */
/* ------------------------------------------------------------------------ */

/* Rank 0 turns the measured warm-up time into a timed iteration count and
 * shares it, because both ranks must run exactly the same number of
 * iterations. */
static int choose_iters(const iter_policy_t *p, double warmup_seconds)
{
    int iters = p->min_iters;

    if (my_rank == 0 && p->warmup > 0 && warmup_seconds > 0.0) {
        double per_iter = warmup_seconds / p->warmup;
        double want = p->budget_s / per_iter;
        if (want > p->max_iters) {
            iters = p->max_iters;
        } else if (want > p->min_iters) {
            iters = (int)want;
        }
    }
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return iters;
}

/* ------------------------------------------------------------------------ */
/* Latency: ping-pong                                                       */
/* ------------------------------------------------------------------------ */

/* One round trip: rank 0 sends, rank 1 echoes. */
static void pingpong_once(unsigned char *sbuf, unsigned char *rbuf,
                          size_t size)
{
    int peer = 1 - my_rank;

    if (my_rank == 0) {
        MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
    }
}

/* A round trip whose payload is checked in both directions.  Each direction
 * carries its own pattern, so an echo of the wrong buffer is caught too. */
static int pingpong_verified(unsigned char *sbuf, unsigned char *rbuf,
                             size_t size, int last)
{
    int me = my_rank, peer = 1 - my_rank;

    fill_pattern(sbuf, size, make_seed(size, me, 0, last));
    poison(rbuf, size);
    pingpong_once(sbuf, rbuf, size);
    return verify(last ? "last ping-pong" : "first ping-pong", rbuf, size,
                  make_seed(size, peer, 0, last));
}

/* The timed part never touches the payload: filling and checking buffers
 * would be measured as transport latency.  Verification therefore happens
 * on an extra round trip before warm-up and after the timed loop, through
 * the same send/receive path. */
static int measure_latency(unsigned char *sbuf, unsigned char *rbuf,
                           size_t size, const iter_policy_t *p, double *usec)
{
    int i, iters, ok = 1;
    double t0, warm, elapsed;

    ok &= pingpong_verified(sbuf, rbuf, size, 0);

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < p->warmup; i++) {
        pingpong_once(sbuf, rbuf, size);
    }
    warm = MPI_Wtime() - t0;
    iters = choose_iters(p, warm);

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        pingpong_once(sbuf, rbuf, size);
    }
    elapsed = MPI_Wtime() - t0;

    ok &= pingpong_verified(sbuf, rbuf, size, 1);

    *usec = elapsed * 1e6 / (2.0 * iters);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Bandwidth: windowed streaming                                            */
/* ------------------------------------------------------------------------ */

/* One window: rank 0 posts `window` sends, rank 1 receives them into
 * separate slots and answers with a zero-byte ACK once all have landed.
 * The ACK keeps the sender from racing ahead of the receiver, so what is
 * measured is delivered data, not data queued in the sender. */
static void window_once(unsigned char *sbuf, unsigned char *rbuf,
                        size_t size, int window, MPI_Request *reqs)
{
    int k, peer = 1 - my_rank;

    if (my_rank == 0) {
        for (k = 0; k < window; k++) {
            MPI_Isend(sbuf + (size_t)k * size, (int)size, MPI_BYTE, peer,
                      TAG_DATA, MPI_COMM_WORLD, &reqs[k]);
        }
        MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else {
        for (k = 0; k < window; k++) {
            MPI_Irecv(rbuf + (size_t)k * size, (int)size, MPI_BYTE, peer,
                      TAG_DATA, MPI_COMM_WORLD, &reqs[k]);
        }
        MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
    }
}

/* A window whose every slot carries (and is checked for) its own pattern,
 * which also catches messages delivered into the wrong slot. */
static int window_verified(unsigned char *sbuf, unsigned char *rbuf,
                           size_t size, int window, MPI_Request *reqs,
                           int last)
{
    int k, ok = 1;

    for (k = 0; k < window; k++) {
        if (my_rank == 0) {
            fill_pattern(sbuf + (size_t)k * size, size,
                         make_seed(size, 0, k + 1, last));
        } else {
            poison(rbuf + (size_t)k * size, size);
        }
    }
    window_once(sbuf, rbuf, size, window, reqs);
    if (my_rank == 1) {
        for (k = 0; k < window && ok; k++) {
            char what[64];
            snprintf(what, sizeof(what), "%s bandwidth window, message %d",
                     last ? "last" : "first", k);
            ok = verify(what, rbuf + (size_t)k * size, size,
                        make_seed(size, 0, k + 1, last));
        }
    }
    return ok;
}

static int measure_bandwidth(unsigned char *sbuf, unsigned char *rbuf,
                             const bw_case_t *c, const iter_policy_t *p,
                             MPI_Request *reqs, double *mbps)
{
    int i, iters, ok = 1;
    double t0, warm, elapsed;

    ok &= window_verified(sbuf, rbuf, c->size, c->window, reqs, 0);

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < p->warmup; i++) {
        window_once(sbuf, rbuf, c->size, c->window, reqs);
    }
    warm = MPI_Wtime() - t0;
    iters = choose_iters(p, warm);

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        window_once(sbuf, rbuf, c->size, c->window, reqs);
    }
    elapsed = MPI_Wtime() - t0;

    ok &= window_verified(sbuf, rbuf, c->size, c->window, reqs, 1);

    *mbps = (double)c->size * c->window * iters / elapsed / 1e6;
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Both ranks must agree on success                                         */
/* ------------------------------------------------------------------------ */

/* A mismatch is detected by the receiving rank only; everyone must learn of
 * it so that the whole job exits non-zero. */
static int all_ok(int ok)
{
    int global = 0;

    MPI_Allreduce(&ok, &global, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return global;
}

static int run_latency(unsigned char *sbuf, unsigned char *rbuf)
{
    const iter_policy_t *p = opts->quick ? &quick_policy : &latency_policy;
    size_t i;
    int ok = 1;
    char sz[32];

    say("");
    say("Ping-pong latency (half round trip)");
    say("  %10s  %14s", "size", "latency (us)");
    say("  %10s  %14s", "----------", "--------------");
    for (i = 0; i < NELEMS(latency_sizes); i++) {
        double usec = 0.0;
        int size_ok = all_ok(measure_latency(sbuf, rbuf, latency_sizes[i], p,
                                             &usec));
        format_size(latency_sizes[i], sz, sizeof(sz));
        say("  %10s  %14.2f%s", sz, usec, size_ok ? "" : "   DATA MISMATCH");
        csv_row("latency_us", latency_sizes[i], usec);
        ok &= size_ok;
    }
    return ok;
}

static int run_bandwidth(unsigned char *sbuf, unsigned char *rbuf,
                         MPI_Request *reqs)
{
    const iter_policy_t *p = opts->quick ? &quick_policy : &bandwidth_policy;
    size_t i;
    int ok = 1;
    char sz[32];

    say("");
    say("Streaming bandwidth (window of non-blocking sends, then an ACK)");
    say("  %10s  %8s  %16s", "size", "window", "bandwidth (MB/s)");
    say("  %10s  %8s  %16s", "----------", "--------", "----------------");
    for (i = 0; i < NELEMS(bandwidth_cases); i++) {
        double mbps = 0.0;
        int size_ok = all_ok(measure_bandwidth(sbuf, rbuf, &bandwidth_cases[i],
                                               p, reqs, &mbps));
        format_size(bandwidth_cases[i].size, sz, sizeof(sz));
        say("  %10s  %8d  %16.1f%s", sz, bandwidth_cases[i].window, mbps,
            size_ok ? "" : "   DATA MISMATCH");
        csv_row("bandwidth_MBps", bandwidth_cases[i].size, mbps);
        ok &= size_ok;
    }
    return ok;
}

/* ------------------------------------------------------------------------ */
/* MPI_T performance variables                                              */
/* ------------------------------------------------------------------------ */

#define PVAR_NAME_MAX 128
#define PVAR_MAX 256

typedef struct {
    char name[PVAR_NAME_MAX];
    int index;            /* pvar index, stable for the life of the process */
    int var_class;        /* MPI_T_PVAR_CLASS_* */
    MPI_Datatype type;    /* element type of the pvar */
    MPI_T_pvar_handle handle;
    int count;            /* elements, e.g. one per BTL module */
    int have_handle;
    int is_real;          /* value is in `real`, else in `u` */
    unsigned long long u; /* value reduced over the elements */
    double real;
} pvar_t;

typedef struct {
    int initialized;      /* MPI_T_init_thread succeeded */
    MPI_T_pvar_session session;
    int have_session;
    int n;
    pvar_t vars[PVAR_MAX];
} pvar_set_t;

static void mpit_error(const char *call, int err)
{
    complain("MPI_T: %s failed (error %d); continuing without it", call, err);
}

/* Only integer and floating types are summed; anything else (e.g. a char
 * array pvar) cannot be shown as a single number and is skipped. */
static size_t pvar_elem_size(MPI_Datatype t)
{
    if (t == MPI_UNSIGNED_LONG_LONG) return sizeof(unsigned long long);
    if (t == MPI_UNSIGNED_LONG) return sizeof(unsigned long);
    if (t == MPI_UNSIGNED) return sizeof(unsigned);
    if (t == MPI_INT) return sizeof(int);
    if (t == MPI_LONG) return sizeof(long);
    if (t == MPI_LONG_LONG) return sizeof(long long);
    if (t == MPI_COUNT) return sizeof(MPI_Count);
    if (t == MPI_DOUBLE) return sizeof(double);
    return 0;
}

/* Signed values that are negative cannot be counters; they are clamped to
 * zero rather than wrapping to a huge unsigned number. */
static unsigned long long elem_as_ull(MPI_Datatype t, const void *buf, int i)
{
    long long s;

    if (t == MPI_UNSIGNED_LONG_LONG) return ((const unsigned long long *)buf)[i];
    if (t == MPI_UNSIGNED_LONG) return ((const unsigned long *)buf)[i];
    if (t == MPI_UNSIGNED) return ((const unsigned *)buf)[i];
    if (t == MPI_INT) s = ((const int *)buf)[i];
    else if (t == MPI_LONG) s = ((const long *)buf)[i];
    else if (t == MPI_LONG_LONG) s = ((const long long *)buf)[i];
    else s = (long long)((const MPI_Count *)buf)[i];
    return s < 0 ? 0 : (unsigned long long)s;
}

/* Reduce the per-element values (one per module) to one number.  Counters
 * add up across modules; a high or low watermark does not, so it keeps the
 * extreme instead. */
static void pvar_reduce(pvar_t *v, const void *buf)
{
    int i;

    v->is_real = (v->type == MPI_DOUBLE);
    v->u = 0;
    v->real = 0.0;
    for (i = 0; i < v->count; i++) {
        if (v->is_real) {
            double x = ((const double *)buf)[i];
            if (v->var_class == MPI_T_PVAR_CLASS_HIGHWATERMARK) {
                v->real = (i == 0 || x > v->real) ? x : v->real;
            } else if (v->var_class == MPI_T_PVAR_CLASS_LOWWATERMARK) {
                v->real = (i == 0 || x < v->real) ? x : v->real;
            } else {
                v->real += x;
            }
        } else {
            unsigned long long x = elem_as_ull(v->type, buf, i);
            if (v->var_class == MPI_T_PVAR_CLASS_HIGHWATERMARK) {
                v->u = (i == 0 || x > v->u) ? x : v->u;
            } else if (v->var_class == MPI_T_PVAR_CLASS_LOWWATERMARK) {
                v->u = (i == 0 || x < v->u) ? x : v->u;
            } else {
                v->u += x;
            }
        }
    }
}

/* Allocate a handle for one pvar.  BTL counters are bound to no object;
 * a pvar bound to a communicator is bound to MPI_COMM_WORLD, the only one
 * this program uses.  Other bindings need objects we do not have. */
static int pvar_bind(pvar_set_t *set, pvar_t *v, int bind, int continuous)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    void *obj = NULL;
    int err;

    if (bind == MPI_T_BIND_MPI_COMM) {
        obj = &comm;
    } else if (bind != MPI_T_BIND_NO_OBJECT) {
        complain("MPI_T: %s is bound to object kind %d; not shown", v->name,
                 bind);
        return 0;
    }
    err = MPI_T_pvar_handle_alloc(set->session, v->index, obj, &v->handle,
                                  &v->count);
    if (err != MPI_SUCCESS) {
        mpit_error("MPI_T_pvar_handle_alloc", err);
        return 0;
    }
    v->have_handle = 1;
    /* A non-continuous pvar counts only while started; starting it now,
     * before the measurements, makes it cover them. */
    if (!continuous) {
        err = MPI_T_pvar_start(set->session, v->handle);
        if (err != MPI_SUCCESS) {
            mpit_error("MPI_T_pvar_start", err);
        }
    }
    return 1;
}

/* Look at one pvar index and keep it if its name has our prefix. */
static void pvar_consider(pvar_set_t *set, int index)
{
    char name[PVAR_NAME_MAX], desc[256];
    int name_len = sizeof(name), desc_len = sizeof(desc);
    int verbosity, var_class, bind, readonly, continuous, atomic, err;
    MPI_Datatype type;
    MPI_T_enum enumtype;
    pvar_t *v;

    err = MPI_T_pvar_get_info(index, name, &name_len, &verbosity, &var_class,
                              &type, &enumtype, desc, &desc_len, &bind,
                              &readonly, &continuous, &atomic);
    if (err == MPI_T_ERR_INVALID_INDEX
#ifdef MPI_T_ERR_INVALID
        || err == MPI_T_ERR_INVALID
#endif
    ) {
        /* Open MPI keeps the indices of pvars whose component was closed
         * (e.g. a BTL that found no usable device) but reports them as
         * invalid (4.1: MPI_T_ERR_INVALID_INDEX, 5.0: MPI_T_ERR_INVALID):
         * skip silently. */
        return;
    }
    if (err != MPI_SUCCESS) {
        mpit_error("MPI_T_pvar_get_info", err);
        return;
    }
    if (strncmp(name, opts->pvar_prefix, strlen(opts->pvar_prefix)) != 0) {
        return;
    }
    if (pvar_elem_size(type) == 0) {
        complain("MPI_T: %s has a non-numeric type; not shown", name);
        return;
    }
    if (set->n >= PVAR_MAX) {
        complain("MPI_T: more than %d matching pvars; %s not shown", PVAR_MAX,
                 name);
        return;
    }
    v = &set->vars[set->n];
    memset(v, 0, sizeof(*v));
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->index = index;
    v->var_class = var_class;
    v->type = type;
    if (pvar_bind(set, v, bind, continuous)) {
        set->n++;
    }
}

/* Initialize MPI_T and bind every matching pvar.  Called right after
 * MPI_Init, for two reasons:
 *  - a BTL registers its pvars while MPI_Init opens it, so they do not
 *    exist before;
 *  - Open MPI reports a COUNTER through a handle as the increase since the
 *    handle was allocated (continuous pvars) or started (the others), not
 *    as the absolute value.  Binding after the measurements would read 0. */
static void pvars_setup(pvar_set_t *set)
{
    int provided, num, i, err;

    memset(set, 0, sizeof(*set));
    err = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (err != MPI_SUCCESS) {
        mpit_error("MPI_T_init_thread", err);
        return;
    }
    set->initialized = 1;

    err = MPI_T_pvar_session_create(&set->session);
    if (err != MPI_SUCCESS) {
        mpit_error("MPI_T_pvar_session_create", err);
        return;
    }
    set->have_session = 1;

    err = MPI_T_pvar_get_num(&num);
    if (err != MPI_SUCCESS) {
        mpit_error("MPI_T_pvar_get_num", err);
        return;
    }
    for (i = 0; i < num; i++) {
        pvar_consider(set, i);
    }
}

/* Read every bound pvar into its reduced value. */
static void pvars_read(pvar_set_t *set)
{
    int i, err;

    for (i = 0; i < set->n; i++) {
        pvar_t *v = &set->vars[i];
        void *buf;

        if (!v->have_handle || v->count <= 0) {
            continue;
        }
        buf = calloc((size_t)v->count, pvar_elem_size(v->type));
        if (buf == NULL) {
            complain("out of memory reading %s", v->name);
            continue;
        }
        err = MPI_T_pvar_read(set->session, v->handle, buf);
        if (err != MPI_SUCCESS) {
            mpit_error("MPI_T_pvar_read", err);
        } else {
            pvar_reduce(v, buf);
        }
        free(buf);
    }
}

static void pvars_teardown(pvar_set_t *set)
{
    int i;

    for (i = 0; i < set->n; i++) {
        if (set->vars[i].have_handle) {
            MPI_T_pvar_handle_free(set->session, &set->vars[i].handle);
        }
    }
    if (set->have_session) {
        MPI_T_pvar_session_free(&set->session);
    }
    if (set->initialized) {
        MPI_T_finalize();
    }
}

/* --- moving rank 1's values to rank 0 ----------------------------------- */

/* Rank 1's pvars are sent as text lines "name value", because the two
 * ranks need not have the same pvars at the same indices (a component may
 * fail to open on one node only).  Rank 0 matches them by name. */
static char *pvars_serialize(const pvar_set_t *set, int *len_out)
{
    size_t cap = (size_t)set->n * (PVAR_NAME_MAX + 32) + 1, used = 0;
    char *text = malloc(cap);
    int i;

    if (text == NULL) {
        *len_out = 0;
        return NULL;
    }
    text[0] = '\0';
    for (i = 0; i < set->n; i++) {
        const pvar_t *v = &set->vars[i];
        if (v->is_real) {
            used += (size_t)snprintf(text + used, cap - used, "%s r %.17g\n",
                                     v->name, v->real);
        } else {
            used += (size_t)snprintf(text + used, cap - used, "%s u %llu\n",
                                     v->name, v->u);
        }
    }
    *len_out = (int)used;
    return text;
}

static void pvars_send_to_root(const pvar_set_t *set)
{
    int len;
    char *text = pvars_serialize(set, &len);

    MPI_Send(&len, 1, MPI_INT, 0, TAG_PVARS, MPI_COMM_WORLD);
    MPI_Send(text, len, MPI_CHAR, 0, TAG_PVARS, MPI_COMM_WORLD);
    free(text);
}

/* Rank 1's values, parsed back into pvar_t records (name and value only). */
static void pvars_recv_from_peer(pvar_set_t *peer)
{
    int len;
    char *text, *line, *save = NULL;

    memset(peer, 0, sizeof(*peer));
    MPI_Recv(&len, 1, MPI_INT, 1, TAG_PVARS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    text = malloc((size_t)len + 1);
    if (text == NULL) {
        complain("out of memory receiving rank 1's counters");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Recv(text, len, MPI_CHAR, 1, TAG_PVARS, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    text[len] = '\0';

    for (line = strtok_r(text, "\n", &save); line && peer->n < PVAR_MAX;
         line = strtok_r(NULL, "\n", &save)) {
        pvar_t *v = &peer->vars[peer->n];
        char kind;
        char value[64];
        if (sscanf(line, "%127s %c %63s", v->name, &kind, value) != 3) {
            continue;
        }
        v->is_real = (kind == 'r');
        if (v->is_real) {
            v->real = strtod(value, NULL);
        } else {
            v->u = strtoull(value, NULL, 10);
        }
        peer->n++;
    }
    free(text);
}

/* --- printing ------------------------------------------------------------ */

static const pvar_t *pvar_find(const pvar_set_t *set, const char *name)
{
    int i;

    for (i = 0; i < set->n; i++) {
        if (strcmp(set->vars[i].name, name) == 0) {
            return &set->vars[i];
        }
    }
    return NULL;
}

static int pvar_nonzero(const pvar_t *v)
{
    return v != NULL && (v->is_real ? v->real != 0.0 : v->u != 0);
}

static void pvar_format(const pvar_t *v, char *out, size_t len)
{
    if (v == NULL) {
        snprintf(out, len, "-");
    } else if (v->is_real) {
        snprintf(out, len, "%.3f", v->real);
    } else {
        snprintf(out, len, "%llu", v->u);
    }
}

static int always_shown(const char *name)
{
    size_t i;

    for (i = 0; i < NELEMS(always_shown_pvars); i++) {
        if (strcmp(name, always_shown_pvars[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* One row per counter that either rank has, if it is nonzero on either
 * rank or is one of the always-shown ones. */
static void print_pvar_row(const char *name, const pvar_set_t *mine,
                           const pvar_set_t *peer)
{
    const pvar_t *a = pvar_find(mine, name), *b = pvar_find(peer, name);
    char va[32], vb[32];

    if (!pvar_nonzero(a) && !pvar_nonzero(b) && !always_shown(name)) {
        return;
    }
    pvar_format(a, va, sizeof(va));
    pvar_format(b, vb, sizeof(vb));
    say("  %-36s %16s %16s", name, va, vb);
}

static void print_pvars(const pvar_set_t *mine, const pvar_set_t *peer)
{
    int i, shown_zero = 0;

    say("");
    say("BTL counters: MPI_T performance variables %s*", opts->pvar_prefix);
    if (mine->n == 0 && peer->n == 0) {
        say("  none on either rank: this run does not use that BTL");
        say("");
        return;
    }
    say("  (counted from just after MPI_Init, summed over the BTL's modules)");
    say("  %-36s %16s %16s", "counter", "rank 0", "rank 1");
    say("  %-36s %16s %16s", "------------------------------------",
        "----------------", "----------------");
    for (i = 0; i < mine->n; i++) {
        print_pvar_row(mine->vars[i].name, mine, peer);
    }
    /* Counters only rank 1 has (rare: a component missing on rank 0). */
    for (i = 0; i < peer->n; i++) {
        if (pvar_find(mine, peer->vars[i].name) == NULL) {
            print_pvar_row(peer->vars[i].name, mine, peer);
        }
    }
    for (i = 0; i < mine->n; i++) {
        const pvar_t *b = pvar_find(peer, mine->vars[i].name);
        shown_zero += !pvar_nonzero(&mine->vars[i]) && !pvar_nonzero(b) &&
                      !always_shown(mine->vars[i].name);
    }
    if (shown_zero > 0) {
        say("  (%d more counters are zero on both ranks)", shown_zero);
    }
    say("");
}

static void report_pvars(pvar_set_t *mine)
{
    static pvar_set_t peer; /* large: keep it off the stack */

    pvars_read(mine);
    if (my_rank == 1) {
        pvars_send_to_root(mine);
    } else {
        pvars_recv_from_peer(&peer);
        print_pvars(mine, &peer);
    }
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--label NAME] [--csv FILE] [--quick] "
            "[--pvar-prefix PREFIX]\n"
            "  --label NAME        tag output lines and CSV rows with NAME\n"
            "  --csv FILE          append rows label,kind,size,value to FILE\n"
            "  --quick             a few iterations only (smoke test)\n"
            "  --pvar-prefix P     report MPI_T pvars starting with P "
            "(default btl_usnic_)\n",
            prog);
}

static int parse_args(int argc, char **argv, options_t *o)
{
    int i;

    o->label = NULL;
    o->csv_path = NULL;
    o->pvar_prefix = "btl_usnic_";
    o->quick = 0;
    for (i = 1; i < argc; i++) {
        int has_value = i + 1 < argc;
        if (strcmp(argv[i], "--label") == 0 && has_value) {
            o->label = argv[++i];
        } else if (strcmp(argv[i], "--csv") == 0 && has_value) {
            o->csv_path = argv[++i];
        } else if (strcmp(argv[i], "--pvar-prefix") == 0 && has_value) {
            o->pvar_prefix = argv[++i];
        } else if (strcmp(argv[i], "--quick") == 0) {
            o->quick = 1;
        } else {
            return 0;
        }
    }
    return 1;
}

static size_t max_window_bytes(void)
{
    size_t i, max = 0;

    for (i = 0; i < NELEMS(bandwidth_cases); i++) {
        size_t b = bandwidth_cases[i].size * (size_t)bandwidth_cases[i].window;
        max = b > max ? b : max;
    }
    for (i = 0; i < NELEMS(latency_sizes); i++) {
        max = latency_sizes[i] > max ? latency_sizes[i] : max;
    }
    return max;
}

static int max_window(void)
{
    size_t i;
    int max = 1;

    for (i = 0; i < NELEMS(bandwidth_cases); i++) {
        max = bandwidth_cases[i].window > max ? bandwidth_cases[i].window : max;
    }
    return max;
}

/* Prints the title with what is known about the run. */
static void print_header(void)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    char *nl;

    MPI_Get_library_version(version, &len);
    nl = strchr(version, '\n');
    if (nl != NULL) {
        *nl = '\0';
    }
    nl = strchr(version, ',');
    if (nl != NULL) {
        *nl = '\0';
    }
    say("usnic BTL demo: 2 ranks, %s%s", version,
        opts->quick ? " (quick mode)" : "");
}

int main(int argc, char **argv)
{
    static options_t options;
    static pvar_set_t pvars;
    unsigned char *sbuf, *rbuf;
    MPI_Request *reqs;
    size_t bytes;
    int nranks, ok = 1, alloc_ok;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    opts = &options;

    if (!parse_args(argc, argv, &options)) {
        if (my_rank == 0) {
            usage(argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    if (nranks != 2) {
        if (my_rank == 0) {
            fprintf(stderr, "usnic_demo needs exactly 2 ranks (got %d)\n",
                    nranks);
        }
        MPI_Finalize();
        return 2;
    }

    pvars_setup(&pvars);

    /* One slot per in-flight message: concurrent receives into the same
     * buffer would be erroneous MPI, and separate slots let the checks tell
     * which message went where. */
    bytes = max_window_bytes();
    sbuf = malloc(bytes);
    rbuf = malloc(bytes);
    reqs = malloc(sizeof(*reqs) * (size_t)max_window());
    alloc_ok = all_ok(sbuf != NULL && rbuf != NULL && reqs != NULL);
    if (!alloc_ok) {
        complain("cannot allocate %zu bytes of message buffers", 2 * bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Touch the pages now so that first-touch page faults are not timed. */
    memset(sbuf, 0, bytes);
    memset(rbuf, 0, bytes);

    print_header();
    ok &= run_latency(sbuf, rbuf);
    ok &= run_bandwidth(sbuf, rbuf, reqs);
    report_pvars(&pvars);

    if (!ok) {
        say("FAILED: received data did not match what was sent");
    }

    pvars_teardown(&pvars);
    free(reqs);
    free(rbuf);
    free(sbuf);
    MPI_Finalize();
    return ok ? 0 : 1;
}
