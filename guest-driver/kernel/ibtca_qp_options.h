/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca: seed 002's per-QP choices for kernel verbs consumers (the MSN
 * start and the ACK policy), the same structure user space passes as
 * ibv_modify_qp's driver data (ibtca_uverbs_abi.h). ibtca_qp_options.c.
 */
#ifndef _IBTCA_QP_OPTIONS_H
#define _IBTCA_QP_OPTIONS_H

#include <rdma/ib_verbs.h>

#include "ibtca_abi.h"		/* the ACK modes, IBTCA_ACK_* */
#include "ibtca_uverbs_abi.h"

/*
 * Sets the fields of @o that its comp_mask selects on ibtca RC QP @ibqp,
 * for the QP's next modify from INIT to RTR or from RTR to RTS (call it
 * before connecting; the device keeps them from then on). 0, -EINVAL for
 * values struct ibtca_modify_qp_cmd does not allow, -EOPNOTSUPP for a QP
 * that is not an ibtca RC QP.
 */
int ibtca_qp_set_options(struct ib_qp *ibqp,
			 const struct ibtca_modify_qp_cmd *o);

#endif /* _IBTCA_QP_OPTIONS_H */
