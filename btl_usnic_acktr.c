/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * What we owe a peer (the receive side of ACKs): when an ACK is due,
 * what it says (cumulative ACK, selective ACK bits and ranges, the
 * receiver's grant), and paying the debt by piggy-back.  Nothing here
 * posts: explicit ACKs are posted by btl_usnic_post.c.  The sender's side
 * of ACKs is btl_usnic_ack.c.
 *
 * Design notes
 * ------------
 * Grants.  Every ACK also carries a credit: what the segments the sender
 * has un-ACKed past it may cost the receiver, in KiB of its charge
 * (btl_usnic_charge.h: a kernel socket charges a small datagram 832 bytes
 * and one of 65000 bytes 65832; a posted buffer is one datagram whatever
 * its size).  The sender counts each segment with the receiver's table
 * from the modex and stays inside both its window and the credit, so
 * small messages get thousands in flight where large ones get tens.  The
 * receiver computes the credit when the ACK leaves: half its receive
 * capacity (what its sockets hold between two progress passes, or its
 * posted buffers) minus the buffers it is still processing (not yet
 * re-posted: seed 004 granted credits on receipt and overran its
 * receiver), shared evenly among the peers that sent it data in the
 * current or the previous epoch (1 ms), never below OPAL_BTL_USNIC_MIN_GRANT
 * of its largest datagrams; the other half takes the first bursts of
 * senders not counted yet.  Until the first grant the sender may have a
 * quarter of the published capacity in flight.  So N senders into one
 * receiver keep their sum inside its buffer instead of N windows
 * overflowing it.
 *
 * ACKs are cumulative: "I have everything <= ack_seq".  Every data segment
 * carries the current ACK, so that the loss of explicit ACKs (which travel
 * alone, on the priority channel) can never leave both peers
 * retransmitting forever.  A receiver owes an ACK after accepting a
 * segment.  The debt is paid by the next data segment to that peer
 * (flagged ACK_NEW), or by an explicit ACK on the priority channel once
 * ack_iteration_delay progress ticks and ack_delay microseconds passed
 * (time, because the number of passes per microsecond varies tenfold with
 * what progress finds to do: a reply sent within ack_delay carries the
 * ACK, which spares both sides a datagram each way).  The ACK is urgent
 * (next tick) when a duplicate or an old segment arrives (our previous ACK
 * was probably lost), when the segment asks for it (ACK_SOON: the last
 * segment of a PUT, whose completion waits for it), and when half of the
 * window, or segments costing half of the last grant, have been received
 * without an ACK (so the sender's window never closes for want of one).
 */
#include "opal_config.h"

#include <string.h>

#include "btl_usnic_acktr.h"
#include "btl_usnic_endpoint.h"

static void ack_list_add(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (!ep->rx.on_ack_list) {
        opal_list_append(&eng->endpoints_needing_ack, &ep->rx.ack_item);
        ep->rx.on_ack_list = true;
    }
}

void opal_btl_usnic_ack_forget(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (ep->rx.on_ack_list) {
        opal_list_remove_item(&eng->endpoints_needing_ack, &ep->rx.ack_item);
        ep->rx.on_ack_list = false;
    }
    ep->rx.ack_owed = false;
}

/* Start a new epoch once the current one is over; an idle gap of more
 * than one epoch forgets the previous senders too. */
static void rx_epoch_roll(opal_btl_usnic_engine_t *eng)
{
    uint64_t elapsed = eng->now - eng->rx_epoch_start;
    if (elapsed < OPAL_BTL_USNIC_RX_EPOCH_USEC) {
        return;
    }
    eng->rx_senders_prev = (elapsed < 2 * OPAL_BTL_USNIC_RX_EPOCH_USEC) ? eng->rx_senders_now : 0;
    eng->rx_senders_now = 0;
    eng->rx_epoch_start = eng->now;
    ++eng->rx_epoch;
}

void opal_btl_usnic_rx_note_sender(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    rx_epoch_roll(eng);
    if (ep->rx.active_epoch != eng->rx_epoch + 1) {
        ep->rx.active_epoch = eng->rx_epoch + 1;
        ++eng->rx_senders_now;
    }
}

uint64_t opal_btl_usnic_rx_grant(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep)
{
    (void) ep;
    uint64_t most = (uint64_t) UINT16_MAX * OPAL_BTL_USNIC_CREDIT_UNIT;
    if (0 == eng->p.rx_capacity) {
        return most; /* unknown: the window alone limits */
    }
    rx_epoch_roll(eng);
    uint32_t senders = (eng->rx_senders_now > eng->rx_senders_prev) ? eng->rx_senders_now : eng->rx_senders_prev;
    if (0 == senders) {
        senders = 1;
    }
    /* Buffers still being processed are not re-posted yet: not ours to
     * grant (the flaw of seed 004 was granting on receipt). */
    uint32_t largest = opal_btl_usnic_charge_of(&eng->p.rx_charge, eng->p.mtu);
    uint64_t held = (uint64_t) eng->rx_buffers_held * largest;
    uint64_t free_capacity = (eng->p.rx_capacity > held) ? eng->p.rx_capacity - held : 0;
    /* half of it shared: the other half takes the first bursts of senders
     * not counted yet (their first grant is a quarter of what we hold) and
     * what older, larger grants still let in */
    uint64_t grant = free_capacity / 2 / senders;
    uint64_t least = (uint64_t) OPAL_BTL_USNIC_MIN_GRANT * largest;
    if (grant < least) {
        grant = least;
    }
    return grant < most ? grant : most;
}

/* Selective ACK bits for |ep|'s peer: bit i = we have next_expected + 1 + i */
static uint16_t sack_bits(const opal_btl_usnic_endpoint_t *ep)
{
    uint16_t bits = 0;
    for (uint32_t i = 0; i < 16 && i + 1 < ep->window; ++i) {
        if (ep->rx.rcvd[opal_btl_usnic_slot(ep, (opal_btl_usnic_seq_t) (ep->rx.next_expected + 1 + i))]) {
            bits |= (uint16_t) (1u << i);
        }
    }
    return bits;
}

void opal_btl_usnic_ack_stamp(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_hdr_t *hdr)
{
    uint64_t grant = opal_btl_usnic_rx_grant(eng, ep);
    hdr->flags |= OPAL_BTL_USNIC_HDR_FLAG_ACK;
    hdr->ack_seq = opal_btl_usnic_wire32(opal_btl_usnic_ack_value(ep));
    hdr->credit = opal_btl_usnic_wire16((uint16_t) (grant / OPAL_BTL_USNIC_CREDIT_UNIT));
    hdr->sack = opal_btl_usnic_wire16(sack_bits(ep));
    if (ep->rx.late_dup) {
        hdr->flags |= OPAL_BTL_USNIC_HDR_FLAG_LATE_DUP;
        ep->rx.late_dup = false;
    }
    if (ep->rx.repaired) {
        hdr->flags |= OPAL_BTL_USNIC_HDR_FLAG_REPAIRED;
        ep->rx.repaired = false;
    }
    ep->rx.last_grant = grant;
}

void opal_btl_usnic_ack_schedule(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, bool urgent)
{
    /* ACK at once when half of the window, or half of what we last
     * granted, arrived un-ACKed: the sender, which may have the other half
     * in flight, must never stall for an ACK. */
    uint32_t unacked = (uint32_t) (opal_btl_usnic_ack_value(ep) - ep->rx.last_ack_sent);
    if (unacked >= ep->window / 2 || (0 != ep->rx.last_grant && ep->rx.charge_since_ack >= ep->rx.last_grant / 2)) {
        urgent = true;
    }
    uint64_t due = urgent ? eng->tick : eng->tick + eng->p.ack_iteration_delay;
    uint64_t due_time = urgent ? eng->now : eng->now + eng->p.ack_delay;
    if (!ep->rx.ack_owed || due < ep->rx.ack_due_tick) {
        ep->rx.ack_due_tick = due;
    }
    if (!ep->rx.ack_owed || due_time < ep->rx.ack_due_time) {
        ep->rx.ack_due_time = due_time;
    }
    ep->rx.ack_owed = true;
    ack_list_add(eng, ep);
}

unsigned opal_btl_usnic_ack_hold(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep)
{
    if (0 == ep->rx.last_arrival || eng->now < ep->rx.last_arrival) { /* OPAL_BTL_USNIC_ARRIVAL_UNKNOWN too */
        return OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN;
    }
    return opal_btl_usnic_ack_hold_encode(eng->now - ep->rx.last_arrival);
}

void opal_btl_usnic_ack_sent(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_seq_t value)
{
    ep->rx.charge_since_ack = 0;
    if (value != ep->rx.last_ack_sent) {
        ep->rx.prev_ack_sent = ep->rx.last_ack_sent;
        ep->rx.last_ack_sent = value;
        ep->rx.last_ack_time = eng->now;
    }
}

void opal_btl_usnic_ack_piggyback(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_hdr_t *hdr)
{
    /* |hdr| was stamped (opal_btl_usnic_ack_stamp) before it was posted */
    if (!ep->rx.ack_owed) {
        return;
    }
    opal_btl_usnic_ack_sent(eng, ep, opal_btl_usnic_host32(hdr->ack_seq));
    opal_btl_usnic_ack_forget(eng, ep);
    OPAL_BTL_USNIC_STAT_INC(eng, num_piggy_acks);
}

unsigned opal_btl_usnic_sack_ranges_fill(const opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_sack_range_t *ranges)
{
    if (!opal_btl_usnic_seq_gt(ep->rx.highest, ep->rx.next_expected)) {
        return 0; /* nothing beyond the first hole */
    }
    uint32_t limit = (uint32_t) (ep->rx.highest - ep->rx.next_expected);
    if (limit >= ep->window) {
        limit = ep->window - 1;
    }
    unsigned n = 0;
    uint32_t i = 1;
    while (i <= limit && n < OPAL_BTL_USNIC_SACK_RANGES) {
        if (!ep->rx.rcvd[opal_btl_usnic_slot(ep, (opal_btl_usnic_seq_t) (ep->rx.next_expected + i))]) {
            ++i;
            continue;
        }
        uint32_t start = i;
        while (i <= limit && ep->rx.rcvd[opal_btl_usnic_slot(ep, (opal_btl_usnic_seq_t) (ep->rx.next_expected + i))]) {
            ++i;
        }
        ranges[n].start = opal_btl_usnic_wire16((uint16_t) (start - 1));
        ranges[n].len = opal_btl_usnic_wire16((uint16_t) (i - start));
        ++n;
    }
    return n;
}
