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
 *   udp_raw gso-stream --size SEG [--batch N] [--seconds S]
 *       The stream again, with segmentation offload: each send() carries
 *       N (default 44) segments of SEG bytes (UDP_SEGMENT set on the
 *       sender's socket: the kernel cuts it into N datagrams, or on
 *       loopback hands it over whole), and the receiver has UDP_GRO on
 *       and reads with recvmsg() into a 64 KiB buffer, taking the segment
 *       size from the UDP_GRO control message (none: one datagram of the
 *       length read).  Goodput, sender's rate and loss as for the stream;
 *       received, sent and lost count segments (datagrams).
 *
 *   udp_raw gso-pingpong --size N [--seg SEG] [--seconds S]
 *       The ping-pong with one send() of N bytes each way, cut into
 *       segments of SEG bytes (default 1472; the last one shorter) by
 *       UDP_SEGMENT, received with UDP_GRO (recvmsg() until N bytes are
 *       in).  Same batches and statistics as the ping-pong.
 *
 *   For both GSO modes the options are set and one message is sent each
 *   way the mode uses before the measurement; if a setsockopt() or that
 *   first send fails (EIO, EINVAL, EMSGSIZE: no GSO for this socket,
 *   device or size) or the message does not arrive within a second, the
 *   result line says "status=unavailable -- not available: <reason>"
 *   instead of a number (exit status 0: a result, not a failure).
 *
 * Output: one line "RAW kind=... size=... key=value ..." on stdout.
 * Exit status 0 on success.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
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
#define GRO_BUF 65536 /* a UDP_GRO read returns up to one IPv4 datagram's worth */
#define MAX_GSO_BATCH 128

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
    unsigned long long reads; /* receive calls that returned data */
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

/* One recvmsg() on a UDP_GRO socket; *segs = the datagrams it stands for
 * (length / the UDP_GRO control message's segment size, rounded up; one
 * without that message).  Returns recvmsg()'s result. */
static ssize_t recv_gro(int fd, void *buf, size_t len, int flags, unsigned *segs)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctrl;
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    struct msghdr msg;
    struct cmsghdr *c;
    ssize_t n;
    int seg = 0;

    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.buf;
    msg.msg_controllen = sizeof(ctrl.buf);
    n = recvmsg(fd, &msg, flags);
    if (n < 0)
        return n;
    if (msg.msg_flags & MSG_TRUNC) {
        fprintf(stderr, "udp_raw: a UDP_GRO read was truncated\n");
        exit(1);
    }
    for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
            c->cmsg_len >= CMSG_LEN(sizeof(int)))
            memcpy(&seg, CMSG_DATA(c), sizeof(int));
    *segs = seg > 0 && n > 0 ? (unsigned)(((size_t)n + (size_t)seg - 1) / (size_t)seg) : 1;
    return n;
}

/* Polling receive on a UDP_GRO socket. */
static ssize_t recv_gro_spin(int fd, void *buf, size_t len, unsigned *segs)
{
    for (;;) {
        ssize_t n = recv_gro(fd, buf, len, MSG_DONTWAIT, segs);
        if (n >= 0)
            return n;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED)
            die("recvmsg");
    }
}

static int set_udp_opt(int fd, int opt, int val, const char *name, char *why, size_t whylen)
{
    if (setsockopt(fd, SOL_UDP, opt, &val, sizeof(val)) == 0)
        return 0;
    snprintf(why, whylen, "setsockopt(SOL_UDP, %s, %d): %s", name, val, strerror(errno));
    return -1;
}

/* One GSO send of `len` bytes from `from` to `to` (which has UDP_GRO on),
 * received in full within a second.  0 or -1 with the reason. */
static int gso_probe(int from, int to, unsigned char *sbuf, unsigned char *rbuf,
                     size_t len, size_t seg, char *why, size_t whylen)
{
    double t0 = now();
    size_t got = 0;
    ssize_t n;
    unsigned segs;

    memset(sbuf, 0x5a, len);
    for (;;) {
        n = send(from, sbuf, len, 0);
        if (n == (ssize_t)len)
            break;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ||
                      errno == ECONNREFUSED) && now() - t0 < 1.0)
            continue;
        snprintf(why, whylen, "the first GSO send (%zu bytes in segments of %zu) %s%s",
                 len, seg, n < 0 ? "failed: " : "was short",
                 n < 0 ? strerror(errno) : "");
        return -1;
    }
    while (got < len) {
        struct pollfd p = { .fd = to, .events = POLLIN };
        int ms = (int)((t0 + 1.0 - now()) * 1000);
        if (ms <= 0 || poll(&p, 1, ms) <= 0)
            break;
        n = recv_gro(to, rbuf, GRO_BUF, MSG_DONTWAIT, &segs);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED)
            break;
    }
    if (got == len)
        return 0;
    snprintf(why, whylen, "the first GSO send (%zu bytes in segments of %zu) delivered %zu "
             "bytes within a second", len, seg, got);
    return -1;
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

/* Echo each `total`-byte message with one GSO send once all of it has
 * arrived (in one or more UDP_GRO reads), until told to stop. */
static void child_echo_gso(int fd, int ctl, unsigned char *buf, size_t total)
{
    ctl_t m;
    size_t got = 0;
    unsigned segs;

    for (;;) {
        ssize_t n = recv_gro(fd, buf + got, GRO_BUF, MSG_DONTWAIT, &segs);
        if (n >= 0) {
            got += (size_t)n;
            if (got > total) {
                fprintf(stderr, "udp_raw: more than one message's bytes arrived\n");
                exit(1);
            }
            if (got == total) {
                got = 0;
                send_spin(fd, buf, total);
            }
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNREFUSED)
            die("recvmsg");
        if (ctl_recv(ctl, &m, 1) && m.op == CTL_STOP)
            return;
    }
}

/* Count datagrams; the ones that arrive at or after `t_start` (from the
 * START record, sent before the first datagram) are measured.  After STOP, drain until the socket has been
 * empty for 20 ms, then report.  With `gro`, reads are UDP_GRO recvmsg()
 * calls and each counts as the segments it carries. */
static void child_sink(int fd, int ctl, unsigned char *buf, int gro)
{
    ctl_t m, r;
    double t_start = 0, t_last = 0, quiet_since = 0;
    unsigned long long n = 0, bytes = 0;
    int stopping = 0;
    unsigned spins = 0, segs = 1;

    memset(&r, 0, sizeof(r));
    ctl_recv(ctl, &m, 0); /* START comes before the first datagram */
    if (m.op != CTL_START) {
        fprintf(stderr, "udp_raw: expected START\n");
        exit(1);
    }
    t_start = m.t;
    for (;;) {
        ssize_t len = gro ? recv_gro(fd, buf, GRO_BUF, MSG_DONTWAIT, &segs)
                          : recv(fd, buf, MAX_DGRAM, MSG_DONTWAIT);
        if (len >= 0) {
            double t = now();
            if (t >= t_start) {
                n += segs;
                r.reads++;
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

static unsigned long long gso_reads; /* UDP_GRO reads of the gso ping-pong */

/* burst 0: one GSO send of `size` bytes, read back with UDP_GRO */
static void pingpong_iters(int fd, unsigned char *sbuf, unsigned char *rbuf,
                           size_t size, unsigned burst, long iters)
{
    long i;
    unsigned k;

    for (i = 0; i < iters; i++) {
        memcpy(sbuf, &i, size < sizeof(i) ? size : sizeof(i));
        if (burst == 0) {
            size_t got = 0;
            unsigned segs;
            send_spin(fd, sbuf, size);
            while (got < size) {
                got += (size_t)recv_gro_spin(fd, rbuf, GRO_BUF, &segs);
                gso_reads++;
            }
            if (got != size) {
                fprintf(stderr, "udp_raw: echo of the wrong length\n");
                exit(1);
            }
            continue;
        }
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

static void parent_pingpong(int fd, size_t size, unsigned burst, size_t seg,
                            double seconds, unsigned char *sbuf, unsigned char *rbuf)
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
    gso_reads = 0;
    for (b = 0; b < NBATCH; b++) {
        t0 = now();
        pingpong_iters(fd, sbuf, rbuf, size, burst, iters);
        res[b] = (now() - t0) * 1e6 / (2.0 * (double)iters);
    }
    qsort(res, NBATCH, sizeof(double), cmp_double);
    if (burst == 0) {
        printf("RAW kind=gso_pingpong size=%zu seg=%zu segs=%zu usec=%.3f worst=%.3f "
               "best=%.3f iters=%ld batches=%d reads_per_msg=%.2f\n",
               size, seg, (size + seg - 1) / seg, res[NBATCH / 2], res[NBATCH - 1],
               res[0], iters, NBATCH, (double)gso_reads / (double)(iters * NBATCH));
        return;
    }
    printf("RAW kind=pingpong size=%zu burst=%u usec=%.3f worst=%.3f best=%.3f "
           "iters=%ld batches=%d\n",
           size, burst, res[NBATCH / 2], res[NBATCH - 1], res[0], iters, NBATCH);
}

/* batch 0: `size`-byte datagrams; batch N: GSO sends of N x `size` bytes */
static void parent_stream(int fd, int ctl, size_t size, unsigned batch, double seconds,
                          unsigned char *sbuf)
{
    size_t len = batch ? size * batch : size;
    unsigned long long per_send = batch ? batch : 1, sends = batch ? 1 : 32;
    char head[64], tail[48] = "";
    const double warmup = 0.2;
    double t0, t_start, t_end, t;
    unsigned long long sent = 0, measured_sent = 0;
    ctl_t m, r;

    memset(&m, 0, sizeof(m));
    memset(sbuf, 0x5a, len);
    t0 = now();
    t_start = t0 + warmup;
    t_end = t_start + seconds;
    m.op = CTL_START;
    m.t = t_start;
    ctl_send(ctl, &m);
    for (;;) {
        unsigned long long k;
        for (k = 0; k < sends; k++) {
            memcpy(sbuf, &sent, size < sizeof(sent) ? size : sizeof(sent));
            send_spin(fd, sbuf, len);
            sent += per_send;
        }
        t = now();
        if (t >= t_start) /* plain stream: approximate to 32 datagrams */
            measured_sent += sends * per_send;
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
    if (batch) {
        snprintf(head, sizeof(head), "kind=gso_stream size=%zu batch=%u", size, batch);
        snprintf(tail, sizeof(tail), " reads=%llu", r.reads);
    } else {
        snprintf(head, sizeof(head), "kind=stream size=%zu", size);
    }
    printf("RAW %s MBps=%.1f received=%llu sent=%llu lost=%lld send_MBps=%.1f "
           "seconds=%.3f%s\n",
           head, (double)r.bytes / (r.t_last - t_start) / 1e6, r.n,
           measured_sent, (long long)measured_sent - (long long)r.n,
           (double)measured_sent * (double)size / (t - t_start) / 1e6,
           r.t_last - t_start, tail);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: udp_raw pingpong|stream --size N [--burst K] [--seconds S] [--cpus A,B]\n"
            "       udp_raw gso-stream [--size SEG (1472)] [--batch N (44)] [--seconds S] "
            "[--cpus A,B]\n"
            "       udp_raw gso-pingpong [--size N (16384)] [--seg SEG (1472)] [--seconds S] "
            "[--cpus A,B]\n");
    exit(2);
}

enum { PINGPONG, STREAM, GSO_STREAM, GSO_PINGPONG };

int main(int argc, char **argv)
{
    struct sockaddr_in a, b;
    int fa, fb, sv[2], cpu_a = 0, cpu_b = 1, i, status, mode, size_set = 0;
    size_t size = 8, seg = 1472, buflen;
    unsigned burst = 1, batch = 44;
    double seconds = 1.0;
    unsigned char *sbuf, *rbuf;
    char why[256];
    pid_t pid;
    ctl_t m;

    if (argc < 2)
        usage();
    if (strcmp(argv[1], "pingpong") == 0)
        mode = PINGPONG;
    else if (strcmp(argv[1], "stream") == 0)
        mode = STREAM;
    else if (strcmp(argv[1], "gso-stream") == 0)
        mode = GSO_STREAM;
    else if (strcmp(argv[1], "gso-pingpong") == 0)
        mode = GSO_PINGPONG;
    else
        usage();
    for (i = 2; i + 1 < argc; i += 2) {
        char *end;
        unsigned long v;
        if (strcmp(argv[i], "--size") == 0) {
            size = strtoul(argv[i + 1], &end, 10);
            if (*end || size > MAX_DGRAM)
                usage();
            size_set = 1;
        } else if (strcmp(argv[i], "--burst") == 0 && mode == PINGPONG) {
            v = strtoul(argv[i + 1], &end, 10);
            if (*end || v < 1 || v > 64)
                usage();
            burst = (unsigned)v;
        } else if (strcmp(argv[i], "--batch") == 0 && mode == GSO_STREAM) {
            v = strtoul(argv[i + 1], &end, 10); /* the kernel has the last word */
            if (*end || v < 1 || v > MAX_GSO_BATCH)
                usage();
            batch = (unsigned)v;
        } else if (strcmp(argv[i], "--seg") == 0 && mode == GSO_PINGPONG) {
            v = strtoul(argv[i + 1], &end, 10);
            if (*end || v < 1 || v > MAX_DGRAM)
                usage();
            seg = v;
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
    if (!size_set && mode == GSO_STREAM)
        size = 1472;
    if (!size_set && mode == GSO_PINGPONG)
        size = 16384;
    if ((mode == GSO_STREAM || mode == GSO_PINGPONG) && size == 0)
        usage();
    if (mode == GSO_STREAM)
        seg = size;

    /* the GSO stream's send and the gso ping-pong's partial reads need more */
    buflen = mode == GSO_STREAM ? size * batch : 2 * GRO_BUF;
    sbuf = calloc(1, buflen > MAX_DGRAM ? buflen : MAX_DGRAM);
    rbuf = calloc(1, 2 * GRO_BUF);
    if (!sbuf || !rbuf)
        die("malloc");
    fa = udp_socket(&a);
    fb = udp_socket(&b);
    if (connect(fa, (struct sockaddr *)&b, sizeof(b)) != 0 ||
        connect(fb, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");

    /* GSO from fa (both ways for the ping-pong), GRO at fb (and fa), and
     * one message each way the mode uses, before anything is forked */
    if (mode == GSO_STREAM || mode == GSO_PINGPONG) {
        size_t len = mode == GSO_STREAM ? size * batch : size;
        int two_way = mode == GSO_PINGPONG;
        int bad = set_udp_opt(fa, UDP_SEGMENT, (int)seg, "UDP_SEGMENT", why, sizeof(why)) ||
                  set_udp_opt(fb, UDP_GRO, 1, "UDP_GRO", why, sizeof(why)) ||
                  (two_way && (set_udp_opt(fb, UDP_SEGMENT, (int)seg, "UDP_SEGMENT", why,
                                           sizeof(why)) ||
                               set_udp_opt(fa, UDP_GRO, 1, "UDP_GRO", why, sizeof(why)))) ||
                  gso_probe(fa, fb, sbuf, rbuf, len, seg, why, sizeof(why)) ||
                  (two_way && gso_probe(fb, fa, sbuf, rbuf, len, seg, why, sizeof(why)));
        if (bad) {
            if (mode == GSO_STREAM)
                printf("RAW kind=gso_stream size=%zu batch=%u status=unavailable -- "
                       "not available: %s\n", size, batch, why);
            else
                printf("RAW kind=gso_pingpong size=%zu seg=%zu status=unavailable -- "
                       "not available: %s\n", size, seg, why);
            return 0;
        }
    }
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
        if (mode == STREAM || mode == GSO_STREAM)
            child_sink(fb, sv[1], rbuf, mode == GSO_STREAM);
        else if (mode == GSO_PINGPONG)
            child_echo_gso(fb, sv[1], rbuf, size);
        else
            child_echo(fb, sv[1], rbuf, burst);
        _exit(0);
    }
    close(fb);
    close(sv[1]);
    pin(cpu_a);
    ctl_recv(sv[0], &m, 0); /* the child is pinned and polling */

    if (mode == STREAM || mode == GSO_STREAM) {
        parent_stream(fa, sv[0], size, mode == GSO_STREAM ? batch : 0, seconds, sbuf);
    } else {
        parent_pingpong(fa, size, mode == GSO_PINGPONG ? 0 : burst, seg, seconds, sbuf, rbuf);
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
