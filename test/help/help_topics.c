/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Renders every topic of help-mpi-btl-usnic.txt through Open MPI's own
 * opal_show_help in every rank (after MPI_Init that is the runtime's:
 * ORTE's or PRRTE's aggregation in mpirun), with dummy arguments of the
 * types the BTL's call sites pass.  Before that it checks, against the file, that
 * every topic has a row here and that each row's argument types are the
 * topic's conversions in order: a topic added, renamed, or given another
 * %s without its row here fails.  run-help-tests.sh checks what mpirun
 * printed.
 *
 *   help_topics [--string] HELPFILE [TOPIC]     (only TOPIC, when given)
 *
 * HELPFILE is a copy of the file under a name of its own: an installed
 * help-mpi-btl-usnic.txt in Open MPI's data directory, which show_help
 * searches first, must not stand in for the one tested.
 */
#include "opal_config.h"

#include <mpi.h>

#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/util/show_help.h"

/* show_help looks the topics up in this file (basename of HELPFILE) */
static const char *HELP_FILE = NULL;

/* One topic: the conversions it takes ('s' string, 'd' int, 'u'
 * unsigned, 'x' hex unsigned, 'z' size_t) and a call with arguments of
 * those types */
typedef struct {
    const char *topic;
    const char *sig;
    void (*show)(const char *topic);
} topic_row_t;

/* --string: render with opal_show_help_string (Open MPI's renderer) in
 * rank 0 and print the text, instead of opal_show_help in every rank
 * (Open MPI 4.1's mpirun corrupts help messages of processes on its own
 * node: README.txt, "Help messages") */
static bool as_string = false;
#define SHOW(t, ...)                                                                 \
    do {                                                                             \
        if (as_string) {                                                             \
            char *text_ = opal_show_help_string(HELP_FILE, (t), true, __VA_ARGS__);  \
            if (NULL != text_) {                                                     \
                fputs(text_, stdout);                                                \
                free(text_);                                                         \
            }                                                                        \
        } else {                                                                     \
            (void) opal_show_help(HELP_FILE, (t), true, __VA_ARGS__);                \
        }                                                                            \
    } while (0)

#define H "host-1"
#define IF "eth9"
static void bad_param(const char *t) { SHOW(t, H, "window", "99999", "1 to 4096"); }
static void inexclude(const char *t) { SHOW(t, H, "10.0.0.0/99"); }
static void if_unmatched(const char *t)
{
    SHOW(t, H, "btl_usnic_if_include", "eth7", "lo 127.0.0.1/8, eth0 192.0.2.2/24");
}
static void no_device(const char *t)
{
    SHOW(t, H, "socket", "usnic,udp", "no interface matched", "lo 127.0.0.1/8");
}
static void fi_failed(const char *t)
{
    SHOW(t, H, IF, "fi_endpoint", "btl_usnic_wire_ofi.c", 123, -22, "Invalid argument");
}
static void sock_failed(const char *t) { SHOW(t, H, IF, "bind", "Address in use"); }
static void mtu_small(const char *t)
{
    SHOW(t, H, IF, "udp", (size_t) 100, (size_t) 64, 1500, (size_t) 256);
}
static void cq_overrun(const char *t) { SHOW(t, H, IF, "data", (size_t) 4096, 64, 128); }
static void peer_ip(const char *t) { SHOW(t, H, IF, "host-2", "192.0.2.3"); }
static void peer_unreach(const char *t) { SHOW(t, H, IF, "host-2", "3", "EHOSTUNREACH"); }
static void modex(const char *t) { SHOW(t, H, "host-2", 7, 6); }
static void peer_timeout(const char *t)
{
    SHOW(t, H, IF, "host-2", "3", 30, 17u, "12.5 s ago");
}
static void conn_failed(const char *t)
{
    SHOW(t, H, IF, "192.0.2.2", "host-2", "eth3", "192.0.2.3", "9000 bytes", 4u, 2000u,
                   500, 3, "abort");
}
static void agent_failed(const char *t) { SHOW(t, H, "bind", "/tmp/x/agent", "EACCES"); }
static void protection(const char *t)
{
    SHOW(t, H, IF, "full", 3u, "host-2", "eth3", "none", 0u);
}
static void no_random(const char *t) { SHOW(t, H, "(all)", "ENOSYS"); }
static void no_crypto(const char *t) { SHOW(t, H, "1.0.18"); }
static void nonces(const char *t) { SHOW(t, H, IF, "host-2", "3", "1099511627776"); }
static void bad_key(const char *t) { SHOW(t, H, IF, "host-2", "eth3"); }

static const topic_row_t rows[] = {
    {"bad parameter value", "ssss", bad_param},
    {"invalid if_inexclude", "ss", inexclude},
    {"if_inexclude unmatched", "ssss", if_unmatched},
    {"no usable device", "sssss", no_device},
    {"libfabric API failed", "ssssdds", fi_failed},
    {"socket wire failed", "ssss", sock_failed},
    {"mtu too small", "ssszzdz", mtu_small},
    {"cq overrun", "ssszdd", cq_overrun},
    {"unreachable peer IP", "ssss", peer_ip},
    {"peer unreachable", "sssss", peer_unreach},
    {"modex mismatch", "ssdd", modex},
    {"peer timeout", "ssssdus", peer_timeout},
    {"connectivity check failed", "sssssssuudds", conn_failed},
    {"connectivity agent failed", "ssss", agent_failed},
    {"protection mismatch", "sssxsssx", protection},
    {"no randomness", "sss", no_random},
    {"no crypto", "ss", no_crypto},
    {"nonces used up", "sssss", nonces},
    {"bad peer key", "ssss", bad_key},
};
#define NUM_ROWS (sizeof(rows) / sizeof(rows[0]))

static const topic_row_t *row_of(const char *topic)
{
    for (size_t i = 0; i < NUM_ROWS; ++i) {
        if (0 == strcmp(rows[i].topic, topic)) {
            return &rows[i];
        }
    }
    return NULL;
}

/* Append the conversions of |line| to |sig| ("%%" is none; %zu is 'z') */
static void add_conversions(const char *line, char *sig, size_t cap)
{
    for (const char *p = strchr(line, '%'); NULL != p; p = strchr(p + 1, '%')) {
        size_t n = strlen(sig);
        char c = p[1];
        if ('%' == c) {
            ++p;
            continue;
        }
        if (n + 1 < cap) {
            sig[n] = ('z' == c) ? 'z' : c;
            sig[n + 1] = '\0';
        }
    }
}

/* Check one topic's conversions against its row; 0 if they agree */
static int check_topic(const char *topic, const char *sig)
{
    const topic_row_t *row = row_of(topic);
    if (NULL == row) {
        printf("FAIL topic [%s] has no row in help_topics.c\n", topic);
        return 1;
    }
    if (0 != strcmp(row->sig, sig)) {
        printf("FAIL topic [%s] takes \"%s\" in the file, \"%s\" in help_topics.c\n", topic, sig, row->sig);
        return 1;
    }
    return 0;
}

/* Every topic of the file has a row with its conversions, and every row a
 * topic; returns the number of disagreements */
static int check_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        printf("FAIL cannot open %s\n", path);
        return 1;
    }
    char line[1024], topic[128] = "", sig[64] = "";
    int bad = 0;
    size_t seen = 0;
    while (NULL != fgets(line, sizeof(line), f)) {
        if ('#' == line[0]) {
            continue;
        }
        if ('[' == line[0]) {
            if ('\0' != topic[0]) {
                bad += check_topic(topic, sig);
                ++seen;
            }
            snprintf(topic, sizeof(topic), "%.*s", (int) strcspn(line + 1, "]"), line + 1);
            sig[0] = '\0';
            continue;
        }
        add_conversions(line, sig, sizeof(sig));
    }
    if ('\0' != topic[0]) {
        bad += check_topic(topic, sig);
        ++seen;
    }
    fclose(f);
    if (seen != NUM_ROWS) {
        printf("FAIL %zu topics in %s, %zu rows in help_topics.c\n", seen, path, NUM_ROWS);
        ++bad;
    }
    return bad;
}

int main(int argc, char **argv)
{
    int rank = 0;
    MPI_Init(&argc, &argv);
    if (argc > 1 && 0 == strcmp(argv[1], "--string")) {
        as_string = true;
        --argc;
        ++argv;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: help_topics [--string] HELPFILE [TOPIC]\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int bad = 0;
    char *dir = strdup(argv[1]), *base = strdup(argv[1]);
    opal_show_help_add_dir(dirname(dir)); /* as the BTL does for its own file */
    HELP_FILE = basename(base);
    if (0 == rank) {
        bad = check_file(argv[1]);
        printf("topics checked: %zu rows, %d disagreements\n", NUM_ROWS, bad);
        fflush(stdout);
    }
    /* a topic whose conversions disagree with its row would read
     * arguments it was not given: nothing is rendered then */
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* every rank shows every topic: mpirun prints each once and counts
     * the others ("N more processes have sent help message") */
    for (size_t i = 0; i < NUM_ROWS && 0 == bad && (!as_string || 0 == rank); ++i) {
        if (argc < 3 || 0 == strcmp(argv[2], rows[i].topic)) {
            rows[i].show(rows[i].topic);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(dir);
    free(base);
    MPI_Finalize();
    return 0 == bad ? 0 : 1;
}
