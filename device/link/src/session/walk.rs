//! Reading the peer's frames where they lie in the ring it offered: the
//! reader copies only frame headers (and the few non-packet frames) out,
//! and hands the packets to the sink as spans of the ring
//! ([`PacketBatch::from_ring`]), held until the sink drops them.

use ibtca_protocol::encoded;
use ibtca_protocol::link::{check_header, RawFrame, FRAME_HEADER_LEN};

use super::super::pipe::{RingRx, RxPipe};
use super::super::ring::RingReader;
use super::super::stats::bump;
use super::super::{LinkRx, PacketBatch, MAX_BODY};
use super::{Session, READ_CHUNK};

/// Packets found in the ring since the last hand-over: their spans,
/// offsets from the first byte not yet taken.
#[derive(Default)]
struct Found {
    spans: Vec<(usize, usize)>,
    packets: u64,
    bytes: u64,
}

/// Whether frames can be left in `ring` until their whole length is
/// there: it holds the longest one (otherwise the reader reads it as a
/// byte stream, copying each piece out to free room for the next).
pub(super) fn can_walk(ring: &mut RingRx) -> bool {
    ring.reader().capacity() >= (FRAME_HEADER_LEN + MAX_BODY) as u64
}

impl Session<'_> {
    /// Reads frames out of the peer's ring until the connection ends (the
    /// error says why): the rest of [`Self::serve`] once the peer's
    /// `RingOffer` was taken.
    pub(super) fn serve_ring(&mut self, mut ring: RingRx) -> Result<(), String> {
        self.input = RxPipe::Walked;
        // Bytes after the walked ones that hold only part of a frame.
        let mut partial = 0u64;
        loop {
            let available = match ring.wait_for_more(self.stream, partial) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    if e.kind() == std::io::ErrorKind::InvalidData {
                        bump(&self.shared.counters.rx_bad_frames);
                        tracing::warn!(error = %e, "link peer broke its ring; dropping it");
                    }
                    return Err(format!("read: {e}"));
                }
            };
            if available == partial {
                return Err(if partial > 0 {
                    "peer closed mid-frame".into()
                } else {
                    "peer closed the connection".into()
                });
            }
            partial = self.walk(ring.reader())?;
            self.settle_credits();
        }
    }

    /// Walks the whole frames `ring` holds after its walked part (as its
    /// last `available` counted them), passing packets on in batches of
    /// about [`READ_CHUNK`] bytes and handling the other frames; returns
    /// the bytes left (part of a frame).
    fn walk(&mut self, ring: &mut RingReader) -> Result<u64, String> {
        let mut at = 0u64;
        let mut found = Found::default();
        let result = loop {
            if at >= READ_CHUNK as u64 {
                self.hand_over(ring, &mut at, &mut found);
            }
            let mut header = [0u8; FRAME_HEADER_LEN];
            if !ring.copy_at(at, &mut header) {
                break Ok(());
            }
            let (len, frame_type) = match check_header(header, MAX_BODY) {
                Ok(h) => h,
                Err(e) => break Err(e),
            };
            let body_at = at + FRAME_HEADER_LEN as u64;
            if ring.unwalked() - at < (FRAME_HEADER_LEN + len) as u64 {
                break Ok(());
            }
            let up = self.writer.is_some();
            let is_packet = RawFrame {
                frame_type,
                body: &[],
            }
            .is_packet();
            if is_packet && up {
                // The VL is in the LRH's first byte (VL 0 for an empty
                // body, as for a frame read from the socket).
                let mut lrh0 = [0u8; 1];
                if len > 0 {
                    ring.copy_at(body_at, &mut lrh0);
                }
                found.packets += 1;
                found.bytes += len as u64;
                tracing::trace!(len, "link rx");
                if self.admit(encoded::vl(&lrh0).unwrap_or(0)) {
                    found.spans.push((body_at as usize, body_at as usize + len));
                }
                at = body_at + len as u64;
                continue;
            }
            let mut body = vec![0u8; len];
            ring.copy_at(body_at, &mut body);
            at = body_at + len as u64;
            let decoded = RawFrame {
                frame_type,
                body: &body,
            }
            .decode();
            if !matches!(decoded, Ok(ibtca_protocol::link::Frame::Credit { .. })) {
                self.hand_over(ring, &mut at, &mut found);
            }
            self.handle(decoded)?;
        };
        self.hand_over(ring, &mut at, &mut found);
        match result {
            Ok(()) => Ok(ring.unwalked()),
            // Rejects the peer (counted, logged): always an error.
            Err(e) => self.handle(Err(e)).map(|()| 0),
        }
    }

    /// Takes the `at` bytes walked since the last hand-over and passes the
    /// packets found in them to the sink, in the ring (`at` and `found`
    /// start over).
    fn hand_over(&mut self, ring: &mut RingReader, at: &mut u64, found: &mut Found) {
        let lease = ring.take(std::mem::take(at));
        self.count_rx(&mut found.packets, &mut found.bytes);
        if found.spans.is_empty() {
            return;
        }
        let mut batch = PacketBatch::from_ring(lease, std::mem::take(&mut found.spans));
        self.ready(&mut batch);
        (self.sink)(LinkRx::Packets(batch));
    }
}
