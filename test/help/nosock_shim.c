/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * LD_PRELOAD shim for run-help-tests.sh: refuses the socket wire's UDP
 * sockets (AF_INET, SOCK_DGRAM, opened non-blocking) with EACCES, as a
 * security policy that forbids UDP would.  Other sockets pass: Open MPI
 * lists interfaces through a plain SOCK_DGRAM socket, and its runtime
 * and btl/tcp need theirs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol)
{
    static int (*real_socket)(int, int, int);
    if (NULL == real_socket) {
        real_socket = (int (*)(int, int, int)) dlsym(RTLD_NEXT, "socket");
    }
    if (AF_INET == domain && SOCK_DGRAM == (type & 0xf) && 0 != (type & SOCK_NONBLOCK)) {
        errno = EACCES;
        return -1;
    }
    return real_socket(domain, type, protocol);
}
