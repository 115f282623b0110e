/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Reassembly of datagrams that came as pieces (btl_usnic_pieces.c): the
 * receiving half of what the posting layer does when a datagram is larger
 * than the path allows now.
 */
#ifndef OPAL_BTL_USNIC_PIECES_H
#define OPAL_BTL_USNIC_PIECES_H

#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_proto.h"

/* Datagrams of one peer being reassembled at once: the sender cuts one
 * datagram after the other, so two cover one overtaking the other */
#define OPAL_BTL_USNIC_PIECE_SLOTS 2

typedef struct opal_btl_usnic_piece_slot_t {
    uint8_t *buf;          /* |capacity| bytes, allocated at the first piece */
    uint64_t nonce;        /* the whole datagram's nonce: which copy */
    uint32_t len;          /* its length */
    uint32_t got;          /* bytes of it received */
    uint64_t used;         /* when it last took a piece (a counter): the oldest is reused */
} opal_btl_usnic_piece_slot_t;

typedef struct opal_btl_usnic_pieces_t {
    opal_btl_usnic_piece_slot_t slot[OPAL_BTL_USNIC_PIECE_SLOTS];
    uint64_t clock;
} opal_btl_usnic_pieces_t;

/**
 * Take the piece |ph| (authentic, framing checked: its bytes follow the
 * header) into |pc|, whose datagrams are at most |capacity| bytes.
 * Returns the whole datagram once its last piece came (valid until the
 * next call; its length in *|len_p|), else NULL; *|len_p| is 0 when the
 * piece was refused (a whole larger than |capacity|).  Pieces of one copy
 * never overlap: the sender cuts each copy once, and a network's
 * duplicate fails the replay check before it gets here.
 */
uint8_t *opal_btl_usnic_pieces_add(opal_btl_usnic_pieces_t *pc, const opal_btl_usnic_piece_hdr_t *ph,
                                   size_t capacity, size_t *len_p);

/* Free what |pc| holds (teardown) */
void opal_btl_usnic_pieces_free(opal_btl_usnic_pieces_t *pc);

#endif /* OPAL_BTL_USNIC_PIECES_H */
