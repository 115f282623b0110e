/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * TEST STAND-IN, NOT libfabric's header.  Written by us from the
 * description of the "fabric getinfo" extension in the fi_usnic(7) manual
 * page, so that btl_usnic_ext.c's use of the extension is compiled and
 * unit-tested (test/unit/test_ext.c) where libfabric ships no
 * rdma/fi_ext_usnic.h (Debian 12).  Only the unit tests see it (their
 * -Itest/unit/ext-standin); it is never installed and never used by the
 * component's own build: a build against a libfabric that has the real
 * header uses the real one.
 *
 * It declares only what btl_usnic_ext.c uses.  The layout follows the
 * documented ABI: the reply starts with a 32-bit version and 4 bytes of
 * explicit padding, then a union whose version 1 member is packed (the
 * interface name starts at byte 16 of the reply).  The real union also
 * has a larger version 2 member that starts with the same fields; we ask
 * for version 1 and read only those.
 */
#ifndef OPAL_BTL_USNIC_TEST_FI_EXT_USNIC_STANDIN_H
#define OPAL_BTL_USNIC_TEST_FI_EXT_USNIC_STANDIN_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

/* the name fi_open_ops() takes for the fabric operations */
#define FI_USNIC_FABRIC_OPS_1 "fabric_ops 1"

/* what fi_usnic(7) calls version 1 of the getinfo reply */
struct fi_usnic_info_v1 {
    uint32_t ui_link_speed;      /* Mb/s */
    uint32_t ui_netmask_be;      /* network byte order */
    char ui_ifname[IFNAMSIZ];    /* Linux interface */
    uint32_t ui_num_vf;
    uint32_t ui_qp_per_vf;
    uint32_t ui_cq_per_vf;
} __attribute__((packed));

struct fi_usnic_info {
    uint32_t ui_version;         /* the version the provider filled in */
    uint8_t ui_pad0[4];          /* keeps the union at offset 8 */
    union {
        struct fi_usnic_info_v1 v1;
    } ui;
} __attribute__((packed));

/* the table fi_open_ops(fabric, FI_USNIC_FABRIC_OPS_1, ...) returns */
struct fi_usnic_ops_fabric {
    size_t size;                 /* of the table, for newer callers */
    int (*getinfo)(uint32_t version, struct fid_fabric *fabric, struct fi_usnic_info *info);
};

#endif /* OPAL_BTL_USNIC_TEST_FI_EXT_USNIC_STANDIN_H */
