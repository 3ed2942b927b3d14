//! Fields of an encoded packet, read or changed where they lie, without a
//! parse: for the paths that look at one or two fields of every packet (a
//! link queues it by VL, a switch checks its VCRC and moves it to the VL
//! its SL maps to).
//!
//! The offsets are those of the header layouts in [`crate::headers`], the
//! ones [`PacketView::parse`](crate::PacketView::parse) reads. Nothing is
//! checked beyond the bytes being there: a read gives what the bytes say
//! (of a malformed packet too, which the parser would reject) and `None`
//! only when they are missing. Nothing here panics.

use crate::crc::vcrc;
use crate::packet::VCRC_LEN;

/// The LRH VL (4 bits).
pub fn vl(packet: &[u8]) -> Option<u8> {
    packet.first().map(|b| b >> 4)
}

/// The LRH SL (4 bits).
pub fn sl(packet: &[u8]) -> Option<u8> {
    packet.get(1).map(|b| b >> 4)
}

/// Sets the LRH VL (the low 4 bits of `vl`). The VL is a variant field:
/// the ICRC does not cover it, the VCRC does ([`restamp_vcrc`]).
pub fn set_vl(packet: &mut [u8], vl: u8) {
    if let Some(b) = packet.first_mut() {
        *b = (*b & 0x0f) | ((vl & 0x0f) << 4);
    }
}

/// True if the last two bytes are the VCRC of the rest.
pub fn vcrc_ok(packet: &[u8]) -> bool {
    packet
        .split_last_chunk::<VCRC_LEN>()
        .is_some_and(|(body, v)| vcrc(body) == u16::from_le_bytes(*v))
}

/// Recomputes the VCRC in the last two bytes (after a change to a variant
/// field such as the VL, for the next hop).
pub fn restamp_vcrc(packet: &mut [u8]) {
    if let Some((body, v)) = packet.split_last_chunk_mut::<VCRC_LEN>() {
        *v = vcrc(body).to_le_bytes();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ParseError;
    use crate::{Opcode, Packet, PacketView};

    fn packet() -> Vec<u8> {
        let mut p = Packet::new(Opcode::RcSendOnly);
        p.lrh.vl = 1;
        p.lrh.sl = 2;
        p.lrh.dlid = 9;
        p.lrh.slid = 1;
        p.payload = vec![7; 100];
        p.build().unwrap()
    }

    #[test]
    fn reads_give_the_lrh_fields() {
        let p = packet();
        assert_eq!((vl(&p), sl(&p)), (Some(1), Some(2)));
        assert!(vcrc_ok(&p));
        assert_eq!((vl(&[]), sl(&[0x30])), (None, None));
        assert_eq!(vl(&[0x30]), Some(3));
        assert!(!vcrc_ok(&[0]));
    }

    #[test]
    fn a_new_vl_gets_a_new_vcrc_and_the_icrc_still_holds() {
        let mut p = packet();
        set_vl(&mut p, 3);
        assert!(matches!(
            PacketView::parse(&p),
            Err(ParseError::Vcrc { .. })
        ));
        assert!(!vcrc_ok(&p));
        restamp_vcrc(&mut p);
        let view = PacketView::parse(&p).expect("VL is a variant field");
        assert_eq!((view.lrh.vl, view.lrh.lver, view.lrh.sl), (3, 0, 2));
        assert_eq!(p[0] >> 4, 3);
    }

    #[test]
    fn short_buffers_are_left_alone() {
        let mut empty: [u8; 0] = [];
        set_vl(&mut empty, 3);
        restamp_vcrc(&mut empty);
        let mut one = [0x05];
        set_vl(&mut one, 0x1f);
        restamp_vcrc(&mut one);
        assert_eq!(one, [0xf5], "only the VL nibble, masked to 4 bits");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600), v in 0u8..=255) {
            let _ = (vl(&bytes), sl(&bytes), vcrc_ok(&bytes));
            let mut b = bytes.clone();
            set_vl(&mut b, v);
            restamp_vcrc(&mut b);
            proptest::prop_assert!(b.len() < VCRC_LEN || vcrc_ok(&b));
        }
    }
}
