/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The sender's reliability (btl_usnic_ack.c, which has the design
 * notes): ACK processing, the hotel (retransmit deadlines), the RTO,
 * retransmission decisions, and the teardown of a peer that failed or
 * left.
 */
#ifndef OPAL_BTL_USNIC_ACK_H
#define OPAL_BTL_USNIC_ACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_seq.h"

/**
 * A cumulative ACK for everything <= |ack_seq| arrived from |ep|: release
 * newly ACKed segments, fast-retransmit on duplicate ACKs, ignore stale
 * ones.  |reports_arrival|: the peer sent this ACK because something
 * arrived (an explicit ACK, or a piggy-back flagged ACK_NEW); only such an
 * ACK that repeats acked_seq is a duplicate ACK.  Data segments repeat the
 * current ACK every time, which says nothing about holes.  Returns false
 * for a stale ACK or one beyond anything sent: nothing else of it (its
 * flags, the peer being alive) may be taken then.
 */
bool opal_btl_usnic_handle_ack_info(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                    opal_btl_usnic_seq_t ack_seq, uint32_t credit, uint16_t sack,
                                    bool reports_arrival);

/**
 * The selective-ACK ranges of an explicit ACK from |ep| whose cumulative
 * ACK was just taken (opal_btl_usnic_handle_ack_info returned true):
 * marks the segments the peer holds (never resent), and resends at once
 * every one below the highest held that the peer lacks and that waited a
 * round trip.  Ranges beyond what was sent are ignored.
 */
void opal_btl_usnic_sack_ranges_take(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                     const opal_btl_usnic_sack_range_t *ranges, unsigned n);

/**
 * The hold (opal_btl_usnic_ack_hold_encode) of an explicit ACK from |ep|
 * that opal_btl_usnic_handle_ack_info just took: the round trip of the
 * newest segment it covered, less the hold, is the congestion
 * controller's delay sample (none if that segment was sent again, or the
 * hold is unknown).
 */
void opal_btl_usnic_ack_hold_taken(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, unsigned hold);

/* opal_btl_usnic_handle_ack_info() for an ACK that reports an arrival and
 * grants all a credit can say (the window then limits) */
static inline void opal_btl_usnic_handle_ack(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                             opal_btl_usnic_seq_t ack_seq)
{
    (void) opal_btl_usnic_handle_ack_info(eng, ep, ack_seq, UINT16_MAX, 0, true);
}

/**
 * The hotel's evictions: check every endpoint with guests against the
 * clock, queue for retransmission the oldest segment whose deadline
 * passed (with the rest of its batch), declare dead a peer that has not
 * ACKed anything for peer_timeout, and recompute next_deadline.  Called
 * by opal_btl_usnic_engine_progress() when the clock passed
 * next_deadline.
 */
void opal_btl_usnic_hotel_evict_due(opal_btl_usnic_engine_t *eng);

/* When |ep| was last heard from (any ACK, also on data), in words, for
 * the peer timeout message: a peer heard from lately is stuck, not dead. */
void opal_btl_usnic_describe_last_heard(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep,
                                        char *out, size_t len);

/* The retransmit timer of |seg| expired: queue it for retransmission. */
void opal_btl_usnic_retrans_expired(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg);

/* Check |seg| (just posted to |ep|) into the hotel: its deadline is now
 * + the endpoint's RTO backed off by the timeouts since its ACK last
 * advanced (at most ALIVE_MAX_BACKOFF doublings while the peer was heard
 * from within rto_max); next_deadline is lowered to it, and |ep| joins
 * the register (endpoints_in_flight).  A segment checked in already gets
 * the new deadline.  Check-out is the ACK's (or the retransmission
 * queue's) business, inside btl_usnic_ack.c. */
void opal_btl_usnic_hotel_checkin(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_send_seg_t *seg);

/* A peer that answered within rto_max is alive: its losses are random,
 * not a dead or congested path, and waiting 8x, 16x ... the RTO for each
 * lost retransmission only stalls the window (one segment per timeout is
 * resent, so this adds no load worth backing off from). */
#define OPAL_BTL_USNIC_ALIVE_MAX_BACKOFF 2u

/* A raised RTO floor halves back toward rto_min after this long without
 * another premature timeout (see "Premature timeouts" in btl_usnic_ack.c) */
#define OPAL_BTL_USNIC_FLOOR_DECAY_USEC 10000000u
/* ... and is not raised within this long after a reported hole */
#define OPAL_BTL_USNIC_LOSS_MEMORY_USEC 2000000u

/* An ACK from |ep| (|repaired|: it says a retransmitted copy filled a
 * hole) covers our outstanding tail-loss probe: a probe that filled no
 * hole was spurious (the peer was slow to ACK) and doubles the probe
 * timeout's floor, at most rto_max; one that did resets it. */
void opal_btl_usnic_probe_verdict(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, bool repaired);

/* The ACK from |ep| says our last timeout was premature (FLAG_LATE_DUP):
 * raise its RTO floor. */
void opal_btl_usnic_premature_timeout(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* The ACK from |ep| says a retransmission of ours filled a hole
 * (FLAG_REPAIRED): the path loses datagrams, keep the RTO floor low. */
void opal_btl_usnic_loss_reported(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* Exponential back-off: |rto| doubled |retries| times, at most |rto_max|. */
static inline uint64_t opal_btl_usnic_rto_backoff(uint64_t rto, unsigned retries, uint64_t rto_max)
{
    unsigned shift = retries < 20 ? retries : 20;
    uint64_t t = rto << shift;
    return t < rto_max ? t : rto_max;
}

/**
 * RFC 6298 estimator: fold one RTT |sample| (us) into srtt/rttvar and
 * return the new RTO clamped to [|rto_min|, |rto_max|].
 */
uint64_t opal_btl_usnic_rtt_update(uint64_t *srtt, uint64_t *rttvar, uint64_t sample, uint64_t rto_min,
                                   uint64_t rto_max);

/* |ep| said goodbye: release what it never ACKed, refuse it from now on */
void opal_btl_usnic_peer_departed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/**
 * Fail every fragment queued on |ep| with |status| and forget every
 * un-ACKed segment (as if ACKed).  Used at teardown and for dead peers.
 * (Declared here, not in btl_usnic_endpoint.h: it fails fragments and
 * releases segments, the work of the layers above the endpoint.)
 */
void opal_btl_usnic_endpoint_flush(opal_btl_usnic_endpoint_t *ep, int status);

#endif /* OPAL_BTL_USNIC_ACK_H */
