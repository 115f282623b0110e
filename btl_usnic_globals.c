/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The component's parameters and state (btl_usnic.h says why apart from
 * the MCA component structure).  Data only: this object calls nothing,
 * so every file may read it without a circle of calls.
 */
#include "btl_usnic.h"

opal_btl_usnic_component_t opal_btl_usnic_globals;
