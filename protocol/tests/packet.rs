//! Whole packets: hand-written vectors and every `ParseError`/`BuildError`.

mod common;

use common::{hex, reseal};
use ibtca_protocol::headers::{Aeth, AtomicEth, Grh, Lnh, Reth};
use ibtca_protocol::packet::{MAX_PACKET_LEN, VCRC_LEN};
use ibtca_protocol::{BuildError, ExtHeader, Opcode, Packet, PacketView, ParseError};

/// RC SEND ONLY "hello", local. Header bytes written by hand from the IBA
/// layouts; ICRC and VCRC computed outside this crate (Python: `zlib.crc32`
/// over the bytes with LRH.VL and BTH.resv8a set to ones; the VCRC with a
/// bitwise reflected CRC-16, polynomial 0x100B, init and final XOR 0xFFFF).
const SEND_ONLY: &str = "
    00 02 0002 0008 0001
    04 30 ffff 00000011 80000000
    68656c6c6f 000000
    8a19f7a4
    5e54";

/// RC ACKNOWLEDGE with a GRH (LNH 3), VL 1; same provenance as above, with
/// the whole LRH, GRH TClass/FlowLabel/HopLmt and BTH.resv8a as ones.
const GLOBAL_ACK: &str = "
    10 03 0003 0011 0004
    60000000 0014 1b 01
    fe800000000000000000000000000001
    fe800000000000000000000000000002
    11 00 ffff 00000012 0000002a
    1f000005
    518ec362
    36b4";

fn send_only() -> Packet {
    let mut p = Packet::new(Opcode::RcSendOnly);
    p.lrh.dlid = 2;
    p.lrh.slid = 1;
    p.bth.dest_qp = 0x11;
    p.bth.ack_req = true;
    p.payload = b"hello".to_vec();
    p
}

fn global_ack() -> Packet {
    let mut p = Packet::new(Opcode::RcAcknowledge);
    p.lrh.vl = 1;
    p.lrh.dlid = 3;
    p.lrh.slid = 4;
    let mut grh = Grh {
        hop_limit: 1,
        ..Grh::default()
    };
    grh.sgid[..2].copy_from_slice(&[0xfe, 0x80]);
    grh.dgid = grh.sgid;
    grh.sgid[15] = 1;
    grh.dgid[15] = 2;
    p.grh = Some(grh);
    p.bth.dest_qp = 0x12;
    p.bth.psn = 0x2a;
    p.ext.aeth = Some(Aeth::ack(31, 5));
    p
}

#[test]
fn hand_written_local_packet() {
    let bytes = hex(SEND_ONLY);
    assert_eq!(bytes.len(), 34);
    assert_eq!(send_only().build().unwrap(), bytes);
    let view = PacketView::parse(&bytes).unwrap();
    assert_eq!(view.opcode(), Opcode::RcSendOnly);
    assert_eq!(view.payload, b"hello");
    assert_eq!((view.lrh.pkt_len, view.bth.pad_cnt), (8, 3));
    assert_eq!((view.icrc, view.vcrc), (0xa4f7_198a, 0x545e));
    assert_eq!(view.bytes(), &bytes[..]);
    let mut expected = send_only();
    expected.finalize().unwrap();
    assert_eq!(view.to_packet(), expected);
}

#[test]
fn hand_written_global_packet() {
    let bytes = hex(GLOBAL_ACK);
    assert_eq!(bytes.len(), 17 * 4 + 2);
    assert_eq!(global_ack().build().unwrap(), bytes);
    let view = PacketView::parse(&bytes).unwrap();
    assert_eq!(view.lrh.lnh, Lnh::IbaGlobal);
    assert_eq!(view.grh.unwrap().pay_len, 20);
    assert_eq!(
        view.ext.aeth,
        Some(Aeth {
            syndrome: 0x1f,
            msn: 5
        })
    );
    assert!(view.payload.is_empty());
    assert_eq!(view.info().name, "RC Acknowledge");
}

/// Changes a built packet with `f`, then recomputes its CRCs so that the
/// change itself is what parsing trips over.
fn mutated(packet: &Packet, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = packet.build().unwrap();
    f(&mut bytes);
    reseal(&mut bytes);
    bytes
}

fn set_pkt_len(bytes: &mut [u8], words: u16) {
    bytes[4..6].copy_from_slice(&words.to_be_bytes());
}

#[test]
fn every_parse_error() {
    use ParseError::*;
    let local = send_only();
    let global = global_ack();
    let parse = |b: &[u8]| PacketView::parse(b).map(|_| ());

    assert_eq!(
        parse(&[0; 5]),
        Err(Truncated {
            needed: 8,
            available: 5
        })
    );
    assert_eq!(parse(&mutated(&local, |b| b[0] |= 1)), Err(LinkVersion(1)));
    assert_eq!(
        parse(&mutated(&local, |b| b[1] &= !3)),
        Err(LinkNextHeader(0))
    );
    assert_eq!(
        parse(&mutated(&local, |b| b[1] ^= 3)),
        Err(LinkNextHeader(1))
    );
    assert_eq!(
        parse(&mutated(&local, |b| set_pkt_len(b, 9))),
        Err(PacketLength { words: 9, len: 34 })
    );
    assert_eq!(
        parse(&local.build().unwrap()[..33]),
        Err(PacketLength { words: 8, len: 33 })
    );
    assert_eq!(
        parse(&mutated(&global, |b| b[8] = 0x40)),
        Err(GrhVersion(4))
    );
    assert_eq!(
        parse(&mutated(&global, |b| b[14] = 0x11)),
        Err(GrhNextHeader(0x11))
    );
    assert_eq!(
        parse(&mutated(&global, |b| b[13] = 24)),
        Err(GrhPayloadLength {
            expected: 20,
            found: 24
        })
    );
    assert_eq!(
        parse(&mutated(&local, |b| b[9] |= 2)),
        Err(TransportVersion(2))
    );
    assert_eq!(
        parse(&mutated(&local, |b| b[8] = 0x15)),
        Err(UnknownOpcode(0x15))
    );
    assert_eq!(
        parse(&mutated(&local, |b| b[8] = 0x20)),
        Err(UnknownOpcode(0x20))
    );
    // A global packet with a GRH cut short: PktLen 4 words = LRH + 2 words.
    let short = mutated(&global, |b| {
        b.truncate(18);
        set_pkt_len(b, 4);
    });
    assert_eq!(
        parse(&short),
        Err(Truncated {
            needed: 48,
            available: 12
        })
    );
    // RDMA WRITE FIRST whose RETH is cut short.
    let mut write = Packet::new(Opcode::RcRdmaWriteFirst);
    write.ext.reth = Some(Reth::default());
    let cut = mutated(&write, |b| {
        b.drain(24..36); // 12 of the RETH's 16 bytes
        let words = (b.len() as u16 - 2) / 4;
        set_pkt_len(b, words);
    });
    assert!(matches!(parse(&cut), Err(Truncated { .. })));
    // SEND ONLY with no payload but PadCnt 3.
    let empty = Packet::new(Opcode::RcSendOnly);
    assert_eq!(
        parse(&mutated(&empty, |b| b[9] |= 0x30)),
        Err(Pad {
            pad: 3,
            available: 0
        })
    );
    // An ACK with four payload bytes.
    let ack = mutated(&global, |b| {
        b.splice(64..64, [1, 2, 3, 4]);
        set_pkt_len(b, 18);
        b[13] = 24; // GRH PayLen follows
    });
    assert_eq!(
        parse(&ack),
        Err(UnexpectedPayload {
            opcode: Opcode::RcAcknowledge,
            len: 4
        })
    );
    // Payload changed, VCRC recomputed, ICRC not.
    let mut bad_icrc = local.build().unwrap();
    bad_icrc[20] ^= 0x20;
    let n = bad_icrc.len();
    let v = ibtca_protocol::crc::vcrc(&bad_icrc[..n - 2]);
    bad_icrc[n - 2..].copy_from_slice(&v.to_le_bytes());
    assert!(matches!(
        parse(&bad_icrc),
        Err(Icrc {
            found: 0xa4f7_198a,
            ..
        })
    ));
    // Any change without resealing trips the VCRC.
    let mut bad_vcrc = local.build().unwrap();
    bad_vcrc[20] ^= 0x20;
    assert!(matches!(parse(&bad_vcrc), Err(Vcrc { found: 0x545e, .. })));
}

#[test]
fn variant_fields_do_not_disturb_the_icrc() {
    // A switch may rewrite VL and FECN/BECN (and recompute the VCRC only).
    let mut bytes = send_only().build().unwrap();
    bytes[0] |= 0x70;
    bytes[12] |= 0xc0;
    let n = bytes.len();
    let v = ibtca_protocol::crc::vcrc(&bytes[..n - 2]);
    bytes[n - 2..].copy_from_slice(&v.to_le_bytes());
    let view = PacketView::parse(&bytes).unwrap();
    assert_eq!(view.lrh.vl, 7);
    assert!(view.bth.fecn && view.bth.becn);
}

#[test]
fn every_build_error() {
    let mut p = Packet::new(Opcode::RcCompareSwap);
    assert_eq!(
        p.build(),
        Err(BuildError::MissingHeader {
            opcode: Opcode::RcCompareSwap,
            header: ExtHeader::AtomicEth
        })
    );
    p.ext.atomic_eth = Some(AtomicEth::default());
    p.ext.reth = Some(Reth::default());
    assert_eq!(
        p.build(),
        Err(BuildError::UnexpectedHeader {
            opcode: Opcode::RcCompareSwap,
            header: ExtHeader::Reth
        })
    );
    p.ext.reth = None;
    p.payload = vec![0; 8];
    assert_eq!(
        p.build(),
        Err(BuildError::UnexpectedPayload {
            opcode: Opcode::RcCompareSwap,
            len: 8
        })
    );
    let mut big = Packet::new(Opcode::RcSendOnly);
    big.payload = vec![0; MAX_PACKET_LEN];
    assert!(matches!(
        big.build(),
        Err(BuildError::TooLong { max: 8188, .. })
    ));
    // The largest payload that fits: 8188 - LRH - BTH - ICRC.
    big.payload = vec![0x5a; 8188 - 8 - 12 - 4];
    let bytes = big.build().unwrap();
    assert_eq!(bytes.len(), MAX_PACKET_LEN);
    assert_eq!(PacketView::parse(&bytes).unwrap().lrh.pkt_len, 2047);
    big.payload.push(0);
    assert!(big.build().is_err());
    assert_eq!(VCRC_LEN, 2);
}

/// Every payload length around the pad, with and without a GRH, cut at
/// three places: `check(head, rest, want)` for a packet whose payload is
/// `head`'s and then `rest`, and `want` the bytes `build` gives for it.
fn for_each_split_packet(mut check: impl FnMut(&Packet, &[u8], &[u8])) {
    for len in 0..40usize {
        for split in [0, len / 2, len] {
            for global in [false, true] {
                let mut whole = send_only();
                whole.payload = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
                if global {
                    whole.grh = Some(Grh::default());
                }
                let want = whole.build().unwrap();
                let mut head = whole.clone();
                let rest = head.payload.split_off(split);
                check(&head, &rest, &want);
            }
        }
    }
}

#[test]
fn build_into_fills_the_payload_in_place() {
    use ibtca_protocol::FillError;
    // Part of the payload in `payload` and the rest filled in place: the
    // same bytes as `build`, appended after what `out` held.
    for_each_split_packet(|head, rest, want| {
        let mut out = vec![0xee; 3];
        head.build_into(&mut out, rest.len(), |buf: &mut [u8]| {
            buf.copy_from_slice(rest);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(&out[..3], &[0xee; 3]);
        assert_eq!(&out[3..], want, "{head:?} + {} bytes", rest.len());
    });
    // Appending the payload gives the same bytes; appending the wrong
    // number of bytes is an error that leaves `out` as it was.
    let mut whole = send_only();
    whole.payload = (0..37u8).collect();
    let want = whole.build().unwrap();
    let mut head = whole.clone();
    let rest = head.payload.split_off(5);
    let mut out = vec![7];
    head.build_appending(&mut out, rest.len(), |out: &mut Vec<u8>| {
        out.extend_from_slice(&rest);
        Ok::<(), ()>(())
    })
    .unwrap();
    assert_eq!(out[1..], want[..]);
    for wrong in [rest.len() - 1, rest.len() + 1] {
        let mut out = vec![7];
        let r = head.build_appending(&mut out, rest.len(), |out: &mut Vec<u8>| {
            out.extend(std::iter::repeat_n(1, wrong));
            Ok::<(), ()>(())
        });
        assert_eq!(
            r,
            Err(FillError::Build(ibtca_protocol::BuildError::FillLength {
                expected: rest.len(),
                got: wrong
            }))
        );
        assert_eq!(out, [7]);
    }
    // A failing fill leaves `out` as it was; a bad packet never calls it.
    let mut out = vec![1, 2];
    let r = send_only().build_into(&mut out, 100, |_| Err("gone"));
    assert_eq!(r, Err(FillError::Fill("gone")));
    assert_eq!(out, [1, 2]);
    let ack = Packet::new(Opcode::RcAcknowledge);
    let r = ack.build_into(&mut out, 4, |_| -> Result<(), ()> { panic!("called") });
    assert!(matches!(r, Err(FillError::Build(_))));
    assert_eq!(out, [1, 2]);
}

#[test]
fn build_in_place_writes_what_build_would_into_a_slice_of_its_length() {
    use ibtca_protocol::{BuildError, FillError};
    // Part of the payload filled in place: exactly `build`'s bytes, in a
    // slice of `wire_len_with` bytes that held garbage before (pad bytes
    // too).
    for_each_split_packet(|head, rest, want| {
        assert_eq!(head.wire_len_with(rest.len()), want.len());
        let mut out = vec![0xee; want.len()];
        head.build_in_place(&mut out, rest.len(), |buf: &mut [u8]| {
            buf.copy_from_slice(rest);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(out, want, "{head:?} + {} bytes", rest.len());
    });
    // A slice of another length, a failing fill and a packet that cannot
    // be built are errors; the fill is called only when all else is right.
    let head = send_only();
    for wrong in [0, head.wire_len_with(8) - 1, head.wire_len_with(8) + 1] {
        let mut out = vec![0; wrong];
        let r = head.build_in_place(&mut out, 8, |_| -> Result<(), ()> { panic!("called") });
        assert_eq!(
            r,
            Err(FillError::Build(BuildError::BufferLength {
                expected: head.wire_len_with(8),
                got: wrong
            }))
        );
    }
    let mut out = vec![0; head.wire_len_with(100)];
    let r = head.build_in_place(&mut out, 100, |_| Err("gone"));
    assert_eq!(r, Err(FillError::Fill("gone")));
    let ack = Packet::new(Opcode::RcAcknowledge);
    let mut out = vec![0; ack.wire_len_with(4)];
    let r = ack.build_in_place(&mut out, 4, |_| -> Result<(), ()> { panic!("called") });
    assert!(matches!(r, Err(FillError::Build(_))));
}
