/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Test-only fault injection (btl_usnic_inject_faults), a transport
 * (btl_usnic_wire.h) wrapped around another: every dup_every-th datagram
 * is sent twice, every reorder_every-th is held back and sent after the
 * next one, every forge_put_every-th PUT segment is preceded by a forged
 * copy with a wrong key.  The extra datagrams go through the inner
 * transport's post like any other.  The module wraps its wire only when a
 * parameter asks for it: production pays nothing.
 */
#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"

struct opal_btl_usnic_inject_state {
    const opal_btl_usnic_transport_t *inner;
    uint32_t dup_every;
    uint32_t reorder_every;
    uint32_t forge_put_every;
    uint64_t count;
    uint64_t put_count;
    opal_btl_usnic_send_seg_t *held;  /* posted later, after the next datagram */
    opal_btl_usnic_endpoint_t *held_ep;
    int held_channel;
    uint64_t dups;
    uint64_t data_dups;               /* duplicates of data-bearing segments */
    uint64_t reorders;
    uint64_t forged_puts;
    bool quiesced;                    /* finalize began: the goodbyes go out untouched */
};
typedef struct opal_btl_usnic_inject_state inject_state_t;

/* Post |copy| (a copy of a segment, never ACKed nor timed) on |channel|;
 * it is recycled when the provider releases it, like any segment.  A copy
 * uses one send credit, so it is only sent when one is free. */
static bool inject_post_copy(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *copy, int channel)
{
    copy->channel = (uint8_t) channel;
    copy->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED | OPAL_BTL_USNIC_SEG_FLAG_POSTED;
    if (module->eng.credits[channel] > 0 && OPAL_SUCCESS == module->inject->inner->engine.post(&module->eng, ep, copy, channel)) {
        --module->eng.credits[channel];
        return true;
    }
    copy->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED;
    opal_btl_usnic_seg_release_if_done(&module->eng.pool, copy);
    return false;
}

/* Send a copy of |seg|: the peer sees it twice. */
static void inject_duplicate(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_send_seg_t *copy = opal_btl_usnic_seg_copy(&module->eng, seg);
    if (NULL != copy && inject_post_copy(module, ep, copy, channel)) {
        ++module->inject->dups;
        if (OPAL_BTL_USNIC_SEG_ACK != seg->kind) {
            ++module->inject->data_dups;
        }
    }
}

/* Send a copy of the PUT |seg| with its key flipped, ahead of it: the
 * target must drop it unwritten and still accept the genuine one.  It is
 * sealed anew (a peer of the job that holds the key goes wrong), so it is
 * the PUT checks that must stop it, not the tag. */
static void inject_forged_put(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_send_seg_t *copy = opal_btl_usnic_seg_copy(&module->eng, seg);
    if (NULL == copy) {
        return;
    }
    opal_btl_usnic_put_hdr_t *ph = (opal_btl_usnic_put_hdr_t *) copy->hdr;
    ph->key ^= opal_btl_usnic_wire64(0x8000000000000001ull);
    memset((uint8_t *) copy->hdr + sizeof(*ph), 0xee, copy->wire_len - sizeof(*ph));
    opal_btl_usnic_seal(&module->eng, ep, &ph->hdr, copy->wire_len);
    if (inject_post_copy(module, ep, copy, channel)) {
        ++module->inject->forged_puts;
    }
}

/* Post the datagram held back for reordering, if any. */
static void inject_release_held(opal_btl_usnic_module_t *module)
{
    inject_state_t *inj = module->inject;
    opal_btl_usnic_send_seg_t *seg = inj->held;
    if (NULL != seg) {
        inj->held = NULL;
        inj->inner->post_held(module, inj->held_ep, seg, inj->held_channel);
        ++inj->reorders;
    }
}

/* Returns true if |seg| was held back (the caller reports success). */
static bool inject_faults(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                          opal_btl_usnic_send_seg_t *seg, int channel)
{
    inject_state_t *inj = module->inject;
    uint64_t n = ++inj->count;
    bool first_put_post = OPAL_BTL_USNIC_PKT_PUT == seg->hdr->type && seg->seq == ep->tx.next_seq;
    if (0 != inj->forge_put_every && first_put_post && 0 == ++inj->put_count % inj->forge_put_every) {
        inject_forged_put(module, ep, seg, channel);
    }
    if (0 != inj->dup_every && 0 == n % inj->dup_every) {
        inject_duplicate(module, ep, seg, channel);
    }
    if (0 != inj->reorder_every && 0 == n % inj->reorder_every && NULL == inj->held) {
        inj->held = seg;
        inj->held_ep = ep;
        inj->held_channel = channel;
        return true;
    }
    return false;
}

/* ----- the transport: faults on post, the rest forwarded ----- */

static int inject_open(opal_btl_usnic_module_t *module, const opal_btl_usnic_device_t *dev)
{
    return module->inject->inner->open(module, dev);
}

static int inject_add_peer(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                           const opal_btl_usnic_modex_t *remote)
{
    return module->inject->inner->add_peer(module, ep, remote);
}

static void inject_del_peer(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    module->inject->inner->del_peer(module, ep);
}

static int inject_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_seg_t *seg,
                       int channel)
{
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    /* after quiesce nothing would release a held datagram, and the
     * counts are already told: the goodbyes pass untouched */
    if (module->inject->quiesced) {
        return module->inject->inner->engine.post(eng, ep, seg, channel);
    }
    if (inject_faults(module, ep, seg, channel)) {
        return OPAL_SUCCESS;
    }
    int rc = module->inject->inner->engine.post(eng, ep, seg, channel);
    inject_release_held(module);
    return rc;
}

static void inject_flush(opal_btl_usnic_engine_t *eng)
{
    opal_btl_usnic_module_of(eng)->inject->inner->engine.flush(eng);
}

static void inject_post_held(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *seg, int channel)
{
    module->inject->inner->post_held(module, ep, seg, channel);
}

static void inject_describe_peer(opal_btl_usnic_module_t *module, const opal_btl_usnic_endpoint_t *ep, char *buf,
                                 size_t len)
{
    if (NULL != module->inject->inner->describe_peer) {
        module->inject->inner->describe_peer(module, ep, buf, len);
    }
}

static int inject_progress(opal_btl_usnic_module_t *module)
{
    inject_release_held(module); /* never hold a datagram across passes */
    return module->inject->inner->progress(module);
}

static bool inject_progress_fast(opal_btl_usnic_module_t *module)
{
    return module->inject->inner->progress_fast(module);
}

static void inject_drain(opal_btl_usnic_module_t *module)
{
    module->inject->inner->drain(module);
}

/* Finalize: the held datagram goes out, and the counts are told */
static void inject_quiesce(opal_btl_usnic_module_t *module)
{
    inject_state_t *inj = module->inject;
    inject_release_held(module);
    inj->quiesced = true;
    opal_output(0, "btl:usnic [rank %u %s] fault injection: %llu duplicated (%llu with data), %llu reordered "
                "datagrams, %llu forged PUTs",
                (unsigned) OPAL_PROC_MY_NAME.vpid, module->if_name, (unsigned long long) inj->dups,
                (unsigned long long) inj->data_dups, (unsigned long long) inj->reorders,
                (unsigned long long) inj->forged_puts);
    inj->inner->quiesce(module);
}

static void inject_close(opal_btl_usnic_module_t *module)
{
    module->inject->inner->close(module);
}

/* The inner wire goes, then the injector: module->transport is not to be
 * called again */
static void inject_fini(opal_btl_usnic_module_t *module)
{
    module->inject->inner->fini(module);
    free(module->inject);
    module->inject = NULL;
}

static int inject_mem_reg(void *ctx, void *base, size_t len, void **handle_p, void **desc_p)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) ctx;
    return module->inject->inner->mem_reg(module, base, len, handle_p, desc_p);
}

static void inject_mem_unreg(void *ctx, void *handle)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) ctx;
    module->inject->inner->mem_unreg(module, handle);
}

static const opal_btl_usnic_transport_t inject_transport = {
    .name = "inject",
    .open = inject_open,
    .add_peer = inject_add_peer,
    .del_peer = inject_del_peer,
    .describe_peer = inject_describe_peer,
    .engine = {.post = inject_post, .flush = inject_flush},
    .post_held = inject_post_held,
    .progress = inject_progress,
    .progress_fast = inject_progress_fast,
    .drain = inject_drain,
    .quiesce = inject_quiesce,
    .close = inject_close,
    .fini = inject_fini,
    .mem_reg = inject_mem_reg,
    .mem_unreg = inject_mem_unreg,
};

bool opal_btl_usnic_inject_wanted(void)
{
    const opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    return 0 != c->inject_dup_every || 0 != c->inject_reorder_every || 0 != c->inject_forge_put_every;
}

int opal_btl_usnic_inject_wrap(opal_btl_usnic_module_t *module, const opal_btl_usnic_transport_t *inner)
{
    const opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    inject_state_t *inj = (inject_state_t *) calloc(1, sizeof(*inj));
    if (NULL == inj) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    inj->inner = inner;
    inj->dup_every = c->inject_dup_every;
    inj->reorder_every = c->inject_reorder_every;
    inj->forge_put_every = c->inject_forge_put_every;
    module->inject = inj;
    module->transport = &inject_transport;
    return OPAL_SUCCESS;
}
