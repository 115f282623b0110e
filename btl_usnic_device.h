/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * A device, as a wire offers it to the component: an IPv4 interface one
 * module can run on.  Neutral on purpose: the socket wire finds devices
 * with getifaddrs, the ofi wire with fi_getinfo, and nothing above the
 * wires names a libfabric type (libfabric is loaded only when the ofi
 * wire is asked for devices; see btl_usnic_ofi_lib.h).
 */
#ifndef OPAL_BTL_USNIC_DEVICE_H
#define OPAL_BTL_USNIC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#define OPAL_BTL_USNIC_DEVICE_NAME_MAX 64

typedef struct opal_btl_usnic_device_t {
    char if_name[OPAL_BTL_USNIC_DEVICE_NAME_MAX];     /* Linux interface (the domain's name if none matches) */
    char domain_name[OPAL_BTL_USNIC_DEVICE_NAME_MAX]; /* the provider's name for it (= if_name on sockets) */
    char provider[32];                                /* what speaks on it: "udp" (kernel UDP), "usnic", ... */
    uint32_t ipv4;                                    /* network order */
    uint32_t netmask;                                 /* network order; 0 = the wire finds it at open */
    const void *wire_data; /* the wire's own description (ofi: its struct fi_info), valid until released */
} opal_btl_usnic_device_t;

/* What one wire's discovery found; released by the same wire */
typedef struct opal_btl_usnic_device_list_t {
    opal_btl_usnic_device_t *devices;
    int count;
    void *wire_owned; /* what the wire frees on release (ofi: the fi_getinfo list) */
} opal_btl_usnic_device_list_t;

#endif /* OPAL_BTL_USNIC_DEVICE_H */
