/*
 * gso_shim_check.c - a raw UDP segmentation-offload sender that checks
 * test/faults/gso_shim.c (run it with and without LD_PRELOAD=libgso_shim.so).
 *
 * Everything runs on 127.0.0.1: one receiving socket with UDP_GRO on and
 * a large receive buffer, one sending socket.  A "segmented" message is
 * SEGS x SEG bytes (default 44 x 1472) sent with a SOL_UDP / UDP_SEGMENT
 * control message, the way a GSO sender asks per call; a "plain" message
 * is 100 bytes without one.  Every segment carries its message number,
 * segment number and a pattern, and the receiver checks every byte and
 * tallies the bytes per message: a refused message must deliver nothing,
 * a sent one all of its bytes, nothing else may arrive.
 *
 *   gso_shim_check sendmsg N     N segmented messages, one sendmsg() each,
 *                                then 2 plain ones (sendmsg(), sendmmsg())
 *   gso_shim_check selfsend N    like sendmsg, after one more segmented
 *                                message (number 0) that the sending socket
 *                                (bound, UDP_GRO on) sends to itself, the way
 *                                a sender probes its own socket
 *   gso_shim_check sendmmsg N    N segmented messages alternating with N
 *                                plain ones in one vector, sent by sendmmsg()
 *                                calls the way a sender does: a short
 *                                count resumes at the next message, a
 *                                failure (-1) skips the first message
 *   gso_shim_check threads T K   T threads, each K segmented sendmsg()s on
 *                                a socket of its own (nothing is read back)
 *
 * Output, on stdout:
 *   MSG i kind=seg|plain|self call=sendmsg|sendmmsg result=ok|<ERRNO NAME>
 *   CALL start=i n=v ret=r [errno=NAME]          (sendmmsg mode, each call)
 *   RESULT pid=P mode=M seg_ok=A seg_failed=B plain_ok=C plain_failed=D
 *          errnos=NAME[,NAME] rx=ok|BAD [why]
 * Exit status 0 when the run could be made and every check of the
 * received data passed (whatever the sends returned: judging those is the
 * caller's business), 1 when the received data is wrong, 2 on a usage or
 * setup error, 3 when the kernel has no UDP GSO at all (setsockopt
 * UDP_SEGMENT refused: then nothing can be tested).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
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

#define MAX_MSGS 256
#define PLAIN_LEN 100
#define RBUF 65536

static size_t seg_size = 1472;
static unsigned nsegs = 44;

static struct sockaddr_in rx_addr;
static int rx_fd = -1;
static int self_fd = -1; /* selfsend: the sending socket, which reads too */

/* bytes that arrived per message number, and what should have */
static size_t got[MAX_MSGS];
static size_t want[MAX_MSGS];
static char bad[256];
static unsigned long seg_ok, seg_failed, plain_ok, plain_failed;
static char errnos[128];

static void die(const char *what)
{
    fprintf(stderr, "gso_shim_check: %s: %s\n", what, strerror(errno));
    exit(2);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint8_t pattern(unsigned msg, unsigned seg, size_t i)
{
    return (uint8_t) (msg * 31u + seg * 7u + (unsigned) i * 13u + 1u);
}

/* one segment (or plain message) of |len| bytes: msg, seg, then pattern */
static void fill(uint8_t *p, size_t len, unsigned msg, unsigned seg)
{
    uint32_t h[2] = {msg, seg};
    size_t i;

    memcpy(p, h, sizeof(h));
    for (i = sizeof(h); i < len; i++) {
        p[i] = pattern(msg, seg, i);
    }
}

__attribute__((format(printf, 1, 2))) static void note_bad(const char *fmt, ...)
{
    va_list ap;

    if (bad[0] != '\0') {
        return; /* the first problem is the one reported */
    }
    va_start(ap, fmt);
    vsnprintf(bad, sizeof(bad), fmt, ap);
    va_end(ap);
}

static void note_errno(int e)
{
    const char *name = strerrorname_np(e);
    char one[32];

    snprintf(one, sizeof(one), "%s(%d)", name ? name : "?", e);
    if (strstr(errnos, one)) {
        return;
    }
    if (errnos[0]) {
        strncat(errnos, ",", sizeof(errnos) - strlen(errnos) - 1);
    }
    strncat(errnos, one, sizeof(errnos) - strlen(errnos) - 1);
}

static const char *ename(int e)
{
    const char *n = strerrorname_np(e);
    return n ? n : "UNKNOWN";
}

/* Read what arrives on the receiving socket until |quiet| seconds pass
 * without anything, checking and tallying every segment. */
static void drain(double quiet)
{
    static uint8_t buf[RBUF];
    double last = now();

    for (;;) {
        union {
            char c[CMSG_SPACE(sizeof(int))];
            struct cmsghdr a;
        } ctl;
        struct iovec iov = {buf, sizeof(buf)};
        struct msghdr m;
        struct cmsghdr *c;
        struct pollfd p[2] = {{rx_fd, POLLIN, 0}, {self_fd, POLLIN, 0}};
        ssize_t n;
        size_t gso = 0, off;
        int ms = (int) ((last + quiet - now()) * 1000), fd;

        if (ms < 0 || poll(p, self_fd >= 0 ? 2 : 1, ms) <= 0) {
            return;
        }
        fd = (p[0].revents & POLLIN) ? rx_fd : self_fd;
        memset(&m, 0, sizeof(m));
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = ctl.c;
        m.msg_controllen = sizeof(ctl.c);
        n = recvmsg(fd, &m, MSG_DONTWAIT);
        if (n < 0) {
            continue;
        }
        last = now();
        if (m.msg_flags & MSG_TRUNC) {
            note_bad("a read was truncated");
        }
        for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                int g;
                memcpy(&g, CMSG_DATA(c), sizeof(g));
                gso = (size_t) g;
            }
        }
        if (gso == 0) {
            gso = (size_t) n;
        }
        for (off = 0; off < (size_t) n; off += gso) {
            size_t len = (size_t) n - off < gso ? (size_t) n - off : gso, i;
            uint32_t h[2];
            if (len < sizeof(h)) {
                note_bad("a datagram of %zu bytes", len);
                continue;
            }
            memcpy(h, buf + off, sizeof(h));
            if (h[0] >= MAX_MSGS) {
                note_bad("a datagram of unknown message %u (segment %u)", h[0], h[1]);
                continue;
            }
            for (i = sizeof(h); i < len; i++) {
                if (buf[off + i] != pattern(h[0], h[1], i)) {
                    note_bad("message %u segment %u: a byte differs", h[0], h[1]);
                    break;
                }
            }
            got[h[0]] += len;
        }
    }
}

static int udp_socket(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        die("socket");
    }
    return fd;
}

/* a socket bound to 127.0.0.1 (its address in |addr|) that reads
 * coalesced runs into a large buffer */
static int rx_socket(struct sockaddr_in *addr)
{
    socklen_t len = sizeof(*addr);
    int one = 1, big = 16 << 20, fd = udp_socket();

    memset(addr, 0, sizeof(*addr));
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *) addr, sizeof(*addr)) != 0 ||
        getsockname(fd, (struct sockaddr *) addr, &len) != 0) {
        die("bind");
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) != 0) {
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    }
    if (setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0) {
        die("setsockopt UDP_GRO");
    }
    return fd;
}

static void setup_rx(void)
{
    rx_fd = rx_socket(&rx_addr);
}

/* The kernel must know UDP_SEGMENT at all, else nothing here means anything */
static void require_gso(int fd)
{
    int v = (int) seg_size;
    if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, sizeof(v)) != 0) {
        printf("RESULT pid=%ld mode=none status=unavailable -- setsockopt(UDP_SEGMENT): %s\n", (long) getpid(),
               strerror(errno));
        exit(3);
    }
    v = 0;
    (void) setsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, sizeof(v));
}

typedef struct {
    uint8_t *data;
    size_t len;
    struct iovec iov;
    union {
        char c[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr a;
    } ctl;
    int seg; /* carries UDP_SEGMENT */
    const void *to; /* where it goes */
} msg_t;

/* message number |idx| to |to|: segmented (nsegs x seg_size) or plain */
static void msg_build_to(msg_t *mm, struct msghdr *h, unsigned idx, int segmented, struct sockaddr_in *to)
{
    unsigned s;

    mm->seg = segmented;
    mm->len = segmented ? seg_size * nsegs : PLAIN_LEN;
    mm->data = malloc(mm->len);
    if (!mm->data) {
        die("malloc");
    }
    if (segmented) {
        for (s = 0; s < nsegs; s++) {
            fill(mm->data + s * seg_size, seg_size, idx, s);
        }
    } else {
        fill(mm->data, mm->len, idx, 0);
    }
    mm->iov.iov_base = mm->data;
    mm->iov.iov_len = mm->len;
    memset(h, 0, sizeof(*h));
    mm->to = to;
    h->msg_name = to;
    h->msg_namelen = sizeof(*to);
    h->msg_iov = &mm->iov;
    h->msg_iovlen = 1;
    if (segmented) {
        struct cmsghdr *c;
        uint16_t g = (uint16_t) seg_size;
        memset(&mm->ctl, 0, sizeof(mm->ctl));
        h->msg_control = mm->ctl.c;
        h->msg_controllen = sizeof(mm->ctl.c);
        c = CMSG_FIRSTHDR(h);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        memcpy(CMSG_DATA(c), &g, sizeof(g));
    }
}

static void msg_build(msg_t *mm, struct msghdr *h, unsigned idx, int segmented)
{
    msg_build_to(mm, h, idx, segmented, &rx_addr);
}

static void outcome(unsigned idx, const msg_t *mm, const char *call, int ok, int e)
{
    if (ok) {
        want[idx] = mm->len;
        if (mm->seg) {
            seg_ok++;
        } else {
            plain_ok++;
        }
    } else {
        note_errno(e);
        if (mm->seg) {
            seg_failed++;
        } else {
            plain_failed++;
        }
    }
    printf("MSG %u kind=%s call=%s result=%s\n", idx, mm->to != &rx_addr ? "self" : mm->seg ? "seg" : "plain", call,
           ok ? "ok" : ename(e));
}

static int result(const char *mode, unsigned nmsgs)
{
    unsigned i;

    drain(0.3);
    for (i = 0; i < nmsgs; i++) {
        if (got[i] != want[i]) {
            note_bad("message %u: %zu bytes arrived, %zu expected", i, got[i], want[i]);
        }
    }
    printf("RESULT pid=%ld mode=%s seg_ok=%lu seg_failed=%lu plain_ok=%lu plain_failed=%lu errnos=%s rx=%s%s%s\n",
           (long) getpid(), mode, seg_ok, seg_failed, plain_ok, plain_failed, errnos[0] ? errnos : "none",
           bad[0] ? "BAD" : "ok", bad[0] ? " " : "", bad);
    fflush(stdout);
    return bad[0] ? 1 : 0;
}

/* sendmsg(), one at a time, retried on back-pressure */
static ssize_t send_one(int fd, struct msghdr *h)
{
    for (;;) {
        ssize_t r = sendmsg(fd, h, 0);
        if (r < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)) {
            continue;
        }
        return r;
    }
}

static int mode_sendmsg(unsigned n, int self)
{
    static msg_t mm[MAX_MSGS];
    static struct msghdr h[MAX_MSGS];
    static struct sockaddr_in own;
    struct mmsghdr v;
    int fd;
    unsigned i;
    ssize_t r;

    if (self) {
        fd = self_fd = rx_socket(&own);
        n++; /* message 0 goes to ourselves */
    } else {
        fd = udp_socket();
    }
    require_gso(fd);
    for (i = 0; i < n; i++) {
        if (self && i == 0) {
            msg_build_to(&mm[i], &h[i], i, 1, &own);
        } else {
            msg_build(&mm[i], &h[i], i, 1);
        }
        r = send_one(fd, &h[i]);
        outcome(i, &mm[i], "sendmsg", r == (ssize_t) mm[i].len, r < 0 ? errno : 0);
        drain(0.02); /* keep the receive buffer empty */
    }
    msg_build(&mm[n], &h[n], n, 0);
    r = send_one(fd, &h[n]);
    outcome(n, &mm[n], "sendmsg", r == (ssize_t) mm[n].len, r < 0 ? errno : 0);
    msg_build(&mm[n + 1], &h[n + 1], n + 1, 0);
    v.msg_hdr = h[n + 1];
    v.msg_len = 0;
    r = sendmmsg(fd, &v, 1, 0);
    outcome(n + 1, &mm[n + 1], "sendmmsg", r == 1, r < 0 ? errno : 0);
    return result(self ? "selfsend" : "sendmsg", n + 2);
}

static int mode_sendmmsg(unsigned n)
{
    static msg_t mm[MAX_MSGS];
    static struct mmsghdr v[MAX_MSGS];
    unsigned total = 2 * n, pos = 0, i;
    int fd = udp_socket();

    require_gso(fd);
    for (i = 0; i < total; i++) {
        msg_build(&mm[i], &v[i].msg_hdr, i, (i % 2) == 0);
    }
    while (pos < total) {
        int r = sendmmsg(fd, v + pos, total - pos, 0);
        if (r < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)) {
            continue;
        }
        if (r < 0) {
            int e = errno;
            printf("CALL start=%u n=%u ret=-1 errno=%s\n", pos, total - pos, ename(e));
            outcome(pos, &mm[pos], "sendmmsg", 0, e);
            pos++;
            continue;
        }
        printf("CALL start=%u n=%u ret=%d\n", pos, total - pos, r);
        for (i = pos; i < pos + (unsigned) r; i++) {
            outcome(i, &mm[i], "sendmmsg", v[i].msg_len == mm[i].len, 0);
        }
        pos += (unsigned) r;
        drain(0.02);
    }
    return result("sendmmsg", total);
}

static pthread_barrier_t start_line; /* the threads send at once */

typedef struct {
    unsigned k;
    unsigned long ok, failed;
    int e;
} thr_t;

static void *thread_main(void *arg)
{
    thr_t *t = arg;
    msg_t mm;
    struct msghdr h;
    int fd = udp_socket();
    unsigned i;

    msg_build(&mm, &h, 0, 1);
    pthread_barrier_wait(&start_line);
    for (i = 0; i < t->k; i++) {
        ssize_t r = send_one(fd, &h);
        if (r == (ssize_t) mm.len) {
            t->ok++;
        } else {
            t->failed++;
            t->e = errno;
        }
    }
    close(fd);
    free(mm.data);
    return NULL;
}

static int mode_threads(unsigned nt, unsigned k)
{
    pthread_t tid[64];
    thr_t t[64];
    unsigned i;
    int fd = udp_socket();

    require_gso(fd);
    close(fd);
    memset(t, 0, sizeof(t));
    pthread_barrier_init(&start_line, NULL, nt);
    for (i = 0; i < nt; i++) {
        t[i].k = k;
        if (pthread_create(&tid[i], NULL, thread_main, &t[i]) != 0) {
            die("pthread_create");
        }
    }
    for (i = 0; i < nt; i++) {
        pthread_join(tid[i], NULL);
        seg_ok += t[i].ok;
        seg_failed += t[i].failed;
        if (t[i].failed) {
            note_errno(t[i].e);
        }
        printf("THREAD %u ok=%lu failed=%lu\n", i, t[i].ok, t[i].failed);
    }
    /* nothing is compared: the receiver is not read in this mode */
    printf("RESULT pid=%ld mode=threads seg_ok=%lu seg_failed=%lu plain_ok=0 plain_failed=0 errnos=%s rx=ok\n",
           (long) getpid(), seg_ok, seg_failed, errnos[0] ? errnos : "none");
    return 0;
}

static unsigned arg(const char *s, unsigned lo, unsigned hi)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "gso_shim_check: '%s' is not in %u..%u\n", s, lo, hi);
        exit(2);
    }
    return (unsigned) v;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: gso_shim_check sendmsg N | selfsend N | sendmmsg N | threads T K\n");
        return 2;
    }
    setup_rx();
    if (0 == strcmp(argv[1], "sendmsg")) {
        return mode_sendmsg(arg(argv[2], 1, MAX_MSGS - 2), 0);
    }
    if (0 == strcmp(argv[1], "selfsend")) {
        return mode_sendmsg(arg(argv[2], 1, MAX_MSGS - 3), 1);
    }
    if (0 == strcmp(argv[1], "sendmmsg")) {
        return mode_sendmmsg(arg(argv[2], 1, MAX_MSGS / 2));
    }
    if (0 == strcmp(argv[1], "threads") && argc == 4) {
        return mode_threads(arg(argv[2], 1, 64), arg(argv[3], 1, 100000));
    }
    fprintf(stderr, "usage: gso_shim_check sendmsg N | selfsend N | sendmmsg N | threads T K\n");
    return 2;
}
