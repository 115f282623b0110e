/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The path MTU search of one peer: packetization-layer path MTU discovery
 * in the spirit of RFC 8899 (DPLPMTUD), over our own datagrams.
 *
 * Design notes
 * ------------
 * What the size rests on.  The size new segments use toward a peer is
 * one the peer has confirmed: it starts at the base size (btl_usnic_pmtu_base,
 * 1252 bytes: what a 1280-byte IPv6 minimum link carries in IPv4/UDP),
 * and rises only when a PROBE of a larger size is echoed by the peer in an
 * authentic ACK.  Nothing the kernel learns from ICMP changes it (the
 * socket wire sends with IP_PMTUDISC_PROBE): a spoofed "fragmentation
 * needed" can neither shrink our datagrams nor make the kernel refuse
 * them.  A forged echo cannot raise it either: ACKs carry our peer's tag.
 *
 * Search.  Once the peer first answered us (before that it may not know
 * us yet, and its drop counters would count our probes), probes go one
 * at a time: the pair's interface limit first (on a healthy path the
 * search ends with one probe, one round trip after the first answer),
 * then the common Ethernet sizes below what failed (8972, 1472), then a
 * binary search down to GRANULARITY bytes.  A size is too large after
 * MAX_PROBES probes of it were lost in a row (each waits about a
 * retransmission timeout: srtt + 4 rttvar, within the RTO's bounds); a
 * lost probe costs one datagram and no data.  A search that ends below
 * the limit starts again after btl_usnic_pmtu_reprobe, so a repaired path
 * returns to full size.
 *
 * Black holes.  A path that starts dropping large datagrams without ICMP
 * (a switch port or link with a smaller MTU) shows as timeouts of large
 * segments while small ones still cross.  The first timeout of a segment
 * above the base size sends a base-size probe too; when a second timeout
 * comes (the ACK not having advanced) and the base probe was echoed, the
 * size falls back to the base, the search starts again, and the segments
 * already cut at the larger size go as pieces (btl_usnic_post.c).  A peer
 * that answers nothing (dead, descheduled) proves no black hole: its sizes
 * stay, and the peer timeout decides.  Detection thus costs two RTOs and
 * the probe's round trip; RFC 8899 suggests the same shape (a loss of
 * packets of the PLPMTU confirmed by a probe of the base size).
 */
#include "btl_usnic_pmtu.h"

/* Sizes below a failed one worth trying before bisecting: jumbo and
 * standard Ethernet, IPv4 + UDP headers off */
static const uint32_t common_sizes[] = {8972, 1472};

/* The next size to try in the range (low, high], or 0 when the search is
 * done */
static uint32_t candidate(const opal_btl_usnic_pmtu_t *st)
{
    if (st->high <= st->low) {
        return 0;
    }
    if (st->high == st->max) {
        return st->max;
    }
    for (unsigned i = 0; i < sizeof(common_sizes) / sizeof(common_sizes[0]); ++i) {
        if (common_sizes[i] > st->low && common_sizes[i] <= st->high) {
            return common_sizes[i];
        }
    }
    if (st->high - st->low < OPAL_BTL_USNIC_PMTU_GRANULARITY) {
        return 0;
    }
    return st->low + (st->high - st->low + 1) / 2;
}

/* The search rests: for good at the limit, else until the re-probe time,
 * when it starts again from the limit */
static void search_rest(opal_btl_usnic_pmtu_t *st, uint64_t now)
{
    st->high = st->max;
    st->tries = 0;
    st->outstanding = false;
    if (st->low >= st->max) {
        st->trying = 0;
        st->next_probe = OPAL_BTL_USNIC_PMTU_NEVER;
    } else {
        st->trying = st->max;
        st->next_probe = now + st->reprobe;
    }
}

/* On to the next size, or rest */
static void search_advance(opal_btl_usnic_pmtu_t *st, uint64_t now)
{
    uint32_t next = candidate(st);
    if (0 == next) {
        search_rest(st, now);
        return;
    }
    st->trying = next;
    st->tries = 0;
    st->next_probe = now;
}

void opal_btl_usnic_pmtu_init(opal_btl_usnic_pmtu_t *st, bool enabled, uint32_t base, uint32_t max,
                              uint64_t reprobe)
{
    *st = (opal_btl_usnic_pmtu_t){.max = max, .reprobe = reprobe, .next_probe = OPAL_BTL_USNIC_PMTU_NEVER};
    st->base = (base < max) ? base : max;
    if (!enabled || st->base >= max) {
        st->cur = st->low = st->high = st->base = max;
        return;
    }
    st->cur = st->low = st->base;
    st->high = max;
    st->trying = max;
    st->waiting = true;
}

bool opal_btl_usnic_pmtu_start(opal_btl_usnic_pmtu_t *st, uint64_t now)
{
    if (!st->waiting) {
        return false;
    }
    st->waiting = false;
    st->next_probe = now;
    return true;
}

uint32_t opal_btl_usnic_pmtu_probe_due(const opal_btl_usnic_pmtu_t *st, uint64_t now)
{
    if (st->waiting || st->outstanding || 0 == st->trying || st->next_probe > now) {
        return 0;
    }
    return st->trying;
}

void opal_btl_usnic_pmtu_probe_sent(opal_btl_usnic_pmtu_t *st, uint32_t size, uint64_t now, uint64_t timeout)
{
    ++st->probes_sent;
    if (size == st->trying) {
        st->outstanding = true;
        st->deadline = now + timeout;
    }
}

bool opal_btl_usnic_pmtu_probe_expire(opal_btl_usnic_pmtu_t *st, uint64_t now)
{
    if (!st->outstanding || now < st->deadline) {
        return false;
    }
    st->outstanding = false;
    ++st->probes_lost;
    if (++st->tries >= OPAL_BTL_USNIC_PMTU_MAX_PROBES) {
        st->high = st->trying - 1;
        search_advance(st, now);
    } else {
        st->next_probe = now;
    }
    return true;
}

/* Black hole: back to the base, and search again */
static void fall_back(opal_btl_usnic_pmtu_t *st, uint64_t now)
{
    st->cur = st->low = st->base;
    st->high = st->max;
    st->big_timeouts = 0;
    st->base_echoed = false;
    st->outstanding = false;
    st->waiting = false;
    search_advance(st, now);
}

uint32_t opal_btl_usnic_pmtu_echo(opal_btl_usnic_pmtu_t *st, uint32_t size, opal_btl_usnic_seq_t acked,
                                  uint64_t now)
{
    if (size > st->max || 0 == size) {
        return 0; /* not a size we could have sent */
    }
    ++st->probes_acked;
    if (size <= st->base) {
        if (st->big_timeouts > 0 && acked == st->suspect_acked) {
            st->base_echoed = true;
            if (st->big_timeouts >= OPAL_BTL_USNIC_PMTU_BLACKHOLE_TIMEOUTS && st->cur > st->base) {
                fall_back(st, now);
                return st->cur;
            }
        }
        return 0;
    }
    uint32_t old = st->cur;
    if (size > st->low) {
        st->low = size;
    }
    if (size > st->high) {
        st->high = size; /* a late echo: that size crosses after all */
    }
    if (st->outstanding && size >= st->trying) {
        st->outstanding = false;
    }
    if (!st->outstanding && size >= st->trying && 0 != st->trying) {
        search_advance(st, now);
    }
    if (st->low > st->cur) {
        st->cur = st->low;
    }
    return st->cur != old ? st->cur : 0;
}

opal_btl_usnic_pmtu_action_t opal_btl_usnic_pmtu_timeout(opal_btl_usnic_pmtu_t *st, uint32_t len,
                                                         opal_btl_usnic_seq_t acked, uint64_t now)
{
    if (len <= st->base || st->cur <= st->base) {
        return OPAL_BTL_USNIC_PMTU_NOTHING;
    }
    if (0 == st->big_timeouts || acked != st->suspect_acked) {
        st->big_timeouts = 1;
        st->suspect_acked = acked;
        st->base_echoed = false;
        return OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE;
    }
    if (st->big_timeouts < UINT8_MAX) {
        ++st->big_timeouts;
    }
    if (st->big_timeouts >= OPAL_BTL_USNIC_PMTU_BLACKHOLE_TIMEOUTS && st->base_echoed) {
        fall_back(st, now);
        return OPAL_BTL_USNIC_PMTU_FELL_BACK;
    }
    return OPAL_BTL_USNIC_PMTU_SEND_BASE_PROBE;
}

uint64_t opal_btl_usnic_pmtu_next_event(const opal_btl_usnic_pmtu_t *st)
{
    if (st->outstanding) {
        return st->deadline;
    }
    if (st->waiting || 0 == st->trying) {
        return OPAL_BTL_USNIC_PMTU_NEVER;
    }
    return st->next_probe;
}
