/*
 * udp_raw: the raw limits of the datagram path under the usnic BTL, with
 * plain UDP sockets on 127.0.0.1 and nothing else (no MPI, no libfabric).
 *
 * Two processes (this one and a forked child), each pinned to its own CPU
 * (--cpus A,B, default 0,1), each with one non-blocking UDP socket bound to
 * 127.0.0.1 and connected to the other's.  Both sides poll: recv() with
 * MSG_DONTWAIT in a loop, never a blocking wait, like the BTL's progress
 * loop.  A stream socket pair between the two processes carries control
 * messages only.
 *
 *   udp_raw pingpong --size N [--burst K] [--seconds S]
 *       The parent sends N bytes, the child echoes them back.  After a
 *       warm-up (0.1 s) the timed part is split into 5 batches of equal
 *       iteration counts; the result is the median batch's half round trip
 *       in microseconds (worst and best batch printed too).  With --burst
 *       K (default 1) a "message" is K datagrams of N bytes: the child
 *       answers once it has all K, with K of its own, like a ping-pong of
 *       a message the udp provider must cut into K datagrams (16 KiB: at
 *       least 12 of at most 1472 bytes).
 *
 *   udp_raw stream --size N [--seconds S]
 *       The parent sends N-byte datagrams as fast as the kernel accepts
 *       them for a warm-up (0.2 s) plus S seconds (default 1); the child
 *       receives and counts.  Datagrams the child's socket buffer could not
 *       hold are dropped by the kernel, so the send rate alone would
 *       overstate what arrives: the result is the GOODPUT, bytes the child
 *       received after the warm-up / (time of its last receive - end of the
 *       warm-up), in MB/s (10^6 bytes/s).  Sent and lost datagrams and the
 *       sender's own rate are printed too.
 *
 * Output: one line "RAW kind=... size=... key=value ..." on stdout.
 * Exit status 0 on success.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NBATCH 5
#define MAX_DGRAM 65507

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void pin(int cpu)
{
    cpu_set_t set;

    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        fprintf(stderr, "udp_raw: cannot pin to CPU %d (%s); running unpinned\n",
                cpu, strerror(errno));
}

/* A non-blocking UDP socket bound to 127.0.0.1 on a free port. */
static int udp_socket(struct sockaddr_in *addr)
{
    socklen_t len = sizeof(*addr);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);

    if (fd < 0)
        die("socket");
    memset(addr, 0, sizeof(*addr));
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) != 0 ||
        getsockname(fd, (struct sockaddr *)addr, &len) != 0)
        die("bind");
    return fd;
}

/* Control channel: fixed-size records over a blocking stream socket. */
typedef struct {
    int op;              /* CTL_* */
    double t;            /* a CLOCK_MONOTONIC time */
    unsigned long long n; /* a count */
    unsigned long long bytes;
    double t_last;
} ctl_t;

enum { CTL_READY = 1, CTL_START, CTL_STOP, CTL_REPORT };

static void ctl_send(int fd, const ctl_t *m)
{
    if (write(fd, m, sizeof(*m)) != (ssize_t)sizeof(*m))
        die("control write");
}

static int ctl_recv(int fd, ctl_t *m, int nonblocking)
{
    ssize_t n = recv(fd, m, sizeof(*m), nonblocking ? MSG_DONTWAIT : MSG_WAITALL);

    if (n == (ssize_t)sizeof(*m))
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n > 0 && nonblocking) { /* a partial record: wait for the rest */
        ssize_t r = recv(fd, (char *)m + n, sizeof(*m) - (size_t)n, MSG_WAITALL);
        if (r == (ssize_t)(sizeof(*m) - (size_t)n))
            return 1;
    }
    fprintf(stderr, "udp_raw: control channel closed\n");
    exit(1);
}

/* Polling send: retry while the socket's send buffer is full. */
static void send_spin(int fd, const void *buf, size_t len)
{
    for (;;) {
        ssize_t n = send(fd, buf, len, 0);
        if (n == (ssize_t)len)
            return;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
            continue;
        if (n < 0 && errno == ECONNREFUSED) /* a late ICMP from a past run */
            continue;
        die("send");
    }
}

/* Polling receive of one datagram. */
static ssize_t recv_spin(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
        if (n >= 0)
            return n;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED)
            die("recv");
    }
}

/* ------------------------------------------------------------------------ */
/* Child side                                                               */
/* ------------------------------------------------------------------------ */

/* Echo every |burst| datagrams, once all have arrived, until told to
 * stop; the control socket is checked whenever the data socket is empty. */
static void child_echo(int fd, int ctl, unsigned char *buf, unsigned burst)
{
    ctl_t m;
    unsigned got = 0, k;

    for (;;) {
        ssize_t n = recv(fd, buf, MAX_DGRAM, MSG_DONTWAIT);
        if (n >= 0) {
            if (++got == burst) {
                got = 0;
                for (k = 0; k < burst; k++)
                    send_spin(fd, buf, (size_t)n);
            }
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED)
            die("recv");
        if (ctl_recv(ctl, &m, 1) && m.op == CTL_STOP)
            return;
    }
}

/* Count datagrams; the ones that arrive at or after `t_start` (from the
 * START record, sent before the first datagram) are measured.  After STOP, drain until the socket has been
 * empty for 20 ms, then report. */
static void child_sink(int fd, int ctl, unsigned char *buf)
{
    ctl_t m, r;
    double t_start = 0, t_last = 0, quiet_since = 0;
    unsigned long long n = 0, bytes = 0;
    int stopping = 0;
    unsigned spins = 0;

    memset(&r, 0, sizeof(r));
    ctl_recv(ctl, &m, 0); /* START comes before the first datagram */
    if (m.op != CTL_START) {
        fprintf(stderr, "udp_raw: expected START\n");
        exit(1);
    }
    t_start = m.t;
    for (;;) {
        ssize_t len = recv(fd, buf, MAX_DGRAM, MSG_DONTWAIT);
        if (len >= 0) {
            double t = now();
            if (t >= t_start) {
                n++;
                bytes += (unsigned long long)len;
                t_last = t;
            }
            quiet_since = 0;
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED)
            die("recv");
        if (stopping) {
            double t = now();
            if (quiet_since == 0)
                quiet_since = t;
            else if (t - quiet_since > 0.02)
                break;
            continue;
        }
        if ((++spins & 63) == 0 && ctl_recv(ctl, &m, 1) && m.op == CTL_STOP)
            stopping = 1;
    }
    r.op = CTL_REPORT;
    r.n = n;
    r.bytes = bytes;
    r.t_last = t_last;
    ctl_send(ctl, &r);
}

/* ------------------------------------------------------------------------ */
/* Parent side                                                              */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void pingpong_iters(int fd, unsigned char *sbuf, unsigned char *rbuf,
                           size_t size, unsigned burst, long iters)
{
    long i;
    unsigned k;

    for (i = 0; i < iters; i++) {
        memcpy(sbuf, &i, size < sizeof(i) ? size : sizeof(i));
        for (k = 0; k < burst; k++)
            send_spin(fd, sbuf, size);
        for (k = 0; k < burst; k++) {
            if (recv_spin(fd, rbuf, MAX_DGRAM) != (ssize_t)size) {
                fprintf(stderr, "udp_raw: echo of the wrong length\n");
                exit(1);
            }
        }
    }
}

static void parent_pingpong(int fd, size_t size, unsigned burst, double seconds,
                            unsigned char *sbuf, unsigned char *rbuf)
{
    double t0, per, res[NBATCH];
    long warm = 0, iters;
    int b;

    memset(sbuf, 0x5a, size);
    t0 = now();
    while (now() - t0 < 0.1) { /* warm-up: 0.1 s */
        pingpong_iters(fd, sbuf, rbuf, size, burst, 100);
        warm += 100;
    }
    per = (now() - t0) / (double)warm;
    iters = (long)(seconds / NBATCH / per);
    iters = iters < 100 ? 100 : iters;
    for (b = 0; b < NBATCH; b++) {
        t0 = now();
        pingpong_iters(fd, sbuf, rbuf, size, burst, iters);
        res[b] = (now() - t0) * 1e6 / (2.0 * (double)iters);
    }
    qsort(res, NBATCH, sizeof(double), cmp_double);
    printf("RAW kind=pingpong size=%zu burst=%u usec=%.3f worst=%.3f best=%.3f "
           "iters=%ld batches=%d\n",
           size, burst, res[NBATCH / 2], res[NBATCH - 1], res[0], iters, NBATCH);
}

static void parent_stream(int fd, int ctl, size_t size, double seconds,
                          unsigned char *sbuf)
{
    const double warmup = 0.2;
    double t0, t_start, t_end, t;
    unsigned long long sent = 0, measured_sent = 0;
    ctl_t m, r;

    memset(&m, 0, sizeof(m));
    memset(sbuf, 0x5a, size);
    t0 = now();
    t_start = t0 + warmup;
    t_end = t_start + seconds;
    m.op = CTL_START;
    m.t = t_start;
    ctl_send(ctl, &m);
    for (;;) {
        int k;
        for (k = 0; k < 32; k++) {
            memcpy(sbuf, &sent, size < sizeof(sent) ? size : sizeof(sent));
            send_spin(fd, sbuf, size);
            sent++;
        }
        t = now();
        if (t >= t_start)
            measured_sent += 32; /* approximate to 32 datagrams */
        if (t >= t_end)
            break;
    }
    m.op = CTL_STOP;
    ctl_send(ctl, &m);
    ctl_recv(ctl, &r, 0);
    if (r.op != CTL_REPORT || r.n == 0 || r.t_last <= t_start) {
        fprintf(stderr, "udp_raw: the receiver got nothing in the measured "
                "interval\n");
        exit(1);
    }
    printf("RAW kind=stream size=%zu MBps=%.1f received=%llu sent=%llu "
           "lost=%lld send_MBps=%.1f seconds=%.3f\n",
           size, (double)r.bytes / (r.t_last - t_start) / 1e6, r.n,
           measured_sent, (long long)measured_sent - (long long)r.n,
           (double)measured_sent * (double)size / (t - t_start) / 1e6,
           r.t_last - t_start);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr, "usage: udp_raw pingpong|stream --size N [--burst K] [--seconds S] "
                    "[--cpus A,B]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct sockaddr_in a, b;
    int fa, fb, sv[2], cpu_a = 0, cpu_b = 1, i, status, stream;
    size_t size = 8;
    unsigned burst = 1;
    double seconds = 1.0;
    unsigned char *sbuf, *rbuf;
    pid_t pid;
    ctl_t m;

    if (argc < 2)
        usage();
    if (strcmp(argv[1], "pingpong") == 0)
        stream = 0;
    else if (strcmp(argv[1], "stream") == 0)
        stream = 1;
    else
        usage();
    for (i = 2; i + 1 < argc; i += 2) {
        char *end;
        if (strcmp(argv[i], "--size") == 0) {
            size = strtoul(argv[i + 1], &end, 10);
            if (*end || size > MAX_DGRAM)
                usage();
        } else if (strcmp(argv[i], "--burst") == 0) {
            unsigned long v = strtoul(argv[i + 1], &end, 10);
            if (*end || v < 1 || v > 64)
                usage();
            burst = (unsigned)v;
        } else if (strcmp(argv[i], "--seconds") == 0) {
            seconds = strtod(argv[i + 1], &end);
            if (*end || !(seconds > 0 && seconds < 3600))
                usage();
        } else if (strcmp(argv[i], "--cpus") == 0) {
            if (sscanf(argv[i + 1], "%d,%d", &cpu_a, &cpu_b) != 2)
                usage();
        } else {
            usage();
        }
    }
    if (i != argc)
        usage();

    sbuf = calloc(1, MAX_DGRAM);
    rbuf = calloc(1, MAX_DGRAM);
    if (!sbuf || !rbuf)
        die("malloc");
    fa = udp_socket(&a);
    fb = udp_socket(&b);
    if (connect(fa, (struct sockaddr *)&b, sizeof(b)) != 0 ||
        connect(fb, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        die("socketpair");

    fflush(stdout);
    pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(fa);
        close(sv[0]);
        pin(cpu_b);
        memset(&m, 0, sizeof(m));
        m.op = CTL_READY;
        ctl_send(sv[1], &m);
        if (stream)
            child_sink(fb, sv[1], rbuf);
        else
            child_echo(fb, sv[1], rbuf, burst);
        _exit(0);
    }
    close(fb);
    close(sv[1]);
    pin(cpu_a);
    ctl_recv(sv[0], &m, 0); /* the child is pinned and polling */

    if (stream) {
        parent_stream(fa, sv[0], size, seconds, sbuf);
    } else {
        parent_pingpong(fa, size, burst, seconds, sbuf, rbuf);
        memset(&m, 0, sizeof(m));
        m.op = CTL_STOP;
        ctl_send(sv[0], &m);
    }
    fflush(stdout);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "udp_raw: the child failed\n");
        return 1;
    }
    return 0;
}
