/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The engine side of the BTL entry points (btl_usnic_glue.c):
 * btl_usnic_btl.c calls these under its lock, and the unit tests'
 * fixture calls the same, so the tests drive the production glue.
 */
#ifndef OPAL_BTL_USNIC_GLUE_H
#define OPAL_BTL_USNIC_GLUE_H

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

#endif /* OPAL_BTL_USNIC_GLUE_H */
