/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * GHASH (NIST SP 800-38D, 6.4) over associated data only, with the
 * widest carry-less multiply the CPU has: four blocks per 512-bit
 * register (VPCLMULQDQ, AVX-512), one reduction per 32 blocks.  The AES-GCM
 * tags of btl_usnic_auth.c use it where opal_btl_usnic_ghash_available;
 * elsewhere they keep OpenSSL's 128-bit GHASH or libsodium.  Design notes
 * in btl_usnic_ghash.c.
 */
#ifndef OPAL_BTL_USNIC_GHASH_H
#define OPAL_BTL_USNIC_GHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPAL_BTL_USNIC_GHASH_POWERS 32

/* The hash key's powers H^32 .. H^1, byte-reflected */
typedef struct opal_btl_usnic_ghash_key_t {
    uint64_t pow[OPAL_BTL_USNIC_GHASH_POWERS][2] __attribute__((aligned(64)));
} opal_btl_usnic_ghash_key_t;

/* A hash in progress: the running value and the bytes of a block not yet
 * complete (associated data given in pieces) */
typedef struct opal_btl_usnic_ghash_t {
    uint64_t x[2] __attribute__((aligned(16)));
    uint8_t pending[16];
    unsigned npending;
    uint64_t total;
} opal_btl_usnic_ghash_t;

/* Whether this CPU (and its operating system) runs the 512-bit code */
bool opal_btl_usnic_ghash_available(void);

/* The powers of |h| = AES_K(0^128), the hash key.  Only where available. */
void opal_btl_usnic_ghash_key(opal_btl_usnic_ghash_key_t *k, const uint8_t h[16]);

void opal_btl_usnic_ghash_init(opal_btl_usnic_ghash_t *g);

/* |n| more bytes of associated data */
void opal_btl_usnic_ghash_update(opal_btl_usnic_ghash_t *g, const opal_btl_usnic_ghash_key_t *k, const uint8_t *p,
                                 size_t n);

/* GHASH_H(A || 0-pad || len(A) || len(C) = 0), as bytes */
void opal_btl_usnic_ghash_final(opal_btl_usnic_ghash_t *g, const opal_btl_usnic_ghash_key_t *k, uint8_t out[16]);

#endif
