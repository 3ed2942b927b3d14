//! `atm_cells`: arbitrary cells, and frames segmented with header errors,
//! through the ATM receive port ([`crate::atm::Receiver`]).

use std::time::{Duration, Instant};

use super::Input;
use crate::atm::aal5::{self, MAX_SDU, TRAILER_LEN};
use crate::atm::{Aal, Cell, CellHeader, Delivery, Receiver, Vc, CELL_LEN, CELL_PAYLOAD_LEN};

/// Largest AAL5 frame the target segments (more only costs time).
const MAX_FRAME: usize = 4096;

/// Cells that the frame operations of one input may segment in all: two
/// frames of [`MAX_FRAME`] bytes. Each frame operation runs on a fresh
/// port, so more of them only repeat the check on other data; without
/// the bound a 4 KiB input of 5-byte frame operations segmented and
/// reassembled over 3 MB (about 1,000 executions per second).
const FRAME_CELL_BUDGET: usize = 2 * (MAX_FRAME + TRAILER_LEN).div_ceil(CELL_PAYLOAD_LEN);

/// Frame operations one input may run: each builds a port (a hash map of
/// its connections), which costs more than a short frame.
const FRAME_OP_BUDGET: usize = 16;

/// What the frame operations of one input have left to spend.
struct FrameBudget {
    cells: usize,
    ops: usize,
}

impl FrameBudget {
    /// Takes a frame of `cells` cells from the budget; false (nothing
    /// taken) when it does not fit.
    fn take(&mut self, cells: usize) -> bool {
        match (self.cells.checked_sub(cells), self.ops.checked_sub(1)) {
            (Some(c), Some(o)) => {
                (self.cells, self.ops) = (c, o);
                true
            }
            _ => false,
        }
    }
}

/// Input: a byte choosing each of four connections' AAL (VPI 0..4, VCI
/// 32..36; AAL5 with a limit, AAL1 with 1..4 blocks, AAL0 or none), then
/// operations: a byte picking one and its operands.
///
/// - raw: 53 bytes pushed as a cell;
/// - frame: a connection, a length and a bit to flip in one cell's header
///   every other cell, then the frame pushed through a fresh port with
///   the same connections (while the input's [`FRAME_CELL_BUDGET`] and
///   [`FRAME_OP_BUDGET`] last; past them the operation is read and
///   skipped);
/// - time: milliseconds to move the clock by, then an expiry.
///
/// Invariants: every header's four bytes decode and re-encode to
/// themselves; the port counts every cell; every message is on a
/// configured connection and of its AAL's size (AAL0 48 bytes, AAL1 its
/// blocks, AAL5 1..=its limit); a frame segmented whole, whatever
/// isolated single-bit header errors it suffers, arrives byte-exact and
/// alone.
pub fn atm_cells(data: &[u8]) {
    run(data);
}

/// The target's body; returns the frames run and the cells they took.
fn run(data: &[u8]) -> (usize, usize) {
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
    let mut budget = FrameBudget {
        cells: FRAME_CELL_BUDGET,
        ops: FRAME_OP_BUDGET,
    };
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
            1 => frame_survives_header_errors(&mut input, &aals, &port, now, &mut budget),
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
    (
        FRAME_OP_BUDGET - budget.ops,
        FRAME_CELL_BUDGET - budget.cells,
    )
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

/// One frame operation: its operands read, then (if it picks an AAL5
/// connection and `budget` has room) the frame through a port from
/// `port`.
fn frame_survives_header_errors(
    input: &mut Input,
    aals: &[(Vc, Aal)],
    port: &dyn Fn() -> Receiver,
    now: Instant,
    budget: &mut FrameBudget,
) {
    let pick = usize::from(input.u8());
    let len = usize::from(input.u16()) % MAX_FRAME + 1;
    let bit = input.u8() % 40;
    let Some(&(vc, Aal::Aal5 { max_sdu })) = aals.get(pick % aals.len().max(1)) else {
        return;
    };
    if !budget.take(aal5::cells_for(len)) {
        return;
    }
    let mut rx = port();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An input of four AAL5 connections (no limit) and then `ops` frame
    /// operations of `len` bytes each.
    fn frames(ops: usize, len: u16) -> Vec<u8> {
        let mut data = vec![0, 0, 0, 0, 0];
        for _ in 0..ops {
            data.push(1);
            data.push(0);
            data.extend_from_slice(&(len - 1).to_le_bytes());
            data.push(3);
        }
        data
    }

    #[test]
    fn the_frame_budget_runs_two_largest_frames_and_bounds_the_rest() {
        let largest = aal5::cells_for(MAX_FRAME);
        assert_eq!(largest, 86);
        assert_eq!(run(&frames(1, MAX_FRAME as u16)), (1, largest));
        assert_eq!(run(&frames(2, MAX_FRAME as u16)), (2, 2 * largest));
        // A 4 KiB input of largest frames: still two.
        assert_eq!(run(&frames(819, MAX_FRAME as u16)), (2, 2 * largest));
        // A largest frame and then single-cell ones, up to the count.
        let mut mixed = frames(1, MAX_FRAME as u16);
        mixed.extend_from_slice(&frames(100, 40)[5..]);
        assert_eq!(
            run(&mixed),
            (FRAME_OP_BUDGET, largest + FRAME_OP_BUDGET - 1)
        );
        // Frames of 20 cells: none fits after two largest ones; alone,
        // eight fit the cells.
        let mut big = frames(2, MAX_FRAME as u16);
        big.extend_from_slice(&frames(9, 20 * 48 - 8)[5..]);
        assert_eq!(run(&big), (2, 2 * largest));
        assert_eq!(run(&frames(9, 20 * 48 - 8)), (8, 160));
    }
}
