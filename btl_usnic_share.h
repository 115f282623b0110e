/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * This process's share of a core (btl_usnic_share.c): is it sharing its
 * core with other busy processes?  Pure: the caller reads the clocks.
 */
#ifndef OPAL_BTL_USNIC_SHARE_H
#define OPAL_BTL_USNIC_SHARE_H

#include <stdbool.h>
#include <stdint.h>

/* How often the share is measured (us of wall time) */
#define OPAL_BTL_USNIC_SHARE_INTERVAL_USEC 100000
/* Below this share of the wall time on the CPU, with at least
 * OPAL_BTL_USNIC_SHARE_PREEMPTIONS involuntary context switches in the
 * interval, the core is shared */
#define OPAL_BTL_USNIC_SHARE_BUSY 0.75
#define OPAL_BTL_USNIC_SHARE_PREEMPTIONS 3

typedef struct {
    uint64_t start;     /* us: wall time the current interval began */
    uint64_t cpu_start; /* us: this thread's CPU time then */
    uint64_t preempted_start; /* the kernel's count of its involuntary switches then */
    bool shared;        /* the last whole interval's verdict */
} opal_btl_usnic_share_t;

void opal_btl_usnic_share_init(opal_btl_usnic_share_t *s, uint64_t now, uint64_t cpu, uint64_t preempted);

/* Is an interval over at wall time |now|?  (then ask the CPU time) */
static inline bool opal_btl_usnic_share_due(const opal_btl_usnic_share_t *s, uint64_t now)
{
    return now - s->start >= OPAL_BTL_USNIC_SHARE_INTERVAL_USEC;
}

/* End the interval at |now| with this thread's CPU time |cpu| and count
 * of involuntary context switches |preempted|, start the next; returns
 * the verdict: was the thread preempted (OPAL_BTL_USNIC_SHARE_PREEMPTIONS
 * times) and on the CPU less than OPAL_BTL_USNIC_SHARE_BUSY of the wall
 * time?  (never for an interval longer than two: not spent polling) */
bool opal_btl_usnic_share_sample(opal_btl_usnic_share_t *s, uint64_t now, uint64_t cpu, uint64_t preempted);

#endif /* OPAL_BTL_USNIC_SHARE_H */
