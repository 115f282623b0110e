/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The sender's reliability: processing the ACKs a peer sends us (cumulative,
 * duplicate, selective), the hotel where un-ACKed segments wait for their
 * deadline, the RTO, what to retransmit, and the teardown of a peer that
 * failed or left.  What we owe a peer (ACK scheduling, grants) is in
 * btl_usnic_acktr.c; posting (first copies, retransmissions, explicit
 * ACKs) in btl_usnic_post.c, above both.
 *
 * Design notes
 * ------------
 * Window.  Every data-bearing segment to a peer takes the next 32-bit
 * sequence number.  At most |window| segments are un-ACKed at once: the
 * sender's window is (acked_seq, acked_seq + window].  The receiver accepts
 * [next_expected, next_expected + window); both sides use the same window
 * (the smaller of the two published in the modex), so anything the sender
 * may send fits the receiver's bitmap.
 *
 * The hotel.  Un-ACKed segments wait for their ACK in the engine's hotel:
 * the rooms are the window's slots (ep->tx.sent), the register is the
 * list of endpoints with guests (endpoints_in_flight).  Check-in
 * (opal_btl_usnic_hotel_checkin) comes with every (re)post and gives the
 * segment its deadline: send time plus the endpoint's RTO, doubled per
 * timeout since its ACK last advanced (capped at rto_max; RFC 6298 5.5
 * and 5.7).  Check-out comes with its ACK, or when it is queued for
 * retransmission.  Eviction (opal_btl_usnic_hotel_evict_due) runs from
 * the progress function once the clock passes next_deadline, the
 * earliest deadline of all guests: a pass where nothing is due costs one
 * compare.  A timeout resends from the oldest guest (see "What a timeout
 * retransmits"), so eviction looks at one room per endpoint.
 * Why not opal_hotel (the seed design)?  Measured by bench/hotel_cost.c
 * (bench/README.md, four runs): a check-in + check-out pair costs
 * 1.5-2.4 ns here, 4-9 ns in an opal_hotel without event base (what the
 * engine paid on every post and ACK until the hotel was its own: a
 * registry that never evicted), 42-70 ns in one with an event base
 * (each check-in arms a libevent timer, as hotel-driven timeouts need).
 * And a 100 us timeout fires at the first progress pass after its
 * deadline here (median 0, p99 0.2 us), but 3.9 ms late (median) from an
 * opal_hotel whose event base is looped busily (libevent's clock is the
 * kernel's coarse one: 4 ms ticks) and 9.9 ms late at the ~10 ms cadence
 * at which opal_progress loops it: 20-50 times rto_min on a loopback
 * path.
 *
 * Tail-loss probes (RFC 9002's probe timeout).  A lost last datagram of a
 * burst, or a lost last ACK, leaves nothing to report the loss: no
 * duplicate ACK, no selective ACK.  So before the first timeout of an
 * episode the oldest segment's deadline is the probe timeout, srtt + 4
 * rttvar + the peer's ACK delay (at least rto_min, at most the RTO, whose
 * floor starts at retrans_timeout), and its expiry resends that segment
 * alone (tail_probe) without back-off, up to tail_probes times: the tail
 * itself, or a copy the receiver holds, which it ACKs at once, selective
 * ranges and all (SACK repair then resends exactly the holes).  Probes
 * carry RETX but not RETX_TIMEOUT, so the receiver never reports them as
 * premature timeouts.  Unanswered probes end in the timeout below.
 *
 * What a timeout retransmits.  Only an endpoint's oldest un-ACKed segment
 * (the one the cumulative ACK is stuck on).  Resending the whole window on
 * a timeout repeats the same burst every RTO in lockstep; with periodic
 * loss the same segment is then dropped forever (the pair simulation's
 * lockstep test).  Later holes are found one round trip apart: while in
 * recovery, each ACK that advances but does not reach |recover| (NewReno's
 * partial ACK) retransmits the new oldest segment at once if it is overdue.
 *
 * RTO.  RFC 6298: srtt and rttvar from ACKs of segments sent only once
 * (Karn's rule), RTO = srtt + 4 rttvar clamped to [rto_min, rto_max];
 * retrans_timeout is the RTO before the first sample.  The back-off stops
 * at 4x while the peer sent any ACK within rto_max: under heavy random
 * loss a lost retransmission of the hole at the window's left edge is
 * common, and 8x, 16x ... waits only stall the window; a silent peer
 * backs off fully (up to rto_max) until peer_timeout.
 *
 * Selective ACKs.  Every ACK also carries 16 bits: which of the 16
 * segments after the first missing one the receiver already has (and an
 * explicit ACK up to 8 ranges).  The sender resends each hole that a
 * reported segment proves lost once it has waited a round trip
 * (sack_repair), so heavy loss costs one round trip per batch of holes
 * instead of one per hole or a timeout each.  The proof (RACK's idea, per
 * channel): a channel is a socket, and a socket delivers in order, so a
 * hole is lost once the receiver holds a segment of its channel sent no
 * earlier than the hole's last copy; a segment of the other channel
 * proves nothing (the receiver reads each channel in bounded turns).  A
 * copy is thus proven lost only by what was sent after it, else its
 * timeout decides.
 * Tiny fragments rarely overtake data ones anyway: they take the priority
 * channel only while none of the peer's data-channel segments is
 * un-ACKed (btl_usnic_send.c).  A receiver ACKs at once when a segment
 * arrives out of order.
 *
 * Premature timeouts.  A polling peer that is descheduled (a busy host, a
 * VM whose vCPU is preempted: on the 2-core test VM, stalls above 0.5 ms
 * come several times a second) for longer than the RTO answers late, and
 * the timeout retransmits data it already has.  The RTO's floor therefore
 * adapts between rto_min and rto_max, per endpoint:
 *  - it starts at retrans_timeout (rto_floor_start): nothing is known yet,
 *    and on a path that loses nothing a long floor costs nothing;
 *  - a path that loses datagrams needs short timeouts for its tail losses.
 *    The receiver knows a real loss when a retransmitted copy (FLAG_RETX)
 *    gives it a segment it lacked, and says so (FLAG_REPAIRED): the floor
 *    falls to rto_min at once.  (Duplicate ACKs and selective-ACK holes are
 *    no proof: tiny fragments on the priority channel overtake data, and a
 *    stalled peer makes every segment look overdue.)
 *  - a premature timeout doubles it (at most rto_max), unless a loss was
 *    reported within LOSS_MEMORY_USEC.  The receiver tells one: the copy,
 *    flagged RETX_TIMEOUT, arrives for a segment it holds but had not ACKed
 *    (or had ACKed too recently for that ACK to have arrived) when the copy
 *    left; when its ACK was lost instead, it had ACKed the segment an RTO
 *    before.  It says so with FLAG_LATE_DUP on its next ACK.
 *  - a raised floor halves back toward rto_floor_start after
 *    FLOOR_DECAY_USEC without another premature timeout.
 *
 * Duplicate ACKs.  An ACK equal to acked_seq while segments are in flight
 * means the receiver saw something beyond a hole: the second such
 * duplicate for a given ACK value (the first may be reordering between the
 * two channels) fast-retransmits acked_seq + 1, unless its selective-ACK
 * bits name only segments that prove nothing about it (of the other
 * channel, or sent before its last copy).  Later duplicates of the
 * same value retransmit it again only once it is overdue (sent more than
 * a round trip ago, see oldest_overdue), so a burst of duplicates does not
 * become a burst of resends, and a lost retransmission does not wait for a
 * timeout while the path works.  Partial ACKs in recovery retransmit the
 * next hole only when it is overdue too.
 *
 * Dead peers.  A peer that has not advanced its ACK for peer_timeout while
 * we have un-ACKed data to it is declared dead through the peer_failed upcall:
 * its fragments fail and the PML is told.
 *
 * Stale ACKs (older than acked_seq) are ignored; ACKs for sequence numbers
 * never sent are ignored and counted as invalid.
 *
 * A peer whose sends fail hard at the provider is reported through
 * the peer_failed upcall; its queued fragments fail with OPAL_ERR_UNREACH.
 */
#include "opal_config.h"

#include <stdio.h>
#include <string.h>

#include "btl_usnic_ack.h"
#include "btl_usnic_complete.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"

/* ----- the hotel ----- */

/* The register: |ep| has guests from now on (and the peer timeout runs) */
static void flight_list_add(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (!ep->tx.on_flight_list) {
        opal_list_append(&eng->endpoints_in_flight, &ep->tx.flight_item);
        ep->tx.on_flight_list = true;
        ep->timer.last_ack_time = eng->now;
    }
}

static void lower_next_deadline(opal_btl_usnic_engine_t *eng, uint64_t deadline)
{
    if (deadline < eng->next_deadline) {
        eng->next_deadline = deadline;
    }
}

/* Check-out: |seg| no longer waits for a deadline (ACKed, or queued for
 * retransmission).  Its deadline stays: next_deadline may be early, a
 * stale deadline costs one scan. */
static void hotel_checkout(opal_btl_usnic_send_seg_t *seg)
{
    seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_IN_HOTEL;
}

/* May the next expiry of |ep|'s timer be a tail-loss probe?  Only before
 * the first timeout since the ACK last advanced, and while probes are left */
static bool tail_probe_allowed(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep)
{
    return 0 == ep->timer.backoff && ep->timer.tail_probes < eng->p.tail_probes;
}

/* The probe timeout (RFC 9002): srtt + 4 rttvar + the peer's ACK delay,
 * at least rto_min (the clock and scheduling granularity), never later
 * than the RTO; the RTO itself before the first sample */
static uint64_t probe_timeout(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep)
{
    if (0 == ep->timer.srtt) {
        return ep->timer.rto;
    }
    uint64_t pto = ep->timer.srtt + 4 * ep->timer.rttvar + eng->p.ack_delay;
    uint64_t floor = ep->timer.pto_floor > eng->p.rto_min ? ep->timer.pto_floor : eng->p.rto_min;
    if (pto < floor) {
        pto = floor;
    }
    return pto < ep->timer.rto ? pto : ep->timer.rto;
}

/* The retransmit timeout, but at least a round trip plus the receiver's
 * longest recent absence (the congestion control keeps it, from the ACK
 * holds): a timeout inside an absence the receiver has shown is sure to
 * be premature, and resends a batch for nothing (a 2->1 incast on busy
 * hosts resent 4-6 % of its segments so); never beyond rto_max */
static uint64_t rto_past_absence(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep)
{
    uint64_t rto = ep->timer.rto;
    if (eng->p.cc_enabled) {
        uint64_t absence = ep->timer.srtt + opal_btl_usnic_cc_away(&ep->cc);
        absence = (absence < eng->p.rto_max) ? absence : eng->p.rto_max;
        rto = (absence > rto) ? absence : rto;
    }
    return rto;
}

void opal_btl_usnic_hotel_checkin(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                  opal_btl_usnic_send_seg_t *seg)
{
    flight_list_add(eng, ep);
    seg->sent_time = eng->now;
    if (tail_probe_allowed(eng, ep)) {
        seg->deadline = eng->now + probe_timeout(eng, ep);
        seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_IN_HOTEL;
        lower_next_deadline(eng, seg->deadline);
        return;
    }
    unsigned backoff = ep->timer.backoff;
    if (backoff > OPAL_BTL_USNIC_ALIVE_MAX_BACKOFF && 0 != ep->timer.last_heard &&
        eng->now - ep->timer.last_heard < eng->p.rto_max) {
        backoff = OPAL_BTL_USNIC_ALIVE_MAX_BACKOFF;
    }
    seg->deadline = eng->now + opal_btl_usnic_rto_backoff(rto_past_absence(eng, ep), backoff, eng->p.rto_max);
    seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_IN_HOTEL;
    lower_next_deadline(eng, seg->deadline);
}

static void flight_list_remove(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (ep->tx.on_flight_list) {
        opal_list_remove_item(&eng->endpoints_in_flight, &ep->tx.flight_item);
        ep->tx.on_flight_list = false;
    }
}

/* ----- ACKs from the peer ----- */

static void resend_list_remove(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    if (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND) {
        opal_list_remove_item(&eng->resend_segs, &seg->super.super);
        seg->flags &= ~OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND;
    }
}

/* Queue |seg| for retransmission (idempotent). */
static void resend_enqueue(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    if (!(seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
        seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND;
        opal_list_append(&eng->resend_segs, &seg->super.super);
    }
}

/* The peer has |seg|: take it out of every structure that waits for that. */
static void seg_acked(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    hotel_checkout(seg);
    resend_list_remove(eng, seg);
    seg->flags = (uint8_t) ((seg->flags & ~OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW) | OPAL_BTL_USNIC_SEG_FLAG_ACKED);
    if (OPAL_BTL_USNIC_SEG_CHUNK == seg->kind && NULL != seg->frag) {
        opal_btl_usnic_put_seg_acked(eng, seg); /* the target has these bytes in place */
    }
    opal_btl_usnic_seg_release_if_done(&eng->pool, seg);
}

static opal_btl_usnic_send_seg_t *oldest_unacked(const opal_btl_usnic_endpoint_t *ep)
{
    if (0 == opal_btl_usnic_endpoint_in_flight(ep)) {
        return NULL;
    }
    return ep->tx.sent[opal_btl_usnic_slot(ep, (opal_btl_usnic_seq_t) (ep->tx.acked_seq + 1))];
}

/* RFC 6298: RTO = srtt + 4 rttvar, within [|lo|, |hi|] */
static uint64_t rto_of(uint64_t srtt, uint64_t rttvar, uint64_t lo, uint64_t hi)
{
    uint64_t rto = srtt + 4 * rttvar;
    if (rto < lo) {
        rto = lo;
    }
    return rto > hi ? hi : rto;
}

uint64_t opal_btl_usnic_rtt_update(uint64_t *srtt, uint64_t *rttvar, uint64_t sample, uint64_t rto_min,
                                   uint64_t rto_max)
{
    if (0 == *srtt) {
        *srtt = sample > 0 ? sample : 1;
        *rttvar = sample / 2;
    } else {
        uint64_t err = (*srtt > sample) ? *srtt - sample : sample - *srtt;
        *rttvar = (3 * *rttvar + err) / 4;
        *srtt = (7 * *srtt + sample) / 8;
        if (0 == *srtt) {
            *srtt = 1;
        }
    }
    return rto_of(*srtt, *rttvar, rto_min, rto_max);
}

/* A retransmission starts (or continues) loss recovery up to what has
 * been sent so far. */
static void recovery_enter(opal_btl_usnic_endpoint_t *ep)
{
    if (!ep->timer.in_recovery) {
        ep->timer.in_recovery = true;
        ep->timer.recover = ep->tx.next_seq - 1;
    }
}

/* Queue |seg| for retransmission now, stopping its timer. */
static void retransmit_now(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                           opal_btl_usnic_send_seg_t *seg)
{
    hotel_checkout(seg);
    resend_enqueue(eng, seg);
    recovery_enter(ep);
}

/* ----- the congestion window's signals (btl_usnic_cc.c) ----- */

static void window_grows(opal_btl_usnic_endpoint_t *ep, uint64_t acked, uint64_t in_flight, uint64_t now)
{
    opal_btl_usnic_cc_path_t path;
    opal_btl_usnic_endpoint_cc_path(ep, &path);
    opal_btl_usnic_cc_acked(&ep->cc, &path, acked, in_flight, now);
}

static void cc_count(opal_btl_usnic_engine_t *eng, opal_btl_usnic_cc_event_t ev)
{
    switch (ev) {
    case OPAL_BTL_USNIC_CC_CUT_DELAY:
        OPAL_BTL_USNIC_STAT_INC(eng, num_cc_delay_cuts);
        break;
    case OPAL_BTL_USNIC_CC_CUT_LOSS:
        OPAL_BTL_USNIC_STAT_INC(eng, num_cc_loss_cuts);
        break;
    case OPAL_BTL_USNIC_CC_TO_LOSS_MODE:
        OPAL_BTL_USNIC_STAT_INC(eng, num_cc_loss_mode);
        break;
    default:
        break;
    }
}

/* A loss was detected: a proven hole or duplicate ACKs, or a
 * retransmission |timeout| (a loss unless the peer reports it premature) */
static void congestion_loss(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, bool timeout)
{
    if (eng->p.cc_enabled) {
        opal_btl_usnic_cc_path_t path;
        opal_btl_usnic_endpoint_cc_path(ep, &path);
        cc_count(eng, timeout ? opal_btl_usnic_cc_timeout(&ep->cc, &path, eng->now)
                              : opal_btl_usnic_cc_loss(&ep->cc, &path, eng->now));
    }
}

void opal_btl_usnic_ack_hold_taken(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, unsigned hold)
{
    uint64_t rtt = ep->timer.fresh_rtt;
    ep->timer.fresh_rtt = 0;
    if (!eng->p.cc_enabled || hold >= OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN) {
        return;
    }
    uint64_t held = opal_btl_usnic_ack_hold_decode((uint8_t) hold);
    opal_btl_usnic_cc_hold(&ep->cc, held, eng->now); /* how long the receiver is away, sample or not */
    if (0 == rtt || held >= OPAL_BTL_USNIC_CC_MAX_HOLD_USEC || held >= rtt) {
        return; /* the receiver was away: what is left is mostly the error of two clocks */
    }
    opal_btl_usnic_cc_path_t path;
    opal_btl_usnic_endpoint_cc_path(ep, &path);
    cc_count(eng, opal_btl_usnic_cc_delay(&ep->cc, &path, rtt - held, eng->now));
}

void opal_btl_usnic_loss_reported(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    ep->timer.last_loss = eng->now;
    if (ep->timer.rto_floor > eng->p.rto_min) {
        ep->timer.rto_floor = eng->p.rto_min;
        ep->timer.floor_changed = eng->now;
        if (0 != ep->timer.srtt) {
            ep->timer.rto = rto_of(ep->timer.srtt, ep->timer.rttvar, eng->p.rto_min, eng->p.rto_max);
        }
    }
}

/* Duplicate ACKs of one value before a fast retransmit.  One is not
 * enough: tiny fragments on the priority channel legitimately overtake
 * data segments, and the receiver then reports the "hole" once. */
#define OPAL_BTL_USNIC_DUPACK_THRESHOLD 2

/**
 * The path delivers (a duplicate ACK just arrived) but the oldest segment
 * has waited longer than a round trip since it was last sent: its last
 * copy was lost too.  Retransmitting it now beats waiting for a timeout
 * that scheduling noise on a busy host may have stretched far beyond the
 * real round trip.  "A round trip" is srtt + rttvar, at most rto_min.
 */
static bool seg_overdue(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep,
                        const opal_btl_usnic_send_seg_t *seg)
{
    if (NULL == seg || (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
        return false;
    }
    uint64_t rtt = ep->timer.srtt + ep->timer.rttvar;
    if (0 == ep->timer.srtt || rtt > eng->p.rto_min) {
        rtt = eng->p.rto_min;
    }
    return eng->now - seg->sent_time >= rtt;
}

static bool oldest_overdue(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep)
{
    return seg_overdue(eng, ep, oldest_unacked(ep));
}

/* The in-flight segment |pos| places after acked_seq + 1 */
static opal_btl_usnic_send_seg_t *seg_at(const opal_btl_usnic_endpoint_t *ep, uint32_t pos)
{
    return ep->tx.sent[opal_btl_usnic_slot(ep, (opal_btl_usnic_seq_t) (ep->tx.acked_seq + 1 + pos))];
}

/* Where the receiver's reports prove a loss (RACK's idea, per channel).
 * A channel is a socket, and a socket delivers in order: a hole is lost
 * once the receiver holds a segment sent on the same channel no earlier
 * than the hole's last copy (one pass posts its datagrams at one time;
 * the held one's higher position breaks the tie).  A segment of the other
 * channel proves nothing, either way: tiny fragments on the priority
 * channel overtake data ones, and a receiver reads a bounded number of
 * datagrams per channel and pass, so behind a slow receiver data ones
 * overtake queued priority ones too (a stream with 10 us of work per
 * message counted 760 spurious resends in 40000 when a data segment was
 * taken as proof).  A copy already resent is proven lost only by what
 * was sent after it, else the timeout decides: behind a slow receiver it
 * may wait in its queue long after a round trip's estimate.  |held[c]|:
 * the receiver holds, above the hole, a segment last posted on channel c,
 * the latest of them sent at |latest[c]|. */
typedef struct {
    bool held[OPAL_BTL_USNIC_NUM_CHANNELS];
    uint64_t latest[OPAL_BTL_USNIC_NUM_CHANNELS];
} held_evidence_t;

static void evidence_add(held_evidence_t *ev, const opal_btl_usnic_send_seg_t *seg)
{
    if (NULL == seg || seg->channel >= OPAL_BTL_USNIC_NUM_CHANNELS) {
        return;
    }
    unsigned c = seg->channel;
    if (!ev->held[c] || seg->sent_time > ev->latest[c]) {
        ev->held[c] = true;
        ev->latest[c] = seg->sent_time;
    }
}

static bool evidence_proves(const held_evidence_t *ev, const opal_btl_usnic_send_seg_t *hole)
{
    unsigned c = hole->channel;
    return c < OPAL_BTL_USNIC_NUM_CHANNELS && ev->held[c] && ev->latest[c] >= hole->sent_time;
}

/* Below position |top| (one past the highest the receiver holds): every
 * hole that a held segment above it proves lost (SACKED: held) is resent
 * once it waited a round trip, oldest first; a lost batch goes again as
 * one.  The evidence gathers from the top down, the resends go bottom up. */
static void repair_proven_holes(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint32_t top)
{
    uint8_t lost[OPAL_BTL_USNIC_WINDOW_LIMIT];
    if (top > OPAL_BTL_USNIC_WINDOW_LIMIT) {
        top = OPAL_BTL_USNIC_WINDOW_LIMIT;
    }
    held_evidence_t ev;
    memset(&ev, 0, sizeof(ev));
    for (uint32_t pos = top; pos-- > 0;) {
        const opal_btl_usnic_send_seg_t *seg = seg_at(ep, pos);
        lost[pos] = 0;
        if (NULL == seg) {
            continue;
        }
        if (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_SACKED) {
            evidence_add(&ev, seg);
        } else {
            lost[pos] = evidence_proves(&ev, seg) && seg_overdue(eng, ep, seg);
        }
    }
    bool any = false;
    for (uint32_t pos = 0; pos < top; ++pos) {
        if (lost[pos]) {
            retransmit_now(eng, ep, seg_at(ep, pos));
            OPAL_BTL_USNIC_STAT_INC(eng, num_sack_retrans);
            any = true;
        }
    }
    if (any) {
        congestion_loss(eng, ep, false);
    }
}

/* Mark what the 16 selective ACK bits of an ACK (relative to acked_seq,
 * which it has just set: bit i is position i + 1) say the receiver holds;
 * returns one past the highest such position (0: none) */
static uint32_t sack_bits_take(opal_btl_usnic_endpoint_t *ep, uint16_t sack)
{
    uint32_t in_flight = opal_btl_usnic_endpoint_in_flight(ep);
    uint32_t top = 0;
    for (uint32_t i = 0; i < 16 && i + 1 < in_flight; ++i) {
        opal_btl_usnic_send_seg_t *seg = seg_at(ep, i + 1);
        if ((sack & (1u << i)) && NULL != seg) {
            seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_SACKED;
            top = i + 2;
        }
    }
    return top;
}

/* The receiver's selective ACK bits: every segment it lacks that a held
 * one proves lost, and sent more than a round trip ago, is resent now
 * instead of one hole per round trip or per timeout. */
static void sack_repair(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint16_t sack)
{
    if (0 != sack) {
        repair_proven_holes(eng, ep, sack_bits_take(ep, sack));
    }
}

void opal_btl_usnic_sack_ranges_take(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                     const opal_btl_usnic_sack_range_t *ranges, unsigned n)
{
    uint32_t in_flight = opal_btl_usnic_endpoint_in_flight(ep);
    uint32_t top = 0; /* one past the highest position the peer holds */
    for (unsigned i = 0; i < n && i < OPAL_BTL_USNIC_SACK_RANGES; ++i) {
        uint32_t start = (uint32_t) opal_btl_usnic_host16(ranges[i].start) + 1; /* ack_seq + 1 is the hole */
        uint32_t end = start + opal_btl_usnic_host16(ranges[i].len);
        if (end > in_flight) {
            end = in_flight; /* claims beyond what we sent: nothing to learn */
        }
        if (start >= end) {
            continue; /* nothing of it was sent: it teaches nothing about holes either */
        }
        for (uint32_t pos = start; pos < end; ++pos) {
            opal_btl_usnic_send_seg_t *seg = seg_at(ep, pos);
            if (NULL != seg) {
                seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_SACKED;
            }
        }
        if (end > top) {
            top = end;
        }
    }
    repair_proven_holes(eng, ep, top);
}

/* May a duplicate ACK with selective ACK bits |sack| count against the
 * oldest un-ACKed segment?  Bits that name only segments that prove
 * nothing about it (see held_evidence_t) do not; without bits the arrival
 * lies further on, and the duplicate counts as it always did. */
static bool dup_ack_counts(const opal_btl_usnic_endpoint_t *ep, uint16_t sack)
{
    const opal_btl_usnic_send_seg_t *oldest = seg_at(ep, 0);
    if (0 == sack || NULL == oldest) {
        return true;
    }
    held_evidence_t ev;
    memset(&ev, 0, sizeof(ev));
    uint32_t in_flight = opal_btl_usnic_endpoint_in_flight(ep);
    for (uint32_t i = 0; i < 16 && i + 1 < in_flight; ++i) {
        if (sack & (1u << i)) {
            evidence_add(&ev, seg_at(ep, i + 1));
        }
    }
    return evidence_proves(&ev, oldest);
}

static void fast_retransmit(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_send_seg_t *seg = oldest_unacked(ep);
    if (NULL == seg || (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
        return;
    }
    retransmit_now(eng, ep, seg);
    OPAL_BTL_USNIC_STAT_INC(eng, num_fast_retrans);
    congestion_loss(eng, ep, false);
}

/* A floor raised by premature timeouts halves back toward rto_floor_start
 * once the peer has answered in time for FLOOR_DECAY_USEC. */
static void floor_decay(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    uint64_t start = opal_btl_usnic_rto_floor_start(&eng->p);
    if (ep->timer.rto_floor > start && eng->now - ep->timer.floor_changed >= OPAL_BTL_USNIC_FLOOR_DECAY_USEC) {
        ep->timer.rto_floor /= 2;
        if (ep->timer.rto_floor < start) {
            ep->timer.rto_floor = start;
        }
        ep->timer.floor_changed = eng->now;
    }
}

/* Karn's rule: only a segment sent once gives an unambiguous sample, and
 * only outside recovery: an ACK that jumps over a repaired hole covers
 * segments that waited for the repair, not for the path. */
static void rtt_sample(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                       const opal_btl_usnic_send_seg_t *seg)
{
    if (0 == seg->retries && !ep->timer.in_recovery && eng->now >= seg->sent_time) {
        /* the congestion control's sample ends when the ACK reached the host
         * (none if that is unknown), the timer's when we read it */
        uint64_t at = (0 != eng->arrival) ? eng->arrival : eng->now;
        ep->timer.fresh_rtt = (at > seg->sent_time && OPAL_BTL_USNIC_ARRIVAL_UNKNOWN != at) ? at - seg->sent_time : 0;
        floor_decay(eng, ep);
        ep->timer.rto = opal_btl_usnic_rtt_update(&ep->timer.srtt, &ep->timer.rttvar, eng->now - seg->sent_time,
                                                  ep->timer.rto_floor, eng->p.rto_max);
    }
}

void opal_btl_usnic_premature_timeout(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    /* only a timeout of ours can have been premature, and it counts once */
    if (0 == ep->timer.last_timeout || eng->now - ep->timer.last_timeout > eng->p.rto_max) {
        return;
    }
    ep->timer.last_timeout = 0;
    OPAL_BTL_USNIC_STAT_INC(eng, num_spurious_timeouts);
    if (eng->p.cc_enabled) {
        opal_btl_usnic_cc_undo(&ep->cc);
    }
    if (0 != ep->timer.last_loss && eng->now - ep->timer.last_loss < OPAL_BTL_USNIC_LOSS_MEMORY_USEC) {
        return; /* a lossy path needs its short timeouts more than we save */
    }
    uint64_t floor = 2 * ep->timer.rto_floor;
    ep->timer.rto_floor = floor < eng->p.rto_max ? floor : eng->p.rto_max;
    ep->timer.floor_changed = eng->now;
    if (ep->timer.rto < ep->timer.rto_floor) {
        ep->timer.rto = ep->timer.rto_floor;
    }
}

/* After the ACK advanced: leave recovery, or go on with the next hole. */
static void after_ack_advance(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    ep->timer.last_ack_time = eng->now;
    ep->timer.backoff = 0; /* the path works again */
    ep->timer.tail_probes = 0;
    opal_btl_usnic_send_seg_t *next = oldest_unacked(ep);
    if (NULL == next) {
        ep->timer.in_recovery = false;
        flight_list_remove(eng, ep);
        return;
    }
    if (ep->timer.in_recovery) {
        if (opal_btl_usnic_seq_ge(ep->tx.acked_seq, ep->timer.recover)) {
            ep->timer.in_recovery = false;
        } else if (0 == next->retries && oldest_overdue(eng, ep)) {
            retransmit_now(eng, ep, next); /* partial ACK: the next hole */
            OPAL_BTL_USNIC_STAT_INC(eng, num_fast_retrans);
            return;
        }
    }
    if (next->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_HOTEL) {
        lower_next_deadline(eng, next->deadline);
    }
}

/* The receiver's grant rides with every ACK that is not stale (in
 * credit units; with nothing in flight one datagram goes whatever it
 * says, opal_btl_usnic_endpoint_room_for) */
static void take_credit(opal_btl_usnic_endpoint_t *ep, uint32_t credit)
{
    ep->tx.peer_credit = (uint64_t) credit * OPAL_BTL_USNIC_CREDIT_UNIT;
}

/* |seg| left the window: it no longer costs the receiver, nor holds the
 * data channel */
static void charge_release(opal_btl_usnic_endpoint_t *ep, const opal_btl_usnic_send_seg_t *seg)
{
    ep->tx.in_flight_charge -= (seg->charge < ep->tx.in_flight_charge) ? seg->charge : ep->tx.in_flight_charge;
    ep->tx.in_flight_bytes -= (seg->wire_len < ep->tx.in_flight_bytes) ? seg->wire_len : ep->tx.in_flight_bytes;
    if (OPAL_BTL_USNIC_DATA_CHANNEL == seg->channel && ep->tx.data_unacked > 0) {
        --ep->tx.data_unacked;
    }
}

bool opal_btl_usnic_handle_ack_info(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                                    opal_btl_usnic_seq_t ack_seq, uint32_t credit, uint16_t sack,
                                    bool reports_arrival)
{
    OPAL_BTL_USNIC_STAT_INC(eng, num_ack_recvs);
    if (opal_btl_usnic_seq_lt(ack_seq, ep->tx.acked_seq)) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_old_dup_acks);
        return false;
    }
    if (opal_btl_usnic_seq_ge(ack_seq, ep->tx.next_seq)) {
        /* ACKs something never sent: corrupt or forged */
        OPAL_BTL_USNIC_STAT_INC(eng, num_invalid_recvs);
        return false;
    }
    ep->timer.last_heard = eng->now; /* only an ACK that passed its checks says the peer lives */
    ep->timer.fresh_rtt = 0;
    take_credit(ep, credit);
    if (ack_seq == ep->tx.acked_seq) {
        opal_btl_usnic_check_rts(ep); /* the grant may have grown */
        if (reports_arrival && 0 != opal_btl_usnic_endpoint_in_flight(ep)) {
            OPAL_BTL_USNIC_STAT_INC(eng, num_dup_acks);
            ++ep->tx.dup_acks;
            if (dup_ack_counts(ep, sack) && (OPAL_BTL_USNIC_DUPACK_THRESHOLD == ep->tx.dup_acks ||
                                         (ep->tx.dup_acks > OPAL_BTL_USNIC_DUPACK_THRESHOLD && oldest_overdue(eng, ep)))) {
                fast_retransmit(eng, ep);
            }
        }
        sack_repair(eng, ep, sack);
        return true;
    }
    opal_btl_usnic_send_seg_t *newest = ep->tx.sent[opal_btl_usnic_slot(ep, ack_seq)];
    if (NULL != newest) {
        rtt_sample(eng, ep, newest);
    }
    uint64_t bytes_before = ep->tx.in_flight_bytes;
    for (opal_btl_usnic_seq_t s = ep->tx.acked_seq + 1; opal_btl_usnic_seq_le(s, ack_seq); ++s) {
        opal_btl_usnic_send_seg_t *seg = ep->tx.sent[opal_btl_usnic_slot(ep, s)];
        ep->tx.sent[opal_btl_usnic_slot(ep, s)] = NULL;
        if (NULL != seg) {
            charge_release(ep, seg);
            seg_acked(eng, seg);
        }
    }
    ep->tx.acked_seq = ack_seq;
    if (0 == opal_btl_usnic_endpoint_in_flight(ep)) {
        ep->tx.in_flight_charge = 0;
        ep->tx.in_flight_bytes = 0;
        ep->tx.data_unacked = 0;
    }
    if (eng->p.cc_enabled) {
        window_grows(ep, bytes_before - ep->tx.in_flight_bytes, bytes_before, eng->now);
    }
    ep->tx.dup_acks = 0;
    after_ack_advance(eng, ep);
    sack_repair(eng, ep, sack);
    opal_btl_usnic_check_rts(ep);
    return true;
}

/* ----- the hotel's evictions: timeouts ----- */

void opal_btl_usnic_retrans_expired(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_seg_t *seg)
{
    if (!(seg->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW) || (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
        return; /* ACKed meanwhile, or already queued */
    }
    retransmit_now(eng, seg->ep, seg);
    seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_TIMED_OUT; /* its copy says so (FLAG_RETX_TIMEOUT) */
    if (seg->ep->timer.backoff < 20) {
        ++seg->ep->timer.backoff;
    }
    seg->ep->timer.last_timeout = eng->now;
    OPAL_BTL_USNIC_STAT_INC(eng, num_timeout_retrans);
    congestion_loss(eng, seg->ep, true);
}

void opal_btl_usnic_describe_last_heard(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep,
                                        char *out, size_t len)
{
    if (0 == ep->timer.last_heard) {
        snprintf(out, len, "never");
    } else {
        uint64_t ago = eng->now - ep->timer.last_heard;
        snprintf(out, len, "%llu.%03llu s ago%s", (unsigned long long) (ago / 1000000),
                 (unsigned long long) (ago / 1000 % 1000),
                 ago < eng->p.peer_timeout / 2 ? " (alive, but not taking our data: a stuck peer, not a dead one)"
                                                : "");
    }
}

/* The oldest segment |oldest| timed out: the segments after it that were
 * sent no later (its batch: a coalesced run is lost as one, and the
 * kernel drops a batch whole) are as overdue, and go with it as one
 * batch, skipping what the peer reported held; at most a batch in all.
 * A wire without batches resends the oldest alone (a whole window resent
 * per timeout would repeat in lockstep with periodic loss). */
static void retransmit_run(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                           const opal_btl_usnic_send_seg_t *oldest)
{
    uint32_t in_flight = opal_btl_usnic_endpoint_in_flight(ep);
    uint32_t budget = eng->p.batch_segs;
    for (uint32_t pos = 1; pos < in_flight && pos < budget; ++pos) {
        opal_btl_usnic_send_seg_t *seg = seg_at(ep, pos);
        if (NULL == seg) {
            break;
        }
        if (seg->sent_time > oldest->sent_time) {
            continue; /* resent since (a repaired hole): its own copy is younger */
        }
        if (!(seg->flags & (OPAL_BTL_USNIC_SEG_FLAG_SACKED | OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND))) {
            retransmit_now(eng, ep, seg);
            seg->flags |= OPAL_BTL_USNIC_SEG_FLAG_TIMED_OUT;
            OPAL_BTL_USNIC_STAT_INC(eng, num_timeout_retrans);
        }
    }
}

/* A tail-loss probe: the oldest un-ACKed segment alone, sent again.  If
 * the tail of a burst was lost, this is it, or the ACK it draws (the
 * receiver ACKs a copy or an arrival beyond a hole at once, selective
 * ranges included) tells which others to repair; if the last ACK was
 * lost, the receiver holds the copy and its ACK covers the burst.  One
 * datagram where a timeout resends a batch; no back-off, no RETX_TIMEOUT
 * flag (the receiver must not take it for a premature timeout). */
static void tail_probe(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_seg_t *seg)
{
    if (!(seg->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW) || (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
        return;
    }
    ++ep->timer.tail_probes;
    ep->timer.probe_out = true;
    ep->timer.probe_seq = seg->seq;
    retransmit_now(eng, ep, seg);
    OPAL_BTL_USNIC_STAT_INC(eng, num_tail_probes);
}

void opal_btl_usnic_probe_verdict(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, bool repaired)
{
    if (!ep->timer.probe_out || !opal_btl_usnic_seq_ge(ep->tx.acked_seq, ep->timer.probe_seq)) {
        return;
    }
    ep->timer.probe_out = false;
    if (repaired) {
        ep->timer.pto_floor = 0; /* it found a real loss: keep probing early */
        return;
    }
    /* the original had arrived: the peer was slow, not the path lossy */
    OPAL_BTL_USNIC_STAT_INC(eng, num_spurious_probes);
    uint64_t floor = 2 * (ep->timer.pto_floor > eng->p.rto_min ? ep->timer.pto_floor : eng->p.rto_min);
    ep->timer.pto_floor = floor < eng->p.rto_max ? floor : eng->p.rto_max;
}

/* One endpoint's timers: returns its next deadline (UINT64_MAX: none). */
static uint64_t hotel_evict_endpoint(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    uint64_t peer_deadline = (eng->p.peer_timeout > 0) ? ep->timer.last_ack_time + eng->p.peer_timeout
                                                         : UINT64_MAX;
    if (peer_deadline <= eng->now) {
        eng->up->peer_failed(eng, ep, OPAL_ERR_TIMEOUT);
        return UINT64_MAX;
    }
    opal_btl_usnic_send_seg_t *seg = oldest_unacked(ep);
    if (NULL != seg && (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_HOTEL)) {
        if (seg->deadline > eng->now) {
            return seg->deadline < peer_deadline ? seg->deadline : peer_deadline;
        }
        uint64_t rto_due = seg->sent_time + rto_past_absence(eng, ep);
        if (tail_probe_allowed(eng, ep) && opal_list_is_empty(&ep->tx.queue)) {
            tail_probe(eng, ep, seg); /* a tail: nothing more to send that could draw an ACK */
        } else if (tail_probe_allowed(eng, ep) && eng->now < rto_due) {
            /* more queued behind a window or grant: no tail, the RTO decides */
            seg->deadline = rto_due;
            return seg->deadline < peer_deadline ? seg->deadline : peer_deadline;
        } else {
            opal_btl_usnic_retrans_expired(eng, seg);
            retransmit_run(eng, ep, seg);
        }
    }
    /* queued for resend: its timer is re-armed when it is reposted */
    return peer_deadline;
}

void opal_btl_usnic_hotel_evict_due(opal_btl_usnic_engine_t *eng)
{
    uint64_t next = UINT64_MAX;
    eng->next_deadline = UINT64_MAX;
    opal_list_item_t *item = opal_list_get_first(&eng->endpoints_in_flight);
    while (item != opal_list_get_end(&eng->endpoints_in_flight)) {
        opal_list_item_t *following = opal_list_get_next(item);
        opal_btl_usnic_endpoint_t *ep =
            (opal_btl_usnic_endpoint_t *) ((char *) item - offsetof(opal_btl_usnic_endpoint_t, tx.flight_item));
        uint64_t t = hotel_evict_endpoint(eng, ep);
        if (t < next) {
            next = t;
        }
        item = following;
    }
    /* timers (re)armed during this scan have lowered next_deadline already */
    lower_next_deadline(eng, next);
}

/* ----- a peer that failed or left ----- */

static void fail_queued_frags(opal_btl_usnic_endpoint_t *ep, int status)
{
    opal_list_item_t *item;
    while (NULL != (item = opal_list_remove_first(&ep->tx.queue))) {
        opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) item;
        frag->queued = false;
        opal_btl_usnic_frag_fail(ep->eng, frag, status);
    }
}

void opal_btl_usnic_endpoint_flush(opal_btl_usnic_endpoint_t *ep, int status)
{
    if (NULL == ep->eng) {
        return;
    }
    fail_queued_frags(ep, status);
    if (0 != opal_btl_usnic_endpoint_in_flight(ep)) {
        /* Nobody will ACK these any more: release them as if ACKed, but
         * a PUT among them did not reach its target */
        for (opal_btl_usnic_seq_t s = ep->tx.acked_seq + 1; s != ep->tx.next_seq; ++s) {
            if (NULL != ep->tx.sent[opal_btl_usnic_slot(ep, s)]) {
                opal_btl_usnic_put_mark_failed(ep->tx.sent[opal_btl_usnic_slot(ep, s)], status);
            }
        }
        opal_btl_usnic_handle_ack(ep->eng, ep, ep->tx.next_seq - 1);
    }
    opal_btl_usnic_endpoint_detach(ep);
}

void opal_btl_usnic_peer_departed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    OPAL_BTL_USNIC_STAT_INC(eng, num_bye_recvs);
    /* Its ACK fields were taken first: whatever it did not confirm, it
     * never will.  A finalized peer took every message MPI matched (both
     * sides were past MPI_Comm_disconnect or the finalize fence), so these
     * are the last ACK-less copies of a protocol's tail, not user data. */
    eng->stats.num_departed_unacked += opal_btl_usnic_endpoint_in_flight(ep);
    ep->departed = true;
    ep->failed = true; /* sends to it fail from now on, without a dead-peer report */
    opal_btl_usnic_endpoint_flush(ep, OPAL_ERR_UNREACH);
}
