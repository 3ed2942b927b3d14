// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs soak's connection to one peer: its buffer, MR, CQs and RC
 * QP, the QP's way to ERR and back to RTS, and the requests and receives
 * posted on it (soak.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

/* The peer's buffer, MR, CQs and QP; QP numbers checked. */
int sk_create(struct sk_run *r, struct sk_peer *p, uint32_t qpn,
	      char *detail, size_t len)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	const char *what;

	p->buf = aligned_alloc(4096, SK_BUF_SIZE);
	what = "buffer";
	if (!p->buf)
		goto fail;
	memset(p->buf, 0, SK_BUF_SIZE);
	p->mr = ibv_reg_mr(r->pd, p->buf, SK_BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	what = "ibv_reg_mr";
	if (!p->mr)
		goto fail;
	p->scq = ibv_create_cq(r->ctx, 256, NULL, NULL, 0);
	p->rcq = p->scq ? ibv_create_cq(r->ctx, 256, NULL, NULL, 0) : NULL;
	what = "ibv_create_cq";
	if (!p->rcq)
		goto fail;
	init.send_cq = p->scq;
	init.recv_cq = p->rcq;
	p->qp = ibv_create_qp(r->pd, &init);
	what = "ibv_create_qp";
	if (!p->qp)
		goto fail;
	if (p->qp->qp_num != qpn) {
		snprintf(detail, len, "QP number 0x%x, expected 0x%x",
			 p->qp->qp_num, qpn);
		return -1;
	}
	snprintf(detail, len, "qpn=0x%x peer_lid=%u addr=0x%llx lkey=0x%x rkey=0x%x",
		 qpn, p->lid, (unsigned long long)(uintptr_t)p->buf,
		 p->mr->lkey, p->mr->rkey);
	return 0;
fail:
	snprintf(detail, len, "%s: %s", what, strerror(errno ? errno : ENOMEM));
	return -1;
}

/* Destroys what sk_create made (ibv_close_device would too). */
void sk_destroy(struct sk_peer *p)
{
	if (p->qp)
		ibv_destroy_qp(p->qp);
	if (p->scq)
		ibv_destroy_cq(p->scq);
	if (p->rcq)
		ibv_destroy_cq(p->rcq);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	free(p->buf);
}

const char *sk_state_name(int s)
{
	return s == SK_RUN ? "run" : s == SK_CONNECTING ? "hello" : "broken";
}

static int sk_to_state(struct sk_peer *p, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = { .qp_state = state };

	return -ibv_modify_qp(p->qp, &a, IBV_QP_STATE);
}

int sk_post_recv(struct sk_peer *p, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(p->buf + SK_RECV_OFF + slot * SK_RECV_SLOT),
		.length = SK_RECV_SLOT,
		.lkey = p->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int ret = ibv_post_recv(p->qp, &wr, &bad);

	if (ret)
		return -ret;
	p->rq_out++;
	return 0;
}

void sk_event(const struct sk_run *r, const struct sk_peer *p,
	      const char *what)
{
	printf("IBTCA-SOAK-EVENT t=%.1f lid=%u peer=%u %s state=%s epoch=%u posted=%llu written_ok=%llu write_errors=%llu\n",
	       rc_now() - r->t0, r->self, p->lid, what, sk_state_name(p->state),
	       p->epoch, (unsigned long long)p->all.posted,
	       (unsigned long long)p->all.ok,
	       (unsigned long long)p->all.errors);
}

/*
 * The connection is broken: the QP goes to ERR (flushing what is posted)
 * and stays there at least @hold seconds; the next reset forgets the
 * peer's HELLO.
 */
void sk_break(struct sk_run *r, struct sk_peer *p, double hold,
	      const char *why)
{
	char what[96];
	int ret;

	if (p->state == SK_BROKEN)
		return;
	/*
	 * Messages of the connection delivered before it broke may still wait
	 * in the CQ: its HELLO holds until the QP is reset (sk_connect).
	 */
	p->was_run = p->state == SK_RUN;
	ret = sk_to_state(p, IBV_QPS_ERR);
	p->state = SK_BROKEN;
	p->since = rc_now();
	p->hold = hold;
	p->breaks++;
	snprintf(what, sizeof(what), "break why=%s%s%s", why,
		 ret ? " to_err=" : "", ret ? strerror(-ret) : "");
	sk_event(r, p, what);
}

/* RESET → INIT → receives posted → RTR → RTS, then a HELLO is due. */
int sk_connect(struct sk_run *r, struct sk_peer *p)
{
	uint32_t i;
	int ret;

	ret = sk_to_state(p, IBV_QPS_RESET);
	p->peer_hello = 0;
	p->rq_out = 0;
	p->wr_out = 0;
	if (!ret)
		ret = rc_init(p->qp, &p->path);
	for (i = 0; i < SK_NRECV && !ret; i++)
		ret = sk_post_recv(p, i);
	if (!ret)
		ret = rc_ready(p->qp, &p->path, p->peer_qpn);
	if (ret) {
		fprintf(stderr, "ibtca-verbs: soak: connect QP 0x%x: %s\n",
			p->qp->qp_num, strerror(-ret));
		p->state = SK_CONNECTING;
		sk_break(r, p, 1.0, "connect_failed");
		return ret;
	}
	if (p->was_run) {
		p->epoch++;
		memset(&p->conn, 0, sizeof(p->conn));
		p->was_run = 0;
	}
	p->done_k = p->next_k;
	p->hello = 0;
	if (p->bye == 1)
		p->bye = 0;
	p->state = SK_CONNECTING;
	p->since = rc_now();
	return 0;
}

/* An SGE over @len bytes at @off of the peer's buffer of ours. */
static struct ibv_sge sk_sge(const struct sk_peer *p, uint32_t off,
			     uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(p->buf + off),
		.length = len,
		.lkey = p->mr->lkey,
	};

	return sge;
}

/*
 * Posts the chain @wr of @n signaled requests (one doorbell); how many
 * went, or -errno if none did.
 */
static int sk_post(struct sk_peer *p, struct ibv_send_wr *wr, int n)
{
	struct ibv_send_wr *bad = NULL;
	int i, ret, posted;

	for (i = 0; i < n; i++) {
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].send_flags |= IBV_SEND_SIGNALED;
	}
	ret = ibv_post_send(p->qp, wr, &bad);
	posted = ret && bad ? (int)(bad - wr) : ret ? 0 : n;
	if (!posted && ret)
		return -ret;
	p->wr_out += posted;
	return posted;
}

/* SENDs the control message @m (HELLO, BYE). */
static int sk_send_ctl(struct sk_peer *p, struct sk_msg *m)
{
	struct ibv_sge sge = sk_sge(p, SK_MSG_OFF + SK_CTL * SK_MSG_LEN,
				    SK_MSG_LEN);
	struct ibv_send_wr wr = {
		.wr_id = SK_WR_CTL,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
	};

	m->magic = SK_MAGIC;
	memcpy(p->buf + SK_MSG_OFF + SK_CTL * SK_MSG_LEN, m, sizeof(*m));
	return sk_post(p, &wr, 1) == 1 ? 0 : -ENOSPC;
}

int sk_send_hello(struct sk_run *r, struct sk_peer *p)
{
	struct sk_msg m = {
		.type = SK_HELLO,
		.k = p->next_k,
		.epoch = p->epoch,
		.rkey = p->mr->rkey,
		.addr = (uintptr_t)p->buf,
		.nonce = r->nonce,
	};

	p->hellos++;
	return sk_send_ctl(p, &m);
}

int sk_send_bye(struct sk_peer *p)
{
	struct sk_msg m = {
		.type = SK_BYE,
		.k = p->next_k,
		.epoch = p->epoch,
		.posted = p->conn.posted,
		.ok = p->conn.ok,
		.errors = p->conn.errors,
	};

	return sk_send_ctl(p, &m);
}

/* Message k: its pattern into a source slot, then WRITE and SEND. */
int sk_send_data(struct sk_run *r, struct sk_peer *p)
{
	uint64_t k = p->next_k;
	uint32_t s = (uint32_t)(k % SK_WIN), len = sk_len(r->self, p->lid, k);
	uint32_t slot = (uint32_t)(k % SK_NSLOT);
	struct sk_msg m = {
		.magic = SK_MAGIC,
		.type = SK_DATA,
		.k = k,
		.len = len,
		.slot = slot,
		.epoch = p->epoch,
	};
	struct ibv_sge sge[2] = {
		sk_sge(p, SK_SRC_OFF + s * SK_SLOT_LEN, len),
		sk_sge(p, SK_MSG_OFF + s * SK_MSG_LEN, SK_MSG_LEN),
	};
	struct ibv_send_wr w[2] = {
		{
			.wr_id = k << 2 | SK_WR_WRITE,
			.sg_list = &sge[0],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.wr.rdma = {
				.remote_addr = p->peer_addr + SK_IN_OFF +
					       (uint64_t)slot * SK_SLOT_LEN,
				.rkey = p->peer_rkey,
			},
		},
		{
			.wr_id = k << 2 | SK_WR_SEND,
			.sg_list = &sge[1],
			.num_sge = 1,
			.opcode = IBV_WR_SEND,
		},
	};
	int ret;

	sk_fill(p->buf + SK_SRC_OFF + s * SK_SLOT_LEN, len,
		sk_seed(r->nonce, r->self, p->lid, k));
	memcpy(p->buf + SK_MSG_OFF + s * SK_MSG_LEN, &m, sizeof(m));
	/* Half a message posted still completes, with an error. */
	p->failed[s] = 0;
	ret = sk_post(p, w, 2);
	if (ret == 1)
		p->failed[s] = 1;
	if (ret >= 1) {
		p->next_k++;
		p->all.posted++;
		p->conn.posted++;
	}
	return ret == 2 ? 0 : ret < 0 ? ret : -ENOSPC;
}
