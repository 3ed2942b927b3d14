// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca provider: matches the device by PCI ID and the kernel driver's
 * uverbs ABI version, and opens a context through the kernel's GET_CONTEXT
 * with the ABI version of each side exchanged and checked. The context's
 * doorbell page is mapped for its whole life.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ibtca.h"
#include "ibtca_uverbs.h"

/* Says which side is at which ABI version, and what to do about it. */
static void ibtca_abi_mismatch(struct ibv_device *dev, const char *kernel)
{
	fprintf(stderr,
		"ibtca: %s: the kernel driver %s; this provider speaks ABI %u: install the ibtca module and the ibtca provider from the same ibtca version\n",
		dev->name, kernel, IBTCA_UVERBS_ABI_VERSION);
}

static void ibtca_free_context(struct ibv_context *ibctx)
{
	struct ibtca_context *ctx = to_ibtca_ctx(ibctx);

	munmap(ctx->db, IBTCA_DB_PAGE_SIZE);
	free(ctx->qp_table);
	pthread_mutex_destroy(&ctx->qp_lock);
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

/*
 * The context's own operation, beside its allocation; the verbs are in the
 * tables of the files that define them (verbs.c, qp_ex.c, cq_ex.c, mw.c).
 */
static const struct verbs_context_ops ibtca_context_free_ops = {
	.free_context = ibtca_free_context,
};

static struct verbs_context *ibtca_alloc_context(struct ibv_device *ibdev,
						 int cmd_fd, void *private_data)
{
	struct ibtca_get_context cmd = {
		.abi_version = IBTCA_UVERBS_ABI_VERSION,
	};
	struct ibtca_get_context_resp resp = {};
	struct ibtca_context *ctx;
	int err;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	ctx->db_records = !getenv("IBTCA_DB_RECORDS") ||
			  strcmp(getenv("IBTCA_DB_RECORDS"), "0");
	err = ibv_cmd_get_context(&ctx->ibv_ctx, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (err) {
		/* The kernel driver refuses a request of another ABI. */
		if (err == EPROTO)
			ibtca_abi_mismatch(ibdev, "refused this provider's ABI");
		goto fail;
	}
	if (resp.abi_version != IBTCA_UVERBS_ABI_VERSION) {
		char kernel[48];

		snprintf(kernel, sizeof(kernel), "speaks ABI %u",
			 resp.abi_version);
		ibtca_abi_mismatch(ibdev, kernel);
		err = EPROTO;
		goto fail;
	}
	ctx->max_qp = resp.max_qp;
	ctx->max_qp_wr = resp.max_qp_wr;
	ctx->max_cq = resp.max_cq;
	ctx->max_cqe = resp.max_cqe;
	ctx->max_mr = resp.max_mr;
	ctx->max_pd = resp.max_pd;
	/* An older kernel driver: 128-byte WQEs only. */
	ctx->max_send_sge = resp.max_send_sge ?: resp.max_sge;
	ctx->max_recv_sge = resp.max_recv_sge ?: resp.max_sge;
	ctx->max_srq_sge = resp.max_srq_sge ?: resp.max_sge;
	ctx->max_qp_rd_atom = resp.max_qp_rd_atom;
	ctx->max_mr_size = resp.max_mr_size;
	ctx->db = mmap(NULL, IBTCA_DB_PAGE_SIZE, PROT_WRITE, MAP_SHARED, cmd_fd,
		       resp.db_mmap_offset);
	if (ctx->db == MAP_FAILED) {
		err = errno;
		fprintf(stderr, "ibtca: %s: cannot map the doorbell page: %s\n",
			ibdev->name, strerror(err));
		goto fail;
	}
	pthread_mutex_init(&ctx->qp_lock, NULL);
	verbs_set_ops(&ctx->ibv_ctx, &ibtca_context_free_ops);
	verbs_set_ops(&ctx->ibv_ctx, &ibtca_ctx_ops);
	verbs_set_ops(&ctx->ibv_ctx, &ibtca_qp_ex_ops);
	verbs_set_ops(&ctx->ibv_ctx, &ibtca_cq_ex_ops);
	verbs_set_ops(&ctx->ibv_ctx, &ibtca_mw_ops);
	return &ctx->ibv_ctx;

fail:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	errno = err;
	return NULL;
}

static struct verbs_device *ibtca_device_alloc(struct verbs_sysfs_dev *sdev)
{
	struct ibtca_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->ibv_dev;
}

static void ibtca_device_free(struct verbs_device *vdev)
{
	free(container_of(vdev, struct ibtca_device, ibv_dev));
}

static const struct verbs_match_ent ibtca_match_table[] = {
	VERBS_PCI_MATCH(IBTCA_PCI_VENDOR, IBTCA_PCI_DEVICE, NULL),
	{},
};

static const struct verbs_device_ops ibtca_dev_ops = {
	.name = "ibtca",
	.match_min_abi_version = IBTCA_UVERBS_ABI_VERSION,
	.match_max_abi_version = IBTCA_UVERBS_ABI_VERSION,
	.match_table = ibtca_match_table,
	.alloc_device = ibtca_device_alloc,
	.uninit_device = ibtca_device_free,
	.alloc_context = ibtca_alloc_context,
};

PROVIDER_DRIVER(ibtca, ibtca_dev_ops);
