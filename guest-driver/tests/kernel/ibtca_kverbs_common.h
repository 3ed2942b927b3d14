/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the kernel verbs test modules share (each includes this once): the
 * "TAG <check> PASS|FAIL ..." console lines the host tests parse, with
 * their tally, an ib_client that finds ibtca's RDMA device and runs the
 * module's checks on it while the module loads, and the steps they all
 * take: a DMA MR, connecting an RC QP, polling a CQ, a loopback pair.
 */
#ifndef _IBTCA_KVERBS_COMMON_H
#define _IBTCA_KVERBS_COMMON_H

#include <linux/delay.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/printk.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <rdma/ib_verbs.h>

/* A module's checks so far, printed under @tag. */
struct kvc_tally {
	const char *tag;
	int passed, failed;
};

/* Prints one check's line and counts it; returns @ok. */
static __printf(4, 5) bool kvc_check(struct kvc_tally *t, bool ok,
				      const char *name, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("%s %s %s %pV\n", t->tag, name, ok ? "PASS" : "FAIL", &vaf);
	va_end(args);
	if (ok)
		t->passed++;
	else
		t->failed++;
	return ok;
}

/* The first ibtca RDMA device the module's client was told of. */
static struct ib_device *kvc_dev;

static int kvc_add(struct ib_device *dev)
{
	if (!kvc_dev && !strncmp(dev_name(&dev->dev), "ibtca", 5))
		kvc_dev = dev;
	return 0;
}

static void kvc_remove(struct ib_device *dev, void *data)
{
	if (dev == kvc_dev)
		kvc_dev = NULL;
}

/*
 * Registers @client (its add and remove are set here) and runs @run on the
 * ibtca device; without one, prints "@tag setup FAIL". The module's exit
 * unregisters @client.
 */
static int kvc_start(struct ib_client *client, const char *tag,
		     void (*run)(struct ib_device *dev))
{
	int ret;

	client->add = kvc_add;
	client->remove = kvc_remove;
	ret = ib_register_client(client);
	if (ret)
		return ret;
	if (kvc_dev)
		run(kvc_dev);
	else
		pr_info("%s setup FAIL no ibtca RDMA device\n", tag);
	return 0;
}

/*
 * A DMA MR with @access, as the core's ib_alloc_pd() makes its own
 * (pd->local_dma_lkey) through the driver's get_dma_mr: the core exports
 * no ib_get_dma_mr() any more, so the test fills in what it would. Freed
 * with dev->ops.dereg_mr().
 */
static inline struct ib_mr *kvc_dma_mr(struct ib_pd *pd, int access)
{
	struct ib_mr *mr = pd->device->ops.get_dma_mr(pd, access);

	if (IS_ERR(mr))
		return mr;
	mr->device = pd->device;
	mr->pd = pd;
	mr->type = IB_MR_TYPE_DMA;
	return mr;
}

/*
 * @qp through RESET, INIT, RTR and RTS towards QP @dest_qpn at @dlid on
 * @port: 1024-byte MTU, PSNs 0, the peer's @access rights, @rd_atomic
 * READs or atomics outstanding each way, RNR timer code @min_rnr_timer,
 * retries 7 of each kind (RNR: without end).
 */
static inline int kvc_connect_rd_atomic(struct ib_qp *qp, u32 port, u16 dlid,
					u32 dest_qpn, int access,
					u8 min_rnr_timer, u8 rd_atomic)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_RESET };
	int ret;

	ret = ib_modify_qp(qp, &a, IB_QP_STATE);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_INIT;
	a.port_num = port;
	a.qp_access_flags = access;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = rd_atomic;
	a.min_rnr_timer = min_rnr_timer;
	a.ah_attr.type = RDMA_AH_ATTR_TYPE_IB;
	rdma_ah_set_dlid(&a.ah_attr, dlid);
	rdma_ah_set_port_num(&a.ah_attr, port);
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = rd_atomic;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN |
			    IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			    IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
}

/* kvc_connect_rd_atomic() with one READ or atomic outstanding each way. */
static inline int kvc_connect(struct ib_qp *qp, u32 port, u16 dlid,
			      u32 dest_qpn, int access, u8 min_rnr_timer)
{
	return kvc_connect_rd_atomic(qp, port, dlid, dest_qpn, access,
				     min_rnr_timer, 1);
}

/*
 * The next completion of @cq into @wc by @deadline (jiffies), polled: no
 * interrupt is armed, this is a test and not a hot path. 0, -ETIMEDOUT,
 * or ib_poll_cq()'s error.
 */
static inline int kvc_poll(struct ib_cq *cq, struct ib_wc *wc,
			   unsigned long deadline)
{
	int n;

	while (!(n = ib_poll_cq(cq, 1, wc))) {
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		usleep_range(500, 1000);
	}
	return n < 0 ? n : 0;
}

/*
 * A loopback pair: two RC QPs on one device sharing a CQ, a DMA region
 * (local and remote write) and a DMA-mapped buffer of @len bytes; @lid is
 * the port's own, so A and B connect to each other through the device.
 */
struct kvc_loop {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_mr *mr;
	struct ib_cq *cq;
	struct ib_qp *a, *b;
	u8 *buf;
	u64 dma;
	size_t len;
	u16 lid;
};

/* Sets up @l on @l->dev's @port: QPs of @max_send_wr sends, 4 receives. */
static inline int kvc_loop_setup(struct kvc_loop *l, u32 port,
				 u32 max_send_wr, size_t len)
{
	struct ib_cq_init_attr ca = { .cqe = 32 };
	struct ib_qp_init_attr qa = {
		.cap = { .max_send_wr = max_send_wr, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = IB_QPT_RC,
		.port_num = port,
	};
	struct ib_port_attr pa;
	int ret;

	ret = ib_query_port(l->dev, port, &pa);
	if (ret)
		return ret;
	l->lid = pa.lid;
	l->pd = ib_alloc_pd(l->dev, 0);
	if (IS_ERR(l->pd))
		return PTR_ERR(l->pd);
	l->mr = kvc_dma_mr(l->pd, IB_ACCESS_LOCAL_WRITE |
			   IB_ACCESS_REMOTE_WRITE);
	if (IS_ERR(l->mr))
		return PTR_ERR(l->mr);
	l->cq = ib_create_cq(l->dev, NULL, NULL, l, &ca);
	if (IS_ERR(l->cq))
		return PTR_ERR(l->cq);
	qa.send_cq = l->cq;
	qa.recv_cq = l->cq;
	l->a = ib_create_qp(l->pd, &qa);
	if (IS_ERR(l->a))
		return PTR_ERR(l->a);
	l->b = ib_create_qp(l->pd, &qa);
	if (IS_ERR(l->b))
		return PTR_ERR(l->b);
	l->buf = kzalloc(len, GFP_KERNEL);
	if (!l->buf)
		return -ENOMEM;
	l->dma = ib_dma_map_single(l->dev, l->buf, len, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(l->dev, l->dma)) {
		kfree(l->buf);
		l->buf = NULL;
		return -EIO;
	}
	l->len = len;
	return 0;
}

/* Undoes whatever kvc_loop_setup() got done. */
static inline void kvc_loop_teardown(struct kvc_loop *l)
{
	if (!IS_ERR_OR_NULL(l->a))
		ib_destroy_qp(l->a);
	if (!IS_ERR_OR_NULL(l->b))
		ib_destroy_qp(l->b);
	if (!IS_ERR_OR_NULL(l->cq))
		ib_destroy_cq(l->cq);
	if (l->buf) {
		ib_dma_unmap_single(l->dev, l->dma, l->len, DMA_BIDIRECTIONAL);
		kfree(l->buf);
	}
	if (!IS_ERR_OR_NULL(l->mr))
		l->dev->ops.dereg_mr(l->mr, NULL);
	if (!IS_ERR_OR_NULL(l->pd))
		ib_dealloc_pd(l->pd);
}

#endif /* _IBTCA_KVERBS_COMMON_H */
