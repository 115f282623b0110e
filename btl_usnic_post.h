/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The posting layer (btl_usnic_post.c): first transmissions,
 * retransmissions, explicit ACKs and goodbyes, segments nobody ACKs,
 * send completions and channel credits, sealing, and the endpoints' send
 * queues.
 */
#ifndef OPAL_BTL_USNIC_POST_H
#define OPAL_BTL_USNIC_POST_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_proto.h"

/**
 * First transmission of |seg| to |ep| on |channel|: stamp the next
 * sequence number and the current ACK, seal, post, pay an owed ACK,
 * check the segment into the hotel.  Returns OPAL_SUCCESS,
 * OPAL_ERR_TEMP_OUT_OF_RESOURCE (nothing changed) or a hard error (the
 * peer has been failed).
 */
int opal_btl_usnic_seg_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                            opal_btl_usnic_send_seg_t *seg, int channel);

/* Copy the PML's data described by small |frag| into its embedded
 * segment, and fill its header. */
void opal_btl_usnic_small_frag_gather(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag);

/**
 * Repost segments from the resend list (data channel, oldest first, at
 * most max_resends_per_iteration but a whole batch, while credits last).
 * Returns the number posted.
 */
int opal_btl_usnic_resends_post(opal_btl_usnic_engine_t *eng);

/**
 * Queue |frag| for |ep| and make the endpoint ready to send if it can.
 * |frag| must have its segments, tag and total length set.
 */
void opal_btl_usnic_endpoint_enqueue_frag(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag);

/**
 * The wire hands |seg| to the network only now, at |when| (us), later
 * than it was posted (it queued it for a batch): its round trip starts
 * here, so that the delay samples of the congestion control do not take
 * a long pass of posting, or a process descheduled in it, for a queue on
 * the path.  A time before the one it has changes nothing.
 */
void opal_btl_usnic_seg_leaves(opal_btl_usnic_send_seg_t *seg, uint64_t when);

/**
 * The provider released |seg|'s buffer.  Returns a channel credit and
 * recycles the segment if it is also ACKed.
 */
void opal_btl_usnic_seg_send_complete(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg);

/**
 * Post |seg|, a segment nobody ACKs and no timer watches (an explicit ACK,
 * a copy from resend_away): sealed, and recycled when the provider
 * releases it.  Takes the channel's credit; on failure the segment is
 * released and the post error returned.
 */
int opal_btl_usnic_post_unacked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                opal_btl_usnic_send_seg_t *seg, int channel);

/* Post explicit ACKs that are due.  Returns the number posted. */
int opal_btl_usnic_ack_send_due(opal_btl_usnic_engine_t *eng);

/**
 * Say goodbye to |ep| (at finalize): an ACK of everything we hold, flagged
 * BYE, so that the peer stops waiting for ACKs a finalized process will
 * never send.  OPAL_ERR_TEMP_OUT_OF_RESOURCE if it cannot be posted now.
 */
int opal_btl_usnic_bye_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

/**
 * Post a path MTU probe of |size| bytes (header and padding) to |ep|, a
 * datagram nobody ACKs: the peer echoes its length in an explicit ACK.
 * Returns OPAL_SUCCESS or the post error (OPAL_ERR_TEMP_OUT_OF_RESOURCE
 * when no send slot or segment is free).
 */
int opal_btl_usnic_probe_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t size);

/**
 * Answer a probe of |size| bytes from |ep| at once: an explicit ACK with
 * the probe echo (ACK_NEW only if arrivals are unreported).
 * OPAL_ERR_TEMP_OUT_OF_RESOURCE if it cannot go now (the prober tries again).
 */
int opal_btl_usnic_probe_echo_send(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t size);

/* A free send slot on |channel| */
static inline bool opal_btl_usnic_have_credit(const opal_btl_usnic_engine_t *eng, int channel)
{
    return eng->credits[channel] > 0;
}

/* Segments an endpoint may post in one turn: a whole batch of the wire
 * (the datagrams of one segmentation-offload send go to one peer), one
 * where the wire does not batch */
static inline uint32_t opal_btl_usnic_send_quantum(const opal_btl_usnic_engine_t *eng)
{
    return eng->p.batch_segs > 1 ? eng->p.batch_segs : 1;
}

/* Fill the common header of an outgoing segment */
static inline void opal_btl_usnic_hdr_fill(const opal_btl_usnic_engine_t *eng, opal_btl_usnic_hdr_t *hdr,
                                           uint8_t type, opal_btl_usnic_seq_t seq, size_t payload_len,
                                           uint8_t tag)
{
    hdr->magic = opal_btl_usnic_wire16(OPAL_BTL_USNIC_MAGIC);
    hdr->version = OPAL_BTL_USNIC_PROTO_VERSION;
    hdr->type = type;
    hdr->sender = opal_btl_usnic_wire64(eng->p.my_name);
    hdr->seq = opal_btl_usnic_wire32(seq);
    hdr->ack_seq = 0;
    hdr->payload_len = opal_btl_usnic_wire16((uint16_t) payload_len);
    hdr->tag = tag;
    hdr->flags = 0;
    hdr->credit = 0;
    hdr->sack = 0;
    hdr->nonce = 0; /* both set by opal_btl_usnic_seg_seal() when it is posted */
    memset(hdr->mac, 0, sizeof(hdr->mac));
}

/**
 * Give |seg| (to |ep|, header and payload final) its nonce and its tag,
 * right before it is posted: every transmission, a retransmission too, is
 * a new datagram with a new nonce.
 */
/* Fail the peers of the endpoints whose nonces ran out (once each; its
 * message says why: btl_usnic_module.c) */
void opal_btl_usnic_nonces_spent_fail(opal_btl_usnic_engine_t *eng);

void opal_btl_usnic_seg_seal(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *seg);
/* The same for a datagram of |len| bytes laid out at |hdr| (the
 * test-only injector's forgeries, which must pass the tag to reach the
 * checks behind it) */
void opal_btl_usnic_seal(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_hdr_t *hdr,
                         size_t len);

/* Post the chunk segment |seg| (sequence number, ACK, hotel) on the data
 * channel; if the post fails, |seg| goes back to its free list. */
int opal_btl_usnic_chunk_seg_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_send_seg_t *seg);

#endif /* OPAL_BTL_USNIC_POST_H */
