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
#include "rawudp.h"

#define MAX_PEERS 64
#define STALE_MS 50
#define MAX_KEYS 4096

enum { WRONG_KEY, OUT_OF_RANGE, STALE_KEY, WRONG_PEER, NKINDS };
static const char *kind_name[NKINDS] = {"wrong-key", "out-of-range", "stale-key", "wrong-peer"};
static long sent[NKINDS];
static unsigned kinds_on = (1u << NKINDS) - 1; /* FORGE_KINDS=name,name limits them */

static rawudp_ports_t ports;
static int tx = -1;

/* Highest sequence number seen per (sender id, destination port) */
typedef struct {
    uint64_t sender;
    uint16_t port;
    uint32_t seq;
    int used;
} stream_t;
static stream_t streams[MAX_PEERS * RAWUDP_MAX_PORTS];

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
    return rawudp_now_ms();
}

static stream_t *stream(uint64_t sender, uint16_t port)
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
    uint8_t pkt[1500];
    opal_btl_usnic_put_hdr_t h = *ph;
    if (payload > sizeof(pkt) - sizeof(h)) {
        /* shorter than the genuine one (a 65000-byte datagram of the socket
         * wire): its header says so, or the framing check alone would drop
         * it as truncated, before the PUT checks this tool is for */
        payload = sizeof(pkt) - sizeof(h);
        h.hdr.payload_len = htole16((uint16_t) payload);
    }
    memcpy(pkt, &h, sizeof(h));
    memset(pkt + sizeof(h), 0xee, payload);
    if (rawudp_is_job_port(&ports, dst_port) && rawudp_send(tx, src_port, dst_port, pkt, sizeof(h) + payload)) {
        ++sent[kind];
    }
}

/* A genuine PUT went from |src_port| to |dst_port|: answer it */
static void attack(const opal_btl_usnic_put_hdr_t *genuine, size_t payload, uint16_t src_port, uint16_t dst_port)
{
    uint64_t sender = le64toh(genuine->hdr.sender);
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
            f.hdr.sender = htole64(streams[i].sender);
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
    if (0 != rawudp_ports_parse(&ports, argc - 2, argv + 2, "forge_put")) {
        return 2;
    }
    int rx = rawudp_open_rx("forge_put");
    tx = rawudp_open_tx("forge_put");
    if (rx < 0 || tx < 0) {
        return 1;
    }
    long seen = 0;
    double t0 = now_ms();
    while (now_ms() - t0 < 1e3 * seconds) {
        uint16_t sport, dport;
        size_t ulen;
        const uint8_t *payload = rawudp_next(rx, &ports, 50, &sport, &dport, &ulen);
        if (NULL == payload || ulen < sizeof(opal_btl_usnic_hdr_t)) {
            continue;
        }
        const opal_btl_usnic_hdr_t *h = (const opal_btl_usnic_hdr_t *) payload;
        if (OPAL_BTL_USNIC_MAGIC != le16toh(h->magic) || OPAL_BTL_USNIC_PKT_ACK == h->type) {
            continue;
        }
        /* our own forgeries carry 0xEE payloads: never answer them */
        if (ulen > sizeof(*h) && 0xee == ((const uint8_t *) h)[ulen - 1] && 0xee == ((const uint8_t *) h)[ulen - 2] &&
            0xee == ((const uint8_t *) h)[ulen - 3]) {
            continue;
        }
        stream_t *s = stream(le64toh(h->sender), dport);
        uint32_t seq = le32toh(h->seq);
        if (NULL != s && (int32_t) (seq - s->seq) > 0) {
            s->seq = seq;
        }
        if (OPAL_BTL_USNIC_PKT_PUT == h->type && ulen >= sizeof(opal_btl_usnic_put_hdr_t)) {
            ++seen;
            attack((const opal_btl_usnic_put_hdr_t *) h, ulen - sizeof(opal_btl_usnic_put_hdr_t), sport, dport);
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
