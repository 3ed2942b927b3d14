// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: verbs objects. Per open file a verbs context whose buffers, PDs,
 * MRs, CQs and QPs user space drives with the ioctls of ibtca_uapi.h. Work
 * requests and completions go through rings in coherent memory and posted
 * doorbell writes, never a register read.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "ibtca_ring.h"
#include "ibtca_wqe.h"

#define IBTCA_BUF_MMAP_SHIFT	32

static_assert(IBTCA_CQ_VECTOR < IBTCA_MSIX_VECTORS);

/* Verbs: objects of one context. */

struct ibtca_buf {
	struct list_head node;
	u32 handle;
	size_t size;
	void *cpu;
	dma_addr_t dma;
};

/* A PD or an MR: only its handle (PD number, lkey). */
struct ibtca_hobj {
	struct list_head node;
	u32 handle;
};

struct ibtca_cq {
	struct list_head node;
	struct ibtca_cq_ring r;
};

struct ibtca_qp {
	struct list_head node;
	struct ibtca_qp_ring r;
};

static struct device *ibtca_ctx_dev(struct ibtca_ctx *ctx)
{
	return &ctx->idev->pdev->dev;
}

static struct ibtca_buf *ibtca_find_buf(struct ibtca_ctx *ctx, u32 handle)
{
	struct ibtca_buf *b;

	list_for_each_entry(b, &ctx->bufs, node)
		if (b->handle == handle)
			return b;
	return NULL;
}

static bool ibtca_has_hobj(struct list_head *list, u32 handle)
{
	struct ibtca_hobj *o;

	list_for_each_entry(o, list, node)
		if (o->handle == handle)
			return true;
	return false;
}

static struct ibtca_cq *ibtca_find_cq(struct ibtca_ctx *ctx, u32 cqn)
{
	struct ibtca_cq *cq;

	list_for_each_entry(cq, &ctx->cqs, node)
		if (cq->r.cqn == cqn)
			return cq;
	return NULL;
}

static struct ibtca_qp *ibtca_find_qp(struct ibtca_ctx *ctx, u32 qpn)
{
	struct ibtca_qp *qp;

	list_for_each_entry(qp, &ctx->qps, node)
		if (qp->r.qpn == qpn)
			return qp;
	return NULL;
}

static int ibtca_add_hobj(struct list_head *list, u32 handle)
{
	struct ibtca_hobj *o = kzalloc_obj(*o, GFP_KERNEL);

	if (!o)
		return -ENOMEM;
	o->handle = handle;
	list_add_tail(&o->node, list);
	return 0;
}

static int ibtca_v_alloc_buf(struct ibtca_ctx *ctx, struct ibtca_alloc_buf *a)
{
	struct ibtca_buf *b;

	if (!a->size || a->size > IBTCA_UAPI_BUF_MAX)
		return -EINVAL;
	if (ctx->nbufs >= IBTCA_UAPI_MAX_BUFS)
		return -ENOSPC;
	b = kzalloc_obj(*b, GFP_KERNEL);
	if (!b)
		return -ENOMEM;
	b->size = PAGE_ALIGN(a->size);
	b->cpu = dma_alloc_coherent(ibtca_ctx_dev(ctx), b->size, &b->dma,
				    GFP_KERNEL);
	if (!b->cpu) {
		kfree(b);
		return -ENOMEM;
	}
	b->handle = ++ctx->next_buf;
	list_add_tail(&b->node, &ctx->bufs);
	ctx->nbufs++;
	a->handle = b->handle;
	a->mmap_offset = (u64)b->handle << IBTCA_BUF_MMAP_SHIFT;
	a->dma_addr = b->dma;
	a->size = b->size;
	return 0;
}

static int ibtca_v_create_pd(struct ibtca_ctx *ctx, struct ibtca_create_pd *p)
{
	struct ibtca_dev *idev = ctx->idev;
	int ret;

	ret = ibtca_cmd(idev, IBTCA_CMD_CREATE_PD, NULL, 0, &p->pdn, NULL);
	if (ret)
		return ret;
	ret = ibtca_add_hobj(&ctx->pds, p->pdn);
	if (ret)
		ibtca_cmd_handle(idev, IBTCA_CMD_DESTROY_PD, p->pdn);
	return ret;
}

static int ibtca_v_reg_mr(struct ibtca_ctx *ctx, struct ibtca_reg_mr *m)
{
	struct ibtca_cmd_reg_mr p = { };
	struct ibtca_buf *b;
	u64 addr;
	int ret;

	b = ibtca_find_buf(ctx, m->buf);
	if (!b || !ibtca_has_hobj(&ctx->pds, m->pdn))
		return -ENOENT;
	if (!m->length || m->offset > b->size || m->length > b->size - m->offset)
		return -EINVAL;
	/* The region's address space is the bus address space. */
	addr = b->dma + m->offset;
	p.pdn = cpu_to_le32(m->pdn);
	p.access = cpu_to_le32(m->access);
	p.iova = cpu_to_le64(addr);
	p.length = cpu_to_le64(m->length);
	p.gpa = cpu_to_le64(addr);
	ret = ibtca_cmd(ctx->idev, IBTCA_CMD_REG_MR, &p, sizeof(p), &m->lkey,
			&m->rkey);
	if (ret)
		return ret;
	ret = ibtca_add_hobj(&ctx->mrs, m->lkey);
	if (ret) {
		ibtca_cmd_handle(ctx->idev, IBTCA_CMD_DEREG_MR, m->lkey);
		return ret;
	}
	m->iova = addr;
	return 0;
}

static int ibtca_v_create_cq(struct ibtca_ctx *ctx, struct ibtca_create_cq *c)
{
	struct ibtca_cq *cq;
	int ret;

	if (!c->log_entries || c->log_entries > IBTCA_UAPI_CQ_LOG_MAX)
		return -EINVAL;
	cq = kzalloc_obj(*cq, GFP_KERNEL);
	if (!cq)
		return -ENOMEM;
	ret = ibtca_cq_ring_create(ctx->idev, &cq->r, c->log_entries,
				   IBTCA_CQ_VECTOR);
	if (ret) {
		kfree(cq);
		return ret;
	}
	list_add_tail(&cq->node, &ctx->cqs);
	c->cqn = cq->r.cqn;
	return 0;
}

static int ibtca_v_create_qp(struct ibtca_ctx *ctx, struct ibtca_create_qp *c)
{
	struct ibtca_qp *qp;
	int ret;

	if (!c->log_entries || c->log_entries > IBTCA_UAPI_QP_LOG_MAX)
		return -EINVAL;
	if (!ibtca_has_hobj(&ctx->pds, c->pdn) ||
	    !ibtca_find_cq(ctx, c->send_cqn) || !ibtca_find_cq(ctx, c->recv_cqn))
		return -ENOENT;
	qp = kzalloc_obj(*qp, GFP_KERNEL);
	if (!qp)
		return -ENOMEM;
	ret = ibtca_qp_ring_create(ctx->idev, &qp->r, c->pdn, c->send_cqn,
				   c->recv_cqn, c->log_entries);
	if (ret) {
		kfree(qp);
		return ret;
	}
	list_add_tail(&qp->node, &ctx->qps);
	c->qpn = qp->r.qpn;
	return 0;
}

static int ibtca_v_modify_qp(struct ibtca_ctx *ctx, struct ibtca_modify_qp *m)
{
	struct ibtca_cmd_modify_qp p = { };
	struct ibtca_qp *qp = ibtca_find_qp(ctx, m->qpn);
	int ret;

	if (!qp)
		return -ENOENT;
	p.qpn = cpu_to_le32(m->qpn);
	p.attr_mask = cpu_to_le32(m->attr_mask);
	p.state = m->state;
	p.path_mtu = m->path_mtu;
	p.timeout = m->timeout;
	p.retry_cnt = m->retry_cnt;
	p.rnr_retry = m->rnr_retry;
	p.min_rnr_timer = m->min_rnr_timer;
	p.max_rd_atomic = m->max_rd_atomic;
	p.sl = m->sl;
	p.dest_qpn = cpu_to_le32(m->dest_qpn);
	p.dlid = cpu_to_le16(m->dlid);
	p.sq_psn = cpu_to_le32(m->sq_psn);
	p.rq_psn = cpu_to_le32(m->rq_psn);
	p.access = cpu_to_le32(m->access);
	ret = ibtca_cmd(ctx->idev, IBTCA_CMD_MODIFY_QP, &p, sizeof(p), NULL,
			NULL);
	/* RESET empties the device's rings: start ours over too. */
	if (!ret && (m->attr_mask & IBTCA_QP_ATTR_STATE) &&
	    m->state == IBTCA_QPS_RESET)
		ibtca_qp_ring_reset(&qp->r);
	return ret;
}

static int ibtca_v_post_send(struct ibtca_ctx *ctx, struct ibtca_post_send *s)
{
	const u32 flags = IBTCA_WQE_F_SOLICITED | IBTCA_WQE_F_FENCE;
	struct ibtca_send_wqe *w;
	struct ibtca_qp *qp;

	qp = ibtca_find_qp(ctx, s->qpn);
	if (!qp)
		return -ENOENT;
	/* DRDMA WRs pass their direct SGE (IBTCA_SGE_DIRECT lkey) on as is. */
	if (s->opcode > IBTCA_WR_SEND_INV || (s->flags & ~flags) ||
	    (s->post_flags & ~IBTCA_UAPI_POST_F_MORE))
		return -EINVAL;
	w = ibtca_sq_slot(&qp->r);
	if (!w)
		return -ENOSPC;
	w->wr_id = cpu_to_le64(s->wr_id);
	w->opcode = s->opcode;
	w->flags = s->flags | IBTCA_WQE_F_SIGNALED;
	w->imm_data = cpu_to_le32(s->imm_data);
	w->remote_addr = cpu_to_le64(s->remote_addr);
	w->rkey = cpu_to_le32(s->rkey);
	w->compare_add = cpu_to_le64(s->compare_add);
	w->swap = cpu_to_le64(s->swap);
	if (s->length || s->opcode == IBTCA_WR_ATOMIC_CMP_SWP ||
	    s->opcode == IBTCA_WR_ATOMIC_FETCH_ADD) {
		w->num_sge = 1;
		ibtca_sge_set(&w->sge[0], s->addr, s->length, s->lkey);
	}
	/* A later post rings for this one too (its index covers both). */
	if (s->post_flags & IBTCA_UAPI_POST_F_MORE)
		return 0;
	ibtca_sq_db(ctx->idev, &qp->r);
	return 0;
}

static int ibtca_v_post_recv(struct ibtca_ctx *ctx, struct ibtca_post_recv *r)
{
	struct ibtca_recv_wqe *w;
	struct ibtca_qp *qp;

	qp = ibtca_find_qp(ctx, r->qpn);
	if (!qp)
		return -ENOENT;
	w = ibtca_rq_slot(&qp->r);
	if (!w)
		return -ENOSPC;
	w->wr_id = cpu_to_le64(r->wr_id);
	if (r->length) {
		w->num_sge = 1;
		ibtca_sge_set(&w->sge[0], r->addr, r->length, r->lkey);
	}
	ibtca_rq_db(ctx->idev, &qp->r);
	return 0;
}

/* Copies a ready CQE @e (its owner bit seen) into @p. */
static void ibtca_cqe_read(struct ibtca_cqe *e, struct ibtca_poll_cq *p)
{
	ibtca_cqe_begin_read();
	p->found = 1;
	p->wr_id = le64_to_cpu(e->wr_id);
	p->byte_len = le32_to_cpu(e->byte_len);
	p->qpn = le32_to_cpu(e->qpn);
	p->imm_data = le32_to_cpu(e->imm_data);
	p->src_qp = le32_to_cpu(e->src_qp);
	p->opcode = e->opcode;
	p->status = e->status;
	p->flags = e->flags;
	p->reserved = 0;
}

/* Consumes the CQE @p was read from (the CQ doorbell is the caller's). */
static void ibtca_cq_take(struct ibtca_ctx *ctx, struct ibtca_cq *cq,
			  const struct ibtca_poll_cq *p)
{
	struct ibtca_qp *qp;

	cq->r.ci++;
	qp = ibtca_find_qp(ctx, p->qpn);
	if (qp)
		ibtca_qp_ring_completed(&qp->r, p->opcode & IBTCA_WC_RECV);
}

static int ibtca_v_poll_cq(struct ibtca_ctx *ctx, struct ibtca_poll_cq *p)
{
	struct ibtca_dev *idev = ctx->idev;
	unsigned long deadline;
	struct ibtca_cqe *e;
	struct ibtca_cq *cq;
	long left;

	cq = ibtca_find_cq(ctx, p->cqn);
	if (!cq)
		return -ENOENT;
	if (p->timeout_ms > IBTCA_UAPI_POLL_TIMEOUT_MAX_MS)
		return -EINVAL;
	deadline = jiffies + msecs_to_jiffies(p->timeout_ms);
	p->found = 0;
	for (;;) {
		e = ibtca_cq_ring_next(&cq->r);
		if (e)
			break;
		left = (long)(deadline - jiffies);
		if (!p->timeout_ms || left <= 0)
			return 0;
		/*
		 * Arm, look again, then sleep. The arm carries the consumer
		 * index and the device fires at once if a completion past it
		 * is already written, so a completion that overtakes the
		 * (posted) arm still wakes us; the one-second slice only
		 * bounds the damage of a lost interrupt.
		 */
		ibtca_cq_ring_db(idev, &cq->r, IBTCA_CQ_ARM_NEXT);
		e = ibtca_cq_ring_next(&cq->r);
		if (e)
			break;
		left = wait_event_interruptible_timeout(idev->wq,
							ibtca_cq_ring_next(&cq->r) ||
							READ_ONCE(idev->dead),
							min_t(long, left, HZ));
		if (left < 0)
			return -EINTR;
		if (READ_ONCE(idev->dead))
			return -ENODEV;
	}
	ibtca_cqe_read(e, p);
	ibtca_cq_take(ctx, cq, p);
	ibtca_cq_ring_db(idev, &cq->r, 0);
	return 0;
}

static int ibtca_v_poll_cq_batch(struct ibtca_ctx *ctx,
				 struct ibtca_poll_cq_batch *b)
{
	struct ibtca_poll_cq __user *out = u64_to_user_ptr(b->entries);
	struct ibtca_poll_cq p;
	struct ibtca_cqe *e;
	struct ibtca_cq *cq;
	int ret = 0;

	cq = ibtca_find_cq(ctx, b->cqn);
	if (!cq)
		return -ENOENT;
	if (!b->max || b->max > IBTCA_UAPI_POLL_BATCH_MAX || b->reserved)
		return -EINVAL;
	b->found = 0;
	while (b->found < b->max) {
		e = ibtca_cq_ring_next(&cq->r);
		if (!e)
			break;
		memset(&p, 0, sizeof(p));
		ibtca_cqe_read(e, &p);
		/* Copy before consuming: a fault loses no completion. */
		if (copy_to_user(out + b->found, &p, sizeof(p))) {
			ret = -EFAULT;
			break;
		}
		ibtca_cq_take(ctx, cq, &p);
		b->found++;
	}
	if (b->found)
		ibtca_cq_ring_db(ctx->idev, &cq->r, 0);
	return b->found ? 0 : ret;
}

/*
 * Destroy the context's device objects (if the device is still there) and
 * free its memory. Memory the device might still use is leaked instead.
 */
void ibtca_ctx_teardown(struct ibtca_ctx *ctx)
{
	struct ibtca_dev *idev = ctx->idev;
	struct device *dev = ibtca_ctx_dev(ctx);
	struct ibtca_hobj *o, *otmp;
	struct ibtca_qp *qp, *qtmp;
	struct ibtca_cq *cq, *ctmp;
	struct ibtca_buf *b, *btmp;
	bool hw, leak = false;

	down_read(&idev->hw_sem);
	/* A removed device was reset: it holds no objects any more. */
	hw = !READ_ONCE(idev->dead);
	list_for_each_entry_safe(qp, qtmp, &ctx->qps, node) {
		if (hw && ibtca_cmd_handle(idev, IBTCA_CMD_DESTROY_QP, qp->r.qpn))
			leak = true;
		if (!leak)
			ibtca_qp_ring_free(idev, &qp->r);
		list_del(&qp->node);
		kfree(qp);
	}
	list_for_each_entry_safe(o, otmp, &ctx->mrs, node) {
		if (hw && ibtca_cmd_handle(idev, IBTCA_CMD_DEREG_MR, o->handle))
			leak = true;
		list_del(&o->node);
		kfree(o);
	}
	list_for_each_entry_safe(cq, ctmp, &ctx->cqs, node) {
		if (hw && ibtca_cmd_handle(idev, IBTCA_CMD_DESTROY_CQ, cq->r.cqn))
			leak = true;
		if (!leak)
			ibtca_cq_ring_free(idev, &cq->r);
		list_del(&cq->node);
		kfree(cq);
	}
	list_for_each_entry_safe(o, otmp, &ctx->pds, node) {
		if (hw)
			ibtca_cmd_handle(idev, IBTCA_CMD_DESTROY_PD, o->handle);
		list_del(&o->node);
		kfree(o);
	}
	up_read(&idev->hw_sem);
	list_for_each_entry_safe(b, btmp, &ctx->bufs, node) {
		if (!leak)
			dma_free_coherent(dev, b->size, b->cpu, b->dma);
		list_del(&b->node);
		kfree(b);
	}
	if (leak)
		dev_warn(dev, "device refused to destroy objects: memory leaked\n");
}

long ibtca_verbs_ioctl(struct ibtca_ctx *ctx, unsigned int cmd,
		       void __user *argp)
{
	union {
		struct ibtca_alloc_buf buf;
		struct ibtca_create_pd pd;
		struct ibtca_reg_mr mr;
		struct ibtca_create_cq cq;
		struct ibtca_create_qp qp;
		struct ibtca_modify_qp mod;
		struct ibtca_post_send send;
		struct ibtca_post_recv recv;
		struct ibtca_poll_cq poll;
		struct ibtca_poll_cq_batch batch;
	} u;
	struct ibtca_dev *idev = ctx->idev;
	size_t size = _IOC_SIZE(cmd);
	long ret;

	if (size > sizeof(u))
		return -ENOTTY;
	memset(&u, 0, sizeof(u));
	if ((_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(&u, argp, size))
		return -EFAULT;

	if (mutex_lock_interruptible(&ctx->lock))
		return -EINTR;
	down_read(&idev->hw_sem);
	if (READ_ONCE(idev->dead)) {
		ret = -ENODEV;
		goto out;
	}
	switch (cmd) {
	case IBTCA_IOC_ALLOC_BUF:
		ret = ibtca_v_alloc_buf(ctx, &u.buf);
		break;
	case IBTCA_IOC_CREATE_PD:
		ret = ibtca_v_create_pd(ctx, &u.pd);
		break;
	case IBTCA_IOC_REG_MR:
		ret = ibtca_v_reg_mr(ctx, &u.mr);
		break;
	case IBTCA_IOC_CREATE_CQ:
		ret = ibtca_v_create_cq(ctx, &u.cq);
		break;
	case IBTCA_IOC_CREATE_QP:
		ret = ibtca_v_create_qp(ctx, &u.qp);
		break;
	case IBTCA_IOC_MODIFY_QP:
		ret = ibtca_v_modify_qp(ctx, &u.mod);
		break;
	case IBTCA_IOC_POST_SEND:
		ret = ibtca_v_post_send(ctx, &u.send);
		break;
	case IBTCA_IOC_POST_RECV:
		ret = ibtca_v_post_recv(ctx, &u.recv);
		break;
	case IBTCA_IOC_POLL_CQ:
		ret = ibtca_v_poll_cq(ctx, &u.poll);
		break;
	case IBTCA_IOC_POLL_CQ_BATCH:
		ret = ibtca_v_poll_cq_batch(ctx, &u.batch);
		break;
	default:
		ret = -ENOTTY;
		break;
	}
out:
	up_read(&idev->hw_sem);
	mutex_unlock(&ctx->lock);
	if (!ret && (_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(argp, &u, size))
		ret = -EFAULT;
	return ret;
}

int ibtca_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct ibtca_ctx *ctx = file->private_data;
	unsigned long len = vma->vm_end - vma->vm_start;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	struct ibtca_buf *b;
	int ret = -EINVAL;

	if (off & (BIT_ULL(IBTCA_BUF_MMAP_SHIFT) - 1))
		return -EINVAL;
	mutex_lock(&ctx->lock);
	b = ibtca_find_buf(ctx, off >> IBTCA_BUF_MMAP_SHIFT);
	if (b && len <= b->size) {
		/* dma_mmap_coherent() takes vm_pgoff as the offset in @b. */
		vma->vm_pgoff = 0;
		ret = dma_mmap_coherent(ibtca_ctx_dev(ctx), vma, b->cpu, b->dma,
					len);
	}
	mutex_unlock(&ctx->lock);
	return ret;
}
