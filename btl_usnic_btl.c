/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The BTL entry points of a module (alloc, free, prepare_src, send,
 * sendi, put, memory registration, error callback, finalize) and the
 * module template, as a designated initializer at the bottom.  Peers are
 * btl_usnic_peers.c's, setup btl_usnic_module.c's, the wire below the
 * engine the transport's (btl_usnic_wire.h).
 */
#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/datatype/opal_convertor.h"
#include "btl_usnic_compat.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_module_int.h"

static opal_btl_usnic_module_t *usnic_module(struct mca_btl_base_module_t *btl)
{
    return (opal_btl_usnic_module_t *) btl;
}

static mca_btl_base_descriptor_t *usnic_alloc(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                                              uint8_t order, size_t size, uint32_t flags)
{
    (void) order;
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_frag_alloc(&usnic_module(btl)->eng, ep, size, flags);
    OPAL_BTL_USNIC_UNLOCK();
    return (NULL != frag) ? &frag->base : NULL;
}

static int usnic_free(struct mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_frag_free(&usnic_module(btl)->eng, (opal_btl_usnic_send_frag_t *) des);
    OPAL_BTL_USNIC_UNLOCK();
    return OPAL_SUCCESS;
}

/* Pack up to *|size| bytes from |conv| to |dst| (NULL: point into the
 * user's contiguous buffer).  Returns where the data is; sets *|size|. */
static void *convertor_take(opal_convertor_t *conv, void *dst, size_t *size)
{
    struct iovec iov = {.iov_base = dst, .iov_len = *size};
    uint32_t iov_count = 1;
    size_t max_data = *size;
    (void) opal_convertor_pack(conv, &iov, &iov_count, &max_data);
    *size = max_data;
    return iov.iov_base;
}

static mca_btl_base_descriptor_t *prepare_small(opal_btl_usnic_module_t *module, opal_convertor_t *conv,
                                                size_t reserve, size_t *size, uint32_t flags)
{
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_small_frag_alloc(&module->eng.pool);
    if (NULL == frag) {
        return NULL;
    }
    uint8_t *payload = opal_btl_usnic_seg_payload(&frag->seg, sizeof(opal_btl_usnic_hdr_t));
    opal_btl_usnic_frag_init_small(frag, reserve, flags);
    if (0 == *size) {
        /* the PML's header alone */
    } else if (opal_convertor_need_buffers(conv)) {
        convertor_take(conv, payload + reserve, size);
        frag->segments[0].seg_len = reserve + *size;
    } else {
        /* contiguous: reference the user's buffer; copied once at send */
        frag->segments[1].seg_addr.pval = convertor_take(conv, NULL, size);
        frag->segments[1].seg_len = *size;
        frag->base.des_segment_count = 2;
    }
    return &frag->base;
}

static mca_btl_base_descriptor_t *prepare_large(opal_btl_usnic_module_t *module, opal_convertor_t *conv,
                                                size_t reserve, size_t *size, uint32_t flags)
{
    if (reserve > OPAL_BTL_USNIC_LARGE_HDR_SPACE) {
        return NULL;
    }
    bool packed = opal_convertor_need_buffers(conv);
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_large_frag_alloc(&module->eng.pool, packed ? *size : 0);
    if (NULL == frag) {
        return NULL;
    }
    frag->segments[0].seg_addr.pval = frag->hdr_space;
    frag->segments[0].seg_len = reserve;
    frag->segments[1].seg_addr.pval = convertor_take(conv, packed ? frag->pack_buf : NULL, size);
    frag->segments[1].seg_len = *size;
    frag->base.des_segment_count = 2;
    frag->base.des_flags = flags;
    return &frag->base;
}

static mca_btl_base_descriptor_t *usnic_prepare_src(struct mca_btl_base_module_t *btl,
                                                    struct mca_btl_base_endpoint_t *ep, opal_convertor_t *conv,
                                                    uint8_t order, size_t reserve, size_t *size, uint32_t flags)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
    mca_btl_base_descriptor_t *des;
    (void) order;
    if (reserve + *size > btl->btl_max_send_size && reserve < btl->btl_max_send_size) {
        *size = btl->btl_max_send_size - reserve;
    }
    OPAL_BTL_USNIC_LOCK();
    if (reserve + *size <= opal_btl_usnic_max_frag_payload(&module->eng, ep)) {
        des = prepare_small(module, conv, reserve, size, flags);
    } else {
        des = prepare_large(module, conv, reserve, size, flags);
    }
    OPAL_BTL_USNIC_UNLOCK();
    if (NULL != des) {
        ((opal_btl_usnic_send_frag_t *) des)->ep = ep;
    }
    return des;
}

static int usnic_send(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                      mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    OPAL_BTL_USNIC_LOCK();
    /* the fast path posts outside progress: send times must be fresh */
    opal_btl_usnic_engine_t *eng = &usnic_module(btl)->eng;
    opal_btl_usnic_engine_set_time(eng, opal_btl_usnic_clock_usec());
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) des;
    int rc = opal_btl_usnic_frag_submit(ep, frag, tag);
    if (0 == rc) {
        (void) opal_btl_usnic_engine_send_now(eng); /* queued (chunks, or too big to go fast): leave now */
    }
    OPAL_BTL_USNIC_UNLOCK();
    return rc;
}

/* ----- emulated RDMA (btl_usnic_put.c has the design notes) ----- */

static struct mca_btl_base_registration_handle_t *usnic_register_mem(struct mca_btl_base_module_t *btl,
                                                                     struct mca_btl_base_endpoint_t *ep,
                                                                     void *base, size_t size, uint32_t flags)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
    opal_btl_usnic_reg_handle_t *handle = (opal_btl_usnic_reg_handle_t *) malloc(sizeof(*handle));
    if (NULL == handle) {
        return NULL;
    }
    if (!(flags & MCA_BTL_REG_FLAG_REMOTE_WRITE)) {
        /* a PUT source needs no registration: never expose it */
        handle->region_id = OPAL_BTL_USNIC_REGION_LOCAL;
        handle->reserved = 0;
        handle->key = 0;
        return handle;
    }
    OPAL_BTL_USNIC_LOCK();
    uint64_t peer = (NULL != ep) ? ep->peer_id : OPAL_BTL_USNIC_ANY_PEER;
    bool ok = opal_btl_usnic_reg_add(&module->eng.regs, base, size, peer, handle);
    if (ok) {
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_regs);
    }
    OPAL_BTL_USNIC_UNLOCK();
    if (!ok) {
        free(handle);
        return NULL; /* the PML falls back to send/receive */
    }
    return handle;
}

static int usnic_deregister_mem(struct mca_btl_base_module_t *btl, struct mca_btl_base_registration_handle_t *handle)
{
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_reg_remove(&usnic_module(btl)->eng.regs, handle);
    OPAL_BTL_USNIC_UNLOCK();
    free(handle);
    return OPAL_SUCCESS;
}

static int usnic_put(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep, void *local_address,
                     uint64_t remote_address, struct mca_btl_base_registration_handle_t *local_handle,
                     struct mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags, int order,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    (void) flags;
    (void) order; /* completion is remote completion: stronger than any order tag */
    if (size > btl->btl_put_limit) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_engine_set_time(&usnic_module(btl)->eng, opal_btl_usnic_clock_usec());
    int rc = opal_btl_usnic_put_submit(ep, local_address, remote_address, local_handle, remote_handle, size, cbfunc,
                                       cbcontext, cbdata);
    OPAL_BTL_USNIC_UNLOCK();
    return rc;
}

static int usnic_sendi(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       struct opal_convertor_t *conv, void *header, size_t header_size, size_t payload_size,
                       uint8_t order, uint32_t flags, mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **descriptor)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
    (void) order;
    (void) flags;
    if (NULL != descriptor) {
        *descriptor = NULL;
    }
    if (header_size + payload_size > ep->max_frag_payload) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    OPAL_BTL_USNIC_LOCK();
    if (ep->failed) { /* written under the lock by up_peer_failed (btl_usnic_module.c) */
        OPAL_BTL_USNIC_UNLOCK();
        return OPAL_ERR_RESOURCE_BUSY;
    }
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_small_frag_alloc(&module->eng.pool);
    if (NULL == frag) {
        OPAL_BTL_USNIC_UNLOCK();
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    uint8_t *payload = opal_btl_usnic_seg_payload(&frag->seg, sizeof(opal_btl_usnic_hdr_t));
    memcpy(payload, header, header_size);
    size_t size = payload_size;
    if (payload_size > 0) {
        convertor_take(conv, payload + header_size, &size);
    }
    opal_btl_usnic_engine_set_time(&module->eng, opal_btl_usnic_clock_usec());
    opal_btl_usnic_frag_submit_owned(ep, frag, tag, header_size + size);
    OPAL_BTL_USNIC_UNLOCK();
    return OPAL_SUCCESS;
}

static int usnic_register_error(struct mca_btl_base_module_t *btl, mca_btl_base_module_error_cb_fn_t cbfunc)
{
    usnic_module(btl)->pml_error_cb = cbfunc;
    return OPAL_SUCCESS;
}

#if BTL_VERSION < 330 /* BTL API 3.3.0 dropped checkpoint/restart */
static int usnic_ft_event(int state)
{
    (void) state;
    return OPAL_SUCCESS;
}
#endif

/* ===================== finalize ===================== */

static int usnic_finalize(struct mca_btl_base_module_t *btl)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
    opal_btl_usnic_away_stop(); /* before the modules go; not under the lock it takes */
    OPAL_BTL_USNIC_LOCK();
    if (mca_btl_usnic_component.stats > 0) {
        opal_btl_usnic_module_print_stats(module, "final");
    }
    const opal_btl_usnic_transport_t *t = module->transport; /* NULL: setup failed before choosing one */
    if (NULL != t) {
        t->quiesce(module);
    }
    opal_btl_usnic_peers_release_all(module);
    if (NULL != t) {
        t->drain(module);
        t->close(module);
    }
    /* the engine unregisters its slabs through the transport: before fini */
    opal_btl_usnic_engine_fini(&module->eng);
    OBJ_DESTRUCT(&module->all_endpoints);
    OBJ_DESTRUCT(&module->other_job_peers);
    free(module->peers);
    module->peers = NULL;
    if (NULL != t) {
        t->fini(module);
    }
    free(module->if_name);
    free(module->domain_name);
    free(module->provider);
    OPAL_BTL_USNIC_UNLOCK();
    /* the module memory itself belongs to the component */
    return OPAL_SUCCESS;
}

mca_btl_base_module_t opal_btl_usnic_module_template = {
    .btl_component = &mca_btl_usnic_component.super,
    .btl_eager_limit = 32 * 1024,
    .btl_rndv_eager_limit = 4 * 1024,
    .btl_max_send_size = 64 * 1024,
    .btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT,
    .btl_latency = 2,
    /* a PUT completes only once the target has the data (its ACK) */
    .btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE | MCA_BTL_FLAGS_SINGLE_ADD_PROCS | MCA_BTL_FLAGS_PUT |
                 OPAL_BTL_USNIC_FLAGS_REMOTE_COMPLETION,
    /* PUT: ob1's pipeline registers each piece of the receive buffer and
     * PUTs it; pieces of 1 MiB keep registrations few and the window busy */
    .btl_put_limit = 1 << 30,
    .btl_put_alignment = 0,
    .btl_rdma_pipeline_send_length = 64 * 1024,
    .btl_rdma_pipeline_frag_size = 1024 * 1024,
    .btl_min_rdma_pipeline_size = 64 * 1024,
    .btl_registration_handle_size = sizeof(struct mca_btl_base_registration_handle_t),
    .btl_register_mem = usnic_register_mem,
    .btl_deregister_mem = usnic_deregister_mem,
    .btl_put = usnic_put,
    .btl_add_procs = opal_btl_usnic_add_procs,
    .btl_del_procs = opal_btl_usnic_del_procs,
    .btl_finalize = usnic_finalize,
    .btl_alloc = usnic_alloc,
    .btl_free = usnic_free,
    .btl_prepare_src = usnic_prepare_src,
    .btl_send = usnic_send,
    .btl_sendi = usnic_sendi,
    .btl_dump = mca_btl_base_dump,
    .btl_register_error = usnic_register_error,
#if BTL_VERSION < 330
    .btl_ft_event = usnic_ft_event,
#endif
};
