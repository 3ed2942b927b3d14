/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What the parts of ibtca-provider-test share. */
#ifndef IBTCA_PROVIDER_TEST_H
#define IBTCA_PROVIDER_TEST_H

#include <stdint.h>

#include <infiniband/verbs.h>

/* ibtca_provider_lib.c: what the parts share. */

/* One IBTCA-PROVIDER line: @name PASS or FAIL, then the details. */
void step(const char *name, int ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* How many steps failed so far. */
int step_failures(void);

/* Moves RC QP @qp to RTS towards QP @dqpn at LID @dlid (PSNs 0), remote
 * writes, reads and atomics allowed.
 */
int rc_connect(struct ibv_qp *qp, uint32_t dqpn, uint16_t dlid);

/* Opens device @name (a step "open" says how it went); NULL if it fails. */
struct ibv_context *open_named(const char *name);
/* The uverbs character device of the device open_named() last found. */
const char *opened_uverbs_dev(void);

/* One signaled RDMA WRITE of @len bytes at @src (@lkey's region, or any
 * memory with IBV_SEND_INLINE in @flags) to @raddr/@rkey on @qp, whose
 * sends complete on @cq: the completion's status, -1 - errno if the post
 * failed, -2 without a completion within 30 s.
 */
int write_once(struct ibv_qp *qp, struct ibv_cq *cq, const void *src,
	       uint32_t lkey, size_t len, unsigned int flags,
	       uint64_t raddr, uint32_t rkey);

/* Destroys what a test made, those not NULL: the QPs, then the regions,
 * the CQ and the PD.
 */
void close_objects(struct ibv_qp *qa, struct ibv_qp *qb, struct ibv_mr *ma,
		   struct ibv_mr *mb, struct ibv_cq *cq, struct ibv_pd *pd);

/* A TCP connection to @server's @port, tried once a second for 180 s;
 * the socket, or -1 (ibtca_provider_remote.c).
 */
int tcp_dial(const char *server, const char *port);

/* ibtca_provider_remote.c: an RDMA WRITE with a wrong R_Key between two
 * hosts, set up over TCP; exit statuses.
 */
int bad_rkey_server(void);
int bad_rkey_client(const char *server);

/* ibtca_provider_abi.c: opens @dev while GET_CONTEXT answers with kernel
 * ABI @kernel_abi; the provider must refuse it with EPROTO and say why on
 * stderr, after a line start "IBTCA-PROVIDER-ABI ".
 */
void provider_abi_mismatch(struct ibv_device *dev, uint32_t kernel_abi);

/* ibtca_provider_ext.c: the ibv_wr_* API, extended CQs, memory windows. */
void ext_tests(struct ibv_context *ctx, struct ibv_pd *pd);

/* ibtca_provider_bypass.c: posts and polls make no system call. */
void bypass_tests(struct ibv_context *ctx, struct ibv_pd *pd);

/* ibtca_provider_seed.c: the kernel's checks of modify_qp's driver data
 * (seed 002's choices) on device @name; its steps count as failures.
 */
int seed_udata_test(const char *name);
/* The same file: a loopback RC QP connected with this process's seed 002
 * variables and a WRITE through it; 0 if it connected.
 */
int seed_env_test(const char *name);
/* ibtca_provider_sge.c: a SEND and an RDMA WRITE of 32 SGEs each, into a
 * receive of 32 SGEs, every byte checked: between two QPs of @ctx, or
 * between two hosts over TCP (exit statuses).
 */
void sge_loopback(struct ibv_context *ctx);
/* sge_loopback on an SRQ of 32 SGEs, and an SRQ of more refused; failures. */
int sge_srq_loopback(struct ibv_context *ctx);
int sge_server(void);
int sge_client(const char *server);
/* ibtca_provider_ud.c: a UD QP refuses IBV_SEND_INLINE, sends without. */
void ud_tests(struct ibv_context *ctx, struct ibv_pd *pd);

#endif
