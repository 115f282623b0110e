/*
 * Memory registration: records [buf, buf+len) per domain.  Nothing is
 * pinned; the point is to check that every posted buffer lies inside a
 * live registration of the endpoint's domain, as usNIC hardware needs.
 */
#include "dgcheck.h"

#include <stdlib.h>

#define MR_OF_DESC(d) \
	((struct dgcheck_mr *) ((char *) (d) - offsetof(struct dgcheck_mr, desc)))

static uint64_t next_key = 1;

static void mr_free(struct dgcheck_mr *mr)
{
	free(mr);
}

static int mr_close(struct fid *fid)
{
	struct dgcheck_mr *mr = (struct dgcheck_mr *) fid;

	DGCHECK_LOCK();
	dgcheck_set_del(&dgcheck_live_mrs, &mr->desc);
	dgcheck_cnt.regs_live--;
	mr->dom->refs--;
	if (mr->refs) {
		/* Keep the record until the last operation releases it, so
		 * that the operations' bookkeeping stays valid. */
		dgcheck_violation("fi_close of a registration [%p,+%zu) still "
				  "used by %d outstanding operation(s)",
				  (void *) mr->base, mr->len, mr->refs);
		mr->closed = 1;
		DGCHECK_UNLOCK();
		return 0;
	}
	DGCHECK_UNLOCK();
	mr_free(mr);
	return 0;
}

static struct fi_ops mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = mr_close,
	.bind = dgcheck_no_bind,
	.control = dgcheck_no_control,
	.ops_open = dgcheck_no_ops_open,
	.tostr = dgcheck_no_tostr,
	.ops_set = dgcheck_no_ops_set,
};

/* Called with dgcheck_lock held. */
void dgcheck_mr_release(struct dgcheck_mr *mr)
{
	if (!mr)
		return;
	if (--mr->refs == 0 && mr->closed)
		mr_free(mr);
}

static int mr_new(struct fid *fid, const void *buf, size_t len,
		  uint64_t requested_key, struct fid_mr **out, void *context)
{
	struct dgcheck_domain *dom = (struct dgcheck_domain *) fid;
	struct dgcheck_mr *mr;

	if (!fid || fid->fclass != FI_CLASS_DOMAIN || !out || (!buf && len))
		return -FI_EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	mr->mr.fid.fclass = FI_CLASS_MR;
	mr->mr.fid.context = context;
	mr->mr.fid.ops = &mr_fi_ops;
	mr->mr.mem_desc = &mr->desc;
	mr->dom = dom;
	mr->base = (char *) buf;
	mr->len = len;
	DGCHECK_LOCK();
	mr->mr.key = requested_key ? requested_key : next_key++;
	if (dgcheck_set_add(&dgcheck_live_mrs, &mr->desc)) {
		DGCHECK_UNLOCK();
		free(mr);
		return -FI_ENOMEM;
	}
	dom->refs++;
	dgcheck_cnt.regs_total++;
	dgcheck_cnt.regs_live++;
	DGCHECK_UNLOCK();
	*out = &mr->mr;
	return 0;
}

int dgcheck_mr_reg(struct fid *fid, const void *buf, size_t len,
		   uint64_t access, uint64_t offset, uint64_t requested_key,
		   uint64_t flags, struct fid_mr **mr, void *context)
{
	(void) access; (void) offset; (void) flags;
	return mr_new(fid, buf, len, requested_key, mr, context);
}

/* mr_iov_limit is 1, as on usNIC. */
int dgcheck_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		    uint64_t access, uint64_t offset, uint64_t requested_key,
		    uint64_t flags, struct fid_mr **mr, void *context)
{
	(void) access; (void) offset; (void) flags;
	if (count != 1 || !iov)
		return -FI_EINVAL;
	return mr_new(fid, iov[0].iov_base, iov[0].iov_len, requested_key,
		      mr, context);
}

int dgcheck_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		       uint64_t flags, struct fid_mr **mr)
{
	(void) flags;
	if (!attr || attr->iov_count != 1 || !attr->mr_iov)
		return -FI_EINVAL;
	return mr_new(fid, attr->mr_iov[0].iov_base, attr->mr_iov[0].iov_len,
		      attr->requested_key, mr, attr->context);
}

/*
 * The descriptor posted with [buf, buf+len) must be a live registration of
 * |dom| that contains the whole range.  On success *out holds the
 * registration (NULL when enforcement is off); the caller takes the
 * reference.  Called with dgcheck_lock held.
 */
int dgcheck_mr_check(struct dgcheck_domain *dom, void *desc, const void *buf,
		     size_t len, const char *what, struct dgcheck_mr **out)
{
	struct dgcheck_mr *mr;
	const char *p = buf;

	*out = NULL;
	if (!dom->enforce)
		return 0;
	if (!desc) {
		dgcheck_violation("%s of [%p,+%zu) without a descriptor "
				  "(FI_MR_LOCAL)", what, buf, len);
		return -FI_EINVAL;
	}
	if (!dgcheck_set_has(&dgcheck_live_mrs, desc)) {
		dgcheck_violation("%s with descriptor %p that is not a live "
				  "registration", what, desc);
		return -FI_EINVAL;
	}
	mr = MR_OF_DESC(desc);
	if (mr->dom != dom) {
		dgcheck_violation("%s with a registration of another domain",
				  what);
		return -FI_EINVAL;
	}
	/* Integer arithmetic: the pointers may be unrelated. */
	if (len > mr->len || (uintptr_t) p < (uintptr_t) mr->base ||
	    (uintptr_t) p - (uintptr_t) mr->base > mr->len - len) {
		dgcheck_violation("%s of [%p,+%zu) outside its registration "
				  "[%p,+%zu)", what, buf, len,
				  (void *) mr->base, mr->len);
		return -FI_EINVAL;
	}
	*out = mr;
	return 0;
}
