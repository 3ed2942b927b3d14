//! The engine's datagram QPs: UD QPs, and the port's QP0 and QP1 in the
//! guest (the driver's `IB_QPT_SMI` and `IB_QPT_GSI`). Their sends go
//! through `transport::ud` one WQE at a time (no window, no ACK: each
//! completes when its packet leaves); inbound datagrams are routed here
//! by destination QP (`receive.rs`):
//!
//! - QP0: the device's agent first (`smp.rs`); what it leaves for the SM
//!   (SMInfo, responses, traps) goes on to the guest's QP0 (`smp_for_sm`);
//! - QP1: the PerfMgt class to the device's PMA (`pma.rs`, through
//!   [`Engine::gmp_for_device`], the dispatch point), every other class to the guest's QP1;
//! - any other number: a UD QP of this device, if it is one.
//!
//! Nothing reaches a QP before RTR, nor is sent before RTS; a QP in error
//! flushes what is posted. A UD QP whose send work request fails enters
//! SQE (IBA 10.3.1): that WQE completes with its error, the ones behind
//! it flush, receives go on, and MODIFY_QP to RTS resumes sending. QP0
//! and QP1 stay in RTS (the MAD layer retries their sends itself), and so
//! does a QP whose sends the port refused while not Active (nothing was
//! wrong with the work request).

use std::time::Instant;

use ibtca_protocol::mad::class;
use ibtca_protocol::PacketView;

use super::env::DeviceQpEnv;
use super::Engine;
use crate::transport::config::mtu_from_code;
use crate::transport::ud::{self, port_gid, UdConfig, UdCounters};
use crate::transport::CqKind;
use crate::verbs::abi::{Cqe, UdSendWqe, WC_PORT_INACTIVE_ERR, WC_SEND, WC_WR_FLUSH_ERR};
use crate::verbs::qp::QpType;
use crate::verbs::qp_state::QpState;

/// The management VL: only QP0's packets may use it.
const VL15: u8 = 15;
/// The GSI's QP number on the wire.
pub(super) const QP1: u32 = 1;
/// Datagrams a send queue drain builds before the outbox is flushed: a
/// guest's full send queue (2^15 WQEs of up to 4 KiB, looped back to its
/// own LID) never waits in device memory at once.
const DATAGRAMS_PER_FLUSH: u32 = 64;
/// Byte of a MAD that holds its management class.
const MGMT_CLASS_OFFSET: usize = 1;

/// Counters of the datagram QPs' traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatagramStats {
    /// Sent, delivered, and dropped by the transport (Q_Key, no receive).
    pub transport: UdCounters,
    /// SMPs for the SM (SMInfo, responses, traps) dropped: no QP0 in the
    /// guest.
    pub smps_for_no_sm: u64,
    /// Packets on VL15 for a QP other than QP0 (IBA: data never uses
    /// VL15), dropped.
    pub rx_vl15_data: u64,
    /// Send work requests of UD QPs and QP1 completed with
    /// `WC_PORT_INACTIVE_ERR`: the port was Init or Armed.
    pub tx_port_inactive: u64,
    /// Send work requests of UD QPs that failed and moved their QP to SQE.
    pub tx_send_queue_errors: u64,
}

impl Engine {
    /// Whether `view`, a packet for a QP other than QP0, is on VL15: data
    /// never uses VL15 (IBA 7.6.5), which is outside flow control.
    pub(super) fn is_data_on_vl15(&self, view: &PacketView<'_>) -> bool {
        view.lrh.vl == VL15
    }

    /// The type of QP `qpn` if it is a datagram QP (UD, SMI, GSI).
    pub(super) fn datagram_type(&self, qpn: u32) -> Option<QpType> {
        let t = self.verbs.qps.get(qpn)?.qp_type;
        t.is_datagram().then_some(t)
    }

    fn datagram_config(&self, qpn: u32) -> Option<UdConfig> {
        let qp = self.verbs.qps.get(qpn)?;
        let port = &self.verbs.port;
        Some(UdConfig {
            qpn,
            qp_type: qp.qp_type,
            qkey: qp.attrs().qkey,
            pkey: self.agents.pkey_at(qp.attrs().pkey_index),
            slid: port.lid,
            sgid: port_gid(port.guid),
            mtu: mtu_from_code(port.active_mtu).unwrap_or(256) as usize,
        })
    }

    fn datagram_env(&mut self, qpn: u32) -> DeviceQpEnv<'_> {
        self.qp_env(qpn)
    }

    /// Sends what datagram QP `qpn` has posted (RTS), or flushes it (SQE,
    /// ERR); false if `qpn` is no datagram QP.
    pub(super) fn drain_datagram_sq(&mut self, qpn: u32) -> bool {
        if self.datagram_type(qpn).is_none() {
            return false;
        }
        loop {
            let Some(cfg) = self.datagram_config(qpn) else {
                return true;
            };
            // Before Active only QP0's SMPs leave (IBA vol 1 §7.2).
            let inactive = cfg.qp_type != QpType::Smi && !self.agents.sends_data();
            let Some(qp) = self.verbs.qps.get_mut(qpn) else {
                return true;
            };
            let state = qp.state();
            let wr = match qp.next_send_wqe(&self.mem) {
                Ok(Some(w)) => w,
                Ok(None) => return true,
                Err(e) => {
                    crate::guest_warn!(qpn, error = %e, "send queue");
                    return true;
                }
            };
            let wqe = UdSendWqe::from_send_wqe(wr.wqe());
            let flushing = matches!(state, QpState::Sqe | QpState::Err);
            if flushing || inactive {
                let status = if flushing {
                    self.stats.flushed_sends += 1;
                    WC_WR_FLUSH_ERR
                } else {
                    self.stats.ud.tx_port_inactive += 1;
                    WC_PORT_INACTIVE_ERR
                };
                let cqe = Cqe {
                    wr_id: wqe.wr_id,
                    qpn: qpn.into(),
                    opcode: WC_SEND,
                    status,
                    ..Cqe::default()
                };
                crate::transport::QpEnv::complete(&mut self.datagram_env(qpn), CqKind::Send, cqe);
                continue;
            }
            let psn = qp.next_datagram_psn();
            let sent = ud::send_with_sges(&cfg, &wqe, wr.sges(), psn, &mut self.datagram_env(qpn));
            if sent.is_err() && cfg.qp_type == QpType::Ud {
                self.stats.ud.tx_send_queue_errors += 1;
                if let Some(qp) = self.verbs.qps.get_mut(qpn) {
                    qp.set_send_queue_error();
                }
            }
            if sent.is_ok() {
                self.stats.ud.transport.sent += 1;
                if self
                    .stats
                    .ud
                    .transport
                    .sent
                    .is_multiple_of(u64::from(DATAGRAMS_PER_FLUSH))
                {
                    self.flush_outbox(Instant::now());
                }
            }
        }
    }

    /// After commands: datagram QPs that reached RTS send what was posted
    /// before, those in SQE or ERR flush.
    pub(super) fn sync_datagram_qps(&mut self) {
        let ready: Vec<u32> = self
            .verbs
            .qps
            .iter()
            .filter(|(_, qp)| {
                qp.qp_type.is_datagram() && qp.state().takes_sends() && qp.send_pending()
            })
            .map(|(qpn, _)| qpn)
            .collect();
        for qpn in ready {
            self.drain_datagram_sq(qpn);
        }
    }

    /// Delivers a datagram to QP `qpn` of this device, which must be a
    /// datagram QP in RTR, RTS or SQE.
    pub(super) fn deliver_datagram(&mut self, qpn: u32, view: &PacketView<'_>) {
        let ready = self
            .verbs
            .qps
            .get(qpn)
            .is_some_and(|qp| qp.state().receives());
        let Some(cfg) = self.datagram_config(qpn).filter(|_| ready) else {
            self.stats.rx_no_qp += 1;
            return;
        };
        if !self.admit_qp_pkey(qpn, view) {
            return;
        }
        let mut counters = self.stats.ud.transport;
        ud::receive(&cfg, view, &mut self.datagram_env(qpn), &mut counters);
        self.stats.ud.transport = counters;
    }

    /// Takes an inbound GMP (a packet to QP1): the device's own agent's,
    /// or the guest's QP1's.
    pub(super) fn receive_gmp(&mut self, view: &PacketView<'_>) {
        let mgmt_class = view.payload.get(MGMT_CLASS_OFFSET).copied();
        if mgmt_class.is_some_and(|c| self.gmp_for_device(c, view)) {
            return;
        }
        match self.verbs.special_qp(QpType::Gsi) {
            Some(gsi) => self.deliver_datagram(gsi, view),
            None => self.stats.rx_no_qp += 1,
        }
    }

    /// The dispatch point for GMPs the device answers itself: true if it
    /// took the packet (`view`, a GMP to QP1). The PerfMgt class (0x04)
    /// belongs to the device's performance management agent
    /// ([`Engine::receive_pma`]); every other class goes to the guest's QP1.
    fn gmp_for_device(&mut self, mgmt_class: u8, view: &PacketView<'_>) -> bool {
        match mgmt_class {
            class::PERF => self.receive_pma(view),
            _ => false,
        }
    }

    /// An SMP the device's agent left for the subnet manager: to the
    /// guest's QP0, if the driver made one (dropped and counted otherwise).
    pub(super) fn smp_for_sm(&mut self, view: &PacketView<'_>) {
        match self.verbs.special_qp(QpType::Smi) {
            Some(smi) => self.deliver_datagram(smi, view),
            None => self.stats.ud.smps_for_no_sm += 1,
        }
    }
}
