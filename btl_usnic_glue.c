/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The engine side of the BTL entry points: everything btl_usnic_btl.c's
 * functions do but take the lock, cast the module and run Open MPI's
 * convertor.  The unit tests' fixture calls the same functions, so the
 * glue the tests drive is the production glue.
 */
#include "opal_config.h"

#include <string.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_glue.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_send.h"

opal_btl_usnic_send_frag_t *opal_btl_usnic_frag_alloc(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                                      size_t size, uint32_t flags)
{
    opal_btl_usnic_send_frag_t *frag = NULL;
    if (size <= opal_btl_usnic_max_frag_payload(eng, ep)) {
        frag = opal_btl_usnic_small_frag_alloc(&eng->pool, sizeof(opal_btl_usnic_hdr_t) + size);
        if (NULL != frag) {
            opal_btl_usnic_frag_init_small(frag, size, flags);
        }
    } else if (size <= eng->p.max_send_size) {
        frag = opal_btl_usnic_large_frag_alloc(&eng->pool, size);
        if (NULL != frag) {
            frag->segments[0].seg_addr.pval = frag->pack_buf;
            frag->segments[0].seg_len = size;
            frag->base.des_segment_count = 1;
            frag->base.des_flags = flags;
        }
    }
    if (NULL != frag) {
        frag->ep = ep;
    }
    return frag;
}

void opal_btl_usnic_frag_free(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag)
{
    frag->owned_by_btl = true;
    if (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind) {
        if (0 == (frag->seg.flags & (OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW | OPAL_BTL_USNIC_SEG_FLAG_POSTED)) &&
            !frag->queued) {
            /* never sent, or sent and ACKed: nothing but us refers to it */
            frag->seg.flags |= OPAL_BTL_USNIC_SEG_FLAG_ACKED;
        }
        opal_btl_usnic_seg_release_if_done(&eng->pool, &frag->seg);
    } else if (!frag->queued && !frag->callback_pending) {
        opal_btl_usnic_frag_return(&eng->pool, frag);
    }
}

/* A small fragment: the PML's header in our buffer, then the data packed
 * behind it, or referenced where it lies (copied once, at send) */
static opal_btl_usnic_send_frag_t *prepare_small(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_source_t *src,
                                                 size_t reserve, size_t *size_p, uint32_t flags)
{
    opal_btl_usnic_send_frag_t *frag =
        opal_btl_usnic_small_frag_alloc(&eng->pool, sizeof(opal_btl_usnic_hdr_t) + reserve + *size_p);
    if (NULL == frag) {
        return NULL;
    }
    uint8_t *payload = opal_btl_usnic_seg_payload(&frag->seg, sizeof(opal_btl_usnic_hdr_t));
    opal_btl_usnic_frag_init_small(frag, reserve, flags);
    if (0 == *size_p) {
        /* the PML's header alone */
    } else if (!src->contiguous) {
        src->take(src->ctx, payload + reserve, size_p);
        frag->segments[0].seg_len = reserve + *size_p;
    } else {
        frag->segments[1].seg_addr.pval = src->take(src->ctx, NULL, size_p);
        frag->segments[1].seg_len = *size_p;
        frag->base.des_segment_count = 2;
    }
    return frag;
}

/* A large fragment: the PML's header in its own space, the data packed
 * into the fragment's buffer or referenced where it lies (each chunk
 * copies its bytes when it is posted) */
static opal_btl_usnic_send_frag_t *prepare_large(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_source_t *src,
                                                 size_t reserve, size_t *size_p, uint32_t flags)
{
    if (reserve > OPAL_BTL_USNIC_LARGE_HDR_SPACE) {
        return NULL;
    }
    bool packed = !src->contiguous;
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_large_frag_alloc(&eng->pool, packed ? *size_p : 0);
    if (NULL == frag) {
        return NULL;
    }
    frag->segments[0].seg_addr.pval = frag->hdr_space;
    frag->segments[0].seg_len = reserve;
    frag->segments[1].seg_addr.pval = src->take(src->ctx, packed ? frag->pack_buf : NULL, size_p);
    frag->segments[1].seg_len = *size_p;
    frag->base.des_segment_count = 2;
    frag->base.des_flags = flags;
    return frag;
}

opal_btl_usnic_send_frag_t *opal_btl_usnic_btl_prepare_src(opal_btl_usnic_engine_t *eng,
                                                           opal_btl_usnic_endpoint_t *ep,
                                                           const opal_btl_usnic_source_t *src, size_t reserve,
                                                           size_t *size_p, uint32_t flags)
{
    size_t max = eng->p.max_send_size;
    if (reserve + *size_p > max && reserve < max) {
        *size_p = max - reserve;
    }
    opal_btl_usnic_send_frag_t *frag;
    if (reserve + *size_p <= opal_btl_usnic_max_frag_payload(eng, ep)) {
        frag = prepare_small(eng, src, reserve, size_p, flags);
    } else {
        frag = prepare_large(eng, src, reserve, size_p, flags);
    }
    if (NULL != frag) {
        frag->ep = ep;
    }
    return frag;
}

int opal_btl_usnic_btl_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                            opal_btl_usnic_send_frag_t *frag, uint8_t tag, uint64_t now)
{
    /* the fast path posts outside progress: send times must be fresh */
    opal_btl_usnic_engine_set_time(eng, now);
    int rc = opal_btl_usnic_frag_submit(ep, frag, tag);
    if (0 == rc) {
        (void) opal_btl_usnic_engine_send_now(eng); /* queued (chunks, or too big to go fast): leave now */
    }
    return rc;
}

/* sendi's refusal: a descriptor for the same bytes, if the caller wants
 * one, so that its btl_send completes later through our callback.  Open
 * MPI 5's ob1 sends its control messages (FIN, ACK) this way and, given
 * no descriptor, parks them until some other send of ours calls back: a
 * refusal with nothing else in flight would park them for good. */
static int sendi_refuse(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t size, uint32_t flags,
                        opal_btl_usnic_send_frag_t **instead)
{
    if (NULL != instead && !ep->failed) {
        *instead = opal_btl_usnic_frag_alloc(eng, ep, size, flags);
    }
    return OPAL_ERR_RESOURCE_BUSY;
}

int opal_btl_usnic_btl_sendi(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, const void *header,
                             size_t header_size, const opal_btl_usnic_source_t *src, size_t payload_size,
                             uint8_t tag, uint32_t flags, opal_btl_usnic_send_frag_t **instead, uint64_t now)
{
    if (NULL != instead) {
        *instead = NULL;
    }
    if (header_size + payload_size > ep->max_frag_payload || ep->failed) {
        /* the PML sends it the other way, or learns the peer failed */
        return sendi_refuse(eng, ep, header_size + payload_size, flags, instead);
    }
    if (!opal_list_is_empty(&ep->tx.queue) ||
        !opal_btl_usnic_endpoint_room_for(ep, sizeof(opal_btl_usnic_hdr_t) + header_size + payload_size)) {
        /* Now or never: queued here, every message of a sender that runs
         * ahead of its receiver would wait in a buffer of ours, and the
         * PML, told it was sent, would hand us the next one at once. */
        OPAL_BTL_USNIC_STAT_INC(eng, num_sendi_refused);
        return sendi_refuse(eng, ep, header_size + payload_size, flags, instead);
    }
    opal_btl_usnic_send_frag_t *frag =
        opal_btl_usnic_small_frag_alloc(&eng->pool, sizeof(opal_btl_usnic_hdr_t) + header_size + payload_size);
    if (NULL == frag) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    uint8_t *payload = opal_btl_usnic_seg_payload(&frag->seg, sizeof(opal_btl_usnic_hdr_t));
    if (header_size > 0) {
        memcpy(payload, header, header_size);
    }
    size_t size = payload_size;
    if (payload_size > 0) {
        src->take(src->ctx, payload + header_size, &size);
    }
    opal_btl_usnic_engine_set_time(eng, now);
    if (!opal_btl_usnic_frag_submit_owned(ep, frag, tag, header_size + size)) {
        (void) opal_btl_usnic_engine_send_now(eng); /* for the data channel: leave now */
    }
    return OPAL_SUCCESS;
}
