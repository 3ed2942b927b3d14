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
 * lets the core call mmap_free once no mapping is left. No object maps
 * pages yet: the data path comes with the provider's next verbs.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "ibtca.h"
#include "ibtca_uctx.h"

/* Pages of one object mapped into a context. */
struct ibtca_mmap_entry {
	struct rdma_user_mmap_entry rdma;
	unsigned long pfn;	/* first page frame */
	bool io;		/* device memory: mapped uncached */
};

static struct ibtca_mmap_entry *to_mmap_entry(struct rdma_user_mmap_entry *e)
{
	return container_of(e, struct ibtca_mmap_entry, rdma);
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
		.max_sge = a->max_send_sge,
		.max_qp_rd_atom = a->max_qp_rd_atom,
		.max_mr_size = a->max_mr_size,
	};
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
	return ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
}

void ibtca_ib_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	struct ibtca_ib_ucontext *uctx =
		container_of(ibuc, struct ibtca_ib_ucontext, ibuc);

	ibtca_uctx_mmap_remove(uctx->db_entry);
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

void ibtca_ib_mmap_free(struct rdma_user_mmap_entry *entry)
{
	kfree(to_mmap_entry(entry));
}
