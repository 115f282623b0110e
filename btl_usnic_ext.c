/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Interface facts from libfabric's usnic extension, with the module's
 * fallbacks (btl_usnic_ext.h).  Where rdma/fi_ext_usnic.h is missing
 * (Debian's libfabric) the query says "not available" and the fallbacks
 * are all there is; test/unit/test_ext.c compiles this file against a
 * stand-in header to test the extension path anyway.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic.h"
#include "btl_usnic_ext.h"

#if OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC
#    include <net/if.h>
#    include <rdma/fi_ext_usnic.h>
#endif

/* We read the v1 member of the reply, so we ask for version 1 by number
 * (fi_usnic(7): request a version explicitly rather than the header's
 * FI_EXT_USNIC_INFO_VERSION).  Version 2 starts with the same fields. */
#define OPAL_BTL_USNIC_EXT_GETINFO_VERSION 1

const char *opal_btl_usnic_fact_source_name(opal_btl_usnic_fact_source_t src)
{
    switch (src) {
    case OPAL_BTL_USNIC_FACT_EXTENSION:
        return "usnic extension";
    case OPAL_BTL_USNIC_FACT_FABRIC_NAME:
        return "fabric name";
    case OPAL_BTL_USNIC_FACT_SYSFS:
        return "sysfs";
    case OPAL_BTL_USNIC_FACT_ADDRESS_MATCH:
        return "address match";
    case OPAL_BTL_USNIC_FACT_DEFAULT:
        return "default";
    case OPAL_BTL_USNIC_FACT_NONE:
        break;
    }
    return "none";
}

int opal_btl_usnic_ext_query(struct fid_fabric *fabric, opal_btl_usnic_if_facts_t *out)
{
#if OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC
    /* fi_open_ops calls fid.ops->ops_open unchecked in libfabric 1.x */
    if (NULL == fabric || NULL == out || NULL == fabric->fid.ops ||
        fabric->fid.ops->size < offsetof(struct fi_ops, ops_open) + sizeof(fabric->fid.ops->ops_open) ||
        NULL == fabric->fid.ops->ops_open) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    struct fi_usnic_ops_fabric *ops = NULL;
    int rc = fi_open_ops(&fabric->fid, FI_USNIC_FABRIC_OPS_1, 0, (void **) &ops, NULL);
    if (0 != rc || NULL == ops ||
        ops->size < offsetof(struct fi_usnic_ops_fabric, getinfo) + sizeof(ops->getinfo) || NULL == ops->getinfo) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    struct fi_usnic_info info;
    memset(&info, 0, sizeof(info));
    /* ui_version is not checked: libfabric 1.1.1 and older leave it 0 */
    if (0 != ops->getinfo(OPAL_BTL_USNIC_EXT_GETINFO_VERSION, fabric, &info)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    opal_btl_usnic_if_facts_t f;
    memset(&f, 0, sizeof(f));
    f.netmask = info.ui.v1.ui_netmask_be;
    f.link_speed_mbps = info.ui.v1.ui_link_speed;
    const char *name = info.ui.v1.ui_ifname;
    size_t n = strnlen(name, sizeof(info.ui.v1.ui_ifname)); /* the provider's name need not end in NUL */
    if (n >= sizeof(f.if_name)) {
        n = sizeof(f.if_name) - 1;
    }
    memcpy(f.if_name, name, n);
    f.if_name[n] = '\0';
    f.netmask_src = (0 != f.netmask) ? OPAL_BTL_USNIC_FACT_EXTENSION : OPAL_BTL_USNIC_FACT_NONE;
    f.link_speed_src = (0 != f.link_speed_mbps) ? OPAL_BTL_USNIC_FACT_EXTENSION : OPAL_BTL_USNIC_FACT_NONE;
    f.if_name_src = ('\0' != f.if_name[0]) ? OPAL_BTL_USNIC_FACT_EXTENSION : OPAL_BTL_USNIC_FACT_NONE;
    if (OPAL_BTL_USNIC_FACT_NONE == f.netmask_src && OPAL_BTL_USNIC_FACT_NONE == f.link_speed_src &&
        OPAL_BTL_USNIC_FACT_NONE == f.if_name_src) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    *out = f;
    return OPAL_SUCCESS;
#else
    (void) fabric;
    (void) out;
    return OPAL_ERR_NOT_AVAILABLE;
#endif
}

void opal_btl_usnic_if_facts_merge(const opal_btl_usnic_if_facts_t *ext, const opal_btl_usnic_if_fallbacks_t *fb,
                                   opal_btl_usnic_if_facts_t *out)
{
    opal_btl_usnic_if_facts_t f;
    memset(&f, 0, sizeof(f));

    uint32_t net, mask;
    if (NULL != ext && OPAL_BTL_USNIC_FACT_EXTENSION == ext->netmask_src && 0 != ext->netmask) {
        f.netmask = ext->netmask;
        f.netmask_src = OPAL_BTL_USNIC_FACT_EXTENSION;
    } else if (NULL != fb->fabric_name && OPAL_SUCCESS == opal_btl_usnic_parse_cidr(fb->fabric_name, &net, &mask)) {
        f.netmask = mask;
        f.netmask_src = OPAL_BTL_USNIC_FACT_FABRIC_NAME;
    } else {
        f.netmask = htonl(OPAL_BTL_USNIC_DEFAULT_NETMASK_HOST);
        f.netmask_src = OPAL_BTL_USNIC_FACT_DEFAULT;
    }

    if (NULL != ext && OPAL_BTL_USNIC_FACT_EXTENSION == ext->link_speed_src && 0 != ext->link_speed_mbps) {
        f.link_speed_mbps = ext->link_speed_mbps;
        f.link_speed_src = OPAL_BTL_USNIC_FACT_EXTENSION;
    } else if (fb->sysfs_speed_mbps > 0) {
        f.link_speed_mbps = (uint32_t) fb->sysfs_speed_mbps;
        f.link_speed_src = OPAL_BTL_USNIC_FACT_SYSFS;
    } else {
        f.link_speed_mbps = fb->default_speed_mbps;
        f.link_speed_src = OPAL_BTL_USNIC_FACT_DEFAULT;
    }

    if (NULL != ext && OPAL_BTL_USNIC_FACT_EXTENSION == ext->if_name_src && '\0' != ext->if_name[0]) {
        snprintf(f.if_name, sizeof(f.if_name), "%s", ext->if_name);
        f.if_name_src = OPAL_BTL_USNIC_FACT_EXTENSION;
    } else if (NULL != fb->matched_ifname && '\0' != fb->matched_ifname[0]) {
        snprintf(f.if_name, sizeof(f.if_name), "%s", fb->matched_ifname);
        f.if_name_src = OPAL_BTL_USNIC_FACT_ADDRESS_MATCH;
    } else {
        snprintf(f.if_name, sizeof(f.if_name), "%s", NULL != fb->default_ifname ? fb->default_ifname : "?");
        f.if_name_src = OPAL_BTL_USNIC_FACT_DEFAULT;
    }
    *out = f;
}

int opal_btl_usnic_if_facts_describe(const char *who, const opal_btl_usnic_if_facts_t *facts, char *buf, size_t len)
{
    char mask[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = facts->netmask};
    if (NULL == inet_ntop(AF_INET, &a, mask, sizeof(mask))) {
        snprintf(mask, sizeof(mask), "?");
    }
    return snprintf(buf, len, "%s: netmask %s (%s), link %u Mb/s (%s), interface %s (%s)", who, mask,
                    opal_btl_usnic_fact_source_name(facts->netmask_src), (unsigned) facts->link_speed_mbps,
                    opal_btl_usnic_fact_source_name(facts->link_speed_src), facts->if_name,
                    opal_btl_usnic_fact_source_name(facts->if_name_src));
}

void opal_btl_usnic_ext_refine(struct opal_btl_usnic_module_t *module, struct fid_fabric *fabric,
                               const struct fi_info *info, opal_btl_usnic_if_facts_t *facts)
{
    opal_btl_usnic_if_facts_t ext;
    bool have_ext = (OPAL_SUCCESS == opal_btl_usnic_ext_query(fabric, &ext));

    /* The fallbacks, as module_new computed them before the fabric was
     * open: the fabric name's prefix, sysfs, the address match (else the
     * name the module was created with, the domain's) */
    char matched[OPAL_BTL_USNIC_IF_FACT_NAME_MAX];
    bool have_match = (OPAL_SUCCESS == opal_btl_usnic_ifname_for_ipv4(module->ipv4, matched, sizeof(matched)));
    const char *current = NULL != module->if_name ? module->if_name : "?";
    /* sysfs of the interface the module ends up with */
    const char *speed_if = (have_ext && OPAL_BTL_USNIC_FACT_EXTENSION == ext.if_name_src)
                               ? ext.if_name
                               : (have_match ? matched : current);
    opal_btl_usnic_if_fallbacks_t fb = {
        .fabric_name = (NULL != info && NULL != info->fabric_attr) ? info->fabric_attr->name : NULL,
        .sysfs_speed_mbps = opal_btl_usnic_if_speed_mbps(speed_if),
        .matched_ifname = have_match ? matched : NULL,
        .default_ifname = current,
        .default_speed_mbps = (uint32_t) opal_btl_usnic_globals.link_speed_default,
    };
    opal_btl_usnic_if_facts_t f;
    opal_btl_usnic_if_facts_merge(have_ext ? &ext : NULL, &fb, &f);

    module->netmask = f.netmask;
    module->link_speed_mbps = f.link_speed_mbps;
    if (NULL == module->if_name || 0 != strcmp(module->if_name, f.if_name)) {
        char *name = strdup(f.if_name);
        if (NULL != name) {
            free(module->if_name);
            module->if_name = name;
        }
    }
    char line[256];
    opal_btl_usnic_if_facts_describe(NULL != module->domain_name ? module->domain_name : module->if_name, &f, line,
                                     sizeof(line));
    opal_btl_usnic_verbose(5, "%s", line);
    if (NULL != facts) {
        *facts = f;
    }
}
