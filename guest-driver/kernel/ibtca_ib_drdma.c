// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: DRDMA window ranges for user contexts (the provider's direct
 * verbs, ibtcadv.h). A range is a uverbs object of the context that
 * opened it: its page of BAR2 is mapped into that context only, through an
 * mmap entry that holds the range until the last mapping goes, and every
 * submit names the context's doorbell page as the range's owner, so the
 * device lets only the context's QPs name the range in a direct SGE.
 * Methods (ibtca_dv_ioctl.h): open, close, submit, commit, query the ARR,
 * query the window.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/io.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#define UVERBS_MODULE_NAME ibtca_ib
#include <rdma/uverbs_named_ioctl.h>

#include "ibtca.h"
#include "ibtca_dv_ioctl.h"
#include "ibtca_ib.h"
#include "ibtca_uctx.h"

/* A range a user context holds. */
struct ibtca_dv_range {
	struct ibtca_ib *ib;
	struct rdma_user_mmap_entry *entry;	/* holds the ARR (mmap_free) */
	u32 arr;
	u32 owner;				/* the context's doorbell page */
};

/* The device is there and has a window the range size of a page. */
static int ibtca_dv_window_ok(struct ibtca_dev *idev)
{
	if (READ_ONCE(idev->dead))
		return -ENODEV;
	if (!idev->win || idev->drdma_range_size != PAGE_SIZE)
		return -EOPNOTSUPP;
	return 0;
}

static int UVERBS_HANDLER(IBTCA_DV_METHOD_RANGE_OPEN)(struct uverbs_attr_bundle *attrs)
{
	struct ib_uobject *uobj =
		uverbs_attr_get_uobject(attrs, IBTCA_DV_ATTR_OPEN_HANDLE);
	struct ibtca_ib_ucontext *uctx;
	struct ibtca_dv_range_info info = {};
	struct ibtca_dv_range *r;
	struct ib_ucontext *ibuc;
	struct ibtca_dev *idev;
	struct ibtca_ib *ib;
	unsigned long pfn;
	int ret;

	ibuc = ib_uverbs_get_ucontext(attrs);
	if (IS_ERR(ibuc))
		return PTR_ERR(ibuc);
	uctx = to_uctx(ibuc);
	ib = to_ib(ibuc->device);
	idev = ib->idev;
	r = kzalloc_obj(*r, GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	down_read(&idev->hw_sem);
	ret = ibtca_dv_window_ok(idev);
	if (!ret)
		ret = ibtca_dv_arr_get(ib, &r->arr);
	up_read(&idev->hw_sem);
	if (ret)
		goto err_free;
	pfn = PHYS_PFN(pci_resource_start(idev->pdev, IBTCA_DRDMA_WINDOW_BAR) +
		       (u64)r->arr * PAGE_SIZE);
	r->entry = ibtca_uctx_mmap_insert(ibuc, pfn, PAGE_SIZE, true,
					  &info.mmap_offset);
	if (IS_ERR(r->entry)) {
		ret = PTR_ERR(r->entry);
		clear_bit(r->arr, ib->drdma_held);
		goto err_free;
	}
	ibtca_uctx_mmap_hold_range(r->entry, ib, r->arr);
	r->ib = ib;
	r->owner = uctx->db_page;
	uobj->object = r;
	info.arr = r->arr;
	info.range_size = PAGE_SIZE;
	uverbs_finalize_uobj_create(attrs, IBTCA_DV_ATTR_OPEN_HANDLE);
	return uverbs_copy_to(attrs, IBTCA_DV_ATTR_OPEN_INFO, &info,
			      sizeof(info));

err_free:
	kfree(r);
	return ret;
}

/* The range is free for another context once its last mapping goes. */
static int ibtca_dv_range_cleanup(struct ib_uobject *uobj,
				  enum rdma_remove_reason why,
				  struct uverbs_attr_bundle *attrs)
{
	struct ibtca_dv_range *r = uobj->object;

	ibtca_uctx_mmap_remove(r->entry);
	kfree(r);
	return 0;
}

static struct ibtca_dv_range *ibtca_dv_range_of(struct uverbs_attr_bundle *attrs,
						u16 idx)
{
	return uverbs_attr_get_obj(attrs, idx);
}

/*
 * DRDMA_SUBMIT for the range's owner. -EBUSY: the range is in a transfer;
 * -ENOBUFS: no dedicated PMB was free (the caller may move the bytes
 * through memory instead); -EINVAL: any other refusal.
 */
static int UVERBS_HANDLER(IBTCA_DV_METHOD_RANGE_SUBMIT)(struct uverbs_attr_bundle *attrs)
{
	struct ibtca_dv_range *r =
		ibtca_dv_range_of(attrs, IBTCA_DV_ATTR_SUBMIT_HANDLE);
	struct ibtca_dev *idev = r->ib->idev;
	u32 write, len, ctrl, last, errors;
	bool refused;
	u64 v;
	int ret;

	ret = uverbs_copy_from(&write, attrs, IBTCA_DV_ATTR_SUBMIT_WRITE);
	if (!ret)
		ret = uverbs_copy_from(&len, attrs, IBTCA_DV_ATTR_SUBMIT_LENGTH);
	if (ret)
		return ret;
	if (write > 1 || !len || len > PAGE_SIZE)
		return -EINVAL;
	v = r->arr | (u64)r->owner << IBTCA_DRDMA_SUBMIT_OWNER_SHIFT |
	    (u64)len << 32;
	if (write)
		v |= IBTCA_DRDMA_SUBMIT_WRITE;
	down_read(&idev->hw_sem);
	ret = ibtca_dv_window_ok(idev);
	if (ret) {
		up_read(&idev->hw_sem);
		return ret;
	}
	errors = ibtca_rd(idev, IBTCA_REG_DRDMA_ERRORS);
	writeq(v, idev->regs + IBTCA_REG_DRDMA_SUBMIT);
	/* The read also flushes the posted submit before any store. */
	ctrl = ibtca_dv_arr_rd(idev, r->arr, IBTCA_ARR_CTRL);
	refused = ibtca_rd(idev, IBTCA_REG_DRDMA_ERRORS) != errors;
	last = ibtca_rd(idev, IBTCA_REG_DRDMA_LAST_ERROR);
	up_read(&idev->hw_sem);
	if (refused || !(ctrl & IBTCA_ARR_BUSY)) {
		if (!refused || (last >> 8 & 0xffff) != r->arr)
			return -EINVAL;
		switch (last & 0xff) {
		case IBTCA_DRDMA_ERR_NO_PMB:
			return -ENOBUFS;
		case IBTCA_DRDMA_ERR_BUSY:
			return -EBUSY;
		default:
			return -EINVAL;
		}
	}
	return uverbs_copy_to(attrs, IBTCA_DV_ATTR_SUBMIT_CTRL, &ctrl,
			      sizeof(ctrl));
}

/* DRDMA_COMMIT of @count bytes (the device checks them against the ARR). */
static int UVERBS_HANDLER(IBTCA_DV_METHOD_RANGE_COMMIT)(struct uverbs_attr_bundle *attrs)
{
	struct ibtca_dv_range *r =
		ibtca_dv_range_of(attrs, IBTCA_DV_ATTR_COMMIT_HANDLE);
	struct ibtca_dev *idev = r->ib->idev;
	u32 count, errors, after;
	int ret;

	ret = uverbs_copy_from(&count, attrs, IBTCA_DV_ATTR_COMMIT_COUNT);
	if (ret)
		return ret;
	if (!count || count > PAGE_SIZE)
		return -EINVAL;
	down_read(&idev->hw_sem);
	ret = ibtca_dv_window_ok(idev);
	if (!ret) {
		errors = ibtca_rd(idev, IBTCA_REG_DRDMA_ERRORS);
		ibtca_wr(idev, IBTCA_REG_DRDMA_COMMIT, r->arr | count << 16);
		/* The read flushes the commit; a refusal counts an error. */
		after = ibtca_rd(idev, IBTCA_REG_DRDMA_ERRORS);
		if (after != errors)
			ret = -EINVAL;
	}
	up_read(&idev->hw_sem);
	return ret;
}

static int UVERBS_HANDLER(IBTCA_DV_METHOD_RANGE_QUERY)(struct uverbs_attr_bundle *attrs)
{
	struct ibtca_dv_range *r =
		ibtca_dv_range_of(attrs, IBTCA_DV_ATTR_QUERY_HANDLE);
	struct ibtca_dev *idev = r->ib->idev;
	struct ibtca_dv_arr a = {};
	int ret;

	down_read(&idev->hw_sem);
	ret = ibtca_dv_window_ok(idev);
	if (!ret) {
		a.ctrl = ibtca_dv_arr_rd(idev, r->arr, IBTCA_ARR_CTRL);
		a.ttl = ibtca_dv_arr_rd(idev, r->arr, IBTCA_ARR_TTL);
		a.wbc = ibtca_dv_arr_rd(idev, r->arr, IBTCA_ARR_WBC);
		a.rrpl = ibtca_dv_arr_rd(idev, r->arr, IBTCA_ARR_RRPL);
		a.resp_offset = ibtca_dv_arr_rd(idev, r->arr,
						IBTCA_ARR_RESP_OFFSET);
		a.drained = ibtca_dv_arr_rd(idev, r->arr, IBTCA_ARR_DRAINED);
	}
	up_read(&idev->hw_sem);
	if (ret)
		return ret;
	return uverbs_copy_to(attrs, IBTCA_DV_ATTR_QUERY_ARR, &a, sizeof(a));
}

static int UVERBS_HANDLER(IBTCA_DV_METHOD_QUERY_WINDOW)(struct uverbs_attr_bundle *attrs)
{
	struct ib_ucontext *ibuc = ib_uverbs_get_ucontext(attrs);
	struct ibtca_dv_window w = {};
	struct ibtca_dev *idev;
	int ret;

	if (IS_ERR(ibuc))
		return PTR_ERR(ibuc);
	idev = to_ib(ibuc->device)->idev;
	down_read(&idev->hw_sem);
	ret = ibtca_dv_window_ok(idev);
	if (!ret) {
		w.ranges = idev->drdma_ranges;
		w.range_size = idev->drdma_range_size;
		w.mode = ibtca_rd(idev, IBTCA_REG_DRDMA_MODE);
		w.pmbs = ibtca_rd(idev, IBTCA_REG_DRDMA_PMB_DEDICATED);
	}
	up_read(&idev->hw_sem);
	if (ret)
		return ret;
	return uverbs_copy_to(attrs, IBTCA_DV_ATTR_WINDOW, &w, sizeof(w));
}

DECLARE_UVERBS_NAMED_METHOD(IBTCA_DV_METHOD_RANGE_OPEN,
			    UVERBS_ATTR_IDR(IBTCA_DV_ATTR_OPEN_HANDLE, IBTCA_DV_OBJECT_RANGE,
					    UVERBS_ACCESS_NEW, UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(IBTCA_DV_ATTR_OPEN_INFO,
						UVERBS_ATTR_TYPE(struct ibtca_dv_range_info),
						UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD_DESTROY(IBTCA_DV_METHOD_RANGE_CLOSE,
				    UVERBS_ATTR_IDR(IBTCA_DV_ATTR_CLOSE_HANDLE,
						    IBTCA_DV_OBJECT_RANGE,
						    UVERBS_ACCESS_DESTROY,
						    UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(IBTCA_DV_METHOD_RANGE_SUBMIT,
			    UVERBS_ATTR_IDR(IBTCA_DV_ATTR_SUBMIT_HANDLE, IBTCA_DV_OBJECT_RANGE,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_IN(IBTCA_DV_ATTR_SUBMIT_WRITE, UVERBS_ATTR_TYPE(u32),
					       UA_MANDATORY),
			    UVERBS_ATTR_PTR_IN(IBTCA_DV_ATTR_SUBMIT_LENGTH, UVERBS_ATTR_TYPE(u32),
					       UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(IBTCA_DV_ATTR_SUBMIT_CTRL, UVERBS_ATTR_TYPE(u32),
						UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(IBTCA_DV_METHOD_RANGE_COMMIT,
			    UVERBS_ATTR_IDR(IBTCA_DV_ATTR_COMMIT_HANDLE, IBTCA_DV_OBJECT_RANGE,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_IN(IBTCA_DV_ATTR_COMMIT_COUNT, UVERBS_ATTR_TYPE(u32),
					       UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(IBTCA_DV_METHOD_RANGE_QUERY,
			    UVERBS_ATTR_IDR(IBTCA_DV_ATTR_QUERY_HANDLE, IBTCA_DV_OBJECT_RANGE,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(IBTCA_DV_ATTR_QUERY_ARR,
						UVERBS_ATTR_TYPE(struct ibtca_dv_arr),
						UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(IBTCA_DV_METHOD_QUERY_WINDOW,
			    UVERBS_ATTR_PTR_OUT(IBTCA_DV_ATTR_WINDOW,
						UVERBS_ATTR_TYPE(struct ibtca_dv_window),
						UA_MANDATORY));

DECLARE_UVERBS_NAMED_OBJECT(IBTCA_DV_OBJECT_RANGE,
			    UVERBS_TYPE_ALLOC_IDR(ibtca_dv_range_cleanup),
			    &UVERBS_METHOD(IBTCA_DV_METHOD_RANGE_OPEN),
			    &UVERBS_METHOD(IBTCA_DV_METHOD_RANGE_CLOSE),
			    &UVERBS_METHOD(IBTCA_DV_METHOD_RANGE_SUBMIT),
			    &UVERBS_METHOD(IBTCA_DV_METHOD_RANGE_COMMIT),
			    &UVERBS_METHOD(IBTCA_DV_METHOD_RANGE_QUERY),
			    &UVERBS_METHOD(IBTCA_DV_METHOD_QUERY_WINDOW));

const struct uapi_definition ibtca_ib_dv_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE_NAMED(IBTCA_DV_OBJECT_RANGE),
	{},
};
