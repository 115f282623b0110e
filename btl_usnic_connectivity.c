/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The connectivity checker's pure parts (design in
 * btl_usnic_connectivity.h): the probe format with its tag, the agent's
 * bounded check table, echo matching, the table of agent addresses
 * published in the modex with its echo rate limit, token buckets and
 * the cheap checks a received datagram passes before its tag.  No Open MPI, no
 * sockets: the unit tests link this file alone (with btl_usnic_auth.c).
 */
#include "btl_usnic_connectivity.h"

#include <stdlib.h>
#include <string.h>

/* ----- probe datagrams ----- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t) (v >> 8);
    p[1] = (uint8_t) v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t) (((uint16_t) p[0] << 8) | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | (uint32_t) p[3];
}

/* Addresses are kept in network order: their bytes go out as they are */
static void put_ipv4(uint8_t *p, uint32_t ipv4)
{
    memcpy(p, &ipv4, 4);
}

static uint32_t get_ipv4(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

size_t opal_btl_usnic_cprobe_pack(uint8_t *buf, size_t len, const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES],
                                  const opal_btl_usnic_cprobe_t *p)
{
    if (p->size < OPAL_BTL_USNIC_CPROBE_MIN || p->size > OPAL_BTL_USNIC_CPROBE_MAX || len < p->size) {
        return 0;
    }
    put32(buf, OPAL_BTL_USNIC_CPROBE_MAGIC);
    buf[4] = p->type;
    buf[5] = buf[6] = buf[7] = 0;
    put32(buf + 8, (uint32_t) (p->check_id >> 32));
    put32(buf + 12, (uint32_t) p->check_id);
    put32(buf + 16, p->size);
    put32(buf + 20, p->attempt);
    put32(buf + 24, p->from_vpid);
    put_ipv4(buf + 28, p->from_ipv4);
    put_ipv4(buf + 32, p->to_ipv4);
    put16(buf + 36, p->from_port);
    put16(buf + 38, p->to_port);
    size_t tag_at = p->size - OPAL_BTL_USNIC_TAG_BYTES;
    for (size_t i = OPAL_BTL_USNIC_CPROBE_HDR_LEN; i < tag_at; ++i) {
        buf[i] = (uint8_t) (i * 7u);
    }
    opal_btl_usnic_agent_tag(key, buf, tag_at, buf + tag_at);
    return p->size;
}

bool opal_btl_usnic_cprobe_well_formed(const uint8_t *buf, size_t len)
{
    if (len < OPAL_BTL_USNIC_CPROBE_MIN || len > OPAL_BTL_USNIC_CPROBE_MAX ||
        OPAL_BTL_USNIC_CPROBE_MAGIC != get32(buf)) {
        return false;
    }
    if (OPAL_BTL_USNIC_CPROBE_PROBE != buf[4] && OPAL_BTL_USNIC_CPROBE_ECHO != buf[4]) {
        return false;
    }
    return 0 == (buf[5] | buf[6] | buf[7]) && get32(buf + 16) == len;
}

opal_btl_usnic_cprobe_status_t opal_btl_usnic_cprobe_parse(const uint8_t *buf, size_t len,
                                                           const uint8_t key[OPAL_BTL_USNIC_KEY_BYTES],
                                                           opal_btl_usnic_cprobe_t *p)
{
    if (!opal_btl_usnic_cprobe_well_formed(buf, len)) {
        return OPAL_BTL_USNIC_CPROBE_MALFORMED;
    }
    size_t tag_at = len - OPAL_BTL_USNIC_TAG_BYTES;
    if (!opal_btl_usnic_agent_tag_check(key, buf, tag_at, buf + tag_at)) {
        return OPAL_BTL_USNIC_CPROBE_UNAUTHENTIC;
    }
    p->type = buf[4];
    p->check_id = ((uint64_t) get32(buf + 8) << 32) | get32(buf + 12);
    p->size = get32(buf + 16);
    p->attempt = get32(buf + 20);
    p->from_vpid = get32(buf + 24);
    p->from_ipv4 = get_ipv4(buf + 28);
    p->to_ipv4 = get_ipv4(buf + 32);
    p->from_port = get16(buf + 36);
    p->to_port = get16(buf + 38);
    return OPAL_BTL_USNIC_CPROBE_VALID;
}

/* ----- the cheap checks before the tag ----- */

/* Larger than any probe between an agent of MTU |a| and one of MTU |b|?
 * (the small probe always fits: opal_btl_usnic_cprobe_large_size) */
static bool too_large(size_t len, uint32_t a, uint32_t b)
{
    return len > OPAL_BTL_USNIC_CPROBE_SMALL && len > opal_btl_usnic_cprobe_large_size(a, b, 0);
}

opal_btl_usnic_cgate_t opal_btl_usnic_cprobe_gate(const uint8_t *buf, size_t len, const opal_btl_usnic_cgate_in_t *in,
                                                  uint64_t now, opal_btl_usnic_cpeer_t **src_p)
{
    if (!opal_btl_usnic_cprobe_well_formed(buf, len)) {
        return OPAL_BTL_USNIC_CGATE_MALFORMED;
    }
    if (too_large(len, in->local_mtu, in->local_mtu)) {
        return OPAL_BTL_USNIC_CGATE_TOO_LARGE; /* before the lookup, which may read the modex */
    }
    opal_btl_usnic_cpeer_t *src = in->find_source(in->ctx, in->src_ipv4, in->src_port, get32(buf + 24));
    if (NULL == src) {
        return OPAL_BTL_USNIC_CGATE_UNPUBLISHED;
    }
    if (too_large(len, in->local_mtu, src->mtu)) {
        return OPAL_BTL_USNIC_CGATE_TOO_LARGE;
    }
    if (!opal_btl_usnic_cbucket_take(&src->inbound, now, 1, in->source_burst, in->source_period_usec)) {
        return OPAL_BTL_USNIC_CGATE_SOURCE_RATE;
    }
    if (!opal_btl_usnic_cbucket_take(in->tag_budget, now, len, in->tag_budget_bytes, in->tag_budget_period_usec)) {
        return OPAL_BTL_USNIC_CGATE_TAG_BUDGET;
    }
    *src_p = src;
    return OPAL_BTL_USNIC_CGATE_TAG;
}

/* ----- token buckets ----- */

bool opal_btl_usnic_cbucket_take(opal_btl_usnic_cbucket_t *b, uint64_t now, uint64_t cost, uint64_t capacity,
                                 uint64_t period_usec)
{
    uint64_t full = capacity * period_usec;
    if (!b->primed) {
        b->primed = true;
        b->level = full;
    } else if (now > b->last) {
        /* capacity units per period: capacity (scaled) per microsecond;
         * a period refills it all, so longer gaps change nothing (and
         * cannot overflow) */
        uint64_t gap = now - b->last;
        b->level = (gap >= period_usec || full - b->level <= gap * capacity) ? full : b->level + gap * capacity;
    }
    b->last = now;
    uint64_t want = cost * period_usec;
    if (want > b->level) {
        return false;
    }
    b->level -= want;
    return true;
}

/* ----- the check table ----- */

bool opal_btl_usnic_ctable_init(opal_btl_usnic_ctable_t *t)
{
    t->slots = (opal_btl_usnic_ccheck_t *) calloc(OPAL_BTL_USNIC_CTABLE_SIZE, sizeof(*t->slots));
    t->used = 0;
    return NULL != t->slots;
}

static void slot_free(opal_btl_usnic_ctable_t *t, opal_btl_usnic_ccheck_t *ck)
{
    free(ck->waiters);
    memset(ck, 0, sizeof(*ck));
    --t->used;
}

void opal_btl_usnic_ctable_fini(opal_btl_usnic_ctable_t *t)
{
    if (NULL == t->slots) {
        return;
    }
    for (int i = 0; i < OPAL_BTL_USNIC_CTABLE_SIZE; ++i) {
        free(t->slots[i].waiters);
    }
    free(t->slots);
    t->slots = NULL;
    t->used = 0;
}

opal_btl_usnic_ccheck_t *opal_btl_usnic_ctable_find_pair(opal_btl_usnic_ctable_t *t, uint32_t local_ipv4,
                                                         uint32_t peer_ipv4, uint16_t peer_port)
{
    for (int i = 0; i < OPAL_BTL_USNIC_CTABLE_SIZE; ++i) {
        opal_btl_usnic_ccheck_t *ck = &t->slots[i];
        if (0 != ck->id && ck->local_ipv4 == local_ipv4 && ck->peer_ipv4 == peer_ipv4 && ck->peer_port == peer_port) {
            return ck;
        }
    }
    return NULL;
}

static opal_btl_usnic_ccheck_t *find_id(opal_btl_usnic_ctable_t *t, uint64_t id)
{
    for (int i = 0; i < OPAL_BTL_USNIC_CTABLE_SIZE; ++i) {
        if (t->slots[i].id == id) {
            return &t->slots[i];
        }
    }
    return NULL;
}

opal_btl_usnic_ccheck_t *opal_btl_usnic_ctable_find_live(opal_btl_usnic_ctable_t *t, uint64_t id)
{
    opal_btl_usnic_ccheck_t *ck = (0 != id) ? find_id(t, id) : NULL;
    return (NULL != ck && OPAL_BTL_USNIC_CV_PENDING == ck->verdict) ? ck : NULL;
}

static bool is_expired(const opal_btl_usnic_ccheck_t *ck, uint64_t now)
{
    return 0 != ck->id && OPAL_BTL_USNIC_CV_PENDING != ck->verdict && 0 == ck->nwaiters &&
           now - ck->t_done >= OPAL_BTL_USNIC_CHECK_GRACE_USEC;
}

/* A random id, never 0, that no check of |t| has */
static bool fresh_id(opal_btl_usnic_ctable_t *t, uint64_t *id_p)
{
    uint64_t id;
    do {
        if (0 != opal_btl_usnic_random(&id, sizeof(id))) {
            return false;
        }
    } while (0 == id || NULL != find_id(t, id));
    *id_p = id;
    return true;
}

opal_btl_usnic_ccheck_t *opal_btl_usnic_ctable_add(opal_btl_usnic_ctable_t *t, uint64_t now)
{
    opal_btl_usnic_ccheck_t *slot = NULL;
    for (int i = 0; i < OPAL_BTL_USNIC_CTABLE_SIZE && NULL == slot; ++i) {
        opal_btl_usnic_ccheck_t *ck = &t->slots[i];
        if (is_expired(ck, now)) {
            slot_free(t, ck);
        }
        if (0 == ck->id) {
            slot = ck;
        }
    }
    uint64_t id;
    if (NULL == slot || !fresh_id(t, &id)) {
        return NULL;
    }
    slot->id = id;
    slot->verdict = OPAL_BTL_USNIC_CV_PENDING;
    slot->t_first = now;
    ++t->used;
    return slot;
}

void opal_btl_usnic_ccheck_finish(opal_btl_usnic_ccheck_t *ck, int verdict, uint64_t now)
{
    ck->verdict = verdict;
    ck->t_done = now;
    ck->elapsed_usec = (uint32_t) (now - ck->t_first);
}

void opal_btl_usnic_ctable_expire(opal_btl_usnic_ctable_t *t, uint64_t now)
{
    for (int i = 0; i < OPAL_BTL_USNIC_CTABLE_SIZE && t->used > 0; ++i) {
        if (is_expired(&t->slots[i], now)) {
            slot_free(t, &t->slots[i]);
        }
    }
}

bool opal_btl_usnic_ccheck_add_waiter(opal_btl_usnic_ccheck_t *ck, int conn, uint32_t req_id)
{
    if (ck->nwaiters == ck->cwaiters) {
        int n = ck->cwaiters ? 2 * ck->cwaiters : 4;
        if (n > OPAL_BTL_USNIC_CHECK_MAX_WAITERS) {
            return false;
        }
        opal_btl_usnic_cwaiter_t *w = (opal_btl_usnic_cwaiter_t *) realloc(ck->waiters, (size_t) n * sizeof(*w));
        if (NULL == w) {
            return false;
        }
        ck->waiters = w;
        ck->cwaiters = n;
    }
    ck->waiters[ck->nwaiters].conn = conn;
    ck->waiters[ck->nwaiters].req_id = req_id;
    ++ck->nwaiters;
    return true;
}

void opal_btl_usnic_ctable_forget_conn(opal_btl_usnic_ctable_t *t, int conn)
{
    for (int i = 0; NULL != t->slots && i < OPAL_BTL_USNIC_CTABLE_SIZE; ++i) {
        opal_btl_usnic_ccheck_t *ck = &t->slots[i];
        int w = 0;
        for (int j = 0; j < ck->nwaiters; ++j) {
            if (ck->waiters[j].conn != conn) {
                ck->waiters[w++] = ck->waiters[j];
            }
        }
        ck->nwaiters = w;
    }
}

opal_btl_usnic_cecho_t opal_btl_usnic_ctable_match_echo(opal_btl_usnic_ctable_t *t, const opal_btl_usnic_cprobe_t *e,
                                                        uint32_t my_vpid, uint32_t src_ipv4, uint16_t src_port,
                                                        opal_btl_usnic_ccheck_t **ck_p)
{
    opal_btl_usnic_ccheck_t *ck = opal_btl_usnic_ctable_find_live(t, e->check_id);
    if (NULL == ck) {
        return OPAL_BTL_USNIC_CECHO_STALE;
    }
    bool ours = e->from_vpid == my_vpid && e->from_ipv4 == ck->local_ipv4 && e->from_port == ck->local_port &&
                e->to_ipv4 == ck->peer_ipv4 && e->to_port == ck->peer_port &&
                (OPAL_BTL_USNIC_CPROBE_SMALL == e->size || ck->large == e->size);
    if (!ours || src_ipv4 != ck->peer_ipv4 || src_port != ck->peer_port) {
        return OPAL_BTL_USNIC_CECHO_WRONG_SOURCE;
    }
    *ck_p = ck;
    return OPAL_BTL_USNIC_CECHO_OK;
}

/* ----- the agents published in the modex ----- */

static size_t peer_hash(uint32_t ipv4, uint16_t port, size_t cap)
{
    uint64_t k = ((uint64_t) ipv4 << 16) | port;
    return (size_t) ((k * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

opal_btl_usnic_cpeer_t *opal_btl_usnic_cpeers_find(const opal_btl_usnic_cpeers_t *t, uint32_t ipv4, uint16_t port)
{
    if (0 == t->cap || 0 == port) {
        return NULL;
    }
    for (size_t i = peer_hash(ipv4, port, t->cap);; i = (i + 1) & (t->cap - 1)) {
        opal_btl_usnic_cpeer_t *p = &t->slots[i];
        if (0 == p->port) {
            return NULL; /* the load stays below one half: there is always an empty slot */
        }
        if (p->ipv4 == ipv4 && p->port == port) {
            return p;
        }
    }
}

static void place(opal_btl_usnic_cpeer_t *slots, size_t cap, const opal_btl_usnic_cpeer_t *p)
{
    size_t i = peer_hash(p->ipv4, p->port, cap);
    while (0 != slots[i].port) {
        i = (i + 1) & (cap - 1);
    }
    slots[i] = *p;
}

static bool grow(opal_btl_usnic_cpeers_t *t)
{
    size_t cap = t->cap ? 2 * t->cap : 64;
    opal_btl_usnic_cpeer_t *slots = (opal_btl_usnic_cpeer_t *) calloc(cap, sizeof(*slots));
    if (NULL == slots) {
        return false;
    }
    for (size_t i = 0; i < t->cap; ++i) {
        if (0 != t->slots[i].port) {
            place(slots, cap, &t->slots[i]);
        }
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return true;
}

opal_btl_usnic_cpeer_t *opal_btl_usnic_cpeers_add(opal_btl_usnic_cpeers_t *t, uint32_t ipv4, uint16_t port,
                                                  uint32_t vpid, uint32_t mtu)
{
    opal_btl_usnic_cpeer_t *known = opal_btl_usnic_cpeers_find(t, ipv4, port);
    if (NULL != known || 0 == port) {
        return known;
    }
    if (t->n >= OPAL_BTL_USNIC_CPEERS_MAX || (2 * (t->n + 1) > t->cap && !grow(t))) {
        return NULL;
    }
    opal_btl_usnic_cpeer_t p = {.ipv4 = ipv4, .port = port, .vpid = vpid, .mtu = mtu};
    place(t->slots, t->cap, &p);
    ++t->n;
    return opal_btl_usnic_cpeers_find(t, ipv4, port);
}

void opal_btl_usnic_cpeers_fini(opal_btl_usnic_cpeers_t *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = t->n = 0;
}

bool opal_btl_usnic_cpeer_take_echo(opal_btl_usnic_cpeer_t *p, uint64_t now, uint32_t burst, uint64_t window_usec)
{
    if (now >= p->window_end) {
        p->echoes_left = burst;
        p->window_end = now + window_usec;
    }
    if (0 == p->echoes_left) {
        return false;
    }
    --p->echoes_left;
    return true;
}
