// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider's RC QPs. The kernel driver creates the device QP on
 * the context's doorbell page and hands back its send and receive queues,
 * which the provider maps and fills (post.c). modify_qp and query_qp are
 * the kernel's (with seed 002's choices from the environment on the way to
 * RTR, qp_options.c); the provider keeps the path (DLID, SL) that receive
 * completions report, and restarts its queue indexes when the QP goes to
 * RESET, as the device and the kernel do. Inline data goes in the WQE
 * (max_inline_data IBTCA_MAX_INLINE_DATA); a QP created with an SRQ takes
 * its receives from it (srq.c). The context's table finds a QP by number
 * for poll_cq. A QP whose kernel driver gave it a doorbell record maps that
 * page too (post.c says how it is used).
 *
 * The provider asks for WQE strides (struct ibtca_create_qp_req): the
 * kernel sizes each queue's slots from the QP's max_send_sge and
 * max_recv_sge (128 to 1024 bytes, up to 32 SGEs each way, the context's
 * max_send_sge and max_recv_sge), reports the SGEs they hold in the QP's
 * caps and names the strides in its response, and post.c writes each WQE
 * at its slot's stride.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ibtca.h"
#include "ibtca_uverbs.h"
#include "ibtca_wqe.h"

/* Adds @qp to the context's table; 0, or -1 without memory. */
static int ibtca_qp_table_add(struct ibtca_context *ctx, struct ibtca_qp *qp)
{
	struct ibtca_qp **t;
	uint32_t i, n;

	pthread_mutex_lock(&ctx->qp_lock);
	for (i = 0; i < ctx->qp_table_size; i++)
		if (!ctx->qp_table[i])
			goto found;
	n = ctx->qp_table_size ? 2 * ctx->qp_table_size : 8;
	t = realloc(ctx->qp_table, n * sizeof(*t));
	if (!t) {
		pthread_mutex_unlock(&ctx->qp_lock);
		return -1;
	}
	memset(t + ctx->qp_table_size, 0,
	       (n - ctx->qp_table_size) * sizeof(*t));
	i = ctx->qp_table_size;
	ctx->qp_table = t;
	ctx->qp_table_size = n;
found:
	ctx->qp_table[i] = qp;
	pthread_mutex_unlock(&ctx->qp_lock);
	return 0;
}

static void ibtca_qp_table_del(struct ibtca_context *ctx, struct ibtca_qp *qp)
{
	uint32_t i;

	pthread_mutex_lock(&ctx->qp_lock);
	for (i = 0; i < ctx->qp_table_size; i++)
		if (ctx->qp_table[i] == qp)
			ctx->qp_table[i] = NULL;
	pthread_mutex_unlock(&ctx->qp_lock);
}

struct ibtca_qp *ibtca_qp_lookup(struct ibtca_context *ctx, uint32_t qpn)
{
	struct ibtca_qp *qp = NULL;
	uint32_t i;

	pthread_mutex_lock(&ctx->qp_lock);
	for (i = 0; i < ctx->qp_table_size; i++)
		if (ctx->qp_table[i] && ctx->qp_table[i]->ibv_qp.qp_num == qpn) {
			qp = ctx->qp_table[i];
			break;
		}
	pthread_mutex_unlock(&ctx->qp_lock);
	return qp;
}

/* Every WQE asks for a completion: each one frees one slot, in order. */
void ibtca_qp_completed(struct ibtca_qp *qp, int recv)
{
	uint32_t *done = recv ? &qp->rq_done : &qp->sq_done;
	uint32_t *pi = recv ? &qp->rq_pi : &qp->sq_pi;

	if (*done != __atomic_load_n(pi, __ATOMIC_ACQUIRE))
		__atomic_store_n(done, *done + 1, __ATOMIC_RELEASE);
}

struct ibv_qp *ibtca_create_qp(struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr)
{
	struct ibtca_context *ctx = to_ibtca_ctx(pd->context);
	struct uibtca_create_qp_resp resp = {};
	struct uibtca_create_qp cmd = { .flags = IBTCA_UQP_REQ_STRIDES };
	size_t sq_bytes, rq_bytes;
	struct ibtca_qp *qp;
	int err;

	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cap.max_inline_data > IBTCA_MAX_INLINE_DATA) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	err = ibv_cmd_create_qp(pd, &qp->ibv_qp, attr, &cmd.ibv_cmd,
				sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (err)
		goto fail;
	qp->sq_log_stride = ibtca_resp_stride(resp.sq_log_stride);
	qp->rq_log_stride = ibtca_resp_stride(resp.rq_log_stride);
	if (resp.log_wqes > 20 || !qp->sq_log_stride || !qp->rq_log_stride) {
		err = EPROTO;
		goto destroy;
	}
	sq_bytes = (size_t)1 << (resp.log_wqes + qp->sq_log_stride);
	rq_bytes = (size_t)1 << (resp.log_wqes + qp->rq_log_stride);
	if (resp.sq_offset > resp.ring_bytes ||
	    resp.ring_bytes - resp.sq_offset < sq_bytes ||
	    resp.rq_offset > resp.ring_bytes ||
	    resp.ring_bytes - resp.rq_offset < rq_bytes) {
		err = EPROTO;
		goto destroy;
	}
	qp->max_send_sge = ibtca_send_stride_sges(qp->sq_log_stride);
	qp->max_recv_sge = ibtca_recv_stride_sges(qp->rq_log_stride);
	qp->log = resp.log_wqes;
	qp->swr = calloc(1U << qp->log, sizeof(*qp->swr));
	if (!qp->swr) {
		err = ENOMEM;
		goto destroy;
	}
	qp->ring = mmap(NULL, resp.ring_bytes, PROT_READ | PROT_WRITE,
			MAP_SHARED, pd->context->cmd_fd, resp.ring_mmap_offset);
	if (qp->ring == MAP_FAILED) {
		err = errno;
		goto destroy;
	}
	qp->ring_bytes = resp.ring_bytes;
	if (resp.flags & IBTCA_UQP_F_DB_RECORD) {
		qp->db_record = mmap(NULL, IBTCA_DB_RECORD_BYTES,
				     PROT_READ | PROT_WRITE, MAP_SHARED,
				     pd->context->cmd_fd,
				     resp.db_record_mmap_offset);
		if (qp->db_record == MAP_FAILED) {
			err = errno;
			qp->db_record = NULL;
			goto unmap;
		}
	}
	qp->sq = (char *)qp->ring + resp.sq_offset;
	qp->rq = (char *)qp->ring + resp.rq_offset;
	qp->sq_sig_all = attr->sq_sig_all;
	if (ibtca_qp_table_add(ctx, qp)) {
		err = ENOMEM;
		goto unmap;
	}
	return &qp->ibv_qp;

unmap:
	if (qp->db_record)
		munmap(qp->db_record, IBTCA_DB_RECORD_BYTES);
	munmap(qp->ring, qp->ring_bytes);
destroy:
	ibv_cmd_destroy_qp(&qp->ibv_qp);
fail:
	free(qp->swr);
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	free(qp);
	errno = err;
	return NULL;
}

int ibtca_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		    int attr_mask)
{
	struct ibtca_qp *qp = to_ibtca_qp(ibqp);
	struct ibv_modify_qp cmd = {};
	int err, sent;

	/* Seed 002's choices from the environment (qp_options.c). */
	err = ibtca_modify_qp_options(ibqp, attr, attr_mask, &sent);
	if (!sent && !err)
		err = ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd,
					sizeof(cmd));
	if (err)
		return err;
	if (attr_mask & IBV_QP_AV) {
		qp->dlid = attr->ah_attr.dlid;
		qp->sl = attr->ah_attr.sl;
	}
	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
		/* The device and the kernel emptied the queues. */
		pthread_spin_lock(&qp->sq_lock);
		pthread_spin_lock(&qp->rq_lock);
		qp->sq_pi = 0;
		qp->sq_done = 0;
		if (qp->db_record) {
			__atomic_store_n(&qp->db_record->sq_pi, 0,
					 __ATOMIC_RELEASE);
			__atomic_store_n(&qp->db_record->rq_pi, 0,
					 __ATOMIC_RELEASE);
		}
		qp->rq_pi = 0;
		qp->rq_done = 0;
		pthread_spin_unlock(&qp->rq_lock);
		pthread_spin_unlock(&qp->sq_lock);
	}
	return 0;
}

int ibtca_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		   int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd = {};

	return ibv_cmd_query_qp(ibqp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

void ibtca_wr_batch_free(struct ibtca_qp *qp)
{
	if (!qp->wrb)
		return;
	free(qp->wrb->wr);
	free(qp->wrb->sge);
	free(qp->wrb->inl);
	free(qp->wrb);
	qp->wrb = NULL;
}

int ibtca_destroy_qp(struct ibv_qp *ibqp)
{
	struct ibtca_qp *qp = to_ibtca_qp(ibqp);
	int err;

	err = ibv_cmd_destroy_qp(ibqp);
	if (err)
		return err;
	ibtca_qp_table_del(to_ibtca_ctx(ibqp->context), qp);
	/* A poller that found the QP before it left the table is done. */
	pthread_spin_lock(&to_ibtca_cq(ibqp->send_cq)->lock);
	pthread_spin_unlock(&to_ibtca_cq(ibqp->send_cq)->lock);
	pthread_spin_lock(&to_ibtca_cq(ibqp->recv_cq)->lock);
	pthread_spin_unlock(&to_ibtca_cq(ibqp->recv_cq)->lock);
	if (qp->db_record)
		munmap(qp->db_record, IBTCA_DB_RECORD_BYTES);
	munmap(qp->ring, qp->ring_bytes);
	free(qp->swr);
	ibtca_wr_batch_free(qp);
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	free(qp);
	return 0;
}
