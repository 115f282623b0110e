/*
 * cc_flows.c - flows across a bottleneck for the congestion tests
 * (test/hosts/run-congestion-tests.sh, bench/congestion.sh; issue 26):
 * verified 1 MiB streams from one or more senders to one receiver, and
 * optionally an 8-byte ping-pong between two other ranks at the same time.
 *
 *   cc_flows --receiver R --senders S1[,S2...] [--pingpong A,B]
 *            [--seconds T] [--size BYTES] [--window N]
 *
 * After a barrier every sender keeps --window (4) MPI_Isend of --size
 * (1 MiB) bytes in flight toward the receiver for --seconds (5), then
 * sends an empty TAG_LAST and window - 1 empty TAG_FILL messages.
 * Message i of sender s holds the 8-byte index i and the 4-byte rank s,
 * then one of 8 precomputed payloads (seed i % 8): the receiver compares
 * every byte (a wrong, shifted, reordered, lost or foreign message fails
 * the job through mpitest.h's fail()).  The receiver keeps --window
 * receives posted per sender and polls each sender's oldest one in turn,
 * so every sender is served alike.
 *
 * Goodput: the bytes the receiver verified from each sender until T
 * seconds after the barrier (while every sender still sends), divided by
 * T; the aggregate is their sum, and Jain's fairness index is
 * (sum x)^2 / (n * sum x^2) over the per-sender goodputs (1 = equal
 * shares, 1/n = one sender got everything).
 *
 * --pingpong A,B: rank A sends 8 bytes to B and waits for B's 8 bytes
 * back, for the same T seconds; each round trip is timed (CLOCK_MONOTONIC)
 * and A reports its p50, p99 and max in microseconds.
 *
 * Counters: every rank reads the usnic BTL's num_total_sends (segments
 * posted: first transmissions and retransmissions, not ACKs) and
 * num_resends through MPI_T (bench/usnic_pvars.h) before and after the
 * timed part; the differences are summed over the ranks.  Absent (another
 * BTL): "-".
 *
 * Stdout (rank 0 prints the summary lines once every check passed):
 *   FLOW sender=S bytes=B MBps=X        one per sender (MB = 10^6 B)
 *   AGG senders=N MBps=X jain=J seconds=T
 *   WINDOW start=W seconds=T    rank 0's wall clock (CLOCK_REALTIME, s;
 *                               the namespaces share it) when the timed
 *                               part began (to line up a TCP flow's
 *                               intervals with it)
 *   PINGPONG rounds=N p50_us=X p99_us=Y max_us=Z
 *   USNIC sends=N resends=M resent_pct=P      (or "-" for each)
 *   PASS cc_flows messages=N bytes=B
 */
#define _GNU_SOURCE
#define TEST_NAME "cc_flows"
#include "../mpi/mpitest.h"
#include "../../bench/usnic_pvars.h"

#include <time.h>
#include <unistd.h>

#define TAG_DATA 1
#define TAG_LAST 2
#define TAG_FILL 3
#define TAG_PING 4
#define TAG_STOP 5
#define NPAT 8
#define MAX_WINDOW 64
#define MAX_SENDERS 16
#define HDR 12 /* index (8) + sender rank (4) */

static const char *const counters[] = {"btl_usnic_num_total_sends", "btl_usnic_num_resends"};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    char *end;
    while (*s) {
        if (n == max)
            fail("too many ranks in '%s'", s);
        out[n++] = (int) strtol(s, &end, 10);
        if (end == s)
            fail("bad rank list '%s'", s);
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t size = 1 << 20, k;
    int window = 4, i, nprocs, receiver = -1, senders[MAX_SENDERS], nsend = 0, pp[2] = {-1, -1}, npp = 0;
    int my_sender = -1;
    double seconds = 5, start_wall;
    uint8_t *pat[NPAT];
    usnic_pvars_t pv;
    long long c0[2], c1[2], mine[2], sum[2];
    /* results that travel to rank 0 */
    double flow_mbps[MAX_SENDERS], pp_res[4] = {0, 0, 0, 0}; /* rounds, p50, p99, max */
    unsigned long long flow_bytes[MAX_SENDERS], verified_msgs = 0;

    nprocs = mpitest_init(&argc, &argv);
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
        else if (!strcmp(o, "--receiver"))
            receiver = atoi(v);
        else if (!strcmp(o, "--senders"))
            nsend = parse_list(v, senders, MAX_SENDERS);
        else if (!strcmp(o, "--pingpong"))
            npp = parse_list(v, pp, 2);
        else
            fail("unknown option %s", o);
        i++;
    }
    if (size < 64 || size > (1u << 30) || window < 1 || window > MAX_WINDOW || seconds <= 0)
        fail("bad --size, --window or --seconds");
    if (receiver < 0 || receiver >= nprocs || nsend < 1 || (npp != 0 && npp != 2))
        fail("need --receiver R and --senders S1,...; --pingpong A,B");
    for (i = 0; i < nsend; i++) {
        if (senders[i] < 0 || senders[i] >= nprocs || senders[i] == receiver)
            fail("bad sender rank %d", senders[i]);
        if (senders[i] == my_rank)
            my_sender = i;
    }
    for (i = 0; i < npp; i++)
        if (pp[i] < 0 || pp[i] >= nprocs || pp[i] == receiver || pp[0] == pp[1])
            fail("bad ping-pong rank %d", pp[i]);
    for (i = 0; i < nsend; i++)
        if (npp && (senders[i] == pp[0] || senders[i] == pp[1]))
            fail("rank %d both streams and ping-pongs", senders[i]);

    for (k = 0; k < NPAT; k++) {
        pat[k] = xmalloc(size);
        fill_pattern(pat[k], size, (uint32_t) (0xcc000000u + k));
    }
    memset(flow_mbps, 0, sizeof(flow_mbps));
    memset(flow_bytes, 0, sizeof(flow_bytes));
    usnic_pvars_open(&pv, counters, 2);
    usnic_pvars_read(&pv, c0);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        start_wall = (double) ts.tv_sec + ts.tv_nsec * 1e-9;
    }

    if (my_sender >= 0) {
        uint8_t *buf[MAX_WINDOW];
        MPI_Request req[MAX_WINDOW];
        unsigned long long sent = 0, verified = 0;
        double t0 = now();
        int me = my_rank;
        for (i = 0; i < window; i++) {
            buf[i] = xmalloc(size);
            req[i] = MPI_REQUEST_NULL;
        }
        for (unsigned long long m = 0;; m++) {
            int s = (int) (m % (unsigned long long) window);
            if (req[s] != MPI_REQUEST_NULL)
                CHECK_MPI(MPI_Wait(&req[s], MPI_STATUS_IGNORE));
            if (now() - t0 >= seconds)
                break;
            memcpy(buf[s], pat[m % NPAT], size);
            memcpy(buf[s], &m, 8);
            memcpy(buf[s] + 8, &me, 4);
            CHECK_MPI(MPI_Isend(buf[s], (int) size, MPI_BYTE, receiver, TAG_DATA, MPI_COMM_WORLD, &req[s]));
            sent++;
        }
        CHECK_MPI(MPI_Waitall(window, req, MPI_STATUSES_IGNORE));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, receiver, TAG_LAST, MPI_COMM_WORLD));
        for (i = 1; i < window; i++)
            CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, receiver, TAG_FILL, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(&verified, 1, MPI_UNSIGNED_LONG_LONG, receiver, TAG_LAST, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        if (verified != sent)
            fail("the receiver verified %llu of my %llu messages", verified, sent);
    } else if (my_rank == receiver) {
        uint8_t *buf[MAX_SENDERS][MAX_WINDOW];
        MPI_Request req[MAX_SENDERS][MAX_WINDOW];
        unsigned long long got[MAX_SENDERS], in_time[MAX_SENDERS];
        int head[MAX_SENDERS], ended[MAX_SENDERS], fills[MAX_SENDERS], open = nsend, f;
        double t0;
        for (f = 0; f < nsend; f++) {
            got[f] = in_time[f] = 0;
            head[f] = ended[f] = fills[f] = 0;
            for (i = 0; i < window; i++) {
                buf[f][i] = xmalloc(size);
                CHECK_MPI(MPI_Irecv(buf[f][i], (int) size, MPI_BYTE, senders[f], MPI_ANY_TAG, MPI_COMM_WORLD,
                                    &req[f][i]));
            }
        }
        t0 = now();
        while (open > 0) {
            for (f = 0; f < nsend; f++) {
                MPI_Status st;
                int done = 0, count = 0, s = head[f];
                if (ended[f] && fills[f] == window - 1)
                    continue;
                CHECK_MPI(MPI_Test(&req[f][s], &done, &st));
                if (!done)
                    continue;
                CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
                if (st.MPI_TAG == TAG_DATA) {
                    unsigned long long idx;
                    int who;
                    size_t first = 0;
                    if (ended[f])
                        fail("sender %d: a data message after the last one", senders[f]);
                    if ((size_t) count != size)
                        fail("sender %d message %llu: %d bytes, want %zu", senders[f], got[f], count, size);
                    memcpy(&idx, buf[f][s], 8);
                    memcpy(&who, buf[f][s] + 8, 4);
                    if (who != senders[f] || idx != got[f])
                        fail("sender %d: message %llu of rank %d arrived in place of message %llu", senders[f],
                             idx, who, got[f]);
                    if (memcmp(buf[f][s] + HDR, pat[idx % NPAT] + HDR, size - HDR) != 0) {
                        count_bad(buf[f][s], HDR, size, (uint32_t) (0xcc000000u + idx % NPAT), &first);
                        fail("sender %d message %llu: payload differs from byte %zu on", senders[f], idx, first);
                    }
                    got[f]++;
                    if (now() - t0 <= seconds)
                        in_time[f]++;
                    CHECK_MPI(MPI_Irecv(buf[f][s], (int) size, MPI_BYTE, senders[f], MPI_ANY_TAG,
                                        MPI_COMM_WORLD, &req[f][s]));
                } else if (st.MPI_TAG == TAG_LAST) {
                    ended[f] = 1;
                } else if (st.MPI_TAG == TAG_FILL) {
                    if (!ended[f])
                        fail("sender %d: a fill message before the last one", senders[f]);
                    fills[f]++;
                } else {
                    fail("unexpected tag %d", st.MPI_TAG);
                }
                head[f] = (s + 1) % window;
                if (ended[f] && fills[f] == window - 1) {
                    open--;
                    CHECK_MPI(MPI_Send(&got[f], 1, MPI_UNSIGNED_LONG_LONG, senders[f], TAG_LAST, MPI_COMM_WORLD));
                }
            }
        }
        for (f = 0; f < nsend; f++) {
            flow_bytes[f] = in_time[f] * (unsigned long long) size;
            flow_mbps[f] = (double) flow_bytes[f] / seconds / 1e6;
            verified_msgs += got[f];
        }
    } else if (npp == 2 && my_rank == pp[0]) {
        size_t cap = 1 << 20, n = 0;
        double *rtt = xmalloc(cap * sizeof(double)), t0 = now(), t;
        char msg[8] = "ping-cc", back[8];
        for (;;) {
            t = now();
            if (t - t0 >= seconds)
                break;
            CHECK_MPI(MPI_Send(msg, 8, MPI_BYTE, pp[1], TAG_PING, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(back, 8, MPI_BYTE, pp[1], TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            if (memcmp(back, "pong-cc", 8) != 0)
                fail("ping-pong: wrong reply");
            if (n < cap)
                rtt[n++] = (now() - t) * 1e6;
        }
        CHECK_MPI(MPI_Send(msg, 0, MPI_BYTE, pp[1], TAG_STOP, MPI_COMM_WORLD));
        if (n == 0)
            fail("ping-pong: no round trip in %.1f s", seconds);
        qsort(rtt, n, sizeof(double), cmp_double);
        pp_res[0] = (double) n;
        pp_res[1] = rtt[n / 2];
        pp_res[2] = rtt[(size_t) ((double) (n - 1) * 0.99)];
        pp_res[3] = rtt[n - 1];
        free(rtt);
    } else if (npp == 2 && my_rank == pp[1]) {
        char in[8], reply[8] = "pong-cc";
        for (;;) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(in, 8, MPI_BYTE, pp[0], MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            if (st.MPI_TAG == TAG_STOP)
                break;
            CHECK_MPI(MPI_Send(reply, 8, MPI_BYTE, pp[0], TAG_PING, MPI_COMM_WORLD));
        }
    }

    usnic_pvars_read(&pv, c1);
    for (i = 0; i < 2; i++)
        mine[i] = (c0[i] < 0 || c1[i] < 0) ? -1 : c1[i] - c0[i];
    {
        long long lo[2];
        CHECK_MPI(MPI_Reduce(mine, sum, 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Reduce(mine, lo, 2, MPI_LONG_LONG, MPI_MIN, 0, MPI_COMM_WORLD));
        if (my_rank == 0 && (lo[0] < 0 || lo[1] < 0))
            sum[0] = sum[1] = -1; /* some rank has no usnic counters */
    }
    /* the receiver's and the ping-pong's results to rank 0 */
    if (receiver != 0) {
        if (my_rank == receiver) {
            CHECK_MPI(MPI_Send(flow_mbps, nsend, MPI_DOUBLE, 0, 10, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Send(flow_bytes, nsend, MPI_UNSIGNED_LONG_LONG, 0, 11, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Send(&verified_msgs, 1, MPI_UNSIGNED_LONG_LONG, 0, 12, MPI_COMM_WORLD));
        } else if (my_rank == 0) {
            CHECK_MPI(MPI_Recv(flow_mbps, nsend, MPI_DOUBLE, receiver, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Recv(flow_bytes, nsend, MPI_UNSIGNED_LONG_LONG, receiver, 11, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Recv(&verified_msgs, 1, MPI_UNSIGNED_LONG_LONG, receiver, 12, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        }
    }
    if (npp == 2 && pp[0] != 0) {
        if (my_rank == pp[0])
            CHECK_MPI(MPI_Send(pp_res, 4, MPI_DOUBLE, 0, 13, MPI_COMM_WORLD));
        else if (my_rank == 0)
            CHECK_MPI(MPI_Recv(pp_res, 4, MPI_DOUBLE, pp[0], 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (my_rank == 0) {
        double agg = 0, sq = 0, jain;
        for (i = 0; i < nsend; i++) {
            printf("FLOW sender=%d bytes=%llu MBps=%.1f\n", senders[i], flow_bytes[i], flow_mbps[i]);
            agg += flow_mbps[i];
            sq += flow_mbps[i] * flow_mbps[i];
        }
        jain = sq > 0 ? agg * agg / ((double) nsend * sq) : 0;
        printf("AGG senders=%d MBps=%.1f jain=%.3f seconds=%.1f\n", nsend, agg, jain, seconds);
        printf("WINDOW start=%.6f seconds=%.1f\n", start_wall, seconds);
        if (npp == 2)
            printf("PINGPONG rounds=%.0f p50_us=%.1f p99_us=%.1f max_us=%.1f\n", pp_res[0], pp_res[1], pp_res[2],
                   pp_res[3]);
        if (sum[0] < 0)
            printf("USNIC sends=- resends=- resent_pct=-\n");
        else
            printf("USNIC sends=%lld resends=%lld resent_pct=%.2f\n", sum[0], sum[1],
                   sum[0] > 0 ? 100.0 * (double) sum[1] / (double) sum[0] : 0.0);
        printf("PASS cc_flows messages=%llu bytes=%llu\n", verified_msgs, verified_msgs * (unsigned long long) size);
        fflush(stdout);
    }
    usnic_pvars_close(&pv);
    MPI_Finalize();
    return 0;
}
