/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * GHASH (NIST SP 800-38D, 6.4) over associated data only, with the
 * widest carry-less multiply the CPU has: four blocks per 512-bit
 * register (VPCLMULQDQ, AVX-512), one reduction per 64 blocks.  The AES-GCM
 * tags of btl_usnic_auth.c use it where opal_btl_usnic_ghash_available;
 * elsewhere they keep OpenSSL's 128-bit GHASH or libsodium.  Design notes
 * in btl_usnic_ghash.c.
 */
#ifndef OPAL_BTL_USNIC_GHASH_H
#define OPAL_BTL_USNIC_GHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPAL_BTL_USNIC_GHASH_POWERS 64

/* The hash key's powers H^64 .. H^1, byte-reflected */
typedef struct opal_btl_usnic_ghash_key_t {
    uint64_t pow[OPAL_BTL_USNIC_GHASH_POWERS][2] __attribute__((aligned(64)));
} opal_btl_usnic_ghash_key_t;

/* Whether this CPU (and its operating system) runs the 512-bit code */
bool opal_btl_usnic_ghash_available(void);

/* The powers of |h| = AES_K(0^128), the hash key.  Only where available. */
void opal_btl_usnic_ghash_key(opal_btl_usnic_ghash_key_t *k, const uint8_t h[16]);

/* GHASH_H(a || b || 0-pad || len(a || b) || len(C) = 0), as bytes: the
 * associated data in two parts (a header and a payload that lies
 * elsewhere; either may be empty and NULL) */
void opal_btl_usnic_ghash(const opal_btl_usnic_ghash_key_t *k, const uint8_t *a, size_t alen, const uint8_t *b,
                          size_t blen, uint8_t out[16]);

/* The same of at most OPAL_BTL_USNIC_GHASH_SMALL bytes in one part: its
 * blocks times their powers of H with 128-bit multiplies and one
 * reduction (headers, ACKs and small messages: their latency path) */
#define OPAL_BTL_USNIC_GHASH_SMALL 128
void opal_btl_usnic_ghash_small(const opal_btl_usnic_ghash_key_t *k, const uint8_t *a, size_t alen, uint8_t out[16]);

#endif
