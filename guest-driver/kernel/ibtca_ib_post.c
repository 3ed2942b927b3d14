// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: post_send and post_recv of kernel QPs. Each work request
 * becomes a WQE in the QP's ring (ibtca_ring.c); one doorbell after the
 * chain covers every WQE it wrote. Only signaled requests ask the device
 * for a completion (a failed one completes anyway): the device completes
 * sends in order, so each completion frees its slot and those of the
 * unsignaled requests before it, and no interrupt comes for a completion
 * poll_cq would hide. The first request the QP cannot take stops the
 * chain with *bad_wr pointing at it; those before it stay posted.
 * IB_SEND_INLINE (SEND and RDMA WRITE kinds, at most IBTCA_MAX_INLINE_DATA
 * bytes, -EINVAL past it) copies the payload from the SGEs' kernel
 * addresses into the WQE, where the device reads it; no lkey is used.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "ibtca_ib.h"
#include "ibtca_ib_mr.h"
#include "ibtca_wqe.h"

#define IBTCA_IB_SEND_FLAGS	(IB_SEND_SIGNALED | IB_SEND_SOLICITED | \
				 IB_SEND_FENCE | IB_SEND_INLINE)

/* The device's opcode for @op, or -EINVAL. */
static int ibtca_ib_wr_opcode(enum ib_wr_opcode op)
{
	int code = ibtca_wqe_opcode(op);

	/*
	 * IB_WR_BIND_MW stays out (the shared map has no entry for it): the
	 * kernel's API has no work request that carries a window, its region
	 * and its bounds.
	 */
	if (op == IB_WR_REG_MR)
		return IBTCA_WR_REG_MR;
	return code < 0 ? -EINVAL : code;
}

/* Fills WQE @w (zeroed) from @wr (checked by the caller). */
static void ibtca_ib_send_wqe(struct ibtca_send_wqe *w, u8 opcode,
			      const struct ib_send_wr *wr)
{
	int i;

	ibtca_wqe_start(w, opcode, wr->send_flags & IB_SEND_SOLICITED,
			wr->send_flags & IB_SEND_FENCE,
			wr->send_flags & IB_SEND_INLINE);
	if (opcode == IBTCA_WR_REG_MR) {
		u8 flags = w->flags;

		/* The same 128 bytes, laid out as struct ibtca_reg_mr_wqe. */
		static_assert(sizeof(struct ibtca_reg_mr_wqe) == sizeof(*w));
		static_assert(offsetof(struct ibtca_reg_mr_wqe, flags) ==
			      offsetof(struct ibtca_send_wqe, flags));
		ibtca_ib_reg_mr_wqe((struct ibtca_reg_mr_wqe *)w, reg_wr(wr));
		((struct ibtca_reg_mr_wqe *)w)->flags = flags;
		return;
	}
	switch (wr->opcode) {
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		w->imm_data = ibtca_wqe_imm(wr->ex.imm_data);
		break;
	case IB_WR_LOCAL_INV:
	case IB_WR_SEND_WITH_INV:
		w->imm_data = cpu_to_le32(wr->ex.invalidate_rkey);
		break;
	default:
		break;
	}
	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
		ibtca_wqe_rdma(w, rdma_wr(wr)->remote_addr, rdma_wr(wr)->rkey);
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		ibtca_wqe_atomic(w, atomic_wr(wr)->remote_addr,
				 atomic_wr(wr)->rkey, atomic_wr(wr)->compare_add,
				 atomic_wr(wr)->swap);
		break;
	default:
		break;
	}
	for (i = 0; i < wr->num_sge; i++)
		ibtca_wqe_gather(w, wr->sg_list[i].addr, wr->sg_list[i].length,
				 wr->sg_list[i].lkey);
}

/*
 * Fills the UD send WQE @w (UD, QP0 and QP1; zeroed) from @wr: the AH's
 * address vector travels in the WQE.
 */
static void ibtca_ib_ud_wqe(struct ibtca_ud_send_wqe *w,
			    const struct ib_send_wr *wr)
{
	const struct ib_ud_wr *ud = ud_wr(wr);
	const struct ibtca_ib_ah *ah = to_ah(ud->ah);
	int i;

	static_assert(sizeof(*w) == sizeof(struct ibtca_send_wqe));
	ibtca_wqe_ud_start(w, wr->opcode == IB_WR_SEND_WITH_IMM,
			   wr->ex.imm_data, wr->send_flags & IB_SEND_SOLICITED,
			   ud->remote_qpn, ud->remote_qkey);
	w->dlid = cpu_to_le16(ah->dlid);
	w->sl = ah->sl;
	w->src_path_bits = ah->src_path_bits;
	if (ah->grh) {
		w->av_flags = IBTCA_UD_AV_F_GRH;
		w->hop_limit = ah->hop_limit;
		w->traffic_class = ah->traffic_class;
		w->flow_label = cpu_to_le32(ah->flow_label);
		memcpy(w->dgid, ah->dgid, sizeof(w->dgid));
	}
	for (i = 0; i < wr->num_sge; i++)
		ibtca_wqe_ud_gather(w, wr->sg_list[i].addr,
				    wr->sg_list[i].length, wr->sg_list[i].lkey);
}

/* A datagram QP's opcode for @wr: SEND (with immediate) to an AH. */
static int ibtca_ib_ud_check(struct ibtca_ib_qp *qp,
			     const struct ib_send_wr *wr)
{
	if ((wr->opcode != IB_WR_SEND && wr->opcode != IB_WR_SEND_WITH_IMM) ||
	    (wr->send_flags & ~IBTCA_IB_SEND_FLAGS) ||
	    (wr->send_flags & IB_SEND_INLINE) || !ud_wr(wr)->ah ||
	    wr->num_sge < 0 ||
	    wr->num_sge > ibtca_send_stride_sges(qp->r.log_stride))
		return -EINVAL;
	return wr->opcode == IB_WR_SEND ? IBTCA_WR_UD_SEND :
	       IBTCA_WR_UD_SEND_IMM;
}

/* The device's opcode for @wr, or -EINVAL if the QP cannot take it. */
static int ibtca_ib_send_check(struct ibtca_ib *ib, struct ibtca_ib_qp *qp,
			       const struct ib_send_wr *wr)
{
	int op = ibtca_ib_wr_opcode(wr->opcode);
	u64 len = 0;
	int i;

	if (op < 0 || (wr->send_flags & ~IBTCA_IB_SEND_FLAGS) ||
	    wr->num_sge < 0 ||
	    wr->num_sge > ibtca_send_stride_sges(qp->r.log_stride))
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (!ibtca_wqe_buffers_ok(op, wr->num_sge,
				  wr->num_sge ? wr->sg_list[0].length : 0,
				  wr->send_flags & IB_SEND_INLINE, len))
		return -EINVAL;
	if (op == IBTCA_WR_REG_MR &&
	    !ibtca_ib_reg_mr_check(&ib->ibdev, reg_wr(wr)))
		return -EINVAL;
	return op;
}

int ibtca_ib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		       const struct ib_send_wr **bad_wr)
{
	struct ibtca_ib_qp *qp = to_qp(ibqp);
	struct ibtca_ib *ib = to_ib(ibqp->device);
	enum ib_qp_state state = READ_ONCE(qp->attr.qp_state);
	bool datagram = ibtca_ib_qp_is_datagram(ibqp);
	struct ibtca_send_wqe *w;
	unsigned long flags;
	u32 start, slot;
	bool signaled;
	int op, ret = 0;

	/* In SQE and ERR the device flushes what is posted. */
	if (state != IB_QPS_RTS && state != IB_QPS_SQE &&
	    state != IB_QPS_ERR) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&qp->sq_lock, flags);
	start = qp->r.sq_pi;
	for (; wr; wr = wr->next) {
		op = datagram ? ibtca_ib_ud_check(qp, wr) :
				ibtca_ib_send_check(ib, qp, wr);
		if (op < 0) {
			ret = op;
			break;
		}
		slot = qp->r.sq_pi;
		w = ibtca_sq_slot(&qp->r);
		if (!w) {
			ret = -ENOMEM;
			break;
		}
		if (datagram)
			ibtca_ib_ud_wqe((struct ibtca_ud_send_wqe *)w, wr);
		else
			ibtca_ib_send_wqe(w, op, wr);
		w->wr_id = cpu_to_le64(slot);
		signaled = qp->sq_sig_type == IB_SIGNAL_ALL_WR ||
			   (wr->send_flags & IB_SEND_SIGNALED);
		/* The UD and REG_MR layouts keep the flags where @w does. */
		static_assert(offsetof(struct ibtca_ud_send_wqe, flags) ==
			      offsetof(struct ibtca_send_wqe, flags));
		if (!signaled)
			w->flags &= ~IBTCA_WQE_F_SIGNALED;
		qp->swr[slot & (BIT(qp->r.log) - 1)] = (struct ibtca_ib_swr) {
			.wr_id = wr->wr_id,
			.signaled = signaled,
		};
	}
	if (qp->r.sq_pi != start)
		ibtca_sq_db(ib->idev, &qp->r);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (ret)
		*bad_wr = wr;
	return ret;
}

void ibtca_ib_recv_wqe(struct ibtca_recv_wqe *w, const struct ib_recv_wr *wr)
{
	int i;

	ibtca_recv_wqe_start(w, wr->wr_id);
	for (i = 0; i < wr->num_sge; i++)
		ibtca_recv_wqe_gather(w, wr->sg_list[i].addr,
				      wr->sg_list[i].length, wr->sg_list[i].lkey);
}

int ibtca_ib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr)
{
	struct ibtca_ib_qp *qp = to_qp(ibqp);
	struct ibtca_ib *ib = to_ib(ibqp->device);
	struct ibtca_recv_wqe *w;
	unsigned long flags;
	int ret = 0;
	u32 start;

	if (READ_ONCE(qp->attr.qp_state) == IB_QPS_RESET) {
		*bad_wr = wr;
		return -EINVAL;
	}
	/* A QP on an SRQ has no receive queue of its own. */
	if (qp->ibqp.srq) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&qp->rq_lock, flags);
	start = qp->r.rq_pi;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 ||
		    wr->num_sge > ibtca_recv_stride_sges(qp->r.rq_log_stride)) {
			ret = -EINVAL;
			break;
		}
		w = ibtca_rq_slot(&qp->r);
		if (!w) {
			ret = -ENOMEM;
			break;
		}
		ibtca_ib_recv_wqe(w, wr);
	}
	if (qp->r.rq_pi != start)
		ibtca_rq_db(ib->idev, &qp->r);
	spin_unlock_irqrestore(&qp->rq_lock, flags);
	if (ret)
		*bad_wr = wr;
	return ret;
}
