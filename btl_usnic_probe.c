/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The driver of the path MTU searches: it runs from the progress function
 * (one compare per pass while nothing is due), sends one probe at a time
 * per peer, and turns echoes into the sizes the endpoints use.  A probe
 * counts as lost after the endpoint's retransmission timeout, never less
 * than the timeout a new path starts with (btl_usnic_retrans_timeout): a
 * probe is not urgent, and on a busy host a short wait would take a
 * descheduled peer's late echo for a loss (three in a row would keep a
 * good size unused until the next search).
 */
#include "opal_config.h"

#include <stdio.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_pmtu.h"
#include "btl_usnic_post.h"
#include "btl_usnic_probe.h"

static uint64_t probe_timeout(const opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep)
{
    uint64_t floor = opal_btl_usnic_rto_floor_start(&eng->p);
    return ep->timer.rto > floor ? ep->timer.rto : floor;
}

/* One search's due work.  Returns the probes posted (0 or 1). */
static int search_step(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (opal_btl_usnic_pmtu_probe_expire(&ep->pmtu, eng->now)) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_pmtu_probes_lost);
    }
    uint32_t size = opal_btl_usnic_pmtu_probe_due(&ep->pmtu, eng->now);
    if (0 == size) {
        return 0;
    }
    if (OPAL_SUCCESS != opal_btl_usnic_probe_post(eng, ep, size)) {
        ep->pmtu.next_probe = eng->now + eng->p.rto_min; /* no room now: soon, not at every pass */
        return 0;
    }
    opal_btl_usnic_pmtu_probe_sent(&ep->pmtu, size, eng->now, probe_timeout(eng, ep));
    return 1;
}

int opal_btl_usnic_probes_progress(opal_btl_usnic_engine_t *eng)
{
    int posted = 0;
    eng->next_probe_event = UINT64_MAX;
    opal_list_item_t *item = opal_list_get_first(&eng->endpoints_probing);
    while (item != opal_list_get_end(&eng->endpoints_probing)) {
        opal_list_item_t *next = opal_list_get_next(item);
        opal_btl_usnic_endpoint_t *ep =
            (opal_btl_usnic_endpoint_t *) ((char *) item - offsetof(opal_btl_usnic_endpoint_t, probe_item));
        if (!ep->failed && opal_btl_usnic_pmtu_next_event(&ep->pmtu) <= eng->now) {
            posted += search_step(eng, ep);
        }
        opal_btl_usnic_endpoint_probe_watch(ep); /* lowers next_probe_event, or leaves the list */
        item = next;
    }
    return posted;
}

void opal_btl_usnic_probe_ack_taken(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t echo)
{
    if (OPAL_UNLIKELY(ep->pmtu.waiting) && opal_btl_usnic_pmtu_start(&ep->pmtu, eng->now)) {
        opal_btl_usnic_endpoint_probe_watch(ep);
    }
    if (OPAL_LIKELY(0 == echo)) {
        return;
    }
    OPAL_BTL_USNIC_STAT_INC(eng, num_pmtu_probes_acked);
    size_t old = ep->pmtu.cur;
    bool rose = false;
    if (0 != opal_btl_usnic_pmtu_echo(&ep->pmtu, (uint32_t) echo, ep->tx.acked_seq, eng->now)) {
        rose = ep->pmtu.cur > old;
    }
    char why[160];
    if (rose) {
        snprintf(why, sizeof(why), "a %zu-byte probe was confirmed", echo);
    } else if (ep->pmtu.cur < old) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_pmtu_blackholes);
        snprintf(why, sizeof(why), "larger datagrams timed out twice while a %zu-byte probe got through "
                                   "(a black hole on the path)", echo);
    } else {
        why[0] = '\0';
    }
    opal_btl_usnic_endpoint_path_update(ep, old, why);
}

void opal_btl_usnic_probe_answer(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t len)
{
    (void) opal_btl_usnic_probe_echo_send(eng, ep, len); /* if it cannot go, the prober tries again */
}
