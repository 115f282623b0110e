/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The away thread.  Reliability lives in this process, so a datagram the
 * network lost is resent only when the process progresses the BTL.  Some
 * runtime calls never do: MPI_Comm_disconnect ends in a blocking PMIx
 * fence, and a rank that sent its last message and entered it waits there
 * for a peer that waits for that message, which was lost (a deadlock
 * btl/tcp cannot have: the kernel resends for it).  A long computation
 * after the last send delays its peer the same way.
 *
 * So one thread per process wakes every btl_usnic_away_resend ms; if the
 * BTL lock is free, the process has not progressed the BTL for that long
 * and it has un-ACKed data, it posts copies of the overdue segments
 * (opal_btl_usnic_resend_away: no upcall, no completion read, no ACK
 * taken, nobody declared dead).  While it runs, the BTL lock is a real
 * lock even in a single-threaded MPI process (OPAL_BTL_USNIC_LOCK).
 *
 * Wake rarely: on a host with more busy processes than cores (2 cores,
 * 4 polling ranks and Open MPI's daemons in the two-host tests), waking
 * every 5 ms stretched MPI_Comm_spawn across hosts from 2 s to 15 s and
 * beyond, even with the thread doing nothing at all; every 50 ms cost
 * nothing measurable.
 */
#include "opal_config.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "btl_usnic.h"

static pthread_t away_thread;
static pthread_mutex_t away_mutex = PTHREAD_MUTEX_INITIALIZER; /* guards away_stop */
static pthread_cond_t away_wake = PTHREAD_COND_INITIALIZER;
static bool away_stop;

static bool any_data_in_flight(const opal_btl_usnic_component_t *c)
{
    for (int i = 0; i < c->num_modules; ++i) {
        if (!opal_list_is_empty(&c->modules[i]->eng.endpoints_in_flight)) {
            return true;
        }
    }
    return false;
}

/* One look: resend for a process that has been away long enough.  A
 * process inside the BTL holds the lock and needs no help: try only. */
static void away_check(opal_btl_usnic_component_t *c, uint64_t away_usec)
{
    if (0 != opal_mutex_trylock(&c->lock)) {
        return;
    }
    uint64_t now = opal_btl_usnic_clock_usec();
    if (now - c->last_progress_usec >= away_usec && any_data_in_flight(c)) {
        for (int i = 0; i < c->num_modules; ++i) {
            opal_btl_usnic_engine_set_time(&c->modules[i]->eng, now);
            (void) opal_btl_usnic_resend_away(&c->modules[i]->eng);
        }
    }
    opal_mutex_unlock(&c->lock);
}

/* Wait |usec| unless told to stop; returns whether to go on */
static bool away_nap(uint64_t usec)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    uint64_t ns = (uint64_t) until.tv_nsec + usec * 1000;
    until.tv_sec += (time_t) (ns / 1000000000);
    until.tv_nsec = (long) (ns % 1000000000);
    pthread_mutex_lock(&away_mutex);
    while (!away_stop && ETIMEDOUT != pthread_cond_timedwait(&away_wake, &away_mutex, &until)) {
        /* woken early (spurious or stop): look again */
    }
    bool go_on = !away_stop;
    pthread_mutex_unlock(&away_mutex);
    return go_on;
}

static void *away_main(void *arg)
{
    opal_btl_usnic_component_t *c = (opal_btl_usnic_component_t *) arg;
    uint64_t away_usec = 1000ull * (uint64_t) c->away_resend;
    while (away_nap(away_usec)) {
        away_check(c, away_usec);
    }
    return NULL;
}

void opal_btl_usnic_away_start(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (c->away_running || 0 == c->away_resend || 0 == c->num_modules) {
        return;
    }
    c->last_progress_usec = opal_btl_usnic_clock_usec();
    c->lock_always = true; /* before the thread exists: every lock/unlock pair sees the same value */
    away_stop = false; /* no thread yet */
    int rc = pthread_create(&away_thread, NULL, away_main, c);
    if (0 != rc) {
        opal_btl_usnic_verbose(1, "cannot start the away thread (%s): lost datagrams wait for MPI calls",
                               strerror(rc));
        return;
    }
    c->away_running = true;
}

void opal_btl_usnic_away_stop(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (!c->away_running) {
        return;
    }
    pthread_mutex_lock(&away_mutex);
    away_stop = true;
    pthread_cond_signal(&away_wake);
    pthread_mutex_unlock(&away_mutex);
    (void) pthread_join(away_thread, NULL);
    c->away_running = false; /* lock_always stays: a pair in progress elsewhere must unlock what it locked */
}
