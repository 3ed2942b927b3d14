//! MSI-X: the vector table and pending-bit array served from the MSI-X BAR,
//! and delivery through the eventfds the client hands over with `SET_IRQS`.
//!
//! A vector is delivered by writing its eventfd. It is held pending (its PBA
//! bit set) instead while it is masked: by its table entry's vector-control
//! bit, by the function mask in the capability, or by a `SET_IRQS`
//! `ACTION_MASK` from the client. Unmasking a pending vector delivers it and
//! clears the bit. With MSI-X disabled in the capability nothing is sent or
//! held.
//!
//! The table layout is the PCI one: 16 bytes per entry, address low at 0x0,
//! address high at 0x4, data at 0x8, vector control at 0xc.

use std::sync::Mutex;

use vmm_sys_util::eventfd::EventFd;

use crate::pci::PciError;
use crate::regs;

const ENTRY_SIZE: u64 = 16;
const VECTOR_CTRL_MASKED: u32 = 1;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    addr_lo: u32,
    addr_hi: u32,
    data: u32,
    ctrl: u32,
}

impl Entry {
    fn masked_power_on() -> Self {
        Entry {
            ctrl: VECTOR_CTRL_MASKED,
            ..Default::default()
        }
    }
}

/// What happened to a vector that was triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The eventfd was signalled.
    Sent,
    /// The vector is masked: its pending bit is set.
    Pending,
    /// MSI-X is disabled or the client gave no eventfd: nothing happened.
    Dropped,
}

/// Counters for tests and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MsixStats {
    /// Interrupts signalled on an eventfd.
    pub sent: u64,
    /// Triggers that set a pending bit.
    pub pended: u64,
    /// Triggers dropped (disabled, no eventfd).
    pub dropped: u64,
}

#[derive(Debug)]
struct State {
    table: Vec<Entry>,
    pending: Vec<bool>,
    client_masked: Vec<bool>,
    eventfds: Vec<Option<EventFd>>,
    enabled: bool,
    function_masked: bool,
    stats: MsixStats,
}

/// The MSI-X block of the device, shared between the vfio-user thread and
/// any thread that raises interrupts.
#[derive(Debug)]
pub struct Msix {
    state: Mutex<State>,
}

impl Msix {
    /// Creates `vectors` vectors, all masked, MSI-X disabled.
    pub fn new(vectors: u16) -> Self {
        let n = usize::from(vectors);
        Msix {
            state: Mutex::new(State {
                table: vec![Entry::masked_power_on(); n],
                pending: vec![false; n],
                client_masked: vec![false; n],
                eventfds: (0..n).map(|_| None).collect(),
                enabled: false,
                function_masked: false,
                stats: MsixStats::default(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of vectors.
    pub fn vectors(&self) -> u32 {
        self.lock().table.len() as u32
    }

    /// Returns to power-on state; eventfds stay (they belong to the client).
    pub fn reset(&self) {
        let mut s = self.lock();
        let n = s.table.len();
        s.table = vec![Entry::masked_power_on(); n];
        s.pending = vec![false; n];
        s.client_masked = vec![false; n];
        s.enabled = false;
        s.function_masked = false;
    }

    /// Drops every eventfd (the client went away).
    pub fn clear_eventfds(&self) {
        let mut s = self.lock();
        for e in s.eventfds.iter_mut() {
            *e = None;
        }
    }

    /// Follows the capability's message control register.
    pub fn set_control(&self, enabled: bool, function_masked: bool) {
        let mut s = self.lock();
        s.enabled = enabled;
        s.function_masked = function_masked;
        Self::deliver_unmasked_pending(&mut s);
    }

    /// Signals vector `v`, or holds it pending while masked.
    pub fn trigger(&self, v: u32) -> Result<Delivery, PciError> {
        let mut s = self.lock();
        let i = v as usize;
        if i >= s.table.len() {
            return Err(PciError::BadVector(v));
        }
        Ok(Self::trigger_locked(&mut s, i))
    }

    fn masked(s: &State, i: usize) -> bool {
        s.function_masked || s.client_masked[i] || s.table[i].ctrl & VECTOR_CTRL_MASKED != 0
    }

    fn trigger_locked(s: &mut State, i: usize) -> Delivery {
        if !s.enabled || s.eventfds[i].is_none() {
            s.stats.dropped += 1;
            return Delivery::Dropped;
        }
        if Self::masked(s, i) {
            s.pending[i] = true;
            s.stats.pended += 1;
            return Delivery::Pending;
        }
        Self::signal(s, i)
    }

    fn signal(s: &mut State, i: usize) -> Delivery {
        match s.eventfds[i].as_ref().map(|e| e.write(1)) {
            Some(Ok(())) => {
                s.stats.sent += 1;
                Delivery::Sent
            }
            Some(Err(e)) => {
                crate::guest_warn!(vector = i, error = %e, "MSI-X eventfd write failed");
                s.stats.dropped += 1;
                Delivery::Dropped
            }
            None => {
                s.stats.dropped += 1;
                Delivery::Dropped
            }
        }
    }

    fn deliver_unmasked_pending(s: &mut State) {
        if !s.enabled {
            return;
        }
        for i in 0..s.table.len() {
            if s.pending[i] && !Self::masked(s, i) && s.eventfds[i].is_some() {
                s.pending[i] = false;
                Self::signal(s, i);
            }
        }
    }

    /// Installs eventfds for vectors `start..start + fds.len()`.
    pub fn set_eventfds(&self, start: u32, fds: Vec<EventFd>) -> Result<(), PciError> {
        let mut s = self.lock();
        let end = Self::range(&s, start, fds.len() as u32)?;
        for (slot, fd) in s.eventfds[start as usize..end].iter_mut().zip(fds) {
            *slot = Some(fd);
        }
        Self::deliver_unmasked_pending(&mut s);
        Ok(())
    }

    /// Removes the eventfds of vectors `start..start + count`.
    pub fn remove_eventfds(&self, start: u32, count: u32) -> Result<(), PciError> {
        let mut s = self.lock();
        let end = Self::range(&s, start, count)?;
        for slot in s.eventfds[start as usize..end].iter_mut() {
            *slot = None;
        }
        Ok(())
    }

    /// `SET_IRQS` mask or unmask of `start..start + count`.
    pub fn client_mask(&self, start: u32, count: u32, masked: bool) -> Result<(), PciError> {
        let mut s = self.lock();
        let end = Self::range(&s, start, count)?;
        for m in s.client_masked[start as usize..end].iter_mut() {
            *m = masked;
        }
        Self::deliver_unmasked_pending(&mut s);
        Ok(())
    }

    /// `SET_IRQS` trigger of `start..start + count` (as if the device fired).
    pub fn client_trigger(&self, start: u32, count: u32) -> Result<(), PciError> {
        let mut s = self.lock();
        let end = Self::range(&s, start, count)?;
        for i in start as usize..end {
            Self::trigger_locked(&mut s, i);
        }
        Ok(())
    }

    fn range(s: &State, start: u32, count: u32) -> Result<usize, PciError> {
        let end = u64::from(start) + u64::from(count);
        if end > s.table.len() as u64 {
            return Err(PciError::BadVectorRange { start, count });
        }
        Ok(end as usize)
    }

    /// Statistics so far.
    pub fn stats(&self) -> MsixStats {
        self.lock().stats
    }

    /// True if vector `v` has its pending bit set.
    pub fn is_pending(&self, v: u32) -> bool {
        self.lock()
            .pending
            .get(v as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Reads the MSI-X BAR (table or PBA) at `offset`.
    pub fn bar_read(&self, offset: u64, data: &mut [u8]) -> Result<(), PciError> {
        let s = self.lock();
        let len = data.len();
        check_access(offset, len)?;
        let table_end = regs::MSIX_TABLE_OFFSET + s.table.len() as u64 * ENTRY_SIZE;
        let pba_end = regs::MSIX_PBA_OFFSET + (s.table.len() as u64).div_ceil(64) * 8;
        if (regs::MSIX_TABLE_OFFSET..table_end).contains(&offset) {
            let rel = offset - regs::MSIX_TABLE_OFFSET;
            let e = s.table[(rel / ENTRY_SIZE) as usize];
            let mut raw = [0u8; 16];
            raw[0..4].copy_from_slice(&e.addr_lo.to_le_bytes());
            raw[4..8].copy_from_slice(&e.addr_hi.to_le_bytes());
            raw[8..12].copy_from_slice(&e.data.to_le_bytes());
            raw[12..16].copy_from_slice(&e.ctrl.to_le_bytes());
            let o = (rel % ENTRY_SIZE) as usize;
            data.copy_from_slice(&raw[o..o + len]);
        } else if (regs::MSIX_PBA_OFFSET..pba_end).contains(&offset) {
            let rel = offset - regs::MSIX_PBA_OFFSET;
            let word = (rel / 8) as usize;
            let mut bits = 0u64;
            for (b, p) in s.pending.iter().enumerate().skip(word * 64).take(64) {
                if *p {
                    bits |= 1 << (b - word * 64);
                }
            }
            let o = (rel % 8) as usize;
            data.copy_from_slice(&bits.to_le_bytes()[o..o + len]);
        } else {
            data.fill(0);
        }
        Ok(())
    }

    /// Writes the MSI-X BAR at `offset` (PBA and unused space ignore writes).
    pub fn bar_write(&self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let mut s = self.lock();
        let len = data.len();
        check_access(offset, len)?;
        let table_end = regs::MSIX_TABLE_OFFSET + s.table.len() as u64 * ENTRY_SIZE;
        if !(regs::MSIX_TABLE_OFFSET..table_end).contains(&offset) {
            return Ok(());
        }
        let rel = offset - regs::MSIX_TABLE_OFFSET;
        let i = (rel / ENTRY_SIZE) as usize;
        let e = &mut s.table[i];
        let mut raw = [0u8; 16];
        raw[0..4].copy_from_slice(&e.addr_lo.to_le_bytes());
        raw[4..8].copy_from_slice(&e.addr_hi.to_le_bytes());
        raw[8..12].copy_from_slice(&e.data.to_le_bytes());
        raw[12..16].copy_from_slice(&e.ctrl.to_le_bytes());
        let o = (rel % ENTRY_SIZE) as usize;
        raw[o..o + len].copy_from_slice(data);
        let word = |k: usize| u32::from_le_bytes(raw[k..k + 4].try_into().unwrap());
        e.addr_lo = word(0);
        e.addr_hi = word(4);
        e.data = word(8);
        e.ctrl = word(12) & VECTOR_CTRL_MASKED;
        Self::deliver_unmasked_pending(&mut s);
        Ok(())
    }
}

fn check_access(offset: u64, len: usize) -> Result<(), PciError> {
    if !matches!(len, 4 | 8) || !offset.is_multiple_of(len as u64) {
        return Err(PciError::BadAccess { offset, len });
    }
    if offset + len as u64 > regs::MSIX_BAR_SIZE {
        return Err(PciError::OutOfRange { offset, len });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmm_sys_util::eventfd::EFD_NONBLOCK;

    fn efd() -> EventFd {
        EventFd::new(EFD_NONBLOCK).unwrap()
    }

    fn unmask(m: &Msix, v: u64) {
        m.bar_write(v * 16 + 12, &0u32.to_le_bytes()).unwrap();
    }

    fn pba(m: &Msix) -> u64 {
        let mut b = [0u8; 8];
        m.bar_read(regs::MSIX_PBA_OFFSET, &mut b).unwrap();
        u64::from_le_bytes(b)
    }

    #[test]
    fn delivers_when_enabled_and_unmasked() {
        let m = Msix::new(4);
        let fd = efd();
        m.set_eventfds(2, vec![fd.try_clone().unwrap()]).unwrap();
        m.set_control(true, false);
        unmask(&m, 2);
        assert_eq!(m.trigger(2).unwrap(), Delivery::Sent);
        assert_eq!(fd.read().unwrap(), 1);
    }

    #[test]
    fn masked_vector_pends_and_fires_on_unmask() {
        let m = Msix::new(4);
        let fd = efd();
        m.set_eventfds(1, vec![fd.try_clone().unwrap()]).unwrap();
        m.set_control(true, false);
        assert_eq!(m.trigger(1).unwrap(), Delivery::Pending);
        assert_eq!(pba(&m), 0b10);
        assert!(fd.read().is_err(), "nothing delivered while masked");
        unmask(&m, 1);
        assert_eq!(fd.read().unwrap(), 1);
        assert_eq!(pba(&m), 0);
    }

    #[test]
    fn function_mask_and_client_mask_hold_vectors() {
        let m = Msix::new(2);
        let fd = efd();
        m.set_eventfds(0, vec![fd.try_clone().unwrap()]).unwrap();
        m.set_control(true, true);
        unmask(&m, 0);
        assert_eq!(m.trigger(0).unwrap(), Delivery::Pending);
        m.client_mask(0, 1, true).unwrap();
        m.set_control(true, false);
        assert!(fd.read().is_err(), "client mask still holds it");
        m.client_mask(0, 1, false).unwrap();
        assert_eq!(fd.read().unwrap(), 1);
    }

    #[test]
    fn disabled_or_no_eventfd_drops() {
        let m = Msix::new(2);
        unmask(&m, 0);
        assert_eq!(m.trigger(0).unwrap(), Delivery::Dropped);
        m.set_control(true, false);
        assert_eq!(m.trigger(0).unwrap(), Delivery::Dropped);
        assert_eq!(m.stats().dropped, 2);
        assert!(m.trigger(2).is_err());
    }

    #[test]
    fn table_round_trip_and_rules() {
        let m = Msix::new(2);
        m.bar_write(16, &0xfee0_0000u32.to_le_bytes()).unwrap();
        m.bar_write(24, &0x4041u32.to_le_bytes()).unwrap();
        let mut b = [0u8; 8];
        m.bar_read(16, &mut b).unwrap();
        assert_eq!(u64::from_le_bytes(b), 0xfee0_0000);
        let mut w = [0u8; 4];
        m.bar_read(28, &mut w).unwrap();
        assert_eq!(u32::from_le_bytes(w), 1, "power-on masked");
        assert!(m.bar_read(2, &mut w).is_err());
        let mut h = [0u8; 2];
        assert!(m.bar_read(0, &mut h).is_err());
        assert!(m.bar_read(regs::MSIX_BAR_SIZE, &mut w).is_err());
    }

    #[test]
    fn bad_ranges_rejected() {
        let m = Msix::new(4);
        assert!(m.set_eventfds(3, vec![efd(), efd()]).is_err());
        assert!(m.client_mask(u32::MAX, 2, true).is_err());
        assert!(m.remove_eventfds(0, 5).is_err());
    }
}
