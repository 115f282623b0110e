/*
 * Fabric, event queue (pingpong opens one; it never reports anything) and
 * domain objects, and the optional usnic fabric extension.
 */
#include "dgcheck.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<rdma/fi_ext_usnic.h>)
#include <rdma/fi_ext_usnic.h>
#define DGCHECK_HAVE_USNIC_EXT 1
#endif
#endif

/* ---- usnic extension ---- */

#ifdef DGCHECK_HAVE_USNIC_EXT
static unsigned link_speed(const char *ifname)
{
	char path[128];
	FILE *f;
	long v = 0;

	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &v) != 1 || v < 0)
		v = 0;	/* loopback and virtual links have no speed */
	fclose(f);
	return (unsigned) v;
}

/* The interface whose network is the fabric's "a.b.c.d/len" name. */
static int fabric_if(const struct dgcheck_fabric *fab, struct dgcheck_if *out)
{
	struct ifaddrs *list, *ifa;
	char net[INET_ADDRSTRLEN], name[64];
	int ret = -FI_ENODEV;

	if (getifaddrs(&list))
		return ret;
	for (ifa = list; ifa && ret; ifa = ifa->ifa_next) {
		struct in_addr a, m;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET ||
		    !ifa->ifa_netmask)
			continue;
		a = ((struct sockaddr_in *) ifa->ifa_addr)->sin_addr;
		m = ((struct sockaddr_in *) ifa->ifa_netmask)->sin_addr;
		a.s_addr &= m.s_addr;
		inet_ntop(AF_INET, &a, net, sizeof(net));
		snprintf(name, sizeof(name), "%s/%d", net,
			 __builtin_popcount(m.s_addr));
		if (!strcmp(name, fab->name))
			ret = dgcheck_if_find(ifa->ifa_name, out);
	}
	freeifaddrs(list);
	return ret;
}

static int usnic_getinfo(uint32_t version, struct fid_fabric *fabric,
			 struct fi_usnic_info *info)
{
	struct dgcheck_fabric *fab = (struct dgcheck_fabric *) fabric;
	struct dgcheck_if ifc;

	if (!info || fabric_if(fab, &ifc))
		return -FI_EINVAL;
	memset(info, 0, sizeof(*info));
	info->ui_version = version < 1 ? version : 1;	/* only v1 is filled */
	info->ui.v1.ui_link_speed = link_speed(ifc.name);
	info->ui.v1.ui_netmask_be = ifc.mask.s_addr;
	snprintf(info->ui.v1.ui_ifname, sizeof(info->ui.v1.ui_ifname), "%s",
		 ifc.name);
	return 0;
}

static struct fi_usnic_ops_fabric usnic_fabric_ops = {
	.size = sizeof(struct fi_usnic_ops_fabric),
	.getinfo = usnic_getinfo,
};
#endif

static int fabric_ops_open(struct fid *fid, const char *name, uint64_t flags,
			   void **ops, void *context)
{
	(void) fid; (void) flags; (void) context;
#ifdef DGCHECK_HAVE_USNIC_EXT
	if (name && !strcmp(name, FI_USNIC_FABRIC_OPS_1)) {
		*ops = &usnic_fabric_ops;
		return 0;
	}
#else
	(void) name; (void) ops;
#endif
	return -FI_ENOSYS;
}

/* ---- event queue ---- */

static ssize_t eq_read(struct fid_eq *eq, uint32_t *event, void *buf,
		       size_t len, uint64_t flags)
{
	(void) eq; (void) event; (void) buf; (void) len; (void) flags;
	return -FI_EAGAIN;
}

static ssize_t eq_readerr(struct fid_eq *eq, struct fi_eq_err_entry *buf,
			  uint64_t flags)
{
	(void) eq; (void) buf; (void) flags;
	return -FI_EAGAIN;
}

static ssize_t eq_write(struct fid_eq *eq, uint32_t event, const void *buf,
			size_t len, uint64_t flags)
{
	(void) eq; (void) event; (void) buf; (void) len; (void) flags;
	return -FI_ENOSYS;
}

static ssize_t eq_sread(struct fid_eq *eq, uint32_t *event, void *buf,
			size_t len, int timeout, uint64_t flags)
{
	(void) eq; (void) event; (void) buf; (void) len; (void) timeout;
	(void) flags;
	return -FI_EAGAIN;
}

static const char *eq_strerror(struct fid_eq *eq, int prov_errno,
			       const void *err_data, char *buf, size_t len)
{
	(void) eq; (void) err_data;
	if (buf && len)
		snprintf(buf, len, "dgcheck error %d", prov_errno);
	return buf && len ? buf : "dgcheck error";
}

static struct fi_ops_eq eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = eq_read,
	.readerr = eq_readerr,
	.write = eq_write,
	.sread = eq_sread,
	.strerror = eq_strerror,
};

static int eq_close(struct fid *fid)
{
	struct dgcheck_eq *eq = (struct dgcheck_eq *) fid;

	DGCHECK_LOCK();
	eq->fab->refs--;
	DGCHECK_UNLOCK();
	free(eq);
	return 0;
}

static struct fi_ops eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = eq_close,
	.bind = dgcheck_no_bind,
	.control = dgcheck_no_control,
	.ops_open = dgcheck_no_ops_open,
	.tostr = dgcheck_no_tostr,
	.ops_set = dgcheck_no_ops_set,
};

int dgcheck_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		    struct fid_eq **eqp, void *context)
{
	struct dgcheck_eq *eq = calloc(1, sizeof(*eq));

	(void) attr;
	if (!eq)
		return -FI_ENOMEM;
	eq->eq.fid.fclass = FI_CLASS_EQ;
	eq->eq.fid.context = context;
	eq->eq.fid.ops = &eq_fi_ops;
	eq->eq.ops = &eq_ops;
	eq->fab = (struct dgcheck_fabric *) fabric;
	DGCHECK_LOCK();
	eq->fab->refs++;
	DGCHECK_UNLOCK();
	*eqp = &eq->eq;
	return 0;
}

/* ---- domain ---- */

static struct fi_ops_mr mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = dgcheck_mr_reg,
	.regv = dgcheck_mr_regv,
	.regattr = dgcheck_mr_regattr,
};

static int endpoint2(struct fid_domain *domain, struct fi_info *info,
		     struct fid_ep **ep, uint64_t flags, void *context)
{
	return flags ? -FI_EINVAL : dgcheck_ep_open(domain, info, ep, context);
}

static struct fi_ops_domain domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = dgcheck_av_open,
	.cq_open = dgcheck_cq_open,
	.endpoint = dgcheck_ep_open,
	.scalable_ep = dgcheck_no_scalable_ep,
	.cntr_open = dgcheck_no_cntr_open,
	.poll_open = dgcheck_no_poll_open,
	.stx_ctx = dgcheck_no_stx_ctx,
	.srx_ctx = dgcheck_no_srx_ctx,
	.query_atomic = dgcheck_no_query_atomic,
	.query_collective = dgcheck_no_query_collective,
	.endpoint2 = endpoint2,
};

static int domain_close(struct fid *fid)
{
	struct dgcheck_domain *dom = (struct dgcheck_domain *) fid;

	DGCHECK_LOCK();
	if (dom->refs) {
		/* a registration, endpoint, CQ or AV the application forgot:
		 * on hardware, pinned memory or queues leaked until exit */
		dgcheck_violation("domain %s closed with %d object(s) still "
				  "open (registrations, endpoints, CQs, AVs)",
				  dom->ifc.name, dom->refs);
		DGCHECK_UNLOCK();
		return -FI_EBUSY;
	}
	dom->fab->refs--;
	DGCHECK_UNLOCK();
	free(dom);
	return 0;
}

static struct fi_ops domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = domain_close,
	.bind = dgcheck_no_bind,
	.control = dgcheck_no_control,
	.ops_open = dgcheck_no_ops_open,
	.tostr = dgcheck_no_tostr,
	.ops_set = dgcheck_no_ops_set,
};

static int domain_open(struct fid_fabric *fabric, struct fi_info *info,
		       struct fid_domain **domp, void *context)
{
	struct dgcheck_domain *dom;

	if (!info || !info->domain_attr || !info->domain_attr->name)
		return -FI_EINVAL;
	dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	if (dgcheck_if_find(info->domain_attr->name, &dom->ifc)) {
		free(dom);
		return -FI_ENODEV;
	}
	dom->dom.fid.fclass = FI_CLASS_DOMAIN;
	dom->dom.fid.context = context;
	dom->dom.fid.ops = &domain_fi_ops;
	dom->dom.ops = &domain_ops;
	dom->dom.mr = &mr_ops;
	dom->fab = (struct dgcheck_fabric *) fabric;
	dom->max_msg = dgcheck_max_msg(dom->ifc.mtu);
	dom->prefix = dgcheck_env.prefix;
	dom->inject = dgcheck_env.inject;
	dom->enforce = dgcheck_env.enforce_mr;
	DGCHECK_LOCK();
	dom->fab->refs++;
	DGCHECK_UNLOCK();
	*domp = &dom->dom;
	return 0;
}

static int domain2_open(struct fid_fabric *fabric, struct fi_info *info,
			struct fid_domain **dom, uint64_t flags, void *context)
{
	return flags ? -FI_EINVAL : domain_open(fabric, info, dom, context);
}

/* ---- fabric ---- */

static struct fi_ops_fabric fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = domain_open,
	.passive_ep = dgcheck_no_passive_ep,
	.eq_open = dgcheck_eq_open,
	.wait_open = dgcheck_no_wait_open,
	.trywait = dgcheck_no_trywait,
	.domain2 = domain2_open,
};

/* Each fabric close appends a report line: the counters are per process,
 * so the last line of a pid is its total. */
static int fabric_close(struct fid *fid)
{
	struct dgcheck_fabric *fab = (struct dgcheck_fabric *) fid;

	DGCHECK_LOCK();
	if (fab->refs) {
		DGCHECK_UNLOCK();
		return -FI_EBUSY;
	}
	dgcheck_fabric_count(-1);
	dgcheck_report();
	DGCHECK_UNLOCK();
	free(fab->name);
	free(fab);
	return 0;
}

static struct fi_ops fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = fabric_close,
	.bind = dgcheck_no_bind,
	.control = dgcheck_no_control,
	.ops_open = fabric_ops_open,
	.tostr = dgcheck_no_tostr,
	.ops_set = dgcheck_no_ops_set,
};

int dgcheck_fabric_open(struct fi_fabric_attr *attr,
			struct fid_fabric **fabric, void *context)
{
	struct dgcheck_fabric *fab;

	if (!attr || !attr->name)
		return -FI_EINVAL;
	fab = calloc(1, sizeof(*fab));
	if (!fab || !(fab->name = strdup(attr->name))) {
		free(fab);
		return -FI_ENOMEM;
	}
	fab->fab.fid.fclass = FI_CLASS_FABRIC;
	fab->fab.fid.context = context;
	fab->fab.fid.ops = &fabric_fi_ops;
	fab->fab.ops = &fabric_ops;
	fab->api_version = attr->api_version;
	fab->fab.api_version = attr->api_version;
	DGCHECK_LOCK();
	dgcheck_fabric_count(1);
	DGCHECK_UNLOCK();
	*fabric = &fab->fab;
	return 0;
}
