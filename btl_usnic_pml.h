/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The PML side of the engine's upcalls (btl_usnic_pml.c): part of the
 * module, not of the engine.
 */
#ifndef OPAL_BTL_USNIC_PML_H
#define OPAL_BTL_USNIC_PML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opal/mca/btl/btl.h"

#include "btl_usnic_engine_core.h"

/**
 * Hand a complete fragment to the PML through Open MPI's table of receive
 * callbacks.  A tag outside the table, or one nobody registered, is
 * dropped and counted (num_drop_bad_tag); returns whether it was handed.
 */
bool opal_btl_usnic_pml_deliver(opal_btl_usnic_engine_t *eng, mca_btl_base_module_t *btl,
                                struct mca_btl_base_endpoint_t *ep, uint8_t tag, void *data, size_t len);

#endif /* OPAL_BTL_USNIC_PML_H */
