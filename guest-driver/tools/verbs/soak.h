/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-verbs soak's shared parts: the buffer layout and limits, the
 * message, a peer's connection state (struct sk_peer) and the run's; the
 * message lengths and patterns (soak_msg.c); a peer's objects, QP states
 * and posts (soak_conn.c). soak.c has the command: completions, the turns,
 * the reports.
 */
#ifndef IBTCA_VERBS_SOAK_H
#define IBTCA_VERBS_SOAK_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "rc.h"

#define SK_MAX_LIDS	8U
#define SK_BUF_SIZE	(2U << 20)	/* each peer's buffer */
#define SK_NRECV	16U		/* receives posted per QP */
#define SK_RECV_OFF	0x140000U	/* their buffers */
#define SK_RECV_SLOT	256U
#define SK_MAGIC	0x49425642U	/* "IBVB" */
#define SK_WIN		16U		/* messages in flight per peer */
/*
 * Slots of the receiver's buffer a sender writes, message k into slot
 * k % SK_NSLOT: so a slot is written again SK_NSLOT messages later, and it
 * must have been verified by then. When the WRITE of message m lands, the
 * SENDs of every earlier message have been delivered (an RC QP executes
 * its requests in order), and the receiver holds at most SK_NRECV of them
 * unverified: each keeps its receive buffer until it was checked, and a
 * SEND without a posted buffer waits (RNR NAK, retried for ever). So the
 * slot's previous message, m - SK_NSLOT, was verified if SK_NSLOT >
 * SK_NRECV. A duplicate or retransmitted WRITE of message j may land again
 * only while j is unacknowledged, that is before j + SK_WIN is posted: so
 * also SK_WIN <= SK_NSLOT. Twice the receive buffers meets both with room.
 */
#define SK_NSLOT	(2 * SK_NRECV)
#define SK_SLOT_LEN	0x8000U		/* 32 KiB: the longest message */
#define SK_IN_OFF	0x000000U	/* SK_NSLOT slots the peer writes */
#define SK_SRC_OFF	0x180000U	/* SK_WIN sources of our WRITEs */
#define SK_MSG_OFF	0x130000U	/* SK_WIN + 1 outgoing messages */
#define SK_MSG_LEN	128U
#define SK_CTL		SK_WIN		/* the message slot of HELLO and BYE */
#define SK_MTU		IBV_MTU_2048
#define SK_HOLD_S	3.0		/* a broken connection stays in ERR */
#define SK_RETRY_HOLD_S	0.3		/* after a HELLO that failed */
#define SK_REPLY_WAIT_S	3.0		/* the initiator's HELLO landed */
#define SK_IDLE_S	15.0		/* nothing from a peer whose BYE is due */
#define SK_DRAIN_S	30.0		/* the longest a flush may take */
#define SK_REPORT_S	10.0
#define SK_LINGER_S	2.0		/* answer retransmitted BYEs */
#define SK_PRINT_MAX	5		/* detailed lines per kind and peer */

static_assert(SK_NSLOT > SK_NRECV && SK_WIN <= SK_NSLOT, "slot reuse");
static_assert(SK_IN_OFF + SK_NSLOT * SK_SLOT_LEN <= SK_MSG_OFF, "layout");
static_assert(SK_MSG_OFF + (SK_WIN + 1) * SK_MSG_LEN <= SK_RECV_OFF,
	      "layout");
static_assert(SK_RECV_OFF + SK_NRECV * SK_RECV_SLOT <= SK_SRC_OFF, "layout");
static_assert(SK_SRC_OFF + SK_WIN * SK_SLOT_LEN <= SK_BUF_SIZE, "layout");

enum { SK_DATA = 0x60, SK_HELLO, SK_BYE };
enum { SK_WR_WRITE, SK_WR_SEND, SK_WR_CTL };
enum { SK_BROKEN, SK_CONNECTING, SK_RUN };

struct sk_msg {
	uint32_t magic;
	uint32_t type;
	uint64_t k;		/* DATA: the message; HELLO: the next one */
	uint32_t len;		/* DATA: bytes written */
	uint32_t slot;		/* DATA: where */
	uint32_t epoch;		/* the sender's connection */
	uint32_t rkey;		/* HELLO */
	uint64_t addr;		/* HELLO: the buffer's address */
	uint64_t nonce;		/* the sender's run: its patterns */
	/* BYE: the sender's counts of this connection */
	uint64_t posted, ok, errors;
	uint8_t pad[56];
};

static_assert(sizeof(struct sk_msg) == SK_MSG_LEN, "message size");
static_assert(SK_MSG_LEN <= SK_RECV_SLOT, "a message fits a receive buffer");

struct sk_count {
	uint64_t posted, ok, errors, received;
};

struct sk_peer {
	struct rc_path path;	/* to the peer: its LID, SK_MTU, the options */
	struct ibv_mr *mr;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	uint8_t *buf;		/* SK_BUF_SIZE */
	uint32_t peer_qpn;
	uint64_t peer_addr;
	uint32_t peer_rkey;
	uint16_t lid;
	int state;
	int was_run;		/* BROKEN: the connection had been established */
	double since;		/* when the state was entered */
	double hold;		/* BROKEN: how long at least */
	double hello_at;	/* when our HELLO completed */
	double rx_at;		/* when the peer's last message came */
	int initiator;		/* the lower LID of the pair says HELLO first */
	uint32_t epoch;		/* our connection number */
	int hello;		/* our HELLO: 0 not sent, 1 posted, 2 landed */
	int peer_hello;		/* the peer's HELLO of this connection came */
	uint32_t peer_epoch;
	uint64_t peer_nonce;
	uint64_t rx_next;	/* the message the peer sends next */
	uint64_t next_k, done_k; /* posted below next_k, completed below done_k */
	uint8_t failed[SK_WIN];	/* a work request of message k % SK_WIN failed */
	uint32_t wr_out, rq_out; /* requests and receives not completed */
	int bye;		/* ours: 0 not sent, 1 posted, 2 completed */
	int bye_rcvd;
	struct sk_msg peer_bye;
	struct sk_count all, conn;
	uint64_t retry_exc, flushed, other_err, last_other;
	uint64_t verified, mismatched, out_of_order, unexpected;
	uint64_t established, hellos, missing, recv_err, breaks;
	int printed_bad, printed_ooo, printed_unexp;
};

struct sk_run {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct rc_path path;	/* the QP options every peer's path takes */
	uint16_t self;
	uint64_t nonce;
	double t0, end, stop;
	int ending;
};

/* soak_msg.c: message k's length and its bytes' pattern. */
uint64_t sk_mix(uint64_t x);
/* Bytes of message @k from @from to @to: 1 B to SK_SLOT_LEN. */
uint32_t sk_len(uint16_t from, uint16_t to, uint64_t k);
/* The pattern's seed of message @k of run @nonce. */
uint64_t sk_seed(uint64_t nonce, uint16_t from, uint16_t to, uint64_t k);
void sk_fill(uint8_t *p, uint32_t len, uint64_t seed);
/* Offset of the first byte that differs from sk_fill's, or @len. */
uint32_t sk_diff(const uint8_t *p, uint32_t len, uint64_t seed);

/*
 * soak_conn.c: a peer's objects, its QP's states and what is posted on
 * it. Every int-returning function returns 0 or a negative errno value.
 */
/* The peer's buffer, MR, CQs and QP; the QP must get number @qpn. */
int sk_create(struct sk_run *r, struct sk_peer *p, uint32_t qpn,
	      char *detail, size_t len);
void sk_destroy(struct sk_peer *p);
const char *sk_state_name(int s);
/* An IBTCA-SOAK-EVENT line. */
void sk_event(const struct sk_run *r, const struct sk_peer *p,
	      const char *what);
/*
 * The connection is broken: the QP goes to ERR (flushing what is posted)
 * and stays there at least @hold seconds; the next reset forgets the
 * peer's HELLO.
 */
void sk_break(struct sk_run *r, struct sk_peer *p, double hold,
	      const char *why);
/* RESET → INIT → receives posted → RTR → RTS, then a HELLO is due. */
int sk_connect(struct sk_run *r, struct sk_peer *p);
/* A receive into buffer @slot. */
int sk_post_recv(struct sk_peer *p, uint32_t slot);
int sk_send_hello(struct sk_run *r, struct sk_peer *p);
int sk_send_bye(struct sk_peer *p);
/* Message k: its pattern into a source slot, then WRITE and SEND. */
int sk_send_data(struct sk_run *r, struct sk_peer *p);

#endif /* IBTCA_VERBS_SOAK_H */
