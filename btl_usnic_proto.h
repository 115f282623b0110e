/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Wire format of the usnic BTL.  Depends on system headers only, so that
 * tests and tools (fuzzers, forged-datagram injectors) can include it.
 *
 * Every datagram starts with the common header; chunk segments append the
 * chunk header.  All multi-byte fields are little-endian on the wire
 * (a no-op on x86-64, explicit everywhere else).
 *
 *   0               1               2               3
 *   0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7
 *  +---------------+---------------+---------------+---------------+
 *  |            magic              |    version    |     type      |
 *  +---------------+---------------+---------------+---------------+
 *  |       sender: its process name, jobid << 32 | vpid (64 bits)   |
 *  +       (unique across every job Open MPI connects us to)       +
 *  |                                                               |
 *  +---------------+---------------+---------------+---------------+
 *  |                       sequence number                         |
 *  +---------------+---------------+---------------+---------------+
 *  |               cumulative ACK (valid if flag ACK)              |
 *  +---------------+---------------+---------------+---------------+
 *  |         payload length        |    PML tag    |     flags     |
 *  +---------------+---------------+---------------+---------------+
 *  |  credit (KiB of the receiver's |  selective ACK bits           |
 *  |  charge past ACK)             |                               |
 *  +---------------+---------------+---------------+---------------+
 *  |                nonce (64 bits, never repeats per direction)   |
 *  +                                                               +
 *  |                                                               |
 *  +---------------+---------------+---------------+---------------+
 *  |        tag (128 bits): AES-256-GCM or ChaCha20-Poly1305 of     |
 *  +        the datagram (protection full) or of its header        +
 *  |        (protection header), this field zeroed; zero with      |
 *  +        protection none (btl_usnic_auth.c)                     +
 *  |                                                               |
 *  +---------------+---------------+---------------+---------------+
 *  PUT segments only (instead of the chunk fields):
 *  +---------------+---------------+---------------+---------------+
 *  |                 region id (receiver's registration)           |
 *  +---------------+---------------+---------------+---------------+
 *  |                  key (64 bits, random per registration)       |
 *  +                                                               +
 *  |                                                               |
 *  +---------------+---------------+---------------+---------------+
 *  |                 target address (64 bits)                      |
 *  +                                                               +
 *  |                                                               |
 *  +---------------+---------------+---------------+---------------+
 *  chunk segments only:
 *  +---------------+---------------+---------------+---------------+
 *  |                          fragment id                          |
 *  +---------------+---------------+---------------+---------------+
 *  |                     total fragment size                       |
 *  +---------------+---------------+---------------+---------------+
 *  |                  offset of this chunk                         |
 *  +---------------+---------------+---------------+---------------+
 *  |      chunk size (bytes of every chunk of it but the last)     |
 *  +---------------+---------------+---------------+---------------+
 *
 *  ACK segments only (explicit ACKs), after the common header:
 *  +---------------+---------------+---------------+---------------+
 *  |   nranges     | reserved (0)  |  probe echo (bytes of the     |
 *  |               |               |  largest probe taken; 0 none) |
 *  +---------------+---------------+---------------+---------------+
 *  |  range start (segments after  |  range length (segments held) |
 *  |  ack_seq + 1)                 |                               |
 *  +---------------+---------------+---------------+---------------+
 *  |   ... OPAL_BTL_USNIC_SACK_RANGES ranges in all, nranges used  |
 *  +---------------+---------------+---------------+---------------+
 *
 *  PIECE segments only (a piece of a sealed datagram too large for the
 *  path, btl_usnic_post.c), after the common header, then the piece's bytes:
 *  +---------------+---------------+---------------+---------------+
 *  |         nonce of the whole datagram (64 bits): which copy     |
 *  +                                                               +
 *  |                                                               |
 *  +---------------+---------------+---------------+---------------+
 *  |     length of the whole       |   offset of this piece in it  |
 *  +---------------+---------------+---------------+---------------+
 *
 *  PROBE segments (path MTU search, btl_usnic_pmtu.c): the common header
 *  and payload_len bytes of padding; the peer answers with an explicit ACK
 *  whose probe echo says how long the probe was.
 *
 * Version 2 replaced version 1's job cookie (computable by anyone who
 * knows the job id) with the nonce and the tag; version 3 widened the
 * sender id (a vpid, unique only inside one job) to the process name, so
 * that spawned and connected jobs can share a receiver; version 4 gave
 * explicit ACKs selective-ACK ranges (the 16 bits of the common header
 * cannot describe a lost batch of 44 datagrams); version 5 starts each
 * pair's stream at its own sequence number (the sender's modex ISN offset
 * by the receiver's), where version 4 started all of a sender's streams at
 * its one ISN; version 6 counts the credit in KiB of what the receiver's
 * buffer is charged (btl_usnic_charge.h, the table in its modex) instead
 * of segments, so small messages get the depth their real cost allows;
 * version 7 added path MTU probes, their echo in explicit ACKs, and
 * pieces (a datagram cut to a smaller path, reassembled by the receiver);
 * version 8 tells in each explicit ACK how long the receiver held it, so
 * that the sender's congestion control sees the path's delay alone;
 * version 9 keys each pair by X25519 (its modex entry publishes a public
 * key where version 8 published the receive key itself).
 */
#ifndef OPAL_BTL_USNIC_PROTO_H
#define OPAL_BTL_USNIC_PROTO_H

#include <stdint.h>
#include <stddef.h>
#include <endian.h>

#define OPAL_BTL_USNIC_MAGIC            0x5553u   /* "US" */
#define OPAL_BTL_USNIC_PROTO_VERSION    9

/* Segment types: X(name, value) */
#define OPAL_BTL_USNIC_SEG_TYPES(X) \
    X(FRAG,  1)   /* a whole PML fragment in one datagram */ \
    X(CHUNK, 2)   /* a piece of a fragment to be reassembled */ \
    X(ACK,   3)   /* header only, carries a cumulative ACK */ \
    X(PUT,   4)   /* emulated RDMA write: bytes for a registered region of the receiver */ \
    X(PROBE, 5)   /* padding of a size the path MTU search tries; the peer echoes its length */ \
    X(PIECE, 6)   /* a piece of a sealed datagram the path became too small for */

enum {
#define OPAL_BTL_USNIC_SEG_ENUM(name, value) OPAL_BTL_USNIC_PKT_##name = value,
    OPAL_BTL_USNIC_SEG_TYPES(OPAL_BTL_USNIC_SEG_ENUM)
#undef OPAL_BTL_USNIC_SEG_ENUM
};

/* Header flags */
#define OPAL_BTL_USNIC_HDR_FLAG_ACK 0x01     /* ack_seq is meaningful (always on data segments) */
#define OPAL_BTL_USNIC_HDR_FLAG_ACK_SOON 0x04 /* the sender completes an operation on this segment's
                                                 ACK (a PUT's last segment): ACK it without delay */
#define OPAL_BTL_USNIC_HDR_FLAG_LATE_DUP 0x08 /* with FLAG_ACK: since its last ACK the receiver got a
                                                 second copy of a segment it had but had not ACKed yet:
                                                 our retransmit timer fired before its ACK could come */
#define OPAL_BTL_USNIC_HDR_FLAG_RETX_TIMEOUT 0x10 /* this copy is a timeout retransmission (of the
                                                     sender's oldest un-ACKed segment) */
#define OPAL_BTL_USNIC_HDR_FLAG_RETX 0x20     /* this copy is a retransmission (any cause) */
#define OPAL_BTL_USNIC_HDR_FLAG_REPAIRED 0x40 /* with FLAG_ACK: since its last ACK a retransmitted copy
                                                 gave the receiver a segment it lacked (a real loss) */
#define OPAL_BTL_USNIC_HDR_FLAG_ACK_NEW 0x02 /* the ACK reports arrivals since the last one we sent:
                                                only such ACKs can count as duplicate ACKs */
#define OPAL_BTL_USNIC_HDR_FLAG_BYE 0x80     /* on an ACK: the sender is leaving (MPI_Finalize) and will
                                                ACK nothing more; this ACK is its last word */

#define OPAL_BTL_USNIC_MAC_BYTES 16

typedef struct __attribute__((packed)) opal_btl_usnic_hdr_t {
    uint16_t magic;
    uint8_t version;
    uint8_t type;
    uint64_t sender;   /* process name of the sender: jobid << 32 | vpid */
    uint32_t seq;
    uint32_t ack_seq;
    uint16_t payload_len;
    uint8_t tag;
    uint8_t flags;
    uint16_t credit;   /* with FLAG_ACK: the sender may have segments costing up to credit KiB of the
                          receiver's charge un-ACKed past ack_seq (btl_usnic_charge.h) */
    uint16_t sack;     /* with FLAG_ACK: bit i set = the receiver has ack_seq + 2 + i */
    uint64_t nonce;    /* the sender's count for this direction (btl_usnic_auth.h) */
    uint8_t mac[OPAL_BTL_USNIC_MAC_BYTES];
} opal_btl_usnic_hdr_t;

typedef struct __attribute__((packed)) opal_btl_usnic_chunk_hdr_t {
    opal_btl_usnic_hdr_t hdr;
    uint32_t frag_id;
    uint32_t frag_size;
    uint32_t frag_offset;
    uint32_t chunk_size; /* bytes of every chunk of the fragment but the last: the sender fixes it
                            at the first chunk (its path's size then), the receiver places chunks by it */
} opal_btl_usnic_chunk_hdr_t;

/* PUT segments: where the payload goes.  The receiver writes it only
 * inside a live region it registered for remote writes, whose id and key
 * match (the key is random: a datagram cannot guess it). */
typedef struct __attribute__((packed)) opal_btl_usnic_put_hdr_t {
    opal_btl_usnic_hdr_t hdr;
    uint32_t region_id;
    uint64_t key;
    uint64_t addr;      /* target address of the first payload byte */
} opal_btl_usnic_put_hdr_t;

/* Selective-ACK ranges of an explicit ACK: runs of segments the receiver
 * holds beyond the first one it lacks (ack_seq + 1), lowest first.  A
 * range covers ack_seq + 2 + start ... ack_seq + 1 + start + len.  Advice
 * only: the cumulative ack_seq alone releases anything. */
#define OPAL_BTL_USNIC_SACK_RANGES 8

typedef struct __attribute__((packed)) opal_btl_usnic_sack_range_t {
    uint16_t start;
    uint16_t len;
} opal_btl_usnic_sack_range_t;

typedef struct __attribute__((packed)) opal_btl_usnic_ack_hdr_t {
    opal_btl_usnic_hdr_t hdr;
    uint8_t nranges;    /* ranges in use, at most OPAL_BTL_USNIC_SACK_RANGES */
    uint8_t hold;       /* how long the receiver held this ACK after the last segment it took reached
                           its host (opal_btl_usnic_ack_hold_encode); OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN:
                           too long to say (the sender takes no delay sample from it) */
    uint16_t probe_echo; /* bytes of the largest PROBE that made the receiver send this ACK; 0: none */
    opal_btl_usnic_sack_range_t range[OPAL_BTL_USNIC_SACK_RANGES];
} opal_btl_usnic_ack_hdr_t;

/* The ACK's hold in one byte: 0..127 in 4 us steps (0..508 us), 128..254
 * in 32 us steps from 512 us (..4576 us), 255 unknown.  Decoding gives
 * the step's lower end: a hold is never taken for longer than it was. */
#define OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN 255u

static inline uint8_t opal_btl_usnic_ack_hold_encode(uint64_t usec)
{
    if (usec < 512) {
        return (uint8_t) (usec / 4);
    }
    uint64_t code = 128 + (usec - 512) / 32;
    return (uint8_t) (code < OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN ? code : OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN);
}

static inline uint64_t opal_btl_usnic_ack_hold_decode(uint8_t code)
{
    return (code < 128) ? (uint64_t) code * 4 : 512 + (uint64_t) (code - 128) * 32;
}

/* A PIECE: bytes [offset, offset + payload_len) of a sealed datagram of
 * whole_len bytes whose nonce is whole_nonce (the copy it belongs to:
 * every transmission has its own).  The whole is an ordinary datagram
 * with its own tag: the receiver checks it again once reassembled. */
typedef struct __attribute__((packed)) opal_btl_usnic_piece_hdr_t {
    opal_btl_usnic_hdr_t hdr;
    uint64_t whole_nonce;
    uint16_t whole_len;
    uint16_t offset;
} opal_btl_usnic_piece_hdr_t;

_Static_assert(sizeof(opal_btl_usnic_piece_hdr_t) == 64, "piece header size");
_Static_assert(sizeof(opal_btl_usnic_hdr_t) == 52, "wire header size");
_Static_assert(sizeof(opal_btl_usnic_ack_hdr_t) == 88, "ack header size");
_Static_assert(sizeof(opal_btl_usnic_put_hdr_t) == 72, "put header size");
_Static_assert(sizeof(opal_btl_usnic_chunk_hdr_t) == 68, "chunk header size");

static inline const char *opal_btl_usnic_seg_type_name(unsigned type)
{
    switch (type) {
#define OPAL_BTL_USNIC_SEG_NAME(name, value) case value: return #name;
    OPAL_BTL_USNIC_SEG_TYPES(OPAL_BTL_USNIC_SEG_NAME)
#undef OPAL_BTL_USNIC_SEG_NAME
    default: return "UNKNOWN";
    }
}

/* Byte-order helpers: one place for the wire's byte order */
static inline uint16_t opal_btl_usnic_wire16(uint16_t v) { return htole16(v); }
static inline uint32_t opal_btl_usnic_wire32(uint32_t v) { return htole32(v); }
static inline uint16_t opal_btl_usnic_host16(uint16_t v) { return le16toh(v); }
static inline uint32_t opal_btl_usnic_host32(uint32_t v) { return le32toh(v); }
static inline uint64_t opal_btl_usnic_wire64(uint64_t v) { return htole64(v); }
static inline uint64_t opal_btl_usnic_host64(uint64_t v) { return le64toh(v); }

/* Reasons a received datagram is dropped before it reaches the engine */
#define OPAL_BTL_USNIC_DROP_REASONS(X) \
    X(TRUNCATED,   "shorter than its headers say")      \
    X(BAD_MAGIC,   "wrong protocol magic")              \
    X(BAD_VERSION, "unsupported protocol version")      \
    X(BAD_TYPE,    "unknown segment type")              \
    X(UNKNOWN_PEER,"from a sender we do not know")      \
    X(BAD_SOURCE,  "from an address that is not the sender's") \
    X(BAD_MAC,     "tag does not authenticate it: forged, corrupt or another job's") \
    X(REPLAY,      "an authentic datagram taken before (or too old to tell)") \
    X(BAD_CHUNK,   "chunk offset or size out of range") \
    X(BAD_PUT,     "PUT outside a live registered region") \
    X(BAD_SACK,    "ACK with more selective-ACK ranges than it holds") \
    X(DEPARTED,    "from a peer that said it left (a late copy)") \
    X(OVERSIZED,   "longer than the channel's datagrams: cut short on the way, never ours") \
    X(BAD_PIECE,   "piece outside its datagram, or its datagram not one a piece may carry")

enum {
#define OPAL_BTL_USNIC_DROP_ENUM(name, text) OPAL_BTL_USNIC_DROP_##name,
    OPAL_BTL_USNIC_DROP_REASONS(OPAL_BTL_USNIC_DROP_ENUM)
#undef OPAL_BTL_USNIC_DROP_ENUM
    OPAL_BTL_USNIC_DROP_MAX
};

#define OPAL_BTL_USNIC_VALID 0

/* Bytes of the header of a segment of |type| (0 if unknown) */
static inline size_t opal_btl_usnic_hdr_len(unsigned type)
{
    switch (type) {
    case OPAL_BTL_USNIC_PKT_CHUNK: return sizeof(opal_btl_usnic_chunk_hdr_t);
    case OPAL_BTL_USNIC_PKT_PUT: return sizeof(opal_btl_usnic_put_hdr_t);
    case OPAL_BTL_USNIC_PKT_ACK: return sizeof(opal_btl_usnic_ack_hdr_t);
    case OPAL_BTL_USNIC_PKT_PIECE: return sizeof(opal_btl_usnic_piece_hdr_t);
    case OPAL_BTL_USNIC_PKT_FRAG:
    case OPAL_BTL_USNIC_PKT_PROBE: return sizeof(opal_btl_usnic_hdr_t);
    default: return 0;
    }
}

/**
 * Check the bytes actually received against the header they carry.
 *
 * |buf|, |len|: the datagram as received (provider prefix already skipped).
 * Returns OPAL_BTL_USNIC_VALID + 0, or 1 + the drop reason (so that 0 is the
 * only success value).  Framing only: whether the datagram is authentic is
 * for the engine (its tag), before any field is used for more than this.
 */
static inline int opal_btl_usnic_hdr_check(const void *buf, size_t len)
{
    const opal_btl_usnic_hdr_t *hdr = (const opal_btl_usnic_hdr_t *) buf;
    if (len < sizeof(*hdr)) {
        return 1 + OPAL_BTL_USNIC_DROP_TRUNCATED;
    }
    if (OPAL_BTL_USNIC_MAGIC != opal_btl_usnic_host16(hdr->magic)) {
        return 1 + OPAL_BTL_USNIC_DROP_BAD_MAGIC;
    }
    if (OPAL_BTL_USNIC_PROTO_VERSION != hdr->version) {
        return 1 + OPAL_BTL_USNIC_DROP_BAD_VERSION;
    }
    size_t payload = opal_btl_usnic_host16(hdr->payload_len);
    switch (hdr->type) {
    case OPAL_BTL_USNIC_PKT_ACK:
        if (0 != payload || len < sizeof(opal_btl_usnic_ack_hdr_t)) {
            return 1 + OPAL_BTL_USNIC_DROP_TRUNCATED;
        }
        return (((const opal_btl_usnic_ack_hdr_t *) buf)->nranges <= OPAL_BTL_USNIC_SACK_RANGES)
                   ? OPAL_BTL_USNIC_VALID
                   : 1 + OPAL_BTL_USNIC_DROP_BAD_SACK;
    case OPAL_BTL_USNIC_PKT_FRAG:
    case OPAL_BTL_USNIC_PKT_PROBE:
        return (len >= sizeof(*hdr) + payload) ? OPAL_BTL_USNIC_VALID
                                                 : 1 + OPAL_BTL_USNIC_DROP_TRUNCATED;
    case OPAL_BTL_USNIC_PKT_PIECE: {
        const opal_btl_usnic_piece_hdr_t *ph = (const opal_btl_usnic_piece_hdr_t *) buf;
        if (len < sizeof(*ph) + payload) {
            return 1 + OPAL_BTL_USNIC_DROP_TRUNCATED;
        }
        size_t whole = opal_btl_usnic_host16(ph->whole_len);
        size_t off = opal_btl_usnic_host16(ph->offset);
        if (0 == payload || whole < sizeof(*hdr) || off + payload > whole) {
            return 1 + OPAL_BTL_USNIC_DROP_BAD_PIECE;
        }
        return OPAL_BTL_USNIC_VALID;
    }
    case OPAL_BTL_USNIC_PKT_CHUNK: {
        const opal_btl_usnic_chunk_hdr_t *ch = (const opal_btl_usnic_chunk_hdr_t *) buf;
        if (len < sizeof(*ch) + payload) {
            return 1 + OPAL_BTL_USNIC_DROP_TRUNCATED;
        }
        uint64_t size = opal_btl_usnic_host32(ch->frag_size);
        uint64_t off = opal_btl_usnic_host32(ch->frag_offset);
        if (0 == payload || off + payload > size) {
            return 1 + OPAL_BTL_USNIC_DROP_BAD_CHUNK;
        }
        return OPAL_BTL_USNIC_VALID;
    }
    case OPAL_BTL_USNIC_PKT_PUT:
        if (len < sizeof(opal_btl_usnic_put_hdr_t) + payload) {
            return 1 + OPAL_BTL_USNIC_DROP_TRUNCATED;
        }
        return (0 == payload) ? 1 + OPAL_BTL_USNIC_DROP_BAD_PUT : OPAL_BTL_USNIC_VALID;
    default:
        return 1 + OPAL_BTL_USNIC_DROP_BAD_TYPE;
    }
}

#endif /* OPAL_BTL_USNIC_PROTO_H */
