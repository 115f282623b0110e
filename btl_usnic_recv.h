/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The receive side of the engine (btl_usnic_recv.c): validation,
 * sequence classification, reassembly, in-order delivery to the PML, and
 * the fast receive path.
 */
#ifndef OPAL_BTL_USNIC_RECV_H
#define OPAL_BTL_USNIC_RECV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_seq.h"

/* Where a received sequence number falls */
typedef enum {
    OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER, /* == next expected */
    OPAL_BTL_USNIC_SEQ_NEW_OOO,      /* inside the window, beyond a hole */
    OPAL_BTL_USNIC_SEQ_DUP,          /* inside the window, already received */
    OPAL_BTL_USNIC_SEQ_OLD,          /* below the window: delivered long ago */
    OPAL_BTL_USNIC_SEQ_TOO_NEW,      /* beyond the window */
} opal_btl_usnic_seq_class_t;

/* Pure classification of |seq| against |ep|'s receive window. */
opal_btl_usnic_seq_class_t opal_btl_usnic_seq_classify(const opal_btl_usnic_endpoint_t *ep,
                                                       opal_btl_usnic_seq_t seq);

/* A datagram as a wire hands it up: |len| bytes at |buf| (provider
 * prefix skipped) that arrived on |channel| from |src| (the wire's address
 * form, as in ep->peer_addr; compared with the claimed sender's where
 * params.check_source says the wire reports sources) at |arrival|
 * (delay samples of the congestion control leave out the time a
 * descheduled process took to read it) */
typedef struct opal_btl_usnic_datagram_t {
    void *buf;
    size_t len;
    int channel;
    uint64_t src;
    uint64_t arrival;   /* us on the engine's clock: when the host received it (the kernel's
                           timestamp), before any wait for the process; 0 = read at once (now
                           stands for it); OPAL_BTL_USNIC_ARRIVAL_UNKNOWN = it may have waited */
} opal_btl_usnic_datagram_t;

/* A datagram the wire drops before it can hand it up (OPAL_BTL_USNIC_DROP_*
 * |reason|: OVERSIZED, TRUNCATED), counted as a receive and a drop */
void opal_btl_usnic_recv_drop(opal_btl_usnic_engine_t *eng, int reason);

/**
 * Process one datagram.  Validates it, finds the sender (the upcalls'
 * lookup, once), checks its source, handles ACK information, accepts or
 * drops the segment, delivers complete fragments to the PML and notes
 * that an ACK is owed.  |dg->buf| may be reused when this returns.  Never
 * trusts a header field it did not check.
 */
void opal_btl_usnic_recv_segment(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_datagram_t *dg);

typedef enum {
    OPAL_BTL_USNIC_FAST_DECLINED, /* not for the fast path: nothing changed, use recv_segment */
    OPAL_BTL_USNIC_FAST_TAKEN,    /* delivered: opal_btl_usnic_recv_fast_finish() owed */
    OPAL_BTL_USNIC_FAST_DROPPED,  /* not authentic, or a replay: dropped and counted */
} opal_btl_usnic_fast_t;

/* May a wire offer a datagram to the fast path now?  Not while one it
 * took awaits its bookkeeping, nor from inside the PML's upcall of one
 * (the PML may progress again from there). */
static inline bool opal_btl_usnic_recv_fast_ready(const opal_btl_usnic_engine_t *eng)
{
    return NULL == eng->fast_deferred && !eng->fast_in_upcall;
}

/**
 * Fast receive path, step 1 (only when recv_fast_ready): if |dg| is a
 * FRAG segment that is next in order (and its successor has not
 * arrived), authenticate it and accept it exactly as
 * opal_btl_usnic_recv_segment() would (the same accept, so the same ACK
 * information taken, window mark, delivery to the PML, counters but
 * num_fast_recvs, and ACK decision), except that the ACK is only decided,
 * not scheduled: TAKEN owes opal_btl_usnic_recv_fast_finish() (the
 * engine remembers whose; *|ep_p|, if not NULL, says too).
 */
opal_btl_usnic_fast_t opal_btl_usnic_recv_fast(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_datagram_t *dg,
                                               opal_btl_usnic_endpoint_t **ep_p);
/* What a receiver holds of one peer's stream (statistics: why a sender
 * might wait) */
typedef struct opal_btl_usnic_rx_state_t {
    opal_btl_usnic_seq_t next_expected; /* the first sequence number not yet received */
    uint32_t ahead;                     /* segments received beyond it */
    uint32_t holes;                     /* missing sequence numbers below the highest received */
    uint32_t held;                      /* complete fragments waiting for earlier ones */
    uint32_t slots;                     /* reassembly slots in use */
} opal_btl_usnic_rx_state_t;

void opal_btl_usnic_rx_state(const opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_rx_state_t *st);

/* Fast receive path, step 2 (a wire's next full pass, first thing): the
 * deferred bookkeeping of what step 1 took, scheduling the ACK as it
 * decided.  False if nothing was owed (then the wire has no buffer to
 * give back either). */
bool opal_btl_usnic_recv_fast_finish(opal_btl_usnic_engine_t *eng);

#endif /* OPAL_BTL_USNIC_RECV_H */
