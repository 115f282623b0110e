/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The upward interface: what the engine hands the PML.  The tag of a
 * datagram is checked here, before it indexes Open MPI's table of
 * receive callbacks (mca_btl_base_active_message_trigger has
 * MCA_BTL_TAG_MAX entries: tag 255 would read past its end and call
 * whatever lies there).
 */
#include "opal_config.h"

#include <string.h>

#include "opal/mca/btl/btl.h"

#include "btl_usnic_compat.h"

#include "btl_usnic_pml.h"

bool opal_btl_usnic_pml_deliver(opal_btl_usnic_engine_t *eng, mca_btl_base_module_t *btl,
                                struct mca_btl_base_endpoint_t *ep, uint8_t tag, void *data, size_t len)
{
    if (OPAL_UNLIKELY(tag >= MCA_BTL_TAG_MAX || NULL == mca_btl_base_active_message_trigger[tag].cbfunc)) {
        /* nobody registered this tag: not for any PML of ours */
        OPAL_BTL_USNIC_STAT_INC(eng, num_drop_bad_tag);
        OPAL_BTL_USNIC_STAT_INC(eng, num_invalid_recvs);
        return false;
    }
    const mca_btl_active_message_callback_t *reg = &mca_btl_base_active_message_trigger[tag];
    mca_btl_base_segment_t segment = {.seg_addr.pval = data, .seg_len = len};
    opal_btl_usnic_call_recv_cb(btl, ep, reg, tag, &segment);
    return true;
}
