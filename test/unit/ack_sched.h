/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Helpers for the tests of the ACKs a receiver owes (test_acktr.c), the
 * explicit ACKs the posting layer sends (test_post.c) and the sender's
 * side of selective ACKs (test_ack.c): a data fragment from the peer, the
 * explicit ACKs posted since the last look, the last one decoded, and
 * engine parameters that delay explicit ACKs by three progress ticks.
 */
#ifndef USNIC_TEST_ACK_SCHED_H
#define USNIC_TEST_ACK_SCHED_H

#include "fixture.h"
#include "unit.h"

#define ACK_SCHED_PEER 1 /* the peer id both files use */

static inline void rx_frag(fx_t *fx, uint32_t seq)
{
    uint8_t buf[128];
    fx_recv(fx, buf, fx_build_frag(buf, ACK_SCHED_PEER, seq, 3, &seq, sizeof(seq)));
}

/* Explicit ACK posts since the last look; checks each is a well-formed ACK */
static inline unsigned explicit_acks(fx_t *fx, size_t *cursor, uint32_t *last_value)
{
    unsigned n = 0;
    for (; *cursor < fx->nposts; ++*cursor) {
        fx_post_t *p = &fx->posts[*cursor];
        const opal_btl_usnic_hdr_t *h = fx_post_hdr(p);
        if (OPAL_BTL_USNIC_PKT_ACK != h->type) {
            continue;
        }
        ++n;
        CHECK_EQ(p->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
        CHECK_EQ(p->len, FX_ACK_HDR);
        CHECK_EQ(h->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK, OPAL_BTL_USNIC_HDR_FLAG_ACK);
        CHECK_EQ(opal_btl_usnic_hdr_check(p->bytes, p->len), OPAL_BTL_USNIC_VALID);
        *last_value = opal_btl_usnic_host32(h->ack_seq);
    }
    return n;
}

static inline opal_btl_usnic_engine_params_t sched_params(void)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.ack_iteration_delay = 3;
    return p;
}

typedef struct {
    uint32_t ack;
    uint16_t sack;
    uint8_t flags;
    unsigned n;
    uint16_t start[OPAL_BTL_USNIC_SACK_RANGES], len[OPAL_BTL_USNIC_SACK_RANGES];
} ack_view_t;

/* The last explicit ACK |fx| posted, decoded from the recorded bytes */
static inline bool ack_sched_last_ack(fx_t *fx, ack_view_t *v)
{
    for (size_t i = fx->nposts; i-- > 0;) {
        const fx_post_t *p = &fx->posts[i];
        const opal_btl_usnic_hdr_t *h = fx_post_hdr(p);
        if (OPAL_BTL_USNIC_PKT_ACK != h->type) {
            continue;
        }
        bool ok = CHECK_EQ(p->len, FX_ACK_HDR);
        ok = CHECK_EQ(p->channel, OPAL_BTL_USNIC_PRIORITY_CHANNEL) && ok;
        ok = CHECK_EQ(opal_btl_usnic_hdr_check(p->bytes, p->len), OPAL_BTL_USNIC_VALID) && ok;
        const opal_btl_usnic_ack_hdr_t *a = (const opal_btl_usnic_ack_hdr_t *) p->bytes;
        memset(v, 0, sizeof(*v));
        v->ack = opal_btl_usnic_host32(h->ack_seq);
        v->sack = opal_btl_usnic_host16(h->sack);
        v->flags = h->flags;
        v->n = a->nranges;
        ok = CHECK_LE(v->n, OPAL_BTL_USNIC_SACK_RANGES) && ok;
        for (unsigned r = 0; r < OPAL_BTL_USNIC_SACK_RANGES; ++r) {
            if (r < v->n) {
                v->start[r] = opal_btl_usnic_host16(a->range[r].start);
                v->len[r] = opal_btl_usnic_host16(a->range[r].len);
            } else {
                /* unused ranges are zero (no stale bytes of an earlier ACK) */
                ok = CHECK_EQ(a->range[r].start, 0) && ok;
                ok = CHECK_EQ(a->range[r].len, 0) && ok;
            }
        }
        ok = CHECK_EQ(a->probe_echo, 0) && ok;
        return ok;
    }
    return false;
}

#endif /* USNIC_TEST_ACK_SCHED_H */
