/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The uverbs commands whose driver-specific parts ibtca's kernel driver
 * defines (guest-driver/include/ibtca_uverbs_abi.h, rdma/ibtca-abi.h in the tree).
 */
#ifndef IBTCA_UVERBS_H
#define IBTCA_UVERBS_H

#include <infiniband/kern-abi.h>
#include <rdma/ibtca-abi.h>
#include <kernel-abi/ibtca-abi.h>

DECLARE_DRV_CMD(ibtca_get_context, IB_USER_VERBS_CMD_GET_CONTEXT,
		ibtca_alloc_ucontext_req, ibtca_alloc_ucontext_resp);
DECLARE_DRV_CMD(uibtca_create_cq, IB_USER_VERBS_CMD_CREATE_CQ,
		empty, ibtca_create_cq_resp);
DECLARE_DRV_CMD(uibtca_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		ibtca_create_qp_req, ibtca_create_qp_resp);
DECLARE_DRV_CMD(uibtca_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ,
		ibtca_create_srq_req, ibtca_create_srq_resp);
DECLARE_DRV_CMD(uibtca_modify_srq, IB_USER_VERBS_CMD_MODIFY_SRQ,
		ibtca_modify_srq_cmd, empty);
DECLARE_DRV_CMD(uibtca_modify_qp, IB_USER_VERBS_EX_CMD_MODIFY_QP,
		ibtca_modify_qp_cmd, empty);

#endif /* IBTCA_UVERBS_H */
