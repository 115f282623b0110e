/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Per-module counters.  One X-macro list feeds the struct, the final
 * statistics line and the MPI_T performance variables, so a counter can
 * never be added to one and forgotten in the others.
 */
#ifndef OPAL_BTL_USNIC_STATS_H
#define OPAL_BTL_USNIC_STATS_H

#include <stdint.h>

#define OPAL_BTL_USNIC_COUNTERS(X) \
    X(num_total_sends,      "Segments posted (first transmissions and retransmissions, not ACKs)") \
    X(num_frag_sends,       "Whole-fragment segments posted for the first time") \
    X(num_chunk_sends,      "Chunk segments posted for the first time") \
    X(num_fast_sends,       "Tiny fragments sent on the fast path (sendi or inline send)") \
    X(num_resends,          "Segments retransmitted") \
    X(num_timeout_retrans,  "Retransmissions caused by a retransmit timer") \
    X(num_tail_probes,      "Tail-loss probes: the oldest un-ACKed segment resent alone after the probe timeout (srtt + 4 rttvar + ACK delay), before any timeout") \
    X(num_spurious_probes,  "Tail-loss probes that filled no hole (the peer had the segment but was slow to ACK): each doubles that peer's probe timeout floor") \
    X(num_fast_retrans,     "Retransmissions caused by a duplicate ACK") \
    X(num_sack_retrans,     "Retransmissions of holes revealed by the receiver's selective ACK bits") \
    X(num_parting_resends,  "Copies of un-ACKed segments posted when a peer was released (finalize), before the goodbye") \
    X(num_away_resends,     "Copies of un-ACKed segments posted by the away thread while the process did not progress us (btl_usnic_away_resend)") \
    X(num_spurious_timeouts,"Timeout retransmissions the receiver reported as premature (it had the data but had not ACKed yet)") \
    X(num_ack_sends,        "Explicit ACK segments posted") \
    X(num_piggy_acks,       "ACKs piggy-backed on data segments") \
    X(num_send_eagain,      "Posts refused by the provider for lack of room (retried later)") \
    X(num_total_recvs,      "Datagrams received") \
    X(num_frag_recvs,       "Whole-fragment segments accepted") \
    X(num_chunk_recvs,      "Chunk segments accepted") \
    X(num_fast_recvs,       "Fragments delivered on the fast receive path") \
    X(num_ack_recvs,        "ACKs processed (explicit or piggy-backed)") \
    X(num_dup_recvs,        "Duplicate segments dropped") \
    X(num_oow_low_recvs,    "Segments below the receive window dropped (already delivered)") \
    X(num_oow_high_recvs,   "Segments beyond the receive window dropped") \
    X(num_badfrag_recvs,    "Chunks dropped because their reassembly slot was busy") \
    X(num_held_frags,       "Fragments complete ahead of an earlier one, held back to reach the PML in order") \
    X(num_drop_no_memory,   "Segments dropped un-ACKed for want of memory to hold or reassemble them") \
    X(num_old_dup_acks,     "Stale ACKs ignored") \
    X(num_dup_acks,         "Duplicate ACKs received") \
    X(num_invalid_recvs,    "Invalid datagrams dropped (all reasons)") \
    X(num_drop_truncated,   "Datagrams dropped: shorter than their headers say") \
    X(num_drop_bad_magic,   "Datagrams dropped: wrong protocol magic") \
    X(num_drop_bad_version, "Datagrams dropped: unsupported protocol version") \
    X(num_drop_bad_mac,     "Datagrams dropped: their tag does not authenticate them (forged, corrupted, or another job's)") \
    X(num_drop_replay,      "Datagrams dropped: authentic, but taken before (a copy or a replay) or too old to tell") \
    X(num_drop_bad_source,  "Datagrams dropped: from an address other than the one the sender published") \
    X(num_drop_bad_tag,     "Datagrams dropped: for a PML tag nobody registered (or beyond the tag range)") \
    X(num_drop_bad_type,    "Datagrams dropped: unknown segment type") \
    X(num_drop_unknown_peer,"Datagrams dropped: unknown sender") \
    X(num_drop_bad_chunk,   "Datagrams dropped: chunk offset or size out of range") \
    X(num_drop_bad_put,     "Datagrams dropped: PUT outside a live registered region (bad key, peer or range)") \
    X(num_drop_bad_sack,    "Datagrams dropped: an ACK claiming more selective-ACK ranges than it holds") \
    X(num_drop_oversized,   "Datagrams dropped: longer than the receive buffer (the channel's MTU)") \
    X(num_drop_bad_piece,   "Datagrams dropped: a piece outside its datagram, or whose datagram was itself a piece") \
    X(num_drop_departed,    "Datagrams dropped: from a peer that said it left (MPI_Finalize); late copies") \
    X(num_bye_sends,        "Goodbyes posted at finalize (an ACK saying we leave; each peer gets two)") \
    X(num_bye_recvs,        "Goodbyes received: the peer left, nothing more of ours will be ACKed") \
    X(num_departed_unacked, "Segments a departing peer had not ACKed, released when it said goodbye") \
    X(num_recv_errors,      "Receive completions with an error") \
    X(num_recv_repost_delayed, "Receive buffers the provider would not take back at once (re-posted on a later pass)") \
    X(num_busy_yields,      "Progress calls that found nothing and gave up the core (sched_yield): in the last 0.1 s this process had less than 3/4 of a core and was preempted at least 3 times (btl_usnic_yield_when_busy)") \
    X(num_gso_sends,        "Socket wire: segmentation-offload sends (UDP_SEGMENT: several datagrams in one sendmsg)") \
    X(num_gso_segs,         "Socket wire: datagrams sent within segmentation-offload sends") \
    X(num_mmsg_sends,       "Socket wire: sendmmsg calls of several datagrams (no offload for that run)") \
    X(num_gso_fallbacks,    "Socket wire: segmentation-offload sends that failed at run time and lowered a peer's limits or turned its offload off (the datagrams were sent again without)") \
    X(num_gro_recvs,        "Socket wire: receives that returned a coalesced run of datagrams (UDP_GRO)") \
    X(num_gro_segs,         "Socket wire: datagrams received within coalesced runs") \
    X(num_gro_truncated,    "Socket wire: datagrams of a coalesced run cut off by the receive buffer (retransmitted)") \
    X(num_stamp_switches,   "Socket wire: arrival stamps (SO_TIMESTAMPING, for the congestion control) switched on or off: on while batches flow, off 50 ms after") \
    X(num_stamped_recvs,    "Socket wire: receives whose arrival the kernel stamped (taken while stamps were on)") \
    X(num_unknown_arrivals, "Socket wire: receives whose arrival was unknown (read after a gap in the polling, without a stamp): no delay sample or ACK hold from them") \
    X(num_sock_backlog,     "Socket wire: flushes that found the socket's send buffer full (the rest waited for the next pass)") \
    X(num_sock_send_drops,  "Socket wire: datagrams the kernel refused for good (left to retransmission)") \
    X(max_sent_window,      "High-water mark of un-ACKed segments to one peer") \
    X(pml_module_sends,     "Fragments handed to the BTL by the PML") \
    X(pml_send_callbacks,   "Send completion callbacks made to the PML") \
    X(num_sendi_refused,    "Immediate sends (sendi) refused because the peer's window was full or fragments were queued to it: the PML sent them through a request instead") \
    X(num_resubmit_copies,  "Descriptors sent again while their last send was un-ACKed (sent as a copy)") \
    X(num_cq_overruns,      "Completion queue overruns the provider reported (completions lost: should never happen, the queues are sized for every posted operation)") \
    X(num_puts,             "PUT operations started by the PML") \
    X(num_put_sends,        "PUT segments posted for the first time") \
    X(num_put_recvs,        "PUT segments written into a registered region") \
    X(num_put_after_dereg,  "PUT datagrams with the key of a deregistered region (dropped unwritten)") \
    X(num_regs,             "Memory regions registered for remote writes") \
    X(num_peers_on_demand,  "Peers added when their first datagram came (a process of another job that sent first)") \
    X(num_pmtu_probes,      "Path MTU probes sent (one padded datagram each, of the size being tried)") \
    X(num_pmtu_probes_acked,"Path MTU probes the peer echoed: that size crosses the path") \
    X(num_pmtu_probes_lost, "Path MTU probes that were not echoed in time") \
    X(num_pmtu_blackholes,  "Black holes detected: datagrams above the base size timed out twice while a base-size probe got through") \
    X(num_pmtu_lowered,     "Times the datagram size toward a peer was lowered (black holes)") \
    X(num_pmtu_raised,      "Times the datagram size toward a peer was raised (a larger probe was echoed)") \
    X(num_pieces_sent,      "Pieces sent: datagrams larger than the path allows now, cut into several") \
    X(num_pieces_reassembled, "Datagrams reassembled from pieces and then processed as if received whole") \
    X(num_cc_delay_cuts, "Congestion windows cut because a round trip showed queueing delay above btl_usnic_cc_target") \
    X(num_cc_loss_cuts, "Congestion windows cut because a loss was detected (at most once per round trip)") \
    X(num_cc_loss_mode, "Times a peer's congestion control found a queue it does not drain (others fill it) and reacted to loss only until it drained") \
    X(num_cc_paced, "Times a peer's sends waited for its pacing rate")

typedef struct opal_btl_usnic_stats_t {
#define OPAL_BTL_USNIC_STAT_FIELD(name, help) uint64_t name;
    OPAL_BTL_USNIC_COUNTERS(OPAL_BTL_USNIC_STAT_FIELD)
#undef OPAL_BTL_USNIC_STAT_FIELD
} opal_btl_usnic_stats_t;

#endif /* OPAL_BTL_USNIC_STATS_H */
