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
use std::time::{SystemTime, UNIX_EPOCH};

/// pcap link type for ERF records.
pub const LINKTYPE_ERF: u32 = 197;
/// ERF record type for InfiniBand.
pub const ERF_TYPE_INFINIBAND: u8 = 21;
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

    /// Appends one packet; an error is logged, never propagated (a full
    /// disk must not stop the fabric).
    pub fn record(&self, direction: Direction, packet: &[u8]) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let bytes = record_bytes(now.as_secs(), now.subsec_nanos(), direction, packet);
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = file.write_all(&bytes) {
            tracing::warn!(error = %e, "capture write failed");
        }
    }
}

/// One pcap record holding one ERF record; packets longer than an ERF
/// record can say are cut (never the case for IB packets).
pub fn record_bytes(secs: u64, nanos: u32, direction: Direction, packet: &[u8]) -> Vec<u8> {
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
    out.push(ERF_TYPE_INFINIBAND);
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
}
