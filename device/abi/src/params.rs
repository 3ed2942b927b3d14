//! The parameter blocks of the command queue's commands and the attribute
//! blocks their replies are written as (QUERY_DEVICE, QUERY_PORT,
//! QUERY_QP, QUERY_SRQ), as the driver lays them out in guest memory: the
//! `params` of a [`CmdEntry`](crate::verbs::CmdEntry). Same conventions as
//! [`verbs`](crate::verbs): little-endian, `#[repr(C)]` without padding,
//! rendered into `ibtca_abi.h`.

use vm_memory::{Le16, Le32, Le64};

use crate::layout::{abi_struct, StructLayout};

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
