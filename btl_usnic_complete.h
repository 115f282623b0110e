/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Completions (btl_usnic_complete.c): PML callbacks of sent, failed
 * and PUT fragments, the deferred ones, and fragment recycling.
 */
#ifndef OPAL_BTL_USNIC_COMPLETE_H
#define OPAL_BTL_USNIC_COMPLETE_H

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"

/* Fail |frag| (not queued any more) with |status|: PML callback with the
 * error if it wants one, then recycle it if the BTL owns it. */
void opal_btl_usnic_frag_fail(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status);

/* Make the PML send callback for |frag| if one is pending, and recycle the
 * fragment if the BTL owns it and nothing references it. */
void opal_btl_usnic_frag_send_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag);

/* |frag| left the send queue: all posted (OPAL_SUCCESS) or failed. */
void opal_btl_usnic_put_posted_or_failed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag,
                                         int status);

/* A PUT segment was ACKed (or forgotten at teardown). */
void opal_btl_usnic_put_seg_acked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg);

/* Teardown: the PUT owning |seg|, if any, ends with |status|. */
void opal_btl_usnic_put_mark_failed(opal_btl_usnic_send_seg_t *seg, int status);

/* Deferred completion: the PML's callback, then recycling. */
void opal_btl_usnic_put_complete(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag);

/* Run the PML callbacks deferred to this progress pass (pending_callbacks) */
void opal_btl_usnic_callbacks_run(opal_btl_usnic_engine_t *eng);

#endif /* OPAL_BTL_USNIC_COMPLETE_H */
