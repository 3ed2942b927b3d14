//! Scatter/gather lists: which guest-physical ranges a byte range of a
//! WQE's SGE list covers, every piece checked against its lkey. The
//! device's `QpEnv::gather`/`scatter` use this before moving any byte, so a
//! list that does not cover the whole range (or names a bad key) fails
//! without a partial copy. SGE fields come from guest memory: all
//! arithmetic is overflow-safe.

use super::abi::{Sge, MAX_RECV_SGE, MAX_SGE};
use super::mr::MrTable;
pub use super::translate::GpaRanges;
use crate::transport::AccessError;

impl MrTable {
    /// The ranges holding bytes `[offset, offset + len)` of the buffer that
    /// `sges` describes, for a QP in PD `pdn` (`write`: the device writes).
    /// `OutOfBounds` when the list is shorter than `offset + len`,
    /// `Invalid` for a list longer than any WQE holds (a receive WQE's
    /// [`MAX_RECV_SGE`]; a send WQE's are [`MAX_SGE`]). Zero-length elements are skipped without a key check;
    /// an element in a page-list region gives a range per page run.
    pub fn resolve_sges(
        &self,
        pdn: u32,
        sges: &[Sge],
        offset: u64,
        len: u64,
        write: bool,
    ) -> Result<GpaRanges, AccessError> {
        if sges.len() > MAX_SGE.max(usize::from(MAX_RECV_SGE)) {
            return Err(AccessError::Invalid);
        }
        let mut ranges = GpaRanges::default();
        let (mut skip, mut left) = (offset, len);
        for sge in sges {
            if left == 0 {
                break;
            }
            let sge_len = u64::from(sge.length.to_native());
            if skip >= sge_len {
                skip -= sge_len;
                continue;
            }
            let take = left.min(sge_len - skip);
            let va = sge
                .addr
                .to_native()
                .checked_add(skip)
                .ok_or(AccessError::OutOfBounds)?;
            self.check_local_into(pdn, sge.lkey.to_native(), va, take, write, &mut ranges)?;
            left -= take;
            skip = 0;
        }
        if left > 0 {
            return Err(AccessError::OutOfBounds);
        }
        Ok(ranges)
    }
}

#[cfg(test)]
mod tests {
    use super::super::abi::ACCESS_LOCAL_WRITE;
    use super::super::translate::GpaRange;
    use super::*;
    use vm_memory::{Le32, Le64};

    const PD: u32 = 0x401;

    fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
        Sge {
            addr: Le64::from(addr),
            length: Le32::from(length),
            lkey: Le32::from(lkey),
        }
    }

    fn r(gpa: u64, len: u64) -> GpaRange {
        GpaRange { gpa, len }
    }

    #[test]
    fn splits_offsets_across_elements_and_merges_contiguous_ones() {
        let mut t = MrTable::new(8, 3);
        let (a, _) = t
            .register(PD, ACCESS_LOCAL_WRITE, 0x1000, 0x100, 0x10_0000)
            .unwrap();
        let (b, _) = t.register(PD, 0, 0x0, 0x100, 0x20_0000).unwrap();
        let list = [
            sge(0x1000, 0x80, a),
            sge(0, 0, 0),
            sge(0x10, 0x20, b),
            sge(0x1080, 0x80, a),
        ];
        let got = t.resolve_sges(PD, &list, 0x70, 0x40, false).unwrap();
        assert_eq!(
            *got,
            [r(0x10_0070, 0x10), r(0x20_0010, 0x20), r(0x10_0080, 0x10)]
        );
        // The first and last elements are contiguous when nothing is between.
        let two = [sge(0x1000, 0x80, a), sge(0x1080, 0x80, a)];
        assert_eq!(
            *t.resolve_sges(PD, &two, 0, 0x100, true).unwrap(),
            [r(0x10_0000, 0x100)]
        );
        // More separate pieces than a WQE can hold: refused, not truncated.
        let n = usize::from(MAX_RECV_SGE) + 1;
        let five: Vec<Sge> = (0..n as u64)
            .map(|i| sge(0x1000 + 0x20 * i, 0x10, a))
            .collect();
        assert_eq!(
            t.resolve_sges(PD, &five, 0, 0x10 * n as u64, false),
            Err(AccessError::Invalid)
        );
        assert_eq!(
            t.resolve_sges(PD, &five[..4], 0, 0x40, false)
                .unwrap()
                .len(),
            4
        );
        assert_eq!(*t.resolve_sges(PD, &two, 0x100, 0, true).unwrap(), []);
        // Too short, bad keys, rights, wrapping addresses.
        assert_eq!(
            t.resolve_sges(PD, &two, 0x80, 0x81, true),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            t.resolve_sges(PD, &list, 0, 0xc0, true),
            Err(AccessError::NoRight)
        );
        assert_eq!(
            t.resolve_sges(PD + 1, &two, 0, 1, true),
            Err(AccessError::WrongPd)
        );
        let bad = [sge(u64::MAX, 0x10, a)];
        assert_eq!(
            t.resolve_sges(PD, &bad, 4, 1, true),
            Err(AccessError::OutOfBounds)
        );
        let bad = [sge(0x1000, u32::MAX, a)];
        assert_eq!(
            t.resolve_sges(PD, &bad, 0, 0x101, true),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            t.resolve_sges(PD, &[], u64::MAX, u64::MAX, true),
            Err(AccessError::OutOfBounds)
        );
        let bad = [sge(0x1000, 1, a | 1)];
        assert_eq!(
            t.resolve_sges(PD, &bad, 0, 1, false),
            Err(AccessError::BadKey)
        );
    }
}
