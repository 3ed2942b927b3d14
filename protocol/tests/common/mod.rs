//! Helpers shared by the integration tests.
#![allow(dead_code)]

use ibtca_protocol::crc::{icrc, vcrc};

/// Decodes hex, ignoring whitespace.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .map(|b| (b as char).to_digit(16).expect("hex digit") as u8)
        .collect();
    digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
}

/// Recomputes the ICRC and VCRC of a packet in place (after a test has
/// changed its headers on purpose).
pub fn reseal(packet: &mut [u8]) {
    let n = packet.len();
    if n < 6 {
        return;
    }
    let i = icrc(&packet[..n - 6]);
    packet[n - 6..n - 2].copy_from_slice(&i.to_le_bytes());
    let v = vcrc(&packet[..n - 2]);
    packet[n - 2..].copy_from_slice(&v.to_le_bytes());
}
