/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The receive side of the engine: validation, sequence classification,
 * reassembly, delivery to the PML.  ACKs owed are only noted here; they
 * leave from the send progression.
 *
 * Delivery order
 * --------------
 * The PML gets a peer's fragments in the order that peer sent them, as
 * from btl/tcp or vader.  Datagrams do not keep that order: the priority
 * channel overtakes the data channel, and losses are repaired later.  ob1
 * reorders its matching headers itself, but it unpacks each FRAG of a
 * pipelined message at its offset with opal_convertor_set_position, and
 * Open MPI 4.1's convertor places data wrongly (or loops for ever) when
 * those positions go backwards through some derived datatypes: a 104-byte
 * last fragment on the priority channel that overtook the 64 KiB ones
 * corrupted the receive buffer of issue 12's sendrecv, and crashed its
 * one-sided puts in opal_generic_simple_unpack.
 *
 * So a fragment is handed over only when every sequence number up to its
 * last segment's has arrived.  One that completes ahead of a hole waits in
 * ep->rx.held (a FRAG is copied out of the receive buffer, a reassembled
 * fragment keeps its buffer) and goes as soon as the hole is filled; the
 * common case, a fragment that is next in order, is handed over at once
 * from where it lies.  While an upcall runs, a fragment that completes
 * through a nested progress call waits too (ep->rx.delivering), so nothing
 * overtakes the fragment the PML is still looking at.
 */
#include "opal_config.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_ack.h"
#include "btl_usnic_acktr.h"
#include "btl_usnic_auth.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_pieces.h"
#include "btl_usnic_probe.h"
#include "btl_usnic_put.h"
#include "btl_usnic_recv.h"
#include "btl_usnic_reg.h"

/* Maps drop reasons to their counters.  A copy of an authentic datagram
 * (REPLAY) is what a network duplicates, too, and a departed peer's late
 * copies (its second goodbye) are expected: neither counts as invalid. */
static void count_drop(opal_btl_usnic_engine_t *eng, int reason)
{
    if (OPAL_BTL_USNIC_DROP_REPLAY != reason && OPAL_BTL_USNIC_DROP_DEPARTED != reason) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_invalid_recvs);
    }
    switch (reason) {
    case OPAL_BTL_USNIC_DROP_TRUNCATED: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_truncated); break;
    case OPAL_BTL_USNIC_DROP_BAD_MAGIC: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_magic); break;
    case OPAL_BTL_USNIC_DROP_BAD_VERSION: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_version); break;
    case OPAL_BTL_USNIC_DROP_BAD_SOURCE: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_source); break;
    case OPAL_BTL_USNIC_DROP_BAD_MAC: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_mac); break;
    case OPAL_BTL_USNIC_DROP_REPLAY: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_replay); break;
    case OPAL_BTL_USNIC_DROP_BAD_TYPE: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_type); break;
    case OPAL_BTL_USNIC_DROP_UNKNOWN_PEER: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_unknown_peer); break;
    case OPAL_BTL_USNIC_DROP_BAD_CHUNK: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_chunk); break;
    case OPAL_BTL_USNIC_DROP_BAD_PUT: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_put); break;
    case OPAL_BTL_USNIC_DROP_BAD_SACK: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_sack); break;
    case OPAL_BTL_USNIC_DROP_DEPARTED: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_departed); break;
    case OPAL_BTL_USNIC_DROP_OVERSIZED: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_oversized); break;
    case OPAL_BTL_USNIC_DROP_BAD_PIECE: OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_piece); break;
    default: break;
    }
}

void opal_btl_usnic_recv_drop(opal_btl_usnic_engine_t *eng, int reason)
{
    OPAL_BTL_USNIC_STAT_INC(eng, num_total_recvs);
    count_drop(eng, reason);
}

opal_btl_usnic_seq_class_t opal_btl_usnic_seq_classify(const opal_btl_usnic_endpoint_t *ep,
                                                       opal_btl_usnic_seq_t seq)
{
    if (opal_btl_usnic_seq_in_window(seq, ep->rx.next_expected, ep->window)) {
        if (ep->rx.rcvd[opal_btl_usnic_slot(ep, seq)]) {
            return OPAL_BTL_USNIC_SEQ_DUP;
        }
        return (seq == ep->rx.next_expected) ? OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER : OPAL_BTL_USNIC_SEQ_NEW_OOO;
    }
    return opal_btl_usnic_seq_lt(seq, ep->rx.next_expected) ? OPAL_BTL_USNIC_SEQ_OLD
                                                            : OPAL_BTL_USNIC_SEQ_TOO_NEW;
}

/* Record |seq| (classified NEW_*) as received; slide the window's left edge. */
static void seq_accept(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_seq_t seq)
{
    opal_btl_usnic_rx_note_sender(eng, ep);
    ep->rx.rcvd[opal_btl_usnic_slot(ep, seq)] = 1;
    if (opal_btl_usnic_seq_gt(seq, ep->rx.highest)) {
        ep->rx.highest = seq;
    }
    while (ep->rx.rcvd[opal_btl_usnic_slot(ep, ep->rx.next_expected)]) {
        ep->rx.rcvd[opal_btl_usnic_slot(ep, ep->rx.next_expected)] = 0;
        ++ep->rx.next_expected;
    }
}

/* ----- in-order delivery (see "Delivery order" above) ----- */

/* Keep the complete fragment |buf| (taken) whose last segment is |seq|
 * until everything before it has arrived. */
static void held_insert(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_seq_t seq,
                        uint8_t tag, uint8_t *buf, uint32_t len, opal_btl_usnic_held_t *h)
{
    h->seq = seq;
    h->tag = tag;
    h->buf = buf;
    h->len = len;
    opal_btl_usnic_held_t **at = &ep->rx.held;
    while (NULL != *at && opal_btl_usnic_seq_lt((*at)->seq, seq)) {
        at = &(*at)->next;
    }
    h->next = *at;
    *at = h;
    ++ep->rx.nheld;
    OPAL_BTL_USNIC_STAT_INC(eng, num_held_frags);
}

void opal_btl_usnic_rx_state(const opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_rx_state_t *st)
{
    memset(st, 0, sizeof(*st));
    st->next_expected = ep->rx.next_expected;
    st->held = ep->rx.nheld;
    if (NULL == ep->rx.rcvd) {
        return;
    }
    uint32_t highest = 0; /* offset from next_expected; 0: nothing ahead (next_expected itself is missing) */
    for (uint32_t i = 1; i < ep->window; ++i) {
        if (ep->rx.rcvd[opal_btl_usnic_slot(ep, (opal_btl_usnic_seq_t) (ep->rx.next_expected + i))]) {
            ++st->ahead;
            highest = i;
        }
    }
    st->holes = (0 == highest) ? 0 : highest + 1 - st->ahead;
    for (uint32_t i = 0; i < ep->window; ++i) {
        st->slots += 0 != ep->rx.frags[i].frag_id;
    }
}

/* One upcall; fragments completing meanwhile (nested progress) wait */
static void deliver_one(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data,
                        size_t len)
{
    ep->rx.delivering = true;
    eng->up->deliver(eng, ep, tag, data, len);
    ep->rx.delivering = false;
}

/* Hand over the held fragments whose turn has come, in order */
static void deliver_held(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_held_t *h;
    while (!ep->rx.delivering && NULL != (h = ep->rx.held) &&
           opal_btl_usnic_seq_lt(h->seq, ep->rx.next_expected)) {
        ep->rx.held = h->next;
        --ep->rx.nheld;
        deliver_one(eng, ep, h->tag, h->buf, h->len);
        free(h->buf);
        free(h);
    }
}

/* Is the fragment whose last segment is |seq| next in order (everything
 * before it arrived, no upcall running)?  Only then may it skip the wait. */
static bool is_next_in_order(const opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_seq_t seq)
{
    return seq == ep->rx.next_expected && !ep->rx.delivering;
}

/* Is |buf| (|len| bytes, framing checked) an authentic datagram from
 * |ep| that we have not taken before?  The sender id only chose whose key
 * to try: nothing else of the datagram is used before this.  Counts what
 * it drops. */
static bool datagram_authentic(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, void *buf, size_t len)
{
    if (OPAL_BTL_USNIC_PROTECT_NONE == eng->p.protect) {
        return true;
    }
    opal_btl_usnic_hdr_t *hdr = (opal_btl_usnic_hdr_t *) buf;
    uint64_t nonce = opal_btl_usnic_host64(hdr->nonce);
    uint8_t tag[OPAL_BTL_USNIC_MAC_BYTES];
    memcpy(tag, hdr->mac, sizeof(tag));
    memset(hdr->mac, 0, sizeof(hdr->mac)); /* as it was when the sender computed the tag */
    size_t covered = (OPAL_BTL_USNIC_PROTECT_FULL == eng->p.protect) ? len : opal_btl_usnic_hdr_len(hdr->type);
    if (!opal_btl_usnic_mac_check(&ep->rx.mac, nonce, (const uint8_t *) buf, covered, tag)) {
        count_drop(eng, OPAL_BTL_USNIC_DROP_BAD_MAC);
        return false;
    }
    if (OPAL_BTL_USNIC_REPLAY_NEW != opal_btl_usnic_replay_check(&ep->rx.replay, nonce)) {
        count_drop(eng, OPAL_BTL_USNIC_DROP_REPLAY);
        return false;
    }
    opal_btl_usnic_replay_accept(&ep->rx.replay, nonce);
    return true;
}

/* Did |dg| come from where its claimed sender |ep| sends on that
 * channel?  The claim only picked the endpoint (its tag proves the rest);
 * everything passes where the wire reports no source. */
static bool source_matches(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep,
                           const opal_btl_usnic_datagram_t *dg)
{
    return !eng->p.check_source || dg->src == ep->peer_addr[dg->channel];
}

/* Framing checks, the sender (one lookup), its address, then its key.
 * Returns the endpoint or NULL (counted). */
static opal_btl_usnic_endpoint_t *validate(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_datagram_t *dg)
{
    int bad = opal_btl_usnic_hdr_check(dg->buf, dg->len);
    if (OPAL_BTL_USNIC_VALID != bad) {
        count_drop(eng, bad - 1);
        return NULL;
    }
    const opal_btl_usnic_hdr_t *hdr = (const opal_btl_usnic_hdr_t *) dg->buf;
    opal_btl_usnic_endpoint_t *ep = eng->up->lookup(eng, opal_btl_usnic_host64(hdr->sender));
    if (NULL == ep || NULL == ep->rx.rcvd) {
        count_drop(eng, OPAL_BTL_USNIC_DROP_UNKNOWN_PEER);
        return NULL;
    }
    if (OPAL_UNLIKELY(!source_matches(eng, ep, dg))) {
        count_drop(eng, OPAL_BTL_USNIC_DROP_BAD_SOURCE);
        return NULL;
    }
    return datagram_authentic(eng, ep, dg->buf, dg->len) ? ep : NULL;
}

/* Piggy-backed or explicit ACK information in |hdr|; returns whether it
 * was taken (present, and neither stale nor beyond what we sent) */
static bool take_ack(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, const opal_btl_usnic_hdr_t *hdr)
{
    if (!(hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK) ||
        !opal_btl_usnic_handle_ack_info(eng, ep, opal_btl_usnic_host32(hdr->ack_seq),
                                        opal_btl_usnic_host16(hdr->credit), opal_btl_usnic_host16(hdr->sack),
                                        0 != (hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW))) {
        return false;
    }
    if (OPAL_UNLIKELY(ep->pmtu.waiting)) {
        opal_btl_usnic_probe_ack_taken(eng, ep, 0); /* the peer knows us: its path may be searched */
    }
    /* the timer reports of an ACK that passed its checks only */
    if (hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_LATE_DUP) {
        opal_btl_usnic_premature_timeout(eng, ep);
    }
    if (hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_REPAIRED) {
        opal_btl_usnic_loss_reported(eng, ep);
    }
    if (OPAL_UNLIKELY(ep->timer.probe_out)) {
        opal_btl_usnic_probe_verdict(eng, ep, 0 != (hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_REPAIRED));
    }
    return true;
}

/* An old or duplicate copy of a segment: a PUT must still name a region
 * this peer may write (or did, before it was deregistered), else it is a
 * forgery and its ACK is not ours to take. */
static bool old_copy_plausible(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep,
                               const opal_btl_usnic_hdr_t *hdr)
{
    if (OPAL_BTL_USNIC_PKT_PUT != hdr->type) {
        return true;
    }
    const opal_btl_usnic_put_hdr_t *ph = (const opal_btl_usnic_put_hdr_t *) hdr;
    return OPAL_BTL_USNIC_PUT_REJECT != opal_btl_usnic_reg_check(&eng->regs, opal_btl_usnic_host32(ph->region_id),
                                                                 opal_btl_usnic_host64(ph->key), ep->peer_id,
                                                                 opal_btl_usnic_host64(ph->addr),
                                                                 opal_btl_usnic_host16(hdr->payload_len));
}

/* A timeout retransmission of a segment we hold but had not ACKed when
 * the sender sent it: not yet ACKed at all, or first ACKed less than half
 * of rto_min ago (our ACK cannot have reached the sender before it
 * retransmitted).  A timeout resends the sender's oldest un-ACKed segment,
 * so no hole of ours precedes it: its timer fired while we were slow, not
 * because something was lost (a lost ACK's retransmission comes a whole
 * RTO after that ACK).  Our next ACK says so (FLAG_LATE_DUP, see
 * "Premature timeouts" in btl_usnic_ack.c). */
static void note_premature_copy(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                const opal_btl_usnic_hdr_t *hdr, opal_btl_usnic_seq_class_t cls,
                                opal_btl_usnic_seq_t seq)
{
    if (OPAL_BTL_USNIC_SEQ_OLD != cls || !(hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT)) {
        return;
    }
    bool never_acked = opal_btl_usnic_seq_gt(seq, ep->rx.last_ack_sent);
    bool just_acked = opal_btl_usnic_seq_gt(seq, ep->rx.prev_ack_sent) &&
                      eng->now - ep->rx.last_ack_time < eng->p.rto_min / 2;
    if (never_acked || just_acked) {
        ep->rx.late_dup = true;
    }
}

/* Drop a segment we already have or cannot take; returns true if dropped. */
static bool drop_unwanted(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                          opal_btl_usnic_seq_class_t cls)
{
    switch (cls) {
    case OPAL_BTL_USNIC_SEQ_DUP:
        OPAL_BTL_USNIC_STAT_INC(eng, num_dup_recvs);
        opal_btl_usnic_ack_schedule(eng, ep, true); /* our ACK was probably lost */
        return true;
    case OPAL_BTL_USNIC_SEQ_OLD:
        OPAL_BTL_USNIC_STAT_INC(eng, num_oow_low_recvs);
        opal_btl_usnic_ack_schedule(eng, ep, true);
        return true;
    case OPAL_BTL_USNIC_SEQ_TOO_NEW:
        OPAL_BTL_USNIC_STAT_INC(eng, num_oow_high_recvs);
        return true;
    default:
        return false;
    }
}

/* A whole fragment in one datagram: next in order, it goes to the PML
 * from the receive buffer; else a copy waits (the buffer is re-posted).
 * Returns whether it was accepted. */
static bool recv_frag(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_hdr_t *hdr,
                      opal_btl_usnic_seq_t seq)
{
    take_ack(eng, ep, hdr);
    uint8_t *data = (uint8_t *) hdr + sizeof(*hdr);
    uint32_t len = opal_btl_usnic_host16(hdr->payload_len);
    if (is_next_in_order(ep, seq)) {
        seq_accept(eng, ep, seq); /* first: a copy arriving during the upcall is a duplicate */
        OPAL_BTL_USNIC_STAT_INC(eng, num_frag_recvs);
        deliver_one(eng, ep, hdr->tag, data, len);
    } else {
        opal_btl_usnic_held_t *h = (opal_btl_usnic_held_t *) malloc(sizeof(*h));
        uint8_t *copy = (uint8_t *) malloc(len > 0 ? len : 1);
        if (NULL == h || NULL == copy) {
            free(h);
            free(copy);
            OPAL_BTL_USNIC_STAT_INC(eng, num_drop_no_memory); /* un-ACKed: the sender retries */
            return false;
        }
        memcpy(copy, data, len);
        held_insert(eng, ep, seq, hdr->tag, copy, len, h);
        seq_accept(eng, ep, seq);
        OPAL_BTL_USNIC_STAT_INC(eng, num_frag_recvs);
    }
    return true;
}

/* One chunk of a fragment into its reassembly slot; a complete fragment
 * waits for its turn.  Returns whether it was accepted. */
static bool recv_chunk(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                       opal_btl_usnic_chunk_hdr_t *ch, opal_btl_usnic_seq_t seq)
{
    uint32_t frag_id = opal_btl_usnic_host32(ch->frag_id);
    uint32_t size = opal_btl_usnic_host32(ch->frag_size);
    uint32_t offset = opal_btl_usnic_host32(ch->frag_offset);
    uint32_t len = opal_btl_usnic_host16(ch->hdr.payload_len);
    uint32_t chunk_size = opal_btl_usnic_host32(ch->chunk_size);
    opal_btl_usnic_rx_frag_t *slot = &ep->rx.frags[opal_btl_usnic_slot(ep, frag_id)];

    /* Every chunk of a fragment has the chunk size its first one had (at
     * most what our datagrams hold): anything else is corrupt or forged,
     * and accepting overlapping chunks would complete a fragment with
     * bytes that never arrived. */
    if (chunk_size > eng->max_chunk_payload || !opal_btl_usnic_chunk_is_aligned(size, chunk_size, offset, len)) {
        count_drop(eng, OPAL_BTL_USNIC_DROP_BAD_CHUNK);
        return false;
    }
    switch (opal_btl_usnic_rx_frag_classify(slot, frag_id, size)) {
    case OPAL_BTL_USNIC_RX_FRAG_BUSY:
        /* not accepted: the sender retransmits once the slot frees up */
        OPAL_BTL_USNIC_STAT_INC(eng, num_badfrag_recvs);
        return false;
    case OPAL_BTL_USNIC_RX_FRAG_MISMATCH:
        count_drop(eng, OPAL_BTL_USNIC_DROP_BAD_CHUNK);
        return false;
    case OPAL_BTL_USNIC_RX_FRAG_CONTINUE:
        if (slot->chunk_size != chunk_size || opal_btl_usnic_rx_frag_has(slot, offset)) {
            count_drop(eng, OPAL_BTL_USNIC_DROP_BAD_CHUNK);
            return false;
        }
        break;
    case OPAL_BTL_USNIC_RX_FRAG_NEW:
        if (0 == frag_id || size > eng->p.max_send_size) {
            count_drop(eng, OPAL_BTL_USNIC_DROP_BAD_CHUNK);
            return false;
        }
        break;
    }
    opal_btl_usnic_held_t *h = (opal_btl_usnic_held_t *) malloc(sizeof(*h)); /* in case it completes */
    bool complete = false;
    if (NULL == h || OPAL_SUCCESS != opal_btl_usnic_rx_frag_add(slot, frag_id, size, chunk_size,
                                                                offset, (uint8_t *) ch + sizeof(*ch), len, ch->hdr.tag,
                                                                seq, &complete)) {
        free(h);
        OPAL_BTL_USNIC_STAT_INC(eng, num_drop_no_memory); /* un-ACKed: the sender retries */
        return false;
    }
    take_ack(eng, ep, &ch->hdr);
    if (complete) {
        /* The slot is free before any upcall: the PML may progress and
         * receive the next fragment into it from inside the callback.
         * The buffer waits for its turn (maybe none: deliver_held). */
        held_insert(eng, ep, slot->last_seq, slot->tag, slot->buf, slot->size, h);
        slot->buf = NULL;
        opal_btl_usnic_rx_frag_reset(slot);
    } else {
        free(h);
    }
    seq_accept(eng, ep, seq);
    OPAL_BTL_USNIC_STAT_INC(eng, num_chunk_recvs);
    return true;
}

/* A PUT segment takes its sequence number only if it was written: a
 * forged one must not make the genuine segment with that number look like
 * a duplicate (see btl_usnic_put.c for the key of a deregistered region).
 * Returns whether it was accepted. */
static bool recv_put_seg(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                         const opal_btl_usnic_put_hdr_t *ph, opal_btl_usnic_seq_t seq)
{
    switch (opal_btl_usnic_recv_put(eng, ep, ph)) {
    case OPAL_BTL_USNIC_PUT_WRITE:
        break;
    case OPAL_BTL_USNIC_PUT_DEAD:
        OPAL_BTL_USNIC_STAT_INC(eng, num_invalid_recvs);
        OPAL_BTL_USNIC_STAT_INC(eng, num_put_after_dereg);
        return false;
    default:
        count_drop(eng, OPAL_BTL_USNIC_DROP_BAD_PUT);
        return false;
    }
    take_ack(eng, ep, &ph->hdr);
    seq_accept(eng, ep, seq);
    return true;
}

/* The length of the data segment |hdr| (validated) */
static size_t datagram_len(const opal_btl_usnic_hdr_t *hdr)
{
    size_t header = (OPAL_BTL_USNIC_PKT_FRAG == hdr->type)  ? sizeof(opal_btl_usnic_hdr_t)
                    : (OPAL_BTL_USNIC_PKT_PUT == hdr->type) ? sizeof(opal_btl_usnic_put_hdr_t)
                                                            : sizeof(opal_btl_usnic_chunk_hdr_t);
    return header + opal_btl_usnic_host16(hdr->payload_len);
}

/**
 * Accept the new data segment |hdr| (authentic, classified NEW_IN_ORDER
 * or NEW_OOO, sequence number |seq|) from |ep|: note a loss its copy
 * repairs, take its ACK information and its payload (delivered, held for
 * its turn, reassembled or written in place) and its sequence number, then
 * hand over the held fragments whose turn came.  Returns whether it was
 * accepted, and then in *|ack_urgent_p| whether its ACK must go at the
 * next pass: it arrived beyond a hole (the sender wants to hear at once)
 * or asks for it (ACK_SOON).  Both receive paths accept through here, so
 * a datagram gets the same treatment whichever path takes it; each
 * schedules the ACK itself (the fast path once its upcall's bookkeeping
 * is done).
 */
static bool segment_accept(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_hdr_t *hdr,
                           opal_btl_usnic_seq_t seq, bool *ack_urgent_p)
{
    bool out_of_order = seq != ep->rx.next_expected;
    if (hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_RETX) {
        ep->rx.repaired = true; /* a copy we lacked: the original was lost */
    }
    bool accepted;
    switch (hdr->type) {
    case OPAL_BTL_USNIC_PKT_FRAG:
        accepted = recv_frag(eng, ep, hdr, seq);
        break;
    case OPAL_BTL_USNIC_PKT_PUT:
        accepted = recv_put_seg(eng, ep, (const opal_btl_usnic_put_hdr_t *) hdr, seq);
        break;
    default:
        accepted = recv_chunk(eng, ep, (opal_btl_usnic_chunk_hdr_t *) hdr, seq);
        break;
    }
    if (!accepted) {
        return false;
    }
    ep->rx.charge_since_ack += opal_btl_usnic_charge_of(&eng->p.rx_charge, datagram_len(hdr));
    /* explicit ACKs say how long after (an unknown arrival: that they cannot) */
    ep->rx.last_arrival = (0 != eng->arrival) ? eng->arrival : eng->now;
    deliver_held(eng, ep); /* it may have filled the hole fragments waited for */
    *ack_urgent_p = out_of_order || 0 != (hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK_SOON);
    return true;
}

/* A piece of a datagram from |ep| (authentic): once its datagram is
 * whole, that datagram is received as if it had come in one, with every
 * check (its own tag and nonce included).  A piece never carries a piece,
 * so this recursion is one level deep. */
static void recv_datagram(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_datagram_t *dg);

static void recv_piece(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                       const opal_btl_usnic_datagram_t *dg)
{
    size_t len;
    uint8_t *whole = opal_btl_usnic_pieces_add(&ep->rx.pieces, (const opal_btl_usnic_piece_hdr_t *) dg->buf,
                                               eng->p.mtu, &len);
    if (0 == len) {
        count_drop(eng, OPAL_BTL_USNIC_DROP_OVERSIZED);
        return;
    }
    if (NULL == whole) {
        return;
    }
    unsigned type = ((const opal_btl_usnic_hdr_t *) whole)->type;
    if (OPAL_BTL_USNIC_PKT_PIECE == type || OPAL_BTL_USNIC_PKT_PROBE == type) {
        count_drop(eng, OPAL_BTL_USNIC_DROP_BAD_PIECE);
        return;
    }
    OPAL_BTL_USNIC_STAT_INC(eng, num_pieces_reassembled);
    opal_btl_usnic_datagram_t inner = {.buf = whole, .len = len, .channel = dg->channel, .src = dg->src};
    recv_datagram(eng, &inner);
}

/* When |dg| reached the host: the wire's timestamp if it has a sane one,
 * unknown if the wire says so */
static uint64_t arrival_of(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_datagram_t *dg)
{
    if (OPAL_UNLIKELY(OPAL_BTL_USNIC_ARRIVAL_UNKNOWN == dg->arrival)) {
        return OPAL_BTL_USNIC_ARRIVAL_UNKNOWN;
    }
    return (0 != dg->arrival && dg->arrival <= eng->now) ? dg->arrival : eng->now;
}

void opal_btl_usnic_recv_segment(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_datagram_t *dg)
{
    OPAL_BTL_USNIC_STAT_INC(eng, num_total_recvs);
    eng->arrival = arrival_of(eng, dg);
    recv_datagram(eng, dg);
    eng->arrival = 0;
}

/* One datagram, received whole or reassembled from pieces (counted once,
 * as the datagrams the wire handed up) */
static void recv_datagram(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_datagram_t *dg)
{
    opal_btl_usnic_endpoint_t *ep = validate(eng, dg);
    if (NULL == ep) {
        return;
    }
    opal_btl_usnic_hdr_t *hdr = (opal_btl_usnic_hdr_t *) dg->buf;
    if (OPAL_UNLIKELY(ep->departed)) {
        count_drop(eng, OPAL_BTL_USNIC_DROP_DEPARTED);
        return;
    }
    if (OPAL_BTL_USNIC_PKT_ACK == hdr->type) {
        const opal_btl_usnic_ack_hdr_t *ah = (const opal_btl_usnic_ack_hdr_t *) dg->buf;
        if (take_ack(eng, ep, hdr)) {
            opal_btl_usnic_ack_hold_taken(eng, ep, ah->hold);
            opal_btl_usnic_sack_ranges_take(eng, ep, ah->range, ah->nranges);
        }
        if (OPAL_UNLIKELY(0 != ah->probe_echo)) {
            opal_btl_usnic_probe_ack_taken(eng, ep, opal_btl_usnic_host16(ah->probe_echo));
        }
        if (OPAL_UNLIKELY(hdr->flags & OPAL_BTL_USNIC_HDR_FLAG_BYE)) {
            opal_btl_usnic_peer_departed(eng, ep);
        }
        return;
    }
    if (OPAL_UNLIKELY(OPAL_BTL_USNIC_PKT_PROBE == hdr->type)) {
        opal_btl_usnic_probe_answer(eng, ep, dg->len);
        return;
    }
    if (OPAL_UNLIKELY(OPAL_BTL_USNIC_PKT_PIECE == hdr->type)) {
        recv_piece(eng, ep, dg);
        return;
    }
    /* The ACK a data segment carries is taken only if the segment itself
     * passes its checks: a forgery that we drop (bad key, wrong peer) must
     * not ACK our data on top.  Old and duplicate copies count: when the
     * explicit ACKs are lost, retransmissions are what carries the ACKs. */
    opal_btl_usnic_seq_t seq = opal_btl_usnic_host32(hdr->seq);
    opal_btl_usnic_seq_class_t cls = opal_btl_usnic_seq_classify(ep, seq);
    if ((OPAL_BTL_USNIC_SEQ_DUP == cls || OPAL_BTL_USNIC_SEQ_OLD == cls) && old_copy_plausible(eng, ep, hdr)) {
        take_ack(eng, ep, hdr);
        note_premature_copy(eng, ep, hdr, cls, seq);
    }
    if (drop_unwanted(eng, ep, cls)) {
        return;
    }
    bool ack_urgent;
    if (segment_accept(eng, ep, hdr, seq, &ack_urgent)) {
        opal_btl_usnic_ack_schedule(eng, ep, ack_urgent);
    }
}

opal_btl_usnic_fast_t opal_btl_usnic_recv_fast(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_datagram_t *dg,
                                               opal_btl_usnic_endpoint_t **ep_p)
{
    void *buf = dg->buf;
    size_t len = dg->len;
    opal_btl_usnic_hdr_t *hdr = (opal_btl_usnic_hdr_t *) buf;
    if (len < sizeof(*hdr) || OPAL_BTL_USNIC_PKT_FRAG != hdr->type) {
        return OPAL_BTL_USNIC_FAST_DECLINED;
    }
    if (OPAL_BTL_USNIC_VALID != opal_btl_usnic_hdr_check(buf, len)) {
        return OPAL_BTL_USNIC_FAST_DECLINED;
    }
    /* the slow path counts what the fast one turns down */
    opal_btl_usnic_endpoint_t *ep = eng->up->lookup(eng, opal_btl_usnic_host64(hdr->sender));
    if (NULL == ep || NULL == ep->rx.rcvd || ep->departed || !source_matches(eng, ep, dg)) {
        return OPAL_BTL_USNIC_FAST_DECLINED;
    }
    /* Only the next fragment in order whose successor has not arrived:
     * then nothing held can become deliverable behind it.  (Deciding on an
     * unauthenticated sequence number only picks the path.) */
    opal_btl_usnic_seq_t seq = opal_btl_usnic_host32(hdr->seq);
    if (!is_next_in_order(ep, seq) || ep->rx.rcvd[opal_btl_usnic_slot(ep, (opal_btl_usnic_seq_t) (seq + 1))]) {
        return OPAL_BTL_USNIC_FAST_DECLINED;
    }
    OPAL_BTL_USNIC_STAT_INC(eng, num_total_recvs);
    if (!datagram_authentic(eng, ep, buf, len)) {
        return OPAL_BTL_USNIC_FAST_DROPPED;
    }
    /* The slow path's accept, not deferred: if the PML re-enters progress
     * from its callback, a retransmitted copy must already look like a
     * DUP, and the ACK may free window room it wants to use.  Only the ACK
     * it decided on waits for recv_fast_finish.  Next in order, the
     * fragment goes straight to the PML (then what completed through
     * nested progress while the PML had it): accepted always. */
    OPAL_BTL_USNIC_STAT_INC(eng, num_fast_recvs);
    bool ack_urgent = false;
    eng->fast_in_upcall = true;
    eng->arrival = arrival_of(eng, dg);
    bool accepted = segment_accept(eng, ep, hdr, seq, &ack_urgent);
    eng->arrival = 0;
    eng->fast_in_upcall = false;
    assert(accepted);
    (void) accepted;
    ep->rx.fast_ack_urgent = ep->rx.fast_ack_urgent || ack_urgent;
    eng->fast_deferred = ep;
    if (NULL != ep_p) {
        *ep_p = ep;
    }
    return OPAL_BTL_USNIC_FAST_TAKEN;
}

bool opal_btl_usnic_recv_fast_finish(opal_btl_usnic_engine_t *eng)
{
    opal_btl_usnic_endpoint_t *ep = eng->fast_deferred;
    if (NULL == ep) {
        return false;
    }
    eng->fast_deferred = NULL;
    opal_btl_usnic_ack_schedule(eng, ep, ep->rx.fast_ack_urgent);
    ep->rx.fast_ack_urgent = false;
    return true;
}
