/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The driver of the path MTU searches (btl_usnic_probe.c): sends the
 * probes that are due, counts the lost ones, takes the peer's echoes and
 * answers the peer's probes.  The search itself is btl_usnic_pmtu.c.
 */
#ifndef OPAL_BTL_USNIC_PROBE_H
#define OPAL_BTL_USNIC_PROBE_H

#include <stddef.h>

#include "btl_usnic_endpoint.h"

/* Probes due and probes lost of every search with an event due (call when
 * eng->now reaches eng->next_probe_event).  Returns the datagrams posted. */
int opal_btl_usnic_probes_progress(opal_btl_usnic_engine_t *eng);

/* An authentic ACK from |ep| arrived; |echo|: its probe echo (0: none) */
void opal_btl_usnic_probe_ack_taken(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t echo);

/* An authentic PROBE of |len| bytes arrived from |ep|: echo it */
void opal_btl_usnic_probe_answer(opal_btl_usnic_engine_t *eng, opal_btl_usnic_endpoint_t *ep, size_t len);

#endif /* OPAL_BTL_USNIC_PROBE_H */
