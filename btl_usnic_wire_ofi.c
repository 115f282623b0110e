/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The libfabric wire (btl_usnic_wire.h): FI_EP_DGRAM endpoints, one per
 * channel with its own CQ, on one fabric, domain and AV per module; the
 * posted receive buffers; registrations for FI_MR_LOCAL providers; CQ
 * polling with the fast receive path.  The only file that calls fi_* on
 * the data path.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_ext.h"
#include "btl_usnic_module_int.h"
#include "btl_usnic_ofi_lib.h"

#define OPAL_BTL_USNIC_FI_VERSION FI_VERSION(1, 5)

#define OPAL_BTL_USNIC_DEFAULT_TINY_MTU 768
#define OPAL_BTL_USNIC_CQ_BATCH 16
#define OPAL_BTL_USNIC_CQ_READS_PER_PASS 64

/* A posted receive buffer */
typedef struct opal_btl_usnic_recv_seg_t {
    uint64_t wire_ctx[OPAL_BTL_USNIC_WIRE_CTX_WORDS]; /* fi_context2 space */
    uint8_t *buf;
    int channel;
} opal_btl_usnic_recv_seg_t;

/* One libfabric endpoint with its own CQ */
typedef struct opal_btl_usnic_channel_t {
    struct fid_ep *ep;
    struct fid_cq *cq;
    size_t mtu;                 /* datagram size this channel receives */
    int sd_num;
    int rd_num;
    int sock_fd;                /* the provider's UDP socket; -1 if none (hardware) */
    size_t cq_size;             /* entries: every send and receive it can have posted */
    opal_btl_usnic_recv_seg_t *rsegs;
    uint8_t *rbufs;
    size_t rbuf_stride;
    struct fid_mr *rbuf_mr;     /* registration of rbufs (FI_MR_LOCAL providers), else NULL */
    void *rbuf_desc;
    opal_btl_usnic_recv_seg_t **unposted; /* buffers the provider refused to take back: retried each pass */
    int nunposted;
} opal_btl_usnic_channel_t;

/* A module's libfabric state (module->ofi) */
struct opal_btl_usnic_ofi_state {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    opal_btl_usnic_channel_t chan[OPAL_BTL_USNIC_NUM_CHANNELS];

    opal_btl_usnic_recv_seg_t *fast_deferred_rseg;
};
typedef struct opal_btl_usnic_ofi_state opal_btl_usnic_ofi_state_t;

/* libfabric's exported calls, set by the first discovery (which every
 * open follows) */
static const opal_btl_usnic_ofi_lib_t *lib;

static void show_fi_error(opal_btl_usnic_module_t *module, const char *call, int rc)
{
    opal_btl_usnic_show_help(false, "libfabric API failed", opal_process_info.nodename,
                             NULL != module->if_name ? module->if_name : "?", call, __FILE__, __LINE__, rc,
                             lib->strerror(-rc));
}

/* ===================== sending ===================== */

static opal_btl_usnic_send_seg_t *send_seg_of_ctx(void *ctx)
{
    return (opal_btl_usnic_send_seg_t *) ((char *) ctx - offsetof(opal_btl_usnic_send_seg_t, wire_ctx));
}

static bool is_transient_send_error(ssize_t rc)
{
    switch (-rc) {
    case FI_EAGAIN:
    case ENOBUFS:
    case ENOMEM:
    case EINTR:
    case ECONNREFUSED: /* ICMP from a peer that is not listening (yet/any more) */
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EPERM:        /* a firewall said no: the retransmission engine copes */
        return true;
    default:
        return false;
    }
}

/* Tests build a deliberately broken plugin with this defined (test/provider):
 * ACKs are then posted without their descriptor, and the contract-checking
 * provider must catch it. */
#ifndef OPAL_BTL_USNIC_TEST_BREAK_ACK_DESC
#    define OPAL_BTL_USNIC_TEST_BREAK_ACK_DESC 0
#endif
#if OPAL_BTL_USNIC_TEST_BREAK_ACK_DESC
#    define OPAL_BTL_USNIC_SEG_DESC(seg) (OPAL_BTL_USNIC_SEG_ACK == (seg)->kind ? NULL : (seg)->desc)
#else
#    define OPAL_BTL_USNIC_SEG_DESC(seg) ((seg)->desc)
#endif

/* Hand |seg| to the provider: one buffer, or its header and its payload
 * gathered from elsewhere (seg->ext_len > 0, only if the provider gathers
 * and needs no registered memory).  Every post passes the buffer's
 * registration descriptor (NULL where the provider needs none).
 * A datagram up to the provider's inject size goes by fi_inject: the
 * provider is done with the buffer on return and writes no completion, so
 * we complete it here (the engine set seg->channel before posting), saving
 * a completion queue entry written and read per datagram.  An explicit
 * ACK's segment goes back to its free list at once. */
static ssize_t seg_send(opal_btl_usnic_module_t *module, opal_btl_usnic_channel_t *chan,
                        opal_btl_usnic_send_seg_t *seg, fi_addr_t dest)
{
    size_t inline_len = module->caps.prefix + opal_btl_usnic_seg_inline_len(seg);
    if (OPAL_LIKELY(0 == seg->ext_len)) {
        if (inline_len <= module->caps.inject_size) {
            ssize_t rc = fi_inject(chan->ep, seg->buf, inline_len, dest);
            if (0 == rc) {
                opal_btl_usnic_seg_send_complete(&module->eng, seg);
            }
            return rc;
        }
        return fi_send(chan->ep, seg->buf, inline_len, OPAL_BTL_USNIC_SEG_DESC(seg), dest, seg->wire_ctx);
    }
    struct iovec iov[2] = {
        {.iov_base = seg->buf, .iov_len = inline_len},
        {.iov_base = (void *) seg->ext_data, .iov_len = seg->ext_len},
    };
    void *desc[2] = {seg->desc, NULL};
    struct fi_msg msg = {.msg_iov = iov, .desc = desc, .iov_count = 2, .addr = dest, .context = seg->wire_ctx};
    return fi_sendmsg(chan->ep, &msg, 0);
}

static int ofi_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_seg_t *seg,
                    int channel)
{
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    opal_btl_usnic_channel_t *chan = &module->ofi->chan[channel];
    ssize_t rc = seg_send(module, chan, seg, ep->peer_addr[channel]);
    if (OPAL_LIKELY(0 == rc)) {
        return OPAL_SUCCESS;
    }
    if (is_transient_send_error(rc)) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    opal_btl_usnic_verbose(5, "fi_send to peer %s failed: %s", opal_btl_usnic_id_str(ep->peer_id).s,
                           lib->strerror((int) -rc));
    return OPAL_ERR_UNREACH;
}

/* No waiting for room: a provider whose transmit queue frees only as the
 * engine reads its completions (dgcheck's small queues) would never give
 * it, and the caller is inside a progress pass. */
static void ofi_post_held(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                          opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_channel_t *chan = &module->ofi->chan[channel];
    ssize_t rc = seg_send(module, chan, seg, ep->peer_addr[channel]);
    if (-FI_EAGAIN == rc) {
        struct fi_cq_msg_entry comp; /* reading no entry lets a socket provider progress */
        (void) fi_cq_read(chan->cq, &comp, 0);
        rc = seg_send(module, chan, seg, ep->peer_addr[channel]);
    }
    if (0 != rc) {
        /* it never left and no completion will come: release it as if sent
         * and lost (its credit comes back; retransmission covers the data) */
        opal_btl_usnic_seg_send_complete(&module->eng, seg);
    }
}

/* ===================== receive buffers ===================== */

static opal_btl_usnic_recv_seg_t *recv_seg_of_ctx(void *ctx)
{
    return (opal_btl_usnic_recv_seg_t *) ctx; /* wire_ctx is the first member */
}

/* Receive buffers hold one byte more than the largest datagram a peer may
 * send: the udp provider truncates a longer datagram to the posted length
 * and reports an ordinary completion (no FI_ETRUNC), so only a completion
 * that reaches into this spare byte shows that the datagram was too long. */
#define OPAL_BTL_USNIC_RECV_SPARE 1

static int recv_post(opal_btl_usnic_module_t *module, opal_btl_usnic_recv_seg_t *rseg)
{
    opal_btl_usnic_channel_t *chan = &module->ofi->chan[rseg->channel];
    ssize_t rc = fi_recv(chan->ep, rseg->buf, module->caps.prefix + chan->mtu + OPAL_BTL_USNIC_RECV_SPARE,
                         chan->rbuf_desc, FI_ADDR_UNSPEC, rseg->wire_ctx);
    return (0 == rc) ? OPAL_SUCCESS : (int) rc;
}

/* Give a receive buffer back to the provider; one it refuses waits on the
 * channel's list for the next pass (a buffer lost here would shrink the
 * pool for good: the stall nobody could explain) */
static void recv_repost(opal_btl_usnic_module_t *module, opal_btl_usnic_recv_seg_t *rseg)
{
    opal_btl_usnic_channel_t *chan = &module->ofi->chan[rseg->channel];
    if (OPAL_UNLIKELY(0 != chan->nunposted || OPAL_SUCCESS != recv_post(module, rseg))) {
        chan->unposted[chan->nunposted++] = rseg; /* room for every buffer: allocated with the pool */
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_recv_repost_delayed);
    }
}

/* Retry the buffers the provider refused before, oldest first */
static void recv_repost_pending(opal_btl_usnic_module_t *module, opal_btl_usnic_channel_t *chan)
{
    int done = 0;
    while (done < chan->nunposted && OPAL_SUCCESS == recv_post(module, chan->unposted[done])) {
        ++done;
    }
    if (done > 0) {
        chan->nunposted -= done;
        memmove(chan->unposted, chan->unposted + done, (size_t) chan->nunposted * sizeof(*chan->unposted));
    }
}

/* ----- registered memory (providers with FI_MR_LOCAL) ----- */

/* The engine's slab registrations: one fi_mr_reg per slab, at setup */
static int ofi_mem_reg(void *ctx, void *base, size_t len, void **handle_p, void **desc_p)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) ctx;
    struct fid_mr *mr = NULL;
    int rc = fi_mr_reg(module->ofi->domain, base, len, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL);
    if (0 != rc) {
        show_fi_error(module, "fi_mr_reg", rc);
        return rc;
    }
    *handle_p = mr;
    *desc_p = fi_mr_desc(mr);
    return 0;
}

static void ofi_mem_unreg(void *module, void *handle)
{
    (void) module;
    fi_close(&((struct fid_mr *) handle)->fid);
}

/* All receive buffers of a channel are one allocation: one registration */
static int channel_register_rbufs(opal_btl_usnic_module_t *module, opal_btl_usnic_channel_t *chan)
{
    if (!module->caps.needs_mr) {
        return OPAL_SUCCESS;
    }
    void *mr = NULL;
    if (0 != ofi_mem_reg(module, chan->rbufs, chan->rbuf_stride * (size_t) chan->rd_num, &mr, &chan->rbuf_desc)) {
        return OPAL_ERROR;
    }
    chan->rbuf_mr = (struct fid_mr *) mr;
    return OPAL_SUCCESS;
}

static int channel_post_all_recvs(opal_btl_usnic_module_t *module, int c)
{
    opal_btl_usnic_channel_t *chan = &module->ofi->chan[c];
    chan->rbuf_stride = (module->caps.prefix + chan->mtu + OPAL_BTL_USNIC_RECV_SPARE + 63) & ~(size_t) 63;
    chan->rsegs = (opal_btl_usnic_recv_seg_t *) calloc(chan->rd_num, sizeof(*chan->rsegs));
    chan->unposted = (opal_btl_usnic_recv_seg_t **) calloc(chan->rd_num, sizeof(*chan->unposted));
    chan->nunposted = 0;
    if (0 != posix_memalign((void **) &chan->rbufs, 64, chan->rbuf_stride * chan->rd_num) || NULL == chan->rsegs ||
        NULL == chan->unposted) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (OPAL_SUCCESS != channel_register_rbufs(module, chan)) {
        return OPAL_ERROR;
    }
    for (int i = 0; i < chan->rd_num; ++i) {
        chan->rsegs[i].buf = chan->rbufs + i * chan->rbuf_stride;
        chan->rsegs[i].channel = c;
        int rc = recv_post(module, &chan->rsegs[i]);
        if (-FI_EAGAIN == rc) {
            chan->unposted[chan->nunposted++] = &chan->rsegs[i]; /* the provider's queue is shorter: later */
            continue;
        }
        if (OPAL_SUCCESS != rc) {
            show_fi_error(module, "fi_recv", rc);
            return OPAL_ERROR;
        }
    }
    return OPAL_SUCCESS;
}

/* ===================== channels ===================== */

static int channel_open(opal_btl_usnic_module_t *module, int c)
{
    opal_btl_usnic_ofi_state_t *ofi = module->ofi;
    opal_btl_usnic_channel_t *chan = &ofi->chan[c];
    struct fi_info *info = lib->dupinfo(ofi->info);
    if (NULL == info) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    info->tx_attr->size = chan->sd_num;
    info->rx_attr->size = chan->rd_num;
    int rc = fi_endpoint(ofi->domain, info, &chan->ep, NULL);
    lib->freeinfo(info);
    if (0 != rc) {
        show_fi_error(module, "fi_endpoint", rc);
        return OPAL_ERROR;
    }
    /* every send and receive we can have posted; a hardware CQ that is
     * smaller overruns and loses completions */
    chan->cq_size = (size_t) (chan->sd_num + chan->rd_num);
    struct fi_cq_attr cq_attr = {
        .size = chan->cq_size,
        .format = FI_CQ_FORMAT_MSG,
        .wait_obj = FI_WAIT_NONE,
    };
    if (0 != (rc = fi_cq_open(ofi->domain, &cq_attr, &chan->cq, NULL))) {
        show_fi_error(module, "fi_cq_open", rc);
        return OPAL_ERROR;
    }
    if (0 != (rc = fi_ep_bind(chan->ep, &chan->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        0 != (rc = fi_ep_bind(chan->ep, &ofi->av->fid, 0)) || 0 != (rc = fi_enable(chan->ep))) {
        show_fi_error(module, "fi_ep_bind/fi_enable", rc);
        return OPAL_ERROR;
    }
    struct sockaddr_in sin;
    size_t len = sizeof(sin);
    if (0 != (rc = fi_getname(&chan->ep->fid, &sin, &len))) {
        show_fi_error(module, "fi_getname", rc);
        return OPAL_ERROR;
    }
    module->caps.port[c] = ntohs(sin.sin_port);
    chan->sock_fd = opal_btl_usnic_socket_fd(module->ipv4, module->caps.port[c]);
    if (chan->sock_fd >= 0) {
        /* the udp provider's socket: as deep as the socket wire's (the
         * kernel default holds 92 datagrams of 1472 bytes) */
        (void) opal_btl_usnic_socket_buffer(chan->sock_fd, SO_RCVBUFFORCE, SO_RCVBUF,
                                            opal_btl_usnic_globals.sock_rcvbuf);
    }
    return channel_post_all_recvs(module, c);
}

static void channel_close(opal_btl_usnic_channel_t *chan)
{
    if (NULL != chan->ep) {
        fi_close(&chan->ep->fid);
        chan->ep = NULL;
    }
    if (NULL != chan->cq) {
        fi_close(&chan->cq->fid);
        chan->cq = NULL;
    }
    if (NULL != chan->rbuf_mr) {
        fi_close(&chan->rbuf_mr->fid); /* after the endpoint: nothing is posted any more */
        chan->rbuf_mr = NULL;
        chan->rbuf_desc = NULL;
    }
    free(chan->rsegs);
    chan->rsegs = NULL;
    free(chan->unposted);
    chan->unposted = NULL;
    chan->nunposted = 0;
    free(chan->rbufs);
    chan->rbufs = NULL;
}

/* ===================== completions and progress ===================== */

/* Longer than the channel's MTU: cut short by the provider, never ours */
static bool recv_is_oversized(const opal_btl_usnic_module_t *module, const opal_btl_usnic_recv_seg_t *rseg,
                              size_t len)
{
    return len > module->caps.prefix + module->ofi->chan[rseg->channel].mtu;
}

/* What follows the provider's prefix of |rseg|'s |len| bytes, for the engine */
static opal_btl_usnic_datagram_t datagram_of(const opal_btl_usnic_module_t *module,
                                             const opal_btl_usnic_recv_seg_t *rseg, size_t len, fi_addr_t src)
{
    size_t prefix = module->caps.prefix;
    opal_btl_usnic_datagram_t dg = {
        .buf = rseg->buf + prefix, .len = len - prefix, .channel = rseg->channel, .src = (uint64_t) src};
    return dg;
}

static void handle_recv(opal_btl_usnic_module_t *module, opal_btl_usnic_recv_seg_t *rseg, size_t len, fi_addr_t src)
{
    size_t prefix = module->caps.prefix;
    if (OPAL_UNLIKELY(recv_is_oversized(module, rseg, len))) {
        opal_btl_usnic_recv_drop(&module->eng, OPAL_BTL_USNIC_DROP_OVERSIZED);
    } else if (OPAL_UNLIKELY(len < prefix)) {
        /* not even the provider's prefix: no header of ours to look at */
        opal_btl_usnic_recv_drop(&module->eng, OPAL_BTL_USNIC_DROP_TRUNCATED);
    } else {
        opal_btl_usnic_engine_rx_hold(&module->eng); /* until re-posted: ACKs sent meanwhile must not grant it */
        const opal_btl_usnic_datagram_t dg = datagram_of(module, rseg, len, src);
        opal_btl_usnic_recv_segment(&module->eng, &dg);
        opal_btl_usnic_engine_rx_return(&module->eng);
    }
    recv_repost(module, rseg);
}

static void handle_completion(opal_btl_usnic_module_t *module, const struct fi_cq_msg_entry *comp, fi_addr_t src)
{
    if (comp->flags & FI_RECV) {
        handle_recv(module, recv_seg_of_ctx(comp->op_context), comp->len, src);
    } else {
        opal_btl_usnic_seg_send_complete(&module->eng, send_seg_of_ctx(comp->op_context));
    }
}

/* A hardware CQ that overflowed lost completions (a send credit or a
 * receive buffer each): the queues are sized for every operation we can
 * have posted, so this is a bug or a provider that sized them otherwise.
 * Data is not lost (retransmission), but say so, once per module. */
static void report_cq_overrun(opal_btl_usnic_module_t *module, opal_btl_usnic_channel_t *chan)
{
    if (0 == OPAL_BTL_USNIC_STAT_INC(&module->eng, num_cq_overruns)) {
        opal_btl_usnic_show_help(false, "cq overrun", opal_process_info.nodename, module->if_name,
                                 chan == &module->ofi->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL] ? "priority" : "data",
                                 chan->cq_size, chan->sd_num, chan->rd_num);
    }
}

static void handle_cq_error(opal_btl_usnic_module_t *module, opal_btl_usnic_channel_t *chan)
{
    struct fi_cq_err_entry err;
    memset(&err, 0, sizeof(err));
    if (fi_cq_readerr(chan->cq, &err, 0) < 1) {
        return;
    }
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_recv_errors);
    if (FI_EOVERRUN == err.err) {
        report_cq_overrun(module, chan);
    } else if (NULL == err.op_context) {
        return; /* names no operation of ours */
    } else if (err.flags & FI_RECV) {
        if (FI_ETRUNC == err.err) {
            opal_btl_usnic_recv_drop(&module->eng, OPAL_BTL_USNIC_DROP_OVERSIZED); /* providers that report the overrun */
        }
        recv_repost(module, recv_seg_of_ctx(err.op_context));
    } else {
        /* the datagram may not have left; retransmission covers it */
        opal_btl_usnic_seg_send_complete(&module->eng, send_seg_of_ctx(err.op_context));
    }
}

/* Up to |max| completions of |chan|, with the source of each receive
 * where the provider reports it (FI_ADDR_NOTAVAIL otherwise) */
static ssize_t cq_read(opal_btl_usnic_module_t *module, opal_btl_usnic_channel_t *chan,
                       struct fi_cq_msg_entry *comps, fi_addr_t *srcs, size_t max)
{
    if (module->caps.reports_source) {
        return fi_cq_readfrom(chan->cq, comps, max, srcs);
    }
    ssize_t n = fi_cq_read(chan->cq, comps, max);
    for (ssize_t i = 0; i < n; ++i) {
        srcs[i] = FI_ADDR_NOTAVAIL;
    }
    return n;
}

/* Drain one channel's CQ, at most a bounded number of reads: the udp
 * provider reaps at most one receive per fi_cq_read. */
static int poll_channel(opal_btl_usnic_module_t *module, int c)
{
    opal_btl_usnic_channel_t *chan = &module->ofi->chan[c];
    struct fi_cq_msg_entry comps[OPAL_BTL_USNIC_CQ_BATCH];
    fi_addr_t srcs[OPAL_BTL_USNIC_CQ_BATCH];
    int count = 0;
    for (int pass = 0; pass < OPAL_BTL_USNIC_CQ_READS_PER_PASS; ++pass) {
        ssize_t n = cq_read(module, chan, comps, srcs, OPAL_BTL_USNIC_CQ_BATCH);
        if (n > 0) {
            /* arrival times (ACK holds, btl_usnic_cc.c) within a long pass */
            opal_btl_usnic_engine_set_time(&module->eng, opal_btl_usnic_clock_usec());
            for (ssize_t i = 0; i < n; ++i) {
                handle_completion(module, &comps[i], srcs[i]);
            }
            count += (int) n;
        } else if (-FI_EAVAIL == n) {
            handle_cq_error(module, chan);
        } else {
            break;
        }
    }
    return count;
}

static void finish_deferred_fast_recv(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_ofi_state_t *ofi = module->ofi;
    if (opal_btl_usnic_recv_fast_finish(&module->eng)) {
        recv_repost(module, ofi->fast_deferred_rseg);
        opal_btl_usnic_engine_rx_return(&module->eng);
    }
}

/* One tiny receive of the priority channel, offered to the engine's fast
 * path; see opal_btl_usnic_transport_t.progress_fast */
static bool ofi_progress_fast(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_ofi_state_t *ofi = module->ofi;
    opal_btl_usnic_channel_t *chan = &ofi->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    struct fi_cq_msg_entry comp;
    if (!opal_btl_usnic_recv_fast_ready(&module->eng)) {
        return false;
    }
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ssize_t n = cq_read(module, chan, &comp, &src, 1);
    if (1 != n) {
        /* each read of an empty CQ costs the udp provider a recvmsg call */
        module->prio_found_empty = (-FI_EAGAIN == n);
        return false;
    }
    if (comp.flags & FI_RECV) {
        opal_btl_usnic_recv_seg_t *rseg = recv_seg_of_ctx(comp.op_context);
        opal_btl_usnic_engine_rx_hold(&module->eng); /* re-posted by finish_deferred_fast_recv */
        opal_btl_usnic_fast_t how = OPAL_BTL_USNIC_FAST_DECLINED;
        if (comp.len >= module->caps.prefix && !recv_is_oversized(module, rseg, comp.len)) {
            const opal_btl_usnic_datagram_t dg = datagram_of(module, rseg, comp.len, src);
            how = opal_btl_usnic_recv_fast(&module->eng, &dg, NULL);
        }
        if (OPAL_BTL_USNIC_FAST_TAKEN == how) {
            ofi->fast_deferred_rseg = rseg; /* re-posted when the engine has finished with it */
            return true;
        }
        opal_btl_usnic_engine_rx_return(&module->eng);
        if (OPAL_BTL_USNIC_FAST_DROPPED == how) {
            recv_repost(module, rseg); /* counted */
            return false;
        }
    }
    handle_completion(module, &comp, src);
    return false;
}

static int ofi_progress(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_ofi_state_t *ofi = module->ofi;
    finish_deferred_fast_recv(module);
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        if (OPAL_UNLIKELY(0 != ofi->chan[c].nunposted)) {
            recv_repost_pending(module, &ofi->chan[c]);
        }
    }
    int count = 0;
    if (!module->prio_found_empty) {
        count += poll_channel(module, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    }
    module->prio_found_empty = false;
    count += poll_channel(module, OPAL_BTL_USNIC_DATA_CHANNEL);
    return count;
}

/* Finalize: reap the completions of segments still posted (the last ACKs
 * usually) so that they go back to their free lists and are freed with
 * them; receives that arrive now are not delivered any more. */
static void ofi_drain(opal_btl_usnic_module_t *module)
{
    if (NULL == module->ofi) {
        return;
    }
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        opal_btl_usnic_channel_t *chan = &module->ofi->chan[c];
        struct fi_cq_msg_entry comp;
        for (int i = 0; NULL != chan->cq && i < 4 * (chan->sd_num + chan->rd_num); ++i) {
            ssize_t n = fi_cq_read(chan->cq, &comp, 1);
            if (-FI_EAVAIL == n) {
                struct fi_cq_err_entry err;
                memset(&err, 0, sizeof(err));
                if (fi_cq_readerr(chan->cq, &err, 0) < 1) {
                    break;
                }
                comp.flags = err.flags;
                comp.op_context = err.op_context;
            } else if (1 != n) {
                break;
            }
            if (!(comp.flags & FI_RECV) && NULL != comp.op_context) {
                opal_btl_usnic_seg_send_complete(&module->eng, send_seg_of_ctx(comp.op_context));
            }
        }
    }
}

/* ===================== peers ===================== */

static int ofi_add_peer(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                        const opal_btl_usnic_modex_t *remote)
{
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        struct sockaddr_in sin;
        memset(&sin, 0, sizeof(sin)); /* the provider rejects a non-zero sin_zero */
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = remote->ipv4;
        sin.sin_port = htons(remote->ports[c]);
        fi_addr_t addr = FI_ADDR_NOTAVAIL;
        int rc = fi_av_insert(module->ofi->av, &sin, 1, &addr, 0, NULL);
        if (1 != rc || FI_ADDR_NOTAVAIL == addr) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &remote->ipv4, ip, sizeof(ip));
            opal_btl_usnic_show_help(false, "unreachable peer IP", opal_process_info.nodename,
                           module->if_name, opal_get_proc_hostname(ep->proc), ip);
            return OPAL_ERR_UNREACH;
        }
        ep->peer_addr[c] = addr;
    }
    return OPAL_SUCCESS;
}

/* A peer's addresses stay in the AV until it closes, as they always have
 * (a peer that comes back is inserted anew) */
static void ofi_del_peer(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    (void) module;
    (void) ep;
}

/* ===================== open and close ===================== */

/* What our receive side holds between two progress passes, and what one
 * datagram costs of it (btl_usnic_charge.h).  On libfabric's udp
 * provider datagrams wait in the provider's kernel sockets: their buffers
 * (the smaller one: a peer's datagrams land on either channel), in bytes
 * of the kernel's charge, measured (212992 bytes hold 92 datagrams of
 * 1472 bytes, or 256 small ones).  On hardware (no socket) a datagram
 * takes one posted buffer whatever its size: one credit unit each, as many
 * as the smaller channel posts. */
static void rx_capacity(opal_btl_usnic_module_t *module)
{
    const opal_btl_usnic_channel_t *data = &module->ofi->chan[OPAL_BTL_USNIC_DATA_CHANNEL];
    const opal_btl_usnic_channel_t *prio = &module->ofi->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    long held = opal_btl_usnic_socket_rcvbuf(data->sock_fd);
    long prio_held = opal_btl_usnic_socket_rcvbuf(prio->sock_fd);
    if (prio_held > 0 && prio_held < held) {
        held = prio_held;
    }
    opal_btl_usnic_charge_t *charge = &module->caps.rx_charge;
    if (held > 0) {
        int measured = opal_btl_usnic_kernel_charges(module->ipv4, data->mtu, charge);
        module->caps.rx_capacity = (uint64_t) held;
        opal_btl_usnic_verbose(5, "%s: receive buffers hold %ld bytes; a datagram costs %u bytes (up to 64), %u "
                               "(%zu) (%d sizes measured)",
                               module->if_name, held, opal_btl_usnic_charge_of(charge, 64),
                               opal_btl_usnic_charge_of(charge, data->mtu), data->mtu, measured);
        return;
    }
    int buffers = (prio->rd_num < data->rd_num) ? prio->rd_num : data->rd_num;
    opal_btl_usnic_charge_flat(charge, OPAL_BTL_USNIC_CREDIT_UNIT);
    module->caps.rx_capacity = (uint64_t) buffers * OPAL_BTL_USNIC_CREDIT_UNIT;
    opal_btl_usnic_verbose(5, "%s: receive side holds %d datagrams (posted buffers)", module->if_name, buffers);
}

/* Does the provider need every posted buffer registered?  (usnic, verbs
 * UD, EFA: FI_MR_LOCAL, or the older mode bit) */
static bool info_needs_mr(const struct fi_info *info)
{
    return 0 != (info->mode & OPAL_BTL_USNIC_FI_MODE_LOCAL_MR) || 0 != (info->domain_attr->mr_mode & FI_MR_LOCAL);
}

/* Datagram sizes, queue depths and what the provider can do, from |info|
 * and the parameters */
static int ofi_sizes(opal_btl_usnic_module_t *module, const struct fi_info *info)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    opal_btl_usnic_transport_caps_t *caps = &module->caps;
    caps->prefix = (info->mode & FI_MSG_PREFIX) ? info->ep_attr->msg_prefix_size : 0;
    size_t mtu = opal_btl_usnic_datagram_cap(opal_btl_usnic_datagram_mtu(
        info->ep_attr->max_msg_size, caps->prefix, opal_btl_usnic_if_mtu(module->if_name)));
    if (mtu < OPAL_BTL_USNIC_MIN_MTU) {
        opal_btl_usnic_show_help(true, "mtu too small", opal_process_info.nodename, module->if_name,
                                 module->provider, (size_t) info->ep_attr->max_msg_size, caps->prefix,
                                 opal_btl_usnic_if_mtu(module->if_name), (size_t) OPAL_BTL_USNIC_MIN_MTU);
        return OPAL_ERR_NOT_AVAILABLE;
    }
    opal_btl_usnic_verbose(5, "%s: datagrams of %zu bytes after a provider prefix of %zu (max_msg_size %zu)",
                           module->domain_name, mtu, caps->prefix, (size_t) info->ep_attr->max_msg_size);
    size_t tiny = (0 != c->priority_limit) ? (size_t) c->priority_limit : OPAL_BTL_USNIC_DEFAULT_TINY_MTU;
    if (tiny > mtu) {
        tiny = mtu;
    }
    opal_btl_usnic_channel_t *data = &module->ofi->chan[OPAL_BTL_USNIC_DATA_CHANNEL];
    opal_btl_usnic_channel_t *prio = &module->ofi->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    data->mtu = mtu;
    prio->mtu = tiny;

    int prov_tx = (int) info->tx_attr->size;
    int prov_rx = (int) info->rx_attr->size;
    data->sd_num = (c->sd_num > 0) ? c->sd_num : (prov_tx < 1024 ? prov_tx : 1024);
    data->rd_num = (c->rd_num > 0) ? c->rd_num : (prov_rx < 512 ? prov_rx : 512);
    prio->sd_num = (c->prio_sd_num > 0) ? c->prio_sd_num : (prov_tx < 256 ? prov_tx : 256);
    prio->rd_num = (c->prio_rd_num > 0) ? c->prio_rd_num : (prov_rx < 256 ? prov_rx : 256);
    for (int ch = 0; ch < OPAL_BTL_USNIC_NUM_CHANNELS; ++ch) {
        caps->max_datagram[ch] = module->ofi->chan[ch].mtu;
        caps->send_credits[ch] = (uint32_t) module->ofi->chan[ch].sd_num;
    }
    caps->needs_mr = info_needs_mr(info);
    caps->max_batch = 1; /* one fi_send per datagram: nothing to gather into a batch */
    /* gathering a PUT's source would need the user's memory registered:
     * copying into registered segments costs a memcpy of one datagram
     * (tens of ns against microseconds of sending) and no registration */
    caps->gathers = info->tx_attr->iov_limit >= 2 && !caps->needs_mr;
    /* protection none trusts the fabric entirely: no origin check, and no
     * source lookup per receive either */
    caps->reports_source = 0 != (info->caps & FI_SOURCE) && OPAL_BTL_USNIC_PROTECT_NONE != c->protection;
    caps->inject_size = info->tx_attr->inject_size;
    opal_btl_usnic_verbose(5, "%s: datagrams up to %zu bytes are sent by fi_inject", module->domain_name,
                           caps->inject_size);
    opal_btl_usnic_verbose(5, "%s: %s", module->domain_name,
                           caps->gathers      ? "PUT segments are sent from the source buffer (gather send)"
                           : caps->needs_mr   ? "PUT segments are copied into registered memory"
                                              : "the provider cannot gather: PUT segments are copied");
    opal_btl_usnic_verbose(5, "%s: %s", module->domain_name,
                           caps->needs_mr ? "the provider needs registered memory (FI_MR_LOCAL): segment "
                                            "and receive buffers are registered once per slab"
                                          : "the provider needs no memory registration");
    return OPAL_SUCCESS;
}

/* fabric, domain and AV of the module's interface; the usnic extension
 * refines the interface facts as soon as the fabric is open */
static int open_domain(opal_btl_usnic_module_t *module, const struct fi_info *info)
{
    opal_btl_usnic_ofi_state_t *ofi = module->ofi;
    int rc;
    if (0 != (rc = lib->fabric(info->fabric_attr, &ofi->fabric, NULL))) {
        show_fi_error(module, "fi_fabric", rc);
        return OPAL_ERROR;
    }
    opal_btl_usnic_ext_refine(module, ofi->fabric, ofi->info, NULL); /* netmask, link speed, if name */
    if (0 != (rc = fi_domain(ofi->fabric, ofi->info, &ofi->domain, NULL))) {
        show_fi_error(module, "fi_domain", rc);
        return OPAL_ERROR;
    }
    struct fi_av_attr av_attr = {.type = FI_AV_MAP};
    if (0 != (rc = fi_av_open(ofi->domain, &av_attr, &ofi->av, NULL))) {
        show_fi_error(module, "fi_av_open", rc);
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

/* ===================== discovery ===================== */

/* usNIC hardware shows up as usnic_verbs devices; where there is none,
 * asking libfabric for the usnic provider would only pay its load */
#define OPAL_BTL_USNIC_SYSFS_IB "/sys/class/infiniband"

static bool usnic_hardware_present(void)
{
    DIR *dir = opendir(OPAL_BTL_USNIC_SYSFS_IB);
    bool found = false;
    if (NULL == dir) {
        return false;
    }
    for (struct dirent *d = readdir(dir); NULL != d && !found; d = readdir(dir)) {
        found = (0 == strncmp(d->d_name, "usnic_", 6));
    }
    closedir(dir);
    return found;
}

static struct fi_info *getinfo_caps(const char *provider, uint64_t caps)
{
    struct fi_info *hints = lib->dupinfo(NULL);
    struct fi_info *list = NULL;
    if (NULL == hints) {
        return NULL;
    }
    hints->caps = caps;
    hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
    /* we can register every buffer we post (usnic, verbs UD, EFA need it) */
    hints->domain_attr->mr_mode = FI_MR_LOCAL;
    hints->addr_format = FI_SOCKADDR_IN;
    hints->ep_attr->type = FI_EP_DGRAM;
    hints->fabric_attr->prov_name = strdup(provider);
    int rc = lib->getinfo(OPAL_BTL_USNIC_FI_VERSION, NULL, NULL, 0, hints, &list);
    lib->freeinfo(hints);
    if (0 != rc) {
        opal_btl_usnic_verbose(5, "fi_getinfo(provider %s, caps 0x%llx): %s", provider, (unsigned long long) caps,
                               lib->strerror(-rc));
        return NULL;
    }
    return list;
}

/* Interfaces of |provider|; with FI_SOURCE where it can tell each
 * datagram's source (the modules then check it), else without */
static struct fi_info *getinfo_for(const char *provider)
{
    struct fi_info *list = getinfo_caps(provider, FI_MSG | FI_SOURCE);
    if (NULL == list) {
        list = getinfo_caps(provider, FI_MSG);
        if (NULL != list) {
            opal_btl_usnic_verbose(1, "provider %s cannot report datagram sources (FI_SOURCE): senders are "
                                      "authenticated by their tags only", provider);
        }
    }
    return list;
}

/* |info| as a device; false for what is not IPv4 (udp returns IPv6
 * entries whatever the hints say) */
static bool device_of(const struct fi_info *info, opal_btl_usnic_device_t *dev)
{
    const struct sockaddr_in *sin = (const struct sockaddr_in *) info->src_addr;
    if (NULL == sin || info->src_addrlen < sizeof(*sin) || AF_INET != sin->sin_family) {
        return false;
    }
    const char *domain = NULL != info->domain_attr->name ? info->domain_attr->name : "?";
    memset(dev, 0, sizeof(*dev));
    dev->ipv4 = sin->sin_addr.s_addr;
    snprintf(dev->domain_name, sizeof(dev->domain_name), "%s", domain);
    if (OPAL_SUCCESS != opal_btl_usnic_ifname_for_ipv4(dev->ipv4, dev->if_name, sizeof(dev->if_name))) {
        snprintf(dev->if_name, sizeof(dev->if_name), "%s", domain);
    }
    snprintf(dev->provider, sizeof(dev->provider), "%s", info->fabric_attr->prov_name);
    dev->wire_data = info;
    return true;
}

static int ofi_discover(const char *provider, opal_btl_usnic_device_list_t *list, char *why, size_t len)
{
    memset(list, 0, sizeof(*list));
    if (0 == strcmp(provider, "usnic") && !usnic_hardware_present()) {
        opal_btl_usnic_verbose(5, "no usnic_* device in %s: provider usnic not asked for", OPAL_BTL_USNIC_SYSFS_IB);
        return OPAL_SUCCESS;
    }
    bool was_loaded = opal_btl_usnic_ofi_lib_loaded();
    if (NULL == (lib = opal_btl_usnic_ofi_lib(why, len))) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    if (!was_loaded) {
        opal_btl_usnic_verbose(5, "libfabric loaded (%s) for the ofi wire", OPAL_BTL_USNIC_OFI_LIB_NAME);
    }
    struct fi_info *infos = getinfo_for(provider);
    int n = 0;
    for (const struct fi_info *info = infos; NULL != info; info = info->next) {
        ++n;
    }
    if (0 == n) {
        return OPAL_SUCCESS;
    }
    list->devices = (opal_btl_usnic_device_t *) calloc((size_t) n, sizeof(*list->devices));
    if (NULL == list->devices) {
        lib->freeinfo(infos);
        snprintf(why, len, "out of memory");
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    list->wire_owned = infos;
    for (const struct fi_info *info = infos; NULL != info; info = info->next) {
        if (device_of(info, &list->devices[list->count])) {
            ++list->count;
        }
    }
    return OPAL_SUCCESS;
}

static void ofi_release(opal_btl_usnic_device_list_t *list)
{
    free(list->devices);
    if (NULL != list->wire_owned) {
        lib->freeinfo((struct fi_info *) list->wire_owned);
    }
    memset(list, 0, sizeof(*list));
}

/* ===================== open and close ===================== */

static int ofi_open(opal_btl_usnic_module_t *module, const opal_btl_usnic_device_t *dev)
{
    const struct fi_info *info = (const struct fi_info *) dev->wire_data;
    int rc;
    module->ofi = (opal_btl_usnic_ofi_state_t *) calloc(1, sizeof(*module->ofi));
    if (NULL == module->ofi) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    module->ofi->info = lib->dupinfo(info);
    if (NULL == module->ofi->info) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (OPAL_SUCCESS != (rc = ofi_sizes(module, info))) {
        return rc;
    }
    if (OPAL_SUCCESS != (rc = open_domain(module, info))) {
        return rc;
    }
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        if (OPAL_SUCCESS != (rc = channel_open(module, c))) {
            return rc;
        }
    }
    rx_capacity(module);
    return OPAL_SUCCESS;
}

/* Nothing is held back on this wire: every post went to the provider */
static void ofi_quiesce(opal_btl_usnic_module_t *module)
{
    (void) module;
}

static void ofi_flush(opal_btl_usnic_engine_t *eng)
{
    (void) eng;
}

static void ofi_close(opal_btl_usnic_module_t *module)
{
    if (NULL == module->ofi) {
        return;
    }
    for (int c = OPAL_BTL_USNIC_NUM_CHANNELS - 1; c >= 0; --c) {
        channel_close(&module->ofi->chan[c]);
    }
}

static void ofi_fini(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_ofi_state_t *ofi = module->ofi;
    if (NULL == ofi) {
        return;
    }
    if (NULL != ofi->av) {
        fi_close(&ofi->av->fid);
    }
    if (NULL != ofi->domain) {
        fi_close(&ofi->domain->fid);
    }
    if (NULL != ofi->fabric) {
        fi_close(&ofi->fabric->fid);
    }
    lib->freeinfo(ofi->info);
    free(ofi);
    module->ofi = NULL;
}

const opal_btl_usnic_transport_t opal_btl_usnic_wire_ofi = {
    .name = "ofi",
    .kind = OPAL_BTL_USNIC_WIRE_OFI,
    .discover = ofi_discover,
    .release = ofi_release,
    .open = ofi_open,
    .add_peer = ofi_add_peer,
    .del_peer = ofi_del_peer,
    .engine = {.post = ofi_post, .flush = ofi_flush},
    .post_held = ofi_post_held,
    .progress = ofi_progress,
    .progress_fast = ofi_progress_fast,
    .drain = ofi_drain,
    .quiesce = ofi_quiesce,
    .close = ofi_close,
    .fini = ofi_fini,
    .mem_reg = ofi_mem_reg,
    .mem_unreg = ofi_mem_unreg,
};
