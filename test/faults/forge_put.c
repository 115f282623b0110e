/*
 * forge_put: an on-path attacker against the usnic BTL's emulated PUT.
 * It watches the PUT datagrams a running job exchanges on 127.0.0.1
 * (a raw IPPROTO_UDP socket sees a copy of each) and answers every one at
 * once with forgeries that take the next sequence numbers of the same
 * stream, so that they arrive inside the receiver's window, ahead of the
 * genuine datagrams with those numbers:
 *
 *   wrong-key   the genuine region and address, a different key
 *   out-of-range the genuine key, the address 2 MiB before and after
 *   stale-key   the key of a region seen more than STALE_MS ago (ob1 has
 *               deregistered it by then)
 *   wrong-peer  the genuine key and address, claimed by another rank of
 *               the job, with that rank's next sequence number
 *
 * Their payload is 0xEE bytes: if any were written, the job's payload or
 * guard-zone checks would see it.  Every forgery must be dropped without
 * taking its sequence number, or the genuine datagram would be dropped as
 * a duplicate instead.
 *
 *   forge_put SECONDS PORT...        (data ports of the ranks, 127.0.0.1)
 *
 * Prints one line per kind and a total; exits 1 if it saw no PUT at all.
 * Needs root (CAP_NET_RAW).  Sends only to the given ports on 127.0.0.1.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../btl_usnic_proto.h"

#define MAX_PORTS 64
#define MAX_PEERS 64
#define STALE_MS 50
#define MAX_KEYS 4096

enum { WRONG_KEY, OUT_OF_RANGE, STALE_KEY, WRONG_PEER, NKINDS };
static const char *kind_name[NKINDS] = {"wrong-key", "out-of-range", "stale-key", "wrong-peer"};
static long sent[NKINDS];
static unsigned kinds_on = (1u << NKINDS) - 1; /* FORGE_KINDS=name,name limits them */

static uint16_t ports[MAX_PORTS];
static int nports;
static int tx = -1;

/* Highest sequence number seen per (sender id, destination port) */
typedef struct {
    uint32_t sender;
    uint16_t port;
    uint32_t seq;
    int used;
} stream_t;
static stream_t streams[MAX_PEERS * MAX_PORTS];

/* Keys seen, with when */
typedef struct {
    uint32_t region;
    uint64_t key;
    double seen;
} key_t_;
static key_t_ keys[MAX_KEYS];
static int nkeys, key_next;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double) ts.tv_sec + 1e-6 * (double) ts.tv_nsec;
}

static int is_job_port(uint16_t port)
{
    for (int i = 0; i < nports; ++i) {
        if (ports[i] == port) {
            return 1;
        }
    }
    return 0;
}

static stream_t *stream(uint32_t sender, uint16_t port)
{
    for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); ++i) {
        stream_t *s = &streams[i];
        if (s->used && s->sender == sender && s->port == port) {
            return s;
        }
        if (!s->used) {
            s->used = 1;
            s->sender = sender;
            s->port = port;
            s->seq = 0;
            return s;
        }
    }
    return NULL;
}

static void remember_key(uint32_t region, uint64_t key)
{
    for (int i = 0; i < nkeys; ++i) {
        if (keys[i].region == region && keys[i].key == key) {
            return;
        }
    }
    keys[key_next] = (key_t_){region, key, now_ms()};
    key_next = (key_next + 1) % MAX_KEYS;
    if (nkeys < MAX_KEYS) {
        ++nkeys;
    }
}

static const key_t_ *stale_key(uint64_t not_this)
{
    double t = now_ms();
    for (int i = 0; i < nkeys; ++i) {
        if (t - keys[i].seen > STALE_MS && keys[i].key != not_this) {
            return &keys[i];
        }
    }
    return NULL;
}

/* Send |ph| (a PUT header + |payload| bytes of 0xEE) from |src_port| to |dst_port| */
static void send_forgery(int kind, const opal_btl_usnic_put_hdr_t *ph, size_t payload, uint16_t src_port,
                         uint16_t dst_port)
{
    if (!(kinds_on & (1u << kind))) {
        return;
    }
    uint8_t pkt[sizeof(struct udphdr) + 1500];
    if (payload > sizeof(pkt) - sizeof(struct udphdr) - sizeof(*ph)) {
        payload = sizeof(pkt) - sizeof(struct udphdr) - sizeof(*ph);
    }
    struct udphdr *udp = (struct udphdr *) pkt;
    size_t len = sizeof(*udp) + sizeof(*ph) + payload;
    udp->source = htons(src_port);
    udp->dest = htons(dst_port);
    udp->len = htons((uint16_t) len);
    udp->check = 0;
    memcpy(pkt + sizeof(*udp), ph, sizeof(*ph));
    memset(pkt + sizeof(*udp) + sizeof(*ph), 0xee, payload);
    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* never anywhere else */
    to.sin_port = htons(dst_port);
    if (is_job_port(dst_port) && sendto(tx, pkt, len, 0, (struct sockaddr *) &to, sizeof(to)) == (ssize_t) len) {
        ++sent[kind];
    }
}

/* A genuine PUT went from |src_port| to |dst_port|: answer it */
static void attack(const opal_btl_usnic_put_hdr_t *genuine, size_t payload, uint16_t src_port, uint16_t dst_port)
{
    uint32_t sender = le32toh(genuine->hdr.sender_id);
    uint32_t seq = le32toh(genuine->hdr.seq);
    uint64_t key = le64toh(genuine->key);
    uint64_t addr = le64toh(genuine->addr);
    opal_btl_usnic_put_hdr_t f = *genuine;

    f.hdr.seq = htole32(seq + 1);
    f.key = htole64(key ^ 0x5a5a000000000001ull);
    send_forgery(WRONG_KEY, &f, payload, src_port, dst_port);

    f = *genuine;
    f.hdr.seq = htole32(seq + 2);
    f.addr = htole64(addr - 2 * 1024 * 1024);
    send_forgery(OUT_OF_RANGE, &f, payload, src_port, dst_port);
    f.addr = htole64(addr + 2 * 1024 * 1024);
    send_forgery(OUT_OF_RANGE, &f, payload, src_port, dst_port);

    const key_t_ *old = stale_key(key);
    if (NULL != old) {
        f = *genuine;
        f.hdr.seq = htole32(seq + 3);
        f.region_id = htole32(old->region);
        f.key = htole64(old->key);
        send_forgery(STALE_KEY, &f, payload, src_port, dst_port);
    }

    /* another sender that also talks to this destination */
    for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]) && streams[i].used; ++i) {
        if (streams[i].port == dst_port && streams[i].sender != sender) {
            f = *genuine;
            f.hdr.sender_id = htole32(streams[i].sender);
            f.hdr.seq = htole32(streams[i].seq + 1);
            send_forgery(WRONG_PEER, &f, payload, src_port, dst_port);
            break;
        }
    }
    remember_key(le32toh(genuine->region_id), key);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s SECONDS PORT...\n", argv[0]);
        return 2;
    }
    double seconds = atof(argv[1]);
    const char *only = getenv("FORGE_KINDS");
    if (NULL != only && '\0' != only[0]) {
        kinds_on = 0;
        for (int k = 0; k < NKINDS; ++k) {
            if (NULL != strstr(only, kind_name[k])) {
                kinds_on |= 1u << k;
            }
        }
    }
    for (int i = 2; i < argc && nports < MAX_PORTS; ++i) {
        int p = atoi(argv[i]);
        if (p <= 0 || p > 65535) {
            fprintf(stderr, "forge_put: bad port %s\n", argv[i]);
            return 2;
        }
        ports[nports++] = (uint16_t) p;
    }
    int rx = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
    tx = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
    if (rx < 0 || tx < 0) {
        perror("forge_put: raw socket (needs root)");
        return 1;
    }
    struct sockaddr_in lo;
    memset(&lo, 0, sizeof(lo));
    lo.sin_family = AF_INET;
    lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (0 != bind(tx, (struct sockaddr *) &lo, sizeof(lo))) {
        perror("forge_put: bind");
        return 1;
    }
    long seen = 0;
    uint8_t pkt[65536];
    double t0 = now_ms();
    while (now_ms() - t0 < 1e3 * seconds) {
        struct pollfd pfd = {.fd = rx, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0) {
            continue;
        }
        ssize_t n = recv(rx, pkt, sizeof(pkt), MSG_DONTWAIT);
        const struct iphdr *ip = (const struct iphdr *) pkt;
        if (n < (ssize_t) sizeof(*ip) || IPPROTO_UDP != ip->protocol || htonl(INADDR_LOOPBACK) != ip->saddr ||
            htonl(INADDR_LOOPBACK) != ip->daddr) {
            continue;
        }
        size_t ihl = 4u * ip->ihl;
        const struct udphdr *udp = (const struct udphdr *) (pkt + ihl);
        if ((size_t) n < ihl + sizeof(*udp) + sizeof(opal_btl_usnic_hdr_t) || !is_job_port(ntohs(udp->source)) ||
            !is_job_port(ntohs(udp->dest))) {
            continue;
        }
        const opal_btl_usnic_hdr_t *h = (const opal_btl_usnic_hdr_t *) (pkt + ihl + sizeof(*udp));
        size_t ulen = ntohs(udp->len) - sizeof(*udp);
        if (OPAL_BTL_USNIC_MAGIC != le16toh(h->magic) || OPAL_BTL_USNIC_PKT_ACK == h->type) {
            continue;
        }
        /* our own forgeries carry 0xEE payloads: never answer them */
        if (ulen > sizeof(*h) && 0xee == ((const uint8_t *) h)[ulen - 1] && 0xee == ((const uint8_t *) h)[ulen - 2] &&
            0xee == ((const uint8_t *) h)[ulen - 3]) {
            continue;
        }
        stream_t *s = stream(le32toh(h->sender_id), ntohs(udp->dest));
        uint32_t seq = le32toh(h->seq);
        if (NULL != s && (int32_t) (seq - s->seq) > 0) {
            s->seq = seq;
        }
        if (OPAL_BTL_USNIC_PKT_PUT == h->type && ulen >= sizeof(opal_btl_usnic_put_hdr_t)) {
            ++seen;
            attack((const opal_btl_usnic_put_hdr_t *) h, ulen - sizeof(opal_btl_usnic_put_hdr_t), ntohs(udp->source),
                   ntohs(udp->dest));
        }
    }
    long total = 0;
    for (int k = 0; k < NKINDS; ++k) {
        printf("forge_put: %s %ld\n", kind_name[k], sent[k]);
        total += sent[k];
    }
    printf("forge_put: saw %ld genuine PUT datagrams, sent %ld forgeries\n", seen, total);
    close(rx);
    close(tx);
    return seen > 0 ? 0 : 1;
}
