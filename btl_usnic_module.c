/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Per-interface modules: libfabric resources, the BTL entry points and the
 * production "wire" under the reliability engine.
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
#include <time.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "opal/class/opal_bitmap.h"
#include "opal/datatype/opal_convertor.h"
#include "btl_usnic_compat.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_ext.h"

#define OPAL_BTL_USNIC_DEFAULT_TINY_MTU 768
#define OPAL_BTL_USNIC_CQ_BATCH 16
#define OPAL_BTL_USNIC_CQ_READS_PER_PASS 64

static void show_fi_error(opal_btl_usnic_module_t *module, const char *call, int rc)
{
    opal_btl_usnic_show_help(false, "libfabric API failed", opal_process_info.nodename,
                             NULL != module->if_name ? module->if_name : "?", call, __FILE__, __LINE__, rc,
                             fi_strerror(-rc));
}

/* ===================== the production wire ===================== */

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

static int post_to_provider(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                            opal_btl_usnic_send_seg_t *seg, int channel);

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
    size_t inline_len = module->prefix + opal_btl_usnic_seg_inline_len(seg);
    if (OPAL_LIKELY(0 == seg->ext_len)) {
        if (inline_len <= module->inject_size) {
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

/* ----- test-only fault injection (btl_usnic_inject_faults) ----- */

/* Post |copy| (a copy of a segment, never ACKed nor timed) on |channel|;
 * it is recycled when the provider releases it, like any segment.  A copy
 * uses one send credit, so it is only sent when one is free. */
static bool inject_post_copy(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *copy, int channel)
{
    copy->channel = (uint8_t) channel;
    copy->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED | OPAL_BTL_USNIC_SEG_FLAG_POSTED;
    if (module->eng.credits[channel] > 0 &&
        0 == seg_send(module, &module->chan[channel], copy, ep->peer_addr[channel])) {
        --module->eng.credits[channel];
        return true;
    }
    copy->flags = OPAL_BTL_USNIC_SEG_FLAG_ACKED;
    opal_btl_usnic_seg_release_if_done(&module->eng, copy);
    return false;
}

/* Send a copy of |seg|: the peer sees it twice. */
static void inject_duplicate(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                             opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_send_seg_t *copy = opal_btl_usnic_seg_copy(&module->eng, seg);
    if (NULL != copy && inject_post_copy(module, ep, copy, channel)) {
        ++module->inject.dups;
        if (OPAL_BTL_USNIC_SEG_ACK != seg->kind) {
            ++module->inject.data_dups;
        }
    }
}

/* Send a copy of the PUT |seg| with its key flipped, ahead of it: the
 * target must drop it unwritten and still accept the genuine one.  It is
 * sealed anew (a peer of the job that holds the key goes wrong), so it is
 * the PUT checks that must stop it, not the tag. */
static void inject_forged_put(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_send_seg_t *copy = opal_btl_usnic_seg_copy(&module->eng, seg);
    if (NULL == copy) {
        return;
    }
    opal_btl_usnic_put_hdr_t *ph = (opal_btl_usnic_put_hdr_t *) copy->hdr;
    ph->key ^= opal_btl_usnic_wire64(0x8000000000000001ull);
    memset((uint8_t *) copy->hdr + sizeof(*ph), 0xee, copy->wire_len - sizeof(*ph));
    opal_btl_usnic_seal(&module->eng, ep, &ph->hdr, copy->wire_len);
    if (inject_post_copy(module, ep, copy, channel)) {
        ++module->inject.forged_puts;
    }
}

/* Post the datagram held back for reordering, if any. */
static void inject_release_held(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_send_seg_t *seg = module->inject.held;
    if (NULL != seg) {
        module->inject.held = NULL;
        while (-FI_EAGAIN == seg_send(module, &module->chan[module->inject.held_channel], seg,
                                      module->inject.held_ep->peer_addr[module->inject.held_channel])) {
            struct fi_cq_msg_entry comp; /* reading no entry lets a socket provider progress */
            (void) fi_cq_read(module->chan[module->inject.held_channel].cq, &comp, 0);
        }
        ++module->inject.reorders;
    }
}

/* Returns true if |seg| was held back (the caller reports success). */
static bool inject_faults(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                          opal_btl_usnic_send_seg_t *seg, int channel)
{
    uint64_t n = ++module->inject.count;
    bool first_put_post = OPAL_BTL_USNIC_PKT_PUT == seg->hdr->type && seg->seq == ep->tx.next_seq;
    if (0 != module->inject.forge_put_every && first_put_post &&
        0 == ++module->inject.put_count % module->inject.forge_put_every) {
        inject_forged_put(module, ep, seg, channel);
    }
    if (0 != module->inject.dup_every && 0 == n % module->inject.dup_every) {
        inject_duplicate(module, ep, seg, channel);
    }
    if (0 != module->inject.reorder_every && 0 == n % module->inject.reorder_every && NULL == module->inject.held) {
        module->inject.held = seg;
        module->inject.held_ep = ep;
        module->inject.held_channel = channel;
        return true;
    }
    return false;
}

static int wire_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_seg_t *seg,
                     int channel)
{
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    if (OPAL_UNLIKELY(module->inject.on)) {
        if (inject_faults(module, ep, seg, channel)) {
            return OPAL_SUCCESS;
        }
        int rc = post_to_provider(module, ep, seg, channel);
        inject_release_held(module);
        return rc;
    }
    return post_to_provider(module, ep, seg, channel);
}

static int post_to_provider(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                            opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_channel_t *chan = &module->chan[channel];
    ssize_t rc = seg_send(module, chan, seg, ep->peer_addr[channel]);
    if (OPAL_LIKELY(0 == rc)) {
        return OPAL_SUCCESS;
    }
    if (is_transient_send_error(rc)) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    opal_btl_usnic_verbose(5, "fi_send to peer %s failed: %s", opal_btl_usnic_id_str(ep->peer_id).s,
                           fi_strerror((int) -rc));
    return OPAL_ERR_UNREACH;
}

/* Un-ACKed segments wait in the endpoint's opal_hotel, one room each.
 * The hotel gets no event base, so it arms no libevent timers: the engine
 * fires retransmit timers itself from the progress function (see
 * btl_usnic_ack.c), far finer than the event base that would drive hotel
 * evictions (looped every ~10 ms by opal_progress). */
static void hotel_never_evicts(opal_hotel_t *hotel, int room, void *occupant)
{
    (void) hotel;
    (void) room;
    (void) occupant;
    opal_output(0, "btl:usnic: internal error: a hotel without event base evicted a segment");
}

static int wire_timer_arm(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_seg_t *seg)
{
    (void) eng;
    if (seg->hotel_room >= 0) {
        return OPAL_SUCCESS;
    }
    return opal_hotel_checkin(&ep->hotel, seg, &seg->hotel_room);
}

static void wire_timer_disarm(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_send_seg_t *seg)
{
    (void) eng;
    if (seg->hotel_room >= 0) {
        opal_hotel_checkout(&ep->hotel, seg->hotel_room);
        seg->hotel_room = -1;
    }
}

static void wire_deliver(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data,
                         size_t len)
{
    (void) opal_btl_usnic_pml_deliver(eng, &opal_btl_usnic_module_of(eng)->super, ep, tag, data, len);
}

static void wire_peer_failed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, int rc)
{
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    if (ep->failed) {
        return;
    }
    ep->failed = true;
    const char *peer_host = NULL != ep->proc ? opal_get_proc_hostname(ep->proc) : "unknown";
    if (OPAL_ERR_TIMEOUT == rc) {
        char heard[64];
        opal_btl_usnic_describe_last_heard(eng, ep, heard, sizeof(heard));
        opal_btl_usnic_show_help(false, "peer timeout", opal_process_info.nodename, module->if_name, peer_host,
                                 opal_btl_usnic_id_str(ep->peer_id).s, mca_btl_usnic_component.peer_timeout,
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

static const opal_btl_usnic_wire_ops_t libfabric_wire = {
    .post = wire_post,
    .timer_arm = wire_timer_arm,
    .timer_disarm = wire_timer_disarm,
    .deliver = wire_deliver,
    .peer_failed = wire_peer_failed,
};

/* ===================== channels ===================== */

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
    opal_btl_usnic_channel_t *chan = &module->chan[rseg->channel];
    ssize_t rc = fi_recv(chan->ep, rseg->buf, module->prefix + chan->mtu + OPAL_BTL_USNIC_RECV_SPARE,
                         chan->rbuf_desc, FI_ADDR_UNSPEC, rseg->wire_ctx);
    return (0 == rc) ? OPAL_SUCCESS : (int) rc;
}

/* Give a receive buffer back to the provider; one it refuses waits on the
 * channel's list for the next pass (a buffer lost here would shrink the
 * pool for good: the stall nobody could explain) */
static void recv_repost(opal_btl_usnic_module_t *module, opal_btl_usnic_recv_seg_t *rseg)
{
    opal_btl_usnic_channel_t *chan = &module->chan[rseg->channel];
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
static int mem_reg(void *ctx, void *base, size_t len, void **handle_p, void **desc_p)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) ctx;
    struct fid_mr *mr = NULL;
    int rc = fi_mr_reg(module->domain, base, len, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL);
    if (0 != rc) {
        show_fi_error(module, "fi_mr_reg", rc);
        return rc;
    }
    *handle_p = mr;
    *desc_p = fi_mr_desc(mr);
    return 0;
}

static void mem_unreg(void *ctx, void *handle)
{
    (void) ctx;
    fi_close(&((struct fid_mr *) handle)->fid);
}

/* All receive buffers of a channel are one allocation: one registration */
static int channel_register_rbufs(opal_btl_usnic_module_t *module, opal_btl_usnic_channel_t *chan)
{
    if (!module->mr_local) {
        return OPAL_SUCCESS;
    }
    void *mr = NULL;
    if (0 != mem_reg(module, chan->rbufs, chan->rbuf_stride * (size_t) chan->rd_num, &mr, &chan->rbuf_desc)) {
        return OPAL_ERROR;
    }
    chan->rbuf_mr = (struct fid_mr *) mr;
    return OPAL_SUCCESS;
}

static int channel_post_all_recvs(opal_btl_usnic_module_t *module, int c)
{
    opal_btl_usnic_channel_t *chan = &module->chan[c];
    chan->rbuf_stride = (module->prefix + chan->mtu + OPAL_BTL_USNIC_RECV_SPARE + 63) & ~(size_t) 63;
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

static int channel_open(opal_btl_usnic_module_t *module, int c)
{
    opal_btl_usnic_channel_t *chan = &module->chan[c];
    struct fi_info *info = fi_dupinfo(module->info);
    if (NULL == info) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    info->tx_attr->size = chan->sd_num;
    info->rx_attr->size = chan->rd_num;
    int rc = fi_endpoint(module->domain, info, &chan->ep, NULL);
    fi_freeinfo(info);
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
    if (0 != (rc = fi_cq_open(module->domain, &cq_attr, &chan->cq, NULL))) {
        show_fi_error(module, "fi_cq_open", rc);
        return OPAL_ERROR;
    }
    if (0 != (rc = fi_ep_bind(chan->ep, &chan->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        0 != (rc = fi_ep_bind(chan->ep, &module->av->fid, 0)) || 0 != (rc = fi_enable(chan->ep))) {
        show_fi_error(module, "fi_ep_bind/fi_enable", rc);
        return OPAL_ERROR;
    }
    struct sockaddr_in sin;
    size_t len = sizeof(sin);
    if (0 != (rc = fi_getname(&chan->ep->fid, &sin, &len))) {
        show_fi_error(module, "fi_getname", rc);
        return OPAL_ERROR;
    }
    chan->port = ntohs(sin.sin_port);
    chan->sock_fd = opal_btl_usnic_socket_fd(module->ipv4, chan->port);
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

/* The endpoint of sender id |id| (a process name), NULL if none: peers
 * of our own job by vpid in an array, those of other jobs in a table */
static opal_btl_usnic_endpoint_t *peer_of_id(opal_btl_usnic_module_t *module, uint64_t id)
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

static opal_btl_usnic_endpoint_t *lookup_sender(opal_btl_usnic_engine_t *eng, uint64_t sender)
{
    return peer_of_id(opal_btl_usnic_module_of(eng), sender);
}

static void count_oversized(opal_btl_usnic_module_t *module)
{
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_total_recvs);
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_invalid_recvs);
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_drop_oversized);
}

/* Longer than the channel's MTU: cut short by the provider, never ours */
static bool recv_is_oversized(const opal_btl_usnic_module_t *module, const opal_btl_usnic_recv_seg_t *rseg,
                              size_t len)
{
    return len > module->prefix + module->chan[rseg->channel].mtu;
}

/* Did the datagram come from where its claimed sender sends?  The claim
 * only picks the endpoint whose address to compare (the tag proves the
 * rest); datagrams too short to carry one, or from unknown senders, are
 * the engine's to count. */
static bool source_ok(opal_btl_usnic_module_t *module, const opal_btl_usnic_recv_seg_t *rseg, size_t len,
                      fi_addr_t src)
{
    if (!module->source_checked || len < module->prefix + sizeof(opal_btl_usnic_hdr_t)) {
        return true;
    }
    const opal_btl_usnic_hdr_t *hdr = (const opal_btl_usnic_hdr_t *) (rseg->buf + module->prefix);
    const opal_btl_usnic_endpoint_t *ep = lookup_sender(&module->eng, opal_btl_usnic_host64(hdr->sender));
    if (NULL == ep || src == ep->peer_addr[rseg->channel]) {
        return true;
    }
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_total_recvs);
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_invalid_recvs);
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_drop_bad_source);
    return false;
}

static void handle_recv(opal_btl_usnic_module_t *module, opal_btl_usnic_recv_seg_t *rseg, size_t len, fi_addr_t src)
{
    if (OPAL_UNLIKELY(recv_is_oversized(module, rseg, len))) {
        count_oversized(module);
    } else if (OPAL_UNLIKELY(!source_ok(module, rseg, len, src))) {
        /* counted */
    } else if (OPAL_UNLIKELY(len < module->prefix)) {
        /* not even the provider's prefix: no header of ours to look at */
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_total_recvs);
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_invalid_recvs);
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_drop_truncated);
    } else {
        ++module->eng.rx_buffers_held; /* until re-posted: ACKs sent meanwhile must not grant it */
        opal_btl_usnic_recv_segment(&module->eng, lookup_sender, rseg->buf + module->prefix, len - module->prefix);
        --module->eng.rx_buffers_held;
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
    if (0 == module->eng.stats.num_cq_overruns++) {
        opal_btl_usnic_show_help(false, "cq overrun", opal_process_info.nodename, module->if_name,
                                 chan == &module->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL] ? "priority" : "data",
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
            count_oversized(module); /* providers that report the overrun */
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
    if (module->source_checked) {
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
    opal_btl_usnic_channel_t *chan = &module->chan[c];
    struct fi_cq_msg_entry comps[OPAL_BTL_USNIC_CQ_BATCH];
    fi_addr_t srcs[OPAL_BTL_USNIC_CQ_BATCH];
    int count = 0;
    for (int pass = 0; pass < OPAL_BTL_USNIC_CQ_READS_PER_PASS; ++pass) {
        ssize_t n = cq_read(module, chan, comps, srcs, OPAL_BTL_USNIC_CQ_BATCH);
        if (n > 0) {
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
    if (module->fast_deferred_valid) {
        module->fast_deferred_valid = false;
        opal_btl_usnic_recv_fast_finish(&module->eng, module->fast_deferred_ep, module->fast_deferred_rseg->buf);
        recv_repost(module, module->fast_deferred_rseg);
        --module->eng.rx_buffers_held;
    }
}

bool opal_btl_usnic_module_progress_fast(opal_btl_usnic_module_t *module, uint64_t now)
{
    opal_btl_usnic_engine_set_time(&module->eng, now);
    opal_btl_usnic_channel_t *chan = &module->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    struct fi_cq_msg_entry comp;
    if (module->fast_deferred_valid || module->fast_in_upcall) {
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
        opal_btl_usnic_endpoint_t *ep = NULL;
        ++module->eng.rx_buffers_held; /* re-posted by finish_deferred_fast_recv */
        opal_btl_usnic_fast_t how = OPAL_BTL_USNIC_FAST_DECLINED;
        if (!source_ok(module, rseg, comp.len, src)) {
            how = OPAL_BTL_USNIC_FAST_DROPPED; /* counted */
        } else if (comp.len >= module->prefix && !recv_is_oversized(module, rseg, comp.len)) {
            module->fast_in_upcall = true;
            how = opal_btl_usnic_recv_fast(&module->eng, lookup_sender, rseg->buf + module->prefix,
                                           comp.len - module->prefix, &ep);
            module->fast_in_upcall = false;
        }
        if (OPAL_BTL_USNIC_FAST_TAKEN == how) {
            module->fast_deferred_valid = true;
            module->fast_deferred_ep = ep;
            module->fast_deferred_rseg = rseg;
            return true;
        }
        --module->eng.rx_buffers_held;
        if (OPAL_BTL_USNIC_FAST_DROPPED == how) {
            recv_repost(module, rseg); /* counted */
            return false;
        }
    }
    handle_completion(module, &comp, src);
    return false;
}

int opal_btl_usnic_module_progress(opal_btl_usnic_module_t *module, uint64_t now)
{
    opal_btl_usnic_engine_set_time(&module->eng, now);
    if (OPAL_UNLIKELY(module->inject.on)) {
        inject_release_held(module); /* never hold a datagram across passes */
    }
    finish_deferred_fast_recv(module);
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        if (OPAL_UNLIKELY(0 != module->chan[c].nunposted)) {
            recv_repost_pending(module, &module->chan[c]);
        }
    }
    int count = 0;
    if (!module->prio_found_empty) {
        count += poll_channel(module, OPAL_BTL_USNIC_PRIORITY_CHANNEL);
    }
    module->prio_found_empty = false;
    count += poll_channel(module, OPAL_BTL_USNIC_DATA_CHANNEL);
    count += opal_btl_usnic_engine_progress(&module->eng);
    /* sends complete synchronously on socket providers: reap them now so
     * the credits are back for the next pass */
    return count;
}

/* ===================== BTL entry points ===================== */

static opal_btl_usnic_module_t *usnic_module(struct mca_btl_base_module_t *btl)
{
    return (opal_btl_usnic_module_t *) btl;
}

static mca_btl_base_descriptor_t *usnic_alloc(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                                              uint8_t order, size_t size, uint32_t flags)
{
    (void) order;
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_frag_alloc(&usnic_module(btl)->eng, ep, size, flags);
    OPAL_BTL_USNIC_UNLOCK();
    return (NULL != frag) ? &frag->base : NULL;
}

static int usnic_free(struct mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_frag_free(&usnic_module(btl)->eng, (opal_btl_usnic_send_frag_t *) des);
    OPAL_BTL_USNIC_UNLOCK();
    return OPAL_SUCCESS;
}

/* Pack up to *|size| bytes from |conv| to |dst| (NULL: point into the
 * user's contiguous buffer).  Returns where the data is; sets *|size|. */
static void *convertor_take(opal_convertor_t *conv, void *dst, size_t *size)
{
    struct iovec iov = {.iov_base = dst, .iov_len = *size};
    uint32_t iov_count = 1;
    size_t max_data = *size;
    (void) opal_convertor_pack(conv, &iov, &iov_count, &max_data);
    *size = max_data;
    return iov.iov_base;
}

static mca_btl_base_descriptor_t *prepare_small(opal_btl_usnic_module_t *module, opal_convertor_t *conv,
                                                size_t reserve, size_t *size, uint32_t flags)
{
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_small_frag_alloc(&module->eng);
    if (NULL == frag) {
        return NULL;
    }
    uint8_t *payload = opal_btl_usnic_seg_payload(&frag->seg, sizeof(opal_btl_usnic_hdr_t));
    opal_btl_usnic_frag_init_small(frag, reserve, flags);
    if (0 == *size) {
        /* the PML's header alone */
    } else if (opal_convertor_need_buffers(conv)) {
        convertor_take(conv, payload + reserve, size);
        frag->segments[0].seg_len = reserve + *size;
    } else {
        /* contiguous: reference the user's buffer; copied once at send */
        frag->segments[1].seg_addr.pval = convertor_take(conv, NULL, size);
        frag->segments[1].seg_len = *size;
        frag->base.des_segment_count = 2;
    }
    return &frag->base;
}

static mca_btl_base_descriptor_t *prepare_large(opal_btl_usnic_module_t *module, opal_convertor_t *conv,
                                                size_t reserve, size_t *size, uint32_t flags)
{
    if (reserve > OPAL_BTL_USNIC_LARGE_HDR_SPACE) {
        return NULL;
    }
    bool packed = opal_convertor_need_buffers(conv);
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_large_frag_alloc(&module->eng, packed ? *size : 0);
    if (NULL == frag) {
        return NULL;
    }
    frag->segments[0].seg_addr.pval = frag->hdr_space;
    frag->segments[0].seg_len = reserve;
    frag->segments[1].seg_addr.pval = convertor_take(conv, packed ? frag->pack_buf : NULL, size);
    frag->segments[1].seg_len = *size;
    frag->base.des_segment_count = 2;
    frag->base.des_flags = flags;
    return &frag->base;
}

static mca_btl_base_descriptor_t *usnic_prepare_src(struct mca_btl_base_module_t *btl,
                                                    struct mca_btl_base_endpoint_t *ep, opal_convertor_t *conv,
                                                    uint8_t order, size_t reserve, size_t *size, uint32_t flags)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
    mca_btl_base_descriptor_t *des;
    (void) order;
    if (reserve + *size > btl->btl_max_send_size && reserve < btl->btl_max_send_size) {
        *size = btl->btl_max_send_size - reserve;
    }
    OPAL_BTL_USNIC_LOCK();
    if (reserve + *size <= opal_btl_usnic_max_frag_payload(&module->eng, ep)) {
        des = prepare_small(module, conv, reserve, size, flags);
    } else {
        des = prepare_large(module, conv, reserve, size, flags);
    }
    OPAL_BTL_USNIC_UNLOCK();
    if (NULL != des) {
        ((opal_btl_usnic_send_frag_t *) des)->ep = ep;
    }
    return des;
}

static int usnic_send(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                      mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    OPAL_BTL_USNIC_LOCK();
    /* the fast path posts outside progress: send times must be fresh */
    opal_btl_usnic_engine_t *eng = &usnic_module(btl)->eng;
    opal_btl_usnic_engine_set_time(eng, opal_btl_usnic_clock_usec());
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) des;
    bool chunked = OPAL_BTL_USNIC_FRAG_LARGE == frag->kind; /* read first: a failed send may free it */
    int rc = opal_btl_usnic_frag_submit(ep, frag, tag);
    if (0 == rc && chunked) {
        (void) opal_btl_usnic_engine_send_now(eng); /* its chunks leave now */
    }
    OPAL_BTL_USNIC_UNLOCK();
    return rc;
}

/* ----- emulated RDMA (btl_usnic_put.c has the design notes) ----- */

static struct mca_btl_base_registration_handle_t *usnic_register_mem(struct mca_btl_base_module_t *btl,
                                                                     struct mca_btl_base_endpoint_t *ep,
                                                                     void *base, size_t size, uint32_t flags)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
    opal_btl_usnic_reg_handle_t *handle = (opal_btl_usnic_reg_handle_t *) malloc(sizeof(*handle));
    if (NULL == handle) {
        return NULL;
    }
    if (!(flags & MCA_BTL_REG_FLAG_REMOTE_WRITE)) {
        /* a PUT source needs no registration: never expose it */
        handle->region_id = OPAL_BTL_USNIC_REGION_LOCAL;
        handle->reserved = 0;
        handle->key = 0;
        return handle;
    }
    OPAL_BTL_USNIC_LOCK();
    uint64_t peer = (NULL != ep) ? ep->peer_id : OPAL_BTL_USNIC_ANY_PEER;
    bool ok = opal_btl_usnic_reg_add(&module->eng.regs, base, size, peer, handle);
    if (ok) {
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_regs);
    }
    OPAL_BTL_USNIC_UNLOCK();
    if (!ok) {
        free(handle);
        return NULL; /* the PML falls back to send/receive */
    }
    return handle;
}

static int usnic_deregister_mem(struct mca_btl_base_module_t *btl, struct mca_btl_base_registration_handle_t *handle)
{
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_reg_remove(&usnic_module(btl)->eng.regs, handle);
    OPAL_BTL_USNIC_UNLOCK();
    free(handle);
    return OPAL_SUCCESS;
}

static int usnic_put(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep, void *local_address,
                     uint64_t remote_address, struct mca_btl_base_registration_handle_t *local_handle,
                     struct mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags, int order,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    (void) flags;
    (void) order; /* completion is remote completion: stronger than any order tag */
    if (size > btl->btl_put_limit) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    OPAL_BTL_USNIC_LOCK();
    opal_btl_usnic_engine_set_time(&usnic_module(btl)->eng, opal_btl_usnic_clock_usec());
    int rc = opal_btl_usnic_put_submit(ep, local_address, remote_address, local_handle, remote_handle, size, cbfunc,
                                       cbcontext, cbdata);
    OPAL_BTL_USNIC_UNLOCK();
    return rc;
}

static int usnic_sendi(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       struct opal_convertor_t *conv, void *header, size_t header_size, size_t payload_size,
                       uint8_t order, uint32_t flags, mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **descriptor)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
    (void) order;
    (void) flags;
    if (NULL != descriptor) {
        *descriptor = NULL;
    }
    if (header_size + payload_size > ep->max_frag_payload) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    OPAL_BTL_USNIC_LOCK();
    if (ep->failed) { /* written under the lock by wire_peer_failed */
        OPAL_BTL_USNIC_UNLOCK();
        return OPAL_ERR_RESOURCE_BUSY;
    }
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_small_frag_alloc(&module->eng);
    if (NULL == frag) {
        OPAL_BTL_USNIC_UNLOCK();
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    uint8_t *payload = opal_btl_usnic_seg_payload(&frag->seg, sizeof(opal_btl_usnic_hdr_t));
    memcpy(payload, header, header_size);
    size_t size = payload_size;
    if (payload_size > 0) {
        convertor_take(conv, payload + header_size, &size);
    }
    opal_btl_usnic_engine_set_time(&module->eng, opal_btl_usnic_clock_usec());
    opal_btl_usnic_frag_submit_owned(ep, frag, tag, header_size + size);
    OPAL_BTL_USNIC_UNLOCK();
    return OPAL_SUCCESS;
}

static int usnic_register_error(struct mca_btl_base_module_t *btl, mca_btl_base_module_error_cb_fn_t cbfunc)
{
    usnic_module(btl)->pml_error_cb = cbfunc;
    return OPAL_SUCCESS;
}

#if BTL_VERSION < 330 /* BTL API 3.3.0 dropped checkpoint/restart */
static int usnic_ft_event(int state)
{
    (void) state;
    return OPAL_SUCCESS;
}
#endif

/* ===================== peers ===================== */

/* The peer's module that |module| talks to (index in |remote|), or -1:
 * both processes compute the same one-to-one pairing of their modules,
 * the lower rank's list first (opal_btl_usnic_pair_modules). */
static int match_remote(const opal_btl_usnic_module_t *module, const opal_proc_t *proc,
                        const opal_btl_usnic_modex_t *remote, size_t n)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
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

/* Make |ep| the endpoint its sender id finds (peer_of_id) */
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
    if (peer_of_id(module, ep->peer_id) != ep) {
        return;
    }
    if (opal_btl_usnic_id_jobid(ep->peer_id) != OPAL_PROC_MY_NAME.jobid) {
        (void) opal_hash_table_remove_value_uint64(&module->other_job_peers, ep->peer_id);
    } else {
        module->peers[opal_btl_usnic_id_vpid(ep->peer_id)] = NULL;
    }
}

static int av_insert_peer(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                          const opal_btl_usnic_modex_t *remote)
{
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        struct sockaddr_in sin;
        memset(&sin, 0, sizeof(sin)); /* the provider rejects a non-zero sin_zero */
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = remote->ipv4;
        sin.sin_port = htons(remote->ports[c]);
        fi_addr_t addr = FI_ADDR_NOTAVAIL;
        int rc = fi_av_insert(module->av, &sin, 1, &addr, 0, NULL);
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

/* The keys of both directions with |remote|: ours toward it from its
 * receive key, its toward us from ours (btl_usnic_auth.c).  Both ends
 * must protect the same way, with an algorithm both can run. */
static int endpoint_keys(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                         const opal_btl_usnic_modex_t *remote)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    unsigned alg = opal_btl_usnic_mac_pick(c->mac_algs, remote->mac_algs);
    if (remote->protection != c->protection || (OPAL_BTL_USNIC_PROTECT_NONE != c->protection && 0 == alg)) {
        opal_btl_usnic_show_help(false, "protection mismatch", opal_process_info.nodename, module->if_name,
                                 protection_name(c->protection), c->mac_algs,
                                 opal_get_proc_hostname(ep->proc), remote->if_name,
                                 protection_name(remote->protection), (unsigned) remote->mac_algs);
        return OPAL_ERR_UNREACH;
    }
    uint8_t tx_key[OPAL_BTL_USNIC_KEY_BYTES], rx_key[OPAL_BTL_USNIC_KEY_BYTES];
    opal_btl_usnic_derive_key(remote->recv_key, module->node_id, tx_key);
    opal_btl_usnic_derive_key(module->recv_key, remote->node_id, rx_key);
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
    uint32_t window = effective_window(module, remote);
    int rc = opal_btl_usnic_endpoint_init_rel(ep, &module->eng, window, module->local_modex.isn, remote->isn);
    if (OPAL_SUCCESS == rc) {
        rc = endpoint_keys(module, ep, remote);
    }
    if (OPAL_SUCCESS == rc) {
        opal_btl_usnic_endpoint_limit_mtu(ep, remote->mtu, remote->tiny_mtu);
        rc = av_insert_peer(module, ep, remote);
    }
    if (OPAL_SUCCESS == rc) {
        OBJ_CONSTRUCT(&ep->hotel, opal_hotel_t);
        ep->hotel_ready = true;
        rc = opal_hotel_init(&ep->hotel, (int) ep->window, NULL, (uint32_t) mca_btl_usnic_component.rto_max, 0,
                             hotel_never_evicts);
    }
    if (OPAL_SUCCESS == rc) {
        rc = peer_register(module, ep);
    }
    if (OPAL_SUCCESS != rc) {
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
    OPAL_MODEX_RECV(rc, &mca_btl_usnic_component.super.btl_version, &proc->proc_name, (void **) &remote, &size);
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
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
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
    fprintf(c->map_file, "%s %s -> rank %s %s %s ports %u,%u mtu %u\n", module->if_name, local,
            opal_btl_usnic_id_str(opal_btl_usnic_proc_id(&proc->proc_name)).s,
            opal_get_proc_hostname(proc), peer,
            (unsigned) remote->ports[0], (unsigned) remote->ports[1], (unsigned) remote->mtu);
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
    return peer_of_id(module, opal_btl_usnic_proc_id(&proc->proc_name));
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

static int usnic_add_procs(struct mca_btl_base_module_t *btl, size_t nprocs, struct opal_proc_t **procs,
                           struct mca_btl_base_endpoint_t **endpoints, struct opal_bitmap_t *reachable)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
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

static void drain_send_completions(opal_btl_usnic_module_t *module);

/* Open MPI releases peers only when we finalize: tell each one we leave,
 * with our last ACK, so that a peer that lives on (a parent whose spawned
 * children exit, the other side of a connect/accept) does not wait for
 * ACKs we will never send and declare us dead.  Three copies: one lost
 * goodbye must not cost the peer its btl_usnic_peer_timeout. */
static void say_goodbye(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    for (int copy = 0; copy < 3 && !ep->failed; ++copy) {
        if (OPAL_ERR_TEMP_OUT_OF_RESOURCE == opal_btl_usnic_bye_send(&module->eng, ep)) {
            drain_send_completions(module); /* reap posted sends for credits, then once more */
            (void) opal_btl_usnic_bye_send(&module->eng, ep);
        }
    }
}

static void endpoint_release(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    say_goodbye(module, ep);
    opal_btl_usnic_endpoint_flush(ep, OPAL_ERR_UNREACH);
    peer_unregister(module, ep);
    opal_list_remove_item(&module->all_endpoints, &ep->super);
    OBJ_RELEASE(ep);
}

static int usnic_del_procs(struct mca_btl_base_module_t *btl, size_t nprocs, struct opal_proc_t **procs,
                           struct mca_btl_base_endpoint_t **peers)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
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

/* Finalize: reap the completions of segments still posted (the last ACKs
 * usually) so that they go back to their free lists and are freed with
 * them; receives that arrive now are not delivered any more. */
static void drain_send_completions(opal_btl_usnic_module_t *module)
{
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        opal_btl_usnic_channel_t *chan = &module->chan[c];
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

static int usnic_finalize(struct mca_btl_base_module_t *btl)
{
    opal_btl_usnic_module_t *module = usnic_module(btl);
    opal_btl_usnic_away_stop(); /* before the modules go; not under the lock it takes */
    OPAL_BTL_USNIC_LOCK();
    if (mca_btl_usnic_component.stats > 0) {
        opal_btl_usnic_module_print_stats(module, "final");
    }
    if (module->inject.on) {
        inject_release_held(module);
        opal_output(0, "btl:usnic [rank %u %s] fault injection: %llu duplicated (%llu with data), %llu reordered "
                    "datagrams, %llu forged PUTs",
                    (unsigned) OPAL_PROC_MY_NAME.vpid, module->if_name, (unsigned long long) module->inject.dups,
                    (unsigned long long) module->inject.data_dups, (unsigned long long) module->inject.reorders,
                    (unsigned long long) module->inject.forged_puts);
    }
    opal_list_item_t *item;
    while (NULL != (item = opal_list_get_first(&module->all_endpoints)) &&
           item != opal_list_get_end(&module->all_endpoints)) {
        endpoint_release(module, (opal_btl_usnic_endpoint_t *) item);
    }
    drain_send_completions(module);
    for (int c = OPAL_BTL_USNIC_NUM_CHANNELS - 1; c >= 0; --c) {
        channel_close(&module->chan[c]);
    }
    opal_btl_usnic_engine_fini(&module->eng);
    OBJ_DESTRUCT(&module->all_endpoints);
    OBJ_DESTRUCT(&module->other_job_peers);
    free(module->peers);
    module->peers = NULL;
    if (NULL != module->av) {
        fi_close(&module->av->fid);
    }
    if (NULL != module->domain) {
        fi_close(&module->domain->fid);
    }
    if (NULL != module->fabric) {
        fi_close(&module->fabric->fid);
    }
    fi_freeinfo(module->info);
    free(module->if_name);
    free(module->domain_name);
    free(module->provider);
    OPAL_BTL_USNIC_UNLOCK();
    /* the module memory itself belongs to the component */
    return OPAL_SUCCESS;
}

/* ===================== module setup ===================== */

/* Datagrams our data channel can hold between two progress passes: what
 * the real receive buffer of its socket holds (read from the kernel;
 * rmem_default if the socket cannot be found, e.g. on hardware providers,
 * where the posted receive buffers are the limit too).  The kernel charges
 * a datagram its payload plus about 832 bytes of buffer overhead (212992
 * bytes hold 92 datagrams of 1472 bytes here). */
static uint32_t rx_capacity(const opal_btl_usnic_module_t *module)
{
    const opal_btl_usnic_channel_t *data = &module->chan[OPAL_BTL_USNIC_DATA_CHANNEL];
    long rcvbuf = opal_btl_usnic_socket_rcvbuf(data->sock_fd);
    bool socket_found = rcvbuf > 0;
    if (!socket_found) {
        rcvbuf = opal_btl_usnic_kernel_rmem_default();
    }
    long datagrams = (rcvbuf > 0) ? rcvbuf / (long) (data->mtu + 832) : 92;
    if (!socket_found && datagrams > data->rd_num) {
        datagrams = data->rd_num;
    }
    opal_btl_usnic_verbose(10, "%s: receive buffer %ld bytes: %ld datagrams of %zu bytes", module->if_name, rcvbuf,
                           datagrams, data->mtu);
    return (datagrams > 0) ? (uint32_t) datagrams : 1;
}

/* Window default: keep one peer's un-ACKed data inside half of the
 * receive capacity.  A power of two (see opal_btl_usnic_endpoint_init_rel),
 * at least 16. */
static uint32_t default_window(const opal_btl_usnic_module_t *module)
{
    long datagrams = (long) module->rx_capacity;
    uint32_t w = 16;
    while (w < 4096 && (long) (2 * w) <= datagrams / 2) {
        w *= 2;
    }
    opal_btl_usnic_verbose(10, "%s: default window %u", module->if_name, w);
    return w;
}

/* Does the provider need every posted buffer registered?  (usnic, verbs
 * UD, EFA: FI_MR_LOCAL, or the older mode bit) */
static bool info_needs_mr(const struct fi_info *info)
{
    return 0 != (info->mode & OPAL_BTL_USNIC_FI_MODE_LOCAL_MR) || 0 != (info->domain_attr->mr_mode & FI_MR_LOCAL);
}

static int module_sizes(opal_btl_usnic_module_t *module, struct fi_info *info)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    module->prefix = (info->mode & FI_MSG_PREFIX) ? info->ep_attr->msg_prefix_size : 0;
    size_t mtu = opal_btl_usnic_datagram_mtu(info->ep_attr->max_msg_size, module->prefix,
                                             opal_btl_usnic_if_mtu(module->if_name));
    if (mtu < OPAL_BTL_USNIC_MIN_MTU) {
        opal_btl_usnic_show_help(true, "mtu too small", opal_process_info.nodename, module->if_name,
                                 module->provider, (size_t) info->ep_attr->max_msg_size, module->prefix,
                                 opal_btl_usnic_if_mtu(module->if_name), (size_t) OPAL_BTL_USNIC_MIN_MTU);
        return OPAL_ERR_NOT_AVAILABLE;
    }
    opal_btl_usnic_verbose(5, "%s: datagrams of %zu bytes after a provider prefix of %zu (max_msg_size %zu)",
                           module->domain_name, mtu, module->prefix, (size_t) info->ep_attr->max_msg_size);
    size_t tiny = (0 != c->priority_limit) ? (size_t) c->priority_limit : OPAL_BTL_USNIC_DEFAULT_TINY_MTU;
    if (tiny > mtu) {
        tiny = mtu;
    }
    module->chan[OPAL_BTL_USNIC_DATA_CHANNEL].mtu = mtu;
    module->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL].mtu = tiny;

    int prov_tx = (int) info->tx_attr->size;
    int prov_rx = (int) info->rx_attr->size;
    opal_btl_usnic_channel_t *data = &module->chan[OPAL_BTL_USNIC_DATA_CHANNEL];
    opal_btl_usnic_channel_t *prio = &module->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    data->sd_num = (c->sd_num > 0) ? c->sd_num : (prov_tx < 1024 ? prov_tx : 1024);
    data->rd_num = (c->rd_num > 0) ? c->rd_num : (prov_rx < 512 ? prov_rx : 512);
    prio->sd_num = (c->prio_sd_num > 0) ? c->prio_sd_num : (prov_tx < 256 ? prov_tx : 256);
    prio->rd_num = (c->prio_rd_num > 0) ? c->prio_rd_num : (prov_rx < 256 ? prov_rx : 256);
    module->mr_local = info_needs_mr(info);
    /* gathering a PUT's source would need the user's memory registered:
     * copying into registered segments costs a memcpy of one datagram
     * (tens of ns against microseconds of sending) and no registration */
    module->gather_send = info->tx_attr->iov_limit >= 2 && !module->mr_local;
    /* protection none trusts the fabric entirely: no origin check, and no
     * source lookup per receive either */
    module->source_checked = 0 != (info->caps & FI_SOURCE) && OPAL_BTL_USNIC_PROTECT_NONE != c->protection;
    module->inject_size = info->tx_attr->inject_size;
    opal_btl_usnic_verbose(5, "%s: datagrams up to %zu bytes are sent by fi_inject", module->domain_name,
                           module->inject_size);
    opal_btl_usnic_verbose(5, "%s: %s", module->domain_name,
                           module->gather_send ? "PUT segments are sent from the source buffer (gather send)"
                           : module->mr_local  ? "PUT segments are copied into registered memory"
                                               : "the provider cannot gather: PUT segments are copied");
    opal_btl_usnic_verbose(5, "%s: %s", module->domain_name,
                           module->mr_local ? "the provider needs registered memory (FI_MR_LOCAL): segment "
                                              "and receive buffers are registered once per slab"
                                            : "the provider needs no memory registration");
    return OPAL_SUCCESS;
}

/* The module's secrets and first sequence number, from the kernel: a
 * sequence number nobody can predict is a second fence (behind the tag)
 * against injected data, and stray datagrams of an earlier job on the
 * same ports fall outside the window */
static int module_secrets(opal_btl_usnic_module_t *module, uint32_t *isn_p)
{
    if (0 != opal_btl_usnic_random(module->recv_key, sizeof(module->recv_key)) ||
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
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    module->mem_ops = (opal_btl_usnic_mem_ops_t){.reg = mem_reg, .unreg = mem_unreg, .ctx = module};
    opal_btl_usnic_engine_params_t p = {
        .protect = c->protection,
        .my_name = opal_btl_usnic_proc_id(&OPAL_PROC_MY_NAME),
        .prefix = module->prefix,
        .mtu = module->chan[OPAL_BTL_USNIC_DATA_CHANNEL].mtu,
        .tiny_mtu = module->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL].mtu,
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
        .rx_capacity = module->rx_capacity,
        .gather_send = module->gather_send,
        .mem = module->mr_local ? &module->mem_ops : NULL,
    };
    p.sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = (uint32_t) module->chan[OPAL_BTL_USNIC_DATA_CHANNEL].sd_num;
    p.sd_credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = (uint32_t) module->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL].sd_num;
    return opal_btl_usnic_engine_init(&module->eng, &p, &libfabric_wire, &module->super);
}

static void modex_fill(opal_btl_usnic_module_t *module, uint32_t isn)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    opal_btl_usnic_modex_t *m = &module->local_modex;
    memset(m, 0, sizeof(*m));
    m->proto_version = OPAL_BTL_USNIC_PROTO_VERSION;
    m->ipv4 = module->ipv4;
    m->netmask = module->netmask;
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        m->ports[c] = module->chan[c].port;
    }
    m->mtu = (uint32_t) module->chan[OPAL_BTL_USNIC_DATA_CHANNEL].mtu;
    m->tiny_mtu = (uint32_t) module->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL].mtu;
    m->isn = isn;
    m->window = (mca_btl_usnic_component.window > 0) ? (uint32_t) mca_btl_usnic_component.window
                                                     : default_window(module);
    m->link_speed_mbps = module->link_speed_mbps;
    snprintf(m->provider, sizeof(m->provider), "%s", module->provider);
    m->protection = (uint8_t) c->protection;
    m->mac_algs = (uint8_t) c->mac_algs;
    memcpy(m->recv_key, module->recv_key, sizeof(m->recv_key));
    memcpy(m->node_id, module->node_id, sizeof(m->node_id));
    memcpy(m->agent_key, c->agent_key, sizeof(m->agent_key));
}

int opal_btl_usnic_module_init(opal_btl_usnic_module_t *module, struct fi_info *info)
{
    int rc;
    module->info = fi_dupinfo(info);
    OBJ_CONSTRUCT(&module->all_endpoints, opal_list_t);
    OBJ_CONSTRUCT(&module->other_job_peers, opal_hash_table_t);
    if (NULL == module->info || OPAL_SUCCESS != opal_hash_table_init(&module->other_job_peers, 32)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (OPAL_SUCCESS != (rc = module_sizes(module, info))) {
        return rc;
    }
    if (0 != (rc = fi_fabric(info->fabric_attr, &module->fabric, NULL))) {
        show_fi_error(module, "fi_fabric", rc);
        return OPAL_ERROR;
    }
    opal_btl_usnic_ext_refine(module, NULL); /* netmask, link speed, if name: usnic extension */
    if (0 != (rc = fi_domain(module->fabric, info, &module->domain, NULL))) {
        show_fi_error(module, "fi_domain", rc);
        return OPAL_ERROR;
    }
    struct fi_av_attr av_attr = {.type = FI_AV_MAP};
    if (0 != (rc = fi_av_open(module->domain, &av_attr, &module->av, NULL))) {
        show_fi_error(module, "fi_av_open", rc);
        return OPAL_ERROR;
    }
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        if (OPAL_SUCCESS != (rc = channel_open(module, c))) {
            return rc;
        }
    }
    module->rx_capacity = rx_capacity(module);
    /* Largest fragment: the module template's values as the user set them */
    if (OPAL_SUCCESS != (rc = engine_setup(module))) {
        return rc;
    }
    if (0 != mca_btl_usnic_component.inject_dup_every || 0 != mca_btl_usnic_component.inject_reorder_every ||
        0 != mca_btl_usnic_component.inject_forge_put_every) {
        module->inject.on = true;
        module->inject.dup_every = mca_btl_usnic_component.inject_dup_every;
        module->inject.reorder_every = mca_btl_usnic_component.inject_reorder_every;
        module->inject.forge_put_every = mca_btl_usnic_component.inject_forge_put_every;
    }
    module->super.btl_bandwidth = (mca_btl_usnic_component.bandwidth > 0)
                                      ? (uint32_t) mca_btl_usnic_component.bandwidth
                                      : module->link_speed_mbps;
    uint32_t isn;
    if (OPAL_SUCCESS != (rc = module_secrets(module, &isn))) {
        return rc;
    }
    modex_fill(module, isn);
    return OPAL_SUCCESS;
}

mca_btl_base_module_t opal_btl_usnic_module_template = {
    .btl_component = &mca_btl_usnic_component.super,
    .btl_eager_limit = 32 * 1024,
    .btl_rndv_eager_limit = 4 * 1024,
    .btl_max_send_size = 64 * 1024,
    .btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT,
    .btl_latency = 2,
    /* a PUT completes only once the target has the data (its ACK) */
    .btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE | MCA_BTL_FLAGS_SINGLE_ADD_PROCS | MCA_BTL_FLAGS_PUT |
                 OPAL_BTL_USNIC_FLAGS_REMOTE_COMPLETION,
    /* PUT: ob1's pipeline registers each piece of the receive buffer and
     * PUTs it; pieces of 1 MiB keep registrations few and the window busy */
    .btl_put_limit = 1 << 30,
    .btl_put_alignment = 0,
    .btl_rdma_pipeline_send_length = 64 * 1024,
    .btl_rdma_pipeline_frag_size = 1024 * 1024,
    .btl_min_rdma_pipeline_size = 64 * 1024,
    .btl_registration_handle_size = sizeof(struct mca_btl_base_registration_handle_t),
    .btl_register_mem = usnic_register_mem,
    .btl_deregister_mem = usnic_deregister_mem,
    .btl_put = usnic_put,
    .btl_add_procs = usnic_add_procs,
    .btl_del_procs = usnic_del_procs,
    .btl_finalize = usnic_finalize,
    .btl_alloc = usnic_alloc,
    .btl_free = usnic_free,
    .btl_prepare_src = usnic_prepare_src,
    .btl_send = usnic_send,
    .btl_sendi = usnic_sendi,
    .btl_dump = mca_btl_base_dump,
    .btl_register_error = usnic_register_error,
#if BTL_VERSION < 330
    .btl_ft_event = usnic_ft_event,
#endif
};
