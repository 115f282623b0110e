/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The randomized differential stress (see README.md): shared declarations.
 *
 * A case is a pure function of (seed, case number): every rank draws the
 * same parameters from the same generator, so any case can be replayed
 * alone (--seed S --only-case K).  Every byte a case receives is compared
 * with a model computed from the type maps, and each case folds all its
 * receive buffers (gaps included) into a digest: a run over the usnic BTL
 * and a run over vader must print the same digests.
 */
#ifndef STRESS_H
#define STRESS_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ----- deterministic randomness ----- */

typedef struct {
    uint64_t s;
} rng_t;

uint64_t rng_next(rng_t *r);
/* uniform in [lo, hi] */
int64_t rng_range(rng_t *r, int64_t lo, int64_t hi);
/* true with probability |pct| percent */
bool rng_pct(rng_t *r, int pct);
/* a generator for (seed, stream): independent of every other stream */
rng_t rng_for(uint64_t seed, uint64_t stream);
uint64_t mix64(uint64_t x);

/* ----- base elements: what every datatype is made of ----- */

enum {
    BASE_BYTE,   /* MPI_BYTE */
    BASE_INT,    /* MPI_INT */
    BASE_DOUBLE, /* MPI_DOUBLE */
    BASE_PAIR,   /* struct { int; double; }: two basic elements, a gap between */
    BASE_COUNT
};

/* Bytes an element spans in memory (gaps included) */
size_t base_span(int base);
/* Bytes it carries in a message */
size_t base_payload(int base);
/* Basic (predefined) elements in one base element */
int base_basics(int base);
MPI_Datatype base_mpi_type(int base);
const char *base_name(int base);
/* Store the value with id |v| at |p| (only the element's data bytes) */
void base_store(int base, uint8_t *p, uint32_t v);
/* Add |times| x the value with id |v| to the element at |p| (MPI_SUM) */
void base_add(int base, uint8_t *p, uint32_t v, int times);

/* ----- random derived datatypes with their type maps ----- */

#define DTYPE_MAX_MAP 4096
#define DTYPE_DESC 512

typedef struct {
    MPI_Datatype dt;   /* committed; a predefined type for BASE_* alone */
    int base;
    int nmap;          /* base elements per element of the type */
    MPI_Aint *map;     /* their byte offsets from the buffer, in type-map order */
    MPI_Aint lb, extent;
    MPI_Aint lo, hi;   /* bytes one element touches: [lo, hi) */
    bool owned;        /* dt is ours to free */
    char desc[DTYPE_DESC];
} dtype_t;

typedef struct {
    int max_depth;     /* constructors nested at most this deep (0: the base) */
    bool simple;       /* only the base or one contiguous level */
    bool no_resized;   /* no moved bounds: lb and extent as the data lies */
} dtype_opts_t;

/* A random type over |base|: never two base elements on the same byte,
 * and consecutive elements never overlap (so it can receive). */
void dtype_random(rng_t *r, int base, const dtype_opts_t *o, dtype_t *t);
/* One of the named shapes over |base| (regression cases); false if unknown */
bool dtype_named(const char *name, int base, dtype_t *t);
void dtype_free(dtype_t *t);
/* Where base element |e| of |count| elements lies, from the buffer start */
static inline MPI_Aint dtype_offset(const dtype_t *t, size_t e)
{
    return (MPI_Aint) (e / (size_t) t->nmap) * t->extent + t->map[e % (size_t) t->nmap];
}

/* A buffer for |count| elements of a type: |origin| is what MPI gets. */
typedef struct {
    uint8_t *mem;
    uint8_t *origin;
    size_t span;
} tbuf_t;

/* Allocate room for |count| elements of |t|; every byte set to |fill|
 * (fill < 0: a noise pattern from |salt|). */
void tbuf_alloc(tbuf_t *b, const dtype_t *t, size_t count, int fill, uint64_t salt);
void tbuf_free(tbuf_t *b);
/* Write the values of elements [0, n) (ids value_id(salt, e)) */
void tbuf_store(tbuf_t *b, const dtype_t *t, size_t n, uint64_t salt);
uint32_t value_id(uint64_t salt, size_t e);
/* The smallest multiple of every |nmaps| (k of them) >= |n|; 0 if their
 * least common multiple is beyond 65536 */
size_t elems_round_up(size_t n, const int *nmaps, int k);
uint64_t digest_bytes(uint64_t h, const void *p, size_t n);

/* ----- cases ----- */

typedef struct {
    uint64_t seed;
    long case_no;
    int rank, nranks;
    size_t max_bytes;          /* largest message */
    const size_t *limits;      /* protocol boundaries (bytes), 0-terminated */
    rng_t rng;
    /* results */
    uint64_t digest;
    long failures;
    char what[160];            /* the case's shape, for the log */
    const char *phase;         /* where the case is (the watchdog prints it) */
} stress_case_t;

/* The case is now at |phase| (the watchdog names it if it hangs there) */
void case_enter(stress_case_t *c, const char *phase);
/* Report a wrong result (prints one line; counts it). */
void case_fail(stress_case_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Compare buffer |got| with the model |want| (both for |count| elements of
 * |t|); report the first difference as a base element of |t| (or a gap).
 * Returns true if equal. */
bool case_check(stress_case_t *c, const char *what, const tbuf_t *got, const tbuf_t *want, const dtype_t *t,
                size_t count);
/* The same for |n| bytes whose origin is |origin| bytes in (|t| may be NULL) */
bool case_check_bytes(stress_case_t *c, const char *what, const uint8_t *got, const uint8_t *want, size_t n,
                      const dtype_t *t, size_t count, ptrdiff_t origin);

/* A message size for this case: near a protocol boundary or log-uniform */
size_t case_pick_bytes(stress_case_t *c);

void p2p_case(stress_case_t *c);
void coll_case(stress_case_t *c);
void osc_case(stress_case_t *c);
/* A named regression shape; returns false if |name| is unknown */
bool regress_case(stress_case_t *c, const char *name);
bool osc_regress_case(stress_case_t *c, const char *name);

#endif /* STRESS_H */
