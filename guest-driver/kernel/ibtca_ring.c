// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: CQ and QP rings in coherent DMA memory and their doorbells, shared
 * by the ioctl verbs and the kernel verbs (see ibtca_ring.h). Work requests
 * and completions never need a register read: the driver writes WQEs and
 * posts an 8-byte doorbell; the device writes CQEs with an owner (phase)
 * bit last.
 *
 * A doorbell is a trapped store (under QEMU a vfio-user message, tens of
 * microseconds of a TCG guest). A ring with a doorbell record (the kernel
 * verbs bind one to each QP and CQ) stores its producer index there after
 * its WQEs, fences, and rings only when the device's awake word for that
 * queue reads 0; the device, before it stops reading the index, clears
 * the word, fences and reads the index once more, so one side always sees
 * the other. A CQ's record takes the consumer index, which the device
 * reads before it calls the ring full, so polling rings nothing; and, on a
 * device with CAP_CQ_RECORD_ARM, arm requests, which the device reads
 * after each completion it writes, so re-arming rings nothing either.
 */
#include <linux/bitops.h>
#include <linux/dma-mapping.h>
#include <linux/string.h>

#include "ibtca_ring.h"

static struct device *ibtca_ring_dev(struct ibtca_dev *idev)
{
	return &idev->pdev->dev;
}

int ibtca_cq_ring_create(struct ibtca_dev *idev, struct ibtca_cq_ring *r,
			 u32 log, u8 vector)
{
	return ibtca_cq_ring_create_db(idev, r, log, vector, 0);
}

int ibtca_cq_ring_create_db(struct ibtca_dev *idev, struct ibtca_cq_ring *r,
			    u32 log, u8 vector, u32 db_page)
{
	struct ibtca_cmd_create_cq p = { };
	int ret;

	memset(r, 0, sizeof(*r));
	r->log = log;
	r->vector = vector;
	r->size = PAGE_ALIGN(sizeof(struct ibtca_cqe) << log);
	/* Zeroed: every entry reads as not yet written (owner 0). */
	r->ring = dma_alloc_coherent(ibtca_ring_dev(idev), r->size, &r->dma,
				     GFP_KERNEL);
	if (!r->ring)
		return -ENOMEM;
	p.ring = cpu_to_le64(r->dma);
	p.log_entries = log;
	p.vector = vector;
	p.db_page = cpu_to_le32(db_page);
	ret = ibtca_cmd(idev, IBTCA_CMD_CREATE_CQ, &p, sizeof(p), &r->cqn, NULL);
	if (ret)
		ibtca_cq_ring_free(idev, r);
	return ret;
}

/*
 * A record of @len bytes in coherent memory holding @init, bound to
 * @handle with @opcode; its address, or an ERR_PTR (nothing kept).
 */
static void *ibtca_record_new(struct ibtca_dev *idev, u8 opcode, u32 handle,
			      const void *init, size_t len, dma_addr_t *dma)
{
	struct ibtca_cmd_db_record p = { };
	void *rec;
	int ret;

	rec = dma_alloc_coherent(ibtca_ring_dev(idev), len, dma, GFP_KERNEL);
	if (!rec)
		return ERR_PTR(-ENOMEM);
	memcpy(rec, init, len);
	p.handle = cpu_to_le32(handle);
	p.addr = cpu_to_le64(*dma);
	ret = ibtca_cmd(idev, opcode, &p, sizeof(p), NULL, NULL);
	if (ret) {
		dma_free_coherent(ibtca_ring_dev(idev), len, rec, *dma);
		return ERR_PTR(ret);
	}
	return rec;
}

static void ibtca_record_free(struct ibtca_dev *idev, void *rec, size_t len,
			      dma_addr_t dma)
{
	if (rec)
		dma_free_coherent(ibtca_ring_dev(idev), len, rec, dma);
}

int ibtca_cq_ring_bind_record(struct ibtca_dev *idev, struct ibtca_cq_ring *r)
{
	struct ibtca_cq_db_record init = { .ci = cpu_to_le32(r->ci) };
	void *rec = ibtca_record_new(idev, IBTCA_CMD_CQ_DB_RECORD, r->cqn,
				     &init, sizeof(init), &r->rec_dma);

	if (IS_ERR(rec))
		return PTR_ERR(rec);
	r->rec = rec;
	r->rec_arm = ibtca_rd(idev, IBTCA_REG_CAPS) & IBTCA_CAP_CQ_RECORD_ARM;
	return 0;
}

void ibtca_cq_ring_free(struct ibtca_dev *idev, struct ibtca_cq_ring *r)
{
	if (r->ring)
		dma_free_coherent(ibtca_ring_dev(idev), r->size, r->ring, r->dma);
	r->ring = NULL;
	ibtca_record_free(idev, r->rec, sizeof(*r->rec), r->rec_dma);
	r->rec = NULL;
}

struct ibtca_cqe *ibtca_cq_ring_next(struct ibtca_cq_ring *r)
{
	struct ibtca_cqe *e = &r->ring[r->ci & (BIT(r->log) - 1)];
	u8 want = ((r->ci >> r->log) & 1) ^ 1;

	return (READ_ONCE(e->owner) & 1) == want ? e : NULL;
}

void ibtca_cqe_begin_read(void)
{
	/* Read the entry after its owner bit. */
	dma_rmb();
}

/* An 8-byte posted doorbell: object number, then the index in 63:32. */
static void ibtca_db(struct ibtca_dev *idev, u32 reg, u32 num, u32 index)
{
	writeq(num | (u64)index << 32, idev->regs + reg);
}

void ibtca_cq_ring_db(struct ibtca_dev *idev, struct ibtca_cq_ring *r, u8 arm)
{
	ibtca_db(idev, IBTCA_REG_DB_CQ, r->cqn | (u32)arm << 24, r->ci);
}

void ibtca_cq_ring_consumed(struct ibtca_dev *idev, struct ibtca_cq_ring *r)
{
	if (!r->rec) {
		ibtca_cq_ring_db(idev, r, 0);
		return;
	}
	/* The entries are read before the device may write over them. */
	mb();
	WRITE_ONCE(r->rec->ci, cpu_to_le32(r->ci));
}

bool ibtca_cq_ring_arm_record(struct ibtca_cq_ring *r, u8 arm)
{
	if (!r->rec || !r->rec_arm)
		return false;
	/*
	 * A word the device has not taken yet. It takes one with each
	 * completion, and a consumer arms only after completions, so the
	 * count does not come round to the word it last took.
	 */
	r->arm_count += 4;
	WRITE_ONCE(r->rec->arm, cpu_to_le32(r->arm_count | arm));
	/* The request before the look (the device fences the other way). */
	mb();
	return true;
}

int ibtca_qp_ring_create(struct ibtca_dev *idev, struct ibtca_qp_ring *r,
			 u32 pdn, u32 send_cqn, u32 recv_cqn, u32 log)
{
	return ibtca_qp_ring_create_db(idev, r, pdn, send_cqn, recv_cqn, log, 0,
				       0);
}

int ibtca_qp_ring_create_db(struct ibtca_dev *idev, struct ibtca_qp_ring *r,
			    u32 pdn, u32 send_cqn, u32 recv_cqn, u32 log,
			    u32 db_page, u32 srqn)
{
	return ibtca_qp_ring_create_type(idev, r, pdn, send_cqn, recv_cqn, log,
					 db_page, srqn, IBTCA_QPT_RC);
}

/* A QP of IBTCA_QPT_* @qp_type (datagram QPs ignore the quasi-WQE ring). */
int ibtca_qp_ring_create_type(struct ibtca_dev *idev, struct ibtca_qp_ring *r,
			      u32 pdn, u32 send_cqn, u32 recv_cqn, u32 log,
			      u32 db_page, u32 srqn, u8 qp_type)
{
	struct ibtca_qp_logs logs = { .sq = log, .rq = log, .quasi = log };

	return ibtca_qp_ring_create_sized(idev, r, pdn, send_cqn, recv_cqn,
					  &logs, db_page, srqn, qp_type);
}

/*
 * One allocation: the SQ, then the RQ and the quasi-WQE ring. With equal
 * logs the layout is the one user contexts map (each ring a send-WQE
 * stride apart).
 */
int ibtca_qp_ring_create_sized(struct ibtca_dev *idev, struct ibtca_qp_ring *r,
			       u32 pdn, u32 send_cqn, u32 recv_cqn,
			       const struct ibtca_qp_logs *logs, u32 db_page,
			       u32 srqn, u8 qp_type)
{
	struct ibtca_cmd_create_qp p = { };
	size_t sq, rq, quasi;
	int ret;

	memset(r, 0, sizeof(*r));
	r->log = logs->sq;
	r->rq_log = logs->rq;
	r->rq_log_stride = logs->rq_stride ?: IBTCA_RECV_LOG_STRIDE;
	r->log_stride = logs->sq_stride ?: IBTCA_RECV_LOG_STRIDE;
	sq = PAGE_ALIGN((size_t)1 << (r->log_stride + logs->sq));
	/* Page-aligned, so aligned to any receive stride. */
	rq = PAGE_ALIGN((size_t)1 << (r->rq_log_stride + logs->rq));
	quasi = PAGE_ALIGN(sizeof(struct ibtca_quasi_wqe) << logs->quasi);
	r->size = sq + rq + quasi;
	r->mem = dma_alloc_coherent(ibtca_ring_dev(idev), r->size, &r->dma,
				    GFP_KERNEL | __GFP_NOWARN);
	if (!r->mem)
		return -ENOMEM;
	r->sq = r->mem;
	r->rq = r->mem + sq;
	p.pdn = cpu_to_le32(pdn);
	p.send_cqn = cpu_to_le32(send_cqn);
	p.recv_cqn = cpu_to_le32(recv_cqn);
	p.log_sizes[0] = logs->sq;
	p.log_sizes[1] = logs->rq;
	p.log_sizes[2] = logs->quasi;
	p.log_sizes[3] = qp_type;
	p.sq = cpu_to_le64(r->dma);
	p.rq = cpu_to_le64(r->dma + sq);
	p.quasi = cpu_to_le64(r->dma + sq + rq);
	p.db_page = cpu_to_le16(db_page);
	if (r->rq_log_stride != IBTCA_RECV_LOG_STRIDE)
		p.rq_log_stride = r->rq_log_stride;
	if (r->log_stride != IBTCA_RECV_LOG_STRIDE)
		p.sq_log_stride = r->log_stride;
	if (srqn) {
		/* Receives from the SRQ: the RQ memory stays unused. */
		p.srqn = cpu_to_le32(srqn);
		p.rq = 0;
		p.log_sizes[1] = 0;
	}
	ret = ibtca_cmd(idev, IBTCA_CMD_CREATE_QP, &p, sizeof(p), &r->qpn, NULL);
	if (ret)
		ibtca_qp_ring_free(idev, r);
	return ret;
}

int ibtca_qp_ring_bind_record(struct ibtca_dev *idev, struct ibtca_qp_ring *r)
{
	struct ibtca_db_record init = {
		.sq_pi = cpu_to_le32(r->sq_pi),
		.rq_pi = cpu_to_le32(r->rq_pi),
	};
	void *rec = ibtca_record_new(idev, IBTCA_CMD_QP_DB_RECORD, r->qpn,
				     &init, sizeof(init), &r->rec_dma);

	if (IS_ERR(rec))
		return PTR_ERR(rec);
	r->rec = rec;
	return 0;
}

void ibtca_qp_ring_free(struct ibtca_dev *idev, struct ibtca_qp_ring *r)
{
	if (r->mem)
		dma_free_coherent(ibtca_ring_dev(idev), r->size, r->mem, r->dma);
	r->mem = NULL;
	ibtca_record_free(idev, r->rec, sizeof(*r->rec), r->rec_dma);
	r->rec = NULL;
}

/* After a MODIFY_QP to RESET, which empties the device's rings. */
void ibtca_qp_ring_reset(struct ibtca_qp_ring *r)
{
	r->sq_pi = 0;
	r->sq_done = 0;
	r->rq_pi = 0;
	r->rq_done = 0;
	memset(r->mem, 0, r->size);
	/* The device cleared its awake words; the indexes start again. */
	if (r->rec)
		memset(r->rec, 0, sizeof(*r->rec));
}

struct ibtca_send_wqe *ibtca_sq_slot(struct ibtca_qp_ring *r)
{
	struct ibtca_send_wqe *w;

	if (r->sq_pi - READ_ONCE(r->sq_done) >= BIT(r->log))
		return NULL;
	w = (void *)r->sq + ((size_t)(r->sq_pi & (BIT(r->log) - 1)) <<
			     r->log_stride);
	memset(w, 0, BIT(r->log_stride));
	r->sq_pi++;
	return w;
}

struct ibtca_recv_wqe *ibtca_rq_slot(struct ibtca_qp_ring *r)
{
	struct ibtca_recv_wqe *w;

	if (r->rq_pi - READ_ONCE(r->rq_done) >= BIT(r->rq_log))
		return NULL;
	w = (void *)r->rq + ((size_t)(r->rq_pi & (BIT(r->rq_log) - 1)) <<
			     r->rq_log_stride);
	memset(w, 0, BIT(r->rq_log_stride));
	r->rq_pi++;
	return w;
}

/*
 * Stores producer index @pi in the record's @pi_word after the WQEs; true
 * if the device is awake on that queue (@awake), so that it reads the
 * index by itself and no doorbell is needed.
 */
static bool ibtca_record_takes(__le32 *pi_word, __le32 *awake, u32 pi)
{
	/* The WQEs before the index. */
	dma_wmb();
	WRITE_ONCE(*pi_word, cpu_to_le32(pi));
	/* The index before the look (the device fences the other way). */
	mb();
	return READ_ONCE(*awake) != 0;
}

void ibtca_sq_db(struct ibtca_dev *idev, struct ibtca_qp_ring *r)
{
	if (r->rec &&
	    ibtca_record_takes(&r->rec->sq_pi, &r->rec->sq_awake, r->sq_pi))
		return;
	ibtca_db(idev, IBTCA_REG_DB_SQ, r->qpn, r->sq_pi);
}

void ibtca_rq_db(struct ibtca_dev *idev, struct ibtca_qp_ring *r)
{
	if (r->rec &&
	    ibtca_record_takes(&r->rec->rq_pi, &r->rec->rq_awake, r->rq_pi))
		return;
	ibtca_db(idev, IBTCA_REG_DB_RQ, r->qpn, r->rq_pi);
}

/* Each completion frees one slot (every request signaled). */
void ibtca_qp_ring_completed(struct ibtca_qp_ring *r, bool recv)
{
	if (recv) {
		if (r->rq_done != READ_ONCE(r->rq_pi))
			WRITE_ONCE(r->rq_done, r->rq_done + 1);
	} else {
		if (r->sq_done != READ_ONCE(r->sq_pi))
			WRITE_ONCE(r->sq_done, r->sq_done + 1);
	}
}

/*
 * A send completion for the WQE in @slot (its wr_id): sends complete in
 * order, so it and the unsignaled ones before it, which asked for no
 * completion, are done. A slot not posted or already done moves nothing.
 */
void ibtca_qp_ring_sent(struct ibtca_qp_ring *r, u32 slot)
{
	if (slot - r->sq_done < READ_ONCE(r->sq_pi) - r->sq_done)
		WRITE_ONCE(r->sq_done, slot + 1);
}
