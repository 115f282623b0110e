/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Connectivity agent: one per host (local rank 0), see
 * btl_usnic_connectivity.h.  It owns one UDP probe socket per module
 * (bound to the module's address) and a SOCK_SEQPACKET listener for the
 * clients of this host, in a directory only the job's user can enter.  Everything it does happens in
 * opal_btl_usnic_cagent_service(), a non-blocking pass called from libevent
 * events on opal_sync_event_base (socket readable, resend timer) and from
 * the waiting loop of this process's own client.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "opal/mca/event/event.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/util/opal_environ.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"

#define CAGENT_MAX_SOCKS 64
#define CAGENT_MAX_CONNS 256
#define CAGENT_SOCK_NAME "usnic-cagent.sock"

typedef struct {
    int fd;
    uint32_t ipv4;
    uint16_t port;
    opal_event_t ev;
    bool ev_on;
} probe_sock_t;

typedef struct {
    int fd;
    opal_event_t ev;
    bool ev_on;
} conn_t;

typedef struct {
    int conn;
    uint32_t req_id;
} waiter_t;

typedef struct {
    uint32_t id;
    uint32_t local_ipv4, peer_ipv4;
    uint16_t peer_port;
    uint32_t large;
    int sock;
    int rounds;            /* probe rounds sent */
    uint64_t t_first, next_due;
    bool small_ok, large_ok;
    int verdict;           /* OPAL_BTL_USNIC_CV_* */
    bool reported;
    uint32_t probes;
    uint32_t elapsed_usec;
    waiter_t *waiters;
    int nwaiters, cwaiters;
} check_t;

static struct {
    bool running;
    int listen_fd;
    opal_event_t listen_ev;
    bool listen_ev_on;
    char path[sizeof(((struct sockaddr_un *) 0)->sun_path)]; /* the listener's */
    char dir[sizeof(((struct sockaddr_un *) 0)->sun_path)];  /* our mkdtemp directory, "" if none */
    probe_sock_t socks[CAGENT_MAX_SOCKS];
    int nsocks;
    conn_t conns[CAGENT_MAX_CONNS];
    check_t *checks;
    int nchecks, cchecks;
    uint32_t next_id;
    opal_event_t timer;
    bool timer_on;
    uint8_t buf[OPAL_BTL_USNIC_CPROBE_MAX + 64];
    /* counters for the summary line */
    uint64_t probes_sent, echoes_received, probes_answered, invalid;
    uint64_t refused_client_uid, refused_conns_full;
    uint64_t checks_ok, checks_failed;
    uint32_t max_check_usec;
} agent = {.listen_fd = -1};

static void service_cb(int fd, short flags, void *arg)
{
    (void) fd;
    (void) flags;
    (void) arg;
    opal_btl_usnic_cagent_service();
}

static void set_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) {
        (void) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
    (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static void ip_str(uint32_t ipv4, char *out, size_t len)
{
    struct in_addr a = {.s_addr = ipv4};
    inet_ntop(AF_INET, &a, out, (socklen_t) len);
}

/* ----- what the modex says ----- */

int opal_btl_usnic_cmodex_get(uint32_t vpid, const char *key, void *data_p, int type)
{
    opal_process_name_t name = {.jobid = OPAL_PROC_MY_NAME.jobid, .vpid = vpid};
    int rc;
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, key, &name, (void **) data_p, type);
    if (OPAL_SUCCESS != rc && (opal_pmix_base_async_modex || !opal_pmix_collect_all_data)) {
        OPAL_MODEX_RECV_VALUE(rc, key, &name, (void **) data_p, type);
    }
    return rc;
}

/* ----- sockets ----- */

static int open_probe_socket(opal_btl_usnic_module_t *module, probe_sock_t *ps)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        return OPAL_ERROR;
    }
    set_nonblock_cloexec(fd);
    /* never fragment: a probe must cross the path as one datagram */
    int pmtu = IP_PMTUDISC_DO;
    (void) setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = module->ipv4;
    socklen_t sl = sizeof(sin);
    if (0 != bind(fd, (struct sockaddr *) &sin, sizeof(sin)) || 0 != getsockname(fd, (struct sockaddr *) &sin, &sl)) {
        opal_btl_usnic_verbose(1, "connectivity agent: cannot bind a probe socket on %s: %s", module->if_name,
                               strerror(errno));
        close(fd);
        return OPAL_ERROR;
    }
    ps->fd = fd;
    ps->ipv4 = module->ipv4;
    ps->port = ntohs(sin.sin_port);
    opal_event_set(opal_sync_event_base, &ps->ev, fd, OPAL_EV_READ | OPAL_EV_PERSIST, service_cb, NULL);
    opal_event_add(&ps->ev, NULL);
    ps->ev_on = true;
    return OPAL_SUCCESS;
}

/* A directory nobody but us can enter: ours, not a symbolic link, and
 * no permission at all for group or others */
static bool is_private_dir(const char *dir)
{
    struct stat st;
    return 0 == lstat(dir, &st) && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && 0 == (st.st_mode & 077);
}

static bool path_in(const char *dir)
{
    int n = snprintf(agent.path, sizeof(agent.path), "%s/%s", dir, CAGENT_SOCK_NAME);
    return n > 0 && (size_t) n < sizeof(agent.path);
}

/* A fresh directory of ours (mkdtemp: a random name, mode 0700) under
 * the temporary directory, or /tmp when that one fails or its path is
 * too long */
static bool make_private_dir(void)
{
    const char *bases[] = {opal_tmp_directory(), "/tmp"};
    int err = ENAMETOOLONG;
    for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); ++i) {
        int n = snprintf(agent.dir, sizeof(agent.dir), "%s/usnic-cagent-XXXXXX", bases[i]);
        if (n <= 0 || (size_t) n + 1 + strlen(CAGENT_SOCK_NAME) >= sizeof(agent.path)) {
            continue;
        }
        if (NULL != mkdtemp(agent.dir) && path_in(agent.dir)) {
            return true;
        }
        err = errno;
    }
    agent.dir[0] = '\0';
    errno = err;
    return false;
}

/* Where the listener goes: the job session directory if it is private
 * and the path fits, else a private directory of our own */
static bool choose_path(void)
{
    const char *dir = opal_process_info.job_session_dir;
    if (NULL != dir && is_private_dir(dir) && path_in(dir)) {
        return true;
    }
    if (!make_private_dir()) {
        return false;
    }
    /* ORTE removes it if we die before fini does */
    if (NULL != opal_pmix.register_cleanup &&
        OPAL_SUCCESS != opal_pmix.register_cleanup(agent.dir, true, false, false)) {
        opal_btl_usnic_verbose(5, "connectivity agent: %s is not registered for cleanup", agent.dir);
    }
    return true;
}

static void listener_failed(const char *what, int err)
{
    opal_btl_usnic_show_help(true, "connectivity agent failed", opal_process_info.nodename, what,
                             '\0' != agent.path[0] ? agent.path : "(none)", strerror(err));
}

static int open_listener(void)
{
    agent.path[0] = agent.dir[0] = '\0';
    if (!choose_path()) {
        listener_failed("mkdtemp (no private directory for the socket)", errno);
        return OPAL_ERROR;
    }
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd < 0) {
        listener_failed("socket", errno);
        return OPAL_ERROR;
    }
    set_nonblock_cloexec(fd);
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, agent.path, strlen(agent.path) + 1);
    (void) unlink(agent.path); /* our own directory: only a stale socket of ours can be there */
    if (0 != bind(fd, (struct sockaddr *) &sun, sizeof(sun)) || 0 != listen(fd, 128)) {
        int err = errno;
        close(fd);
        listener_failed("bind/listen", err);
        return OPAL_ERROR;
    }
    (void) chmod(agent.path, 0600);
    agent.listen_fd = fd;
    opal_event_set(opal_sync_event_base, &agent.listen_ev, fd, OPAL_EV_READ | OPAL_EV_PERSIST, service_cb, NULL);
    opal_event_add(&agent.listen_ev, NULL);
    agent.listen_ev_on = true;
    return OPAL_SUCCESS;
}

/* Tell the local processes where the listener is (only they can read it) */
static int publish_path(void)
{
    int rc;
    OPAL_MODEX_SEND_VALUE(rc, OPAL_PMIX_LOCAL, OPAL_BTL_USNIC_CAGENT_PATH_KEY, agent.path, OPAL_STRING);
    if (OPAL_SUCCESS != rc) {
        listener_failed("publishing the socket's path in the modex", EIO);
    }
    return rc;
}

int opal_btl_usnic_cagent_init(void)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    if (!c->connectivity_check || 0 != opal_process_info.my_local_rank || agent.running) {
        return OPAL_SUCCESS;
    }
    for (int i = 0; i < CAGENT_MAX_CONNS; ++i) {
        agent.conns[i].fd = -1;
    }
    agent.nsocks = 0;
    for (int i = 0; i < c->num_modules && agent.nsocks < CAGENT_MAX_SOCKS; ++i) {
        if (OPAL_SUCCESS == open_probe_socket(c->modules[i], &agent.socks[agent.nsocks])) {
            c->modules[i]->local_modex.probe_port = agent.socks[agent.nsocks].port;
            ++agent.nsocks;
        }
    }
    if (0 == agent.nsocks || OPAL_SUCCESS != open_listener() || OPAL_SUCCESS != publish_path()) {
        agent.running = true; /* so that fini closes what was opened */
        opal_btl_usnic_cagent_fini();
        for (int i = 0; i < c->num_modules; ++i) {
            c->modules[i]->local_modex.probe_port = 0;
        }
        return OPAL_ERROR;
    }
    opal_event_evtimer_set(opal_sync_event_base, &agent.timer, service_cb, NULL);
    agent.running = true;
    opal_btl_usnic_verbose(5, "connectivity agent on %s: %d probe sockets, listening on %s%s", opal_process_info.nodename,
                           agent.nsocks, agent.path, '\0' != agent.dir[0] ? " (private directory)" : "");
    return OPAL_SUCCESS;
}

bool opal_btl_usnic_cagent_running(void)
{
    return agent.running;
}

const char *opal_btl_usnic_cagent_path(void)
{
    return (agent.running && agent.listen_fd >= 0) ? agent.path : NULL;
}

/* ----- clients ----- */

static void conn_close(int i)
{
    conn_t *cn = &agent.conns[i];
    if (cn->ev_on) {
        opal_event_del(&cn->ev);
        cn->ev_on = false;
    }
    if (cn->fd >= 0) {
        close(cn->fd);
        cn->fd = -1;
    }
    for (int k = 0; k < agent.nchecks; ++k) { /* nobody to tell any more */
        check_t *ck = &agent.checks[k];
        int w = 0;
        for (int j = 0; j < ck->nwaiters; ++j) {
            if (ck->waiters[j].conn != i) {
                ck->waiters[w++] = ck->waiters[j];
            }
        }
        ck->nwaiters = w;
    }
}

/* Is the process at the other end of Unix socket |fd| of our user? */
static bool client_is_ours(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    return 0 == getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) && len == sizeof(cr) && cr.uid == geteuid();
}

static int free_conn_slot(void)
{
    for (int i = 0; i < CAGENT_MAX_CONNS; ++i) {
        if (agent.conns[i].fd < 0) {
            return i;
        }
    }
    return -1;
}

static void accept_all(void)
{
    for (;;) {
        int fd = accept(agent.listen_fd, NULL, NULL);
        if (fd < 0) {
            return;
        }
        int slot = -1;
        if (!client_is_ours(fd)) {
            ++agent.refused_client_uid;
        } else if ((slot = free_conn_slot()) < 0) {
            ++agent.refused_conns_full; /* that client's checks end up unchecked */
        }
        if (slot < 0) {
            close(fd);
            continue;
        }
        set_nonblock_cloexec(fd);
        conn_t *cn = &agent.conns[slot];
        cn->fd = fd;
        opal_event_set(opal_sync_event_base, &cn->ev, fd, OPAL_EV_READ | OPAL_EV_PERSIST, service_cb, NULL);
        opal_event_add(&cn->ev, NULL);
        cn->ev_on = true;
    }
}

static void reply(int conn, uint32_t req_id, check_t *ck)
{
    opal_btl_usnic_crep_t rep = {.req_id = req_id, .verdict = OPAL_BTL_USNIC_CV_UNCHECKED};
    if (NULL != ck) {
        rep.verdict = ck->verdict;
        rep.large_size = ck->large;
        rep.probes_sent = ck->probes;
        rep.elapsed_usec = ck->elapsed_usec;
        if (!opal_btl_usnic_cverdict_usable(ck->verdict) && !ck->reported) {
            rep.report = 1;
            ck->reported = true;
        }
    }
    if (conn >= 0 && agent.conns[conn].fd >= 0 &&
        send(agent.conns[conn].fd, &rep, sizeof(rep), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) sizeof(rep)) {
        if (NULL != ck) {
            ck->reported = false; /* that one did not hear it */
        }
        opal_btl_usnic_verbose(1, "connectivity agent: cannot answer a client: %s", strerror(errno));
    }
}

static void send_round(check_t *ck, uint64_t now)
{
    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = ck->peer_ipv4;
    to.sin_port = htons(ck->peer_port);
    uint32_t sizes[2] = {OPAL_BTL_USNIC_CPROBE_SMALL, ck->large};
    bool done[2] = {ck->small_ok, ck->large_ok};
    for (int s = 0; s < 2; ++s) {
        if (done[s] || (1 == s && ck->large == OPAL_BTL_USNIC_CPROBE_SMALL)) {
            continue;
        }
        opal_btl_usnic_cprobe_t p = {.type = OPAL_BTL_USNIC_CPROBE_PROBE,
                                     .cookie = mca_btl_usnic_component.cookie,
                                     .check_id = ck->id,
                                     .size = sizes[s],
                                     .attempt = (uint32_t) ck->rounds};
        size_t len = opal_btl_usnic_cprobe_pack(agent.buf, sizeof(agent.buf), &p);
        if (len > 0) {
            /* a failed send (EMSGSIZE: smaller route MTU) is a lost probe */
            (void) sendto(agent.socks[ck->sock].fd, agent.buf, len, MSG_DONTWAIT, (struct sockaddr *) &to,
                          sizeof(to));
            ++ck->probes;
            ++agent.probes_sent;
        }
    }
    ++ck->rounds;
    ck->next_due = now + (uint64_t) mca_btl_usnic_component.connectivity_timeout * 1000u;
}

static void check_finish(check_t *ck, int verdict, uint64_t now)
{
    ck->verdict = verdict;
    ck->elapsed_usec = (uint32_t) (now - ck->t_first);
    if (ck->elapsed_usec > agent.max_check_usec) {
        agent.max_check_usec = ck->elapsed_usec;
    }
    if (OPAL_BTL_USNIC_CV_OK == verdict) {
        ++agent.checks_ok;
    } else {
        ++agent.checks_failed;
    }
    char lip[INET_ADDRSTRLEN], pip[INET_ADDRSTRLEN];
    ip_str(ck->local_ipv4, lip, sizeof(lip));
    ip_str(ck->peer_ipv4, pip, sizeof(pip));
    opal_btl_usnic_verbose(5, "connectivity agent: %s -> %s:%u (%u bytes): verdict %d after %u us, %u probes", lip,
                           pip, (unsigned) ck->peer_port, ck->large, verdict, ck->elapsed_usec, ck->probes);
    for (int j = 0; j < ck->nwaiters; ++j) {
        reply(ck->waiters[j].conn, ck->waiters[j].req_id, ck);
    }
    ck->nwaiters = 0;
}

static void handle_request(int conn, const opal_btl_usnic_creq_t *req, uint64_t now)
{
    int sock = -1;
    for (int i = 0; i < agent.nsocks; ++i) {
        if (agent.socks[i].ipv4 == req->local_ipv4) {
            sock = i;
        }
    }
    if (sock < 0 || 0 == req->peer_port) {
        reply(conn, req->req_id, NULL);
        return;
    }
    uint32_t large = req->large_size;
    if (large < OPAL_BTL_USNIC_CPROBE_SMALL || large > OPAL_BTL_USNIC_CPROBE_MAX) {
        large = OPAL_BTL_USNIC_CPROBE_SMALL;
    }
    check_t *ck = NULL;
    for (int k = 0; k < agent.nchecks; ++k) {
        check_t *x = &agent.checks[k];
        if (x->local_ipv4 == req->local_ipv4 && x->peer_ipv4 == req->peer_ipv4 && x->peer_port == req->peer_port &&
            x->large == large) {
            ck = x;
        }
    }
    if (NULL == ck) {
        if (agent.nchecks == agent.cchecks) {
            int n = agent.cchecks ? 2 * agent.cchecks : 16;
            check_t *p = (check_t *) realloc(agent.checks, (size_t) n * sizeof(*p));
            if (NULL == p) {
                reply(conn, req->req_id, NULL);
                return;
            }
            agent.checks = p;
            agent.cchecks = n;
        }
        ck = &agent.checks[agent.nchecks++];
        memset(ck, 0, sizeof(*ck));
        ck->id = ++agent.next_id;
        ck->local_ipv4 = req->local_ipv4;
        ck->peer_ipv4 = req->peer_ipv4;
        ck->peer_port = req->peer_port;
        ck->large = large;
        ck->sock = sock;
        ck->verdict = OPAL_BTL_USNIC_CV_PENDING;
        ck->t_first = now;
        send_round(ck, now);
    }
    if (OPAL_BTL_USNIC_CV_PENDING != ck->verdict) {
        reply(conn, req->req_id, ck); /* decided earlier, for another local process */
        return;
    }
    if (ck->nwaiters == ck->cwaiters) {
        int n = ck->cwaiters ? 2 * ck->cwaiters : 4;
        waiter_t *w = (waiter_t *) realloc(ck->waiters, (size_t) n * sizeof(*w));
        if (NULL == w) {
            reply(conn, req->req_id, NULL);
            return;
        }
        ck->waiters = w;
        ck->cwaiters = n;
    }
    ck->waiters[ck->nwaiters].conn = conn;
    ck->waiters[ck->nwaiters].req_id = req->req_id;
    ++ck->nwaiters;
}

static void read_conns(uint64_t now)
{
    for (int i = 0; i < CAGENT_MAX_CONNS; ++i) {
        while (agent.conns[i].fd >= 0) {
            opal_btl_usnic_creq_t req;
            ssize_t n = recv(agent.conns[i].fd, &req, sizeof(req), MSG_DONTWAIT);
            if (n < 0 && (EAGAIN == errno || EWOULDBLOCK == errno || EINTR == errno)) {
                break;
            }
            if (n <= 0) {
                conn_close(i); /* the client is done (or gone) */
                break;
            }
            if ((size_t) n == sizeof(req) && OPAL_BTL_USNIC_CREQ_MAGIC == req.magic) {
                handle_request(i, &req, now);
            }
        }
    }
}

static check_t *check_by_id(uint32_t id)
{
    for (int k = 0; k < agent.nchecks; ++k) {
        if (agent.checks[k].id == id) {
            return &agent.checks[k];
        }
    }
    return NULL;
}

static void read_socks(uint64_t now)
{
    for (int i = 0; i < agent.nsocks; ++i) {
        for (;;) {
            struct sockaddr_in from;
            socklen_t fl = sizeof(from);
            ssize_t n = recvfrom(agent.socks[i].fd, agent.buf, sizeof(agent.buf), MSG_DONTWAIT,
                                 (struct sockaddr *) &from, &fl);
            if (n < 0) {
                break; /* EAGAIN, or an ICMP error of an earlier probe: its round times out */
            }
            opal_btl_usnic_cprobe_t p;
            if (!opal_btl_usnic_cprobe_parse(agent.buf, (size_t) n, mca_btl_usnic_component.cookie, &p)) {
                ++agent.invalid;
                continue;
            }
            if (OPAL_BTL_USNIC_CPROBE_PROBE == p.type) {
                agent.buf[4] = OPAL_BTL_USNIC_CPROBE_ECHO; /* echo it, same size, from this interface */
                (void) sendto(agent.socks[i].fd, agent.buf, (size_t) n, MSG_DONTWAIT, (struct sockaddr *) &from, fl);
                ++agent.probes_answered;
                continue;
            }
            ++agent.echoes_received;
            check_t *ck = check_by_id(p.check_id);
            if (NULL == ck || OPAL_BTL_USNIC_CV_PENDING != ck->verdict || ck->sock != i) {
                continue; /* a late duplicate */
            }
            if (OPAL_BTL_USNIC_CPROBE_SMALL == p.size) {
                ck->small_ok = true;
            }
            if (ck->large == p.size) {
                ck->large_ok = true;
            }
            if (ck->small_ok && ck->large_ok) {
                check_finish(ck, OPAL_BTL_USNIC_CV_OK, now);
            }
        }
    }
}

static void run_checks(uint64_t now)
{
    int rounds = mca_btl_usnic_component.connectivity_retries + 1;
    for (int k = 0; k < agent.nchecks; ++k) {
        check_t *ck = &agent.checks[k];
        if (OPAL_BTL_USNIC_CV_PENDING != ck->verdict || now < ck->next_due) {
            continue;
        }
        if (ck->rounds < rounds) {
            send_round(ck, now);
        } else {
            check_finish(ck, opal_btl_usnic_cverdict(ck->small_ok, ck->large_ok, true), now);
        }
    }
}

uint64_t opal_btl_usnic_cagent_due_in(uint64_t cap)
{
    uint64_t now = opal_btl_usnic_clock_usec();
    uint64_t best = cap;
    for (int k = 0; k < agent.nchecks; ++k) {
        const check_t *ck = &agent.checks[k];
        if (OPAL_BTL_USNIC_CV_PENDING == ck->verdict) {
            uint64_t d = (ck->next_due > now) ? ck->next_due - now : 0;
            if (d < best) {
                best = d;
            }
        }
    }
    return best;
}

static void arm_timer(void)
{
    uint64_t due = opal_btl_usnic_cagent_due_in(UINT64_MAX);
    if (agent.timer_on) {
        opal_event_del(&agent.timer);
        agent.timer_on = false;
    }
    if (UINT64_MAX != due) {
        struct timeval tv = {.tv_sec = (time_t) (due / 1000000u), .tv_usec = (suseconds_t) (due % 1000000u)};
        opal_event_add(&agent.timer, &tv);
        agent.timer_on = true;
    }
}

void opal_btl_usnic_cagent_service(void)
{
    if (!agent.running) {
        return;
    }
    OPAL_BTL_USNIC_LOCK();
    uint64_t now = opal_btl_usnic_clock_usec();
    accept_all();
    read_conns(now);
    read_socks(now);
    run_checks(opal_btl_usnic_clock_usec());
    arm_timer();
    OPAL_BTL_USNIC_UNLOCK();
}

int opal_btl_usnic_cagent_fds(int *fds, int max)
{
    int n = 0;
    if (!agent.running) {
        return 0;
    }
    if (agent.listen_fd >= 0 && n < max) {
        fds[n++] = agent.listen_fd;
    }
    for (int i = 0; i < agent.nsocks && n < max; ++i) {
        fds[n++] = agent.socks[i].fd;
    }
    for (int i = 0; i < CAGENT_MAX_CONNS && n < max; ++i) {
        if (agent.conns[i].fd >= 0) {
            fds[n++] = agent.conns[i].fd;
        }
    }
    return n;
}

/* The listener's name and, if we made it, its directory */
static void remove_path(void)
{
    if ('\0' != agent.path[0]) {
        (void) unlink(agent.path);
        agent.path[0] = '\0';
    }
    if ('\0' != agent.dir[0]) {
        (void) rmdir(agent.dir);
        agent.dir[0] = '\0';
    }
}

void opal_btl_usnic_cagent_fini(void)
{
    if (!agent.running) {
        return;
    }
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    if (c->stats > 0 || c->verbose >= 5) {
        opal_output(0, "btl:usnic connectivity agent [%s]: checks=%llu ok=%llu failed=%llu probes_sent=%llu "
                    "echoes_received=%llu probes_answered=%llu invalid=%llu refused_client_uid=%llu refused_conns_full=%llu "
                    "max_check_usec=%u",
                    opal_process_info.nodename, (unsigned long long) (agent.checks_ok + agent.checks_failed),
                    (unsigned long long) agent.checks_ok, (unsigned long long) agent.checks_failed,
                    (unsigned long long) agent.probes_sent, (unsigned long long) agent.echoes_received,
                    (unsigned long long) agent.probes_answered, (unsigned long long) agent.invalid,
                    (unsigned long long) agent.refused_client_uid, (unsigned long long) agent.refused_conns_full,
                    agent.max_check_usec);
    }
    /* 1. no more callbacks, 2. clients, 3. listener (and its name),
     * 4. probe sockets, 5. memory */
    if (agent.timer_on) {
        opal_event_del(&agent.timer);
        agent.timer_on = false;
    }
    if (agent.listen_ev_on) {
        opal_event_del(&agent.listen_ev);
        agent.listen_ev_on = false;
    }
    for (int i = 0; i < agent.nsocks; ++i) {
        if (agent.socks[i].ev_on) {
            opal_event_del(&agent.socks[i].ev);
            agent.socks[i].ev_on = false;
        }
    }
    for (int i = 0; i < CAGENT_MAX_CONNS; ++i) {
        if (agent.conns[i].fd >= 0 || agent.conns[i].ev_on) {
            conn_close(i);
        }
    }
    if (agent.listen_fd >= 0) {
        close(agent.listen_fd);
        agent.listen_fd = -1;
    }
    remove_path();
    for (int i = 0; i < agent.nsocks; ++i) {
        close(agent.socks[i].fd);
    }
    agent.nsocks = 0;
    for (int k = 0; k < agent.nchecks; ++k) {
        free(agent.checks[k].waiters);
    }
    free(agent.checks);
    agent.checks = NULL;
    agent.nchecks = agent.cchecks = 0;
    agent.running = false;
}
