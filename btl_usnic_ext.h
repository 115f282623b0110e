/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Interface facts from libfabric's Cisco usnic extension
 * (rdma/fi_ext_usnic.h, "fabric getinfo", see fi_usnic(7)) and the
 * fallbacks the module used before it: netmask, link speed and Linux
 * interface name, each with where it came from.
 *
 *   opal_btl_usnic_ext_query     asks an open fabric (extension only)
 *   opal_btl_usnic_if_facts_merge  extension where it says something,
 *                                fallbacks otherwise (pure)
 *   opal_btl_usnic_if_facts_describe  the verbose line (pure)
 *   opal_btl_usnic_ext_refine    all of it for one module, called by
 *                                the libfabric wire's open
 *                                (btl_usnic_wire_ofi.c) once the fabric
 *                                is open
 */
#ifndef OPAL_BTL_USNIC_EXT_H
#define OPAL_BTL_USNIC_EXT_H

#include "opal_config.h"

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

/* configure (in-tree builds) defines it to 0 or 1; the standalone build
 * has no configure and asks the compiler whether the header exists. */
#ifndef OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC
#    if defined(__has_include)
#        if __has_include(<rdma/fi_ext_usnic.h>)
#            define OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC 1
#        endif
#    endif
#    ifndef OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC
#        define OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC 0
#    endif
#endif

/* Room for an interface name, or the libfabric domain name used instead */
#define OPAL_BTL_USNIC_IF_FACT_NAME_MAX 64

/* The netmask when neither the extension nor the fabric name gives one
 * (host order; 255.255.255.0) */
#define OPAL_BTL_USNIC_DEFAULT_NETMASK_HOST 0xffffff00u

/* Where one fact came from */
typedef enum opal_btl_usnic_fact_source_t {
    OPAL_BTL_USNIC_FACT_NONE = 0,      /* not known */
    OPAL_BTL_USNIC_FACT_EXTENSION,     /* the usnic extension's getinfo */
    OPAL_BTL_USNIC_FACT_FABRIC_NAME,   /* the fabric name "a.b.c.d/len" */
    OPAL_BTL_USNIC_FACT_SYSFS,         /* /sys/class/net/<if>/speed */
    OPAL_BTL_USNIC_FACT_ADDRESS_MATCH, /* the interface holding the module's IPv4 address */
    OPAL_BTL_USNIC_FACT_DEFAULT,       /* built-in default, btl_usnic_link_speed, or the domain name */
} opal_btl_usnic_fact_source_t;

typedef struct opal_btl_usnic_if_facts_t {
    uint32_t netmask; /* network byte order */
    opal_btl_usnic_fact_source_t netmask_src;
    uint32_t link_speed_mbps;
    opal_btl_usnic_fact_source_t link_speed_src;
    char if_name[OPAL_BTL_USNIC_IF_FACT_NAME_MAX];
    opal_btl_usnic_fact_source_t if_name_src;
} opal_btl_usnic_if_facts_t;

/* What the module knows without the extension */
typedef struct opal_btl_usnic_if_fallbacks_t {
    const char *fabric_name;     /* "a.b.c.d/len" (udp, usnic), or NULL */
    int sysfs_speed_mbps;        /* <= 0: sysfs reports none */
    const char *matched_ifname;  /* interface holding the module's address, or NULL */
    const char *default_ifname;  /* the name to use otherwise (the domain's) */
    uint32_t default_speed_mbps; /* btl_usnic_link_speed */
} opal_btl_usnic_if_fallbacks_t;

/* "usnic extension", "fabric name", "sysfs", "address match", "default",
 * "none" */
const char *opal_btl_usnic_fact_source_name(opal_btl_usnic_fact_source_t src);

/* Ask |fabric| through the usnic extension.  OPAL_SUCCESS: |*out| holds
 * the facts the extension gave (a zero netmask or speed, or an empty
 * name, has source OPAL_BTL_USNIC_FACT_NONE).  OPAL_ERR_NOT_AVAILABLE,
 * |*out| untouched: built without rdma/fi_ext_usnic.h, the provider has
 * no such extension (udp: -FI_ENOSYS), its ops table is too small, its
 * getinfo fails, or it reports nothing at all. */
int opal_btl_usnic_ext_query(struct fid_fabric *fabric, opal_btl_usnic_if_facts_t *out);

/* Each fact from |ext| (may be NULL) where it has one, otherwise from
 * |fb|: netmask from the fabric name, else 255.255.255.0; link speed from
 * sysfs, else fb->default_speed_mbps; interface from the address match,
 * else fb->default_ifname. */
void opal_btl_usnic_if_facts_merge(const opal_btl_usnic_if_facts_t *ext, const opal_btl_usnic_if_fallbacks_t *fb,
                                   opal_btl_usnic_if_facts_t *out);

/* "<who>: netmask 255.255.255.0 (usnic extension), link 40000 Mb/s
 * (sysfs), interface eth4 (address match)" into |buf|; snprintf's result */
int opal_btl_usnic_if_facts_describe(const char *who, const opal_btl_usnic_if_facts_t *facts, char *buf,
                                     size_t len);

struct opal_btl_usnic_module_t;

/* Once the module's |fabric| (opened from |info|) is open: query the
 * extension, merge with the fallbacks, set module->netmask,
 * link_speed_mbps and if_name, and say so at btl_usnic_verbose 5.
 * Returns the facts' sources in |facts| if not NULL. */
void opal_btl_usnic_ext_refine(struct opal_btl_usnic_module_t *module, struct fid_fabric *fabric,
                               const struct fi_info *info, opal_btl_usnic_if_facts_t *facts);

#endif /* OPAL_BTL_USNIC_EXT_H */
