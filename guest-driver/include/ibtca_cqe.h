/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ibtca: what a CQE's opcode and status (struct ibtca_cqe of ibtca_abi.h)
 * say to a verbs consumer, shared by the kernel driver (ibtca_ib_cq.c) and
 * the rdma-core provider (provider/cq.c, which gets a copy of this file
 * beside it from scripts/build-provider.sh).
 *
 * Send opcodes come out as the uverbs ones (IB_UVERBS_WC_*), which the
 * kernel's IB_WC_* and libibverbs' IBV_WC_* equal. Statuses come out in
 * the IBA's numbering, which enum ib_wc_status and enum ibv_wc_status both
 * follow and the device's IBTCA_WC_* statuses take; each side asserts that
 * of its own enum.
 */
#ifndef _IBTCA_CQE_H
#define _IBTCA_CQE_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#endif

#include <rdma/ib_user_verbs.h>

#include "ibtca_abi.h"

/*
 * The uverbs opcode of a send CQE's @op; IB_UVERBS_WC_SEND for the ones it
 * has no name for (IBTCA_WC_REG_MR, which the kernel side names itself).
 */
static inline unsigned int ibtca_cqe_send_opcode(__u8 op)
{
	switch (op) {
	case IBTCA_WC_RDMA_WRITE:
	case IBTCA_WC_DRDMA_WRITE:
		return IB_UVERBS_WC_RDMA_WRITE;
	case IBTCA_WC_RDMA_READ:
	case IBTCA_WC_DRDMA_READ:
		return IB_UVERBS_WC_RDMA_READ;
	case IBTCA_WC_COMP_SWAP:
		return IB_UVERBS_WC_COMP_SWAP;
	case IBTCA_WC_FETCH_ADD:
		return IB_UVERBS_WC_FETCH_ADD;
	case IBTCA_WC_BIND_MW:
		return IB_UVERBS_WC_BIND_MW;
	case IBTCA_WC_LOCAL_INV:
		return IB_UVERBS_WC_LOCAL_INV;
	default:
		return IB_UVERBS_WC_SEND;
	}
}

/*
 * Whether CQE status @st is an IBA completion status as it stands (from
 * IBTCA_WC_SUCCESS to IBTCA_WC_RNR_RETRY_EXC_ERR but for the EE context
 * error at 3); the caller reports the others (IBTCA_WC_PORT_INACTIVE_ERR,
 * anything newer) as a general error.
 */
static inline bool ibtca_cqe_status_is_iba(__u8 st)
{
	return st <= IBTCA_WC_RNR_RETRY_EXC_ERR && st != 3;
}

#endif
