/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * libfabric, loaded when the ofi wire first needs it.  The component is
 * not linked against libfabric: loading it costs ~0.2 s per process
 * (constructors of the libraries it links, PSM among them) and
 * fi_getinfo ~0.1 s more, which a job on the socket wire should not pay.
 * Only the handful of functions libfabric exports are looked up here;
 * everything else in its API (fi_domain, fi_send, fi_cq_read, ...) is an
 * inline call through the objects these return.  Private to the ofi wire
 * (btl_usnic_wire_ofi.c, btl_usnic_ext.c).
 */
#ifndef OPAL_BTL_USNIC_OFI_LIB_H
#define OPAL_BTL_USNIC_OFI_LIB_H

#include <stddef.h>

#include <rdma/fabric.h>

/* libfabric 2.x deprecates the FI_LOCAL_MR mode bit (using it warns, and
 * -Werror fails); FI_MR_LOCAL in mr_mode says the same in both. */
#if FI_MAJOR_VERSION >= 2
#    define OPAL_BTL_USNIC_FI_MODE_LOCAL_MR 0ULL
#else
#    define OPAL_BTL_USNIC_FI_MODE_LOCAL_MR FI_LOCAL_MR
#endif

/* The shared object asked for: the soname both 1.x and 2.x keep */
#define OPAL_BTL_USNIC_OFI_LIB_NAME "libfabric.so.1"

typedef struct opal_btl_usnic_ofi_lib_t {
    __typeof__(fi_getinfo) *getinfo;
    __typeof__(fi_freeinfo) *freeinfo;
    __typeof__(fi_dupinfo) *dupinfo;
    __typeof__(fi_fabric) *fabric;
    __typeof__(fi_strerror) *strerror;
} opal_btl_usnic_ofi_lib_t;

/**
 * libfabric's entry points, loading the library on the first call (it
 * then stays loaded: its providers keep threads and handlers that a
 * dlclose would pull from under them).  NULL if it cannot be loaded, with
 * |why| saying why (dlerror's text); a later call tries again.
 */
const opal_btl_usnic_ofi_lib_t *opal_btl_usnic_ofi_lib(char *why, size_t len);

/* Has this process loaded libfabric through us (for messages and tests)? */
int opal_btl_usnic_ofi_lib_loaded(void);

#endif /* OPAL_BTL_USNIC_OFI_LIB_H */
