// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs verbs-bench's latency ping-pong (bench.h).
 *
 * write_lat (ib_write_lat): 64 B ping-pong by RDMA WRITE. Each side spins
 * on the last 8 bytes of its own incoming slot for the peer's next sequence
 * number and answers with a write of the same number: no CQ on the hot
 * path and no interrupts. Every WR is signaled, so the send CQ is drained
 * without waiting every LAT_DRAIN writes, outside the timed part.
 *
 * write_lat_sleep: the same ping-pong, but each side looks at its slot for
 * LAT_NAP_SPIN_US after its own write, then sleeps LAT_NAP_US between
 * looks, so its vCPU halts and the host CPU goes to QEMU and the device (a
 * guest spinning under TCG keeps a host CPU busy). The default timer slack
 * (50 us) is kept: it stretches each nap to up to ~60 us, which leaves the
 * vCPU idle most of the time (each TCG wake-up costs host CPU too).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define LAT_NAP_SPIN_US	20.0
#define LAT_NAP_US	10U
#define LAT_ITERS	1000U
#define LAT_WARMUP	50U
#define LAT_DRAIN	16U
#define LAT_MAX_OUT	48U	/* of the 64-entry SQ */
#define LAT_SPIN_SECS	30.0
#define LAT_SEQ_OFF	(BENCH_LAT_LEN - 8)

/*
 * Between two pings (outside the timed part): takes the send completions
 * that are ready once LAT_DRAIN are outstanding, and waits for some only
 * if the SQ is nearly full.
 */
static int lat_room(struct pair *p, uint32_t *out)
{
	int ret = 0;

	if (*out >= LAT_DRAIN)
		ret = bench_drain(p, out);
	if (ret >= 0)
		ret = bench_drain_to(p, out, LAT_MAX_OUT - 1);
	return ret < 0 ? ret : 0;
}

static uint64_t lat_seq_get(struct pair *p, uint32_t off)
{
	return __atomic_load_n((uint64_t *)(p->buf + off + LAT_SEQ_OFF),
			       __ATOMIC_ACQUIRE);
}

static void lat_seq_set(struct pair *p, uint32_t off, uint64_t seq)
{
	__atomic_store_n((uint64_t *)(p->buf + off + LAT_SEQ_OFF), seq,
			 __ATOMIC_RELEASE);
}

/*
 * Waits until our incoming slot holds @seq: spinning (BENCH_LAT_SPIN), or
 * (BENCH_LAT_NAP) spinning LAT_NAP_SPIN_US, then sleeping LAT_NAP_US
 * between looks.
 */
static int lat_spin_seq(struct pair *p, uint64_t seq, uint32_t how)
{
	double t0 = 0, end = 0;
	uint64_t got;
	unsigned int n = 0;

	if (how == BENCH_LAT_NAP)
		t0 = rc_now();
	for (;;) {
		got = lat_seq_get(p, BENCH_LAT_OFF);
		if (got == seq)
			return 0;
		if (got > seq)
			return -EPROTO;
		if (how == BENCH_LAT_NAP &&
		    (rc_now() - t0) * 1e6 >= LAT_NAP_SPIN_US)
			usleep(LAT_NAP_US);
		else if (++n % 4096)
			continue;
		if (!end)
			end = rc_now() + LAT_SPIN_SECS;
		else if (rc_now() > end)
			return -ETIMEDOUT;
	}
}

/* Writes @seq from our outgoing slot into the peer's incoming one. */
static int lat_write(struct pair *p, uint64_t seq)
{
	struct ibv_sge sge = pair_sge(p, BENCH_LAT_OFF + BENCH_LAT_LEN,
				      BENCH_LAT_LEN);
	struct ibv_send_wr wr = {
		.wr_id = ++p->wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = pair_remote(p, BENCH_LAT_OFF),
			     .rkey = p->peer_rkey },
	};
	struct ibv_send_wr *bad;

	lat_seq_set(p, BENCH_LAT_OFF + BENCH_LAT_LEN, seq);
	return -ibv_post_send(p->qp, &wr, &bad);
}

int bench_serve_lat(struct pair *p, uint64_t iters, uint32_t how)
{
	uint32_t out = 0;
	uint64_t i;
	int ret;

	lat_seq_set(p, BENCH_LAT_OFF, 0);
	ret = pair_send(p, MSG_RESULT, 1, iters);
	for (i = 1; !ret && i <= iters; i++) {
		ret = lat_room(p, &out);
		if (!ret)
			ret = lat_spin_seq(p, i, how);
		if (!ret)
			ret = lat_write(p, i);
		out += !ret;
	}
	return ret ? ret : bench_drain_to(p, &out, 0);
}

static int lat_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void bench_print_lat(const char *name, double *us, uint32_t n)
{
	double sum = 0;
	uint32_t i;

	for (i = 0; i < n; i++)
		sum += us[i];
	qsort(us, n, sizeof(*us), lat_cmp_double);
	printf("IBTCA-PERF %s size=%u iters=%u typical_us=%.2f min_us=%.2f avg_us=%.2f p99_us=%.2f max_us=%.2f\n",
	       name, BENCH_LAT_LEN, n, us[n / 2], us[0], sum / n,
	       us[n * 99 / 100], us[n - 1]);
}

/* One-way times are half a round trip. */
int bench_write_lat(struct pair *p, uint32_t how)
{
	const uint32_t n = LAT_WARMUP + LAT_ITERS;
	double *us, t0;
	uint32_t i, out = 0;
	struct pair_msg m;
	int ret;

	us = calloc(LAT_ITERS, sizeof(*us));
	if (!us)
		return -ENOMEM;
	lat_seq_set(p, BENCH_LAT_OFF, 0);
	ret = pair_send(p, MSG_LAT, how, n);
	if (!ret)
		ret = pair_expect(p, MSG_RESULT, &m, 120);
	for (i = 1; !ret && i <= n; i++) {
		ret = lat_room(p, &out);
		if (ret)
			break;
		t0 = rc_now();
		ret = lat_write(p, i);
		out += !ret;
		if (!ret)
			ret = lat_spin_seq(p, i, how);
		if (!ret && i > LAT_WARMUP)
			us[i - LAT_WARMUP - 1] = (rc_now() - t0) * 1e6 / 2;
	}
	if (!ret)
		ret = bench_drain_to(p, &out, 0);
	if (!ret)
		bench_print_lat(how == BENCH_LAT_NAP ? "write_lat_sleep" :
				"write_lat", us, LAT_ITERS);
	free(us);
	return ret;
}
