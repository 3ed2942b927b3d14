// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: seed 002's per-QP choices, the MSN start and the ACK policy
 * (struct ibtca_modify_qp_cmd, ibtca_uverbs_abi.h). A user QP's come as
 * ibv_modify_qp's driver data on the modify that carries them; a kernel
 * consumer's are stored by ibtca_qp_set_options() and go with the QP's
 * next modify from INIT to RTR or RTR to RTS. Either way they become the
 * device MODIFY_QP's IBTCA_QP_ATTR_MSN and IBTCA_QP_ATTR_ACK_POLICY, which
 * the device takes only on those two transitions of an RC QP.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/export.h>
#include <linux/module.h>
#include <linux/stddef.h>
#include <rdma/ib_verbs.h>

#include "ibtca_ib.h"
#include "ibtca_qp_options.h"

#define IBTCA_QP_OPTIONS_KNOWN	(IBTCA_MODIFY_QP_MSN | IBTCA_MODIFY_QP_ACK_POLICY)
#define IBTCA_QP_OPTIONS_MAX_MSN	0xffffff

/*
 * Checks @o, of which the first @len bytes were given: known comp_mask
 * bits whose fields lie within @len, values the device takes, every field
 * comp_mask does not select and the reserved ones 0.
 */
static int ibtca_qp_options_check(const struct ibtca_modify_qp_cmd *o,
				  size_t len)
{
	bool msn = o->comp_mask & IBTCA_MODIFY_QP_MSN;
	bool ack = o->comp_mask & IBTCA_MODIFY_QP_ACK_POLICY;

	if (o->comp_mask & ~IBTCA_QP_OPTIONS_KNOWN)
		return -EINVAL;
	if (o->reserved8 || o->reserved16)
		return -EINVAL;
	if (msn && (len < offsetofend(struct ibtca_modify_qp_cmd, initial_msn) ||
		    o->initial_msn > IBTCA_QP_OPTIONS_MAX_MSN))
		return -EINVAL;
	if (!msn && o->initial_msn)
		return -EINVAL;
	if (!ack)
		return o->ack_every || o->window || o->ack_mode ? -EINVAL : 0;
	if (len < offsetofend(struct ibtca_modify_qp_cmd, ack_mode))
		return -EINVAL;
	switch (o->ack_mode) {
	case IBTCA_ACK_PER_MESSAGE:
	case IBTCA_ACK_PER_PACKET:
		if (o->ack_every)
			return -EINVAL;
		break;
	case IBTCA_ACK_COALESCED:
		if (!o->ack_every)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	return o->window > IBTCA_MODIFY_QP_MAX_WINDOW ? -EINVAL : 0;
}

/*
 * Reads modify_qp's driver data from @udata into @o (all 0 without any):
 * a shorter structure has the rest 0, a longer one must have its extra
 * bytes 0 (-EOPNOTSUPP otherwise); modify_qp has no driver response.
 */
int ibtca_qp_options_from_udata(struct ib_udata *udata,
				struct ibtca_modify_qp_cmd *o)
{
	size_t len;
	int ret;

	memset(o, 0, sizeof(*o));
	if (!udata)
		return 0;
	if (udata->outlen)
		return -EINVAL;
	if (!udata->inlen)
		return 0;
	len = min_t(size_t, udata->inlen, sizeof(*o));
	if (udata->inlen > sizeof(*o) &&
	    !ib_is_udata_cleared(udata, sizeof(*o), udata->inlen - sizeof(*o)))
		return -EOPNOTSUPP;
	ret = ib_copy_from_udata(o, udata, len);
	if (ret)
		return ret;
	return ibtca_qp_options_check(o, len);
}

/*
 * Adds to @p, the device's MODIFY_QP of @qp from @cur to @to, the choices
 * of @user (this modify's driver data) or else those a kernel consumer
 * stored. The device takes them only from INIT to RTR and RTR to RTS of
 * an RC QP: a user's on another modify is -EINVAL; a kernel consumer's
 * wait for the next such modify.
 */
int ibtca_qp_options_apply(struct ibtca_ib_qp *qp,
			   struct ibtca_cmd_modify_qp *p,
			   const struct ibtca_modify_qp_cmd *user,
			   enum ib_qp_state cur, enum ib_qp_state to)
{
	const struct ibtca_modify_qp_cmd *o =
		user->comp_mask ? user : &qp->options;
	bool takes = qp->ibqp.qp_type == IB_QPT_RC &&
		     ((cur == IB_QPS_INIT && to == IB_QPS_RTR) ||
		      (cur == IB_QPS_RTR && to == IB_QPS_RTS));
	u32 m = 0;

	if (!o->comp_mask)
		return 0;
	if (!takes)
		return o == user ? -EINVAL : 0;
	if (o->comp_mask & IBTCA_MODIFY_QP_MSN) {
		m |= IBTCA_QP_ATTR_MSN;
		p->initial_msn = cpu_to_le32(o->initial_msn);
	}
	if (o->comp_mask & IBTCA_MODIFY_QP_ACK_POLICY) {
		m |= IBTCA_QP_ATTR_ACK_POLICY;
		p->ack_mode = o->ack_mode;
		p->ack_every = cpu_to_le16(o->ack_every);
		p->window = cpu_to_le16(o->window);
	}
	p->attr_mask |= cpu_to_le32(m);
	return 0;
}

/* After the device took @p: a kernel consumer's choices were sent. */
void ibtca_qp_options_sent(struct ibtca_ib_qp *qp,
			   const struct ibtca_cmd_modify_qp *p)
{
	if (p->attr_mask & cpu_to_le32(IBTCA_QP_ATTR_MSN |
				       IBTCA_QP_ATTR_ACK_POLICY))
		memset(&qp->options, 0, sizeof(qp->options));
}

int ibtca_qp_set_options(struct ib_qp *ibqp,
			 const struct ibtca_modify_qp_cmd *o)
{
	struct ibtca_ib_qp *qp;
	int ret;

	/* Only this module registers devices with its ops (ibtca_ib.c). */
	if (ibqp->device->ops.owner != THIS_MODULE ||
	    ibqp->qp_type != IB_QPT_RC)
		return -EOPNOTSUPP;
	ret = ibtca_qp_options_check(o, sizeof(*o));
	if (ret)
		return ret;
	qp = to_qp(ibqp);
	mutex_lock(&qp->modify_lock);
	qp->options = *o;
	mutex_unlock(&qp->modify_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(ibtca_qp_set_options);
