/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * NUMA preference: where the process is bound and hwloc knows the PCI
 * device behind a module's interface, raise the btl_latency of modules
 * whose device sits on a NUMA node farther from the process's binding, so
 * that the BML sends eager and short messages over the near interfaces
 * (modules on the local node keep the configured latency).  The arithmetic
 * (opal_btl_usnic_numa_latency, btl_usnic.h) is pure and unit-tested; this
 * file only finds the two NUMA node sets and their distance.
 *
 * Everything here degrades silently: no binding, no hwloc topology, an
 * interface hwloc has no OS device for (virtual NICs, veth, loopback) or a
 * topology without a distance matrix leave the latency as it is, with a
 * line at btl_usnic_verbose >= 5 saying why.
 */
#include "opal_config.h"

#include <string.h>

#include "opal/mca/hwloc/base/base.h"

#include "btl_usnic.h"

/* A topology with I/O objects: Open MPI's own if it has any OS devices
 * (depends on how the daemon loaded it), else a private one with network
 * and OpenFabrics devices kept, which the caller must destroy (*own_p). */
static hwloc_topology_t io_topology(bool *own_p)
{
    hwloc_topology_t topo = NULL;
    *own_p = false;
    if (NULL != opal_hwloc_topology && NULL != hwloc_get_next_osdev(opal_hwloc_topology, NULL)) {
        return opal_hwloc_topology;
    }
    if (0 != hwloc_topology_init(&topo)) {
        return NULL;
    }
    (void) hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (0 != hwloc_topology_load(topo)) {
        hwloc_topology_destroy(topo);
        return NULL;
    }
    *own_p = true;
    return topo;
}

/* The OS device hwloc reports for |module|: network devices are named
 * after the Linux interface, usNIC / OpenFabrics ones after the verbs
 * device (the libfabric domain name). */
static hwloc_obj_t find_osdev(hwloc_topology_t topo, const opal_btl_usnic_module_t *module)
{
    for (hwloc_obj_t obj = hwloc_get_next_osdev(topo, NULL); NULL != obj; obj = hwloc_get_next_osdev(topo, obj)) {
        if (NULL == obj->name) {
            continue;
        }
        if (0 == strcmp(obj->name, module->if_name) ||
            (NULL != module->domain_name && 0 == strcmp(obj->name, module->domain_name))) {
            return obj;
        }
    }
    return NULL;
}

/* Smallest latency-kind distance between a NUMA node of |mine| and one of
 * |dev|, and the local distance (the matrix diagonal at that node of ours).
 * Returns false if the topology has no such matrix. */
static bool numa_distance(hwloc_topology_t topo, hwloc_const_nodeset_t mine, hwloc_const_nodeset_t dev,
                          uint64_t *dist_p, uint64_t *local_p)
{
    struct hwloc_distances_s *d = NULL;
    unsigned nr = 1;
    bool found = false;
    if (0 != hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &d, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) ||
        0 == nr) {
        return false;
    }
    for (unsigned i = 0; i < d->nbobjs; ++i) {
        if (!hwloc_bitmap_isset(mine, d->objs[i]->os_index)) {
            continue;
        }
        for (unsigned j = 0; j < d->nbobjs; ++j) {
            if (!hwloc_bitmap_isset(dev, d->objs[j]->os_index)) {
                continue;
            }
            uint64_t v = d->values[i * d->nbobjs + j];
            if (!found || v < *dist_p) {
                *dist_p = v;
                *local_p = d->values[i * d->nbobjs + i];
                found = true;
            }
        }
    }
    hwloc_distances_release(topo, d);
    return found;
}

/* Adjust one module's latency; |mine| is the NUMA node set of our binding. */
static void adjust_module(hwloc_topology_t topo, hwloc_const_nodeset_t mine, opal_btl_usnic_module_t *module)
{
    hwloc_obj_t osdev = find_osdev(topo, module);
    if (NULL == osdev) {
        opal_btl_usnic_verbose(5, "numa: hwloc has no device for interface %s (virtual NIC, veth or loopback?): "
                                  "latency %u unchanged",
                               module->if_name, (unsigned) module->super.btl_latency);
        return;
    }
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, osdev);
    if (NULL == anc || NULL == anc->nodeset || hwloc_bitmap_iszero(anc->nodeset)) {
        opal_btl_usnic_verbose(5, "numa: no NUMA locality for device %s of %s: latency %u unchanged", osdev->name,
                               module->if_name, (unsigned) module->super.btl_latency);
        return;
    }
    uint64_t dist = 0, local = 0;
    if (hwloc_bitmap_intersects(mine, anc->nodeset)) {
        /* same node: no penalty whatever the matrix says */
        opal_btl_usnic_verbose(5, "numa: interface %s (device %s, near %s L#%u) is on our NUMA node: latency %u "
                                  "unchanged",
                               module->if_name, osdev->name, hwloc_obj_type_string(anc->type), anc->logical_index,
                               (unsigned) module->super.btl_latency);
        return;
    }
    if (!numa_distance(topo, mine, anc->nodeset, &dist, &local)) {
        dist = local = 0; /* a different node, distance unknown: one step */
    }
    uint32_t before = module->super.btl_latency;
    module->super.btl_latency = opal_btl_usnic_numa_latency(before, local, dist,
                                                            (uint32_t) opal_btl_usnic_globals.numa_latency_penalty);
    opal_btl_usnic_verbose(5, "numa: interface %s (device %s, near %s L#%u): distance %llu (local %llu) from our "
                              "binding: latency %u -> %u",
                           module->if_name, osdev->name, hwloc_obj_type_string(anc->type), anc->logical_index,
                           (unsigned long long) dist, (unsigned long long) local, (unsigned) before,
                           (unsigned) module->super.btl_latency);
}

/* Is the process bound to less than the whole machine?  Fills |cpus|. */
static bool process_bound(hwloc_topology_t topo, hwloc_bitmap_t cpus)
{
    return 0 == hwloc_get_cpubind(topo, cpus, HWLOC_CPUBIND_PROCESS) && !hwloc_bitmap_iszero(cpus) &&
           !hwloc_bitmap_isincluded(hwloc_topology_get_allowed_cpuset(topo), cpus);
}

void opal_btl_usnic_hwloc_prefer_near(void)
{
    opal_btl_usnic_component_t *c = &opal_btl_usnic_globals;
    hwloc_topology_t topo = NULL;
    bool own = false;
    if (c->num_modules <= 0 || c->numa_latency_penalty <= 0) {
        return;
    }
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    if (NULL == bound || NULL == mine) {
        goto out;
    }
    if (NULL == opal_hwloc_topology) {
        (void) opal_hwloc_base_get_topology();
    }
    /* the cheap test first: an unbound process never loads I/O objects */
    if (NULL != opal_hwloc_topology && !process_bound(opal_hwloc_topology, bound)) {
        opal_btl_usnic_verbose(5, "numa: process not bound: no NUMA preference among %d module(s)", c->num_modules);
        goto out;
    }
    if (NULL == (topo = io_topology(&own))) {
        opal_btl_usnic_verbose(5, "numa: no hwloc topology: no NUMA preference");
        goto out;
    }
    if (!process_bound(topo, bound)) {
        opal_btl_usnic_verbose(5, "numa: process not bound: no NUMA preference among %d module(s)", c->num_modules);
        goto out;
    }
    hwloc_cpuset_to_nodeset(topo, bound, mine);
    if (hwloc_bitmap_iszero(mine)) {
        opal_btl_usnic_verbose(5, "numa: binding covers no NUMA node: no NUMA preference");
        goto out;
    }
    for (int i = 0; i < c->num_modules; ++i) {
        adjust_module(topo, mine, c->modules[i]);
    }
out:
    if (NULL != bound) {
        hwloc_bitmap_free(bound);
    }
    if (NULL != mine) {
        hwloc_bitmap_free(mine);
    }
    if (own) {
        hwloc_topology_destroy(topo);
    }
}
