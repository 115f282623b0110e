/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Fragments, segments and their free lists.
 *
 *  fragment: what the PML asks us to send (a BTL descriptor), any size.
 *  segment:  what goes on the wire in one datagram.
 *  chunk:    a piece of a large fragment carried by one segment.
 *
 * A small fragment (fits one datagram) embeds its one segment, whose buffer
 * holds the copy of the data that is retransmitted until ACKed.  Its
 * buffer comes in one of a few size classes (see
 * opal_btl_usnic_small_frag_alloc), so that a small message waiting for
 * its peer's window holds memory in proportion to its size.  A large
 * fragment borrows chunk segments from a free list, one per datagram; each
 * chunk segment holds its own copy of its bytes, so once the last chunk is
 * copied out the fragment no longer needs the user's buffer.  A PUT's
 * segments hold only their header when the provider gathers (fi_sendmsg
 * with two iovecs): the payload is sent from the registered source, which
 * the PML leaves alone until the PUT completes, after the last ACK.
 *
 * A send segment's state is two independent facts (see style guide §4.5):
 * POSTED (the provider may still read its buffer) and ACKED (the peer has
 * it).  It is recycled only when it is ACKED and not POSTED.
 */
#ifndef OPAL_BTL_USNIC_FRAG_H
#define OPAL_BTL_USNIC_FRAG_H

#include "opal_config.h"

#include <string.h>

#include "opal/class/opal_free_list.h"
#include "opal/mca/btl/btl.h"

#include "btl_usnic_proto.h"
#include "btl_usnic_seq.h"
#include "btl_usnic_slab.h"

/* A segment's or fragment's peer is Open MPI's opaque BTL endpoint
 * (btl.h declares the tag; btl_usnic_endpoint.h, a layer above, defines
 * it): nothing here looks inside. */

/* Send segment kinds */
enum {
    OPAL_BTL_USNIC_SEG_SMALL = 1, /* embedded in a small fragment */
    OPAL_BTL_USNIC_SEG_CHUNK = 2, /* from the chunk free list */
    OPAL_BTL_USNIC_SEG_ACK = 3,   /* from the ACK free list */
};

/* Send segment state flags */
#define OPAL_BTL_USNIC_SEG_FLAG_POSTED    0x01 /* handed to the provider, no completion yet */
#define OPAL_BTL_USNIC_SEG_FLAG_ACKED     0x02 /* covered by a cumulative ACK */
#define OPAL_BTL_USNIC_SEG_FLAG_IN_HOTEL  0x04 /* checked into the hotel: its retransmit deadline runs */
#define OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND 0x08 /* on the engine's resend list */
#define OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW 0x10 /* holds a sequence number awaiting ACK */
#define OPAL_BTL_USNIC_SEG_FLAG_TIMED_OUT 0x20 /* queued for resend by its retransmit timer */
#define OPAL_BTL_USNIC_SEG_FLAG_SACKED    0x40 /* the peer reported it held (a selective ACK): never resent,
                                                  though only the cumulative ACK releases it */

/* Room for the provider's per-operation context (struct fi_context2) */
#define OPAL_BTL_USNIC_WIRE_CTX_WORDS 8

typedef struct opal_btl_usnic_send_seg_t {
    opal_free_list_item_t super;          /* free list; resend list while in use */
    uint64_t wire_ctx[OPAL_BTL_USNIC_WIRE_CTX_WORDS];
    uint8_t kind;
    uint8_t flags;
    uint8_t channel;                      /* channel it was last posted on */
    uint8_t retries;                      /* times retransmitted */
    opal_btl_usnic_seq_t seq;
    uint32_t wire_len;                    /* header + payload bytes */
    uint32_t charge;                      /* what it costs the receiver (btl_usnic_charge.h), counted in
                                             its endpoint's in-flight charge while un-ACKed */
    uint64_t sent_time;                   /* engine time of the last (re)transmission */
    uint64_t deadline;                    /* retransmit deadline (engine time, us) */
    struct mca_btl_base_endpoint_t *ep;
    struct opal_btl_usnic_send_frag_t *frag; /* owning small frag, else NULL */
    uint8_t *buf;                         /* provider buffer (prefix first) */
    uint32_t capacity;                    /* datagram bytes buf holds after the prefix */
    opal_btl_usnic_hdr_t *hdr;            /* buf + prefix */
    void *desc;                           /* registration descriptor of buf (NULL if none needed) */
    /* Gather sends: the last |ext_len| bytes of the datagram are not in
     * |buf| but at |ext_data| (a PUT's source, valid until the segment is
     * ACKed); 0 when the whole datagram is in |buf|. */
    const uint8_t *ext_data;
    uint32_t ext_len;
} opal_btl_usnic_send_seg_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_send_seg_t);

/* Fragment kinds */
enum {
    OPAL_BTL_USNIC_FRAG_SMALL = 1,
    OPAL_BTL_USNIC_FRAG_LARGE = 2,
    OPAL_BTL_USNIC_FRAG_PUT = 3,   /* an emulated RDMA write (btl_usnic_put.c) */
};

/* Room for the PML's header in a large fragment (prepare_src |reserve|) */
#define OPAL_BTL_USNIC_LARGE_HDR_SPACE 128

#define OPAL_BTL_USNIC_FRAG_SEGMENTS 2 /* a header and the user's data at most */

typedef struct opal_btl_usnic_send_frag_t {
    mca_btl_base_descriptor_t base;       /* free list item; endpoint send queue */
    mca_btl_base_segment_t segments[OPAL_BTL_USNIC_FRAG_SEGMENTS];
    uint8_t kind;
    uint8_t size_class;                   /* small fragments: index of the pool's class */
    bool owned_by_btl;                    /* set from des_flags or by btl_free */
    bool callback_pending;                /* PML wants its send callback */
    bool queued;                          /* on the endpoint's send queue */
    uint8_t tag;
    struct mca_btl_base_endpoint_t *ep;
    size_t total_len;                     /* bytes described by the segments */
    /* small fragments */
    opal_btl_usnic_send_seg_t seg;
    /* large fragments */
    size_t offset;                        /* bytes already copied into chunks */
    uint32_t frag_id;
    uint32_t chunk_payload;               /* bytes per chunk, fixed at its first (the receiver
                                             places chunks by it) */
    uint8_t *pack_buf;                    /* packed data (non-contiguous / alloc) */
    size_t pack_buf_size;
    uint8_t hdr_space[OPAL_BTL_USNIC_LARGE_HDR_SPACE];
    /* PUT fragments: segments[0] describes the local source */
    struct {
        uint64_t remote_addr;
        uint32_t region_id;
        uint64_t key;
        uint32_t unacked;                 /* posted segments not yet ACKed */
        int status;                       /* OPAL_SUCCESS until it fails */
        mca_btl_base_rdma_completion_fn_t cbfunc;
        void *cbcontext;
        void *cbdata;
        struct mca_btl_base_registration_handle_t *local_handle;
    } put;
} opal_btl_usnic_send_frag_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_send_frag_t);

static inline bool opal_btl_usnic_seg_is_free_to_recycle(const opal_btl_usnic_send_seg_t *seg)
{
    return (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ACKED) &&
           !(seg->flags & (OPAL_BTL_USNIC_SEG_FLAG_POSTED | OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND));
}

/* Size classes of small fragments' buffers (datagram bytes, header
 * included): 1, 4 and 16 KiB, then the whole datagram; a class not below
 * the datagram size is left out (1472-byte datagrams: 1 KiB and 1472) */
#define OPAL_BTL_USNIC_SMALL_CLASSES   4
#define OPAL_BTL_USNIC_SMALL_CLASS_MIN 1024

struct opal_btl_usnic_frag_pool_t;

typedef struct opal_btl_usnic_small_class_t {
    opal_free_list_t frags;
    size_t datagram;                          /* bytes each buffer holds after the prefix */
    struct opal_btl_usnic_frag_pool_t *pool; /* for the free list's item initializer */
} opal_btl_usnic_small_class_t;

/* Where fragments and segments come from and go back to: one pool per
 * engine (its |pool|) */
typedef struct opal_btl_usnic_frag_pool_t {
    size_t prefix;                   /* provider prefix bytes before each header */
    size_t mtu;                      /* largest datagram: a segment buffer holds prefix + mtu */
    opal_btl_usnic_slab_set_t slabs; /* memory of every segment buffer (registered once per slab) */
    opal_btl_usnic_small_class_t small[OPAL_BTL_USNIC_SMALL_CLASSES];
    int num_small_classes;           /* the last one holds a whole datagram */
    opal_free_list_t large_frags;
    opal_free_list_t chunk_segs;
    opal_free_list_t ack_segs;
    bool lists_ready;
} opal_btl_usnic_frag_pool_t;

/**
 * Fill |pool|: free lists of small fragments (one per size class) and
 * large ones, chunk and ACK segments, as many items to start with as
 * |send_depth| (the data channel's send queue, at least 16; fewer of the
 * larger small classes, large fragments and ACKs).
 * Segment buffers come from slabs registered through |mem| (NULL: the
 * provider needs no registration), cache-line aligned, each |prefix| +
 * |mtu| bytes.  Returns OPAL_SUCCESS or OPAL_ERR_OUT_OF_RESOURCE.
 */
int opal_btl_usnic_frag_lists_init(opal_btl_usnic_frag_pool_t *pool, const opal_btl_usnic_mem_ops_t *mem,
                                   size_t prefix, size_t mtu, uint32_t send_depth);
/* Free the lists, then their slabs; safe on a pool never filled */
void opal_btl_usnic_frag_lists_fini(opal_btl_usnic_frag_pool_t *pool);

/**
 * A small fragment whose buffer holds a datagram of |datagram_len| bytes
 * (header included): from the smallest class that fits.  NULL if none
 * fits (more than the pool's mtu) or no memory.
 */
opal_btl_usnic_send_frag_t *opal_btl_usnic_small_frag_alloc(opal_btl_usnic_frag_pool_t *pool, size_t datagram_len);
opal_btl_usnic_send_frag_t *opal_btl_usnic_large_frag_alloc(opal_btl_usnic_frag_pool_t *pool, size_t pack_size);
opal_btl_usnic_send_seg_t *opal_btl_usnic_chunk_seg_alloc(opal_btl_usnic_frag_pool_t *pool);
opal_btl_usnic_send_seg_t *opal_btl_usnic_ack_seg_alloc(opal_btl_usnic_frag_pool_t *pool);

/* Describe |size| bytes of a small fragment's own buffer as its one segment */
void opal_btl_usnic_frag_init_small(opal_btl_usnic_send_frag_t *frag, size_t size, uint32_t flags);

/* Return a fragment to its free list (no checks). */
void opal_btl_usnic_frag_return(opal_btl_usnic_frag_pool_t *pool, opal_btl_usnic_send_frag_t *frag);

/* Where a large fragment's datagrams are cut small, the CPU's own
 * prefetcher restarts at each (the engine's work between them breaks
 * the stream), and a datagram's first read of the user's buffer (its
 * tag, or the copy into a chunk) waited on memory at every line: at
 * 1472-byte datagrams a PUT's tag took 175 ns in place against 65 ns on
 * cached data.  The datagram after next is asked for ahead: 1 MiB
 * messages +4 %, 4 MiB +17 % (bench/README.md, issue 28).  Bigger
 * datagrams stream well enough on their own (8972 and 65000 bytes: no
 * gain measured), so only datagrams up to this many payload bytes. */
#define OPAL_BTL_USNIC_PREFETCH_MAX_PAYLOAD 4096u

typedef struct opal_btl_usnic_data_span_t {
    const uint8_t *addr;
    size_t len;
} opal_btl_usnic_data_span_t;

/* Where the |len| bytes from |offset| of |frag|'s data lie: at most |max|
 * spans, one per segment touched, none past the data's end.  Returns
 * how many. */
unsigned opal_btl_usnic_frag_spans(const opal_btl_usnic_send_frag_t *frag, size_t offset, size_t len,
                                   opal_btl_usnic_data_span_t *spans, unsigned max);

/* The spans of the datagram after next when this one takes |len| bytes
 * from |offset| (the next ones as long); none for a datagram above
 * OPAL_BTL_USNIC_PREFETCH_MAX_PAYLOAD */
unsigned opal_btl_usnic_frag_ahead_spans(const opal_btl_usnic_send_frag_t *frag, size_t offset, size_t len,
                                         opal_btl_usnic_data_span_t *spans, unsigned max);

/* Ask the CPU for those spans (a hint: nothing is read, nothing faults) */
void opal_btl_usnic_frag_prefetch_ahead(const opal_btl_usnic_send_frag_t *frag, size_t offset, size_t len);

/**
 * Recycle |seg| if neither the provider nor the peer needs it any more; for
 * a small fragment's embedded segment, the fragment goes back to its free
 * list when the BTL also owns the descriptor.  Returns true if released.
 */
bool opal_btl_usnic_seg_release_if_done(opal_btl_usnic_frag_pool_t *pool, opal_btl_usnic_send_seg_t *seg);

/* Where the payload of a send segment starts */
static inline uint8_t *opal_btl_usnic_seg_payload(opal_btl_usnic_send_seg_t *seg, size_t hdr_len)
{
    return (uint8_t *) seg->hdr + hdr_len;
}

/* Bytes of the datagram (header first) that are in seg->hdr */
static inline size_t opal_btl_usnic_seg_inline_len(const opal_btl_usnic_send_seg_t *seg)
{
    return seg->wire_len - seg->ext_len;
}

/* Copy the whole datagram of |seg| (header and payload, wherever the
 * payload is) to |dst|, which has room for seg->wire_len bytes. */
static inline void opal_btl_usnic_seg_linearize(const opal_btl_usnic_send_seg_t *seg, uint8_t *dst)
{
    size_t inline_len = opal_btl_usnic_seg_inline_len(seg);
    memcpy(dst, seg->hdr, inline_len);
    if (seg->ext_len > 0) {
        memcpy(dst + inline_len, seg->ext_data, seg->ext_len);
    }
}

/* --- Receive side: reassembly of chunked fragments --- */

typedef struct opal_btl_usnic_rx_frag_t {
    uint32_t frag_id;                     /* 0 = slot free (ids start at 1) */
    uint32_t size;
    uint32_t bytes_left;
    uint32_t chunk_size;                  /* payload of every chunk but the last */
    opal_btl_usnic_seq_t last_seq;        /* highest sequence number of its chunks so far */
    uint8_t tag;
    uint8_t *buf;
    uint8_t *have;                        /* bitmap: chunks received */
} opal_btl_usnic_rx_frag_t;

/* A complete fragment that has to wait for an earlier one: the PML gets
 * fragments in the order they were sent (see "Delivery order" in
 * btl_usnic_recv.c), so it is handed over once every sequence number up
 * to |seq| has arrived. */
typedef struct opal_btl_usnic_held_t {
    struct opal_btl_usnic_held_t *next;   /* list sorted by seq */
    opal_btl_usnic_seq_t seq;             /* its last segment's sequence number */
    uint8_t tag;
    uint32_t len;
    uint8_t *buf;                         /* owned */
} opal_btl_usnic_held_t;

/**
 * Classification of an incoming chunk against the reassembly slot it maps
 * to.  Pure function of the slot and the chunk header fields.
 */
typedef enum {
    OPAL_BTL_USNIC_RX_FRAG_NEW,      /* slot free: start a reassembly */
    OPAL_BTL_USNIC_RX_FRAG_CONTINUE, /* slot holds this fragment */
    OPAL_BTL_USNIC_RX_FRAG_BUSY,     /* slot holds another fragment: drop, sender resends */
    OPAL_BTL_USNIC_RX_FRAG_MISMATCH, /* same id, different total size: corrupt, drop */
} opal_btl_usnic_rx_frag_class_t;

opal_btl_usnic_rx_frag_class_t opal_btl_usnic_rx_frag_classify(const opal_btl_usnic_rx_frag_t *slot,
                                                               uint32_t frag_id, uint32_t frag_size);

/**
 * Is a chunk of |len| bytes at |offset| one of the pieces a fragment of
 * |frag_size| bytes is cut into with |chunk_size|-byte chunks?  Every
 * chunk but the last is exactly |chunk_size| bytes at a multiple of it.
 */
static inline bool opal_btl_usnic_chunk_is_aligned(uint32_t frag_size, uint32_t chunk_size, uint32_t offset,
                                                   uint32_t len)
{
    if (0 == chunk_size || 0 != offset % chunk_size || offset >= frag_size) {
        return false;
    }
    uint32_t expect = frag_size - offset < chunk_size ? frag_size - offset : chunk_size;
    return len == expect;
}

/* Has the chunk at |offset| already been copied into |slot|? */
static inline bool opal_btl_usnic_rx_frag_has(const opal_btl_usnic_rx_frag_t *slot, uint32_t offset)
{
    uint32_t i = offset / slot->chunk_size;
    return 0 != (slot->have[i / 8] & (1u << (i % 8)));
}

/**
 * Copy one chunk into its reassembly.  Starts the reassembly if the slot
 * was free (allocates the buffer and the chunk bitmap).  Returns
 * OPAL_SUCCESS and sets *|complete_p| when the last chunk arrived (|seq|,
 * the chunk's sequence number, raises slot->last_seq);
 * OPAL_ERR_OUT_OF_RESOURCE if no buffer could be allocated (the chunk
 * must then be dropped un-ACKed).  Assumes the caller checked the
 * classification, opal_btl_usnic_chunk_is_aligned() and
 * opal_btl_usnic_rx_frag_has(), so every byte is written exactly once.
 */
int opal_btl_usnic_rx_frag_add(opal_btl_usnic_rx_frag_t *slot, uint32_t frag_id, uint32_t frag_size,
                               uint32_t chunk_size, uint32_t offset, const void *data, uint32_t len,
                               uint8_t tag, opal_btl_usnic_seq_t seq, bool *complete_p);

/* Forget a finished or abandoned reassembly, freeing its buffer. */
void opal_btl_usnic_rx_frag_reset(opal_btl_usnic_rx_frag_t *slot);

#endif /* OPAL_BTL_USNIC_FRAG_H */
