/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-verbs' libibverbs helpers (rc.c): the device opened, the port
 * waited for, an RC QP connected to a peer known by LID and QP number (no
 * out-of-band exchange: the peer's numbers come from the command line or
 * from a rule both sides follow), and completions waited for with a
 * deadline through a completion channel.
 */
#ifndef IBTCA_VERBS_RC_H
#define IBTCA_VERBS_RC_H

#include <stdint.h>
#include <stdio.h>

#include <infiniband/verbs.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * The first QP number a user gets: a fresh device numbers its QPs from
 * 0x400 and the RDMA core's MAD layer takes the first two (QP0 and QP1)
 * when the driver registers ibtca0. Two guests that create their QPs in
 * the same order know each other's numbers without an exchange.
 */
#define RC_QPN0		0x402U

/* Both ends start at this PSN (the ATM gateway map's sq_psn and rq_psn). */
#define RC_PSN		100U

/*
 * ACK timeout exponent (4.096 us << EXP: 14 is 67 ms) and transport
 * retries: perftest's defaults, as ibtca-tool's (--timeout, --retry).
 */
#define RC_TIMEOUT_DEFAULT	14U
#define RC_RETRY_DEFAULT	7U

struct rc_path {
	uint16_t dlid;
	uint8_t sl;		/* service level, 0-14 */
	uint8_t timeout;	/* ACK timeout exponent, 0-31 (0: none) */
	uint8_t retry;		/* transport retries, 0-7 */
	uint8_t rd_atomic;	/* READs and atomics in flight each way (0: 1) */
	unsigned int access;	/* IBV_ACCESS_REMOTE_* the QP grants its peer */
	enum ibv_mtu mtu;	/* path MTU (0: 4096) */
};

/* A CQ with its own completion channel, so a wait can have a deadline. */
struct rc_cq {
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
};

/* @s as a number (0x... hex, 0... octal); -1 if it is none or too big. */
int rc_parse_u32(const char *s, uint32_t *out);
/*
 * --timeout EXP and --retry N into @path: 1 if @opt is one of them and
 * @val is good, 0 if @opt is neither, -1 (with a message) for a bad value.
 */
int rc_qp_option(struct rc_path *path, const char *opt, const char *val);
/* CLOCK_MONOTONIC in seconds. */
double rc_now(void);
/* The device named @name (NULL: the first), opened; NULL with a message. */
struct ibv_context *rc_open(const char *name);
/*
 * Every int-returning helper below returns 0 or a negative errno value.
 * rc_wait_port waits up to @secs for port 1 to be active (port events, no
 * polling).
 */
int rc_wait_port(struct ibv_context *ctx, double secs);
int rc_cq_create(struct ibv_context *ctx, int entries, struct rc_cq *cq);
/*
 * @qp from RESET to RTS against QP @dest_qpn on @path, PSNs RC_PSN:
 * rc_init, then rc_ready.
 */
int rc_connect(struct ibv_qp *qp, const struct rc_path *path,
	       uint32_t dest_qpn);
/* @qp from RESET to INIT (port 1, @path's access), where it takes receives. */
int rc_init(struct ibv_qp *qp, const struct rc_path *path);
/* @qp from INIT through RTR to RTS against QP @dest_qpn on @path. */
int rc_ready(struct ibv_qp *qp, const struct rc_path *path,
	     uint32_t dest_qpn);
/*
 * Takes the next completion of @cq into @wc, waiting up to @secs (asleep
 * on the channel); -ETIMEDOUT if none came.
 */
int rc_wait(struct rc_cq *cq, struct ibv_wc *wc, double secs);
/* "status=... opcode=... byte_len=..." of @wc (a static buffer). */
const char *rc_wc_str(const struct ibv_wc *wc);

#endif /* IBTCA_VERBS_RC_H */
