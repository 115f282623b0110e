/*
 * goodput: verified one-way goodput of large messages between two MPI ranks.
 *
 * Rank 0 streams messages of --size bytes (default 1 MiB) to rank 1 with
 * --window non-blocking sends in flight (default 4) for --duration seconds
 * (default 3), after an untimed warm-up stream of --warmup seconds (default
 * 0.5).  Every message carries a pattern derived from its index in the
 * stream; rank 1 checks every byte of every message, then reports how many
 * messages it verified.  Goodput = verified bytes / time, where the time
 * runs on rank 0 from the start of the measured stream until rank 1's
 * report arrives, so nothing still in flight is counted.
 *
 * The stream has no length known in advance.  Rank 1 keeps --window
 * receives posted with MPI_ANY_TAG; rank 0 sends the last data message with
 * TAG_LAST and then window-1 empty TAG_FILL messages, which match exactly
 * the receives rank 1 had already posted beyond the last one.  MPI's
 * non-overtaking rule keeps the k-th message in the k-th receive.
 *
 * When the usnic BTL is in use, its MPI_T counters btl_usnic_num_resends
 * (and friends) are read on both ranks just before and after the measured
 * stream; the differences are summed over the ranks and printed.
 *
 * Output: one line starting with "GOODPUT " with key=value pairs, printed
 * by rank 0.  MB/s uses 1 MB = 10^6 bytes.  Exit status 0 only if every
 * message was verified.
 *
 * Usage: goodput [--size BYTES] [--window N] [--duration S] [--warmup S]
 *                [--label NAME]
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usnic_pvars.h"

#define TAG_DATA 1
#define TAG_LAST 2
#define TAG_FILL 3
#define TAG_REPORT 4

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

typedef struct {
    size_t size;
    int window;
    double duration;
    double warmup;
    const char *label;
} options_t;

/* What rank 1 found in one stream. */
typedef struct {
    unsigned long long verified; /* data messages whose payload matched */
    unsigned long long bad;      /* data messages with a wrong size or payload */
    unsigned long long fills;    /* empty filler messages (expected: window-1) */
} stream_result_t;

/* ------------------------------------------------------------------------ */
/* Payload pattern                                                          */
/* ------------------------------------------------------------------------ */

/* A 64-bit mix (splitmix64 finalizer) so that neighbouring words and
 * neighbouring message indices differ in many bits. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

/* Word w of message `index`: base[w] xor a per-message key.  base[] is
 * computed once, so filling and checking cost one xor per word. */
static uint64_t message_key(uint64_t stream, uint64_t index)
{
    return mix64((stream << 48) ^ (index + 1));
}

static void pattern_fill(unsigned char *buf, const uint64_t *base, size_t size,
                         uint64_t key)
{
    size_t words = size / 8, i;
    uint64_t w;

    for (i = 0; i < words; i++) {
        w = base[i] ^ key;
        memcpy(buf + 8 * i, &w, 8);
    }
    for (i = words * 8; i < size; i++) {
        buf[i] = (unsigned char)(key >> (8 * (i % 8)));
    }
}

static int pattern_check(const unsigned char *buf, const uint64_t *base,
                         size_t size, uint64_t key)
{
    size_t words = size / 8, i;
    uint64_t w;

    for (i = 0; i < words; i++) {
        memcpy(&w, buf + 8 * i, 8);
        if (w != (base[i] ^ key)) {
            return 0;
        }
    }
    for (i = words * 8; i < size; i++) {
        if (buf[i] != (unsigned char)(key >> (8 * (i % 8)))) {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* usnic BTL counters through MPI_T                                         */
/* ------------------------------------------------------------------------ */

static const char *const counter_names[] = {
    "btl_usnic_num_resends",
    "btl_usnic_num_timeout_retrans",
    "btl_usnic_num_fast_retrans",
    "btl_usnic_num_total_sends",
};
#define NCOUNTERS NELEMS(counter_names) /* at most USNIC_PVARS_MAX */

/* ------------------------------------------------------------------------ */
/* The stream                                                               */
/* ------------------------------------------------------------------------ */

/* Rank 0: send for `seconds`, then the end-of-stream messages; returns the
 * number of data messages sent. */
static unsigned long long stream_send(const options_t *o, uint64_t stream,
                                      unsigned char **bufs,
                                      MPI_Request *reqs, const uint64_t *base,
                                      double seconds)
{
    unsigned long long next = 0;
    double start = MPI_Wtime();
    int slot, last = 0, i;

    for (i = 0; i < o->window; i++) {
        reqs[i] = MPI_REQUEST_NULL;
    }
    /* Slots are reused round-robin: waiting for the oldest send before
     * refilling its buffer keeps `window` sends in flight. */
    while (!last) {
        slot = (int)(next % (unsigned long long)o->window);
        MPI_Wait(&reqs[slot], MPI_STATUS_IGNORE);
        last = MPI_Wtime() - start >= seconds;
        pattern_fill(bufs[slot], base, o->size, message_key(stream, next));
        MPI_Isend(bufs[slot], (int)o->size, MPI_BYTE, 1,
                  last ? TAG_LAST : TAG_DATA, MPI_COMM_WORLD, &reqs[slot]);
        next++;
    }
    MPI_Waitall(o->window, reqs, MPI_STATUSES_IGNORE);
    for (i = 0; i < o->window - 1; i++) {
        MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_FILL, MPI_COMM_WORLD);
    }
    return next;
}

/* Rank 1: receive and check until the last message and its fillers. */
static stream_result_t stream_recv(const options_t *o, uint64_t stream,
                                   unsigned char **bufs, MPI_Request *reqs,
                                   const uint64_t *base)
{
    stream_result_t r = {0, 0, 0};
    unsigned long long k, end = ~0ULL; /* index of the last receive to post */
    int i;

    for (i = 0; i < o->window; i++) {
        MPI_Irecv(bufs[i], (int)o->size, MPI_BYTE, 0, MPI_ANY_TAG,
                  MPI_COMM_WORLD, &reqs[i]);
    }
    for (k = 0; k <= end; k++) {
        int slot = (int)(k % (unsigned long long)o->window), count;
        MPI_Status st;

        MPI_Wait(&reqs[slot], &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (st.MPI_TAG == TAG_FILL) {
            r.fills++;
        } else if ((size_t)count == o->size &&
                   pattern_check(bufs[slot], base, o->size,
                                 message_key(stream, k))) {
            r.verified++;
        } else {
            r.bad++;
            if (r.bad <= 3) {
                fprintf(stderr, "goodput: rank 1: message %llu of stream %llu "
                        "is wrong (tag %d, %d bytes)\n", k,
                        (unsigned long long)stream, st.MPI_TAG, count);
            }
        }
        if (st.MPI_TAG == TAG_LAST) {
            /* Receives k+1 .. k+window-1 are posted; fillers match them. */
            end = k + (unsigned long long)o->window - 1;
        }
        if (k + (unsigned long long)o->window <= end) {
            MPI_Irecv(bufs[slot], (int)o->size, MPI_BYTE, 0, MPI_ANY_TAG,
                      MPI_COMM_WORLD, &reqs[slot]);
        }
    }
    return r;
}

/* One stream; rank 0 gets rank 1's result and the elapsed time. */
static stream_result_t run_stream(const options_t *o, int rank, uint64_t stream,
                                  unsigned char **bufs, MPI_Request *reqs,
                                  const uint64_t *base, double seconds,
                                  unsigned long long *sent, double *elapsed)
{
    unsigned long long report[3];
    stream_result_t r = {0, 0, 0};
    double t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (rank == 0) {
        *sent = stream_send(o, stream, bufs, reqs, base, seconds);
        MPI_Recv(report, 3, MPI_UNSIGNED_LONG_LONG, 1, TAG_REPORT,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        *elapsed = MPI_Wtime() - t0;
        r.verified = report[0];
        r.bad = report[1];
        r.fills = report[2];
    } else {
        r = stream_recv(o, stream, bufs, reqs, base);
        report[0] = r.verified;
        report[1] = r.bad;
        report[2] = r.fills;
        MPI_Send(report, 3, MPI_UNSIGNED_LONG_LONG, 0, TAG_REPORT,
                 MPI_COMM_WORLD);
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

static int parse_args(int argc, char **argv, options_t *o)
{
    int i;

    o->size = 1 << 20;
    o->window = 4;
    o->duration = 3.0;
    o->warmup = 0.5;
    o->label = "goodput";
    for (i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;

        if (v == NULL) {
            return 0;
        }
        if (strcmp(argv[i], "--size") == 0) {
            unsigned long long s = strtoull(v, &end, 10);
            if (*end != '\0' || s < 8 || s > (1ULL << 30)) {
                return 0;
            }
            o->size = (size_t)s;
        } else if (strcmp(argv[i], "--window") == 0) {
            long w = strtol(v, &end, 10);
            if (*end != '\0' || w < 1 || w > 64) {
                return 0;
            }
            o->window = (int)w;
        } else if (strcmp(argv[i], "--duration") == 0) {
            o->duration = strtod(v, &end);
            if (*end != '\0' || !(o->duration > 0.0 && o->duration <= 3600.0)) {
                return 0;
            }
        } else if (strcmp(argv[i], "--warmup") == 0) {
            o->warmup = strtod(v, &end);
            if (*end != '\0' || !(o->warmup >= 0.0 && o->warmup <= 3600.0)) {
                return 0;
            }
        } else if (strcmp(argv[i], "--label") == 0) {
            o->label = v;
        } else {
            return 0;
        }
        i++;
    }
    return 1;
}

int main(int argc, char **argv)
{
    static usnic_pvars_t counters;
    options_t o;
    unsigned char **bufs;
    MPI_Request *reqs;
    uint64_t *base;
    long long before[NCOUNTERS], after[NCOUNTERS], delta[NCOUNTERS],
        total[NCOUNTERS];
    unsigned long long sent = 0, warm_sent = 0;
    double elapsed = 0.0, warm_elapsed = 0.0;
    stream_result_t warm, r;
    int rank, nranks, i, ok, alloc_ok, local_ok;
    size_t k, words;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!parse_args(argc, argv, &o) || nranks != 2) {
        if (rank == 0) {
            fprintf(stderr,
                    "usage: mpirun -np 2 %s [--size BYTES] [--window N] "
                    "[--duration S] [--warmup S] [--label NAME]\n",
                    argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    usnic_pvars_open(&counters, counter_names, NCOUNTERS);

    words = o.size / 8 + 1;
    base = malloc(words * sizeof(*base));
    bufs = calloc((size_t)o.window, sizeof(*bufs));
    reqs = calloc((size_t)o.window, sizeof(*reqs));
    local_ok = base != NULL && bufs != NULL && reqs != NULL;
    for (i = 0; local_ok && i < o.window; i++) {
        bufs[i] = malloc(o.size);
        local_ok = bufs[i] != NULL;
        if (local_ok) {
            memset(bufs[i], 0, o.size); /* no page faults while timing */
        }
    }
    MPI_Allreduce(&local_ok, &alloc_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!alloc_ok) {
        fprintf(stderr, "goodput: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (k = 0; k < words; k++) {
        base[k] = mix64(UINT64_C(0x9e3779b97f4a7c15) * (k + 1));
    }

    /* Stream 1 warms up connections, free lists and round-trip estimates;
     * stream 2 is measured. */
    warm = run_stream(&o, rank, 1, bufs, reqs, base, o.warmup, &warm_sent,
                      &warm_elapsed);
    usnic_pvars_read(&counters, before);
    r = run_stream(&o, rank, 2, bufs, reqs, base, o.duration, &sent, &elapsed);
    usnic_pvars_read(&counters, after);

    for (k = 0; k < NCOUNTERS; k++) {
        delta[k] = (before[k] < 0 || after[k] < 0) ? -1 : after[k] - before[k];
    }
    /* Sum over the ranks; absent on either rank = absent. */
    {
        long long mn[NCOUNTERS];
        MPI_Allreduce(delta, total, (int)NCOUNTERS, MPI_LONG_LONG, MPI_SUM,
                      MPI_COMM_WORLD);
        MPI_Allreduce(delta, mn, (int)NCOUNTERS, MPI_LONG_LONG, MPI_MIN,
                      MPI_COMM_WORLD);
        for (k = 0; k < NCOUNTERS; k++) {
            if (mn[k] < 0) {
                total[k] = -1;
            }
        }
    }

    ok = 1;
    if (rank == 0) {
        unsigned long long want_fills = (unsigned long long)(o.window - 1);
        ok = warm.bad == 0 && warm.verified == warm_sent &&
             warm.fills == want_fills && r.bad == 0 && r.verified == sent &&
             r.fills == want_fills && sent > 0;
        printf("GOODPUT label=%s size=%zu window=%d msgs_sent=%llu "
               "msgs_verified=%llu msgs_bad=%llu seconds=%.3f MBps=%.1f "
               "warmup_msgs=%llu",
               o.label, o.size, o.window, sent, r.verified, r.bad, elapsed,
               elapsed > 0 ? (double)r.verified * (double)o.size / elapsed / 1e6
                           : 0.0,
               warm.verified);
        for (k = 0; k < NCOUNTERS; k++) {
            const char *n = counter_names[k] + strlen("btl_usnic_");
            if (total[k] < 0) {
                printf(" %s=-", n);
            } else {
                printf(" %s=%lld", n, total[k]);
            }
        }
        printf(" status=%s\n", ok ? "ok" : "FAILED");
        fflush(stdout);
        if (!ok) {
            fprintf(stderr, "goodput: verification failed: sent %llu, verified "
                    "%llu, bad %llu, fillers %llu (warm-up: sent %llu, verified "
                    "%llu, bad %llu)\n", sent, r.verified, r.bad, r.fills,
                    warm_sent, warm.verified, warm.bad);
        }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);

    usnic_pvars_close(&counters);
    for (i = 0; i < o.window; i++) {
        free(bufs[i]);
    }
    free(bufs);
    free(reqs);
    free(base);
    MPI_Finalize();
    return ok ? 0 : 1;
}
