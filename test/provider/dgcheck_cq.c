/*
 * Completion queues that hold exactly attr.size entries, as usNIC's do.
 * A completion that finds the queue full is dropped, counted as a
 * violation and reported to the reader as an FI_EOVERRUN error entry.
 * Reading a CQ is also what progresses receives on its endpoints.
 */
#include "dgcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Called with dgcheck_lock held. */
void dgcheck_cq_push(struct dgcheck_cq *cq, struct dgcheck_op *op)
{
	if (cq->count == cq->size) {
		dgcheck_violation("CQ overrun: completion dropped, CQ of %zu "
				  "entries is full", cq->size);
		dgcheck_cnt.overruns++;
		cq->overrun = 1;
		dgcheck_op_release(op);
		return;
	}
	cq->ring[(cq->head + cq->count) % cq->size] = op;
	cq->count++;
}

static struct dgcheck_op *cq_pop(struct dgcheck_cq *cq)
{
	struct dgcheck_op *op = cq->ring[cq->head];

	cq->head = (cq->head + 1) % cq->size;
	cq->count--;
	return op;
}

int dgcheck_cq_add_rx_ep(struct dgcheck_cq *cq, struct dgcheck_ep *ep)
{
	struct dgcheck_ep **eps;

	eps = realloc(cq->rx_eps, (cq->n_rx_eps + 1) * sizeof(*eps));
	if (!eps)
		return -FI_ENOMEM;
	eps[cq->n_rx_eps++] = ep;
	cq->rx_eps = eps;
	return 0;
}

/* Forget |ep|: its receive progress, and the ops queued here that point
 * at it (they stay readable).  Called with dgcheck_lock held. */
void dgcheck_cq_del_ep(struct dgcheck_cq *cq, struct dgcheck_ep *ep)
{
	size_t i;

	for (i = 0; i < cq->n_rx_eps; i++) {
		if (cq->rx_eps[i] == ep) {
			cq->rx_eps[i] = cq->rx_eps[--cq->n_rx_eps];
			break;
		}
	}
	for (i = 0; i < cq->count; i++) {
		struct dgcheck_op *op = cq->ring[(cq->head + i) % cq->size];

		if (op->ep == ep)
			op->ep = NULL;
	}
}

static size_t entry_size(enum fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED: return sizeof(struct fi_cq_tagged_entry);
	default: return sizeof(struct fi_cq_entry);
	}
}

/* The tagged entry starts with the fields of every smaller format, so one
 * entry is built and the format's prefix of it copied out. */
static void fill_entry(struct dgcheck_cq *cq, const struct dgcheck_op *op,
		       void *dst)
{
	struct fi_cq_tagged_entry e = {
		.op_context = op->ctx,
		.flags = op->flags,
		.len = op->len,
		.buf = (op->flags & FI_RECV) ? op->iov[0].iov_base : NULL,
	};

	memcpy(dst, &e, entry_size(cq->format));
}

static void deliver(struct dgcheck_cq *cq, void *buf, size_t i,
		    fi_addr_t *src)
{
	struct dgcheck_op *op = cq_pop(cq);

	dgcheck_ctx_verify(op);
	fill_entry(cq, op, (char *) buf + i * entry_size(cq->format));
	if (src)
		src[i] = (op->flags & FI_RECV) && op->ep ?
			 dgcheck_av_reverse(op->ep->av, &op->src) :
			 FI_ADDR_NOTAVAIL;
	dgcheck_op_release(op);
}

static void progress(struct dgcheck_cq *cq)
{
	size_t i;

	for (i = 0; i < cq->n_rx_eps; i++)
		dgcheck_ep_progress(cq->rx_eps[i], cq);
}

static ssize_t cq_readfrom(struct fid_cq *fcq, void *buf, size_t count,
			   fi_addr_t *src)
{
	struct dgcheck_cq *cq = (struct dgcheck_cq *) fcq;
	size_t n = 0;
	ssize_t ret;

	DGCHECK_LOCK();
	progress(cq);
	while (!cq->overrun && n < count && cq->count &&
	       !cq->ring[cq->head]->err)
		deliver(cq, buf, n++, src);
	if (n)
		ret = (ssize_t) n;
	else if (cq->overrun || cq->count)
		ret = -FI_EAVAIL;
	else
		ret = -FI_EAGAIN;
	DGCHECK_UNLOCK();
	return ret;
}

static ssize_t cq_read(struct fid_cq *fcq, void *buf, size_t count)
{
	return cq_readfrom(fcq, buf, count, NULL);
}

static void fill_err(struct dgcheck_cq *cq, struct fi_cq_err_entry *e,
		     const struct dgcheck_op *op, int err)
{
	uint32_t api = cq->dom->fab->api_version;

	e->op_context = op ? op->ctx : NULL;
	e->flags = op ? op->flags : 0;
	e->len = op ? op->len : 0;
	e->buf = op ? op->iov[0].iov_base : NULL;
	e->data = 0;
	e->tag = 0;
	e->olen = op ? op->olen : 0;
	e->err = err;
	e->prov_errno = err;
	e->err_data = NULL;
	/* Callers of API < 1.5 have no err_data_size field. */
	if (FI_VERSION_GE(api, FI_VERSION(1, 5)))
		e->err_data_size = 0;
}

static ssize_t cq_readerr(struct fid_cq *fcq, struct fi_cq_err_entry *buf,
			  uint64_t flags)
{
	struct dgcheck_cq *cq = (struct dgcheck_cq *) fcq;
	struct dgcheck_op *op;
	ssize_t ret = 1;

	(void) flags;
	DGCHECK_LOCK();
	if (cq->overrun) {
		fill_err(cq, buf, NULL, FI_EOVERRUN);
		cq->overrun = 0;
	} else if (cq->count && cq->ring[cq->head]->err) {
		op = cq_pop(cq);
		dgcheck_ctx_verify(op);
		fill_err(cq, buf, op, op->err);
		dgcheck_op_release(op);
	} else {
		ret = -FI_EAGAIN;
	}
	DGCHECK_UNLOCK();
	return ret;
}

static ssize_t cq_sread(struct fid_cq *cq, void *buf, size_t count,
			const void *cond, int timeout)
{
	(void) cq; (void) buf; (void) count; (void) cond; (void) timeout;
	return -FI_ENOSYS;	/* FI_WAIT_NONE only */
}

static ssize_t cq_sreadfrom(struct fid_cq *cq, void *buf, size_t count,
			    fi_addr_t *src, const void *cond, int timeout)
{
	(void) src;
	return cq_sread(cq, buf, count, cond, timeout);
}

static int cq_signal(struct fid_cq *cq)
{
	(void) cq;
	return -FI_ENOSYS;
}

static const char *cq_strerror(struct fid_cq *cq, int prov_errno,
			       const void *err_data, char *buf, size_t len)
{
	static const char *const text[] = {
		[FI_ETRUNC] = "datagram longer than the posted buffer",
		[FI_EOVERRUN] = "CQ overrun: completions were dropped",
	};
	const char *s = "dgcheck error";

	(void) cq; (void) err_data;
	if (prov_errno > 0 &&
	    (size_t) prov_errno < sizeof(text) / sizeof(text[0]) &&
	    text[prov_errno])
		s = text[prov_errno];
	if (!buf || !len)
		return s;
	snprintf(buf, len, "%s", s);
	return buf;
}

static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.sread = cq_sread,
	.sreadfrom = cq_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

static int cq_close(struct fid *fid)
{
	struct dgcheck_cq *cq = (struct dgcheck_cq *) fid;

	DGCHECK_LOCK();
	if (cq->refs) {
		DGCHECK_UNLOCK();
		return -FI_EBUSY;
	}
	while (cq->count)
		dgcheck_op_release(cq_pop(cq));
	cq->dom->refs--;
	DGCHECK_UNLOCK();
	free(cq->rx_eps);
	free(cq->ring);
	free(cq);
	return 0;
}

static struct fi_ops cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cq_close,
	.bind = dgcheck_no_bind,
	.control = dgcheck_no_control,
	.ops_open = dgcheck_no_ops_open,
	.tostr = dgcheck_no_tostr,
	.ops_set = dgcheck_no_ops_set,
};

static int attr_ok(const struct fi_cq_attr *attr, size_t *size,
		   enum fi_cq_format *format)
{
	*size = attr && attr->size ? attr->size : DGCHECK_CQ_DEFAULT;
	*format = attr ? attr->format : FI_CQ_FORMAT_UNSPEC;
	if (*size > DGCHECK_CQ_MAX)
		return -FI_EINVAL;
	if (*format == FI_CQ_FORMAT_UNSPEC)
		*format = FI_CQ_FORMAT_CONTEXT;
	if (*format != FI_CQ_FORMAT_CONTEXT && *format != FI_CQ_FORMAT_MSG &&
	    *format != FI_CQ_FORMAT_DATA && *format != FI_CQ_FORMAT_TAGGED)
		return -FI_ENOSYS;
	if (attr && attr->wait_obj != FI_WAIT_NONE &&
	    attr->wait_obj != FI_WAIT_UNSPEC)
		return -FI_ENOSYS;
	return 0;
}

int dgcheck_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		    struct fid_cq **cqp, void *context)
{
	struct dgcheck_cq *cq;
	enum fi_cq_format format;
	size_t size;
	int ret = attr_ok(attr, &size, &format);

	if (ret)
		return ret;
	cq = calloc(1, sizeof(*cq));
	if (!cq || !(cq->ring = calloc(size, sizeof(*cq->ring)))) {
		free(cq);
		return -FI_ENOMEM;
	}
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = context;
	cq->cq.fid.ops = &cq_fi_ops;
	cq->cq.ops = &cq_ops;
	cq->dom = (struct dgcheck_domain *) domain;
	cq->format = format;
	cq->size = size;
	DGCHECK_LOCK();
	cq->dom->refs++;
	DGCHECK_UNLOCK();
	*cqp = &cq->cq;
	return 0;
}
