// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider's shared receive queues. The kernel driver creates the
 * device SRQ on the context's doorbell page and hands back its ring of
 * receive WQEs (ibtca_create_srq_resp), which the provider maps and fills:
 * post_srq_recv writes WQEs and rings the SRQ doorbell (0x18 of the
 * doorbell page: SRQ number | index << 32) once per chain, no system call.
 * Every QP created with the SRQ takes its receives from it in ring order,
 * so each receive completion of such a QP frees one slot (poll_cq counts
 * them in @done, whichever CQ they arrive on). modify_srq (the limit,
 * max_wr), query_srq and destroy_srq are the kernel's; a max_wr past the
 * ring grows it: the kernel gives the SRQ a larger ring holding the
 * receives posted so far (the device copies them) and tells where it is
 * mapped (struct ibtca_modify_srq_resp), and the provider, posting nothing
 * meanwhile, maps it in place of the old one.
 *
 * The provider asks for a WQE stride (struct ibtca_create_srq_req): the
 * kernel sizes the SRQ's slots from its max_sge (128 to 1024 bytes, up to
 * the context's max_srq_sge, 32), reports the SGEs a slot holds in the
 * SRQ's max_sge and names the stride in its response; a growth keeps it.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ibtca.h"
#include "ibtca_uverbs.h"
#include "ibtca_wqe.h"

struct ibv_srq *ibtca_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	struct uibtca_create_srq_resp resp = {};
	struct uibtca_create_srq cmd = { .flags = IBTCA_USRQ_REQ_STRIDE };
	struct ibtca_srq *srq;
	int err;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	err = ibv_cmd_create_srq(pd, &srq->ibv_srq, attr, &cmd.ibv_cmd,
				 sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (err)
		goto fail;
	srq->log_stride = ibtca_resp_stride(resp.log_stride);
	if (resp.log_wqes > 20 || !resp.max_wr || !srq->log_stride ||
	    resp.max_wr > (1U << resp.log_wqes) ||
	    resp.ring_bytes < ((size_t)1 << (resp.log_wqes + srq->log_stride))) {
		err = EPROTO;
		goto destroy;
	}
	srq->ring = mmap(NULL, resp.ring_bytes, PROT_READ | PROT_WRITE,
			 MAP_SHARED, pd->context->cmd_fd, resp.ring_mmap_offset);
	if (srq->ring == MAP_FAILED) {
		err = errno;
		goto destroy;
	}
	srq->ring_bytes = resp.ring_bytes;
	srq->srqn = resp.srqn;
	srq->log = resp.log_wqes;
	srq->max_wr = resp.max_wr;
	srq->max_sge = ibtca_recv_stride_sges(srq->log_stride);
	return &srq->ibv_srq;

destroy:
	ibv_cmd_destroy_srq(&srq->ibv_srq);
fail:
	pthread_spin_destroy(&srq->lock);
	free(srq);
	errno = err;
	return NULL;
}

/* Maps the ring the kernel grew the SRQ to (@resp), in place of the old. */
static int ibtca_srq_remap(struct ibtca_srq *srq,
			   const struct ibtca_modify_srq_resp *resp)
{
	int bad_resp = EPROTO;
	void *ring;

	if (resp->log_wqes > 20 || resp->log_wqes < srq->log ||
	    resp->ring_bytes < ((size_t)1 << (resp->log_wqes + srq->log_stride)))
		return bad_resp;
	ring = mmap(NULL, resp->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		    srq->ibv_srq.context->cmd_fd, resp->ring_mmap_offset);
	if (ring == MAP_FAILED)
		return errno;
	munmap(srq->ring, srq->ring_bytes);
	srq->ring = ring;
	srq->ring_bytes = resp->ring_bytes;
	srq->log = resp->log_wqes;
	return 0;
}

int ibtca_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		     int attr_mask)
{
	struct ibtca_srq *srq = to_ibtca_srq(ibsrq);
	struct ibtca_modify_srq_resp resp = {};
	struct uibtca_modify_srq cmd = {};
	int grow, err;

	cmd.resp_addr = (uintptr_t)&resp;
	/* Growing moves the ring: no post meanwhile. */
	pthread_spin_lock(&srq->lock);
	grow = (attr_mask & IBV_SRQ_MAX_WR) && attr->max_wr > (1U << srq->log);
	err = ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd.ibv_cmd,
				 sizeof(cmd));
	if (!err && (attr_mask & IBV_SRQ_MAX_WR))
		__atomic_store_n(&srq->max_wr, attr->max_wr, __ATOMIC_RELEASE);
	if (!err && grow) {
		err = ibtca_srq_remap(srq, &resp);
		/* The device reads a ring we cannot write: post nothing more. */
		if (err)
			__atomic_store_n(&srq->max_wr, 0, __ATOMIC_RELEASE);
	}
	pthread_spin_unlock(&srq->lock);
	return err;
}

int ibtca_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd = {};

	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

int ibtca_destroy_srq(struct ibv_srq *ibsrq)
{
	struct ibtca_srq *srq = to_ibtca_srq(ibsrq);
	int err;

	err = ibv_cmd_destroy_srq(ibsrq);
	if (err)
		return err;
	munmap(srq->ring, srq->ring_bytes);
	pthread_spin_destroy(&srq->lock);
	free(srq);
	return 0;
}

int ibtca_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr)
{
	struct ibtca_context *ctx = to_ibtca_ctx(ibsrq->context);
	struct ibtca_srq *srq = to_ibtca_srq(ibsrq);
	void *w;
	uint32_t start, slot, max_wr, mask;
	int err = 0;

	pthread_spin_lock(&srq->lock);
	/* Under the lock: a growing SRQ's ring and size change. */
	mask = (1U << srq->log) - 1;
	start = srq->pi;
	max_wr = __atomic_load_n(&srq->max_wr, __ATOMIC_ACQUIRE);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > srq->max_sge) {
			err = EINVAL;
			break;
		}
		slot = srq->pi;
		if (slot - __atomic_load_n(&srq->done, __ATOMIC_ACQUIRE) >=
		    max_wr) {
			err = ENOMEM;
			break;
		}
		w = srq->ring + ((size_t)(slot & mask) << srq->log_stride);
		memset(w, 0, (size_t)1 << srq->log_stride);
		ibtca_recv_wqe(w, wr);
		srq->pi = slot + 1;
	}
	if (srq->pi != start)
		ibtca_doorbell(ctx, IBTCA_DB_PAGE_SRQ, srq->srqn, srq->pi);
	pthread_spin_unlock(&srq->lock);
	if (err)
		*bad_wr = wr;
	return err;
}

/* A receive completion of a QP on @ibsrq: one slot is free again. */
void ibtca_srq_completed(struct ibv_srq *ibsrq)
{
	__atomic_fetch_add(&to_ibtca_srq(ibsrq)->done, 1, __ATOMIC_RELEASE);
}
