/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The registration table of a PUT target: regions with random keys, and
 * tombstones that keep a deregistered region's key (see "Safety" in
 * btl_usnic_put.c).
 */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_auth.h"
#include "btl_usnic_reg.h"

void opal_btl_usnic_reg_table_init(opal_btl_usnic_reg_table_t *t, uint32_t max_slots)
{
    memset(t, 0, sizeof(*t));
    t->max_slots = max_slots;
}

void opal_btl_usnic_reg_table_fini(opal_btl_usnic_reg_table_t *t)
{
    free(t->slots);
    free(t->dead);
    memset(t, 0, sizeof(*t));
}

/* An unguessable key from the kernel (no fallback: without one the
 * region is not exposed, and the PML uses send/receive) */
static bool new_key(uint64_t *key_p)
{
    return 0 == opal_btl_usnic_random(key_p, sizeof(*key_p));
}

static bool table_grow(opal_btl_usnic_reg_table_t *t)
{
    if (t->nslots >= t->max_slots) {
        return false;
    }
    uint32_t n = (0 == t->nslots) ? 64 : 2 * t->nslots;
    if (n > t->max_slots) {
        n = t->max_slots;
    }
    opal_btl_usnic_region_t *slots = (opal_btl_usnic_region_t *) realloc(t->slots, n * sizeof(*slots));
    if (NULL == slots) {
        return false;
    }
    memset(slots + t->nslots, 0, (n - t->nslots) * sizeof(*slots));
    t->slots = slots;
    /* the dead ring is rebuilt in the new size, oldest first */
    uint32_t *dead = (uint32_t *) malloc(n * sizeof(*dead));
    if (NULL == dead) {
        return false;
    }
    for (uint32_t i = 0; i < t->dead_count; ++i) {
        dead[i] = t->dead[(t->dead_head + i) % t->nslots];
    }
    free(t->dead);
    t->dead = dead;
    t->dead_head = 0;
    t->nslots = n;
    return true;
}

/* A slot for a new region: never used ones first, then the oldest tombstone */
static bool slot_take(opal_btl_usnic_reg_table_t *t, uint32_t *id)
{
    if (t->nused < t->nslots || table_grow(t)) {
        *id = t->nused++;
        return true;
    }
    if (0 == t->dead_count) {
        return false;
    }
    *id = t->dead[t->dead_head];
    t->dead_head = (t->dead_head + 1) % t->nslots;
    --t->dead_count;
    return true;
}

bool opal_btl_usnic_reg_add(opal_btl_usnic_reg_table_t *t, void *base, size_t size, uint64_t peer_id,
                            opal_btl_usnic_reg_handle_t *handle)
{
    uint32_t id;
    uint64_t key;
    if (!new_key(&key) || !slot_take(t, &id)) {
        return false;
    }
    opal_btl_usnic_region_t *r = &t->slots[id];
    r->base = (uint8_t *) base;
    r->size = size;
    r->peer_id = peer_id;
    r->key = key;
    r->state = OPAL_BTL_USNIC_REGION_LIVE;
    ++t->nlive;
    handle->region_id = id;
    handle->reserved = 0;
    handle->key = r->key;
    return true;
}

void opal_btl_usnic_reg_remove(opal_btl_usnic_reg_table_t *t, const opal_btl_usnic_reg_handle_t *handle)
{
    uint32_t id = handle->region_id;
    if (id >= t->nused || OPAL_BTL_USNIC_REGION_LIVE != t->slots[id].state || t->slots[id].key != handle->key) {
        return;
    }
    t->slots[id].state = OPAL_BTL_USNIC_REGION_DEAD;
    t->dead[(t->dead_head + t->dead_count) % t->nslots] = id;
    ++t->dead_count;
    --t->nlive;
}

opal_btl_usnic_put_verdict_t opal_btl_usnic_reg_check(const opal_btl_usnic_reg_table_t *t, uint32_t region_id,
                                                      uint64_t key, uint64_t peer_id, uint64_t addr, size_t len)
{
    if (region_id >= t->nused) {
        return OPAL_BTL_USNIC_PUT_REJECT;
    }
    const opal_btl_usnic_region_t *r = &t->slots[region_id];
    if (r->key != key || (OPAL_BTL_USNIC_ANY_PEER != r->peer_id && r->peer_id != peer_id)) {
        return OPAL_BTL_USNIC_PUT_REJECT;
    }
    if (OPAL_BTL_USNIC_REGION_DEAD == r->state) {
        return OPAL_BTL_USNIC_PUT_DEAD;
    }
    uint64_t start = (uint64_t) (uintptr_t) r->base;
    /* overflow-safe form of start <= addr && addr + len <= start + size */
    if (OPAL_BTL_USNIC_REGION_LIVE != r->state || addr < start || addr - start > r->size ||
        len > r->size - (addr - start)) {
        return OPAL_BTL_USNIC_PUT_REJECT;
    }
    return OPAL_BTL_USNIC_PUT_WRITE;
}
