/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Batches of datagrams on kernel UDP sockets, the pure parts of the
 * socket wire (btl_usnic_wire_sock.c): no socket calls, no Open MPI, so
 * that test/unit/test_batch.c can try every case.
 *
 *  - Which of the datagrams waiting for one peer go in one
 *    segmentation-offload send (UDP_SEGMENT, "GSO"): the kernel (or the
 *    NIC) cuts the payload of one sendmsg into datagrams of the segment
 *    size, so every datagram of a run but the last has that size.
 *  - What a failed offload send teaches about the path to that peer.
 *    The first GSO send on a path can fail although the socket took the
 *    option: EIO where the route's device cannot checksum, EINVAL past
 *    the kernel's segment cap (64 before Linux 6.9, 128 since) or a
 *    segment larger than the device MTU, EMSGSIZE past 65507 bytes.  The
 *    path's limits come down (or the offload goes off for that peer) and
 *    the same datagrams are sent again: a counted fallback, never a
 *    failed job.
 *  - How a coalesced receive (UDP_GRO) splits into datagrams: the cmsg
 *    says the segment size, every datagram but the last has it; without
 *    the cmsg the receive is one datagram; a receive the kernel cut short
 *    (MSG_TRUNC) keeps only its whole datagrams.
 */
#ifndef OPAL_BTL_USNIC_BATCH_H
#define OPAL_BTL_USNIC_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Datagrams in one offload send: UDP_MAX_SEGMENTS of Linux before 6.9
 * (a later kernel takes more; an earlier cap shows as EINVAL) */
#define OPAL_BTL_USNIC_GSO_MAX_SEGS 64u
/* Largest UDP payload over IPv4 (65535 - 20 - 8): of one datagram, and
 * of all the segments of one offload send together */
#define OPAL_BTL_USNIC_UDP_MAX_PAYLOAD 65507u

/* What the socket wire knows of the path to one peer */
typedef struct opal_btl_usnic_gso_path_t {
    uint16_t max_segs;  /* datagrams per offload send; 0 or 1 = no offload (sendmmsg) */
    uint16_t fallbacks; /* times a failed offload send lowered the limits */
    uint32_t max_bytes; /* payload bytes per offload send */
} opal_btl_usnic_gso_path_t;

/* A path that may use the offload (|enabled|) with every limit at the
 * kernel's maximum */
void opal_btl_usnic_gso_path_init(opal_btl_usnic_gso_path_t *path, bool enabled);

static inline bool opal_btl_usnic_gso_path_on(const opal_btl_usnic_gso_path_t *path)
{
    return path->max_segs > 1;
}

/**
 * How many of the |n| (>= 1) datagrams of sizes |lens| (in order, all to
 * one peer) go in the next send on |path|: the first sets the segment
 * size, each later one is at most that size and a shorter one ends the
 * run; at most path->max_segs datagrams and path->max_bytes bytes.
 * 1 = a datagram on its own (also whenever the path has no offload).
 */
unsigned opal_btl_usnic_gso_run(const opal_btl_usnic_gso_path_t *path, const uint32_t *lens, unsigned n);

typedef enum {
    OPAL_BTL_USNIC_GSO_RETRY,    /* limits lowered: plan the run again and resend */
    OPAL_BTL_USNIC_GSO_OFF,      /* the offload is off for this path: resend without */
    OPAL_BTL_USNIC_GSO_NOT_OURS, /* not an offload error (back-pressure, ICMP, ...): nothing changed */
} opal_btl_usnic_gso_verdict_t;

/**
 * An offload send of |segs| (>= 2) datagrams of |seg| bytes (the run's
 * segment size: its first datagram's), |bytes| in all, on |path| failed
 * with errno |err|: EIO, ENOPROTOOPT, EOPNOTSUPP turn the offload off;
 * EINVAL halves the segment cap, EMSGSIZE the byte cap (off once a run
 * would be a single datagram: fewer than 2 segments, or a byte cap below
 * two segments).  Counts the fallback in the path.
 */
opal_btl_usnic_gso_verdict_t opal_btl_usnic_gso_failed(opal_btl_usnic_gso_path_t *path, int err, unsigned segs,
                                                       size_t seg, size_t bytes);

/* One datagram of a receive buffer */
typedef struct opal_btl_usnic_span_t {
    uint32_t off;
    uint32_t len;
} opal_btl_usnic_span_t;

/**
 * Split a receive of |len| bytes, |stored| of them in the buffer (fewer
 * when the kernel cut it short), coalesced from datagrams of |seg| bytes
 * (the UDP_GRO cmsg; 0 = no cmsg: one datagram) into at most |max|
 * spans.  Returns the number of spans; *|lost_p| = datagrams that did not
 * fit (cut short, or beyond |max|).  A single datagram cut short is
 * lost whole (it was longer than any we accept).
 */
unsigned opal_btl_usnic_gro_split(size_t len, size_t stored, size_t seg, opal_btl_usnic_span_t *spans, unsigned max,
                                  unsigned *lost_p);

#endif /* OPAL_BTL_USNIC_BATCH_H */
