// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool drdma-bench: DRDMA WRITE bandwidth through the window next to
 * memcpy and ordinary RDMA WRITEs (IBTCA-DRDMA-PERF lines).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dev.h"
#include "drdma_lib.h"

/*
 * ---- drdma-bench: DRDMA WRITE bandwidth next to memcpy ----
 *
 * The server (TCA side) measures, for DR_BENCH_SECS each: memcpy() of 4 KiB
 * in its own memory; DRDMA WRITEs of 4 KiB into the client's buffer,
 * DR_BENCH_DEPTH ranges at a time (submit and post them all, fill them
 * all, take the completions), with each fill pattern (the store rate alone
 * is the time inside the fills); an ordinary RDMA WRITE of 4 KiB from
 * memory with as many outstanding; and (trapped window) DRDMA READs of
 * 4 KiB drained with memcpy_fromio. In a mapped window one
 * DRDMA_SUBMIT_MASK submits a whole batch, one SQ doorbell posts it and one
 * DRDMA_COMMIT_MASK commits it after the fills (each register write is
 * non-posted there, so this saves 93 of 96 round trips per batch; the
 * store rate includes the commit); drdma_write_memcpy_toio_per_range
 * submits, posts and commits each range on its own, for comparison. The
 * RDMA WRITEs from memory ring one doorbell per batch too. Lines:
 *   IBTCA-DRDMA-PERF <test> MBps=<end to end> store_MBps=<fills> ...
 */
#define DR_BENCH_SECS	2.0
#define DR_BENCH_DEPTH	32U

/* Where a DRDMA batch spends its time (seconds, summed over the batches). */
enum { DR_PH_SUBMIT, DR_PH_POST, DR_PH_FILL, DR_PH_COMMIT, DR_PH_WAIT,
	DR_PH_N };
static double dr_phase[DR_PH_N];
static uint32_t dr_batches;

static void dr_perf(const char *test, double bytes, double secs,
		    double store_ns, uint32_t n)
{
	double b = dr_batches ? 1e6 / dr_batches : 0;

	printf("IBTCA-DRDMA-PERF %s MBps=%.2f store_MBps=%.2f size=%u iters=%u",
	       test, bytes / secs / 1e6,
	       store_ns > 0 ? bytes / (store_ns / 1e9) / 1e6 : 0.0, DR_LEN, n);
	/* DRDMA rows: microseconds per batch in each phase. */
	if (dr_batches)
		printf(" batch=%u submit_us=%.0f post_us=%.0f fill_us=%.0f commit_us=%.0f wait_us=%.0f",
		       n / dr_batches, dr_phase[DR_PH_SUBMIT] * b,
		       dr_phase[DR_PH_POST] * b, dr_phase[DR_PH_FILL] * b,
		       dr_phase[DR_PH_COMMIT] * b, dr_phase[DR_PH_WAIT] * b);
	printf("\n");
	fflush(stdout);
	dr_batches = 0;
}

static int dr_bench_memcpy(struct dr *d)
{
	double t0 = now_s(), t;
	uint32_t n = 0, i;

	vb_pattern(d->src, DR_LEN, 1);
	do {
		for (i = 0; i < 256; i++, n++) {
			memcpy(d->dst, d->src, DR_LEN);
			/* Keep the copy: the compiler may not drop it. */
			__asm__ __volatile__("" : : "r"(d->dst) : "memory");
			d->src[i & (DR_LEN - 1)] ^= 1;
		}
		t = now_s() - t0;
	} while (t < DR_BENCH_SECS);
	dr_perf("memcpy", (double)n * DR_LEN, t, t * 1e9, n);
	return 0;
}

/*
 * One batch of DRDMA WRITEs (@write) or READs of every range up to @depth.
 * With @masks (mapped window, WRITEs), one DRDMA_SUBMIT_MASK submits the
 * batch, one SQ doorbell posts it (IBTCA_UAPI_POST_F_MORE on all but the
 * last POST_SEND) and one DRDMA_COMMIT_MASK commits it after the fills:
 * three register writes instead of three per range.
 */
static int dr_bench_batch(struct dr *d, const struct vb_msg *m, int write,
			  uint32_t pattern, uint32_t depth, int masks,
			  double *ns)
{
	uint32_t k, ctrl, errs, err0 = 0, flags = d->mapped && !masks ?
				      IBTCA_UAPI_DRDMA_F_COMMIT : 0;
	uint32_t all = depth < 32 ? (1U << depth) - 1 : ~0U;
	uint64_t wr0 = d->v.wr_id + 1;
	struct ibtca_drdma_xfer t;
	char why[128] = "";
	double t0, t1;
	int ret = 0;

	t0 = now_s();
	if (masks)
		ret = dr_mask(d, IBTCA_UAPI_DRDMA_MASK_SUBMIT, all,
			      IBTCA_UAPI_DRDMA_WRITE, DR_LEN, &err0);
	for (k = 0; k < depth && !ret && !masks; k++)
		ret = dr_submit(d, k, write ? IBTCA_UAPI_DRDMA_WRITE :
				IBTCA_UAPI_DRDMA_READ, DR_LEN, -1, &ctrl);
	t1 = now_s();
	dr_phase[DR_PH_SUBMIT] += t1 - t0;
	for (k = 0; k < depth && !ret; k++)
		ret = dr_post_more(d, d->v.qp, write ? IBTCA_WR_DRDMA_WRITE :
				   IBTCA_WR_DRDMA_READ, k, DR_LEN,
				   m->iova + (uint64_t)k * DR_LEN, m->rkey,
				   ++d->v.wr_id, masks && k + 1 < depth);
	t0 = now_s();
	dr_phase[DR_PH_POST] += t0 - t1;
	for (k = 0; k < depth && !ret; k++) {
		memset(&t, 0, sizeof(t));
		t.buf = (uintptr_t)(write ? d->src : d->dst);
		t.arr = k;
		t.length = DR_LEN;
		t.pattern = pattern;
		t.seed = k + 1;
		t.flags = write ? flags : 0;
		ret = dr_ioctl(d, write ? IBTCA_IOC_DRDMA_FILL :
			       IBTCA_IOC_DRDMA_DRAIN, &t);
		*ns += t.ns;
	}
	t1 = now_s();
	dr_phase[DR_PH_FILL] += t1 - t0;
	if (masks && !ret) {
		ret = dr_mask(d, IBTCA_UAPI_DRDMA_MASK_COMMIT, all, 0, 0,
			      &errs);
		if (!ret && errs != err0) {
			snprintf(why, sizeof(why), "DRDMA_ERRORS %u -> %u",
				 err0, errs);
			ret = -EIO;
		}
	}
	t0 = now_s();
	dr_phase[DR_PH_COMMIT] += t0 - t1;
	*ns += (t0 - t1) * 1e9;
	if (!ret)
		ret = dr_complete_n(d, d->v.scq, wr0, depth, write ?
				    IBTCA_WC_DRDMA_WRITE : IBTCA_WC_DRDMA_READ,
				    DR_LEN, why, sizeof(why));
	dr_phase[DR_PH_WAIT] += now_s() - t0;
	dr_batches++;
	if (ret)
		fprintf(stderr, "ibtca-tool: DRDMA batch: %s %s\n",
			strerror(-ret), why);
	return ret;
}

static int dr_bench_drdma(struct dr *d, const struct vb_msg *m,
			  const char *test, int write, uint32_t pattern,
			  int masks)
{
	uint32_t depth = dr_all_count(d->info.ranges, d->info.pmb_dedicated);
	double t0 = now_s(), t, ns = 0;
	uint32_t n = 0;
	int ret;

	if (depth > DR_BENCH_DEPTH)
		depth = DR_BENCH_DEPTH;
	vb_pattern(d->src, DR_LEN, 2);
	memset(dr_phase, 0, sizeof(dr_phase));
	dr_batches = 0;
	do {
		ret = dr_bench_batch(d, m, write, pattern, depth, masks, &ns);
		n += depth;
		t = now_s() - t0;
	} while (!ret && t < DR_BENCH_SECS);
	if (!ret)
		dr_perf(test, (double)n * DR_LEN, t, ns, n);
	dcheck(test, !ret, "%u transfers of %u bytes: %s", n, DR_LEN,
	       strerror(-ret));
	return ret;
}

/* Ordinary RDMA WRITEs of 4 KiB from the registered buffer. */
static int dr_bench_rdma(struct dr *d, const struct vb_msg *m)
{
	struct ibtca_post_send s = {
		.qpn = d->v.qp,
		.opcode = IBTCA_WR_RDMA_WRITE,
		.addr = d->v.iova + VB_BULK_OFF,
		.length = DR_LEN,
		.lkey = d->v.lkey,
		.rkey = m->rkey,
	};
	double t0 = now_s(), t;
	char why[128] = "";
	uint32_t n = 0, k;
	uint64_t wr0;
	int ret = 0;

	do {
		wr0 = d->v.wr_id + 1;
		for (k = 0; k < DR_BENCH_DEPTH && !ret; k++) {
			s.wr_id = ++d->v.wr_id;
			s.remote_addr = m->iova + (uint64_t)k * DR_LEN;
			/* One SQ doorbell for the batch. */
			s.post_flags = k + 1 < DR_BENCH_DEPTH ?
				       IBTCA_UAPI_POST_F_MORE : 0;
			ret = dr_ioctl(d, IBTCA_IOC_POST_SEND, &s);
		}
		if (!ret)
			ret = dr_complete_n(d, d->v.scq, wr0, DR_BENCH_DEPTH,
					    IBTCA_WC_RDMA_WRITE, DR_LEN, why,
					    sizeof(why));
		n += DR_BENCH_DEPTH;
		t = now_s() - t0;
	} while (!ret && t < DR_BENCH_SECS);
	if (!ret)
		dr_perf("rdma_write_mem", (double)n * DR_LEN, t, 0, n);
	dcheck("rdma_write_mem", !ret, "%u writes of %u bytes: %s %s", n,
	       DR_LEN, strerror(-ret), why);
	return ret;
}

void dr_bench_server(struct dr *d)
{
	struct vb_msg m;
	int ret = dr_info(d), mapped;

	mapped = d->info.mode == IBTCA_DRDMA_MODE_MAPPED;
	dcheck("window", !ret, "%u ranges, mode %s", d->info.ranges,
	       mapped ? "mapped" : "trapped");
	if (ret || vb_exchange(&d->v))
		return;
	/* The client's HELLO address is its buffer: use its bulk area. */
	memset(&m, 0, sizeof(m));
	m.iova = d->v.peer_iova + VB_BULK_OFF;
	m.rkey = d->v.peer_rkey;
	reg_write(d->v.fd, IBTCA_REG_DRDMA_LOAD_TIMEOUT_US, DR_LOAD_TIMEOUT_US);
	ret = dr_bench_memcpy(d);
	d->mapped = mapped;
	/* Mapped: masks for submit and commit, and once per range to compare. */
	if (!ret)
		ret = dr_bench_drdma(d, &m, "drdma_write_memcpy_toio", 1,
				     IBTCA_UAPI_DRDMA_PAT_MEMCPY, mapped);
	if (!ret && mapped)
		ret = dr_bench_drdma(d, &m, "drdma_write_memcpy_toio_per_range",
				     1, IBTCA_UAPI_DRDMA_PAT_MEMCPY, 0);
	if (!ret)
		ret = dr_bench_drdma(d, &m, "drdma_write_qword", 1,
				     IBTCA_UAPI_DRDMA_PAT_QWORD, mapped);
	if (!ret)
		ret = dr_bench_drdma(d, &m, "drdma_write_mixed", 1,
				     IBTCA_UAPI_DRDMA_PAT_MIXED, mapped);
	if (!ret && !mapped)
		ret = dr_bench_drdma(d, &m, "drdma_read_memcpy_fromio", 0,
				     IBTCA_UAPI_DRDMA_PAT_MEMCPY, 0);
	if (!ret)
		ret = dr_bench_rdma(d, &m);
	ret = vb_send_simple(&d->v, VB_BYE, !ret, 0);
	dcheck("bye", !ret, "%s", ret ? strerror(-ret) : "client told");
}

void dr_bench_client(struct dr *d)
{
	struct vb_msg m;
	int ret;

	if (vb_exchange(&d->v))
		return;
	ret = vb_expect_within(&d->v, VB_BYE, &m, 600);
	dcheck("bye", !ret && m.ok, "%s", ret ? strerror(-ret) :
	       m.ok ? "server done" : "server failed");
}
