//! Frames for one vectored write ([`Batch`]): `Credit` frames, then
//! `Packet` frames, short packets copied into one byte buffer and long ones
//! written from their own buffers.

use std::collections::VecDeque;
use std::io;

use ibtca_protocol::link::FRAME_HEADER_LEN;

use super::super::vl::Queued;
#[cfg(test)]
use super::super::MAX_BODY;

/// Most packets one `write` carries.
pub(crate) const BATCH_PACKETS: usize = 256;
/// A batch stops growing once its packets reach this many bytes.
pub(crate) const BATCH_BYTES: usize = 256 * 1024;
/// Packets shorter than this are copied into a batch's byte buffer (an
/// iovec per tiny packet costs more than the copy); longer ones are written
/// from their own buffers.
pub(super) const COPY_BELOW: usize = 512;

/// The type byte of a `Packet` frame.
const PACKET_FRAME_TYPE: u8 = 2;
/// The type byte of a `Credit` frame.
const CREDIT_FRAME_TYPE: u8 = 4;

/// The header of a `Packet` frame around a packet of `len` bytes.
pub(super) fn frame_header(len: usize) -> [u8; FRAME_HEADER_LEN] {
    let [a, b, c, d] = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    [a, b, c, d, PACKET_FRAME_TYPE]
}

/// Frames for one vectored write: `Credit` frames first, then `Packet`
/// Frames for one vectored write: `Credit` frames first, then `Packet`
/// frames. The byte stream is `bytes` with each of `large`'s packets
/// inserted at the offset it is paired with.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Frame headers, `Credit` frames and short packets, back to back.
    pub(super) bytes: Vec<u8>,
    /// Packets written from their own buffers, each with the offset in
    /// `bytes` it follows (offsets never decrease).
    pub(super) large: Vec<(usize, Vec<u8>)>,
    /// Total bytes of `large`'s packets.
    pub(super) large_bytes: usize,
    /// Bytes of the stream already written (by a direct, non-blocking send
    /// or the writer).
    pub(super) written: usize,
    /// Packets framed in `bytes`.
    pub packets: usize,
    /// Bytes of those packets (frame headers not counted).
    pub packet_bytes: usize,
    /// Tags of the tagged packets framed in `bytes`, reported once written.
    pub(super) tags: Vec<u64>,
    /// Packets the writer took, framed outside the lock
    /// ([`Batch::frame_items`]).
    pub(super) items: VecDeque<Queued>,
    /// Tags of packets discarded in `send` (fault drops) or written
    /// directly, for the writer to report.
    pub(super) done: Vec<u64>,
    /// The tx counters already include the packets in `bytes` (counted
    /// before the direct send).
    pub(super) counted: bool,
    /// Buffers of the packets framed by the writer, emptied, to hand back
    /// to the queue (and so to senders) at the next `take`.
    pub(super) emptied: Vec<Vec<u8>>,
}

impl Batch {
    pub(super) fn is_full(&self) -> bool {
        self.packets + self.items.len() >= BATCH_PACKETS || self.packet_bytes >= BATCH_BYTES
    }

    /// Frames `packet`; returns its buffer, emptied, when it was copied
    /// (the batch keeps a long packet's buffer until it is written:
    /// [`Batch::release`]).
    pub(super) fn push_packet(&mut self, mut packet: Vec<u8>, tag: Option<u64>) -> Option<Vec<u8>> {
        self.bytes.extend_from_slice(&frame_header(packet.len()));
        self.packets += 1;
        self.packet_bytes += packet.len();
        self.tags.extend(tag);
        if packet.len() >= COPY_BELOW {
            self.large_bytes += packet.len();
            self.large.push((self.bytes.len(), packet));
            return None;
        }
        self.bytes.extend_from_slice(&packet);
        packet.clear();
        Some(packet)
    }

    /// Length of the whole stream.
    pub(super) fn len(&self) -> usize {
        self.bytes.len() + self.large_bytes
    }

    /// Everything is written (or there was nothing).
    pub fn is_written(&self) -> bool {
        self.written >= self.len()
    }

    /// The stream's pieces in order: the bytes before each long packet,
    /// the packet, and after the last one the rest of `bytes`.
    pub(super) fn pieces(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.large.iter().map(|(at, _)| *at));
        let tail = self.large.last().map_or(0, |(at, _)| *at);
        starts
            .zip(&self.large)
            .flat_map(|(from, (at, packet))| {
                [self.bytes.get(from..*at).unwrap_or_default(), packet]
            })
            .chain(std::iter::once(self.bytes.get(tail..).unwrap_or_default()))
    }

    /// Slices of the stream from byte `written` on, in order, for one
    /// vectored write.
    pub(super) fn unwritten_slices(&self) -> Vec<io::IoSlice<'_>> {
        let mut skip = self.written;
        let mut out = Vec::with_capacity(2 * self.large.len() + 1);
        for piece in self.pieces() {
            if skip >= piece.len() {
                skip -= piece.len();
                continue;
            }
            out.push(io::IoSlice::new(piece.get(skip..).unwrap_or_default()));
            skip = 0;
        }
        out
    }

    /// Takes the buffers of the long packets out (emptied), for reuse once
    /// the batch is written or abandoned.
    pub(super) fn release(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.large_bytes = 0;
        self.large.drain(..).map(|(_, mut p)| {
            p.clear();
            p
        })
    }

    pub(super) fn push_credit(&mut self, vl: u8, credits: u16) {
        self.bytes.extend_from_slice(&3u32.to_be_bytes());
        self.bytes.push(CREDIT_FRAME_TYPE);
        self.bytes.push(vl);
        self.bytes.extend_from_slice(&credits.to_be_bytes());
    }

    /// Frames the packets the writer took.
    pub(super) fn frame_items(&mut self) {
        while let Some(q) = self.items.pop_front() {
            if let Some(packet) = self.push_packet(q.packet, q.tag) {
                self.emptied.push(packet);
            }
        }
    }

    /// Empties the batch, keeping its buffers (long packets' buffers move
    /// to `emptied`).
    pub fn clear(&mut self) {
        let large: Vec<Vec<u8>> = self.release().collect();
        self.emptied.extend(large);
        self.bytes.clear();
        self.written = 0;
        self.packets = 0;
        self.packet_bytes = 0;
        self.tags.clear();
        self.items.clear();
        self.done.clear();
        self.counted = false;
    }

    /// The whole stream in one buffer (tests).
    #[cfg(test)]
    pub fn stream(&self) -> Vec<u8> {
        self.pieces().flatten().copied().collect()
    }

    /// The packets of the batch, decoded again (for tests; `Credit` frames
    /// are skipped).
    #[cfg(test)]
    pub fn decode(&self) -> Vec<Vec<u8>> {
        use ibtca_protocol::link::{Frame, FrameDecoder};
        let mut decoder = FrameDecoder::new(MAX_BODY);
        decoder
            .feed(&self.stream())
            .filter_map(|f| match f {
                Ok(Frame::Packet(p)) => Some(p),
                Ok(Frame::Credit { .. }) => None,
                other => panic!("not a packet frame: {other:?}"),
            })
            .collect()
    }
}

// The frame layout written by `Batch` is the protocol crate's.
#[cfg(test)]
#[test]
fn batch_frames_match_the_protocol_encoding() {
    use ibtca_protocol::link::Frame;
    let mut batch = Batch::default();
    batch.push_credit(3, 0x1234);
    batch.push_packet(vec![1, 2, 3], None);
    let mut want = Vec::new();
    Frame::Credit {
        vl: 3,
        credits: 0x1234,
    }
    .encode(&mut want)
    .unwrap();
    Frame::Packet(vec![1, 2, 3]).encode(&mut want).unwrap();
    assert_eq!(batch.stream(), want);
}

// Long packets are written from their own buffers; a write that stops
// anywhere resumes at the right byte.
#[cfg(test)]
#[test]
fn long_packets_go_out_from_their_buffers_and_partial_writes_resume() {
    use ibtca_protocol::link::Frame;
    let long: Vec<u8> = (0..COPY_BELOW + 7).map(|i| i as u8).collect();
    let mut batch = Batch::default();
    batch.push_credit(1, 5);
    assert_eq!(batch.push_packet(long.clone(), Some(9)), None, "kept");
    let short = batch.push_packet(vec![1, 2, 3], None).expect("copied");
    assert!(
        short.is_empty() && short.capacity() >= 3,
        "emptied for reuse"
    );
    assert_eq!(batch.push_packet(long.clone(), None), None);
    let mut want = Vec::new();
    Frame::Credit { vl: 1, credits: 5 }
        .encode(&mut want)
        .unwrap();
    for p in [&long, &vec![1, 2, 3], &long] {
        Frame::Packet(p.clone()).encode(&mut want).unwrap();
    }
    assert_eq!(batch.stream(), want);
    assert_eq!((batch.packets, batch.len()), (3, want.len()));
    for written in [0, 1, 9, 14, 15, 600, want.len() - 1, want.len()] {
        batch.written = written;
        let got: Vec<u8> = batch
            .unwritten_slices()
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect();
        assert_eq!(got, want[written..], "from byte {written}");
        assert!(batch.unwritten_slices().iter().all(|s| !s.is_empty()));
        assert_eq!(batch.is_written(), written == want.len());
    }
    batch.clear();
    assert_eq!(batch.emptied.len(), 2, "both long buffers back");
    assert!(batch.emptied.iter().all(Vec::is_empty));
    assert_eq!((batch.len(), batch.packets), (0, 0));
}
