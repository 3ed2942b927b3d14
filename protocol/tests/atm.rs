//! The ATM layer (issue 24): HEC generation and I.432.1's correction and
//! detection modes, AAL5 at every length with an independent CRC-32, the
//! error cases, interleaved connections, AAL1 sequence errors, AAL0.

use std::time::{Duration, Instant};

use ibtca_protocol::atm::aal1::{self, Aal1Event, Aal1Reassembler, Aal1Segmenter, SnpVerdict};
use ibtca_protocol::atm::aal5::{self, Aal5Error, Aal5Reassembler, MAX_SDU};
use ibtca_protocol::atm::cell::{hec, PTI_AUU};
use ibtca_protocol::atm::hec::{HecMode, HecReceiver, HecVerdict};
use ibtca_protocol::atm::{Aal, Cell, CellHeader, Receiver, Vc, CELL_PAYLOAD_LEN};

const VC: Vc = Vc {
    vpi: 3,
    vci: 0x1234,
};

/// AAL5's CRC-32 computed bit by bit from its definition (I.363.5: the
/// generator 0x04C11DB7 MSB first, preset ones, complemented), sharing
/// nothing with the library's table.
fn crc32_bitwise(bytes: &[u8]) -> u32 {
    let mut reg = u32::MAX;
    for &byte in bytes {
        for i in (0..8).rev() {
            let bit = u32::from(byte >> i & 1);
            let top = reg >> 31;
            reg <<= 1;
            if top ^ bit == 1 {
                reg ^= 0x04C1_1DB7;
            }
        }
    }
    !reg
}

/// [`crc32_bitwise`] a byte at a time, through a table that the bitwise
/// register step builds (for the 9,180 frames of the round trip).
fn crc32_by_table(bytes: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..256u32)
            .map(|i| {
                let mut reg = i << 24;
                for _ in 0..8 {
                    let top = reg >> 31;
                    reg <<= 1;
                    if top == 1 {
                        reg ^= 0x04C1_1DB7;
                    }
                }
                reg
            })
            .collect()
    });
    let mut reg = u32::MAX;
    for &b in bytes {
        reg = reg << 8 ^ table[usize::from((reg >> 24) as u8 ^ b)];
    }
    !reg
}

/// The HEC by polynomial long division, bit by bit.
fn hec_bitwise(h: &[u8; 4]) -> u8 {
    let mut reg: u16 = 0;
    for &byte in h {
        for i in (0..8).rev() {
            let bit = u16::from(byte >> i & 1);
            let top = reg >> 7 & 1;
            reg = reg << 1 & 0xff;
            if top ^ bit == 1 {
                reg ^= 0x07;
            }
        }
    }
    reg as u8 ^ 0x55
}

fn headers() -> Vec<CellHeader> {
    let mut v = vec![CellHeader::default(), CellHeader::user(VC, PTI_AUU)];
    for i in 0..64u32 {
        v.push(CellHeader {
            gfc: (i % 16) as u8,
            vpi: (i * 37) as u8,
            vci: (i * 2027 + 32) as u16,
            pti: (i % 8) as u8,
            clp: i % 3 == 0,
        });
    }
    v
}

#[test]
fn hec_matches_i432_and_the_long_division() {
    // I.432.1: the idle cell's header is 00 00 00 01 with HEC 0x52; the
    // unassigned cell's 00 00 00 00 with HEC 0x55.
    assert_eq!(hec(&[0, 0, 0, 1]), 0x52);
    assert_eq!(hec(&[0, 0, 0, 0]), 0x55);
    for h in headers() {
        let b = h.encode();
        assert_eq!(b[4], hec_bitwise(&[b[0], b[1], b[2], b[3]]), "{h:?}");
        assert_eq!(CellHeader::decode(&[b[0], b[1], b[2], b[3]]), h);
    }
    // I.361's layout, field by field.
    let h = CellHeader {
        gfc: 0xa,
        vpi: 0xbc,
        vci: 0xdef1,
        pti: 0b101,
        clp: true,
    };
    assert_eq!(&h.encode()[..4], &[0xab, 0xcd, 0xef, 0x1b]);
}

#[test]
fn every_single_bit_header_error_is_corrected_with_good_cells_between() {
    let mut rx = HecReceiver::new();
    for h in headers() {
        let good = h.encode();
        for bit in 0..40u8 {
            let mut bad = good;
            bad[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
            assert_eq!(
                rx.check(&mut bad),
                HecVerdict::Corrected(bit),
                "{h:?} bit {bit}"
            );
            assert_eq!(bad, good, "{h:?} bit {bit} corrected to the sent header");
            assert_eq!(rx.mode(), HecMode::Detection);
            // A good cell brings the receiver back to correction mode.
            let mut next = good;
            assert_eq!(rx.check(&mut next), HecVerdict::Valid);
            assert_eq!(rx.mode(), HecMode::Correction);
        }
    }
}

#[test]
fn a_single_bit_error_right_after_an_error_is_dropped() {
    let good = CellHeader::user(VC, 0).encode();
    let mut rx = HecReceiver::new();
    let mut first = good;
    first[0] ^= 0x10;
    assert!(matches!(rx.check(&mut first), HecVerdict::Corrected(3)));
    let mut second = good;
    second[2] ^= 0x01;
    assert_eq!(rx.check(&mut second), HecVerdict::Discarded);
    assert_eq!(rx.mode(), HecMode::Detection);
}

#[test]
fn every_double_header_error_is_dropped() {
    for h in headers().into_iter().take(8) {
        let good = h.encode();
        for a in 0..40usize {
            for b in a + 1..40 {
                let mut rx = HecReceiver::new();
                let mut bad = good;
                bad[a / 8] ^= 0x80 >> (a % 8);
                bad[b / 8] ^= 0x80 >> (b % 8);
                assert_eq!(rx.check(&mut bad), HecVerdict::Discarded, "bits {a} {b}");
                assert_eq!(rx.mode(), HecMode::Detection);
            }
        }
    }
}

#[test]
fn the_receiver_counts_corrected_and_dropped_headers_and_delivers_the_corrected_cell() {
    let mut rx = Receiver::new(Duration::from_secs(1));
    assert!(rx.add_vc(VC, Aal::Aal0));
    let payload = [0x5a; CELL_PAYLOAD_LEN];
    let good = Cell::new(&CellHeader::user(VC, 0), &payload);
    let mut one = good;
    one.bytes[1] ^= 0x04;
    let mut two = good;
    two.bytes[1] ^= 0x04;
    two.bytes[3] ^= 0x80;
    let now = Instant::now();
    let mut out = Vec::new();
    for c in [one, good, two, good] {
        rx.push(&c, now, &mut out);
    }
    assert_eq!(out.len(), 3, "corrected, good, (double dropped), good");
    assert!(out.iter().all(|d| d.vc == VC && d.data == payload));
    let c = rx.counters();
    assert_eq!(
        (c.cells, c.hec_corrected, c.hec_dropped, c.messages),
        (4, 1, 1, 3)
    );
}

#[test]
fn crc32_is_the_non_reflected_one() {
    assert_eq!(aal5_crc(b"123456789"), 0xFC89_1918);
    assert_eq!(crc32_bitwise(b"123456789"), 0xFC89_1918);
    // Ethernet's (crc32fast) is the reflected one: another value.
    assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 13) as u8).collect();
    for len in [0, 1, 47, 48, 1000, 5000] {
        assert_eq!(aal5_crc(&data[..len]), crc32_bitwise(&data[..len]));
        assert_eq!(crc32_by_table(&data[..len]), crc32_bitwise(&data[..len]));
    }
}

fn aal5_crc(b: &[u8]) -> u32 {
    ibtca_protocol::atm::crc32::crc32(b)
}

fn frame_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + len) as u8).collect()
}

/// Checks the cells of one segmented frame against I.363.5 with the
/// independent CRC, then reassembles them.
fn round_trip(len: usize, rx: &mut Aal5Reassembler, cells: &mut Vec<Cell>) {
    let frame = frame_of(len);
    cells.clear();
    aal5::segment(VC, &frame, 0x42, cells).expect("segments");
    assert_eq!(cells.len(), (len + 8).div_ceil(48), "len {len}");
    let mut pdu = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let h = c.header();
        assert_eq!(h.vc(), VC);
        assert_eq!(
            h.pti & PTI_AUU != 0,
            i + 1 == cells.len(),
            "AUU only on the last cell"
        );
        assert_eq!(c.bytes[4], hec_bitwise(&c.bytes[..4].try_into().unwrap()));
        pdu.extend_from_slice(c.payload());
    }
    let t = &pdu[pdu.len() - 8..];
    assert_eq!(&pdu[..len], &frame[..]);
    assert!(
        pdu[len..pdu.len() - 8].iter().all(|&b| b == 0),
        "pad is zero"
    );
    assert_eq!((t[0], t[1]), (0x42, 0), "UU and CPI");
    assert_eq!(usize::from(u16::from_be_bytes([t[2], t[3]])), len);
    let crc = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
    assert_eq!(crc, crc32_by_table(&pdu[..pdu.len() - 4]), "len {len}");
    let now = Instant::now();
    let mut got = None;
    for (i, c) in cells.iter().enumerate() {
        let r = rx.push(c.payload(), c.header().pti & PTI_AUU != 0, now);
        if i + 1 < cells.len() {
            assert!(r.is_none());
        } else {
            got = r;
        }
    }
    let got = got.expect("a frame at the end").expect("a good frame");
    assert_eq!(got.uu, 0x42);
    assert!(got.data == frame, "len {len}: the frame reassembled");
}

#[test]
fn aal5_round_trips_every_length_to_9180_and_65535() {
    let mut rx = Aal5Reassembler::new(MAX_SDU);
    let mut cells = Vec::new();
    for len in (1..=9180).chain([65_535]) {
        round_trip(len, &mut rx, &mut cells);
    }
    let mut out = Vec::new();
    assert_eq!(aal5::segment(VC, &[], 0, &mut out), Err(Aal5Error::Empty));
    assert_eq!(
        aal5::segment(VC, &vec![0; 65_536], 0, &mut out),
        Err(Aal5Error::Oversize(65_536))
    );
    assert!(out.is_empty());
}

/// Cells of a hand-made CPCS-PDU: `body` (a multiple of 48 minus 8) and a
/// trailer with these fields, CRC computed unless `crc` is given.
fn pdu_cells(body: &[u8], uu: u8, cpi: u8, length: u16, crc: Option<u32>) -> Vec<[u8; 48]> {
    let mut pdu = body.to_vec();
    pdu.extend_from_slice(&[uu, cpi]);
    pdu.extend_from_slice(&length.to_be_bytes());
    let crc = crc.unwrap_or_else(|| crc32_bitwise(&pdu));
    pdu.extend_from_slice(&crc.to_be_bytes());
    assert_eq!(pdu.len() % 48, 0);
    pdu.chunks(48).map(|c| c.try_into().unwrap()).collect()
}

fn reassemble(rx: &mut Aal5Reassembler, cells: &[[u8; 48]]) -> Option<Result<Vec<u8>, Aal5Error>> {
    let now = Instant::now();
    let mut last = None;
    for (i, c) in cells.iter().enumerate() {
        last = rx.push(c, i + 1 == cells.len(), now);
    }
    last.map(|r| r.map(|f| f.data))
}

#[test]
fn aal5_errors_drop_the_frame_with_the_reason() {
    let mut rx = Aal5Reassembler::new(MAX_SDU);
    let body = frame_of(88);
    // Good, as a control.
    assert_eq!(
        reassemble(&mut rx, &pdu_cells(&body, 0, 0, 50, None)),
        Some(Ok(body[..50].to_vec()))
    );
    // A zero length field is an abort.
    assert_eq!(
        reassemble(&mut rx, &pdu_cells(&body, 0, 0, 0, None)),
        Some(Err(Aal5Error::Abort))
    );
    // Bad CRC.
    let mut cells = pdu_cells(&body, 0, 0, 50, None);
    cells[0][7] ^= 0x20;
    assert_eq!(reassemble(&mut rx, &cells), Some(Err(Aal5Error::Crc)));
    // Length longer than the cells, and so short that a whole cell is pad.
    for length in [89, 1000, 40, 1] {
        assert_eq!(
            reassemble(&mut rx, &pdu_cells(&body, 0, 0, length, None)),
            Some(Err(Aal5Error::Length { length, cells: 2 })),
            "length {length}"
        );
    }
    // CPI not 0.
    assert_eq!(
        reassemble(&mut rx, &pdu_cells(&body, 0, 1, 50, None)),
        Some(Err(Aal5Error::Cpi(1)))
    );
    // Still working.
    assert_eq!(
        reassemble(&mut rx, &pdu_cells(&body, 7, 0, 88, None)),
        Some(Ok(body.clone()))
    );
}

#[test]
fn aal5_oversize_frames_are_dropped_up_to_their_end() {
    let mut rx = Aal5Reassembler::new(100);
    // 100 bytes take 3 cells: a fourth without end of frame is too many.
    let now = Instant::now();
    let c = [0u8; 48];
    for _ in 0..3 {
        assert_eq!(rx.push(&c, false, now), None);
    }
    assert_eq!(rx.push(&c, false, now), Some(Err(Aal5Error::Oversize(192))));
    // The rest of that frame is discarded, its end included.
    assert_eq!(rx.push(&c, false, now), None);
    assert_eq!(rx.push(&c, true, now), None);
    // A frame of 3 cells whose length field says more than 100.
    let body = frame_of(136);
    assert_eq!(
        reassemble(&mut rx, &pdu_cells(&body, 0, 0, 120, None)),
        Some(Err(Aal5Error::Oversize(120)))
    );
    assert_eq!(
        reassemble(&mut rx, &pdu_cells(&body, 0, 0, 100, None)),
        Some(Ok(body[..100].to_vec()))
    );
}

#[test]
fn aal5_reassembly_times_out() {
    let t = Duration::from_millis(100);
    let mut rx = Aal5Reassembler::new(MAX_SDU);
    let start = Instant::now();
    let body = frame_of(88);
    let cells = pdu_cells(&body, 0, 0, 88, None);
    assert_eq!(rx.push(&cells[0], false, start), None);
    assert_eq!(rx.expire(start + t, t), None, "not yet");
    assert_eq!(
        rx.expire(start + t + Duration::from_millis(1), t),
        Some(Aal5Error::Timeout)
    );
    assert!(!rx.in_progress());
    // The late last cell alone is a frame of its own, whose CRC fails.
    assert_eq!(
        rx.push(&cells[1], true, start + 2 * t),
        Some(Err(Aal5Error::Crc))
    );
    assert_eq!(rx.expire(start + 10 * t, t), None, "nothing held");
}

#[test]
fn interleaved_vcs_reassemble_apart_and_foreign_cells_are_counted() {
    let vcs: Vec<Vc> = (0..4)
        .map(|i| Vc {
            vpi: i,
            vci: 32 + u16::from(i) * 100,
        })
        .collect();
    let mut rx = Receiver::new(Duration::from_secs(1));
    for &vc in &vcs {
        assert!(rx.add_vc(vc, Aal::Aal5 { max_sdu: MAX_SDU }));
    }
    assert!(!rx.add_vc(vcs[0], Aal::Aal0), "a VC is added once");
    let mut per_vc: Vec<Vec<Cell>> = Vec::new();
    let mut frames = Vec::new();
    for (i, &vc) in vcs.iter().enumerate() {
        let mut cells = Vec::new();
        for n in 0..5 {
            let f = frame_of(1 + i * 700 + n * 333);
            aal5::segment(vc, &f, 0, &mut cells).unwrap();
            frames.push((vc, f));
        }
        per_vc.push(cells);
    }
    // Round-robin, one cell of each VC in turn, with a foreign cell, an
    // OAM cell, an F4 OAM cell and an idle cell thrown in.
    let foreign = Cell::new(&CellHeader::user(Vc { vpi: 9, vci: 99 }, 0), &[0; 48]);
    let oam = Cell::new(&CellHeader::user(vcs[1], 5), &[0; 48]);
    let f4 = Cell::new(&CellHeader::user(Vc { vpi: 0, vci: 4 }, 0), &[0; 48]);
    let idle = Cell::new(&CellHeader::default(), &[0; 48]);
    let mut out = Vec::new();
    let now = Instant::now();
    let longest = per_vc.iter().map(Vec::len).max().unwrap();
    for k in 0..longest {
        for cells in &per_vc {
            if let Some(c) = cells.get(k) {
                rx.push(c, now, &mut out);
            }
        }
        if k == 3 {
            for c in [foreign, oam, f4, idle] {
                rx.push(&c, now, &mut out);
            }
        }
    }
    assert_eq!(out.len(), frames.len());
    for &vc in &vcs {
        let got: Vec<&Vec<u8>> = out.iter().filter(|d| d.vc == vc).map(|d| &d.data).collect();
        let want: Vec<&Vec<u8>> = frames
            .iter()
            .filter(|(v, _)| *v == vc)
            .map(|(_, f)| f)
            .collect();
        assert!(got == want, "VC {vc}: its frames in order");
    }
    let c = rx.counters();
    assert_eq!(
        (c.unknown_vc, c.management, c.idle, c.messages),
        (1, 2, 1, 20)
    );
}

#[test]
fn the_receiver_counts_aal5_errors_and_timeouts() {
    let mut rx = Receiver::new(Duration::from_millis(10));
    rx.add_vc(VC, Aal::Aal5 { max_sdu: MAX_SDU });
    let mut cells = Vec::new();
    aal5::segment(VC, &frame_of(100), 0, &mut cells).unwrap();
    let mut bad = cells.clone();
    bad[1].bytes[20] ^= 1;
    let start = Instant::now();
    let mut out = Vec::new();
    for c in &bad {
        rx.push(c, start, &mut out);
    }
    rx.push(&cells[0], start, &mut out);
    assert_eq!(rx.expire(start + Duration::from_millis(5)), 0);
    assert_eq!(rx.expire(start + Duration::from_millis(11)), 1);
    for c in &cells {
        rx.push(c, start, &mut out);
    }
    assert_eq!(out.len(), 1);
    let c = rx.counters();
    assert_eq!((c.aal5_crc, c.aal5_timeout, c.messages), (1, 1, 1));
}

#[test]
fn aal1_sar_header_crc3_and_parity() {
    // I.363.1: SN 0 gives 0x00; every header has even weight and its
    // CRC-3 is the remainder of SN·x^3 by x^3 + x + 1.
    assert_eq!(aal1::sar_header(false, 0), 0);
    assert_eq!(aal1::crc3(0b0001), 0b011);
    assert_eq!(aal1::crc3(0b1000), 0b101);
    let mut rx = Aal1Reassembler::new(1, 0);
    for sn in 0..16u8 {
        let h = aal1::sar_header(sn & 8 != 0, sn & 7);
        assert_eq!(h >> 4, sn);
        assert_eq!(h.count_ones() % 2, 0);
        assert_eq!(
            rx.check_header(h),
            SnpVerdict::Valid {
                csi: sn & 8 != 0,
                count: sn & 7,
                corrected: false
            }
        );
        // Every single-bit error is corrected (a good header between).
        for bit in 0..8 {
            let v = rx.check_header(h ^ 1 << bit);
            assert_eq!(
                v,
                SnpVerdict::Valid {
                    csi: sn & 8 != 0,
                    count: sn & 7,
                    corrected: true
                },
                "sn {sn} bit {bit}"
            );
            assert!(matches!(
                rx.check_header(h),
                SnpVerdict::Valid {
                    corrected: false,
                    ..
                }
            ));
        }
        // Every double error is detected.
        for a in 0..8 {
            for b in a + 1..8 {
                let mut fresh = Aal1Reassembler::new(1, 0);
                assert_eq!(
                    fresh.check_header(h ^ 1 << a ^ 1 << b),
                    SnpVerdict::Invalid,
                    "sn {sn} bits {a} {b}"
                );
            }
        }
    }
}

#[test]
fn aal1_fills_lost_cells_and_drops_misordered_ones() {
    let stream: Vec<u8> = (0..47 * 20).map(|i| (i % 251) as u8).collect();
    let mut tx = Aal1Segmenter::new();
    let mut cells = Vec::new();
    tx.segment(VC, &stream, &mut cells).unwrap();
    assert_eq!(cells.len(), 20);
    assert_eq!(
        tx.segment(VC, &stream[..50], &mut cells),
        Err(aal1::Aal1Error::NotBlocks(50))
    );
    let mut rx = Aal1Reassembler::new(4, 0xee);
    let mut out = Vec::new();
    // (cell, event) in arrival order.
    let mut events = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        // Lose cells 5 and 6; deliver cell 10 twice; corrupt 14's SAR
        // header beyond repair (two bits) and 17's by one bit.
        let mut p = *c.payload();
        match i {
            5 | 6 => continue,
            14 => p[0] ^= 0b0011_0000,
            17 => p[0] ^= 0b0100_0000,
            _ => {}
        }
        events.push((i, rx.push(&p, &mut out)));
        if i == 10 {
            events.push((i, rx.push(&p, &mut out)));
        }
    }
    let want: Vec<(usize, Aal1Event)> = (0..20)
        .filter(|i| ![5, 6].contains(i))
        .flat_map(|i| {
            let e = match i {
                7 => Aal1Event::Lost(2),
                14 => Aal1Event::SnpError,
                15 => Aal1Event::Lost(1),
                17 => Aal1Event::Corrected,
                _ => Aal1Event::InSequence,
            };
            let repeat = (i == 10).then_some((i, Aal1Event::Misordered));
            std::iter::once((i, e)).chain(repeat)
        })
        .collect();
    assert_eq!(events, want);
    // 20 blocks in, in messages of 4: cells 5, 6 and 14 are filler.
    assert_eq!(out.len(), 5);
    let got: Vec<u8> = out.concat();
    for block in 0..20 {
        let want: &[u8] = if [5, 6, 14].contains(&block) {
            &[0xee; 47]
        } else {
            &stream[block * 47..][..47]
        };
        assert_eq!(&got[block * 47..][..47], want, "block {block}");
    }
}

#[test]
fn aal0_delivers_each_payload_and_oam_cells_are_counted() {
    let mut rx = Receiver::new(Duration::from_secs(1));
    rx.add_vc(VC, Aal::Aal0);
    let mut out = Vec::new();
    let now = Instant::now();
    for i in 0..4u8 {
        rx.push(
            &Cell::new(&CellHeader::user(VC, i & 3), &[i; 48]),
            now,
            &mut out,
        );
    }
    for pti in 4..8 {
        rx.push(
            &Cell::new(&CellHeader::user(VC, pti), &[9; 48]),
            now,
            &mut out,
        );
    }
    assert_eq!(
        out.iter().map(|d| d.data[0]).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_eq!(rx.counters().management, 4);
}

#[test]
fn a_restarted_receiver_drops_partial_frames_and_keeps_counting() {
    let mut rx = Receiver::new(Duration::from_secs(1));
    rx.add_vc(VC, Aal::Aal5 { max_sdu: MAX_SDU });
    let mut cells = Vec::new();
    aal5::segment(VC, &frame_of(200), 0, &mut cells).unwrap();
    let now = Instant::now();
    let mut out = Vec::new();
    rx.push(&cells[0], now, &mut out);
    rx.restart();
    for c in &cells {
        rx.push(c, now, &mut out);
    }
    assert_eq!(out.len(), 1, "the frame after the restart is whole");
    assert_eq!(out[0].data, frame_of(200));
    assert_eq!(rx.counters().cells, 1 + cells.len() as u64);
}
