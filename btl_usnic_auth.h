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
 * Protocol 8's key of one direction, from material the modex published
 * (BLAKE2b-256 keyed with the receiver's |recv_key| over a label and
 * |sender_id|): only for the test build that shows what a reader of the
 * modex could forge (OPAL_BTL_USNIC_TEST_MODEX_KEYS, btl_usnic_peers.c).
 */
void opal_btl_usnic_derive_key(const uint8_t recv_key[OPAL_BTL_USNIC_KEY_BYTES],
                               const uint8_t sender_id[OPAL_BTL_USNIC_ID_BYTES],
                               uint8_t out[OPAL_BTL_USNIC_KEY_BYTES]);

/* ----- pair keys (protocol 9): X25519, and the launcher's secret ----- */

#define OPAL_BTL_USNIC_DH_BYTES 32 /* an X25519 key, secret or public */

/* A module's X25519 key pair: |secret| from the kernel, |public_key| its
 * image.  Returns 0, or -1 without randomness. */
int opal_btl_usnic_dh_keypair(uint8_t secret[OPAL_BTL_USNIC_DH_BYTES], uint8_t public_key[OPAL_BTL_USNIC_DH_BYTES]);

/* What the launcher's per-job secret (an environment variable) is worth */
typedef enum {
    OPAL_BTL_USNIC_SECRET_NONE,  /* not set */
    OPAL_BTL_USNIC_SECRET_WEAK,  /* set, but made of job ids (Open MPI 4.1 under a direct launch) */
    OPAL_BTL_USNIC_SECRET_GOOD,  /* 128 random bits or more, as mpirun makes it */
} opal_btl_usnic_secret_kind_t;

/* The job's secret: its key (hashed from the variable's value) and its
 * public name (a hash of the key, published so that two modules can tell
 * whether they share it; all zero = none) */
typedef struct opal_btl_usnic_job_secret_t {
    opal_btl_usnic_secret_kind_t kind;
    uint8_t key[OPAL_BTL_USNIC_KEY_BYTES];
    uint8_t id[OPAL_BTL_USNIC_ID_BYTES];
} opal_btl_usnic_job_secret_t;

/* Pure: |value| (NULL = unset) judged and hashed into |out|; only a GOOD
 * secret gets a key and an id */
void opal_btl_usnic_job_secret_parse(const char *value, opal_btl_usnic_job_secret_t *out);

/* One end of a pair, as both ends see it (btl_usnic_peers.c) */
typedef struct opal_btl_usnic_pair_end_t {
    const uint8_t *id;         /* OPAL_BTL_USNIC_ID_BYTES: the module's identity */
    const uint8_t *public_key; /* OPAL_BTL_USNIC_DH_BYTES */
} opal_btl_usnic_pair_end_t;

/**
 * The keys of both directions between |me| (whose X25519 secret is
 * |my_secret|) and |peer|: the shared X25519 value, mixed with |job_key|
 * where both ends hold the same launcher secret (NULL otherwise), hashed
 * with both ends' identities and public keys in the direction's order.
 * What the modex holds (public keys, identities) is not enough to make
 * them.  Returns 0, or -1 if |peer|'s public key is a low-order point
 * (the shared value would be known to anyone).
 */
int opal_btl_usnic_pair_keys(const uint8_t my_secret[OPAL_BTL_USNIC_DH_BYTES], opal_btl_usnic_pair_end_t me,
                             opal_btl_usnic_pair_end_t peer, const uint8_t *job_key,
                             uint8_t tx_key[OPAL_BTL_USNIC_KEY_BYTES], uint8_t rx_key[OPAL_BTL_USNIC_KEY_BYTES]);

/* ----- the connectivity agents' probes (btl_usnic_connectivity.h) ----- */

/**
 * The key of every probe and echo of a job: BLAKE2b-256 keyed with the
 * job's agent key (the launcher's secret's key where the job has one,
 * else rank 0's modex agent_key) over the label "usnic-btl cagent v2", so
 * that it never equals a datagram key (other label, other input).
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

/* A key ready to tag or check datagrams of one direction.  One thread at
 * a time (the BTL lock): it keeps the masks of the nonces to come. */
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

/* AES-GCM tags through the 512-bit GHASH (btl_usnic_ghash.c) where the
 * CPU has it (the default), or through OpenSSL's GHASH (false; for the
 * unit tests).  Keys set up after the call follow it. */
void opal_btl_usnic_mac_wide_ghash(bool on);

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
#define OPAL_BTL_USNIC_NONCE_COUNT_MASK ((1ull << OPAL_BTL_USNIC_NONCE_COUNT_BITS) - 1)
#define OPAL_BTL_USNIC_NONCE_GENERATIONS (1u << (64 - OPAL_BTL_USNIC_NONCE_COUNT_BITS))
/* The count at which an endpoint stops (its peer fails, btl_usnic_post.c):
 * what it seals between reaching it and the engine's next progress pass
 * (a window and some ACKs) is far below the 2^32 counts left above it */
#define OPAL_BTL_USNIC_NONCE_COUNT_STOP (OPAL_BTL_USNIC_NONCE_COUNT_MASK - 0xffffffffull)
static inline uint64_t opal_btl_usnic_nonce_first(uint32_t generation)
{
    return ((uint64_t) generation << OPAL_BTL_USNIC_NONCE_COUNT_BITS) | 1u;
}

/* Has the endpoint that sealed with |nonce| used up its counts? */
static inline bool opal_btl_usnic_nonce_spent(uint64_t nonce)
{
    return (nonce & OPAL_BTL_USNIC_NONCE_COUNT_MASK) >= OPAL_BTL_USNIC_NONCE_COUNT_STOP;
}

/* The key of incarnation |n| of an endpoint whose keys are |key|
 * (BLAKE2b keyed with it, over a label and |n|); incarnation 0 keeps
 * |key|.  Both ends count the endpoints they released to each other
 * (btl_usnic_endpoint.c), so an endpoint made again to the same peer
 * never takes a datagram of an earlier one. */
void opal_btl_usnic_incarnation_key(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES], uint32_t n,
                                    uint8_t out[OPAL_BTL_USNIC_KEY_BYTES]);

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
