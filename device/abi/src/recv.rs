//! A receive work request of any stride, as the device reads it from a
//! receive ring: the 128-byte [`RecvWqe`] (4 SGEs) at the default stride,
//! its SGE list running on past those 128 bytes at a larger one (up to
//! [`MAX_RECV_SGE`] SGEs at 2^[`MAX_RECV_LOG_STRIDE`] bytes).

use std::mem::{offset_of, size_of};

use crate::verbs::{RecvWqe, Sge, MAX_RECV_LOG_STRIDE, MAX_RECV_SGE, RECV_LOG_STRIDE};

/// [`MAX_RECV_SGE`] as a length.
pub const RECV_SGE_CAP: usize = MAX_RECV_SGE as usize;

/// The SGEs a receive WQE stride of 2^`log_stride` bytes holds (`None`
/// for a stride below 128 bytes or above 2^[`MAX_RECV_LOG_STRIDE`]).
pub fn stride_sges(log_stride: u8) -> Option<usize> {
    if !(RECV_LOG_STRIDE..=MAX_RECV_LOG_STRIDE).contains(&log_stride) {
        return None;
    }
    let room = (1usize << log_stride) - offset_of!(RecvWqe, sge);
    Some((room / size_of::<Sge>()).min(RECV_SGE_CAP))
}

/// The smallest stride (log2 bytes) that holds `sges` SGEs (`None` past
/// [`MAX_RECV_SGE`]).
pub fn log_stride_for(sges: usize) -> Option<u8> {
    (RECV_LOG_STRIDE..=MAX_RECV_LOG_STRIDE).find(|&l| stride_sges(l).is_some_and(|n| n >= sges))
}

/// A receive work request: the WQE's cookie and SGE list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// The caller's cookie, returned in the completion.
    pub wr_id: u64,
    /// The WQE's SGE count; [`RecvWr::OVERSIZED`] when the WQE named more
    /// than its ring's stride holds.
    pub num_sge: u8,
    /// The first `num_sge` are valid.
    pub sge: [Sge; RECV_SGE_CAP],
}

impl Default for RecvWr {
    fn default() -> Self {
        RecvWr {
            wr_id: 0,
            num_sge: 0,
            sge: [Sge::default(); RECV_SGE_CAP],
        }
    }
}

impl RecvWr {
    /// The count of a WQE that named more SGEs than its stride holds (no
    /// SGE past the stride was read): above [`MAX_RECV_SGE`], so the
    /// transport refuses it as it refuses any count past the device's.
    pub const OVERSIZED: u8 = u8::MAX;

    /// The valid SGEs (`None` for a count past [`MAX_RECV_SGE`]: the
    /// receive fails with IBTCA_WC_LOC_LEN_ERR).
    pub fn sges(&self) -> Option<&[Sge]> {
        self.sge.get(..usize::from(self.num_sge))
    }

    /// A WQE of the default stride: its 4 SGEs (a larger count is kept as
    /// [`RecvWr::OVERSIZED`]).
    pub fn from_wqe(w: &RecvWqe) -> RecvWr {
        RecvWr::with_tail(w, &[])
    }

    /// A WQE whose SGEs past its first 4 are `tail` (read from the ring
    /// after the 128-byte [`RecvWqe`]): `num_sge` stands when the WQE's
    /// 4 and `tail` hold that many, else it becomes [`RecvWr::OVERSIZED`].
    pub fn with_tail(w: &RecvWqe, tail: &[Sge]) -> RecvWr {
        let mut r = RecvWr {
            wr_id: w.wr_id.to_native(),
            num_sge: w.num_sge,
            ..RecvWr::default()
        };
        let n = usize::from(w.num_sge);
        let head = w.sge.len();
        if n > head + tail.len() || n > RECV_SGE_CAP {
            r.num_sge = RecvWr::OVERSIZED;
            return r;
        }
        let from_head = n.min(head);
        r.sge[..from_head].copy_from_slice(&w.sge[..from_head]);
        r.sge[from_head..n].copy_from_slice(&tail[..n - from_head]);
        r
    }

    /// A request of `sges` (at most [`MAX_RECV_SGE`], else
    /// [`RecvWr::OVERSIZED`]), for tests and host-side queues.
    pub fn new(wr_id: u64, sges: &[Sge]) -> RecvWr {
        let mut r = RecvWr {
            wr_id,
            ..RecvWr::default()
        };
        match r.sge.get_mut(..sges.len()) {
            Some(d) => {
                d.copy_from_slice(sges);
                r.num_sge = sges.len() as u8;
            }
            None => r.num_sge = RecvWr::OVERSIZED,
        }
        r
    }
}

impl From<RecvWqe> for RecvWr {
    fn from(w: RecvWqe) -> Self {
        RecvWr::from_wqe(&w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(i: u32) -> Sge {
        Sge {
            addr: u64::from(i).into(),
            length: i.into(),
            lkey: i.into(),
        }
    }

    #[test]
    fn strides_hold_their_sges() {
        assert_eq!(stride_sges(6), None);
        assert_eq!(stride_sges(7), Some(4));
        assert_eq!(stride_sges(8), Some(12));
        assert_eq!(stride_sges(9), Some(28));
        assert_eq!(stride_sges(10), Some(32));
        assert_eq!(stride_sges(11), None);
        assert_eq!(log_stride_for(0), Some(7));
        assert_eq!(log_stride_for(4), Some(7));
        assert_eq!(log_stride_for(5), Some(8));
        assert_eq!(log_stride_for(17), Some(9));
        assert_eq!(log_stride_for(32), Some(10));
        assert_eq!(log_stride_for(33), None);
    }

    #[test]
    fn a_count_past_what_was_read_is_oversized() {
        let mut w = RecvWqe {
            wr_id: 9.into(),
            num_sge: 6,
            ..RecvWqe::default()
        };
        for (i, s) in w.sge.iter_mut().enumerate() {
            *s = sge(i as u32);
        }
        let tail = [sge(4), sge(5)];
        let r = RecvWr::with_tail(&w, &tail);
        assert_eq!(r.wr_id, 9);
        let want: Vec<Sge> = (0..6).map(sge).collect();
        assert_eq!(r.sges(), Some(&want[..]));
        assert_eq!(RecvWr::with_tail(&w, &tail[..1]).sges(), None);
        assert_eq!(RecvWr::from_wqe(&w).num_sge, RecvWr::OVERSIZED);
        w.num_sge = 3;
        assert_eq!(RecvWr::from_wqe(&w).sges(), Some(&want[..3]));
        assert_eq!(RecvWr::new(1, &[sge(0); 33]).sges(), None);
    }
}
