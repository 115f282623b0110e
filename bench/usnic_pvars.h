/*
 * The usnic BTL's counters read through MPI_T, for the benchmarks
 * (perf.c, goodput.c).  A counter is bound only if the BTL registered it
 * (it does so when it is opened); an absent one reads as -1.  Each counter
 * has one element per BTL module: a read sums them.
 */
#ifndef BENCH_USNIC_PVARS_H
#define BENCH_USNIC_PVARS_H

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define USNIC_PVARS_MAX 8

typedef struct {
    int inited, have_session;
    MPI_T_pvar_session session;
    const char *const *names;
    size_t n;
    MPI_T_pvar_handle handle[USNIC_PVARS_MAX];
    MPI_Datatype type[USNIC_PVARS_MAX];
    int count[USNIC_PVARS_MAX]; /* elements (one per BTL module); 0 = absent */
} usnic_pvars_t;

static inline size_t usnic_pvar_type_bytes(MPI_Datatype t)
{
    if (t == MPI_UNSIGNED_LONG_LONG || t == MPI_LONG_LONG || t == MPI_UINT64_T)
        return sizeof(unsigned long long);
    if (t == MPI_UNSIGNED_LONG || t == MPI_LONG)
        return sizeof(unsigned long);
    if (t == MPI_UNSIGNED || t == MPI_INT)
        return sizeof(unsigned);
    return 0;
}

static inline long long usnic_pvar_value(MPI_Datatype t, const void *buf, int i)
{
    if (t == MPI_UNSIGNED_LONG_LONG || t == MPI_LONG_LONG || t == MPI_UINT64_T)
        return (long long)((const unsigned long long *)buf)[i];
    if (t == MPI_UNSIGNED_LONG || t == MPI_LONG)
        return (long long)((const unsigned long *)buf)[i];
    return (long long)((const unsigned *)buf)[i];
}

/* Bind the first |n| (at most USNIC_PVARS_MAX) of |names| that exist. */
static inline void usnic_pvars_open(usnic_pvars_t *p, const char *const *names, size_t n)
{
    int provided, num, idx;
    size_t k;

    memset(p, 0, sizeof(*p));
    p->names = names;
    p->n = n < USNIC_PVARS_MAX ? n : USNIC_PVARS_MAX;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    p->inited = 1;
    if (MPI_T_pvar_session_create(&p->session) != MPI_SUCCESS)
        return;
    p->have_session = 1;
    if (MPI_T_pvar_get_num(&num) != MPI_SUCCESS)
        return;
    for (idx = 0; idx < num; idx++) {
        char name[256], desc[256];
        int nl = sizeof(name), dl = sizeof(desc), verb, cls, bind, ro, cont, at;
        MPI_Datatype type;
        MPI_T_enum et;

        if (MPI_T_pvar_get_info(idx, name, &nl, &verb, &cls, &type, &et, desc,
                                &dl, &bind, &ro, &cont, &at) != MPI_SUCCESS)
            continue; /* e.g. a closed component's pvar */
        for (k = 0; k < p->n; k++) {
            int count = 0;
            if (strcmp(name, names[k]) != 0 || p->count[k] > 0 ||
                bind != MPI_T_BIND_NO_OBJECT || usnic_pvar_type_bytes(type) == 0)
                continue;
            if (MPI_T_pvar_handle_alloc(p->session, idx, NULL, &p->handle[k],
                                        &count) != MPI_SUCCESS)
                continue;
            if (!cont)
                MPI_T_pvar_start(p->session, p->handle[k]);
            p->type[k] = type;
            p->count[k] = count > 0 ? count : 0;
        }
    }
}

/* Current values summed over the modules into |out| (p->n of them); -1
 * where a counter is absent. */
static inline void usnic_pvars_read(usnic_pvars_t *p, long long *out)
{
    size_t k;

    for (k = 0; k < p->n; k++) {
        void *buf;
        int i;

        out[k] = -1;
        if (p->count[k] <= 0)
            continue;
        buf = calloc((size_t)p->count[k], usnic_pvar_type_bytes(p->type[k]));
        if (buf != NULL &&
            MPI_T_pvar_read(p->session, p->handle[k], buf) == MPI_SUCCESS) {
            out[k] = 0;
            for (i = 0; i < p->count[k]; i++)
                out[k] += usnic_pvar_value(p->type[k], buf, i);
        }
        free(buf);
    }
}

static inline void usnic_pvars_close(usnic_pvars_t *p)
{
    size_t k;

    for (k = 0; k < p->n; k++)
        if (p->count[k] > 0)
            MPI_T_pvar_handle_free(p->session, &p->handle[k]);
    if (p->have_session)
        MPI_T_pvar_session_free(&p->session);
    if (p->inited)
        MPI_T_finalize();
}

#endif
