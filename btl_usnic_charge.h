/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * What a datagram costs the receive side that holds it until the
 * receiver's next progress pass: its charge.  A kernel UDP socket charges
 * its receive buffer the memory of the packet, not its length (measured on
 * Linux 6.1 loopback: 832 bytes for any datagram up to ~180 bytes, 1280 up
 * to ~700, 2304 for 1472, 8448 for 4000, 65832 for 65000); an OS-bypass NIC
 * uses one posted buffer per datagram whatever its length.  So the
 * receiver's capacity, its grants and what a sender has in flight are
 * counted in charge, from a table by size class that the receiver
 * publishes (btl_usnic_kcharge.c measures it for kernel sockets): small
 * messages then get the depth their real cost allows (thousands of them
 * in a socket buffer that holds 127 datagrams of 65000 bytes).
 *
 * Pure: depends on system headers only.
 */
#ifndef OPAL_BTL_USNIC_CHARGE_H
#define OPAL_BTL_USNIC_CHARGE_H

#include <stddef.h>
#include <stdint.h>

/* Size classes: datagrams of up to 64 bytes, 128, 256, ... 128 KiB */
#define OPAL_BTL_USNIC_CHARGE_CLASSES 12
#define OPAL_BTL_USNIC_CHARGE_CLASS_MIN 64

/* Bytes of the receiver's charge per unit of an ACK's credit field */
#define OPAL_BTL_USNIC_CREDIT_UNIT 1024u

typedef struct opal_btl_usnic_charge_t {
    uint32_t per_class[OPAL_BTL_USNIC_CHARGE_CLASSES]; /* charge of the largest datagram of each class */
} opal_btl_usnic_charge_t;

/* Largest datagram of class |k| */
static inline size_t opal_btl_usnic_charge_class_size(unsigned k)
{
    return (size_t) OPAL_BTL_USNIC_CHARGE_CLASS_MIN << k;
}

/* The class of a datagram of |len| bytes (the last class takes anything larger) */
static inline unsigned opal_btl_usnic_charge_class(size_t len)
{
    unsigned k = 0;
    while (k + 1 < OPAL_BTL_USNIC_CHARGE_CLASSES && len > opal_btl_usnic_charge_class_size(k)) {
        ++k;
    }
    return k;
}

/* The charge of a datagram of |len| bytes (header included) */
static inline uint32_t opal_btl_usnic_charge_of(const opal_btl_usnic_charge_t *c, size_t len)
{
    return c->per_class[opal_btl_usnic_charge_class(len)];
}

/* Every datagram costs |each| (posted buffers, or tests) */
static inline void opal_btl_usnic_charge_flat(opal_btl_usnic_charge_t *c, uint32_t each)
{
    for (unsigned k = 0; k < OPAL_BTL_USNIC_CHARGE_CLASSES; ++k) {
        c->per_class[k] = each;
    }
}

/**
 * Make a table read from a peer safe to count with: every charge at least
 * 1 and at least its smaller classes' (a larger datagram never costs
 * less).  A peer's table only ever limits what we send to that peer, so
 * nothing more is needed.
 */
static inline void opal_btl_usnic_charge_sanitize(opal_btl_usnic_charge_t *c)
{
    uint32_t floor = 1;
    for (unsigned k = 0; k < OPAL_BTL_USNIC_CHARGE_CLASSES; ++k) {
        if (c->per_class[k] < floor) {
            c->per_class[k] = floor;
        }
        floor = c->per_class[k];
    }
}

#endif /* OPAL_BTL_USNIC_CHARGE_H */
