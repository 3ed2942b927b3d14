// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A user UD QP through the provider, loopback on one device. A UD WQE
 * carries an address vector and no inline payload, so the QP reports no
 * inline data (max_inline_data 0, also when created asking for some),
 * and a SEND with IBV_SEND_INLINE is refused with EINVAL and
 * *bad_wr at it, as the kernel driver refuses IB_SEND_INLINE on a
 * datagram QP; nothing of it reaches the queue, and the same SEND from a
 * registered buffer then arrives byte for byte behind the 40-byte GRH
 * area of the QP's own receive. Attached to a multicast group, the QP
 * gets its own datagram to the group.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "provider_test.h"

#define UD_QKEY 0x11111111u
#define UD_GRH 40
#define UD_LEN 16
#define UD_MLID 0xc010

/* RESET → INIT → RTR → RTS of UD QP @qp on port 1, Q_Key UD_QKEY. */
static int ud_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qkey = UD_QKEY,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* The next completion of @cq within 30 s: 0, or -1 without one. */
static int ud_wait(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int i;

	for (i = 0; i < 30000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n < 0 ? -1 : 0;
		usleep(1000);
	}
	return -1;
}

/*
 * Multicast through the kernel's uverbs: UD QP @qp attached to a group
 * gets its own datagram to the group (the device loops a multicast send
 * back to the port's attached QPs), with the group's GID as the GRH's
 * DGID; detached, a second detach is EINVAL.
 */
static void ud_mcast_tests(struct ibv_pd *pd, struct ibv_qp *qp,
			   struct ibv_cq *cq, struct ibv_mr *mr,
			   unsigned char *buf, const unsigned char *src)
{
	static const union ibv_gid mgid = {
		.raw = { 0xff, 0x12, 0x60, 0x1b, [15] = 0x42 },
	};
	struct ibv_ah_attr aa = {
		.port_num = 1, .dlid = UD_MLID, .is_global = 1,
		.grh = { .dgid = mgid, .hop_limit = 1 },
	};
	struct ibv_sge rsge = { .addr = (uintptr_t)buf,
				.length = UD_GRH + UD_LEN, .lkey = mr->lkey };
	struct ibv_sge ssge = { .addr = (uintptr_t)src, .length = UD_LEN,
				.lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 8, .sg_list = &rsge, .num_sge = 1 };
	struct ibv_send_wr swr = { .wr_id = 3, .sg_list = &ssge, .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_recv_wr *rbad;
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	struct ibv_wc wc[2];
	int err, again, i, recv = -1;

	err = ibv_attach_mcast(qp, &mgid, UD_MLID);
	step("ud_attach_mcast", !err && ah, "ibv_attach_mcast: %s; ah %s",
	     strerror(err), ah ? "made" : strerror(errno));
	if (err || !ah)
		goto out;
	memset(buf, 0, UD_GRH + UD_LEN);
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = 0xffffff;
	swr.wr.ud.remote_qkey = UD_QKEY;
	err = ibv_post_recv(qp, &rwr, &rbad) ?: ibv_post_send(qp, &swr, &bad);
	for (i = 0; !err && i < 2; i++) {
		err = ud_wait(cq, &wc[i]);
		if (!err && wc[i].opcode == IBV_WC_RECV)
			recv = i;
	}
	step("ud_mcast_loopback", !err && recv >= 0 &&
	     wc[recv].status == IBV_WC_SUCCESS && wc[recv].wr_id == 8 &&
	     (wc[recv].wc_flags & IBV_WC_GRH) &&
	     !memcmp(buf + 24, mgid.raw, sizeof(mgid.raw)) &&
	     !memcmp(buf + UD_GRH, src, UD_LEN),
	     "err=%d recv status=%d grh=%d dgid %s bytes %s", err,
	     recv >= 0 ? (int)wc[recv].status : -1,
	     recv >= 0 ? !!(wc[recv].wc_flags & IBV_WC_GRH) : 0,
	     memcmp(buf + 24, mgid.raw, sizeof(mgid.raw)) ? "differs" : "is the group",
	     memcmp(buf + UD_GRH, src, UD_LEN) ? "differ" : "match");
	err = ibv_detach_mcast(qp, &mgid, UD_MLID);
	again = ibv_detach_mcast(qp, &mgid, UD_MLID);
	step("ud_detach_mcast", !err && again == EINVAL,
	     "detach ret=%d, again ret=%d (want 0, %d)", err, again, EINVAL);
out:
	if (ah)
		ibv_destroy_ah(ah);
}

void ud_tests(struct ibv_context *ctx, struct ibv_pd *pd)
{
	static unsigned char buf[UD_GRH + 2 * UD_LEN];
	unsigned char *src = buf + UD_GRH + UD_LEN;
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	struct ibv_sge rsge, ssge;
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rsge, .num_sge = 1 };
	struct ibv_send_wr swr = { .sg_list = &ssge, .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;
	struct ibv_recv_wr *rbad;
	struct ibv_ah_attr ah_attr = { .port_num = 1 };
	struct ibv_port_attr port;
	struct ibv_qp *qp = NULL, *other;
	uint32_t qp_inline = 0;
	struct ibv_ah *ah = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_wc wc[2];
	struct ibv_cq *cq;
	int err, i, send = -1, recv = -1;

	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (cq && !ibv_query_port(ctx, 1, &port)) {
		init.send_cq = cq;
		init.recv_cq = cq;
		qp = ibv_create_qp(pd, &init);
		qp_inline = init.cap.max_inline_data;
		ah_attr.dlid = port.lid;
		ah = ibv_create_ah(pd, &ah_attr);
		mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	}
	if (!cq || !qp || !ah || !mr || ud_ready(qp)) {
		step("ud_setup", 0, "cq, qp, ah, region or modify: %s",
		     strerror(errno));
		goto out;
	}
	step("ud_setup", 1, "qpn %u lid %u", qp->qp_num, port.lid);
	/* No inline data on UD: none reported, even when asked for. */
	init.cap.max_inline_data = 16;
	other = ibv_create_qp(pd, &init);
	step("ud_no_inline_cap", !qp_inline && other &&
	     !init.cap.max_inline_data,
	     "max_inline_data=%u; asking 16: %s, max_inline_data=%u",
	     qp_inline, other ? "created" : strerror(errno),
	     init.cap.max_inline_data);
	if (other)
		ibv_destroy_qp(other);
	for (i = 0; i < UD_LEN; i++)
		src[i] = (unsigned char)(0xa0 + i);
	rsge = (struct ibv_sge) { .addr = (uintptr_t)buf,
				  .length = UD_GRH + UD_LEN, .lkey = mr->lkey };
	err = ibv_post_recv(qp, &rwr, &rbad);
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = qp->qp_num;
	swr.wr.ud.remote_qkey = UD_QKEY;

	/* Inline: refused whole, from memory no key covers. */
	ssge = (struct ibv_sge) { .addr = (uintptr_t)src, .length = UD_LEN };
	swr.wr_id = 1;
	swr.send_flags |= IBV_SEND_INLINE;
	err = err ?: ibv_post_send(qp, &swr, &bad);
	step("ud_inline_refused", err == EINVAL && bad == &swr,
	     "post_send ret=%d (want %d) bad_wr %s", err, EINVAL,
	     bad == &swr ? "at it" : "WRONG");

	/* The same SEND from the region: the only one sent. */
	ssge.lkey = mr->lkey;
	swr.wr_id = 2;
	swr.send_flags &= ~IBV_SEND_INLINE;
	err = ibv_post_send(qp, &swr, &bad);
	for (i = 0; !err && i < 2; i++) {
		err = ud_wait(cq, &wc[i]);
		if (!err && wc[i].opcode == IBV_WC_SEND)
			send = i;
		else if (!err && wc[i].opcode == IBV_WC_RECV)
			recv = i;
	}
	step("ud_send_after_refusal", !err && send >= 0 && recv >= 0 &&
	     wc[send].status == IBV_WC_SUCCESS && wc[send].wr_id == 2 &&
	     wc[recv].status == IBV_WC_SUCCESS && wc[recv].wr_id == 7 &&
	     wc[recv].byte_len == UD_GRH + UD_LEN &&
	     wc[recv].src_qp == qp->qp_num &&
	     !memcmp(buf + UD_GRH, src, UD_LEN),
	     "err=%d send wr_id=%llu status=%d recv wr_id=%llu status=%d len=%u src_qp=%u bytes %s",
	     err, send >= 0 ? (unsigned long long)wc[send].wr_id : 0ULL,
	     send >= 0 ? (int)wc[send].status : -1,
	     recv >= 0 ? (unsigned long long)wc[recv].wr_id : 0ULL,
	     recv >= 0 ? (int)wc[recv].status : -1,
	     recv >= 0 ? wc[recv].byte_len : 0,
	     recv >= 0 ? wc[recv].src_qp : 0,
	     memcmp(buf + UD_GRH, src, UD_LEN) ? "differ" : "match");
	step("ud_nothing_more", !err && ibv_poll_cq(cq, 2, wc) == 0,
	     "the refused SEND left no completion");
	if (!err)
		ud_mcast_tests(pd, qp, cq, mr, buf, src);
out:
	close_objects(qp, NULL, mr, NULL, cq, NULL);
	if (ah)
		ibv_destroy_ah(ah);
}
