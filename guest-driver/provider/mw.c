// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider's memory windows, type 1 and type 2, allocated and
 * freed by the kernel driver (ALLOC_MW_TYPE1 or ALLOC_MW, DEALLOC_MW) and
 * bound from user space by a work request that becomes the device's
 * IBTCA_WR_BIND_MW: IBV_WR_BIND_MW in ibv_post_send or ibv_wr_bind_mw
 * (type 2), ibv_bind_mw (type 1, posted as IBV_WR_BIND_MW with the next
 * key, as other providers do). The device gives a bound window the key
 * whose low byte is one more than its current key's, so the request's new
 * R_Key must be ibv_inc_rkey() of the window's current key: the WQE
 * carries the key before it, and the device completes a bind whose key is
 * not the window's current one with IBV_WC_MW_BIND_ERR. Posting a bind
 * sets mw->rkey to the new key, so ibv_inc_rkey(mw->rkey) is always the
 * next one (after a bind that failed, the window keeps its key: bind again
 * with mw->rkey itself). The device refuses to invalidate a type 1 window (LOCAL_INV:
 * IBV_WC_LOC_PROT_ERR; SEND with Invalidate: IBV_WC_REM_INV_REQ_ERR).
 */
#include <errno.h>
#include <stdlib.h>

#include "ibtca.h"

static struct ibv_mw *ibtca_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp = {};
	struct ibv_alloc_mw cmd = {};
	struct ibv_mw *mw;
	int err;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	err = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (err) {
		free(mw);
		errno = err;
		return NULL;
	}
	return mw;
}

static int ibtca_dealloc_mw(struct ibv_mw *mw)
{
	int err;

	err = ibv_cmd_dealloc_mw(mw);
	if (err)
		return err;
	free(mw);
	return 0;
}

/* ibv_bind_mw (type 1; libibverbs checked the type and the PDs). */
static int ibtca_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
			 struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {
		.wr_id = mw_bind->wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = mw_bind->send_flags,
		.bind_mw = {
			.mw = mw,
			.rkey = ibv_inc_rkey(mw->rkey),
			.bind_info = mw_bind->bind_info,
		},
	}, *bad;

	return ibtca_post_send(qp, &wr, &bad);
}

const struct verbs_context_ops ibtca_mw_ops = {
	.alloc_mw = ibtca_alloc_mw,
	.bind_mw = ibtca_bind_mw,
	.dealloc_mw = ibtca_dealloc_mw,
};
