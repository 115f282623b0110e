/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Reassembly of datagrams cut into pieces (btl_usnic_pieces.c): in order,
 * out of order, two copies at once, an abandoned copy, refusals.
 */
#include "fixture.h"
#include "unit.h"

#include "btl_usnic_pieces.h"

#define CAP 9000

/* A piece of the |whole|-byte datagram |src| (copy |nonce|): bytes
 * [off, off + len) */
static opal_btl_usnic_piece_hdr_t *piece(uint8_t *buf, const uint8_t *src, size_t whole, uint64_t nonce, size_t off,
                                         size_t len)
{
    opal_btl_usnic_piece_hdr_t *ph = (opal_btl_usnic_piece_hdr_t *) buf;
    memset(ph, 0, sizeof(*ph));
    ph->hdr.type = OPAL_BTL_USNIC_PKT_PIECE;
    ph->hdr.payload_len = opal_btl_usnic_wire16((uint16_t) len);
    ph->whole_nonce = opal_btl_usnic_wire64(nonce);
    ph->whole_len = opal_btl_usnic_wire16((uint16_t) whole);
    ph->offset = opal_btl_usnic_wire16((uint16_t) off);
    memcpy(ph + 1, src + off, len);
    return ph;
}

/* Feed the pieces of |src| (|whole| bytes, |room| per piece) in the order
 * |order| gives (indexes); returns the reassembled datagram or NULL */
static const uint8_t *feed(opal_btl_usnic_pieces_t *pc, const uint8_t *src, size_t whole, uint64_t nonce,
                           size_t room, const unsigned *order, unsigned n)
{
    static uint8_t buf[sizeof(opal_btl_usnic_piece_hdr_t) + CAP];
    const uint8_t *out = NULL;
    for (unsigned i = 0; i < n; ++i) {
        size_t off = order[i] * room;
        size_t len = (whole - off < room) ? whole - off : room;
        size_t got;
        const uint8_t *w = opal_btl_usnic_pieces_add(pc, piece(buf, src, whole, nonce, off, len), CAP, &got);
        CHECK_EQ_U(got, whole);
        if (NULL != w) {
            CHECK(i == n - 1); /* complete only with its last piece */
            out = w;
        }
    }
    return out;
}

static void test_in_and_out_of_order(void)
{
    uint8_t src[8972];
    fx_fill(src, sizeof(src), 7);
    static const unsigned fwd[] = {0, 1, 2, 3, 4, 5, 6}, rev[] = {6, 5, 4, 3, 2, 1, 0}, mix[] = {3, 0, 6, 1, 5, 2, 4};
    const unsigned *orders[] = {fwd, rev, mix};
    for (int k = 0; k < 3; ++k) {
        opal_btl_usnic_pieces_t pc;
        memset(&pc, 0, sizeof(pc));
        const uint8_t *w = feed(&pc, src, sizeof(src), 100 + k, 1408, orders[k], 7);
        if (CHECK(NULL != w)) {
            CHECK_MEM(w, src, sizeof(src));
        }
        opal_btl_usnic_pieces_free(&pc);
    }
}

/* Two copies interleaved each complete; a copy that lost a piece is
 * abandoned when a third needs its slot, and never completes from the
 * pieces of another copy */
static void test_copies_do_not_mix(void)
{
    uint8_t a[3000], b[3000], buf[sizeof(opal_btl_usnic_piece_hdr_t) + CAP];
    fx_fill(a, sizeof(a), 1);
    fx_fill(b, sizeof(b), 2);
    opal_btl_usnic_pieces_t pc;
    memset(&pc, 0, sizeof(pc));
    size_t got;
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, a, 3000, 1, 0, 1500), CAP, &got));
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, b, 3000, 2, 0, 1500), CAP, &got));
    const uint8_t *w = opal_btl_usnic_pieces_add(&pc, piece(buf, b, 3000, 2, 1500, 1500), CAP, &got);
    if (CHECK(NULL != w)) {
        CHECK_MEM(w, b, 3000);
    }
    w = opal_btl_usnic_pieces_add(&pc, piece(buf, a, 3000, 1, 1500, 1500), CAP, &got);
    if (CHECK(NULL != w)) {
        CHECK_MEM(w, a, 3000);
    }
    /* copy 3 loses its second piece; copies 4 and 5 take both slots */
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, a, 3000, 3, 0, 1500), CAP, &got));
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, a, 3000, 4, 0, 1500), CAP, &got));
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, b, 3000, 5, 1500, 1500), CAP, &got));
    /* copy 3's slot was the oldest: its late second piece starts afresh */
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, a, 3000, 3, 1500, 1500), CAP, &got));
    opal_btl_usnic_pieces_free(&pc);
}

/* A whole larger than our datagrams is refused (length 0); a piece that
 * contradicts its copy's length abandons the copy */
static void test_refusals(void)
{
    uint8_t src[CAP + 100], buf[sizeof(opal_btl_usnic_piece_hdr_t) + CAP + 100];
    fx_fill(src, sizeof(src), 3);
    opal_btl_usnic_pieces_t pc;
    memset(&pc, 0, sizeof(pc));
    size_t got = 1;
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, src, CAP + 100, 9, 0, 1000), CAP, &got));
    CHECK_EQ_U(got, 0);
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, src, 2000, 10, 0, 1000), CAP, &got));
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, src, 3000, 10, 1000, 1000), CAP, &got));
    /* the copy was abandoned: its remaining piece of the first length completes nothing */
    CHECK(NULL == opal_btl_usnic_pieces_add(&pc, piece(buf, src, 2000, 10, 1000, 1000), CAP, &got));
    opal_btl_usnic_pieces_free(&pc);
}

UNIT_MAIN(UNIT_TEST(test_in_and_out_of_order), UNIT_TEST(test_copies_do_not_mix), UNIT_TEST(test_refusals))
