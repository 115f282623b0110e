/*
 * Self-test of the dgcheck provider: every contract point is exercised on
 * 127.0.0.1 and each check can fail.  Run with FI_PROVIDER_PATH pointing at
 * the directory holding libdgcheck-fi.so (make check does).
 *
 * The provider's violation messages go to stderr, which the test captures
 * in a file so it can count them after each step.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define API FI_VERSION(1, 5)
#define BUF 4096

static int passed, failed;
static char stderr_path[64], report_path[64];
static unsigned long exp_posts, exp_sends, exp_recvs;

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

/* Violation lines the provider printed so far (it prints the first 20). */
static int violations(void)
{
	FILE *f;
	char line[512];
	int n = 0;

	fflush(stderr);
	f = fopen(stderr_path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "dgcheck: violation:"))
			n++;
	fclose(f);
	return n;
}

static struct fi_info *hints_new(uint64_t caps, uint64_t mode, int mr_local)
{
	struct fi_info *h = fi_allocinfo();

	h->caps = caps;
	h->mode = mode;
	h->addr_format = FI_SOCKADDR_IN;
	h->ep_attr->type = FI_EP_DGRAM;
	h->domain_attr->mr_mode = mr_local ? FI_MR_LOCAL : 0;
	h->domain_attr->name = strdup("lo");
	h->fabric_attr->prov_name = strdup("dgcheck");
	return h;
}

static struct fi_info *getinfo(uint64_t caps, uint64_t mode, int mr_local)
{
	struct fi_info *h = hints_new(caps, mode, mr_local), *info = NULL;

	if (fi_getinfo(API, NULL, NULL, 0, h, &info))
		info = NULL;
	fi_freeinfo(h);
	return info;
}

/* ---- objects ---- */

struct rig {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
};

struct port {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct sockaddr_in name;
	fi_addr_t addr;
};

static int port_open(struct rig *r, struct port *p, size_t tx, size_t rx,
		     size_t cq_size)
{
	struct fi_info *info = fi_dupinfo(r->info);
	struct fi_cq_attr ca = { .size = cq_size, .format = FI_CQ_FORMAT_MSG,
				 .wait_obj = FI_WAIT_NONE };
	size_t len = sizeof(p->name);
	int ret;

	info->tx_attr->size = tx;
	info->rx_attr->size = rx;
	ret = fi_endpoint(r->domain, info, &p->ep, NULL);
	fi_freeinfo(info);
	if (ret)
		return ret;
	if ((ret = fi_cq_open(r->domain, &ca, &p->cq, NULL)) ||
	    (ret = fi_ep_bind(p->ep, &p->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (ret = fi_ep_bind(p->ep, &r->av->fid, 0)) ||
	    (ret = fi_enable(p->ep)) ||
	    (ret = fi_getname(&p->ep->fid, &p->name, &len)))
		return ret;
	return fi_av_insert(r->av, &p->name, 1, &p->addr, 0, NULL) == 1 ?
	       0 : -FI_EINVAL;
}

static void port_close(struct port *p)
{
	if (p->ep)
		fi_close(&p->ep->fid);
	if (p->cq)
		fi_close(&p->cq->fid);
	memset(p, 0, sizeof(*p));
}

/* Poll up to 2 s for one completion (or an error: returns -FI_EAVAIL). */
static ssize_t wait_comp(struct port *p, struct fi_cq_msg_entry *e,
			 fi_addr_t *src)
{
	struct timespec t0, t;
	ssize_t ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		ret = src ? fi_cq_readfrom(p->cq, e, 1, src) :
			    fi_cq_read(p->cq, e, 1);
		if (ret != -FI_EAGAIN)
			return ret;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 2)
			return -FI_ETIMEDOUT;
		usleep(100);
	}
}

static ssize_t post_send(struct port *p, void *buf, size_t len, void *desc,
			 fi_addr_t to, struct fi_context *ctx)
{
	ssize_t ret = fi_send(p->ep, buf, len, desc, to, ctx);

	if (!ret) {
		exp_posts++;
		exp_sends++;
	}
	return ret;
}

static ssize_t post_recv(struct port *p, void *buf, size_t len, void *desc,
			 struct fi_context *ctx)
{
	ssize_t ret = fi_recv(p->ep, buf, len, desc, FI_ADDR_UNSPEC, ctx);

	if (!ret) {
		exp_posts++;
		exp_recvs++;
	}
	return ret;
}

/* ---- checks ---- */

static size_t check_getinfo(void)
{
	struct fi_info *info;
	size_t prefix = 0;

	info = getinfo(FI_MSG, FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX, 0);
	check(info == NULL, "getinfo without FI_MR_LOCAL gives no entry");
	fi_freeinfo(info);
	info = getinfo(FI_MSG, FI_CONTEXT, 1);
	check(info == NULL, "getinfo without FI_MSG_PREFIX mode gives no entry");
	fi_freeinfo(info);
	info = getinfo(FI_MSG, FI_MSG_PREFIX, 1);
	check(info == NULL, "getinfo without FI_CONTEXT mode gives no entry");
	fi_freeinfo(info);
	info = getinfo(FI_MSG, FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX, 1);
	check(info && !(info->caps & FI_SOURCE),
	      "getinfo with the contract's hints; FI_SOURCE not given unasked");
	fi_freeinfo(info);
	info = getinfo(FI_MSG | FI_SOURCE, FI_CONTEXT | FI_MSG_PREFIX, 1);
	if (!info) {
		check(0, "getinfo on lo with FI_SOURCE");
		return 0;
	}
	prefix = info->ep_attr->msg_prefix_size;
	check(prefix == 64 && (info->mode & FI_MSG_PREFIX),
	      "msg_prefix_size reported: %zu (expected 64)", prefix);
	check((info->caps & FI_SOURCE) != 0, "FI_SOURCE given when asked");
	check(info->domain_attr->mr_mode & FI_MR_LOCAL, "mr_mode FI_MR_LOCAL");
	check(info->ep_attr->max_msg_size == 65507,
	      "max_msg_size on lo: %zu (expected 65507)",
	      info->ep_attr->max_msg_size);
	check(!strcmp(info->fabric_attr->name, "127.0.0.0/8") &&
	      !strcmp(info->domain_attr->name, "lo"),
	      "fabric \"%s\", domain \"%s\"", info->fabric_attr->name,
	      info->domain_attr->name);
	check(info->tx_attr->size == 256 && info->rx_attr->size == 512 &&
	      info->tx_attr->inject_size == 0 && info->tx_attr->iov_limit == 2,
	      "tx size %zu, rx size %zu, inject %zu, iov_limit %zu",
	      info->tx_attr->size, info->rx_attr->size,
	      info->tx_attr->inject_size, info->tx_attr->iov_limit);
	fi_freeinfo(info);
	return prefix;
}

static int rig_open(struct rig *r)
{
	struct fi_av_attr aa = { .type = FI_AV_MAP };

	memset(r, 0, sizeof(*r));
	r->info = getinfo(FI_MSG | FI_SOURCE,
			  FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX, 1);
	if (!r->info || fi_fabric(r->info->fabric_attr, &r->fabric, NULL) ||
	    fi_domain(r->fabric, r->info, &r->domain, NULL) ||
	    fi_av_open(r->domain, &aa, &r->av, NULL))
		return -1;
	return 0;
}

struct bufs {
	char *a, *b;
	struct fid_mr *mra, *mrb;
};

static void check_av(struct rig *r, struct port *a)
{
	struct sockaddr_in sin[3] = { a->name, a->name, a->name };
	fi_addr_t fa[3];
	int n;

	sin[1].sin_family = AF_INET6;
	n = fi_av_insert(r->av, sin, 3, fa, 0, NULL);
	check(n == 2 && fa[0] != FI_ADDR_NOTAVAIL &&
	      fa[1] == FI_ADDR_NOTAVAIL && fa[2] != FI_ADDR_NOTAVAIL,
	      "fi_av_insert reports a bad address: %d of 3, fi_addr[1] %s",
	      n, fa[1] == FI_ADDR_NOTAVAIL ? "NOTAVAIL" : "set");
	check(a->name.sin_family == AF_INET &&
	      a->name.sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
	      a->name.sin_port != 0, "fi_getname gives 127.0.0.1:%u",
	      ntohs(a->name.sin_port));
}

static void check_bad_sends(struct rig *r, struct port *a, struct port *b,
			    struct bufs *m, size_t prefix)
{
	struct fi_context ctx;
	int v0 = violations(), junk;
	ssize_t ret;

	ret = post_send(a, m->a, prefix + 8, NULL, b->addr, &ctx);
	check(ret == -FI_EINVAL && violations() == v0 + 1,
	      "send without a descriptor fails (%zd) and counts a violation",
	      ret);
	ret = post_send(a, m->a + BUF - prefix, prefix + 8,
			fi_mr_desc(m->mra), b->addr, &ctx);
	check(ret == -FI_EINVAL && violations() == v0 + 2,
	      "send past the end of its registration fails (%zd)", ret);
	ret = post_send(a, m->a, prefix + 8, &junk, b->addr, &ctx);
	check(ret == -FI_EINVAL && violations() == v0 + 3,
	      "send with a descriptor that is no registration fails (%zd)",
	      ret);
	ret = post_send(a, m->a, prefix - 1, fi_mr_desc(m->mra), b->addr,
			&ctx);
	check(ret == -FI_EINVAL && violations() == v0 + 4,
	      "send shorter than the prefix fails (%zd)", ret);
	ret = post_send(a, m->a, prefix + 8, fi_mr_desc(m->mra), 12345, &ctx);
	check(ret == -FI_EINVAL && violations() == v0 + 5,
	      "send to an fi_addr not in the AV fails (%zd)", ret);
	ret = fi_inject(a->ep, m->a, prefix + 1, b->addr);
	check(ret == -FI_EINVAL && violations() == v0 + 6,
	      "fi_inject beyond inject_size 0 fails (%zd)", ret);
	ret = post_send(a, m->a, prefix + 8, fi_mr_desc(m->mra), b->addr,
			NULL);
	check(ret == -FI_EINVAL && violations() == v0 + 7,
	      "send without a context fails (%zd)", ret);
	(void) r;
}

static void check_roundtrip(struct port *a, struct port *b, struct bufs *m,
			    size_t prefix)
{
	struct fi_context sctx, rctx;
	struct fi_cq_msg_entry e;
	fi_addr_t src = 0;
	size_t i, bad = 0;
	ssize_t ret;
	int v0 = violations();

	memset(&rctx, 0, sizeof(rctx));
	memset(m->b, 0x5A, BUF);
	for (i = 0; i < 37; i++)
		m->a[prefix + i] = (char) (i * 7 + 1);
	ret = post_recv(b, m->b, prefix + 100, fi_mr_desc(m->mrb), &rctx);
	check(ret == 0 && rctx.internal[0] != NULL,
	      "registered receive posted (%zd); provider wrote its context",
	      ret);
	ret = post_send(a, m->a, prefix + 37, fi_mr_desc(m->mra), b->addr,
			&sctx);
	check(ret == 0, "registered send posted (%zd)", ret);
	ret = wait_comp(a, &e, NULL);
	check(ret == 1 && e.op_context == &sctx && (e.flags & FI_SEND),
	      "send completion carries the caller's context (%zd)", ret);
	ret = wait_comp(b, &e, &src);
	check(ret == 1 && e.op_context == &rctx && (e.flags & FI_RECV) &&
	      e.len == prefix + 37, "receive completion: len %zu (expected "
	      "%zu, prefix included)", ret == 1 ? e.len : 0, prefix + 37);
	check(ret == 1 && !memcmp(m->b + prefix, m->a + prefix, 37) &&
	      (unsigned char) m->b[prefix + 37] == 0x5A,
	      "payload landed after the prefix");
	for (i = 0; i < prefix; i++)
		bad += m->b[i] == 0x5A;
	check(ret == 1 && bad == 0, "prefix area scribbled (%zu bytes kept)",
	      bad);
	check(src == a->addr, "readfrom gives the sender's fi_addr (%s)",
	      src == a->addr ? "match" : "mismatch");
	check(violations() == v0, "no violation on the correct round trip");
}

static void check_context(struct port *a, struct port *b, struct bufs *m,
			  size_t prefix)
{
	struct fi_context sctx, rctx;
	struct fi_cq_msg_entry e;
	int v0 = violations();
	ssize_t ret;

	ret = post_recv(b, m->b, prefix + 100, fi_mr_desc(m->mrb), &rctx);
	ret |= post_recv(b, m->b + 1024, prefix + 100, fi_mr_desc(m->mrb),
			 &rctx);
	check(ret == -FI_EINVAL && violations() == v0 + 1,
	      "a context reused while its receive is outstanding: violation");
	rctx.internal[1] = NULL;	/* the application scribbles on it */
	ret = post_send(a, m->a, prefix + 5, fi_mr_desc(m->mra), b->addr,
			&sctx);
	ret |= wait_comp(a, &e, NULL) == 1 ? 0 : -1;
	ret |= wait_comp(b, &e, NULL) == 1 ? 0 : -1;
	check(ret == 0 && e.op_context == &rctx && violations() == v0 + 2,
	      "a context modified while outstanding: violation at completion");
}

static void check_trunc(struct port *a, struct port *b, struct bufs *m,
			size_t prefix)
{
	struct fi_context sctx, rctx;
	struct fi_cq_msg_entry e;
	struct fi_cq_err_entry err = { 0 };
	ssize_t ret;

	post_recv(b, m->b, prefix + 8, fi_mr_desc(m->mrb), &rctx);
	post_send(a, m->a, prefix + 32, fi_mr_desc(m->mra), b->addr, &sctx);
	wait_comp(a, &e, NULL);
	ret = wait_comp(b, &e, NULL);
	if (ret == -FI_EAVAIL)
		fi_cq_readerr(b->cq, &err, 0);
	check(ret == -FI_EAVAIL && err.err == FI_ETRUNC && err.olen == 24 &&
	      err.op_context == &rctx && err.flags == (FI_RECV | FI_MSG),
	      "truncation: FI_ETRUNC, olen %zu (expected 24)", err.olen);
}

static void check_overrun(struct rig *r, struct port *b, struct bufs *m,
			  size_t prefix)
{
	struct port c = { 0 };
	struct fi_context ctx[3];
	struct fi_cq_msg_entry e[4];
	struct fi_cq_err_entry err = { 0 };
	int v0 = violations(), i;
	ssize_t ret, got;

	if (port_open(r, &c, 8, 8, 2)) {
		check(0, "endpoint with a CQ of 2 entries");
		return;
	}
	for (i = 0; i < 3; i++)
		post_send(&c, m->a, prefix + 4, fi_mr_desc(m->mra), b->addr,
			  &ctx[i]);
	ret = fi_cq_read(c.cq, e, 4);
	if (ret == -FI_EAVAIL)
		fi_cq_readerr(c.cq, &err, 0);
	got = fi_cq_read(c.cq, e, 4);
	check(ret == -FI_EAVAIL && err.err == FI_EOVERRUN &&
	      err.op_context == NULL && violations() == v0 + 1 && got == 2,
	      "3 sends into a CQ of 2: FI_EOVERRUN, a violation, 2 entries "
	      "kept (%zd)", got);
	port_close(&c);
}

static void check_depths(struct rig *r, struct port *b, struct bufs *m,
			 size_t prefix)
{
	struct port d = { 0 };
	struct fi_context ctx[6];
	struct fi_cq_msg_entry e[8];
	int v0 = violations(), i;
	ssize_t ret = 0;

	if (port_open(r, &d, 4, 4, 16)) {
		check(0, "endpoint with tx/rx depth 4");
		return;
	}
	for (i = 0; i < 4 && !ret; i++)
		ret = post_send(&d, m->a, prefix + 4, fi_mr_desc(m->mra),
				b->addr, &ctx[i]);
	ret |= post_send(&d, m->a, prefix + 4, fi_mr_desc(m->mra), b->addr,
			 &ctx[4]) == -FI_EAGAIN ? 0 : -1;
	check(ret == 0 && violations() == v0,
	      "a 5th outstanding send on a tx depth of 4: -FI_EAGAIN");
	ret = fi_cq_read(d.cq, e, 8);
	ret = ret == 4 ? post_send(&d, m->a, prefix + 4, fi_mr_desc(m->mra),
				   b->addr, &ctx[5]) : -1;
	check(ret == 0, "reading the completions frees the send slots");
	fi_cq_read(d.cq, e, 8);
	for (i = 0, ret = 0; i < 4 && !ret; i++)
		ret = post_recv(&d, m->b + 512 * i, prefix + 64,
				fi_mr_desc(m->mrb), &ctx[i]);
	ret |= post_recv(&d, m->b + 2048, prefix + 64, fi_mr_desc(m->mrb),
			 &ctx[4]) == -FI_EAGAIN ? 0 : -1;
	check(ret == 0 && violations() == v0,
	      "a 5th posted receive on an rx depth of 4: -FI_EAGAIN");
	ret = fi_close(&m->mrb->fid);
	m->mrb = NULL;
	check(ret == 0 && violations() == v0 + 1,
	      "closing a registration with posted receives: violation");
	port_close(&d);
}

static void check_other_domain(struct rig *r, struct port *a, struct port *b,
			       size_t prefix)
{
	struct fid_domain *dom2;
	struct fid_mr *mr2;
	struct fi_context ctx;
	static char buf[256];
	int v0 = violations();
	ssize_t ret = -1;

	if (fi_domain(r->fabric, r->info, &dom2, NULL) ||
	    fi_mr_reg(dom2, buf, sizeof(buf), FI_SEND, 0, 0, 0, &mr2, NULL)) {
		check(0, "second domain");
		return;
	}
	ret = post_send(a, buf, prefix + 4, fi_mr_desc(mr2), b->addr, &ctx);
	check(ret == -FI_EINVAL && violations() == v0 + 1,
	      "a registration of another domain is refused (%zd)", ret);
	fi_close(&mr2->fid);
	fi_close(&dom2->fid);
}

/* The provider appends its line when the fabric is closed. */
static void check_report(void)
{
	char line[512], want[256];
	FILE *f = fopen(report_path, "r");
	int found = 0, v = violations();

	snprintf(want, sizeof(want), "dgcheck pid=%d violations=%d posts=%lu "
		 "sends=%lu recvs=%lu ", (int) getpid(), v, exp_posts,
		 exp_sends, exp_recvs);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, want, strlen(want)) &&
		    strstr(line, " prefix=64 enforce=1"))
			found = 1;
	if (f)
		fclose(f);
	check(found, "report line \"%s... prefix=64 enforce=1\"", want);
}

/* ---- DGCHECK_ENFORCE_MR=0, in a child with its own environment ---- */

static int child_noenforce(void)
{
	struct fi_info *info = getinfo(FI_MSG, FI_CONTEXT | FI_MSG_PREFIX, 0);

	if (!info || info->domain_attr->mr_mode != 0)
		return 1;
	fi_freeinfo(info);
	return 0;
}

static void check_noenforce(const char *self)
{
	pid_t pid = fork();
	int status = -1;

	if (pid == 0) {
		setenv("DGCHECK_ENFORCE_MR", "0", 1);
		execl(self, self, "--child-noenforce", (char *) NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "DGCHECK_ENFORCE_MR=0: entries without FI_MR_LOCAL, mr_mode 0");
}

static void run(size_t prefix)
{
	struct rig r;
	struct port a = { 0 }, b = { 0 };
	struct bufs m = { 0 };

	if (rig_open(&r) || port_open(&r, &a, 16, 16, 64) ||
	    port_open(&r, &b, 16, 16, 64)) {
		check(0, "open fabric, domain, AV, endpoints and CQs on lo");
		return;
	}
	m.a = calloc(1, BUF);
	m.b = calloc(1, BUF);
	if (fi_mr_reg(r.domain, m.a, BUF, FI_SEND, 0, 0, 0, &m.mra, NULL) ||
	    fi_mr_reg(r.domain, m.b, BUF, FI_RECV, 0, 0, 0, &m.mrb, NULL)) {
		check(0, "fi_mr_reg");
		return;
	}
	check_av(&r, &a);
	check_bad_sends(&r, &a, &b, &m, prefix);
	check_roundtrip(&a, &b, &m, prefix);
	check_context(&a, &b, &m, prefix);
	check_trunc(&a, &b, &m, prefix);
	check_overrun(&r, &b, &m, prefix);
	check_other_domain(&r, &a, &b, prefix);
	check_depths(&r, &b, &m, prefix);
	port_close(&a);
	port_close(&b);
	fi_close(&m.mra->fid);
	fi_close(&r.av->fid);
	fi_close(&r.domain->fid);
	check(fi_close(&r.fabric->fid) == 0, "every object closes");
	fi_freeinfo(r.info);
	free(m.a);
	free(m.b);
	check_report();
}

int main(int argc, char **argv)
{
	size_t prefix;

	if (argc > 1 && !strcmp(argv[1], "--child-noenforce"))
		return child_noenforce();
	unsetenv("DGCHECK_PREFIX");
	unsetenv("DGCHECK_INJECT");
	unsetenv("DGCHECK_TX_SIZE");
	unsetenv("DGCHECK_RX_SIZE");
	unsetenv("DGCHECK_ENFORCE_MR");
	snprintf(stderr_path, sizeof(stderr_path), "/tmp/dgcheck-stderr.%d",
		 (int) getpid());
	snprintf(report_path, sizeof(report_path), "/tmp/dgcheck-report.%d",
		 (int) getpid());
	setenv("DGCHECK_REPORT", report_path, 1);
	if (!freopen(stderr_path, "w", stderr))
		return 2;
	check_noenforce(strchr(argv[0], '/') ? argv[0] : "/proc/self/exe");
	prefix = check_getinfo();
	if (prefix)
		run(prefix);
	printf("%d passed, %d failed\n", passed, failed);
	unlink(stderr_path);
	unlink(report_path);
	return failed ? 1 : 0;
}
