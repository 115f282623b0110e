/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Emulated RDMA PUT.
 *
 * Design notes
 * ------------
 * Why.  A fragment sent the ordinary way is copied three times: into the
 * sender's datagram, out of the datagram into the receiver's reassembly
 * buffer, and by the PML from there into the user's buffer.  A PUT segment
 * carries its target address, so the receiver copies it straight from the
 * datagram into the user's buffer: one receive-side copy instead of two.
 *
 * Safety.  A datagram may come from anybody who can reach the port.  The
 * target writes only where it said it may: btl_register_mem with
 * MCA_BTL_REG_FLAG_REMOTE_WRITE creates a region (base, size, peer) with a
 * random 64-bit key; the PML ships the handle (region id + key) to the
 * origin, and every PUT segment carries both.  A segment is written only
 * if the region is live, the key and the sending peer match, and the bytes
 * fit inside the region; anything else is counted and dropped without
 * taking its sequence number (so a forged segment cannot steal the slot of
 * a genuine one).  A deregistered region becomes a tombstone that keeps
 * its key: a later segment with that key is counted apart
 * (num_put_after_dereg) and dropped the same way.  It is not accepted
 * either: a forger who sniffed an old key could otherwise steal sequence
 * numbers.  ob1 deregisters a region only after the PUT into it has
 * completed (every segment ACKed), so genuine late segments are
 * retransmissions, which the window drops as old before any key check; a
 * PML that deregisters under a running PUT sees that PUT fail when the
 * origin gives up (peer_timeout).
 *
 * Reliability.  PUT segments take sequence numbers, windows, ACKs and
 * retransmissions like every other segment (they are chunk segments with
 * another header), on the data channel.  The receiver writes a segment
 * before it ACKs it.
 *
 * Completion (btl_usnic_complete.c, which the ACKs reach without
 * calling up here).  The PML's completion callback runs when the last
 * segment is ACKed, i.e. when every byte is in the target's memory (remote
 * completion, seed 003).  Whatever the PML sends afterwards (its FIN), on
 * either channel, can therefore never overtake the data: the BTL's
 * guarantee is stronger than the order tag asks for, so btl_put ignores
 * |order| and descriptors stay MCA_BTL_NO_ORDER.
 */
#include "opal_config.h"

#include <string.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_put.h"
#include "btl_usnic_post.h"
#include "btl_usnic_reg.h"

/* ===================== origin side ===================== */

int opal_btl_usnic_put_submit(opal_btl_usnic_endpoint_t *ep, void *local_address, uint64_t remote_addr,
                              struct mca_btl_base_registration_handle_t *local_handle,
                              const opal_btl_usnic_reg_handle_t *remote_handle, size_t size,
                              mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    opal_btl_usnic_engine_t *eng = ep->eng;
    if (OPAL_UNLIKELY(ep->failed)) {
        return OPAL_ERR_UNREACH;
    }
    if (NULL == remote_handle || OPAL_BTL_USNIC_REGION_LOCAL == remote_handle->region_id || 0 == size) {
        return OPAL_ERR_BAD_PARAM;
    }
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_large_frag_alloc(&eng->pool, 0);
    if (NULL == frag) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    frag->kind = OPAL_BTL_USNIC_FRAG_PUT;
    frag->owned_by_btl = true;
    frag->ep = ep;
    frag->segments[0].seg_addr.pval = local_address;
    frag->segments[0].seg_len = size;
    frag->base.des_segment_count = 1;
    frag->total_len = size;
    frag->put.remote_addr = remote_addr;
    frag->put.region_id = remote_handle->region_id;
    frag->put.key = remote_handle->key;
    frag->put.unacked = 0;
    frag->put.status = OPAL_SUCCESS;
    frag->put.cbfunc = cbfunc;
    frag->put.cbcontext = cbcontext;
    frag->put.cbdata = cbdata;
    frag->put.local_handle = local_handle;
    OPAL_BTL_USNIC_STAT_INC(eng, num_puts);
    opal_btl_usnic_endpoint_enqueue_frag(ep, frag);
    return OPAL_SUCCESS;
}

int opal_btl_usnic_put_send_next(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                 opal_btl_usnic_send_frag_t *frag)
{
    opal_btl_usnic_send_seg_t *seg = opal_btl_usnic_chunk_seg_alloc(&eng->pool);
    if (NULL == seg) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    size_t room = ep->max_chunk_payload + sizeof(opal_btl_usnic_chunk_hdr_t) - sizeof(opal_btl_usnic_put_hdr_t);
    size_t len = frag->total_len - frag->offset;
    if (len > room) {
        len = room;
    }
    opal_btl_usnic_put_hdr_t *ph = (opal_btl_usnic_put_hdr_t *) seg->hdr;
    opal_btl_usnic_hdr_fill(eng, &ph->hdr, OPAL_BTL_USNIC_PKT_PUT, 0, len, 0);
    ph->region_id = opal_btl_usnic_wire32(frag->put.region_id);
    ph->key = opal_btl_usnic_wire64(frag->put.key);
    ph->addr = opal_btl_usnic_wire64(frag->put.remote_addr + frag->offset);
    const uint8_t *src = (const uint8_t *) frag->segments[0].seg_addr.pval + frag->offset;
    opal_btl_usnic_frag_prefetch_ahead(frag, frag->offset, len);
    if (eng->p.gather_send) {
        /* the source stays registered and untouched until every segment
         * is ACKed (the PML's completion waits for that) */
        seg->ext_data = src;
        seg->ext_len = (uint32_t) len;
    } else {
        memcpy(opal_btl_usnic_seg_payload(seg, sizeof(*ph)), src, len);
    }
    seg->wire_len = (uint32_t) (sizeof(*ph) + len);
    if (frag->offset + len == frag->total_len) {
        ph->hdr.flags |= OPAL_BTL_USNIC_HDR_FLAG_ACK_SOON; /* the PUT completes on its ACK */
    }
    seg->frag = frag;
    int rc = opal_btl_usnic_chunk_seg_post(eng, ep, seg);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    frag->offset += len;
    ++frag->put.unacked;
    OPAL_BTL_USNIC_STAT_INC(eng, num_put_sends);
    return OPAL_SUCCESS;
}

/* ===================== target side ===================== */

opal_btl_usnic_put_verdict_t opal_btl_usnic_recv_put(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                                     const opal_btl_usnic_put_hdr_t *ph)
{
    size_t len = opal_btl_usnic_host16(ph->hdr.payload_len);
    uint64_t addr = opal_btl_usnic_host64(ph->addr);
    opal_btl_usnic_put_verdict_t v = opal_btl_usnic_reg_check(&eng->regs, opal_btl_usnic_host32(ph->region_id),
                                                              opal_btl_usnic_host64(ph->key), ep->peer_id, addr, len);
    if (OPAL_BTL_USNIC_PUT_WRITE == v) {
        memcpy((void *) (uintptr_t) addr, (const uint8_t *) ph + sizeof(*ph), len);
        OPAL_BTL_USNIC_STAT_INC(eng, num_put_recvs);
    }
    return v;
}
