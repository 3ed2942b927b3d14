// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs verbs-bench: perftest-style measurements between two guests
 * on the guest pair (pair.c), printed by the client as IBTCA-PERF lines:
 *
 *   IBTCA-PERF write_bw size=N iters=I MBps=B Mmsgps=M depth=D secs=S
 *   IBTCA-PERF write_lat|write_lat_sleep|send_lat size=64 iters=I
 *              typical_us=.. min_us=.. avg_us=.. p99_us=.. max_us=..
 *   IBTCA-PERF-FAIL ... (bench.h: a request failed)
 *
 * and the IBTCA-VERBS check lines of both sides.
 *
 * write_bw (ib_write_bw): the client keeps up to BW_DEPTH RDMA WRITEs of
 * one size outstanding for BW_SECS, polling its send CQ without waiting.
 * Once BW_BATCH have completed it posts as many again in one
 * ibv_post_send chain (one SQ doorbell). From BW_EVENT_MIN bytes on, a
 * poll that finds nothing sleeps until the CQ's completion event instead
 * (ib_write_bw -e): a completion is then ~1 ms away, and a spinning TCG
 * vCPU would take that host CPU from the devices that move the data. The
 * last size is the whole 1 MiB bulk area, which the server then checks.
 *
 * write_lat and write_lat_sleep: bench_lat.c. send_lat: 64 B SEND round
 * trips, both sides waiting on the CQ's completion event.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "commands.h"

#define BW_DEPTH	64U
#define BW_BATCH	16U
#define BW_EVENT_MIN	(64U << 10)
#define BW_SECS		2.0
#define BENCH_PINGS	200
#define BENCH_SEED	0x31

/*
 * Posts the WRITEs that bring @out up to BW_DEPTH, spread over the 1 MiB
 * bulk area (same offset on both sides), as one chain.
 */
static int bw_refill(struct pair *p, uint32_t size, uint64_t *posted,
		     uint32_t *out)
{
	struct ibv_send_wr wr[BW_DEPTH];
	struct ibv_sge sge[BW_DEPTH];
	uint32_t slots = PAIR_BULK_LEN / size, n = 0;
	struct ibv_send_wr *bad;
	uint32_t off;
	int ret;

	do {
		off = PAIR_BULK_OFF + (uint32_t)(*posted % slots) * size;
		sge[n] = pair_sge(p, off, size);
		memset(&wr[n], 0, sizeof(wr[n]));
		wr[n].wr_id = ++p->wr_id;
		wr[n].sg_list = &sge[n];
		wr[n].num_sge = 1;
		wr[n].opcode = IBV_WR_RDMA_WRITE;
		wr[n].send_flags = IBV_SEND_SIGNALED;
		wr[n].wr.rdma.remote_addr = pair_remote(p, off);
		wr[n].wr.rdma.rkey = p->peer_rkey;
		if (n)
			wr[n - 1].next = &wr[n];
		(*posted)++;
		n++;
	} while (++*out < BW_DEPTH);
	ret = ibv_post_send(p->qp, wr, &bad);
	if (ret) {
		fprintf(stderr, "ibtca-verbs: write_bw: %u of %u WRITEs posted: %s\n",
			(uint32_t)(bad - wr), n, strerror(ret));
		return -ret;
	}
	return 0;
}

/* Client: RDMA WRITEs of @size for BW_SECS, BW_DEPTH outstanding. */
static int bench_write_bw(struct pair *p, uint32_t size)
{
	uint64_t posted = 0, done = 0;
	double t0, t, end, last;
	struct ibv_wc wc;
	uint32_t out = 0;
	int n;

	t0 = rc_now();
	end = t0 + BW_SECS;
	last = t0;
	bench_ok_now();
	for (;;) {
		t = rc_now();
		if (t >= end && !out)
			break;
		if (t < end && out <= BW_DEPTH - BW_BATCH) {
			n = bw_refill(p, size, &posted, &out);
			if (n)
				return n;
		}
		n = bench_drain(p, &out);
		if (n == -EIO)
			bench_fail_report(p, "write_bw", size, out);
		if (n < 0)
			return n;
		if (!n && out && size >= BW_EVENT_MIN) {
			/* Nothing ready: sleep until the completion event. */
			n = rc_wait(&p->scq, &wc, 60);
			if (n)
				return n;
			bench_note(&wc);
			out--;
			if (wc.status != IBV_WC_SUCCESS) {
				bench_fail_report(p, "write_bw", size, out);
				return -EIO;
			}
			n = 1;
		}
		if (n) {
			done += n;
			last = rc_now();
		} else if (t - last > 60) {
			return -ETIMEDOUT;
		}
	}
	t = last - t0;
	printf("IBTCA-PERF write_bw size=%u iters=%llu MBps=%.2f Mmsgps=%.6f depth=%u secs=%.3f\n",
	       size, (unsigned long long)done, done * (double)size / t / 1e6,
	       done / t / 1e6, BW_DEPTH, t);
	return 0;
}

static void bench_client(struct pair *p)
{
	static const uint32_t sizes[] = { 64, 4096, PAIR_BULK_LEN };
	double us[BENCH_PINGS];
	struct pair_msg m;
	uint32_t i;
	int ret, n;

	if (pair_exchange(p))
		return;
	pair_pattern(p->buf + PAIR_BULK_OFF, PAIR_BULK_LEN, BENCH_SEED);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		ret = bench_write_bw(p, sizes[i]);
		check("write_bw", !ret, "size=%u %s", sizes[i],
		      ret ? strerror(-ret) : "done");
		if (ret)
			return;
	}
	/* The last 1 MiB writes left our pattern in the server's bulk area. */
	ret = pair_send(p, MSG_WRITTEN, BENCH_SEED, PAIR_BULK_LEN);
	if (!ret)
		ret = pair_expect(p, MSG_RESULT, &m, 120);
	check("write_bw_remote", !ret && m.ok, "server verified %u bytes: %s",
	      PAIR_BULK_LEN, ret ? strerror(-ret) : m.ok ? "match" : "mismatch");
	if (ret)
		return;

	ret = bench_write_lat(p, BENCH_LAT_SPIN);
	check("write_lat", !ret, "%s", ret ? strerror(-ret) : "done");
	if (ret)
		return;
	ret = bench_write_lat(p, BENCH_LAT_NAP);
	check("write_lat_sleep", !ret, "%s", ret ? strerror(-ret) : "done");
	if (ret)
		return;

	/* For comparison: SEND/RECV round trips through the completion event. */
	n = pair_pingpong(p, BENCH_PINGS, us);
	if (n == BENCH_PINGS)
		bench_print_lat("send_lat", us, BENCH_PINGS);
	check("send_lat", n == BENCH_PINGS, "%d of %d round trips", n,
	      BENCH_PINGS);
	if (n != BENCH_PINGS)
		return;

	ret = pair_send(p, MSG_BYE, 1, 0);
	check("bye", !ret, "%s", ret ? strerror(-ret) : "server told");
}

/*
 * Server: introduced by the HELLO exchange, it answers the client until
 * BYE: checks the bytes of its last 1 MiB write, answers the SEND pings
 * and the write_lat round trips.
 */
static void bench_server(struct pair *p)
{
	struct pair_msg m;
	size_t i;
	int ret, done = 0;

	if (pair_exchange(p))
		return;
	while (!done) {
		ret = pair_recv(p, &m, 120);
		if (ret) {
			check("protocol", 0, "receive: %s", strerror(-ret));
			return;
		}
		switch (m.type) {
		case MSG_WRITTEN:
			i = pair_pattern_diff(p->buf + PAIR_BULK_OFF, m.value,
					      (uint8_t)m.ok);
			check("rdma_write_data", i == m.value,
			      "%llu bytes, first mismatch at %zu",
			      (unsigned long long)m.value, i);
			ret = pair_send(p, MSG_RESULT, i == m.value, i);
			break;
		case MSG_PING:
			ret = pair_send(p, MSG_PONG, 1, m.value);
			break;
		case MSG_LAT:
			ret = bench_serve_lat(p, m.value, m.ok);
			check("write_lat_echo", !ret, "%llu round trips: %s",
			      (unsigned long long)m.value,
			      ret ? strerror(-ret) : "answered");
			break;
		case MSG_BYE:
			check("bye", 1, "client finished");
			done = 1;
			break;
		default:
			check("protocol", 0, "unexpected message type %u",
			      m.type);
			return;
		}
		if (ret) {
			check("protocol", 0, "reply: %s", strerror(-ret));
			return;
		}
	}
}

int cmd_verbs_bench(const char *dev, int argc, char **argv)
{
	return pair_command(dev, argc, argv, bench_server, bench_client);
}
