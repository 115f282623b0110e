/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The engine side of the BTL entry points: everything btl_usnic_btl.c's
 * functions do but take the lock, cast the module and run Open MPI's
 * convertor.  The unit tests' fixture calls the same functions, so the
 * glue the tests drive is the production glue.
 */
#include "opal_config.h"

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_glue.h"

opal_btl_usnic_send_frag_t *opal_btl_usnic_frag_alloc(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                                      size_t size, uint32_t flags)
{
    opal_btl_usnic_send_frag_t *frag = NULL;
    if (size <= opal_btl_usnic_max_frag_payload(eng, ep)) {
        frag = opal_btl_usnic_small_frag_alloc(&eng->pool);
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
