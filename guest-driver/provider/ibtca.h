/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The ibtca provider: libibverbs' user-space driver for the ibtca virtual
 * InfiniBand TCA (PCI 1234:7ca0).
 */
#ifndef IBTCA_PROVIDER_H
#define IBTCA_PROVIDER_H

#include <stdint.h>

#include <infiniband/driver.h>

#define IBTCA_PCI_VENDOR 0x1234
#define IBTCA_PCI_DEVICE 0x7ca0

struct ibtca_device {
	struct verbs_device ibv_dev;
};

/* An open device: the limits the kernel driver reported when it opened. */
struct ibtca_context {
	struct verbs_context ibv_ctx;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_sge;
	uint32_t max_qp_rd_atom;
	uint64_t max_mr_size;
};

static inline struct ibtca_context *to_ibtca_ctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct ibtca_context, ibv_ctx.context);
}

/* ibtca.c */
void ibtca_free_context(struct ibv_context *ibctx);

/*
 * verbs.c: the verbs of this version, through the kernel. The data path
 * (CQs, QPs, post, poll) is not there yet: libibverbs answers EOPNOTSUPP.
 */
extern const struct verbs_context_ops ibtca_ctx_ops;

#endif /* IBTCA_PROVIDER_H */
