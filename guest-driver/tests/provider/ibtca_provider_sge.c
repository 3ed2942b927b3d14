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
 * sge_srq_loopback() runs the loopback with the receiver's QP on an SRQ
 * created with max_sge SGE_N (the provider asks for a stride that holds
 * them), the receive of SGE_N pieces posted to the SRQ's slot 1 (a SEND
 * of FIRST_LEN bytes takes slot 0 first), after checking
 * that the device reports max_srq_sge SGE_N and refuses an SRQ of one
 * more with EINVAL; sge-server runs it too.
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
/* The SRQ's first receive, in the receiver's buffer past what is checked. */
#define FIRST_AT 60000
#define FIRST_LEN 8

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
	const char *tag;	/* its steps' prefix */
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;	/* the receiver's on an SRQ */
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
	unsigned int lid;
};

static void sge_end_close(struct sge_end *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->srq)
		ibv_destroy_srq(e->srq);
	close_objects(NULL, NULL, e->mr, NULL, e->cq, e->pd);
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

/*
 * An SRQ of @e's PD whose receive WQEs take SGE_N SGEs, after an SRQ of
 * one SGE more than the device's max_srq_sge (@dev) was refused with
 * EINVAL. 0, or -1.
 */
static int sge_srq_open(struct sge_end *e, const struct ibv_device_attr *dev)
{
	struct ibv_srq_init_attr big = {
		.attr = { .max_wr = 4, .max_sge = dev->max_srq_sge + 1 },
	};
	struct ibv_srq_init_attr init = {
		.attr = { .max_wr = 4, .max_sge = SGE_N },
	};
	struct ibv_srq *refused;
	int err;

	errno = 0;
	refused = ibv_create_srq(e->pd, &big);
	err = errno;
	step("sge_srq_refused", !refused && err == EINVAL,
	     "max_srq_sge=%d; ibv_create_srq(max_sge=%d): %s (errno %d)",
	     dev->max_srq_sge, dev->max_srq_sge + 1,
	     refused ? "created" : strerror(err), err);
	if (refused)
		ibv_destroy_srq(refused);
	e->srq = ibv_create_srq(e->pd, &init);
	step("sge_srq_create", e->srq && init.attr.max_sge >= SGE_N &&
	     dev->max_srq_sge == SGE_N,
	     "max_srq_sge=%d; ibv_create_srq(max_sge=%d): %s max_sge=%u",
	     dev->max_srq_sge, SGE_N, e->srq ? "created" : strerror(errno),
	     init.attr.max_sge);
	return e->srq ? 0 : -1;
}

/*
 * A PD, a CQ, an RC QP of SGE_N SGEs each way (on an SRQ of SGE_N SGEs
 * if @srq) and a registered buffer of @len bytes in @ctx; step @who says
 * what the QP's caps and the device report. 0, or -1.
 */
static int sge_end_open(struct ibv_context *ctx, struct sge_end *e,
			size_t len, const char *who, int srq)
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
	e->tag = "sge";
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
	if (srq && sge_srq_open(e, &dev))
		return -1;
	init.send_cq = e->cq;
	init.recv_cq = e->cq;
	init.srq = e->srq;
	e->qp = ibv_create_qp(e->pd, &init);
	snprintf(name, sizeof(name), "sge_qp_%s", who);
	/* A QP on an SRQ has no receive queue: the SRQ's caps count. */
	ok = e->qp && init.cap.max_send_sge >= SGE_N &&
	     (srq || init.cap.max_recv_sge >= SGE_N) && dev.max_sge >= SGE_N;
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
	char name[32];
	int j, err;

	/* An SRQ's slot 0 takes a SEND first: the pieces go in slot 1. */
	if (e->srq) {
		struct ibv_sge one = { .addr = (uintptr_t)e->buf + FIRST_AT,
				       .length = FIRST_LEN, .lkey = e->mr->lkey };
		struct ibv_recv_wr first = { .wr_id = 0x51, .sg_list = &one,
					     .num_sge = 1 };

		if (ibv_post_srq_recv(e->srq, &first, &bad))
			return -1;
	}
	for (j = 0; j < SGE_N; j++) {
		sge[j].addr = (uintptr_t)e->buf + dst_off(j);
		sge[j].length = dst_len(j);
		sge[j].lkey = e->mr->lkey;
	}
	err = e->srq ? ibv_post_srq_recv(e->srq, &wr, &bad) :
		       ibv_post_recv(e->qp, &wr, &bad);
	snprintf(name, sizeof(name), "%s_post_recv", e->tag);
	step(name, !err, "%d SGEs%s: err=%d", SGE_N, e->srq ? " on the SRQ" : "",
	     err);
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
	static const char *const ops_names[2] = { "send", "write" };
	char names[2][32];
	struct ibv_wc wc;
	uint32_t i;
	int k, o, err, bad_n = 0;

	for (o = 0; o < 2; o++)
		snprintf(names[o], sizeof(names[o]), "%s_%s", e->tag,
			 ops_names[o]);
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
	char name[32];
	struct ibv_wc wc;
	int j, ok, bad = 0, around = 0;

	expected_stream(want);
	snprintf(name, sizeof(name), "%s_recv", e->tag);
	if (sge_wait(e->cq, &wc, name))
		return 1;
	ok = wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	     wc.byte_len == total && wc.wr_id == 0x5e;
	step(name, ok, "status=%d byte_len=%u (want %u)", wc.status,
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
	snprintf(name, sizeof(name), "%s_recv_bytes", e->tag);
	step(name, !bad_at && !around,
	     "%u bytes over %d SGEs %s; %d bytes around them changed",
	     total, SGE_N, bad_at ? "DIFFER" : "in order", around);
	bad += bad_at || around;
	ok = !memcmp(e->buf + WRITE_AT, want, total) &&
	     e->buf[WRITE_AT - 1] == FILL && e->buf[WRITE_AT + total] == FILL;
	snprintf(name, sizeof(name), "%s_write_bytes", e->tag);
	step(name, ok, "%u bytes from %d SGEs at %d %s", total,
	     SGE_N, WRITE_AT, ok ? "in order, fill around" : "DIFFER");
	return bad + !ok;
}

/*
 * A SEND of FIRST_LEN bytes from @s into @r's SRQ's first receive (slot
 * 0), both completed and the bytes landed. 0, or -1.
 */
static int sge_srq_first(struct sge_end *s, struct sge_end *r)
{
	struct ibv_sge one = { .addr = (uintptr_t)s->buf, .length = FIRST_LEN,
			       .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x52, .sg_list = &one, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc swc = {}, rwc = {};
	int i, ok;

	for (i = 0; i < FIRST_LEN; i++)
		s->buf[i] = (unsigned char)(0xa0 + i);
	if (ibv_post_send(s->qp, &wr, &bad) ||
	    sge_wait(s->cq, &swc, "sge_srq_first") ||
	    sge_wait(r->cq, &rwc, "sge_srq_first"))
		return -1;
	ok = swc.status == IBV_WC_SUCCESS && rwc.status == IBV_WC_SUCCESS &&
	     rwc.wr_id == 0x51 && rwc.byte_len == FIRST_LEN &&
	     !memcmp(r->buf + FIRST_AT, s->buf, FIRST_LEN);
	step("sge_srq_first", ok,
	     "SEND of %d bytes into slot 0: status %d, receive wr_id 0x%llx status %d byte_len %u, bytes %s",
	     FIRST_LEN, swc.status, (unsigned long long)rwc.wr_id, rwc.status,
	     rwc.byte_len,
	     memcmp(r->buf + FIRST_AT, s->buf, FIRST_LEN) ? "DIFFER" : "landed");
	return ok ? 0 : -1;
}

/* Both ends in @ctx, the receiver's QP on an SRQ if @srq; failures. */
static int sge_loopback_run(struct ibv_context *ctx, int srq)
{
	const char *tag = srq ? "sge_srq" : "sge";
	struct sge_end r, s;
	char name[32];
	int bad = 1;

	if (sge_end_open(ctx, &r, DST_LEN, srq ? "srq_receiver" : "receiver",
			 srq) ||
	    sge_end_open(ctx, &s, SRC_LEN, srq ? "srq_sender" : "sender", 0))
		goto out;
	r.tag = tag;
	s.tag = tag;
	if (sge_post_recv(&r) || rc_connect(r.qp, s.qp->qp_num, s.lid) ||
	    rc_connect(s.qp, r.qp->qp_num, r.lid) ||
	    (srq && sge_srq_first(&s, &r)))
		goto out;
	bad = sge_send_and_write(&s, (uintptr_t)r.buf + WRITE_AT, r.mr->rkey);
	bad += sge_check(&r);
out:
	snprintf(name, sizeof(name), "%s_loopback", tag);
	step(name, !bad, "%d failed", bad);
	sge_end_close(&s);
	sge_end_close(&r);
	return bad;
}

void sge_loopback(struct ibv_context *ctx)
{
	sge_loopback_run(ctx, 0);
}

int sge_srq_loopback(struct ibv_context *ctx)
{
	return sge_loopback_run(ctx, 1);
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
	int ls, s = -1, bad = 1, srq_bad = 0;

	alarm(600); /* never outlive a client that does not come */
	ctx = open_named("ibtca0");
	ls = sge_listen();
	if (!ctx || ls < 0)
		goto out;
	/* The client waits in the listen backlog meanwhile. */
	srq_bad = sge_srq_loopback(ctx);
	if (sge_end_open(ctx, &e, DST_LEN, "receiver", 0) || sge_post_recv(&e))
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
	bad += srq_bad;
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
	if (!ctx || sge_end_open(ctx, &e, SRC_LEN, "sender", 0))
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
