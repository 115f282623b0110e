/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Header validation: opal_btl_usnic_hdr_check() as a pure function, then
 * the same datagrams through opal_btl_usnic_recv_segment() (dropped,
 * counted, nothing delivered, no state touched).
 */
#include "fixture.h"
#include "unit.h"

#define OK OPAL_BTL_USNIC_VALID
#define R(x) (1 + OPAL_BTL_USNIC_DROP_##x)

enum { K_FRAG, K_CHUNK, K_ACK };

typedef struct {
    const char *name;
    int kind;          /* template to start from */
    size_t payload;    /* payload bytes in the template */
    /* mutation */
    int trunc;         /* bytes removed from the end of the datagram (-n: n extra bytes) */
    int field;         /* which field to overwrite, 0 = none */
    uint32_t value;
    int expect;
} hdr_case_t;

enum { F_NONE, F_MAGIC, F_VERSION, F_TYPE, F_PAYLOAD_LEN, F_FRAG_SIZE, F_FRAG_OFFSET, F_FRAG_ID, F_FLAGS, F_NRANGES };

static const hdr_case_t hdr_cases[] = {
    /* valid */
    {"frag, empty payload", K_FRAG, 0, 0, F_NONE, 0, OK},
    {"frag, 100 bytes", K_FRAG, 100, 0, F_NONE, 0, OK},
    {"frag, largest", K_FRAG, FX_MAX_FRAG_PAYLOAD, 0, F_NONE, 0, OK},
    {"frag, trailing bytes beyond payload", K_FRAG, 10, -7, F_NONE, 0, OK},
    {"chunk, first", K_CHUNK, 1000, 0, F_NONE, 0, OK},
    {"chunk, ends exactly at frag end", K_CHUNK, 1000, 0, F_FRAG_OFFSET, 4000, OK},
    {"chunk, whole frag in one chunk", K_CHUNK, 1000, 0, F_FRAG_SIZE, 1000, OK},
    {"ack", K_ACK, 0, 0, F_NONE, 0, OK},
    {"ack, unknown flag bits", K_ACK, 0, 0, F_FLAGS, 0xff, OK},
    /* truncated */
    {"empty datagram", K_FRAG, 0, 24, F_NONE, 0, R(TRUNCATED)},
    {"one byte short of a header", K_FRAG, 0, 1, F_NONE, 0, R(TRUNCATED)},
    {"frag payload one byte short", K_FRAG, 100, 1, F_NONE, 0, R(TRUNCATED)},
    {"frag payload_len beyond datagram", K_FRAG, 100, 0, F_PAYLOAD_LEN, 101, R(TRUNCATED)},
    {"frag payload_len 65535", K_FRAG, 100, 0, F_PAYLOAD_LEN, 65535, R(TRUNCATED)},
    {"chunk header cut", K_CHUNK, 0x10, 0x10 + 1, F_NONE, 0, R(TRUNCATED)},
    {"chunk payload one byte short", K_CHUNK, 1000, 1, F_NONE, 0, R(TRUNCATED)},
    {"ack one byte short", K_ACK, 0, 1, F_NONE, 0, R(TRUNCATED)},
    {"ack of version 3's length (no ranges)", K_ACK, 0, 36, F_NONE, 0, R(TRUNCATED)},
    {"ack with all 8 ranges", K_ACK, 0, 0, F_NRANGES, 8, OK},
    {"ack claiming 9 ranges", K_ACK, 0, 0, F_NRANGES, 9, R(BAD_SACK)},
    {"ack claiming 255 ranges", K_ACK, 0, 0, F_NRANGES, 255, R(BAD_SACK)},
    /* ACK with payload: an ACK carries nothing (reported as a length error) */
    {"ack with payload_len", K_ACK, 0, -8, F_PAYLOAD_LEN, 8, R(TRUNCATED)},
    /* identity */
    {"bad magic", K_FRAG, 10, 0, F_MAGIC, 0x5554, R(BAD_MAGIC)},
    {"byte-swapped magic", K_FRAG, 10, 0, F_MAGIC, 0x5355, R(BAD_MAGIC)},
    {"version 0", K_FRAG, 10, 0, F_VERSION, 0, R(BAD_VERSION)},
    {"version 1 (the cookie protocol)", K_FRAG, 10, 0, F_VERSION, 1, R(BAD_VERSION)},
    {"version 2 (a vpid as sender id)", K_FRAG, 10, 0, F_VERSION, 2, R(BAD_VERSION)},
    {"version 3 (ACKs without selective-ACK ranges)", K_FRAG, 10, 0, F_VERSION, 3, R(BAD_VERSION)},
    {"version 4 (all of a sender's streams from one ISN)", K_FRAG, 10, 0, F_VERSION, 4, R(BAD_VERSION)},
    {"version 5 (credit in segments, not in the receiver's charge)", K_FRAG, 10, 0, F_VERSION, 5, R(BAD_VERSION)},
    {"version 6 (no path MTU probes, pieces or chunk size)", K_FRAG, 10, 0, F_VERSION, 6, R(BAD_VERSION)},
    {"version 7 (no ACK hold for the congestion control's delay samples)", K_FRAG, 10, 0, F_VERSION, 7, R(BAD_VERSION)},
    {"version 8 (keys from the modex alone)", K_FRAG, 10, 0, F_VERSION, 8, R(BAD_VERSION)},
    {"version 10", K_FRAG, 10, 0, F_VERSION, 10, R(BAD_VERSION)},
    {"type 0", K_FRAG, 10, 0, F_TYPE, 0, R(BAD_TYPE)},
    {"type 7", K_FRAG, 10, 0, F_TYPE, 7, R(BAD_TYPE)},
    {"FRAG relabelled PIECE: short of the piece header", K_FRAG, 10, 0, F_TYPE, OPAL_BTL_USNIC_PKT_PIECE, R(TRUNCATED)},
    {"FRAG relabelled PUT: short of the PUT header", K_FRAG, 10, 0, F_TYPE, OPAL_BTL_USNIC_PKT_PUT, R(TRUNCATED)},
    {"type 255", K_FRAG, 10, 0, F_TYPE, 255, R(BAD_TYPE)},
    /* checks run in order: the first failing one is reported */
    {"bad magic on a truncated-looking frag", K_FRAG, 10, 5, F_MAGIC, 1, R(BAD_MAGIC)},
    /* chunk ranges */
    {"chunk offset+len beyond size", K_CHUNK, 1000, 0, F_FRAG_OFFSET, 4001, R(BAD_CHUNK)},
    {"chunk size smaller than chunk", K_CHUNK, 1000, 0, F_FRAG_SIZE, 999, R(BAD_CHUNK)},
    {"chunk size 0", K_CHUNK, 1000, 0, F_FRAG_SIZE, 0, R(BAD_CHUNK)},
    {"chunk offset overflowing 32 bits", K_CHUNK, 1000, 0, F_FRAG_OFFSET, 0xffffff00u, R(BAD_CHUNK)},
    {"chunk offset and size 2^32-1", K_CHUNK, 1000, 0, F_FRAG_OFFSET, 0xffffffffu, R(BAD_CHUNK)},
    {"zero-length chunk", K_CHUNK, 0, 0, F_NONE, 0, R(BAD_CHUNK)},
};

/* Build the template datagram of |kind| with |payload| bytes into |buf|; returns its length */
static size_t build(uint8_t *buf, int kind, size_t payload)
{
    uint8_t data[FX_MTU];
    fx_fill(data, sizeof(data), 7);
    switch (kind) {
    case K_FRAG:
        return fx_build_frag(buf, 1, 100, 9, data, payload);
    case K_CHUNK:
        return fx_build_chunk(buf, 1, 100, 9, 3, 5000, 0, data, payload);
    default:
        return fx_build_ack(buf, 1, 99);
    }
}

static void mutate(uint8_t *buf, int field, uint32_t v)
{
    opal_btl_usnic_chunk_hdr_t *ch = (opal_btl_usnic_chunk_hdr_t *) buf;
    switch (field) {
    case F_MAGIC: ch->hdr.magic = opal_btl_usnic_wire16((uint16_t) v); break;
    case F_VERSION: ch->hdr.version = (uint8_t) v; break;
    case F_TYPE: ch->hdr.type = (uint8_t) v; break;
    case F_PAYLOAD_LEN: ch->hdr.payload_len = opal_btl_usnic_wire16((uint16_t) v); break;
    case F_FRAG_SIZE: ch->frag_size = opal_btl_usnic_wire32(v); break;
    case F_FRAG_OFFSET: ch->frag_offset = opal_btl_usnic_wire32(v); break;
    case F_FRAG_ID: ch->frag_id = opal_btl_usnic_wire32(v); break;
    case F_FLAGS: ch->hdr.flags = (uint8_t) v; break;
    case F_NRANGES: ((opal_btl_usnic_ack_hdr_t *) buf)->nranges = (uint8_t) v; break;
    default: break;
    }
}

/* Datagram length after the case's truncation (or extension) */
static size_t case_len(const hdr_case_t *c, size_t len)
{
    if (c->trunc >= 0) {
        return ((size_t) c->trunc > len) ? 0 : len - (size_t) c->trunc;
    }
    return len + (size_t) (-c->trunc);
}

static void test_hdr_check_table(void)
{
    for (size_t i = 0; i < sizeof(hdr_cases) / sizeof(hdr_cases[0]); ++i) {
        const hdr_case_t *c = &hdr_cases[i];
        uint8_t buf[2 * FX_MTU];
        memset(buf, 0, sizeof(buf));
        size_t len = case_len(c, build(buf, c->kind, c->payload));
        mutate(buf, c->field, c->value);
        /* The checker gets exactly |len| bytes: copy them to a buffer of that size so ASan sees over-reads */
        uint8_t *exact = (uint8_t *) malloc(len ? len : 1);
        memcpy(exact, buf, len);
        int got = opal_btl_usnic_hdr_check(exact, len);
        if (!CHECK_EQ(got, c->expect)) {
            fprintf(stderr, "  case \"%s\" (len %zu)\n", c->name, len);
        }
        free(exact);
    }
}

/* Every prefix of a valid datagram shorter than its header+payload is rejected */
static void test_hdr_check_every_truncation(void)
{
    static const int kinds[] = {K_FRAG, K_CHUNK, K_ACK};
    for (size_t k = 0; k < 3; ++k) {
        uint8_t buf[FX_MTU];
        size_t full = build(buf, kinds[k], kinds[k] == K_ACK ? 0 : 200);
        CHECK_EQ(opal_btl_usnic_hdr_check(buf, full), OK);
        unsigned accepted = 0;
        for (size_t len = 0; len < full; ++len) {
            uint8_t *exact = (uint8_t *) malloc(len ? len : 1);
            memcpy(exact, buf, len);
            accepted += (OK == opal_btl_usnic_hdr_check(exact, len));
            free(exact);
        }
        CHECK_EQ(accepted, 0);
    }
}

/* The engine drops invalid datagrams, counts them by reason, and touches nothing */
static void test_recv_segment_drops_invalid(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, 1, 16, 500, 100);
    uint64_t expect_invalid = 0;
    for (size_t i = 0; i < sizeof(hdr_cases) / sizeof(hdr_cases[0]); ++i) {
        const hdr_case_t *c = &hdr_cases[i];
        if (OK == c->expect) {
            continue;
        }
        uint8_t buf[2 * FX_MTU];
        memset(buf, 0, sizeof(buf));
        size_t len = case_len(c, build(buf, c->kind, c->payload));
        mutate(buf, c->field, c->value);
        opal_btl_usnic_stats_t before = fx.eng.stats;
        fx_recv_raw(&fx, buf, len);
        ++expect_invalid;
        uint64_t *reason = NULL;
        switch (c->expect - 1) {
        case OPAL_BTL_USNIC_DROP_TRUNCATED: reason = &fx.eng.stats.num_drop_truncated; break;
        case OPAL_BTL_USNIC_DROP_BAD_MAGIC: reason = &fx.eng.stats.num_drop_bad_magic; break;
        case OPAL_BTL_USNIC_DROP_BAD_VERSION: reason = &fx.eng.stats.num_drop_bad_version; break;
        case OPAL_BTL_USNIC_DROP_BAD_TYPE: reason = &fx.eng.stats.num_drop_bad_type; break;
        case OPAL_BTL_USNIC_DROP_BAD_CHUNK: reason = &fx.eng.stats.num_drop_bad_chunk; break;
        case OPAL_BTL_USNIC_DROP_BAD_SACK: reason = &fx.eng.stats.num_drop_bad_sack; break;
        default: break;
        }
        REQUIRE(NULL != reason);
        uint64_t reason_before = *(uint64_t *) ((char *) &before + ((char *) reason - (char *) &fx.eng.stats));
        if (!CHECK_EQ_U(*reason, reason_before + 1)) {
            fprintf(stderr, "  case \"%s\"\n", c->name);
        }
    }
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, expect_invalid);
    CHECK_EQ_U(fx.eng.stats.num_total_recvs, expect_invalid);
    CHECK_EQ(fx.ndels, 0);
    CHECK_EQ(fx.nposts, 0);
    CHECK_EQ_U(ep->rx.next_expected, 100);
    CHECK(!ep->rx.ack_owed);
    CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 0);
    fx_fini(&fx);
}

/* Valid datagrams from a sender we do not know, or from another job (or a
 * forger: a tag under another key, a bit flipped after sealing, a copy of
 * an authentic one) with a piggy-backed ACK, change nothing */
static void test_recv_segment_unknown_peer_and_foreign_ack(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, 1, 16, 500, 100);
    uint8_t buf[FX_MTU];
    uint8_t data[10] = {0};

    size_t len = fx_build_frag(buf, 5, 100, 1, data, sizeof(data)); /* sender 5: unknown */
    fx_recv(&fx, buf, len);
    len = fx_build_frag(buf, 1000, 100, 1, data, sizeof(data)); /* beyond the lookup table */
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_unknown_peer, 2);

    /* an endpoint object without reliability state is "unknown" too */
    opal_btl_usnic_endpoint_t *bare = OBJ_NEW(opal_btl_usnic_endpoint_t);
    fx.peers[3] = bare;
    len = fx_build_frag(buf, 3, 100, 1, data, sizeof(data));
    fx_recv(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_unknown_peer, 3);
    fx.peers[3] = NULL;
    OBJ_RELEASE(bare);

    /* ACK info in a datagram of another job (another key) must not be used */
    opal_btl_usnic_send_frag_t *frag = fx_alloc(&fx, ep, 10, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    CHECK_EQ(fx_send(&fx, ep, frag, 1), 1);
    len = fx_build_ack(buf, 1, 500);
    fx_seal(&fx, buf, len, 7, 1000); /* sealed as sender 7 would: not sender 1's key */
    fx_recv_raw(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_mac, 1);
    /* a genuine ACK with a bit flipped, or with no tag */
    len = fx_build_ack(buf, 1, 500);
    fx_seal(&fx, buf, len, 1, 1001);
    buf[14] ^= 0x01; /* the ACK value */
    fx_recv_raw(&fx, buf, len);
    memset(((opal_btl_usnic_hdr_t *) buf)->mac, 0, OPAL_BTL_USNIC_MAC_BYTES);
    fx_recv_raw(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_bad_mac, 3);
    CHECK_EQ_U(ep->tx.acked_seq, 499);
    CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 0);
    CHECK_EQ(fx.ndels, 0);
    CHECK_EQ_U(fx.eng.stats.num_invalid_recvs, 6);
    /* the real ACK works, once: its copy is a replay */
    len = fx_build_ack(buf, 1, 500);
    fx_seal(&fx, buf, len, 1, 1002);
    fx_recv_raw(&fx, buf, len);
    CHECK_EQ_U(ep->tx.acked_seq, 500);
    CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 1);
    fx_recv_raw(&fx, buf, len);
    CHECK_EQ_U(fx.eng.stats.num_drop_replay, 1);
    CHECK_EQ_U(fx.eng.stats.num_ack_recvs, 1);
    fx_complete_all(&fx);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

UNIT_MAIN(UNIT_TEST(test_hdr_check_table), UNIT_TEST(test_hdr_check_every_truncation),
          UNIT_TEST(test_recv_segment_drops_invalid), UNIT_TEST(test_recv_segment_unknown_peer_and_foreign_ack))
