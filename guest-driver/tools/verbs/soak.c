// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs soak: RDMA between this guest and every other guest of a
 * fabric for a set time, every message checked byte by byte, through a
 * lossy fabric and the death and return of a peer (issue 19), through
 * libibverbs.
 *
 *   ibtca-verbs [-d DEV] soak --lids L1,L2,... --seconds N [--self-lid L]
 *              [--grace S] [--timeout EXP] [--retry N]
 *
 * --timeout and --retry are the QPs' ACK timeout exponent and transport
 * retries (rc_qp_option; perftest's 14 and 7 by default).
 *
 * --lids lists every guest of the soak, this one included (its own LID is
 * the port's, which --self-lid, if given, must be). Each guest sets up per
 * peer a buffer, its MR, two CQs and one RC QP (path MTU 2048), in the
 * order of the sorted LIDs: guest X's QP for its i-th peer is RC_QPN0 + i,
 * so both ends of a pair derive each other's QP numbers from the list
 * alone.
 *
 * One thread runs every peer without blocking. Per peer, message k is an
 * RDMA WRITE of sk_len(k) bytes of a pattern seeded by (run nonce, sender,
 * receiver, k) into slot k % SK_NSLOT of the peer's buffer, then a SEND of
 * (k, length, slot, connection epoch). The receiver checks on the SEND
 * that its slot holds exactly that pattern (verified / mismatched) and
 * that k is the next one of the connection (out_of_order otherwise).
 *
 * A connection starts with a HELLO each way (next k, epoch, buffer address
 * and R_Key, nonce): the lower LID of the pair (the initiator) sends its
 * HELLO, the other answers with its own. An error completion (the peer
 * stopped answering: ACK timeouts past --retry, then flushes) breaks it:
 * the QP stays in ERR for SK_HOLD_S, so that the peer's requests go
 * unanswered and its side breaks too and nothing of the old connection is
 * still on the wire; then, once every posted request and receive has
 * completed, both go RESET → RTS from the same PSNs again, the initiator
 * sending its HELLO (again after a short pause when it fails or no answer
 * comes within SK_REPLY_WAIT_S) until a connection is made or the run
 * ends. Every reset starts both PSNs afresh and forgets a HELLO received
 * before it: a side that kept one would expect the next PSN and take the
 * peer's next HELLO, sent from the first PSN again, for a duplicate
 * (acknowledged, never delivered), and both ends would wait for ever. A
 * killed peer's guest boots again and runs the same command; its fresh
 * QPs are where the survivors' reconnections land.
 *
 * After --seconds a guest posts no more messages; once every message to a
 * peer has completed it sends a BYE with its counts of the connection, and
 * it waits for every peer's BYE (at most --grace seconds more). Output:
 * "IBTCA-SOAK ..." per peer every SK_REPORT_S, one IBTCA-SOAK-FINAL line
 * per peer, an "IBTCA-SOAK check_LID PASS|FAIL" per peer (nothing
 * mismatched, out of order or unexpected, every message completed, the
 * last connection's counts agreeing with the peer's BYE) and
 * IBTCA-SOAK-SUMMARY.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "report.h"
#include "soak.h"
#include "usage.h"

static void sk_count_error(struct sk_peer *p, enum ibv_wc_status status)
{
	if (status == IBV_WC_RETRY_EXC_ERR)
		p->retry_exc++;
	else if (status == IBV_WC_WR_FLUSH_ERR)
		p->flushed++;
	else {
		p->other_err++;
		p->last_other = status;
	}
}

/* A completion of one of our requests. */
static void sk_send_done(struct sk_run *r, struct sk_peer *p,
			 const struct ibv_wc *c)
{
	uint32_t kind = (uint32_t)(c->wr_id & 3);
	uint64_t k = c->wr_id >> 2;
	int ok = c->status == IBV_WC_SUCCESS;
	char why[48];

	if (p->wr_out)
		p->wr_out--;
	if (!ok) {
		sk_count_error(p, c->status);
		snprintf(why, sizeof(why), "status_%u", c->status);
	}
	if (kind == SK_WR_CTL) {
		if (p->hello == 1) {
			p->hello = ok ? 2 : 0;
			p->hello_at = rc_now();
			if (!ok)
				sk_break(r, p, SK_RETRY_HOLD_S, "hello_failed");
		} else if (p->bye == 1) {
			/* A BYE the peer did not take is sent again. */
			p->bye = ok || p->bye_rcvd ? 2 : 0;
			if (!ok)
				sk_break(r, p, SK_HOLD_S, "bye_failed");
		}
		return;
	}
	if (k != p->done_k || k >= p->next_k) {
		/* Completions come in order, one WRITE and one SEND each. */
		p->unexpected++;
		if (p->printed_unexp++ < SK_PRINT_MAX)
			printf("IBTCA-SOAK-BAD lid=%u peer=%u completion of message %llu, expected %llu\n",
			       r->self, p->lid, (unsigned long long)k,
			       (unsigned long long)p->done_k);
	}
	if (!ok) {
		p->failed[k % SK_WIN] = 1;
		sk_break(r, p, SK_HOLD_S, why);
	}
	if (kind != SK_WR_SEND)
		return;
	if (p->failed[k % SK_WIN]) {
		p->all.errors++;
		p->conn.errors++;
	} else {
		p->all.ok++;
		p->conn.ok++;
	}
	p->done_k = k + 1;
}

/* A DATA message: its slot must hold exactly its pattern. */
static void sk_check_data(struct sk_run *r, struct sk_peer *p,
			  const struct sk_msg *m)
{
	uint32_t len = sk_len(p->lid, r->self, m->k), diff = 0;
	uint32_t slot = (uint32_t)(m->k % SK_NSLOT);
	int good;

	p->all.received++;
	p->conn.received++;
	if (!p->peer_hello || m->epoch != p->peer_epoch || m->k != p->rx_next) {
		p->out_of_order++;
		if (p->printed_ooo++ < SK_PRINT_MAX)
			printf("IBTCA-SOAK-BAD lid=%u peer=%u message %llu epoch %u, expected %llu epoch %u%s\n",
			       r->self, p->lid, (unsigned long long)m->k,
			       m->epoch, (unsigned long long)p->rx_next,
			       p->peer_epoch,
			       p->peer_hello ? "" : " (no HELLO)");
	}
	p->rx_next = m->k + 1;
	good = m->len == len && m->slot == slot;
	if (good) {
		diff = sk_diff(p->buf + SK_IN_OFF + slot * SK_SLOT_LEN, len,
			       sk_seed(p->peer_nonce, p->lid, r->self, m->k));
		good = diff == len;
	}
	if (good) {
		p->verified++;
		return;
	}
	p->mismatched++;
	if (p->printed_bad++ < SK_PRINT_MAX)
		printf("IBTCA-SOAK-BAD lid=%u peer=%u message %llu mismatched: len %u (want %u) slot %u (want %u) first bad byte %u\n",
		       r->self, p->lid, (unsigned long long)m->k, m->len, len,
		       m->slot, slot, diff);
}

/* A completion of one of our receives. */
static void sk_recv_done(struct sk_run *r, struct sk_peer *p,
			 const struct ibv_wc *c)
{
	struct sk_msg m;

	if (p->rq_out)
		p->rq_out--;
	if (c->status != IBV_WC_SUCCESS) {
		p->recv_err++;
		sk_break(r, p, SK_HOLD_S, "recv_error");
		return;
	}
	if (c->wr_id >= SK_NRECV || c->byte_len != SK_MSG_LEN) {
		p->unexpected++;
		return;
	}
	memcpy(&m, p->buf + SK_RECV_OFF + c->wr_id * SK_RECV_SLOT, sizeof(m));
	p->rx_at = rc_now();
	if (m.magic != SK_MAGIC) {
		p->unexpected++;
	} else if (m.type == SK_DATA) {
		sk_check_data(r, p, &m);
	} else if (m.type == SK_HELLO) {
		if (p->state == SK_RUN ||
		    (p->state == SK_BROKEN && p->was_run)) {
			/* The peer started over without our connection
			 * breaking first.
			 */
			p->unexpected++;
			sk_break(r, p, SK_HOLD_S, "unexpected_hello");
		} else {
			p->peer_hello = 1;
			p->peer_epoch = m.epoch;
			p->peer_nonce = m.nonce;
			p->rx_next = m.k;
			p->peer_addr = m.addr;
			p->peer_rkey = m.rkey;
		}
	} else if (m.type == SK_BYE) {
		p->bye_rcvd = 1;
		p->peer_bye = m;
	} else {
		p->unexpected++;
	}
	/* Reposted only once the message was checked. */
	if (p->state != SK_BROKEN && sk_post_recv(p, (uint32_t)c->wr_id))
		sk_break(r, p, SK_HOLD_S, "post_recv");
}

/* Takes up to 32 completions of @cq (ours if @send, else receives). */
static int sk_poll(struct sk_run *r, struct sk_peer *p, struct ibv_cq *cq,
		   int send)
{
	struct ibv_wc c[32];
	int i, found;

	found = ibv_poll_cq(cq, ARRAY_SIZE(c), c);
	for (i = 0; i < found; i++) {
		if (send)
			sk_send_done(r, p, &c[i]);
		else
			sk_recv_done(r, p, &c[i]);
	}
	return found > 0 ? found : 0;
}

static int sk_done(const struct sk_peer *p)
{
	return p->bye == 2 && p->bye_rcvd;
}

/* One turn for one peer; how much happened. */
static int sk_step(struct sk_run *r, struct sk_peer *p)
{
	int n = sk_poll(r, p, p->scq, 1) + sk_poll(r, p, p->rcq, 0);
	double now = rc_now();

	switch (p->state) {
	case SK_BROKEN:
		if (now - p->since < p->hold || now >= r->stop || sk_done(p))
			break;
		if (p->wr_out || p->rq_out) {
			if (now - p->since < SK_DRAIN_S)
				break;
			/* Every request must complete, flushed if nothing else. */
			p->missing += p->wr_out + p->rq_out;
			sk_event(r, p, "completions_missing");
		}
		if (!sk_connect(r, p))
			n++;
		break;
	case SK_CONNECTING:
		/* The responder answers the initiator's HELLO with its own. */
		if (!p->hello && (p->initiator || p->peer_hello)) {
			if (sk_send_hello(r, p))
				sk_break(r, p, 1.0, "post_hello");
			else
				p->hello = 1;
			n++;
		} else if (p->hello == 2 && p->peer_hello) {
			p->state = SK_RUN;
			p->since = now;
			p->rx_at = now;
			p->established++;
			sk_event(r, p, "connected");
			n++;
		} else if (p->hello == 2 && now - p->hello_at > SK_REPLY_WAIT_S) {
			sk_break(r, p, SK_RETRY_HOLD_S, "no_reply");
		}
		break;
	case SK_RUN:
		if (!r->ending) {
			while (p->next_k - p->done_k < SK_WIN &&
			       p->state == SK_RUN) {
				if (sk_send_data(r, p)) {
					sk_break(r, p, SK_HOLD_S, "post_send");
					break;
				}
				n++;
			}
		} else if (!p->bye && p->next_k == p->done_k) {
			if (sk_send_bye(p)) {
				sk_break(r, p, SK_HOLD_S, "post_bye");
			} else {
				p->bye = 1;
				sk_event(r, p, "bye_sent");
			}
			n++;
		} else if (!p->bye_rcvd && now - p->rx_at > SK_IDLE_S) {
			/* The peer may be connecting again while we idle. */
			sk_break(r, p, SK_HOLD_S, "idle");
		}
		break;
	}
	return n;
}

static void sk_report(const struct sk_run *r, const struct sk_peer *p,
		      const char *tag)
{
	printf("%s t=%.0f lid=%u peer=%u state=%s epoch=%u posted=%llu written_ok=%llu write_errors=%llu verified=%llu mismatched=%llu out_of_order=%llu reconnects=%llu\n",
	       tag, rc_now() - r->t0, r->self, p->lid, sk_state_name(p->state),
	       p->epoch, (unsigned long long)p->all.posted,
	       (unsigned long long)p->all.ok,
	       (unsigned long long)p->all.errors,
	       (unsigned long long)p->verified,
	       (unsigned long long)p->mismatched,
	       (unsigned long long)p->out_of_order,
	       (unsigned long long)(p->established ? p->established - 1 : 0));
}

static void sk_final(const struct sk_run *r, struct sk_peer *p)
{
	const struct sk_msg *b = &p->peer_bye;
	uint64_t open = p->all.posted - p->all.ok - p->all.errors;
	/*
	 * The peer's BYE follows everything it sent on the connection: we got
	 * every message it completed, and of those that failed at most all
	 * (one may land and still fail, its acknowledgements lost or late).
	 */
	int agree = p->bye_rcvd && b->ok <= p->conn.received &&
		    p->conn.received <= b->ok + b->errors;
	char name[32];

	printf("IBTCA-SOAK-FINAL lid=%u peer=%u posted=%llu written_ok=%llu write_errors=%llu retry_exceeded=%llu flushed=%llu other_errors=%llu received=%llu verified=%llu mismatched=%llu out_of_order=%llu unexpected=%llu reconnects=%llu breaks=%llu hellos=%llu missing=%llu recv_errors=%llu epoch=%u conn_posted=%llu conn_written_ok=%llu conn_write_errors=%llu conn_received=%llu bye_sent=%d bye_received=%d peer_conn_posted=%llu peer_conn_written_ok=%llu peer_conn_write_errors=%llu\n",
	       r->self, p->lid, (unsigned long long)p->all.posted,
	       (unsigned long long)p->all.ok, (unsigned long long)p->all.errors,
	       (unsigned long long)p->retry_exc,
	       (unsigned long long)p->flushed,
	       (unsigned long long)p->other_err,
	       (unsigned long long)p->all.received,
	       (unsigned long long)p->verified,
	       (unsigned long long)p->mismatched,
	       (unsigned long long)p->out_of_order,
	       (unsigned long long)p->unexpected,
	       (unsigned long long)(p->established ? p->established - 1 : 0),
	       (unsigned long long)p->breaks, (unsigned long long)p->hellos,
	       (unsigned long long)p->missing,
	       (unsigned long long)p->recv_err, p->epoch,
	       (unsigned long long)p->conn.posted,
	       (unsigned long long)p->conn.ok,
	       (unsigned long long)p->conn.errors,
	       (unsigned long long)p->conn.received, p->bye == 2,
	       p->bye_rcvd, (unsigned long long)b->posted,
	       (unsigned long long)b->ok, (unsigned long long)b->errors);
	snprintf(name, sizeof(name), "check_%u", p->lid);
	check(name, p->established && !p->mismatched && !p->out_of_order &&
	      !p->unexpected && !p->missing && !open && p->bye == 2 && agree,
	      "verified=%llu mismatched=%llu out_of_order=%llu unexpected=%llu missing=%llu not_completed=%llu bye=%d/%d; last connection: received %llu, the peer wrote %llu",
	      (unsigned long long)p->verified,
	      (unsigned long long)p->mismatched,
	      (unsigned long long)p->out_of_order,
	      (unsigned long long)p->unexpected,
	      (unsigned long long)p->missing, (unsigned long long)open,
	      p->bye == 2, p->bye_rcvd,
	      (unsigned long long)p->conn.received,
	      (unsigned long long)b->ok);
}

/* "1,2,3" into @lids (at most SK_MAX_LIDS, each a unicast LID, sorted). */
static int sk_lids(const char *arg, uint16_t *lids)
{
	char buf[128], *tok, *save = NULL;
	uint32_t v, n = 0, i, j;

	if (snprintf(buf, sizeof(buf), "%s", arg) >= (int)sizeof(buf))
		return -1;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == SK_MAX_LIDS || rc_parse_u32(tok, &v) || !v || v >= 0xc000)
			return -1;
		lids[n++] = (uint16_t)v;
	}
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && lids[j - 1] > lids[j]; j--) {
			uint16_t t = lids[j];

			lids[j] = lids[j - 1];
			lids[j - 1] = t;
		}
	for (i = 1; i < n; i++)
		if (lids[i] == lids[i - 1])
			return -1;
	return (int)n;
}

static uint64_t sk_nonce(void)
{
	uint64_t x = 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &x, sizeof(x)) != sizeof(x))
			x = 0;
		close(fd);
	}
	return x ^ sk_mix((uint64_t)(rc_now() * 1e9) ^ (uint64_t)getpid());
}

static int sk_setup(struct sk_run *r, struct sk_peer *p, const uint16_t *lids,
		    int n)
{
	char detail[160], name[32];
	int me = 0, you = 0, i;

	/* The i-th other LID of a guest's sorted list has QP RC_QPN0 + i. */
	for (i = 0; i < n; i++) {
		if (lids[i] < p->lid && lids[i] != r->self)
			me++;
		if (lids[i] < r->self && lids[i] != p->lid)
			you++;
	}
	p->path = r->path;
	p->path.dlid = p->lid;
	p->path.mtu = SK_MTU;
	p->path.access = IBV_ACCESS_REMOTE_WRITE;
	p->peer_qpn = RC_QPN0 + you;
	p->initiator = r->self < p->lid;
	snprintf(name, sizeof(name), "setup_%u", p->lid);
	if (sk_create(r, p, RC_QPN0 + me, detail, sizeof(detail)) ||
	    rc_init(p->qp, &p->path)) {
		check(name, 0, "%s", detail);
		return -1;
	}
	check(name, 1, "peer_qpn=0x%x %s", p->peer_qpn, detail);
	/*
	 * Every connection, the first too, is made from a broken one: ERR,
	 * then RESET and on to RTS (sk_connect).
	 */
	p->state = SK_CONNECTING;
	p->epoch = 1;
	sk_break(r, p, 0, "setup");
	return 0;
}

/* This guest's LID, once its port is active; 0 with a failed check. */
static uint16_t sk_self(struct sk_run *r, uint32_t self)
{
	struct ibv_port_attr attr;
	int ret = rc_wait_port(r->ctx, 60);

	if (!ret)
		ret = -ibv_query_port(r->ctx, 1, &attr);
	if (ret) {
		check("setup", 0, "port 1: %s", strerror(-ret));
		return 0;
	}
	if (self && attr.lid != self) {
		check("setup", 0, "port LID %u, --self-lid %u", attr.lid, self);
		return 0;
	}
	return attr.lid;
}

int cmd_soak(const char *dev, int argc, char **argv)
{
	struct sk_run r = {
		.path = { .timeout = RC_TIMEOUT_DEFAULT,
			  .retry = RC_RETRY_DEFAULT },
	};
	uint32_t seconds = 0, grace = 120, self = 0;
	uint16_t lids[SK_MAX_LIDS];
	struct sk_peer *peers = NULL;
	const char *lid_arg = NULL;
	int n = 0, np = 0, i, busy, opt;
	double next_report;

	for (i = 0; i + 1 < argc; i += 2) {
		opt = rc_qp_option(&r.path, argv[i], argv[i + 1]);
		if (opt < 0)
			usage();
		else if (opt)
			continue;
		else if (!strcmp(argv[i], "--lids"))
			lid_arg = argv[i + 1];
		else if (!strcmp(argv[i], "--seconds") &&
			 !rc_parse_u32(argv[i + 1], &seconds) && seconds)
			continue;
		else if (!strcmp(argv[i], "--self-lid") &&
			 !rc_parse_u32(argv[i + 1], &self) && self &&
			 self < 0xc000)
			continue;
		else if (!strcmp(argv[i], "--grace") &&
			 !rc_parse_u32(argv[i + 1], &grace))
			continue;
		else
			usage();
	}
	if (i != argc || !lid_arg || !seconds)
		usage();
	n = sk_lids(lid_arg, lids);
	if (n < 2)
		usage();
	check_prefix = "IBTCA-SOAK";
	r.ctx = rc_open(dev);
	if (!r.ctx) {
		check("setup", 0, "cannot open %s", dev);
		goto summary;
	}
	r.self = sk_self(&r, self);
	if (!r.self)
		goto out;
	r.pd = ibv_alloc_pd(r.ctx);
	peers = calloc(n, sizeof(*peers));
	if (!r.pd || !peers) {
		check("setup", 0, "ibv_alloc_pd or memory: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < n; i++)
		if (lids[i] != r.self)
			peers[np++].lid = lids[i];
	if (np != n - 1) {
		check("setup", 0, "own LID %u not in --lids %s", r.self,
		      lid_arg);
		goto out;
	}
	r.nonce = sk_nonce();
	r.t0 = rc_now();
	for (i = 0; i < np; i++)
		if (sk_setup(&r, &peers[i], lids, n))
			goto out;
	r.end = rc_now() + seconds;
	r.stop = r.end + grace;
	next_report = r.t0 + SK_REPORT_S;
	printf("IBTCA-SOAK-START lid=%u lids=%s seconds=%u grace=%u timeout=%u retry=%u window=%u slots=%u\n",
	       r.self, lid_arg, seconds, grace, r.path.timeout, r.path.retry,
	       SK_WIN, SK_NSLOT);
	for (;;) {
		double now = rc_now();
		int all_done = 1;

		r.ending = now >= r.end;
		busy = 0;
		for (i = 0; i < np; i++) {
			busy += sk_step(&r, &peers[i]);
			all_done &= sk_done(&peers[i]);
		}
		if (all_done || now >= r.stop)
			break;
		if (now >= next_report) {
			for (i = 0; i < np; i++)
				sk_report(&r, &peers[i], "IBTCA-SOAK");
			next_report += SK_REPORT_S;
		}
		if (!busy)
			usleep(200);
	}
	/* Our ACKs of the peers' BYEs may be lost: answer their retries. */
	for (next_report = rc_now() + SK_LINGER_S; rc_now() < next_report;) {
		for (i = 0; i < np; i++)
			sk_poll(&r, &peers[i], peers[i].rcq, 0);
		usleep(10000);
	}
	for (i = 0; i < np; i++)
		sk_final(&r, &peers[i]);
out:
	for (i = 0; i < np; i++)
		sk_destroy(&peers[i]);
	free(peers);
	if (r.pd)
		ibv_dealloc_pd(r.pd);
	if (r.ctx)
		ibv_close_device(r.ctx);
summary:
	printf("IBTCA-SOAK-SUMMARY %d passed, %d failed\n", n_pass, n_fail);
	return n_fail || !n_pass;
}
