//! The device engine: the verbs state and every RC QP's transport, owned
//! by one thread at a time (the thread an event arrived on when the engine
//! is idle, else the engine thread: `owner.rs`), turning events into work.
//!
//! Events come from two places: the vfio-user thread (command-queue register
//! writes and doorbells, which are posted BAR writes, and device resets) and
//! the link (peer packets, link up/down). The engine reads commands and WQEs
//! from guest memory, drives the transport, writes completions and raises
//! MSI-X, and hands packets to the link — or back to itself when they are
//! addressed to its own LID (loopback), so one device can talk to itself.
//!
//! An RC QP gets its transport state when it reaches RTR (it answers
//! requests; from RTS it also sends) and keeps it until it is reset or
//! destroyed; packets for a QP in neither state are dropped (the peer
//! retransmits).

mod data_path;
mod datagram;
pub mod env;
mod handoffs;
mod inbox;
mod inspect;
mod multicast;
mod outbox;
mod owner;
mod partition;
mod pma;
mod port_agents;
mod port_state;
mod qp_error;
mod qp_map;
mod receive;
mod record_sweep;
mod send_queue;
mod smp;
mod transport_query;
mod turn;
pub mod wait;

use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibtca_protocol::encoded;

use crate::dma::GuestMemory;
use crate::drdma::Drdma;
use crate::link::{LinkEvent, PacketBatch};
use crate::pci::msix::Msix;
use crate::transport::rc::flush_posted_recvs;
use crate::transport::RcQp;
use crate::verbs::cmdq::CmdQueue;
use crate::verbs::datapath::Doorbell;
use crate::verbs::multicast::is_multicast_lid;
use crate::verbs::qp_state::QpState;
use crate::verbs::rkm_regs::RkmRegs;
use crate::verbs::{Limits, PortAttrs, Verbs};

use data_path::DataPath;
pub use datagram::DatagramStats;
pub use env::{DeviceQpEnv, PacketSink};
pub use handoffs::Handoffs;
pub use inbox::{HOST_EVENTS_MAX, LINK_EVENTS_MAX};
pub use inspect::{CqSnapshot, DeviceSnapshot, QpSnapshot, MAX_LISTED_QPS};
pub use multicast::MulticastStats;
use outbox::{coalesce_acks, keep_spare, Outbox, SPARE_PACKETS};
pub use owner::{EngineHandle, EngineStopped, EngineThread};
use port_agents::PortAgents;
pub use port_agents::DEFAULT_NODE_DESCRIPTION;
pub use port_state::PortState;
use record_sweep::RecordSweep;
pub use record_sweep::RECORD_SWEEP;
use send_queue::SendQueues;

/// Something the engine must act on.
#[derive(Debug)]
pub enum EngineEvent {
    /// CMDQ_BASE_LO written.
    CmdqBaseLo(u32),
    /// CMDQ_BASE_HI written.
    CmdqBaseHi(u32),
    /// CMDQ_LOG_SIZE written (restarts the queue).
    CmdqLogSize(u32),
    /// CMDQ_DB written with a new producer index.
    CmdqDoorbell(u32),
    /// An SQ, RQ or CQ doorbell.
    Doorbell(Doorbell),
    /// A doorbell rung on page `.0` of the doorbell BAR.
    PageDoorbell(u32, Doorbell),
    /// A DRDMA WRITE range became BR Valid (every byte stored), or several
    /// did ([`crate::drdma::ALL_RANGES`]).
    DrdmaReady(u32),
    /// The guest loaded the last byte of a DRDMA READ on QP `.0`, whose
    /// completion waited for it.
    DrdmaDrained(u32),
    /// Something happened on the link.
    Link(LinkEvent),
    /// Packets from the link (all those of one socket read).
    LinkPackets(PacketBatch),
    /// RKM_READ_BUDGET written: serve the READ responses it held back.
    ReadBudget,
    /// Device reset (or the client went away): forget every object, then
    /// say so on the channel, if one is given (the client's memory is let
    /// go only after that: see `Tca::disconnected`).
    Reset(Option<Sender<()>>),
    /// The control socket asks for a [`DeviceSnapshot`], sent on the
    /// channel (never blocking: a full or closed channel drops it).
    Inspect(std::sync::mpsc::SyncSender<Box<DeviceSnapshot>>),
    /// Nothing to do: the engine thread looks at its timers again (an
    /// event run on another thread set an earlier deadline).
    Wake,
    /// Stop the engine thread.
    Stop,
}

/// Counters of the engine, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Packets received (link or loopback).
    pub rx_packets: u64,
    /// Packets that failed to parse (CRC, length, header).
    pub rx_malformed: u64,
    /// Packets for a QP that is not in RTS.
    pub rx_no_qp: u64,
    /// Data packets dropped because the SM has not yet armed the port
    /// (port in Init).
    pub rx_port_init: u64,
    /// Data packets (everything but VL15) not sent because the port was
    /// Init or Armed: RC QPs retry them, datagram QPs' work requests
    /// complete with `WC_PORT_INACTIVE_ERR` before a packet is made.
    pub tx_port_inactive: u64,
    /// Data packets dropped because the port's P_Key table does not hold
    /// their P_Key (PortRcvConstraintErrors, PortInfo P_KeyViolations).
    pub rx_bad_pkey: u64,
    /// Packets sent to the link.
    pub tx_packets: u64,
    /// Packets delivered to this device's own LID.
    pub loopback: u64,
    /// Plain ACKs not sent because a later ACK of the same QP superseded them.
    pub acks_coalesced: u64,
    /// RC QPs the transport put in error (a failed work request or a bad
    /// inbound request; not those the driver moved there).
    pub qp_errors: u64,
    /// Of those, QPs whose peer stopped answering (WC_RETRY_EXC_ERR).
    pub retry_exceeded: u64,
    /// Send work requests completed with WC_WR_FLUSH_ERR.
    pub flushed_sends: u64,
    /// Receive work requests completed with WC_WR_FLUSH_ERR.
    pub flushed_recvs: u64,
    /// Doorbells dropped: rung on a doorbell page other than their QP's or
    /// CQ's.
    pub foreign_doorbells: u64,
    /// Send queues whose WQEs the record sweep found posted on a sleeping
    /// doorbell record with no doorbell (`record_sweep.rs`).
    pub late_doorbells: u64,
    /// CQ interrupts the record sweep raised for an arm request no
    /// completion had taken (`record_sweep.rs`).
    pub late_cq_arms: u64,
    /// Datagram QPs' traffic (UD, and QP0 and QP1 in the guest).
    pub ud: DatagramStats,
    /// Inbound multicast datagrams.
    pub multicast: MulticastStats,
}

/// The engine state (owned by the engine thread): the verbs objects and
/// what every part reaches (guest memory, interrupts, the DRDMA window, the
/// key memory's registers), and the parts, each in its own file: the RC
/// data path (`data_path.rs`), the send queues' read-ahead
/// (`send_queue.rs`), the port's agents (`port_agents.rs`) and the outbox
/// (`outbox.rs`). Inbound packets reach them through one demultiplexer
/// (`receive.rs`).
pub struct Engine {
    verbs: Verbs,
    cmdq: CmdQueue,
    /// Guest memory as the vfio-user thread maps it.
    source: GuestMemory,
    /// What the engine uses: while it handles events, a snapshot of
    /// `source` pinned when each event is taken (so maps published before
    /// the event was sent are visible), released once the burst is sent;
    /// otherwise `source` itself.
    mem: GuestMemory,
    msix: Arc<Msix>,
    drdma: Arc<Drdma>,
    /// The key memory's BAR0 registers, and the READ response budget.
    rkm: Arc<RkmRegs>,
    /// Every RC QP's transport.
    data: DataPath,
    /// What the engine read from the send queues and could not hand on yet.
    sends: SendQueues,
    /// The once-a-second look at the records the device sleeps on.
    sweep: RecordSweep,
    /// The port's SMA, PMA and state.
    agents: PortAgents,
    outbox: Outbox,
    stats: EngineStats,
}

fn new_verbs(port: &PortAttrs, rkm: &Arc<RkmRegs>) -> Verbs {
    let mut verbs = Verbs::new(Limits::default(), *port, Verbs::random_seed());
    verbs.keys.use_regs(rkm.clone());
    verbs
}

/// Send WQEs a QP's transport holds at most (read from its send queue and
/// not completed): the send window's 1024 packets plus a batch. The rest
/// stay in the guest's ring until completions make room, so a guest that
/// keeps posting (ignoring completions) costs the device at most this many
/// 128-byte WQEs per QP.
pub const MAX_QUEUED_SEND_WQES: usize = 1152;

impl Engine {
    /// An engine over guest memory `mem`, raising interrupts on `msix`,
    /// sending packets for other LIDs to `link`, moving DRDMA data through
    /// `drdma`.
    pub fn new(
        mem: GuestMemory,
        msix: Arc<Msix>,
        link: Box<dyn PacketSink>,
        port: PortAttrs,
        port_state: Arc<PortState>,
        drdma: Arc<Drdma>,
    ) -> Self {
        // QUERY_PORT reports the live state.
        let port = PortAttrs {
            state: port_state.get(),
            ..port
        };
        let rkm = Arc::new(RkmRegs::default());
        Engine {
            verbs: new_verbs(&port, &rkm),
            rkm,
            cmdq: CmdQueue::new(),
            source: mem.clone(),
            mem,
            msix,
            drdma,
            data: DataPath::default(),
            sends: SendQueues::default(),
            sweep: RecordSweep::default(),
            agents: PortAgents::new(port, port_state),
            outbox: Outbox::new(link, port.lid),
            stats: EngineStats::default(),
        }
    }

    /// Raises every QP's local ACK timeout to at least `floor` from the
    /// next QP that starts (0, the default: as the guest asks).
    pub fn set_min_ack_timeout(&mut self, floor: Duration) {
        self.data.min_ack_timeout = floor;
    }

    /// Counters so far.
    pub fn stats(&self) -> EngineStats {
        EngineStats {
            foreign_doorbells: self.stats.foreign_doorbells + self.verbs.foreign_doorbells,
            tx_port_inactive: self.outbox.dropped_inactive,
            ..self.stats
        }
    }

    /// The verbs state (tests).
    pub fn verbs(&self) -> &Verbs {
        &self.verbs
    }

    /// Handles one event and sends what it produced.
    pub fn handle(&mut self, ev: EngineEvent, now: Instant) {
        self.absorb(ev, now);
        self.flush(now);
    }

    /// Takes a snapshot of guest memory for the accesses that follow (one
    /// `arc_swap` load instead of one per access).
    fn pin_memory(&mut self) {
        self.mem = self.source.pinned();
    }

    /// Releases the snapshot (unmapped memory is let go).
    fn unpin_memory(&mut self) {
        self.mem = self.source.clone();
    }

    /// Handles one event; what it produces waits in the outbox until
    /// [`Engine::flush`], so a burst of events sends coalesced ACKs.
    pub fn absorb(&mut self, ev: EngineEvent, now: Instant) {
        self.pin_memory();
        match ev {
            EngineEvent::CmdqBaseLo(v) => self.cmdq.write_base_lo(v),
            EngineEvent::CmdqBaseHi(v) => self.cmdq.write_base_hi(v),
            EngineEvent::CmdqLogSize(v) => {
                if !self.cmdq.write_log_size(v) {
                    crate::guest_warn!(log_size = v, "command queue: bad geometry, stopped");
                }
            }
            EngineEvent::CmdqDoorbell(pi) => self.run_commands(pi),
            EngineEvent::Doorbell(db) => self.doorbell(0, db, now),
            EngineEvent::PageDoorbell(page, db) => self.doorbell(page, db, now),
            EngineEvent::DrdmaReady(arr) => self.drdma_ready(arr, now),
            EngineEvent::DrdmaDrained(qpn) => {
                self.with_qp(qpn, |rc, env| rc.completion_ready(now, env));
                // The READ was the send work that kept the doorbell record
                // awake: read the record once more and let it sleep.
                self.drain_sq(qpn, now);
            }
            // The flush after this event serves them.
            EngineEvent::ReadBudget => {}
            EngineEvent::Link(LinkEvent::Packet(p)) => self.receive(&p, None, now),
            EngineEvent::LinkPackets(batch) => {
                batch.for_each(|p, crcs| self.receive(p, crcs, now));
            }
            EngineEvent::Link(LinkEvent::Up { peer }) => {
                tracing::info!(
                    peer_lid = peer.lid,
                    peer_guid = format!("{:#x}", peer.node_guid),
                    "link up"
                );
                self.link_changed(true);
            }
            EngineEvent::Link(LinkEvent::Down { reason }) => {
                tracing::info!(%reason, "link down");
                self.link_changed(false);
            }
            EngineEvent::Reset(done) => {
                self.reset();
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
            EngineEvent::Inspect(reply) => {
                let _ = reply.try_send(Box::new(self.snapshot()));
            }
            EngineEvent::Wake | EngineEvent::Stop => {}
        }
        if self.sends.any_capped() {
            self.resume_capped(now);
        }
    }

    /// Moves the port to `state` and, if that changed it, raises the
    /// asynchronous event vector (the driver reads EVENT_CAUSE and
    /// PORT_STATE).
    fn port_changed(&mut self, state: u32) {
        self.verbs.port.state = state;
        self.outbox.sends_data = self.agents.sends_data();
        self.agents.set_state(state, &self.msix);
    }

    /// Forgets every object (device reset or client gone).
    pub fn reset(&mut self) {
        self.stats.foreign_doorbells += self.verbs.foreign_doorbells;
        self.rkm.reset();
        self.verbs = new_verbs(&self.agents.port, &self.rkm);
        self.cmdq = CmdQueue::new();
        self.data.clear();
        self.sends.clear();
        self.outbox.clear();
    }

    /// Runs `f` on QP `qpn`'s transport, if it has one
    /// ([`DataPath::with_qp`]).
    fn with_qp(&mut self, qpn: u32, f: impl FnOnce(&mut RcQp, &mut DeviceQpEnv<'_>)) {
        let mut env = DeviceQpEnv {
            qpn,
            verbs: &mut self.verbs,
            mem: &self.mem,
            msix: &self.msix,
            sink: &mut self.outbox,
            drdma: &self.drdma,
        };
        self.data.with_qp(&mut env, &self.rkm, &mut self.stats, f);
    }

    fn doorbell(&mut self, page: u32, db: Doorbell, now: Instant) {
        match self.verbs.doorbell_on(page, db) {
            Ok(Some(vector)) => {
                if let Err(e) = self.msix.trigger(u32::from(vector)) {
                    crate::guest_warn!(vector, error = %e, "CQ interrupt not delivered");
                }
            }
            Ok(None) => {}
            Err(e) => {
                crate::guest_warn!(?db, error = %e, "doorbell refused");
                self.sync_qps(); // a bad SQ/RQ index puts the QP in error
            }
        }
        match db {
            Doorbell::Sq { qpn, .. } => self.drain_sq(qpn, now),
            Doorbell::Rq { qpn, .. } => self.flush_recvs(qpn),
            Doorbell::Cq { .. } | Doorbell::Srq { .. } => {}
        }
    }

    /// Receive WQEs posted to a QP in the error state complete at once with
    /// a flush error (IBA 10.3.1), whether the transport failed the QP (a
    /// guest reposting the receives of the messages it got before the
    /// failure), the driver moved it there, or it never reached RTS.
    fn flush_recvs(&mut self, qpn: u32) {
        if self
            .verbs
            .qps
            .get(qpn)
            .is_none_or(|qp| qp.state() != QpState::Err)
        {
            return;
        }
        if self.data.has(qpn) {
            self.with_qp(qpn, |rc, env| rc.flush_recvs(env));
            return;
        }
        let flushed = flush_posted_recvs(qpn, &mut self.qp_env(qpn));
        self.stats.flushed_recvs += flushed;
    }

    /// A DRDMA WRITE range is full: send the work requests waiting for it.
    fn drdma_ready(&mut self, arr: u32, now: Instant) {
        for qpn in self.sends.waiting_for(arr) {
            self.drain_sq(qpn, now);
        }
    }

    /// Creates transport state for QPs that reached RTR or RTS and drops it
    /// for QPs that were reset or destroyed.
    fn sync_qps(&mut self) {
        let changes = self.data.start_ready(&self.verbs, &self.agents);
        self.sends.retain(&changes.live);
        // Moved to ERR by the driver (or by a bad doorbell): every posted
        // WQE completes with a flush error (IBA 10.3.1), a held one too.
        for qpn in changes.to_flush {
            if let Some(wqe) = self.sends.held.remove(&qpn) {
                self.with_qp(qpn, |rc, env| rc.flush_with(wqe, env));
            }
            self.with_qp(qpn, |rc, env| rc.flush(env));
            // WQEs still in the ring (past MAX_QUEUED_SEND_WQES) flush too.
            self.drain_sq(qpn, Instant::now());
        }
        // In error before it ever reached RTR: its receives flush too.
        for qpn in changes.unstarted {
            self.flush_recvs(qpn);
        }
        // RTR to RTS: what was posted meanwhile goes out now.
        for qpn in changes.started {
            self.drain_sq(qpn, Instant::now());
        }
        // A QP left RTR/RTS: receives posted on the record alone flush.
        for qpn in self.verbs.sync_db_records(&self.mem) {
            self.flush_recvs(qpn);
        }
        self.sync_datagram_qps();
    }

    /// Serves a turn of READ responses, sends (or loops back) everything
    /// in the outbox, and releases the guest-memory snapshot.
    pub fn flush(&mut self, now: Instant) {
        self.serve_responses();
        self.flush_outbox(now);
        // An SRQ below its limit: the driver reads each one's limit_events.
        if self.verbs.take_srq_events() {
            let srq = crate::regs::EVENT_SRQ_LIMIT;
            self.agents.port_state.signal(srq, &self.msix);
        }
        self.unpin_memory();
    }

    fn flush_outbox(&mut self, now: Instant) {
        self.stats.tx_packets += std::mem::take(&mut self.outbox.streamed);
        // Nothing is streamed while loopback packets are handled: what they
        // produce goes after this round's packets for the link.
        self.outbox.hold = true;
        // Loopback packets may produce more packets (ACKs): bounded rounds.
        for _ in 0..64 {
            if self.outbox.packets.is_empty() {
                break;
            }
            let mut packets = std::mem::take(&mut self.outbox.packets);
            self.stats.acks_coalesced += coalesce_acks(&mut packets, &mut self.outbox.spare);
            let lid = self.verbs.port.lid;
            let mut remote = std::mem::take(&mut self.outbox.to_link);
            for p in packets {
                let dlid = encoded::dlid(&p);
                if dlid == Some(lid) {
                    self.stats.loopback += 1;
                    self.receive(&p, None, now);
                    keep_spare(&mut self.outbox.spare, p);
                } else if dlid.is_some_and(is_multicast_lid) {
                    // To the link, and to this port's own attached QPs.
                    if !self.verbs.mcast.is_empty() {
                        self.stats.loopback += 1;
                        self.receive(&p, None, now);
                    }
                    self.stats.tx_packets += 1;
                    remote.push(p);
                } else {
                    self.stats.tx_packets += 1;
                    remote.push(p);
                }
            }
            // One hand-over per burst: one lock, at most one wake-up.
            self.outbox.link.send_all(&mut remote);
            self.outbox.to_link = remote;
        }
        self.outbox.link.publish();
        self.outbox
            .link
            .reclaim(&mut self.outbox.spare, SPARE_PACKETS);
        // Packets left after the last round (a loopback storm) wait for the
        // next flush, and so does anything after them.
        self.outbox.hold = !self.outbox.packets.is_empty();
        self.outbox.bytes = 0;
    }
}
