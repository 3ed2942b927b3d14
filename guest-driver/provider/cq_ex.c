// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider's extended CQs: ibv_create_cq_ex makes the CQ that
 * ibv_create_cq makes (cq.c), and ibv_start_poll/ibv_next_poll stand on
 * one completion at a time, polled with ibtca_poll_cq (so the two APIs
 * hide and map entries alike and either may poll the CQ); the
 * ibv_wc_read_* accessors read that completion. ibv_end_poll has nothing
 * to release: no lock is held between the calls. The fields are those
 * ibv_poll_cq reports: byte_len, imm_data (or the invalidated R_Key),
 * qp_num, src_qp, slid, sl, dlid_path_bits (0: LMC 0) and wc_flags; no
 * timestamps, VLANs, flow tags or tag matching (EOPNOTSUPP).
 */
#include <endian.h>
#include <errno.h>

#include "ibtca.h"

enum {
	IBTCA_WC_EX_FLAGS = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
			    IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
			    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
			    IBV_WC_EX_WITH_DLID_PATH_BITS,
};

static struct ibv_wc *ex_wc(struct ibv_cq_ex *cqx)
{
	return &to_ibtca_cq(ibv_cq_ex_to_cq(cqx))->ex_wc;
}

/* Stands on the next completion: 0, or ENOENT if there is none. */
static int cq_ex_advance(struct ibv_cq_ex *cqx)
{
	struct ibv_cq *ibcq = ibv_cq_ex_to_cq(cqx);
	struct ibv_wc *wc = ex_wc(cqx);
	int err = ENOENT;	/* verbs' positive errno, as ibv_start_poll has it */

	if (ibtca_poll_cq(ibcq, 1, wc) == 1) {
		cqx->wr_id = wc->wr_id;
		cqx->status = wc->status;
		err = 0;
	}
	return err;
}

static int cq_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	int err = EINVAL;	/* no poll attributes are defined */

	if (!attr->comp_mask)
		err = cq_ex_advance(cqx);
	return err;
}

static int cq_next_poll(struct ibv_cq_ex *cqx)
{
	return cq_ex_advance(cqx);
}

static void cq_end_poll(struct ibv_cq_ex *cqx)
{
}

static enum ibv_wc_opcode cq_read_opcode(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->opcode;
}

static uint32_t cq_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->vendor_err;
}

static uint32_t cq_read_byte_len(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->byte_len;
}

/*
 * The immediate data, or the invalidated R_Key (struct ibv_wc's union,
 * which verbs.h's ibv_wc_read_invalidated_rkey reads back as is).
 */
static __be32 cq_read_imm_data(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->imm_data;
}

static uint32_t cq_read_qp_num(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->qp_num;
}

static uint32_t cq_read_src_qp(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->src_qp;
}

static unsigned int cq_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->wc_flags;
}

static uint32_t cq_read_slid(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->slid;
}

static uint8_t cq_read_sl(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->sl;
}

static uint8_t cq_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return ex_wc(cqx)->dlid_path_bits;
}

static struct ibv_cq_ex *ibtca_create_cq_ex(struct ibv_context *ibctx,
					    struct ibv_cq_init_attr_ex *attr)
{
	struct ibv_cq_ex *x;
	struct ibv_cq *ibcq;

	if ((attr->wc_flags & ~(uint64_t)IBTCA_WC_EX_FLAGS) ||
	    (attr->comp_mask & ~IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	ibcq = ibtca_create_cq(ibctx, attr->cqe, attr->channel,
			       attr->comp_vector);
	if (!ibcq)
		return NULL;
	/*
	 * libibverbs' ibv_create_cq_ex runs verbs_init_cq on what this
	 * returns (the CQ context, and one reference on the completion
	 * channel, dropped by ibv_destroy_cq): a second call here would
	 * take a reference no destroy drops, and the channel could never be
	 * destroyed (EBUSY).
	 */
	x = &to_ibtca_cq(ibcq)->vcq.cq_ex;
	x->start_poll = cq_start_poll;
	x->next_poll = cq_next_poll;
	x->end_poll = cq_end_poll;
	x->read_opcode = cq_read_opcode;
	x->read_vendor_err = cq_read_vendor_err;
	x->read_wc_flags = cq_read_wc_flags;
	x->read_byte_len = cq_read_byte_len;
	x->read_imm_data = cq_read_imm_data;
	x->read_qp_num = cq_read_qp_num;
	x->read_src_qp = cq_read_src_qp;
	x->read_slid = cq_read_slid;
	x->read_sl = cq_read_sl;
	x->read_dlid_path_bits = cq_read_dlid_path_bits;
	return x;
}

const struct verbs_context_ops ibtca_cq_ex_ops = {
	.create_cq_ex = ibtca_create_cq_ex,
};
