/*
 * path_stream.c - a verified one-way stream of large messages from rank 0
 * to rank 1 for a fixed time, with the wall-clock time of every message
 * that arrived and of every change of the usnic BTL's path MTU counters,
 * so that a script can change the path mid-run (test/hosts/
 * run-path-tests.sh, bench/pmtu-recovery.sh) and see afterwards when the
 * stream stalled, recovered and got its datagram size back.
 *
 *   path_stream [--size BYTES] [--window N] [--seconds S] [--ready FILE]
 *               [--times PREFIX]
 *
 * Rank 0 keeps --window (4) MPI_Isend of --size (1 MiB) bytes in flight
 * for --seconds (10) after a barrier, then sends an empty TAG_LAST and
 * window - 1 empty TAG_FILL messages (they match the receives rank 1 has
 * posted beyond the last one; non-overtaking keeps message k in receive
 * k).  Message i holds the 8-byte index i, then one of 8 precomputed
 * payloads (pattern_byte of mpitest.h, seed i % 8): rank 1 compares every
 * byte (a wrong, shifted, stale, reordered or lost message fails the job
 * with FAIL, through mpitest.h's fail()).
 *
 * --ready FILE: rank 1 writes the wall-clock time (CLOCK_REALTIME, s) at
 * which the timed stream starts into FILE (written aside and renamed, so
 * a reader never sees half of it).
 * --times PREFIX: at the end rank 1 writes PREFIX.r1 and rank 0 PREFIX.r0
 * (wall-clock times, s, 6 decimals; the namespaces share the clock):
 *   m INDEX TIME                 message INDEX verified (rank 1)
 *   e RANK COUNTER VALUE TIME    a usnic counter read through MPI_T
 *                                changed to VALUE (pmtu_lowered,
 *                                pmtu_raised, pmtu_blackholes,
 *                                pieces_sent, pieces_reassembled; summed
 *                                over the rank's modules; read every
 *                                2 ms at most, and once at the start)
 * Stdout: "PROGRESS t=T messages=N MBps=X" from rank 1 once a second,
 * "EVENT rank=R COUNTER=VALUE t=T" per counter change, and from rank 0
 * "PASS path_stream messages=N bytes=B seconds=S MBps=X" when rank 1
 * verified every message.
 */
#define _GNU_SOURCE
#define TEST_NAME "path_stream"
#include "../mpi/mpitest.h"
#include "../../bench/usnic_pvars.h"

#include <time.h>
#include <unistd.h>

#define TAG_DATA 1
#define TAG_LAST 2
#define TAG_FILL 3
#define NPAT 8
#define MAX_WINDOW 64

static const char *const counters[] = {
    "btl_usnic_num_pmtu_lowered",    "btl_usnic_num_pmtu_raised",        "btl_usnic_num_pmtu_blackholes",
    "btl_usnic_num_pieces_sent",     "btl_usnic_num_pieces_reassembled",
};
#define NCOUNTERS (sizeof(counters) / sizeof(counters[0]))

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the counters' changes, kept in memory and written at the end */
typedef struct {
    usnic_pvars_t pv;
    long long last[NCOUNTERS];
    double next_read;
    char *log;
    size_t len, cap;
} watch_t;

static void watch_add(watch_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void watch_add(watch_t *w, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (w->cap - w->len < 256) {
        w->cap = w->cap ? 2 * w->cap : 1 << 16;
        w->log = realloc(w->log, w->cap);
        if (w->log == NULL)
            fail("out of memory");
    }
    va_start(ap, fmt);
    n = vsnprintf(w->log + w->len, w->cap - w->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        w->len += (size_t) n;
}

static void watch(watch_t *w, int force)
{
    long long v[NCOUNTERS];
    double t = wall();
    size_t k;
    if (!force && t < w->next_read)
        return;
    w->next_read = t + 0.002;
    usnic_pvars_read(&w->pv, v);
    for (k = 0; k < NCOUNTERS; k++) {
        if (v[k] == w->last[k])
            continue;
        w->last[k] = v[k];
        watch_add(w, "e %d %s %lld %.6f\n", my_rank, counters[k] + strlen("btl_usnic_num_"), v[k], t);
        printf("EVENT rank=%d %s=%lld t=%.6f\n", my_rank, counters[k] + strlen("btl_usnic_num_"), v[k], t);
        fflush(stdout);
    }
}

static void write_file(const char *prefix, const char *suffix, const char *text, size_t len)
{
    char path[4096], tmp[4200];
    FILE *f;
    snprintf(path, sizeof(path), "%s%s", prefix, suffix);
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int) getpid());
    f = fopen(tmp, "w");
    if (f == NULL || fwrite(text, 1, len, f) != len || fclose(f) != 0 || rename(tmp, path) != 0)
        fail("cannot write %s", path);
}

int main(int argc, char **argv)
{
    size_t size = 1 << 20;
    int window = 4, i;
    double seconds = 10;
    const char *ready = NULL, *times = NULL;
    uint8_t *pat[NPAT], *buf[MAX_WINDOW];
    MPI_Request req[MAX_WINDOW];
    watch_t w;
    size_t k;

    mpitest_init(&argc, &argv);
    for (i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            fail("option %s needs a value", o);
        if (!strcmp(o, "--size"))
            size = strtoul(v, NULL, 10);
        else if (!strcmp(o, "--window"))
            window = atoi(v);
        else if (!strcmp(o, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(o, "--ready"))
            ready = v;
        else if (!strcmp(o, "--times"))
            times = v;
        else
            fail("unknown option %s", o);
        i++;
    }
    if (size < 16 || size > (1u << 30) || window < 1 || window > MAX_WINDOW || seconds <= 0)
        fail("bad --size, --window or --seconds");

    for (k = 0; k < NPAT; k++) {
        pat[k] = xmalloc(size);
        fill_pattern(pat[k], size, (uint32_t) (0x5eed0000u + k));
    }
    for (i = 0; i < window; i++)
        buf[i] = xmalloc(size);
    memset(&w, 0, sizeof(w));
    usnic_pvars_open(&w.pv, counters, NCOUNTERS);
    for (k = 0; k < NCOUNTERS; k++)
        w.last[k] = -2; /* the first read is always logged */

    if (my_rank == 0) {
        unsigned long long sent = 0;
        double t0, t;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        watch(&w, 1);
        t0 = wall();
        for (i = 0; i < window; i++)
            req[i] = MPI_REQUEST_NULL;
        /* slot i % window carries message i */
        for (unsigned long long m = 0;; m++) {
            int s = (int) (m % (unsigned long long) window), done = 0;
            while (req[s] != MPI_REQUEST_NULL && !done) {
                CHECK_MPI(MPI_Test(&req[s], &done, MPI_STATUS_IGNORE));
                watch(&w, 0);
            }
            t = wall();
            if (t - t0 >= seconds)
                break;
            memcpy(buf[s], pat[m % NPAT], size);
            memcpy(buf[s], &m, sizeof(m));
            CHECK_MPI(MPI_Isend(buf[s], (int) size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &req[s]));
            sent++;
        }
        CHECK_MPI(MPI_Waitall(window, req, MPI_STATUSES_IGNORE));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_LAST, MPI_COMM_WORLD));
        for (i = 1; i < window; i++)
            CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_FILL, MPI_COMM_WORLD));
        {
            unsigned long long verified = 0;
            CHECK_MPI(MPI_Recv(&verified, 1, MPI_UNSIGNED_LONG_LONG, 1, TAG_LAST, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            t = wall() - t0;
            watch(&w, 1);
            if (times != NULL)
                write_file(times, ".r0", w.log ? w.log : "", w.len);
            if (verified != sent)
                fail("rank 1 verified %llu messages, %llu were sent", verified, sent);
            printf("PASS path_stream messages=%llu bytes=%llu seconds=%.3f MBps=%.1f\n", verified,
                   verified * (unsigned long long) size, t, (double) verified * (double) size / t / 1e6);
        }
    } else if (my_rank == 1) {
        unsigned long long got = 0, at_last_print = 0;
        double t0, t, last_print;
        int ended = 0, fills = 0, s = 0;
        char *mlog = NULL;
        size_t mlen = 0, mcap = 0;
        for (i = 0; i < window; i++)
            CHECK_MPI(MPI_Irecv(buf[i], (int) size, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &req[i]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        watch(&w, 1);
        t0 = last_print = wall();
        if (ready != NULL) {
            char line[64];
            int n = snprintf(line, sizeof(line), "%.6f\n", t0);
            write_file(ready, "", line, (size_t) n);
        }
        while (!ended || fills < window - 1) {
            MPI_Status st;
            int done = 0, count = 0;
            while (!done) {
                CHECK_MPI(MPI_Test(&req[s], &done, &st));
                watch(&w, 0);
            }
            t = wall();
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            if (st.MPI_TAG == TAG_DATA) {
                unsigned long long idx;
                size_t first = 0;
                if (ended)
                    fail("a data message after the last one");
                if ((size_t) count != size)
                    fail("message %llu: %d bytes, want %zu", got, count, size);
                memcpy(&idx, buf[s], sizeof(idx));
                if (idx != got)
                    fail("message %llu arrived in place of message %llu", idx, got);
                if (memcmp(buf[s] + sizeof(idx), pat[got % NPAT] + sizeof(idx), size - sizeof(idx)) != 0) {
                    count_bad(buf[s], sizeof(idx), size, (uint32_t) (0x5eed0000u + got % NPAT), &first);
                    fail("message %llu: payload differs from byte %zu on", got, first);
                }
                if (mcap - mlen < 64) {
                    mcap = mcap ? 2 * mcap : 1 << 20;
                    mlog = realloc(mlog, mcap);
                    if (mlog == NULL)
                        fail("out of memory");
                }
                mlen += (size_t) snprintf(mlog + mlen, mcap - mlen, "m %llu %.6f\n", got, t);
                got++;
                CHECK_MPI(MPI_Irecv(buf[s], (int) size, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &req[s]));
            } else if (st.MPI_TAG == TAG_LAST) {
                ended = 1;
            } else if (st.MPI_TAG == TAG_FILL) {
                if (!ended)
                    fail("a fill message before the last one");
                fills++;
            } else {
                fail("unexpected tag %d", st.MPI_TAG);
            }
            s = (s + 1) % window;
            if (t - last_print >= 1.0) {
                printf("PROGRESS t=%.3f messages=%llu MBps=%.1f\n", t - t0, got,
                       (double) (got - at_last_print) * (double) size / (t - last_print) / 1e6);
                fflush(stdout);
                last_print = t;
                at_last_print = got;
            }
        }
        watch(&w, 1);
        if (times != NULL) {
            mlog = realloc(mlog, mlen + w.len + 1);
            if (mlog == NULL)
                fail("out of memory");
            if (w.len)
                memcpy(mlog + mlen, w.log, w.len);
            write_file(times, ".r1", mlog, mlen + w.len);
        }
        CHECK_MPI(MPI_Send(&got, 1, MPI_UNSIGNED_LONG_LONG, 0, TAG_LAST, MPI_COMM_WORLD));
    } else {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    usnic_pvars_close(&w.pv);
    MPI_Finalize();
    return 0;
}
