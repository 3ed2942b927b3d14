/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-tool's verbs helpers (verbs_lib.c): they set up a PD, an MR over a
 * 2 MiB buffer, CQs and two RC QPs connected to a peer guest's, exchange
 * buffer addresses and R_Keys (HELLO) and carry 64-byte messages over
 * SEND/RECV. The DRDMA scenarios build on them (the verbs scenario,
 * verbs-bench and the soak are ibtca-verbs', tools/verbs/).
 */
#ifndef IBTCA_TOOL_VERBS_LIB_H
#define IBTCA_TOOL_VERBS_LIB_H

#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ibtca_abi.h"
#include "ibtca_regs.h"
#include "ibtca_uapi.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define VB_BUF_SIZE	(2U << 20)
#define VB_BULK_OFF	0x000000U	/* 1 MiB: RDMA WRITE source/target */
/* 0x100000-0x12ffff: not used by the helpers */
#define VB_BULK_LEN	(1U << 20)
#define VB_SEND_OFF	0x130000U	/* outgoing messages */
#define VB_RECV_OFF	0x140000U	/* receive slots */
#define VB_SLOT		256U
#define VB_NRECV	16U
/*
 * The first QP number the tool gets: a fresh device numbers its QPs from
 * 0x400, and the RDMA core's MAD layer takes the first two (QP0 and QP1)
 * when the driver registers ibtca0.
 */
#define VB_QPN0		0x402U
#define VB_PSN		100U
#define VB_MAGIC	0x49425642U	/* "IBVB" */

/* Message types; other scenarios number theirs from VB_USER. */
enum { VB_HELLO = 1, VB_RESULT = 3, VB_BYE = 6, VB_USER = 0x40 };

/* A message; 64 bytes. */
struct vb_msg {
	uint32_t magic;
	uint32_t type;
	uint64_t iova;
	uint32_t rkey;
	uint32_t ok;
	uint64_t value;
	uint8_t pad[32];
};

struct vb {
	int fd;
	int server;
	uint16_t peer_lid;
	uint8_t sl;		/* service level of both QPs (--sl) */
	uint32_t wait_s;	/* server: seconds to wait for the HELLO (--wait) */
	uint8_t *buf;
	uint64_t iova;
	uint32_t lkey, rkey;
	uint32_t pdn, scq, rcq, scq2, qp, qp2;
	uint64_t peer_iova;
	uint32_t peer_rkey;
	uint64_t wr_id;
	uint8_t mtu[2];		/* IBTCA_MTU_* of qp, qp2; 0 means 4096 */
	/*
	 * QPNs when one guest talks to several peers (each peer has its own
	 * struct vb, set up in turn): qpn0 is what this guest's qp must get
	 * (its qp2 is qpn0 + 1), peer_qpn0 the peer's; 0 means VB_QPN0.
	 * @tag ("_b") suffixes the exchange check's name.
	 */
	uint32_t qpn0, peer_qpn0;
	const char *tag;
};

/*
 * ACK timeout exponent (4.096 us << EXP: 14 is 67 ms) and transport
 * retries of the QPs the verbs helpers connect: perftest's defaults, so a
 * peer that stops answering fails a request after (retry + 1) x timeout,
 * about half a second. --timeout and --retry change them (vb_qp_option).
 */
#define VB_TIMEOUT_DEFAULT	14U
#define VB_RETRY_DEFAULT	7U
extern uint8_t vb_timeout, vb_retry;

int vb_qp_option(const char *opt, const char *val);
double now_s(void);

void vb_pattern(uint8_t *p, size_t len, uint8_t seed);
size_t vb_pattern_diff(const uint8_t *p, size_t len, uint8_t seed);
/* Waits up to 60 s for the port to be active. */
int vb_wait_port(struct vb *v);
/* QP @qpn to RTS against @dest_qpn at v->peer_lid, PSNs VB_PSN. */
int vb_modify(struct vb *v, uint32_t qpn, uint32_t dest_qpn, uint8_t mtu);
int vb_setup(struct vb *v, char *err, size_t errlen);
int vb_exchange(struct vb *v);
int vb_poll(struct vb *v, uint32_t cqn, struct ibtca_poll_cq *c, double secs);
int vb_run(struct vb *v, struct ibtca_post_send *s, uint32_t cqn,
	   struct ibtca_poll_cq *c, double secs);
const char *vb_err(int ret, const struct ibtca_poll_cq *c);
int vb_send(struct vb *v, struct vb_msg *m, double secs,
	    struct ibtca_poll_cq *c);
int vb_send_simple(struct vb *v, uint32_t type, uint32_t ok, uint64_t value);
int vb_recv(struct vb *v, struct vb_msg *m, double secs);
int vb_expect_within(struct vb *v, uint32_t type, struct vb_msg *m,
		     double secs);
int vb_expect(struct vb *v, uint32_t type, struct vb_msg *m);

#endif /* IBTCA_TOOL_VERBS_LIB_H */
