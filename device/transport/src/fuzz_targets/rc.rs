//! `rc_responder`: a hostile peer against one RC QP. Packets built from
//! the fuzz input — mostly well-formed, addressed to the QP, with fuzzed
//! opcodes, PSNs, R_Keys, VAs, lengths, payloads and AETHs, plus raw bytes
//! — reach its responder and its completer, between posted receives, posted
//! requests and timer expiries, through the mock environment of the
//! transport tests wrapped in a checker.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ibtca_protocol::fuzz_targets::Input;
use ibtca_protocol::headers::{Aeth, AtomicAckEth, AtomicEth, Deth, Ieth, ImmDt, Reth, MASK_24};
use ibtca_protocol::opcode::{Direction, OPCODES};
use ibtca_protocol::{ExtHeader, Opcode, Packet, PacketView};

use crate::keys::KEY_SLOTS;
use crate::mock::{MockEnv, ALL_ACCESS};
use crate::psn;
use crate::{AccessError, AckPolicy, AtomicOp, CqKind, KeyUse, QpEnv, RcConfig, RcQp};
use ibtca_abi::recv::RecvWr;
use ibtca_abi::verbs::*;

const QPN: u32 = 0x22;
const PEER_QPN: u32 = 0x11;
const LID: u16 = 2;
const PEER_LID: u16 = 1;
/// Most timer expiries a QP with nothing more coming may need to settle:
/// one per transport retry, per RNR wait, plus slack.
const SETTLE_STEPS: usize = 64;

/// One registered region of the mock memory: key, VA, length, rights, PD.
struct Region {
    key: u32,
    va: u64,
    len: usize,
    access: u32,
    pd: u32,
}

/// The regions: remote-writable, read-only, atomic-only, local receive
/// buffers, one of another PD at the same VA as the writable one, and one
/// at the top of the address space.
const REGIONS: [Region; 6] = [
    Region {
        key: 0x100,
        va: 0x10_0000,
        len: 16 << 10,
        access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ,
        pd: 1,
    },
    Region {
        key: 0x200,
        va: 0x20_0000,
        len: 4 << 10,
        access: ACCESS_REMOTE_READ,
        pd: 1,
    },
    Region {
        key: 0x300,
        va: 0x30_0000,
        len: 4 << 10,
        access: ACCESS_REMOTE_ATOMIC | ACCESS_REMOTE_READ,
        pd: 1,
    },
    Region {
        key: 0x400,
        va: 0x40_0000,
        len: 16 << 10,
        access: ACCESS_LOCAL_WRITE,
        pd: 1,
    },
    Region {
        key: 0x500,
        va: 0x10_0000,
        len: 4 << 10,
        access: ALL_ACCESS,
        pd: 2,
    },
    Region {
        key: 0x600,
        va: u64::MAX - (8 << 10) + 1 - (4 << 10),
        len: 4 << 10,
        access: ALL_ACCESS,
        pd: 1,
    },
];
/// Unregistered bytes around every region.
const GUARD: usize = 64;

/// Input: a set-up byte (MTU, first PSNs, retry counts, ACK policy), then
/// actions until the input ends: deliver a fuzzed packet, deliver raw
/// bytes, run the timers, post a receive or a request, or flush the QP.
/// After the input, timers run until the QP settles.
///
/// Invariants: no panic; no byte outside the regions this QP's PD may
/// write (remote-write, atomic and local-write rights) ever changes; a
/// remote write or read lands only inside a range the responder checked
/// for that key and right beforehand; every packet the QP sends parses
/// and is addressed to the peer, within the path MTU; every posted work
/// request completes at most once; every delivered packet is counted as
/// received or dropped; PSNs and the MSN stay 24-bit; with no more input
/// the QP settles, and then it either is in error with every work request
/// flushed, or has completed everything it was asked to send.
pub fn rc_responder(data: &[u8]) {
    let mut input = Input::new(data);
    let mut t = Target::new(&mut input);
    while !input.is_empty() {
        t.step(&mut input);
    }
    t.settle();
    t.check_end();
}

/// The QP under attack and everything the checks need.
struct Target {
    qp: RcQp,
    env: Checked,
    now: Instant,
    mtu: u32,
    delivered: u64,
    next_wr: u64,
}

impl Target {
    fn new(input: &mut Input<'_>) -> Self {
        let setup = input.u8();
        let mut cfg = RcConfig::new(QPN, PEER_QPN);
        cfg.slid = LID;
        cfg.dlid = PEER_LID;
        cfg.path_mtu = 256 << (setup % 5);
        // First PSNs near the 24-bit wrap, or not.
        let (sq, rq) = if setup & 0x08 != 0 {
            (MASK_24 - 2, MASK_24 - 1)
        } else {
            (500, 100)
        };
        cfg.sq_psn = sq;
        cfg.rq_psn = rq;
        cfg.retry_cnt = (setup >> 4) & 7;
        cfg.rnr_retry = if setup & 0x80 != 0 { 7 } else { 1 };
        // 1 to 16: every READ slot of the key memory.
        cfg.max_dest_rd_atomic = 1 + (setup >> 4);
        cfg.max_rd_atomic = 1 + (setup >> 6);
        cfg.send_window = 1 + u32::from(setup >> 4);
        if setup & 0x04 != 0 {
            cfg.ack_policy = AckPolicy::PerPacket;
        } else if setup & 0x40 != 0 {
            cfg.ack_policy = AckPolicy::Coalesced(1 + u16::from(setup >> 5 & 3));
        }
        // The MSN start: the seed's, near the wrap with the PSNs, or IBA's.
        cfg.initial_msn = match setup & 0x09 {
            0x09 => MASK_24 - 1,
            0x01 => MASK_24,
            _ => 0,
        };
        let mtu = cfg.path_mtu;
        let qp = RcQp::new(cfg.clone()).expect("valid config");
        Self {
            qp,
            env: Checked::new(cfg),
            now: Instant::now(),
            mtu,
            delivered: 0,
            next_wr: 1,
        }
    }

    fn step(&mut self, input: &mut Input<'_>) {
        match input.u8() % 16 {
            0..=9 => {
                let p = self.packet(input);
                self.deliver_packet(&p);
            }
            10 => {
                let len = usize::from(input.u8()) * 2;
                let bytes = input.bytes(len).to_vec();
                self.deliver_bytes(&bytes);
            }
            11 => self.timer(input.u8()),
            12 => self.post_recv(input),
            13 => self.post_send(input),
            14 => match input.u8() {
                0xff => self.qp.flush(&mut self.env),
                0xfe => {
                    // An invalidation walk over a key the peer may be using
                    // (seed 001): a held READ or WRITE must stop cleanly.
                    let any = input.u32();
                    let key = input.pick(&[0x100, 0x200, 0x300, any]);
                    let pd = self.env.mock.pd;
                    self.env.mock.keys.invalidate_walk(pd, key);
                }
                // One turn of owed responses (seed 004), 0: held back.
                b => {
                    self.qp.serve_responses(usize::from(b % 8), &mut self.env);
                    self.check_state();
                }
            },
            _ => {
                // Addressing fuzzed too: most of these must be dropped.
                let mut p = self.packet(input);
                let (slid, dlid, qpn, pkey) = (input.u16(), input.u16(), input.u32(), input.u16());
                p.lrh.slid = input.pick(&[PEER_LID, slid]);
                p.lrh.dlid = input.pick(&[LID, dlid]);
                p.bth.dest_qp = input.pick(&[QPN, qpn & MASK_24]);
                p.bth.pkey = input.pick(&[0xffff, 0x7fff, pkey]);
                p.lrh.vl = input.u8() & 0xf;
                p.lrh.sl = input.u8() & 0xf;
                self.deliver_packet(&p);
            }
        }
    }

    /// A packet addressed to the QP, its contents chosen by `input`.
    fn packet(&self, input: &mut Input<'_>) -> Packet {
        let opcode = OPCODES[usize::from(input.u8()) % OPCODES.len()].opcode;
        let mut p = Packet::new(opcode);
        p.lrh.slid = PEER_LID;
        p.lrh.dlid = LID;
        p.bth.dest_qp = QPN;
        let flags = input.u8();
        p.bth.ack_req = flags & 1 != 0;
        p.bth.se = flags & 2 != 0;
        p.bth.mig = flags & 4 != 0;
        p.bth.fecn = flags & 8 != 0;
        p.bth.becn = flags & 16 != 0;
        p.bth.psn = self.psn(opcode.info().direction, input);
        let any_key = input.u32();
        let key = input.pick(&[0x100, 0x200, 0x300, 0x400, 0x500, 0x600, any_key]);
        let va = self.va(key, input);
        let mtu = self.mtu;
        let any_len = input.u32();
        let dma_len = input.pick(&[
            0,
            1,
            8,
            mtu - 1,
            mtu,
            mtu + 1,
            3 * mtu,
            4 << 10,
            16 << 10,
            u32::MAX,
            any_len,
        ]);
        for h in opcode.info().headers {
            match h {
                ExtHeader::Reth => {
                    p.ext.reth = Some(Reth {
                        va,
                        rkey: key,
                        dma_len,
                    })
                }
                ExtHeader::AtomicEth => {
                    p.ext.atomic_eth = Some(AtomicEth {
                        va,
                        rkey: key,
                        swap_add: input.u64(),
                        compare: input.u64(),
                    })
                }
                ExtHeader::Aeth => p.ext.aeth = Some(self.aeth(input)),
                ExtHeader::AtomicAckEth => {
                    p.ext.atomic_ack_eth = Some(AtomicAckEth { orig: input.u64() })
                }
                ExtHeader::ImmDt => p.ext.immdt = Some(ImmDt { data: input.u32() }),
                ExtHeader::Ieth => p.ext.ieth = Some(Ieth { rkey: key }),
                ExtHeader::Deth => {
                    p.ext.deth = Some(Deth {
                        qkey: input.u32(),
                        src_qp: PEER_QPN,
                    })
                }
            }
        }
        if opcode.info().payload {
            let len = match input.u8() % 8 {
                0 => 0,
                1 => mtu as usize,
                2 => mtu as usize - 1,
                3 => mtu as usize + 1,
                4 => (dma_len as usize).min(4096),
                _ => usize::from(input.u16()) % (mtu as usize + 64),
            };
            let head = input.bytes(len.min(16));
            p.payload = [head, &vec![input.u8() | 1; len - head.len()]].concat();
        }
        p
    }

    /// A PSN near the one the QP expects (requests) or near those of its
    /// own requests (responses), or any.
    fn psn(&self, direction: Direction, input: &mut Input<'_>) -> u32 {
        let near = match direction {
            Direction::Request => self.qp.expected_psn(),
            // The newest request sent is sq_psn - 1.
            Direction::Response => self.qp.sq_psn().wrapping_sub(1),
        };
        let mode = input.u8();
        let psn = match mode % 4 {
            0 => near,
            1 | 2 => near.wrapping_add(i32::from(input.u8() as i8) as u32),
            _ => input.u32(),
        };
        psn & MASK_24
    }

    /// A VA in the region of `key` (or around it), or any.
    fn va(&self, key: u32, input: &mut Input<'_>) -> u64 {
        let base = REGIONS.iter().find(|r| r.key == key).map_or(0, |r| r.va);
        match input.u8() % 4 {
            0 => base,
            1 => base.wrapping_add(u64::from(input.u16())),
            2 => base.wrapping_sub(u64::from(input.u8())),
            _ => input.u64(),
        }
    }

    fn aeth(&self, input: &mut Input<'_>) -> Aeth {
        let msn = match input.u8() % 3 {
            0 => input.u32() & MASK_24,
            _ => u32::from(input.u8()),
        };
        let syndrome = match input.u8() % 4 {
            // ACK, RNR NAK (timer), NAK (code), anything.
            0 => input.u8() & 0x1f,
            1 => 0x20 | (input.u8() & 0x1f),
            2 => 0x60 | (input.u8() % 5),
            _ => input.u8(),
        };
        Aeth { syndrome, msn }
    }

    fn deliver_packet(&mut self, p: &Packet) {
        if let Ok(bytes) = p.build() {
            self.deliver_bytes(&bytes);
        }
    }

    fn deliver_bytes(&mut self, bytes: &[u8]) {
        if let Ok(v) = PacketView::parse(bytes) {
            self.delivered += 1;
            self.qp.on_packet(&v, self.now, &mut self.env);
            self.check_state();
        }
    }

    /// Moves time forward: to the next deadline, or by up to ~26 ms.
    fn timer(&mut self, how: u8) {
        let t = match (how & 1, self.qp.next_deadline()) {
            (0, Some(t)) => t,
            _ => self.now + Duration::from_micros(u64::from(how) * 100),
        };
        self.now = self.now.max(t);
        self.qp.on_timer(self.now, &mut self.env);
        self.check_state();
    }

    fn post_recv(&mut self, input: &mut Input<'_>) {
        if self.qp.is_error() {
            // The verbs layer flushes receives posted to a QP in error; they
            // never reach the transport.
            return;
        }
        // Past the device's most: refused with a length error.
        let n = usize::from(input.u8() % (MAX_RECV_SGE + 2));
        let sges: Vec<Sge> = (0..n).map(|_| self.sge(input)).collect();
        let wr_id = self.wr_id();
        self.env.posted_recv.insert(wr_id, 0);
        self.env.mock.post_recv(wr_id, &sges);
    }

    /// A local SGE: mostly in the receive-buffer region.
    fn sge(&self, input: &mut Input<'_>) -> Sge {
        let any_key = input.u32();
        let key = input.pick(&[0x400, 0x400, 0x100, 0x200, 0x500, any_key]);
        let va = self.va(key, input);
        let any_len = input.u32();
        let length = input.pick(&[0, 8, self.mtu, 4 << 10, 16 << 10, any_len]);
        Sge {
            addr: va.into(),
            length: length.into(),
            lkey: key.into(),
        }
    }

    fn post_send(&mut self, input: &mut Input<'_>) {
        let any_opcode = input.u8();
        let opcode = input.pick(&[
            WR_SEND,
            WR_SEND_IMM,
            WR_RDMA_WRITE,
            WR_RDMA_WRITE_IMM,
            WR_RDMA_READ,
            WR_ATOMIC_CMP_SWP,
            WR_ATOMIC_FETCH_ADD,
            WR_SEND_INV,
            WR_LOCAL_INV,
            any_opcode,
        ]);
        let n = input.u8() % (MAX_SGE as u8 + 1);
        let mut wqe = SendWqe {
            wr_id: self.wr_id().into(),
            opcode,
            flags: WQE_F_SIGNALED | (input.u8() & (WQE_F_SOLICITED | WQE_F_FENCE)),
            num_sge: n,
            imm_data: input.u32().into(),
            remote_addr: input.u64().into(),
            rkey: input.u32().into(),
            compare_add: input.u64().into(),
            swap: input.u64().into(),
            ..SendWqe::default()
        };
        for s in wqe.sge.iter_mut().take(usize::from(n)) {
            *s = self.sge(input);
        }
        self.env.posted_send.insert(wqe.wr_id.to_native(), 0);
        self.qp.post_send(wqe, self.now, &mut self.env);
        self.check_state();
    }

    fn wr_id(&mut self) -> u64 {
        self.next_wr += 1;
        self.next_wr
    }

    /// Runs the timers with no more input until nothing is pending.
    fn settle(&mut self) {
        self.qp.serve_responses(usize::MAX, &mut self.env);
        self.check_state();
        assert!(!self.qp.owes_responses(), "every owed response served");
        for _ in 0..SETTLE_STEPS {
            let Some(t) = self.qp.next_deadline() else {
                return;
            };
            self.now = self.now.max(t);
            self.qp.on_timer(self.now, &mut self.env);
            self.check_state();
        }
        panic!(
            "the QP did not settle in {SETTLE_STEPS} timer expiries (error {}, {} sends queued)",
            self.qp.is_error(),
            self.qp.send_queue_len()
        );
    }

    /// What holds after every event.
    fn check_state(&mut self) {
        let (epsn, sq_psn) = (self.qp.expected_psn(), self.qp.sq_psn());
        assert!(epsn <= MASK_24);
        assert!(sq_psn <= MASK_24);
        assert!(self.qp.msn() <= MASK_24);
        let c = self.qp.counters();
        assert_eq!(c.packets_received + c.packets_dropped, self.delivered);
        // Requests carry PSNs already handed out; responses answer PSNs the
        // responder has accepted (a NAK: the one it expects).
        for (direction, p, syndrome) in self.env.sent.drain(..) {
            let d = match direction {
                Direction::Request => psn::diff(p, sq_psn),
                Direction::Response => psn::diff(p, epsn),
            };
            let nak = syndrome.is_some_and(|s| s >> 5 != 0);
            assert!(
                d < 0 || (nak && d == 0),
                "{direction:?} PSN {p:#x} (syndrome {syndrome:?}): expected {epsn:#x}, next {sq_psn:#x}"
            );
        }
    }

    /// What holds once the QP has settled.
    fn check_end(&mut self) {
        self.check_state();
        self.env.check_memory();
        let sends_done = self.env.posted_send.values().all(|&n| n == 1);
        assert_eq!(
            self.qp.send_queue_len(),
            0,
            "nothing left to send once settled"
        );
        assert!(
            sends_done,
            "every send completed once: {:?}",
            self.env.posted_send
        );
        if self.qp.is_error() {
            assert!(self.env.mock.rq.is_empty(), "receives flushed");
            assert!(
                self.env.posted_recv.values().all(|&n| n == 1),
                "every receive completed"
            );
        }
    }
}

/// Initial contents of the mock memory: every byte non-zero.
fn initial_memory() -> &'static [u8] {
    static MEMORY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let len: usize = REGIONS.iter().map(|r| r.len + GUARD).sum::<usize>() + GUARD;
    MEMORY.get_or_init(|| (0..len).map(|i| (i % 253) as u8 | 1).collect())
}

/// The mock environment, wrapped in checks of what the transport asks of it.
struct Checked {
    mock: MockEnv,
    cfg: RcConfig,
    /// The initial memory.
    before: Vec<u8>,
    /// Memory ranges the QP must not change: (start, end).
    fixed: Vec<(usize, usize)>,
    /// Ranges `check_remote` accepted: (rkey, va, len, write).
    checked: Vec<(u32, u64, u64, bool)>,
    /// What each key slot was taken for: (rkey, va, write).
    held: [Option<(u32, u64, bool)>; KEY_SLOTS],
    /// Completions seen per posted work request.
    posted_send: HashMap<u64, u32>,
    posted_recv: HashMap<u64, u32>,
    /// Packets sent since the last check: direction, PSN, AETH syndrome.
    sent: Vec<(Direction, u32, Option<u8>)>,
    /// The MSN of the last AETH sent.
    last_msn: Option<u32>,
}

impl Checked {
    fn new(cfg: RcConfig) -> Self {
        let mut mock = MockEnv::new();
        // A small quasi-WQE ring, so a full one is fuzzed too.
        mock.quasi_cap = Some(4);
        let mut writable = Vec::new();
        for r in &REGIONS {
            mock.mem.resize(mock.mem.len() + GUARD, 0);
            let at = mock.mem.len();
            mock.reg_in(r.key, r.va, r.len, r.access, r.pd);
            let may_write = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC;
            if r.pd == mock.pd && r.access & may_write != 0 {
                writable.push((at, at + r.len));
            }
        }
        mock.mem.resize(mock.mem.len() + GUARD, 0);
        // Non-zero contents, so that writing zeros shows (one copy: the
        // per-byte loop would dominate an instrumented run).
        let n = mock.mem.len();
        mock.mem.copy_from_slice(&initial_memory()[..n]);
        // What must stay as it was: everything between the writable ranges.
        let mut fixed = Vec::new();
        let mut from = 0;
        for &(s, e) in &writable {
            fixed.push((from, s));
            from = e;
        }
        fixed.push((from, mock.mem.len()));
        Self {
            before: mock.mem.clone(),
            mock,
            cfg,
            fixed,
            checked: Vec::new(),
            held: [None; KEY_SLOTS],
            posted_send: HashMap::new(),
            posted_recv: HashMap::new(),
            sent: Vec::new(),
            last_msn: None,
        }
    }

    fn check_memory(&self) {
        for &(s, e) in &self.fixed {
            if self.mock.mem[s..e] != self.before[s..e] {
                let i = (s..e).find(|&i| self.mock.mem[i] != self.before[i]);
                panic!("byte {i:?} outside the writable regions changed");
            }
        }
    }

    /// An access through key slot `slot` (its key not looked up again) is
    /// inside a range checked for that key and not invalidated since.
    fn assert_slot_checked(&self, slot: usize, off: u64, len: usize, write: bool) {
        let (rkey, va, w) = self.held[slot].expect("an access through a slot never held");
        assert_eq!(w, write, "slot {slot} used for the other direction");
        assert!(
            self.was_checked(rkey, va + off, len as u64, write),
            "access of {len} bytes at {off:#x} through slot {slot} (key {rkey:#x}) \
             after its key was invalidated or outside its check"
        );
    }

    /// Whether an accepted `check_remote` covered `[va, va + len)`.
    fn was_checked(&self, rkey: u32, va: u64, len: u64, write: bool) -> bool {
        self.checked.iter().any(|&(k, cva, clen, w)| {
            k == rkey && w == write && va >= cva && va - cva <= clen && len <= clen - (va - cva)
        })
    }
}

impl QpEnv for Checked {
    fn gather(&mut self, sges: &[Sge], offset: u64, out: &mut [u8]) -> Result<(), AccessError> {
        self.mock.gather(sges, offset, out)
    }

    fn scatter(&mut self, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), AccessError> {
        self.mock.scatter(sges, offset, data)
    }

    fn check_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<(), AccessError> {
        self.mock.check_remote(rkey, va, len, write)?;
        self.checked.push((rkey, va, len, write));
        Ok(())
    }

    fn remote_write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError> {
        self.mock.remote_write(rkey, va, data)?;
        assert!(
            self.was_checked(rkey, va, data.len() as u64, true),
            "remote write of {} bytes at {va:#x} key {rkey:#x} without a check",
            data.len()
        );
        Ok(())
    }

    fn remote_read(&mut self, rkey: u32, va: u64, out: &mut [u8]) -> Result<(), AccessError> {
        self.mock.remote_read(rkey, va, out)?;
        assert!(
            self.was_checked(rkey, va, out.len() as u64, false),
            "remote read of {} bytes at {va:#x} key {rkey:#x} without a check",
            out.len()
        );
        Ok(())
    }

    fn remote_atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        self.mock.remote_atomic(rkey, va, op)
    }

    fn bind_mw(&mut self, wqe: &SendWqe) -> Result<u32, AccessError> {
        self.mock.bind_mw(wqe)
    }

    fn local_invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        self.mock.local_invalidate(rkey)
    }

    fn fast_register(&mut self, wqe: &SendWqe) -> Result<(), AccessError> {
        self.mock.fast_register(wqe)
    }

    fn remote_invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        // The key goes, and (seed 001: the mock's walk) so do the in-flight
        // holds of it.
        self.mock.remote_invalidate(rkey)?;
        self.checked.retain(|&(k, ..)| k != rkey);
        Ok(())
    }

    fn next_recv(&mut self) -> Option<RecvWr> {
        self.mock.next_recv()
    }

    fn complete(&mut self, cq: CqKind, cqe: Cqe) {
        let wr_id = cqe.wr_id.to_native();
        let seen = match cq {
            CqKind::Send => self.posted_send.get_mut(&wr_id),
            CqKind::Recv => self.posted_recv.get_mut(&wr_id),
        };
        let seen = seen.unwrap_or_else(|| panic!("{cq:?} completion for unknown wr_id {wr_id}"));
        *seen += 1;
        assert_eq!(*seen, 1, "{cq:?} wr_id {wr_id} completed twice");
        assert_eq!(cqe.qpn.to_native(), self.cfg.qpn);
        self.mock.complete(cq, cqe);
    }

    fn push_quasi(&mut self, q: QuasiWqe) -> bool {
        self.mock.push_quasi(q)
    }

    fn peek_quasi(&mut self) -> Option<QuasiWqe> {
        self.mock.peek_quasi()
    }

    fn pop_quasi(&mut self) -> Option<QuasiWqe> {
        self.mock.pop_quasi()
    }

    fn send_packet(&mut self, packet: Vec<u8>) {
        let v = PacketView::parse(&packet).expect("the QP sends packets that parse");
        assert_eq!(v.lrh.slid, self.cfg.slid);
        assert_eq!(v.lrh.dlid, self.cfg.dlid);
        assert_eq!(v.bth.dest_qp, self.cfg.dest_qpn);
        assert!(
            v.payload.len() <= self.cfg.path_mtu as usize,
            "payload over the MTU"
        );
        if v.info().direction == Direction::Response {
            assert!(v.ext.aeth.is_some() || v.payload.len() == self.cfg.path_mtu as usize);
        }
        if let Some(aeth) = v.ext.aeth {
            // The responder's MSN only moves forward: every ACK and PSN
            // sequence error NAK carries the newest. (The responses to a
            // duplicate READ or atomic carry the older MSN of their
            // original, and the fatal NAK of a READ stopped on its way,
            // `transport::responses::Stopped`, the MSN before that READ,
            // which its first response may already have carried.)
            let fatal_nak = aeth.syndrome & 0xe0 == 0x60 && aeth.syndrome != 0x60;
            if let Some(last) = self.last_msn {
                let d = psn::diff(aeth.msn, last);
                assert!(
                    d >= 0 || v.opcode() != Opcode::RcAcknowledge || fatal_nak,
                    "MSN {} after {last} (syndrome {:#04x})",
                    aeth.msn,
                    aeth.syndrome
                );
            }
            self.last_msn = Some(self.last_msn.map_or(aeth.msn, |l| psn::max(l, aeth.msn)));
        }
        self.sent.push((
            v.info().direction,
            v.bth.psn,
            v.ext.aeth.map(|a| a.syndrome),
        ));
        // Keep the outbox small: the peer is the fuzz input.
        drop(packet);
    }

    fn hold_key(&mut self, rkey: u32, use_: KeyUse) -> Result<Option<usize>, AccessError> {
        self.mock.hold_key(rkey, use_)
    }

    fn hold_checked(
        &mut self,
        rkey: u32,
        use_: KeyUse,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<Option<usize>, AccessError> {
        let slot = self.mock.hold_checked(rkey, use_, va, len, write)?;
        self.checked.push((rkey, va, len, write));
        if let Some(s) = slot {
            self.held[s] = Some((rkey, va, write));
        }
        Ok(slot)
    }

    fn slot_write(&mut self, slot: usize, off: u64, data: &[u8]) -> Result<(), AccessError> {
        self.mock.slot_write(slot, off, data)?;
        self.assert_slot_checked(slot, off, data.len(), true);
        Ok(())
    }

    fn slot_read(&mut self, slot: usize, off: u64, out: &mut [u8]) -> Result<(), AccessError> {
        self.mock.slot_read(slot, off, out)?;
        self.assert_slot_checked(slot, off, out.len(), false);
        Ok(())
    }

    fn key_valid(&mut self, slot: usize) -> bool {
        self.mock.key_valid(slot)
    }

    fn release_key(&mut self, slot: usize) {
        self.mock.release_key(slot)
    }
}
