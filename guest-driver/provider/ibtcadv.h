/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ibtca direct verbs: Direct RDMA (DRDMA) through the device's window for
 * libibverbs programs. Link with -libtca (the ibtca provider, as mlx5dv
 * programs link -lmlx5). Reference: docs/drdma-verbs.md.
 *
 * A range is one page of the window, opened for an RC QP of the context
 * and mapped into this process only. A DRDMA WRITE moves the bytes the
 * program stores into the range to remote memory; a DRDMA READ brings
 * remote bytes into the range, where the program loads them. No buffer in
 * memory, no memory region:
 *
 *   r = ibtcadv_range_open(qp, remote_addr, rkey);
 *   ibtcadv_post_write(r, len, wr_id);      then
 *   ibtcadv_store(r, 0, src, len);          then
 *   ibtcadv_commit(r, len);                 then ibv_poll_cq: RDMA_WRITE
 *
 *   ibtcadv_post_read(r, len, wr_id);       then
 *   ibtcadv_load(r, 0, dst, len);           then ibv_poll_cq: RDMA_READ
 *
 * Functions return 0 or an errno value (the range functions NULL with
 * errno set).
 */
#ifndef IBTCADV_H
#define IBTCADV_H

#include <stdint.h>

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

enum ibtcadv_window_mode {
	/* Every access reaches the device, which counts the bytes stored. */
	IBTCADV_WINDOW_TRAPPED = 0,
	/* Accesses go to memory; ibtcadv_commit tells the device the count. */
	IBTCADV_WINDOW_MAPPED = 1,
};

struct ibtcadv_window {
	uint32_t ranges;	/* ranges in the window (all contexts) */
	uint32_t range_size;	/* bytes per range: the largest transfer */
	uint32_t mode;		/* enum ibtcadv_window_mode */
	uint32_t pmbs;		/* packet memory blocks for the window */
};

/* The device's window; EOPNOTSUPP when it has none. */
int ibtcadv_query_window(struct ibv_context *context,
			 struct ibtcadv_window *window);

struct ibtcadv_range {
	struct ibv_qp *qp;	/* the RC QP transfers are posted on */
	void *addr;		/* the range, mapped (device memory) */
	uint32_t size;		/* bytes */
	uint32_t arr;		/* the device's number of the range */
	/* Where the next transfer writes or reads; may be changed between. */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t mode;		/* enum ibtcadv_window_mode */
	uint32_t handle;	/* the kernel's object */
	uint32_t len;		/* the transfer in progress */
	uint32_t done;		/* its bytes loaded so far (READ) */
	uint32_t drained;	/* bytes committed as loaded (mapped READ) */
	int write;		/* its direction */
};

/*
 * Opens a free range for @qp's transfers to or from @remote_addr under
 * @rkey. ENOSPC: every range is held; EOPNOTSUPP: no window.
 */
struct ibtcadv_range *ibtcadv_range_open(struct ibv_qp *qp,
					 uint64_t remote_addr, uint32_t rkey);
/* Unmaps and closes @range; it is another context's to open afterwards. */
int ibtcadv_range_close(struct ibtcadv_range *range);

/*
 * Starts a DRDMA WRITE of @len bytes (1 to size) at range->remote_addr:
 * the range is submitted and the work request posted (its completion
 * carries @wr_id, opcode IBV_WC_RDMA_WRITE). The device holds it until
 * every byte is stored. EBUSY: the range is in a transfer; ENOBUFS: no
 * packet memory block is free (move the bytes with an ordinary RDMA WRITE
 * instead); ENOMEM: the send queue is full.
 */
int ibtcadv_post_write(struct ibtcadv_range *range, uint32_t len,
		       uint64_t wr_id);
/* Stores @len bytes of @src at @offset of the range (aligned accesses). */
int ibtcadv_store(struct ibtcadv_range *range, uint32_t offset,
		  const void *src, uint32_t len);
/*
 * Tells the device @count more bytes were stored (mapped window; the
 * trapped window counts them itself and this returns 0). EINVAL: the
 * device refused the count.
 */
int ibtcadv_commit(struct ibtcadv_range *range, uint32_t count);

/*
 * Starts a DRDMA READ of @len bytes from range->remote_addr into the
 * range (completion opcode IBV_WC_RDMA_READ, after the last byte is
 * loaded). Errors as ibtcadv_post_write.
 */
int ibtcadv_post_read(struct ibtcadv_range *range, uint32_t len,
		      uint64_t wr_id);
/*
 * Loads the READ's next @len bytes into @dst; @offset must be where the
 * previous load ended (the device shows the responses in order). A load
 * before its bytes have come waits for them. EIO: the READ failed.
 */
int ibtcadv_load(struct ibtcadv_range *range, uint32_t offset, void *dst,
		 uint32_t len);

#ifdef __cplusplus
}
#endif

#endif /* IBTCADV_H */
