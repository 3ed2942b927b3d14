// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: address handles. An AH is a path by LID on the one port: the
 * device has no GRH, so an AH with one is refused (-EINVAL). RC QPs take
 * their path from modify_qp; AHs serve the core (the SA's) and UD later.
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
	    rdma_ah_get_port_num(a) != IBTCA_IB_PORT ||
	    (rdma_ah_get_ah_flags(a) & IB_AH_GRH))
		return -EINVAL;
	ah->dlid = rdma_ah_get_dlid(a);
	ah->sl = rdma_ah_get_sl(a);
	return 0;
}

int ibtca_ib_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}
