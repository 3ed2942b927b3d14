/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca: memory regions and windows of the RDMA core's ib_device
 * (ibtca_ib_mr.c), and what they need of ibtca_ib_hw.c.
 */
#ifndef IBTCA_IB_MR_H
#define IBTCA_IB_MR_H

#include <rdma/ib_verbs.h>

#include "ibtca_abi.h"
#include "ibtca_compat.h"

/*
 * A device region: the DMA MR (contiguous, over all of guest memory), a
 * user region (@umem, registered by page list), or a fast-registration
 * region (@pages: the page table IBTCA_WR_REG_MR names, @max_pages long).
 */
struct ibtca_ib_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;
	__le64 *pages;
	dma_addr_t pages_dma;
	u32 max_pages;
	u32 npages;
};

/* A memory window (type 2, bound by work request). */
struct ibtca_ib_mw {
	struct ib_mw ibmw;
};

/* ibtca_ib_hw.c */
int ibtca_ib_command(struct ib_device *ibdev, u8 opcode, const void *params,
		     size_t len, u32 *out0, u32 *out1);
u32 ibtca_ib_pdn(struct ib_pd *ibpd);
u32 ibtca_ib_access(int acc);

/* ibtca_ib_mr.c */
#if IBTCA_HAVE_IB_DMAH
struct ib_mr *ibtca_ib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 virt, int acc, struct ib_dmah *dmah,
				   struct ib_udata *udata);
#else
struct ib_mr *ibtca_ib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 virt, int acc, struct ib_udata *udata);
#endif
int ibtca_ib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ib_mr *ibtca_ib_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
				u32 max_num_sg);
int ibtca_ib_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg,
		       int sg_nents, unsigned int *sg_offset);
int ibtca_ib_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int ibtca_ib_dealloc_mw(struct ib_mw *ibmw);
bool ibtca_ib_reg_mr_check(struct ib_device *ibdev, const struct ib_reg_wr *wr);
void ibtca_ib_reg_mr_wqe(struct ibtca_reg_mr_wqe *w,
			 const struct ib_reg_wr *wr);

#endif /* IBTCA_IB_MR_H */
