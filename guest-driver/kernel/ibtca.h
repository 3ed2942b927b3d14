/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca: private definitions shared by the files of the guest driver
 * (ibtca_main.c, ibtca_cmd.c, ibtca_verbs.c, ibtca_drdma.c, ibtca_port.c,
 * ibtca_ring.c, ibtca_ib*.c).
 */
#ifndef _IBTCA_H
#define _IBTCA_H

#include <linux/atomic.h>
#include <linux/io.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "ibtca_abi.h"
#include "ibtca_regs.h"
#include "ibtca_uapi.h"

#define IBTCA_NAME_LEN		16
#define IBTCA_IRQ_NAME_LEN	32

struct file;
struct vm_area_struct;

struct ibtca_dev;
struct ibtca_ib;

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
	/* DRDMA window (BAR2), NULL if the device has none. */
	void __iomem *win;
	u64 win_len;
	u32 drdma_ranges;
	u32 drdma_range_size;
	/* Port state and changes seen (ibtca_port.c). */
	struct work_struct port_work;
	atomic_t port_events;
	u32 port_state;
	u32 port_lid;
	/* The RDMA core's device (ibtca_ib.c), NULL if not registered. */
	struct mutex ib_lock;	/* serialises @ib with port events */
	struct ibtca_ib *ib;
	/* Kernel CQs whose interrupts call comp_handler (ibtca_ib_cq.c). */
	spinlock_t kcq_lock;
	struct list_head kcqs;
};

/* A verbs context: the objects of one open file. */
struct ibtca_ctx {
	struct ibtca_dev *idev;
	struct mutex lock;	/* serialises the context's ioctls and mmap */
	struct list_head bufs, pds, mrs, cqs, qps;
	u32 next_buf;
	u32 nbufs;
};

static inline u32 ibtca_rd(struct ibtca_dev *idev, u32 off)
{
	return readl(idev->regs + off);
}

static inline void ibtca_wr(struct ibtca_dev *idev, u32 off, u32 val)
{
	writel(val, idev->regs + off);
}

/* ibtca_main.c */
void ibtca_release_dev(struct kref *ref);

/* ibtca_cmd.c */
int ibtca_cmdq_init(struct ibtca_dev *idev);
void ibtca_cmdq_free(struct ibtca_dev *idev);
int ibtca_cmd(struct ibtca_dev *idev, u8 opcode, const void *params,
	      size_t len, u32 *out0, u32 *out1);
int ibtca_cmd_query(struct ibtca_dev *idev, u8 opcode, void *reply, size_t len);
int ibtca_cmd_query_sel(struct ibtca_dev *idev, u8 opcode, u8 sel, void *reply,
			size_t len);
int ibtca_cmd_query_handle(struct ibtca_dev *idev, u8 opcode, u32 handle,
			   u32 *out0, void *reply, size_t len);
int ibtca_cmd_handle(struct ibtca_dev *idev, u8 opcode, u32 handle);

/* ibtca_verbs.c */
void ibtca_ctx_teardown(struct ibtca_ctx *ctx);
long ibtca_verbs_ioctl(struct ibtca_ctx *ctx, unsigned int cmd,
		       void __user *argp);
int ibtca_mmap(struct file *file, struct vm_area_struct *vma);

/* ibtca_drdma.c: ioctls IBTCA_IOC_NR_DRDMA to IBTCA_IOC_NR_DRDMA_END - 1. */
#define IBTCA_IOC_NR_DRDMA	0x19
#define IBTCA_IOC_NR_DRDMA_END	0x20
void ibtca_drdma_probe(struct ibtca_dev *idev);
void ibtca_drdma_remove(struct ibtca_dev *idev);
long ibtca_drdma_ioctl(struct ibtca_ctx *ctx, unsigned int cmd,
		       void __user *argp);

/* ibtca_port.c: port state, the asynchronous event vector. */
#define IBTCA_EVENT_VECTOR	2
void ibtca_port_early(struct ibtca_dev *idev);
void ibtca_port_init(struct ibtca_dev *idev);
void ibtca_port_remove(struct ibtca_dev *idev);
void ibtca_port_irq(struct ibtca_dev *idev);
long ibtca_port_wait(struct ibtca_dev *idev, void __user *argp);

/* ibtca_ib.c: the ib_device registered with the kernel's RDMA core. */
void ibtca_ib_register(struct ibtca_dev *idev);
void ibtca_ib_unregister(struct ibtca_dev *idev);
void ibtca_ib_port_event(struct ibtca_dev *idev, u32 old, u32 state);
void ibtca_ib_srq_events(struct ibtca_dev *idev);
void ibtca_ib_pkey_event(struct ibtca_dev *idev);

/* ibtca_ib_cq.c: a CQ vector fired (hard IRQ context). */
void ibtca_ib_cq_irq(struct ibtca_dev *idev, unsigned int vector);

#endif /* _IBTCA_H */
