/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Reassembly of datagrams that came as pieces.  A piece names the copy it
 * belongs to by the whole datagram's nonce (every transmission has its
 * own): pieces of two copies never mix, and a copy that lost a piece is
 * simply abandoned when its slot is needed (the sender's retransmission,
 * a new copy, comes cut afresh).  The whole is then checked again as an
 * ordinary datagram (its own tag, its own nonce against replay).
 */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_pieces.h"

/* The slot of copy |nonce|, or the one to reuse for it (free or oldest) */
static opal_btl_usnic_piece_slot_t *slot_for(opal_btl_usnic_pieces_t *pc, uint64_t nonce)
{
    opal_btl_usnic_piece_slot_t *victim = &pc->slot[0];
    for (unsigned i = 0; i < OPAL_BTL_USNIC_PIECE_SLOTS; ++i) {
        opal_btl_usnic_piece_slot_t *s = &pc->slot[i];
        if (0 != s->len && s->nonce == nonce) {
            return s;
        }
        if (0 == s->len ? 0 != victim->len : (0 != victim->len && s->used < victim->used)) {
            victim = s;
        }
    }
    victim->len = 0;
    victim->got = 0;
    return victim;
}

uint8_t *opal_btl_usnic_pieces_add(opal_btl_usnic_pieces_t *pc, const opal_btl_usnic_piece_hdr_t *ph,
                                   size_t capacity, size_t *len_p)
{
    size_t whole = opal_btl_usnic_host16(ph->whole_len);
    size_t off = opal_btl_usnic_host16(ph->offset);
    size_t n = opal_btl_usnic_host16(ph->hdr.payload_len);
    *len_p = 0;
    if (whole > capacity) {
        return NULL;
    }
    opal_btl_usnic_piece_slot_t *s = slot_for(pc, opal_btl_usnic_host64(ph->whole_nonce));
    if (NULL == s->buf && NULL == (s->buf = (uint8_t *) malloc(capacity))) {
        return NULL;
    }
    if (0 == s->len) {
        s->nonce = opal_btl_usnic_host64(ph->whole_nonce);
        s->len = (uint32_t) whole;
    } else if (s->len != whole) {
        *len_p = whole; /* taken, but it contradicts its copy's first piece: abandon the copy */
        s->len = 0;
        return NULL;
    }
    s->used = ++pc->clock;
    memcpy(s->buf + off, (const uint8_t *) (ph + 1), n);
    s->got += (uint32_t) n;
    *len_p = whole;
    if (s->got < s->len) {
        return NULL;
    }
    s->len = 0; /* free again; the bytes stay valid until the next call */
    return s->got == whole ? s->buf : NULL;
}

void opal_btl_usnic_pieces_free(opal_btl_usnic_pieces_t *pc)
{
    for (unsigned i = 0; i < OPAL_BTL_USNIC_PIECE_SLOTS; ++i) {
        free(pc->slot[i].buf);
        pc->slot[i].buf = NULL;
        pc->slot[i].len = 0;
    }
}
