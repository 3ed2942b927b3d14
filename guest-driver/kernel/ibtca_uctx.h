/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca: user contexts (ibtca_uctx.c), for the RDMA core's device
 * (ibtca_ib.c) and the verbs that map pages into a context.
 */
#ifndef _IBTCA_UCTX_H
#define _IBTCA_UCTX_H

#include <rdma/ib_verbs.h>

#include "ibtca_uverbs_abi.h"

struct ibtca_ib_ucontext {
	struct ib_ucontext ibuc;
	/* The context's doorbell page, NULL while the device has none. */
	struct rdma_user_mmap_entry *db_entry;
	u32 db_page;			/* its index in the doorbell BAR (1-63) */
};

static inline struct ibtca_ib_ucontext *to_uctx(struct ib_ucontext *ibuc)
{
	return container_of(ibuc, struct ibtca_ib_ucontext, ibuc);
}

int ibtca_ib_alloc_ucontext(struct ib_ucontext *ibuc, struct ib_udata *udata);
void ibtca_ib_dealloc_ucontext(struct ib_ucontext *ibuc);
int ibtca_ib_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma);
void ibtca_ib_mmap_free(struct rdma_user_mmap_entry *entry);
struct rdma_user_mmap_entry *ibtca_uctx_mmap_insert(struct ib_ucontext *ibuc,
						    unsigned long pfn,
						    size_t len, bool io,
						    u64 *offset);
void ibtca_uctx_mmap_remove(struct rdma_user_mmap_entry *entry);
struct ibtca_ib;
void ibtca_uctx_mmap_hold_range(struct rdma_user_mmap_entry *entry,
				struct ibtca_ib *ib, u32 arr);
struct rdma_user_mmap_entry *ibtca_uctx_mmap_insert_dma(struct ib_ucontext *ibuc,
							struct device *dev,
							void *cpu,
							dma_addr_t dma,
							size_t size,
							size_t map_len,
							u64 *offset);
void ibtca_uctx_mmap_keep_dma(struct rdma_user_mmap_entry *entry);

#endif /* _IBTCA_UCTX_H */
