// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs' libibverbs helpers: device, port, RC connection and
 * completion waits with a deadline (rc.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rc.h"

double rc_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Milliseconds until @end for poll(), at least 0. */
static int ms_left(double end)
{
	double left = end - rc_now();

	return left <= 0 ? 0 : left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
}

static int fcntl_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int rc_parse_u32(const char *s, uint32_t *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int rc_qp_option(struct rc_path *path, const char *opt, const char *val)
{
	int timeout = !strcmp(opt, "--timeout");
	unsigned long n;
	char *end;

	if (!timeout && strcmp(opt, "--retry"))
		return 0;
	errno = 0;
	n = strtoul(val, &end, 0);
	if (errno || end == val || *end || n > (timeout ? 31UL : 7UL)) {
		fprintf(stderr, "ibtca-verbs: %s %s: %s\n", opt, val,
			timeout ? "the exponent is 0-31 (4.096 us << EXP, 0: none)" :
				  "0-7 retries");
		return -1;
	}
	if (timeout)
		path->timeout = (uint8_t)n;
	else
		path->retry = (uint8_t)n;
	return 1;
}

struct ibv_context *rc_open(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list) {
		perror("ibtca-verbs: ibv_get_device_list");
		return NULL;
	}
	for (i = 0; list[i]; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]), name))
			break;
	if (list[i])
		ctx = ibv_open_device(list[i]);
	if (!ctx)
		fprintf(stderr, "ibtca-verbs: cannot open device %s\n",
			name ? name : "(the first)");
	ibv_free_device_list(list);
	return ctx;
}

int rc_wait_port(struct ibv_context *ctx, double secs)
{
	double end = rc_now() + secs;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_port_attr attr;
	struct ibv_async_event ev;
	int ret;

	/* Reads of the async fd must not block past the deadline. */
	ret = fcntl_nonblock(ctx->async_fd);
	if (ret)
		return ret;
	for (;;) {
		ret = ibv_query_port(ctx, 1, &attr);
		if (ret)
			return -ret;
		if (attr.state == IBV_PORT_ACTIVE)
			return 0;
		ret = poll(&p, 1, ms_left(end));
		if (ret < 0)
			return -errno;
		if (!ret)
			return -ETIMEDOUT;
		while (!ibv_get_async_event(ctx, &ev))
			ibv_ack_async_event(&ev);
	}
}

int rc_cq_create(struct ibv_context *ctx, int entries, struct rc_cq *cq)
{
	cq->channel = ibv_create_comp_channel(ctx);
	if (!cq->channel)
		return errno ? -errno : -ENOMEM;
	if (fcntl_nonblock(cq->channel->fd))
		return -EIO;
	cq->cq = ibv_create_cq(ctx, entries, NULL, cq->channel, 0);
	if (!cq->cq)
		return errno ? -errno : -ENOMEM;
	return 0;
}

int rc_init(struct ibv_qp *qp, const struct rc_path *path)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = path->access,
	};

	return -ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int rc_ready(struct ibv_qp *qp, const struct rc_path *path,
	     uint32_t dest_qpn)
{
	uint8_t rd_atomic = path->rd_atomic ? path->rd_atomic : 1;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = path->mtu ? path->mtu : IBV_MTU_4096,
		.dest_qp_num = dest_qpn,
		.rq_psn = RC_PSN,
		.max_dest_rd_atomic = rd_atomic,
		.min_rnr_timer = 1,
		.ah_attr = { .dlid = path->dlid, .sl = path->sl,
			     .port_num = 1 },
	};
	int ret;

	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return -ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = RC_PSN;
	a.timeout = path->timeout;
	a.retry_cnt = path->retry;
	a.rnr_retry = 7;
	a.max_rd_atomic = rd_atomic;
	return -ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int rc_connect(struct ibv_qp *qp, const struct rc_path *path,
	       uint32_t dest_qpn)
{
	int ret = rc_init(qp, path);

	return ret ? ret : rc_ready(qp, path, dest_qpn);
}

int rc_wait(struct rc_cq *cq, struct ibv_wc *wc, double secs)
{
	double end = rc_now() + secs;
	struct pollfd p = { .fd = cq->channel->fd, .events = POLLIN };
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n;

	for (;;) {
		/* Armed before the poll: a completion after it raises an event. */
		if (ibv_req_notify_cq(cq->cq, 0))
			return -EIO;
		n = ibv_poll_cq(cq->cq, 1, wc);
		if (n < 0)
			return -EIO;
		if (n)
			return 0;
		n = poll(&p, 1, ms_left(end));
		if (n < 0)
			return -errno;
		if (!n)
			return -ETIMEDOUT;
		if (!ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx))
			ibv_ack_cq_events(ev_cq, 1);
	}
}

const char *rc_wc_str(const struct ibv_wc *wc)
{
	static char msg[96];

	snprintf(msg, sizeof(msg), "status=%s opcode=%d byte_len=%u",
		 ibv_wc_status_str(wc->status), wc->opcode, wc->byte_len);
	return msg;
}
