//! One gateway assembled: the IB link, the engine thread, the ATM port.

use std::io;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ibtca_agents::vl_config::VlConfig;
use ibtca_link::{Link, LinkConfig, LinkEndpoint, LocalPort};
use ibtca_protocol::atm::Vc;
use ibtca_sandbox::{self as sandbox, Role};
use ibtca_switch::Capture;

use crate::atm_port::{AtmPort, PortCounters};
use crate::counters::{Counters, EngineCounters};
use crate::handoff::{self, HandOff};
use crate::map::VcMap;
use crate::qp_thread::{Event, QpThread};
use crate::scheduler::CellScheduler;
use crate::service::ServiceSl;
use crate::sma::{GatewaySma, SmaSettings};
use crate::vc_conn::QpSettings;

/// Locally administered GUIDs of gateways: this plus the LID by default.
pub const GATEWAY_GUID_BASE: u64 = 0x1200_0000_00fd_0000;

/// What a gateway is.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The IB port's link.
    pub link: LinkEndpoint,
    /// The ATM port's socket.
    pub atm: LinkEndpoint,
    /// The connections.
    pub map: VcMap,
    /// Service class → SL.
    pub service_sl: ServiceSl,
    /// SL → VL table and VL weights of the IB port.
    pub vl: VlConfig,
    /// Node GUID (the link's Hello).
    pub node_guid: u64,
    /// QP settings (LID, MTU, timeouts, backlog).
    pub qp: QpSettings,
    /// AAL5 reassembly timeout.
    pub reassembly_timeout: Duration,
    /// Cells each class queue toward the ATM port holds.
    pub queue_cells: usize,
    /// The link's shared ring per direction, in bytes (0: the socket).
    pub link_ring: u64,
    /// A pcap file (ERF ATM records) of every cell in and out of the ATM
    /// port.
    pub capture: Option<std::path::PathBuf>,
    /// The subnet management agent (NodeDescription, SM-managed or not).
    pub sma: SmaSettings,
}

/// A running gateway.
pub struct Gateway {
    events: Sender<Event>,
    engine: Option<JoinHandle<EngineCounters>>,
    atm: Option<AtmPort>,
    atm_counters: Arc<PortCounters>,
    link: Option<Arc<Link>>,
    cells: Arc<CellScheduler>,
}

impl Gateway {
    /// Starts the link, the engine and the ATM port.
    pub fn start(cfg: &GatewayConfig) -> io::Result<Self> {
        cfg.vl.validate().map_err(io::Error::other)?;
        let (tx, rx) = mpsc::channel();
        let local = LocalPort {
            node_guid: cfg.node_guid,
            port: 1,
            lid: cfg.qp.lid,
        };
        let mut link_config = LinkConfig {
            shared_ring: cfg.link_ring,
            ..LinkConfig::default()
        };
        if let Some(flow) = link_config.flow_control.as_mut() {
            cfg.vl.apply(flow);
        }
        let events = tx.clone();
        let link = Link::start_with(cfg.link.clone(), local, link_config, move |ev| {
            let _ = events.send(Event::Link(ev));
        })?;
        let link = Arc::new(link);
        let cells = Arc::new(CellScheduler::new(cfg.queue_cells));
        let handoff = Arc::new(HandOff::new(handoff::DEFAULT_LIMIT));
        let engine = QpThread::new(
            &cfg.map,
            &cfg.service_sl,
            cfg.qp,
            link.clone(),
            cfg.vl.clone(),
            cells.clone(),
            handoff.clone(),
        )
        .map_err(io::Error::other)?
        .with_sma(
            GatewaySma::new(
                cfg.node_guid,
                cfg.qp.lid,
                u8::try_from(cfg.vl.weights.len()).unwrap_or(1),
                &cfg.sma,
            )
            .with_vl_weights(&cfg.vl.weights),
        );
        let engine = std::thread::Builder::new()
            .name("ibtca-gw-engine".into())
            .spawn(move || {
                sandbox::enter(Role::GatewayEngine);
                engine.run(rx)
            })?;
        let capture = match &cfg.capture {
            Some(p) => Some(Arc::new(Capture::create(p)?)),
            None => None,
        };
        let atm = AtmPort::start(
            cfg.atm.clone(),
            &cfg.map,
            cfg.reassembly_timeout,
            cells.clone(),
            tx.clone(),
            handoff,
            capture,
        )?;
        Ok(Self {
            events: tx,
            engine: Some(engine),
            atm_counters: atm.counters.clone(),
            atm: Some(atm),
            link: Some(link),
            cells,
        })
    }

    /// Every counter now.
    pub fn counters(&self) -> Counters {
        let (tx, rx) = mpsc::channel();
        let engine = if self.events.send(Event::Counters(tx)).is_ok() {
            rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default()
        } else {
            EngineCounters::default()
        };
        self.assemble(engine)
    }

    fn assemble(&self, engine: EngineCounters) -> Counters {
        let (queue_dropped_messages, queue_dropped_cells) = self.cells.dropped();
        let a = &self.atm_counters;
        let atm_rx = a.rx.lock().map(|c| *c).unwrap_or_default();
        let cells_out = a.cells_out.load(std::sync::atomic::Ordering::Relaxed);
        let atm_overrun_dropped = a.overrun_dropped.load(std::sync::atomic::Ordering::Relaxed);
        Counters {
            atm_rx,
            cells_out,
            atm_overrun_dropped,
            queue_dropped_messages,
            queue_dropped_cells,
            engine,
        }
    }

    /// The IB port's counters as its PMA reports them (since the gateway
    /// started), and whether its link is up.
    pub fn ib_port(&self) -> (ibtca_agents::pma::PortTotals, bool) {
        let Some(link) = &self.link else {
            return (Default::default(), false);
        };
        let mut totals = ibtca_agents::pma::PortTotals::of_link(&link.stats());
        totals.rcv_errors += self.counters().engine.ib_rx_malformed;
        (totals, link.is_up())
    }

    /// Sets `vc`'s remote QPN and (re)starts its QP.
    pub fn set_remote_qpn(&self, vc: Vc, qpn: u32) -> Result<String, String> {
        let (tx, rx) = mpsc::channel();
        self.events
            .send(Event::SetRemoteQpn { vc, qpn, reply: tx })
            .map_err(|_| "the engine stopped".to_string())?;
        rx.recv_timeout(Duration::from_secs(5))
            .map_err(|_| "the engine did not answer".to_string())?
    }

    /// Stops everything; returns the final counters.
    pub fn stop(mut self) -> Counters {
        if let Some(a) = self.atm.take() {
            a.stop();
        }
        let _ = self.events.send(Event::Stop);
        let engine = self
            .engine
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let counters = self.assemble(engine);
        if let Some(link) = self.link.take().and_then(|l| Arc::try_unwrap(l).ok()) {
            link.stop();
        }
        counters
    }
}
