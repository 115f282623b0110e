/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The reliability engine: sequence numbers, windows, ACKs, retransmission,
 * chunking and reassembly.  It never reads a clock and never calls
 * libfabric: events come in with the current progress tick, segments go
 * out through a small "wire" interface below it, and what the PML must
 * hear goes up through its upcalls.  The module binds the transport and
 * the PML; tests bind an in-memory wire, a recording PML and a virtual
 * clock.
 *
 * Events in:   opal_btl_usnic_recv_segment()      a datagram arrived
 *              opal_btl_usnic_recv_fast()         ... the fast path's tiny one
 *              opal_btl_usnic_seg_send_complete() the provider released a buffer
 *              opal_btl_usnic_engine_progress()   one pass of the send progression
 *                                                 (expires timers that are due)
 *              opal_btl_usnic_btl_send() ...      the BTL entry points (btl_usnic_glue.h)
 * Actions out: wire->post() (segments and ACKs), wire->flush();
 *              up->deliver() (a fragment for the PML), up->send_done(),
 *              up->put_done(), up->peer_failed().
 */
#ifndef OPAL_BTL_USNIC_ENGINE_H
#define OPAL_BTL_USNIC_ENGINE_H

/* Every layer of the engine, bottom-up (see btl_usnic_engine_core.h):
 * what the module, the transports and the tests include.  The engine's
 * own files include only the layers they use. */
#include "btl_usnic_engine_core.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_complete.h"
#include "btl_usnic_acktr.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_post.h"
#include "btl_usnic_put.h"
#include "btl_usnic_send.h"
#include "btl_usnic_recv.h"
#include "btl_usnic_glue.h"

#endif /* OPAL_BTL_USNIC_ENGINE_H */
