// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: guest driver for the virtual InfiniBand TCA served by the
 * ibtca-device vfio-user server.
 *
 * The driver binds the PCI function, checks the register interface, sets up
 * MSI-X, runs a short self-test at probe time and exposes /dev/ibtcaN with
 * ioctls (see ibtca_uapi.h) that let user space inspect and exercise the
 * device: register access, interrupt delivery, DMA and MMIO timing.
 *
 * The verbs interface: a command queue in coherent memory (commands complete
 * with an interrupt on vector 0, polled as a fallback), and per open file a
 * verbs context whose buffers, PDs, MRs, CQs and QPs user space drives with
 * the ioctls of ibtca_uapi.h. Work requests and completions go through
 * rings in coherent memory and posted doorbell writes, never a register
 * read.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/kref.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "ibtca_abi.h"
#include "ibtca_regs.h"
#include "ibtca_uapi.h"

#define IBTCA_NAME_LEN		16
#define IBTCA_IRQ_NAME_LEN	32
#define IBTCA_SELFTEST_IRQ_MS	5000
#define IBTCA_SELFTEST_DMA_LEN	4096
#define IBTCA_SELFTEST_SEED	0x5a
#define IBTCA_FAULT_ADDR	BIT_ULL(46)
#define IBTCA_FNV_BASIS		0x811c9dc5U
#define IBTCA_FNV_PRIME		0x01000193U
#define IBTCA_CMDQ_LOG		6
#define IBTCA_CMD_TIMEOUT_MS	5000
#define IBTCA_CQ_VECTOR		1
#define IBTCA_BUF_MMAP_SHIFT	32

static_assert(IBTCA_MSIX_VECTORS <= IBTCA_UAPI_MAX_VECTORS);
static_assert(IBTCA_DMA_TEST_MAX == IBTCA_UAPI_DMA_MAX);
static_assert(IBTCA_CQ_VECTOR < IBTCA_MSIX_VECTORS);

struct ibtca_dev;

struct ibtca_vec {
	struct ibtca_dev *idev;
	atomic64_t count;
	atomic64_t last_ns;
	char name[IBTCA_IRQ_NAME_LEN];
};

struct ibtca_dev {
	struct kref ref;
	struct pci_dev *pdev;
	void __iomem *regs;
	u32 bar0_len;
	int instance;
	int nvec;
	bool dead;		/* set under @lock once the device is gone */
	struct mutex lock;	/* serialises register sequences and @dead */
	wait_queue_head_t wq;
	struct miscdevice misc;
	char name[IBTCA_NAME_LEN];
	struct ibtca_vec vec[IBTCA_MSIX_VECTORS];
	/* Taken for reading around device access by verbs contexts. */
	struct rw_semaphore hw_sem;
	struct mutex cmd_lock;	/* serialises the command queue */
	struct ibtca_cmd *cmdq;
	dma_addr_t cmdq_dma;
	u32 cmd_pi;
};

static DEFINE_IDA(ibtca_ida);

static u32 ibtca_rd(struct ibtca_dev *idev, u32 off)
{
	return readl(idev->regs + off);
}

static void ibtca_wr(struct ibtca_dev *idev, u32 off, u32 val)
{
	writel(val, idev->regs + off);
}

static u32 ibtca_fnv1a(const u8 *buf, size_t len)
{
	u32 h = IBTCA_FNV_BASIS;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= buf[i];
		h *= IBTCA_FNV_PRIME;
	}
	return h;
}

static irqreturn_t ibtca_irq(int irq, void *data)
{
	struct ibtca_vec *v = data;

	atomic64_set(&v->last_ns, ktime_get_ns());
	/* Publish last_ns before the count; pairs with smp_rmb() in waiter. */
	smp_mb__before_atomic();
	atomic64_inc(&v->count);
	wake_up_all(&v->idev->wq);
	return IRQ_HANDLED;
}

/*
 * Fire @vector through IRQ_TEST and wait for its handler. Returns 0 with
 * *delivered set, or a negative errno (bad vector, signal).
 */
static int ibtca_irq_run(struct ibtca_dev *idev, u32 vector, u32 timeout_ms,
			 bool interruptible, u32 *delivered, u64 *latency_ns)
{
	struct ibtca_vec *v;
	unsigned long tmo;
	s64 before;
	u64 t0;
	long ret;

	*delivered = 0;
	*latency_ns = 0;
	if (vector >= idev->nvec)
		return -EINVAL;
	v = &idev->vec[vector];
	tmo = msecs_to_jiffies(timeout_ms);

	before = atomic64_read(&v->count);
	t0 = ktime_get_ns();
	ibtca_wr(idev, IBTCA_REG_IRQ_TEST, vector);
	if (interruptible) {
		ret = wait_event_interruptible_timeout(idev->wq,
						       atomic64_read(&v->count) != before,
						       tmo);
		if (ret < 0)
			return -EINTR;
	} else {
		wait_event_timeout(idev->wq, atomic64_read(&v->count) != before,
				   tmo);
	}
	if (atomic64_read(&v->count) == before)
		return 0;
	/* Read last_ns after seeing the count; pairs with the handler. */
	smp_rmb();
	*delivered = 1;
	*latency_ns = (u64)atomic64_read(&v->last_ns) - t0;
	return 0;
}

static void ibtca_dma_program(struct ibtca_dev *idev, u64 addr, u32 len,
			      u32 seed, u32 cmd)
{
	ibtca_wr(idev, IBTCA_REG_DMA_ADDR_LO, lower_32_bits(addr));
	ibtca_wr(idev, IBTCA_REG_DMA_ADDR_HI, upper_32_bits(addr));
	ibtca_wr(idev, IBTCA_REG_DMA_LEN, len);
	ibtca_wr(idev, IBTCA_REG_DMA_SEED, seed);
	/* The device runs the command synchronously inside this write. */
	ibtca_wr(idev, IBTCA_REG_DMA_CMD, cmd);
}

/*
 * Run one DMA self-test command on a fresh coherent buffer.
 * FILL: the buffer starts as the complement of the expected pattern and
 * must read back as byte(i) = (seed + i) & 0xff.
 * SUM: the CPU writes a pseudo-random pattern derived from the seed and the
 * device checksum must equal the CPU's FNV-1a.
 */
static int ibtca_dma_run(struct ibtca_dev *idev, struct ibtca_dma_test *t)
{
	struct device *dev = &idev->pdev->dev;
	size_t alloc, i;
	dma_addr_t dma;
	u32 x;
	u8 *buf;

	t->status = 0;
	t->result = 0;
	t->expected = 0;
	t->verify_ok = 0;
	t->bad_offset = t->len;
	if (t->len > IBTCA_UAPI_DMA_MAX)
		return -EINVAL;

	alloc = max_t(size_t, t->len, PAGE_SIZE);
	buf = dma_alloc_coherent(dev, alloc, &dma, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;

	switch (t->cmd) {
	case IBTCA_DMA_CMD_FILL:
		for (i = 0; i < t->len; i++)
			buf[i] = ~(u8)(t->seed + i);
		break;
	case IBTCA_DMA_CMD_SUM:
		x = t->seed ? t->seed : 0x9e3779b9U;
		for (i = 0; i < t->len; i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			buf[i] = x >> 24;
		}
		t->expected = ibtca_fnv1a(buf, t->len);
		break;
	default:
		memset(buf, 0, alloc);
		break;
	}

	ibtca_dma_program(idev, dma, t->len, t->seed, t->cmd);
	t->status = ibtca_rd(idev, IBTCA_REG_DMA_STATUS);
	t->result = ibtca_rd(idev, IBTCA_REG_DMA_RESULT);

	switch (t->cmd) {
	case IBTCA_DMA_CMD_FILL:
		for (i = 0; i < t->len; i++) {
			if (buf[i] != (u8)(t->seed + i)) {
				t->bad_offset = i;
				break;
			}
		}
		t->verify_ok = t->status == IBTCA_DMA_ST_OK && i == t->len;
		break;
	case IBTCA_DMA_CMD_SUM:
		t->verify_ok = t->status == IBTCA_DMA_ST_OK &&
			       t->result == t->expected;
		break;
	}

	dma_free_coherent(dev, alloc, buf, dma);
	return 0;
}

static void ibtca_dma_fault_run(struct ibtca_dev *idev,
				struct ibtca_dma_fault *f)
{
	if (!f->addr)
		f->addr = IBTCA_FAULT_ADDR;
	if (!f->len)
		f->len = IBTCA_SELFTEST_DMA_LEN;
	/* SUM only reads, so a misbehaving device cannot corrupt memory. */
	ibtca_dma_program(idev, f->addr, f->len, 0, IBTCA_DMA_CMD_SUM);
	f->status = ibtca_rd(idev, IBTCA_REG_DMA_STATUS);
	f->fault_ok = f->status == IBTCA_DMA_ST_FAULT;
	f->reserved = 0;
}

static int ibtca_bench_run(struct ibtca_dev *idev, struct ibtca_bench_mmio *b)
{
	u32 n = b->iterations, i;
	u64 t0;

	b->read_ns = 0;
	b->write_ns = 0;
	b->reserved = 0;
	if (!n || n > IBTCA_UAPI_BENCH_MAX)
		return -EINVAL;

	t0 = ktime_get_ns();
	for (i = 0; i < n; i++)
		ibtca_rd(idev, IBTCA_REG_SCRATCH);
	b->read_ns = ktime_get_ns() - t0;

	if (signal_pending(current))
		return -EINTR;
	cond_resched();

	t0 = ktime_get_ns();
	for (i = 0; i < n; i++)
		ibtca_wr(idev, IBTCA_REG_SCRATCH, i);
	b->write_ns = ktime_get_ns() - t0;
	return 0;
}

static void ibtca_selftest(struct ibtca_dev *idev)
{
	static const u32 pat[] = { 0xa5a55a5a, 0x0123fedc };
	struct ibtca_dma_test t;
	u32 delivered, val = 0;
	unsigned int i;
	u64 lat;
	int ret;

	for (i = 0; i < ARRAY_SIZE(pat); i++) {
		ibtca_wr(idev, IBTCA_REG_SCRATCH, pat[i]);
		val = ibtca_rd(idev, IBTCA_REG_SCRATCH);
		if (val != pat[i])
			break;
	}
	if (i == ARRAY_SIZE(pat))
		pr_info("selftest scratch ok\n");
	else
		pr_err("selftest scratch FAILED: wrote 0x%08x read 0x%08x\n",
		       pat[i], val);

	ret = ibtca_irq_run(idev, 0, IBTCA_SELFTEST_IRQ_MS, false,
			    &delivered, &lat);
	if (ret)
		pr_err("selftest irq vector=0 FAILED: error %d\n", ret);
	else if (!delivered)
		pr_err("selftest irq vector=0 FAILED: no interrupt within %u ms\n",
		       IBTCA_SELFTEST_IRQ_MS);
	else
		pr_info("selftest irq vector=0 ok\n");

	memset(&t, 0, sizeof(t));
	t.cmd = IBTCA_DMA_CMD_FILL;
	t.len = IBTCA_SELFTEST_DMA_LEN;
	t.seed = IBTCA_SELFTEST_SEED;
	ret = ibtca_dma_run(idev, &t);
	if (ret)
		pr_err("selftest dma fill FAILED: error %d\n", ret);
	else if (!t.verify_ok)
		pr_err("selftest dma fill FAILED: status=%u first bad byte at %u\n",
		       t.status, t.bad_offset);
	else
		pr_info("selftest dma fill ok\n");

	memset(&t, 0, sizeof(t));
	t.cmd = IBTCA_DMA_CMD_SUM;
	t.len = IBTCA_SELFTEST_DMA_LEN;
	t.seed = 0x1badcafe;
	ret = ibtca_dma_run(idev, &t);
	if (ret)
		pr_err("selftest dma sum FAILED: error %d\n", ret);
	else if (!t.verify_ok)
		pr_err("selftest dma sum FAILED: status=%u result=0x%08x expected=0x%08x\n",
		       t.status, t.result, t.expected);
	else
		pr_info("selftest dma sum ok\n");
}

static void ibtca_get_info(struct ibtca_dev *idev, struct ibtca_info *info)
{
	struct pci_dev *pdev = idev->pdev;
	int i;

	memset(info, 0, sizeof(*info));
	info->vendor = pdev->vendor;
	info->device = pdev->device;
	info->class_code = pdev->class;
	info->revision = pdev->revision;
	info->magic = ibtca_rd(idev, IBTCA_REG_MAGIC);
	info->version = ibtca_rd(idev, IBTCA_REG_VERSION);
	info->caps = ibtca_rd(idev, IBTCA_REG_CAPS);
	info->vectors = idev->nvec;
	info->num_vectors = ibtca_rd(idev, IBTCA_REG_NUM_VECTORS);
	info->port_state = ibtca_rd(idev, IBTCA_REG_PORT_STATE);
	info->status = ibtca_rd(idev, IBTCA_REG_STATUS);
	info->irq_test_count = ibtca_rd(idev, IBTCA_REG_IRQ_TEST_COUNT);
	info->error_count = ibtca_rd(idev, IBTCA_REG_ERROR_COUNT);
	info->instance = idev->instance;
	info->bar0_len = idev->bar0_len;
	for (i = 0; i < idev->nvec; i++)
		info->irq_counts[i] = atomic64_read(&idev->vec[i].count);
}

static bool ibtca_reg_ok(struct ibtca_dev *idev, u32 off)
{
	return !(off & 3) && off <= idev->bar0_len - 4;
}

static void ibtca_release_dev(struct kref *ref)
{
	struct ibtca_dev *idev = container_of(ref, struct ibtca_dev, ref);

	mutex_destroy(&idev->cmd_lock);
	mutex_destroy(&idev->lock);
	pci_dev_put(idev->pdev);
	kfree(idev);
}

/* Verbs: command queue. */

static int ibtca_cmdq_init(struct ibtca_dev *idev)
{
	size_t size = sizeof(struct ibtca_cmd) << IBTCA_CMDQ_LOG;

	idev->cmdq = dma_alloc_coherent(&idev->pdev->dev, size, &idev->cmdq_dma,
					GFP_KERNEL);
	if (!idev->cmdq)
		return -ENOMEM;
	/* Start from a device without objects: QP numbers are predictable. */
	ibtca_wr(idev, IBTCA_REG_RESET, IBTCA_RESET_VALUE);
	idev->cmd_pi = 0;
	ibtca_wr(idev, IBTCA_REG_CMDQ_BASE_LO, lower_32_bits(idev->cmdq_dma));
	ibtca_wr(idev, IBTCA_REG_CMDQ_BASE_HI, upper_32_bits(idev->cmdq_dma));
	ibtca_wr(idev, IBTCA_REG_CMDQ_LOG_SIZE, IBTCA_CMDQ_LOG);
	return 0;
}

static void ibtca_cmdq_free(struct ibtca_dev *idev)
{
	size_t size = sizeof(struct ibtca_cmd) << IBTCA_CMDQ_LOG;

	if (idev->cmdq)
		dma_free_coherent(&idev->pdev->dev, size, idev->cmdq,
				  idev->cmdq_dma);
	idev->cmdq = NULL;
}

static bool ibtca_cmd_done(struct ibtca_cmd *c)
{
	return le16_to_cpu(READ_ONCE(c->status)) != IBTCA_CMD_ST_PENDING;
}

/*
 * Run one command and wait for it (interrupt on vector 0, polled every few
 * milliseconds in case the interrupt is lost). Returns 0, -ETIMEDOUT, or the
 * device's status as a negative errno. Called with @hw_sem held.
 */
static int ibtca_cmd(struct ibtca_dev *idev, u8 opcode, const void *params,
		     size_t len, u32 *out0, u32 *out1)
{
	unsigned long deadline;
	struct ibtca_cmd *c;
	u16 st;
	int ret;

	if (len > sizeof(c->params))
		return -EINVAL;
	mutex_lock(&idev->cmd_lock);
	c = &idev->cmdq[idev->cmd_pi & (BIT(IBTCA_CMDQ_LOG) - 1)];
	memset(c, 0, sizeof(*c));
	c->opcode = opcode;
	c->flags = IBTCA_CMD_F_IRQ;
	c->token = cpu_to_le32(idev->cmd_pi);
	if (len)
		memcpy(c->params, params, len);
	WRITE_ONCE(c->status, cpu_to_le16(IBTCA_CMD_ST_PENDING));
	idev->cmd_pi++;
	/* writel() orders the entry before the doorbell. */
	ibtca_wr(idev, IBTCA_REG_CMDQ_DB, idev->cmd_pi);

	deadline = jiffies + msecs_to_jiffies(IBTCA_CMD_TIMEOUT_MS);
	while (!ibtca_cmd_done(c)) {
		if (time_after(jiffies, deadline)) {
			dev_err(&idev->pdev->dev, "command 0x%02x timed out\n",
				opcode);
			ret = -ETIMEDOUT;
			goto out;
		}
		wait_event_timeout(idev->wq, ibtca_cmd_done(c),
				   msecs_to_jiffies(10));
	}
	/* Read the out-parameters after the status. */
	dma_rmb();
	st = le16_to_cpu(c->status);
	if (st == IBTCA_CMD_ST_OK) {
		if (out0)
			*out0 = le32_to_cpu(c->out0);
		if (out1)
			*out1 = le32_to_cpu(c->out1);
		ret = 0;
	} else {
		ret = st < MAX_ERRNO ? -(int)st : -EIO;
	}
out:
	mutex_unlock(&idev->cmd_lock);
	return ret;
}

static int ibtca_cmd_handle(struct ibtca_dev *idev, u8 opcode, u32 handle)
{
	struct ibtca_cmd_handle p = { .handle = cpu_to_le32(handle) };

	return ibtca_cmd(idev, opcode, &p, sizeof(p), NULL, NULL);
}

/* Verbs: objects of one context. */

struct ibtca_buf {
	struct list_head node;
	u32 handle;
	size_t size;
	void *cpu;
	dma_addr_t dma;
};

/* A PD or an MR: only its handle (PD number, lkey). */
struct ibtca_hobj {
	struct list_head node;
	u32 handle;
};

struct ibtca_cq {
	struct list_head node;
	u32 cqn;
	u32 log;
	u32 ci;
	size_t size;
	struct ibtca_cqe *ring;
	dma_addr_t dma;
};

struct ibtca_qp {
	struct list_head node;
	u32 qpn;
	u32 log;
	u32 sq_pi, sq_done;	/* posted, completed send requests */
	u32 rq_pi, rq_done;	/* posted, completed receive requests */
	size_t size;
	void *mem;		/* SQ, RQ and quasi-WQE ring */
	dma_addr_t dma;
	struct ibtca_send_wqe *sq;
	struct ibtca_recv_wqe *rq;
};

struct ibtca_ctx {
	struct ibtca_dev *idev;
	struct mutex lock;	/* serialises the context's ioctls and mmap */
	struct list_head bufs, pds, mrs, cqs, qps;
	u32 next_buf;
	u32 nbufs;
};

static struct device *ibtca_ctx_dev(struct ibtca_ctx *ctx)
{
	return &ctx->idev->pdev->dev;
}

static struct ibtca_buf *ibtca_find_buf(struct ibtca_ctx *ctx, u32 handle)
{
	struct ibtca_buf *b;

	list_for_each_entry(b, &ctx->bufs, node)
		if (b->handle == handle)
			return b;
	return NULL;
}

static bool ibtca_has_hobj(struct list_head *list, u32 handle)
{
	struct ibtca_hobj *o;

	list_for_each_entry(o, list, node)
		if (o->handle == handle)
			return true;
	return false;
}

static struct ibtca_cq *ibtca_find_cq(struct ibtca_ctx *ctx, u32 cqn)
{
	struct ibtca_cq *cq;

	list_for_each_entry(cq, &ctx->cqs, node)
		if (cq->cqn == cqn)
			return cq;
	return NULL;
}

static struct ibtca_qp *ibtca_find_qp(struct ibtca_ctx *ctx, u32 qpn)
{
	struct ibtca_qp *qp;

	list_for_each_entry(qp, &ctx->qps, node)
		if (qp->qpn == qpn)
			return qp;
	return NULL;
}

static int ibtca_add_hobj(struct list_head *list, u32 handle)
{
	struct ibtca_hobj *o = kzalloc_obj(*o, GFP_KERNEL);

	if (!o)
		return -ENOMEM;
	o->handle = handle;
	list_add_tail(&o->node, list);
	return 0;
}

static int ibtca_v_alloc_buf(struct ibtca_ctx *ctx, struct ibtca_alloc_buf *a)
{
	struct ibtca_buf *b;

	if (!a->size || a->size > IBTCA_UAPI_BUF_MAX)
		return -EINVAL;
	if (ctx->nbufs >= IBTCA_UAPI_MAX_BUFS)
		return -ENOSPC;
	b = kzalloc_obj(*b, GFP_KERNEL);
	if (!b)
		return -ENOMEM;
	b->size = PAGE_ALIGN(a->size);
	b->cpu = dma_alloc_coherent(ibtca_ctx_dev(ctx), b->size, &b->dma,
				    GFP_KERNEL);
	if (!b->cpu) {
		kfree(b);
		return -ENOMEM;
	}
	b->handle = ++ctx->next_buf;
	list_add_tail(&b->node, &ctx->bufs);
	ctx->nbufs++;
	a->handle = b->handle;
	a->mmap_offset = (u64)b->handle << IBTCA_BUF_MMAP_SHIFT;
	a->dma_addr = b->dma;
	a->size = b->size;
	return 0;
}

static int ibtca_v_create_pd(struct ibtca_ctx *ctx, struct ibtca_create_pd *p)
{
	struct ibtca_dev *idev = ctx->idev;
	int ret;

	ret = ibtca_cmd(idev, IBTCA_CMD_CREATE_PD, NULL, 0, &p->pdn, NULL);
	if (ret)
		return ret;
	ret = ibtca_add_hobj(&ctx->pds, p->pdn);
	if (ret)
		ibtca_cmd_handle(idev, IBTCA_CMD_DESTROY_PD, p->pdn);
	return ret;
}

static int ibtca_v_reg_mr(struct ibtca_ctx *ctx, struct ibtca_reg_mr *m)
{
	struct ibtca_cmd_reg_mr p = { };
	struct ibtca_buf *b;
	u64 addr;
	int ret;

	b = ibtca_find_buf(ctx, m->buf);
	if (!b || !ibtca_has_hobj(&ctx->pds, m->pdn))
		return -ENOENT;
	if (!m->length || m->offset > b->size || m->length > b->size - m->offset)
		return -EINVAL;
	/* The region's address space is the bus address space. */
	addr = b->dma + m->offset;
	p.pdn = cpu_to_le32(m->pdn);
	p.access = cpu_to_le32(m->access);
	p.iova = cpu_to_le64(addr);
	p.length = cpu_to_le64(m->length);
	p.gpa = cpu_to_le64(addr);
	ret = ibtca_cmd(ctx->idev, IBTCA_CMD_REG_MR, &p, sizeof(p), &m->lkey,
			&m->rkey);
	if (ret)
		return ret;
	ret = ibtca_add_hobj(&ctx->mrs, m->lkey);
	if (ret) {
		ibtca_cmd_handle(ctx->idev, IBTCA_CMD_DEREG_MR, m->lkey);
		return ret;
	}
	m->iova = addr;
	return 0;
}

static int ibtca_v_create_cq(struct ibtca_ctx *ctx, struct ibtca_create_cq *c)
{
	struct ibtca_cmd_create_cq p = { };
	struct ibtca_cq *cq;
	int ret;

	if (!c->log_entries || c->log_entries > IBTCA_UAPI_CQ_LOG_MAX)
		return -EINVAL;
	cq = kzalloc_obj(*cq, GFP_KERNEL);
	if (!cq)
		return -ENOMEM;
	cq->log = c->log_entries;
	cq->size = PAGE_ALIGN(sizeof(struct ibtca_cqe) << cq->log);
	/* Zeroed: every entry reads as not yet written (owner 0). */
	cq->ring = dma_alloc_coherent(ibtca_ctx_dev(ctx), cq->size, &cq->dma,
				      GFP_KERNEL);
	if (!cq->ring) {
		kfree(cq);
		return -ENOMEM;
	}
	p.ring = cpu_to_le64(cq->dma);
	p.log_entries = cq->log;
	p.vector = IBTCA_CQ_VECTOR;
	ret = ibtca_cmd(ctx->idev, IBTCA_CMD_CREATE_CQ, &p, sizeof(p),
			&cq->cqn, NULL);
	if (ret) {
		dma_free_coherent(ibtca_ctx_dev(ctx), cq->size, cq->ring,
				  cq->dma);
		kfree(cq);
		return ret;
	}
	list_add_tail(&cq->node, &ctx->cqs);
	c->cqn = cq->cqn;
	return 0;
}

static int ibtca_v_create_qp(struct ibtca_ctx *ctx, struct ibtca_create_qp *c)
{
	struct ibtca_cmd_create_qp p = { };
	size_t wq, quasi;
	struct ibtca_qp *qp;
	int ret;

	if (!c->log_entries || c->log_entries > IBTCA_UAPI_QP_LOG_MAX)
		return -EINVAL;
	if (!ibtca_has_hobj(&ctx->pds, c->pdn) ||
	    !ibtca_find_cq(ctx, c->send_cqn) || !ibtca_find_cq(ctx, c->recv_cqn))
		return -ENOENT;
	qp = kzalloc_obj(*qp, GFP_KERNEL);
	if (!qp)
		return -ENOMEM;
	qp->log = c->log_entries;
	wq = PAGE_ALIGN(sizeof(struct ibtca_send_wqe) << qp->log);
	quasi = PAGE_ALIGN(sizeof(struct ibtca_quasi_wqe) << qp->log);
	qp->size = 2 * wq + quasi;
	qp->mem = dma_alloc_coherent(ibtca_ctx_dev(ctx), qp->size, &qp->dma,
				     GFP_KERNEL);
	if (!qp->mem) {
		kfree(qp);
		return -ENOMEM;
	}
	qp->sq = qp->mem;
	qp->rq = qp->mem + wq;
	p.pdn = cpu_to_le32(c->pdn);
	p.send_cqn = cpu_to_le32(c->send_cqn);
	p.recv_cqn = cpu_to_le32(c->recv_cqn);
	p.log_sizes[0] = qp->log;
	p.log_sizes[1] = qp->log;
	p.log_sizes[2] = qp->log;
	p.sq = cpu_to_le64(qp->dma);
	p.rq = cpu_to_le64(qp->dma + wq);
	p.quasi = cpu_to_le64(qp->dma + 2 * wq);
	ret = ibtca_cmd(ctx->idev, IBTCA_CMD_CREATE_QP, &p, sizeof(p),
			&qp->qpn, NULL);
	if (ret) {
		dma_free_coherent(ibtca_ctx_dev(ctx), qp->size, qp->mem,
				  qp->dma);
		kfree(qp);
		return ret;
	}
	list_add_tail(&qp->node, &ctx->qps);
	c->qpn = qp->qpn;
	return 0;
}

static int ibtca_v_modify_qp(struct ibtca_ctx *ctx, struct ibtca_modify_qp *m)
{
	struct ibtca_cmd_modify_qp p = { };

	if (!ibtca_find_qp(ctx, m->qpn))
		return -ENOENT;
	p.qpn = cpu_to_le32(m->qpn);
	p.attr_mask = cpu_to_le32(m->attr_mask);
	p.state = m->state;
	p.path_mtu = m->path_mtu;
	p.timeout = m->timeout;
	p.retry_cnt = m->retry_cnt;
	p.rnr_retry = m->rnr_retry;
	p.min_rnr_timer = m->min_rnr_timer;
	p.max_rd_atomic = m->max_rd_atomic;
	p.dest_qpn = cpu_to_le32(m->dest_qpn);
	p.dlid = cpu_to_le16(m->dlid);
	p.sq_psn = cpu_to_le32(m->sq_psn);
	p.rq_psn = cpu_to_le32(m->rq_psn);
	p.access = cpu_to_le32(m->access);
	return ibtca_cmd(ctx->idev, IBTCA_CMD_MODIFY_QP, &p, sizeof(p), NULL,
			 NULL);
}

static void ibtca_sge_set(struct ibtca_sge *sge, u64 addr, u32 len, u32 lkey)
{
	sge->addr = cpu_to_le64(addr);
	sge->length = cpu_to_le32(len);
	sge->lkey = cpu_to_le32(lkey);
}

/* An 8-byte posted doorbell: object number, then the index in 63:32. */
static void ibtca_db(struct ibtca_dev *idev, u32 reg, u32 num, u32 index)
{
	writeq(num | (u64)index << 32, idev->regs + reg);
}

static int ibtca_v_post_send(struct ibtca_ctx *ctx, struct ibtca_post_send *s)
{
	const u32 flags = IBTCA_WQE_F_SOLICITED | IBTCA_WQE_F_FENCE;
	struct ibtca_send_wqe *w;
	struct ibtca_qp *qp;

	qp = ibtca_find_qp(ctx, s->qpn);
	if (!qp)
		return -ENOENT;
	if (s->opcode > IBTCA_WR_LOCAL_INV || (s->flags & ~flags))
		return -EINVAL;
	if (qp->sq_pi - qp->sq_done >= BIT(qp->log))
		return -ENOSPC;
	w = &qp->sq[qp->sq_pi & (BIT(qp->log) - 1)];
	memset(w, 0, sizeof(*w));
	w->wr_id = cpu_to_le64(s->wr_id);
	w->opcode = s->opcode;
	w->flags = s->flags | IBTCA_WQE_F_SIGNALED;
	w->imm_data = cpu_to_le32(s->imm_data);
	w->remote_addr = cpu_to_le64(s->remote_addr);
	w->rkey = cpu_to_le32(s->rkey);
	w->compare_add = cpu_to_le64(s->compare_add);
	w->swap = cpu_to_le64(s->swap);
	if (s->length || s->opcode == IBTCA_WR_ATOMIC_CMP_SWP ||
	    s->opcode == IBTCA_WR_ATOMIC_FETCH_ADD) {
		w->num_sge = 1;
		ibtca_sge_set(&w->sge[0], s->addr, s->length, s->lkey);
	}
	qp->sq_pi++;
	/* writeq() orders the WQE before the doorbell. */
	ibtca_db(ctx->idev, IBTCA_REG_DB_SQ, qp->qpn, qp->sq_pi);
	return 0;
}

static int ibtca_v_post_recv(struct ibtca_ctx *ctx, struct ibtca_post_recv *r)
{
	struct ibtca_recv_wqe *w;
	struct ibtca_qp *qp;

	qp = ibtca_find_qp(ctx, r->qpn);
	if (!qp)
		return -ENOENT;
	if (qp->rq_pi - qp->rq_done >= BIT(qp->log))
		return -ENOSPC;
	w = &qp->rq[qp->rq_pi & (BIT(qp->log) - 1)];
	memset(w, 0, sizeof(*w));
	w->wr_id = cpu_to_le64(r->wr_id);
	if (r->length) {
		w->num_sge = 1;
		ibtca_sge_set(&w->sge[0], r->addr, r->length, r->lkey);
	}
	qp->rq_pi++;
	ibtca_db(ctx->idev, IBTCA_REG_DB_RQ, qp->qpn, qp->rq_pi);
	return 0;
}

static struct ibtca_cqe *ibtca_cq_next(struct ibtca_cq *cq)
{
	struct ibtca_cqe *e = &cq->ring[cq->ci & (BIT(cq->log) - 1)];
	u8 want = ((cq->ci >> cq->log) & 1) ^ 1;

	return (READ_ONCE(e->owner) & 1) == want ? e : NULL;
}

static void ibtca_cq_db(struct ibtca_dev *idev, struct ibtca_cq *cq, u8 arm)
{
	ibtca_db(idev, IBTCA_REG_DB_CQ, cq->cqn | (u32)arm << 24, cq->ci);
}

static int ibtca_v_poll_cq(struct ibtca_ctx *ctx, struct ibtca_poll_cq *p)
{
	struct ibtca_dev *idev = ctx->idev;
	unsigned long deadline;
	struct ibtca_cqe *e;
	struct ibtca_qp *qp;
	struct ibtca_cq *cq;
	long left;

	cq = ibtca_find_cq(ctx, p->cqn);
	if (!cq)
		return -ENOENT;
	if (p->timeout_ms > IBTCA_UAPI_POLL_TIMEOUT_MAX_MS)
		return -EINVAL;
	deadline = jiffies + msecs_to_jiffies(p->timeout_ms);
	p->found = 0;
	for (;;) {
		e = ibtca_cq_next(cq);
		if (e)
			break;
		left = (long)(deadline - jiffies);
		if (!p->timeout_ms || left <= 0)
			return 0;
		/*
		 * Arm, look again, then sleep. The arm is a posted write that
		 * may reach the device after a completion it should have
		 * signalled, so sleep in short slices and look again.
		 */
		ibtca_cq_db(idev, cq, IBTCA_CQ_ARM_NEXT);
		e = ibtca_cq_next(cq);
		if (e)
			break;
		left = wait_event_interruptible_timeout(idev->wq,
							ibtca_cq_next(cq) ||
							READ_ONCE(idev->dead),
							min_t(long, left, 2));
		if (left < 0)
			return -EINTR;
		if (READ_ONCE(idev->dead))
			return -ENODEV;
	}
	/* Read the entry after its owner bit. */
	dma_rmb();
	p->found = 1;
	p->wr_id = le64_to_cpu(e->wr_id);
	p->byte_len = le32_to_cpu(e->byte_len);
	p->qpn = le32_to_cpu(e->qpn);
	p->imm_data = le32_to_cpu(e->imm_data);
	p->src_qp = le32_to_cpu(e->src_qp);
	p->opcode = e->opcode;
	p->status = e->status;
	p->flags = e->flags;
	p->reserved = 0;
	cq->ci++;
	ibtca_cq_db(idev, cq, 0);

	/* Every request is signaled: completions free ring slots. */
	qp = ibtca_find_qp(ctx, p->qpn);
	if (qp && (p->opcode & IBTCA_WC_RECV)) {
		if (qp->rq_done != qp->rq_pi)
			qp->rq_done++;
	} else if (qp) {
		if (qp->sq_done != qp->sq_pi)
			qp->sq_done++;
	}
	return 0;
}

/*
 * Destroy the context's device objects (if the device is still there) and
 * free its memory. Memory the device might still use is leaked instead.
 */
static void ibtca_ctx_teardown(struct ibtca_ctx *ctx)
{
	struct ibtca_dev *idev = ctx->idev;
	struct device *dev = ibtca_ctx_dev(ctx);
	struct ibtca_hobj *o, *otmp;
	struct ibtca_qp *qp, *qtmp;
	struct ibtca_cq *cq, *ctmp;
	struct ibtca_buf *b, *btmp;
	bool hw, leak = false;

	down_read(&idev->hw_sem);
	/* A removed device was reset: it holds no objects any more. */
	hw = !READ_ONCE(idev->dead);
	list_for_each_entry_safe(qp, qtmp, &ctx->qps, node) {
		if (hw && ibtca_cmd_handle(idev, IBTCA_CMD_DESTROY_QP, qp->qpn))
			leak = true;
		if (!leak)
			dma_free_coherent(dev, qp->size, qp->mem, qp->dma);
		list_del(&qp->node);
		kfree(qp);
	}
	list_for_each_entry_safe(o, otmp, &ctx->mrs, node) {
		if (hw && ibtca_cmd_handle(idev, IBTCA_CMD_DEREG_MR, o->handle))
			leak = true;
		list_del(&o->node);
		kfree(o);
	}
	list_for_each_entry_safe(cq, ctmp, &ctx->cqs, node) {
		if (hw && ibtca_cmd_handle(idev, IBTCA_CMD_DESTROY_CQ, cq->cqn))
			leak = true;
		if (!leak)
			dma_free_coherent(dev, cq->size, cq->ring, cq->dma);
		list_del(&cq->node);
		kfree(cq);
	}
	list_for_each_entry_safe(o, otmp, &ctx->pds, node) {
		if (hw)
			ibtca_cmd_handle(idev, IBTCA_CMD_DESTROY_PD, o->handle);
		list_del(&o->node);
		kfree(o);
	}
	up_read(&idev->hw_sem);
	list_for_each_entry_safe(b, btmp, &ctx->bufs, node) {
		if (!leak)
			dma_free_coherent(dev, b->size, b->cpu, b->dma);
		list_del(&b->node);
		kfree(b);
	}
	if (leak)
		dev_warn(dev, "device refused to destroy objects: memory leaked\n");
}

static long ibtca_verbs_ioctl(struct ibtca_ctx *ctx, unsigned int cmd,
			      void __user *argp)
{
	union {
		struct ibtca_alloc_buf buf;
		struct ibtca_create_pd pd;
		struct ibtca_reg_mr mr;
		struct ibtca_create_cq cq;
		struct ibtca_create_qp qp;
		struct ibtca_modify_qp mod;
		struct ibtca_post_send send;
		struct ibtca_post_recv recv;
		struct ibtca_poll_cq poll;
	} u;
	struct ibtca_dev *idev = ctx->idev;
	size_t size = _IOC_SIZE(cmd);
	long ret;

	if (size > sizeof(u))
		return -ENOTTY;
	memset(&u, 0, sizeof(u));
	if ((_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(&u, argp, size))
		return -EFAULT;

	if (mutex_lock_interruptible(&ctx->lock))
		return -EINTR;
	down_read(&idev->hw_sem);
	if (READ_ONCE(idev->dead)) {
		ret = -ENODEV;
		goto out;
	}
	switch (cmd) {
	case IBTCA_IOC_ALLOC_BUF:
		ret = ibtca_v_alloc_buf(ctx, &u.buf);
		break;
	case IBTCA_IOC_CREATE_PD:
		ret = ibtca_v_create_pd(ctx, &u.pd);
		break;
	case IBTCA_IOC_REG_MR:
		ret = ibtca_v_reg_mr(ctx, &u.mr);
		break;
	case IBTCA_IOC_CREATE_CQ:
		ret = ibtca_v_create_cq(ctx, &u.cq);
		break;
	case IBTCA_IOC_CREATE_QP:
		ret = ibtca_v_create_qp(ctx, &u.qp);
		break;
	case IBTCA_IOC_MODIFY_QP:
		ret = ibtca_v_modify_qp(ctx, &u.mod);
		break;
	case IBTCA_IOC_POST_SEND:
		ret = ibtca_v_post_send(ctx, &u.send);
		break;
	case IBTCA_IOC_POST_RECV:
		ret = ibtca_v_post_recv(ctx, &u.recv);
		break;
	case IBTCA_IOC_POLL_CQ:
		ret = ibtca_v_poll_cq(ctx, &u.poll);
		break;
	default:
		ret = -ENOTTY;
		break;
	}
out:
	up_read(&idev->hw_sem);
	mutex_unlock(&ctx->lock);
	if (!ret && (_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(argp, &u, size))
		ret = -EFAULT;
	return ret;
}

static int ibtca_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct ibtca_ctx *ctx = file->private_data;
	unsigned long len = vma->vm_end - vma->vm_start;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	struct ibtca_buf *b;
	int ret = -EINVAL;

	if (off & (BIT_ULL(IBTCA_BUF_MMAP_SHIFT) - 1))
		return -EINVAL;
	mutex_lock(&ctx->lock);
	b = ibtca_find_buf(ctx, off >> IBTCA_BUF_MMAP_SHIFT);
	if (b && len <= b->size) {
		/* dma_mmap_coherent() takes vm_pgoff as the offset in @b. */
		vma->vm_pgoff = 0;
		ret = dma_mmap_coherent(ibtca_ctx_dev(ctx), vma, b->cpu, b->dma,
					len);
	}
	mutex_unlock(&ctx->lock);
	return ret;
}

static int ibtca_open(struct inode *inode, struct file *file)
{
	struct miscdevice *misc = file->private_data;
	struct ibtca_dev *idev = container_of(misc, struct ibtca_dev, misc);
	struct ibtca_ctx *ctx;

	ctx = kzalloc_obj(*ctx, GFP_KERNEL);
	if (!ctx)
		return -ENOMEM;
	mutex_init(&ctx->lock);
	INIT_LIST_HEAD(&ctx->bufs);
	INIT_LIST_HEAD(&ctx->pds);
	INIT_LIST_HEAD(&ctx->mrs);
	INIT_LIST_HEAD(&ctx->cqs);
	INIT_LIST_HEAD(&ctx->qps);
	/* misc_open() holds misc_mtx, so remove cannot run concurrently. */
	kref_get(&idev->ref);
	ctx->idev = idev;
	file->private_data = ctx;
	return nonseekable_open(inode, file);
}

/* Runs once no mapping of the file is left (each holds a reference). */
static int ibtca_release(struct inode *inode, struct file *file)
{
	struct ibtca_ctx *ctx = file->private_data;
	struct ibtca_dev *idev = ctx->idev;

	ibtca_ctx_teardown(ctx);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	kref_put(&idev->ref, ibtca_release_dev);
	return 0;
}

static long ibtca_do_ioctl(struct ibtca_dev *idev, unsigned int cmd,
			   void __user *argp)
{
	union {
		struct ibtca_info info;
		struct ibtca_reg reg;
		struct ibtca_irq_test irq;
		struct ibtca_dma_test dma;
		struct ibtca_dma_fault fault;
		struct ibtca_bench_mmio bench;
	} *u;
	size_t size = _IOC_SIZE(cmd);
	long ret = 0;

	switch (cmd) {
	case IBTCA_IOC_GET_INFO:
	case IBTCA_IOC_REG_READ:
	case IBTCA_IOC_REG_WRITE:
	case IBTCA_IOC_IRQ_TEST:
	case IBTCA_IOC_DMA_TEST:
	case IBTCA_IOC_DMA_FAULT_TEST:
	case IBTCA_IOC_BENCH_MMIO:
		break;
	default:
		return -ENOTTY;
	}

	u = kzalloc(sizeof(*u), GFP_KERNEL);
	if (!u)
		return -ENOMEM;
	if ((_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(u, argp, size)) {
		ret = -EFAULT;
		goto out_free;
	}

	switch (cmd) {
	case IBTCA_IOC_GET_INFO:
		ibtca_get_info(idev, &u->info);
		break;
	case IBTCA_IOC_REG_READ:
		if (!ibtca_reg_ok(idev, u->reg.offset)) {
			ret = -EINVAL;
			break;
		}
		u->reg.value = ibtca_rd(idev, u->reg.offset);
		break;
	case IBTCA_IOC_REG_WRITE:
		if (!ibtca_reg_ok(idev, u->reg.offset)) {
			ret = -EINVAL;
			break;
		}
		ibtca_wr(idev, u->reg.offset, u->reg.value);
		break;
	case IBTCA_IOC_IRQ_TEST:
		if (!u->irq.timeout_ms)
			u->irq.timeout_ms = IBTCA_SELFTEST_IRQ_MS;
		if (u->irq.timeout_ms > IBTCA_UAPI_IRQ_TIMEOUT_MAX_MS) {
			ret = -EINVAL;
			break;
		}
		ret = ibtca_irq_run(idev, u->irq.vector, u->irq.timeout_ms, true,
				    &u->irq.delivered, &u->irq.latency_ns);
		u->irq.reserved = 0;
		break;
	case IBTCA_IOC_DMA_TEST:
		ret = ibtca_dma_run(idev, &u->dma);
		break;
	case IBTCA_IOC_DMA_FAULT_TEST:
		ibtca_dma_fault_run(idev, &u->fault);
		break;
	case IBTCA_IOC_BENCH_MMIO:
		ret = ibtca_bench_run(idev, &u->bench);
		break;
	}

	if (!ret && (_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(argp, u, size))
		ret = -EFAULT;
out_free:
	kfree(u);
	return ret;
}

static long ibtca_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct ibtca_ctx *ctx = file->private_data;
	struct ibtca_dev *idev = ctx->idev;
	long ret;

	if (_IOC_TYPE(cmd) == IBTCA_IOC_MAGIC && _IOC_NR(cmd) >= 0x10)
		return ibtca_verbs_ioctl(ctx, cmd, (void __user *)arg);
	if (mutex_lock_interruptible(&idev->lock))
		return -EINTR;
	if (idev->dead)
		ret = -ENODEV;
	else
		ret = ibtca_do_ioctl(idev, cmd, (void __user *)arg);
	mutex_unlock(&idev->lock);
	return ret;
}

static const struct file_operations ibtca_fops = {
	.owner		= THIS_MODULE,
	.open		= ibtca_open,
	.release	= ibtca_release,
	.unlocked_ioctl	= ibtca_ioctl,
	.mmap		= ibtca_mmap,
	.compat_ioctl	= compat_ptr_ioctl,
};

static void ibtca_free_irqs(struct ibtca_dev *idev, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free_irq(pci_irq_vector(idev->pdev, i), &idev->vec[i]);
}

static int ibtca_setup_irqs(struct ibtca_dev *idev)
{
	struct pci_dev *pdev = idev->pdev;
	u32 want;
	int i, ret;

	want = ibtca_rd(idev, IBTCA_REG_NUM_VECTORS);
	if (!want || want > IBTCA_MSIX_VECTORS) {
		dev_warn(&pdev->dev, "NUM_VECTORS=%u, using %u\n", want,
			 clamp_t(u32, want, 1, IBTCA_MSIX_VECTORS));
		want = clamp_t(u32, want, 1, IBTCA_MSIX_VECTORS);
	}

	ret = pci_alloc_irq_vectors(pdev, 1, want, PCI_IRQ_MSIX);
	if (ret < 0) {
		dev_err(&pdev->dev, "cannot allocate MSI-X vectors: %d\n", ret);
		return ret;
	}
	idev->nvec = ret;

	for (i = 0; i < idev->nvec; i++) {
		struct ibtca_vec *v = &idev->vec[i];

		v->idev = idev;
		snprintf(v->name, sizeof(v->name), "%s-%d", idev->name, i);
		ret = request_irq(pci_irq_vector(pdev, i), ibtca_irq, 0,
				  v->name, v);
		if (ret) {
			dev_err(&pdev->dev, "request_irq vector %d: %d\n", i, ret);
			ibtca_free_irqs(idev, i);
			pci_free_irq_vectors(pdev);
			idev->nvec = 0;
			return ret;
		}
	}
	return 0;
}

static int ibtca_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct ibtca_dev *idev;
	u32 magic, version;
	int ret;

	idev = kzalloc_obj(*idev, GFP_KERNEL);
	if (!idev)
		return -ENOMEM;
	kref_init(&idev->ref);
	mutex_init(&idev->lock);
	mutex_init(&idev->cmd_lock);
	init_rwsem(&idev->hw_sem);
	init_waitqueue_head(&idev->wq);
	idev->pdev = pci_dev_get(pdev);

	ret = ida_alloc(&ibtca_ida, GFP_KERNEL);
	if (ret < 0)
		goto err_put;
	idev->instance = ret;
	snprintf(idev->name, sizeof(idev->name), "ibtca%d", idev->instance);

	ret = pci_enable_device(pdev);
	if (ret) {
		dev_err(&pdev->dev, "cannot enable device: %d\n", ret);
		goto err_ida;
	}

	if (!(pci_resource_flags(pdev, IBTCA_REGS_BAR) & IORESOURCE_MEM) ||
	    pci_resource_len(pdev, IBTCA_REGS_BAR) < IBTCA_REG_DMA_RESULT + 4) {
		pr_err("BAR%d is not a usable memory BAR (len %llu)\n",
		       IBTCA_REGS_BAR,
		       (unsigned long long)pci_resource_len(pdev, IBTCA_REGS_BAR));
		ret = -ENODEV;
		goto err_disable;
	}
	idev->bar0_len = min_t(u64, pci_resource_len(pdev, IBTCA_REGS_BAR),
			       IBTCA_REGS_BAR_SIZE);

	ret = pci_request_regions(pdev, KBUILD_MODNAME);
	if (ret) {
		dev_err(&pdev->dev, "cannot request regions: %d\n", ret);
		goto err_disable;
	}

	idev->regs = pci_iomap(pdev, IBTCA_REGS_BAR, idev->bar0_len);
	if (!idev->regs) {
		dev_err(&pdev->dev, "cannot map BAR%d\n", IBTCA_REGS_BAR);
		ret = -ENOMEM;
		goto err_regions;
	}

	magic = ibtca_rd(idev, IBTCA_REG_MAGIC);
	if (magic != IBTCA_MAGIC_VALUE) {
		pr_err("%s: bad magic 0x%08x (expected 0x%08x), not an ibtca device\n",
		       pci_name(pdev), magic, IBTCA_MAGIC_VALUE);
		ret = -ENODEV;
		goto err_unmap;
	}
	version = ibtca_rd(idev, IBTCA_REG_VERSION);
	if ((version >> 16) != IBTCA_VERSION_MAJOR) {
		pr_err("%s: unsupported register interface version %u.%u (driver supports %u.x)\n",
		       pci_name(pdev), version >> 16, version & 0xffff,
		       IBTCA_VERSION_MAJOR);
		ret = -ENODEV;
		goto err_unmap;
	}

	/* QEMU drops MSI-X messages while bus mastering is off. */
	pci_set_master(pdev);

	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret) {
		dev_warn(&pdev->dev, "64-bit DMA unavailable, trying 32-bit\n");
		ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(32));
		if (ret) {
			dev_err(&pdev->dev, "no usable DMA mask: %d\n", ret);
			goto err_master;
		}
	}

	ret = ibtca_setup_irqs(idev);
	if (ret)
		goto err_master;

	pr_info("probe vendor=%04x device=%04x class=%06x version=%u.%u vectors=%d\n",
		pdev->vendor, pdev->device, pdev->class, version >> 16,
		version & 0xffff, idev->nvec);

	ibtca_selftest(idev);

	ret = ibtca_cmdq_init(idev);
	if (ret) {
		dev_err(&pdev->dev, "cannot set up the command queue: %d\n", ret);
		goto err_irqs;
	}

	pci_set_drvdata(pdev, idev);
	idev->misc.minor = MISC_DYNAMIC_MINOR;
	idev->misc.name = idev->name;
	idev->misc.fops = &ibtca_fops;
	idev->misc.parent = &pdev->dev;
	ret = misc_register(&idev->misc);
	if (ret) {
		dev_err(&pdev->dev, "misc_register %s: %d\n", idev->name, ret);
		goto err_cmdq;
	}
	pr_info("%s bound to %s\n", idev->name, pci_name(pdev));
	return 0;

err_cmdq:
	pci_set_drvdata(pdev, NULL);
	ibtca_wr(idev, IBTCA_REG_RESET, IBTCA_RESET_VALUE);
	ibtca_cmdq_free(idev);
err_irqs:
	ibtca_free_irqs(idev, idev->nvec);
	pci_free_irq_vectors(pdev);
err_master:
	pci_clear_master(pdev);
err_unmap:
	pci_iounmap(pdev, idev->regs);
err_regions:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_ida:
	ida_free(&ibtca_ida, idev->instance);
err_put:
	kref_put(&idev->ref, ibtca_release_dev);
	return ret;
}

static void ibtca_remove(struct pci_dev *pdev)
{
	struct ibtca_dev *idev = pci_get_drvdata(pdev);

	/* No new opens after this; open files keep @idev alive via @ref. */
	misc_deregister(&idev->misc);

	mutex_lock(&idev->lock);
	WRITE_ONCE(idev->dead, true);
	mutex_unlock(&idev->lock);
	wake_up_all(&idev->wq);

	/*
	 * Wait for verbs calls in progress; later ones see @dead. The reset
	 * makes the device forget every object, so it no longer touches
	 * memory that contexts free when their files are closed.
	 */
	down_write(&idev->hw_sem);
	ibtca_wr(idev, IBTCA_REG_RESET, IBTCA_RESET_VALUE);
	up_write(&idev->hw_sem);
	ibtca_cmdq_free(idev);

	ibtca_free_irqs(idev, idev->nvec);
	pci_free_irq_vectors(pdev);
	pci_clear_master(pdev);
	pci_iounmap(pdev, idev->regs);
	idev->regs = NULL;
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	pci_set_drvdata(pdev, NULL);
	ida_free(&ibtca_ida, idev->instance);
	kref_put(&idev->ref, ibtca_release_dev);
	pr_info("removed\n");
}

static const struct pci_device_id ibtca_ids[] = {
	{ PCI_DEVICE(IBTCA_PCI_VENDOR_ID, IBTCA_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, ibtca_ids);

static struct pci_driver ibtca_driver = {
	.name		= KBUILD_MODNAME,
	.id_table	= ibtca_ids,
	.probe		= ibtca_probe,
	.remove		= ibtca_remove,
};
module_pci_driver(ibtca_driver);

MODULE_DESCRIPTION("Guest driver for the ibtca virtual InfiniBand TCA");
MODULE_AUTHOR("ibtca project");
MODULE_LICENSE("GPL");
