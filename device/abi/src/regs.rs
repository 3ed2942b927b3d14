//! BAR0 register map: the single source of truth.
//!
//! Every offset, value and bit the guest driver uses is defined here once.
//! `ibtca-regs-header` turns this module into `guest-driver/include/ibtca_regs.h`, and a
//! unit test fails if the committed header differs from what this module
//! generates, so the driver and the device cannot drift.
//!
//! All registers are 32 bits wide, little-endian, at 4-byte aligned offsets.
//! The guest reads and writes them with 4-byte accesses; other sizes are
//! rejected (reads return all-ones). Only the slow path (probe, self-tests)
//! reads registers: data-path state lives in guest memory.

/// Describes one register for documentation and header generation.
#[derive(Debug, Clone, Copy)]
pub struct RegDef {
    /// Name without prefix (`MAGIC` becomes `IBTCA_REG_MAGIC`).
    pub name: &'static str,
    /// Byte offset in BAR0.
    pub offset: u64,
    /// "RO", "RW", "WO".
    pub access: &'static str,
    /// One-line description.
    pub doc: &'static str,
}

/// Describes one named value (magic, bit, code) for header generation.
#[derive(Debug, Clone, Copy)]
pub struct ValueDef {
    /// Name without prefix (`MAGIC_VALUE` becomes `IBTCA_MAGIC_VALUE`).
    pub name: &'static str,
    /// The value.
    pub value: u64,
    /// One-line description.
    pub doc: &'static str,
}

macro_rules! registers {
    ($( $(#[doc = $doc:literal])* $name:ident = $off:literal, $acc:literal; )*) => {
        $( $(#[doc = $doc])* pub const $name: u64 = $off; )*
        /// Every BAR0 register, in offset order.
        pub const REGISTERS: &[RegDef] = &[
            $( RegDef { name: stringify!($name), offset: $off, access: $acc,
                        doc: concat!($($doc),*) }, )*
        ];
    };
}

/// Defines constants and a table of them (`TABLE`) for header generation.
macro_rules! values {
    ($table:ident; $( $(#[doc = $doc:literal])* $name:ident: $ty:ty = $val:expr; )*) => {
        $( $(#[doc = $doc])* pub const $name: $ty = $val; )*
        /// Every named value, in definition order.
        pub const $table: &[$crate::regs::ValueDef] = &[
            $( $crate::regs::ValueDef { name: stringify!($name), value: $val as u64,
                          doc: concat!($($doc),*) }, )*
        ];
    };
}
pub(crate) use values;

registers! {
    /// Identifies the device: reads IBTCA_MAGIC_VALUE.
    MAGIC = 0x000, "RO";
    /// Register-interface version: major in bits 31:16, minor in 15:0.
    VERSION = 0x004, "RO";
    /// Capability bits (IBTCA_CAP_*).
    CAPS = 0x008, "RO";
    /// Write IBTCA_RESET_VALUE to reset the device to its power-on state.
    RESET = 0x00c, "WO";
    /// Free read/write register for driver round trips; reset clears it.
    SCRATCH = 0x010, "RW";
    /// IB port state (IBTCA_PORT_*).
    PORT_STATE = 0x014, "RO";
    /// Number of MSI-X vectors the device implements.
    NUM_VECTORS = 0x018, "RO";
    /// Write a vector number to fire that MSI-X vector.
    IRQ_TEST = 0x01c, "WO";
    /// Count of interrupts raised through IRQ_TEST since reset.
    IRQ_TEST_COUNT = 0x020, "RO";
    /// Device status bits (IBTCA_STATUS_*).
    STATUS = 0x024, "RO";
    /// Count of rejected register accesses (bad size, offset or value).
    ERROR_COUNT = 0x028, "RO";
    /// DMA self-test: guest address, low 32 bits.
    DMA_ADDR_LO = 0x030, "RW";
    /// DMA self-test: guest address, high 32 bits.
    DMA_ADDR_HI = 0x034, "RW";
    /// DMA self-test: length in bytes (at most IBTCA_DMA_TEST_MAX).
    DMA_LEN = 0x038, "RW";
    /// DMA self-test: pattern seed for FILL.
    DMA_SEED = 0x03c, "RW";
    /// DMA self-test: write a command (IBTCA_DMA_CMD_*) to run it.
    DMA_CMD = 0x040, "WO";
    /// DMA self-test: result code of the last command (IBTCA_DMA_ST_*).
    DMA_STATUS = 0x044, "RO";
    /// DMA self-test: FNV-1a 32 checksum of the bytes last read by SUM.
    DMA_RESULT = 0x048, "RO";
    /// Port LID (set by the device's configuration).
    PORT_LID = 0x050, "RO";
    /// Port GUID, low 32 bits.
    PORT_GUID_LO = 0x054, "RO";
    /// Port GUID, high 32 bits.
    PORT_GUID_HI = 0x058, "RO";
    /// MSI-X vector of asynchronous events (port state changes); reset: 0.
    EVENT_VECTOR = 0x060, "RW";
    /// Pending asynchronous event causes (IBTCA_EVENT_*); write 1s to clear.
    EVENT_CAUSE = 0x064, "RW";
    /// Count of port state changes since the device started.
    PORT_EVENTS = 0x068, "RO";
    /// Command queue: guest-physical base, low 32 bits.
    CMDQ_BASE_LO = 0x080, "RW";
    /// Command queue: guest-physical base, high 32 bits.
    CMDQ_BASE_HI = 0x084, "RW";
    /// Command queue: log2 of the number of entries; writing it (re)starts the queue at index 0.
    CMDQ_LOG_SIZE = 0x088, "RW";
    /// Command queue doorbell: write the new producer index.
    CMDQ_DB = 0x08c, "WO";
    /// Send-queue doorbell (8-byte write): QP number in bits 23:0, producer index in bits 63:32.
    DB_SQ = 0x100, "WO";
    /// Receive-queue doorbell (8-byte write): QP number in bits 23:0, producer index in bits 63:32.
    DB_RQ = 0x108, "WO";
    /// CQ doorbell (8-byte write): CQ number in bits 23:0, IBTCA_CQ_ARM_* in bits 31:24, consumer index in bits 63:32; an arm that a completion already written past that index satisfies fires at once.
    DB_CQ = 0x110, "WO";
    /// DRDMA: index of the BAR holding the window (the seed's DBAR).
    DRDMA_BAR = 0x140, "RO";
    /// DRDMA: number of address ranges in the window (each has an ARR).
    DRDMA_RANGES = 0x144, "RO";
    /// DRDMA: bytes per address range (4096).
    DRDMA_RANGE_SIZE = 0x148, "RO";
    /// DRDMA: packet memory blocks in the device's pool.
    DRDMA_PMBS = 0x14c, "RO";
    /// DRDMA: PMBs dedicated to DRDMA (write while every ARR is free; at least 1, at most DRDMA_PMBS).
    DRDMA_PMB_DEDICATED = 0x150, "RW";
    /// DRDMA: count of refused window accesses and submits since reset.
    DRDMA_ERRORS = 0x154, "RO";
    /// DRDMA: last refusal: IBTCA_DRDMA_ERR_* in bits 7:0, ARR number in bits 23:8.
    DRDMA_LAST_ERROR = 0x158, "RO";
    /// DRDMA: how long a load waits for read-response data, in microseconds (then all-ones and IBTCA_DRDMA_ERR_LOAD_TIMEOUT).
    DRDMA_LOAD_TIMEOUT_US = 0x15c, "RW";
    /// DRDMA: window mode (IBTCA_DRDMA_MODE_*).
    DRDMA_MODE = 0x160, "RO";
    /// DRDMA commit (mapped window): ARR number in bits 15:0, bytes stored (WRITE) or loaded (READ) in bits 31:16.
    DRDMA_COMMIT = 0x164, "WO";
    /// DRDMA submit (8-byte write): ARR number in bits 15:0, IBTCA_DRDMA_SUBMIT_* flags, owner doorbell page in bits 23:18 (only QPs on that page may name the range in a direct SGE), PMB number in bits 31:24 (with IBTCA_DRDMA_SUBMIT_PMB), total transfer length in bits 63:32.
    DRDMA_SUBMIT = 0x168, "WO";
    /// DRDMA submit of many ranges (8-byte write): range mask in bits 31:0 (bit i = range base + i), length in bits 44:32, IBTCA_DRDMA_MASK_WRITE, base range in bits 63:48; device-chosen PMBs.
    DRDMA_SUBMIT_MASK = 0x170, "WO";
    /// DRDMA commit of many WRITE ranges (8-byte write): range mask in bits 31:0, base range in bits 63:48; each range counts its remaining bytes as stored (mapped window: one register write for many ranges).
    DRDMA_COMMIT_MASK = 0x178, "WO";
    /// Key memory (seed 001): IBTCA_RKM_STATUS_* of the invalidation walks.
    RKM_STATUS = 0x180, "RO";
    /// Key memory: invalidation walks run since reset (MW bind/dealloc, LOCAL_INV, SEND with Invalidate, DEREG_MR).
    RKM_WALKS = 0x184, "RO";
    /// Key memory: key slots of in-flight RDMA READs, atomics and WRITEs the walks cleared since reset.
    RKM_CLEARED = 0x188, "RO";
    /// RDMA READ response packets the engine sends per QP per turn (default IBTCA_RKM_READ_BUDGET_DEFAULT); 0 holds every response back (a test hook).
    RKM_READ_BUDGET = 0x18c, "RW";
    /// Key memory / quasi-WQE ring (seed 004): READs stopped since reset because the quasi-WQE read from guest memory differed from the responder's record (each ends its QP with NAK remote operational error).
    RKM_QUASI_MISMATCHES = 0x190, "RO";
    /// DRDMA release: ARR number in bits 15:0. Frees a busy range and its PMB (a transfer on it fails; a work request held for it completes in error), so a range its driver gave up on (submitted and never filled, or named by no work request) returns to the free list. The kernel writes it when the last mapping of a user context's range goes.
    DRDMA_RELEASE = 0x194, "WO";
    /// Shared-receive-queue doorbell (8-byte write): SRQ number in bits 23:0, producer index in bits 63:32.
    DB_SRQ = 0x1b0, "WO";
    /// Trapped data-path doorbells received since reset (SQ, RQ, CQ and SRQ, in BAR0 and on the doorbell pages, well formed or not; wraps): what doorbell records save a driver.
    DOORBELLS = 0x1d0, "RO";
    /// Traps the port's agent sent to the subnet manager since the device started (trap 144 when the host changes the capability mask, first sends and repeats; wraps).
    TRAPS_SENT = 0x1e8, "RO";
    /// Of those traps, the ones the subnet manager repressed (SubnTrapRepress of their TID).
    TRAPS_REPRESSED = 0x1ec, "RO";
}

values! {
    VALUES;
    /// PCI vendor ID: 0x1234, which QEMU's emulated-only devices use and the PCI ID database gives to no company.
    PCI_VENDOR_ID: u16 = 0x1234;
    /// PCI device ID: none of QEMU's own devices takes it (they take 0x1111 and 0x11e8) and no in-tree Linux driver binds it.
    PCI_DEVICE_ID: u16 = 0x7ca0;
    /// PCI class code: serial bus controller, InfiniBand (0x0c06), prog-if 0.
    PCI_CLASS_CODE: u32 = 0x0c0600;
    /// PCI revision.
    PCI_REVISION: u8 = 1;
    /// Index of the register BAR.
    REGS_BAR: u32 = 0;
    /// Size of the register BAR in bytes.
    REGS_BAR_SIZE: u64 = 0x1_0000;
    /// Index of the BAR holding the MSI-X table and PBA.
    MSIX_BAR: u32 = 1;
    /// Size of the MSI-X BAR in bytes.
    MSIX_BAR_SIZE: u64 = 0x1000;
    /// Offset of the MSI-X table in its BAR.
    MSIX_TABLE_OFFSET: u64 = 0x000;
    /// Offset of the MSI-X pending-bit array in its BAR.
    MSIX_PBA_OFFSET: u64 = 0x800;
    /// Number of MSI-X vectors.
    MSIX_VECTORS: u16 = 32;
    /// Value of the MAGIC register ("IBTC").
    MAGIC_VALUE: u32 = 0x4942_5443;
    /// Register-interface major version.
    VERSION_MAJOR: u32 = 1;
    /// Register-interface minor version.
    VERSION_MINOR: u32 = 0;
    /// CAPS: MSI-X interrupts.
    CAP_MSIX: u32 = 1 << 0;
    /// CAPS: DMA self-test registers.
    CAP_DMA_TEST: u32 = 1 << 1;
    /// CAPS: Direct RDMA window and ARRs.
    CAP_DRDMA: u32 = 1 << 2;
    /// CAPS: the doorbell BAR (DB_BAR) with per-context doorbell pages.
    CAP_DB_PAGES: u32 = 1 << 3;
    /// CAPS: a CQ's doorbell record takes arm requests (`arm`), which the device reads after each completion it writes.
    CAP_CQ_RECORD_ARM: u32 = 1 << 4;
    /// CAPS: CQ interrupt moderation (command MODIFY_CQ: a count and a period).
    CAP_CQ_MODERATION: u32 = 1 << 5;
    /// Value to write to RESET.
    RESET_VALUE: u32 = 0x5245_5345;
    /// PORT_STATE: link down.
    PORT_DOWN: u32 = 1;
    /// PORT_STATE: link up, port initializing.
    PORT_INIT: u32 = 2;
    /// PORT_STATE: port armed.
    PORT_ARMED: u32 = 3;
    /// PORT_STATE: port active.
    PORT_ACTIVE: u32 = 4;
    /// EVENT_CAUSE: the port state changed (read PORT_STATE), or the SM
    /// changed the LID of an Active port (read PORT_LID).
    EVENT_PORT_CHANGE: u32 = 1 << 0;
    /// EVENT_CAUSE: an armed SRQ fell below its limit (QUERY_SRQ's limit_events say which: each SRQ that fired counts one more, its limit back to 0).
    EVENT_SRQ_LIMIT: u32 = 1 << 1;
    /// EVENT_CAUSE: the SM changed the port's P_Key table (read it with SMA_MAD Gets of P_KeyTable; the guest's IB_EVENT_PKEY_CHANGE).
    EVENT_PKEY_CHANGE: u32 = 1 << 2;
    /// STATUS: the device is ready.
    STATUS_READY: u32 = 1 << 0;
    /// STATUS: guest memory is mapped (at least one DMA region).
    STATUS_DMA_MAPPED: u32 = 1 << 1;
    /// DMA_CMD: fill the buffer with the pattern byte(i) = seed + i.
    DMA_CMD_FILL: u32 = 1;
    /// DMA_CMD: read the buffer and store its FNV-1a 32 checksum in DMA_RESULT.
    DMA_CMD_SUM: u32 = 2;
    /// DMA_STATUS: success.
    DMA_ST_OK: u32 = 0;
    /// DMA_STATUS: the range is not inside mapped guest memory.
    DMA_ST_FAULT: u32 = 1;
    /// DMA_STATUS: unknown command or bad length.
    DMA_ST_INVALID: u32 = 2;
    /// Largest DMA self-test length in bytes.
    DMA_TEST_MAX: u32 = 1 << 20;
    /// Index of the DRDMA window BAR.
    DRDMA_WINDOW_BAR: u32 = 2;
    /// Index of the doorbell BAR: DB_PAGES pages of DB_PAGE_SIZE bytes, page k holding the SQ, RQ and CQ doorbells of the QPs and CQs created with db_page k (trapped, never backed by memory; a guest maps page k > 0 into one user context, page 0 is the kernel's, as are BAR0's DB_SQ/DB_RQ/DB_CQ).
    DB_BAR: u32 = 4;
    /// Doorbell pages in the doorbell BAR.
    DB_PAGES: u32 = 64;
    /// Bytes per doorbell page.
    DB_PAGE_SIZE: u64 = 0x1000;
    /// Offset in a doorbell page of its send-queue doorbell (8-byte write, as DB_SQ).
    DB_PAGE_SQ: u64 = 0x00;
    /// Offset in a doorbell page of its receive-queue doorbell (8-byte write, as DB_RQ).
    DB_PAGE_RQ: u64 = 0x08;
    /// Offset in a doorbell page of its CQ doorbell (8-byte write, as DB_CQ).
    DB_PAGE_CQ: u64 = 0x10;
    /// Offset in a doorbell page of its shared-receive-queue doorbell (8-byte write, as DB_SRQ).
    DB_PAGE_SRQ: u64 = 0x18;
    /// Offset of ARR 0 in BAR0; ARR n is at DRDMA_ARR_BASE + n * DRDMA_ARR_STRIDE.
    DRDMA_ARR_BASE: u64 = 0x1000;
    /// Bytes between consecutive ARRs.
    DRDMA_ARR_STRIDE: u64 = 0x20;
    /// Most address ranges a window can have.
    DRDMA_MAX_RANGES: u32 = 256;
    /// ARR field (RO): IBTCA_ARR_* state bits, PMB number in bits 15:8.
    ARR_CTRL: u64 = 0x00;
    /// ARR field (RO): Total Transfer Length in bytes.
    ARR_TTL: u64 = 0x04;
    /// ARR field (RO): Write Byte Count (bytes stored so far).
    ARR_WBC: u64 = 0x08;
    /// ARR field (RO): Read Response Payload Length of the response in the PMB.
    ARR_RRPL: u64 = 0x0c;
    /// ARR field (RO): offset in the range of the response in the PMB.
    ARR_RESP_OFFSET: u64 = 0x10;
    /// ARR field (RO): bytes of that response loaded so far.
    ARR_DRAINED: u64 = 0x14;
    /// ARR_CTRL: PCI Valid (the bus side may access the range).
    ARR_PCI_VALID: u32 = 1 << 0;
    /// ARR_CTRL: BR Valid (the bus router owns the PMB: sending, or awaiting a response).
    ARR_BR_VALID: u32 = 1 << 1;
    /// ARR_CTRL: Type: 1 = DRDMA WRITE, 0 = DRDMA READ.
    ARR_TYPE_WRITE: u32 = 1 << 2;
    /// ARR_CTRL: the range is allocated (submitted and not yet finished).
    ARR_BUSY: u32 = 1 << 3;
    /// ARR_CTRL: the last transfer on this range failed (cleared by the next submit).
    ARR_FAILED: u32 = 1 << 4;
    /// Shift of the PMB number in ARR_CTRL.
    ARR_PMB_SHIFT: u32 = 8;
    /// DRDMA_SUBMIT: direction WRITE (PCI to IB); clear for READ.
    DRDMA_SUBMIT_WRITE: u32 = 1 << 16;
    /// DRDMA_SUBMIT: use the PMB in bits 31:24 instead of the next free one.
    DRDMA_SUBMIT_PMB: u32 = 1 << 17;
    /// DRDMA_SUBMIT: shift of the owner doorbell page (6 bits; 0: the kernel's page).
    DRDMA_SUBMIT_OWNER_SHIFT: u32 = 18;
    /// DRDMA_SUBMIT_MASK: direction WRITE (bit 47 of the 8-byte value).
    DRDMA_MASK_WRITE: u64 = 1u64 << 47;
    /// DRDMA_MODE: every window access is trapped (faithful byte counting).
    DRDMA_MODE_TRAPPED: u32 = 0;
    /// DRDMA_MODE: the window is mmapped; range n is PMB n; commit byte counts through DRDMA_COMMIT.
    DRDMA_MODE_MAPPED: u32 = 1;
    /// DRDMA_LAST_ERROR: none.
    DRDMA_ERR_NONE: u32 = 0;
    /// DRDMA_LAST_ERROR: access to a free range or one past DRDMA_RANGES.
    DRDMA_ERR_UNALLOCATED: u32 = 1;
    /// DRDMA_LAST_ERROR: the ARR's valid bits or type do not allow the access.
    DRDMA_ERR_STATE: u32 = 2;
    /// DRDMA_LAST_ERROR: the access goes past the Total Transfer Length or the response in the PMB.
    DRDMA_ERR_PAST_LENGTH: u32 = 3;
    /// DRDMA_LAST_ERROR: a load waited DRDMA_LOAD_TIMEOUT_US for data that did not come.
    DRDMA_ERR_LOAD_TIMEOUT: u32 = 4;
    /// DRDMA_LAST_ERROR: submit on a busy ARR.
    DRDMA_ERR_BUSY: u32 = 5;
    /// DRDMA_LAST_ERROR: no dedicated PMB free (or the requested one is not free or not dedicated).
    DRDMA_ERR_NO_PMB: u32 = 6;
    /// DRDMA_LAST_ERROR: bad submit (ARR number, length 0 or above the range size) or commit.
    DRDMA_ERR_BAD_REQUEST: u32 = 7;
    /// DRDMA_LAST_ERROR: a commit on a trapped WRITE range declared bytes the transfer did not store (nothing is counted or sent).
    DRDMA_ERR_UNSTORED: u32 = 8;
    /// RKM_STATUS: operations whose keys a walk cleared have not all stopped yet.
    RKM_STATUS_BUSY: u32 = 1 << 0;
    /// RKM_STATUS: a walk ran and every operation it cleared has stopped (its NAK sent).
    RKM_STATUS_DONE: u32 = 1 << 1;
    /// Power-on RKM_READ_BUDGET.
    RKM_READ_BUDGET_DEFAULT: u32 = 64;
    /// Default DRDMA_LOAD_TIMEOUT_US.
    DRDMA_LOAD_TIMEOUT_DEFAULT_US: u32 = 200_000;
}

/// The register-interface version as read from VERSION.
pub const VERSION_VALUE: u32 = (VERSION_MAJOR << 16) | VERSION_MINOR;

/// Renders the C header for the guest driver from [`REGISTERS`] and [`VALUES`].
pub fn c_header() -> String {
    let mut s = String::new();
    s.push_str("/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */\n");
    s.push_str("/*\n * ibtca BAR0 register map.\n *\n");
    s.push_str(" * GENERATED from device/abi/src/regs.rs by `cargo run -p ibtca-device --bin\n");
    s.push_str(" * ibtca-regs-header`. Do not edit: a device unit test checks this file.\n */\n");
    s.push_str("#ifndef IBTCA_REGS_H\n#define IBTCA_REGS_H\n\n");
    for r in REGISTERS {
        s.push_str(&format!("/* {} ({}) */\n", r.doc.trim(), r.access));
        s.push_str(&format!(
            "#define IBTCA_REG_{:<24} 0x{:03x}\n",
            r.name, r.offset
        ));
    }
    s.push('\n');
    for v in VALUES {
        s.push_str(&format!("/* {} */\n", v.doc.trim()));
        s.push_str(&format!("#define IBTCA_{:<28} 0x{:x}\n", v.name, v.value));
    }
    s.push_str("\n#endif /* IBTCA_REGS_H */\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_are_aligned_unique_and_inside_bar() {
        let mut offs: Vec<u64> = REGISTERS.iter().map(|r| r.offset).collect();
        for r in REGISTERS {
            assert_eq!(r.offset % 4, 0, "{} misaligned", r.name);
            assert!(r.offset + 4 <= REGS_BAR_SIZE, "{} outside BAR0", r.name);
        }
        offs.sort_unstable();
        offs.dedup();
        assert_eq!(offs.len(), REGISTERS.len(), "duplicate register offsets");
    }

    #[test]
    fn committed_c_header_matches_generated() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../guest-driver/include/ibtca_regs.h"
        );
        let committed = std::fs::read_to_string(path).expect("guest-driver/include/ibtca_regs.h");
        assert!(
            committed == c_header(),
            "guest-driver/include/ibtca_regs.h is stale: run \
             `cargo run -p ibtca-device --bin ibtca-regs-header > guest-driver/include/ibtca_regs.h`"
        );
    }

    #[test]
    fn no_value_is_sign_extended() {
        // `values!` casts with `as u64`: an untyped `1 << 31` would become
        // 0xffffffff80000000 in the C headers.
        let abi = crate::verbs::ABI_VALUES;
        for v in VALUES.iter().chain(abi) {
            assert!(
                v.value < 1 << 48,
                "{} = {:#x} looks sign-extended",
                v.name,
                v.value
            );
        }
    }

    #[test]
    fn msix_table_and_pba_fit_their_bar() {
        let table_end = MSIX_TABLE_OFFSET + u64::from(MSIX_VECTORS) * 16;
        assert!(table_end <= MSIX_PBA_OFFSET);
        assert!(MSIX_PBA_OFFSET + u64::from(MSIX_VECTORS).div_ceil(64) * 8 <= MSIX_BAR_SIZE);
    }
}
