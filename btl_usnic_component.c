/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Component: open/close, discovery (each wire offers its devices), module
 * creation, the modex, and the single progress function.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <errno.h>
#include <libgen.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "btl_usnic_compat.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/installdirs/installdirs.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_help.h"

static int usnic_component_open(void);
static int usnic_component_close(void);
static int usnic_component_register(void);
static mca_btl_base_module_t **usnic_component_init(int *num_btls, bool enable_progress_threads,
                                                    bool enable_mpi_threads);
static int usnic_component_progress(void);
static void thread_usage(uint64_t *cpu, uint64_t *preempted);

/* What Open MPI loads; the rest of the component's state is
 * opal_btl_usnic_globals (btl_usnic.h) */
OPAL_MODULE_DECLSPEC extern mca_btl_base_component_3_0_0_t mca_btl_usnic_component;
mca_btl_base_component_3_0_0_t mca_btl_usnic_component = {
    .btl_version = {
        MCA_BTL_DEFAULT_VERSION("usnic"),
        .mca_open_component = usnic_component_open,
        .mca_close_component = usnic_component_close,
        .mca_register_component_params = usnic_component_register,
    },
    .btl_data = {.param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT},
    .btl_init = usnic_component_init,
    .btl_progress = usnic_component_progress,
};

/* Where our help file is: next to the plugin (make install-user puts it
 * in ~/.openmpi/components), else in Open MPI's data directory.  Our own
 * renderer looks there in that order (btl_usnic_help.c).  show_help is
 * used (opal_btl_usnic_help_via_runtime) on Open MPI 5.0 only, and only
 * if what it finds first, in the data directory, is our text.  Not on
 * 4.1: its mpirun corrupts help messages from processes on its own node
 * (orte_rml_oob_send_buffer_nb's send to self, called from the PMIx
 * server thread by pmix_server_log_fn, copies the buffer after queuing
 * the callback that frees it on the event thread): "ORTE_ERROR_LOG: Data
 * unpack would read past end of buffer" in orte/util/show_help.c and the
 * message lost (issue 29).  Not on 6.0 either: its show_help reads only
 * text compiled into the library. */
static void add_help_dirs(void)
{
    char *ours = NULL;
    Dl_info info;
    if (0 != dladdr((void *) &mca_btl_usnic_component, &info) && NULL != info.dli_fname) {
        char *copy = strdup(info.dli_fname);
        if (NULL != copy) {
            const char *dir = dirname(copy);
            opal_btl_usnic_help_add_dir(dir);
            opal_show_help_add_dir(dir);
            if (asprintf(&ours, "%s/%s", dir, OPAL_BTL_USNIC_HELP_FILE) < 0) {
                ours = NULL;
            }
            free(copy);
        }
    }
    opal_btl_usnic_help_add_dir(opal_install_dirs.opaldatadir);
#if OPAL_MAJOR_VERSION == 5
    char *first = NULL;
    if (asprintf(&first, "%s/%s", opal_install_dirs.opaldatadir, OPAL_BTL_USNIC_HELP_FILE) >= 0) {
        opal_btl_usnic_help_via_runtime = NULL == ours || opal_btl_usnic_help_same_text(first, ours);
        free(first);
    }
#endif
    free(ours);
}

static int usnic_component_register(void)
{
    opal_btl_usnic_globals.version = &mca_btl_usnic_component.btl_version;
    add_help_dirs();
    return opal_btl_usnic_component_register_params(&opal_btl_usnic_module_template);
}

static int usnic_component_open(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    OBJ_CONSTRUCT(&c->lock, opal_recursive_mutex_t);
    c->num_modules = 0;
    c->modules = NULL;
    c->fastpath_ok = true;
    uint64_t cpu, preempted;
    thread_usage(&cpu, &preempted);
    opal_btl_usnic_share_init(&c->share, opal_btl_usnic_clock_usec(), cpu, preempted);
    c->stats_event_active = false;
    c->output = opal_output_open(NULL);
    opal_output_set_verbosity(c->output, c->verbose);
    return OPAL_SUCCESS;
}

static int usnic_component_close(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
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
    sodium_memzero(&c->job_secret, sizeof(c->job_secret));
    sodium_memzero(c->agent_key, sizeof(c->agent_key));
    opal_output_close(c->output);
    OBJ_DESTRUCT(&c->lock);
    opal_btl_usnic_help_clear_dirs();
    return OPAL_SUCCESS;
}

/* ----- discovery ----- */

/* What discovery saw, so that the message when no module comes of it
 * can say why (report_no_device) */
static struct {
    int offered;          /* devices the wires offered */
    int wanted;           /* ... that passed the interface filters */
    uint32_t matched[2];  /* entries of if_include, if_exclude that matched an offered device */
    char sock_why[192];   /* why the socket wire cannot run here (auto) */
    char ofi_why[192];    /* why the ofi wire could not load libfabric */
    char ofi_none[64];    /* providers the ofi wire found no device of */
} seen;

static bool is_set(const char *s)
{
    return NULL != s && '\0' != s[0];
}

/* Is |dev| an interface we want?  Reports why not at verbosity 10. */
static bool device_wanted(const opal_btl_usnic_device_t *dev)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    const char *lists[2] = {c->if_include, c->if_exclude};
    for (int k = 0; k < 2; ++k) {
        if (is_set(lists[k])) {
            seen.matched[k] |= opal_btl_usnic_if_list_match_mask(lists[k], dev->if_name, dev->domain_name, dev->ipv4);
        }
    }
    bool keep;
    if (is_set(c->if_include)) {
        keep = opal_btl_usnic_if_list_matches(c->if_include, dev->if_name, dev->domain_name, dev->ipv4, NULL);
    } else {
        keep = !opal_btl_usnic_is_loopback(dev->ipv4);
        if (keep && is_set(c->if_exclude)) {
            keep = !opal_btl_usnic_if_list_matches(c->if_exclude, dev->if_name, dev->domain_name, dev->ipv4, NULL);
        }
    }
    opal_btl_usnic_verbose(10, "interface %s (%s, provider %s) %s", dev->if_name, dev->domain_name, dev->provider,
                           keep ? "kept" : "skipped");
    return keep;
}

static bool already_have(const char *ifname)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    for (int i = 0; i < c->num_modules; ++i) {
        if (0 == strcmp(c->modules[i]->if_name, ifname)) {
            return true;
        }
    }
    return false;
}

static opal_btl_usnic_module_t *module_new(const opal_btl_usnic_device_t *dev)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) calloc(1, sizeof(*module));
    if (NULL == module) {
        return NULL;
    }
    memcpy(&module->super, &opal_btl_usnic_module_template, sizeof(module->super));
    module->super.btl_component = &mca_btl_usnic_component;
    module->if_name = strdup(dev->if_name);
    module->domain_name = strdup(dev->domain_name);
    module->provider = strdup(dev->provider);
    module->ipv4 = dev->ipv4;
    /* netmask and link speed: the wire's open */
    return module;
}

/* Create modules on every wanted device of one wire's list. */
static void create_modules(const opal_btl_usnic_transport_t *wire, const opal_btl_usnic_device_list_t *list)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    for (int i = 0; i < list->count; ++i) {
        const opal_btl_usnic_device_t *dev = &list->devices[i];
        if (c->max_btls > 0 && c->num_modules >= c->max_btls) {
            break;
        }
        if (!device_wanted(dev) || already_have(dev->if_name)) {
            continue;
        }
        ++seen.wanted;
        opal_btl_usnic_module_t *module = module_new(dev);
        if (NULL == module) {
            continue;
        }
        if (OPAL_SUCCESS != opal_btl_usnic_module_init(module, wire, dev)) {
            module->super.btl_finalize(&module->super);
            free(module);
            continue;
        }
        snprintf(module->local_modex.if_name, sizeof(module->local_modex.if_name), "%.15s", module->if_name);
        c->modules[c->num_modules++] = module;
        opal_btl_usnic_verbose(5, "rank %u: module on %s (%s, provider %s, %s wire): mtu %zu, tiny %zu, window %u, "
                               "ports %u/%u, job 0x%x",
                               (unsigned) OPAL_PROC_MY_NAME.vpid, module->if_name, dev->domain_name,
                               module->provider, wire->name,
                               module->caps.max_datagram[OPAL_BTL_USNIC_DATA_CHANNEL],
                               module->caps.max_datagram[OPAL_BTL_USNIC_PRIORITY_CHANNEL], module->local_modex.window,
                               module->caps.port[0], module->caps.port[1], (unsigned) OPAL_PROC_MY_NAME.jobid);
    }
}

/* Can the socket wire run on some device of |list| (a kernel UDP socket
 * on its address)?  Says why not at verbosity 5. */
static bool sockets_usable(const opal_btl_usnic_device_list_t *list)
{
    char *why = seen.sock_why;
    snprintf(why, sizeof(seen.sock_why), "no interface");
    for (int i = 0; i < list->count; ++i) {
        if (opal_btl_usnic_wire_sock_usable(list->devices[i].ipv4, why, sizeof(seen.sock_why))) {
            why[0] = '\0';
            return true;
        }
    }
    opal_btl_usnic_verbose(5, "the socket wire cannot run (%s): the ofi wire", why);
    return false;
}

/* The devices of |provider| on the wire btl_usnic_wire asks for
 * (opal_btl_usnic_wire_choose).  |*wire| says which wire found them. */
static int devices_of(const char *provider, const opal_btl_usnic_transport_t **wire,
                      opal_btl_usnic_device_list_t *list, char *why, size_t len)
{
    int kind = opal_btl_usnic_wire_choose(opal_btl_usnic_globals.wire, provider);
    if (OPAL_BTL_USNIC_WIRE_OFI != kind) {
        *wire = &opal_btl_usnic_wire_sock;
        int rc = (*wire)->discover("udp", list, why, len);
        if (OPAL_SUCCESS != rc || OPAL_BTL_USNIC_WIRE_SOCKET == kind || sockets_usable(list)) {
            return rc;
        }
        (*wire)->release(list);
    }
    *wire = &opal_btl_usnic_wire_ofi;
    int rc = (*wire)->discover(provider, list, why, len);
    if (OPAL_SUCCESS != rc) {
        snprintf(seen.ofi_why, sizeof(seen.ofi_why), "%s", why);
    } else if (0 == list->count) {
        size_t used = strlen(seen.ofi_none);
        snprintf(seen.ofi_none + used, sizeof(seen.ofi_none) - used, "%s%s", 0 == used ? "" : ",", provider);
    }
    return rc;
}

/* Try the providers in order; the first that yields a module wins. */
static void discover(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    char *copy = strdup(c->provider_include);
    char *save = NULL;
    bool sockets_tried = false;
    for (char *prov = strtok_r(copy, ", ", &save); NULL != prov && 0 == c->num_modules;
         prov = strtok_r(NULL, ", ", &save)) {
        const opal_btl_usnic_transport_t *wire;
        opal_btl_usnic_device_list_t list;
        char why[256] = "";
        /* btl_usnic_wire socket offers the same interfaces for every
         * provider: one try (and one message per interface that fails) */
        if (OPAL_BTL_USNIC_WIRE_SOCKET == opal_btl_usnic_wire_choose(c->wire, prov)) {
            if (sockets_tried) {
                continue;
            }
            sockets_tried = true;
        }
        if (OPAL_SUCCESS != devices_of(prov, &wire, &list, why, sizeof(why))) {
            opal_btl_usnic_verbose(1, "provider %s (%s wire): no devices: %s", prov, wire->name, why);
            continue;
        }
        seen.offered += list.count;
        c->modules = (opal_btl_usnic_module_t **) calloc(list.count > 0 ? (size_t) list.count : 1, sizeof(*c->modules));
        if (NULL != c->modules) {
            create_modules(wire, &list);
        }
        if (0 == c->num_modules) {
            free(c->modules);
            c->modules = NULL;
        }
        wire->release(&list);
    }
    free(copy);
}

/* ----- saying why ----- */

#define MAX_HOST_IFS 64

/* "lo 127.0.0.1/8, eth0 192.0.2.2/24": the interfaces found, for messages */
static int host_interfaces(opal_btl_usnic_host_if_t *ifs, char *buf, size_t len)
{
    int n = opal_btl_usnic_if_host_list(ifs, MAX_HOST_IFS);
    opal_btl_usnic_if_describe(ifs, n, buf, len);
    return n;
}

/* Entries of btl_usnic_if_include / _exclude that are invalid, or that
 * match no interface of this host and no device a wire offered: named,
 * as btl/tcp names its own; the job goes on with what did match */
static void report_filters(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    const char *names[2] = {"btl_usnic_if_include", "btl_usnic_if_exclude"};
    const char *lists[2] = {c->if_include, c->if_exclude};
    opal_btl_usnic_host_if_t ifs[MAX_HOST_IFS];
    char found[512];
    int n = host_interfaces(ifs, found, sizeof(found));
    for (int k = 0; k < 2; ++k) {
        if (!is_set(lists[k])) {
            continue;
        }
        char *bad = NULL;
        (void) opal_btl_usnic_if_list_matches(lists[k], NULL, NULL, 0, &bad);
        if (NULL != bad) {
            opal_btl_usnic_show_help(true, "invalid if_inexclude", opal_process_info.nodename, bad);
            free(bad);
        }
        uint32_t matched = seen.matched[k];
        for (int i = 0; i < n; ++i) {
            matched |= opal_btl_usnic_if_list_match_mask(lists[k], ifs[i].name, NULL, ifs[i].ipv4);
        }
        char unmatched[256];
        opal_btl_usnic_if_list_unmatched(lists[k], matched, unmatched, sizeof(unmatched));
        if ('\0' != unmatched[0]) {
            opal_btl_usnic_show_help(true, "if_inexclude unmatched", opal_process_info.nodename, names[k], unmatched,
                                     found);
        }
    }
}

/* Append printf-style text to |buf|, after "; " unless it is empty */
static void why_add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_add(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 2 >= len) {
        return;
    }
    if (used > 0) {
        strcpy(buf + used, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/* The providers of the comma list |provs| that FI_PROVIDER=|env| hides,
 * comma-separated into |buf| (empty if none) */
static void hidden_providers(const char *env, const char *provs, char *buf, size_t len)
{
    buf[0] = '\0';
    char *copy = strdup(provs);
    char *save = NULL;
    for (char *p = NULL != copy ? strtok_r(copy, ",", &save) : NULL; NULL != p; p = strtok_r(NULL, ",", &save)) {
        size_t used = strlen(buf);
        if (opal_btl_usnic_fi_provider_hides(env, p) && used < len) {
            snprintf(buf + used, len - used, "%s%s", 0 == used ? "" : ",", p);
        }
    }
    free(copy);
}

/* Why the wires offered no device: the socket wire's socket, libfabric,
 * and the providers libfabric did not offer (FI_PROVIDER's part in it) */
static void why_no_offer(char *why, size_t len)
{
    if ('\0' != seen.sock_why[0]) {
        why_add(why, len, "the socket wire cannot open a socket: %s", seen.sock_why);
    }
    if ('\0' != seen.ofi_why[0]) {
        why_add(why, len, "the ofi wire cannot load libfabric: %s", seen.ofi_why);
    }
    if ('\0' != seen.ofi_none[0]) {
        const char *env = getenv("FI_PROVIDER");
        char hidden[64];
        hidden_providers(env, seen.ofi_none, hidden, sizeof(hidden));
        why_add(why, len, "libfabric offers no device of provider %s", seen.ofi_none);
        if ('\0' != hidden[0]) {
            why_add(why, len,
                    "FI_PROVIDER=%s in the environment hides %s: unset FI_PROVIDER for this job or let the "
                    "provider through (e.g. FI_PROVIDER=%s,udp)",
                    env, hidden, env);
        }
    }
    if ('\0' == why[0]) {
        why_add(why, len, "no IPv4 interface is up");
    }
}

/* Why discovery ended with no module, in terms a user can act on */
static void no_device_why(char *why, size_t len)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    why[0] = '\0';
    if (seen.wanted > 0) {
        why_add(why, len, "no interface it chose could be opened: %s",
                '\0' != c->open_why[0] ? c->open_why : "see the messages above");
    } else if (seen.offered > 0 && is_set(c->if_include)) {
        why_add(why, len, "no interface matched btl_usnic_if_include \"%s\"", c->if_include);
    } else if (seen.offered > 0) {
        why_add(why, len, "every interface was left out: loopback unless btl_usnic_if_include names it%s%s%s",
                is_set(c->if_exclude) ? ", the others by btl_usnic_if_exclude \"" : "",
                is_set(c->if_exclude) ? c->if_exclude : "", is_set(c->if_exclude) ? "\"" : "");
    } else {
        why_no_offer(why, len);
    }
}

static const char *wire_param_name(int wire)
{
    return OPAL_BTL_USNIC_WIRE_SOCKET == wire ? "socket" : OPAL_BTL_USNIC_WIRE_OFI == wire ? "ofi" : "auto";
}

/* Does the btl parameter name usnic (not "^usnic,...", not unset)? */
static bool usnic_asked_for(void)
{
    const char **value = NULL;
    int index = mca_base_var_find("opal", "btl", NULL, NULL);
    if (index < 0 || OPAL_SUCCESS != mca_base_var_get_value(index, &value, NULL, NULL) || NULL == value ||
        NULL == value[0] || '^' == value[0][0]) {
        return false;
    }
    return opal_btl_usnic_if_list_match_mask(value[0], "usnic", NULL, 0) != 0;
}

/* One message per host when the component has no module: always when
 * the btl list names usnic; else (the default list) unless
 * btl_base_warn_component_unused is 0, Open MPI's switch for BTLs that
 * find nothing to use (Debian's openmpi-mca-params.conf sets it to 0) */
static void report_no_device(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (!usnic_asked_for() && 0 == mca_btl_base_warn_component_unused) {
        opal_btl_usnic_verbose(5, "no usable interface; not said (usnic not named, btl_base_warn_component_unused 0)");
        return;
    }
    char why[768], found[512];
    opal_btl_usnic_host_if_t ifs[MAX_HOST_IFS];
    no_device_why(why, sizeof(why));
    (void) host_interfaces(ifs, found, sizeof(found));
    opal_btl_usnic_show_help(true, "no usable device", opal_process_info.nodename, wire_param_name(c->wire),
                             c->provider_include, why, found);
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
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
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
    OPAL_MODEX_SEND(rc, OPAL_BTL_USNIC_PMIX_GLOBAL, c->version, all, size);
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
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
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
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    if (c->stats <= 0) {
        return;
    }
    opal_event_set(opal_sync_event_base, &c->stats_event, -1, 0, stats_timer_cb, NULL);
    struct timeval tv = {.tv_sec = c->stats, .tv_usec = 0};
    opal_event_add(&c->stats_event, &tv);
    c->stats_event_active = true;
}

/* The per-job secret the launcher puts into every process's environment
 * (btl_usnic_auth.c, "The launcher's secret"): mixed into every pair's
 * keys where both ends hold it */
#define JOB_SECRET_ENV "OMPI_MCA_orte_precondition_transports"
static void job_secret_read(opal_btl_usnic_component_t *c)
{
    opal_btl_usnic_job_secret_parse(getenv(JOB_SECRET_ENV), &c->job_secret);
    static const char *const said[] = {
        [OPAL_BTL_USNIC_SECRET_NONE] = "none (" JOB_SECRET_ENV " unset): pair keys from X25519 alone",
        [OPAL_BTL_USNIC_SECRET_WEAK] = "none (" JOB_SECRET_ENV " is made of job ids): pair keys from X25519 alone",
        [OPAL_BTL_USNIC_SECRET_GOOD] = JOB_SECRET_ENV ", mixed into the keys of pairs that share it",
    };
    opal_btl_usnic_verbose(5, "launcher's secret: %s", said[c->job_secret.kind]);
}

/* libsodium and the kernel's randomness: without them no key can be
 * made, and the BTL steps aside (saying why) rather than run unprotected */
static bool auth_start(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    c->mac_algs = opal_btl_usnic_auth_init();
    if (0 == c->mac_algs) {
        opal_btl_usnic_show_help(true, "no crypto", opal_process_info.nodename, sodium_version_string());
        return false;
    }
    if (0 != opal_btl_usnic_random(c->agent_key, sizeof(c->agent_key))) {
        opal_btl_usnic_show_help(true, "no randomness", opal_process_info.nodename, "(all)", strerror(errno));
        return false;
    }
    job_secret_read(c);
    opal_btl_usnic_verbose(5, "datagram protection %s, tags by %s", c->protection_name,
                           (c->mac_algs & OPAL_BTL_USNIC_MAC_AESGCM) ? "AES-256-GCM (or ChaCha20-Poly1305 with "
                                                                       "peers without AES-NI)"
                                                                     : "ChaCha20-Poly1305 (no AES-NI here)");
    return true;
}

static mca_btl_base_module_t **usnic_component_init(int *num_btls, bool enable_progress_threads,
                                                    bool enable_mpi_threads)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
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
    memset(&seen, 0, sizeof(seen));
    c->open_why[0] = '\0';
    discover();
    report_filters();
    if (0 == c->num_modules) {
        opal_btl_usnic_verbose(5, "no usable interface: disqualifying myself");
        report_no_device();
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

/* This thread's CPU time (us) and involuntary context switches (0 and 0
 * if the kernel will not say: never "shared") */
static void thread_usage(uint64_t *cpu, uint64_t *preempted)
{
    struct rusage ru;
    if (0 != getrusage(RUSAGE_THREAD, &ru)) {
        *cpu = *preempted = 0;
        return;
    }
    *cpu = (uint64_t) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + (uint64_t) ru.ru_utime.tv_usec +
           (uint64_t) ru.ru_stime.tv_usec;
    *preempted = (uint64_t) ru.ru_nivcsw;
}

/* Does this process share its core (btl_usnic_share.c)?  Under the lock;
 * one getrusage per interval */
static bool core_shared(opal_btl_usnic_component_t *c, uint64_t now)
{
    if (!opal_btl_usnic_share_due(&c->share, now)) {
        return c->share.shared;
    }
    uint64_t cpu, preempted;
    thread_usage(&cpu, &preempted);
    return opal_btl_usnic_share_sample(&c->share, now, cpu, preempted);
}

static int usnic_component_progress(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
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
    /* idle on a core others use: let them run (btl_usnic_share.c) */
    bool give_up_core = 0 == count && c->yield_when_busy && c->num_modules > 0 && core_shared(c, now);
    if (give_up_core) {
        OPAL_BTL_USNIC_STAT_INC(&c->modules[0]->eng, num_busy_yields);
    }
    OPAL_BTL_USNIC_UNLOCK();
    if (give_up_core) {
        (void) sched_yield();
    }
    return count;
}
