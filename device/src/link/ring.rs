//! A byte ring in shared memory: one direction of a link's frame stream
//! between two device processes on one host, without the socket's copies
//! into and out of kernel buffers.
//!
//! `pipe.rs` runs a connection's frames through it: after the `Hello`s
//! each side offers the peer a ring for its own direction (the memfd and
//! two eventfds with `SCM_RIGHTS`), writes its frames into it, and the
//! socket only says the peer is alive (BENCHMARKS.md, "Verbs (no VM)",
//! sessions 6 and 7: `sendmsg` was 43 % of the saturated sender engine).
//!
//! The writer creates the ring ([`SharedRing::create`]) and hands the file
//! to the reader ([`SharedRing::open`]). Layout (native-endian `u64`s, each
//! on its own cache line):
//!
//! | offset | field | written by |
//! | --- | --- | --- |
//! | 0 | head: bytes ever written | writer |
//! | 64 | tail: bytes ever read | reader |
//! | 128 | reader asleep (0/1), so the writer knows to wake it | reader |
//! | 192 | writer waiting for room (0/1) | writer |
//! | 4096 | the data, `capacity` bytes (a power of two), byte `i` of the stream at `i % capacity` | writer |
//!
//! Every access goes through vm-memory's volatile copies and atomic loads
//! and stores, and every index the other process wrote is checked before
//! it is used (`tail ≤ head ≤ tail + capacity`, counting forward only): a
//! peer that scribbles over the ring yields [`RingError::Corrupt`], never a
//! read or write outside it. What a reader takes out is a private copy, so
//! a peer that rewrites the data cannot change bytes under the parser.

use std::fs::File;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryRegion, GuestRegionMmap, MemoryRegionAddress,
    MmapRegion,
};

/// Where the data starts (one page of header).
const DATA: u64 = 4096;
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
    /// Creating, sizing or mapping the shared file failed.
    #[error("shared ring memory: {0}")]
    Memory(String),
    /// The file handed over does not have a ring's size (one header page
    /// and a power-of-two data area of `MIN_CAPACITY..=MAX_CAPACITY`).
    #[error("shared ring of {0} bytes: not a header page and a power-of-two data area")]
    Size(u64),
    /// The file handed over is not a memfd whose size is sealed.
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

/// The mapping of one ring, shared by its two ends' handles.
#[derive(Debug)]
pub struct SharedRing {
    file: Arc<File>,
    /// The mapping, accessed as one region (a slice of it costs a bounds
    /// check; a `GuestMemoryMmap`'s accessors walk their regions per call).
    region: GuestRegionMmap,
    capacity: u64,
}

impl SharedRing {
    /// A new ring with `capacity` data bytes (rounded up to a power of two
    /// within `MIN_CAPACITY..=MAX_CAPACITY`), in a fresh memfd.
    pub fn create(capacity: u64) -> Result<Arc<Self>, RingError> {
        let capacity = capacity
            .clamp(MIN_CAPACITY, MAX_CAPACITY)
            .next_power_of_two();
        let file = crate::memfd::create_size_sealed("ibtca-link-ring", DATA + capacity)
            .map_err(|e| RingError::Memory(format!("memfd: {e}")))?;
        Self::map(file)
    }

    /// The ring in `file`, as the peer created it. The file must be a
    /// memfd with its size sealed: a peer could otherwise shrink it under
    /// the mapping and make this process fault (`SIGBUS`).
    pub fn open(file: File) -> Result<Arc<Self>, RingError> {
        if !crate::memfd::size_is_sealed(&file) {
            return Err(RingError::Unsealed);
        }
        Self::map(file)
    }

    fn map(file: File) -> Result<Arc<Self>, RingError> {
        let size = file
            .metadata()
            .map_err(|e| RingError::Memory(format!("size of the ring file: {e}")))?
            .len();
        let capacity = size.saturating_sub(DATA);
        if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) || !capacity.is_power_of_two() {
            return Err(RingError::Size(size));
        }
        let file = Arc::new(file);
        let region = MmapRegion::from_file(FileOffset::from_arc(file.clone(), 0), size as usize)
            .map_err(|e| RingError::Memory(format!("mmap: {e}")))?;
        let region = GuestRegionMmap::new(region, GuestAddress(0))
            .ok_or_else(|| RingError::Memory("mmap region".into()))?;

        Ok(Arc::new(SharedRing {
            file,
            region,
            capacity,
        }))
    }

    /// The shared file, to hand to the peer.
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// Data bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    fn load(&self, at: u64, order: Ordering) -> u64 {
        // Cannot fail: every header field lies in the mapped first page.
        self.region
            .load(MemoryRegionAddress(at), order)
            .unwrap_or(u64::MAX)
    }

    fn store(&self, at: u64, value: u64, order: Ordering) {
        // Cannot fail, as for `load`.
        let _ = self.region.store(value, MemoryRegionAddress(at), order);
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

    /// Copies between `bytes` and the data area starting at stream byte
    /// `at` (wrapping); `write` chooses the direction.
    fn copy(&self, at: u64, bytes: CopyDir<'_>) {
        let len = match &bytes {
            CopyDir::In(b) => b.len(),
            CopyDir::Out(b) => b.len(),
        } as u64;
        let start = at % self.capacity;
        let first = len.min(self.capacity - start) as usize;
        // Both parts lie inside the data area (start < capacity, len ≤
        // capacity), so the copies cannot fail.
        let data = |at: u64, len: usize| {
            self.region
                .get_slice(MemoryRegionAddress(DATA + at), len)
                .ok()
        };
        match bytes {
            CopyDir::In(b) => {
                let (a, rest) = b.split_at(first);
                for (at, part) in [(start, a), (0, rest)] {
                    if let Some(dst) = data(at, part.len()) {
                        dst.copy_from(part);
                    }
                }
            }
            CopyDir::Out(b) => {
                let (a, rest) = b.split_at_mut(first);
                for (at, part) in [(start, a), (0, rest)] {
                    if let Some(src) = data(at, part.len()) {
                        src.copy_to(part);
                    }
                }
            }
        }
    }
}

enum CopyDir<'a> {
    In(&'a [u8]),
    Out(&'a mut [u8]),
}

/// The writing end of a ring (the process that created it).
#[derive(Debug)]
pub struct RingWriter {
    ring: Arc<SharedRing>,
    head: u64,
}

impl RingWriter {
    /// The writing end of `ring`; nothing must have been written to it.
    pub fn new(ring: Arc<SharedRing>) -> Self {
        let head = ring.load(HEAD, Ordering::Relaxed);
        RingWriter { ring, head }
    }

    /// Copies as much of `slices` (in order) as there is room for and
    /// publishes it; returns the bytes taken (0 when the ring is full).
    pub fn write<S: std::ops::Deref<Target = [u8]>>(
        &mut self,
        slices: &[S],
    ) -> Result<usize, RingError> {
        let ring = &self.ring;
        let tail = ring.load(TAIL, Ordering::Acquire);
        let mut room = ring.capacity - ring.checked(self.head, tail)?;
        let mut taken = 0usize;
        for s in slices {
            if room == 0 {
                break;
            }
            let n = (s.len() as u64).min(room) as usize;
            let part = s.get(..n).unwrap_or_default();
            ring.copy(self.head + taken as u64, CopyDir::In(part));
            taken += n;
            room -= n as u64;
        }
        if taken > 0 {
            self.head += taken as u64;
            ring.store(HEAD, self.head, Ordering::Release);
        }
        Ok(taken)
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

    /// Bytes written and not yet read (checked).
    pub fn pending(&self) -> Result<u64, RingError> {
        let tail = self.ring.load(TAIL, Ordering::Acquire);
        self.ring.checked(self.head, tail)
    }
}

/// The reading end of a ring (the peer process).
#[derive(Debug)]
pub struct RingReader {
    ring: Arc<SharedRing>,
    tail: u64,
}

impl RingReader {
    /// The reading end of `ring`.
    pub fn new(ring: Arc<SharedRing>) -> Self {
        let tail = ring.load(TAIL, Ordering::Relaxed);
        RingReader { ring, tail }
    }

    /// Copies up to `out.len()` bytes of the stream into `out` and frees
    /// their room; returns how many (0 when the ring is empty).
    pub fn read(&mut self, out: &mut [u8]) -> Result<usize, RingError> {
        let ring = &self.ring;
        let head = ring.load(HEAD, Ordering::Acquire);
        let used = ring.checked(head, self.tail)?;
        let n = used.min(out.len() as u64) as usize;
        if n > 0 {
            if let Some(dst) = out.get_mut(..n) {
                ring.copy(self.tail, CopyDir::Out(dst));
            }
            self.tail += n as u64;
            ring.store(TAIL, self.tail, Ordering::Release);
        }
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
    /// after a read).
    pub fn writer_waits(&self) -> bool {
        // As in `RingWriter::reader_asleep`, for the tail just published.
        fence(Ordering::SeqCst);
        self.ring.load(WRITER_WAITING, Ordering::SeqCst) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer on a new ring and a reader on a second mapping of the same
    /// file, as the peer process would have it.
    fn pair(capacity: u64) -> (RingWriter, RingReader, Arc<SharedRing>) {
        let ring = SharedRing::create(capacity).unwrap();
        let file = ring.file().try_clone().unwrap();
        let peer = SharedRing::open(file).unwrap();
        (RingWriter::new(ring), RingReader::new(peer.clone()), peer)
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
    }

    #[test]
    fn files_that_are_not_rings_are_refused() {
        for size in [0, 4096, DATA + 4095, DATA + 6000] {
            let f = crate::memfd::create_size_sealed("ibtca-test", size).unwrap();
            assert!(
                matches!(SharedRing::open(f), Err(RingError::Size(s)) if s == size),
                "size {size}"
            );
        }
        // The right size, but a peer could still shrink it under us.
        let f = crate::memfd::create("ibtca-test", DATA + 4096).unwrap();
        assert!(matches!(SharedRing::open(f), Err(RingError::Unsealed)));
        let ring = SharedRing::create(5000).unwrap();
        assert_eq!(ring.capacity(), 8192, "rounded up to a power of two");
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
