// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider's verbs: queries, protection domains and memory
 * regions, each a uverbs command to the kernel driver, which asks the
 * device; CQs and QPs (cq.c, qp.c) and their data path (post.c), which
 * runs in user space on the mapped queues.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibtca.h"

static int ibtca_query_device(struct ibv_context *ctx,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	struct ibtca_context *ictx = to_ibtca_ctx(ctx);
	int err;

	err = ibv_cmd_query_device_any(ctx, input, attr, attr_size, &resp,
				       &resp_size);
	if (err)
		return err;
	/*
	 * The SGEs of this provider's QPs, whose WQE strides it sizes from
	 * the QP's max_send_sge and max_recv_sge (the kernel's answer is for
	 * kernel consumers): max_sge holds both ways, as uverbs has it; an
	 * RDMA READ scatters through send SGEs. Its SRQs' strides, sized
	 * from the SRQ's max_sge, hold max_srq_sge (4 from a kernel driver
	 * without SRQ strides).
	 */
	attr->orig_attr.max_sge = (int)(ictx->max_send_sge < ictx->max_recv_sge ?
					ictx->max_send_sge : ictx->max_recv_sge);
	attr->orig_attr.max_sge_rd = (int)ictx->max_send_sge;
	if (attr->orig_attr.max_srq_sge > (int)ictx->max_srq_sge)
		attr->orig_attr.max_srq_sge = (int)ictx->max_srq_sge;
	/* The kernel's fw_ver is major << 32 | minor, as sysfs fw_ver shows. */
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u", (unsigned int)(fw >> 32), (unsigned int)(fw & 0xffff));
	return 0;
}

static int ibtca_query_port(struct ibv_context *ctx, uint8_t port,
			    struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(ctx, port, attr, &cmd, sizeof(cmd));
}

static struct ibv_pd *ibtca_alloc_pd(struct ibv_context *ctx)
{
	struct ib_uverbs_alloc_pd_resp resp = {};
	struct ibv_alloc_pd cmd = {};
	struct ibv_pd *pd;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	if (ibv_cmd_alloc_pd(ctx, pd, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(pd);
		return NULL;
	}
	return pd;
}

static int ibtca_dealloc_pd(struct ibv_pd *pd)
{
	int err;

	err = ibv_cmd_dealloc_pd(pd);
	if (err)
		return err;
	free(pd);
	return 0;
}

static struct ibv_mr *ibtca_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
				   uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp = {};
	struct ibv_reg_mr cmd = {};
	struct verbs_mr *mr;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;
	if (ibv_cmd_reg_mr(pd, addr, len, hca_va, access, mr, &cmd,
			   sizeof(cmd), &resp, sizeof(resp))) {
		free(mr);
		return NULL;
	}
	return &mr->ibv_mr;
}

static int ibtca_dereg_mr(struct verbs_mr *mr)
{
	int err;

	err = ibv_cmd_dereg_mr(mr);
	if (err)
		return err;
	free(mr);
	return 0;
}

/*
 * Address handles live in user space only: the fields a UD send WQE
 * carries (LID, SL, path bits, GRH with the port's one GID as source).
 */
struct ibv_ah *ibtca_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibtca_ah *ah;

	if (attr->port_num != 1 || attr->sl > 15 ||
	    (attr->is_global && attr->grh.sgid_index)) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	ah->av.dlid = htole16(attr->dlid);
	ah->av.sl = attr->sl;
	ah->av.src_path_bits = attr->src_path_bits;
	if (attr->is_global) {
		ah->av.av_flags = IBTCA_UD_AV_F_GRH;
		ah->av.hop_limit = attr->grh.hop_limit;
		ah->av.traffic_class = attr->grh.traffic_class;
		ah->av.flow_label = htole32(attr->grh.flow_label);
		memcpy(ah->av.dgid, attr->grh.dgid.raw, sizeof(ah->av.dgid));
	}
	return &ah->ibv_ah;
}

int ibtca_destroy_ah(struct ibv_ah *ibah)
{
	free(to_ibtca_ah(ibah));
	return 0;
}

const struct verbs_context_ops ibtca_ctx_ops = {
	.alloc_pd = ibtca_alloc_pd,
	/* The kernel driver's attach_mcast and detach_mcast. */
	.attach_mcast = ibv_cmd_attach_mcast,
	.create_ah = ibtca_create_ah,
	.create_cq = ibtca_create_cq,
	.create_qp = ibtca_create_qp,
	.create_srq = ibtca_create_srq,
	.dealloc_pd = ibtca_dealloc_pd,
	.dereg_mr = ibtca_dereg_mr,
	.destroy_ah = ibtca_destroy_ah,
	.destroy_cq = ibtca_destroy_cq,
	.destroy_qp = ibtca_destroy_qp,
	.destroy_srq = ibtca_destroy_srq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.modify_qp = ibtca_modify_qp,
	.modify_srq = ibtca_modify_srq,
	.poll_cq = ibtca_poll_cq,
	.post_recv = ibtca_post_recv,
	.post_send = ibtca_post_send,
	.post_srq_recv = ibtca_post_srq_recv,
	.query_device_ex = ibtca_query_device,
	.query_port = ibtca_query_port,
	.query_qp = ibtca_query_qp,
	.query_srq = ibtca_query_srq,
	.reg_mr = ibtca_reg_mr,
	.req_notify_cq = ibtca_req_notify_cq,
};
