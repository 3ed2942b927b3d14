//! What an RC QP's responder does with a request by the QP's state (IBA
//! vol 1 §10.3.1, the QP states, and §9.9's responder rules; no VM): a
//! QP in INIT (never connected) or in ERR silently drops an inbound
//! request (no ACK, no NAK, no receive consumed; the packet is counted),
//! one in RTR answers it. The requester here is a bare link (the test
//! SM's), so every packet the device sends back is seen: an SMP asked
//! after the request comes back first only if the request got no answer.

use std::time::Duration;

use ibtca_device::instance::InstanceConfig;
use ibtca_device::verbs::abi::*;
use ibtca_protocol::mad::attr::id;
use ibtca_protocol::mad::{method, Smp};
use ibtca_protocol::{Opcode, Packet, PacketView};
use ibtca_tests::sim_guest::{recv_wqe, SimGuest};
use ibtca_tests::sm_client::SmClient;
use ibtca_tests::sm_nodes::{sm_device_server, SM_LID};
use ibtca_tests::TempDir;

const LID: u16 = 7;
const T: Duration = Duration::from_secs(10);

/// An RC SEND ONLY with AckReq from the SM's LID to QP `qpn`, PSN `psn`.
fn send_only(qpn: u32, psn: u32) -> Vec<u8> {
    let mut p = Packet::new(Opcode::RcSendOnly);
    (p.lrh.slid, p.lrh.dlid) = (SM_LID, LID);
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = qpn;
    p.bth.psn = psn;
    p.bth.ack_req = true;
    p.payload = vec![0x5a; 16];
    p.build().unwrap()
}

/// Sends `packet`, then a NodeInfo Get: its answer must be the next
/// packet to arrive (nothing answered `packet`).
fn silently_dropped(sm: &mut SmClient, packet: Vec<u8>, what: &str) {
    sm.link.send(packet).unwrap();
    let mut get = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    sm.send(&mut get, 0);
    let p = sm.next_packet();
    let view = PacketView::parse(&p).unwrap();
    assert_eq!(
        (view.bth.dest_qp, view.bth.opcode),
        (0, Opcode::UdSendOnly),
        "{what}: the first packet back is not the SMP's answer"
    );
}

#[test]
fn a_request_to_a_qp_in_init_or_err_is_dropped_and_in_rtr_answered() {
    let cfg = InstanceConfig {
        lid: LID,
        ..InstanceConfig::default()
    };
    let (server, mut sm) = sm_device_server(TempDir::new("resp-states"), cfg);
    let mut g = SimGuest::new(&server.socket, 4 << 20);
    let pd = g.create_pd();
    let buf = g.alloc(4096, 4096);
    let (lkey, _) = g.reg_mr(pd, buf, 4096, ACCESS_LOCAL_WRITE);
    let mut cq = g.create_cq(6);
    let mut qp = g.create_qp(pd, &cq, &cq, 6);
    let qpn = qp.qpn;
    g.modify_qp(&CmdModifyQp {
        qpn: qpn.into(),
        attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
        state: QPS_INIT,
        ..Default::default()
    })
    .unwrap();
    g.post_recv(&mut qp, &recv_wqe(1, buf, 64, lkey));

    // INIT: dropped, the receive untouched (the SMP's answer came after
    // the engine handled the request).
    silently_dropped(&mut sm, send_only(qpn, 100), "INIT");
    assert!(g.try_poll_cq(&mut cq).is_none(), "INIT: a receive consumed");

    // RTR: the same request is taken and ACKed.
    g.modify_qp(&CmdModifyQp {
        qpn: qpn.into(),
        attr_mask: (QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN).into(),
        state: QPS_RTR,
        path_mtu: MTU_4096,
        dlid: SM_LID.into(),
        dest_qpn: 0x77.into(),
        rq_psn: 100.into(),
        ..Default::default()
    })
    .unwrap();
    sm.link.send(send_only(qpn, 100)).unwrap();
    let p = sm.next_packet();
    let ack = PacketView::parse(&p).unwrap();
    assert_eq!(
        (ack.bth.opcode, ack.bth.dest_qp, ack.bth.psn),
        (Opcode::RcAcknowledge, 0x77, 100),
        "RTR: an ACK"
    );
    let c = g.poll_cq(&mut cq, T).expect("RTR: the receive completes");
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.byte_len.to_native()),
        (1, WC_SUCCESS, 16)
    );

    // ERR: dropped; a receive posted now is flushed, not filled.
    g.modify_qp(&CmdModifyQp {
        qpn: qpn.into(),
        attr_mask: QP_ATTR_STATE.into(),
        state: QPS_ERR,
        ..Default::default()
    })
    .unwrap();
    silently_dropped(&mut sm, send_only(qpn, 101), "ERR");
    g.post_recv(&mut qp, &recv_wqe(2, buf, 64, lkey));
    let c = g.poll_cq(&mut cq, T).expect("ERR: the receive is flushed");
    assert_eq!((c.wr_id.to_native(), c.status), (2, WC_WR_FLUSH_ERR));
}
