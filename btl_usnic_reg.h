/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The regions a process exposes to emulated RDMA PUTs, and the check every
 * PUT datagram passes before it may touch memory.  Pure: no engine, no
 * wire (the PUT protocol itself is btl_usnic_put.c; its design notes say
 * why regions have keys and tombstones).
 */
#ifndef OPAL_BTL_USNIC_REG_H
#define OPAL_BTL_USNIC_REG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the PML ships to the peer (btl_registration_handle_size bytes) */
struct mca_btl_base_registration_handle_t {
    uint32_t region_id; /* OPAL_BTL_USNIC_REGION_LOCAL: not writable remotely */
    uint32_t reserved;
    uint64_t key;
};
typedef struct mca_btl_base_registration_handle_t opal_btl_usnic_reg_handle_t;

/* Most regions a module exposes at once (live + tombstones) */
#define OPAL_BTL_USNIC_MAX_REGIONS (1u << 16)

#define OPAL_BTL_USNIC_REGION_LOCAL UINT32_MAX
#define OPAL_BTL_USNIC_ANY_PEER UINT64_MAX

enum {
    OPAL_BTL_USNIC_REGION_FREE = 0, /* never used */
    OPAL_BTL_USNIC_REGION_LIVE,     /* writable by PUTs with its key */
    OPAL_BTL_USNIC_REGION_DEAD,     /* deregistered: PUTs with its key are told apart, and dropped */
};

typedef struct opal_btl_usnic_region_t {
    uint8_t *base;
    size_t size;
    uint64_t key;
    uint64_t peer_id; /* the only peer that may write it (its sender id), or ANY_PEER */
    uint8_t state;
} opal_btl_usnic_region_t;

/* Regions a process exposes to PUTs.  Deregistered slots stay DEAD (a
 * tombstone that keeps their key, so that a late PUT is counted as such)
 * and are reused oldest first. */
typedef struct opal_btl_usnic_reg_table_t {
    opal_btl_usnic_region_t *slots;
    uint32_t nslots;           /* allocated */
    uint32_t max_slots;
    uint32_t nused;            /* slots ever used (FREE ones are above it) */
    uint32_t *dead;            /* ring of DEAD slot ids, oldest first */
    uint32_t dead_head, dead_count;
    uint32_t nlive;
} opal_btl_usnic_reg_table_t;

void opal_btl_usnic_reg_table_init(opal_btl_usnic_reg_table_t *t, uint32_t max_slots);
void opal_btl_usnic_reg_table_fini(opal_btl_usnic_reg_table_t *t);

/**
 * Expose [base, base + size) to PUTs from |peer_id| (ANY_PEER: any) and
 * fill |handle|.  Returns false when the table is full of live regions, or
 * the kernel gives no random key.
 */
bool opal_btl_usnic_reg_add(opal_btl_usnic_reg_table_t *t, void *base, size_t size, uint64_t peer_id,
                            opal_btl_usnic_reg_handle_t *handle);

/* Stop exposing the region of |handle| (no-op for local-only handles). */
void opal_btl_usnic_reg_remove(opal_btl_usnic_reg_table_t *t, const opal_btl_usnic_reg_handle_t *handle);

typedef enum {
    OPAL_BTL_USNIC_PUT_WRITE,   /* live region, right key, peer and range: write */
    OPAL_BTL_USNIC_PUT_DEAD,    /* right key of a deregistered region: drop, never touch memory */
    OPAL_BTL_USNIC_PUT_REJECT,  /* anything else: drop, never touch memory */
} opal_btl_usnic_put_verdict_t;

/* May |peer_id| write |len| bytes at |addr| of region |region_id| with |key|? */
opal_btl_usnic_put_verdict_t opal_btl_usnic_reg_check(const opal_btl_usnic_reg_table_t *t, uint32_t region_id,
                                                      uint64_t key, uint64_t peer_id, uint64_t addr,
                                                      size_t len);

#endif /* OPAL_BTL_USNIC_REG_H */
