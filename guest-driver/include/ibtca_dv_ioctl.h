/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * ibtca: the driver-specific uverbs ioctl methods behind the provider's
 * direct verbs (ibtcadv.h): DRDMA window ranges as uverbs objects of a
 * user context. The kernel side is ibtca_ib_drdma.c; the provider side
 * providers/ibtca/drdma.c. scripts/build-provider.sh copies this file
 * beside the provider. Documented in docs/drdma-verbs.md.
 */
#ifndef IBTCA_DV_IOCTL_H
#define IBTCA_DV_IOCTL_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>

enum ibtca_dv_objects {
	IBTCA_DV_OBJECT_RANGE = (1U << UVERBS_ID_NS_SHIFT),
};

enum ibtca_dv_range_methods {
	/* A free range of the window for the context, and its mmap offset. */
	IBTCA_DV_METHOD_RANGE_OPEN = (1U << UVERBS_ID_NS_SHIFT),
	IBTCA_DV_METHOD_RANGE_CLOSE,
	/* DRDMA_SUBMIT of the range, owned by the context's doorbell page. */
	IBTCA_DV_METHOD_RANGE_SUBMIT,
	/* DRDMA_COMMIT of bytes stored or loaded (mapped window). */
	IBTCA_DV_METHOD_RANGE_COMMIT,
	/* The range's ARR registers. */
	IBTCA_DV_METHOD_RANGE_QUERY,
	/* The window (no range needed). */
	IBTCA_DV_METHOD_QUERY_WINDOW,
};

enum ibtca_dv_range_open_attrs {
	IBTCA_DV_ATTR_OPEN_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	IBTCA_DV_ATTR_OPEN_INFO,	/* out: struct ibtca_dv_range_info */
};

enum ibtca_dv_range_close_attrs {
	IBTCA_DV_ATTR_CLOSE_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
};

enum ibtca_dv_range_submit_attrs {
	IBTCA_DV_ATTR_SUBMIT_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	IBTCA_DV_ATTR_SUBMIT_WRITE,	/* in: u32, 1 WRITE (stores), 0 READ */
	IBTCA_DV_ATTR_SUBMIT_LENGTH,	/* in: u32, 1 to the range size */
	IBTCA_DV_ATTR_SUBMIT_CTRL,	/* out: u32, ARR_CTRL after it */
};

enum ibtca_dv_range_commit_attrs {
	IBTCA_DV_ATTR_COMMIT_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	IBTCA_DV_ATTR_COMMIT_COUNT,	/* in: u32 bytes */
};

enum ibtca_dv_range_query_attrs {
	IBTCA_DV_ATTR_QUERY_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	IBTCA_DV_ATTR_QUERY_ARR,	/* out: struct ibtca_dv_arr */
};

enum ibtca_dv_query_window_attrs {
	IBTCA_DV_ATTR_WINDOW = (1U << UVERBS_ID_NS_SHIFT),	/* out */
};

struct ibtca_dv_range_info {
	__aligned_u64 mmap_offset;	/* mmap() the range here, range_size */
	__u32 arr;			/* the ARR a direct SGE names */
	__u32 range_size;
};

struct ibtca_dv_arr {
	__u32 ctrl;
	__u32 ttl;
	__u32 wbc;
	__u32 rrpl;
	__u32 resp_offset;
	__u32 drained;
};

struct ibtca_dv_window {
	__u32 ranges;		/* ranges of the window */
	__u32 range_size;	/* bytes per range */
	__u32 mode;		/* IBTCA_DRDMA_MODE_* */
	__u32 pmbs;		/* PMBs dedicated to the window */
};

#endif /* IBTCA_DV_IOCTL_H */
