/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Cost of a lost tail: a burst of N tiny segments to one peer whose last
 * datagram is lost, or whose only ACK is lost, with tail-loss probes
 * (btl_usnic_tail_probes 2) against without (0, a timeout and a batch).
 * Deterministic: the engine runs on the unit tests' fixture (fake wire,
 * virtual clock), the peer is modelled here: one-way delay OWD_US, it
 * ACKs each arriving batch (one progress pass's posts) at once with one
 * cumulative ACK, nothing else is lost.  The
 * endpoint has one RTT sample (2 * OWD_US) before the burst, and the
 * engine runs with the module's defaults (retrans_timeout 5 ms, rto_min
 * 0.5 ms, ack_delay 50 us, socket-wire batches of 44).
 *
 * Build and run: see bench/README.md, "Tail-loss probes" (the unit
 * tests' engine objects, test/unit/build/obj, and fixture.o).
 */
#include "fixture.h"

#include <stdio.h>

#define OWD_US 20
#define PEER 1
#define ISN 3000u
#define MAX_ACKS 256

typedef enum { LOSE_LAST_DATAGRAM, LOSE_LAST_ACK } tail_loss_t;

typedef struct {
    uint64_t at[MAX_ACKS];
    uint32_t cum[MAX_ACKS];
    unsigned n;
} acks_t;

typedef struct {
    bool got[MAX_ACKS];
    uint32_t n;           /* burst size */
    bool dropped_data;    /* the scenario's one loss happened */
    bool dropped_ack;
} peer_t;

static uint32_t peer_cum(const peer_t *pr)
{
    uint32_t k = 0;
    while (k < pr->n && pr->got[k]) {
        ++k;
    }
    return k; /* segments held in order */
}

/* The peer receives the posts [from, fx->nposts) (one pass's posts arrive
 * as one batch) and ACKs the batch with one cumulative ACK. */
static void peer_receive(fx_t *fx, peer_t *pr, acks_t *acks, size_t from, tail_loss_t loss)
{
    if (from == fx->nposts) {
        return;
    }
    for (size_t i = from; i < fx->nposts; ++i) {
        uint32_t k = fx_post_seq(&fx->posts[i]) - ISN;
        if (LOSE_LAST_DATAGRAM == loss && k == pr->n - 1 && !pr->dropped_data) {
            pr->dropped_data = true;
            continue;
        }
        pr->got[k] = true;
    }
    uint32_t cum = peer_cum(pr);
    if (0 == cum) {
        return;
    }
    if (LOSE_LAST_ACK == loss && cum == pr->n && !pr->dropped_ack) {
        pr->dropped_ack = true;
        return;
    }
    if (acks->n < MAX_ACKS) {
        acks->at[acks->n] = fx->now + 2 * OWD_US;
        acks->cum[acks->n++] = ISN + cum - 1;
    }
}

static void run(uint32_t burst, uint32_t probes, tail_loss_t loss, uint64_t *usec, size_t *datagrams)
{
    opal_btl_usnic_engine_params_t p;
    fx_params_default(&p);
    p.rto_initial = 5000;
    p.rto_floor_start = 5000; /* as the module: the RTO's floor starts at retrans_timeout */
    p.rto_min = 500;
    p.rto_max = 10000;
    p.ack_delay = 50;
    p.batch_segs = 44;
    p.tail_probes = probes;
    fx_t fx;
    fx_init(&fx, &p);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 256, ISN - 1, 9000);
    /* one RTT sample first */
    fx_send_tiny(&fx, ep, 1, NULL);
    fx_complete_all(&fx);
    fx_set_time(&fx, fx.now + 2 * OWD_US);
    opal_btl_usnic_handle_ack(&fx.eng, ep, ISN - 1);

    peer_t pr = {.n = burst};
    acks_t acks = {.n = 0};
    uint64_t start = fx.now;
    size_t first = fx.nposts;
    fx_send_tiny(&fx, ep, burst, NULL);
    fx_complete_all(&fx);
    peer_receive(&fx, &pr, &acks, first, loss);
    unsigned next_ack = 0;
    while (opal_btl_usnic_endpoint_in_flight(ep) > 0 && fx.now - start < 1000000) {
        uint64_t t = opal_btl_usnic_engine_next_deadline(&fx.eng);
        if (next_ack < acks.n && acks.at[next_ack] < t) {
            t = acks.at[next_ack];
        }
        fx_set_time(&fx, t > fx.now ? t : fx.now);
        while (next_ack < acks.n && acks.at[next_ack] <= fx.now) {
            opal_btl_usnic_handle_ack(&fx.eng, ep, acks.cum[next_ack++]);
        }
        size_t before = fx.nposts;
        fx_progress(&fx);
        fx_complete_all(&fx);
        peer_receive(&fx, &pr, &acks, before, loss);
    }
    *usec = fx.now - start;
    *datagrams = fx.nposts - first;
    fx_fini(&fx);
}

int main(void)
{
    static const uint32_t bursts[] = {4, 16, 44};
    static const char *const names[] = {"last datagram lost", "last ACK lost"};
    printf("%-20s %5s | %14s %9s | %14s %9s\n", "case", "burst", "probes: us", "datagrams", "no probes: us",
           "datagrams");
    for (int loss = LOSE_LAST_DATAGRAM; loss <= LOSE_LAST_ACK; ++loss) {
        for (size_t b = 0; b < sizeof(bursts) / sizeof(bursts[0]); ++b) {
            uint64_t t_on, t_off;
            size_t d_on, d_off;
            run(bursts[b], 2, (tail_loss_t) loss, &t_on, &d_on);
            run(bursts[b], 0, (tail_loss_t) loss, &t_off, &d_off);
            printf("%-20s %5u | %14llu %9zu | %14llu %9zu\n", names[loss], bursts[b], (unsigned long long) t_on,
                   d_on, (unsigned long long) t_off, d_off);
        }
    }
    return 0;
}
