/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * A module's peers: add_procs/del_procs, reading and checking the modex,
 * pairing our modules with the peer's, endpoint creation (window, keys,
 * the peer's address on the transport), the
 * connectivity precheck and map, and the goodbye at release.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/class/opal_bitmap.h"
#include "btl_usnic_compat.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_module_int.h"

/* A sender we have no endpoint for yet: on Open MPI 5.0 a process of a
 * spawned or connected job may send before ours ever sends to it (the PML
 * adds peers when it first sends), and its datagrams, retransmissions
 * too, would be dropped as unknown forever.  So such a sender is added
 * here, as add_procs would, if the runtime already holds its modex entry.
 * Asked without waiting (a forged sender id must not stall us, nor make
 * Open MPI create a process for a name nobody has), and at most once per
 * OPAL_BTL_USNIC_ON_DEMAND_USEC per module: a flood of forged ids costs one
 * runtime query per interval, a real peer's next retransmission gets in. */
#define OPAL_BTL_USNIC_ON_DEMAND_USEC 10000u

static opal_btl_usnic_endpoint_t *peer_on_demand(opal_btl_usnic_module_t *module, uint64_t sender)
{
    uint64_t now = opal_btl_usnic_clock_usec();
    if (sender == opal_btl_usnic_proc_id(&OPAL_PROC_MY_NAME) ||
        now - module->on_demand_last_usec < OPAL_BTL_USNIC_ON_DEMAND_USEC) {
        return NULL;
    }
    module->on_demand_last_usec = now;
    opal_process_name_t name = {.jobid = opal_btl_usnic_id_jobid(sender), .vpid = opal_btl_usnic_id_vpid(sender)};
    void *blob = NULL;
    size_t size = 0;
    if (OPAL_SUCCESS != opal_btl_usnic_modex_recv_immediate(opal_btl_usnic_globals.version, &name, &blob, &size)) {
        return NULL;
    }
    free(blob);
    opal_proc_t *proc = opal_proc_for_name(name);
    struct mca_btl_base_endpoint_t *ep = NULL;
    if (NULL == proc || OPAL_SUCCESS != opal_btl_usnic_add_procs(&module->super, 1, &proc, &ep, NULL)) {
        return NULL;
    }
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_peers_on_demand);
    opal_btl_usnic_verbose(5, "%s: peer %s added when its first datagram came", module->if_name,
                           opal_btl_usnic_id_str(sender).s);
    return ep;
}

opal_btl_usnic_endpoint_t *opal_btl_usnic_lookup_sender(opal_btl_usnic_engine_t *eng, uint64_t sender)
{
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    opal_btl_usnic_endpoint_t *ep = opal_btl_usnic_peer_of_id(module, sender);
    return OPAL_LIKELY(NULL != ep) ? ep : peer_on_demand(module, sender);
}

/* The peer's module that |module| talks to (index in |remote|), or -1:
 * both processes compute the same one-to-one pairing of their modules,
 * the lower rank's list first (opal_btl_usnic_pair_modules). */
static int match_remote(const opal_btl_usnic_module_t *module, const opal_proc_t *proc,
                        const opal_btl_usnic_modex_t *remote, size_t n)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    size_t nl = (size_t) c->num_modules;
    if (nl > OPAL_BTL_USNIC_MAX_MODULES_PAIRED || n > OPAL_BTL_USNIC_MAX_MODULES_PAIRED) {
        return -1;
    }
    opal_btl_usnic_modex_t local[OPAL_BTL_USNIC_MAX_MODULES_PAIRED];
    int mine = -1;
    for (size_t i = 0; i < nl; ++i) {
        local[i] = c->modules[i]->local_modex;
        if (c->modules[i] == module) {
            mine = (int) i;
        }
    }
    int map[OPAL_BTL_USNIC_MAX_MODULES_PAIRED];
    /* both ends must run the pairing the same way round: the lower name first */
    if (opal_btl_usnic_proc_id(&OPAL_PROC_MY_NAME) < opal_btl_usnic_proc_id(&proc->proc_name)) {
        opal_btl_usnic_pair_modules(local, nl, remote, n, map);
        return (mine >= 0) ? map[mine] : -1;
    }
    opal_btl_usnic_pair_modules(remote, n, local, nl, map);
    for (size_t j = 0; j < n; ++j) {
        if (mine >= 0 && map[j] == mine) {
            return (int) j;
        }
    }
    return -1;
}

static int ensure_peer_slot(opal_btl_usnic_module_t *module, uint32_t id)
{
    if (id < module->num_peer_slots) {
        return OPAL_SUCCESS;
    }
    size_t n = module->num_peer_slots ? module->num_peer_slots : 16;
    while (n <= id) {
        n *= 2;
    }
    opal_btl_usnic_endpoint_t **p = (opal_btl_usnic_endpoint_t **) realloc(module->peers, n * sizeof(*p));
    if (NULL == p) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    memset(p + module->num_peer_slots, 0, (n - module->num_peer_slots) * sizeof(*p));
    module->peers = p;
    module->num_peer_slots = n;
    return OPAL_SUCCESS;
}

/* Make |ep| the endpoint its sender id finds (opal_btl_usnic_peer_of_id) */
static int peer_register(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    if (opal_btl_usnic_id_jobid(ep->peer_id) != OPAL_PROC_MY_NAME.jobid) {
        return opal_hash_table_set_value_uint64(&module->other_job_peers, ep->peer_id, ep);
    }
    uint32_t vpid = opal_btl_usnic_id_vpid(ep->peer_id);
    int rc = ensure_peer_slot(module, vpid);
    if (OPAL_SUCCESS == rc) {
        module->peers[vpid] = ep;
    }
    return rc;
}

static void peer_unregister(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    if (opal_btl_usnic_peer_of_id(module, ep->peer_id) != ep) {
        return;
    }
    if (opal_btl_usnic_id_jobid(ep->peer_id) != OPAL_PROC_MY_NAME.jobid) {
        (void) opal_hash_table_remove_value_uint64(&module->other_job_peers, ep->peer_id);
    } else {
        module->peers[opal_btl_usnic_id_vpid(ep->peer_id)] = NULL;
    }
}

static uint32_t effective_window(const opal_btl_usnic_module_t *module, const opal_btl_usnic_modex_t *remote)
{
    uint32_t w = module->local_modex.window;
    return (remote->window < w) ? remote->window : w;
}

static const char *protection_name(int mode)
{
    static const char *const names[] = {"none", "header", "full"};
    return (mode >= 0 && mode <= OPAL_BTL_USNIC_PROTECT_FULL) ? names[mode] : "unknown";
}

/* The launcher's secret's key if |remote| holds the same one, else NULL.
 * A process with a secret says once that some pair lacks it (a spawned or
 * connected job's, whose launcher made another); one without said so at
 * start (btl_usnic_component.c). */
static const uint8_t *shared_job_key(const opal_btl_usnic_modex_t *remote)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (OPAL_BTL_USNIC_SECRET_GOOD != c->job_secret.kind) {
        return NULL;
    }
    if (0 == sodium_memcmp(remote->secret_id, c->job_secret.id, sizeof(c->job_secret.id))) {
        return c->job_secret.key;
    }
    if (!c->said_no_shared_secret) {
        c->said_no_shared_secret = true;
        opal_btl_usnic_verbose(5, "%s: pairs with processes of another job (or without the launcher's secret) "
                                  "keyed by X25519 alone (README.txt, Security)",
                               opal_process_info.nodename);
    }
    return NULL;
}

/* The keys of both directions with |remote| (btl_usnic_auth.c).  The
 * test build OPAL_BTL_USNIC_TEST_MODEX_KEYS derives them from the modex
 * alone, as protocol 8 did: the attack suite's control, which shows that
 * a reader of PMIx could then forge. */
static int pair_keys(opal_btl_usnic_module_t *module, const opal_btl_usnic_modex_t *remote,
                     uint8_t tx_key[OPAL_BTL_USNIC_KEY_BYTES], uint8_t rx_key[OPAL_BTL_USNIC_KEY_BYTES])
{
#if defined(OPAL_BTL_USNIC_TEST_MODEX_KEYS) && OPAL_BTL_USNIC_TEST_MODEX_KEYS
    (void) shared_job_key; /* unused here: -Werror would stop the test build */
    opal_btl_usnic_derive_key(remote->dh_public, module->node_id, tx_key);
    opal_btl_usnic_derive_key(module->dh_public, remote->node_id, rx_key);
    return 0;
#else
    opal_btl_usnic_pair_end_t me = {.id = module->node_id, .public_key = module->dh_public};
    opal_btl_usnic_pair_end_t peer = {.id = remote->node_id, .public_key = remote->dh_public};
    return opal_btl_usnic_pair_keys(module->dh_secret, me, peer, shared_job_key(remote), tx_key, rx_key);
#endif
}

/* Both ends must protect the same way, with an algorithm both can run,
 * and |remote|'s public key must be one that makes a secret */
static int endpoint_keys(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                         const opal_btl_usnic_modex_t *remote)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    unsigned alg = opal_btl_usnic_mac_pick(c->mac_algs, remote->mac_algs);
    if (remote->protection != c->protection || (OPAL_BTL_USNIC_PROTECT_NONE != c->protection && 0 == alg)) {
        opal_btl_usnic_show_help(false, "protection mismatch", opal_process_info.nodename, module->if_name,
                                 protection_name(c->protection), c->mac_algs,
                                 opal_get_proc_hostname(ep->proc), remote->if_name,
                                 protection_name(remote->protection), (unsigned) remote->mac_algs);
        return OPAL_ERR_UNREACH;
    }
    uint8_t tx_key[OPAL_BTL_USNIC_KEY_BYTES], rx_key[OPAL_BTL_USNIC_KEY_BYTES];
    if (0 != pair_keys(module, remote, tx_key, rx_key)) {
        opal_btl_usnic_show_help(false, "bad peer key", opal_process_info.nodename, module->if_name,
                                 opal_get_proc_hostname(ep->proc), remote->if_name);
        return OPAL_ERR_UNREACH;
    }
    opal_btl_usnic_endpoint_set_keys(ep, alg, tx_key, rx_key);
    sodium_memzero(tx_key, sizeof(tx_key));
    sodium_memzero(rx_key, sizeof(rx_key));
    return OPAL_SUCCESS;
}

static int endpoint_create(opal_btl_usnic_module_t *module, opal_proc_t *proc, const opal_btl_usnic_modex_t *remote,
                           opal_btl_usnic_endpoint_t **ep_p)
{
    opal_btl_usnic_endpoint_t *ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
    if (NULL == ep) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ep->proc = proc;
    ep->peer_id = opal_btl_usnic_proc_id(&proc->proc_name);
    bool added = false;
    uint32_t window = effective_window(module, remote);
    uint32_t ours = module->local_modex.isn, theirs = remote->isn;
    int rc = opal_btl_usnic_endpoint_init_rel(ep, &module->eng, window, opal_btl_usnic_pair_isn(ours, theirs),
                                              opal_btl_usnic_pair_isn(theirs, ours));
    if (OPAL_SUCCESS == rc) {
        rc = endpoint_keys(module, ep, remote);
    }
    if (OPAL_SUCCESS == rc) {
        opal_btl_usnic_endpoint_limit_mtu(ep, remote->mtu, remote->tiny_mtu);
        opal_btl_usnic_charge_t charge;
        memcpy(&charge, &remote->rx_charge, sizeof(charge)); /* the modex is packed */
        opal_btl_usnic_endpoint_set_peer_rx(ep, &charge, remote->rx_capacity);
        rc = module->transport->add_peer(module, ep, remote);
        added = (OPAL_SUCCESS == rc);
    }
    if (OPAL_SUCCESS == rc) {
        rc = peer_register(module, ep);
    }
    if (OPAL_SUCCESS != rc) {
        if (added) {
            module->transport->del_peer(module, ep);
        }
        OBJ_RELEASE(ep);
        return rc;
    }
    opal_list_append(&module->all_endpoints, &ep->super);
    *ep_p = ep;
    return OPAL_SUCCESS;
}

/* Read and sanity-check a peer's modex.  Returns the entries or NULL (unreachable). */
static opal_btl_usnic_modex_t *modex_recv(opal_btl_usnic_module_t *module, opal_proc_t *proc, size_t *n_p)
{
    opal_btl_usnic_modex_t *remote = NULL;
    size_t size = 0;
    int rc;
    OPAL_MODEX_RECV(rc, opal_btl_usnic_globals.version, &proc->proc_name, (void **) &remote, &size);
    if (OPAL_SUCCESS != rc || NULL == remote) {
        return NULL; /* no usnic modules on that peer: not an error */
    }
    if (0 == size || 0 != size % sizeof(*remote) || OPAL_BTL_USNIC_PROTO_VERSION != remote->proto_version) {
        opal_btl_usnic_show_help(false, "modex mismatch", opal_process_info.nodename,
                       opal_get_proc_hostname(proc), OPAL_BTL_USNIC_PROTO_VERSION,
                       (size >= sizeof(*remote)) ? remote->proto_version : 0);
        free(remote);
        return NULL;
    }
    *n_p = size / sizeof(*remote);
    (void) module;
    return remote;
}

/* btl_usnic_connectivity_map: one line per peer reached through |module| */
static void connectivity_map_note(const opal_btl_usnic_module_t *module, const opal_proc_t *proc,
                                  const opal_btl_usnic_modex_t *remote)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (NULL == c->connectivity_map || '\0' == c->connectivity_map[0]) {
        return;
    }
    if (NULL == c->map_file) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s-%s-%d.txt", c->connectivity_map, opal_process_info.nodename, (int) getpid());
        /* a new file only: never through a symlink someone planted, never
         * over a file that exists (another user could have made it) */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        c->map_file = (fd >= 0) ? fdopen(fd, "w") : NULL;
        if (NULL == c->map_file) {
            if (fd >= 0) {
                close(fd);
            }
            opal_btl_usnic_verbose(1, "cannot write the connectivity map %s: %s", path, strerror(errno));
            c->connectivity_map[0] = '\0'; /* tried once */
            return;
        }
        fprintf(c->map_file, "# rank %u on %s: local interface -> peer rank, host, address, ports, MTU\n",
                (unsigned) OPAL_PROC_MY_NAME.vpid, opal_process_info.nodename);
    }
    char local[INET_ADDRSTRLEN], peer[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = module->ipv4}, b = {.s_addr = remote->ipv4};
    inet_ntop(AF_INET, &a, local, sizeof(local));
    inet_ntop(AF_INET, &b, peer, sizeof(peer));
    fprintf(c->map_file, "%s %s -> rank %s %s %s ports %u,%u mtu %u wire %s\n", module->if_name, local,
            opal_btl_usnic_id_str(opal_btl_usnic_proc_id(&proc->proc_name)).s,
            opal_get_proc_hostname(proc), peer,
            (unsigned) remote->ports[0], (unsigned) remote->ports[1], (unsigned) remote->mtu,
            OPAL_BTL_USNIC_WIRE_SOCKET == remote->wire ? "socket" : "ofi");
    fflush(c->map_file);
}

/* What add_procs learns of one peer from the modex */
typedef struct {
    opal_btl_usnic_modex_t *remote; /* all the peer's modules; NULL: none, or not needed */
    size_t n;
    int idx;                        /* the one |module| pairs with; -1: none or known already */
} peer_modex_t;

static bool same_job(const opal_proc_t *proc)
{
    return proc->proc_name.jobid == OPAL_PROC_MY_NAME.jobid;
}

static opal_btl_usnic_endpoint_t *known_peer(opal_btl_usnic_module_t *module, const opal_proc_t *proc)
{
    return opal_btl_usnic_peer_of_id(module, opal_btl_usnic_proc_id(&proc->proc_name));
}

/* The modex of every peer we need: new ones, and with the connectivity
 * checker all of our job's (it learns where the agents are).  Peers of
 * other jobs (spawned, connected, joined) are read the same way: Open MPI
 * has their modex once the connection is made. */
static void peer_modex_fetch(opal_btl_usnic_module_t *module, size_t nprocs, struct opal_proc_t **procs,
                             peer_modex_t *pm)
{
    opal_proc_t *self = opal_proc_local_get();
    for (size_t i = 0; i < nprocs; ++i) {
        opal_proc_t *proc = procs[i];
        pm[i].remote = NULL;
        pm[i].n = 0;
        pm[i].idx = -1;
        if (proc == self) {
            continue; /* btl/self */
        }
        bool known = NULL != known_peer(module, proc);
        if (known && !(opal_btl_usnic_cclient_enabled() && same_job(proc))) {
            continue;
        }
        pm[i].remote = modex_recv(module, proc, &pm[i].n);
        if (NULL != pm[i].remote && !known) {
            pm[i].idx = match_remote(module, proc, pm[i].remote, pm[i].n);
        }
    }
}

static void peer_modex_free(peer_modex_t *pm, size_t nprocs)
{
    for (size_t i = 0; i < nprocs; ++i) {
        free(pm[i].remote);
    }
    free(pm);
}

static void note_other_job_check(opal_btl_usnic_module_t *module, const opal_proc_t *proc, const peer_modex_t *pm)
{
    if (pm->idx < 0) {
        return;
    }
    bool covered = opal_btl_usnic_cclient_checked(module, &pm->remote[pm->idx]);
    opal_btl_usnic_verbose(5, "%s: peer %s (another job) on %s: %s", module->if_name,
                           opal_btl_usnic_id_str(opal_btl_usnic_proc_id(&proc->proc_name)).s,
                           opal_get_proc_hostname(proc),
                           covered ? "its host's address was checked by this job" : "connectivity not checked");
}

/* btl_usnic_connectivity_check: probe every new peer interface of this
 * module at once, before any endpoint exists (verdicts used below) */
static int connectivity_precheck(opal_btl_usnic_module_t *module, size_t nprocs, struct opal_proc_t **procs,
                                 const peer_modex_t *pm)
{
    for (size_t i = 0; i < nprocs; ++i) {
        if (NULL == pm[i].remote) {
            continue;
        }
        if (!same_job(procs[i])) {
            /* Agents serve their own job only: a peer of another job is
             * covered by the verdict on its host's address if our job
             * checked that host, and goes unchecked otherwise. */
            note_other_job_check(module, procs[i], &pm[i]);
            continue;
        }
        opal_btl_usnic_cclient_note_agents(pm[i].remote, pm[i].n, procs[i]->proc_name.vpid);
        if (pm[i].idx >= 0) {
            opal_btl_usnic_cclient_add(module, procs[i], &pm[i].remote[pm[i].idx]);
        }
    }
    return opal_btl_usnic_cclient_run(module);
}

/* A new peer: its endpoint on |module|, unless no module of the peer
 * pairs with it or the pair failed its connectivity check. */
static int peer_add(opal_btl_usnic_module_t *module, opal_proc_t *proc, const peer_modex_t *pm,
                    opal_btl_usnic_endpoint_t **ep_p)
{
    int idx = pm->idx;
    if (idx >= 0 && opal_btl_usnic_cclient_enabled() && !opal_btl_usnic_cclient_usable(module, &pm->remote[idx])) {
        idx = -1; /* policy unreachable */
    }
    if (idx < 0) {
        return OPAL_ERR_UNREACH;
    }
    int rc = endpoint_create(module, proc, &pm->remote[idx], ep_p);
    if (OPAL_SUCCESS == rc) {
        connectivity_map_note(module, proc, &pm->remote[idx]);
        opal_btl_usnic_verbose(10, "%s: peer %s reachable", module->if_name, opal_btl_usnic_id_str((*ep_p)->peer_id).s);
    }
    return rc;
}

int opal_btl_usnic_add_procs(struct mca_btl_base_module_t *btl, size_t nprocs, struct opal_proc_t **procs,
                             struct mca_btl_base_endpoint_t **endpoints, struct opal_bitmap_t *reachable)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    peer_modex_t *pm = (peer_modex_t *) calloc(nprocs ? nprocs : 1, sizeof(*pm));
    if (NULL == pm) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    OPAL_BTL_USNIC_LOCK();
    peer_modex_fetch(module, nprocs, procs, pm);
    int rc = OPAL_SUCCESS;
    if (opal_btl_usnic_cclient_enabled() && OPAL_SUCCESS != connectivity_precheck(module, nprocs, procs, pm)) {
        rc = OPAL_ERR_UNREACH; /* policy abort, and the job is going down */
    }
    for (size_t i = 0; i < nprocs && OPAL_SUCCESS == rc; ++i) {
        opal_proc_t *proc = procs[i];
        if (proc == opal_proc_local_get()) {
            continue;
        }
        opal_btl_usnic_endpoint_t *known = known_peer(module, proc);
        if (NULL != known) {
            endpoints[i] = known;
        } else {
            opal_btl_usnic_endpoint_t *ep = NULL;
            int add_rc = peer_add(module, proc, &pm[i], &ep);
            if (OPAL_ERR_OUT_OF_RESOURCE == add_rc) {
                rc = add_rc;
            }
            if (OPAL_SUCCESS != add_rc) {
                continue;
            }
            endpoints[i] = ep;
        }
        if (NULL != reachable) {
            opal_bitmap_set_bit(reachable, (int) i);
        }
    }
    OPAL_BTL_USNIC_UNLOCK();
    peer_modex_free(pm, nprocs);
    return rc;
}

/* Open MPI releases peers only when we finalize: tell each one we leave,
 * with our last ACK, so that a peer that lives on (a parent whose spawned
 * children exit, the other side of a connect/accept) does not wait for
 * ACKs we will never send and declare us dead.  Three copies: one lost
 * goodbye must not cost the peer its btl_usnic_peer_timeout. */
static void say_goodbye(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    for (int copy = 0; copy < 3 && !ep->failed; ++copy) {
        if (OPAL_ERR_TEMP_OUT_OF_RESOURCE == opal_btl_usnic_bye_send(&module->eng, ep)) {
            module->transport->drain(module); /* reap posted sends for credits, then once more */
            (void) opal_btl_usnic_bye_send(&module->eng, ep);
        }
    }
}

static void endpoint_release(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    (void) opal_btl_usnic_parting_resend(&module->eng, ep);
    say_goodbye(module, ep);
    opal_btl_usnic_endpoint_flush(ep, OPAL_ERR_UNREACH);
    peer_unregister(module, ep);
    module->transport->del_peer(module, ep);
    opal_list_remove_item(&module->all_endpoints, &ep->super);
    OBJ_RELEASE(ep);
}

int opal_btl_usnic_del_procs(struct mca_btl_base_module_t *btl, size_t nprocs, struct opal_proc_t **procs,
                             struct mca_btl_base_endpoint_t **peers)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    OPAL_BTL_USNIC_LOCK();
    for (size_t i = 0; i < nprocs; ++i) {
        opal_btl_usnic_endpoint_t *ep = (NULL != peers) ? peers[i] : NULL;
        if (NULL == ep) {
            ep = known_peer(module, procs[i]);
        }
        if (NULL != ep && ep->eng == &module->eng) {
            endpoint_release(module, ep);
        }
    }
    OPAL_BTL_USNIC_UNLOCK();
    return OPAL_SUCCESS;
}

void opal_btl_usnic_peers_release_all(opal_btl_usnic_module_t *module)
{
    opal_list_item_t *item;
    while (NULL != (item = opal_list_get_first(&module->all_endpoints)) &&
           item != opal_list_get_end(&module->all_endpoints)) {
        endpoint_release(module, (opal_btl_usnic_endpoint_t *) item);
    }
}
