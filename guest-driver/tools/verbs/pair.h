/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-verbs' guest pair (pair.c): two RC QPs connected to a peer guest's
 * two, a PD, an MR over a 2 MiB buffer, three CQs; buffer addresses and
 * R_Keys exchanged (HELLO) and 64-byte messages carried over SEND/RECV on
 * the first QP; the options, set-up and teardown of a command on it.
 *
 * No out-of-band channel: each side's first QP is RC_QPN0 (rc.h) and each
 * derives the peer's QPNs from its LID alone.
 */
#ifndef IBTCA_VERBS_PAIR_H
#define IBTCA_VERBS_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "rc.h"
#include "report.h"

#define PAIR_BUF_SIZE	(2U << 20)
#define PAIR_BULK_OFF	0x000000U	/* 1 MiB: RDMA WRITE source/target */
#define PAIR_BULK_LEN	(1U << 20)
#define PAIR_READ_OFF	0x100000U	/* 64 KiB: RDMA READ source/target */
#define PAIR_READ_LEN	0x10000U
#define PAIR_ATOM_OFF	0x110000U	/* server counter; client results */
#define PAIR_BAD_OFF	0x120000U	/* 8 KiB the bad-key write aims at */
#define PAIR_BAD_LEN	0x2000U
#define PAIR_SEND_OFF	0x130000U	/* outgoing messages */
#define PAIR_RECV_OFF	0x140000U	/* receive slots */
#define PAIR_SLOT	256U
#define PAIR_NRECV	16U
#define PAIR_MAGIC	0x49425642U	/* "IBVB" */

/* Message types. */
enum { MSG_HELLO = 1, MSG_WRITTEN, MSG_RESULT, MSG_ATOMICS, MSG_BADKEY,
	MSG_PING, MSG_PONG, MSG_BYE, MSG_LAT };

/* A message; 64 bytes. */
struct pair_msg {
	uint32_t magic;
	uint32_t type;
	uint64_t addr;
	uint32_t rkey;
	uint32_t ok;
	uint64_t value;
	uint8_t pad[32];
};

struct pair {
	struct rc_path path;	/* to the peer; --sl, --timeout, --retry */
	int server;
	uint32_t wait_s;	/* server: seconds to wait for the HELLO */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct rc_cq scq, rcq, scq2;	/* qp: scq, rcq; qp2: scq2, rcq */
	struct ibv_qp *qp, *qp2;
	uint8_t *buf;
	uint64_t peer_addr;
	uint32_t peer_rkey;
	uint64_t wr_id;
};

/*
 * A command on the guest pair (verbs, verbs-bench): its options (--role
 * server|client, --peer-lid L, --sl SL, --wait SECS, --timeout, --retry;
 * usage() for a bad one), device @dev opened, pair_setup (the "setup"
 * check), @server or @client run, pair_teardown, the SUMMARY line; the
 * exit status.
 */
int pair_command(const char *dev, int argc, char **argv,
		 void (*server)(struct pair *), void (*client)(struct pair *));
/*
 * The byte pattern the RDMA checks write and read: byte i is
 * i * 31 + @seed + i / 4096 (mod 256).
 */
void pair_pattern(uint8_t *buf, size_t len, uint8_t seed);
/* Offset of the first byte that differs from the pattern, or @len. */
size_t pair_pattern_diff(const uint8_t *buf, size_t len, uint8_t seed);
/*
 * Every int-returning function below returns 0 or a negative errno value.
 * pair_setup: waits for the port, creates and connects everything and
 * posts the receives; @detail gets the QPNs and keys, or what failed.
 */
int pair_setup(struct pair *p, char *detail, size_t len);
/* Address in the peer's buffer of our offset @off. */
uint64_t pair_remote(const struct pair *p, uint32_t off);
/* An SGE over @len bytes at @off of our buffer. */
struct ibv_sge pair_sge(const struct pair *p, uint32_t off, uint32_t len);
/*
 * Posts @wr (given the next wr_id) on @qp and waits up to @secs for its
 * completion on @cq into @wc; -EPROTO if another one came.
 */
int pair_run(struct pair *p, struct ibv_qp *qp, struct ibv_send_wr *wr,
	     struct rc_cq *cq, struct ibv_wc *wc, double secs);
/* "error=..." for @ret, else rc_wc_str(@wc). */
const char *pair_err(int ret, const struct ibv_wc *wc);
/* Sends a message of @type; prints why not. */
int pair_send(struct pair *p, uint32_t type, uint32_t ok, uint64_t value);
/* Receives the next message, of @type, within @secs (and reposts its slot). */
int pair_expect(struct pair *p, uint32_t type, struct pair_msg *m,
		double secs);
/* Receives the next message within @secs, whatever its type. */
int pair_recv(struct pair *p, struct pair_msg *m, double secs);
/*
 * Client: @n 64-byte SEND round trips (PING, the server's PONG of the same
 * value); the number done. @us, if set, gets each one's half in
 * microseconds.
 */
int pair_pingpong(struct pair *p, int n, double *us);
/*
 * HELLO exchange of buffer address and R_Key (the "exchange" check). The
 * client sends its HELLO again until the server's QP is ready; the server
 * waits for it (the client may boot later) and answers.
 */
int pair_exchange(struct pair *p);
/*
 * After the scenario (the teardown checks): the first QP goes RTS -> RESET
 * -> INIT -> RESET; the PD cannot go while its MR and QPs exist (EBUSY);
 * then every object is destroyed explicitly, in dependency order.
 */
void pair_teardown(struct pair *p);

#endif /* IBTCA_VERBS_PAIR_H */
