/*
 * gso_shim.c - an LD_PRELOAD library that makes UDP segmentation offload
 * (GSO) sends fail, to test a sender's fallback without a device that
 * refuses GSO.
 *
 * It wraps sendmsg() and sendmmsg().  A message whose control data holds
 * a SOL_UDP / UDP_SEGMENT control message (a "segmented message": the
 * per-call way of asking the kernel to cut one send into datagrams) is
 * refused with errno GSO_SHIM_ERRNO, without anything being sent, for the
 * first GSO_SHIM_FAILS such messages of the process (after the first
 * GSO_SHIM_SKIP of them, which pass).  Every other call, and every other
 * message, goes to the C library untouched.  UDP_SEGMENT set as a socket
 * option (setsockopt) followed by send()/sendto() is NOT seen: only the
 * control message is.
 *
 * Environment (read once, at load):
 *   GSO_SHIM_ERRNO   EIO (default), EINVAL, EMSGSIZE, or a number 1..4095
 *   GSO_SHIM_FAILS   segmented messages to refuse: 1 (default), N >= 0,
 *                    -1 = all of them
 *   GSO_SHIM_SKIP    segmented messages to let through before the first
 *                    refusal (default 0)
 *   GSO_SHIM_REPORT  a file; at exit (a destructor: normal exit() or a
 *                    return from main, not _exit() or a signal) one line
 *                      gso-shim pid=P failed=F passed=S
 *                    is appended to it (one write(), O_APPEND: lines of
 *                    concurrent processes do not mix).  failed = segmented
 *                    messages refused here; passed = segmented messages
 *                    the kernel accepted (sendmsg() returned >= 0, or
 *                    among the first N of a sendmmsg() that returned N).
 *   GSO_SHIM_SPARE_SELF  1: a segmented message addressed to the sending
 *                    socket's own address (a sender probing the kernel
 *                    by sending to itself, e.g. to measure what a
 *                    coalesced receive is charged) is passed through and
 *                    counted as passed, but uses no skip and no refusal:
 *                    the refusals then hit messages to peers.  Default 0.
 *   GSO_SHIM_VERBOSE 1: one line on stderr per refusal
 * A value it cannot read makes the process print why and exit with
 * status 98 at load: a mistyped errno must not pass as the default.
 *
 * sendmmsg(): the messages are checked in order.  If the first one is to
 * be refused, the call fails with -1 and the errno, like the kernel when
 * the first message fails.  If a later one would be refused, only the
 * messages before it are handed on, and the call returns how many of
 * those were sent (the kernel's behaviour when a later message fails);
 * the caller's next call starts with that message, which is refused then.
 *
 * Thread safe: the budget and the counters are C11 atomics.  A process
 * forked after load starts with zero counts and the whole budget (it is
 * another process; its own line is written when it exits).
 *
 * Build: cc -shared -fPIC -O2 -Wall -Wextra -Werror -o libgso_shim.so
 *        gso_shim.c -ldl -lpthread
 * (test/faults/build-gso-shim.sh does that.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SOL_UDP
#define SOL_UDP IPPROTO_UDP
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
typedef int (*sendmmsg_fn)(int, struct mmsghdr *, unsigned int, int);

static sendmsg_fn real_sendmsg;
static sendmmsg_fn real_sendmmsg;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int cfg_errno = EIO;
static long cfg_fails = 1;   /* -1: all */
static long cfg_skip = 0;
static int cfg_verbose = 0;
static int cfg_spare_self = 0;
static char cfg_report[4096];

/* segmented messages still to let through before refusing (skip), and
 * refusals left (-1: unlimited) */
static atomic_long skip_left;
static atomic_long fails_left;
static atomic_ulong n_failed;
static atomic_ulong n_passed;

static void die_config(const char *name, const char *value, const char *want)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "gso-shim: pid %ld: %s='%s' is not %s\n", (long) getpid(), name,
                     value, want);
    if (n > 0) {
        ssize_t w = write(2, line, (size_t) n < sizeof(line) ? (size_t) n : sizeof(line) - 1);
        (void) w;
    }
    _exit(98);
}

static long parse_long(const char *name, const char *s, long min, long max, const char *want)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        die_config(name, s, want);
    }
    return v;
}

static void reset_counts(void)
{
    atomic_store(&skip_left, cfg_skip);
    atomic_store(&fails_left, cfg_fails);
    atomic_store(&n_failed, 0);
    atomic_store(&n_passed, 0);
}

static void init_once(void)
{
    const char *s;

    real_sendmsg = (sendmsg_fn) dlsym(RTLD_NEXT, "sendmsg");
    real_sendmmsg = (sendmmsg_fn) dlsym(RTLD_NEXT, "sendmmsg");
    if (!real_sendmsg || !real_sendmmsg) {
        die_config("dlsym(RTLD_NEXT)", "sendmsg/sendmmsg", "found");
    }
    s = getenv("GSO_SHIM_ERRNO");
    if (s && *s) {
        if (0 == strcasecmp(s, "EIO")) {
            cfg_errno = EIO;
        } else if (0 == strcasecmp(s, "EINVAL")) {
            cfg_errno = EINVAL;
        } else if (0 == strcasecmp(s, "EMSGSIZE")) {
            cfg_errno = EMSGSIZE;
        } else {
            cfg_errno = (int) parse_long("GSO_SHIM_ERRNO", s, 1, 4095, "EIO, EINVAL, EMSGSIZE or 1..4095");
        }
    }
    s = getenv("GSO_SHIM_FAILS");
    if (s && *s) {
        cfg_fails = parse_long("GSO_SHIM_FAILS", s, -1, 1L << 40, "-1 or a count >= 0");
    }
    s = getenv("GSO_SHIM_SKIP");
    if (s && *s) {
        cfg_skip = parse_long("GSO_SHIM_SKIP", s, 0, 1L << 40, "a count >= 0");
    }
    s = getenv("GSO_SHIM_SPARE_SELF");
    if (s && *s) {
        cfg_spare_self = (int) parse_long("GSO_SHIM_SPARE_SELF", s, 0, 1, "0 or 1");
    }
    s = getenv("GSO_SHIM_VERBOSE");
    cfg_verbose = s && *s && strcmp(s, "0") != 0;
    s = getenv("GSO_SHIM_REPORT");
    if (s && *s) {
        if (strlen(s) >= sizeof(cfg_report)) {
            die_config("GSO_SHIM_REPORT", s, "a path shorter than 4096 bytes");
        }
        strcpy(cfg_report, s);
    }
    reset_counts();
    pthread_atfork(NULL, NULL, reset_counts);
}

static void init(void)
{
    pthread_once(&once, init_once);
}

__attribute__((constructor)) static void gso_shim_load(void)
{
    init();
}

__attribute__((destructor)) static void gso_shim_unload(void)
{
    char line[128];
    int fd, n, saved = errno;

    if (cfg_report[0] == '\0') {
        return;
    }
    n = snprintf(line, sizeof(line), "gso-shim pid=%ld failed=%lu passed=%lu\n", (long) getpid(),
                 atomic_load(&n_failed), atomic_load(&n_passed));
    fd = open(cfg_report, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0 && n > 0) {
        ssize_t w = write(fd, line, (size_t) n);
        (void) w;
    }
    if (fd >= 0) {
        close(fd);
    }
    errno = saved;
}

/* Is |m| addressed to |fd|'s own address? */
static int to_self(int fd, const struct msghdr *m)
{
    struct sockaddr_storage own;
    socklen_t len = sizeof(own);

    if (!m->msg_name || m->msg_namelen == 0 || getsockname(fd, (struct sockaddr *) &own, &len) != 0) {
        return 0;
    }
    if (own.ss_family == AF_INET && m->msg_namelen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *a = (const struct sockaddr_in *) &own, *b = m->msg_name;
        return b->sin_family == AF_INET && a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    if (own.ss_family == AF_INET6 && m->msg_namelen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *) &own, *b = m->msg_name;
        return b->sin6_family == AF_INET6 && a->sin6_port == b->sin6_port &&
               0 == memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr));
    }
    return 0;
}

enum { PLAIN = 0, SEGMENTED = 1, SPARED = 2 };

/* PLAIN: no SOL_UDP / UDP_SEGMENT control message; SEGMENTED: one, to be
 * decided on; SPARED: one, but to the socket itself (GSO_SHIM_SPARE_SELF) */
static int kind(int fd, const struct msghdr *m)
{
    struct cmsghdr *c;

    if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr)) {
        return PLAIN;
    }
    for (c = CMSG_FIRSTHDR((struct msghdr *) m); c; c = CMSG_NXTHDR((struct msghdr *) m, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_SEGMENT) {
            return cfg_spare_self && to_self(fd, m) ? SPARED : SEGMENTED;
        }
    }
    return PLAIN;
}

/* Decide for the next segmented message: refuse it?  Consumes a skip
 * or a refusal. */
static int refuse_next(void)
{
    long v = atomic_load(&skip_left);

    while (v > 0) {
        if (atomic_compare_exchange_weak(&skip_left, &v, v - 1)) {
            return 0;
        }
    }
    v = atomic_load(&fails_left);
    for (;;) {
        if (v == -1) {
            return 1;
        }
        if (v <= 0) {
            return 0;
        }
        if (atomic_compare_exchange_weak(&fails_left, &v, v - 1)) {
            return 1;
        }
    }
}

/* A segmented message that went out past the first of a sendmmsg():
 * it used a skip if one is left (none left: it passed because no
 * refusals were) */
static void take_skip(void)
{
    long v = atomic_load(&skip_left);

    while (v > 0 && !atomic_compare_exchange_weak(&skip_left, &v, v - 1)) {
    }
}

/* Only look: would the segmented message after |ahead| more that pass be
 * refused?  (Those |ahead| pass only on skips or with no refusals left.) */
static int would_refuse(long ahead)
{
    long f;

    if (atomic_load(&skip_left) > ahead) {
        return 0;
    }
    f = atomic_load(&fails_left);
    return f == -1 || f > 0;
}

static void refused(int fd, const char *call)
{
    unsigned long k = atomic_fetch_add(&n_failed, 1) + 1;

    if (cfg_verbose) {
        char line[160];
        int n = snprintf(line, sizeof(line), "gso-shim: pid %ld: %s on fd %d refused with errno %d (%s), #%lu\n",
                         (long) getpid(), call, fd, cfg_errno, strerrorname_np(cfg_errno), k);
        if (n > 0) {
            ssize_t w = write(2, line, (size_t) n < sizeof(line) ? (size_t) n : sizeof(line) - 1);
            (void) w;
        }
    }
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    ssize_t r;
    int k;

    init();
    k = kind(fd, msg);
    if (k == PLAIN) {
        return real_sendmsg(fd, msg, flags);
    }
    if (k == SEGMENTED && refuse_next()) {
        refused(fd, "sendmsg");
        errno = cfg_errno;
        return -1;
    }
    r = real_sendmsg(fd, msg, flags);
    if (r >= 0) {
        atomic_fetch_add(&n_passed, 1);
    }
    return r;
}

int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
    unsigned int i, limit = vlen;
    long ahead = 0; /* segmented messages after the first planned to pass */
    int r;

    init();
    if (!vec) {
        return real_sendmmsg(fd, vec, vlen, flags);
    }
    for (i = 0; i < vlen; i++) {
        if (kind(fd, &vec[i].msg_hdr) != SEGMENTED) {
            continue;
        }
        if (i == 0) {
            if (refuse_next()) {
                refused(fd, "sendmmsg");
                errno = cfg_errno;
                return -1;
            }
        } else if (would_refuse(ahead)) {
            limit = i; /* hand on the messages before it; it leads the next call */
            break;
        } else {
            ahead++;
        }
    }
    r = real_sendmmsg(fd, vec, limit, flags);
    if (r > 0) {
        unsigned long passed = 0;
        /* the one at index 0 was decided above; every later segmented
         * message that went out takes its skip now, so the count of
         * skips stays exact */
        for (i = 0; i < (unsigned int) r && i < limit; i++) {
            int k = kind(fd, &vec[i].msg_hdr);
            if (k == SEGMENTED && i > 0) {
                take_skip();
            }
            if (k != PLAIN) {
                passed++;
            }
        }
        atomic_fetch_add(&n_passed, passed);
    }
    return r;
}
