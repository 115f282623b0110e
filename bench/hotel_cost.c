/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * What an opal_hotel would cost the retransmission timers, against the
 * engine's own deadlines (btl_usnic_ack.c, "The hotel"): the figures
 * behind that decision (bench/README.md, "Hotel: opal_hotel vs the
 * engine's timers").
 *
 *  1. ns per check-in + check-out pair, as every post and every ACK pays
 *     it: an opal_hotel without event base (what the engine paid until it
 *     was removed: a registry that never evicts), one with an event base
 *     (each check-in arms a libevent timer, what hotel-driven timeouts
 *     need), and the engine's bookkeeping (a deadline, a flag, the
 *     engine's earliest deadline).
 *  2. Lateness of a 100 us timeout: an opal_hotel eviction when its
 *     event base is looped (OPAL_EVLOOP_ONCE | OPAL_EVLOOP_NONBLOCK) in a
 *     busy loop, and every 10 ms (how often opal_progress loops the event
 *     base), against the engine's expiry, one compare per progress pass.
 *
 * Build and run (single-threaded; pin it, the figures are medians):
 *
 *   gcc -O2 -Wall -Wextra -std=gnu11 -mcx16 \
 *       -I/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi \
 *       -I/usr/lib/x86_64-linux-gnu/openmpi/include \
 *       -o /tmp/hotel_cost bench/hotel_cost.c \
 *       -L/usr/lib/x86_64-linux-gnu/openmpi/lib \
 *       -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openmpi/lib -lopen-pal -levent_core
 *   (-levent_core: Debian's Open MPI uses the external libevent, whose
 *   symbols the event macros name directly)
 *   taskset -c 1 /tmp/hotel_cost
 */
#include "opal_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "opal/class/opal_hotel.h"
#include "opal/mca/event/event.h"
#include "opal/runtime/opal.h"

#define ROOMS 64              /* a window's worth of segments */
#define PAIRS 2000000         /* check-in + check-out pairs per run */
#define TIMEOUT_USEC 100      /* the timeout whose lateness we measure */
#define BUSY_SAMPLES 2000
#define CADENCE_SAMPLES 100
#define CADENCE_USEC 10000    /* opal_progress's event-base cadence */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

/* |late_ns| < 0: fired early (libevent's coarse clock lags the precise one) */
static void print_lateness(const char *what, int64_t *late_ns, int n)
{
    qsort(late_ns, (size_t) n, sizeof(*late_ns), cmp_i64);
    int early = 0;
    while (early < n && late_ns[early] < 0) {
        ++early;
    }
    printf("%-44s median %7.1f us  p90 %7.1f us  p99 %7.1f us  max %7.1f us  early %d/%d\n", what,
           late_ns[n / 2] / 1e3, late_ns[n * 9 / 10] / 1e3, late_ns[n * 99 / 100] / 1e3, late_ns[n - 1] / 1e3,
           early, n);
}

/* ----- 1. fast-path cost ----- */

static volatile int evicted; /* set by the eviction callback */
static uint64_t evicted_at;

static void on_evict(opal_hotel_t *hotel, int room, void *occupant)
{
    (void) hotel;
    (void) room;
    (void) occupant;
    evicted_at = now_ns();
    evicted = 1;
}

static double hotel_pair_ns(opal_event_base_t *base)
{
    opal_hotel_t hotel;
    OBJ_CONSTRUCT(&hotel, opal_hotel_t);
    /* a long timeout: nothing is evicted while we measure */
    if (OPAL_SUCCESS != opal_hotel_init(&hotel, ROOMS, base, 1000000, 0, on_evict)) {
        fprintf(stderr, "opal_hotel_init failed\n");
        exit(1);
    }
    int rooms[ROOMS];
    static int guests[ROOMS];
    uint64_t t0 = now_ns();
    for (int i = 0; i < PAIRS / ROOMS; ++i) {
        for (int r = 0; r < ROOMS; ++r) {
            (void) opal_hotel_checkin(&hotel, &guests[r], &rooms[r]);
        }
        for (int r = 0; r < ROOMS; ++r) {
            opal_hotel_checkout(&hotel, rooms[r]);
        }
    }
    uint64_t t1 = now_ns();
    OBJ_DESTRUCT(&hotel);
    return (double) (t1 - t0) / (PAIRS / ROOMS * ROOMS);
}

/* The engine's bookkeeping per segment (opal_btl_usnic_hotel_checkin /
 * _checkout): deadline = now + backed-off RTO, a flag, the engine's
 * earliest deadline lowered; check-out clears the flag. */
struct guest {
    uint64_t deadline;
    uint8_t flags;
};

static double engine_pair_ns(void)
{
    static struct guest g[ROOMS];
    volatile uint64_t next_deadline = UINT64_MAX;
    uint64_t rto = 1000, rto_max = 100000;
    unsigned backoff = 0;
    uint64_t t0 = now_ns();
    for (int i = 0; i < PAIRS / ROOMS; ++i) {
        uint64_t now = (uint64_t) i; /* the engine's clock is read once per pass, not per segment */
        for (int r = 0; r < ROOMS; ++r) {
            uint64_t t = rto << backoff;
            g[r].deadline = now + (t < rto_max ? t : rto_max);
            g[r].flags |= 1;
            if (g[r].deadline < next_deadline) {
                next_deadline = g[r].deadline;
            }
        }
        for (int r = 0; r < ROOMS; ++r) {
            g[r].flags &= (uint8_t) ~1;
        }
        __asm__ volatile("" ::: "memory");
    }
    uint64_t t1 = now_ns();
    return (double) (t1 - t0) / (PAIRS / ROOMS * ROOMS);
}

/* ----- 2. timer precision ----- */

/* One 100 us eviction per sample; the event base looped every
 * |cadence_us| (0: as fast as possible).  Lateness past the timeout. */
static void hotel_lateness(opal_event_base_t *base, unsigned cadence_us, int64_t *late_ns, int n)
{
    opal_hotel_t hotel;
    OBJ_CONSTRUCT(&hotel, opal_hotel_t);
    if (OPAL_SUCCESS != opal_hotel_init(&hotel, ROOMS, base, TIMEOUT_USEC, 0, on_evict)) {
        fprintf(stderr, "opal_hotel_init failed\n");
        exit(1);
    }
    static int guest;
    for (int i = 0; i < n; ++i) {
        int room;
        evicted = 0;
        uint64_t in = now_ns();
        (void) opal_hotel_checkin(&hotel, &guest, &room);
        uint64_t next_loop = in + (uint64_t) cadence_us * 1000u;
        while (!evicted) {
            if (0 != cadence_us) {
                while (now_ns() < next_loop) {
                    /* the rest of progress: polling the wire */
                }
                next_loop += (uint64_t) cadence_us * 1000u;
            }
            opal_event_loop(base, OPAL_EVLOOP_ONCE | OPAL_EVLOOP_NONBLOCK);
        }
        late_ns[i] = (int64_t) (evicted_at - in) - TIMEOUT_USEC * 1000;
    }
    OBJ_DESTRUCT(&hotel);
}

/* The engine: every progress pass reads the clock once and compares it
 * with next_deadline.  A pass that polls an idle wire costs about this
 * loop; a busy one longer, so this is the best case of both. */
static void engine_lateness(int64_t *late_ns, int n)
{
    for (int i = 0; i < n; ++i) {
        uint64_t in = now_ns();
        uint64_t deadline = in + TIMEOUT_USEC * 1000u;
        uint64_t now;
        while ((now = now_ns()) < deadline) {
        }
        late_ns[i] = (int64_t) (now - deadline);
    }
}

int main(int argc, char **argv)
{
    if (OPAL_SUCCESS != opal_init_util(&argc, &argv) || OPAL_SUCCESS != opal_event_init()) {
        fprintf(stderr, "opal_init_util / opal_event_init failed\n");
        return 1;
    }
    opal_event_base_t *base = opal_event_base_create();
    if (NULL == base) {
        fprintf(stderr, "no event base\n");
        return 1;
    }
    printf("check-in + check-out pair, %d rooms, %d pairs:\n", ROOMS, PAIRS);
    printf("  opal_hotel, no event base (never evicts)   %6.1f ns\n", hotel_pair_ns(NULL));
    printf("  opal_hotel, event base (evicts)            %6.1f ns\n", hotel_pair_ns(base));
    printf("  engine deadline bookkeeping                %6.1f ns\n", engine_pair_ns());

    static int64_t late[BUSY_SAMPLES];
    printf("lateness of a %d us timeout:\n", TIMEOUT_USEC);
    hotel_lateness(base, 0, late, BUSY_SAMPLES);
    print_lateness("  opal_hotel, event base looped busily", late, BUSY_SAMPLES);
    hotel_lateness(base, CADENCE_USEC, late, CADENCE_SAMPLES);
    print_lateness("  opal_hotel, event base looped every 10 ms", late, CADENCE_SAMPLES);
    engine_lateness(late, BUSY_SAMPLES);
    print_lateness("  engine, deadline checked every pass", late, BUSY_SAMPLES);
    opal_event_base_free(base);
    opal_finalize_util();
    return 0;
}
