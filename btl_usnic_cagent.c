/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Connectivity agent: one per host (local rank 0); what it trusts and
 * refuses is in btl_usnic_connectivity.h.  It owns one UDP probe socket
 * per module (bound to the module's address) and a SOCK_SEQPACKET
 * listener for the clients of this host, in a directory only the job's
 * user can enter.  Everything it does happens in
 * opal_btl_usnic_cagent_service(), a non-blocking pass of bounded work
 * called from libevent events on opal_sync_event_base (socket readable,
 * resend timer) and from the waiting loop of this process's own client.
 *
 * The job's agent key and the agent addresses of other hosts come from
 * the modex when first needed, not at init: a probe can arrive before
 * this process's add_procs, and with lazy add_procs this process may
 * never add the prober's rank at all.
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

#include "btl_usnic_compat.h"
#include "opal/util/opal_environ.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"

#define CAGENT_MAX_SOCKS 64
#define CAGENT_MAX_CONNS 256
/* Work of one service call at most; the rest waits for the next call
 * (the descriptors stay readable, so libevent calls again) */
#define CAGENT_DGRAMS_PER_CALL 64
#define CAGENT_REQUESTS_PER_CALL 64
#define CAGENT_ACCEPTS_PER_CALL 16
#define CAGENT_SOCK_NAME "usnic-cagent.sock"

/* What the agent counts: X(name), printed as name=N in its statistics
 * line; every datagram or client it turns away has a drop_ or refused_
 * counter that says why. */
#define CAGENT_COUNTERS(X)                                                                               \
    X(probes_sent)            /* probes this agent sent */                                               \
    X(echoes_received)        /* echoes that counted for a live check */                                 \
    X(probes_answered)        /* echoes this agent sent */                                               \
    X(echo_redirected)        /* of those, for probes whose source was not the address their sender      \
                                 published: the echo went to the published address */                   \
    X(tags_checked)           /* received datagrams whose tag was computed: each passed the cheap        \
                                 checks (btl_usnic_connectivity.h) */                                    \
    X(drop_malformed)         /* not a probe or echo of this version (garbage, version 1) */             \
    X(drop_too_large)         /* larger than any probe between the two agents' modex MTUs */             \
    X(drop_source_unpublished) /* from an address and port no rank published: not an agent's socket */   \
    X(drop_source_rate)       /* beyond its source's token bucket (source_burst()) */                    \
    X(drop_tag_budget)        /* beyond the agent's budget of tag bytes (CAGENT_TAG_BUDGET_BYTES) */     \
    X(drop_no_key)            /* past the cheap checks, but rank 0's agent key is not known */           \
    X(drop_unauthentic)       /* a tag not made with the job's agent key */                              \
    X(drop_not_for_us)        /* an authentic probe addressed to another agent */                        \
    X(drop_unknown_source)    /* an authentic probe whose sender address no rank published */            \
    X(drop_rate_limited)      /* a probe whose echo its destination's budget had no room for */          \
    X(drop_stale_echo)        /* an authentic echo for no live check of ours */                          \
    X(drop_echo_wrong_source) /* an authentic echo not from the address probed */                        \
    X(refused_client_uid)     /* a Unix client of another user */                                        \
    X(refused_conns_full)     /* a client beyond CAGENT_MAX_CONNS */                                     \
    X(refused_target)         /* a request to probe an address no rank published */                      \
    X(refused_table_full)     /* a request beyond the check table or a check's waiters */                \
    X(unchecked_no_key)       /* a check given up: rank 0's agent key did not come */

typedef struct {
    int fd;
    uint32_t ipv4;   /* network order */
    uint16_t port;   /* host order */
    uint32_t mtu;    /* the module's modex MTU */
    opal_event_t ev;
    bool ev_on;
} probe_sock_t;

typedef struct {
    int fd;
    opal_event_t ev;
    bool ev_on;
} conn_t;

typedef struct {
#define CAGENT_FIELD(name) uint64_t name;
    CAGENT_COUNTERS(CAGENT_FIELD)
#undef CAGENT_FIELD
} counters_t;

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
    int next_sock, next_conn; /* where the next service call starts reading */
    opal_btl_usnic_ctable_t checks;
    opal_btl_usnic_cpeers_t peers;
    uint32_t job_size;
    char *modex_key;                       /* our component's modex key */
    bool key_ready, key_missing_said;
    uint64_t key_next_try;
    uint8_t key[OPAL_BTL_USNIC_KEY_BYTES]; /* probes' key, from rank 0's agent key */
    opal_event_t timer;
    bool timer_on;
    uint8_t buf[OPAL_BTL_USNIC_CPROBE_MAX + 64];
    opal_btl_usnic_cbucket_t tag_budget;  /* bytes of received datagrams whose tag may be computed */
    opal_btl_usnic_cbucket_t modex_reads; /* modex reads a datagram's claimed rank may cause */
    uint8_t *vpids_read;                  /* bit per rank: its agent addresses are in peers */
    size_t vpids_bits;
    counters_t cnt;
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

static void watch(opal_event_t *ev, bool *on, int fd)
{
    opal_event_set(opal_sync_event_base, ev, fd, OPAL_EV_READ | OPAL_EV_PERSIST, service_cb, NULL);
    opal_event_add(ev, NULL);
    *on = true;
}

static void unwatch(opal_event_t *ev, bool *on)
{
    if (*on) {
        opal_event_del(ev);
        *on = false;
    }
}

/* ----- what the modex says ----- */

static void modex_free(opal_btl_usnic_modex_t *m, size_t n)
{
    if (NULL != m) {
        sodium_memzero(m, n * sizeof(*m)); /* keys */
        free(m);
    }
}

/* A value not found without asking the server may still come from it
 * (the modex is fetched on demand rather than all at the fence) */
static bool ask_server_too(int rc)
{
    return OPAL_SUCCESS != rc && (opal_pmix_base_async_modex || !opal_pmix_collect_all_data);
}

int opal_btl_usnic_cmodex_get(uint32_t vpid, const char *key, void *data_p, int type)
{
    opal_process_name_t name = {.jobid = OPAL_PROC_MY_NAME.jobid, .vpid = vpid};
    int rc;
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, key, &name, (void **) data_p, type);
    if (ask_server_too(rc)) {
        OPAL_MODEX_RECV_VALUE(rc, key, &name, (void **) data_p, type);
    }
    return rc;
}

/* The usnic modex entries of rank |vpid| of our job, NULL if none (yet) */
static opal_btl_usnic_modex_t *modex_of(uint32_t vpid, size_t *n_p)
{
    if (vpid >= agent.job_size || vpid >= OPAL_VPID_MAX || NULL == agent.modex_key) {
        return NULL; /* no such rank: nothing to ask PMIx */
    }
    opal_process_name_t name = {.jobid = OPAL_PROC_MY_NAME.jobid, .vpid = vpid};
    void *bytes = NULL;
    size_t size = 0;
    int rc = opal_btl_usnic_modex_get_bytes(&name, agent.modex_key, true, &bytes, &size);
    if (ask_server_too(rc)) {
        rc = opal_btl_usnic_modex_get_bytes(&name, agent.modex_key, false, &bytes, &size);
    }
    if (OPAL_SUCCESS != rc || NULL == bytes) {
        return NULL;
    }
    opal_btl_usnic_modex_t *m = (opal_btl_usnic_modex_t *) bytes;
    if (NULL == m || 0 == size || 0 != size % sizeof(*m) || OPAL_BTL_USNIC_PROTO_VERSION != m->proto_version) {
        if (NULL != m) {
            sodium_memzero(m, size);
        }
        free(m);
        return NULL;
    }
    *n_p = size / sizeof(*m);
    return m;
}

static uint32_t job_size(void)
{
    opal_process_name_t wild = {.jobid = OPAL_PROC_MY_NAME.jobid, .vpid = OPAL_VPID_WILDCARD};
    uint32_t size = 0, *p = &size;
    int rc;
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, OPAL_BTL_USNIC_PMIX_JOB_SIZE, &wild, &p, OPAL_BTL_USNIC_PMIX_UINT32);
    return (OPAL_SUCCESS == rc && size > 0) ? size : UINT32_MAX;
}

/* The probes' key from |rank0|'s entry: the launcher's secret's where
 * rank 0 keyed them with it (it then published no agent key), else its
 * agent key.  False: rank 0 keys them with a secret this process lacks. */
static bool job_agent_key(const opal_btl_usnic_modex_t *rank0, uint8_t key[OPAL_BTL_USNIC_KEY_BYTES])
{
    static const uint8_t none[OPAL_BTL_USNIC_ID_BYTES] = {0};
    const opal_btl_usnic_job_secret_t *secret = &opal_btl_usnic_globals.job_secret;
    if (0 == memcmp(rank0->secret_id, none, sizeof(none))) {
        opal_btl_usnic_derive_agent_key(rank0->agent_key, key);
        return true;
    }
    if (OPAL_BTL_USNIC_SECRET_GOOD != secret->kind ||
        0 != sodium_memcmp(rank0->secret_id, secret->id, sizeof(secret->id))) {
        return false;
    }
    opal_btl_usnic_derive_agent_key(secret->key, key);
    return true;
}

/* The probes' key from rank 0's agent key, read when first needed.  Not
 * there yet (a datagram before this process has the fence's data):
 * asked again at most every KEY_RETRY_USEC; the sender resends. */
#define KEY_RETRY_USEC 10000u
static bool have_key(uint64_t now)
{
    if (agent.key_ready || now < agent.key_next_try) {
        return agent.key_ready;
    }
    size_t n = 0;
    opal_btl_usnic_modex_t *m = modex_of(0, &n);
    if (NULL != m) {
        agent.key_ready = job_agent_key(&m[0], agent.key);
        modex_free(m, n);
    } else {
        agent.key_next_try = now + KEY_RETRY_USEC;
        if (!agent.key_missing_said) {
            agent.key_missing_said = true;
            opal_btl_usnic_verbose(5, "connectivity agent: rank 0's agent key is not (yet) in the modex");
        }
    }
    return agent.key_ready;
}

/* Ranks whose agent addresses were read from the modex (all of them:
 * the modex does not change once there), one bit each, for the first
 * CAGENT_VPID_BITS_MAX ranks of the job */
#define CAGENT_VPID_BITS_MAX (1u << 24)
static bool vpid_was_read(uint32_t vpid)
{
    return vpid < agent.vpids_bits && 0 != (agent.vpids_read[vpid / 8] & (1u << (vpid % 8)));
}

static void vpid_mark_read(uint32_t vpid)
{
    if (NULL == agent.vpids_read) {
        size_t bits = (agent.job_size < CAGENT_VPID_BITS_MAX) ? agent.job_size : CAGENT_VPID_BITS_MAX;
        agent.vpids_read = (uint8_t *) calloc((bits + 7) / 8, 1);
        agent.vpids_bits = (NULL != agent.vpids_read) ? bits : 0;
    }
    if (vpid < agent.vpids_bits) {
        agent.vpids_read[vpid / 8] |= (uint8_t) (1u << (vpid % 8));
    }
}

/* The agent address |ipv4|:|port| if a rank published it: remembered, or
 * looked up in the modex of rank |vpid| (the sender's or client's word
 * for who published it), whose agent addresses are then remembered */
static opal_btl_usnic_cpeer_t *published_agent(uint32_t vpid, uint32_t ipv4, uint16_t port)
{
    opal_btl_usnic_cpeer_t *p = opal_btl_usnic_cpeers_find(&agent.peers, ipv4, port);
    if (NULL != p || 0 == port) {
        return p;
    }
    size_t n = 0;
    opal_btl_usnic_modex_t *m = modex_of(vpid, &n);
    if (NULL != m) {
        vpid_mark_read(vpid);
    }
    for (size_t j = 0; NULL != m && j < n; ++j) {
        if (0 != m[j].probe_port) {
            (void) opal_btl_usnic_cpeers_add(&agent.peers, m[j].ipv4, m[j].probe_port, vpid, m[j].mtu);
        }
    }
    modex_free(m, n);
    return opal_btl_usnic_cpeers_find(&agent.peers, ipv4, port);
}

/* ----- sockets ----- */

static int open_probe_socket(opal_btl_usnic_module_t *module, probe_sock_t *ps)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        return OPAL_ERROR;
    }
    set_nonblock_cloexec(fd);
    /* never fragment: a probe must cross the path as one datagram; and,
     * as the socket wire, take no path MTU from ICMP when the search is on */
    int pmtu = opal_btl_usnic_globals.pmtu_discovery ? IP_PMTUDISC_PROBE : IP_PMTUDISC_DO;
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
    ps->mtu = module->local_modex.mtu;
    watch(&ps->ev, &ps->ev_on, fd);
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
        snprintf(agent.path, sizeof(agent.path), "%s/usnic-cagent-XXXXXX", bases[i]); /* for the message */
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
    if (!opal_btl_usnic_register_cleanup_dir(agent.dir)) {
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
    watch(&agent.listen_ev, &agent.listen_ev_on, fd);
    return OPAL_SUCCESS;
}

/* Tell the local processes where the listener is (only they can read it) */
static int publish_path(void)
{
    int rc = opal_btl_usnic_modex_put_local_string(OPAL_BTL_USNIC_CAGENT_PATH_KEY, agent.path);
    if (OPAL_SUCCESS != rc) {
        listener_failed("publishing the socket's path in the modex", EIO);
    }
    return rc;
}

static void say_started(void)
{
    char socks[CAGENT_MAX_SOCKS * 24] = "", ip[INET_ADDRSTRLEN];
    size_t at = 0;
    for (int i = 0; i < agent.nsocks && at < sizeof(socks); ++i) {
        ip_str(agent.socks[i].ipv4, ip, sizeof(ip));
        int n = snprintf(socks + at, sizeof(socks) - at, "%s%s:%u", i ? " " : "", ip, (unsigned) agent.socks[i].port);
        at += (n > 0) ? (size_t) n : 0;
    }
    opal_btl_usnic_verbose(5, "connectivity agent on %s: probe sockets %s, listening on %s%s",
                           opal_process_info.nodename, socks, agent.path,
                           '\0' != agent.dir[0] ? " (private directory)" : "");
}

int opal_btl_usnic_cagent_init(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (!c->connectivity_check || 0 != opal_process_info.my_local_rank || agent.running) {
        return OPAL_SUCCESS;
    }
    memset(&agent.cnt, 0, sizeof(agent.cnt));
    memset(&agent.tag_budget, 0, sizeof(agent.tag_budget));
    memset(&agent.modex_reads, 0, sizeof(agent.modex_reads));
    agent.key_ready = agent.key_missing_said = false;
    agent.key_next_try = 0;
    for (int i = 0; i < CAGENT_MAX_CONNS; ++i) {
        agent.conns[i].fd = -1;
    }
    agent.nsocks = 0;
    agent.running = true; /* from here, fini closes what was opened */
    agent.modex_key = mca_base_component_to_string(c->version);
    bool ok = NULL != agent.modex_key && opal_btl_usnic_ctable_init(&agent.checks);
    for (int i = 0; ok && i < c->num_modules && agent.nsocks < CAGENT_MAX_SOCKS; ++i) {
        if (OPAL_SUCCESS == open_probe_socket(c->modules[i], &agent.socks[agent.nsocks])) {
            c->modules[i]->local_modex.probe_port = agent.socks[agent.nsocks].port;
            ++agent.nsocks;
        }
    }
    ok = ok && agent.nsocks > 0 && OPAL_SUCCESS == open_listener() && OPAL_SUCCESS == publish_path();
    if (!ok) {
        opal_btl_usnic_cagent_fini();
        for (int i = 0; i < c->num_modules; ++i) {
            c->modules[i]->local_modex.probe_port = 0;
        }
        return OPAL_ERROR;
    }
    agent.job_size = job_size();
    opal_event_evtimer_set(opal_sync_event_base, &agent.timer, service_cb, NULL);
    say_started();
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
    unwatch(&cn->ev, &cn->ev_on);
    if (cn->fd >= 0) {
        close(cn->fd);
        cn->fd = -1;
    }
    opal_btl_usnic_ctable_forget_conn(&agent.checks, i); /* nobody to tell any more */
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

static void accept_some(void)
{
    for (int k = 0; k < CAGENT_ACCEPTS_PER_CALL; ++k) {
        int fd = accept(agent.listen_fd, NULL, NULL);
        if (fd < 0) {
            return;
        }
        int slot = -1;
        if (!client_is_ours(fd)) {
            ++agent.cnt.refused_client_uid;
        } else if ((slot = free_conn_slot()) < 0) {
            ++agent.cnt.refused_conns_full; /* that client's checks end up unchecked */
        }
        if (slot < 0) {
            close(fd);
            continue;
        }
        set_nonblock_cloexec(fd);
        agent.conns[slot].fd = fd;
        watch(&agent.conns[slot].ev, &agent.conns[slot].ev_on, fd);
    }
}

static void send_reply(int conn, opal_btl_usnic_crep_t *rep, opal_btl_usnic_ccheck_t *ck)
{
    if (conn >= 0 && agent.conns[conn].fd >= 0 &&
        send(agent.conns[conn].fd, rep, sizeof(*rep), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) sizeof(*rep)) {
        if (NULL != ck && rep->report) {
            ck->reported = false; /* that one did not hear it */
        }
        opal_btl_usnic_verbose(1, "connectivity agent: cannot answer a client: %s", strerror(errno));
    }
}

/* A verdict of probes that were lost (not one of a check never made) */
static bool is_path_failure(int verdict)
{
    return OPAL_BTL_USNIC_CV_LARGE_FAILED == verdict || OPAL_BTL_USNIC_CV_SMALL_FAILED == verdict ||
           OPAL_BTL_USNIC_CV_ALL_FAILED == verdict;
}

/* A verdict without a check (UNCHECKED) */
static void reply_verdict(int conn, uint32_t req_id, int verdict)
{
    opal_btl_usnic_crep_t rep = {.req_id = req_id, .verdict = verdict};
    send_reply(conn, &rep, NULL);
}

static void reply_check(int conn, uint32_t req_id, opal_btl_usnic_ccheck_t *ck)
{
    opal_btl_usnic_crep_t rep = {.req_id = req_id,
                                 .verdict = ck->verdict,
                                 .large_size = ck->large,
                                 .probes_sent = ck->probes,
                                 .elapsed_usec = ck->elapsed_usec};
    if (is_path_failure(ck->verdict) && !ck->reported) {
        rep.report = 1;
        ck->reported = true;
    }
    send_reply(conn, &rep, ck);
}

/* ----- checks ----- */

static void send_round(opal_btl_usnic_ccheck_t *ck, uint64_t now)
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
                                     .check_id = ck->id,
                                     .size = sizes[s],
                                     .attempt = (uint32_t) ck->rounds,
                                     .from_vpid = OPAL_PROC_MY_NAME.vpid,
                                     .from_ipv4 = ck->local_ipv4,
                                     .to_ipv4 = ck->peer_ipv4,
                                     .from_port = ck->local_port,
                                     .to_port = ck->peer_port};
        size_t len = opal_btl_usnic_cprobe_pack(agent.buf, sizeof(agent.buf), agent.key, &p);
        if (len > 0) {
            /* a failed send (EMSGSIZE: smaller route MTU) is a lost probe */
            (void) sendto(agent.socks[ck->sock].fd, agent.buf, len, MSG_DONTWAIT, (struct sockaddr *) &to,
                          sizeof(to));
            ++ck->probes;
            ++agent.cnt.probes_sent;
        }
    }
    ++ck->rounds;
    ck->next_due = now + (uint64_t) opal_btl_usnic_globals.connectivity_timeout * 1000u;
}

static void check_finish(opal_btl_usnic_ccheck_t *ck, int verdict, uint64_t now)
{
    opal_btl_usnic_ccheck_finish(ck, verdict, now);
    if (ck->elapsed_usec > agent.max_check_usec) {
        agent.max_check_usec = ck->elapsed_usec;
    }
    if (OPAL_BTL_USNIC_CV_OK == verdict) {
        ++agent.checks_ok;
    } else if (is_path_failure(verdict)) {
        ++agent.checks_failed;
    }
    char lip[INET_ADDRSTRLEN], pip[INET_ADDRSTRLEN];
    ip_str(ck->local_ipv4, lip, sizeof(lip));
    ip_str(ck->peer_ipv4, pip, sizeof(pip));
    opal_btl_usnic_verbose(5, "connectivity agent: %s -> %s:%u (%u bytes): verdict %d after %u us, %u probes", lip,
                           pip, (unsigned) ck->peer_port, ck->large, verdict, ck->elapsed_usec, ck->probes);
    for (int j = 0; j < ck->nwaiters; ++j) {
        reply_check(ck->waiters[j].conn, ck->waiters[j].req_id, ck);
    }
    ck->nwaiters = 0;
}

static int sock_of(uint32_t ipv4)
{
    for (int i = 0; i < agent.nsocks; ++i) {
        if (agent.socks[i].ipv4 == ipv4) {
            return i;
        }
    }
    return -1;
}

/* The first round of |ck| once the modex says who its peer is: the job's
 * key and the address the peer published.  Right after the fence this
 * process may not have the fence's data yet: the check waits for it (at
 * most CAGENT_MODEX_WAIT_USEC), so that both hosts of a pair reach the
 * same verdict. */
#define CAGENT_MODEX_WAIT_USEC 1000000u
static void start_probing(opal_btl_usnic_ccheck_t *ck, uint64_t now)
{
    if (!have_key(now)) {
        if (now - ck->t_first >= CAGENT_MODEX_WAIT_USEC) {
            ++agent.cnt.unchecked_no_key;
            check_finish(ck, OPAL_BTL_USNIC_CV_UNCHECKED, now);
        } else {
            ck->next_due = now + KEY_RETRY_USEC;
        }
        return;
    }
    opal_btl_usnic_cpeer_t *peer = published_agent(ck->peer_vpid, ck->peer_ipv4, ck->peer_port);
    if (NULL == peer) {
        ++agent.cnt.refused_target; /* never probed */
        check_finish(ck, OPAL_BTL_USNIC_CV_REFUSED, now);
        return;
    }
    ck->large = opal_btl_usnic_cprobe_large_size(agent.socks[ck->sock].mtu, peer->mtu,
                                                 opal_btl_usnic_connectivity_probe_cap());
    send_round(ck, now);
}

static void handle_request(int conn, const opal_btl_usnic_creq_t *req, uint64_t now)
{
    int s = sock_of(req->local_ipv4);
    if (s < 0) {
        reply_verdict(conn, req->req_id, OPAL_BTL_USNIC_CV_UNCHECKED); /* no probe socket there */
        return;
    }
    opal_btl_usnic_ccheck_t *ck = opal_btl_usnic_ctable_find_pair(&agent.checks, req->local_ipv4, req->peer_ipv4,
                                                                  req->peer_port);
    if (NULL == ck && NULL != (ck = opal_btl_usnic_ctable_add(&agent.checks, now))) {
        ck->local_ipv4 = agent.socks[s].ipv4;
        ck->local_port = agent.socks[s].port;
        ck->peer_ipv4 = req->peer_ipv4;
        ck->peer_port = req->peer_port;
        ck->peer_vpid = req->peer_vpid;
        ck->sock = s;
    }
    if (NULL == ck) {
        ++agent.cnt.refused_table_full;
        reply_verdict(conn, req->req_id, OPAL_BTL_USNIC_CV_UNCHECKED);
    } else if (OPAL_BTL_USNIC_CV_PENDING != ck->verdict) {
        reply_check(conn, req->req_id, ck); /* decided earlier, for another local process */
    } else if (!opal_btl_usnic_ccheck_add_waiter(ck, conn, req->req_id)) {
        ++agent.cnt.refused_table_full;
        reply_verdict(conn, req->req_id, OPAL_BTL_USNIC_CV_UNCHECKED);
    } else if (0 == ck->rounds) {
        start_probing(ck, now); /* a new check (or one still waiting for the modex) */
    }
}

/* Requests of the connected clients, at most CAGENT_REQUESTS_PER_CALL,
 * starting one connection further each call */
static void read_conns(uint64_t now)
{
    int budget = CAGENT_REQUESTS_PER_CALL;
    for (int k = 0; k < CAGENT_MAX_CONNS && budget > 0; ++k) {
        int i = (agent.next_conn + k) % CAGENT_MAX_CONNS;
        while (agent.conns[i].fd >= 0 && budget > 0) {
            opal_btl_usnic_creq_t req;
            ssize_t n = recv(agent.conns[i].fd, &req, sizeof(req), MSG_DONTWAIT);
            if (n < 0 && (EAGAIN == errno || EWOULDBLOCK == errno || EINTR == errno)) {
                break;
            }
            if (n <= 0) {
                conn_close(i); /* the client is done (or gone) */
                break;
            }
            --budget;
            if ((size_t) n == sizeof(req) && OPAL_BTL_USNIC_CREQ_MAGIC == req.magic) {
                handle_request(i, &req, now);
            }
        }
    }
    agent.next_conn = (agent.next_conn + 1) % CAGENT_MAX_CONNS;
}

/* An authentic probe on socket |s|: echoed to the address its sender
 * published, never to |from| (which anyone can forge) */
static void answer_probe(int s, opal_btl_usnic_cprobe_t *p, const struct sockaddr_in *from, uint64_t now)
{
    const probe_sock_t *ps = &agent.socks[s];
    if (p->to_ipv4 != ps->ipv4 || p->to_port != ps->port) {
        ++agent.cnt.drop_not_for_us;
        return;
    }
    opal_btl_usnic_cpeer_t *peer = published_agent(p->from_vpid, p->from_ipv4, p->from_port);
    if (NULL == peer) {
        ++agent.cnt.drop_unknown_source;
        return;
    }
    uint64_t window = (uint64_t) opal_btl_usnic_globals.connectivity_timeout * 1000u;
    if (!opal_btl_usnic_cpeer_take_echo(peer, now, OPAL_BTL_USNIC_CECHO_BURST, window)) {
        ++agent.cnt.drop_rate_limited;
        return;
    }
    if (from->sin_addr.s_addr != peer->ipv4 || ntohs(from->sin_port) != peer->port) {
        ++agent.cnt.echo_redirected;
    }
    p->type = OPAL_BTL_USNIC_CPROBE_ECHO;
    size_t len = opal_btl_usnic_cprobe_pack(agent.buf, sizeof(agent.buf), agent.key, p);
    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = peer->ipv4;
    to.sin_port = htons(peer->port);
    if (len > 0) {
        (void) sendto(ps->fd, agent.buf, len, MSG_DONTWAIT, (struct sockaddr *) &to, sizeof(to));
        ++agent.cnt.probes_answered;
    }
}

/* An authentic echo: counts only for a live check of ours, from the
 * address that check probed */
static void take_echo(const opal_btl_usnic_cprobe_t *e, const struct sockaddr_in *from, uint64_t now)
{
    opal_btl_usnic_ccheck_t *ck = NULL;
    switch (opal_btl_usnic_ctable_match_echo(&agent.checks, e, OPAL_PROC_MY_NAME.vpid, from->sin_addr.s_addr,
                                             ntohs(from->sin_port), &ck)) {
    case OPAL_BTL_USNIC_CECHO_STALE:
        ++agent.cnt.drop_stale_echo;
        return;
    case OPAL_BTL_USNIC_CECHO_WRONG_SOURCE:
        ++agent.cnt.drop_echo_wrong_source;
        return;
    case OPAL_BTL_USNIC_CECHO_OK:
        break;
    }
    ++agent.cnt.echoes_received;
    if (OPAL_BTL_USNIC_CPROBE_SMALL == e->size) {
        ck->small_ok = true;
    }
    if (ck->large == e->size) {
        ck->large_ok = true;
    }
    if (ck->small_ok && ck->large_ok) {
        check_finish(ck, OPAL_BTL_USNIC_CV_OK, now);
    }
}

/* ----- the cheap checks before a datagram's tag (btl_usnic_connectivity.h) ----- */

/* Per source address, in datagrams per btl_usnic_connectivity_timeout.
 * What a genuine agent at one address sends to this agent: for each of
 * our CAGENT_MAX_SOCKS-bounded nsocks addresses its host checks, one
 * round of 2 probes (small and large) per connectivity_timeout (rounds
 * are that far apart; a round resends only the sizes not yet echoed),
 * and for each of our checks towards it (at most one per our socket:
 * one check per pair) the 2 echoes of a round: 4 * nsocks per timeout.
 * Twice that, because a late round and the next one can land in one
 * timeout, and a check that starts again after its verdict's grace
 * (OPAL_BTL_USNIC_CHECK_GRACE_USEC, 10 s) adds one round at most. */
static uint32_t source_burst(void)
{
    return 2u * 4u * (uint32_t) agent.nsocks;
}

/* The whole agent's tags, in bytes per second: the sum over every source
 * that passed its own bucket (many published sources, forged by root or
 * a host on the path, could each spend theirs).  At about 1.4 ns a byte
 * that is at most ~45 ms of rank 0's CPU a second (<5 %).  A genuine
 * round of a 900-host job at a 9000-byte MTU (4 datagrams per host, as
 * above) fits in one second's budget; beyond it, or when a flood takes
 * the budget, a probe or echo refused here is one lost on the path: the
 * checker resends it the next round (btl_usnic_connectivity_retries). */
#define CAGENT_TAG_BUDGET_BYTES (32u << 20)
#define CAGENT_TAG_BUDGET_USEC 1000000u

/* A datagram from an address not yet remembered makes the agent read the
 * modex of the rank it claims (from_rank: anyone's word before the tag);
 * a rank read once is not read again (vpids_read), and the reads of ranks
 * not yet read are at most CAGENT_MODEX_READS a second, so that junk does
 * not make the agent ask PMIx for every datagram.  A genuine prober whose
 * read is refused here resends. */
#define CAGENT_MODEX_READS 1000u
#define CAGENT_MODEX_READS_USEC 1000000u

static opal_btl_usnic_cpeer_t *gate_find_source(void *ctx, uint32_t ipv4, uint16_t port, uint32_t claimed_vpid)
{
    uint64_t now = *(const uint64_t *) ctx;
    opal_btl_usnic_cpeer_t *p = opal_btl_usnic_cpeers_find(&agent.peers, ipv4, port);
    if (NULL != p || 0 == port || claimed_vpid >= agent.job_size || vpid_was_read(claimed_vpid) ||
        !opal_btl_usnic_cbucket_take(&agent.modex_reads, now, 1, CAGENT_MODEX_READS, CAGENT_MODEX_READS_USEC)) {
        return p;
    }
    return published_agent(claimed_vpid, ipv4, port);
}

/* Past the cheap checks?  Counts the refusal otherwise. */
static bool passes_gate(int s, size_t n, const struct sockaddr_in *from, uint64_t now)
{
    opal_btl_usnic_cgate_in_t in = {.local_mtu = agent.socks[s].mtu,
                                    .src_ipv4 = from->sin_addr.s_addr,
                                    .src_port = ntohs(from->sin_port),
                                    .find_source = gate_find_source,
                                    .ctx = &now,
                                    .source_burst = source_burst(),
                                    .source_period_usec = (uint64_t) opal_btl_usnic_globals.connectivity_timeout * 1000u,
                                    .tag_budget = &agent.tag_budget,
                                    .tag_budget_bytes = CAGENT_TAG_BUDGET_BYTES,
                                    .tag_budget_period_usec = CAGENT_TAG_BUDGET_USEC};
    opal_btl_usnic_cpeer_t *src = NULL;
    switch (opal_btl_usnic_cprobe_gate(agent.buf, n, &in, now, &src)) {
    case OPAL_BTL_USNIC_CGATE_TAG:
        return true;
    case OPAL_BTL_USNIC_CGATE_MALFORMED:
        ++agent.cnt.drop_malformed;
        break;
    case OPAL_BTL_USNIC_CGATE_TOO_LARGE:
        ++agent.cnt.drop_too_large;
        break;
    case OPAL_BTL_USNIC_CGATE_UNPUBLISHED:
        ++agent.cnt.drop_source_unpublished;
        break;
    case OPAL_BTL_USNIC_CGATE_SOURCE_RATE:
        ++agent.cnt.drop_source_rate;
        break;
    case OPAL_BTL_USNIC_CGATE_TAG_BUDGET:
        ++agent.cnt.drop_tag_budget;
        break;
    }
    return false;
}

/* A datagram past the cheap checks, whole in agent.buf: its tag, then
 * what it asks for */
static void on_datagram(int s, size_t n, const struct sockaddr_in *from, uint64_t now)
{
    opal_btl_usnic_cprobe_t p;
    if (!have_key(now)) {
        ++agent.cnt.drop_no_key;
        return;
    }
    ++agent.cnt.tags_checked;
    if (OPAL_BTL_USNIC_CPROBE_VALID != opal_btl_usnic_cprobe_parse(agent.buf, n, agent.key, &p)) {
        ++agent.cnt.drop_unauthentic;
    } else if (OPAL_BTL_USNIC_CPROBE_PROBE == p.type) {
        answer_probe(s, &p, from, now);
    } else {
        take_echo(&p, from, now);
    }
}

/* Datagrams of the probe sockets, at most CAGENT_DGRAMS_PER_CALL,
 * starting one socket further each call */
static void read_socks(uint64_t now)
{
    int budget = CAGENT_DGRAMS_PER_CALL;
    for (int k = 0; k < agent.nsocks && budget > 0; ++k) {
        int i = (agent.next_sock + k) % agent.nsocks;
        for (; budget > 0; --budget) {
            struct sockaddr_in from;
            socklen_t fl = sizeof(from);
            /* The header first (MSG_TRUNC: and the datagram's length): the
             * cheap checks read nothing else, and a datagram they refuse
             * goes without copying the rest of it (up to 65 KB) */
            ssize_t n = recvfrom(agent.socks[i].fd, agent.buf, OPAL_BTL_USNIC_CPROBE_HDR_LEN,
                                 MSG_DONTWAIT | MSG_PEEK | MSG_TRUNC, (struct sockaddr *) &from, &fl);
            if (n < 0) {
                break; /* EAGAIN, or an ICMP error of an earlier probe: its round times out */
            }
            if (!passes_gate(i, (size_t) n, &from, now)) {
                (void) recv(agent.socks[i].fd, agent.buf, 0, MSG_DONTWAIT); /* discarded */
                continue;
            }
            ssize_t whole = recv(agent.socks[i].fd, agent.buf, sizeof(agent.buf), MSG_DONTWAIT);
            if (whole == n) {
                on_datagram(i, (size_t) n, &from, now);
            } else {
                ++agent.cnt.drop_malformed; /* not what was peeked at: cannot happen with one reader */
            }
        }
    }
    agent.next_sock = (agent.next_sock + 1) % (agent.nsocks > 0 ? agent.nsocks : 1);
}

static void run_checks(uint64_t now)
{
    int rounds = opal_btl_usnic_globals.connectivity_retries + 1;
    for (int k = 0; k < OPAL_BTL_USNIC_CTABLE_SIZE; ++k) {
        opal_btl_usnic_ccheck_t *ck = &agent.checks.slots[k];
        if (0 == ck->id || OPAL_BTL_USNIC_CV_PENDING != ck->verdict || now < ck->next_due) {
            continue;
        }
        if (0 == ck->rounds) {
            start_probing(ck, now);
        } else if (ck->rounds < rounds) {
            send_round(ck, now);
        } else {
            check_finish(ck, opal_btl_usnic_cverdict(ck->small_ok, ck->large_ok, true), now);
        }
    }
    opal_btl_usnic_ctable_expire(&agent.checks, now);
}

uint64_t opal_btl_usnic_cagent_due_in(uint64_t cap)
{
    uint64_t now = opal_btl_usnic_clock_usec();
    uint64_t best = cap;
    for (int k = 0; agent.running && k < OPAL_BTL_USNIC_CTABLE_SIZE; ++k) {
        const opal_btl_usnic_ccheck_t *ck = &agent.checks.slots[k];
        if (0 != ck->id && OPAL_BTL_USNIC_CV_PENDING == ck->verdict) {
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
    unwatch(&agent.timer, &agent.timer_on);
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
    accept_some();
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

/* The work counters always, the others (drops, refusals) when not 0,
 * as the modules' statistics lines do */
static bool is_always_printed(const char *name)
{
    return 0 != strncmp(name, "drop_", 5) && 0 != strncmp(name, "refused_", 8) && 0 != strcmp(name, "echo_redirected")
           && 0 != strcmp(name, "unchecked_no_key");
}

static void print_stats(void)
{
    char line[2048];
    int at = snprintf(line, sizeof(line), "btl:usnic connectivity agent [%s]: checks=%llu ok=%llu failed=%llu",
                      opal_process_info.nodename, (unsigned long long) (agent.checks_ok + agent.checks_failed),
                      (unsigned long long) agent.checks_ok, (unsigned long long) agent.checks_failed);
#define CAGENT_PRINT(name)                                                                                 \
    if (at > 0 && (size_t) at < sizeof(line) && (is_always_printed(#name) || 0 != agent.cnt.name)) {     \
        at += snprintf(line + at, sizeof(line) - (size_t) at, " " #name "=%llu",                           \
                       (unsigned long long) agent.cnt.name);                                               \
    }
    CAGENT_COUNTERS(CAGENT_PRINT)
#undef CAGENT_PRINT
    opal_output(0, "%s max_check_usec=%u", line, agent.max_check_usec);
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
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (agent.listen_fd >= 0 && (c->stats > 0 || c->verbose >= 5)) {
        print_stats();
    }
    /* 1. no more callbacks, 2. clients, 3. listener (and its name),
     * 4. probe sockets, 5. memory and keys */
    unwatch(&agent.timer, &agent.timer_on);
    unwatch(&agent.listen_ev, &agent.listen_ev_on);
    for (int i = 0; i < agent.nsocks; ++i) {
        unwatch(&agent.socks[i].ev, &agent.socks[i].ev_on);
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
    opal_btl_usnic_ctable_fini(&agent.checks);
    opal_btl_usnic_cpeers_fini(&agent.peers);
    free(agent.vpids_read);
    agent.vpids_read = NULL;
    agent.vpids_bits = 0;
    sodium_memzero(agent.key, sizeof(agent.key));
    agent.key_ready = false;
    free(agent.modex_key);
    agent.modex_key = NULL;
    agent.running = false;
}
