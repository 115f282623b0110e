/*
 * Address vector of struct sockaddr_in.  FI_AV_TABLE hands out indices;
 * FI_AV_MAP hands out opaque values that are not indices, so a caller that
 * treats a map address as an index (or invents one) is caught on send.
 */
#include "dgcheck.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAP_TAG 0xD6Cull
#define MAP_SHIFT 12

static fi_addr_t encode(const struct dgcheck_av *av, size_t idx)
{
	if (av->type == FI_AV_TABLE)
		return (fi_addr_t) idx;
	return (((fi_addr_t) idx + 1) << MAP_SHIFT) | MAP_TAG;
}

static int decode(const struct dgcheck_av *av, fi_addr_t a, size_t *idx)
{
	if (a == FI_ADDR_NOTAVAIL)
		return -FI_EINVAL;
	if (av->type == FI_AV_TABLE)
		*idx = (size_t) a;
	else if ((a & ((1ull << MAP_SHIFT) - 1)) != MAP_TAG || !(a >> MAP_SHIFT))
		return -FI_EINVAL;
	else
		*idx = (size_t) (a >> MAP_SHIFT) - 1;
	return *idx < av->count && av->valid[*idx] ? 0 : -FI_EINVAL;
}

/* Called with dgcheck_lock held. */
int dgcheck_av_get(struct dgcheck_av *av, fi_addr_t fi_addr,
		   struct sockaddr_in *sin)
{
	size_t idx;

	if (!av || decode(av, fi_addr, &idx))
		return -FI_EINVAL;
	*sin = av->addr[idx];
	return 0;
}

/* FI_SOURCE: the entry holding the datagram's source address.  Called with
 * dgcheck_lock held. */
fi_addr_t dgcheck_av_reverse(struct dgcheck_av *av,
			     const struct sockaddr_in *sin)
{
	size_t i;

	for (i = 0; av && i < av->count; i++)
		if (av->valid[i] &&
		    av->addr[i].sin_addr.s_addr == sin->sin_addr.s_addr &&
		    av->addr[i].sin_port == sin->sin_port)
			return encode(av, i);
	return FI_ADDR_NOTAVAIL;
}

static int grow(struct dgcheck_av *av)
{
	size_t cap = av->cap ? av->cap * 2 : 64;
	struct sockaddr_in *a = realloc(av->addr, cap * sizeof(*a));
	unsigned char *v;

	if (!a)
		return -FI_ENOMEM;
	av->addr = a;
	v = realloc(av->valid, cap);
	if (!v)
		return -FI_ENOMEM;
	av->valid = v;
	av->cap = cap;
	return 0;
}

static int insert_one(struct dgcheck_av *av, const struct sockaddr_in *sin,
		      fi_addr_t *out)
{
	if (sin->sin_family != AF_INET)
		return -FI_EINVAL;
	if (av->count == av->cap && grow(av))
		return -FI_ENOMEM;
	av->addr[av->count] = *sin;
	av->valid[av->count] = 1;
	*out = encode(av, av->count);
	av->count++;
	return 0;
}

static int av_insert(struct fid_av *fav, const void *addr, size_t count,
		     fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct dgcheck_av *av = (struct dgcheck_av *) fav;
	const struct sockaddr_in *sin = addr;
	int *errs = (flags & FI_SYNC_ERR) ? context : NULL;
	size_t i;
	int done = 0, ret;
	fi_addr_t a;

	if (!addr && count)
		return -FI_EINVAL;
	DGCHECK_LOCK();
	for (i = 0; i < count; i++) {
		ret = insert_one(av, &sin[i], &a);
		if (ret)
			a = FI_ADDR_NOTAVAIL;
		else
			done++;
		if (fi_addr)
			fi_addr[i] = a;
		if (errs)
			errs[i] = -ret;
	}
	DGCHECK_UNLOCK();
	return done;
}

static int av_insertsvc(struct fid_av *fav, const char *node,
			const char *service, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_DGRAM }, *res;
	int ret;

	if (getaddrinfo(node, service, &hints, &res))
		return -FI_EINVAL;
	ret = av_insert(fav, res->ai_addr, 1, fi_addr, flags, context);
	freeaddrinfo(res);
	return ret;
}

static int av_insertsym(struct fid_av *fav, const char *node, size_t nodecnt,
			const char *service, size_t svccnt,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	(void) fav; (void) node; (void) nodecnt; (void) service;
	(void) svccnt; (void) fi_addr; (void) flags; (void) context;
	return -FI_ENOSYS;
}

static int av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count,
		     uint64_t flags)
{
	struct dgcheck_av *av = (struct dgcheck_av *) fav;
	size_t i, idx;
	int ret = 0;

	(void) flags;
	DGCHECK_LOCK();
	for (i = 0; i < count; i++) {
		if (decode(av, fi_addr[i], &idx))
			ret = -FI_EINVAL;
		else
			av->valid[idx] = 0;
	}
	DGCHECK_UNLOCK();
	return ret;
}

static int av_lookup(struct fid_av *fav, fi_addr_t fi_addr, void *addr,
		     size_t *addrlen)
{
	struct dgcheck_av *av = (struct dgcheck_av *) fav;
	struct sockaddr_in sin;
	int ret;

	DGCHECK_LOCK();
	ret = dgcheck_av_get(av, fi_addr, &sin);
	DGCHECK_UNLOCK();
	if (ret)
		return ret;
	memcpy(addr, &sin, *addrlen < sizeof(sin) ? *addrlen : sizeof(sin));
	*addrlen = sizeof(sin);
	return 0;
}

static const char *av_straddr(struct fid_av *fav, const void *addr,
			      char *buf, size_t *len)
{
	const struct sockaddr_in *sin = addr;
	char a[INET_ADDRSTRLEN] = "?", s[INET_ADDRSTRLEN + 8];
	int n;

	(void) fav;
	inet_ntop(AF_INET, &sin->sin_addr, a, sizeof(a));
	n = snprintf(s, sizeof(s), "%s:%u", a, ntohs(sin->sin_port));
	if (*len)
		snprintf(buf, *len, "%s", s);
	*len = (size_t) n + 1;
	return buf;
}

static int av_set(struct fid_av *av, struct fi_av_set_attr *attr,
		  struct fid_av_set **av_set, void *context)
{
	(void) av; (void) attr; (void) av_set; (void) context;
	return -FI_ENOSYS;
}

static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = av_set,
};

static int av_close(struct fid *fid)
{
	struct dgcheck_av *av = (struct dgcheck_av *) fid;

	DGCHECK_LOCK();
	if (av->refs) {
		DGCHECK_UNLOCK();
		return -FI_EBUSY;
	}
	av->dom->refs--;
	DGCHECK_UNLOCK();
	free(av->addr);
	free(av->valid);
	free(av);
	return 0;
}

static struct fi_ops av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
	.bind = dgcheck_no_bind,
	.control = dgcheck_no_control,
	.ops_open = dgcheck_no_ops_open,
	.tostr = dgcheck_no_tostr,
	.ops_set = dgcheck_no_ops_set,
};

int dgcheck_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		    struct fid_av **avp, void *context)
{
	struct dgcheck_av *av;
	enum fi_av_type type = attr ? attr->type : FI_AV_UNSPEC;

	if (type != FI_AV_UNSPEC && type != FI_AV_MAP && type != FI_AV_TABLE)
		return -FI_EINVAL;
	if (attr && (attr->flags & FI_EVENT))
		return -FI_ENOSYS;	/* no asynchronous inserts */
	av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = context;
	av->av.fid.ops = &av_fi_ops;
	av->av.ops = &av_ops;
	av->dom = (struct dgcheck_domain *) domain;
	av->type = type == FI_AV_TABLE ? FI_AV_TABLE : FI_AV_MAP;
	DGCHECK_LOCK();
	av->dom->refs++;
	DGCHECK_UNLOCK();
	*avp = &av->av;
	return 0;
}
