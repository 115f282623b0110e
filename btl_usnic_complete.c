/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Completions: what the PML hears when a fragment was sent or failed,
 * or a PUT completed (btl_usnic_put.c has the PUT's design notes), and
 * when fragments recycle.  Callbacks that must not run inside the PML's
 * own call or inside ACK processing wait on the engine's
 * pending_callbacks list for the next progress pass.
 */
#include "opal_config.h"

#include "btl_usnic_complete.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"

/* ----- fragments sent or failed ----- */

/* The PML hears about |frag| through the upcall, if it asked to */
static void frag_callback(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status)
{
    frag->callback_pending = false;
    if (NULL != frag->base.des_cbfunc) {
        OPAL_BTL_USNIC_STAT_INC(eng, pml_send_callbacks);
        eng->up->send_done(eng, frag, status);
    }
}

/* Recycle |frag| if the BTL owns it and nothing references it any more. */
static void frag_release_if_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag)
{
    if (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind) {
        opal_btl_usnic_seg_release_if_done(&eng->pool, &frag->seg);
    } else if (frag->owned_by_btl && !frag->callback_pending && !frag->queued) {
        opal_btl_usnic_frag_return(&eng->pool, frag);
    }
}

void opal_btl_usnic_frag_send_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag)
{
    /* Read ownership before the callback: a PML that does not give us the
     * descriptor may free it (btl_free) inside the callback. */
    bool owned = frag->owned_by_btl;
    if (frag->callback_pending) {
        frag_callback(eng, frag, OPAL_SUCCESS);
    }
    if (owned) {
        frag_release_if_done(eng, frag);
    }
}

void opal_btl_usnic_frag_fail(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status)
{
    if (OPAL_BTL_USNIC_FRAG_PUT == frag->kind) {
        opal_btl_usnic_put_posted_or_failed(eng, frag, status);
        return;
    }
    bool owned = frag->owned_by_btl;
    if (frag->callback_pending) {
        frag_callback(eng, frag, status);
    }
    if (owned) {
        if (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind && 0 == (frag->seg.flags & OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW)) {
            /* never posted: nothing else will ever release it */
            frag->seg.flags |= OPAL_BTL_USNIC_SEG_FLAG_ACKED;
        }
        frag_release_if_done(eng, frag);
    }
}

void opal_btl_usnic_callbacks_run(opal_btl_usnic_engine_t *eng)
{
    opal_list_item_t *item;
    while (NULL != (item = opal_list_remove_first(&eng->pending_callbacks))) {
        opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) item;
        if (OPAL_BTL_USNIC_FRAG_PUT == frag->kind) {
            opal_btl_usnic_put_complete(eng, frag);
        } else {
            opal_btl_usnic_frag_send_done(eng, frag);
        }
    }
}

/* ----- PUTs ----- */

/* Every segment posted and ACKed (or the PUT failed and nothing is in
 * flight any more): the PML is called back from the next progress pass,
 * never from inside ACK processing or its own call. */
static void put_finish_if_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag)
{
    if (frag->queued || 0 != frag->put.unacked || frag->callback_pending) {
        return;
    }
    frag->callback_pending = true;
    opal_list_append(&eng->pending_callbacks, &frag->base.super.super);
}

void opal_btl_usnic_put_complete(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag)
{
    frag->callback_pending = false;
    if (NULL != frag->put.cbfunc) {
        eng->up->put_done(eng, frag, frag->put.status);
    }
    opal_btl_usnic_frag_return(&eng->pool, frag);
}

void opal_btl_usnic_put_seg_acked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    opal_btl_usnic_send_frag_t *frag = seg->frag;
    seg->frag = NULL;
    --frag->put.unacked;
    put_finish_if_done(eng, frag);
}

void opal_btl_usnic_put_posted_or_failed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag,
                                         int status)
{
    if (OPAL_SUCCESS != status) {
        frag->put.status = status;
    }
    put_finish_if_done(eng, frag);
}

void opal_btl_usnic_put_mark_failed(opal_btl_usnic_send_seg_t *seg, int status)
{
    if (NULL != seg->frag && OPAL_BTL_USNIC_FRAG_PUT == seg->frag->kind) {
        seg->frag->put.status = status;
    }
}
