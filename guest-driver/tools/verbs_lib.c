// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs helpers of ibtca-tool: one RC QP pair set up through the
 * driver's ioctls (PD, MR over a 2 MiB buffer, CQs, QPs moved to RTS
 * against the peer's), SEND/RECV messages between the two guests, polling
 * and the HELLO exchange of buffer address and R_Key. The DRDMA scenarios
 * (drdma.c, drdma_fan.c) build on them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dev.h"
#include "parse.h"
#include "report.h"
#include "verbs_lib.h"

uint8_t vb_timeout = VB_TIMEOUT_DEFAULT;
uint8_t vb_retry = VB_RETRY_DEFAULT;

/*
 * The QP options every verbs-based command takes: --timeout EXP (0-31;
 * 0 is IBA's "no timeout") and --retry N (0-7). Returns 1 if @opt is one
 * of them and @val is good, 0 if @opt is neither, -1 (with a message) for
 * a bad value.
 */
int vb_qp_option(const char *opt, const char *val)
{
	int timeout = !strcmp(opt, "--timeout");
	uint32_t n;

	if (!timeout && strcmp(opt, "--retry"))
		return 0;
	if (parse_u32(val, &n))
		return -1;
	if (timeout && n > 31) {
		fprintf(stderr,
			"ibtca-tool: --timeout %u: the exponent is 0-31 (4.096 us << EXP, 0: none)\n",
			n);
		return -1;
	}
	if (!timeout && n > 7) {
		fprintf(stderr, "ibtca-tool: --retry %u: 0-7 retries\n", n);
		return -1;
	}
	if (timeout)
		vb_timeout = (uint8_t)n;
	else
		vb_retry = (uint8_t)n;
	return 1;
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void vb_pattern(uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 12));
}

/* Offset of the first byte that differs from the pattern, or len. */
size_t vb_pattern_diff(const uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (uint8_t)(i * 31 + seed + (i >> 12)))
			break;
	return i;
}

int vb_modify(struct vb *v, uint32_t qpn, uint32_t dest_qpn, uint8_t mtu)
{
	uint32_t remote = IBTCA_ACCESS_REMOTE_WRITE | IBTCA_ACCESS_REMOTE_READ |
			  IBTCA_ACCESS_REMOTE_ATOMIC;
	struct ibtca_modify_qp m = {
		.qpn = qpn,
		.attr_mask = IBTCA_QP_ATTR_STATE | IBTCA_QP_ATTR_ACCESS,
		.state = IBTCA_QPS_INIT,
		.access = remote,
	};

	if (ioctl(v->fd, IBTCA_IOC_MODIFY_QP, &m) < 0)
		return -errno;
	memset(&m, 0, sizeof(m));
	m.qpn = qpn;
	m.attr_mask = IBTCA_QP_ATTR_STATE | IBTCA_QP_ATTR_PATH |
		      IBTCA_QP_ATTR_DEST_QPN | IBTCA_QP_ATTR_RQ_PSN;
	m.state = IBTCA_QPS_RTR;
	m.path_mtu = mtu ? mtu : IBTCA_MTU_4096;
	m.dlid = v->peer_lid;
	m.sl = v->sl;
	m.dest_qpn = dest_qpn;
	m.rq_psn = VB_PSN;
	if (ioctl(v->fd, IBTCA_IOC_MODIFY_QP, &m) < 0)
		return -errno;
	memset(&m, 0, sizeof(m));
	m.qpn = qpn;
	m.attr_mask = IBTCA_QP_ATTR_STATE | IBTCA_QP_ATTR_SQ_PSN |
		      IBTCA_QP_ATTR_RETRY;
	m.state = IBTCA_QPS_RTS;
	m.sq_psn = VB_PSN;
	/*
	 * A peer that stops answering fails a request after (retry + 1) x
	 * timeout. A peer guest still booting is one too: vb_exchange
	 * reconnects and tries again.
	 */
	m.timeout = vb_timeout;
	m.retry_cnt = vb_retry;
	m.rnr_retry = 7;
	m.min_rnr_timer = 1;
	m.max_rd_atomic = 3;	/* 3 READs in flight; the device allows up to 16 */
	if (ioctl(v->fd, IBTCA_IOC_MODIFY_QP, &m) < 0)
		return -errno;
	return 0;
}

static int vb_post_recv(struct vb *v, uint32_t slot)
{
	struct ibtca_post_recv r = {
		.qpn = v->qp,
		.length = VB_SLOT,
		.wr_id = slot,
		.addr = v->iova + VB_RECV_OFF + slot * VB_SLOT,
		.lkey = v->lkey,
	};

	return ioctl(v->fd, IBTCA_IOC_POST_RECV, &r) < 0 ? -errno : 0;
}

/*
 * Waits up to @secs for a completion on @cqn (sleeping in the driver until
 * the CQ interrupt); -ETIMEDOUT if none.
 */
int vb_poll(struct vb *v, uint32_t cqn, struct ibtca_poll_cq *c,
	    double secs)
{
	double end = now_s() + secs;

	for (;;) {
		double left = end - now_s();

		memset(c, 0, sizeof(*c));
		c->cqn = cqn;
		c->timeout_ms = left <= 0 ? 0 : left > 60 ? 60000 :
				(uint32_t)(left * 1000) + 1;
		if (ioctl(v->fd, IBTCA_IOC_POLL_CQ, c) < 0)
			return -errno;
		if (c->found)
			return 0;
		if (left <= 0)
			return -ETIMEDOUT;
	}
}

/* Posts a work request and waits for its completion on @cqn. */
int vb_run(struct vb *v, struct ibtca_post_send *s, uint32_t cqn,
	   struct ibtca_poll_cq *c, double secs)
{
	int ret;

	memset(c, 0, sizeof(*c));
	s->wr_id = ++v->wr_id;
	if (ioctl(v->fd, IBTCA_IOC_POST_SEND, s) < 0)
		return -errno;
	ret = vb_poll(v, cqn, c, secs);
	if (!ret && c->wr_id != s->wr_id)
		return -EPROTO;
	return ret;
}

const char *vb_err(int ret, const struct ibtca_poll_cq *c)
{
	static char msg[96];

	if (ret)
		snprintf(msg, sizeof(msg), "error=%s status=%u", strerror(-ret),
			 c->status);
	else
		snprintf(msg, sizeof(msg), "status=%u opcode=0x%x byte_len=%u",
			 c->status, c->opcode, c->byte_len);
	return msg;
}

/* SENDs @m on the first QP; 0 once it completed successfully. */
int vb_send(struct vb *v, struct vb_msg *m, double secs,
	    struct ibtca_poll_cq *c)
{
	struct ibtca_post_send s = {
		.qpn = v->qp,
		.opcode = IBTCA_WR_SEND,
		.addr = v->iova + VB_SEND_OFF,
		.length = sizeof(*m),
		.lkey = v->lkey,
	};
	int ret;

	m->magic = VB_MAGIC;
	memcpy(v->buf + VB_SEND_OFF, m, sizeof(*m));
	ret = vb_run(v, &s, v->scq, c, secs);
	if (!ret && c->status != IBTCA_WC_SUCCESS)
		ret = -EIO;
	return ret;
}

int vb_send_simple(struct vb *v, uint32_t type, uint32_t ok,
		   uint64_t value)
{
	struct vb_msg m = { .type = type, .ok = ok, .value = value };
	struct ibtca_poll_cq c;
	int ret = vb_send(v, &m, 60, &c);

	if (ret)
		fprintf(stderr, "ibtca-tool: send type %u: %s\n", type,
			vb_err(ret, &c));
	return ret;
}

/* Receives the next message into @m (and reposts its slot). */
int vb_recv(struct vb *v, struct vb_msg *m, double secs)
{
	struct ibtca_poll_cq c;
	int ret = vb_poll(v, v->rcq, &c, secs);

	if (ret)
		return ret;
	if (c.status != IBTCA_WC_SUCCESS || c.wr_id >= VB_NRECV ||
	    c.byte_len != sizeof(*m)) {
		fprintf(stderr, "ibtca-tool: bad receive: wr_id=%llu %s\n",
			(unsigned long long)c.wr_id, vb_err(0, &c));
		return -EIO;
	}
	memcpy(m, v->buf + VB_RECV_OFF + c.wr_id * VB_SLOT, sizeof(*m));
	ret = vb_post_recv(v, (uint32_t)c.wr_id);
	if (ret)
		return ret;
	return m->magic == VB_MAGIC ? 0 : -EBADMSG;
}

/* Receives a message of @type within @secs. */
int vb_expect_within(struct vb *v, uint32_t type, struct vb_msg *m,
		     double secs)
{
	int ret = vb_recv(v, m, secs);

	if (!ret && m->type != type)
		ret = -EPROTO;
	return ret;
}

/* Receives a message of @type. */
int vb_expect(struct vb *v, uint32_t type, struct vb_msg *m)
{
	return vb_expect_within(v, type, m, 120);
}

int vb_wait_port(struct vb *v)
{
	double end = now_s() + 60;
	uint32_t st = 0;

	while (now_s() < end) {
		if (reg_read(v->fd, IBTCA_REG_PORT_STATE, &st))
			return -EIO;
		if (st == IBTCA_PORT_ACTIVE)
			return 0;
		usleep(10000);
	}
	return -ETIMEDOUT;
}

/* Records why set-up failed; returns -1. */
static int vb_fail(char *err, size_t errlen, const char *what, int ret)
{
	snprintf(err, errlen, "%s: %s", what, strerror(ret < 0 ? -ret : ret));
	return -1;
}

static int vb_ioctl(struct vb *v, unsigned long req, void *arg)
{
	return ioctl(v->fd, req, arg) < 0 ? -errno : 0;
}

static int vb_state(struct vb *v, uint32_t qpn, uint8_t state)
{
	struct ibtca_modify_qp m = {
		.qpn = qpn,
		.attr_mask = IBTCA_QP_ATTR_STATE,
		.state = state,
	};

	return vb_ioctl(v, IBTCA_IOC_MODIFY_QP, &m);
}

int vb_setup(struct vb *v, char *err, size_t errlen)
{
	struct ibtca_alloc_buf b = { .size = VB_BUF_SIZE };
	struct ibtca_create_pd pd = { 0 };
	struct ibtca_reg_mr mr = { 0 };
	struct ibtca_create_cq cq = { .log_entries = 8 };
	struct ibtca_create_qp qp = { .log_entries = 6 };
	uint32_t *cqs[] = { &v->scq, &v->rcq, &v->scq2 };
	uint32_t qpn0 = v->qpn0 ? v->qpn0 : VB_QPN0;
	uint32_t peer0 = v->peer_qpn0 ? v->peer_qpn0 : VB_QPN0;
	uint32_t i;
	int ret;

	ret = vb_wait_port(v);
	if (ret)
		return vb_fail(err, errlen, "port not active", ret);
	ret = vb_ioctl(v, IBTCA_IOC_ALLOC_BUF, &b);
	if (ret)
		return vb_fail(err, errlen, "ALLOC_BUF", ret);
	v->buf = mmap(NULL, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd,
		      (off_t)b.mmap_offset);
	if (v->buf == MAP_FAILED)
		return vb_fail(err, errlen, "mmap", errno);
	ret = vb_ioctl(v, IBTCA_IOC_CREATE_PD, &pd);
	if (ret)
		return vb_fail(err, errlen, "CREATE_PD", ret);
	v->pdn = pd.pdn;
	mr.buf = b.handle;
	mr.pdn = v->pdn;
	mr.length = VB_BUF_SIZE;
	mr.access = IBTCA_ACCESS_LOCAL_WRITE | IBTCA_ACCESS_REMOTE_WRITE |
		    IBTCA_ACCESS_REMOTE_READ | IBTCA_ACCESS_REMOTE_ATOMIC;
	ret = vb_ioctl(v, IBTCA_IOC_REG_MR, &mr);
	if (ret)
		return vb_fail(err, errlen, "REG_MR", ret);
	v->iova = mr.iova;
	v->lkey = mr.lkey;
	v->rkey = mr.rkey;
	for (i = 0; i < ARRAY_SIZE(cqs); i++) {
		ret = vb_ioctl(v, IBTCA_IOC_CREATE_CQ, &cq);
		if (ret)
			return vb_fail(err, errlen, "CREATE_CQ", ret);
		*cqs[i] = cq.cqn;
	}
	qp.pdn = v->pdn;
	qp.send_cqn = v->scq;
	qp.recv_cqn = v->rcq;
	ret = vb_ioctl(v, IBTCA_IOC_CREATE_QP, &qp);
	if (ret)
		return vb_fail(err, errlen, "CREATE_QP", ret);
	v->qp = qp.qpn;
	/* The second QP (bad R_Key) has its own send CQ. */
	qp.send_cqn = v->scq2;
	ret = vb_ioctl(v, IBTCA_IOC_CREATE_QP, &qp);
	if (ret)
		return vb_fail(err, errlen, "CREATE_QP", ret);
	v->qp2 = qp.qpn;
	if (v->qp != qpn0 || v->qp2 != qpn0 + 1) {
		snprintf(err, errlen, "QP numbers 0x%x 0x%x, expected 0x%x 0x%x",
			 v->qp, v->qp2, qpn0, qpn0 + 1);
		return -1;
	}
	ret = vb_modify(v, v->qp, peer0, v->mtu[0]);
	if (ret)
		return vb_fail(err, errlen, "connect QP 1", ret);
	ret = vb_modify(v, v->qp2, peer0 + 1, v->mtu[1]);
	if (ret)
		return vb_fail(err, errlen, "connect QP 2", ret);
	for (i = 0; i < VB_NRECV; i++) {
		ret = vb_post_recv(v, i);
		if (ret)
			return vb_fail(err, errlen, "POST_RECV", ret);
	}
	snprintf(err, errlen,
		 "qpn=0x%x,0x%x peer_lid=%u iova=0x%llx lkey=0x%x rkey=0x%x",
		 v->qp, v->qp2, v->peer_lid, (unsigned long long)v->iova,
		 v->lkey, v->rkey);
	return 0;
}

/*
 * Puts the first QP, which a failed request took to the error state, back
 * in RTS: takes the VB_NRECV receives the error flushed (so that no stale
 * completion is taken for a message later), RESET, INIT, RTR, RTS with the
 * same PSNs, and the receives posted again.
 */
static int vb_reconnect(struct vb *v)
{
	uint32_t peer0 = v->peer_qpn0 ? v->peer_qpn0 : VB_QPN0;
	struct ibtca_poll_cq c;
	uint32_t i;
	int ret = 0;

	for (i = 0; i < VB_NRECV && !ret; i++)
		ret = vb_poll(v, v->rcq, &c, 5);
	if (!ret)
		ret = vb_state(v, v->qp, IBTCA_QPS_RESET);
	if (!ret)
		ret = vb_modify(v, v->qp, peer0, v->mtu[0]);
	for (i = 0; i < VB_NRECV && !ret; i++)
		ret = vb_post_recv(v, i);
	return ret;
}

/*
 * vb_send, for the HELLOs: a peer guest still booting has no QP yet and
 * its device drops our packets, so the send fails (WC_RETRY_EXC_ERR)
 * after (retry + 1) x timeout; reconnect and send again, for up to @secs
 * in all. A HELLO the peer took but did not acknowledge in time comes
 * again with the same PSN: the peer acknowledges the duplicate and does
 * not deliver it twice.
 */
static int vb_send_retrying(struct vb *v, struct vb_msg *m, double secs,
			    struct ibtca_poll_cq *c)
{
	double end = now_s() + secs;
	int ret, tries = 0;

	for (;;) {
		ret = vb_send(v, m, secs, c);
		if (ret != -EIO || c->status != IBTCA_WC_RETRY_EXC_ERR ||
		    now_s() >= end)
			break;
		tries++;
		ret = vb_reconnect(v);
		if (ret)
			break;
	}
	if (tries)
		fprintf(stderr, "ibtca-tool: HELLO sent again %d times (peer not ready)\n",
			tries);
	return ret;
}

/*
 * HELLO exchange of buffer address and R_Key. The client's HELLO is sent
 * again until the server's QP is ready (vb_send_retrying); the server
 * waits for it (the client may boot later) and answers.
 */
int vb_exchange(struct vb *v)
{
	struct ibtca_poll_cq c;
	struct vb_msg m;
	char name[32];
	int ret;

	snprintf(name, sizeof(name), "exchange%s", v->tag ? v->tag : "");
	memset(&c, 0, sizeof(c));
	memset(&m, 0, sizeof(m));
	m.type = VB_HELLO;
	m.iova = v->iova;
	m.rkey = v->rkey;
	if (v->server) {
		ret = vb_expect_within(v, VB_HELLO, &m,
				       v->wait_s ? v->wait_s : 280);
		if (ret) {
			vcheck(name, 0, "no hello from the client: %s",
			       strerror(-ret));
			return ret;
		}
		v->peer_iova = m.iova;
		v->peer_rkey = m.rkey;
		m.iova = v->iova;
		m.rkey = v->rkey;
		ret = vb_send_retrying(v, &m, 60, &c);
	} else {
		ret = vb_send_retrying(v, &m, 200, &c);
		if (!ret)
			ret = vb_expect(v, VB_HELLO, &m);
		v->peer_iova = m.iova;
		v->peer_rkey = m.rkey;
	}
	vcheck(name, !ret, "peer_iova=0x%llx peer_rkey=0x%x %s",
	       (unsigned long long)v->peer_iova, v->peer_rkey, vb_err(ret, &c));
	return ret;
}
