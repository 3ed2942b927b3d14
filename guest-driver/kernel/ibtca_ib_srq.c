// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: shared receive queues, for kernel consumers and user contexts.
 * An SRQ is a device SRQ (CREATE_SRQ) whose ring of receive WQEs lives in
 * coherent DMA memory; every QP created with it takes its receives from
 * that ring, in ring order. post_srq_recv writes WQEs and rings the SRQ
 * doorbell (BAR0's IBTCA_REG_DB_SRQ); a user context's SRQ is rung on the
 * context's doorbell page by the provider, which writes into the ring
 * mapped through an mmap entry that owns it (as user QPs' rings are).
 *
 * The device reads WQEs in ring order, so each receive completion of a
 * QP on the SRQ means one more slot is free (@done, counted by poll_cq
 * on whichever CQ it arrives). An armed limit (srq_limit) fires once: the
 * device sets IBTCA_EVENT_SRQ_LIMIT in EVENT_CAUSE, the port work calls
 * ibtca_ib_srq_events(), which asks each SRQ for its limit_events
 * (QUERY_SRQ's out1) and hands IB_EVENT_SRQ_LIMIT_REACHED to the SRQs
 * whose count moved.
 *
 * modify_srq with IB_SRQ_MAX_WR past the ring grows it (RESIZE_SRQ,
 * IB_DEVICE_SRQ_RESIZE): a new ring of the next power of two, into which
 * the device copies the receives posted and not yet taken, each to its
 * index's slot. A kernel SRQ's posts meanwhile go into both rings; a user
 * SRQ's provider posts nothing meanwhile and maps the new ring, whose mmap
 * entry the kernel hands back through ibtca_modify_srq_cmd's resp_addr.
 * The old ring is freed once the device reads the new one (a user's when
 * its last mapping goes).
 *
 * An SRQ's WQEs are as large as the max_sge it was created with needs
 * (CREATE_SRQ's log_stride: IPoIB's connected mode asks for 17 at MTU
 * 65520), up to max_srq_sge; a user SRQ's only if its provider asks for
 * a stride (IBTCA_USRQ_REQ_STRIDE), which the response names, else they
 * are 128-byte WQEs of at most 4 SGEs.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/log2.h>
#include <linux/uaccess.h>
#include <rdma/uverbs_ioctl.h>

#include "ibtca_ib.h"
#include "ibtca_uctx.h"
#include "ibtca_wqe.h"

static int ibtca_ib_srq_cmd(struct ibtca_ib *ib, u8 opcode, u32 srqn,
			    u32 *out0, u32 *out1)
{
	struct ibtca_cmd_handle p = { .handle = cpu_to_le32(srqn) };

	return ibtca_ib_cmd(ib, opcode, &p, sizeof(p), out0, out1);
}

static int ibtca_ib_srq_modify_cmd(struct ibtca_ib *ib, u32 srqn, u32 mask,
				   u32 max_wr, u32 limit)
{
	struct ibtca_cmd_modify_srq p = {
		.srqn = cpu_to_le32(srqn),
		.attr_mask = cpu_to_le32(mask),
		.max_wr = cpu_to_le32(max_wr),
		.srq_limit = cpu_to_le32(limit),
	};

	return ibtca_ib_cmd(ib, IBTCA_CMD_MODIFY_SRQ, &p, sizeof(p), NULL, NULL);
}

/* The ring and the device SRQ; @db_page 0 for a kernel SRQ. */
static int ibtca_ib_srq_ring_create(struct ibtca_ib *ib,
				    struct ibtca_ib_srq *srq,
				    const struct ib_srq_attr *a, u32 db_page)
{
	struct device *dev = &ib->idev->pdev->dev;
	struct ibtca_cmd_create_srq p = { };
	int ret;

	srq->size = PAGE_ALIGN((size_t)1 << (srq->log + srq->log_stride));
	srq->ring = dma_alloc_coherent(dev, srq->size, &srq->dma, GFP_KERNEL);
	if (!srq->ring)
		return -ENOMEM;
	p.pdn = cpu_to_le32(to_pd(srq->ibsrq.pd)->pdn);
	p.log_entries = srq->log;
	p.log_stride = srq->log_stride;
	p.ring = cpu_to_le64(srq->dma);
	p.max_wr = cpu_to_le32(srq->max_wr);
	p.srq_limit = cpu_to_le32(a->srq_limit);
	p.db_page = cpu_to_le32(db_page);
	ret = ibtca_ib_cmd(ib, IBTCA_CMD_CREATE_SRQ, &p, sizeof(p),
			   &srq->srqn, NULL);
	if (ret) {
		dma_free_coherent(dev, srq->size, srq->ring, srq->dma);
		srq->ring = NULL;
	}
	return ret;
}

static void ibtca_ib_srq_ring_free(struct ibtca_ib *ib,
				   struct ibtca_ib_srq *srq)
{
	if (srq->ring)
		dma_free_coherent(&ib->idev->pdev->dev, srq->size, srq->ring,
				  srq->dma);
	srq->ring = NULL;
}

/* A user context's SRQ: its ring mapped there, its number and shape told. */
static int ibtca_ib_srq_user(struct ibtca_ib *ib, struct ibtca_ib_srq *srq,
			     struct ib_udata *udata)
{
	struct ibtca_create_srq_resp resp = { };
	struct rdma_user_mmap_entry *entry;
	struct ibtca_ib_ucontext *uctx;

	uctx = rdma_udata_to_drv_context(udata, struct ibtca_ib_ucontext,
					 ibuc);
	entry = ibtca_uctx_mmap_insert_dma(&uctx->ibuc, &ib->idev->pdev->dev,
					   srq->ring, srq->dma, srq->size,
					   srq->size, &resp.ring_mmap_offset);
	if (IS_ERR(entry))
		return PTR_ERR(entry);
	srq->user_ring = entry;
	resp.srqn = srq->srqn;
	resp.log_wqes = srq->log;
	resp.ring_bytes = srq->size;
	resp.max_wr = srq->max_wr;
	resp.log_stride = srq->log_stride;
	return ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
}

int ibtca_ib_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			struct ib_udata *udata)
{
	struct ibtca_ib *ib = to_ib(ibsrq->device);
	struct ibtca_ib_srq *srq = to_srq(ibsrq);
	struct ib_srq_attr *a = &init->attr;
	struct ibtca_ib_ucontext *uctx = NULL;
	int ret, destroyed, stride = 0;

	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!a->max_wr || a->max_wr > ib->max_srq_wr ||
	    a->max_sge > ib->max_srq_sge || a->srq_limit >= a->max_wr)
		return -EINVAL;
	srq->log_stride = ibtca_recv_log_stride(a->max_sge);
	if (udata) {
		stride = ibtca_ib_ureq_flags(udata, IBTCA_USRQ_REQ_STRIDE);
		if (stride < 0)
			return stride;
		/* A provider without strides lays out 128-byte WQEs. */
		if (!stride && srq->log_stride != IBTCA_RECV_LOG_STRIDE)
			return -EINVAL;
		uctx = rdma_udata_to_drv_context(udata,
						 struct ibtca_ib_ucontext,
						 ibuc);
		if (!uctx || !uctx->db_page ||
		    udata->outlen < (stride ?
				     sizeof(struct ibtca_create_srq_resp) :
				     offsetofend(struct ibtca_create_srq_resp,
						 reserved)))
			return -EINVAL;
	}
	spin_lock_init(&srq->lock);
	mutex_init(&srq->modify_lock);
	atomic_set(&srq->done, 0);
	srq->log = order_base_2(max(a->max_wr, 2U));
	srq->max_wr = a->max_wr;
	ret = ibtca_ib_srq_ring_create(ib, srq, a, uctx ? uctx->db_page : 0);
	if (ret)
		return ret;
	if (uctx) {
		ret = ibtca_ib_srq_user(ib, srq, udata);
		if (ret)
			goto err_destroy;
	}
	a->max_sge = ibtca_recv_stride_sges(srq->log_stride);
	mutex_lock(&ib->srq_lock);
	list_add_tail(&srq->node, &ib->srqs);
	mutex_unlock(&ib->srq_lock);
	return 0;

err_destroy:
	destroyed = ibtca_ib_srq_cmd(ib, IBTCA_CMD_DESTROY_SRQ, srq->srqn,
				     NULL, NULL);
	if (srq->user_ring) {
		if (destroyed && destroyed != -ENODEV)
			ibtca_uctx_mmap_keep_dma(srq->user_ring);
		ibtca_uctx_mmap_remove(srq->user_ring);
		srq->user_ring = NULL;
	} else if (!destroyed || destroyed == -ENODEV) {
		ibtca_ib_srq_ring_free(ib, srq);
	}
	return ret;
}

/* RESIZE_SRQ to the ring of 2^@log entries at @dma. */
static int ibtca_ib_srq_resize_cmd(struct ibtca_ib *ib, struct ibtca_ib_srq *srq,
				   u32 log, dma_addr_t dma, u32 max_wr)
{
	struct ibtca_cmd_resize_srq p = {
		.srqn = cpu_to_le32(srq->srqn),
		.log_entries = log,
		.ring = cpu_to_le64(dma),
		.max_wr = cpu_to_le32(max_wr),
	};

	return ibtca_ib_cmd(ib, IBTCA_CMD_RESIZE_SRQ, &p, sizeof(p), NULL, NULL);
}

/* Where a user's provider wants the new ring told; 0 if it cannot say. */
static u64 ibtca_ib_srq_resp_addr(struct ib_udata *udata)
{
	struct ibtca_modify_srq_cmd cmd = { };

	if (!udata || udata->inlen < sizeof(cmd) ||
	    ib_copy_from_udata(&cmd, udata, sizeof(cmd)))
		return 0;
	return cmd.resp_addr;
}

/* A user SRQ grows: the new ring mapped and told, the old entry let go. */
static int ibtca_ib_srq_grow_user(struct ibtca_ib *ib,
				  struct ibtca_ib_srq *srq, u32 max_wr,
				  u32 log, struct ib_udata *udata)
{
	struct device *dev = &ib->idev->pdev->dev;
	struct ibtca_modify_srq_resp resp = { };
	struct rdma_user_mmap_entry *entry;
	size_t size = PAGE_ALIGN((size_t)1 << (log + srq->log_stride));
	u64 resp_addr = ibtca_ib_srq_resp_addr(udata);
	struct ibtca_recv_wqe *ring;
	dma_addr_t dma;
	int ret;

	if (!resp_addr)
		return -EINVAL;
	/* Where the answer goes must take it before anything changes. */
	if (copy_to_user(u64_to_user_ptr(resp_addr), &resp, sizeof(resp)))
		return -EFAULT;
	ring = dma_alloc_coherent(dev, size, &dma, GFP_KERNEL);
	if (!ring)
		return -ENOMEM;
	entry = ibtca_uctx_mmap_insert_dma(srq->user_ring->ucontext, dev, ring,
					   dma, size, size,
					   &resp.ring_mmap_offset);
	if (IS_ERR(entry)) {
		dma_free_coherent(dev, size, ring, dma);
		return PTR_ERR(entry);
	}
	ret = ibtca_ib_srq_resize_cmd(ib, srq, log, dma, max_wr);
	if (ret) {
		/* Nothing of the device's points at the new ring. */
		ibtca_uctx_mmap_remove(entry);
		return ret;
	}
	/* The old ring goes with the provider's last mapping of it. */
	ibtca_uctx_mmap_remove(srq->user_ring);
	srq->user_ring = entry;
	srq->ring = ring;
	srq->dma = dma;
	srq->size = size;
	srq->log = log;
	resp.ring_bytes = size;
	resp.log_wqes = log;
	resp.max_wr = max_wr;
	if (copy_to_user(u64_to_user_ptr(resp_addr), &resp, sizeof(resp)))
		return -EFAULT;
	return 0;
}

/* A kernel SRQ grows; posts meanwhile go into both rings. */
static int ibtca_ib_srq_grow_kernel(struct ibtca_ib *ib,
				    struct ibtca_ib_srq *srq, u32 max_wr,
				    u32 log)
{
	struct device *dev = &ib->idev->pdev->dev;
	size_t size = PAGE_ALIGN((size_t)1 << (log + srq->log_stride));
	struct ibtca_recv_wqe *ring, *old;
	dma_addr_t dma, old_dma;
	unsigned long flags;
	size_t old_size;
	int ret;

	ring = dma_alloc_coherent(dev, size, &dma, GFP_KERNEL);
	if (!ring)
		return -ENOMEM;
	spin_lock_irqsave(&srq->lock, flags);
	srq->next_ring = ring;
	srq->next_log = log;
	spin_unlock_irqrestore(&srq->lock, flags);
	ret = ibtca_ib_srq_resize_cmd(ib, srq, log, dma, max_wr);
	spin_lock_irqsave(&srq->lock, flags);
	srq->next_ring = NULL;
	old = srq->ring;
	old_dma = srq->dma;
	old_size = srq->size;
	if (!ret) {
		srq->ring = ring;
		srq->dma = dma;
		srq->size = size;
		srq->log = log;
	}
	spin_unlock_irqrestore(&srq->lock, flags);
	if (ret)
		dma_free_coherent(dev, size, ring, dma);
	else
		dma_free_coherent(dev, old_size, old, old_dma);
	return ret;
}

/*
 * modify_srq under the SRQ's modify_lock. IB_SRQ_LIMIT arms (or with 0
 * disarms) the limit event; IB_SRQ_MAX_WR changes how many receives may
 * be posted, within the ring or, past it, growing the ring
 * (IB_DEVICE_SRQ_RESIZE; smaller than what is posted: the device's
 * -EINVAL).
 */
static int ibtca_ib_srq_modify(struct ibtca_ib *ib, struct ibtca_ib_srq *srq,
			       struct ib_srq_attr *attr,
			       enum ib_srq_attr_mask mask,
			       struct ib_udata *udata)
{
	u32 dev_mask = 0, max_wr = srq->max_wr;
	int ret;

	if (mask & IB_SRQ_MAX_WR) {
		if (!attr->max_wr || attr->max_wr > ib->max_srq_wr)
			return -EINVAL;
		max_wr = attr->max_wr;
		if (max_wr > BIT(srq->log)) {
			u32 log = order_base_2(max_wr);

			if ((mask & IB_SRQ_LIMIT) && attr->srq_limit >= max_wr)
				return -EINVAL;
			ret = srq->user_ring ?
			      ibtca_ib_srq_grow_user(ib, srq, max_wr, log,
						     udata) :
			      ibtca_ib_srq_grow_kernel(ib, srq, max_wr, log);
			if (ret)
				return ret;
			WRITE_ONCE(srq->max_wr, max_wr);
			if (!(mask & IB_SRQ_LIMIT))
				return 0;
		} else {
			dev_mask |= IBTCA_SRQ_ATTR_MAX_WR;
		}
	}
	if (mask & IB_SRQ_LIMIT)
		dev_mask |= IBTCA_SRQ_ATTR_LIMIT;
	ret = ibtca_ib_srq_modify_cmd(ib, srq->srqn, dev_mask, max_wr,
				      mask & IB_SRQ_LIMIT ? attr->srq_limit : 0);
	/* The device's errno: EINVAL for a limit not below max_wr. */
	if (ret)
		return ret;
	WRITE_ONCE(srq->max_wr, max_wr);
	return 0;
}

int ibtca_ib_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct ibtca_ib *ib = to_ib(ibsrq->device);
	struct ibtca_ib_srq *srq = to_srq(ibsrq);
	int ret;

	if (mask & ~(IB_SRQ_MAX_WR | IB_SRQ_LIMIT))
		return -EINVAL;
	mutex_lock(&srq->modify_lock);
	ret = ibtca_ib_srq_modify(ib, srq, attr, mask, udata);
	mutex_unlock(&srq->modify_lock);
	return ret;
}

int ibtca_ib_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct ibtca_ib *ib = to_ib(ibsrq->device);
	struct ibtca_ib_srq *srq = to_srq(ibsrq);
	u32 limit, events;
	int ret;

	ret = ibtca_ib_srq_cmd(ib, IBTCA_CMD_QUERY_SRQ, srq->srqn, &limit,
			       &events);
	if (ret)
		return ret;
	attr->max_wr = READ_ONCE(srq->max_wr);
	attr->max_sge = ibtca_recv_stride_sges(srq->log_stride);
	attr->srq_limit = limit;
	return 0;
}

int ibtca_ib_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct ibtca_ib *ib = to_ib(ibsrq->device);
	struct ibtca_ib_srq *srq = to_srq(ibsrq);
	int ret;

	mutex_lock(&ib->srq_lock);
	list_del(&srq->node);
	mutex_unlock(&ib->srq_lock);
	ret = ibtca_ib_srq_cmd(ib, IBTCA_CMD_DESTROY_SRQ, srq->srqn, NULL,
			       NULL);
	/* A device that is gone was reset and forgot the SRQ. */
	if (srq->user_ring) {
		if (ret && ret != -ENODEV) {
			dev_warn(&ib->idev->pdev->dev,
				 "device refused to destroy user SRQ %u (%d): ring leaked\n",
				 srq->srqn, ret);
			ibtca_uctx_mmap_keep_dma(srq->user_ring);
		}
		ibtca_uctx_mmap_remove(srq->user_ring);
		srq->user_ring = NULL;
	} else if (ret && ret != -ENODEV) {
		dev_warn(&ib->idev->pdev->dev,
			 "device refused to destroy SRQ %u (%d): ring leaked\n",
			 srq->srqn, ret);
	} else {
		ibtca_ib_srq_ring_free(ib, srq);
	}
	return 0;
}

/* Slot @index of the ring of 2^@log WQEs of 2^@log_stride bytes at @ring. */
static struct ibtca_recv_wqe *ibtca_ib_srq_slot(struct ibtca_recv_wqe *ring,
						u32 log, u32 log_stride,
						u32 index)
{
	return (void *)ring + ((size_t)(index & (BIT(log) - 1)) << log_stride);
}

int ibtca_ib_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			   const struct ib_recv_wr **bad_wr)
{
	struct ibtca_ib *ib = to_ib(ibsrq->device);
	struct ibtca_ib_srq *srq = to_srq(ibsrq);
	struct ibtca_recv_wqe *w;
	unsigned long flags;
	int ret = 0;
	u32 start;

	if (srq->user_ring) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&srq->lock, flags);
	start = srq->pi;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 ||
		    wr->num_sge > ibtca_recv_stride_sges(srq->log_stride)) {
			ret = -EINVAL;
			break;
		}
		if (srq->pi - (u32)atomic_read(&srq->done) >=
		    READ_ONCE(srq->max_wr)) {
			ret = -ENOMEM;
			break;
		}
		w = ibtca_ib_srq_slot(srq->ring, srq->log, srq->log_stride,
				      srq->pi);
		memset(w, 0, BIT(srq->log_stride));
		ibtca_ib_recv_wqe(w, wr);
		/* Growing: the device reads one ring or the other. */
		if (srq->next_ring)
			memcpy(ibtca_ib_srq_slot(srq->next_ring, srq->next_log,
						 srq->log_stride, srq->pi),
			       w, BIT(srq->log_stride));
		srq->pi++;
	}
	/* writeq() orders the WQEs before the doorbell. */
	if (srq->pi != start)
		writeq(srq->srqn | (u64)srq->pi << 32,
		       ib->idev->regs + IBTCA_REG_DB_SRQ);
	spin_unlock_irqrestore(&srq->lock, flags);
	if (ret)
		*bad_wr = wr;
	return ret;
}

/* A receive completion of a QP on @ibsrq: one slot is free again. */
void ibtca_ib_srq_completed(struct ib_srq *ibsrq)
{
	atomic_inc(&to_srq(ibsrq)->done);
}

/* Tells each SRQ whose limit fired (IBTCA_EVENT_SRQ_LIMIT), from the port work. */
void ibtca_ib_srq_events(struct ibtca_dev *idev)
{
	struct ibtca_ib_srq *srq;
	struct ib_event ev = { .event = IB_EVENT_SRQ_LIMIT_REACHED };
	struct ibtca_ib *ib;
	u32 limit, events;

	mutex_lock(&idev->ib_lock);
	ib = idev->ib;
	if (!ib)
		goto out;
	mutex_lock(&ib->srq_lock);
	list_for_each_entry(srq, &ib->srqs, node) {
		if (ibtca_ib_srq_cmd(ib, IBTCA_CMD_QUERY_SRQ, srq->srqn, &limit,
				     &events))
			continue;
		if (events == srq->limit_events)
			continue;
		srq->limit_events = events;
		dev_info(&idev->pdev->dev, "SRQ %u: limit reached (%u events)\n",
			 srq->srqn, events);
		if (!srq->ibsrq.event_handler)
			continue;
		ev.device = &ib->ibdev;
		ev.element.srq = &srq->ibsrq;
		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
	}
	mutex_unlock(&ib->srq_lock);
out:
	mutex_unlock(&idev->ib_lock);
}
