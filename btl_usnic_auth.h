/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Datagram authentication: keys, their derivation, the tag every datagram
 * carries, and the anti-replay window.  System headers and libsodium only,
 * so that tests and tools can link it alone.  Design notes in
 * btl_usnic_auth.c.
 */
#ifndef OPAL_BTL_USNIC_AUTH_H
#define OPAL_BTL_USNIC_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

/* Built with OpenSSL's libcrypto (configure.m4 / Makefile find it): large
 * datagrams are tagged by its AES-GCM, and payloads gathered from
 * elsewhere need no copy under full protection.  0/1, tested with #if. */
#ifndef OPAL_BTL_USNIC_HAVE_LIBCRYPTO
#    define OPAL_BTL_USNIC_HAVE_LIBCRYPTO 0
#endif

#define OPAL_BTL_USNIC_KEY_BYTES 32 /* every key */
#define OPAL_BTL_USNIC_ID_BYTES 16  /* a module's random identity */
#define OPAL_BTL_USNIC_TAG_BYTES 16 /* the tag in every header */

/* What the tag covers (btl_usnic_protection) */
typedef enum {
    OPAL_BTL_USNIC_PROTECT_NONE = 0,   /* nothing: a trusted, private fabric */
    OPAL_BTL_USNIC_PROTECT_HEADER = 1, /* the header: stops anyone who cannot read the traffic */
    OPAL_BTL_USNIC_PROTECT_FULL = 2,   /* the whole datagram: stops on-path attackers too */
} opal_btl_usnic_protect_t;

/* How (bits of the modex's mac_algs; a pair uses the first both have) */
enum {
    OPAL_BTL_USNIC_MAC_AESGCM = 1,     /* AES-256-GCM: where the CPU has AES-NI and PCLMUL */
    OPAL_BTL_USNIC_MAC_CHACHAPOLY = 2, /* ChaCha20-Poly1305: everywhere */
};

/**
 * Start libsodium.  Returns the algorithms this process can run
 * (OPAL_BTL_USNIC_MAC_* bits), 0 if libsodium cannot start.
 */
unsigned opal_btl_usnic_auth_init(void);

/**
 * |n| bytes from the kernel's random generator (getrandom, waiting for it
 * to be seeded).  Returns 0, or -1: there is no fallback, a caller without
 * randomness must not run.
 */
int opal_btl_usnic_random(void *buf, size_t n);

/**
 * The key of one direction: from the module whose identity is |sender_id|
 * to the module whose receive key is |recv_key|.  BLAKE2b-256 keyed with
 * |recv_key| over a fixed label and |sender_id|.  Both ends compute it:
 * the sender from the receiver's modex, the receiver from its own key.
 */
void opal_btl_usnic_derive_key(const uint8_t recv_key[OPAL_BTL_USNIC_KEY_BYTES],
                               const uint8_t sender_id[OPAL_BTL_USNIC_ID_BYTES],
                               uint8_t out[OPAL_BTL_USNIC_KEY_BYTES]);

/* ----- the connectivity agents' probes (btl_usnic_connectivity.h) ----- */

/**
 * The key of every probe and echo of a job: BLAKE2b-256 keyed with the
 * job's agent key (rank 0's modex agent_key) over the label "usnic-btl
 * cagent v2", so that it never equals a datagram key (other label, other
 * input).
 */
void opal_btl_usnic_derive_agent_key(const uint8_t job_key[OPAL_BTL_USNIC_KEY_BYTES],
                                     uint8_t out[OPAL_BTL_USNIC_KEY_BYTES]);

/**
 * The tag of the |len| bytes at |data| under |key|: keyed BLAKE2b with a
 * 128-bit output.  No nonce: an agent echoes statelessly, and a probe
 * carries a random check id that makes every check's datagrams distinct.
 */
void opal_btl_usnic_agent_tag(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES], const uint8_t *data, size_t len,
                              uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES]);

/* Is |tag| the tag of |data| under |key|?  (constant time) */
bool opal_btl_usnic_agent_tag_check(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES], const uint8_t *data, size_t len,
                                    const uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES]);

/* The first algorithm both |mine| and |theirs| (OPAL_BTL_USNIC_MAC_* bits)
 * can run, 0 if none */
unsigned opal_btl_usnic_mac_pick(unsigned mine, unsigned theirs);

/* A key ready to tag or check datagrams of one direction */
typedef struct opal_btl_usnic_mac_t {
    unsigned alg;                      /* OPAL_BTL_USNIC_MAC_*; 0 = no key (protection none) */
    uint8_t key[OPAL_BTL_USNIC_KEY_BYTES];
    crypto_aead_aes256gcm_state aes;   /* expanded key (AES-GCM only) */
    void *gcm;                         /* AES-GCM through OpenSSL's GHASH (btl_usnic_auth.c), the
                                          same tags faster; NULL without libcrypto: libsodium */
} opal_btl_usnic_mac_t;

/* Initialize |m| for |alg| with |key|; opal_btl_usnic_mac_clear undoes it */
void opal_btl_usnic_mac_init(opal_btl_usnic_mac_t *m, unsigned alg, const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES]);
void opal_btl_usnic_mac_clear(opal_btl_usnic_mac_t *m);

/* Can a datagram whose payload lies elsewhere be tagged without copying
 * it (opal_btl_usnic_mac_tag2 streaming both parts)?  True where built
 * with libcrypto: libsodium's AES-GCM takes one contiguous buffer only. */
bool opal_btl_usnic_mac_gathers(void);

/**
 * The tag of the |len| bytes at |data| (the covered part of a datagram,
 * its tag field zeroed) under |nonce|, which must never repeat under one
 * key.  An AEAD with |data| as associated data and no plaintext.
 */
void opal_btl_usnic_mac_tag(const opal_btl_usnic_mac_t *m, uint64_t nonce, const uint8_t *data, size_t len,
                            uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES]);

/* The tag of the |alen| bytes at |a| followed by the |blen| bytes at |b|
 * (a header in our buffer and a payload gathered from the user's):
 * the same as opal_btl_usnic_mac_tag of the two side by side */
void opal_btl_usnic_mac_tag2(const opal_btl_usnic_mac_t *m, uint64_t nonce, const uint8_t *a, size_t alen,
                             const uint8_t *b, size_t blen, uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES]);

/* Is |tag| the tag of |data| under |nonce|?  (constant time) */
bool opal_btl_usnic_mac_check(const opal_btl_usnic_mac_t *m, uint64_t nonce, const uint8_t *data, size_t len,
                              const uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES]);

/* ----- nonces ----- */

/* A nonce is a generation (the sending module's count of endpoints it
 * made, so a new endpoint never reuses an old one's numbers) and a count
 * of the datagrams the endpoint sent.  0 is never used. */
#define OPAL_BTL_USNIC_NONCE_COUNT_BITS 40
static inline uint64_t opal_btl_usnic_nonce_first(uint32_t generation)
{
    return ((uint64_t) generation << OPAL_BTL_USNIC_NONCE_COUNT_BITS) | 1u;
}

/* ----- anti-replay ----- */

/* Nonces behind the highest still taken once.  One nonce count serves
 * both channels, and a datagram queued in the receiver's data socket
 * falls behind by everything its sender posts meanwhile: a window of data
 * segments, their copies, and the ACKs and tiny fragments that overtake
 * it on the priority channel (a 4 MiB socket of the ofi wire holds ~1800
 * datagrams of 1472 bytes).  A window too small drops authentic
 * datagrams as stale, and their data comes again: a loss the network
 * never caused.  btl_usnic_endpoint.h checks it against the largest send
 * window. */
#define OPAL_BTL_USNIC_REPLAY_WINDOW 16384

/* Which authentic nonces of one direction arrived: the highest, and a
 * bitmap of the REPLAY_WINDOW below and at it (bit n % WINDOW) */
typedef struct opal_btl_usnic_replay_t {
    uint64_t highest; /* 0: none yet */
    uint64_t bits[OPAL_BTL_USNIC_REPLAY_WINDOW / 64];
} opal_btl_usnic_replay_t;

typedef enum {
    OPAL_BTL_USNIC_REPLAY_NEW,   /* take it */
    OPAL_BTL_USNIC_REPLAY_SEEN,  /* this nonce came before: a copy */
    OPAL_BTL_USNIC_REPLAY_STALE, /* too far behind the highest to tell: dropped */
} opal_btl_usnic_replay_verdict_t;

/* Pure: what |nonce| is to |w| */
opal_btl_usnic_replay_verdict_t opal_btl_usnic_replay_check(const opal_btl_usnic_replay_t *w, uint64_t nonce);

/* Record |nonce| (checked NEW, and its datagram authentic) */
void opal_btl_usnic_replay_accept(opal_btl_usnic_replay_t *w, uint64_t nonce);

#endif /* OPAL_BTL_USNIC_AUTH_H */
