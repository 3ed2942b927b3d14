// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca kernel verbs test, shared receive queues and inline data between
 * two guests (loaded after ibtca_kverbs_test.ko, with the same role and
 * peer_lid): the server makes one SRQ (8 receives posted, limit armed at 2)
 * and two RC QPs taking their receives from it; the client makes two RC
 * QPs. Both sides create their two QPs on devices with the same QP
 * history, so QP i has the same number on both and each connects QP i to
 * that number at the peer's LID.
 *
 * The client sends four messages: QP 0, QP 1, QP 0 (from a DMA buffer),
 * then QP 1 inline (IB_SEND_INLINE from a kernel stack buffer); a first
 * SEND that runs out of retries (the server not there yet) is sent again
 * on a reconnected QP until wait_s passes. One inline byte past
 * max_inline_data is refused at post with -EINVAL. The server finds
 * message k in SRQ receive k (ring order, whichever QP it came on), on the
 * QP it was sent to, byte for byte, and IB_EVENT_SRQ_LIMIT_REACHED once
 * fewer than 2 receives are left; ib_query_srq then shows the limit
 * disarmed. Before the client sends, the server grows the SRQ to twice its
 * ring with its eight receives posted (the device copies them over).
 *
 * Console lines: "IBTCA-KVSRQ <check> PASS|FAIL ..." and a last
 * "IBTCA-KVSRQ result role=R passed=P failed=F".
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "ibtca_kverbs_common.h"

static char *role = "server";
module_param(role, charp, 0444);
MODULE_PARM_DESC(role, "server (the SRQ) or client (the sender)");
static uint peer_lid;
module_param(peer_lid, uint, 0444);
MODULE_PARM_DESC(peer_lid, "LID of the other guest");
static uint wait_s = 120;
module_param(wait_s, uint, 0444);
MODULE_PARM_DESC(wait_s, "seconds to wait for the peer");

#define KS_PORT		1
#define KS_QPS		2
#define KS_MSGS		4		/* the last one inline */
#define KS_RECVS	8
#define KS_LIMIT	2
#define KS_SLOT		1024
#define KS_BUF		(KS_RECVS * KS_SLOT)
#define KS_INLINE_LEN	40

static const u32 ks_len[KS_MSGS] = { 1000, 333, 1024, KS_INLINE_LEN };
static const int ks_qp[KS_MSGS] = { 0, 1, 0, 1 };

struct ks_ctx {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_srq *srq;
	struct ib_qp *qp[KS_QPS];
	u8 *buf;
	u64 dma;
	u16 lid;
	struct completion limit;
	atomic_t limit_events;
	struct kvc_tally t;
};

#define ks_check(c, ok, name, ...) kvc_check(&(c)->t, ok, name, __VA_ARGS__)

/* Byte @i of message @k. */
static u8 ks_byte(u32 k, u32 i)
{
	return (u8)(i * 13 + k * 71 + 5);
}

static void ks_srq_event(struct ib_event *ev, void *ctx)
{
	struct ks_ctx *c = ctx;

	if (ev->event != IB_EVENT_SRQ_LIMIT_REACHED)
		return;
	atomic_inc(&c->limit_events);
	complete(&c->limit);
}

static int ks_connect(struct ib_qp *qp, u32 dest_qpn)
{
	return kvc_connect(qp, KS_PORT, peer_lid, dest_qpn, 0, 12);
}

static int ks_setup(struct ks_ctx *c, bool server)
{
	struct ib_cq_init_attr ca = { .cqe = 32 };
	struct ib_srq_init_attr sa = {
		.event_handler = ks_srq_event,
		.srq_context = c,
		.attr = { .max_wr = KS_RECVS, .max_sge = 1 },
		.srq_type = IB_SRQT_BASIC,
	};
	struct ib_qp_init_attr qa = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = KS_INLINE_LEN },
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = IB_QPT_RC,
		.port_num = KS_PORT,
	};
	struct ib_port_attr pa;
	int i, ret;

	ret = ib_query_port(c->dev, KS_PORT, &pa);
	if (ret)
		return ret;
	c->lid = pa.lid;
	c->pd = ib_alloc_pd(c->dev, 0);
	if (IS_ERR(c->pd))
		return PTR_ERR(c->pd);
	c->cq = ib_create_cq(c->dev, NULL, NULL, c, &ca);
	if (IS_ERR(c->cq))
		return PTR_ERR(c->cq);
	if (server) {
		c->srq = ib_create_srq(c->pd, &sa);
		if (IS_ERR(c->srq))
			return PTR_ERR(c->srq);
		qa.srq = c->srq;
	}
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	for (i = 0; i < KS_QPS; i++) {
		c->qp[i] = ib_create_qp(c->pd, &qa);
		if (IS_ERR(c->qp[i]))
			return PTR_ERR(c->qp[i]);
	}
	c->buf = kzalloc(KS_BUF, GFP_KERNEL);
	if (!c->buf)
		return -ENOMEM;
	c->dma = ib_dma_map_single(c->dev, c->buf, KS_BUF, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(c->dev, c->dma)) {
		kfree(c->buf);
		c->buf = NULL;
		return -EIO;
	}
	return 0;
}

static void ks_teardown(struct ks_ctx *c)
{
	int i;

	for (i = 0; i < KS_QPS; i++)
		if (!IS_ERR_OR_NULL(c->qp[i]))
			ib_destroy_qp(c->qp[i]);
	if (!IS_ERR_OR_NULL(c->srq))
		ib_destroy_srq(c->srq);
	if (!IS_ERR_OR_NULL(c->cq))
		ib_destroy_cq(c->cq);
	if (c->buf) {
		ib_dma_unmap_single(c->dev, c->dma, KS_BUF, DMA_BIDIRECTIONAL);
		kfree(c->buf);
	}
	if (!IS_ERR_OR_NULL(c->pd))
		ib_dealloc_pd(c->pd);
}

static void ks_server(struct ks_ctx *c)
{
	unsigned long deadline = jiffies + wait_s * HZ;
	struct ib_srq_attr attr;
	struct ib_recv_wr wr[KS_RECVS];
	struct ib_sge sge[KS_RECVS];
	u32 k, i, bad;
	struct ib_wc wc;
	int ret, resize;

	for (k = 0; k < KS_RECVS; k++) {
		sge[k] = (struct ib_sge) { .addr = c->dma + k * KS_SLOT,
			.length = KS_SLOT, .lkey = c->pd->local_dma_lkey };
		wr[k] = (struct ib_recv_wr) { .wr_id = k, .sg_list = &sge[k],
			.num_sge = 1, .next = k + 1 < KS_RECVS ? &wr[k + 1] : NULL };
	}
	ret = ib_post_srq_recv(c->srq, wr, NULL);
	/*
	 * Grown to twice its ring (IB_DEVICE_SRQ_RESIZE; past max_srq_wr:
	 * -EINVAL): the device copies the receives just posted into the new
	 * ring, where srq_recv finds them in order; the old ring is freed.
	 */
	attr.max_wr = 1U << 20;
	resize = ib_modify_srq(c->srq, &attr, IB_SRQ_MAX_WR);
	attr.max_wr = 2 * KS_RECVS;
	if (!ret)
		ret = ib_modify_srq(c->srq, &attr, IB_SRQ_MAX_WR);
	ks_check(c, resize == -EINVAL && !ret, "srq_grow",
		 "max_wr %u: %d, max_wr %u: %d", 1U << 20, resize,
		 2 * KS_RECVS, ret);
	attr.srq_limit = KS_LIMIT;
	if (!ret)
		ret = ib_modify_srq(c->srq, &attr, IB_SRQ_LIMIT);
	if (!ret)
		ret = ib_query_srq(c->srq, &attr);
	ks_check(c, !ret && attr.srq_limit == KS_LIMIT &&
		 attr.max_wr == 2 * KS_RECVS,
		 "query_srq_armed", "ret=%d limit=%u max_wr=%u", ret,
		 attr.srq_limit, attr.max_wr);
	for (k = 0; !ret && k < KS_QPS; k++)
		ret = ks_connect(c->qp[k], c->qp[k]->qp_num);
	if (!ks_check(c, !ret, "srq_setup", "qps=%u,%u posted=%d limit=%d ret=%d",
		      c->qp[0]->qp_num, c->qp[1]->qp_num, KS_RECVS, KS_LIMIT,
		      ret))
		return;
	/* Message k lands in SRQ receive k, whichever QP it came on. */
	for (k = 0; k < KS_MSGS; k++) {
		ret = kvc_poll(c->cq, &wc, deadline);
		if (ret || wc.status != IB_WC_SUCCESS) {
			ks_check(c, false, "srq_recv", "k=%u ret=%d status=%d", k,
				 ret, ret ? -1 : wc.status);
			return;
		}
		ib_dma_sync_single_for_cpu(c->dev, c->dma, KS_BUF,
					   DMA_BIDIRECTIONAL);
		bad = wc.wr_id < KS_RECVS ? 0 : ks_len[k];
		for (i = 0; !bad && i < ks_len[k]; i++)
			bad += c->buf[wc.wr_id * KS_SLOT + i] != ks_byte(k, i);
		ks_check(c, wc.wr_id == k && wc.qp == c->qp[ks_qp[k]] &&
			 wc.byte_len == ks_len[k] && !bad,
			 "srq_recv", "k=%u wr_id=%llu qp=%u want_qp=%u len=%u mismatched=%u",
			 k, wc.wr_id, wc.qp->qp_num, c->qp[ks_qp[k]]->qp_num,
			 wc.byte_len, bad);
	}
}

/*
 * The server waits for the limit: the client's last two messages take
 * receives 4 and 5, then 6 (one left, below 2) fires it.
 */
static void ks_server_limit(struct ks_ctx *c)
{
	unsigned long deadline = jiffies + wait_s * HZ;
	struct ib_srq_attr attr;
	struct ib_wc wc;
	int k, ret = 0;

	for (k = KS_MSGS; !ret && k < KS_RECVS - 1; k++)
		ret = kvc_poll(c->cq, &wc, deadline);
	ks_check(c, !ret && wc.status == IB_WC_SUCCESS && wc.wr_id == 6,
		 "srq_more", "ret=%d last_wr_id=%llu", ret, ret ? 0 : wc.wr_id);
	ret = wait_for_completion_timeout(&c->limit, 30 * HZ) ? 0 : -ETIMEDOUT;
	ks_check(c, !ret && atomic_read(&c->limit_events) == 1,
		 "srq_limit_event", "ret=%d events=%d", ret,
		 atomic_read(&c->limit_events));
	ret = ib_query_srq(c->srq, &attr);
	ks_check(c, !ret && attr.srq_limit == 0, "query_srq_disarmed", "ret=%d limit=%u",
		 ret, attr.srq_limit);
}

/* SEND message @k on QP ks_qp[k], again on a reconnected QP until it lands. */
static int ks_send(struct ks_ctx *c, u32 k, unsigned long deadline)
{
	struct ib_qp *qp = c->qp[ks_qp[k]];
	u8 line[KS_INLINE_LEN];
	struct ib_sge sge;
	struct ib_send_wr wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1,
				 .opcode = IB_WR_SEND };
	struct ib_wc wc;
	u32 i;
	int ret;

	for (i = 0; i < ks_len[k]; i++) {
		if (k == KS_MSGS - 1)
			line[i] = ks_byte(k, i);
		else
			c->buf[k * KS_SLOT + i] = ks_byte(k, i);
	}
	if (k == KS_MSGS - 1) {
		/* From memory no key covers: the bytes travel in the WQE. */
		sge = (struct ib_sge) { .addr = (uintptr_t)line,
					.length = ks_len[k] };
		wr.send_flags = IB_SEND_INLINE;
	} else {
		sge = (struct ib_sge) { .addr = c->dma + k * KS_SLOT,
			.length = ks_len[k], .lkey = c->pd->local_dma_lkey };
		ib_dma_sync_single_for_device(c->dev, c->dma, KS_BUF,
					      DMA_BIDIRECTIONAL);
	}
	for (;;) {
		ret = ib_post_send(qp, &wr, NULL);
		if (!ret)
			ret = kvc_poll(c->cq, &wc, deadline);
		if (ret)
			return ret;
		if (wc.status == IB_WC_SUCCESS)
			return 0;
		/* The server's QP was not there yet: connect again. */
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		msleep(200);
		ret = ks_connect(qp, qp->qp_num);
		if (ret)
			return ret;
	}
}

static void ks_client(struct ks_ctx *c)
{
	unsigned long deadline = jiffies + wait_s * HZ;
	u8 line[KS_INLINE_LEN + 25] = { };
	struct ib_sge sge = { .addr = (uintptr_t)line, .length = sizeof(line) };
	struct ib_send_wr wr = { .wr_id = 99, .sg_list = &sge, .num_sge = 1,
				 .opcode = IB_WR_SEND,
				 .send_flags = IB_SEND_INLINE };
	struct ib_qp_attr qattr;
	struct ib_qp_init_attr init;
	u32 k;
	int ret = 0;

	for (k = 0; !ret && k < KS_QPS; k++)
		ret = ks_connect(c->qp[k], c->qp[k]->qp_num);
	if (!ks_check(c, !ret, "client_setup", "qps=%u,%u ret=%d",
		      c->qp[0]->qp_num, c->qp[1]->qp_num, ret))
		return;
	ret = ib_query_qp(c->qp[0], &qattr, IB_QP_CAP, &init);
	ks_check(c, !ret && init.cap.max_inline_data == 64,
		 "max_inline_data", "ret=%d value=%u", ret,
		 init.cap.max_inline_data);
	/* 65 bytes inline: refused before anything is posted. */
	ret = ib_post_send(c->qp[1], &wr, NULL);
	ks_check(c, ret == -EINVAL, "inline_too_long", "len=%zu ret=%d",
		 sizeof(line), ret);
	for (k = 0; k < KS_MSGS; k++) {
		ret = ks_send(c, k, deadline);
		ks_check(c, !ret, "send", "k=%u qp=%u len=%u%s ret=%d", k,
			 c->qp[ks_qp[k]]->qp_num, ks_len[k],
			 k == KS_MSGS - 1 ? " inline" : "", ret);
		if (ret)
			return;
	}
	/* Three more (taking receives 4 to 6): the last fires the limit. */
	for (k = 0; k < 3; k++) {
		ret = ks_send(c, k, deadline);
		ks_check(c, !ret, "send_more", "k=%u ret=%d", k, ret);
	}
}

static void ks_run(struct ib_device *dev)
{
	bool server = !strcmp(role, "server");
	struct ks_ctx *c;
	int ret;

	c = kzalloc_obj(*c, GFP_KERNEL);
	if (!c)
		return;
	c->dev = dev;
	c->t.tag = "IBTCA-KVSRQ";
	init_completion(&c->limit);
	atomic_set(&c->limit_events, 0);
	ret = ks_setup(c, server);
	if (ks_check(c, !ret, "setup", "role=%s lid=%u ret=%d", role, c->lid,
		     ret)) {
		if (server) {
			ks_server(c);
			ks_server_limit(c);
		} else {
			ks_client(c);
		}
	}
	ks_teardown(c);
	pr_info("IBTCA-KVSRQ result role=%s passed=%d failed=%d\n", role,
		c->t.passed, c->t.failed);
	kfree(c);
}

static struct ib_client ks_client_ops = {
	.name = "ibtca_kverbs_srq",
};

static int __init ks_init(void)
{
	if (!peer_lid || peer_lid >= 0xc000) {
		pr_err("peer_lid=%u: give the other guest's LID\n", peer_lid);
		return -EINVAL;
	}
	return kvc_start(&ks_client_ops, "IBTCA-KVSRQ", ks_run);
}

static void __exit ks_exit(void)
{
	ib_unregister_client(&ks_client_ops);
}

module_init(ks_init);
module_exit(ks_exit);

MODULE_DESCRIPTION("ibtca kernel verbs test: SRQs and inline data between two guests");
MODULE_AUTHOR("ibtca project");
MODULE_LICENSE("GPL");
