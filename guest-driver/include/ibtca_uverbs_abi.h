/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * ibtca: the ABI between the guest kernel driver (ibtca_uctx.c) and the
 * rdma-core provider (guest-driver/provider/): the driver-specific parts of
 * uverbs commands. scripts/build-provider.sh copies this file into
 * rdma-core's tree as kernel-headers/rdma/ibtca-abi.h, where
 * buildlib/make_abi_structs.py turns each structure into the provider's
 * DECLARE_DRV_CMD part, so keep one structure member per line and no
 * comment line that starts with a structure keyword.
 *
 * IBTCA_UVERBS_ABI_VERSION is the device's uverbs ABI version (sysfs
 * abi_version, which libibverbs matches) and the version both sides put
 * in the ucontext request and response; any change of a structure here
 * raises it.
 */
#ifndef IBTCA_UVERBS_ABI_H
#define IBTCA_UVERBS_ABI_H

#include <linux/types.h>

#define IBTCA_UVERBS_ABI_VERSION 2

/* ibv_open_device: the provider's ABI version. */
struct ibtca_alloc_ucontext_req {
	__u32 abi_version;
	__u32 reserved;
};

/*
 * The driver's ABI version and the device's limits (QUERY_DEVICE).
 * max_sge: the SGEs of a 128-byte WQE (4), what a provider that lays out
 * no larger strides may post. max_send_sge and max_recv_sge (added at the
 * end, no existing field changed, so the version stays; 0 from an older
 * driver): the SGEs of a user QP's send and receive WQEs at the largest
 * stride the device takes, for a provider that asks for strides in
 * struct ibtca_create_qp_req. max_srq_sge (added after them, the same
 * way; 0 from an older driver, whose SRQs take max_sge): the SGEs of a
 * user SRQ's receive WQE at the largest stride, for a provider that asks
 * for one in struct ibtca_create_srq_req.
 */
struct ibtca_alloc_ucontext_resp {
	__u32 abi_version;
	__u32 max_qp;
	__u32 max_qp_wr;
	__u32 max_cq;
	__u32 max_cqe;
	__u32 max_mr;
	__u32 max_pd;
	__u32 max_sge;
	__u32 max_qp_rd_atom;
	__u32 reserved;
	__aligned_u64 max_mr_size;
	__aligned_u64 db_mmap_offset;
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 max_srq_sge;
	__u32 reserved2;
};

/*
 * The data path in user space. The context's doorbell page (4096 bytes,
 * mapped uncached at db_mmap_offset) has the SQ doorbell at 0x0, the RQ
 * doorbell at 0x8 and the CQ doorbell at 0x10 (ibtca_regs.h). A CQ's ring
 * of 2^log_entries struct ibtca_cqe (ibtca_abi.h) is mapped at
 * ring_mmap_offset, ring_bytes long; the CQ doorbell takes cqn. With
 * IBTCA_UCQ_F_DB_RECORD in flags, a page holding struct
 * ibtca_cq_db_record (ibtca_abi.h) is mapped at db_record_mmap_offset:
 * the provider stores its consumer index there and rings the CQ doorbell
 * only to arm (flags and the offset came later, as for QPs).
 */
#define IBTCA_UCQ_F_DB_RECORD 1
struct ibtca_create_cq_resp {
	__u32 cqn;
	__u32 log_entries;
	__aligned_u64 ring_mmap_offset;
	__aligned_u64 ring_bytes;
	__u32 flags;
	__u32 reserved;
	__aligned_u64 db_record_mmap_offset;
};

/*
 * ibv_create_qp's driver data (added after ABI version 2, no existing
 * structure changed, so the version stays): with IBTCA_UQP_REQ_STRIDES in
 * flags the provider lays out send WQEs at the stride the response's
 * sq_log_stride names and receive WQEs at rq_log_stride, and the kernel
 * sizes them from the command's max_send_sge and max_recv_sge (up to the
 * context's max_send_sge and max_recv_sge). Without it (no driver data:
 * an older provider) both are 128 bytes and the QP takes 4 SGEs each way.
 * Any other flag, or a reserved field not 0, is refused with EINVAL.
 */
#define IBTCA_UQP_REQ_STRIDES 1
struct ibtca_create_qp_req {
	__u32 flags;
	__u32 reserved;
};

/*
 * A QP's send and receive queues, 2^log_wqes send WQEs and 2^log_wqes
 * receive WQEs, mapped together at ring_mmap_offset (ring_bytes long): the
 * SQ at sq_offset, the RQ at rq_offset. A send WQE slot is
 * 2^sq_log_stride bytes, a receive WQE slot 2^rq_log_stride (each
 * IBTCA_RECV_LOG_STRIDE, 128 bytes, unless the request asked for strides;
 * 0 from an older driver, which means 128 too): struct ibtca_send_wqe and
 * struct ibtca_recv_wqe at the start of each, the SGE list running on past
 * 128 bytes (ibtca_wqe.h). Every send
 * WQE carries its slot number as wr_id; the doorbells take qpn. With
 * IBTCA_UQP_F_DB_RECORD in flags, a page holding struct ibtca_db_record
 * (ibtca_abi.h) is mapped at db_record_mmap_offset: the provider stores
 * its SQ producer index there and rings the SQ doorbell only while the
 * device says it is not awake (flags and the offset were added at the
 * end: a shorter response from an older driver reads as no record).
 */
#define IBTCA_UQP_F_DB_RECORD 1
struct ibtca_create_qp_resp {
	__u32 qpn;
	__u32 log_wqes;
	__u32 sq_offset;
	__u32 rq_offset;
	__aligned_u64 ring_mmap_offset;
	__aligned_u64 ring_bytes;
	__u32 flags;
	__u32 reserved;
	__aligned_u64 db_record_mmap_offset;
	__u32 sq_log_stride;
	__u32 rq_log_stride;
};

/*
 * ibv_create_srq's driver data (added after ABI version 2, no existing
 * structure changed, so the version stays): with IBTCA_USRQ_REQ_STRIDE in
 * flags the provider lays out receive WQEs at the stride the response's
 * log_stride names, and the kernel sizes it from the command's max_sge
 * (up to the context's max_srq_sge). Without it (no driver data: an older
 * provider) the WQEs are 128 bytes and max_sge past 4 is refused with
 * EINVAL. Any other flag, or a reserved field not 0, is refused with
 * EINVAL.
 */
#define IBTCA_USRQ_REQ_STRIDE 1
struct ibtca_create_srq_req {
	__u32 flags;
	__u32 reserved;
};

/*
 * A shared receive queue (added in ABI version 2, no existing structure
 * changed): 2^log_wqes receive WQEs (ibtca_abi.h) mapped at
 * ring_mmap_offset, ring_bytes long, consumed in ring order by every QP
 * created with the SRQ; at most max_wr posted and not yet completed. The
 * SRQ doorbell (0x18 of the context's doorbell page) takes srqn. A WQE
 * slot is 2^log_stride bytes (added at the end: IBTCA_RECV_LOG_STRIDE,
 * 128 bytes, unless the request asked for a stride; 0 from an older
 * driver, which means 128 too), the SGE list running on past 128 bytes
 * as a QP's receive WQE's does.
 */
struct ibtca_create_srq_resp {
	__u32 srqn;
	__u32 log_wqes;
	__aligned_u64 ring_mmap_offset;
	__aligned_u64 ring_bytes;
	__u32 max_wr;
	__u32 reserved;
	__u32 log_stride;
	__u32 reserved2;
};

/*
 * ibv_modify_srq's driver data (added after ABI version 2, no existing
 * structure changed, so the version stays): with IBV_SRQ_MAX_WR past the
 * ring, the kernel gives the SRQ a larger ring, maps it as a new mmap
 * entry and writes struct ibtca_modify_srq_resp at resp_addr (modify_srq
 * has no response buffer of its own). Without it (an older provider)
 * growing is refused with EINVAL.
 */
struct ibtca_modify_srq_cmd {
	__aligned_u64 resp_addr;
};

/*
 * The SRQ's new ring after a growth: mapped at ring_mmap_offset,
 * ring_bytes long, 2^log_wqes WQEs; the receives posted before are in it
 * at their index modulo the new size. The old mapping may go.
 */
struct ibtca_modify_srq_resp {
	__aligned_u64 ring_mmap_offset;
	__aligned_u64 ring_bytes;
	__u32 log_wqes;
	__u32 max_wr;
};

/*
 * ibv_modify_qp's driver data (seed 002; added after ABI version 2, no
 * existing structure changed, so the version stays): the QP's MSN start
 * and ACK policy, which the kernel passes to the device's MODIFY_QP
 * (IBTCA_QP_ATTR_MSN, IBTCA_QP_ATTR_ACK_POLICY) on the modify of an RC QP
 * from INIT to RTR or from RTR to RTS, through the extended MODIFY_QP
 * command. comp_mask says which fields hold a choice; the others and the
 * reserved ones are 0. initial_msn: the MSN before the first message
 * (0..0xffffff; both ends set the same). ack_mode: the device's
 * IBTCA_ACK_* (ibtca_abi.h): 0 per message, 1 per packet, 2 coalesced
 * (1..65535: AckReq at most ack_every packets apart, closer at a quarter
 * window and on the last packet to send; ACKs due in one burst go as one
 * cumulative ACK, see IBTCA_ACK_COALESCED); window: packets in flight, 0 the device's default,
 * 1 stop-and-wait, at most IBTCA_MODIFY_QP_MAX_WINDOW. Anything else is
 * refused with EINVAL; a longer structure whose extra bytes are not 0
 * with EOPNOTSUPP; a shorter one (an older provider) has the missing
 * fields 0. Kernel consumers pass the same structure to
 * ibtca_qp_set_options() (ibtca_qp_options.h).
 */
#define IBTCA_MODIFY_QP_MSN		(1U << 0)
#define IBTCA_MODIFY_QP_ACK_POLICY	(1U << 1)
#define IBTCA_MODIFY_QP_MAX_WINDOW	1024
struct ibtca_modify_qp_cmd {
	__u32 comp_mask;
	__u32 initial_msn;
	__u16 ack_every;
	__u16 window;
	__u8 ack_mode;
	__u8 reserved8;
	__u16 reserved16;
};

#endif /* IBTCA_UVERBS_ABI_H */
