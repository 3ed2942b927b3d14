//! One VL arbitration table of IBA §7.6.9 (the high- or the low-priority
//! one) as the arbiter serves it.
//!
//! The table's (VL, weight) entries take turns in table order. An entry
//! sends packets of its VL while weight is left, a packet costing its
//! length (LRH through VCRC) in 64-byte units, rounded up; a packet that
//! starts within the weight goes whole, even past it. The turn passes to
//! the next entry, with that entry's full weight, when the weight is used
//! up or when the entry's VL has no packet or no credit. Entries of weight
//! 0, and entries naming VL15 or a VL above it, are skipped (VL15 is served
//! before either table).

/// Bytes of one weight unit.
pub const WEIGHT_UNIT: usize = 64;

/// A table and where its turn is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct TableTurns {
    /// Entries that can send (weight > 0, a data VL), in table order.
    entries: Vec<(u8, u8)>,
    /// Entry whose turn it is.
    turn: usize,
    /// Its weight left, in 64-byte units.
    left: u32,
}

impl TableTurns {
    /// Serves `entries` from the first one on.
    pub fn new(entries: &[(u8, u8)]) -> Self {
        let entries: Vec<(u8, u8)> = entries
            .iter()
            .copied()
            .filter(|&(vl, weight)| vl < crate::VL15 && weight > 0)
            .collect();
        let left = entries.first().map_or(0, |e| u32::from(e.1));
        TableTurns {
            entries,
            turn: 0,
            left,
        }
    }

    /// True if no entry can send.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// True if some entry serves `vl`.
    pub fn serves(&self, vl: u8) -> bool {
        self.entries.iter().any(|e| e.0 == vl)
    }

    /// The VL that sends next and the length of its packet, taking that
    /// packet's units from its entry's weight. `head(vl)` is the length of
    /// the packet at the head of `vl` if it may be sent now (queued, with
    /// credit). None if no entry's VL may send; the turn then stays where
    /// it was.
    pub fn next(&mut self, head: impl Fn(u8) -> Option<usize>) -> Option<(u8, usize)> {
        let n = self.entries.len();
        let (mut turn, mut left) = (self.turn, self.left);
        // The current entry with what it has left, every other one, and the
        // current one again with its full weight.
        for _ in 0..=n {
            let vl = self.entries.get(turn)?.0;
            if left > 0 {
                if let Some(len) = head(vl) {
                    let units = u32::try_from(len.div_ceil(WEIGHT_UNIT)).unwrap_or(u32::MAX);
                    self.turn = turn;
                    self.left = left.saturating_sub(units.max(1));
                    return Some((vl, len));
                }
            }
            turn = (turn + 1) % n;
            left = self.entries.get(turn).map_or(0, |e| u32::from(e.1));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// The VLs `table` sends `queues` (packet lengths per VL) in, every VL
    /// with credit.
    fn order(table: &[(u8, u8)], queues: &[(u8, &[usize])]) -> Vec<u8> {
        let mut q: Vec<VecDeque<usize>> = vec![VecDeque::new(); 16];
        for (vl, lens) in queues {
            q[usize::from(*vl)].extend(lens.iter().copied());
        }
        let mut t = TableTurns::new(table);
        let mut out = Vec::new();
        while let Some((vl, len)) = t.next(|vl| q[usize::from(vl)].front().copied()) {
            assert_eq!(q[usize::from(vl)].pop_front(), Some(len));
            out.push(vl);
        }
        assert!(q.iter().all(VecDeque::is_empty), "everything sent");
        out
    }

    #[test]
    fn entries_send_their_weight_in_64_byte_units_in_table_order() {
        // VL0 weight 4 (256 bytes): four 64-byte packets, or two of 128
        // (LRH..VCRC counted), per turn; VL1 weight 2: two, or one.
        assert_eq!(
            order(&[(0, 4), (1, 2)], &[(0, &[64; 8]), (1, &[64; 4])]),
            [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1]
        );
        assert_eq!(
            order(&[(0, 4), (1, 2)], &[(0, &[128; 4]), (1, &[128; 2])]),
            [0, 0, 1, 0, 0, 1]
        );
        // 65 bytes are two units: a weight 3 entry sends two such packets
        // (the second starts with one unit left and goes whole).
        assert_eq!(
            order(&[(2, 3), (5, 1)], &[(2, &[65; 4]), (5, &[1000; 2])]),
            [2, 2, 5, 2, 2, 5]
        );
    }

    #[test]
    fn a_packet_past_the_weight_goes_whole_and_ends_the_turn() {
        // 4 KiB packets: one per turn whatever the weight below 64 units.
        assert_eq!(
            order(&[(0, 1), (1, 63)], &[(0, &[4096; 3]), (1, &[4096; 3])]),
            [0, 1, 0, 1, 0, 1]
        );
        // Weight 128 (8 KiB): two of them.
        assert_eq!(
            order(&[(0, 128), (1, 1)], &[(0, &[4096; 4]), (1, &[4096; 2])]),
            [0, 0, 1, 0, 0, 1]
        );
    }

    #[test]
    fn a_vl_may_appear_in_several_entries_and_weight_0_entries_are_skipped() {
        // IBA's way of giving a VL a larger share: several entries.
        assert_eq!(
            order(
                &[(0, 1), (3, 0), (1, 1), (0, 1), (15, 9), (2, 1)],
                &[(0, &[64; 4]), (1, &[64; 2]), (2, &[64; 2])]
            )[..8],
            [0, 1, 0, 2, 0, 1, 0, 2]
        );
        let t = TableTurns::new(&[(3, 0), (15, 4), (16, 4)]);
        assert!(t.is_empty() && !t.serves(3) && !t.serves(15));
    }

    #[test]
    fn an_entry_whose_vl_has_nothing_passes_its_turn_and_its_weight_is_renewed() {
        let mut q: Vec<VecDeque<usize>> = vec![VecDeque::new(); 16];
        q[0].extend([64, 64, 64]);
        let mut t = TableTurns::new(&[(0, 2), (1, 2)]);
        let head = |q: &Vec<VecDeque<usize>>, vl: u8| q[usize::from(vl)].front().copied();
        assert_eq!(t.next(|vl| head(&q, vl)), Some((0, 64)));
        q[0].pop_front();
        // VL1 empty: VL0's entry goes on, then comes round again full.
        assert_eq!(t.next(|vl| head(&q, vl)), Some((0, 64)));
        q[0].pop_front();
        q[1].push_back(64);
        assert_eq!(t.next(|vl| head(&q, vl)), Some((1, 64)));
        q[1].pop_front();
        assert_eq!(t.next(|vl| head(&q, vl)), Some((0, 64)));
        q[0].pop_front();
        assert_eq!(t.next(|vl| head(&q, vl)), None, "nothing left");
        // Nothing to send keeps the place: VL0's entry, one unit left.
        q[0].extend([64, 64]);
        q[1].push_back(64);
        assert_eq!(t.next(|vl| head(&q, vl)).map(|e| e.0), Some(0));
        q[0].pop_front();
        assert_eq!(t.next(|vl| head(&q, vl)).map(|e| e.0), Some(1));
    }
}
