/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The socket wire (btl_usnic_wire.h): two kernel UDP sockets per module,
 * one per channel, bound to the interface's address.
 *
 * Why: libfabric's udp provider sends one datagram of at most 1472 bytes
 * per sendto(), and each costs microseconds of kernel time; bulk data
 * needs fewer, larger sends.  This wire
 *  - uses datagrams as large as the interface MTU allows (MTU - 28, capped
 *    at 65000: 65000 on loopback, 8972 on jumbo frames), with the DF bit set: never
 *    IP fragmentation;
 *  - sends the data segments posted to one peer in a row as one sendmsg
 *    with UDP_SEGMENT (segmentation offload: the kernel or the NIC cuts
 *    it into datagrams), planned by btl_usnic_batch.c; where the kernel
 *    or the path cannot, sendmmsg;
 *  - reads the data socket with UDP_GRO (the kernel hands a run of
 *    datagrams from one peer as one receive, split here) and recvmmsg;
 *  - asks for large socket buffers, reports what it got, and publishes
 *    its receive capacity (the grants) with what the kernel really
 *    charges per datagram, measured at open (btl_usnic_kcharge.c).
 *
 * Posting.  A post on the priority channel (ACKs, tiny messages) goes to
 * the kernel at once.  A post on the data channel joins the channel's
 * queue; the queue goes out at flush (the engine flushes at the end of
 * every entry that posts data), or as soon as it holds an offload send's
 * worth (another datagram of the size just posted would not fit 65507
 * bytes, or 64 datagrams).  A
 * datagram the kernel does not take now (socket buffer full) stays queued
 * for the next pass; the queue holds at most the channel's send credits,
 * so the engine stops posting when it is full.  A datagram's completion
 * is reported when the kernel has taken it.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_batch.h"
#include "btl_usnic_module_int.h"

#ifndef UDP_SEGMENT
#    define UDP_SEGMENT 103 /* Linux 4.18 */
#endif
#ifndef UDP_GRO
#    define UDP_GRO 104 /* Linux 5.0 */
#endif

/* The receive calls, made straight to the kernel: in a threaded process
 * (Open MPI's are) glibc's wrappers of these cancellation points switch
 * asynchronous cancellation on and off around every call (3.4 % of a
 * receiving rank's samples in a 1472-byte stream, bench/profile.sh), and
 * nobody cancels a progress pass.  The sends keep glibc's wrappers, which
 * test/faults/gso_shim.c interposes (and a sender makes ~40x fewer calls). */
static inline ssize_t sock_recvmsg(int fd, struct msghdr *mh, int flags)
{
    return (ssize_t) syscall(SYS_recvmsg, fd, mh, flags);
}

static inline int sock_recvmmsg(int fd, struct mmsghdr *msgs, unsigned n, int flags)
{
    return (int) syscall(SYS_recvmmsg, fd, msgs, n, flags, NULL);
}

#define SOCK_DEFAULT_TINY_MTU 768
#define SOCK_PRIO_CREDITS 256
#define SOCK_RX_MSGS 16     /* receives one recvmmsg takes */
#define SOCK_RX_CALLS 4     /* recvmmsg calls per channel per progress pass */
#define SOCK_GRO_BUF 65536  /* the kernel coalesces at most 64 KiB into one receive */
#define SOCK_TX_MSGS 64     /* datagrams one sendmmsg takes */
#define SOCK_ICMP_RETRIES 2 /* sends again of a datagram refused for an earlier one's ICMP error */
#define SOCK_STAMP_GAP 16   /* us a channel may go unpolled and its datagrams' arrival still be known */
#define SOCK_STAMP_LINGER 50000 /* us arrival stamps stay on after the last batch */
#define SOCK_STAMP_BATCH 4  /* datagrams to one peer in one call that make a batch (bulk data) */
#define SOCK_STAMP_SETTLE 2000 /* us after stamps went on before the kernel surely takes them on arrival */

/* A datagram taken by post, not yet with the kernel */
typedef struct sock_tx_t {
    opal_btl_usnic_send_seg_t *seg;
    opal_btl_usnic_endpoint_t *ep;
} sock_tx_t;

typedef struct sock_channel_t {
    int fd;
    int index;              /* OPAL_BTL_USNIC_*_CHANNEL */
    size_t mtu;             /* largest datagram we accept on it */
    bool gro;               /* receives may be coalesced runs */
    long rcvbuf, sndbuf;    /* what the kernel granted */

    sock_tx_t *tx;          /* ring of datagrams not yet with the kernel, in post order */
    uint32_t tx_head, tx_count, tx_cap;
    size_t tx_bytes;        /* of the queued datagrams */

    size_t rbuf_size;       /* bytes of one receive buffer */
    uint8_t *rbufs;
    struct mmsghdr *rmsgs;
    struct iovec *riovs;
    struct sockaddr_in *rsrcs;
    uint8_t *rctl;          /* one cmsg buffer per receive */
    uint64_t drained_at;    /* engine time before the last receive call that emptied it (see
                               arrival stamps) */
} sock_channel_t;

/* a receive's control messages: the UDP_GRO segment size, the timestamp */
#define SOCK_CTL_SPACE (CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct scm_timestamping)))

struct opal_btl_usnic_sock_state {
    sock_channel_t chan[OPAL_BTL_USNIC_NUM_CHANNELS];
    bool gso;               /* the kernel takes UDP_SEGMENT on our sockets */

    uint8_t *fast_buf;      /* the fast path's receive buffer (priority channel) */
    int64_t clock_offset;   /* the real-time clock less the engine's (us), for kernel timestamps */
    uint64_t clock_offset_at; /* engine time it was read (0: never) */
    bool stamps_able;       /* congestion control on, and the kernel gives arrival stamps */
    bool stamping;          /* ... and they are on now (see stamps_follow_batches) */
    uint64_t stamps_on_at;  /* engine time they went on */
    uint64_t batch_at;      /* engine time a batch last went out or came in on the data channel */

    /* send scratch: one offload send or one sendmmsg */
    struct iovec iov[2 * SOCK_TX_MSGS];
    struct mmsghdr msgs[SOCK_TX_MSGS];
    struct sockaddr_in addrs[SOCK_TX_MSGS];
    uint8_t gso_ctl[CMSG_SPACE(sizeof(uint16_t))];
};
typedef struct opal_btl_usnic_sock_state sock_state_t;

/* ===================== addresses ===================== */

/* A peer's channel address in the endpoint's peer_addr word: the IPv4
 * address (network order) above the port (host order) */
static uint64_t addr_pack(uint32_t ipv4, uint16_t port)
{
    return ((uint64_t) ipv4 << 16) | port;
}

static void addr_unpack(uint64_t packed, struct sockaddr_in *sin)
{
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = (uint32_t) (packed >> 16);
    sin->sin_port = htons((uint16_t) packed);
}

static uint64_t addr_of(const struct sockaddr_in *sin)
{
    return addr_pack(sin->sin_addr.s_addr, ntohs(sin->sin_port));
}

/* ===================== completions ===================== */

static sock_tx_t *tx_at(sock_channel_t *ch, uint32_t i)
{
    return &ch->tx[(ch->tx_head + i) % ch->tx_cap];
}

/* The first |n| queued datagrams left (or are given up: retransmission
 * covers them): their completions, oldest first */
static void tx_complete(opal_btl_usnic_module_t *module, sock_channel_t *ch, uint32_t n)
{
    for (uint32_t i = 0; i < n; ++i) {
        opal_btl_usnic_send_seg_t *seg = tx_at(ch, 0)->seg;
        ch->tx_head = (ch->tx_head + 1) % ch->tx_cap;
        --ch->tx_count;
        ch->tx_bytes -= seg->wire_len;
        opal_btl_usnic_seg_send_complete(&module->eng, seg);
    }
}

static bool is_backpressure(int err)
{
    return EAGAIN == err || EWOULDBLOCK == err || ENOBUFS == err || ENOMEM == err;
}

/* The kernel reports an ICMP error of an earlier datagram (the peer's
 * port closed, no route) or a firewall's verdict on this send instead of
 * sending it */
static bool is_refusal(int err)
{
    return ECONNREFUSED == err || EHOSTUNREACH == err || ENETUNREACH == err || EHOSTDOWN == err ||
           ENETDOWN == err || EPERM == err || EACCES == err;
}

/* ===================== sending ===================== */

/* The iovecs of |seg|'s datagram (its header and inline payload, then a
 * gathered payload); returns how many */
static int seg_iov(const opal_btl_usnic_send_seg_t *seg, struct iovec *iov)
{
    iov[0].iov_base = seg->hdr;
    iov[0].iov_len = opal_btl_usnic_seg_inline_len(seg);
    if (0 == seg->ext_len) {
        return 1;
    }
    iov[1].iov_base = (void *) seg->ext_data;
    iov[1].iov_len = seg->ext_len;
    return 2;
}

/* Queued datagrams from the head that go to the same peer, at most |max| */
static uint32_t same_peer_run(sock_channel_t *ch, uint32_t max)
{
    opal_btl_usnic_endpoint_t *ep = tx_at(ch, 0)->ep;
    uint32_t n = 1;
    while (n < ch->tx_count && n < max && tx_at(ch, n)->ep == ep) {
        ++n;
    }
    return n;
}

/* One offload send of the first |k| queued datagrams (one peer, planned
 * by opal_btl_usnic_gso_run).  Returns 0 or an errno. */
static int send_gso(sock_state_t *st, sock_channel_t *ch, uint32_t k)
{
    int niov = 0;
    for (uint32_t i = 0; i < k; ++i) {
        niov += seg_iov(tx_at(ch, i)->seg, &st->iov[niov]);
    }
    addr_unpack(tx_at(ch, 0)->ep->peer_addr[ch->index], &st->addrs[0]);
    struct msghdr mh = {
        .msg_name = &st->addrs[0],
        .msg_namelen = sizeof(st->addrs[0]),
        .msg_iov = st->iov,
        .msg_iovlen = (size_t) niov,
        .msg_control = st->gso_ctl,
        .msg_controllen = sizeof(st->gso_ctl),
    };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t seg_size = (uint16_t) tx_at(ch, 0)->seg->wire_len;
    memcpy(CMSG_DATA(cm), &seg_size, sizeof(seg_size));
    ssize_t rc;
    do {
        rc = sendmsg(ch->fd, &mh, 0);
    } while (rc < 0 && EINTR == errno);
    return rc < 0 ? errno : 0;
}

/* The first |n| queued datagrams by sendmmsg (one syscall, any peers).
 * Returns how many the kernel took; *|err_p| = the errno that stopped it
 * (0 if all went). */
static uint32_t send_mmsg(sock_state_t *st, sock_channel_t *ch, uint32_t n, int *err_p)
{
    int niov = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const sock_tx_t *t = tx_at(ch, i);
        addr_unpack(t->ep->peer_addr[ch->index], &st->addrs[i]);
        struct msghdr *mh = &st->msgs[i].msg_hdr;
        memset(mh, 0, sizeof(*mh));
        mh->msg_name = &st->addrs[i];
        mh->msg_namelen = sizeof(st->addrs[i]);
        mh->msg_iov = &st->iov[niov];
        mh->msg_iovlen = (size_t) seg_iov(t->seg, &st->iov[niov]);
        niov += (int) mh->msg_iovlen;
    }
    int rc;
    do {
        rc = (1 == n) ? (int) sendmsg(ch->fd, &st->msgs[0].msg_hdr, 0) : sendmmsg(ch->fd, st->msgs, n, 0);
    } while (rc < 0 && EINTR == errno);
    if (rc < 0) {
        *err_p = errno;
        return 0;
    }
    if (1 == n) {
        rc = 1; /* sendmsg returned bytes */
    }
    *err_p = 0;
    return (uint32_t) rc;
}

/* The kernel refused the head datagram for good (a bug, or a datagram the
 * path cannot carry): let it go, once said why.  Retransmission tries
 * again; a peer that never takes it times out with the usual message. */
static void give_up_head(opal_btl_usnic_module_t *module, sock_channel_t *ch, int err)
{
    if (0 == module->eng.stats.num_sock_send_drops) {
        opal_btl_usnic_verbose(1, "%s: a send to peer %s failed: %s (left to retransmission)", module->if_name,
                               opal_btl_usnic_id_str(tx_at(ch, 0)->ep->peer_id).s, strerror(err));
    }
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_sock_send_drops);
    tx_complete(module, ch, 1);
}

/* What this wire keeps of a peer (ep->wire_peer, from add_peer to
 * del_peer): the offload its path takes; NULL once it is gone */
static opal_btl_usnic_gso_path_t *peer_path(const opal_btl_usnic_endpoint_t *ep)
{
    return (opal_btl_usnic_gso_path_t *) ep->wire_peer;
}

static void report_gso_fallback(opal_btl_usnic_module_t *module, const opal_btl_usnic_endpoint_t *ep, int err,
                                opal_btl_usnic_gso_verdict_t verdict)
{
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_gso_fallbacks);
    if (OPAL_BTL_USNIC_GSO_OFF == verdict) {
        opal_btl_usnic_verbose(5, "%s: segmentation offload to peer %s failed (%s): falling back to sendmmsg",
                               module->if_name, opal_btl_usnic_id_str(ep->peer_id).s, strerror(err));
    } else {
        opal_btl_usnic_verbose(5, "%s: segmentation offload to peer %s failed (%s): falling back to %u datagrams "
                               "and %u bytes per send",
                               module->if_name, opal_btl_usnic_id_str(ep->peer_id).s, strerror(err),
                               (unsigned) peer_path(ep)->max_segs, (unsigned) peer_path(ep)->max_bytes);
    }
}

/* Send the first datagrams of the queue: one offload send, or a
 * sendmmsg.  Returns 0 if some left (or were given up), else the errno
 * of back-pressure (the queue waits for the next pass). */
static int send_some(opal_btl_usnic_module_t *module, sock_channel_t *ch)
{
    sock_state_t *st = module->sock;
    opal_btl_usnic_endpoint_t *ep = tx_at(ch, 0)->ep;
    if (ep->failed) {
        tx_complete(module, ch, 1); /* its data is forgotten already (endpoint_flush) */
        return 0;
    }
    uint32_t n = same_peer_run(ch, SOCK_TX_MSGS);
    if (OPAL_BTL_USNIC_DATA_CHANNEL == ch->index && (n >= SOCK_STAMP_BATCH || opal_btl_usnic_cc_pacing(&ep->cc))) {
        st->batch_at = module->eng.now; /* bulk data, or a path that showed a queue */
    }
    if (st->stamping) {
        /* bulk data: the round trips start now, not when the pass began
         * (one clock read per send call, only while stamps are on) */
        uint64_t now = opal_btl_usnic_clock_usec();
        for (uint32_t i = 0; i < n; ++i) {
            opal_btl_usnic_seg_leaves(tx_at(ch, i)->seg, now);
        }
    }
    opal_btl_usnic_gso_path_t *path = peer_path(ep);
    if (n > 1 && NULL != path && opal_btl_usnic_gso_path_on(path)) {
        uint32_t lens[SOCK_TX_MSGS];
        for (uint32_t i = 0; i < n; ++i) {
            lens[i] = tx_at(ch, i)->seg->wire_len;
        }
        uint32_t k = opal_btl_usnic_gso_run(path, lens, n);
        if (k > 1) {
            int err = send_gso(st, ch, k);
            if (0 == err) {
                OPAL_BTL_USNIC_STAT_INC(&module->eng, num_gso_sends);
                OPAL_BTL_USNIC_STAT_ADD(&module->eng, num_gso_segs, k);
                tx_complete(module, ch, k);
                return 0;
            }
            size_t bytes = 0;
            for (uint32_t i = 0; i < k; ++i) {
                bytes += lens[i];
            }
            opal_btl_usnic_gso_verdict_t verdict = opal_btl_usnic_gso_failed(path, err, k, lens[0], bytes);
            if (OPAL_BTL_USNIC_GSO_NOT_OURS != verdict) {
                report_gso_fallback(module, ep, err, verdict);
                return 0; /* the same datagrams again, planned anew */
            }
            if (is_backpressure(err)) {
                return err;
            }
            /* not the offload's fault: the datagrams one by one say which */
        }
        n = k; /* a run the offload cannot take: its datagrams by sendmmsg */
    }
    for (int tries = 0;; ++tries) {
        int err = 0;
        uint32_t sent = send_mmsg(st, ch, n, &err);
        if (sent > 0) {
            if (n > 1) {
                OPAL_BTL_USNIC_STAT_INC(&module->eng, num_mmsg_sends);
            }
            tx_complete(module, ch, sent);
            return 0;
        }
        if (is_backpressure(err)) {
            return err;
        }
        if (!is_refusal(err) || tries >= SOCK_ICMP_RETRIES) {
            give_up_head(module, ch, err);
            return 0;
        }
        /* an earlier datagram's ICMP error, reported instead of sending
         * this one: the error is consumed, send again */
    }
}

/* Hand the channel's queue to the kernel, as far as it takes it */
static void chan_flush(opal_btl_usnic_module_t *module, sock_channel_t *ch)
{
    while (ch->tx_count > 0) {
        if (0 != send_some(module, ch)) {
            OPAL_BTL_USNIC_STAT_INC(&module->eng, num_sock_backlog);
            return;
        }
    }
}

static void tx_push(sock_channel_t *ch, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_seg_t *seg)
{
    sock_tx_t *t = &ch->tx[(ch->tx_head + ch->tx_count) % ch->tx_cap];
    t->seg = seg;
    t->ep = ep;
    ++ch->tx_count;
    ch->tx_bytes += seg->wire_len;
}

/* A datagram straight to the kernel, past an empty queue (ACKs and tiny
 * messages: their latency path).  False if the kernel did not take it
 * now; the queue then handles it and whatever error it was. */
static bool send_direct(opal_btl_usnic_module_t *module, sock_channel_t *ch, opal_btl_usnic_endpoint_t *ep,
                        opal_btl_usnic_send_seg_t *seg)
{
    sock_state_t *st = module->sock;
    addr_unpack(ep->peer_addr[ch->index], &st->addrs[0]);
    struct msghdr mh = {
        .msg_name = &st->addrs[0],
        .msg_namelen = sizeof(st->addrs[0]),
        .msg_iov = st->iov,
        .msg_iovlen = (size_t) seg_iov(seg, st->iov),
    };
    if (sendmsg(ch->fd, &mh, 0) < 0) {
        return false;
    }
    opal_btl_usnic_seg_send_complete(&module->eng, seg);
    return true;
}

static int sock_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_seg_t *seg,
                     int channel)
{
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    sock_channel_t *ch = &module->sock->chan[channel];
    if (OPAL_UNLIKELY(ch->tx_count == ch->tx_cap)) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE; /* more posts than credits: not the engine's way */
    }
    if (OPAL_BTL_USNIC_PRIORITY_CHANNEL == channel && 0 == ch->tx_count && !ep->failed &&
        send_direct(module, ch, ep, seg)) {
        return OPAL_SUCCESS;
    }
    tx_push(ch, ep, seg);
    /* an offload send's worth queued (another datagram like this one
     * would not fit it; whatever the peer's datagram size): out now, so
     * that the first datagrams of a long run do not wait for the last */
    if (OPAL_BTL_USNIC_PRIORITY_CHANNEL == channel ||
        ch->tx_bytes + seg->wire_len > OPAL_BTL_USNIC_UDP_MAX_PAYLOAD || ch->tx_count >= OPAL_BTL_USNIC_GSO_MAX_SEGS) {
        chan_flush(module, ch);
    }
    return OPAL_SUCCESS;
}

static void sock_flush(opal_btl_usnic_engine_t *eng)
{
    opal_btl_usnic_module_t *module = opal_btl_usnic_module_of(eng);
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        if (module->sock->chan[c].tx_count > 0) {
            chan_flush(module, &module->sock->chan[c]);
        }
    }
}

/* The injector's held datagram: queued like any other and sent now if
 * the kernel takes it (else with the queue, later) */
static void sock_post_held(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                           opal_btl_usnic_send_seg_t *seg, int channel)
{
    if (OPAL_SUCCESS != sock_post(&module->eng, ep, seg, channel)) {
        opal_btl_usnic_seg_send_complete(&module->eng, seg); /* no room: as if sent and lost */
        return;
    }
    chan_flush(module, &module->sock->chan[channel]);
}

/* ===================== receiving ===================== */

/* One datagram of a receive, to the engine */
static void recv_datagram(opal_btl_usnic_module_t *module, sock_channel_t *ch, uint8_t *buf, size_t len,
                          uint64_t src, uint64_t arrival)
{
    if (OPAL_UNLIKELY(len > ch->mtu)) {
        opal_btl_usnic_recv_drop(&module->eng, OPAL_BTL_USNIC_DROP_OVERSIZED);
    } else {
        const opal_btl_usnic_datagram_t dg = {.buf = buf, .len = len, .channel = ch->index, .src = src,
                                              .arrival = arrival};
        opal_btl_usnic_recv_segment(&module->eng, &dg);
    }
}

/* The UDP_GRO segment size a coalesced receive carries; 0 without one */
static size_t gro_size(struct msghdr *mh)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); NULL != cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (SOL_UDP == cm->cmsg_level && UDP_GRO == cm->cmsg_type && cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int size = 0;
            memcpy(&size, CMSG_DATA(cm), sizeof(size));
            return size > 0 ? (size_t) size : 0;
        }
    }
    return 0;
}

/* When the kernel received it (its software stamp, the real-time clock),
 * on the engine's clock: |real_minus_mono| us apart; 0 without a stamp */
static uint64_t arrival_of(struct msghdr *mh, int64_t real_minus_mono)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); NULL != cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (SOL_SOCKET == cm->cmsg_level && SCM_TIMESTAMPING == cm->cmsg_type &&
            cm->cmsg_len >= CMSG_LEN(sizeof(struct scm_timestamping))) {
            struct scm_timestamping st; /* ts[0] the software stamp */
            memcpy(&st, CMSG_DATA(cm), sizeof(st));
            int64_t us = (int64_t) st.ts[0].tv_sec * 1000000 + st.ts[0].tv_nsec / 1000 - real_minus_mono;
            return (us > 0) ? (uint64_t) us : 0;
        }
    }
    return 0;
}

/* Software receive stamps on |fd| on or off.  SO_TIMESTAMPING, not
 * SO_TIMESTAMPNS: a socket that ever turned SO_TIMESTAMPNS on keeps, until
 * it is closed, its hold on the kernel's switch that stamps every packet
 * of the host on arrival (a clock read per packet, whoever it is for);
 * turning SO_TIMESTAMPING's receive stamps off lets that hold go. */
static int stamps_set(int fd, bool on)
{
    int flags = on ? (SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE) : 0;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof(flags));
}

/* Re-read the two clocks' offset this often (us): only an adjustment of
 * the real-time clock moves it, and reading it per datagram cost the
 * 8-byte round trip a fifth on loopback */
#define SOCK_CLOCK_OFFSET_AGE 100000u

/* The real-time clock less the engine's (us): converts kernel timestamps */
static int64_t real_minus_mono(opal_btl_usnic_module_t *module)
{
    sock_state_t *st = module->sock;
    uint64_t now = module->eng.now;
    if (0 == st->clock_offset_at || now - st->clock_offset_at >= SOCK_CLOCK_OFFSET_AGE) {
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        uint64_t mono = opal_btl_usnic_clock_usec();
        st->clock_offset = (int64_t) rt.tv_sec * 1000000 + rt.tv_nsec / 1000 - (int64_t) mono;
        st->clock_offset_at = now;
    }
    return st->clock_offset;
}

/* ----- arrival stamps -----
 * The kernel's receive timestamps (stamps_set) tell the congestion
 * control when a datagram reached the host, before any wait for this
 * process: ACK holds and delay samples leave out a busy or descheduled
 * process (btl_usnic_cc.c).  They cost every packet of the host a clock
 * read and every receive a control message: 3-5 % of an 8-byte round
 * trip on loopback, where nothing waits.  So they are on only while
 * batches flow on the data channel (a send of SOCK_STAMP_BATCH datagrams
 * or more to one peer, a receive call that finds as many, a coalesced
 * run: bulk data, what the controller governs; or any send to a peer
 * whose path is paced: a window cut small sends less than a batch, and
 * its ACKs, read after gaps without stamps, would give no sample to grow
 * it back) and for SOCK_STAMP_LINGER after.  Without a stamp, a datagram
 * read within SOCK_STAMP_GAP us of a call that emptied its channel
 * arrived at most that long ago: the engine's time stands for it; after
 * a longer gap its arrival is unknown (OPAL_BTL_USNIC_ARRIVAL_UNKNOWN),
 * and it gives no delay sample and no ACK hold.  The kernel stamps on
 * arrival only once some socket of the host wants stamps, and it learns
 * that in deferred work; until then datagrams come without stamps.  For
 * SOCK_STAMP_SETTLE us after they went on, a stamp later than the start
 * of its receive call counts as none too: a kernel may stamp when we read
 * (SO_TIMESTAMPNS did), and later such a stamp is a datagram that came
 * while the call ran. */

/* Stamps on while batches flow, off SOCK_STAMP_LINGER us after */
static void stamps_follow_batches(opal_btl_usnic_module_t *module)
{
    sock_state_t *st = module->sock;
    bool want = st->stamps_able && module->eng.now - st->batch_at < SOCK_STAMP_LINGER;
    if (OPAL_LIKELY(want == st->stamping)) {
        return;
    }
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        if (0 != stamps_set(st->chan[c].fd, want)) {
            opal_btl_usnic_verbose(5, "%s: no arrival stamps (SO_TIMESTAMPING: %s)", module->if_name, strerror(errno));
            st->stamps_able = false;
        }
    }
    st->stamping = want && st->stamps_able;
    st->stamps_on_at = module->eng.now;
    OPAL_BTL_USNIC_STAT_INC(&module->eng, num_stamp_switches);
}

/* What one receive call knows of its datagrams' arrival */
typedef struct sock_arrivals_t {
    bool stamped;           /* the kernel's stamps are on */
    bool settling;          /* ... since less than SOCK_STAMP_SETTLE */
    int64_t clock_offset;   /* the clocks' offset, for them */
    uint64_t called_at;     /* engine time before the call */
    uint64_t unstamped;     /* the arrival of a datagram without a stamp: 0 (now) or unknown */
} sock_arrivals_t;

static sock_arrivals_t arrivals_before_call(opal_btl_usnic_module_t *module, const sock_channel_t *ch)
{
    bool stamped = module->sock->stamping;
    uint64_t now = module->eng.now;
    bool settling = stamped && now - module->sock->stamps_on_at < SOCK_STAMP_SETTLE;
    if (settling) {
        /* the clock itself: stamps are compared with it, and the pass's
         * time may be older than datagrams that came while it did other
         * work (a clock read per call only while settling: every empty
         * poll paid one, 1.3 % of a 64 KiB stream's receiver) */
        now = opal_btl_usnic_clock_usec();
    }
    sock_arrivals_t a = {.stamped = stamped, .settling = settling,
                         .called_at = now,
                         .unstamped = (module->sock->stamps_able && now > ch->drained_at + SOCK_STAMP_GAP)
                                          ? OPAL_BTL_USNIC_ARRIVAL_UNKNOWN : 0};
    a.clock_offset = stamped ? real_minus_mono(module) : 0;
    return a;
}

static uint64_t arrival_in(struct msghdr *mh, const sock_arrivals_t *a)
{
    uint64_t at = a->stamped ? arrival_of(mh, a->clock_offset) : 0;
    return (0 == at || (a->settling && at > a->called_at)) ? a->unstamped : at;
}

static uint64_t arrival_counted(opal_btl_usnic_module_t *module, struct msghdr *mh, const sock_arrivals_t *a)
{
    uint64_t at = arrival_in(mh, a);
    if (OPAL_UNLIKELY(OPAL_BTL_USNIC_ARRIVAL_UNKNOWN == at)) {
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_unknown_arrivals);
    } else if (0 != at) {
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_stamped_recvs);
    }
    return at;
}

/* One receive (a datagram, or a coalesced run of them from one peer) */
static void recv_one(opal_btl_usnic_module_t *module, sock_channel_t *ch, int i, size_t len,
                     const sock_arrivals_t *arrivals)
{
    struct msghdr *mh = &ch->rmsgs[i].msg_hdr;
    uint64_t arrival = arrival_counted(module, mh, arrivals);
    uint8_t *buf = (uint8_t *) ch->riovs[i].iov_base;
    uint64_t src = addr_of(&ch->rsrcs[i]);
    size_t stored = (len < ch->rbuf_size) ? len : ch->rbuf_size;
    size_t seg = ch->gro ? gro_size(mh) : 0;
    opal_btl_usnic_span_t spans[OPAL_BTL_USNIC_GSO_MAX_SEGS * 2];
    unsigned lost = 0;
    unsigned n = opal_btl_usnic_gro_split(len, stored, seg, spans, sizeof(spans) / sizeof(spans[0]), &lost);
    if (OPAL_UNLIKELY(0 != lost)) {
        if (0 == n) {
            /* one datagram longer than any we accept */
            opal_btl_usnic_recv_drop(&module->eng, OPAL_BTL_USNIC_DROP_OVERSIZED);
        } else {
            OPAL_BTL_USNIC_STAT_ADD(&module->eng, num_gro_truncated, lost); /* whole ones of ours, lost: retransmitted */
        }
    }
    if (n > 1) {
        module->sock->batch_at = module->eng.now; /* only bulk data is sent segmented */
        OPAL_BTL_USNIC_STAT_INC(&module->eng, num_gro_recvs);
        OPAL_BTL_USNIC_STAT_ADD(&module->eng, num_gro_segs, n);
    }
    for (unsigned s = 0; s < n; ++s) {
        recv_datagram(module, ch, buf + spans[s].off, spans[s].len, src, arrival);
    }
}

/* Receive what the channel holds, up to SOCK_RX_CALLS full recvmmsg
 * calls.  Returns the number of receives. */
static int chan_poll(opal_btl_usnic_module_t *module, sock_channel_t *ch)
{
    int count = 0;
    for (int call = 0; call < SOCK_RX_CALLS; ++call) {
        sock_arrivals_t arrivals = arrivals_before_call(module, ch);
        for (int i = 0; i < SOCK_RX_MSGS; ++i) {
            ch->rmsgs[i].msg_hdr.msg_namelen = sizeof(ch->rsrcs[i]);
            ch->rmsgs[i].msg_hdr.msg_controllen = (ch->gro || arrivals.stamped) ? SOCK_CTL_SPACE : 0;
            ch->rmsgs[i].msg_hdr.msg_flags = 0;
        }
        /* MSG_TRUNC: msg_len says the real length, so a datagram longer
         * than the buffer shows as such */
        int n = sock_recvmmsg(ch->fd, ch->rmsgs, SOCK_RX_MSGS, MSG_DONTWAIT | MSG_TRUNC);
        if (n <= 0) {
            if (n < 0 && EAGAIN != errno && EWOULDBLOCK != errno && EINTR != errno) {
                OPAL_BTL_USNIC_STAT_INC(&module->eng, num_recv_errors); /* an ICMP error of our sends */
                continue;
            }
            ch->drained_at = arrivals.called_at;
            break;
        }
        if (n >= SOCK_STAMP_BATCH && OPAL_BTL_USNIC_DATA_CHANNEL == ch->index) {
            module->sock->batch_at = arrivals.called_at;
        }
        /* the clock moves within a long pass (ACK holds, btl_usnic_cc.c) */
        opal_btl_usnic_engine_set_time(&module->eng, opal_btl_usnic_clock_usec());
        for (int i = 0; i < n; ++i) {
            recv_one(module, ch, i, ch->rmsgs[i].msg_len, &arrivals);
        }
        count += n;
        if (n < SOCK_RX_MSGS) {
            ch->drained_at = arrivals.called_at;
            break;
        }
    }
    return count;
}

/* One tiny receive of the priority channel for the engine's fast path
 * (see opal_btl_usnic_transport_t.progress_fast) */
static bool sock_progress_fast(opal_btl_usnic_module_t *module)
{
    sock_state_t *st = module->sock;
    sock_channel_t *ch = &st->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL];
    if (!opal_btl_usnic_recv_fast_ready(&module->eng)) {
        return false;
    }
    stamps_follow_batches(module);
    struct sockaddr_in sin;
    uint8_t ctl[SOCK_CTL_SPACE];
    struct iovec iov = {.iov_base = st->fast_buf, .iov_len = ch->mtu + 1};
    sock_arrivals_t arrivals = arrivals_before_call(module, ch);
    struct msghdr mh = {.msg_name = &sin, .msg_namelen = sizeof(sin), .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = arrivals.stamped ? ctl : NULL,
                        .msg_controllen = arrivals.stamped ? sizeof(ctl) : 0};
    ssize_t len = sock_recvmsg(ch->fd, &mh, MSG_DONTWAIT | MSG_TRUNC);
    if (len < 0) {
        module->prio_found_empty = (EAGAIN == errno || EWOULDBLOCK == errno);
        if (module->prio_found_empty) {
            ch->drained_at = arrivals.called_at;
        }
        return false;
    }
    uint64_t src = addr_of(&sin);
    uint64_t arrival = arrival_counted(module, &mh, &arrivals);
    if ((size_t) len > ch->mtu) {
        recv_datagram(module, ch, st->fast_buf, (size_t) len, src, arrival); /* counts it */
        return false;
    }
    const opal_btl_usnic_datagram_t dg = {.buf = st->fast_buf, .len = (size_t) len, .channel = ch->index, .src = src,
                                          .arrival = arrival};
    opal_btl_usnic_fast_t how = opal_btl_usnic_recv_fast(&module->eng, &dg, NULL);
    if (OPAL_BTL_USNIC_FAST_TAKEN == how) {
        return true; /* nothing of fast_buf is kept: the next read may reuse it */
    }
    if (OPAL_BTL_USNIC_FAST_DECLINED == how) {
        opal_btl_usnic_recv_segment(&module->eng, &dg);
    }
    return false;
}

static int sock_progress(opal_btl_usnic_module_t *module)
{
    sock_state_t *st = module->sock;
    (void) opal_btl_usnic_recv_fast_finish(&module->eng);
    sock_flush(&module->eng); /* what the kernel did not take last time */
    stamps_follow_batches(module);
    int count = 0;
    if (!module->prio_found_empty) {
        count += chan_poll(module, &st->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL]);
    }
    module->prio_found_empty = false;
    count += chan_poll(module, &st->chan[OPAL_BTL_USNIC_DATA_CHANNEL]);
    return count;
}

/* Finalize: the queues out, waiting a little for room in the socket
 * buffers (the goodbyes are in them) */
static void sock_drain(opal_btl_usnic_module_t *module)
{
    if (NULL == module->sock) {
        return;
    }
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        sock_channel_t *ch = &module->sock->chan[c];
        for (int wait = 0; ch->fd >= 0 && ch->tx_count > 0 && wait < 100; ++wait) {
            chan_flush(module, ch);
            if (ch->tx_count > 0) {
                struct pollfd pfd = {.fd = ch->fd, .events = POLLOUT};
                (void) poll(&pfd, 1, 1);
            }
        }
    }
}

static void sock_quiesce(opal_btl_usnic_module_t *module)
{
    (void) module; /* the queues are the only thing held, and drain empties them */
}

/* ===================== peers ===================== */

static int sock_add_peer(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                         const opal_btl_usnic_modex_t *remote)
{
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        ep->peer_addr[c] = addr_pack(remote->ipv4, remote->ports[c]);
    }
    opal_btl_usnic_gso_path_t *path = (opal_btl_usnic_gso_path_t *) malloc(sizeof(*path));
    if (NULL == path) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    opal_btl_usnic_gso_path_init(path, module->sock->gso);
    ep->wire_peer = path;
    return OPAL_SUCCESS;
}

/* What is queued for |ep| goes to the kernel first (its goodbye among
 * it); whatever the kernel still refuses is sent without offload */
static void sock_del_peer(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    sock_flush(&module->eng);
    free(ep->wire_peer);
    ep->wire_peer = NULL;
}

/* The path's offload as this wire learned it, for the statistics */
static void sock_describe_peer(opal_btl_usnic_module_t *module, const opal_btl_usnic_endpoint_t *ep, char *buf,
                               size_t len)
{
    (void) module;
    const opal_btl_usnic_gso_path_t *path = peer_path(ep);
    if (NULL != path) {
        snprintf(buf, len, " gso_segs=%u gso_bytes=%u", (unsigned) path->max_segs, (unsigned) path->max_bytes);
    }
}

/* ===================== open and close ===================== */

static void show_sock_error(opal_btl_usnic_module_t *module, const char *call, int err)
{
    opal_btl_usnic_show_help(false, "socket wire failed", opal_process_info.nodename, module->if_name, call,
                             strerror(err));
    snprintf(opal_btl_usnic_globals.open_why, sizeof(opal_btl_usnic_globals.open_why),
             "the socket wire could not open a UDP socket on %s: %s: %s (errno %d)", module->if_name, call,
             strerror(err), err);
}

/* A non-blocking UDP socket bound to |ipv4| (any port), with the DF bit
 * set: a datagram the path cannot carry is lost (or fails) instead of
 * fragmenting.  With the path MTU search on, IP_PMTUDISC_PROBE: the
 * kernel sends up to the interface's MTU whatever ICMP told it about the
 * route, so a forged "fragmentation needed" can neither shrink nor fail
 * our sends; the search (btl_usnic_pmtu.c) finds what the path carries. */
static int bound_socket(uint32_t ipv4, int *err_p, const char **call_p)
{
    *call_p = "socket";
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err_p = errno;
        return -1;
    }
    *call_p = "bind";
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = ipv4};
    int pmtu = opal_btl_usnic_globals.pmtu_discovery ? IP_PMTUDISC_PROBE : IP_PMTUDISC_DO;
    if (0 != bind(fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu))) {
        *err_p = errno;
        close(fd);
        return -1;
    }
    return fd;
}

bool opal_btl_usnic_wire_sock_usable(uint32_t ipv4, char *why, size_t len)
{
    int err = 0;
    const char *call;
    int fd = bound_socket(ipv4, &err, &call);
    if (fd < 0) {
        snprintf(why, len, "a UDP socket on the interface's address: %s: %s (errno %d)", call, strerror(err), err);
        return false;
    }
    close(fd);
    return true;
}

/* What our receive side holds between two progress passes, in bytes of
 * the kernel's charge, and what one datagram costs of it (measured by
 * btl_usnic_kcharge.c: 832 bytes for a small one on Linux 6.1, 65832 for
 * 65000).  A peer's datagrams land on either socket, so the smaller
 * buffer is the capacity. */
static void rx_capacity(opal_btl_usnic_module_t *module)
{
    sock_state_t *st = module->sock;
    long data = st->chan[OPAL_BTL_USNIC_DATA_CHANNEL].rcvbuf;
    long prio = st->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL].rcvbuf;
    long held = (prio < data) ? prio : data;
    size_t mtu = st->chan[OPAL_BTL_USNIC_DATA_CHANNEL].mtu;
    opal_btl_usnic_charge_t *charge = &module->caps.rx_charge;
    int measured = opal_btl_usnic_kernel_charges(module->ipv4, mtu, charge);
    module->caps.rx_capacity = (held > 0) ? (uint64_t) held : 0;
    opal_btl_usnic_verbose(5, "%s: receive buffers %ld bytes (data) and %ld (priority): %ld held; a datagram "
                           "costs %u bytes (up to 64), %u (1472), %u (%zu) (%d sizes measured)",
                           module->if_name, data, prio, held, opal_btl_usnic_charge_of(charge, 64),
                           opal_btl_usnic_charge_of(charge, 1472), opal_btl_usnic_charge_of(charge, mtu), mtu,
                           measured);
}

static int chan_alloc(sock_channel_t *ch, uint32_t credits)
{
    ch->tx_cap = credits;
    ch->tx = (sock_tx_t *) calloc(credits, sizeof(*ch->tx));
    ch->rbuf_size = ch->gro ? SOCK_GRO_BUF : ch->mtu + 1;
    ch->rbufs = (uint8_t *) malloc(ch->rbuf_size * SOCK_RX_MSGS);
    ch->rmsgs = (struct mmsghdr *) calloc(SOCK_RX_MSGS, sizeof(*ch->rmsgs));
    ch->riovs = (struct iovec *) calloc(SOCK_RX_MSGS, sizeof(*ch->riovs));
    ch->rsrcs = (struct sockaddr_in *) calloc(SOCK_RX_MSGS, sizeof(*ch->rsrcs));
    ch->rctl = (uint8_t *) calloc(SOCK_RX_MSGS, SOCK_CTL_SPACE);
    if (NULL == ch->tx || NULL == ch->rbufs || NULL == ch->rmsgs || NULL == ch->riovs || NULL == ch->rsrcs ||
        NULL == ch->rctl) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (int i = 0; i < SOCK_RX_MSGS; ++i) {
        ch->riovs[i].iov_base = ch->rbufs + (size_t) i * ch->rbuf_size;
        ch->riovs[i].iov_len = ch->rbuf_size;
        struct msghdr *mh = &ch->rmsgs[i].msg_hdr;
        mh->msg_name = &ch->rsrcs[i];
        mh->msg_iov = &ch->riovs[i];
        mh->msg_iovlen = 1;
        mh->msg_control = ch->rctl + (size_t) i * SOCK_CTL_SPACE;
    }
    return OPAL_SUCCESS;
}

/* One channel's socket: bound, buffers asked for, coalescing where
 * wanted and possible; its port goes into the caps */
static int chan_open(opal_btl_usnic_module_t *module, int c, int rcvbuf, bool want_gro)
{
    opal_btl_usnic_component_t *comp = &opal_btl_usnic_globals;
    sock_channel_t *ch = &module->sock->chan[c];
    int err = 0;
    const char *call;
    ch->index = c;
    ch->fd = bound_socket(module->ipv4, &err, &call);
    if (ch->fd < 0) {
        show_sock_error(module, call, err);
        return OPAL_ERR_UNREACH;
    }
    ch->rcvbuf = opal_btl_usnic_socket_buffer(ch->fd, SO_RCVBUFFORCE, SO_RCVBUF, rcvbuf);
    ch->sndbuf = opal_btl_usnic_socket_buffer(ch->fd, SO_SNDBUFFORCE, SO_SNDBUF, comp->sock_sndbuf);
    int one = 1;
    ch->gro = want_gro && 0 == setsockopt(ch->fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
    if (want_gro && !ch->gro) {
        opal_btl_usnic_verbose(5, "%s: no coalesced receives (UDP_GRO: %s)", module->if_name, strerror(errno));
    }
    /* arrival stamps (see stamps_follow_batches) */
    if (!comp->congestion_control || 0 != stamps_set(ch->fd, true)) {
        module->sock->stamps_able = false;
    }
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    if (0 != getsockname(ch->fd, (struct sockaddr *) &sin, &len)) {
        show_sock_error(module, "getsockname", errno);
        return OPAL_ERROR;
    }
    module->caps.port[c] = ntohs(sin.sin_port);
    return OPAL_SUCCESS;
}

/* Does this kernel take UDP_SEGMENT?  (Setting the socket's default
 * segment size to 0, "none", is harmless and fails where unknown.) */
static bool probe_gso(opal_btl_usnic_module_t *module, int fd)
{
    if (!opal_btl_usnic_globals.sock_gso) {
        opal_btl_usnic_verbose(5, "%s: no segmentation offload (btl_usnic_sock_gso false)", module->if_name);
        return false;
    }
    int zero = 0;
    if (0 != setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero))) {
        opal_btl_usnic_verbose(5, "%s: no segmentation offload (UDP_SEGMENT: %s): sendmmsg", module->if_name,
                               strerror(errno));
        return false;
    }
    return true;
}

/* Datagram sizes of the two channels, from the interface MTU and the
 * parameters */
static int sock_sizes(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    sock_state_t *st = module->sock;
    int if_mtu = opal_btl_usnic_if_mtu(module->if_name);
    size_t mtu = opal_btl_usnic_datagram_cap(
        opal_btl_usnic_datagram_mtu(OPAL_BTL_USNIC_UDP_MAX_PAYLOAD, 0, if_mtu > 0 ? if_mtu : 1500));
    if (mtu < OPAL_BTL_USNIC_MIN_MTU) {
        opal_btl_usnic_show_help(true, "mtu too small", opal_process_info.nodename, module->if_name, "socket",
                                 (size_t) OPAL_BTL_USNIC_UDP_MAX_PAYLOAD, (size_t) 0, if_mtu,
                                 (size_t) OPAL_BTL_USNIC_MIN_MTU);
        return OPAL_ERR_NOT_AVAILABLE;
    }
    size_t tiny = (0 != c->priority_limit) ? (size_t) c->priority_limit : SOCK_DEFAULT_TINY_MTU;
    st->chan[OPAL_BTL_USNIC_DATA_CHANNEL].mtu = mtu;
    st->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL].mtu = (tiny < mtu) ? tiny : mtu;
    return OPAL_SUCCESS;
}

/* Send credits of the data channel: the datagrams its queue may hold,
 * about 4 MiB of them (they also size the engine's first free lists) */
static uint32_t data_credits(size_t mtu)
{
    size_t n = (size_t) (4u << 20) / mtu;
    return (uint32_t) (n < 64 ? 64 : n > 1024 ? 1024 : n);
}

static void sock_caps(opal_btl_usnic_module_t *module)
{
    sock_state_t *st = module->sock;
    opal_btl_usnic_transport_caps_t *caps = &module->caps;
    for (int c = 0; c < OPAL_BTL_USNIC_NUM_CHANNELS; ++c) {
        caps->max_datagram[c] = st->chan[c].mtu;
    }
    size_t mtu = st->chan[OPAL_BTL_USNIC_DATA_CHANNEL].mtu;
    caps->prefix = 0;
    caps->needs_mr = false;
    caps->gathers = true; /* sendmsg takes a header and a payload from elsewhere */
    caps->reports_source = OPAL_BTL_USNIC_PROTECT_NONE != opal_btl_usnic_globals.protection;
    caps->inject_size = 0;
    caps->send_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = data_credits(mtu);
    caps->send_credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = SOCK_PRIO_CREDITS;
    /* a batch: the datagrams of one offload send */
    size_t batch = OPAL_BTL_USNIC_UDP_MAX_PAYLOAD / mtu;
    caps->max_batch = (uint32_t) (batch < 1 ? 1 : batch > OPAL_BTL_USNIC_GSO_MAX_SEGS ? OPAL_BTL_USNIC_GSO_MAX_SEGS
                                                                                      : batch);
}

/* An IPv4 address on an interface that is up */
static int sock_device_wanted(const struct ifaddrs *i)
{
    return NULL != i->ifa_addr && AF_INET == i->ifa_addr->sa_family && (i->ifa_flags & IFF_UP) ? 1 : 0;
}

static void sock_device_fill(const struct ifaddrs *i, opal_btl_usnic_device_t *dev)
{
    snprintf(dev->if_name, sizeof(dev->if_name), "%s", i->ifa_name);
    snprintf(dev->domain_name, sizeof(dev->domain_name), "%s", i->ifa_name);
    snprintf(dev->provider, sizeof(dev->provider), "udp");
    dev->ipv4 = ((const struct sockaddr_in *) i->ifa_addr)->sin_addr.s_addr;
    dev->netmask = NULL != i->ifa_netmask ? ((const struct sockaddr_in *) i->ifa_netmask)->sin_addr.s_addr
                                          : htonl(0xffffff00u); /* the /24 other wires assume */
    dev->wire_data = NULL;
}

/* ===================== discovery ===================== */

/* The host's IPv4 interfaces that are up: the kernel's UDP is what the
 * udp provider would have offered on them, without loading libfabric */
static int sock_discover(const char *provider, opal_btl_usnic_device_list_t *list, char *why, size_t len)
{
    memset(list, 0, sizeof(*list));
    if (0 != strcmp(provider, "udp")) {
        return OPAL_SUCCESS; /* only udp's datagrams are ours to speak */
    }
    struct ifaddrs *ifs = NULL;
    if (0 != getifaddrs(&ifs)) {
        snprintf(why, len, "getifaddrs: %s", strerror(errno));
        return OPAL_ERROR;
    }
    int n = 0;
    for (const struct ifaddrs *i = ifs; NULL != i; i = i->ifa_next) {
        n += sock_device_wanted(i);
    }
    list->devices = (opal_btl_usnic_device_t *) calloc(n > 0 ? (size_t) n : 1, sizeof(*list->devices));
    if (NULL == list->devices) {
        freeifaddrs(ifs);
        snprintf(why, len, "out of memory");
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (const struct ifaddrs *i = ifs; NULL != i; i = i->ifa_next) {
        if (sock_device_wanted(i)) {
            sock_device_fill(i, &list->devices[list->count++]);
        }
    }
    freeifaddrs(ifs);
    return OPAL_SUCCESS;
}

static void sock_release(opal_btl_usnic_device_list_t *list)
{
    free(list->devices);
    memset(list, 0, sizeof(*list));
}

/* ===================== open and close ===================== */

/* Netmask (found at discovery) and link speed (sysfs, else the
 * link_speed_default parameter) of the module's interface */
static void sock_if_facts(opal_btl_usnic_module_t *module, const opal_btl_usnic_device_t *dev)
{
    module->netmask = dev->netmask;
    int speed = opal_btl_usnic_if_speed_mbps(module->if_name);
    module->link_speed_mbps = speed > 0 ? (uint32_t) speed : (uint32_t) opal_btl_usnic_globals.link_speed_default;
    char mask[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = module->netmask};
    opal_btl_usnic_verbose(5, "%s: netmask %s, link %u Mb/s (%s)", module->if_name,
                           NULL != inet_ntop(AF_INET, &a, mask, sizeof(mask)) ? mask : "?",
                           (unsigned) module->link_speed_mbps, speed > 0 ? "sysfs" : "link_speed_default");
}

static int sock_open(opal_btl_usnic_module_t *module, const opal_btl_usnic_device_t *dev)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    module->sock = (sock_state_t *) calloc(1, sizeof(*module->sock));
    if (NULL == module->sock) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    sock_state_t *st = module->sock;
    for (int ch = 0; ch < OPAL_BTL_USNIC_NUM_CHANNELS; ++ch) {
        st->chan[ch].fd = -1;
    }
    sock_if_facts(module, dev);
    int rc = sock_sizes(module);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    st->stamps_able = true; /* unless a channel cannot have them */
    /* the priority channel as deep as the data channel: tiny messages
     * land there, as many in flight as the grants allow */
    if (OPAL_SUCCESS != (rc = chan_open(module, OPAL_BTL_USNIC_PRIORITY_CHANNEL, c->sock_rcvbuf, false)) ||
        OPAL_SUCCESS != (rc = chan_open(module, OPAL_BTL_USNIC_DATA_CHANNEL, c->sock_rcvbuf, c->sock_gro))) {
        return rc;
    }
    st->stamping = st->stamps_able; /* on from the start, off after the first pass without batches */
    if (c->congestion_control && !st->stamps_able) {
        opal_btl_usnic_verbose(5, "%s: no arrival stamps (SO_TIMESTAMPING refused): the congestion control's "
                               "delay samples keep only what was read at once", module->if_name);
    }
    st->gso = probe_gso(module, st->chan[OPAL_BTL_USNIC_DATA_CHANNEL].fd);
    sock_caps(module);
    for (int ch = 0; ch < OPAL_BTL_USNIC_NUM_CHANNELS; ++ch) {
        if (OPAL_SUCCESS != chan_alloc(&st->chan[ch], module->caps.send_credits[ch])) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    st->fast_buf = (uint8_t *) malloc(st->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL].mtu + 1);
    if (NULL == st->fast_buf) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    rx_capacity(module);
    module->wire_flags = (uint8_t) ((st->gso ? OPAL_BTL_USNIC_WIRE_FLAG_GSO : 0) |
                                    (st->chan[OPAL_BTL_USNIC_DATA_CHANNEL].gro ? OPAL_BTL_USNIC_WIRE_FLAG_GRO : 0));
    const sock_channel_t *data = &st->chan[OPAL_BTL_USNIC_DATA_CHANNEL];
    opal_btl_usnic_verbose(5, "%s: socket wire: datagrams of %zu bytes (tiny %zu), segmentation offload %s (%u a "
                           "send), coalesced receives %s; data socket buffers: receive %ld bytes granted of %d "
                           "asked, send %ld of %d",
                           module->if_name, data->mtu, st->chan[OPAL_BTL_USNIC_PRIORITY_CHANNEL].mtu,
                           st->gso ? "on" : "off", (unsigned) module->caps.max_batch, data->gro ? "on" : "off",
                           data->rcvbuf, c->sock_rcvbuf, data->sndbuf, c->sock_sndbuf);
    return OPAL_SUCCESS;
}

/* Close the sockets; datagrams still queued are given up (their
 * completions, so that every segment is back on its free list) */
static void sock_close(opal_btl_usnic_module_t *module)
{
    sock_state_t *st = module->sock;
    if (NULL == st) {
        return;
    }
    for (int c = OPAL_BTL_USNIC_NUM_CHANNELS - 1; c >= 0; --c) {
        sock_channel_t *ch = &st->chan[c];
        if (NULL != ch->tx) {
            tx_complete(module, ch, ch->tx_count);
        }
        if (ch->fd >= 0) {
            close(ch->fd);
            ch->fd = -1;
        }
        free(ch->tx);
        free(ch->rbufs);
        free(ch->rmsgs);
        free(ch->riovs);
        free(ch->rsrcs);
        free(ch->rctl);
        memset(ch, 0, sizeof(*ch));
        ch->fd = -1;
    }
}

static void sock_fini(opal_btl_usnic_module_t *module)
{
    if (NULL == module->sock) {
        return;
    }
    free(module->sock->fast_buf);
    free(module->sock);
    module->sock = NULL;
}

/* Nothing is registered: caps.needs_mr is false, the engine never asks */
static int sock_mem_reg(void *module, void *base, size_t len, void **handle_p, void **desc_p)
{
    (void) module;
    (void) base;
    (void) len;
    *handle_p = NULL;
    *desc_p = NULL;
    return OPAL_SUCCESS;
}

static void sock_mem_unreg(void *module, void *handle)
{
    (void) module;
    (void) handle;
}

const opal_btl_usnic_transport_t opal_btl_usnic_wire_sock = {
    .name = "socket",
    .kind = OPAL_BTL_USNIC_WIRE_SOCKET,
    .discover = sock_discover,
    .release = sock_release,
    .open = sock_open,
    .add_peer = sock_add_peer,
    .del_peer = sock_del_peer,
    .describe_peer = sock_describe_peer,
    .engine = {.post = sock_post, .flush = sock_flush},
    .post_held = sock_post_held,
    .progress = sock_progress,
    .progress_fast = sock_progress_fast,
    .drain = sock_drain,
    .quiesce = sock_quiesce,
    .close = sock_close,
    .fini = sock_fini,
    .mem_reg = sock_mem_reg,
    .mem_unreg = sock_mem_unreg,
};
