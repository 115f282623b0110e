/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Randomness, base elements and random derived datatypes whose type maps
 * we keep ourselves: the model of every case is computed from these maps,
 * never from Open MPI's own datatype engine.
 */
#include "stress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ===================== randomness ===================== */

uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t rng_next(rng_t *r)
{
    r->s += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    return mix64(r->s);
}

int64_t rng_range(rng_t *r, int64_t lo, int64_t hi)
{
    if (hi <= lo) {
        return lo;
    }
    return lo + (int64_t) (rng_next(r) % (uint64_t) (hi - lo + 1));
}

bool rng_pct(rng_t *r, int pct)
{
    return (int) (rng_next(r) % 100) < pct;
}

rng_t rng_for(uint64_t seed, uint64_t stream)
{
    rng_t r = {.s = mix64(seed ^ mix64(stream + 0x5bd1e995ull))};
    return r;
}

/* ===================== base elements ===================== */

static MPI_Datatype pair_type = MPI_DATATYPE_NULL;

static MPI_Datatype pair_mpi_type(void)
{
    if (MPI_DATATYPE_NULL == pair_type) {
        int bl[2] = {1, 1};
        MPI_Aint disp[2] = {0, 8};
        MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, s;
        MPI_Type_create_struct(2, bl, disp, types, &s);
        MPI_Type_create_resized(s, 0, 16, &pair_type);
        MPI_Type_free(&s);
        MPI_Type_commit(&pair_type);
    }
    return pair_type;
}

size_t base_span(int base)
{
    static const size_t span[BASE_COUNT] = {1, 4, 8, 16};
    return span[base];
}

size_t base_payload(int base)
{
    static const size_t payload[BASE_COUNT] = {1, 4, 8, 12};
    return payload[base];
}

int base_basics(int base)
{
    return BASE_PAIR == base ? 2 : 1;
}

MPI_Datatype base_mpi_type(int base)
{
    switch (base) {
    case BASE_BYTE: return MPI_BYTE;
    case BASE_INT: return MPI_INT;
    case BASE_DOUBLE: return MPI_DOUBLE;
    default: return pair_mpi_type();
    }
}

const char *base_name(int base)
{
    static const char *const names[BASE_COUNT] = {"byte", "int", "double", "int+double"};
    return names[base];
}

/* Values are small integers, exact in a double, so sums are exact too */
static double value_double(uint32_t v)
{
    return (double) (int32_t) (v >> 8);
}

void base_store(int base, uint8_t *p, uint32_t v)
{
    int32_t i = (int32_t) v;
    double d = value_double(v);
    switch (base) {
    case BASE_BYTE: *p = (uint8_t) v; break;
    case BASE_INT: memcpy(p, &i, sizeof(i)); break;
    case BASE_DOUBLE: memcpy(p, &d, sizeof(d)); break;
    default:
        memcpy(p, &i, sizeof(i));
        d = value_double(v ^ 0x5a5a5a5au);
        memcpy(p + 8, &d, sizeof(d));
        break;
    }
}

void base_add(int base, uint8_t *p, uint32_t v, int times)
{
    if (BASE_INT == base) {
        int32_t i;
        memcpy(&i, p, sizeof(i));
        i = (int32_t) ((uint32_t) i + (uint32_t) times * v);
        memcpy(p, &i, sizeof(i));
    } else if (BASE_DOUBLE == base) {
        double d;
        memcpy(&d, p, sizeof(d));
        d += times * value_double(v);
        memcpy(p, &d, sizeof(d));
    }
}

/* ===================== type builders ===================== */

static void dtype_base(int base, dtype_t *t)
{
    memset(t, 0, sizeof(*t));
    t->dt = base_mpi_type(base);
    t->base = base;
    t->nmap = 1;
    t->map = (MPI_Aint *) malloc(sizeof(MPI_Aint));
    t->map[0] = 0;
    t->lb = 0;
    t->extent = (MPI_Aint) base_span(base);
    t->lo = 0;
    t->hi = (MPI_Aint) base_span(base);
    snprintf(t->desc, sizeof(t->desc), "%s", base_name(base));
}

void dtype_free(dtype_t *t)
{
    if (t->owned && MPI_DATATYPE_NULL != t->dt) {
        MPI_Type_free(&t->dt);
    }
    free(t->map);
    t->map = NULL;
    t->nmap = 0;
}

static int cmp_aint(const void *a, const void *b)
{
    MPI_Aint x = *(const MPI_Aint *) a, y = *(const MPI_Aint *) b;
    return (x > y) - (x < y);
}

/* No two base elements of one element share a byte */
static bool map_is_disjoint(const dtype_t *t)
{
    MPI_Aint *s = (MPI_Aint *) malloc((size_t) t->nmap * sizeof(*s));
    memcpy(s, t->map, (size_t) t->nmap * sizeof(*s));
    qsort(s, (size_t) t->nmap, sizeof(*s), cmp_aint);
    bool ok = true;
    for (int i = 1; i < t->nmap && ok; ++i) {
        ok = s[i] - s[i - 1] >= (MPI_Aint) base_span(t->base);
    }
    free(s);
    return ok;
}

/* Commit |dt| as |t|'s type with map |map| (taken) and fill in the rest */
static bool dtype_finish(dtype_t *t, int base, MPI_Datatype dt, MPI_Aint *map, int nmap)
{
    memset(t, 0, sizeof(*t));
    t->dt = dt;
    t->owned = true;
    t->base = base;
    t->map = map;
    t->nmap = nmap;
    MPI_Type_commit(&t->dt);
    MPI_Type_get_extent(t->dt, &t->lb, &t->extent);
    t->lo = map[0];
    t->hi = map[0];
    for (int i = 0; i < nmap; ++i) {
        if (map[i] < t->lo) {
            t->lo = map[i];
        }
        if (map[i] > t->hi) {
            t->hi = map[i];
        }
    }
    t->hi += (MPI_Aint) base_span(base);
    return map_is_disjoint(t);
}

/* The map of |n| copies of |in| at byte displacements |disp|; NULL if too big */
static MPI_Aint *map_place(const dtype_t *in, const MPI_Aint *disp, int n, int *nmap_p)
{
    long total = (long) n * in->nmap;
    if (total > DTYPE_MAX_MAP || total < 1) {
        return NULL;
    }
    MPI_Aint *map = (MPI_Aint *) malloc((size_t) total * sizeof(*map));
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < in->nmap; ++j) {
            map[(long) i * in->nmap + j] = disp[i] + in->map[j];
        }
    }
    *nmap_p = (int) total;
    return map;
}

/* Replace |t| (the inner type, consumed) by a type with copies of it at
 * |disp| (bytes); |dt| is the MPI type built over t->dt. */
static bool replace_by(dtype_t *t, MPI_Datatype dt, const MPI_Aint *disp, int n, const char *desc)
{
    int nmap = 0;
    MPI_Aint *map = map_place(t, disp, n, &nmap);
    if (NULL == map) {
        MPI_Type_free(&dt);
        return false;
    }
    dtype_t out;
    bool ok = dtype_finish(&out, t->base, dt, map, nmap);
    snprintf(out.desc, sizeof(out.desc), "%s", desc);
    if (!ok) {
        dtype_free(&out);
        return false;
    }
    dtype_free(t);
    *t = out;
    return true;
}

static bool t_contig(dtype_t *t, int k)
{
    MPI_Datatype dt;
    MPI_Aint disp[64];
    char d[DTYPE_DESC];
    for (int i = 0; i < k; ++i) {
        disp[i] = i * t->extent;
    }
    MPI_Type_contiguous(k, t->dt, &dt);
    snprintf(d, sizeof(d), "contig(%d)<%.400s>", k, t->desc);
    return replace_by(t, dt, disp, k, d);
}

/* vector (|bytes| false: stride in extents) or hvector (stride in bytes) */
static bool t_vector(dtype_t *t, int cnt, int bl, MPI_Aint stride, bool bytes)
{
    MPI_Datatype dt;
    MPI_Aint disp[64];
    char d[DTYPE_DESC];
    int n = 0;
    for (int i = 0; i < cnt; ++i) {
        for (int j = 0; j < bl; ++j) {
            disp[n++] = (bytes ? i * stride : i * stride * t->extent) + j * t->extent;
        }
    }
    if ((bytes ? stride : stride * t->extent) == -1 && cnt > 1) {
        /* Open MPI 4.1 gives a (h)vector whose blocks lie one byte apart
         * downwards the bounds and packing order of +1 (hvector(2,1,-1) of
         * MPI_BYTE packs bytes 0,1, not 0,-1, over every BTL), so such
         * types would only test that; seed 199359750542150 found it.  Every
         * other stride, and indexed types with descending blocks, pack right. */
        return false;
    }
    if (bytes) {
        MPI_Type_create_hvector(cnt, bl, stride, t->dt, &dt);
    } else {
        MPI_Type_vector(cnt, bl, (int) stride, t->dt, &dt);
    }
    snprintf(d, sizeof(d), "%s(%d,%d,%ld)<%.400s>", bytes ? "hvector" : "vector", cnt, bl, (long) stride, t->desc);
    return replace_by(t, dt, disp, n, d);
}

enum { IDX_INDEXED, IDX_HINDEXED, IDX_BLOCK, IDX_HBLOCK };

/* indexed, hindexed, indexed_block, hindexed_block (|bl|[0] for blocks) */
static bool t_indexed(dtype_t *t, int kind, int cnt, const int *bl, const MPI_Aint *dsp)
{
    static const char *const names[] = {"indexed", "hindexed", "indexed_block", "hindexed_block"};
    bool bytes = IDX_HINDEXED == kind || IDX_HBLOCK == kind;
    MPI_Datatype dt;
    MPI_Aint disp[64];
    int idisp[8];
    char d[DTYPE_DESC], args[160] = "";
    size_t used = 0;
    int n = 0;
    for (int i = 0; i < cnt; ++i) {
        int b = (IDX_BLOCK == kind || IDX_HBLOCK == kind) ? bl[0] : bl[i];
        for (int j = 0; j < b; ++j) {
            disp[n++] = (bytes ? dsp[i] : dsp[i] * t->extent) + j * t->extent;
        }
        idisp[i] = (int) dsp[i];
        used += (size_t) snprintf(args + used, sizeof(args) - used, "%s%d@%ld", i ? "," : "", b, (long) dsp[i]);
    }
    switch (kind) {
    case IDX_INDEXED: MPI_Type_indexed(cnt, bl, idisp, t->dt, &dt); break;
    case IDX_HINDEXED: MPI_Type_create_hindexed(cnt, bl, dsp, t->dt, &dt); break;
    case IDX_BLOCK: MPI_Type_create_indexed_block(cnt, bl[0], idisp, t->dt, &dt); break;
    default: MPI_Type_create_hindexed_block(cnt, bl[0], dsp, t->dt, &dt); break;
    }
    snprintf(d, sizeof(d), "%s(%s)<%.300s>", names[kind], args, t->desc);
    return replace_by(t, dt, disp, n, d);
}

/* struct of blocks that are either |t| or the bare base element */
static bool t_struct(dtype_t *t, int cnt, const int *bl, const MPI_Aint *dsp, const bool *bare)
{
    long total = 0;
    for (int i = 0; i < cnt; ++i) {
        total += (long) bl[i] * (bare[i] ? 1 : t->nmap);
    }
    if (total > DTYPE_MAX_MAP) {
        return false;
    }
    dtype_t b;
    dtype_base(t->base, &b);
    MPI_Datatype types[8], dt;
    MPI_Aint *map = (MPI_Aint *) malloc(DTYPE_MAX_MAP * sizeof(*map));
    char args[200] = "";
    size_t used = 0;
    int n = 0;
    for (int i = 0; i < cnt; ++i) {
        const dtype_t *in = bare[i] ? &b : t;
        types[i] = in->dt;
        for (int j = 0; j < bl[i]; ++j) {
            for (int k = 0; k < in->nmap; ++k) {
                map[n++] = dsp[i] + j * in->extent + in->map[k];
            }
        }
        used += (size_t) snprintf(args + used, sizeof(args) - used, "%s%d@%ld%s", i ? "," : "", bl[i], (long) dsp[i],
                                  bare[i] ? "b" : "");
    }
    MPI_Type_create_struct(cnt, bl, dsp, types, &dt);
    dtype_free(&b);
    dtype_t out;
    bool ok = dtype_finish(&out, t->base, dt, map, n);
    snprintf(out.desc, sizeof(out.desc), "struct(%s)<%.300s>", args, t->desc);
    if (!ok) {
        dtype_free(&out);
        return false;
    }
    dtype_free(t);
    *t = out;
    return true;
}

static bool t_resized(dtype_t *t, MPI_Aint lb, MPI_Aint extent)
{
    MPI_Datatype dt;
    char d[DTYPE_DESC];
    MPI_Aint disp[1] = {0};
    MPI_Type_create_resized(t->dt, lb, extent, &dt);
    snprintf(d, sizeof(d), "resized(%ld,%ld)<%.420s>", (long) lb, (long) extent, t->desc);
    return replace_by(t, dt, disp, 1, d);
}

/* ===================== random types ===================== */

/* One random constructor around |t|; false if it would overlap itself */
static bool wrap_random(rng_t *r, dtype_t *t, bool no_resized)
{
    int bl[8];
    MPI_Aint dsp[8];
    bool bare[8];
    int cnt = (int) rng_range(r, 1, 4);
    MPI_Aint ext = t->extent > 0 ? t->extent : 1;
    for (int i = 0; i < cnt; ++i) {
        bl[i] = (int) rng_range(r, 1, 3);
        bare[i] = rng_pct(r, 30);
    }
    switch (rng_range(r, 0, no_resized ? 7 : 8)) {
    case 0: return t_contig(t, (int) rng_range(r, 1, 5));
    case 1: return t_vector(t, cnt, bl[0], rng_range(r, -3, 4) + (rng_pct(r, 50) ? bl[0] : 0), false);
    case 2: return t_vector(t, cnt, bl[0], bl[0] * ext + rng_range(r, -8, 3 * ext), true);
    case 3: /* indexed: displacements in extents, unordered, possibly negative */
    case 5:
        for (int i = 0; i < cnt; ++i) {
            dsp[i] = rng_range(r, -6, 12);
        }
        return t_indexed(t, rng_pct(r, 50) ? IDX_INDEXED : IDX_BLOCK, cnt, bl, dsp);
    case 4:
    case 6:
        for (int i = 0; i < cnt; ++i) {
            dsp[i] = rng_range(r, -4 * ext, 12 * ext);
        }
        return t_indexed(t, rng_pct(r, 50) ? IDX_HINDEXED : IDX_HBLOCK, cnt, bl, dsp);
    case 7:
        for (int i = 0; i < cnt; ++i) {
            dsp[i] = rng_range(r, -4 * ext, 12 * ext);
        }
        return t_struct(t, cnt, bl, dsp, bare);
    default: /* gaps between elements, a moved lower bound */
        return t_resized(t, t->lo - rng_range(r, 0, 16), (t->hi - t->lo) + rng_range(r, 0, 3 * ext));
    }
}

/* Consecutive elements must not overlap: stretch the extent (plus |gap|)
 * if they do */
static void fix_extent(dtype_t *t, MPI_Aint gap)
{
    for (MPI_Aint more = 0; t->extent < t->hi - t->lo || t->extent <= 0; ++more) {
        (void) t_resized(t, t->lb, (t->hi - t->lo) + gap + more);
    }
}

void dtype_random(rng_t *r, int base, const dtype_opts_t *o, dtype_t *t)
{
    dtype_base(base, t);
    if (o->simple) {
        if (rng_pct(r, 50)) {
            (void) t_contig(t, (int) rng_range(r, 1, 4));
        }
        return;
    }
    int depth = (int) rng_range(r, 0, o->max_depth);
    for (int level = 0; level < depth; ++level) {
        /* a constructor that would overlap itself leaves |t| as it was */
        for (int attempt = 0; attempt < 8 && !wrap_random(r, t, o->no_resized); ++attempt) {
        }
    }
    fix_extent(t, rng_range(r, 0, 8));
}

/* ===================== named shapes ===================== */

bool dtype_named(const char *name, int base, dtype_t *t)
{
    if (0 == strcmp(name, "issue12-send")) {
        /* block-hindexed: one block of 2 at byte 8 */
        int bl = 2;
        MPI_Aint d = 8;
        dtype_base(base, t);
        return t_indexed(t, IDX_HBLOCK, 1, &bl, &d);
    }
    if (0 == strcmp(name, "issue12-recv")) {
        /* indexed(1 block of 5) over hindexed(2 blocks of 2 at 5 and 2
         * elements) over contiguous(1): bytes 20 and 8 for ints */
        int bl2[2] = {2, 2}, bl5 = 5;
        MPI_Aint d2[2] = {5 * (MPI_Aint) base_span(base), 2 * (MPI_Aint) base_span(base)}, d0 = 0;
        dtype_base(base, t);
        return t_contig(t, 1) && t_indexed(t, IDX_HINDEXED, 2, bl2, d2) && t_indexed(t, IDX_INDEXED, 1, &bl5, &d0);
    }
    if (0 == strcmp(name, "issue12-osc")) {
        /* block-hindexed over hvector over block-indexed */
        int one = 1, two = 2;
        MPI_Aint bi[2] = {0, 2}, bh[2] = {0, 24 * (MPI_Aint) base_span(base)};
        dtype_base(base, t);
        return t_indexed(t, IDX_BLOCK, 2, &one, bi) && t_vector(t, 2, 1, 7 * (MPI_Aint) base_span(base), true) &&
               t_indexed(t, IDX_HBLOCK, 2, &two, bh) && (fix_extent(t, 0), true);
    }
    return false;
}

/* ===================== buffers and values ===================== */

size_t elems_round_up(size_t n, const int *nmaps, int k)
{
    size_t lcm = 1;
    for (int i = 0; i < k; ++i) {
        size_t a = lcm, b = (size_t) nmaps[i];
        while (0 != b) {
            size_t t = a % b;
            a = b;
            b = t;
        }
        lcm = lcm / a * (size_t) nmaps[i];
        if (lcm > 65536) {
            return 0; /* no count fits them all: an empty message */
        }
    }
    return (n + lcm - 1) / lcm * lcm;
}

uint32_t value_id(uint64_t salt, size_t e)
{
    return (uint32_t) mix64(salt + 0x9e3779b97f4a7c15ull * (uint64_t) (e + 1));
}

void tbuf_alloc(tbuf_t *b, const dtype_t *t, size_t count, int fill, uint64_t salt)
{
    /* what the elements touch, and their bounds: a window must hold the
     * whole [lb, ub) of a target type, touched or not, and the buffer's
     * origin itself */
    MPI_Aint lo = 0, hi = 0;
    if (count > 0) {
        MPI_Aint first_lo = t->lo < t->lb ? t->lo : t->lb;
        MPI_Aint last_hi = t->hi > t->lb + t->extent ? t->hi : t->lb + t->extent;
        lo = first_lo < 0 ? first_lo : 0; /* the origin inside: window displacements stay >= 0 */
        hi = (MPI_Aint) (count - 1) * t->extent + last_hi;
    }
    b->span = (size_t) (hi - lo) + 16;
    b->mem = (uint8_t *) malloc(b->span);
    if (NULL == b->mem) {
        fprintf(stderr, "stress: out of memory (%zu bytes)\n", b->span);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    b->origin = b->mem + 8 - lo;
    if (fill >= 0) {
        memset(b->mem, fill, b->span);
    } else {
        uint64_t *w = (uint64_t *) b->mem;
        for (size_t i = 0; i < b->span / 8; ++i) {
            w[i] = mix64(salt ^ i);
        }
        memset(b->mem + b->span / 8 * 8, 0x3c, b->span % 8);
    }
}

void tbuf_free(tbuf_t *b)
{
    free(b->mem);
    b->mem = b->origin = NULL;
}

void tbuf_store(tbuf_t *b, const dtype_t *t, size_t n, uint64_t salt)
{
    for (size_t e = 0; e < n; ++e) {
        base_store(t->base, b->origin + dtype_offset(t, e), value_id(salt, e));
    }
}

uint64_t digest_bytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *s = (const uint8_t *) p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = mix64(h ^ w) + i;
    }
    for (; i < n; ++i) {
        h = mix64(h ^ s[i]);
    }
    return mix64(h ^ n);
}
