/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * libfabric loaded on first use (btl_usnic_ofi_lib.h says why).
 */
#include <dlfcn.h>
#include <stdio.h>

#include "btl_usnic_ofi_lib.h"

static opal_btl_usnic_ofi_lib_t ofi_lib;
static int ofi_lib_ready;

/* dlsym into a typed function pointer: ISO C forbids the direct cast
 * between object and function pointers, a memcpy of the value does not */
static int lookup(void *handle, const char *name, void *fn_slot, size_t slot_size, char *why, size_t len)
{
    void *sym = dlsym(handle, name);
    if (NULL == sym) {
        snprintf(why, len, "%s has no %s", OPAL_BTL_USNIC_OFI_LIB_NAME, name);
        return -1;
    }
    __builtin_memcpy(fn_slot, &sym, slot_size);
    return 0;
}

#define LOOKUP(handle, field, name, why, len) lookup(handle, name, &ofi_lib.field, sizeof(ofi_lib.field), why, len)

const opal_btl_usnic_ofi_lib_t *opal_btl_usnic_ofi_lib(char *why, size_t len)
{
    if (ofi_lib_ready) {
        return &ofi_lib;
    }
    /* RTLD_GLOBAL: providers libfabric itself loads (FI_PROVIDER_PATH)
     * resolve libfabric's symbols from the global scope */
    void *handle = dlopen(OPAL_BTL_USNIC_OFI_LIB_NAME, RTLD_NOW | RTLD_GLOBAL);
    if (NULL == handle) {
        const char *err = dlerror();
        snprintf(why, len, "%s", NULL != err ? err : "dlopen failed");
        return NULL;
    }
    if (0 != LOOKUP(handle, getinfo, "fi_getinfo", why, len) || 0 != LOOKUP(handle, freeinfo, "fi_freeinfo", why, len) ||
        0 != LOOKUP(handle, dupinfo, "fi_dupinfo", why, len) || 0 != LOOKUP(handle, fabric, "fi_fabric", why, len) ||
        0 != LOOKUP(handle, strerror, "fi_strerror", why, len)) {
        dlclose(handle);
        return NULL;
    }
    ofi_lib_ready = 1;
    return &ofi_lib;
}

int opal_btl_usnic_ofi_lib_loaded(void)
{
    return ofi_lib_ready;
}
