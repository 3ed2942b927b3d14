// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The kernel's checks of ibv_modify_qp's driver data (seed 002's struct
 * ibtca_modify_qp_cmd), sent as the provider would but malformed: the
 * extended MODIFY_QP is written straight to the context's command file,
 * with driver data of any length and content, for a loopback RC QP on
 * INIT. Every malformed one must fail with the exact errno and leave the
 * QP on INIT; a well-formed one (zero tail) takes it to RTR.
 *
 * seed-env: a loopback RC QP connected by ibv_modify_qp, so with the
 * provider's seed 002 variables (IBTCA_MSN_START, IBTCA_ACK) of this
 * process, and an 8 KiB RDMA WRITE through it checked byte for byte.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ibtca-abi.h>

#include "provider_test.h"

/* ibtca_abi.h's SEED_ACK_COALESCED, the device's coalescing ACK mode. */
#define SEED_ACK_COALESCED 2

/* Driver data: the structure and 8 more bytes. */
struct seed_drv {
	struct ibtca_modify_qp_cmd cmd;
	uint64_t tail;
};

/*
 * The extended MODIFY_QP of @qp to RTR (loopback to itself at @lid, or to
 * INIT with @to_init) with the first @len bytes of @drv as driver data:
 * 0 or the errno.
 */
static int seed_modify(struct ibv_qp *qp, uint16_t lid, int to_init,
		       const struct seed_drv *drv, size_t len)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_ex_cmd_hdr ex;
		struct ib_uverbs_ex_modify_qp core;
		struct seed_drv drv;
	} w;
	struct ib_uverbs_ex_modify_qp_resp resp;
	size_t n = sizeof(w.hdr) + sizeof(w.ex) + sizeof(w.core) + len;

	memset(&w, 0, sizeof(w));
	w.hdr.command = IB_USER_VERBS_CMD_FLAG_EXTENDED |
			IB_USER_VERBS_EX_CMD_MODIFY_QP;
	w.hdr.in_words = sizeof(w.core) / 8;
	w.hdr.out_words = sizeof(resp) / 8;
	w.ex.response = (uintptr_t)&resp;
	w.ex.provider_in_words = len / 8;
	w.core.base.qp_handle = qp->handle;
	if (to_init) {
		w.core.base.qp_state = IBV_QPS_INIT;
		w.core.base.port_num = 1;
		w.core.base.attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	} else {
		w.core.base.qp_state = IBV_QPS_RTR;
		w.core.base.path_mtu = IBV_MTU_1024;
		w.core.base.dest_qp_num = qp->qp_num;
		w.core.base.max_dest_rd_atomic = 1;
		w.core.base.min_rnr_timer = 12;
		w.core.base.dest.dlid = lid;
		w.core.base.dest.port_num = 1;
		w.core.base.attr_mask = IBV_QP_STATE | IBV_QP_AV |
					IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER;
	}
	memcpy(&w.drv, drv, len);
	if (write(qp->context->cmd_fd, &w, n) == (ssize_t)n)
		return 0;
	return errno;
}

static int seed_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &init))
		return -1;
	return a.qp_state;
}

/* One malformed case: @want errno, the QP still on INIT. */
static void seed_refused(struct ibv_qp *qp, uint16_t lid, const char *name,
			 const struct seed_drv *d, size_t len, int want)
{
	int err = seed_modify(qp, lid, 0, d, len);
	int state = seed_state(qp);

	step(name, err == want && state == IBV_QPS_INIT,
	     "%zu bytes: errno %d (%s), want %d; QP state %d", len, err,
	     strerror(err), want, state);
}

int seed_udata_test(const char *name)
{
	struct ibv_context *ctx = open_named(name);
	struct ibv_port_attr port;
	struct seed_drv d;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	int err;

	if (!ctx || ibv_query_port(ctx, 1, &port))
		return 1;
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qp = cq ? ibv_create_qp(pd, &qa) : NULL;
	step("seed_setup", !!qp, "RC QP %u at LID %u", qp ? qp->qp_num : 0,
	     port.lid);
	if (!qp)
		return 1;

	/* RESET to INIT takes no seed 002 choices. */
	memset(&d, 0, sizeof(d));
	d.cmd.comp_mask = IBTCA_MODIFY_QP_MSN;
	err = seed_modify(qp, port.lid, 1, &d, sizeof(d.cmd));
	step("seed_at_init", err == EINVAL && seed_state(qp) == IBV_QPS_RESET,
	     "MSN on RESET->INIT: errno %d (%s)", err, strerror(err));
	err = seed_modify(qp, port.lid, 1, &d, 0);
	step("seed_init", !err && seed_state(qp) == IBV_QPS_INIT,
	     "RESET->INIT without driver data: errno %d", err);

	memset(&d, 0, sizeof(d));
	d.cmd.comp_mask = 1U << 2;
	seed_refused(qp, port.lid, "seed_unknown_bit", &d, sizeof(d.cmd), EINVAL);
	memset(&d, 0, sizeof(d));
	d.cmd.comp_mask = IBTCA_MODIFY_QP_MSN;
	d.cmd.reserved16 = 1;
	seed_refused(qp, port.lid, "seed_reserved", &d, sizeof(d.cmd), EINVAL);
	d.cmd.reserved16 = 0;
	d.cmd.initial_msn = 0x1000000;
	seed_refused(qp, port.lid, "seed_msn_range", &d, sizeof(d.cmd), EINVAL);
	memset(&d, 0, sizeof(d));
	d.cmd.comp_mask = IBTCA_MODIFY_QP_ACK_POLICY;
	d.cmd.ack_mode = SEED_ACK_COALESCED;
	seed_refused(qp, port.lid, "seed_coalesced_zero", &d, sizeof(d.cmd),
		     EINVAL);
	d.cmd.ack_every = 4;
	d.cmd.window = IBTCA_MODIFY_QP_MAX_WINDOW + 1;
	seed_refused(qp, port.lid, "seed_window_range", &d, sizeof(d.cmd),
		     EINVAL);
	d.cmd.window = 0;
	d.cmd.ack_mode = 3;
	seed_refused(qp, port.lid, "seed_ack_mode", &d, sizeof(d.cmd), EINVAL);
	/* An older provider's 8 bytes cannot hold the ACK policy. */
	d.cmd.ack_mode = SEED_ACK_COALESCED;
	seed_refused(qp, port.lid, "seed_short", &d, 8, EINVAL);
	/* A newer provider's longer structure, its extra bytes not 0. */
	d.tail = 1;
	seed_refused(qp, port.lid, "seed_tail", &d, sizeof(d), EOPNOTSUPP);

	/* The seed's choices, the extra bytes 0: the QP reaches RTR. */
	d.tail = 0;
	d.cmd.comp_mask |= IBTCA_MODIFY_QP_MSN;
	d.cmd.initial_msn = 0xffffff;
	err = seed_modify(qp, port.lid, 0, &d, sizeof(d));
	step("seed_accepted", !err && seed_state(qp) == IBV_QPS_RTR,
	     "MSN 0xffffff, coalesced:4, zero tail: errno %d, QP state %d",
	     err, seed_state(qp));

	close_objects(qp, NULL, NULL, NULL, cq, pd);
	ibv_close_device(ctx);
	return 0;
}

int seed_env_test(const char *name)
{
	static unsigned char src[8192], dst[8192];
	struct ibv_context *ctx = open_named(name);
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_port_attr port;
	struct ibv_mr *ms, *md;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	size_t i;
	int err, st;

	if (!ctx || ibv_query_port(ctx, 1, &port))
		return 1;
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qp = cq ? ibv_create_qp(pd, &qa) : NULL;
	ms = pd ? ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE) : NULL;
	md = pd ? ibv_reg_mr(pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE) : NULL;
	step("seed_env_setup", qp && ms && md, "RC QP %u at LID %u",
	     qp ? qp->qp_num : 0, port.lid);
	if (!qp || !ms || !md)
		return 1;
	err = rc_connect(qp, qp->qp_num, port.lid);
	/* Not a step: the host test says which errno this environment wants. */
	printf("IBTCA-PROVIDER seed_env connect errno=%d (%s)\n", err,
	       err ? strerror(err) : "connected");
	if (!err) {
		for (i = 0; i < sizeof(src); i++)
			src[i] = (unsigned char)(i * 31 + 7);
		st = write_once(qp, cq, src, ms->lkey, sizeof(src), 0,
				(uintptr_t)dst, md->rkey);
		step("seed_env_write", st == IBV_WC_SUCCESS &&
		     !memcmp(src, dst, sizeof(src)),
		     "8192 bytes: status=%d, %s", st,
		     memcmp(src, dst, sizeof(src)) ? "differ" : "match");
	}
	close_objects(qp, NULL, md, ms, cq, pd);
	ibv_close_device(ctx);
	return err ? 1 : 0;
}
