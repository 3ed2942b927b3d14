//! BAR0 behaviour: what reads and writes of the control/status registers do.
//! The map itself (offsets, values) is [`crate::regs`].
//!
//! Registers are 32-bit; an 8-byte access covers two consecutive registers
//! (low one first). Any other size or alignment is refused and counted in
//! ERROR_COUNT, as are writes to read-only or unknown offsets.

use std::sync::Arc;

use crate::dma::GuestMemory;
use crate::drdma::{Drdma, Wake, ALL_RANGES};
use crate::engine::{EngineEvent, PortState};
use crate::pci::msix::{Delivery, Msix};
use crate::regs;
use crate::verbs::datapath::Doorbell;
use crate::verbs::rkm_regs::RkmRegs;

/// What a BAR0 access needs from the rest of the device.
pub struct Bar0Context<'a> {
    /// Interrupts (IRQ_TEST).
    pub msix: &'a Msix,
    /// Guest memory (DMA self-test).
    pub mem: &'a GuestMemory,
    /// Bus Master Enable in the command register.
    pub bus_master: bool,
    /// At least one DMA map can be reached.
    pub dma_mapped: bool,
    /// The DRDMA window (its registers live in BAR0).
    pub drdma: &'a Drdma,
    /// The key memory's registers.
    pub rkm: &'a RkmRegs,
}

/// Outcome of a write that the caller must act on.
#[derive(Debug)]
pub enum WriteEffect {
    /// Nothing more to do.
    None,
    /// The guest asked for a device reset.
    Reset,
    /// Work for the engine (command queue, doorbells).
    Engine(EngineEvent),
}

/// The port's identity and state, as BAR0 shows them.
#[derive(Debug, Clone)]
pub struct PortIdentity {
    /// LID.
    pub lid: u16,
    /// Port GUID.
    pub guid: u64,
    /// Live state (the engine follows the link).
    pub state: Arc<PortState>,
}

impl Default for PortIdentity {
    fn default() -> Self {
        PortIdentity {
            lid: 0,
            guid: 0,
            state: PortState::new(regs::PORT_DOWN),
        }
    }
}

/// A refused BAR0 access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("BAR0 access of {len} bytes at {offset:#x} refused")]
pub struct Bar0Error {
    /// Offset in BAR0.
    pub offset: u64,
    /// Access length.
    pub len: usize,
}

/// Register state of BAR0.
#[derive(Debug, Default)]
pub struct Bar0 {
    port: PortIdentity,
    scratch: u32,
    irq_test_count: u32,
    error_count: u32,
    doorbells: u32,
    cmdq_base: u64,
    cmdq_log_size: u32,
    dma_addr: u64,
    dma_len: u32,
    dma_seed: u32,
    dma_status: u32,
    dma_result: u32,
}

/// FNV-1a 32-bit, the DMA self-test checksum.
pub fn fnv1a32(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

impl Bar0 {
    /// Power-on register state of a device with this port.
    pub fn new(port: PortIdentity) -> Self {
        // Event routing is register state: a reset returns it to power-on.
        port.state.set_vector(0);
        port.state.clear_cause(u32::MAX);
        Bar0 {
            port,
            ..Default::default()
        }
    }

    /// The port this BAR0 describes.
    pub fn port(&self) -> &PortIdentity {
        &self.port
    }

    /// Count of refused accesses so far.
    pub fn error_count(&self) -> u32 {
        self.error_count
    }

    /// Counts one trapped data-path doorbell (DOORBELLS): BAR0's, or one
    /// on a doorbell page, which the caller handles.
    pub fn count_doorbell(&mut self) {
        self.doorbells = self.doorbells.wrapping_add(1);
    }

    fn split(offset: u64, len: usize) -> Option<(u64, usize)> {
        let ok = matches!(len, 4 | 8) && offset.is_multiple_of(len as u64);
        (ok && offset + len as u64 <= regs::REGS_BAR_SIZE).then_some((offset, len / 4))
    }

    /// Reads `data.len()` bytes at `offset`.
    pub fn read(
        &mut self,
        offset: u64,
        data: &mut [u8],
        ctx: &Bar0Context,
    ) -> Result<(), Bar0Error> {
        let len = data.len();
        let Some((off, words)) = Self::split(offset, len) else {
            self.error_count = self.error_count.wrapping_add(1);
            data.fill(0xff);
            return Err(Bar0Error { offset, len });
        };
        for w in 0..words {
            let v = self.read32(off + 4 * w as u64, ctx);
            data[4 * w..4 * w + 4].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }

    fn read32(&self, off: u64, ctx: &Bar0Context) -> u32 {
        match off {
            regs::MAGIC => regs::MAGIC_VALUE,
            regs::VERSION => regs::VERSION_VALUE,
            regs::CAPS => {
                regs::CAP_MSIX
                    | regs::CAP_DMA_TEST
                    | regs::CAP_DRDMA
                    | regs::CAP_DB_PAGES
                    | regs::CAP_CQ_RECORD_ARM
                    | regs::CAP_CQ_MODERATION
            }
            regs::SCRATCH => self.scratch,
            regs::PORT_STATE => self.port.state.get(),
            regs::PORT_LID => u32::from(self.port.state.sm_lid().unwrap_or(self.port.lid)),
            regs::PORT_GUID_LO => self.port.guid as u32,
            regs::PORT_GUID_HI => (self.port.guid >> 32) as u32,
            regs::EVENT_VECTOR => self.port.state.vector(),
            regs::EVENT_CAUSE => self.port.state.cause(),
            regs::PORT_EVENTS => self.port.state.events(),
            regs::CMDQ_BASE_LO => self.cmdq_base as u32,
            regs::CMDQ_BASE_HI => (self.cmdq_base >> 32) as u32,
            regs::CMDQ_LOG_SIZE => self.cmdq_log_size,
            regs::NUM_VECTORS => ctx.msix.vectors(),
            regs::IRQ_TEST_COUNT => self.irq_test_count,
            regs::STATUS => {
                let mut s = regs::STATUS_READY;
                if ctx.dma_mapped {
                    s |= regs::STATUS_DMA_MAPPED;
                }
                s
            }
            regs::ERROR_COUNT => self.error_count,
            regs::DOORBELLS => self.doorbells,
            regs::TRAPS_SENT => self.port.state.traps().0,
            regs::TRAPS_REPRESSED => self.port.state.traps().1,
            regs::DMA_ADDR_LO => self.dma_addr as u32,
            regs::DMA_ADDR_HI => (self.dma_addr >> 32) as u32,
            regs::DMA_LEN => self.dma_len,
            regs::DMA_SEED => self.dma_seed,
            regs::DMA_STATUS => self.dma_status,
            regs::DMA_RESULT => self.dma_result,
            regs::RKM_STATUS => ctx.rkm.status(),
            regs::RKM_WALKS => ctx.rkm.walks(),
            regs::RKM_CLEARED => ctx.rkm.cleared(),
            regs::RKM_READ_BUDGET => ctx.rkm.read_budget(),
            regs::RKM_QUASI_MISMATCHES => ctx.rkm.quasi_mismatches(),
            _ => ctx.drdma.reg_read(off).unwrap_or(0),
        }
    }

    /// Writes `data` at `offset`.
    pub fn write(
        &mut self,
        offset: u64,
        data: &[u8],
        ctx: &Bar0Context,
    ) -> Result<WriteEffect, Bar0Error> {
        let len = data.len();
        let Some((off, words)) = Self::split(offset, len) else {
            self.error_count = self.error_count.wrapping_add(1);
            return Err(Bar0Error { offset, len });
        };
        if matches!(off, regs::DB_SQ | regs::DB_RQ | regs::DB_CQ | regs::DB_SRQ) {
            self.count_doorbell();
            // Doorbells are one 8-byte posted write, never two halves.
            let db = (words == 2)
                .then(|| u64::from_le_bytes(data.try_into().unwrap()))
                .and_then(|v| Doorbell::decode(off, v));
            return match db {
                Some(db) => Ok(WriteEffect::Engine(EngineEvent::Doorbell(db))),
                None => {
                    self.error_count = self.error_count.wrapping_add(1);
                    Err(Bar0Error { offset, len })
                }
            };
        }
        if off == regs::DRDMA_SUBMIT {
            // One 8-byte write: ARR, flags and PMB low, length high.
            if words != 2 {
                self.error_count = self.error_count.wrapping_add(1);
                return Err(Bar0Error { offset, len });
            }
            ctx.drdma
                .submit(u64::from_le_bytes(data.try_into().unwrap()));
            return Ok(WriteEffect::None);
        }
        if matches!(off, regs::DRDMA_SUBMIT_MASK | regs::DRDMA_COMMIT_MASK) {
            if words != 2 {
                self.error_count = self.error_count.wrapping_add(1);
                return Err(Bar0Error { offset, len });
            }
            let v = u64::from_le_bytes(data.try_into().unwrap());
            if off == regs::DRDMA_SUBMIT_MASK {
                ctx.drdma.submit_mask(v);
                return Ok(WriteEffect::None);
            }
            return Ok(match ctx.drdma.commit_mask(v).is_empty() {
                true => WriteEffect::None,
                false => WriteEffect::Engine(EngineEvent::DrdmaReady(ALL_RANGES)),
            });
        }
        let mut effect = WriteEffect::None;
        for w in 0..words {
            let v = u32::from_le_bytes(data[4 * w..4 * w + 4].try_into().unwrap());
            match self.write32(off + 4 * w as u64, v, ctx) {
                WriteEffect::None => {}
                e => effect = e,
            }
        }
        Ok(effect)
    }

    fn write32(&mut self, off: u64, v: u32, ctx: &Bar0Context) -> WriteEffect {
        match off {
            regs::RESET if v == regs::RESET_VALUE => return WriteEffect::Reset,
            regs::CMDQ_BASE_LO => {
                self.cmdq_base = (self.cmdq_base & !0xffff_ffff) | u64::from(v);
                return WriteEffect::Engine(EngineEvent::CmdqBaseLo(v));
            }
            regs::CMDQ_BASE_HI => {
                self.cmdq_base = (self.cmdq_base & 0xffff_ffff) | (u64::from(v) << 32);
                return WriteEffect::Engine(EngineEvent::CmdqBaseHi(v));
            }
            regs::CMDQ_LOG_SIZE => {
                self.cmdq_log_size = v;
                return WriteEffect::Engine(EngineEvent::CmdqLogSize(v));
            }
            regs::CMDQ_DB => return WriteEffect::Engine(EngineEvent::CmdqDoorbell(v)),
            regs::SCRATCH => self.scratch = v,
            regs::EVENT_VECTOR if v < ctx.msix.vectors() => self.port.state.set_vector(v),
            regs::EVENT_CAUSE => self.port.state.clear_cause(v),
            regs::IRQ_TEST => match ctx.msix.trigger(v) {
                Ok(d) => {
                    self.irq_test_count = self.irq_test_count.wrapping_add(1);
                    tracing::debug!(vector = v, delivery = ?d, "IRQ_TEST");
                    if d == Delivery::Dropped {
                        crate::guest_warn!(
                            vector = v,
                            "IRQ_TEST: MSI-X disabled or no eventfd; dropped"
                        );
                    }
                }
                Err(e) => {
                    crate::guest_warn!(error = %e, "IRQ_TEST");
                    self.error_count = self.error_count.wrapping_add(1);
                }
            },
            regs::DMA_ADDR_LO => self.dma_addr = (self.dma_addr & !0xffff_ffff) | u64::from(v),
            regs::DMA_ADDR_HI => {
                self.dma_addr = (self.dma_addr & 0xffff_ffff) | (u64::from(v) << 32)
            }
            regs::DMA_LEN => self.dma_len = v,
            regs::DMA_SEED => self.dma_seed = v,
            regs::DMA_CMD => self.dma_status = self.dma_command(v, ctx),
            regs::RKM_READ_BUDGET => {
                ctx.rkm.set_read_budget(v);
                return WriteEffect::Engine(EngineEvent::ReadBudget);
            }
            _ => match ctx.drdma.reg_write(off, v) {
                Some(Some(Wake::WriteReady(arr))) => {
                    return WriteEffect::Engine(EngineEvent::DrdmaReady(arr))
                }
                Some(Some(Wake::ReadDrained(qpn))) => {
                    return WriteEffect::Engine(EngineEvent::DrdmaDrained(qpn))
                }
                Some(None) => {}
                None => {
                    tracing::debug!(
                        offset = off,
                        value = v,
                        "write to a read-only or unknown register"
                    );
                    self.error_count = self.error_count.wrapping_add(1);
                }
            },
        }
        WriteEffect::None
    }

    fn dma_command(&mut self, cmd: u32, ctx: &Bar0Context) -> u32 {
        if self.dma_len == 0 || self.dma_len > regs::DMA_TEST_MAX {
            return regs::DMA_ST_INVALID;
        }
        if !ctx.bus_master {
            crate::guest_warn!("DMA self-test with Bus Master off: refused");
            return regs::DMA_ST_FAULT;
        }
        let mut buf = vec![0u8; self.dma_len as usize];
        let res = match cmd {
            regs::DMA_CMD_FILL => {
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = (self.dma_seed as usize).wrapping_add(i) as u8;
                }
                ctx.mem.write(self.dma_addr, &buf)
            }
            regs::DMA_CMD_SUM => ctx.mem.read(self.dma_addr, &mut buf).map(|()| {
                self.dma_result = fnv1a32(&buf);
            }),
            _ => return regs::DMA_ST_INVALID,
        };
        match res {
            Ok(()) => regs::DMA_ST_OK,
            Err(e) => {
                crate::guest_warn!(error = %e, "DMA self-test");
                regs::DMA_ST_FAULT
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::DmaMaps;
    use vmm_sys_util::tempfile::TempFile;

    struct Fixture {
        msix: Msix,
        maps: DmaMaps,
        bar: Bar0,
        drdma: std::sync::Arc<Drdma>,
        rkm: Arc<RkmRegs>,
    }

    impl Fixture {
        fn new() -> Self {
            let mut maps = DmaMaps::default();
            let f = TempFile::new().unwrap().into_file();
            f.set_len(0x10000).unwrap();
            maps.map(0x10000, 0x10000, Some(f), 0).unwrap();
            Fixture {
                msix: Msix::new(4),
                maps,
                bar: Bar0::new(PortIdentity::default()),
                drdma: Drdma::new(Default::default()).unwrap(),
                rkm: Arc::new(RkmRegs::default()),
            }
        }

        fn w(&mut self, off: u64, v: u32) -> WriteEffect {
            let mem = self.maps.guest_memory();
            let ctx = Bar0Context {
                msix: &self.msix,
                mem: &mem,
                bus_master: true,
                dma_mapped: true,
                drdma: &self.drdma,
                rkm: &self.rkm,
            };
            self.bar.write(off, &v.to_le_bytes(), &ctx).unwrap()
        }

        fn r(&mut self, off: u64) -> u32 {
            let mem = self.maps.guest_memory();
            let ctx = Bar0Context {
                msix: &self.msix,
                mem: &mem,
                bus_master: true,
                dma_mapped: true,
                drdma: &self.drdma,
                rkm: &self.rkm,
            };
            let mut b = [0; 4];
            self.bar.read(off, &mut b, &ctx).unwrap();
            u32::from_le_bytes(b)
        }
    }

    #[test]
    fn identity_and_scratch() {
        let mut f = Fixture::new();
        assert_eq!(f.r(regs::MAGIC), regs::MAGIC_VALUE);
        assert_eq!(f.r(regs::VERSION), 0x0001_0000);
        assert_eq!(f.r(regs::NUM_VECTORS), 4);
        f.w(regs::SCRATCH, 0xdead_beef);
        assert_eq!(f.r(regs::SCRATCH), 0xdead_beef);
        assert!(
            matches!(f.w(regs::RESET, 1), WriteEffect::None),
            "wrong reset value ignored"
        );
        assert!(matches!(
            f.w(regs::RESET, regs::RESET_VALUE),
            WriteEffect::Reset
        ));
    }

    #[test]
    fn rkm_registers_show_the_key_memory_and_take_the_read_budget() {
        let mut f = Fixture::new();
        assert_eq!(f.r(regs::RKM_STATUS), 0, "no walk yet");
        assert_eq!(f.r(regs::RKM_READ_BUDGET), regs::RKM_READ_BUDGET_DEFAULT);
        assert!(matches!(
            f.w(regs::RKM_READ_BUDGET, 0),
            WriteEffect::Engine(EngineEvent::ReadBudget)
        ));
        assert_eq!(f.r(regs::RKM_READ_BUDGET), 0);
        let mut keys = crate::verbs::keys::KeyMemory::new();
        keys.use_regs(f.rkm.clone()); // as the engine does
        keys.invalidate_walk(1, 2);
        assert_eq!(f.r(regs::RKM_STATUS), regs::RKM_STATUS_DONE);
        assert_eq!((f.r(regs::RKM_WALKS), f.r(regs::RKM_CLEARED)), (1, 0));
        let errors = f.bar.error_count();
        f.w(regs::RKM_WALKS, 5);
        assert_eq!(f.bar.error_count(), errors + 1, "read-only");
        assert_eq!(f.r(regs::RKM_WALKS), 1);
    }

    #[test]
    fn refused_accesses_are_counted() {
        let mut f = Fixture::new();
        let mem = f.maps.guest_memory();
        let ctx = Bar0Context {
            msix: &f.msix,
            mem: &mem,
            bus_master: true,
            dma_mapped: true,
            drdma: &f.drdma,
            rkm: &f.rkm,
        };
        let mut b2 = [0; 2];
        assert!(f.bar.read(regs::SCRATCH, &mut b2, &ctx).is_err());
        assert_eq!(b2, [0xff, 0xff]);
        assert!(f.bar.write(2, &[0; 4], &ctx).is_err());
        assert!(f.bar.write(regs::REGS_BAR_SIZE, &[0; 4], &ctx).is_err());
        f.w(regs::MAGIC, 0);
        assert_eq!(f.r(regs::ERROR_COUNT), 4);
        assert_eq!(f.r(regs::MAGIC), regs::MAGIC_VALUE);
    }

    #[test]
    fn dma_fill_sum_and_fault() {
        let mut f = Fixture::new();
        f.w(regs::DMA_ADDR_LO, 0x10100);
        f.w(regs::DMA_LEN, 300);
        f.w(regs::DMA_SEED, 0x5a);
        f.w(regs::DMA_CMD, regs::DMA_CMD_FILL);
        assert_eq!(f.r(regs::DMA_STATUS), regs::DMA_ST_OK);
        let mut got = vec![0u8; 300];
        f.maps.guest_memory().read(0x10100, &mut got).unwrap();
        let want: Vec<u8> = (0..300).map(|i| (0x5a + i) as u8).collect();
        assert_eq!(got, want);
        f.w(regs::DMA_CMD, regs::DMA_CMD_SUM);
        assert_eq!(f.r(regs::DMA_RESULT), fnv1a32(&want));
        f.w(regs::DMA_ADDR_LO, 0x1ff00); // runs past the end of the map
        f.w(regs::DMA_CMD, regs::DMA_CMD_FILL);
        assert_eq!(f.r(regs::DMA_STATUS), regs::DMA_ST_FAULT);
        f.w(regs::DMA_CMD, 77);
        assert_eq!(f.r(regs::DMA_STATUS), regs::DMA_ST_INVALID);
    }

    #[test]
    fn fnv_known_vectors() {
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }
}
