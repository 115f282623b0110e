/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Per-interface modules: setup (the transport, the engine, secrets, the
 * modex entry), the progress passes, and the two tables the engine is
 * bound to: its wire below (the transport's own engine table) and its
 * upcalls above (the sender lookup; fragments, send and PUT completions to
 * the PML's callbacks, failed peers to the PML's error callback).  The BTL
 * entry points are in btl_usnic_btl.c, peers in btl_usnic_peers.c,
 * libfabric in btl_usnic_wire_ofi.c.
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_compat.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_module_int.h"
#include "btl_usnic_pml.h"

/* ===================== the engine's upcalls: the PML above ===================== */

static void up_deliver(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data,
                       size_t len)
{
    (void) opal_btl_usnic_pml_deliver(eng, &opal_btl_usnic_module_of(eng)->super, ep, tag, data, len);
}

static void up_send_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status)
{
    frag->base.des_cbfunc(&opal_btl_usnic_module_of(eng)->super, frag->ep, &frag->base, status);
}

static void up_put_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status)
{
    frag->put.cbfunc(&opal_btl_usnic_module_of(eng)->super, frag->ep, frag->segments[0].seg_addr.pval,
                     frag->put.local_handle, frag->put.cbcontext, frag->put.cbdata, status);
}

static void up_path_changed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t old, size_t now,
                            const char *why)
{
    if (opal_btl_usnic_globals.verbose < 2) {
        return; /* Open MPI 5 looks the host name up anew, and never frees it */
    }
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    const char *peer_host = NULL != ep->proc ? opal_get_proc_hostname(ep->proc) : "unknown";
    opal_btl_usnic_verbose(2, "%s: path to peer %s on %s: datagrams %s from %zu to %zu bytes: %s", module->if_name,
                           opal_btl_usnic_id_str(ep->peer_id).s, peer_host, now < old ? "lowered" : "raised", old,
                           now, why);
}

static void up_peer_failed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, int rc)
{
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    if (ep->failed) {
        return;
    }
    ep->failed = true;
    const char *peer_host = NULL != ep->proc ? opal_get_proc_hostname(ep->proc) : "unknown";
    if (ep->tx.nonces_spent) {
        char sent[24];
        snprintf(sent, sizeof(sent), "%llu", (unsigned long long) (ep->tx.nonce & OPAL_BTL_USNIC_NONCE_COUNT_MASK));
        opal_btl_usnic_show_help(false, "nonces used up", opal_process_info.nodename, module->if_name, peer_host,
                                 opal_btl_usnic_id_str(ep->peer_id).s, sent);
    } else if (OPAL_ERR_TIMEOUT == rc) {
        char heard[64];
        opal_btl_usnic_describe_last_heard(eng, ep, heard, sizeof(heard));
        opal_btl_usnic_show_help(false, "peer timeout", opal_process_info.nodename, module->if_name, peer_host,
                                 opal_btl_usnic_id_str(ep->peer_id).s, opal_btl_usnic_globals.peer_timeout,
                                 opal_btl_usnic_endpoint_in_flight(ep), heard);
    } else {
        opal_btl_usnic_show_help(false, "peer unreachable", opal_process_info.nodename, module->if_name, peer_host,
                                 opal_btl_usnic_id_str(ep->peer_id).s, opal_strerror(rc));
    }
    opal_btl_usnic_endpoint_flush(ep, OPAL_ERR_UNREACH);
    if (NULL != module->pml_error_cb) {
        module->pml_error_cb(&module->super, MCA_BTL_ERROR_FLAGS_NONFATAL, ep->proc, NULL);
    }
}

static const opal_btl_usnic_upcalls_t engine_upcalls = {
    .lookup = opal_btl_usnic_lookup_sender,
    .deliver = up_deliver,
    .send_done = up_send_done,
    .put_done = up_put_done,
    .peer_failed = up_peer_failed,
    .path_changed = up_path_changed,
};

/* ===================== progress ===================== */

bool opal_btl_usnic_module_progress_fast(opal_btl_usnic_module_t *module, uint64_t now)
{
    opal_btl_usnic_engine_set_time(&module->eng, now);
    return module->transport->progress_fast(module);
}

int opal_btl_usnic_module_progress(opal_btl_usnic_module_t *module, uint64_t now)
{
    opal_btl_usnic_engine_set_time(&module->eng, now);
    int count = module->transport->progress(module);
    count += opal_btl_usnic_engine_progress(&module->eng);
    return count;
}

/* ===================== module setup ===================== */

/* Largest default window: every segment of the window costs each peer's
 * endpoint a reassembly slot, a timer room and bitmap entries (about
 * 100 bytes); 1024 small messages in flight let a sender run a scheduler
 * time slice ahead of a receiver that is descheduled on a busy host */
#define OPAL_BTL_USNIC_DEFAULT_WINDOW_MAX 1024u

/* Window default: the sequence numbers for half of what the receive side
 * holds of the smallest datagrams (the grants, counted in charge, keep
 * what is in flight inside the capacity whatever the sizes).  A power of
 * two (see opal_btl_usnic_endpoint_init_rel), at least 16, at most
 * OPAL_BTL_USNIC_DEFAULT_WINDOW_MAX. */
static uint32_t default_window(const opal_btl_usnic_module_t *module)
{
    uint64_t smallest = opal_btl_usnic_charge_of(&module->caps.rx_charge, 0);
    uint64_t datagrams = module->caps.rx_capacity / (smallest > 0 ? smallest : 1);
    uint32_t w = 16;
    while (w < OPAL_BTL_USNIC_DEFAULT_WINDOW_MAX && (uint64_t) (2 * w) <= datagrams / 2) {
        w *= 2;
    }
    opal_btl_usnic_verbose(10, "%s: default window %u", module->if_name, w);
    return w;
}

/* The module's secrets and first sequence number, from the kernel: a
 * sequence number nobody can predict is a second fence (behind the tag)
 * against injected data, and stray datagrams of an earlier job on the
 * same ports fall outside the window */
static int module_secrets(opal_btl_usnic_module_t *module, uint32_t *isn_p)
{
    if (0 != opal_btl_usnic_dh_keypair(module->dh_secret, module->dh_public) ||
        0 != opal_btl_usnic_random(module->node_id, sizeof(module->node_id)) ||
        0 != opal_btl_usnic_random(isn_p, sizeof(*isn_p))) {
        opal_btl_usnic_show_help(false, "no randomness", opal_process_info.nodename, module->if_name,
                                 strerror(errno));
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

static int engine_setup(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    module->mem_ops = (opal_btl_usnic_mem_ops_t){
        .reg = module->transport->mem_reg, .unreg = module->transport->mem_unreg, .ctx = module};
    opal_btl_usnic_engine_params_t p = {
        .protect = c->protection,
        .my_name = opal_btl_usnic_proc_id(&OPAL_PROC_MY_NAME),
        .prefix = module->caps.prefix,
        .check_source = module->caps.reports_source,
        .mtu = module->caps.max_datagram[OPAL_BTL_USNIC_DATA_CHANNEL],
        .tiny_mtu = module->caps.max_datagram[OPAL_BTL_USNIC_PRIORITY_CHANNEL],
        .ack_iteration_delay = (uint32_t) c->ack_iteration_delay,
        .ack_delay = (uint64_t) c->ack_delay,
        .max_resends_per_iteration = (uint32_t) c->max_resends_per_iteration,
        .max_send_size = module->super.btl_max_send_size > module->super.btl_eager_limit
                             ? module->super.btl_max_send_size
                             : module->super.btl_eager_limit,
        .rto_initial = (uint64_t) c->retrans_timeout,
        .rto_min = (uint64_t) c->rto_min,
        .rto_floor_start = (uint64_t) c->retrans_timeout,
        .rto_max = (uint64_t) c->rto_max,
        .peer_timeout = (uint64_t) c->peer_timeout * 1000000u,
        .tail_probes = (uint32_t) c->tail_probes,
        .cc_enabled = c->congestion_control,
        .cc_target = (uint64_t) c->cc_target,
        .rx_capacity = module->caps.rx_capacity,
        .rx_charge = module->caps.rx_charge,
        .gather_send = module->caps.gathers,
        .mem = module->caps.needs_mr ? &module->mem_ops : NULL,
        .batch_segs = module->caps.max_batch,
        .pmtu_discovery = c->pmtu_discovery,
        .pmtu_base = (size_t) c->pmtu_base,
        .pmtu_reprobe = (uint64_t) c->pmtu_reprobe * 1000u,
    };
    p.sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = module->caps.send_credits[OPAL_BTL_USNIC_DATA_CHANNEL];
    p.sd_credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = module->caps.send_credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    return opal_btl_usnic_engine_init(&module->eng, &p, &module->transport->engine, &engine_upcalls);
}

static void modex_fill(opal_btl_usnic_module_t *module, uint32_t isn)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    opal_btl_usnic_modex_t *m = &module->local_modex;
    memset(m, 0, sizeof(*m));
    m->proto_version = OPAL_BTL_USNIC_PROTO_VERSION;
    m->ipv4 = module->ipv4;
    m->netmask = module->netmask;
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        m->ports[c] = module->caps.port[c];
    }
    m->mtu = (uint32_t) module->caps.max_datagram[OPAL_BTL_USNIC_DATA_CHANNEL];
    m->tiny_mtu = (uint32_t) module->caps.max_datagram[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    m->isn = isn;
    m->window = (opal_btl_usnic_globals.window > 0) ? (uint32_t) opal_btl_usnic_globals.window
                                                     : default_window(module);
    m->link_speed_mbps = module->link_speed_mbps;
    m->rx_capacity = module->caps.rx_capacity;
    m->rx_charge = module->caps.rx_charge;
    snprintf(m->provider, sizeof(m->provider), "%s", module->provider);
    m->protection = (uint8_t) c->protection;
    m->mac_algs = (uint8_t) c->mac_algs;
    memcpy(m->dh_public, module->dh_public, sizeof(m->dh_public));
    memcpy(m->node_id, module->node_id, sizeof(m->node_id));
    if (OPAL_BTL_USNIC_SECRET_GOOD == c->job_secret.kind) {
        memcpy(m->secret_id, c->job_secret.id, sizeof(m->secret_id)); /* the agents' key comes from it */
    } else {
        memcpy(m->agent_key, c->agent_key, sizeof(m->agent_key));
    }
    m->wire = (uint8_t) module->wire_kind;
    m->wire_flags = module->wire_flags;
}

int opal_btl_usnic_module_init(opal_btl_usnic_module_t *module, const opal_btl_usnic_transport_t *wire,
                               const opal_btl_usnic_device_t *dev)
{
    int rc;
    OBJ_CONSTRUCT(&module->all_endpoints, opal_list_t);
    OBJ_CONSTRUCT(&module->other_job_peers, opal_hash_table_t);
    if (OPAL_SUCCESS != opal_hash_table_init(&module->other_job_peers, 32)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    module->transport = wire;
    module->wire_kind = wire->kind; /* the injector's wrapping keeps it */
    if (OPAL_SUCCESS != (rc = module->transport->open(module, dev))) {
        return rc;
    }
    opal_btl_usnic_verbose(5, "%s: %s wire", module->if_name, module->transport->name);
    /* before the engine binds the transport's table */
    if (opal_btl_usnic_inject_wanted() && OPAL_SUCCESS != (rc = opal_btl_usnic_inject_wrap(module, module->transport))) {
        return rc;
    }
    /* Largest fragment: the module template's values as the user set them */
    if (OPAL_SUCCESS != (rc = engine_setup(module))) {
        return rc;
    }
    module->super.btl_bandwidth = (opal_btl_usnic_globals.bandwidth > 0)
                                      ? (uint32_t) opal_btl_usnic_globals.bandwidth
                                      : module->link_speed_mbps;
    uint32_t isn;
    if (OPAL_SUCCESS != (rc = module_secrets(module, &isn))) {
        return rc;
    }
    modex_fill(module, isn);
    return OPAL_SUCCESS;
}
