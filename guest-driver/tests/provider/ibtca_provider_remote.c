// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * An R_Key violation between two hosts through libibverbs and the ibtca
 * provider. The server registers a buffer for remote writes and sends its
 * LID, QP number, address and R_Key over TCP (port IBTCA_BAD_RKEY_PORT);
 * the client connects an RC QP to it, RDMA WRITEs with a wrong R_Key and
 * expects IBV_WC_REM_ACCESS_ERR, then its QP in the error state:
 * ibv_query_qp says IBV_QPS_ERR and a later WRITE (with the right R_Key)
 * is flushed with IBV_WC_WR_FLUSH_ERR. Then it tells the server, which
 * checks that not one byte of its buffer changed and that its own QP,
 * the responder that NAKed the WRITE, is in the error state too (IBA
 * 9.9.3.1: a remote access error is a class C responder error).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "provider_test.h"

#define IBTCA_BAD_RKEY_PORT "18555"
#define BUF_LEN 4096
/* Seconds the client tries to reach a server that is still starting. */
#define CONNECT_TRIES 180

/* What each side's QP needs of the other: one text line over TCP. */
struct peer {
	unsigned int lid, qpn, rkey;
	unsigned long long addr;
};

struct rc_end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned int lid;
};

static unsigned char buf[BUF_LEN];

/* Opens ibtca0 and creates a PD, a CQ, an RC QP and @buf's region. */
static int rc_end_open(struct rc_end *e, int access)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_port_attr port;

	memset(e, 0, sizeof(*e));
	e->ctx = open_named("ibtca0");
	if (!e->ctx)
		return -1;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	if (!e->pd || !e->cq || ibv_query_port(e->ctx, 1, &port))
		goto fail;
	init.send_cq = e->cq;
	init.recv_cq = e->cq;
	e->qp = ibv_create_qp(e->pd, &init);
	e->mr = ibv_reg_mr(e->pd, buf, sizeof(buf), access);
	e->lid = port.lid;
	if (e->qp && e->mr)
		return 0;
fail:
	step("remote_setup", 0, "pd, cq, qp or region: %s", strerror(errno));
	return -1;
}

static void rc_end_close(struct rc_end *e)
{
	close_objects(e->qp, NULL, e->mr, NULL, e->cq, e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
}

/* The state ibv_query_qp reports for @qp, -1 if it fails; @cur: its current state. */
static int qp_state(struct ibv_qp *qp, int *cur)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	*cur = -1;
	if (ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_CUR_STATE, &init))
		return -1;
	*cur = attr.cur_qp_state;
	return attr.qp_state;
}

/* Step @name: ibv_query_qp reports @qp in IBV_QPS_ERR; 1 if not. */
static int expect_qp_err(const char *name, struct ibv_qp *qp)
{
	int cur, state = qp_state(qp, &cur);
	int ok = state == IBV_QPS_ERR && cur == IBV_QPS_ERR;

	step(name, ok, "ibv_query_qp: qp_state=%d cur_qp_state=%d (IBV_QPS_ERR=%d)",
	     state, cur, IBV_QPS_ERR);
	return !ok;
}

static int send_peer(FILE *f, const struct rc_end *e)
{
	return fprintf(f, "%u %u %llu %u\n", e->lid, e->qp->qp_num,
		       (unsigned long long)(uintptr_t)buf, e->mr->rkey) < 0 ||
	       fflush(f) ? -1 : 0;
}

static int recv_peer(FILE *f, struct peer *p)
{
	return fscanf(f, "%u %u %llu %u", &p->lid, &p->qpn, &p->addr,
		      &p->rkey) == 4 ? 0 : -1;
}

/*
 * A read and a write stream on socket @s (a stream on a socket cannot
 * turn from reading to writing: that needs a seek). Closes @s on failure.
 */
static int streams(int s, FILE **in, FILE **out)
{
	int d = s < 0 ? -1 : dup(s);

	*in = s < 0 ? NULL : fdopen(s, "r");
	*out = d < 0 ? NULL : fdopen(d, "w");
	if (*in && *out)
		return 0;
	if (*in)
		fclose(*in);
	else if (s >= 0)
		close(s);
	if (*out)
		fclose(*out);
	else if (d >= 0)
		close(d);
	*in = NULL;
	*out = NULL;
	return -1;
}

static void close_streams(FILE *in, FILE *out)
{
	if (in)
		fclose(in);
	if (out)
		fclose(out);
}

static void fill(unsigned char *b, unsigned char seed)
{
	size_t i;

	for (i = 0; i < BUF_LEN; i++)
		b[i] = (unsigned char)(i * 13 + seed);
}

int bad_rkey_server(void)
{
	static unsigned char expect[BUF_LEN];
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *ai;
	struct rc_end e;
	struct peer p;
	char done[16] = "";
	int ls = -1, one = 1, ok = 0;
	FILE *in = NULL, *out = NULL;

	alarm(600); /* never outlive a client that does not come */
	fill(buf, 0x5a);
	memcpy(expect, buf, sizeof(expect));
	if (rc_end_open(&e, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
		goto out;
	if (getaddrinfo(NULL, IBTCA_BAD_RKEY_PORT, &hints, &ai)) {
		step("remote_listen", 0, "getaddrinfo failed");
		goto out;
	}
	ls = socket(ai->ai_family, ai->ai_socktype, 0);
	if (ls < 0 ||
	    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, ai->ai_addr, ai->ai_addrlen) || listen(ls, 1)) {
		step("remote_listen", 0, "port %s: %s", IBTCA_BAD_RKEY_PORT,
		     strerror(errno));
		freeaddrinfo(ai);
		goto out;
	}
	freeaddrinfo(ai);
	printf("bad-rkey server: lid %u qpn %u rkey 0x%x, waiting on port %s\n",
	       e.lid, e.qp->qp_num, e.mr->rkey, IBTCA_BAD_RKEY_PORT);
	fflush(stdout);
	if (streams(accept(ls, NULL, NULL), &in, &out) || send_peer(out, &e) ||
	    recv_peer(in, &p) ||
	    rc_connect(e.qp, p.qpn, p.lid) ||
	    fprintf(out, "ready\n") < 0 || fflush(out)) {
		step("remote_server_setup", 0, "exchange or connect: %s",
		     strerror(errno));
		goto out;
	}
	step("remote_server_setup", 1, "lid %u qpn %u rkey 0x%x <-> lid %u qpn %u",
	     e.lid, e.qp->qp_num, e.mr->rkey, p.lid, p.qpn);
	/* The client writes "done" once its WRITEs completed or flushed. */
	if (fscanf(in, "%15s", done) != 1 || strcmp(done, "done")) {
		step("remote_bad_rkey_target", 0, "client said '%s'", done);
		goto out;
	}
	ok = !memcmp(buf, expect, sizeof(buf));
	step("remote_bad_rkey_target", ok, "%d bytes %s", BUF_LEN,
	     ok ? "untouched" : "CHANGED");
	fprintf(out, "%s\n", ok ? "untouched" : "changed");
	/* The responder's NAK put the server's QP in the error state. */
	if (expect_qp_err("remote_bad_rkey_target_qp_err", e.qp))
		ok = 0;
out:
	close_streams(in, out);
	if (ls >= 0)
		close(ls);
	rc_end_close(&e);
	printf("IBTCA-PROVIDER result %d failed\n", !ok);
	return ok ? 0 : 1;
}

int tcp_dial(const char *server, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM }, *ai;
	int i, s;

	for (i = 0; i < CONNECT_TRIES; i++) {
		if (!getaddrinfo(server, port, &hints, &ai)) {
			s = socket(ai->ai_family, ai->ai_socktype, 0);
			if (s >= 0 && !connect(s, ai->ai_addr, ai->ai_addrlen)) {
				freeaddrinfo(ai);
				return s;
			}
			if (s >= 0)
				close(s);
			freeaddrinfo(ai);
		}
		sleep(1);
	}
	return -1;
}

int bad_rkey_client(const char *server)
{
	struct ibv_wc wc;
	struct rc_end e;
	struct peer p;
	char answer[16] = "";
	int st, n, i, bad = 1;
	FILE *in = NULL, *out = NULL;

	fill(buf, 0xa5);
	if (rc_end_open(&e, IBV_ACCESS_LOCAL_WRITE))
		goto out;
	if (streams(tcp_dial(server, IBTCA_BAD_RKEY_PORT), &in, &out) || recv_peer(in, &p) ||
	    send_peer(out, &e) ||
	    rc_connect(e.qp, p.qpn, p.lid)) {
		step("remote_client_setup", 0, "%s:%s exchange or connect: %s",
		     server, IBTCA_BAD_RKEY_PORT, strerror(errno));
		goto out;
	}
	/*
	 * Write only once the server's QP has reached RTS: the bad-R_Key
	 * WRITE must not meet it halfway through connecting (its modify to
	 * RTS then failed with EINVAL).
	 */
	if (fscanf(in, "%15s", answer) != 1 || strcmp(answer, "ready")) {
		step("remote_client_setup", 0, "server said '%s', not ready",
		     answer);
		goto out;
	}
	answer[0] = '\0';
	step("remote_client_setup", 1, "lid %u qpn %u <-> %s lid %u qpn %u rkey 0x%x",
	     e.lid, e.qp->qp_num, server, p.lid, p.qpn, p.rkey);
	bad = 0;
	st = write_once(e.qp, e.cq, buf, e.mr->lkey, BUF_LEN, 0, p.addr,
			p.rkey ^ 0x80);
	if (st != IBV_WC_REM_ACCESS_ERR)
		bad++;
	step("remote_bad_rkey", st == IBV_WC_REM_ACCESS_ERR,
	     "rkey=0x%x (valid 0x%x): status=%d (%s)", p.rkey ^ 0x80, p.rkey,
	     st, st >= 0 ? ibv_wc_status_str(st) : "no completion");
	/*
	 * The error moved the QP to the error state: ibv_query_qp (through
	 * the kernel, which asks the device) says so, and a WRITE with the
	 * right R_Key is flushed and moves no bytes.
	 */
	bad += expect_qp_err("remote_bad_rkey_qp_err", e.qp);
	st = write_once(e.qp, e.cq, buf, e.mr->lkey, BUF_LEN, 0, p.addr,
			p.rkey);
	if (st != IBV_WC_WR_FLUSH_ERR)
		bad++;
	step("remote_bad_rkey_flush", st == IBV_WC_WR_FLUSH_ERR,
	     "next WRITE (valid rkey): status=%d (%s)", st,
	     st >= 0 ? ibv_wc_status_str(st) : "no completion");
	/* Nothing else completes. */
	for (i = 0, n = 0; i < 100 && !n; i++, usleep(1000))
		n = ibv_poll_cq(e.cq, 1, &wc);
	if (n)
		bad++;
	step("remote_bad_rkey_cq_drained", !n, "%d further completions", n);
	if (fprintf(out, "done\n") < 0 || fflush(out) ||
	    fscanf(in, "%15s", answer) != 1 || strcmp(answer, "untouched"))
		bad++;
	step("remote_bad_rkey_server_says", !strcmp(answer, "untouched"),
	     "server's buffer %s", answer[0] ? answer : "(no answer)");
out:
	close_streams(in, out);
	rc_end_close(&e);
	printf("IBTCA-PROVIDER result %d failed\n", bad);
	return bad ? 1 : 0;
}
