/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The reliability core: ACK processing, ACK scheduling, retransmission.
 *
 * Design notes
 * ------------
 * Window.  Every data-bearing segment to a peer takes the next 32-bit
 * sequence number.  At most |window| segments are un-ACKed at once: the
 * sender's window is (acked_seq, acked_seq + window].  The receiver accepts
 * [next_expected, next_expected + window); both sides use the same window
 * (the smaller of the two published in the modex), so anything the sender
 * may send fits the receiver's bitmap.
 *
 * ACKs are cumulative: "I have everything <= ack_seq".  A receiver owes an
 * ACK after accepting a segment.  The debt is paid by piggy-backing on the
 * next data segment to that peer, or by an explicit ACK on the priority
 * channel once ack_iteration_delay progress ticks passed.  The ACK is
 * urgent (next tick) when a duplicate or an old segment arrives (our
 * previous ACK was probably lost), when a chunked fragment completes, and
 * when a quarter of the window has been received without an ACK (so the
 * sender's window never closes for want of one).
 *
 * Timers.  Every (re)posted segment has its retransmit timer armed through
 * the wire (production: opal_hotel; tests: a virtual clock).  An ACK that
 * covers the segment disarms it.  On expiry the segment joins the engine's
 * resend list; the send progression reposts at most
 * max_resends_per_iteration of them per pass, always on the data channel, so
 * that retransmissions never crowd ACKs off the priority channel.
 *
 * Duplicate ACKs.  An ACK equal to acked_seq while segments are in flight
 * means the receiver saw something beyond a hole: the first such duplicate
 * for a given ACK value fast-retransmits acked_seq + 1 (only once per value,
 * so a burst of duplicates does not become a burst of resends).
 *
 * Stale ACKs (older than acked_seq) are ignored; ACKs for sequence numbers
 * never sent are ignored and counted as invalid.
 *
 * A peer whose sends fail hard at the provider is reported through
 * wire->peer_failed; its queued fragments fail with OPAL_ERR_UNREACH.
 */
#include "opal_config.h"

#include "btl_usnic_engine.h"

/* ----- sender side ----- */

static void resend_list_remove(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    if (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND) {
        opal_list_remove_item(&eng->resend_segs, &seg->super.super);
        seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND;
    }
}

static void timer_stop(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                       opal_btl_usnic_send_seg_t *seg)
{
    if (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_TIMER) {
        eng->wire->timer_disarm(eng, ep, seg);
        seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_IN_TIMER;
    }
}

/* Queue |seg| for retransmission (idempotent). */
static void resend_enqueue(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    if (!(seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
        seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND;
        opal_list_append(&eng->resend_segs, &seg->super.super);
    }
}

/* The peer has |seg|: take it out of every structure that waits for that. */
static void seg_acked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                      opal_btl_usnic_send_seg_t *seg)
{
    timer_stop(eng, ep, seg);
    resend_list_remove(eng, seg);
    seg->flags = (uint8_t) ((seg->flags & ~OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW) | OPAL_BTL_USNIC_SEG_FLAG_ACKED);
    opal_btl_usnic_seg_release_if_done(eng, seg);
}

static void fast_retransmit(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_seq_t first = ep->tx.acked_seq + 1;
    opal_btl_usnic_send_seg_t *seg = ep->tx.sent[first % ep->window];
    if (NULL == seg || (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
        return;
    }
    timer_stop(eng, ep, seg);
    resend_enqueue(eng, seg);
    OPAL_BTL_USNIC_STAT_INC(eng, num_fast_retrans);
}

void opal_btl_usnic_handle_ack(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                               opal_btl_usnic_seq_t ack_seq)
{
    OPAL_BTL_USNIC_STAT_INC(eng, num_ack_recvs);
    if (opal_btl_usnic_seq_lt(ack_seq, ep->tx.acked_seq)) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_old_dup_acks);
        return;
    }
    if (opal_btl_usnic_seq_ge(ack_seq, ep->tx.next_seq)) {
        /* ACKs something never sent: corrupt or forged */
        OPAL_BTL_USNIC_STAT_INC(eng, num_invalid_recvs);
        return;
    }
    if (ack_seq == ep->tx.acked_seq) {
        if (0 != opal_btl_usnic_endpoint_in_flight(ep)) {
            OPAL_BTL_USNIC_STAT_INC(eng, num_dup_acks);
            if (1 == ++ep->tx.dup_acks) {
                fast_retransmit(eng, ep);
            }
        }
        return;
    }
    for (opal_btl_usnic_seq_t s = ep->tx.acked_seq + 1; opal_btl_usnic_seq_le(s, ack_seq); ++s) {
        opal_btl_usnic_send_seg_t *seg = ep->tx.sent[s % ep->window];
        ep->tx.sent[s % ep->window] = NULL;
        if (NULL != seg) {
            seg_acked(eng, ep, seg);
        }
    }
    ep->tx.acked_seq = ack_seq;
    ep->tx.dup_acks = 0;
    opal_btl_usnic_check_rts(ep);
}

void opal_btl_usnic_retrans_expired(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_IN_TIMER;
    seg->hotel_room = -1;
    if (!(seg->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW)) {
        return; /* ACKed meanwhile */
    }
    if (!(seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
        resend_enqueue(eng, seg);
        OPAL_BTL_USNIC_STAT_INC(eng, num_timeout_retrans);
    }
}

/* ----- receiver side ----- */

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

void opal_btl_usnic_ack_schedule(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, bool urgent)
{
    uint32_t unacked = (uint32_t) (opal_btl_usnic_ack_value(ep) - ep->rx.last_ack_sent);
    if (unacked >= ep->window / 4) {
        urgent = true;
    }
    uint64_t due = urgent ? eng->tick : eng->tick + eng->p.ack_iteration_delay;
    if (!ep->rx.ack_owed || due < ep->rx.ack_due_tick) {
        ep->rx.ack_due_tick = due;
    }
    ep->rx.ack_owed = true;
    ack_list_add(eng, ep);
}

void opal_btl_usnic_ack_piggyback(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_hdr_t *hdr)
{
    if (!ep->rx.ack_owed) {
        return;
    }
    opal_btl_usnic_seq_t value = opal_btl_usnic_ack_value(ep);
    hdr->flags |= OPAL_BTL_USNIC_HDR_FLAG_ACK;
    hdr->ack_seq = opal_btl_usnic_wire32(value);
    ep->rx.last_ack_sent = value;
    opal_btl_usnic_ack_forget(eng, ep);
    OPAL_BTL_USNIC_STAT_INC(eng, num_piggy_acks);
}

/* Post one explicit ACK to |ep|.  Returns OPAL_SUCCESS or the post error. */
static int ack_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_send_seg_t *seg = opal_btl_usnic_ack_seg_alloc(eng);
    if (NULL == seg) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    opal_btl_usnic_seq_t value = opal_btl_usnic_ack_value(ep);
    opal_btl_usnic_hdr_fill(eng, seg->hdr, OPAL_BTL_USNIC_PKT_ACK, 0, 0, 0);
    seg->hdr->flags = OPAL_BTL_USNIC_HDR_FLAG_ACK;
    seg->hdr->ack_seq = opal_btl_usnic_wire32(value);
    seg->wire_len = sizeof(opal_btl_usnic_hdr_t);
    seg->ep = ep;
    /* ACKs are never ACKed: the segment is recyclable once the provider
     * releases it */
    seg->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED | OPAL_BTL_USNIC_SEG_FLAG_POSTED;
    seg->channel = OPAL_BTL_USNIC_PRIORITY_CHANNEL;
    int rc = eng->wire->post(eng, ep, seg, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    if (OPAL_SUCCESS != rc) {
        seg->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED;
        opal_btl_usnic_seg_release_if_done(eng, seg);
        return rc;
    }
    --eng->credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    ep->rx.last_ack_sent = value;
    OPAL_BTL_USNIC_STAT_INC(eng, num_ack_sends);
    return OPAL_SUCCESS;
}

int opal_btl_usnic_ack_send_due(opal_btl_usnic_engine_t *eng)
{
    int posted = 0;
    opal_list_item_t *item = opal_list_get_first(&eng->endpoints_needing_ack);
    while (item != opal_list_get_end(&eng->endpoints_needing_ack)) {
        opal_list_item_t *next = opal_list_get_next(item);
        opal_btl_usnic_endpoint_t *ep =
            (opal_btl_usnic_endpoint_t *) ((char *) item - offsetof(opal_btl_usnic_endpoint_t, rx.ack_item));
        if (ep->rx.ack_due_tick <= eng->tick && !ep->failed) {
            if (eng->credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] <= 0) {
                break;
            }
            int rc = ack_send(eng, ep);
            if (OPAL_ERR_TEMP_OUT_OF_RESOURCE == rc) {
                OPAL_BTL_USNIC_STAT_INC(eng, num_send_eagain);
                break;
            }
            opal_btl_usnic_ack_forget(eng, ep);
            if (OPAL_SUCCESS == rc) {
                ++posted;
            } else {
                eng->wire->peer_failed(eng, ep, rc);
            }
        }
        item = next;
    }
    return posted;
}
