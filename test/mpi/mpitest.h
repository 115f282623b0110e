/*
 * mpitest.h - helpers shared by the MPI integration tests in test/mpi/.
 *
 * Header only (static inline), so every program is still built from its
 * single .c file. A program defines its name first, then includes this:
 *
 *   #define TEST_NAME "pingpong"
 *   #include "mpitest.h"
 *
 * and sets my_rank (mpitest_init() does it) before anything can fail.
 *
 * What is here:
 *   - fail(): print "FAIL <TEST_NAME>: rank R: <message>" and MPI_Abort;
 *   - CHECK_MPI(call): fail() with the MPI error string unless the call
 *     returned MPI_SUCCESS (used with MPI_ERRORS_RETURN);
 *   - xmalloc(): malloc that fails the test when out of memory;
 *   - mix32(), pattern_byte(), fill_pattern(), count_bad(): the payload
 *     pattern (byte i of a message is a hash of the message's seed and i)
 *     and its checks;
 *   - first_not(): guard / poison byte checks;
 *   - mpitest_init() / mpitest_pass(): the common start and end of main().
 */
#ifndef MPITEST_H
#define MPITEST_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TEST_NAME
#error "define TEST_NAME (the program name) before including mpitest.h"
#endif

/* This process's rank in MPI_COMM_WORLD, -1 until it is known. */
static int my_rank = -1;

/* ------------------------------------------------------------------ */
/* Failure reporting                                                   */
/* ------------------------------------------------------------------ */

/* Print a one-line diagnostic and take the whole job down. */
static inline void fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

static inline void fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("FAIL %s: rank %d: %s\n", TEST_NAME, my_rank, msg);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* MPI_COMM_WORLD uses MPI_ERRORS_RETURN, so calls go through here. */
static inline void check_mpi(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, err, &len);
        fail("%s returned error: %s", what, err);
    }
}
#define CHECK_MPI(call) check_mpi((call), #call)

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fail("out of memory (%zu bytes)", n);
    return p;
}

/* ------------------------------------------------------------------ */
/* Payload patterns                                                    */
/* ------------------------------------------------------------------ */

/* A small integer hash with good avalanche behaviour. */
static inline uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* Expected value of byte i of the message identified by seed (each program
 * derives the seed from sender, receiver, message number, ...). The high
 * half of i only matters beyond 4 GiB. */
static inline uint8_t pattern_byte(uint32_t seed, size_t i)
{
    return (uint8_t)mix32(seed ^ ((uint32_t)i * 0x9e3779b9U) ^
                          (uint32_t)((uint64_t)i >> 32));
}

static inline void fill_pattern(uint8_t *buf, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern_byte(seed, i);
}

/* Number of bytes in [from, len) that differ from the pattern; *first
 * gets the first bad offset (untouched when there is none). */
static inline size_t count_bad(const uint8_t *buf, size_t from, size_t len,
                               uint32_t seed, size_t *first)
{
    size_t bad = 0;
    for (size_t i = from; i < len; i++) {
        if (buf[i] != pattern_byte(seed, i) && bad++ == 0)
            *first = i;
    }
    return bad;
}

/* Offset of the first of the n bytes at buf that is not val, or n when all
 * of them are (poison and guard byte checks). */
static inline size_t first_not(const uint8_t *buf, size_t n, uint8_t val)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != val)
            return i;
    return n;
}

/* ------------------------------------------------------------------ */
/* Start and end of main()                                             */
/* ------------------------------------------------------------------ */

/* MPI_Init, MPI_ERRORS_RETURN on MPI_COMM_WORLD, sets my_rank, requires
 * at least 2 ranks. Returns the number of ranks. */
static inline int mpitest_init(int *argc, char ***argv)
{
    int nprocs = 0;

    MPI_Init(argc, argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs < 2)
        fail("needs at least 2 ranks, got %d", nprocs);
    return nprocs;
}

/* The line run-mpi-tests.sh looks for, printed once (by rank 0) after
 * every check passed. */
static inline void mpitest_pass(void)
{
    if (my_rank == 0) {
        printf("PASS %s\n", TEST_NAME);
        fflush(stdout);
    }
}

#endif /* MPITEST_H */
