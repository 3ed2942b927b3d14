// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool atm-echo: the guest side of an ATM gateway exchange. One RC
 * QP per --peer-qpn, each connected to that QPN at --peer-lid (the
 * gateway's LID and the `local_qpn`s of its VC map); receives are posted
 * before the QPs' numbers are printed, so the host can tell the gateway
 * (control socket `remote-qpn VPI/VCI QPN`) and start sending at once:
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
 * PSN 100 (the gateway map's `sq_psn` and `rq_psn`). Messages of up to
 * AE_SLOT (16 KiB); a longer one completes in error and fails the run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "commands.h"
#include "dev.h"
#include "parse.h"
#include "usage.h"
#include "verbs_lib.h"

#define AE_MAX_QPS	4U
#define AE_NRECV	8U		/* receives per QP */
#define AE_SLOT		0x4000U		/* 16 KiB: more than AAL5's usual 9,180 */
#define AE_BUF_SIZE	((AE_MAX_QPS * AE_NRECV + 1) * AE_SLOT)
#define AE_SEND_OFF	(AE_MAX_QPS * AE_NRECV * AE_SLOT)

struct atm_echo {
	struct vb v;
	uint32_t nqps;
	uint32_t qpn[AE_MAX_QPS];
	uint32_t peer_qpn[AE_MAX_QPS];
	uint32_t frames;
	uint32_t wait_s;
	uint8_t xor;
};

static int ae_fail(const char *what, int ret)
{
	printf("IBTCA-ATM-ECHO FAIL %s: %s\n", what,
	       strerror(ret < 0 ? -ret : ret));
	return 1;
}

static int ae_ioctl(struct atm_echo *e, unsigned long req, void *arg)
{
	return ioctl(e->v.fd, req, arg) < 0 ? -errno : 0;
}

/* Receive slot @slot of QP index @i. */
static uint64_t ae_slot_off(uint32_t i, uint32_t slot)
{
	return (uint64_t)(i * AE_NRECV + slot) * AE_SLOT;
}

static int ae_post_recv(struct atm_echo *e, uint32_t i, uint32_t slot)
{
	struct ibtca_post_recv r = {
		.qpn = e->qpn[i],
		.length = AE_SLOT,
		.wr_id = i * AE_NRECV + slot,
		.addr = e->v.iova + ae_slot_off(i, slot),
		.lkey = e->v.lkey,
	};

	return ae_ioctl(e, IBTCA_IOC_POST_RECV, &r);
}

/* Buffer, PD, MR, a send and a receive CQ, the QPs in RTS, receives. */
static int ae_setup(struct atm_echo *e)
{
	struct ibtca_alloc_buf b = { .size = AE_BUF_SIZE };
	struct ibtca_create_pd pd = { 0 };
	struct ibtca_reg_mr mr = { 0 };
	struct ibtca_create_cq cq = { .log_entries = 8 };
	struct ibtca_create_qp qp = { .log_entries = 6 };
	uint32_t i, s;
	int ret;

	ret = vb_wait_port(&e->v);
	if (ret)
		return ae_fail("port not active", ret);
	ret = ae_ioctl(e, IBTCA_IOC_ALLOC_BUF, &b);
	if (ret)
		return ae_fail("ALLOC_BUF", ret);
	e->v.buf = mmap(NULL, b.size, PROT_READ | PROT_WRITE, MAP_SHARED,
			e->v.fd, (off_t)b.mmap_offset);
	if (e->v.buf == MAP_FAILED)
		return ae_fail("mmap", errno);
	ret = ae_ioctl(e, IBTCA_IOC_CREATE_PD, &pd);
	if (ret)
		return ae_fail("CREATE_PD", ret);
	mr.buf = b.handle;
	mr.pdn = pd.pdn;
	mr.length = AE_BUF_SIZE;
	mr.access = IBTCA_ACCESS_LOCAL_WRITE;
	ret = ae_ioctl(e, IBTCA_IOC_REG_MR, &mr);
	if (ret)
		return ae_fail("REG_MR", ret);
	e->v.iova = mr.iova;
	e->v.lkey = mr.lkey;
	ret = ae_ioctl(e, IBTCA_IOC_CREATE_CQ, &cq);
	if (ret)
		return ae_fail("CREATE_CQ", ret);
	e->v.scq = cq.cqn;
	ret = ae_ioctl(e, IBTCA_IOC_CREATE_CQ, &cq);
	if (ret)
		return ae_fail("CREATE_CQ", ret);
	e->v.rcq = cq.cqn;
	qp.pdn = pd.pdn;
	qp.send_cqn = e->v.scq;
	qp.recv_cqn = e->v.rcq;
	for (i = 0; i < e->nqps; i++) {
		ret = ae_ioctl(e, IBTCA_IOC_CREATE_QP, &qp);
		if (ret)
			return ae_fail("CREATE_QP", ret);
		e->qpn[i] = qp.qpn;
		ret = vb_modify(&e->v, e->qpn[i], e->peer_qpn[i], 0);
		if (ret)
			return ae_fail("connect QP", ret);
		for (s = 0; s < AE_NRECV; s++) {
			ret = ae_post_recv(e, i, s);
			if (ret)
				return ae_fail("POST_RECV", ret);
		}
	}
	return 0;
}

/* Sends the message in receive slot @wr_id back, transformed. */
static int ae_echo(struct atm_echo *e, uint32_t i, uint64_t wr_id,
		   uint32_t len)
{
	uint8_t *in = e->v.buf + wr_id * AE_SLOT;
	uint8_t *out = e->v.buf + AE_SEND_OFF;
	struct ibtca_post_send s = {
		.qpn = e->qpn[i],
		.opcode = IBTCA_WR_SEND,
		.addr = e->v.iova + AE_SEND_OFF,
		.length = len,
		.lkey = e->v.lkey,
	};
	struct ibtca_poll_cq c;
	uint32_t k;
	int ret;

	for (k = 0; k < len; k++)
		out[k] = in[k] ^ e->xor;
	ret = vb_run(&e->v, &s, e->v.scq, &c, 120);
	if (ret || c.status != IBTCA_WC_SUCCESS) {
		printf("IBTCA-ATM-ECHO FAIL send on qpn=%u: %s\n", e->qpn[i],
		       vb_err(ret, &c));
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
		struct ibtca_poll_cq c;

		ret = vb_poll(&e->v, e->v.rcq, &c, e->wait_s);
		if (ret) {
			printf("IBTCA-ATM-ECHO FAIL frame %u: %s after %u s\n",
			       n, strerror(-ret), e->wait_s);
			return 1;
		}
		for (i = 0; i < e->nqps && e->qpn[i] != c.qpn; i++)
			;
		if (c.status != IBTCA_WC_SUCCESS || c.opcode != IBTCA_WC_RECV ||
		    i == e->nqps || c.wr_id / AE_NRECV != i) {
			printf("IBTCA-ATM-ECHO FAIL frame %u: qpn=%u wr_id=%llu %s\n",
			       n, c.qpn, (unsigned long long)c.wr_id,
			       vb_err(0, &c));
			return 1;
		}
		printf("IBTCA-ATM-ECHO frame %u qpn=%u len=%u\n", n, c.qpn,
		       c.byte_len);
		if (ae_echo(e, i, c.wr_id, c.byte_len))
			return 1;
		ret = ae_post_recv(e, i, (uint32_t)(c.wr_id % AE_NRECV));
		if (ret)
			return ae_fail("POST_RECV", ret);
		bytes += c.byte_len;
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
			fprintf(stderr, "ibtca-tool: at most %u peer QPNs\n",
				AE_MAX_QPS);
			return -1;
		}
		if (parse_u32(tok, &e->peer_qpn[e->nqps]) ||
		    e->peer_qpn[e->nqps] > 0xffffff) {
			fprintf(stderr, "ibtca-tool: bad QPN '%s'\n", tok);
			return -1;
		}
		e->nqps++;
	}
	return e->nqps ? 0 : -1;
}

int cmd_atm_echo(int argc, char **argv)
{
	struct atm_echo e = { .v.fd = -1, .wait_s = 600 };
	uint32_t lid = 0, n, i;
	int have_lid = 0, ret;

	for (i = 0; i + 1 < (uint32_t)argc; i += 2) {
		const char *o = argv[i], *val = argv[i + 1];

		ret = vb_qp_option(o, val);
		if (ret < 0)
			usage();
		if (ret)
			continue;
		if (!strcmp(o, "--peer-lid") && !parse_u32(val, &lid) &&
		    lid && lid < 0xc000)
			have_lid = 1;
		else if (!strcmp(o, "--peer-qpn") && !ae_parse_qpns(&e, argv[i + 1]))
			n = 0;
		else if (!strcmp(o, "--frames") && !parse_u32(val, &n) && n)
			e.frames = n;
		else if (!strcmp(o, "--wait") && !parse_u32(val, &n) && n)
			e.wait_s = n;
		else if (!strcmp(o, "--xor") && !parse_u32(val, &n) && n < 256)
			e.xor = (uint8_t)n;
		else if (!strcmp(o, "--sl") && !parse_u32(val, &n) && n < 15)
			e.v.sl = (uint8_t)n;
		else
			usage();
	}
	if (i != (uint32_t)argc || !have_lid || !e.nqps || !e.frames)
		usage();
	e.v.peer_lid = (uint16_t)lid;
	e.v.fd = open_dev();
	if (e.v.fd < 0)
		return 1;
	ret = ae_setup(&e);
	if (!ret) {
		printf("IBTCA-ATM-ECHO ready qpns=");
		for (i = 0; i < e.nqps; i++)
			printf("%s%u", i ? "," : "", e.qpn[i]);
		printf(" peer_lid=%u peer_qpns=", lid);
		for (i = 0; i < e.nqps; i++)
			printf("%s%u", i ? "," : "", e.peer_qpn[i]);
		printf("\n");
		ret = ae_run(&e);
	}
	/* Closing the device file destroys what the run created. */
	close(e.v.fd);
	return ret;
}
