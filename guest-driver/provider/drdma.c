// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibtca direct verbs (ibtcadv.h): DRDMA window ranges for libibverbs
 * programs. A range is a kernel object of the context (the driver methods
 * of ibtca_dv_ioctl.h, through rdma-core's ioctl commands); its page of
 * the window is mapped here, uncached. Submit and commit are system calls
 * (BAR0 registers stay the kernel's); the work request is written into
 * the QP's mapped send queue like any other (post.c), and the stores and
 * loads go straight to the mapped range.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <util/mmio.h>
#include <util/udma_barrier.h>

#include "ibtca.h"
#include "ibtca_dv_ioctl.h"
#include "ibtcadv.h"

int ibtcadv_query_window(struct ibv_context *context,
			 struct ibtcadv_window *window)
{
	DECLARE_COMMAND_BUFFER(cmd, IBTCA_DV_OBJECT_RANGE,
			       IBTCA_DV_METHOD_QUERY_WINDOW, 1);
	struct ibtca_dv_window w = {};
	int ret;

	fill_attr_out_ptr(cmd, IBTCA_DV_ATTR_WINDOW, &w);
	ret = execute_ioctl(context, cmd);
	if (ret)
		return ret;
	window->ranges = w.ranges;
	window->range_size = w.range_size;
	window->mode = w.mode;
	window->pmbs = w.pmbs;
	return 0;
}

static int ibtcadv_range_destroy(struct ibv_context *context, uint32_t handle)
{
	DECLARE_COMMAND_BUFFER(cmd, IBTCA_DV_OBJECT_RANGE,
			       IBTCA_DV_METHOD_RANGE_CLOSE, 1);

	fill_attr_in_obj(cmd, IBTCA_DV_ATTR_CLOSE_HANDLE, handle);
	return execute_ioctl(context, cmd);
}

struct ibtcadv_range *ibtcadv_range_open(struct ibv_qp *qp,
					 uint64_t remote_addr, uint32_t rkey)
{
	DECLARE_COMMAND_BUFFER(cmd, IBTCA_DV_OBJECT_RANGE,
			       IBTCA_DV_METHOD_RANGE_OPEN, 2);
	struct ibtca_dv_range_info info = {};
	struct ibtcadv_window w;
	struct ib_uverbs_attr *handle;
	struct ibtcadv_range *r;
	int ret;

	if (qp->qp_type != IBV_QPT_RC) {
		errno = EINVAL;
		return NULL;
	}
	ret = ibtcadv_query_window(qp->context, &w);
	if (ret) {
		errno = ret;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	handle = fill_attr_out_obj(cmd, IBTCA_DV_ATTR_OPEN_HANDLE);
	fill_attr_out_ptr(cmd, IBTCA_DV_ATTR_OPEN_INFO, &info);
	ret = execute_ioctl(qp->context, cmd);
	if (ret)
		goto err_free;
	r->handle = read_attr_obj(IBTCA_DV_ATTR_OPEN_HANDLE, handle);
	r->addr = mmap(NULL, info.range_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED, qp->context->cmd_fd, info.mmap_offset);
	if (r->addr == MAP_FAILED) {
		ret = errno;
		ibtcadv_range_destroy(qp->context, r->handle);
		goto err_free;
	}
	r->qp = qp;
	r->size = info.range_size;
	r->arr = info.arr;
	r->remote_addr = remote_addr;
	r->rkey = rkey;
	r->mode = w.mode;
	return r;

err_free:
	free(r);
	errno = ret;
	return NULL;
}

int ibtcadv_range_close(struct ibtcadv_range *r)
{
	int ret;

	munmap(r->addr, r->size);
	ret = ibtcadv_range_destroy(r->qp->context, r->handle);
	free(r);
	return ret;
}

/* DRDMA_SUBMIT of the range for this context (the kernel checks it). */
static int ibtcadv_submit(struct ibtcadv_range *r, int write, uint32_t len)
{
	DECLARE_COMMAND_BUFFER(cmd, IBTCA_DV_OBJECT_RANGE,
			       IBTCA_DV_METHOD_RANGE_SUBMIT, 4);
	uint32_t ctrl;

	fill_attr_in_obj(cmd, IBTCA_DV_ATTR_SUBMIT_HANDLE, r->handle);
	fill_attr_in_uint32(cmd, IBTCA_DV_ATTR_SUBMIT_WRITE, write);
	fill_attr_in_uint32(cmd, IBTCA_DV_ATTR_SUBMIT_LENGTH, len);
	fill_attr_out_ptr(cmd, IBTCA_DV_ATTR_SUBMIT_CTRL, &ctrl);
	return execute_ioctl(r->qp->context, cmd);
}

/* Submits the range and posts the work request naming it. */
static int ibtcadv_post(struct ibtcadv_range *r, int write, uint32_t len,
			uint64_t wr_id)
{
	int ret = EINVAL;

	if (!len || len > r->size)
		return ret;
	ret = ibtcadv_submit(r, write, len);
	if (ret)
		return ret;
	r->len = len;
	r->done = 0;
	r->drained = 0;
	r->write = write;
	/*
	 * A post refused for room leaves the range submitted: a WRITE's
	 * stores or a READ's loads then wait for nothing, and the range stays
	 * busy until the QP is reset or destroyed, as the kernel's would.
	 */
	return ibtca_post_direct(r->qp,
				 write ? IBTCA_WR_DRDMA_WRITE : IBTCA_WR_DRDMA_READ,
				 r->arr, len, r->remote_addr, r->rkey, wr_id);
}

int ibtcadv_post_write(struct ibtcadv_range *r, uint32_t len, uint64_t wr_id)
{
	return ibtcadv_post(r, 1, len, wr_id);
}

int ibtcadv_post_read(struct ibtcadv_range *r, uint32_t len, uint64_t wr_id)
{
	return ibtcadv_post(r, 0, len, wr_id);
}

int ibtcadv_store(struct ibtcadv_range *r, uint32_t offset, const void *src,
		  uint32_t len)
{
	uint8_t *p = (uint8_t *)r->addr;
	const uint8_t *s = src;
	uint64_t q;
	uint32_t end;
	int ret = EINVAL;

	if (offset > r->size || len > r->size - offset)
		return ret;
	end = offset + len;
	/* Byte stores up to alignment, 8-byte stores, byte stores after. */
	for (; offset < end && (offset & 7); offset++, s++)
		mmio_write8(p + offset, *s);
	for (; end - offset >= 8; offset += 8, s += 8) {
		memcpy(&q, s, 8);
		mmio_write64_le(p + offset, htole64(q));
	}
	for (; offset < end; offset++, s++)
		mmio_write8(p + offset, *s);
	return 0;
}

int ibtcadv_commit(struct ibtcadv_range *r, uint32_t count)
{
	DECLARE_COMMAND_BUFFER(cmd, IBTCA_DV_OBJECT_RANGE,
			       IBTCA_DV_METHOD_RANGE_COMMIT, 2);

	if (r->mode != IBTCADV_WINDOW_MAPPED)
		return 0;
	/* The stores reach the page before the device counts them. */
	udma_to_device_barrier();
	fill_attr_in_obj(cmd, IBTCA_DV_ATTR_COMMIT_HANDLE, r->handle);
	fill_attr_in_uint32(cmd, IBTCA_DV_ATTR_COMMIT_COUNT, count);
	return execute_ioctl(r->qp->context, cmd);
}

/* Loads [@offset, @offset + @len) of the range into @dst. */
static void ibtcadv_copy_out(struct ibtcadv_range *r, uint32_t offset,
			     uint8_t *d, uint32_t len)
{
	const uint8_t *p = (const uint8_t *)r->addr;
	uint32_t end = offset + len;
	uint64_t q;

	for (; offset < end && (offset & 7); offset++)
		*d++ = mmio_read8(p + offset);
	for (; end - offset >= 8; offset += 8, d += 8) {
		q = le64toh(mmio_read64_le(p + offset));
		memcpy(d, &q, 8);
	}
	for (; offset < end; offset++)
		*d++ = mmio_read8(p + offset);
}

static int ibtcadv_query_arr(struct ibtcadv_range *r, struct ibtca_dv_arr *a)
{
	DECLARE_COMMAND_BUFFER(cmd, IBTCA_DV_OBJECT_RANGE,
			       IBTCA_DV_METHOD_RANGE_QUERY, 2);

	fill_attr_in_obj(cmd, IBTCA_DV_ATTR_QUERY_HANDLE, r->handle);
	fill_attr_out_ptr(cmd, IBTCA_DV_ATTR_QUERY_ARR, a);
	return execute_ioctl(r->qp->context, cmd);
}

/*
 * Mapped window: the device shows one response at a time (PCI Valid, at
 * RESP_OFFSET, RRPL bytes); each is copied whole and committed, which
 * shows the next. A range no longer busy, or failed, ends the READ.
 */
static int ibtcadv_load_mapped(struct ibtcadv_range *r, uint32_t end)
{
	struct ibtca_dv_arr a;
	int ret;

	while (r->drained < end) {
		ret = ibtcadv_query_arr(r, &a);
		if (ret)
			return ret;
		ret = EIO;
		if (!(a.ctrl & IBTCA_ARR_BUSY) || (a.ctrl & IBTCA_ARR_FAILED))
			return ret;
		if (!(a.ctrl & IBTCA_ARR_PCI_VALID) ||
		    a.resp_offset != r->drained)
			continue;
		udma_from_device_barrier();
		r->drained += a.rrpl;
		ret = ibtcadv_commit(r, a.rrpl);
		if (ret)
			return ret;
	}
	return 0;
}

int ibtcadv_load(struct ibtcadv_range *r, uint32_t offset, void *dst,
		 uint32_t len)
{
	int ret = EINVAL;

	if (r->write || offset != r->done || len > r->len - offset)
		return ret;
	if (r->mode == IBTCADV_WINDOW_MAPPED) {
		ret = ibtcadv_load_mapped(r, offset + len);
		if (ret)
			return ret;
	}
	/* Trapped: a refused load (timeout, failed READ) reads all-ones. */
	ibtcadv_copy_out(r, offset, dst, len);
	r->done = offset + len;
	return 0;
}
