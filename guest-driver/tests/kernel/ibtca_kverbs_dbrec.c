// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca kernel verbs test, doorbell records (loaded in kverbs mode after
 * the other two modules, in each guest on its own): two RC QPs of this
 * guest's ibtca0 connected to each other through the device's loopback
 * (the port's own LID). A's SEND finds no receive at B, so it waits on
 * RNR NAKs (rnr_retry 7) and the device stays awake on A's send queue;
 * meanwhile the consumer posts KD_WRITES RDMA WRITEs one ib_post_send at
 * a time, B's receive, and polls every completion: BAR0's DOORBELLS must
 * not move (the driver stored the indexes in the QPs' and CQ's doorbell
 * records). Once the device sleeps again a WRITE rings exactly one
 * doorbell. The bytes each WRITE and the SEND carried are checked at B.
 *
 * Console lines: "IBTCA-KVDB <check> PASS|FAIL ..." and a last
 * "IBTCA-KVDB result passed=P failed=F".
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "ibtca_kverbs_common.h"

#include "ibtca_ib_probe.h"

#define KD_PORT		1
#define KD_WRITES	8
#define KD_SLOT		64
#define KD_SEND_LEN	32
#define KD_BUF		(4 * PAGE_SIZE)
#define KD_B_OFF	(2 * PAGE_SIZE)	/* B's half of the buffer */
#define KD_WAIT_MS	10000

struct kd_ctx {
	struct kvc_loop l;
	struct kvc_tally t;
};

#define kd_check(c, ok, name, ...) kvc_check(&(c)->t, ok, name, __VA_ARGS__)

static u8 kd_byte(u32 k, u32 i)
{
	return (u8)(i * 7 + k * 29 + 3);
}

static int kd_setup(struct kd_ctx *c)
{
	int ret = kvc_loop_setup(&c->l, KD_PORT, 16, KD_BUF);

	if (ret)
		return ret;
	/* At our own LID; A's SEND retries 1.28 ms after each RNR NAK. */
	ret = kvc_connect(c->l.a, KD_PORT, c->l.lid, c->l.b->qp_num,
			  IB_ACCESS_REMOTE_WRITE, 14);
	return ret ?: kvc_connect(c->l.b, KD_PORT, c->l.lid, c->l.a->qp_num,
				  IB_ACCESS_REMOTE_WRITE, 14);
}

static void kd_teardown(struct kd_ctx *c)
{
	kvc_loop_teardown(&c->l);
}

/*
 * Waits until the device's awake word of @qp's send (or receive) queue
 * reads @want; false after KD_WAIT_MS or without a record.
 */
static bool kd_wait_awake(struct ib_qp *qp, bool rq, bool want)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(KD_WAIT_MS);
	bool sq_awake, rq_awake;

	for (;;) {
		if (ibtca_ib_qp_awake(qp, &sq_awake, &rq_awake))
			return false;
		if ((rq ? rq_awake : sq_awake) == want)
			return true;
		if (time_after(jiffies, deadline))
			return false;
		usleep_range(500, 1000);
	}
}

/* A's work request @k: the SEND (k = KD_WRITES) or WRITE k into B's half. */
static int kd_post(struct kd_ctx *c, u32 k)
{
	u32 len = k == KD_WRITES ? KD_SEND_LEN : KD_SLOT;
	struct ib_sge sge = { .addr = c->l.dma + k * KD_SLOT, .length = len,
			      .lkey = c->l.pd->local_dma_lkey };
	struct ib_rdma_wr w = {
		.wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_RDMA_WRITE },
		.remote_addr = c->l.dma + KD_B_OFF + k * KD_SLOT,
		.rkey = c->l.mr->rkey,
	};
	u32 i;

	for (i = 0; i < len; i++)
		c->l.buf[k * KD_SLOT + i] = kd_byte(k, i);
	if (k == KD_WRITES)
		w.wr.opcode = IB_WR_SEND;
	return ib_post_send(c->l.a, &w.wr, NULL);
}

/* Polls @n completions (no interrupt: nothing is armed); how many came. */
static int kd_poll(struct kd_ctx *c, int n, int *bad)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(KD_WAIT_MS);
	struct ib_wc wc;
	int got = 0;

	while (got < n && !kvc_poll(c->l.cq, &wc, deadline)) {
		got++;
		if (wc.status != IB_WC_SUCCESS) {
			(*bad)++;
			pr_info("IBTCA-KVDB wc wr_id=%llu status=%s\n", wc.wr_id,
				ib_wc_status_msg(wc.status));
		}
	}
	return got;
}

/* Whether B's half holds message @k. */
static bool kd_landed(struct kd_ctx *c, u32 k)
{
	u32 len = k == KD_WRITES ? KD_SEND_LEN : KD_SLOT;
	u32 i;

	for (i = 0; i < len; i++)
		if (c->l.buf[KD_B_OFF + k * KD_SLOT + i] != kd_byte(k, i))
			return false;
	return true;
}

static void kd_run_checks(struct kd_ctx *c)
{
	struct ib_sge rsge = { .addr = c->l.dma + KD_B_OFF + KD_WRITES * KD_SLOT,
			       .length = KD_SLOT,
			       .lkey = c->l.pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .wr_id = 100, .sg_list = &rsge,
				  .num_sge = 1 };
	u32 before, during, after, k, landed = 0;
	bool sq, rq;
	int ret, got, bad = 0;

	kd_check(c, !ibtca_ib_qp_awake(c->l.a, &sq, &rq) &&
		 !ibtca_ib_qp_awake(c->l.b, &sq, &rq), "records",
		 "qpn=0x%x,0x%x lid=%u", c->l.a->qp_num, c->l.b->qp_num, c->l.lid);
	/* B's RQ is read by the device in RTS: its receive needs no doorbell. */
	kd_check(c, kd_wait_awake(c->l.b, true, true), "rq_awake", "qpn=0x%x",
		 c->l.b->qp_num);
	ret = kd_post(c, KD_WRITES);
	if (!kd_check(c, !ret && kd_wait_awake(c->l.a, false, true), "sq_awake",
		      "send ret=%d (no receive at B: RNR)", ret))
		return;
	before = ibtca_ib_doorbells(c->l.dev);
	for (k = 0; k < KD_WRITES && !ret; k++)
		ret = kd_post(c, k);
	ret = ret ?: ib_post_recv(c->l.b, &rwr, NULL);
	got = kd_poll(c, KD_WRITES + 2, &bad);
	during = ibtca_ib_doorbells(c->l.dev);
	for (k = 0; k <= KD_WRITES; k++)
		landed += kd_landed(c, k);
	kd_check(c, !ret && got == KD_WRITES + 2 && !bad &&
		 landed == KD_WRITES + 1 && during == before, "awake_posts",
		 "writes=%d recv=1 completions=%d bad=%d landed=%u doorbells=%u",
		 KD_WRITES, got, bad, landed, during - before);
	/* Nothing in flight: the device sleeps, and a post must ring. */
	if (!kd_check(c, kd_wait_awake(c->l.a, false, false), "sq_asleep", "%s",
		      "no send work in flight"))
		return;
	before = ibtca_ib_doorbells(c->l.dev);
	ret = kd_post(c, 0);
	after = ibtca_ib_doorbells(c->l.dev);
	got = kd_poll(c, 1, &bad);
	kd_check(c, !ret && got == 1 && !bad && after - before == 1,
		 "asleep_post", "ret=%d completions=%d doorbells=%u", ret, got,
		 after - before);
}

static void kd_run(struct ib_device *dev)
{
	struct kd_ctx *c = kzalloc(sizeof(*c), GFP_KERNEL);
	int ret;

	if (!c)
		return;
	c->l.dev = dev;
	c->t.tag = "IBTCA-KVDB";
	ret = kd_setup(c);
	if (kd_check(c, !ret, "setup", "ret=%d", ret))
		kd_run_checks(c);
	kd_teardown(c);
	pr_info("IBTCA-KVDB result passed=%d failed=%d\n", c->t.passed,
		c->t.failed);
	kfree(c);
}

static struct ib_client kd_client_ops = {
	.name = "ibtca_kverbs_dbrec",
};

static int __init kd_init(void)
{
	return kvc_start(&kd_client_ops, "IBTCA-KVDB", kd_run);
}

static void __exit kd_exit(void)
{
	ib_unregister_client(&kd_client_ops);
}

module_init(kd_init);
module_exit(kd_exit);

MODULE_DESCRIPTION("ibtca kernel verbs test: doorbell records of kernel QPs and CQs");
MODULE_AUTHOR("ibtca project");
MODULE_LICENSE("GPL");
