//! `atm_cells`: arbitrary cells, and frames segmented with header errors,
//! through the ATM receive port ([`crate::atm::Receiver`]).

use std::time::{Duration, Instant};

use super::Input;
use crate::atm::aal5::{self, MAX_SDU};
use crate::atm::{Aal, Cell, CellHeader, Delivery, Receiver, Vc, CELL_LEN};

/// Largest AAL5 frame the target segments (more only costs time).
const MAX_FRAME: usize = 4096;

/// Input: a byte choosing each of four connections' AAL (VPI 0..4, VCI
/// 32..36; AAL5 with a limit, AAL1 with 1..4 blocks, AAL0 or none), then
/// operations: a byte picking one and its operands.
///
/// - raw: 53 bytes pushed as a cell;
/// - frame: a connection, a length and a bit to flip in one cell's header
///   every other cell, then the frame pushed through a fresh port with
///   the same connections;
/// - time: milliseconds to move the clock by, then an expiry.
///
/// Invariants: every header's four bytes decode and re-encode to
/// themselves; the port counts every cell; every message is on a
/// configured connection and of its AAL's size (AAL0 48 bytes, AAL1 its
/// blocks, AAL5 1..=its limit); a frame segmented whole, whatever
/// isolated single-bit header errors it suffers, arrives byte-exact and
/// alone.
pub fn atm_cells(data: &[u8]) {
    let mut input = Input::new(data);
    let kinds = input.u8();
    let limits = [MAX_SDU, 1, 48, 100, 1500];
    let mut aals = Vec::new();
    for i in 0..4u8 {
        let vc = Vc {
            vpi: i,
            vci: 32 + u16::from(i),
        };
        let aal = match kinds >> (2 * i) & 3 {
            0 => Aal::Aal5 {
                max_sdu: input.pick(&limits),
            },
            1 => Aal::Aal1 {
                blocks: usize::from(input.u8() % 4 + 1),
            },
            2 => Aal::Aal0,
            _ => continue,
        };
        aals.push((vc, aal));
    }
    let port = || {
        let mut rx = Receiver::new(Duration::from_millis(50));
        for &(vc, aal) in &aals {
            assert!(rx.add_vc(vc, aal));
        }
        rx
    };
    let mut rx = port();
    let mut now = Instant::now();
    let mut pushed = 0u64;
    let mut out = Vec::new();
    while !input.is_empty() {
        match input.u8() % 3 {
            0 => {
                let mut bytes = [0u8; CELL_LEN];
                let raw = input.bytes(CELL_LEN);
                bytes[..raw.len()].copy_from_slice(raw);
                let head: [u8; 4] = [bytes[0], bytes[1], bytes[2], bytes[3]];
                assert_eq!(CellHeader::decode(&head).encode()[..4], head);
                rx.push(&Cell { bytes }, now, &mut out);
                pushed += 1;
            }
            1 => frame_survives_header_errors(&mut input, &aals, port(), now),
            _ => {
                now += Duration::from_millis(u64::from(input.u8()));
                rx.expire(now);
            }
        }
    }
    assert_eq!(rx.counters().cells, pushed);
    assert_eq!(rx.counters().messages, out.len() as u64);
    for d in &out {
        check_size(d, &aals);
    }
}

fn check_size(d: &Delivery, aals: &[(Vc, Aal)]) {
    let aal = aals.iter().find(|(vc, _)| *vc == d.vc).map(|(_, a)| *a);
    match aal {
        Some(Aal::Aal0) => assert_eq!(d.data.len(), 48),
        Some(Aal::Aal1 { blocks }) => assert_eq!(d.data.len(), blocks * 47),
        Some(Aal::Aal5 { max_sdu }) => assert!((1..=max_sdu).contains(&d.data.len())),
        None => panic!("message on {} which is not configured", d.vc),
    }
}

fn frame_survives_header_errors(
    input: &mut Input,
    aals: &[(Vc, Aal)],
    mut rx: Receiver,
    now: Instant,
) {
    let pick = usize::from(input.u8());
    let len = usize::from(input.u16()) % MAX_FRAME + 1;
    let bit = input.u8() % 40;
    let Some(&(vc, Aal::Aal5 { max_sdu })) = aals.get(pick % aals.len().max(1)) else {
        return;
    };
    let frame: Vec<u8> = (0..len).map(|i| (i as u8) ^ (pick as u8)).collect();
    let mut cells = Vec::new();
    assert!(aal5::segment(vc, &frame, 0, &mut cells).is_ok());
    let mut out = Vec::new();
    for (i, mut c) in cells.into_iter().enumerate() {
        if i % 2 == 0 {
            c.bytes[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
        }
        rx.push(&c, now, &mut out);
    }
    if len <= max_sdu {
        assert_eq!(out.len(), 1);
        assert!(out[0].data == frame && out[0].vc == vc);
        assert_eq!(rx.counters().hec_dropped, 0);
    } else {
        assert!(out.is_empty());
        assert_eq!(rx.counters().aal5_oversize, 1);
    }
}
