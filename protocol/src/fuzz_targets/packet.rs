//! `ib_packet`: arbitrary bytes through [`PacketView::parse`] and every
//! header parser, and an SMP's packet readdressed in place.

use super::Input;
use crate::crc::{icrc, vcrc};
use crate::encoded;
use crate::headers::{
    Aeth, AtomicAckEth, AtomicEth, Bth, Deth, ExtHeaders, Grh, Ieth, ImmDt, Lnh, Lrh, Reth,
};
use crate::mad::MAD_LEN;
use crate::opcode::OPCODES;
use crate::packet::{ReceivedCrcs, ICRC_LEN, VCRC_LEN};
use crate::PacketView;

/// Bytes of the BTH that are reserved (ignored on parse, written as zero):
/// (offset in the BTH, mask).
const BTH_RESERVED: [(usize, u8); 2] = [(4, 0x3f), (8, 0x7f)];
/// Reserved bits of the LRH: (offset, mask).
const LRH_RESERVED: [(usize, u8); 2] = [(1, 0x0c), (4, 0xf8)];

/// The first byte picks how the rest is shaped: as it is, or with a
/// plausible LRH (LVer 0, the LNH it names, a PktLen that matches) and
/// GRH, with or without valid CRCs, so that parsing gets past its first
/// checks. Every input also goes through parsing untouched.
///
/// Invariants: a packet that parses borrows its payload from inside the
/// input, at the offset its headers give; rebuilding it gives a packet of
/// the same length that parses to the same thing and differs from the
/// input only in reserved bits, pad bytes and the CRCs; rewriting the
/// fields a switch may change (VL, FECN/BECN, and for a routed packet the
/// LRH and GRH TClass/FlowLabel/HopLmt) and recomputing only the VCRC
/// keeps the ICRC valid. Each header parser round-trips what it accepts.
pub fn ib_packet(data: &[u8]) {
    check_packet(data);
    check_headers(data);
    let mut input = Input::new(data);
    let mode = input.u8();
    let variant = input.u8();
    let mut buf = input.rest().to_vec();
    if mode & 1 != 0 {
        shape(&mut buf, mode);
    }
    if mode & 2 != 0 {
        reseal(&mut buf);
    }
    if let Some(view) = check_packet(&buf) {
        check_variant_fields(&view, variant);
    }
    check_readdressed(&buf, variant);
}

/// An SMP's packet readdressed where it lies is its MAD's packet built
/// anew ([`encoded::mad_packet`]); any other bytes are left as they are.
fn check_readdressed(buf: &[u8], variant: u8) {
    let (slid, dlid, stamp) = (u16::from(variant), !u16::from(variant), variant & 1 == 1);
    let mut readdressed = buf.to_vec();
    if !encoded::readdress_smp(&mut readdressed, slid, dlid, stamp) {
        assert_eq!(readdressed, buf, "not an SMP's packet: untouched");
        return;
    }
    let at = encoded::smp_mad_at(buf).expect("an SMP's packet");
    let mad: &[u8; MAD_LEN] = buf[at..].first_chunk().expect("its whole MAD");
    assert_eq!(readdressed, encoded::mad_packet(mad, slid, dlid, stamp));
}

/// Gives `buf` a plausible LRH (and GRH when `mode` picks LNH 3).
fn shape(buf: &mut Vec<u8>, mode: u8) {
    if buf.len() < Lrh::LEN {
        return;
    }
    // PktLen counts 4-byte words through the ICRC; the VCRC follows.
    let keep = buf.len() - (buf.len() - VCRC_LEN) % 4;
    buf.truncate(keep);
    let lnh = (mode >> 2) & 3;
    buf[0] &= 0xf0;
    buf[1] = (buf[1] & 0xfc) | lnh;
    let words = u16::try_from((buf.len() - VCRC_LEN) / 4).unwrap_or(u16::MAX) & Lrh::MAX_PKT_LEN;
    buf[4] = (buf[4] & 0xf8) | (words >> 8) as u8;
    buf[5] = words as u8;
    if lnh == Lnh::IbaGlobal.bits() && buf.len() >= Lrh::LEN + Grh::LEN && mode & 0x10 != 0 {
        let grh = Lrh::LEN;
        buf[grh] = (buf[grh] & 0x0f) | Grh::IP_VERSION << 4;
        let pay_len = buf.len() - VCRC_LEN - Lrh::LEN - Grh::LEN;
        let pay_len = u16::try_from(pay_len).unwrap_or(u16::MAX).to_be_bytes();
        buf[grh + 4..grh + 6].copy_from_slice(&pay_len);
        buf[grh + 6] = Grh::NEXT_HEADER_IBA;
    }
    if mode & 0x20 != 0 {
        // A known opcode, so that the extended headers are read.
        let bth = Lrh::LEN + if lnh == 3 { Grh::LEN } else { 0 };
        if let Some(op) = buf.get_mut(bth) {
            *op = OPCODES[usize::from(*op) % OPCODES.len()].opcode.code();
        }
        if let Some(flags) = buf.get_mut(bth + 1) {
            *flags &= 0xf0;
        }
    }
}

/// Recomputes the ICRC and VCRC of `buf` in place.
fn reseal(buf: &mut [u8]) {
    let n = buf.len();
    if n < ICRC_LEN + VCRC_LEN {
        return;
    }
    let i = icrc(&buf[..n - VCRC_LEN - ICRC_LEN]);
    buf[n - VCRC_LEN - ICRC_LEN..n - VCRC_LEN].copy_from_slice(&i.to_le_bytes());
    let v = vcrc(&buf[..n - VCRC_LEN]);
    buf[n - VCRC_LEN..].copy_from_slice(&v.to_le_bytes());
}

/// Parses `buf` and checks what a successful parse promises.
fn check_packet(buf: &[u8]) -> Option<PacketView<'_>> {
    let parsed = PacketView::parse(buf);
    // A link reader's CRCs, computed beforehand, give the same verdict.
    assert_eq!(
        PacketView::parse_with(buf, &ReceivedCrcs::of(buf)),
        parsed,
        "parse_with"
    );
    let view = parsed.ok()?;
    let n = buf.len();
    assert!(std::ptr::eq(view.bytes(), buf), "the view is the input");
    assert_eq!(view.lrh.lver, 0);
    assert_eq!(view.bth.tver, 0);
    assert_eq!(view.lrh.lnh == Lnh::IbaGlobal, view.grh.is_some());
    assert!(matches!(view.lrh.lnh, Lnh::IbaLocal | Lnh::IbaGlobal));
    assert_eq!(usize::from(view.lrh.pkt_len) * 4 + VCRC_LEN, n);
    assert!(view.ext.check(view.opcode()).is_ok());
    assert!(view.bth.pad_cnt <= 3);
    assert!(view.info().payload || view.payload.is_empty());

    // The payload lies inside the input, right after the headers.
    let headers =
        Lrh::LEN + if view.grh.is_some() { Grh::LEN } else { 0 } + Bth::LEN + view.info().ext_len();
    let start = (view.payload.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    assert_eq!(start, headers, "payload offset");
    let tail = usize::from(view.bth.pad_cnt) + ICRC_LEN + VCRC_LEN;
    assert_eq!(headers + view.payload.len() + tail, n, "payload length");
    assert_eq!(
        view.icrc.to_le_bytes(),
        buf[n - VCRC_LEN - ICRC_LEN..n - VCRC_LEN]
    );
    assert_eq!(view.vcrc.to_le_bytes(), buf[n - VCRC_LEN..]);

    // Rebuilding gives the same packet, the same length, the same bytes
    // but for reserved bits, pad and CRCs.
    let packet = view.to_packet();
    let rebuilt = packet.build().expect("a parsed packet builds");
    assert_eq!(rebuilt.len(), n, "rebuilt length");
    let again = PacketView::parse(&rebuilt).expect("a rebuilt packet parses");
    assert_eq!(again.to_packet(), packet, "rebuilt packet parses the same");
    assert_eq!(
        again.to_packet().build().as_ref(),
        Ok(&rebuilt),
        "canonical"
    );
    let mut differs = vec![0xffu8; n - ICRC_LEN - VCRC_LEN];
    differs[..headers].fill(0);
    for (at, mask) in LRH_RESERVED {
        differs[at] = mask;
    }
    let bth = headers - Bth::LEN - view.info().ext_len();
    for (at, mask) in BTH_RESERVED {
        differs[bth + at] = mask;
    }
    if view.ext.deth.is_some() {
        // DETH: Q_Key (4), reserved (1), SrcQP (3); it comes first.
        differs[bth + Bth::LEN + 4] = 0xff;
    }
    differs[headers..headers + view.payload.len()].fill(0);
    for (i, mask) in differs.iter().enumerate() {
        assert_eq!(buf[i] & !mask, rebuilt[i] & !mask, "rebuilt byte {i}");
    }
    Some(view)
}

/// Rewrites the variant fields of a parsed packet and recomputes only the
/// VCRC: the ICRC must still hold.
fn check_variant_fields(view: &PacketView<'_>, v: u8) {
    let mut b = view.bytes().to_vec();
    let n = b.len();
    b[0] = (b[0] & 0x0f) | (v << 4);
    let bth = Lrh::LEN + if view.grh.is_some() { Grh::LEN } else { 0 };
    b[bth + 4] ^= v & 0xc0;
    if view.grh.is_some() {
        // A router rewrites the LRH (LVer, LNH and PktLen must stay
        // valid) and GRH TClass, FlowLabel and HopLmt.
        b[1] = (b[1] & 0x03) | (v & 0xf0);
        b[2] ^= v;
        b[7] ^= v.rotate_left(3);
        b[Lrh::LEN] ^= v & 0x0f;
        b[Lrh::LEN + 2] ^= v;
        b[Lrh::LEN + 7] ^= v;
    }
    let vc = vcrc(&b[..n - VCRC_LEN]);
    b[n - VCRC_LEN..].copy_from_slice(&vc.to_le_bytes());
    let changed = PacketView::parse(&b).expect("variant fields are outside the ICRC");
    assert_eq!(changed.lrh.vl, v & 0x0f);
    assert_eq!(changed.bth.opcode, view.bth.opcode);
    assert_eq!(changed.payload, view.payload);
}

/// Every header parser on the raw input: what it accepts writes back to
/// something that parses the same.
fn check_headers(data: &[u8]) {
    macro_rules! round_trip {
        ($ty:ty) => {
            if let Ok(h) = <$ty>::parse(data) {
                let mut out = Vec::new();
                h.write(&mut out);
                assert_eq!(out.len(), <$ty>::LEN);
                assert_eq!(<$ty>::parse(&out), Ok(h));
            }
        };
    }
    round_trip!(Lrh);
    round_trip!(Grh);
    round_trip!(Bth);
    round_trip!(Deth);
    round_trip!(Reth);
    round_trip!(AtomicEth);
    round_trip!(Aeth);
    round_trip!(AtomicAckEth);
    round_trip!(ImmDt);
    round_trip!(Ieth);
    if let Some((&code, rest)) = data.split_first() {
        let opcode = OPCODES[usize::from(code) % OPCODES.len()].opcode;
        if let Ok((ext, used)) = ExtHeaders::parse(opcode, rest) {
            assert_eq!(used, opcode.info().ext_len());
            assert!(ext.check(opcode).is_ok());
            let mut out = Vec::new();
            ext.write(opcode, &mut out);
            assert_eq!(ExtHeaders::parse(opcode, &out), Ok((ext, used)));
        }
    }
}
