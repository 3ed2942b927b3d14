// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: address handles. An AH is the address vector a UD send WQE
 * carries (struct ibtca_ud_send_wqe): LID, SL, source path bits and, with
 * IB_AH_GRH, the GRH fields (the port has one GID: sgid_index 0). The
 * device keeps no AH objects. RC QPs take their path from modify_qp.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "ibtca_ib.h"

int ibtca_ib_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		       struct ib_udata *udata)
{
	struct ibtca_ib_ah *ah = container_of(ibah, struct ibtca_ib_ah, ibah);
	const struct rdma_ah_attr *a = init->ah_attr;

	if (udata)
		return -EOPNOTSUPP;
	if (a->type != RDMA_AH_ATTR_TYPE_IB ||
	    rdma_ah_get_port_num(a) != IBTCA_IB_PORT)
		return -EINVAL;
	ah->dlid = rdma_ah_get_dlid(a);
	ah->sl = rdma_ah_get_sl(a);
	ah->src_path_bits = rdma_ah_get_path_bits(a);
	if (rdma_ah_get_ah_flags(a) & IB_AH_GRH) {
		const struct ib_global_route *g = rdma_ah_read_grh(a);

		if (g->sgid_index)
			return -EINVAL;
		ah->grh = true;
		ah->hop_limit = g->hop_limit;
		ah->traffic_class = g->traffic_class;
		ah->flow_label = g->flow_label;
		memcpy(ah->dgid, g->dgid.raw, sizeof(ah->dgid));
	}
	return 0;
}

/* The MAD layer matches responses to requests through it. */
int ibtca_ib_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	struct ibtca_ib_ah *ah = to_ah(ibah);
	union ib_gid dgid;

	memset(attr, 0, sizeof(*attr));
	attr->type = RDMA_AH_ATTR_TYPE_IB;
	rdma_ah_set_port_num(attr, IBTCA_IB_PORT);
	rdma_ah_set_dlid(attr, ah->dlid);
	rdma_ah_set_sl(attr, ah->sl);
	rdma_ah_set_path_bits(attr, ah->src_path_bits);
	if (ah->grh) {
		memcpy(dgid.raw, ah->dgid, sizeof(dgid.raw));
		rdma_ah_set_grh(attr, &dgid, ah->flow_label, 0, ah->hop_limit,
				ah->traffic_class);
	}
	return 0;
}

int ibtca_ib_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}
