// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: the Direct RDMA window (seed 000). BAR2 is decoded by the device
 * into address ranges, one per Address Range Register (ARR). After a
 * DRDMA WRITE submit, the bytes stored into a range become an RDMA WRITE
 * once the range holds the transfer length; after a DRDMA READ submit,
 * loads from the range return the RDMA READ responses (a load that comes
 * before its data is held by the device).
 *
 * The window is trapped (every access is a vfio-user message that the
 * device counts), so it is mapped with plain pci_iomap(): no write
 * combining, which could merge or reorder stores the device must see one
 * by one. The ioctls move bytes between a user buffer and a range with the
 * access patterns of a bus master bursting into the window: mixed 1, 2, 4
 * and 8-byte accesses (stores in a shuffled order) or memcpy_toio() and
 * memcpy_fromio().
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/io.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/unaligned.h>

#include "ibtca.h"

/* One window access of a fill or drain: @size bytes at @off in the span. */
struct ibtca_drdma_op {
	u16 off;
	u8 size;
	u8 rsvd;
};

/* Largest range size the driver handles (one PMB payload). */
#define IBTCA_DRDMA_RANGE_MAX	4096U

void ibtca_drdma_probe(struct ibtca_dev *idev)
{
	struct pci_dev *pdev = idev->pdev;
	u32 bar, ranges, size;
	u64 len;

	if (!(ibtca_rd(idev, IBTCA_REG_CAPS) & IBTCA_CAP_DRDMA))
		return;
	bar = ibtca_rd(idev, IBTCA_REG_DRDMA_BAR);
	ranges = ibtca_rd(idev, IBTCA_REG_DRDMA_RANGES);
	size = ibtca_rd(idev, IBTCA_REG_DRDMA_RANGE_SIZE);
	len = pci_resource_len(pdev, IBTCA_DRDMA_WINDOW_BAR);
	if (bar != IBTCA_DRDMA_WINDOW_BAR || !ranges ||
	    ranges > IBTCA_DRDMA_MAX_RANGES || !size ||
	    size > IBTCA_DRDMA_RANGE_MAX ||
	    !(pci_resource_flags(pdev, bar) & IORESOURCE_MEM) ||
	    len < (u64)ranges * size ||
	    IBTCA_DRDMA_ARR_BASE + ranges * IBTCA_DRDMA_ARR_STRIDE >
	    idev->bar0_len) {
		dev_warn(&pdev->dev,
			 "DRDMA window unusable (BAR%u, %u ranges of %u, BAR len %llu)\n",
			 bar, ranges, size, (unsigned long long)len);
		return;
	}
	idev->win = pci_iomap(pdev, bar, len);
	if (!idev->win) {
		dev_warn(&pdev->dev, "cannot map the DRDMA window BAR%u\n", bar);
		return;
	}
	idev->win_len = len;
	idev->drdma_ranges = ranges;
	idev->drdma_range_size = size;
	pr_info("DRDMA window BAR%u: %u ranges of %u bytes\n", bar, ranges,
		size);
}

void ibtca_drdma_remove(struct ibtca_dev *idev)
{
	if (!idev->win)
		return;
	pci_iounmap(idev->pdev, idev->win);
	idev->win = NULL;
}

static u32 ibtca_drdma_arr_rd(struct ibtca_dev *idev, u32 arr, u32 field)
{
	return ibtca_rd(idev, IBTCA_DRDMA_ARR_BASE +
			arr * IBTCA_DRDMA_ARR_STRIDE + field);
}

static void ibtca_drdma_info(struct ibtca_dev *idev,
			     struct ibtca_drdma_info *in)
{
	memset(in, 0, sizeof(*in));
	in->window_len = idev->win_len;
	in->bar = ibtca_rd(idev, IBTCA_REG_DRDMA_BAR);
	in->ranges = ibtca_rd(idev, IBTCA_REG_DRDMA_RANGES);
	in->range_size = ibtca_rd(idev, IBTCA_REG_DRDMA_RANGE_SIZE);
	in->pmbs = ibtca_rd(idev, IBTCA_REG_DRDMA_PMBS);
	in->pmb_dedicated = ibtca_rd(idev, IBTCA_REG_DRDMA_PMB_DEDICATED);
	in->errors = ibtca_rd(idev, IBTCA_REG_DRDMA_ERRORS);
	in->last_error = ibtca_rd(idev, IBTCA_REG_DRDMA_LAST_ERROR);
	in->load_timeout_us = ibtca_rd(idev, IBTCA_REG_DRDMA_LOAD_TIMEOUT_US);
	in->mode = ibtca_rd(idev, IBTCA_REG_DRDMA_MODE);
}

static int ibtca_drdma_arr(struct ibtca_dev *idev, struct ibtca_drdma_arr *a)
{
	if (a->arr >= idev->drdma_ranges)
		return -EINVAL;
	a->ctrl = ibtca_drdma_arr_rd(idev, a->arr, IBTCA_ARR_CTRL);
	a->ttl = ibtca_drdma_arr_rd(idev, a->arr, IBTCA_ARR_TTL);
	a->wbc = ibtca_drdma_arr_rd(idev, a->arr, IBTCA_ARR_WBC);
	a->rrpl = ibtca_drdma_arr_rd(idev, a->arr, IBTCA_ARR_RRPL);
	a->resp_offset = ibtca_drdma_arr_rd(idev, a->arr, IBTCA_ARR_RESP_OFFSET);
	a->drained = ibtca_drdma_arr_rd(idev, a->arr, IBTCA_ARR_DRAINED);
	a->reserved = 0;
	return 0;
}

/*
 * One write of DRDMA_SUBMIT. The device validates the request; only what
 * cannot be encoded is refused here.
 */
static int ibtca_drdma_submit(struct ibtca_dev *idev,
			      struct ibtca_drdma_submit *s)
{
	u64 v;

	if (s->arr > 0xffff || s->dir > IBTCA_UAPI_DRDMA_WRITE ||
	    (s->flags & ~IBTCA_UAPI_DRDMA_F_PMB) || s->pmb > 0xff)
		return -EINVAL;
	v = s->arr | (u64)s->length << 32;
	if (s->dir == IBTCA_UAPI_DRDMA_WRITE)
		v |= IBTCA_DRDMA_SUBMIT_WRITE;
	if (s->flags & IBTCA_UAPI_DRDMA_F_PMB)
		v |= IBTCA_DRDMA_SUBMIT_PMB | s->pmb << 24;
	writeq(v, idev->regs + IBTCA_REG_DRDMA_SUBMIT);
	/* The read also flushes the posted submit. */
	s->ctrl = s->arr < idev->drdma_ranges ?
		  ibtca_drdma_arr_rd(idev, s->arr, IBTCA_ARR_CTRL) : 0;
	return 0;
}

/*
 * One write of DRDMA_SUBMIT_MASK or DRDMA_COMMIT_MASK (the device checks
 * each range); DRDMA_ERRORS is read back, which also flushes the write.
 */
static int ibtca_drdma_mask(struct ibtca_dev *idev, struct ibtca_drdma_mask *m)
{
	u64 v;
	u32 reg;

	if (m->base > 0xffff || m->op > IBTCA_UAPI_DRDMA_MASK_COMMIT)
		return -EINVAL;
	v = m->mask | (u64)m->base << 48;
	if (m->op == IBTCA_UAPI_DRDMA_MASK_SUBMIT) {
		if (m->dir > IBTCA_UAPI_DRDMA_WRITE || m->length > 0x1fff)
			return -EINVAL;
		v |= (u64)m->length << 32;
		if (m->dir == IBTCA_UAPI_DRDMA_WRITE)
			v |= IBTCA_DRDMA_MASK_WRITE;
		reg = IBTCA_REG_DRDMA_SUBMIT_MASK;
	} else {
		reg = IBTCA_REG_DRDMA_COMMIT_MASK;
	}
	writeq(v, idev->regs + reg);
	m->errors = ibtca_rd(idev, IBTCA_REG_DRDMA_ERRORS);
	return 0;
}

static u32 ibtca_xorshift(u32 *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/*
 * Splits [@base, @base + @len) of a range into naturally aligned accesses
 * of at most @max bytes (sizes drawn from @x when @x is set; natural
 * alignment keeps every access inside one read response, whatever the path
 * MTU). Offsets in @ops are relative to @base. Returns the count.
 */
static u32 ibtca_drdma_split(struct ibtca_drdma_op *ops, u32 base, u32 len,
			     u32 *x)
{
	u32 pos = 0, n = 0, size;

	while (pos < len) {
		size = x ? 8U >> (ibtca_xorshift(x) & 3) : 8U;
		while (size > 1 && (((base + pos) & (size - 1)) ||
				    pos + size > len))
			size >>= 1;
		ops[n].off = pos;
		ops[n].size = size;
		ops[n].rsvd = 0;
		n++;
		pos += size;
	}
	return n;
}

/* Fisher-Yates shuffle of @ops driven by @x. */
static void ibtca_drdma_shuffle(struct ibtca_drdma_op *ops, u32 n, u32 *x)
{
	struct ibtca_drdma_op t;
	u32 i, j;

	for (i = n; i > 1; i--) {
		j = ibtca_xorshift(x) % i;
		t = ops[i - 1];
		ops[i - 1] = ops[j];
		ops[j] = t;
	}
}

static void ibtca_drdma_store(void __iomem *p, const u8 *src, u8 size)
{
	switch (size) {
	case 1:
		iowrite8(*src, p);
		break;
	case 2:
		iowrite16(get_unaligned_le16(src), p);
		break;
	case 4:
		iowrite32(get_unaligned_le32(src), p);
		break;
	default:
		writeq(get_unaligned_le64(src), p);
		break;
	}
}

static void ibtca_drdma_load(void __iomem *p, u8 *dst, u8 size)
{
	switch (size) {
	case 1:
		*dst = ioread8(p);
		break;
	case 2:
		put_unaligned_le16(ioread16(p), dst);
		break;
	case 4:
		put_unaligned_le32(ioread32(p), dst);
		break;
	default:
		put_unaligned_le64(readq(p), dst);
		break;
	}
}

/* Runs @ops on @p (the span in the window), copying to or from @buf. */
static int ibtca_drdma_run(void __iomem *p, u8 *buf,
			   const struct ibtca_drdma_op *ops, u32 n, bool store)
{
	u32 i;

	for (i = 0; i < n; i++) {
		if (store)
			ibtca_drdma_store(p + ops[i].off, buf + ops[i].off,
					  ops[i].size);
		else
			ibtca_drdma_load(p + ops[i].off, buf + ops[i].off,
					 ops[i].size);
		/* Each access is a round trip to the device: stay preemptible. */
		if (!(i & 255)) {
			if (fatal_signal_pending(current))
				return -EINTR;
			cond_resched();
		}
	}
	return 0;
}

/* DRDMA_FILL (@store) or DRDMA_DRAIN. */
static int ibtca_drdma_xfer(struct ibtca_dev *idev, struct ibtca_drdma_xfer *t,
			    bool store)
{
	void __user *ubuf = u64_to_user_ptr(t->buf);
	struct ibtca_drdma_op *ops = NULL;
	void __iomem *p;
	u32 n = 0, x;
	u64 t0;
	int ret = 0;
	u8 *buf;

	t->accesses = 0;
	t->ns = 0;
	t->reserved = 0;
	if (t->arr >= idev->drdma_ranges || !t->length ||
	    t->offset > idev->drdma_range_size ||
	    t->length > idev->drdma_range_size - t->offset ||
	    t->pattern > IBTCA_UAPI_DRDMA_PAT_QWORD ||
	    (t->flags & ~IBTCA_UAPI_DRDMA_F_COMMIT))
		return -EINVAL;
	p = idev->win + (u64)t->arr * idev->drdma_range_size + t->offset;

	buf = kmalloc(t->length, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	if (t->pattern != IBTCA_UAPI_DRDMA_PAT_MEMCPY) {
		ops = kmalloc_array(t->length, sizeof(*ops), GFP_KERNEL);
		if (!ops) {
			ret = -ENOMEM;
			goto out;
		}
		x = t->seed ? t->seed : 0x9e3779b9U;
		n = ibtca_drdma_split(ops, t->offset, t->length,
				      t->pattern == IBTCA_UAPI_DRDMA_PAT_MIXED ?
				      &x : NULL);
		if (store && t->pattern == IBTCA_UAPI_DRDMA_PAT_MIXED)
			ibtca_drdma_shuffle(ops, n, &x);
	}
	if (store && copy_from_user(buf, ubuf, t->length)) {
		ret = -EFAULT;
		goto out;
	}

	t0 = ktime_get_ns();
	if (!ops && store)
		memcpy_toio(p, buf, t->length);
	else if (!ops)
		memcpy_fromio(buf, p, t->length);
	else
		ret = ibtca_drdma_run(p, buf, ops, n, store);
	if (!ret && (t->flags & IBTCA_UAPI_DRDMA_F_COMMIT))
		ibtca_wr(idev, IBTCA_REG_DRDMA_COMMIT, t->arr | t->length << 16);
	t->ns = ktime_get_ns() - t0;
	t->accesses = n;

	if (!ret && !store && copy_to_user(ubuf, buf, t->length))
		ret = -EFAULT;
out:
	kfree(ops);
	kfree(buf);
	return ret;
}

static int ibtca_drdma_raw(struct ibtca_dev *idev, struct ibtca_drdma_raw *r)
{
	void __iomem *p;
	u8 b[8];

	if ((r->size != 1 && r->size != 2 && r->size != 4 && r->size != 8) ||
	    (r->offset & (r->size - 1)) || r->offset >= idev->win_len ||
	    r->size > idev->win_len - r->offset || r->write > 1)
		return -EINVAL;
	p = idev->win + r->offset;
	if (r->write) {
		put_unaligned_le64(r->value, b);
		ibtca_drdma_store(p, b, r->size);
	} else {
		memset(b, 0, sizeof(b));
		ibtca_drdma_load(p, b, r->size);
		r->value = get_unaligned_le64(b);
	}
	return 0;
}

long ibtca_drdma_ioctl(struct ibtca_ctx *ctx, unsigned int cmd,
		       void __user *argp)
{
	union {
		struct ibtca_drdma_info info;
		struct ibtca_drdma_submit submit;
		struct ibtca_drdma_xfer xfer;
		struct ibtca_drdma_arr arr;
		struct ibtca_drdma_raw raw;
		struct ibtca_drdma_mask mask;
	} u;
	struct ibtca_dev *idev = ctx->idev;
	size_t size = _IOC_SIZE(cmd);
	long ret;

	switch (cmd) {
	case IBTCA_IOC_DRDMA_INFO:
	case IBTCA_IOC_DRDMA_SUBMIT:
	case IBTCA_IOC_DRDMA_FILL:
	case IBTCA_IOC_DRDMA_DRAIN:
	case IBTCA_IOC_DRDMA_ARR:
	case IBTCA_IOC_DRDMA_RAW:
	case IBTCA_IOC_DRDMA_MASK:
		break;
	default:
		return -ENOTTY;
	}
	memset(&u, 0, sizeof(u));
	if ((_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(&u, argp, size))
		return -EFAULT;

	/*
	 * Ranges belong to the device, not to the context: no context lock,
	 * so that a long drain does not hold up the context's other calls.
	 */
	down_read(&idev->hw_sem);
	if (READ_ONCE(idev->dead)) {
		ret = -ENODEV;
		goto out;
	}
	if (!idev->win) {
		ret = -EOPNOTSUPP;
		goto out;
	}
	switch (cmd) {
	case IBTCA_IOC_DRDMA_INFO:
		ibtca_drdma_info(idev, &u.info);
		ret = 0;
		break;
	case IBTCA_IOC_DRDMA_SUBMIT:
		ret = ibtca_drdma_submit(idev, &u.submit);
		break;
	case IBTCA_IOC_DRDMA_FILL:
		ret = ibtca_drdma_xfer(idev, &u.xfer, true);
		break;
	case IBTCA_IOC_DRDMA_DRAIN:
		ret = ibtca_drdma_xfer(idev, &u.xfer, false);
		break;
	case IBTCA_IOC_DRDMA_ARR:
		ret = ibtca_drdma_arr(idev, &u.arr);
		break;
	case IBTCA_IOC_DRDMA_MASK:
		ret = ibtca_drdma_mask(idev, &u.mask);
		break;
	default:
		ret = ibtca_drdma_raw(idev, &u.raw);
		break;
	}
out:
	up_read(&idev->hw_sem);
	if (!ret && (_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(argp, &u, size))
		ret = -EFAULT;
	return ret;
}
