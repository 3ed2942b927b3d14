// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider's extended QPs: ibv_create_qp_ex with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, and the ibv_wr_* API on them. The
 * builders (ibv_wr_rdma_write, ibv_wr_set_sge, ...) fill a struct
 * ibv_send_wr per request in the QP's batch, one slot per send queue
 * entry; ibv_wr_complete checks every request of the batch as
 * ibv_post_send does and that the send queue has room for all of them,
 * then hands the chain to ibtca_post_send (post.c): one WQE build for both
 * APIs, one doorbell per batch. A batch that a builder or the check
 * refused posts nothing: ibv_wr_complete returns the first error
 * (EINVAL: a request the QP cannot take, or a builder called out of turn;
 * ENOMEM: more requests than the send queue has room for, or more inline
 * bytes than IBTCA_MAX_INLINE_DATA, as mlx5 has it; EOPNOTSUPP: UD and
 * XRC addressing), and ibv_wr_abort drops the batch. Buffers named by
 * SGEs are read when the device runs the request, as with ibv_post_send;
 * ibv_wr_set_inline_data(_list) copies its bytes at once into the
 * request's inline area in the batch (the caller may reuse its buffers
 * when the call returns), and the request goes out as IBV_SEND_INLINE
 * through the same post path. The batch belongs to one thread between
 * ibv_wr_start and ibv_wr_complete/ibv_wr_abort.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibtca.h"

enum {
	IBTCA_QP_EX_OPS = IBV_QP_EX_WITH_RDMA_WRITE |
			  IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			  IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			  IBV_QP_EX_WITH_RDMA_READ |
			  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			  IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |
			  IBV_QP_EX_WITH_SEND_WITH_INV,
	IBTCA_QP_EX_MASK = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			   IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
};

static struct ibtca_wr_batch *to_batch(struct ibv_qp_ex *qpx)
{
	return to_ibtca_qp(&qpx->qp_base)->wrb;
}

static void batch_fail(struct ibtca_wr_batch *b, int err)
{
	if (!b->err)
		b->err = err;
}

/* A new request of @opcode with the QP's wr_id and wr_flags, or NULL. */
static struct ibv_send_wr *wr_new(struct ibv_qp_ex *qpx,
				  enum ibv_wr_opcode opcode)
{
	struct ibtca_wr_batch *b = to_batch(qpx);
	struct ibv_send_wr *wr;

	if (b->n == b->size) {
		batch_fail(b, ENOMEM);
		return NULL;
	}
	wr = &b->wr[b->n];
	memset(wr, 0, sizeof(*wr));
	wr->sg_list = &b->sge[(size_t)b->n * b->sges];
	wr->wr_id = qpx->wr_id;
	wr->send_flags = qpx->wr_flags;
	wr->opcode = opcode;
	b->n++;
	return wr;
}

/* The request the SGE and data setters apply to, or NULL. */
static struct ibv_send_wr *wr_last(struct ibv_qp_ex *qpx)
{
	struct ibtca_wr_batch *b = to_batch(qpx);

	if (!b->n) {
		batch_fail(b, EINVAL);
		return NULL;
	}
	return &b->wr[b->n - 1];
}

static void wr_rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op,
		    uint32_t rkey, uint64_t remote_addr, __be32 imm)
{
	struct ibv_send_wr *wr = wr_new(qpx, op);

	if (!wr)
		return;
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = remote_addr;
	wr->imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			  uint64_t remote_addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, __be32 imm)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			 uint64_t remote_addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_READ, rkey, remote_addr, 0);
}

static void wr_atomic(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op,
		      uint32_t rkey, uint64_t remote_addr, uint64_t compare_add,
		      uint64_t swap)
{
	struct ibv_send_wr *wr = wr_new(qpx, op);

	if (!wr)
		return;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.remote_addr = remote_addr;
	wr->wr.atomic.compare_add = compare_add;
	wr->wr.atomic.swap = swap;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, uint64_t compare,
			      uint64_t swap)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare,
		  swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr, uint64_t add)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add, 0);
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	wr_new(qpx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
		       uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_BIND_MW);

	if (!wr)
		return;
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	wr->bind_mw.bind_info = *info;
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct ibv_send_wr *wr = wr_last(qpx);

	if (!wr)
		return;
	wr->sg_list[0].lkey = lkey;
	wr->sg_list[0].addr = addr;
	wr->sg_list[0].length = length;
	wr->num_sge = 1;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
			    const struct ibv_sge *sg_list)
{
	struct ibv_send_wr *wr = wr_last(qpx);

	if (!wr)
		return;
	if (num_sge > to_batch(qpx)->sges) {
		batch_fail(to_batch(qpx), EINVAL);
		return;
	}
	memcpy(wr->sg_list, sg_list, num_sge * sizeof(*sg_list));
	wr->num_sge = num_sge;
}

/*
 * The last request's inline area, to be filled with @length bytes, or NULL
 * (ENOMEM past IBTCA_MAX_INLINE_DATA: nothing of the batch posts).
 */
static uint8_t *wr_inline_area(struct ibv_qp_ex *qpx, struct ibv_send_wr *wr,
			       size_t length)
{
	struct ibtca_wr_batch *b = to_batch(qpx);

	if (length > IBTCA_MAX_INLINE_DATA) {
		batch_fail(b, ENOMEM);
		return NULL;
	}
	return &b->inl[(size_t)(wr - b->wr) * IBTCA_MAX_INLINE_DATA];
}

/* The request sends @length bytes of its inline area as inline data. */
static void wr_inline_done(struct ibv_send_wr *wr, uint8_t *area,
			   size_t length)
{
	wr->sg_list[0].addr = (uintptr_t)area;
	wr->sg_list[0].length = length;
	wr->sg_list[0].lkey = 0;
	wr->num_sge = length ? 1 : 0;
	wr->send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
			       size_t length)
{
	struct ibv_send_wr *wr = wr_last(qpx);
	uint8_t *area;

	if (!wr)
		return;
	area = wr_inline_area(qpx, wr, length);
	if (!area)
		return;
	memcpy(area, addr, length);
	wr_inline_done(wr, area, length);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				    const struct ibv_data_buf *buf_list)
{
	struct ibv_send_wr *wr = wr_last(qpx);
	size_t i, total = 0;
	uint8_t *area;

	if (!wr)
		return;
	for (i = 0; i < num_buf; i++) {
		/* Past the limit already: no sum can wrap. */
		if (buf_list[i].length > IBTCA_MAX_INLINE_DATA - total) {
			total = IBTCA_MAX_INLINE_DATA + 1;
			break;
		}
		total += buf_list[i].length;
	}
	area = wr_inline_area(qpx, wr, total);
	if (!area)
		return;
	total = 0;
	for (i = 0; i < num_buf; i++) {
		memcpy(area + total, buf_list[i].addr, buf_list[i].length);
		total += buf_list[i].length;
	}
	wr_inline_done(wr, area, total);
}

/* UD and XRC addressing: not on this device's RC QPs. */
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	batch_fail(to_batch(qpx), EOPNOTSUPP);
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	batch_fail(to_batch(qpx), EOPNOTSUPP);
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct ibtca_wr_batch *b = to_batch(qpx);

	b->n = 0;
	b->err = 0;
}

/* Posts the batch whole, or nothing of it. */
static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct ibtca_qp *qp = to_ibtca_qp(&qpx->qp_base);
	struct ibtca_wr_batch *b = qp->wrb;
	struct ibv_send_wr *bad;
	uint32_t i, used;
	int err = b->err;

	for (i = 0; !err && i < b->n; i++) {
		b->wr[i].next = i + 1 < b->n ? &b->wr[i + 1] : NULL;
		if (ibtca_send_check(qp, &b->wr[i]) < 0)
			err = EINVAL;
	}
	if (!err && b->n) {
		used = qp->sq_pi - __atomic_load_n(&qp->sq_done, __ATOMIC_ACQUIRE);
		if (b->n > (1U << qp->log) - used)
			err = ENOMEM;
		else
			err = ibtca_post_send(&qp->ibv_qp, b->wr, &bad);
	}
	b->n = 0;
	b->err = 0;
	return err;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	wr_start(qpx);
}

/*
 * The batch and the builders of the operations @ops the caller asked for;
 * 0, or -1 without memory.
 */
static int ibtca_qp_ex_init(struct ibtca_qp *qp, uint64_t ops)
{
	struct ibv_qp_ex *x = &qp->vqp.qp_ex;
	struct ibtca_wr_batch *b;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -1;
	qp->wrb = b;
	b->size = 1U << qp->log;
	b->sges = qp->max_send_sge;
	b->wr = calloc(b->size, sizeof(*b->wr));
	b->sge = calloc((size_t)b->size * b->sges, sizeof(*b->sge));
	b->inl = calloc(b->size, IBTCA_MAX_INLINE_DATA);
	if (!b->wr || !b->sge || !b->inl) {
		ibtca_wr_batch_free(qp);
		return -1;
	}
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE)
		x->wr_rdma_write = wr_rdma_write;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		x->wr_rdma_write_imm = wr_rdma_write_imm;
	if (ops & IBV_QP_EX_WITH_SEND)
		x->wr_send = wr_send;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM)
		x->wr_send_imm = wr_send_imm;
	if (ops & IBV_QP_EX_WITH_RDMA_READ)
		x->wr_rdma_read = wr_rdma_read;
	if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	if (ops & IBV_QP_EX_WITH_LOCAL_INV)
		x->wr_local_inv = wr_local_inv;
	if (ops & IBV_QP_EX_WITH_BIND_MW)
		x->wr_bind_mw = wr_bind_mw;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_INV)
		x->wr_send_inv = wr_send_inv;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	qp->vqp.comp_mask |= VERBS_QP_EX;
	return 0;
}

/*
 * An RC QP as ibv_create_qp makes it (qp.c); with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS also an ibv_qp_ex with those builders.
 */
static struct ibv_qp *ibtca_create_qp_ex(struct ibv_context *ibctx,
					 struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp_init_attr base;
	struct ibv_qp *ibqp;

	if ((attr->comp_mask & ~IBTCA_QP_EX_MASK) ||
	    !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	     attr->create_flags) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	     (attr->send_ops_flags & ~(uint64_t)IBTCA_QP_EX_OPS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->pd->context != ibctx) {
		errno = EINVAL;
		return NULL;
	}
	memset(&base, 0, sizeof(base));
	base.qp_context = attr->qp_context;
	base.send_cq = attr->send_cq;
	base.recv_cq = attr->recv_cq;
	base.srq = attr->srq;
	base.cap = attr->cap;
	base.qp_type = attr->qp_type;
	base.sq_sig_all = attr->sq_sig_all;
	ibqp = ibtca_create_qp(attr->pd, &base);
	if (!ibqp)
		return NULL;
	attr->cap = base.cap;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return ibqp;
	if (ibtca_qp_ex_init(to_ibtca_qp(ibqp), attr->send_ops_flags)) {
		ibtca_destroy_qp(ibqp);
		errno = ENOMEM;
		return NULL;
	}
	return ibqp;
}

const struct verbs_context_ops ibtca_qp_ex_ops = {
	.create_qp_ex = ibtca_create_qp_ex,
};
