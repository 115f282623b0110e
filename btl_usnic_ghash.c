/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * GHASH over associated data with 512-bit carry-less multiplies
 * (btl_usnic_ghash.h).
 *
 * Design notes
 * ------------
 * Why our own.  Every datagram's tag is GHASH over the datagram (nothing
 * is encrypted) masked with one AES block.  Measured on this project's
 * CPUs (bench/mac_speed.c): OpenSSL 3.0's EVP AES-256-GCM, context
 * reused, 16 GB/s at 65000 bytes and 150 ns of set-up per tag (248 ns at
 * 1472 bytes); its low-level CRYPTO_gcm128 (used before this file) the
 * same GHASH (gcm_ghash_avx: 128-bit PCLMULQDQ, 8 blocks per reduction)
 * without the set-up; libsodium 6-7 GB/s.  OpenSSL 3.0 has no AVX-512
 * GHASH for associated data, nor does libsodium or another library of
 * Debian 12.  The CPUs have VPCLMULQDQ: four 64x64 carry-less products
 * per instruction, four times PCLMULQDQ's.
 *
 * How.  The method is the Intel white paper's (Gueron and Kounavis,
 * "Intel Carry-Less Multiplication Instruction and its Usage for
 * Computing the GCM Mode", rev. 2.02, 2014): blocks and H byte-reflected
 * (PSHUFB), the 256-bit schoolbook product, a one-bit left shift that
 * makes the reflected product the field's, and the reduction modulo
 * x^128 + x^7 + x^2 + x + 1 by shifts (its Algorithm 5 / Figure 5).  Its
 * aggregation (section "Aggregated reduction") computes
 * X' = (X ^ B1) H^n ^ B2 H^(n-1) ^ ... ^ Bn H and reduces once: the shift
 * and the reduction are linear, so the products' XOR is reduced like one
 * product.  Here n = 64: the blocks' lanes, four per 512-bit register,
 * multiplied by H^64..H^1 (precomputed with the key: 1 KiB), two
 * registers per step added by three-way XORs, the lanes folded by XOR,
 * one reduction per 1 KiB.  The running value's own product (X H^n) is
 * added in a 128-bit register, so only it waits for the previous group's
 * reduction while the blocks' products overlap it.  Measured
 * (bench/mac_speed.c, 65000 bytes): X folded into the first block and 16
 * blocks per reduction 17.6 GB/s (latency-bound); X apart and 32 blocks
 * 29; 64 blocks, two registers per step and masked loads for a tail of
 * one to three blocks (a sibling version's loop, written in this team
 * the same day) 38.  The number of blocks of a tag is known when it
 * starts, so the groups are cut from the first block and a header and a
 * payload that lies elsewhere meet inside a group without a reduction.
 *
 * Small inputs.  Up to OPAL_BTL_USNIC_GHASH_SMALL bytes (headers, ACKs,
 * small messages: the latency path) the 512-bit set-up, the folds and
 * the group bookkeeping cost more than the products: there every block
 * and the lengths block are multiplied by their powers with 128-bit
 * PCLMULQDQ and reduced once (64 bytes 19 ns a tag against 38).
 *
 * Prefetch.  The tag is usually the first to read a payload, where it
 * lies in the user's buffer, and so from memory; the CPU's prefetcher
 * stops at every 4 KiB page.  The blocks 2 KiB ahead are asked for
 * (GHASH_PREFETCH).
 *
 * Constant time: no branch and no memory address depends on the key or
 * the data, only on lengths, which are public (the datagram's size).
 * Checked equal to OpenSSL's and libsodium's tags in test_ghash.c and
 * test_auth.c (random keys, nonces, lengths 0..65000, split points).
 */
#include "opal_config.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "btl_usnic_ghash.h"

#define T128 __attribute__((target("pclmul,ssse3,sse4.1")))
#define T512 __attribute__((target("pclmul,ssse3,sse4.1,avx512f,avx512bw,vpclmulqdq")))

bool opal_btl_usnic_ghash_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("avx512f")
           && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("vpclmulqdq");
}

T128 static inline __m128i reflect(__m128i v)
{
    return _mm_shuffle_epi8(v, _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
}

/* Add a * b to the unreduced product (lo, mid, hi) */
T128 static inline void mul_add(__m128i a, __m128i b, __m128i *lo, __m128i *mid, __m128i *hi)
{
    *lo = _mm_xor_si128(*lo, _mm_clmulepi64_si128(a, b, 0x00));
    *hi = _mm_xor_si128(*hi, _mm_clmulepi64_si128(a, b, 0x11));
    *mid = _mm_xor_si128(*mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10)));
}

/* The field element of an unreduced reflected product: shifted left by
 * one bit, then reduced modulo the GCM polynomial */
T128 static inline __m128i reduce(__m128i lo, __m128i mid, __m128i hi)
{
    lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
    hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));

    __m128i c_lo = _mm_srli_epi32(lo, 31);
    __m128i c_hi = _mm_srli_epi32(hi, 31);
    __m128i across = _mm_srli_si128(c_lo, 12);
    lo = _mm_or_si128(_mm_slli_epi32(lo, 1), _mm_slli_si128(c_lo, 4));
    hi = _mm_or_si128(_mm_or_si128(_mm_slli_epi32(hi, 1), _mm_slli_si128(c_hi, 4)), across);

    __m128i a = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi32(lo, 31), _mm_slli_epi32(lo, 30)), _mm_slli_epi32(lo, 25));
    __m128i carry = _mm_srli_si128(a, 4);
    lo = _mm_xor_si128(lo, _mm_slli_si128(a, 12));
    __m128i b = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi32(lo, 1), _mm_srli_epi32(lo, 2)), _mm_srli_epi32(lo, 7));
    lo = _mm_xor_si128(lo, _mm_xor_si128(b, carry));
    return _mm_xor_si128(hi, lo);
}

T128 static __m128i gf_mul(__m128i a, __m128i b)
{
    __m128i lo = _mm_setzero_si128(), mid = _mm_setzero_si128(), hi = _mm_setzero_si128();
    mul_add(a, b, &lo, &mid, &hi);
    return reduce(lo, mid, hi);
}

T128 static inline __m128i power(const opal_btl_usnic_ghash_key_t *k, unsigned i)
{
    return _mm_load_si128((const __m128i *) k->pow[i]);
}

T128 void opal_btl_usnic_ghash_key(opal_btl_usnic_ghash_key_t *k, const uint8_t h[16])
{
    __m128i hr = reflect(_mm_loadu_si128((const __m128i *) h));
    __m128i p = hr;
    for (int i = OPAL_BTL_USNIC_GHASH_POWERS - 1; i >= 0; --i) { /* pow[last] = H, the one before H^2, ... */
        _mm_store_si128((__m128i *) k->pow[i], p);
        p = gf_mul(p, hr);
    }
}

T512 static inline __m128i fold4(__m512i v)
{
    __m256i y = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

/* How far ahead of the blocks being hashed their input is asked for.
 * A datagram's payload is usually read here first, from memory: the
 * CPU's own prefetcher stops at each 4 KiB page.  Measured in place on
 * a cold 64 MiB buffer (65000-byte slices): 7.5 GB/s without, 10.5 at
 * 2 KiB (0.5 KiB 8.2, 1 KiB 9.0, 4 and 8 KiB 10.5); the 4 MiB stream
 * 1.17x (issue 28). */
#define GHASH_PREFETCH 2048u

/* Add the products of the |n| (<= OPAL_BTL_USNIC_GHASH_POWERS) blocks at
 * |p| with the powers from pow[first] on (block i times pow[first + i]):
 * eight blocks per step in two 512-bit registers (one three-way XOR adds
 * a product of each), then four, then the last one to three with masked
 * loads (the other lanes zero, and so their products).  Input up to
 * |end| is asked for GHASH_PREFETCH bytes ahead. */
T512 static inline __attribute__((always_inline)) void products(const opal_btl_usnic_ghash_key_t *k, const uint8_t *p,
                                                                size_t n, size_t first, uintptr_t end, __m128i *lo,
                                                                __m128i *mid, __m128i *hi)
{
    const __m512i rev = _mm512_broadcast_i32x4(
        _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    const uint64_t *pw = k->pow[first];
    __m512i l = _mm512_setzero_si512(), m = l, h = l;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uintptr_t ahead = (uintptr_t) p + 16 * i + GHASH_PREFETCH;
        if (ahead < end) {
            _mm_prefetch((const char *) ahead, _MM_HINT_T1);
            _mm_prefetch((const char *) (ahead + 64), _MM_HINT_T1);
        }
        __m512i d0 = _mm512_shuffle_epi8(_mm512_loadu_si512((const void *) (p + 16 * i)), rev);
        __m512i d1 = _mm512_shuffle_epi8(_mm512_loadu_si512((const void *) (p + 16 * i + 64)), rev);
        __m512i h0 = _mm512_loadu_si512((const void *) (pw + 2 * i));
        __m512i h1 = _mm512_loadu_si512((const void *) (pw + 2 * i + 8));
        l = _mm512_ternarylogic_epi64(l, _mm512_clmulepi64_epi128(d0, h0, 0x00), _mm512_clmulepi64_epi128(d1, h1, 0x00),
                                      0x96);
        h = _mm512_ternarylogic_epi64(h, _mm512_clmulepi64_epi128(d0, h0, 0x11), _mm512_clmulepi64_epi128(d1, h1, 0x11),
                                      0x96);
        m = _mm512_ternarylogic_epi64(m, _mm512_clmulepi64_epi128(d0, h0, 0x01), _mm512_clmulepi64_epi128(d0, h0, 0x10),
                                      0x96);
        m = _mm512_ternarylogic_epi64(m, _mm512_clmulepi64_epi128(d1, h1, 0x01), _mm512_clmulepi64_epi128(d1, h1, 0x10),
                                      0x96);
    }
    for (; i < n; i += 4) {
        __mmask8 mask = (n - i >= 4) ? (__mmask8) 0xff : (__mmask8) ((1u << (2 * (n - i))) - 1);
        __m512i d = _mm512_shuffle_epi8(_mm512_maskz_loadu_epi64(mask, p + 16 * i), rev);
        __m512i hp = _mm512_maskz_loadu_epi64(mask, pw + 2 * i);
        l = _mm512_xor_si512(l, _mm512_clmulepi64_epi128(d, hp, 0x00));
        h = _mm512_xor_si512(h, _mm512_clmulepi64_epi128(d, hp, 0x11));
        m = _mm512_ternarylogic_epi64(m, _mm512_clmulepi64_epi128(d, hp, 0x01), _mm512_clmulepi64_epi128(d, hp, 0x10),
                                      0x96);
    }
    *lo = _mm_xor_si128(*lo, fold4(l));
    *mid = _mm_xor_si128(*mid, fold4(m));
    *hi = _mm_xor_si128(*hi, fold4(h));
}

/* GHASH's last block for |len| bytes of associated data, as bytes in
 * memory: len(A) in bits, big-endian, then len(C) = 0 */
T128 static inline __m128i lengths_block(size_t len)
{
    return _mm_set_epi64x(0, (long long) __builtin_bswap64((uint64_t) len * 8));
}

/* A GHASH in progress: the running value, the unreduced products of the
 * current group of blocks, the group's size (its first block takes
 * H^size) and how many of its blocks were added */
typedef struct ghash_run_t {
    __m128i x, lo, mid, hi;
    size_t left;   /* blocks not yet in a group, the current one included */
    size_t size;   /* of the current group */
    size_t done;   /* blocks of it added */
} ghash_run_t;

T128 static inline void group_start(ghash_run_t *r)
{
    r->size = (r->left < OPAL_BTL_USNIC_GHASH_POWERS) ? r->left : OPAL_BTL_USNIC_GHASH_POWERS;
    r->done = 0;
    r->lo = r->mid = r->hi = _mm_setzero_si128();
}

/* The group is complete: X' = X H^size ^ (its blocks' products), reduced
 * once.  Only X's own product waits for the previous group's reduction:
 * the blocks' products overlap it. */
T128 static inline void group_end(const opal_btl_usnic_ghash_key_t *k, ghash_run_t *r)
{
    mul_add(r->x, power(k, (unsigned) (OPAL_BTL_USNIC_GHASH_POWERS - r->size)), &r->lo, &r->mid, &r->hi);
    r->x = reduce(r->lo, r->mid, r->hi);
    r->left -= r->size;
    group_start(r);
}

/* Add |n| whole blocks at |p|, in order, to the groups */
T512 static void run_blocks(const opal_btl_usnic_ghash_key_t *k, ghash_run_t *r, const uint8_t *p, size_t n)
{
    const uintptr_t end = (uintptr_t) p + 16 * n;
    while (0 != n) {
        size_t take = r->size - r->done;
        if (take > n) {
            take = n;
        }
        products(k, p, take, OPAL_BTL_USNIC_GHASH_POWERS - r->size + r->done, end, &r->lo, &r->mid, &r->hi);
        r->done += take;
        p += 16 * take;
        n -= take;
        if (r->done == r->size) {
            group_end(k, r);
        }
    }
}

/* GHASH over a || b as associated data: its whole blocks where they lie
 * (the block across the two parts and the last, partial, one copied),
 * then the lengths block; the number of blocks is known from the start,
 * so every group of 32 is reduced once, wherever the parts meet */
T512 void opal_btl_usnic_ghash(const opal_btl_usnic_ghash_key_t *k, const uint8_t *a, size_t alen, const uint8_t *b,
                               size_t blen, uint8_t out[16])
{
    ghash_run_t r = {.x = _mm_setzero_si128(), .left = (alen + blen + 15) / 16 + 1};
    group_start(&r);
    uint8_t edge[16] = {0};
    size_t a_whole = alen / 16, a_rest = alen % 16;
    run_blocks(k, &r, a, a_whole);
    size_t b_head = 0;
    if (0 != a_rest) { /* a's tail and b's head share a block */
        b_head = (blen < 16 - a_rest) ? blen : 16 - a_rest;
        memcpy(edge, a + 16 * a_whole, a_rest);
        if (0 != b_head) {
            memcpy(edge + a_rest, b, b_head);
        }
        run_blocks(k, &r, edge, 1);
    }
    size_t b_whole = (blen - b_head) / 16, b_rest = (blen - b_head) % 16;
    if (0 != b_whole) {
        run_blocks(k, &r, b + b_head, b_whole);
    }
    if (0 != b_rest) {
        memset(edge, 0, sizeof(edge));
        memcpy(edge, b + b_head + 16 * b_whole, b_rest);
        run_blocks(k, &r, edge, 1);
    }
    _mm_storeu_si128((__m128i *) edge, lengths_block(alen + blen));
    run_blocks(k, &r, edge, 1);
    _mm_storeu_si128((__m128i *) out, reflect(r.x));
}

/* Every block (the last one zero-padded) and the lengths block in one
 * group: X = 0, so the sum of block i times H^(n - i) is the hash */
T128 void opal_btl_usnic_ghash_small(const opal_btl_usnic_ghash_key_t *k, const uint8_t *a, size_t alen,
                                     uint8_t out[16])
{
    size_t whole = alen / 16, rest = alen % 16;
    size_t n = whole + (0 != rest) + 1;
    unsigned first = (unsigned) (OPAL_BTL_USNIC_GHASH_POWERS - n);
    __m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
    for (size_t i = 0; i < whole; ++i) {
        mul_add(reflect(_mm_loadu_si128((const __m128i *) (a + 16 * i))), power(k, first + (unsigned) i), &lo, &mid,
                &hi);
    }
    uint8_t edge[16] = {0};
    if (0 != rest) {
        memcpy(edge, a + 16 * whole, rest);
        mul_add(reflect(_mm_loadu_si128((const __m128i *) edge)), power(k, first + (unsigned) whole), &lo, &mid, &hi);
    }
    mul_add(reflect(lengths_block(alen)), power(k, OPAL_BTL_USNIC_GHASH_POWERS - 1), &lo, &mid, &hi);
    _mm_storeu_si128((__m128i *) out, reflect(reduce(lo, mid, hi)));
}
