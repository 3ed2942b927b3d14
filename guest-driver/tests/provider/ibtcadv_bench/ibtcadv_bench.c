// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ibtcadv-bench: DRDMA through the ibtca direct verbs (ibtcadv.h) against
 * ordinary RDMA WRITE and READ work requests (ibv_post_send), between two
 * guests over one RC QP pair (docs/drdma-verbs.md, "From libibverbs").
 *
 *   ibtcadv-bench server                           on one guest
 *   ibtcadv-bench client HOST [MAX_ITERS [SECONDS]] on the other
 *
 * The two exchange LID, QP number, buffer address and R_Key over TCP (as
 * ibtcadv-test does) and connect at the port's active MTU. The server's
 * buffer has a READ source (a fixed pattern) and a WRITE target; it only
 * answers. The client measures, for each size (64 B to 64 KiB), each
 * operation (WRITE, READ) and each path (rdma: ibv_post_send with a
 * registered buffer; drdma: ibtcadv_* through the window, one range per
 * 4 KiB):
 *
 *   QD 1: one transfer alone, from its first copy or store to the last
 *   completion polled (a READ: to its last byte copied or loaded out):
 *   median and 99th percentile;
 *   rate: rounds of DEPTH transfers in flight (all posted, then all
 *   completed), transfers per second of the rounds' time.
 *
 * Each cell runs MAX_ITERS (default 200) transfers or rounds, or fewer
 * once SECONDS (default 1) have passed, at least 3. Every transfer's bytes
 * are checked after it, outside the timed part: a WRITE's by an ordinary
 * RDMA READ of the server's memory it wrote (each round stores a new
 * pattern), a READ's against the server's pattern (the destination is
 * cleared before each round, the source offset moves between rounds).
 *
 * Output, one line per cell:
 *   DVBENCH WINDOW PATH OP SIZE MED_US P99_US MSG_S DEPTH QD1_N RATE_N
 * (WINDOW: mapped or trapped, the client's device), and a final
 * "DVBENCH verified N transfers", or "DVBENCH-FAIL ..." and exit 1.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/ibtcadv.h>
#include <infiniband/verbs.h>

#include "../ibtcadv/ibtcadv_peer.h"

#define PORT "18557"
#define PAGE 4096
#define MAX_SIZE (64 * 1024)
#define MAX_DEPTH 8
#define REGION (MAX_DEPTH * MAX_SIZE)	/* READ source, WRITE target */
#define MAX_RANGES 32
#define MIN_ITERS 3
#define POLL_SECONDS 60
#define READ_SEED 0x11

/* Server: READ source at 0, WRITE target at REGION. */
static unsigned char remote_buf[2 * REGION] __attribute__((aligned(PAGE)));
/* Client: the ordinary path's buffer, then where WRITEs are read back. */
static unsigned char local_buf[2 * REGION] __attribute__((aligned(PAGE)));
static unsigned char src[REGION], dst[REGION];
static double samples[100000];

static const uint32_t sizes[] = { 64, 256, 1024, 4096, 16384, 65536 };

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint16_t lid;
	enum ibv_mtu mtu;
	int rd_atom;
};

/* The client's state: its end, the server's buffer, its ranges. */
struct bench {
	struct end e;
	struct peer p;
	struct ibtcadv_range *r[MAX_RANGES];
	int nranges;
	const char *window;
	unsigned long max_iters;
	double seconds;
	unsigned long verified;
	unsigned int round;
};

static void die(const char *fmt, ...)
{
	va_list ap;

	printf("DVBENCH-FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The byte at offset @i of a buffer filled with @seed. */
static unsigned char pattern(size_t i, unsigned int seed)
{
	return (unsigned char)(i * 13 + seed + (i >> 8) + (seed >> 8));
}

static void fill(unsigned char *b, size_t len, size_t off, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = pattern(off + i, seed);
}

static void end_open(struct end *e, void *mem, size_t len)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 2 * MAX_RANGES, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_device_attr dev;
	struct ibv_port_attr port;

	memset(e, 0, sizeof(*e));
	e->ctx = open_ibtca0();
	if (!e->ctx || ibv_query_port(e->ctx, 1, &port) ||
	    ibv_query_device(e->ctx, &dev))
		die("setup: no ibtca0: %s", strerror(errno));
	e->lid = port.lid;
	e->mtu = port.active_mtu;
	e->rd_atom = dev.max_qp_rd_atom < dev.max_qp_init_rd_atom ?
		     dev.max_qp_rd_atom : dev.max_qp_init_rd_atom;
	if (e->rd_atom > 16)
		e->rd_atom = 16;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 4 * MAX_RANGES, NULL, NULL, 0);
	if (!e->pd || !e->cq)
		die("setup: pd or cq: %s", strerror(errno));
	init.send_cq = e->cq;
	init.recv_cq = e->cq;
	e->qp = ibv_create_qp(e->pd, &init);
	e->mr = ibv_reg_mr(e->pd, mem, len, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!e->qp || !e->mr)
		die("setup: qp or mr: %s", strerror(errno));
}

/* INIT, RTR and RTS towards @p at the port's MTU, READs in flight. */
static void connect_qp(struct end *e, const struct peer *p)
{
	const char *state = peer_connect_qp(e->qp, p, e->mtu, e->rd_atom);

	if (state)
		die("setup: %s: %s", state, strerror(errno));
}

static void exchange(int s, const struct end *e, const void *mem,
		     struct peer *p)
{
	if (peer_exchange(s, e->lid, e->qp, mem, e->mr->rkey, p))
		die("setup: %s: no peer line (%s)", __func__, strerror(errno));
}

/* @n successful completions of the client's CQ. */
static void complete(struct bench *b, int n, const char *what)
{
	struct ibv_wc wc[16];
	time_t end = time(NULL) + POLL_SECONDS;
	int got, i;

	while (n > 0) {
		got = ibv_poll_cq(b->e.cq, n < 16 ? n : 16, wc);
		if (got < 0)
			die("%s: ibv_poll_cq %d", what, got);
		for (i = 0; i < got; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				die("%s: wr_id=%llu status=%d (%s)", what,
				    (unsigned long long)wc[i].wr_id,
				    wc[i].status,
				    ibv_wc_status_str(wc[i].status));
		n -= got;
		if (!got && time(NULL) > end)
			die("%s: no completion in %d s", what, POLL_SECONDS);
	}
}

/* An ordinary RDMA WRITE or READ of @len between @local and @remote. */
static void post_rdma(struct bench *b, int write, void *local, uint64_t remote,
		      uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)local, .length = len, .lkey = b->e.mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1,
		.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = remote, .rkey = b->p.rkey },
	}, *bad;
	int ret = ibv_post_send(b->e.qp, &wr, &bad);

	if (ret)
		die("ibv_post_send: %s", strerror(ret));
}

/* Where transfer @t of the current round goes (WRITE) or comes from. */
static uint32_t slot(const struct bench *b, uint32_t size, int depth, int t)
{
	return ((b->round * depth + t) % (REGION / size)) * size;
}

/*
 * One round: @depth transfers of @size, all in flight, then all complete.
 * WRITE sources are src + t * size; READ destinations dst + t * size.
 */
static void round_rdma(struct bench *b, int write, uint32_t size, int depth)
{
	int t;

	for (t = 0; t < depth; t++) {
		unsigned char *l = local_buf + (size_t)t * size;
		uint32_t off = slot(b, size, depth, t);

		if (write) {
			memcpy(l, src + (size_t)t * size, size);
			post_rdma(b, 1, l, b->p.addr + REGION + off, size);
		} else {
			post_rdma(b, 0, l, b->p.addr + off, size);
		}
	}
	complete(b, depth, write ? "rdma write" : "rdma read");
	if (!write)
		memcpy(dst, local_buf, (size_t)depth * size);
}

static void round_drdma(struct bench *b, int write, uint32_t size, int depth)
{
	uint32_t chunks = (size + PAGE - 1) / PAGE, c, len;
	int t, ret, n = 0;

	for (t = 0; t < depth; t++) {
		uint32_t off = slot(b, size, depth, t);

		for (c = 0; c < chunks; c++, n++) {
			struct ibtcadv_range *r = b->r[n];

			len = size - c * PAGE < PAGE ? size - c * PAGE : PAGE;
			r->remote_addr = b->p.addr + off + c * PAGE +
					 (write ? REGION : 0);
			if (!write) {
				ret = ibtcadv_post_read(r, len, n);
				if (ret)
					die("ibtcadv_post_read: %s",
					    strerror(ret));
				continue;
			}
			ret = ibtcadv_post_write(r, len, n);
			if (!ret)
				ret = ibtcadv_store(r, 0, src + (size_t)t * size +
						    c * PAGE, len);
			if (!ret)
				ret = ibtcadv_commit(r, len);
			if (ret)
				die("ibtcadv write: %s", strerror(ret));
		}
	}
	/* READ: the ranges' bytes in posting order (the device's order). */
	for (n = 0, t = 0; !write && t < depth; t++) {
		for (c = 0; c < chunks; c++, n++) {
			len = size - c * PAGE < PAGE ? size - c * PAGE : PAGE;
			ret = ibtcadv_load(b->r[n], 0, dst + (size_t)t * size +
					   c * PAGE, len);
			if (ret)
				die("ibtcadv_load: %s", strerror(ret));
		}
	}
	complete(b, depth * chunks, write ? "drdma write" : "drdma read");
}

/* Checks the round's bytes where they arrived. */
static void verify(struct bench *b, int write, uint32_t size, int depth,
		   const char *path)
{
	unsigned char *back = local_buf + REGION;
	int t;
	size_t i;

	if (write) {
		for (t = 0; t < depth; t++)
			post_rdma(b, 0, back + (size_t)t * size, b->p.addr +
				  REGION + slot(b, size, depth, t), size);
		complete(b, depth, "read back");
		if (memcmp(back, src, (size_t)depth * size))
			die("%s WRITE %u: the server's memory differs from the bytes stored (round %u)",
			    path, size, b->round);
	} else {
		for (t = 0; t < depth; t++)
			for (i = 0; i < size; i++)
				if (dst[(size_t)t * size + i] !=
				    pattern(slot(b, size, depth, t) + i,
					    READ_SEED))
					die("%s READ %u: byte %zu of transfer %d differs (round %u)",
					    path, size, i, t, b->round);
	}
	b->verified += depth;
}

/* Runs rounds of @depth until the cell's budget; returns their count. */
static unsigned long cell(struct bench *b, int drdma, int write, uint32_t size,
			  int depth, double *total_us, int sample)
{
	double start = now_us(), t0;
	unsigned long i;
	int t;

	*total_us = 0;
	for (i = 0; i < b->max_iters && i < sizeof(samples) / sizeof(*samples) &&
	     (i < MIN_ITERS || now_us() - start < b->seconds * 1e6); i++) {
		b->round++;
		for (t = 0; t < depth; t++)
			fill(src + (size_t)t * size, size, 0, b->round * 8 + t);
		memset(dst, 0, (size_t)depth * size);
		t0 = now_us();
		if (drdma)
			round_drdma(b, write, size, depth);
		else
			round_rdma(b, write, size, depth);
		t0 = now_us() - t0;
		*total_us += t0;
		if (sample)
			samples[i] = t0;
		verify(b, write, size, depth, drdma ? "drdma" : "rdma");
	}
	return i;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void measure(struct bench *b, int drdma, int write, uint32_t size)
{
	uint32_t chunks = (size + PAGE - 1) / PAGE;
	int depth = b->nranges / chunks;
	unsigned long n, rounds, p99;
	double total, rate_us;

	if (depth > MAX_DEPTH)
		depth = MAX_DEPTH;
	if (depth < 1)
		die("%u bytes need %u ranges; %d open", size, chunks,
		    b->nranges);
	n = cell(b, drdma, write, size, 1, &total, 1);
	rounds = cell(b, drdma, write, size, depth, &rate_us, 0);
	qsort(samples, n, sizeof(*samples), by_value);
	p99 = (n * 99 + 99) / 100 - 1;
	printf("DVBENCH %s %s %s %u %.1f %.1f %.0f %d %lu %lu\n", b->window,
	       drdma ? "drdma" : "rdma", write ? "write" : "read", size,
	       samples[n / 2], samples[p99],
	       rounds * depth / (rate_us / 1e6), depth, n, rounds);
	fflush(stdout);
}

static int server(void)
{
	struct end e;
	struct peer p;
	char done[16];
	int s;

	alarm(1800);
	fill(remote_buf, REGION, 0, READ_SEED);
	end_open(&e, remote_buf, sizeof(remote_buf));
	s = tcp(NULL, PORT);
	if (s < 0)
		die("setup: listen: %s", strerror(errno));
	exchange(s, &e, remote_buf, &p);
	connect_qp(&e, &p);
	printf("DVBENCH %s lid=%u qpn=%u mtu=%d rd_atom=%d\n", __func__, e.lid,
	       e.qp->qp_num, 128 << e.mtu, e.rd_atom);
	fflush(stdout);
	/* The client's "done" (or its end): nothing else to do here. */
	if (read(s, done, sizeof(done)) < 0)
		die("%s: %s", __func__, strerror(errno));
	close(s);
	return 0;
}

static int client(const char *host, unsigned long max_iters, double seconds)
{
	struct ibtcadv_window w;
	struct bench b = { .max_iters = max_iters, .seconds = seconds };
	int s, ret, i, op, path;

	alarm(1800);
	end_open(&b.e, local_buf, sizeof(local_buf));
	s = tcp(host, PORT);
	if (s < 0)
		die("setup: connect to %s: %s", host, strerror(errno));
	exchange(s, &b.e, local_buf, &b.p);
	connect_qp(&b.e, &b.p);
	ret = ibtcadv_query_window(b.e.ctx, &w);
	if (ret || w.range_size != PAGE)
		die("window: %s, range_size %u", strerror(ret), w.range_size);
	b.window = w.mode == IBTCADV_WINDOW_MAPPED ? "mapped" : "trapped";
	b.nranges = w.ranges < MAX_RANGES ? w.ranges : MAX_RANGES;
	if (w.pmbs && (int)w.pmbs < b.nranges)
		b.nranges = w.pmbs;
	/* As many as are free (another context may hold some): 16 at least. */
	for (i = 0; i < b.nranges; i++) {
		b.r[i] = ibtcadv_range_open(b.e.qp, b.p.addr, b.p.rkey);
		if (!b.r[i] && (errno != ENOSPC || i < MAX_SIZE / PAGE))
			die("range %d: %s", i, strerror(errno));
		if (!b.r[i])
			b.nranges = i;
	}
	printf("DVBENCH %s window=%s ranges=%u pmbs=%u open=%d mtu=%d rd_atom=%d\n",
	       __func__, b.window, w.ranges, w.pmbs, b.nranges, 128 << b.e.mtu,
	       b.e.rd_atom);
	printf("# DVBENCH window path op size med_us p99_us msg_s depth qd1_n rate_n\n");
	fflush(stdout);
	for (i = 0; i < (int)(sizeof(sizes) / sizeof(*sizes)); i++)
		for (op = 1; op >= 0; op--)
			for (path = 0; path < 2; path++)
				measure(&b, path, op, sizes[i]);
	for (i = 0; i < b.nranges; i++)
		ibtcadv_range_close(b.r[i]);
	if (write(s, "done\n", 5) != 5)
		die("%s: %s", __func__, strerror(errno));
	close(s);
	printf("DVBENCH verified %lu transfers\n", b.verified);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "server"))
		return server();
	if (argc >= 3 && argc <= 5 && !strcmp(argv[1], "client"))
		return client(argv[2], argc > 3 ? strtoul(argv[3], NULL, 0) : 200,
			      argc > 4 ? strtod(argv[4], NULL) : 1);
	fprintf(stderr,
		"usage: ibtcadv-bench server | client HOST [MAX_ITERS [SECONDS]]\n");
	return 2;
}
