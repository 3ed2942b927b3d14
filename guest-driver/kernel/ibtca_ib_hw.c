// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: device access on behalf of the RDMA core, for every verb of the
 * ib_device (ibtca_ib*.c, ibtca_uctx.c): hw_sem held around a command or a
 * register access while the device is there, and the device's numbers for
 * a PD and for the core's access flags. It sits below ibtca_ib.c, whose
 * ib_device_ops names the verbs that call it.
 */
#include <rdma/ib_verbs.h>

#include "ibtca_ib.h"
#include "ibtca_ib_mr.h"

/*
 * Device access on behalf of the core: holds hw_sem for reading unless the
 * device is gone (-ENODEV).
 */
int ibtca_ib_hw_begin(struct ibtca_ib *ib)
{
	down_read(&ib->idev->hw_sem);
	if (READ_ONCE(ib->idev->dead)) {
		up_read(&ib->idev->hw_sem);
		return -ENODEV;
	}
	return 0;
}

void ibtca_ib_hw_end(struct ibtca_ib *ib)
{
	up_read(&ib->idev->hw_sem);
}

/* A command on behalf of the core: -ENODEV once the device is gone. */
int ibtca_ib_cmd(struct ibtca_ib *ib, u8 opcode, const void *params,
		 size_t len, u32 *out0, u32 *out1)
{
	int ret = ibtca_ib_hw_begin(ib);

	if (ret)
		return ret;
	ret = ibtca_cmd(ib->idev, opcode, params, len, out0, out1);
	ibtca_ib_hw_end(ib);
	return ret;
}

int ibtca_ib_cmd_handle(struct ibtca_ib *ib, u8 opcode, u32 handle)
{
	struct ibtca_cmd_handle p = { .handle = cpu_to_le32(handle) };

	return ibtca_ib_cmd(ib, opcode, &p, sizeof(p), NULL, NULL);
}

/* For ibtca_ib_mr.c: a command on behalf of the core, a PD's number. */
int ibtca_ib_command(struct ib_device *ibdev, u8 opcode, const void *params,
		     size_t len, u32 *out0, u32 *out1)
{
	return ibtca_ib_cmd(to_ib(ibdev), opcode, params, len, out0, out1);
}

u32 ibtca_ib_pdn(struct ib_pd *ibpd)
{
	return to_pd(ibpd)->pdn;
}

u32 ibtca_ib_access(int acc)
{
	u32 a = 0;

	if (acc & IB_ACCESS_LOCAL_WRITE)
		a |= IBTCA_ACCESS_LOCAL_WRITE;
	if (acc & IB_ACCESS_REMOTE_WRITE)
		a |= IBTCA_ACCESS_REMOTE_WRITE;
	if (acc & IB_ACCESS_REMOTE_READ)
		a |= IBTCA_ACCESS_REMOTE_READ;
	if (acc & IB_ACCESS_REMOTE_ATOMIC)
		a |= IBTCA_ACCESS_REMOTE_ATOMIC;
	if (acc & IB_ACCESS_MW_BIND)
		a |= IBTCA_ACCESS_MW_BIND;
	return a;
}
