/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The reliability engine: sequence numbers, windows, ACKs, retransmission,
 * chunking and reassembly.  It never reads a clock and never calls
 * libfabric: events come in with the current progress tick, and segments go
 * out through a small "wire" interface.  The module binds the libfabric
 * wire; tests bind an in-memory wire and a virtual clock.
 *
 * Events in:   opal_btl_usnic_recv_segment()      a datagram arrived
 *              opal_btl_usnic_seg_send_complete() the provider released a buffer
 *              opal_btl_usnic_retrans_expired()   a retransmit timer fired
 *              opal_btl_usnic_engine_progress()   one pass of the send progression
 * Actions out: wire->post()  (segments and ACKs), wire->timer_arm/disarm(),
 *              wire->deliver() (a fragment for the PML), descriptor callbacks.
 */
#ifndef OPAL_BTL_USNIC_ENGINE_H
#define OPAL_BTL_USNIC_ENGINE_H

/* Every layer of the engine, bottom-up (see btl_usnic_engine_core.h):
 * what the module, the transports and the tests include.  The engine's
 * own files include only the layers they use. */
#include "btl_usnic_engine_core.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_send.h"
#include "btl_usnic_recv.h"
#include "btl_usnic_put.h"
#include "btl_usnic_glue.h"

#endif /* OPAL_BTL_USNIC_ENGINE_H */
