// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider's CQs. The kernel driver creates the device CQ on the
 * context's doorbell page and hands back its ring, which the provider maps
 * and polls without a system call: an entry is the device's once its owner
 * bit matches the pass over the ring. Consumed entries go back to the
 * device in the CQ doorbell (number | arm << 24, consumer index << 32),
 * at the latest when the ring's slack (entries beyond the CQ's size) is
 * used up, and with every arm; a CQ whose kernel driver gave it a
 * doorbell record gets the consumer index there instead, after every poll
 * that consumed entries (a plain store: the device reads it before it
 * calls the ring full), and the doorbell only to arm. Status and opcode
 * mappings are shared with the kernel driver (ibtca_cqe.h); successful
 * completions of unsignaled sends are hidden, as there.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <util/udma_barrier.h>

#include "ibtca.h"
#include "ibtca_cqe.h"
#include "ibtca_uverbs.h"

/* libibverbs' opcodes and statuses are the ones ibtca_cqe.h gives. */
static_assert((int)IBV_WC_SEND == (int)IB_UVERBS_WC_SEND, "WC_SEND");
static_assert((int)IBV_WC_LOCAL_INV == (int)IB_UVERBS_WC_LOCAL_INV,
	      "WC_LOCAL_INV");
static_assert(IBV_WC_SUCCESS == IBTCA_WC_SUCCESS, "WC_SUCCESS");
static_assert(IBV_WC_LOC_PROT_ERR == IBTCA_WC_LOC_PROT_ERR, "LOC_PROT_ERR");
static_assert(IBV_WC_RNR_RETRY_EXC_ERR == IBTCA_WC_RNR_RETRY_EXC_ERR,
	      "RNR_RETRY_EXC_ERR");

static enum ibv_wc_status ibtca_status(uint8_t st)
{
	return ibtca_cqe_status_is_iba(st) ? st : IBV_WC_GENERAL_ERR;
}

struct ibv_cq *ibtca_create_cq(struct ibv_context *ibctx, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector)
{
	struct uibtca_create_cq_resp resp = {};
	struct uibtca_create_cq cmd = {};
	struct ibtca_cq *cq;
	int err;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	err = ibv_cmd_create_cq(ibctx, cqe, channel, comp_vector, &cq->ibv_cq,
				&cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (err)
		goto fail;
	if (resp.log_entries > 24 || resp.ring_bytes <
	    (sizeof(struct ibtca_cqe) << resp.log_entries) ||
	    (uint32_t)cq->ibv_cq.cqe > (1U << resp.log_entries)) {
		err = EPROTO;
		goto destroy;
	}
	cq->ring = mmap(NULL, resp.ring_bytes, PROT_READ, MAP_SHARED,
			ibctx->cmd_fd, resp.ring_mmap_offset);
	if (cq->ring == MAP_FAILED) {
		err = errno;
		goto destroy;
	}
	cq->ring_bytes = resp.ring_bytes;
	if (resp.flags & IBTCA_UCQ_F_DB_RECORD) {
		cq->db_record = mmap(NULL, IBTCA_DB_RECORD_BYTES,
				     PROT_READ | PROT_WRITE, MAP_SHARED,
				     ibctx->cmd_fd, resp.db_record_mmap_offset);
		if (cq->db_record == MAP_FAILED) {
			err = errno;
			munmap(cq->ring, cq->ring_bytes);
			goto destroy;
		}
	}
	cq->cqn = resp.cqn;
	cq->log = resp.log_entries;
	cq->slack = (1U << cq->log) - cq->ibv_cq.cqe;
	return &cq->ibv_cq;

destroy:
	ibv_cmd_destroy_cq(&cq->ibv_cq);
fail:
	pthread_spin_destroy(&cq->lock);
	free(cq);
	errno = err;
	return NULL;
}

int ibtca_destroy_cq(struct ibv_cq *ibcq)
{
	struct ibtca_cq *cq = to_ibtca_cq(ibcq);
	int err;

	err = ibv_cmd_destroy_cq(ibcq);
	if (err)
		return err;
	if (cq->db_record)
		munmap(cq->db_record, IBTCA_DB_RECORD_BYTES);
	munmap(cq->ring, cq->ring_bytes);
	pthread_spin_destroy(&cq->lock);
	free(cq);
	return 0;
}

/* The entry at the consumer index if the device has written it. */
static struct ibtca_cqe *ibtca_cq_next(struct ibtca_cq *cq)
{
	struct ibtca_cqe *e = &cq->ring[cq->ci & ((1U << cq->log) - 1)];
	uint8_t want = ((cq->ci >> cq->log) & 1) ^ 1;

	if ((__atomic_load_n(&e->owner, __ATOMIC_RELAXED) & 1) != want)
		return NULL;
	/* The rest of the entry only after its owner bit. */
	udma_from_device_barrier();
	return e;
}

static void ibtca_cq_doorbell(struct ibtca_cq *cq, uint8_t arm)
{
	struct ibtca_context *ctx = to_ibtca_ctx(cq->ibv_cq.context);

	ibtca_doorbell(ctx, IBTCA_DB_PAGE_CQ, cq->cqn | (uint32_t)arm << 24,
		       cq->ci);
	cq->reported = cq->ci;
}

static void ibtca_recv_wc(struct ibtca_qp *qp, const struct ibtca_cqe *e,
			  struct ibv_wc *wc)
{
	uint32_t imm = le32toh(e->imm_data);

	wc->wr_id = le64toh(e->wr_id);
	wc->opcode = e->opcode == IBTCA_WC_RECV_RDMA_WITH_IMM ?
		     IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	wc->src_qp = le32toh(e->src_qp);
	wc->slid = qp->dlid;
	wc->sl = qp->sl;
	if (qp->ibv_qp.qp_type == IBV_QPT_UD) {
		/* Each datagram says where it came from. */
		wc->slid = le16toh(e->slid);
		wc->sl = e->sl;
		wc->dlid_path_bits = e->dlid_path_bits;
		if (e->flags & IBTCA_CQE_F_GRH)
			wc->wc_flags |= IBV_WC_GRH;
	}
	if (e->flags & IBTCA_CQE_F_IMM) {
		/* The device keeps the wire's big-endian value as a number. */
		wc->imm_data = htobe32(imm);
		wc->wc_flags |= IBV_WC_WITH_IMM;
	} else if (e->flags & IBTCA_CQE_F_INV) {
		wc->invalidated_rkey = imm;
		wc->wc_flags |= IBV_WC_WITH_INV;
	}
}

/*
 * Turns the ready entry @e into @wc; 0 if the caller gets nothing: an
 * unsignaled send that succeeded, or a QP destroyed meanwhile.
 */
static int ibtca_cqe_to_wc(struct ibtca_context *ctx,
			   const struct ibtca_cqe *e, struct ibv_wc *wc)
{
	int recv = !!(e->opcode & IBTCA_WC_RECV);
	struct ibtca_qp *qp;
	struct ibtca_swr *s;

	qp = ibtca_qp_lookup(ctx, le32toh(e->qpn));
	if (!qp)
		return 0;
	if (recv && qp->ibv_qp.srq)
		ibtca_srq_completed(qp->ibv_qp.srq);
	else
		ibtca_qp_completed(qp, recv);
	memset(wc, 0, sizeof(*wc));
	wc->qp_num = qp->ibv_qp.qp_num;
	wc->status = ibtca_status(e->status);
	wc->byte_len = le32toh(e->byte_len);
	if (wc->status != IBV_WC_SUCCESS)
		wc->vendor_err = le32toh(e->src_qp);
	if (recv) {
		ibtca_recv_wc(qp, e, wc);
		return 1;
	}
	s = &qp->swr[le64toh(e->wr_id) & ((1U << qp->log) - 1)];
	wc->wr_id = s->wr_id;
	wc->opcode = ibtca_cqe_send_opcode(e->opcode);
	/* Failures complete whether signaled or not (as the IBA has it). */
	return s->signaled || wc->status != IBV_WC_SUCCESS;
}

int ibtca_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct ibtca_context *ctx = to_ibtca_ctx(ibcq->context);
	struct ibtca_cq *cq = to_ibtca_cq(ibcq);
	struct ibtca_cqe *e;
	uint32_t start;
	int n = 0;

	pthread_spin_lock(&cq->lock);
	start = cq->ci;
	while (n < ne) {
		e = ibtca_cq_next(cq);
		if (!e)
			break;
		if (ibtca_cqe_to_wc(ctx, e, &wc[n]))
			n++;
		cq->ci++;
	}
	/* The device must know of the entries before the slack is gone. */
	if (cq->db_record && cq->ci != start)
		__atomic_store_n(&cq->db_record->ci, htole32(cq->ci),
				 __ATOMIC_RELEASE);
	if ((!cq->db_record || !ctx->db_records) && cq->ci != cq->reported &&
	    cq->ci - cq->reported >= cq->slack)
		ibtca_cq_doorbell(cq, 0);
	pthread_spin_unlock(&cq->lock);
	return n;
}

int ibtca_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct ibtca_cq *cq = to_ibtca_cq(ibcq);

	pthread_spin_lock(&cq->lock);
	ibtca_cq_doorbell(cq, solicited_only ? IBTCA_CQ_ARM_SOLICITED :
			  IBTCA_CQ_ARM_NEXT);
	pthread_spin_unlock(&cq->lock);
	return 0;
}
