/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The VM's cross-core state: two threads pinned to two CPUs bounce one
 * cache line back and forth and report the median round trip.  The
 * machines this project runs on flip every few tens of seconds between a
 * fast state (about 60 ns) and a slow one (about 350 ns), and loopback
 * throughput moves 2-3x with it, so bench/perf.sh probes the state around
 * every run and compares ratios only between runs that saw the same one.
 *
 *   cacheline [--cpus A,B] [--rounds N]
 *
 * Prints "CACHELINE rtt_ns=<median of batches> cpus=A,B".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCHES 31
#define PER_BATCH 2000

static _Alignas(64) _Atomic uint64_t ball;
static int cpu_b = 1;

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void) pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The other side: returns every odd value as the next even one */
static void *responder(void *arg)
{
    uint64_t last = *(uint64_t *) arg;
    pin(cpu_b);
    for (uint64_t v = 1; v < last; v += 2) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != v) {
        }
        atomic_store_explicit(&ball, v + 1, memory_order_release);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int cpu_a = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "--cpus") && 2 == sscanf(argv[i + 1], "%d,%d", &cpu_a, &cpu_b)) {
            continue;
        }
        fprintf(stderr, "usage: cacheline [--cpus A,B]\n");
        return 2;
    }
    uint64_t last = 2ull * BATCHES * PER_BATCH + 1;
    pthread_t t;
    if (0 != pthread_create(&t, NULL, responder, &last)) {
        perror("cacheline: pthread_create");
        return 1;
    }
    pin(cpu_a);
    uint64_t rtt[BATCHES], v = 0;
    for (int b = 0; b < BATCHES; ++b) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < PER_BATCH; ++i) {
            atomic_store_explicit(&ball, ++v, memory_order_release);
            ++v;
            while (atomic_load_explicit(&ball, memory_order_acquire) != v) {
            }
        }
        rtt[b] = (now_ns() - t0) / PER_BATCH;
    }
    pthread_join(t, NULL);
    qsort(rtt, BATCHES, sizeof(rtt[0]), cmp_u64);
    printf("CACHELINE rtt_ns=%llu cpus=%d,%d\n", (unsigned long long) rtt[BATCHES / 2], cpu_a, cpu_b);
    return 0;
}
