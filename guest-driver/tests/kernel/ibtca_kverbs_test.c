// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca_kverbs_test: a kernel verbs consumer for ibtca0, using nothing but
 * the RDMA core's kernel API (ib_register_client, ib_alloc_pd, ib_create_cq,
 * ib_create_qp, ib_modify_qp, ib_post_send/recv, ib_poll_cq,
 * ib_req_notify_cq, ib_dma_map_single). Two guests load it, one as server
 * and one as client, each knowing only the other's LID:
 *
 *   insmod ibtca_kverbs_test.ko role=server|client peer_lid=N [wait_s=S]
 *
 * Addressing without a management network: each side creates exactly one
 * RC QP on a freshly reset device, so both get the same QP number and each
 * takes its own as the peer's (peer_qpn= overrides). The client's first
 * SEND (HELLO, retried while the server guest boots) and the server's
 * SEND with immediate (REPLY) carry LID, QPN and the address and R_Key of
 * the sender's memory, which both sides check. Then the client does an
 * RDMA WRITE (unsignaled) and an RDMA WRITE with immediate into the
 * server's memory, an RDMA READ of it, fetch-and-add and compare-and-swap
 * on a server counter. Then fast registration as a storage initiator and
 * target use it: the server's REPLY also names a region of separate pages
 * (ib_alloc_mr, ib_map_mr_sg, IB_WR_REG_MR); the client WRITEs and READs
 * through its key across page boundaries and invalidates it with a SEND
 * with Invalidate; the server registers it again under a new key
 * (ib_update_fast_reg_key), which the client WRITEs through, and
 * invalidates that one with LOCAL_INV (and, at the very end, fails to
 * register it while it is registered). Last a SEND (DONE), and an RDMA
 * WRITE with the key LOCAL_INV invalidated, which must complete with
 * IB_WC_REM_ACCESS_ERR (raising the event of a CQ armed for solicited
 * events, which a plain WRITE before it did not), ib_query_qp then
 * reporting IB_QPS_ERR on both sides (the server's responder NAKed it),
 * followed by a SEND that must be flushed. Every payload is a pattern seeded with its sender's
 * LID, so each side checks that the bytes came from the other.
 * Completions are waited for through comp_handler (MSI-X).
 *
 * Console lines: "IBTCA-KVERBS <check> PASS|FAIL ..." and a last
 * "IBTCA-KVERBS result role=R passed=P failed=F events=E".
 */
#define pr_fmt(fmt) "ibtca_kverbs_test: " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#include "ibtca_kverbs_common.h"

static char *role = "server";
module_param(role, charp, 0444);
MODULE_PARM_DESC(role, "server or client");
static uint peer_lid;
module_param(peer_lid, uint, 0444);
MODULE_PARM_DESC(peer_lid, "LID of the other guest");
static uint peer_qpn;
module_param(peer_qpn, uint, 0444);
MODULE_PARM_DESC(peer_qpn, "QP number of the other guest (0: our own)");
static uint wait_s = 280;
module_param(wait_s, uint, 0444);
MODULE_PARM_DESC(wait_s, "seconds to wait for the port and the peer");

#define KV_PORT		1
#define KV_BUF_SIZE	(32 * 1024)
#define KV_RX		0		/* 6 receive slots of 256 bytes */
#define KV_RX_SLOT	256
#define KV_RX_SLOTS	6
#define KV_TX		1536
#define KV_WRITE	4096		/* the client writes here */
#define KV_DATA_LEN	4096
#define KV_READ		8192		/* the client reads from here */
#define KV_ATOMIC	12288		/* the server's counter / results */
#define KV_FR_SRC	16384		/* the client's fast-reg WRITE source */
#define KV_FR_DST	24576		/* the client's fast-reg READ target */
/*
 * The server's fast-registration region: KV_FR_PAGES separate pages, one
 * virtually contiguous region. Offsets are into that region.
 */
#define KV_FR_PAGES	4
#define KV_FR_LEN	(KV_FR_PAGES * PAGE_SIZE)
#define KV_FR_W_OFF	2048		/* 8 KiB WRITE: crosses 2 pages */
#define KV_FR_W_LEN	8192
#define KV_FR_R_OFF	10240		/* 6 KiB READ: crosses 1 page */
#define KV_FR_R_LEN	6144
#define KV_FR_W2_OFF	6144		/* 4 KiB WRITE with the new key */
#define KV_FR_W2_LEN	4096
#define KV_IMM_FR	0x3bca0000
#define KV_OP_MS	30000
#define KV_MAGIC	0x6b766572	/* "kver" */
#define KV_IMM_REPLY	0x1bca0000
#define KV_IMM_WRITE	0x2bca0000
#define KV_ADD		5
#define KV_SWAP		0xc0ffee00ULL

enum kv_kind { KV_HELLO = 1, KV_REPLY, KV_DONE, KV_LATE, KV_FR_INV,
	       KV_FR_NEW, KV_FR_GONE };

struct kv_msg {
	__le32 magic;
	__le32 kind;
	__le32 lid;
	__le32 qpn;
	__le64 addr;
	__le32 rkey;
	__le32 rsvd;
	__le64 fr_addr;			/* the server's fast-reg region */
	__le32 fr_rkey;			/* and its current key */
	__le32 fr_rsvd;
	u8 payload[128];
};

struct kv_ctx {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_mr *mr;		/* remote access to the whole buffer */
	struct ib_cq *cq;
	struct ib_qp *qp;
	u8 *buf;
	u64 dma;
	u16 lid;
	u32 qpn, dest_qpn;
	struct completion event;
	atomic_t events;
	struct kvc_tally t;
	struct ib_wc rwc;		/* kv_recv_msg()'s completion */
	/* The server's fast-registration region (NULL on the client). */
	struct ib_mr *fr;
	struct page *fr_page[KV_FR_PAGES];
	struct scatterlist fr_sg[KV_FR_PAGES];
	int fr_nents;			/* mapped entries, 0 if unmapped */
};

#define kv_check(c, ok, name, ...) kvc_check(&(c)->t, ok, name, __VA_ARGS__)

/* The pattern a sender with @lid writes for purpose @salt. */
static u8 kv_byte(u16 lid, u32 salt, u32 i)
{
	return (lid * 131 + salt * 29 + i * 7 + (i >> 8)) & 0xff;
}

static void kv_fill(u8 *p, u32 len, u16 lid, u32 salt)
{
	u32 i;

	for (i = 0; i < len; i++)
		p[i] = kv_byte(lid, salt, i);
}

/* Index of the first byte not from @lid's pattern, or @len. */
static u32 kv_mismatch(const u8 *p, u32 len, u16 lid, u32 salt)
{
	u32 i;

	for (i = 0; i < len; i++)
		if (p[i] != kv_byte(lid, salt, i))
			break;
	return i;
}

static void kv_comp(struct ib_cq *cq, void *ctx)
{
	struct kv_ctx *c = ctx;

	atomic_inc(&c->events);
	complete(&c->event);
}

static void kv_sync_cpu(struct kv_ctx *c)
{
	ib_dma_sync_single_for_cpu(c->dev, c->dma, KV_BUF_SIZE,
				   DMA_BIDIRECTIONAL);
}

static void kv_sync_dev(struct kv_ctx *c)
{
	ib_dma_sync_single_for_device(c->dev, c->dma, KV_BUF_SIZE,
				      DMA_BIDIRECTIONAL);
}

/* The next completion, waiting for comp_handler; -ETIMEDOUT after @ms. */
static int kv_wait(struct kv_ctx *c, struct ib_wc *wc, unsigned int ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);
	int n;

	for (;;) {
		n = ib_poll_cq(c->cq, 1, wc);
		if (n)
			break;
		if (ib_req_notify_cq(c->cq, IB_CQ_NEXT_COMP |
				     IB_CQ_REPORT_MISSED_EVENTS) > 0)
			continue;
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		wait_for_completion_timeout(&c->event, HZ);
	}
	if (n < 0)
		return n;
	kv_sync_cpu(c);
	return 0;
}

static int kv_post_recv(struct kv_ctx *c, u32 slot)
{
	struct ib_sge sge = {
		.addr = c->dma + KV_RX + slot * KV_RX_SLOT,
		.length = KV_RX_SLOT,
		.lkey = c->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 };

	return ib_post_recv(c->qp, &wr, NULL);
}

/*
 * A message SEND (with immediate @imm unless 0), followed by @next (may be
 * NULL) in the same post.
 */
/* Writes message @kind into the send buffer, which @sge then names. */
static void kv_msg_prepare(struct kv_ctx *c, enum kv_kind kind, u32 salt,
			   struct ib_sge *sge)
{
	struct kv_msg *m = (struct kv_msg *)(c->buf + KV_TX);

	memset(m, 0, sizeof(*m));
	m->magic = cpu_to_le32(KV_MAGIC);
	m->kind = cpu_to_le32(kind);
	m->lid = cpu_to_le32(c->lid);
	m->qpn = cpu_to_le32(c->qpn);
	m->addr = cpu_to_le64(c->dma);
	m->rkey = cpu_to_le32(c->mr->rkey);
	if (c->fr) {
		m->fr_addr = cpu_to_le64(c->fr->iova);
		m->fr_rkey = cpu_to_le32(c->fr->rkey);
	}
	kv_fill(m->payload, sizeof(m->payload), c->lid, salt);
	kv_sync_dev(c);
	*sge = (struct ib_sge) {
		.addr = c->dma + KV_TX,
		.length = sizeof(*m),
		.lkey = c->pd->local_dma_lkey,
	};
}

static int kv_send_chain(struct kv_ctx *c, enum kv_kind kind, u32 salt,
			 u64 wr_id, u32 imm, struct ib_send_wr *next,
			 const struct ib_send_wr **bad)
{
	struct ib_sge sge;
	struct ib_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = imm ? IB_WR_SEND_WITH_IMM : IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.ex.imm_data = cpu_to_be32(imm),
		.next = next,
	};

	kv_msg_prepare(c, kind, salt, &sge);
	return ib_post_send(c->qp, &wr, bad);
}

/* A message SEND with Invalidate of the peer's key @rkey. */
static int kv_send_inv(struct kv_ctx *c, enum kv_kind kind, u32 salt,
		       u64 wr_id, u32 rkey)
{
	struct ib_sge sge;
	struct ib_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND_WITH_INV,
		.send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = rkey,
	};

	kv_msg_prepare(c, kind, salt, &sge);
	return ib_post_send(c->qp, &wr, NULL);
}

static int kv_send(struct kv_ctx *c, enum kv_kind kind, u32 salt, u64 wr_id,
		   u32 imm)
{
	return kv_send_chain(c, kind, salt, wr_id, imm, NULL, NULL);
}

/* The RDMA or atomic request @wr, posted alone. */
static int kv_post(struct kv_ctx *c, struct ib_send_wr *wr)
{
	const struct ib_send_wr *bad = NULL;
	int ret;

	kv_sync_dev(c);
	ret = ib_post_send(c->qp, wr, &bad);
	if (ret)
		pr_info("IBTCA-KVERBS post wr_id=%llu: %d (bad_wr %s)\n",
			wr->wr_id, ret, bad == wr ? "ok" : "WRONG");
	return ret;
}

/*
 * Takes the QP from any state to RTS towards the peer, three READs or
 * atomics outstanding each way.
 */
static int kv_connect(struct kv_ctx *c)
{
	return kvc_connect_rd_atomic(c->qp, KV_PORT, peer_lid, c->dest_qpn,
				     IB_ACCESS_REMOTE_WRITE |
				     IB_ACCESS_REMOTE_READ |
				     IB_ACCESS_REMOTE_ATOMIC, 12, 3);
}

/* @mask on a scratch QP must fail with -EINVAL; returns true if it did. */
static bool kv_refused(struct ib_qp *qp, struct ib_qp_attr *a, int mask,
		       const char *what)
{
	int ret = ib_modify_qp(qp, a, mask);

	if (ret != -EINVAL)
		pr_info("IBTCA-KVERBS modify_qp %s: %d, want %d\n", what, ret,
			-EINVAL);
	return ret == -EINVAL;
}

/*
 * What modify_qp refuses (-EINVAL) on a second QP: a P_Key index but 0, a
 * GRH, an MTU or outstanding reads beyond the device's, SQD. Both sides
 * create it after their first QP, so the first QPs' numbers still match.
 */
static void kv_check_modify(struct kv_ctx *c)
{
	struct ib_qp_init_attr qa = {
		.send_cq = c->cq, .recv_cq = c->cq,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IB_QPT_RC, .port_num = KV_PORT,
	};
	const int init = IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			 IB_QP_ACCESS_FLAGS;
	const int rtr = IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER;
	struct ib_qp_attr a = { .qp_state = IB_QPS_INIT, .port_num = KV_PORT };
	struct ib_qp_attr q = { };
	struct ib_qp *qp;
	union ib_gid gid = { };
	bool ok = true;
	int ret, ud;

	qp = ib_create_qp(c->pd, &qa);
	if (IS_ERR(qp)) {
		kv_check(c, false, "modify_qp", "scratch QP: %ld", PTR_ERR(qp));
		return;
	}
	a.pkey_index = 64;	/* past the port's 64-entry P_Key table */
	ok &= kv_refused(qp, &a, init, "pkey_index=64");
	a.pkey_index = 0;
	ret = ib_modify_qp(qp, &a, init);
	ok &= !ret;
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = c->dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.type = RDMA_AH_ATTR_TYPE_IB;
	rdma_ah_set_dlid(&a.ah_attr, peer_lid);
	rdma_ah_set_port_num(&a.ah_attr, KV_PORT);
	rdma_ah_set_grh(&a.ah_attr, &gid, 0, 0, 1, 0);
	ok &= kv_refused(qp, &a, rtr, "grh");
	rdma_ah_set_ah_flags(&a.ah_attr, 0);
	a.max_dest_rd_atomic = 255;
	ok &= kv_refused(qp, &a, rtr, "max_dest_rd_atomic=255");
	a.max_dest_rd_atomic = 1;
	a.path_mtu = 7;
	ok &= kv_refused(qp, &a, rtr, "path_mtu=7");
	a.path_mtu = IB_MTU_1024;
	ret = ib_modify_qp(qp, &a, rtr);
	ok &= !ret;
	a.qp_state = IB_QPS_RTS;
	a.timeout = 18;
	a.retry_cnt = 3;
	a.rnr_retry = 5;
	a.max_rd_atomic = 2;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT |
			   IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			   IB_QP_MAX_QP_RD_ATOMIC);
	ok &= !ret;
	a.qp_state = IB_QPS_SQD;
	ok &= kv_refused(qp, &a, IB_QP_STATE, "sqd");
	ret = ib_query_qp(qp, &q, IB_QP_STATE | IB_QP_TIMEOUT, &qa);
	ok &= !ret && q.qp_state == IB_QPS_RTS && q.timeout == 18 &&
	      q.retry_cnt == 3 && q.rnr_retry == 5 && q.max_rd_atomic == 2;
	ib_destroy_qp(qp);
	/* UD QPs are the device's too. */
	qa.qp_type = IB_QPT_UD;
	qp = ib_create_qp(c->pd, &qa);
	ud = PTR_ERR_OR_ZERO(qp);
	if (!IS_ERR(qp))
		ib_destroy_qp(qp);
	kv_check(c, ok && !ud, "modify_qp",
		 "refused pkey_index, grh, max_dest_rd_atomic, path_mtu, sqd; rts timeout=%u retry=%u rnr=%u rd_atomic=%u; ud=%d",
		 q.timeout, q.retry_cnt, q.rnr_retry, q.max_rd_atomic, ud);
}

/* What the core's API and the driver refuse or report before any traffic. */
static void kv_check_local(struct kv_ctx *c)
{
	struct ib_qp_init_attr init;
	struct rdma_ah_attr ah = { .type = RDMA_AH_ATTR_TYPE_IB };
	struct ib_qp_attr a;
	u64 caps = c->dev->attrs.device_cap_flags;
	union ib_gid gid;
	struct ib_ah *h;
	bool mgt, mw;
	u16 pkey = 0;
	int ret, grh;

	ret = ib_query_qp(c->qp, &a, IB_QP_STATE | IB_QP_DEST_QPN | IB_QP_AV,
			  &init);
	kv_check(c, !ret && a.qp_state == IB_QPS_RTS &&
		 a.dest_qp_num == c->dest_qpn &&
		 rdma_ah_get_dlid(&a.ah_attr) == peer_lid &&
		 init.qp_type == IB_QPT_RC, "query_qp",
		 "ret=%d state=%d dest_qpn=%u dlid=%u", ret, a.qp_state,
		 a.dest_qp_num, rdma_ah_get_dlid(&a.ah_attr));
	ret = ib_query_pkey(c->dev, KV_PORT, 0, &pkey);
	kv_check(c, !ret && pkey == 0xffff, "query_pkey", "ret=%d pkey=0x%04x",
		 ret, pkey);
	ret = rdma_query_gid(c->dev, KV_PORT, 0, &gid);
	kv_check(c, !ret && be64_to_cpu(gid.global.subnet_prefix) ==
		 0xfe80000000000000ULL && gid.global.interface_id,
		 "query_gid", "ret=%d gid=%pI6", ret, gid.raw);
	mgt = !!(caps & IB_DEVICE_MEM_MGT_EXTENSIONS);
	mw = !!(caps & IB_DEVICE_MEM_WINDOW);
	kv_check(c, mgt && mw &&
		 c->dev->attrs.max_fast_reg_page_list_len >= KV_FR_PAGES,
		 "fastreg_caps",
		 "mem_mgt_extensions=%d mem_window=%d max_fast_reg=%u", mgt, mw,
		 c->dev->attrs.max_fast_reg_page_list_len);

	rdma_ah_set_dlid(&ah, peer_lid);
	rdma_ah_set_port_num(&ah, KV_PORT);
	h = rdma_create_ah(c->pd, &ah, RDMA_CREATE_AH_SLEEPABLE);
	ret = PTR_ERR_OR_ZERO(h);
	if (!ret)
		rdma_destroy_ah(h, RDMA_DESTROY_AH_SLEEPABLE);
	/* A GRH from the port's one GID, none from a second. */
	rdma_ah_set_grh(&ah, &gid, 0, 0, 1, 0);
	h = rdma_create_ah(c->pd, &ah, RDMA_CREATE_AH_SLEEPABLE);
	grh = PTR_ERR_OR_ZERO(h);
	if (!grh)
		rdma_destroy_ah(h, RDMA_DESTROY_AH_SLEEPABLE);
	rdma_ah_set_grh(&ah, &gid, 0, 1, 1, 0);
	h = rdma_create_ah(c->pd, &ah, RDMA_CREATE_AH_SLEEPABLE);
	if (!IS_ERR(h))
		rdma_destroy_ah(h, RDMA_DESTROY_AH_SLEEPABLE);
	kv_check(c, !ret && !grh && PTR_ERR(h) == -EINVAL, "create_ah",
		 "lid=%d grh=%d sgid_index1=%ld (want 0, 0 and %d)", ret, grh,
		 IS_ERR(h) ? PTR_ERR(h) : 0L, -EINVAL);
	kv_check_modify(c);
}

/* Checks a received message; returns it or NULL. */
static struct kv_msg *kv_recv_msg(struct kv_ctx *c, const char *name,
				  enum kv_kind kind, u32 salt, bool imm, u32 v)
{
	struct ib_wc wc = { };
	struct kv_msg *m;
	int ret;

	ret = kv_wait(c, &wc, kind == KV_HELLO ? wait_s * 1000 : KV_OP_MS);
	c->rwc = wc;
	if (ret || wc.status != IB_WC_SUCCESS || wc.opcode != IB_WC_RECV ||
	    wc.wr_id >= KV_RX_SLOTS) {
		kv_check(c, false, name, "ret=%d status=%s opcode=%d wr_id=%llu",
			 ret, ret ? "-" : ib_wc_status_msg(wc.status),
			 ret ? -1 : wc.opcode, ret ? 0 : wc.wr_id);
		return NULL;
	}
	m = (struct kv_msg *)(c->buf + KV_RX + wc.wr_id * KV_RX_SLOT);
	kv_check(c, le32_to_cpu(m->magic) == KV_MAGIC &&
		 le32_to_cpu(m->kind) == kind &&
		 le32_to_cpu(m->lid) == peer_lid &&
		 le32_to_cpu(m->qpn) == c->dest_qpn &&
		 wc.byte_len == sizeof(*m) && wc.src_qp == c->dest_qpn &&
		 wc.slid == peer_lid &&
		 !!(wc.wc_flags & IB_WC_WITH_IMM) == imm &&
		 (!imm || be32_to_cpu(wc.ex.imm_data) == v) &&
		 kv_mismatch(m->payload, sizeof(m->payload), peer_lid, salt) ==
		 sizeof(m->payload), name,
		 "kind=%u from_lid=%u from_qpn=%u src_qp=%u slid=%u bytes=%u imm=0x%08x payload_match=%u/%zu",
		 le32_to_cpu(m->kind), le32_to_cpu(m->lid),
		 le32_to_cpu(m->qpn), wc.src_qp, wc.slid, wc.byte_len,
		 wc.wc_flags & IB_WC_WITH_IMM ? be32_to_cpu(wc.ex.imm_data) : 0,
		 kv_mismatch(m->payload, sizeof(m->payload), peer_lid, salt),
		 sizeof(m->payload));
	return m;
}

/* A send completion for @wr_id with @status and @opcode. */
static bool kv_send_done(struct kv_ctx *c, const char *name, u64 wr_id,
			 enum ib_wc_status status, enum ib_wc_opcode opcode,
			 bool report_pass)
{
	struct ib_wc wc;
	int ret = kv_wait(c, &wc, KV_OP_MS);
	bool ok = !ret && wc.wr_id == wr_id && wc.status == status &&
		  (status != IB_WC_SUCCESS || wc.opcode == opcode);

	if (!ok || report_pass)
		kv_check(c, ok, name, "ret=%d wr_id=%llu status=%s opcode=%d",
			 ret, ret ? 0 : wc.wr_id,
			 ret ? "-" : ib_wc_status_msg(wc.status),
			 ret ? -1 : wc.opcode);
	return ok;
}

/*
 * Fast registration, as a storage initiator does it: separate
 * pages in a scatterlist, ib_alloc_mr, ib_map_mr_sg and IB_WR_REG_MR.
 */
static int kv_fr_setup(struct kv_ctx *c)
{
	struct page *pool[2 * KV_FR_PAGES] = { };
	int i, j, n = 0, gaps = 0, ret = 0;

	/*
	 * Pages of which no two in a row are physically adjacent: of twice
	 * as many as needed, at most one follows the page chosen last.
	 */
	for (i = 0; i < ARRAY_SIZE(pool); i++) {
		pool[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!pool[i]) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (n = 0; n < KV_FR_PAGES; n++) {
		for (j = 0; j < ARRAY_SIZE(pool); j++)
			if (pool[j] && (!n || page_to_pfn(pool[j]) !=
					page_to_pfn(c->fr_page[n - 1]) + 1))
				break;
		c->fr_page[n] = pool[j];
		pool[j] = NULL;
		if (n && page_to_pfn(c->fr_page[n]) !=
			 page_to_pfn(c->fr_page[n - 1]) + 1)
			gaps++;
	}
	sg_init_table(c->fr_sg, KV_FR_PAGES);
	for (i = 0; i < KV_FR_PAGES; i++)
		sg_set_page(&c->fr_sg[i], c->fr_page[i], PAGE_SIZE, 0);
	c->fr_nents = ib_dma_map_sg(c->dev, c->fr_sg, KV_FR_PAGES,
				    DMA_BIDIRECTIONAL);
	if (!c->fr_nents) {
		ret = -EIO;
		goto out;
	}
	c->fr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, KV_FR_PAGES);
	if (IS_ERR(c->fr)) {
		ret = PTR_ERR(c->fr);
		c->fr = NULL;
		goto out;
	}
	kv_check(c, gaps == KV_FR_PAGES - 1 && c->fr_nents == KV_FR_PAGES,
		 "fastreg_pages", "pages=%d sg_nents=%d discontiguous=%d/%d key=0x%x",
		 KV_FR_PAGES, c->fr_nents, gaps, KV_FR_PAGES - 1, c->fr->rkey);
out:
	for (i = 0; i < ARRAY_SIZE(pool); i++)
		if (pool[i])
			__free_page(pool[i]);
	return ret;
}

static void kv_fr_teardown(struct kv_ctx *c)
{
	int i, ret;
	u32 key;

	/* Under the key of a failed registration too (kv_fr_register_twice). */
	if (c->fr) {
		key = c->fr->rkey;
		ret = ib_dereg_mr(c->fr);
		kv_check(c, !ret, "fastreg_dereg", "key=0x%x ret=%d", key, ret);
	}
	if (c->fr_nents)
		ib_dma_unmap_sg(c->dev, c->fr_sg, KV_FR_PAGES,
				DMA_BIDIRECTIONAL);
	for (i = 0; i < KV_FR_PAGES; i++)
		if (c->fr_page[i])
			__free_page(c->fr_page[i]);
}

/* Byte @off of the fast-registration region. */
static u8 *kv_fr_at(struct kv_ctx *c, u32 off)
{
	return (u8 *)page_address(c->fr_page[off / PAGE_SIZE]) +
	       off % PAGE_SIZE;
}

static void kv_fr_fill(struct kv_ctx *c, u32 off, u32 len, u16 lid, u32 salt)
{
	u32 i;

	for (i = 0; i < len; i++)
		*kv_fr_at(c, off + i) = kv_byte(lid, salt, i);
	dma_sync_sg_for_device(c->dev->dma_device, c->fr_sg, KV_FR_PAGES,
			       DMA_BIDIRECTIONAL);
}

/* Like kv_mismatch(), over region bytes @off to @off + @len. */
static u32 kv_fr_mismatch(struct kv_ctx *c, u32 off, u32 len, u16 lid,
			  u32 salt)
{
	u32 i;

	dma_sync_sg_for_cpu(c->dev->dma_device, c->fr_sg, KV_FR_PAGES,
			    DMA_BIDIRECTIONAL);
	for (i = 0; i < len; i++)
		if (*kv_fr_at(c, off + i) != kv_byte(lid, salt, i))
			break;
	return i;
}

/* How many of region bytes @off to @off + @len are zero before another. */
static u32 kv_fr_zeros(struct kv_ctx *c, u32 off, u32 len)
{
	u32 i;

	dma_sync_sg_for_cpu(c->dev->dma_device, c->fr_sg, KV_FR_PAGES,
			    DMA_BIDIRECTIONAL);
	for (i = 0; i < len; i++)
		if (*kv_fr_at(c, off + i))
			break;
	return i;
}

/*
 * Maps the pages into the region and registers it with its current key
 * (IB_WR_REG_MR, signaled: IB_WC_REG_MR).
 */
static bool kv_fr_register(struct kv_ctx *c, const char *name, u64 wr_id)
{
	struct ib_reg_wr rw = {
		.wr = { .wr_id = wr_id, .opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED },
		.mr = c->fr,
		.key = c->fr->rkey,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			  IB_ACCESS_REMOTE_READ,
	};
	int n;

	n = ib_map_mr_sg(c->fr, c->fr_sg, c->fr_nents, NULL, PAGE_SIZE);
	if (n != c->fr_nents || c->fr->length != KV_FR_LEN) {
		kv_check(c, false, name, "map_mr_sg=%d of %d length=%llu", n,
			 c->fr_nents, c->fr->length);
		return false;
	}
	if (kv_post(c, &rw.wr) ||
	    !kv_send_done(c, name, wr_id, IB_WC_SUCCESS, IB_WC_REG_MR, false))
		return false;
	return kv_check(c, true, name,
			"key=0x%x iova=0x%llx length=%llu pages=%d", c->fr->rkey,
			c->fr->iova, c->fr->length, n);
}

/*
 * What post_send refuses of a fast registration: an SGE, and a key with
 * another key index than the region's.
 */
static void kv_fr_refused(struct kv_ctx *c)
{
	const struct ib_send_wr *bad = NULL;
	struct ib_sge sge = { .addr = c->dma, .length = 8,
			      .lkey = c->pd->local_dma_lkey };
	struct ib_reg_wr rw = {
		.wr = { .wr_id = 98, .opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED, .sg_list = &sge,
			.num_sge = 1 },
		.mr = c->fr,
		.key = c->fr->rkey,
		.access = IB_ACCESS_REMOTE_WRITE,
	};
	int sge_ret, key_ret;

	sge_ret = ib_post_send(c->qp, &rw.wr, &bad);
	rw.wr.num_sge = 0;
	rw.key = c->fr->rkey + 0x100;
	key_ret = ib_post_send(c->qp, &rw.wr, &bad);
	kv_check(c, sge_ret == -EINVAL && key_ret == -EINVAL && bad == &rw.wr,
		 "fastreg_refused", "sge=%d other_index=%d (want %d)", sge_ret,
		 key_ret, -EINVAL);
}

/*
 * The server's side of fast registration, between the client's WRITEs and
 * its DONE: the client WRITEs and READs through key K0, then invalidates
 * it with a SEND with Invalidate; we register again with K1 (which the
 * device refuses unless K0 freed the region) and say so; the client WRITEs
 * with immediate through K1; we invalidate K1 with LOCAL_INV, register K2
 * (again only possible once K1 is gone) and say so.
 */
static bool kv_server_fastreg(struct kv_ctx *c)
{
	u32 k0 = c->fr->rkey, k1, got, match;
	struct ib_send_wr inv = {
		.wr_id = 104, .opcode = IB_WR_LOCAL_INV,
		.send_flags = IB_SEND_SIGNALED,
	};
	struct ib_wc wc;
	int ret;

	if (!kv_recv_msg(c, "send_with_inv", KV_FR_INV, 10, false, 0))
		return false;
	got = c->rwc.wc_flags & IB_WC_WITH_INVALIDATE ?
	      c->rwc.ex.invalidate_rkey : 0;
	match = kv_fr_mismatch(c, KV_FR_W_OFF, KV_FR_W_LEN, peer_lid, 7);
	kv_check(c, got == k0, "recv_invalidate",
		 "with_invalidate=%d invalidate_rkey=0x%x key=0x%x",
		 !!(c->rwc.wc_flags & IB_WC_WITH_INVALIDATE), got, k0);
	kv_check(c, match == KV_FR_W_LEN, "fastreg_write",
		 "from_lid=%u match=%u/%u across_pages=%lu-%lu", peer_lid,
		 match, KV_FR_W_LEN, KV_FR_W_OFF / PAGE_SIZE,
		 (KV_FR_W_OFF + KV_FR_W_LEN - 1) / PAGE_SIZE);

	ib_update_fast_reg_key(c->fr, ib_inc_rkey(c->fr->rkey));
	k1 = c->fr->rkey;
	if (!kv_fr_register(c, "fastreg_rereg", 102) ||
	    kv_send(c, KV_FR_NEW, 11, 103, 0) ||
	    !kv_send_done(c, "fr_new_msg", 103, IB_WC_SUCCESS, IB_WC_SEND,
			  false))
		return false;

	ret = kv_wait(c, &wc, KV_OP_MS);
	match = kv_fr_mismatch(c, KV_FR_W2_OFF, KV_FR_W2_LEN, peer_lid, 9);
	kv_check(c, !ret && wc.status == IB_WC_SUCCESS &&
		 wc.opcode == IB_WC_RECV_RDMA_WITH_IMM &&
		 be32_to_cpu(wc.ex.imm_data) == (KV_IMM_FR | peer_lid) &&
		 match == KV_FR_W2_LEN, "fastreg_write_new_key",
		 "ret=%d status=%s key=0x%x from_lid=%u match=%u/%u", ret,
		 ret ? "-" : ib_wc_status_msg(wc.status), k1, peer_lid, match,
		 KV_FR_W2_LEN);

	inv.ex.invalidate_rkey = k1;
	if (kv_post(c, &inv) ||
	    !kv_send_done(c, "local_inv", 104, IB_WC_SUCCESS, IB_WC_LOCAL_INV,
			  true))
		return false;
	ib_update_fast_reg_key(c->fr, ib_inc_rkey(c->fr->rkey));
	if (!kv_fr_register(c, "fastreg_after_local_inv", 105) ||
	    kv_send(c, KV_FR_GONE, 12, 106, 0))
		return false;
	return kv_send_done(c, "fr_gone_msg", 106, IB_WC_SUCCESS, IB_WC_SEND,
			    false);
}

/*
 * A registration the device must fail: the region is still registered
 * (nothing invalidated it), so IB_WR_REG_MR with the next key completes
 * with IB_WC_LOC_PROT_ERR. Our QP is in error (the stale R_Key failed it):
 * it is connected again first, which needs nothing of the peer.
 */
static void kv_fr_register_twice(struct kv_ctx *c)
{
	struct ib_reg_wr rw = {
		.wr = { .wr_id = 107, .opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED },
		.mr = c->fr,
		.access = IB_ACCESS_REMOTE_WRITE,
	};
	u32 valid = c->fr->rkey;
	int n, ret;

	ret = kv_connect(c);
	if (ret) {
		kv_check(c, false, "fastreg_twice", "reconnect: %d", ret);
		return;
	}
	ib_update_fast_reg_key(c->fr, ib_inc_rkey(c->fr->rkey));
	rw.key = c->fr->rkey;
	n = ib_map_mr_sg(c->fr, c->fr_sg, c->fr_nents, NULL, PAGE_SIZE);
	if (n != c->fr_nents || kv_post(c, &rw.wr))
		return;
	if (kv_send_done(c, "fastreg_twice", 107, IB_WC_LOC_PROT_ERR, 0,
			 false))
		kv_check(c, true, "fastreg_twice",
			 "valid=0x%x key=0x%x status=%s", valid, rw.key,
			 ib_wc_status_msg(IB_WC_LOC_PROT_ERR));
}

/*
 * Check @name: ib_query_qp reports our QP in IB_QPS_ERR, the state the
 * device put it in without a modify_qp, and modify_qp refuses ERR -> RTS
 * with -EINVAL (IBA 10.3.1: out of ERR only to RESET).
 */
static void kv_qp_err(struct kv_ctx *c, const char *name)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_RTS };
	struct ib_qp_init_attr init;
	int ret, rts;

	rts = ib_modify_qp(c->qp, &a, IB_QP_STATE);
	memset(&a, 0, sizeof(a));
	ret = ib_query_qp(c->qp, &a, IB_QP_STATE | IB_QP_CUR_STATE, &init);
	kv_check(c, !ret && a.qp_state == IB_QPS_ERR &&
		 a.cur_qp_state == IB_QPS_ERR && rts == -EINVAL, name,
		 "ret=%d qp_state=%d cur_qp_state=%d modify_to_rts=%d", ret,
		 ret ? -1 : a.qp_state, ret ? -1 : a.cur_qp_state, rts);
}

static void kv_server(struct kv_ctx *c)
{
	struct kv_msg *m;
	u64 *counter = (u64 *)(c->buf + KV_ATOMIC);
	bool unchanged;
	u64 want;
	struct ib_wc wc;
	int i, ret;

	for (i = 0; i < KV_RX_SLOTS - 1; i++)
		kv_post_recv(c, i);
	m = kv_recv_msg(c, "send_recv", KV_HELLO, 1, false, 0);
	if (!m)
		return;
	memset(c->buf + KV_WRITE, 0, KV_DATA_LEN);
	kv_fill(c->buf + KV_READ, KV_DATA_LEN, c->lid, 4);
	*counter = 0x1000 + c->lid;
	/* The REPLY names the fast-registration region too. */
	kv_fr_fill(c, KV_FR_R_OFF, KV_FR_R_LEN, c->lid, 8);
	if (!kv_fr_register(c, "fastreg_reg", 101))
		return;
	kv_fr_refused(c);
	if (kv_send(c, KV_REPLY, 2, 100, KV_IMM_REPLY | c->lid) ||
	    !kv_send_done(c, "reply", 100, IB_WC_SUCCESS, IB_WC_SEND, false))
		return;

	/* The client's two WRITEs: the second one's immediate says done. */
	ret = kv_wait(c, &wc, KV_OP_MS);
	kv_check(c, !ret && wc.status == IB_WC_SUCCESS &&
		 wc.opcode == IB_WC_RECV_RDMA_WITH_IMM &&
		 (wc.wc_flags & IB_WC_WITH_IMM) &&
		 be32_to_cpu(wc.ex.imm_data) == (KV_IMM_WRITE | peer_lid) &&
		 kv_mismatch(c->buf + KV_WRITE, KV_DATA_LEN, peer_lid, 3) ==
		 KV_DATA_LEN, "rdma_write",
		 "ret=%d status=%s opcode=%d imm=0x%08x from_lid=%u match=%u/%u",
		 ret, ret ? "-" : ib_wc_status_msg(wc.status),
		 ret ? -1 : wc.opcode, ret ? 0 : be32_to_cpu(wc.ex.imm_data),
		 peer_lid, kv_mismatch(c->buf + KV_WRITE, KV_DATA_LEN,
				       peer_lid, 3), KV_DATA_LEN);

	if (!kv_server_fastreg(c))
		return;

	/* The spare receive for what the stale R_Key does to our QP. */
	kv_post_recv(c, KV_RX_SLOTS - 1);
	m = kv_recv_msg(c, "done_msg", KV_DONE, 5, false, 0);
	if (!m)
		return;
	want = KV_SWAP + peer_lid;
	kv_check(c, READ_ONCE(*counter) == want, "atomic",
		 "counter=0x%llx want=0x%llx (from 0x%x: +%u, then swapped by lid %u)",
		 READ_ONCE(*counter), want, 0x1000 + c->lid, KV_ADD, peer_lid);

	/*
	 * The WRITE with the invalidated key fails our responder: the QP
	 * goes to error, the region (zero there) stays as it was.
	 */
	ret = kv_wait(c, &wc, KV_OP_MS);
	unchanged = kv_mismatch(c->buf + KV_WRITE, KV_DATA_LEN, peer_lid, 3) ==
		    KV_DATA_LEN && kv_fr_zeros(c, 0, KV_FR_W_OFF) == KV_FR_W_OFF;
	kv_check(c, !ret && wc.status == IB_WC_WR_FLUSH_ERR &&
		 wc.wr_id == KV_RX_SLOTS - 1 && unchanged, "responder_error",
		 "ret=%d status=%s wr_id=%llu buffer_unchanged=%d", ret,
		 ret ? "-" : ib_wc_status_msg(wc.status), ret ? 0 : wc.wr_id,
		 unchanged);
	kv_qp_err(c, "responder_qp_err");
	if (!ret)
		kv_fr_register_twice(c);
}

/* The next completion, polled without arming the CQ. */
static int kv_poll_quietly(struct kv_ctx *c, struct ib_wc *wc)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(KV_OP_MS);
	int n;

	while (!(n = ib_poll_cq(c->cq, 1, wc))) {
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		usleep_range(1000, 2000);
	}
	if (n < 0)
		return n;
	kv_sync_cpu(c);
	return 0;
}

/*
 * The completion of work request @wr_id; other completions met on the way
 * (a receive flushed with a failed HELLO) are dropped.
 */
static int kv_wait_for(struct kv_ctx *c, u64 wr_id, struct ib_wc *wc)
{
	int ret;

	do {
		ret = kv_wait(c, wc, KV_OP_MS);
	} while (!ret && wc->wr_id != wr_id);
	return ret;
}

/* Sends HELLO until the server answers (its guest may still boot). */
static bool kv_hello(struct kv_ctx *c)
{
	unsigned long deadline = jiffies + wait_s * HZ;
	struct ib_wc wc;
	int tries = 0, ret;

	for (;;) {
		tries++;
		ret = kv_connect(c);
		if (!ret)
			ret = kv_post_recv(c, 0);
		if (!ret)
			ret = kv_send(c, KV_HELLO, 1, 1, 0);
		if (ret) {
			kv_check(c, false, "hello", "post: %d", ret);
			return false;
		}
		ret = kv_wait_for(c, 1, &wc);
		if (!ret && wc.status == IB_WC_SUCCESS)
			break;
		pr_info("IBTCA-KVERBS hello try=%d ret=%d status=%s\n", tries,
			ret, ret ? "-" : ib_wc_status_msg(wc.status));
		/*
		 * The QP is in error: wait for its receive to be flushed, so
		 * nothing of this try completes after the reset.
		 */
		if (ret || kv_wait_for(c, 0, &wc) ||
		    time_after(jiffies, deadline)) {
			kv_check(c, false, "hello", "no server after %d tries",
				 tries);
			return false;
		}
		msleep(500);
	}
	pr_info("IBTCA-KVERBS hello sent tries=%d\n", tries);
	return true;
}

/*
 * The client's side of fast registration (see kv_server_fastreg()): WRITE
 * and READ across the server's pages through key K0, a SEND with
 * Invalidate of K0, the same through the new key K1. Returns the key the
 * server invalidated by LOCAL_INV (0 on failure) and sets *@now to the
 * region's key after it.
 */
static u32 kv_client_fastreg(struct kv_ctx *c, u64 fr_addr, u32 k0, u32 *now)
{
	struct ib_sge sge = { .lkey = c->pd->local_dma_lkey };
	struct ib_rdma_wr rw = {
		.wr = { .sg_list = &sge, .num_sge = 1,
			.send_flags = IB_SEND_SIGNALED },
		.rkey = k0,
	};
	struct kv_msg *m;
	u32 k1, match;

	/* The server's answers to come: the new key, then LOCAL_INV done. */
	if (kv_post_recv(c, 1) || kv_post_recv(c, 2))
		return 0;
	kv_fill(c->buf + KV_FR_SRC, KV_FR_W_LEN, c->lid, 7);
	sge.addr = c->dma + KV_FR_SRC;
	sge.length = KV_FR_W_LEN;
	rw.remote_addr = fr_addr + KV_FR_W_OFF;
	rw.wr.wr_id = 20;
	rw.wr.opcode = IB_WR_RDMA_WRITE;
	if (kv_post(c, &rw.wr) ||
	    !kv_send_done(c, "fastreg_rdma_write", 20, IB_WC_SUCCESS,
			  IB_WC_RDMA_WRITE, true))
		return 0;
	memset(c->buf + KV_FR_DST, 0, KV_FR_R_LEN);
	sge.addr = c->dma + KV_FR_DST;
	sge.length = KV_FR_R_LEN;
	rw.remote_addr = fr_addr + KV_FR_R_OFF;
	rw.wr.wr_id = 21;
	rw.wr.opcode = IB_WR_RDMA_READ;
	if (kv_post(c, &rw.wr) ||
	    !kv_send_done(c, "fastreg_rdma_read_wc", 21, IB_WC_SUCCESS,
			  IB_WC_RDMA_READ, false))
		return 0;
	match = kv_mismatch(c->buf + KV_FR_DST, KV_FR_R_LEN, peer_lid, 8);
	kv_check(c, match == KV_FR_R_LEN, "fastreg_rdma_read",
		 "key=0x%x from_lid=%u match=%u/%u", k0, peer_lid, match,
		 KV_FR_R_LEN);
	if (kv_send_inv(c, KV_FR_INV, 10, 22, k0) ||
	    !kv_send_done(c, "send_with_inv", 22, IB_WC_SUCCESS, IB_WC_SEND,
			  true))
		return 0;

	m = kv_recv_msg(c, "fastreg_new_key", KV_FR_NEW, 11, false, 0);
	if (!m)
		return 0;
	k1 = le32_to_cpu(m->fr_rkey);
	if (!kv_check(c, k1 != k0 && !((k1 ^ k0) & ~0xffU) &&
		      le64_to_cpu(m->fr_addr) == fr_addr, "new_key",
		      "old=0x%x new=0x%x", k0, k1))
		return 0;
	kv_fill(c->buf + KV_FR_SRC, KV_FR_W2_LEN, c->lid, 9);
	sge.addr = c->dma + KV_FR_SRC;
	sge.length = KV_FR_W2_LEN;
	rw.rkey = k1;
	rw.remote_addr = fr_addr + KV_FR_W2_OFF;
	rw.wr.wr_id = 23;
	rw.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
	rw.wr.ex.imm_data = cpu_to_be32(KV_IMM_FR | c->lid);
	if (kv_post(c, &rw.wr) ||
	    !kv_send_done(c, "fastreg_write_new_key", 23, IB_WC_SUCCESS,
			  IB_WC_RDMA_WRITE, true))
		return 0;
	m = kv_recv_msg(c, "fastreg_local_inv", KV_FR_GONE, 12, false, 0);
	if (!m)
		return 0;
	*now = le32_to_cpu(m->fr_rkey);
	return k1;
}

/*
 * Interrupt moderation (modify_cq): a CQ that holds its interrupt for 8
 * completions still raises it for one, at the end of the period; then
 * back to an interrupt per arm. Writes the bytes already there.
 */
static void kv_moderated_arm(struct kv_ctx *c, u64 raddr, u32 rkey)
{
	struct ib_sge sge = { .addr = c->dma + KV_WRITE, .length = 64,
			      .lkey = c->pd->local_dma_lkey };
	struct ib_rdma_wr rw = {
		.wr = { .wr_id = 19, .opcode = IB_WR_RDMA_WRITE,
			.sg_list = &sge, .num_sge = 1,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = raddr + KV_WRITE,
		.rkey = rkey,
	};
	unsigned long fired;
	int set, ret, reset;
	struct ib_wc wc;

	set = rdma_set_cq_moderation(c->cq, 8, 2000);
	reinit_completion(&c->event);
	ib_req_notify_cq(c->cq, IB_CQ_NEXT_COMP);
	if (kv_post(c, &rw.wr))
		return;
	fired = wait_for_completion_timeout(&c->event,
					    msecs_to_jiffies(KV_OP_MS));
	ret = kv_poll_quietly(c, &wc);
	reset = rdma_set_cq_moderation(c->cq, 1, 0);
	kv_check(c, !set && fired && !ret && wc.wr_id == 19 &&
		 wc.status == IB_WC_SUCCESS && !reset, "cq_moderation",
		 "set=%d fired=%d ret=%d reset=%d", set, !!fired, ret, reset);
}

static void kv_client(struct kv_ctx *c)
{
	u64 *res = (u64 *)(c->buf + KV_ATOMIC);
	struct ib_sge sge = { .lkey = c->pd->local_dma_lkey };
	const struct ib_send_wr *bad = NULL;
	struct ib_atomic_wr aw = { };
	struct ib_send_wr inl;
	struct ib_sge inl_sge;
	bool quiet, fired;
	int events;
	struct ib_rdma_wr rw = { };
	struct kv_msg *m;
	u64 raddr, init, fr_addr;
	u32 rkey, peer, fr_key, stale, now = 0;
	struct ib_wc wc;
	int ret;

	if (!kv_hello(c))
		return;
	m = kv_recv_msg(c, "send_recv", KV_REPLY, 2, true,
			KV_IMM_REPLY | peer_lid);
	if (!m)
		return;
	raddr = le64_to_cpu(m->addr);
	rkey = le32_to_cpu(m->rkey);
	fr_addr = le64_to_cpu(m->fr_addr);
	fr_key = le32_to_cpu(m->fr_rkey);
	peer = le32_to_cpu(m->lid);
	init = 0x1000 + peer;

	/* WRITE (unsignaled: no completion) and WRITE with immediate. */
	kv_fill(c->buf + KV_WRITE, KV_DATA_LEN, c->lid, 3);
	rw.wr.sg_list = &sge;
	rw.wr.num_sge = 1;
	rw.rkey = rkey;
	sge.addr = c->dma + KV_WRITE;
	sge.length = KV_DATA_LEN / 2;
	rw.remote_addr = raddr + KV_WRITE;
	rw.wr.wr_id = 10;
	rw.wr.opcode = IB_WR_RDMA_WRITE;
	if (kv_post(c, &rw.wr))
		return;
	sge.addr += KV_DATA_LEN / 2;
	rw.remote_addr += KV_DATA_LEN / 2;
	rw.wr.wr_id = 11;
	rw.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
	rw.wr.send_flags = IB_SEND_SIGNALED;
	rw.wr.ex.imm_data = cpu_to_be32(KV_IMM_WRITE | c->lid);
	if (kv_post(c, &rw.wr) ||
	    !kv_send_done(c, "rdma_write", 11, IB_WC_SUCCESS,
			  IB_WC_RDMA_WRITE, true))
		return;

	/* READ the server's pattern. */
	memset(c->buf + KV_READ, 0, KV_DATA_LEN);
	sge.addr = c->dma + KV_READ;
	sge.length = KV_DATA_LEN;
	rw.remote_addr = raddr + KV_READ;
	rw.wr.wr_id = 12;
	rw.wr.opcode = IB_WR_RDMA_READ;
	if (kv_post(c, &rw.wr) ||
	    !kv_send_done(c, "rdma_read_wc", 12, IB_WC_SUCCESS,
			  IB_WC_RDMA_READ, false))
		return;
	ret = kv_mismatch(c->buf + KV_READ, KV_DATA_LEN, peer, 4);
	kv_check(c, ret == KV_DATA_LEN, "rdma_read",
		 "from_lid=%u match=%d/%u", peer, ret, KV_DATA_LEN);

	/* Fetch-and-add, then compare-and-swap on the server's counter. */
	res[0] = 0;
	res[1] = 0;
	sge.addr = c->dma + KV_ATOMIC;
	sge.length = sizeof(u64);
	aw.wr.sg_list = &sge;
	aw.wr.num_sge = 1;
	aw.wr.send_flags = IB_SEND_SIGNALED;
	aw.remote_addr = raddr + KV_ATOMIC;
	aw.rkey = rkey;
	aw.wr.wr_id = 13;
	aw.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	aw.compare_add = KV_ADD;
	if (kv_post(c, &aw.wr) ||
	    !kv_send_done(c, "fetch_add_wc", 13, IB_WC_SUCCESS,
			  IB_WC_FETCH_ADD, false))
		return;
	sge.addr += sizeof(u64);
	aw.wr.wr_id = 14;
	aw.wr.opcode = IB_WR_ATOMIC_CMP_AND_SWP;
	aw.compare_add = init + KV_ADD;
	aw.swap = KV_SWAP + c->lid;
	if (kv_post(c, &aw.wr) ||
	    !kv_send_done(c, "cmp_swp_wc", 14, IB_WC_SUCCESS,
			  IB_WC_COMP_SWAP, false))
		return;
	kv_check(c, res[0] == init && res[1] == init + KV_ADD, "atomic",
		 "fetch_add old=0x%llx want 0x%llx, cmp_swp old=0x%llx want 0x%llx",
		 res[0], init, res[1], init + KV_ADD);

	stale = kv_client_fastreg(c, fr_addr, fr_key, &now);
	if (!stale)
		return;

	/*
	 * DONE, chained with a request the QP cannot take (65 bytes inline,
	 * one past max_inline_data): the chain stops there, with bad_wr on
	 * it and DONE posted.
	 */
	inl_sge = (struct ib_sge) { .addr = (uintptr_t)c->buf, .length = 65 };
	inl = (struct ib_send_wr) { .wr_id = 99, .opcode = IB_WR_SEND,
				    .sg_list = &inl_sge, .num_sge = 1,
				    .send_flags = IB_SEND_INLINE };
	ret = kv_send_chain(c, KV_DONE, 5, 15, 0, &inl, &bad);
	kv_check(c, ret == -EINVAL && bad == &inl, "post_send_chain",
		 "ret=%d bad_wr=%s", ret,
		 bad == &inl ? "the inline one" : "WRONG");
	if (!kv_send_done(c, "done_msg", 15, IB_WC_SUCCESS, IB_WC_SEND, false))
		return;

	kv_moderated_arm(c, raddr, rkey);

	/*
	 * A CQ armed for solicited events only: a plain completion (a WRITE
	 * of the bytes already there) raises no event, a failed one does.
	 * kv_wait() may have left the CQ armed for the next completion (its
	 * arm reported a missed event and it polled instead), so one plain
	 * WRITE whose event is awaited first leaves the CQ unarmed.
	 */
	sge.addr = c->dma + KV_WRITE;
	sge.length = 64;
	rw.wr.wr_id = 17;
	rw.wr.opcode = IB_WR_RDMA_WRITE;
	rw.remote_addr = raddr + KV_WRITE;
	reinit_completion(&c->event);
	ib_req_notify_cq(c->cq, IB_CQ_NEXT_COMP);
	if (kv_post(c, &rw.wr))
		return;
	fired = wait_for_completion_timeout(&c->event,
					    msecs_to_jiffies(KV_OP_MS));
	ret = kv_poll_quietly(c, &wc);
	if (!fired || ret || wc.wr_id != 17 || wc.status != IB_WC_SUCCESS) {
		kv_check(c, false, "solicited_arm", "disarm: fired=%d ret=%d",
			 !!fired, ret);
		return;
	}
	reinit_completion(&c->event);
	events = atomic_read(&c->events);
	ib_req_notify_cq(c->cq, IB_CQ_SOLICITED);
	sge.addr = c->dma + KV_WRITE;
	sge.length = 64;
	rw.wr.wr_id = 18;
	rw.wr.opcode = IB_WR_RDMA_WRITE;
	rw.remote_addr = raddr + KV_WRITE;
	if (kv_post(c, &rw.wr))
		return;
	ret = kv_poll_quietly(c, &wc);
	quiet = atomic_read(&c->events) == events;
	if (ret || wc.wr_id != 18 || wc.status != IB_WC_SUCCESS) {
		kv_check(c, false, "solicited_arm", "write: ret=%d", ret);
		return;
	}

	/*
	 * The R_Key the server invalidated with LOCAL_INV, at the start of
	 * its region (registered again meanwhile, under another key).
	 */
	reinit_completion(&c->event);
	ib_req_notify_cq(c->cq, IB_CQ_SOLICITED);
	rw.wr.wr_id = 16;
	rw.rkey = stale;
	rw.remote_addr = fr_addr;
	if (kv_post(c, &rw.wr))
		return;
	fired = wait_for_completion_timeout(&c->event,
					    msecs_to_jiffies(KV_OP_MS));
	kv_check(c, quiet && fired, "solicited_arm",
		 "plain_completion=%s failed_completion=%s",
		 quiet ? "no_event" : "EVENT", fired ? "event" : "NO_EVENT");
	ret = kv_wait(c, &wc, KV_OP_MS);
	kv_check(c, !ret && wc.wr_id == 16 &&
		 wc.status == IB_WC_REM_ACCESS_ERR, "stale_rkey",
		 "rkey=0x%x (invalidated; valid 0x%x) ret=%d status=%s (%d) vendor_err=0x%x",
		 stale, now, ret, ret ? "-" : ib_wc_status_msg(wc.status),
		 ret ? -1 : wc.status, ret ? 0 : wc.vendor_err);
	kv_qp_err(c, "stale_rkey_qp_err");
	/* The QP is in error now: the next request is flushed. */
	if (kv_send(c, KV_LATE, 6, 17, 0))
		return;
	kv_send_done(c, "flush", 17, IB_WC_WR_FLUSH_ERR, IB_WC_SEND, true);
}

static int kv_setup(struct kv_ctx *c)
{
	struct ib_cq_init_attr ca = { .cqe = 32 };
	struct ib_qp_init_attr qa = {
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
		.port_num = KV_PORT,
	};
	unsigned long deadline = jiffies + wait_s * HZ;
	struct ib_port_attr pa;
	int ret;

	for (;;) {
		ret = ib_query_port(c->dev, KV_PORT, &pa);
		if (!ret && pa.state == IB_PORT_ACTIVE)
			break;
		if (time_after(jiffies, deadline))
			return ret ? ret : -ENETDOWN;
		msleep(100);
	}
	c->lid = pa.lid;
	c->pd = ib_alloc_pd(c->dev, 0);
	if (IS_ERR(c->pd))
		return PTR_ERR(c->pd);
	/* A DMA MR with remote rights (pd->local_dma_lkey for local SGEs). */
	c->mr = kvc_dma_mr(c->pd, IB_ACCESS_LOCAL_WRITE |
			   IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ |
			   IB_ACCESS_REMOTE_ATOMIC);
	if (IS_ERR(c->mr))
		return PTR_ERR(c->mr);
	c->cq = ib_create_cq(c->dev, kv_comp, NULL, c, &ca);
	if (IS_ERR(c->cq))
		return PTR_ERR(c->cq);
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	c->qp = ib_create_qp(c->pd, &qa);
	if (IS_ERR(c->qp))
		return PTR_ERR(c->qp);
	c->qpn = c->qp->qp_num;
	c->dest_qpn = peer_qpn ? peer_qpn : c->qpn;
	if (!strcmp(role, "server")) {
		ret = kv_fr_setup(c);
		if (ret)
			return ret;
	}
	c->buf = kzalloc(KV_BUF_SIZE, GFP_KERNEL);
	if (!c->buf)
		return -ENOMEM;
	c->dma = ib_dma_map_single(c->dev, c->buf, KV_BUF_SIZE,
				   DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(c->dev, c->dma)) {
		kfree(c->buf);
		c->buf = NULL;
		return -EIO;
	}
	return kv_connect(c);
}

static void kv_teardown(struct kv_ctx *c)
{
	if (c->qp && !IS_ERR(c->qp))
		ib_destroy_qp(c->qp);
	if (c->cq && !IS_ERR(c->cq))
		ib_destroy_cq(c->cq);
	if (c->buf) {
		ib_dma_unmap_single(c->dev, c->dma, KV_BUF_SIZE,
				    DMA_BIDIRECTIONAL);
		kfree(c->buf);
	}
	kv_fr_teardown(c);
	if (c->mr && !IS_ERR(c->mr))
		c->dev->ops.dereg_mr(c->mr, NULL);
	if (c->pd && !IS_ERR(c->pd))
		ib_dealloc_pd(c->pd);
}

static void kv_run(struct ib_device *dev)
{
	bool server = !strcmp(role, "server");
	struct kv_ctx *c;
	int ret;

	c = kzalloc_obj(*c, GFP_KERNEL);
	if (!c)
		return;
	c->dev = dev;
	c->t.tag = "IBTCA-KVERBS";
	init_completion(&c->event);
	atomic_set(&c->events, 0);
	ret = kv_setup(c);
	if (kv_check(c, !ret, "setup",
		     "dev=%s role=%s lid=%u qpn=%u peer_lid=%u peer_qpn=%u ret=%d",
		     dev_name(&dev->dev), role, c->lid, c->qpn, peer_lid,
		     c->dest_qpn, ret)) {
		kv_check_local(c);
		if (server)
			kv_server(c);
		else
			kv_client(c);
	}
	kv_teardown(c);
	pr_info("IBTCA-KVERBS result role=%s passed=%d failed=%d events=%d\n",
		role, c->t.passed, c->t.failed, atomic_read(&c->events));
	kfree(c);
}

static struct ib_client kv_client_ops = {
	.name = "ibtca_kverbs_test",
};

static int __init kv_init(void)
{
	if (strcmp(role, "server") && strcmp(role, "client")) {
		pr_err("role must be server or client, not '%s'\n", role);
		return -EINVAL;
	}
	if (!peer_lid || peer_lid >= 0xc000) {
		pr_err("peer_lid=%u: give the other guest's LID\n", peer_lid);
		return -EINVAL;
	}
	return kvc_start(&kv_client_ops, "IBTCA-KVERBS", kv_run);
}

static void __exit kv_exit(void)
{
	ib_unregister_client(&kv_client_ops);
}

module_init(kv_init);
module_exit(kv_exit);

MODULE_DESCRIPTION("ibtca kernel verbs test: a consumer of ibtca0 between two guests");
MODULE_AUTHOR("ibtca project");
MODULE_LICENSE("GPL");
