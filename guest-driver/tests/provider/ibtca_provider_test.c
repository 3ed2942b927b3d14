// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ibtca-provider-test: opens an ibtca device through libibverbs and the
 * ibtca provider and exercises the verbs the provider has: query_device,
 * query_port, alloc_pd/dealloc_pd, reg_mr/dereg_mr (whatever the kernel
 * answers), a user CQ and QP (created, polled, armed, queried, destroyed),
 * and the doorbell pages running out: every context holds one, so the
 * 64th context is refused with ENOSPC and the next opens once one closed;
 * then the ibv_wr_* API, extended CQs and memory windows on one device
 * (ibtca_provider_ext.c), and posts and polls under a seccomp filter that
 * traps every system call (ibtca_provider_bypass.c).
 * Beside libibverbs it opens user contexts with raw uverbs
 * GET_CONTEXT commands: one of this ABI version (the kernel's response and
 * limits printed) and one of another version (refused with EPROTO). One
 * IBTCA-PROVIDER line per step; exit status 0 if every step behaved.
 *
 *   ibtca-provider-test [DEVICE [COMMAND]]
 *   ibtca-provider-test bad-rkey-server | bad-rkey-client SERVER
 *   ibtca-provider-test seed-udata | seed-env [DEVICE]
 *
 * DEVICE defaults to ibtca0; COMMAND (run with system(3)) runs while the
 * protection domains are held, e.g. "rdma resource show pd". The
 * bad-rkey modes run between two hosts (ibtca_provider_remote.c);
 * seed-udata checks the kernel's checks of seed 002's modify_qp driver
 * data, seed-env a connection with the environment's seed 002 choices
 * (ibtca_provider_seed.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ibtca-abi.h>

#include "provider_test.h"

/* Doorbell pages of the device (ibtca_regs.h's IBTCA_DB_PAGES); 0 is the kernel's. */
#define IBTCA_DB_PAGES 64
/* Inline bytes one send WQE carries (ibtca_abi.h's IBTCA_MAX_INLINE_DATA). */
#define IBTCA_MAX_INLINE_DATA 64

static void queries(struct ibv_context *ctx)
{
	struct ibv_device_attr_ex dev;
	struct ibv_port_attr port;
	int err;

	err = ibv_query_device_ex(ctx, NULL, &dev);
	step("query_device", !err,
	     "fw=%s vendor=0x%x part=0x%x max_qp=%d max_qp_wr=%d max_cq=%d max_cqe=%d max_mr=%d max_pd=%d max_sge=%d err=%d",
	     err ? "-" : dev.orig_attr.fw_ver, dev.orig_attr.vendor_id,
	     dev.orig_attr.vendor_part_id, dev.orig_attr.max_qp,
	     dev.orig_attr.max_qp_wr, dev.orig_attr.max_cq,
	     dev.orig_attr.max_cqe, dev.orig_attr.max_mr,
	     dev.orig_attr.max_pd, dev.orig_attr.max_sge, err);
	err = ibv_query_port(ctx, 1, &port);
	step("query_port", !err && port.state == IBV_PORT_ACTIVE,
	     "state=%s lid=%u active_mtu=%d link_layer=%u err=%d",
	     ibv_port_state_str(port.state), port.lid, port.active_mtu,
	     port.link_layer, err);
}

/*
 * GET_CONTEXT through write(2) on a fresh uverbs file with @abi_version in
 * the driver's request (@with_req) or without a driver request; the
 * kernel's answer in @resp. Returns 0 or errno.
 */
static int raw_get_context(uint32_t abi_version, int with_req,
			   struct ibtca_alloc_ucontext_resp *resp)
{
	struct {
		struct ib_uverbs_get_context_resp core;
		struct ibtca_alloc_ucontext_resp drv;
	} out = {};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_get_context core;
		struct ibtca_alloc_ucontext_req drv;
	} cmd = {
		.hdr = {
			.command = IB_USER_VERBS_CMD_GET_CONTEXT,
			.out_words = sizeof(out) / 4,
		},
		.core.response = (uintptr_t)&out,
		.drv.abi_version = abi_version,
	};
	size_t len = with_req ? sizeof(cmd) : offsetof(typeof(cmd), drv);
	int fd, err = 0;

	cmd.hdr.in_words = len / 4;
	fd = open(opened_uverbs_dev(), O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (write(fd, &cmd, len) != (ssize_t)len)
		err = errno;
	else
		close(out.core.async_fd);
	close(fd);
	*resp = out.drv;
	return err;
}

/* The kernel side of the ABI check, with and without a matching version. */
static void raw_contexts(void)
{
	struct ibtca_alloc_ucontext_resp r;
	int err;

	err = raw_get_context(IBTCA_UVERBS_ABI_VERSION, 1, &r);
	step("uctx_resp", !err && r.abi_version == IBTCA_UVERBS_ABI_VERSION,
	     "err=%d abi=%u max_qp=%u max_qp_wr=%u max_cq=%u max_cqe=%u max_mr=%u max_pd=%u max_sge=%u max_qp_rd_atom=%u max_mr_size=0x%llx",
	     err, r.abi_version, r.max_qp, r.max_qp_wr, r.max_cq, r.max_cqe,
	     r.max_mr, r.max_pd, r.max_sge, r.max_qp_rd_atom,
	     (unsigned long long)r.max_mr_size);
	err = raw_get_context(IBTCA_UVERBS_ABI_VERSION + 1, 1, &r);
	step("uctx_other_abi", err == EPROTO, "refused: %s (errno %d)",
	     strerror(err), err);
	err = raw_get_context(IBTCA_UVERBS_ABI_VERSION, 0, &r);
	step("uctx_no_request", err == EPROTO, "refused: %s (errno %d)",
	     strerror(err), err);
}

/* Contexts beside @held until the doorbell pages run out. */
static void db_pages_run_out(struct ibv_context *held)
{
	struct ibv_context *extra[IBTCA_DB_PAGES];
	int n = 0, err = 0, i;

	while (n < IBTCA_DB_PAGES) {
		extra[n] = ibv_open_device(held->device);
		if (!extra[n]) {
			err = errno;
			break;
		}
		n++;
	}
	step("db_pages_run_out", n == IBTCA_DB_PAGES - 2 && err == ENOSPC,
	     "%d more contexts, then: %s (errno %d)", n, strerror(err), err);
	if (n) {
		ibv_close_device(extra[--n]);
		extra[n] = ibv_open_device(held->device);
		step("db_page_reused", !!extra[n], "%s",
		     extra[n] ? "a closed context's page serves the next" :
		     strerror(errno));
		if (extra[n])
			n++;
	}
	for (i = 0; i < n; i++)
		ibv_close_device(extra[i]);
}

/* A user RC QP on @cq: created with the caps asked, queried, destroyed. */
static void user_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_init_attr qinit;
	struct ibv_qp_attr attr;
	struct ibv_qp *qp;
	int err;

	qp = ibv_create_qp(pd, &init);
	step("create_qp", qp && init.cap.max_send_wr >= 4 &&
	     init.cap.max_recv_wr >= 8, "%s qpn=%u send_wr=%u recv_wr=%u (errno %d)",
	     qp ? "created" : strerror(errno), qp ? qp->qp_num : 0,
	     init.cap.max_send_wr, init.cap.max_recv_wr, errno);
	if (!qp)
		return;
	err = ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_CAP, &qinit);
	step("query_qp", !err && attr.qp_state == IBV_QPS_RESET &&
	     qinit.cap.max_recv_wr == init.cap.max_recv_wr,
	     "err=%d state=%d recv_wr=%u", err, attr.qp_state,
	     qinit.cap.max_recv_wr);
	err = ibv_destroy_qp(qp);
	step("destroy_qp", !err, "err=%d", err);
}

/*
 * The data path end to end on one device (loopback to its own LID): an
 * RDMA WRITE lands byte for byte, so does an inline one from memory no
 * region covers (IBV_SEND_INLINE, the QP created with max_inline_data),
 * one inline byte past the limit is refused at post with EINVAL, and one
 * with a wrong R_Key completes with IBV_WC_REM_ACCESS_ERR and changes
 * nothing.
 */
static void loopback_write(struct ibv_context *ctx, struct ibv_pd *pd)
{
	static unsigned char src[4096], dst[4096], before[4096];
	unsigned char line[IBTCA_MAX_INLINE_DATA + 1];
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = IBTCA_MAX_INLINE_DATA },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_mr *ms = NULL, *md = NULL;
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_port_attr port;
	struct ibv_cq *cq;
	size_t i;
	int st;

	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq || ibv_query_port(ctx, 1, &port)) {
		step("loopback_setup", 0, "cq or port: %s", strerror(errno));
		goto out;
	}
	init.send_cq = cq;
	init.recv_cq = cq;
	a = ibv_create_qp(pd, &init);
	b = ibv_create_qp(pd, &init);
	for (i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 7 + 1);
	ms = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	md = ibv_reg_mr(pd, dst, sizeof(dst),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!a || !b || !ms || !md ||
	    rc_connect(a, b->qp_num, port.lid) ||
	    rc_connect(b, a->qp_num, port.lid)) {
		step("loopback_setup", 0, "qps, regions or connect: %s",
		     strerror(errno));
		goto out;
	}
	step("loopback_setup", 1, "qpn %u <-> %u lid %u", a->qp_num,
	     b->qp_num, port.lid);
	st = write_once(a, cq, src, ms->lkey, sizeof(src), 0, (uintptr_t)dst,
			md->rkey);
	step("loopback_write", st == IBV_WC_SUCCESS &&
	     !memcmp(src, dst, sizeof(dst)), "status=%d bytes %s", st,
	     memcmp(src, dst, sizeof(dst)) ? "differ" : "match");
	for (i = 0; i < sizeof(line); i++)
		line[i] = (unsigned char)(0xa0 ^ i);
	st = write_once(a, cq, line, 0, IBTCA_MAX_INLINE_DATA, IBV_SEND_INLINE,
			(uintptr_t)dst + 100, md->rkey);
	step("loopback_inline_write", st == IBV_WC_SUCCESS &&
	     init.cap.max_inline_data == IBTCA_MAX_INLINE_DATA &&
	     !memcmp(line, dst + 100, IBTCA_MAX_INLINE_DATA) &&
	     dst[100 + IBTCA_MAX_INLINE_DATA] == src[100 + IBTCA_MAX_INLINE_DATA],
	     "status=%d max_inline_data=%u bytes %s", st,
	     init.cap.max_inline_data,
	     memcmp(line, dst + 100, IBTCA_MAX_INLINE_DATA) ? "differ" : "match");
	memcpy(before, dst, sizeof(dst));
	st = write_once(a, cq, line, 0, sizeof(line), IBV_SEND_INLINE,
			(uintptr_t)dst, md->rkey);
	step("loopback_inline_too_long", st == -1 - EINVAL &&
	     !memcmp(before, dst, sizeof(dst)), "%zu bytes: post %s, target %s",
	     sizeof(line), st == -1 - EINVAL ? "EINVAL" : "not refused",
	     memcmp(before, dst, sizeof(dst)) ? "changed" : "unchanged");
	for (i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)~src[i];
	st = write_once(a, cq, src, ms->lkey, sizeof(src), 0, (uintptr_t)dst,
			md->rkey ^ 0x80);
	step("loopback_bad_rkey", st == IBV_WC_REM_ACCESS_ERR &&
	     !memcmp(before, dst, sizeof(dst)), "status=%d (%s) target %s", st,
	     st >= 0 ? ibv_wc_status_str(st) : "none",
	     memcmp(before, dst, sizeof(dst)) ? "changed" : "unchanged");
out:
	close_objects(a, b, ms, md, cq, NULL);
}

/* The next completion on @cq within 30 s: its status, -2 without one. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int i, n;

	for (i = 0; i < 30000; i++) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status;
		usleep(1000);
	}
	return -2;
}

/*
 * A shared receive queue in user space (loopback to the device's own
 * LID): QP b takes its receives from the SRQ, whose ring the provider
 * fills and rings on the context's doorbell page; two SENDs from QP a land
 * in SRQ receives 0 and 1, byte for byte; the limit armed at 2 fires once
 * (IBV_EVENT_SRQ_LIMIT_REACHED on the context's async fd) and reads back
 * disarmed; ibv_post_recv on b is refused (EINVAL).
 */
/* b's receive and a's send of one SEND, in either order; 1 if all fine. */
static int srq_one_send(struct ibv_cq *cq, struct ibv_qp *b, uint64_t want_id,
			uint32_t want_len, const unsigned char *buf,
			unsigned char fill)
{
	struct ibv_wc wc;
	int flags, ok = 1;

	for (flags = 0; flags != 3; ) {
		if (wait_wc(cq, &wc) != IBV_WC_SUCCESS)
			return 0;
		if (wc.qp_num == b->qp_num)
			ok &= wc.wr_id == want_id && wc.byte_len == want_len &&
			      buf[0] == fill && buf[want_len - 1] == fill;
		flags |= wc.qp_num == b->qp_num ? 1 : 2;
	}
	return ok;
}

/*
 * Growing the SRQ past its ring (IBV_DEVICE_SRQ_RESIZE), receive 2 still
 * posted from before: past max_srq_wr is EINVAL; to 16 works, receive 2
 * stays first, eight more fit where the old ring held four, and nine
 * SENDs land in receives 2..10 in order, byte for byte.
 */
static void srq_grow(struct ibv_srq *srq, struct ibv_qp *a, struct ibv_qp *b,
		     struct ibv_cq *cq, struct ibv_mr *ms, struct ibv_mr *md,
		     unsigned char *src, unsigned char (*dst)[256])
{
	struct ibv_srq_attr sattr = { .max_wr = 1U << 20 };
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr swr, *sbad;
	struct ibv_sge sge;
	int too_big, grown, queried, posted = 0, k, ok = 1;

	too_big = ibv_modify_srq(srq, &sattr, IBV_SRQ_MAX_WR);
	sattr.max_wr = 16;
	grown = ibv_modify_srq(srq, &sattr, IBV_SRQ_MAX_WR);
	memset(&sattr, 0, sizeof(sattr));
	queried = ibv_query_srq(srq, &sattr);
	for (k = 3; k <= 10; k++) {
		sge = (struct ibv_sge) { .addr = (uintptr_t)dst[k % 3],
			.length = 256, .lkey = md->lkey };
		rwr = (struct ibv_recv_wr) { .wr_id = k, .sg_list = &sge,
			.num_sge = 1 };
		posted += !ibv_post_srq_recv(srq, &rwr, &rbad);
	}
	for (k = 2; k <= 10 && ok; k++) {
		memset(src, 0x40 + k, 256);
		sge = (struct ibv_sge) { .addr = (uintptr_t)src,
			.length = 50 + k, .lkey = ms->lkey };
		swr = (struct ibv_send_wr) { .wr_id = 30 + k, .sg_list = &sge,
			.num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED };
		ok = !ibv_post_send(a, &swr, &sbad) &&
		     srq_one_send(cq, b, k, 50 + k, dst[k % 3], 0x40 + k);
	}
	step("srq_grow", too_big == EINVAL && !grown && !queried &&
	     sattr.max_wr == 16 && posted == 8 && ok,
	     "max_wr 1048576: %d (%s); 16: %d, then max_wr %u; %d more posted; nine SENDs in receives 2..10 %s",
	     too_big, strerror(too_big), grown, sattr.max_wr, posted,
	     ok ? "in order, byte for byte" : "WRONG");
}

static void loopback_srq(struct ibv_context *ctx, struct ibv_pd *pd)
{
	static unsigned char src[256], dst[3][256];
	struct ibv_srq_init_attr sinit = {
		.attr = { .max_wr = 4, .max_sge = 1 },
	};
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_mr *ms = NULL, *md = NULL;
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_async_event ev;
	struct ibv_srq_attr sattr;
	struct ibv_port_attr port;
	struct ibv_srq *srq = NULL;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr swr, *sbad;
	struct ibv_sge sge;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	int i, st, ok, flags;

	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (cq)
		srq = ibv_create_srq(pd, &sinit);
	ms = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	md = ibv_reg_mr(pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	if (!cq || !srq || !ms || !md || ibv_query_port(ctx, 1, &port)) {
		step("srq_setup", 0, "cq, srq, regions or port: %s",
		     strerror(errno));
		goto out;
	}
	init.send_cq = cq;
	init.recv_cq = cq;
	a = ibv_create_qp(pd, &init);
	init.srq = srq;
	b = ibv_create_qp(pd, &init);
	if (!a || !b || rc_connect(a, b->qp_num, port.lid) ||
	    rc_connect(b, a->qp_num, port.lid)) {
		step("srq_setup", 0, "qps or connect: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < 3; i++) {
		sge = (struct ibv_sge) { .addr = (uintptr_t)dst[i],
			.length = sizeof(dst[i]), .lkey = md->lkey };
		rwr = (struct ibv_recv_wr) { .wr_id = i, .sg_list = &sge,
			.num_sge = 1 };
		if (ibv_post_srq_recv(srq, &rwr, &rbad))
			break;
	}
	sattr.srq_limit = 2;
	st = i == 3 ? ibv_modify_srq(srq, &sattr, IBV_SRQ_LIMIT) : -1;
	rwr.wr_id = 9;
	step("srq_setup", !st && ibv_post_recv(b, &rwr, &rbad) == EINVAL,
	     "qpn %u -> %u on the SRQ, 3 posted, limit 2 (err %d), post_recv on b refused",
	     a->qp_num, b->qp_num, st);
	ok = 1;
	for (i = 0; i < 2; i++) {
		memset(src, 0x30 + i, sizeof(src));
		sge = (struct ibv_sge) { .addr = (uintptr_t)src, .length = 100 + i,
			.lkey = ms->lkey };
		swr = (struct ibv_send_wr) { .wr_id = 20 + i, .sg_list = &sge,
			.num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED };
		if (ibv_post_send(a, &swr, &sbad)) {
			ok = 0;
			break;
		}
		/* The receive and the send, in either order. */
		for (flags = 0; flags != 3; ) {
			st = wait_wc(cq, &wc);
			if (st != IBV_WC_SUCCESS)
				break;
			if (wc.qp_num == b->qp_num)
				ok &= wc.wr_id == (uint64_t)i && wc.byte_len == 100U + i &&
				      dst[i][0] == 0x30 + i && dst[i][99 + i] == 0x30 + i &&
				      (i || dst[i][100] == 0);
			flags |= wc.qp_num == b->qp_num ? 1 : 2;
		}
		ok &= flags == 3;
	}
	step("srq_recv", ok, "two SENDs in SRQ receives 0 and 1 %s",
	     ok ? "byte for byte" : "WRONG");
	st = poll(&pfd, 1, 10000) == 1 ? ibv_get_async_event(ctx, &ev) : -1;
	ok = !st && ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
	     ev.element.srq == srq;
	if (!st)
		ibv_ack_async_event(&ev);
	st = ibv_query_srq(srq, &sattr);
	step("srq_limit_event", ok && !st && sattr.srq_limit == 0 &&
	     sattr.max_wr == 4, "%s, then limit %u max_wr %u",
	     ok ? "IBV_EVENT_SRQ_LIMIT_REACHED" : "no limit event",
	     sattr.srq_limit, sattr.max_wr);
	srq_grow(srq, a, b, cq, ms, md, src, dst);
out:
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	if (srq)
		step("destroy_srq", !ibv_destroy_srq(srq), "destroyed");
	if (ms)
		ibv_dereg_mr(ms);
	if (md)
		ibv_dereg_mr(md);
	if (cq)
		ibv_destroy_cq(cq);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "ibtca0";
	struct ibv_context *ctx;
	struct ibv_pd *pd[2];
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	static char buf[8192];
	int err, i;

	if (argc > 1 && !strcmp(argv[1], "bad-rkey-server"))
		return bad_rkey_server();
	if (argc > 2 && !strcmp(argv[1], "bad-rkey-client"))
		return bad_rkey_client(argv[2]);
	if (argc > 1 && !strcmp(argv[1], "sge-server"))
		return sge_server();
	if (argc > 2 && !strcmp(argv[1], "sge-client"))
		return sge_client(argv[2]);
	if (argc > 1 && !strcmp(argv[1], "seed-env")) {
		err = seed_env_test(argc > 2 ? argv[2] : "ibtca0");
		printf("IBTCA-PROVIDER result %d failed\n", step_failures());
		return err || step_failures() ? 1 : 0;
	}
	if (argc > 1 && !strcmp(argv[1], "seed-udata")) {
		seed_udata_test(argc > 2 ? argv[2] : "ibtca0");
		printf("IBTCA-PROVIDER result %d failed\n", step_failures());
		return step_failures() ? 1 : 0;
	}
	ctx = open_named(name);
	if (!ctx)
		return 1;
	queries(ctx);
	raw_contexts();
	/* A kernel driver of another ABI version, as the provider sees it. */
	provider_abi_mismatch(ctx->device, 99);

	for (i = 0; i < 2; i++) {
		pd[i] = ibv_alloc_pd(ctx);
		step("alloc_pd", !!pd[i], "handle=%d %s", pd[i] ? (int)pd[i]->handle : -1,
		     pd[i] ? "ok" : strerror(errno));
	}
	if (pd[0] && pd[1])
		step("pd_distinct", pd[0]->handle != pd[1]->handle,
		     "handles %u %u", pd[0]->handle, pd[1]->handle);
	if (argc > 2 && pd[0]) {
		fflush(stdout);
		err = system(argv[2]);
		step("held_command", err == 0, "'%s' status=%d", argv[2], err);
	}

	/* User memory: the kernel's reg_user_mr, a page-list region. */
	if (pd[0]) {
		mr = ibv_reg_mr(pd[0], buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		step("reg_mr", mr != NULL, "lkey=0x%x rkey=0x%x (%s)",
		     mr ? mr->lkey : 0, mr ? mr->rkey : 0,
		     mr ? "registered" : strerror(errno));
		if (mr) {
			err = ibv_dereg_mr(mr);
			step("dereg_mr", !err, "err=%d", err);
		}
	}

	/* A user CQ: mapped, empty, armed, destroyed. */
	errno = 0;
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	step("create_cq", cq && cq->cqe >= 16, "%s cqe=%d (errno %d)",
	     cq ? "created" : strerror(errno), cq ? cq->cqe : 0, errno);
	if (cq) {
		struct ibv_wc wc;

		step("poll_cq_empty", ibv_poll_cq(cq, 1, &wc) == 0, "empty");
		step("req_notify_cq", ibv_req_notify_cq(cq, 0) == 0, "armed");
		if (pd[0])
			user_qp(pd[0], cq);
		err = ibv_destroy_cq(cq);
		step("destroy_cq", !err, "err=%d", err);
	}
	if (pd[0]) {
		loopback_write(ctx, pd[0]);
		loopback_srq(ctx, pd[0]);
		ext_tests(ctx, pd[0]);
		bypass_tests(ctx, pd[0]);
		ud_tests(ctx, pd[0]);
		sge_loopback(ctx);
	}
	db_pages_run_out(ctx);

	for (i = 0; i < 2; i++) {
		if (!pd[i])
			continue;
		err = ibv_dealloc_pd(pd[i]);
		step("dealloc_pd", !err, "err=%d", err);
	}
	err = ibv_close_device(ctx);
	step("close", !err, "err=%d", err);
	printf("IBTCA-PROVIDER result %d failed\n", step_failures());
	return step_failures() ? 1 : 0;
}
