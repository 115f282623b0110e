/*
 * Operations dgcheck does not offer.  Every table slot points at a function
 * that answers -FI_ENOSYS, so a caller reaching one gets an error rather
 * than a call through NULL.
 */
#include "dgcheck.h"

/* The signatures are fixed by libfabric; the parameters are unused. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

int dgcheck_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{ return -FI_ENOSYS; }
int dgcheck_no_control(struct fid *fid, int command, void *arg)
{ return -FI_ENOSYS; }
int dgcheck_no_ops_open(struct fid *fid, const char *name, uint64_t flags,
			void **ops, void *context)
{ return -FI_ENOSYS; }
int dgcheck_no_tostr(const struct fid *fid, char *buf, size_t len)
{ return -FI_ENOSYS; }
int dgcheck_no_ops_set(struct fid *fid, const char *name, uint64_t flags,
		       void *ops, void *context)
{ return -FI_ENOSYS; }

/* RMA */
static ssize_t rma_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
	fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context)
{ return -FI_ENOSYS; }
static ssize_t rma_readv(struct fid_ep *ep, const struct iovec *iov,
	void **desc, size_t count, fi_addr_t src_addr, uint64_t addr,
	uint64_t key, void *context)
{ return -FI_ENOSYS; }
static ssize_t rma_msg(struct fid_ep *ep, const struct fi_msg_rma *msg,
	uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t rma_write(struct fid_ep *ep, const void *buf, size_t len,
	void *desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
	void *context)
{ return -FI_ENOSYS; }
static ssize_t rma_writev(struct fid_ep *ep, const struct iovec *iov,
	void **desc, size_t count, fi_addr_t dest_addr, uint64_t addr,
	uint64_t key, void *context)
{ return -FI_ENOSYS; }
static ssize_t rma_inject(struct fid_ep *ep, const void *buf, size_t len,
	fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{ return -FI_ENOSYS; }
static ssize_t rma_writedata(struct fid_ep *ep, const void *buf, size_t len,
	void *desc, uint64_t data, fi_addr_t dest_addr, uint64_t addr,
	uint64_t key, void *context)
{ return -FI_ENOSYS; }
static ssize_t rma_injectdata(struct fid_ep *ep, const void *buf, size_t len,
	uint64_t data, fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{ return -FI_ENOSYS; }

struct fi_ops_rma dgcheck_no_rma = {
	.size = sizeof(struct fi_ops_rma),
	.read = rma_read, .readv = rma_readv, .readmsg = rma_msg,
	.write = rma_write, .writev = rma_writev, .writemsg = rma_msg,
	.inject = rma_inject, .writedata = rma_writedata,
	.injectdata = rma_injectdata,
};

/* Tagged */
static ssize_t tg_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
	fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{ return -FI_ENOSYS; }
static ssize_t tg_recvv(struct fid_ep *ep, const struct iovec *iov,
	void **desc, size_t count, fi_addr_t src_addr, uint64_t tag,
	uint64_t ignore, void *context)
{ return -FI_ENOSYS; }
static ssize_t tg_msg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
	uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t tg_send(struct fid_ep *ep, const void *buf, size_t len,
	void *desc, fi_addr_t dest_addr, uint64_t tag, void *context)
{ return -FI_ENOSYS; }
static ssize_t tg_sendv(struct fid_ep *ep, const struct iovec *iov,
	void **desc, size_t count, fi_addr_t dest_addr, uint64_t tag,
	void *context)
{ return -FI_ENOSYS; }
static ssize_t tg_inject(struct fid_ep *ep, const void *buf, size_t len,
	fi_addr_t dest_addr, uint64_t tag)
{ return -FI_ENOSYS; }
static ssize_t tg_senddata(struct fid_ep *ep, const void *buf, size_t len,
	void *desc, uint64_t data, fi_addr_t dest_addr, uint64_t tag,
	void *context)
{ return -FI_ENOSYS; }
static ssize_t tg_injectdata(struct fid_ep *ep, const void *buf, size_t len,
	uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{ return -FI_ENOSYS; }

struct fi_ops_tagged dgcheck_no_tagged = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = tg_recv, .recvv = tg_recvv, .recvmsg = tg_msg,
	.send = tg_send, .sendv = tg_sendv, .sendmsg = tg_msg,
	.inject = tg_inject, .senddata = tg_senddata,
	.injectdata = tg_injectdata,
};

/* Atomics */
static ssize_t at_write(struct fid_ep *ep, const void *buf, size_t count,
	void *desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
	enum fi_datatype datatype, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t at_writev(struct fid_ep *ep, const struct fi_ioc *iov,
	void **desc, size_t count, fi_addr_t dest_addr, uint64_t addr,
	uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t at_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
	uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t at_inject(struct fid_ep *ep, const void *buf, size_t count,
	fi_addr_t dest_addr, uint64_t addr, uint64_t key,
	enum fi_datatype datatype, enum fi_op op)
{ return -FI_ENOSYS; }
static ssize_t at_readwrite(struct fid_ep *ep, const void *buf, size_t count,
	void *desc, void *result, void *result_desc, fi_addr_t dest_addr,
	uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op,
	void *context)
{ return -FI_ENOSYS; }
static ssize_t at_readwritev(struct fid_ep *ep, const struct fi_ioc *iov,
	void **desc, size_t count, struct fi_ioc *resultv, void **result_desc,
	size_t result_count, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
	enum fi_datatype datatype, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t at_readwritemsg(struct fid_ep *ep,
	const struct fi_msg_atomic *msg, struct fi_ioc *resultv,
	void **result_desc, size_t result_count, uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t at_compwrite(struct fid_ep *ep, const void *buf, size_t count,
	void *desc, const void *compare, void *compare_desc, void *result,
	void *result_desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
	enum fi_datatype datatype, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t at_compwritev(struct fid_ep *ep, const struct fi_ioc *iov,
	void **desc, size_t count, const struct fi_ioc *comparev,
	void **compare_desc, size_t compare_count, struct fi_ioc *resultv,
	void **result_desc, size_t result_count, fi_addr_t dest_addr,
	uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op,
	void *context)
{ return -FI_ENOSYS; }
static ssize_t at_compwritemsg(struct fid_ep *ep,
	const struct fi_msg_atomic *msg, const struct fi_ioc *comparev,
	void **compare_desc, size_t compare_count, struct fi_ioc *resultv,
	void **result_desc, size_t result_count, uint64_t flags)
{ return -FI_ENOSYS; }
static int at_valid(struct fid_ep *ep, enum fi_datatype datatype,
	enum fi_op op, size_t *count)
{ return -FI_ENOSYS; }

struct fi_ops_atomic dgcheck_no_atomic = {
	.size = sizeof(struct fi_ops_atomic),
	.write = at_write, .writev = at_writev, .writemsg = at_writemsg,
	.inject = at_inject, .readwrite = at_readwrite,
	.readwritev = at_readwritev, .readwritemsg = at_readwritemsg,
	.compwrite = at_compwrite, .compwritev = at_compwritev,
	.compwritemsg = at_compwritemsg, .writevalid = at_valid,
	.readwritevalid = at_valid, .compwritevalid = at_valid,
};

/* Collectives */
static ssize_t co_barrier(struct fid_ep *ep, fi_addr_t coll_addr,
	void *context)
{ return -FI_ENOSYS; }
static ssize_t co_broadcast(struct fid_ep *ep, void *buf, size_t count,
	void *desc, fi_addr_t coll_addr, fi_addr_t root_addr,
	enum fi_datatype datatype, uint64_t flags, void *context)
{ return -FI_ENOSYS; }
static ssize_t co_gather3(struct fid_ep *ep, const void *buf, size_t count,
	void *desc, void *result, void *result_desc, fi_addr_t coll_addr,
	enum fi_datatype datatype, uint64_t flags, void *context)
{ return -FI_ENOSYS; }
static ssize_t co_reduce3(struct fid_ep *ep, const void *buf, size_t count,
	void *desc, void *result, void *result_desc, fi_addr_t coll_addr,
	enum fi_datatype datatype, enum fi_op op, uint64_t flags, void *context)
{ return -FI_ENOSYS; }
static ssize_t co_reduce(struct fid_ep *ep, const void *buf, size_t count,
	void *desc, void *result, void *result_desc, fi_addr_t coll_addr,
	fi_addr_t root_addr, enum fi_datatype datatype, enum fi_op op,
	uint64_t flags, void *context)
{ return -FI_ENOSYS; }
static ssize_t co_rooted(struct fid_ep *ep, const void *buf, size_t count,
	void *desc, void *result, void *result_desc, fi_addr_t coll_addr,
	fi_addr_t root_addr, enum fi_datatype datatype, uint64_t flags,
	void *context)
{ return -FI_ENOSYS; }
static ssize_t co_msg(struct fid_ep *ep, const struct fi_msg_collective *msg,
	struct fi_ioc *resultv, void **result_desc, size_t result_count,
	uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t co_barrier2(struct fid_ep *ep, fi_addr_t coll_addr,
	uint64_t flags, void *context)
{ return -FI_ENOSYS; }

struct fi_ops_collective dgcheck_no_collective = {
	.size = sizeof(struct fi_ops_collective),
	.barrier = co_barrier, .broadcast = co_broadcast,
	.alltoall = co_gather3, .allreduce = co_reduce3,
	.allgather = co_gather3, .reduce_scatter = co_reduce3,
	.reduce = co_reduce, .scatter = co_rooted, .gather = co_rooted,
	.msg = co_msg, .barrier2 = co_barrier2,
};

/* Fabric, domain, endpoint and connection-management slots. */
int dgcheck_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
	struct fid_pep **pep, void *context)
{ return -FI_ENOSYS; }
int dgcheck_no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
	struct fid_wait **waitset)
{ return -FI_ENOSYS; }
int dgcheck_no_trywait(struct fid_fabric *fabric, struct fid **fids,
	int count)
{ return -FI_ENOSYS; }
int dgcheck_no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
	struct fid_ep **sep, void *context)
{ return -FI_ENOSYS; }
int dgcheck_no_cntr_open(struct fid_domain *domain,
	struct fi_cntr_attr *attr, struct fid_cntr **cntr, void *context)
{ return -FI_ENOSYS; }
int dgcheck_no_poll_open(struct fid_domain *domain,
	struct fi_poll_attr *attr, struct fid_poll **pollset)
{ return -FI_ENOSYS; }
int dgcheck_no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
	struct fid_stx **stx, void *context)
{ return -FI_ENOSYS; }
int dgcheck_no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
	struct fid_ep **rx_ep, void *context)
{ return -FI_ENOSYS; }
int dgcheck_no_query_atomic(struct fid_domain *domain,
	enum fi_datatype datatype, enum fi_op op,
	struct fi_atomic_attr *attr, uint64_t flags)
{ return -FI_ENOSYS; }
int dgcheck_no_query_collective(struct fid_domain *domain,
	enum fi_collective_op coll, struct fi_collective_attr *attr,
	uint64_t flags)
{ return -FI_ENOSYS; }
int dgcheck_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
	struct fid_ep **tx_ep, void *context)
{ return -FI_ENOSYS; }
int dgcheck_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
	struct fid_ep **rx_ep, void *context)
{ return -FI_ENOSYS; }
int dgcheck_no_setname(fid_t fid, void *addr, size_t addrlen)
{ return -FI_ENOSYS; }
int dgcheck_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{ return -FI_ENOSYS; }
int dgcheck_no_connect(struct fid_ep *ep, const void *addr,
	const void *param, size_t paramlen)
{ return -FI_ENOSYS; }
int dgcheck_no_listen(struct fid_pep *pep)
{ return -FI_ENOSYS; }
int dgcheck_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{ return -FI_ENOSYS; }
int dgcheck_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
	size_t paramlen)
{ return -FI_ENOSYS; }
int dgcheck_no_shutdown(struct fid_ep *ep, uint64_t flags)
{ return -FI_ENOSYS; }
int dgcheck_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
	struct fid_mc **mc, void *context)
{ return -FI_ENOSYS; }
