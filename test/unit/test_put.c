/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Emulated PUT (btl_usnic_put.c): PUTs between two engines over the
 * in-memory wire (bytes in place, remote completion, loss), forged PUT
 * datagrams (dropped, memory untouched, sequence number not taken),
 * deregistration while a PUT is in flight, and a dead target.  The
 * registration table itself is test_reg.c's.
 */
#include "fixture.h"
#include "unit.h"

#define ISN_A 1000u
#define ISN_B 77u
#define REGION_SIZE (256 * 1024)

/* ---------------- registration table ---------------- */

/* ---------------- two engines ---------------- */

typedef struct {
    fx_t a, b;                    /* a PUTs into b */
    opal_btl_usnic_endpoint_t *ab, *ba;
    size_t cursor_a, cursor_b;
    unsigned drop_every;          /* drop every n-th datagram A -> B (0: none) */
    unsigned sent_ab;
    uint8_t *target;
    opal_btl_usnic_reg_handle_t handle;
    unsigned cb_calls;
    int cb_status;
} pair_t;

static void put_cb(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep, void *local_address,
                   struct mca_btl_base_registration_handle_t *local_handle, void *context, void *cbdata, int status)
{
    (void) btl;
    (void) ep;
    (void) local_address;
    (void) local_handle;
    (void) cbdata;
    pair_t *p = (pair_t *) context;
    ++p->cb_calls;
    p->cb_status = status;
}

static void pair_init(pair_t *p)
{
    memset(p, 0, sizeof(*p));
    opal_btl_usnic_engine_params_t pa, pb;
    fx_params_default(&pa);
    fx_params_default(&pb);
    pa.my_name = 0;
    pb.my_name = 1;
    pa.gather_send = true; /* PUT segments reference the source, as over the udp provider */
    fx_init(&p->a, &pa);
    fx_init(&p->b, &pb);
    p->ab = fx_ep_new(&p->a, 1, 64, ISN_A, ISN_B);
    p->ba = fx_ep_new(&p->b, 0, 64, ISN_B, ISN_A);
    p->target = (uint8_t *) calloc(1, REGION_SIZE);
    opal_btl_usnic_reg_add(&p->b.eng.regs, p->target, REGION_SIZE, 0, &p->handle);
}

static void pair_fini(pair_t *p)
{
    opal_btl_usnic_endpoint_flush(p->ab, OPAL_ERR_UNREACH);
    opal_btl_usnic_endpoint_flush(p->ba, OPAL_ERR_UNREACH);
    fx_progress(&p->a); /* deliver a failure callback */
    fx_complete_all(&p->a);
    fx_complete_all(&p->b);
    fx_fini(&p->a);
    fx_fini(&p->b);
    free(p->target);
}

/* One step of both sides: progress, then deliver what each posted */
static void pair_step(pair_t *p)
{
    fx_set_time(&p->a, p->a.now + 10);
    fx_set_time(&p->b, p->a.now);
    fx_progress(&p->a);
    fx_complete_all(&p->a);
    for (; p->cursor_a < p->a.nposts; ++p->cursor_a) {
        ++p->sent_ab;
        if (0 != p->drop_every && 0 == p->sent_ab % p->drop_every) {
            continue;
        }
        fx_recv(&p->b, p->a.posts[p->cursor_a].bytes, p->a.posts[p->cursor_a].len);
    }
    fx_progress(&p->b);
    fx_complete_all(&p->b);
    for (; p->cursor_b < p->b.nposts; ++p->cursor_b) {
        fx_recv(&p->a, p->b.posts[p->cursor_b].bytes, p->b.posts[p->cursor_b].len);
    }
    if (UINT64_MAX != opal_btl_usnic_engine_next_deadline(&p->a.eng) &&
        opal_btl_usnic_engine_next_deadline(&p->a.eng) <= p->a.now) {
        opal_btl_usnic_hotel_evict_due(&p->a.eng);
    }
}

static int pair_put(pair_t *p, uint8_t *src, size_t offset, size_t len)
{
    fx_set_time(&p->a, p->a.now);
    return opal_btl_usnic_put_submit(p->ab, src, (uint64_t) (uintptr_t) (p->target + offset), NULL, &p->handle, len,
                                     put_cb, p, NULL);
}

/* Bytes land in place, nothing else is written, and the callback comes
 * only after the last ACK (remote completion), exactly once. */
static void test_put_remote_completion(void)
{
    pair_t p;
    pair_init(&p);
    size_t len = 100000, offset = 4096;
    uint8_t *src = (uint8_t *) malloc(len);
    fx_fill(src, len, 5);
    REQUIRE_EQ(pair_put(&p, src, offset, len), OPAL_SUCCESS);
    /* A posts segments without B answering: no completion yet */
    for (int i = 0; i < 50; ++i) {
        fx_set_time(&p.a, p.a.now + 10);
        fx_progress(&p.a);
        fx_complete_all(&p.a);
    }
    CHECK_GT(p.a.eng.stats.num_put_sends, 0);
    CHECK_EQ(p.cb_calls, 0);
    for (int i = 0; i < 2000 && 0 == p.cb_calls; ++i) {
        pair_step(&p);
    }
    CHECK_EQ(p.cb_calls, 1);
    CHECK_EQ(p.cb_status, OPAL_SUCCESS);
    CHECK_EQ(p.a.put_dones, 1); /* through the engine's put_done upcall */
    CHECK_MEM(p.target + offset, src, len);
    uint8_t zeros[4096] = {0};
    CHECK_MEM(p.target, zeros, offset);
    CHECK_MEM(p.target + offset + len, zeros, sizeof(zeros));
    CHECK_EQ_U(p.b.eng.stats.num_put_recvs, p.a.eng.stats.num_put_sends);
    CHECK_EQ(p.b.ndels, 0); /* PUTs never reach the PML's receive callbacks */
    CHECK_EQ(opal_btl_usnic_endpoint_in_flight(p.ab), 0);
    for (int i = 0; i < 10; ++i) {
        pair_step(&p);
    }
    CHECK_EQ(p.cb_calls, 1);
    free(src);
    pair_fini(&p);
}

/* Under loss the reliability engine retransmits PUT segments; the bytes
 * still arrive exactly as sent */
/* The last segment of a PUT asks for its ACK at once (ACK_SOON): the
 * origin's completion waits for it, while the target would otherwise
 * delay the ACK in the hope of a reply to carry it. */
static void test_put_last_segment_acked_at_once(void)
{
    pair_t p;
    pair_init(&p);
    p.b.eng.p.ack_iteration_delay = 1000;
    p.b.eng.p.ack_delay = 1000000;
    size_t len = 3 * FX_MAX_CHUNK_PAYLOAD; /* a few segments, far from half a window */
    uint8_t *src = (uint8_t *) malloc(len);
    fx_fill(src, len, 11);
    REQUIRE_EQ(pair_put(&p, src, 0, len), OPAL_SUCCESS);
    for (int i = 0; i < 20 && 0 == p.cb_calls; ++i) {
        pair_step(&p);
    }
    CHECK_EQ(p.cb_calls, 1);
    CHECK_MEM(p.target, src, len);
    unsigned soon = 0, puts = 0;
    for (size_t i = 0; i < p.a.nposts; ++i) {
        const opal_btl_usnic_hdr_t *h = fx_post_hdr(&p.a.posts[i]);
        if (OPAL_BTL_USNIC_PKT_PUT == h->type) {
            ++puts;
            soon += (h->flags & OPAL_BTL_USNIC_HDR_FLAG_ACK_SOON) ? 1 : 0;
        }
    }
    CHECK_GT(puts, 1);
    CHECK_EQ(soon, 1);
    CHECK_EQ_U(p.b.eng.stats.num_ack_sends, 1);
    free(src);
    pair_fini(&p);
}

static void test_put_under_loss(void)
{
    pair_t p;
    pair_init(&p);
    p.drop_every = 7;
    size_t len = REGION_SIZE;
    uint8_t *src = (uint8_t *) malloc(len);
    fx_fill(src, len, 9);
    REQUIRE_EQ(pair_put(&p, src, 0, len), OPAL_SUCCESS);
    for (int i = 0; i < 200000 && 0 == p.cb_calls; ++i) {
        pair_step(&p);
    }
    CHECK_EQ(p.cb_calls, 1);
    CHECK_EQ(p.cb_status, OPAL_SUCCESS);
    CHECK_MEM(p.target, src, len);
    CHECK_GT(p.a.eng.stats.num_resends, 0);
    free(src);
    pair_fini(&p);
}

/* Build a PUT datagram from sender 0 with sequence |seq| */
static size_t build_put(uint8_t *buf, uint32_t seq, uint32_t region, uint64_t key, uint64_t addr, const void *data,
                        size_t len)
{
    opal_btl_usnic_put_hdr_t *ph = (opal_btl_usnic_put_hdr_t *) buf;
    memset(ph, 0, sizeof(*ph));
    ph->hdr.magic = opal_btl_usnic_wire16(OPAL_BTL_USNIC_MAGIC);
    ph->hdr.version = OPAL_BTL_USNIC_PROTO_VERSION;
    ph->hdr.type = OPAL_BTL_USNIC_PKT_PUT;
    ph->hdr.sender = 0; /* the nonce and the tag: fx_recv seals */
    ph->hdr.seq = opal_btl_usnic_wire32(seq);
    ph->hdr.payload_len = opal_btl_usnic_wire16((uint16_t) len);
    ph->region_id = opal_btl_usnic_wire32(region);
    ph->key = opal_btl_usnic_wire64(key);
    ph->addr = opal_btl_usnic_wire64(addr);
    memcpy(buf + sizeof(*ph), data, len);
    return sizeof(*ph) + len;
}

/* Forged PUTs: wrong key, wrong region, outside the region, from another
 * peer: dropped and counted, memory untouched, and their sequence number
 * stays free for the genuine segment. */
static void test_put_forged_rejected(void)
{
    pair_t p;
    pair_init(&p);
    uint8_t data[1000], buf[FX_MTU];
    memset(data, 0xab, sizeof(data));
    uint64_t base = (uint64_t) (uintptr_t) p.target;
    struct {
        uint32_t region;
        uint64_t key, addr;
    } forged[] = {
        {p.handle.region_id, p.handle.key ^ 0x100, base},
        {p.handle.region_id + 1, p.handle.key, base},
        {p.handle.region_id, p.handle.key, base - 500},
        {p.handle.region_id, p.handle.key, base + REGION_SIZE - 999},
        {p.handle.region_id, p.handle.key, UINT64_MAX - 10},
    };
    size_t n = sizeof(forged) / sizeof(forged[0]);
    for (size_t i = 0; i < n; ++i) {
        fx_recv(&p.b, buf, build_put(buf, ISN_A, forged[i].region, forged[i].key, forged[i].addr, data, sizeof(data)));
    }
    /* a genuine key from a peer the region was not registered for */
    opal_btl_usnic_endpoint_t *other = fx_ep_new(&p.b, 2, 64, 0, 0);
    build_put(buf, 0, p.handle.region_id, p.handle.key, base, data, sizeof(data));
    ((opal_btl_usnic_hdr_t *) buf)->sender = opal_btl_usnic_wire64(2);
    fx_recv(&p.b, buf, sizeof(opal_btl_usnic_put_hdr_t) + sizeof(data));
    CHECK_EQ_U(p.b.eng.stats.num_drop_bad_put, n + 1);
    CHECK_EQ_U(p.b.eng.stats.num_put_recvs, 0);
    uint8_t *zeros = (uint8_t *) calloc(1, REGION_SIZE);
    CHECK_MEM(p.target, zeros, REGION_SIZE);
    free(zeros);
    CHECK_EQ(opal_btl_usnic_seq_classify(p.ba, ISN_A), OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER);
    CHECK_EQ(opal_btl_usnic_seq_classify(other, 0), OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER);
    /* the genuine segment with that sequence number is still accepted */
    fx_recv(&p.b, buf, build_put(buf, ISN_A, p.handle.region_id, p.handle.key, base + 8, data, sizeof(data)));
    CHECK_EQ_U(p.b.eng.stats.num_put_recvs, 1);
    CHECK_MEM(p.target + 8, data, sizeof(data));
    CHECK_EQ(opal_btl_usnic_seq_classify(p.ba, ISN_A), OPAL_BTL_USNIC_SEQ_OLD);
    pair_fini(&p);
}

/* The target deregisters while the PUT is in flight: later segments are
 * counted, never written and never accepted (a sniffed old key must not
 * steal sequence numbers); the origin's PUT fails once it gives up. */
static void test_put_dereg_in_flight(void)
{
    pair_t p;
    pair_init(&p);
    size_t len = 64 * 1024;
    uint8_t *src = (uint8_t *) malloc(len);
    fx_fill(src, len, 3);
    REQUIRE_EQ(pair_put(&p, src, 0, len), OPAL_SUCCESS);
    fx_progress(&p.a);
    fx_complete_all(&p.a);
    REQUIRE(p.a.nposts > 20);
    for (; p.cursor_a < 10; ++p.cursor_a) { /* the first 10 segments arrive */
        fx_recv(&p.b, p.a.posts[p.cursor_a].bytes, p.a.posts[p.cursor_a].len);
    }
    uint64_t written = p.b.eng.stats.num_put_recvs;
    CHECK_EQ_U(written, 10);
    opal_btl_usnic_reg_remove(&p.b.eng.regs, &p.handle);
    uint8_t *snapshot = (uint8_t *) malloc(REGION_SIZE);
    memcpy(snapshot, p.target, REGION_SIZE);
    for (int i = 0; i < 2000; ++i) {
        pair_step(&p);
    }
    /* late segments are counted, never written, never accepted: the
     * origin keeps retransmitting until it gives the peer up */
    CHECK_EQ(p.cb_calls, 0);
    CHECK_EQ_U(p.b.eng.stats.num_put_recvs, written);
    CHECK_GT(p.b.eng.stats.num_put_after_dereg, 0);
    CHECK_MEM(p.target, snapshot, REGION_SIZE);
    CHECK_EQ_U(p.b.eng.stats.num_drop_bad_put, 0);
    CHECK_EQ(opal_btl_usnic_seq_classify(p.ba, ISN_A + 10), OPAL_BTL_USNIC_SEQ_NEW_IN_ORDER);
    opal_btl_usnic_endpoint_flush(p.ab, OPAL_ERR_TIMEOUT);
    fx_progress(&p.a);
    CHECK_EQ(p.cb_calls, 1);
    CHECK_EQ(p.cb_status, OPAL_ERR_TIMEOUT);
    free(snapshot);
    free(src);
    pair_fini(&p);
}

/* A target that never answers: the PUT fails with the flush's status,
 * once, from progress */
static void test_put_fails_with_peer(void)
{
    pair_t p;
    pair_init(&p);
    size_t len = 50000;
    uint8_t *src = (uint8_t *) malloc(len);
    fx_fill(src, len, 1);
    REQUIRE_EQ(pair_put(&p, src, 0, len), OPAL_SUCCESS);
    for (int i = 0; i < 5; ++i) {
        fx_progress(&p.a);
        fx_complete_all(&p.a);
    }
    CHECK_GT(opal_btl_usnic_endpoint_in_flight(p.ab), 0);
    CHECK_EQ(p.cb_calls, 0);
    opal_btl_usnic_endpoint_flush(p.ab, OPAL_ERR_UNREACH);
    fx_progress(&p.a);
    CHECK_EQ(p.cb_calls, 1);
    CHECK_EQ(p.cb_status, OPAL_ERR_UNREACH);
    /* a PUT to a failed peer is refused at once */
    p.ab->failed = true;
    CHECK_EQ(pair_put(&p, src, 0, 10), OPAL_ERR_UNREACH);
    /* and one without a remote region is a caller error */
    p.ab->failed = false;
    opal_btl_usnic_reg_handle_t local = {OPAL_BTL_USNIC_REGION_LOCAL, 0, 0};
    CHECK_EQ(opal_btl_usnic_put_submit(p.ab, src, 0, NULL, &local, 10, put_cb, &p, NULL), OPAL_ERR_BAD_PARAM);
    CHECK_EQ(p.cb_calls, 1);
    free(src);
    pair_fini(&p);
}

UNIT_MAIN(UNIT_TEST(test_put_remote_completion), UNIT_TEST(test_put_last_segment_acked_at_once),
          UNIT_TEST(test_put_under_loss), UNIT_TEST(test_put_forged_rejected), UNIT_TEST(test_put_dereg_in_flight),
          UNIT_TEST(test_put_fails_with_peer))
