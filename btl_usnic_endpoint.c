/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Endpoint lifecycle: construction, reliability state, keys, limits,
 * its place on the ready-to-send list, teardown of its own state.
 * Failing its fragments and releasing its segments is the work of the
 * layers above (opal_btl_usnic_endpoint_flush in btl_usnic_ack.c).
 */
#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "btl_usnic_endpoint.h"

static void endpoint_construct(opal_btl_usnic_endpoint_t *ep)
{
    ep->eng = NULL;
    ep->proc = NULL;
    ep->peer_id = 0;
    ep->peer_addr[0] = ep->peer_addr[1] = 0;
    ep->failed = false;
    ep->departed = false;
    OBJ_CONSTRUCT(&ep->tx.queue, opal_list_t);
    OBJ_CONSTRUCT(&ep->tx.rts_item, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->rx.ack_item, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->tx.flight_item, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->probe_item, opal_list_item_t);
    ep->tx.on_flight_list = false;
    ep->on_probe_list = false;
    memset(&ep->pmtu, 0, sizeof(ep->pmtu));
    memset(&ep->rx.pieces, 0, sizeof(ep->rx.pieces));
    memset(&ep->timer, 0, sizeof(ep->timer));
    memset(&ep->tx.mac, 0, sizeof(ep->tx.mac));
    memset(&ep->rx.mac, 0, sizeof(ep->rx.mac));
    memset(&ep->rx.replay, 0, sizeof(ep->rx.replay));
    ep->tx.nonce = 0;
    ep->tx.nonces_spent = false;
    ep->tx.spent_next = NULL;
    ep->keyed = false;
    ep->tx.sent = NULL;
    ep->tx.on_rts_list = false;
    ep->tx.dup_acks = 0;
    ep->tx.next_frag_id = 1;
    ep->rx.rcvd = NULL;
    ep->rx.frags = NULL;
    ep->rx.held = NULL;
    ep->rx.nheld = 0;
    ep->rx.delivering = false;
    ep->rx.ack_owed = false;
    ep->rx.late_dup = false;
    ep->rx.repaired = false;
    ep->rx.fast_ack_urgent = false;
    ep->rx.on_ack_list = false;
    ep->rx.last_ack_sent = 0;
    ep->rx.prev_ack_sent = 0;
    ep->rx.last_ack_time = 0;
    ep->rx.last_grant = 0;
    ep->rx.last_arrival = 0;
    ep->rx.charge_since_ack = 0;
    ep->rx.active_epoch = 0;
    ep->tx.peer_credit = 0;
    ep->tx.in_flight_charge = 0;
    ep->tx.in_flight_bytes = 0;
    ep->tx.on_pace_list = false;
    OBJ_CONSTRUCT(&ep->tx.pace_item, opal_list_item_t);
    ep->timer.fresh_rtt = 0;
    memset(&ep->cc, 0, sizeof(ep->cc));
    ep->tx.data_unacked = 0;
    memset(&ep->tx.peer_charge, 0, sizeof(ep->tx.peer_charge));
    ep->window = 0;
}

/* How many endpoints to |peer_id| |eng| released: the incarnation of
 * the next one (btl_usnic_auth.c, "Incarnations") */
static uint32_t released_to(opal_btl_usnic_engine_t *eng, uint64_t peer_id)
{
    void *count = NULL;
    if (OPAL_SUCCESS != opal_hash_table_get_value_uint64(&eng->released, peer_id, &count)) {
        return 0;
    }
    return (uint32_t) (uintptr_t) count;
}

/* Counted once per endpoint that had keys, when it leaves its engine */
static void count_released(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_endpoint_t *ep)
{
    uintptr_t n = (uintptr_t) released_to(eng, ep->peer_id) + 1;
    (void) opal_hash_table_set_value_uint64(&eng->released, ep->peer_id, (void *) n);
}

static void endpoint_destruct(opal_btl_usnic_endpoint_t *ep)
{
    /* The endpoint may still be on the engine's lists (seed 001: an
     * endpoint can reach its destructor while still owing an ACK). */
    if (NULL != ep->eng) {
        opal_btl_usnic_endpoint_detach(ep);
    }
    if (ep->keyed && NULL != ep->eng && ep->eng->constructed) {
        count_released(ep->eng, ep);
    }
    if (NULL != ep->rx.frags) {
        for (uint32_t i = 0; i < ep->window; ++i) {
            opal_btl_usnic_rx_frag_reset(&ep->rx.frags[i]);
        }
    }
    free(ep->rx.frags);
    opal_btl_usnic_held_free_all(ep);
    opal_btl_usnic_pieces_free(&ep->rx.pieces);
    opal_btl_usnic_mac_clear(&ep->tx.mac);
    opal_btl_usnic_mac_clear(&ep->rx.mac);
    free(ep->rx.rcvd);
    free(ep->tx.sent);
    OBJ_DESTRUCT(&ep->tx.flight_item);
    OBJ_DESTRUCT(&ep->tx.pace_item);
    OBJ_DESTRUCT(&ep->probe_item);
    OBJ_DESTRUCT(&ep->rx.ack_item);
    OBJ_DESTRUCT(&ep->tx.rts_item);
    OBJ_DESTRUCT(&ep->tx.queue);
}

OBJ_CLASS_INSTANCE(opal_btl_usnic_endpoint_t, opal_list_item_t, endpoint_construct, endpoint_destruct);

/* The path MTU search of a pair whose interfaces allow |max| bytes starts
 * (again) from the base size; the sizes in use follow */
static void pmtu_restart(opal_btl_usnic_endpoint_t *ep, size_t max)
{
    const opal_btl_usnic_engine_params_t *p = &ep->eng->p;
    opal_btl_usnic_pmtu_init(&ep->pmtu, p->pmtu_discovery, (uint32_t) p->pmtu_base, (uint32_t) max,
                             p->pmtu_reprobe);
    opal_btl_usnic_endpoint_set_datagram(ep, ep->pmtu.cur);
}

int opal_btl_usnic_endpoint_init_rel(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_engine_t *eng,
                                     uint32_t window, opal_btl_usnic_seq_t local_isn,
                                     opal_btl_usnic_seq_t peer_isn)
{
    /* Windows are powers of two: slots are seq % window, and only a power
     * of two divides 2^32, so slots stay distinct across the wrap. */
    if (window > OPAL_BTL_USNIC_WINDOW_LIMIT) {
        window = OPAL_BTL_USNIC_WINDOW_LIMIT;
    }
    while (0 != (window & (window - 1))) {
        window &= window - 1;
    }
    if (0 == window) {
        return OPAL_ERR_BAD_PARAM;
    }
    if (eng->nonce_generation >= OPAL_BTL_USNIC_NONCE_GENERATIONS) {
        return OPAL_ERR_OUT_OF_RESOURCE; /* its nonces would repeat an earlier endpoint's */
    }
    ep->eng = eng;
    ep->window = window;
    ep->timer.rto = eng->p.rto_initial;
    ep->timer.rto_floor = opal_btl_usnic_rto_floor_start(&eng->p);
    ep->tx.sent = (opal_btl_usnic_send_seg_t **) calloc(window, sizeof(*ep->tx.sent));
    ep->rx.rcvd = (uint8_t *) calloc(window, sizeof(*ep->rx.rcvd));
    ep->rx.frags = (opal_btl_usnic_rx_frag_t *) calloc(window, sizeof(*ep->rx.frags));
    if (NULL == ep->tx.sent || NULL == ep->rx.rcvd || NULL == ep->rx.frags) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ep->pair_tiny_mtu = eng->p.tiny_mtu;
    pmtu_restart(ep, eng->p.mtu);
    opal_btl_usnic_cc_init(&ep->cc, (uint64_t) OPAL_BTL_USNIC_CC_INITIAL_SEGS * eng->p.mtu, eng->now);
    ep->tx.next_seq = local_isn;
    ep->tx.acked_seq = local_isn - 1;
    ep->tx.nonce = opal_btl_usnic_nonce_first(eng->nonce_generation++);
    memset(&ep->rx.replay, 0, sizeof(ep->rx.replay));
    opal_btl_usnic_endpoint_set_peer_rx(ep, &eng->p.rx_charge, eng->p.rx_capacity);
    ep->rx.next_expected = peer_isn;
    ep->rx.highest = peer_isn - 1;
    ep->rx.last_ack_sent = peer_isn - 1;
    ep->rx.prev_ack_sent = peer_isn - 1;
    return OPAL_SUCCESS;
}

void opal_btl_usnic_endpoint_set_keys(opal_btl_usnic_endpoint_t *ep, unsigned alg,
                                      const uint8_t tx_key[OPAL_BTL_USNIC_KEY_BYTES],
                                      const uint8_t rx_key[OPAL_BTL_USNIC_KEY_BYTES])
{
    uint32_t n = released_to(ep->eng, ep->peer_id);
    uint8_t tx[OPAL_BTL_USNIC_KEY_BYTES], rx[OPAL_BTL_USNIC_KEY_BYTES];
    opal_btl_usnic_incarnation_key(tx_key, n, tx);
    opal_btl_usnic_incarnation_key(rx_key, n, rx);
    opal_btl_usnic_mac_init(&ep->tx.mac, alg, tx);
    opal_btl_usnic_mac_init(&ep->rx.mac, alg, rx);
    ep->keyed = true;
    sodium_memzero(tx, sizeof(tx));
    sodium_memzero(rx, sizeof(rx));
}

void opal_btl_usnic_endpoint_set_peer_rx(opal_btl_usnic_endpoint_t *ep, const opal_btl_usnic_charge_t *charge,
                                         uint64_t capacity)
{
    ep->tx.peer_charge = *charge;
    opal_btl_usnic_charge_sanitize(&ep->tx.peer_charge);
    /* until the receiver's first grant: what it holds for four senders
     * starting at once, and never less than the least it grants (two of
     * its largest datagrams, btl_usnic_rx_grant); the window bounds the rest */
    uint64_t least = 2 * (uint64_t) ep->tx.peer_charge.per_class[OPAL_BTL_USNIC_CHARGE_CLASSES - 1];
    ep->tx.peer_credit = (0 == capacity) ? UINT64_MAX : (capacity / 4 > least) ? capacity / 4 : least;
}

void opal_btl_usnic_endpoint_set_datagram(opal_btl_usnic_endpoint_t *ep, size_t size)
{
    ep->max_frag_payload = size - sizeof(opal_btl_usnic_hdr_t);
    ep->max_chunk_payload = size - sizeof(opal_btl_usnic_chunk_hdr_t);
    ep->tiny_mtu = (ep->pair_tiny_mtu < size) ? ep->pair_tiny_mtu : size;
    ep->max_tiny_payload = ep->tiny_mtu - sizeof(opal_btl_usnic_hdr_t);
}

void opal_btl_usnic_endpoint_limit_mtu(opal_btl_usnic_endpoint_t *ep, size_t mtu, size_t tiny_mtu)
{
    if (tiny_mtu < ep->pair_tiny_mtu) {
        ep->pair_tiny_mtu = tiny_mtu;
    }
    if (mtu < ep->pmtu.max) {
        pmtu_restart(ep, mtu);
    } else {
        opal_btl_usnic_endpoint_set_datagram(ep, ep->pmtu.cur);
    }
}

void opal_btl_usnic_endpoint_probe_watch(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_engine_t *eng = ep->eng;
    uint64_t when = opal_btl_usnic_pmtu_next_event(&ep->pmtu);
    if (OPAL_BTL_USNIC_PMTU_NEVER == when || ep->failed) {
        if (ep->on_probe_list) {
            opal_list_remove_item(&eng->endpoints_probing, &ep->probe_item);
            ep->on_probe_list = false;
        }
        return;
    }
    if (!ep->on_probe_list) {
        opal_list_append(&eng->endpoints_probing, &ep->probe_item);
        ep->on_probe_list = true;
    }
    if (when < eng->next_probe_event) {
        eng->next_probe_event = when;
    }
}

void opal_btl_usnic_endpoint_path_update(opal_btl_usnic_endpoint_t *ep, size_t old, const char *why)
{
    opal_btl_usnic_engine_t *eng = ep->eng;
    size_t now = ep->pmtu.cur;
    opal_btl_usnic_endpoint_set_datagram(ep, now);
    if (now < old) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_pmtu_lowered);
    } else if (now > old) {
        OPAL_BTL_USNIC_STAT_INC(eng, num_pmtu_raised);
    }
    if (now != old && NULL != eng->up->path_changed) {
        eng->up->path_changed(eng, ep, old, now, why);
    }
    opal_btl_usnic_endpoint_probe_watch(ep);
}

void opal_btl_usnic_endpoint_detach(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_engine_t *eng = ep->eng;
    if (ep->rx.on_ack_list) {
        opal_list_remove_item(&eng->endpoints_needing_ack, &ep->rx.ack_item);
        ep->rx.on_ack_list = false;
    }
    ep->rx.ack_owed = false;
    if (ep->tx.on_rts_list) {
        opal_list_remove_item(&eng->endpoints_with_sends, &ep->tx.rts_item);
        ep->tx.on_rts_list = false;
    }
    if (ep->tx.on_flight_list) {
        opal_list_remove_item(&eng->endpoints_in_flight, &ep->tx.flight_item);
        ep->tx.on_flight_list = false;
    }
    if (ep->on_probe_list) {
        opal_list_remove_item(&eng->endpoints_probing, &ep->probe_item);
        ep->on_probe_list = false;
    }
    if (ep->tx.on_pace_list) {
        opal_list_remove_item(&eng->endpoints_paced, &ep->tx.pace_item);
        ep->tx.on_pace_list = false;
    }
    for (opal_btl_usnic_endpoint_t **p = &eng->nonces_spent; NULL != *p; p = &(*p)->tx.spent_next) {
        if (*p == ep) {
            *p = ep->tx.spent_next;
            ep->tx.spent_next = NULL;
            break;
        }
    }
}

void opal_btl_usnic_held_free_all(opal_btl_usnic_endpoint_t *ep)
{
    while (NULL != ep->rx.held) {
        opal_btl_usnic_held_t *h = ep->rx.held;
        ep->rx.held = h->next;
        free(h->buf);
        free(h);
    }
    ep->rx.nheld = 0;
}

/* ----- the ready-to-send list ----- */

/* The datagram the next post from |frag| makes: its whole self (small),
 * or its next chunk or PUT piece */
static size_t next_datagram_len(const opal_btl_usnic_endpoint_t *ep, const opal_btl_usnic_send_frag_t *frag)
{
    if (OPAL_BTL_USNIC_FRAG_SMALL == frag->kind) {
        return sizeof(opal_btl_usnic_hdr_t) + frag->total_len;
    }
    size_t left = frag->total_len - frag->offset;
    size_t chunk = (OPAL_BTL_USNIC_FRAG_LARGE == frag->kind && 0 != frag->frag_id) ? frag->chunk_payload
                                                                                  : ep->max_chunk_payload;
    size_t piece = (left < chunk) ? left : chunk;
    return sizeof(opal_btl_usnic_chunk_hdr_t) + piece; /* a PUT's piece makes a datagram no longer */
}

bool opal_btl_usnic_endpoint_can_send(opal_btl_usnic_endpoint_t *ep)
{
    if (ep->failed || opal_list_is_empty(&ep->tx.queue)) {
        return false;
    }
    const opal_btl_usnic_send_frag_t *head = (const opal_btl_usnic_send_frag_t *) opal_list_get_first(&ep->tx.queue);
    return opal_btl_usnic_endpoint_room_for(ep, next_datagram_len(ep, head));
}

/* |ep| has work its pacer holds back: the progress pass looks again when
 * the pacer lets it out (opal_btl_usnic_pace_release) */
static void pace_wait(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_engine_t *eng = ep->eng;
    opal_btl_usnic_cc_path_t path;
    opal_btl_usnic_endpoint_cc_path(ep, &path);
    uint64_t when = opal_btl_usnic_cc_pace_time(&ep->cc, &path, eng->now);
    if (when <= eng->now) {
        return; /* the window, the grant or the sequence window holds it: an ACK opens them */
    }
    if (!ep->tx.on_pace_list) {
        opal_list_append(&eng->endpoints_paced, &ep->tx.pace_item);
        ep->tx.on_pace_list = true;
        OPAL_BTL_USNIC_STAT_INC(eng, num_cc_paced);
    }
    if (when < eng->next_pace_event) {
        eng->next_pace_event = when;
    }
}

void opal_btl_usnic_check_rts(opal_btl_usnic_endpoint_t *ep)
{
    if (ep->tx.on_rts_list) {
        return;
    }
    if (opal_btl_usnic_endpoint_can_send(ep)) {
        opal_list_append(&ep->eng->endpoints_with_sends, &ep->tx.rts_item);
        ep->tx.on_rts_list = true;
    } else if (OPAL_UNLIKELY(ep->eng->p.cc_enabled) && !ep->failed && !opal_list_is_empty(&ep->tx.queue)) {
        pace_wait(ep);
    }
}

void opal_btl_usnic_pace_release(opal_btl_usnic_engine_t *eng)
{
    eng->next_pace_event = UINT64_MAX;
    /* those not due yet go back to the end of the list: look at each once */
    for (size_t n = opal_list_get_size(&eng->endpoints_paced); n > 0; --n) {
        opal_list_item_t *item = opal_list_remove_first(&eng->endpoints_paced);
        opal_btl_usnic_endpoint_t *ep =
            (opal_btl_usnic_endpoint_t *) ((char *) item - offsetof(opal_btl_usnic_endpoint_t, tx.pace_item));
        ep->tx.on_pace_list = false;
        opal_btl_usnic_check_rts(ep); /* back on the ready list, or waits again */
    }
}

void opal_btl_usnic_rts_remove(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep)
{
    if (ep->tx.on_rts_list) {
        opal_list_remove_item(&eng->endpoints_with_sends, &ep->tx.rts_item);
        ep->tx.on_rts_list = false;
    }
}
