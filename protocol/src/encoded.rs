//! Fields of an encoded packet, read or changed where they lie, without a
//! parse: for the paths that look at one or two fields of every packet (a
//! link queues it by VL, a switch checks its VCRC and moves it to the VL
//! its SL maps to, the engine finds the ACKs it can coalesce).
//!
//! The offsets are those of the header layouts in [`crate::headers`], the
//! ones [`PacketView::parse`](crate::PacketView::parse) reads. Nothing is
//! checked beyond the bytes being there: a read gives what the bytes say
//! (of a malformed packet too, which the parser would reject) and `None`
//! only when they are missing. Nothing here panics.

use crate::crc::{packet_crcs, vcrc};
use crate::headers::{Aeth, Bth, Grh, Lnh, Lrh, MASK_24};
use crate::mad::{Smp, MAD_LEN};
use crate::opcode::{ExtHeader, Opcode};
use crate::packet::{ICRC_LEN, VCRC_LEN};

/// The LRH VL (4 bits).
#[inline]
pub fn vl(packet: &[u8]) -> Option<u8> {
    packet.first().map(|b| b >> 4)
}

/// The LRH SL (4 bits).
#[inline]
pub fn sl(packet: &[u8]) -> Option<u8> {
    packet.get(1).map(|b| b >> 4)
}

/// The LRH LNH (what follows the LRH).
#[inline]
pub fn lnh(packet: &[u8]) -> Option<Lnh> {
    packet.get(1).map(|b| Lnh::from_bits(*b))
}

/// The LRH DLID.
#[inline]
pub fn dlid(packet: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(*packet.get(2..)?.first_chunk()?))
}

/// The LRH SLID.
#[inline]
pub fn slid(packet: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(*packet.get(6..)?.first_chunk()?))
}

/// Where the BTH starts: after the LRH, and after the GRH if LNH says
/// there is one; `None` for a packet without IBA transport.
#[inline]
fn bth_at(packet: &[u8]) -> Option<usize> {
    match lnh(packet)? {
        Lnh::IbaLocal => Some(Lrh::LEN),
        Lnh::IbaGlobal => Some(Lrh::LEN + Grh::LEN),
        Lnh::Raw | Lnh::IpNonIba => None,
    }
}

/// The 12 bytes of the BTH.
#[inline]
fn bth(packet: &[u8]) -> Option<&[u8; Bth::LEN]> {
    packet.get(bth_at(packet)?..)?.first_chunk()
}

/// The BTH opcode, if ibtca knows it.
#[inline]
pub fn opcode(packet: &[u8]) -> Option<Opcode> {
    Opcode::from_u8(bth(packet)?[0])
}

/// The BTH P_Key.
#[inline]
pub fn pkey(packet: &[u8]) -> Option<u16> {
    let b = bth(packet)?;
    Some(u16::from_be_bytes([b[2], b[3]]))
}

/// The BTH destination QP (24 bits).
#[inline]
pub fn dest_qp(packet: &[u8]) -> Option<u32> {
    let b = bth(packet)?;
    Some(u32::from_be_bytes([0, b[5], b[6], b[7]]))
}

/// The BTH PSN (24 bits).
#[inline]
pub fn psn(packet: &[u8]) -> Option<u32> {
    let b = bth(packet)?;
    Some(u32::from_be_bytes([0, b[9], b[10], b[11]]))
}

/// The AETH, for an opcode that carries one (always first after the BTH).
#[inline]
pub fn aeth(packet: &[u8]) -> Option<Aeth> {
    let at = bth_at(packet)?;
    let bth: &[u8; Bth::LEN] = packet.get(at..)?.first_chunk()?;
    let first = Opcode::from_u8(bth[0])?.info().headers.first();
    if first != Some(&ExtHeader::Aeth) {
        return None;
    }
    let word = u32::from_be_bytes(*packet.get(at + Bth::LEN..)?.first_chunk()?);
    Some(Aeth {
        syndrome: (word >> 24) as u8,
        msn: word & MASK_24,
    })
}

/// Sets the LRH VL (the low 4 bits of `vl`). The VL is a variant field:
/// the ICRC does not cover it, the VCRC does ([`restamp_vcrc`]).
#[inline]
pub fn set_vl(packet: &mut [u8], vl: u8) {
    if let Some(b) = packet.first_mut() {
        *b = (*b & 0x0f) | ((vl & 0x0f) << 4);
    }
}

/// Sets the LRH DLID and SLID. Both are invariant fields: the ICRC and
/// the VCRC cover them ([`restamp_crcs`]).
#[inline]
pub fn set_lids(packet: &mut [u8], dlid: u16, slid: u16) {
    if let Some(lrh) = packet.first_chunk_mut::<{ Lrh::LEN }>() {
        lrh[2..4].copy_from_slice(&dlid.to_be_bytes());
        lrh[6..8].copy_from_slice(&slid.to_be_bytes());
    }
}

/// True if the last two bytes are the VCRC of the rest.
#[inline]
pub fn vcrc_ok(packet: &[u8]) -> bool {
    packet
        .split_last_chunk::<VCRC_LEN>()
        .is_some_and(|(body, v)| vcrc(body) == u16::from_le_bytes(*v))
}

/// Recomputes the VCRC in the last two bytes (after a change to a variant
/// field such as the VL, for the next hop).
#[inline]
pub fn restamp_vcrc(packet: &mut [u8]) {
    if let Some((body, v)) = packet.split_last_chunk_mut::<VCRC_LEN>() {
        *v = vcrc(body).to_le_bytes();
    }
}

/// Recomputes the ICRC and the VCRC in the last six bytes, both from one
/// pass over the packet (after a change to an invariant field, such as a
/// directed-route SMP's hop pointer at a switch on its path).
#[inline]
pub fn restamp_crcs(packet: &mut [u8]) {
    let Some(covered) = packet.len().checked_sub(ICRC_LEN + VCRC_LEN) else {
        return;
    };
    let (body, trailer) = packet.split_at_mut(covered);
    let crcs = packet_crcs(body, None);
    if let Some((icrc, vcrc)) = trailer.split_first_chunk_mut::<ICRC_LEN>() {
        *icrc = crcs.icrc.to_le_bytes();
        vcrc.copy_from_slice(&crcs.vcrc.to_le_bytes());
    }
}

/// Bytes of an SMP's headers: LRH, BTH and DETH.
const SMP_HEADERS_LEN: usize = Lrh::LEN + Bth::LEN + 8;

/// Bytes of an SMP's packet: its headers, the MAD, ICRC and VCRC.
pub const SMP_PACKET_LEN: usize = SMP_HEADERS_LEN + MAD_LEN + ICRC_LEN + VCRC_LEN;

/// An SMP's headers with both LIDs zero, as
/// [`smp_packet_bytes`](crate::mad::smp_packet_bytes) builds them: LRH on
/// VL15, SL 0, IBA local, PktLen 72 words; BTH UD SEND Only to QP0, no
/// pad, P_Key 0xffff, PSN 0; DETH Q_Key 0 from QP0.
const SMP_HEADERS: [u8; SMP_HEADERS_LEN] = [
    0xf0, 0x02, 0, 0, 0x00, 0x48, 0, 0, // LRH
    0x64, 0x00, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, // BTH
    0, 0, 0, 0, 0, 0, 0, 0, // DETH
];

/// An SMP's packet from `slid` to `dlid`: the bytes
/// [`smp_packet_bytes`](crate::mad::smp_packet_bytes) builds, written
/// from fixed headers. With `stamp` false its ICRC and VCRC are left zero
/// ([`icrc_unstamped`]), for a node in the same process, which reads
/// neither; [`stamp_unstamped`] gives it both before it leaves on a wire.
pub fn smp_packet(smp: &Smp, slid: u16, dlid: u16, stamp: bool) -> Vec<u8> {
    mad_packet(&smp.to_bytes(), slid, dlid, stamp)
}

/// [`smp_packet`] of an SMP's MAD as it lies in `mad` (its bytes, not
/// re-encoded: the same packet for the bytes an [`Smp`] encodes to).
pub fn mad_packet(mad: &[u8; MAD_LEN], slid: u16, dlid: u16, stamp: bool) -> Vec<u8> {
    mad_packet_in(mad, slid, dlid, stamp, Vec::new())
}

/// [`mad_packet`] written into `buf`, whose bytes it replaces and whose
/// allocation it keeps when it has room for an SMP's packet (a buffer
/// of a packet that was handled, used again).
pub fn mad_packet_in(
    mad: &[u8; MAD_LEN],
    slid: u16,
    dlid: u16,
    stamp: bool,
    mut packet: Vec<u8>,
) -> Vec<u8> {
    packet.clear();
    packet.reserve_exact(SMP_PACKET_LEN);
    packet.extend_from_slice(&SMP_HEADERS);
    packet.extend_from_slice(mad);
    packet.extend_from_slice(&[0; ICRC_LEN + VCRC_LEN]);
    set_lids(&mut packet, dlid, slid);
    if stamp {
        restamp_crcs(&mut packet);
    }
    packet
}

/// Makes `packet`, an SMP's packet without a GRH or pad whose MAD a
/// node answered where it lies, the packet [`mad_packet`] builds of that
/// MAD from `slid` to `dlid` (its headers rewritten as [`smp_packet`]
/// writes them, its CRCs stamped with `stamp`, else zero): an answer sent
/// in its request's buffer. False, nothing changed, for any other packet
/// ([`smp_mad_at`] does not take it, or it has a pad).
pub fn readdress_smp(packet: &mut [u8], slid: u16, dlid: u16, stamp: bool) -> bool {
    if packet.len() != SMP_PACKET_LEN || smp_mad_at(packet).is_none() {
        return false;
    }
    let (headers, rest) = packet.split_at_mut(SMP_HEADERS_LEN);
    headers.copy_from_slice(&SMP_HEADERS);
    if let Some(crcs) = rest.get_mut(MAD_LEN..) {
        crcs.fill(0);
    }
    set_lids(packet, dlid, slid);
    if stamp {
        restamp_crcs(packet);
    }
    true
}

/// Where the MAD starts in `packet` if its headers say it is an SMP's
/// packet without a GRH: LRH IBA local, BTH UD SEND Only to QP0 of
/// transport version 0, a DETH, a 256-byte payload and its pad. Of a
/// packet whose LRH, length and CRCs were checked already (a switch's
/// input check), that is exactly when
/// [`PacketView::parse`](crate::PacketView::parse) takes it with a UD
/// SEND Only to QP0 and a 256-byte payload, which starts there; `None`
/// for anything else (a GRH too), for the full parse to decide.
#[inline]
pub fn smp_mad_at(packet: &[u8]) -> Option<usize> {
    if lnh(packet)? != Lnh::IbaLocal {
        return None;
    }
    let bth: &[u8; Bth::LEN] = packet.get(Lrh::LEN..)?.first_chunk()?;
    let qp = u32::from_be_bytes([0, bth[5], bth[6], bth[7]]);
    let (pad, tver) = (usize::from((bth[1] >> 4) & 3), bth[1] & 0xf);
    let whole = SMP_HEADERS_LEN + MAD_LEN + pad + ICRC_LEN + VCRC_LEN;
    (bth[0] == Opcode::UdSendOnly as u8 && qp == 0 && tver == 0 && packet.len() == whole)
        .then_some(SMP_HEADERS_LEN)
}

/// [`smp_mad_at`] for a packet whose LRH was not checked yet: also LVer 0
/// and PktLen the packet's length (in words, the VCRC not counted), read
/// where they lie. For a packet built in this process, whose CRCs no one
/// reads, that is exactly when
/// [`PacketView::parse_with`](crate::PacketView::parse_with) (its CRCs
/// taken as right) takes it as an SMP's packet without a GRH (a UD SEND
/// Only to QP0 with a 256-byte payload).
#[inline]
pub fn checked_smp_mad_at(packet: &[u8]) -> Option<usize> {
    let at = smp_mad_at(packet)?;
    let lrh: &[u8; Lrh::LEN] = packet.first_chunk()?;
    let words = usize::from(u16::from_be_bytes([lrh[4], lrh[5]]) & Lrh::MAX_PKT_LEN);
    (lrh[0] & 0xf == 0 && words * 4 + VCRC_LEN == packet.len()).then_some(at)
}

/// The DETH's source QP of a packet [`smp_mad_at`] takes (its DETH right
/// after the BTH).
#[inline]
pub fn smp_src_qp(packet: &[u8]) -> Option<u32> {
    smp_mad_at(packet)?;
    let deth = packet.get(Lrh::LEN + Bth::LEN..)?.first_chunk::<8>()?;
    Some(u32::from_be_bytes([0, deth[5], deth[6], deth[7]]))
}

/// True if the ICRC field reads zero, as [`smp_packet`] leaves a packet
/// built unstamped. A stamped packet whose ICRC is zero reads so too.
#[inline]
pub fn icrc_unstamped(packet: &[u8]) -> bool {
    packet
        .len()
        .checked_sub(ICRC_LEN + VCRC_LEN)
        .and_then(|at| packet.get(at..)?.first_chunk::<ICRC_LEN>())
        .is_some_and(|icrc| *icrc == [0; ICRC_LEN])
}

/// Stamps both CRCs of a packet whose ICRC reads zero
/// ([`icrc_unstamped`]): one built unstamped gets its CRCs; one stamped
/// already whose ICRC happens to be zero gets the same CRCs again.
#[inline]
pub fn stamp_unstamped(packet: &mut [u8]) {
    if icrc_unstamped(packet) {
        restamp_crcs(packet);
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
    fn reads_give_the_transport_fields() {
        use crate::headers::{AckKind, NakCode};
        let mut ack = Packet::new(Opcode::RcAcknowledge);
        ack.lrh.dlid = 0x1234;
        ack.bth.dest_qp = 0xab_cdef;
        ack.bth.psn = 0xfe_dcba;
        ack.bth.ack_req = true;
        ack.bth.becn = true;
        ack.ext.aeth = Some(Aeth::nak(NakCode::RemoteAccessError, 7));
        for grh in [None, Some(Grh::default())] {
            ack.grh = grh;
            let b = ack.build().unwrap();
            let global = if grh.is_some() {
                Lnh::IbaGlobal
            } else {
                Lnh::IbaLocal
            };
            assert_eq!((lnh(&b), dlid(&b)), (Some(global), Some(0x1234)));
            assert_eq!(opcode(&b), Some(Opcode::RcAcknowledge));
            assert_eq!((dest_qp(&b), psn(&b)), (Some(0xab_cdef), Some(0xfe_dcba)));
            let aeth = aeth(&b).unwrap();
            assert_eq!(aeth.kind(), AckKind::Nak(NakCode::RemoteAccessError));
            assert_eq!(aeth.msn, 7);
        }
        let send = packet();
        assert_eq!(opcode(&send), Some(Opcode::RcSendOnly));
        assert_eq!(aeth(&send), None, "SEND carries no AETH");
        let mut raw = send.clone();
        raw[1] &= !3;
        assert_eq!(
            (lnh(&raw), opcode(&raw), psn(&raw)),
            (Some(Lnh::Raw), None, None)
        );
        for n in 0..send.len().min(24) {
            let short = &send[..n];
            assert_eq!(dlid(short).is_some(), n >= 4);
            assert_eq!(psn(short).is_some(), n >= 20);
        }
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
    fn new_lids_get_both_crcs_anew_as_a_build_gives_them() {
        let mut p = packet();
        set_lids(&mut p, 0xffff, 0x1234);
        // The LIDs are under both CRCs; the VCRC is checked first.
        assert!(matches!(
            PacketView::parse(&p),
            Err(ParseError::Vcrc { .. })
        ));
        assert!(!vcrc_ok(&p));
        restamp_crcs(&mut p);
        let mut built = Packet::new(Opcode::RcSendOnly);
        (built.lrh.vl, built.lrh.sl) = (1, 2);
        (built.lrh.dlid, built.lrh.slid) = (0xffff, 0x1234);
        built.payload = vec![7; 100];
        assert_eq!(p, built.build().unwrap());
    }

    #[test]
    fn a_mads_packet_written_into_a_buffer_is_the_same_and_keeps_the_buffers_memory() {
        use crate::mad::PERMISSIVE_LID;
        for smp in crate::mad::packet::tests::sample_smps() {
            let mad = smp.to_bytes();
            for stamp in [true, false] {
                let fresh = mad_packet(&mad, 7, PERMISSIVE_LID, stamp);
                // A packet's buffer of other bytes, longer and shorter.
                for junk in [vec![0xa5; SMP_PACKET_LEN + 40], vec![0x5a; 3], Vec::new()] {
                    let held = junk.capacity() >= SMP_PACKET_LEN;
                    let at = junk.as_ptr();
                    let into = mad_packet_in(&mad, 7, PERMISSIVE_LID, stamp, junk);
                    assert_eq!(into, fresh);
                    if held {
                        assert_eq!(into.as_ptr(), at, "the buffer's memory kept");
                    }
                }
            }
        }
    }

    #[test]
    fn an_smps_packet_is_what_a_build_gives_stamped_and_zero_crcs_unstamped() {
        use crate::mad::{smp_packet_bytes, PERMISSIVE_LID};
        for smp in crate::mad::packet::tests::sample_smps() {
            for (slid, dlid) in [(PERMISSIVE_LID, PERMISSIVE_LID), (1, 0x1234), (0xbeef, 0)] {
                let built = smp_packet_bytes(&smp, slid, dlid).unwrap();
                assert_eq!(smp_packet(&smp, slid, dlid, true), built);
                let mut bare = smp_packet(&smp, slid, dlid, false);
                assert_eq!(bare.len(), SMP_PACKET_LEN);
                let (covered, crcs) = bare.split_at(SMP_PACKET_LEN - ICRC_LEN - VCRC_LEN);
                assert_eq!(covered, &built[..covered.len()]);
                assert_eq!(crcs, [0; ICRC_LEN + VCRC_LEN]);
                assert!(icrc_unstamped(&bare) && !icrc_unstamped(&built));
                stamp_unstamped(&mut bare);
                assert_eq!(bare, built);
                let mut again = built.clone();
                stamp_unstamped(&mut again);
                assert_eq!(again, built, "a stamped packet is left as it is");
                // What a stamped packet whose ICRC is zero gets: the same.
                restamp_crcs(&mut again);
                assert_eq!(again, built);
            }
        }
    }

    /// An SMP's packet changed by `edits` (offset, XOR) in its headers and
    /// `extra` bytes longer, with PktLen fixed up to its length and its
    /// CRCs stamped: what passes a switch's input check.
    fn edited_smp(edits: &[(usize, u8)], extra: usize) -> Vec<u8> {
        use crate::mad::attr::id;
        use crate::mad::{method, SmpRoute};
        let smp = Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0);
        let mut p = smp_packet(&smp, 3, 4, false);
        for &(at, x) in edits {
            p[at % SMP_HEADERS_LEN] ^= x;
        }
        let n = p.len();
        p.splice(n - 6..n - 6, std::iter::repeat_n(0, extra));
        let words = u16::try_from((p.len() - VCRC_LEN) / 4).unwrap();
        let len_field = (u16::from_be_bytes([p[4], p[5]]) & !0x7ff) | (words & 0x7ff);
        p[4..6].copy_from_slice(&len_field.to_be_bytes());
        restamp_crcs(&mut p);
        p
    }

    #[test]
    fn an_smps_mad_is_found_where_a_parse_finds_its_payload() {
        let p = edited_smp(&[], 0);
        assert_eq!(smp_mad_at(&p), Some(SMP_HEADERS_LEN));
        assert_eq!(slid(&p), Some(3));
        let view = PacketView::parse(&p).unwrap();
        assert_eq!(view.payload, &p[SMP_HEADERS_LEN..SMP_HEADERS_LEN + MAD_LEN]);
        // With a pad of 4 bytes' worth counted (PadCnt 0: a 260-byte
        // payload), to QP1, UD SEND with immediate, TVer 1: not an SMP's.
        for (edits, extra) in [
            (vec![], 4),
            (vec![(15, 1)], 0),
            (vec![(8, 1)], 0),
            (vec![(9, 1)], 0),
        ] {
            assert_eq!(
                smp_mad_at(&edited_smp(&edits, extra)),
                None,
                "{edits:?} {extra}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn an_smps_mad_is_found_exactly_when_a_parse_takes_it(
            edits in proptest::collection::vec((0usize..64, 1u8..=255), 0..3),
            extra in 0usize..8,
        ) {
            use crate::packet::ReceivedCrcs;
            let p = edited_smp(&edits, extra * 4 % 12);
            // The switch's input check: LVer 0, an IBA LNH, PktLen (fixed
            // up above), CRCs (stamped above).
            let checked = p[0] & 0xf == 0 && matches!(lnh(&p), Some(Lnh::IbaLocal | Lnh::IbaGlobal));
            proptest::prop_assume!(checked);
            let parsed = PacketView::parse_with(&p, &ReceivedCrcs::trusted(&p))
                .ok()
                .filter(|v| v.opcode() == Opcode::UdSendOnly && v.bth.dest_qp == 0)
                .filter(|v| v.payload.len() == MAD_LEN);
            let found = smp_mad_at(&p);
            if lnh(&p) == Some(Lnh::IbaLocal) {
                proptest::prop_assert_eq!(found.is_some(), parsed.is_some());
            } else {
                proptest::prop_assert_eq!(found, None);
            }
            if let (Some(at), Some(view)) = (found, parsed) {
                proptest::prop_assert_eq!(&p[at..at + MAD_LEN], view.payload);
                proptest::prop_assert_eq!(slid(&p), Some(view.lrh.slid));
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn a_built_smps_mad_is_found_exactly_when_a_trusting_parse_takes_it(
            edits in proptest::collection::vec((0usize..64, 1u8..=255), 0..3),
            extra in 0usize..8,
            len_edit in proptest::prop_oneof![3 => proptest::strategy::Just(0u8), 1 => 1u8..=255],
        ) {
            use crate::packet::ReceivedCrcs;
            // PktLen fixed up by `edited_smp`, then maybe broken again.
            let mut p = edited_smp(&edits, extra * 4 % 12);
            p[5] ^= len_edit;
            let parsed = PacketView::parse_with(&p, &ReceivedCrcs::trusted(&p))
                .ok()
                .filter(|v| v.grh.is_none() && v.opcode() == Opcode::UdSendOnly)
                .filter(|v| v.bth.dest_qp == 0 && v.payload.len() == MAD_LEN);
            let found = checked_smp_mad_at(&p);
            proptest::prop_assert_eq!(found.is_some(), parsed.is_some());
            if let (Some(at), Some(view)) = (found, parsed) {
                proptest::prop_assert_eq!(&p[at..at + MAD_LEN], view.payload);
                proptest::prop_assert_eq!(slid(&p), Some(view.lrh.slid));
                let src_qp = view.ext.deth.map(|d| d.src_qp);
                proptest::prop_assert_eq!(smp_src_qp(&p), src_qp);
            }
        }
    }

    proptest::proptest! {
        /// An SMP's packet readdressed in place is the packet built anew
        /// of its MAD, whatever its headers held; any other is untouched.
        #[test]
        fn an_smp_readdressed_in_place_is_its_mad_built_anew(
            edits in proptest::collection::vec((0usize..64, 1u8..=255), 0..3),
            extra in 0usize..3,
            (slid, dlid) in (proptest::prelude::any::<u16>(), proptest::prelude::any::<u16>()),
            stamp in proptest::prelude::any::<bool>(),
        ) {
            let p = edited_smp(&edits, extra * 4);
            let mut readdressed = p.clone();
            let done = readdress_smp(&mut readdressed, slid, dlid, stamp);
            let whole_smp = smp_mad_at(&p) == Some(SMP_HEADERS_LEN) && p.len() == SMP_PACKET_LEN;
            proptest::prop_assert_eq!(done, whole_smp);
            if done {
                let mad: &[u8; MAD_LEN] = p[SMP_HEADERS_LEN..][..MAD_LEN].try_into().unwrap();
                proptest::prop_assert_eq!(readdressed, mad_packet(mad, slid, dlid, stamp));
            } else {
                proptest::prop_assert_eq!(readdressed, p);
            }
        }
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
            let _ = (vl(&bytes), sl(&bytes), vcrc_ok(&bytes), lnh(&bytes), dlid(&bytes));
            let _ = (opcode(&bytes), dest_qp(&bytes), psn(&bytes), aeth(&bytes));
            let mut b = bytes.clone();
            set_vl(&mut b, v);
            restamp_vcrc(&mut b);
            proptest::prop_assert!(b.len() < VCRC_LEN || vcrc_ok(&b));
            set_lids(&mut b, 0xffff, u16::from(v));
            restamp_crcs(&mut b);
            proptest::prop_assert!(b.len() < ICRC_LEN + VCRC_LEN || vcrc_ok(&b));
            let _ = (icrc_unstamped(&bytes), smp_mad_at(&bytes), slid(&bytes));
            let _ = (checked_smp_mad_at(&bytes), smp_src_qp(&bytes));
            let mut c = bytes.clone();
            stamp_unstamped(&mut c);
        }
    }
}
