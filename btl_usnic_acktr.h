/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * What we owe a peer (btl_usnic_acktr.c, which has the design notes):
 * ACK scheduling, the ACK fields of outgoing headers, selective ACK
 * ranges, and the receiver's grants.
 */
#ifndef OPAL_BTL_USNIC_ACKTR_H
#define OPAL_BTL_USNIC_ACKTR_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_seq.h"

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

/* Stop owing ACKs to |ep| (teardown). */
void opal_btl_usnic_ack_forget(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/* The cumulative ACK value |ep|'s peer should hear from us */
static inline opal_btl_usnic_seq_t opal_btl_usnic_ack_value(const opal_btl_usnic_endpoint_t *ep)
{
    return ep->rx.next_expected - 1;
}

/* How long an explicit ACK leaving now was held after |ep|'s last segment
 * arrived (opal_btl_usnic_ack_hold_encode); OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN
 * if too long to say or nothing arrived */
unsigned opal_btl_usnic_ack_hold(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep);

/* An ACK with |value| left for |ep| (piggy-backed or explicit): remember
 * when a new value first did, for telling a premature retransmission
 * from a lost ACK (btl_usnic_recv.c). */
void opal_btl_usnic_ack_sent(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_seq_t value);

/* The selective-ACK ranges of an explicit ACK to |ep| into |ranges| (at
 * most OPAL_BTL_USNIC_SACK_RANGES): runs of what we hold between
 * next_expected + 1 and the highest segment accepted.  Returns how many
 * (ranges beyond the last fitting one are left out: their holes wait for
 * the next ACK). */
unsigned opal_btl_usnic_sack_ranges_fill(const opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_sack_range_t *ranges);

#endif /* OPAL_BTL_USNIC_ACKTR_H */
