/*
 * dgcheck: a test-only libfabric provider that emulates the contract of the
 * usnic provider (FI_EP_DGRAM, FI_MSG_PREFIX, FI_CONTEXT, FI_MR_LOCAL, small
 * CQs) over kernel UDP sockets and counts every violation of that contract.
 */
#ifndef DGCHECK_H
#define DGCHECK_H

#include <stdint.h>
#include <stddef.h>
#include <pthread.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/providers/fi_prov.h>

#define DGCHECK_NAME "dgcheck"
#define DGCHECK_PROV_VERSION FI_VERSION(1, 0)
#define DGCHECK_IOV_LIMIT 2
#define DGCHECK_MAX_UDP 65507
#define DGCHECK_CQ_DEFAULT 128
#define DGCHECK_CQ_MAX 8192

/* Settings read once from the environment when the provider is loaded. */
struct dgcheck_env {
	size_t prefix;
	size_t inject;
	size_t tx_size;
	size_t rx_size;
	int enforce_mr;
	const char *report;
};

struct dgcheck_counters {
	uint64_t violations;
	uint64_t posts;
	uint64_t sends;
	uint64_t recvs;
	uint64_t regs_total;
	uint64_t regs_live;
	uint64_t overruns;
};

extern struct dgcheck_env dgcheck_env;
extern struct dgcheck_counters dgcheck_cnt;
extern struct fi_provider dgcheck_prov;

/* One lock for the whole provider: simple, and posts are not contended
 * enough in tests for it to matter. */
extern pthread_mutex_t dgcheck_lock;
#define DGCHECK_LOCK() pthread_mutex_lock(&dgcheck_lock)
#define DGCHECK_UNLOCK() pthread_mutex_unlock(&dgcheck_lock)

/* Pointer sets: live registrations (by descriptor) and the contexts of
 * live operations, so a pointer from the caller is looked up, never
 * dereferenced blindly. */
struct dgcheck_set;
extern struct dgcheck_set dgcheck_live_mrs;
extern struct dgcheck_set dgcheck_live_ctxs;
int dgcheck_set_add(struct dgcheck_set *s, const void *p);
void dgcheck_set_del(struct dgcheck_set *s, const void *p);
int dgcheck_set_has(struct dgcheck_set *s, const void *p);

void dgcheck_violation(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
void dgcheck_report(void);
void dgcheck_fabric_count(int delta);

/* Interface facts shared by getinfo, fabric and domain. */
struct dgcheck_if {
	char name[IF_NAMESIZE];
	struct in_addr addr;
	struct in_addr mask;
	unsigned mtu;
};
int dgcheck_if_find(const char *name, struct dgcheck_if *out);
size_t dgcheck_max_msg(unsigned mtu);

int dgcheck_getinfo(uint32_t version, const char *node, const char *service,
		    uint64_t flags, const struct fi_info *hints,
		    struct fi_info **info);

struct dgcheck_fabric {
	struct fid_fabric fab;
	char *name;
	uint32_t api_version;
	int refs;
};

struct dgcheck_domain {
	struct fid_domain dom;
	struct dgcheck_fabric *fab;
	struct dgcheck_if ifc;
	size_t max_msg;
	size_t prefix;
	size_t inject;
	int enforce;
	int refs;
};

struct dgcheck_mr {
	struct fid_mr mr;
	struct dgcheck_domain *dom;
	char *base;
	size_t len;
	int refs;	/* outstanding operations using it */
	int closed;	/* closed while in use: freed by the last release */
	char desc;	/* &desc is the descriptor: distinct from the fid */
};

struct dgcheck_av {
	struct fid_av av;
	struct dgcheck_domain *dom;
	enum fi_av_type type;
	struct sockaddr_in *addr;
	unsigned char *valid;
	size_t count;
	size_t cap;
	int refs;
};

struct dgcheck_ep;

/* A posted send or receive, alive until its completion is read. */
struct dgcheck_op {
	struct dgcheck_op *next;
	struct dgcheck_ep *ep;
	struct fi_context *ctx;
	uint64_t flags;
	struct iovec iov[DGCHECK_IOV_LIMIT];
	struct dgcheck_mr *mr[DGCHECK_IOV_LIMIT];
	size_t iov_count;
	size_t len;
	size_t olen;
	int err;
	struct sockaddr_in src;
};

struct dgcheck_cq {
	struct fid_cq cq;
	struct dgcheck_domain *dom;
	enum fi_cq_format format;
	size_t size;
	struct dgcheck_op **ring;
	size_t head;
	size_t count;
	int overrun;	/* an FI_EOVERRUN error entry is pending */
	struct dgcheck_ep **rx_eps;
	size_t n_rx_eps;
	int refs;
};

struct dgcheck_ep {
	struct fid_ep ep;
	struct dgcheck_domain *dom;
	int fd;
	struct sockaddr_in name;
	struct dgcheck_cq *txcq;
	struct dgcheck_cq *rxcq;
	struct dgcheck_av *av;
	size_t tx_size;
	size_t rx_size;
	size_t tx_out;
	size_t rx_posted;
	struct dgcheck_op *rx_head;
	struct dgcheck_op *rx_tail;
	int enabled;
};

struct dgcheck_eq {
	struct fid_eq eq;
	struct dgcheck_fabric *fab;
};

int dgcheck_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
			void *context);
int dgcheck_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		    struct fid_eq **eq, void *context);
int dgcheck_mr_reg(struct fid *fid, const void *buf, size_t len,
		   uint64_t access, uint64_t offset, uint64_t requested_key,
		   uint64_t flags, struct fid_mr **mr, void *context);
int dgcheck_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		    uint64_t access, uint64_t offset, uint64_t requested_key,
		    uint64_t flags, struct fid_mr **mr, void *context);
int dgcheck_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		       uint64_t flags, struct fid_mr **mr);
int dgcheck_mr_check(struct dgcheck_domain *dom, void *desc, const void *buf,
		     size_t len, const char *what, struct dgcheck_mr **out);
void dgcheck_mr_release(struct dgcheck_mr *mr);

int dgcheck_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		    struct fid_av **av, void *context);
int dgcheck_av_get(struct dgcheck_av *av, fi_addr_t fi_addr,
		   struct sockaddr_in *sin);
fi_addr_t dgcheck_av_reverse(struct dgcheck_av *av,
			     const struct sockaddr_in *sin);

int dgcheck_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		    struct fid_cq **cq, void *context);
void dgcheck_cq_push(struct dgcheck_cq *cq, struct dgcheck_op *op);
int dgcheck_cq_add_rx_ep(struct dgcheck_cq *cq, struct dgcheck_ep *ep);
void dgcheck_cq_del_ep(struct dgcheck_cq *cq, struct dgcheck_ep *ep);

int dgcheck_ep_open(struct fid_domain *domain, struct fi_info *info,
		    struct fid_ep **ep, void *context);
void dgcheck_ep_progress(struct dgcheck_ep *ep, struct dgcheck_cq *cq);
void dgcheck_op_release(struct dgcheck_op *op);
int dgcheck_ctx_verify(struct dgcheck_op *op);

/* Tables of functions that answer -FI_ENOSYS (dgcheck_enosys.c). */
extern struct fi_ops_rma dgcheck_no_rma;
extern struct fi_ops_tagged dgcheck_no_tagged;
extern struct fi_ops_atomic dgcheck_no_atomic;
extern struct fi_ops_collective dgcheck_no_collective;
int dgcheck_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int dgcheck_no_control(struct fid *fid, int command, void *arg);
int dgcheck_no_ops_open(struct fid *fid, const char *name, uint64_t flags,
			void **ops, void *context);
int dgcheck_no_tostr(const struct fid *fid, char *buf, size_t len);
int dgcheck_no_ops_set(struct fid *fid, const char *name, uint64_t flags,
		       void *ops, void *context);
int dgcheck_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
			  struct fid_pep **pep, void *context);
int dgcheck_no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
			 struct fid_wait **waitset);
int dgcheck_no_trywait(struct fid_fabric *fabric, struct fid **fids,
		       int count);
int dgcheck_no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
			   struct fid_ep **sep, void *context);
int dgcheck_no_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
			 struct fid_cntr **cntr, void *context);
int dgcheck_no_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
			 struct fid_poll **pollset);
int dgcheck_no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
		       struct fid_stx **stx, void *context);
int dgcheck_no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
		       struct fid_ep **rx_ep, void *context);
int dgcheck_no_query_atomic(struct fid_domain *domain,
			    enum fi_datatype datatype, enum fi_op op,
			    struct fi_atomic_attr *attr, uint64_t flags);
int dgcheck_no_query_collective(struct fid_domain *domain,
				enum fi_collective_op coll,
				struct fi_collective_attr *attr,
				uint64_t flags);
int dgcheck_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
		      struct fid_ep **tx_ep, void *context);
int dgcheck_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
		      struct fid_ep **rx_ep, void *context);
int dgcheck_no_setname(fid_t fid, void *addr, size_t addrlen);
int dgcheck_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen);
int dgcheck_no_connect(struct fid_ep *ep, const void *addr,
		       const void *param, size_t paramlen);
int dgcheck_no_listen(struct fid_pep *pep);
int dgcheck_no_accept(struct fid_ep *ep, const void *param, size_t paramlen);
int dgcheck_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
		      size_t paramlen);
int dgcheck_no_shutdown(struct fid_ep *ep, uint64_t flags);
int dgcheck_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
		    struct fid_mc **mc, void *context);

#endif
