/*
 * xhost_stream.c - one-way UDP (segmentation offload + coalesced
 * receives) and TCP streams between two processes that may sit in
 * different network namespaces (test/hosts/hosts.sh), to see what a veth
 * path does with GSO and GRO.  udp_raw (bench/) measures the same on
 * loopback inside one process; this one takes addresses.
 *
 *   xhost_stream udp-recv ADDR PORT [--gro 0|1] [--idle S] [--timeout S]
 *       Binds ADDR:PORT, UDP_GRO on unless --gro 0, reads with recvmsg()
 *       into a 64 KiB buffer; each read counts as len / the UDP_GRO
 *       control message's segment size datagrams (1 without it).  Ends
 *       when nothing came for --idle seconds (1) after the first datagram,
 *       or after --timeout seconds (30) in all.  Prints
 *       RECV proto=udp bytes=B datagrams=D reads=R segs_per_read=X
 *            max_segs_per_read=M seconds=T MBps=G
 *       (T: first to last datagram; G: goodput, 10^6 bytes/s).
 *   xhost_stream udp-send ADDR PORT [--seg N] [--batch K] [--gso 0|1]
 *                [--seconds S | --count C]
 *       Sends runs of K (44) datagrams of N (1472) bytes: with --gso 1
 *       (default) as one sendmsg() with a SOL_UDP/UDP_SEGMENT control
 *       message (as the socket wire does), with --gso 0 as one sendmmsg().
 *       For S seconds (1) or C runs.  Prints
 *       SEND proto=udp gso=1 runs=N datagrams=D bytes=B seconds=T MBps=X errors=E [first_error=NAME]
 *   xhost_stream tcp-recv ADDR PORT [--timeout S]
 *       Accepts one connection, reads until EOF: RECV proto=tcp bytes=...
 *   xhost_stream tcp-send ADDR PORT [--size N] [--seconds S]
 *       Writes N-byte (65536) blocks for S seconds (1), then closes:
 *       SEND proto=tcp ...
 * Exit status 0 on success, 1 on an error, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define RBUF 65536
#define MAX_BATCH 128

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "xhost_stream: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void usage(void)
{
    fprintf(stderr, "usage: xhost_stream udp-recv|udp-send|tcp-recv|tcp-send ADDR PORT [options]\n"
                    "  udp-recv [--gro 0|1] [--idle S] [--timeout S]\n"
                    "  udp-send [--seg N] [--batch K] [--gso 0|1] [--seconds S | --count C]\n"
                    "  tcp-recv [--timeout S]\n"
                    "  tcp-send [--size N] [--seconds S]\n");
    exit(2);
}

static struct sockaddr_in parse_addr(const char *ip, const char *port)
{
    struct sockaddr_in a;
    char *end;
    unsigned long p = strtoul(port, &end, 10);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    if (*end || p > 65535 || inet_pton(AF_INET, ip, &a.sin_addr) != 1)
        usage();
    a.sin_port = htons((uint16_t) p);
    return a;
}

static void big_buffers(int fd)
{
    int big = 32 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) != 0)
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) != 0)
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
}

/* wait up to |limit| seconds for |fd| to be readable */
static int wait_readable(int fd, double limit)
{
    struct pollfd p = {fd, POLLIN, 0};
    int ms = (int) (limit * 1000);
    return poll(&p, 1, ms < 0 ? 0 : ms) > 0;
}

static void report_recv(const char *proto, unsigned long long bytes, unsigned long long dgrams,
                        unsigned long long reads, unsigned max_segs, double t_first, double t_last)
{
    double secs = t_last > t_first ? t_last - t_first : 0;
    printf("RECV proto=%s bytes=%llu datagrams=%llu reads=%llu segs_per_read=%.2f max_segs_per_read=%u "
           "seconds=%.3f MBps=%.1f\n",
           proto, bytes, dgrams, reads, reads ? (double) dgrams / (double) reads : 0.0, max_segs, secs,
           secs > 0 ? (double) bytes / secs / 1e6 : 0.0);
}

static int udp_recv(struct sockaddr_in a, int gro, double idle, double timeout)
{
    static uint8_t buf[RBUF];
    int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
    unsigned long long bytes = 0, dgrams = 0, reads = 0;
    unsigned max_segs = 0;
    double t0 = now(), t_first = 0, t_last = 0;

    if (fd < 0)
        die("socket");
    big_buffers(fd);
    if (bind(fd, (struct sockaddr *) &a, sizeof(a)) != 0)
        die("bind");
    if (gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0)
        die("setsockopt UDP_GRO");
    printf("READY\n");
    fflush(stdout);
    for (;;) {
        double t = now(), limit = t_first > 0 ? t_last + idle - t : t0 + timeout - t;
        union {
            char c[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {buf, sizeof(buf)};
        struct msghdr m;
        struct cmsghdr *c;
        ssize_t n;
        int seg = 0;
        unsigned segs;

        if (t - t0 > timeout || !wait_readable(fd, limit))
            break;
        memset(&m, 0, sizeof(m));
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = ctl.c;
        m.msg_controllen = sizeof(ctl.c);
        n = recvmsg(fd, &m, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            die("recvmsg");
        }
        if (m.msg_flags & MSG_TRUNC) {
            fprintf(stderr, "xhost_stream: a read was truncated\n");
            return 1;
        }
        for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO)
                memcpy(&seg, CMSG_DATA(c), sizeof(seg));
        segs = seg > 0 && n > 0 ? (unsigned) (((size_t) n + (size_t) seg - 1) / (size_t) seg) : 1;
        t_last = now();
        if (t_first == 0)
            t_first = t_last;
        bytes += (unsigned long long) n;
        dgrams += segs;
        reads++;
        if (segs > max_segs)
            max_segs = segs;
    }
    report_recv("udp", bytes, dgrams, reads, max_segs, t_first, t_last);
    return dgrams > 0 ? 0 : 1;
}

static int udp_send(struct sockaddr_in to, size_t seg, unsigned batch, int gso, double seconds, long count)
{
    static uint8_t data[MAX_BATCH * 65536];
    struct mmsghdr v[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    union {
        char c[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh;
    struct cmsghdr *c;
    uint16_t g = (uint16_t) seg;
    unsigned long long runs = 0, dgrams = 0, bytes = 0, errors = 0;
    int first_err = 0, fd = socket(AF_INET, SOCK_DGRAM, 0);
    double t0, t;
    unsigned i;

    if (fd < 0)
        die("socket");
    big_buffers(fd);
    if (connect(fd, (struct sockaddr *) &to, sizeof(to)) != 0)
        die("connect");
    memset(data, 0x5a, seg * batch);
    memset(&mh, 0, sizeof(mh));
    iov[0].iov_base = data;
    iov[0].iov_len = seg * batch;
    mh.msg_iov = iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.c;
    mh.msg_controllen = sizeof(ctl.c);
    memset(&ctl, 0, sizeof(ctl));
    c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    memcpy(CMSG_DATA(c), &g, sizeof(g));
    for (i = 0; i < batch; i++) {
        memset(&v[i], 0, sizeof(v[i]));
        v[i].msg_hdr.msg_iov = &iov[gso ? 0 : i];
        v[i].msg_hdr.msg_iovlen = 1;
    }
    if (!gso)
        for (i = 0; i < batch; i++) {
            iov[i].iov_base = data + i * seg;
            iov[i].iov_len = seg;
        }
    t0 = now();
    for (;;) {
        t = now();
        if (count > 0 ? (long) runs >= count : t - t0 >= seconds)
            break;
        if (gso) {
            ssize_t r = sendmsg(fd, &mh, 0);
            if (r == (ssize_t) (seg * batch)) {
                runs++;
                dgrams += batch;
                bytes += seg * batch;
            } else if (r < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == ECONNREFUSED || errno == EINTR)) {
                continue; /* back-pressure, or an ICMP error of an earlier datagram */
            } else {
                errors++;
                if (!first_err)
                    first_err = r < 0 ? errno : EIO;
                if (errors > 1000)
                    break;
            }
        } else {
            unsigned sent = 0;
            while (sent < batch) {
                int r = sendmmsg(fd, v + sent, batch - sent, 0);
                if (r > 0) {
                    sent += (unsigned) r;
                } else if (r < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == ECONNREFUSED ||
                                     errno == EINTR)) {
                    continue;
                } else {
                    errors++;
                    if (!first_err)
                        first_err = errno;
                    break;
                }
            }
            runs++;
            dgrams += sent;
            bytes += sent * seg;
            if (errors > 1000)
                break;
        }
    }
    t = now() - t0;
    printf("SEND proto=udp gso=%d runs=%llu datagrams=%llu bytes=%llu seconds=%.3f MBps=%.1f errors=%llu%s%s\n", gso,
           runs, dgrams, bytes, t, t > 0 ? (double) bytes / t / 1e6 : 0.0, errors, first_err ? " first_error=" : "",
           first_err ? strerrorname_np(first_err) : "");
    return errors ? 1 : 0;
}

static int tcp_recv(struct sockaddr_in a, double timeout)
{
    static uint8_t buf[1 << 20];
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
    unsigned long long bytes = 0, reads = 0;
    double t_first = 0, t_last = 0;

    if (lfd < 0)
        die("socket");
    (void) setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *) &a, sizeof(a)) != 0 || listen(lfd, 1) != 0)
        die("bind/listen");
    printf("READY\n");
    fflush(stdout);
    if (!wait_readable(lfd, timeout)) {
        fprintf(stderr, "xhost_stream: no connection within %.0f s\n", timeout);
        return 1;
    }
    fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        die("accept");
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("read");
        if (n == 0)
            break;
        t_last = now();
        if (t_first == 0)
            t_first = t_last;
        bytes += (unsigned long long) n;
        reads++;
    }
    report_recv("tcp", bytes, 0, reads, 0, t_first, t_last);
    return bytes > 0 ? 0 : 1;
}

static int tcp_send(struct sockaddr_in to, size_t size, double seconds)
{
    static uint8_t buf[1 << 20];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    unsigned long long bytes = 0;
    double t0, t;

    if (fd < 0)
        die("socket");
    if (connect(fd, (struct sockaddr *) &to, sizeof(to)) != 0)
        die("connect");
    memset(buf, 0x5a, size);
    t0 = now();
    while ((t = now()) - t0 < seconds) {
        size_t off = 0;
        while (off < size) {
            ssize_t n = write(fd, buf + off, size - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                die("write");
            off += (size_t) n;
        }
        bytes += size;
    }
    close(fd);
    t = now() - t0;
    printf("SEND proto=tcp bytes=%llu seconds=%.3f MBps=%.1f\n", bytes, t, (double) bytes / t / 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    size_t seg = 1472, size = 65536;
    unsigned batch = 44;
    int gso = 1, gro = 1, i;
    double seconds = 1, idle = 1, timeout = 30;
    long count = 0;
    struct sockaddr_in a;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 4)
        usage();
    a = parse_addr(argv[2], argv[3]);
    for (i = 4; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (!strcmp(o, "--seg"))
            seg = strtoul(v, NULL, 10);
        else if (!strcmp(o, "--batch"))
            batch = (unsigned) strtoul(v, NULL, 10);
        else if (!strcmp(o, "--gso"))
            gso = atoi(v);
        else if (!strcmp(o, "--gro"))
            gro = atoi(v);
        else if (!strcmp(o, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(o, "--count"))
            count = atol(v);
        else if (!strcmp(o, "--idle"))
            idle = atof(v);
        else if (!strcmp(o, "--timeout"))
            timeout = atof(v);
        else if (!strcmp(o, "--size"))
            size = strtoul(v, NULL, 10);
        else
            usage();
    }
    if (i != argc || seg < 8 || seg > 65507 || batch < 1 || batch > MAX_BATCH || seg * batch > 65507 * (gso ? 1 : MAX_BATCH) ||
        size < 1 || size > (1 << 20) || seconds <= 0 || idle <= 0 || timeout <= 0)
        usage();
    if (!strcmp(argv[1], "udp-recv"))
        return udp_recv(a, gro, idle, timeout);
    if (!strcmp(argv[1], "udp-send"))
        return udp_send(a, seg, batch, gso, seconds, count);
    if (!strcmp(argv[1], "tcp-recv"))
        return tcp_recv(a, timeout);
    if (!strcmp(argv[1], "tcp-send"))
        return tcp_send(a, size, seconds);
    usage();
    return 2;
}
