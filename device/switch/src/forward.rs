//! What the switch checks of one packet on input, before it finds where
//! it goes (the new VL and fresh VCRC for the next hop are
//! `ibtca_protocol::encoded` edits).
//!
//! The input check is the link-level one a switch port does (LRH sane,
//! PktLen matches the frame, VCRC) plus the end-to-end ICRC, so that a packet
//! corrupted on the previous link is dropped and counted here rather than at
//! the destination. The transport headers are not interpreted: a switch
//! forwards every IBA packet, known opcode or not.

use ibtca_protocol::crc::icrc;
use ibtca_protocol::encoded::vcrc_ok;
use ibtca_protocol::headers::{Lnh, Lrh};
use ibtca_protocol::packet::{ICRC_LEN, VCRC_LEN};

use super::stats::DropReason;

/// Checks a received packet; returns its DLID.
pub fn check(packet: &[u8]) -> Result<u16, DropReason> {
    let lrh = Lrh::parse(packet).map_err(|_| DropReason::Malformed)?;
    let global = match lrh.lnh {
        Lnh::IbaLocal => false,
        Lnh::IbaGlobal => true,
        Lnh::Raw | Lnh::IpNonIba => return Err(DropReason::Malformed),
    };
    let headers = Lrh::LEN + if global { 40 } else { 0 } + 12;
    let len = packet.len();
    if usize::from(lrh.pkt_len) * 4 + VCRC_LEN != len || len < headers + ICRC_LEN + VCRC_LEN {
        // A flipped PktLen or LNH bit shows up here: count it as what it
        // is, a CRC error, when the VCRC does not match either.
        return Err(if vcrc_ok(packet) {
            DropReason::Malformed
        } else {
            DropReason::CrcError
        });
    }
    if lrh.lver != 0 {
        return Err(DropReason::Malformed);
    }
    if !vcrc_ok(packet) {
        return Err(DropReason::CrcError);
    }
    let covered_len = len - ICRC_LEN - VCRC_LEN;
    let (covered, rest) = packet.split_at(covered_len);
    let found = rest
        .first_chunk::<ICRC_LEN>()
        .map(|b| u32::from_le_bytes(*b))
        .ok_or(DropReason::Malformed)?;
    if icrc(covered) != found {
        return Err(DropReason::CrcError);
    }
    Ok(lrh.dlid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibtca_protocol::{Opcode, Packet};

    fn packet(dlid: u16) -> Vec<u8> {
        let mut p = Packet::new(Opcode::RcSendOnly);
        p.lrh.dlid = dlid;
        p.lrh.slid = 1;
        p.payload = vec![7; 100];
        p.build().unwrap()
    }

    #[test]
    fn a_good_packet_yields_its_dlid() {
        assert_eq!(check(&packet(42)), Ok(42));
    }

    #[test]
    fn any_flipped_bit_is_caught() {
        let good = packet(3);
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[i] ^= 1 << bit;
                let r = check(&bad);
                assert!(
                    matches!(r, Err(DropReason::CrcError | DropReason::Malformed)),
                    "byte {i} bit {bit}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn truncated_and_garbage_input_is_malformed_not_a_panic() {
        let good = packet(3);
        for n in 0..good.len() {
            assert!(check(&good[..n]).is_err());
        }
        assert!(check(&[0xff; 64]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = check(&bytes);
        }
    }
}
