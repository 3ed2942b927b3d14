// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: the port's P_Key table for the RDMA core. The table lives in the
 * device's port agent, which the subnet manager fills (SubnSet of
 * P_KeyTable). The driver keeps a copy, read with SMA_MAD Gets of the two
 * P_KeyTable blocks (a directed SMP of no hops, as the local SM's own
 * are) at registration and whenever the device sets
 * IBTCA_EVENT_PKEY_CHANGE; query_pkey answers from the copy, and a copy
 * that changed is IB_EVENT_PKEY_CHANGE to the core's clients (the core's
 * cache, IPoIB's child interfaces).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_smi.h>

#include "ibtca.h"
#include "ibtca_ib.h"

#define IBTCA_PKEY_BLOCK	32

/* Reads P_KeyTable block @block from the device's agent into @keys. */
static int ibtca_ib_pkey_block(struct ibtca_ib *ib, u32 block, u16 *keys)
{
	struct device *dev = &ib->idev->pdev->dev;
	struct ibtca_cmd_mad p = { };
	struct ib_smp *smp, *reply;
	u32 answered = 0;
	dma_addr_t dma;
	int ret, i;

	/* One buffer: the SMP, then the answer. */
	smp = dma_alloc_coherent(dev, 2 * sizeof(struct ib_mad), &dma,
				 GFP_KERNEL);
	if (!smp)
		return -ENOMEM;
	reply = (void *)smp + sizeof(struct ib_mad);
	smp->base_version = IB_MGMT_BASE_VERSION;
	smp->mgmt_class = IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE;
	smp->class_version = 1;
	smp->method = IB_MGMT_METHOD_GET;
	smp->attr_id = IB_SMP_ATTR_PKEY_TABLE;
	smp->attr_mod = cpu_to_be32(block);
	/* At the end of a path of no hops, as the MAD layer hands it on. */
	smp->hop_ptr = 1;
	smp->dr_slid = IB_LID_PERMISSIVE;
	smp->dr_dlid = IB_LID_PERMISSIVE;
	p.mad = cpu_to_le64(dma);
	p.reply = cpu_to_le64(dma + sizeof(struct ib_mad));
	ret = ibtca_ib_cmd(ib, IBTCA_CMD_SMA_MAD, &p, sizeof(p), &answered,
			   NULL);
	/* A directed reply carries the direction bit in its status. */
	if (!ret && (!answered || (reply->status & ~IB_SMP_DIRECTION)))
		ret = -EIO;
	if (!ret)
		for (i = 0; i < IBTCA_PKEY_BLOCK; i++)
			keys[i] = be16_to_cpu(((__be16 *)reply->data)[i]);
	dma_free_coherent(dev, 2 * sizeof(struct ib_mad), smp, dma);
	return ret;
}

/*
 * Reads the device's table into the copy; true if the copy changed. A
 * failed read leaves the copy as it was.
 */
bool ibtca_ib_pkeys_read(struct ibtca_ib *ib)
{
	u16 keys[IBTCA_PKEY_TABLE_LEN];
	bool changed;
	u32 b;

	for (b = 0; b < IBTCA_PKEY_TABLE_LEN / IBTCA_PKEY_BLOCK; b++)
		if (ibtca_ib_pkey_block(ib, b, keys + b * IBTCA_PKEY_BLOCK)) {
			dev_warn(&ib->idev->pdev->dev,
				 "P_Key table block %u unreadable\n", b);
			return false;
		}
	spin_lock(&ib->pkey_lock);
	changed = memcmp(ib->pkeys, keys, sizeof(keys));
	memcpy(ib->pkeys, keys, sizeof(keys));
	spin_unlock(&ib->pkey_lock);
	return changed;
}

int ibtca_ib_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			u16 *pkey)
{
	struct ibtca_ib *ib = to_ib(ibdev);

	if (port != IBTCA_IB_PORT || index >= IBTCA_PKEY_TABLE_LEN)
		return -EINVAL;
	spin_lock(&ib->pkey_lock);
	*pkey = ib->pkeys[index];
	spin_unlock(&ib->pkey_lock);
	return 0;
}

/* Called with @ib_lock held. */
void ibtca_ib_pkey_dispatch(struct ibtca_ib *ib)
{
	struct ib_event ev = {
		.device = &ib->ibdev,
		.event = IB_EVENT_PKEY_CHANGE,
		.element.port_num = IBTCA_IB_PORT,
	};

	ib_dispatch_event(&ev);
	dev_info(&ib->idev->pdev->dev, "%s: P_Key table changed\n",
		 dev_name(&ib->ibdev.dev));
}

/* IBTCA_EVENT_PKEY_CHANGE, from the port work. */
void ibtca_ib_pkey_event(struct ibtca_dev *idev)
{
	mutex_lock(&idev->ib_lock);
	if (idev->ib && ibtca_ib_pkeys_read(idev->ib))
		ibtca_ib_pkey_dispatch(idev->ib);
	mutex_unlock(&idev->ib_lock);
}
