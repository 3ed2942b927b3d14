// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ibtca-provider-test, second part: the extended verbs on one device,
 * loopback to its own LID between RC QPs a (the requester) and b (the
 * responder), both made by ibv_create_qp_ex with every send operation the
 * provider has, completing on one CQ made by ibv_create_cq_ex and read
 * with ibv_start_poll/ibv_next_poll and the ibv_wc_read_* accessors.
 *
 * - ibv_wr_*: RDMA WRITE over two SGEs and WRITE with immediate, SEND and
 *   SEND with immediate, RDMA READ, both atomics: the bytes that land are
 *   checked, and each completion's fields; a batch dropped by ibv_wr_abort
 *   and batches ibv_wr_complete refuses post nothing.
 * - ibv_wr_set_inline_data and ibv_wr_set_inline_data_list: a WRITE of 64
 *   inline bytes and a SEND of three buffers (60 bytes) land byte for
 *   byte, from stack memory no key covers, overwritten between the setter
 *   and ibv_wr_complete; 65 bytes either way make ibv_wr_complete return
 *   ENOMEM (mlx5's errno) and post nothing, as does inline data on a READ
 *   with EINVAL.
 * - A type 1 window bound by b (ibv_bind_mw): a's WRITE through it works,
 *   and neither LOCAL_INV (IBV_WC_LOC_PROT_ERR) nor a SEND with
 *   Invalidate (IBV_WC_REM_INV_REQ_ERR) ends its binding.
 * - Type 2 windows bound by b (ibv_wr_bind_mw and IBV_WR_BIND_MW
 *   in ibv_post_send): a's WRITE and READ through the window's R_Key
 *   work; a WRITE past its end, an atomic it grants no right for and the
 *   key of a moved window get IBV_WC_REM_ACCESS_ERR; a bind with a stale
 *   key IBV_WC_MW_BIND_ERR; after LOCAL_INV and after a SEND with
 *   Invalidate the old R_Key is refused; a bound window deallocates and
 *   frees its region.
 *
 * After an error completion both QPs go back through RESET to RTS.
 * Last, a completion channel under an extended CQ is busy while the CQ
 * lives and is destroyed once the CQ is.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "provider_test.h"

#define BUF 8192
#define ATOMIC_OFF 4096		/* the remote 8-byte word of the atomics */
#define RECV_OFF 6144		/* receive buffers in the remote buffer */
#define INLINE_MAX 64		/* the device's IBTCA_MAX_INLINE_DATA */

/* What one completion said, through the ibv_wc_read_* accessors. */
struct cqe {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, imm, qp_num, src_qp, slid, flags;
};

struct ext {
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *ax, *bx;
	struct ibv_mr *lmr, *rmr;
	uint16_t lid;
};

/* Local (a's) and remote (b's) bytes, 8-byte aligned for the atomics. */
static uint64_t lmem[BUF / 8], rmem[BUF / 8];
static unsigned char *const lbuf = (unsigned char *)lmem;
static unsigned char *const rbuf = (unsigned char *)rmem;

static void read_cqe(struct ibv_cq_ex *cq, struct cqe *c)
{
	c->wr_id = cq->wr_id;
	c->status = cq->status;
	c->opcode = ibv_wc_read_opcode(cq);
	c->byte_len = ibv_wc_read_byte_len(cq);
	c->flags = ibv_wc_read_wc_flags(cq);
	c->imm = c->flags & IBV_WC_WITH_INV ?
		 ibv_wc_read_invalidated_rkey(cq) :
		 be32toh(ibv_wc_read_imm_data(cq));
	c->qp_num = ibv_wc_read_qp_num(cq);
	c->src_qp = ibv_wc_read_src_qp(cq);
	c->slid = ibv_wc_read_slid(cq);
}

/*
 * Up to @n completions into @c: each poll session takes what is there
 * (ibv_start_poll, then ibv_next_poll); generous for a TCG guest (30 s).
 */
static int collect(struct ibv_cq_ex *cq, struct cqe *c, int n)
{
	struct ibv_poll_cq_attr attr = {};
	int got = 0, i, err;

	for (i = 0; got < n && i < 30000; i++) {
		err = ibv_start_poll(cq, &attr);
		if (err == ENOENT) {
			usleep(1000);
			continue;
		}
		if (err)
			return got;
		do
			read_cqe(cq, &c[got++]);
		while (got < n && !ibv_next_poll(cq));
		ibv_end_poll(cq);
	}
	return got;
}

/* Whether the CQ is empty now (nothing left over, nothing posted twice). */
static int cq_empty(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr attr = {};

	if (ibv_start_poll(cq, &attr) == ENOENT)
		return 1;
	ibv_end_poll(cq);
	return 0;
}

/* The completion of QP @qpn with @wr_id among @n, or NULL. */
static const struct cqe *find(const struct cqe *c, int n, uint32_t qpn,
			      uint64_t wr_id)
{
	int i;

	for (i = 0; i < n; i++)
		if (c[i].qp_num == qpn && c[i].wr_id == wr_id)
			return &c[i];
	return NULL;
}

/* One completion, expected from QP @qpn with @wr_id; its status or -1. */
static int one(struct ext *e, uint32_t qpn, uint64_t wr_id, struct cqe *c)
{
	if (collect(e->cq, c, 1) != 1 || c->qp_num != qpn || c->wr_id != wr_id)
		return -1;
	return c->status;
}

static int post_recv(struct ext *e, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rbuf + off, .length = len,
		.lkey = e->rmr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
	}, *bad;

	return ibv_post_recv(e->b, &wr, &bad);
}

/* Both QPs through RESET back to RTS, after an error completion. */
static int reconnect(struct ext *e)
{
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };

	if (ibv_modify_qp(e->a, &r, IBV_QP_STATE) ||
	    ibv_modify_qp(e->b, &r, IBV_QP_STATE))
		return -1;
	while (!cq_empty(e->cq))
		;
	return rc_connect(e->a, e->b->qp_num, e->lid) ||
	       rc_connect(e->b, e->a->qp_num, e->lid);
}

/* a: one signaled request built by @build, posted; its completion. */
#define A_POST(e, id, build) do {					\
	ibv_wr_start((e)->ax);						\
	(e)->ax->wr_id = (id);						\
	(e)->ax->wr_flags = IBV_SEND_SIGNALED;				\
	build;								\
	err = ibv_wr_complete((e)->ax);					\
} while (0)

static int setup(struct ext *e, struct ibv_context *ctx)
{
	struct ibv_cq_init_attr_ex cattr = {
		.cqe = 32,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_qp_init_attr_ex q = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 4, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = e->pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
			IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			IBV_QP_EX_WITH_RDMA_READ |
			IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |
			IBV_QP_EX_WITH_SEND_WITH_INV,
	};
	struct ibv_port_attr port;
	struct ibv_qp_init_attr_ex tso = {};
	struct ibv_qp *refused;
	int err;

	e->cq = ibv_create_cq_ex(ctx, &cattr);
	if (!e->cq || ibv_query_port(ctx, 1, &port)) {
		step("ex_setup", 0, "cq_ex or port: %s", strerror(errno));
		return -1;
	}
	e->lid = port.lid;
	q.send_cq = ibv_cq_ex_to_cq(e->cq);
	q.recv_cq = q.send_cq;
	/* An operation the device does not have is refused at creation. */
	tso = q;
	tso.send_ops_flags |= IBV_QP_EX_WITH_TSO;
	errno = 0;
	refused = ibv_create_qp_ex(ctx, &tso);
	err = errno;
	step("ex_unsupported_op", !refused && err == EOPNOTSUPP,
	     "IBV_QP_EX_WITH_TSO: %s (errno %d)",
	     refused ? "created" : strerror(err), err);
	if (refused)
		ibv_destroy_qp(refused);
	e->a = ibv_create_qp_ex(ctx, &q);
	e->b = ibv_create_qp_ex(ctx, &q);
	e->ax = e->a ? ibv_qp_to_qp_ex(e->a) : NULL;
	e->bx = e->b ? ibv_qp_to_qp_ex(e->b) : NULL;
	e->lmr = ibv_reg_mr(e->pd, lbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
	e->rmr = ibv_reg_mr(e->pd, rbuf, BUF, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
	if (!e->ax || !e->bx || !e->lmr || !e->rmr ||
	    rc_connect(e->a, e->b->qp_num, e->lid) ||
	    rc_connect(e->b, e->a->qp_num, e->lid)) {
		step("ex_setup", 0, "qp_ex, regions or connect: %s",
		     strerror(errno));
		return -1;
	}
	step("ex_setup", 1, "qpn %u <-> %u lid %u", e->a->qp_num,
	     e->b->qp_num, e->lid);
	return 0;
}

/* WRITE over two SGEs and WRITE with immediate, one batch. */
static void ex_write(struct ext *e)
{
	struct ibv_sge sg[2] = {
		{ (uintptr_t)lbuf, 1000, e->lmr->lkey },
		{ (uintptr_t)lbuf + 1000, 2072, e->lmr->lkey },
	};
	const struct cqe *w1, *w2, *r;
	struct cqe c[3];
	int i, n, err;

	for (i = 0; i < BUF; i++)
		lbuf[i] = (unsigned char)(i * 13 + 5);
	memset(rbuf, 0, BUF);
	err = post_recv(e, 100, RECV_OFF, 1024);
	ibv_wr_start(e->ax);
	e->ax->wr_id = 1;
	e->ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf);
	ibv_wr_set_sge_list(e->ax, 2, sg);
	e->ax->wr_id = 2;
	ibv_wr_rdma_write_imm(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 3072,
			      htobe32(0x12345678));
	ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf + 3072, 1024);
	err = err ?: ibv_wr_complete(e->ax);
	n = err ? 0 : collect(e->cq, c, 3);
	w1 = find(c, n, e->a->qp_num, 1);
	w2 = find(c, n, e->a->qp_num, 2);
	r = find(c, n, e->b->qp_num, 100);
	step("ex_write", n == 3 && w1 && w2 && !w1->status && !w2->status &&
	     w1->opcode == IBV_WC_RDMA_WRITE && w2->opcode == IBV_WC_RDMA_WRITE &&
	     !memcmp(lbuf, rbuf, 4096), "err=%d completions=%d bytes %s",
	     err, n, memcmp(lbuf, rbuf, 4096) ? "differ" : "match");
	step("ex_write_imm_cqe", r && !r->status &&
	     r->opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	     (r->flags & IBV_WC_WITH_IMM) && r->imm == 0x12345678 &&
	     r->byte_len == 1024 && r->src_qp == e->a->qp_num &&
	     r->slid == e->lid,
	     "status=%d opcode=%d imm=0x%x byte_len=%u src_qp=%u slid=%u",
	     r ? (int)r->status : -1, r ? (int)r->opcode : -1, r ? r->imm : 0,
	     r ? r->byte_len : 0, r ? r->src_qp : 0, r ? r->slid : 0);
}

/* SEND and SEND with immediate into two receives. */
static void ex_send(struct ext *e)
{
	const struct cqe *r1, *r2;
	struct cqe c[4];
	int n, err, ok;

	err = post_recv(e, 101, RECV_OFF, 1024) ||
	      post_recv(e, 102, RECV_OFF + 1024, 1024);
	ibv_wr_start(e->ax);
	e->ax->wr_flags = IBV_SEND_SIGNALED;
	e->ax->wr_id = 3;
	ibv_wr_send(e->ax);
	ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf + 100, 500);
	e->ax->wr_id = 4;
	ibv_wr_send_imm(e->ax, htobe32(0xabcdef01));
	ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf + 2000, 777);
	err = err ?: ibv_wr_complete(e->ax);
	n = err ? 0 : collect(e->cq, c, 4);
	r1 = find(c, n, e->b->qp_num, 101);
	r2 = find(c, n, e->b->qp_num, 102);
	ok = n == 4 && r1 && r2 && !r1->status && !r2->status &&
	     r1->opcode == IBV_WC_RECV && r1->byte_len == 500 &&
	     !(r1->flags & IBV_WC_WITH_IMM) && r2->byte_len == 777 &&
	     (r2->flags & IBV_WC_WITH_IMM) && r2->imm == 0xabcdef01 &&
	     find(c, n, e->a->qp_num, 3) && find(c, n, e->a->qp_num, 4) &&
	     !memcmp(rbuf + RECV_OFF, lbuf + 100, 500) &&
	     !memcmp(rbuf + RECV_OFF + 1024, lbuf + 2000, 777);
	step("ex_send", ok, "err=%d completions=%d byte_len=%u,%u imm=0x%x bytes %s",
	     err, n, r1 ? r1->byte_len : 0, r2 ? r2->byte_len : 0,
	     r2 ? r2->imm : 0, ok ? "match" : "differ");
}

/* RDMA READ of the remote buffer, then both atomics in one batch. */
static void ex_read_atomics(struct ext *e)
{
	uint64_t *word = (uint64_t *)(rbuf + ATOMIC_OFF);
	uint64_t *old = (uint64_t *)(lbuf + 6000);
	struct cqe c[2];
	int n, err, st;

	memset(lbuf + 4096, 0, 1024);
	A_POST(e, 5, ibv_wr_rdma_read(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 1000);
	       ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf + 4096, 1024));
	st = err ? -1 : one(e, e->a->qp_num, 5, c);
	step("ex_read", st == IBV_WC_SUCCESS && c[0].opcode == IBV_WC_RDMA_READ &&
	     c[0].byte_len == 1024 && !memcmp(lbuf + 4096, rbuf + 1000, 1024),
	     "status=%d byte_len=%u bytes %s", st, c[0].byte_len,
	     memcmp(lbuf + 4096, rbuf + 1000, 1024) ? "differ" : "match");

	*word = 100;
	old[0] = old[1] = 0;
	ibv_wr_start(e->ax);
	e->ax->wr_flags = IBV_SEND_SIGNALED;
	e->ax->wr_id = 6;
	ibv_wr_atomic_cmp_swp(e->ax, e->rmr->rkey, (uintptr_t)word, 100, 555);
	ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)&old[0], 8);
	e->ax->wr_id = 7;
	ibv_wr_atomic_fetch_add(e->ax, e->rmr->rkey, (uintptr_t)word, 45);
	ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)&old[1], 8);
	err = ibv_wr_complete(e->ax);
	n = err ? 0 : collect(e->cq, c, 2);
	step("ex_atomics", n == 2 && !c[0].status && !c[1].status &&
	     c[0].opcode == IBV_WC_COMP_SWAP && c[1].opcode == IBV_WC_FETCH_ADD &&
	     old[0] == 100 && old[1] == 555 && *word == 600,
	     "err=%d completions=%d old=%llu,%llu word=%llu", err, n,
	     (unsigned long long)old[0], (unsigned long long)old[1],
	     (unsigned long long)*word);
}

/* A batch dropped by ibv_wr_abort and batches refused post nothing. */
static void ex_abort_refused(struct ext *e)
{
	unsigned char before[64];
	struct ibv_sge five[5];
	struct cqe c[1];
	int err, e1, e2, e3, st, i;

	memcpy(before, rbuf, sizeof(before));
	for (i = 0; i < 5; i++)
		five[i] = (struct ibv_sge){ (uintptr_t)lbuf, 8, e->lmr->lkey };
	ibv_wr_start(e->ax);
	e->ax->wr_id = 50;
	e->ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf);
	ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf + 4096, 64);
	ibv_wr_abort(e->ax);
	/* An SGE with no request, five SGEs, an atomic without its SGE. */
	ibv_wr_start(e->ax);
	ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf, 8);
	e1 = ibv_wr_complete(e->ax);
	ibv_wr_start(e->ax);
	ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf);
	ibv_wr_set_sge_list(e->ax, 5, five);
	e2 = ibv_wr_complete(e->ax);
	ibv_wr_start(e->ax);
	ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf);
	ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf, 8);
	ibv_wr_atomic_fetch_add(e->ax, e->rmr->rkey, (uintptr_t)rbuf, 1);
	e3 = ibv_wr_complete(e->ax);
	/* What follows is the only thing the device ran. */
	A_POST(e, 8, ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 5000);
	       ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf, 8));
	st = err ? -1 : one(e, e->a->qp_num, 8, c);
	step("ex_abort_refused", e1 == EINVAL && e2 == EINVAL && e3 == EINVAL &&
	     st == IBV_WC_SUCCESS && cq_empty(e->cq) &&
	     !memcmp(before, rbuf, sizeof(before)) &&
	     !memcmp(rbuf + 5000, lbuf, 8),
	     "refused %d,%d,%d; next status=%d; aborted target %s", e1, e2, e3,
	     st, memcmp(before, rbuf, sizeof(before)) ? "changed" : "unchanged");
}

/* Byte @i of inline message @k. */
static unsigned char inl_byte(int k, int i)
{
	return (unsigned char)(i * 11 + k * 37 + 1);
}

/*
 * ibv_wr_set_inline_data(_list): a WRITE of 64 bytes and a SEND of three
 * buffers, copied at the call (the stack buffers change before
 * ibv_wr_complete); 65 bytes and inline on a READ refused, nothing posted.
 */
static void ex_inline(struct ext *e)
{
	unsigned char w[INLINE_MAX + 1], s1[10], s2[20], s3[30];
	struct ibv_data_buf list[3] = {
		{ s1, sizeof(s1) }, { s2, sizeof(s2) }, { s3, sizeof(s3) },
	};
	struct ibv_data_buf long_list[2] = {
		{ w, 33 }, { s3, 32 },
	};
	unsigned char want[60], before[128];
	const struct cqe *r, *aw, *as;
	struct cqe c[3];
	int i, n, err, e1, e2, e3, ok, st;

	for (i = 0; i < (int)sizeof(w); i++)
		w[i] = inl_byte(0, i);
	for (i = 0; i < 10; i++)
		s1[i] = want[i] = inl_byte(1, i);
	for (i = 0; i < 20; i++)
		s2[i] = want[10 + i] = inl_byte(1, 10 + i);
	for (i = 0; i < 30; i++)
		s3[i] = want[30 + i] = inl_byte(1, 30 + i);
	memset(rbuf, 0, BUF);
	err = post_recv(e, 110, RECV_OFF, 1024);
	ibv_wr_start(e->ax);
	e->ax->wr_flags = IBV_SEND_SIGNALED;
	e->ax->wr_id = 40;
	ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 200);
	ibv_wr_set_inline_data(e->ax, w, INLINE_MAX);
	e->ax->wr_id = 41;
	ibv_wr_send(e->ax);
	ibv_wr_set_inline_data_list(e->ax, 3, list);
	/* Copied already: what the caller does with its buffers now is moot. */
	memset(w, 0xee, sizeof(w));
	memset(s2, 0xee, sizeof(s2));
	err = err ?: ibv_wr_complete(e->ax);
	n = err ? 0 : collect(e->cq, c, 3);
	aw = find(c, n, e->a->qp_num, 40);
	as = find(c, n, e->a->qp_num, 41);
	r = find(c, n, e->b->qp_num, 110);
	for (i = 0; i < INLINE_MAX; i++)
		w[i] = inl_byte(0, i);
	ok = n == 3 && aw && as && r && !aw->status && !as->status &&
	     !r->status && aw->opcode == IBV_WC_RDMA_WRITE &&
	     r->opcode == IBV_WC_RECV && r->byte_len == 60;
	step("ex_inline", ok && !memcmp(rbuf + 200, w, INLINE_MAX) &&
	     !memcmp(rbuf + RECV_OFF, want, 60) && rbuf[264] == 0,
	     "err=%d completions=%d write %s recv byte_len=%u %s", err, n,
	     memcmp(rbuf + 200, w, INLINE_MAX) ? "differs" : "match",
	     r ? r->byte_len : 0,
	     memcmp(rbuf + RECV_OFF, want, 60) ? "differs" : "match");

	/* 65 bytes, 33 + 32 bytes, inline on a READ: nothing posts. */
	memcpy(before, rbuf + 200, sizeof(before));
	ibv_wr_start(e->ax);
	ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 200);
	ibv_wr_set_inline_data(e->ax, w, INLINE_MAX + 1);
	e1 = ibv_wr_complete(e->ax);
	ibv_wr_start(e->ax);
	ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 200);
	ibv_wr_set_inline_data(e->ax, w, 8);
	ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 208);
	ibv_wr_set_inline_data_list(e->ax, 2, long_list);
	e2 = ibv_wr_complete(e->ax);
	ibv_wr_start(e->ax);
	ibv_wr_rdma_read(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 200);
	ibv_wr_set_inline_data(e->ax, w, 8);
	e3 = ibv_wr_complete(e->ax);
	A_POST(e, 42, ibv_wr_rdma_write(e->ax, e->rmr->rkey, (uintptr_t)rbuf + 5000);
	       ibv_wr_set_inline_data(e->ax, w, 8));
	st = err ? -1 : one(e, e->a->qp_num, 42, c);
	step("ex_inline_too_long", e1 == ENOMEM && e2 == ENOMEM && e3 == EINVAL &&
	     st == IBV_WC_SUCCESS && cq_empty(e->cq) &&
	     !memcmp(before, rbuf + 200, sizeof(before)) &&
	     !memcmp(rbuf + 5000, w, 8),
	     "refused %d (%s),%d,%d; next status=%d; target %s", e1,
	     strerror(e1), e2, e3, st,
	     memcmp(before, rbuf + 200, sizeof(before)) ? "changed" : "unchanged");
}

/* a: a WRITE of @len bytes from lbuf to @raddr with @rkey; its status. */
static int a_write(struct ext *e, uint64_t id, uint64_t raddr, uint32_t rkey,
		   uint32_t len)
{
	struct cqe c;
	int err;

	A_POST(e, id, ibv_wr_rdma_write(e->ax, rkey, raddr);
	       ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf, len));
	return err ? -1 : one(e, e->a->qp_num, id, &c);
}

/* b binds @mw over [rbuf + 1024, +1024) with @access, new key @rkey. */
static int b_bind(struct ext *e, struct ibv_mw *mw, uint32_t rkey,
		  unsigned int access, uint64_t id)
{
	struct ibv_mw_bind_info info = {
		.mr = e->rmr, .addr = (uintptr_t)rbuf + 1024, .length = 1024,
		.mw_access_flags = access,
	};
	struct cqe c;
	int err;

	ibv_wr_start(e->bx);
	e->bx->wr_id = id;
	e->bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(e->bx, mw, rkey, &info);
	err = ibv_wr_complete(e->bx);
	if (err)
		return -1;
	if (one(e, e->b->qp_num, id, &c) < 0)
		return -1;
	return c.status == IBV_WC_SUCCESS && c.opcode != IBV_WC_BIND_MW ?
	       -1 : (int)c.status;
}

static const char *st_str(int st)
{
	return st >= 0 ? ibv_wc_status_str(st) : "none";
}

/* A WRITE through the window's old @key is refused; QPs reconnected. */
static void refused_after(struct ext *e, const char *name, uint32_t key)
{
	unsigned char before[1024];
	int st, rc;

	memcpy(before, rbuf + 1024, sizeof(before));
	st = a_write(e, 40, (uintptr_t)rbuf + 1024, key, 64);
	rc = reconnect(e);
	step(name, st == IBV_WC_REM_ACCESS_ERR && !rc &&
	     !memcmp(before, rbuf + 1024, sizeof(before)),
	     "key=0x%x status=%d (%s) target %s", key, st, st_str(st),
	     memcmp(before, rbuf + 1024, sizeof(before)) ? "changed" : "unchanged");
}

/*
 * A type 1 window (ibv_bind_mw): RDMA through it; neither LOCAL_INV nor a
 * SEND with Invalidate ends its binding.
 */
static void mw_type1_tests(struct ext *e)
{
	struct ibv_mw_bind bind = {
		.wr_id = 10,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_info = {
			.mr = e->rmr, .addr = (uintptr_t)rbuf + 1024,
			.length = 1024,
			.mw_access_flags = IBV_ACCESS_REMOTE_WRITE,
		},
	};
	const struct cqe *s, *r;
	struct ibv_mw *mw;
	struct cqe c[2];
	uint32_t k0;
	int st, st2, err, n;

	mw = ibv_alloc_mw(e->pd, IBV_MW_TYPE_1);
	step("mw1_alloc", mw && mw->type == IBV_MW_TYPE_1, "rkey=0x%x %s",
	     mw ? mw->rkey : 0, mw ? "allocated" : strerror(errno));
	if (!mw)
		return;
	k0 = mw->rkey;
	err = ibv_bind_mw(e->b, mw, &bind);
	st = err ? -1 : one(e, e->b->qp_num, 10, c);
	st2 = st ? -1 : a_write(e, 11, (uintptr_t)rbuf + 1024, mw->rkey, 256);
	step("mw1_bind_write", !err && st == IBV_WC_SUCCESS &&
	     c[0].opcode == IBV_WC_BIND_MW && mw->rkey == ibv_inc_rkey(k0) &&
	     st2 == IBV_WC_SUCCESS && !memcmp(rbuf + 1024, lbuf, 256),
	     "err=%d bind=%d write=%d rkey 0x%x -> 0x%x bytes %s", err, st,
	     st2, k0, mw->rkey, memcmp(rbuf + 1024, lbuf, 256) ? "differ" :
	     "match");

	ibv_wr_start(e->bx);
	e->bx->wr_id = 12;
	e->bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(e->bx, mw->rkey);
	err = ibv_wr_complete(e->bx);
	st = err ? -1 : one(e, e->b->qp_num, 12, c);
	err = reconnect(e);
	st2 = err ? -1 : a_write(e, 13, (uintptr_t)rbuf + 1024, mw->rkey, 256);
	step("mw1_local_inv_refused", st == IBV_WC_LOC_PROT_ERR &&
	     st2 == IBV_WC_SUCCESS, "local_inv=%d (%s), then write=%d", st,
	     st_str(st), st2);

	err = post_recv(e, 104, RECV_OFF, 1024);
	A_POST(e, 14, ibv_wr_send_inv(e->ax, mw->rkey);
	       ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf, 64));
	n = err ? 0 : collect(e->cq, c, 2);
	s = find(c, n, e->a->qp_num, 14);
	r = find(c, n, e->b->qp_num, 104);
	err = reconnect(e);
	st2 = err ? -1 : a_write(e, 15, (uintptr_t)rbuf + 1024, mw->rkey, 256);
	step("mw1_send_inv_refused", s && r &&
	     s->status == IBV_WC_REM_INV_REQ_ERR &&
	     r->status == IBV_WC_LOC_PROT_ERR && st2 == IBV_WC_SUCCESS,
	     "send_inv=%d (%s) recv=%d, then write=%d", s ? (int)s->status : -1,
	     st_str(s ? (int)s->status : -1), r ? (int)r->status : -1, st2);
	err = ibv_dealloc_mw(mw);
	step("mw1_dealloc", !err, "err=%d", err);
}

static void mw_tests(struct ext *e)
{
	const unsigned int rw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mw *mw;
	struct ibv_send_wr wr, *bad;
	unsigned char before[BUF];
	uint32_t k0, k1;
	struct cqe c[2];
	int st, st2, err, n;
	const struct cqe *rc;

	mw_type1_tests(e);
	mw = ibv_alloc_mw(e->pd, IBV_MW_TYPE_2);
	step("mw_alloc", mw && mw->type == IBV_MW_TYPE_2, "rkey=0x%x %s",
	     mw ? mw->rkey : 0, mw ? "allocated" : strerror(errno));
	if (!mw)
		return;
	k0 = mw->rkey;

	/* Bound by b: a writes and reads through it, inside its range. */
	k1 = ibv_inc_rkey(k0);
	st = b_bind(e, mw, k1, rw, 20);
	step("mw_bind", st == IBV_WC_SUCCESS && mw->rkey == k1,
	     "status=%d (%s) rkey 0x%x -> 0x%x", st, st_str(st), k0, mw->rkey);
	memcpy(before, rbuf, BUF);
	st = a_write(e, 21, (uintptr_t)rbuf + 1024, k1, 1024);
	step("mw_write", st == IBV_WC_SUCCESS && !memcmp(rbuf + 1024, lbuf, 1024) &&
	     !memcmp(before, rbuf, 1024) &&
	     !memcmp(before + 2048, rbuf + 2048, BUF - 2048),
	     "status=%d (%s) window %s, around it %s", st, st_str(st),
	     memcmp(rbuf + 1024, lbuf, 1024) ? "differs" : "matches",
	     memcmp(before, rbuf, 1024) ||
	     memcmp(before + 2048, rbuf + 2048, BUF - 2048) ? "changed" :
	     "unchanged");
	memset(lbuf + 4096, 0, 512);
	A_POST(e, 22, ibv_wr_rdma_read(e->ax, k1, (uintptr_t)rbuf + 1536);
	       ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf + 4096, 512));
	st = err ? -1 : one(e, e->a->qp_num, 22, c);
	step("mw_read", st == IBV_WC_SUCCESS &&
	     !memcmp(lbuf + 4096, rbuf + 1536, 512), "status=%d (%s) bytes %s",
	     st, st_str(st), memcmp(lbuf + 4096, rbuf + 1536, 512) ? "differ" :
	     "match");

	/* Past the window's end; an atomic it grants no right for. */
	memcpy(before, rbuf, BUF);
	st = a_write(e, 23, (uintptr_t)rbuf + 2048 - 8, k1, 16);
	err = reconnect(e);
	step("mw_out_of_range", st == IBV_WC_REM_ACCESS_ERR && !err &&
	     !memcmp(before, rbuf, BUF), "status=%d (%s) target %s", st,
	     st_str(st), memcmp(before, rbuf, BUF) ? "changed" : "unchanged");
	A_POST(e, 24, ibv_wr_atomic_fetch_add(e->ax, k1, (uintptr_t)rbuf + 1024, 1);
	       ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf + 4096, 8));
	st = err ? -1 : one(e, e->a->qp_num, 24, c);
	err = reconnect(e);
	step("mw_no_right", st == IBV_WC_REM_ACCESS_ERR && !err &&
	     !memcmp(before, rbuf, BUF), "atomic status=%d (%s) target %s", st,
	     st_str(st), memcmp(before, rbuf, BUF) ? "changed" : "unchanged");

	/* ibv_post_send's IBV_WR_BIND_MW: a stale key, then a move. */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 25;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = k1;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = e->rmr, .addr = (uintptr_t)rbuf + 1024, .length = 512,
		.mw_access_flags = rw,
	};
	err = ibv_post_send(e->b, &wr, &bad);
	st = err ? -1 : one(e, e->b->qp_num, 25, c);
	err = reconnect(e);
	step("mw_bind_stale_key", st == IBV_WC_MW_BIND_ERR && !err,
	     "new key 0x%x unchanged: status=%d (%s)", k1, st, st_str(st));
	wr.wr_id = 26;
	wr.bind_mw.rkey = ibv_inc_rkey(k1);
	err = ibv_post_send(e->b, &wr, &bad);
	st = err ? -1 : one(e, e->b->qp_num, 26, c);
	step("mw_bind_post_send", st == IBV_WC_SUCCESS &&
	     c[0].opcode == IBV_WC_BIND_MW && mw->rkey == ibv_inc_rkey(k1),
	     "err=%d status=%d (%s) rkey=0x%x", err, st, st_str(st), mw->rkey);
	refused_after(e, "mw_moved_old_key", k1);

	/* LOCAL_INV by b, then SEND with Invalidate from a. */
	k1 = mw->rkey;
	ibv_wr_start(e->bx);
	e->bx->wr_id = 27;
	e->bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(e->bx, k1);
	err = ibv_wr_complete(e->bx);
	st = err ? -1 : one(e, e->b->qp_num, 27, c);
	step("mw_local_inv", st == IBV_WC_SUCCESS && c[0].opcode == IBV_WC_LOCAL_INV,
	     "status=%d (%s)", st, st_str(st));
	refused_after(e, "mw_local_inv_refused", k1);

	k1 = ibv_inc_rkey(mw->rkey);
	st = b_bind(e, mw, k1, rw, 28);
	st2 = st ? -1 : a_write(e, 29, (uintptr_t)rbuf + 1024, k1, 64);
	err = post_recv(e, 103, RECV_OFF, 1024);
	A_POST(e, 30, ibv_wr_send_inv(e->ax, k1);
	       ibv_wr_set_sge(e->ax, e->lmr->lkey, (uintptr_t)lbuf, 64));
	n = err ? 0 : collect(e->cq, c, 2);
	rc = find(c, n, e->b->qp_num, 103);
	step("mw_send_inv", st == IBV_WC_SUCCESS && st2 == IBV_WC_SUCCESS &&
	     n == 2 && rc && !rc->status && (rc->flags & IBV_WC_WITH_INV) &&
	     rc->imm == k1 && find(c, n, e->a->qp_num, 30),
	     "bind=%d write=%d completions=%d invalidated=0x%x (key 0x%x)", st,
	     st2, n, rc ? rc->imm : 0, k1);
	refused_after(e, "mw_send_inv_refused", k1);

	/* Bound again, then deallocated: the region is free again. */
	st = b_bind(e, mw, ibv_inc_rkey(mw->rkey), rw, 31);
	err = ibv_dealloc_mw(mw);
	st2 = ibv_dereg_mr(e->rmr);
	if (!st2)
		e->rmr = NULL;
	step("mw_dealloc_bound", st == IBV_WC_SUCCESS && !err && !st2,
	     "bind=%d dealloc=%d dereg_mr=%d", st, err, st2);
}

/*
 * A completion channel under an extended CQ: busy while the CQ lives
 * (EBUSY), destroyable once the CQ is destroyed (each CQ holds exactly
 * one reference on it).
 */
static void ex_cq_channel(struct ibv_context *ctx)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq_init_attr_ex cattr = {
		.cqe = 4,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_cq_ex *cq;
	int busy, freed;

	if (!ch) {
		step("ex_cq_channel", 0, "comp channel: %s", strerror(errno));
		return;
	}
	cattr.channel = ch;
	cq = ibv_create_cq_ex(ctx, &cattr);
	if (!cq) {
		step("ex_cq_channel", 0, "cq_ex: %s", strerror(errno));
		ibv_destroy_comp_channel(ch);
		return;
	}
	busy = ibv_destroy_comp_channel(ch);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	freed = busy == EBUSY ? ibv_destroy_comp_channel(ch) : -1;
	step("ex_cq_channel", busy == EBUSY && !freed,
	     "destroy with the CQ: %d (EBUSY %d), after it: %d", busy, EBUSY,
	     freed);
}

void ext_tests(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ext e = { .pd = pd };

	if (!setup(&e, ctx)) {
		ex_write(&e);
		ex_send(&e);
		ex_read_atomics(&e);
		ex_abort_refused(&e);
		ex_inline(&e);
		mw_tests(&e);
	}
	close_objects(e.a, e.b, e.lmr, e.rmr,
		      e.cq ? ibv_cq_ex_to_cq(e.cq) : NULL, NULL);
	ex_cq_channel(ctx);
}
