/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Writes the seed corpus of fuzz_recv: crafted inputs in its format (see
 * the comment atop fuzz_recv.c), each datagram built from the wire structs
 * of btl_usnic_proto.h, so that the seeds follow the wire format when it
 * changes.
 *
 *   make-corpus DIR       write every seed into DIR
 *   make-corpus --expect  print "name key=value ..." per seed: counters of
 *                         the fuzz_recv report (FUZZ_REPORT=1) the seed must
 *                         produce; run-fuzz.sh checks them
 *
 * The harness constants below mirror fuzz_recv.c (a seed that no longer
 * does what it says fails that check); MTUs and keys come from the
 * fixture.
 */
#include "fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Mirrors fuzz_recv.c */
static const uint32_t windows[4] = {4, 8, 16, 64};
static const uint32_t rx_isns[4] = {0, 1000, 0xfffffff0u, 0x7ffffffcu};
static const uint32_t tx_isns[2] = {0, 0xfffffffeu};
#define SMALL_MTU 200
#define P1_CHUNK ((uint32_t) FX_MAX_CHUNK_PAYLOAD)                        /* 1432 */
#define P2_CHUNK ((uint32_t) (SMALL_MTU - sizeof(opal_btl_usnic_chunk_hdr_t))) /* 132 */
#define P2_FRAG3 (2 * P2_CHUNK + 120) /* a fragment of three chunks to peer 2: 384 bytes */
#define P2_FRAG ((uint32_t) (SMALL_MTU - sizeof(opal_btl_usnic_hdr_t)))   /* 172 */
#define MAX_LEN 4096 /* run-fuzz.sh's -max_len */

/* Record flags (the high bits of a record's length word) */
#define PROGRESS (1u << 12)
#define COMPLETE (2u << 12)
#define EXPIRE (3u << 12)
#define NESTED (1u << 14)
#define RAW (1u << 15) /* delivered with the tag it carries (the harness seals the others) */

#define FLAG_ACK OPAL_BTL_USNIC_HDR_FLAG_ACK
#define FLAG_ACK_NEW OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW
#define FLAG_BYE OPAL_BTL_USNIC_HDR_FLAG_BYE

typedef struct {
    uint8_t b[MAX_LEN];
    size_t n;
    uint32_t window, rx_isn, tx_isn;
} input_t;

static void die(const char *what)
{
    fprintf(stderr, "make-corpus: %s\n", what);
    exit(1);
}

static void append(input_t *in, const void *p, size_t n)
{
    if (in->n + n > sizeof(in->b)) {
        die("seed longer than -max_len");
    }
    memcpy(in->b + in->n, p, n);
    in->n += n;
}

/* The configuration byte: fast path, fix-ups, indexes into the tables,
 * receive capacity */
static void config_cap(input_t *in, int fast, int fixup, unsigned win, unsigned rx, unsigned tx, int cap)
{
    uint8_t c = (uint8_t) ((fast ? 1 : 0) | (fixup ? 2 : 0) | (win << 2) | (rx << 4) | (tx << 6) | (cap ? 0x80 : 0));
    in->n = 0;
    append(in, &c, 1);
    in->window = windows[win];
    in->rx_isn = rx_isns[rx];
    in->tx_isn = tx_isns[tx];
}

static void config(input_t *in, int fast, int fixup, unsigned win, unsigned rx, unsigned tx)
{
    config_cap(in, fast, fixup, win, rx, tx, 0);
}

static void record(input_t *in, const void *dg, size_t len, unsigned flags)
{
    if (len > 0xfff) {
        die("datagram too long for a record");
    }
    unsigned w = (unsigned) len | flags;
    uint8_t le[2] = {(uint8_t) w, (uint8_t) (w >> 8)};
    append(in, le, 2);
    append(in, dg, len);
}

/* Payload bytes that never spell the self-test's trigger */
static void fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; ++i) {
        p[i] = (uint8_t) ('a' + (seed + i) % 26);
    }
}

static opal_btl_usnic_hdr_t hdr(uint8_t type, uint32_t sender, uint32_t seq, size_t payload, uint8_t tag)
{
    opal_btl_usnic_hdr_t h;
    memset(&h, 0, sizeof(h));
    h.magic = opal_btl_usnic_wire16(OPAL_BTL_USNIC_MAGIC);
    h.version = OPAL_BTL_USNIC_PROTO_VERSION;
    h.type = type;
    h.sender = opal_btl_usnic_wire64(sender);
    h.seq = opal_btl_usnic_wire32(seq);
    h.payload_len = opal_btl_usnic_wire16((uint16_t) payload);
    h.tag = tag;
    return h;
}

/* A datagram under construction */
typedef struct {
    uint8_t b[MAX_LEN];
    size_t n;
} dgram_t;

static opal_btl_usnic_hdr_t *dg_hdr(dgram_t *d)
{
    return (opal_btl_usnic_hdr_t *) d->b;
}

static void frag(dgram_t *d, uint32_t sender, uint32_t seq, size_t len)
{
    opal_btl_usnic_hdr_t h = hdr(OPAL_BTL_USNIC_PKT_FRAG, sender, seq, len, 7);
    memcpy(d->b, &h, sizeof(h));
    fill(d->b + sizeof(h), len, seq);
    d->n = sizeof(h) + len;
}

static void chunk(dgram_t *d, uint32_t sender, uint32_t seq, uint32_t frag_id, uint32_t size, uint32_t offset,
                  size_t len)
{
    opal_btl_usnic_chunk_hdr_t ch;
    ch.hdr = hdr(OPAL_BTL_USNIC_PKT_CHUNK, sender, seq, len, 8);
    ch.frag_id = opal_btl_usnic_wire32(frag_id);
    ch.frag_size = opal_btl_usnic_wire32(size);
    ch.frag_offset = opal_btl_usnic_wire32(offset);
    ch.chunk_size = opal_btl_usnic_wire32(2 == sender ? P2_CHUNK
                                                      : (uint32_t) (FX_MTU - sizeof(opal_btl_usnic_chunk_hdr_t)));
    memcpy(d->b, &ch, sizeof(ch));
    fill(d->b + sizeof(ch), len, frag_id + offset);
    d->n = sizeof(ch) + len;
}

/* An explicit ACK with |n| selective-ACK ranges (start, len pairs in
 * |r|); |nranges| is what its count field says (n, or a lie) */
static void ack_ranges(dgram_t *d, uint32_t sender, uint32_t ack_seq, uint8_t flags, const uint16_t *r, unsigned n,
                       uint8_t nranges)
{
    opal_btl_usnic_ack_hdr_t a;
    memset(&a, 0, sizeof(a));
    a.hdr = hdr(OPAL_BTL_USNIC_PKT_ACK, sender, 0, 0, 0);
    a.hdr.flags = flags;
    a.hdr.ack_seq = opal_btl_usnic_wire32(ack_seq);
    a.hdr.credit = opal_btl_usnic_wire16(UINT16_MAX);
    for (unsigned i = 0; i < n && i < OPAL_BTL_USNIC_SACK_RANGES; ++i) {
        a.range[i].start = opal_btl_usnic_wire16(r[2 * i]);
        a.range[i].len = opal_btl_usnic_wire16(r[2 * i + 1]);
    }
    a.nranges = nranges;
    memcpy(d->b, &a, sizeof(a));
    d->n = sizeof(a);
}

static void ack(dgram_t *d, uint32_t sender, uint32_t ack_seq, uint8_t flags, uint16_t credit)
{
    opal_btl_usnic_ack_hdr_t a;
    memset(&a, 0, sizeof(a)); /* no selective-ACK ranges */
    a.hdr = hdr(OPAL_BTL_USNIC_PKT_ACK, sender, 0, 0, 0);
    a.hdr.flags = flags;
    a.hdr.ack_seq = opal_btl_usnic_wire32(ack_seq);
    a.hdr.credit = opal_btl_usnic_wire16(credit);
    memcpy(d->b, &a, sizeof(a));
    d->n = sizeof(a);
}

/* A PUT in fix-up form: |key_xor| 0 is the region's key, |offset| counts
 * from the region's base (fuzz_recv.c fills in both) */
static void put_seg(dgram_t *d, uint32_t sender, uint32_t seq, uint32_t region, uint64_t key_xor, uint64_t offset,
                size_t len)
{
    opal_btl_usnic_put_hdr_t ph;
    ph.hdr = hdr(OPAL_BTL_USNIC_PKT_PUT, sender, seq, len, 0);
    ph.region_id = opal_btl_usnic_wire32(region);
    ph.key = opal_btl_usnic_wire64(key_xor);
    ph.addr = opal_btl_usnic_wire64(offset);
    memcpy(d->b, &ph, sizeof(ph));
    fill(d->b + sizeof(ph), len, region + (unsigned) offset);
    d->n = sizeof(ph) + len;
}

/* Shorthands: receive a FRAG / chunk / ACK / PUT as one record */
static void rx_frag(input_t *in, uint32_t sender, uint32_t seq, size_t len, unsigned flags)
{
    dgram_t d;
    frag(&d, sender, seq, len);
    record(in, d.b, d.n, flags);
}

static void rx_chunk(input_t *in, uint32_t sender, uint32_t seq, uint32_t frag_id, uint32_t size, uint32_t offset,
                     size_t len, unsigned flags)
{
    dgram_t d;
    chunk(&d, sender, seq, frag_id, size, offset, len);
    record(in, d.b, d.n, flags);
}

static void rx_ack(input_t *in, uint32_t sender, uint32_t ack_seq, uint8_t flags, unsigned rflags)
{
    dgram_t d;
    ack(&d, sender, ack_seq, flags, UINT16_MAX);
    record(in, d.b, d.n, rflags);
}

static void rx_put(input_t *in, uint32_t sender, uint32_t seq, uint32_t region, uint64_t key_xor, uint64_t offset,
                   size_t len, unsigned flags)
{
    dgram_t d;
    put_seg(&d, sender, seq, region, key_xor, offset, len);
    record(in, d.b, d.n, flags);
}

/* ----- the seeds ----- */

/* Most seeds: full path, window 8, peers start at 1000, we start at 0 */
#define DEFAULT_CONFIG(in) config((in), 0, 0, 1, 1, 0)
#define R(k) (in->rx_isn + (uint32_t) (k))
#define T(k) (in->tx_isn + (uint32_t) (k))

static void s_empty(input_t *in)
{
    DEFAULT_CONFIG(in);
}

static void s_frag_valid(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(0), 16, 0);
}

static void s_frag_valid_fast(input_t *in)
{
    config(in, 1, 0, 1, 1, 0);
    rx_frag(in, 1, R(0), 16, 0);
}

static void s_frag_in_order_fast(input_t *in)
{
    config(in, 1, 0, 1, 1, 0);
    for (int k = 0; k < 4; ++k) {
        rx_frag(in, 1, R(k), 32, 0);
    }
}

static void s_frag_ooo_fill(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(2), 8, 0);
    rx_frag(in, 1, R(1), 8, 0);
    rx_frag(in, 1, R(0), 8, 0);
}

static void s_frag_dup_ooo(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(1), 8, 0);
    rx_frag(in, 1, R(1), 8, 0);
}

static void s_frag_dup_fast(input_t *in)
{
    config(in, 1, 0, 1, 1, 0);
    rx_frag(in, 1, R(1), 8, 0);
    rx_frag(in, 1, R(1), 8, 0); /* out of order: declined by the fast path, held by the full one; then a duplicate */
}

static void s_frag_old(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(0), 8, 0);
    rx_frag(in, 1, R(0), 8, 0);
}

static void s_frag_too_new(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(8), 8, 0); /* one past the right edge of window 8 */
}

static void s_frag_far_away(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(0x40000000u), 8, 0);
    rx_frag(in, 1, R(0x80000000u), 8, 0); /* exactly half the space away: behind */
    rx_frag(in, 1, R(0xc0000000u), 8, 0);
}

static void s_frag_window_full(input_t *in)
{
    config(in, 0, 0, 0, 1, 0); /* window 4 */
    for (int k = 1; k <= 4; ++k) {
        rx_frag(in, 2, R(k), 8, 0); /* R(4): beyond the window */
    }
    rx_frag(in, 2, R(0), 8, 0);     /* fills the hole, slides over 1..3 */
}

static void s_frag_rx_wrap(input_t *in)
{
    config(in, 1, 0, 3, 2, 0); /* window 64, peers start at 2^32 - 16 */
    for (int k = 0; k < 24; ++k) {
        rx_frag(in, 1, R(k), 4, 0);
    }
}

static void s_frag_rx_half(input_t *in)
{
    config(in, 0, 0, 2, 3, 0); /* window 16, across 2^31 */
    for (int k = 7; k >= 0; --k) {
        rx_frag(in, 2, R(k), 4, 0);
    }
}

static void s_frag_peer2_max(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 2, R(0), P2_FRAG, 0);
}

static void s_frag_empty_payload(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(0), 0, 0);
}

static void s_frag_large(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(0), 4000, 0); /* beyond the MTU: only the receive buffer bounds a FRAG */
}

static void s_frag_piggyback_ack(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    frag(&d, 1, R(0), 16);
    dg_hdr(&d)->flags = FLAG_ACK;
    dg_hdr(&d)->ack_seq = opal_btl_usnic_wire32(T(1)); /* both tiny fragments */
    dg_hdr(&d)->credit = opal_btl_usnic_wire16(8);
    record(in, d.b, d.n, 0);
}

static void s_chunks_complete(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, P2_CHUNK, 0);
    rx_chunk(in, 2, R(1), 1, P2_FRAG3, P2_CHUNK, P2_CHUNK, 0);
    rx_chunk(in, 2, R(2), 1, P2_FRAG3, 2 * P2_CHUNK, P2_FRAG3 - 2 * P2_CHUNK, 0);
}

static void s_chunks_reordered(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(2), 1, P2_FRAG3, 2 * P2_CHUNK, P2_FRAG3 - 2 * P2_CHUNK, 0);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, P2_CHUNK, 0);
    rx_chunk(in, 2, R(1), 1, P2_FRAG3, P2_CHUNK, P2_CHUNK, 0);
}

static void s_chunks_peer1(input_t *in)
{
    config(in, 1, 0, 1, 1, 0); /* fast path mode: chunks go to the full path */
    rx_chunk(in, 1, R(1), 1, 2000, P1_CHUNK, 2000 - P1_CHUNK, 0);
    rx_chunk(in, 1, R(0), 1, 2000, 0, P1_CHUNK, 0);
}

static void s_chunks_interleaved(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, 200, 0, P2_CHUNK, 0);
    rx_chunk(in, 2, R(1), 2, 100, 0, 100, 0);
    rx_chunk(in, 2, R(2), 1, 200, P2_CHUNK, 200 - P2_CHUNK, 0);
}

static void s_chunk_misaligned(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 10, P2_CHUNK, 0);
}

static void s_chunk_short_middle(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, 100, 0);
}

static void s_chunk_last_wrong_len(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 2 * P2_CHUNK, 60, 0);
}

static void s_chunk_out_of_range(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 2 * P2_CHUNK, P2_CHUNK, 0); /* ends 12 bytes beyond it */
}

static void s_chunk_offset_huge(input_t *in)
{
    DEFAULT_CONFIG(in);
    /* aligned, in range of a 4 GiB fragment: only the size limit stops it */
    uint32_t off = (0xffffffffu / P2_CHUNK - 1) * P2_CHUNK;
    rx_chunk(in, 2, R(0), 1, 0xffffffffu, off, P2_CHUNK, 0);
    rx_chunk(in, 2, R(0), 1, 0xffffffffu, off + P2_CHUNK, P2_CHUNK, 0); /* ends past 2^32 */
}

static void s_chunk_oversize(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, FX_MAX_SEND + 1, 0, P2_CHUNK, 0);
}

static void s_chunk_max_size(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 1, R(0), 1, FX_MAX_SEND, 0, P1_CHUNK, 0); /* starts a 64 KiB reassembly */
    uint32_t last = FX_MAX_SEND / P1_CHUNK * P1_CHUNK;
    rx_chunk(in, 1, R(1), 1, FX_MAX_SEND, last, FX_MAX_SEND - last, 0);
}

static void s_chunk_zero_payload(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, 0, 0);
}

static void s_chunk_zero_frag_id(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 0, 100, 0, 100, 0);
}

static void s_chunk_size_mismatch(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, P2_CHUNK, 0);
    rx_chunk(in, 2, R(1), 1, 480, P2_CHUNK, P2_CHUNK, 0);
}

static void s_chunk_busy(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, P2_CHUNK, 0);
    rx_chunk(in, 2, R(1), 1 + in->window, P2_FRAG3, 0, P2_CHUNK, 0); /* the same slot */
}

static void s_chunk_dup_offset(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, P2_CHUNK, 0);
    rx_chunk(in, 2, R(1), 1, P2_FRAG3, 0, P2_CHUNK, 0); /* new seq, chunk already there */
}

static void s_chunk_dup_seq(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, P2_CHUNK, 0);
    rx_chunk(in, 2, R(0), 1, P2_FRAG3, 0, P2_CHUNK, 0);
}

static void s_chunk_too_new(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(8), 1, P2_FRAG3, 0, P2_CHUNK, 0);
}

static void s_chunk_slot_reuse(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, 100, 0, 100, 0);
    rx_chunk(in, 2, R(1), 1 + in->window, 100, 0, 100, 0);
}

/* A path MTU probe: answered with an echo, nothing accepted or dropped */
static void s_probe(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    opal_btl_usnic_hdr_t h = hdr(OPAL_BTL_USNIC_PKT_PROBE, 1, 0, 300, 0);
    memcpy(d.b, &h, sizeof(h));
    memset(d.b + sizeof(h), 0, 300);
    d.n = sizeof(h) + 300;
    record(in, d.b, d.n, 0);
}

/* A piece (authentic) of a datagram: a FRAG in two pieces whose tag this
 * harness never sealed.  The whole is checked again: dropped as not
 * authentic, nothing accepted */
static void s_pieces_of_unsealed_frag(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t whole, d;
    frag(&whole, 1, R(0), 200);
    for (size_t off = 0; off < whole.n; off += 150) {
        size_t n = whole.n - off < 150 ? whole.n - off : 150;
        opal_btl_usnic_piece_hdr_t ph;
        ph.hdr = hdr(OPAL_BTL_USNIC_PKT_PIECE, 1, R(0), n, 0);
        ph.whole_nonce = opal_btl_usnic_wire64(7);
        ph.whole_len = opal_btl_usnic_wire16((uint16_t) whole.n);
        ph.offset = opal_btl_usnic_wire16((uint16_t) off);
        memcpy(d.b, &ph, sizeof(ph));
        memcpy(d.b + sizeof(ph), whole.b + off, n);
        d.n = sizeof(ph) + n;
        record(in, d.b, d.n, 0);
    }
}

/* A piece claiming bytes beyond its datagram */
static void s_piece_out_of_range(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    opal_btl_usnic_piece_hdr_t ph;
    ph.hdr = hdr(OPAL_BTL_USNIC_PKT_PIECE, 1, R(0), 100, 0);
    ph.whole_nonce = opal_btl_usnic_wire64(9);
    ph.whole_len = opal_btl_usnic_wire16(150);
    ph.offset = opal_btl_usnic_wire16(100);
    memcpy(d.b, &ph, sizeof(ph));
    fill(d.b + sizeof(ph), 100, 3);
    d.n = sizeof(ph) + 100;
    record(in, d.b, d.n, 0);
}

static void s_ack_valid(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_ack(in, 1, T(1), FLAG_ACK | FLAG_ACK_NEW, 0);
    rx_ack(in, 2, T(2), FLAG_ACK | FLAG_ACK_NEW, 0);
}

/* Peer 1 says goodbye after ACKing the first of our two segments: the
 * second is released too, its later frame is dropped as departed, peer 2
 * goes on */
static void s_ack_bye(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_ack(in, 1, T(0), FLAG_ACK | FLAG_ACK_NEW | FLAG_BYE, 0);
    rx_frag(in, 1, R(0), 16, 0);
    rx_frag(in, 2, R(0), 16, 0);
}

/* Selective-ACK ranges: one over our second segment (the first is the
 * hole), then ranges far beyond what was sent and overlapping ones (no
 * effect but what is in flight), then an ACK that claims 9 ranges
 * (dropped, counted) */
static void s_ack_sack_ranges(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    static const uint16_t held[] = {0, 1};
    ack_ranges(&d, 1, T(-1), FLAG_ACK | FLAG_ACK_NEW, held, 1, 1);
    record(in, d.b, d.n, 0);
    static const uint16_t wild[] = {0, 0xffff, 0xfff0, 0xffff, 3, 0, 0, 2, 1, 1, 7, 9, 0xffff, 1, 2, 2};
    ack_ranges(&d, 2, T(-1), FLAG_ACK | FLAG_ACK_NEW, wild, 8, 8);
    record(in, d.b, d.n, 0);
    ack_ranges(&d, 2, T(-1), FLAG_ACK | FLAG_ACK_NEW, held, 1, 9);
    record(in, d.b, d.n, 0);
}

static void s_ack_tx_wrap(input_t *in)
{
    config(in, 0, 0, 1, 1, 1); /* we start at 2^32 - 2 */
    rx_ack(in, 1, T(0), FLAG_ACK, 0);
    rx_ack(in, 1, T(1), FLAG_ACK, 0);
    rx_ack(in, 2, T(2), FLAG_ACK, 0); /* 0 */
}

static void s_ack_dup_fast_retransmit(input_t *in)
{
    DEFAULT_CONFIG(in);
    for (int i = 0; i < 3; ++i) {
        rx_ack(in, 1, T(-1), FLAG_ACK | FLAG_ACK_NEW, 0);
    }
}

static void s_ack_old(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_ack(in, 1, T(1), FLAG_ACK, 0);
    rx_ack(in, 1, T(0), FLAG_ACK, 0);
}

static void s_ack_beyond(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_ack(in, 1, T(100), FLAG_ACK, 0);
}

static void s_ack_credit_zero(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    ack(&d, 1, T(0), FLAG_ACK | FLAG_ACK_NEW, 0);
    record(in, d.b, d.n, PROGRESS);
}

static void s_ack_with_payload(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    ack(&d, 1, T(1), FLAG_ACK, 8);
    dg_hdr(&d)->payload_len = opal_btl_usnic_wire16(4);
    memset(d.b + d.n, 0, 4);
    record(in, d.b, d.n + 4, 0);
}

static void s_ack_no_flag(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_ack(in, 1, T(1), 0, 0);
}

static void s_trunc_empty(input_t *in)
{
    DEFAULT_CONFIG(in);
    record(in, "", 0, 0);
}

static void s_trunc_header(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    frag(&d, 1, R(0), 0);
    record(in, d.b, sizeof(opal_btl_usnic_hdr_t) - 1, 0);
}

static void s_trunc_payload(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    frag(&d, 1, R(0), 100);
    record(in, d.b, d.n - 50, 0);
}

static void s_trunc_chunk_header(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    chunk(&d, 2, R(0), 1, 100, 0, 0);
    record(in, d.b, sizeof(opal_btl_usnic_hdr_t) + 4, 0);
}

static void s_bad_magic(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    frag(&d, 1, R(0), 8);
    dg_hdr(&d)->magic = opal_btl_usnic_wire16(0x5355); /* byte-swapped */
    record(in, d.b, d.n, 0);
}

static void s_bad_version(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    frag(&d, 1, R(0), 8);
    dg_hdr(&d)->version = OPAL_BTL_USNIC_PROTO_VERSION + 1;
    record(in, d.b, d.n, 0);
}

/* A datagram whose tag is not its sender's (a forgery, another job's):
 * dropped before anything of it is used */
static void s_auth_bad_tag(input_t *in)
{
    DEFAULT_CONFIG(in);
    dgram_t d;
    frag(&d, 1, R(0), 8);
    dg_hdr(&d)->nonce = opal_btl_usnic_wire64(1);
    memset(dg_hdr(&d)->mac, 0x5a, sizeof(dg_hdr(&d)->mac));
    record(in, d.b, d.n, RAW);
}

/* An authentic datagram taken twice (a replay, or a network duplicate),
 * and one whose nonce is too far behind the newest to tell */
static void s_auth_replay(input_t *in)
{
    DEFAULT_CONFIG(in);
    static const uint64_t nonces[] = {7, 7, 5000 + OPAL_BTL_USNIC_REPLAY_WINDOW, 5000};
    static const uint32_t seqs[] = {0, 0, 1, 2}; /* the copy is the same datagram */
    for (size_t i = 0; i < sizeof(nonces) / sizeof(nonces[0]); ++i) {
        dgram_t d;
        frag(&d, 1, R(seqs[i]), 8);
        dg_hdr(&d)->nonce = opal_btl_usnic_wire64(nonces[i]);
        record(in, d.b, d.n, 0);
    }
}

/* Nonces at the top of their range: the window slides to 2^64 - 1
 * (the fuzzer found an endless loop there) */
static void s_auth_nonce_top(input_t *in)
{
    DEFAULT_CONFIG(in);
    static const uint64_t nonces[] = {UINT64_MAX - 5, UINT64_MAX, UINT64_MAX - 1};
    for (size_t i = 0; i < sizeof(nonces) / sizeof(nonces[0]); ++i) {
        dgram_t d;
        frag(&d, 1, R((uint32_t) i), 8);
        dg_hdr(&d)->nonce = opal_btl_usnic_wire64(nonces[i]);
        record(in, d.b, d.n, 0);
    }
}

/* Every tag on the way up, 0..255, a quarter per seed (-max_len): the
 * harness's PML registered 1 of 3 not, and 255 is beyond Open MPI's table
 * (it used to read past it and call what lay there) */
static void tags_from(input_t *in, unsigned first)
{
    DEFAULT_CONFIG(in);
    for (unsigned i = 0; i < 64; ++i) {
        dgram_t d;
        frag(&d, 1, R(i), 8);
        dg_hdr(&d)->tag = (uint8_t) (first + i);
        record(in, d.b, d.n, 0);
    }
}
static void s_tags0(input_t *in) { tags_from(in, 0); }
static void s_tags1(input_t *in) { tags_from(in, 64); }
static void s_tags2(input_t *in) { tags_from(in, 128); }
static void s_tags3(input_t *in) { tags_from(in, 192); }

static void s_bad_type(input_t *in)
{
    DEFAULT_CONFIG(in);
    static const uint8_t types[] = {0, 0x7f, 0xff}; /* never assigned */
    for (size_t i = 0; i < sizeof(types); ++i) {
        dgram_t d;
        frag(&d, 1, R(0), 8);
        dg_hdr(&d)->type = types[i];
        record(in, d.b, d.n, 0);
    }
}

static void s_unknown_sender(input_t *in)
{
    DEFAULT_CONFIG(in);
    static const uint32_t ids[] = {0, 3, FX_MAX_PEERS, 0xffffffffu};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); ++i) {
        rx_frag(in, ids[i], R(0), 8, 0);
    }
}

/* Fix-up mode: garbage in magic and version, sender ids taken
 * modulo 4, sequence numbers relative to the window */
static void s_fixup(input_t *in)
{
    config(in, 0, 1, 1, 2, 0);
    for (int k = 0; k < 3; ++k) {
        dgram_t d;
        frag(&d, 5, 0, 8); /* peer 1, in order */
        dg_hdr(&d)->magic = 0xffff;
        dg_hdr(&d)->version = 0;
        record(in, d.b, d.n, 0);
    }
    rx_chunk(in, 6, 0, 1, 100, 0, 100, 0); /* peer 2 */
    rx_ack(in, 1, 2, FLAG_ACK, 0);         /* acked_seq + 2: both tiny fragments */
}

/* A retransmitted copy arrives while the PML callback of the original runs:
 * it must already look old; then the next one is delivered from inside */
static void s_nested_frag(input_t *in)
{
    config(in, 1, 0, 1, 1, 0);
    rx_frag(in, 1, R(0), 8, 0);
    rx_frag(in, 1, R(0), 8, NESTED);
    rx_frag(in, 1, R(1), 8, NESTED);
}

/* The slot of a completed fragment is free inside its callback */
static void s_nested_chunk_slot(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_chunk(in, 2, R(0), 1, 200, 0, P2_CHUNK, 0);
    rx_chunk(in, 2, R(1), 1, 200, P2_CHUNK, 200 - P2_CHUNK, 0);
    rx_chunk(in, 2, R(2), 1 + in->window, 100, 0, 100, NESTED);
}

/* Six fragments arrive while the first one's upcall runs: each waits for
 * it (never an upcall inside an upcall for one peer), then all go in order */
static void s_nested_deep(input_t *in)
{
    config(in, 1, 0, 2, 1, 0);
    rx_frag(in, 1, R(0), 8, 0);
    for (int k = 1; k < 7; ++k) {
        rx_frag(in, 1, R(k), 8, NESTED | (k == 3 ? PROGRESS : 0));
    }
}

static void s_progress_actions(input_t *in)
{
    DEFAULT_CONFIG(in);
    rx_frag(in, 1, R(0), 8, PROGRESS); /* ACK owed, then sent */
    rx_frag(in, 1, R(1), 8, COMPLETE);
    rx_frag(in, 2, R(0), 8, EXPIRE);   /* our segments time out */
    rx_ack(in, 1, T(1), FLAG_ACK | FLAG_ACK_NEW, PROGRESS);
}

static void s_retransmit_timeout(input_t *in)
{
    DEFAULT_CONFIG(in);
    record(in, "", 0, COMPLETE);
    record(in, "", 0, EXPIRE);
}

static void s_mixed(input_t *in)
{
    config_cap(in, 1, 0, 0, 0, 0, 1); /* window 4, peers start at 0; grants from a small capacity */
    rx_chunk(in, 2, R(0), 3, 2 * P2_CHUNK, 0, P2_CHUNK, 0);
    rx_frag(in, 1, R(0), 8, 0);
    rx_ack(in, 2, T(1), FLAG_ACK | FLAG_ACK_NEW, 0);
    rx_chunk(in, 2, R(1), 3, 2 * P2_CHUNK, P2_CHUNK, P2_CHUNK, PROGRESS);
    rx_frag(in, 2, R(2), 8, 0);
    rx_frag(in, 1, R(1), 8, 0);
}

/* ACKs we send carry grants shared from a small receive capacity */
static void s_rx_grants(input_t *in)
{
    config_cap(in, 0, 0, 2, 1, 0, 1); /* window 16 */
    for (int k = 0; k < 4; ++k) {
        rx_frag(in, 1, R(k), 8, PROGRESS);
        rx_frag(in, 2, R(k), 8, PROGRESS | (k == 3 ? NESTED : 0));
    }
    dgram_t d;
    ack(&d, 1, T(1), FLAG_ACK | FLAG_ACK_NEW, 1); /* and our sends stay inside theirs */
    record(in, d.b, d.n, COMPLETE);
}

/* PUTs need the fix-ups: keys are random and addresses are the target's.
 * Regions (fuzz_recv.c): 0 = 256 bytes for peer 1, 1 = 1000 bytes for any
 * peer, 2 = deregistered (for peer 2).  With fix-ups, seq 0 is the next
 * expected and seq -1 the one before. */
#define PUT_CONFIG(in) config((in), 0, 1, 1, 1, 0)

static void s_put_write(input_t *in)
{
    PUT_CONFIG(in);
    rx_put(in, 1, 0, 0, 0, 0, 64, 0);
    rx_put(in, 1, 0, 0, 0, 192, 64, 0);         /* the last byte */
    rx_put(in, 2, 0, 1, 0, 900, 100, PROGRESS); /* any peer, to the end */
}

/* Peer 1 says goodbye, then a PUT of its own that would be written: a
 * peer that left takes nothing (the fuzzer found the harness expecting
 * this one written) */
static void s_put_after_bye(input_t *in)
{
    PUT_CONFIG(in);
    rx_ack(in, 1, T(-1), FLAG_ACK | FLAG_BYE, 0);
    rx_put(in, 1, 0, 0, 0, 0, 32, 0);
}

static void s_put_past_end(input_t *in)
{
    PUT_CONFIG(in);
    rx_put(in, 2, 0, 1, 0, 901, 100, 0); /* one byte past the end: dropped */
    rx_put(in, 2, 0, 1, 0, 900, 100, 0); /* the genuine one still gets that seq */
}

static void s_put_bad_address(input_t *in)
{
    PUT_CONFIG(in);
    rx_put(in, 1, 0, 0, 0, UINT64_MAX, 8, 0);                 /* one below the base */
    rx_put(in, 1, 0, 0, 0, UINT64_MAX - 3, 8, 0);             /* straddles the base */
    rx_put(in, 1, 0, 0, 0, 0x8000000000000000ull, 8, 0);      /* far away */
    rx_put(in, 1, 0, 0, 0, 257, 0, 0);                        /* empty: never valid */
}

static void s_put_wrong_key(input_t *in)
{
    PUT_CONFIG(in);
    rx_put(in, 1, 0, 0, 1, 0, 8, 0);
    rx_put(in, 1, 0, 0, 1ull << 63, 0, 8, 0);
}

static void s_put_wrong_peer(input_t *in)
{
    PUT_CONFIG(in);
    rx_put(in, 2, 0, 0, 0, 0, 8, 0); /* region 0 is peer 1's */
}

static void s_put_unknown_region(input_t *in)
{
    PUT_CONFIG(in);
    rx_put(in, 1, 0, 3, 0, 0, 8, 0);
    rx_put(in, 1, 0, 0xffffffffu, 0, 0, 8, 0);
}

static void s_put_dead_region(input_t *in)
{
    PUT_CONFIG(in);
    rx_put(in, 2, 0, 2, 0, 0, 16, 0); /* dropped: the memory is gone, the key counted apart */
    rx_put(in, 1, 0, 2, 0, 0, 16, 0); /* but only for its peer */
}

static void s_put_dup(input_t *in)
{
    PUT_CONFIG(in);
    rx_put(in, 1, 0, 0, 0, 16, 32, 0);
    rx_put(in, 1, 0xffffffffu, 0, 0, 16, 32, 0); /* the same seq again */
    rx_put(in, 1, 1, 0, 0, 48, 32, 0);           /* out of order */
    rx_put(in, 1, 1, 0, 0, 48, 32, 0);           /* and again (now a duplicate) */
}

static void s_put_truncated(input_t *in)
{
    PUT_CONFIG(in);
    dgram_t d;
    put_seg(&d, 1, 0, 0, 0, 0, 8);
    record(in, d.b, sizeof(opal_btl_usnic_put_hdr_t) - 4, 0); /* header cut */
    record(in, d.b, d.n - 1, 0);                              /* payload cut */
}

static void s_put_raw(input_t *in)
{
    DEFAULT_CONFIG(in); /* no fix-ups: a key and an address from nowhere */
    rx_put(in, 1, R(0), 0, 0x0123456789abcdefull, 0x10000, 8, 0);
}

static void s_put_nested(input_t *in)
{
    config(in, 1, 1, 1, 1, 0); /* fast path and fix-ups */
    rx_frag(in, 1, 0, 8, 0);
    rx_put(in, 1, 0, 0, 0, 100, 8, NESTED); /* inside the FRAG's callback */
}

typedef struct {
    const char *name;
    void (*fn)(input_t *in);
    const char *expect; /* counters of the report; others unchecked */
} seed_t;

static const seed_t seeds[] = {
    {"empty", s_empty, "dels=0 frag=0 chunk=0 invalid=0"},
    {"frag-valid", s_frag_valid, "dels=1 frag=1 fast=0 ne1=1"},
    {"frag-valid-fast", s_frag_valid_fast, "dels=1 frag=1 fast=1 ne1=1"},
    {"frag-in-order-fast", s_frag_in_order_fast, "dels=4 fast=4 ne1=4"},
    {"frag-ooo-fill", s_frag_ooo_fill, "dels=3 ne1=3"},
    {"frag-dup-ooo", s_frag_dup_ooo, "dels=0 dup=1 held=1 ne1=0"},
    {"frag-dup-fast", s_frag_dup_fast, "dels=0 fast=0 dup=1 held=1 ne1=0"},
    {"frag-old", s_frag_old, "dels=1 old=1 ne1=1"},
    {"frag-too-new", s_frag_too_new, "dels=0 toonew=1"},
    {"frag-far-away", s_frag_far_away, "dels=0 toonew=1 old=2"},
    {"frag-window-full", s_frag_window_full, "dels=4 toonew=1 ne2=4"},
    {"frag-rx-wrap", s_frag_rx_wrap, "dels=24 fast=24 ne1=24"},
    {"frag-rx-half", s_frag_rx_half, "dels=8 ne2=8"},
    {"frag-peer2-max", s_frag_peer2_max, "dels=1 ne2=1"},
    {"frag-empty-payload", s_frag_empty_payload, "dels=1 ne1=1"},
    {"frag-large", s_frag_large, "dels=1 ne1=1"},
    {"frag-piggyback-ack", s_frag_piggyback_ack, "dels=1 acks=1 acked1=2"},
    {"chunks-complete", s_chunks_complete, "dels=1 chunk=3 ne2=3"},
    {"chunks-reordered", s_chunks_reordered, "dels=1 chunk=3 ne2=3"},
    {"chunks-peer1", s_chunks_peer1, "dels=1 chunk=2 fast=0 ne1=2"},
    {"chunks-interleaved", s_chunks_interleaved, "dels=2 chunk=3 ne2=3"},
    {"chunk-misaligned", s_chunk_misaligned, "dels=0 chunk=0 badchunk=1"},
    {"chunk-short-middle", s_chunk_short_middle, "dels=0 chunk=0 badchunk=1"},
    {"chunk-last-wrong-len", s_chunk_last_wrong_len, "dels=0 chunk=0 badchunk=1"},
    {"chunk-out-of-range", s_chunk_out_of_range, "dels=0 chunk=0 badchunk=1"},
    {"chunk-offset-huge", s_chunk_offset_huge, "dels=0 chunk=0 badchunk=2"},
    {"chunk-oversize", s_chunk_oversize, "dels=0 chunk=0 badchunk=1"},
    {"chunk-max-size", s_chunk_max_size, "dels=0 chunk=2 ne1=2"},
    {"chunk-zero-payload", s_chunk_zero_payload, "dels=0 chunk=0 badchunk=1"},
    {"chunk-zero-frag-id", s_chunk_zero_frag_id, "dels=0 chunk=0 badchunk=1"},
    {"chunk-size-mismatch", s_chunk_size_mismatch, "dels=0 chunk=1 badchunk=1"},
    {"chunk-busy", s_chunk_busy, "dels=0 chunk=1 busy=1"},
    {"chunk-dup-offset", s_chunk_dup_offset, "dels=0 chunk=1 badchunk=1"},
    {"chunk-dup-seq", s_chunk_dup_seq, "dels=0 chunk=1 old=1"},
    {"chunk-too-new", s_chunk_too_new, "dels=0 chunk=0 toonew=1"},
    {"chunk-slot-reuse", s_chunk_slot_reuse, "dels=2 chunk=2 ne2=2"},
    {"probe", s_probe, "dels=0 frag=0 invalid=0 acks=0"},
    {"pieces-of-unsealed-frag", s_pieces_of_unsealed_frag, "dels=0 frag=0 invalid=1 badmac=1 ne1=0"},
    {"piece-out-of-range", s_piece_out_of_range, "dels=0 frag=0 invalid=1"},
    {"ack-valid", s_ack_valid, "acks=2 acked1=2 acked2=3 invalid=0"},
    {"ack-sack-ranges", s_ack_sack_ranges, "acks=2 badsack=1 invalid=1 acked1=0 acked2=0"},
    {"ack-bye", s_ack_bye, "byes=1 departed=1 dels=1 ne1=0 ne2=1 acked1=2 invalid=0"},
    {"ack-tx-wrap", s_ack_tx_wrap, "acks=3 acked1=2 acked2=3 invalid=0"},
    {"ack-dup-fast-retransmit", s_ack_dup_fast_retransmit, "acks=3 dupacks=3 fastre=1 acked1=0"},
    {"ack-old", s_ack_old, "acks=2 oldacks=1 acked1=2"},
    {"ack-beyond", s_ack_beyond, "acks=1 invalid=1 acked1=0"},
    {"ack-credit-zero", s_ack_credit_zero, "acks=1 acked1=1 invalid=0"},
    {"ack-with-payload", s_ack_with_payload, "acks=0 truncated=1"},
    {"ack-no-flag", s_ack_no_flag, "acks=0 invalid=0 acked1=0"},
    {"trunc-empty", s_trunc_empty, "truncated=1 invalid=1"},
    {"trunc-header", s_trunc_header, "truncated=1 dels=0"},
    {"trunc-payload", s_trunc_payload, "truncated=1 dels=0"},
    {"trunc-chunk-header", s_trunc_chunk_header, "truncated=1 dels=0"},
    {"bad-magic", s_bad_magic, "magic=1 dels=0"},
    {"bad-version", s_bad_version, "version=1 dels=0"},
    {"auth-bad-tag", s_auth_bad_tag, "badmac=1 invalid=1 dels=0 ne1=0"},
    {"auth-replay", s_auth_replay, "replay=2 invalid=0 dels=2 ne1=2"},
    {"auth-nonce-top", s_auth_nonce_top, "replay=0 dels=3 ne1=3"},
    {"tags-0-63", s_tags0, "dels=64 badtag=22 ne1=64"},
    {"tags-64-127", s_tags1, "dels=64 badtag=21 ne1=64"},
    {"tags-128-191", s_tags2, "dels=64 badtag=21 ne1=64"},
    {"tags-192-255", s_tags3, "dels=64 badtag=22 ne1=64"},
    {"bad-type", s_bad_type, "type=3 invalid=3 dels=0"},
    {"unknown-sender", s_unknown_sender, "unknown=4 invalid=4 dels=0"},
    {"fixup", s_fixup, "dels=4 ne1=3 ne2=1 acked1=2 invalid=0"},
    {"nested-frag", s_nested_frag, "dels=2 fast=1 old=1 held=1 ne1=2"},
    {"nested-chunk-slot", s_nested_chunk_slot, "dels=2 chunk=3 badchunk=0 busy=0 ne2=3"},
    {"nested-deep", s_nested_deep, "dels=7 fast=1 held=6 ne1=7"},
    {"progress-actions", s_progress_actions, "dels=3 ne1=2 ne2=1 acked1=2"},
    {"retransmit-timeout", s_retransmit_timeout, "timeoutre=2"},
    {"put-write", s_put_write, "put=3 badput=0 ne1=2 ne2=1"},
    {"put-after-bye", s_put_after_bye, "put=0 byes=1 departed=1 ne1=0"},
    {"put-past-end", s_put_past_end, "put=1 badput=1 ne2=1"},
    {"put-bad-address", s_put_bad_address, "put=0 badput=4 invalid=4 ne1=0"},
    {"put-wrong-key", s_put_wrong_key, "put=0 badput=2 ne1=0"},
    {"put-wrong-peer", s_put_wrong_peer, "put=0 badput=1 ne2=0"},
    {"put-unknown-region", s_put_unknown_region, "put=0 badput=2 ne1=0"},
    {"put-dead-region", s_put_dead_region, "put=0 putdead=1 badput=1 ne1=0 ne2=0"},
    {"put-dup", s_put_dup, "put=2 old=1 dup=1 ne1=1"},
    {"put-truncated", s_put_truncated, "put=0 truncated=2 ne1=0"},
    {"put-raw", s_put_raw, "put=0 badput=1 ne1=0"},
    {"put-nested", s_put_nested, "dels=1 put=1 fast=1 ne1=2"},
    {"rx-grants", s_rx_grants, "dels=8 ne1=4 ne2=4 acked1=2"},
    {"mixed", s_mixed, "dels=4 chunk=2 fast=3 ne1=2 ne2=3 acked2=2"},
};

int main(int argc, char **argv)
{
    if (2 != argc) {
        fprintf(stderr, "usage: make-corpus DIR | --expect\n");
        return 2;
    }
    bool expect = (0 == strcmp(argv[1], "--expect"));
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); ++i) {
        static input_t in;
        seeds[i].fn(&in);
        if (expect) {
            printf("%s %s\n", seeds[i].name, seeds[i].expect);
            continue;
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", argv[1], seeds[i].name);
        FILE *f = fopen(path, "wb");
        if (NULL == f || in.n != fwrite(in.b, 1, in.n, f) || 0 != fclose(f)) {
            fprintf(stderr, "make-corpus: %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    return 0;
}
