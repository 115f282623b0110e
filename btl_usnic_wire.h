/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The transport under a module: what moves datagrams between two
 * processes' channels.  One table of functions per wire, chosen once when
 * the module is set up (UCX's uct_ud_iface_ops_t is the model):
 *
 *   btl_usnic_wire_ofi.c   libfabric FI_EP_DGRAM endpoints (usnic, udp, ...)
 *   btl_usnic_wire_sock.c  kernel UDP sockets: segmentation offload (GSO)
 *                          on send, coalesced receives (GRO), datagrams as
 *                          large as the interface MTU
 *   btl_usnic_inject.c     test-only fault injection, wrapped around any wire
 *
 * Both real wires put the same bytes on the network (a UDP datagram is
 * our header and payload), so two processes may run different wires
 * toward each other; what a pair must agree on is the datagram size, the
 * smaller of the two published in the modex.
 *
 * Everything that names a libfabric call, queue or address lives behind
 * this table; the BTL entry points, peer management and module setup
 * above it see only the devices a wire offers (btl_usnic_device.h) and
 * the capabilities it fills at open.  Each wire finds its own devices:
 * the socket wire never loads libfabric.
 *
 * The engine's downward table (opal_btl_usnic_wire_ops_t,
 * btl_usnic_engine_core.h) is part of this one (transport->engine): the
 * engine calls the wire's post and flush with no layer between.
 */
#ifndef OPAL_BTL_USNIC_WIRE_H
#define OPAL_BTL_USNIC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "btl_usnic_device.h"
#include "btl_usnic_engine.h"

struct opal_btl_usnic_module_t;

/* btl_usnic_wire: which transport a module runs (and the modex says which) */
typedef enum {
    OPAL_BTL_USNIC_WIRE_AUTO = 0,   /* the socket wire on kernel interfaces (provider udp), else ofi */
    OPAL_BTL_USNIC_WIRE_OFI = 1,    /* libfabric */
    OPAL_BTL_USNIC_WIRE_SOCKET = 2, /* kernel UDP sockets with GSO/GRO */
} opal_btl_usnic_wire_kind_t;

/**
 * Which wire serves the devices of libfabric provider name |provider|
 * when btl_usnic_wire is |param|: OPAL_BTL_USNIC_WIRE_SOCKET or _OFI, or
 * OPAL_BTL_USNIC_WIRE_AUTO for "the socket wire if a socket can be had on
 * one of the devices it finds, else ofi".  socket and ofi as asked; auto
 * serves udp with the socket wire where a socket can be had (libfabric's
 * udp is kernel sockets itself: nothing is lost, the socket wire sends
 * large datagrams and batches, and libfabric is never loaded), every
 * other provider (usnic hardware) with the ofi wire.  Pure.
 */
static inline int opal_btl_usnic_wire_choose(int param, const char *provider)
{
    if (OPAL_BTL_USNIC_WIRE_SOCKET == param) {
        return OPAL_BTL_USNIC_WIRE_SOCKET;
    }
    if (OPAL_BTL_USNIC_WIRE_AUTO == param && 0 == strcmp(provider, "udp")) {
        return OPAL_BTL_USNIC_WIRE_AUTO;
    }
    return OPAL_BTL_USNIC_WIRE_OFI;
}

/**
 * Does libfabric's provider filter |fi_provider| (the FI_PROVIDER
 * environment variable: "a,b" keeps only those, "^a,b" drops those; NULL
 * or empty keeps all) hide provider |provider|?  Pure.
 */
static inline bool opal_btl_usnic_fi_provider_hides(const char *fi_provider, const char *provider)
{
    if (NULL == fi_provider || '\0' == fi_provider[0]) {
        return false;
    }
    bool drop = '^' == fi_provider[0];
    const char *p = fi_provider + (drop ? 1 : 0);
    size_t plen = strlen(provider);
    bool listed = false;
    while ('\0' != *p && !listed) {
        size_t n = strcspn(p, ",");
        listed = n == plen && 0 == strncmp(p, provider, n);
        p += n + (',' == p[n] ? 1 : 0);
    }
    return drop ? listed : !listed;
}

struct opal_btl_usnic_modex_t;

/* What a wire can do, filled by its open; read-only afterwards */
typedef struct opal_btl_usnic_transport_caps_t {
    size_t max_datagram[OPAL_BTL_USNIC_NUM_CHANNELS]; /* our header + payload per channel (the modex's mtu,
                                                         tiny_mtu) */
    size_t prefix;             /* bytes the wire needs in front of each header (FI_MSG_PREFIX), sent and received */
    bool needs_mr;             /* every posted buffer must be registered (mem_reg): FI_MR_LOCAL */
    bool gathers;              /* sends a header and a payload from elsewhere as one datagram */
    bool reports_source;       /* receives say where they came from, and the protection wants it checked */
    size_t inject_size;        /* datagrams (with prefix) up to this size complete inside post */
    uint64_t rx_capacity;      /* charge (bytes, btl_usnic_charge.h) the receive side holds between two
                                  progress passes: the smaller channel's, since a peer's datagrams
                                  may land on either */
    opal_btl_usnic_charge_t rx_charge; /* what one received datagram costs of it, by size */
    uint32_t send_credits[OPAL_BTL_USNIC_NUM_CHANNELS]; /* posts a channel takes before completions return */
    uint16_t port[OPAL_BTL_USNIC_NUM_CHANNELS];         /* where peers reach each channel (host order;
                                                           published in the modex) */
    uint32_t max_batch;        /* data segments to one peer the wire sends as one batch (1: none;
                                  the engine's batch_segs) */
} opal_btl_usnic_transport_caps_t;

typedef struct opal_btl_usnic_transport_t {
    const char *name;
    opal_btl_usnic_wire_kind_t kind; /* OFI or SOCKET: what the modex publishes */
    /**
     * The devices this wire offers for |provider| (the libfabric
     * provider name the user's btl_usnic_provider_include lists; the
     * socket wire serves only "udp", whose datagrams it speaks).  Fills
     * |list| (count 0 when there are none, which is no error); returns
     * OPAL_SUCCESS, or an error with |why| saying what stood in the way
     * (a library that does not load, a failed system call).  Every filled
     * list goes back through release.
     */
    int (*discover)(const char *provider, opal_btl_usnic_device_list_t *list, char *why, size_t len);
    void (*release)(opal_btl_usnic_device_list_t *list);
    /**
     * Open the wire of |module| on |dev| (one of its discover's devices):
     * endpoints, completion queues, posted receives, registrations; fill
     * module->caps.  Shows help and returns an OPAL error if it cannot; a
     * wire that failed half way is still closed by close and fini.
     */
    int (*open)(struct opal_btl_usnic_module_t *module, const opal_btl_usnic_device_t *dev);
    /* Make |ep| reachable at |remote|'s address (sets ep->peer_addr[]).
     * OPAL_ERR_UNREACH (with help shown) if the wire cannot address it. */
    int (*add_peer)(struct opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                    const struct opal_btl_usnic_modex_t *remote);
    /* |ep| goes away: forget its address and what the wire kept of it
     * (ep->wire_peer, the wire's own slot in the endpoint) */
    void (*del_peer)(struct opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep);
    /* What the wire knows of |ep| that the statistics should show (" key=value ..."
     * into |buf|); NULL: nothing */
    void (*describe_peer)(struct opal_btl_usnic_module_t *module, const opal_btl_usnic_endpoint_t *ep, char *buf,
                          size_t len);
    /**
     * The engine's downward table itself (btl_usnic_engine_core.h: post
     * one datagram, flush what post held back for a batch), bound by
     * opal_btl_usnic_engine_init with no layer between: the wire finds its
     * module from the engine (opal_btl_usnic_module_of).
     */
    opal_btl_usnic_wire_ops_t engine;
    /* Post a datagram already reported as sent (the injector's held
     * datagram) if the wire takes it now; else release it as sent and
     * lost: retransmission covers it. */
    void (*post_held)(struct opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                      opal_btl_usnic_send_seg_t *seg, int channel);
    /* One full pass: finish deferred work, poll both channels, hand
     * receives and completions to the engine.  Returns the count. */
    int (*progress)(struct opal_btl_usnic_module_t *module);
    /* The fast receive path: at most one tiny receive straight to the
     * PML; true if one was delivered (its bookkeeping waits for progress) */
    bool (*progress_fast)(struct opal_btl_usnic_module_t *module);
    /* Reap send completions only (finalize, goodbyes short of credits) */
    void (*drain)(struct opal_btl_usnic_module_t *module);
    /* Finalize begins: post whatever the wire holds back and report (the
     * wire stays open for the goodbyes) */
    void (*quiesce)(struct opal_btl_usnic_module_t *module);
    /* Close the endpoints, queues and receive buffers; registrations
     * (mem_unreg) must still work afterwards */
    void (*close)(struct opal_btl_usnic_module_t *module);
    /* Release the rest (domain, fabric), once the engine has unregistered
     * its memory */
    void (*fini)(struct opal_btl_usnic_module_t *module);
    /* Register |len| bytes at |base| for posting (caps.needs_mr): the
     * engine's slabs call these directly (opal_btl_usnic_mem_ops_t, whose
     * context is the module: the slabs sit below the engine and know no
     * wire) */
    int (*mem_reg)(void *module, void *base, size_t len, void **handle_p, void **desc_p);
    void (*mem_unreg)(void *module, void *handle);
} opal_btl_usnic_transport_t;

/* btl_usnic_wire_ofi.c */
extern const opal_btl_usnic_transport_t opal_btl_usnic_wire_ofi;
/* btl_usnic_wire_sock.c */
extern const opal_btl_usnic_transport_t opal_btl_usnic_wire_sock;
/* Can the socket wire run here (a kernel UDP socket on |ipv4|, network
 * order)?  On false, |why| says why not. */
bool opal_btl_usnic_wire_sock_usable(uint32_t ipv4, char *why, size_t len);

/* btl_usnic_inject.c: |inner| wrapped by the fault injector
 * (btl_usnic_inject_faults), with the component's parameters.
 * OPAL_ERR_OUT_OF_RESOURCE if its state cannot be had. */
int opal_btl_usnic_inject_wrap(struct opal_btl_usnic_module_t *module, const opal_btl_usnic_transport_t *inner);
/* Is fault injection asked for (any of its parameters non-zero)? */
bool opal_btl_usnic_inject_wanted(void);

#endif /* OPAL_BTL_USNIC_WIRE_H */
