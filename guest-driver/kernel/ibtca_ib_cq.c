// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: kernel CQs. Each is a device CQ whose ring (ibtca_ring.c) the
 * driver polls into struct ib_wc. Arming stores an IBTCA_CQ_ARM_* request
 * in the CQ's doorbell record (a trapped CQ doorbell only when there is no
 * such record, or a completion was already waiting); the device raises the
 * CQ's MSI-X vector once for it, and the interrupt calls the core's
 * comp_handler. Kernel CQs get the
 * vectors from IBTCA_IB_CQ_VECTOR0 up in turn (one each while there are
 * enough), so an interrupt names few CQs; every armed CQ on the vector is
 * told (a consumer re-polls and re-arms, so an extra call is harmless, a
 * missing one would hang it). With CAP_CQ_MODERATION the device holds an
 * armed CQ's interrupt for more completions (modify_cq; the core's DIM
 * sets it for the CQs it polls).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitops.h>
#include <linux/log2.h>
#include <rdma/uverbs_ioctl.h>

#include "ibtca_cqe.h"
#include "ibtca_ib.h"

#define IBTCA_IB_CQ_ARMED	0

/* The IBA's completion statuses, as ibtca_cqe_status_is_iba() passes them. */
static_assert(IB_WC_SUCCESS == IBTCA_WC_SUCCESS);
static_assert(IB_WC_LOC_PROT_ERR == IBTCA_WC_LOC_PROT_ERR);
static_assert(IB_WC_RNR_RETRY_EXC_ERR == IBTCA_WC_RNR_RETRY_EXC_ERR);

static enum ib_wc_status ibtca_ib_status(u8 st)
{
	return ibtca_cqe_status_is_iba(st) ? st : IB_WC_GENERAL_ERR;
}

static void ibtca_ib_recv_wc(struct ibtca_ib_qp *qp, const struct ibtca_cqe *e,
			     struct ib_wc *wc)
{
	u32 imm = le32_to_cpu(e->imm_data);

	wc->wr_id = le64_to_cpu(e->wr_id);
	wc->opcode = e->opcode == IBTCA_WC_RECV_RDMA_WITH_IMM ?
		     IB_WC_RECV_RDMA_WITH_IMM : IB_WC_RECV;
	wc->src_qp = le32_to_cpu(e->src_qp);
	if (ibtca_ib_qp_is_datagram(&qp->ibqp)) {
		/* Each datagram says where it came from. */
		wc->slid = le16_to_cpu(e->slid);
		wc->sl = e->sl;
		wc->dlid_path_bits = e->dlid_path_bits;
		if (e->flags & IBTCA_CQE_F_GRH)
			wc->wc_flags |= IB_WC_GRH;
	} else {
		wc->slid = qp->dlid;
		wc->sl = rdma_ah_get_sl(&qp->attr.ah_attr);
	}
	if (e->flags & IBTCA_CQE_F_IMM) {
		/* The device keeps the wire's big-endian value as a number. */
		wc->ex.imm_data = cpu_to_be32(imm);
		wc->wc_flags |= IB_WC_WITH_IMM;
	} else if (e->flags & IBTCA_CQE_F_INV) {
		wc->ex.invalidate_rkey = imm;
		wc->wc_flags |= IB_WC_WITH_INVALIDATE;
	}
}

/*
 * Turns the ready CQE @e into @wc; false if the caller gets nothing: an
 * unsignaled send that succeeded, or a QP destroyed meanwhile.
 */
static bool ibtca_ib_cqe_to_wc(struct ibtca_ib *ib, const struct ibtca_cqe *e,
			       struct ib_wc *wc)
{
	bool recv = e->opcode & IBTCA_WC_RECV;
	struct ibtca_ib_swr *s;
	struct ibtca_ib_qp *qp;

	qp = xa_load(&ib->qps, le32_to_cpu(e->qpn));
	if (!qp)
		return false;
	if (recv && qp->ibqp.srq)
		ibtca_ib_srq_completed(qp->ibqp.srq);
	else if (recv)
		ibtca_qp_ring_completed(&qp->r, true);
	else
		ibtca_qp_ring_sent(&qp->r, le64_to_cpu(e->wr_id));
	memset(wc, 0, sizeof(*wc));
	wc->qp = &qp->ibqp;
	wc->status = ibtca_ib_status(e->status);
	wc->byte_len = le32_to_cpu(e->byte_len);
	wc->port_num = IBTCA_IB_PORT;
	if (wc->status != IB_WC_SUCCESS)
		wc->vendor_err = le32_to_cpu(e->src_qp);
	if (recv) {
		ibtca_ib_recv_wc(qp, e, wc);
		return true;
	}
	s = &qp->swr[le64_to_cpu(e->wr_id) & (BIT(qp->r.log) - 1)];
	wc->wr_id = s->wr_id;
	/* Send work requests complete in order; their WQE's wr_id is the slot. */
	wc->opcode = e->opcode == IBTCA_WC_REG_MR ? IB_WC_REG_MR :
		     ibtca_cqe_send_opcode(e->opcode);
	/* Failures complete whether signaled or not (as the IBA has it). */
	return s->signaled || wc->status != IB_WC_SUCCESS;
}

int ibtca_ib_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc)
{
	struct ibtca_ib_cq *cq = to_cq(ibcq);
	struct ibtca_ib *ib = to_ib(ibcq->device);
	struct ibtca_cqe *e;
	unsigned long flags;
	u32 start;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	start = cq->r.ci;
	while (n < num) {
		e = ibtca_cq_ring_next(&cq->r);
		if (!e)
			break;
		ibtca_cqe_begin_read();
		if (ibtca_ib_cqe_to_wc(ib, e, &wc[n]))
			n++;
		cq->r.ci++;
	}
	/* Hand the consumed entries back (in the record: no doorbell). */
	if (cq->r.ci != start)
		ibtca_cq_ring_consumed(ib->idev, &cq->r);
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

int ibtca_ib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct ibtca_ib_cq *cq = to_cq(ibcq);
	u8 arm = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
		 IBTCA_CQ_ARM_SOLICITED : IBTCA_CQ_ARM_NEXT;
	unsigned long irqflags;
	int missed = 0;

	spin_lock_irqsave(&cq->lock, irqflags);
	/* Before the request: the device may fire at once. */
	set_bit(IBTCA_IB_CQ_ARMED, &cq->armed);
	if (ibtca_cq_ring_arm_record(&cq->r, arm)) {
		/*
		 * The device fires at its next completion. One written
		 * before it saw the request is told as a missed event, or
		 * by the doorbell, which fires at once for it.
		 */
		if (!ibtca_cq_ring_next(&cq->r))
			goto out;
		if (flags & IB_CQ_REPORT_MISSED_EVENTS) {
			missed = 1;
			goto out;
		}
	}
	ibtca_cq_ring_db(to_ib(ibcq->device)->idev, &cq->r, arm);
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && ibtca_cq_ring_next(&cq->r))
		missed = 1;
out:
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return missed;
}

/*
 * Interrupt moderation: the device holds an armed CQ's interrupt until
 * @cq_count completions, or @cq_period microseconds after the first,
 * whichever comes first (0 or 1, or a period of 0: the first fires).
 */
int ibtca_ib_modify_cq(struct ib_cq *ibcq, u16 cq_count, u16 cq_period)
{
	struct ibtca_ib *ib = to_ib(ibcq->device);
	struct ibtca_cmd_modify_cq p = {
		.cqn = cpu_to_le32(to_cq(ibcq)->r.cqn),
		.count = cpu_to_le16(cq_count),
		.period_us = cpu_to_le32(cq_period),
	};

	if (!ib->cq_moderation)
		return -EOPNOTSUPP;
	return ibtca_ib_cmd(ib, IBTCA_CMD_MODIFY_CQ, &p, sizeof(p), NULL, NULL);
}

/* MSI-X @vector fired: tell the armed kernel CQs on it. Hard IRQ context. */
void ibtca_ib_cq_irq(struct ibtca_dev *idev, unsigned int vector)
{
	struct ibtca_ib_cq *cq;

	spin_lock(&idev->kcq_lock);
	list_for_each_entry(cq, &idev->kcqs, node) {
		if (cq->r.vector != vector)
			continue;
		/* User space arms its CQs on its own doorbell page. */
		if (!cq->user_ring &&
		    !test_and_clear_bit(IBTCA_IB_CQ_ARMED, &cq->armed))
			continue;
		if (cq->ibcq.comp_handler)
			cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	}
	spin_unlock(&idev->kcq_lock);
}

static u8 ibtca_ib_cq_vector(struct ibtca_ib *ib)
{
	int n = ib->idev->nvec - IBTCA_IB_CQ_VECTOR0;

	if (n <= 0)
		return IBTCA_CQ_VECTOR;
	return IBTCA_IB_CQ_VECTOR0 +
	       (u32)atomic_inc_return(&ib->next_vector) % n;
}

int ibtca_ib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		       struct uverbs_attr_bundle *attrs)
{
	struct ibtca_ib *ib = to_ib(ibcq->device);
	struct ibtca_ib_cq *cq = to_cq(ibcq);
	struct ibtca_dev *idev = ib->idev;
	u32 log;
	int ret;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (!attr->cqe || attr->cqe > le32_to_cpu(ib->attr.max_cqe))
		return -EINVAL;
	log = order_base_2(max(attr->cqe, 2U));
	if (BIT(log) > le32_to_cpu(ib->attr.max_cqe))
		return -EINVAL;
	spin_lock_init(&cq->lock);
	if (attrs) {
		/* A user context's: its rings are mapped there. */
		ret = ibtca_ib_create_ucq(ib, cq, attr->cqe,
					  ibtca_ib_cq_vector(ib),
					  &attrs->driver_udata);
		if (ret)
			return ret;
		goto listed;
	}
	ret = ibtca_ib_hw_begin(ib);
	if (ret)
		return ret;
	ret = ibtca_cq_ring_create(idev, &cq->r, log, ibtca_ib_cq_vector(ib));
	/* Without a record the CQ works with doorbells alone. */
	if (!ret && ibtca_cq_ring_bind_record(idev, &cq->r))
		dev_dbg(&idev->pdev->dev, "CQ %u: no doorbell record\n",
			cq->r.cqn);
	ibtca_ib_hw_end(ib);
	if (ret)
		return ret;
	ibcq->cqe = BIT(log);
listed:
	spin_lock_irq(&idev->kcq_lock);
	list_add_tail(&cq->node, &idev->kcqs);
	spin_unlock_irq(&idev->kcq_lock);
	return 0;
}

int ibtca_ib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct ibtca_ib *ib = to_ib(ibcq->device);
	struct ibtca_ib_cq *cq = to_cq(ibcq);
	struct ibtca_dev *idev = ib->idev;
	int ret;

	/* After this no interrupt calls the handler. */
	spin_lock_irq(&idev->kcq_lock);
	list_del(&cq->node);
	spin_unlock_irq(&idev->kcq_lock);
	ret = ibtca_ib_cmd_handle(ib, IBTCA_CMD_DESTROY_CQ, cq->r.cqn);
	/* A device that is gone was reset and forgot the CQ. */
	if (cq->user_ring)
		ibtca_ib_destroy_ucq_ring(ib, cq, ret);
	else if (ret && ret != -ENODEV)
		dev_warn(&idev->pdev->dev,
			 "device refused to destroy CQ %u (%d): ring leaked\n",
			 cq->r.cqn, ret);
	else
		ibtca_cq_ring_free(idev, &cq->r);
	return 0;
}
