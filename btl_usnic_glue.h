/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The engine side of the BTL entry points (btl_usnic_glue.c):
 * btl_usnic_btl.c calls these under its lock, and the unit tests'
 * fixture calls the same, so the tests drive the production glue.
 */
#ifndef OPAL_BTL_USNIC_GLUE_H
#define OPAL_BTL_USNIC_GLUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"

/**
 * A descriptor for |size| bytes the PML will write (btl_alloc): a small
 * fragment if it fits one datagram toward |ep| (the engine's limit if |ep|
 * is NULL), a large one up to max_send_size, else NULL.
 */
opal_btl_usnic_send_frag_t *opal_btl_usnic_frag_alloc(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                                      size_t size, uint32_t flags);

/* The PML lets go of |frag| (btl_free): recycle it now or when nothing
 * refers to it any more. */
void opal_btl_usnic_frag_free(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag);

/* Where a descriptor's data comes from: Open MPI's convertor in
 * btl_usnic_btl.c, a plain buffer in the tests */
typedef struct opal_btl_usnic_source_t {
    /**
     * Take up to *|size_p| bytes of the data: copy them to |dst|, or with
     * |dst| NULL (|contiguous| data only) find where they lie.  Sets
     * *|size_p| to the bytes taken; returns where they are.
     */
    void *(*take)(void *ctx, void *dst, size_t *size_p);
    void *ctx;
    bool contiguous; /* may be referenced where it lies instead of packed */
} opal_btl_usnic_source_t;

/**
 * btl_prepare_src: a descriptor toward |ep| for |reserve| bytes of PML
 * header followed by up to *|size_p| bytes of |src| (at most the engine's
 * max_send_size in all: the larger of btl_max_send_size and
 * btl_eager_limit, since ob1 hands an eager message whole and cannot take
 * back less; *|size_p| is set to the bytes taken).  A small fragment if
 * it all fits one datagram toward |ep|, else a large one.  Contiguous data is referenced, not
 * copied: the PML keeps it until the send's callback.  NULL when no
 * descriptor is free or |reserve| is larger than a large fragment's
 * header space.
 */
opal_btl_usnic_send_frag_t *opal_btl_usnic_btl_prepare_src(opal_btl_usnic_engine_t *eng,
                                                           opal_btl_usnic_endpoint_t *ep,
                                                           const opal_btl_usnic_source_t *src, size_t reserve,
                                                           size_t *size_p, uint32_t flags);

/**
 * btl_send at engine time |now|: hand |frag| to the engine
 * (opal_btl_usnic_frag_submit: tiny ones leave at once) and, if it was
 * queued, post its first datagrams before returning
 * (opal_btl_usnic_engine_send_now).  Returns frag_submit's result: 1 done
 * without callback, 0 callback to come, OPAL_ERR_UNREACH.
 */
int opal_btl_usnic_btl_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                            opal_btl_usnic_send_frag_t *frag, uint8_t tag, uint64_t now);

/**
 * btl_sendi at engine time |now|: |header_size| bytes at |header| then
 * |payload_size| bytes of |src| in one small fragment the BTL owns, sent
 * at once (queued only for want of a send credit), with no callback.
 * OPAL_SUCCESS; OPAL_ERR_RESOURCE_BUSY if it does not fit one datagram
 * toward |ep|, |ep| failed, or |ep| cannot take it now (its window is
 * full or fragments wait before it): the PML then sends it through a
 * request that completes when its fragment leaves (btl_send), so a
 * sender ahead of its receiver waits instead of piling up messages in
 * our buffers; OPAL_ERR_OUT_OF_RESOURCE when no fragment is free.  On
 * OPAL_ERR_RESOURCE_BUSY toward a live peer, *|instead| (if not NULL)
 * is a descriptor of header_size + payload_size bytes with |flags|
 * (btl_alloc's), for the caller to fill and btl_send, or NULL.
 */
int opal_btl_usnic_btl_sendi(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, const void *header,
                             size_t header_size, const opal_btl_usnic_source_t *src, size_t payload_size,
                             uint8_t tag, uint32_t flags, opal_btl_usnic_send_frag_t **instead, uint64_t now);

#endif /* OPAL_BTL_USNIC_GLUE_H */
