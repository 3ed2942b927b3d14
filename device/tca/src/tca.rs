//! The ibtca PCI function: configuration space, BAR0 registers, the MSI-X
//! BAR and the client's DMA maps, behind the vfio-user [`Backend`] trait.
//!
//! | vfio region | what | size |
//! |---|---|---|
//! | 0 (BAR0) | control/status registers ([`crate::regs`]) | 64 KiB |
//! | 1 (BAR1) | MSI-X table at 0, PBA at 0x800 | 4 KiB |
//! | 2 (BAR2) | DRDMA window ([`crate::drdma`]): ranges of 4 KiB | 128 KiB |
//! | 4 (BAR4) | doorbell pages (`regs::DB_BAR`): SQ/RQ/CQ doorbells per page, trapped | 256 KiB |
//! | 3, 5, 6 (ROM), 8 (VGA) | absent | 0 |
//! | 7 | configuration space | 4 KiB |
//!
//! IRQ indexes: INTx 0 vectors (interrupt pin 0), MSI 0, MSI-X 32, ERR 1
//! (accepted, never signalled), REQ 0.
//!
//! QEMU shadows the MSI-X table (it emulates it and never forwards table
//! accesses), so our copy of the table starts with every vector unmasked: a
//! client that never writes the table still gets interrupts, and one that does
//! gets PCI masking. Reads of the PBA are forwarded and answered here.

use std::fs::File;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use vfio_bindings::bindings::vfio;
use vmm_sys_util::eventfd::EventFd;

use crate::bar0::{Bar0, Bar0Context, PortIdentity, WriteEffect};
use crate::dma::{DmaError, DmaMaps, GuestMemory};
use crate::drdma::{Drdma, DrdmaConfig};
use crate::engine::{EngineEvent, EngineHandle};
use crate::pci::config::{self, BarSpec, ConfigSpace};
use crate::pci::msix::Msix;
use crate::pci::PciError;
use crate::regs;
use crate::verbs::datapath::Doorbell;
use crate::verbs::rkm_regs::RkmRegs;
use crate::vfio_user::wire::{self, DeviceInfo, IrqInfo, RegionInfo, SetIrqs};
use crate::vfio_user::{Backend, Errno, RegionMmap};

/// vfio PCI region index of the configuration space.
pub const CONFIG_REGION: u32 = vfio::VFIO_PCI_CONFIG_REGION_INDEX;
/// Number of vfio regions (BAR0-5, ROM, config, VGA).
pub const NUM_REGIONS: u32 = vfio::VFIO_PCI_NUM_REGIONS;
/// vfio PCI IRQ index of MSI-X.
pub const MSIX_IRQ_INDEX: u32 = vfio::VFIO_PCI_MSIX_IRQ_INDEX;
/// vfio PCI IRQ index of the error interrupt.
pub const ERR_IRQ_INDEX: u32 = vfio::VFIO_PCI_ERR_IRQ_INDEX;
/// Number of IRQ indexes (INTx, MSI, MSI-X, ERR, REQ).
pub const NUM_IRQS: u32 = vfio::VFIO_PCI_NUM_IRQS;

impl From<PciError> for Errno {
    fn from(e: PciError) -> Self {
        Errno::inval(e.to_string())
    }
}

// What the VERSION reply offers is what the maps enforce.
const _: () = assert!(crate::dma::MAX_DMA_MAPS == wire::MAX_DMA_MAPS);

impl From<DmaError> for Errno {
    fn from(e: DmaError) -> Self {
        let errno = match e {
            DmaError::Overlap { .. } => libc::EEXIST,
            DmaError::TooMany => libc::ENOSPC,
            DmaError::Truncated { .. } => libc::EFAULT,
            DmaError::InvalidRange { .. }
            | DmaError::OutOfBounds { .. }
            | DmaError::Mmap { .. } => libc::EINVAL,
        };
        Errno::new(errno, e.to_string())
    }
}

fn bars(window_size: u64) -> [BarSpec; 6] {
    let mut b = [BarSpec { size: 0 }; 6];
    b[regs::REGS_BAR as usize].size = regs::REGS_BAR_SIZE;
    b[regs::MSIX_BAR as usize].size = regs::MSIX_BAR_SIZE;
    b[regs::DRDMA_WINDOW_BAR as usize].size = window_size;
    b[regs::DB_BAR as usize].size = u64::from(regs::DB_PAGES) * regs::DB_PAGE_SIZE;
    b
}

/// How long a client's departure waits for the engine to drop every
/// object before the client's memory goes (the engine never blocks for
/// long: this is a bound, not a delay).
const ENGINE_RESET_WAIT: Duration = Duration::from_secs(5);

/// The device instance.
pub struct Tca {
    config: ConfigSpace,
    msix: Arc<Msix>,
    dma: DmaMaps,
    mem: GuestMemory,
    bar0: Bar0,
    err_eventfd: Option<EventFd>,
    engine: Option<EngineHandle>,
    drdma: Arc<Drdma>,
    rkm: Arc<RkmRegs>,
}

impl Default for Tca {
    fn default() -> Self {
        Self::new()
    }
}

impl Tca {
    /// A device in its power-on state, with no client and no engine (the
    /// foundation registers only).
    pub fn new() -> Self {
        Self::with_port(PortIdentity::default())
    }

    /// A device showing `port` in BAR0, with the default DRDMA window.
    pub fn with_port(port: PortIdentity) -> Self {
        let drdma = Drdma::new(DrdmaConfig::default()).expect("DRDMA packet memory");
        Self::with_parts(port, drdma)
    }

    /// A device showing `port` in BAR0 and `drdma` as its window BAR.
    pub fn with_parts(port: PortIdentity, drdma: Arc<Drdma>) -> Self {
        let dma = DmaMaps::default();
        let msix = Arc::new(Msix::new(regs::MSIX_VECTORS));
        unmask_all(&msix);
        Tca {
            config: ConfigSpace::new(bars(drdma.bar_size()), regs::MSIX_VECTORS),
            mem: dma.guest_memory(),
            dma,
            msix,
            bar0: Bar0::new(port),
            err_eventfd: None,
            engine: None,
            drdma,
            rkm: Arc::new(RkmRegs::default()),
        }
    }

    /// The key memory's BAR0 registers (shared with the engine).
    pub fn rkm(&self) -> &Arc<RkmRegs> {
        &self.rkm
    }

    /// The DRDMA window (shared with the engine).
    pub fn drdma(&self) -> &Arc<Drdma> {
        &self.drdma
    }

    /// Gives command-queue and doorbell work to `engine`: run on this
    /// thread when the engine is idle, else queued for the engine thread.
    pub fn set_engine(&mut self, engine: EngineHandle) {
        self.engine = Some(engine);
    }

    fn to_engine(&self, ev: EngineEvent) {
        match &self.engine {
            Some(engine) => {
                if engine.run_or_send(ev).is_err() {
                    tracing::warn!("engine stopped; dropping work");
                }
            }
            None => tracing::debug!(?ev, "no engine: verbs registers ignored"),
        }
    }

    /// The interrupt block (shared with threads that raise interrupts).
    pub fn msix(&self) -> &Arc<Msix> {
        &self.msix
    }

    /// A handle for DMA into the client's memory.
    pub fn guest_memory(&self) -> GuestMemory {
        self.mem.clone()
    }

    fn function_reset(&mut self) {
        self.config = ConfigSpace::new(bars(self.drdma.bar_size()), regs::MSIX_VECTORS);
        self.drdma.reset();
        self.msix.reset();
        unmask_all(&self.msix);
        self.bar0 = Bar0::new(self.bar0.port().clone());
        self.to_engine(EngineEvent::Reset(None));
    }

    /// Makes the engine forget every object and waits (at most
    /// [`ENGINE_RESET_WAIT`]) until it has.
    fn reset_engine_and_wait(&self) {
        let Some(engine) = &self.engine else {
            return;
        };
        let (done, finished) = mpsc::channel();
        if engine.run_or_send(EngineEvent::Reset(Some(done))).is_err() {
            return; // the engine has stopped: nothing uses the maps
        }
        if finished.recv_timeout(ENGINE_RESET_WAIT).is_err() {
            tracing::warn!(
                "the engine did not confirm its reset within {ENGINE_RESET_WAIT:?}; \
                 letting the client's memory go anyway"
            );
        }
    }

    fn check_region(&self, region: u32, offset: u64, len: usize) -> Result<(), Errno> {
        let info = self.region_info(region)?;
        if info.size == 0 {
            return Err(Errno::inval(format!("region {region} is not implemented")));
        }
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > info.size)
        {
            return Err(Errno::inval(format!(
                "access of {len} bytes at {offset:#x} is outside region {region} ({:#x} bytes)",
                info.size
            )));
        }
        Ok(())
    }
}

fn unmask_all(msix: &Msix) {
    for v in 0..u64::from(regs::MSIX_VECTORS) {
        let _ = msix.bar_write(regs::MSIX_TABLE_OFFSET + v * 16 + 12, &0u32.to_le_bytes());
    }
}

/// The client's descriptors as eventfds, or `EINVAL` naming the first one
/// that is no eventfd (nothing is taken then).
fn eventfds_from(fds: Vec<File>) -> Result<Vec<EventFd>, Errno> {
    fds.into_iter()
        .enumerate()
        .map(|(i, f)| {
            crate::client_fd::eventfd(f).map_err(|e| Errno::inval(format!("SET_IRQS: fd {i}: {e}")))
        })
        .collect()
}

impl Backend for Tca {
    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            flags: wire::DEVICE_FLAGS_PCI | wire::DEVICE_FLAGS_RESET,
            num_regions: NUM_REGIONS,
            num_irqs: NUM_IRQS,
        }
    }

    fn region_info(&self, index: u32) -> Result<RegionInfo, Errno> {
        let rw = wire::REGION_FLAG_READ | wire::REGION_FLAG_WRITE;
        let (size, flags) = match index {
            0..=5 => match self.config.bars()[index as usize].size {
                0 => (0, 0),
                s => (s, rw),
            },
            6 | 8 => (0, 0),
            CONFIG_REGION => (config::CONFIG_SPACE_SIZE as u64, rw),
            _ => return Err(Errno::inval(format!("no region {index}"))),
        };
        Ok(RegionInfo {
            flags,
            index,
            size,
            ..Default::default()
        })
    }

    fn irq_info(&self, index: u32) -> Result<IrqInfo, Errno> {
        let (flags, count) = match index {
            0 | 1 | 4 => (wire::IRQ_INFO_EVENTFD, 0),
            MSIX_IRQ_INDEX => (
                wire::IRQ_INFO_EVENTFD | wire::IRQ_INFO_MASKABLE,
                self.msix.vectors(),
            ),
            ERR_IRQ_INDEX => (wire::IRQ_INFO_EVENTFD, 1),
            _ => return Err(Errno::inval(format!("no IRQ index {index}"))),
        };
        Ok(IrqInfo {
            flags,
            index,
            count,
            ..Default::default()
        })
    }

    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> Result<(), Errno> {
        self.check_region(region, offset, data.len())?;
        match region {
            CONFIG_REGION => Ok(self.config.read(offset, data)?),
            r if r == regs::REGS_BAR => {
                let ctx = Bar0Context {
                    msix: &self.msix,
                    mem: &self.mem,
                    bus_master: self.config.bus_master(),
                    dma_mapped: self.dma.has_accessible(),
                    drdma: &self.drdma,
                    rkm: &self.rkm,
                };
                self.bar0
                    .read(offset, data, &ctx)
                    .map_err(|e| Errno::inval(e.to_string()))
            }
            r if r == regs::MSIX_BAR => Ok(self.msix.bar_read(offset, data)?),
            r if r == regs::DRDMA_WINDOW_BAR => {
                if let Some(qpn) = self.drdma.load(offset, data) {
                    self.to_engine(EngineEvent::DrdmaDrained(qpn));
                }
                Ok(())
            }
            r if r == regs::DB_BAR => {
                data.fill(0); // write-only doorbells
                Ok(())
            }
            _ => unreachable!("check_region admits only implemented regions"),
        }
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> Result<(), Errno> {
        self.check_region(region, offset, data.len())?;
        match region {
            CONFIG_REGION => {
                self.config.write(offset, data)?;
                let ctrl = self.config.msix_control();
                self.msix.set_control(
                    ctrl & config::MSIX_CTRL_ENABLE != 0,
                    ctrl & config::MSIX_CTRL_MASKALL != 0,
                );
                Ok(())
            }
            r if r == regs::REGS_BAR => {
                let ctx = Bar0Context {
                    msix: &self.msix,
                    mem: &self.mem,
                    bus_master: self.config.bus_master(),
                    dma_mapped: self.dma.has_accessible(),
                    drdma: &self.drdma,
                    rkm: &self.rkm,
                };
                match self
                    .bar0
                    .write(offset, data, &ctx)
                    .map_err(|e| Errno::inval(e.to_string()))?
                {
                    WriteEffect::Reset => {
                        tracing::info!("device reset by the driver");
                        self.bar0 = Bar0::new(self.bar0.port().clone());
                        self.drdma.reset();
                        self.to_engine(EngineEvent::Reset(None));
                    }
                    WriteEffect::Engine(ev) => self.to_engine(ev),
                    WriteEffect::None => {}
                }
                Ok(())
            }
            r if r == regs::MSIX_BAR => Ok(self.msix.bar_write(offset, data)?),
            r if r == regs::DRDMA_WINDOW_BAR => {
                if let Some(arr) = self.drdma.store(offset, data) {
                    self.to_engine(EngineEvent::DrdmaReady(arr));
                }
                Ok(())
            }
            r if r == regs::DB_BAR => {
                self.bar0.count_doorbell();
                match Doorbell::decode_page(offset, data) {
                    Some((page, db)) => {
                        self.to_engine(EngineEvent::PageDoorbell(page, db));
                        Ok(())
                    }
                    None => Err(Errno::inval(format!(
                        "doorbell BAR: {} bytes at {offset:#x} is no doorbell",
                        data.len()
                    ))),
                }
            }
            _ => unreachable!("check_region admits only implemented regions"),
        }
    }

    fn dma_map(&mut self, map: &wire::DmaMap, fd: Option<File>) -> Result<(), Errno> {
        // Read-only maps (ROM) are never a DMA target of this device: record
        // them without a mapping rather than risk a write to them.
        let fd = fd.filter(|_| map.flags & wire::DMA_MAP_FLAG_WRITE != 0);
        tracing::debug!(
            iova = map.address,
            size = map.size,
            has_fd = fd.is_some(),
            "DMA_MAP"
        );
        Ok(self.dma.map(map.address, map.size, fd, map.offset)?)
    }

    fn dma_unmap(&mut self, unmap: &wire::DmaUnmap) -> Result<(), Errno> {
        if unmap.flags & wire::DMA_UNMAP_FLAG_GET_DIRTY_BITMAP != 0 {
            return Err(Errno::new(
                libc::ENOTSUP,
                "dirty page tracking is not supported",
            ));
        }
        if unmap.flags & wire::DMA_UNMAP_FLAG_ALL != 0 {
            if unmap.address != 0 || unmap.size != 0 {
                return Err(Errno::inval("DMA_UNMAP ALL with an address or size"));
            }
            self.dma.clear();
            return Ok(());
        }
        if unmap.flags != 0 {
            return Err(Errno::inval(format!("DMA_UNMAP flags {:#x}", unmap.flags)));
        }
        let n = self.dma.unmap(unmap.address, unmap.size)?;
        tracing::debug!(
            iova = unmap.address,
            size = unmap.size,
            unmapped = n,
            "DMA_UNMAP"
        );
        Ok(())
    }

    fn set_irqs(&mut self, req: &SetIrqs, fds: Vec<File>) -> Result<(), Errno> {
        use wire::*;
        let data = req.flags & (IRQ_SET_DATA_NONE | IRQ_SET_DATA_BOOL | IRQ_SET_DATA_EVENTFD);
        let action =
            req.flags & (IRQ_SET_ACTION_MASK | IRQ_SET_ACTION_UNMASK | IRQ_SET_ACTION_TRIGGER);
        if !data.is_power_of_two() || !action.is_power_of_two() || req.flags & !0x3f != 0 {
            return Err(Errno::inval(format!("SET_IRQS flags {:#x}", req.flags)));
        }
        let info = self.irq_info(req.index)?;
        let end = u64::from(req.start) + u64::from(req.count);
        let disable_all =
            data == IRQ_SET_DATA_NONE && action == IRQ_SET_ACTION_TRIGGER && req.count == 0;
        if !disable_all && end > u64::from(info.count) {
            return Err(Errno::inval(format!(
                "SET_IRQS vectors {}+{} on index {} with {} vectors",
                req.start, req.count, req.index, info.count
            )));
        }
        let expect_data = if data == IRQ_SET_DATA_BOOL {
            req.count as usize
        } else {
            0
        };
        if req.data.len() != expect_data {
            return Err(Errno::inval(format!(
                "SET_IRQS carries {} data bytes",
                req.data.len()
            )));
        }
        if data != IRQ_SET_DATA_EVENTFD && !fds.is_empty() {
            return Err(Errno::inval("SET_IRQS: fds without DATA_EVENTFD"));
        }
        match req.index {
            MSIX_IRQ_INDEX => self.set_msix(req, data, action, fds, disable_all),
            ERR_IRQ_INDEX => {
                if data == IRQ_SET_DATA_EVENTFD && action == IRQ_SET_ACTION_TRIGGER {
                    if fds.len() > 1 {
                        return Err(Errno::inval("SET_IRQS ERR: more than one fd"));
                    }
                    self.err_eventfd = eventfds_from(fds)?.pop();
                } else if disable_all {
                    self.err_eventfd = None;
                }
                Ok(())
            }
            _ => Ok(()), // count 0: only "disable all" gets here
        }
    }

    fn reset(&mut self) -> Result<(), Errno> {
        tracing::info!("device reset by the client");
        self.function_reset();
        Ok(())
    }

    fn region_mmap(&self, index: u32) -> Option<RegionMmap> {
        let cfg = self.drdma.config();
        (index == regs::DRDMA_WINDOW_BAR && cfg.mapped).then(|| RegionMmap {
            file: self.drdma.pool_file(),
            // Range n is PMB n: page n of the pool's payload file.
            areas: vec![(
                0,
                u64::from(cfg.ranges) * u64::from(crate::drdma::decode::RANGE_SIZE),
            )],
        })
    }

    /// The client went away (a QEMU that quit or was killed takes its
    /// guest with it): every object goes first, then the client's memory.
    /// In the other order a peer's packets could still meet a QP whose
    /// memory is gone and be refused with a NAK (remote operational
    /// error) instead of finding no QP and being dropped, as for a QP
    /// that does not exist (IBA vol 1 9.6): the peer's requester then
    /// learns of it by its ACK timer (WC_RETRY_EXC_ERR), whatever the
    /// timing. The DRDMA window's PMBs move to a new file: the client that
    /// went may still map the old one.
    fn disconnected(&mut self) {
        self.reset_engine_and_wait();
        self.dma.clear();
        self.msix.clear_eventfds();
        self.err_eventfd = None;
        self.drdma.next_client();
        self.function_reset();
    }
}

impl Tca {
    fn set_msix(
        &mut self,
        req: &SetIrqs,
        data: u32,
        action: u32,
        fds: Vec<File>,
        disable_all: bool,
    ) -> Result<(), Errno> {
        use wire::*;
        let msix = &self.msix;
        if disable_all {
            return Ok(msix.remove_eventfds(0, msix.vectors())?);
        }
        match (data, action) {
            (IRQ_SET_DATA_EVENTFD, IRQ_SET_ACTION_TRIGGER) => {
                if fds.is_empty() {
                    Ok(msix.remove_eventfds(req.start, req.count)?)
                } else if fds.len() == req.count as usize {
                    Ok(msix.set_eventfds(req.start, eventfds_from(fds)?)?)
                } else {
                    Err(Errno::inval(format!(
                        "SET_IRQS: {} fds for {} vectors",
                        fds.len(),
                        req.count
                    )))
                }
            }
            (IRQ_SET_DATA_NONE, IRQ_SET_ACTION_TRIGGER) => {
                Ok(msix.client_trigger(req.start, req.count)?)
            }
            (IRQ_SET_DATA_NONE, IRQ_SET_ACTION_MASK) => {
                Ok(msix.client_mask(req.start, req.count, true)?)
            }
            (IRQ_SET_DATA_NONE, IRQ_SET_ACTION_UNMASK) => {
                Ok(msix.client_mask(req.start, req.count, false)?)
            }
            (IRQ_SET_DATA_BOOL, _) => {
                for (i, &b) in req.data.iter().enumerate() {
                    if b == 0 {
                        continue;
                    }
                    let v = req.start + i as u32;
                    match action {
                        IRQ_SET_ACTION_TRIGGER => msix.client_trigger(v, 1)?,
                        IRQ_SET_ACTION_MASK => msix.client_mask(v, 1, true)?,
                        _ => msix.client_mask(v, 1, false)?,
                    }
                }
                Ok(())
            }
            _ => Err(Errno::inval(format!(
                "SET_IRQS flags {:#x} on MSI-X",
                req.flags
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAM: u64 = 0x1000_0000;

    /// A client that goes away: the engine is told to forget every object
    /// while the client's memory is still mapped, and the memory goes only
    /// once the engine has done so.
    #[test]
    fn a_departing_clients_objects_go_before_its_memory() {
        let mut tca = Tca::new();
        let (engine, rx) = EngineHandle::channel();
        tca.set_engine(engine);
        let file = crate::memfd::create("ram", 1 << 20).unwrap();
        let map = wire::DmaMap {
            argsz: 32,
            flags: wire::DMA_MAP_FLAG_READ | wire::DMA_MAP_FLAG_WRITE,
            offset: 0,
            address: RAM,
            size: 1 << 20,
        };
        tca.dma_map(&map, Some(file)).unwrap();
        let mem = tca.guest_memory();
        let mapped = |mem: &GuestMemory| mem.read(RAM, &mut [0; 8]).is_ok();
        assert!(mapped(&mem));
        std::thread::scope(|s| {
            let mem = &mem;
            let engine = s.spawn(move || {
                let ev = rx.recv().unwrap();
                let at_reset = mapped(mem);
                match ev {
                    EngineEvent::Reset(Some(done)) => done.send(()).unwrap(),
                    other => panic!("first event {other:?}, not a reset to confirm"),
                }
                at_reset
            });
            tca.disconnected();
            assert!(
                engine.join().unwrap(),
                "the memory was gone before the engine's reset"
            );
        });
        assert!(!mapped(&mem), "the memory goes after the reset");
    }
}
