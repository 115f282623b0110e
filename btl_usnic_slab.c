/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Buffer slabs registered once each (see btl_usnic_slab.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "btl_usnic_slab.h"

#define SLAB_ALIGN 64

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) & ~(to - 1);
}

void opal_btl_usnic_slab_set_init(opal_btl_usnic_slab_set_t *set, const opal_btl_usnic_mem_ops_t *ops,
                                  size_t slab_bytes)
{
    memset(set, 0, sizeof(*set));
    set->ops = ops;
    set->slab_bytes = round_up(slab_bytes < OPAL_BTL_USNIC_SLAB_MIN_BYTES ? OPAL_BTL_USNIC_SLAB_MIN_BYTES
                                                                          : slab_bytes,
                               SLAB_ALIGN);
}

static bool slab_array_grow(opal_btl_usnic_slab_set_t *set)
{
    if (set->num_slabs < set->max_slabs) {
        return true;
    }
    int max = (0 == set->max_slabs) ? 8 : 2 * set->max_slabs;
    opal_btl_usnic_slab_t *slabs = (opal_btl_usnic_slab_t *) realloc(set->slabs, (size_t) max * sizeof(*slabs));
    if (NULL == slabs) {
        return false;
    }
    set->slabs = slabs;
    set->max_slabs = max;
    return true;
}

/* Zeroed memory straight from the kernel: its pages are zero already and
 * are faulted in only as buffers are handed out, where a memset would
 * touch the whole slab at start-up (4 MiB: ~3 ms per pool and module) */
static void *slab_memory(size_t len)
{
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return MAP_FAILED == base ? NULL : base;
}

/* A new slab of |len| bytes, registered if the set has mem ops */
static opal_btl_usnic_slab_t *slab_new(opal_btl_usnic_slab_set_t *set, size_t len)
{
    void *base = NULL;
    if (!slab_array_grow(set) || NULL == (base = slab_memory(len))) {
        set->last_error = -ENOMEM;
        return NULL;
    }
    opal_btl_usnic_slab_t slab = {.base = (uint8_t *) base, .len = len};
    if (NULL != set->ops) {
        int rc = set->ops->reg(set->ops->ctx, base, len, &slab.handle, &slab.desc);
        if (0 != rc) {
            set->last_error = rc;
            munmap(base, len);
            return NULL;
        }
        ++set->registrations;
    }
    set->slabs[set->num_slabs] = slab;
    return &set->slabs[set->num_slabs++];
}

/* The slab new buffers come from: the newest ordinary one, if it has room */
static opal_btl_usnic_slab_t *current_slab(opal_btl_usnic_slab_set_t *set, size_t size)
{
    for (int i = set->num_slabs - 1; i >= 0; --i) {
        opal_btl_usnic_slab_t *s = &set->slabs[i];
        if (s->len == set->slab_bytes) {
            return (s->len - s->used >= size) ? s : NULL;
        }
    }
    return NULL;
}

void *opal_btl_usnic_slab_alloc(opal_btl_usnic_slab_set_t *set, size_t size, void **desc_p)
{
    size = round_up(size > 0 ? size : 1, SLAB_ALIGN);
    opal_btl_usnic_slab_t *s;
    if (size > set->slab_bytes) {
        s = slab_new(set, size); /* a slab of its own, used up at once */
    } else if (NULL == (s = current_slab(set, size))) {
        s = slab_new(set, set->slab_bytes);
    }
    if (NULL == s) {
        return NULL;
    }
    uint8_t *buf = s->base + s->used;
    s->used += size;
    *desc_p = s->desc;
    return buf;
}

bool opal_btl_usnic_slab_lookup(const opal_btl_usnic_slab_set_t *set, const void *ptr, size_t len,
                                void **desc_p)
{
    uintptr_t p = (uintptr_t) ptr;
    for (int i = 0; i < set->num_slabs; ++i) {
        const opal_btl_usnic_slab_t *s = &set->slabs[i];
        uintptr_t base = (uintptr_t) s->base;
        if (p >= base && p - base <= s->len && len <= s->len - (p - base)) {
            *desc_p = s->desc;
            return true;
        }
    }
    return false;
}

void opal_btl_usnic_slab_set_fini(opal_btl_usnic_slab_set_t *set)
{
    for (int i = 0; i < set->num_slabs; ++i) {
        if (NULL != set->ops && NULL != set->slabs[i].handle) {
            set->ops->unreg(set->ops->ctx, set->slabs[i].handle);
        }
        munmap(set->slabs[i].base, set->slabs[i].len);
    }
    free(set->slabs);
    set->slabs = NULL;
    set->num_slabs = 0;
    set->max_slabs = 0;
}
