/*
 * Datagram endpoints over a non-blocking UDP socket.  Every post is
 * checked against the contract (prefix, sizes, descriptors, context,
 * addresses) before anything is sent or queued.
 */
#include "dgcheck.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#define CTX_MAGIC1 0x6467636865636b31ull	/* "dgcheck1" */
#define CTX_MAGIC2 0x6467636865636b32ull
#define CTX_MAGIC3 0x6467636865636b33ull
#define PREFIX_FILL 0xA5
#define SOCK_BUF (4 << 20)

enum send_kind { SEND_NORMAL, SEND_INJECT_FLAG, SEND_INJECT };

/* ---- FI_CONTEXT: the provider owns the caller's fi_context ---- */

static void ctx_stamp(struct dgcheck_op *op)
{
	struct fi_context *c = op->ctx;

	c->internal[0] = op;
	c->internal[1] = (void *) ((uintptr_t) op ^ CTX_MAGIC1);
	c->internal[2] = (void *) ((uintptr_t) c ^ CTX_MAGIC2);
	c->internal[3] = (void *) (uintptr_t) CTX_MAGIC3;
}

static int ctx_intact(const struct dgcheck_op *op)
{
	const struct fi_context *c = op->ctx;

	return c->internal[0] == op &&
	       c->internal[1] == (void *) ((uintptr_t) op ^ CTX_MAGIC1) &&
	       c->internal[2] == (void *) ((uintptr_t) c ^ CTX_MAGIC2) &&
	       c->internal[3] == (void *) (uintptr_t) CTX_MAGIC3;
}

/* Called with dgcheck_lock held, when the completion is handed over. */
int dgcheck_ctx_verify(struct dgcheck_op *op)
{
	if (ctx_intact(op))
		return 0;
	dgcheck_violation("fi_context %p of an outstanding %s was modified "
			  "by the application (FI_CONTEXT)", (void *) op->ctx,
			  (op->flags & FI_SEND) ? "send" : "receive");
	return -FI_EINVAL;
}

/* The context must exist and must not belong to a live operation.  Live
 * contexts are looked up by address: the caller's fresh context holds
 * garbage and is not read before the provider has stamped it. */
static int ctx_check(struct fi_context *ctx, const char *what)
{
	if (!ctx) {
		dgcheck_violation("%s without a context (FI_CONTEXT)", what);
		return -FI_EINVAL;
	}
	if (dgcheck_set_has(&dgcheck_live_ctxs, ctx)) {
		dgcheck_violation("%s reuses fi_context %p of an outstanding "
				  "operation", what, (void *) ctx);
		return -FI_EINVAL;
	}
	return 0;
}

/* ---- operation records ---- */

/* Called with dgcheck_lock held. */
void dgcheck_op_release(struct dgcheck_op *op)
{
	size_t i;

	dgcheck_set_del(&dgcheck_live_ctxs, op->ctx);
	for (i = 0; i < op->iov_count; i++)
		dgcheck_mr_release(op->mr[i]);
	if ((op->flags & FI_SEND) && op->ep)
		op->ep->tx_out--;
	free(op);
}

static struct dgcheck_op *op_new(struct dgcheck_ep *ep, void *ctx,
				 uint64_t flags, const struct iovec *iov,
				 struct dgcheck_mr **mr, size_t count)
{
	struct dgcheck_op *op = calloc(1, sizeof(*op));
	size_t i;

	if (!op || dgcheck_set_add(&dgcheck_live_ctxs, ctx)) {
		free(op);
		return NULL;
	}
	op->ep = ep;
	op->ctx = ctx;
	op->flags = flags;
	op->iov_count = count;
	for (i = 0; i < count; i++) {
		op->iov[i] = iov[i];
		op->mr[i] = mr[i];
		if (mr[i])
			mr[i]->refs++;
		op->len += iov[i].iov_len;
	}
	ctx_stamp(op);
	return op;
}

/* ---- checks shared by sends and receives ---- */

static int iov_check(struct dgcheck_ep *ep, const struct iovec *iov,
		     size_t count, const char *what, size_t *total)
{
	size_t i;

	if (!iov || count == 0 || count > DGCHECK_IOV_LIMIT) {
		dgcheck_violation("%s with %zu iovecs (iov_limit %d)", what,
				  count, DGCHECK_IOV_LIMIT);
		return -FI_EINVAL;
	}
	for (*total = 0, i = 0; i < count; i++)
		*total += iov[i].iov_len;
	if (iov[0].iov_len < ep->dom->prefix) {
		dgcheck_violation("%s whose first buffer (%zu bytes) is shorter "
				  "than the prefix (%zu, FI_MSG_PREFIX)", what,
				  iov[0].iov_len, ep->dom->prefix);
		return -FI_EINVAL;
	}
	return 0;
}

static int desc_check(struct dgcheck_ep *ep, const struct iovec *iov,
		      void **desc, size_t count, const char *what,
		      struct dgcheck_mr **mr)
{
	size_t i;
	int ret;

	for (i = 0; i < count; i++) {
		ret = dgcheck_mr_check(ep->dom, desc ? desc[i] : NULL,
				       iov[i].iov_base, iov[i].iov_len, what,
				       &mr[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- sends ---- */

static int send_len_check(struct dgcheck_ep *ep, size_t total,
			  enum send_kind kind, const char *what)
{
	if (total > ep->dom->max_msg) {
		dgcheck_violation("%s of %zu bytes exceeds max_msg_size %zu",
				  what, total, ep->dom->max_msg);
		return -FI_EINVAL;
	}
	if (kind != SEND_NORMAL && total > ep->dom->inject) {
		dgcheck_violation("%s of %zu bytes exceeds inject_size %zu",
				  what, total, ep->dom->inject);
		return -FI_EINVAL;
	}
	return 0;
}

/* The prefix is the provider's: only the bytes after it go on the wire. */
static ssize_t wire_send(struct dgcheck_ep *ep, const struct iovec *iov,
			 size_t count, const struct sockaddr_in *to)
{
	struct iovec w[DGCHECK_IOV_LIMIT];
	struct msghdr mh = {
		.msg_name = (void *) to,
		.msg_namelen = sizeof(*to),
		.msg_iov = w,
		.msg_iovlen = count,
	};

	memcpy(w, iov, count * sizeof(*iov));
	w[0].iov_base = (char *) w[0].iov_base + ep->dom->prefix;
	w[0].iov_len -= ep->dom->prefix;
	if (sendmsg(ep->fd, &mh, MSG_DONTWAIT) >= 0)
		return 0;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
		return -FI_EAGAIN;
	return 0;	/* e.g. ECONNREFUSED: datagrams may be lost */
}

static ssize_t send_validate(struct dgcheck_ep *ep, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t dest,
			     void *ctx, enum send_kind kind,
			     struct sockaddr_in *to, struct dgcheck_mr **mr)
{
	const char *what = kind == SEND_INJECT ? "fi_inject" : "send";
	size_t total;
	ssize_t ret;

	if (!ep->enabled || !ep->txcq || !ep->av)
		return -FI_EOPBADSTATE;
	ret = iov_check(ep, iov, count, what, &total);
	if (!ret)
		ret = send_len_check(ep, total, kind, what);
	if (!ret && kind != SEND_INJECT)
		ret = ctx_check(ctx, what);
	if (!ret && kind == SEND_NORMAL)
		ret = desc_check(ep, iov, desc, count, what, mr);
	if (!ret && dgcheck_av_get(ep->av, dest, to)) {
		dgcheck_violation("%s to fi_addr 0x%llx that is not in the AV",
				  what, (unsigned long long) dest);
		ret = -FI_EINVAL;
	}
	if (!ret && kind != SEND_INJECT && ep->tx_out >= ep->tx_size)
		ret = -FI_EAGAIN;
	return ret;
}

static ssize_t send_common(struct dgcheck_ep *ep, const struct iovec *iov,
			   void **desc, size_t count, fi_addr_t dest,
			   void *ctx, enum send_kind kind)
{
	struct dgcheck_mr *mr[DGCHECK_IOV_LIMIT] = { NULL, NULL };
	struct sockaddr_in to;
	struct dgcheck_op *op;
	ssize_t ret;

	DGCHECK_LOCK();
	ret = send_validate(ep, iov, desc, count, dest, ctx, kind, &to, mr);
	if (!ret)
		ret = wire_send(ep, iov, count, &to);
	if (!ret && kind != SEND_INJECT) {
		op = op_new(ep, ctx, FI_SEND | FI_MSG, iov, mr, count);
		if (!op) {
			ret = -FI_ENOMEM;
		} else {
			ep->tx_out++;
			dgcheck_cq_push(ep->txcq, op);
		}
	}
	if (!ret) {
		dgcheck_cnt.posts++;
		dgcheck_cnt.sends++;
	}
	DGCHECK_UNLOCK();
	return ret;
}

static ssize_t ep_send(struct fid_ep *fep, const void *buf, size_t len,
		       void *desc, fi_addr_t dest, void *context)
{
	struct iovec iov = { (void *) buf, len };

	return send_common((struct dgcheck_ep *) fep, &iov, &desc, 1, dest,
			   context, SEND_NORMAL);
}

static ssize_t ep_sendv(struct fid_ep *fep, const struct iovec *iov,
			void **desc, size_t count, fi_addr_t dest,
			void *context)
{
	return send_common((struct dgcheck_ep *) fep, iov, desc, count, dest,
			   context, SEND_NORMAL);
}

static ssize_t ep_sendmsg(struct fid_ep *fep, const struct fi_msg *msg,
			  uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return send_common((struct dgcheck_ep *) fep, msg->msg_iov, msg->desc,
			   msg->iov_count, msg->addr, msg->context,
			   (flags & FI_INJECT) ? SEND_INJECT_FLAG : SEND_NORMAL);
}

static ssize_t ep_inject(struct fid_ep *fep, const void *buf, size_t len,
			 fi_addr_t dest)
{
	struct iovec iov = { (void *) buf, len };

	return send_common((struct dgcheck_ep *) fep, &iov, NULL, 1, dest,
			   NULL, SEND_INJECT);
}

static ssize_t ep_senddata(struct fid_ep *ep, const void *buf, size_t len,
			   void *desc, uint64_t data, fi_addr_t dest,
			   void *context)
{
	(void) ep; (void) buf; (void) len; (void) desc; (void) data;
	(void) dest; (void) context;
	return -FI_ENOSYS;	/* cq_data_size is 0 */
}

static ssize_t ep_injectdata(struct fid_ep *ep, const void *buf, size_t len,
			     uint64_t data, fi_addr_t dest)
{
	(void) ep; (void) buf; (void) len; (void) data; (void) dest;
	return -FI_ENOSYS;
}

/* ---- receives ---- */

static ssize_t recv_common(struct dgcheck_ep *ep, const struct iovec *iov,
			   void **desc, size_t count, void *ctx)
{
	struct dgcheck_mr *mr[DGCHECK_IOV_LIMIT] = { NULL, NULL };
	struct dgcheck_op *op;
	size_t total;
	ssize_t ret;

	DGCHECK_LOCK();
	if (!ep->enabled || !ep->rxcq)
		ret = -FI_EOPBADSTATE;
	else if (!(ret = iov_check(ep, iov, count, "receive", &total)) &&
		 !(ret = ctx_check(ctx, "receive")) &&
		 !(ret = desc_check(ep, iov, desc, count, "receive", mr)) &&
		 ep->rx_posted >= ep->rx_size)
		ret = -FI_EAGAIN;
	if (!ret && !(op = op_new(ep, ctx, FI_RECV | FI_MSG, iov, mr, count)))
		ret = -FI_ENOMEM;
	if (!ret) {
		if (ep->rx_tail)
			ep->rx_tail->next = op;
		else
			ep->rx_head = op;
		ep->rx_tail = op;
		ep->rx_posted++;
		dgcheck_cnt.posts++;
		dgcheck_cnt.recvs++;
	}
	DGCHECK_UNLOCK();
	return ret;
}

static ssize_t ep_recv(struct fid_ep *fep, void *buf, size_t len, void *desc,
		       fi_addr_t src, void *context)
{
	struct iovec iov = { buf, len };

	(void) src;
	return recv_common((struct dgcheck_ep *) fep, &iov, &desc, 1, context);
}

static ssize_t ep_recvv(struct fid_ep *fep, const struct iovec *iov,
			void **desc, size_t count, fi_addr_t src,
			void *context)
{
	(void) src;
	return recv_common((struct dgcheck_ep *) fep, iov, desc, count,
			   context);
}

static ssize_t ep_recvmsg(struct fid_ep *fep, const struct fi_msg *msg,
			  uint64_t flags)
{
	(void) flags;
	if (!msg)
		return -FI_EINVAL;
	return recv_common((struct dgcheck_ep *) fep, msg->msg_iov, msg->desc,
			   msg->iov_count, msg->context);
}

static struct dgcheck_op *rx_pop(struct dgcheck_ep *ep)
{
	struct dgcheck_op *op = ep->rx_head;

	ep->rx_head = op->next;
	if (!ep->rx_head)
		ep->rx_tail = NULL;
	op->next = NULL;
	ep->rx_posted--;
	return op;
}

/* Land one datagram in |op|: data after the prefix, prefix scribbled. */
static ssize_t wire_recv(struct dgcheck_ep *ep, struct dgcheck_op *op)
{
	size_t prefix = ep->dom->prefix;
	struct iovec w[DGCHECK_IOV_LIMIT];
	struct msghdr mh = {
		.msg_name = &op->src,
		.msg_namelen = sizeof(op->src),
		.msg_iov = w,
		.msg_iovlen = op->iov_count,
	};

	memcpy(w, op->iov, op->iov_count * sizeof(w[0]));
	w[0].iov_base = (char *) w[0].iov_base + prefix;
	w[0].iov_len -= prefix;
	return recvmsg(ep->fd, &mh, MSG_DONTWAIT | MSG_TRUNC);
}

static void rx_complete(struct dgcheck_ep *ep, struct dgcheck_op *op,
			size_t n)
{
	size_t prefix = ep->dom->prefix, room = op->len - prefix;

	memset(op->iov[0].iov_base, PREFIX_FILL, prefix);
	if (n > room) {
		op->err = FI_ETRUNC;
		op->olen = n - room;
	} else {
		op->len = prefix + n;
	}
}

/* Pull datagrams while receives are posted and |cq| has room: a datagram
 * that has nowhere to go stays in the kernel.  Called with dgcheck_lock
 * held. */
void dgcheck_ep_progress(struct dgcheck_ep *ep, struct dgcheck_cq *cq)
{
	ssize_t n;
	int errors = 0;

	while (ep->rx_head && cq->count < cq->size && errors < 16) {
		n = wire_recv(ep, ep->rx_head);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			errors++;	/* a queued ICMP error: skip it */
			continue;
		}
		{
			struct dgcheck_op *op = rx_pop(ep);

			rx_complete(ep, op, (size_t) n);
			dgcheck_cq_push(cq, op);
		}
	}
}

static struct fi_ops_msg msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = ep_recv,
	.recvv = ep_recvv,
	.recvmsg = ep_recvmsg,
	.send = ep_send,
	.sendv = ep_sendv,
	.sendmsg = ep_sendmsg,
	.inject = ep_inject,
	.senddata = ep_senddata,
	.injectdata = ep_injectdata,
};

/* ---- endpoint object ---- */

static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct dgcheck_ep *ep = (struct dgcheck_ep *) fid;
	size_t need = sizeof(ep->name);

	if (!addrlen)
		return -FI_EINVAL;
	if (*addrlen < need) {
		*addrlen = need;
		return -FI_ETOOSMALL;
	}
	memcpy(addr, &ep->name, need);
	*addrlen = need;
	return 0;
}

static struct fi_ops_cm cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = dgcheck_no_setname,
	.getname = ep_getname,
	.getpeer = dgcheck_no_getpeer,
	.connect = dgcheck_no_connect,
	.listen = dgcheck_no_listen,
	.accept = dgcheck_no_accept,
	.reject = dgcheck_no_reject,
	.shutdown = dgcheck_no_shutdown,
	.join = dgcheck_no_join,
};

static ssize_t ep_cancel(fid_t fid, void *context)
{
	(void) fid; (void) context;
	return -FI_ENOSYS;
}

static int ep_getopt(fid_t fid, int level, int optname, void *optval,
		     size_t *optlen)
{
	(void) fid; (void) level; (void) optname; (void) optval; (void) optlen;
	return -FI_ENOPROTOOPT;
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval,
		     size_t optlen)
{
	(void) fid; (void) level; (void) optname; (void) optval; (void) optlen;
	return -FI_ENOPROTOOPT;
}

static ssize_t ep_rx_left(struct fid_ep *fep)
{
	struct dgcheck_ep *ep = (struct dgcheck_ep *) fep;
	ssize_t n;

	DGCHECK_LOCK();
	n = (ssize_t) (ep->rx_size - ep->rx_posted);
	DGCHECK_UNLOCK();
	return n;
}

static ssize_t ep_tx_left(struct fid_ep *fep)
{
	struct dgcheck_ep *ep = (struct dgcheck_ep *) fep;
	ssize_t n;

	DGCHECK_LOCK();
	n = (ssize_t) (ep->tx_size - ep->tx_out);
	DGCHECK_UNLOCK();
	return n;
}

static struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = dgcheck_no_tx_ctx,
	.rx_ctx = dgcheck_no_rx_ctx,
	.rx_size_left = ep_rx_left,
	.tx_size_left = ep_tx_left,
};

static int bind_cq(struct dgcheck_ep *ep, struct dgcheck_cq *cq,
		   uint64_t flags)
{
	if (cq->dom != ep->dom || !(flags & (FI_TRANSMIT | FI_RECV)) ||
	    ((flags & FI_TRANSMIT) && ep->txcq) ||
	    ((flags & FI_RECV) && ep->rxcq))
		return -FI_EINVAL;
	if ((flags & FI_RECV) && dgcheck_cq_add_rx_ep(cq, ep))
		return -FI_ENOMEM;
	if (flags & FI_TRANSMIT) {
		ep->txcq = cq;
		cq->refs++;
	}
	if (flags & FI_RECV) {
		ep->rxcq = cq;
		cq->refs++;
	}
	return 0;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct dgcheck_ep *ep = (struct dgcheck_ep *) fid;
	struct dgcheck_av *av = (struct dgcheck_av *) bfid;
	int ret = 0;

	if (!bfid)
		return -FI_EINVAL;
	DGCHECK_LOCK();
	switch (bfid->fclass) {
	case FI_CLASS_CQ:
		ret = bind_cq(ep, (struct dgcheck_cq *) bfid, flags);
		break;
	case FI_CLASS_AV:
		if (ep->av || av->dom != ep->dom) {
			ret = -FI_EINVAL;
			break;
		}
		ep->av = av;
		av->refs++;
		break;
	case FI_CLASS_EQ:
		break;	/* nothing to report on a datagram endpoint */
	default:
		ret = -FI_ENOSYS;
	}
	DGCHECK_UNLOCK();
	return ret;
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	struct dgcheck_ep *ep = (struct dgcheck_ep *) fid;
	int ret = 0;

	(void) arg;
	if (command != FI_ENABLE)
		return -FI_ENOSYS;
	DGCHECK_LOCK();
	if (!ep->txcq || !ep->rxcq)
		ret = -FI_ENOCQ;
	else if (!ep->av)
		ret = -FI_ENOAV;
	else
		ep->enabled = 1;
	DGCHECK_UNLOCK();
	return ret;
}

/* Posted receives are dropped without completions, as closing an endpoint
 * discards them. */
static int ep_close(struct fid *fid)
{
	struct dgcheck_ep *ep = (struct dgcheck_ep *) fid;

	DGCHECK_LOCK();
	while (ep->rx_head)
		dgcheck_op_release(rx_pop(ep));
	if (ep->txcq) {
		dgcheck_cq_del_ep(ep->txcq, ep);
		ep->txcq->refs--;
	}
	if (ep->rxcq) {
		dgcheck_cq_del_ep(ep->rxcq, ep);
		ep->rxcq->refs--;
	}
	if (ep->av)
		ep->av->refs--;
	ep->dom->refs--;
	DGCHECK_UNLOCK();
	close(ep->fd);
	free(ep);
	return 0;
}

static struct fi_ops ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
	.ops_open = dgcheck_no_ops_open,
	.tostr = dgcheck_no_tostr,
	.ops_set = dgcheck_no_ops_set,
};

/* A socket on the domain's address; the port of info->src_addr if any. */
static int ep_socket(struct dgcheck_ep *ep, const struct fi_info *info)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr = ep->dom->ifc.addr };
	socklen_t len = sizeof(sin);
	int sz = SOCK_BUF;

	if (info->src_addr && info->src_addrlen >= sizeof(sin) &&
	    ((struct sockaddr_in *) info->src_addr)->sin_family == AF_INET)
		sin.sin_port = ((struct sockaddr_in *) info->src_addr)->sin_port;
	ep->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ep->fd < 0)
		return -FI_EMFILE;
	/* Best effort: fewer drops under bursts; the kernel caps it. */
	setsockopt(ep->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	setsockopt(ep->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (bind(ep->fd, (struct sockaddr *) &sin, sizeof(sin)) ||
	    getsockname(ep->fd, (struct sockaddr *) &ep->name, &len)) {
		close(ep->fd);
		return errno == EADDRINUSE ? -FI_EADDRINUSE : -FI_EINVAL;
	}
	return 0;
}

/* Requested depths may be smaller than the maximums, never larger. */
static int ep_sizes(struct dgcheck_ep *ep, const struct fi_info *info)
{
	size_t tx = info->tx_attr ? info->tx_attr->size : 0;
	size_t rx = info->rx_attr ? info->rx_attr->size : 0;

	ep->tx_size = tx ? tx : dgcheck_env.tx_size;
	ep->rx_size = rx ? rx : dgcheck_env.rx_size;
	if (ep->tx_size > dgcheck_env.tx_size ||
	    ep->rx_size > dgcheck_env.rx_size)
		return -FI_EINVAL;
	return 0;
}

int dgcheck_ep_open(struct fid_domain *domain, struct fi_info *info,
		    struct fid_ep **epp, void *context)
{
	struct dgcheck_ep *ep;
	int ret;

	if (!info || (info->ep_attr && info->ep_attr->type != FI_EP_DGRAM &&
		      info->ep_attr->type != FI_EP_UNSPEC))
		return -FI_EINVAL;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->dom = (struct dgcheck_domain *) domain;
	ret = ep_sizes(ep, info);
	if (!ret)
		ret = ep_socket(ep, info);
	if (ret) {
		free(ep);
		return ret;
	}
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &ep_fi_ops;
	ep->ep.ops = &ep_ops;
	ep->ep.cm = &cm_ops;
	ep->ep.msg = &msg_ops;
	ep->ep.rma = &dgcheck_no_rma;
	ep->ep.tagged = &dgcheck_no_tagged;
	ep->ep.atomic = &dgcheck_no_atomic;
	ep->ep.collective = &dgcheck_no_collective;
	DGCHECK_LOCK();
	ep->dom->refs++;
	DGCHECK_UNLOCK();
	*epp = &ep->ep;
	return 0;
}
