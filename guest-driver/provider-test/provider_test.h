/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What the parts of ibtca-provider-test share. */
#ifndef IBTCA_PROVIDER_TEST_H
#define IBTCA_PROVIDER_TEST_H

#include <stdint.h>

#include <infiniband/verbs.h>

/* One IBTCA-PROVIDER line: @name PASS or FAIL, then the details. */
void step(const char *name, int ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Moves RC QP @qp to RTS towards QP @dqpn at LID @dlid (PSNs 0), remote
 * writes, reads and atomics allowed. */
int rc_connect(struct ibv_qp *qp, uint32_t dqpn, uint16_t dlid);

/* ibtca_provider_ext.c: the ibv_wr_* API, extended CQs, memory windows. */
void ext_tests(struct ibv_context *ctx, struct ibv_pd *pd);

/* ibtca_provider_bypass.c: posts and polls make no system call. */
void bypass_tests(struct ibv_context *ctx, struct ibv_pd *pd);

#endif
