/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Connectivity client: every process asks its host's agent (see
 * btl_usnic_connectivity.h) to check the pairs (local module, peer
 * interface) it is about to use, waits for the verdicts in add_procs, and
 * applies btl_usnic_connectivity_policy to a failed pair.  It finds the
 * agent's socket through the modex (local rank 0 publishes its path) and
 * talks to it only if the kernel says it runs as our user.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "btl_usnic_compat.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"

#define CCLIENT_MAX_AGENTS 1024
#define CCLIENT_MAX_POLL 64
/* on top of the probe rounds: connecting, and an agent busy elsewhere */
#define CCLIENT_GRACE_USEC 2000000u

typedef struct {
    const opal_btl_usnic_module_t *module;
    uint32_t peer_ipv4;
    uint16_t peer_port;   /* the peer host's agent on that interface */
    uint32_t peer_vpid;   /* the rank that published it */
    uint32_t large;
    char peer_host[64];
    char peer_if[16];
    uint32_t req_id;
    bool sent;
    int verdict;
    opal_btl_usnic_crep_t rep;
} pair_t;

typedef enum { PATH_UNKNOWN, PATH_FOUND, PATH_NONE } path_state_t;

static struct {
    int fd;
    path_state_t path_state;                  /* the agent's socket path, from the modex */
    char path[sizeof(((struct sockaddr_un *) 0)->sun_path)];
    pair_t *pairs;
    int npairs, cpairs;
    struct {
        uint32_t ipv4;
        uint16_t port;
        uint32_t vpid;
    } agents[CCLIENT_MAX_AGENTS];
    int nagents;
    uint32_t next_req;
    uint64_t ok, failed, refused, unchecked, wait_usec;
} cl = {.fd = -1};

bool opal_btl_usnic_cclient_enabled(void)
{
    return opal_btl_usnic_globals.connectivity_check;
}

void opal_btl_usnic_cclient_note_agents(const opal_btl_usnic_modex_t *remote, size_t n, uint32_t vpid)
{
    for (size_t j = 0; j < n; ++j) {
        if (0 == remote[j].probe_port) {
            continue;
        }
        int k;
        for (k = 0; k < cl.nagents; ++k) {
            if (cl.agents[k].ipv4 == remote[j].ipv4) {
                break;
            }
        }
        if (k == cl.nagents && cl.nagents < CCLIENT_MAX_AGENTS) {
            ++cl.nagents;
        }
        if (k < CCLIENT_MAX_AGENTS) {
            cl.agents[k].ipv4 = remote[j].ipv4;
            cl.agents[k].port = remote[j].probe_port;
            cl.agents[k].vpid = vpid;
        }
    }
}

/* The agent published for the peer interface of |pr|, if any */
static void find_agent(pair_t *pr)
{
    for (int k = 0; k < cl.nagents; ++k) {
        if (cl.agents[k].ipv4 == pr->peer_ipv4) {
            pr->peer_port = cl.agents[k].port;
            pr->peer_vpid = cl.agents[k].vpid;
            return;
        }
    }
}

static pair_t *find_pair(const opal_btl_usnic_module_t *module, uint32_t peer_ipv4)
{
    for (int i = 0; i < cl.npairs; ++i) {
        if (cl.pairs[i].module == module && cl.pairs[i].peer_ipv4 == peer_ipv4) {
            return &cl.pairs[i];
        }
    }
    return NULL;
}

void opal_btl_usnic_cclient_add(opal_btl_usnic_module_t *module, opal_proc_t *proc,
                                const opal_btl_usnic_modex_t *remote)
{
    if (remote->ipv4 == module->ipv4 || NULL != find_pair(module, remote->ipv4)) {
        return; /* on this host (no wire to check), or queued already */
    }
    if (cl.npairs == cl.cpairs) {
        int n = cl.cpairs ? 2 * cl.cpairs : 16;
        pair_t *p = (pair_t *) realloc(cl.pairs, (size_t) n * sizeof(*p));
        if (NULL == p) {
            return; /* unchecked */
        }
        cl.pairs = p;
        cl.cpairs = n;
    }
    pair_t *pr = &cl.pairs[cl.npairs++];
    memset(pr, 0, sizeof(*pr));
    pr->module = module;
    pr->peer_ipv4 = remote->ipv4;
    pr->peer_port = remote->probe_port; /* non-zero if that peer is its host's agent */
    pr->peer_vpid = proc->proc_name.vpid;
    pr->large = opal_btl_usnic_cprobe_large_size(module->local_modex.mtu, remote->mtu,
                                                 opal_btl_usnic_connectivity_probe_cap());
    snprintf(pr->peer_host, sizeof(pr->peer_host), "%s", opal_get_proc_hostname(proc));
    snprintf(pr->peer_if, sizeof(pr->peer_if), "%.15s", '\0' != remote->if_name[0] ? remote->if_name : "?");
    pr->verdict = OPAL_BTL_USNIC_CV_PENDING;
}

bool opal_btl_usnic_cclient_checked(const opal_btl_usnic_module_t *module, const opal_btl_usnic_modex_t *remote)
{
    return remote->ipv4 == module->ipv4 || NULL != find_pair(module, remote->ipv4);
}

bool opal_btl_usnic_cclient_usable(const opal_btl_usnic_module_t *module, const opal_btl_usnic_modex_t *remote)
{
    const pair_t *pr = find_pair(module, remote->ipv4);
    return NULL == pr || opal_btl_usnic_cverdict_usable(pr->verdict);
}

static void disconnect(void)
{
    if (cl.fd >= 0) {
        close(cl.fd);
        cl.fd = -1;
    }
}

/* The rank of this job that is local rank 0 on this host (the agent) */
static bool local_leader(uint32_t *vpid_p)
{
    char *peers = NULL;
    if (OPAL_SUCCESS != opal_btl_usnic_cmodex_get(OPAL_VPID_WILDCARD, OPAL_BTL_USNIC_PMIX_LOCAL_PEERS, &peers, OPAL_BTL_USNIC_PMIX_STRING) ||
        NULL == peers) {
        return false;
    }
    bool found = false;
    char *save = NULL;
    for (char *tok = strtok_r(peers, ",", &save); NULL != tok && !found; tok = strtok_r(NULL, ",", &save)) {
        uint32_t vpid = (uint32_t) strtoul(tok, NULL, 10);
        uint16_t lrank = UINT16_MAX, *p = &lrank;
        if (OPAL_SUCCESS == opal_btl_usnic_cmodex_get(vpid, OPAL_BTL_USNIC_PMIX_LOCAL_RANK, &p, OPAL_BTL_USNIC_PMIX_UINT16) && 0 == lrank) {
            *vpid_p = vpid;
            found = true;
        }
    }
    free(peers);
    return found;
}

/* Where this host's agent listens: our own agent's path, or the one
 * local rank 0 published (a private directory it chose) */
static bool agent_path(void)
{
    if (PATH_UNKNOWN == cl.path_state) {
        const char *mine = opal_btl_usnic_cagent_path();
        char *theirs = NULL;
        uint32_t leader;
        if (NULL == mine && 0 != opal_process_info.my_local_rank && local_leader(&leader)) {
            (void) opal_btl_usnic_cmodex_get(leader, OPAL_BTL_USNIC_CAGENT_PATH_KEY, &theirs, OPAL_BTL_USNIC_PMIX_STRING);
        }
        const char *path = (NULL != mine) ? mine : theirs;
        cl.path_state = (NULL != path && strlen(path) < sizeof(cl.path)) ? PATH_FOUND : PATH_NONE;
        if (PATH_FOUND == cl.path_state) {
            snprintf(cl.path, sizeof(cl.path), "%s", path);
        } else {
            opal_btl_usnic_verbose(5, "connectivity: no agent runs on this host: pairs stay unchecked");
        }
        free(theirs);
    }
    return PATH_FOUND == cl.path_state;
}

/* Is the process at the other end of |fd| of our user?  (Anyone could
 * have put a socket at a path we were told, if it were not private.) */
static bool agent_is_ours(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    return 0 == getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) && len == sizeof(cr) && cr.uid == geteuid();
}

static bool try_connect(void)
{
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, cl.path, strlen(cl.path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    if (0 != connect(fd, (struct sockaddr *) &sun, sizeof(sun))) {
        close(fd); /* the agent is not listening yet (or not at all) */
        return false;
    }
    if (!agent_is_ours(fd)) {
        opal_btl_usnic_verbose(1, "connectivity client: %s is not served by a process of our user: pairs stay "
                                  "unchecked", cl.path);
        close(fd);
        cl.path_state = PATH_NONE;
        return false;
    }
    cl.fd = fd;
    return true;
}

static void read_replies(void)
{
    for (;;) {
        opal_btl_usnic_crep_t rep;
        ssize_t n = recv(cl.fd, &rep, sizeof(rep), MSG_DONTWAIT);
        if (n < 0 && (EAGAIN == errno || EWOULDBLOCK == errno || EINTR == errno)) {
            return;
        }
        if (n <= 0) {
            opal_btl_usnic_verbose(1, "connectivity client: the agent closed the connection");
            disconnect();
            return;
        }
        if ((size_t) n != sizeof(rep)) {
            continue;
        }
        for (int i = 0; i < cl.npairs; ++i) {
            pair_t *pr = &cl.pairs[i];
            if (pr->sent && OPAL_BTL_USNIC_CV_PENDING == pr->verdict && pr->req_id == rep.req_id) {
                pr->rep = rep;
                pr->verdict = rep.verdict;
                if (0 != rep.large_size) {
                    pr->large = rep.large_size; /* the agent's, from the same modex MTUs */
                }
            }
        }
    }
}

static void send_requests(const opal_btl_usnic_module_t *module)
{
    for (int i = 0; i < cl.npairs && cl.fd >= 0; ++i) {
        pair_t *pr = &cl.pairs[i];
        if (pr->module != module || pr->sent || OPAL_BTL_USNIC_CV_PENDING != pr->verdict) {
            continue;
        }
        opal_btl_usnic_creq_t req = {.magic = OPAL_BTL_USNIC_CREQ_MAGIC,
                                     .req_id = ++cl.next_req,
                                     .local_ipv4 = module->ipv4,
                                     .peer_ipv4 = pr->peer_ipv4,
                                     .peer_port = pr->peer_port,
                                     .peer_vpid = pr->peer_vpid};
        if (send(cl.fd, &req, sizeof(req), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) sizeof(req)) {
            if (EAGAIN != errno && EWOULDBLOCK != errno) {
                disconnect();
            }
            return; /* again in the next pass */
        }
        pr->req_id = req.req_id;
        pr->sent = true;
    }
}

static int pending(const opal_btl_usnic_module_t *module)
{
    int n = 0;
    for (int i = 0; i < cl.npairs; ++i) {
        n += (cl.pairs[i].module == module && OPAL_BTL_USNIC_CV_PENDING == cl.pairs[i].verdict);
    }
    return n;
}

/* Wait up to |usec| for our socket or (if it runs here) the agent's */
static void wait_a_little(uint64_t usec)
{
    struct pollfd pfd[CCLIENT_MAX_POLL];
    int fds[CCLIENT_MAX_POLL];
    int n = 0;
    if (cl.fd >= 0) {
        fds[n++] = cl.fd;
    }
    n += opal_btl_usnic_cagent_fds(fds + n, CCLIENT_MAX_POLL - n);
    for (int i = 0; i < n; ++i) {
        pfd[i].fd = fds[i];
        pfd[i].events = POLLIN;
        pfd[i].revents = 0;
    }
    if (opal_btl_usnic_cagent_running()) {
        usec = opal_btl_usnic_cagent_due_in(usec);
    }
    (void) poll(pfd, (nfds_t) n, (int) ((usec + 999) / 1000));
}

static const char *failed_what(const pair_t *pr, char *buf, size_t len)
{
    switch (pr->verdict) {
    case OPAL_BTL_USNIC_CV_LARGE_FAILED:
        snprintf(buf, len, "%u bytes (the large probes were lost; %u-byte probes got through: MTU mismatch?)",
                 pr->large, OPAL_BTL_USNIC_CPROBE_SMALL);
        break;
    case OPAL_BTL_USNIC_CV_SMALL_FAILED:
        snprintf(buf, len, "%u bytes (the small probes were lost; %u-byte probes got through)",
                 OPAL_BTL_USNIC_CPROBE_SMALL, pr->large);
        break;
    default:
        snprintf(buf, len, "%u and %u bytes (no probe of any size got through)", OPAL_BTL_USNIC_CPROBE_SMALL,
                 pr->large);
        break;
    }
    return buf;
}

static bool report(const pair_t *pr)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    const opal_btl_usnic_module_t *m = pr->module;
    char lip[INET_ADDRSTRLEN], pip[INET_ADDRSTRLEN], what[160];
    struct in_addr a = {.s_addr = m->ipv4}, b = {.s_addr = pr->peer_ipv4};
    inet_ntop(AF_INET, &a, lip, sizeof(lip));
    inet_ntop(AF_INET, &b, pip, sizeof(pip));
    opal_btl_usnic_show_help(false, "connectivity check failed", opal_process_info.nodename, m->if_name, lip,
                             pr->peer_host, pr->peer_if, pip, failed_what(pr, what, sizeof(what)),
                             pr->rep.probes_sent, (unsigned) (pr->rep.elapsed_usec / 1000u), c->connectivity_timeout,
                             c->connectivity_retries,
                             c->connectivity_abort ? "abort (the job is aborted)"
                                                   : "unreachable (this interface pair is not used)");
    return true;
}

int opal_btl_usnic_cclient_run(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    uint64_t start = opal_btl_usnic_clock_usec();
    uint64_t bound = (uint64_t) c->connectivity_timeout * 1000u * (uint64_t) (c->connectivity_retries + 1);
    uint64_t deadline = start + bound + CCLIENT_GRACE_USEC;
    int first = cl.npairs;
    for (int i = 0; i < cl.npairs; ++i) {
        pair_t *pr = &cl.pairs[i];
        if (pr->module == module && OPAL_BTL_USNIC_CV_PENDING == pr->verdict && !pr->sent) {
            first = (i < first) ? i : first;
            if (0 == pr->peer_port) {
                find_agent(pr);
            }
            if (0 == pr->peer_port) {
                opal_btl_usnic_verbose(5, "connectivity: no agent published for the peer interface of %s",
                                       pr->peer_host);
                pr->verdict = OPAL_BTL_USNIC_CV_UNCHECKED;
            } else if (!agent_path()) {
                pr->verdict = OPAL_BTL_USNIC_CV_UNCHECKED;
            }
        }
    }
    if (first == cl.npairs) {
        return OPAL_SUCCESS; /* nothing new for this module */
    }
    for (;;) { /* at once out if nothing waits (no agent here, none published for the peers) */
        opal_btl_usnic_cagent_service();
        if (cl.fd < 0 && PATH_FOUND == cl.path_state) {
            (void) try_connect();
        }
        if (cl.fd >= 0) {
            send_requests(module);
            read_replies();
        }
        if (0 == pending(module) || opal_btl_usnic_clock_usec() >= deadline) {
            break;
        }
        wait_a_little(cl.fd >= 0 ? 10000u : 5000u);
    }
    uint64_t waited = opal_btl_usnic_clock_usec() - start;
    cl.wait_usec += waited;
    bool reported = false;
    for (int i = first; i < cl.npairs; ++i) {
        pair_t *pr = &cl.pairs[i];
        if (pr->module != module) {
            continue;
        }
        if (OPAL_BTL_USNIC_CV_PENDING == pr->verdict) {
            opal_btl_usnic_verbose(1, "connectivity: no verdict from the agent for %s -> %s: not checked",
                                   module->if_name, pr->peer_host);
            pr->verdict = OPAL_BTL_USNIC_CV_UNCHECKED;
        }
        if (OPAL_BTL_USNIC_CV_OK == pr->verdict) {
            ++cl.ok;
        } else if (OPAL_BTL_USNIC_CV_UNCHECKED == pr->verdict) {
            ++cl.unchecked;
        } else if (OPAL_BTL_USNIC_CV_REFUSED == pr->verdict) {
            /* cannot happen to us: we ask only for published agents */
            ++cl.refused;
            opal_btl_usnic_verbose(1, "connectivity: the agent refused to probe %s's agent (not published in the "
                                      "modex): %s does not talk to it", pr->peer_host, module->if_name);
        } else {
            ++cl.failed;
            if (pr->rep.report) {
                reported |= report(pr);
            }
        }
    }
    opal_btl_usnic_verbose(5, "connectivity: %s checked in %llu us", module->if_name, (unsigned long long) waited);
    if (reported && c->connectivity_abort) {
        /* The one that printed the message ends the job: the others wait
         * in MPI_Init and are killed with it. */
        opal_btl_usnic_abort_job(1, "usnic BTL connectivity check failed");
        return OPAL_ERR_UNREACH;
    }
    return OPAL_SUCCESS;
}

void opal_btl_usnic_cclient_fini(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (cl.npairs > 0 && (c->stats > 0 || c->verbose >= 5)) {
        opal_output(0, "btl:usnic connectivity [%s rank %u]: pairs=%d ok=%llu failed=%llu refused=%llu "
                    "unchecked=%llu wait_usec=%llu",
                    opal_process_info.nodename, (unsigned) OPAL_PROC_MY_NAME.vpid, cl.npairs,
                    (unsigned long long) cl.ok, (unsigned long long) cl.failed, (unsigned long long) cl.refused,
                    (unsigned long long) cl.unchecked, (unsigned long long) cl.wait_usec);
    }
    disconnect();
    free(cl.pairs);
    cl.pairs = NULL;
    cl.npairs = cl.cpairs = 0;
    cl.nagents = 0;
    cl.path_state = PATH_UNKNOWN;
}
