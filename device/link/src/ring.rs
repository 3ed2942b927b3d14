//! A byte ring in shared memory: one direction of a link's frame stream
//! between two device processes on one host, without the socket's copies
//! into and out of kernel buffers.
//!
//! `pipe.rs` runs a connection's frames through it: after the `Hello`s
//! each side offers the peer a ring for its own direction (two memfds and
//! two eventfds with `SCM_RIGHTS`), writes its frames into it, and the
//! socket only says the peer is alive (on the socket, `sendmsg` was 43 % of
//! a saturated sending engine; the rings took 15-25 % off the device's CPU
//! per MiB of a 1 MiB WRITE stream: `ibtca-bench verbs`, AMD Zen 3 and
//! Zen 4 hosts).
//!
//! The writer creates the ring ([`RingWriter::create`]) and hands its two
//! files to the reader ([`RingReader::open`]):
//!
//! - the *control* file, one page, mapped read-write by both ends: a
//!   native-endian `u64` per cache line,
//!
//!   | offset | field | written by |
//!   | --- | --- | --- |
//!   | 0 | head: bytes ever published (the reader may read up to it) | writer |
//!   | 64 | tail: bytes ever read | reader |
//!   | 128 | reader asleep (0/1), so the writer knows to wake it | reader |
//!   | 192 | writer waiting for room (0/1) | writer |
//!
//! - the *data* file, `capacity` bytes (a power of two), byte `i` of the
//!   stream at `i % capacity`. The writer seals it against writes by anyone
//!   else (`F_SEAL_FUTURE_WRITE`, after mapping it itself), so the reader
//!   can only map it read-only. The writer's bytes are therefore its own
//!   until it publishes them, and it may build a frame straight in the
//!   ring ([`RingWriter::build_in_place`]: no copy of its own, the CRCs
//!   computed over exactly the bytes the reader will get).
//!
//! Every access to the control page goes through vm-memory's atomic loads
//! and stores, and every index the other process wrote is checked before
//! it is used (`tail ≤ head ≤ tail + capacity`, counting forward only): a
//! peer that scribbles over it yields [`RingError::Corrupt`], never a read
//! or write outside the ring. The reader takes what it walked in
//! [`RingLease`]s: their bytes stay in the ring (its room not given back)
//! until the lease is dropped, and whoever holds one only copies bytes out
//! of it, never parses them in place (the writer can always rewrite its
//! data), so a peer that rewrites the data cannot change bytes under the
//! parser.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryRegion, GuestRegionMmap, MemoryRegionAddress,
    MmapRegion,
};
use vmm_sys_util::eventfd::EventFd;

/// Bytes of the control file.
const CONTROL: u64 = 4096;
const HEAD: u64 = 0;
const TAIL: u64 = 64;
const READER_ASLEEP: u64 = 128;
const WRITER_WAITING: u64 = 192;

/// Smallest and largest data capacity.
pub const MIN_CAPACITY: u64 = 4096;
/// See [`MIN_CAPACITY`].
pub const MAX_CAPACITY: u64 = 1 << 30;

/// What went wrong with a ring.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// Creating, sizing, sealing or mapping the shared files failed.
    #[error("shared ring memory: {0}")]
    Memory(String),
    /// A file handed over does not have its part's size (the control page,
    /// or a power-of-two data area of `MIN_CAPACITY..=MAX_CAPACITY`).
    #[error("shared ring {part} file of {size} bytes: not the size of one")]
    Size {
        /// "control" or "data".
        part: &'static str,
        /// Its size.
        size: u64,
    },
    /// A file handed over is not a memfd whose size is sealed.
    #[error("shared ring file is not a memfd with a sealed size")]
    Unsealed,
    /// The peer left indices no ring can have (it is broken or hostile).
    #[error("shared ring indices out of order: head {head}, tail {tail}, capacity {capacity}")]
    Corrupt {
        /// The writer's count.
        head: u64,
        /// The reader's count.
        tail: u64,
        /// Data bytes.
        capacity: u64,
    },
}

/// The mappings of one ring, as one end has them.
#[derive(Debug)]
struct SharedRing {
    control_file: Arc<File>,
    data_file: Arc<File>,
    /// The control page, accessed as one region (a slice of it costs a
    /// bounds check; a `GuestMemoryMmap`'s accessors walk their regions
    /// per call).
    control: GuestRegionMmap,
    /// The data area: read-write at the writer, read-only at the reader.
    data: GuestRegionMmap,
    capacity: u64,
}

fn region(file: &Arc<File>, size: u64, prot: i32) -> Result<GuestRegionMmap, RingError> {
    let region = MmapRegion::build(
        Some(FileOffset::from_arc(file.clone(), 0)),
        size as usize,
        prot,
        libc::MAP_SHARED,
    )
    .map_err(|e| RingError::Memory(format!("mmap: {e}")))?;
    GuestRegionMmap::new(region, GuestAddress(0))
        .ok_or_else(|| RingError::Memory("mmap region".into()))
}

fn file_size(file: &File) -> Result<u64, RingError> {
    Ok(file
        .metadata()
        .map_err(|e| RingError::Memory(format!("size of a ring file: {e}")))?
        .len())
}

const READ_WRITE: i32 = libc::PROT_READ | libc::PROT_WRITE;

impl SharedRing {
    fn load(&self, at: u64, order: Ordering) -> u64 {
        // Cannot fail: every control field lies in the mapped page.
        self.control
            .load(MemoryRegionAddress(at), order)
            .unwrap_or(u64::MAX)
    }

    fn store(&self, at: u64, value: u64, order: Ordering) {
        // Cannot fail, as for `load`.
        let _ = self.control.store(value, MemoryRegionAddress(at), order);
    }

    /// `head` and `tail` if they describe a ring; the peer's one is loaded
    /// with Acquire (it publishes data or room with Release).
    fn checked(&self, head: u64, tail: u64) -> Result<u64, RingError> {
        match head.checked_sub(tail) {
            Some(used) if used <= self.capacity => Ok(used),
            _ => Err(RingError::Corrupt {
                head,
                tail,
                capacity: self.capacity,
            }),
        }
    }

    /// Copies stream bytes `at..at + out.len()` (at most `capacity`) out
    /// of the data area.
    fn copy_out(&self, at: u64, out: &mut [u8]) {
        let mut dst = out;
        for (at, len) in self.pieces(at, dst.len()) {
            let (now, rest) = dst.split_at_mut(len);
            // Inside the data area (at < capacity, at + len ≤ capacity):
            // cannot fail.
            if let Ok(src) = self.data.get_slice(MemoryRegionAddress(at), len) {
                src.copy_to(now);
            }
            dst = rest;
        }
    }

    /// Whether the writer said it waits for room (then it needs a wake-up
    /// after room is freed).
    fn writer_waits(&self) -> bool {
        // As in `RingWriter::reader_asleep`, for the tail just published.
        fence(Ordering::SeqCst);
        self.load(WRITER_WAITING, Ordering::SeqCst) != 0
    }

    /// The data area from stream byte `at` on, in up to two pieces (it
    /// wraps): `len ≤ capacity` bytes.
    fn pieces(&self, at: u64, len: usize) -> [(u64, usize); 2] {
        let start = at % self.capacity;
        let first = (len as u64).min(self.capacity - start) as usize;
        [(start, first), (0, len - first)]
    }
}

/// The writing end of a ring: the process that created it.
#[derive(Debug)]
pub struct RingWriter {
    ring: Arc<SharedRing>,
    /// Bytes written, published or not.
    head: u64,
    /// Bytes published (the head the reader sees).
    published: u64,
}

impl RingWriter {
    /// A new ring with `capacity` data bytes (rounded up to a power of two
    /// within `MIN_CAPACITY..=MAX_CAPACITY`) in two fresh memfds, the data
    /// sealed against writes by anyone but this mapping.
    pub fn create(capacity: u64) -> Result<Self, RingError> {
        let capacity = capacity
            .clamp(MIN_CAPACITY, MAX_CAPACITY)
            .next_power_of_two();
        let memory = |what: &str, e: std::io::Error| RingError::Memory(format!("{what}: {e}"));
        let control = crate::memfd::create_size_sealed("ibtca-link-ring-control", CONTROL)
            .map_err(|e| memory("memfd", e))?;
        let data = crate::memfd::create_sealable("ibtca-link-ring-data", capacity)
            .map_err(|e| memory("memfd", e))?;
        let (control_file, data_file) = (Arc::new(control), Arc::new(data));
        let ring = SharedRing {
            control: region(&control_file, CONTROL, READ_WRITE)?,
            // Mapped before the seal: afterwards no one can map it writable.
            data: region(&data_file, capacity, READ_WRITE)?,
            control_file,
            data_file,
            capacity,
        };
        crate::memfd::seal_writes(&ring.data_file).map_err(|e| memory("sealing the data", e))?;
        Ok(RingWriter {
            ring: Arc::new(ring),
            head: 0,
            published: 0,
        })
    }

    /// The control and the data file, to hand to the peer.
    pub fn files(&self) -> [&Arc<File>; 2] {
        [&self.ring.control_file, &self.ring.data_file]
    }

    /// Data bytes.
    pub fn capacity(&self) -> u64 {
        self.ring.capacity
    }

    /// Room for more bytes, after checking the reader's tail.
    fn room(&self) -> Result<u64, RingError> {
        let tail = self.ring.load(TAIL, Ordering::Acquire);
        Ok(self.ring.capacity - self.ring.checked(self.head, tail)?)
    }

    /// Lets the reader see every byte written so far; false if there was
    /// nothing new.
    pub fn publish(&mut self) -> bool {
        if self.published == self.head {
            return false;
        }
        self.published = self.head;
        self.ring.store(HEAD, self.head, Ordering::Release);
        true
    }

    /// Bytes ever published (the head the reader sees).
    pub fn published(&self) -> u64 {
        self.published
    }

    /// Bytes built in place and not yet published.
    pub fn unpublished(&self) -> u64 {
        self.head - self.published
    }

    /// Copies as much of `slices` (in order) as there is room for and
    /// publishes it, with anything built before it; returns the bytes taken
    /// (0 when the ring is full).
    pub fn write<S: std::ops::Deref<Target = [u8]>>(
        &mut self,
        slices: &[S],
    ) -> Result<usize, RingError> {
        let mut room = self.room()?;
        let mut taken = 0usize;
        for s in slices {
            if room == 0 {
                break;
            }
            let n = (s.len() as u64).min(room) as usize;
            let mut part = s.get(..n).unwrap_or_default();
            for (at, len) in self.ring.pieces(self.head + taken as u64, n) {
                let (now, rest) = part.split_at(len);
                // Inside the data area (at < capacity, at + len ≤
                // capacity): cannot fail.
                if let Ok(dst) = self.ring.data.get_slice(MemoryRegionAddress(at), len) {
                    dst.copy_from(now);
                }
                part = rest;
            }
            taken += n;
            room -= n as u64;
        }
        self.head += taken as u64;
        if taken > 0 {
            self.publish();
        }
        Ok(taken)
    }

    /// Adds `len` bytes that `build` writes straight into the ring, if
    /// there is room for them in one piece (before the data area wraps):
    /// `Ok(None)`, and `build` is not called, when there is not; otherwise
    /// what `build` returned, and its bytes are kept only if true. They are
    /// published with the next [`Self::publish`] or [`Self::write`] (the
    /// reader gets many frames per read, as from one write).
    pub fn build_in_place(
        &mut self,
        len: usize,
        build: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<Option<bool>, RingError> {
        let room = self.room()?;
        let [(start, first), _] = self.ring.pieces(self.head, len);
        if len as u64 > room || first != len {
            return Ok(None);
        }
        let Ok(slice) = self.ring.data.get_slice(MemoryRegionAddress(start), len) else {
            return Ok(None);
        };
        let guard = slice.ptr_guard_mut();
        // SAFETY: `guard` points at `len` bytes of the data mapping (bounds
        // checked by `get_slice`), which lives as long as `self.ring` and
        // is writable here (only `create` makes a writer, and it maps the
        // data read-write). Nothing else accesses these bytes while the
        // slice lives: they lie between head and tail + capacity, so the
        // reader does not read them (a hostile one only reads garbage), no
        // other process can write them (the data file is sealed against
        // writes and the peer maps it read-only), and in this process only
        // this writer, borrowed mutably for the call, touches the data
        // area. The slice lives only for the call to `build`, before the
        // bytes can be published.
        let bytes = unsafe { std::slice::from_raw_parts_mut(guard.as_ptr(), len) };
        if !build(bytes) {
            return Ok(Some(false));
        }
        self.head += len as u64;
        Ok(Some(true))
    }

    /// Marks (or clears) that the writer is about to wait for room: set
    /// it, then look at the room once more before sleeping, so a reader
    /// that frees room in between sees the mark ([`RingReader::writer_waits`]).
    pub fn set_waiting(&self, waiting: bool) {
        self.ring
            .store(WRITER_WAITING, u64::from(waiting), Ordering::SeqCst);
    }

    /// Whether the reader said it is asleep (then it needs a wake-up after
    /// a write).
    pub fn reader_asleep(&self) -> bool {
        // Orders the head just published before this load (a Release
        // store alone may pass it), against the reader's mark-then-look.
        fence(Ordering::SeqCst);
        self.ring.load(READER_ASLEEP, Ordering::SeqCst) != 0
    }

    /// Stores `head` where the reader looks for it, as a broken or
    /// hostile writer might (tests).
    #[cfg(test)]
    pub fn scribble_head(&self, head: u64) {
        self.ring.store(HEAD, head, Ordering::Release);
    }

    /// Bytes written and not yet read (checked).
    pub fn pending(&self) -> Result<u64, RingError> {
        let tail = self.ring.load(TAIL, Ordering::Acquire);
        self.ring.checked(self.head, tail)
    }
}

/// The reading end of a ring: the peer process.
///
/// The reader walks the stream ([`Self::available`], [`Self::copy_at`])
/// and takes what it walked in [`RingLease`]s ([`Self::take`]), in stream
/// order; a lease keeps its bytes in the ring, where its holder (another
/// thread) copies them out, until it is dropped. Leases may be dropped in
/// any order: the tail (the room the writer sees) moves over those dropped
/// in order.
#[derive(Debug)]
pub struct RingReader {
    ring: Arc<SharedRing>,
    /// Stream bytes walked: taken in leases or read.
    seen: u64,
    /// The head as [`Self::available`] last found it (checked).
    head: u64,
    room: Arc<Room>,
}

/// The part of a ring its reader has taken and not yet freed, shared by
/// the reader and its [`RingLease`]s.
#[derive(Debug)]
struct Room {
    ring: Arc<SharedRing>,
    leases: Mutex<Leases>,
    /// Rung when room is freed while the writer waits for it.
    wake: OnceLock<EventFd>,
}

#[derive(Debug, Default)]
struct Leases {
    /// Bytes freed: the tail stored in the control page (the value there
    /// is the peer's to scribble over; this one is the truth).
    tail: u64,
    /// End of every lease not yet freed, in stream order, and whether it
    /// was dropped (out of order).
    open: VecDeque<(u64, bool)>,
}

impl Room {
    /// The lease ending at `end` is dropped: moves the tail over the
    /// leases dropped in order and wakes a waiting writer.
    fn free(&self, end: u64) {
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lease) = leases.open.iter_mut().find(|(e, _)| *e == end) {
            lease.1 = true;
        }
        let before = leases.tail;
        while let Some(&(end, true)) = leases.open.front() {
            leases.tail = end;
            leases.open.pop_front();
        }
        if leases.tail == before {
            return;
        }
        self.ring.store(TAIL, leases.tail, Ordering::Release);
        drop(leases);
        if self.ring.writer_waits() {
            if let Some(wake) = self.wake.get() {
                let _ = wake.write(1);
            }
        }
    }

    fn tail(&self) -> u64 {
        self.leases.lock().unwrap_or_else(|e| e.into_inner()).tail
    }
}

/// Stream bytes `start..end` of a ring, taken by its reader with
/// [`RingReader::take`]: they stay in the ring (the writer does not get
/// their room back) until the lease is dropped.
///
/// The writer can still rewrite them (it maps the data writable): what
/// [`Self::copy_at`] copies out is a snapshot a hostile peer may have
/// changed since the reader looked, so a holder parses its copy, never
/// the ring.
#[derive(Debug)]
pub struct RingLease {
    room: Arc<Room>,
    start: u64,
    end: u64,
}

impl RingLease {
    /// Bytes leased.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Leases nothing.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Copies the `out.len()` leased bytes from `offset` (from the start
    /// of the lease) into `out`; false, and nothing copied, if they are
    /// not all in the lease.
    pub fn copy_at(&self, offset: u64, out: &mut [u8]) -> bool {
        match offset.checked_add(out.len() as u64) {
            Some(end) if end <= self.len() => {
                self.room.ring.copy_out(self.start + offset, out);
                true
            }
            _ => false,
        }
    }
}

impl Drop for RingLease {
    fn drop(&mut self) {
        if !self.is_empty() {
            self.room.free(self.end);
        }
    }
}

impl RingReader {
    /// The reading end of the ring in `control` and `data`, as the peer
    /// created it. Both must be memfds with their size sealed (a peer could
    /// otherwise shrink one under the mapping and make this process fault,
    /// `SIGBUS`); the data is mapped read-only (a writer that sealed it
    /// against other writers could not let it be mapped otherwise).
    pub fn open(control: File, data: File) -> Result<Self, RingError> {
        if !crate::memfd::size_is_sealed(&control) || !crate::memfd::size_is_sealed(&data) {
            return Err(RingError::Unsealed);
        }
        let size = file_size(&control)?;
        if size != CONTROL {
            return Err(RingError::Size {
                part: "control",
                size,
            });
        }
        let capacity = file_size(&data)?;
        if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) || !capacity.is_power_of_two() {
            return Err(RingError::Size {
                part: "data",
                size: capacity,
            });
        }
        let (control_file, data_file) = (Arc::new(control), Arc::new(data));
        let ring = Arc::new(SharedRing {
            control: region(&control_file, CONTROL, READ_WRITE)?,
            data: region(&data_file, capacity, libc::PROT_READ)?,
            control_file,
            data_file,
            capacity,
        });
        let tail = ring.load(TAIL, Ordering::Relaxed);
        let room = Room {
            ring: Arc::clone(&ring),
            leases: Mutex::new(Leases {
                tail,
                open: VecDeque::new(),
            }),
            wake: OnceLock::new(),
        };
        Ok(RingReader {
            ring,
            seen: tail,
            head: tail,
            room: Arc::new(room),
        })
    }

    /// Data bytes.
    pub fn capacity(&self) -> u64 {
        self.ring.capacity
    }

    /// From now on, freeing room while the writer waits for it writes 1 to
    /// `wake` (the writer's room eventfd). Set once; later calls are
    /// ignored.
    pub fn wake_writer_with(&self, wake: EventFd) {
        let _ = self.room.wake.set(wake);
    }

    /// Bytes published and not yet walked (checked against the tail: the
    /// writer may not have published more than the room it had).
    pub fn available(&mut self) -> Result<u64, RingError> {
        let head = self.ring.load(HEAD, Ordering::Acquire);
        // Read after the head: any tail the writer saw before publishing
        // it was stored (under the lock) before this read.
        self.ring.checked(head, self.room.tail())?;
        let n = self.ring.checked(head, self.seen)?;
        self.head = head;
        Ok(n)
    }

    /// Bytes [`Self::available`] counted that are not yet taken.
    pub fn unwalked(&self) -> u64 {
        self.head - self.seen
    }

    /// Copies the `out.len()` bytes from `offset` bytes past the walked
    /// part on into `out`; false, and nothing copied, unless
    /// [`Self::available`] counted them.
    pub fn copy_at(&self, offset: u64, out: &mut [u8]) -> bool {
        let fits = offset
            .checked_add(out.len() as u64)
            .is_some_and(|end| end <= self.head - self.seen);
        if fits {
            self.ring.copy_out(self.seen + offset, out);
        }
        fits
    }

    /// Takes the next `len` bytes, which [`Self::available`] must have
    /// counted (fewer are taken otherwise): they are walked, and their
    /// room goes back to the writer when the lease is dropped.
    pub fn take(&mut self, len: u64) -> RingLease {
        let len = len.min(self.head - self.seen);
        let (start, end) = (self.seen, self.seen + len);
        if len > 0 {
            let mut leases = self.room.leases.lock().unwrap_or_else(|e| e.into_inner());
            leases.open.push_back((end, false));
        }
        self.seen = end;
        RingLease {
            room: Arc::clone(&self.room),
            start,
            end,
        }
    }

    /// Copies up to `out.len()` bytes of the stream into `out` and frees
    /// their room; returns how many (0 when the ring is empty).
    pub fn read(&mut self, out: &mut [u8]) -> Result<usize, RingError> {
        let n = self.available()?.min(out.len() as u64) as usize;
        let out = out.get_mut(..n).unwrap_or_default();
        self.ring.copy_out(self.seen, out);
        drop(self.take(n as u64));
        Ok(n)
    }

    /// Marks (or clears) that the reader is about to sleep: set it, then
    /// look for data once more before sleeping, so a writer that adds data
    /// in between sees the mark ([`RingWriter::reader_asleep`]).
    pub fn set_asleep(&self, asleep: bool) {
        self.ring
            .store(READER_ASLEEP, u64::from(asleep), Ordering::SeqCst);
    }

    /// Whether the writer said it waits for room (then it needs a wake-up
    /// after room is freed).
    pub fn writer_waits(&self) -> bool {
        self.ring.writer_waits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer on a new ring and a reader on second mappings of the same
    /// files, as the peer process would have them.
    fn pair(capacity: u64) -> (RingWriter, RingReader, Arc<SharedRing>) {
        let w = RingWriter::create(capacity).unwrap();
        let [control, data] = w.files().map(|f| f.try_clone().unwrap());
        let r = RingReader::open(control, data).unwrap();
        let peer = r.ring.clone();
        (w, r, peer)
    }

    #[test]
    fn bytes_come_out_in_order_across_the_wrap_and_room_is_bounded() {
        let (mut w, mut r, _) = pair(4096);
        let mut next = 0u8;
        let mut expect = 0u8;
        let mut out = vec![0u8; 1500];
        // 100 rounds of uneven writes and reads wrap the 4 KiB ring many
        // times; every byte comes out once, in order.
        for round in 0..100usize {
            let chunk: Vec<u8> = (0..700 + round % 7 * 300)
                .map(|_| {
                    next = next.wrapping_add(1);
                    next
                })
                .collect();
            let (a, b) = chunk.split_at(chunk.len() / 3);
            let mut written = w.write(&[a, b]).unwrap();
            // What did not fit goes after reads free room.
            while written < chunk.len() {
                let n = r.read(&mut out).unwrap();
                assert!(n > 0, "a full ring has bytes to read");
                for &byte in &out[..n] {
                    expect = expect.wrapping_add(1);
                    assert_eq!(byte, expect);
                }
                written += w.write(&[&chunk[written..]]).unwrap();
            }
            assert!(w.pending().unwrap() <= 4096);
        }
        loop {
            let n = r.read(&mut out).unwrap();
            if n == 0 {
                break;
            }
            for &byte in &out[..n] {
                expect = expect.wrapping_add(1);
                assert_eq!(byte, expect);
            }
        }
        assert_eq!(expect, next, "every byte read once");
        assert_eq!(w.pending().unwrap(), 0);
    }

    #[test]
    fn a_full_ring_takes_nothing_and_an_empty_one_gives_nothing() {
        let (mut w, mut r, _) = pair(4096);
        assert_eq!(r.read(&mut [0u8; 16]).unwrap(), 0);
        assert_eq!(w.write(&[&[7u8; 5000][..]]).unwrap(), 4096);
        assert_eq!(w.write(&[&[8u8; 10][..]]).unwrap(), 0);
        let mut out = vec![0u8; 5000];
        assert_eq!(r.read(&mut out).unwrap(), 4096);
        assert!(out[..4096].iter().all(|b| *b == 7));
        assert_eq!(w.write(&[&[8u8; 10][..]]).unwrap(), 10);
    }

    #[test]
    fn indices_a_hostile_peer_leaves_are_refused_without_touching_memory() {
        let (mut w, mut r, peer) = pair(4096);
        w.write(&[&[1u8; 100][..]]).unwrap();
        assert_eq!(r.read(&mut [0u8; 50]).unwrap(), 50);
        // The "writer" claims more than the ring holds, then a head behind
        // the tail: both are refused, nothing is copied out, and the
        // reader's tail stays put.
        let mut out = [0xeeu8; 64];
        peer.store(HEAD, 1 << 40, Ordering::Release);
        assert!(matches!(r.read(&mut out), Err(RingError::Corrupt { .. })));
        peer.store(HEAD, 10, Ordering::Release);
        assert!(matches!(r.read(&mut out), Err(RingError::Corrupt { .. })));
        assert!(out.iter().all(|b| *b == 0xee), "nothing copied out");
        assert_eq!(peer.load(TAIL, Ordering::Acquire), 50);
        // Put right, the rest of the stream is still there.
        peer.store(HEAD, 100, Ordering::Release);
        assert_eq!(r.read(&mut out).unwrap(), 50);
        // A "reader" that claims to have read ahead of the writer.
        peer.store(HEAD, 100, Ordering::Release);
        peer.store(TAIL, 5000, Ordering::Release);
        assert!(matches!(
            w.write(&[&[2u8; 8][..]]),
            Err(RingError::Corrupt { .. })
        ));
        assert!(matches!(w.pending(), Err(RingError::Corrupt { .. })));
        // Nor is anything built in place past such a tail.
        assert!(matches!(
            w.build_in_place(8, |_| unreachable!()),
            Err(RingError::Corrupt { .. })
        ));
    }

    #[test]
    fn files_that_are_not_rings_are_refused() {
        let sealed = |size| crate::memfd::create_size_sealed("ibtca-test", size).unwrap();
        for size in [0, 4095, 4097, 6000, MAX_CAPACITY * 2] {
            assert!(
                matches!(RingReader::open(sealed(CONTROL), sealed(size)),
                    Err(RingError::Size { part: "data", size: s }) if s == size),
                "data of {size} bytes"
            );
        }
        assert!(matches!(
            RingReader::open(sealed(8192), sealed(4096)),
            Err(RingError::Size {
                part: "control",
                size: 8192
            })
        ));
        // The right sizes, but a peer could still shrink one under us.
        let unsealed = || crate::memfd::create("ibtca-test", 4096).unwrap();
        assert!(matches!(
            RingReader::open(unsealed(), sealed(4096)),
            Err(RingError::Unsealed)
        ));
        assert!(matches!(
            RingReader::open(sealed(CONTROL), unsealed()),
            Err(RingError::Unsealed)
        ));
        let w = RingWriter::create(5000).unwrap();
        assert_eq!(w.capacity(), 8192, "rounded up to a power of two");
    }

    #[test]
    fn the_data_can_be_written_by_its_writer_alone() {
        let (mut w, mut r, _) = pair(4096);
        let [_, data] = w.files();
        assert!(crate::memfd::writes_are_sealed(data));
        // The peer cannot map the data writable, nor write to the file.
        let writable = MmapRegion::<()>::from_file(FileOffset::from_arc(data.clone(), 0), 4096);
        assert!(
            writable.is_err(),
            "a writable mapping of the data is refused"
        );
        assert!(std::io::Write::write(&mut &**data, &[1]).is_err());
        // The writer still writes through its own mapping.
        assert_eq!(w.write(&[&[5u8; 8][..]]).unwrap(), 8);
        let mut out = [0u8; 8];
        assert_eq!(r.read(&mut out).unwrap(), 8);
        assert_eq!(out, [5; 8]);
    }

    #[test]
    fn frames_built_in_place_are_published_only_when_finished() {
        let (mut w, mut r, _) = pair(4096);
        let mut out = vec![0u8; 4096];
        // Abandoned: nothing is published, the room stays free.
        assert_eq!(
            w.build_in_place(100, |b| {
                b.fill(0xaa);
                false
            })
            .unwrap(),
            Some(false)
        );
        assert_eq!((w.pending().unwrap(), r.read(&mut out).unwrap()), (0, 0));
        // Finished: the reader gets exactly the bytes built.
        let built = w
            .build_in_place(1000, |b| {
                assert_eq!(b.len(), 1000);
                for (i, x) in b.iter_mut().enumerate() {
                    *x = i as u8;
                }
                true
            })
            .unwrap();
        assert_eq!(built, Some(true));
        assert_eq!(r.read(&mut out).unwrap(), 0, "not published yet");
        assert_eq!(w.unpublished(), 1000);
        assert!(w.publish() && !w.publish());
        assert_eq!(r.read(&mut out).unwrap(), 1000);
        assert!(out[..1000].iter().enumerate().all(|(i, x)| *x == i as u8));
        // 3000 bytes left before the wrap: a frame that does not fit in one
        // piece is not built (nor is one bigger than the room).
        assert_eq!(w.build_in_place(3097, |_| unreachable!()).unwrap(), None);
        assert_eq!(w.write(&[&[1u8; 3000][..]]).unwrap(), 3000);
        assert_eq!(w.build_in_place(1001, |_| unreachable!()).unwrap(), None);
        assert_eq!(r.read(&mut out).unwrap(), 3000);
        assert_eq!(w.write(&[&[2u8; 96][..]]).unwrap(), 96);
        assert_eq!(r.read(&mut out).unwrap(), 96);
        // At the wrap, the whole area is one piece again.
        let fill = |b: &mut [u8]| {
            b.fill(9);
            true
        };
        assert_eq!(w.build_in_place(2048, fill).unwrap(), Some(true));
        assert_eq!(w.build_in_place(2049, |_| unreachable!()).unwrap(), None);
        // A write publishes what was built before it, in order.
        assert_eq!(w.write(&[&[9u8; 2048][..]]).unwrap(), 2048);
        assert_eq!(w.unpublished(), 0);
        assert_eq!(r.read(&mut out).unwrap(), 4096);
        assert!(out.iter().all(|x| *x == 9));
    }

    #[test]
    fn leased_bytes_stay_in_the_ring_until_every_lease_before_them_is_dropped() {
        let (mut w, mut r, peer) = pair(4096);
        let room = EventFd::new(vmm_sys_util::eventfd::EFD_NONBLOCK).unwrap();
        r.wake_writer_with(room.try_clone().unwrap());
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(w.write(&[&data[..]]).unwrap(), 3000);
        assert_eq!(r.available().unwrap(), 3000);
        // Walking copies without taking: the same bytes again.
        let mut head = [0u8; 10];
        assert!(r.copy_at(5, &mut head) && head[..] == data[5..15]);
        assert!(!r.copy_at(2995, &mut head), "past what was published");
        let (a, b, c) = (r.take(1000), r.take(1000), r.take(1000));
        assert_eq!(
            (a.len(), r.unwalked(), r.available().unwrap()),
            (1000, 0, 0)
        );
        let mut out = vec![0u8; 1000];
        assert!(b.copy_at(0, &mut out) && out[..] == data[1000..2000]);
        assert!(!b.copy_at(1, &mut out), "past the end of the lease");
        // The writer waits for room (only 1096 bytes free).
        assert_eq!(w.write(&[&[7u8; 2000][..]]).unwrap(), 1096);
        w.set_waiting(true);
        // Dropped out of order: no room until the first goes too.
        drop(b);
        assert_eq!(peer.load(TAIL, Ordering::Acquire), 0);
        assert!(room.read().is_err(), "no wake-up for no room");
        drop(a);
        assert_eq!(peer.load(TAIL, Ordering::Acquire), 2000);
        assert_eq!(room.read().unwrap(), 1, "the waiting writer is woken");
        assert_eq!(w.write(&[&[7u8; 2000][..]]).unwrap(), 2000);
        drop(c);
        assert_eq!(w.pending().unwrap(), 1096 + 2000);
        // Only what `available` counted can be taken.
        assert!(r.take(4096).is_empty(), "nothing counted since");
        assert_eq!(r.available().unwrap(), 3096);
        let d = r.take(4096);
        assert_eq!(d.len(), 3096);
        // A lease still held works after the reader is gone.
        drop(r);
        let mut out = vec![0u8; 3096];
        assert!(d.copy_at(0, &mut out));
        assert!(out.iter().all(|b| *b == 7));
        drop(d);
        assert_eq!(w.pending().unwrap(), 0);
    }

    #[test]
    fn a_scribbled_tail_does_not_let_the_writer_claim_more() {
        let (mut w, mut r, peer) = pair(4096);
        w.write(&[&[1u8; 4096][..]]).unwrap();
        assert_eq!(r.available().unwrap(), 4096);
        let lease = r.take(4096);
        // The peer pretends the reader freed everything and publishes a
        // second ring's worth: refused (the reader's own tail is 0).
        peer.store(TAIL, 4096, Ordering::Release);
        peer.store(HEAD, 8192, Ordering::Release);
        assert!(matches!(r.available(), Err(RingError::Corrupt { .. })));
        drop(lease);
        assert_eq!(r.available().unwrap(), 4096, "once freed, it may");
    }

    #[test]
    fn the_sleep_and_wait_marks_are_seen_across_the_mappings() {
        let (w, r, _) = pair(4096);
        assert!(!w.reader_asleep() && !r.writer_waits());
        r.set_asleep(true);
        w.set_waiting(true);
        assert!(w.reader_asleep() && r.writer_waits());
        r.set_asleep(false);
        w.set_waiting(false);
        assert!(!w.reader_asleep() && !r.writer_waits());
    }

    #[test]
    fn a_writer_and_a_reader_on_two_threads_move_a_stream_intact() {
        let (mut w, mut r, _) = pair(8192);
        const TOTAL: usize = 4 << 20;
        let writer = std::thread::spawn(move || {
            let data: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
            let mut at = 0;
            while at < TOTAL {
                let end = (at + 3000).min(TOTAL);
                match w.write(&[&data[at..end]]).unwrap() {
                    0 => std::thread::yield_now(),
                    n => at += n,
                }
            }
        });
        let mut got = 0usize;
        let mut out = vec![0u8; 5000];
        while got < TOTAL {
            match r.read(&mut out).unwrap() {
                0 => std::thread::yield_now(),
                n => {
                    for (i, b) in out[..n].iter().enumerate() {
                        assert_eq!(*b, ((got + i) % 251) as u8, "byte {}", got + i);
                    }
                    got += n;
                }
            }
        }
        writer.join().unwrap();
    }
}
