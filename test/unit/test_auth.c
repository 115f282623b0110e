/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Datagram authentication (btl_usnic_auth.c): known-answer vectors for the
 * key derivation and both tags (computed independently with OpenSSL 3's
 * BLAKE2BMAC, AES-256-GCM and ChaCha20-Poly1305), every size class and
 * two-part (gathered) tags against libsodium's one-shot, tampering, the algorithm
 * choice, kernel randomness, the anti-replay window, and the connectivity
 * agents' key and tag.
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

UNIT_MAIN(UNIT_TEST(test_derive_key_kat), UNIT_TEST(test_chachapoly_kat), UNIT_TEST(test_aesgcm_kat),
          UNIT_TEST(test_sizes_and_parts),
          UNIT_TEST(test_no_key_checks_nothing), UNIT_TEST(test_mac_pick), UNIT_TEST(test_random),
          UNIT_TEST(test_nonce_generations), UNIT_TEST(test_replay_window),
          UNIT_TEST(test_agent_key_and_tag_kat))
