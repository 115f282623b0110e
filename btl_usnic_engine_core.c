/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The engine's lifecycle (btl_usnic_engine_core.h): its lists, its pool
 * of fragments and segments, its registration table.
 */
#include "opal_config.h"

#include <string.h>

#include "btl_usnic_auth.h"
#include "btl_usnic_engine_core.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_reg.h"

int opal_btl_usnic_engine_init(opal_btl_usnic_engine_t *eng, const opal_btl_usnic_engine_params_t *params,
                               const opal_btl_usnic_wire_ops_t *wire, const opal_btl_usnic_upcalls_t *up)
{
    memset(&eng->stats, 0, sizeof(eng->stats));
    eng->p = *params;
    if (OPAL_BTL_USNIC_PROTECT_FULL == eng->p.protect && !opal_btl_usnic_mac_gathers()) {
        eng->p.gather_send = false; /* the tag covers the payload: it must be in the segment */
    }
    eng->nonce_generation = 0;
    eng->wire = wire;
    eng->up = up;
    eng->tick = 0;
    eng->now = 0;
    eng->next_deadline = UINT64_MAX;
    eng->next_probe_event = UINT64_MAX;
    eng->next_pace_event = UINT64_MAX;
    eng->away_next = 0;
    eng->away_interval = 0;
    eng->rx_epoch = 0;
    eng->rx_epoch_start = 0;
    eng->rx_senders_now = 0;
    eng->rx_senders_prev = 0;
    eng->rx_buffers_held = 0;
    opal_btl_usnic_reg_table_init(&eng->regs, OPAL_BTL_USNIC_MAX_REGIONS);
    eng->max_frag_payload = params->mtu - sizeof(opal_btl_usnic_hdr_t);
    eng->max_chunk_payload = params->mtu - sizeof(opal_btl_usnic_chunk_hdr_t);
    eng->max_tiny_payload = params->tiny_mtu - sizeof(opal_btl_usnic_hdr_t);
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        eng->credits[c] = (int32_t) params->sd_credits[c];
    }
    OBJ_CONSTRUCT(&eng->resend_segs, opal_list_t);
    OBJ_CONSTRUCT(&eng->endpoints_with_sends, opal_list_t);
    OBJ_CONSTRUCT(&eng->endpoints_needing_ack, opal_list_t);
    OBJ_CONSTRUCT(&eng->pending_callbacks, opal_list_t);
    OBJ_CONSTRUCT(&eng->endpoints_in_flight, opal_list_t);
    OBJ_CONSTRUCT(&eng->endpoints_probing, opal_list_t);
    OBJ_CONSTRUCT(&eng->endpoints_paced, opal_list_t);
    OBJ_CONSTRUCT(&eng->released, opal_hash_table_t);
    opal_hash_table_init(&eng->released, 32);
    eng->nonces_spent = NULL;
    eng->constructed = true;
    eng->defer_callbacks = false;
    return opal_btl_usnic_frag_lists_init(&eng->pool, params->mem, params->prefix, params->mtu,
                                          params->sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL]);
}

void opal_btl_usnic_engine_fini(opal_btl_usnic_engine_t *eng)
{
    if (!eng->constructed) {
        return; /* a module whose setup failed before its engine: nothing was made */
    }
    eng->constructed = false;
    /* Items on these lists belong to free lists or endpoints: just unlink */
    while (NULL != opal_list_remove_first(&eng->resend_segs)) {
    }
    while (NULL != opal_list_remove_first(&eng->endpoints_with_sends)) {
    }
    while (NULL != opal_list_remove_first(&eng->endpoints_needing_ack)) {
    }
    while (NULL != opal_list_remove_first(&eng->pending_callbacks)) {
    }
    while (NULL != opal_list_remove_first(&eng->endpoints_in_flight)) {
    }
    OBJ_DESTRUCT(&eng->endpoints_in_flight);
    while (NULL != opal_list_remove_first(&eng->endpoints_probing)) {
    }
    OBJ_DESTRUCT(&eng->endpoints_probing);
    while (NULL != opal_list_remove_first(&eng->endpoints_paced)) {
    }
    OBJ_DESTRUCT(&eng->endpoints_paced);
    OBJ_DESTRUCT(&eng->released);
    eng->nonces_spent = NULL;
    opal_btl_usnic_reg_table_fini(&eng->regs);
    OBJ_DESTRUCT(&eng->pending_callbacks);
    OBJ_DESTRUCT(&eng->endpoints_needing_ack);
    OBJ_DESTRUCT(&eng->endpoints_with_sends);
    OBJ_DESTRUCT(&eng->resend_segs);
    opal_btl_usnic_frag_lists_fini(&eng->pool);
}
