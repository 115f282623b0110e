/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Raw UDP on 127.0.0.1 for the test attackers (inject, replay, forge_put,
 * test/attack): capture what the job's ranks exchange, and send datagrams
 * with a UDP header of the attacker's making, so with any source port.
 * Everything stays on 127.0.0.1 and goes only to the job's ports.  Needs
 * root (CAP_NET_RAW).
 */
#ifndef USNIC_TEST_RAWUDP_H
#define USNIC_TEST_RAWUDP_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RAWUDP_MAX_PORTS 64

/* The job's UDP ports on 127.0.0.1 (both channels of every rank, in rank order) */
typedef struct {
    uint16_t port[RAWUDP_MAX_PORTS];
    int n;
} rawudp_ports_t;

/* Read ports from |argv[0..argc)|; returns 0, or -1 after a message */
static inline int rawudp_ports_parse(rawudp_ports_t *p, int argc, char **argv, const char *who)
{
    p->n = 0;
    for (int i = 0; i < argc; ++i) {
        int v = atoi(argv[i]);
        if (v <= 0 || v > 65535 || p->n == RAWUDP_MAX_PORTS) {
            fprintf(stderr, "%s: bad or too many ports (%s)\n", who, argv[i]);
            return -1;
        }
        p->port[p->n++] = (uint16_t) v;
    }
    return 0;
}

/* Index of |port| among the job's, or -1 */
static inline int rawudp_port_index(const rawudp_ports_t *p, uint16_t port)
{
    for (int i = 0; i < p->n; ++i) {
        if (p->port[i] == port) {
            return i;
        }
    }
    return -1;
}

static inline bool rawudp_is_job_port(const rawudp_ports_t *p, uint16_t port)
{
    return rawudp_port_index(p, port) >= 0;
}

/* A raw socket that sees a copy of every UDP datagram the host receives */
static inline int rawudp_open_rx(const char *who)
{
    int fd = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
    if (fd < 0) {
        fprintf(stderr, "%s: raw socket (needs root): %s\n", who, strerror(errno));
    }
    return fd;
}

/* A raw socket whose datagrams leave from 127.0.0.1 with our UDP header */
static inline int rawudp_open_tx(const char *who)
{
    int fd = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
    struct sockaddr_in lo;
    memset(&lo, 0, sizeof(lo));
    lo.sin_family = AF_INET;
    lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || 0 != bind(fd, (struct sockaddr *) &lo, sizeof(lo))) {
        fprintf(stderr, "%s: raw socket on 127.0.0.1 (needs root): %s\n", who, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

/* The UDP datagram in |pkt| (|n| bytes, an IPv4 packet as a raw socket
 * delivers it) if it went from 127.0.0.1 to 127.0.0.1: returns its UDP
 * header (payload behind it, *|len_p| bytes) and sets the ports; NULL if
 * it is not such a datagram. */
static inline const struct udphdr *rawudp_parse(const uint8_t *pkt, size_t n, uint16_t *sport_p,
                                                uint16_t *dport_p, size_t *len_p)
{
    const struct iphdr *ip = (const struct iphdr *) pkt;
    if (n < sizeof(*ip) || 4 != ip->version || IPPROTO_UDP != ip->protocol ||
        htonl(INADDR_LOOPBACK) != ip->saddr || htonl(INADDR_LOOPBACK) != ip->daddr) {
        return NULL;
    }
    size_t ihl = 4u * ip->ihl;
    if (n < ihl + sizeof(struct udphdr)) {
        return NULL;
    }
    const struct udphdr *udp = (const struct udphdr *) (pkt + ihl);
    size_t ulen = ntohs(udp->len);
    if (ulen < sizeof(*udp) || ulen > n - ihl) {
        return NULL;
    }
    *sport_p = ntohs(udp->source);
    *dport_p = ntohs(udp->dest);
    *len_p = ulen - sizeof(*udp);
    return udp;
}

/* One datagram between two of the job's ports, waiting up to |wait_ms|:
 * returns its payload (*|len_p| bytes, in a static buffer valid until the
 * next call) and sets the ports, or NULL if none came */
static inline const uint8_t *rawudp_next(int rx, const rawudp_ports_t *ports, int wait_ms, uint16_t *sport_p,
                                         uint16_t *dport_p, size_t *len_p)
{
    static uint8_t pkt[65536];
    struct pollfd pfd = {.fd = rx, .events = POLLIN};
    if (poll(&pfd, 1, wait_ms) <= 0) {
        return NULL;
    }
    ssize_t n = recv(rx, pkt, sizeof(pkt), MSG_DONTWAIT);
    const struct udphdr *udp = (n > 0) ? rawudp_parse(pkt, (size_t) n, sport_p, dport_p, len_p) : NULL;
    if (NULL == udp || !rawudp_is_job_port(ports, *sport_p) || !rawudp_is_job_port(ports, *dport_p)) {
        return NULL;
    }
    return (const uint8_t *) (udp + 1);
}

static inline double rawudp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double) ts.tv_sec + 1e-6 * (double) ts.tv_nsec;
}

/* The job id of the job's datagrams: the high half of the sender id in
 * the first one seen between two job ports within |wait_ms| (what an
 * on-path attacker reads; a local user computes it from mpirun's pid and
 * the host name).  Include btl_usnic_proto.h first.  false if none came. */
static inline bool rawudp_learn_jobid(const rawudp_ports_t *ports, int wait_ms, uint32_t *jobid_p)
{
    int rx = rawudp_open_rx("rawudp_learn_jobid");
    if (rx < 0) {
        return false;
    }
    bool found = false;
    double end = rawudp_now_ms() + wait_ms;
    while (!found && rawudp_now_ms() < end) {
        uint16_t sport, dport;
        size_t len = 0;
        const uint8_t *p = rawudp_next(rx, ports, 50, &sport, &dport, &len);
        if (NULL != p && len >= sizeof(opal_btl_usnic_hdr_t) &&
            OPAL_BTL_USNIC_MAGIC == le16toh(((const opal_btl_usnic_hdr_t *) p)->magic)) {
            *jobid_p = (uint32_t) (le64toh(((const opal_btl_usnic_hdr_t *) p)->sender) >> 32);
            found = true;
        }
    }
    close(rx);
    return found;
}

/* Send |len| bytes from 127.0.0.1:|sport| to 127.0.0.1:|dport| (checksum 0
 * = none: loopback's may be only partial).  Returns whether it left. */
static inline bool rawudp_send(int fd, uint16_t sport, uint16_t dport, const void *payload, size_t len)
{
    static uint8_t pkt[sizeof(struct udphdr) + 65507];
    if (len > sizeof(pkt) - sizeof(struct udphdr)) {
        return false;
    }
    struct udphdr *udp = (struct udphdr *) pkt;
    udp->source = htons(sport);
    udp->dest = htons(dport);
    udp->len = htons((uint16_t) (sizeof(*udp) + len));
    udp->check = 0;
    memcpy(pkt + sizeof(*udp), payload, len);
    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* never anywhere else */
    to.sin_port = htons(dport);
    size_t total = sizeof(*udp) + len;
    return sendto(fd, pkt, total, 0, (struct sockaddr *) &to, sizeof(to)) == (ssize_t) total;
}


#endif /* USNIC_TEST_RAWUDP_H */
