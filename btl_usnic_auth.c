/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Datagram authentication.
 *
 * Design notes
 * ------------
 * Threat.  Anyone may send us datagrams: a local user without privileges,
 * another job, a host on the network, a sniffer on the path.  Only the
 * job's own processes share secrets: the modex is readable only by them.
 * Nothing derived from job ids, pids or clocks is a secret, so every key
 * comes from getrandom (no fallback: a process without kernel randomness
 * does not run this BTL).
 *
 * Keys.  The modex is not a secret channel: PMIx's TCP handshake takes
 * the uid a client asserts, and a local user of another uid who connects
 * as a rank of the job reads every rank's entries where the server keeps
 * them in its hash store (measured with Open MPI 4.1.4, PMIx 4.2,
 * PMIX_MCA_gds=hash).  So the modex carries only public values: every
 * module draws an X25519 key pair and a 16-byte identity and publishes the
 * public key and the identity.  The two modules of a pair compute the
 * same X25519 value; a pair key is BLAKE2b(key = that value, "usnic-btl
 * pair v3" || the launcher's secret's key where both hold the same one),
 * and the key of the direction A -> B is BLAKE2b(key = the pair key,
 * "usnic-btl key v3" || A's identity || A's public key || B's identity ||
 * B's public key).  It differs for every ordered pair of modules, so a
 * datagram cannot be replayed to another peer, another module or another
 * job, and one direction's nonces never meet another's.  A reader of the
 * modex lacks both X25519 secrets; a writer that could replace a rank's
 * entry before the others read it (a man in the middle of the modex)
 * still lacks the launcher's secret where the job has one.
 *
 * The launcher's secret.  Open MPI 4.1's mpirun puts 128 random bits into
 * every process's environment (OMPI_MCA_orte_precondition_transports, made
 * for PSM): it travels in mpirun's launch message to the daemons, which
 * put it into the environment of the processes they start, not into
 * PMIx's store, and another uid cannot read /proc/PID/environ.  Under a
 * direct launch Open MPI 4.1 makes it from job ids instead (not secret:
 * opal_btl_usnic_job_secret_parse refuses it).  Open MPI 5.0's PRRTE sets
 * it only through PMIx's pnet/opa, on hosts with Omni-Path adapters, and
 * then also stores it in PMIx as PMIX_CREDENTIAL: there it adds nothing
 * against a PMIx reader, and elsewhere 5.0 jobs have none.  Jobs joined
 * by spawn or connect/accept have different secrets: their pairs are keyed
 * by X25519 alone (a verbose line says so once).
 *
 * Cost: one X25519 and three BLAKE2b per pair, once, when the endpoint
 * is made: 0.10-0.14 ms on this project's test VM (protocol 8's two
 * BLAKE2b: under 1 us), so 0.1 s per thousand peers per module at
 * add_procs.
 *
 * Tag.  An AEAD with the datagram as associated data and nothing
 * encrypted (MPI data is not secret here; its integrity and origin are):
 * AES-256-GCM where both ends' CPUs have AES-NI and PCLMUL (about 55 ns
 * for a header, 300 ns for 1472 bytes on this project's test machines),
 * ChaCha20-Poly1305 otherwise (about 200 / 640 ns); both from libsodium, a
 * small audited library, through its one-shot calls.  Where the component
 * is built with OpenSSL's libcrypto, AES-GCM tags come from OpenSSL's GCM
 * code instead (see "AES-256-GCM through OpenSSL's GHASH" below): the
 * same tag, half the time at 1472 bytes and less than half for the socket
 * wire's 65 KB datagrams, and the associated data in pieces, so a PUT's
 * payload is tagged where it lies (no copy); ChaCha20-Poly1305 in pieces
 * streams libsodium's Poly1305.  SipHash would need
 * no nonce but costs 740 ns per 1472 bytes and gives a 64-bit tag; keyed
 * BLAKE2b and HMAC-SHA256 cost 1.8 and 2.4 us.  The 96-bit nonce is the
 * header's 64-bit nonce field and 32 zero bits.
 *
 * Nonces.  A nonce must never repeat under one key (a repeated GCM nonce
 * reveals the authentication key).  Each endpoint counts its datagrams
 * (first transmissions, retransmissions and ACKs alike) in the low 40
 * bits, above a generation its module hands out once per endpoint it
 * makes; a new endpoint to the same peer therefore starts above every
 * number the old one used.  2^40 datagrams to one peer take about 30
 * hours at 10 million a second: an endpoint stops 2^32 short of them (its
 * peer fails with a message, "nonces used up"), and a module makes at
 * most 2^24 endpoints (then it refuses new peers), so no count and no
 * generation ever wraps.
 *
 * Incarnations.  An endpoint made again to the same peer (Open MPI 4.1
 * and 5.0 release endpoints only at finalize; a release at disconnect
 * would make it happen) would get the same keys, the same first sequence
 * numbers and an empty replay window.  So both ends count the endpoints
 * they released to each other (the engine, by peer), and incarnation n's
 * keys are BLAKE2b(key = the pair's key, "usnic-btl incarnate" || n): no
 * datagram of an earlier incarnation passes a later one's tag.  Both ends
 * release together when they disconnect; an end that re-made its
 * endpoint alone would find its peer silent and report it (peer timeout).
 *
 * Replay.  An authentic datagram is taken at most once: the receiver keeps
 * a window of OPAL_BTL_USNIC_REPLAY_WINDOW (16384) nonces per peer.  An
 * authentic nonce too far behind the newest is dropped (its data, if any,
 * comes again with a new nonce).
 * Sequence numbers already make data idempotent; the window also keeps a
 * recorded ACK or a copy of any datagram from being taken twice.
 *
 * Connectivity probes.  The agents of a job share one key, derived
 * (BLAKE2b, its own label) from the launcher's secret where the job has
 * one (rank 0 then publishes no agent key), else from rank 0's random
 * agent key, which every process of the job reads from rank 0's modex (a
 * reader of PMIx could then forge probes and echoes: README.txt,
 * "Security").  Their probes are tagged
 * by keyed BLAKE2b-128: an agent echoes without keeping state, so there
 * is no nonce to give an AEAD; the probe's random check id makes each
 * check's datagrams distinct.
 *
 * What each protection mode (btl_usnic_protection) stops is in README.txt.
 */
#include "opal_config.h"

#include "btl_usnic_auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#if OPAL_BTL_USNIC_HAVE_LIBCRYPTO
#    include <immintrin.h>
#    include <openssl/modes.h>

#    include "btl_usnic_ghash.h"
#endif

unsigned opal_btl_usnic_auth_init(void)
{
    if (sodium_init() < 0) {
        return 0;
    }
    return OPAL_BTL_USNIC_MAC_CHACHAPOLY | (crypto_aead_aes256gcm_is_available() ? OPAL_BTL_USNIC_MAC_AESGCM : 0u);
}

int opal_btl_usnic_random(void *buf, size_t n)
{
    uint8_t *p = (uint8_t *) buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0); /* waits until the kernel's generator is seeded */
        if (got < 0) {
            if (EINTR == errno) {
                continue;
            }
            return -1;
        }
        p += got;
        n -= (size_t) got;
    }
    return 0;
}

void opal_btl_usnic_derive_key(const uint8_t recv_key[OPAL_BTL_USNIC_KEY_BYTES],
                               const uint8_t sender_id[OPAL_BTL_USNIC_ID_BYTES],
                               uint8_t out[OPAL_BTL_USNIC_KEY_BYTES])
{
    static const char label[16] = "usnic-btl key v2";
    uint8_t msg[sizeof(label) + OPAL_BTL_USNIC_ID_BYTES];
    memcpy(msg, label, sizeof(label));
    memcpy(msg + sizeof(label), sender_id, OPAL_BTL_USNIC_ID_BYTES);
    crypto_generichash(out, OPAL_BTL_USNIC_KEY_BYTES, msg, sizeof(msg), recv_key, OPAL_BTL_USNIC_KEY_BYTES);
}

int opal_btl_usnic_dh_keypair(uint8_t secret[OPAL_BTL_USNIC_DH_BYTES], uint8_t public_key[OPAL_BTL_USNIC_DH_BYTES])
{
    if (0 != opal_btl_usnic_random(secret, OPAL_BTL_USNIC_DH_BYTES)) {
        return -1;
    }
    return crypto_scalarmult_base(public_key, secret);
}

/* Open MPI 4.1's ess/pmi, when no launcher gave a secret, prints the job
 * family and local job id (16 bits each) as "%016lx-%016lx": both words
 * small.  Two random 64-bit words below 2^32 come once in 2^64. */
static bool secret_is_job_ids(const char *value)
{
    char *end = NULL;
    errno = 0;
    unsigned long long hi = strtoull(value, &end, 16);
    if (0 != errno || end == value || '-' != *end) {
        return false;
    }
    const char *second = end + 1;
    unsigned long long lo = strtoull(second, &end, 16);
    if (0 != errno || end == second || '\0' != *end) {
        return false;
    }
    return hi < (1ull << 32) && lo < (1ull << 32);
}

void opal_btl_usnic_job_secret_parse(const char *value, opal_btl_usnic_job_secret_t *out)
{
    static const char key_label[] = "usnic-btl job secret v1";
    static const char id_label[] = "usnic-btl job secret id";
    memset(out, 0, sizeof(*out));
    if (NULL == value || '\0' == value[0]) {
        out->kind = OPAL_BTL_USNIC_SECRET_NONE;
        return;
    }
    /* 32 hex digits carry 128 bits; fewer, or job ids, carry too few */
    if (strlen(value) < 32 || secret_is_job_ids(value)) {
        out->kind = OPAL_BTL_USNIC_SECRET_WEAK;
        return;
    }
    out->kind = OPAL_BTL_USNIC_SECRET_GOOD;
    crypto_generichash(out->key, sizeof(out->key), (const uint8_t *) value, strlen(value),
                       (const uint8_t *) key_label, sizeof(key_label) - 1);
    crypto_generichash(out->id, sizeof(out->id), (const uint8_t *) id_label, sizeof(id_label) - 1, out->key,
                       sizeof(out->key));
}

/* The key of the direction |from| -> |to| under the pair's key |prk| */
static void direction_key(const uint8_t prk[OPAL_BTL_USNIC_KEY_BYTES], opal_btl_usnic_pair_end_t from,
                          opal_btl_usnic_pair_end_t to, uint8_t out[OPAL_BTL_USNIC_KEY_BYTES])
{
    static const char label[16] = "usnic-btl key v3";
    uint8_t msg[sizeof(label) + 2 * (OPAL_BTL_USNIC_ID_BYTES + OPAL_BTL_USNIC_DH_BYTES)];
    uint8_t *p = msg;
    memcpy(p, label, sizeof(label));
    p += sizeof(label);
    memcpy(p, from.id, OPAL_BTL_USNIC_ID_BYTES);
    p += OPAL_BTL_USNIC_ID_BYTES;
    memcpy(p, from.public_key, OPAL_BTL_USNIC_DH_BYTES);
    p += OPAL_BTL_USNIC_DH_BYTES;
    memcpy(p, to.id, OPAL_BTL_USNIC_ID_BYTES);
    p += OPAL_BTL_USNIC_ID_BYTES;
    memcpy(p, to.public_key, OPAL_BTL_USNIC_DH_BYTES);
    crypto_generichash(out, OPAL_BTL_USNIC_KEY_BYTES, msg, sizeof(msg), prk, OPAL_BTL_USNIC_KEY_BYTES);
}

int opal_btl_usnic_pair_keys(const uint8_t my_secret[OPAL_BTL_USNIC_DH_BYTES], opal_btl_usnic_pair_end_t me,
                             opal_btl_usnic_pair_end_t peer, const uint8_t *job_key,
                             uint8_t tx_key[OPAL_BTL_USNIC_KEY_BYTES], uint8_t rx_key[OPAL_BTL_USNIC_KEY_BYTES])
{
    static const char label[17] = "usnic-btl pair v3";
    uint8_t shared[crypto_scalarmult_BYTES];
    if (0 != crypto_scalarmult(shared, my_secret, peer.public_key)) {
        return -1; /* libsodium refuses an all-zero result */
    }
    uint8_t msg[sizeof(label) + 1 + OPAL_BTL_USNIC_KEY_BYTES];
    size_t len = sizeof(label) + 1;
    memcpy(msg, label, sizeof(label));
    msg[sizeof(label)] = (NULL != job_key);
    if (NULL != job_key) {
        memcpy(msg + len, job_key, OPAL_BTL_USNIC_KEY_BYTES);
        len += OPAL_BTL_USNIC_KEY_BYTES;
    }
    uint8_t prk[OPAL_BTL_USNIC_KEY_BYTES];
    crypto_generichash(prk, sizeof(prk), msg, len, shared, sizeof(shared));
    direction_key(prk, me, peer, tx_key);
    direction_key(prk, peer, me, rx_key);
    sodium_memzero(shared, sizeof(shared));
    sodium_memzero(msg, sizeof(msg));
    sodium_memzero(prk, sizeof(prk));
    return 0;
}

void opal_btl_usnic_incarnation_key(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES], uint32_t n,
                                    uint8_t out[OPAL_BTL_USNIC_KEY_BYTES])
{
    static const char label[19] = "usnic-btl incarnate";
    if (0 == n) {
        memmove(out, key, OPAL_BTL_USNIC_KEY_BYTES);
        return;
    }
    uint8_t msg[sizeof(label) + 4];
    memcpy(msg, label, sizeof(label));
    for (int i = 0; i < 4; ++i) {
        msg[sizeof(label) + i] = (uint8_t) (n >> (8 * i)); /* little-endian on every host */
    }
    uint8_t tmp[OPAL_BTL_USNIC_KEY_BYTES];
    crypto_generichash(tmp, sizeof(tmp), msg, sizeof(msg), key, OPAL_BTL_USNIC_KEY_BYTES);
    memcpy(out, tmp, sizeof(tmp));
    sodium_memzero(tmp, sizeof(tmp));
}

void opal_btl_usnic_derive_agent_key(const uint8_t job_key[OPAL_BTL_USNIC_KEY_BYTES],
                                     uint8_t out[OPAL_BTL_USNIC_KEY_BYTES])
{
    static const char label[] = "usnic-btl cagent v2";
    crypto_generichash(out, OPAL_BTL_USNIC_KEY_BYTES, (const uint8_t *) label, sizeof(label) - 1, job_key,
                       OPAL_BTL_USNIC_KEY_BYTES);
}

void opal_btl_usnic_agent_tag(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES], const uint8_t *data, size_t len,
                              uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    crypto_generichash(tag, OPAL_BTL_USNIC_TAG_BYTES, data, len, key, OPAL_BTL_USNIC_KEY_BYTES);
}

bool opal_btl_usnic_agent_tag_check(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES], const uint8_t *data, size_t len,
                                    const uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    uint8_t want[OPAL_BTL_USNIC_TAG_BYTES];
    opal_btl_usnic_agent_tag(key, data, len, want);
    return 0 == sodium_memcmp(want, tag, OPAL_BTL_USNIC_TAG_BYTES);
}

unsigned opal_btl_usnic_mac_pick(unsigned mine, unsigned theirs)
{
    unsigned both = mine & theirs;
    if (both & OPAL_BTL_USNIC_MAC_AESGCM) {
        return OPAL_BTL_USNIC_MAC_AESGCM;
    }
    return (both & OPAL_BTL_USNIC_MAC_CHACHAPOLY) ? OPAL_BTL_USNIC_MAC_CHACHAPOLY : 0u;
}

/* ----- AES-256-GCM through OpenSSL's GHASH (where built with libcrypto) -----
 *
 * A tag with nothing encrypted is GHASH over the datagram, masked with
 * one AES block.  OpenSSL's GCM code (CRYPTO_gcm128_*, <openssl/modes.h>)
 * has the fastest GHASH here (PCLMULQDQ/AVX: 17 GB/s, against 6.5 for
 * libsodium's) and takes the associated data in pieces; it needs a block
 * cipher only for the hash key and the mask, and OpenSSL's own
 * AES_encrypt is table-driven (100 ns a block) and deprecated, so the
 * block function is ours: AES-256 with AES-NI (the AES-GCM algorithm is
 * only ever chosen where the CPU has AES-NI and PCLMUL, see
 * opal_btl_usnic_auth_init).  Where the CPU has VPCLMULQDQ and AVX-512
 * the hash is btl_usnic_ghash.c's instead (64 blocks per reduction,
 * four per 512-bit register, masks made ahead: 1472 bytes 65 ns against
 * OpenSSL's 131, 65000 1.8 us against 4.0; up to MAC_SMALL bytes 128-bit
 * multiplies and one reduction, 15-23 ns against libsodium's 30-45).
 * Without it, up to MAC_SMALL bytes libsodium's one-shot, the fastest
 * there (bench/mac_speed.c). */

/* Up to this many bytes (headers, ACKs, small messages) libsodium's
 * one-shot AES-GCM is faster than OpenSSL's GHASH path (bench/mac_speed.c
 * when it was chosen: 33 ns for 64 bytes against 50); the 512-bit
 * GHASH's small path is faster still (19 ns; 8-byte ping-pong 0.974x). */
#define MAC_SMALL 128

#if OPAL_BTL_USNIC_HAVE_LIBCRYPTO
#    define GCM_TARGET __attribute__((target("aes,sse2")))

/* Masks made at once for this many consecutive nonces.  A direction's
 * nonces count up by one per datagram, so a tag finds its mask made;
 * eight independent AES chains take about the time of one (AESENC's
 * latency is several cycles, its throughput one or two per cycle).
 * Without them one AES-256 block (14 dependent rounds) stood in every
 * tag's path: 1472-byte datagrams' 16 KiB ping-pong 4 % slower.  Forged
 * datagrams with nonces all over make a batch each: about the time of
 * the one block they cost before. */
#    define GCM_MASKS 8

typedef struct opal_btl_usnic_gcm_t {
    opal_btl_usnic_ghash_key_t wide;   /* the hash key's powers, where the 512-bit GHASH runs */
    __m128i rk[15];                    /* the AES-256 round keys */
    __m128i masks[GCM_MASKS];          /* AES_K(nonce mask_base + i || 0^31 || 1) */
    uint64_t mask_base;
    GCM128_CONTEXT *ctx;               /* OpenSSL's GCM state, keyed by the block function below */
    bool use_wide;                     /* tags through btl_usnic_ghash.c */
} opal_btl_usnic_gcm_t;

/* The 512-bit GHASH where the CPU has it (decided once; the unit tests
 * switch it off to test OpenSSL's path too) */
static int wide_ghash = -1;

void opal_btl_usnic_mac_wide_ghash(bool on)
{
    wide_ghash = on && opal_btl_usnic_ghash_available();
}

static bool wide_ghash_on(void)
{
    if (wide_ghash < 0) {
        wide_ghash = opal_btl_usnic_ghash_available();
    }
    return 1 == wide_ghash;
}

/* One step of the AES-256 key schedule (FIPS-197 5.2): |prev| is the
 * round key two steps back, |assist| what AESKEYGENASSIST made of the
 * last one (its word 3 for even steps, word 2 for odd ones) */
GCM_TARGET static __m128i key_step(__m128i prev, __m128i assist)
{
    __m128i t = _mm_slli_si128(prev, 4);
    prev = _mm_xor_si128(prev, t);
    t = _mm_slli_si128(t, 4);
    prev = _mm_xor_si128(prev, t);
    t = _mm_slli_si128(t, 4);
    prev = _mm_xor_si128(prev, t);
    return _mm_xor_si128(prev, assist);
}

#    define GCM_EVEN(i, rcon) \
        g->rk[i] = key_step(g->rk[(i) - 2], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(g->rk[(i) - 1], rcon), 0xff))
#    define GCM_ODD(i) \
        g->rk[i] = key_step(g->rk[(i) - 2], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(g->rk[(i) - 1], 0), 0xaa))

GCM_TARGET static void gcm_expand_key(opal_btl_usnic_gcm_t *g, const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES])
{
    g->rk[0] = _mm_loadu_si128((const __m128i *) key);
    g->rk[1] = _mm_loadu_si128((const __m128i *) (key + 16));
    GCM_EVEN(2, 0x01);
    GCM_ODD(3);
    GCM_EVEN(4, 0x02);
    GCM_ODD(5);
    GCM_EVEN(6, 0x04);
    GCM_ODD(7);
    GCM_EVEN(8, 0x08);
    GCM_ODD(9);
    GCM_EVEN(10, 0x10);
    GCM_ODD(11);
    GCM_EVEN(12, 0x20);
    GCM_ODD(13);
    GCM_EVEN(14, 0x40);
}

/* OpenSSL's block128_f: |out| = AES-256(|in|) under the round keys at |key| */
GCM_TARGET static void gcm_block(const unsigned char in[16], unsigned char out[16], const void *key)
{
    const opal_btl_usnic_gcm_t *g = (const opal_btl_usnic_gcm_t *) key;
    __m128i b = _mm_xor_si128(_mm_loadu_si128((const __m128i *) in), g->rk[0]);
    for (int r = 1; r < 14; ++r) {
        b = _mm_aesenc_si128(b, g->rk[r]);
    }
    _mm_storeu_si128((__m128i *) out, _mm_aesenclast_si128(b, g->rk[14]));
}

/* The counter block J0 of |nonce|: the 12-byte IV (the nonce's 8 bytes,
 * little-endian, then 4 zero bytes, see nonce_bytes) and a 32-bit
 * big-endian 1 */
GCM_TARGET static inline __m128i j0_block(uint64_t nonce)
{
    return _mm_set_epi64x((long long) (1ull << 56), (long long) nonce);
}

/* The masks of nonces |base| .. |base| + GCM_MASKS - 1, interleaved */
GCM_TARGET static void masks_make(opal_btl_usnic_gcm_t *g, uint64_t base)
{
    __m128i b[GCM_MASKS];
#    pragma GCC unroll 8
    for (int i = 0; i < GCM_MASKS; ++i) {
        b[i] = _mm_xor_si128(j0_block(base + (uint64_t) i), g->rk[0]);
    }
    for (int r = 1; r < 14; ++r) {
#    pragma GCC unroll 8
        for (int i = 0; i < GCM_MASKS; ++i) {
            b[i] = _mm_aesenc_si128(b[i], g->rk[r]);
        }
    }
#    pragma GCC unroll 8
    for (int i = 0; i < GCM_MASKS; ++i) {
        g->masks[i] = _mm_aesenclast_si128(b[i], g->rk[14]);
    }
    g->mask_base = base;
}

static void *gcm_new(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES])
{
    opal_btl_usnic_gcm_t *g = NULL;
    if (0 != posix_memalign((void **) &g, 64, sizeof(*g))) {
        return NULL; /* libsodium tags everything */
    }
    gcm_expand_key(g, key);
    masks_make(g, 0); /* the masks are always of some eight nonces */
    g->use_wide = wide_ghash_on();
    g->ctx = NULL;
    if (g->use_wide) { /* OpenSSL's GCM state is not needed */
        uint8_t zero[16] = {0}, h[16];
        gcm_block(zero, h, g);
        opal_btl_usnic_ghash_key(&g->wide, h);
        sodium_memzero(h, sizeof(h));
        return g;
    }
    g->ctx = CRYPTO_gcm128_new(g, gcm_block);
    if (NULL == g->ctx) {
        sodium_memzero(g, sizeof(*g));
        free(g);
        return NULL;
    }
    return g;
}

static void gcm_free(void *p)
{
    opal_btl_usnic_gcm_t *g = (opal_btl_usnic_gcm_t *) p;
    if (NULL != g->ctx) {
        CRYPTO_gcm128_release(g->ctx); /* clears its key material */
    }
    sodium_memzero(g, sizeof(*g));
    free(g);
}

/* AES_K(J0) of |nonce|: made with the next ones unless made already (the
 * choice depends on the nonce only, which the datagram carries in clear) */
GCM_TARGET static __m128i mask_of(opal_btl_usnic_gcm_t *g, uint64_t nonce)
{
    uint64_t i = nonce - g->mask_base;
    if (i >= GCM_MASKS) {
        masks_make(g, nonce);
        i = 0;
    }
    return g->masks[i];
}

/* The tag through the 512-bit GHASH: GHASH_H(a || b) ^ AES_K(J0) */
GCM_TARGET static void wide_tag(opal_btl_usnic_gcm_t *g, uint64_t nonce, const uint8_t *a, size_t alen,
                                const uint8_t *b, size_t blen, uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    __m128i mask = mask_of(g, nonce);
    uint8_t sum[16];
    if (alen + blen > OPAL_BTL_USNIC_GHASH_SMALL) {
        opal_btl_usnic_ghash(&g->wide, a, alen, b, blen, sum);
    } else if (0 == blen) {
        opal_btl_usnic_ghash_small(&g->wide, a, alen, sum);
    } else {
        uint8_t joined[OPAL_BTL_USNIC_GHASH_SMALL];
        if (0 != alen) {
            memcpy(joined, a, alen);
        }
        memcpy(joined + alen, b, blen);
        opal_btl_usnic_ghash_small(&g->wide, joined, alen + blen, sum);
    }
    _mm_storeu_si128((__m128i *) tag, _mm_xor_si128(_mm_loadu_si128((const __m128i *) sum), mask));
}

/* The GCM tag of |a| || |b| as associated data, nothing encrypted.  False
 * if OpenSSL refused (the caller falls back to libsodium). */
static bool gcm_tag(void *p, uint64_t nonce, const uint8_t iv[12], const uint8_t *a, size_t alen, const uint8_t *b,
                    size_t blen, uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    opal_btl_usnic_gcm_t *g = (opal_btl_usnic_gcm_t *) p;
    if (g->use_wide) {
        wide_tag(g, nonce, a, alen, b, blen, tag);
        return true;
    }
    if (alen + blen <= MAC_SMALL) {
        return false; /* libsodium's */
    }
    GCM128_CONTEXT *ctx = g->ctx;
    CRYPTO_gcm128_setiv(ctx, iv, 12);
    if ((0 != alen && 0 != CRYPTO_gcm128_aad(ctx, a, alen)) || (0 != blen && 0 != CRYPTO_gcm128_aad(ctx, b, blen))) {
        return false;
    }
    CRYPTO_gcm128_tag(ctx, tag, OPAL_BTL_USNIC_TAG_BYTES);
    return true;
}
#else
void opal_btl_usnic_mac_wide_ghash(bool on)
{
    (void) on;
}

static void *gcm_new(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES])
{
    (void) key;
    return NULL;
}

static void gcm_free(void *p)
{
    (void) p;
}

static bool gcm_tag(void *p, uint64_t nonce, const uint8_t iv[12], const uint8_t *a, size_t alen, const uint8_t *b,
                    size_t blen, uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    (void) p, (void) nonce, (void) iv, (void) a, (void) alen, (void) b, (void) blen, (void) tag;
    return false;
}
#endif

bool opal_btl_usnic_mac_gathers(void)
{
    return OPAL_BTL_USNIC_HAVE_LIBCRYPTO;
}

void opal_btl_usnic_mac_init(opal_btl_usnic_mac_t *m, unsigned alg, const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES])
{
    m->alg = alg;
    memcpy(m->key, key, OPAL_BTL_USNIC_KEY_BYTES);
    m->gcm = NULL;
    if (OPAL_BTL_USNIC_MAC_AESGCM == alg) {
        crypto_aead_aes256gcm_beforenm(&m->aes, key);
        m->gcm = gcm_new(key);
    }
}

void opal_btl_usnic_mac_clear(opal_btl_usnic_mac_t *m)
{
    if (NULL != m->gcm) {
        gcm_free(m->gcm);
    }
    sodium_memzero(m, sizeof(*m));
}

static void nonce_bytes(uint64_t nonce, uint8_t out[12])
{
    for (int i = 0; i < 8; ++i) {
        out[i] = (uint8_t) (nonce >> (8 * i));
    }
    memset(out + 8, 0, 4);
}

/* ChaCha20-Poly1305 (RFC 8439) of |a| || |b| as associated data and an
 * empty message, streamed through libsodium's Poly1305: the one-time key
 * is the first 32 bytes of the ChaCha20 block 0 for |iv|, the MAC input
 * the associated data, zeros to 16 bytes, and the two lengths (the
 * message's is 0).  The same tag as libsodium's one-shot AEAD. */
static void chacha_tag2(const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES], const uint8_t iv[12], const uint8_t *a,
                        size_t alen, const uint8_t *b, size_t blen, uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    uint8_t block0[64];
    crypto_stream_chacha20_ietf(block0, sizeof(block0), iv, key);
    crypto_onetimeauth_poly1305_state st;
    crypto_onetimeauth_poly1305_init(&st, block0);
    crypto_onetimeauth_poly1305_update(&st, a, alen);
    crypto_onetimeauth_poly1305_update(&st, b, blen);
    static const uint8_t zeros[16] = {0};
    size_t total = alen + blen;
    crypto_onetimeauth_poly1305_update(&st, zeros, (16 - total % 16) % 16);
    uint8_t lens[16] = {0};
    for (int i = 0; i < 8; ++i) {
        lens[i] = (uint8_t) ((uint64_t) total >> (8 * i)); /* lens[8..15]: the empty message */
    }
    crypto_onetimeauth_poly1305_update(&st, lens, sizeof(lens));
    crypto_onetimeauth_poly1305_final(&st, tag);
    sodium_memzero(block0, sizeof(block0));
    sodium_memzero(&st, sizeof(st));
}

/* libsodium's one-shot AEADs, nothing encrypted: the datagram is associated data */
static void sodium_tag(const opal_btl_usnic_mac_t *m, const uint8_t iv[12], const uint8_t *data, size_t len,
                       uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    uint8_t none[1] = {0};
    unsigned long long taglen = 0;
    if (OPAL_BTL_USNIC_MAC_AESGCM == m->alg) {
        crypto_aead_aes256gcm_encrypt_detached_afternm(none, tag, &taglen, none, 0, data, len, NULL, iv, &m->aes);
    } else {
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(none, tag, &taglen, none, 0, data, len, NULL, iv, m->key);
    }
}

void opal_btl_usnic_mac_tag2(const opal_btl_usnic_mac_t *m, uint64_t nonce, const uint8_t *a, size_t alen,
                             const uint8_t *b, size_t blen, uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    uint8_t iv[12];
    nonce_bytes(nonce, iv);
    if (OPAL_BTL_USNIC_MAC_AESGCM != m->alg && OPAL_BTL_USNIC_MAC_CHACHAPOLY != m->alg) {
        memset(tag, 0, OPAL_BTL_USNIC_TAG_BYTES); /* no key: a tag no receiver accepts */
        return;
    }
    if (OPAL_BTL_USNIC_MAC_AESGCM == m->alg && NULL != m->gcm && gcm_tag(m->gcm, nonce, iv, a, alen, b, blen, tag)) {
        return;
    }
    if (0 == blen) {
        sodium_tag(m, iv, a, alen, tag);
    } else if (OPAL_BTL_USNIC_MAC_CHACHAPOLY == m->alg) {
        chacha_tag2(m->key, iv, a, alen, b, blen, tag);
    } else {
        /* AES-GCM in two parts up to MAC_SMALL bytes, or without OpenSSL
         * (the engine gathers only where opal_btl_usnic_mac_gathers):
         * side by side first */
        uint8_t small[2048];
        uint8_t *joined = (alen + blen <= sizeof(small)) ? small : (uint8_t *) malloc(alen + blen);
        if (NULL == joined) {
            memset(tag, 0, OPAL_BTL_USNIC_TAG_BYTES); /* no memory: a tag no receiver accepts (resent) */
            return;
        }
        memcpy(joined, a, alen);
        memcpy(joined + alen, b, blen);
        sodium_tag(m, iv, joined, alen + blen, tag);
        if (joined != small) {
            free(joined);
        }
    }
}

void opal_btl_usnic_mac_tag(const opal_btl_usnic_mac_t *m, uint64_t nonce, const uint8_t *data, size_t len,
                            uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    opal_btl_usnic_mac_tag2(m, nonce, data, len, NULL, 0, tag);
}

bool opal_btl_usnic_mac_check(const opal_btl_usnic_mac_t *m, uint64_t nonce, const uint8_t *data, size_t len,
                              const uint8_t tag[OPAL_BTL_USNIC_TAG_BYTES])
{
    uint8_t iv[12], none[1] = {0};
    nonce_bytes(nonce, iv);
    if (OPAL_BTL_USNIC_MAC_AESGCM == m->alg && NULL != m->gcm) {
        uint8_t want[OPAL_BTL_USNIC_TAG_BYTES];
        if (gcm_tag(m->gcm, nonce, iv, data, len, NULL, 0, want)) {
            return 0 == sodium_memcmp(want, tag, sizeof(want));
        }
    }
    if (OPAL_BTL_USNIC_MAC_AESGCM == m->alg) {
        return 0 == crypto_aead_aes256gcm_decrypt_detached_afternm(none, NULL, none, 0, tag, data, len, iv, &m->aes);
    }
    if (OPAL_BTL_USNIC_MAC_CHACHAPOLY == m->alg) {
        return 0 == crypto_aead_chacha20poly1305_ietf_decrypt_detached(none, NULL, none, 0, tag, data, len, iv,
                                                                       m->key);
    }
    return false; /* no key: nothing checks */
}

/* ----- anti-replay ----- */

static bool replay_bit(const opal_btl_usnic_replay_t *w, uint64_t n)
{
    uint64_t i = n % OPAL_BTL_USNIC_REPLAY_WINDOW;
    return 0 != (w->bits[i / 64] & (1ull << (i % 64)));
}

opal_btl_usnic_replay_verdict_t opal_btl_usnic_replay_check(const opal_btl_usnic_replay_t *w, uint64_t nonce)
{
    if (0 == nonce) {
        return OPAL_BTL_USNIC_REPLAY_STALE; /* never sent */
    }
    if (nonce > w->highest) {
        return OPAL_BTL_USNIC_REPLAY_NEW;
    }
    if (w->highest - nonce >= OPAL_BTL_USNIC_REPLAY_WINDOW) {
        return OPAL_BTL_USNIC_REPLAY_STALE;
    }
    return replay_bit(w, nonce) ? OPAL_BTL_USNIC_REPLAY_SEEN : OPAL_BTL_USNIC_REPLAY_NEW;
}

void opal_btl_usnic_replay_accept(opal_btl_usnic_replay_t *w, uint64_t nonce)
{
    if (nonce > w->highest) {
        /* clear the bits of the nonces the window moves over */
        uint64_t gap = nonce - w->highest;
        if (gap >= OPAL_BTL_USNIC_REPLAY_WINDOW || 0 == w->highest) {
            memset(w->bits, 0, sizeof(w->bits));
        } else {
            /* counted by the gap, not up to |nonce|: that loop would never
             * end at 2^64 - 1 (found by the fuzzer) */
            for (uint64_t k = 1; k <= gap; ++k) {
                uint64_t i = (w->highest + k) % OPAL_BTL_USNIC_REPLAY_WINDOW;
                w->bits[i / 64] &= ~(1ull << (i % 64));
            }
        }
        w->highest = nonce;
    }
    uint64_t i = nonce % OPAL_BTL_USNIC_REPLAY_WINDOW;
    w->bits[i / 64] |= 1ull << (i % 64);
}
