/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The posting layer: every datagram the engine sends leaves through here.
 * First transmissions (the next sequence number, the current ACK stamped
 * on, sealed, posted, checked into the hotel), retransmissions from the
 * resend list, explicit ACKs and goodbyes, copies nobody ACKs, the
 * channels' credits, and the send queue of each endpoint.  Above the
 * ACK state of both directions (btl_usnic_acktr.c, btl_usnic_ack.c),
 * which posts nothing itself; below PUT (btl_usnic_put.c) and the send
 * progression (btl_usnic_send.c).
 *
 * Design notes
 * ------------
 * Retransmissions go through the engine's resend list; the send progression
 * reposts at most max_resends_per_iteration of them per pass, always on the
 * data channel, so that retransmissions never crowd ACKs off the priority
 * channel.
 *
 * Pieces.  A segment cut before the path shrank (a black hole, the path
 * MTU search's fall-back) is larger than the path carries.  It keeps its
 * sequence number, its place in the window and its timer; each copy is
 * sealed as usual and then cut into PIECE datagrams of the path's size
 * (each sealed too: a forged piece cannot spoil a reassembly), which the
 * receiver puts back together and takes as if the whole had arrived
 * (btl_usnic_pieces.c).  Chosen over re-chunking (new sequence numbers for
 * data already numbered and perhaps partly received would break the
 * window's one-segment-one-number rule and the receiver's reassembly
 * slots) and over IP fragmentation (a black hole drops what exceeds the
 * link whatever the DF bit says, and the kernel fragments at the MTU ICMP
 * taught it).  Cost, paid only by segments cut larger than the path: a
 * copy and a tag per piece at the sender, a copy into the reassembly
 * buffer and a second tag check at the receiver, 64 header bytes per
 * piece, and a lost piece costs the whole segment's retransmission.
 */
#include "opal_config.h"

#include <string.h>

#include "btl_usnic_ack.h"
#include "btl_usnic_acktr.h"
#include "btl_usnic_auth.h"
#include "btl_usnic_complete.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_post.h"

/* ----- first transmissions ----- */

/* |seg| left (|whole|: as one datagram on |channel|, which took a send
 * slot; else as pieces, which took theirs) */
static void post_succeeded(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                           opal_btl_usnic_send_seg_t *seg, int channel, bool whole)
{
    if (whole) {
        --eng->credits[channel];
    } else {
        seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_POSTED; /* its pieces carry copies: the buffer is ours */
    }
    eng->away_next = 0; /* the owner just sent: resend_away's back-off starts afresh */
    eng->away_interval = 0;
    opal_btl_usnic_hotel_checkin(eng, ep, seg);
    OPAL_BTL_USNIC_STAT_INC(eng, num_total_sends);
}

/* Stamp the current ACK on |hdr| without paying the debt yet: the debt is
 * paid (opal_btl_usnic_ack_piggyback) only once the segment really left.
 * Returns whether an ACK was owed. */
static bool stamp_ack(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_hdr_t *hdr)
{
    hdr->flags = (uint8_t) ((hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK_SOON) |
                            (ep->rx.ack_owed ? OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW : 0));
    opal_btl_usnic_ack_stamp(eng, ep, hdr);
    return ep->rx.ack_owed;
}

/* |ep| reached the end of its nonces: its peer fails at the engine's
 * next progress pass (opal_btl_usnic_nonces_spent_fail), not here in the
 * middle of a post; the 2^32 counts left above the stop cover the rest */
static void nonces_spent(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (!ep->tx.nonces_spent) {
        ep->tx.nonces_spent = true;
        ep->tx.spent_next = eng->nonces_spent;
        eng->nonces_spent = ep;
    }
}

void opal_btl_usnic_nonces_spent_fail(opal_btl_usnic_engine_t *eng)
{
    while (NULL != eng->nonces_spent) {
        opal_btl_usnic_endpoint_t *ep = eng->nonces_spent;
        eng->nonces_spent = ep->tx.spent_next;
        ep->tx.spent_next = NULL;
        eng->up->peer_failed(eng, ep, OPAL_ERR_OUT_OF_RESOURCE);
    }
}

/* Nonce and tag of a datagram of |len| bytes at |hdr| followed by
 * |ext_len| bytes at |ext| (a payload gathered from elsewhere) */
static void seal_parts(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_hdr_t *hdr,
                       size_t len, const uint8_t *ext, size_t ext_len)
{
    uint64_t nonce = ep->tx.nonce++;
    if (OPAL_UNLIKELY(opal_btl_usnic_nonce_spent(nonce))) {
        nonces_spent(eng, ep);
    }
    hdr->nonce = opal_btl_usnic_wire64(nonce);
    memset(hdr->mac, 0, sizeof(hdr->mac));
    if (OPAL_BTL_USNIC_PROTECT_NONE == eng->p.protect) {
        return;
    }
    if (OPAL_BTL_USNIC_PROTECT_FULL == eng->p.protect) {
        opal_btl_usnic_mac_tag2(&ep->tx.mac, nonce, (const uint8_t *) hdr, len, ext, ext_len, hdr->mac);
    } else {
        opal_btl_usnic_mac_tag(&ep->tx.mac, nonce, (const uint8_t *) hdr, opal_btl_usnic_hdr_len(hdr->type),
                               hdr->mac);
    }
}

void opal_btl_usnic_seal(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_hdr_t *hdr,
                         size_t len)
{
    seal_parts(eng, ep, hdr, len, NULL, 0);
}

void opal_btl_usnic_seg_seal(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *seg)
{
    /* full protection covers a gathered payload where it lies (engine_init
     * gathers under full protection only where the MAC streams) */
    seal_parts(eng, ep, seg->hdr, opal_btl_usnic_seg_inline_len(seg), seg->ext_data, seg->ext_len);
}

/* ----- datagrams larger than the path allows now: pieces ----- */

/* Copy |n| bytes at |off| of |seg|'s datagram (its buffer, then a
 * gathered payload) to |dst| */
static void seg_bytes_copy(const opal_btl_usnic_send_seg_t *seg, size_t off, uint8_t *dst, size_t n)
{
    size_t inline_len = opal_btl_usnic_seg_inline_len(seg);
    if (off < inline_len) {
        size_t k = (inline_len - off < n) ? inline_len - off : n;
        memcpy(dst, (const uint8_t *) seg->hdr + off, k);
        dst += k;
        off += k;
        n -= k;
    }
    if (n > 0) {
        memcpy(dst, seg->ext_data + (off - inline_len), n);
    }
}

/* Post one piece: bytes [off, off + len) of the sealed |seg| */
static int piece_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                      const opal_btl_usnic_send_seg_t *seg, size_t off, size_t len)
{
    opal_btl_usnic_send_seg_t *piece = opal_btl_usnic_chunk_seg_alloc(&eng->pool);
    if (NULL == piece) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    opal_btl_usnic_piece_hdr_t *ph = (opal_btl_usnic_piece_hdr_t *) piece->hdr;
    opal_btl_usnic_hdr_fill(eng, &ph->hdr, OPAL_BTL_USNIC_PKT_PIECE, seg->seq, len, 0);
    ph->whole_nonce = seg->hdr->nonce; /* already in wire order */
    ph->whole_len = opal_btl_usnic_wire16((uint16_t) seg->wire_len);
    ph->offset = opal_btl_usnic_wire16((uint16_t) off);
    seg_bytes_copy(seg, off, (uint8_t *) (ph + 1), len);
    piece->wire_len = (uint32_t) (sizeof(*ph) + len);
    piece->ep = ep;
    int rc = opal_btl_usnic_post_unacked(eng, ep, piece, OPAL_BTL_USNIC_DATA_CHANNEL);
    if (OPAL_SUCCESS == rc) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_pieces_sent);
    }
    return rc;
}

/* Post the sealed |seg| as pieces of |ep|'s datagram size, all of equal
 * length but the last.  Each piece is a sealed datagram of its own; the
 * receiver checks the reassembled whole as if it had come in one.  A
 * failure may leave some pieces sent: a copy that never completes there
 * (the next copy has another nonce). */
static int pieces_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                       const opal_btl_usnic_send_seg_t *seg)
{
    size_t whole = seg->wire_len;
    size_t room = ep->pmtu.cur - sizeof(opal_btl_usnic_piece_hdr_t);
    if (eng->credits[OPAL_BTL_USNIC_DATA_CHANNEL] < (int32_t) ((whole + room - 1) / room)) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    for (size_t off = 0; off < whole; off += room) {
        int rc = piece_post(eng, ep, seg, off, (whole - off < room) ? whole - off : room);
        if (OPAL_SUCCESS != rc) {
            return rc;
        }
    }
    return OPAL_SUCCESS;
}

/* Post the sealed |seg| to |ep|: whole on |channel| when the path takes
 * it (*|whole_p|), else as pieces on the data channel */
static int datagram_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                         opal_btl_usnic_send_seg_t *seg, int channel, bool *whole_p)
{
    *whole_p = OPAL_LIKELY(seg->wire_len <= ep->pmtu.cur);
    return *whole_p ? eng->wire->post(eng, ep, seg, channel) : pieces_post(eng, ep, seg);
}

/* ----- path MTU probes ----- */

int opal_btl_usnic_probe_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t size)
{
    if (!opal_btl_usnic_have_credit(eng, OPAL_BTL_USNIC_DATA_CHANNEL) || size < sizeof(opal_btl_usnic_hdr_t)) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    opal_btl_usnic_send_seg_t *seg = opal_btl_usnic_chunk_seg_alloc(&eng->pool);
    if (NULL == seg) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    size_t padding = size - sizeof(opal_btl_usnic_hdr_t);
    opal_btl_usnic_hdr_fill(eng, seg->hdr, OPAL_BTL_USNIC_PKT_PROBE, 0, padding, 0);
    memset(opal_btl_usnic_seg_payload(seg, sizeof(opal_btl_usnic_hdr_t)), 0, padding);
    seg->wire_len = (uint32_t) size;
    seg->ep = ep;
    int rc = opal_btl_usnic_post_unacked(eng, ep, seg, OPAL_BTL_USNIC_DATA_CHANNEL);
    if (OPAL_SUCCESS == rc) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_pmtu_probes);
    }
    return rc;
}

/* The oldest segment to |ep|, larger than the base size, timed out and
 * its copy leaves now: the search may ask for proof that small datagrams
 * still cross, or find a black hole (then the copy goes as pieces) */
static void pmtu_timeout(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                         const opal_btl_usnic_send_seg_t *seg)
{
    size_t old = ep->pmtu.cur;
    switch (opal_btl_usnic_pmtu_timeout(&ep->pmtu, seg->wire_len, ep->tx.acked_seq, eng->now)) {
    case OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE:
        if (OPAL_SUCCESS == opal_btl_usnic_probe_post(eng, ep, ep->pmtu.base)) {
            opal_btl_usnic_pmtu_probe_sent(&ep->pmtu, ep->pmtu.base, eng->now, 0);
        }
        break;
    case OPAL_BTL_USNIC_PMTU_FELL_BACK:
        OPAL_BTL_USNIC_STAT_INC(eng, num_pmtu_blackholes);
        opal_btl_usnic_endpoint_path_update(ep, old, "larger datagrams timed out twice while a base-size probe "
                                                     "got through (a black hole on the path)");
        break;
    default:
        break;
    }
}

int opal_btl_usnic_seg_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                        opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_seq_t seq = ep->tx.next_seq;
    seg->seq = seq;
    seg->ep = ep;
    seg->hdr->seq = opal_btl_usnic_wire32(seq);
    bool ack_was_owed = stamp_ack(eng, ep, seg->hdr);
    seg->flags = OPAL_BTL_USNIC_SEG_FLAG_POSTED | OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW;
    seg->channel = (uint8_t) channel; /* a completion inside post credits this channel */
    opal_btl_usnic_seg_seal(eng, ep, seg);
    bool whole;
    int rc = datagram_post(eng, ep, seg, channel, &whole);
    if (OPAL_SUCCESS != rc) {
        seg->flags = 0;
        if (OPAL_ERR_TEMP_OUT_OF_RESOURCE == rc) {
            OPAL_BTL_USNIC_STAT_INC(eng, num_send_eagain);
        } else {
            eng->up->peer_failed(eng, ep, rc);
        }
        return rc;
    }
    if (ack_was_owed) {
        /* the debt is paid only now that the ACK really left */
        opal_btl_usnic_ack_piggyback(eng, ep, seg->hdr);
    }
    if (!whole) {
        channel = OPAL_BTL_USNIC_DATA_CHANNEL;
        seg->channel = (uint8_t) channel;
    }
    ep->tx.next_seq = seq + 1;
    ep->tx.sent[opal_btl_usnic_slot(ep, seq)] = seg;
    seg->charge = opal_btl_usnic_charge_of(&ep->tx.peer_charge, seg->wire_len);
    ep->tx.in_flight_charge += seg->charge;
    ep->tx.in_flight_bytes += seg->wire_len;
    if (eng->p.cc_enabled) {
        opal_btl_usnic_endpoint_cc_sent(ep, seg->wire_len);
    }
    if (OPAL_BTL_USNIC_DATA_CHANNEL == channel) {
        ++ep->tx.data_unacked;
    }
    uint32_t in_flight = opal_btl_usnic_endpoint_in_flight(ep);
    if (in_flight > eng->stats.max_sent_window) {
        eng->stats.max_sent_window = in_flight;
    }
    post_succeeded(eng, ep, seg, channel, whole);
    return OPAL_SUCCESS;
}

void opal_btl_usnic_small_frag_gather(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag)
{
    uint8_t *payload = opal_btl_usnic_seg_payload(&frag->seg, sizeof(opal_btl_usnic_hdr_t));
    size_t len = 0;
    for (uint32_t i = 0; i < frag->base.des_segment_count; ++i) {
        mca_btl_base_segment_t *s = &frag->segments[i];
        if ((uint8_t *) s->seg_addr.pval != payload + len) {
            memmove(payload + len, s->seg_addr.pval, s->seg_len);
        }
        len += s->seg_len;
    }
    frag->total_len = len;
    opal_btl_usnic_hdr_fill(eng, frag->seg.hdr, OPAL_BTL_USNIC_PKT_FRAG, 0, len, frag->tag);
    frag->seg.wire_len = (uint32_t) (sizeof(opal_btl_usnic_hdr_t) + len);
    /* The descriptor now describes one contiguous block in our buffer */
    frag->segments[0].seg_addr.pval = payload;
    frag->segments[0].seg_len = len;
    frag->base.des_segment_count = 1;
}

void opal_btl_usnic_endpoint_enqueue_frag(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag)
{
    frag->ep = ep;
    if (ep->failed) {
        opal_btl_usnic_frag_fail(ep->eng, frag, OPAL_ERR_UNREACH);
        return;
    }
    if (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind) {
        /* copy now so the user's buffer is free as soon as we call back */
        opal_btl_usnic_small_frag_gather(ep->eng, frag);
    }
    frag->queued = true;
    opal_list_append(&ep->tx.queue, &frag->base.super.super);
    opal_btl_usnic_check_rts(ep);
}

int opal_btl_usnic_chunk_seg_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_send_seg_t *seg)
{
    int rc = opal_btl_usnic_seg_post(eng, ep, seg, OPAL_BTL_USNIC_DATA_CHANNEL);
    if (OPAL_SUCCESS != rc) {
        seg->frag = NULL;
        seg->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED; /* never posted: straight back to its list */
        opal_btl_usnic_seg_release_if_done(&eng->pool, seg);
    }
    return rc;
}

/* ----- retransmissions ----- */

/* Repost one segment from the resend list.  Returns the post result. */
static int resend_segment(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    opal_btl_usnic_endpoint_t *ep = seg->ep;
    bool ack_was_owed = stamp_ack(eng, ep, seg->hdr);
    seg->hdr->flags |= OPAL_BTL_USNIC_HDR_FLAG_RETX;
    if (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_TIMED_OUT) {
        seg->hdr->flags |= OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT;
    }
    seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_POSTED;
    if (OPAL_BTL_USNIC_DATA_CHANNEL != seg->channel) {
        ++ep->tx.data_unacked; /* its copy is a data-channel segment from now on */
    }
    seg->channel = OPAL_BTL_USNIC_DATA_CHANNEL; /* a completion inside post credits this channel */
    if ((seg->flags & OPAL_BTL_USNIC_SEG_FLAG_TIMED_OUT) && seg->seq == (opal_btl_usnic_seq_t) (ep->tx.acked_seq + 1)) {
        pmtu_timeout(eng, ep, seg); /* once per timeout: its oldest segment */
    }
    opal_btl_usnic_seg_seal(eng, ep, seg);
    bool whole;
    int rc = datagram_post(eng, ep, seg, OPAL_BTL_USNIC_DATA_CHANNEL, &whole);
    if (OPAL_SUCCESS != rc) {
        seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_POSTED;
        return rc;
    }
    if (ack_was_owed) {
        opal_btl_usnic_ack_piggyback(eng, ep, seg->hdr);
    }
    seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_TIMED_OUT;
    if (seg->retries < UINT8_MAX) {
        ++seg->retries;
    }
    OPAL_BTL_USNIC_STAT_INC(eng, num_resends);
    post_succeeded(eng, ep, seg, OPAL_BTL_USNIC_DATA_CHANNEL, whole);
    return OPAL_SUCCESS;
}

/* max_resends_per_iteration, but at least a whole batch (a lost batch
 * goes again as one) */
static uint32_t resend_budget(const opal_btl_usnic_engine_t *eng)
{
    uint32_t quantum = opal_btl_usnic_send_quantum(eng);
    return eng->p.max_resends_per_iteration > quantum ? eng->p.max_resends_per_iteration : quantum;
}

int opal_btl_usnic_resends_post(opal_btl_usnic_engine_t *eng)
{
    int posted = 0;
    uint32_t budget = resend_budget(eng);
    opal_list_item_t *item = opal_list_get_first(&eng->resend_segs);
    while (item != opal_list_get_end(&eng->resend_segs) && (uint32_t) posted < budget &&
           opal_btl_usnic_have_credit(eng, OPAL_BTL_USNIC_DATA_CHANNEL)) {
        opal_list_item_t *next = opal_list_get_next(item);
        opal_btl_usnic_send_seg_t *seg = (opal_btl_usnic_send_seg_t *) item;
        if (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_POSTED) {
            item = next; /* the provider still owns the buffer: later */
            continue;
        }
        opal_list_remove_item(&eng->resend_segs, item);
        seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND;
        if (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_SACKED) {
            item = next; /* the peer reported it held since it was queued */
            continue;
        }
        int rc = resend_segment(eng, seg);
        if (OPAL_SUCCESS != rc) {
            seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND;
            opal_list_prepend(&eng->resend_segs, item);
            if (OPAL_ERR_TEMP_OUT_OF_RESOURCE == rc) {
                OPAL_BTL_USNIC_STAT_INC(eng, num_send_eagain);
            } else {
                eng->up->peer_failed(eng, seg->ep, rc);
            }
            break;
        }
        ++posted;
        item = next;
    }
    return posted;
}

/* ----- segments nobody ACKs ----- */

int opal_btl_usnic_post_unacked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                opal_btl_usnic_send_seg_t *seg, int channel)
{
    seg->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED | OPAL_BTL_USNIC_SEG_FLAG_POSTED;
    seg->channel = (uint8_t) channel;
    opal_btl_usnic_seg_seal(eng, ep, seg);
    int rc = eng->wire->post(eng, ep, seg, channel);
    if (OPAL_SUCCESS != rc) {
        seg->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED;
        opal_btl_usnic_seg_release_if_done(&eng->pool, seg);
        return rc;
    }
    --eng->credits[channel];
    return OPAL_SUCCESS;
}

void opal_btl_usnic_seg_leaves(opal_btl_usnic_send_seg_t *seg, uint64_t when)
{
    if (when > seg->sent_time) {
        seg->sent_time = when;
    }
}

void opal_btl_usnic_seg_send_complete(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_POSTED;
    ++eng->credits[seg->channel];
    opal_btl_usnic_seg_release_if_done(&eng->pool, seg);
}
/* ----- explicit ACKs and goodbyes ----- */

/* Post one explicit ACK to |ep|, with |flags| added (BYE).  Returns
 * OPAL_SUCCESS or the post error. */
static int ack_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint8_t flags, size_t echo)
{
    opal_btl_usnic_send_seg_t *seg = opal_btl_usnic_ack_seg_alloc(&eng->pool);
    if (NULL == seg) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    opal_btl_usnic_seq_t value = opal_btl_usnic_ack_value(ep);
    opal_btl_usnic_ack_hdr_t *ah = (opal_btl_usnic_ack_hdr_t *) seg->hdr;
    opal_btl_usnic_hdr_fill(eng, &ah->hdr, OPAL_BTL_USNIC_PKT_ACK, 0, 0, 0);
    opal_btl_usnic_ack_stamp(eng, ep, &ah->hdr);
    ah->hdr.flags |= flags;
    ah->hold = (uint8_t) opal_btl_usnic_ack_hold(eng, ep);
    ah->probe_echo = opal_btl_usnic_wire16((uint16_t) echo);
    memset(ah->range, 0, sizeof(ah->range));
    ah->nranges = (uint8_t) opal_btl_usnic_sack_ranges_fill(ep, ah->range);
    seg->wire_len = sizeof(*ah);
    seg->ep = ep;
    int rc = opal_btl_usnic_post_unacked(eng, ep, seg, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    opal_btl_usnic_ack_sent(eng, ep, value);
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
        if (ep->rx.ack_due_tick <= eng->tick && ep->rx.ack_due_time <= eng->now && !ep->failed) {
            if (eng->credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] <= 0) {
                break;
            }
            int rc = ack_send(eng, ep, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW, 0);
            if (OPAL_ERR_TEMP_OUT_OF_RESOURCE == rc) {
                OPAL_BTL_USNIC_STAT_INC(eng, num_send_eagain);
                break;
            }
            opal_btl_usnic_ack_forget(eng, ep);
            if (OPAL_SUCCESS == rc) {
                ++posted;
            } else {
                eng->up->peer_failed(eng, ep, rc);
            }
        }
        item = next;
    }
    return posted;
}

int opal_btl_usnic_bye_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (ep->failed || ep->departed || eng->credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] <= 0) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    int rc = ack_send(eng, ep, OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW | OPAL_BTL_USNIC_HDR_FLAG_BYE, 0);
    if (OPAL_SUCCESS == rc) {
        opal_btl_usnic_ack_forget(eng, ep);
        OPAL_BTL_USNIC_STAT_INC(eng, num_bye_sends);
    }
    return rc;
}

int opal_btl_usnic_probe_echo_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t size)
{
    if (ep->failed || ep->departed || eng->credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] <= 0) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    /* it reports arrivals only if some are unreported: else the sender
     * would count it as a duplicate ACK */
    bool owed = ep->rx.ack_owed;
    int rc = ack_send(eng, ep, owed ? OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW : 0, size);
    if (OPAL_SUCCESS == rc && owed) {
        opal_btl_usnic_ack_forget(eng, ep);
    }
    return rc;
}
