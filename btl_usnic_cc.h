/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Congestion control of one peer's path: a window of bytes in flight
 * that keeps the bottleneck's queue near a delay target, with a loss
 * backstop, and the pacing of sends at the window's rate.  Pure state:
 * no engine, no clock but the |now| passed in (us), so that unit tests
 * drive it with a virtual clock.  btl_usnic_cc.c has the design notes.
 */
#ifndef OPAL_BTL_USNIC_CC_H
#define OPAL_BTL_USNIC_CC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Datagrams of the path's size a new path may have in flight */
#define OPAL_BTL_USNIC_CC_INITIAL_SEGS 10
/* The window never goes below this many of the path's datagrams */
#define OPAL_BTL_USNIC_CC_MIN_SEGS 4
/* Round trips in a row whose least queueing delay stayed above the
 * target, while cuts halved the window at least, before the controller
 * concludes that others fill the queue */
#define OPAL_BTL_USNIC_CC_QUEUED_ROUNDS 4
/* The most a burst may hold (bytes): what one segmentation-offload send
 * carries; a path whose datagram is larger sends one at a time */
#define OPAL_BTL_USNIC_CC_MAX_BURST 65536
/* Explicit ACKs held this long (us) or longer give no delay sample: their
 * receiver was away, and the sample's error (two clocks, the hold's
 * coarser steps) would be as large as the path's delay */
#define OPAL_BTL_USNIC_CC_MAX_HOLD_USEC 512
/* Round trips in a row with the queue below half the target before the
 * controller leaves loss mode (one would follow each of a TCP flow's cuts) */
#define OPAL_BTL_USNIC_CC_DRAINED_ROUNDS 2
/* How long (us) the last queueing delay holds the window back without a
 * newer sample */
#define OPAL_BTL_USNIC_CC_STALE_USEC 100000ull
/* How long a minimum RTT stands (us) before newer samples replace it */
#define OPAL_BTL_USNIC_CC_BASE_EPOCH_USEC 10000000ull
/* How long the longest absence a receiver reported stands (us) */
#define OPAL_BTL_USNIC_CC_AWAY_EPOCH_USEC 1000000ull
/* The delivery rate is measured over intervals this long (us): longer
 * than a receiver's usual absence, so that its silence and the burst of
 * ACKs after it fall into one interval */
#define OPAL_BTL_USNIC_CC_DELIVERY_INTERVAL_USEC 10000ull
/* How long the fastest interval stands (us) */
#define OPAL_BTL_USNIC_CC_DELIVERY_EPOCH_USEC 100000ull

typedef enum {
    OPAL_BTL_USNIC_CC_NONE = 0,
    OPAL_BTL_USNIC_CC_CUT_DELAY,        /* the window was cut for delay above the target */
    OPAL_BTL_USNIC_CC_CUT_LOSS,         /* ... for loss */
    OPAL_BTL_USNIC_CC_TO_LOSS_MODE,     /* others keep the queue full: delay no longer cuts */
    OPAL_BTL_USNIC_CC_TO_DELAY_MODE     /* the queue drained again: back to the delay target */
} opal_btl_usnic_cc_event_t;

typedef struct opal_btl_usnic_cc_t {
    uint64_t cwnd;              /* bytes we may have un-ACKed */
    bool slow_start;            /* doubling per round trip until the first sign of a queue */
    bool loss_mode;             /* a queue we do not drain: only loss cuts (competing with loss-based flows) */
    uint64_t base_rtt;          /* us: the least delay sample of this epoch and the last (0: none yet) */
    uint64_t epoch_min;         /* us: least sample of the current epoch (0: none) */
    uint64_t prev_epoch_min;    /* us: ... of the previous one (0: none) */
    uint64_t epoch_start;       /* us */
    uint64_t stand_min;         /* us: least sample of the current half round trip (0: none) */
    uint64_t stand_prev;        /* us: ... of the previous one (0: none) */
    uint64_t stand_start;       /* when the current half round trip began */
    uint64_t qdelay;            /* us: standing queueing delay (least sample of the last half
                                   round trip or two, less base_rtt) */
    uint64_t qdelay_avg;        /* us: smoothed (1/8), for statistics */
    uint64_t sampled_at;        /* when the last delay sample came */
    uint64_t last_cut;          /* when the window was last cut (once per round trip) */
    uint64_t undo_cwnd;         /* the window before a cut for a timeout, until the timeout proves
                                   genuine or spurious (0: nothing to undo) */
    uint64_t round_start;       /* the current round trip of the queue watch began here */
    uint64_t round_min_qdelay;  /* least queueing delay seen in it (UINT64_MAX: no sample) */
    unsigned queued_rounds;     /* rounds in a row whose least queueing delay stayed above the target */
    unsigned drained_rounds;    /* rounds in a row whose least queueing delay fell below target / 2 */
    uint64_t round_cwnd;        /* the window when the current round began */
    uint64_t queue_cwnd;        /* the window when the first of those rounds began */
    bool pacing;                /* the path showed a queue: sends are paced (until a round trip without) */
    uint64_t away;              /* us: the longest hold the receiver reported in this away epoch and the last */
    uint64_t away_epoch_max;    /* ... in this one */
    uint64_t away_epoch_start;
    uint64_t delivered;         /* bytes ACKed in the current delivery interval */
    uint64_t delivery_start;    /* when it began */
    double delivery_rate;       /* bytes/us: the fastest interval of this delivery epoch and the last (0: none) */
    double delivery_epoch_max;  /* ... of this one */
    uint64_t delivery_epoch_start;
    double tokens;              /* pacing: bytes that may leave now (negative: owed) */
    uint64_t tokens_time;       /* when tokens were last refilled */
} opal_btl_usnic_cc_t;

/* What the controller is told of its settings and path at each call */
typedef struct opal_btl_usnic_cc_path_t {
    uint64_t target;            /* us of queueing delay the window aims to keep under */
    uint64_t srtt;              /* us: smoothed RTT (0: none yet; then no pacing, no round trips) */
    size_t mss;                 /* bytes of the path's largest datagram now */
    uint64_t max_window;        /* bytes: the most the window may grow to (the sequence window's worth) */
    size_t burst;               /* bytes that may leave back to back (one segmentation-offload batch) */
    uint64_t in_flight;         /* bytes un-ACKed now */
} opal_btl_usnic_cc_path_t;

/* A new path: |initial| bytes of window, in slow start */
void opal_btl_usnic_cc_init(opal_btl_usnic_cc_t *cc, uint64_t initial, uint64_t now);

/* A round-trip sample |rtt| (us) with the receiver's hold removed, from
 * a segment sent once.  Returns what it did. */
opal_btl_usnic_cc_event_t opal_btl_usnic_cc_delay(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                                  uint64_t rtt, uint64_t now);

/* |acked| bytes left the flight at |now|, which held |in_flight| bytes
 * before: they count to the delivery rate, and the window grows if the
 * path shows no queue and the window was in use */
void opal_btl_usnic_cc_acked(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, uint64_t acked,
                             uint64_t in_flight, uint64_t now);

/* The receiver held an ACK |held| us after the data reached its host
 * (any hold it reports, a sample or not): how long it was away */
void opal_btl_usnic_cc_hold(opal_btl_usnic_cc_t *cc, uint64_t held, uint64_t now);

/* The longest the receiver was away lately (us): the largest hold it
 * reported in this second or the last */
static inline uint64_t opal_btl_usnic_cc_away(const opal_btl_usnic_cc_t *cc)
{
    return cc->away;
}

/* Bytes that may be un-ACKed: the window, and while the sends are paced
 * what the path delivered to this peer in as long as the receiver is
 * away (see the design notes: data that waits in the receiver's host is
 * not in the path) */
uint64_t opal_btl_usnic_cc_limit(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path);

/* A loss was detected (a hole the receiver reported, or a timeout):
 * returns OPAL_BTL_USNIC_CC_CUT_LOSS if the window was cut (at most once
 * per round trip) */
opal_btl_usnic_cc_event_t opal_btl_usnic_cc_loss(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                                 uint64_t now);

/* The same for a retransmission timeout, which may prove spurious (a
 * receiver descheduled, not a loss): the cut can be undone */
opal_btl_usnic_cc_event_t opal_btl_usnic_cc_timeout(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                                    uint64_t now);

/* The last timeout was spurious: give back what it cut */
void opal_btl_usnic_cc_undo(opal_btl_usnic_cc_t *cc);

/* Bytes per microsecond the pacer lets out (0: unlimited: no RTT yet, or
 * no queue seen since the last round trip without one) */
double opal_btl_usnic_cc_rate(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path);

/* May a datagram leave now?  (the pacer's tokens, refilled to |now|) */
bool opal_btl_usnic_cc_pace_ready(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                  uint64_t now);

/* A datagram of |len| bytes left at |now| */
void opal_btl_usnic_cc_sent(opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path, size_t len,
                            uint64_t now);

/* Does the pacer hold datagrams back at all?  (no: the path showed no
 * queue, and every datagram may leave at once, whatever its path) */
static inline bool opal_btl_usnic_cc_pacing(const opal_btl_usnic_cc_t *cc)
{
    return cc->pacing;
}

/* opal_btl_usnic_cc_sent when the pacer does not hold back: the time is
 * all it keeps (the per-datagram cost of a healthy path) */
static inline void opal_btl_usnic_cc_sent_unpaced(opal_btl_usnic_cc_t *cc, uint64_t now)
{
    cc->tokens = 0.0;
    cc->tokens_time = now;
}

/* When the pacer will let the next datagram out (us; |now| if it may now) */
uint64_t opal_btl_usnic_cc_pace_time(const opal_btl_usnic_cc_t *cc, const opal_btl_usnic_cc_path_t *path,
                                     uint64_t now);

#endif /* OPAL_BTL_USNIC_CC_H */
