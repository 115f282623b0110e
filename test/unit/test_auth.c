/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Datagram authentication (btl_usnic_auth.c): known-answer vectors for the
 * key derivation and both tags (computed independently with OpenSSL 3's
 * BLAKE2BMAC, AES-256-GCM and ChaCha20-Poly1305), every size class and
 * two-part (gathered) tags against libsodium's one-shot, tampering, the algorithm
 * choice, kernel randomness, the anti-replay window, the connectivity
 * agents' key and tag, and protocol 9's pair keys and launcher secret
 * (vectors from Python's cryptography X25519 and hashlib BLAKE2b).
 */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "btl_usnic_auth.h"

static const uint8_t kat_derived[32] = {
    0x9d, 0x0e, 0x1f, 0x2e, 0xd8, 0x05, 0x35, 0xae, 0x8a, 0x56, 0x45, 0x95, 0xb0, 0x47, 0x9c, 0x32,
    0xfb, 0x83, 0xd8, 0xf1, 0x0a, 0x0f, 0x42, 0x7d, 0xde, 0x92, 0x55, 0xdc, 0x3d, 0x4a, 0x7f, 0xe8,
};
static const uint8_t kat_aesgcm[16] = {0xc3, 0xe3, 0x4c, 0xc9, 0x3f, 0x9e, 0xd0, 0xe0,
                                       0x2b, 0x6c, 0x4d, 0xad, 0x9a, 0xf6, 0xc4, 0xee};
static const uint8_t kat_chachapoly[16] = {0x77, 0x9e, 0x4b, 0x28, 0xc2, 0x36, 0xaf, 0xcf,
                                           0xa4, 0xa1, 0xe5, 0xc2, 0x3a, 0xeb, 0xc6, 0x69};
static const uint64_t kat_nonce = 0x0102030405060708ull;

/* receive key 00..1f, sender identity 80..8f, datagram bytes i * 3 */
static void kat_inputs(uint8_t rk[32], uint8_t id[16], uint8_t data[60])
{
    for (int i = 0; i < 32; ++i) {
        rk[i] = (uint8_t) i;
    }
    for (int i = 0; i < 16; ++i) {
        id[i] = (uint8_t) (0x80 + i);
    }
    for (int i = 0; i < 60; ++i) {
        data[i] = (uint8_t) (i * 3);
    }
}

static void test_derive_key_kat(void)
{
    uint8_t rk[32], id[16], data[60], out[32];
    kat_inputs(rk, id, data);
    opal_btl_usnic_derive_key(rk, id, out);
    CHECK_MEM(out, kat_derived, 32);
    /* each input matters: another sender, another receiver */
    id[0] ^= 1;
    opal_btl_usnic_derive_key(rk, id, out);
    CHECK(0 != memcmp(out, kat_derived, 32));
    id[0] ^= 1;
    rk[31] ^= 1;
    opal_btl_usnic_derive_key(rk, id, out);
    CHECK(0 != memcmp(out, kat_derived, 32));
}

/* The tag of |alg| against its vector, and nothing else passes */
static void check_alg(unsigned alg, const uint8_t want[16])
{
    uint8_t rk[32], id[16], data[60], key[32], tag[16];
    kat_inputs(rk, id, data);
    opal_btl_usnic_derive_key(rk, id, key);
    opal_btl_usnic_mac_t m;
    opal_btl_usnic_mac_init(&m, alg, key);
    opal_btl_usnic_mac_tag(&m, kat_nonce, data, sizeof(data), tag);
    CHECK_MEM(tag, want, 16);
    CHECK(opal_btl_usnic_mac_check(&m, kat_nonce, data, sizeof(data), want));
    /* a flipped bit anywhere, another nonce, a shorter datagram, another tag */
    for (size_t i = 0; i < sizeof(data); i += 7) {
        data[i] ^= 0x10;
        CHECK(!opal_btl_usnic_mac_check(&m, kat_nonce, data, sizeof(data), want));
        data[i] ^= 0x10;
    }
    CHECK(!opal_btl_usnic_mac_check(&m, kat_nonce + 1, data, sizeof(data), want));
    CHECK(!opal_btl_usnic_mac_check(&m, kat_nonce, data, sizeof(data) - 1, want));
    tag[15] ^= 1;
    CHECK(!opal_btl_usnic_mac_check(&m, kat_nonce, data, sizeof(data), tag));
    /* another direction's key */
    uint8_t other[32];
    id[5] ^= 1;
    opal_btl_usnic_derive_key(rk, id, other);
    opal_btl_usnic_mac_t m2;
    opal_btl_usnic_mac_init(&m2, alg, other);
    CHECK(!opal_btl_usnic_mac_check(&m2, kat_nonce, data, sizeof(data), want));
    opal_btl_usnic_mac_clear(&m);
    opal_btl_usnic_mac_clear(&m2);
    CHECK_EQ(m.alg, 0);
}

static void test_chachapoly_kat(void)
{
    REQUIRE(opal_btl_usnic_auth_init() & OPAL_BTL_USNIC_MAC_CHACHAPOLY);
    check_alg(OPAL_BTL_USNIC_MAC_CHACHAPOLY, kat_chachapoly);
}

static void test_aesgcm_kat(void)
{
    if (!(opal_btl_usnic_auth_init() & OPAL_BTL_USNIC_MAC_AESGCM)) {
        fprintf(stderr, "  AES-GCM not available on this CPU: vector not checked\n");
        return;
    }
    check_alg(OPAL_BTL_USNIC_MAC_AESGCM, kat_aesgcm);
}

/* libsodium's one-shot tag, the reference every path must agree with (a
 * build with libcrypto and one without talk to each other) */
static void reference_tag(unsigned alg, const uint8_t key[32], uint64_t nonce, const uint8_t *data, size_t len,
                          uint8_t tag[16])
{
    uint8_t iv[12] = {0}, none[1] = {0};
    unsigned long long taglen = 0;
    for (int i = 0; i < 8; ++i) {
        iv[i] = (uint8_t) (nonce >> (8 * i));
    }
    if (OPAL_BTL_USNIC_MAC_AESGCM == alg) {
        crypto_aead_aes256gcm_encrypt_detached(none, tag, &taglen, none, 0, data, len, NULL, iv, key);
    } else {
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(none, tag, &taglen, none, 0, data, len, NULL, iv, key);
    }
}

/* Tags of every size class (a header to the largest datagram, around
 * GHASH's 16-byte blocks) equal libsodium's one-shot reference, also in two
 * parts split anywhere (a gathered payload), and check as such */
static void check_sizes_and_parts(unsigned alg)
{
    static const size_t sizes[] = {1, 15, 16, 17, 52, 88, 1472, 2047, 2048, 2049, 8972, 65000, 65507};
    static const size_t splits[] = {0, 1, 15, 16, 17, 52, 64, 72, 1000, 2047, 2048, 60000};
    uint8_t key[32];
    for (int i = 0; i < 32; ++i) {
        key[i] = (uint8_t) (7 * i + 1);
    }
    uint8_t *data = (uint8_t *) malloc(65507);
    REQUIRE(NULL != data);
    for (size_t i = 0; i < 65507; ++i) {
        data[i] = (uint8_t) (i * 13 + (i >> 8));
    }
    opal_btl_usnic_mac_t m;
    opal_btl_usnic_mac_init(&m, alg, key);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        size_t len = sizes[s];
        uint64_t nonce = 0x1000 + s;
        uint8_t want[16], got[16];
        reference_tag(alg, key, nonce, data, len, want);
        opal_btl_usnic_mac_tag(&m, nonce, data, len, got);
        if (!CHECK_MEM(got, want, 16)) {
            fprintf(stderr, "  alg %u, %zu bytes in one part\n", alg, len);
        }
        CHECK(opal_btl_usnic_mac_check(&m, nonce, data, len, want));
        data[len / 2] ^= 0x01;
        CHECK(!opal_btl_usnic_mac_check(&m, nonce, data, len, want));
        data[len / 2] ^= 0x01;
        for (size_t k = 0; k < sizeof(splits) / sizeof(splits[0]) && splits[k] <= len; ++k) {
            size_t a = splits[k];
            opal_btl_usnic_mac_tag2(&m, nonce, data, a, data + a, len - a, got);
            if (!CHECK_MEM(got, want, 16)) {
                fprintf(stderr, "  alg %u, %zu bytes as %zu + %zu\n", alg, len, a, len - a);
            }
        }
    }
    opal_btl_usnic_mac_clear(&m);
    free(data);
}

static void test_sizes_and_parts(void)
{
    unsigned algs = opal_btl_usnic_auth_init();
    check_sizes_and_parts(OPAL_BTL_USNIC_MAC_CHACHAPOLY);
    if (algs & OPAL_BTL_USNIC_MAC_AESGCM) {
        opal_btl_usnic_mac_wide_ghash(false); /* OpenSSL's GHASH (or libsodium) */
        check_sizes_and_parts(OPAL_BTL_USNIC_MAC_AESGCM);
        opal_btl_usnic_mac_wide_ghash(true); /* the 512-bit one where the CPU has it */
        check_sizes_and_parts(OPAL_BTL_USNIC_MAC_AESGCM);
    } else {
        fprintf(stderr, "  AES-GCM not available on this CPU: its sizes and parts not checked\n");
    }
#if OPAL_BTL_USNIC_HAVE_LIBCRYPTO
    CHECK(opal_btl_usnic_mac_gathers());
#else
    CHECK(!opal_btl_usnic_mac_gathers());
#endif
}

/* Random keys, nonces, lengths (0..65000) and split points: the tag of
 * the default path (the 512-bit GHASH where the CPU has it) equals
 * libsodium's one-shot and OpenSSL's GHASH path, and checks */
static void test_random_tags_agree(void)
{
    if (!(opal_btl_usnic_auth_init() & OPAL_BTL_USNIC_MAC_AESGCM)) {
        fprintf(stderr, "  AES-GCM not available on this CPU: random tags not checked\n");
        return;
    }
    enum { CASES = 20000, MOST = 65000 };
    uint8_t *data = (uint8_t *) malloc(MOST);
    REQUIRE(NULL != data);
    randombytes_buf(data, MOST);
    unsigned long bad = 0;
    for (int c = 0; c < CASES; ++c) {
        uint8_t key[32], want[16], wide[16], narrow[16];
        randombytes_buf(key, sizeof(key));
        uint64_t nonce = ((uint64_t) randombytes_random() << 32) | randombytes_random();
        size_t len = (c % 4) ? randombytes_uniform(2100) : randombytes_uniform(MOST + 1);
        size_t a = randombytes_uniform((uint32_t) len + 1);
        opal_btl_usnic_mac_t mw, mn;
        opal_btl_usnic_mac_wide_ghash(true);
        opal_btl_usnic_mac_init(&mw, OPAL_BTL_USNIC_MAC_AESGCM, key);
        opal_btl_usnic_mac_wide_ghash(false);
        opal_btl_usnic_mac_init(&mn, OPAL_BTL_USNIC_MAC_AESGCM, key);
        reference_tag(OPAL_BTL_USNIC_MAC_AESGCM, key, nonce, data, len, want);
        opal_btl_usnic_mac_tag2(&mw, nonce, data, a, data + a, len - a, wide);
        opal_btl_usnic_mac_tag2(&mn, nonce, data, a, data + a, len - a, narrow);
        bool ok = 0 == memcmp(want, wide, 16) && 0 == memcmp(want, narrow, 16) &&
                  opal_btl_usnic_mac_check(&mw, nonce, data, len, want);
        if (!ok && 0 == bad++) {
            FAILF("case %d: %zu bytes split at %zu: tags differ or do not check", c, len, a);
        }
        opal_btl_usnic_mac_clear(&mw);
        opal_btl_usnic_mac_clear(&mn);
    }
    opal_btl_usnic_mac_wide_ghash(true);
    CHECK_EQ_U(bad, 0);
    free(data);
}

/* The nonces in the orders a direction meets them (counting up, the same
 * again, back, jumps around the masks made together, across 2^64, at
 * random), tagged and checked with one key: every tag equals the
 * reference, whatever masks that key made before */
static void check_nonce_orders(void)
{
    uint8_t key[32], want[16], got[16];
    randombytes_buf(key, sizeof(key));
    uint8_t *data = (uint8_t *) malloc(1472);
    REQUIRE(NULL != data);
    randombytes_buf(data, 1472);
    uint64_t nonces[96];
    int n = 0;
    for (uint64_t i = 1; i <= 20; ++i) {
        nonces[n++] = i;
    }
    static const uint64_t after[] = {20, 19, 3, 27, 35, 36, 43, 44, 100, 99, 107, 108, 0, 7, 8};
    for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); ++i) {
        nonces[n++] = after[i];
    }
    for (uint64_t i = 6; i >= 1; --i) {
        nonces[n++] = UINT64_MAX - i + 1; /* up to the last nonce */
    }
    nonces[n++] = 0;
    nonces[n++] = 1;
    nonces[n++] = UINT64_MAX;
    while (n < (int) (sizeof(nonces) / sizeof(nonces[0]))) {
        nonces[n++] = ((uint64_t) randombytes_random() << 32) | randombytes_random();
    }
    opal_btl_usnic_mac_t m;
    opal_btl_usnic_mac_init(&m, OPAL_BTL_USNIC_MAC_AESGCM, key);
    unsigned long bad = 0;
    for (int i = 0; i < n; ++i) {
        size_t len = (i % 2) ? 1472 : 200; /* both above libsodium's small path */
        reference_tag(OPAL_BTL_USNIC_MAC_AESGCM, key, nonces[i], data, len, want);
        opal_btl_usnic_mac_tag(&m, nonces[i], data, len, got);
        bool ok = 0 == memcmp(want, got, 16) && opal_btl_usnic_mac_check(&m, nonces[i], data, len, want) &&
                  !opal_btl_usnic_mac_check(&m, nonces[i] + 1, data, len, want);
        if (!ok && 0 == bad++) {
            FAILF("nonce %d (0x%llx), %zu bytes: the tag differs or does not check", i,
                  (unsigned long long) nonces[i], len);
        }
    }
    CHECK_EQ_U(bad, 0);
    opal_btl_usnic_mac_clear(&m);
    free(data);
}

static void test_nonce_orders(void)
{
    if (!(opal_btl_usnic_auth_init() & OPAL_BTL_USNIC_MAC_AESGCM)) {
        fprintf(stderr, "  AES-GCM not available on this CPU: nonce orders not checked\n");
        return;
    }
    opal_btl_usnic_mac_wide_ghash(false);
    check_nonce_orders();
    opal_btl_usnic_mac_wide_ghash(true);
    check_nonce_orders();
}

static void test_no_key_checks_nothing(void)
{
    uint8_t zero[32] = {0}, data[8] = {0}, tag[16] = {0};
    opal_btl_usnic_mac_t m;
    opal_btl_usnic_mac_init(&m, 0, zero);
    CHECK(!opal_btl_usnic_mac_check(&m, 1, data, sizeof(data), tag));
}

static void test_mac_pick(void)
{
    const unsigned A = OPAL_BTL_USNIC_MAC_AESGCM, C = OPAL_BTL_USNIC_MAC_CHACHAPOLY;
    CHECK_EQ(opal_btl_usnic_mac_pick(A | C, A | C), A);
    CHECK_EQ(opal_btl_usnic_mac_pick(A | C, C), C);
    CHECK_EQ(opal_btl_usnic_mac_pick(C, A | C), C);
    CHECK_EQ(opal_btl_usnic_mac_pick(A, C), 0);
    CHECK_EQ(opal_btl_usnic_mac_pick(0, A | C), 0);
}

static void test_random(void)
{
    uint8_t a[32], b[32], zero[32] = {0};
    REQUIRE_EQ(opal_btl_usnic_random(a, sizeof(a)), 0);
    REQUIRE_EQ(opal_btl_usnic_random(b, sizeof(b)), 0);
    CHECK(0 != memcmp(a, b, sizeof(a)));
    CHECK(0 != memcmp(a, zero, sizeof(a)));
}

static void test_nonce_generations(void)
{
    CHECK_EQ_U(opal_btl_usnic_nonce_first(0), 1);
    CHECK_EQ_U(opal_btl_usnic_nonce_first(1), (1ull << 40) + 1);
    /* a later generation starts above anything an earlier one can reach */
    CHECK(opal_btl_usnic_nonce_first(7) > opal_btl_usnic_nonce_first(6) + ((1ull << 40) - 2));
}

#define NEW OPAL_BTL_USNIC_REPLAY_NEW
#define SEEN OPAL_BTL_USNIC_REPLAY_SEEN
#define STALE OPAL_BTL_USNIC_REPLAY_STALE
#define W OPAL_BTL_USNIC_REPLAY_WINDOW

static void take(opal_btl_usnic_replay_t *w, uint64_t n)
{
    CHECK_EQ(opal_btl_usnic_replay_check(w, n), NEW);
    opal_btl_usnic_replay_accept(w, n);
    CHECK_EQ(opal_btl_usnic_replay_check(w, n), SEEN);
}

static void test_replay_window(void)
{
    opal_btl_usnic_replay_t w;
    memset(&w, 0, sizeof(w));
    CHECK_EQ(opal_btl_usnic_replay_check(&w, 0), STALE); /* never sent */
    take(&w, 5);
    take(&w, 3); /* behind the highest, inside the window */
    CHECK_EQ(opal_btl_usnic_replay_check(&w, 4), NEW);
    take(&w, 5 + W - 1);
    CHECK_EQ(opal_btl_usnic_replay_check(&w, 5), SEEN); /* still inside */
    CHECK_EQ(opal_btl_usnic_replay_check(&w, 4), STALE); /* fell out */
    take(&w, 5 + W);
    CHECK_EQ(opal_btl_usnic_replay_check(&w, 5), STALE);
    /* sliding clears the bits it passes over: a nonce never seen is new */
    CHECK_EQ(opal_btl_usnic_replay_check(&w, 5 + W - 2), NEW);
    /* a jump far ahead forgets everything behind */
    take(&w, 10 * W);
    for (uint64_t n = 9 * W + 1; n < 10 * W; n += 97) {
        CHECK_EQ(opal_btl_usnic_replay_check(&w, n), NEW);
    }
    CHECK_EQ(opal_btl_usnic_replay_check(&w, 9 * W), STALE);
    /* a scrambled burst: each taken once, copies seen */
    uint64_t base = 20 * W, rng = 1;
    unsigned taken = 0;
    for (int i = 0; i < 4000; ++i) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t n = base + (rng >> 33) % 600;
        if (NEW == opal_btl_usnic_replay_check(&w, n)) {
            opal_btl_usnic_replay_accept(&w, n);
            ++taken;
        } else {
            CHECK_EQ(opal_btl_usnic_replay_check(&w, n), SEEN);
        }
    }
    CHECK_LE(taken, 600);
    CHECK_GE(taken, 590);
    /* the top of the range: no endless slide at 2^64 - 1 */
    take(&w, UINT64_MAX - 3);
    take(&w, UINT64_MAX);
    CHECK_EQ(opal_btl_usnic_replay_check(&w, UINT64_MAX - 3), SEEN);
    CHECK_EQ(opal_btl_usnic_replay_check(&w, UINT64_MAX - 1), NEW);
}

/* The connectivity agents' key and tag (values from Python's hashlib
 * BLAKE2b, an implementation independent of libsodium): job key 00..1f,
 * datagram bytes i * 5 */
static const uint8_t kat_agent_key[32] = {
    0xec, 0xad, 0x09, 0x67, 0xa4, 0xd4, 0x3b, 0xbb, 0x41, 0xc9, 0xb2, 0x8f, 0xdb, 0xef, 0x3a, 0x5f,
    0x24, 0x57, 0x93, 0x98, 0xff, 0x21, 0x17, 0x5c, 0x97, 0x66, 0x34, 0x0a, 0x5f, 0xd5, 0x76, 0x87,
};
static const uint8_t kat_agent_tag[16] = {0x8a, 0x87, 0x04, 0x76, 0x8d, 0xab, 0x3e, 0x27,
                                          0x76, 0xec, 0xdb, 0x8d, 0xab, 0x40, 0xb3, 0x51};

static void test_agent_key_and_tag_kat(void)
{
    uint8_t job[32], key[32], data[100], tag[16];
    for (int i = 0; i < 32; ++i) {
        job[i] = (uint8_t) i;
    }
    for (int i = 0; i < 100; ++i) {
        data[i] = (uint8_t) (i * 5);
    }
    opal_btl_usnic_derive_agent_key(job, key);
    CHECK_MEM(key, kat_agent_key, 32);
    opal_btl_usnic_agent_tag(key, data, sizeof(data), tag);
    CHECK_MEM(tag, kat_agent_tag, 16);
    CHECK(opal_btl_usnic_agent_tag_check(key, data, sizeof(data), kat_agent_tag));
    /* a flipped bit anywhere, a shorter datagram, another tag, another key */
    for (size_t i = 0; i < sizeof(data); i += 9) {
        data[i] ^= 0x01;
        CHECK(!opal_btl_usnic_agent_tag_check(key, data, sizeof(data), kat_agent_tag));
        data[i] ^= 0x01;
    }
    CHECK(!opal_btl_usnic_agent_tag_check(key, data, sizeof(data) - 1, kat_agent_tag));
    tag[0] ^= 0x80;
    CHECK(!opal_btl_usnic_agent_tag_check(key, data, sizeof(data), tag));
    job[7] ^= 1;
    uint8_t other[32];
    opal_btl_usnic_derive_agent_key(job, other);
    CHECK(0 != memcmp(other, kat_agent_key, 32));
    CHECK(!opal_btl_usnic_agent_tag_check(other, data, sizeof(data), kat_agent_tag));
    /* not the datagram key of any pair: another label */
    uint8_t id[16] = {0}, dgram[32];
    job[7] ^= 1;
    opal_btl_usnic_derive_key(job, id, dgram);
    CHECK(0 != memcmp(dgram, kat_agent_key, 32));
}


/* ----- pair keys (protocol 9) ----- */

static const uint8_t kat_pk_a[32] = {0x07, 0xa3, 0x7c, 0xbc, 0x14, 0x20, 0x93, 0xc8, 0xb7, 0x55, 0xdc, 0x1b, 0x10, 0xe8, 0x6c, 0xb4, 0x26, 0x37, 0x4a, 0xd1, 0x6a, 0xa8, 0x53, 0xed, 0x0b, 0xdf, 0xc0, 0xb2, 0xb8, 0x6d, 0x1c, 0x7c};
static const uint8_t kat_pair_tx[32] = {0xa0, 0x13, 0x5f, 0x9a, 0xd8, 0x85, 0xae, 0x29, 0x02, 0x80, 0xef, 0x86, 0xeb, 0x80, 0x74, 0x44, 0x8b, 0x83, 0x06, 0xcc, 0x72, 0x77, 0x53, 0x9d, 0x5e, 0x03, 0x32, 0x99, 0xf7, 0xb0, 0x13, 0xb8};
static const uint8_t kat_pair_rx[32] = {0xf9, 0x92, 0x9b, 0xd8, 0xea, 0xec, 0x29, 0x2d, 0x56, 0x02, 0x23, 0xf9, 0x1b, 0xf0, 0x14, 0xb4, 0xfd, 0x9c, 0xea, 0x74, 0x29, 0xd7, 0x8d, 0x67, 0x5c, 0x98, 0xc0, 0x43, 0xe9, 0x3c, 0xd1, 0x70};
static const uint8_t kat_pair_tx_job[32] = {0xe9, 0xf5, 0x09, 0x13, 0x10, 0x73, 0xa3, 0x9c, 0x12, 0x5f, 0x30, 0x51, 0xf6, 0xed, 0x09, 0xad, 0x04, 0x6a, 0x6b, 0xde, 0xcc, 0x10, 0x14, 0x7e, 0xea, 0x6e, 0x85, 0x03, 0x77, 0xcd, 0xe3, 0xed};
static const uint8_t kat_secret_key[32] = {0x8e, 0x34, 0x41, 0x6d, 0x6a, 0x57, 0xd7, 0xca, 0x4c, 0x75, 0x6d, 0x64, 0x60, 0xf1, 0x86, 0x87, 0x4d, 0xb7, 0x20, 0x9d, 0x59, 0x0c, 0x81, 0xa6, 0x9e, 0x9b, 0x15, 0xc9, 0x86, 0x53, 0xec, 0xd0};
static const uint8_t kat_secret_id[16] = {0x7d, 0x29, 0x88, 0x73, 0x4b, 0x0c, 0xac, 0xea, 0x18, 0xc0, 0x66, 0x9f, 0x31, 0xb1, 0x89, 0xce};

static const uint8_t kat_pair_tx_incarnation1[32] = {0x44, 0xa6, 0x07, 0xbd, 0xae, 0x84, 0xff, 0xff, 0xa7, 0x2e, 0x61, 0xed, 0x3f, 0xd4, 0x3d, 0x7b, 0xae, 0x80, 0x01, 0x42, 0x12, 0x39, 0xbf, 0xdc, 0xa9, 0x1e, 0x60, 0x4e, 0xa0, 0x0e, 0xe4, 0x2f};

/* secrets 01..20 (A) and 21..40 (B), identities 80..8f (A) and a0..af (B) */
static void pair_inputs(uint8_t sk_a[32], uint8_t sk_b[32], uint8_t id_a[16], uint8_t id_b[16])
{
    for (int i = 0; i < 32; ++i) {
        sk_a[i] = (uint8_t) (1 + i);
        sk_b[i] = (uint8_t) (0x21 + i);
    }
    for (int i = 0; i < 16; ++i) {
        id_a[i] = (uint8_t) (0x80 + i);
        id_b[i] = (uint8_t) (0xa0 + i);
    }
}

static void pair_publics(const uint8_t sk_a[32], const uint8_t sk_b[32], uint8_t pk_a[32], uint8_t pk_b[32])
{
    CHECK_EQ(crypto_scalarmult_base(pk_a, sk_a), 0);
    CHECK_EQ(crypto_scalarmult_base(pk_b, sk_b), 0);
}

static void test_pair_keys_kat(void)
{
    REQUIRE(0 != opal_btl_usnic_auth_init());
    uint8_t sk_a[32], sk_b[32], id_a[16], id_b[16], pk_a[32], pk_b[32];
    pair_inputs(sk_a, sk_b, id_a, id_b);
    pair_publics(sk_a, sk_b, pk_a, pk_b);
    CHECK_MEM(pk_a, kat_pk_a, 32);
    opal_btl_usnic_pair_end_t a = {.id = id_a, .public_key = pk_a}, b = {.id = id_b, .public_key = pk_b};
    uint8_t tx[32], rx[32], b_tx[32], b_rx[32];
    CHECK_EQ(opal_btl_usnic_pair_keys(sk_a, a, b, NULL, tx, rx), 0);
    CHECK_MEM(tx, kat_pair_tx, 32);
    CHECK_MEM(rx, kat_pair_rx, 32);
    /* B computes the same two keys, each for the other direction */
    CHECK_EQ(opal_btl_usnic_pair_keys(sk_b, b, a, NULL, b_tx, b_rx), 0);
    CHECK_MEM(b_tx, kat_pair_rx, 32);
    CHECK_MEM(b_rx, kat_pair_tx, 32);
    /* the launcher's secret changes both */
    uint8_t job[32];
    memset(job, 0x55, sizeof(job));
    CHECK_EQ(opal_btl_usnic_pair_keys(sk_a, a, b, job, tx, rx), 0);
    CHECK_MEM(tx, kat_pair_tx_job, 32);
    CHECK(0 != memcmp(rx, kat_pair_rx, 32));
    job[31] ^= 1;
    CHECK_EQ(opal_btl_usnic_pair_keys(sk_a, a, b, job, tx, rx), 0);
    CHECK(0 != memcmp(tx, kat_pair_tx_job, 32));
}

/* Everything the modex publishes (both public keys and identities) does
 * not make the keys: the old derivation from it, or another secret,
 * gives other keys; each public input matters */
static void test_pair_keys_need_a_secret(void)
{
    REQUIRE(0 != opal_btl_usnic_auth_init());
    uint8_t sk_a[32], sk_b[32], id_a[16], id_b[16], pk_a[32], pk_b[32], tx[32], rx[32], guess[32];
    pair_inputs(sk_a, sk_b, id_a, id_b);
    pair_publics(sk_a, sk_b, pk_a, pk_b);
    opal_btl_usnic_pair_end_t a = {.id = id_a, .public_key = pk_a}, b = {.id = id_b, .public_key = pk_b};
    opal_btl_usnic_derive_key(pk_b, id_a, guess); /* protocol 8 from the modex */
    CHECK(0 != memcmp(guess, kat_pair_tx, 32));
    uint8_t other_sk[32];
    memcpy(other_sk, sk_a, 32);
    other_sk[7] ^= 0x40;
    CHECK_EQ(opal_btl_usnic_pair_keys(other_sk, a, b, NULL, tx, rx), 0);
    CHECK(0 != memcmp(tx, kat_pair_tx, 32));
    id_b[3] ^= 1;
    CHECK_EQ(opal_btl_usnic_pair_keys(sk_a, a, b, NULL, tx, rx), 0);
    CHECK(0 != memcmp(tx, kat_pair_tx, 32));
    CHECK(0 != memcmp(rx, kat_pair_rx, 32));
}

/* A low-order public key (zero) would make a shared value anyone knows */
static void test_pair_keys_refuse_a_low_order_point(void)
{
    REQUIRE(0 != opal_btl_usnic_auth_init());
    uint8_t sk_a[32], sk_b[32], id_a[16], id_b[16], pk_a[32], pk_b[32], tx[32], rx[32];
    pair_inputs(sk_a, sk_b, id_a, id_b);
    pair_publics(sk_a, sk_b, pk_a, pk_b);
    uint8_t zero[32] = {0};
    opal_btl_usnic_pair_end_t a = {.id = id_a, .public_key = pk_a}, bad = {.id = id_b, .public_key = zero};
    CHECK_EQ(opal_btl_usnic_pair_keys(sk_a, a, bad, NULL, tx, rx), -1);
}

/* Incarnation 0 keeps the pair's key; each later one has its own */
static void test_incarnation_keys(void)
{
    REQUIRE(0 != opal_btl_usnic_auth_init());
    uint8_t k0[32], k1[32], k2[32];
    opal_btl_usnic_incarnation_key(kat_pair_tx, 0, k0);
    CHECK_MEM(k0, kat_pair_tx, 32);
    opal_btl_usnic_incarnation_key(kat_pair_tx, 1, k1);
    CHECK_MEM(k1, kat_pair_tx_incarnation1, 32);
    opal_btl_usnic_incarnation_key(kat_pair_tx, 2, k2);
    CHECK(0 != memcmp(k2, k1, 32));
    CHECK(0 != memcmp(k2, kat_pair_tx, 32));
    memcpy(k2, kat_pair_tx, 32);
    opal_btl_usnic_incarnation_key(k2, 1, k2); /* in place */
    CHECK_MEM(k2, kat_pair_tx_incarnation1, 32);
}

static void test_dh_keypair(void)
{
    REQUIRE(0 != opal_btl_usnic_auth_init());
    uint8_t sk[32], pk[32], again[32], sk2[32], pk2[32];
    CHECK_EQ(opal_btl_usnic_dh_keypair(sk, pk), 0);
    CHECK_EQ(crypto_scalarmult_base(again, sk), 0);
    CHECK_MEM(pk, again, 32);
    CHECK_EQ(opal_btl_usnic_dh_keypair(sk2, pk2), 0);
    CHECK(0 != memcmp(sk, sk2, 32));
}

static void test_job_secret_parse(void)
{
    REQUIRE(0 != opal_btl_usnic_auth_init());
    static const uint8_t zero_id[16] = {0};
    opal_btl_usnic_job_secret_t s;
    opal_btl_usnic_job_secret_parse(NULL, &s);
    CHECK_EQ(s.kind, OPAL_BTL_USNIC_SECRET_NONE);
    opal_btl_usnic_job_secret_parse("", &s);
    CHECK_EQ(s.kind, OPAL_BTL_USNIC_SECRET_NONE);
    /* Open MPI 4.1's ess/pmi under a direct launch: job family, local job id */
    opal_btl_usnic_job_secret_parse("000000000000abcd-0000000000000001", &s);
    CHECK_EQ(s.kind, OPAL_BTL_USNIC_SECRET_WEAK);
    CHECK_MEM(s.id, zero_id, 16);
    opal_btl_usnic_job_secret_parse("0123456789abcdef", &s); /* 64 bits */
    CHECK_EQ(s.kind, OPAL_BTL_USNIC_SECRET_WEAK);
    /* as Open MPI 4.1's mpirun makes it */
    opal_btl_usnic_job_secret_parse("e470ea9872db7677-1f5409c8de329737", &s);
    CHECK_EQ(s.kind, OPAL_BTL_USNIC_SECRET_GOOD);
    CHECK_MEM(s.key, kat_secret_key, 32);
    CHECK_MEM(s.id, kat_secret_id, 16);
    /* one word small, the other random: not made of job ids */
    opal_btl_usnic_job_secret_parse("0000000000000001-1f5409c8de329737", &s);
    CHECK_EQ(s.kind, OPAL_BTL_USNIC_SECRET_GOOD);
    CHECK(0 != memcmp(s.id, kat_secret_id, 16));
}

UNIT_MAIN(UNIT_TEST(test_derive_key_kat), UNIT_TEST(test_chachapoly_kat), UNIT_TEST(test_aesgcm_kat),
          UNIT_TEST(test_sizes_and_parts), UNIT_TEST(test_random_tags_agree), UNIT_TEST(test_nonce_orders),
          UNIT_TEST(test_no_key_checks_nothing), UNIT_TEST(test_mac_pick), UNIT_TEST(test_random),
          UNIT_TEST(test_nonce_generations), UNIT_TEST(test_replay_window),
          UNIT_TEST(test_agent_key_and_tag_kat), UNIT_TEST(test_pair_keys_kat),
          UNIT_TEST(test_pair_keys_need_a_secret), UNIT_TEST(test_pair_keys_refuse_a_low_order_point),
          UNIT_TEST(test_dh_keypair), UNIT_TEST(test_job_secret_parse), UNIT_TEST(test_incarnation_keys))
