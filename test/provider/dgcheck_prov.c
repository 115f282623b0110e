/*
 * Provider entry point, settings, counters, violation reporting, the
 * pointer registry and interface look-up.
 */
#include "dgcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#define DGCHECK_MAX_MESSAGES 20
#define DGCHECK_SET_BUCKETS 4096

struct dgcheck_env dgcheck_env;
struct dgcheck_counters dgcheck_cnt;
pthread_mutex_t dgcheck_lock = PTHREAD_MUTEX_INITIALIZER;

/* Fabrics ever opened and still open, and whether the counters changed
 * since the last report line: cleanup adds a line only if it says
 * something new, so a process that merely queried the provider reports
 * nothing. */
static int fabrics_opened;
static int fabrics_open;
static struct dgcheck_counters last_reported;
static int reported_once;

static size_t env_size(const char *name, size_t dflt, size_t max)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > max) {
		fprintf(stderr, "dgcheck: ignoring %s=%s (max %zu)\n", name, s,
			max);
		return dflt;
	}
	return (size_t) v;
}

static void dgcheck_read_env(void)
{
	dgcheck_env.prefix = env_size("DGCHECK_PREFIX", 64, 4096);
	dgcheck_env.inject = env_size("DGCHECK_INJECT", 0, DGCHECK_MAX_UDP);
	dgcheck_env.tx_size = env_size("DGCHECK_TX_SIZE", 256, 1 << 16);
	dgcheck_env.rx_size = env_size("DGCHECK_RX_SIZE", 512, 1 << 16);
	dgcheck_env.enforce_mr = env_size("DGCHECK_ENFORCE_MR", 1, 1) != 0;
	dgcheck_env.report = getenv("DGCHECK_REPORT");
	if (!dgcheck_env.tx_size)
		dgcheck_env.tx_size = 1;
	if (!dgcheck_env.rx_size)
		dgcheck_env.rx_size = 1;
}

/* Called with dgcheck_lock held. */
void dgcheck_violation(const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	dgcheck_cnt.violations++;
	if (dgcheck_cnt.violations > DGCHECK_MAX_MESSAGES)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "dgcheck: violation: %s (pid %d)%s\n", msg,
		(int) getpid(),
		dgcheck_cnt.violations == DGCHECK_MAX_MESSAGES ?
		" [further violations counted, not printed]" : "");
	/* a process that dies of its violation (the job aborts) never
	 * closes its fabric: leave the evidence in the report now */
	dgcheck_report();
}

/* One write() of one line with O_APPEND, so that lines from concurrent
 * processes never interleave. Called with dgcheck_lock held. */
void dgcheck_report(void)
{
	char line[384];
	int fd, n;

	last_reported = dgcheck_cnt;
	reported_once = 1;
	if (!dgcheck_env.report || !*dgcheck_env.report)
		return;
	n = snprintf(line, sizeof(line),
		     "dgcheck pid=%d violations=%llu posts=%llu sends=%llu "
		     "recvs=%llu regs=%llu overruns=%llu prefix=%zu "
		     "enforce=%d\n", (int) getpid(),
		     (unsigned long long) dgcheck_cnt.violations,
		     (unsigned long long) dgcheck_cnt.posts,
		     (unsigned long long) dgcheck_cnt.sends,
		     (unsigned long long) dgcheck_cnt.recvs,
		     (unsigned long long) dgcheck_cnt.regs_total,
		     (unsigned long long) dgcheck_cnt.overruns,
		     dgcheck_env.prefix, dgcheck_env.enforce_mr);
	fd = open(dgcheck_env.report, O_WRONLY | O_CREAT | O_APPEND |
		  O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t) n) != n)
		fprintf(stderr, "dgcheck: short write to %s\n",
			dgcheck_env.report);
	close(fd);
}

void dgcheck_fabric_count(int delta)
{
	fabrics_open += delta;
	if (delta > 0)
		fabrics_opened++;
}

static void dgcheck_cleanup(void)
{
	DGCHECK_LOCK();
	if (fabrics_opened && (fabrics_open || !reported_once ||
	    memcmp(&last_reported, &dgcheck_cnt, sizeof(dgcheck_cnt))))
		dgcheck_report();
	DGCHECK_UNLOCK();
}

/* ---- pointer set ---- */

struct set_node {
	const void *p;
	struct set_node *next;
};

struct dgcheck_set {
	struct set_node *bucket[DGCHECK_SET_BUCKETS];
};

/* Separate sets, so that a pointer of one kind never passes for another. */
struct dgcheck_set dgcheck_live_mrs;
struct dgcheck_set dgcheck_live_ctxs;

static size_t set_hash(const void *p)
{
	uintptr_t v = (uintptr_t) p;

	v ^= v >> 17;
	v *= 0x9E3779B97F4A7C15ull;
	return (size_t) (v >> 40) % DGCHECK_SET_BUCKETS;
}

int dgcheck_set_add(struct dgcheck_set *s, const void *p)
{
	struct set_node *n = malloc(sizeof(*n));
	size_t h = set_hash(p);

	if (!n)
		return -FI_ENOMEM;
	n->p = p;
	n->next = s->bucket[h];
	s->bucket[h] = n;
	return 0;
}

void dgcheck_set_del(struct dgcheck_set *s, const void *p)
{
	struct set_node **pp, *n;

	for (pp = &s->bucket[set_hash(p)]; (n = *pp); pp = &n->next) {
		if (n->p == p) {
			*pp = n->next;
			free(n);
			return;
		}
	}
}

int dgcheck_set_has(struct dgcheck_set *s, const void *p)
{
	struct set_node *n;

	for (n = s->bucket[set_hash(p)]; n; n = n->next)
		if (n->p == p)
			return 1;
	return 0;
}

/* ---- interfaces ---- */

size_t dgcheck_max_msg(unsigned mtu)
{
	size_t m = mtu > 28 ? mtu - 28 : 0;	/* IPv4 + UDP headers */

	return m > DGCHECK_MAX_UDP ? DGCHECK_MAX_UDP : m;
}

static unsigned if_mtu(const char *name)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unsigned mtu = 1500;

	if (fd < 0)
		return mtu;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
		mtu = (unsigned) ifr.ifr_mtu;
	close(fd);
	return mtu;
}

/* The first IPv4 address of interface |name| that is up. */
int dgcheck_if_find(const char *name, struct dgcheck_if *out)
{
	struct ifaddrs *list, *ifa;
	int ret = -FI_ENODEV;

	if (!name || getifaddrs(&list))
		return -FI_ENODEV;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET ||
		    !ifa->ifa_netmask || !(ifa->ifa_flags & IFF_UP) ||
		    strcmp(ifa->ifa_name, name))
			continue;
		memset(out, 0, sizeof(*out));
		snprintf(out->name, sizeof(out->name), "%s", ifa->ifa_name);
		out->addr = ((struct sockaddr_in *) ifa->ifa_addr)->sin_addr;
		out->mask = ((struct sockaddr_in *) ifa->ifa_netmask)->sin_addr;
		out->mtu = if_mtu(ifa->ifa_name);
		ret = 0;
		break;
	}
	freeifaddrs(list);
	return ret;
}

struct fi_provider dgcheck_prov = {
	.version = DGCHECK_PROV_VERSION,
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.name = DGCHECK_NAME,
	.getinfo = dgcheck_getinfo,
	.fabric = dgcheck_fabric_open,
	.cleanup = dgcheck_cleanup,
};

FI_EXT_INI
{
	dgcheck_read_env();
	return &dgcheck_prov;
}
