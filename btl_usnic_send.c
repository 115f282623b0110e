/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The send progression, on top of the engine: fragments from the PML
 * (the fast path of tiny ones, copies of descriptors still in flight),
 * chunking large ones, the round-robin over ready endpoints, the
 * progress pass (deferred callbacks, the hotel's evictions,
 * retransmissions, new segments, explicit ACKs), and the copies posted
 * while the owner is away.  Every datagram leaves through the posting
 * layer (btl_usnic_post.c).
 */
#include "opal_config.h"

#include <string.h>

#include "btl_usnic_ack.h"
#include "btl_usnic_acktr.h"
#include "btl_usnic_complete.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_post.h"
#include "btl_usnic_probe.h"
#include "btl_usnic_put.h"
#include "btl_usnic_send.h"

static opal_btl_usnic_endpoint_t *ep_from_rts_item(opal_list_item_t *item)
{
    return (opal_btl_usnic_endpoint_t *) ((char *) item - offsetof(opal_btl_usnic_endpoint_t, tx.rts_item));
}

/* Channel for a first transmission of a whole fragment of |wire_len|
 * bytes: a tiny one takes the priority channel, unless segments of ours
 * on the data channel are un-ACKed.  The PML gets a peer's fragments in
 * order, so a tiny one that overtook them would only wait at the
 * receiver (held, copied, and ACKed at once as out of order), and its
 * arrival ahead of them would look like their loss. */
static int frag_channel(const opal_btl_usnic_endpoint_t *ep, size_t wire_len)
{
    return (wire_len <= ep->tiny_mtu && 0 == ep->tx.data_unacked) ? OPAL_BTL_USNIC_PRIORITY_CHANNEL
                                                                  : OPAL_BTL_USNIC_DATA_CHANNEL;
}

/* The wire holds data-channel posts back for a batch: send them now,
 * without PML callbacks inside the PML's own call */
static void flush_now(opal_btl_usnic_engine_t *eng)
{
    bool deferred = eng->defer_callbacks;
    eng->defer_callbacks = true;
    eng->wire->flush(eng);
    eng->defer_callbacks = deferred;
}

bool opal_btl_usnic_send_fast(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag)
{
    opal_btl_usnic_engine_t *eng = ep->eng;
    size_t wire_len = sizeof(opal_btl_usnic_hdr_t) + frag->total_len;
    int channel = frag_channel(ep, wire_len);
    if (OPAL_BTL_USNIC_FRAG_SMALL != frag->kind || ep->failed || !opal_list_is_empty(&ep->tx.queue) ||
        frag->total_len > ep->max_tiny_payload || !opal_btl_usnic_endpoint_room_for(ep, wire_len) ||
        !opal_btl_usnic_have_credit(eng, channel)) {
        return false;
    }
    opal_btl_usnic_small_frag_gather(eng, frag);
    if (OPAL_SUCCESS != opal_btl_usnic_seg_post(eng, ep, &frag->seg, channel)) {
        return false;
    }
    if (OPAL_BTL_USNIC_DATA_CHANNEL == channel) {
        flush_now(eng);
    }
    OPAL_BTL_USNIC_STAT_INC(eng, num_fast_sends);
    OPAL_BTL_USNIC_STAT_INC(eng, num_frag_sends);
    return true;
}

/* Is the segment embedded in small |frag| still owned by the wire (sent
 * before and not yet ACKed, or posted)? */
static bool small_seg_busy(const opal_btl_usnic_send_frag_t *frag)
{
    return 0 != frag->seg.flags && !opal_btl_usnic_seg_is_free_to_recycle(&frag->seg);
}

/* Send a copy of small |frag|'s data in a fragment of our own.  For a
 * descriptor sent again after its callback (the BTL base's AM RDMA
 * emulation in Open MPI 5 does this) while its own segment is un-ACKed.
 * Returns OPAL_SUCCESS or OPAL_ERR_OUT_OF_RESOURCE (the caller retries). */
static int submit_copy(opal_btl_usnic_endpoint_t *ep, const opal_btl_usnic_send_frag_t *frag, uint8_t tag)
{
    opal_btl_usnic_send_frag_t *copy =
        opal_btl_usnic_small_frag_alloc(&ep->eng->pool, sizeof(opal_btl_usnic_hdr_t) + frag->total_len);
    if (NULL == copy) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    uint8_t *dst = opal_btl_usnic_seg_payload(&copy->seg, sizeof(opal_btl_usnic_hdr_t));
    size_t len = 0;
    for (uint32_t i = 0; i < frag->base.des_segment_count; ++i) {
        memcpy(dst + len, frag->segments[i].seg_addr.pval, frag->segments[i].seg_len);
        len += frag->segments[i].seg_len;
    }
    OPAL_BTL_USNIC_STAT_INC(ep->eng, num_resubmit_copies);
    opal_btl_usnic_frag_submit_owned(ep, copy, tag, len);
    return OPAL_SUCCESS;
}

/* |frag|'s data left inside the PML's send call: btl_send's 1 (done, no
 * callback; recycled when ACKed), or 0 with the callback made from
 * progress, like vader, rather than from inside the PML's own call */
static int sent_already(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag)
{
    if (frag->owned_by_btl && !(frag->base.des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK)) {
        return 1;
    }
    frag->callback_pending = true;
    opal_list_append(&eng->pending_callbacks, &frag->base.super.super);
    return 0;
}

int opal_btl_usnic_frag_submit(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag)
{
    opal_btl_usnic_engine_t *eng = ep->eng;
    mca_btl_base_descriptor_t *des = &frag->base;
    if (OPAL_UNLIKELY(ep->failed)) {
        return OPAL_ERR_UNREACH;
    }
    /* A descriptor may come back for another send once we called back
     * (the BTL base's AM RDMA emulation reuses its descriptor for each
     * piece): every per-send field starts afresh. */
    frag->offset = 0;
    frag->frag_id = 0;
    frag->total_len = 0;
    for (uint32_t i = 0; i < des->des_segment_count; ++i) {
        frag->total_len += frag->segments[i].seg_len;
    }
    frag->tag = tag;
    frag->ep = ep;
    frag->owned_by_btl = (des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) != 0;
    if (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind && small_seg_busy(frag)) {
        /* the copy is on its way; ours recycles when its old segment is ACKed */
        int rc = submit_copy(ep, frag, tag);
        return (OPAL_SUCCESS == rc) ? sent_already(eng, frag) : rc;
    }
    OPAL_BTL_USNIC_STAT_INC(eng, pml_module_sends);
    if (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind && frag->total_len <= ep->max_tiny_payload &&
        opal_btl_usnic_send_fast(ep, frag)) {
        return sent_already(eng, frag);
    }
    frag->callback_pending = true;
    opal_btl_usnic_endpoint_enqueue_frag(ep, frag);
    return 0;
}

bool opal_btl_usnic_frag_submit_owned(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag,
                                      size_t len)
{
    opal_btl_usnic_frag_init_small(frag, len, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    frag->tag = tag;
    frag->ep = ep;
    frag->owned_by_btl = true;
    frag->total_len = len;
    OPAL_BTL_USNIC_STAT_INC(ep->eng, pml_module_sends);
    if (opal_btl_usnic_send_fast(ep, frag)) {
        return true;
    }
    opal_btl_usnic_endpoint_enqueue_frag(ep, frag);
    return false;
}

/* Copy |len| bytes at |offset| of the data described by |frag| into |dst|. */
static void large_frag_copy_out(const opal_btl_usnic_send_frag_t *frag, size_t offset, uint8_t *dst, size_t len)
{
    opal_btl_usnic_data_span_t spans[OPAL_BTL_USNIC_FRAG_SEGMENTS];
    unsigned n = opal_btl_usnic_frag_spans(frag, offset, len, spans, OPAL_BTL_USNIC_FRAG_SEGMENTS);
    for (unsigned i = 0; i < n; ++i) {
        memcpy(dst, spans[i].addr, spans[i].len);
        dst += spans[i].len;
    }
}

/* Post the next chunk of a large |frag|.  Returns OPAL_SUCCESS or the error. */
static int send_next_chunk(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                           opal_btl_usnic_send_frag_t *frag)
{
    opal_btl_usnic_send_seg_t *seg = opal_btl_usnic_chunk_seg_alloc(&eng->pool);
    if (NULL == seg) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    if (0 == frag->frag_id) {
        frag->frag_id = ep->tx.next_frag_id++;
        if (0 == ep->tx.next_frag_id) {
            ep->tx.next_frag_id = 1; /* 0 marks a free reassembly slot */
        }
        frag->chunk_payload = (uint32_t) ep->max_chunk_payload; /* a later path MTU change cuts no
                                                                   chunk of it differently */
    }
    size_t len = frag->total_len - frag->offset;
    if (len > frag->chunk_payload) {
        len = frag->chunk_payload;
    }
    opal_btl_usnic_chunk_hdr_t *ch = (opal_btl_usnic_chunk_hdr_t *) seg->hdr;
    opal_btl_usnic_hdr_fill(eng, &ch->hdr, OPAL_BTL_USNIC_PKT_CHUNK, 0, len, frag->tag);
    ch->frag_id = opal_btl_usnic_wire32(frag->frag_id);
    ch->frag_size = opal_btl_usnic_wire32((uint32_t) frag->total_len);
    ch->frag_offset = opal_btl_usnic_wire32((uint32_t) frag->offset);
    ch->chunk_size = opal_btl_usnic_wire32(frag->chunk_payload);
    opal_btl_usnic_frag_prefetch_ahead(frag, frag->offset, len);
    large_frag_copy_out(frag, frag->offset, opal_btl_usnic_seg_payload(seg, sizeof(*ch)), len);
    seg->wire_len = (uint32_t) (sizeof(*ch) + len);
    int rc = opal_btl_usnic_chunk_seg_post(eng, ep, seg);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    frag->offset += len;
    OPAL_BTL_USNIC_STAT_INC(eng, num_chunk_sends);
    return OPAL_SUCCESS;
}

/* Every segment of |frag| is posted: it leaves the send queue.  A send
 * calls back now; a PUT only once the target has ACKed it all. */
static void frag_dequeue_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_send_frag_t *frag)
{
    opal_list_remove_item(&ep->tx.queue, &frag->base.super.super);
    frag->queued = false;
    if (OPAL_BTL_USNIC_FRAG_PUT == frag->kind) {
        opal_btl_usnic_put_posted_or_failed(eng, frag, OPAL_SUCCESS);
    } else if (eng->defer_callbacks && frag->callback_pending) {
        opal_list_append(&eng->pending_callbacks, &frag->base.super.super);
    } else {
        opal_btl_usnic_frag_send_done(eng, frag);
    }
}

/* Post one segment of |ep|'s first queued fragment. */
static int send_one_from_queue(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) opal_list_get_first(&ep->tx.queue);
    if (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind) {
        int channel = frag_channel(ep, frag->seg.wire_len);
        if (!opal_btl_usnic_have_credit(eng, channel)) {
            return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
        }
        int rc = opal_btl_usnic_seg_post(eng, ep, &frag->seg, channel);
        if (OPAL_SUCCESS != rc) {
            return rc;
        }
        OPAL_BTL_USNIC_STAT_INC(eng, num_frag_sends);
        frag_dequeue_done(eng, ep, frag);
        return OPAL_SUCCESS;
    }
    int rc = (OPAL_BTL_USNIC_FRAG_PUT == frag->kind) ? opal_btl_usnic_put_send_next(eng, ep, frag)
                                                     : send_next_chunk(eng, ep, frag);
    if (OPAL_SUCCESS == rc && frag->offset == frag->total_len) {
        frag_dequeue_done(eng, ep, frag);
    }
    return rc;
}

/* New segments from ready endpoints, round-robin, up to a quantum each */
static int progress_endpoint_sends(opal_btl_usnic_engine_t *eng)
{
    int posted = 0;
    uint32_t quantum = opal_btl_usnic_send_quantum(eng);
    while (!opal_list_is_empty(&eng->endpoints_with_sends) && opal_btl_usnic_have_credit(eng, OPAL_BTL_USNIC_DATA_CHANNEL)) {
        opal_btl_usnic_endpoint_t *ep = ep_from_rts_item(opal_list_get_first(&eng->endpoints_with_sends));
        opal_btl_usnic_rts_remove(eng, ep);
        int rc = OPAL_ERR_WOULD_BLOCK;
        for (uint32_t turn = 0; turn < quantum && opal_btl_usnic_endpoint_can_send(ep) && opal_btl_usnic_have_credit(eng, OPAL_BTL_USNIC_DATA_CHANNEL);
             ++turn) {
            rc = send_one_from_queue(eng, ep);
            if (OPAL_SUCCESS != rc) {
                break;
            }
            ++posted;
        }
        if (OPAL_ERR_TEMP_OUT_OF_RESOURCE == rc) {
            opal_btl_usnic_check_rts(ep);
            break;
        }
        opal_btl_usnic_check_rts(ep); /* re-appended at the tail: round-robin */
    }
    return posted;
}

int opal_btl_usnic_engine_send_now(opal_btl_usnic_engine_t *eng)
{
    if (!opal_list_is_empty(&eng->resend_segs) || eng->now >= eng->next_deadline ||
        !opal_list_is_empty(&eng->endpoints_in_flight)) {
        return 0; /* a path with data in flight: progress orders repairs and new data */
    }
    eng->defer_callbacks = true;
    int posted = progress_endpoint_sends(eng);
    eng->wire->flush(eng);
    eng->defer_callbacks = false;
    return posted;
}

/* ----- while the owner is away ----- */

opal_btl_usnic_send_seg_t *opal_btl_usnic_seg_copy(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_send_seg_t *seg)
{
    opal_btl_usnic_send_seg_t *copy = opal_btl_usnic_chunk_seg_alloc(&eng->pool);
    if (NULL == copy) {
        return NULL;
    }
    size_t inline_len = seg->wire_len - seg->ext_len;
    memcpy(copy->hdr, seg->hdr, inline_len);
    if (0 != seg->ext_len) {
        memcpy((uint8_t *) copy->hdr + inline_len, seg->ext_data, seg->ext_len);
    }
    copy->wire_len = seg->wire_len;
    copy->ext_len = 0;
    copy->ext_data = NULL;
    copy->seq = seg->seq;
    copy->ep = seg->ep;
    copy->frag = NULL;
    return copy;
}

/* Post a copy of |seg| to |ep|; the copy is never ACKed nor timed: it is
 * recycled when the provider releases it */
static int away_post_copy(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                          const opal_btl_usnic_send_seg_t *seg)
{
    opal_btl_usnic_send_seg_t *copy = opal_btl_usnic_seg_copy(eng, seg);
    if (NULL == copy) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    copy->hdr->flags &= (uint8_t) ~OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT; /* not the timer's copy */
    copy->hdr->flags |= OPAL_BTL_USNIC_HDR_FLAG_RETX;
    opal_btl_usnic_ack_stamp(eng, ep, copy->hdr); /* what we know now: valid, if not the latest */
    return opal_btl_usnic_post_unacked(eng, ep, copy, OPAL_BTL_USNIC_DATA_CHANNEL);
}

/* Copies of |ep|'s un-ACKed segments sent at least |min_age| us ago and
 * not reported held, oldest first, while credits last; each counted in
 * |*copies| */
static int copy_unacked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint64_t min_age,
                        uint64_t *copies)
{
    int posted = 0;
    for (opal_btl_usnic_seq_t s = ep->tx.acked_seq + 1; s != ep->tx.next_seq; ++s) {
        const opal_btl_usnic_send_seg_t *seg = ep->tx.sent[opal_btl_usnic_slot(ep, s)];
        if (NULL == seg || (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_SACKED) || eng->now - seg->sent_time < min_age) {
            continue;
        }
        if (!opal_btl_usnic_have_credit(eng, OPAL_BTL_USNIC_DATA_CHANNEL) || OPAL_SUCCESS != away_post_copy(eng, ep, seg)) {
            break; /* the next round (if any) tries again */
        }
        ++*copies;
        ++posted;
    }
    return posted;
}

/* Copies of |ep|'s overdue un-ACKed segments */
static int away_resend_endpoint(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    uint64_t rto = (0 != ep->timer.rto) ? ep->timer.rto : eng->p.rto_initial;
    return copy_unacked(eng, ep, rto, &eng->stats.num_away_resends);
}

int opal_btl_usnic_parting_resend(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (ep->failed || ep->departed) {
        return 0;
    }
    bool saved = eng->defer_callbacks;
    eng->defer_callbacks = true; /* the PML is being finalized: never call it from here */
    int posted = copy_unacked(eng, ep, 0, &eng->stats.num_parting_resends);
    if (posted > 0) {
        eng->wire->flush(eng);
    }
    eng->defer_callbacks = saved;
    return posted;
}

int opal_btl_usnic_resend_away(opal_btl_usnic_engine_t *eng)
{
    if (eng->now < eng->away_next) {
        return 0;
    }
    int posted = 0;
    bool saved = eng->defer_callbacks;
    eng->defer_callbacks = true; /* a completion inside a post must not call the PML from here */
    opal_list_item_t *item;
    OPAL_LIST_FOREACH (item, &eng->endpoints_in_flight, opal_list_item_t) {
        opal_btl_usnic_endpoint_t *ep =
            (opal_btl_usnic_endpoint_t *) ((char *) item - offsetof(opal_btl_usnic_endpoint_t, tx.flight_item));
        if (!ep->failed) {
            posted += away_resend_endpoint(eng, ep);
        }
    }
    eng->wire->flush(eng);
    eng->defer_callbacks = saved;
    if (0 == posted) {
        return 0; /* nothing overdue (or no credit): the back-off starts with the first copy */
    }
    uint64_t interval = (0 == eng->away_interval) ? eng->p.rto_max : 2 * eng->away_interval;
    eng->away_interval = (interval < OPAL_BTL_USNIC_AWAY_INTERVAL_MAX) ? interval : OPAL_BTL_USNIC_AWAY_INTERVAL_MAX;
    eng->away_next = eng->now + eng->away_interval;
    return posted;
}

int opal_btl_usnic_engine_progress(opal_btl_usnic_engine_t *eng)
{
    ++eng->tick;
    eng->away_next = 0; /* the owner is back: a later absence starts its back-off afresh */
    eng->away_interval = 0;
    opal_btl_usnic_callbacks_run(eng);
    if (OPAL_UNLIKELY(NULL != eng->nonces_spent)) {
        opal_btl_usnic_nonces_spent_fail(eng);
    }
    if (eng->now >= eng->next_deadline) {
        opal_btl_usnic_hotel_evict_due(eng);
    }
    int posted = 0;
    if (!opal_list_is_empty(&eng->resend_segs)) {
        posted += opal_btl_usnic_resends_post(eng);
    }
    if (OPAL_UNLIKELY(eng->now >= eng->next_pace_event)) {
        opal_btl_usnic_pace_release(eng);
    }
    if (!opal_list_is_empty(&eng->endpoints_with_sends)) {
        posted += progress_endpoint_sends(eng);
    }
    if (!opal_list_is_empty(&eng->endpoints_needing_ack)) {
        posted += opal_btl_usnic_ack_send_due(eng);
    }
    if (OPAL_UNLIKELY(eng->now >= eng->next_probe_event)) {
        posted += opal_btl_usnic_probes_progress(eng);
    }
    if (posted > 0) {
        eng->wire->flush(eng);
    }
    return posted;
}

