// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Send and receive WQEs of more than 4 SGEs through libibverbs: RC QPs
 * created with max_send_sge and max_recv_sge SGE_N (the provider asks the
 * kernel for strides that hold them and reports what they hold), a SEND
 * gathering SGE_N pieces of the sender's buffer in reverse order into a
 * receive scattering it over SGE_N pieces of other lengths, and an RDMA
 * WRITE gathering the same pieces into one range of the receiver. The
 * receiver checks every byte of both, and that the bytes around the
 * pieces kept their fill. sge_loopback() runs both ends in one process
 * (two QPs of one context, connected to each other); sge-server and
 * sge-client run them in two hosts, which exchange addresses over TCP.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "provider_test.h"

#define SGE_N 32		/* the device's most, a 1024-byte stride */
#define SGE_PORT "18556"
#define SRC_LEN (SGE_N * 256)
#define DST_LEN 65536
/* Where the WRITE lands in the receiver's buffer; the SEND's pieces lie below. */
#define WRITE_AT 40000
#define FILL 0xee

/* Piece @k of the sender: SGE k, from the buffer's end towards its start. */
static uint32_t src_len(int k)
{
	return 40 + 5 * k;
}

static uint32_t src_off(int k)
{
	return (SGE_N - 1 - k) * 256;
}

/* The bytes the sender's SGEs gather, in order. */
static uint32_t total_len(void)
{
	uint32_t n = 0;
	int k;

	for (k = 0; k < SGE_N; k++)
		n += src_len(k);
	return n;
}

/* Receive SGE @j: lengths other than the sender's, the last the rest. */
static uint32_t dst_len(int j)
{
	uint32_t n = 0;
	int i;

	if (j < SGE_N - 1)
		return 60 + 3 * j;
	for (i = 0; i < SGE_N - 1; i++)
		n += dst_len(i);
	return total_len() - n;
}

static uint32_t dst_off(int j)
{
	return 1024 * j + 8;
}

static unsigned char src_byte(uint32_t i)
{
	return (unsigned char)(i * 13 + 0x3c);
}

/* The stream the sender's SGEs gather, into @out (total_len() bytes). */
static void expected_stream(unsigned char *out)
{
	uint32_t k, i, n = 0;

	for (k = 0; k < SGE_N; k++)
		for (i = 0; i < src_len(k); i++)
			out[n++] = src_byte(src_off(k) + i);
}

struct sge_end {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
	unsigned int lid;
};

static void sge_end_close(struct sge_end *e)
{
	close_objects(e->qp, NULL, e->mr, NULL, e->cq, e->pd);
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

/*
 * A PD, a CQ, an RC QP of SGE_N SGEs each way and a registered buffer of
 * @len bytes in @ctx; step @who says what the QP's caps and the device
 * report. 0, or -1.
 */
static int sge_end_open(struct ibv_context *ctx, struct sge_end *e,
			size_t len, const char *who)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = SGE_N, .max_recv_sge = SGE_N },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	char name[48];
	int ok;

	memset(e, 0, sizeof(*e));
	e->buf = malloc(len);
	e->pd = ibv_alloc_pd(ctx);
	e->cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!e->buf || !e->pd || !e->cq || ibv_query_port(ctx, 1, &port) ||
	    ibv_query_device(ctx, &dev)) {
		step("sge_setup", 0, "%s: buffer, pd, cq or query: %s", who,
		     strerror(errno));
		return -1;
	}
	e->lid = port.lid;
	init.send_cq = e->cq;
	init.recv_cq = e->cq;
	e->qp = ibv_create_qp(e->pd, &init);
	snprintf(name, sizeof(name), "sge_qp_%s", who);
	ok = e->qp && init.cap.max_send_sge >= SGE_N &&
	     init.cap.max_recv_sge >= SGE_N && dev.max_sge >= SGE_N;
	step(name, ok,
	     "max_sge=%d max_sge_rd=%d; ibv_create_qp(max_send_sge=%d max_recv_sge=%d): %s cap.max_send_sge=%u cap.max_recv_sge=%u",
	     dev.max_sge, dev.max_sge_rd, SGE_N, SGE_N,
	     e->qp ? "created" : strerror(errno), init.cap.max_send_sge,
	     init.cap.max_recv_sge);
	if (!ok)
		return -1;
	memset(e->buf, FILL, len);
	e->mr = ibv_reg_mr(e->pd, e->buf, len, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	if (!e->mr) {
		step("sge_setup", 0, "%s: reg_mr: %s", who, strerror(errno));
		return -1;
	}
	return 0;
}

/* The receiver's receive of SGE_N pieces (before it connects). */
static int sge_post_recv(struct sge_end *e)
{
	struct ibv_sge sge[SGE_N];
	struct ibv_recv_wr wr = { .wr_id = 0x5e, .sg_list = sge,
				  .num_sge = SGE_N }, *bad;
	int j, err;

	for (j = 0; j < SGE_N; j++) {
		sge[j].addr = (uintptr_t)e->buf + dst_off(j);
		sge[j].length = dst_len(j);
		sge[j].lkey = e->mr->lkey;
	}
	err = ibv_post_recv(e->qp, &wr, &bad);
	step("sge_post_recv", !err, "%d SGEs: err=%d", SGE_N, err);
	return err ? -1 : 0;
}

/* The next completion of @cq within 30 s: 0, or -1 (a step says why). */
static int sge_wait(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	int i, n = 0;

	for (i = 0; i < 30000 && !n; i++) {
		n = ibv_poll_cq(cq, 1, wc);
		if (!n)
			usleep(1000);
	}
	if (n == 1)
		return 0;
	step(what, 0, "no completion (poll %d)", n);
	return -1;
}

/*
 * The sender's SEND and RDMA WRITE of SGE_N pieces each (to @raddr/@rkey),
 * both completed; the failures counted.
 */
static int sge_send_and_write(struct sge_end *e, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge[SGE_N];
	struct ibv_send_wr wr = { .sg_list = sge, .num_sge = SGE_N,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	static const enum ibv_wr_opcode ops[2] = { IBV_WR_SEND,
						   IBV_WR_RDMA_WRITE };
	static const char *const names[2] = { "sge_send", "sge_write" };
	struct ibv_wc wc;
	uint32_t i;
	int k, o, err, bad_n = 0;

	for (i = 0; i < SRC_LEN; i++)
		e->buf[i] = src_byte(i);
	for (k = 0; k < SGE_N; k++) {
		sge[k].addr = (uintptr_t)e->buf + src_off(k);
		sge[k].length = src_len(k);
		sge[k].lkey = e->mr->lkey;
	}
	for (o = 0; o < 2; o++) {
		wr.wr_id = o;
		wr.opcode = ops[o];
		wr.wr.rdma.remote_addr = ops[o] == IBV_WR_RDMA_WRITE ? raddr : 0;
		wr.wr.rdma.rkey = ops[o] == IBV_WR_RDMA_WRITE ? rkey : 0;
		err = ibv_post_send(e->qp, &wr, &bad);
		if (err) {
			step(names[o], 0, "%d SGEs: post err=%d", SGE_N, err);
			bad_n++;
			continue;
		}
		if (sge_wait(e->cq, &wc, names[o])) {
			bad_n++;
			continue;
		}
		step(names[o], wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)o,
		     "%d SGEs, %u bytes: status=%d (%s)", SGE_N, total_len(),
		     wc.status, ibv_wc_status_str(wc.status));
		bad_n += wc.status != IBV_WC_SUCCESS;
	}
	return bad_n;
}

/*
 * The receiver's checks once the sender's WRITE completed: the receive's
 * completion and its bytes over the SGE_N pieces, the WRITE's bytes, the
 * fill around both. The failures counted.
 */
static int sge_check(struct sge_end *e)
{
	static unsigned char want[SRC_LEN];
	uint32_t total = total_len(), n = 0, i, bad_at = 0;
	struct ibv_wc wc;
	int j, ok, bad = 0, around = 0;

	expected_stream(want);
	if (sge_wait(e->cq, &wc, "sge_recv"))
		return 1;
	ok = wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	     wc.byte_len == total && wc.wr_id == 0x5e;
	step("sge_recv", ok, "status=%d byte_len=%u (want %u)", wc.status,
	     wc.byte_len, total);
	bad += !ok;
	for (j = 0; j < SGE_N; j++) {
		if (memcmp(e->buf + dst_off(j), want + n, dst_len(j)) && !bad_at)
			bad_at = n + 1;
		n += dst_len(j);
		/* The gap up to the next piece kept its fill. */
		for (i = dst_off(j) + dst_len(j); i < dst_off(j + 1) && i < WRITE_AT; i++)
			around += e->buf[i] != FILL;
	}
	for (i = 0; i < dst_off(0); i++)
		around += e->buf[i] != FILL;
	step("sge_recv_bytes", !bad_at && !around,
	     "%u bytes over %d SGEs %s; %d bytes around them changed",
	     total, SGE_N, bad_at ? "DIFFER" : "in order", around);
	bad += bad_at || around;
	ok = !memcmp(e->buf + WRITE_AT, want, total) &&
	     e->buf[WRITE_AT - 1] == FILL && e->buf[WRITE_AT + total] == FILL;
	step("sge_write_bytes", ok, "%u bytes from %d SGEs at %d %s", total,
	     SGE_N, WRITE_AT, ok ? "in order, fill around" : "DIFFER");
	return bad + !ok;
}

void sge_loopback(struct ibv_context *ctx)
{
	struct sge_end r, s;
	int bad = 1;

	if (sge_end_open(ctx, &r, DST_LEN, "receiver") ||
	    sge_end_open(ctx, &s, SRC_LEN, "sender") || sge_post_recv(&r) ||
	    rc_connect(r.qp, s.qp->qp_num, s.lid) ||
	    rc_connect(s.qp, r.qp->qp_num, r.lid))
		goto out;
	bad = sge_send_and_write(&s, (uintptr_t)r.buf + WRITE_AT, r.mr->rkey);
	bad += sge_check(&r);
out:
	step("sge_loopback", !bad, "%d failed", bad);
	sge_end_close(&s);
	sge_end_close(&r);
}

/* A TCP socket listening on SGE_PORT, or -1. */
static int sge_listen(void)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *ai;
	int s, one = 1;

	if (getaddrinfo(NULL, SGE_PORT, &hints, &ai))
		return -1;
	s = socket(ai->ai_family, ai->ai_socktype, 0);
	if (s >= 0 &&
	    (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	     bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 1))) {
		close(s);
		s = -1;
	}
	freeaddrinfo(ai);
	return s;
}

/* One line: LID, QP number, address, R_Key. */
static int sge_send_peer(int s, const struct sge_end *e, uint64_t addr)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "%u %u %llu %u\n", e->lid,
			 e->qp->qp_num, (unsigned long long)addr, e->mr->rkey);

	return write(s, line, n) == n ? 0 : -1;
}

/* Reads one line of at most @size - 1 bytes from @s into @line. */
static int sge_read_line(int s, char *line, size_t size)
{
	size_t n = 0;

	while (n + 1 < size && read(s, line + n, 1) == 1)
		if (line[n++] == '\n')
			break;
	line[n] = '\0';
	return n ? 0 : -1;
}

static int sge_recv_peer(int s, unsigned int *lid, unsigned int *qpn,
			 unsigned long long *addr, unsigned int *rkey)
{
	char line[96];

	return sge_read_line(s, line, sizeof(line)) ||
	       sscanf(line, "%u %u %llu %u", lid, qpn, addr, rkey) != 4 ? -1 : 0;
}

int sge_server(void)
{
	unsigned int lid, qpn, rkey;
	unsigned long long addr;
	struct ibv_context *ctx;
	struct sge_end e = {};
	char line[16];
	int ls, s = -1, bad = 1;

	alarm(600); /* never outlive a client that does not come */
	ctx = open_named("ibtca0");
	ls = sge_listen();
	if (!ctx || ls < 0 || sge_end_open(ctx, &e, DST_LEN, "receiver") ||
	    sge_post_recv(&e))
		goto out;
	printf("sge server: lid %u qpn %u, waiting on port %s\n", e.lid,
	       e.qp->qp_num, SGE_PORT);
	fflush(stdout);
	s = accept(ls, NULL, NULL);
	if (s < 0 || sge_send_peer(s, &e, (uintptr_t)e.buf + WRITE_AT) ||
	    sge_recv_peer(s, &lid, &qpn, &addr, &rkey) ||
	    rc_connect(e.qp, qpn, lid) || write(s, "ready\n", 6) != 6) {
		step("sge_server_setup", 0, "exchange or connect: %s",
		     strerror(errno));
		goto out;
	}
	/* The client says "done" once its WRITE completed. */
	if (sge_read_line(s, line, sizeof(line)) || strcmp(line, "done\n")) {
		step("sge_server_setup", 0, "client said '%s'", line);
		goto out;
	}
	bad = sge_check(&e);
	if (write(s, bad ? "bad\n" : "ok\n", bad ? 4 : 3) < 0)
		bad++;
out:
	if (s >= 0)
		close(s);
	if (ls >= 0)
		close(ls);
	sge_end_close(&e);
	if (ctx)
		ibv_close_device(ctx);
	printf("IBTCA-PROVIDER result %d failed\n", bad);
	return bad ? 1 : 0;
}

int sge_client(const char *server)
{
	unsigned int lid, qpn, rkey;
	unsigned long long addr;
	struct ibv_context *ctx;
	struct sge_end e = {};
	char line[16] = "";
	int s = -1, bad = 1;

	ctx = open_named("ibtca0");
	if (!ctx || sge_end_open(ctx, &e, SRC_LEN, "sender"))
		goto out;
	s = tcp_dial(server, SGE_PORT);
	if (s < 0 || sge_recv_peer(s, &lid, &qpn, &addr, &rkey) ||
	    sge_send_peer(s, &e, (uintptr_t)e.buf) ||
	    rc_connect(e.qp, qpn, lid) ||
	    sge_read_line(s, line, sizeof(line)) || strcmp(line, "ready\n")) {
		step("sge_client_setup", 0, "%s:%s exchange or connect: %s",
		     server, SGE_PORT, strerror(errno));
		goto out;
	}
	bad = sge_send_and_write(&e, addr, rkey);
	if (write(s, "done\n", 5) != 5 || sge_read_line(s, line, sizeof(line)))
		line[0] = '\0';
	line[strcspn(line, "\n")] = '\0';
	step("sge_server_says", !strcmp(line, "ok"), "bytes %s",
	     line[0] ? line : "(no answer)");
	bad += strcmp(line, "ok") != 0;
out:
	if (s >= 0)
		close(s);
	sge_end_close(&e);
	if (ctx)
		ibv_close_device(ctx);
	printf("IBTCA-PROVIDER result %d failed\n", bad);
	return bad ? 1 : 0;
}
