// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: the DRDMA window's ranges (Address Range Registers) that the
 * ib_device hands to user contexts: reading a range's registers, taking a
 * free range, and releasing it when its context's last mapping goes
 * (ibtca_uctx.c's mmap_free). The uverbs methods over a range are in
 * ibtca_ib_drdma.c.
 */
#include <linux/bitops.h>
#include <linux/io.h>

#include "ibtca.h"
#include "ibtca_ib.h"

u32 ibtca_dv_arr_rd(struct ibtca_dev *idev, u32 arr, u32 field)
{
	return ibtca_rd(idev, IBTCA_DRDMA_ARR_BASE +
			arr * IBTCA_DRDMA_ARR_STRIDE + field);
}

/*
 * Takes a range no context holds and the device does not have busy (so no
 * earlier transfer's bytes can be loaded from it); the mapped window's
 * page, which keeps a finished transfer's bytes, is zeroed first.
 * -ENOSPC when there is none.
 */
int ibtca_dv_arr_get(struct ibtca_ib *ib, u32 *arr)
{
	struct ibtca_dev *idev = ib->idev;
	u32 n;

	for (n = 0; n < idev->drdma_ranges; n++) {
		if (ibtca_dv_arr_rd(idev, n, IBTCA_ARR_CTRL) & IBTCA_ARR_BUSY)
			continue;
		if (test_and_set_bit(n, ib->drdma_held))
			continue;
		if (ibtca_rd(idev, IBTCA_REG_DRDMA_MODE) ==
		    IBTCA_DRDMA_MODE_MAPPED)
			memset_io(idev->win + (u64)n * PAGE_SIZE, 0, PAGE_SIZE);
		*arr = n;
		return 0;
	}
	return -ENOSPC;
}

/*
 * The last mapping of a context's range went: the device frees the range
 * if it is still busy (submitted and never filled, or left behind by a
 * work request that named another range), failing any transfer on it, and
 * then another context may take it. Without the release the range would
 * stay busy until a device reset and every later context would find one
 * range fewer.
 */
void ibtca_dv_range_release(struct ibtca_ib *ib, u32 arr)
{
	struct ibtca_dev *idev = ib->idev;

	down_read(&idev->hw_sem);
	if (!READ_ONCE(idev->dead) && idev->win &&
	    ibtca_dv_arr_rd(idev, arr, IBTCA_ARR_CTRL) & IBTCA_ARR_BUSY)
		ibtca_wr(idev, IBTCA_REG_DRDMA_RELEASE, arr);
	up_read(&idev->hw_sem);
	clear_bit(arr, ib->drdma_held);
}
