/*
 * Replayed datagrams for the usnic BTL: captures genuine datagrams that the
 * ranks of a running job exchange on 127.0.0.1, then sends byte-identical
 * copies back to the same ports, at once and again in bursts long after.
 *
 *   replay CAPTURE_MAX CAPTURE_SECONDS BURSTS GAP_MS PORT...
 *
 * Only datagrams from one of the PORTs on 127.0.0.1 to another of them are
 * captured (a raw IPPROTO_UDP socket sees a copy of every UDP datagram the
 * host receives), so forgeries of other tools are never taken for the
 * job's own.  The copies leave from 127.0.0.1 and go only to the captured
 * destination port, which is always one of the PORTs on 127.0.0.1.  Every
 * copy is sent BURSTS times, GAP_MS apart.  Needs root (CAP_NET_RAW).
 *
 * Prints one line with what was captured (by segment type) and one per
 * burst; the last line reads "replay: total R datagrams (D data segments)
 * in B bursts", data segments being those with a sequence number (all but
 * ACKs), which the receiver must drop as old or duplicate.
 */
#include <arpa/inet.h>
#include <errno.h>
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

typedef struct {
    uint16_t sport, dport;
    uint16_t len;  /* payload */
    int type;      /* segment type of the usnic header, -1 if none */
    uint8_t *bytes;  /* malloc'ed: any size a datagram can have (the socket wire's reach 65000) */
} captured_t;

static rawudp_ports_t ports;

static double now_s(void)
{
    return 1e-3 * rawudp_now_ms();
}

/* Segments that carry a sequence number: all but ACKs */
static int is_data(const captured_t *c)
{
    return c->type >= 0 && OPAL_BTL_USNIC_PKT_ACK != c->type;
}

/* Keeps the datagram |payload| (|len| bytes) from |sport| to |dport| */
static int take(captured_t *c, const uint8_t *payload, size_t len, uint16_t sport, uint16_t dport)
{
    c->bytes = (uint8_t *) malloc(len > 0 ? len : 1);
    if (NULL == c->bytes) {
        return 0;
    }
    memcpy(c->bytes, payload, len);
    c->len = (uint16_t) len;
    c->sport = sport;
    c->dport = dport;
    c->type = -1;
    if (len >= sizeof(opal_btl_usnic_hdr_t)) {
        const opal_btl_usnic_hdr_t *h = (const opal_btl_usnic_hdr_t *) c->bytes;
        if (OPAL_BTL_USNIC_MAGIC == le16toh(h->magic)) {
            c->type = h->type;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: %s CAPTURE_MAX CAPTURE_SECONDS BURSTS GAP_MS PORT PORT...\n", argv[0]);
        return 2;
    }
    int max = atoi(argv[1]);
    double capture_s = atof(argv[2]);
    int bursts = atoi(argv[3]);
    int gap_ms = atoi(argv[4]);
    if (0 != rawudp_ports_parse(&ports, argc - 5, argv + 5, "replay")) {
        return 2;
    }
    if (max <= 0 || bursts <= 0 || gap_ms < 0) {
        fprintf(stderr, "replay: bad arguments\n");
        return 2;
    }
    captured_t *cap = calloc((size_t) max, sizeof(*cap));
    int rx = rawudp_open_rx("replay");
    int tx = rawudp_open_tx("replay");
    if (NULL == cap || rx < 0 || tx < 0) {
        return 1;
    }

    /* capture */
    int n = 0, data = 0, counts[257] = {0}; /* by type; [256]: not ours */
    double t0 = now_s();
    while (n < max && now_s() - t0 < capture_s) {
        uint16_t sport, dport;
        size_t len;
        const uint8_t *payload = rawudp_next(rx, &ports, 50, &sport, &dport, &len);
        if (NULL != payload && take(&cap[n], payload, len, sport, dport)) {
            ++counts[cap[n].type >= 0 ? cap[n].type : 256];
            data += is_data(&cap[n]);
            ++n;
        }
    }
    close(rx); /* stop cloning the job's traffic */
    printf("replay: captured %d datagrams in %.2f s:", n, now_s() - t0);
    for (int t = 0; t < 257; ++t) {
        if (counts[t] > 0) {
            printf(" %s %d", (t < 256) ? opal_btl_usnic_seg_type_name((unsigned) t) : "not-usnic", counts[t]);
        }
    }
    printf("\n");
    fflush(stdout);

    /* replay: the same bytes from the same source port */
    long total = 0, total_data = 0;
    for (int b = 0; b < bursts; ++b) {
        if (b > 0) {
            usleep((useconds_t) gap_ms * 1000u);
        }
        long sent = 0, sent_data = 0;
        for (int i = 0; i < n; ++i) {
            if (rawudp_send(tx, cap[i].sport, cap[i].dport, cap[i].bytes, cap[i].len)) {
                ++sent;
                sent_data += is_data(&cap[i]);
            } else if (ENOBUFS != errno && EAGAIN != errno) {
                perror("replay: sendto");
            }
            if (0 == i % 16) {
                usleep(1000); /* stay below the ranks' socket buffers */
            }
        }
        printf("replay: burst %d at +%.2f s: %ld datagrams (%ld data segments)\n", b + 1, now_s() - t0, sent,
               sent_data);
        fflush(stdout);
        total += sent;
        total_data += sent_data;
    }
    printf("replay: total %ld datagrams (%ld data segments) in %d bursts\n", total, total_data, bursts);
    close(tx);
    for (int i = 0; i < n; ++i) {
        free(cap[i].bytes);
    }
    free(cap);
    return (n > 0 && data > 0) ? 0 : 1;
}
