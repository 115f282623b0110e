/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Interface facts the udp provider does not report (netmask, MTU, link
 * speed, Linux name) and the if_include / if_exclude filter.  Pure
 * functions where possible, so they are tested without a network.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <sys/socket.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic.h"

int opal_btl_usnic_parse_cidr(const char *text, uint32_t *addr_p, uint32_t *mask_p)
{
    char buf[64];
    const char *slash = strchr(text, '/');
    if (NULL == slash || (size_t) (slash - text) >= sizeof(buf)) {
        return OPAL_ERR_BAD_PARAM;
    }
    memcpy(buf, text, slash - text);
    buf[slash - text] = '\0';
    struct in_addr addr;
    if (1 != inet_pton(AF_INET, buf, &addr)) {
        return OPAL_ERR_BAD_PARAM;
    }
    char *end = NULL;
    long len = strtol(slash + 1, &end, 10);
    if (end == slash + 1 || '\0' != *end || len < 1 || len > 32) {
        return OPAL_ERR_BAD_PARAM;
    }
    uint32_t mask = (32 == len) ? 0xffffffffu : ~(0xffffffffu >> len);
    *mask_p = htonl(mask);
    *addr_p = addr.s_addr & *mask_p;
    return OPAL_SUCCESS;
}

/* Does one filter entry match the interface? Sets *bad_p if the entry is invalid. */
static bool entry_matches(const char *entry, const char *ifname, const char *domain, uint32_t ipv4, bool *bad_p)
{
    *bad_p = false;
    if (isalpha((unsigned char) entry[0])) {
        return (NULL != ifname && 0 == strcmp(entry, ifname)) || (NULL != domain && 0 == strcmp(entry, domain));
    }
    uint32_t net, mask;
    if (OPAL_SUCCESS != opal_btl_usnic_parse_cidr(entry, &net, &mask)) {
        *bad_p = true;
        return false;
    }
    return (ipv4 & mask) == net;
}

bool opal_btl_usnic_if_list_matches(const char *list, const char *ifname, const char *domain, uint32_t ipv4,
                                    char **bad_entry_p)
{
    bool match = false;
    char *copy = strdup(list);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ", ", &save); NULL != tok; tok = strtok_r(NULL, ", ", &save)) {
        bool bad;
        if (entry_matches(tok, ifname, domain, ipv4, &bad)) {
            match = true;
        }
        if (bad && NULL != bad_entry_p && NULL == *bad_entry_p) {
            *bad_entry_p = strdup(tok);
        }
    }
    free(copy);
    return match;
}

uint32_t opal_btl_usnic_if_list_match_mask(const char *list, const char *ifname, const char *domain, uint32_t ipv4)
{
    uint32_t mask = 0;
    char *copy = strdup(list);
    char *save = NULL;
    int index = 0;
    for (char *tok = strtok_r(copy, ", ", &save); NULL != tok; tok = strtok_r(NULL, ", ", &save), ++index) {
        bool bad;
        /* entries past the 32nd, and invalid ones (reported on their
         * own), count as matched: never called unmatched by mistake */
        if (index >= 32 || entry_matches(tok, ifname, domain, ipv4, &bad) || bad) {
            mask |= (index >= 32) ? 0 : (1u << index);
        }
    }
    free(copy);
    return mask;
}

/* Append |s| to |buf| (of |len| bytes), after ", " unless it is empty */
static void append_item(char *buf, size_t len, const char *s)
{
    size_t used = strlen(buf);
    if (used < len) {
        snprintf(buf + used, len - used, "%s%s", 0 == used ? "" : ", ", s);
    }
}

void opal_btl_usnic_if_list_unmatched(const char *list, uint32_t matched, char *buf, size_t len)
{
    buf[0] = '\0';
    char *copy = strdup(list);
    char *save = NULL;
    int index = 0;
    for (char *tok = strtok_r(copy, ", ", &save); NULL != tok && index < 32;
         tok = strtok_r(NULL, ", ", &save), ++index) {
        if (0 == (matched & (1u << index))) {
            append_item(buf, len, tok);
        }
    }
    free(copy);
}

int opal_btl_usnic_if_host_list(opal_btl_usnic_host_if_t *ifs, int max)
{
    struct ifaddrs *all = NULL;
    if (0 != getifaddrs(&all)) {
        return 0;
    }
    int n = 0;
    for (const struct ifaddrs *i = all; NULL != i && n < max; i = i->ifa_next) {
        if (NULL == i->ifa_addr || AF_INET != i->ifa_addr->sa_family || !(i->ifa_flags & IFF_UP)) {
            continue;
        }
        snprintf(ifs[n].name, sizeof(ifs[n].name), "%s", i->ifa_name);
        ifs[n].ipv4 = ((const struct sockaddr_in *) i->ifa_addr)->sin_addr.s_addr;
        ifs[n].netmask = NULL != i->ifa_netmask ? ((const struct sockaddr_in *) i->ifa_netmask)->sin_addr.s_addr : 0;
        ++n;
    }
    freeifaddrs(all);
    return n;
}

void opal_btl_usnic_if_describe(const opal_btl_usnic_host_if_t *ifs, int n, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < n; ++i) {
        char addr[INET_ADDRSTRLEN] = "?";
        char item[IFNAMSIZ + INET_ADDRSTRLEN + 8];
        (void) inet_ntop(AF_INET, &ifs[i].ipv4, addr, sizeof(addr));
        snprintf(item, sizeof(item), "%s %s/%d", ifs[i].name, addr, __builtin_popcount(ifs[i].netmask));
        append_item(buf, len, item);
    }
    if ('\0' == buf[0]) {
        snprintf(buf, len, "(no IPv4 interface is up)");
    }
}

int opal_btl_usnic_ifname_for_ipv4(uint32_t ipv4, char *name, size_t len)
{
    struct ifaddrs *ifs = NULL;
    if (0 != getifaddrs(&ifs)) {
        return OPAL_ERR_NOT_FOUND;
    }
    int rc = OPAL_ERR_NOT_FOUND;
    for (struct ifaddrs *i = ifs; NULL != i; i = i->ifa_next) {
        if (NULL != i->ifa_addr && AF_INET == i->ifa_addr->sa_family &&
            ((struct sockaddr_in *) i->ifa_addr)->sin_addr.s_addr == ipv4) {
            snprintf(name, len, "%s", i->ifa_name);
            rc = OPAL_SUCCESS;
            break;
        }
    }
    freeifaddrs(ifs);
    return rc;
}

/* Read one integer from /sys/class/net/<ifname>/<what>; -1 if unknown. */
static long read_sysfs_long(const char *ifname, const char *what)
{
    char path[256];
    snprintf(path, sizeof(path), "/sys/class/net/%s/%s", ifname, what);
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        return -1;
    }
    long v = -1;
    if (1 != fscanf(f, "%ld", &v)) {
        v = -1;
    }
    fclose(f);
    return v;
}

size_t opal_btl_usnic_datagram_mtu(size_t max_msg_size, size_t prefix, int if_mtu)
{
    if (max_msg_size <= prefix) {
        return 0;
    }
    size_t mtu = max_msg_size - prefix; /* the provider's limit counts its prefix */
    if (if_mtu > 28 && (size_t) (if_mtu - 28) < mtu) {
        mtu = (size_t) (if_mtu - 28); /* IPv4 + UDP headers: never rely on IP fragmentation */
    }
    return mtu > 65000 ? 65000 : mtu; /* payload_len is 16 bits */
}

int opal_btl_usnic_if_mtu(const char *ifname)
{
    return (int) read_sysfs_long(ifname, "mtu");
}

int opal_btl_usnic_if_speed_mbps(const char *ifname)
{
    return (int) read_sysfs_long(ifname, "speed");
}

int opal_btl_usnic_socket_fd(uint32_t ipv4, uint16_t port)
{
    /* libfabric's udp provider owns the socket and offers no socket
     * options: find our own descriptor bound to (ipv4, port) */
    DIR *dir = opendir("/proc/self/fd");
    if (NULL == dir) {
        return -1;
    }
    int result = -1;
    struct dirent *de;
    while (NULL != (de = readdir(dir)) && result < 0) {
        char *end = NULL;
        long fd = strtol(de->d_name, &end, 10);
        if (end == de->d_name || '\0' != *end || fd == dirfd(dir)) {
            continue;
        }
        struct sockaddr_in sin;
        socklen_t len = sizeof(sin);
        int type = 0;
        socklen_t tlen = sizeof(type);
        if (0 == getsockname((int) fd, (struct sockaddr *) &sin, &len) && AF_INET == sin.sin_family &&
            ntohs(sin.sin_port) == port && sin.sin_addr.s_addr == ipv4 &&
            0 == getsockopt((int) fd, SOL_SOCKET, SO_TYPE, &type, &tlen) && SOCK_DGRAM == type) {
            result = (int) fd;
        }
    }
    closedir(dir);
    return result;
}

long opal_btl_usnic_socket_rcvbuf(int fd)
{
    int rcvbuf = 0;
    socklen_t rlen = sizeof(rcvbuf);
    return (fd >= 0 && 0 == getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &rlen)) ? rcvbuf : -1;
}

/* ----- pairing of two processes' modules ----- */

static bool same_subnet(const opal_btl_usnic_modex_t *x, const opal_btl_usnic_modex_t *y)
{
    return x->netmask == y->netmask && (x->ipv4 & x->netmask) == (y->ipv4 & y->netmask);
}

bool opal_btl_usnic_is_loopback(uint32_t ipv4)
{
    return (ntohl(ipv4) >> 24) == 127;
}

/* One greedy pass: pair each unpaired |a| with the first unpaired |b| that |fits| */
static void pair_pass(const opal_btl_usnic_modex_t *a, size_t na, const opal_btl_usnic_modex_t *b, size_t nb,
                      int *a_to_b, bool *b_taken, bool subnet_only)
{
    for (size_t i = 0; i < na; ++i) {
        for (size_t j = 0; j < nb && a_to_b[i] < 0; ++j) {
            bool fits = subnet_only ? same_subnet(&a[i], &b[j])
                                    : opal_btl_usnic_is_loopback(a[i].ipv4) == opal_btl_usnic_is_loopback(b[j].ipv4);
            if (!b_taken[j] && fits) {
                a_to_b[i] = (int) j;
                b_taken[j] = true;
            }
        }
    }
}

void opal_btl_usnic_pair_modules(const opal_btl_usnic_modex_t *a, size_t na, const opal_btl_usnic_modex_t *b,
                                 size_t nb, int *a_to_b)
{
    bool taken[OPAL_BTL_USNIC_MAX_MODULES_PAIRED] = {false};
    for (size_t i = 0; i < na; ++i) {
        a_to_b[i] = -1;
    }
    if (nb > OPAL_BTL_USNIC_MAX_MODULES_PAIRED) {
        nb = OPAL_BTL_USNIC_MAX_MODULES_PAIRED;
    }
    pair_pass(a, na, b, nb, a_to_b, taken, true);
    pair_pass(a, na, b, nb, a_to_b, taken, false);
}
