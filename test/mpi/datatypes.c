/*
 * datatypes.c - non-contiguous derived datatypes between ranks 0 and 1.
 *
 * Each case sends with one memory layout and receives with another layout
 * of the same type signature, e.g. a strided MPI_Type_vector into a
 * contiguous array, a contiguous array into an MPI_Type_indexed, an array
 * of C structs (MPI_Type_create_struct with padding and an unsent field)
 * into a packed layout, and a ~4 MiB vector of doubles (6 MiB extent).
 *
 * A layout is described by the byte offset and basic type of every element
 * in signature order. The sender writes a value depending on the element
 * number and direction at each element; the receiver poisons its whole
 * buffer first and afterwards checks every element *and* that every byte
 * that is not an element (gaps, padding, leading bytes, tail) still holds
 * the poison. MPI_Get_count / MPI_Get_elements are checked too.
 *
 * Every case runs in both directions, first as blocking MPI_Send/MPI_Recv,
 * then as a simultaneous MPI_Isend/MPI_Irecv exchange. Extra ranks idle.
 */
#define TEST_NAME "datatypes"
#include "mpitest.h"

#define SEND_POISON 0x11
#define RECV_POISON 0xAB
#define LEAD 8          /* bytes before the first element, must stay put */
#define TAIL 8          /* bytes after the last element, must stay put   */

/* ------------------------------------------------------------------ */
/* Element values                                                      */
/* ------------------------------------------------------------------ */

enum kind { K_CHAR, K_SHORT, K_INT, K_DOUBLE };
static const size_t KIND_SIZE[] = {1, sizeof(short), sizeof(int),
                                   sizeof(double)};

/* The bytes element e of kind k must hold (for a given direction seed).
 * Doubles are small multiples of 1/2, so they are exact, normal numbers. */
static void element_bytes(enum kind k, size_t e, uint32_t seed, void *out)
{
    uint32_t h = mix32(seed ^ ((uint32_t)e * 0x9e3779b9U));
    char c = (char)(h & 0x7f);
    short s = (short)(h & 0x7fff);
    int i = (int)(h & 0x7fffffff) - 0x40000000;
    double d = (double)(int32_t)(h & 0xffffff) * 0.5 - 1000.0;

    switch (k) {
    case K_CHAR: memcpy(out, &c, sizeof(c)); break;
    case K_SHORT: memcpy(out, &s, sizeof(s)); break;
    case K_INT: memcpy(out, &i, sizeof(i)); break;
    case K_DOUBLE: memcpy(out, &d, sizeof(d)); break;
    }
}

/* ------------------------------------------------------------------ */
/* Layouts                                                             */
/* ------------------------------------------------------------------ */

struct layout {
    char name[96];
    MPI_Datatype type;   /* datatype passed to send/recv                */
    int free_type;       /* whether type is a derived type we created   */
    int count;           /* count passed to send/recv                   */
    size_t nelem;        /* basic elements in the type signature        */
    size_t *off;         /* byte offset of each element in the buffer   */
    uint8_t *kind;       /* enum kind of each element                   */
    size_t bufsize;      /* bytes of buffer, including LEAD and TAIL    */
};

static void layout_alloc(struct layout *l, size_t nelem)
{
    l->nelem = nelem;
    l->off = xmalloc(sizeof(size_t) * nelem);
    l->kind = xmalloc(nelem);
    l->free_type = 0;
}

/* Buffer size from the furthest element end, plus the tail. */
static void layout_finish(struct layout *l)
{
    size_t end = LEAD;
    for (size_t e = 0; e < l->nelem; e++) {
        size_t x = l->off[e] + KIND_SIZE[l->kind[e]];
        if (x > end)
            end = x;
    }
    l->bufsize = end + TAIL;
}

static void layout_free(struct layout *l)
{
    if (l->free_type)
        MPI_Type_free(&l->type);
    free(l->off);
    free(l->kind);
}

static MPI_Datatype basic_type(enum kind k)
{
    switch (k) {
    case K_CHAR: return MPI_CHAR;
    case K_SHORT: return MPI_SHORT;
    case K_INT: return MPI_INT;
    default: return MPI_DOUBLE;
    }
}

/* n elements of kind k, back to back. */
static void make_contig(struct layout *l, enum kind k, size_t n)
{
    layout_alloc(l, n);
    snprintf(l->name, sizeof(l->name), "contiguous %zu x %zuB", n,
             KIND_SIZE[k]);
    l->type = basic_type(k);
    l->count = (int)n;
    for (size_t e = 0; e < n; e++) {
        l->off[e] = LEAD + e * KIND_SIZE[k];
        l->kind[e] = (uint8_t)k;
    }
    layout_finish(l);
}

/* One MPI_Type_vector(count, blocklen, stride) of kind k. */
static void make_vector(struct layout *l, enum kind k, int count,
                        int blocklen, int stride)
{
    size_t sz = KIND_SIZE[k], e = 0;

    layout_alloc(l, (size_t)count * (size_t)blocklen);
    snprintf(l->name, sizeof(l->name), "vector(%d,%d,%d) of %zuB", count,
             blocklen, stride, sz);
    CHECK_MPI(MPI_Type_vector(count, blocklen, stride, basic_type(k),
                              &l->type));
    CHECK_MPI(MPI_Type_commit(&l->type));
    l->free_type = 1;
    l->count = 1;
    for (int b = 0; b < count; b++) {
        for (int j = 0; j < blocklen; j++, e++) {
            l->off[e] = LEAD + ((size_t)b * (size_t)stride + (size_t)j) * sz;
            l->kind[e] = (uint8_t)k;
        }
    }
    layout_finish(l);
}

/* An MPI_Type_indexed of kind k with nblocks irregular blocks holding
 * total elements; 'variant' changes the block lengths and gaps. */
static void make_indexed(struct layout *l, enum kind k, int total,
                         int variant)
{
    int nblocks = 0, placed = 0, disp = 0;
    int *lens = xmalloc(sizeof(int) * (size_t)total);
    int *disps = xmalloc(sizeof(int) * (size_t)total);
    size_t sz = KIND_SIZE[k], e = 0;

    while (placed < total) {
        int len = 1 + (int)(mix32((uint32_t)(nblocks * 7 + variant)) % 6);
        if (len > total - placed)
            len = total - placed;
        disp += 1 + (int)(mix32((uint32_t)(nblocks * 13 + variant)) % 4);
        lens[nblocks] = len;
        disps[nblocks] = disp;
        disp += len;
        placed += len;
        nblocks++;
    }
    layout_alloc(l, (size_t)total);
    snprintf(l->name, sizeof(l->name), "indexed(%d blocks, variant %d) of "
             "%zuB", nblocks, variant, sz);
    CHECK_MPI(MPI_Type_indexed(nblocks, lens, disps, basic_type(k),
                               &l->type));
    CHECK_MPI(MPI_Type_commit(&l->type));
    l->free_type = 1;
    l->count = 1;
    for (int b = 0; b < nblocks; b++)
        for (int j = 0; j < lens[b]; j++, e++) {
            l->off[e] = LEAD + ((size_t)disps[b] + (size_t)j) * sz;
            l->kind[e] = (uint8_t)k;
        }
    free(lens);
    free(disps);
    layout_finish(l);
}

/* A C struct with padding after 'c', an unsent 'skip' field and tail
 * padding; only c, d and i[3] are described to MPI. */
struct rec {
    char c;
    double d;
    int i[3];
    short skip;
};

/* Build a struct type {char, double, int[3]} at the given displacements,
 * resized to 'extent', and the matching element offsets for n items. */
static void make_struct_like(struct layout *l, int n, const MPI_Aint *disp,
                             MPI_Aint extent, const char *what)
{
    int blen[3] = {1, 1, 3};
    MPI_Datatype types[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT}, tmp;
    size_t e = 0;

    layout_alloc(l, (size_t)n * 5);
    snprintf(l->name, sizeof(l->name), "%d x %s (extent %ld)", n, what,
             (long)extent);
    CHECK_MPI(MPI_Type_create_struct(3, blen, disp, types, &tmp));
    CHECK_MPI(MPI_Type_create_resized(tmp, 0, extent, &l->type));
    CHECK_MPI(MPI_Type_free(&tmp));
    CHECK_MPI(MPI_Type_commit(&l->type));
    l->free_type = 1;
    l->count = n;

    MPI_Aint lb, ext;
    CHECK_MPI(MPI_Type_get_extent(l->type, &lb, &ext));
    if (lb != 0 || ext != extent)
        fail("%s: extent %ld/%ld, expected 0/%ld", l->name, (long)lb,
             (long)ext, (long)extent);
    for (int r = 0; r < n; r++) {
        size_t base = LEAD + (size_t)r * (size_t)extent;
        l->off[e] = base + (size_t)disp[0];
        l->kind[e++] = K_CHAR;
        l->off[e] = base + (size_t)disp[1];
        l->kind[e++] = K_DOUBLE;
        for (int j = 0; j < 3; j++) {
            l->off[e] = base + (size_t)disp[2] + (size_t)j * sizeof(int);
            l->kind[e++] = K_INT;
        }
    }
    layout_finish(l);
}

static void make_struct_array(struct layout *l, int n)
{
    MPI_Aint disp[3] = {offsetof(struct rec, c), offsetof(struct rec, d),
                        offsetof(struct rec, i)};
    make_struct_like(l, n, disp, sizeof(struct rec), "struct rec");
}

static void make_packed_struct(struct layout *l, int n)
{
    MPI_Aint disp[3] = {0, 1, 1 + sizeof(double)};
    make_struct_like(l, n, disp, 1 + sizeof(double) + 3 * sizeof(int),
                     "packed {char,double,int[3]}");
}

/* ------------------------------------------------------------------ */
/* Filling and checking buffers                                        */
/* ------------------------------------------------------------------ */

static uint32_t direction_seed(int src, int dst, int case_no, int mode)
{
    return mix32((uint32_t)(src * 1000 + dst * 100 + case_no * 4 + mode));
}

static uint8_t *fill_send(const struct layout *l, uint32_t seed)
{
    uint8_t *buf = xmalloc(l->bufsize);
    memset(buf, SEND_POISON, l->bufsize);
    for (size_t e = 0; e < l->nelem; e++)
        element_bytes((enum kind)l->kind[e], e, seed, buf + l->off[e]);
    return buf;
}

static uint8_t *poisoned_recv(const struct layout *l)
{
    uint8_t *buf = xmalloc(l->bufsize);
    memset(buf, RECV_POISON, l->bufsize);
    return buf;
}

static void check_recv(const struct layout *l, const uint8_t *buf,
                       uint32_t seed, const MPI_Status *st,
                       const char *what)
{
    uint8_t want[sizeof(double)];
    uint8_t *covered = calloc(l->bufsize, 1);
    int count = -1, elems = -1;

    if (!covered)
        fail("out of memory");
    CHECK_MPI(MPI_Get_count(st, l->type, &count));
    CHECK_MPI(MPI_Get_elements(st, l->type, &elems));
    if (count != l->count || elems != (int)l->nelem)
        fail("%s: MPI_Get_count=%d (want %d), MPI_Get_elements=%d "
             "(want %zu)", what, count, l->count, elems, l->nelem);
    for (size_t e = 0; e < l->nelem; e++) {
        size_t sz = KIND_SIZE[l->kind[e]];
        element_bytes((enum kind)l->kind[e], e, seed, want);
        if (memcmp(buf + l->off[e], want, sz) != 0)
            fail("%s: element %zu (%zu bytes at offset %zu) is wrong", what,
                 e, sz, l->off[e]);
        memset(covered + l->off[e], 1, sz);
    }
    for (size_t b = 0; b < l->bufsize; b++)
        if (!covered[b] && buf[b] != RECV_POISON)
            fail("%s: byte %zu is not part of the datatype but was "
                 "overwritten (0x%02x)", what, b, buf[b]);
    free(covered);
}

/* The two layouts of a case must describe the same type signature. */
static void check_signatures(const struct layout *a, const struct layout *b)
{
    if (a->nelem != b->nelem)
        fail("test bug: %s and %s have %zu vs %zu elements", a->name,
             b->name, a->nelem, b->nelem);
    for (size_t e = 0; e < a->nelem; e++)
        if (a->kind[e] != b->kind[e])
            fail("test bug: %s and %s differ at element %zu", a->name,
                 b->name, e);
}

/* ------------------------------------------------------------------ */
/* Running a case                                                      */
/* ------------------------------------------------------------------ */

/* Blocking: 0 -> 1 then 1 -> 0, sender uses s, receiver uses r. */
static void run_blocking(const struct layout *s, const struct layout *r,
                         int case_no)
{
    char what[256];

    for (int src = 0; src <= 1; src++) {
        int dst = 1 - src;
        uint32_t seed = direction_seed(src, dst, case_no, 0);
        if (my_rank == src) {
            uint8_t *buf = fill_send(s, seed);
            CHECK_MPI(MPI_Send(buf + LEAD, s->count, s->type, dst, case_no,
                               MPI_COMM_WORLD));
            free(buf);
        } else if (my_rank == dst) {
            MPI_Status st;
            uint8_t *buf = poisoned_recv(r);
            CHECK_MPI(MPI_Recv(buf + LEAD, r->count, r->type, src, case_no,
                               MPI_COMM_WORLD, &st));
            snprintf(what, sizeof(what), "case %d blocking %s -> %s",
                     case_no, s->name, r->name);
            check_recv(r, buf, seed, &st, what);
            free(buf);
        }
    }
}

/* Nonblocking: both ranks send with s and receive with r at once. */
static void run_exchange(const struct layout *s, const struct layout *r,
                         int case_no)
{
    int peer = 1 - my_rank;
    MPI_Request req[2];
    MPI_Status st[2];
    char what[256];
    uint8_t *rbuf = poisoned_recv(r);
    uint8_t *sbuf = fill_send(s, direction_seed(my_rank, peer, case_no, 1));

    CHECK_MPI(MPI_Irecv(rbuf + LEAD, r->count, r->type, peer, case_no,
                        MPI_COMM_WORLD, &req[0]));
    CHECK_MPI(MPI_Isend(sbuf + LEAD, s->count, s->type, peer, case_no,
                        MPI_COMM_WORLD, &req[1]));
    CHECK_MPI(MPI_Waitall(2, req, st));
    snprintf(what, sizeof(what), "case %d exchange %s -> %s", case_no,
             s->name, r->name);
    check_recv(r, rbuf, direction_seed(peer, my_rank, case_no, 1), &st[0],
               what);
    free(rbuf);
    free(sbuf);
}

static int case_counter = 0;

/* Run one (send layout, receive layout) case; frees both layouts. */
static void run_case(struct layout *s, struct layout *r)
{
    int case_no = ++case_counter;

    check_signatures(s, r);
    if (my_rank <= 1) {
        run_blocking(s, r, case_no);
        run_exchange(s, r, case_no);
    }
    layout_free(s);
    layout_free(r);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void vector_cases(void)
{
    struct layout a, b;

    make_vector(&a, K_INT, 1000, 3, 7);
    make_contig(&b, K_INT, 3000);
    run_case(&a, &b);

    make_contig(&a, K_INT, 3000);
    make_vector(&b, K_INT, 1000, 3, 7);
    run_case(&a, &b);

    make_vector(&a, K_INT, 1000, 3, 7);
    make_vector(&b, K_INT, 1500, 2, 5);
    run_case(&a, &b);

    /* odd byte-sized blocks: fragment boundaries fall inside blocks */
    make_vector(&a, K_CHAR, 5000, 3, 5);
    make_contig(&b, K_CHAR, 15000);
    run_case(&a, &b);
}

static void indexed_cases(void)
{
    struct layout a, b;

    make_indexed(&a, K_DOUBLE, 2000, 1);
    make_contig(&b, K_DOUBLE, 2000);
    run_case(&a, &b);

    make_contig(&a, K_DOUBLE, 2000);
    make_indexed(&b, K_DOUBLE, 2000, 2);
    run_case(&a, &b);

    make_indexed(&a, K_DOUBLE, 20000, 3);
    make_indexed(&b, K_DOUBLE, 20000, 4);
    run_case(&a, &b);
}

static void struct_cases(void)
{
    struct layout a, b;

    make_struct_array(&a, 700);
    make_struct_array(&b, 700);
    run_case(&a, &b);

    make_struct_array(&a, 700);
    make_packed_struct(&b, 700);
    run_case(&a, &b);

    make_packed_struct(&a, 9000);
    make_struct_array(&b, 9000);
    run_case(&a, &b);
}

static void large_cases(void)
{
    struct layout a, b;
    const int n = 262144;   /* 2 doubles per block: 4 MiB of payload */

    make_vector(&a, K_DOUBLE, n, 2, 3);
    make_contig(&b, K_DOUBLE, (size_t)n * 2);
    run_case(&a, &b);

    make_contig(&a, K_DOUBLE, (size_t)n * 2);
    make_vector(&b, K_DOUBLE, n, 2, 3);
    run_case(&a, &b);

    make_vector(&a, K_DOUBLE, n, 2, 3);
    make_vector(&b, K_DOUBLE, n * 2, 1, 2);
    run_case(&a, &b);
}

int main(int argc, char **argv)
{
    mpitest_init(&argc, &argv);

    vector_cases();
    indexed_cases();
    struct_cases();
    large_cases();

    mpitest_pass();
    MPI_Finalize();
    return 0;
}
