// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs verbs: two guests, one device each, joined by a link or a
 * switch. Both set up a guest pair (pair.c: PD, MR over a 2 MiB buffer,
 * CQs, two RC QPs connected to the peer's) and exchange buffer addresses
 * and R_Keys in SEND messages; the client drives a 1 MiB RDMA WRITE, a
 * 64 KiB RDMA READ, fetch-and-add and compare-and-swap and an RDMA WRITE
 * with a bad R_Key (on the second QP, which the error takes down); the
 * server checks its memory (bytes landed, counter, the 8 KiB the bad write
 * aimed at untouched) and reports back. Then the client measures a few
 * numbers (IBTCA-VERBS-BENCH lines) and both sides run the teardown
 * checks.
 *
 *   IBTCA-VERBS <check> PASS|FAIL <detail>
 *   IBTCA-VERBS-SUMMARY N passed, M failed
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "pair.h"

#define VS_COUNTER0	40U
#define VS_BAD_BYTE	0xee
#define VS_WRITE_SEED	0x31
#define VS_READ_SEED	0x52
#define VS_PINGS	200
#define VS_BENCH_WRITES	8

/* The server's answer to one message; 1 once the client said BYE. */
static int vs_answer(struct pair *p, const struct pair_msg *m, int *ret)
{
	uint64_t counter;
	size_t i;

	switch (m->type) {
	case MSG_WRITTEN:
		i = pair_pattern_diff(p->buf + PAIR_BULK_OFF, m->value,
				    (uint8_t)m->ok);
		check("rdma_write_data", i == m->value,
		      "%llu bytes, first mismatch at %zu",
		      (unsigned long long)m->value, i);
		*ret = pair_send(p, MSG_RESULT, i == m->value, i);
		return 0;
	case MSG_ATOMICS:
		memcpy(&counter, p->buf + PAIR_ATOM_OFF, 8);
		check("atomics_memory", counter == m->value,
		      "counter=%llu expected=%llu",
		      (unsigned long long)counter,
		      (unsigned long long)m->value);
		*ret = pair_send(p, MSG_RESULT, counter == m->value, counter);
		return 0;
	case MSG_BADKEY:
		for (i = 0; i < PAIR_BAD_LEN; i++)
			if (p->buf[PAIR_BAD_OFF + i] != VS_BAD_BYTE)
				break;
		check("bad_rkey_unchanged", i == PAIR_BAD_LEN,
		      "%u bytes at 0x%x, first changed at %zu", PAIR_BAD_LEN,
		      PAIR_BAD_OFF, i);
		*ret = pair_send(p, MSG_RESULT, i == PAIR_BAD_LEN, i);
		return 0;
	case MSG_PING:
		*ret = pair_send(p, MSG_PONG, 1, m->value);
		return 0;
	case MSG_BYE:
		check("bye", 1, "client finished");
		*ret = 0;
		return 1;
	}
	check("protocol", 0, "unexpected message type %u", m->type);
	*ret = -EPROTO;
	return 1;
}

static void vs_server(struct pair *p)
{
	uint64_t counter = VS_COUNTER0;
	struct pair_msg m;
	int ret = 0, done = 0;

	pair_pattern(p->buf + PAIR_READ_OFF, PAIR_READ_LEN, VS_READ_SEED);
	memcpy(p->buf + PAIR_ATOM_OFF, &counter, 8);
	memset(p->buf + PAIR_BAD_OFF, VS_BAD_BYTE, PAIR_BAD_LEN);
	if (pair_exchange(p))
		return;
	while (!done && !ret) {
		ret = pair_recv(p, &m, 120);
		if (ret) {
			check("protocol", 0, "receive: %s", strerror(-ret));
			return;
		}
		done = vs_answer(p, &m, &ret);
		if (ret && ret != -EPROTO)
			check("protocol", 0, "reply: %s", strerror(-ret));
	}
}

/* An RDMA WRITE or READ of @sge's bytes at @remote of the peer's buffer. */
static struct ibv_send_wr vs_rdma_wr(struct ibv_sge *sge, enum ibv_wr_opcode op,
				     uint64_t remote, uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.sg_list = sge,
		.num_sge = 1,
		.opcode = op,
		.wr.rdma = { .remote_addr = remote, .rkey = rkey },
	};

	return wr;
}

/* An RDMA WRITE or READ of @len bytes at @off of both buffers on the first QP. */
static int vs_rdma(struct pair *p, enum ibv_wr_opcode op, uint32_t off,
		   uint32_t len, struct ibv_wc *wc)
{
	struct ibv_sge sge = pair_sge(p, off, len);
	struct ibv_send_wr wr = vs_rdma_wr(&sge, op, pair_remote(p, off),
					   p->peer_rkey);

	return pair_run(p, p->qp, &wr, &p->scq, wc, 60);
}

/* An atomic on the server's counter; @old gets what it held. */
static int vs_atomic(struct pair *p, enum ibv_wr_opcode op, uint32_t slot,
		     uint64_t cmp_add, uint64_t swap, uint64_t *old,
		     struct ibv_wc *wc)
{
	struct ibv_sge sge = pair_sge(p, PAIR_ATOM_OFF + slot * 8, 8);
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.wr.atomic = { .remote_addr = pair_remote(p, PAIR_ATOM_OFF),
			       .compare_add = cmp_add, .swap = swap,
			       .rkey = p->peer_rkey },
	};
	int ret;

	memset(p->buf + PAIR_ATOM_OFF + slot * 8, 0xff, 8);
	ret = pair_run(p, p->qp, &wr, &p->scq, wc, 60);
	memcpy(old, p->buf + PAIR_ATOM_OFF + slot * 8, 8);
	return ret;
}

/* A question to the server and its RESULT; 0 if it said ok. */
static int vs_ask(struct pair *p, uint32_t type, uint32_t ok, uint64_t value,
		  struct pair_msg *m)
{
	int ret = pair_send(p, type, ok, value);

	if (!ret)
		ret = pair_expect(p, MSG_RESULT, m, 120);
	return ret;
}

/* Pipelined 1 MiB WRITEs, a 1 MiB READ, SEND ping-pong: printed only. */
static void vs_client_bench(struct pair *p)
{
	struct ibv_sge sge = pair_sge(p, PAIR_BULK_OFF, PAIR_BULK_LEN);
	struct ibv_send_wr wr = vs_rdma_wr(&sge, IBV_WR_RDMA_WRITE,
					   pair_remote(p, PAIR_BULK_OFF),
					   p->peer_rkey);
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	double t0, t;
	int i, ok = 1;

	wr.send_flags = IBV_SEND_SIGNALED;
	t0 = rc_now();
	for (i = 0; i < VS_BENCH_WRITES && ok; i++) {
		wr.wr_id = ++p->wr_id;
		ok = !ibv_post_send(p->qp, &wr, &bad);
	}
	for (i = 0; i < VS_BENCH_WRITES && ok; i++)
		ok = !rc_wait(&p->scq, &wc, 60) && wc.status == IBV_WC_SUCCESS;
	t = rc_now() - t0;
	if (ok)
		printf("IBTCA-VERBS-BENCH rdma_write_pipelined MBps=%.1f writes=%d size=%u\n",
		       VS_BENCH_WRITES * (PAIR_BULK_LEN / 1e6) / t,
		       VS_BENCH_WRITES, PAIR_BULK_LEN);

	t0 = rc_now();
	if (ok && !vs_rdma(p, IBV_WR_RDMA_READ, PAIR_BULK_OFF, PAIR_BULK_LEN, &wc) &&
	    wc.status == IBV_WC_SUCCESS)
		printf("IBTCA-VERBS-BENCH rdma_read MBps=%.1f size=%u\n",
		       (PAIR_BULK_LEN / 1e6) / (rc_now() - t0), PAIR_BULK_LEN);

	t0 = rc_now();
	i = pair_pingpong(p, VS_PINGS, NULL);
	t = rc_now() - t0;
	if (i == VS_PINGS)
		printf("IBTCA-VERBS-BENCH send_64B_rtt_us=%.1f round_trips=%d\n",
		       t * 1e6 / VS_PINGS, VS_PINGS);
	else
		printf("IBTCA-VERBS-BENCH send_64B_rtt_us=failed after %d\n", i);
}

/* RDMA WRITE with a wrong R_Key on the second QP; 0 if the server says untouched. */
static int vs_bad_rkey(struct pair *p)
{
	struct ibv_sge sge = pair_sge(p, PAIR_BULK_OFF, PAIR_BAD_LEN);
	struct ibv_send_wr wr = vs_rdma_wr(&sge, IBV_WR_RDMA_WRITE,
					   pair_remote(p, PAIR_BAD_OFF),
					   p->peer_rkey ^ 0x80);
	struct pair_msg m;
	struct ibv_wc wc;
	int ret;

	ret = pair_run(p, p->qp2, &wr, &p->scq2, &wc, 60);
	check("bad_rkey", !ret && wc.status == IBV_WC_REM_ACCESS_ERR,
	      "rkey=0x%x (valid 0x%x): %s, expected status=%u",
	      wr.wr.rdma.rkey, p->peer_rkey, pair_err(ret, &wc),
	      IBV_WC_REM_ACCESS_ERR);
	ret = vs_ask(p, MSG_BADKEY, 1, 0, &m);
	check("bad_rkey_remote_unchanged", !ret && m.ok, "server region %s",
	      ret ? strerror(-ret) : m.ok ? "unchanged" : "CHANGED");
	return ret;
}

/* Fetch-and-add and compare-and-swap (hit and miss) on the server's 40. */
static int vs_atomics(struct pair *p)
{
	uint64_t old, expect = 7;
	struct pair_msg m;
	struct ibv_wc wc;
	int ret;

	ret = vs_atomic(p, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 2, 0, &old, &wc);
	check("fetch_add", !ret && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_FETCH_ADD && old == VS_COUNTER0,
	      "add 2: old=%llu expected=%u %s", (unsigned long long)old,
	      VS_COUNTER0, pair_err(ret, &wc));
	ret = vs_atomic(p, IBV_WR_ATOMIC_CMP_AND_SWP, 1, VS_COUNTER0 + 2, 7,
			&old, &wc);
	check("cmp_swap", !ret && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_COMP_SWAP && old == VS_COUNTER0 + 2,
	      "compare %u swap 7: old=%llu %s", VS_COUNTER0 + 2,
	      (unsigned long long)old, pair_err(ret, &wc));
	ret = vs_atomic(p, IBV_WR_ATOMIC_CMP_AND_SWP, 2, 41, 9, &old, &wc);
	check("cmp_swap_miss", !ret && wc.status == IBV_WC_SUCCESS && old == 7,
	      "compare 41 swap 9: old=%llu expected=7 %s",
	      (unsigned long long)old, pair_err(ret, &wc));
	ret = vs_ask(p, MSG_ATOMICS, 1, expect, &m);
	check("atomics_remote", !ret && m.ok && m.value == expect,
	      "server counter=%llu expected=%llu%s%s",
	      (unsigned long long)m.value, (unsigned long long)expect,
	      ret ? " error=" : "", ret ? strerror(-ret) : "");
	return ret;
}

static void vs_client(struct pair *p)
{
	struct pair_msg m;
	struct ibv_wc wc;
	double t0, t;
	size_t diff;
	int ret;

	if (pair_exchange(p))
		return;

	/* RDMA WRITE of 1 MiB; the server checks the bytes. */
	pair_pattern(p->buf + PAIR_BULK_OFF, PAIR_BULK_LEN, VS_WRITE_SEED);
	t0 = rc_now();
	ret = vs_rdma(p, IBV_WR_RDMA_WRITE, PAIR_BULK_OFF, PAIR_BULK_LEN, &wc);
	t = rc_now() - t0;
	check("rdma_write", !ret && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_RDMA_WRITE, "%u bytes %s", PAIR_BULK_LEN,
	      pair_err(ret, &wc));
	if (!ret && wc.status == IBV_WC_SUCCESS)
		printf("IBTCA-VERBS-BENCH rdma_write_1MiB MBps=%.1f us=%.0f\n",
		       (PAIR_BULK_LEN / 1e6) / t, t * 1e6);
	ret = vs_ask(p, MSG_WRITTEN, VS_WRITE_SEED, PAIR_BULK_LEN, &m);
	check("rdma_write_remote", !ret && m.ok, "server verified %u bytes: %s",
	      PAIR_BULK_LEN, ret ? strerror(-ret) : m.ok ? "match" : "mismatch");
	if (ret)
		return;

	/* RDMA READ of the server's pattern. */
	memset(p->buf + PAIR_READ_OFF, 0, PAIR_READ_LEN);
	ret = vs_rdma(p, IBV_WR_RDMA_READ, PAIR_READ_OFF, PAIR_READ_LEN, &wc);
	diff = pair_pattern_diff(p->buf + PAIR_READ_OFF, PAIR_READ_LEN,
			       VS_READ_SEED);
	check("rdma_read", !ret && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_RDMA_READ && diff == PAIR_READ_LEN,
	      "%u bytes, first mismatch at %zu, %s", PAIR_READ_LEN, diff,
	      pair_err(ret, &wc));

	if (vs_atomics(p) || vs_bad_rkey(p))
		return;
	vs_client_bench(p);
	ret = pair_send(p, MSG_BYE, 1, 0);
	check("bye", !ret, "%s", ret ? strerror(-ret) : "server told");
}

int cmd_verbs(const char *dev, int argc, char **argv)
{
	return pair_command(dev, argc, argv, vs_server, vs_client);
}
