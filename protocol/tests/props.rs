//! Property tests: round trips for every opcode, and no panics on random or
//! mutated input.

mod common;

use common::reseal;
use ibtca_protocol::encoded;
use ibtca_protocol::headers::{
    Aeth, AtomicAckEth, AtomicEth, Bth, Deth, ExtHeaders, Grh, Ieth, ImmDt, Lrh, Reth,
};
use ibtca_protocol::link::{Hello, LinkState};
use ibtca_protocol::opcode::OPCODES;
use ibtca_protocol::packet::ReceivedCrcs;
use ibtca_protocol::{ExtHeader, Frame, FrameDecoder, Packet, PacketView};
use proptest::collection::vec;
use proptest::prelude::*;

fn arb_lrh() -> impl Strategy<Value = Lrh> {
    (0u8..16, 0u8..16, any::<u16>(), any::<u16>()).prop_map(|(vl, sl, dlid, slid)| Lrh {
        vl,
        sl,
        dlid,
        slid,
        ..Lrh::default()
    })
}

fn arb_grh() -> impl Strategy<Value = Grh> {
    (
        any::<u8>(),
        0u32..1 << 20,
        any::<u8>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
    )
        .prop_map(|(traffic_class, flow_label, hop_limit, sgid, dgid)| Grh {
            traffic_class,
            flow_label,
            hop_limit,
            sgid,
            dgid,
            ..Grh::default()
        })
}

/// BTH fields other than the opcode and PadCnt.
fn arb_bth_fields() -> impl Strategy<Value = (bool, bool, u16, bool, bool, u32, bool, u32)> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        0u32..1 << 24,
        any::<bool>(),
        0u32..1 << 24,
    )
}

/// Every extended header, random; the packet keeps those its opcode needs.
fn arb_all_ext() -> impl Strategy<Value = ExtHeaders> {
    (
        (any::<u32>(), 0u32..1 << 24),
        (any::<u64>(), any::<u32>(), any::<u32>()),
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()),
        (any::<u8>(), 0u32..1 << 24),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(d, r, a, k, orig, imm, inv)| ExtHeaders {
            deth: Some(Deth {
                qkey: d.0,
                src_qp: d.1,
            }),
            reth: Some(Reth {
                va: r.0,
                rkey: r.1,
                dma_len: r.2,
            }),
            atomic_eth: Some(AtomicEth {
                va: a.0,
                rkey: a.1,
                swap_add: a.2,
                compare: a.3,
            }),
            aeth: Some(Aeth {
                syndrome: k.0,
                msn: k.1,
            }),
            atomic_ack_eth: Some(AtomicAckEth { orig }),
            immdt: Some(ImmDt { data: imm }),
            ieth: Some(Ieth { rkey: inv }),
        })
}

fn keep(ext: ExtHeaders, info: &ibtca_protocol::OpcodeInfo) -> ExtHeaders {
    ExtHeaders {
        deth: ext.deth.filter(|_| info.has(ExtHeader::Deth)),
        reth: ext.reth.filter(|_| info.has(ExtHeader::Reth)),
        atomic_eth: ext.atomic_eth.filter(|_| info.has(ExtHeader::AtomicEth)),
        aeth: ext.aeth.filter(|_| info.has(ExtHeader::Aeth)),
        atomic_ack_eth: ext
            .atomic_ack_eth
            .filter(|_| info.has(ExtHeader::AtomicAckEth)),
        immdt: ext.immdt.filter(|_| info.has(ExtHeader::ImmDt)),
        ieth: ext.ieth.filter(|_| info.has(ExtHeader::Ieth)),
    }
}

/// A random, finalized packet of any opcode.
fn arb_packet() -> impl Strategy<Value = Packet> {
    (
        0..OPCODES.len(),
        arb_lrh(),
        proptest::option::of(arb_grh()),
        arb_bth_fields(),
        arb_all_ext(),
        prop_oneof![vec(any::<u8>(), 0..64), vec(any::<u8>(), 0..4096)],
    )
        .prop_map(|(i, lrh, grh, b, ext, payload)| {
            let info = &OPCODES[i];
            let (se, mig, pkey, fecn, becn, dest_qp, ack_req, psn) = b;
            let mut p = Packet {
                lrh,
                grh,
                bth: Bth {
                    se,
                    mig,
                    pkey,
                    fecn,
                    becn,
                    dest_qp,
                    ack_req,
                    psn,
                    ..Bth::new(info.opcode)
                },
                ext: keep(ext, info),
                payload: if info.payload { payload } else { Vec::new() },
            };
            p.finalize().unwrap();
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_build_round_trip(p in arb_packet()) {
        let bytes = p.build().unwrap();
        prop_assert_eq!(bytes.len(), p.wire_len());
        prop_assert_eq!(bytes.len() % 4, 2);
        let view = PacketView::parse(&bytes).unwrap();
        prop_assert_eq!(view.bytes(), &bytes[..]);
        prop_assert_eq!(view.to_packet(), p);
    }

    #[test]
    fn every_single_byte_change_is_caught(
        p in arb_packet(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let mut bytes = p.build().unwrap();
        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        prop_assert!(PacketView::parse(&bytes).is_err());
    }

    #[test]
    fn crcs_computed_beforehand_give_the_same_verdict(
        p in arb_packet(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        cut in any::<prop::sample::Index>(),
    ) {
        // What a link reader hands the engine: the CRCs of the very bytes.
        let mut bytes = p.build().unwrap();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let crcs = ReceivedCrcs::of(&bytes);
        prop_assert_eq!(PacketView::parse_with(&bytes, &crcs), PacketView::parse(&bytes));
        // CRCs of other bytes (here: a prefix) are not trusted.
        let short = ReceivedCrcs::of(&bytes[..cut.index(bytes.len())]);
        prop_assert_eq!(PacketView::parse_with(&bytes, &short), PacketView::parse(&bytes));
        let prefix = &bytes[..cut.index(bytes.len())];
        prop_assert_eq!(PacketView::parse_with(prefix, &crcs), PacketView::parse(prefix));
    }

    #[test]
    fn carried_crcs_are_the_computed_ones_exactly_when_the_packet_is_intact(
        p in arb_packet(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    ) {
        let mut bytes = p.build().unwrap();
        prop_assert_eq!(ReceivedCrcs::trusted(&bytes), ReceivedCrcs::of(&bytes));
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let checked = ReceivedCrcs::of(&bytes);
        let covered = bytes.len() - 6;
        let icrc_ok = ibtca_protocol::crc::icrc(&bytes[..covered]).to_le_bytes() == bytes[covered..covered + 4];
        prop_assert_eq!(checked.match_carried(&bytes), encoded::vcrc_ok(&bytes) && icrc_ok);
        prop_assert!(ReceivedCrcs::trusted(&bytes).match_carried(&bytes));
        prop_assert!(!checked.match_carried(&bytes[1..]));
    }

    #[test]
    fn truncated_or_extended_packets_fail(p in arb_packet(), cut in any::<prop::sample::Index>(), extra in vec(any::<u8>(), 1..8)) {
        let bytes = p.build().unwrap();
        let short = &bytes[..cut.index(bytes.len())];
        prop_assert!(PacketView::parse(short).is_err());
        let mut long = bytes.clone();
        long.extend_from_slice(&extra);
        prop_assert!(PacketView::parse(&long).is_err());
    }

    #[test]
    fn in_place_reads_agree_with_the_parser(p in arb_packet()) {
        let bytes = p.build().unwrap();
        let view = PacketView::parse(&bytes).unwrap();
        prop_assert_eq!(encoded::lnh(&bytes), Some(view.lrh.lnh));
        prop_assert_eq!(encoded::dlid(&bytes), Some(view.lrh.dlid));
        prop_assert_eq!(encoded::opcode(&bytes), Some(view.bth.opcode));
        prop_assert_eq!(encoded::dest_qp(&bytes), Some(view.bth.dest_qp));
        prop_assert_eq!(encoded::psn(&bytes), Some(view.bth.psn));
        prop_assert_eq!(encoded::aeth(&bytes), view.ext.aeth);
    }

    #[test]
    fn an_edited_vl_still_parses_and_its_vcrc_checks(p in arb_packet(), vl in 0u8..16) {
        let mut bytes = p.build().unwrap();
        prop_assert_eq!((encoded::vl(&bytes), encoded::sl(&bytes)), (Some(p.lrh.vl), Some(p.lrh.sl)));
        encoded::set_vl(&mut bytes, vl);
        encoded::restamp_vcrc(&mut bytes);
        prop_assert!(encoded::vcrc_ok(&bytes));
        let view = PacketView::parse(&bytes).unwrap();
        prop_assert_eq!(encoded::vl(&bytes), Some(vl));
        let mut expected = p.clone();
        expected.lrh.vl = vl;
        prop_assert_eq!(view.to_packet(), expected, "nothing but the VL changed");
    }

    #[test]
    fn mutated_packets_never_panic(
        p in arb_packet(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        seal in any::<bool>(),
    ) {
        let mut bytes = p.build().unwrap();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if seal {
            // Correct CRCs let the mutations reach the deeper checks.
            reseal(&mut bytes);
        }
        if let Ok(view) = PacketView::parse(&bytes) {
            // Whatever parsed is a packet in its own right.
            prop_assert!(view.payload.len() + 26 <= bytes.len());
            let again = view.to_packet().build().unwrap();
            prop_assert_eq!(PacketView::parse(&again).unwrap().to_packet(), view.to_packet());
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in vec(any::<u8>(), 0..200), lnh in 2u8..4, seal in any::<bool>()) {
        let _ = PacketView::parse(&bytes);
        // Plausible LRH so that parsing gets past the first checks.
        let mut b = bytes;
        if b.len() >= 8 {
            b.truncate(b.len() - (b.len() - 2) % 4);
            b[0] &= 0xf0;
            b[1] = (b[1] & 0xf0) | lnh;
            let words = ((b.len() - 2) / 4) as u16;
            b[4..6].copy_from_slice(&words.to_be_bytes());
            if seal {
                reseal(&mut b);
            }
            let _ = PacketView::parse(&b);
        }
    }

    #[test]
    fn frames_survive_any_chunking(
        packets in vec(vec(any::<u8>(), 0..300), 0..6),
        hello in (any::<u16>(), any::<u64>(), any::<u8>(), any::<u16>(), any::<u8>()),
        ring in any::<u64>(),
        credit in (any::<u8>(), any::<u16>()),
        up in any::<bool>(),
        cuts in vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let mut frames = vec![
            Frame::Hello(Hello { version: hello.0, node_guid: hello.1, port: hello.2, lid: hello.3, features: hello.4 }),
            Frame::RingOffer { capacity: ring },
            Frame::LinkState(if up { LinkState::Up } else { LinkState::Down }),
            Frame::Credit { vl: credit.0, credits: credit.1 },
        ];
        frames.extend(packets.into_iter().map(Frame::Packet));
        let mut bytes = Vec::new();
        for f in &frames {
            f.encode(&mut bytes).unwrap();
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        points.push(0);
        points.push(bytes.len());
        points.sort_unstable();
        let mut d = FrameDecoder::new(300);
        let mut got = Vec::new();
        for w in points.windows(2) {
            for f in d.feed(&bytes[w[0]..w[1]]) {
                got.push(f.unwrap());
            }
        }
        prop_assert!(d.finish().is_ok());
        prop_assert_eq!(got, frames);
    }

    #[test]
    fn decoder_never_panics_or_overbuffers(chunks in vec(vec(any::<u8>(), 0..64), 0..20)) {
        let max = 32;
        let mut d = FrameDecoder::new(max);
        for chunk in &chunks {
            for f in d.feed(chunk) {
                if let Ok(Frame::Packet(p)) = f {
                    prop_assert!(p.len() <= max);
                }
            }
            prop_assert!(d.buffered() <= 5 + max);
        }
        let _ = d.finish();
    }
}
