//! RC transport tests: two [`RcQp`]s with mock environments, joined by an
//! in-memory wire that can drop, duplicate, reorder and corrupt packets.
//! Corrupted packets fail [`PacketView::parse`] (ICRC/VCRC) and are dropped
//! the way a real receiver drops them. Time only moves when the wire jumps
//! to the next deadline: no sleeps.

mod data;
mod errors;
mod hostile;
mod inline;
mod msn;
mod quasi;
mod reliability;
mod resources;

use std::time::{Duration, Instant};

use ibtca_protocol::{Packet, PacketView};

use super::mock::{MockEnv, ALL_ACCESS};
use super::{RcConfig, RcQp};
use ibtca_abi::verbs::*;

pub(crate) const QPN_A: u32 = 0x11;
pub(crate) const QPN_B: u32 = 0x22;
pub(crate) const LID_A: u16 = 1;
pub(crate) const LID_B: u16 = 2;

/// Keys and addresses every node registers.
pub(crate) const SRC: u32 = 0x100;
pub(crate) const SRC_VA: u64 = 0x10_0000;
pub(crate) const DST: u32 = 0x200;
pub(crate) const DST_VA: u64 = 0x80_0000;

/// Mirrored configurations for A and B.
pub(crate) fn configs(mtu: u32) -> (RcConfig, RcConfig) {
    let mut a = RcConfig::new(QPN_A, QPN_B);
    a.slid = LID_A;
    a.dlid = LID_B;
    a.path_mtu = mtu;
    a.sq_psn = 100;
    a.rq_psn = 500;
    let mut b = RcConfig::new(QPN_B, QPN_A);
    b.slid = LID_B;
    b.dlid = LID_A;
    b.path_mtu = mtu;
    b.sq_psn = 500;
    b.rq_psn = 100;
    (a, b)
}

/// Which way a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Dir {
    AtoB,
    BtoA,
}

pub(crate) struct Node {
    pub(crate) qp: RcQp,
    pub(crate) env: MockEnv,
}

/// Fault rates in parts per 10 000.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    pub(crate) drop: u32,
    pub(crate) dup: u32,
    pub(crate) reorder: u32,
    pub(crate) corrupt: u32,
}

type Filter = Box<dyn FnMut(Dir, &PacketView<'_>) -> bool>;

pub(crate) struct Wire {
    pub(crate) a: Node,
    pub(crate) b: Node,
    pub(crate) now: Instant,
    pub(crate) start: Instant,
    pub(crate) faults: Faults,
    /// Returns true to drop a packet (after it is logged).
    pub(crate) filter: Filter,
    /// Every packet put on the wire, before faults.
    pub(crate) log: Vec<(Dir, Vec<u8>)>,
    /// Packets a receiver could not parse (corrupted).
    pub(crate) unparsable: u64,
    /// Owed responses each QP sends per turn of [`Wire::deliver`] (the
    /// engine's RKM_READ_BUDGET; 0 holds them back).
    pub(crate) read_budget: usize,
    rng: u64,
}

impl Wire {
    /// Two QPs, each with 2 MiB SRC and DST regions.
    pub(crate) fn new(a: RcConfig, b: RcConfig) -> Self {
        Self::with_memory(a, b, 2 << 20)
    }

    /// Two QPs, each with SRC and DST regions of `bytes`.
    pub(crate) fn with_memory(a: RcConfig, b: RcConfig, bytes: usize) -> Self {
        let node = |cfg| {
            let mut env = MockEnv::new();
            env.reg(SRC, SRC_VA, bytes, ALL_ACCESS);
            env.reg(DST, DST_VA, bytes, ALL_ACCESS);
            Node {
                qp: RcQp::new(cfg).expect("valid config"),
                env,
            }
        };
        let now = Instant::now();
        Self {
            a: node(a),
            b: node(b),
            now,
            start: now,
            faults: Faults::default(),
            filter: Box::new(|_, _| false),
            log: Vec::new(),
            unparsable: 0,
            read_budget: usize::MAX,
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }

    pub(crate) fn with_mtu(mtu: u32) -> Self {
        let (a, b) = configs(mtu);
        Self::new(a, b)
    }

    pub(crate) fn seed(&mut self, seed: u64) {
        self.rng = seed | 1;
    }

    fn chance(&mut self, per_10k: u32) -> bool {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        per_10k > 0 && (r >> 33) % 10_000 < u64::from(per_10k)
    }

    fn random(&mut self) -> u64 {
        self.chance(0);
        self.rng
    }

    /// Posts on A at the current time.
    pub(crate) fn post_a(&mut self, wqe: SendWqe) {
        self.a.qp.post_send(wqe, self.now, &mut self.a.env);
    }

    /// Posts on B at the current time.
    pub(crate) fn post_b(&mut self, wqe: SendWqe) {
        self.b.qp.post_send(wqe, self.now, &mut self.b.env);
    }

    /// One turn of both responders: each sends up to `read_budget` owed
    /// responses.
    pub(crate) fn serve(&mut self) {
        self.a.qp.serve_responses(self.read_budget, &mut self.a.env);
        self.b.qp.serve_responses(self.read_budget, &mut self.b.env);
    }

    /// Moves packets, a turn of owed responses after each round, until
    /// both outboxes stay empty (no timers).
    pub(crate) fn deliver(&mut self) {
        for _ in 0..1_000_000 {
            self.serve();
            let from_a = self.a.env.take_outbox();
            let from_b = self.b.env.take_outbox();
            if from_a.is_empty() && from_b.is_empty() {
                return;
            }
            let to_b = self.faulty(Dir::AtoB, from_a);
            let to_a = self.faulty(Dir::BtoA, from_b);
            for p in to_b {
                match PacketView::parse(&p) {
                    Ok(v) => self.b.qp.on_packet(&v, self.now, &mut self.b.env),
                    Err(_) => self.unparsable += 1,
                }
            }
            for p in to_a {
                match PacketView::parse(&p) {
                    Ok(v) => self.a.qp.on_packet(&v, self.now, &mut self.a.env),
                    Err(_) => self.unparsable += 1,
                }
            }
        }
        panic!("wire never went quiet");
    }

    fn faulty(&mut self, dir: Dir, packets: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(packets.len());
        let mut held: Option<Vec<u8>> = None;
        for mut p in packets {
            self.log.push((dir, p.clone()));
            let dropped = match PacketView::parse(&p) {
                Ok(v) => (self.filter)(dir, &v),
                Err(_) => false,
            };
            if dropped || self.chance(self.faults.drop) {
                continue;
            }
            if self.chance(self.faults.corrupt) {
                let bit = (self.random() % (p.len() as u64 * 8)) as usize;
                p[bit / 8] ^= 1 << (bit % 8);
            }
            if self.chance(self.faults.dup) {
                out.push(p.clone());
            }
            if held.is_none() && self.chance(self.faults.reorder) {
                held = Some(p);
                continue;
            }
            out.push(p);
            if let Some(h) = held.take() {
                out.push(h);
            }
        }
        out.extend(held);
        out
    }

    /// The earlier deadline of the two QPs.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        match (self.a.qp.next_deadline(), self.b.qp.next_deadline()) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Jumps to `t` and runs both QPs' timers.
    pub(crate) fn advance_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
        self.a.qp.on_timer(self.now, &mut self.a.env);
        self.b.qp.on_timer(self.now, &mut self.b.env);
    }

    /// Delivers, then fires timers, until nothing is left to do.
    pub(crate) fn run(&mut self) {
        for _ in 0..100_000 {
            self.deliver();
            let Some(t) = self.next_deadline() else {
                return;
            };
            self.advance_to(t);
        }
        panic!("transport never settled");
    }

    /// Owned copies of the logged packets in one direction.
    pub(crate) fn packets(&self, dir: Dir) -> Vec<Packet> {
        self.log
            .iter()
            .filter(|(d, _)| *d == dir)
            .filter_map(|(_, p)| PacketView::parse(p).ok().map(|v| v.to_packet()))
            .collect()
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.now - self.start
    }
}

/// A deterministic byte pattern.
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(u32::from(seed) * 7) as u8
                ^ (i >> 8) as u8
        })
        .collect()
}

pub(crate) fn sge(key: u32, addr: u64, len: u32) -> Sge {
    Sge {
        addr: addr.into(),
        length: len.into(),
        lkey: key.into(),
    }
}

/// A signaled WQE with `opcode` gathering from `sges`.
pub(crate) fn wqe(opcode: u8, wr_id: u64, sges: &[Sge]) -> SendWqe {
    let mut w = SendWqe {
        wr_id: wr_id.into(),
        opcode,
        flags: WQE_F_SIGNALED,
        num_sge: sges.len() as u8,
        ..SendWqe::default()
    };
    w.sge[..sges.len()].copy_from_slice(sges);
    w
}

/// A signaled SEND of `len` bytes from the start of SRC.
pub(crate) fn send(wr_id: u64, len: u32) -> SendWqe {
    wqe(WR_SEND, wr_id, &[sge(SRC, SRC_VA, len)])
}

/// A signaled RDMA WRITE/READ of `len` bytes between SRC (local) and
/// `remote_va` through `rkey`.
pub(crate) fn rdma(opcode: u8, wr_id: u64, len: u32, remote_va: u64, rkey: u32) -> SendWqe {
    let key = if opcode == WR_RDMA_READ { DST } else { SRC };
    let va = if opcode == WR_RDMA_READ {
        DST_VA
    } else {
        SRC_VA
    };
    let mut w = wqe(opcode, wr_id, &[sge(key, va, len)]);
    w.remote_addr = remote_va.into();
    w.rkey = rkey.into();
    w
}

/// Completions as (wr_id, opcode, status).
pub(crate) fn summary(cqes: &[Cqe]) -> Vec<(u64, u8, u8)> {
    cqes.iter()
        .map(|c| (c.wr_id.to_native(), c.opcode, c.status))
        .collect()
}

/// How a test invalidates B's DST key while an operation through it is in
/// flight.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Invalidation {
    /// The region goes (as DEREG_MR, LOCAL_INV or a window's unbinding at
    /// B): the walk runs.
    Gone,
    /// The region goes and is registered again at once, same key, same
    /// memory: every check of the key passes again, as it did before, so
    /// only the walk's cleared slot stops the operation.
    RegisteredAgain,
}

impl Invalidation {
    pub(crate) fn apply(self, env: &mut MockEnv) {
        match self {
            Invalidation::Gone => drop(env.invalidate(DST).expect("DST")),
            Invalidation::RegisteredAgain => env.invalidate_and_register_again(DST),
        }
    }
}
