// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ibtcadv-test: the ibtca direct verbs (ibtcadv.h) between two guests,
 * with libibverbs and ibtcadv only.
 *
 *   ibtcadv-test server          on one guest (its buffer: 3 pages)
 *   ibtcadv-test client HOST     on the other
 *
 * The two exchange LID, QP number, address and R_Key over TCP and connect
 * RC QPs at path MTU 1024. The client opens a window range for its QP and
 * the server's buffer, DRDMA WRITEs 4096 bytes it stores into the range
 * (page 1 of the server's buffer), DRDMA READs the server's page 0 into the
 * range and loads it (4 responses, in two loads), and checks those bytes.
 * Then a hostile context of the same process: a second context opens a
 * range of its own, and posts a DRDMA WRITE naming the first context's
 * range (busy, its WRITE waiting for stores) to a QP looped back to its
 * own buffer. That work request completes IBV_WC_LOC_PROT_ERR and the
 * second context's buffer keeps its zeros, while the first context's
 * WRITE, filled after it, lands in the server's page 2. The server checks
 * pages 1 and 2. Each step prints "IBTCADV <step> PASS|FAIL <detail>".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/ibtcadv.h>
#include <infiniband/verbs.h>

#include "ibtcadv_peer.h"

#define PORT "18556"
#define PAGE 4096
#define SMALL 256
#define POLL_SECONDS 60

static unsigned char buf[3 * PAGE] __attribute__((aligned(PAGE)));
static int failed;

static void step(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	printf("IBTCADV %s %s ", name, ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	failed |= !ok;
}

static void fill(unsigned char *b, size_t len, unsigned char seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = (unsigned char)(i * 13 + seed + (i >> 8));
}

/* One RC end: a context, PD, CQ, QP and a region over @mem. */
struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint16_t lid;
};

static int end_open(struct end *e, struct ibv_context *ctx, void *mem,
		    size_t len)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_port_attr port;

	memset(e, 0, sizeof(*e));
	e->ctx = ctx ? ctx : open_ibtca0();
	if (!e->ctx || ibv_query_port(e->ctx, 1, &port))
		return -1;
	e->lid = port.lid;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	if (!e->pd || !e->cq)
		return -1;
	init.send_cq = e->cq;
	init.recv_cq = e->cq;
	e->qp = ibv_create_qp(e->pd, &init);
	e->mr = ibv_reg_mr(e->pd, mem, len, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	return e->qp && e->mr ? 0 : -1;
}

/* INIT, RTR and RTS towards @p (path MTU 1024: a 4096-byte READ is 4). */
static int connect_qp(struct ibv_qp *qp, const struct peer *p)
{
	return peer_connect_qp(qp, p, IBV_MTU_1024, 1) ? -1 : 0;
}

static int exchange(int s, const struct end *e, struct peer *p)
{
	return peer_exchange(s, e->lid, e->qp, buf, e->mr->rkey, p);
}

/* One completion of @cq within POLL_SECONDS; -1 if none came. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	time_t end = time(NULL) + POLL_SECONDS;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n == 1 ? 0 : -1;
	} while (time(NULL) < end);
	return -1;
}

/* Step @name: one completion of @cq with @wr_id, @status and @opcode. */
static void expect_wc(const char *name, struct ibv_cq *cq, uint64_t wr_id,
		      enum ibv_wc_status status, enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc;

	if (poll_one(cq, &wc)) {
		step(name, 0, "no completion in %d s", POLL_SECONDS);
		return;
	}
	step(name, wc.wr_id == wr_id && wc.status == status &&
	     (status != IBV_WC_SUCCESS || wc.opcode == opcode),
	     "wr_id=%llu status=%d (%s) opcode=%d", (unsigned long long)wc.wr_id,
	     wc.status, ibv_wc_status_str(wc.status), wc.opcode);
}

static int server(void)
{
	unsigned char want[PAGE];
	struct end e;
	struct peer p;
	char done[16] = "";
	int s, ok, i;

	alarm(900);
	memset(buf, 0, sizeof(buf));
	fill(buf, PAGE, 0x11);
	if (end_open(&e, NULL, buf, sizeof(buf))) {
		step("server_setup", 0, "%s", strerror(errno));
		return 1;
	}
	s = tcp(NULL, PORT);
	if (s < 0 || exchange(s, &e, &p) || connect_qp(e.qp, &p)) {
		step("server_setup", 0, "exchange or connect: %s",
		     strerror(errno));
		return 1;
	}
	step("server_setup", 1, "lid=%u qpn=%u", e.lid, e.qp->qp_num);
	if (read(s, done, sizeof(done) - 1) <= 0)
		done[0] = 0;
	fill(want, PAGE, 0x77);
	ok = !memcmp(buf + PAGE, want, PAGE);
	step("server_write_landed", ok, "page 1: %d bytes as stored", ok ? PAGE : 0);
	fill(want, SMALL, 0x99);
	ok = !memcmp(buf + 2 * PAGE, want, SMALL);
	for (i = 2 * PAGE + SMALL; i < 3 * PAGE; i++)
		ok &= !buf[i];
	step("server_owner_write_landed", ok, "page 2: %d bytes, rest zero",
	     SMALL);
	if (write(s, failed ? "bad\n" : "ok\n", failed ? 4 : 3) < 0)
		failed = 1;
	close(s);
	return failed;
}

/*
 * A second context of this process names @victim's range (@victim's
 * WRITE waiting for its stores) in a DRDMA WRITE of its own QP, looped
 * back to its own buffer.
 */
static void hostile(struct ibtcadv_range *victim)
{
	static unsigned char mine[PAGE] __attribute__((aligned(PAGE)));
	struct ibtcadv_range *own, forged;
	struct end a, b;
	struct peer pa, pb;
	int i, zero = 1;

	if (end_open(&a, NULL, mine, sizeof(mine)) ||
	    end_open(&b, a.ctx, mine, sizeof(mine))) {
		step("hostile_setup", 0, "%s", strerror(errno));
		return;
	}
	pa = (struct peer){ .lid = a.lid, .qpn = a.qp->qp_num };
	pb = (struct peer){ .lid = b.lid, .qpn = b.qp->qp_num };
	own = ibtcadv_range_open(a.qp, (uintptr_t)mine, a.mr->rkey);
	if (connect_qp(a.qp, &pb) || connect_qp(b.qp, &pa) || !own) {
		step("hostile_setup", 0, "loopback or range: %s",
		     strerror(errno));
		return;
	}
	step("hostile_setup", own->arr != victim->arr,
	     "own range %u, the other context's %u", own->arr, victim->arr);
	/* Its own range submitted, the other context's named in the WQE. */
	forged = *own;
	forged.arr = victim->arr;
	i = ibtcadv_post_write(&forged, SMALL, 201);
	step("hostile_post", !i, "ibtcadv_post_write: %s", strerror(i));
	expect_wc("hostile_refused", a.cq, 201, IBV_WC_LOC_PROT_ERR, 0);
	for (i = 0; i < PAGE; i++)
		zero &= !mine[i];
	step("hostile_target_untouched", zero, "%d bytes of its buffer zero",
	     PAGE);
	ibtcadv_range_close(own);
}

static int client(const char *host)
{
	unsigned char want[PAGE], got[PAGE], small[SMALL];
	struct ibtcadv_window w;
	struct ibtcadv_range *r;
	char verdict[16] = "";
	struct end e;
	struct peer p;
	int s, ret;

	alarm(900);
	if (end_open(&e, NULL, buf, sizeof(buf))) {
		step("client_setup", 0, "%s", strerror(errno));
		return 1;
	}
	s = tcp(host, PORT);
	if (s < 0 || exchange(s, &e, &p) || connect_qp(e.qp, &p)) {
		step("client_setup", 0, "exchange or connect: %s",
		     strerror(errno));
		return 1;
	}
	step("client_setup", 1, "lid=%u qpn=%u peer lid=%u qpn=%u", e.lid,
	     e.qp->qp_num, p.lid, p.qpn);
	ret = ibtcadv_query_window(e.ctx, &w);
	step("window", !ret && w.ranges && w.range_size == PAGE,
	     "ranges=%u range_size=%u mode=%u pmbs=%u", w.ranges,
	     w.range_size, w.mode, w.pmbs);
	r = ibtcadv_range_open(e.qp, p.addr + PAGE, p.rkey);
	step("range_open", r != NULL, "arr=%u size=%u", r ? r->arr : 0,
	     r ? r->size : 0);
	if (!r)
		return 1;

	/* WRITE: 4096 stored bytes to the server's page 1. */
	fill(want, PAGE, 0x77);
	ret = ibtcadv_post_write(r, PAGE, 101);
	if (!ret)
		ret = ibtcadv_store(r, 0, want, PAGE);
	if (!ret)
		ret = ibtcadv_commit(r, PAGE);
	step("write_posted", !ret, "%s", strerror(ret));
	expect_wc("write_completion", e.cq, 101, IBV_WC_SUCCESS,
		  IBV_WC_RDMA_WRITE);

	/* READ: the server's page 0 into the range, loaded in two parts. */
	r->remote_addr = p.addr;
	ret = ibtcadv_post_read(r, PAGE, 102);
	if (!ret)
		ret = ibtcadv_load(r, 0, got, 1000);
	if (!ret)
		ret = ibtcadv_load(r, 1000, got + 1000, PAGE - 1000);
	step("read_loaded", !ret, "%s", strerror(ret));
	fill(want, PAGE, 0x11);
	step("read_data", !memcmp(got, want, PAGE), "%d bytes as the server's",
	     PAGE);
	expect_wc("read_completion", e.cq, 102, IBV_WC_SUCCESS,
		  IBV_WC_RDMA_READ);

	/* The range's owner WRITEs 256 bytes, named meanwhile by another. */
	r->remote_addr = p.addr + 2 * PAGE;
	ret = ibtcadv_post_write(r, SMALL, 103);
	step("owner_write_posted", !ret, "%s", strerror(ret));
	hostile(r);
	fill(small, SMALL, 0x99);
	ret = ibtcadv_store(r, 0, small, SMALL);
	if (!ret)
		ret = ibtcadv_commit(r, SMALL);
	step("owner_write_stored", !ret, "%s", strerror(ret));
	expect_wc("owner_write_completion", e.cq, 103, IBV_WC_SUCCESS,
		  IBV_WC_RDMA_WRITE);
	ret = ibtcadv_range_close(r);
	step("range_close", !ret, "%s", strerror(ret));

	if (write(s, "done\n", 5) != 5 || read(s, verdict, 15) <= 0)
		verdict[0] = 0;
	step("server_says", !strncmp(verdict, "ok", 2), "%s",
	     verdict[0] ? verdict : "nothing");
	close(s);
	return failed;
}

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (argc == 2 && !strcmp(argv[1], "server"))
		ret = server();
	else if (argc == 3 && !strcmp(argv[1], "client"))
		ret = client(argv[2]);
	else {
		fprintf(stderr, "usage: ibtcadv-test server | client HOST\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("IBTCADV elapsed %.1f s\n", (double)(t1.tv_sec - t0.tv_sec) +
	       (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return ret;
}
