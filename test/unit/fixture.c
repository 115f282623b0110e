/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Test fixture: a recording wire, recording upcalls, and the BTL entry
 * points through the production glue.  See fixture.h.
 */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (NULL == q) {
        fprintf(stderr, "fixture: out of memory\n");
        abort();
    }
    return q;
}

fx_t *fx_of(opal_btl_usnic_engine_t *eng)
{
    return (fx_t *) ((char *) eng - offsetof(fx_t, eng));
}

/* ----- the recording wire ----- */

static int fx_wire_post(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_seg_t *seg,
                        int channel)
{
    fx_t *fx = fx_of(eng);
    ++fx->post_calls;
    if (fx->fail_count > 0) {
        --fx->fail_count;
        return fx->fail_rc;
    }
    if (fx->nposts == fx->posts_cap) {
        fx->posts_cap = fx->posts_cap ? 2 * fx->posts_cap : 64;
        fx->posts = (fx_post_t *) xrealloc(fx->posts, fx->posts_cap * sizeof(*fx->posts));
    }
    fx_post_t *p = &fx->posts[fx->nposts++];
    p->seg = seg;
    p->ep = ep;
    p->channel = channel;
    p->len = seg->wire_len;
    p->bytes = (uint8_t *) xrealloc(NULL, seg->wire_len ? seg->wire_len : 1);
    opal_btl_usnic_seg_linearize(seg, p->bytes); /* header, and a gathered payload */
    p->completed = fx->complete_on_post;
    if (fx->complete_on_post) {
        opal_btl_usnic_seg_send_complete(eng, seg); /* may recycle an ACK's segment at once */
    }
    return OPAL_SUCCESS;
}

/* Nothing is held back: every post was recorded as it came */
static void fx_wire_flush(opal_btl_usnic_engine_t *eng)
{
    ++fx_of(eng)->flushes;
}

static const opal_btl_usnic_wire_ops_t fx_wire = {
    .post = fx_wire_post,
    .flush = fx_wire_flush,
};

/* ----- the upcalls: a recording PML ----- */

static void fx_up_deliver(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, uint8_t tag, void *data,
                          size_t len)
{
    fx_t *fx = fx_of(eng);
    if (fx->ndels == fx->dels_cap) {
        fx->dels_cap = fx->dels_cap ? 2 * fx->dels_cap : 64;
        fx->dels = (fx_delivery_t *) xrealloc(fx->dels, fx->dels_cap * sizeof(*fx->dels));
    }
    fx_delivery_t *d = &fx->dels[fx->ndels++];
    d->ep = ep;
    d->tag = tag;
    d->len = len;
    d->data = (uint8_t *) xrealloc(NULL, len ? len : 1);
    memcpy(d->data, data, len);
    if (NULL != fx->deliver_hook) {
        fx->deliver_hook(fx, ep, tag, data, len);
    }
}

/* As the module's up_send_done and up_put_done: the PML's own callbacks
 * (no BTL module in tests) */
static void fx_up_send_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status)
{
    ++fx_of(eng)->send_dones;
    frag->base.des_cbfunc(NULL, frag->ep, &frag->base, status);
}

static void fx_up_put_done(opal_btl_usnic_engine_t *eng, opal_btl_usnic_send_frag_t *frag, int status)
{
    ++fx_of(eng)->put_dones;
    frag->put.cbfunc(NULL, frag->ep, frag->segments[0].seg_addr.pval, frag->put.local_handle, frag->put.cbcontext,
                     frag->put.cbdata, status);
}

/* Mirrors the module's up_peer_failed (minus show_help and the PML error callback) */
static void fx_up_peer_failed(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, int rc)
{
    fx_t *fx = fx_of(eng);
    ++fx->peer_failed_calls;
    fx->peer_failed_rc = rc;
    fx->peer_failed_at = eng->now;
    if (ep->failed) {
        return;
    }
    ep->failed = true;
    opal_btl_usnic_endpoint_flush(ep, OPAL_ERR_UNREACH);
}

static const opal_btl_usnic_upcalls_t fx_up = {
    .lookup = fx_lookup,
    .deliver = fx_up_deliver,
    .send_done = fx_up_send_done,
    .put_done = fx_up_put_done,
    .peer_failed = fx_up_peer_failed,
};

/* ----- setup ----- */

void fx_params_default(opal_btl_usnic_engine_params_t *p)
{
    memset(p, 0, sizeof(*p));
    p->protect = OPAL_BTL_USNIC_PROTECT_FULL; /* what production uses: every test authenticates */
    p->my_name = 0;
    p->prefix = 0;
    p->mtu = FX_MTU;
    p->tiny_mtu = FX_TINY_MTU;
    p->ack_iteration_delay = 4;
    p->max_resends_per_iteration = 16;
    p->sd_credits[OPAL_BTL_USNIC_PRIORITY_CHANNEL] = 1024;
    p->sd_credits[OPAL_BTL_USNIC_DATA_CHANNEL] = 1024;
    p->max_send_size = FX_MAX_SEND;
    p->rto_initial = FX_RTO_INITIAL;
    p->rto_min = FX_RTO_MIN;
    p->rto_max = FX_RTO_MAX;
    p->peer_timeout = 0;
    p->rx_capacity = 0; /* unknown: no limit but the window */
    opal_btl_usnic_charge_flat(&p->rx_charge, FX_DGRAM_CHARGE);
    p->cc_enabled = false; /* tests that count posts see the grant and the window alone; test_cc and
                              the pair simulation switch it on */
    p->cc_target = 300;
}

const opal_btl_usnic_wire_ops_t *fx_wire_ops(void)
{
    return &fx_wire;
}

const opal_btl_usnic_upcalls_t *fx_upcalls(void)
{
    return &fx_up;
}

void fx_init(fx_t *fx, const opal_btl_usnic_engine_params_t *p)
{
    fx_init_with_wire(fx, p, NULL, NULL);
}

void fx_init_with_wire(fx_t *fx, const opal_btl_usnic_engine_params_t *p, const opal_btl_usnic_wire_ops_t *wire,
                       const opal_btl_usnic_upcalls_t *up)
{
    opal_btl_usnic_engine_params_t def;
    memset(fx, 0, sizeof(*fx));
    if (NULL == p) {
        fx_params_default(&def);
        p = &def;
    }
    fx->fail_rc = OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    if (OPAL_SUCCESS != opal_btl_usnic_engine_init(&fx->eng, p, NULL != wire ? wire : &fx_wire,
                                                   NULL != up ? up : &fx_up)) {
        fprintf(stderr, "fixture: opal_btl_usnic_engine_init failed\n");
        abort();
    }
}

void fx_fini(fx_t *fx)
{
    for (size_t i = 0; i < FX_MAX_PEERS; ++i) {
        if (NULL != fx->peers[i]) {
            fx_ep_free(fx, fx->peers[i]);
        }
    }
    opal_btl_usnic_engine_fini(&fx->eng);
    for (size_t i = 0; i < fx->nposts; ++i) {
        free(fx->posts[i].bytes);
    }
    for (size_t i = 0; i < fx->ndels; ++i) {
        free(fx->dels[i].data);
    }
    free(fx->posts);
    free(fx->dels);
    memset(fx, 0, sizeof(*fx));
}

opal_btl_usnic_endpoint_t *fx_ep_new(fx_t *fx, uint32_t peer_id, uint32_t window, opal_btl_usnic_seq_t local_isn,
                                     opal_btl_usnic_seq_t peer_isn)
{
    opal_btl_usnic_endpoint_t *ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
    if (NULL == ep || OPAL_SUCCESS != opal_btl_usnic_endpoint_init_rel(ep, &fx->eng, window, local_isn, peer_isn)) {
        fprintf(stderr, "fixture: endpoint setup failed\n");
        abort();
    }
    ep->peer_id = peer_id;
    uint8_t tx[OPAL_BTL_USNIC_KEY_BYTES], rx[OPAL_BTL_USNIC_KEY_BYTES];
    fx_key(fx->eng.p.my_name, peer_id, tx);
    fx_key(peer_id, fx->eng.p.my_name, rx);
    opal_btl_usnic_endpoint_set_keys(ep, fx_mac_alg(), tx, rx);
    if (peer_id < FX_MAX_PEERS) {
        fx->peers[peer_id] = ep;
    }
    return ep;
}

void fx_key(uint32_t from, uint32_t to, uint8_t key[OPAL_BTL_USNIC_KEY_BYTES])
{
    uint8_t recv_key[OPAL_BTL_USNIC_KEY_BYTES] = {0}, id[OPAL_BTL_USNIC_ID_BYTES] = {0};
    memcpy(recv_key, &to, sizeof(to));
    memcpy(id, &from, sizeof(from));
    opal_btl_usnic_derive_key(recv_key, id, key);
}

unsigned fx_mac_alg(void)
{
    unsigned algs = opal_btl_usnic_auth_init();
    return opal_btl_usnic_mac_pick(algs, algs);
}

void fx_ep_free(fx_t *fx, opal_btl_usnic_endpoint_t *ep)
{
    if (ep->peer_id < FX_MAX_PEERS && fx->peers[ep->peer_id] == ep) {
        fx->peers[ep->peer_id] = NULL;
    }
    OBJ_RELEASE(ep);
}

opal_btl_usnic_endpoint_t *fx_lookup(opal_btl_usnic_engine_t *eng, uint64_t sender_id)
{
    fx_t *fx = fx_of(eng);
    return (sender_id < FX_MAX_PEERS) ? fx->peers[sender_id] : NULL;
}

/* ----- posts, completions, timers ----- */

fx_post_t *fx_last_post(fx_t *fx)
{
    return fx->nposts ? &fx->posts[fx->nposts - 1] : NULL;
}

const opal_btl_usnic_hdr_t *fx_post_hdr(const fx_post_t *post)
{
    return (const opal_btl_usnic_hdr_t *) post->bytes;
}

uint32_t fx_post_seq(const fx_post_t *post)
{
    return opal_btl_usnic_host32(fx_post_hdr(post)->seq);
}

void fx_complete(fx_t *fx, opal_btl_usnic_send_seg_t *seg)
{
    for (size_t i = 0; i < fx->nposts; ++i) {
        if (fx->posts[i].seg == seg && !fx->posts[i].completed) {
            fx->posts[i].completed = true;
            opal_btl_usnic_seg_send_complete(&fx->eng, seg);
        }
    }
}

void fx_complete_all(fx_t *fx)
{
    for (size_t i = 0; i < fx->nposts; ++i) {
        if (!fx->posts[i].completed) {
            fx->posts[i].completed = true;
            opal_btl_usnic_seg_send_complete(&fx->eng, fx->posts[i].seg);
        }
    }
}

unsigned fx_count_posts(const fx_t *fx, int channel, int type)
{
    unsigned n = 0;
    for (size_t i = 0; i < fx->nposts; ++i) {
        if ((channel < 0 || fx->posts[i].channel == channel) &&
            (0 == type || fx_post_hdr(&fx->posts[i])->type == type)) {
            ++n;
        }
    }
    return n;
}

bool fx_in_hotel(const opal_btl_usnic_send_seg_t *seg)
{
    return 0 != (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_HOTEL);
}

size_t fx_hotel_guests(const fx_t *fx)
{
    size_t n = 0;
    for (size_t i = 0; i < FX_MAX_PEERS; ++i) {
        const opal_btl_usnic_endpoint_t *ep = fx->peers[i];
        for (uint32_t k = 0; NULL != ep && NULL != ep->tx.sent && k < ep->window; ++k) {
            n += (NULL != ep->tx.sent[k] && fx_in_hotel(ep->tx.sent[k]));
        }
    }
    return n;
}

void fx_set_time(fx_t *fx, uint64_t now)
{
    fx->now = now;
    opal_btl_usnic_engine_set_time(&fx->eng, now);
}

int fx_progress(fx_t *fx)
{
    opal_btl_usnic_engine_set_time(&fx->eng, fx->now);
    return opal_btl_usnic_engine_progress(&fx->eng);
}

bool fx_expire_next(fx_t *fx)
{
    uint64_t t = opal_btl_usnic_engine_next_deadline(&fx->eng);
    if (UINT64_MAX == t) {
        return false;
    }
    fx_set_time(fx, t > fx->now ? t : fx->now);
    opal_btl_usnic_hotel_evict_due(&fx->eng);
    return true;
}

bool fx_run_to_timeout(fx_t *fx)
{
    uint64_t timeouts = fx->eng.stats.num_timeout_retrans;
    unsigned failed = fx->peer_failed_calls;
    for (int i = 0; i < 64; ++i) {
        if (!fx_expire_next(fx)) {
            return false;
        }
        if (fx->eng.stats.num_timeout_retrans != timeouts || fx->peer_failed_calls != failed) {
            return true;
        }
    }
    return false;
}

bool fx_hotel_consistent(fx_t *fx)
{
    bool ok = true;
    for (size_t i = 0; i < FX_MAX_PEERS; ++i) {
        opal_btl_usnic_endpoint_t *ep = fx->peers[i];
        if (NULL == ep || NULL == ep->tx.sent) {
            continue;
        }
        for (uint32_t k = 0; k < ep->window; ++k) {
            const opal_btl_usnic_send_seg_t *seg = ep->tx.sent[k];
            if (NULL == seg || !fx_in_hotel(seg)) {
                continue;
            }
            if (!(seg->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_WINDOW) || (seg->flags & OPAL_BTL_USNIC_SEG_FLAG_ON_RESEND)) {
                fprintf(stderr, "  seq 0x%x: in the hotel with flags 0x%x (out of the window or queued to resend)\n",
                        (unsigned) seg->seq, (unsigned) seg->flags);
                ok = false;
            }
            if (!ep->tx.on_flight_list) {
                fprintf(stderr, "  seq 0x%x: a guest of an endpoint not on the register\n", (unsigned) seg->seq);
                ok = false;
            }
        }
    }
    uint64_t due = fx_true_next_deadline(fx, false);
    if (opal_btl_usnic_engine_next_deadline(&fx->eng) > due) {
        fprintf(stderr, "  next_deadline %llu later than the earliest guest's %llu\n",
                (unsigned long long) opal_btl_usnic_engine_next_deadline(&fx->eng), (unsigned long long) due);
        ok = false;
    }
    return ok;
}

uint64_t fx_true_next_deadline(fx_t *fx, bool with_peer_timeout)
{
    uint64_t t = UINT64_MAX;
    for (size_t i = 0; i < FX_MAX_PEERS; ++i) {
        opal_btl_usnic_endpoint_t *ep = fx->peers[i];
        if (NULL == ep || NULL == ep->tx.sent || 0 == opal_btl_usnic_endpoint_in_flight(ep)) {
            continue;
        }
        const opal_btl_usnic_send_seg_t *oldest = ep->tx.sent[(uint32_t) (ep->tx.acked_seq + 1) % ep->window];
        if (NULL != oldest && (oldest->flags & OPAL_BTL_USNIC_SEG_FLAG_IN_HOTEL) && oldest->deadline < t) {
            t = oldest->deadline;
        }
        if (with_peer_timeout && fx->eng.p.peer_timeout > 0 &&
            ep->timer.last_ack_time + fx->eng.p.peer_timeout < t) {
            t = ep->timer.last_ack_time + fx->eng.p.peer_timeout;
        }
    }
    return t;
}

void fx_seal(fx_t *fx, uint8_t *buf, size_t len, uint32_t sender, uint64_t nonce)
{
    opal_btl_usnic_hdr_t *h = (opal_btl_usnic_hdr_t *) buf;
    size_t covered = (OPAL_BTL_USNIC_PROTECT_FULL == fx->eng.p.protect) ? len : opal_btl_usnic_hdr_len(h->type);
    if (len < sizeof(*h) || covered > len || 0 == covered) {
        return; /* nothing a sender would have sealed */
    }
    uint8_t key[OPAL_BTL_USNIC_KEY_BYTES];
    opal_btl_usnic_mac_t m;
    fx_key(sender, fx->eng.p.my_name, key);
    opal_btl_usnic_incarnation_key(key, fx->seal_incarnation, key);
    opal_btl_usnic_mac_init(&m, fx_mac_alg(), key);
    h->nonce = opal_btl_usnic_wire64(nonce);
    memset(h->mac, 0, sizeof(h->mac));
    opal_btl_usnic_mac_tag(&m, nonce, buf, covered, h->mac);
    opal_btl_usnic_mac_clear(&m);
}

static void recv_raw_at(fx_t *fx, const void *buf, size_t len, uint64_t arrival)
{
    /* The engine may keep nothing past the call: hand it a private copy
     * that is scribbled over afterwards */
    uint8_t *copy = (uint8_t *) xrealloc(NULL, len ? len : 1);
    memcpy(copy, buf, len);
    opal_btl_usnic_engine_set_time(&fx->eng, fx->now); /* the module polls its CQs after setting the time */
    fx_hand_up_at(&fx->eng, copy, len, arrival);
    memset(copy, 0xdd, len);
    free(copy);
}

void fx_recv_raw(fx_t *fx, const void *buf, size_t len)
{
    recv_raw_at(fx, buf, len, 0);
}

void fx_recv_at(fx_t *fx, const void *buf, size_t len, uint64_t arrival)
{
    uint8_t *copy = (uint8_t *) xrealloc(NULL, len ? len : 1);
    memcpy(copy, buf, len);
    if (OPAL_BTL_USNIC_PROTECT_NONE != fx->eng.p.protect && len >= sizeof(opal_btl_usnic_hdr_t)) {
        fx_seal(fx, copy, len, (uint32_t) opal_btl_usnic_host64(((opal_btl_usnic_hdr_t *) copy)->sender), ++fx->seal_nonce);
    }
    recv_raw_at(fx, copy, len, arrival);
    free(copy);
}

void fx_recv(fx_t *fx, const void *buf, size_t len)
{
    fx_recv_at(fx, buf, len, 0);
}

/* ----- segment builders ----- */

static void hdr_build(opal_btl_usnic_hdr_t *h, uint32_t sender, uint8_t type, uint32_t seq, size_t payload,
                      uint8_t tag)
{
    memset(h, 0, sizeof(*h)); /* nonce and tag: fx_recv seals */
    h->magic = opal_btl_usnic_wire16(OPAL_BTL_USNIC_MAGIC);
    h->version = OPAL_BTL_USNIC_PROTO_VERSION;
    h->type = type;
    h->sender = opal_btl_usnic_wire64(sender);
    h->seq = opal_btl_usnic_wire32(seq);
    h->ack_seq = 0;
    h->payload_len = opal_btl_usnic_wire16((uint16_t) payload);
    h->tag = tag;
    h->flags = 0;
    h->credit = 0;
    h->sack = 0;
}

size_t fx_build_frag(uint8_t *buf, uint32_t sender, uint32_t seq, uint8_t tag, const void *data, size_t len)
{
    hdr_build((opal_btl_usnic_hdr_t *) buf, sender, OPAL_BTL_USNIC_PKT_FRAG, seq, len, tag);
    if (len > 0) {
        memcpy(buf + FX_HDR, data, len);
    }
    return FX_HDR + len;
}

size_t fx_build_chunk(uint8_t *buf, uint32_t sender, uint32_t seq, uint8_t tag, uint32_t frag_id,
                      uint32_t frag_size, uint32_t offset, const void *data, size_t len)
{
    opal_btl_usnic_chunk_hdr_t *ch = (opal_btl_usnic_chunk_hdr_t *) buf;
    hdr_build(&ch->hdr, sender, OPAL_BTL_USNIC_PKT_CHUNK, seq, len, tag);
    ch->frag_id = opal_btl_usnic_wire32(frag_id);
    ch->frag_size = opal_btl_usnic_wire32(frag_size);
    ch->frag_offset = opal_btl_usnic_wire32(offset);
    ch->chunk_size = opal_btl_usnic_wire32((uint32_t) FX_MAX_CHUNK_PAYLOAD);
    if (len > 0) {
        memcpy(buf + FX_CHUNK_HDR, data, len);
    }
    return FX_CHUNK_HDR + len;
}

size_t fx_build_ack_credit(uint8_t *buf, uint32_t sender, uint32_t ack_seq, uint16_t credit)
{
    opal_btl_usnic_ack_hdr_t *a = (opal_btl_usnic_ack_hdr_t *) buf;
    memset(a, 0, sizeof(*a)); /* no selective-ACK ranges */
    hdr_build(&a->hdr, sender, OPAL_BTL_USNIC_PKT_ACK, 0, 0, 0);
    a->hdr.flags = OPAL_BTL_USNIC_HDR_FLAG_ACK;
    a->hdr.ack_seq = opal_btl_usnic_wire32(ack_seq);
    a->hdr.credit = opal_btl_usnic_wire16(credit);
    return FX_ACK_HDR;
}

size_t fx_build_ack(uint8_t *buf, uint32_t sender, uint32_t ack_seq)
{
    return fx_build_ack_credit(buf, sender, ack_seq, UINT16_MAX);
}

/* ----- the BTL entry points: btl_usnic_btl.c's own glue ----- */

/* The glue's data source over a plain buffer: referenced where it lies,
 * or copied where the glue wants it */
static void *buffer_take(void *ctx, void *dst, size_t *size_p)
{
    if (NULL == dst) {
        return ctx;
    }
    memcpy(dst, ctx, *size_p);
    return dst;
}

static opal_btl_usnic_source_t buffer_source(const void *data, bool contiguous)
{
    return (opal_btl_usnic_source_t){.take = buffer_take, .ctx = (void *) data, .contiguous = contiguous};
}

/* What btl_usnic_btl.c does around the glue is the lock, the module cast
 * and Open MPI's convertor; everything else is the same function */
opal_btl_usnic_send_frag_t *fx_alloc(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t size, uint32_t flags)
{
    return opal_btl_usnic_frag_alloc(&fx->eng, ep, size, flags);
}

opal_btl_usnic_send_frag_t *fx_prepare_src(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t reserve,
                                           const void *data, size_t size, uint32_t flags)
{
    opal_btl_usnic_source_t src = buffer_source(data, true);
    return opal_btl_usnic_btl_prepare_src(&fx->eng, ep, &src, reserve, &size, flags);
}

opal_btl_usnic_send_frag_t *fx_prepare_src_packed(fx_t *fx, opal_btl_usnic_endpoint_t *ep, size_t reserve,
                                                  const void *data, size_t size, uint32_t flags)
{
    opal_btl_usnic_source_t src = buffer_source(data, false);
    return opal_btl_usnic_btl_prepare_src(&fx->eng, ep, &src, reserve, &size, flags);
}

int fx_send(fx_t *fx, opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag, uint8_t tag)
{
    return opal_btl_usnic_btl_send(&fx->eng, ep, frag, tag, fx->now);
}

int fx_sendi(fx_t *fx, opal_btl_usnic_endpoint_t *ep, const void *header, size_t header_size, const void *payload,
             size_t payload_size, uint8_t tag)
{
    opal_btl_usnic_source_t src = buffer_source(payload, false);
    return opal_btl_usnic_btl_sendi(&fx->eng, ep, header, header_size, &src, payload_size, tag,
                                    MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, NULL, fx->now);
}

int fx_sendi_or_descriptor(fx_t *fx, opal_btl_usnic_endpoint_t *ep, const void *header, size_t header_size,
                           uint32_t flags, opal_btl_usnic_send_frag_t **instead, uint8_t tag)
{
    opal_btl_usnic_source_t src = buffer_source(NULL, false);
    return opal_btl_usnic_btl_sendi(&fx->eng, ep, header, header_size, &src, 0, tag, flags, instead, fx->now);
}

unsigned fx_send_tiny(fx_t *fx, opal_btl_usnic_endpoint_t *ep, unsigned n, opal_btl_usnic_send_seg_t **segs)
{
    for (unsigned i = 0; i < n; ++i) {
        opal_btl_usnic_send_frag_t *frag = fx_alloc(fx, ep, 100, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        fx_fill((uint8_t *) frag->segments[0].seg_addr.pval, 100, ep->tx.next_seq);
        if (1 != fx_send(fx, ep, frag, 9)) {
            return i;
        }
        if (NULL != segs) {
            segs[i] = &frag->seg;
        }
    }
    return n;
}

size_t fx_resend_len(fx_t *fx)
{
    return opal_list_get_size(&fx->eng.resend_segs);
}

void fx_free(fx_t *fx, opal_btl_usnic_send_frag_t *frag)
{
    opal_btl_usnic_frag_free(&fx->eng, frag);
}

void fx_pml_callback(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep, mca_btl_base_descriptor_t *des,
                     int status)
{
    (void) btl;
    (void) ep;
    fx_cb_t *cb = (fx_cb_t *) des->des_cbdata;
    ++cb->calls;
    cb->status = status;
    if (cb->free_in_callback) {
        fx_free(cb->fx, (opal_btl_usnic_send_frag_t *) des);
    }
}

void fx_set_callback(opal_btl_usnic_send_frag_t *frag, fx_cb_t *cb)
{
    frag->base.des_cbfunc = fx_pml_callback;
    frag->base.des_cbdata = cb;
}

/* ----- free lists ----- */

size_t fx_free_list_available(opal_free_list_t *list)
{
    size_t n = 0;
    opal_lifo_t *lifo = &list->super;
    for (opal_list_item_t *item = (opal_list_item_t *) lifo->opal_lifo_head.data.item; item != &lifo->opal_lifo_ghost;
         item = (opal_list_item_t *) item->opal_list_next) {
        ++n;
    }
    return n;
}

size_t fx_free_list_allocated(const opal_free_list_t *list)
{
    return list->fl_num_allocated;
}

size_t fx_small_frags_available(fx_t *fx)
{
    size_t n = 0;
    for (int i = 0; i < fx->eng.pool.num_small_classes; ++i) {
        n += fx_free_list_available(&fx->eng.pool.small[i].frags);
    }
    return n;
}

size_t fx_pool_lists(opal_btl_usnic_frag_pool_t *pool, opal_free_list_t **lists, const char **names)
{
    static const char *small_names[] = {"small_frags[0]", "small_frags[1]", "small_frags[2]", "small_frags[3]"};
    size_t n = 0;
    for (int i = 0; i < pool->num_small_classes; ++i) {
        names[n] = small_names[i];
        lists[n++] = &pool->small[i].frags;
    }
    names[n] = "large_frags";
    lists[n++] = &pool->large_frags;
    names[n] = "chunk_segs";
    lists[n++] = &pool->chunk_segs;
    names[n] = "ack_segs";
    lists[n++] = &pool->ack_segs;
    return n;
}

bool fx_all_recycled(fx_t *fx)
{
    opal_free_list_t *lists[FX_POOL_LISTS];
    const char *names[FX_POOL_LISTS];
    size_t n = fx_pool_lists(&fx->eng.pool, lists, names);
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
        size_t avail = fx_free_list_available(lists[i]);
        size_t total = fx_free_list_allocated(lists[i]);
        if (avail != total) {
            fprintf(stderr, "  free list %s: %zu of %zu items back\n", names[i], avail, total);
            ok = false;
        }
    }
    return ok;
}

/* ----- data ----- */

uint32_t fx_rand(uint64_t *state)
{
    /* splitmix64, truncated */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t) ((z ^ (z >> 31)) >> 16);
}

void fx_fill(uint8_t *buf, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 0x12345u;
    for (size_t i = 0; i < len; ++i) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t) (x >> 23);
    }
}

void fx_hand_up_at(opal_btl_usnic_engine_t *eng, void *buf, size_t len, uint64_t arrival)
{
    const opal_btl_usnic_datagram_t dg = {.buf = buf, .len = len, .channel = OPAL_BTL_USNIC_DATA_CHANNEL,
                                          .arrival = arrival};
    opal_btl_usnic_recv_segment(eng, &dg);
}

void fx_hand_up(opal_btl_usnic_engine_t *eng, void *buf, size_t len)
{
    fx_hand_up_at(eng, buf, len, 0);
}

opal_btl_usnic_fast_t fx_hand_up_fast(opal_btl_usnic_engine_t *eng, void *buf, size_t len,
                                   opal_btl_usnic_endpoint_t **ep_p)
{
    const opal_btl_usnic_datagram_t dg = {.buf = buf, .len = len, .channel = OPAL_BTL_USNIC_DATA_CHANNEL};
    return opal_btl_usnic_recv_fast(eng, &dg, ep_p);
}

bool fx_same_but_flags(const fx_post_t *resend, const fx_post_t *first, uint8_t retx_flags)
{
    if (resend->len != first->len || resend->len < sizeof(opal_btl_usnic_hdr_t)) {
        return false;
    }
    const opal_btl_usnic_hdr_t *h = (const opal_btl_usnic_hdr_t *) resend->bytes;
    if ((h->flags & retx_flags) != retx_flags) {
        return false;
    }
    /* a retransmission is a new datagram: a later nonce, its own tag */
    const opal_btl_usnic_hdr_t *f = (const opal_btl_usnic_hdr_t *) first->bytes;
    if (opal_btl_usnic_host64(h->nonce) <= opal_btl_usnic_host64(f->nonce)) {
        return false;
    }
    uint8_t copy[FX_MTU], orig[FX_MTU];
    memcpy(copy, resend->bytes, resend->len);
    memcpy(orig, first->bytes, first->len);
    opal_btl_usnic_hdr_t *c = (opal_btl_usnic_hdr_t *) copy, *o = (opal_btl_usnic_hdr_t *) orig;
    c->flags &= (uint8_t) ~retx_flags;
    c->nonce = o->nonce = 0;
    memset(c->mac, 0, sizeof(c->mac));
    memset(o->mac, 0, sizeof(o->mac));
    return 0 == memcmp(copy, orig, first->len);
}

unsigned fx_nchunks(size_t size, size_t chunk)
{
    return (unsigned) ((size + chunk - 1) / chunk);
}

void fx_make_order(unsigned *order, unsigned n, int kind)
{
    for (unsigned i = 0; i < n; ++i) {
        order[i] = (1 == kind) ? n - 1 - i : i;
    }
    if (kind >= 2) {
        uint64_t rng = (uint64_t) kind * 1000 + n;
        for (unsigned i = n; i > 1; --i) {
            unsigned j = fx_rand(&rng) % i;
            unsigned t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
    }
}

const char *fx_order_name(int kind)
{
    return kind == 0 ? "forward" : kind == 1 ? "reverse" : "shuffled";
}
