// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: CQs and RC QPs of user contexts, the kernel half of the
 * provider's kernel-bypass data path (guest-driver/provider/). Their rings
 * are coherent DMA memory as the kernel's (ibtca_ring.c), bound to the
 * context's doorbell page and mapped into the context: a CQ's ring whole,
 * a QP's SQ and RQ (never its quasi-WQE ring, which only the device
 * writes). The mmap entry owns the ring, so it is freed only after the
 * device forgot the object and user space unmapped it
 * (ibtca_uctx_mmap_insert_dma()). The shapes user space gets are in
 * ibtca_uverbs_abi.h.
 *
 * A user QP and CQ also get a doorbell record (struct ibtca_db_record,
 * struct ibtca_cq_db_record: one page of coherent memory mapped into the
 * context) when the device takes it (IBTCA_CMD_QP_DB_RECORD,
 * IBTCA_CMD_CQ_DB_RECORD): the provider stores its indexes there and
 * skips the trapped doorbell store while the device reads them by itself.
 *
 * The device raises a user CQ's vector once per arm, which user space
 * writes on its doorbell page; the interrupt goes to the completion
 * channel through comp_handler (ibtca_ib_cq_irq()). A vector shared with
 * other CQs may give a user CQ an event with nothing new, which
 * ibv_get_cq_event users handle by polling again.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/log2.h>
#include <rdma/uverbs_ioctl.h>

#include "ibtca_ib.h"
#include "ibtca_uctx.h"

static struct ibtca_ib_ucontext *ibtca_udata_uctx(struct ib_udata *udata)
{
	return rdma_udata_to_drv_context(udata, struct ibtca_ib_ucontext, ibuc);
}

/*
 * The device forgot (@destroyed 0 or -ENODEV) or kept the object whose
 * ring @entry owns: the ring goes with the entry's last mapping, or leaks.
 */
static void ibtca_ib_uring_release(struct ibtca_ib *ib,
				   struct rdma_user_mmap_entry *entry,
				   const char *what, u32 num, int destroyed)
{
	if (destroyed && destroyed != -ENODEV) {
		dev_warn(&ib->idev->pdev->dev,
			 "device refused to destroy user %s %u (%d): ring leaked\n",
			 what, num, destroyed);
		ibtca_uctx_mmap_keep_dma(entry);
	}
	ibtca_uctx_mmap_remove(entry);
}

/*
 * Gives device object @handle a doorbell record with command @opcode
 * (QP_DB_RECORD, CQ_DB_RECORD) and maps its page into @uctx at *@offset;
 * the page's mmap entry, or NULL: without a record (a device that does
 * not know the command, no memory) the object works with doorbells alone.
 */
static struct rdma_user_mmap_entry *
ibtca_ib_udb_record(struct ibtca_ib *ib, struct ibtca_ib_ucontext *uctx,
		    u8 opcode, u32 handle, u64 *offset)
{
	struct device *dev = &ib->idev->pdev->dev;
	struct ibtca_cmd_db_record p = {};
	struct rdma_user_mmap_entry *entry;
	dma_addr_t dma;
	void *rec;

	rec = dma_alloc_coherent(dev, PAGE_SIZE, &dma, GFP_KERNEL);
	if (!rec)
		return NULL;
	entry = ibtca_uctx_mmap_insert_dma(&uctx->ibuc, dev, rec, dma,
					   PAGE_SIZE, PAGE_SIZE, offset);
	if (IS_ERR(entry)) {
		dma_free_coherent(dev, PAGE_SIZE, rec, dma);
		return NULL;
	}
	p.handle = cpu_to_le32(handle);
	p.addr = cpu_to_le64(dma);
	if (ibtca_ib_cmd(ib, opcode, &p, sizeof(p), NULL, NULL)) {
		/* Not bound: nothing of the device's points at it. */
		ibtca_uctx_mmap_remove(entry);
		*offset = 0;
		return NULL;
	}
	return entry;
}

int ibtca_ib_create_ucq(struct ibtca_ib *ib, struct ibtca_ib_cq *cq, u32 cqe,
			u8 vector, struct ib_udata *udata)
{
	struct ibtca_ib_ucontext *uctx = ibtca_udata_uctx(udata);
	u32 max = le32_to_cpu(ib->attr.max_cqe);
	struct ibtca_create_cq_resp resp = {};
	struct rdma_user_mmap_entry *entry;
	struct ibtca_dev *idev = ib->idev;
	bool doubled = true;
	u32 log;
	int ret;

	/* flags and db_record_mmap_offset came later: optional. */
	if (!uctx || !uctx->db_page ||
	    udata->outlen < offsetofend(typeof(resp), ring_bytes))
		return -EINVAL;
	/*
	 * Twice the entries asked for when the device allows: the provider
	 * then hands consumed entries back in batches, not one doorbell per
	 * poll (ibcq->cqe stays what the caller may have outstanding).
	 */
	log = order_base_2(max(2 * cqe, 2U));
	if (BIT(log) > max) {
		doubled = false;
		log = order_base_2(max(cqe, 2U));
	}
	if (BIT(log) > max)
		return -EINVAL;
	ret = ibtca_ib_hw_begin(ib);
	if (ret)
		return ret;
	ret = ibtca_cq_ring_create_db(idev, &cq->r, log, vector, uctx->db_page);
	ibtca_ib_hw_end(ib);
	if (ret)
		return ret;
	entry = ibtca_uctx_mmap_insert_dma(&uctx->ibuc, &idev->pdev->dev,
					   cq->r.ring, cq->r.dma, cq->r.size,
					   cq->r.size, &resp.ring_mmap_offset);
	if (IS_ERR(entry)) {
		ret = ibtca_ib_cmd_handle(ib, IBTCA_CMD_DESTROY_CQ, cq->r.cqn);
		if (!ret || ret == -ENODEV)
			ibtca_cq_ring_free(idev, &cq->r);
		return PTR_ERR(entry);
	}
	cq->user_ring = entry;
	resp.cqn = cq->r.cqn;
	resp.log_entries = log;
	resp.ring_bytes = cq->r.size;
	if (udata->outlen >= sizeof(resp)) {
		cq->user_db_record =
			ibtca_ib_udb_record(ib, uctx, IBTCA_CMD_CQ_DB_RECORD,
					    cq->r.cqn,
					    &resp.db_record_mmap_offset);
		if (cq->user_db_record)
			resp.flags |= IBTCA_UCQ_F_DB_RECORD;
	}
	ret = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
	if (ret) {
		ibtca_ib_destroy_ucq_ring(ib, cq,
					  ibtca_ib_cmd_handle(ib,
							      IBTCA_CMD_DESTROY_CQ,
							      cq->r.cqn));
		return ret;
	}
	cq->ibcq.cqe = doubled ? BIT(log - 1) : BIT(log);
	return 0;
}

void ibtca_ib_destroy_ucq_ring(struct ibtca_ib *ib, struct ibtca_ib_cq *cq,
			       int destroyed)
{
	ibtca_ib_uring_release(ib, cq->user_ring, "CQ", cq->r.cqn, destroyed);
	cq->user_ring = NULL;
	if (cq->user_db_record)
		ibtca_ib_uring_release(ib, cq->user_db_record, "CQ record",
				       cq->r.cqn, destroyed);
	cq->user_db_record = NULL;
}

/*
 * The flags of a user create's driver data, a struct ibtca_create_qp_req
 * or ibtca_create_srq_req (one layout): 0 without driver data (an older
 * provider); -EINVAL for a flag outside @known, the reserved field set or
 * bytes past the structure that are not 0.
 */
int ibtca_ib_ureq_flags(struct ib_udata *udata, u32 known)
{
	struct ibtca_create_qp_req req = {};
	int ret;

	BUILD_BUG_ON(sizeof(struct ibtca_create_srq_req) != sizeof(req));
	if (!udata->inlen)
		return 0;
	if (udata->inlen < sizeof(req) ||
	    !ib_is_udata_cleared(udata, sizeof(req),
				 udata->inlen - sizeof(req)))
		return -EINVAL;
	ret = ib_copy_from_udata(&req, udata, sizeof(req));
	if (ret)
		return ret;
	if ((req.flags & ~known) || req.reserved)
		return -EINVAL;
	return req.flags;
}

int ibtca_ib_create_urc(struct ibtca_ib *ib, struct ibtca_ib_qp *qp,
			struct ib_qp_init_attr *init,
			const struct ibtca_qp_logs *logs,
			struct ib_udata *udata)
{
	struct ibtca_ib_ucontext *uctx = ibtca_udata_uctx(udata);
	struct ibtca_ib_cq *scq = to_cq(init->send_cq);
	struct ibtca_ib_cq *rcq = to_cq(init->recv_cq);
	struct ibtca_create_qp_resp resp = {};
	struct rdma_user_mmap_entry *entry;
	struct ibtca_dev *idev = ib->idev;
	size_t rq_offset, map_len;
	bool strides = logs->sq_stride != IBTCA_RECV_LOG_STRIDE ||
		       (logs->rq_stride && logs->rq_stride != IBTCA_RECV_LOG_STRIDE);
	int ret;

	/*
	 * flags and db_record_mmap_offset came later: optional; a provider
	 * laying out strides reads them in the strides' fields.
	 */
	if (!uctx || !uctx->db_page ||
	    udata->outlen < (strides ? sizeof(resp) :
			     offsetofend(typeof(resp), ring_bytes)) ||
	    !scq->user_ring || !rcq->user_ring)
		return -EINVAL;
	ret = ibtca_ib_hw_begin(ib);
	if (ret)
		return ret;
	ret = ibtca_qp_ring_create_sized(idev, &qp->r, to_pd(qp->ibqp.pd)->pdn,
					 scq->r.cqn, rcq->r.cqn, logs,
					 uctx->db_page,
					 init->srq ? to_srq(init->srq)->srqn : 0,
					 init->qp_type == IB_QPT_UD ?
					 IBTCA_QPT_UD : IBTCA_QPT_RC);
	ibtca_ib_hw_end(ib);
	if (ret)
		return ret;
	/* SQ, then RQ, each page-aligned; the quasi-WQE ring stays ours. */
	rq_offset = (void *)qp->r.rq - qp->r.mem;
	map_len = rq_offset +
		  PAGE_ALIGN((size_t)1 << (qp->r.rq_log_stride + qp->r.rq_log));
	entry = ibtca_uctx_mmap_insert_dma(&uctx->ibuc, &idev->pdev->dev,
					   qp->r.mem, qp->r.dma, qp->r.size,
					   map_len, &resp.ring_mmap_offset);
	if (IS_ERR(entry)) {
		ret = ibtca_ib_cmd_handle(ib, IBTCA_CMD_DESTROY_QP, qp->r.qpn);
		if (!ret || ret == -ENODEV)
			ibtca_qp_ring_free(idev, &qp->r);
		return PTR_ERR(entry);
	}
	qp->user_ring = entry;
	resp.qpn = qp->r.qpn;
	resp.log_wqes = qp->r.log;
	resp.sq_log_stride = qp->r.log_stride;
	resp.rq_log_stride = qp->r.rq_log_stride;
	resp.sq_offset = 0;
	resp.rq_offset = rq_offset;
	resp.ring_bytes = map_len;
	if (udata->outlen >= sizeof(resp)) {
		qp->user_db_record =
			ibtca_ib_udb_record(ib, uctx, IBTCA_CMD_QP_DB_RECORD,
					    qp->r.qpn,
					    &resp.db_record_mmap_offset);
		if (qp->user_db_record)
			resp.flags |= IBTCA_UQP_F_DB_RECORD;
	}
	ret = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
	if (ret) {
		ibtca_ib_destroy_uqp_ring(ib, qp,
					  ibtca_ib_cmd_handle(ib,
							      IBTCA_CMD_DESTROY_QP,
							      qp->r.qpn));
		return ret;
	}
	return 0;
}

void ibtca_ib_destroy_uqp_ring(struct ibtca_ib *ib, struct ibtca_ib_qp *qp,
			       int destroyed)
{
	ibtca_ib_uring_release(ib, qp->user_ring, "QP", qp->r.qpn, destroyed);
	qp->user_ring = NULL;
	if (qp->user_db_record)
		ibtca_ib_uring_release(ib, qp->user_db_record, "QP record",
				       qp->r.qpn, destroyed);
	qp->user_db_record = NULL;
}
