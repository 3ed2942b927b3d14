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
    /// Command parameters naming one object.
    CmdHandle = "cmd_handle" {
        /// PD number, lkey, rkey, CQ or QP number.
        handle: Le32,
        /// Reserved, zero.
        rsvd: [u8; 44],
    }
}

abi_struct! {
    /// REG_MR parameters: a region of `length` bytes, addressed as `iova` by
    /// work requests and remote peers. With `npages` 0 the bytes are
    /// guest-physically contiguous at `gpa`; otherwise `gpa` is the
    /// guest-physical address of a translation table of `npages` __le64
    /// page addresses (4 KiB pages, each 4 KiB-aligned; the table 8-byte
    /// aligned), `npages` exactly the pages that `first_offset + length`
    /// bytes cover, at most struct ibtca_device_attr_ext's max_mr_pages.
    /// The device copies the table: later changes to it have no effect.
    CmdRegMr = "cmd_reg_mr" {
        /// Protection domain.
        pdn: Le32,
        /// IBTCA_ACCESS_* rights.
        access: Le32,
        /// Start address in the region's own (virtual) address space.
        iova: Le64,
        /// Length in bytes.
        length: Le64,
        /// Guest-physical address of the first byte (npages 0) or of the page table.
        gpa: Le64,
        /// Pages in the table; 0: a contiguous region.
        npages: Le32,
        /// Offset of the region's first byte in the first page (below 4096).
        first_offset: Le32,
        /// Reserved, zero.
        rsvd: [u8; 8],
    }
}

abi_struct! {
    /// ALLOC_MR parameters: a fast-registration region in `pdn` that
    /// IBTCA_WR_REG_MR may give up to `max_pages` pages.
    CmdAllocMr = "cmd_alloc_mr" {
        /// Protection domain.
        pdn: Le32,
        /// Most pages one IBTCA_WR_REG_MR may give it (1 to max_mr_pages).
        max_pages: Le32,
        /// Reserved, zero.
        rsvd: [u8; 40],
    }
}

abi_struct! {
    /// CREATE_CQ parameters.
    CmdCreateCq = "cmd_create_cq" {
        /// Guest-physical address of the ring of struct ibtca_cqe.
        ring: Le64,
        /// log2 of the number of entries.
        log_entries: u8,
        /// MSI-X vector raised when the CQ is armed and gets a completion.
        vector: u8,
        /// Reserved, zero.
        rsvd0: [u8; 2],
        /// Doorbell page (below IBTCA_DB_PAGES) whose CQ doorbell alone rings this CQ; 0: the kernel's (BAR0's IBTCA_REG_DB_CQ or page 0).
        db_page: Le32,
        /// Reserved, zero.
        rsvd: [u8; 32],
    }
}

abi_struct! {
    /// CREATE_QP parameters.
    CmdCreateQp = "cmd_create_qp" {
        /// Protection domain.
        pdn: Le32,
        /// CQ for send completions.
        send_cqn: Le32,
        /// CQ for receive completions.
        recv_cqn: Le32,
        /// log2 entries of the SQ, RQ and quasi-WQE ring (bytes 0, 1, 2); byte 3: the IBTCA_QPT_* type.
        log_sizes: [u8; 4],
        /// Guest-physical address of the SQ (struct ibtca_send_wqe).
        sq: Le64,
        /// Guest-physical address of the RQ (struct ibtca_recv_wqe).
        rq: Le64,
        /// Guest-physical address of the quasi-WQE ring (struct ibtca_quasi_wqe).
        quasi: Le64,
        /// Doorbell page (below IBTCA_DB_PAGES) whose SQ and RQ doorbells alone ring this QP; 0: the kernel's (BAR0's IBTCA_REG_DB_SQ/DB_RQ or page 0).
        db_page: Le16,
        /// log2 of the RQ's stride in bytes (IBTCA_RECV_LOG_STRIDE to IBTCA_MAX_RECV_LOG_STRIDE; `rq` aligned to it); 0: IBTCA_RECV_LOG_STRIDE, the 128-byte struct ibtca_recv_wqe with 4 SGEs. Must be 0 with `srqn`.
        rq_log_stride: u8,
        /// log2 of the SQ's stride in bytes (IBTCA_RECV_LOG_STRIDE to IBTCA_MAX_RECV_LOG_STRIDE, as `rq_log_stride`; `sq` aligned to it); 0: 128 bytes, struct ibtca_send_wqe with 4 SGEs. A send WQE's SGE list runs on past its 128 bytes as a receive WQE's does, up to IBTCA_MAX_SEND_SGE.
        sq_log_stride: u8,
        /// Shared receive queue the QP takes its receives from (in the same PD; `rq` and its log size then 0, and RQ doorbells are refused); 0: its own RQ.
        srqn: Le32,
    }
}

abi_struct! {
    /// CREATE_SRQ parameters: a ring of 2^log_entries struct ibtca_recv_wqe
    /// the driver produces (SRQ doorbell: IBTCA_REG_DB_SRQ or a doorbell
    /// page's IBTCA_DB_PAGE_SRQ) and the device consumes in ring order for
    /// every QP created with the SRQ's number.
    CmdCreateSrq = "cmd_create_srq" {
        /// Protection domain (the QPs using the SRQ must be in it).
        pdn: Le32,
        /// log2 of the number of entries (at most log2 of max_srq_wr).
        log_entries: u8,
        /// log2 of the ring's stride in bytes, as CREATE_QP's rq_log_stride (0: 128 bytes, 4 SGEs); RESIZE_SRQ keeps it.
        log_stride: u8,
        /// Reserved, zero.
        rsvd0: [u8; 2],
        /// Guest-physical address of the ring (aligned to its stride).
        ring: Le64,
        /// Most receives posted and not yet taken (1 to 2^log_entries).
        max_wr: Le32,
        /// Limit event threshold (0: disarmed; below max_wr), as MODIFY_SRQ's.
        srq_limit: Le32,
        /// Doorbell page whose SRQ doorbell alone rings this SRQ; 0: the kernel's.
        db_page: Le32,
        /// Reserved, zero.
        rsvd: [u8; 20],
    }
}

abi_struct! {
    /// MODIFY_SRQ parameters; `attr_mask` (IBTCA_SRQ_ATTR_*) says which apply.
    CmdModifySrq = "cmd_modify_srq" {
        /// SRQ number.
        srqn: Le32,
        /// IBTCA_SRQ_ATTR_* bits.
        attr_mask: Le32,
        /// New max_wr (at least the receives posted now, at most the ring's entries).
        max_wr: Le32,
        /// New limit (below max_wr; 0 disarms).
        srq_limit: Le32,
        /// Reserved, zero.
        rsvd: [u8; 32],
    }
}

abi_struct! {
    /// RESIZE_SRQ parameters: the new ring and max_wr.
    CmdResizeSrq = "cmd_resize_srq" {
        /// SRQ number.
        srqn: Le32,
        /// log2 of the new ring's entries: at least the old ring's.
        log_entries: u8,
        /// Reserved, zero.
        rsvd0: [u8; 3],
        /// Guest-physical address of the new ring (receive WQEs, aligned to one).
        ring: Le64,
        /// New max_wr (at least the receives posted now and above the limit, at most the new ring's entries).
        max_wr: Le32,
        /// Reserved, zero.
        rsvd: [u8; 28],
    }
}

abi_struct! {
    /// QUERY_SRQ reply, written over the command's params.
    SrqAttr = "srq_attr" {
        /// Most receives posted and not yet taken.
        max_wr: Le32,
        /// Armed limit (0: disarmed, or fired).
        srq_limit: Le32,
        /// Limit events raised since the SRQ was created.
        limit_events: Le32,
        /// Receives posted (doorbell) and not yet taken by a QP.
        posted: Le32,
        /// Protection domain.
        pdn: Le32,
        /// log2 of the ring's entries.
        log_entries: u8,
        /// Reserved, zero.
        rsvd: [u8; 27],
    }
}

abi_struct! {
    /// ATTACH_MCAST and DETACH_MCAST parameters: a UD QP and a multicast group.
    CmdMcast = "cmd_mcast" {
        /// QP number.
        qpn: Le32,
        /// The group's multicast LID (0xc000-0xfffe).
        mlid: Le16,
        /// Reserved, zero.
        rsvd0: [u8; 2],
        /// The group's GID (network byte order, byte 0 0xff).
        mgid: [u8; 16],
        /// Reserved, zero.
        rsvd: [u8; 24],
    }
}

abi_struct! {
    /// QP_DB_RECORD and CQ_DB_RECORD parameters: the object and where its doorbell record is.
    CmdDbRecord = "cmd_db_record" {
        /// QP or CQ number.
        handle: Le32,
        /// Reserved, zero.
        rsvd: Le32,
        /// Guest-physical address of the record (struct ibtca_db_record or struct ibtca_cq_db_record), 64-byte aligned, in guest memory.
        addr: Le64,
        /// Reserved, zero.
        rsvd2: [u8; 32],
    }
}

abi_struct! {
    /// MODIFY_CQ parameters: the CQ and its interrupt moderation.
    CmdModifyCq = "cmd_modify_cq" {
        /// CQ number.
        cqn: Le32,
        /// Completions that raise the vector at once (0 or 1: the first).
        count: Le16,
        /// Reserved, zero.
        rsvd0: [u8; 2],
        /// Microseconds after the first held completion that raise it anyway (0: no holding).
        period_us: Le32,
        /// Reserved, zero.
        rsvd: [u8; 36],
    }
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

abi_struct! {
    /// MODIFY_QP parameters; `attr_mask` says which fields apply.
    CmdModifyQp = "cmd_modify_qp" {
        /// QP number.
        qpn: Le32,
        /// IBTCA_QP_ATTR_* bits.
        attr_mask: Le32,
        /// New IBTCA_QPS_* state.
        state: u8,
        /// IBTCA_MTU_* path MTU.
        path_mtu: u8,
        /// Local ACK timeout exponent: 4.096 us * 2^timeout (1-31); 0: no timeout (IBA).
        timeout: u8,
        /// Transport retry count (0-7).
        retry_cnt: u8,
        /// RNR retry count (0-7, 7 = forever).
        rnr_retry: u8,
        /// Minimum RNR NAK timer code (0-31).
        min_rnr_timer: u8,
        /// Outstanding RDMA READ / atomic requests this QP may issue.
        max_rd_atomic: u8,
        /// Service level of the path (0-14; with IBTCA_QP_ATTR_PATH): the
        /// LRH SL of every packet the QP sends, which each egress port maps
        /// to a VL.
        sl: u8,
        /// Destination QP number.
        dest_qpn: Le32,
        /// Destination LID.
        dlid: Le16,
        /// Index into the port's P_Key table (below IBTCA_PKEY_TABLE_LEN;
        /// with IBTCA_QP_ATTR_PKEY_INDEX): the P_Key the QP sends with and
        /// accepts. Without it: index 0 (the default partition, 0xFFFF,
        /// unless the SM changed entry 0).
        pkey_index: Le16,
        /// First PSN this QP sends.
        sq_psn: Le32,
        /// First PSN this QP expects.
        rq_psn: Le32,
        /// RC QPs: IBTCA_ACCESS_REMOTE_* rights for incoming requests
        /// (with IBTCA_QP_ATTR_ACCESS). UD and GSI QPs: the Q_Key (with
        /// IBTCA_QP_ATTR_QKEY; GSI only 0x80010000).
        access: Le32,
        /// MSN before the first completed message (24 bits; with
        /// IBTCA_QP_ATTR_MSN): both ends set the same value.
        initial_msn: Le32,
        /// Most packets between two ACK requests with IBTCA_ACK_COALESCED
        /// (1-65535; with IBTCA_QP_ATTR_ACK_POLICY): a bound, not a count.
        ack_every: Le16,
        /// Most unacknowledged packets in flight (with
        /// IBTCA_QP_ATTR_ACK_POLICY): 0 the device's default, 1
        /// stop-and-wait (each packet waits for its ACK or the local ACK
        /// timeout), at most 1024.
        window: Le16,
        /// IBTCA_ACK_* policy (with IBTCA_QP_ATTR_ACK_POLICY).
        ack_mode: u8,
        /// Responder resources (with IBTCA_QP_ATTR_DEST_RD_ATOMIC): RDMA READ / atomic requests this QP holds unanswered, at most max_qp_rd_atom; one more is NAKed invalid request. Without the bit: max_qp_rd_atom. 0 counts as 1.
        max_dest_rd_atomic: u8,
        /// Reserved, zero.
        rsvd2: [u8; 2],
    }
}

abi_struct! {
    /// QUERY_QP reply, written over the command's params: the QP's state as
    /// the device has it and the attributes the device applies. After
    /// MODIFY_QP to RESET the attributes are zero again (a GSI QP keeps its
    /// Q_Key).
    QpAttr = "qp_attr" {
        /// IBTCA_QPS_* state (IBTCA_QPS_ERR after an error completion or a
        /// responder error, IBTCA_QPS_SQE after a UD QP's failed send,
        /// whatever the last MODIFY_QP said).
        state: u8,
        /// IBTCA_QPT_* type.
        qp_type: u8,
        /// IBTCA_MTU_* path MTU (0 before IBTCA_QP_ATTR_PATH).
        path_mtu: u8,
        /// Service level of the path.
        sl: u8,
        /// Local ACK timeout exponent.
        timeout: u8,
        /// Transport retry count.
        retry_cnt: u8,
        /// RNR retry count (7 = forever).
        rnr_retry: u8,
        /// Minimum RNR NAK timer code.
        min_rnr_timer: u8,
        /// Outstanding RDMA READ / atomic requests this QP may issue.
        max_rd_atomic: u8,
        /// Responder resources the device applies (max_qp_rd_atom unless
        /// MODIFY_QP gave IBTCA_QP_ATTR_DEST_RD_ATOMIC).
        max_dest_rd_atomic: u8,
        /// Index into the port's P_Key table.
        pkey_index: Le16,
        /// Destination LID.
        dlid: Le16,
        /// Reserved, zero.
        rsvd0: Le16,
        /// Destination QP number.
        dest_qpn: Le32,
        /// Next PSN the QP sends: the transport's once an RC QP sends (RTS,
        /// and ERR after RTS), else the SQ PSN MODIFY_QP set.
        sq_psn: Le32,
        /// Next PSN the QP expects: the transport's once an RC QP receives
        /// (RTR, RTS, and ERR after RTR), else the RQ PSN MODIFY_QP set.
        rq_psn: Le32,
        /// RC: IBTCA_ACCESS_REMOTE_* rights. UD, SMI, GSI: 0.
        access: Le32,
        /// Q_Key (UD, SMI, GSI QPs; 0 for RC).
        qkey: Le32,
        /// Reserved, zero.
        rsvd: [u8; 12],
    }
}

abi_struct! {
    /// SET_PORT_CAPS parameters: PortInfo CapabilityMask bits (IBA
    /// numbering, as Linux's IB_PORT_*_SUP).
    CmdPortCaps = "cmd_port_caps" {
        /// Bits to set.
        set: Le32,
        /// Bits to clear (after setting).
        clear: Le32,
        /// Reserved, zero.
        rsvd: [u8; 40],
    }
}

abi_struct! {
    /// SMA_MAD parameters: the 256-byte SMP at `mad` goes to the port's
    /// agent; its answer (256 bytes) is written at `reply` (may be `mad`).
    CmdMad = "cmd_mad" {
        /// Guest-physical address of the SMP.
        mad: Le64,
        /// Guest-physical address of 256 bytes for the answer.
        reply: Le64,
        /// Reserved, zero.
        rsvd: [u8; 32],
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

abi_struct! {
    /// QUERY_DEVICE reply, written over the command's params: the device's
    /// identity and the limits it enforces.
    DeviceAttr = "device_attr" {
        /// Node GUID.
        node_guid: Le64,
        /// Largest memory region in bytes.
        max_mr_size: Le64,
        /// Queue pairs.
        max_qp: Le32,
        /// Completion queues.
        max_cq: Le32,
        /// Memory regions and windows together (one key table).
        max_mr: Le32,
        /// Protection domains.
        max_pd: Le32,
        /// Entries of one CQ.
        max_cqe: Le32,
        /// Entries of one send or receive queue.
        max_qp_wr: Le32,
        /// SGEs of one send WQE (IBTCA_MAX_SEND_SGE, at the largest send stride; 4 at the default 128 bytes).
        max_sge: u8,
        /// Outstanding RDMA READ and atomic requests one QP answers as responder (its responder resources).
        max_qp_rd_atom: u8,
        /// Largest IBTCA_MTU_* path MTU.
        max_mtu: u8,
        /// Physical ports.
        phys_ports: u8,
        /// IBTCA_DEV_CAP_* bits.
        caps: Le32,
    }
}

abi_struct! {
    /// QUERY_DEVICE reply with params byte 0 = IBTCA_DEVICE_ATTR_EXT: the
    /// limits of page-list regions.
    DeviceAttrExt = "device_attr_ext" {
        /// Pages of one page-list region (REG_MR, ALLOC_MR's max_pages).
        max_mr_pages: Le32,
        /// Pages of all page-list and fast-registration regions together (ALLOC_MR reserves max_pages).
        max_total_mr_pages: Le32,
        /// Page size of page lists in bytes (4096).
        page_size: Le32,
        /// Doorbell pages in the doorbell BAR (IBTCA_DB_PAGES).
        db_pages: Le32,
        /// Index of the doorbell BAR (IBTCA_DB_BAR).
        db_bar: u8,
        /// SGEs of one SRQ receive (IBTCA_MAX_RECV_SGE, at the largest stride).
        max_srq_sge: u8,
        /// Outstanding RDMA READ and atomic requests one QP issues as requester (MODIFY_QP's max_rd_atomic, its initiator depth).
        max_qp_init_rd_atom: u8,
        /// SGEs of one receive WQE of a QP's own RQ (IBTCA_MAX_RECV_SGE, at the largest stride); struct ibtca_device_attr's max_sge is the send WQE's.
        max_recv_sge: u8,
        /// Shared receive queues.
        max_srq: Le32,
        /// Entries of one SRQ (max_wr).
        max_srq_wr: Le32,
        /// Bytes of inline data one send WQE carries (IBTCA_MAX_INLINE_DATA).
        max_inline_data: Le32,
        /// Reserved, zero.
        rsvd: [u8; 16],
    }
}

abi_struct! {
    /// QUERY_PORT reply, written over the command's params.
    PortAttr = "port_attr" {
        /// Port GUID (the interface ID of the port's one GID).
        port_guid: Le64,
        /// Largest message in bytes.
        max_msg_sz: Le32,
        /// LID.
        lid: Le16,
        /// LID of the subnet manager (0: none).
        sm_lid: Le16,
        /// Entry 0 of the port's P_Key table.
        pkey: Le16,
        /// IBTCA_PORT_* logical state.
        state: u8,
        /// IBTCA_PORT_PHYS_* physical state.
        phys_state: u8,
        /// Largest IBTCA_MTU_* MTU.
        max_mtu: u8,
        /// Active IBTCA_MTU_* MTU.
        active_mtu: u8,
        /// IBTCA_PORT_WIDTH_* active width.
        active_width: u8,
        /// IBTCA_PORT_SPEED_* active speed.
        active_speed: u8,
        /// Data VLs the port runs (1-15).
        data_vls: u8,
        /// LID mask control.
        lmc: u8,
        /// Reserved, zero.
        rsvd0: [u8; 2],
        /// PortInfo CapabilityMask as the port's agent answers it (IBA
        /// bits, as Linux's port_cap_flags; IsSM while the host runs an SM).
        cap_mask: Le32,
        /// Reserved, zero.
        rsvd: [u8; 16],
    }
}

/// Every command-parameter layout (each fits `CmdEntry::params`), replies
/// included.
pub fn param_layouts() -> Vec<StructLayout> {
    vec![
        CmdHandle::layout(),
        CmdRegMr::layout(),
        CmdAllocMr::layout(),
        CmdCreateCq::layout(),
        CmdCreateQp::layout(),
        CmdModifyQp::layout(),
        CmdCreateSrq::layout(),
        CmdModifySrq::layout(),
        CmdResizeSrq::layout(),
        SrqAttr::layout(),
        QpAttr::layout(),
        CmdDbRecord::layout(),
        CmdModifyCq::layout(),
        CmdMcast::layout(),
        CmdMad::layout(),
        CmdPortCaps::layout(),
        DeviceAttr::layout(),
        DeviceAttrExt::layout(),
        PortAttr::layout(),
    ]
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
