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

/*
 * Verbs interface. A file descriptor of /dev/ibtcaN is a verbs context: the
 * objects it creates (buffers, PDs, MRs, CQs, QPs) belong to it and are
 * destroyed when the last reference to the file goes away. Numbers and
 * constants (IBTCA_WR_*, IBTCA_WC_*, IBTCA_ACCESS_*, IBTCA_QPS_*,
 * IBTCA_QP_ATTR_*, IBTCA_MTU_*) are those of ibtca_abi.h.
 */

/* Largest buffer IBTCA_IOC_ALLOC_BUF accepts (4 MiB). */
#define IBTCA_UAPI_BUF_MAX	(4U << 20)

/* Largest number of buffers per context. */
#define IBTCA_UAPI_MAX_BUFS	16

/* Largest log2 of CQ entries, and of SQ/RQ entries. */
#define IBTCA_UAPI_CQ_LOG_MAX	12
#define IBTCA_UAPI_QP_LOG_MAX	10

/* Largest timeout IBTCA_IOC_POLL_CQ accepts. */
#define IBTCA_UAPI_POLL_TIMEOUT_MAX_MS	60000U

/* ALLOC_BUF: a zeroed DMA-coherent buffer to mmap() at @mmap_offset. */
struct ibtca_alloc_buf {
	__u64 size;		/* in: bytes (rounded up to pages) */
	__u64 mmap_offset;	/* out: offset argument of mmap() */
	__u64 dma_addr;		/* out: bus address (informational) */
	__u32 handle;		/* out: buffer handle for REG_MR */
	__u32 reserved;
};

/* CREATE_PD: out: PD number. */
struct ibtca_create_pd {
	__u32 pdn;
	__u32 reserved;
};

/* REG_MR: a region over [offset, offset + length) of buffer @buf. */
struct ibtca_reg_mr {
	__u32 buf;		/* in: buffer handle */
	__u32 pdn;		/* in: protection domain */
	__u64 offset;		/* in: first byte in the buffer */
	__u64 length;		/* in: bytes */
	__u32 access;		/* in: IBTCA_ACCESS_* */
	__u32 lkey;		/* out */
	__u32 rkey;		/* out */
	__u32 reserved;
	__u64 iova;		/* out: address of the first byte in SGEs and
				 * for remote peers
				 */
};

/* CREATE_CQ: completions raise MSI-X vector 1 when armed. */
struct ibtca_create_cq {
	__u32 log_entries;	/* in: 1..IBTCA_UAPI_CQ_LOG_MAX */
	__u32 cqn;		/* out */
};

/* CREATE_QP: an RC QP with 2^log_entries SQ and RQ entries. */
struct ibtca_create_qp {
	__u32 pdn;		/* in */
	__u32 send_cqn;		/* in */
	__u32 recv_cqn;		/* in */
	__u32 log_entries;	/* in: 1..IBTCA_UAPI_QP_LOG_MAX */
	__u32 qpn;		/* out */
	__u32 reserved;
};

/* MODIFY_QP: the fields of struct ibtca_cmd_modify_qp, in host order. */
struct ibtca_modify_qp {
	__u32 qpn;
	__u32 attr_mask;	/* IBTCA_QP_ATTR_* */
	__u8 state;		/* IBTCA_QPS_* */
	__u8 path_mtu;		/* IBTCA_MTU_* */
	__u8 timeout;		/* ACK timeout: 4.096 us << timeout, 0: none */
	__u8 retry_cnt;
	__u8 rnr_retry;
	__u8 min_rnr_timer;
	__u8 max_rd_atomic;
	__u8 sl;		/* service level (0-14), with IBTCA_QP_ATTR_PATH */
	__u32 dest_qpn;
	__u16 dlid;
	__u16 reserved1;
	__u32 sq_psn;
	__u32 rq_psn;
	__u32 access;		/* IBTCA_ACCESS_REMOTE_* only */
	__u32 reserved2;
};

/*
 * POST_SEND: one work request with at most one local buffer (none when
 * @length is 0 and the operation is not an atomic). Every request is
 * signaled. -ENOSPC when the SQ is full (completions not yet polled).
 * With IBTCA_UAPI_POST_F_MORE in @post_flags the SQ doorbell is not rung:
 * the next POST_SEND on the QP without it rings it for every request
 * posted so far (one BAR0 write for a batch, like a chained ibv_post_send).
 */
#define IBTCA_UAPI_POST_F_MORE	(1U << 0)

struct ibtca_post_send {
	__u32 qpn;
	__u32 opcode;		/* IBTCA_WR_* */
	__u64 wr_id;
	__u64 addr;		/* local buffer: iova of an MR ... */
	__u32 length;		/* ... its length ... */
	__u32 lkey;		/* ... and its lkey */
	__u64 remote_addr;	/* RDMA and atomics */
	__u32 rkey;		/* RDMA and atomics */
	__u32 imm_data;		/* *_IMM */
	__u64 compare_add;	/* atomics */
	__u64 swap;		/* compare and swap */
	__u32 flags;		/* IBTCA_WQE_F_SOLICITED, IBTCA_WQE_F_FENCE */
	__u32 post_flags;	/* IBTCA_UAPI_POST_F_* */
};

/* POST_RECV: one receive buffer. -ENOSPC when the RQ is full. */
struct ibtca_post_recv {
	__u32 qpn;
	__u32 length;
	__u64 wr_id;
	__u64 addr;		/* iova of an MR */
	__u32 lkey;
	__u32 reserved;
};

/* POLL_CQ: takes the next completion, waiting up to @timeout_ms for it. */
struct ibtca_poll_cq {
	__u32 cqn;		/* in */
	__u32 timeout_ms;	/* in: 0 = do not wait */
	__u32 found;		/* out: 1 if the fields below are a completion */
	__u32 byte_len;		/* out */
	__u64 wr_id;		/* out */
	__u32 qpn;		/* out */
	__u32 imm_data;		/* out: valid with IBTCA_CQE_F_IMM */
	__u32 src_qp;		/* out: source QP; vendor detail on errors */
	__u8 opcode;		/* out: IBTCA_WC_* */
	__u8 status;		/* out: IBTCA_WC_* status, 0 = success */
	__u8 flags;		/* out: IBTCA_CQE_F_* */
	__u8 reserved;
};

/*
 * POLL_CQ_BATCH: takes up to @max (1..IBTCA_UAPI_POLL_BATCH_MAX) ready
 * completions without waiting, into the array of struct ibtca_poll_cq at
 * user address @entries (their @cqn and @timeout_ms are left 0), and tells
 * the device once for all of them. @found is how many were taken.
 */
#define IBTCA_UAPI_POLL_BATCH_MAX	64U

struct ibtca_poll_cq_batch {
	__u32 cqn;		/* in */
	__u32 max;		/* in */
	__u32 found;		/* out */
	__u32 reserved;		/* in: 0 */
	__u64 entries;		/* in: user pointer to @max entries */
};

/*
 * Direct RDMA (DRDMA) window, seed 000. BAR2 is split into address ranges
 * (DRDMA_RANGES of DRDMA_RANGE_SIZE bytes); ARR n describes range n. The
 * ranges and ARRs belong to the device, not to a context: user space
 * coordinates their use. A DRDMA transfer is:
 *   DRDMA_SUBMIT (ARR, direction, length), then POST_SEND of an
 *   IBTCA_WR_DRDMA_WRITE / IBTCA_WR_DRDMA_READ whose local buffer is
 *   { addr 0, length, lkey IBTCA_SGE_DIRECT | ARR } (passed on unchanged),
 *   then DRDMA_FILL (WRITE) or DRDMA_DRAIN (READ) of the range.
 * DRDMA_MASK submits or commits up to 32 ranges with one register write.
 * Refused window accesses are not errors of the ioctls: the device counts
 * them in DRDMA_ERRORS and loads read all-ones.
 */

/* DRDMA_INFO: the window and the DRDMA global registers. */
struct ibtca_drdma_info {
	__u64 window_len;	/* size of the mapped window BAR in bytes */
	__u32 bar;		/* DRDMA_BAR */
	__u32 ranges;		/* DRDMA_RANGES */
	__u32 range_size;	/* DRDMA_RANGE_SIZE */
	__u32 pmbs;		/* DRDMA_PMBS */
	__u32 pmb_dedicated;	/* DRDMA_PMB_DEDICATED */
	__u32 errors;		/* DRDMA_ERRORS */
	__u32 last_error;	/* DRDMA_LAST_ERROR: code 7:0, ARR 23:8 */
	__u32 load_timeout_us;	/* DRDMA_LOAD_TIMEOUT_US */
	__u32 mode;		/* DRDMA_MODE (IBTCA_DRDMA_MODE_*) */
	__u32 reserved;
};

#define IBTCA_UAPI_DRDMA_READ		0	/* IB to PCI: loads */
#define IBTCA_UAPI_DRDMA_WRITE		1	/* PCI to IB: stores */

/* DRDMA_SUBMIT flag: put the range on PMB @pmb, not the next free one. */
#define IBTCA_UAPI_DRDMA_F_PMB		(1U << 0)

/*
 * DRDMA_SUBMIT: one write of the DRDMA_SUBMIT register. The device checks
 * the request (a refusal shows in DRDMA_ERRORS / DRDMA_LAST_ERROR); @ctrl
 * is the ARR's CTRL register read right after, if @arr is a range.
 */
struct ibtca_drdma_submit {
	__u32 arr;		/* in: ARR number, at most 0xffff */
	__u32 dir;		/* in: IBTCA_UAPI_DRDMA_READ / _WRITE */
	__u32 length;		/* in: total transfer length */
	__u32 flags;		/* in: IBTCA_UAPI_DRDMA_F_* */
	__u32 pmb;		/* in: PMB number with IBTCA_UAPI_DRDMA_F_PMB */
	__u32 ctrl;		/* out: ARR CTRL after the submit */
};

/* Access patterns of DRDMA_FILL and DRDMA_DRAIN. */
/* 1, 2, 4 and 8-byte accesses, naturally aligned, sizes chosen from @seed;
 * stores in an order shuffled from @seed, loads in address order.
 */
#define IBTCA_UAPI_DRDMA_PAT_MIXED	0
/* memcpy_toio() / memcpy_fromio() of the whole span. */
#define IBTCA_UAPI_DRDMA_PAT_MEMCPY	1
/* 8-byte accesses in address order (smaller ones at unaligned ends). */
#define IBTCA_UAPI_DRDMA_PAT_QWORD	2

/* DRDMA_FILL / DRDMA_DRAIN flag: then write DRDMA_COMMIT (mapped window). */
#define IBTCA_UAPI_DRDMA_F_COMMIT	(1U << 0)

/*
 * DRDMA_FILL: stores @length bytes of the user buffer at @buf into range
 * @arr at @offset. DRDMA_DRAIN: loads them from the range into the user
 * buffer. @offset + @length must not pass the range size.
 */
struct ibtca_drdma_xfer {
	__u64 buf;		/* in: user buffer address */
	__u32 arr;		/* in: range */
	__u32 offset;		/* in: first byte in the range */
	__u32 length;		/* in: bytes, at least 1 */
	__u32 pattern;		/* in: IBTCA_UAPI_DRDMA_PAT_* */
	__u32 seed;		/* in: PAT_MIXED sizes and order */
	__u32 flags;		/* in: IBTCA_UAPI_DRDMA_F_COMMIT */
	__u32 accesses;		/* out: window accesses made (0 for memcpy) */
	__u32 reserved;
	__u64 ns;		/* out: time spent in window accesses */
};

/* DRDMA_MASK operations. */
#define IBTCA_UAPI_DRDMA_MASK_SUBMIT	0	/* DRDMA_SUBMIT_MASK */
#define IBTCA_UAPI_DRDMA_MASK_COMMIT	1	/* DRDMA_COMMIT_MASK */

/*
 * DRDMA_MASK: one write of DRDMA_SUBMIT_MASK or DRDMA_COMMIT_MASK for the
 * ranges @base + i of every bit i set in @mask. SUBMIT: each range as
 * DRDMA_SUBMIT would, with @dir and @length, on the next free PMB (a
 * mapped window's range n is on PMB n). COMMIT: each WRITE range counts
 * the bytes it still expects as stored (mapped window: one register write
 * instead of one DRDMA_COMMIT per range). @errors is DRDMA_ERRORS read
 * right after (which also flushes the write): refusals add to it.
 */
struct ibtca_drdma_mask {
	__u32 op;		/* in: IBTCA_UAPI_DRDMA_MASK_* */
	__u32 base;		/* in: first range, at most 0xffff */
	__u32 mask;		/* in: bit i: range @base + i */
	__u32 dir;		/* in (SUBMIT): IBTCA_UAPI_DRDMA_READ / _WRITE */
	__u32 length;		/* in (SUBMIT): total transfer length */
	__u32 errors;		/* out: DRDMA_ERRORS after the write */
};

/* DRDMA_ARR: the registers of one ARR. */
struct ibtca_drdma_arr {
	__u32 arr;		/* in: ARR number below DRDMA_RANGES */
	__u32 ctrl;		/* out: IBTCA_ARR_* bits, PMB in 15:8 */
	__u32 ttl;		/* out: total transfer length */
	__u32 wbc;		/* out: write byte count */
	__u32 rrpl;		/* out: read response payload length */
	__u32 resp_offset;	/* out: offset of that response in the range */
	__u32 drained;		/* out: bytes of it loaded so far */
	__u32 reserved;
};

/*
 * DRDMA_RAW: one window access of @size (1, 2, 4 or 8) bytes at @offset in
 * the window (aligned to @size): a store of @value, or a load into @value.
 */
struct ibtca_drdma_raw {
	__u64 offset;		/* in */
	__u32 size;		/* in */
	__u32 write;		/* in: 1 store, 0 load */
	__u64 value;		/* in (store) / out (load) */
};

/* Longest wait IBTCA_IOC_PORT_WAIT accepts. */
#define IBTCA_UAPI_PORT_WAIT_MAX_MS	600000

/*
 * PORT_WAIT: waits until more than @after port state changes were seen
 * since the driver bound the device (or @timeout_ms passes: -ETIMEDOUT;
 * 0 reads without waiting) and reports the port state (IBTCA_PORT_*).
 */
struct ibtca_port_wait {
	__u32 after;		/* in */
	__u32 timeout_ms;	/* in */
	__u32 events;		/* out: changes seen so far */
	__u32 state;		/* out: IBTCA_PORT_* */
	__u32 reserved;		/* in: 0 */
	__u32 pad;
};

#define IBTCA_IOC_GET_INFO	_IOR(IBTCA_IOC_MAGIC, 0x00, struct ibtca_info)
#define IBTCA_IOC_REG_READ	_IOWR(IBTCA_IOC_MAGIC, 0x01, struct ibtca_reg)
#define IBTCA_IOC_REG_WRITE	_IOW(IBTCA_IOC_MAGIC, 0x02, struct ibtca_reg)
#define IBTCA_IOC_IRQ_TEST	_IOWR(IBTCA_IOC_MAGIC, 0x03, struct ibtca_irq_test)
#define IBTCA_IOC_DMA_TEST	_IOWR(IBTCA_IOC_MAGIC, 0x04, struct ibtca_dma_test)
#define IBTCA_IOC_BENCH_MMIO	_IOWR(IBTCA_IOC_MAGIC, 0x05, struct ibtca_bench_mmio)
#define IBTCA_IOC_DMA_FAULT_TEST _IOWR(IBTCA_IOC_MAGIC, 0x06, struct ibtca_dma_fault)
#define IBTCA_IOC_PORT_WAIT	_IOWR(IBTCA_IOC_MAGIC, 0x07, struct ibtca_port_wait)

#define IBTCA_IOC_ALLOC_BUF	_IOWR(IBTCA_IOC_MAGIC, 0x10, struct ibtca_alloc_buf)
#define IBTCA_IOC_CREATE_PD	_IOR(IBTCA_IOC_MAGIC, 0x11, struct ibtca_create_pd)
#define IBTCA_IOC_REG_MR	_IOWR(IBTCA_IOC_MAGIC, 0x12, struct ibtca_reg_mr)
#define IBTCA_IOC_CREATE_CQ	_IOWR(IBTCA_IOC_MAGIC, 0x13, struct ibtca_create_cq)
#define IBTCA_IOC_CREATE_QP	_IOWR(IBTCA_IOC_MAGIC, 0x14, struct ibtca_create_qp)
#define IBTCA_IOC_MODIFY_QP	_IOW(IBTCA_IOC_MAGIC, 0x15, struct ibtca_modify_qp)
#define IBTCA_IOC_POST_SEND	_IOW(IBTCA_IOC_MAGIC, 0x16, struct ibtca_post_send)
#define IBTCA_IOC_POST_RECV	_IOW(IBTCA_IOC_MAGIC, 0x17, struct ibtca_post_recv)
#define IBTCA_IOC_POLL_CQ	_IOWR(IBTCA_IOC_MAGIC, 0x18, struct ibtca_poll_cq)
#define IBTCA_IOC_DRDMA_INFO	_IOR(IBTCA_IOC_MAGIC, 0x19, struct ibtca_drdma_info)
#define IBTCA_IOC_DRDMA_SUBMIT	_IOWR(IBTCA_IOC_MAGIC, 0x1a, struct ibtca_drdma_submit)
#define IBTCA_IOC_DRDMA_FILL	_IOWR(IBTCA_IOC_MAGIC, 0x1b, struct ibtca_drdma_xfer)
#define IBTCA_IOC_DRDMA_DRAIN	_IOWR(IBTCA_IOC_MAGIC, 0x1c, struct ibtca_drdma_xfer)
#define IBTCA_IOC_DRDMA_ARR	_IOWR(IBTCA_IOC_MAGIC, 0x1d, struct ibtca_drdma_arr)
#define IBTCA_IOC_DRDMA_RAW	_IOWR(IBTCA_IOC_MAGIC, 0x1e, struct ibtca_drdma_raw)
#define IBTCA_IOC_DRDMA_MASK	_IOWR(IBTCA_IOC_MAGIC, 0x1f, struct ibtca_drdma_mask)
#define IBTCA_IOC_POLL_CQ_BATCH	_IOWR(IBTCA_IOC_MAGIC, 0x21, struct ibtca_poll_cq_batch)
/*
 * 0x20 and 0x22 are reserved and not reused, so that a binary built
 * against them gets ENOTTY rather than another command: they were DESTROY
 * and POST_SEND_BATCH, whose work libibverbs does
 * (docs/guest-verbs-surface.md).
 */

#endif /* IBTCA_UAPI_H */
