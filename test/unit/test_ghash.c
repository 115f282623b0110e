/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The 512-bit GHASH (btl_usnic_ghash.c): AES-256-GCM tags made with it
 * (GHASH_H(A) ^ AES_K(J0), nothing encrypted) equal OpenSSL's EVP and
 * libsodium's on random keys, nonces, lengths 0..65000 (weighted toward
 * block boundaries) and data given in two parts split anywhere; a
 * changed bit or length changes the tag; up to 128 bytes the small path
 * (opal_btl_usnic_ghash_small) too.  Where the CPU lacks VPCLMULQDQ
 * or AVX-512 the tests say NOT RUN on stderr and check nothing (the
 * tags then come from OpenSSL's GHASH, which test_auth.c checks).
 */
#include "unit.h"

#include <sodium.h>
#include <string.h>

#include "btl_usnic_ghash.h"

#if OPAL_BTL_USNIC_HAVE_LIBCRYPTO
#    include <openssl/evp.h>

#    define SMALL_CASES 1000000 /* lengths 0..320 */
#    define LARGE_CASES 3000    /* lengths 0..65000 */
#    define SODIUM_CASES 100000 /* lengths 0..2000 */
#    define KEY_EVERY 64        /* cases per key */
#    define MAX_LEN 65000

static uint8_t data[MAX_LEN + 1];

typedef struct keyed_t {
    uint8_t key[32];
    EVP_CIPHER_CTX *gcm;         /* OpenSSL's AES-256-GCM, the reference */
    EVP_CIPHER_CTX *ecb;         /* AES-256 single blocks: H and the mask */
    opal_btl_usnic_ghash_key_t wide;
} keyed_t;

static bool available(const char *test)
{
    if (opal_btl_usnic_ghash_available()) {
        return true;
    }
    fprintf(stderr, "%s: NOT RUN: this CPU lacks VPCLMULQDQ or AVX-512\n", test);
    return false;
}

static void aes_block(keyed_t *k, const uint8_t in[16], uint8_t out[16])
{
    int n = 0;
    EVP_EncryptUpdate(k->ecb, out, &n, in, 16);
}

static void keyed_new(keyed_t *k)
{
    randombytes_buf(k->key, sizeof(k->key));
    EVP_EncryptInit_ex(k->gcm, EVP_aes_256_gcm(), NULL, k->key, NULL);
    EVP_EncryptInit_ex(k->ecb, EVP_aes_256_ecb(), NULL, k->key, NULL);
    EVP_CIPHER_CTX_set_padding(k->ecb, 0);
    uint8_t zero[16] = {0}, h[16];
    aes_block(k, zero, h);
    opal_btl_usnic_ghash_key(&k->wide, h);
}

static void openssl_tag(keyed_t *k, const uint8_t iv[12], const uint8_t *p, size_t n, uint8_t tag[16])
{
    int len = 0;
    EVP_EncryptInit_ex(k->gcm, NULL, NULL, NULL, iv);
    if (0 != n) {
        EVP_EncryptUpdate(k->gcm, NULL, &len, p, (int) n);
    }
    EVP_EncryptFinal_ex(k->gcm, tag, &len);
    EVP_CIPHER_CTX_ctrl(k->gcm, EVP_CTRL_GCM_GET_TAG, 16, tag);
}

/* Our tag of |p|, |n| bytes given in two parts cut at |cut| */
static void wide_tag_cut(keyed_t *k, const uint8_t iv[12], const uint8_t *p, size_t n, size_t cut, uint8_t tag[16])
{
    uint8_t j0[16] = {0}, mask[16];
    memcpy(j0, iv, 12);
    j0[15] = 1;
    aes_block(k, j0, mask);
    opal_btl_usnic_ghash(&k->wide, p, cut, p + cut, n - cut, tag);
    for (int i = 0; i < 16; ++i) {
        tag[i] ^= mask[i];
    }
}

/* Our tag of |n| <= OPAL_BTL_USNIC_GHASH_SMALL bytes through the small path */
static void small_tag(keyed_t *k, const uint8_t iv[12], const uint8_t *p, size_t n, uint8_t tag[16])
{
    uint8_t j0[16] = {0}, mask[16];
    memcpy(j0, iv, 12);
    j0[15] = 1;
    aes_block(k, j0, mask);
    opal_btl_usnic_ghash_small(&k->wide, p, n, tag);
    for (int i = 0; i < 16; ++i) {
        tag[i] ^= mask[i];
    }
}

/* ... cut at random (a header and a payload of any sizes, either empty) */
static void wide_tag(keyed_t *k, const uint8_t iv[12], const uint8_t *p, size_t n, uint8_t tag[16])
{
    wide_tag_cut(k, iv, p, n, randombytes_uniform((uint32_t) n + 1), tag);
}

/* A length near a block boundary half of the time */
static size_t some_length(size_t most)
{
    size_t n = randombytes_uniform((uint32_t) most + 1);
    if (randombytes_uniform(2)) {
        n = (n & ~(size_t) 15) + randombytes_uniform(3);
        n = (n >= 1 && randombytes_uniform(2)) ? n - 1 : n;
    }
    return n > most ? most : n;
}

/* |cases| random cases of at most |most| bytes against OpenSSL; returns
 * the mismatches (the first one printed) */
static unsigned long against_openssl(unsigned long cases, size_t most)
{
    keyed_t k = {.gcm = EVP_CIPHER_CTX_new(), .ecb = EVP_CIPHER_CTX_new()};
    unsigned long bad = 0;
    for (unsigned long c = 0; c < cases; ++c) {
        if (0 == c % KEY_EVERY) {
            keyed_new(&k);
        }
        uint8_t iv[12], want[16], got[16];
        randombytes_buf(iv, sizeof(iv));
        size_t n = some_length(most);
        size_t off = randombytes_uniform(64); /* any alignment */
        if (off + n > MAX_LEN) {
            off = 0;
        }
        openssl_tag(&k, iv, data + off, n, want);
        wide_tag(&k, iv, data + off, n, got);
        if (0 != memcmp(want, got, 16) && 0 == bad++) {
            FAILF("tag differs from OpenSSL's: case %lu, %zu bytes at offset %zu", c, n, off);
        }
        if (n <= OPAL_BTL_USNIC_GHASH_SMALL) {
            small_tag(&k, iv, data + off, n, got);
            if (0 != memcmp(want, got, 16) && 0 == bad++) {
                FAILF("small path's tag differs from OpenSSL's: case %lu, %zu bytes at offset %zu", c, n, off);
            }
        }
        if (0 == c % 97) {
            data[randombytes_uniform(MAX_LEN)] ^= (uint8_t) (1 + randombytes_uniform(255)); /* new data now and then */
        }
    }
    EVP_CIPHER_CTX_free(k.gcm);
    EVP_CIPHER_CTX_free(k.ecb);
    return bad;
}

static void test_equals_openssl_small(void)
{
    if (!available(__func__)) {
        return;
    }
    randombytes_buf(data, sizeof(data));
    CHECK_EQ_U(against_openssl(SMALL_CASES, 320), 0);
    fprintf(stderr, "test_ghash: %d tags of 0..320 bytes (those up to 128 by the small path too) equal OpenSSL's\n",
            SMALL_CASES);
}

static void test_equals_openssl_large(void)
{
    if (!available(__func__)) {
        return;
    }
    randombytes_buf(data, sizeof(data));
    CHECK_EQ_U(against_openssl(LARGE_CASES, MAX_LEN), 0);
}

static void test_equals_libsodium(void)
{
    if (!available(__func__) || !CHECK(sodium_init() >= 0 && crypto_aead_aes256gcm_is_available())) {
        return;
    }
    keyed_t k = {.gcm = EVP_CIPHER_CTX_new(), .ecb = EVP_CIPHER_CTX_new()};
    crypto_aead_aes256gcm_state st;
    unsigned long bad = 0;
    randombytes_buf(data, sizeof(data));
    for (unsigned long c = 0; c < SODIUM_CASES; ++c) {
        if (0 == c % KEY_EVERY) {
            keyed_new(&k);
            crypto_aead_aes256gcm_beforenm(&st, k.key);
        }
        uint8_t iv[12], want[16], got[16], none[1];
        unsigned long long tlen = 0;
        randombytes_buf(iv, sizeof(iv));
        size_t n = some_length(2000);
        crypto_aead_aes256gcm_encrypt_detached_afternm(none, want, &tlen, none, 0, data, n, NULL, iv, &st);
        wide_tag(&k, iv, data, n, got);
        if (0 != memcmp(want, got, 16) && 0 == bad++) {
            FAILF("tag differs from libsodium's: case %lu, %zu bytes", c, n);
        }
    }
    CHECK_EQ_U(bad, 0);
    EVP_CIPHER_CTX_free(k.gcm);
    EVP_CIPHER_CTX_free(k.ecb);
}

/* Every split point of one buffer gives one tag; a flipped bit or one
 * more byte gives another */
static void test_pieces_and_changes(void)
{
    if (!available(__func__)) {
        return;
    }
    keyed_t k = {.gcm = EVP_CIPHER_CTX_new(), .ecb = EVP_CIPHER_CTX_new()};
    keyed_new(&k);
    uint8_t iv[12] = {1, 2, 3}, whole[16], part[16], other[16];
    randombytes_buf(data, 1100);
    data[1099] = 0; /* so that "one more byte" appends a zero */
    wide_tag_cut(&k, iv, data, 1099, 1099, whole);
    unsigned long differ = 0;
    for (size_t cut = 0; cut <= 1099; ++cut) {
        wide_tag_cut(&k, iv, data, 1099, cut, part);
        differ += 0 != memcmp(part, whole, 16);
    }
    CHECK_EQ_U(differ, 0);
    for (int bit = 0; bit < 1099 * 8; bit += 37) {
        data[bit / 8] ^= (uint8_t) (1u << (bit % 8));
        wide_tag_cut(&k, iv, data, 1099, 1099, other);
        data[bit / 8] ^= (uint8_t) (1u << (bit % 8));
        if (!CHECK(0 != memcmp(other, whole, 16))) {
            break;
        }
    }
    wide_tag_cut(&k, iv, data, 1100, 1100, other); /* the same bytes and a zero */
    CHECK(0 != memcmp(other, whole, 16));
    EVP_CIPHER_CTX_free(k.gcm);
    EVP_CIPHER_CTX_free(k.ecb);
}

UNIT_MAIN(UNIT_TEST(test_equals_openssl_small), UNIT_TEST(test_equals_openssl_large),
          UNIT_TEST(test_equals_libsodium), UNIT_TEST(test_pieces_and_changes))
#else
static void test_needs_libcrypto(void)
{
    fprintf(stderr, "test_ghash: NOT RUN: built without OpenSSL's libcrypto (the 512-bit GHASH serves its AES-GCM)\n");
}

UNIT_MAIN(UNIT_TEST(test_needs_libcrypto))
#endif
