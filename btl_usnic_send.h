/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The send progression (btl_usnic_send.c): fragments from the PML,
 * chunking large ones, the round-robin over ready endpoints, the
 * progress pass on top of the engine, and the copies posted while the
 * owner is away.  Posting itself is btl_usnic_post.h's.
 */
#ifndef OPAL_BTL_USNIC_SEND_H
#define OPAL_BTL_USNIC_SEND_H

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
 * Try to send a small fragment right now on the priority channel.  Returns
 * true if it was posted (the caller then owns completion semantics), false
 * if the window, credits or size do not allow it (nothing changed).
 */
bool opal_btl_usnic_send_fast(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag);

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
 * One pass of the send progression: deferred PML callbacks, the hotel's
 * evictions (if the clock passed the next deadline), retransmissions (data channel, at most
 * max_resends_per_iteration), new segments from ready endpoints, then
 * explicit ACKs that are due.  Advances the tick.  Returns the number of
 * segments posted.
 */
int opal_btl_usnic_engine_progress(opal_btl_usnic_engine_t *eng);

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

/**
 * |ep| is released (finalize, del_procs): post one copy of each of its
 * un-ACKed segments the peer did not report held, whatever their timers
 * say, before the goodbye.  Our last message may have been lost while a
 * runtime call kept us from resending it, and a peer of another job (the
 * other side of a disconnect) may still wait for it; the BTL cannot wait
 * for ACKs here (a progress pass would hand late fragments to a PML being
 * finalized).  Makes no upcall.  Returns the number of copies posted.
 */
int opal_btl_usnic_parting_resend(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep);

#endif /* OPAL_BTL_USNIC_SEND_H */
