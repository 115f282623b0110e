/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The send side of the engine (btl_usnic_send.c): queueing fragments,
 * chunking large ones, sequence numbers, posting through the wire,
 * retransmissions, send completions, the send progression, and the
 * copies posted while the owner is away.
 */
#ifndef OPAL_BTL_USNIC_SEND_H
#define OPAL_BTL_USNIC_SEND_H

#include <string.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_proto.h"

/**
 * A copy of |seg| (header, payload and gathered tail) in a chunk segment
 * of the engine's (registered) memory, for the owner to post as an extra
 * datagram that is never ACKed nor timed; NULL if none is free.  The copy
 * has no flags: mark it ACKED so that its completion recycles it.
 */
opal_btl_usnic_send_seg_t *opal_btl_usnic_seg_copy(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_send_seg_t *seg);

/**
 * Hand a PML descriptor to the engine (btl_send), with the engine's clock
 * already set.  Tiny small fragments go out at once on the priority
 * channel; everything else is queued.  Returns 1 if the send completed and
 * the PML gets no callback, 0 if the callback will come, OPAL_ERR_UNREACH
 * for a failed peer.
 */
int opal_btl_usnic_frag_submit(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag);

/**
 * Send a small fragment the BTL owns whose first |len| payload bytes are
 * filled (btl_sendi): at once if possible, else queued.  No PML callback.
 * Returns true if it left at once.
 */
bool opal_btl_usnic_frag_submit_owned(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag,
                                      size_t len);

/**
 * Queue |frag| for |ep| and make the endpoint ready to send if it can.
 * |frag| must have its segments, tag and total length set.
 */
void opal_btl_usnic_endpoint_enqueue_frag(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag);

/**
 * Try to send a small fragment right now on the priority channel.  Returns
 * true if it was posted (the caller then owns completion semantics), false
 * if the window, credits or size do not allow it (nothing changed).
 */
bool opal_btl_usnic_send_fast(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag);

/* Put |ep| on the ready-to-send list if it has work, window and credits. */
void opal_btl_usnic_check_rts(opal_btl_usnic_endpoint_t *ep);

/**
 * Post the queued segments of ready endpoints now, from inside the PML's
 * send call (btl_send of a chunked fragment: its first datagrams are on
 * the latency path, and the next progress pass would first poll both
 * channels).  Nothing happens while retransmissions wait: progress sends
 * those ahead of new data.  A fragment that gets fully posted calls back
 * from the next progress pass, never from inside the PML's call.  Returns
 * the number of segments posted.
 */
int opal_btl_usnic_engine_send_now(opal_btl_usnic_engine_t *eng);

/**
 * One pass of the send progression: expired retransmit timers (if the
 * clock passed the next deadline), retransmissions (data channel, at most
 * max_resends_per_iteration), new segments from ready endpoints, then
 * explicit ACKs that are due.  Advances the tick.  Returns the number of
 * segments posted.
 */
int opal_btl_usnic_engine_progress(opal_btl_usnic_engine_t *eng);

/**
 * The provider released |seg|'s buffer.  Returns a channel credit and
 * recycles the segment if it is also ACKed.
 */
void opal_btl_usnic_seg_send_complete(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg);

/* Fail |frag| (not queued any more) with |status|: PML callback with the
 * error if it wants one, then recycle it if the BTL owns it. */
void opal_btl_usnic_frag_fail(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status);

/* Make the PML send callback for |frag| if one is pending, and recycle the
 * fragment if the BTL owns it and nothing references it. */
void opal_btl_usnic_frag_send_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag);

/**
 * Post |seg|, a segment nobody ACKs and no timer watches (an explicit ACK,
 * a copy from resend_away): sealed, and recycled when the provider
 * releases it.  Takes the channel's credit; on failure the segment is
 * released and the post error returned.
 */
int opal_btl_usnic_post_unacked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                opal_btl_usnic_send_seg_t *seg, int channel);

#define OPAL_BTL_USNIC_AWAY_INTERVAL_MAX 1000000 /* us: slowest back-off of resend_away */

/**
 * The owner is away (inside a runtime call that never progresses us, such
 * as MPI_Comm_disconnect's blocking fence, or computing): post a copy of
 * each un-ACKed segment that is overdue, every peer, once per back-off
 * interval (rto_max, doubling to OPAL_BTL_USNIC_AWAY_INTERVAL_MAX: a
 * window of copies per peer per round is no burden then), so that a peer
 * waiting for our last message gets it although we cannot read its ACKs.
 * Makes no upcall, reads no completion, declares no peer dead, takes no
 * ACK: the owner does all that when it progresses again.  Progress and
 * every new post reset the back-off.  Copies go in chunk segments recycled at their completion.
 * Returns the number of copies posted.
 */
int opal_btl_usnic_resend_away(opal_btl_usnic_engine_t *eng);

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
void opal_btl_usnic_seg_seal(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *seg);
/* The same for a datagram of |len| bytes laid out at |hdr| (the
 * test-only injector's forgeries, which must pass the tag to reach the
 * checks behind it) */
void opal_btl_usnic_seal(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_hdr_t *hdr,
                         size_t len);

/* Post the chunk segment |seg| (sequence number, ACK, timer) on the data
 * channel; if the post fails, |seg| goes back to its free list. */
int opal_btl_usnic_chunk_seg_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_send_seg_t *seg);

#endif /* OPAL_BTL_USNIC_SEND_H */
