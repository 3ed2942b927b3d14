// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca kernel verbs test, seed 002's choices for kernel consumers
 * (loaded in kverbs mode, in each guest on its own): two RC QPs of this
 * guest's ibtca0 connected to each other through the device's loopback,
 * their MSN start and ACK policy set with ibtca_qp_set_options()
 * (ibtca_qp_options.h) before connecting.
 *
 * - Values the device does not take are refused with -EINVAL.
 * - Both QPs with the seed's MSN start 0xffffff, an ACK per packet and a
 *   stop-and-wait window: A's 16 KiB RDMA WRITE (16 packets, each waiting
 *   for its ACK) and 3000-byte SEND complete and land byte for byte at B.
 * - Connected again, only A with the seed's start (B with IBA's 0): B's
 *   first ACK carries MSN 1, which claims two messages where A sent one,
 *   so A's SEND completes IB_WC_BAD_RESP_ERR (the device's MSN
 *   cross-check) though its bytes landed at B: the choice reached the
 *   device.
 *
 * Console lines: "IBTCA-KVSEED <check> PASS|FAIL ..." and a last
 * "IBTCA-KVSEED result passed=P failed=F".
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "ibtca_kverbs_common.h"

#include "ibtca_qp_options.h"

#define KS_PORT		1
#define KS_WRITE_LEN	(16 * 1024)
#define KS_SEND_LEN	3000
#define KS_BUF		(16 * PAGE_SIZE)
#define KS_B_OFF	(8 * PAGE_SIZE)	/* B's half of the buffer */
#define KS_RECV_OFF	(KS_B_OFF + KS_WRITE_LEN)
#define KS_WAIT_MS	30000

struct ks_ctx {
	struct kvc_loop l;
	struct kvc_tally t;
};

#define ks_check(c, ok, name, ...) kvc_check(&(c)->t, ok, name, __VA_ARGS__)

static u8 ks_byte(u32 k, u32 i)
{
	return (u8)(i * 13 + k * 71 + 5);
}

static int ks_setup(struct ks_ctx *c)
{
	return kvc_loop_setup(&c->l, KS_PORT, 8, KS_BUF);
}

static void ks_teardown(struct ks_ctx *c)
{
	kvc_loop_teardown(&c->l);
}

/* Connects A and B to each other at our own LID. */
static int ks_connect(struct ks_ctx *c)
{
	int ret = kvc_connect(c->l.a, KS_PORT, c->l.lid, c->l.b->qp_num,
			      IB_ACCESS_REMOTE_WRITE, 14);

	return ret ?: kvc_connect(c->l.b, KS_PORT, c->l.lid, c->l.a->qp_num,
				  IB_ACCESS_REMOTE_WRITE, 14);
}

/* A posts B's receive, its WRITE (@write_len bytes, 0: none) and SEND. */
static int ks_post(struct ks_ctx *c, u32 write_len, u32 k)
{
	struct ib_sge rsge = { .addr = c->l.dma + KS_RECV_OFF,
			       .length = KS_SEND_LEN,
			       .lkey = c->l.pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .wr_id = 100, .sg_list = &rsge,
				  .num_sge = 1 };
	struct ib_sge wsge = { .addr = c->l.dma, .length = write_len,
			       .lkey = c->l.pd->local_dma_lkey };
	struct ib_sge ssge = { .addr = c->l.dma + KS_WRITE_LEN,
			       .length = KS_SEND_LEN,
			       .lkey = c->l.pd->local_dma_lkey };
	struct ib_rdma_wr w = {
		.wr = { .wr_id = 1, .sg_list = &wsge, .num_sge = 1,
			.opcode = IB_WR_RDMA_WRITE },
		.remote_addr = c->l.dma + KS_B_OFF,
		.rkey = c->l.mr->rkey,
	};
	struct ib_send_wr s = { .wr_id = 2, .sg_list = &ssge, .num_sge = 1,
				.opcode = IB_WR_SEND };
	u32 i;
	int ret;

	memset(c->l.buf + KS_B_OFF, 0, KS_BUF - KS_B_OFF);
	for (i = 0; i < KS_WRITE_LEN; i++)
		c->l.buf[i] = ks_byte(k, i);
	for (i = 0; i < KS_SEND_LEN; i++)
		c->l.buf[KS_WRITE_LEN + i] = ks_byte(k + 1, i);
	ret = ib_post_recv(c->l.b, &rwr, NULL);
	if (!ret && write_len)
		ret = ib_post_send(c->l.a, &w.wr, NULL);
	return ret ?: ib_post_send(c->l.a, &s, NULL);
}

/*
 * Polls @n completions; @status[wr_id] gets each one's status (wr_id 1
 * the WRITE, 2 the SEND, 100 B's receive as 0), @recv_len the receive's
 * length. How many came.
 */
static int ks_poll(struct ks_ctx *c, int n, int status[3], u32 *recv_len)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(KS_WAIT_MS);
	struct ib_wc wc;
	int got = 0;

	while (got < n && !time_after(jiffies, deadline)) {
		if (ib_poll_cq(c->l.cq, 1, &wc) != 1) {
			usleep_range(200, 500);
			continue;
		}
		got++;
		if (wc.wr_id == 100) {
			status[0] = wc.status;
			*recv_len = wc.byte_len;
		} else if (wc.wr_id < 3) {
			status[wc.wr_id] = wc.status;
		}
	}
	return got;
}

/* Bytes of B's region that differ from message @k's. */
static u32 ks_mismatches(struct ks_ctx *c, u32 write_len, u32 k)
{
	u32 i, bad = 0;

	for (i = 0; i < write_len; i++)
		bad += c->l.buf[KS_B_OFF + i] != ks_byte(k, i);
	for (i = 0; i < KS_SEND_LEN; i++)
		bad += c->l.buf[KS_RECV_OFF + i] != ks_byte(k + 1, i);
	return bad;
}

static void ks_refusals(struct ks_ctx *c)
{
	struct ibtca_modify_qp_cmd o = { .comp_mask = IBTCA_MODIFY_QP_MSN,
					 .initial_msn = 0x1000000 };
	int msn, coalesced, unknown;

	msn = ibtca_qp_set_options(c->l.a, &o);
	memset(&o, 0, sizeof(o));
	o.comp_mask = IBTCA_MODIFY_QP_ACK_POLICY;
	o.ack_mode = IBTCA_ACK_COALESCED;
	coalesced = ibtca_qp_set_options(c->l.a, &o);
	o.comp_mask = 1U << 5;
	unknown = ibtca_qp_set_options(c->l.a, &o);
	ks_check(c, msn == -EINVAL && coalesced == -EINVAL &&
		 unknown == -EINVAL, "refused",
		 "msn=0x1000000: %d, coalesced:0: %d, unknown bit: %d", msn,
		 coalesced, unknown);
}

static void ks_run_checks(struct ks_ctx *c)
{
	struct ibtca_modify_qp_cmd seed = {
		.comp_mask = IBTCA_MODIFY_QP_MSN | IBTCA_MODIFY_QP_ACK_POLICY,
		.initial_msn = 0xffffff,
		.ack_mode = IBTCA_ACK_PER_PACKET,
		.window = 1,
	};
	int status[3] = { -1, -1, -1 }, ra, rb, ret, got;
	u32 recv_len = 0, bad;

	ks_refusals(c);
	ra = ibtca_qp_set_options(c->l.a, &seed);
	rb = ibtca_qp_set_options(c->l.b, &seed);
	ret = ks_connect(c);
	if (!ks_check(c, !ra && !rb && !ret, "stop_and_wait_connect",
		      "msn_start=0xffffff ack=per-packet window=1: set %d,%d connect %d",
		      ra, rb, ret))
		return;
	ret = ks_post(c, KS_WRITE_LEN, 1);
	got = ks_poll(c, 3, status, &recv_len);
	bad = ks_mismatches(c, KS_WRITE_LEN, 1);
	ks_check(c, !ret && got == 3 && !status[0] && !status[1] &&
		 !status[2] && recv_len == KS_SEND_LEN && !bad, "stop_and_wait",
		 "write=%u send=%u: completions=%d status=%d,%d,%d recv_len=%u mismatched=%u",
		 KS_WRITE_LEN, KS_SEND_LEN, got, status[1], status[2],
		 status[0], recv_len, bad);

	/* Only A counts from the seed's start: the ends disagree. */
	seed.comp_mask = IBTCA_MODIFY_QP_MSN;
	seed.ack_mode = 0;
	seed.window = 0;
	ra = ibtca_qp_set_options(c->l.a, &seed);
	ret = ks_connect(c);
	status[0] = -1;
	status[1] = -1;
	status[2] = -1;
	ret = ret ?: ks_post(c, 0, 3);
	got = ks_poll(c, 2, status, &recv_len);
	bad = ks_mismatches(c, 0, 3);
	ks_check(c, !ra && !ret && got == 2 && !status[0] &&
		 status[2] == IB_WC_BAD_RESP_ERR && !bad, "msn_mismatch",
		 "A 0xffffff, B 0: send status=%s (%d) recv status=%d mismatched=%u",
		 status[2] >= 0 ? ib_wc_status_msg(status[2]) : "none",
		 status[2], status[0], bad);
}

static void ks_run(struct ib_device *dev)
{
	struct ks_ctx *c = kzalloc(sizeof(*c), GFP_KERNEL);
	int ret;

	if (!c)
		return;
	c->l.dev = dev;
	c->t.tag = "IBTCA-KVSEED";
	ret = ks_setup(c);
	if (ks_check(c, !ret, "setup", "ret=%d", ret))
		ks_run_checks(c);
	ks_teardown(c);
	pr_info("IBTCA-KVSEED result passed=%d failed=%d\n", c->t.passed,
		c->t.failed);
	kfree(c);
}

static struct ib_client ks_client_ops = {
	.name = "ibtca_kverbs_seed",
};

static int __init ks_init(void)
{
	return kvc_start(&ks_client_ops, "IBTCA-KVSEED", ks_run);
}

static void __exit ks_exit(void)
{
	ib_unregister_client(&ks_client_ops);
}

module_init(ks_init);
module_exit(ks_exit);

MODULE_DESCRIPTION("ibtca kernel verbs test: seed 002's MSN start and ACK policy for kernel consumers");
MODULE_AUTHOR("ibtca project");
MODULE_LICENSE("GPL");
