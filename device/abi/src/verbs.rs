//! The guest-memory ABI of the verbs interface: command entries, work queue
//! entries, scatter/gather elements, completion entries and quasi-WQEs, as
//! the driver lays them out in guest RAM. Single source of truth: the driver's
//! `guest-driver/include/ibtca_abi.h` is generated from the layouts here (see
//! [`c_header`]) and a unit test fails if the committed header is stale.
//!
//! All fields are little-endian; structs are `#[repr(C)]` without padding
//! (a test checks that the fields add up to the size) and are read from and
//! written to guest memory whole with vm-memory's `ByteValued`.
//!
//! # Rings
//! Every ring (command queue, SQ, RQ, CQ, quasi-WQE ring) is a power-of-two
//! array of fixed-size entries in guest-physical memory. Producer and consumer
//! indexes are free-running 32-bit counters; an entry's slot is
//! `index & (entries - 1)`. The driver tells the device about new entries with
//! a posted doorbell write; the device never reads a register of the driver's
//! and the driver never reads a device register on the data path: completions
//! carry an owner (phase) bit that flips on every pass over the ring, so the
//! driver polls guest memory.
//!
//! Owner bit convention (CQ and quasi-WQE ring): the producer writes **1 on
//! passes 0, 2, 4, … and 0 on passes 1, 3, …**, i.e. the inverse of the pass
//! number's parity, where the pass of index `i` is `i >> log_entries`. A
//! zeroed ring therefore reads empty, and the consumer at index `i` owns the
//! entry once `owner == ((i >> log_entries) & 1) ^ 1`. The device writes the
//! rest of the entry before the byte holding the owner bit.
//!
//! # Keys
//! Memory keys are `(index + 1) << 8 | tag`. A memory region's lkey has an
//! even tag and its rkey the next odd tag (never interchangeable); a memory
//! window has one key, whose tag the device increments on every bind
//! (`ibv_inc_rkey`). Tags change whenever a table slot is reused.

use std::mem::{offset_of, size_of};

use vm_memory::{ByteValued, Le16, Le32, Le64};

use crate::layout::abi_struct;
pub use crate::layout::{c_structs, CType, FieldLayout, StructLayout};
pub use crate::params::*;

impl<const N: usize> CType for [Sge; N] {
    fn c_decl(name: &str) -> String {
        format!("struct ibtca_sge {name}[{N}]")
    }
}

abi_struct! {
    /// A scatter/gather element: `length` bytes at `addr` in the memory region
    /// named by `lkey` (`addr` is in the region's I/O virtual address space).
    Sge = "sge" {
        /// Address in the memory region's address space.
        addr: Le64,
        /// Length in bytes.
        length: Le32,
        /// Local key of the memory region.
        lkey: Le32,
    }
}

/// Scatter/gather elements per WQE.
pub const MAX_SGE: usize = 4;

abi_struct! {
    /// A send-queue work request: 128 bytes with 4 SGEs at the default
    /// stride. An SQ of a larger stride (CREATE_QP's sq_log_stride)
    /// continues `sge` past the 128 bytes as a receive WQE does (entry i at
    /// byte 64 + 16 * i), as many as the stride holds, at most
    /// IBTCA_MAX_SEND_SGE; a UD send WQE's list runs on the same way. A
    /// `num_sge` past that completes with IBTCA_WC_LOC_LEN_ERR; nothing past
    /// the WQE's slot is read.
    SendWqe = "send_wqe" {
        /// Caller's cookie, returned in the completion.
        wr_id: Le64,
        /// IBTCA_WR_* operation.
        opcode: u8,
        /// IBTCA_WQE_F_* flags.
        flags: u8,
        /// Number of valid entries in `sge` (0 with IBTCA_WQE_F_INLINE).
        num_sge: u8,
        /// With IBTCA_WQE_F_INLINE: the payload's length, at most IBTCA_MAX_INLINE_DATA bytes, held in place of `sge`; otherwise zero.
        inline_len: u8,
        /// Immediate data (big-endian on the wire, stored as given).
        imm_data: Le32,
        /// Remote address (RDMA, atomics).
        remote_addr: Le64,
        /// Remote key (RDMA, atomics).
        rkey: Le32,
        /// Reserved, zero.
        rsvd1: Le32,
        /// Atomic compare value or fetch-add addend.
        compare_add: Le64,
        /// Atomic swap value.
        swap: Le64,
        /// Reserved for Direct RDMA (ARR number) and future use, zero.
        rsvd2: [u8; 16],
        /// Local buffers, or with IBTCA_WQE_F_INLINE the payload itself.
        sge: [Sge; MAX_SGE],
    }
}

/// Most bytes of inline data one send WQE carries (its SGE area).
pub const MAX_INLINE: usize = MAX_SGE * size_of::<Sge>();

impl SendWqe {
    /// The inline payload of a WQE with IBTCA_WQE_F_INLINE (`None` without
    /// the flag, or with an `inline_len` past [`MAX_INLINE`]).
    pub fn inline_data(&self) -> Option<&[u8]> {
        if self.flags & WQE_F_INLINE == 0 {
            return None;
        }
        let at = offset_of!(SendWqe, sge);
        self.as_slice()
            .get(at..at + usize::from(self.inline_len))
            .filter(|d| d.len() <= MAX_INLINE)
    }
}

abi_struct! {
    /// The send-queue work request IBTCA_WR_REG_MR (128 bytes, in place of a
    /// struct ibtca_send_wqe): registers the fast-registration region whose
    /// key index `key` names (free, in the QP's PD) with `npages` pages from
    /// the table at `page_table` (as struct ibtca_cmd_reg_mr has them, at
    /// most the region's max_pages; copied now), `length` bytes at `iova`
    /// starting `first_offset` bytes into the first page, rights `access`
    /// (not IBTCA_ACCESS_MW_BIND). The key's low byte becomes the region's
    /// key tag: lkey and rkey are `key` from then on. Fails with
    /// IBTCA_WC_LOC_PROT_ERR; LOCAL_INV (or a SEND with Invalidate) of
    /// `key` frees the region again.
    RegMrWqe = "reg_mr_wqe" {
        /// Caller's cookie, returned in the completion.
        wr_id: Le64,
        /// IBTCA_WR_REG_MR.
        opcode: u8,
        /// IBTCA_WQE_F_* flags.
        flags: u8,
        /// Reserved, zero.
        rsvd0: [u8; 2],
        /// IBTCA_ACCESS_* rights.
        access: Le32,
        /// Start address in the region's own address space.
        iova: Le64,
        /// The region's key with its new low byte.
        key: Le32,
        /// Pages in the table.
        npages: Le32,
        /// Length in bytes.
        length: Le64,
        /// Guest-physical address of the page table (8-byte aligned).
        page_table: Le64,
        /// Offset of the region's first byte in the first page (below 4096).
        first_offset: Le32,
        /// Reserved, zero.
        rsvd1: [u8; 12],
        /// Reserved, zero (where a send WQE has its SGEs).
        rsvd2: [u8; 64],
    }
}

impl RegMrWqe {
    /// The same 128 bytes read as a fast-registration WQE.
    pub fn from_send_wqe(w: &SendWqe) -> Self {
        let mut r = RegMrWqe::default();
        r.as_mut_slice().copy_from_slice(w.as_slice());
        r
    }
}

abi_struct! {
    /// A receive-queue work request: 128 bytes with 4 SGEs at the default
    /// stride. A ring of a larger stride (CREATE_QP's rq_log_stride,
    /// CREATE_SRQ's log_stride) continues `sge` past the 128 bytes: entry i
    /// at byte 64 + 16 * i, as many as the stride holds, at most
    /// IBTCA_MAX_RECV_SGE. A `num_sge` past that completes with
    /// IBTCA_WC_LOC_LEN_ERR; nothing past the WQE's slot is read.
    RecvWqe = "recv_wqe" {
        /// Caller's cookie, returned in the completion.
        wr_id: Le64,
        /// Number of valid entries in `sge` (and after it, at a larger stride).
        num_sge: u8,
        /// Reserved, zero.
        rsvd0: [u8; 55],
        /// Buffers the incoming SEND is scattered into.
        sge: [Sge; MAX_SGE],
    }
}

abi_struct! {
    /// A completion queue entry (32 bytes), written by the device.
    Cqe = "cqe" {
        /// The work request's cookie.
        wr_id: Le64,
        /// Bytes transferred (receives, RDMA READ, atomics: 8).
        byte_len: Le32,
        /// Local QP number.
        qpn: Le32,
        /// Immediate data (when IBTCA_CQE_F_IMM is set).
        imm_data: Le32,
        /// Source QP of a receive; vendor error detail on errors.
        src_qp: Le32,
        /// IBTCA_WC_* operation that completed.
        opcode: u8,
        /// IBTCA_WC_* status (0 = success).
        status: u8,
        /// IBTCA_CQE_F_* flags.
        flags: u8,
        /// Owner (phase) bit in bit 0: 1 on passes 0, 2, 4... over the ring, 0 on passes 1, 3, 5... (a zeroed ring reads empty).
        owner: u8,
        /// Receives on UD, SMI and GSI QPs: the sender's LID (LRH SLID); zero otherwise.
        slid: Le16,
        /// Receives on UD, SMI and GSI QPs: the packet's service level (LRH SL).
        sl: u8,
        /// Receives on UD, SMI and GSI QPs: the low bits of the packet's DLID beyond the port's LID (0: LMC 0).
        dlid_path_bits: u8,
    }
}

abi_struct! {
    /// A send work request of a UD, SMI or GSI QP (128 bytes, in place of a
    /// struct ibtca_send_wqe; opcode IBTCA_WR_UD_SEND or
    /// IBTCA_WR_UD_SEND_IMM): one message of at most the port's active MTU
    /// to the address vector it carries (the fields of an address handle:
    /// the driver keeps AHs, the device none). An SMI QP's messages go on
    /// VL15 from QP0 with Q_Key 0, a GSI QP's from QP1; a UD QP's from
    /// itself on `sl` (0-14). A `qkey` with bit 31 set means the QP's own
    /// Q_Key (IBA 10.2.4.3). With IBTCA_UD_AV_F_GRH the packet carries a
    /// GRH (source GID: the port's, fe80::/64 and the port GUID).
    UdSendWqe = "ud_send_wqe" {
        /// Caller's cookie, returned in the completion.
        wr_id: Le64,
        /// IBTCA_WR_UD_SEND or IBTCA_WR_UD_SEND_IMM.
        opcode: u8,
        /// IBTCA_WQE_F_* flags.
        flags: u8,
        /// Number of valid entries in `sge`.
        num_sge: u8,
        /// Reserved, zero.
        rsvd0: u8,
        /// Immediate data (IBTCA_WR_UD_SEND_IMM).
        imm_data: Le32,
        /// Destination LID.
        dlid: Le16,
        /// Service level (LRH SL).
        sl: u8,
        /// IBTCA_UD_AV_F_* flags.
        av_flags: u8,
        /// Destination QP number.
        dest_qpn: Le32,
        /// Destination Q_Key (bit 31 set: the QP's own).
        qkey: Le32,
        /// GRH flow label (20 bits).
        flow_label: Le32,
        /// GRH hop limit.
        hop_limit: u8,
        /// GRH traffic class.
        traffic_class: u8,
        /// Source path bits (added to the port's LID for the SLID; 0 with LMC 0).
        src_path_bits: u8,
        /// Reserved, zero (GID index: the port has one GID).
        rsvd1: u8,
        /// GRH destination GID.
        dgid: [u8; 16],
        /// Reserved, zero.
        rsvd2: [u8; 12],
        /// Local buffers.
        sge: [Sge; MAX_SGE],
    }
}

impl UdSendWqe {
    /// The same 128 bytes read as a UD send WQE.
    pub fn from_send_wqe(w: &SendWqe) -> Self {
        let mut u = UdSendWqe::default();
        u.as_mut_slice().copy_from_slice(w.as_slice());
        u
    }
}

abi_struct! {
    /// A command (64 bytes) in the command queue. The driver fills `opcode`,
    /// `token` and the parameters and sets `status` to IBTCA_CMD_ST_PENDING;
    /// the device writes the out-parameters, then `status`, then raises the
    /// command vector if IBTCA_CMD_F_IRQ is set.
    CmdEntry = "cmd" {
        /// IBTCA_CMD_* command.
        opcode: u8,
        /// IBTCA_CMD_F_* flags.
        flags: u8,
        /// IBTCA_CMD_ST_* result, written by the device last.
        status: Le16,
        /// Caller's cookie.
        token: Le32,
        /// Command parameters (see the IBTCA_CMD_* documentation).
        params: [u8; 48],
        /// Out-parameter: the handle the command created (PD, MR key, CQ, QP
        /// number), or detail on failure.
        out0: Le32,
        /// Second out-parameter (MR: rkey).
        out1: Le32,
    }
}

abi_struct! {
    /// A quasi-WQE (32 bytes, seed 004): the responder's description of an
    /// inbound RDMA READ, written to the QP's quasi-WQE ring; the send engine
    /// gathers read-response data from it the way it gathers from a WQE.
    QuasiWqe = "quasi_wqe" {
        /// Responder-side virtual address to read from.
        va: Le64,
        /// Bytes to return.
        length: Le32,
        /// R_Key the requester presented.
        rkey: Le32,
        /// PSN of the read request (first response PSN).
        psn: Le32,
        /// Requester's QP number.
        dest_qpn: Le32,
        /// Owner (phase) bit in bit 0, as in struct ibtca_cqe: 1 on even passes, 0 on odd passes.
        owner: u8,
        /// Reserved, zero.
        rsvd: [u8; 7],
    }
}

/// Every ABI struct's layout, in header order.
pub fn layouts() -> Vec<StructLayout> {
    vec![
        Sge::layout(),
        SendWqe::layout(),
        RegMrWqe::layout(),
        RecvWqe::layout(),
        Cqe::layout(),
        UdSendWqe::layout(),
        CmdEntry::layout(),
        QuasiWqe::layout(),
        DbRecord::layout(),
        CqDbRecord::layout(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_structs_have_no_padding() {
        for l in layouts() {
            let sum: usize = l.fields.iter().map(|f| f.size).sum();
            assert_eq!(sum, l.size, "struct {} has padding", l.c_name);
            let mut end = 0;
            for f in &l.fields {
                assert_eq!(f.offset, end, "{}.{} not packed", l.c_name, f.name);
                end += f.size;
            }
        }
    }

    #[test]
    fn status_names() {
        assert_eq!(wc_status_name(WC_SUCCESS), "WC_SUCCESS");
        assert_eq!(wc_status_name(WC_RETRY_EXC_ERR), "WC_RETRY_EXC_ERR");
        assert_eq!(wc_status_name(WC_WR_FLUSH_ERR), "WC_WR_FLUSH_ERR");
        assert_eq!(wc_status_name(3), "WC_?");
    }

    #[test]
    fn abi_sizes() {
        assert_eq!(size_of::<Sge>(), 16);
        assert_eq!(size_of::<SendWqe>(), 128);
        assert_eq!(size_of::<RecvWqe>(), 128);
        assert_eq!(size_of::<RegMrWqe>(), 128);
        // Fields a fast-registration WQE shares with every send WQE.
        assert_eq!(offset_of!(RegMrWqe, opcode), offset_of!(SendWqe, opcode));
        assert_eq!(offset_of!(RegMrWqe, flags), offset_of!(SendWqe, flags));
        assert_eq!(size_of::<Cqe>(), 32);
        assert_eq!(size_of::<CmdEntry>(), 64);
        assert_eq!(size_of::<QuasiWqe>(), 32);
        assert_eq!(size_of::<DbRecord>(), 64);
        assert_eq!(offset_of!(DbRecord, sq_awake), 4);
        assert_eq!(offset_of!(DbRecord, rq_awake), 12);
        assert_eq!(size_of::<CqDbRecord>(), 64);
        assert_eq!(offset_of!(SendWqe, sge), 64);
        assert_eq!(offset_of!(RecvWqe, sge), 64);
        assert_eq!(size_of::<UdSendWqe>(), 128);
        assert_eq!(offset_of!(UdSendWqe, sge), offset_of!(SendWqe, sge));
        assert_eq!(offset_of!(UdSendWqe, opcode), offset_of!(SendWqe, opcode));
        assert_eq!(offset_of!(UdSendWqe, num_sge), offset_of!(SendWqe, num_sge));
    }
}

crate::regs::values! {
    ABI_VALUES;
    /// WR opcode: SEND.
    WR_SEND: u8 = 0;
    /// WR opcode: SEND with immediate.
    WR_SEND_IMM: u8 = 1;
    /// WR opcode: RDMA WRITE.
    WR_RDMA_WRITE: u8 = 2;
    /// WR opcode: RDMA WRITE with immediate.
    WR_RDMA_WRITE_IMM: u8 = 3;
    /// WR opcode: RDMA READ.
    WR_RDMA_READ: u8 = 4;
    /// WR opcode: atomic compare and swap (8 bytes).
    WR_ATOMIC_CMP_SWP: u8 = 5;
    /// WR opcode: atomic fetch and add (8 bytes).
    WR_ATOMIC_FETCH_ADD: u8 = 6;
    /// WR opcode: bind a memory window (rkey = window's current key, compare_add = VA, swap = length, sge[0].lkey = MR, imm_data = IBTCA_ACCESS_REMOTE_* rights); the window's key becomes rkey with its low byte incremented.
    WR_BIND_MW: u8 = 7;
    /// WR opcode: invalidate a memory window or MR key locally (imm_data = key).
    WR_LOCAL_INV: u8 = 8;
    /// WR opcode: Direct RDMA WRITE (seed 000): sge[0] is a direct SGE (lkey = IBTCA_SGE_DIRECT | ARR number, addr 0, length = the ARR's total transfer length); the bytes the guest stores into that window range are written at remote_addr/rkey.
    WR_DRDMA_WRITE: u8 = 9;
    /// WR opcode: Direct RDMA READ: remote_addr/rkey are read into the direct SGE's range, where the guest loads them.
    WR_DRDMA_READ: u8 = 10;
    /// WR opcode: SEND with Invalidate: the responder invalidates the memory window key in imm_data once the message has arrived (IETH).
    WR_SEND_INV: u8 = 11;
    /// WR opcode: fast registration (IB_WR_REG_MR), executed in send-queue order: the WQE is a struct ibtca_reg_mr_wqe; the region ALLOC_MR made gets its pages, bounds, rights and its key's low byte.
    WR_REG_MR: u8 = 12;
    /// WR opcode (UD, SMI and GSI QPs only): a datagram SEND; the WQE is a struct ibtca_ud_send_wqe.
    WR_UD_SEND: u8 = 16;
    /// WR opcode (UD, SMI and GSI QPs only): a datagram SEND with immediate.
    WR_UD_SEND_IMM: u8 = 17;
    /// struct ibtca_ud_send_wqe av_flags: the packet carries a GRH.
    UD_AV_F_GRH: u8 = 1 << 0;
    /// SGE lkey flag: the SGE is a DRDMA window range (ARR number in bits 15:0), not a memory region.
    SGE_DIRECT: u32 = 1u32 << 31;
    /// WQE flag: generate a completion.
    WQE_F_SIGNALED: u8 = 1 << 0;
    /// WQE flag: solicited event.
    WQE_F_SOLICITED: u8 = 1 << 1;
    /// WQE flag: wait for earlier RDMA READs and atomics first.
    WQE_F_FENCE: u8 = 1 << 2;
    /// WQE flag (SEND, RDMA WRITE and their immediate forms): the payload is the WQE's own `inline_len` bytes where its SGEs would be, read when the WQE is; no L_Key is checked. A longer `inline_len` or another operation completes with IBTCA_WC_LOC_LEN_ERR or IBTCA_WC_LOC_QP_OP_ERR.
    WQE_F_INLINE: u8 = 1 << 3;
    /// Most bytes of inline data one send WQE carries (struct ibtca_device_attr_ext max_inline_data).
    MAX_INLINE_DATA: u32 = 64;
    /// log2 of the default receive WQE stride (128 bytes: struct ibtca_recv_wqe, 4 SGEs); a stride of 2^n bytes holds (2^n - 64) / 16 SGEs.
    RECV_LOG_STRIDE: u8 = 7;
    /// log2 of the largest receive WQE stride (1024 bytes).
    MAX_RECV_LOG_STRIDE: u8 = 10;
    /// Most SGEs of one receive WQE (struct ibtca_device_attr_ext max_recv_sge and max_srq_sge), at a stride of 1024 bytes.
    MAX_RECV_SGE: u8 = 32;
    /// Most SGEs of one send WQE (struct ibtca_device_attr max_sge), at a send stride of 1024 bytes (which would hold 60): the receive side's cap, above the 30 of common HCAs.
    MAX_SEND_SGE: u8 = 32;
    /// Completion opcode: SEND.
    WC_SEND: u8 = 0;
    /// Completion opcode: RDMA WRITE.
    WC_RDMA_WRITE: u8 = 1;
    /// Completion opcode: RDMA READ.
    WC_RDMA_READ: u8 = 2;
    /// Completion opcode: compare and swap.
    WC_COMP_SWAP: u8 = 3;
    /// Completion opcode: fetch and add.
    WC_FETCH_ADD: u8 = 4;
    /// Completion opcode: memory window bind.
    WC_BIND_MW: u8 = 5;
    /// Completion opcode: local invalidate.
    WC_LOCAL_INV: u8 = 6;
    /// Completion opcode: Direct RDMA WRITE (the remote side acknowledged it; the ARR is free again).
    WC_DRDMA_WRITE: u8 = 7;
    /// Completion opcode: Direct RDMA READ (every response arrived; the ARR frees once the guest has loaded them all).
    WC_DRDMA_READ: u8 = 8;
    /// Completion opcode: fast registration (IBTCA_WR_REG_MR).
    WC_REG_MR: u8 = 9;
    /// Completion opcode: a receive.
    WC_RECV: u8 = 128;
    /// Completion opcode: a receive consumed by RDMA WRITE with immediate.
    WC_RECV_RDMA_WITH_IMM: u8 = 129;
    /// Completion status: success.
    WC_SUCCESS: u8 = 0;
    /// Completion status: local length error.
    WC_LOC_LEN_ERR: u8 = 1;
    /// Completion status: local QP operation error.
    WC_LOC_QP_OP_ERR: u8 = 2;
    /// Completion status: local protection error (bad lkey, bounds, rights).
    WC_LOC_PROT_ERR: u8 = 4;
    /// Completion status: flushed (QP in error).
    WC_WR_FLUSH_ERR: u8 = 5;
    /// Completion status: memory window bind error.
    WC_MW_BIND_ERR: u8 = 6;
    /// Completion status: bad response.
    WC_BAD_RESP_ERR: u8 = 7;
    /// Completion status: local access error.
    WC_LOC_ACCESS_ERR: u8 = 8;
    /// Completion status: remote invalid request (NAK 0x61).
    WC_REM_INV_REQ_ERR: u8 = 9;
    /// Completion status: remote access error (NAK 0x62).
    WC_REM_ACCESS_ERR: u8 = 10;
    /// Completion status: remote operational error (NAK 0x63).
    WC_REM_OP_ERR: u8 = 11;
    /// Completion status: transport retries exhausted.
    WC_RETRY_EXC_ERR: u8 = 12;
    /// Completion status: RNR retries exhausted.
    WC_RNR_RETRY_EXC_ERR: u8 = 13;
    /// Completion status: the port is Init or Armed, not Active, so a datagram QP other than QP0 sends nothing (IBA vol 1 §7.2); the guest's RDMA core sees IB_WC_GENERAL_ERR.
    WC_PORT_INACTIVE_ERR: u8 = 0x5a;
    /// CQE flag: imm_data is valid.
    CQE_F_IMM: u8 = 1 << 0;
    /// CQE flag (receives): the SEND invalidated the key now in imm_data.
    CQE_F_INV: u8 = 1 << 1;
    /// CQE flag (receives): the message asked for a solicited event (BTH SE); a CQ armed with IBTCA_CQ_ARM_SOLICITED interrupts for it.
    CQE_F_SOLICITED: u8 = 1 << 2;
    /// CQE flag (receives on UD and GSI QPs): the packet had a GRH, now in the buffer's first 40 bytes (which are left alone otherwise; byte_len counts them either way).
    CQE_F_GRH: u8 = 1 << 5;
    /// CQ doorbell arm: interrupt on the next completion.
    CQ_ARM_NEXT: u8 = 1;
    /// CQ doorbell arm: interrupt on the next solicited completion.
    CQ_ARM_SOLICITED: u8 = 2;
    /// Access right: local write.
    ACCESS_LOCAL_WRITE: u32 = 1 << 0;
    /// Access right: remote write.
    ACCESS_REMOTE_WRITE: u32 = 1 << 1;
    /// Access right: remote read.
    ACCESS_REMOTE_READ: u32 = 1 << 2;
    /// Access right: remote atomic.
    ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
    /// Access right: memory windows may be bound to this MR.
    ACCESS_MW_BIND: u32 = 1 << 4;
    /// QP state: reset.
    QPS_RESET: u8 = 0;
    /// QP state: initialized.
    QPS_INIT: u8 = 1;
    /// QP state: ready to receive.
    QPS_RTR: u8 = 2;
    /// QP state: ready to send.
    QPS_RTS: u8 = 3;
    /// QP state: send queue error (a UD QP whose send work request failed:
    /// later sends flush, receives go on; MODIFY_QP to RTS resumes it).
    QPS_SQE: u8 = 5;
    /// QP state: error.
    QPS_ERR: u8 = 6;
    /// Path MTU code: 256 bytes (4096 = 5).
    MTU_256: u8 = 1;
    /// Path MTU code: 4096 bytes.
    MTU_4096: u8 = 5;
    /// Command status: not done yet (set by the driver).
    CMD_ST_PENDING: u16 = 0xffff;
    /// Command status: done.
    CMD_ST_OK: u16 = 0;
    /// Command flag: raise the command vector (MSI-X 0) when done.
    CMD_F_IRQ: u8 = 1 << 0;
    /// Command: query the port (params: zero; out0 = LID | state << 16, out1 = active MTU code; reply: struct ibtca_port_attr over params).
    CMD_QUERY_PORT: u8 = 0x01;
    /// Command: query the device's identity and limits (params: byte 0 selects the reply, the rest zero: 0 = struct ibtca_device_attr, IBTCA_DEVICE_ATTR_EXT = struct ibtca_device_attr_ext; reply over params).
    CMD_QUERY_DEVICE: u8 = 0x02;
    /// QUERY_DEVICE selector (params byte 0): the second reply, struct ibtca_device_attr_ext.
    DEVICE_ATTR_EXT: u8 = 1;
    /// Command: allocate a protection domain (out0 = PD number).
    CMD_CREATE_PD: u8 = 0x10;
    /// Command: free a protection domain (params: struct ibtca_cmd_handle).
    CMD_DESTROY_PD: u8 = 0x11;
    /// Command: register a memory region, guest-physically contiguous or by page list (params: struct ibtca_cmd_reg_mr; out0 = lkey, out1 = rkey).
    CMD_REG_MR: u8 = 0x20;
    /// Command: deregister a memory region (params: struct ibtca_cmd_handle with the lkey).
    CMD_DEREG_MR: u8 = 0x21;
    /// Command: allocate a memory window (params: struct ibtca_cmd_handle with the PD; out0 = rkey).
    CMD_ALLOC_MW: u8 = 0x22;
    /// Command: free a memory window (params: struct ibtca_cmd_handle with its rkey, any low byte: binds move the key).
    CMD_DEALLOC_MW: u8 = 0x23;
    /// Command: allocate a fast-registration region, free until an IBTCA_WR_REG_MR registers it (params: struct ibtca_cmd_alloc_mr; out0 = out1 = its key, lkey and rkey alike). DEREG_MR with its current key frees it.
    CMD_ALLOC_MR: u8 = 0x24;
    /// Command: allocate a type 1 memory window (params: struct ibtca_cmd_handle with the PD; out0 = rkey). Bound by IBTCA_WR_BIND_MW as a type 2 window is, but neither LOCAL_INV (IBTCA_WC_LOC_PROT_ERR) nor SEND with Invalidate (the responder's invalid-request NAK) can invalidate it; DEALLOC_MW frees it.
    CMD_ALLOC_MW_TYPE1: u8 = 0x70;
    /// Command: create a CQ (params: struct ibtca_cmd_create_cq; out0 = CQ number).
    CMD_CREATE_CQ: u8 = 0x30;
    /// Command: destroy a CQ (params: struct ibtca_cmd_handle).
    CMD_DESTROY_CQ: u8 = 0x31;
    /// Command: set a CQ's interrupt moderation (params: struct ibtca_cmd_modify_cq; CAP_CQ_MODERATION): an armed CQ raises its vector at the `count`th completion that satisfies its arm, or `period_us` after the first of them, whichever comes first. A count of 0 or 1, or a period of 0, fires at the first (no moderation, as a new CQ). ENOENT for no such CQ, EINVAL for reserved bytes not zero.
    CMD_MODIFY_CQ: u8 = 0x32;
    /// Command: create a QP (params: struct ibtca_cmd_create_qp, log_sizes byte 3 the IBTCA_QPT_* type; out0 = QP number).
    CMD_CREATE_QP: u8 = 0x40;
    /// Command: modify a QP (params: struct ibtca_cmd_modify_qp).
    CMD_MODIFY_QP: u8 = 0x41;
    /// Command: query a QP (params: struct ibtca_cmd_handle with the QP number, the rest zero; out0 = its IBTCA_QPS_* state; reply: struct ibtca_qp_attr over params). The state is the device's: IBTCA_QPS_ERR once an error completion or a responder error moved the QP there, IBTCA_QPS_SQE once a UD QP's send work request failed.
    CMD_QUERY_QP: u8 = 0x42;
    /// Command: destroy a QP (params: struct ibtca_cmd_handle).
    CMD_DESTROY_QP: u8 = 0x43;
    /// Command: attach a UD QP to a multicast group (params: struct ibtca_cmd_mcast): datagrams to the group (a multicast DLID, a GRH whose DGID is the MGID) reach the QP from then on. Attaching twice is a no-op; ENOMEM when the device has IBTCA_MAX_MCAST_GROUPS groups or the group IBTCA_MAX_MCAST_QPS QPs; EINVAL for a QP not UD, an MGID not multicast (byte 0 not 0xff) or an MLID outside 0xc000-0xfffe; ENOENT for no such QP. Destroying the QP detaches it.
    CMD_ATTACH_MCAST: u8 = 0x44;
    /// Command: detach a QP from a multicast group (params: struct ibtca_cmd_mcast; the MLID is not compared); EINVAL if the QP is not attached to the group. The group goes with its last QP.
    CMD_DETACH_MCAST: u8 = 0x45;
    /// Multicast groups one device holds (ATTACH_MCAST; struct ib_device_attr max_mcast_grp).
    MAX_MCAST_GROUPS: u32 = 256;
    /// QPs attached to one multicast group (max_mcast_qp_attach).
    MAX_MCAST_QPS: u32 = 64;
    /// Command: create a shared receive queue (params: struct ibtca_cmd_create_srq; out0 = SRQ number). QPs created with its number take their receives from it.
    CMD_CREATE_SRQ: u8 = 0x50;
    /// Command: change an SRQ's max_wr (within its ring) or arm its limit (params: struct ibtca_cmd_modify_srq).
    CMD_MODIFY_SRQ: u8 = 0x51;
    /// Command: query an SRQ (params: struct ibtca_cmd_handle; out0 = srq_limit, out1 = limit events so far; reply: struct ibtca_srq_attr over params).
    CMD_QUERY_SRQ: u8 = 0x52;
    /// Command: destroy an SRQ no QP uses (params: struct ibtca_cmd_handle; EBUSY while a QP names it).
    CMD_DESTROY_SRQ: u8 = 0x53;
    /// Command: give an SRQ a ring at least as large (params: struct ibtca_cmd_resize_srq): the device copies the receives posted and not yet taken into it, each to its index modulo the new size, and reads only the new ring from then on (EFAULT, nothing changed, if either ring is outside guest memory). A driver posting meanwhile writes into both rings; it frees the old one once this completes.
    CMD_RESIZE_SRQ: u8 = 0x54;
    /// MODIFY_SRQ attribute: max_wr, the most receives posted and not yet taken (1 to the ring's entries).
    SRQ_ATTR_MAX_WR: u32 = 1 << 0;
    /// MODIFY_SRQ attribute: srq_limit; non-zero arms the limit event (fired once when fewer than srq_limit receives remain posted, which disarms it: limit back to 0), 0 disarms.
    SRQ_ATTR_LIMIT: u32 = 1 << 1;
    /// Command: give a QP a doorbell record (params: struct ibtca_cmd_db_record with the QP number): the device then reads the SQ and RQ producer indexes from it as well as from doorbells and keeps its awake words.
    CMD_QP_DB_RECORD: u8 = 0x78;
    /// Command: give a CQ a doorbell record (params: struct ibtca_cmd_db_record with the CQ number, the record a struct ibtca_cq_db_record): the device reads the consumer index there before it calls the CQ full.
    CMD_CQ_DB_RECORD: u8 = 0x79;
    /// Bytes of guest memory a doorbell record may take (one page: what the driver maps).
    DB_RECORD_BYTES: u32 = 4096;
    /// Command: hand a 256-byte SMP to the port's own subnet management agent, as if it came from the port itself (the driver's process_mad: SMPs the local SM sends to its own port; params: struct ibtca_cmd_mad; out0 = 1 when the agent answered and the answer is at reply, 0 when it gives none: an SMP for the SM, a response, a failed M_Key check).
    CMD_SMA_MAD: u8 = 0x58;
    /// Command: set, then clear, capability bits of the port's PortInfo that its host owns (IsSM, for an SM in the guest, and IsDeviceManagementSupported, for a Device Management agent such as ib_srpt: the driver's modify_port; other bits are ignored; params: struct ibtca_cmd_port_caps; out0 = the capability mask now).
    CMD_SET_PORT_CAPS: u8 = 0x59;
    /// QP type (CREATE_QP log_sizes byte 3): reliable connected.
    QPT_RC: u8 = 0;
    /// QP type: unreliable datagram (Q_Key, UD send WQEs, no quasi-WQE ring: log_sizes byte 2 and quasi are ignored).
    QPT_UD: u8 = 1;
    /// QP type: the port's QP0 (at most one): SMPs the device's agent does not answer (SMInfo, responses, traps) arrive here, its sends leave on VL15 as QP0.
    QPT_SMI: u8 = 2;
    /// QP type: the port's QP1 (at most one): GMPs to QP1 but the PerfMgt class arrive here (Q_Key 0x80010000), its sends leave as QP1.
    QPT_GSI: u8 = 3;
    /// The Q_Key of QP1 (IBA 13.5.3.2).
    GSI_QKEY: u32 = 0x8001_0000;
    /// Port width (struct ibtca_port_attr, IB PortInfo encoding): 4X.
    PORT_WIDTH_4X: u8 = 2;
    /// Port speed per lane (struct ibtca_port_attr, Linux's enum ib_port_speed): QDR, 10 Gb/s.
    PORT_SPEED_QDR: u8 = 4;
    /// Physical port state (IB PortInfo PortPhysicalState): polling for a peer.
    PORT_PHYS_POLLING: u8 = 2;
    /// Physical port state: link up.
    PORT_PHYS_LINK_UP: u8 = 5;
    /// Device capability (struct ibtca_device_attr): atomic compare-and-swap and fetch-and-add, atomic between the device's QPs.
    DEV_CAP_ATOMIC: u32 = 1 << 0;
    /// Device capability: memory windows (type 2, bound by WR) and SEND with Invalidate.
    DEV_CAP_MW: u32 = 1 << 1;
    /// MODIFY_QP attribute: state.
    QP_ATTR_STATE: u32 = 1 << 0;
    /// MODIFY_QP attribute: access flags.
    QP_ATTR_ACCESS: u32 = 1 << 1;
    /// MODIFY_QP attribute: path (DLID, path MTU).
    QP_ATTR_PATH: u32 = 1 << 2;
    /// MODIFY_QP attribute: destination QP number.
    QP_ATTR_DEST_QPN: u32 = 1 << 3;
    /// MODIFY_QP attribute: receive PSN.
    QP_ATTR_RQ_PSN: u32 = 1 << 4;
    /// MODIFY_QP attribute: send PSN.
    QP_ATTR_SQ_PSN: u32 = 1 << 5;
    /// MODIFY_QP attribute: timeout, retry counts, RNR timer, outstanding reads.
    QP_ATTR_RETRY: u32 = 1 << 6;
    /// MODIFY_QP attribute: P_Key index (RESET to INIT, INIT to INIT, INIT to RTR).
    QP_ATTR_PKEY_INDEX: u32 = 1 << 16;
    /// Entries of a port's P_Key table (the subnet manager sets them; entry 0 is 0xFFFF until it does).
    PKEY_TABLE_LEN: u32 = 64;
    /// MODIFY_QP attribute (driver-specific, seed 002): initial_msn, the MSN before the first completed message, which both ends of the connection set alike (default 0 as in IBA; 0xffffff is the seed's start).
    QP_ATTR_MSN: u32 = 1 << 7;
    /// MODIFY_QP attribute (driver-specific, seed 002): ack_mode, ack_every and window, the QP's ACK policy (default: IBTCA_ACK_PER_MESSAGE, window 0).
    QP_ATTR_ACK_POLICY: u32 = 1 << 8;
    /// ACK policy (struct ibtca_cmd_modify_qp ack_mode): one ACK per message, the default.
    ACK_PER_MESSAGE: u8 = 0;
    /// ACK policy: one ACK per packet (AckReq on every packet).
    ACK_PER_PACKET: u8 = 1;
    /// ACK policy: coalesced across message boundaries, at most ack_every packets per ACK request: the requester sets AckReq every ack_every packets (every quarter window if that is fewer) and on the last packet it has to send; the responder ACKs those packets, several due in one burst as one cumulative ACK. ack_every bounds the packets between two AckReqs; it is not an exact count of packets per ACK on the wire.
    ACK_COALESCED: u8 = 2;
    /// MODIFY_QP attribute: max_dest_rd_atomic (the responder resources).
    QP_ATTR_DEST_RD_ATOMIC: u32 = 1 << 9;
    /// MODIFY_QP attribute (UD and GSI QPs): the Q_Key, carried in `access` (a datagram QP has no remote access rights, so the field is free; IBTCA_QP_ATTR_ACCESS is refused for UD, SMI and GSI QPs, IBTCA_QP_ATTR_QKEY for RC QPs).
    QP_ATTR_QKEY: u32 = 1 << 12;
}

abi_struct! {
    /// A QP's doorbell record (64 bytes, in guest memory): the driver stores
    /// its SQ and RQ producer indexes here after the WQEs; the device keeps
    /// sq_awake nonzero while it will read sq_pi again without a doorbell
    /// (send work in flight), rq_awake while it reads rq_pi whenever it
    /// needs a receive (RTR, RTS). The driver stores an index, fences, and
    /// rings that doorbell only if its awake word reads 0; the device
    /// clears an awake word, fences, and reads the index once more before
    /// it stops reading.
    DbRecord = "db_record" {
        /// SQ producer index (driver), as an SQ doorbell's.
        sq_pi: Le32,
        /// Nonzero while the device reads sq_pi by itself (device).
        sq_awake: Le32,
        /// RQ producer index (driver), as an RQ doorbell's.
        rq_pi: Le32,
        /// Nonzero while the device reads rq_pi by itself (device).
        rq_awake: Le32,
        /// Reserved, zero.
        rsvd: [u8; 48],
    }
}

abi_struct! {
    /// A CQ's doorbell record (64 bytes, in guest memory): the driver stores
    /// its consumer index here as it consumes entries; the device reads it
    /// before it calls the CQ full. With CAP_CQ_RECORD_ARM the driver arms
    /// here too: the device reads `arm` after each completion it writes, so
    /// the driver rings the CQ doorbell only for a completion already
    /// written when it armed.
    CqDbRecord = "cq_db_record" {
        /// Consumer index (driver), as a CQ doorbell's.
        ci: Le32,
        /// Arm request (driver): IBTCA_CQ_ARM_* in bits 1:0, a count the driver advances with each request in bits 31:2; a value the device has not seen arms the CQ once.
        arm: Le32,
        /// Reserved, zero.
        rsvd: [u8; 56],
    }
}

/// The name of completion status `status` as the driver's header has it
/// without its prefix ("WC_RETRY_EXC_ERR"), for logs; "WC_?" for a value
/// that is no status.
pub fn wc_status_name(status: u8) -> &'static str {
    ABI_VALUES
        .iter()
        .find(|v| {
            (v.name == "WC_SUCCESS" || v.name.starts_with("WC_") && v.name.ends_with("_ERR"))
                && v.value == u64::from(status)
        })
        .map_or("WC_?", |v| v.name)
}

/// Renders `guest-driver/include/ibtca_abi.h`.
pub fn c_header() -> String {
    let mut s = String::new();
    s.push_str("/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */\n");
    s.push_str(
        "/*\n * ibtca verbs ABI: structures the driver and the device share in guest memory.\n *\n",
    );
    s.push_str(" * GENERATED from device/abi/src/verbs.rs by `cargo run -p ibtca-device --bin\n");
    s.push_str(
        " * ibtca-regs-header -- abi`. Do not edit: a device unit test checks this file.\n */\n",
    );
    s.push_str("#ifndef IBTCA_ABI_H\n#define IBTCA_ABI_H\n\n#include <linux/types.h>\n\n");
    s.push_str("#ifndef __packed\n#define __packed __attribute__((packed))\n#endif\n\n");
    for v in ABI_VALUES {
        s.push_str(&format!("/* {} */\n", v.doc.trim()));
        s.push_str(&format!("#define IBTCA_{:<28} 0x{:x}\n", v.name, v.value));
    }
    s.push('\n');
    s.push_str(&c_structs(&layouts()));
    s.push_str(&c_structs(&param_layouts()));
    s.push_str("#endif /* IBTCA_ABI_H */\n");
    s
}

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn command_parameters_fit_the_entry() {
        for l in param_layouts() {
            assert_eq!(l.size, 48, "{} must fill the 48-byte params area", l.c_name);
            let sum: usize = l.fields.iter().map(|f| f.size).sum();
            assert_eq!(sum, l.size, "{} has padding", l.c_name);
        }
    }

    #[test]
    fn committed_abi_header_matches_generated() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../guest-driver/include/ibtca_abi.h"
        );
        let committed = std::fs::read_to_string(path).expect("guest-driver/include/ibtca_abi.h");
        assert!(
            committed == c_header(),
            "guest-driver/include/ibtca_abi.h is stale: run \
             `cargo run -p ibtca-device --bin ibtca-regs-header -- abi > guest-driver/include/ibtca_abi.h`"
        );
    }
}
