/*
 * Hostile datagrams for the usnic BTL: sends malformed, foreign,
 * out-of-window and oversized datagrams to the given UDP ports on
 * 127.0.0.1 only.
 *
 *   inject COOKIE ROUNDS PORT...
 *
 * COOKIE is the job's cookie (hex), so that some forgeries get past the
 * first checks and reach deeper ones.  Every kind is sent ROUNDS times to
 * every port; none of them may change what the job computes.  Prints one
 * line per kind with the number sent.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../btl_usnic_proto.h"

typedef struct {
    const char *name;
    size_t (*build)(uint8_t *buf, uint32_t cookie, unsigned round);
} forgery_t;

static void header(opal_btl_usnic_hdr_t *h, uint32_t cookie, uint8_t type, uint32_t sender, uint32_t seq,
                   uint16_t payload)
{
    memset(h, 0, sizeof(*h));
    h->magic = htole16(OPAL_BTL_USNIC_MAGIC);
    h->version = OPAL_BTL_USNIC_PROTO_VERSION;
    h->type = type;
    h->cookie = htole32(cookie);
    h->sender_id = htole32(sender);
    h->seq = htole32(seq);
    h->payload_len = htole16(payload);
}

static size_t garbage(uint8_t *buf, uint32_t cookie, unsigned round)
{
    (void) cookie;
    size_t len = 1 + (round * 97u) % 1400u;
    for (size_t i = 0; i < len; ++i) {
        buf[i] = (uint8_t) rand();
    }
    return len;
}

static size_t truncated(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie, OPAL_BTL_USNIC_PKT_FRAG, 0, 0, 100);
    return round % sizeof(opal_btl_usnic_hdr_t); /* shorter than the header */
}

static size_t short_payload(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie, OPAL_BTL_USNIC_PKT_FRAG, 0, round, 1000);
    return sizeof(opal_btl_usnic_hdr_t) + 10; /* says 1000 bytes, carries 10 */
}

static size_t bad_magic(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie, OPAL_BTL_USNIC_PKT_FRAG, 0, round, 0);
    ((opal_btl_usnic_hdr_t *) buf)->magic = htole16(0xbeef);
    return sizeof(opal_btl_usnic_hdr_t);
}

static size_t bad_version(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie, OPAL_BTL_USNIC_PKT_FRAG, 0, round, 0);
    ((opal_btl_usnic_hdr_t *) buf)->version = 99;
    return sizeof(opal_btl_usnic_hdr_t);
}

static size_t foreign_job(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie ^ 0x5a5a5a5au, OPAL_BTL_USNIC_PKT_FRAG, 0, round, 0);
    return sizeof(opal_btl_usnic_hdr_t);
}

static size_t bad_type(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie, 77, 0, round, 0);
    return sizeof(opal_btl_usnic_hdr_t);
}

static size_t unknown_sender(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie, OPAL_BTL_USNIC_PKT_FRAG, 1000000 + round, round, 0);
    return sizeof(opal_btl_usnic_hdr_t);
}

/* Longer than any channel's receive buffer (MTU 1472 at most on the udp
 * provider; loopback carries up to 64 KiB) */
static size_t oversized_len(unsigned round)
{
    static const size_t sizes[] = {1473, 4000, 9000, 65000};
    return sizes[round % (sizeof(sizes) / sizeof(sizes[0]))];
}

static size_t oversized_garbage(uint8_t *buf, uint32_t cookie, unsigned round)
{
    (void) cookie;
    size_t len = oversized_len(round);
    for (size_t i = 0; i < len; ++i) {
        buf[i] = (uint8_t) rand();
    }
    return len;
}

/* Its head is a well-formed little fragment: only its length betrays it
 * (the provider delivers the head of a datagram that does not fit). */
static size_t oversized_valid_head(uint8_t *buf, uint32_t cookie, unsigned round)
{
    size_t len = oversized_len(round);
    header((opal_btl_usnic_hdr_t *) buf, cookie, OPAL_BTL_USNIC_PKT_FRAG, round % 2, 0x40000000u + round * 977u, 4);
    memset(buf + sizeof(opal_btl_usnic_hdr_t), 0xee, len - sizeof(opal_btl_usnic_hdr_t));
    return len;
}

/* from rank 0 / rank 1, far outside any receive window */
static size_t out_of_window(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie, OPAL_BTL_USNIC_PKT_FRAG, round % 2, 0x40000000u + round * 977u, 4);
    memcpy(buf + sizeof(opal_btl_usnic_hdr_t), "evil", 4);
    return sizeof(opal_btl_usnic_hdr_t) + 4;
}

static size_t chunk_out_of_range(uint8_t *buf, uint32_t cookie, unsigned round)
{
    opal_btl_usnic_chunk_hdr_t *ch = (opal_btl_usnic_chunk_hdr_t *) buf;
    header(&ch->hdr, cookie, OPAL_BTL_USNIC_PKT_CHUNK, round % 2, round, 64);
    ch->frag_id = htole32(1 + round);
    ch->frag_size = htole32(100);
    ch->frag_offset = htole32(1u << 30); /* far beyond the fragment */
    memset(buf + sizeof(*ch), 0xee, 64);
    return sizeof(*ch) + 64;
}

static size_t ack_with_payload(uint8_t *buf, uint32_t cookie, unsigned round)
{
    header((opal_btl_usnic_hdr_t *) buf, cookie, OPAL_BTL_USNIC_PKT_ACK, round % 2, 0, 8);
    return sizeof(opal_btl_usnic_hdr_t) + 8;
}

static const forgery_t forgeries[] = {
    {"random garbage", garbage},
    {"truncated header", truncated},
    {"payload shorter than announced", short_payload},
    {"wrong magic", bad_magic},
    {"wrong protocol version", bad_version},
    {"another job's cookie", foreign_job},
    {"unknown segment type", bad_type},
    {"unknown sender", unknown_sender},
    {"sequence far outside the window", out_of_window},
    {"chunk offset out of range", chunk_out_of_range},
    {"ACK carrying payload", ack_with_payload},
    {"oversized garbage", oversized_garbage},
    {"oversized, well-formed head", oversized_valid_head},
};

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s COOKIE ROUNDS PORT...\n", argv[0]);
        return 2;
    }
    uint32_t cookie = (uint32_t) strtoul(argv[1], NULL, 16);
    unsigned rounds = (unsigned) atoi(argv[2]);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    srand(12345);
    static uint8_t buf[65536];
    for (size_t k = 0; k < sizeof(forgeries) / sizeof(forgeries[0]); ++k) {
        unsigned sent = 0;
        for (unsigned r = 0; r < rounds; ++r) {
            size_t len = forgeries[k].build(buf, cookie, r);
            for (int p = 3; p < argc; ++p) {
                struct sockaddr_in to;
                memset(&to, 0, sizeof(to));
                to.sin_family = AF_INET;
                to.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* never anywhere else */
                to.sin_port = htons((uint16_t) atoi(argv[p]));
                if (sendto(fd, buf, len, 0, (struct sockaddr *) &to, sizeof(to)) >= 0) {
                    ++sent;
                }
            }
            if (0 == r % 16 || len > 2048) {
                usleep(1000); /* stay below the kernel's socket buffer */
            }
        }
        printf("inject: %-34s %u datagrams\n", forgeries[k].name, sent);
    }
    close(fd);
    return 0;
}
