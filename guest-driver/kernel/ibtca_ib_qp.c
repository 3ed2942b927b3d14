// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: kernel QPs. RC and UD QPs, and the MAD layer's QP0 and QP1, are
 * device QPs (rings from ibtca_ring.c; QP0/QP1 as the device's SMI and
 * GSI QPs, one each, reported to the core as QP numbers 0 and 1);
 * modify_qp turns the IB attributes into the device's MODIFY_QP and refuses
 * with -EINVAL what the device cannot do (SQD, alternate paths, GRH on
 * RC, a P_Key index past the port's table or a port other than the one
 * there is, out-of-range values).
 * Seed 002's MSN start and ACK policy come with it (ibtca_qp_options.c).
 * The current state is the device's (QUERY_QP): an error completion or a
 * responder error moves a QP to ERR without a modify, a UD QP's failed
 * send moves it to SQE, and query_qp and modify_qp's transition check see
 * it (IPoIB's and the MAD layer's SQE -> RTS recovery works from there).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/log2.h>
#include <linux/slab.h>

#include "ibtca_ib.h"
#include "ibtca_wqe.h"

/* The device's QP states are the core's. */
static_assert(IBTCA_QPS_RESET == IB_QPS_RESET);
static_assert(IBTCA_QPS_INIT == IB_QPS_INIT);
static_assert(IBTCA_QPS_RTR == IB_QPS_RTR);
static_assert(IBTCA_QPS_RTS == IB_QPS_RTS);
static_assert(IBTCA_QPS_SQE == IB_QPS_SQE);
static_assert(IBTCA_QPS_ERR == IB_QPS_ERR);

/* The attributes modify_qp knows; any other bit is refused. */
#define IBTCA_IB_QP_PATH_MASK	(IB_QP_AV | IB_QP_PATH_MTU)
#define IBTCA_IB_QP_RETRY_MASK	(IB_QP_TIMEOUT | IB_QP_RETRY_CNT | \
				 IB_QP_RNR_RETRY | IB_QP_MIN_RNR_TIMER | \
				 IB_QP_MAX_QP_RD_ATOMIC)
#define IBTCA_IB_QP_KNOWN	(IB_QP_STATE | IB_QP_CUR_STATE | \
				 IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX | \
				 IB_QP_PORT | IB_QP_QKEY | IB_QP_DEST_QPN | \
				 IB_QP_RQ_PSN | IB_QP_SQ_PSN | \
				 IB_QP_MAX_DEST_RD_ATOMIC | \
				 IBTCA_IB_QP_PATH_MASK | IBTCA_IB_QP_RETRY_MASK)
#define IBTCA_IB_PSN_MASK	0xffffff
#define IBTCA_IB_MAX_SL		14

static u8 ibtca_ib_qpt(enum ib_qp_type t)
{
	switch (t) {
	case IB_QPT_UD:
		return IBTCA_QPT_UD;
	case IB_QPT_SMI:
		return IBTCA_QPT_SMI;
	case IB_QPT_GSI:
		return IBTCA_QPT_GSI;
	default:
		return IBTCA_QPT_RC;
	}
}

static int ibtca_ib_create_rc(struct ibtca_ib *ib, struct ibtca_ib_qp *qp,
			      struct ib_qp_init_attr *init,
			      struct ib_udata *udata, bool strides)
{
	/* On an SRQ, the receives are the SRQ's. */
	u32 recv_wr = init->srq ? 0 : init->cap.max_recv_wr;
	u32 srqn = init->srq ? to_srq(init->srq)->srqn : 0;
	u32 wr = max3(init->cap.max_send_wr, recv_wr, 1U);
	/* The quasi-WQE ring holds the inbound READs the responder allows. */
	u32 rd_log = order_base_2(max_t(u32, ib->attr.max_qp_rd_atom, 2));
	u32 log = max_t(u32, order_base_2(wr), rd_log);
	/* A kernel QP's rings are sized each on its own. */
	struct ibtca_qp_logs logs = {
		.sq = max_t(u32, order_base_2(init->cap.max_send_wr), 1),
		.rq = max_t(u32, order_base_2(recv_wr), 1),
		.quasi = rd_log,
		/* Receive WQEs as large as the SGEs asked for need. */
		.rq_stride = init->srq ? 0 :
			     ibtca_recv_log_stride(init->cap.max_recv_sge),
		/* Send WQEs likewise. */
		.sq_stride = ibtca_send_log_stride(init->cap.max_send_sge),
	};
	int ret;

	if (BIT(log) > le32_to_cpu(ib->attr.max_qp_wr))
		return -EINVAL;
	if (udata && init->qp_type != IB_QPT_RC && init->qp_type != IB_QPT_UD)
		return -EOPNOTSUPP;
	if (udata) {
		/*
		 * A user context's: the provider keeps its send slots, every
		 * ring of 2^log, the strides 128 bytes unless it lays out more.
		 */
		struct ibtca_qp_logs ulogs = {
			.sq = log, .rq = log, .quasi = log,
			.rq_stride = strides ? logs.rq_stride : 0,
			.sq_stride = strides ? logs.sq_stride :
				     IBTCA_RECV_LOG_STRIDE,
		};

		ret = ibtca_ib_create_urc(ib, qp, init, &ulogs, udata);
		if (ret)
			return ret;
		goto caps;
	}
	qp->swr = kcalloc(BIT(logs.sq), sizeof(*qp->swr), GFP_KERNEL);
	if (!qp->swr)
		return -ENOMEM;
	ret = ibtca_ib_hw_begin(ib);
	if (ret)
		goto err;
	ret = ibtca_qp_ring_create_sized(ib->idev, &qp->r,
					 to_pd(qp->ibqp.pd)->pdn,
					 to_cq(init->send_cq)->r.cqn,
					 to_cq(init->recv_cq)->r.cqn, &logs, 0, srqn,
					 ibtca_ib_qpt(init->qp_type));
	/* Without a record the QP works with doorbells alone. */
	if (!ret && ibtca_qp_ring_bind_record(ib->idev, &qp->r))
		dev_dbg(&ib->idev->pdev->dev, "QP %u: no doorbell record\n",
			qp->r.qpn);
	ibtca_ib_hw_end(ib);
	if (ret)
		goto err;
	ret = xa_insert_irq(&ib->qps, qp->r.qpn, qp, GFP_KERNEL);
	if (ret) {
		ibtca_ib_cmd_handle(ib, IBTCA_CMD_DESTROY_QP, qp->r.qpn);
		ibtca_qp_ring_free(ib->idev, &qp->r);
		goto err;
	}
caps:
	qp->ibqp.qp_num = qp->r.qpn;
	if (init->qp_type == IB_QPT_SMI || init->qp_type == IB_QPT_GSI)
		qp->ibqp.qp_num = init->qp_type == IB_QPT_SMI ? 0 : 1;
	init->cap.max_send_wr = BIT(qp->r.log);
	init->cap.max_recv_wr = init->srq ? 0 : BIT(qp->r.rq_log);
	/* What the strides hold (a user QP's: the provider's). */
	init->cap.max_send_sge = ibtca_send_stride_sges(qp->r.log_stride);
	init->cap.max_recv_sge = init->srq ? 0 :
		ibtca_recv_stride_sges(qp->r.rq_log_stride);
	/*
	 * Only an RC WQE carries inline data; a datagram WQE has an address
	 * vector there. A datagram QP asked for some (up to the RC limit, so
	 * that attributes copied from an RC QP still create one) says none.
	 */
	init->cap.max_inline_data = init->qp_type == IB_QPT_RC ?
				    IBTCA_MAX_INLINE_DATA : 0;
	return 0;
err:
	kfree(qp->swr);
	return ret;
}

int ibtca_ib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		       struct ib_udata *udata)
{
	struct ibtca_ib_qp *qp = to_qp(ibqp);
	struct ibtca_ib *ib = to_ib(ibqp->device);
	u32 max_wr = le32_to_cpu(ib->attr.max_qp_wr);
	u32 send_sge = ib->attr.max_sge, recv_sge = ib->max_recv_sge;
	int strides = 0, ret;

	/* A user QP's provider may lay out 128-byte WQEs only. */
	if (udata) {
		strides = ibtca_ib_ureq_flags(udata, IBTCA_UQP_REQ_STRIDES);
		if (strides < 0)
			return strides;
		send_sge = strides ? ib->max_send_sge : IBTCA_WQE_SGES;
		recv_sge = strides ? ib->max_recv_sge : IBTCA_WQE_SGES;
	}
	if (init->create_flags ||
	    init->cap.max_inline_data > IBTCA_MAX_INLINE_DATA ||
	    init->cap.max_send_wr > max_wr ||
	    init->cap.max_send_sge > send_sge ||
	    (!init->srq && (init->cap.max_recv_wr > max_wr ||
			    init->cap.max_recv_sge > recv_sge)))
		return -EINVAL;
	if (init->srq && init->qp_type != IB_QPT_RC)
		return -EOPNOTSUPP;
	mutex_init(&qp->modify_lock);
	spin_lock_init(&qp->sq_lock);
	spin_lock_init(&qp->rq_lock);
	switch (init->qp_type) {
	case IB_QPT_SMI:
	case IB_QPT_GSI:
		if (init->port_num != IBTCA_IB_PORT)
			return -EINVAL;
		fallthrough;
	case IB_QPT_RC:
	case IB_QPT_UD:
		ret = ibtca_ib_create_rc(ib, qp, init, udata, strides);
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (ret)
		return ret;
	qp->attr.qp_state = IB_QPS_RESET;
	qp->attr.port_num = IBTCA_IB_PORT;
	qp->cap = init->cap;
	qp->sq_sig_type = init->sq_sig_type;
	return 0;
}

/* Checks the IB attributes @mask selects and merges them into @next. */
static int ibtca_ib_qp_attr_merge(struct ibtca_ib *ib, struct ib_qp_attr *next,
				  const struct ib_qp_attr *a, int mask)
{
	const struct ibtca_device_attr *d = &ib->attr;

	if (mask & ~IBTCA_IB_QP_KNOWN)
		return -EINVAL;
	if (mask & IB_QP_STATE) {
		if (a->qp_state != IB_QPS_RESET && a->qp_state != IB_QPS_INIT &&
		    a->qp_state != IB_QPS_RTR && a->qp_state != IB_QPS_RTS &&
		    a->qp_state != IB_QPS_ERR)
			return -EINVAL;
		next->qp_state = a->qp_state;
	}
	if (mask & IB_QP_PKEY_INDEX) {
		if (a->pkey_index >= IBTCA_PKEY_TABLE_LEN)
			return -EINVAL;
		next->pkey_index = a->pkey_index;
	}
	if ((mask & IB_QP_PORT) && a->port_num != IBTCA_IB_PORT)
		return -EINVAL;
	if (mask & IB_QP_QKEY)
		next->qkey = a->qkey;
	if (mask & IB_QP_ACCESS_FLAGS) {
		if (a->qp_access_flags & ~(IB_ACCESS_LOCAL_WRITE |
					   IB_ACCESS_REMOTE_WRITE |
					   IB_ACCESS_REMOTE_READ |
					   IB_ACCESS_REMOTE_ATOMIC))
			return -EINVAL;
		next->qp_access_flags = a->qp_access_flags;
	}
	if (mask & IB_QP_PATH_MTU) {
		if (a->path_mtu < IB_MTU_256 || a->path_mtu > d->max_mtu)
			return -EINVAL;
		next->path_mtu = a->path_mtu;
	}
	if (mask & IB_QP_AV) {
		const struct rdma_ah_attr *ah = &a->ah_attr;

		if (ah->type != RDMA_AH_ATTR_TYPE_IB ||
		    (rdma_ah_get_ah_flags(ah) & IB_AH_GRH) ||
		    rdma_ah_get_port_num(ah) != IBTCA_IB_PORT ||
		    rdma_ah_get_sl(ah) > IBTCA_IB_MAX_SL ||
		    !rdma_ah_get_dlid(ah) ||
		    rdma_ah_get_dlid(ah) >= be16_to_cpu(IB_MULTICAST_LID_BASE))
			return -EINVAL;
		next->ah_attr = *ah;
	}
	if (mask & IB_QP_DEST_QPN) {
		if (a->dest_qp_num > IBTCA_IB_PSN_MASK)
			return -EINVAL;
		next->dest_qp_num = a->dest_qp_num;
	}
	if (mask & IB_QP_RQ_PSN)
		next->rq_psn = a->rq_psn & IBTCA_IB_PSN_MASK;
	if (mask & IB_QP_SQ_PSN)
		next->sq_psn = a->sq_psn & IBTCA_IB_PSN_MASK;
	if (mask & IB_QP_TIMEOUT) {
		if (a->timeout > 31)
			return -EINVAL;
		next->timeout = a->timeout;
	}
	if (mask & IB_QP_RETRY_CNT) {
		if (a->retry_cnt > 7)
			return -EINVAL;
		next->retry_cnt = a->retry_cnt;
	}
	if (mask & IB_QP_RNR_RETRY) {
		if (a->rnr_retry > 7)
			return -EINVAL;
		next->rnr_retry = a->rnr_retry;
	}
	if (mask & IB_QP_MIN_RNR_TIMER) {
		if (a->min_rnr_timer > 31)
			return -EINVAL;
		next->min_rnr_timer = a->min_rnr_timer;
	}
	/* The initiator depth: the requester holds no resource per READ. */
	if (mask & IB_QP_MAX_QP_RD_ATOMIC) {
		if (a->max_rd_atomic > ib->max_qp_init_rd_atom)
			return -EINVAL;
		next->max_rd_atomic = a->max_rd_atomic;
	}
	/* The responder resources: the device NAKs a READ or atomic past them. */
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC) {
		if (a->max_dest_rd_atomic > d->max_qp_rd_atom)
			return -EINVAL;
		next->max_dest_rd_atomic = a->max_dest_rd_atomic;
	}
	return 0;
}

/* The device's MODIFY_QP for the IB attributes @mask selects, from @n. */
static void ibtca_ib_qp_cmd(struct ibtca_cmd_modify_qp *p, u32 qpn,
			    const struct ib_qp_attr *n, int mask)
{
	u32 m = 0;

	memset(p, 0, sizeof(*p));
	p->qpn = cpu_to_le32(qpn);
	if (mask & IB_QP_STATE) {
		m |= IBTCA_QP_ATTR_STATE;
		p->state = n->qp_state;
	}
	if (mask & IB_QP_ACCESS_FLAGS) {
		m |= IBTCA_QP_ATTR_ACCESS;
		/* Only the remote rights concern the responder. */
		p->access = cpu_to_le32(ibtca_ib_access(n->qp_access_flags &
							~IB_ACCESS_LOCAL_WRITE));
	}
	/* The device takes the path and the retry set whole. */
	if (mask & IBTCA_IB_QP_PATH_MASK) {
		m |= IBTCA_QP_ATTR_PATH;
		p->path_mtu = n->path_mtu;
		p->dlid = cpu_to_le16(rdma_ah_get_dlid(&n->ah_attr));
		p->sl = rdma_ah_get_sl(&n->ah_attr);
	}
	if (mask & IB_QP_DEST_QPN) {
		m |= IBTCA_QP_ATTR_DEST_QPN;
		p->dest_qpn = cpu_to_le32(n->dest_qp_num);
	}
	if (mask & IB_QP_RQ_PSN) {
		m |= IBTCA_QP_ATTR_RQ_PSN;
		p->rq_psn = cpu_to_le32(n->rq_psn);
	}
	if (mask & IB_QP_SQ_PSN) {
		m |= IBTCA_QP_ATTR_SQ_PSN;
		p->sq_psn = cpu_to_le32(n->sq_psn);
	}
	if (mask & IB_QP_PKEY_INDEX) {
		m |= IBTCA_QP_ATTR_PKEY_INDEX;
		p->pkey_index = cpu_to_le16(n->pkey_index);
	}
	/* A datagram QP has no access rights: its Q_Key travels in access. */
	if (mask & IB_QP_QKEY) {
		m |= IBTCA_QP_ATTR_QKEY;
		p->access = cpu_to_le32(n->qkey);
	}
	if (mask & IBTCA_IB_QP_RETRY_MASK) {
		m |= IBTCA_QP_ATTR_RETRY;
		p->timeout = n->timeout;
		p->retry_cnt = n->retry_cnt;
		p->rnr_retry = n->rnr_retry;
		p->min_rnr_timer = n->min_rnr_timer;
		p->max_rd_atomic = n->max_rd_atomic;
	}
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC) {
		m |= IBTCA_QP_ATTR_DEST_RD_ATOMIC;
		p->max_dest_rd_atomic = n->max_dest_rd_atomic;
	}
	p->attr_mask = cpu_to_le32(m);
}

/*
 * The device's QUERY_QP of @qp: its state is the current one, ERR after
 * an error completion or a responder error the driver was not told of
 * otherwise, SQE after a UD QP's failed send.
 */
static int ibtca_ib_qp_query_dev(struct ibtca_ib *ib, struct ibtca_ib_qp *qp,
				 struct ibtca_qp_attr *a)
{
	int ret = ibtca_ib_hw_begin(ib);

	if (ret)
		return ret;
	ret = ibtca_cmd_query_handle(ib->idev, IBTCA_CMD_QUERY_QP, qp->r.qpn,
				     NULL, a, sizeof(*a));
	ibtca_ib_hw_end(ib);
	if (!ret && a->state != IBTCA_QPS_RESET && a->state != IBTCA_QPS_INIT &&
	    a->state != IBTCA_QPS_RTR && a->state != IBTCA_QPS_RTS &&
	    a->state != IBTCA_QPS_SQE && a->state != IBTCA_QPS_ERR)
		ret = -EIO;
	return ret;
}

int ibtca_ib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		       struct ib_udata *udata)
{
	struct ibtca_ib_qp *qp = to_qp(ibqp);
	struct ibtca_ib *ib = to_ib(ibqp->device);
	struct ibtca_modify_qp_cmd options;
	struct ibtca_cmd_modify_qp p;
	struct ibtca_qp_attr dev;
	enum ib_qp_state cur;
	struct ib_qp_attr next;
	int ret;

	/* Seed 002's MSN start and ACK policy (ibtca_qp_options.c). */
	ret = ibtca_qp_options_from_udata(udata, &options);
	if (ret)
		return ret;
	mutex_lock(&qp->modify_lock);
	/* The device may have moved the QP to ERR since the last modify. */
	ret = ibtca_ib_qp_query_dev(ib, qp, &dev);
	if (ret)
		goto out;
	cur = dev.state;
	qp->attr.qp_state = cur;
	if ((mask & IB_QP_CUR_STATE) && attr->cur_qp_state != cur) {
		ret = -EINVAL;
		goto out;
	}
	if (!ib_modify_qp_is_ok(cur, mask & IB_QP_STATE ? attr->qp_state : cur,
				ibqp->qp_type, mask)) {
		ret = -EINVAL;
		goto out;
	}
	next = qp->attr;
	ret = ibtca_ib_qp_attr_merge(ib, &next, attr, mask);
	if (ret)
		goto out;
	ibtca_ib_qp_cmd(&p, qp->r.qpn, &next, mask);
	ret = ibtca_qp_options_apply(qp, &p, &options, cur, next.qp_state);
	if (ret)
		goto out;
	ret = ibtca_ib_cmd(ib, IBTCA_CMD_MODIFY_QP, &p, sizeof(p), NULL, NULL);
	if (ret) {
		/* The device's Invalid is the core's -EINVAL. */
		goto out;
	}
	ibtca_qp_options_sent(qp, &p);
	if (next.qp_state == IB_QPS_RESET && (mask & IB_QP_STATE)) {
		unsigned long f1, f2;

		spin_lock_irqsave(&qp->sq_lock, f1);
		spin_lock_irqsave(&qp->rq_lock, f2);
		ibtca_qp_ring_reset(&qp->r);
		spin_unlock_irqrestore(&qp->rq_lock, f2);
		spin_unlock_irqrestore(&qp->sq_lock, f1);
	}
	qp->dlid = rdma_ah_get_dlid(&next.ah_attr);
	qp->attr = next;
out:
	mutex_unlock(&qp->modify_lock);
	return ret;
}

int ibtca_ib_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		      struct ib_qp_init_attr *init)
{
	struct ibtca_ib_qp *qp = to_qp(ibqp);
	struct ibtca_qp_attr dev;
	int ret;

	mutex_lock(&qp->modify_lock);
	ret = ibtca_ib_qp_query_dev(to_ib(ibqp->device), qp, &dev);
	if (!ret) {
		qp->attr.qp_state = dev.state;
		*attr = qp->attr;
	}
	mutex_unlock(&qp->modify_lock);
	if (ret)
		return ret;
	/* State and PSNs are the device's; the rest is what modify set. */
	attr->cur_qp_state = attr->qp_state;
	attr->sq_psn = le32_to_cpu(dev.sq_psn);
	attr->rq_psn = le32_to_cpu(dev.rq_psn);
	attr->cap = qp->cap;
	attr->path_mig_state = IB_MIG_MIGRATED;
	memset(init, 0, sizeof(*init));
	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_type;
	init->port_num = IBTCA_IB_PORT;
	return 0;
}

int ibtca_ib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct ibtca_ib_qp *qp = to_qp(ibqp);
	struct ibtca_ib *ib = to_ib(ibqp->device);
	unsigned long flags;
	int ret;

	ret = ibtca_ib_cmd_handle(ib, IBTCA_CMD_DESTROY_QP, qp->r.qpn);
	xa_erase_irq(&ib->qps, qp->r.qpn);
	/* A poller that found the QP before the erase is done with it. */
	spin_lock_irqsave(&to_cq(ibqp->send_cq)->lock, flags);
	spin_unlock_irqrestore(&to_cq(ibqp->send_cq)->lock, flags);
	spin_lock_irqsave(&to_cq(ibqp->recv_cq)->lock, flags);
	spin_unlock_irqrestore(&to_cq(ibqp->recv_cq)->lock, flags);
	/* A device that is gone was reset and forgot the QP. */
	if (qp->user_ring)
		ibtca_ib_destroy_uqp_ring(ib, qp, ret);
	else if (ret && ret != -ENODEV)
		dev_warn(&ib->idev->pdev->dev,
			 "device refused to destroy QP %u (%d): rings leaked\n",
			 qp->r.qpn, ret);
	else
		ibtca_qp_ring_free(ib->idev, &qp->r);
	kfree(qp->swr);
	return 0;
}
