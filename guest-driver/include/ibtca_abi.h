/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * ibtca verbs ABI: structures the driver and the device share in guest memory.
 *
 * GENERATED from device/abi/src/verbs.rs by `cargo run -p ibtca-device --bin
 * ibtca-regs-header -- abi`. Do not edit: a device unit test checks this file.
 */
#ifndef IBTCA_ABI_H
#define IBTCA_ABI_H

#include <linux/types.h>

#ifndef __packed
#define __packed __attribute__((packed))
#endif

/* WR opcode: SEND. */
#define IBTCA_WR_SEND                      0x0
/* WR opcode: SEND with immediate. */
#define IBTCA_WR_SEND_IMM                  0x1
/* WR opcode: RDMA WRITE. */
#define IBTCA_WR_RDMA_WRITE                0x2
/* WR opcode: RDMA WRITE with immediate. */
#define IBTCA_WR_RDMA_WRITE_IMM            0x3
/* WR opcode: RDMA READ. */
#define IBTCA_WR_RDMA_READ                 0x4
/* WR opcode: atomic compare and swap (8 bytes). */
#define IBTCA_WR_ATOMIC_CMP_SWP            0x5
/* WR opcode: atomic fetch and add (8 bytes). */
#define IBTCA_WR_ATOMIC_FETCH_ADD          0x6
/* WR opcode: bind a memory window (rkey = window's current key, compare_add = VA, swap = length, sge[0].lkey = MR, imm_data = IBTCA_ACCESS_REMOTE_* rights); the window's key becomes rkey with its low byte incremented. */
#define IBTCA_WR_BIND_MW                   0x7
/* WR opcode: invalidate a memory window or MR key locally (imm_data = key). */
#define IBTCA_WR_LOCAL_INV                 0x8
/* WR opcode: Direct RDMA WRITE (seed 000): sge[0] is a direct SGE (lkey = IBTCA_SGE_DIRECT | ARR number, addr 0, length = the ARR's total transfer length); the bytes the guest stores into that window range are written at remote_addr/rkey. */
#define IBTCA_WR_DRDMA_WRITE               0x9
/* WR opcode: Direct RDMA READ: remote_addr/rkey are read into the direct SGE's range, where the guest loads them. */
#define IBTCA_WR_DRDMA_READ                0xa
/* WR opcode: SEND with Invalidate: the responder invalidates the memory window key in imm_data once the message has arrived (IETH). */
#define IBTCA_WR_SEND_INV                  0xb
/* WR opcode: fast registration (IB_WR_REG_MR), executed in send-queue order: the WQE is a struct ibtca_reg_mr_wqe; the region ALLOC_MR made gets its pages, bounds, rights and its key's low byte. */
#define IBTCA_WR_REG_MR                    0xc
/* WR opcode (UD, SMI and GSI QPs only): a datagram SEND; the WQE is a struct ibtca_ud_send_wqe. */
#define IBTCA_WR_UD_SEND                   0x10
/* WR opcode (UD, SMI and GSI QPs only): a datagram SEND with immediate. */
#define IBTCA_WR_UD_SEND_IMM               0x11
/* struct ibtca_ud_send_wqe av_flags: the packet carries a GRH. */
#define IBTCA_UD_AV_F_GRH                  0x1
/* SGE lkey flag: the SGE is a DRDMA window range (ARR number in bits 15:0), not a memory region. */
#define IBTCA_SGE_DIRECT                   0x80000000
/* WQE flag: generate a completion. */
#define IBTCA_WQE_F_SIGNALED               0x1
/* WQE flag: solicited event. */
#define IBTCA_WQE_F_SOLICITED              0x2
/* WQE flag: wait for earlier RDMA READs and atomics first. */
#define IBTCA_WQE_F_FENCE                  0x4
/* WQE flag (SEND, RDMA WRITE and their immediate forms): the payload is the WQE's own `inline_len` bytes where its SGEs would be, read when the WQE is; no L_Key is checked. A longer `inline_len` or another operation completes with IBTCA_WC_LOC_LEN_ERR or IBTCA_WC_LOC_QP_OP_ERR. */
#define IBTCA_WQE_F_INLINE                 0x8
/* Most bytes of inline data one send WQE carries (struct ibtca_device_attr_ext max_inline_data). */
#define IBTCA_MAX_INLINE_DATA              0x40
/* log2 of the default receive WQE stride (128 bytes: struct ibtca_recv_wqe, 4 SGEs); a stride of 2^n bytes holds (2^n - 64) / 16 SGEs. */
#define IBTCA_RECV_LOG_STRIDE              0x7
/* log2 of the largest receive WQE stride (1024 bytes). */
#define IBTCA_MAX_RECV_LOG_STRIDE          0xa
/* Most SGEs of one receive WQE (struct ibtca_device_attr_ext max_recv_sge and max_srq_sge), at a stride of 1024 bytes. */
#define IBTCA_MAX_RECV_SGE                 0x20
/* Most SGEs of one send WQE (struct ibtca_device_attr max_sge), at a send stride of 1024 bytes (which would hold 60): the receive side's cap, above the 30 of common HCAs. */
#define IBTCA_MAX_SEND_SGE                 0x20
/* Completion opcode: SEND. */
#define IBTCA_WC_SEND                      0x0
/* Completion opcode: RDMA WRITE. */
#define IBTCA_WC_RDMA_WRITE                0x1
/* Completion opcode: RDMA READ. */
#define IBTCA_WC_RDMA_READ                 0x2
/* Completion opcode: compare and swap. */
#define IBTCA_WC_COMP_SWAP                 0x3
/* Completion opcode: fetch and add. */
#define IBTCA_WC_FETCH_ADD                 0x4
/* Completion opcode: memory window bind. */
#define IBTCA_WC_BIND_MW                   0x5
/* Completion opcode: local invalidate. */
#define IBTCA_WC_LOCAL_INV                 0x6
/* Completion opcode: Direct RDMA WRITE (the remote side acknowledged it; the ARR is free again). */
#define IBTCA_WC_DRDMA_WRITE               0x7
/* Completion opcode: Direct RDMA READ (every response arrived; the ARR frees once the guest has loaded them all). */
#define IBTCA_WC_DRDMA_READ                0x8
/* Completion opcode: fast registration (IBTCA_WR_REG_MR). */
#define IBTCA_WC_REG_MR                    0x9
/* Completion opcode: a receive. */
#define IBTCA_WC_RECV                      0x80
/* Completion opcode: a receive consumed by RDMA WRITE with immediate. */
#define IBTCA_WC_RECV_RDMA_WITH_IMM        0x81
/* Completion status: success. */
#define IBTCA_WC_SUCCESS                   0x0
/* Completion status: local length error. */
#define IBTCA_WC_LOC_LEN_ERR               0x1
/* Completion status: local QP operation error. */
#define IBTCA_WC_LOC_QP_OP_ERR             0x2
/* Completion status: local protection error (bad lkey, bounds, rights). */
#define IBTCA_WC_LOC_PROT_ERR              0x4
/* Completion status: flushed (QP in error). */
#define IBTCA_WC_WR_FLUSH_ERR              0x5
/* Completion status: memory window bind error. */
#define IBTCA_WC_MW_BIND_ERR               0x6
/* Completion status: bad response. */
#define IBTCA_WC_BAD_RESP_ERR              0x7
/* Completion status: local access error. */
#define IBTCA_WC_LOC_ACCESS_ERR            0x8
/* Completion status: remote invalid request (NAK 0x61). */
#define IBTCA_WC_REM_INV_REQ_ERR           0x9
/* Completion status: remote access error (NAK 0x62). */
#define IBTCA_WC_REM_ACCESS_ERR            0xa
/* Completion status: remote operational error (NAK 0x63). */
#define IBTCA_WC_REM_OP_ERR                0xb
/* Completion status: transport retries exhausted. */
#define IBTCA_WC_RETRY_EXC_ERR             0xc
/* Completion status: RNR retries exhausted. */
#define IBTCA_WC_RNR_RETRY_EXC_ERR         0xd
/* Completion status: the port is Init or Armed, not Active, so a datagram QP other than QP0 sends nothing (IBA vol 1 §7.2); the guest's RDMA core sees IB_WC_GENERAL_ERR. */
#define IBTCA_WC_PORT_INACTIVE_ERR         0x5a
/* CQE flag: imm_data is valid. */
#define IBTCA_CQE_F_IMM                    0x1
/* CQE flag (receives): the SEND invalidated the key now in imm_data. */
#define IBTCA_CQE_F_INV                    0x2
/* CQE flag (receives): the message asked for a solicited event (BTH SE); a CQ armed with IBTCA_CQ_ARM_SOLICITED interrupts for it. */
#define IBTCA_CQE_F_SOLICITED              0x4
/* CQE flag (receives on UD and GSI QPs): the packet had a GRH, now in the buffer's first 40 bytes (which are left alone otherwise; byte_len counts them either way). */
#define IBTCA_CQE_F_GRH                    0x20
/* CQ doorbell arm: interrupt on the next completion. */
#define IBTCA_CQ_ARM_NEXT                  0x1
/* CQ doorbell arm: interrupt on the next solicited completion. */
#define IBTCA_CQ_ARM_SOLICITED             0x2
/* Access right: local write. */
#define IBTCA_ACCESS_LOCAL_WRITE           0x1
/* Access right: remote write. */
#define IBTCA_ACCESS_REMOTE_WRITE          0x2
/* Access right: remote read. */
#define IBTCA_ACCESS_REMOTE_READ           0x4
/* Access right: remote atomic. */
#define IBTCA_ACCESS_REMOTE_ATOMIC         0x8
/* Access right: memory windows may be bound to this MR. */
#define IBTCA_ACCESS_MW_BIND               0x10
/* QP state: reset. */
#define IBTCA_QPS_RESET                    0x0
/* QP state: initialized. */
#define IBTCA_QPS_INIT                     0x1
/* QP state: ready to receive. */
#define IBTCA_QPS_RTR                      0x2
/* QP state: ready to send. */
#define IBTCA_QPS_RTS                      0x3
/* QP state: send queue error (a UD QP whose send work request failed: later sends flush, receives go on; MODIFY_QP to RTS resumes it). */
#define IBTCA_QPS_SQE                      0x5
/* QP state: error. */
#define IBTCA_QPS_ERR                      0x6
/* Path MTU code: 256 bytes (4096 = 5). */
#define IBTCA_MTU_256                      0x1
/* Path MTU code: 4096 bytes. */
#define IBTCA_MTU_4096                     0x5
/* Command status: not done yet (set by the driver). */
#define IBTCA_CMD_ST_PENDING               0xffff
/* Command status: done. */
#define IBTCA_CMD_ST_OK                    0x0
/* Command flag: raise the command vector (MSI-X 0) when done. */
#define IBTCA_CMD_F_IRQ                    0x1
/* Command: query the port (params: zero; out0 = LID | state << 16, out1 = active MTU code; reply: struct ibtca_port_attr over params). */
#define IBTCA_CMD_QUERY_PORT               0x1
/* Command: query the device's identity and limits (params: byte 0 selects the reply, the rest zero: 0 = struct ibtca_device_attr, IBTCA_DEVICE_ATTR_EXT = struct ibtca_device_attr_ext; reply over params). */
#define IBTCA_CMD_QUERY_DEVICE             0x2
/* QUERY_DEVICE selector (params byte 0): the second reply, struct ibtca_device_attr_ext. */
#define IBTCA_DEVICE_ATTR_EXT              0x1
/* Command: allocate a protection domain (out0 = PD number). */
#define IBTCA_CMD_CREATE_PD                0x10
/* Command: free a protection domain (params: struct ibtca_cmd_handle). */
#define IBTCA_CMD_DESTROY_PD               0x11
/* Command: register a memory region, guest-physically contiguous or by page list (params: struct ibtca_cmd_reg_mr; out0 = lkey, out1 = rkey). */
#define IBTCA_CMD_REG_MR                   0x20
/* Command: deregister a memory region (params: struct ibtca_cmd_handle with the lkey). */
#define IBTCA_CMD_DEREG_MR                 0x21
/* Command: allocate a memory window (params: struct ibtca_cmd_handle with the PD; out0 = rkey). */
#define IBTCA_CMD_ALLOC_MW                 0x22
/* Command: free a memory window (params: struct ibtca_cmd_handle with its rkey, any low byte: binds move the key). */
#define IBTCA_CMD_DEALLOC_MW               0x23
/* Command: allocate a fast-registration region, free until an IBTCA_WR_REG_MR registers it (params: struct ibtca_cmd_alloc_mr; out0 = out1 = its key, lkey and rkey alike). DEREG_MR with its current key frees it. */
#define IBTCA_CMD_ALLOC_MR                 0x24
/* Command: allocate a type 1 memory window (params: struct ibtca_cmd_handle with the PD; out0 = rkey). Bound by IBTCA_WR_BIND_MW as a type 2 window is, but neither LOCAL_INV (IBTCA_WC_LOC_PROT_ERR) nor SEND with Invalidate (the responder's invalid-request NAK) can invalidate it; DEALLOC_MW frees it. */
#define IBTCA_CMD_ALLOC_MW_TYPE1           0x70
/* Command: create a CQ (params: struct ibtca_cmd_create_cq; out0 = CQ number). */
#define IBTCA_CMD_CREATE_CQ                0x30
/* Command: destroy a CQ (params: struct ibtca_cmd_handle). */
#define IBTCA_CMD_DESTROY_CQ               0x31
/* Command: set a CQ's interrupt moderation (params: struct ibtca_cmd_modify_cq; CAP_CQ_MODERATION): an armed CQ raises its vector at the `count`th completion that satisfies its arm, or `period_us` after the first of them, whichever comes first. A count of 0 or 1, or a period of 0, fires at the first (no moderation, as a new CQ). ENOENT for no such CQ, EINVAL for reserved bytes not zero. */
#define IBTCA_CMD_MODIFY_CQ                0x32
/* Command: create a QP (params: struct ibtca_cmd_create_qp, log_sizes byte 3 the IBTCA_QPT_* type; out0 = QP number). */
#define IBTCA_CMD_CREATE_QP                0x40
/* Command: modify a QP (params: struct ibtca_cmd_modify_qp). */
#define IBTCA_CMD_MODIFY_QP                0x41
/* Command: query a QP (params: struct ibtca_cmd_handle with the QP number, the rest zero; out0 = its IBTCA_QPS_* state; reply: struct ibtca_qp_attr over params). The state is the device's: IBTCA_QPS_ERR once an error completion or a responder error moved the QP there, IBTCA_QPS_SQE once a UD QP's send work request failed. */
#define IBTCA_CMD_QUERY_QP                 0x42
/* Command: destroy a QP (params: struct ibtca_cmd_handle). */
#define IBTCA_CMD_DESTROY_QP               0x43
/* Command: attach a UD QP to a multicast group (params: struct ibtca_cmd_mcast): datagrams to the group (a multicast DLID, a GRH whose DGID is the MGID) reach the QP from then on. Attaching twice is a no-op; ENOMEM when the device has IBTCA_MAX_MCAST_GROUPS groups or the group IBTCA_MAX_MCAST_QPS QPs; EINVAL for a QP not UD, an MGID not multicast (byte 0 not 0xff) or an MLID outside 0xc000-0xfffe; ENOENT for no such QP. Destroying the QP detaches it. */
#define IBTCA_CMD_ATTACH_MCAST             0x44
/* Command: detach a QP from a multicast group (params: struct ibtca_cmd_mcast; the MLID is not compared); EINVAL if the QP is not attached to the group. The group goes with its last QP. */
#define IBTCA_CMD_DETACH_MCAST             0x45
/* Multicast groups one device holds (ATTACH_MCAST; struct ib_device_attr max_mcast_grp). */
#define IBTCA_MAX_MCAST_GROUPS             0x100
/* QPs attached to one multicast group (max_mcast_qp_attach). */
#define IBTCA_MAX_MCAST_QPS                0x40
/* Command: create a shared receive queue (params: struct ibtca_cmd_create_srq; out0 = SRQ number). QPs created with its number take their receives from it. */
#define IBTCA_CMD_CREATE_SRQ               0x50
/* Command: change an SRQ's max_wr (within its ring) or arm its limit (params: struct ibtca_cmd_modify_srq). */
#define IBTCA_CMD_MODIFY_SRQ               0x51
/* Command: query an SRQ (params: struct ibtca_cmd_handle; out0 = srq_limit, out1 = limit events so far; reply: struct ibtca_srq_attr over params). */
#define IBTCA_CMD_QUERY_SRQ                0x52
/* Command: destroy an SRQ no QP uses (params: struct ibtca_cmd_handle; EBUSY while a QP names it). */
#define IBTCA_CMD_DESTROY_SRQ              0x53
/* Command: give an SRQ a ring at least as large (params: struct ibtca_cmd_resize_srq): the device copies the receives posted and not yet taken into it, each to its index modulo the new size, and reads only the new ring from then on (EFAULT, nothing changed, if either ring is outside guest memory). A driver posting meanwhile writes into both rings; it frees the old one once this completes. */
#define IBTCA_CMD_RESIZE_SRQ               0x54
/* MODIFY_SRQ attribute: max_wr, the most receives posted and not yet taken (1 to the ring's entries). */
#define IBTCA_SRQ_ATTR_MAX_WR              0x1
/* MODIFY_SRQ attribute: srq_limit; non-zero arms the limit event (fired once when fewer than srq_limit receives remain posted, which disarms it: limit back to 0), 0 disarms. */
#define IBTCA_SRQ_ATTR_LIMIT               0x2
/* Command: give a QP a doorbell record (params: struct ibtca_cmd_db_record with the QP number): the device then reads the SQ and RQ producer indexes from it as well as from doorbells and keeps its awake words. */
#define IBTCA_CMD_QP_DB_RECORD             0x78
/* Command: give a CQ a doorbell record (params: struct ibtca_cmd_db_record with the CQ number, the record a struct ibtca_cq_db_record): the device reads the consumer index there before it calls the CQ full. */
#define IBTCA_CMD_CQ_DB_RECORD             0x79
/* Bytes of guest memory a doorbell record may take (one page: what the driver maps). */
#define IBTCA_DB_RECORD_BYTES              0x1000
/* Command: hand a 256-byte SMP to the port's own subnet management agent, as if it came from the port itself (the driver's process_mad: SMPs the local SM sends to its own port; params: struct ibtca_cmd_mad; out0 = 1 when the agent answered and the answer is at reply, 0 when it gives none: an SMP for the SM, a response, a failed M_Key check). */
#define IBTCA_CMD_SMA_MAD                  0x58
/* Command: set, then clear, capability bits of the port's PortInfo that its host owns (IsSM, for an SM in the guest, and IsDeviceManagementSupported, for a Device Management agent such as ib_srpt: the driver's modify_port; other bits are ignored; params: struct ibtca_cmd_port_caps; out0 = the capability mask now). */
#define IBTCA_CMD_SET_PORT_CAPS            0x59
/* QP type (CREATE_QP log_sizes byte 3): reliable connected. */
#define IBTCA_QPT_RC                       0x0
/* QP type: unreliable datagram (Q_Key, UD send WQEs, no quasi-WQE ring: log_sizes byte 2 and quasi are ignored). */
#define IBTCA_QPT_UD                       0x1
/* QP type: the port's QP0 (at most one): SMPs the device's agent does not answer (SMInfo, responses, traps) arrive here, its sends leave on VL15 as QP0. */
#define IBTCA_QPT_SMI                      0x2
/* QP type: the port's QP1 (at most one): GMPs to QP1 but the PerfMgt class arrive here (Q_Key 0x80010000), its sends leave as QP1. */
#define IBTCA_QPT_GSI                      0x3
/* The Q_Key of QP1 (IBA 13.5.3.2). */
#define IBTCA_GSI_QKEY                     0x80010000
/* Port width (struct ibtca_port_attr, IB PortInfo encoding): 4X. */
#define IBTCA_PORT_WIDTH_4X                0x2
/* Port speed per lane (struct ibtca_port_attr, Linux's enum ib_port_speed): QDR, 10 Gb/s. */
#define IBTCA_PORT_SPEED_QDR               0x4
/* Physical port state (IB PortInfo PortPhysicalState): polling for a peer. */
#define IBTCA_PORT_PHYS_POLLING            0x2
/* Physical port state: link up. */
#define IBTCA_PORT_PHYS_LINK_UP            0x5
/* Device capability (struct ibtca_device_attr): atomic compare-and-swap and fetch-and-add, atomic between the device's QPs. */
#define IBTCA_DEV_CAP_ATOMIC               0x1
/* Device capability: memory windows (type 2, bound by WR) and SEND with Invalidate. */
#define IBTCA_DEV_CAP_MW                   0x2
/* MODIFY_QP attribute: state. */
#define IBTCA_QP_ATTR_STATE                0x1
/* MODIFY_QP attribute: access flags. */
#define IBTCA_QP_ATTR_ACCESS               0x2
/* MODIFY_QP attribute: path (DLID, path MTU). */
#define IBTCA_QP_ATTR_PATH                 0x4
/* MODIFY_QP attribute: destination QP number. */
#define IBTCA_QP_ATTR_DEST_QPN             0x8
/* MODIFY_QP attribute: receive PSN. */
#define IBTCA_QP_ATTR_RQ_PSN               0x10
/* MODIFY_QP attribute: send PSN. */
#define IBTCA_QP_ATTR_SQ_PSN               0x20
/* MODIFY_QP attribute: timeout, retry counts, RNR timer, outstanding reads. */
#define IBTCA_QP_ATTR_RETRY                0x40
/* MODIFY_QP attribute: P_Key index (RESET to INIT, INIT to INIT, INIT to RTR). */
#define IBTCA_QP_ATTR_PKEY_INDEX           0x10000
/* Entries of a port's P_Key table (the subnet manager sets them; entry 0 is 0xFFFF until it does). */
#define IBTCA_PKEY_TABLE_LEN               0x40
/* MODIFY_QP attribute (driver-specific, seed 002): initial_msn, the MSN before the first completed message, which both ends of the connection set alike (default 0 as in IBA; 0xffffff is the seed's start). */
#define IBTCA_QP_ATTR_MSN                  0x80
/* MODIFY_QP attribute (driver-specific, seed 002): ack_mode, ack_every and window, the QP's ACK policy (default: IBTCA_ACK_PER_MESSAGE, window 0). */
#define IBTCA_QP_ATTR_ACK_POLICY           0x100
/* ACK policy (struct ibtca_cmd_modify_qp ack_mode): one ACK per message, the default. */
#define IBTCA_ACK_PER_MESSAGE              0x0
/* ACK policy: one ACK per packet (AckReq on every packet). */
#define IBTCA_ACK_PER_PACKET               0x1
/* ACK policy: coalesced across message boundaries, at most ack_every packets per ACK request: the requester sets AckReq every ack_every packets (every quarter window if that is fewer) and on the last packet it has to send; the responder ACKs those packets, several due in one burst as one cumulative ACK. ack_every bounds the packets between two AckReqs; it is not an exact count of packets per ACK on the wire. */
#define IBTCA_ACK_COALESCED                0x2
/* MODIFY_QP attribute: max_dest_rd_atomic (the responder resources). */
#define IBTCA_QP_ATTR_DEST_RD_ATOMIC       0x200
/* MODIFY_QP attribute (UD and GSI QPs): the Q_Key, carried in `access` (a datagram QP has no remote access rights, so the field is free; IBTCA_QP_ATTR_ACCESS is refused for UD, SMI and GSI QPs, IBTCA_QP_ATTR_QKEY for RC QPs). */
#define IBTCA_QP_ATTR_QKEY                 0x1000

/* A scatter/gather element: `length` bytes at `addr` in the memory region named by `lkey` (`addr` is in the region's I/O virtual address space). */
struct ibtca_sge {
	__le64 addr;	/* 0x00: Address in the memory region's address space. */
	__le32 length;	/* 0x08: Length in bytes. */
	__le32 lkey;	/* 0x0c: Local key of the memory region. */
} __packed;
static_assert(sizeof(struct ibtca_sge) == 16);

/* A send-queue work request: 128 bytes with 4 SGEs at the default stride. An SQ of a larger stride (CREATE_QP's sq_log_stride) continues `sge` past the 128 bytes as a receive WQE does (entry i at byte 64 + 16 * i), as many as the stride holds, at most IBTCA_MAX_SEND_SGE; a UD send WQE's list runs on the same way. A `num_sge` past that completes with IBTCA_WC_LOC_LEN_ERR; nothing past the WQE's slot is read. */
struct ibtca_send_wqe {
	__le64 wr_id;	/* 0x00: Caller's cookie, returned in the completion. */
	__u8 opcode;	/* 0x08: IBTCA_WR_* operation. */
	__u8 flags;	/* 0x09: IBTCA_WQE_F_* flags. */
	__u8 num_sge;	/* 0x0a: Number of valid entries in `sge` (0 with IBTCA_WQE_F_INLINE). */
	__u8 inline_len;	/* 0x0b: With IBTCA_WQE_F_INLINE: the payload's length, at most IBTCA_MAX_INLINE_DATA bytes, held in place of `sge`; otherwise zero. */
	__le32 imm_data;	/* 0x0c: Immediate data (big-endian on the wire, stored as given). */
	__le64 remote_addr;	/* 0x10: Remote address (RDMA, atomics). */
	__le32 rkey;	/* 0x18: Remote key (RDMA, atomics). */
	__le32 rsvd1;	/* 0x1c: Reserved, zero. */
	__le64 compare_add;	/* 0x20: Atomic compare value or fetch-add addend. */
	__le64 swap;	/* 0x28: Atomic swap value. */
	__u8 rsvd2[16];	/* 0x30: Reserved for Direct RDMA (ARR number) and future use, zero. */
	struct ibtca_sge sge[4];	/* 0x40: Local buffers, or with IBTCA_WQE_F_INLINE the payload itself. */
} __packed;
static_assert(sizeof(struct ibtca_send_wqe) == 128);

/* The send-queue work request IBTCA_WR_REG_MR (128 bytes, in place of a struct ibtca_send_wqe): registers the fast-registration region whose key index `key` names (free, in the QP's PD) with `npages` pages from the table at `page_table` (as struct ibtca_cmd_reg_mr has them, at most the region's max_pages; copied now), `length` bytes at `iova` starting `first_offset` bytes into the first page, rights `access` (not IBTCA_ACCESS_MW_BIND). The key's low byte becomes the region's key tag: lkey and rkey are `key` from then on. Fails with IBTCA_WC_LOC_PROT_ERR; LOCAL_INV (or a SEND with Invalidate) of `key` frees the region again. */
struct ibtca_reg_mr_wqe {
	__le64 wr_id;	/* 0x00: Caller's cookie, returned in the completion. */
	__u8 opcode;	/* 0x08: IBTCA_WR_REG_MR. */
	__u8 flags;	/* 0x09: IBTCA_WQE_F_* flags. */
	__u8 rsvd0[2];	/* 0x0a: Reserved, zero. */
	__le32 access;	/* 0x0c: IBTCA_ACCESS_* rights. */
	__le64 iova;	/* 0x10: Start address in the region's own address space. */
	__le32 key;	/* 0x18: The region's key with its new low byte. */
	__le32 npages;	/* 0x1c: Pages in the table. */
	__le64 length;	/* 0x20: Length in bytes. */
	__le64 page_table;	/* 0x28: Guest-physical address of the page table (8-byte aligned). */
	__le32 first_offset;	/* 0x30: Offset of the region's first byte in the first page (below 4096). */
	__u8 rsvd1[12];	/* 0x34: Reserved, zero. */
	__u8 rsvd2[64];	/* 0x40: Reserved, zero (where a send WQE has its SGEs). */
} __packed;
static_assert(sizeof(struct ibtca_reg_mr_wqe) == 128);

/* A receive-queue work request: 128 bytes with 4 SGEs at the default stride. A ring of a larger stride (CREATE_QP's rq_log_stride, CREATE_SRQ's log_stride) continues `sge` past the 128 bytes: entry i at byte 64 + 16 * i, as many as the stride holds, at most IBTCA_MAX_RECV_SGE. A `num_sge` past that completes with IBTCA_WC_LOC_LEN_ERR; nothing past the WQE's slot is read. */
struct ibtca_recv_wqe {
	__le64 wr_id;	/* 0x00: Caller's cookie, returned in the completion. */
	__u8 num_sge;	/* 0x08: Number of valid entries in `sge` (and after it, at a larger stride). */
	__u8 rsvd0[55];	/* 0x09: Reserved, zero. */
	struct ibtca_sge sge[4];	/* 0x40: Buffers the incoming SEND is scattered into. */
} __packed;
static_assert(sizeof(struct ibtca_recv_wqe) == 128);

/* A completion queue entry (32 bytes), written by the device. */
struct ibtca_cqe {
	__le64 wr_id;	/* 0x00: The work request's cookie. */
	__le32 byte_len;	/* 0x08: Bytes transferred (receives, RDMA READ, atomics: 8). */
	__le32 qpn;	/* 0x0c: Local QP number. */
	__le32 imm_data;	/* 0x10: Immediate data (when IBTCA_CQE_F_IMM is set). */
	__le32 src_qp;	/* 0x14: Source QP of a receive; vendor error detail on errors. */
	__u8 opcode;	/* 0x18: IBTCA_WC_* operation that completed. */
	__u8 status;	/* 0x19: IBTCA_WC_* status (0 = success). */
	__u8 flags;	/* 0x1a: IBTCA_CQE_F_* flags. */
	__u8 owner;	/* 0x1b: Owner (phase) bit in bit 0: 1 on passes 0, 2, 4... over the ring, 0 on passes 1, 3, 5... (a zeroed ring reads empty). */
	__le16 slid;	/* 0x1c: Receives on UD, SMI and GSI QPs: the sender's LID (LRH SLID); zero otherwise. */
	__u8 sl;	/* 0x1e: Receives on UD, SMI and GSI QPs: the packet's service level (LRH SL). */
	__u8 dlid_path_bits;	/* 0x1f: Receives on UD, SMI and GSI QPs: the low bits of the packet's DLID beyond the port's LID (0: LMC 0). */
} __packed;
static_assert(sizeof(struct ibtca_cqe) == 32);

/* A send work request of a UD, SMI or GSI QP (128 bytes, in place of a struct ibtca_send_wqe; opcode IBTCA_WR_UD_SEND or IBTCA_WR_UD_SEND_IMM): one message of at most the port's active MTU to the address vector it carries (the fields of an address handle: the driver keeps AHs, the device none). An SMI QP's messages go on VL15 from QP0 with Q_Key 0, a GSI QP's from QP1; a UD QP's from itself on `sl` (0-14). A `qkey` with bit 31 set means the QP's own Q_Key (IBA 10.2.4.3). With IBTCA_UD_AV_F_GRH the packet carries a GRH (source GID: the port's, fe80::/64 and the port GUID). */
struct ibtca_ud_send_wqe {
	__le64 wr_id;	/* 0x00: Caller's cookie, returned in the completion. */
	__u8 opcode;	/* 0x08: IBTCA_WR_UD_SEND or IBTCA_WR_UD_SEND_IMM. */
	__u8 flags;	/* 0x09: IBTCA_WQE_F_* flags. */
	__u8 num_sge;	/* 0x0a: Number of valid entries in `sge`. */
	__u8 rsvd0;	/* 0x0b: Reserved, zero. */
	__le32 imm_data;	/* 0x0c: Immediate data (IBTCA_WR_UD_SEND_IMM). */
	__le16 dlid;	/* 0x10: Destination LID. */
	__u8 sl;	/* 0x12: Service level (LRH SL). */
	__u8 av_flags;	/* 0x13: IBTCA_UD_AV_F_* flags. */
	__le32 dest_qpn;	/* 0x14: Destination QP number. */
	__le32 qkey;	/* 0x18: Destination Q_Key (bit 31 set: the QP's own). */
	__le32 flow_label;	/* 0x1c: GRH flow label (20 bits). */
	__u8 hop_limit;	/* 0x20: GRH hop limit. */
	__u8 traffic_class;	/* 0x21: GRH traffic class. */
	__u8 src_path_bits;	/* 0x22: Source path bits (added to the port's LID for the SLID; 0 with LMC 0). */
	__u8 rsvd1;	/* 0x23: Reserved, zero (GID index: the port has one GID). */
	__u8 dgid[16];	/* 0x24: GRH destination GID. */
	__u8 rsvd2[12];	/* 0x34: Reserved, zero. */
	struct ibtca_sge sge[4];	/* 0x40: Local buffers. */
} __packed;
static_assert(sizeof(struct ibtca_ud_send_wqe) == 128);

/* A command (64 bytes) in the command queue. The driver fills `opcode`, `token` and the parameters and sets `status` to IBTCA_CMD_ST_PENDING; the device writes the out-parameters, then `status`, then raises the command vector if IBTCA_CMD_F_IRQ is set. */
struct ibtca_cmd {
	__u8 opcode;	/* 0x00: IBTCA_CMD_* command. */
	__u8 flags;	/* 0x01: IBTCA_CMD_F_* flags. */
	__le16 status;	/* 0x02: IBTCA_CMD_ST_* result, written by the device last. */
	__le32 token;	/* 0x04: Caller's cookie. */
	__u8 params[48];	/* 0x08: Command parameters (see the IBTCA_CMD_* documentation). */
	__le32 out0;	/* 0x38: Out-parameter: the handle the command created (PD, MR key, CQ, QP number), or detail on failure. */
	__le32 out1;	/* 0x3c: Second out-parameter (MR: rkey). */
} __packed;
static_assert(sizeof(struct ibtca_cmd) == 64);

/* A quasi-WQE (32 bytes, seed 004): the responder's description of an inbound RDMA READ, written to the QP's quasi-WQE ring; the send engine gathers read-response data from it the way it gathers from a WQE. */
struct ibtca_quasi_wqe {
	__le64 va;	/* 0x00: Responder-side virtual address to read from. */
	__le32 length;	/* 0x08: Bytes to return. */
	__le32 rkey;	/* 0x0c: R_Key the requester presented. */
	__le32 psn;	/* 0x10: PSN of the read request (first response PSN). */
	__le32 dest_qpn;	/* 0x14: Requester's QP number. */
	__u8 owner;	/* 0x18: Owner (phase) bit in bit 0, as in struct ibtca_cqe: 1 on even passes, 0 on odd passes. */
	__u8 rsvd[7];	/* 0x19: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_quasi_wqe) == 32);

/* A QP's doorbell record (64 bytes, in guest memory): the driver stores its SQ and RQ producer indexes here after the WQEs; the device keeps sq_awake nonzero while it will read sq_pi again without a doorbell (send work in flight), rq_awake while it reads rq_pi whenever it needs a receive (RTR, RTS). The driver stores an index, fences, and rings that doorbell only if its awake word reads 0; the device clears an awake word, fences, and reads the index once more before it stops reading. */
struct ibtca_db_record {
	__le32 sq_pi;	/* 0x00: SQ producer index (driver), as an SQ doorbell's. */
	__le32 sq_awake;	/* 0x04: Nonzero while the device reads sq_pi by itself (device). */
	__le32 rq_pi;	/* 0x08: RQ producer index (driver), as an RQ doorbell's. */
	__le32 rq_awake;	/* 0x0c: Nonzero while the device reads rq_pi by itself (device). */
	__u8 rsvd[48];	/* 0x10: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_db_record) == 64);

/* A CQ's doorbell record (64 bytes, in guest memory): the driver stores its consumer index here as it consumes entries; the device reads it before it calls the CQ full. With CAP_CQ_RECORD_ARM the driver arms here too: the device reads `arm` after each completion it writes, so the driver rings the CQ doorbell only for a completion already written when it armed. */
struct ibtca_cq_db_record {
	__le32 ci;	/* 0x00: Consumer index (driver), as a CQ doorbell's. */
	__le32 arm;	/* 0x04: Arm request (driver): IBTCA_CQ_ARM_* in bits 1:0, a count the driver advances with each request in bits 31:2; a value the device has not seen arms the CQ once. */
	__u8 rsvd[56];	/* 0x08: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cq_db_record) == 64);

/* Command parameters naming one object. */
struct ibtca_cmd_handle {
	__le32 handle;	/* 0x00: PD number, lkey, rkey, CQ or QP number. */
	__u8 rsvd[44];	/* 0x04: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_handle) == 48);

/* REG_MR parameters: a region of `length` bytes, addressed as `iova` by work requests and remote peers. With `npages` 0 the bytes are guest-physically contiguous at `gpa`; otherwise `gpa` is the guest-physical address of a translation table of `npages` __le64 page addresses (4 KiB pages, each 4 KiB-aligned; the table 8-byte aligned), `npages` exactly the pages that `first_offset + length` bytes cover, at most struct ibtca_device_attr_ext's max_mr_pages. The device copies the table: later changes to it have no effect. */
struct ibtca_cmd_reg_mr {
	__le32 pdn;	/* 0x00: Protection domain. */
	__le32 access;	/* 0x04: IBTCA_ACCESS_* rights. */
	__le64 iova;	/* 0x08: Start address in the region's own (virtual) address space. */
	__le64 length;	/* 0x10: Length in bytes. */
	__le64 gpa;	/* 0x18: Guest-physical address of the first byte (npages 0) or of the page table. */
	__le32 npages;	/* 0x20: Pages in the table; 0: a contiguous region. */
	__le32 first_offset;	/* 0x24: Offset of the region's first byte in the first page (below 4096). */
	__u8 rsvd[8];	/* 0x28: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_reg_mr) == 48);

/* ALLOC_MR parameters: a fast-registration region in `pdn` that IBTCA_WR_REG_MR may give up to `max_pages` pages. */
struct ibtca_cmd_alloc_mr {
	__le32 pdn;	/* 0x00: Protection domain. */
	__le32 max_pages;	/* 0x04: Most pages one IBTCA_WR_REG_MR may give it (1 to max_mr_pages). */
	__u8 rsvd[40];	/* 0x08: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_alloc_mr) == 48);

/* CREATE_CQ parameters. */
struct ibtca_cmd_create_cq {
	__le64 ring;	/* 0x00: Guest-physical address of the ring of struct ibtca_cqe. */
	__u8 log_entries;	/* 0x08: log2 of the number of entries. */
	__u8 vector;	/* 0x09: MSI-X vector raised when the CQ is armed and gets a completion. */
	__u8 rsvd0[2];	/* 0x0a: Reserved, zero. */
	__le32 db_page;	/* 0x0c: Doorbell page (below IBTCA_DB_PAGES) whose CQ doorbell alone rings this CQ; 0: the kernel's (BAR0's IBTCA_REG_DB_CQ or page 0). */
	__u8 rsvd[32];	/* 0x10: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_create_cq) == 48);

/* CREATE_QP parameters. */
struct ibtca_cmd_create_qp {
	__le32 pdn;	/* 0x00: Protection domain. */
	__le32 send_cqn;	/* 0x04: CQ for send completions. */
	__le32 recv_cqn;	/* 0x08: CQ for receive completions. */
	__u8 log_sizes[4];	/* 0x0c: log2 entries of the SQ, RQ and quasi-WQE ring (bytes 0, 1, 2); byte 3: the IBTCA_QPT_* type. */
	__le64 sq;	/* 0x10: Guest-physical address of the SQ (struct ibtca_send_wqe). */
	__le64 rq;	/* 0x18: Guest-physical address of the RQ (struct ibtca_recv_wqe). */
	__le64 quasi;	/* 0x20: Guest-physical address of the quasi-WQE ring (struct ibtca_quasi_wqe). */
	__le16 db_page;	/* 0x28: Doorbell page (below IBTCA_DB_PAGES) whose SQ and RQ doorbells alone ring this QP; 0: the kernel's (BAR0's IBTCA_REG_DB_SQ/DB_RQ or page 0). */
	__u8 rq_log_stride;	/* 0x2a: log2 of the RQ's stride in bytes (IBTCA_RECV_LOG_STRIDE to IBTCA_MAX_RECV_LOG_STRIDE; `rq` aligned to it); 0: IBTCA_RECV_LOG_STRIDE, the 128-byte struct ibtca_recv_wqe with 4 SGEs. Must be 0 with `srqn`. */
	__u8 sq_log_stride;	/* 0x2b: log2 of the SQ's stride in bytes (IBTCA_RECV_LOG_STRIDE to IBTCA_MAX_RECV_LOG_STRIDE, as `rq_log_stride`; `sq` aligned to it); 0: 128 bytes, struct ibtca_send_wqe with 4 SGEs. A send WQE's SGE list runs on past its 128 bytes as a receive WQE's does, up to IBTCA_MAX_SEND_SGE. */
	__le32 srqn;	/* 0x2c: Shared receive queue the QP takes its receives from (in the same PD; `rq` and its log size then 0, and RQ doorbells are refused); 0: its own RQ. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_create_qp) == 48);

/* MODIFY_QP parameters; `attr_mask` says which fields apply. */
struct ibtca_cmd_modify_qp {
	__le32 qpn;	/* 0x00: QP number. */
	__le32 attr_mask;	/* 0x04: IBTCA_QP_ATTR_* bits. */
	__u8 state;	/* 0x08: New IBTCA_QPS_* state. */
	__u8 path_mtu;	/* 0x09: IBTCA_MTU_* path MTU. */
	__u8 timeout;	/* 0x0a: Local ACK timeout exponent: 4.096 us * 2^timeout (1-31); 0: no timeout (IBA). */
	__u8 retry_cnt;	/* 0x0b: Transport retry count (0-7). */
	__u8 rnr_retry;	/* 0x0c: RNR retry count (0-7, 7 = forever). */
	__u8 min_rnr_timer;	/* 0x0d: Minimum RNR NAK timer code (0-31). */
	__u8 max_rd_atomic;	/* 0x0e: Outstanding RDMA READ / atomic requests this QP may issue. */
	__u8 sl;	/* 0x0f: Service level of the path (0-14; with IBTCA_QP_ATTR_PATH): the LRH SL of every packet the QP sends, which each egress port maps to a VL. */
	__le32 dest_qpn;	/* 0x10: Destination QP number. */
	__le16 dlid;	/* 0x14: Destination LID. */
	__le16 pkey_index;	/* 0x16: Index into the port's P_Key table (below IBTCA_PKEY_TABLE_LEN; with IBTCA_QP_ATTR_PKEY_INDEX): the P_Key the QP sends with and accepts. Without it: index 0 (the default partition, 0xFFFF, unless the SM changed entry 0). */
	__le32 sq_psn;	/* 0x18: First PSN this QP sends. */
	__le32 rq_psn;	/* 0x1c: First PSN this QP expects. */
	__le32 access;	/* 0x20: RC QPs: IBTCA_ACCESS_REMOTE_* rights for incoming requests (with IBTCA_QP_ATTR_ACCESS). UD and GSI QPs: the Q_Key (with IBTCA_QP_ATTR_QKEY; GSI only 0x80010000). */
	__le32 initial_msn;	/* 0x24: MSN before the first completed message (24 bits; with IBTCA_QP_ATTR_MSN): both ends set the same value. */
	__le16 ack_every;	/* 0x28: Most packets between two ACK requests with IBTCA_ACK_COALESCED (1-65535; with IBTCA_QP_ATTR_ACK_POLICY): a bound, not a count. */
	__le16 window;	/* 0x2a: Most unacknowledged packets in flight (with IBTCA_QP_ATTR_ACK_POLICY): 0 the device's default, 1 stop-and-wait (each packet waits for its ACK or the local ACK timeout), at most 1024. */
	__u8 ack_mode;	/* 0x2c: IBTCA_ACK_* policy (with IBTCA_QP_ATTR_ACK_POLICY). */
	__u8 max_dest_rd_atomic;	/* 0x2d: Responder resources (with IBTCA_QP_ATTR_DEST_RD_ATOMIC): RDMA READ / atomic requests this QP holds unanswered, at most max_qp_rd_atom; one more is NAKed invalid request. Without the bit: max_qp_rd_atom. 0 counts as 1. */
	__u8 rsvd2[2];	/* 0x2e: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_modify_qp) == 48);

/* CREATE_SRQ parameters: a ring of 2^log_entries struct ibtca_recv_wqe the driver produces (SRQ doorbell: IBTCA_REG_DB_SRQ or a doorbell page's IBTCA_DB_PAGE_SRQ) and the device consumes in ring order for every QP created with the SRQ's number. */
struct ibtca_cmd_create_srq {
	__le32 pdn;	/* 0x00: Protection domain (the QPs using the SRQ must be in it). */
	__u8 log_entries;	/* 0x04: log2 of the number of entries (at most log2 of max_srq_wr). */
	__u8 log_stride;	/* 0x05: log2 of the ring's stride in bytes, as CREATE_QP's rq_log_stride (0: 128 bytes, 4 SGEs); RESIZE_SRQ keeps it. */
	__u8 rsvd0[2];	/* 0x06: Reserved, zero. */
	__le64 ring;	/* 0x08: Guest-physical address of the ring (aligned to its stride). */
	__le32 max_wr;	/* 0x10: Most receives posted and not yet taken (1 to 2^log_entries). */
	__le32 srq_limit;	/* 0x14: Limit event threshold (0: disarmed; below max_wr), as MODIFY_SRQ's. */
	__le32 db_page;	/* 0x18: Doorbell page whose SRQ doorbell alone rings this SRQ; 0: the kernel's. */
	__u8 rsvd[20];	/* 0x1c: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_create_srq) == 48);

/* MODIFY_SRQ parameters; `attr_mask` (IBTCA_SRQ_ATTR_*) says which apply. */
struct ibtca_cmd_modify_srq {
	__le32 srqn;	/* 0x00: SRQ number. */
	__le32 attr_mask;	/* 0x04: IBTCA_SRQ_ATTR_* bits. */
	__le32 max_wr;	/* 0x08: New max_wr (at least the receives posted now, at most the ring's entries). */
	__le32 srq_limit;	/* 0x0c: New limit (below max_wr; 0 disarms). */
	__u8 rsvd[32];	/* 0x10: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_modify_srq) == 48);

/* RESIZE_SRQ parameters: the new ring and max_wr. */
struct ibtca_cmd_resize_srq {
	__le32 srqn;	/* 0x00: SRQ number. */
	__u8 log_entries;	/* 0x04: log2 of the new ring's entries: at least the old ring's. */
	__u8 rsvd0[3];	/* 0x05: Reserved, zero. */
	__le64 ring;	/* 0x08: Guest-physical address of the new ring (receive WQEs, aligned to one). */
	__le32 max_wr;	/* 0x10: New max_wr (at least the receives posted now and above the limit, at most the new ring's entries). */
	__u8 rsvd[28];	/* 0x14: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_resize_srq) == 48);

/* QUERY_SRQ reply, written over the command's params. */
struct ibtca_srq_attr {
	__le32 max_wr;	/* 0x00: Most receives posted and not yet taken. */
	__le32 srq_limit;	/* 0x04: Armed limit (0: disarmed, or fired). */
	__le32 limit_events;	/* 0x08: Limit events raised since the SRQ was created. */
	__le32 posted;	/* 0x0c: Receives posted (doorbell) and not yet taken by a QP. */
	__le32 pdn;	/* 0x10: Protection domain. */
	__u8 log_entries;	/* 0x14: log2 of the ring's entries. */
	__u8 rsvd[27];	/* 0x15: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_srq_attr) == 48);

/* QUERY_QP reply, written over the command's params: the QP's state as the device has it and the attributes the device applies. After MODIFY_QP to RESET the attributes are zero again (a GSI QP keeps its Q_Key). */
struct ibtca_qp_attr {
	__u8 state;	/* 0x00: IBTCA_QPS_* state (IBTCA_QPS_ERR after an error completion or a responder error, IBTCA_QPS_SQE after a UD QP's failed send, whatever the last MODIFY_QP said). */
	__u8 qp_type;	/* 0x01: IBTCA_QPT_* type. */
	__u8 path_mtu;	/* 0x02: IBTCA_MTU_* path MTU (0 before IBTCA_QP_ATTR_PATH). */
	__u8 sl;	/* 0x03: Service level of the path. */
	__u8 timeout;	/* 0x04: Local ACK timeout exponent. */
	__u8 retry_cnt;	/* 0x05: Transport retry count. */
	__u8 rnr_retry;	/* 0x06: RNR retry count (7 = forever). */
	__u8 min_rnr_timer;	/* 0x07: Minimum RNR NAK timer code. */
	__u8 max_rd_atomic;	/* 0x08: Outstanding RDMA READ / atomic requests this QP may issue. */
	__u8 max_dest_rd_atomic;	/* 0x09: Responder resources the device applies (max_qp_rd_atom unless MODIFY_QP gave IBTCA_QP_ATTR_DEST_RD_ATOMIC). */
	__le16 pkey_index;	/* 0x0a: Index into the port's P_Key table. */
	__le16 dlid;	/* 0x0c: Destination LID. */
	__le16 rsvd0;	/* 0x0e: Reserved, zero. */
	__le32 dest_qpn;	/* 0x10: Destination QP number. */
	__le32 sq_psn;	/* 0x14: Next PSN the QP sends: the transport's once an RC QP sends (RTS, and ERR after RTS), else the SQ PSN MODIFY_QP set. */
	__le32 rq_psn;	/* 0x18: Next PSN the QP expects: the transport's once an RC QP receives (RTR, RTS, and ERR after RTR), else the RQ PSN MODIFY_QP set. */
	__le32 access;	/* 0x1c: RC: IBTCA_ACCESS_REMOTE_* rights. UD, SMI, GSI: 0. */
	__le32 qkey;	/* 0x20: Q_Key (UD, SMI, GSI QPs; 0 for RC). */
	__u8 rsvd[12];	/* 0x24: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_qp_attr) == 48);

/* QP_DB_RECORD and CQ_DB_RECORD parameters: the object and where its doorbell record is. */
struct ibtca_cmd_db_record {
	__le32 handle;	/* 0x00: QP or CQ number. */
	__le32 rsvd;	/* 0x04: Reserved, zero. */
	__le64 addr;	/* 0x08: Guest-physical address of the record (struct ibtca_db_record or struct ibtca_cq_db_record), 64-byte aligned, in guest memory. */
	__u8 rsvd2[32];	/* 0x10: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_db_record) == 48);

/* MODIFY_CQ parameters: the CQ and its interrupt moderation. */
struct ibtca_cmd_modify_cq {
	__le32 cqn;	/* 0x00: CQ number. */
	__le16 count;	/* 0x04: Completions that raise the vector at once (0 or 1: the first). */
	__u8 rsvd0[2];	/* 0x06: Reserved, zero. */
	__le32 period_us;	/* 0x08: Microseconds after the first held completion that raise it anyway (0: no holding). */
	__u8 rsvd[36];	/* 0x0c: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_modify_cq) == 48);

/* ATTACH_MCAST and DETACH_MCAST parameters: a UD QP and a multicast group. */
struct ibtca_cmd_mcast {
	__le32 qpn;	/* 0x00: QP number. */
	__le16 mlid;	/* 0x04: The group's multicast LID (0xc000-0xfffe). */
	__u8 rsvd0[2];	/* 0x06: Reserved, zero. */
	__u8 mgid[16];	/* 0x08: The group's GID (network byte order, byte 0 0xff). */
	__u8 rsvd[24];	/* 0x18: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_mcast) == 48);

/* SMA_MAD parameters: the 256-byte SMP at `mad` goes to the port's agent; its answer (256 bytes) is written at `reply` (may be `mad`). */
struct ibtca_cmd_mad {
	__le64 mad;	/* 0x00: Guest-physical address of the SMP. */
	__le64 reply;	/* 0x08: Guest-physical address of 256 bytes for the answer. */
	__u8 rsvd[32];	/* 0x10: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_mad) == 48);

/* SET_PORT_CAPS parameters: PortInfo CapabilityMask bits (IBA numbering, as Linux's IB_PORT_*_SUP). */
struct ibtca_cmd_port_caps {
	__le32 set;	/* 0x00: Bits to set. */
	__le32 clear;	/* 0x04: Bits to clear (after setting). */
	__u8 rsvd[40];	/* 0x08: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_cmd_port_caps) == 48);

/* QUERY_DEVICE reply, written over the command's params: the device's identity and the limits it enforces. */
struct ibtca_device_attr {
	__le64 node_guid;	/* 0x00: Node GUID. */
	__le64 max_mr_size;	/* 0x08: Largest memory region in bytes. */
	__le32 max_qp;	/* 0x10: Queue pairs. */
	__le32 max_cq;	/* 0x14: Completion queues. */
	__le32 max_mr;	/* 0x18: Memory regions and windows together (one key table). */
	__le32 max_pd;	/* 0x1c: Protection domains. */
	__le32 max_cqe;	/* 0x20: Entries of one CQ. */
	__le32 max_qp_wr;	/* 0x24: Entries of one send or receive queue. */
	__u8 max_sge;	/* 0x28: SGEs of one send WQE (IBTCA_MAX_SEND_SGE, at the largest send stride; 4 at the default 128 bytes). */
	__u8 max_qp_rd_atom;	/* 0x29: Outstanding RDMA READ and atomic requests one QP answers as responder (its responder resources). */
	__u8 max_mtu;	/* 0x2a: Largest IBTCA_MTU_* path MTU. */
	__u8 phys_ports;	/* 0x2b: Physical ports. */
	__le32 caps;	/* 0x2c: IBTCA_DEV_CAP_* bits. */
} __packed;
static_assert(sizeof(struct ibtca_device_attr) == 48);

/* QUERY_DEVICE reply with params byte 0 = IBTCA_DEVICE_ATTR_EXT: the limits of page-list regions. */
struct ibtca_device_attr_ext {
	__le32 max_mr_pages;	/* 0x00: Pages of one page-list region (REG_MR, ALLOC_MR's max_pages). */
	__le32 max_total_mr_pages;	/* 0x04: Pages of all page-list and fast-registration regions together (ALLOC_MR reserves max_pages). */
	__le32 page_size;	/* 0x08: Page size of page lists in bytes (4096). */
	__le32 db_pages;	/* 0x0c: Doorbell pages in the doorbell BAR (IBTCA_DB_PAGES). */
	__u8 db_bar;	/* 0x10: Index of the doorbell BAR (IBTCA_DB_BAR). */
	__u8 max_srq_sge;	/* 0x11: SGEs of one SRQ receive (IBTCA_MAX_RECV_SGE, at the largest stride). */
	__u8 max_qp_init_rd_atom;	/* 0x12: Outstanding RDMA READ and atomic requests one QP issues as requester (MODIFY_QP's max_rd_atomic, its initiator depth). */
	__u8 max_recv_sge;	/* 0x13: SGEs of one receive WQE of a QP's own RQ (IBTCA_MAX_RECV_SGE, at the largest stride); struct ibtca_device_attr's max_sge is the send WQE's. */
	__le32 max_srq;	/* 0x14: Shared receive queues. */
	__le32 max_srq_wr;	/* 0x18: Entries of one SRQ (max_wr). */
	__le32 max_inline_data;	/* 0x1c: Bytes of inline data one send WQE carries (IBTCA_MAX_INLINE_DATA). */
	__u8 rsvd[16];	/* 0x20: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_device_attr_ext) == 48);

/* QUERY_PORT reply, written over the command's params. */
struct ibtca_port_attr {
	__le64 port_guid;	/* 0x00: Port GUID (the interface ID of the port's one GID). */
	__le32 max_msg_sz;	/* 0x08: Largest message in bytes. */
	__le16 lid;	/* 0x0c: LID. */
	__le16 sm_lid;	/* 0x0e: LID of the subnet manager (0: none). */
	__le16 pkey;	/* 0x10: Entry 0 of the port's P_Key table. */
	__u8 state;	/* 0x12: IBTCA_PORT_* logical state. */
	__u8 phys_state;	/* 0x13: IBTCA_PORT_PHYS_* physical state. */
	__u8 max_mtu;	/* 0x14: Largest IBTCA_MTU_* MTU. */
	__u8 active_mtu;	/* 0x15: Active IBTCA_MTU_* MTU. */
	__u8 active_width;	/* 0x16: IBTCA_PORT_WIDTH_* active width. */
	__u8 active_speed;	/* 0x17: IBTCA_PORT_SPEED_* active speed. */
	__u8 data_vls;	/* 0x18: Data VLs the port runs (1-15). */
	__u8 lmc;	/* 0x19: LID mask control. */
	__u8 rsvd0[2];	/* 0x1a: Reserved, zero. */
	__le32 cap_mask;	/* 0x1c: PortInfo CapabilityMask as the port's agent answers it (IBA bits, as Linux's port_cap_flags; IsSM while the host runs an SM). */
	__u8 rsvd[16];	/* 0x20: Reserved, zero. */
} __packed;
static_assert(sizeof(struct ibtca_port_attr) == 48);

#endif /* IBTCA_ABI_H */
