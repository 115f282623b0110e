/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * mac_speed.c - what a datagram's tag costs, per path: the usnic BTL's
 * AES-GCM tag with the 512-bit GHASH (btl_usnic_ghash.c), with OpenSSL's
 * GHASH (CRYPTO_gcm128, the path before it), OpenSSL 3's EVP
 * AES-256-GCM with a reused context, and libsodium's one-shot; ns per tag
 * and GB/s at 0, 64, 128, 256, 1472, 8972 and 65000 bytes (medians of 5 rounds).
 * Build and run (from the top of the repository; bench/README.md):
 *
 *   gcc -O2 -I. -Ibench/standalone -DOPAL_BTL_USNIC_HAVE_LIBCRYPTO=1 \
 *       bench/mac_speed.c btl_usnic_auth.c btl_usnic_ghash.c -o bench/build/mac_speed -lsodium -lcrypto
 *   bench/build/mac_speed
 */
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "btl_usnic_auth.h"
#include "btl_usnic_ghash.h"

#define ROUNDS 5

static uint8_t buf[65536];
static volatile uint8_t sink;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

typedef void (*tag_fn)(size_t len, uint64_t i);

static opal_btl_usnic_mac_t mac_wide, mac_narrow;
static EVP_CIPHER_CTX *evp;
static crypto_aead_aes256gcm_state sodium_state;

static void tag_wide(size_t len, uint64_t i)
{
    uint8_t tag[16];
    opal_btl_usnic_mac_tag(&mac_wide, i, buf, len, tag);
    sink ^= tag[0];
}

static void tag_narrow(size_t len, uint64_t i)
{
    uint8_t tag[16];
    opal_btl_usnic_mac_tag(&mac_narrow, i, buf, len, tag);
    sink ^= tag[0];
}

static void tag_evp(size_t len, uint64_t i)
{
    uint8_t iv[12] = {0}, tag[16];
    int n = 0;
    memcpy(iv, &i, sizeof(i));
    EVP_EncryptInit_ex(evp, NULL, NULL, NULL, iv);
    if (0 != len) {
        EVP_EncryptUpdate(evp, NULL, &n, buf, (int) len);
    }
    EVP_EncryptFinal_ex(evp, tag, &n);
    EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_GCM_GET_TAG, 16, tag);
    sink ^= tag[0];
}

static void tag_sodium(size_t len, uint64_t i)
{
    uint8_t iv[12] = {0}, tag[16], none[1] = {0};
    unsigned long long tl = 0;
    memcpy(iv, &i, sizeof(i));
    crypto_aead_aes256gcm_encrypt_detached_afternm(none, tag, &tl, none, 0, buf, len, NULL, iv, &sodium_state);
    sink ^= tag[0];
}

static double ns_per_tag(tag_fn f, size_t len)
{
    unsigned iters = len > 9000 ? 4000 : 100000;
    double r[ROUNDS];
    for (int k = 0; k < ROUNDS; ++k) {
        double t0 = now_ns();
        for (unsigned i = 0; i < iters; ++i) {
            f(len, i);
        }
        r[k] = (now_ns() - t0) / iters;
    }
    qsort(r, ROUNDS, sizeof(r[0]), cmp);
    return r[ROUNDS / 2];
}

int main(void)
{
    if (!(opal_btl_usnic_auth_init() & OPAL_BTL_USNIC_MAC_AESGCM)) {
        fprintf(stderr, "mac_speed: no AES-GCM on this CPU\n");
        return 1;
    }
    uint8_t key[32];
    randombytes_buf(key, sizeof(key));
    randombytes_buf(buf, sizeof(buf));
    bool wide = opal_btl_usnic_ghash_available();
    opal_btl_usnic_mac_wide_ghash(true);
    opal_btl_usnic_mac_init(&mac_wide, OPAL_BTL_USNIC_MAC_AESGCM, key);
    opal_btl_usnic_mac_wide_ghash(false);
    opal_btl_usnic_mac_init(&mac_narrow, OPAL_BTL_USNIC_MAC_AESGCM, key);
    evp = EVP_CIPHER_CTX_new();
    EVP_EncryptInit_ex(evp, EVP_aes_256_gcm(), NULL, key, NULL);
    crypto_aead_aes256gcm_beforenm(&sodium_state, key);

    static const size_t lens[] = {0, 64, 128, 256, 1472, 8972, 65000};
    static const struct {
        const char *name;
        tag_fn f;
    } paths[] = {{"usnic, 512-bit GHASH", tag_wide},
                 {"usnic, OpenSSL's GHASH", tag_narrow},
                 {"OpenSSL EVP (reused ctx)", tag_evp},
                 {"libsodium one-shot", tag_sodium}};
    printf("ns per AES-256-GCM tag (GB/s); 512-bit GHASH %s on this CPU\n", wide ? "available" : "NOT available (row = OpenSSL's)");
    printf("%-26s", "path \\ bytes");
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); ++l) {
        printf(" %16zu", lens[l]);
    }
    printf("\n");
    for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); ++p) {
        printf("%-26s", paths[p].name);
        for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); ++l) {
            double ns = ns_per_tag(paths[p].f, lens[l]);
            printf(" %7.1f (%5.1f)", ns, lens[l] / ns);
        }
        printf("\n");
    }
    opal_btl_usnic_mac_clear(&mac_wide);
    opal_btl_usnic_mac_clear(&mac_narrow);
    EVP_CIPHER_CTX_free(evp);
    return 0;
}
