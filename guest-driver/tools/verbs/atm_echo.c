// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs atm-echo: the guest side of an ATM gateway exchange, through
 * libibverbs. One RC QP per --peer-qpn, each connected to that QPN at
 * --peer-lid (the gateway's LID and the `local_qpn`s of its VC map);
 * receives are posted before the QPs' numbers are printed, so the host can
 * tell the gateway (control socket `remote-qpn VPI/VCI QPN`) and start
 * sending at once:
 *
 *   IBTCA-ATM-ECHO ready qpns=Q1[,Q2...] peer_lid=L peer_qpns=P1[,P2...]
 *
 * Every message received (one AAL5 frame per SEND) goes back as a SEND on
 * the QP it came in on, each byte XORed with --xor (default 0, a plain
 * echo), until --frames messages were echoed:
 *
 *   IBTCA-ATM-ECHO frame N qpn=Q len=BYTES
 *   IBTCA-ATM-ECHO done frames=N bytes=B
 *
 * or "IBTCA-ATM-ECHO FAIL <why>" and exit status 1. Both sides start at
 * PSN 100 (RC_PSN: the gateway map's `sq_psn` and `rq_psn`). Messages of
 * up to AE_SLOT (16 KiB); a longer one completes in error and fails the
 * run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "rc.h"
#include "usage.h"

#define AE_MAX_QPS	4U
#define AE_NRECV	8U		/* receives per QP */
#define AE_SLOT		0x4000U		/* 16 KiB: more than AAL5's usual 9,180 */
#define AE_BUF_SIZE	((AE_MAX_QPS * AE_NRECV + 1) * AE_SLOT)
#define AE_SEND_OFF	(AE_MAX_QPS * AE_NRECV * AE_SLOT)

struct atm_echo {
	struct rc_path path;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct rc_cq scq, rcq;
	struct ibv_qp *qp[AE_MAX_QPS];
	uint8_t *buf;
	uint32_t nqps;
	uint32_t peer_qpn[AE_MAX_QPS];
	uint32_t frames;
	uint32_t wait_s;
	uint8_t xor;
};

/* @err: a negative errno value. */
static int ae_fail(const char *what, int err)
{
	printf("IBTCA-ATM-ECHO FAIL %s: %s\n", what, strerror(-err));
	return 1;
}

/* Receive slot @slot of QP index @i: its wr_id is i * AE_NRECV + slot. */
static int ae_post_recv(struct atm_echo *e, uint32_t i, uint32_t slot)
{
	uint64_t id = i * AE_NRECV + slot;
	struct ibv_sge sge = {
		.addr = (uintptr_t)(e->buf + id * AE_SLOT),
		.length = AE_SLOT,
		.lkey = e->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return -ibv_post_recv(e->qp[i], &wr, &bad);
}

/* PD, MR, a send and a receive CQ, the QPs in RTS, receives. */
static int ae_setup(struct atm_echo *e)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	uint32_t i, s;
	int ret;

	ret = rc_wait_port(e->ctx, 60);
	if (ret)
		return ae_fail("port not active", ret);
	e->buf = aligned_alloc(4096, AE_BUF_SIZE);
	if (!e->buf)
		return ae_fail("buffer", -ENOMEM);
	memset(e->buf, 0, AE_BUF_SIZE);
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd)
		return ae_fail("ibv_alloc_pd", -errno);
	e->mr = ibv_reg_mr(e->pd, e->buf, AE_BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!e->mr)
		return ae_fail("ibv_reg_mr", -errno);
	ret = rc_cq_create(e->ctx, 256, &e->scq);
	if (ret)
		return ae_fail("send CQ", ret);
	ret = rc_cq_create(e->ctx, 256, &e->rcq);
	if (ret)
		return ae_fail("receive CQ", ret);
	init.send_cq = e->scq.cq;
	init.recv_cq = e->rcq.cq;
	for (i = 0; i < e->nqps; i++) {
		e->qp[i] = ibv_create_qp(e->pd, &init);
		if (!e->qp[i])
			return ae_fail("ibv_create_qp", -errno);
		ret = rc_connect(e->qp[i], &e->path, e->peer_qpn[i]);
		if (ret)
			return ae_fail("connect QP", ret);
		for (s = 0; s < AE_NRECV; s++) {
			ret = ae_post_recv(e, i, s);
			if (ret)
				return ae_fail("ibv_post_recv", ret);
		}
	}
	return 0;
}

/* Sends the message in receive slot @id back, transformed. */
static int ae_echo(struct atm_echo *e, uint32_t i, uint64_t id, uint32_t len)
{
	uint8_t *in = e->buf + id * AE_SLOT;
	uint8_t *out = e->buf + AE_SEND_OFF;
	struct ibv_sge sge = {
		.addr = (uintptr_t)out,
		.length = len,
		.lkey = e->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	uint32_t k;
	int ret;

	for (k = 0; k < len; k++)
		out[k] = in[k] ^ e->xor;
	ret = -ibv_post_send(e->qp[i], &wr, &bad);
	if (!ret)
		ret = rc_wait(&e->scq, &wc, 120);
	if (ret || wc.status != IBV_WC_SUCCESS || wc.wr_id != id) {
		printf("IBTCA-ATM-ECHO FAIL send on qpn=%u: %s\n",
		       e->qp[i]->qp_num,
		       ret ? strerror(-ret) : rc_wc_str(&wc));
		return 1;
	}
	return 0;
}

static int ae_run(struct atm_echo *e)
{
	uint64_t bytes = 0;
	uint32_t n, i;
	int ret;

	for (n = 0; n < e->frames; n++) {
		struct ibv_wc wc;

		ret = rc_wait(&e->rcq, &wc, e->wait_s);
		if (ret) {
			printf("IBTCA-ATM-ECHO FAIL frame %u: %s after %u s\n",
			       n, strerror(-ret), e->wait_s);
			return 1;
		}
		for (i = 0; i < e->nqps && e->qp[i]->qp_num != wc.qp_num; i++)
			;
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    i == e->nqps || wc.wr_id / AE_NRECV != i) {
			printf("IBTCA-ATM-ECHO FAIL frame %u: qpn=%u wr_id=%llu %s\n",
			       n, wc.qp_num, (unsigned long long)wc.wr_id,
			       rc_wc_str(&wc));
			return 1;
		}
		printf("IBTCA-ATM-ECHO frame %u qpn=%u len=%u\n", n, wc.qp_num,
		       wc.byte_len);
		if (ae_echo(e, i, wc.wr_id, wc.byte_len))
			return 1;
		ret = ae_post_recv(e, i, (uint32_t)(wc.wr_id % AE_NRECV));
		if (ret)
			return ae_fail("ibv_post_recv", ret);
		bytes += wc.byte_len;
	}
	printf("IBTCA-ATM-ECHO done frames=%u bytes=%llu\n", n,
	       (unsigned long long)bytes);
	return 0;
}

/* Parses "Q[,Q...]" into e->peer_qpn. */
static int ae_parse_qpns(struct atm_echo *e, char *list)
{
	char *tok, *save = NULL;

	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (e->nqps == AE_MAX_QPS) {
			fprintf(stderr, "ibtca-verbs: at most %u peer QPNs\n",
				AE_MAX_QPS);
			return -1;
		}
		if (rc_parse_u32(tok, &e->peer_qpn[e->nqps]) ||
		    e->peer_qpn[e->nqps] > 0xffffff) {
			fprintf(stderr, "ibtca-verbs: bad QPN '%s'\n", tok);
			return -1;
		}
		e->nqps++;
	}
	return e->nqps ? 0 : -1;
}

int cmd_atm_echo(const char *dev, int argc, char **argv)
{
	struct atm_echo e = {
		.path = { .timeout = RC_TIMEOUT_DEFAULT,
			  .retry = RC_RETRY_DEFAULT },
		.wait_s = 600,
	};
	uint32_t lid = 0, n;
	int have_lid = 0, ret, i;

	for (i = 0; i + 1 < argc; i += 2) {
		const char *o = argv[i], *val = argv[i + 1];

		ret = rc_qp_option(&e.path, o, val);
		if (ret < 0)
			usage();
		if (ret)
			continue;
		if (!strcmp(o, "--peer-lid") && !rc_parse_u32(val, &lid) &&
		    lid && lid < 0xc000)
			have_lid = 1;
		else if (!strcmp(o, "--peer-qpn") && !ae_parse_qpns(&e, argv[i + 1]))
			n = 0;
		else if (!strcmp(o, "--frames") && !rc_parse_u32(val, &n) && n)
			e.frames = n;
		else if (!strcmp(o, "--wait") && !rc_parse_u32(val, &n) && n)
			e.wait_s = n;
		else if (!strcmp(o, "--xor") && !rc_parse_u32(val, &n) && n < 256)
			e.xor = (uint8_t)n;
		else if (!strcmp(o, "--sl") && !rc_parse_u32(val, &n) && n < 15)
			e.path.sl = (uint8_t)n;
		else
			usage();
	}
	if (i != argc || !have_lid || !e.nqps || !e.frames)
		usage();
	e.path.dlid = (uint16_t)lid;
	e.ctx = rc_open(dev);
	if (!e.ctx)
		return 1;
	ret = ae_setup(&e);
	if (!ret) {
		printf("IBTCA-ATM-ECHO ready qpns=");
		for (n = 0; n < e.nqps; n++)
			printf("%s%u", n ? "," : "", e.qp[n]->qp_num);
		printf(" peer_lid=%u peer_qpns=", lid);
		for (n = 0; n < e.nqps; n++)
			printf("%s%u", n ? "," : "", e.peer_qpn[n]);
		printf("\n");
		fflush(stdout);
		ret = ae_run(&e);
	}
	/* Closing the context destroys what the run created. */
	ibv_close_device(e.ctx);
	return ret;
}
