// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: the verbs command queue. Commands are entries of a ring in coherent
 * memory; they complete with an interrupt on vector 0, polled as a fallback.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitops.h>
#include <linux/dma-mapping.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/string.h>

#include "ibtca.h"

#define IBTCA_CMDQ_LOG		6
#define IBTCA_CMD_TIMEOUT_MS	5000

int ibtca_cmdq_init(struct ibtca_dev *idev)
{
	size_t size = sizeof(struct ibtca_cmd) << IBTCA_CMDQ_LOG;

	idev->cmdq = dma_alloc_coherent(&idev->pdev->dev, size, &idev->cmdq_dma,
					GFP_KERNEL);
	if (!idev->cmdq)
		return -ENOMEM;
	/* Start from a device without objects: QP numbers are predictable. */
	ibtca_wr(idev, IBTCA_REG_RESET, IBTCA_RESET_VALUE);
	idev->cmd_pi = 0;
	ibtca_wr(idev, IBTCA_REG_CMDQ_BASE_LO, lower_32_bits(idev->cmdq_dma));
	ibtca_wr(idev, IBTCA_REG_CMDQ_BASE_HI, upper_32_bits(idev->cmdq_dma));
	ibtca_wr(idev, IBTCA_REG_CMDQ_LOG_SIZE, IBTCA_CMDQ_LOG);
	return 0;
}

void ibtca_cmdq_free(struct ibtca_dev *idev)
{
	size_t size = sizeof(struct ibtca_cmd) << IBTCA_CMDQ_LOG;

	if (idev->cmdq)
		dma_free_coherent(&idev->pdev->dev, size, idev->cmdq,
				  idev->cmdq_dma);
	idev->cmdq = NULL;
}

static bool ibtca_cmd_done(struct ibtca_cmd *c)
{
	return le16_to_cpu(READ_ONCE(c->status)) != IBTCA_CMD_ST_PENDING;
}

/*
 * Run one command and wait for it (interrupt on vector 0, polled every few
 * milliseconds in case the interrupt is lost). Returns 0, -ETIMEDOUT, or the
 * device's status as a negative errno. A query's reply (@reply_len bytes,
 * written by the device over the parameters) is copied to @reply. Called
 * with @hw_sem held.
 */
static int ibtca_cmd_run(struct ibtca_dev *idev, u8 opcode, const void *params,
			 size_t len, u32 *out0, u32 *out1, void *reply,
			 size_t reply_len)
{
	unsigned long deadline;
	struct ibtca_cmd *c;
	u16 st;
	int ret;

	if (len > sizeof(c->params) || reply_len > sizeof(c->params))
		return -EINVAL;
	mutex_lock(&idev->cmd_lock);
	c = &idev->cmdq[idev->cmd_pi & (BIT(IBTCA_CMDQ_LOG) - 1)];
	memset(c, 0, sizeof(*c));
	c->opcode = opcode;
	c->flags = IBTCA_CMD_F_IRQ;
	c->token = cpu_to_le32(idev->cmd_pi);
	if (len)
		memcpy(c->params, params, len);
	WRITE_ONCE(c->status, cpu_to_le16(IBTCA_CMD_ST_PENDING));
	idev->cmd_pi++;
	/* writel() orders the entry before the doorbell. */
	ibtca_wr(idev, IBTCA_REG_CMDQ_DB, idev->cmd_pi);

	deadline = jiffies + msecs_to_jiffies(IBTCA_CMD_TIMEOUT_MS);
	while (!ibtca_cmd_done(c)) {
		if (time_after(jiffies, deadline)) {
			dev_err(&idev->pdev->dev, "command 0x%02x timed out\n",
				opcode);
			ret = -ETIMEDOUT;
			goto out;
		}
		wait_event_timeout(idev->wq, ibtca_cmd_done(c),
				   msecs_to_jiffies(10));
	}
	/* Read the out-parameters after the status. */
	dma_rmb();
	st = le16_to_cpu(c->status);
	if (st == IBTCA_CMD_ST_OK) {
		if (out0)
			*out0 = le32_to_cpu(c->out0);
		if (out1)
			*out1 = le32_to_cpu(c->out1);
		if (reply_len)
			memcpy(reply, c->params, reply_len);
		ret = 0;
	} else {
		ret = st < MAX_ERRNO ? -(int)st : -EIO;
	}
out:
	mutex_unlock(&idev->cmd_lock);
	return ret;
}

int ibtca_cmd(struct ibtca_dev *idev, u8 opcode, const void *params,
	      size_t len, u32 *out0, u32 *out1)
{
	return ibtca_cmd_run(idev, opcode, params, len, out0, out1, NULL, 0);
}

/* A query (QUERY_DEVICE, QUERY_PORT): no parameters, @len bytes of reply. */
int ibtca_cmd_query(struct ibtca_dev *idev, u8 opcode, void *reply, size_t len)
{
	return ibtca_cmd_run(idev, opcode, NULL, 0, NULL, NULL, reply, len);
}

/* A query whose params byte 0 selects the reply (IBTCA_DEVICE_ATTR_EXT). */
int ibtca_cmd_query_sel(struct ibtca_dev *idev, u8 opcode, u8 sel, void *reply,
			size_t len)
{
	return ibtca_cmd_run(idev, opcode, &sel, sizeof(sel), NULL, NULL, reply,
			     len);
}

/* A query of one object (QUERY_QP): @len bytes of reply. */
int ibtca_cmd_query_handle(struct ibtca_dev *idev, u8 opcode, u32 handle,
			   u32 *out0, void *reply, size_t len)
{
	struct ibtca_cmd_handle p = { .handle = cpu_to_le32(handle) };

	return ibtca_cmd_run(idev, opcode, &p, sizeof(p), out0, NULL, reply,
			     len);
}

int ibtca_cmd_handle(struct ibtca_dev *idev, u8 opcode, u32 handle)
{
	struct ibtca_cmd_handle p = { .handle = cpu_to_le32(handle) };

	return ibtca_cmd(idev, opcode, &p, sizeof(p), NULL, NULL);
}
