/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Fragment and segment classes, their free lists, and reassembly slots.
 */
#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/runtime/opal.h"

#include "btl_usnic_frag.h"

/* ----- classes ----- */

static void send_seg_construct(opal_btl_usnic_send_seg_t *seg)
{
    seg->kind = 0;
    seg->flags = 0;
    seg->channel = 0;
    seg->retries = 0;
    seg->seq = 0;
    seg->wire_len = 0;
    seg->deadline = 0;
    seg->ep = NULL;
    seg->frag = NULL;
    seg->buf = NULL;
    seg->hdr = NULL;
    seg->desc = NULL;
    seg->ext_data = NULL;
    seg->ext_len = 0;
}

/* The buffer belongs to the engine's slabs (btl_usnic_slab.c) */
static void send_seg_destruct(opal_btl_usnic_send_seg_t *seg)
{
    seg->buf = NULL;
    seg->desc = NULL;
}

OBJ_CLASS_INSTANCE(opal_btl_usnic_send_seg_t, opal_free_list_item_t, send_seg_construct,
                   send_seg_destruct);

static void send_frag_construct(opal_btl_usnic_send_frag_t *frag)
{
    OBJ_CONSTRUCT(&frag->seg, opal_btl_usnic_send_seg_t);
    frag->kind = 0;
    frag->pack_buf = NULL;
    frag->pack_buf_size = 0;
    frag->base.des_segments = frag->segments;
    frag->base.des_segment_count = 0;
}

static void send_frag_destruct(opal_btl_usnic_send_frag_t *frag)
{
    OBJ_DESTRUCT(&frag->seg);
    free(frag->pack_buf);
    frag->pack_buf = NULL;
}

OBJ_CLASS_INSTANCE(opal_btl_usnic_send_frag_t, mca_btl_base_descriptor_t, send_frag_construct,
                   send_frag_destruct);

/* ----- free lists ----- */

/* A zeroed buffer for the provider's prefix and |payload| bytes, from
 * the pool's registered slabs, attached to |seg| with its descriptor */
static int seg_attach_buffer(opal_btl_usnic_frag_pool_t *pool, opal_btl_usnic_send_seg_t *seg, size_t payload,
                             uint8_t kind)
{
    uint8_t *buf = (uint8_t *) opal_btl_usnic_slab_alloc(&pool->slabs, pool->prefix + payload, &seg->desc);
    if (NULL == buf) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    seg->buf = buf;
    seg->hdr = (opal_btl_usnic_hdr_t *) (buf + pool->prefix);
    seg->capacity = (uint32_t) payload;
    seg->kind = kind;
    return OPAL_SUCCESS;
}

static int chunk_seg_init(opal_free_list_item_t *item, void *ctx)
{
    opal_btl_usnic_frag_pool_t *pool = (opal_btl_usnic_frag_pool_t *) ctx;
    return seg_attach_buffer(pool, (opal_btl_usnic_send_seg_t *) item, pool->mtu, OPAL_BTL_USNIC_SEG_CHUNK);
}

static int ack_seg_init(opal_free_list_item_t *item, void *ctx)
{
    opal_btl_usnic_frag_pool_t *pool = (opal_btl_usnic_frag_pool_t *) ctx;
    return seg_attach_buffer(pool, (opal_btl_usnic_send_seg_t *) item, sizeof(opal_btl_usnic_ack_hdr_t),
                             OPAL_BTL_USNIC_SEG_ACK);
}

static int small_frag_init(opal_free_list_item_t *item, void *ctx)
{
    opal_btl_usnic_small_class_t *cls = (opal_btl_usnic_small_class_t *) ctx;
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) item;
    if (OPAL_SUCCESS != seg_attach_buffer(cls->pool, &frag->seg, cls->datagram, OPAL_BTL_USNIC_SEG_SMALL)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    frag->seg.frag = frag;
    frag->kind = OPAL_BTL_USNIC_FRAG_SMALL;
    frag->size_class = (uint8_t) (cls - cls->pool->small);
    return OPAL_SUCCESS;
}

static int large_frag_init(opal_free_list_item_t *item, void *ctx)
{
    (void) ctx;
    ((opal_btl_usnic_send_frag_t *) item)->kind = OPAL_BTL_USNIC_FRAG_LARGE;
    return OPAL_SUCCESS;
}

static int list_init(void *ctx, opal_free_list_t *list, size_t elem_size, opal_class_t *cls, int initial,
                     opal_free_list_item_init_fn_t init)
{
    OBJ_CONSTRUCT(list, opal_free_list_t);
    return opal_free_list_init(list, elem_size, 64, cls, 0, 0, initial, -1, initial, NULL, 0, NULL,
                               init, ctx);
}

/* The classes' datagram sizes: 1, 4, 16 KiB ... below |mtu|, then |mtu| */
static void small_classes_size(opal_btl_usnic_frag_pool_t *pool)
{
    int n = 0;
    for (size_t size = OPAL_BTL_USNIC_SMALL_CLASS_MIN; size < pool->mtu && n < OPAL_BTL_USNIC_SMALL_CLASSES - 1;
         size *= 4) {
        pool->small[n++].datagram = size;
    }
    pool->small[n++].datagram = pool->mtu;
    pool->num_small_classes = n;
}

static int small_classes_init(opal_btl_usnic_frag_pool_t *pool, int per)
{
    small_classes_size(pool);
    int rc = OPAL_SUCCESS;
    for (int i = 0; i < pool->num_small_classes && OPAL_SUCCESS == rc; ++i) {
        opal_btl_usnic_small_class_t *cls = &pool->small[i];
        cls->pool = pool;
        /* most small messages are short: the larger classes start smaller */
        int initial = (0 == i) ? per : (per / 4 < 16 ? 16 : per / 4);
        rc = list_init(cls, &cls->frags, sizeof(opal_btl_usnic_send_frag_t), OBJ_CLASS(opal_btl_usnic_send_frag_t),
                       initial, small_frag_init);
    }
    return rc;
}

int opal_btl_usnic_frag_lists_init(opal_btl_usnic_frag_pool_t *pool, const opal_btl_usnic_mem_ops_t *mem,
                                   size_t prefix, size_t mtu, uint32_t send_depth)
{
    pool->prefix = prefix;
    pool->mtu = mtu;
    /* 64 full segments a slab: a handful of registrations per module */
    opal_btl_usnic_slab_set_init(&pool->slabs, mem, 64 * (prefix + mtu));
    int per = (int) send_depth;
    if (per < 16) {
        per = 16;
    }
    int rc = small_classes_init(pool, per);
    if (OPAL_SUCCESS == rc) {
        rc = list_init(pool, &pool->large_frags, sizeof(opal_btl_usnic_send_frag_t),
                       OBJ_CLASS(opal_btl_usnic_send_frag_t), per / 8, large_frag_init);
    }
    if (OPAL_SUCCESS == rc) {
        rc = list_init(pool, &pool->chunk_segs, sizeof(opal_btl_usnic_send_seg_t),
                       OBJ_CLASS(opal_btl_usnic_send_seg_t), per, chunk_seg_init);
    }
    if (OPAL_SUCCESS == rc) {
        rc = list_init(pool, &pool->ack_segs, sizeof(opal_btl_usnic_send_seg_t),
                       OBJ_CLASS(opal_btl_usnic_send_seg_t), per / 4, ack_seg_init);
    }
    pool->lists_ready = true;
    return OPAL_SUCCESS == rc ? OPAL_SUCCESS : OPAL_ERR_OUT_OF_RESOURCE;
}

void opal_btl_usnic_frag_lists_fini(opal_btl_usnic_frag_pool_t *pool)
{
    if (pool->lists_ready) {
        OBJ_DESTRUCT(&pool->ack_segs);
        OBJ_DESTRUCT(&pool->chunk_segs);
        OBJ_DESTRUCT(&pool->large_frags);
        for (int i = 0; i < pool->num_small_classes; ++i) {
            OBJ_DESTRUCT(&pool->small[i].frags);
        }
        pool->lists_ready = false;
    }
    opal_btl_usnic_slab_set_fini(&pool->slabs); /* after the lists: their items point into it */
}

static void frag_reset(opal_btl_usnic_send_frag_t *frag)
{
    frag->base.des_segments = frag->segments;
    frag->base.des_segment_count = 0;
    frag->base.des_flags = 0;
    frag->base.des_cbfunc = NULL;
    frag->base.des_cbdata = NULL;
    frag->base.des_context = NULL;
    frag->base.order = MCA_BTL_NO_ORDER;
    frag->owned_by_btl = false;
    frag->callback_pending = false;
    frag->queued = false;
    frag->tag = 0;
    frag->ep = NULL;
    frag->total_len = 0;
    frag->offset = 0;
    frag->frag_id = 0;
}

static opal_btl_usnic_small_class_t *small_class_for(opal_btl_usnic_frag_pool_t *pool, size_t datagram_len)
{
    for (int i = 0; i < pool->num_small_classes; ++i) {
        if (datagram_len <= pool->small[i].datagram) {
            return &pool->small[i];
        }
    }
    return NULL;
}

opal_btl_usnic_send_frag_t *opal_btl_usnic_small_frag_alloc(opal_btl_usnic_frag_pool_t *pool, size_t datagram_len)
{
    opal_btl_usnic_small_class_t *cls = small_class_for(pool, datagram_len);
    if (NULL == cls) {
        return NULL;
    }
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) opal_free_list_get(&cls->frags);
    if (NULL == frag) {
        return NULL;
    }
    frag_reset(frag);
    frag->seg.flags = 0;
    frag->seg.retries = 0;
    frag->seg.ep = NULL;
    return frag;
}

opal_btl_usnic_send_frag_t *opal_btl_usnic_large_frag_alloc(opal_btl_usnic_frag_pool_t *pool, size_t pack_size)
{
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) opal_free_list_get(&pool->large_frags);
    if (NULL == frag) {
        return NULL;
    }
    frag_reset(frag);
    frag->kind = OPAL_BTL_USNIC_FRAG_LARGE; /* PUTs borrow large frags too */
    if (pack_size > frag->pack_buf_size) {
        uint8_t *buf = (uint8_t *) realloc(frag->pack_buf, pack_size);
        if (NULL == buf) {
            opal_free_list_return(&pool->large_frags, &frag->base.super);
            return NULL;
        }
        frag->pack_buf = buf;
        frag->pack_buf_size = pack_size;
    }
    return frag;
}

static opal_btl_usnic_send_seg_t *seg_alloc(opal_free_list_t *list)
{
    opal_btl_usnic_send_seg_t *seg = (opal_btl_usnic_send_seg_t *) opal_free_list_get(list);
    if (NULL != seg) {
        seg->flags = 0;
        seg->retries = 0;
        seg->ep = NULL;
        seg->frag = NULL;
        seg->ext_data = NULL;
        seg->ext_len = 0;
    }
    return seg;
}

opal_btl_usnic_send_seg_t *opal_btl_usnic_chunk_seg_alloc(opal_btl_usnic_frag_pool_t *pool)
{
    return seg_alloc(&pool->chunk_segs);
}

opal_btl_usnic_send_seg_t *opal_btl_usnic_ack_seg_alloc(opal_btl_usnic_frag_pool_t *pool)
{
    return seg_alloc(&pool->ack_segs);
}

void opal_btl_usnic_frag_init_small(opal_btl_usnic_send_frag_t *frag, size_t size, uint32_t flags)
{
    frag->segments[0].seg_addr.pval = opal_btl_usnic_seg_payload(&frag->seg, sizeof(opal_btl_usnic_hdr_t));
    frag->segments[0].seg_len = size;
    frag->base.des_segment_count = 1;
    frag->base.des_flags = flags;
}

void opal_btl_usnic_frag_return(opal_btl_usnic_frag_pool_t *pool, opal_btl_usnic_send_frag_t *frag)
{
    opal_free_list_t *list = (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind) ? &pool->small[frag->size_class].frags
                                                                        : &pool->large_frags;
    opal_free_list_return(list, &frag->base.super);
}

unsigned opal_btl_usnic_frag_spans(const opal_btl_usnic_send_frag_t *frag, size_t offset, size_t len,
                                   opal_btl_usnic_data_span_t *spans, unsigned max)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < frag->base.des_segment_count && len > 0 && n < max; ++i) {
        const mca_btl_base_segment_t *s = &frag->segments[i];
        if (offset >= s->seg_len) {
            offset -= s->seg_len;
            continue;
        }
        size_t take = s->seg_len - offset;
        if (take > len) {
            take = len;
        }
        spans[n].addr = (const uint8_t *) s->seg_addr.pval + offset;
        spans[n].len = take;
        ++n;
        len -= take;
        offset = 0;
    }
    return n;
}

unsigned opal_btl_usnic_frag_ahead_spans(const opal_btl_usnic_send_frag_t *frag, size_t offset, size_t len,
                                         opal_btl_usnic_data_span_t *spans, unsigned max)
{
    if (0 == len || len > OPAL_BTL_USNIC_PREFETCH_MAX_PAYLOAD) {
        return 0;
    }
    return opal_btl_usnic_frag_spans(frag, offset + 2 * len, len, spans, max); /* the datagram after next */
}

void opal_btl_usnic_frag_prefetch_ahead(const opal_btl_usnic_send_frag_t *frag, size_t offset, size_t len)
{
    opal_btl_usnic_data_span_t spans[OPAL_BTL_USNIC_FRAG_SEGMENTS];
    unsigned n = opal_btl_usnic_frag_ahead_spans(frag, offset, len, spans, OPAL_BTL_USNIC_FRAG_SEGMENTS);
    for (unsigned i = 0; i < n; ++i) {
        uintptr_t line = (uintptr_t) spans[i].addr & ~(uintptr_t) 63;
        uintptr_t end = (uintptr_t) spans[i].addr + spans[i].len;
        for (; line < end; line += 64) {
            __builtin_prefetch((const void *) line, 0, 2); /* to L2: many lines in flight */
        }
    }
}

bool opal_btl_usnic_seg_release_if_done(opal_btl_usnic_frag_pool_t *pool, opal_btl_usnic_send_seg_t *seg)
{
    if (!opal_btl_usnic_seg_is_free_to_recycle(seg)) {
        return false;
    }
    switch (seg->kind) {
    case OPAL_BTL_USNIC_SEG_CHUNK:
        opal_free_list_return(&pool->chunk_segs, &seg->super);
        return true;
    case OPAL_BTL_USNIC_SEG_ACK:
        opal_free_list_return(&pool->ack_segs, &seg->super);
        return true;
    default: {
        /* The embedded segment of a small frag: the frag goes back only when
         * the PML has let go of the descriptor too. */
        opal_btl_usnic_send_frag_t *frag = seg->frag;
        if (frag->owned_by_btl && !frag->callback_pending && !frag->queued) {
            opal_btl_usnic_frag_return(pool, frag);
            return true;
        }
        return false;
    }
    }
}

/* ----- reassembly ----- */

opal_btl_usnic_rx_frag_class_t opal_btl_usnic_rx_frag_classify(const opal_btl_usnic_rx_frag_t *slot,
                                                               uint32_t frag_id, uint32_t frag_size)
{
    if (0 == slot->frag_id) {
        return OPAL_BTL_USNIC_RX_FRAG_NEW;
    }
    if (slot->frag_id != frag_id) {
        return OPAL_BTL_USNIC_RX_FRAG_BUSY;
    }
    return (slot->size == frag_size) ? OPAL_BTL_USNIC_RX_FRAG_CONTINUE : OPAL_BTL_USNIC_RX_FRAG_MISMATCH;
}

int opal_btl_usnic_rx_frag_add(opal_btl_usnic_rx_frag_t *slot, uint32_t frag_id, uint32_t frag_size,
                               uint32_t chunk_size, uint32_t offset, const void *data, uint32_t len,
                               uint8_t tag, opal_btl_usnic_seq_t seq, bool *complete_p)
{
    if (0 == slot->frag_id) {
        uint32_t chunks = (frag_size + chunk_size - 1) / chunk_size;
        slot->buf = (uint8_t *) malloc(frag_size);
        slot->have = (uint8_t *) calloc((chunks + 7) / 8, 1);
        if (NULL == slot->buf || NULL == slot->have) {
            free(slot->buf);
            free(slot->have);
            slot->buf = slot->have = NULL;
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        slot->frag_id = frag_id;
        slot->size = frag_size;
        slot->bytes_left = frag_size;
        slot->chunk_size = chunk_size;
        slot->tag = tag;
        slot->last_seq = seq;
    }
    if (opal_btl_usnic_seq_gt(seq, slot->last_seq)) {
        slot->last_seq = seq;
    }
    uint32_t index = offset / slot->chunk_size;
    slot->have[index / 8] |= (uint8_t) (1u << (index % 8));
    memcpy(slot->buf + offset, data, len);
    slot->bytes_left -= len;
    *complete_p = (0 == slot->bytes_left);
    return OPAL_SUCCESS;
}

void opal_btl_usnic_rx_frag_reset(opal_btl_usnic_rx_frag_t *slot)
{
    free(slot->buf);
    free(slot->have);
    slot->buf = NULL;
    slot->have = NULL;
    slot->frag_id = 0;
    slot->size = 0;
    slot->bytes_left = 0;
}
