//! The DRDMA window: ARRs, the PMB pool and the accesses that move bytes
//! between them, shared by the vfio-user thread (guest stores, loads and
//! register accesses) and the engine thread (sending from PMBs, read
//! responses into PMBs). One mutex guards it; a condition variable wakes a
//! load that waits for read-response data.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::arr::{Arr, ArrError, Delivered, Direction, Drained, LoadReady, WriteReady};
use super::decode::{decode, window_bar_size, RANGE_SIZE};
use super::pmb::{PmbError, PmbPool};
use crate::regs;

/// How a device's window is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrdmaConfig {
    /// Address ranges (ARRs), 1..=256.
    pub ranges: u32,
    /// PMBs in the pool (at least `ranges` in mapped mode).
    pub pmbs: u32,
    /// Offer the window to the client as mmappable memory (range `n` is PMB
    /// `n`; the driver commits byte counts through DRDMA_COMMIT).
    pub mapped: bool,
    /// Default DRDMA_LOAD_TIMEOUT_US.
    pub load_timeout: Duration,
}

impl Default for DrdmaConfig {
    fn default() -> Self {
        DrdmaConfig {
            ranges: 32,
            pmbs: 64,
            mapped: false,
            load_timeout: Duration::from_micros(u64::from(regs::DRDMA_LOAD_TIMEOUT_DEFAULT_US)),
        }
    }
}

/// Counters of the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrdmaStats {
    /// Bytes stored into WRITE ranges.
    pub bytes_stored: u64,
    /// Bytes loaded from READ ranges.
    pub bytes_loaded: u64,
    /// Loads that had to wait for their data.
    pub loads_waited: u64,
    /// Transfers finished (WRITE retired, READ drained).
    pub transfers: u64,
    /// Read responses taken by READ ranges (into the PMB or its backlog).
    pub responses: u64,
}

struct Window {
    arrs: Vec<Arr>,
    pool: PmbPool,
    errors: u32,
    last_error: u32,
    load_timeout_us: u32,
    stats: DrdmaStats,
}

/// The shared window of one device.
pub struct Drdma {
    cfg: DrdmaConfig,
    inner: Mutex<Window>,
    data: Condvar,
}

impl std::fmt::Debug for Drdma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drdma").field("cfg", &self.cfg).finish()
    }
}

const ALL_ONES: u8 = 0xff;

/// What a guest access asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// WRITE range `.0` holds every byte: send the work request held for it.
    WriteReady(u32),
    /// The guest loaded the last byte of a DRDMA READ whose completion QP
    /// `.0` held back: write it now (seed Fig 22a).
    ReadDrained(u32),
}

impl Window {
    fn refuse(&mut self, arr: u32, e: ArrError) {
        self.errors = self.errors.wrapping_add(1);
        self.last_error = e.code() | ((arr & 0xffff) << 8);
        tracing::debug!(arr, error = %e, "DRDMA access refused");
    }

    /// Counts `len` bytes loaded from READ range `arr` (a trapped load or a
    /// mapped-window commit) and applies what that did to the PMB pool. Returns the QP whose completion waited for
    /// the last byte, if this was it.
    fn drain(&mut self, arr: u32, len: u32) -> Option<u32> {
        let a = &mut self.arrs[arr as usize];
        let (pmb, waiter) = (a.pmb, a.waiter);
        let d = a.drain(len);
        if d.is_ok() {
            self.stats.bytes_loaded += u64::from(len);
        }
        match d {
            Ok(Drained::Refill { offset, data }) => {
                self.pool.write(pmb, offset, &data);
            }
            Ok(Drained::Done) => {
                self.pool.release(pmb);
                self.stats.transfers += 1;
                return waiter;
            }
            Ok(Drained::Partial | Drained::Awaiting) => {}
            Err(e) => self.refuse(arr, e),
        }
        None
    }
}

impl Drdma {
    /// A window as `cfg` describes, with every range free.
    pub fn new(cfg: DrdmaConfig) -> Result<Arc<Self>, PmbError> {
        let mut cfg = cfg;
        cfg.ranges = cfg.ranges.clamp(1, regs::DRDMA_MAX_RANGES);
        cfg.pmbs = cfg.pmbs.max(cfg.ranges).min(256);
        // As many PMBs as ranges start out dedicated (the driver may change
        // that in trapped mode); in mapped mode range n is PMB n for good.
        let pool = PmbPool::new(cfg.pmbs, cfg.ranges)?;
        Ok(Arc::new(Drdma {
            cfg,
            inner: Mutex::new(Window {
                arrs: vec![Arr::default(); cfg.ranges as usize],
                pool,
                errors: 0,
                last_error: 0,
                load_timeout_us: u32::try_from(cfg.load_timeout.as_micros()).unwrap_or(u32::MAX),
                stats: DrdmaStats::default(),
            }),
            data: Condvar::new(),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Window> {
        // A panic while holding the lock cannot leave an ARR half-updated in
        // a way that matters more than losing the device: carry on.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The configuration in force.
    pub fn config(&self) -> DrdmaConfig {
        self.cfg
    }

    /// Size of the window BAR.
    pub fn bar_size(&self) -> u64 {
        window_bar_size(self.cfg.ranges)
    }

    /// The PMB payload file (for the mapped window).
    pub fn pool_file(&self) -> Arc<std::fs::File> {
        self.lock().pool.file().clone()
    }

    /// Counters so far.
    pub fn stats(&self) -> DrdmaStats {
        self.lock().stats
    }

    /// A copy of ARR `n` (tests, logs).
    pub fn arr(&self, n: u32) -> Option<Arr> {
        self.lock().arrs.get(n as usize).cloned()
    }

    /// Frees every range, zeroes every PMB and forgets errors (device
    /// reset).
    pub fn reset(&self) {
        let mut w = self.lock();
        for a in w.arrs.iter_mut() {
            *a = Arr::default();
        }
        // The dedicated share starts over too: a client's setting is not
        // the next client's.
        w.pool.dedicate(self.cfg.ranges);
        w.pool.zero_all();
        w.errors = 0;
        w.last_error = 0;
        w.load_timeout_us = u32::try_from(self.cfg.load_timeout.as_micros()).unwrap_or(u32::MAX);
        drop(w);
        self.data.notify_all();
    }

    /// Moves the PMBs to a new, zeroed file for the next client
    /// ([`PmbPool::renew`]; a [`Drdma::reset`] follows), so the client that
    /// has gone, which may still map the old file, shares no page with the
    /// next one (docs/drdma-isolation.md).
    pub fn next_client(&self) {
        if let Err(e) = self.lock().pool.renew() {
            tracing::error!(
                "DRDMA: {e}; the PMBs stay in the old file, zeroed, which \
                 the previous client may still map"
            );
        }
    }

    // ---- the bus side (vfio-user thread) ----

    /// A guest store of `data` at `offset` in the window. Returns the range
    /// whose transfer length it completed (the engine may send it now).
    pub fn store(&self, offset: u64, data: &[u8]) -> Option<u32> {
        let mut w = self.lock();
        let Some(d) = decode(0, self.cfg.ranges, offset) else {
            w.refuse(u32::MAX, ArrError::Unallocated);
            return None;
        };
        let len = data.len() as u32;
        let a = &mut w.arrs[d.range as usize];
        if u64::from(d.offset) + u64::from(len) > u64::from(RANGE_SIZE) {
            w.refuse(d.range, ArrError::PastLength);
            return None;
        }
        match a.store(d.offset, len) {
            Ok(filled) => {
                let pmb = a.pmb;
                w.pool.write(pmb, d.offset, data);
                w.stats.bytes_stored += u64::from(len);
                filled.then_some(d.range)
            }
            Err(e) => {
                w.refuse(d.range, e);
                None
            }
        }
    }

    /// A guest load of `out.len()` bytes at `offset` in the window. Waits
    /// (up to DRDMA_LOAD_TIMEOUT_US) for read-response data that is due but
    /// not here; a refused or timed-out load reads all-ones. Returns the QP
    /// whose DRDMA READ completion waited for the byte this load drained
    /// last ([`Wake::ReadDrained`]).
    pub fn load(&self, offset: u64, out: &mut [u8]) -> Option<u32> {
        let mut w = self.lock();
        let Some(d) = decode(0, self.cfg.ranges, offset) else {
            w.refuse(u32::MAX, ArrError::Unallocated);
            out.fill(ALL_ONES);
            return None;
        };
        if u64::from(d.offset) + out.len() as u64 > u64::from(RANGE_SIZE) {
            w.refuse(d.range, ArrError::PastLength);
            out.fill(ALL_ONES);
            return None;
        }
        let mut woken = None;
        let deadline = Instant::now() + Duration::from_micros(u64::from(w.load_timeout_us));
        let mut waited = false;
        let mut at = 0usize;
        while at < out.len() {
            let pos = d.offset + at as u32;
            let rest = (out.len() - at) as u32;
            let r = d.range as usize;
            match w.arrs[r].load_ready(pos, rest) {
                Ok(LoadReady::Ready(n)) => {
                    let pmb = w.arrs[r].pmb;
                    w.pool.read(pmb, pos, &mut out[at..at + n as usize]);
                    woken = w.drain(d.range, n).or(woken);
                    at += n as usize;
                }
                Ok(LoadReady::Wait) => {
                    let now = Instant::now();
                    if now >= deadline {
                        w.refuse(d.range, ArrError::LoadTimeout);
                        out[at..].fill(ALL_ONES);
                        return woken;
                    }
                    waited = true;
                    w = self
                        .data
                        .wait_timeout(w, deadline - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                Err(e) => {
                    w.refuse(d.range, e);
                    out[at..].fill(ALL_ONES);
                    return woken;
                }
            }
        }
        if waited {
            w.stats.loads_waited += 1;
        }
        woken
    }

    /// DRDMA_SUBMIT (`v`: the 8-byte register value).
    pub fn submit(&self, v: u64) {
        let lo = v as u32;
        let ttl = (v >> 32) as u32;
        let range = lo & 0xffff;
        let dir = if lo & regs::DRDMA_SUBMIT_WRITE != 0 {
            Direction::Write
        } else {
            Direction::Read
        };
        let mut w = self.lock();
        if range >= self.cfg.ranges {
            w.refuse(range, ArrError::BadRequest);
            return;
        }
        let owner = (lo >> regs::DRDMA_SUBMIT_OWNER_SHIFT) & 0x3f;
        if w.arrs[range as usize].busy() {
            w.refuse(range, ArrError::Busy);
            return;
        }
        if ttl == 0 || ttl > RANGE_SIZE {
            w.refuse(range, ArrError::BadRequest);
            return;
        }
        let want = if self.cfg.mapped {
            Some(range)
        } else if lo & regs::DRDMA_SUBMIT_PMB != 0 {
            Some(lo >> 24)
        } else {
            None
        };
        let Some(pmb) = w.pool.alloc(want) else {
            w.refuse(range, ArrError::NoPmb);
            return;
        };
        match w.arrs[range as usize].submit(dir, ttl, pmb) {
            Ok(()) => w.arrs[range as usize].owner = owner,
            Err(e) => {
                w.pool.release(pmb);
                w.refuse(range, e);
            }
        }
    }

    /// Whether range `arr` was last submitted for doorbell page `page`
    /// (DRDMA_SUBMIT's owner field; 0 for the kernel and mask submits).
    pub fn owned_by(&self, arr: u32, page: u32) -> bool {
        self.lock()
            .arrs
            .get(arr as usize)
            .is_some_and(|a| a.owner == page)
    }

    /// DRDMA_SUBMIT_MASK: submits every range in the mask as DRDMA_SUBMIT
    /// would (same length and direction, device-chosen PMBs).
    pub fn submit_mask(&self, v: u64) {
        let mask = v as u32;
        let ttl = ((v >> 32) & 0x1fff) as u32;
        let base = (v >> 48) as u32;
        let write = if v & regs::DRDMA_MASK_WRITE != 0 {
            regs::DRDMA_SUBMIT_WRITE
        } else {
            0
        };
        if v & 0x0000_6000_0000_0000 != 0 {
            self.lock().refuse(base, ArrError::BadRequest);
            return;
        }
        for i in (0..32).filter(|i| mask & (1 << i) != 0) {
            let range = base + i;
            self.submit(u64::from(range & 0xffff | write) | (u64::from(ttl) << 32));
        }
    }

    /// DRDMA_COMMIT_MASK: every WRITE range in the mask commits its
    /// remaining bytes as DRDMA_COMMIT would (in the trapped window that is
    /// refused unless every byte was stored). Returns the ranges that
    /// became ready.
    pub fn commit_mask(&self, v: u64) -> Vec<u32> {
        let mask = v as u32;
        let base = (v >> 48) as u32;
        let mut ready = Vec::new();
        if v & 0x0000_ffff_0000_0000 != 0 {
            self.lock().refuse(base, ArrError::BadRequest);
            return ready;
        }
        for i in (0..32).filter(|i| mask & (1 << i) != 0) {
            let range = base + i;
            let rest = {
                let w = self.lock();
                match w.arrs.get(range as usize) {
                    Some(a) if a.dir == Some(Direction::Write) => a.ttl - a.wbc,
                    _ => 0,
                }
            };
            // A READ or free range is refused by commit like any other.
            if let Some(Wake::WriteReady(r)) = self.commit(range | (rest << 16)) {
                ready.push(r);
            }
        }
        ready
    }

    /// DRDMA_COMMIT: counts bytes the guest stored into (WRITE) or loaded
    /// from (READ) a mapped range; a trapped WRITE range takes no count
    /// past the bytes it saw stored ([`Arr::commit_store`]). Returns a
    /// WRITE range that became ready, or the QP whose READ completion
    /// waited for these bytes.
    pub fn commit(&self, v: u32) -> Option<Wake> {
        let range = v & 0xffff;
        let count = v >> 16;
        let mut w = self.lock();
        let Some(a) = w.arrs.get_mut(range as usize) else {
            w.refuse(range, ArrError::BadRequest);
            return None;
        };
        match a.dir {
            Some(Direction::Write) => match a.commit_store(count, self.cfg.mapped) {
                Ok(filled) => {
                    w.stats.bytes_stored += u64::from(count);
                    filled.then_some(Wake::WriteReady(range))
                }
                Err(e) => {
                    w.refuse(range, e);
                    None
                }
            },
            Some(Direction::Read) => w.drain(range, count).map(Wake::ReadDrained),
            None => {
                w.refuse(range, ArrError::Unallocated);
                None
            }
        }
    }

    /// DRDMA_RELEASE: frees busy range `range` and its PMB as a failed
    /// transfer (waiting loads read all-ones). A range its driver gave up
    /// on, submitted and never filled or named by no work request, would
    /// otherwise stay busy until a device reset. Returns the range as
    /// [`Wake::WriteReady`] so that a work request held for it moves on (its
    /// gather finds the range free and it completes in error); a free or
    /// unknown range is refused.
    pub fn release(&self, range: u32) -> Option<Wake> {
        let mut w = self.lock();
        let Some(a) = w.arrs.get_mut(range as usize).filter(|a| a.busy()) else {
            w.refuse(range, ArrError::Unallocated);
            return None;
        };
        let pmb = a.pmb;
        a.finish(true);
        w.pool.release(pmb);
        drop(w);
        self.data.notify_all();
        Some(Wake::WriteReady(range))
    }

    /// Reads a DRDMA register (global or ARR); `None` if `off` is not one.
    pub fn reg_read(&self, off: u64) -> Option<u32> {
        let w = self.lock();
        Some(match off {
            regs::DRDMA_BAR => regs::DRDMA_WINDOW_BAR,
            regs::DRDMA_RANGES => self.cfg.ranges,
            regs::DRDMA_RANGE_SIZE => RANGE_SIZE,
            regs::DRDMA_PMBS => w.pool.count(),
            regs::DRDMA_PMB_DEDICATED => w.pool.dedicated(),
            regs::DRDMA_ERRORS => w.errors,
            regs::DRDMA_LAST_ERROR => w.last_error,
            regs::DRDMA_LOAD_TIMEOUT_US => w.load_timeout_us,
            regs::DRDMA_MODE => {
                if self.cfg.mapped {
                    regs::DRDMA_MODE_MAPPED
                } else {
                    regs::DRDMA_MODE_TRAPPED
                }
            }
            _ => {
                let (n, field) = arr_register(off, self.cfg.ranges)?;
                let a = &w.arrs[n as usize];
                match field {
                    regs::ARR_CTRL => a.ctrl(),
                    regs::ARR_TTL => a.ttl,
                    regs::ARR_WBC => a.wbc,
                    regs::ARR_RRPL => a.rrpl,
                    regs::ARR_RESP_OFFSET => a.resp_offset,
                    regs::ARR_DRAINED => a.drained,
                    _ => 0,
                }
            }
        })
    }

    /// Writes a writable DRDMA register. `None` if `off` is not one;
    /// `Some(Some(wake))` when a commit has work for the engine.
    pub fn reg_write(&self, off: u64, v: u32) -> Option<Option<Wake>> {
        match off {
            regs::DRDMA_PMB_DEDICATED => {
                let mut w = self.lock();
                if self.cfg.mapped || w.arrs.iter().any(Arr::busy) {
                    w.refuse(u32::MAX, ArrError::Busy);
                } else {
                    w.pool.dedicate(v);
                }
                Some(None)
            }
            regs::DRDMA_LOAD_TIMEOUT_US => {
                self.lock().load_timeout_us = v.min(10_000_000);
                Some(None)
            }
            regs::DRDMA_COMMIT => Some(self.commit(v)),
            regs::DRDMA_RELEASE => Some(self.release(v & 0xffff)),
            _ => None,
        }
    }

    // ---- the bus-router side (engine thread) ----

    /// Whether the send engine may send WRITE range `arr`.
    pub fn write_ready(&self, arr: u32) -> WriteReady {
        self.lock()
            .arrs
            .get(arr as usize)
            .map_or(WriteReady::NotSubmitted, Arr::write_ready)
    }

    /// Copies bytes of a ready WRITE range into a packet being built.
    pub fn gather(&self, arr: u32, offset: u64, out: &mut [u8]) -> bool {
        let w = self.lock();
        match w.arrs.get(arr as usize) {
            Some(a) if a.check_send(offset, out.len()) => w.pool.read(a.pmb, offset as u32, out),
            _ => false,
        }
    }

    /// A read response's payload for READ range `arr` at message `offset`.
    pub fn deliver(&self, arr: u32, offset: u64, data: &[u8]) -> bool {
        let mut w = self.lock();
        let Ok(off) = u32::try_from(offset) else {
            return false;
        };
        let Some(a) = w.arrs.get_mut(arr as usize) else {
            return false;
        };
        match a.deliver(off, data) {
            Ok(Delivered::IntoPmb) => {
                let pmb = a.pmb;
                w.pool.write(pmb, off, data);
                w.stats.responses += 1;
                drop(w);
                self.data.notify_all();
                true
            }
            Ok(Delivered::Queued) => {
                w.stats.responses += 1;
                true
            }
            Ok(Delivered::Duplicate) => true,
            Err(e) => {
                tracing::debug!(arr, offset, error = %e, "read response refused by its ARR");
                false
            }
        }
    }

    /// A DRDMA READ on `arr` whose responses have all landed would
    /// complete now. True while the guest has not loaded its last byte: the
    /// completion waits (seed Fig 22a), and the load or commit that drains
    /// the last byte wakes QP `qpn` ([`Wake::ReadDrained`]). False once the
    /// range is drained (or was never this READ's).
    pub fn completion_waits(&self, arr: u32, qpn: u32) -> bool {
        let mut w = self.lock();
        match w.arrs.get_mut(arr as usize) {
            Some(a) if a.awaiting_drain() => {
                a.waiter = Some(qpn);
                true
            }
            _ => false,
        }
    }

    /// A DRDMA work request on `arr` left the send queue. A WRITE frees its
    /// range; a failed READ frees it too (waiting loads get all-ones); a
    /// successful READ frees it once the guest has loaded every byte.
    pub fn retired(&self, arr: u32, dir: Direction, ok: bool) {
        let mut w = self.lock();
        let Some(a) = w.arrs.get_mut(arr as usize) else {
            return;
        };
        if a.dir != Some(dir) || (dir == Direction::Read && ok) {
            return;
        }
        let pmb = a.pmb;
        a.finish(!ok);
        w.pool.release(pmb);
        if ok {
            w.stats.transfers += 1;
        }
        drop(w);
        self.data.notify_all();
    }
}

/// ARR number and field offset of BAR0 offset `off`, if it is in the ARR
/// block of a window with `ranges` ranges.
fn arr_register(off: u64, ranges: u32) -> Option<(u32, u64)> {
    let rel = off.checked_sub(regs::DRDMA_ARR_BASE)?;
    let n = rel / regs::DRDMA_ARR_STRIDE;
    (n < u64::from(ranges)).then_some((n as u32, rel % regs::DRDMA_ARR_STRIDE))
}
