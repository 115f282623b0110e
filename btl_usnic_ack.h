/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * ACKs and retransmission (btl_usnic_ack.c, which has the design
 * notes): ACK processing on the sender, ACK scheduling and receiver
 * grants on the receiver, retransmit timers and the RTO, goodbyes, and
 * the teardown of a peer that failed or left.
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

/* opal_btl_usnic_handle_ack_info() for an ACK that reports an arrival and
 * grants all a credit can say (the window then limits) */
static inline void opal_btl_usnic_handle_ack(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                             opal_btl_usnic_seq_t ack_seq)
{
    (void) opal_btl_usnic_handle_ack_info(eng, ep, ack_seq, UINT16_MAX, 0, true);
}

/* Length of a receive epoch: peers silent for longer stop holding a share
 * of our receive capacity. */
#define OPAL_BTL_USNIC_RX_EPOCH_USEC 1000u
/* Smallest grant, in our largest datagrams: every active sender keeps a
 * trickle going */
#define OPAL_BTL_USNIC_MIN_GRANT 2u

/* |ep| sent us a data segment: it holds a share of our capacity. */
void opal_btl_usnic_rx_note_sender(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* What |ep| may have un-ACKed toward us, in bytes of our charge
 * (btl_usnic_charge.h): the credit of our next ACK, before its rounding
 * down to credit units */
uint64_t opal_btl_usnic_rx_grant(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep);

/* Set the ACK fields of |hdr| (cumulative ACK and credit) for |ep| */
void opal_btl_usnic_ack_stamp(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_hdr_t *hdr);

/**
 * Check every endpoint with un-ACKed data against the clock: retransmit
 * the oldest segment whose timer expired, declare dead a peer that has not
 * ACKed anything for peer_timeout, and recompute next_deadline.  Called by
 * opal_btl_usnic_engine_progress() when the clock passed next_deadline.
 */
void opal_btl_usnic_engine_expire(opal_btl_usnic_engine_t *eng);

/* When |ep| was last heard from (any ACK, also on data), in words, for
 * the peer timeout message: a peer heard from lately is stuck, not dead. */
void opal_btl_usnic_describe_last_heard(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep,
                                        char *out, size_t len);

/* The retransmit timer of |seg| expired: queue it for retransmission. */
void opal_btl_usnic_retrans_expired(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg);

/* Arm |seg|'s retransmit timer: now + the endpoint's RTO backed off by
 * the timeouts since its ACK last advanced (at most ALIVE_MAX_BACKOFF
 * doublings while the peer was heard from within rto_max). */
void opal_btl_usnic_timer_start(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
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

/**
 * We accepted (or were sent a stale copy of) a segment from |ep|: owe it an
 * ACK.  |urgent| sends it at the next progress pass instead of waiting
 * ack_iteration_delay ticks for a piggy-back.
 */
void opal_btl_usnic_ack_schedule(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, bool urgent);

/* A data segment whose header was stamped (opal_btl_usnic_ack_stamp, done
 * on every data segment: a lost explicit ACK must not leave the peer
 * retransmitting forever) has left: if an ACK was owed, it is paid. */
void opal_btl_usnic_ack_piggyback(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_hdr_t *hdr);

/* Post explicit ACKs that are due.  Returns the number posted. */
int opal_btl_usnic_ack_send_due(opal_btl_usnic_engine_t *eng);

/* Stop owing ACKs to |ep| (teardown). */
void opal_btl_usnic_ack_forget(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* The cumulative ACK value |ep|'s peer should hear from us */
static inline opal_btl_usnic_seq_t opal_btl_usnic_ack_value(const opal_btl_usnic_endpoint_t *ep)
{
    return ep->rx.next_expected - 1;
}


/**
 * Say goodbye to |ep| (at finalize): an ACK of everything we hold, flagged
 * BYE, so that the peer stops waiting for ACKs a finalized process will
 * never send.  OPAL_ERR_TEMP_OUT_OF_RESOURCE if it cannot be posted now.
 */
int opal_btl_usnic_bye_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

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
