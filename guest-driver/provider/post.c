// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider's post_send and post_recv: each work request becomes
 * a WQE written straight into the mapped queue; one doorbell (an 8-byte
 * store to the context's doorbell page: QP number | index << 32) after the
 * chain covers every WQE it wrote, ordered after them by
 * udma_to_device_barrier(). No system call. As in the kernel driver
 * (ibtca_ib_post.c), every send WQE asks the device for a completion and
 * carries its slot number as wr_id; poll_cq hides the successful ones of
 * unsignaled requests. The first request the QP cannot take stops the
 * chain with *bad_wr pointing at it; those before it stay posted.
 * IBV_SEND_INLINE (SEND and RDMA WRITE kinds of RC QPs, at most
 * IBTCA_MAX_INLINE_DATA bytes, EINVAL past it and on UD QPs) copies the
 * payload into the WQE, where the device reads it; the SGEs' lkeys are
 * not used.
 *
 * A doorbell is a trapped store: under QEMU a vfio-user message, tens of
 * microseconds of a TCG guest's time. A QP with a doorbell record
 * (struct ibtca_db_record) stores the queue's producer index there first
 * and rings only if the device does not say it is awake on that queue:
 * while it has send work in flight the device reads sq_pi again at each
 * ACK, and in RTR/RTS it reads rq_pi whenever it needs a receive; before
 * it stops reading it clears the awake word and reads the index once
 * more (each side stores, fences, then loads the other's word, so one of
 * them sees the other).
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <util/mmio.h>
#include <util/udma_barrier.h>

#include "ibtca.h"
#include "ibtca_wqe.h"

#define IBTCA_SEND_FLAGS (IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | \
			  IBV_SEND_FENCE | IBV_SEND_INLINE)

void ibtca_doorbell(struct ibtca_context *ctx, uint32_t offset, uint32_t num,
		    uint32_t index)
{
	/* The WQEs (or the consumed CQEs) before the device hears of them. */
	udma_to_device_barrier();
	mmio_write64_le((char *)ctx->db + offset,
			htole64(num | (uint64_t)index << 32));
}

/*
 * A full barrier between the index store and the awake-word load that holds
 * in a QEMU guest under TCG too. GCC emits a sequentially consistent fence
 * on x86 as `lock or $0,(%rsp)`; TCG runs a locked instruction of a guest
 * with one vCPU as a plain load and store, so the host CPU may still make
 * the load visible before the store, and the device thread, storing and
 * fencing the other way, then misses the index while the driver misses
 * the device going to sleep: a WQE nobody reads. `mfence` is translated
 * to a host barrier in every guest.
 */
static inline void ibtca_store_load_barrier(void)
{
#if defined(__x86_64__) || defined(__i386__)
	asm volatile("mfence" ::: "memory");
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/*
 * Tells the device of the send (@rq 0) or receive queue's WQEs up to @pi:
 * in the doorbell record, and with the doorbell unless the record says
 * the device reads that index by itself.
 */
static void ibtca_queue_doorbell(struct ibtca_context *ctx,
				 struct ibtca_qp *qp, int rq, uint32_t pi)
{
	struct ibtca_db_record *rec = qp->db_record;

	if (rec) {
		/* The WQEs before the index, the index before the look. */
		udma_to_device_barrier();
		__atomic_store_n(rq ? &rec->rq_pi : &rec->sq_pi, htole32(pi),
				 __ATOMIC_RELEASE);
		ibtca_store_load_barrier();
		if (__atomic_load_n(rq ? &rec->rq_awake : &rec->sq_awake,
				    __ATOMIC_RELAXED) && ctx->db_records)
			return;
	}
	ibtca_doorbell(ctx, rq ? IBTCA_DB_PAGE_RQ : IBTCA_DB_PAGE_SQ,
		       qp->ibv_qp.qp_num, pi);
}

/* libibverbs' opcodes are the uverbs ones ibtca_wqe_opcode() maps. */
#define IBTCA_UVERBS_OP(op) \
	static_assert((int)IBV_WR_##op == (int)IB_UVERBS_WR_##op, #op)
IBTCA_UVERBS_OP(SEND);
IBTCA_UVERBS_OP(SEND_WITH_IMM);
IBTCA_UVERBS_OP(RDMA_WRITE);
IBTCA_UVERBS_OP(RDMA_WRITE_WITH_IMM);
IBTCA_UVERBS_OP(RDMA_READ);
IBTCA_UVERBS_OP(ATOMIC_CMP_AND_SWP);
IBTCA_UVERBS_OP(ATOMIC_FETCH_AND_ADD);
IBTCA_UVERBS_OP(LOCAL_INV);
IBTCA_UVERBS_OP(SEND_WITH_INV);

/* The device's opcode for @op, or -1. */
static int ibtca_wr_opcode(enum ibv_wr_opcode op)
{
	return op == IBV_WR_BIND_MW ? IBTCA_WR_BIND_MW : ibtca_wqe_opcode(op);
}

#define IBTCA_MW_RIGHTS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_ATOMIC)

/* The device's IBTCA_ACCESS_REMOTE_* rights for verbs' remote rights. */
static uint32_t ibtca_mw_rights(unsigned int access)
{
	uint32_t a = 0;

	if (access & IBV_ACCESS_REMOTE_WRITE)
		a |= IBTCA_ACCESS_REMOTE_WRITE;
	if (access & IBV_ACCESS_REMOTE_READ)
		a |= IBTCA_ACCESS_REMOTE_READ;
	if (access & IBV_ACCESS_REMOTE_ATOMIC)
		a |= IBTCA_ACCESS_REMOTE_ATOMIC;
	return a;
}

/* 0 if bind request @wr is one the device can take, else -1. */
static int ibtca_bind_check(const struct ibv_send_wr *wr)
{
	const struct ibv_mw_bind_info *b = &wr->bind_mw.bind_info;
	const struct ibv_mw *mw = wr->bind_mw.mw;

	if (!mw || !b->mr ||
	    b->mr->context != mw->context || (b->mw_access_flags & ~IBTCA_MW_RIGHTS))
		return -1;
	/* The new key names the same window. */
	if ((wr->bind_mw.rkey ^ mw->rkey) & ~0xffU)
		return -1;
	return 0;
}

/* Fills send WQE @w with bind request @wr (checked); moves mw->rkey. */
static void ibtca_bind_wqe(struct ibtca_send_wqe *w, const struct ibv_send_wr *wr)
{
	const struct ibv_mw_bind_info *b = &wr->bind_mw.bind_info;
	uint32_t key = wr->bind_mw.rkey;

	/* The device increments the low byte of the key it is given. */
	w->rkey = htole32((key & ~0xffU) | ((key - 1) & 0xffU));
	w->compare_add = htole64(b->addr);
	w->swap = htole64(b->length);
	w->sge[0].lkey = htole32(b->mr->lkey);
	w->imm_data = htole32(ibtca_mw_rights(b->mw_access_flags));
	w->num_sge = 0;
	wr->bind_mw.mw->rkey = key;
}

/* The device's opcode for @wr, or -1 if @qp cannot take it. */
int ibtca_send_check(struct ibtca_qp *qp, const struct ibv_send_wr *wr)
{
	int op = ibtca_wr_opcode(wr->opcode);
	uint64_t len = 0;
	int i;

	if (op < 0 || (wr->send_flags & ~IBTCA_SEND_FLAGS) ||
	    wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge)
		return -1;
	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (!ibtca_wqe_buffers_ok(op, wr->num_sge,
				  wr->num_sge ? wr->sg_list[0].length : 0,
				  wr->send_flags & IBV_SEND_INLINE, len))
		return -1;
	if (op == IBTCA_WR_BIND_MW && ibtca_bind_check(wr))
		return -1;
	return op;
}

/* Fills WQE @w (zeroed) from @wr (checked). */
static void ibtca_send_wqe(struct ibtca_send_wqe *w, uint8_t opcode,
			   const struct ibv_send_wr *wr)
{
	int i;

	ibtca_wqe_start(w, opcode, wr->send_flags & IBV_SEND_SOLICITED,
			wr->send_flags & IBV_SEND_FENCE,
			wr->send_flags & IBV_SEND_INLINE);
	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		w->imm_data = ibtca_wqe_imm(wr->imm_data);
		break;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_SEND_WITH_INV:
		w->imm_data = htole32(wr->invalidate_rkey);
		break;
	default:
		break;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		ibtca_wqe_rdma(w, wr->wr.rdma.remote_addr, wr->wr.rdma.rkey);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ibtca_wqe_atomic(w, wr->wr.atomic.remote_addr,
				 wr->wr.atomic.rkey, wr->wr.atomic.compare_add,
				 wr->wr.atomic.swap);
		break;
	case IBV_WR_BIND_MW:
		ibtca_bind_wqe(w, wr);
		return;
	default:
		break;
	}
	for (i = 0; i < wr->num_sge; i++)
		ibtca_wqe_gather(w, wr->sg_list[i].addr, wr->sg_list[i].length,
				 wr->sg_list[i].lkey);
}

void ibtca_recv_wqe(struct ibtca_recv_wqe *w, const struct ibv_recv_wr *wr)
{
	int i;

	memset(w, 0, sizeof(*w));
	ibtca_recv_wqe_start(w, wr->wr_id);
	for (i = 0; i < wr->num_sge; i++)
		ibtca_recv_wqe_gather(w, wr->sg_list[i].addr,
				      wr->sg_list[i].length, wr->sg_list[i].lkey);
}

/*
 * A UD QP's WQE (zeroed) from @wr: the AH's address vector, the remote QP
 * and Q_Key; SEND and SEND with immediate only, from registered buffers
 * (-1 otherwise: a UD WQE has no room for inline data, and the kernel
 * driver refuses IB_SEND_INLINE on datagram QPs too).
 */
static int ibtca_ud_wqe(struct ibtca_qp *qp, struct ibtca_ud_send_wqe *w,
			const struct ibv_send_wr *wr)
{
	int i;

	if ((wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) ||
	    (wr->send_flags & ~IBTCA_SEND_FLAGS) ||
	    (wr->send_flags & IBV_SEND_INLINE) || !wr->wr.ud.ah ||
	    wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge)
		return -1;
	*w = to_ibtca_ah(wr->wr.ud.ah)->av;
	ibtca_wqe_ud_start(w, wr->opcode == IBV_WR_SEND_WITH_IMM, wr->imm_data,
			   wr->send_flags & IBV_SEND_SOLICITED,
			   wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey);
	for (i = 0; i < wr->num_sge; i++)
		ibtca_wqe_ud_gather(w, wr->sg_list[i].addr,
				    wr->sg_list[i].length, wr->sg_list[i].lkey);
	return 0;
}

/*
 * The next free send slot of @qp (sq_lock held), zeroed over its whole
 * stride; NULL if full.
 */
static struct ibtca_send_wqe *ibtca_sq_slot(struct ibtca_qp *qp)
{
	uint32_t mask = (1U << qp->log) - 1;
	void *w;

	if (qp->sq_pi - __atomic_load_n(&qp->sq_done, __ATOMIC_ACQUIRE) > mask)
		return NULL;
	w = qp->sq + ((size_t)(qp->sq_pi & mask) << qp->sq_log_stride);
	memset(w, 0, (size_t)1 << qp->sq_log_stride);
	return w;
}

/* Posts the WQE ibtca_sq_slot() gave (the doorbell is the caller's). */
static void ibtca_sq_claim(struct ibtca_qp *qp, struct ibtca_send_wqe *w,
			   uint64_t wr_id, int signaled)
{
	uint32_t slot = qp->sq_pi, mask = (1U << qp->log) - 1;

	w->wr_id = htole64(slot);
	qp->swr[slot & mask].wr_id = wr_id;
	qp->swr[slot & mask].signaled = signaled;
	__atomic_store_n(&qp->sq_pi, slot + 1, __ATOMIC_RELEASE);
}

int ibtca_post_direct(struct ibv_qp *ibqp, uint8_t opcode, uint32_t arr,
		      uint32_t len, uint64_t remote_addr, uint32_t rkey,
		      uint64_t wr_id)
{
	struct ibtca_context *ctx = to_ibtca_ctx(ibqp->context);
	struct ibtca_qp *qp = to_ibtca_qp(ibqp);
	struct ibtca_send_wqe *w;
	int err = 0;

	pthread_spin_lock(&qp->sq_lock);
	w = ibtca_sq_slot(qp);
	if (w) {
		ibtca_wqe_start(w, opcode, false, false, false);
		ibtca_wqe_rdma(w, remote_addr, rkey);
		ibtca_wqe_gather(w, 0, len, IBTCA_SGE_DIRECT | arr);
		ibtca_sq_claim(qp, w, wr_id, 1);
		ibtca_queue_doorbell(ctx, qp, 0, qp->sq_pi);
	} else {
		err = ENOMEM;
	}
	pthread_spin_unlock(&qp->sq_lock);
	return err;
}

int ibtca_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr)
{
	struct ibtca_context *ctx = to_ibtca_ctx(ibqp->context);
	struct ibtca_qp *qp = to_ibtca_qp(ibqp);
	int ud = ibqp->qp_type == IBV_QPT_UD;
	struct ibtca_send_wqe *w;
	uint32_t start;
	int op, err = 0;

	pthread_spin_lock(&qp->sq_lock);
	start = qp->sq_pi;
	for (; wr; wr = wr->next) {
		op = ud ? 0 : ibtca_send_check(qp, wr);
		if (op < 0) {
			err = EINVAL;
			break;
		}
		w = ibtca_sq_slot(qp);
		if (!w) {
			err = ENOMEM;
			break;
		}
		if (ud && ibtca_ud_wqe(qp, (struct ibtca_ud_send_wqe *)w, wr)) {
			err = EINVAL;
			break;
		}
		if (!ud)
			ibtca_send_wqe(w, op, wr);
		ibtca_sq_claim(qp, w, wr->wr_id, qp->sq_sig_all ||
			       (wr->send_flags & IBV_SEND_SIGNALED));
	}
	if (qp->sq_pi != start)
		ibtca_queue_doorbell(ctx, qp, 0, qp->sq_pi);
	pthread_spin_unlock(&qp->sq_lock);
	if (err)
		*bad_wr = wr;
	return err;
}

int ibtca_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr)
{
	struct ibtca_context *ctx = to_ibtca_ctx(ibqp->context);
	struct ibtca_qp *qp = to_ibtca_qp(ibqp);
	uint32_t mask = (1U << qp->log) - 1;
	uint32_t start, slot;
	void *w;
	int err = 0;

	/* A QP on an SRQ has no receive queue of its own. */
	if (ibqp->srq) {
		err = EINVAL;
		*bad_wr = wr;
		return err;
	}
	pthread_spin_lock(&qp->rq_lock);
	start = qp->rq_pi;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > qp->max_recv_sge) {
			err = EINVAL;
			break;
		}
		slot = qp->rq_pi;
		if (slot - __atomic_load_n(&qp->rq_done, __ATOMIC_ACQUIRE) > mask) {
			err = ENOMEM;
			break;
		}
		w = qp->rq + ((size_t)(slot & mask) << qp->rq_log_stride);
		memset(w, 0, (size_t)1 << qp->rq_log_stride);
		ibtca_recv_wqe(w, wr);
		__atomic_store_n(&qp->rq_pi, slot + 1, __ATOMIC_RELEASE);
	}
	if (qp->rq_pi != start)
		ibtca_queue_doorbell(ctx, qp, 1, qp->rq_pi);
	pthread_spin_unlock(&qp->rq_lock);
	if (err)
		*bad_wr = wr;
	return err;
}
