//! The gateway's QP thread (the thread named `ibtca-gw-engine`, sandbox
//! role `gateway-engine`): owns every connection's QP, takes IB packets
//! from the link and messages from the ATM port, runs the QPs'
//! timers, and answers the control socket. Connections are served in
//! class order (CBR first) every round.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibtca_agents::pma::PmPacket;
use ibtca_agents::vl_config::{self, VlConfig};
use ibtca_link::{Link, LinkEvent};
use ibtca_protocol::atm::{Delivery, Vc};
use ibtca_protocol::mad::pma::QP1;
use ibtca_protocol::PacketView;

use crate::counters::EngineCounters;
use crate::handoff::HandOff;
use crate::map::VcMap;
use crate::pma::GatewayPma;
use crate::scheduler::CellScheduler;
use crate::service::ServiceSl;
use crate::sma::{GatewaySma, SmaSettings};
use crate::vc_conn::{QpSettings, VcConn};

/// Longest the engine sleeps without an event or a timer.
const IDLE: Duration = Duration::from_millis(50);
/// Events handled per round before the connections are served.
const EVENTS_PER_ROUND: usize = 256;

/// What reaches the engine.
#[derive(Debug)]
pub enum Event {
    /// From the IB link.
    Link(LinkEvent),
    /// Messages the ATM port reassembled.
    Atm(Vec<Delivery>),
    /// Control: set a VC's remote QPN (restarting its QP).
    SetRemoteQpn {
        /// The connection.
        vc: Vc,
        /// The peer's QP.
        qpn: u32,
        /// Where the answer goes.
        reply: Sender<Result<String, String>>,
    },
    /// Control: the engine's counters.
    Counters(Sender<EngineCounters>),
    /// Stop the thread.
    Stop,
}

/// The QP thread's state: every connection's QP, its scheduler and agents.
pub struct QpThread {
    settings: QpSettings,
    /// Connections, highest class first.
    conns: Vec<VcConn>,
    by_qpn: HashMap<u32, usize>,
    by_vc: HashMap<Vc, usize>,
    link: Arc<Link>,
    vl: VlConfig,
    cells: Arc<CellScheduler>,
    handoff: Arc<HandOff>,
    counters: EngineCounters,
    sma: GatewaySma,
    pma: GatewayPma,
}

impl QpThread {
    /// An engine for `map`'s connections.
    pub fn new(
        map: &VcMap,
        sls: &ServiceSl,
        settings: QpSettings,
        link: Arc<Link>,
        vl: VlConfig,
        cells: Arc<CellScheduler>,
        handoff: Arc<HandOff>,
    ) -> Result<Self, String> {
        let mut entries = map.vcs.clone();
        entries.sort_by_key(|e| e.service.rank());
        let mut conns = Vec::new();
        for e in entries {
            let sl = sls.sl(e.service);
            conns.push(VcConn::new(e, sl, &settings)?);
        }
        let by_qpn = conns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.entry.local_qpn, i))
            .collect();
        let by_vc = conns
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.entry.vcs().map(move |vc| (vc, i)))
            .collect();
        Ok(Self {
            settings,
            conns,
            by_qpn,
            by_vc,
            link,
            vl,
            cells,
            handoff,
            counters: EngineCounters::default(),
            sma: GatewaySma::new(0, settings.lid, 1, &SmaSettings::default()),
            pma: GatewayPma::default(),
        })
    }

    /// The engine with `sma` as its port's agent (by default an agent
    /// with no GUID, not managed).
    pub fn with_sma(self, sma: GatewaySma) -> Self {
        Self { sma, ..self }
    }

    /// Runs until [`Event::Stop`] or until every sender is gone; returns
    /// the counters.
    pub fn run(mut self, rx: Receiver<Event>) -> EngineCounters {
        loop {
            let now = Instant::now();
            let wait = self
                .conns
                .iter()
                .filter_map(VcConn::deadline)
                .min()
                .map_or(IDLE, |d| d.saturating_duration_since(now).min(IDLE));
            let first = match rx.recv_timeout(wait) {
                Ok(ev) => Some(ev),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return self.counters(),
            };
            let mut more = first
                .into_iter()
                .chain(std::iter::from_fn(|| rx.try_recv().ok()));
            for ev in more.by_ref().take(EVENTS_PER_ROUND) {
                if !self.handle(ev) {
                    return self.counters();
                }
            }
            self.service(Instant::now());
        }
    }

    /// The counters, the agent's with them.
    fn counters(&self) -> EngineCounters {
        EngineCounters {
            sma: self.sma.stats(),
            pm_answers: self.pma.answered(),
            ..self.counters
        }
    }

    /// Handles one event; false to stop.
    fn handle(&mut self, ev: Event) -> bool {
        match ev {
            Event::Link(LinkEvent::Packet(p)) => self.receive(&p),
            Event::Link(LinkEvent::Up { peer }) => {
                self.sma.link_changed(true);
                tracing::info!(
                    peer_lid = peer.lid,
                    peer_guid = format_args!("{:#018x}", peer.node_guid),
                    "IB link up"
                );
            }
            Event::Link(LinkEvent::Down { reason }) => {
                self.sma.link_changed(false);
                tracing::info!(%reason, "IB link down");
            }
            Event::Atm(deliveries) => {
                self.handoff.taken(deliveries.len());
                for d in deliveries {
                    match self.by_vc.get(&d.vc).and_then(|&i| self.conns.get_mut(i)) {
                        Some(c) => c.from_atm(d.data, self.settings.backlog, &mut self.counters),
                        None => self.counters.dropped_no_qp += 1,
                    }
                }
            }
            Event::SetRemoteQpn { vc, qpn, reply } => {
                let _ = reply.send(self.set_remote_qpn(vc, qpn));
            }
            Event::Counters(reply) => {
                let _ = reply.send(self.counters());
            }
            Event::Stop => return false,
        }
        true
    }

    fn set_remote_qpn(&mut self, vc: Vc, qpn: u32) -> Result<String, String> {
        if !(2..=0xff_ffff).contains(&qpn) {
            return Err(format!("remote QPN {qpn} is out of range: 2..=0xffffff"));
        }
        let i = *self
            .by_vc
            .get(&vc)
            .ok_or_else(|| format!("VC {vc} is not in the map"))?;
        let s = self.settings;
        let c = self.conns.get_mut(i).ok_or("no such connection")?;
        c.entry.remote_qpn = Some(qpn);
        c.start_qp(&s)?;
        tracing::info!(%vc, local_qpn = c.entry.local_qpn, remote_qpn = qpn, "remote QPN set");
        Ok(format!(
            "VC {vc}: QP {} to LID {} QP {qpn}",
            c.entry.local_qpn, c.entry.remote_lid
        ))
    }

    fn receive(&mut self, bytes: &[u8]) {
        self.counters.ib_rx_packets += 1;
        let view = match PacketView::parse(bytes) {
            Ok(v) => v,
            Err(e) => {
                self.counters.ib_rx_malformed += 1;
                tracing::debug!(error = %e, "dropping a malformed IB packet");
                return;
            }
        };
        if view.bth.dest_qp == 0 {
            self.receive_smp(&view);
            return;
        }
        if !self.sma.takes_data() {
            // IBA vol 1 §7.2: a port not yet Armed takes no data packets.
            self.counters.ib_rx_port_inactive += 1;
            return;
        }
        if view.bth.dest_qp == QP1 {
            self.receive_gmp(&view);
            return;
        }
        let conn = self
            .by_qpn
            .get(&view.bth.dest_qp)
            .and_then(|&i| self.conns.get_mut(i));
        match conn {
            Some(c) if c.has_qp() => {
                let open = self.cells.has_room(c.entry.service);
                c.on_packet(&view, Instant::now(), open);
            }
            _ => self.counters.ib_rx_no_qp += 1,
        }
    }

    /// A packet to QP0: the agent answers; a LID the SM set becomes every
    /// QP's source LID (each QP starts again on it), a VL arbitration the
    /// link's.
    fn receive_smp(&mut self, view: &PacketView<'_>) {
        let effect = self.sma.on_packet(view);
        if let Some(reply) = effect.reply {
            // On VL15, outside flow control; a refusal is the link's count.
            let _ = self.link.send(reply);
        }
        if let Some((low, high)) = &effect.arbitration {
            self.link.set_low_priority(low);
            self.link.set_high_priority(high);
        }
        match effect.new_lid {
            Some(lid) if lid != 0 && lid != self.settings.lid => {
                self.settings.lid = lid;
                let s = self.settings;
                for c in self.conns.iter_mut().filter(|c| c.has_qp()) {
                    if let Err(e) = c.start_qp(&s) {
                        tracing::warn!(error = %e, "cannot restart a QP on the new LID");
                    }
                }
            }
            _ => {}
        }
    }

    /// A packet to QP1: a PM request is answered from the port's counters
    /// (a data packet: sent only while the port is Active); the gateway
    /// has no other use for QP1.
    fn receive_gmp(&mut self, view: &PacketView<'_>) {
        let served = self
            .pma
            .serve(view, &self.link.stats(), &self.counters, self.sma.lid());
        match served {
            PmPacket::NotForAgent => self.counters.ib_rx_no_qp += 1,
            PmPacket::Served(None) => {}
            PmPacket::Served(Some(_)) if !self.sma.sends_data() => {
                self.counters.ib_tx_port_inactive += 1;
            }
            PmPacket::Served(Some(mut reply)) => {
                vl_config::remap(&self.vl, &mut reply);
                // A refusal (link down, queue full) is the link's count.
                let _ = self.link.send(reply);
            }
        }
    }

    /// Serves every connection, highest class first.
    fn service(&mut self, now: Instant) {
        let (link, vl) = (&self.link, &self.vl);
        let active = self.sma.sends_data();
        let mut inactive = 0;
        let mut send = |mut p: Vec<u8>| {
            if !active {
                // IBA vol 1 §7.2: only an Active port sends data; the RC
                // transport retransmits once it is.
                inactive += 1;
                return;
            }
            vl_config::remap(vl, &mut p);
            // A refusal (link down, queue full) is counted by the link;
            // the RC transport retransmits.
            let _ = link.send(p);
        };
        for c in &mut self.conns {
            c.service(
                now,
                &self.settings,
                &self.cells,
                &mut send,
                &mut self.counters,
            );
        }
        self.counters.ib_tx_port_inactive += inactive;
    }
}
