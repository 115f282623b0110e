/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * libFuzzer target: arbitrary bytes into the receive side of the engine
 * (opal_btl_usnic_recv_segment, opal_btl_usnic_recv_fast / _finish) and on
 * up the production path to the PML (opal_btl_usnic_pml_deliver through
 * Open MPI's real table of receive callbacks, some tags registered, the
 * rest not, tag 255 beyond the table), against a unit-test fixture engine
 * (test/unit/fixture.h) with full protection, two known peers and a
 * little data of our own in flight (so that ACKs have something to
 * release).  One input is a sequence of datagrams,
 * so the fuzzer reaches reassembly, the receive window and ACK handling,
 * not only the header check.
 *
 * Input format (make-corpus.c writes it; keep the two in step):
 *
 *   byte 0, configuration:
 *     bit 0     fast path: every datagram goes to opal_btl_usnic_recv_fast()
 *               first and to opal_btl_usnic_recv_segment() only if it
 *               declines, as the module's progress does; 0: recv_segment only
 *     bit 1     fix-ups (below)
 *     bits 2-3  window of both peers: fz_windows[]
 *     bits 4-5  first sequence number the peers send (our rx ISN): fz_rx_isns[]
 *     bit 6     our first sequence number (tx ISN): 0 or 2^32 - 2
 *     bit 7     receive capacity (rx_capacity): 0 (unknown: grants limit nothing,
 *               the window does) or FZ_RX_CAPACITY (grants shared, smaller)
 *   then records, until the input ends:
 *     u16 LE    bits 0-11:  datagram length (cut to what is left)
 *               bits 12-13: after the datagram: 0 nothing; 1 clock + 100 us
 *                           and a progress pass; 2 complete every posted
 *                           send, then progress; 3 clock to the next
 *                           retransmit deadline, then progress
 *               bit 14:     nested: if a PML callback (a delivery) is
 *                           running when this record comes up, the datagram
 *                           arrives from inside it (the PML re-entering
 *                           progress); otherwise at top level
 *               bit 15:     raw: the datagram keeps the tag it carries;
 *                           otherwise it is sealed as its claimed sender
 *                           would, with the nonce it carries (0: the next
 *                           one of the harness)
 *     the datagram
 *
 * Peers: sender id 1 (our MTU) and 2 (MTU cut to FZ_SMALL_MTU, so that
 * multi-chunk fragments are short); ids 0 and 3 are unknown.  Regions
 * open to PUTs (fz_regions[], ids 0-2): one for peer 1 only, one for any
 * peer, and one deregistered (a tombstone; its memory is freed, so ASan
 * reports any write to it).
 *
 * Fix-ups (bit 1) are applied to the copy handed to the engine, to get the
 * fuzzer past checks it cannot solve from comparisons alone: magic and
 * version are overwritten with the right values; the sender id is taken
 * modulo 4; for a known sender, seq and ack_seq are read as offsets from
 * its rx.next_expected and tx.acked_seq (0: in order / nothing new); in a
 * PUT to one of our regions, the key is XORed with the region's (random)
 * key and the address is an offset from the region's base.
 *
 * Checked after every datagram (abort() with a message on violation):
 * one datagram is counted once; a datagram whose tag does not verify, or
 * whose nonce was taken before, changes nothing but its drop counter; only
 * an authentic valid header from a known peer with
 * a new (in-window, not yet received) sequence number is accepted (never
 * one from a peer that said goodbye, which stays gone), and no
 * (peer, seq) is ever accepted twice; a datagram that is not accepted
 * delivers nothing; an accepted FRAG, and a chunked fragment once the
 * chunks accepted for it (a shadow reassembly, each byte written once)
 * complete it, join the peer's queue of expected deliveries, keyed by the
 * sequence number of their last segment; every delivery is the head of
 * that queue, byte-identical, with everything up to its last segment
 * received (so the PML gets a peer's fragments in sequence order, each
 * once, and never a byte that did not arrive), never inside another
 * upcall for the same peer, and <= max_send_size; a delivery reaches the
 * PML's callback iff its tag is registered (else it is counted as
 * drop_bad_tag); between top-level
 * datagrams nothing deliverable is left waiting and the engine holds
 * exactly the queued ones; next_expected only moves forward, by at most
 * the window, and only for an accepted in-order segment; reassembly slots
 * agree with the shadow; un-ACKed segments <= window; the hotel is
 * consistent (fx_hotel_consistent); a PUT takes its sequence number iff it is new and
 * allowed (live region, key, peer, range: written; deregistered region:
 * discarded), and region memory changes exactly by the PUTs written
 * (shadow copies).  ASan checks that everything read lies inside the
 * datagram (each is an exact-size heap copy) and LSan that fx_fini frees it.
 *
 * FUZZ_REPORT=1 in the environment prints one "fuzz-report:" line of
 * counters per input (run-fuzz.sh compares the seeds' lines with what
 * make-corpus --expect says they do).  -DFUZZ_SELFTEST plants a trap on a
 * delivery that starts with "BOOM", to show the fuzzer finds what the seeds
 * do not contain.
 */
#include "fixture.h"
#include "btl_usnic_pml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_NPEERS 2            /* sender ids 1 .. FZ_NPEERS */
#define FZ_SMALL_PEER 2
#define FZ_SMALL_MTU 200       /* chunk payload 132 */
#define FZ_MAX_WINDOW 64
#define FZ_MAX_RECORDS 2048
#define FZ_MAX_DEPTH 4         /* nested receives */
#define FZ_MAX_ACCEPTED 4096
#define FZ_START_TIME 1000000u /* us */

static const uint32_t fz_windows[4] = {4, 8, 16, 64};
static const uint32_t fz_rx_isns[4] = {0, 1000, 0xfffffff0u, 0x7ffffffcu};
static const uint32_t fz_tx_isns[2] = {0, 0xfffffffeu};
#define FZ_RX_CAPACITY (6 * FX_DGRAM_CHARGE) /* six datagrams */

#define FZ_NREGIONS 3
static const struct {
    size_t size;
    uint64_t peer;
    bool dead;
} fz_regions[FZ_NREGIONS] = {
    {256, 1, false},
    {1000, OPAL_BTL_USNIC_ANY_PEER, false},
    {64, 2, true},
};

#define FZ_CHECK(cond)                                                                          \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "fuzz_recv: invariant violated at %s:%d: %s\n", __FILE__, __LINE__, \
                    #cond);                                                                     \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

typedef struct {
    const uint8_t *data;
    size_t len;
    unsigned action;
    bool nested;
    bool raw;
} fz_record_t;

/* Tags the harness's PML registered in Open MPI's table: 1 of 3 is not */
static bool fz_tag_registered(unsigned tag)
{
    return tag < MCA_BTL_TAG_MAX && 0 != tag % 3;
}

/* Counters a datagram may move; also used for the deltas of nested ones */
typedef struct {
    uint64_t total, accepted, invalid, replays;
    uint32_t next_expected[FZ_NPEERS + 1];
} fz_count_t;

/* One datagram being received */
typedef struct {
    const uint8_t *buf;
    size_t len;
    bool valid;                /* opal_btl_usnic_hdr_check() passed */
    bool authentic;            /* its tag verifies under its sender's key */
    bool departed;             /* its sender had said goodbye (BYE) before it came */
    bool replay;               /* ... but its nonce was taken before (or is too old) */
    uint8_t type, tag;
    uint64_t peer;
    opal_btl_usnic_endpoint_t *ep;
    uint32_t seq;
    opal_btl_usnic_seq_class_t cls;
    size_t payload;
    uint32_t frag_id, frag_size, offset, chunk_size;
    opal_btl_usnic_put_verdict_t put;  /* what a PUT deserves */
    uint64_t put_addr;
    unsigned delivered;        /* upcalls while it was the innermost datagram */
    bool absorbed;             /* accepted, and taken into the model */
    fz_count_t nested;         /* what datagrams received inside its callback did */
} fz_frame_t;

/* What a reassembly must deliver, built from the chunks the engine accepted */
typedef struct {
    uint32_t frag_id, size, covered;
    uint32_t chunk;            /* the chunk size its first chunk set */
    uint32_t last_seq;         /* highest sequence number among its chunks */
    uint8_t tag;
    uint8_t *data, *count;
} fz_shadow_t;

/* A complete fragment the PML must get, once, when its turn comes */
typedef struct fz_expect_t {
    struct fz_expect_t *next;  /* sorted by seq */
    uint32_t seq;              /* its last segment's sequence number */
    uint8_t tag;
    size_t len;
    uint8_t *data;
} fz_expect_t;

static struct {
    fx_t fx;
    bool fast, fixup, report, in_action;
    uint32_t window, rx_isn, tx_isn;
    opal_btl_usnic_endpoint_t *ep[FZ_NPEERS + 1];
    fz_record_t rec[FZ_MAX_RECORDS];
    size_t nrec, next;
    fz_frame_t *stack[FZ_MAX_DEPTH];
    int depth;
    fz_shadow_t shadow[FZ_NPEERS + 1][FZ_MAX_WINDOW];
    fz_expect_t *expect[FZ_NPEERS + 1];
    uint32_t nexpect[FZ_NPEERS + 1];
    bool in_upcall[FZ_NPEERS + 1];
    opal_btl_usnic_replay_t replay[FZ_NPEERS + 1]; /* the nonces the engine must have taken */
    uint64_t next_nonce;       /* for records that carry none */
    unsigned pml_calls;        /* the PML's callback ran */
    struct {
        uint32_t peer, seq;
    } accepted[FZ_MAX_ACCEPTED];
    size_t naccepted;
    size_t ndelivered;
    struct {
        uint8_t *mem, *shadow;       /* NULL once deregistered */
        uintptr_t base;
        opal_btl_usnic_reg_handle_t handle;
    } region[FZ_NREGIONS];
} S;

static void run_record(const fz_record_t *r);

static bool is_new(opal_btl_usnic_seq_class_t cls)
{
    return OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER == cls || OPAL_BTL_USNIC_SEQ_NEW_OOO == cls;
}

static void count(fz_count_t *c)
{
    const opal_btl_usnic_stats_t *st = &S.fx.eng.stats;
    memset(c, 0, sizeof(*c));
    c->total = st->num_total_recvs;
    c->accepted = st->num_frag_recvs + st->num_chunk_recvs;
    c->invalid = st->num_invalid_recvs;
    c->replays = st->num_drop_replay;
    for (int p = 1; p <= FZ_NPEERS; ++p) {
        c->next_expected[p] = S.ep[p]->rx.next_expected;
    }
}

/* |acc| += |b| - |a| */
static void count_add_delta(fz_count_t *acc, const fz_count_t *a, const fz_count_t *b)
{
    acc->total += b->total - a->total;
    acc->accepted += b->accepted - a->accepted;
    acc->invalid += b->invalid - a->invalid;
    acc->replays += b->replays - a->replays;
    for (int p = 1; p <= FZ_NPEERS; ++p) {
        acc->next_expected[p] += b->next_expected[p] - a->next_expected[p];
    }
}

static void fix_up(uint8_t *buf, size_t len)
{
    if (len < sizeof(opal_btl_usnic_hdr_t)) {
        return;
    }
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) buf;
    h->magic = opal_btl_usnic_wire16(OPAL_BTL_USNIC_MAGIC);
    h->version = OPAL_BTL_USNIC_PROTO_VERSION;
    uint32_t sender = opal_btl_usnic_host64(h->sender) % 4;
    h->sender = opal_btl_usnic_wire64(sender);
    opal_btl_usnic_endpoint_t *ep = fx_lookup(&S.fx.eng, sender);
    if (NULL != ep) {
        h->seq = opal_btl_usnic_wire32(ep->rx.next_expected + opal_btl_usnic_host32(h->seq));
        h->ack_seq = opal_btl_usnic_wire32(ep->tx.acked_seq + opal_btl_usnic_host32(h->ack_seq));
    }
    opal_btl_usnic_put_hdr_t *ph = (opal_btl_usnic_put_hdr_t *) buf;
    if (OPAL_BTL_USNIC_PKT_PUT != h->type || len < sizeof(*ph)) {
        return;
    }
    uint32_t id = opal_btl_usnic_host32(ph->region_id);
    if (id < FZ_NREGIONS) {
        ph->key = opal_btl_usnic_wire64(opal_btl_usnic_host64(ph->key) ^ S.region[id].handle.key);
        ph->addr = opal_btl_usnic_wire64(S.region[id].base + opal_btl_usnic_host64(ph->addr));
    }
}

/* The rules of btl_usnic_put.c, restated */
static opal_btl_usnic_put_verdict_t put_verdict(uint32_t id, uint64_t key, uint64_t peer, uint64_t addr, size_t len)
{
    if (id >= FZ_NREGIONS || key != S.region[id].handle.key ||
        (OPAL_BTL_USNIC_ANY_PEER != fz_regions[id].peer && peer != fz_regions[id].peer)) {
        return OPAL_BTL_USNIC_PUT_REJECT;
    }
    if (fz_regions[id].dead) {
        return OPAL_BTL_USNIC_PUT_DEAD; /* dropped like a forgery, counted apart */
    }
    uint64_t off = addr - S.region[id].base;
    bool inside = addr >= S.region[id].base && off <= fz_regions[id].size && len <= fz_regions[id].size - off;
    return inside ? OPAL_BTL_USNIC_PUT_WRITE : OPAL_BTL_USNIC_PUT_REJECT;
}

/* What the engine should make of the datagram, from the state before it */
static void frame_classify(fz_frame_t *f)
{
    f->valid = (OPAL_BTL_USNIC_VALID == opal_btl_usnic_hdr_check(f->buf, f->len));
    if (!f->valid) {
        return;
    }
    const opal_btl_usnic_hdr_t *h = (const opal_btl_usnic_hdr_t *) f->buf;
    f->type = h->type;
    f->tag = h->tag;
    f->payload = opal_btl_usnic_host16(h->payload_len);
    f->peer = opal_btl_usnic_host64(h->sender);
    f->ep = fx_lookup(&S.fx.eng, f->peer);
    f->seq = opal_btl_usnic_host32(h->seq);
    if (NULL == f->ep) {
        return;
    }
    f->departed = f->ep->departed;
    f->cls = opal_btl_usnic_seq_classify(f->ep, f->seq);
    /* what the engine will make of its tag and nonce (full protection) */
    uint8_t *copy = (uint8_t *) malloc(f->len);
    FZ_CHECK(NULL != copy);
    memcpy(copy, f->buf, f->len);
    memset(((opal_btl_usnic_hdr_t *) copy)->mac, 0, OPAL_BTL_USNIC_MAC_BYTES);
    uint8_t key[OPAL_BTL_USNIC_KEY_BYTES];
    opal_btl_usnic_mac_t m;
    fx_key(f->peer, 0, key);
    opal_btl_usnic_mac_init(&m, fx_mac_alg(), key);
    uint64_t nonce = opal_btl_usnic_host64(h->nonce);
    f->authentic = opal_btl_usnic_mac_check(&m, nonce, copy, f->len, h->mac);
    opal_btl_usnic_mac_clear(&m);
    f->replay = f->authentic && OPAL_BTL_USNIC_REPLAY_NEW != opal_btl_usnic_replay_check(&S.replay[f->peer], nonce);
    if (f->authentic && !f->replay) {
        opal_btl_usnic_replay_accept(&S.replay[f->peer], nonce); /* the engine takes it now */
    }
    free(copy);
    if (OPAL_BTL_USNIC_PKT_CHUNK == f->type) {
        const opal_btl_usnic_chunk_hdr_t *ch = (const opal_btl_usnic_chunk_hdr_t *) f->buf;
        f->frag_id = opal_btl_usnic_host32(ch->frag_id);
        f->frag_size = opal_btl_usnic_host32(ch->frag_size);
        f->offset = opal_btl_usnic_host32(ch->frag_offset);
        f->chunk_size = opal_btl_usnic_host32(ch->chunk_size);
    }
    if (OPAL_BTL_USNIC_PKT_PUT == f->type) {
        const opal_btl_usnic_put_hdr_t *ph = (const opal_btl_usnic_put_hdr_t *) f->buf;
        f->put_addr = opal_btl_usnic_host64(ph->addr);
        f->put = put_verdict(opal_btl_usnic_host32(ph->region_id), opal_btl_usnic_host64(ph->key), f->peer,
                             f->put_addr, f->payload);
    }
}

static void shadow_free(fz_shadow_t *s)
{
    free(s->data);
    free(s->count);
    memset(s, 0, sizeof(*s));
}

/* The engine accepted the chunk of |f|: add it to the shadow reassembly */
static void shadow_accept(fz_frame_t *f)
{
    opal_btl_usnic_endpoint_t *ep = f->ep;
    fz_shadow_t *s = &S.shadow[f->peer][f->frag_id % S.window];
    uint32_t chunk = f->chunk_size; /* the sender's, at most what our datagrams hold */
    (void) ep;
    FZ_CHECK(0 != chunk && chunk <= S.fx.eng.max_chunk_payload);
    FZ_CHECK(0 != f->frag_id);
    FZ_CHECK(f->frag_size > 0 && f->frag_size <= S.fx.eng.p.max_send_size);
    /* the cut its first chunk set: every chunk but the last is |chunk| bytes at a multiple of it */
    FZ_CHECK(0 == f->offset % chunk && (uint64_t) f->offset + f->payload <= f->frag_size);
    FZ_CHECK(f->payload == chunk || f->offset + f->payload == f->frag_size);
    if (0 == s->frag_id) {
        s->frag_id = f->frag_id;
        s->size = f->frag_size;
        s->chunk = chunk;
        s->tag = f->tag;
        s->last_seq = f->seq;
        s->data = (uint8_t *) malloc(s->size);
        s->count = (uint8_t *) calloc(s->size, 1);
        FZ_CHECK(NULL != s->data && NULL != s->count);
    }
    FZ_CHECK(s->frag_id == f->frag_id && s->size == f->frag_size && s->chunk == chunk);
    for (size_t i = 0; i < f->payload; ++i) {
        FZ_CHECK(0 == s->count[f->offset + i]++); /* every byte written once */
    }
    memcpy(s->data + f->offset, f->buf + sizeof(opal_btl_usnic_chunk_hdr_t), f->payload);
    s->covered += (uint32_t) f->payload;
    if (opal_btl_usnic_seq_gt(f->seq, s->last_seq)) {
        s->last_seq = f->seq;
    }
}

/* |peer| must get |len| bytes at |data| (copied) once everything up to
 * |seq| has arrived */
static void expect_push(uint32_t peer, uint32_t seq, uint8_t tag, const uint8_t *data, size_t len)
{
    fz_expect_t *e = (fz_expect_t *) calloc(1, sizeof(*e));
    FZ_CHECK(NULL != e);
    e->seq = seq;
    e->tag = tag;
    e->len = len;
    e->data = (uint8_t *) malloc(len ? len : 1);
    FZ_CHECK(NULL != e->data);
    memcpy(e->data, data, len);
    fz_expect_t **at = &S.expect[peer];
    while (NULL != *at && opal_btl_usnic_seq_lt((*at)->seq, seq)) {
        at = &(*at)->next;
    }
    FZ_CHECK(NULL == *at || (*at)->seq != seq); /* one fragment ends at each sequence number */
    e->next = *at;
    *at = e;
    ++S.nexpect[peer];
}

static void expect_free(fz_expect_t *e)
{
    free(e->data);
    free(e);
}

/* |f| was accepted (the engine marked its sequence number): what the PML
 * must now get from it, if anything */
static void frame_absorb(fz_frame_t *f)
{
    if (f->absorbed || !f->valid || NULL == f->ep || !f->authentic || f->replay || OPAL_BTL_USNIC_PKT_ACK == f->type ||
        !is_new(f->cls) ||
        is_new(opal_btl_usnic_seq_classify(f->ep, f->seq))) {
        return;
    }
    f->absorbed = true;
    if (OPAL_BTL_USNIC_PKT_FRAG == f->type) {
        expect_push(f->peer, f->seq, f->tag, f->buf + sizeof(opal_btl_usnic_hdr_t), f->payload);
    } else if (OPAL_BTL_USNIC_PKT_CHUNK == f->type) {
        shadow_accept(f);
        fz_shadow_t *s = &S.shadow[f->peer][f->frag_id % S.window];
        if (s->covered == s->size) { /* complete: the slot is free again */
            expect_push(f->peer, s->last_seq, s->tag, s->data, s->size);
            shadow_free(s);
        }
    }
}

/* The harness's PML: Open MPI calls it for the registered tags */
static void fz_pml_callback(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag, mca_btl_base_descriptor_t *des,
                            void *cbdata)
{
    (void) btl;
    (void) cbdata;
    FZ_CHECK(fz_tag_registered(tag) && 1 == des->des_segment_count);
    ++S.pml_calls;
}

static void fz_up_deliver(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data,
                          size_t len)
{
    FZ_CHECK(!S.in_action && S.depth > 0); /* only a receive delivers */
    for (int d = 0; d < S.depth; ++d) {
        frame_absorb(S.stack[d]); /* marked received before any upcall */
    }
    uint64_t peer = ep->peer_id;
    FZ_CHECK(peer >= 1 && peer <= FZ_NPEERS && ep == S.ep[peer]);
    FZ_CHECK(!S.in_upcall[peer]); /* nothing overtakes the fragment the PML is looking at */
    fz_expect_t *e = S.expect[peer];
    FZ_CHECK(NULL != e);           /* the PML gets only what was accepted, and once */
    S.expect[peer] = e->next;
    --S.nexpect[peer];
    FZ_CHECK(opal_btl_usnic_seq_lt(e->seq, ep->rx.next_expected)); /* its turn: all before it arrived */
    FZ_CHECK(len == e->len && tag == e->tag);
    FZ_CHECK(0 == memcmp(data, e->data, len));
    FZ_CHECK(len <= eng->p.max_send_size);
    expect_free(e);
    ++S.stack[S.depth - 1]->delivered;
    ++S.ndelivered;
    /* on up as the module does: the tag indexes Open MPI's table only if
     * it is inside it, and only a registered one reaches the PML */
    uint64_t bad_tags = eng->stats.num_drop_bad_tag;
    S.pml_calls = 0;
    bool handed = opal_btl_usnic_pml_deliver(eng, NULL, NULL, tag, data, len);
    FZ_CHECK(handed == fz_tag_registered(tag));
    FZ_CHECK(S.pml_calls == (handed ? 1u : 0u));
    FZ_CHECK(eng->stats.num_drop_bad_tag == bad_tags + (handed ? 0u : 1u));
#ifdef FUZZ_SELFTEST
    if (len >= 4 && 0 == memcmp(data, "BOOM", 4)) {
        __builtin_trap();
    }
#endif
    /* The PML may progress from its callback: receive nested datagrams here */
    S.in_upcall[peer] = true;
    while (S.next < S.nrec && S.rec[S.next].nested && S.depth < FZ_MAX_DEPTH) {
        run_record(&S.rec[S.next++]);
    }
    S.in_upcall[peer] = false;
}

static bool was_accepted(uint32_t peer, uint32_t seq)
{
    for (size_t i = 0; i < S.naccepted; ++i) {
        if (S.accepted[i].peer == peer && S.accepted[i].seq == seq) {
            return true;
        }
    }
    return false;
}

/* What the engine did with |f| alone (nested datagrams taken out) */
static void frame_check(fz_frame_t *f, const fz_count_t *before, const fz_count_t *after)
{
    uint64_t total = after->total - before->total - f->nested.total;
    uint64_t counted = after->accepted - before->accepted - f->nested.accepted;
    uint64_t invalid = after->invalid - before->invalid - f->nested.invalid;
    uint64_t replays = after->replays - before->replays - f->nested.replays;
    bool data = f->valid && NULL != f->ep && f->authentic && !f->replay && OPAL_BTL_USNIC_PKT_ACK != f->type;
    /* Accepted: its sequence number was new and now is not.  (Nested
     * datagrams cannot take it: only an accepted one delivers, and so
     * nests.)  Judged by the window, so that data segment types this
     * harness does not know about are covered too. */
    bool accepted = data && is_new(f->cls) && !is_new(opal_btl_usnic_seq_classify(f->ep, f->seq));
    bool frag_or_chunk = OPAL_BTL_USNIC_PKT_FRAG == f->type || OPAL_BTL_USNIC_PKT_CHUNK == f->type;
    FZ_CHECK(1 == total);
    FZ_CHECK(counted == ((accepted && frag_or_chunk) ? 1u : 0u));
    if (data && OPAL_BTL_USNIC_PKT_PUT == f->type) {
        /* a PUT it may not write never takes the sequence number of a
         * genuine one (and a peer that left takes nothing: checked below) */
        FZ_CHECK(accepted == (is_new(f->cls) && OPAL_BTL_USNIC_PUT_WRITE == f->put && !f->departed));
        if (accepted && OPAL_BTL_USNIC_PUT_WRITE == f->put) {
            uint32_t id = opal_btl_usnic_host32(((const opal_btl_usnic_put_hdr_t *) f->buf)->region_id);
            memcpy(S.region[id].shadow + (f->put_addr - S.region[id].base),
                   f->buf + sizeof(opal_btl_usnic_put_hdr_t), f->payload);
        }
    }
    if (!f->valid || NULL == f->ep || !f->authentic) {
        FZ_CHECK(invalid >= 1);
    }
    FZ_CHECK(replays == ((f->valid && NULL != f->ep && f->replay) ? 1u : 0u));
    if (f->departed) {
        FZ_CHECK(!accepted && f->ep->departed); /* a peer that left takes nothing and never comes back */
    }
    if (!accepted) {
        FZ_CHECK(0 == f->delivered); /* only an arrival that is taken can make a fragment's turn come */
    } else {
        FZ_CHECK(!was_accepted(f->peer, f->seq)); /* no duplicate ever reaches the PML */
        if (S.naccepted < FZ_MAX_ACCEPTED) {
            S.accepted[S.naccepted].peer = f->peer;
            S.accepted[S.naccepted].seq = f->seq;
            ++S.naccepted;
        }
        frame_absorb(f);
    }
    for (uint32_t p = 1; p <= FZ_NPEERS; ++p) {
        uint32_t moved = after->next_expected[p] - before->next_expected[p] - f->nested.next_expected[p];
        if (!accepted || p != f->peer) {
            FZ_CHECK(0 == moved);
        } else if (OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER == f->cls) {
            FZ_CHECK(moved >= 1 && moved <= S.window); /* forward, by at most the window */
        } else {
            FZ_CHECK(0 == moved); /* out of order: the hole stays */
        }
    }
}

/* Endpoint state against the shadow; valid between any two datagrams */
static void check_endpoints(void)
{
    for (uint32_t p = 1; p <= FZ_NPEERS; ++p) {
        opal_btl_usnic_endpoint_t *ep = S.ep[p];
        if (0 == S.depth) {
            /* no upcall running: nothing whose turn came still waits, and
             * the engine holds exactly the fragments queued here */
            FZ_CHECK(NULL == S.expect[p] || !opal_btl_usnic_seq_lt(S.expect[p]->seq, ep->rx.next_expected));
            FZ_CHECK(ep->rx.nheld == S.nexpect[p]);
        }
        FZ_CHECK(ep->window == S.window);
        FZ_CHECK(0 == ep->rx.rcvd[ep->rx.next_expected % S.window]);
        FZ_CHECK(opal_btl_usnic_endpoint_in_flight(ep) <= S.window);
        for (uint32_t i = 0; i < S.window; ++i) {
            const opal_btl_usnic_rx_frag_t *slot = &ep->rx.frags[i];
            const fz_shadow_t *s = &S.shadow[p][i];
            if (0 == slot->frag_id) {
                FZ_CHECK(NULL == slot->buf && NULL == slot->have && 0 == s->frag_id);
                continue;
            }
            FZ_CHECK(NULL != slot->buf && NULL != slot->have);
            FZ_CHECK(slot->frag_id % S.window == i && slot->chunk_size == s->chunk &&
                     slot->chunk_size <= S.fx.eng.max_chunk_payload);
            FZ_CHECK(slot->size <= S.fx.eng.p.max_send_size);
            FZ_CHECK(slot->bytes_left > 0 && slot->bytes_left < slot->size);
            FZ_CHECK(s->frag_id == slot->frag_id && s->size == slot->size);
            FZ_CHECK(s->size - s->covered == slot->bytes_left);
        }
    }
    for (int i = 0; i < FZ_NREGIONS; ++i) {
        if (NULL != S.region[i].mem) { /* written exactly by the PUTs that may */
            FZ_CHECK(0 == memcmp(S.region[i].mem, S.region[i].shadow, fz_regions[i].size));
        }
    }
}

static void run_action(unsigned action)
{
    if (0 == action) {
        return;
    }
    S.in_action = true;
    if (1 == action) {
        fx_set_time(&S.fx, S.fx.now + 100);
    } else if (2 == action) {
        fx_complete_all(&S.fx);
    } else {
        uint64_t t = opal_btl_usnic_engine_next_deadline(&S.fx.eng);
        if (UINT64_MAX != t && t > S.fx.now) {
            fx_set_time(&S.fx, t);
        }
    }
    fx_progress(&S.fx);
    S.in_action = false;
}

static void run_record(const fz_record_t *r)
{
    fz_frame_t f;
    memset(&f, 0, sizeof(f));
    /* an exact-size private copy: ASan sees any read past the datagram */
    uint8_t *buf = (uint8_t *) malloc(r->len ? r->len : 1);
    FZ_CHECK(NULL != buf);
    if (r->len > 0) {
        memcpy(buf, r->data, r->len);
    }
    if (S.fixup) {
        fix_up(buf, r->len);
    }
    if (!r->raw && r->len >= sizeof(opal_btl_usnic_hdr_t)) {
        opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) buf;
        uint64_t nonce = opal_btl_usnic_host64(h->nonce);
        fx_seal(&S.fx, buf, r->len, opal_btl_usnic_host64(h->sender), 0 != nonce ? nonce : ++S.next_nonce);
    }
    f.buf = buf;
    f.len = r->len;
    frame_classify(&f);

    fz_count_t before, after, end;
    count(&before);
    S.stack[S.depth++] = &f;
    opal_btl_usnic_engine_set_time(&S.fx.eng, S.fx.now);
    if (S.fast) {
        opal_btl_usnic_endpoint_t *ep = NULL;
        opal_btl_usnic_fast_t how = fx_hand_up_fast(&S.fx.eng, buf, r->len, &ep);
        if (OPAL_BTL_USNIC_FAST_DROPPED == how) {
            FZ_CHECK(0 == f.delivered && (!f.authentic || f.replay)); /* counted: nothing else to do */
        } else if (OPAL_BTL_USNIC_FAST_TAKEN == how) {
            /* its own fragment, then any that completed during its upcall */
            FZ_CHECK(ep == f.ep && OPAL_BTL_USNIC_PKT_FRAG == f.type && f.delivered >= 1);
            (void) opal_btl_usnic_recv_fast_finish(&S.fx.eng);
        } else {
            FZ_CHECK(0 == f.delivered && before.total == S.fx.eng.stats.num_total_recvs);
            fx_hand_up(&S.fx.eng, buf, r->len);
        }
    } else {
        fx_hand_up(&S.fx.eng, buf, r->len);
    }
    --S.depth;
    count(&after);
    frame_check(&f, &before, &after);
    memset(buf, 0xdd, r->len); /* the engine may keep nothing past the call */
    free(buf);

    run_action(r->action);
    count(&end);
    if (S.depth > 0) {
        count_add_delta(&S.stack[S.depth - 1]->nested, &before, &end);
    }
    check_endpoints();
}

static void parse(const uint8_t *data, size_t size)
{
    size_t pos = 1;
    S.nrec = 0;
    while (pos + 2 <= size && S.nrec < FZ_MAX_RECORDS) {
        unsigned w = (unsigned) data[pos] | ((unsigned) data[pos + 1] << 8);
        pos += 2;
        size_t len = w & 0xfff;
        if (len > size - pos) {
            len = size - pos;
        }
        fz_record_t *r = &S.rec[S.nrec++];
        r->data = data + pos;
        r->len = len;
        r->action = (w >> 12) & 3;
        r->nested = 0 != (w & 0x4000);
        r->raw = 0 != (w & 0x8000);
        pos += len;
    }
}

static void setup(uint8_t cfg)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    /* free lists start with this many items, each with an MTU-sized buffer:
     * the default 1024 would spend most of an input in setup (16 is the
     * smallest list; also the provider queue depth, so back-pressure is
     * reachable) */
    p.sd_credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = 16;
    p.sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = 16;
    p.rx_capacity = (cfg & 0x80) ? FZ_RX_CAPACITY : 0;
    p.cc_enabled = true; /* the module's default: forged ACK holds and delays reach the controller */
    static opal_btl_usnic_upcalls_t up;
    up = *fx_upcalls();
    up.deliver = fz_up_deliver; /* on up through Open MPI's table */
    fx_init_with_wire(&S.fx, &p, NULL, &up);
    for (unsigned t = 0; t < MCA_BTL_TAG_MAX; ++t) {
        mca_btl_base_active_message_trigger[t].cbfunc = fz_tag_registered(t) ? fz_pml_callback : NULL;
        mca_btl_base_active_message_trigger[t].cbdata = NULL;
    }
    fx_set_time(&S.fx, FZ_START_TIME);
    S.fast = 0 != (cfg & 1);
    S.fixup = 0 != (cfg & 2);
    S.window = fz_windows[(cfg >> 2) & 3];
    S.rx_isn = fz_rx_isns[(cfg >> 4) & 3];
    S.tx_isn = fz_tx_isns[(cfg >> 6) & 1];
    for (uint32_t id = 1; id <= FZ_NPEERS; ++id) {
        S.ep[id] = fx_ep_new(&S.fx, id, S.window, S.tx_isn, S.rx_isn);
    }
    opal_btl_usnic_endpoint_limit_mtu(S.ep[FZ_SMALL_PEER], FZ_SMALL_MTU, FZ_SMALL_MTU);
    for (int i = 0; i < FZ_NREGIONS; ++i) {
        size_t size = fz_regions[i].size;
        S.region[i].mem = (uint8_t *) malloc(size); /* exact size: ASan guards the edges */
        S.region[i].shadow = (uint8_t *) malloc(size);
        FZ_CHECK(NULL != S.region[i].mem && NULL != S.region[i].shadow);
        fx_fill(S.region[i].mem, size, (uint32_t) i);
        memcpy(S.region[i].shadow, S.region[i].mem, size);
        S.region[i].base = (uintptr_t) S.region[i].mem;
        FZ_CHECK(opal_btl_usnic_reg_add(&S.fx.eng.regs, S.region[i].mem, size, fz_regions[i].peer,
                                        &S.region[i].handle));
        FZ_CHECK((uint32_t) i == S.region[i].handle.region_id);
        if (fz_regions[i].dead) {
            opal_btl_usnic_reg_remove(&S.fx.eng.regs, &S.region[i].handle);
            free(S.region[i].mem);
            free(S.region[i].shadow);
            S.region[i].mem = S.region[i].shadow = NULL;
        }
    }

    /* Our own traffic: two tiny fragments to peer 1, one of three chunks
     * to peer 2 */
    S.in_action = true;
    FZ_CHECK(2 == fx_send_tiny(&S.fx, S.ep[1], 2, NULL));
    opal_btl_usnic_send_frag_t *frag = fx_alloc(&S.fx, S.ep[2], 400, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    FZ_CHECK(NULL != frag);
    fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, 400, 1);
    FZ_CHECK(0 <= fx_send(&S.fx, S.ep[2], frag, 9));
    fx_progress(&S.fx);
    S.in_action = false;
}

static void report(void)
{
    const opal_btl_usnic_stats_t *st = &S.fx.eng.stats;
    fprintf(stderr,
            "fuzz-report: dels=%zu frag=%llu chunk=%llu fast=%llu dup=%llu old=%llu toonew=%llu busy=%llu "
            "invalid=%llu truncated=%llu magic=%llu version=%llu badsrc=%llu type=%llu unknown=%llu "
            "badchunk=%llu put=%llu putdead=%llu badput=%llu acks=%llu oldacks=%llu dupacks=%llu fastre=%llu "
            "timeoutre=%llu held=%llu badmac=%llu replay=%llu badtag=%llu byes=%llu departed=%llu sackre=%llu "
            "badsack=%llu ne1=%u ne2=%u acked1=%u acked2=%u\n",
            S.ndelivered, (unsigned long long) st->num_frag_recvs, (unsigned long long) st->num_chunk_recvs,
            (unsigned long long) st->num_fast_recvs, (unsigned long long) st->num_dup_recvs,
            (unsigned long long) st->num_oow_low_recvs, (unsigned long long) st->num_oow_high_recvs,
            (unsigned long long) st->num_badfrag_recvs, (unsigned long long) st->num_invalid_recvs,
            (unsigned long long) st->num_drop_truncated, (unsigned long long) st->num_drop_bad_magic,
            (unsigned long long) st->num_drop_bad_version, (unsigned long long) st->num_drop_bad_source,
            (unsigned long long) st->num_drop_bad_type, (unsigned long long) st->num_drop_unknown_peer,
            (unsigned long long) st->num_drop_bad_chunk, (unsigned long long) st->num_put_recvs,
            (unsigned long long) st->num_put_after_dereg, (unsigned long long) st->num_drop_bad_put,
            (unsigned long long) st->num_ack_recvs,
            (unsigned long long) st->num_old_dup_acks, (unsigned long long) st->num_dup_acks,
            (unsigned long long) st->num_fast_retrans, (unsigned long long) st->num_timeout_retrans,
            (unsigned long long) st->num_held_frags, (unsigned long long) st->num_drop_bad_mac,
            (unsigned long long) st->num_drop_replay, (unsigned long long) st->num_drop_bad_tag,
            (unsigned long long) st->num_bye_recvs, (unsigned long long) st->num_drop_departed,
            (unsigned long long) st->num_sack_retrans, (unsigned long long) st->num_drop_bad_sack,
            /* progress of the receive windows and of our sends, from the ISNs */
            S.ep[1]->rx.next_expected - S.rx_isn, S.ep[2]->rx.next_expected - S.rx_isn,
            S.ep[1]->tx.acked_seq + 1 - S.tx_isn, S.ep[2]->tx.acked_seq + 1 - S.tx_isn);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    const char *r = getenv("FUZZ_REPORT");
    S.report = (NULL != r && 0 != strcmp(r, "0"));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    bool want_report = S.report;
    memset(&S, 0, sizeof(S));
    S.report = want_report;
    setup(data[0]);
    parse(data, size);
    for (S.next = 0; S.next < S.nrec;) {
        run_record(&S.rec[S.next++]);
        /* top level: nothing half-done any more */
        fx_t *fx = &S.fx;
        FZ_CHECK(0 == S.depth && fx_hotel_consistent(fx));
        for (size_t i = 0; i < fx->ndels; ++i) {
            free(fx->dels[i].data);
        }
        fx->ndels = 0;
    }
    if (S.report) {
        report();
    }
    for (uint32_t p = 1; p <= FZ_NPEERS; ++p) {
        for (uint32_t i = 0; i < FZ_MAX_WINDOW; ++i) {
            shadow_free(&S.shadow[p][i]);
        }
        while (NULL != S.expect[p]) {
            fz_expect_t *e = S.expect[p];
            S.expect[p] = e->next;
            expect_free(e);
        }
    }
    /* Teardown as the module does it (endpoint_release, channel_close):
     * flush every endpoint, and the provider gives back every posted
     * buffer; fx_fini does neither, and segments not back on their free
     * lists would leak their buffers */
    for (uint32_t p = 1; p <= FZ_NPEERS; ++p) {
        opal_btl_usnic_endpoint_flush(S.ep[p], OPAL_ERR_UNREACH);
    }
    fx_complete_all(&S.fx);
    fx_fini(&S.fx);
    for (int i = 0; i < FZ_NREGIONS; ++i) {
        free(S.region[i].mem);
        free(S.region[i].shadow);
    }
    return 0;
}
