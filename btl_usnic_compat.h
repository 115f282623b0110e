/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * What differs between the Open MPI series this component builds against
 * (4.1.x: BTL API 3.1.0, OPAL's PMIx layer; 5.0.x: BTL API 3.3.0, PMIx
 * called directly); libfabric 1.x vs 2.x is the ofi wire's affair
 * (btl_usnic_ofi_lib.h).  Only version tests and thin adapters live
 * here; every other file is written once for both.
 */
#ifndef OPAL_BTL_USNIC_COMPAT_H
#define OPAL_BTL_USNIC_COMPAT_H

#include "opal_config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "opal/mca/btl/btl.h"

#if OPAL_MAJOR_VERSION >= 5
#    include "opal/mca/pmix/pmix-internal.h"
#    include "opal/mca/threads/mutex.h"
#    include "opal/util/event.h"
#else
#    include "opal/mca/event/event.h"
#    include "opal/mca/pmix/pmix.h"
#    include "opal/threads/mutex.h"
#endif

/* 5.0 dropped the macro; components export their symbol themselves */
#ifndef OPAL_MODULE_DECLSPEC
#    define OPAL_MODULE_DECLSPEC __attribute__((visibility("default")))
#endif

/* PMIx scopes, keys and value types under the names each series uses */
#if OPAL_MAJOR_VERSION >= 5
#    define OPAL_BTL_USNIC_PMIX_GLOBAL PMIX_GLOBAL
#    define OPAL_BTL_USNIC_PMIX_JOB_SIZE PMIX_JOB_SIZE
#    define OPAL_BTL_USNIC_PMIX_LOCAL_PEERS PMIX_LOCAL_PEERS
#    define OPAL_BTL_USNIC_PMIX_LOCAL_RANK PMIX_LOCAL_RANK
#    define OPAL_BTL_USNIC_PMIX_UINT32 PMIX_UINT32
#    define OPAL_BTL_USNIC_PMIX_UINT16 PMIX_UINT16
#    define OPAL_BTL_USNIC_PMIX_STRING PMIX_STRING
#else
#    define OPAL_BTL_USNIC_PMIX_GLOBAL OPAL_PMIX_GLOBAL
#    define OPAL_BTL_USNIC_PMIX_JOB_SIZE OPAL_PMIX_JOB_SIZE
#    define OPAL_BTL_USNIC_PMIX_LOCAL_PEERS OPAL_PMIX_LOCAL_PEERS
#    define OPAL_BTL_USNIC_PMIX_LOCAL_RANK OPAL_PMIX_LOCAL_RANK
#    define OPAL_BTL_USNIC_PMIX_UINT32 OPAL_UINT32
#    define OPAL_BTL_USNIC_PMIX_UINT16 OPAL_UINT16
#    define OPAL_BTL_USNIC_PMIX_STRING OPAL_STRING
#endif

/* A blob another process put under |key| (OPAL_MODEX_SEND stores blobs
 * as a byte object in both series, but 4.1 hands it back wrapped).
 * |*data| is malloc'ed; OPAL_SUCCESS or an error. */
static inline int opal_btl_usnic_modex_get_bytes(const opal_process_name_t *name, const char *key, bool optional,
                                                 void **data, size_t *size)
{
    int rc;
    *data = NULL;
    *size = 0;
#if OPAL_MAJOR_VERSION >= 5
    uint8_t *bytes = NULL;
    if (optional) {
        OPAL_MODEX_RECV_STRING_OPTIONAL(rc, key, name, &bytes, size);
    } else {
        OPAL_MODEX_RECV_STRING(rc, key, name, &bytes, size);
    }
    *data = bytes;
#else
    opal_byte_object_t *bo = NULL;
    if (optional) {
        OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, key, name, (void **) &bo, OPAL_BYTE_OBJECT);
    } else {
        OPAL_MODEX_RECV_VALUE(rc, key, name, (void **) &bo, OPAL_BYTE_OBJECT);
    }
    if (NULL != bo) {
        *data = bo->bytes;
        *size = (size_t) bo->size;
        free(bo);
    }
#endif
    if (OPAL_SUCCESS != rc) {
        free(*data);
        *data = NULL;
        *size = 0;
    }
    return OPAL_SUCCESS == rc ? OPAL_SUCCESS : OPAL_ERR_NOT_FOUND;
}

/* Our modex blob of process |name| if the runtime holds it already:
 * never waits for it (a name that no process has, as a forged datagram
 * may claim, gets OPAL_ERR_NOT_FOUND at once).  |*data| is malloc'ed. */
static inline int opal_btl_usnic_modex_recv_immediate(const mca_base_component_t *component,
                                                      const opal_process_name_t *name, void **data, size_t *size)
{
    int rc;
    *data = NULL;
    *size = 0;
#if OPAL_MAJOR_VERSION >= 5
    uint8_t *bytes = NULL;
    OPAL_MODEX_RECV_IMMEDIATE(rc, component, name, (void **) &bytes, size);
    *data = bytes;
#else
    opal_byte_object_t *bo = NULL;
    char *key = mca_base_component_to_string(component);
    if (NULL == key) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    OPAL_MODEX_RECV_VALUE_IMMEDIATE(rc, key, name, (void **) &bo, OPAL_BYTE_OBJECT);
    free(key);
    if (NULL != bo) {
        *data = bo->bytes;
        *size = (size_t) bo->size;
        free(bo);
    }
#endif
    if (OPAL_SUCCESS != rc) {
        free(*data);
        *data = NULL;
        *size = 0;
    }
    return OPAL_SUCCESS == rc ? OPAL_SUCCESS : OPAL_ERR_NOT_FOUND;
}

/* Publish |value| under |key| to the processes of this host */
static inline int opal_btl_usnic_modex_put_local_string(const char *key, char *value)
{
    int rc;
#if OPAL_MAJOR_VERSION >= 5
    /* not OPAL_MODEX_SEND_VALUE: it never frees the copy PMIX_VALUE_LOAD
     * makes (PMIx_Put copies again) */
    pmix_value_t kv;
    PMIX_VALUE_LOAD(&kv, value, PMIX_STRING);
    rc = PMIx_Put(PMIX_LOCAL, key, &kv);
    PMIX_VALUE_DESTRUCT(&kv);
#else
    OPAL_MODEX_SEND_VALUE(rc, OPAL_PMIX_LOCAL, (char *) key, value, OPAL_STRING);
#endif
    return OPAL_SUCCESS == rc ? OPAL_SUCCESS : OPAL_ERROR;
}

/* Ask the runtime to end the job (the connectivity checker's verdict) */
static inline void opal_btl_usnic_abort_job(int status, const char *why)
{
#if OPAL_MAJOR_VERSION >= 5
    (void) PMIx_Abort(status, why, NULL, 0);
#else
    if (NULL != opal_pmix.abort) {
        opal_pmix.abort(status, why, NULL);
    }
#endif
}

/* Have the runtime remove directory |dir| if this process dies first */
static inline bool opal_btl_usnic_register_cleanup_dir(char *dir)
{
#if OPAL_MAJOR_VERSION >= 5
    return OPAL_SUCCESS == opal_pmix_register_cleanup(dir, true, false, false);
#else
    return NULL != opal_pmix.register_cleanup && OPAL_SUCCESS == opal_pmix.register_cleanup(dir, true, false, false);
#endif
}

/* Hand one received message to the callback the PML registered for
 * |tag| (the callback's signature changed with BTL API 3.3.0). */
static inline void opal_btl_usnic_call_recv_cb(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                                               const mca_btl_active_message_callback_t *reg, uint8_t tag,
                                               mca_btl_base_segment_t *segment)
{
#if BTL_VERSION >= 330
    const mca_btl_base_receive_descriptor_t desc = {
        .endpoint = ep,
        .des_segments = segment,
        .des_segment_count = 1,
        .tag = tag,
        .cbdata = reg->cbdata,
    };
    reg->cbfunc(btl, &desc);
#else
    (void) ep;
    mca_btl_base_descriptor_t desc;
    memset(&desc, 0, sizeof(desc));
    desc.des_segments = segment;
    desc.des_segment_count = 1;
    reg->cbfunc(btl, tag, &desc, reg->cbdata);
#endif
}

/* BTL API 3.3.0 lets a BTL say its PUT completes at the target only when
 * the data is there (ours does: the completion waits for the ACK). */
#ifdef MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION
#    define OPAL_BTL_USNIC_FLAGS_REMOTE_COMPLETION MCA_BTL_FLAGS_RDMA_REMOTE_COMPLETION
#else
#    define OPAL_BTL_USNIC_FLAGS_REMOTE_COMPLETION 0
#endif

#endif /* OPAL_BTL_USNIC_COMPAT_H */
