/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The BTL entry points of a module (alloc, free, prepare_src, send,
 * sendi, put, memory registration, error callback, finalize) and the
 * module template, as a designated initializer at the bottom.  alloc,
 * free, prepare_src, send and sendi take the lock and hand Open MPI's
 * convertor to the engine's glue (btl_usnic_glue.c), which does the rest
 * and which the unit tests drive too.  Peers are btl_usnic_peers.c's,
 * setup btl_usnic_module.c's, the wire below the engine the transport's
 * (btl_usnic_wire.h).
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
 * user's contiguous buffer).  Returns where the data is; sets *|size|.
 * The take function of a convertor source (opal_btl_usnic_source_t). */
static void *convertor_take(void *ctx, void *dst, size_t *size)
{
    opal_convertor_t *conv = (opal_convertor_t *) ctx;
    struct iovec iov = {.iov_base = dst, .iov_len = *size};
    uint32_t iov_count = 1;
    size_t max_data = *size;
    (void) opal_convertor_pack(conv, &iov, &iov_count, &max_data);
    *size = max_data;
    return iov.iov_base;
}

/* The PML's data, as the glue takes it.  |copied|: the glue copies it
 * whatever its layout (sendi), so the convertor is not asked, and with no
 * data it is not asked either: ob1 hands sendi an uninitialised convertor
 * when it sends no data. */
static opal_btl_usnic_source_t convertor_source(opal_convertor_t *conv, size_t size, bool copied)
{
    bool contiguous = !copied && 0 != size && !opal_convertor_need_buffers(conv);
    return (opal_btl_usnic_source_t){.take = convertor_take, .ctx = conv, .contiguous = contiguous};
}

static mca_btl_base_descriptor_t *usnic_prepare_src(struct mca_btl_base_module_t *btl,
                                                    struct mca_btl_base_endpoint_t *ep, opal_convertor_t *conv,
                                                    uint8_t order, size_t reserve, size_t *size, uint32_t flags)
{
    (void) order;
    opal_btl_usnic_source_t src = convertor_source(conv, *size, false);
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_btl_prepare_src(&usnic_module(btl)->eng, ep, &src, reserve,
                                                                      size, flags);
    OPAL_BTL_USNIC_UNLOCK();
    return (NULL != frag) ? &frag->base : NULL;
}

static int usnic_send(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                      mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    OPAL_BTL_USNIC_LOCK();
    int rc = opal_btl_usnic_btl_send(&usnic_module(btl)->eng, ep, (opal_btl_usnic_send_frag_t *) des, tag,
                                     opal_btl_usnic_clock_usec());
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
    (void) order;
    opal_btl_usnic_source_t src = convertor_source(conv, payload_size, true);
    opal_btl_usnic_send_frag_t *instead = NULL;
    OPAL_BTL_USNIC_LOCK(); /* ep->failed is written under it (up_peer_failed, btl_usnic_module.c) */
    int rc = opal_btl_usnic_btl_sendi(&usnic_module(btl)->eng, ep, header, header_size, &src, payload_size, tag,
                                      flags, (NULL != descriptor) ? &instead : NULL, opal_btl_usnic_clock_usec());
    OPAL_BTL_USNIC_UNLOCK();
    if (NULL != descriptor) {
        *descriptor = (NULL != instead) ? &instead->base : NULL;
    }
    return rc;
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
    if (opal_btl_usnic_globals.stats > 0) {
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
    sodium_memzero(module->dh_secret, sizeof(module->dh_secret));
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
    /* an exchange of up to 64 KiB of data (with ob1's header, just above
     * 64 KiB) goes as one eager message, not a rendezvous and a PUT that
     * completes only when its ACK is back (64 KiB ping-pong: 29 us as a
     * rendezvous, 20 eager; btl/tcp, whose limit of 64 KiB counts the
     * header, 27) */
    .btl_eager_limit = 65 * 1024,
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
