//! Partitions and Q_Keys between two device instances on a link (no VM),
//! each guest setting its port's P_Key table through its own agent as a
//! local SM does: a UD datagram lands only where both the port's table
//! and the destination QP's entry hold its P_Key (two limited members
//! cannot talk), an RC QP takes only its own partition's packets; every
//! refusal is counted (`rx_bad_pkey`, PortInfo P_KeyViolations) and
//! reported to the SM as trap 257; a table the SM changes is an event to
//! the guest (EVENT_PKEY_CHANGE); a controlled Q_Key goes out only as the
//! sending QP's own.

use std::time::Duration;

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_protocol::mad::attr::{id, trap, KeyViolation, Notice};
use ibtca_protocol::mad::{method, Smp};
use ibtca_tests::datagram::ud_send_wqe;
use ibtca_tests::pair::{LinkedPair, PairOptions, Side};
use ibtca_tests::qp_retry::Retry;
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe, Qp};
use ibtca_tests::wait_eventfd;
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(20);
const QKEY: u32 = 0x1234_5678;

/// A's table: the default partition, full 0x0001, limited 0x0002.
const A_KEYS: [u16; 3] = [0xffff, 0x8001, 0x0002];
/// B's table: the default partition, limited 0x0001, limited 0x0002,
/// full 0x0003.
const B_KEYS: [u16; 4] = [0xffff, 0x0001, 0x0002, 0x8003];

fn pair(o: PairOptions) -> LinkedPair {
    let mut p = LinkedPair::start(o);
    p.a.set_pkeys(&A_KEYS);
    p.b.set_pkeys(&B_KEYS);
    p
}

/// A UD QP on side `s` at P_Key index `index`, in RTS.
fn ud_qp(s: &mut Side, index: u16, qkey: u32) -> Qp {
    let qp = s.g.create_datagram_qp(s.pd, &s.cq, 6, QPT_UD).unwrap();
    s.g.pkey_index = index;
    s.g.datagram_ready(&qp, qkey).unwrap();
    s.g.pkey_index = 0;
    qp
}

/// Where a receive of `wr_id` lands in a side's buffer (past what
/// `own_agent` uses).
fn recv_at(wr_id: u64) -> u64 {
    0x10000 + wr_id * 4096
}

/// Posts a receive of 40 + 64 bytes at [`recv_at`]; the device has taken
/// it when this returns.
fn post_recv(s: &mut Side, qp: &mut Qp, wr_id: u64) {
    let r = recv_wqe(wr_id, s.buf + recv_at(wr_id), 40 + 64, s.lkey);
    s.g.post_recv(qp, &r);
    s.g.client.read32(0, regs::MAGIC);
}

/// Side `a` sends 64 bytes of `tag` from `qp` to QP `dest` at `dlid` (the
/// pair's A is LID 1, B LID 2) with Q_Key `qkey`; the send completes (UD
/// has no ACK, landed or not).
fn send(a: &mut Side, qp: &mut Qp, (dlid, dest): (u16, u32), qkey: u32, tag: u8) {
    let off = u64::from(tag) * 64;
    a.g.write(a.buf + off, &[tag; 64]);
    let w = ud_send_wqe(u64::from(tag), (a.buf + off, 64, a.lkey), dlid, dest, qkey);
    a.g.post_ud_send(qp, &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("A's send completion");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (u64::from(tag), WC_SUCCESS)
    );
}

/// B's next receive completion: its wr_id and the first payload byte.
fn landed(b: &mut Side) -> (u64, u8) {
    let r = b.g.poll_cq(&mut b.cq, T).expect("B's receive completion");
    assert_eq!(r.status, WC_SUCCESS);
    let wr_id = r.wr_id.to_native();
    (wr_id, b.g.read(b.buf + recv_at(wr_id) + 40, 1)[0])
}

#[test]
fn datagrams_land_only_where_the_port_and_the_qps_entry_hold_their_p_key() {
    let mut p = pair(PairOptions::default());
    let mut a1 = ud_qp(&mut p.a, 1, QKEY); // full 0x0001
    let mut a2 = ud_qp(&mut p.a, 2, QKEY); // limited 0x0002
    let mut b0 = ud_qp(&mut p.b, 0, QKEY); // the default partition
    let mut b1 = ud_qp(&mut p.b, 1, QKEY); // limited 0x0001
    let mut b2 = ud_qp(&mut p.b, 2, QKEY); // limited 0x0002
    for (qp, wr_id) in [(&mut b0, 1), (&mut b1, 2), (&mut b2, 3)] {
        post_recv(&mut p.b, qp, wr_id);
    }
    // Two limited members of 0x0002: B's port refuses the packet.
    send(&mut p.a, &mut a2, (2, b2.qpn), QKEY, 0x21);
    // Full 0x0001 to B's port (limited 0x0001: let in) but to a QP of
    // the default partition: the QP's entry refuses it.
    send(&mut p.a, &mut a1, (2, b0.qpn), QKEY, 0x22);
    // Full 0x0001 to a limited member's QP: lands.
    send(&mut p.a, &mut a1, (2, b1.qpn), QKEY, 0x23);
    assert_eq!(landed(&mut p.b), (2, 0x23));
    assert!(
        p.b.g.try_poll_cq(&mut p.b.cq).is_none(),
        "nothing else landed"
    );
    assert_eq!(p.b.port_info().p_key_violations, 2);
    // The limited member answers the full one: B sends with P_Key 0x0001.
    post_recv(&mut p.a, &mut a1, 9);
    send(&mut p.b, &mut b1, (1, a1.qpn), QKEY, 0x24);
    assert_eq!(landed(&mut p.a), (9, 0x24));
    // The refused datagrams never touched B's receives: b0's and b2's
    // are still posted and take the next right datagram each.
    let mut a0 = ud_qp(&mut p.a, 0, QKEY);
    send(&mut p.a, &mut a0, (2, b0.qpn), QKEY, 0x25);
    assert_eq!(landed(&mut p.b), (1, 0x25));
    let (_a, _b, (_sa, sb), _dir) = p.into_parts();
    let stats = sb.stop_engine();
    assert_eq!(stats.rx_bad_pkey, 2, "both refusals counted");
    assert_eq!(stats.ud.transport.delivered, 2);
}

/// A pair whose RC QPs sit at P_Key indices `a` (A's) and `b` (B's),
/// connected, A's WRITE of 256 bytes of `byte` into B's buffer posted
/// (`wr_id`).
fn rc_write(a: u16, b: u16, wr_id: u64, byte: u8) -> LinkedPair {
    let mut p = pair(PairOptions {
        retry: Retry::PROMPT,
        ..PairOptions::default()
    });
    (p.a.g.pkey_index, p.b.g.pkey_index) = (a, b);
    p.connect(MTU_4096);
    p.a.g.write(p.a.buf, &[byte; 256]);
    let w = send_wqe(WR_RDMA_WRITE, wr_id, p.a.buf, 256, p.a.lkey);
    p.a.g.post_send(&mut p.a.qp, &remote(w, p.b.buf, p.b.rkey));
    p
}

#[test]
fn an_rc_qp_takes_only_packets_of_its_own_partition() {
    // A at full 0x0001 and B at limited 0x0001: the WRITE lands.
    let mut p = rc_write(1, 1, 1, 0x5a);
    p.a.expect_completion(1, WC_SUCCESS, T);
    assert_eq!(p.b.g.read(p.b.buf, 256), vec![0x5a; 256]);
    assert_eq!(p.b.port_info().p_key_violations, 0);
    // B's QP at full 0x0003: B's port lets 0x8001 in (its limited
    // 0x0001), B's QP does not. The WRITE never lands; A gives up.
    let mut p = rc_write(1, 3, 2, 0x5b);
    p.a.expect_completion(2, WC_RETRY_EXC_ERR, T);
    assert_eq!(p.b.g.read(p.b.buf, 256), vec![0; 256], "nothing landed");
    assert!(p.b.port_info().p_key_violations >= 1);
    let (_a, _b, (_sa, sb), _dir) = p.into_parts();
    assert!(sb.stop_engine().rx_bad_pkey >= 1, "B counted the refusals");
}

#[test]
fn a_refused_packet_is_trap_257_to_the_sm() {
    let mut p = pair(PairOptions::default());
    // A's guest is B's SM: B's MasterSMLID is A's LID.
    let mut info = p.b.port_info();
    (info.master_sm_lid, info.port_state) = (1, 0);
    assert_eq!(p.b.set_port_info(&info).master_sm_lid, 1);
    let mut smi =
        p.a.g
            .create_datagram_qp(p.a.pd, &p.a.cq, 4, QPT_SMI)
            .unwrap();
    p.a.g.datagram_ready(&smi, 0).unwrap();
    let r = recv_wqe(70, p.a.buf + recv_at(70), 40 + 256, p.a.lkey);
    p.a.g.post_recv(&mut smi, &r);
    p.a.g.client.read32(0, regs::MAGIC);
    let mut a2 = ud_qp(&mut p.a, 2, QKEY);
    send(&mut p.a, &mut a2, (2, 0x77), QKEY, 0x31);
    let r = p.a.g.poll_cq(&mut p.a.cq, T).expect("the trap at A's QP0");
    assert_eq!((r.wr_id.to_native(), r.status), (70, WC_SUCCESS));
    let smp = Smp::parse(&p.a.g.read(p.a.buf + recv_at(70) + 40, 256)).unwrap();
    assert_eq!((smp.method, smp.attr_id), (method::TRAP, id::NOTICE));
    let n = Notice::decode(&smp.data);
    assert_eq!((n.trap_number, n.issuer_lid), (trap::BAD_P_KEY, 2));
    let want = KeyViolation {
        slid: 1,
        dlid: 2,
        key: 0x0002,
        src_qp: a2.qpn,
        dest_qp: 0x77,
        ..KeyViolation::default()
    };
    assert_eq!(n.key_violation(), want);
}

#[test]
fn a_controlled_q_key_goes_out_only_as_the_sending_qps_own() {
    const CONTROLLED: u32 = 0x8000_0042;
    let mut p = pair(PairOptions::default());
    // B's QP holds a controlled Q_Key (its privileged owner set it).
    let mut b = ud_qp(&mut p.b, 0, CONTROLLED);
    post_recv(&mut p.b, &mut b, 1);
    // A QP with an ordinary Q_Key names the controlled one in its work
    // request: its own goes out, and B drops it.
    let mut plain = ud_qp(&mut p.a, 0, QKEY);
    send(&mut p.a, &mut plain, (2, b.qpn), CONTROLLED, 0x41);
    // A QP that holds the controlled Q_Key sends it (bit 31 in the work
    // request: the QP's own): lands.
    let mut owner = ud_qp(&mut p.a, 0, CONTROLLED);
    send(&mut p.a, &mut owner, (2, b.qpn), 0x8000_0000, 0x42);
    assert_eq!(landed(&mut p.b), (1, 0x42));
    // Nor does a UD QP send QP1's controlled Q_Key: no forged GMPs.
    let mut gsi =
        p.b.g
            .create_datagram_qp(p.b.pd, &p.b.cq, 4, QPT_GSI)
            .unwrap();
    p.b.g.datagram_ready(&gsi, GSI_QKEY).unwrap();
    post_recv(&mut p.b, &mut gsi, 2);
    send(&mut p.a, &mut plain, (2, 1), GSI_QKEY, 0x43);
    // A's QP1 sends the same GMP: it lands, and only it.
    let mut a_gsi =
        p.a.g
            .create_datagram_qp(p.a.pd, &p.a.cq, 4, QPT_GSI)
            .unwrap();
    p.a.g.datagram_ready(&a_gsi, GSI_QKEY).unwrap();
    send(&mut p.a, &mut a_gsi, (2, 1), GSI_QKEY, 0x44);
    assert_eq!(landed(&mut p.b), (2, 0x44));
    assert!(p.b.g.try_poll_cq(&mut p.b.cq).is_none());
    let (_a, _b, (_sa, sb), _dir) = p.into_parts();
    assert_eq!(sb.stop_engine().ud.transport.qkey_mismatch, 2);
}

#[test]
fn a_multicast_copy_reaches_only_the_attached_qps_of_its_partition() {
    const MLID: u16 = 0xc001;
    // IPoIB's IPv4 broadcast group of partition 0x8001.
    const MGID: [u8; 16] = [
        0xff, 0x12, 0x40, 0x1b, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
    ];
    let mut p = pair(PairOptions::default());
    let mut a0 = ud_qp(&mut p.a, 0, QKEY);
    let mut a1 = ud_qp(&mut p.a, 1, QKEY); // full 0x0001
    let mut b0 = ud_qp(&mut p.b, 0, QKEY); // the default partition
    let mut b1 = ud_qp(&mut p.b, 1, QKEY); // limited 0x0001
    for (qp, wr_id) in [(&mut b0, 1), (&mut b1, 2)] {
        let m = CmdMcast {
            qpn: qp.qpn.into(),
            mlid: MLID.into(),
            mgid: MGID,
            ..Default::default()
        };
        p.b.g.cmd(CMD_ATTACH_MCAST, m.as_slice()).unwrap();
        post_recv(&mut p.b, qp, wr_id);
    }
    p.a.g.write(p.a.buf, &[0x51; 64]);
    let mut w = ud_send_wqe(1, (p.a.buf, 64, p.a.lkey), MLID, 0xff_ffff, QKEY);
    (w.av_flags, w.hop_limit, w.dgid) = (UD_AV_F_GRH, 1, MGID);
    p.a.g.post_ud_send(&mut a1, &w);
    assert_eq!(p.a.g.poll_cq(&mut p.a.cq, T).unwrap().status, WC_SUCCESS);
    assert_eq!(landed(&mut p.b), (2, 0x51), "the partition's member");
    // b0's one receive is still posted: the next datagram for it lands.
    send(&mut p.a, &mut a0, (2, b0.qpn), QKEY, 0x52);
    assert_eq!(landed(&mut p.b), (1, 0x52), "b0 had no copy");
    let (_a, _b, (_sa, sb), _dir) = p.into_parts();
    assert_eq!(sb.stop_engine().rx_bad_pkey, 1, "b0's copy refused");
}

#[test]
fn a_p_key_table_the_sm_changes_is_an_event_to_the_guest() {
    let p = LinkedPair::start(PairOptions::default());
    let (mut a, _b, _servers, _dir) = p.into_parts();
    a.g.client.write32(0, regs::EVENT_VECTOR, 1);
    let pending = a.g.client.read32(0, regs::EVENT_CAUSE);
    a.g.client.write32(0, regs::EVENT_CAUSE, pending);
    while wait_eventfd(&a.g.cq_irq, Duration::from_millis(1)).is_some() {}
    a.set_pkeys(&A_KEYS);
    assert_eq!(
        a.g.client.read32(0, regs::EVENT_CAUSE),
        regs::EVENT_PKEY_CHANGE
    );
    assert!(
        wait_eventfd(&a.g.cq_irq, T).is_some(),
        "the event vector fired"
    );
    a.g.client
        .write32(0, regs::EVENT_CAUSE, regs::EVENT_PKEY_CHANGE);
    // The same table again changes nothing: no event.
    a.set_pkeys(&A_KEYS);
    assert_eq!(a.g.client.read32(0, regs::EVENT_CAUSE), 0);
    a.set_pkeys(&[0xffff]);
    assert_eq!(
        a.g.client.read32(0, regs::EVENT_CAUSE),
        regs::EVENT_PKEY_CHANGE
    );
}
