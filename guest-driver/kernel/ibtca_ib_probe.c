// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: the driver's answers to kernel tests (ibtca_ib_probe.h): the
 * device's count of trapped doorbells and a kernel QP's doorbell-record
 * awake words, so a test proves that posting while the device is awake
 * rings nothing.
 */
#include <linux/export.h>
#include <linux/io.h>

#include "ibtca_ib.h"
#include "ibtca_ib_probe.h"

static bool ibtca_ib_is_ours(struct ib_device *ibdev)
{
	return ibdev->ops.post_send == ibtca_ib_post_send;
}

u32 ibtca_ib_doorbells(struct ib_device *ibdev)
{
	if (!ibtca_ib_is_ours(ibdev))
		return 0;
	return readl(to_ib(ibdev)->idev->regs + IBTCA_REG_DOORBELLS);
}
EXPORT_SYMBOL_GPL(ibtca_ib_doorbells);

int ibtca_ib_qp_awake(struct ib_qp *ibqp, bool *sq, bool *rq)
{
	struct ibtca_db_record *rec;

	if (!ibtca_ib_is_ours(ibqp->device))
		return -ENOENT;
	rec = to_qp(ibqp)->r.rec;
	if (!rec)
		return -ENOENT;
	*sq = READ_ONCE(rec->sq_awake) != 0;
	*rq = READ_ONCE(rec->rq_awake) != 0;
	return 0;
}
EXPORT_SYMBOL_GPL(ibtca_ib_qp_awake);
