// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs' guest pair through libibverbs: set-up, SEND/RECV messages,
 * the HELLO exchange and the teardown checks (pair.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pair.h"
#include "usage.h"

void pair_pattern(uint8_t *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 31 + seed + (i >> 12));
}

size_t pair_pattern_diff(const uint8_t *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != (uint8_t)(i * 31 + seed + (i >> 12)))
			break;
	return i;
}

uint64_t pair_remote(const struct pair *p, uint32_t off)
{
	return p->peer_addr + off;
}

struct ibv_sge pair_sge(const struct pair *p, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(p->buf + off),
		.length = len,
		.lkey = p->mr->lkey,
	};

	return sge;
}

static int pair_post_recv(struct pair *p, uint32_t slot)
{
	struct ibv_sge sge = pair_sge(p, PAIR_RECV_OFF + slot * PAIR_SLOT,
				      PAIR_SLOT);
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return -ibv_post_recv(p->qp, &wr, &bad);
}

int pair_run(struct pair *p, struct ibv_qp *qp, struct ibv_send_wr *wr,
	     struct rc_cq *cq, struct ibv_wc *wc, double secs)
{
	struct ibv_send_wr *bad;
	int ret;

	memset(wc, 0, sizeof(*wc));
	wr->wr_id = ++p->wr_id;
	wr->send_flags |= IBV_SEND_SIGNALED;
	ret = -ibv_post_send(qp, wr, &bad);
	if (!ret)
		ret = rc_wait(cq, wc, secs);
	if (!ret && wc->wr_id != wr->wr_id)
		ret = -EPROTO;
	return ret;
}

const char *pair_err(int ret, const struct ibv_wc *wc)
{
	static char msg[96];

	if (!ret)
		return rc_wc_str(wc);
	snprintf(msg, sizeof(msg), "error=%s", strerror(-ret));
	return msg;
}

/* SENDs @m on the first QP; 0 once it completed successfully. */
static int pair_send_msg(struct pair *p, struct pair_msg *m, double secs,
			 struct ibv_wc *wc)
{
	struct ibv_sge sge = pair_sge(p, PAIR_SEND_OFF, sizeof(*m));
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
	};
	int ret;

	m->magic = PAIR_MAGIC;
	memcpy(p->buf + PAIR_SEND_OFF, m, sizeof(*m));
	ret = pair_run(p, p->qp, &wr, &p->scq, wc, secs);
	if (!ret && wc->status != IBV_WC_SUCCESS)
		ret = -EIO;
	return ret;
}

int pair_send(struct pair *p, uint32_t type, uint32_t ok, uint64_t value)
{
	struct pair_msg m = { .type = type, .ok = ok, .value = value };
	struct ibv_wc wc;
	int ret = pair_send_msg(p, &m, 60, &wc);

	if (ret)
		fprintf(stderr, "ibtca-verbs: send type %u: %s\n", type,
			pair_err(ret, &wc));
	return ret;
}

int pair_recv(struct pair *p, struct pair_msg *m, double secs)
{
	struct ibv_wc wc;
	int ret = rc_wait(&p->rcq, &wc, secs);

	if (ret)
		return ret;
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
	    wc.wr_id >= PAIR_NRECV || wc.byte_len != sizeof(*m)) {
		fprintf(stderr, "ibtca-verbs: bad receive: wr_id=%llu %s\n",
			(unsigned long long)wc.wr_id, rc_wc_str(&wc));
		return -EIO;
	}
	memcpy(m, p->buf + PAIR_RECV_OFF + wc.wr_id * PAIR_SLOT, sizeof(*m));
	ret = pair_post_recv(p, (uint32_t)wc.wr_id);
	if (ret)
		return ret;
	return m->magic == PAIR_MAGIC ? 0 : -EBADMSG;
}

int pair_expect(struct pair *p, uint32_t type, struct pair_msg *m,
		double secs)
{
	int ret = pair_recv(p, m, secs);

	if (!ret && m->type != type)
		ret = -EPROTO;
	return ret;
}

int pair_pingpong(struct pair *p, int n, double *us)
{
	struct pair_msg m;
	double t0;
	int i;

	for (i = 0; i < n; i++) {
		t0 = rc_now();
		if (pair_send(p, MSG_PING, 1, i) ||
		    pair_expect(p, MSG_PONG, &m, 120) || m.value != (uint64_t)i)
			break;
		if (us)
			us[i] = (rc_now() - t0) * 1e6 / 2;
	}
	return i;
}

static int pair_fail(char *detail, size_t len, const char *what, int ret)
{
	snprintf(detail, len, "%s: %s", what, strerror(ret < 0 ? -ret : ret));
	return ret < 0 ? ret : -ret;
}

int pair_setup(struct pair *p, char *detail, size_t len)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rc_cq *cqs[] = { &p->scq, &p->rcq, &p->scq2 };
	uint32_t i;
	int ret;

	ret = rc_wait_port(p->ctx, 60);
	if (ret)
		return pair_fail(detail, len, "port not active", ret);
	p->buf = aligned_alloc(4096, PAIR_BUF_SIZE);
	if (!p->buf)
		return pair_fail(detail, len, "buffer", -ENOMEM);
	memset(p->buf, 0, PAIR_BUF_SIZE);
	p->pd = ibv_alloc_pd(p->ctx);
	if (!p->pd)
		return pair_fail(detail, len, "ibv_alloc_pd", -errno);
	p->mr = ibv_reg_mr(p->pd, p->buf, PAIR_BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC);
	if (!p->mr)
		return pair_fail(detail, len, "ibv_reg_mr", -errno);
	for (i = 0; i < 3; i++) {
		ret = rc_cq_create(p->ctx, 256, cqs[i]);
		if (ret)
			return pair_fail(detail, len, "ibv_create_cq", ret);
	}
	init.send_cq = p->scq.cq;
	init.recv_cq = p->rcq.cq;
	p->qp = ibv_create_qp(p->pd, &init);
	if (!p->qp)
		return pair_fail(detail, len, "ibv_create_qp", -errno);
	/* The second QP (bad R_Key) has its own send CQ. */
	init.send_cq = p->scq2.cq;
	p->qp2 = ibv_create_qp(p->pd, &init);
	if (!p->qp2)
		return pair_fail(detail, len, "ibv_create_qp", -errno);
	if (p->qp->qp_num != RC_QPN0 || p->qp2->qp_num != RC_QPN0 + 1) {
		snprintf(detail, len, "QP numbers 0x%x 0x%x, expected 0x%x 0x%x",
			 p->qp->qp_num, p->qp2->qp_num, RC_QPN0,
			 RC_QPN0 + 1);
		return -EPROTO;
	}
	p->path.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			 IBV_ACCESS_REMOTE_ATOMIC;
	p->path.rd_atomic = 3;
	ret = rc_connect(p->qp, &p->path, RC_QPN0);
	if (ret)
		return pair_fail(detail, len, "connect QP 1", ret);
	ret = rc_connect(p->qp2, &p->path, RC_QPN0 + 1);
	if (ret)
		return pair_fail(detail, len, "connect QP 2", ret);
	for (i = 0; i < PAIR_NRECV; i++) {
		ret = pair_post_recv(p, i);
		if (ret)
			return pair_fail(detail, len, "ibv_post_recv", ret);
	}
	snprintf(detail, len,
		 "qpn=0x%x,0x%x peer_lid=%u iova=0x%llx lkey=0x%x rkey=0x%x",
		 p->qp->qp_num, p->qp2->qp_num, p->path.dlid,
		 (unsigned long long)(uintptr_t)p->buf, p->mr->lkey,
		 p->mr->rkey);
	return 0;
}

static int pair_state(struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = { .qp_state = state, .port_num = 1 };
	int mask = IBV_QP_STATE;

	if (state == IBV_QPS_INIT)
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	return -ibv_modify_qp(qp, &a, mask);
}

/*
 * Puts the first QP, which a failed request took to the error state, back
 * in RTS: takes the PAIR_NRECV receives the error flushed (so that no
 * stale completion is taken for a message later), RESET, RTS with the
 * same PSNs, and the receives posted again.
 */
static int pair_reconnect(struct pair *p)
{
	struct ibv_wc wc;
	uint32_t i;
	int ret = 0;

	for (i = 0; i < PAIR_NRECV && !ret; i++)
		ret = rc_wait(&p->rcq, &wc, 5);
	if (!ret)
		ret = pair_state(p->qp, IBV_QPS_RESET);
	if (!ret)
		ret = rc_connect(p->qp, &p->path, RC_QPN0);
	for (i = 0; i < PAIR_NRECV && !ret; i++)
		ret = pair_post_recv(p, i);
	return ret;
}

/*
 * pair_send_msg, for the HELLOs: a peer guest still booting has no QP yet
 * and its device drops our packets, so the send fails (IBV_WC_RETRY_EXC_ERR)
 * after (retry + 1) x timeout; reconnect and send again, for up to @secs
 * in all. A HELLO the peer took but did not acknowledge in time comes
 * again with the same PSN: the peer acknowledges the duplicate and does
 * not deliver it twice.
 */
static int pair_send_retrying(struct pair *p, struct pair_msg *m, double secs,
			      struct ibv_wc *wc)
{
	double end = rc_now() + secs;
	int ret, tries = 0;

	for (;;) {
		ret = pair_send_msg(p, m, secs, wc);
		if (ret != -EIO || wc->status != IBV_WC_RETRY_EXC_ERR ||
		    rc_now() >= end)
			break;
		tries++;
		ret = pair_reconnect(p);
		if (ret)
			break;
	}
	if (tries)
		fprintf(stderr, "ibtca-verbs: HELLO sent again %d times (peer not ready)\n",
			tries);
	return ret;
}

int pair_exchange(struct pair *p)
{
	struct pair_msg m = { .type = MSG_HELLO };
	struct ibv_wc wc;
	int ret;

	memset(&wc, 0, sizeof(wc));
	m.addr = (uintptr_t)p->buf;
	m.rkey = p->mr->rkey;
	if (p->server) {
		ret = pair_expect(p, MSG_HELLO, &m, p->wait_s ? p->wait_s : 280);
		if (ret) {
			check("exchange", 0, "no hello from the client: %s",
			      strerror(-ret));
			return ret;
		}
		p->peer_addr = m.addr;
		p->peer_rkey = m.rkey;
		m.addr = (uintptr_t)p->buf;
		m.rkey = p->mr->rkey;
		ret = pair_send_retrying(p, &m, 60, &wc);
	} else {
		ret = pair_send_retrying(p, &m, 200, &wc);
		if (!ret)
			ret = pair_expect(p, MSG_HELLO, &m, 120);
		p->peer_addr = m.addr;
		p->peer_rkey = m.rkey;
	}
	check("exchange", !ret, "peer_iova=0x%llx peer_rkey=0x%x %s",
	      (unsigned long long)p->peer_addr, p->peer_rkey,
	      pair_err(ret, &wc));
	return ret;
}

/* Destroys @cq and its channel (every event was acknowledged by rc_wait). */
static int pair_cq_destroy(struct rc_cq *cq)
{
	int ret = -ibv_destroy_cq(cq->cq);

	cq->cq = NULL;
	if (!ret)
		ret = -ibv_destroy_comp_channel(cq->channel);
	cq->channel = NULL;
	return ret;
}

void pair_teardown(struct pair *p)
{
	struct rc_cq *cqs[] = { &p->scq, &p->rcq, &p->scq2 };
	int ret, busy, i;

	ret = pair_state(p->qp, IBV_QPS_RESET);
	if (!ret)
		ret = pair_state(p->qp, IBV_QPS_INIT);
	if (!ret)
		ret = pair_state(p->qp, IBV_QPS_RESET);
	check("teardown_qp_reset", !ret,
	      "QP 0x%x: RTS -> RESET -> INIT -> RESET: %s", p->qp->qp_num,
	      strerror(-ret));
	busy = ibv_dealloc_pd(p->pd);
	check("teardown_pd_busy", busy == EBUSY,
	      "ibv_dealloc_pd with its MR and QPs: %s (want EBUSY)",
	      strerror(busy));
	if (busy != EBUSY) {
		/* A PD that went with its QPs leaves nothing safe to destroy. */
		check("teardown", 0, "not tried: the PD did not refuse");
		return;
	}
	ret = -ibv_destroy_qp(p->qp);
	if (!ret)
		ret = -ibv_destroy_qp(p->qp2);
	for (i = 0; i < 3 && !ret; i++)
		ret = pair_cq_destroy(cqs[i]);
	if (!ret)
		ret = -ibv_dereg_mr(p->mr);
	if (!ret)
		ret = -ibv_dealloc_pd(p->pd);
	check("teardown", !ret, "2 QPs, 3 CQs and their channels, MR, PD destroyed: %s",
	      strerror(-ret));
}

int pair_command(const char *dev, int argc, char **argv,
		 void (*server)(struct pair *), void (*client)(struct pair *))
{
	struct pair p = {
		.path = { .timeout = RC_TIMEOUT_DEFAULT,
			  .retry = RC_RETRY_DEFAULT },
	};
	const char *role = NULL;
	uint32_t n;
	char detail[160];
	int i, opt;

	for (i = 0; i + 1 < argc; i += 2) {
		opt = rc_qp_option(&p.path, argv[i], argv[i + 1]);
		if (opt < 0)
			usage();
		else if (opt)
			continue;
		else if (!strcmp(argv[i], "--role"))
			role = argv[i + 1];
		else if (!strcmp(argv[i], "--peer-lid") &&
			 !rc_parse_u32(argv[i + 1], &n) && n && n < 0xc000)
			p.path.dlid = (uint16_t)n;
		else if (!strcmp(argv[i], "--sl") &&
			 !rc_parse_u32(argv[i + 1], &n) && n <= 14)
			p.path.sl = (uint8_t)n;
		else if (!strcmp(argv[i], "--wait") &&
			 !rc_parse_u32(argv[i + 1], &p.wait_s) && p.wait_s)
			continue;
		else
			usage();
	}
	if (i != argc || !role || !p.path.dlid ||
	    (strcmp(role, "server") && strcmp(role, "client")))
		usage();
	p.server = !strcmp(role, "server");

	p.ctx = rc_open(dev);
	if (!p.ctx) {
		check("setup", 0, "cannot open %s", dev);
	} else if (pair_setup(&p, detail, sizeof(detail))) {
		check("setup", 0, "%s", detail);
	} else {
		check("setup", 1, "role=%s %s", role, detail);
		if (p.server)
			server(&p);
		else
			client(&p);
		pair_teardown(&p);
	}
	/* Closing the context destroys what a failed run left. */
	if (p.ctx)
		ibv_close_device(p.ctx);
	free(p.buf);
	printf("IBTCA-VERBS-SUMMARY %d passed, %d failed\n", n_pass, n_fail);
	return n_fail || !n_pass;
}
