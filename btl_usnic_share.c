/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * This process's share of a core (btl_usnic_share.h).
 *
 * Design notes
 * ------------
 * Why it matters.  Our sends leave from the sending process and our ACKs
 * from the receiving one, where TCP's kernel does both in softirq for a
 * descheduled process.  On a host with more busy processes than cores, a
 * sender that shares its core with its receiver can then send only while
 * the receiver is off the core, and the receiver ACKs only while the
 * sender is: one window per round of the scheduler.  Measured in
 * test/hosts' 4 -> 1 incast (5 polling ranks on 2 cores): that sender
 * answered its ACKs 8 ms after they came at the median (a packet
 * capture: 0.2 ms for the others) and got 5-7 MB/s against 30 for the
 * others, Jain's index 0.82-0.86 against btl/tcp's 0.94.  So a progress
 * call that finds nothing gives up the core (sched_yield, in
 * btl_usnic_component.c) while the core is shared: what this process
 * waits for then runs in its place.  Open MPI's mpi_yield_when_idle does
 * the same where it knows a node is oversubscribed; containers,
 * namespaces and other jobs hide that from it.  With it: Jain 0.98-1.0
 * and 113 MB/s in both incasts, 1.07 x btl/tcp.
 *
 * Why the share of a core as the evidence.  A polling MPI process wants
 * the whole core; if it got less than 3/4 of the wall time over the last
 * 0.1 s and the kernel took the core from it (3 involuntary context
 * switches or more), others run on it.  A process that blocked (asleep,
 * or in the runtime) gave the core up itself: voluntary switches, not
 * taken for sharing; one that computes between MPI calls uses its core.
 * An interval longer than two was not spent polling (the samples are
 * taken in progress calls): not judged.  Without that rule the first
 * interval, from the component's open through MPI_Init (265 ms, 70 ms of
 * CPU, 33-43 preemptions while the job started), made loopback ranks on
 * cores of their own yield 56000-87000 times per run; in the intervals
 * after it they were on the CPU 97-100 % of the wall time, preempted
 * 10-26 times per interval by the process's other threads and the
 * host's.  The first try was a datagram read 1 ms or more after the
 * kernel stamped its arrival while the kernel counted a preemption: on
 * the same loopback runs that fired too (50-3500 late reads per 4 s run)
 * and made idle progress yield 0.3-0.9 million times.
 */
#include "opal_config.h"

#include "btl_usnic_share.h"

void opal_btl_usnic_share_init(opal_btl_usnic_share_t *s, uint64_t now, uint64_t cpu, uint64_t preempted)
{
    s->start = now;
    s->cpu_start = cpu;
    s->preempted_start = preempted;
    s->shared = false;
}

bool opal_btl_usnic_share_sample(opal_btl_usnic_share_t *s, uint64_t now, uint64_t cpu, uint64_t preempted)
{
    uint64_t wall = now - s->start;
    uint64_t used = (cpu > s->cpu_start) ? cpu - s->cpu_start : 0;
    uint64_t switches = (preempted > s->preempted_start) ? preempted - s->preempted_start : 0;
    s->shared = 0 != wall && wall <= 2 * OPAL_BTL_USNIC_SHARE_INTERVAL_USEC &&
                switches >= OPAL_BTL_USNIC_SHARE_PREEMPTIONS &&
                (double) used < OPAL_BTL_USNIC_SHARE_BUSY * (double) wall;
    s->start = now;
    s->cpu_start = cpu;
    s->preempted_start = preempted;
    return s->shared;
}
