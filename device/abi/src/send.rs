//! A send work request of any stride, as the device reads it from a send
//! queue: the 128-byte [`SendWqe`] (4 SGEs) at the default stride, its
//! SGE list running on past those 128 bytes at a larger one (up to
//! [`MAX_SEND_SGE`] SGEs), as a receive WQE's does ([`crate::recv`]).

use std::ops::Deref;

use crate::verbs::{SendWqe, Sge, MAX_SEND_SGE, WQE_F_INLINE};

/// [`MAX_SEND_SGE`] as a length.
pub const SEND_SGE_CAP: usize = MAX_SEND_SGE as usize;

/// A send work request: the WQE's first 128 bytes (opcode, flags, remote
/// end, inline data, first 4 SGEs) and, when it names more, its whole SGE
/// list. Reads as its [`SendWqe`] for everything but the SGE list: take
/// that from [`SendWr::sges`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendWr {
    wqe: SendWqe,
    /// The whole SGE list when it runs past the WQE's 4 (else empty: no
    /// allocation for the common WQE).
    long: Vec<Sge>,
}

impl SendWr {
    /// The count of a WQE that named more SGEs than its stride holds (no
    /// SGE past the stride was read): above [`MAX_SEND_SGE`], so the
    /// transport refuses it as it refuses any count past the device's.
    pub const OVERSIZED: u8 = u8::MAX;

    /// A WQE of the default stride: its 4 SGEs (a larger count becomes
    /// [`SendWr::OVERSIZED`]).
    pub fn from_wqe(w: SendWqe) -> SendWr {
        SendWr::with_tail(w, &[])
    }

    /// A WQE whose SGEs past its first 4 are `tail` (read from the ring
    /// after the 128-byte [`SendWqe`]): `num_sge` stands when the WQE's 4
    /// and `tail` hold that many, else it becomes [`SendWr::OVERSIZED`].
    /// An inline WQE's count stays as it is (the transport checks it).
    pub fn with_tail(mut wqe: SendWqe, tail: &[Sge]) -> SendWr {
        let n = usize::from(wqe.num_sge);
        let head = wqe.sge.len();
        if n <= head || wqe.flags & WQE_F_INLINE != 0 {
            return SendWr { wqe, long: vec![] };
        }
        if n > head + tail.len() || n > SEND_SGE_CAP {
            wqe.num_sge = SendWr::OVERSIZED;
            return SendWr { wqe, long: vec![] };
        }
        let mut long = wqe.sge.to_vec();
        long.extend_from_slice(&tail[..n - head]);
        SendWr { wqe, long }
    }

    /// `wqe` with the SGE list `sges` (at most [`MAX_SEND_SGE`], else its
    /// count is [`SendWr::OVERSIZED`]), for tests and host-side queues.
    pub fn new(mut wqe: SendWqe, sges: &[Sge]) -> SendWr {
        let first = sges.len().min(wqe.sge.len());
        wqe.sge[..first].copy_from_slice(&sges[..first]);
        wqe.num_sge = u8::try_from(sges.len()).unwrap_or(SendWr::OVERSIZED);
        SendWr::with_tail(wqe, &sges[first..])
    }

    /// The valid SGEs (`None` for a count past [`MAX_SEND_SGE`]: the
    /// request fails with IBTCA_WC_LOC_LEN_ERR).
    pub fn sges(&self) -> Option<&[Sge]> {
        let n = usize::from(self.wqe.num_sge);
        if self.long.is_empty() {
            self.wqe.sge.get(..n)
        } else {
            self.long.get(..n)
        }
    }

    /// The WQE's first 128 bytes.
    pub fn wqe(&self) -> &SendWqe {
        &self.wqe
    }
}

impl Deref for SendWr {
    type Target = SendWqe;

    fn deref(&self) -> &SendWqe {
        &self.wqe
    }
}

impl From<SendWqe> for SendWr {
    fn from(w: SendWqe) -> Self {
        SendWr::from_wqe(w)
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
    fn a_long_list_reads_whole_and_a_short_tail_is_oversized() {
        let all: Vec<Sge> = (0..17).map(sge).collect();
        let w = SendWr::new(SendWqe::default(), &all);
        assert_eq!(w.num_sge, 17);
        assert_eq!(w.sges(), Some(&all[..]));
        let head = *w.wqe();
        assert_eq!(SendWr::with_tail(head, &all[4..16]).sges(), None);
        assert_eq!(SendWr::from_wqe(head).num_sge, SendWr::OVERSIZED);
        let short = SendWr::new(SendWqe::default(), &all[..3]);
        assert_eq!(short.sges(), Some(&all[..3]));
        let many: Vec<Sge> = (0..33).map(sge).collect();
        assert_eq!(SendWr::new(SendWqe::default(), &many).sges(), None);
        let all32: Vec<Sge> = (0..32).map(sge).collect();
        assert_eq!(
            SendWr::new(SendWqe::default(), &all32).sges(),
            Some(&all32[..])
        );
    }
}
