// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool verbs-bench: perftest-style write_bw, write_lat and send_lat
 * between the two guests (the client's side and the server's write_lat
 * answers), printed as IBTCA-PERF lines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "report.h"
#include "verbs_lib.h"

/*
 * verbs-bench: perftest-style measurements between the two guests, on the
 * first QP pair set up and introduced as for `verbs`.
 *
 * write_bw (ib_write_bw): the client keeps up to VB_BW_DEPTH RDMA WRITEs of
 * one size outstanding for VB_BW_SECS, polling its send CQ without waiting.
 * Once VB_BW_BATCH have completed it posts as many again with one
 * POST_SEND_BATCH (one SQ doorbell). From VB_BW_EVENT_MIN bytes on, a poll
 * that finds nothing sleeps until the CQ interrupt instead (ib_write_bw -e):
 * a completion is then ~1 ms away, and a spinning TCG vCPU would take that
 * host CPU from the devices that move the data.
 *
 * write_lat (ib_write_lat): 64 B ping-pong by RDMA WRITE. Each side spins
 * on the last 8 bytes of its own incoming slot for the peer's next sequence
 * number and answers with a write of the same number: no CQ on the hot
 * path and no interrupts. Every WR is signaled (the driver has no
 * unsignaled ones), so the send CQ is drained without waiting every
 * VB_LAT_DRAIN writes, outside the timed part.
 *
 * write_lat_sleep: the same ping-pong, but each side looks at its slot for
 * VB_NAP_SPIN_US after its own write, then sleeps VB_NAP_US between looks,
 * so its vCPU halts and the host CPU goes to QEMU and the device (a guest
 * spinning under TCG keeps a host CPU busy). The default timer slack
 * (50 us) is kept: it stretches each nap to up to ~60 us, which leaves the
 * vCPU idle most of the time (each TCG wake-up costs host CPU too).
 */
#define VB_BW_DEPTH	64U
#define VB_BW_BATCH	16U
#define VB_BW_EVENT_MIN	(64U << 10)
#define VB_DRAIN_BATCH	32U
#define VB_NAP_SPIN_US	20.0
#define VB_NAP_US	10U
/* VB_LAT's ok field: how both sides wait for the peer's write. */
#define VB_LAT_SPIN	1U
#define VB_LAT_NAP	2U
#define VB_BW_SECS	2.0
#define VB_LAT_ITERS	1000U
#define VB_LAT_WARMUP	50U
#define VB_LAT_DRAIN	16U
#define VB_LAT_MAX_OUT	48U	/* of the 64-entry SQ */
#define VB_SPIN_SECS	30.0
#define VB_SEQ_OFF	(VB_LAT_LEN - 8)

/*
 * The first request that failed, when (seconds after the last successful
 * completion), and the completions of the requests outstanding behind it:
 * a QP in error completes each at once, flushed.
 */
static struct {
	struct ibtca_poll_cq c;
	double after;
	uint32_t flushed, other;
	int seen;
} bench_fail;

/* When the last request completed successfully (now_s()). */
static double vb_last_ok;

/* Notes completion @c: the time of a success, or in bench_fail a failure. */
static void vb_note(const struct ibtca_poll_cq *c)
{
	if (c->status == IBTCA_WC_SUCCESS) {
		vb_last_ok = now_s();
	} else if (!bench_fail.seen) {
		bench_fail.c = *c;
		bench_fail.after = now_s() - vb_last_ok;
		bench_fail.seen = 1;
	} else if (c->status == IBTCA_WC_WR_FLUSH_ERR) {
		bench_fail.flushed++;
	} else {
		bench_fail.other++;
	}
}

/*
 * A request failed: takes the completions of the @out requests still
 * outstanding (waiting at most 10 s for each) and prints one line:
 *
 *   IBTCA-PERF-FAIL TEST size=N wr=ID status=S after_s=T flushed=F other=O
 *
 * (S: IBTCA_WC_*, 12 when the peer stopped answering; T: seconds since
 * the last successful completion).
 */
static void vb_fail_report(struct vb *v, const char *test, uint32_t size,
			   uint32_t out)
{
	struct ibtca_poll_cq c;

	while (out && !vb_poll(v, v->scq, &c, 10)) {
		vb_note(&c);
		out--;
	}
	printf("IBTCA-PERF-FAIL %s size=%u wr=%llu status=%u after_s=%.3f flushed=%u other=%u%s\n",
	       test, size, (unsigned long long)bench_fail.c.wr_id,
	       bench_fail.c.status, bench_fail.after, bench_fail.flushed, bench_fail.other,
	       out ? " (completions missing)" : "");
}

/*
 * Takes every send completion that is ready, without waiting, in batches
 * (POLL_CQ_BATCH: one CQ doorbell per batch); returns how many (and lowers
 * *@out by that), or -errno, -EIO for a failed WR (bench_fail has it, and
 * the completions after it in its batch).
 */
static int vb_drain(struct vb *v, uint32_t *out)
{
	struct ibtca_poll_cq c[VB_DRAIN_BATCH];
	struct ibtca_poll_cq_batch b;
	uint32_t i;
	int n = 0;

	for (;;) {
		memset(&b, 0, sizeof(b));
		b.cqn = v->scq;
		b.max = VB_DRAIN_BATCH;
		b.entries = (uintptr_t)c;
		if (ioctl(v->fd, IBTCA_IOC_POLL_CQ_BATCH, &b) < 0)
			return -errno;
		for (i = 0; i < b.found; i++)
			vb_note(&c[i]);
		*out -= b.found;
		n += b.found;
		if (bench_fail.seen) {
			fprintf(stderr, "ibtca-tool: bench WR %llu: %s\n",
				(unsigned long long)bench_fail.c.wr_id,
				vb_err(0, &bench_fail.c));
			return -EIO;
		}
		if (b.found < VB_DRAIN_BATCH)
			return n;
	}
}

/* Waits (in the driver) until at most @left sends are outstanding. */
static int vb_drain_to(struct vb *v, uint32_t *out, uint32_t left)
{
	struct ibtca_poll_cq c;
	int ret;

	while (*out > left) {
		ret = vb_poll(v, v->scq, &c, 60);
		if (ret)
			return ret;
		vb_note(&c);
		(*out)--;
		if (c.status != IBTCA_WC_SUCCESS)
			return -EIO;
	}
	return 0;
}

/*
 * Between two pings (outside the timed part): takes the send completions
 * that are ready once VB_LAT_DRAIN are outstanding, and waits for some
 * only if the SQ is nearly full.
 */
static int vb_lat_room(struct vb *v, uint32_t *out)
{
	int ret = 0;

	if (*out >= VB_LAT_DRAIN)
		ret = vb_drain(v, out);
	if (ret >= 0)
		ret = vb_drain_to(v, out, VB_LAT_MAX_OUT - 1);
	return ret < 0 ? ret : 0;
}

static uint64_t vb_seq_get(struct vb *v, uint32_t off)
{
	return __atomic_load_n((uint64_t *)(v->buf + off + VB_SEQ_OFF),
			       __ATOMIC_ACQUIRE);
}

static void vb_seq_set(struct vb *v, uint32_t off, uint64_t seq)
{
	__atomic_store_n((uint64_t *)(v->buf + off + VB_SEQ_OFF), seq,
			 __ATOMIC_RELEASE);
}

/*
 * Waits until our incoming slot holds @seq: spinning (VB_LAT_SPIN), or
 * (VB_LAT_NAP) spinning VB_NAP_SPIN_US, then sleeping VB_NAP_US between
 * looks.
 */
static int vb_spin_seq(struct vb *v, uint64_t seq, uint32_t how)
{
	double t0 = 0, end = 0;
	uint64_t got;
	unsigned int n = 0;

	if (how == VB_LAT_NAP)
		t0 = now_s();
	for (;;) {
		got = vb_seq_get(v, VB_LAT_OFF);
		if (got == seq)
			return 0;
		if (got > seq)
			return -EPROTO;
		if (how == VB_LAT_NAP && (now_s() - t0) * 1e6 >= VB_NAP_SPIN_US)
			usleep(VB_NAP_US);
		else if (++n % 4096)
			continue;
		if (!end)
			end = now_s() + VB_SPIN_SECS;
		else if (now_s() > end)
			return -ETIMEDOUT;
	}
}

/* Writes @seq from our outgoing slot into the peer's incoming one. */
static int vb_lat_write(struct vb *v, uint64_t seq)
{
	struct ibtca_post_send s = {
		.qpn = v->qp,
		.opcode = IBTCA_WR_RDMA_WRITE,
		.wr_id = ++v->wr_id,
		.addr = v->iova + VB_LAT_OFF + VB_LAT_LEN,
		.length = VB_LAT_LEN,
		.lkey = v->lkey,
		.remote_addr = v->peer_iova + VB_LAT_OFF,
		.rkey = v->peer_rkey,
	};

	vb_seq_set(v, VB_LAT_OFF + VB_LAT_LEN, seq);
	return ioctl(v->fd, IBTCA_IOC_POST_SEND, &s) < 0 ? -errno : 0;
}

/*
 * Server: answers @iters write_lat pings, waiting as @how says, then drains
 * its send CQ.
 */
int vb_serve_lat(struct vb *v, uint64_t iters, uint32_t how)
{
	uint32_t out = 0;
	uint64_t i;
	int ret;

	vb_seq_set(v, VB_LAT_OFF, 0);
	ret = vb_send_simple(v, VB_RESULT, 1, iters);
	for (i = 1; !ret && i <= iters; i++) {
		ret = vb_lat_room(v, &out);
		if (!ret)
			ret = vb_spin_seq(v, i, how);
		if (!ret)
			ret = vb_lat_write(v, i);
		out += !ret;
	}
	return ret ? ret : vb_drain_to(v, &out, 0);
}

/*
 * Client: RDMA WRITEs of @size for VB_BW_SECS, VB_BW_DEPTH outstanding,
 * spread over the 1 MiB bulk area (same offset on both sides).
 */
static int vb_write_bw(struct vb *v, uint32_t size)
{
	const struct ibtca_post_send tmpl = {
		.qpn = v->qp,
		.opcode = IBTCA_WR_RDMA_WRITE,
		.length = size,
		.lkey = v->lkey,
		.rkey = v->peer_rkey,
	};
	struct ibtca_post_send s[VB_BW_DEPTH];
	struct ibtca_post_send_batch b;
	struct ibtca_poll_cq c;
	uint32_t slots = VB_BULK_LEN / size, out = 0;
	uint64_t posted = 0, done = 0, off;
	double t0, t, end, last;
	int n;

	t0 = now_s();
	end = t0 + VB_BW_SECS;
	last = t0;
	vb_last_ok = t0;
	for (;;) {
		t = now_s();
		if (t >= end && !out)
			break;
		/*
		 * Refill in batches: one POST_SEND_BATCH (one SQ doorbell)
		 * for each.
		 */
		if (t < end && out <= VB_BW_DEPTH - VB_BW_BATCH) {
			n = 0;
			do {
				off = (posted % slots) * size;
				s[n] = tmpl;
				s[n].wr_id = ++v->wr_id;
				s[n].addr = v->iova + VB_BULK_OFF + off;
				s[n].remote_addr = v->peer_iova +
						   VB_BULK_OFF + off;
				posted++;
				n++;
			} while (++out < VB_BW_DEPTH);
			memset(&b, 0, sizeof(b));
			b.count = n;
			b.wrs = (uintptr_t)s;
			if (ioctl(v->fd, IBTCA_IOC_POST_SEND_BATCH, &b) < 0)
				return -errno;
			if (b.posted != (uint32_t)n)
				return -EIO;
		}
		n = vb_drain(v, &out);
		if (n == -EIO)
			vb_fail_report(v, "write_bw", size, out);
		if (n < 0)
			return n;
		if (!n && out && size >= VB_BW_EVENT_MIN) {
			/* Nothing ready: sleep until the CQ interrupt. */
			n = vb_poll(v, v->scq, &c, 60);
			if (n)
				return n;
			vb_note(&c);
			out--;
			if (c.status != IBTCA_WC_SUCCESS) {
				vb_fail_report(v, "write_bw", size, out);
				return -EIO;
			}
			n = 1;
		}
		if (n) {
			done += n;
			last = now_s();
		} else if (t - last > 60) {
			return -ETIMEDOUT;
		}
	}
	t = last - t0;
	printf("IBTCA-PERF write_bw size=%u iters=%llu MBps=%.2f Mmsgps=%.6f depth=%u secs=%.3f\n",
	       size, (unsigned long long)done, done * (double)size / t / 1e6,
	       done / t / 1e6, VB_BW_DEPTH, t);
	return 0;
}

static int vb_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Prints an IBTCA-PERF line for @n one-way latencies (sorts @us). */
static void vb_print_lat(const char *name, double *us, uint32_t n)
{
	double sum = 0;
	uint32_t i;

	for (i = 0; i < n; i++)
		sum += us[i];
	qsort(us, n, sizeof(*us), vb_cmp_double);
	printf("IBTCA-PERF %s size=%u iters=%u typical_us=%.2f min_us=%.2f avg_us=%.2f p99_us=%.2f max_us=%.2f\n",
	       name, VB_LAT_LEN, n, us[n / 2], us[0], sum / n,
	       us[n * 99 / 100], us[n - 1]);
}

/*
 * Client: the write_lat ping-pong, both sides waiting as @how says; one-way
 * times are half a round trip.
 */
static int vb_write_lat(struct vb *v, uint32_t how)
{
	const uint32_t n = VB_LAT_WARMUP + VB_LAT_ITERS;
	double *us, t0;
	uint32_t i, out = 0;
	struct vb_msg m;
	int ret;

	us = calloc(VB_LAT_ITERS, sizeof(*us));
	if (!us)
		return -ENOMEM;
	vb_seq_set(v, VB_LAT_OFF, 0);
	ret = vb_send_simple(v, VB_LAT, how, n);
	if (!ret)
		ret = vb_expect(v, VB_RESULT, &m);
	for (i = 1; !ret && i <= n; i++) {
		ret = vb_lat_room(v, &out);
		if (ret)
			break;
		t0 = now_s();
		ret = vb_lat_write(v, i);
		out += !ret;
		if (!ret)
			ret = vb_spin_seq(v, i, how);
		if (!ret && i > VB_LAT_WARMUP)
			us[i - VB_LAT_WARMUP - 1] = (now_s() - t0) * 1e6 / 2;
	}
	if (!ret)
		ret = vb_drain_to(v, &out, 0);
	if (!ret)
		vb_print_lat(how == VB_LAT_NAP ? "write_lat_sleep" :
			     "write_lat", us, VB_LAT_ITERS);
	free(us);
	return ret;
}

/* Client side of verbs-bench. */
void vb_client_perf(struct vb *v)
{
	static const uint32_t sizes[] = { 64, 4096, VB_BULK_LEN };
	double us[VB_PINGS];
	struct vb_msg m;
	uint32_t i;
	int ret, n;

	if (vb_exchange(v))
		return;
	vb_pattern(v->buf + VB_BULK_OFF, VB_BULK_LEN, VB_WRITE_SEED);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		ret = vb_write_bw(v, sizes[i]);
		vcheck("write_bw", !ret, "size=%u %s", sizes[i],
		       ret ? strerror(-ret) : "done");
		if (ret)
			return;
	}
	/* The last 1 MiB writes left our pattern in the server's bulk area. */
	ret = vb_send_simple(v, VB_WRITTEN, VB_WRITE_SEED, VB_BULK_LEN);
	if (!ret)
		ret = vb_expect(v, VB_RESULT, &m);
	vcheck("write_bw_remote", !ret && m.ok, "server verified %u bytes: %s",
	       VB_BULK_LEN, ret ? strerror(-ret) : m.ok ? "match" : "mismatch");
	if (ret)
		return;

	ret = vb_write_lat(v, VB_LAT_SPIN);
	vcheck("write_lat", !ret, "%s", ret ? strerror(-ret) : "done");
	if (ret)
		return;
	ret = vb_write_lat(v, VB_LAT_NAP);
	vcheck("write_lat_sleep", !ret, "%s", ret ? strerror(-ret) : "done");
	if (ret)
		return;

	/* For comparison: SEND/RECV round trips through the CQ interrupt. */
	n = vb_send_pingpong(v, VB_PINGS, us);
	if (n == VB_PINGS)
		vb_print_lat("send_lat", us, VB_PINGS);
	vcheck("send_lat", n == VB_PINGS, "%d of %d round trips", n, VB_PINGS);
	if (n != VB_PINGS)
		return;

	ret = vb_send_simple(v, VB_BYE, 1, 0);
	vcheck("bye", !ret, "%s", ret ? strerror(-ret) : "server told");
}
