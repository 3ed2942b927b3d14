// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the parts of ibtca-provider-test share (provider_test.h): the
 * IBTCA-PROVIDER step lines and their count of failures, opening a device
 * by name, connecting an RC QP, one RDMA WRITE and closing what a
 * test made. main
 * (ibtca_provider_test.c) runs the parts; they and it call this file, and
 * it calls none of them.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "provider_test.h"

static int failures;

void step(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	printf("IBTCA-PROVIDER %s %s ", name, ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!ok)
		failures++;
}

int step_failures(void)
{
	return failures;
}

/* The uverbs character device of the device named @name ("uverbs0"). */
static char uverbs_dev[sizeof("/dev/infiniband/") + IBV_SYSFS_NAME_MAX];

const char *opened_uverbs_dev(void)
{
	return uverbs_dev;
}

struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list) {
		step("open", 0, "ibv_get_device_list: %s", strerror(errno));
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			break;
	if (i == n) {
		step("open", 0, "no device %s among %d", name, n);
	} else {
		snprintf(uverbs_dev, sizeof(uverbs_dev), "/dev/infiniband/%s",
			 list[i]->dev_name);
		ctx = ibv_open_device(list[i]);
		step("open", !!ctx, "%s node_guid=%016" PRIx64 " %s", name,
		     be64toh(ibv_get_device_guid(list[i])),
		     ctx ? "opened" : strerror(errno));
	}
	ibv_free_device_list(list);
	return ctx;
}

int rc_connect(struct ibv_qp *qp, uint32_t dqpn, uint16_t dlid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	int err;

	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/*
 * One RDMA WRITE of @len bytes at @src (in @lkey's region, or with @flags
 * IBV_SEND_INLINE any memory) to @raddr/@rkey: its status, -1 - errno if
 * the post failed, -2 without a completion.
 */
int write_once(struct ibv_qp *qp, struct ibv_cq *cq, const void *src,
	       uint32_t lkey, size_t len, unsigned int flags,
	       uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)src, .length = len, .lkey = lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 7, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED | flags,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;
	struct ibv_wc wc;
	int i, n, err;

	err = ibv_post_send(qp, &wr, &bad);
	if (err)
		return -1 - err;
	/* Generous: a TCG guest on a busy host (30 s). */
	for (i = 0; i < 30000; i++) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return wc.status;
		usleep(1000);
	}
	return -2;
}

void close_objects(struct ibv_qp *qa, struct ibv_qp *qb, struct ibv_mr *ma,
		   struct ibv_mr *mb, struct ibv_cq *cq, struct ibv_pd *pd)
{
	if (qa)
		ibv_destroy_qp(qa);
	if (qb)
		ibv_destroy_qp(qb);
	if (ma)
		ibv_dereg_mr(ma);
	if (mb)
		ibv_dereg_mr(mb);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
}
