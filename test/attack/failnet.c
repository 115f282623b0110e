/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * LD_PRELOAD shim: makes one interface's endpoints fail to open, as when a
 * process runs out of file descriptors or an address goes away.
 *
 *   FAILNET_BIND_ADDR=A.B.C.D   every bind() of an AF_INET socket to that
 *                               address fails with EADDRNOTAVAIL
 *
 * Both wires bind each channel's socket to its interface address (the
 * socket wire itself, libfabric's udp provider in fi_endpoint), so with
 * FAILNET_BIND_ADDR that interface's module cannot be set up and the
 * others can.  Prints one line to stderr
 * the first time it refuses, so the test can tell it acted.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static bool refused_once;

static void note_refusal(const char *what)
{
    if (!refused_once) {
        refused_once = true;
        fprintf(stderr, "failnet: pid %d: refused %s\n", (int) getpid(), what);
    }
}

static bool is_failing_addr(const struct sockaddr *addr, socklen_t len)
{
    const char *fail = getenv("FAILNET_BIND_ADDR");
    struct in_addr want;
    if (NULL == fail || NULL == addr || len < (socklen_t) sizeof(struct sockaddr_in) || AF_INET != addr->sa_family ||
        1 != inet_pton(AF_INET, fail, &want)) {
        return false;
    }
    return ((const struct sockaddr_in *) addr)->sin_addr.s_addr == want.s_addr;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    static int (*real_bind)(int, const struct sockaddr *, socklen_t);
    if (NULL == real_bind) {
        real_bind = (int (*)(int, const struct sockaddr *, socklen_t)) dlsym(RTLD_NEXT, "bind");
    }
    if (is_failing_addr(addr, len)) {
        note_refusal("bind");
        errno = EADDRNOTAVAIL;
        return -1;
    }
    return real_bind(fd, addr, len);
}
