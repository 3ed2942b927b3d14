/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * ibtca: ioctl ABI of /dev/ibtcaN, shared by the kernel module and
 * ibtca-tool.
 *
 * Every structure uses fixed-width types and explicit padding so that the
 * layout is identical for 32- and 64-bit user space. Reserved and padding
 * fields must be zero on input and are zero on output.
 */
#ifndef IBTCA_UAPI_H
#define IBTCA_UAPI_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define IBTCA_IOC_MAGIC		'I'

/* Size of the per-vector interrupt counter array in struct ibtca_info. */
#define IBTCA_UAPI_MAX_VECTORS	32

/* Largest buffer IBTCA_IOC_DMA_TEST accepts (1 MiB). */
#define IBTCA_UAPI_DMA_MAX	(1U << 20)

/* Largest timeout IBTCA_IOC_IRQ_TEST accepts. */
#define IBTCA_UAPI_IRQ_TIMEOUT_MAX_MS	60000U

/* Largest iteration count IBTCA_IOC_BENCH_MMIO accepts. */
#define IBTCA_UAPI_BENCH_MAX	10000000U

struct ibtca_info {
	__u32 vendor;		/* PCI vendor ID */
	__u32 device;		/* PCI device ID */
	__u32 class_code;	/* PCI class code, 24 bits (0x0c0600) */
	__u32 revision;		/* PCI revision ID */
	__u32 magic;		/* MAGIC register */
	__u32 version;		/* VERSION register: major 31:16, minor 15:0 */
	__u32 caps;		/* CAPS register */
	__u32 vectors;		/* MSI-X vectors allocated by the driver */
	__u32 num_vectors;	/* NUM_VECTORS register */
	__u32 port_state;	/* PORT_STATE register */
	__u32 status;		/* STATUS register */
	__u32 irq_test_count;	/* IRQ_TEST_COUNT register */
	__u32 error_count;	/* ERROR_COUNT register */
	__u32 instance;		/* N of /dev/ibtcaN */
	__u32 bar0_len;		/* size of the register BAR in bytes */
	__u32 reserved;
	__u64 irq_counts[IBTCA_UAPI_MAX_VECTORS]; /* handled, per vector */
};

/* REG_READ / REG_WRITE: offset must be 4-byte aligned and inside BAR0. */
struct ibtca_reg {
	__u32 offset;
	__u32 value;
};

struct ibtca_irq_test {
	__u32 vector;		/* in: vector to fire through IRQ_TEST */
	__u32 timeout_ms;	/* in: 0 means 5000 */
	__u32 delivered;	/* out: 1 if the handler ran in time */
	__u32 reserved;
	__u64 latency_ns;	/* out: register write to handler entry */
};

struct ibtca_dma_test {
	__u32 cmd;		/* in: IBTCA_DMA_CMD_* (any value is passed on) */
	__u32 len;		/* in: bytes, at most IBTCA_UAPI_DMA_MAX */
	__u32 seed;		/* in: FILL seed; SUM pattern seed */
	__u32 status;		/* out: DMA_STATUS after the command */
	__u32 result;		/* out: DMA_RESULT after the command */
	__u32 expected;		/* out: CPU FNV-1a of the buffer (SUM) */
	__u32 verify_ok;	/* out: 1 if FILL pattern / SUM checksum match */
	__u32 bad_offset;	/* out: first mismatching byte (FILL), or len */
};

struct ibtca_dma_fault {
	__u64 addr;		/* in: bus address, 0 means 1ULL << 46 */
	__u32 len;		/* in: 0 means 4096 */
	__u32 status;		/* out: DMA_STATUS after a SUM command */
	__u32 fault_ok;		/* out: 1 if status == IBTCA_DMA_ST_FAULT */
	__u32 reserved;
};

struct ibtca_bench_mmio {
	__u32 iterations;	/* in: number of reads and of writes */
	__u32 reserved;
	__u64 read_ns;		/* out: total ns for the reads */
	__u64 write_ns;		/* out: total ns for the writes */
};

#define IBTCA_IOC_GET_INFO	_IOR(IBTCA_IOC_MAGIC, 0x00, struct ibtca_info)
#define IBTCA_IOC_REG_READ	_IOWR(IBTCA_IOC_MAGIC, 0x01, struct ibtca_reg)
#define IBTCA_IOC_REG_WRITE	_IOW(IBTCA_IOC_MAGIC, 0x02, struct ibtca_reg)
#define IBTCA_IOC_IRQ_TEST	_IOWR(IBTCA_IOC_MAGIC, 0x03, struct ibtca_irq_test)
#define IBTCA_IOC_DMA_TEST	_IOWR(IBTCA_IOC_MAGIC, 0x04, struct ibtca_dma_test)
#define IBTCA_IOC_BENCH_MMIO	_IOWR(IBTCA_IOC_MAGIC, 0x05, struct ibtca_bench_mmio)
#define IBTCA_IOC_DMA_FAULT_TEST _IOWR(IBTCA_IOC_MAGIC, 0x06, struct ibtca_dma_fault)

#endif /* IBTCA_UAPI_H */
