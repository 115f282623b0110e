/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Completions (btl_usnic_complete.c), called directly: a failed fragment
 * calls the PML back once with the error and is recycled (also one never
 * posted); a sent one calls back once, and a deferred callback runs once,
 * from opal_btl_usnic_callbacks_run; a PUT completes (put_done, once,
 * from the next pass, never inside ACK processing) only when it left the
 * queue and its last segment was ACKed, with the first error it met.
 */
#include "fixture.h"
#include "unit.h"

#define PEER 1
#define ISN 1000u
#define PEER_ISN 5000u
#define OWN MCA_BTL_DES_FLAGS_BTL_OWNERSHIP
#define ALWAYS MCA_BTL_DES_SEND_ALWAYS_CALLBACK

/* A small fragment of the BTL's, handed over for a send with a callback */
static opal_btl_usnic_send_frag_t *frag_with_callback(fx_t *fx, opal_btl_usnic_endpoint_t *ep, fx_cb_t *cb)
{
    opal_btl_usnic_send_frag_t *frag = fx_alloc(fx, ep, 100, OWN | ALWAYS);
    if (NULL == frag) {
        return NULL;
    }
    memset(cb, 0, sizeof(*cb));
    cb->fx = fx;
    fx_set_callback(frag, cb);
    frag->ep = ep;
    frag->owned_by_btl = true;
    frag->callback_pending = true;
    return frag;
}

static void test_complete_fail_calls_back_once_and_recycles(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    fx_cb_t cb;
    opal_btl_usnic_send_frag_t *frag = frag_with_callback(&fx, ep, &cb);
    REQUIRE(NULL != frag);
    opal_btl_usnic_frag_fail(&fx.eng, frag, OPAL_ERR_UNREACH); /* never posted */
    CHECK_EQ(cb.calls, 1);
    CHECK_EQ(cb.status, OPAL_ERR_UNREACH);
    CHECK_EQ(fx.send_dones, 1);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_complete_deferred_callback_runs_once(void)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    fx_cb_t cb;
    opal_btl_usnic_send_frag_t *frag = frag_with_callback(&fx, ep, &cb);
    REQUIRE(NULL != frag);
    opal_list_append(&fx.eng.pending_callbacks, &frag->base.super.super);
    CHECK_EQ(cb.calls, 0);
    opal_btl_usnic_callbacks_run(&fx.eng);
    CHECK_EQ(cb.calls, 1);
    CHECK_EQ(cb.status, OPAL_SUCCESS);
    CHECK(!frag->callback_pending);
    CHECK(opal_list_is_empty(&fx.eng.pending_callbacks));
    opal_btl_usnic_callbacks_run(&fx.eng);
    CHECK_EQ(cb.calls, 1);
    /* a fragment whose embedded segment never left is the BTL's to free */
    frag->seg.flags |= OPAL_BTL_USNIC_SEG_FLAG_ACKED;
    fx_free(&fx, frag);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static unsigned put_cb_calls;
static int put_cb_status;

static void put_cb(struct mca_btl_base_module_t *module, struct mca_btl_base_endpoint_t *endpoint,
                   void *local_address, struct mca_btl_base_registration_handle_t *local_handle, void *context,
                   void *cbdata, int status)
{
    (void) module;
    (void) endpoint;
    (void) local_address;
    (void) local_handle;
    (void) context;
    (void) cbdata;
    ++put_cb_calls;
    put_cb_status = status;
}

/* A PUT of two segments, both posted and un-ACKed, its failure marked on
 * the first if |fail| */
static void put_completes_after_last_ack(int fail)
{
    fx_t fx;
    fx_init(&fx, NULL);
    opal_btl_usnic_endpoint_t *ep = fx_ep_new(&fx, PEER, 8, ISN, PEER_ISN);
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_large_frag_alloc(&fx.eng.pool, 0);
    REQUIRE(NULL != frag);
    static uint8_t src[64];
    frag->kind = OPAL_BTL_USNIC_FRAG_PUT;
    frag->owned_by_btl = true;
    frag->ep = ep;
    frag->segments[0].seg_addr.pval = src;
    frag->put.status = OPAL_SUCCESS;
    frag->put.cbfunc = put_cb;
    frag->put.unacked = 2;
    frag->queued = true;
    put_cb_calls = 0;
    opal_btl_usnic_send_seg_t seg[2];
    memset(seg, 0, sizeof(seg));
    seg[0].frag = seg[1].frag = frag;
    if (fail) {
        opal_btl_usnic_put_mark_failed(&seg[0], OPAL_ERR_UNREACH);
    }
    opal_btl_usnic_put_seg_acked(&fx.eng, &seg[0]);
    CHECK(NULL == seg[0].frag);
    opal_btl_usnic_put_posted_or_failed(&fx.eng, frag, OPAL_SUCCESS);
    CHECK(!frag->callback_pending); /* still queued: */
    frag->queued = false;
    opal_btl_usnic_put_posted_or_failed(&fx.eng, frag, OPAL_SUCCESS);
    CHECK(!frag->callback_pending); /* one segment still un-ACKed */
    opal_btl_usnic_put_seg_acked(&fx.eng, &seg[1]);
    CHECK(frag->callback_pending);  /* deferred to the next pass */
    CHECK_EQ(put_cb_calls, 0);
    opal_btl_usnic_callbacks_run(&fx.eng);
    CHECK_EQ(put_cb_calls, 1);
    CHECK_EQ(put_cb_status, fail ? OPAL_ERR_UNREACH : OPAL_SUCCESS);
    CHECK_EQ(fx.put_dones, 1);
    CHECK(fx_all_recycled(&fx));
    fx_fini(&fx);
}

static void test_complete_put_after_last_ack(void)
{
    put_completes_after_last_ack(0);
}

static void test_complete_put_keeps_its_error(void)
{
    put_completes_after_last_ack(1);
}

UNIT_MAIN(UNIT_TEST(test_complete_fail_calls_back_once_and_recycles), UNIT_TEST(test_complete_deferred_callback_runs_once),
          UNIT_TEST(test_complete_put_after_last_ack), UNIT_TEST(test_complete_put_keeps_its_error))
