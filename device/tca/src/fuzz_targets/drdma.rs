//! `drdma_window`: arbitrary sequences on one DRDMA window (trapped or
//! mapped, 1–8 ranges, up to 15 spare PMBs): DRDMA_SUBMIT and
//! DRDMA_SUBMIT_MASK of any value, trapped stores and loads of any size at
//! any offset, stores straight into the mapped PMB file (the current one,
//! or the file of a client that has gone), DRDMA_COMMIT and
//! DRDMA_COMMIT_MASK of any value, DRDMA_PMB_DEDICATED, register reads,
//! and the engine's side: read responses of any offset and length,
//! gathers for packets, completion waits and retirements; device resets
//! and new clients.
//!
//! Invariants (docs/drdma-isolation.md): every byte the engine gathers
//! from a WRITE range is the last byte this transfer stored at that
//! offset, or a zero where it stored none (mapped window only: a trapped
//! range is sent only once every byte of its length was stored); every
//! byte a trapped load returns is the byte this READ delivered at that
//! offset, or all-ones (refused); a new client's PMB file and the PMBs
//! after a reset are all zeros. A model of each range's current transfer
//! (what it stored, what was delivered) is the reference: a transfer
//! starts when a range goes from free to busy.
//!
//! One window per shape (ranges, PMBs, mapped) serves every execution of
//! the thread (libFuzzer runs them all on one), and a new client comes at
//! most once per execution: building a window or moving it to a new PMB
//! file (a sealed memfd, its mapping and the page faults of its first
//! zeroing) cost more than everything else an execution does. Each execution starts from the
//! window's function reset (`Drdma::reset`: what a device reset does, and
//! the last step of a client disconnect), with the PMBs dedicated as on a
//! new device, and first asserts that nothing of the execution before is
//! left: every range free with zero registers, no error recorded, no range
//! the engine could gather from, and a PMB file of zeros.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use ibtca_protocol::fuzz_targets::Input;

use crate::drdma::arr::Arr;
use crate::drdma::decode::RANGE_SIZE;
use crate::drdma::{Direction, Drdma, DrdmaConfig, WriteReady};
use crate::regs;

const RANGE: usize = RANGE_SIZE as usize;

/// One range's current transfer, as the guest and the peer made it.
#[derive(Clone)]
struct Transfer {
    /// WRITE: the byte last stored at each offset.
    stored: Vec<Option<u8>>,
    /// READ: the bytes delivered, in message order.
    delivered: Vec<u8>,
}

impl Transfer {
    fn new() -> Self {
        Transfer {
            stored: vec![None; RANGE],
            delivered: Vec::new(),
        }
    }
}

struct Model {
    drdma: Arc<Drdma>,
    mapped: bool,
    ranges: u32,
    file: Arc<File>,
    /// The PMB file of the client before (a client that has gone and
    /// still maps it).
    old_file: Option<Arc<File>>,
    /// The PMB file's bytes when checked (one buffer for the execution).
    scratch: Vec<u8>,
    transfers: Vec<Transfer>,
    busy: Vec<bool>,
}

/// See the module documentation.
pub fn drdma_window(data: &[u8]) {
    let mut input = Input::new(data);
    let shape = input.u8();
    let ranges = 1 + u32::from(shape & 7);
    let cfg = DrdmaConfig {
        ranges,
        pmbs: ranges + u32::from(shape >> 4),
        mapped: shape & 8 != 0,
        // A load waits for nothing: it is served or refused at once.
        load_timeout: Duration::ZERO,
    };
    let drdma = window(cfg);
    let file = drdma.pool_file();
    let scratch = vec![0; drdma.config().pmbs as usize * RANGE];
    let mut m = Model {
        drdma,
        mapped: cfg.mapped,
        ranges,
        file,
        old_file: None,
        scratch,
        transfers: vec![Transfer::new(); ranges as usize],
        busy: vec![false; ranges as usize],
    };
    m.fresh("a window reset after the execution before");
    let mut ops = 0;
    while !input.is_empty() && ops < 256 {
        ops += 1;
        step(&mut m, &mut input);
        m.track();
    }
}

/// The window of shape `cfg` after its function reset; built on first
/// use.
fn window(cfg: DrdmaConfig) -> Arc<Drdma> {
    /// Ranges, PMBs, mapped.
    type Shape = (u32, u32, bool);
    thread_local! {
        // Per thread: tests that run at once never share a window.
        static WINDOWS: RefCell<HashMap<Shape, Arc<Drdma>>> = RefCell::new(HashMap::new());
    }
    let d = WINDOWS.with_borrow_mut(|w| {
        w.entry((cfg.ranges, cfg.pmbs, cfg.mapped))
            .or_insert_with(|| Drdma::new(cfg).expect("PMB memory"))
            .clone()
    });
    d.reset();
    // The dedication a new device starts with (a reset keeps the one the
    // client before wrote; mapped windows refuse the write).
    if !cfg.mapped {
        d.reg_write(regs::DRDMA_PMB_DEDICATED, cfg.ranges);
    }
    d
}

/// The offset of `field` of ARR `n` in BAR0.
fn arr_reg(n: u32, field: u64) -> u64 {
    regs::DRDMA_ARR_BASE + u64::from(n) * regs::DRDMA_ARR_STRIDE + field
}

fn step(m: &mut Model, input: &mut Input) {
    let d = m.drdma.clone();
    let window = u64::from(m.ranges) * u64::from(RANGE_SIZE);
    match input.u8() % 16 {
        0 | 1 => {
            let range = u64::from(input.u8()) % u64::from(m.ranges + 1);
            let mut lo = range | u64::from(input.u8() & 0x3) << 16;
            lo |= u64::from(input.u8()) << 24;
            let ttl = u64::from(input.u16() % 4200);
            d.submit(lo | ttl << 32);
        }
        2 => d.submit_mask(input.u64()),
        3 | 4 => {
            let at = u64::from(input.u16()) % (window + 64);
            let len = input.pick(&[1usize, 2, 4, 8, 8, 64, 300]);
            let bytes = input.bytes(len).to_vec();
            m.trapped_store(at, &bytes);
        }
        5 => {
            let at = u64::from(input.u16()) % (window + 64);
            let len = input.pick(&[1usize, 2, 4, 8, 256]);
            m.load(at, len);
        }
        6 | 7 => {
            let at = u64::from(input.u16()) % (window + 4096);
            let len = input.pick(&[1usize, 8, 8, 100, 4096]);
            let bytes = input.bytes(len).to_vec();
            let old = input.u8().is_multiple_of(4);
            m.mapped_store(at, &bytes, old);
        }
        8 => {
            let range = u32::from(input.u8()) % (m.ranges + 1);
            d.commit(range | u32::from(input.u16() % 4200) << 16);
        }
        9 => {
            let mask = u64::from(input.u8());
            let base = u64::from(input.u8() % 4);
            let junk = if input.u8().is_multiple_of(8) {
                input.u64()
            } else {
                0
            };
            d.commit_mask(mask | base << 48 | junk);
        }
        10 => {
            let arr = u32::from(input.u8()) % (m.ranges + 1);
            let offset = u64::from(input.u16() % 4200);
            let len = usize::from(input.u16() % 2048);
            let bytes = input.bytes(len).to_vec();
            m.deliver(arr, offset, &bytes);
        }
        11 => {
            let arr = u32::from(input.u8()) % (m.ranges + 1);
            let offset = u64::from(input.u16() % 4200);
            let len = usize::from(input.u16() % 4200);
            m.gather(arr, offset, len);
        }
        12 => {
            let arr = u32::from(input.u8()) % (m.ranges + 1);
            let dir = input.pick(&[Direction::Read, Direction::Write]);
            if input.bool() {
                d.completion_waits(arr, 1);
            }
            d.retired(arr, dir, input.bool());
        }
        13 => {
            let off = input.pick(&[
                regs::DRDMA_PMB_DEDICATED,
                regs::DRDMA_COMMIT,
                regs::DRDMA_LOAD_TIMEOUT_US,
            ]);
            let v = input.u32();
            if off != regs::DRDMA_LOAD_TIMEOUT_US {
                d.reg_write(off, v);
            }
            let r = u64::from(input.u16()) & !3;
            d.reg_read(r);
        }
        14 => {
            d.reset();
            m.all_zero("after a device reset");
        }
        // A new client once per execution: its PMB file is a fresh memfd,
        // the dearest operation here, and a second one reaches nothing the
        // first did not (the old file is then the first new one).
        _ if m.old_file.is_some() => {
            d.reset();
            m.all_zero("after a device reset");
        }
        _ => {
            d.next_client();
            d.reset();
            m.old_file = Some(m.file.clone());
            m.file = d.pool_file();
            assert!(!Arc::ptr_eq(&m.file, m.old_file.as_ref().unwrap()));
            m.all_zero("a new client's PMB file");
        }
    }
}

impl Model {
    fn arr(&self, n: u32) -> Arr {
        self.drdma.arr(n).expect("a range of the window")
    }

    /// A range that went from free to busy starts a new transfer.
    fn track(&mut self) {
        for n in 0..self.ranges {
            // ARR_CTRL's busy bit: no copy of the ARR and its backlog.
            let busy = self.reg(arr_reg(n, regs::ARR_CTRL)) & regs::ARR_BUSY != 0;
            if busy && !self.busy[n as usize] {
                self.transfers[n as usize] = Transfer::new();
            }
            self.busy[n as usize] = busy;
        }
    }

    fn reg(&self, off: u64) -> u32 {
        self.drdma.reg_read(off).expect("a DRDMA register")
    }

    fn errors(&self) -> u32 {
        self.reg(regs::DRDMA_ERRORS)
    }

    fn trapped_store(&mut self, at: u64, bytes: &[u8]) {
        let before = self.errors();
        self.drdma.store(at, bytes);
        if self.errors() != before || bytes.is_empty() {
            return;
        }
        let (n, off) = ((at / RANGE as u64) as usize, (at % RANGE as u64) as usize);
        for (i, &b) in bytes.iter().enumerate() {
            self.transfers[n].stored[off + i] = Some(b);
        }
    }

    /// A store through the mapping, at `at` in the PMB file (range n is
    /// PMB n); `old`: through the mapping of the client before.
    fn mapped_store(&mut self, at: u64, bytes: &[u8], old: bool) {
        if !self.mapped || bytes.is_empty() {
            return;
        }
        let len = self.scratch.len() as u64;
        let at = at.min(len.saturating_sub(bytes.len() as u64));
        let bytes = &bytes[..bytes.len().min(len as usize)];
        if old {
            if let Some(f) = &self.old_file {
                f.write_all_at(bytes, at).expect("old PMB file");
            }
            return;
        }
        self.file.write_all_at(bytes, at).expect("PMB file");
        for (i, &b) in bytes.iter().enumerate() {
            let pos = at as usize + i;
            let (n, off) = (pos / RANGE, pos % RANGE);
            if (n as u32) < self.ranges && self.arr(n as u32).dir == Some(Direction::Write) {
                self.transfers[n].stored[off] = Some(b);
            }
        }
    }

    /// A trapped load (in the mapped window too: a client may still send
    /// one; there the guest's own stores may be in the PMB, so only the
    /// trapped window's loads are checked).
    fn load(&self, at: u64, len: usize) {
        let mut out = vec![0u8; len];
        self.drdma.load(at, &mut out);
        if self.mapped {
            return;
        }
        let (n, off) = ((at / RANGE as u64) as usize, (at % RANGE as u64) as usize);
        let delivered = self.transfers.get(n).map_or(&[][..], |t| &t.delivered);
        for (i, &b) in out.iter().enumerate() {
            assert!(
                b == 0xff || delivered.get(off + i) == Some(&b),
                "a load at {at:#x} returned {b:#04x} at byte {i}, not the READ's"
            );
        }
    }

    fn deliver(&mut self, arr: u32, offset: u64, bytes: &[u8]) {
        let fresh = self
            .transfers
            .get(arr as usize)
            .is_some_and(|t| offset == t.delivered.len() as u64 && !bytes.is_empty());
        if self.drdma.deliver(arr, offset, bytes) && fresh {
            self.transfers[arr as usize]
                .delivered
                .extend_from_slice(bytes);
        }
    }

    /// The engine copies bytes of WRITE range `arr` into a packet.
    fn gather(&self, arr: u32, offset: u64, len: usize) {
        let mut out = vec![0xa5u8; len];
        if !self.drdma.gather(arr, offset, &mut out) {
            return;
        }
        let a = self.arr(arr);
        assert_eq!(a.write_ready(), WriteReady::Ready, "gathered from {a:?}");
        let stored = &self.transfers[arr as usize].stored;
        for (i, &b) in out.iter().enumerate() {
            let pos = offset as usize + i;
            let want = match stored[pos] {
                Some(s) => s,
                None if self.mapped => 0,
                None => panic!("a trapped range went out with byte {pos} never stored"),
            };
            assert_eq!(
                b, want,
                "byte {pos} of range {arr} sent, not this transfer's"
            );
        }
    }

    #[track_caller]
    fn all_zero(&mut self, what: &str) {
        self.scratch.fill(0xff);
        self.file
            .read_exact_at(&mut self.scratch, 0)
            .expect("PMB file");
        // A slice comparison per page (memcmp), not a compare per byte.
        assert!(
            self.scratch.chunks(RANGE).all(|p| p == [0u8; RANGE]),
            "{what}: not all zeros"
        );
    }

    /// The window holds nothing of an execution before: what a new device
    /// shows (every range free, no error, PMBs dedicated to the ranges,
    /// the load timeout of the configuration) and a PMB file of zeros.
    #[track_caller]
    fn fresh(&mut self, what: &str) {
        let reg = |off| self.reg(off);
        assert_eq!(
            (
                reg(regs::DRDMA_ERRORS),
                reg(regs::DRDMA_LAST_ERROR),
                reg(regs::DRDMA_PMB_DEDICATED),
                reg(regs::DRDMA_LOAD_TIMEOUT_US),
            ),
            (0, 0, self.ranges, 0),
            "{what}: errors, last error, dedicated PMBs, load timeout"
        );
        for n in 0..self.ranges {
            for field in [
                regs::ARR_CTRL,
                regs::ARR_TTL,
                regs::ARR_WBC,
                regs::ARR_RRPL,
                regs::ARR_RESP_OFFSET,
                regs::ARR_DRAINED,
            ] {
                assert_eq!(
                    reg(arr_reg(n, field)),
                    0,
                    "{what}: ARR {n} field {field:#x}"
                );
            }
            let mut out = [0u8; 1];
            assert!(
                !self.drdma.gather(n, 0, &mut out),
                "{what}: range {n} sendable"
            );
        }
        self.all_zero(what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An input that READs into range 0, drains it, then commits a WRITE
    /// on the same PMB without a store: the invariant holds.
    #[test]
    fn read_then_commit_only_write() {
        for shape in [0x00u8, 0x08] {
            let mut data = vec![shape];
            data.extend([0, 0, 0, 0, 0x10, 0x00]); // submit READ 0, 16 bytes
            data.extend([10, 0, 0, 0, 16, 0]); // deliver 16 bytes at 0
            data.extend([0xab; 16]);
            data.extend([5, 0, 0, 3]); // load 8 bytes at 0
            data.extend([5, 8, 0, 3]); // load 8 bytes at 8: drained
            data.extend([8, 0, 16, 0]); // mapped: commit 16 (drain)
            data.extend([0, 0, 1, 0, 0x10, 0x00]); // submit WRITE 0, 16
            data.extend([8, 0, 16, 0]); // commit 16
            data.extend([11, 0, 0, 0, 16, 0]); // gather 16
            drdma_window(&data);
        }
    }
}
