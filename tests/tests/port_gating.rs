//! Port-state gating at a device (no VM): IBA vol 1 §7.2 lets a port that
//! is not Active send nothing but SMPs, and one in Init take nothing but
//! SMPs. Two `--sm-managed` devices on a link, each brought up by its own
//! guest through SMA_MAD (as a local SM's `process_mad` does): UD and QP1
//! work requests complete with `WC_PORT_INACTIVE_ERR` in Init and Armed
//! and send nothing; QP0 goes on; once both ports are Active the same
//! datagrams land.

use std::time::Duration;

use ibtca_device::instance::InstanceConfig;
use ibtca_device::link::LinkEndpoint;
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_protocol::mad::attr::{id, NodeInfo, PortState};
use ibtca_protocol::mad::{method, Smp};
use ibtca_tests::datagram::ud_send_wqe;
use ibtca_tests::pair::{PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::{recv_wqe, Qp};
use ibtca_tests::{TempDir, TestServer};

const T: Duration = Duration::from_secs(20);
const QKEY: u32 = 0x1234_5678;
const GUID_B: u64 = 0x1200_0000_0000_00b2;

fn managed(lid: u16, ep: LinkEndpoint) -> TestServer {
    let cfg = InstanceConfig {
        lid,
        node_guid: 0x1200_0000_0000_00b0 + u64::from(lid),
        port_guid: 0x1200_0000_0000_00b0 + u64::from(lid),
        link: Some(ep),
        sm_managed: true,
        ..InstanceConfig::default()
    };
    TestServer::start_instance(TempDir::new("gated"), cfg)
}

fn wait_state(s: &mut Side, state: u32) {
    let deadline = std::time::Instant::now() + T;
    while s.g.client.read32(0, regs::PORT_STATE) != state {
        assert!(
            std::time::Instant::now() < deadline,
            "port never reached {state}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sets the side's port to `lid` and `state`, as its local SM would.
fn set_port(s: &mut Side, lid: u16, state: PortState) {
    let mut pi = s.port_info();
    (pi.lid, pi.port_state) = (lid, state as u8);
    let now = s.set_port_info(&pi);
    assert_eq!((now.lid, now.port_state), (lid, state as u8));
}

fn datagram_qp(s: &mut Side, qp_type: u8, qkey: u32) -> Qp {
    let qp = s.g.create_datagram_qp(s.pd, &s.cq, 6, qp_type).unwrap();
    s.g.datagram_ready(&qp, qkey).unwrap();
    qp
}

fn poll(s: &mut Side) -> Cqe {
    s.g.poll_cq(&mut s.cq, T).expect("a completion")
}

/// A posts a UD SEND of `tag` to B's `qpn` and QP1's GMP to B's QP1;
/// returns both completions' statuses.
fn send_both(a: &mut Side, ud: &mut Qp, gsi: &mut Qp, qpn: u32, tag: u8) -> (u8, u8) {
    a.g.write(a.buf, &[tag; 256]);
    a.g.post_ud_send(
        ud,
        &ud_send_wqe(u64::from(tag), (a.buf, 64, a.lkey), 2, qpn, QKEY),
    );
    let ud_status = poll(a).status;
    let gmp = ud_send_wqe(u64::from(tag) + 1, (a.buf, 256, a.lkey), 2, 1, GSI_QKEY);
    a.g.post_ud_send(gsi, &gmp);
    (ud_status, poll(a).status)
}

#[test]
fn only_smps_leave_a_port_before_it_is_active() {
    let dir = TempDir::new("port-gating");
    let link = dir.join("ab.link");
    let sa = managed(1, LinkEndpoint::Listen(link.clone()));
    let sb = managed(2, LinkEndpoint::Connect(link));
    let o = PairOptions::default();
    let mut a = Side::new(&sa.socket, &o, ALL_ACCESS);
    let mut b = Side::new(&sb.socket, &o, ALL_ACCESS);
    for s in [&mut a, &mut b] {
        wait_state(s, regs::PORT_INIT);
    }
    let mut ud_a = datagram_qp(&mut a, QPT_UD, QKEY);
    let mut gsi_a = datagram_qp(&mut a, QPT_GSI, GSI_QKEY);
    let mut smi_a = datagram_qp(&mut a, QPT_SMI, 0);
    let mut ud_b = datagram_qp(&mut b, QPT_UD, QKEY);
    let mut gsi_b = datagram_qp(&mut b, QPT_GSI, GSI_QKEY);
    for (qp, wr_id) in [(&mut ud_b, 100), (&mut gsi_b, 101)] {
        b.g.post_recv(qp, &recv_wqe(wr_id, b.buf, 40 + 256, b.lkey));
    }
    b.g.client.read32(0, regs::MAGIC);

    // Init: data and GMPs refused with the status, nothing sent.
    let st = send_both(&mut a, &mut ud_a, &mut gsi_a, ud_b.qpn, 1);
    assert_eq!(st, (WC_PORT_INACTIVE_ERR, WC_PORT_INACTIVE_ERR), "Init");
    // QP0 goes out in Init: a directed SMP from A's QP0 to B's agent,
    // which answers (its answer is for A's SM, A's QP0).
    a.g.post_recv(&mut smi_a, &recv_wqe(50, a.buf + 4096, 40 + 256, a.lkey));
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    ibtca_protocol::mad::directed::begin(&mut smp).unwrap();
    a.g.write(a.buf, &smp.to_bytes());
    let mut w = ud_send_wqe(60, (a.buf, 256, a.lkey), 0xffff, 0, 0);
    w.sl = 0;
    a.g.post_ud_send(&mut smi_a, &w);
    let mut got = Vec::new();
    for _ in 0..2 {
        let c = poll(&mut a);
        got.push((c.wr_id.to_native(), c.status));
    }
    got.sort_unstable();
    assert_eq!(
        got,
        [(50, WC_SUCCESS), (60, WC_SUCCESS)],
        "QP0 works in Init"
    );
    let answer = Smp::parse(&a.g.read(a.buf + 4096 + 40, 256)).unwrap();
    assert_eq!(NodeInfo::decode(&answer.data).node_guid, GUID_B);

    // Armed: still no data out (B could take it now).
    set_port(&mut a, 1, PortState::Armed);
    set_port(&mut b, 2, PortState::Armed);
    wait_state(&mut a, regs::PORT_ARMED);
    let st = send_both(&mut a, &mut ud_a, &mut gsi_a, ud_b.qpn, 2);
    assert_eq!(st, (WC_PORT_INACTIVE_ERR, WC_PORT_INACTIVE_ERR), "Armed");

    // Active: the same datagrams land, the UD one first.
    set_port(&mut a, 1, PortState::Active);
    set_port(&mut b, 2, PortState::Active);
    wait_state(&mut a, regs::PORT_ACTIVE);
    let st = send_both(&mut a, &mut ud_a, &mut gsi_a, ud_b.qpn, 3);
    assert_eq!(st, (WC_SUCCESS, WC_SUCCESS), "Active");
    let mut landed = Vec::new();
    for _ in 0..2 {
        let c = poll(&mut b);
        landed.push((c.wr_id.to_native(), c.status, c.slid.to_native()));
    }
    landed.sort_unstable();
    assert_eq!(landed, [(100, WC_SUCCESS, 1), (101, WC_SUCCESS, 1)]);
    drop((a, b));
    let stats = sa.stop_engine();
    assert_eq!(stats.ud.tx_port_inactive, 4, "two UD and two QP1 refusals");
    assert_eq!(
        stats.tx_port_inactive, 0,
        "no data packet even reached the outbox"
    );
    let stats = sb.stop_engine();
    assert_eq!(
        stats.rx_port_init, 0,
        "nothing reached B before it was Active"
    );
}
