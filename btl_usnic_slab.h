/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Buffer slabs: every buffer the engine hands to the wire (send, ACK and
 * copy segments) is carved from a few large slabs, so that a provider that
 * needs registered memory (FI_MR_LOCAL: usnic, verbs UD, EFA) pays one
 * registration per slab at setup and none per message.  The slab knows
 * its registration's descriptor; each buffer carries it to every post.
 *
 * Registration is the wire's business (the engine never calls libfabric):
 * the owner passes register/unregister functions, or none when the
 * provider needs no registration (then slabs are plain memory and every
 * descriptor is NULL).  Buffers are never freed one by one: they live as
 * long as the free-list items that hold them, and the slabs go at fini.
 */
#ifndef OPAL_BTL_USNIC_SLAB_H
#define OPAL_BTL_USNIC_SLAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct opal_btl_usnic_mem_ops_t {
    /* Register |len| bytes at |base|.  On success returns 0 and sets
     * |*handle_p| (what unreg takes) and |*desc_p| (what every post of a
     * buffer inside it passes); else a negative errno-style code. */
    int (*reg)(void *ctx, void *base, size_t len, void **handle_p, void **desc_p);
    void (*unreg)(void *ctx, void *handle);
    void *ctx;
} opal_btl_usnic_mem_ops_t;

typedef struct opal_btl_usnic_slab_t {
    uint8_t *base;
    size_t len;
    size_t used;   /* bytes carved so far */
    void *handle;  /* registration, NULL without mem ops */
    void *desc;
} opal_btl_usnic_slab_t;

typedef struct opal_btl_usnic_slab_set_t {
    const opal_btl_usnic_mem_ops_t *ops; /* NULL: nothing to register */
    size_t slab_bytes;                   /* size of an ordinary slab */
    opal_btl_usnic_slab_t *slabs;
    int num_slabs;
    int max_slabs;
    uint64_t registrations;              /* reg calls that succeeded (statistics, tests) */
    int last_error;                      /* reg's code of the last failure, 0 if none */
} opal_btl_usnic_slab_set_t;

/* Slabs are at least this big: one registration per 256 KiB at most */
#define OPAL_BTL_USNIC_SLAB_MIN_BYTES (256u * 1024u)

/* Start an empty set; |ops| may be NULL.  Allocates nothing yet. */
void opal_btl_usnic_slab_set_init(opal_btl_usnic_slab_set_t *set, const opal_btl_usnic_mem_ops_t *ops,
                                  size_t slab_bytes);

/**
 * A zeroed, 64-byte aligned buffer of |size| bytes inside a registered
 * slab, and its descriptor in |*desc_p|.  A request larger than an
 * ordinary slab gets a slab of its own.  Returns NULL if memory or the
 * registration failed (set->last_error says which).
 */
void *opal_btl_usnic_slab_alloc(opal_btl_usnic_slab_set_t *set, size_t size, void **desc_p);

/**
 * Descriptor of the slab holding all of [|ptr|, |ptr| + |len|); false if
 * no slab holds all of it (then nothing may be posted from there without
 * registering it first).
 */
bool opal_btl_usnic_slab_lookup(const opal_btl_usnic_slab_set_t *set, const void *ptr, size_t len,
                                void **desc_p);

/* Unregister and free every slab (after the wire stopped using them);
 * safe twice and on a set that was never used. */
void opal_btl_usnic_slab_set_fini(opal_btl_usnic_slab_set_t *set);

#endif
