/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Component: open/close, interface discovery with fi_getinfo, module
 * creation, the modex, and the single progress function.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "btl_usnic_compat.h"
#include "opal/mca/installdirs/installdirs.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_help.h"

#define OPAL_BTL_USNIC_FI_VERSION FI_VERSION(1, 5)

static int usnic_component_open(void);
static int usnic_component_close(void);
static int usnic_component_register(void);
static mca_btl_base_module_t **usnic_component_init(int *num_btls, bool enable_progress_threads,
                                                    bool enable_mpi_threads);
static int usnic_component_progress(void);

opal_btl_usnic_component_t mca_btl_usnic_component = {
    .super = {
        .btl_version = {
            MCA_BTL_DEFAULT_VERSION("usnic"),
            .mca_open_component = usnic_component_open,
            .mca_close_component = usnic_component_close,
            .mca_register_component_params = usnic_component_register,
        },
        .btl_data = {.param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT},
        .btl_init = usnic_component_init,
        .btl_progress = usnic_component_progress,
    },
};

/* Where our help file is: next to the plugin (make install-user puts it
 * in ~/.openmpi/components), else in Open MPI's data directory.  Our own
 * renderer looks there (btl_usnic_help.c); so does show_help, the
 * fallback. */
static void add_help_dirs(void)
{
    Dl_info info;
    if (0 != dladdr((void *) &mca_btl_usnic_component, &info) && NULL != info.dli_fname) {
        char *copy = strdup(info.dli_fname);
        if (NULL != copy) {
            const char *dir = dirname(copy);
            opal_btl_usnic_help_add_dir(dir);
            opal_show_help_add_dir(dir);
            free(copy);
        }
    }
    opal_btl_usnic_help_add_dir(opal_install_dirs.opaldatadir);
}

static int usnic_component_register(void)
{
    add_help_dirs();
    return opal_btl_usnic_component_register_params();
}

static int usnic_component_open(void)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    OBJ_CONSTRUCT(&c->lock, opal_recursive_mutex_t);
    c->num_modules = 0;
    c->modules = NULL;
    c->fastpath_ok = true;
    c->stats_event_active = false;
    c->output = opal_output_open(NULL);
    opal_output_set_verbosity(c->output, c->verbose);
    return OPAL_SUCCESS;
}

static int usnic_component_close(void)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    opal_btl_usnic_away_stop(); /* normally stopped by the first module's finalize */
    if (c->stats_event_active) {
        opal_event_del(&c->stats_event);
        c->stats_event_active = false;
    }
    for (int i = 0; i < c->num_modules; ++i) {
        free(c->modules[i]);
    }
    if (NULL != c->map_file) {
        fclose(c->map_file);
        c->map_file = NULL;
    }
    /* connectivity checker: the client's connection first, then the agent */
    opal_btl_usnic_cclient_fini();
    opal_btl_usnic_cagent_fini();
    free(c->modules);
    c->modules = NULL;
    c->num_modules = 0;
    opal_output_close(c->output);
    OBJ_DESTRUCT(&c->lock);
    opal_btl_usnic_help_clear_dirs();
    return OPAL_SUCCESS;
}

/* ----- discovery ----- */

static struct fi_info *getinfo_caps(const char *provider, uint64_t caps)
{
    struct fi_info *hints = fi_allocinfo();
    struct fi_info *list = NULL;
    if (NULL == hints) {
        return NULL;
    }
    hints->caps = caps;
    hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
    /* we can register every buffer we post (usnic, verbs UD, EFA need it) */
    hints->domain_attr->mr_mode = FI_MR_LOCAL;
    hints->addr_format = FI_SOCKADDR_IN;
    hints->ep_attr->type = FI_EP_DGRAM;
    hints->fabric_attr->prov_name = strdup(provider);
    int rc = fi_getinfo(OPAL_BTL_USNIC_FI_VERSION, NULL, NULL, 0, hints, &list);
    fi_freeinfo(hints);
    if (0 != rc) {
        opal_btl_usnic_verbose(5, "fi_getinfo(provider %s, caps 0x%llx): %s", provider, (unsigned long long) caps,
                               fi_strerror(-rc));
        return NULL;
    }
    return list;
}

/* Interfaces of |provider|; with FI_SOURCE where it can tell each
 * datagram's source (the modules then check it), else without */
static struct fi_info *getinfo_for(const char *provider)
{
    struct fi_info *list = getinfo_caps(provider, FI_MSG | FI_SOURCE);
    if (NULL == list) {
        list = getinfo_caps(provider, FI_MSG);
        if (NULL != list) {
            opal_btl_usnic_verbose(1, "provider %s cannot report datagram sources (FI_SOURCE): senders are "
                                      "authenticated by their tags only", provider);
        }
    }
    return list;
}

static uint32_t info_ipv4(const struct fi_info *info)
{
    return ((const struct sockaddr_in *) info->src_addr)->sin_addr.s_addr;
}

/* Does this fi_info describe an interface we want?  Reports why not at
 * verbosity 10.  |ifname| receives the Linux interface name. */
static bool info_wanted(const struct fi_info *info, char *ifname, size_t len)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    if (NULL == info->src_addr || info->src_addrlen < sizeof(struct sockaddr_in) ||
        AF_INET != ((const struct sockaddr_in *) info->src_addr)->sin_family) {
        return false; /* udp returns IPv6 entries whatever the hints say */
    }
    uint32_t ip = info_ipv4(info);
    const char *domain = info->domain_attr->name;
    if (OPAL_SUCCESS != opal_btl_usnic_ifname_for_ipv4(ip, ifname, len)) {
        snprintf(ifname, len, "%s", NULL != domain ? domain : "?");
    }
    char *bad = NULL;
    bool keep;
    if (NULL != c->if_include && '\0' != c->if_include[0]) {
        keep = opal_btl_usnic_if_list_matches(c->if_include, ifname, domain, ip, &bad);
    } else {
        keep = !opal_btl_usnic_is_loopback(ip);
        if (keep && NULL != c->if_exclude && '\0' != c->if_exclude[0]) {
            keep = !opal_btl_usnic_if_list_matches(c->if_exclude, ifname, domain, ip, &bad);
        }
    }
    if (NULL != bad) {
        opal_btl_usnic_show_help(true, "invalid if_inexclude", opal_process_info.nodename, bad);
        free(bad);
    }
    opal_btl_usnic_verbose(10, "interface %s (%s) %s", ifname, info->fabric_attr->name, keep ? "kept" : "skipped");
    return keep;
}

static bool already_have(const char *ifname)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    for (int i = 0; i < c->num_modules; ++i) {
        if (0 == strcmp(c->modules[i]->if_name, ifname)) {
            return true;
        }
    }
    return false;
}

static opal_btl_usnic_module_t *module_new(const struct fi_info *info, const char *ifname)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) calloc(1, sizeof(*module));
    if (NULL == module) {
        return NULL;
    }
    memcpy(&module->super, &opal_btl_usnic_module_template, sizeof(module->super));
    module->if_name = strdup(ifname);
    module->domain_name = strdup(NULL != info->domain_attr->name ? info->domain_attr->name : ifname);
    module->provider = strdup(info->fabric_attr->prov_name);
    module->ipv4 = info_ipv4(info);
    /* netmask and link speed: opal_btl_usnic_ext_refine, once the fabric is open */
    return module;
}

/* Create modules for every wanted interface of one provider's list. */
static void create_modules(struct fi_info *list)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    for (struct fi_info *info = list; NULL != info; info = info->next) {
        char ifname[64];
        if (c->max_btls > 0 && c->num_modules >= c->max_btls) {
            break;
        }
        if (!info_wanted(info, ifname, sizeof(ifname)) || already_have(ifname)) {
            continue;
        }
        opal_btl_usnic_module_t *module = module_new(info, ifname);
        if (NULL == module) {
            continue;
        }
        if (OPAL_SUCCESS != opal_btl_usnic_module_init(module, info)) {
            module->super.btl_finalize(&module->super);
            free(module);
            continue;
        }
        snprintf(module->local_modex.if_name, sizeof(module->local_modex.if_name), "%.15s", module->if_name);
        c->modules[c->num_modules++] = module;
        opal_btl_usnic_verbose(5, "rank %u: module on %s (%s, provider %s): mtu %zu, tiny %zu, window %u, ports %u/%u, "
                               "job 0x%x",
                               (unsigned) OPAL_PROC_MY_NAME.vpid, module->if_name, info->fabric_attr->name,
                               module->provider,
                               module->caps.max_datagram[OPAL_BTL_USNIC_DATA_CHANNEL],
                               module->caps.max_datagram[OPAL_BTL_USNIC_PRIORITY_CHANNEL], module->local_modex.window,
                               module->caps.port[0], module->caps.port[1], (unsigned) OPAL_PROC_MY_NAME.jobid);
    }
}

static int count_infos(const struct fi_info *list)
{
    int n = 0;
    for (; NULL != list; list = list->next) {
        ++n;
    }
    return n;
}

/* Try the providers in order; the first that yields a module wins. */
static void discover(void)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    char *copy = strdup(c->provider_include);
    char *save = NULL;
    for (char *prov = strtok_r(copy, ", ", &save); NULL != prov && 0 == c->num_modules;
         prov = strtok_r(NULL, ", ", &save)) {
        struct fi_info *list = getinfo_for(prov);
        if (NULL == list) {
            continue;
        }
        c->modules = (opal_btl_usnic_module_t **) calloc(count_infos(list), sizeof(*c->modules));
        if (NULL != c->modules) {
            create_modules(list);
        }
        if (0 == c->num_modules) {
            free(c->modules);
            c->modules = NULL;
        }
        fi_freeinfo(list);
    }
    free(copy);
}

/* btl_usnic_flags may only name what this BTL does: GET, atomics and the
 * like would make the PML call functions we do not have. */
static bool check_flags(void)
{
    const uint32_t supported = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE | MCA_BTL_FLAGS_PUT |
                               MCA_BTL_FLAGS_SINGLE_ADD_PROCS | OPAL_BTL_USNIC_FLAGS_REMOTE_COMPLETION;
    uint32_t flags = opal_btl_usnic_module_template.btl_flags;
    if (!(flags & MCA_BTL_FLAGS_SEND) || (flags & ~supported)) {
        char value[64];
        snprintf(value, sizeof(value), "0x%x", flags);
        opal_btl_usnic_show_help(true, "bad parameter value", opal_process_info.nodename, "flags", value,
                                 OPAL_BTL_USNIC_FLAGS_REMOTE_COMPLETION
                                     ? "send (required), send_inplace, put, single_add_procs, rdma_remote_completion"
                                     : "send (required), send_inplace, put, single_add_procs");
        return false;
    }
    return true;
}

static bool check_base_params(void)
{
    const mca_btl_base_module_t *t = &opal_btl_usnic_module_template;
    const size_t max_frag = 16 * 1024 * 1024;
    if (t->btl_eager_limit < 1024 || t->btl_eager_limit > max_frag || t->btl_max_send_size < 1024 ||
        t->btl_max_send_size > max_frag || t->btl_rndv_eager_limit > t->btl_eager_limit) {
        char value[128];
        snprintf(value, sizeof(value), "eager_limit=%zu rndv_eager_limit=%zu max_send_size=%zu", t->btl_eager_limit,
                 t->btl_rndv_eager_limit, t->btl_max_send_size);
        opal_btl_usnic_show_help(true, "bad parameter value", opal_process_info.nodename,
                                 "eager_limit / rndv_eager_limit / max_send_size", value,
                                 "1 KiB to 16 MiB, with rndv_eager_limit <= eager_limit");
        return false;
    }
    return check_flags();
}

static void modex_send(void)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    size_t size = sizeof(opal_btl_usnic_modex_t) * (size_t) c->num_modules;
    opal_btl_usnic_modex_t *all = (opal_btl_usnic_modex_t *) malloc(size);
    int rc;
    if (NULL == all) {
        return;
    }
    for (int i = 0; i < c->num_modules; ++i) {
        all[i] = c->modules[i]->local_modex;
    }
    /* GLOBAL scope: on-host peers must reach us too (usnic,self jobs) */
    OPAL_MODEX_SEND(rc, OPAL_BTL_USNIC_PMIX_GLOBAL, &c->super.btl_version, all, size);
    if (OPAL_SUCCESS != rc) {
        opal_btl_usnic_verbose(1, "modex send failed: %d", rc);
    }
    free(all);
}

static void stats_timer_cb(int fd, short flags, void *arg)
{
    (void) fd;
    (void) flags;
    (void) arg;
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    OPAL_BTL_USNIC_LOCK();
    for (int i = 0; i < c->num_modules; ++i) {
        opal_btl_usnic_module_print_stats(c->modules[i], "periodic");
    }
    OPAL_BTL_USNIC_UNLOCK();
    struct timeval tv = {.tv_sec = c->stats, .tv_usec = 0};
    opal_event_add(&c->stats_event, &tv);
}

static void stats_timer_start(void)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    if (c->stats <= 0) {
        return;
    }
    opal_event_set(opal_sync_event_base, &c->stats_event, -1, 0, stats_timer_cb, NULL);
    struct timeval tv = {.tv_sec = c->stats, .tv_usec = 0};
    opal_event_add(&c->stats_event, &tv);
    c->stats_event_active = true;
}

/* libsodium and the kernel's randomness: without them no key can be
 * made, and the BTL steps aside (saying why) rather than run unprotected */
static bool auth_start(void)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    c->mac_algs = opal_btl_usnic_auth_init();
    if (0 == c->mac_algs) {
        opal_btl_usnic_show_help(true, "no crypto", opal_process_info.nodename, sodium_version_string());
        return false;
    }
    if (0 != opal_btl_usnic_random(c->agent_key, sizeof(c->agent_key))) {
        opal_btl_usnic_show_help(true, "no randomness", opal_process_info.nodename, "(all)", strerror(errno));
        return false;
    }
    opal_btl_usnic_verbose(5, "datagram protection %s, tags by %s", c->protection_name,
                           (c->mac_algs & OPAL_BTL_USNIC_MAC_AESGCM) ? "AES-256-GCM (or ChaCha20-Poly1305 with "
                                                                       "peers without AES-NI)"
                                                                     : "ChaCha20-Poly1305 (no AES-NI here)");
    return true;
}

static mca_btl_base_module_t **usnic_component_init(int *num_btls, bool enable_progress_threads,
                                                    bool enable_mpi_threads)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    (void) enable_progress_threads;
    (void) enable_mpi_threads;
    *num_btls = 0;
    opal_output_set_verbosity(c->output, c->verbose);
    opal_btl_usnic_report_bad_params();
    if (!c->params_valid || !check_base_params()) {
        opal_btl_usnic_verbose(1, "disqualifying myself: bad parameter values");
        return NULL;
    }
    if (!auth_start()) {
        return NULL;
    }
    discover();
    if (0 == c->num_modules) {
        opal_btl_usnic_verbose(5, "no usable interface: disqualifying myself");
        return NULL;
    }
    opal_btl_usnic_hwloc_prefer_near(); /* far interfaces: higher latency */
    mca_btl_base_module_t **btls = (mca_btl_base_module_t **) malloc(c->num_modules * sizeof(*btls));
    if (NULL == btls) {
        return NULL;
    }
    for (int i = 0; i < c->num_modules; ++i) {
        btls[i] = &c->modules[i]->super;
    }
    (void) opal_btl_usnic_register_pvars();
    /* the agent says why if it cannot start (show_help); pairs stay unchecked */
    if (c->connectivity_check) {
        (void) opal_btl_usnic_cagent_init();
    }
    modex_send(); /* after the agent: it publishes the probe ports */
    stats_timer_start();
    opal_btl_usnic_away_start();
    *num_btls = c->num_modules;
    return btls;
}

/* ----- progress ----- */

static int usnic_component_progress(void)
{
    opal_btl_usnic_component_t *c = &mca_btl_usnic_component;
    int count = 0;
    uint64_t now = opal_btl_usnic_clock_usec();
    OPAL_BTL_USNIC_LOCK();
    c->last_progress_usec = now;
    /* Fast receive path: one tiny receive goes straight to the PML; its
     * bookkeeping waits for the next call, which always takes the full
     * path so other completions are not starved. */
    if (c->fastpath_ok) {
        for (int i = 0; i < c->num_modules; ++i) {
            if (opal_btl_usnic_module_progress_fast(c->modules[i], now)) {
                for (int j = 0; j < i; ++j) {
                    c->modules[j]->prio_found_empty = false; /* stale by the next call */
                }
                c->fastpath_ok = false;
                OPAL_BTL_USNIC_UNLOCK();
                return 1;
            }
        }
    }
    c->fastpath_ok = true;
    for (int i = 0; i < c->num_modules; ++i) {
        count += opal_btl_usnic_module_progress(c->modules[i], now);
    }
    OPAL_BTL_USNIC_UNLOCK();
    return count;
}
