/*
 * fi_getinfo: one fi_info per IPv4 interface that is up, but only for
 * hints that accept the usnic contract (FI_CONTEXT, FI_MSG_PREFIX and, when
 * enforcing, FI_MR_LOCAL).
 */
#include "dgcheck.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DGCHECK_CAPS (FI_MSG | FI_SEND | FI_RECV | FI_SOURCE)
#define DGCHECK_SECONDARY (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define DGCHECK_MODE (FI_CONTEXT | FI_MSG_PREFIX)

/* libfabric's private flag (OFI_CORE_PROV_ONLY in its ofi.h) on the query a
 * utility provider (ofi_rxd, ofi_rxm) makes for a core provider to layer
 * on.  dgcheck refuses: an RDM "dgcheck;ofi_rxd" would let Open MPI's
 * mtl/ofi pick it up and carry the job instead of the usnic BTL. */
#define DGCHECK_LAYERING_QUERY (1ULL << 59)

/* What the caller asked for, reduced to what filters interfaces. */
struct want {
	uint32_t version;
	const struct fi_info *hints;
	int has_src;
	struct sockaddr_in src;
	int has_dest;
	struct sockaddr_in dest;
};

/* FI_LOCAL_MR and FI_MR_BASIC are gone from libfabric 2. */
#if FI_MAJOR_VERSION < 2
#define DGCHECK_OLD_LOCAL_MR FI_LOCAL_MR
#define DGCHECK_MR_BASIC FI_MR_BASIC
#else
#define DGCHECK_OLD_LOCAL_MR 0
#define DGCHECK_MR_BASIC (-1)
#endif

static int mr_mode_ok(uint32_t version, const struct fi_info *hints)
{
	int mr_mode = hints->domain_attr ? hints->domain_attr->mr_mode : 0;

	if (!dgcheck_env.enforce_mr)
		return 1;
	/* Before API 1.5 the application said so with mode FI_LOCAL_MR; a
	 * 1.5+ application may still use the old FI_MR_BASIC way. */
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)) ||
	    mr_mode == DGCHECK_MR_BASIC)
		return DGCHECK_OLD_LOCAL_MR && (hints->mode & DGCHECK_OLD_LOCAL_MR);
	return (mr_mode & FI_MR_LOCAL) != 0;
}

static int hints_ok(uint32_t version, const struct fi_info *hints)
{
	if (!hints)
		return 1;	/* NULL hints: the caller accepts every mode */
	if (hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC &&
	    hints->ep_attr->type != FI_EP_DGRAM)
		return 0;
	if (hints->addr_format != FI_FORMAT_UNSPEC &&
	    hints->addr_format != FI_SOCKADDR_IN &&
	    hints->addr_format != FI_SOCKADDR)
		return 0;
	if (hints->caps & ~(uint64_t) (DGCHECK_CAPS | DGCHECK_SECONDARY))
		return 0;
	if ((hints->mode & DGCHECK_MODE) != DGCHECK_MODE)
		return 0;
	if (hints->domain_attr &&
	    hints->domain_attr->data_progress == FI_PROGRESS_AUTO)
		return 0;
	return mr_mode_ok(version, hints);
}

static int resolve(const char *node, const char *service,
		   struct sockaddr_in *sin)
{
	struct addrinfo ai = { .ai_family = AF_INET,
			       .ai_socktype = SOCK_DGRAM }, *res;

	if (getaddrinfo(node, service, &ai, &res))
		return -FI_ENODATA;
	*sin = *(struct sockaddr_in *) res->ai_addr;
	freeaddrinfo(res);
	return 0;
}

static int sockaddr_in_of(const void *addr, size_t len,
			  struct sockaddr_in *sin)
{
	if (!addr || len < sizeof(*sin) ||
	    ((const struct sockaddr *) addr)->sa_family != AF_INET)
		return 0;
	memcpy(sin, addr, sizeof(*sin));
	return 1;
}

/* node/service/flags and hints' addresses, as libfabric defines them. */
static int want_init(struct want *w, uint32_t version, const char *node,
		     const char *service, uint64_t flags,
		     const struct fi_info *hints)
{
	struct sockaddr_in sin;

	memset(w, 0, sizeof(*w));
	w->version = version;
	w->hints = hints;
	if (hints) {
		w->has_src = sockaddr_in_of(hints->src_addr,
					    hints->src_addrlen, &w->src);
		w->has_dest = sockaddr_in_of(hints->dest_addr,
					     hints->dest_addrlen, &w->dest);
	}
	if (!node && !service)
		return 0;
	if (resolve(node ? node : "0.0.0.0", service ? service : "0", &sin))
		return -FI_ENODATA;
	if ((flags & FI_SOURCE) || !node) {
		w->has_src = 1;
		w->src = sin;
	} else {
		w->has_dest = 1;
		w->dest = sin;
	}
	return 0;
}

static int same_net(struct in_addr a, struct in_addr b, struct in_addr mask)
{
	return (a.s_addr & mask.s_addr) == (b.s_addr & mask.s_addr);
}

static int prefix_len(struct in_addr mask)
{
	return __builtin_popcount(mask.s_addr);
}

static void fabric_name(const struct dgcheck_if *ifc, char *buf, size_t len)
{
	struct in_addr net = { ifc->addr.s_addr & ifc->mask.s_addr };
	char a[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &net, a, sizeof(a));
	snprintf(buf, len, "%s/%d", a, prefix_len(ifc->mask));
}

static int if_wanted(const struct want *w, const struct dgcheck_if *ifc)
{
	const struct fi_info *h = w->hints;
	char fab[64];

	if (w->has_src && w->src.sin_addr.s_addr != htonl(INADDR_ANY) &&
	    w->src.sin_addr.s_addr != ifc->addr.s_addr)
		return 0;
	if (h && h->domain_attr && h->domain_attr->name &&
	    strcmp(h->domain_attr->name, ifc->name))
		return 0;
	fabric_name(ifc, fab, sizeof(fab));
	if (h && h->fabric_attr && h->fabric_attr->name &&
	    strcmp(h->fabric_attr->name, fab))
		return 0;
	if (h && h->ep_attr &&
	    h->ep_attr->max_msg_size > dgcheck_max_msg(ifc->mtu))
		return 0;
	return 1;
}

static void info_free(struct fi_info *fi)
{
	if (!fi)
		return;
	free(fi->src_addr);
	free(fi->dest_addr);
	free(fi->tx_attr);
	free(fi->rx_attr);
	free(fi->ep_attr);
	if (fi->domain_attr)
		free(fi->domain_attr->name);
	free(fi->domain_attr);
	if (fi->fabric_attr)
		free(fi->fabric_attr->name);
	free(fi->fabric_attr);
	free(fi);
}

static void *sin_dup(const struct sockaddr_in *sin)
{
	struct sockaddr_in *p = malloc(sizeof(*p));

	if (p)
		*p = *sin;
	return p;
}

static uint64_t info_caps(const struct fi_info *hints)
{
	uint64_t caps = DGCHECK_CAPS;

	if (hints && !(hints->caps & FI_SOURCE))
		caps &= ~(uint64_t) FI_SOURCE;
	if (hints)
		caps |= hints->caps & DGCHECK_SECONDARY;
	return caps;
}

static void fill_mode(struct fi_info *fi, uint32_t version)
{
	fi->mode = DGCHECK_MODE;
	fi->domain_attr->mr_mode = dgcheck_env.enforce_mr ? FI_MR_LOCAL : 0;
#if FI_MAJOR_VERSION < 2
	if (dgcheck_env.enforce_mr && FI_VERSION_LT(version, FI_VERSION(1, 5))) {
		fi->mode |= FI_LOCAL_MR;
		fi->domain_attr->mr_mode = FI_MR_BASIC;
	}
#else
	(void) version;
#endif
	fi->tx_attr->mode = fi->mode;
	fi->rx_attr->mode = fi->mode;
}

static void fill_domain(struct fi_domain_attr *d, const struct fi_info *hints)
{
	const struct fi_domain_attr *h = hints ? hints->domain_attr : NULL;

	d->threading = h && h->threading != FI_THREAD_UNSPEC ?
		       h->threading : FI_THREAD_SAFE;
	d->control_progress = FI_PROGRESS_MANUAL;
	d->data_progress = FI_PROGRESS_MANUAL;
	d->resource_mgmt = FI_RM_DISABLED;
	d->av_type = h && h->av_type != FI_AV_UNSPEC ? h->av_type : FI_AV_MAP;
	d->mr_key_size = sizeof(uint64_t);
	d->cq_cnt = 1024;
	d->ep_cnt = 1024;
	d->tx_ctx_cnt = 1024;
	d->rx_ctx_cnt = 1024;
	d->max_ep_tx_ctx = 1;
	d->max_ep_rx_ctx = 1;
	d->mr_iov_limit = 1;
	d->mr_cnt = 1 << 20;
	d->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
}

static void fill_attrs(struct fi_info *fi, const struct want *w,
		       const struct dgcheck_if *ifc)
{
	fi->caps = info_caps(w->hints);
	fi->addr_format = FI_SOCKADDR_IN;
	fill_mode(fi, w->version);
	fill_domain(fi->domain_attr, w->hints);
	fi->tx_attr->caps = fi->caps & ~(uint64_t) (FI_RECV | FI_SOURCE);
	fi->tx_attr->size = dgcheck_env.tx_size;
	fi->tx_attr->iov_limit = DGCHECK_IOV_LIMIT;
	fi->tx_attr->inject_size = dgcheck_env.inject;
	fi->rx_attr->caps = fi->caps & ~(uint64_t) FI_SEND;
	fi->rx_attr->size = dgcheck_env.rx_size;
	fi->rx_attr->iov_limit = DGCHECK_IOV_LIMIT;
	fi->ep_attr->type = FI_EP_DGRAM;
	fi->ep_attr->protocol = FI_PROTO_UDP;
	fi->ep_attr->max_msg_size = dgcheck_max_msg(ifc->mtu);
	fi->ep_attr->msg_prefix_size = dgcheck_env.prefix;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;
	fi->fabric_attr->prov_version = DGCHECK_PROV_VERSION;
}

static struct fi_info *info_new(const struct want *w,
				const struct dgcheck_if *ifc)
{
	struct fi_info *fi = calloc(1, sizeof(*fi));
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = ifc->addr };
	char fab[64];

	if (!fi)
		return NULL;
	fi->tx_attr = calloc(1, sizeof(*fi->tx_attr));
	fi->rx_attr = calloc(1, sizeof(*fi->rx_attr));
	fi->ep_attr = calloc(1, sizeof(*fi->ep_attr));
	fi->domain_attr = calloc(1, sizeof(*fi->domain_attr));
	fi->fabric_attr = calloc(1, sizeof(*fi->fabric_attr));
	if (w->has_src)
		src.sin_port = w->src.sin_port;
	fi->src_addr = sin_dup(&src);
	fi->src_addrlen = sizeof(src);
	if (w->has_dest) {
		fi->dest_addr = sin_dup(&w->dest);
		fi->dest_addrlen = sizeof(w->dest);
	}
	fabric_name(ifc, fab, sizeof(fab));
	if (fi->domain_attr)
		fi->domain_attr->name = strdup(ifc->name);
	if (fi->fabric_attr)
		fi->fabric_attr->name = strdup(fab);
	if (!fi->tx_attr || !fi->rx_attr || !fi->ep_attr || !fi->src_addr ||
	    !fi->domain_attr || !fi->domain_attr->name || !fi->fabric_attr ||
	    !fi->fabric_attr->name || (w->has_dest && !fi->dest_addr)) {
		info_free(fi);
		return NULL;
	}
	fill_attrs(fi, w, ifc);
	return fi;
}

/* Interfaces on the destination's network come first, so a caller taking
 * the first entry can reach the destination. */
static void add_sorted(struct fi_info **head, struct fi_info *fi, int first)
{
	struct fi_info **pp = head;

	if (!first)
		while (*pp)
			pp = &(*pp)->next;
	fi->next = *pp;
	*pp = fi;
}

static int build_list(const struct want *w, struct fi_info **out)
{
	struct ifaddrs *list, *ifa;
	struct dgcheck_if ifc;
	struct fi_info *head = NULL, *fi;

	if (getifaddrs(&list))
		return -FI_ENODATA;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET ||
		    !(ifa->ifa_flags & IFF_UP) ||
		    dgcheck_if_find(ifa->ifa_name, &ifc) ||
		    ifc.addr.s_addr !=
		    ((struct sockaddr_in *) ifa->ifa_addr)->sin_addr.s_addr ||
		    !if_wanted(w, &ifc))
			continue;
		fi = info_new(w, &ifc);
		if (!fi)
			continue;
		add_sorted(&head, fi, w->has_dest &&
			   same_net(ifc.addr, w->dest.sin_addr, ifc.mask));
	}
	freeifaddrs(list);
	*out = head;
	return head ? 0 : -FI_ENODATA;
}

int dgcheck_getinfo(uint32_t version, const char *node, const char *service,
		    uint64_t flags, const struct fi_info *hints,
		    struct fi_info **info)
{
	struct want w;

	*info = NULL;
	if (FI_VERSION_LT(version, FI_VERSION(1, 4)) ||
	    (flags & DGCHECK_LAYERING_QUERY) || !hints_ok(version, hints))
		return -FI_ENODATA;
	if (want_init(&w, version, node, service, flags, hints))
		return -FI_ENODATA;
	return build_list(&w, info);
}
