/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * What the files of a module share among themselves and nobody else:
 *
 *   btl_usnic_module.c   setup (sizes, secrets, engine, modex), the engine's
 *                        wire (post, timers, flush) and upcalls (deliver,
 *                        send done, PUT done, peer failed)
 *   btl_usnic_btl.c      the BTL entry points and the module template
 *   btl_usnic_peers.c    add_procs/del_procs, modex, pairing, endpoints
 *   btl_usnic_wire_ofi.c, btl_usnic_inject.c: transports (btl_usnic_wire.h)
 */
#ifndef OPAL_BTL_USNIC_MODULE_INT_H
#define OPAL_BTL_USNIC_MODULE_INT_H

#include "btl_usnic.h"

BEGIN_C_DECLS

/* The endpoint of sender id |id| (a process name), NULL if none: peers
 * of our own job by vpid in an array, those of other jobs in a table.
 * Inline: the receive path asks once per datagram. */
static inline opal_btl_usnic_endpoint_t *opal_btl_usnic_peer_of_id(opal_btl_usnic_module_t *module, uint64_t id)
{
    if (opal_btl_usnic_id_jobid(id) == OPAL_PROC_MY_NAME.jobid) {
        uint32_t vpid = opal_btl_usnic_id_vpid(id);
        return (vpid < module->num_peer_slots) ? module->peers[vpid] : NULL;
    }
    void *ep = NULL;
    if (OPAL_SUCCESS != opal_hash_table_get_value_uint64(&module->other_job_peers, id, &ep)) {
        return NULL;
    }
    return (opal_btl_usnic_endpoint_t *) ep;
}

/* btl_usnic_peers.c */

/* The first sequence number of the stream from the module whose modex ISN
 * is |from| to the one whose ISN is |to|.  The module ISN alone would start
 * all of a sender's streams together, and a datagram of one pair replayed
 * to another receiver of the same sender could land in its window (with
 * protection none nothing else stops it); offset by a scramble of the
 * receiver's random ISN, each pair starts apart.  Both ends compute it from
 * the modex alone. */
static inline uint32_t opal_btl_usnic_pair_isn(uint32_t from, uint32_t to)
{
    uint32_t m = to * 0x9e3779b1u; /* odd: a bijection, as is the shift-xor */
    m ^= m >> 15;
    return from + m;
}

/* opal_btl_usnic_peer_of_id as the engine's lookup function */
opal_btl_usnic_endpoint_t *opal_btl_usnic_lookup_sender(opal_btl_usnic_engine_t *eng, uint64_t sender);
int opal_btl_usnic_add_procs(struct mca_btl_base_module_t *btl, size_t nprocs, struct opal_proc_t **procs,
                             struct mca_btl_base_endpoint_t **endpoints, struct opal_bitmap_t *reachable);
int opal_btl_usnic_del_procs(struct mca_btl_base_module_t *btl, size_t nprocs, struct opal_proc_t **procs,
                             struct mca_btl_base_endpoint_t **peers);
/* Finalize: say goodbye to every peer and release its endpoint */
void opal_btl_usnic_peers_release_all(opal_btl_usnic_module_t *module);

END_C_DECLS

#endif /* OPAL_BTL_USNIC_MODULE_INT_H */
