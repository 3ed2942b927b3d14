// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs verbs-bench's send completions: taken in batches without
 * waiting, or waited for; the first failed request and the completions
 * behind it noted and reported (bench.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* Completions one ibv_poll_cq takes at most. */
#define BENCH_DRAIN_BATCH	32

/*
 * The first request that failed, when (seconds after the last successful
 * completion), and the completions of the requests outstanding behind it:
 * a QP in error completes each at once, flushed.
 */
static struct {
	struct ibv_wc wc;
	double after;
	uint32_t flushed, other;
	int seen;
} bench_fail;

/* When the last request completed successfully (rc_now()). */
static double bench_last_ok;

void bench_ok_now(void)
{
	bench_last_ok = rc_now();
}

void bench_note(const struct ibv_wc *wc)
{
	if (wc->status == IBV_WC_SUCCESS) {
		bench_last_ok = rc_now();
	} else if (!bench_fail.seen) {
		bench_fail.wc = *wc;
		bench_fail.after = rc_now() - bench_last_ok;
		bench_fail.seen = 1;
	} else if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		bench_fail.flushed++;
	} else {
		bench_fail.other++;
	}
}

void bench_fail_report(struct pair *p, const char *test, uint32_t size,
		       uint32_t out)
{
	struct ibv_wc wc;

	while (out && !rc_wait(&p->scq, &wc, 10)) {
		bench_note(&wc);
		out--;
	}
	printf("IBTCA-PERF-FAIL %s size=%u wr=%llu status=%u after_s=%.3f flushed=%u other=%u%s\n",
	       test, size, (unsigned long long)bench_fail.wc.wr_id,
	       bench_fail.wc.status, bench_fail.after, bench_fail.flushed,
	       bench_fail.other, out ? " (completions missing)" : "");
}

int bench_drain(struct pair *p, uint32_t *out)
{
	struct ibv_wc wc[BENCH_DRAIN_BATCH];
	int i, found, n = 0;

	for (;;) {
		found = ibv_poll_cq(p->scq.cq, BENCH_DRAIN_BATCH, wc);
		if (found < 0)
			return -EIO;
		for (i = 0; i < found; i++)
			bench_note(&wc[i]);
		*out -= found;
		n += found;
		if (bench_fail.seen) {
			fprintf(stderr, "ibtca-verbs: bench WR %llu: %s\n",
				(unsigned long long)bench_fail.wc.wr_id,
				rc_wc_str(&bench_fail.wc));
			return -EIO;
		}
		if (found < BENCH_DRAIN_BATCH)
			return n;
	}
}

int bench_drain_to(struct pair *p, uint32_t *out, uint32_t left)
{
	struct ibv_wc wc;
	int ret;

	while (*out > left) {
		ret = rc_wait(&p->scq, &wc, 60);
		if (ret)
			return ret;
		bench_note(&wc);
		(*out)--;
		if (wc.status != IBV_WC_SUCCESS)
			return -EIO;
	}
	return 0;
}
