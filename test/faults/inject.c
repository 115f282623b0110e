/*
 * Hostile datagrams for the usnic BTL: sends malformed, foreign, forged
 * and oversized datagrams to the given UDP ports on 127.0.0.1 only.
 *
 *   inject ROUNDS PORT...
 *
 * PORTs are the job's, in rank order, two per rank (priority, data).  A
 * forgery that claims to come from rank s leaves from rank s's port of the
 * same channel (a raw socket writes its own UDP header), so that it gets
 * past the source check and reaches the checks behind it (framing, the
 * tag); one kind leaves from the tool's own socket and must fail the
 * source check.  Every kind is sent ROUNDS times to every port; none of
 * them may change what the job computes.  Prints one line per kind with
 * the number sent.  Needs root (CAP_NET_RAW).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../btl_usnic_proto.h"
#include "rawudp.h"

typedef struct {
    const char *name;
    size_t (*build)(uint8_t *buf, uint64_t sender, unsigned round);
    bool own_source; /* from the tool's own socket, not the claimed sender's port */
} forgery_t;

static void header(opal_btl_usnic_hdr_t *h, uint8_t type, uint64_t sender, uint32_t seq, uint16_t payload)
{
    memset(h, 0, sizeof(*h));
    h->magic = htole16(OPAL_BTL_USNIC_MAGIC);
    h->version = OPAL_BTL_USNIC_PROTO_VERSION;
    h->type = type;
    h->nonce = htole64(1 + seq);
    for (size_t i = 0; i < sizeof(h->mac); ++i) {
        h->mac[i] = (uint8_t) rand(); /* no key: a guess */
    }
    h->sender = htole64(sender);
    h->seq = htole32(seq);
    h->payload_len = htole16(payload);
}

static size_t garbage(uint8_t *buf, uint64_t sender, unsigned round)
{
    (void) sender;
    size_t len = 1 + (round * 97u) % 1400u;
    for (size_t i = 0; i < len; ++i) {
        buf[i] = (uint8_t) rand();
    }
    return len;
}

static size_t truncated(uint8_t *buf, uint64_t sender, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, OPAL_BTL_USNIC_PKT_FRAG, sender, 0, 100);
    return round % sizeof(opal_btl_usnic_hdr_t); /* shorter than the header */
}

static size_t short_payload(uint8_t *buf, uint64_t sender, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, OPAL_BTL_USNIC_PKT_FRAG, sender, round, 1000);
    return sizeof(opal_btl_usnic_hdr_t) + 10; /* says 1000 bytes, carries 10 */
}

static size_t bad_magic(uint8_t *buf, uint64_t sender, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, OPAL_BTL_USNIC_PKT_FRAG, sender, round, 0);
    ((opal_btl_usnic_hdr_t *) buf)->magic = htole16(0xbeef);
    return sizeof(opal_btl_usnic_hdr_t);
}

static size_t bad_version(uint8_t *buf, uint64_t sender, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, OPAL_BTL_USNIC_PKT_FRAG, sender, round, 0);
    ((opal_btl_usnic_hdr_t *) buf)->version = 99;
    return sizeof(opal_btl_usnic_hdr_t);
}

/* Well formed, from the claimed sender's own port, but with a tag made
 * without its key: what another job, or anyone who guesses, can send */
static size_t guessed_tag(uint8_t *buf, uint64_t sender, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, OPAL_BTL_USNIC_PKT_FRAG, sender, round, 4);
    memcpy(buf + sizeof(opal_btl_usnic_hdr_t), "evil", 4);
    return sizeof(opal_btl_usnic_hdr_t) + 4;
}

static size_t bad_type(uint8_t *buf, uint64_t sender, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, 77, sender, round, 0);
    return sizeof(opal_btl_usnic_hdr_t);
}

static size_t unknown_sender(uint8_t *buf, uint64_t sender, unsigned round)
{
    /* a vpid our job does not have, or a rank of a job never connected */
    uint64_t job = (0 == round % 2) ? (sender >> 32) : (sender >> 32) ^ 0x8000u;
    header((opal_btl_usnic_hdr_t *) buf, OPAL_BTL_USNIC_PKT_FRAG, (job << 32) | (1000000 + round), round, 0);
    return sizeof(opal_btl_usnic_hdr_t);
}

/* A real sender's id, from somewhere else: fails the source check */
static size_t wrong_source(uint8_t *buf, uint64_t sender, unsigned round)
{
    return guessed_tag(buf, sender, round);
}

/* Longer than any channel's receive buffer (MTU 1472 at most on the udp
 * provider; loopback carries up to 64 KiB) */
static size_t oversized_len(unsigned round)
{
    static const size_t sizes[] = {1473, 4000, 9000, 65000};
    return sizes[round % (sizeof(sizes) / sizeof(sizes[0]))];
}

static size_t oversized_garbage(uint8_t *buf, uint64_t sender, unsigned round)
{
    (void) sender;
    size_t len = oversized_len(round);
    for (size_t i = 0; i < len; ++i) {
        buf[i] = (uint8_t) rand();
    }
    return len;
}

/* Its head is a well-formed little fragment: only its length betrays it
 * (the provider delivers the head of a datagram that does not fit). */
static size_t oversized_valid_head(uint8_t *buf, uint64_t sender, unsigned round)
{
    size_t len = oversized_len(round);
    header((opal_btl_usnic_hdr_t *) buf, OPAL_BTL_USNIC_PKT_FRAG, sender, 0x40000000u + round * 977u, 4);
    memset(buf + sizeof(opal_btl_usnic_hdr_t), 0xee, len - sizeof(opal_btl_usnic_hdr_t));
    return len;
}

static size_t chunk_out_of_range(uint8_t *buf, uint64_t sender, unsigned round)
{
    opal_btl_usnic_chunk_hdr_t *ch = (opal_btl_usnic_chunk_hdr_t *) buf;
    header(&ch->hdr, OPAL_BTL_USNIC_PKT_CHUNK, sender, round, 64);
    ch->frag_id = htole32(1 + round);
    ch->frag_size = htole32(100);
    ch->frag_offset = htole32(1u << 30); /* far beyond the fragment */
    memset(buf + sizeof(*ch), 0xee, 64);
    return sizeof(*ch) + 64;
}

static size_t ack_with_payload(uint8_t *buf, uint64_t sender, unsigned round)
{
    (void) round;
    memset(buf, 0, sizeof(opal_btl_usnic_ack_hdr_t));
    header((opal_btl_usnic_hdr_t *) buf, OPAL_BTL_USNIC_PKT_ACK, sender, 0, 8);
    return sizeof(opal_btl_usnic_ack_hdr_t) + 8;
}

static const forgery_t forgeries[] = {
    {"random garbage", garbage, false},
    {"truncated header", truncated, false},
    {"payload shorter than announced", short_payload, false},
    {"wrong magic", bad_magic, false},
    {"wrong protocol version", bad_version, false},
    {"guessed tag", guessed_tag, false},
    {"unknown segment type", bad_type, false},
    {"unknown sender", unknown_sender, false},
    {"from another address", wrong_source, true},
    {"chunk offset out of range", chunk_out_of_range, false},
    {"ACK carrying payload", ack_with_payload, false},
    {"oversized garbage", oversized_garbage, false},
    {"oversized, well-formed head", oversized_valid_head, false},
};

/* Send |len| bytes to the port at |to| (rank to / 2, channel to % 2),
 * claiming rank |vpid|: from its port of the same channel, or from our
 * own socket |own| */
static bool send_one(int raw, int own, const rawudp_ports_t *ports, int to, uint32_t vpid, bool own_source,
                     const uint8_t *buf, size_t len)
{
    uint16_t dport = ports->port[to];
    if (own_source) {
        struct sockaddr_in dst;
        memset(&dst, 0, sizeof(dst));
        dst.sin_family = AF_INET;
        dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* never anywhere else */
        dst.sin_port = htons(dport);
        return sendto(own, buf, len, 0, (struct sockaddr *) &dst, sizeof(dst)) >= 0;
    }
    uint16_t sport = ports->port[2 * (int) vpid + to % 2];
    return rawudp_send(raw, sport, dport, buf, len);
}

int main(int argc, char **argv)
{
    rawudp_ports_t ports;
    if (argc < 4 || 0 != rawudp_ports_parse(&ports, argc - 2, argv + 2, "inject") || 0 != ports.n % 2) {
        fprintf(stderr, "usage: %s ROUNDS PORT... (two per rank, in rank order)\n", argv[0]);
        return 2;
    }
    unsigned rounds = (unsigned) atoi(argv[1]);
    int nranks = ports.n / 2;
    int raw = rawudp_open_tx("inject");
    int own = socket(AF_INET, SOCK_DGRAM, 0);
    uint32_t jobid = 0;
    if (raw < 0 || own < 0) {
        return 1;
    }
    if (!rawudp_learn_jobid(&ports, 10000, &jobid)) {
        fprintf(stderr, "inject: saw no datagram of the job in 10 s: its job id is unknown\n");
        return 1;
    }
    srand(12345);
    static uint8_t buf[65536];
    for (size_t k = 0; k < sizeof(forgeries) / sizeof(forgeries[0]); ++k) {
        unsigned sent = 0;
        for (unsigned r = 0; r < rounds; ++r) {
            size_t len = 0;
            for (int to = 0; to < ports.n; ++to) {
                /* another rank than the destination's */
                uint32_t vpid = (uint32_t) ((to / 2 + 1 + (int) r % (nranks > 1 ? nranks - 1 : 1)) % nranks);
                len = forgeries[k].build(buf, ((uint64_t) jobid << 32) | vpid, r);
                sent += send_one(raw, own, &ports, to, vpid, forgeries[k].own_source, buf, len);
            }
            if (0 == r % 16 || len > 2048) {
                usleep(1000); /* stay below the kernel's socket buffer */
            }
        }
        printf("inject: %-34s %u datagrams\n", forgeries[k].name, sent);
    }
    close(raw);
    close(own);
    return 0;
}
