/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The congestion controller of one path (btl_usnic_cc.c) with a virtual
 * clock: delay above the target cuts, once per round trip; loss cuts
 * once per round trip; growth on an idle path back to full rate, only
 * while the window is in use; slow start; the queue watch's loss mode;
 * pacing intervals.  Then in the engine: the window is the smaller of
 * the congestion window and the receiver's grant, a paced endpoint waits
 * for its time in the progress pass, and the ACK's hold is removed from
 * the delay sample.  The allowance for a receiver that goes away: paced
 * sends go on beyond the window at the rate the path delivered lately
 * (at most the window's), for as long as the receiver's longest recent
 * absence; a stale queueing delay no longer holds the window.
 */
#include "fixture.h"
#include "unit.h"

#include "btl_usnic_ack.h"
#include "btl_usnic_acktr.h"
#include "btl_usnic_cc.h"

#define MSS 1500
#define SRTT 1000  /* us */
#define TARGET 300 /* us */
#define BASE 1000  /* us: the path's least RTT */

static opal_btl_usnic_cc_path_t path_of(void)
{
    return (opal_btl_usnic_cc_path_t){.target = TARGET, .srtt = SRTT, .mss = MSS, .max_window = 512 * MSS,
                                      .burst = 2 * MSS};
}

/* A controller past slow start with |cwnd| bytes and the base RTT known */
static opal_btl_usnic_cc_t steady(uint64_t cwnd, uint64_t now)
{
    opal_btl_usnic_cc_t cc;
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_init(&cc, cwnd, now);
    CHECK_EQ(opal_btl_usnic_cc_delay(&cc, &p, BASE, now), OPAL_BTL_USNIC_CC_NONE);
    cc.slow_start = false;
    return cc;
}

/* Samples of |rtt| every 50 us from *now on, until the controller
 * reports something or |span| us passed; returns what it reported */
static opal_btl_usnic_cc_event_t feed(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *p, uint64_t rtt,
                                      uint64_t *now, uint64_t span)
{
    for (uint64_t end = *now + span; *now < end;) {
        *now += 50;
        opal_btl_usnic_cc_event_t ev = opal_btl_usnic_cc_delay(cc, p, rtt, *now);
        if (OPAL_BTL_USNIC_CC_NONE != ev) {
            return ev;
        }
    }
    return OPAL_BTL_USNIC_CC_NONE;
}

static void test_rising_delay_cuts_once_per_round_trip(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(100 * MSS, 0);
    uint64_t now = 0;
    /* at the target: nothing, however long */
    CHECK_EQ(feed(&cc, &p, BASE + TARGET, &now, 10 * SRTT), OPAL_BTL_USNIC_CC_NONE);
    CHECK_EQ_U(cc.cwnd, 100 * MSS);
    /* a queue of 400 us that stays: cut by 0.8 * 100/400 = 20%, once the
     * last half round trips saw nothing shorter */
    uint64_t start = now;
    CHECK_EQ(feed(&cc, &p, BASE + 400, &now, 2 * SRTT), OPAL_BTL_USNIC_CC_CUT_DELAY);
    CHECK(now - start >= SRTT / 2 && now - start <= SRTT + 50);
    CHECK_EQ_U(cc.cwnd, 80 * MSS);
    CHECK_EQ_U(cc.qdelay, 400);
    /* the queue grows: the next cut waits a round trip, and cuts at most half */
    uint64_t cut = now;
    CHECK_EQ(feed(&cc, &p, BASE + 5000, &now, 3 * SRTT), OPAL_BTL_USNIC_CC_CUT_DELAY);
    CHECK(now - cut >= SRTT);
    CHECK(cc.cwnd >= 40 * MSS && cc.cwnd < 64 * MSS);
    /* never below the floor, whatever cuts */
    for (int i = 0; i < 40; ++i) {
        now += SRTT;
        opal_btl_usnic_cc_loss(&cc, &p, now);
    }
    CHECK_EQ_U(cc.cwnd, OPAL_BTL_USNIC_CC_MIN_SEGS * MSS);
}

/* A receiver descheduled for a while delays the ACKs of that while only:
 * a spike shorter than half a round trip is not a queue */
static void test_delay_spike_is_not_a_queue(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(100 * MSS, 0);
    uint64_t now = 0;
    feed(&cc, &p, BASE, &now, 2 * SRTT);
    for (int i = 0; i < 20; ++i) {
        CHECK_EQ(feed(&cc, &p, BASE + 4000, &now, SRTT / 2 - 100), OPAL_BTL_USNIC_CC_NONE);
        CHECK_EQ(feed(&cc, &p, BASE, &now, SRTT), OPAL_BTL_USNIC_CC_NONE);
    }
    CHECK_EQ_U(cc.cwnd, 100 * MSS);
}

static void test_loss_cuts_once_per_round_trip(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(100 * MSS, 0);
    CHECK_EQ(opal_btl_usnic_cc_loss(&cc, &p, 100), OPAL_BTL_USNIC_CC_CUT_LOSS);
    CHECK_EQ_U(cc.cwnd, 70 * MSS);
    /* more holes of the same burst, inside the round trip: no more cuts */
    CHECK_EQ(opal_btl_usnic_cc_loss(&cc, &p, 150), OPAL_BTL_USNIC_CC_NONE);
    CHECK_EQ(opal_btl_usnic_cc_loss(&cc, &p, 100 + SRTT - 1), OPAL_BTL_USNIC_CC_NONE);
    CHECK_EQ_U(cc.cwnd, 70 * MSS);
    CHECK_EQ(opal_btl_usnic_cc_loss(&cc, &p, 100 + SRTT), OPAL_BTL_USNIC_CC_CUT_LOSS);
    CHECK_EQ_U(cc.cwnd, 49 * MSS);
    /* a timeout cuts the same, and a spurious one gives it back */
    uint64_t w = cc.cwnd;
    CHECK_EQ(opal_btl_usnic_cc_timeout(&cc, &p, 100 + 3 * SRTT), OPAL_BTL_USNIC_CC_CUT_LOSS);
    CHECK(cc.cwnd < w);
    opal_btl_usnic_cc_undo(&cc);
    CHECK_EQ_U(cc.cwnd, w);
    opal_btl_usnic_cc_undo(&cc); /* once */
    CHECK_EQ_U(cc.cwnd, w);
    /* a loss ends slow start */
    opal_btl_usnic_cc_init(&cc, 10 * MSS, 0);
    CHECK(cc.slow_start);
    opal_btl_usnic_cc_loss(&cc, &p, 5);
    CHECK(!cc.slow_start);
}

/* One round trip of a full window: its ACKs, each with a short sample */
static void round_trip(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *p, uint64_t *now, uint64_t rtt)
{
    uint64_t w = cc->cwnd;
    for (uint64_t acked = 0; acked < w; acked += MSS) {
        opal_btl_usnic_cc_delay(cc, p, rtt, *now);
        opal_btl_usnic_cc_acked(cc, p, MSS, w, *now);
    }
    *now += SRTT;
}

static void test_recovers_full_rate_on_an_idle_path(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(40 * MSS, 0);
    uint64_t now = 10;
    CHECK_EQ(feed(&cc, &p, BASE + 5000, &now, 2 * SRTT), OPAL_BTL_USNIC_CC_CUT_DELAY); /* congestion: half */
    CHECK_EQ_U(cc.cwnd, 20 * MSS);
    /* a queue below the target: one datagram more per round trip (AIMD, where flows meet) */
    feed(&cc, &p, BASE + TARGET / 2, &now, SRTT);
    uint64_t before = cc.cwnd;
    round_trip(&cc, &p, &now, BASE + TARGET / 2);
    CHECK(cc.cwnd >= before + MSS - MSS / 10 && cc.cwnd <= before + MSS + MSS / 10);
    /* no queue at all: the same, back to where it was */
    feed(&cc, &p, BASE, &now, SRTT);
    int rounds = 1;
    while (cc.cwnd < 40 * MSS && rounds < 100) {
        round_trip(&cc, &p, &now, BASE);
        ++rounds;
    }
    CHECK_EQ_U(cc.cwnd >= 40 * MSS, 1);
    CHECK_LE(rounds, 21); /* 19 datagrams back, 1 per round trip, rounding */
    /* and to the sequence window's worth, no further */
    cc.slow_start = true;
    for (int i = 0; i < 20; ++i) {
        round_trip(&cc, &p, &now, BASE);
    }
    CHECK_EQ_U(cc.cwnd, p.max_window);
}

static void test_grows_only_while_in_use_and_unqueued(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(40 * MSS, 0);
    uint64_t now = 0;
    feed(&cc, &p, BASE + TARGET / 2, &now, 2 * SRTT); /* a queue below the target: AIMD */
    /* application-limited: less than half the window in flight */
    opal_btl_usnic_cc_acked(&cc, &p, MSS, 19 * MSS, now);
    CHECK_EQ_U(cc.cwnd, 40 * MSS);
    opal_btl_usnic_cc_acked(&cc, &p, 40 * MSS, 20 * MSS, now);
    CHECK_EQ_U(cc.cwnd, 41 * MSS);
    /* the path queues above the target: no growth either */
    feed(&cc, &p, BASE + TARGET + 1, &now, 2 * SRTT);
    uint64_t w = cc.cwnd;
    opal_btl_usnic_cc_acked(&cc, &p, w, w, now);
    CHECK_EQ_U(cc.cwnd, w);
}

static void test_slow_start_doubles_until_the_first_queue(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc;
    opal_btl_usnic_cc_init(&cc, 10 * MSS, 0);
    uint64_t now = 0;
    round_trip(&cc, &p, &now, BASE);
    CHECK_EQ_U(cc.cwnd, 20 * MSS);
    round_trip(&cc, &p, &now, BASE);
    CHECK_EQ_U(cc.cwnd, 40 * MSS);
    CHECK(cc.slow_start);
    CHECK_EQ(feed(&cc, &p, BASE + 2 * TARGET, &now, 2 * SRTT), OPAL_BTL_USNIC_CC_CUT_DELAY);
    CHECK(!cc.slow_start);
}

static void test_loss_mode_beside_a_queue_others_fill(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(40 * MSS, 0);
    uint64_t now = 0;
    /* a queue of our own at the target, for long: still ours */
    CHECK_EQ(feed(&cc, &p, BASE + TARGET, &now, 20 * SRTT), OPAL_BTL_USNIC_CC_NONE);
    CHECK(!cc.loss_mode);
    /* a queue above the target that our cuts do not drain */
    uint64_t start = now;
    opal_btl_usnic_cc_event_t ev;
    do {
        ev = feed(&cc, &p, BASE + 2 * TARGET, &now, 20 * SRTT);
    } while (OPAL_BTL_USNIC_CC_CUT_DELAY == ev);
    CHECK_EQ(ev, OPAL_BTL_USNIC_CC_TO_LOSS_MODE);
    CHECK(cc.loss_mode);
    CHECK(now - start >= OPAL_BTL_USNIC_CC_QUEUED_ROUNDS * SRTT);
    CHECK(now - start <= (OPAL_BTL_USNIC_CC_QUEUED_ROUNDS + 3) * SRTT);
    /* in loss mode delay no longer cuts, and the window grows despite it */
    uint64_t w = cc.cwnd;
    CHECK_EQ(feed(&cc, &p, BASE + 10 * TARGET, &now, 3 * SRTT), OPAL_BTL_USNIC_CC_NONE);
    CHECK_EQ_U(cc.cwnd, w);
    opal_btl_usnic_cc_acked(&cc, &p, w, w, now);
    CHECK_EQ_U(cc.cwnd, w + MSS);
    /* losses still cut */
    CHECK_EQ(opal_btl_usnic_cc_loss(&cc, &p, now + 2), OPAL_BTL_USNIC_CC_CUT_LOSS);
    /* the queue drained below half the target: back to the delay target */
    CHECK_EQ(feed(&cc, &p, BASE + TARGET / 2 - 10, &now, 3 * SRTT), OPAL_BTL_USNIC_CC_TO_DELAY_MODE);
    CHECK(!cc.loss_mode);
}

/* Pacing starts with a cut and stops after a round trip without a queue */
static void test_pacing_follows_the_queue(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(100 * MSS, 0);
    uint64_t now = 0;
    CHECK(!cc.pacing);
    CHECK_EQ(feed(&cc, &p, BASE + 2 * TARGET, &now, 3 * SRTT), OPAL_BTL_USNIC_CC_CUT_DELAY);
    CHECK(cc.pacing);
    CHECK(opal_btl_usnic_cc_rate(&cc, &p) > 0.0);
    feed(&cc, &p, BASE + TARGET / 2, &now, 3 * SRTT); /* a queue, below the target */
    CHECK(cc.pacing);
    feed(&cc, &p, BASE + TARGET / 8, &now, 3 * SRTT); /* none left */
    CHECK(!cc.pacing);
    CHECK(0.0 == opal_btl_usnic_cc_rate(&cc, &p));
    CHECK_EQ(opal_btl_usnic_cc_loss(&cc, &p, now + 1), OPAL_BTL_USNIC_CC_CUT_LOSS);
    CHECK(cc.pacing);
}

static void test_pacing_intervals(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(15 * MSS, 0);
    /* a path that never queued is not paced */
    CHECK(0.0 == opal_btl_usnic_cc_rate(&cc, &p));
    cc.pacing = true; /* as after a cut */
    /* 1.25 * 22500 B / 1000 us = 28.125 B/us: a 1500-byte datagram every 53.3 us */
    double rate = opal_btl_usnic_cc_rate(&cc, &p);
    CHECK(rate > 28.12 && rate < 28.13);
    uint64_t now = 1000000; /* long idle: one burst (2 datagrams) may leave at once */
    CHECK(opal_btl_usnic_cc_pace_ready(&cc, &p, now));
    opal_btl_usnic_cc_sent(&cc, &p, MSS, now);
    CHECK(opal_btl_usnic_cc_pace_ready(&cc, &p, now));
    opal_btl_usnic_cc_sent(&cc, &p, MSS, now);
    CHECK(!opal_btl_usnic_cc_pace_ready(&cc, &p, now));
    /* then one per interval */
    uint64_t first = now;
    for (int i = 0; i < 30; ++i) {
        uint64_t t = opal_btl_usnic_cc_pace_time(&cc, &p, now);
        CHECK(t > now);
        CHECK(!opal_btl_usnic_cc_pace_ready(&cc, &p, t - 1));
        CHECK(opal_btl_usnic_cc_pace_ready(&cc, &p, t));
        now = t;
        opal_btl_usnic_cc_sent(&cc, &p, MSS, now);
        if (0 == i) {
            first = now; /* the burst left the bucket empty, not owing: the intervals start here */
        }
    }
    double mean = (double) (now - first) / 29.0;
    if (!CHECK(mean > 52.0 && mean < 55.0)) {
        printf("mean interval %.2f us\n", mean);
    }
    /* no RTT yet: no pacing */
    opal_btl_usnic_cc_path_t fresh = p;
    fresh.srtt = 0;
    CHECK(opal_btl_usnic_cc_pace_ready(&cc, &fresh, now));
    CHECK_EQ_U(opal_btl_usnic_cc_pace_time(&cc, &fresh, now), now);
}

/* ----- in the engine ----- */

#define PEER 1
#define ISN 77u
#define PEER_ISN 5000u

static void cc_fixture(fx_t *fx, opal_btl_usnic_endpoint_t **ep)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.cc_enabled = true;
    p.cc_target = TARGET;
    fx_init(fx, &p);
    fx->complete_on_post = true;
    *ep = fx_ep_new(fx, PEER, 64, ISN, PEER_ISN);
}

static void test_window_is_the_smaller_of_grant_and_cwnd(void)
{
    fx_t fx;
    opal_btl_usnic_endpoint_t *ep;
    cc_fixture(&fx, &ep);
    CHECK_EQ_U(fx_send_tiny(&fx, ep, 1, NULL), 1);
    CHECK_EQ_U(opal_btl_usnic_endpoint_in_flight(ep), 1);
    CHECK(ep->tx.in_flight_bytes > 0);
    uint64_t in_flight = ep->tx.in_flight_bytes;
    /* the receiver grants less than the window: the grant holds */
    ep->cc.cwnd = 1000000;
    ep->tx.peer_credit = ep->tx.in_flight_charge;
    CHECK(!opal_btl_usnic_endpoint_room_for(ep, 100));
    /* the grant is large, the congestion window is not */
    ep->tx.peer_credit = 1000000;
    ep->cc.cwnd = in_flight + 99;
    CHECK(!opal_btl_usnic_endpoint_room_for(ep, 100));
    ep->cc.cwnd = in_flight + 100;
    CHECK(opal_btl_usnic_endpoint_room_for(ep, 100));
    /* switched off, only the grant counts */
    ep->cc.cwnd = 0;
    fx.eng.p.cc_enabled = false;
    CHECK(opal_btl_usnic_endpoint_room_for(ep, 100));
    fx_ep_free(&fx, ep);
    fx_fini(&fx);
}

static void test_paced_endpoint_waits_in_progress(void)
{
    fx_t fx;
    opal_btl_usnic_endpoint_t *ep;
    cc_fixture(&fx, &ep);
    fx_set_time(&fx, 1000000);
    ep->tx.peer_credit = 100000000;
    ep->timer.srtt = SRTT;
    ep->cc.slow_start = false;
    ep->cc.pacing = true; /* as after a cut */
    ep->cc.cwnd = 64 * 1100; /* rate 1.25 * 70400 / 1000 = 88 B/us */
    for (int i = 0; i < 20; ++i) {
        opal_btl_usnic_send_frag_t *frag = fx_alloc(&fx, ep, 1000, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        CHECK_GE(fx_send(&fx, ep, frag, 9), 0); /* 1: left at once; 0: queued behind the pacer */
    }
    fx_progress(&fx);
    size_t first = fx.nposts;
    CHECK(first >= 1 && first < 20);
    CHECK(fx.eng.stats.num_cc_paced >= 1);
    CHECK(ep->tx.on_pace_list);
    CHECK(fx.eng.next_pace_event > fx.now && fx.eng.next_pace_event < fx.now + 100);
    /* nothing leaves before its time; progress at each event lets more out */
    fx_progress(&fx);
    CHECK_EQ_U(fx.nposts, first);
    int passes = 0;
    while (fx.nposts < 20 && passes < 100) {
        fx_set_time(&fx, fx.eng.next_pace_event);
        fx_progress(&fx);
        ++passes;
    }
    CHECK_EQ_U(fx.nposts, 20);
    CHECK_GE(passes, 5);
    fx_ep_free(&fx, ep);
    fx_fini(&fx);
}

static void test_hold_is_removed_from_the_sample(void)
{
    fx_t fx;
    opal_btl_usnic_endpoint_t *ep;
    cc_fixture(&fx, &ep);
    fx_set_time(&fx, 1000);
    CHECK_EQ_U(fx_send_tiny(&fx, ep, 1, NULL), 1);
    fx_set_time(&fx, 1000 + 900);
    CHECK(opal_btl_usnic_handle_ack_info(&fx.eng, ep, ISN, 1000, 0, true));
    CHECK_EQ_U(ep->timer.fresh_rtt, 900);
    opal_btl_usnic_ack_hold_taken(&fx.eng, ep, 100); /* held 400 us: the path took 500 */
    CHECK_EQ_U(ep->cc.base_rtt, 500);
    CHECK_EQ_U(ep->timer.fresh_rtt, 0);
    /* a hold of 512 us or more (the receiver was away) gives no sample, nor one longer than the round trip */
    CHECK_EQ_U(fx_send_tiny(&fx, ep, 1, NULL), 1);
    fx_set_time(&fx, fx.now + 400);
    CHECK(opal_btl_usnic_handle_ack_info(&fx.eng, ep, ISN + 1, 1000, 0, true));
    opal_btl_usnic_ack_hold_taken(&fx.eng, ep, opal_btl_usnic_ack_hold_encode(500)); /* 400 - 500 */
    CHECK_EQ_U(ep->cc.base_rtt, 500);
    CHECK_EQ_U(fx_send_tiny(&fx, ep, 1, NULL), 1);
    fx_set_time(&fx, fx.now + 900);
    CHECK(opal_btl_usnic_handle_ack_info(&fx.eng, ep, ISN + 2, 1000, 0, true));
    opal_btl_usnic_ack_hold_taken(&fx.eng, ep, opal_btl_usnic_ack_hold_encode(600)); /* 900 - 600 */
    CHECK_EQ_U(ep->cc.base_rtt, 500);
    /* an unknown hold gives no sample */
    CHECK_EQ_U(fx_send_tiny(&fx, ep, 1, NULL), 1);
    fx_set_time(&fx, 1000 + 900 + 100);
    CHECK(opal_btl_usnic_handle_ack_info(&fx.eng, ep, ISN + 3, 1000, 0, true));
    opal_btl_usnic_ack_hold_taken(&fx.eng, ep, OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN);
    CHECK_EQ_U(ep->cc.base_rtt, 500);
    /* every known hold, a sample or not, says how long the receiver was away */
    CHECK_EQ_U(ep->cc.away, 576);
    opal_btl_usnic_ack_hold_taken(&fx.eng, ep, opal_btl_usnic_ack_hold_encode(3000)); /* no fresh RTT */
    CHECK_EQ_U(ep->cc.away, 2976);
    /* the receiver's side: the hold of an ACK is counted from the last arrival */
    ep->rx.last_arrival = fx.now - 80;
    CHECK_EQ_U(opal_btl_usnic_ack_hold(&fx.eng, ep), 20);
    ep->rx.last_arrival = fx.now - 1000; /* 512 + 15 * 32 = 992: the step below */
    CHECK_EQ_U(opal_btl_usnic_ack_hold(&fx.eng, ep), 143);
    CHECK_EQ_U(opal_btl_usnic_ack_hold_decode(143), 992);
    CHECK_EQ_U(opal_btl_usnic_ack_hold_decode(opal_btl_usnic_ack_hold_encode(4576)), 4576);
    ep->rx.last_arrival = fx.now - 5000;
    CHECK_EQ_U(opal_btl_usnic_ack_hold(&fx.eng, ep), OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN);
    ep->rx.last_arrival = 0;
    CHECK_EQ_U(opal_btl_usnic_ack_hold(&fx.eng, ep), OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN);
    fx_ep_free(&fx, ep);
    fx_fini(&fx);
}

/* While the receiver is away its host takes the data (it is not in the
 * path): paced sends may go beyond the window by what the path delivered
 * to this peer in the receiver's longest reported absence of the last one
 * to two seconds, at that rate and at most the window's (no gain), never
 * past the sequence window; unpaced sends, without a measured delivery
 * rate, or without absences, stop at the window */
static void test_receiver_away_allowance(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    p.max_window = 1000 * MSS;
    uint64_t now = 0;
    opal_btl_usnic_cc_t cc = steady(20 * MSS, now);
    opal_btl_usnic_cc_hold(&cc, 2000, now);
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), 20 * MSS); /* not paced: the window */
    now += SRTT;
    CHECK_EQ(opal_btl_usnic_cc_loss(&cc, &p, now), OPAL_BTL_USNIC_CC_CUT_LOSS); /* paced from here */
    uint64_t w = cc.cwnd;
    CHECK_EQ_U(w, 14 * MSS);
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), w); /* no delivery rate measured yet */
    /* 10 B/us delivered over the first interval (the window's rate is 21) */
    opal_btl_usnic_cc_acked(&cc, &p, 100000, 0, OPAL_BTL_USNIC_CC_DELIVERY_INTERVAL_USEC);
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), w + 10 * 2000);
    p.in_flight = w - 1;
    double inside = opal_btl_usnic_cc_rate(&cc, &p);
    p.in_flight = w;
    double beyond = opal_btl_usnic_cc_rate(&cc, &p);
    CHECK(inside > 1.2 * (double) w / SRTT && inside < 1.3 * (double) w / SRTT);
    CHECK(beyond > 9.99 && beyond < 10.01);
    /* a path that delivers more than the window's rate: the window's rate */
    opal_btl_usnic_cc_acked(&cc, &p, 1000000, 0, 2 * OPAL_BTL_USNIC_CC_DELIVERY_INTERVAL_USEC);
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), w + w * 2000 / SRTT);
    beyond = opal_btl_usnic_cc_rate(&cc, &p);
    CHECK(beyond > 0.99 * (double) w / SRTT && beyond < 1.01 * (double) w / SRTT);
    /* the longest absence of this epoch or the last stands */
    opal_btl_usnic_cc_hold(&cc, 300, now + 100);
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), w + w * 2000 / SRTT);
    opal_btl_usnic_cc_hold(&cc, 300, OPAL_BTL_USNIC_CC_AWAY_EPOCH_USEC + 10);
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), w + w * 2000 / SRTT);
    opal_btl_usnic_cc_hold(&cc, 100, 2 * OPAL_BTL_USNIC_CC_AWAY_EPOCH_USEC + 20);
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), w + w * 300 / SRTT);
    /* never past the sequence window */
    opal_btl_usnic_cc_hold(&cc, 4576, 2 * OPAL_BTL_USNIC_CC_AWAY_EPOCH_USEC + 30);
    p.max_window = 40 * MSS;
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), 40 * MSS);
    /* a path without a round trip yet is not paced: the window */
    p.srtt = 0;
    CHECK_EQ_U(opal_btl_usnic_cc_limit(&cc, &p), w);
}

/* The delivery rate: bytes ACKed over intervals of
 * OPAL_BTL_USNIC_CC_DELIVERY_INTERVAL_USEC (a receiver's silence and the
 * ACKs after it fall into one), the fastest of this epoch and the last */
static void test_delivery_rate_is_the_fastest_recent_interval(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(20 * MSS, 0);
    const uint64_t iv = OPAL_BTL_USNIC_CC_DELIVERY_INTERVAL_USEC, epoch = OPAL_BTL_USNIC_CC_DELIVERY_EPOCH_USEC;
    /* ACKs inside the first interval measure nothing yet: a burst after a silence */
    opal_btl_usnic_cc_acked(&cc, &p, 500000, 0, iv / 2);
    CHECK(0.0 == cc.delivery_rate);
    opal_btl_usnic_cc_acked(&cc, &p, 100000, 0, iv);
    CHECK(cc.delivery_rate > 59.99 && cc.delivery_rate < 60.01); /* 600000 B in 10 ms */
    /* a slower interval does not lower it within the epoch */
    opal_btl_usnic_cc_acked(&cc, &p, 50000, 0, 2 * iv);
    CHECK(cc.delivery_rate > 59.99 && cc.delivery_rate < 60.01);
    /* nor in the next one, but the one after forgets it */
    opal_btl_usnic_cc_acked(&cc, &p, 50000, 0, epoch);
    CHECK(cc.delivery_rate > 59.99 && cc.delivery_rate < 60.01);
    opal_btl_usnic_cc_acked(&cc, &p, 50000, 0, epoch + iv);
    opal_btl_usnic_cc_acked(&cc, &p, 100000, 0, 2 * epoch + iv);
    CHECK(cc.delivery_rate > 4.99 && cc.delivery_rate < 5.01); /* the slower epoch's 50000 B in 10 ms */
}

/* A queueing delay above the target holds the window while it is fresh;
 * after OPAL_BTL_USNIC_CC_STALE_USEC without a sample (an ACK stream
 * without usable holds, a window too small to make them) it no longer
 * does, so a window cut low does not stay there */
static void test_old_delay_no_longer_holds_the_window(void)
{
    opal_btl_usnic_cc_path_t p = path_of();
    opal_btl_usnic_cc_t cc = steady(40 * MSS, 0);
    uint64_t now = 0;
    feed(&cc, &p, BASE + TARGET + 100, &now, 2 * SRTT);
    CHECK(cc.qdelay > TARGET);
    uint64_t w = cc.cwnd;
    opal_btl_usnic_cc_acked(&cc, &p, w, w, now);
    CHECK_EQ_U(cc.cwnd, w);
    opal_btl_usnic_cc_acked(&cc, &p, w, w, now + OPAL_BTL_USNIC_CC_STALE_USEC - 1);
    CHECK_EQ_U(cc.cwnd, w);
    opal_btl_usnic_cc_acked(&cc, &p, w, w, now + OPAL_BTL_USNIC_CC_STALE_USEC);
    CHECK_EQ_U(cc.cwnd, w + MSS);
}

/* The socket wire stamps arrivals only while batches flow; a datagram
 * it read after a gap without a stamp has an unknown arrival: its ACK
 * hold is unknown (the receiver's side) and an ACK so read gives no delay
 * sample (the sender's), while a stamped one counts from its stamp */
static void test_unknown_arrival_gives_no_hold_nor_sample(void)
{
    fx_t fx;
    opal_btl_usnic_endpoint_t *ep;
    cc_fixture(&fx, &ep);
    uint8_t buf[FX_MTU];
    /* the receiver's side */
    fx_set_time(&fx, 10000);
    uint32_t seq = PEER_ISN;
    fx_recv_at(&fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)), fx.now - 200);
    CHECK_EQ_U(ep->rx.last_arrival, fx.now - 200);
    CHECK_EQ_U(opal_btl_usnic_ack_hold(&fx.eng, ep), 50); /* 200 us in 4-us steps */
    seq = PEER_ISN + 1;
    fx_recv_at(&fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)), OPAL_BTL_USNIC_ARRIVAL_UNKNOWN);
    CHECK_EQ_U(opal_btl_usnic_ack_hold(&fx.eng, ep), OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN);
    fx_set_time(&fx, fx.now + 30);
    CHECK_EQ_U(opal_btl_usnic_ack_hold(&fx.eng, ep), OPAL_BTL_USNIC_ACK_HOLD_UNKNOWN);
    seq = PEER_ISN + 2;
    fx_recv_at(&fx, buf, fx_build_frag(buf, PEER, seq, 3, &seq, sizeof(seq)), 0); /* read at once */
    CHECK_EQ_U(opal_btl_usnic_ack_hold(&fx.eng, ep), 0);
    /* the sender's side: an ACK of unknown arrival gives no sample ... */
    fx_set_time(&fx, 20000);
    CHECK_EQ_U(fx_send_tiny(&fx, ep, 1, NULL), 1);
    fx_set_time(&fx, fx.now + 900);
    fx_recv_at(&fx, buf, fx_build_ack(buf, PEER, ISN), OPAL_BTL_USNIC_ARRIVAL_UNKNOWN);
    CHECK_EQ_U(opal_btl_usnic_endpoint_in_flight(ep), 0);
    CHECK_EQ_U(ep->cc.base_rtt, 0);
    CHECK(0 != ep->timer.srtt); /* the retransmit timer's sample ends when we read it */
    /* ... a stamped one gives its own, not when we read it */
    CHECK_EQ_U(fx_send_tiny(&fx, ep, 1, NULL), 1);
    uint64_t sent = fx.now;
    fx_set_time(&fx, fx.now + 900);
    fx_recv_at(&fx, buf, fx_build_ack(buf, PEER, ISN + 1), sent + 150);
    CHECK_EQ_U(ep->cc.base_rtt, 150);
    fx_ep_free(&fx, ep);
    fx_fini(&fx);
}

UNIT_MAIN(UNIT_TEST(test_rising_delay_cuts_once_per_round_trip), UNIT_TEST(test_delay_spike_is_not_a_queue),
          UNIT_TEST(test_loss_cuts_once_per_round_trip),
          UNIT_TEST(test_recovers_full_rate_on_an_idle_path), UNIT_TEST(test_grows_only_while_in_use_and_unqueued),
          UNIT_TEST(test_slow_start_doubles_until_the_first_queue), UNIT_TEST(test_loss_mode_beside_a_queue_others_fill),
          UNIT_TEST(test_pacing_follows_the_queue), UNIT_TEST(test_pacing_intervals), UNIT_TEST(test_window_is_the_smaller_of_grant_and_cwnd),
          UNIT_TEST(test_paced_endpoint_waits_in_progress), UNIT_TEST(test_hold_is_removed_from_the_sample),
          UNIT_TEST(test_unknown_arrival_gives_no_hold_nor_sample), UNIT_TEST(test_receiver_away_allowance),
          UNIT_TEST(test_delivery_rate_is_the_fastest_recent_interval), UNIT_TEST(test_old_delay_no_longer_holds_the_window))
