//! Packet capture in the format ibdump writes and Wireshark/tshark decode as
//! InfiniBand: a pcap file with link type ERF (197) whose records are each an
//! ERF header of type 21 (InfiniBand) followed by the packet from the LRH
//! through the VCRC.
//!
//! ```text
//! pcap file header (24 bytes, little-endian, magic 0xa1b2c3d4, µs stamps)
//! per packet: pcap record header (16 bytes) then
//!   ERF header (16 bytes, big-endian but the timestamp):
//!     timestamp u64 LE (seconds << 32 | binary fraction of a second)
//!     type u8 = 21, flags u8 (bits 0-1: interface; bit 2: varying length)
//!     rlen u16 (record length, header included), lctr u16 (loss counter),
//!     wlen u16 (wire length of the packet)
//!   the packet
//! ```
//!
//! Interface 0 is what the port received, interface 1 what it sent.
//! Each record is written with one `write`, so the file is readable while
//! the capture runs.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// pcap link type for ERF records.
pub const LINKTYPE_ERF: u32 = 197;
/// ERF record type for InfiniBand.
pub const ERF_TYPE_INFINIBAND: u8 = 21;
/// ERF record type for an ATM cell: its header without the HEC (4
/// bytes), then the 48-byte payload (the ATM gateway's captures).
pub const ERF_TYPE_ATM: u8 = 3;
/// ERF flags bit: records have varying length.
const ERF_FLAG_VLEN: u8 = 0x04;
const ERF_HEADER_LEN: usize = 16;
const SNAPLEN: u32 = 65_535;

/// Which way a captured packet went through the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received from the peer (ERF interface 0).
    Rx,
    /// Sent to the peer (ERF interface 1).
    Tx,
}

/// An open capture file.
#[derive(Debug)]
pub struct Capture {
    file: Mutex<File>,
}

impl Capture {
    /// Creates (truncates) `path` and writes the pcap file header.
    pub fn create(path: &Path) -> io::Result<Capture> {
        let mut file = File::create(path).map_err(|e| {
            io::Error::new(e.kind(), format!("capture file {}: {e}", path.display()))
        })?;
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        header.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        header.extend_from_slice(&SNAPLEN.to_le_bytes());
        header.extend_from_slice(&LINKTYPE_ERF.to_le_bytes());
        file.write_all(&header)?;
        Ok(Capture {
            file: Mutex::new(file),
        })
    }

    /// Appends one packet received now; an error is logged, never
    /// propagated (a full disk must not stop the fabric).
    pub fn record(&self, direction: Direction, packet: &[u8]) {
        self.record_of(ERF_TYPE_INFINIBAND, direction, packet);
    }

    /// [`Self::record`] for an ERF record of another type.
    pub fn record_of(&self, erf_type: u8, direction: Direction, record: &[u8]) {
        let mut file = self.lock();
        let at = now();
        let bytes = record_bytes_of(erf_type, at.as_secs(), at.subsec_nanos(), direction, record);
        if let Err(e) = file.write_all(&bytes) {
            tracing::warn!(error = %e, "capture write failed");
        }
    }

    /// Sends `packet` with `send` and records it as sent when `send` says
    /// it was taken. The record is causal: it is stamped before `send`
    /// runs and written before any other record of this capture can be
    /// (the file stays locked across `send`), so nothing the peer sends in
    /// answer can appear before it, in time or in the file. `send` must
    /// not record into this capture.
    pub fn record_sent(&self, packet: &[u8], send: impl FnOnce() -> bool) -> bool {
        let mut file = self.lock();
        let stamp = now();
        let sent = send();
        if sent {
            Self::append(&mut file, stamp, Direction::Tx, packet);
        }
        sent
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, File> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn append(file: &mut File, at: Duration, direction: Direction, packet: &[u8]) {
        let bytes = record_bytes(at.as_secs(), at.subsec_nanos(), direction, packet);
        if let Err(e) = file.write_all(&bytes) {
            tracing::warn!(error = %e, "capture write failed");
        }
    }
}

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// One pcap record holding one ERF record; packets longer than an ERF
/// record can say are cut (never the case for IB packets).
pub fn record_bytes(secs: u64, nanos: u32, direction: Direction, packet: &[u8]) -> Vec<u8> {
    record_bytes_of(ERF_TYPE_INFINIBAND, secs, nanos, direction, packet)
}

/// [`record_bytes`] for an ERF record of type `erf_type`.
pub fn record_bytes_of(
    erf_type: u8,
    secs: u64,
    nanos: u32,
    direction: Direction,
    packet: &[u8],
) -> Vec<u8> {
    let max = usize::from(u16::MAX) - ERF_HEADER_LEN;
    let packet = packet.get(..max.min(packet.len())).unwrap_or_default();
    let erf_len = ERF_HEADER_LEN + packet.len();
    let mut out = Vec::with_capacity(16 + erf_len);
    let secs32 = u32::try_from(secs).unwrap_or(u32::MAX);
    out.extend_from_slice(&secs32.to_le_bytes());
    out.extend_from_slice(&(nanos / 1000).to_le_bytes());
    let len = u32::try_from(erf_len).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    // ERF timestamp: 32.32 fixed point seconds, little-endian.
    let frac = (u64::from(nanos) << 32) / 1_000_000_000;
    out.extend_from_slice(&((u64::from(secs32) << 32) | frac).to_le_bytes());
    let interface = match direction {
        Direction::Rx => 0,
        Direction::Tx => 1,
    };
    out.push(erf_type);
    out.push(ERF_FLAG_VLEN | interface);
    let rlen = u16::try_from(erf_len).unwrap_or(u16::MAX);
    out.extend_from_slice(&rlen.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // loss counter
    let wlen = u16::try_from(packet.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&wlen.to_be_bytes());
    out.extend_from_slice(packet);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout() {
        let r = record_bytes(5, 500_000_000, Direction::Tx, &[1, 2, 3, 4]);
        assert_eq!(r.len(), 16 + 16 + 4);
        assert_eq!(&r[0..4], &5u32.to_le_bytes());
        assert_eq!(&r[4..8], &500_000u32.to_le_bytes());
        assert_eq!(&r[8..12], &20u32.to_le_bytes());
        let erf = &r[16..];
        assert_eq!(&erf[0..8], &((5u64 << 32) | 0x8000_0000).to_le_bytes());
        assert_eq!((erf[8], erf[9]), (21, 0x05));
        assert_eq!(&erf[10..12], &20u16.to_be_bytes());
        assert_eq!(&erf[14..16], &4u16.to_be_bytes());
        assert_eq!(&erf[16..], &[1, 2, 3, 4]);
    }

    /// (direction, ERF timestamp) of each record in a capture file.
    fn records(path: &Path) -> Vec<(u8, u64)> {
        let b = std::fs::read(path).unwrap();
        let mut at = 24;
        let mut out = vec![];
        while at < b.len() {
            let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
            let erf = &b[at + 16..at + 16 + len];
            out.push((
                erf[9] & 3,
                u64::from_le_bytes(erf[0..8].try_into().unwrap()),
            ));
            at += 16 + len;
        }
        out
    }

    /// What the peer sends back because of a packet (here: recorded from
    /// another thread the moment the packet is handed to the link) is
    /// recorded after it, in the file and in time.
    #[test]
    fn a_sent_packet_is_recorded_before_the_answer_to_it() {
        let path = std::env::temp_dir().join(format!("ibtca-capture-{}.pcap", std::process::id()));
        let c = std::sync::Arc::new(Capture::create(&path).unwrap());
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let answer = {
            let c = c.clone();
            move || {
                c.record(Direction::Rx, b"ack");
                let _ = done_tx.send(());
            }
        };
        let mut peer = None;
        let sent = c.record_sent(b"request", || {
            peer = Some(std::thread::spawn(answer));
            // A capture that wrote the record after sending would let the
            // answer in now; this one holds it until the record is written.
            let early = done_rx.recv_timeout(std::time::Duration::from_millis(300));
            assert!(early.is_err(), "the answer was recorded before the request");
            true
        });
        assert!(sent);
        peer.unwrap().join().unwrap();
        // A packet the link refused is not recorded.
        assert!(!c.record_sent(b"refused", || false));
        let r = records(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!((r[0].0, r[1].0), (1, 0), "Tx (interface 1) first, then Rx");
        assert!(r[0].1 <= r[1].1, "stamped in causal order: {r:?}");
    }
}
