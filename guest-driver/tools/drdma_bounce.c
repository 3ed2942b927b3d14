// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool drdma, the no-PMB fallback (seed 000, Fig 17/18a): a batch of
 * transfers larger than the PMBs dedicated to DRDMA. The client asks for
 * it with {VA of DR_BOUNCE_N slots, batch size, PMBs to dedicate}; the
 * server writes DRDMA_PMB_DEDICATED (every range is free then), submits
 * the whole batch through dr_path_submit() and so sends the first
 * transfers through window ranges and the rest, refused with NO_PMB,
 * through bounce buffers with ordinary RDMA WRITEs and READs:
 *
 *   - WRITE batch (I/O read): transfer k writes its pattern to slot k of
 *     the client (checked there);
 *   - READ batch (I/O write): transfer k reads slot (k + 1) % n back into
 *     range k or its bounce buffer (checked here, byte by byte);
 *
 * and checks which path each took (the fallback counts, DRDMA_ERRORS and
 * DRDMA_LAST_ERROR), the completions' opcodes, that every range is free
 * after, then restores the dedication. The status carries how many
 * transfers fell back. Only in a trapped window: a mapped one binds range
 * n to PMB n and refuses the register.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "drdma_lib.h"

/* The server's bounce buffers: WRITE batch, then READ batch. */
#define DR_BOUNCE_SRV_OFF	(VB_BULK_OFF + 0x80000U)

/* Submits @n transfers of @dir; checks the paths; returns -errno or 0. */
static int dr_bounce_submit(struct dr *d, struct dr_path *p, uint32_t n,
			    uint32_t pmbs, uint32_t dir, uint32_t off0,
			    const char *name)
{
	uint32_t k, err0, err1, last = 0, agree = 0;
	struct ibtca_drdma_arr a;
	int ret = 0;

	err0 = dr_errors(d, NULL);
	d->direct = 0;
	d->bounced = 0;
	for (k = 0; k < n && !ret; k++)
		ret = dr_path_submit(d, k, dir, DR_LEN, off0 + k * DR_LEN,
				     &p[k]);
	for (k = 0; k < n && !ret; k++) {
		ret = dr_arr(d, k, &a);
		/* Busy if direct, left free if bounced. */
		if (!ret && !!(a.ctrl & IBTCA_ARR_BUSY) == !p[k].bounce)
			agree++;
	}
	err1 = dr_errors(d, &last);
	dcheck(name, !ret && d->direct == pmbs && d->bounced == n - pmbs &&
	       agree == n && err1 == err0 + n - pmbs &&
	       last == (IBTCA_DRDMA_ERR_NO_PMB | (n - 1) << 8),
	       "%u submits on %u PMBs: %u direct, %u bounced (want %u, %u), %u ranges as their path says, DRDMA_ERRORS %u -> %u, LAST_ERROR 0x%x: %s",
	       n, pmbs, d->direct, d->bounced, pmbs, n - pmbs, agree, err0,
	       err1, last, strerror(-ret));
	return ret;
}

/* Waits for @n completions from @wr0 on, each with its path's opcode. */
static int dr_bounce_complete(struct dr *d, const struct dr_path *p,
			      uint32_t n, uint64_t wr0, const char *name)
{
	char why[128] = "";
	uint32_t k;
	int ret = 0;

	for (k = 0; k < n && !ret; k++)
		ret = dr_complete(d, d->v.scq, wr0 + k, dr_path_wc(&p[k]),
				  DR_LEN, why, sizeof(why));
	dcheck(name, !ret,
	       "%u of %u in order, DRDMA opcodes through ranges, RDMA ones bounced: %s",
	       ret ? k - 1 : k, n, why);
	return ret;
}

static int dr_bounce_free(struct dr *d, uint32_t n, const char *name)
{
	struct ibtca_drdma_arr a;
	uint32_t k, busy = 0;

	for (k = 0; k < n; k++)
		if (dr_arr(d, k, &a) || (a.ctrl & DR_ARR_BITS))
			busy++;
	dcheck(name, !busy, "%u of %u ranges still busy", busy, n);
	return 0;
}

/* The I/O reads: WRITEs of pattern k to the client's slot k. */
static int dr_bounce_writes(struct dr *d, const struct vb_msg *m,
			    struct dr_path *p, uint8_t (*buf)[DR_LEN],
			    uint32_t n, uint32_t pmbs)
{
	uint64_t wr0 = d->v.wr_id + 1;
	uint32_t k;
	int ret;

	ret = dr_bounce_submit(d, p, n, pmbs, IBTCA_UAPI_DRDMA_WRITE,
			       DR_BOUNCE_SRV_OFF, "bounce_write_paths");
	/* A bounce buffer holds its bytes before its WRITE is posted ... */
	for (k = 0; k < n && !ret; k++) {
		vb_pattern(buf[k], DR_LEN, DR_SEED_BOUNCE + k);
		if (p[k].bounce)
			ret = dr_path_store(d, &p[k], buf[k]);
	}
	for (k = 0; k < n && !ret; k++)
		ret = dr_path_post(d, &p[k], d->v.qp, m->iova + k * DR_LEN,
				   m->rkey, ++d->v.wr_id);
	/* ... a window range is filled after: its WRITE waits for it. */
	for (k = 0; k < n && !ret; k++)
		if (!p[k].bounce)
			ret = dr_path_store(d, &p[k], buf[k]);
	if (ret) {
		dcheck("bounce_write_posted", 0, "%s", strerror(-ret));
		return ret;
	}
	ret = dr_bounce_complete(d, p, n, wr0, "bounce_write_completions");
	if (!ret)
		dr_bounce_free(d, n, "bounce_write_free");
	return ret;
}

/* The I/O writes: READs of the client's slot (k + 1) % n. */
static int dr_bounce_reads(struct dr *d, const struct vb_msg *m,
			   struct dr_path *p, uint8_t (*buf)[DR_LEN],
			   uint32_t n, uint32_t pmbs)
{
	const uint32_t off0 = DR_BOUNCE_SRV_OFF + n * DR_LEN;
	uint64_t wr0 = d->v.wr_id + 1;
	uint32_t k, bad = 0;
	int ret;

	memset(d->v.buf + off0, 0, n * DR_LEN);
	ret = dr_bounce_submit(d, p, n, pmbs, IBTCA_UAPI_DRDMA_READ, off0,
			       "bounce_read_paths");
	for (k = 0; k < n && !ret; k++)
		ret = dr_path_post(d, &p[k], d->v.qp,
				   m->iova + (k + 1) % n * DR_LEN, m->rkey,
				   ++d->v.wr_id);
	/* A window range is loaded as its responses come, before its
	 * completion; a bounce buffer once its READ completed.
	 */
	for (k = 0; k < n && !ret; k++) {
		memset(buf[k], 0, DR_LEN);
		if (!p[k].bounce)
			ret = dr_path_load(d, &p[k], buf[k]);
	}
	if (ret) {
		dcheck("bounce_read_posted", 0, "%s", strerror(-ret));
		return ret;
	}
	ret = dr_bounce_complete(d, p, n, wr0, "bounce_read_completions");
	for (k = 0; k < n && !ret; k++) {
		if (p[k].bounce)
			dr_path_load(d, &p[k], buf[k]);
		if (vb_pattern_diff(buf[k], DR_LEN, DR_SEED_BOUNCE +
				    (k + 1) % n) != DR_LEN)
			bad++;
	}
	if (ret)
		return ret;
	dcheck("bounce_read_data", !bad,
	       "%u READs of 4 KiB (%u through ranges, %u bounced), %u mismatched",
	       n, d->direct, d->bounced, bad);
	dr_bounce_free(d, n, "bounce_read_free");
	return 0;
}

int dr_bounce(struct dr *d, const struct vb_msg *m)
{
	uint32_t n = (uint32_t)m->value, pmbs = m->ok, old, bounced = 0;
	struct dr_path p[DR_BOUNCE_N];
	uint8_t (*buf)[DR_LEN];
	int fails0 = n_fail;
	int ret;

	if (dr_info(d) || n > DR_BOUNCE_N || !pmbs || pmbs >= n ||
	    n > d->info.ranges) {
		dcheck("bounce_dedicated", 0, "batch %u on %u PMBs refused", n,
		       pmbs);
		return dr_status(d, 0, 0);
	}
	old = d->info.pmb_dedicated;
	buf = calloc(n, DR_LEN);
	if (!buf)
		return -ENOMEM;
	ret = reg_write(d->v.fd, IBTCA_REG_DRDMA_PMB_DEDICATED, pmbs);
	if (!ret)
		ret = dr_info(d);
	dcheck("bounce_dedicated", !ret && d->info.pmb_dedicated == pmbs,
	       "DRDMA_PMB_DEDICATED %u -> %u (asked %u) for a batch of %u",
	       old, d->info.pmb_dedicated, pmbs, n);
	if (!ret)
		ret = dr_bounce_writes(d, m, p, buf, n, pmbs);
	bounced = d->bounced;
	if (!ret)
		ret = dr_bounce_reads(d, m, p, buf, n, pmbs);
	bounced += d->bounced;
	free(buf);
	if (reg_write(d->v.fd, IBTCA_REG_DRDMA_PMB_DEDICATED, old) ||
	    dr_info(d) || d->info.pmb_dedicated != old)
		dcheck("bounce_restored", 0, "DRDMA_PMB_DEDICATED %u, not %u",
		       d->info.pmb_dedicated, old);
	else
		dcheck("bounce_restored", 1, "DRDMA_PMB_DEDICATED %u", old);
	return dr_status(d, !ret && n_fail == fails0, bounced);
}
