// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: memory registration for the RDMA core.
 *
 * - reg_user_mr pins user memory with ib_umem_get_va and registers it in the
 *   device's page-list form (REG_MR with npages > 0): a table of 4 KiB
 *   page addresses built with rdma_umem_for_each_dma_block in coherent
 *   memory. The device copies the table when it registers the region, so
 *   the table is freed as soon as the command returns.
 * - alloc_mr makes a fast-registration region (ALLOC_MR); map_mr_sg fills
 *   its page table with ib_sg_to_pages; ibtca_ib_reg_mr_wqe() writes the
 *   IBTCA_WR_REG_MR work request that registers it (post_send's IB_WR_REG_MR),
 *   which the device executes in send-queue order, copying the table then.
 *   LOCAL_INV and SEND with Invalidate free the region again.
 * - alloc_mw/dealloc_mw are the device's ALLOC_MW (type 2) or
 *   ALLOC_MW_TYPE1 and DEALLOC_MW; user space binds the windows with
 *   IBTCA_WR_BIND_MW, through the provider. DEALLOC_MW takes the key the
 *   window was allocated with, whatever binds made of its low byte.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/slab.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>
#include <rdma/ib_verbs.h>

#include "ibtca_ib_mr.h"

#define IBTCA_IB_PAGE_SIZE	SZ_4K

static struct ibtca_ib_mr *to_mr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct ibtca_ib_mr, ibmr);
}

static struct device *ibtca_ib_dma_dev(struct ib_device *ibdev)
{
	return ibdev->dev.parent;
}

static __le64 *ibtca_ib_alloc_table(struct ib_device *ibdev, u32 n,
				    dma_addr_t *dma)
{
	return dma_alloc_coherent(ibtca_ib_dma_dev(ibdev),
				  array_size(n, sizeof(__le64)), dma,
				  GFP_KERNEL);
}

static void ibtca_ib_free_table(struct ib_device *ibdev, u32 n, __le64 *t,
				dma_addr_t dma)
{
	if (t)
		dma_free_coherent(ibtca_ib_dma_dev(ibdev),
				  array_size(n, sizeof(__le64)), t, dma);
}

static struct ib_mr *ibtca_ib_reg_umem_mr(struct ib_pd *ibpd, u64 start,
					  u64 length, u64 virt, int acc)
{
	struct ib_device *ibdev = ibpd->device;
	struct ibtca_cmd_reg_mr p = { };
	struct ib_block_iter biter;
	struct ibtca_ib_mr *mr;
	dma_addr_t table_dma;
	__le64 *table;
	size_t n, i = 0;
	int ret;

	mr = kzalloc_obj(*mr, GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = ib_umem_get_va(ibdev, start, length, acc);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		goto err_free;
	}
	/*
	 * 4 KiB blocks whatever @virt is: the device maps byte k of the
	 * region to byte first_offset + k of the pages, so the iova needs no
	 * alignment of its own.
	 */
	n = ib_umem_num_dma_blocks(mr->umem, IBTCA_IB_PAGE_SIZE);
	if (!n || n > U32_MAX) {
		ret = -EINVAL;
		goto err_umem;
	}
	table = ibtca_ib_alloc_table(ibdev, n, &table_dma);
	if (!table) {
		ret = -ENOMEM;
		goto err_umem;
	}
	rdma_umem_for_each_dma_block(mr->umem, &biter, IBTCA_IB_PAGE_SIZE)
		table[i++] = cpu_to_le64(rdma_block_iter_dma_address(&biter));

	p.pdn = cpu_to_le32(ibtca_ib_pdn(ibpd));
	p.access = cpu_to_le32(ibtca_ib_access(acc));
	p.iova = cpu_to_le64(virt);
	p.length = cpu_to_le64(length);
	p.gpa = cpu_to_le64(table_dma);
	p.npages = cpu_to_le32(n);
	p.first_offset =
		cpu_to_le32(ib_umem_dma_offset(mr->umem, IBTCA_IB_PAGE_SIZE));
	ret = ibtca_ib_command(ibdev, IBTCA_CMD_REG_MR, &p, sizeof(p),
			       &mr->ibmr.lkey, &mr->ibmr.rkey);
	/* The device copied the table (or refused it): it is not needed. */
	ibtca_ib_free_table(ibdev, n, table, table_dma);
	if (ret)
		goto err_umem;
	mr->ibmr.length = length;
	mr->ibmr.iova = virt;
	mr->ibmr.page_size = IBTCA_IB_PAGE_SIZE;
	return &mr->ibmr;

err_umem:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

#if IBTCA_HAVE_IB_DMAH
struct ib_mr *ibtca_ib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 virt, int acc, struct ib_dmah *dmah,
				   struct ib_udata *udata)
{
	if (dmah)
		return ERR_PTR(-EOPNOTSUPP);
	return ibtca_ib_reg_umem_mr(ibpd, start, length, virt, acc);
}
#else
struct ib_mr *ibtca_ib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 virt, int acc, struct ib_udata *udata)
{
	return ibtca_ib_reg_umem_mr(ibpd, start, length, virt, acc);
}
#endif

int ibtca_ib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct ibtca_ib_mr *mr = to_mr(ibmr);
	struct ibtca_cmd_handle p = { .handle = cpu_to_le32(ibmr->lkey) };
	int ret;

	ret = ibtca_ib_command(ibmr->device, IBTCA_CMD_DEREG_MR, &p, sizeof(p),
			       NULL, NULL);
	/* A device that is gone has forgotten the region already. */
	if (ret && ret != -ENODEV)
		return ret;
	ibtca_ib_free_table(ibmr->device, mr->max_pages, mr->pages,
			    mr->pages_dma);
	ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

struct ib_mr *ibtca_ib_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
				u32 max_num_sg)
{
	struct ib_device *ibdev = ibpd->device;
	struct ibtca_cmd_alloc_mr p = { };
	struct ibtca_ib_mr *mr;
	u32 key;
	int ret;

	if (type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg)
		return ERR_PTR(-EINVAL);
	mr = kzalloc_obj(*mr, GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->pages = ibtca_ib_alloc_table(ibdev, max_num_sg, &mr->pages_dma);
	if (!mr->pages) {
		ret = -ENOMEM;
		goto err_free;
	}
	mr->max_pages = max_num_sg;
	p.pdn = cpu_to_le32(ibtca_ib_pdn(ibpd));
	p.max_pages = cpu_to_le32(max_num_sg);
	ret = ibtca_ib_command(ibdev, IBTCA_CMD_ALLOC_MR, &p, sizeof(p), &key,
			       NULL);
	if (ret)
		goto err_table;
	/* One key, accepted as lkey and rkey alike. */
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	return &mr->ibmr;

err_table:
	ibtca_ib_free_table(ibdev, max_num_sg, mr->pages, mr->pages_dma);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

static int ibtca_ib_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct ibtca_ib_mr *mr = to_mr(ibmr);

	if (mr->npages == mr->max_pages)
		return -ENOMEM;
	mr->pages[mr->npages++] = cpu_to_le64(addr);
	return 0;
}

int ibtca_ib_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg,
		       int sg_nents, unsigned int *sg_offset)
{
	to_mr(ibmr)->npages = 0;
	ibmr->page_size = IBTCA_IB_PAGE_SIZE;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, ibtca_ib_set_page);
}

/*
 * Whether post_send can turn the IB_WR_REG_MR @wr into a work request: no
 * SGEs, a fast-registration region of this device that map_mr_sg filled,
 * the region's own key index (only the key byte may change) and no
 * window-binding right. The device checks the rest (a free region in the
 * QP's PD, bounds against the pages) and fails the work request with
 * IB_WC_LOC_PROT_ERR.
 */
bool ibtca_ib_reg_mr_check(struct ib_device *ibdev, const struct ib_reg_wr *wr)
{
	struct ibtca_ib_mr *mr;

	if (wr->wr.num_sge || !wr->mr || wr->mr->device != ibdev ||
	    wr->mr->type != IB_MR_TYPE_MEM_REG ||
	    (wr->access & IB_ACCESS_MW_BIND))
		return false;
	mr = to_mr(wr->mr);
	return mr->pages && mr->npages &&
	       !((wr->key ^ mr->ibmr.lkey) & ~0xffU);
}

/*
 * The IBTCA_WR_REG_MR work request for an IB_WR_REG_MR (the caller sets
 * the flags): the region's pages as map_mr_sg left them, its iova and
 * length, the new key and rights. The table must stay as it is until the
 * work request has executed (the ULP maps the region again only after
 * invalidating it).
 */
void ibtca_ib_reg_mr_wqe(struct ibtca_reg_mr_wqe *w,
			 const struct ib_reg_wr *wr)
{
	struct ibtca_ib_mr *mr = to_mr(wr->mr);

	memset(w, 0, sizeof(*w));
	w->wr_id = cpu_to_le64(wr->wr.wr_id);
	w->opcode = IBTCA_WR_REG_MR;
	w->access = cpu_to_le32(ibtca_ib_access(wr->access));
	w->iova = cpu_to_le64(mr->ibmr.iova);
	w->key = cpu_to_le32(wr->key);
	w->npages = cpu_to_le32(mr->npages);
	w->length = cpu_to_le64(mr->ibmr.length);
	w->page_table = cpu_to_le64(mr->pages_dma);
	w->first_offset =
		cpu_to_le32(mr->ibmr.iova & (IBTCA_IB_PAGE_SIZE - 1));
}

int ibtca_ib_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct ibtca_cmd_handle p = {
		.handle = cpu_to_le32(ibtca_ib_pdn(ibmw->pd)),
	};

	u8 op = ibmw->type == IB_MW_TYPE_1 ? IBTCA_CMD_ALLOC_MW_TYPE1 :
		IBTCA_CMD_ALLOC_MW;

	return ibtca_ib_command(ibmw->device, op, &p, sizeof(p), &ibmw->rkey,
				NULL);
}

int ibtca_ib_dealloc_mw(struct ib_mw *ibmw)
{
	struct ibtca_cmd_handle p = { .handle = cpu_to_le32(ibmw->rkey) };
	int ret;

	ret = ibtca_ib_command(ibmw->device, IBTCA_CMD_DEALLOC_MW, &p,
			       sizeof(p), NULL, NULL);
	return ret == -ENODEV ? 0 : ret;
}
