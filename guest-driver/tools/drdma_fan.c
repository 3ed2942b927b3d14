// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool drdma-fan: every range of one guest's DRDMA window in flight at
 * once to two remote guests (seed 000: several ranges run concurrently to
 * several hosts, reused across remote nodes and overlapping remote address
 * spaces with no cross-talk).
 *
 *   ibtca-tool [-d DEV] drdma-fan --role server --peer-lid B,C
 *   ibtca-tool [-d DEV] drdma-fan --role client --peer-lid A --index 0|1
 *
 * The server (the TCA side) sets up one QP pair per peer as the verbs
 * scenario does (its QPs for peer i are VB_QPN0 + 2i and + 2i + 1; a
 * client's are VB_QPN0 and + 1, and --index i tells it which of the
 * server's to connect to), then exchanges buffer addresses and R_Keys with
 * each (HELLO). Then:
 *
 * Each QP's posts ring its SQ doorbell once (IBTCA_UAPI_POST_F_MORE).
 *
 * WRITE: FAN_N ranges submitted as DRDMA WRITEs (trapped window: one
 * DRDMA_SUBMIT each, on PMBs in a shuffled order; mapped: one
 * DRDMA_SUBMIT_MASK), even ranges posted to peer B, odd ones to peer C,
 * range 2j and 2j + 1 at the same offset (slot[j]) of B's and C's buffers;
 * all half filled, then all completed (mapped: one DRDMA_COMMIT_MASK for
 * the second halves); each peer checks its 16 slots and answers.
 *
 * READ: FAN_N ranges submitted as DRDMA READs with one DRDMA_SUBMIT_MASK,
 * each reading back the slot its WRITE went to (2 responses at MTU 2048),
 * drained with mixed loads, memcpy_fromio and qword loads and checked.
 *
 * Every check prints "IBTCA-DRDMA <check> PASS|FAIL <detail>".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "commands.h"
#include "dev.h"
#include "drdma_lib.h"
#include "parse.h"
#include "usage.h"

#define FAN_N		32U		/* ranges in flight */
#define FAN_PEERS	2U
#define FAN_SLOTS	(FAN_N / FAN_PEERS)
#define FAN_OFF		0x20000U	/* in the peer's buffer: FAN_SLOTS slots */
#define FAN_SEED	0x60		/* range k carries pattern FAN_SEED + k */
#define FAN_SLOT_PERM	0xfa7fa7U
#define FAN_PMB_PERM	0x3c3c5a5aU
#define FAN_WAIT_S	300		/* a peer waits this long for the server */

static const uint32_t fan_all = 0xffffffffU;	/* FAN_N bits */

/* The slot of peer buffers range @k goes to. */
static uint32_t fan_slot(const uint32_t *slot, uint32_t k)
{
	return slot[k / FAN_PEERS];
}

static uint64_t fan_iova(struct dr *p, const uint32_t *slot, uint32_t k)
{
	return p->v.peer_iova + FAN_OFF + (uint64_t)fan_slot(slot, k) * DR_LEN;
}

static uint32_t fan_pattern(uint32_t k)
{
	static const uint32_t pat[] = { IBTCA_UAPI_DRDMA_PAT_MIXED,
					IBTCA_UAPI_DRDMA_PAT_MEMCPY,
					IBTCA_UAPI_DRDMA_PAT_QWORD };

	return pat[k % ARRAY_SIZE(pat)];
}

/* Waits for the FAN_N completions of @op, first wr_id @wr0[i] per peer. */
static int fan_completions(struct dr *p, const uint64_t *wr0, uint8_t op,
			   char *why, size_t whylen)
{
	uint32_t k;
	int ret = 0;

	for (k = 0; k < FAN_N && !ret; k++)
		ret = dr_complete(&p[k % FAN_PEERS], p[k % FAN_PEERS].v.scq,
				  wr0[k % FAN_PEERS] + k / FAN_PEERS, op, DR_LEN,
				  why, whylen);
	return ret;
}

/* How many of the FAN_N ARRs have CTRL state bits other than @want. */
static uint32_t fan_bits_off(struct dr *d, uint32_t want, uint32_t wbc)
{
	struct ibtca_drdma_arr a;
	uint32_t k, bad = 0;

	for (k = 0; k < FAN_N; k++)
		if (dr_arr(d, k, &a) || (a.ctrl & DR_ARR_BITS) != want ||
		    (wbc != ~0U && a.wbc != wbc))
			bad++;
	return bad;
}

static int fan_write(struct dr *p, const uint32_t *slot, uint8_t (*src)[DR_LEN])
{
	const uint32_t want = IBTCA_ARR_PCI_VALID | IBTCA_ARR_TYPE_WRITE |
			      IBTCA_ARR_BUSY;
	struct dr *d = &p[0];
	uint32_t pmb[FAN_N], k, ctrl, bad = 0, err0, errs = 0;
	uint64_t wr0[FAN_PEERS];
	char why[128] = "";
	int ret = 0;

	err0 = dr_errors(d, NULL);
	for (k = 0; k < FAN_PEERS; k++)
		wr0[k] = p[k].v.wr_id + 1;
	for (k = 0; k < FAN_N; k++)
		vb_pattern(src[k], DR_LEN, (uint8_t)(FAN_SEED + k));
	dr_perm(pmb, FAN_N, FAN_PMB_PERM);
	if (d->mapped) {
		/* Range n is PMB n: one register write submits them all. */
		ret = dr_mask(d, IBTCA_UAPI_DRDMA_MASK_SUBMIT, fan_all,
			      IBTCA_UAPI_DRDMA_WRITE, DR_LEN, &errs);
		bad = ret ? FAN_N : fan_bits_off(d, want, 0) + (errs != err0);
	}
	for (k = 0; k < FAN_N && !ret; k++) {
		if (!d->mapped) {
			ret = dr_submit(d, k, IBTCA_UAPI_DRDMA_WRITE, DR_LEN,
					(int)pmb[k], &ctrl);
			if (!ret && ((ctrl & DR_ARR_BITS) != want ||
				     ((ctrl >> IBTCA_ARR_PMB_SHIFT) & 0xff) !=
				     pmb[k]))
				bad++;
		}
		if (!ret)
			ret = dr_post_more(d, p[k % FAN_PEERS].v.qp,
					   IBTCA_WR_DRDMA_WRITE, k, DR_LEN,
					   fan_iova(&p[k % FAN_PEERS], slot, k),
					   p[k % FAN_PEERS].v.peer_rkey,
					   ++p[k % FAN_PEERS].v.wr_id,
					   k + FAN_PEERS < FAN_N);
	}
	dcheck("fan_write_submitted", !ret && !bad,
	       "%u ranges by %s, even to LID %u, odd to LID %u, %u with wrong bits: %s",
	       FAN_N, d->mapped ? "DRDMA_SUBMIT_MASK" : "DRDMA_SUBMIT on shuffled PMBs",
	       p[0].v.peer_lid, p[1].v.peer_lid, bad, strerror(-ret));
	if (ret)
		return ret;

	/* First halves, last range first: every range half full at once. */
	for (k = FAN_N; k-- > 0 && !ret;)
		ret = dr_fill(d, k, 0, DR_HALF, src[k], fan_pattern(k));
	bad = ret ? FAN_N : fan_bits_off(d, want, DR_HALF);
	dcheck("fan_write_half_filled", !ret && !bad,
	       "%u ranges at WBC %u, %u not: %s", FAN_N, DR_HALF, bad,
	       strerror(-ret));
	if (ret)
		return ret;

	for (k = 0; k < FAN_N && !ret; k++)
		ret = dr_fill_nocommit(d, k, DR_HALF, DR_LEN - DR_HALF, src[k],
				       fan_pattern(k + 1));
	if (!ret && d->mapped)
		ret = dr_mask(d, IBTCA_UAPI_DRDMA_MASK_COMMIT, fan_all, 0, 0,
			      &errs);
	if (!ret)
		ret = fan_completions(p, wr0, IBTCA_WC_DRDMA_WRITE, why,
				      sizeof(why));
	dcheck("fan_write_completions", !ret, "%u DRDMA WRITEs%s: %s %s",
	       FAN_N, d->mapped ? " (DRDMA_COMMIT_MASK)" : "", why,
	       strerror(-ret));
	if (ret)
		return ret;
	bad = fan_bits_off(d, 0, ~0U);
	dcheck("fan_write_free", !bad && dr_errors(d, NULL) == err0,
	       "%u ranges still busy, DRDMA_ERRORS %u -> %u", bad, err0,
	       d->info.errors);
	return 0;
}

static int fan_read(struct dr *p, const uint32_t *slot, uint8_t (*dst)[DR_LEN])
{
	struct dr *d = &p[0];
	uint32_t k, bad = 0, err0, errs = 0;
	uint64_t wr0[FAN_PEERS];
	char why[128] = "";
	int ret;

	err0 = dr_errors(d, NULL);
	memset(dst, 0, (size_t)FAN_N * DR_LEN);
	for (k = 0; k < FAN_PEERS; k++)
		wr0[k] = p[k].v.wr_id + 1;
	ret = dr_mask(d, IBTCA_UAPI_DRDMA_MASK_SUBMIT, fan_all,
		      IBTCA_UAPI_DRDMA_READ, DR_LEN, &errs);
	if (!ret)
		bad = fan_bits_off(d, IBTCA_ARR_BR_VALID | IBTCA_ARR_BUSY, ~0U);
	for (k = 0; k < FAN_N && !ret; k++)
		ret = dr_post_more(d, p[k % FAN_PEERS].v.qp,
				   IBTCA_WR_DRDMA_READ, k, DR_LEN,
				   fan_iova(&p[k % FAN_PEERS], slot, k),
				   p[k % FAN_PEERS].v.peer_rkey,
				   ++p[k % FAN_PEERS].v.wr_id,
				   k + FAN_PEERS < FAN_N);
	dcheck("fan_read_submitted", !ret && !bad && errs == err0,
	       "%u ranges by one DRDMA_SUBMIT_MASK, %u not BR_V BUSY, DRDMA_ERRORS %u -> %u: %s",
	       FAN_N, bad, err0, errs, strerror(-ret));
	if (ret)
		return ret;

	for (k = 0; k < FAN_N && !ret; k++)
		ret = dr_drain(d, k, 0, DR_LEN, dst[k], fan_pattern(k));
	for (k = 0, bad = 0; k < FAN_N && !ret; k++)
		if (vb_pattern_diff(dst[k], DR_LEN, (uint8_t)(FAN_SEED + k)) !=
		    DR_LEN)
			bad++;
	dcheck("fan_read_data", !ret && !bad,
	       "%u ranges read back from both peers' overlapping slots, %u mismatched: %s",
	       FAN_N, bad, strerror(-ret));
	if (ret)
		return ret;
	ret = fan_completions(p, wr0, IBTCA_WC_DRDMA_READ, why, sizeof(why));
	dcheck("fan_read_completions", !ret, "%u DRDMA READs: %s", FAN_N, why);
	if (ret)
		return ret;
	bad = fan_bits_off(d, 0, ~0U);
	dcheck("fan_read_free", !bad && dr_errors(d, NULL) == err0,
	       "%u ranges still busy, DRDMA_ERRORS %u -> %u", bad, err0,
	       d->info.errors);
	return 0;
}

static void fan_server(struct dr *p)
{
	const struct ibtca_drdma_info *in = &p[0].info;
	uint32_t slot[FAN_SLOTS], k, ok = 1;
	uint8_t (*buf)[DR_LEN] = NULL;
	struct vb_msg m;
	int ret = dr_info(&p[0]);

	dcheck("window", !ret && in->ranges >= FAN_N && in->range_size == DR_LEN &&
	       dr_all_count(in->ranges, in->pmb_dedicated) >= FAN_N,
	       "%u ranges of %u, %u PMBs dedicated, mode %u: %s", in->ranges,
	       in->range_size, in->pmb_dedicated, in->mode, strerror(-ret));
	if (ret || in->ranges < FAN_N || in->range_size != DR_LEN ||
	    dr_all_count(in->ranges, in->pmb_dedicated) < FAN_N)
		return;
	for (k = 0; k < FAN_PEERS; k++)
		p[k].mapped = in->mode == IBTCA_DRDMA_MODE_MAPPED;
	reg_write(p[0].v.fd, IBTCA_REG_DRDMA_LOAD_TIMEOUT_US,
		  DR_LOAD_TIMEOUT_US);
	for (k = 0; k < FAN_PEERS; k++)
		if (vb_exchange(&p[k].v))
			return;
	buf = calloc(FAN_N, DR_LEN);
	if (!buf) {
		dcheck("fan_memory", 0, "%u bytes", FAN_N * DR_LEN);
		return;
	}
	dr_perm(slot, FAN_SLOTS, FAN_SLOT_PERM);

	ret = fan_write(p, slot, buf);
	/* Each peer checks its slots and answers. */
	for (k = 0; k < FAN_PEERS; k++)
		if (vb_send_simple(&p[k].v, DR_STATUS, !ret, FAN_SLOTS))
			ret = -EIO;
	for (k = 0; k < FAN_PEERS && !ret; k++) {
		ret = vb_expect_within(&p[k].v, DR_STATUS, &m, FAN_WAIT_S);
		ok = ok && !ret && m.ok;
	}
	dcheck("fan_write_peers", !ret && ok,
	       "both peers found their %u slots: %s", FAN_SLOTS,
	       ret ? strerror(-ret) : ok ? "yes" : "no");
	if (!ret)
		ret = fan_read(p, slot, buf);
	free(buf);
	for (k = 0; k < FAN_PEERS; k++) {
		int r = vb_send_simple(&p[k].v, VB_BYE, !ret && n_fail == 0, 0);

		dcheck(k ? "bye_c" : "bye_b", !r, "%s",
		       r ? strerror(-r) : "peer told");
	}
}

static void fan_client(struct dr *d, uint32_t index)
{
	uint8_t *area = d->v.buf + VB_BULK_OFF + FAN_OFF;
	uint32_t slot[FAN_SLOTS], j, bad = 0;
	struct vb_msg m;
	size_t i;
	int ret;

	/* Before the HELLO: the server writes as soon as it has it. */
	memset(area, 0, (FAN_SLOTS + 1) * DR_LEN);
	if (vb_exchange(&d->v))
		return;
	ret = vb_expect_within(&d->v, DR_STATUS, &m, FAN_WAIT_S);
	dcheck("fan_write_status", !ret && m.ok && m.value == FAN_SLOTS,
	       "server: %s, %llu slots", ret ? strerror(-ret) :
	       m.ok ? "ok" : "failed", (unsigned long long)m.value);
	if (ret)
		return;
	dr_perm(slot, FAN_SLOTS, FAN_SLOT_PERM);
	for (j = 0; j < FAN_SLOTS; j++)
		if (vb_pattern_diff(area + slot[j] * DR_LEN, DR_LEN,
				    (uint8_t)(FAN_SEED + FAN_PEERS * j +
					      index)) != DR_LEN)
			bad++;
	/* Nothing past the slots. */
	for (i = 0; i < DR_LEN; i++)
		if (area[FAN_SLOTS * DR_LEN + i])
			break;
	dcheck("fan_write_data", !bad && i == DR_LEN,
	       "%u slots from ranges %u, %u, ... (peer %u), %u mismatched, nothing past them: %s",
	       FAN_SLOTS, index, index + FAN_PEERS, index, bad,
	       i == DR_LEN ? "yes" : "no");
	ret = vb_send_simple(&d->v, DR_STATUS, !bad && i == DR_LEN, bad);
	if (ret)
		return;
	ret = vb_expect_within(&d->v, VB_BYE, &m, FAN_WAIT_S);
	dcheck("bye", !ret && m.ok, "%s", ret ? strerror(-ret) :
	       m.ok ? "server read everything back" : "server failed");
}

/* "2,3" -> { 2, 3 }; returns how many (at most @max), 0 if malformed. */
static uint32_t fan_lids(const char *s, uint16_t *lids, uint32_t max)
{
	char buf[64], *tok, *save = NULL;
	uint32_t n = 0, lid;

	if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
		return 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == max || parse_u32(tok, &lid) || !lid || lid >= 0xc000)
			return 0;
		lids[n++] = (uint16_t)lid;
	}
	return n;
}

int cmd_drdma_fan(int argc, char **argv)
{
	const char *role = NULL, *lid_arg = NULL;
	uint16_t lids[FAN_PEERS];
	uint32_t index = 0, n, k, peers;
	char detail[160], name[16];
	struct dr *p;
	int i, fd, server, opt, ok = 1;

	for (i = 0; i + 1 < argc; i += 2) {
		opt = vb_qp_option(argv[i], argv[i + 1]);
		if (opt < 0)
			usage();
		else if (opt)
			continue;
		else if (!strcmp(argv[i], "--role"))
			role = argv[i + 1];
		else if (!strcmp(argv[i], "--peer-lid"))
			lid_arg = argv[i + 1];
		else if (!strcmp(argv[i], "--index") &&
			 !parse_u32(argv[i + 1], &index) && index < FAN_PEERS)
			continue;
		else
			usage();
	}
	if (i != argc || !role || !lid_arg ||
	    (strcmp(role, "server") && strcmp(role, "client")))
		usage();
	server = !strcmp(role, "server");
	n = fan_lids(lid_arg, lids, FAN_PEERS);
	if (n != (server ? FAN_PEERS : 1))
		usage();
	peers = n;
	p = calloc(peers, sizeof(*p));
	if (!p)
		return 1;
	vb_prefix = "IBTCA-DRDMA";
	fd = open_dev();
	if (fd < 0) {
		dcheck("setup", 0, "cannot open %s", dev_path);
		goto out;
	}
	/* Set up in turn: the server's QPs for peer k are VB_QPN0 + 2k. */
	for (k = 0; k < peers && ok; k++) {
		struct vb *v = &p[k].v;

		v->fd = fd;
		v->server = server;
		v->peer_lid = lids[k];
		v->mtu[0] = DR_MTU_2048;
		v->mtu[1] = IBTCA_MTU_256;
		v->qpn0 = VB_QPN0 + (server ? 2 * k : 0);
		v->peer_qpn0 = VB_QPN0 + (server ? 0 : 2 * index);
		v->tag = server ? (k ? "_c" : "_b") : NULL;
		snprintf(name, sizeof(name), "setup%s", v->tag ? v->tag : "");
		ok = !vb_setup(v, detail, sizeof(detail));
		dcheck(name, ok, "role=%s %s", role, detail);
	}
	if (ok && server)
		fan_server(p);
	else if (ok)
		fan_client(p, index);
out:
	for (k = 0; k < peers; k++)
		if (p[k].v.buf && p[k].v.buf != MAP_FAILED)
			munmap(p[k].v.buf, VB_BUF_SIZE);
	if (fd >= 0)
		close(fd);
	free(p);
	printf("IBTCA-DRDMA-SUMMARY %d passed, %d failed\n", n_pass, n_fail);
	return n_fail || !n_pass;
}
