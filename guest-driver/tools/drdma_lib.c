// SPDX-License-Identifier: GPL-2.0
/*
 * The DRDMA helpers of ibtca-tool (drdma_lib.h): the driver's DRDMA ioctls
 * (submit, masks, fill, drain, raw window accesses, ARR reads), posting
 * and completing DRDMA work requests, status messages, the range shuffle
 * and count both sides compute. Used by drdma.c, drdma_bench.c,
 * drdma_bounce.c, drdma_path.c and drdma_fan.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "drdma_lib.h"

void dcheck(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("IBTCA-DRDMA", name, ok, fmt, ap);
	va_end(ap);
}

int dr_ioctl(struct dr *d, unsigned long req, void *arg)
{
	return ioctl(d->v.fd, req, arg) < 0 ? -errno : 0;
}

int dr_info(struct dr *d)
{
	memset(&d->info, 0, sizeof(d->info));
	return dr_ioctl(d, IBTCA_IOC_DRDMA_INFO, &d->info);
}

int dr_arr(struct dr *d, uint32_t arr, struct ibtca_drdma_arr *a)
{
	memset(a, 0, sizeof(*a));
	a->arr = arr;
	return dr_ioctl(d, IBTCA_IOC_DRDMA_ARR, a);
}

/* Submits and returns the ARR's CTRL (or -errno). */
int dr_submit(struct dr *d, uint32_t arr, uint32_t dir, uint32_t len,
	      int pmb, uint32_t *ctrl)
{
	struct ibtca_drdma_submit s = {
		.arr = arr,
		.dir = dir,
		.length = len,
		.flags = pmb >= 0 ? IBTCA_UAPI_DRDMA_F_PMB : 0,
		.pmb = pmb >= 0 ? (uint32_t)pmb : 0,
	};
	int ret = dr_ioctl(d, IBTCA_IOC_DRDMA_SUBMIT, &s);

	*ctrl = s.ctrl;
	return ret;
}

static int dr_xfer(struct dr *d, unsigned long req, uint32_t arr,
		   uint32_t off, uint32_t len, uint8_t *buf, uint32_t pattern,
		   uint32_t seed, uint32_t flags)
{
	struct ibtca_drdma_xfer t = {
		.buf = (uintptr_t)buf,
		.arr = arr,
		.offset = off,
		.length = len,
		.pattern = pattern,
		.seed = seed,
		.flags = flags,
	};

	return dr_ioctl(d, req, &t);
}

/* Stores @len bytes of @src at @off in range @arr. */
int dr_fill(struct dr *d, uint32_t arr, uint32_t off, uint32_t len,
	    const uint8_t *src, uint32_t pattern)
{
	return dr_xfer(d, IBTCA_IOC_DRDMA_FILL, arr, off, len,
		       (uint8_t *)src + off, pattern, arr * 7919 + off + 1,
		       d->mapped ? IBTCA_UAPI_DRDMA_F_COMMIT : 0);
}

int dr_fill_nocommit(struct dr *d, uint32_t arr, uint32_t off, uint32_t len,
		     const uint8_t *src, uint32_t pattern)
{
	return dr_xfer(d, IBTCA_IOC_DRDMA_FILL, arr, off, len,
		       (uint8_t *)src + off, pattern, arr * 7919 + off + 1, 0);
}

int dr_mask(struct dr *d, uint32_t op, uint32_t mask, uint32_t dir,
	    uint32_t len, uint32_t *errors)
{
	struct ibtca_drdma_mask m = {
		.op = op,
		.mask = mask,
		.dir = dir,
		.length = len,
	};
	int ret = dr_ioctl(d, IBTCA_IOC_DRDMA_MASK, &m);

	*errors = m.errors;
	return ret;
}

/*
 * Mapped window: waits (up to 10 s) until the response holding byte @off
 * is in range @arr's PMB; returns how many bytes of it are left from @off.
 */
static int dr_wait_response(struct dr *d, uint32_t arr, uint32_t off,
			    uint32_t *left)
{
	struct ibtca_drdma_arr a;
	double t0 = now_s();
	int ret;

	for (;;) {
		ret = dr_arr(d, arr, &a);
		if (ret)
			return ret;
		if ((a.ctrl & IBTCA_ARR_PCI_VALID) && off >= a.resp_offset &&
		    off < a.resp_offset + a.rrpl) {
			*left = a.resp_offset + a.rrpl - off;
			return 0;
		}
		if (!(a.ctrl & IBTCA_ARR_BUSY) || now_s() - t0 > 10.0)
			return -ETIMEDOUT;
		usleep(100);
	}
}

/* Loads @len bytes at @off of range @arr into @dst + @off. */
int dr_drain(struct dr *d, uint32_t arr, uint32_t off, uint32_t len,
	     uint8_t *dst, uint32_t pattern)
{
	uint32_t left, n;
	int ret;

	if (!d->mapped)
		return dr_xfer(d, IBTCA_IOC_DRDMA_DRAIN, arr, off, len,
			       dst + off, pattern, arr * 104729 + off + 1, 0);
	/* Response by response: what is in the PMB, then commit it. */
	while (len) {
		ret = dr_wait_response(d, arr, off, &left);
		if (ret)
			return ret;
		n = len < left ? len : left;
		ret = dr_xfer(d, IBTCA_IOC_DRDMA_DRAIN, arr, off, n, dst + off,
			      pattern, arr * 104729 + off + 1,
			      IBTCA_UAPI_DRDMA_F_COMMIT);
		if (ret)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

/* One raw window access; returns -errno or 0 with *@value (loads). */
int dr_raw(struct dr *d, uint64_t off, uint32_t size, int write,
	   uint64_t *value)
{
	struct ibtca_drdma_raw r = {
		.offset = off,
		.size = size,
		.write = write,
		.value = *value,
	};
	int ret = dr_ioctl(d, IBTCA_IOC_DRDMA_RAW, &r);

	*value = r.value;
	return ret;
}

/* Posts a DRDMA WRITE or READ of range @arr to the peer's @iova. */
int dr_post_more(struct dr *d, uint32_t qpn, uint32_t opcode, uint32_t arr,
		 uint32_t len, uint64_t iova, uint32_t rkey, uint64_t wr_id,
		 int more)
{
	struct ibtca_post_send s = {
		.qpn = qpn,
		.opcode = opcode,
		.wr_id = wr_id,
		.addr = 0,
		.length = len,
		/* IBTCA_SGE_DIRECT is generated as a 64-bit constant. */
		.lkey = (uint32_t)IBTCA_SGE_DIRECT | arr,
		.remote_addr = iova,
		.rkey = rkey,
		.post_flags = more ? IBTCA_UAPI_POST_F_MORE : 0,
	};

	return dr_ioctl(d, IBTCA_IOC_POST_SEND, &s);
}

int dr_post(struct dr *d, uint32_t qpn, uint32_t opcode, uint32_t arr,
	    uint32_t len, uint64_t iova, uint32_t rkey, uint64_t wr_id)
{
	return dr_post_more(d, qpn, opcode, arr, len, iova, rkey, wr_id, 0);
}

/* Checks that @c completes @wr_id with opcode @op and @len bytes. */
static int dr_check_cqe(const struct ibtca_poll_cq *c, int ret,
			uint64_t wr_id, uint8_t op, uint32_t len, char *why,
			size_t whylen)
{
	snprintf(why, whylen, "wr_id=%llu %s", (unsigned long long)c->wr_id,
		 vb_err(ret, c));
	if (ret)
		return ret;
	if (c->wr_id != wr_id || c->status != IBTCA_WC_SUCCESS ||
	    c->opcode != op || c->byte_len != len)
		return -EIO;
	return 0;
}

/* Waits for the completion of @wr_id on @cqn with opcode @op and @len. */
int dr_complete(struct dr *d, uint32_t cqn, uint64_t wr_id,
		uint8_t op, uint32_t len, char *why, size_t whylen)
{
	struct ibtca_poll_cq c;
	int ret = vb_poll(&d->v, cqn, &c, 60);

	return dr_check_cqe(&c, ret, wr_id, op, len, why, whylen);
}

#define DR_POLL_BATCH	32U

/*
 * Waits for the completions of @n work requests, @wr0 and on in order, on
 * @cqn: takes what is ready in batches (POLL_CQ_BATCH, one CQ doorbell
 * each, where POLL_CQ rings one per completion: in a mapped window every
 * BAR write is a round trip) and sleeps in the driver only when nothing
 * is ready.
 */
int dr_complete_n(struct dr *d, uint32_t cqn, uint64_t wr0, uint32_t n,
		  uint8_t op, uint32_t len, char *why, size_t whylen)
{
	struct ibtca_poll_cq c[DR_POLL_BATCH];
	struct ibtca_poll_cq_batch b;
	uint32_t got = 0, i;
	int ret;

	while (got < n) {
		memset(&b, 0, sizeof(b));
		b.cqn = cqn;
		b.max = n - got < DR_POLL_BATCH ? n - got : DR_POLL_BATCH;
		b.entries = (uintptr_t)c;
		if (ioctl(d->v.fd, IBTCA_IOC_POLL_CQ_BATCH, &b) < 0)
			return -errno;
		if (!b.found) {
			ret = vb_poll(&d->v, cqn, &c[0], 60);
			if (ret)
				return dr_check_cqe(&c[0], ret, wr0 + got, op,
						    len, why, whylen);
			b.found = 1;
		}
		for (i = 0; i < b.found; i++, got++) {
			ret = dr_check_cqe(&c[i], 0, wr0 + got, op, len, why,
					   whylen);
			if (ret)
				return ret;
		}
	}
	return 0;
}

const char *dr_bits(uint32_t ctrl)
{
	static char s[64];

	snprintf(s, sizeof(s), "ctrl=0x%x [%s%s%s%s%s] pmb=%u", ctrl,
		 ctrl & IBTCA_ARR_PCI_VALID ? " PCI_V" : "",
		 ctrl & IBTCA_ARR_BR_VALID ? " BR_V" : "",
		 ctrl & IBTCA_ARR_TYPE_WRITE ? " WRITE" : "",
		 ctrl & IBTCA_ARR_BUSY ? " BUSY" : "",
		 ctrl & IBTCA_ARR_FAILED ? " FAILED" : "",
		 (ctrl >> IBTCA_ARR_PMB_SHIFT) & 0xff);
	return s;
}

uint32_t dr_errors(struct dr *d, uint32_t *last)
{
	if (dr_info(d))
		return ~0U;
	if (last)
		*last = d->info.last_error;
	return d->info.errors;
}

int dr_status(struct dr *d, int ok, uint64_t value)
{
	return vb_send_simple(&d->v, DR_STATUS, ok, value);
}

/* ---- server: the TCA side ---- */

/* The shuffle both sides compute: a permutation of 0..n-1 from @seed. */
void dr_perm(uint32_t *p, uint32_t n, uint32_t seed)
{
	uint32_t i, j, x = seed, tmp;

	for (i = 0; i < n; i++)
		p[i] = i;
	for (i = n; i > 1; i--) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		j = x % i;
		tmp = p[i - 1];
		p[i - 1] = p[j];
		p[j] = tmp;
	}
}

uint32_t dr_all_count(uint32_t ranges, uint32_t dedicated)
{
	uint32_t n = ranges < dedicated ? ranges : dedicated;

	return n < DR_ALL_MAX ? n : DR_ALL_MAX;
}
