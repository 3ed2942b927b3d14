// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: user contexts of the RDMA core's device (ibtca_ib.c), the kernel
 * side of the rdma-core provider (guest-driver/provider/).
 *
 * A context opens with the provider's ABI version in the request and
 * answers with the driver's and the device's limits
 * (ibtca_uverbs_abi.h); a provider of another ABI version is refused with
 * EPROTO and a log line saying which versions met.
 *
 * Pages a context maps (a doorbell page, queue rings) are handed out as
 * rdma_user_mmap entries: ibtca_uctx_mmap_insert() gives user space an
 * mmap offset, the core finds the entry again at mmap time, and
 * ibtca_uctx_mmap_remove() (when the object owning the pages is freed)
 * lets the core call mmap_free once no mapping is left.
 *
 * Each context owns one doorbell page of the doorbell BAR (pages 1 to
 * IBTCA_DB_PAGES - 1; page 0 is the kernel's), mapped uncached; its QPs
 * and CQs are bound to it, so the device drops their doorbells rung on any
 * other page. A user CQ's or QP's ring belongs to its mmap entry (see
 * ibtca_uctx_mmap_insert_dma()): it is freed only once the object is
 * destroyed and user space has unmapped it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "ibtca_ib.h"
#include "ibtca_uctx.h"
#include "ibtca_wqe.h"

/* Pages of one object mapped into a context. */
struct ibtca_mmap_entry {
	struct rdma_user_mmap_entry rdma;
	unsigned long pfn;	/* first page frame */
	bool io;		/* device memory: mapped uncached */
	/* The doorbell page this entry maps (0: none), freed with it. */
	struct ibtca_ib *ib;
	u32 db_page;
	/* The DRDMA range this entry maps (held: 1), freed with it. */
	bool drdma_held;
	u32 drdma_arr;
	/* Coherent DMA memory the entry owns (cpu NULL: none). */
	struct device *dma_dev;
	void *cpu;
	dma_addr_t dma;
	size_t dma_size;
};

static struct ibtca_mmap_entry *to_mmap_entry(struct rdma_user_mmap_entry *e)
{
	return container_of(e, struct ibtca_mmap_entry, rdma);
}

/*
 * Gives @uctx a free doorbell page of the doorbell BAR and its mmap offset
 * (@offset); -ENOSPC when every page is some other context's.
 */
static int ibtca_uctx_db_page_get(struct ibtca_ib_ucontext *uctx, u64 *offset)
{
	struct ibtca_ib *ib = to_ib(uctx->ibuc.device);
	struct pci_dev *pdev = ib->idev->pdev;
	struct rdma_user_mmap_entry *e;
	unsigned long pfn;
	u32 k;

	if (!(pci_resource_flags(pdev, IBTCA_DB_BAR) & IORESOURCE_MEM) ||
	    pci_resource_len(pdev, IBTCA_DB_BAR) <
	    (u64)IBTCA_DB_PAGES * IBTCA_DB_PAGE_SIZE) {
		ibdev_warn_ratelimited(&ib->ibdev,
				       "user context: the device has no doorbell BAR %u of %u pages\n",
				       IBTCA_DB_BAR, IBTCA_DB_PAGES);
		return -EOPNOTSUPP;
	}
	for (k = 1; k < IBTCA_DB_PAGES; k++)
		if (!test_and_set_bit(k, ib->db_pages))
			break;
	if (k == IBTCA_DB_PAGES) {
		ibdev_warn_ratelimited(&ib->ibdev,
				       "user context: refused, all %u doorbell pages are in use by other user contexts\n",
				       IBTCA_DB_PAGES - 1);
		return -ENOSPC;
	}
	pfn = PHYS_PFN(pci_resource_start(pdev, IBTCA_DB_BAR) +
		       (u64)k * IBTCA_DB_PAGE_SIZE);
	e = ibtca_uctx_mmap_insert(&uctx->ibuc, pfn, PAGE_SIZE, true, offset);
	if (IS_ERR(e)) {
		clear_bit(k, ib->db_pages);
		return PTR_ERR(e);
	}
	/* The page is free again once its last mapping goes (mmap_free). */
	to_mmap_entry(e)->ib = ib;
	to_mmap_entry(e)->db_page = k;
	uctx->db_entry = e;
	uctx->db_page = k;
	return 0;
}

/* The page goes back once no process maps it any more (mmap_free). */
static void ibtca_uctx_db_page_put(struct ibtca_ib_ucontext *uctx)
{
	if (!uctx->db_entry)
		return;
	ibtca_uctx_mmap_remove(uctx->db_entry);
	uctx->db_entry = NULL;
}

int ibtca_ib_alloc_ucontext(struct ib_ucontext *ibuc, struct ib_udata *udata)
{
	const struct ib_device_attr *a = &ibuc->device->attrs;
	struct ibtca_alloc_ucontext_req req = {};
	struct ibtca_alloc_ucontext_resp resp = {
		.abi_version = IBTCA_UVERBS_ABI_VERSION,
		.max_qp = a->max_qp,
		.max_qp_wr = a->max_qp_wr,
		.max_cq = a->max_cq,
		.max_cqe = a->max_cqe,
		.max_mr = a->max_mr,
		.max_pd = a->max_pd,
		/* 128-byte WQEs, for a provider without strides. */
		.max_sge = IBTCA_WQE_SGES,
		.max_send_sge = to_ib(ibuc->device)->max_send_sge,
		.max_recv_sge = to_ib(ibuc->device)->max_recv_sge,
		.max_srq_sge = to_ib(ibuc->device)->max_srq_sge,
		.max_qp_rd_atom = a->max_qp_rd_atom,
		.max_mr_size = a->max_mr_size,
	};
	struct ibtca_ib_ucontext *uctx = to_uctx(ibuc);
	int ret;

	if (udata->inlen < sizeof(req) ||
	    !ib_is_udata_cleared(udata, sizeof(req),
				 udata->inlen - sizeof(req))) {
		ibdev_warn_ratelimited(ibuc->device,
				       "user context: a request of %zu bytes is no ibtca provider ABI %u request; update the provider\n",
				       udata->inlen, IBTCA_UVERBS_ABI_VERSION);
		return -EPROTO;
	}
	ret = ib_copy_from_udata(&req, udata, sizeof(req));
	if (ret)
		return ret;
	if (req.abi_version != IBTCA_UVERBS_ABI_VERSION || req.reserved) {
		ibdev_warn_ratelimited(ibuc->device,
				       "user context: provider ABI %u, driver ABI %u: install the module and the provider from the same ibtca version\n",
				       req.abi_version,
				       IBTCA_UVERBS_ABI_VERSION);
		return -EPROTO;
	}
	ret = ibtca_uctx_db_page_get(uctx, &resp.db_mmap_offset);
	if (ret)
		return ret;
	ret = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
	if (ret)
		ibtca_uctx_db_page_put(uctx);
	return ret;
}

void ibtca_ib_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	ibtca_uctx_db_page_put(to_uctx(ibuc));
}

/*
 * Makes @len bytes from page frame @pfn mappable in @ibuc (@io: device
 * memory, mapped uncached). Returns the entry, for ibtca_uctx_mmap_remove(),
 * and the offset user space passes to mmap() in @offset.
 */
struct rdma_user_mmap_entry *ibtca_uctx_mmap_insert(struct ib_ucontext *ibuc,
						    unsigned long pfn,
						    size_t len, bool io,
						    u64 *offset)
{
	struct ibtca_mmap_entry *e;
	int ret;

	if (!len || !PAGE_ALIGNED(len))
		return ERR_PTR(-EINVAL);
	e = kzalloc_obj(*e, GFP_KERNEL);
	if (!e)
		return ERR_PTR(-ENOMEM);
	e->pfn = pfn;
	e->io = io;
	ret = rdma_user_mmap_entry_insert(ibuc, &e->rdma, len);
	if (ret) {
		kfree(e);
		return ERR_PTR(ret);
	}
	*offset = rdma_user_mmap_get_offset(&e->rdma);
	return &e->rdma;
}

/*
 * DRDMA range @arr of @ib, which @entry maps, stays held until mmap_free:
 * no other context gets it while a mapping of it remains.
 */
void ibtca_uctx_mmap_hold_range(struct rdma_user_mmap_entry *entry,
				struct ibtca_ib *ib, u32 arr)
{
	to_mmap_entry(entry)->ib = ib;
	to_mmap_entry(entry)->drdma_arr = arr;
	to_mmap_entry(entry)->drdma_held = true;
}

/* No new mapping of @entry; mmap_free frees it once the last one goes. */
void ibtca_uctx_mmap_remove(struct rdma_user_mmap_entry *entry)
{
	if (entry)
		rdma_user_mmap_entry_remove(entry);
}

int ibtca_ib_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *entry;
	struct ibtca_mmap_entry *e;
	pgprot_t prot;
	int ret;

	/* The whole entry at its offset, or nothing. */
	entry = rdma_user_mmap_entry_get(ibuc, vma);
	if (!entry)
		return -EINVAL;
	e = to_mmap_entry(entry);
	prot = e->io ? pgprot_noncached(vma->vm_page_prot) : vma->vm_page_prot;
	ret = rdma_user_mmap_io(ibuc, vma, e->pfn, entry->npages << PAGE_SHIFT,
				prot, entry);
	rdma_user_mmap_entry_put(entry);
	return ret;
}

/*
 * Like ibtca_uctx_mmap_insert() for the first @map_len bytes of the
 * coherent DMA memory @cpu/@dma (@size bytes, from @dev), which the entry
 * then owns: mmap_free frees it once the entry is removed and unmapped,
 * unless ibtca_uctx_mmap_keep_dma() said the device may still use it.
 */
struct rdma_user_mmap_entry *ibtca_uctx_mmap_insert_dma(struct ib_ucontext *ibuc,
							struct device *dev,
							void *cpu,
							dma_addr_t dma,
							size_t size,
							size_t map_len,
							u64 *offset)
{
	struct rdma_user_mmap_entry *entry;
	struct ibtca_mmap_entry *e;

	/* Mapped by page frame: the direct map's memory only. */
	if (is_vmalloc_addr(cpu) || map_len > size)
		return ERR_PTR(-EINVAL);
	entry = ibtca_uctx_mmap_insert(ibuc, PHYS_PFN(virt_to_phys(cpu)),
				       map_len, false, offset);
	if (IS_ERR(entry))
		return entry;
	e = to_mmap_entry(entry);
	e->dma_dev = dev;
	e->cpu = cpu;
	e->dma = dma;
	e->dma_size = size;
	return entry;
}

/* The device refused to forget the object: its memory is leaked, not freed. */
void ibtca_uctx_mmap_keep_dma(struct rdma_user_mmap_entry *entry)
{
	to_mmap_entry(entry)->cpu = NULL;
}

void ibtca_ib_mmap_free(struct rdma_user_mmap_entry *entry)
{
	struct ibtca_mmap_entry *e = to_mmap_entry(entry);

	if (e->cpu)
		dma_free_coherent(e->dma_dev, e->dma_size, e->cpu, e->dma);
	if (e->db_page)
		clear_bit(e->db_page, e->ib->db_pages);
	if (e->drdma_held)
		ibtca_dv_range_release(e->ib, e->drdma_arr);
	kfree(e);
}
