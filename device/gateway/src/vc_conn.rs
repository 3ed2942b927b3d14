//! One mapped connection: its ATM side (the AAL's sending half) and its
//! IB side (an RC QP of the device's transport over [`HostEnv`]), with
//! the backlog of ATM messages waiting for the QP's send window.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ibtca_protocol::atm::aal1::Aal1Segmenter;
use ibtca_protocol::atm::aal5;
use ibtca_protocol::atm::{Aal, Cell, CellHeader, CELL_PAYLOAD_LEN};
use ibtca_protocol::PacketView;
use ibtca_transport::RcConfig;
use ibtca_transport::RcQp;

use crate::counters::EngineCounters;
use crate::host_env::HostEnv;
use crate::map::VcEntry;
use crate::scheduler::CellScheduler;

/// SENDs handed to a QP's transport at once; the rest wait in the
/// connection's backlog (so the classes are served in order here too).
const MAX_IN_QP: usize = 64;

/// Transport settings shared by every QP of the gateway.
#[derive(Debug, Clone, Copy)]
pub struct QpSettings {
    /// The gateway's LID.
    pub lid: u16,
    /// Path MTU.
    pub mtu: u32,
    /// ACK timeout (`None`: never).
    pub ack_timeout: Option<Duration>,
    /// Transport retries.
    pub retry_cnt: u8,
    /// ATM messages a connection holds for its QP before it drops them.
    pub backlog: usize,
}

/// One connection.
#[derive(Debug)]
pub struct VcConn {
    /// What the map says.
    pub entry: VcEntry,
    /// The SL of its class.
    pub sl: u8,
    qp: Option<RcQp>,
    env: HostEnv,
    backlog: VecDeque<Vec<u8>>,
    aal1: Aal1Segmenter,
    cells: Vec<Cell>,
}

impl VcConn {
    /// A connection; its QP starts once the remote QPN is known.
    pub fn new(entry: VcEntry, sl: u8, s: &QpSettings) -> Result<Self, String> {
        let max_recv = match entry.aal {
            Aal::Aal5 { max_sdu } => max_sdu,
            Aal::Aal1 { blocks } => blocks * ibtca_protocol::atm::aal1::BLOCK_LEN,
            Aal::Aal0 => CELL_PAYLOAD_LEN,
        };
        let mut conn = Self {
            entry,
            sl,
            qp: None,
            env: HostEnv::new(max_recv as u32),
            backlog: VecDeque::new(),
            aal1: Aal1Segmenter::new(),
            cells: Vec::new(),
        };
        conn.start_qp(s)?;
        Ok(conn)
    }

    /// (Re)starts the QP toward the map's remote QPN (PSNs from the map's
    /// `sq_psn` and `rq_psn`), if known.
    pub fn start_qp(&mut self, s: &QpSettings) -> Result<(), String> {
        let Some(dest) = self.entry.remote_qpn else {
            self.qp = None;
            return Ok(());
        };
        let mut cfg = RcConfig::new(self.entry.local_qpn, dest);
        cfg.slid = s.lid;
        cfg.dlid = self.entry.remote_lid;
        cfg.sl = self.sl;
        cfg.path_mtu = s.mtu;
        cfg.sq_psn = self.entry.sq_psn;
        cfg.rq_psn = self.entry.rq_psn;
        cfg.ack_timeout = s.ack_timeout;
        cfg.retry_cnt = s.retry_cnt;
        cfg.send_window = RcConfig::send_window_for_mtu(s.mtu);
        let qp = RcQp::new(cfg).map_err(|e| format!("VC {}: {e}", self.entry.vc))?;
        self.qp = Some(qp);
        // Buffers of the old QP's messages go with it.
        self.env = HostEnv::new(self.env.max_recv);
        Ok(())
    }

    /// Whether the QP runs.
    pub fn has_qp(&self) -> bool {
        self.qp.is_some()
    }

    /// When [`Self::service`] must run for the QP's timers.
    pub fn deadline(&self) -> Option<Instant> {
        self.qp.as_ref().and_then(RcQp::next_deadline)
    }

    /// Takes a message from the ATM side for IB.
    pub fn from_atm(&mut self, data: Vec<u8>, max_backlog: usize, c: &mut EngineCounters) {
        if self.qp.is_none() {
            c.dropped_no_qp += 1;
        } else if self.backlog.len() >= max_backlog {
            c.dropped_backlog += 1;
        } else {
            self.backlog.push_back(data);
        }
    }

    /// Hands one IB packet addressed to this QP to the transport.
    pub fn on_packet(&mut self, v: &PacketView<'_>, now: Instant, open: bool) {
        if let Some(qp) = self.qp.as_mut() {
            self.env.recv_open = open;
            qp.on_packet(v, now, &mut self.env);
            tracing::trace!(vc = %self.entry.vc, opcode = ?v.bth.opcode, psn = v.bth.psn,
                error = qp.is_error(), "IB packet");
        }
    }

    /// Runs timers, posts backlog into the send window, and moves what the
    /// transport produced on: packets to `send`, received messages to the
    /// cell queues as cells. Restarts a QP that failed.
    pub fn service(
        &mut self,
        now: Instant,
        s: &QpSettings,
        cells: &CellScheduler,
        send: &mut dyn FnMut(Vec<u8>),
        c: &mut EngineCounters,
    ) {
        let Some(qp) = self.qp.as_mut() else { return };
        self.env.recv_open = cells.has_room(self.entry.service);
        if qp.next_deadline().is_some_and(|d| d <= now) {
            qp.on_timer(now, &mut self.env);
        }
        let room = MAX_IN_QP.saturating_sub(qp.send_queue_len());
        if room > 0 && !self.backlog.is_empty() {
            let n = room.min(self.backlog.len());
            let env = &mut self.env;
            let wqes: Vec<_> = self
                .backlog
                .drain(..n)
                .map(|m| env.send_wqe(m).into())
                .collect();
            c.messages_to_ib += wqes.len() as u64;
            qp.post_sends(wqes, now, &mut self.env);
        }
        for p in self.env.outbox.drain(..) {
            send(p);
        }
        c.messages_sent += std::mem::take(&mut self.env.sent);
        c.send_failures += self.env.failed.drain(..).count() as u64;
        let failed = qp.is_error().then(|| qp.failure());
        for m in std::mem::take(&mut self.env.received) {
            c.messages_from_ib += 1;
            self.send_to_atm(&m, cells, c);
        }
        if let Some(why) = failed {
            // A peer can fail a QP at will (a bad RDMA WRITE): rate-limited.
            ibtca_log::guest_warn!(vc = %self.entry.vc, qpn = self.entry.local_qpn, ?why,
                "QP failed; starting it again from its first PSNs");
            c.qp_restarts += 1;
            if let Err(e) = self.start_qp(s) {
                tracing::error!("{e}");
            }
        }
    }

    /// Segments one IB message into this VC's cells and queues them.
    fn send_to_atm(&mut self, m: &[u8], cells: &CellScheduler, c: &mut EngineCounters) {
        self.cells.clear();
        let vc = self.entry.vc;
        let ok = match self.entry.aal {
            Aal::Aal5 { .. } => aal5::segment(vc, m, 0, &mut self.cells).is_ok(),
            Aal::Aal1 { .. } => self.aal1.segment(vc, m, &mut self.cells).is_ok(),
            Aal::Aal0 => match <&[u8; CELL_PAYLOAD_LEN]>::try_from(m) {
                Ok(p) => {
                    self.cells.push(Cell::new(&CellHeader::user(vc, 0), p));
                    true
                }
                Err(_) => false,
            },
        };
        if !ok {
            c.segment_errors += 1;
            return;
        }
        cells.push(self.entry.service, &self.cells);
    }
}
