/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Congestion control of one peer's path (btl_usnic_cc.h).
 *
 * Design notes
 * ------------
 * What it must do.  A job's streams cross switch ports with shallow
 * queues (about 100 KB at 1 Gbit/s: 0.8 ms) shared with its own small
 * messages and with other flows.  Until now the engine sent whatever its
 * sequence window and the receiver's grant allowed, at line rate, and
 * reacted only to timeouts: it filled those queues, lost 3-4% of its
 * segments there, and made every small message behind it wait.
 *
 * Why a delay target (Swift, Google SIGCOMM'20; LEDBAT, RFC 6817) and
 * not a delay gradient (Timely, eRPC) nor loss alone (Reno, CUBIC).
 * Loss-based control fills the queue before it reacts: exactly the
 * standing queue and the drops to avoid.  A gradient controller reacts
 * to the change of delay between samples; on this project's hosts
 * (shared 2-core VMs, ranks descheduled for milliseconds) consecutive
 * samples jump by more than the whole queue, so the gradient is mostly
 * scheduling noise.  A target compares each sample with the path's
 * least RTT, so a burst of noise costs at most one cut per round trip,
 * and the window comes back additively once samples are short again.
 *
 * The signal.  An explicit ACK carries how long the receiver held it
 * after the data reached its host (btl_usnic_proto.h, the ACK's |hold|:
 * 4 us steps to 508 us, then 32 us steps; the socket wire's kernel
 * arrival stamps, recv.c's |arrival|, taken while bulk data flows); the
 * sender removes it from the RTT of the newest segment the ACK covers
 * (sent once: Karn's rule), the RTT ending when the ACK reached the host.
 * An arrival the wire cannot vouch for (read after a gap, without a
 * stamp) gives neither hold nor sample.  ACKs that ride on data have no hold (it would be the
 * application's think time) and give no delay sample.  The base RTT is
 * the least sample of the current and the previous 10 s epoch, so a
 * changed path is learned within 20 s.  The queueing delay of a sample
 * is the distance of the standing RTT from the base: the least sample of
 * the current and the previous half round trip (Copa's RTT_standing), so
 * that a queue, which persists, counts and a receiver descheduled for a
 * while, which delays only the ACKs of that while, does not.
 *
 * The window (bytes; the sender also stays inside its sequence window and
 * the receiver's grant, whichever is smaller: grants remain the incast
 * limiter).  Above the target: cut by beta * (qdelay - target) / qdelay
 * (beta 0.8, at most half), at most once per round trip.  At or below
 * it: in slow start +acked (doubling per round trip), else +1 datagram
 * per round trip (AIMD: equal increases make competing flows converge
 * to equal shares, which multiplicative increase would not).  Growing
 * 1.5x per round trip while the queue was below a quarter of the target
 * was tried, to win back windows cut by scheduling noise faster: across
 * the 1 Gbit/s bottleneck it overflowed the queue 10x more often (shaper
 * drops in incast 741-16019 per 5 s against 57-1177).  Growth
 * only while the window is in use (at least half of it in flight, RFC
 * 7661), so an idle or application-limited peer does not build credit
 * it could later dump into the queue.  A loss (a hole the receiver
 * reported through SACK, duplicate ACKs, or a timeout) cuts to 0.7x, at
 * most once per round trip: CUBIC's factor, so that the backstop is no
 * weaker than the TCP flows beside it.  A cut for a timeout is given back
 * if the receiver reports the timeout spurious (it had the data: a
 * descheduled receiver, as on busy hosts, not a full queue), as TCP's
 * F-RTO/Eifel undo do.  A queueing delay older than 100 ms no longer
 * holds the window back: in a 4 -> 1 incast a sender's window stayed at
 * 6 KB for seconds behind a sample of 316 us, its ACKs giving no newer
 * one (holds too long to subtract), and it never sent enough to make one.
 *
 * Holding its own beside loss-based flows.  A delay-based flow alone
 * keeps the queue near its target; next to TCP the queue stays full
 * whatever it does, and a delay controller shrinks to nothing (known
 * since TCP Vegas).  Like Copa (NSDI'18), the controller watches each
 * round trip's least queueing delay: a queue of our own drains when we
 * cut; if it stayed above the target for 4 round trips in a row while our
 * cuts at least halved the window, others fill it, and the controller
 * switches to loss mode (AIMD on losses only) until two round trips in a
 * row show the queue below half the target.
 *
 * Pacing.  A token bucket fills at gain * window / RTT (gain 2 in slow
 * start, 1.25 after, as BBR and Linux's fq pacing do; the RTT is srtt but
 * at most the least RTT plus the target, so that an srtt inflated by
 * scheduling noise does not throttle the path) and holds at most
 * one segmentation-offload batch, so datagrams leave in bursts of at
 * most one batch, spaced at the window's rate.  On a healthy path the
 * rate is far above what the ACKs let out and the bucket never empties:
 * the cost is one multiplication per check.  The engine checks it in
 * its progress pass (btl_usnic_endpoint.c): no thread, no timer.  It
 * paces only after a cut (the path showed a queue or lost data) until a
 * round trip shows the queue below a quarter of the target: on loopback,
 * where the receiver drains 64 KiB datagrams one at a time, pacing every
 * datagram cost 3-9% of bandwidth and 10% of the message rate (measured,
 * bench/perf.sh against a plugin without the pacer).
 *
 * A receiver that goes away.  TCP's ACKs come from the receiver's kernel;
 * ours come from its process, and a process on a busy host is
 * descheduled for milliseconds.  Then the ACKs stop, the senders' windows
 * fill within a fraction of a millisecond and the bottleneck idles for
 * the rest of the absence, though its data would have waited in the
 * receiver's host, not in the path.  Measured across the 1 Gbit/s
 * bottleneck of test/hosts, 2 senders to one receiver on 3 busy ranks:
 * 76-79 MB/s against btl/tcp's 104, the shaper's queue empty in 94 % of
 * 10-ms samples (tc), the receiver away a third of the time.  Every ACK
 * says how long its receiver held it (above); the longest hold of the
 * current and the last second is how long the receiver goes away.  While
 * sends are paced (the path has shown a queue), the window may be
 * exceeded by what the path delivered to this peer in that time, at that
 * rate (no gain), and never above the window's rate.  The delivery rate
 * is the bytes ACKed over intervals of 10 ms, longer than an absence so
 * that its silence and the burst of ACKs after it fall into one, the
 * fastest interval of the current and the last 100 ms.  The senders then
 * put into the path what it delivered to them, no more, so its queue
 * does not grow, and the receiver's host takes the rest (the receiver's
 * grants still bound it, and the sequence window).  Then 95-96 MB/s, the
 * 4-sender incast 106 instead of 95.  The window's rate alone (window
 * over the least RTT plus the target) was the first bound: a receiver
 * away for milliseconds then let each sender keep ten windows and more
 * in flight, let out at two to three times the bottleneck's rate, and
 * the shaper dropped 1.5-4 % of the incasts' segments (a 2 % bound in
 * the suite failed in CI).  With the delivery rate: 0.6-1.6 % in 2 -> 1
 * and 0.2-0.5 % in 4 -> 1 (5.3-7.9 % with the controller off), at
 * 0.87-0.98 x btl/tcp's aggregate.  An allowance of at most one window
 * dropped 0.2 %, but 2 -> 1 fell to 0.84 x btl/tcp.  Without absences,
 * or unpaced, the window alone holds.
 *
 * ECN is not used: the socket wire would need IP_RECVTOS control
 * messages on every receive batch, libfabric's udp provider gives no
 * access to the TOS byte, and the bottlenecks this was built against
 * (drop-tail switch queues) do not mark.
 */
#include "opal_config.h"

#include "btl_usnic_cc.h"

#define CC_BETA 0.8          /* share of the excess delay a cut removes */
#define CC_MAX_CUT 0.5       /* a delay cut leaves at least this share of the window */
#define CC_LOSS_CUT 0.7      /* a loss cut leaves this share */
#define CC_GAIN_START 2.0    /* pacing rate over window / srtt, in slow start */
#define CC_GAIN 1.25         /* ... after */

void opal_btl_usnic_cc_init(opal_btl_usnic_cc_t *cc, uint64_t initial, uint64_t now)
{
    *cc = (opal_btl_usnic_cc_t){0};
    cc->cwnd = initial;
    cc->slow_start = true;
    cc->epoch_start = now;
    cc->away_epoch_start = now;
    cc->delivery_start = now;
    cc->delivery_epoch_start = now;
    cc->round_start = now;
    cc->round_min_qdelay = UINT64_MAX;
    cc->round_cwnd = initial;
    cc->tokens_time = now;
}

static uint64_t min_window(const opal_btl_usnic_cc_path_t *path)
{
    return (uint64_t) OPAL_BTL_USNIC_CC_MIN_SEGS * path->mss;
}

static void window_set(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, double w)
{
    /* at most the sequence window's worth, never below the floor */
    uint64_t v = (w > (double) path->max_window) ? path->max_window : (uint64_t) w;
    uint64_t lo = min_window(path);
    cc->cwnd = (v < lo) ? lo : v;
}

/* A cut is allowed once per round trip (before the first RTT: once per
 * sample, which is one round trip too) */
static bool cut_allowed(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, uint64_t now)
{
    return 0 == cc->last_cut || now - cc->last_cut >= path->srtt;
}

static void base_update(opal_btl_usnic_cc_t *cc, uint64_t rtt, uint64_t now)
{
    if (now - cc->epoch_start >= OPAL_BTL_USNIC_CC_BASE_EPOCH_USEC) {
        cc->prev_epoch_min = cc->epoch_min;
        cc->epoch_min = 0;
        cc->epoch_start = now;
    }
    if (0 == cc->epoch_min || rtt < cc->epoch_min) {
        cc->epoch_min = rtt;
    }
    cc->base_rtt = (0 != cc->prev_epoch_min && cc->prev_epoch_min < cc->epoch_min) ? cc->prev_epoch_min
                                                                                   : cc->epoch_min;
}

/* The end of a round trip of the queue watch: did the queue stay above
 * the target though our cuts at least halved the window since it began?
 * Then it is not ours.  Back to the target once it drains below half. */
static opal_btl_usnic_cc_event_t round_end(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path)
{
    if (cc->round_min_qdelay > path->target) {
        if (0 == cc->queued_rounds++) {
            cc->queue_cwnd = cc->round_cwnd;
        }
    } else {
        cc->queued_rounds = 0;
    }
    cc->drained_rounds = (cc->round_min_qdelay < path->target / 2) ? cc->drained_rounds + 1 : 0;
    if (cc->round_min_qdelay < path->target / 4 && !cc->loss_mode) {
        cc->pacing = false; /* no queue: nothing for pacing to spread */
    }
    if (!cc->loss_mode && cc->queued_rounds >= OPAL_BTL_USNIC_CC_QUEUED_ROUNDS && 2 * cc->cwnd <= cc->queue_cwnd) {
        cc->loss_mode = true;
        cc->slow_start = false;
        return OPAL_BTL_USNIC_CC_TO_LOSS_MODE;
    }
    if (cc->loss_mode && cc->drained_rounds >= OPAL_BTL_USNIC_CC_DRAINED_ROUNDS) {
        cc->loss_mode = false;
        cc->queued_rounds = 0;
        return OPAL_BTL_USNIC_CC_TO_DELAY_MODE;
    }
    return OPAL_BTL_USNIC_CC_NONE;
}

static opal_btl_usnic_cc_event_t queue_watch(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                             uint64_t now)
{
    if (cc->qdelay < cc->round_min_qdelay) {
        cc->round_min_qdelay = cc->qdelay;
    }
    if (0 == path->srtt || now - cc->round_start < path->srtt) {
        return OPAL_BTL_USNIC_CC_NONE;
    }
    opal_btl_usnic_cc_event_t ev = round_end(cc, path);
    cc->round_start = now;
    cc->round_min_qdelay = UINT64_MAX;
    cc->round_cwnd = cc->cwnd;
    return ev;
}

/* The standing RTT: the least sample of the current and the previous half
 * round trip.  A queue persists across samples; a receiver descheduled
 * for a while delays only the ACKs of that while. */
static uint64_t standing_update(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, uint64_t rtt,
                                uint64_t now)
{
    if (0 == cc->stand_min || now - cc->stand_start >= path->srtt / 2) {
        cc->stand_prev = cc->stand_min;
        cc->stand_min = rtt;
        cc->stand_start = now;
    } else if (rtt < cc->stand_min) {
        cc->stand_min = rtt;
    }
    return (0 != cc->stand_prev && cc->stand_prev < cc->stand_min) ? cc->stand_prev : cc->stand_min;
}

opal_btl_usnic_cc_event_t opal_btl_usnic_cc_delay(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                                  uint64_t rtt, uint64_t now)
{
    base_update(cc, rtt, now);
    cc->qdelay = standing_update(cc, path, rtt, now) - cc->base_rtt;
    cc->sampled_at = now;
    cc->qdelay_avg = (7 * cc->qdelay_avg + cc->qdelay) / 8;
    opal_btl_usnic_cc_event_t ev = queue_watch(cc, path, now);
    if (OPAL_BTL_USNIC_CC_NONE != ev || cc->loss_mode || cc->qdelay <= path->target) {
        return ev;
    }
    cc->slow_start = false;
    if (!cut_allowed(cc, path, now)) {
        return OPAL_BTL_USNIC_CC_NONE;
    }
    double keep = 1.0 - CC_BETA * (double) (cc->qdelay - path->target) / (double) cc->qdelay;
    window_set(cc, path, (double) cc->cwnd * (keep < CC_MAX_CUT ? CC_MAX_CUT : keep));
    cc->last_cut = now;
    cc->pacing = true;
    return OPAL_BTL_USNIC_CC_CUT_DELAY;
}

/* |bytes| were ACKed at |now|: the delivery rate's measure */
static void delivered(opal_btl_usnic_cc_t *cc, uint64_t bytes, uint64_t now)
{
    cc->delivered += bytes;
    uint64_t span = now - cc->delivery_start;
    if (span < OPAL_BTL_USNIC_CC_DELIVERY_INTERVAL_USEC) {
        return;
    }
    if (now - cc->delivery_epoch_start >= OPAL_BTL_USNIC_CC_DELIVERY_EPOCH_USEC) {
        cc->delivery_rate = cc->delivery_epoch_max;
        cc->delivery_epoch_max = 0.0;
        cc->delivery_epoch_start = now;
    }
    double rate = (double) cc->delivered / (double) span;
    if (rate > cc->delivery_epoch_max) {
        cc->delivery_epoch_max = rate;
    }
    if (rate > cc->delivery_rate) {
        cc->delivery_rate = rate;
    }
    cc->delivered = 0;
    cc->delivery_start = now;
}

/* Does the path show a queue above the target?  Not after
 * OPAL_BTL_USNIC_CC_STALE_USEC without a sample: a window held back by an
 * old one may never send enough for a new one */
static bool queued_now(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, uint64_t now)
{
    return !cc->loss_mode && cc->qdelay > path->target && now - cc->sampled_at < OPAL_BTL_USNIC_CC_STALE_USEC;
}

void opal_btl_usnic_cc_acked(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, uint64_t acked,
                             uint64_t in_flight, uint64_t now)
{
    delivered(cc, acked, now);
    if (2 * in_flight < cc->cwnd || queued_now(cc, path, now)) {
        return; /* the window was not in use, or the path queues */
    }
    double grow = cc->slow_start ? (double) acked : (double) path->mss * (double) acked / (double) cc->cwnd;
    window_set(cc, path, (double) cc->cwnd + (grow < 1.0 ? 1.0 : grow));
}

opal_btl_usnic_cc_event_t opal_btl_usnic_cc_loss(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                                 uint64_t now)
{
    cc->slow_start = false;
    if (!cut_allowed(cc, path, now)) {
        return OPAL_BTL_USNIC_CC_NONE;
    }
    window_set(cc, path, (double) cc->cwnd * CC_LOSS_CUT);
    cc->last_cut = now;
    cc->pacing = true;
    cc->undo_cwnd = 0;
    return OPAL_BTL_USNIC_CC_CUT_LOSS;
}

opal_btl_usnic_cc_event_t opal_btl_usnic_cc_timeout(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                                    uint64_t now)
{
    uint64_t before = cc->cwnd;
    bool was_slow_start = cc->slow_start;
    opal_btl_usnic_cc_event_t ev = opal_btl_usnic_cc_loss(cc, path, now);
    if (OPAL_BTL_USNIC_CC_CUT_LOSS == ev) {
        cc->undo_cwnd = before;
        cc->slow_start = was_slow_start; /* until the timeout proves genuine */
    }
    return ev;
}

void opal_btl_usnic_cc_undo(opal_btl_usnic_cc_t *cc)
{
    if (cc->undo_cwnd > cc->cwnd) {
        cc->cwnd = cc->undo_cwnd;
    }
    cc->undo_cwnd = 0;
}

/* The pacer's round trip: srtt, but never above the least RTT plus the
 * target (a noisy srtt, inflated by descheduled receivers, must not throttle
 * a window the path drains in less) */
static uint64_t pacer_rtt(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path)
{
    uint64_t rtt = path->srtt;
    if (0 != cc->base_rtt && cc->base_rtt + path->target < rtt) {
        rtt = cc->base_rtt + path->target;
    }
    return rtt;
}

/* Bytes per us the window lets out over the pacer's round trip */
static double window_rate(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path)
{
    return (double) cc->cwnd / (double) pacer_rtt(cc, path);
}

/* Beyond the window (the receiver away) the pacer lets out what the
 * path delivered to this peer lately, at most the window's rate: more
 * would build a queue (0: nothing measured yet, nothing beyond) */
static double rate_beyond_window(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path)
{
    double w = window_rate(cc, path);
    return (cc->delivery_rate < w) ? cc->delivery_rate : w;
}

double opal_btl_usnic_cc_rate(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path)
{
    if (0 == path->srtt || !cc->pacing) {
        return 0.0;
    }
    if (path->in_flight >= cc->cwnd) {
        double beyond = rate_beyond_window(cc, path);
        return (beyond > 0.0) ? beyond : window_rate(cc, path);
    }
    return (cc->slow_start ? CC_GAIN_START : CC_GAIN) * window_rate(cc, path);
}

void opal_btl_usnic_cc_hold(opal_btl_usnic_cc_t *cc, uint64_t held, uint64_t now)
{
    if (now - cc->away_epoch_start >= OPAL_BTL_USNIC_CC_AWAY_EPOCH_USEC) {
        cc->away = cc->away_epoch_max;
        cc->away_epoch_max = 0;
        cc->away_epoch_start = now;
    }
    if (held > cc->away_epoch_max) {
        cc->away_epoch_max = held;
    }
    if (held > cc->away) {
        cc->away = held;
    }
}

uint64_t opal_btl_usnic_cc_limit(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path)
{
    if (0 == path->srtt || !cc->pacing || 0 == cc->away) {
        return cc->cwnd;
    }
    uint64_t limit = cc->cwnd + (uint64_t) (rate_beyond_window(cc, path) * (double) cc->away);
    return (limit < path->max_window) ? limit : path->max_window;
}

/* The pacer's tokens at |now|: refilled at the rate, at most one burst */
static double tokens_at(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, double rate,
                        uint64_t now)
{
    double t = cc->tokens;
    if (now > cc->tokens_time) {
        t += rate * (double) (now - cc->tokens_time);
    }
    return (t > (double) path->burst) ? (double) path->burst : t;
}

bool opal_btl_usnic_cc_pace_ready(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                  uint64_t now)
{
    double rate = opal_btl_usnic_cc_rate(cc, path);
    return 0.0 == rate || tokens_at(cc, path, rate, now) > 0.0;
}

void opal_btl_usnic_cc_sent(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, size_t len,
                            uint64_t now)
{
    double rate = opal_btl_usnic_cc_rate(cc, path);
    cc->tokens = (0.0 == rate) ? 0.0 : tokens_at(cc, path, rate, now) - (double) len;
    cc->tokens_time = now;
}

uint64_t opal_btl_usnic_cc_pace_time(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                     uint64_t now)
{
    double rate = opal_btl_usnic_cc_rate(cc, path);
    double t = (0.0 == rate) ? 1.0 : tokens_at(cc, path, rate, now);
    return (t > 0.0) ? now : now + 1 + (uint64_t) (-t / rate);
}
