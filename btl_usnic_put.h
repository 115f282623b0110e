/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Emulated RDMA PUT (btl_usnic_put.c, which has the design notes): the
 * origin's PUT fragments (their completion is btl_usnic_complete.h's),
 * and the target's writes into the regions of btl_usnic_reg.h.
 */
#ifndef OPAL_BTL_USNIC_PUT_H
#define OPAL_BTL_USNIC_PUT_H

#include <stddef.h>
#include <stdint.h>

#include "opal/mca/btl/btl.h"

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_reg.h"

/**
 * Queue a PUT of |size| bytes from |local_address| to |remote_addr| inside
 * the peer's region |remote_handle|.  |cbfunc| runs from a later progress
 * pass once every byte is ACKed by the target (or with an error status).
 * Returns OPAL_SUCCESS, OPAL_ERR_UNREACH, OPAL_ERR_BAD_PARAM (no remote
 * region) or OPAL_ERR_OUT_OF_RESOURCE.
 */
int opal_btl_usnic_put_submit(opal_btl_usnic_endpoint_t *ep, void *local_address, uint64_t remote_addr,
                              struct mca_btl_base_registration_handle_t *local_handle,
                              const opal_btl_usnic_reg_handle_t *remote_handle, size_t size,
                              mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);

/* Post the next segment of the queued PUT |frag| (send progression). */
int opal_btl_usnic_put_send_next(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                 opal_btl_usnic_send_frag_t *frag);

/* Target side: write the in-window PUT |ph| from |ep| into its region if
 * opal_btl_usnic_reg_check allows it; returns that verdict. */
opal_btl_usnic_put_verdict_t opal_btl_usnic_recv_put(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                                     const opal_btl_usnic_put_hdr_t *ph);

#endif /* OPAL_BTL_USNIC_PUT_H */
