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
 *
 * The Direct RDMA window (BAR2, ibtca_drdma.c): guest stores into a range
 * become an RDMA WRITE, RDMA READ responses are served to guest loads.
 *
 * The kernel's RDMA core (ibtca_ib.c): the device is also registered as an
 * ib_device, ibtcaN, with the identity, limits and port the device reports.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/interrupt.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "ibtca.h"
#include "ibtca_compat.h"

#define IBTCA_SELFTEST_IRQ_MS	5000
#define IBTCA_SELFTEST_DMA_LEN	4096
#define IBTCA_SELFTEST_SEED	0x5a
#define IBTCA_FAULT_ADDR	BIT_ULL(46)
#define IBTCA_FNV_BASIS		0x811c9dc5U
#define IBTCA_FNV_PRIME		0x01000193U

static_assert(IBTCA_MSIX_VECTORS <= IBTCA_UAPI_MAX_VECTORS);
static_assert(IBTCA_DMA_TEST_MAX == IBTCA_UAPI_DMA_MAX);

static DEFINE_IDA(ibtca_ida);

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
	if (v == &v->idev->vec[IBTCA_EVENT_VECTOR])
		ibtca_port_irq(v->idev);
	else if (v != &v->idev->vec[0])
		ibtca_ib_cq_irq(v->idev, v - v->idev->vec);
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

void ibtca_release_dev(struct kref *ref)
{
	struct ibtca_dev *idev = container_of(ref, struct ibtca_dev, ref);

	mutex_destroy(&idev->ib_lock);
	mutex_destroy(&idev->cmd_lock);
	mutex_destroy(&idev->lock);
	pci_dev_put(idev->pdev);
	kfree(idev);
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

	if (_IOC_TYPE(cmd) == IBTCA_IOC_MAGIC &&
	    _IOC_NR(cmd) >= IBTCA_IOC_NR_DRDMA &&
	    _IOC_NR(cmd) < IBTCA_IOC_NR_DRDMA_END)
		return ibtca_drdma_ioctl(ctx, cmd, (void __user *)arg);
	if (_IOC_TYPE(cmd) == IBTCA_IOC_MAGIC && _IOC_NR(cmd) >= 0x10)
		return ibtca_verbs_ioctl(ctx, cmd, (void __user *)arg);
	/* Waits without the device lock: other calls go on meanwhile. */
	if (cmd == IBTCA_IOC_PORT_WAIT)
		return ibtca_port_wait(idev, (void __user *)arg);
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
	mutex_init(&idev->ib_lock);
	spin_lock_init(&idev->kcq_lock);
	INIT_LIST_HEAD(&idev->kcqs);
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

	ibtca_drdma_probe(idev);

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

	ibtca_port_early(idev);
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
	/* After the command queue's reset, which clears EVENT_VECTOR. */
	ibtca_port_init(idev);
	ibtca_ib_register(idev);
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
	ibtca_drdma_remove(idev);
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

	/* The RDMA core's clients free their objects while commands run. */
	ibtca_ib_unregister(idev);
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
	ibtca_port_remove(idev);
	pci_free_irq_vectors(pdev);
	pci_clear_master(pdev);
	ibtca_drdma_remove(idev);
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
