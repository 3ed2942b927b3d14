//! One ATM receive port: every cell's header through the HEC state
//! machine, then filtered (idle and unassigned cells skipped, OAM and
//! resource-management cells counted and dropped, cells of connections
//! not configured counted and dropped), then handed to its connection's
//! AAL. AAL0 passes each cell's 48-byte payload on as one message.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::aal1::{Aal1Event, Aal1Reassembler};
use super::aal5::{Aal5Error, Aal5Reassembler};
use super::cell::{Cell, Vc, HEADER_LEN, PTI_AUU};
use super::hec::{HecReceiver, HecVerdict};

/// The adaptation layer of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aal {
    /// AAL5 frames of at most `max_sdu` bytes.
    Aal5 {
        /// Largest frame taken.
        max_sdu: usize,
    },
    /// AAL1, `blocks` 47-byte blocks per message.
    Aal1 {
        /// Blocks per message.
        blocks: usize,
    },
    /// Raw cells: each 48-byte payload is a message.
    Aal0,
}

/// A message received on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The connection.
    pub vc: Vc,
    /// The frame, the blocks or the cell payload.
    pub data: Vec<u8>,
}

/// What a receive port counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxCounters {
    /// Cells taken in.
    pub cells: u64,
    /// Headers with a single-bit error, corrected.
    pub hec_corrected: u64,
    /// Headers in error, cells dropped.
    pub hec_dropped: u64,
    /// Idle and unassigned cells, skipped.
    pub idle: u64,
    /// OAM and resource-management cells, dropped.
    pub management: u64,
    /// Cells of a connection not configured, dropped.
    pub unknown_vc: u64,
    /// Messages delivered (frames, block groups, raw cells).
    pub messages: u64,
    /// AAL5 frames dropped for their CRC-32.
    pub aal5_crc: u64,
    /// AAL5 frames dropped for their length field or CPI.
    pub aal5_length: u64,
    /// AAL5 frames the sender aborted.
    pub aal5_abort: u64,
    /// AAL5 frames longer than allowed.
    pub aal5_oversize: u64,
    /// AAL5 frames that timed out in reassembly.
    pub aal5_timeout: u64,
    /// AAL1 cells lost (filler inserted).
    pub aal1_lost: u64,
    /// AAL1 cells misordered or misinserted, dropped.
    pub aal1_misordered: u64,
    /// AAL1 SAR headers in error, cells dropped.
    pub aal1_snp_errors: u64,
    /// AAL1 SAR headers corrected.
    pub aal1_corrected: u64,
}

impl RxCounters {
    fn count_aal5(&mut self, e: Aal5Error) {
        let c = match e {
            Aal5Error::Crc => &mut self.aal5_crc,
            Aal5Error::Length { .. } | Aal5Error::Cpi(_) | Aal5Error::Empty => {
                &mut self.aal5_length
            }
            Aal5Error::Abort => &mut self.aal5_abort,
            Aal5Error::Oversize(_) => &mut self.aal5_oversize,
            Aal5Error::Timeout => &mut self.aal5_timeout,
        };
        *c += 1;
    }
}

#[derive(Debug)]
enum VcState {
    Aal5(Aal5Reassembler),
    Aal1(Aal1Reassembler),
    Aal0,
}

/// An ATM receive port.
#[derive(Debug)]
pub struct Receiver {
    hec: HecReceiver,
    vcs: HashMap<Vc, VcState>,
    counters: RxCounters,
    timeout: Duration,
    scratch: Vec<Vec<u8>>,
}

impl Receiver {
    /// A port with no connections, dropping AAL5 frames whose last cell is
    /// more than `timeout` after their first.
    pub fn new(timeout: Duration) -> Self {
        Self {
            hec: HecReceiver::new(),
            vcs: HashMap::new(),
            counters: RxCounters::default(),
            timeout,
            scratch: Vec::new(),
        }
    }

    /// Adds connection `vc`; false (and nothing changed) if it exists.
    pub fn add_vc(&mut self, vc: Vc, aal: Aal) -> bool {
        if self.vcs.contains_key(&vc) {
            return false;
        }
        let state = match aal {
            Aal::Aal5 { max_sdu } => VcState::Aal5(Aal5Reassembler::new(max_sdu)),
            Aal::Aal1 { blocks } => VcState::Aal1(Aal1Reassembler::new(blocks, 0)),
            Aal::Aal0 => VcState::Aal0,
        };
        self.vcs.insert(vc, state);
        true
    }

    /// Starts over on a new connection of the port: partial AAL5 frames
    /// and AAL1 sequence state are dropped (not counted), the HEC goes
    /// back to correction mode; counters are kept.
    pub fn restart(&mut self) {
        self.hec = HecReceiver::new();
        for state in self.vcs.values_mut() {
            match state {
                VcState::Aal5(r) => *r = r.fresh(),
                VcState::Aal1(r) => *r = r.fresh(),
                VcState::Aal0 => {}
            }
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> &RxCounters {
        &self.counters
    }

    /// Takes one cell received at `now`; appends what it completes to
    /// `out`.
    pub fn push(&mut self, cell: &Cell, now: Instant, out: &mut Vec<Delivery>) {
        self.counters.cells += 1;
        let mut h = cell.header_bytes();
        match self.hec.check(&mut h) {
            HecVerdict::Valid => {}
            HecVerdict::Corrected(_) => self.counters.hec_corrected += 1,
            HecVerdict::Discarded => {
                self.counters.hec_dropped += 1;
                return;
            }
        }
        let mut fixed = cell.bytes;
        fixed[..HEADER_LEN].copy_from_slice(&h);
        let cell = Cell { bytes: fixed };
        let header = cell.header();
        if header.is_unassigned() {
            self.counters.idle += 1;
            return;
        }
        if header.is_management() {
            self.counters.management += 1;
            return;
        }
        let vc = header.vc();
        let Some(state) = self.vcs.get_mut(&vc) else {
            self.counters.unknown_vc += 1;
            return;
        };
        let c = &mut self.counters;
        match state {
            VcState::Aal0 => {
                c.messages += 1;
                out.push(Delivery {
                    vc,
                    data: cell.payload().to_vec(),
                });
            }
            VcState::Aal5(r) => match r.push(cell.payload(), header.pti & PTI_AUU != 0, now) {
                None => {}
                Some(Ok(frame)) => {
                    c.messages += 1;
                    out.push(Delivery {
                        vc,
                        data: frame.data,
                    });
                }
                Some(Err(e)) => c.count_aal5(e),
            },
            VcState::Aal1(r) => {
                match r.push(cell.payload(), &mut self.scratch) {
                    Aal1Event::InSequence => {}
                    Aal1Event::Corrected => c.aal1_corrected += 1,
                    Aal1Event::Lost(n) => c.aal1_lost += u64::from(n),
                    Aal1Event::Misordered => c.aal1_misordered += 1,
                    Aal1Event::SnpError => c.aal1_snp_errors += 1,
                }
                for data in self.scratch.drain(..) {
                    c.messages += 1;
                    out.push(Delivery { vc, data });
                }
            }
        }
    }

    /// Drops every AAL5 frame whose reassembly began more than the timeout
    /// before `now`; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut n = 0;
        for state in self.vcs.values_mut() {
            if let VcState::Aal5(r) = state {
                if let Some(e) = r.expire(now, self.timeout) {
                    self.counters.count_aal5(e);
                    n += 1;
                }
            }
        }
        n
    }
}
