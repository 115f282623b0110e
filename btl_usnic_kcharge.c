/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The kernel socket buffers our datagrams wait in, for both wires whose
 * datagrams wait in one (the socket wire, and the ofi wire on libfabric's
 * udp provider): the size asked for, and what the kernel charges a UDP
 * socket's receive buffer per datagram (btl_usnic_charge.h), measured
 * once per module on a scratch socket.
 */
#include "opal_config.h"

#include <errno.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "btl_usnic.h"

#ifndef SO_MEMINFO
#    define SO_MEMINFO 55 /* Linux 4.6 */
#endif

/* The kernel's overhead per datagram where a size cannot be measured (as
 * measured on Linux 6.1: 65832 bytes for 65000) */
#define KCHARGE_ESTIMATE_OVERHEAD 832

/* A NIC's driver hands the socket frames in buffers of its own (half a
 * page for most at MTU 1500): off loopback no datagram counts as less */
#define KCHARGE_NIC_FLOOR 2304

long opal_btl_usnic_socket_buffer(int fd, int force_opt, int opt, int want)
{
    if (0 != setsockopt(fd, SOL_SOCKET, force_opt, &want, sizeof(want))) {
        (void) setsockopt(fd, SOL_SOCKET, opt, &want, sizeof(want));
    }
    int got = 0;
    socklen_t len = sizeof(got);
    return (0 == getsockopt(fd, SOL_SOCKET, opt, &got, &len)) ? got : -1;
}

/* Kernel memory of the datagrams waiting in |fd|'s receive buffer */
static long rmem_alloc(int fd)
{
    uint32_t info[SK_MEMINFO_VARS];
    socklen_t len = sizeof(info);
    if (0 != getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &len) ||
        len < sizeof(uint32_t) * (SK_MEMINFO_RMEM_ALLOC + 1)) {
        return -1;
    }
    return (long) info[SK_MEMINFO_RMEM_ALLOC];
}

/* A non-blocking UDP socket bound to |ipv4| (any port) that holds a
 * datagram of |size| bytes; -1 if none */
static int scratch_socket(uint32_t ipv4, size_t size)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = ipv4};
    int rcvbuf = (int) (4 * size + (256 << 10));
    if (0 != setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf))) {
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    }
    if (0 != bind(fd, (struct sockaddr *) &sin, sizeof(sin))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The charge of one datagram of |size| bytes sent by |fd| to itself; -1
 * if it could not be measured */
static long measure_one(int fd, uint8_t *buf, size_t size)
{
    struct sockaddr_in self;
    socklen_t slen = sizeof(self);
    if (0 != getsockname(fd, (struct sockaddr *) &self, &slen) ||
        sendto(fd, buf, size, 0, (struct sockaddr *) &self, slen) != (ssize_t) size) {
        return -1;
    }
    long charge = -1;
    for (int wait = 0; wait < 100 && charge <= 0; ++wait) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        (void) poll(&pfd, 1, 1);
        charge = rmem_alloc(fd);
    }
    while (recv(fd, buf, size, MSG_DONTWAIT) >= 0) {
        /* take the datagram back out */
    }
    return charge;
}

int opal_btl_usnic_kernel_charges(uint32_t ipv4, size_t mtu, opal_btl_usnic_charge_t *table)
{
    uint8_t *buf = (uint8_t *) calloc(1, mtu);
    int fd = (NULL != buf) ? scratch_socket(ipv4, mtu) : -1;
    int measured = 0;
    uint32_t last = 0;
    for (unsigned k = 0; k < OPAL_BTL_USNIC_CHARGE_CLASSES; ++k) {
        size_t size = opal_btl_usnic_charge_class_size(k);
        if (size > mtu) {
            size = mtu;
        }
        bool beyond_mtu = k > 0 && opal_btl_usnic_charge_class_size(k - 1) >= mtu;
        long charge = -1;
        if (!beyond_mtu && fd >= 0) {
            charge = measure_one(fd, buf, size);
        }
        if (beyond_mtu) {
            charge = last; /* no datagram of ours is larger */
        } else if (charge > 0) {
            ++measured;
        } else {
            charge = (long) (size + KCHARGE_ESTIMATE_OVERHEAD);
        }
        if (!opal_btl_usnic_is_loopback(ipv4) && charge < KCHARGE_NIC_FLOOR) {
            charge = KCHARGE_NIC_FLOOR;
        }
        table->per_class[k] = (uint32_t) charge;
        last = (uint32_t) charge;
    }
    if (fd >= 0) {
        close(fd);
    }
    free(buf);
    opal_btl_usnic_charge_sanitize(table);
    return measured;
}
