//! The responder's checks as named stages, in the shape of rxe's
//! `resp_states`: a request packet passes them in the order [`Stage`]
//! lists, each a small function that names the next stage or refuses the
//! packet with what it earns. Nothing is executed before every check has
//! passed, so this file is the one place that says what a request must
//! pass, and in which order:
//!
//! | stage | checks | refuses with |
//! |---|---|---|
//! | `CheckPsn` | expected, earlier or later PSN | later: one PSN sequence error NAK; earlier: answered as a duplicate |
//! | `CheckOpSequence` | a message in progress continues with MIDDLE/LAST of its kind, else FIRST/ONLY | NAK invalid request |
//! | `CheckOpValid` | a request opcode with the headers it needs (RETH on a READ and a new WRITE, an 8-byte aligned AtomicETH) | NAK invalid request |
//! | `CheckLength` | SEND/WRITE payload: FIRST/MIDDLE one MTU, LAST/ONLY at most one; READ length | NAK invalid request |
//! | `CheckRkey` | the R_Key of a READ and of a new WRITE over its whole range (held in a key slot where the operation outlives the packet, seed 001); a WRITE in progress: its slot still valid | the key's NAK (remote access error) |
//! | `CheckResources` | a new SEND: a receive WQE; READ and atomic: under the responder resources (max_dest_rd_atomic) | RNR NAK; NAK invalid request |
//! | `Execute` | what execution finds (`mod.rs`): buffer bounds, a WRITE's message length, a WRITE with immediate's receive WQE, the atomic's own key hold | NAK 0x61/0x62/0x63, RNR NAK |
//!
//! An atomic's key is held only while it executes, so it is checked there
//! (so after `CheckResources`); a READ's key is checked before the
//! resources and released if they refuse it.

use ibtca_protocol::headers::{Aeth, NakCode};
use ibtca_protocol::opcode::OpClass;
use ibtca_protocol::PacketView;

use super::{InMsg, Responder};
use crate::config::{RcConfig, RcCounters};
use crate::psn;
use crate::{KeyUse, QpEnv};
use ibtca_abi::recv::RecvWr;

/// Where a request packet is on its way through the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Expected, earlier (duplicate) or later PSN.
    CheckPsn,
    /// The opcode continues the message in progress, or starts one.
    CheckOpSequence,
    /// A request opcode carrying the headers it needs.
    CheckOpValid,
    /// Payload and requested lengths.
    CheckLength,
    /// The R_Key over the range the request reaches.
    CheckRkey,
    /// A receive WQE for a SEND, room in the responder resources for a
    /// READ or atomic.
    CheckResources,
    /// Executes the request and acknowledges it (the last stage).
    Execute,
    /// A duplicate: answered as its original was (the last stage).
    Duplicate,
    /// A PSN past the expected one: dropped (the last stage).
    OutOfSequence,
}

/// Why a check refused a request packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A NAK that puts the QP in error.
    Nak(NakCode),
    /// Receiver not ready: an RNR NAK, the requester sends it again.
    Rnr,
}

/// What the checks took for the execution: a READ's key slot, a SEND's
/// receive WQE and the offset the packet's payload goes to in it.
#[derive(Debug, Default)]
pub(super) struct Checked {
    pub(super) slot: Option<usize>,
    pub(super) recv: Option<(RecvWr, u64)>,
}

type Step = Result<Stage, Refusal>;

impl Responder {
    /// Handles one request packet: the stages in order, then execution.
    pub(crate) fn on_request<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<(), super::Fatal> {
        self.run_stages(v, cfg, counters, env, &mut |_| {})
    }

    /// [`Responder::on_request`], telling `passed` each stage the packet
    /// enters.
    pub(super) fn run_stages<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
        passed: &mut dyn FnMut(Stage),
    ) -> Result<(), super::Fatal> {
        let mut checked = Checked::default();
        let mut stage = Stage::CheckPsn;
        loop {
            passed(stage);
            let step = match stage {
                Stage::CheckPsn => Ok(self.check_psn(v)),
                Stage::CheckOpSequence => self.check_op_sequence(v),
                Stage::CheckOpValid => self.check_op_valid(v),
                Stage::CheckLength => check_length(v, cfg),
                Stage::CheckRkey => self.check_rkey(v, &mut checked, env),
                Stage::CheckResources => self.check_resources(v, cfg, &mut checked, env),
                Stage::Execute => return self.execute(v, checked, cfg, counters, env),
                Stage::Duplicate => {
                    counters.duplicate_requests += 1;
                    self.duplicate(v, cfg, counters, env);
                    return Ok(());
                }
                Stage::OutOfSequence => {
                    self.out_of_sequence(cfg, counters, env);
                    return Ok(());
                }
            };
            stage = match step {
                Ok(next) => next,
                Err(Refusal::Nak(code)) => return self.fail(code, v.bth.psn, cfg, counters, env),
                Err(Refusal::Rnr) => return self.rnr(v.bth.psn, cfg, counters, env),
            };
        }
    }

    fn check_psn(&self, v: &PacketView<'_>) -> Stage {
        match psn::diff(v.bth.psn, self.epsn) {
            d if d > 0 => Stage::OutOfSequence,
            d if d < 0 => Stage::Duplicate,
            _ => Stage::CheckOpSequence,
        }
    }

    /// A message in progress continues with a MIDDLE or LAST of the same
    /// kind; otherwise a new message starts.
    fn check_op_sequence(&self, v: &PacketView<'_>) -> Step {
        let info = v.info();
        let in_order = match (&self.msg, info.class) {
            (Some(InMsg::Send { .. }), OpClass::Send) => !info.position.starts(),
            (Some(InMsg::Write { .. }), OpClass::Write) => !info.position.starts(),
            (Some(_), _) => false,
            (None, _) => info.position.starts(),
        };
        match in_order {
            true => Ok(Stage::CheckOpValid),
            false => Err(Refusal::Nak(NakCode::InvalidRequest)),
        }
    }

    fn check_op_valid(&self, v: &PacketView<'_>) -> Step {
        let valid = match v.info().class {
            OpClass::Send => true,
            // A WRITE in progress has its RETH from the first packet.
            OpClass::Write => self.msg.is_some() || v.ext.reth.is_some(),
            OpClass::Read => v.ext.reth.is_some(),
            OpClass::Atomic => v.ext.atomic_eth.is_some_and(|eth| eth.va & 7 == 0),
            OpClass::Ack => false,
        };
        match valid {
            true => Ok(Stage::CheckLength),
            false => Err(Refusal::Nak(NakCode::InvalidRequest)),
        }
    }

    fn check_rkey<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        checked: &mut Checked,
        env: &mut E,
    ) -> Step {
        let nak = |e: crate::AccessError| Refusal::Nak(e.nak());
        match (v.info().class, v.ext.reth) {
            (OpClass::Write, reth) => {
                let slot = match (&self.msg, reth) {
                    (Some(InMsg::Write { slot, .. }), _) => *slot,
                    (None, Some(reth)) => {
                        let len = u64::from(reth.dma_len);
                        // The key is checked once, here. A message of
                        // several packets holds it in the key memory until
                        // its last packet, with what the check found; its
                        // later packets check only the slot (seed 001).
                        let slot = match v.info().position.ends() {
                            true if len == 0 => None,
                            true => env
                                .check_remote(reth.rkey, reth.va, len, true)
                                .map(|_| None)
                                .map_err(nak)?,
                            false => env
                                .hold_checked(reth.rkey, KeyUse::Write, reth.va, len, true)
                                .map_err(nak)?,
                        };
                        if slot.is_some() {
                            // From here on every failure releases the slot.
                            self.msg = Some(InMsg::Write {
                                rkey: reth.rkey,
                                va: reth.va,
                                len,
                                offset: 0,
                                slot,
                            });
                        }
                        slot
                    }
                    _ => return Err(Refusal::Nak(NakCode::InvalidRequest)),
                };
                if slot.is_some_and(|s| !env.key_valid(s)) {
                    // The window was invalidated while this message was in
                    // flight.
                    return Err(Refusal::Nak(NakCode::RemoteAccessError));
                }
            }
            (OpClass::Read, Some(reth)) if reth.dma_len > 0 => {
                // The READ's slot keeps what the check found; its responses
                // check only the slot (seed 001).
                let len = u64::from(reth.dma_len);
                checked.slot = env
                    .hold_checked(reth.rkey, KeyUse::Read, reth.va, len, false)
                    .map_err(nak)?;
            }
            _ => {}
        }
        Ok(Stage::CheckResources)
    }

    fn check_resources<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        cfg: &RcConfig,
        checked: &mut Checked,
        env: &mut E,
    ) -> Step {
        match v.info().class {
            OpClass::Send => {
                checked.recv = Some(match self.msg.take() {
                    Some(InMsg::Send { recv, offset }) => (*recv, offset),
                    _ => (env.next_recv().ok_or(Refusal::Rnr)?, 0),
                });
            }
            OpClass::Read | OpClass::Atomic
                if self.owed.resources() >= Self::resource_limit(cfg) =>
            {
                if let Some(s) = checked.slot.take() {
                    env.release_key(s);
                }
                return Err(Refusal::Nak(NakCode::InvalidRequest));
            }
            _ => {}
        }
        Ok(Stage::Execute)
    }

    /// A PSN past the expected one: one PSN sequence error NAK until the
    /// expected PSN arrives.
    fn out_of_sequence<E: QpEnv + ?Sized>(
        &mut self,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) {
        counters.out_of_sequence += 1;
        if !self.nak_sent {
            self.nak_sent = true;
            counters.naks_sent.psn_seq += 1;
            let aeth = Aeth::nak(NakCode::PsnSequenceError, self.msn);
            self.acknowledge(self.epsn, aeth, cfg, counters, env);
        }
    }
}

/// SEND and WRITE: FIRST/MIDDLE packets carry exactly one MTU, LAST/ONLY at
/// most one. READ: at most the largest message.
fn check_length(v: &PacketView<'_>, cfg: &RcConfig) -> Step {
    let n = v.payload.len();
    let mtu = cfg.path_mtu as usize;
    let fits = match v.info().class {
        OpClass::Send | OpClass::Write if v.info().position.ends() => n <= mtu,
        OpClass::Send | OpClass::Write => n == mtu,
        OpClass::Read => v
            .ext
            .reth
            .is_some_and(|r| u64::from(r.dma_len) <= crate::requester::MAX_MESSAGE),
        OpClass::Atomic | OpClass::Ack => true,
    };
    match fits {
        true => Ok(Stage::CheckRkey),
        false => Err(Refusal::Nak(NakCode::InvalidRequest)),
    }
}

#[cfg(test)]
mod tests {
    //! The stage order: each test feeds one request packet straight to a
    //! responder and checks the stages it entered and what it answered,
    //! so a stage taken out (or moved) changes a trace or an answer.

    use ibtca_protocol::headers::{AckKind, AtomicEth, Reth};
    use ibtca_protocol::{Opcode, Packet};

    use super::Stage::*;
    use super::*;
    use crate::mock::{MockEnv, ALL_ACCESS, MOCK_QPN};
    use crate::responder::Fatal;
    use ibtca_abi::verbs::Sge;

    const KEY: u32 = 0x200;
    const BAD_KEY: u32 = 0xbad;
    const VA: u64 = 0x8000;
    const MTU: u32 = 256;
    const EPSN: u32 = 100;
    const CHECKS: [Stage; 7] = [
        CheckPsn,
        CheckOpSequence,
        CheckOpValid,
        CheckLength,
        CheckRkey,
        CheckResources,
        Execute,
    ];

    /// The checks up to and including `last`.
    fn up_to(last: Stage) -> Vec<Stage> {
        let n = CHECKS.iter().position(|&s| s == last).unwrap();
        CHECKS[..=n].to_vec()
    }

    struct Bench {
        responder: Responder,
        cfg: RcConfig,
        env: MockEnv,
        counters: RcCounters,
    }

    /// A responder expecting PSN [`EPSN`], one responder resource, and a
    /// 4 KiB region under [`KEY`].
    fn bench() -> Bench {
        let mut cfg = RcConfig::new(0x22, 0x11);
        cfg.path_mtu = MTU;
        cfg.rq_psn = EPSN;
        cfg.max_dest_rd_atomic = 1;
        let mut env = MockEnv::new();
        env.reg(KEY, VA, 4096, ALL_ACCESS);
        Bench {
            responder: Responder::new(&cfg),
            cfg,
            env,
            counters: RcCounters::default(),
        }
    }

    fn request(opcode: Opcode, psn: u32, payload: usize) -> Packet {
        let mut p = Packet::new(opcode);
        p.bth.psn = psn;
        p.payload = vec![0x5a; payload];
        p
    }

    fn write(rkey: u32, len: u32, payload: usize) -> Packet {
        let mut p = request(Opcode::RcRdmaWriteOnly, EPSN, payload);
        p.ext.reth = Some(Reth {
            va: VA,
            rkey,
            dma_len: len,
        });
        p
    }

    fn read(psn: u32, rkey: u32) -> Packet {
        let mut p = request(Opcode::RcRdmaReadRequest, psn, 0);
        p.ext.reth = Some(Reth {
            va: VA,
            rkey,
            dma_len: 64,
        });
        p
    }

    fn fetch_add(va: u64) -> Packet {
        let mut p = request(Opcode::RcFetchAdd, EPSN, 0);
        p.ext.atomic_eth = Some(AtomicEth {
            va,
            rkey: KEY,
            swap_add: 1,
            compare: 0,
        });
        p
    }

    impl Bench {
        /// Runs `p` through the responder: the stages it entered, and
        /// whether it put the QP in error.
        fn run(&mut self, p: &Packet) -> (Vec<Stage>, Result<(), Fatal>) {
            let bytes = p.build().unwrap();
            let v = PacketView::parse(&bytes).unwrap();
            let mut passed = Vec::new();
            let (cfg, counters, env) = (&self.cfg, &mut self.counters, &mut self.env);
            let r = self
                .responder
                .run_stages(&v, cfg, counters, env, &mut |s| passed.push(s));
            (passed, r)
        }

        /// What the acknowledgements sent so far said.
        fn answers(&mut self) -> Vec<AckKind> {
            self.env
                .take_outbox()
                .iter()
                .filter_map(|b| PacketView::parse(b).ok()?.ext.aeth)
                .map(|a| a.kind())
                .collect()
        }

        fn post_recv(&mut self) {
            let sge = Sge {
                addr: VA.into(),
                length: 4096.into(),
                lkey: KEY.into(),
            };
            self.env.post_recv(7, &[sge]);
        }
    }

    fn nak(code: NakCode) -> Vec<AckKind> {
        vec![AckKind::Nak(code)]
    }

    #[test]
    fn a_good_request_enters_every_check_in_order_then_executes() {
        let mut b = bench();
        b.post_recv();
        let mut send = request(Opcode::RcSendOnly, EPSN, 64);
        send.bth.ack_req = true;
        assert_eq!(b.run(&send), (CHECKS.to_vec(), Ok(())));
        assert_eq!(b.env.recv_cq.len(), 1, "the SEND completed");

        let mut w = write(KEY, 64, 64);
        w.bth.psn = EPSN + 1;
        assert_eq!(b.run(&w), (CHECKS.to_vec(), Ok(())));
        assert_eq!(&b.env.bytes(KEY)[..64], &[0x5a; 64], "the WRITE landed");

        let mut f = fetch_add(VA + 64);
        f.bth.psn = EPSN + 2;
        assert_eq!(b.run(&f), (CHECKS.to_vec(), Ok(())));
        assert_eq!(b.env.bytes(KEY)[64], 1, "the atomic added");

        assert_eq!(b.run(&read(EPSN + 3, KEY)), (CHECKS.to_vec(), Ok(())));
        assert_eq!(b.env.keys.held(MOCK_QPN), 1, "the READ holds its key");
    }

    #[test]
    fn psns_other_than_the_expected_one_leave_after_the_psn_check() {
        let mut b = bench();
        let later = request(Opcode::RcSendOnly, EPSN + 5, 8);
        assert_eq!(b.run(&later), (vec![CheckPsn, OutOfSequence], Ok(())));
        assert_eq!(b.answers(), nak(NakCode::PsnSequenceError));
        let earlier = request(Opcode::RcSendOnly, EPSN - 1, 8);
        assert_eq!(b.run(&earlier), (vec![CheckPsn, Duplicate], Ok(())));
        assert!(b.env.recv_cq.is_empty(), "a duplicate executes nothing");
    }

    #[test]
    fn each_check_refuses_what_it_checks_and_nothing_executes() {
        // A MIDDLE with no message in progress.
        let mut b = bench();
        b.post_recv();
        let middle = request(Opcode::RcSendMiddle, EPSN, MTU as usize);
        assert_eq!(b.run(&middle), (up_to(CheckOpSequence), Err(Fatal)));
        assert_eq!(b.answers(), nak(NakCode::InvalidRequest));
        assert_eq!(b.env.rq.len(), 1, "no receive taken");

        // A misaligned atomic.
        let mut b = bench();
        assert_eq!(b.run(&fetch_add(VA + 4)), (up_to(CheckOpValid), Err(Fatal)));
        assert_eq!(b.answers(), nak(NakCode::InvalidRequest));
        assert_eq!(&b.env.bytes(KEY)[..16], &[0; 16], "nothing added");

        // A WRITE ONLY of more than one MTU.
        let mut b = bench();
        let big = MTU as usize + 1;
        assert_eq!(
            b.run(&write(KEY, big as u32, big)),
            (up_to(CheckLength), Err(Fatal))
        );
        assert_eq!(b.answers(), nak(NakCode::InvalidRequest));
        assert!(b.env.bytes(KEY).iter().all(|&x| x == 0), "nothing written");

        // A WRITE with a key the responder does not know.
        let mut b = bench();
        assert_eq!(
            b.run(&write(BAD_KEY, 64, 64)),
            (up_to(CheckRkey), Err(Fatal))
        );
        assert_eq!(b.answers(), nak(NakCode::RemoteAccessError));

        // A SEND with no receive WQE posted: RNR, the QP stays up.
        let mut b = bench();
        let send = request(Opcode::RcSendOnly, EPSN, 64);
        assert_eq!(b.run(&send), (up_to(CheckResources), Ok(())));
        assert!(matches!(b.answers()[..], [AckKind::RnrNak { .. }]));

        // A READ past the one responder resource: refused, its key let go.
        let mut b = bench();
        assert_eq!(b.run(&read(EPSN, KEY)).1, Ok(()));
        assert_eq!(
            b.run(&read(EPSN + 1, KEY)),
            (up_to(CheckResources), Err(Fatal))
        );
        assert_eq!(b.env.keys.held(MOCK_QPN), 0, "every READ slot released");
    }

    /// An oversized WRITE with a bad key is refused for its length: the
    /// length is checked before the key is looked up.
    #[test]
    fn the_length_is_checked_before_the_key() {
        let mut b = bench();
        let big = MTU as usize + 1;
        assert_eq!(
            b.run(&write(BAD_KEY, big as u32, big)),
            (up_to(CheckLength), Err(Fatal))
        );
        assert_eq!(b.answers(), nak(NakCode::InvalidRequest));
    }

    /// A MIDDLE with no receive posted is refused for its sequence, not
    /// answered RNR: the opcode sequence is checked before the resources.
    #[test]
    fn the_op_sequence_is_checked_before_the_resources() {
        let mut b = bench();
        let middle = request(Opcode::RcSendMiddle, EPSN, MTU as usize);
        assert_eq!(b.run(&middle), (up_to(CheckOpSequence), Err(Fatal)));
        assert_eq!(b.answers(), nak(NakCode::InvalidRequest));
    }

    /// A READ's key is checked before the responder resources (an atomic's
    /// only as it executes): a READ past the resources with a bad key is a
    /// remote access error.
    #[test]
    fn a_reads_key_is_checked_before_the_resources() {
        let mut b = bench();
        assert_eq!(b.run(&read(EPSN, KEY)).1, Ok(()));
        b.answers();
        assert_eq!(
            b.run(&read(EPSN + 1, BAD_KEY)),
            (up_to(CheckRkey), Err(Fatal))
        );
        let answers = b.answers();
        assert_eq!(
            answers.last(),
            Some(&AckKind::Nak(NakCode::RemoteAccessError))
        );
    }
}
