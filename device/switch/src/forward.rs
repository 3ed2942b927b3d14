//! What the switch checks of one packet on input, before it finds where
//! it goes (the new VL and fresh VCRC for the next hop are
//! `ibtca_protocol::encoded` edits).
//!
//! The input check is the link-level one a switch port does (LRH sane,
//! PktLen matches the frame, VCRC) plus the end-to-end ICRC, so that a packet
//! corrupted on the previous link is dropped and counted here rather than at
//! the destination. The transport headers are not interpreted: a switch
//! forwards every IBA packet, known opcode or not.
//!
//! Both CRCs come from one pass ([`ReceivedCrcs::of`]). A packet built in
//! this process ([`Origin::Process`]) is taken with the CRCs it carries
//! ([`ReceivedCrcs::trusted`]): no pass at all. Its CRCs are not read
//! either, so a switch that changes a packet for a node in its own
//! process leaves them as they were ([`crate::Wires::in_process`]); one
//! that sends on a wire stamps them.

use ibtca_protocol::encoded::vcrc_ok;
use ibtca_protocol::headers::{Lnh, Lrh};
use ibtca_protocol::packet::{ReceivedCrcs, ICRC_LEN, VCRC_LEN};

use super::stats::DropReason;

/// Where a packet a switch receives comes from, which decides whether its
/// CRCs are computed to check them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Read from a socket (a link to another process): its peer may be
    /// hostile or its bytes damaged, so both CRCs are checked.
    Wire,
    /// Built in this process, by a node its owner hosts too (or checked
    /// when it came in from a wire, and passed on): its CRCs are neither
    /// computed nor read, since a hop within the process leaves them
    /// unstamped ([`crate::Wires::in_process`]).
    Process,
}

impl Origin {
    /// The CRCs `packet` is checked against.
    pub fn crcs(self, packet: &[u8]) -> ReceivedCrcs {
        match self {
            Origin::Wire => ReceivedCrcs::of(packet),
            Origin::Process => ReceivedCrcs::trusted(packet),
        }
    }
}

/// Checks a received packet; returns its DLID.
pub fn check(packet: &[u8]) -> Result<u16, DropReason> {
    check_with(packet, &ReceivedCrcs::of(packet))
}

/// [`check`] against `crcs`, the CRCs of `packet` computed beforehand
/// ([`Origin::crcs`]).
pub fn check_with(packet: &[u8], crcs: &ReceivedCrcs) -> Result<u16, DropReason> {
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
    if !crcs.match_carried(packet) {
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
