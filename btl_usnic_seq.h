/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Sequence numbers: 32 bits, wrapping.  Comparisons are done on the signed
 * 32-bit difference, which is correct as long as the two numbers are less
 * than 2^31 apart (the window is at most 4096).  The subtraction is done in
 * uint32_t and only then converted, so integer promotion never turns it into
 * a signed overflow.  Never compare sequence numbers with raw operators
 * anywhere else.
 */
#ifndef OPAL_BTL_USNIC_SEQ_H
#define OPAL_BTL_USNIC_SEQ_H

#include <stdint.h>
#include <stdbool.h>

typedef uint32_t opal_btl_usnic_seq_t;

static inline int32_t opal_btl_usnic_seq_diff(opal_btl_usnic_seq_t a, opal_btl_usnic_seq_t b)
{
    return (int32_t) (uint32_t) (a - b);
}

static inline bool opal_btl_usnic_seq_lt(opal_btl_usnic_seq_t a, opal_btl_usnic_seq_t b)
{
    return opal_btl_usnic_seq_diff(a, b) < 0;
}

static inline bool opal_btl_usnic_seq_le(opal_btl_usnic_seq_t a, opal_btl_usnic_seq_t b)
{
    return opal_btl_usnic_seq_diff(a, b) <= 0;
}

static inline bool opal_btl_usnic_seq_gt(opal_btl_usnic_seq_t a, opal_btl_usnic_seq_t b)
{
    return opal_btl_usnic_seq_diff(a, b) > 0;
}

static inline bool opal_btl_usnic_seq_ge(opal_btl_usnic_seq_t a, opal_btl_usnic_seq_t b)
{
    return opal_btl_usnic_seq_diff(a, b) >= 0;
}

/* Is |seq| inside [|start|, |start| + |size|)? */
static inline bool opal_btl_usnic_seq_in_window(opal_btl_usnic_seq_t seq,
                                                opal_btl_usnic_seq_t start, uint32_t size)
{
    return (uint32_t) (seq - start) < size;
}

#endif /* OPAL_BTL_USNIC_SEQ_H */
