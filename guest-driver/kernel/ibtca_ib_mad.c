// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: process_mad. The port's subnet management agent lives in the
 * device (like an HCA's firmware), which answers the SMPs that reach the
 * port over the link itself. The MAD layer calls process_mad for the SMPs
 * the local SM sends to its own port (directed route of no hops, or a
 * response returning to it): those go to the device's agent with the
 * SMA_MAD command, and its answer, if any, is the reply. A MAD the device
 * received (in_grh given) was seen by the device already and goes on to
 * the MAD layer's agents unchanged; so does everything but an SMP.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <rdma/ib_mad.h>

#include "ibtca.h"
#include "ibtca_ib.h"

int ibtca_ib_process_mad(struct ib_device *ibdev, int flags, u32 port,
			 const struct ib_wc *in_wc, const struct ib_grh *in_grh,
			 const struct ib_mad *in, struct ib_mad *out,
			 size_t *out_size, u16 *out_pkey_index)
{
	struct ibtca_ib *ib = to_ib(ibdev);
	struct device *dev = &ib->idev->pdev->dev;
	struct ibtca_cmd_mad p = { };
	u8 mgmt_class = in->mad_hdr.mgmt_class;
	dma_addr_t dma;
	u32 answered = 0;
	void *buf;
	int ret;

	if (in_grh || port != IBTCA_IB_PORT ||
	    (mgmt_class != IB_MGMT_CLASS_SUBN_LID_ROUTED &&
	     mgmt_class != IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE))
		return IB_MAD_RESULT_SUCCESS;
	/* One buffer: the SMP, then the answer. */
	buf = dma_alloc_coherent(dev, 2 * sizeof(*in), &dma, GFP_KERNEL);
	if (!buf)
		return IB_MAD_RESULT_FAILURE;
	memcpy(buf, in, sizeof(*in));
	p.mad = cpu_to_le64(dma);
	p.reply = cpu_to_le64(dma + sizeof(*in));
	ret = ibtca_ib_cmd(ib, IBTCA_CMD_SMA_MAD, &p, sizeof(p), &answered,
			   NULL);
	if (!ret && answered) {
		memcpy(out, buf + sizeof(*in), sizeof(*out));
		*out_size = sizeof(*out);
		*out_pkey_index = 0;
	}
	dma_free_coherent(dev, 2 * sizeof(*in), buf, dma);
	if (ret)
		return IB_MAD_RESULT_FAILURE;
	return answered ? IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY :
			  IB_MAD_RESULT_SUCCESS;
}
