/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Batches of datagrams on kernel UDP sockets: the pure parts (see
 * btl_usnic_batch.h).
 */
#include "btl_usnic_batch.h"

#include <errno.h>

#ifndef ENOTSUPP
#    define ENOTSUPP 524 /* the kernel's own "not supported", seen by user space */
#endif

void opal_btl_usnic_gso_path_init(opal_btl_usnic_gso_path_t *path, bool enabled)
{
    path->max_segs = enabled ? (uint16_t) OPAL_BTL_USNIC_GSO_MAX_SEGS : 0;
    path->fallbacks = 0;
    path->max_bytes = OPAL_BTL_USNIC_UDP_MAX_PAYLOAD;
}

unsigned opal_btl_usnic_gso_run(const opal_btl_usnic_gso_path_t *path, const uint32_t *lens, unsigned n)
{
    if (!opal_btl_usnic_gso_path_on(path) || n < 2) {
        return 1;
    }
    uint32_t seg = lens[0];
    size_t total = seg;
    unsigned k = 1;
    while (k < n && k < path->max_segs && lens[k] <= seg && total + lens[k] <= path->max_bytes) {
        total += lens[k];
        if (lens[k++] < seg) {
            break; /* a short datagram can only be the last of a run */
        }
    }
    return k;
}

opal_btl_usnic_gso_verdict_t opal_btl_usnic_gso_failed(opal_btl_usnic_gso_path_t *path, int err, unsigned segs,
                                                       size_t seg, size_t bytes)
{
    switch (err) {
    case EINVAL: /* more segments than this kernel cuts, or a segment the device cannot carry */
        if (segs / 2 >= 2) {
            path->max_segs = (uint16_t) (segs / 2);
            ++path->fallbacks;
            return OPAL_BTL_USNIC_GSO_RETRY;
        }
        break;
    case EMSGSIZE: /* more bytes than one offload send carries */
        if (segs > 2 && bytes / 2 >= 2 * seg) {
            path->max_bytes = (uint32_t) (bytes / 2);
            ++path->fallbacks;
            return OPAL_BTL_USNIC_GSO_RETRY;
        }
        break;
    case EIO:        /* the route's device cannot checksum: no offload on this path */
    case ENOPROTOOPT:
    case EOPNOTSUPP:
    case ENOTSUPP:
        break;
    default:
        return OPAL_BTL_USNIC_GSO_NOT_OURS;
    }
    path->max_segs = 0;
    ++path->fallbacks;
    return OPAL_BTL_USNIC_GSO_OFF;
}

unsigned opal_btl_usnic_gro_split(size_t len, size_t stored, size_t seg, opal_btl_usnic_span_t *spans, unsigned max,
                                  unsigned *lost_p)
{
    unsigned n = 0, lost = 0;
    if (0 == len && max > 0) {
        spans[0].off = spans[0].len = 0; /* an empty datagram: the engine counts it as truncated */
        *lost_p = 0;
        return 1;
    }
    if (0 == seg || seg >= len) {
        seg = len; /* one datagram */
    }
    for (size_t off = 0; off < len; off += seg) {
        size_t piece = (len - off < seg) ? len - off : seg;
        if (off + piece > stored || n == max) {
            ++lost;
        } else {
            spans[n].off = (uint32_t) off;
            spans[n].len = (uint32_t) piece;
            ++n;
        }
    }
    *lost_p = lost;
    return n;
}
