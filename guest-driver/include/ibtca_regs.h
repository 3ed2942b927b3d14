/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * ibtca BAR0 register map.
 *
 * GENERATED from device/abi/src/regs.rs by `cargo run -p ibtca-device --bin
 * ibtca-regs-header`. Do not edit: a device unit test checks this file.
 */
#ifndef IBTCA_REGS_H
#define IBTCA_REGS_H

/* Identifies the device: reads IBTCA_MAGIC_VALUE. (RO) */
#define IBTCA_REG_MAGIC                    0x000
/* Register-interface version: major in bits 31:16, minor in 15:0. (RO) */
#define IBTCA_REG_VERSION                  0x004
/* Capability bits (IBTCA_CAP_*). (RO) */
#define IBTCA_REG_CAPS                     0x008
/* Write IBTCA_RESET_VALUE to reset the device to its power-on state. (WO) */
#define IBTCA_REG_RESET                    0x00c
/* Free read/write register for driver round trips; reset clears it. (RW) */
#define IBTCA_REG_SCRATCH                  0x010
/* IB port state (IBTCA_PORT_*). (RO) */
#define IBTCA_REG_PORT_STATE               0x014
/* Number of MSI-X vectors the device implements. (RO) */
#define IBTCA_REG_NUM_VECTORS              0x018
/* Write a vector number to fire that MSI-X vector. (WO) */
#define IBTCA_REG_IRQ_TEST                 0x01c
/* Count of interrupts raised through IRQ_TEST since reset. (RO) */
#define IBTCA_REG_IRQ_TEST_COUNT           0x020
/* Device status bits (IBTCA_STATUS_*). (RO) */
#define IBTCA_REG_STATUS                   0x024
/* Count of rejected register accesses (bad size, offset or value). (RO) */
#define IBTCA_REG_ERROR_COUNT              0x028
/* DMA self-test: guest address, low 32 bits. (RW) */
#define IBTCA_REG_DMA_ADDR_LO              0x030
/* DMA self-test: guest address, high 32 bits. (RW) */
#define IBTCA_REG_DMA_ADDR_HI              0x034
/* DMA self-test: length in bytes (at most IBTCA_DMA_TEST_MAX). (RW) */
#define IBTCA_REG_DMA_LEN                  0x038
/* DMA self-test: pattern seed for FILL. (RW) */
#define IBTCA_REG_DMA_SEED                 0x03c
/* DMA self-test: write a command (IBTCA_DMA_CMD_*) to run it. (WO) */
#define IBTCA_REG_DMA_CMD                  0x040
/* DMA self-test: result code of the last command (IBTCA_DMA_ST_*). (RO) */
#define IBTCA_REG_DMA_STATUS               0x044
/* DMA self-test: FNV-1a 32 checksum of the bytes last read by SUM. (RO) */
#define IBTCA_REG_DMA_RESULT               0x048
/* Port LID (set by the device's configuration). (RO) */
#define IBTCA_REG_PORT_LID                 0x050
/* Port GUID, low 32 bits. (RO) */
#define IBTCA_REG_PORT_GUID_LO             0x054
/* Port GUID, high 32 bits. (RO) */
#define IBTCA_REG_PORT_GUID_HI             0x058
/* MSI-X vector of asynchronous events (port state changes); reset: 0. (RW) */
#define IBTCA_REG_EVENT_VECTOR             0x060
/* Pending asynchronous event causes (IBTCA_EVENT_*); write 1s to clear. (RW) */
#define IBTCA_REG_EVENT_CAUSE              0x064
/* Count of port state changes since the device started. (RO) */
#define IBTCA_REG_PORT_EVENTS              0x068
/* Command queue: guest-physical base, low 32 bits. (RW) */
#define IBTCA_REG_CMDQ_BASE_LO             0x080
/* Command queue: guest-physical base, high 32 bits. (RW) */
#define IBTCA_REG_CMDQ_BASE_HI             0x084
/* Command queue: log2 of the number of entries; writing it (re)starts the queue at index 0. (RW) */
#define IBTCA_REG_CMDQ_LOG_SIZE            0x088
/* Command queue doorbell: write the new producer index. (WO) */
#define IBTCA_REG_CMDQ_DB                  0x08c
/* Send-queue doorbell (8-byte write): QP number in bits 23:0, producer index in bits 63:32. (WO) */
#define IBTCA_REG_DB_SQ                    0x100
/* Receive-queue doorbell (8-byte write): QP number in bits 23:0, producer index in bits 63:32. (WO) */
#define IBTCA_REG_DB_RQ                    0x108
/* CQ doorbell (8-byte write): CQ number in bits 23:0, IBTCA_CQ_ARM_* in bits 31:24, consumer index in bits 63:32; an arm that a completion already written past that index satisfies fires at once. (WO) */
#define IBTCA_REG_DB_CQ                    0x110
/* DRDMA: index of the BAR holding the window (the seed's DBAR). (RO) */
#define IBTCA_REG_DRDMA_BAR                0x140
/* DRDMA: number of address ranges in the window (each has an ARR). (RO) */
#define IBTCA_REG_DRDMA_RANGES             0x144
/* DRDMA: bytes per address range (4096). (RO) */
#define IBTCA_REG_DRDMA_RANGE_SIZE         0x148
/* DRDMA: packet memory blocks in the device's pool. (RO) */
#define IBTCA_REG_DRDMA_PMBS               0x14c
/* DRDMA: PMBs dedicated to DRDMA (write while every ARR is free; at least 1, at most DRDMA_PMBS). (RW) */
#define IBTCA_REG_DRDMA_PMB_DEDICATED      0x150
/* DRDMA: count of refused window accesses and submits since reset. (RO) */
#define IBTCA_REG_DRDMA_ERRORS             0x154
/* DRDMA: last refusal: IBTCA_DRDMA_ERR_* in bits 7:0, ARR number in bits 23:8. (RO) */
#define IBTCA_REG_DRDMA_LAST_ERROR         0x158
/* DRDMA: how long a load waits for read-response data, in microseconds (then all-ones and IBTCA_DRDMA_ERR_LOAD_TIMEOUT). (RW) */
#define IBTCA_REG_DRDMA_LOAD_TIMEOUT_US    0x15c
/* DRDMA: window mode (IBTCA_DRDMA_MODE_*). (RO) */
#define IBTCA_REG_DRDMA_MODE               0x160
/* DRDMA commit (mapped window): ARR number in bits 15:0, bytes stored (WRITE) or loaded (READ) in bits 31:16. (WO) */
#define IBTCA_REG_DRDMA_COMMIT             0x164
/* DRDMA submit (8-byte write): ARR number in bits 15:0, IBTCA_DRDMA_SUBMIT_* flags, owner doorbell page in bits 23:18 (only QPs on that page may name the range in a direct SGE), PMB number in bits 31:24 (with IBTCA_DRDMA_SUBMIT_PMB), total transfer length in bits 63:32. (WO) */
#define IBTCA_REG_DRDMA_SUBMIT             0x168
/* DRDMA submit of many ranges (8-byte write): range mask in bits 31:0 (bit i = range base + i), length in bits 44:32, IBTCA_DRDMA_MASK_WRITE, base range in bits 63:48; device-chosen PMBs. (WO) */
#define IBTCA_REG_DRDMA_SUBMIT_MASK        0x170
/* DRDMA commit of many WRITE ranges (8-byte write): range mask in bits 31:0, base range in bits 63:48; each range counts its remaining bytes as stored (mapped window: one register write for many ranges). (WO) */
#define IBTCA_REG_DRDMA_COMMIT_MASK        0x178
/* Key memory (seed 001): IBTCA_RKM_STATUS_* of the invalidation walks. (RO) */
#define IBTCA_REG_RKM_STATUS               0x180
/* Key memory: invalidation walks run since reset (MW bind/dealloc, LOCAL_INV, SEND with Invalidate, DEREG_MR). (RO) */
#define IBTCA_REG_RKM_WALKS                0x184
/* Key memory: key slots of in-flight RDMA READs, atomics and WRITEs the walks cleared since reset. (RO) */
#define IBTCA_REG_RKM_CLEARED              0x188
/* RDMA READ response packets the engine sends per QP per turn (default IBTCA_RKM_READ_BUDGET_DEFAULT); 0 holds every response back (a test hook). (RW) */
#define IBTCA_REG_RKM_READ_BUDGET          0x18c
/* Key memory / quasi-WQE ring (seed 004): READs stopped since reset because the quasi-WQE read from guest memory differed from the responder's record (each ends its QP with NAK remote operational error). (RO) */
#define IBTCA_REG_RKM_QUASI_MISMATCHES     0x190
/* DRDMA release: ARR number in bits 15:0. Frees a busy range and its PMB (a transfer on it fails; a work request held for it completes in error), so a range its driver gave up on (submitted and never filled, or named by no work request) returns to the free list. The kernel writes it when the last mapping of a user context's range goes. (WO) */
#define IBTCA_REG_DRDMA_RELEASE            0x194
/* Shared-receive-queue doorbell (8-byte write): SRQ number in bits 23:0, producer index in bits 63:32. (WO) */
#define IBTCA_REG_DB_SRQ                   0x1b0
/* Trapped data-path doorbells received since reset (SQ, RQ, CQ and SRQ, in BAR0 and on the doorbell pages, well formed or not; wraps): what doorbell records save a driver. (RO) */
#define IBTCA_REG_DOORBELLS                0x1d0
/* Traps the port's agent sent to the subnet manager since the device started (trap 144 when the host changes the capability mask, first sends and repeats; wraps). (RO) */
#define IBTCA_REG_TRAPS_SENT               0x1e8
/* Of those traps, the ones the subnet manager repressed (SubnTrapRepress of their TID). (RO) */
#define IBTCA_REG_TRAPS_REPRESSED          0x1ec

/* PCI vendor ID: 0x1234, which QEMU's emulated-only devices use and the PCI ID database gives to no company. */
#define IBTCA_PCI_VENDOR_ID                0x1234
/* PCI device ID: none of QEMU's own devices takes it (they take 0x1111 and 0x11e8) and no in-tree Linux driver binds it. */
#define IBTCA_PCI_DEVICE_ID                0x7ca0
/* PCI class code: serial bus controller, InfiniBand (0x0c06), prog-if 0. */
#define IBTCA_PCI_CLASS_CODE               0xc0600
/* PCI revision. */
#define IBTCA_PCI_REVISION                 0x1
/* Index of the register BAR. */
#define IBTCA_REGS_BAR                     0x0
/* Size of the register BAR in bytes. */
#define IBTCA_REGS_BAR_SIZE                0x10000
/* Index of the BAR holding the MSI-X table and PBA. */
#define IBTCA_MSIX_BAR                     0x1
/* Size of the MSI-X BAR in bytes. */
#define IBTCA_MSIX_BAR_SIZE                0x1000
/* Offset of the MSI-X table in its BAR. */
#define IBTCA_MSIX_TABLE_OFFSET            0x0
/* Offset of the MSI-X pending-bit array in its BAR. */
#define IBTCA_MSIX_PBA_OFFSET              0x800
/* Number of MSI-X vectors. */
#define IBTCA_MSIX_VECTORS                 0x20
/* Value of the MAGIC register ("IBTC"). */
#define IBTCA_MAGIC_VALUE                  0x49425443
/* Register-interface major version. */
#define IBTCA_VERSION_MAJOR                0x1
/* Register-interface minor version. */
#define IBTCA_VERSION_MINOR                0x0
/* CAPS: MSI-X interrupts. */
#define IBTCA_CAP_MSIX                     0x1
/* CAPS: DMA self-test registers. */
#define IBTCA_CAP_DMA_TEST                 0x2
/* CAPS: Direct RDMA window and ARRs. */
#define IBTCA_CAP_DRDMA                    0x4
/* CAPS: the doorbell BAR (DB_BAR) with per-context doorbell pages. */
#define IBTCA_CAP_DB_PAGES                 0x8
/* CAPS: a CQ's doorbell record takes arm requests (`arm`), which the device reads after each completion it writes. */
#define IBTCA_CAP_CQ_RECORD_ARM            0x10
/* CAPS: CQ interrupt moderation (command MODIFY_CQ: a count and a period). */
#define IBTCA_CAP_CQ_MODERATION            0x20
/* Value to write to RESET. */
#define IBTCA_RESET_VALUE                  0x52455345
/* PORT_STATE: link down. */
#define IBTCA_PORT_DOWN                    0x1
/* PORT_STATE: link up, port initializing. */
#define IBTCA_PORT_INIT                    0x2
/* PORT_STATE: port armed. */
#define IBTCA_PORT_ARMED                   0x3
/* PORT_STATE: port active. */
#define IBTCA_PORT_ACTIVE                  0x4
/* EVENT_CAUSE: the port state changed (read PORT_STATE), or the SM changed the LID of an Active port (read PORT_LID). */
#define IBTCA_EVENT_PORT_CHANGE            0x1
/* EVENT_CAUSE: an armed SRQ fell below its limit (QUERY_SRQ's limit_events say which: each SRQ that fired counts one more, its limit back to 0). */
#define IBTCA_EVENT_SRQ_LIMIT              0x2
/* EVENT_CAUSE: the SM changed the port's P_Key table (read it with SMA_MAD Gets of P_KeyTable; the guest's IB_EVENT_PKEY_CHANGE). */
#define IBTCA_EVENT_PKEY_CHANGE            0x4
/* STATUS: the device is ready. */
#define IBTCA_STATUS_READY                 0x1
/* STATUS: guest memory is mapped (at least one DMA region). */
#define IBTCA_STATUS_DMA_MAPPED            0x2
/* DMA_CMD: fill the buffer with the pattern byte(i) = seed + i. */
#define IBTCA_DMA_CMD_FILL                 0x1
/* DMA_CMD: read the buffer and store its FNV-1a 32 checksum in DMA_RESULT. */
#define IBTCA_DMA_CMD_SUM                  0x2
/* DMA_STATUS: success. */
#define IBTCA_DMA_ST_OK                    0x0
/* DMA_STATUS: the range is not inside mapped guest memory. */
#define IBTCA_DMA_ST_FAULT                 0x1
/* DMA_STATUS: unknown command or bad length. */
#define IBTCA_DMA_ST_INVALID               0x2
/* Largest DMA self-test length in bytes. */
#define IBTCA_DMA_TEST_MAX                 0x100000
/* Index of the DRDMA window BAR. */
#define IBTCA_DRDMA_WINDOW_BAR             0x2
/* Index of the doorbell BAR: DB_PAGES pages of DB_PAGE_SIZE bytes, page k holding the SQ, RQ and CQ doorbells of the QPs and CQs created with db_page k (trapped, never backed by memory; a guest maps page k > 0 into one user context, page 0 is the kernel's, as are BAR0's DB_SQ/DB_RQ/DB_CQ). */
#define IBTCA_DB_BAR                       0x4
/* Doorbell pages in the doorbell BAR. */
#define IBTCA_DB_PAGES                     0x40
/* Bytes per doorbell page. */
#define IBTCA_DB_PAGE_SIZE                 0x1000
/* Offset in a doorbell page of its send-queue doorbell (8-byte write, as DB_SQ). */
#define IBTCA_DB_PAGE_SQ                   0x0
/* Offset in a doorbell page of its receive-queue doorbell (8-byte write, as DB_RQ). */
#define IBTCA_DB_PAGE_RQ                   0x8
/* Offset in a doorbell page of its CQ doorbell (8-byte write, as DB_CQ). */
#define IBTCA_DB_PAGE_CQ                   0x10
/* Offset in a doorbell page of its shared-receive-queue doorbell (8-byte write, as DB_SRQ). */
#define IBTCA_DB_PAGE_SRQ                  0x18
/* Offset of ARR 0 in BAR0; ARR n is at DRDMA_ARR_BASE + n * DRDMA_ARR_STRIDE. */
#define IBTCA_DRDMA_ARR_BASE               0x1000
/* Bytes between consecutive ARRs. */
#define IBTCA_DRDMA_ARR_STRIDE             0x20
/* Most address ranges a window can have. */
#define IBTCA_DRDMA_MAX_RANGES             0x100
/* ARR field (RO): IBTCA_ARR_* state bits, PMB number in bits 15:8. */
#define IBTCA_ARR_CTRL                     0x0
/* ARR field (RO): Total Transfer Length in bytes. */
#define IBTCA_ARR_TTL                      0x4
/* ARR field (RO): Write Byte Count (bytes stored so far). */
#define IBTCA_ARR_WBC                      0x8
/* ARR field (RO): Read Response Payload Length of the response in the PMB. */
#define IBTCA_ARR_RRPL                     0xc
/* ARR field (RO): offset in the range of the response in the PMB. */
#define IBTCA_ARR_RESP_OFFSET              0x10
/* ARR field (RO): bytes of that response loaded so far. */
#define IBTCA_ARR_DRAINED                  0x14
/* ARR_CTRL: PCI Valid (the bus side may access the range). */
#define IBTCA_ARR_PCI_VALID                0x1
/* ARR_CTRL: BR Valid (the bus router owns the PMB: sending, or awaiting a response). */
#define IBTCA_ARR_BR_VALID                 0x2
/* ARR_CTRL: Type: 1 = DRDMA WRITE, 0 = DRDMA READ. */
#define IBTCA_ARR_TYPE_WRITE               0x4
/* ARR_CTRL: the range is allocated (submitted and not yet finished). */
#define IBTCA_ARR_BUSY                     0x8
/* ARR_CTRL: the last transfer on this range failed (cleared by the next submit). */
#define IBTCA_ARR_FAILED                   0x10
/* Shift of the PMB number in ARR_CTRL. */
#define IBTCA_ARR_PMB_SHIFT                0x8
/* DRDMA_SUBMIT: direction WRITE (PCI to IB); clear for READ. */
#define IBTCA_DRDMA_SUBMIT_WRITE           0x10000
/* DRDMA_SUBMIT: use the PMB in bits 31:24 instead of the next free one. */
#define IBTCA_DRDMA_SUBMIT_PMB             0x20000
/* DRDMA_SUBMIT: shift of the owner doorbell page (6 bits; 0: the kernel's page). */
#define IBTCA_DRDMA_SUBMIT_OWNER_SHIFT     0x12
/* DRDMA_SUBMIT_MASK: direction WRITE (bit 47 of the 8-byte value). */
#define IBTCA_DRDMA_MASK_WRITE             0x800000000000
/* DRDMA_MODE: every window access is trapped (faithful byte counting). */
#define IBTCA_DRDMA_MODE_TRAPPED           0x0
/* DRDMA_MODE: the window is mmapped; range n is PMB n; commit byte counts through DRDMA_COMMIT. */
#define IBTCA_DRDMA_MODE_MAPPED            0x1
/* DRDMA_LAST_ERROR: none. */
#define IBTCA_DRDMA_ERR_NONE               0x0
/* DRDMA_LAST_ERROR: access to a free range or one past DRDMA_RANGES. */
#define IBTCA_DRDMA_ERR_UNALLOCATED        0x1
/* DRDMA_LAST_ERROR: the ARR's valid bits or type do not allow the access. */
#define IBTCA_DRDMA_ERR_STATE              0x2
/* DRDMA_LAST_ERROR: the access goes past the Total Transfer Length or the response in the PMB. */
#define IBTCA_DRDMA_ERR_PAST_LENGTH        0x3
/* DRDMA_LAST_ERROR: a load waited DRDMA_LOAD_TIMEOUT_US for data that did not come. */
#define IBTCA_DRDMA_ERR_LOAD_TIMEOUT       0x4
/* DRDMA_LAST_ERROR: submit on a busy ARR. */
#define IBTCA_DRDMA_ERR_BUSY               0x5
/* DRDMA_LAST_ERROR: no dedicated PMB free (or the requested one is not free or not dedicated). */
#define IBTCA_DRDMA_ERR_NO_PMB             0x6
/* DRDMA_LAST_ERROR: bad submit (ARR number, length 0 or above the range size) or commit. */
#define IBTCA_DRDMA_ERR_BAD_REQUEST        0x7
/* DRDMA_LAST_ERROR: a commit on a trapped WRITE range declared bytes the transfer did not store (nothing is counted or sent). */
#define IBTCA_DRDMA_ERR_UNSTORED           0x8
/* RKM_STATUS: operations whose keys a walk cleared have not all stopped yet. */
#define IBTCA_RKM_STATUS_BUSY              0x1
/* RKM_STATUS: a walk ran and every operation it cleared has stopped (its NAK sent). */
#define IBTCA_RKM_STATUS_DONE              0x2
/* Power-on RKM_READ_BUDGET. */
#define IBTCA_RKM_READ_BUDGET_DEFAULT      0x40
/* Default DRDMA_LOAD_TIMEOUT_US. */
#define IBTCA_DRDMA_LOAD_TIMEOUT_DEFAULT_US 0x30d40

#endif /* IBTCA_REGS_H */
