//! One device instance assembled: the PCI function ([`Tca`]), its engine
//! thread and, optionally, its link to a peer. `ibtca-device` and the tests
//! build devices through this.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::bar0::PortIdentity;
use crate::drdma::{Drdma, DrdmaConfig};
use crate::engine::{
    wait, Engine, EngineEvent, EngineHandle, EngineStats, EngineThread, PacketSink, PortState,
};
use crate::link::{HighPriority, Link, LinkConfig, LinkEndpoint, LinkRx, LinkStats, LocalPort};
use crate::regs;
use crate::sma::DeviceSma;
use crate::tca::Tca;
use crate::verbs::PortAttrs;
use crate::vl_config::{self, VlConfig};

/// What a device instance is.
#[derive(Debug, Clone)]
pub struct InstanceConfig {
    /// The port's LID (unused with `sm_managed`: the SM gives it).
    pub lid: u16,
    /// A subnet manager brings the port up (`ibtca-device --sm-managed`):
    /// it starts without a LID, link up makes it Init, and only the SM
    /// (PortInfo Set through the port's SMA) gives it a LID and makes it
    /// Active. Otherwise link up is Active with `lid` at once, with no SM
    /// needed; the SMA answers either way.
    pub sm_managed: bool,
    /// NodeDescription (what the SM and `ibnetdiscover` show).
    pub node_description: String,
    /// The node GUID (sent in the link's Hello, reported by QUERY_DEVICE).
    pub node_guid: u64,
    /// The port GUID (PORT_GUID_LO/HI, QUERY_PORT, the port's GID).
    pub port_guid: u64,
    /// The link to a peer, if any.
    pub link: Option<LinkEndpoint>,
    /// The DRDMA window.
    pub drdma: DrdmaConfig,
    /// SL → VL table and VL weights of the port's link.
    pub vl: VlConfig,
    /// How long the engine thread polls for its next event before it
    /// blocks (`ibtca-device --engine-spin-us`).
    pub engine_spin: Duration,
    /// The link's shared ring per direction, in bytes; 0 keeps the link's
    /// frames on its socket (`ibtca-device --link-ring-kib`).
    pub link_ring: u64,
    /// How long the link reader polls its empty ring before it sleeps
    /// (`ibtca-device --link-spin-us`).
    pub link_spin: Duration,
    /// Events reaching an idle engine run on the thread they arrived on
    /// (docs/thread-model.md); false: all through the engine thread.
    pub run_to_completion: bool,
    /// The least local ACK timeout a QP runs with: a shorter one the guest
    /// asks for is raised to it, an infinite one stays infinite
    /// (`ibtca-device --min-ack-timeout-ms`). Zero, the default here: as
    /// the guest asks.
    pub min_ack_timeout: Duration,
    /// How often the engine reads the doorbell records of the send queues
    /// it sleeps on, for WQEs a driver posted there without the doorbell
    /// it owed (`engine/record_sweep.rs`); `None`: never (tests of the
    /// record's handshake).
    pub record_sweep: Option<Duration>,
}

impl Default for InstanceConfig {
    fn default() -> Self {
        InstanceConfig {
            lid: 1,
            sm_managed: false,
            node_description: crate::engine::DEFAULT_NODE_DESCRIPTION.to_owned(),
            node_guid: crate::guid::FABRIC_NODE_BASE + 1,
            port_guid: crate::guid::FABRIC_NODE_BASE + 1,
            link: None,
            drdma: DrdmaConfig::default(),
            vl: VlConfig::default(),
            engine_spin: wait::DEFAULT_SPIN,
            link_ring: crate::link::SHARED_RING,
            link_spin: crate::link::RX_SPIN,
            min_ack_timeout: Duration::ZERO,
            run_to_completion: true,
            record_sweep: Some(crate::engine::RECORD_SWEEP),
        }
    }
}

/// The port's egress: each packet leaves on the VL its SL maps to.
struct LinkSink {
    link: Arc<Link>,
    vl: VlConfig,
}

impl PacketSink for LinkSink {
    fn send(&mut self, mut packet: Vec<u8>) {
        vl_config::remap(&self.vl, &mut packet);
        // Refusals (link down, queue full) are counted by the link; the RC
        // transport retransmits.
        let _ = self.link.send(packet);
    }

    fn send_all(&mut self, packets: &mut Vec<Vec<u8>>) {
        for p in packets.iter_mut() {
            vl_config::remap(&self.vl, p);
        }
        self.link.send_batch(packets.drain(..));
    }

    fn reclaim(&mut self, spare: &mut Vec<Vec<u8>>, max: usize) {
        self.link.reclaim(spare, max);
    }

    fn link_stats(&self) -> Option<LinkStats> {
        Some(self.link.stats())
    }

    fn set_arbitration(&mut self, low: &[(u8, u8)], high: &HighPriority) {
        self.link.set_low_priority(low);
        self.link.set_high_priority(high);
    }

    fn send_in_place(
        &mut self,
        len: usize,
        sl: u8,
        _dlid: u16,
        build: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Option<bool> {
        let vl = self.vl.vl(sl);
        self.link.send_in_place(len, vl, &mut |packet| {
            let built = build(packet);
            if built {
                vl_config::remap(&self.vl, packet);
            }
            built
        })
    }

    fn publish(&mut self) {
        self.link.publish();
    }
}

struct NoLink;

impl PacketSink for NoLink {
    fn send(&mut self, _packet: Vec<u8>) {
        tracing::trace!("no link: packet for another LID dropped");
    }
}

/// A device instance: hand [`Instance::tca`] to a vfio-user server.
pub struct Instance {
    /// The PCI function (the server's backend).
    pub tca: Tca,
    engine: EngineThread,
    link: Option<Arc<Link>>,
}

impl Instance {
    /// Builds the device, starts its engine and its link.
    pub fn start(cfg: &InstanceConfig) -> io::Result<Self> {
        let lid = if cfg.sm_managed { 0 } else { cfg.lid };
        let port_state = PortState::new(if cfg.link.is_some() {
            regs::PORT_DOWN
        } else {
            // Without a link the port still loops back to its own LID.
            regs::PORT_ACTIVE
        });
        let drdma = Drdma::new(cfg.drdma).map_err(io::Error::other)?;
        cfg.vl.validate().map_err(io::Error::other)?;
        let mut tca = Tca::with_parts(
            PortIdentity {
                lid,
                guid: cfg.port_guid,
                state: port_state.clone(),
            },
            drdma.clone(),
        );
        let (handle, rx) = EngineHandle::channel();
        handle.set_run_to_completion(cfg.run_to_completion);
        let link = match &cfg.link {
            Some(ep) => {
                let events = handle.clone();
                let local = LocalPort {
                    node_guid: cfg.node_guid,
                    port: 1,
                    lid,
                };
                // Each socket read's packets reach the engine as one event,
                // run on the reader when the engine is idle.
                let mut link_config = LinkConfig {
                    shared_ring: cfg.link_ring,
                    rx_spin: cfg.link_spin,
                    rx_crcs: true,
                    ..LinkConfig::default()
                };
                if let Some(flow) = link_config.flow_control.as_mut() {
                    cfg.vl.apply(flow);
                }
                let link = Link::start_batched(ep.clone(), local, link_config, move |rx| {
                    let _ = events.run_or_send(match rx {
                        LinkRx::Event(ev) => EngineEvent::Link(ev),
                        LinkRx::Packets(batch) => EngineEvent::LinkPackets(batch),
                    });
                })?;
                Some(Arc::new(link))
            }
            None => None,
        };
        let sink: Box<dyn PacketSink> = match &link {
            Some(l) => Box::new(LinkSink {
                link: l.clone(),
                vl: cfg.vl.clone(),
            }),
            None => Box::new(NoLink),
        };
        let port = PortAttrs {
            lid,
            guid: cfg.port_guid,
            node_guid: cfg.node_guid,
            data_vls: cfg.vl.weights.len() as u8,
            ..PortAttrs::default()
        };
        let mut engine = Engine::new(
            tca.guest_memory(),
            tca.msix().clone(),
            sink,
            port,
            port_state,
            drdma,
        );
        engine.set_rkm(tca.rkm().clone());
        let mut sma = DeviceSma::new(
            cfg.node_guid,
            cfg.port_guid,
            &cfg.node_description,
            lid,
            port.data_vls,
            cfg.sm_managed,
        );
        sma.set_vl_weights(&cfg.vl.weights);
        engine.set_sma(sma);
        engine.set_min_ack_timeout(cfg.min_ack_timeout);
        engine.set_record_sweep(cfg.record_sweep);
        tracing::info!(
            min_ack_timeout_ms = cfg.min_ack_timeout.as_millis() as u64,
            "local ACK timeout floor"
        );
        tca.set_engine(handle.clone());
        let engine = EngineThread::spawn(handle, rx, engine, cfg.engine_spin);
        Ok(Instance { tca, engine, link })
    }

    /// The link, if there is one (fault injection, counters).
    pub fn link(&self) -> Option<Arc<Link>> {
        self.link.clone()
    }

    /// A handle on the engine (the control socket's
    /// [`EngineEvent::Inspect`]; where events ran:
    /// [`EngineHandle::handoffs`]).
    pub fn engine(&self) -> EngineHandle {
        self.engine.handle()
    }

    /// Link counters, if there is a link.
    pub fn link_stats(&self) -> Option<LinkStats> {
        self.link.as_ref().map(|l| l.stats())
    }

    /// Stops the engine and the link; returns the engine's counters.
    pub fn stop(self) -> EngineStats {
        let stats = self.engine.stop();
        drop(self.link);
        stats
    }
}
