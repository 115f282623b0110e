/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The path MTU search of one peer (btl_usnic_pmtu.c): which datagram size
 * the path has confirmed, which size to probe next, when a probe counts
 * as lost, and when a black hole sends the size back to the base.  Pure
 * state, time passed in: posting probes and pieces is the posting
 * layer's (btl_usnic_post.c), driving the search the probe driver's
 * (btl_usnic_probe.c).
 */
#ifndef OPAL_BTL_USNIC_PMTU_H
#define OPAL_BTL_USNIC_PMTU_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic_seq.h"

/* Probes of one size lost in a row before that size counts as too large
 * (RFC 8899's MAX_PROBES) */
#define OPAL_BTL_USNIC_PMTU_MAX_PROBES 3
/* The search stops when the unknown range is narrower than this (bytes) */
#define OPAL_BTL_USNIC_PMTU_GRANULARITY 32
/* Timeouts in a row of a datagram above the base size before a black
 * hole is suspected (with a base-size probe echoed meanwhile) */
#define OPAL_BTL_USNIC_PMTU_BLACKHOLE_TIMEOUTS 2
#define OPAL_BTL_USNIC_PMTU_NEVER UINT64_MAX

typedef struct opal_btl_usnic_pmtu_t {
    uint32_t cur;            /* datagram bytes (our header included) new segments use: confirmed */
    uint32_t max;            /* the pair's interface limit: the search never goes above */
    uint32_t base;           /* a size that surely crosses the path (btl_usnic_pmtu_base) */
    uint32_t low;            /* largest size confirmed in this search */
    uint32_t high;           /* largest size not yet proven too large */
    uint32_t trying;         /* the size being probed (0: none) */
    uint8_t tries;           /* probes of |trying| lost so far */
    bool outstanding;        /* a probe of |trying| awaits its echo */
    bool waiting;            /* the search starts once the peer first answered us */
    uint64_t deadline;       /* the outstanding probe counts as lost at this time */
    uint64_t next_probe;     /* the next probe may go at this time (NEVER: the search rests) */
    uint64_t reprobe;        /* us after a search ends below |max| before it starts again */
    /* black hole detection */
    uint8_t big_timeouts;    /* timeouts in a row of a datagram above |base| */
    opal_btl_usnic_seq_t suspect_acked; /* the cumulative ACK when they started */
    bool base_echoed;        /* a base-size probe was echoed since they started */
    /* statistics of this peer */
    uint32_t probes_sent, probes_acked, probes_lost;
} opal_btl_usnic_pmtu_t;

/* What a timeout of a large datagram asks of the caller */
typedef enum {
    OPAL_BTL_USNIC_PMTU_NOTHING,
    OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE, /* prove that small datagrams still cross */
    OPAL_BTL_USNIC_PMTU_FELL_BACK,       /* black hole: |cur| is the base size now */
} opal_btl_usnic_pmtu_action_t;

/**
 * Start the search state of a pair whose interfaces allow |max| bytes:
 * with |enabled|, new segments use |base| (at most |max|) until a larger
 * probe is echoed, and the search starts at opal_btl_usnic_pmtu_start;
 * without, |cur| is |max| for good (sizes fixed when the peers meet).
 * |reprobe|: us between the end of a search below |max| and the next.
 */
void opal_btl_usnic_pmtu_init(opal_btl_usnic_pmtu_t *st, bool enabled, uint32_t base, uint32_t max,
                              uint64_t reprobe);

/* The peer answered us for the first time: a waiting search starts now.
 * Returns whether it did. */
bool opal_btl_usnic_pmtu_start(opal_btl_usnic_pmtu_t *st, uint64_t now);

/* The size to probe now, or 0 (one outstanding already, or none due). */
uint32_t opal_btl_usnic_pmtu_probe_due(const opal_btl_usnic_pmtu_t *st, uint64_t now);

/* A probe of |size| (opal_btl_usnic_pmtu_probe_due's) left at |now|; it
 * counts as lost after |timeout| us without its echo. */
void opal_btl_usnic_pmtu_probe_sent(opal_btl_usnic_pmtu_t *st, uint32_t size, uint64_t now, uint64_t timeout);

/* The outstanding probe's time ran out: count it lost; after MAX_PROBES
 * losses its size counts as too large.  Returns whether one expired. */
bool opal_btl_usnic_pmtu_probe_expire(opal_btl_usnic_pmtu_t *st, uint64_t now);

/**
 * The peer echoed a probe of |size| bytes (an authentic ACK said so) while
 * our cumulative ACK from it stood at |acked|.  Returns the new |cur| if
 * it changed (raised by a larger size, or lowered to the base by a black
 * hole this echo proves), else 0.
 */
uint32_t opal_btl_usnic_pmtu_echo(opal_btl_usnic_pmtu_t *st, uint32_t size, opal_btl_usnic_seq_t acked,
                                  uint64_t now);

/**
 * A datagram of |len| bytes timed out (its retransmission is leaving now)
 * while the cumulative ACK stood at |acked|.
 */
opal_btl_usnic_pmtu_action_t opal_btl_usnic_pmtu_timeout(opal_btl_usnic_pmtu_t *st, uint32_t len,
                                                         opal_btl_usnic_seq_t acked, uint64_t now);

/* The earliest time the search needs attention (probe due or expiring) */
uint64_t opal_btl_usnic_pmtu_next_event(const opal_btl_usnic_pmtu_t *st);

#endif /* OPAL_BTL_USNIC_PMTU_H */
