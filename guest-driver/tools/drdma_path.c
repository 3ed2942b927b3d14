// SPDX-License-Identifier: GPL-2.0
/*
 * The DRDMA submit with the seed's fallback (seed 000, Fig 17 and Fig 18a
 * step 1804): when every DRDMA-dedicated PMB is allocated the device
 * refuses the submit (the range stays free, DRDMA_LAST_ERROR says NO_PMB
 * on it) and the I/O goes "conventional double buffered": the controller's
 * bytes go through a bounce buffer in guest memory (a slot of the
 * registered buffer) and an ordinary RDMA WRITE or READ moves them.
 *
 * A transfer on a path is: dr_path_submit(), then for a WRITE (PCI to IB)
 * dr_path_store() and dr_path_post() in the order the path needs (a bounce
 * buffer is filled before its WRITE is posted; a window range may be
 * filled after, its WRITE waits for it), for a READ (IB to PCI)
 * dr_path_post(), then dr_path_load() (a window range: loads as the
 * responses come, before the completion; a bounce buffer: after the
 * completion). drdma_lib.h describes the calls.
 */
#include <errno.h>
#include <string.h>

#include "drdma_lib.h"

int dr_path_submit(struct dr *d, uint32_t arr, uint32_t dir, uint32_t len,
		   uint32_t bounce_off, struct dr_path *p)
{
	uint32_t ctrl = 0, errors0, last = 0;
	int ret;

	if (bounce_off > VB_BUF_SIZE || len > VB_BUF_SIZE - bounce_off)
		return -EINVAL;
	errors0 = dr_errors(d, NULL);
	ret = dr_submit(d, arr, dir, len, -1, &ctrl);
	if (ret)
		return ret;
	memset(p, 0, sizeof(*p));
	p->arr = arr;
	p->dir = dir;
	p->len = len;
	if (ctrl & IBTCA_ARR_BUSY) {
		d->direct++;
		return 0;
	}
	/* Refused: only "no dedicated PMB free" falls back. */
	if (dr_errors(d, &last) != errors0 + 1 ||
	    last != (IBTCA_DRDMA_ERR_NO_PMB | arr << 8))
		return -EIO;
	p->bounce = 1;
	p->bounce_off = bounce_off;
	d->bounced++;
	return 0;
}

int dr_path_post(struct dr *d, const struct dr_path *p, uint32_t qpn,
		 uint64_t iova, uint32_t rkey, uint64_t wr_id)
{
	int write = p->dir == IBTCA_UAPI_DRDMA_WRITE;
	struct ibtca_post_send s = {
		.qpn = qpn,
		.wr_id = wr_id,
		.addr = d->v.iova + p->bounce_off,
		.length = p->len,
		.lkey = d->v.lkey,
		.remote_addr = iova,
		.rkey = rkey,
	};

	if (!p->bounce)
		return dr_post(d, qpn, write ? IBTCA_WR_DRDMA_WRITE :
			       IBTCA_WR_DRDMA_READ, p->arr, p->len, iova, rkey,
			       wr_id);
	s.opcode = write ? IBTCA_WR_RDMA_WRITE : IBTCA_WR_RDMA_READ;
	return dr_ioctl(d, IBTCA_IOC_POST_SEND, &s);
}

int dr_path_store(struct dr *d, const struct dr_path *p, const uint8_t *src)
{
	if (!p->bounce)
		return dr_fill(d, p->arr, 0, p->len, src,
			       IBTCA_UAPI_DRDMA_PAT_MIXED);
	memcpy(d->v.buf + p->bounce_off, src, p->len);
	return 0;
}

int dr_path_load(struct dr *d, const struct dr_path *p, uint8_t *dst)
{
	if (!p->bounce)
		return dr_drain(d, p->arr, 0, p->len, dst,
				IBTCA_UAPI_DRDMA_PAT_MIXED);
	memcpy(dst, d->v.buf + p->bounce_off, p->len);
	return 0;
}

uint8_t dr_path_wc(const struct dr_path *p)
{
	if (p->dir == IBTCA_UAPI_DRDMA_WRITE)
		return p->bounce ? IBTCA_WC_RDMA_WRITE : IBTCA_WC_DRDMA_WRITE;
	return p->bounce ? IBTCA_WC_RDMA_READ : IBTCA_WC_DRDMA_READ;
}
