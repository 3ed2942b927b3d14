//! The UD transport and the guest's QP0/QP1 between two device instances
//! on a link (no VM), each driven by a simulated guest: datagrams land
//! behind the 40-byte GRH area with their sender in the completion, a
//! wrong Q_Key is dropped and counted, oversize and SL 15 are refused
//! and move the QP to SQE (later sends flush, receives go on, MODIFY_QP to
//! RTS resumes it), GMPs reach the guest's QP1 and the SMPs the device's agent leaves for
//! the SM its QP0, and SMA_MAD hands an SMP to the port's own agent.

use std::time::Duration;

use ibtca_device::verbs::abi::*;
use ibtca_protocol::mad::attr::{cap, id, NodeInfo, PortInfo};
use ibtca_protocol::mad::{method, Smp, SmpRoute, MAD_LEN};
use ibtca_tests::datagram::ud_send_wqe;
use ibtca_tests::pair::{LinkedPair, PairOptions, Side};
use ibtca_tests::sim_guest::{recv_wqe, Qp, SimGuest};
use ibtca_tests::sm_client::SmClient;
use ibtca_tests::{TempDir, TestServer};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(20);
const QKEY: u32 = 0x1234_5678;
/// Node GUIDs of the pair's devices (`pair.rs`): 0x1200_0000_0000_00a0 + LID.
const GUID_A: u64 = 0x1200_0000_0000_00a1;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

/// A datagram QP of `qp_type` on side `s`, in RTS.
fn datagram_qp(s: &mut Side, qp_type: u8, qkey: u32) -> Qp {
    let qp = s.g.create_datagram_qp(s.pd, &s.cq, 6, qp_type).unwrap();
    s.g.datagram_ready(&qp, qkey).unwrap();
    qp
}

/// Posts a receive of `len` bytes at `off` into the side's buffer.
fn post_recv(s: &mut Side, qp: &mut Qp, wr_id: u64, off: u64, len: u32) {
    let r = recv_wqe(wr_id, s.buf + off, len, s.lkey);
    s.g.post_recv(qp, &r);
    // A non-posted read: the device has taken the doorbell before anything
    // the peer sends next arrives (a datagram finds the receive or is lost).
    s.g.client.read32(0, ibtca_device::regs::MAGIC);
}

fn poll(s: &mut Side) -> Cqe {
    s.g.poll_cq(&mut s.cq, T).expect("a completion")
}

#[test]
fn a_ud_send_lands_behind_the_grh_area_with_its_sender() {
    let mut p = LinkedPair::start(PairOptions::default());
    let mut qa = datagram_qp(&mut p.a, QPT_UD, QKEY);
    let mut qb = datagram_qp(&mut p.b, QPT_UD, QKEY);
    let msg = pattern(4096, 1);
    p.a.g.write(p.a.buf, &msg);
    post_recv(&mut p.b, &mut qb, 9, 0, 40 + 4096);
    let mut w = ud_send_wqe(5, (p.a.buf, 4096, p.a.lkey), 2, qb.qpn, QKEY);
    w.sl = 3;
    p.a.g.post_ud_send(&mut qa, &w);
    let c = poll(&mut p.a);
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.opcode),
        (5, WC_SUCCESS, WC_SEND)
    );
    let r = poll(&mut p.b);
    assert_eq!(
        (r.wr_id.to_native(), r.status, r.opcode),
        (9, WC_SUCCESS, WC_RECV)
    );
    assert_eq!(r.byte_len.to_native(), 40 + 4096, "the GRH area counts");
    assert_eq!(r.src_qp.to_native(), qa.qpn, "source QP");
    assert_eq!((r.slid.to_native(), r.sl), (1, 3), "A's LID and the SL");
    assert_eq!(r.qpn.to_native(), qb.qpn);
    assert_eq!(r.flags & CQE_F_GRH, 0, "no GRH was sent");
    assert_eq!(p.b.g.read(p.b.buf, 40), vec![0; 40], "area left alone");
    assert_eq!(p.b.g.read(p.b.buf + 40, 4096), msg, "bytes in B's memory");
}

#[test]
fn a_grh_lands_in_the_first_40_bytes_and_immediate_data_in_the_completion() {
    let mut p = LinkedPair::start(PairOptions::default());
    let mut qa = datagram_qp(&mut p.a, QPT_UD, QKEY);
    let mut qb = datagram_qp(&mut p.b, QPT_UD, QKEY);
    p.a.g.write(p.a.buf, &pattern(100, 2));
    post_recv(&mut p.b, &mut qb, 1, 0, 4096);
    // Q_Key with bit 31 set: the sending QP's own (QKEY) goes out.
    let mut w = ud_send_wqe(6, (p.a.buf, 100, p.a.lkey), 2, qb.qpn, 0x8000_0000);
    w.opcode = WR_UD_SEND_IMM;
    w.imm_data = 0xfeed_f00d.into();
    w.av_flags = UD_AV_F_GRH;
    w.hop_limit = 1;
    w.dgid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0xa2];
    p.a.g.post_ud_send(&mut qa, &w);
    assert_eq!(poll(&mut p.a).status, WC_SUCCESS);
    let r = poll(&mut p.b);
    assert_eq!(r.status, WC_SUCCESS);
    assert_eq!(r.flags & (CQE_F_GRH | CQE_F_IMM), CQE_F_GRH | CQE_F_IMM);
    assert_eq!(r.imm_data.to_native(), 0xfeed_f00d);
    let grh = p.b.g.read(p.b.buf, 40);
    assert_eq!(grh[0] >> 4, 6, "IPVer 6");
    assert_eq!(grh[6], 0x1b, "NxtHdr: IBA transport");
    assert_eq!(grh[7], 1, "hop limit");
    let mut sgid = vec![0xfe, 0x80, 0, 0, 0, 0, 0, 0];
    sgid.extend_from_slice(&GUID_A.to_be_bytes());
    assert_eq!(&grh[8..24], &sgid[..], "source GID: A's port");
    assert_eq!(&grh[24..40], &w.dgid[..]);
    assert_eq!(p.b.g.read(p.b.buf + 40, 100), pattern(100, 2));
}

#[test]
fn a_wrong_qkey_is_dropped_and_counted_and_oversize_and_sl15_refused() {
    let mut p = LinkedPair::start(PairOptions::default());
    let mut qa = datagram_qp(&mut p.a, QPT_UD, QKEY);
    let mut qb = datagram_qp(&mut p.b, QPT_UD, QKEY);
    p.a.g.write(p.a.buf, &pattern(8192, 3));
    post_recv(&mut p.b, &mut qb, 1, 0, 8192);
    let (buf, lkey, dqpn) = (p.a.buf, p.a.lkey, qb.qpn);
    let wrong = ud_send_wqe(1, (buf, 64, lkey), 2, dqpn, QKEY ^ 1);
    p.a.g.post_ud_send(&mut qa, &wrong);
    assert_eq!(poll(&mut p.a).status, WC_SUCCESS, "sent: UD has no ACK");
    // One byte over the 4096-byte MTU: refused at A, nothing sent.
    let big = ud_send_wqe(2, (buf, 4097, lkey), 2, dqpn, QKEY);
    p.a.g.post_ud_send(&mut qa, &big);
    let c = poll(&mut p.a);
    assert_eq!((c.wr_id.to_native(), c.status), (2, WC_LOC_LEN_ERR));
    p.a.g.datagram_resume(&qa).unwrap(); // out of SQE
    let mut sl15 = ud_send_wqe(3, (buf, 64, lkey), 2, dqpn, QKEY);
    sl15.sl = 15;
    p.a.g.post_ud_send(&mut qa, &sl15);
    let c = poll(&mut p.a);
    assert_eq!((c.wr_id.to_native(), c.status), (3, WC_LOC_QP_OP_ERR));
    p.a.g.datagram_resume(&qa).unwrap();
    // B's one receive is still there for the right Q_Key.
    let right = ud_send_wqe(4, (buf + 100, 64, lkey), 2, dqpn, QKEY);
    p.a.g.post_ud_send(&mut qa, &right);
    assert_eq!(poll(&mut p.a).status, WC_SUCCESS);
    let r = poll(&mut p.b);
    assert_eq!((r.wr_id.to_native(), r.status), (1, WC_SUCCESS));
    assert_eq!(p.b.g.read(p.b.buf + 40, 64), pattern(8192, 3)[100..164]);
    assert!(p.b.g.try_poll_cq(&mut p.b.cq).is_none(), "one receive only");
    let (_a, _b, (sa, sb), _dir) = p.into_parts();
    let (ea, eb) = (sa.stop_engine(), sb.stop_engine());
    assert_eq!(
        eb.ud.transport.qkey_mismatch, 1,
        "B counted the wrong Q_Key"
    );
    assert_eq!(eb.ud.transport.delivered, 1);
    assert_eq!(ea.ud.transport.sent, 2, "the refused ones never left");
}

#[test]
fn a_failed_ud_send_moves_the_qp_to_sqe_until_modify_brings_it_back_to_rts() {
    let mut p = LinkedPair::start(PairOptions::default());
    let mut qa = datagram_qp(&mut p.a, QPT_UD, QKEY);
    let mut qb = datagram_qp(&mut p.b, QPT_UD, QKEY);
    let (buf, lkey, dqpn) = (p.a.buf, p.a.lkey, qb.qpn);
    p.a.g.write(buf, &pattern(8192, 4));
    post_recv(&mut p.b, &mut qb, 1, 0, 8192);
    // One byte over the 4096-byte MTU (a local length error): the WQE
    // completes with its error, the QP enters SQE, the valid WQE behind it
    // is flushed and sends nothing.
    let big = ud_send_wqe(1, (buf, 4097, lkey), 2, dqpn, QKEY);
    let good = ud_send_wqe(2, (buf, 64, lkey), 2, dqpn, QKEY);
    p.a.g.post_ud_send(&mut qa, &big);
    p.a.g.post_ud_send(&mut qa, &good);
    let c = [poll(&mut p.a), poll(&mut p.a)];
    assert_eq!(
        c.map(|c| (c.wr_id.to_native(), c.status, c.opcode)),
        [(1, WC_LOC_LEN_ERR, WC_SEND), (2, WC_WR_FLUSH_ERR, WC_SEND)]
    );
    assert_eq!(p.a.g.qp_state(qa.qpn).unwrap(), QPS_SQE);
    // Only the device enters SQE; from it only RTS, ERR or RESET follow.
    for state in [QPS_SQE, QPS_RTR, QPS_INIT] {
        let m = CmdModifyQp {
            qpn: qa.qpn.into(),
            attr_mask: QP_ATTR_STATE.into(),
            state,
            ..Default::default()
        };
        assert_eq!(p.a.g.modify_qp(&m).unwrap_err().0, 22, "to {state}: EINVAL");
    }
    // A QP in SQE still receives: B's datagram lands in A's receive.
    p.b.g.write(p.b.buf + 8192, &pattern(100, 5));
    post_recv(&mut p.a, &mut qa, 7, 4096, 4096);
    let to_a = ud_send_wqe(8, (p.b.buf + 8192, 100, p.b.lkey), 1, qa.qpn, QKEY);
    p.b.g.post_ud_send(&mut qb, &to_a);
    assert_eq!(poll(&mut p.b).status, WC_SUCCESS);
    let r = poll(&mut p.a);
    assert_eq!((r.wr_id.to_native(), r.status), (7, WC_SUCCESS));
    assert_eq!(p.a.g.read(buf + 4096 + 40, 100), pattern(100, 5));
    // Back to RTS: the next send leaves and lands, bytes checked.
    p.a.g.datagram_resume(&qa).unwrap();
    assert_eq!(p.a.g.qp_state(qa.qpn).unwrap(), QPS_RTS);
    let again = ud_send_wqe(3, (buf + 200, 300, lkey), 2, dqpn, QKEY);
    p.a.g.post_ud_send(&mut qa, &again);
    let c = poll(&mut p.a);
    assert_eq!((c.wr_id.to_native(), c.status), (3, WC_SUCCESS));
    let r = poll(&mut p.b);
    assert_eq!((r.wr_id.to_native(), r.status), (1, WC_SUCCESS));
    assert_eq!(r.byte_len.to_native(), 40 + 300);
    assert_eq!(p.b.g.read(p.b.buf + 40, 300), pattern(8192, 4)[200..500]);
    assert!(p.b.g.try_poll_cq(&mut p.b.cq).is_none(), "nothing else");
    let (_a, _b, (sa, _sb), _dir) = p.into_parts();
    let ea = sa.stop_engine();
    assert_eq!(
        ea.ud.transport.sent, 1,
        "neither the failed nor the flushed WQE left"
    );
    assert_eq!(ea.ud.tx_send_queue_errors, 1);
    assert_eq!(ea.flushed_sends, 1);
}

#[test]
fn sl15_is_refused_for_rc_paths() {
    let mut p = LinkedPair::start(PairOptions::default());
    let m = CmdModifyQp {
        qpn: p.a.qp.qpn.into(),
        attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
        state: QPS_INIT,
        ..Default::default()
    };
    p.a.g.modify_qp(&m).unwrap();
    let rtr = CmdModifyQp {
        attr_mask: (QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN).into(),
        state: QPS_RTR,
        path_mtu: MTU_4096,
        dlid: 2.into(),
        sl: 15,
        dest_qpn: p.b.qp.qpn.into(),
        ..m
    };
    assert_eq!(p.a.g.modify_qp(&rtr).unwrap_err().0, 22, "EINVAL");
}

#[test]
fn gmps_reach_the_guests_qp1_with_its_qkey_only() {
    let mut p = LinkedPair::start(PairOptions::default());
    let mut ga = datagram_qp(&mut p.a, QPT_GSI, GSI_QKEY);
    let mut gb = datagram_qp(&mut p.b, QPT_GSI, GSI_QKEY);
    // A second QP1 on one port is refused.
    let again = p.b.g.create_datagram_qp(p.b.pd, &p.b.cq, 4, QPT_GSI);
    assert_eq!(again.err().map(|e| e.0), Some(16), "EBUSY");
    // QP1's Q_Key is fixed.
    let m = CmdModifyQp {
        qpn: gb.qpn.into(),
        attr_mask: QP_ATTR_QKEY.into(),
        access: 7.into(),
        ..Default::default()
    };
    assert_eq!(p.b.g.modify_qp(&m).unwrap_err().0, 22);
    // An SA-class GMP (class 0x03), 256 bytes.
    let mut gmp = vec![0u8; MAD_LEN];
    (gmp[0], gmp[1], gmp[2], gmp[3]) = (1, 0x03, 2, method::GET);
    p.a.g.write(p.a.buf, &gmp);
    post_recv(&mut p.b, &mut gb, 7, 0, 40 + 256);
    let bad = ud_send_wqe(1, (p.a.buf, 256, p.a.lkey), 2, 1, QKEY);
    p.a.g.post_ud_send(&mut ga, &bad);
    assert_eq!(poll(&mut p.a).status, WC_SUCCESS);
    let good = ud_send_wqe(2, (p.a.buf, 256, p.a.lkey), 2, 1, GSI_QKEY);
    p.a.g.post_ud_send(&mut ga, &good);
    assert_eq!(poll(&mut p.a).status, WC_SUCCESS);
    let r = poll(&mut p.b);
    assert_eq!((r.wr_id.to_native(), r.status), (7, WC_SUCCESS));
    assert_eq!(r.src_qp.to_native(), 1, "from QP1");
    assert_eq!(r.qpn.to_native(), gb.qpn, "B's QP1 object");
    assert_eq!(r.slid.to_native(), 1);
    assert_eq!(p.b.g.read(p.b.buf + 40, 256), gmp);
    let (_a, _b, (_sa, sb), _dir) = p.into_parts();
    assert_eq!(sb.stop_engine().ud.transport.qkey_mismatch, 1);
}

#[test]
fn smps_the_agent_leaves_for_the_sm_reach_qp0_and_its_answers_come_back() {
    let mut p = LinkedPair::start(PairOptions::default());
    let mut sa = datagram_qp(&mut p.a, QPT_SMI, 0);
    let mut sb = datagram_qp(&mut p.b, QPT_SMI, 0);
    post_recv(&mut p.a, &mut sa, 11, 0, 40 + 256);
    post_recv(&mut p.b, &mut sb, 12, 0, 40 + 256);
    // A's SM asks B's port for NodeInfo: B's agent answers, the answer
    // (a GetResp, for the SM) reaches A's QP0.
    let get = Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0);
    p.a.g.write(p.a.buf + 4096, &get.to_bytes());
    let w = ud_send_wqe(1, (p.a.buf + 4096, 256, p.a.lkey), 2, 0, 0);
    p.a.g.post_ud_send(&mut sa, &w);
    // Both completions (the send, the answer) land on A's one CQ.
    let mut got = [poll(&mut p.a), poll(&mut p.a)];
    got.sort_by_key(|c| c.opcode);
    assert_eq!((got[0].opcode, got[0].status), (WC_SEND, WC_SUCCESS));
    let r = got[1];
    assert_eq!((r.wr_id.to_native(), r.status), (11, WC_SUCCESS));
    assert_eq!((r.src_qp.to_native(), r.slid.to_native()), (0, 2));
    let answer = Smp::parse(&p.a.g.read(p.a.buf + 40, 256)).unwrap();
    assert_eq!(answer.method, method::GET_RESP);
    let info = NodeInfo::decode(&answer.data);
    assert_eq!(info.node_guid, GUID_A + 1, "B's node GUID");
    // SMInfo is the SM's: B's agent passes it on to B's QP0.
    let sminfo = Smp::new(SmpRoute::Lid, method::GET, id::SM_INFO, 0);
    p.a.g.write(p.a.buf + 8192, &sminfo.to_bytes());
    let w = ud_send_wqe(2, (p.a.buf + 8192, 256, p.a.lkey), 2, 0, 0);
    p.a.g.post_ud_send(&mut sa, &w);
    assert_eq!(poll(&mut p.a).status, WC_SUCCESS);
    let r = poll(&mut p.b);
    assert_eq!((r.wr_id.to_native(), r.status), (12, WC_SUCCESS));
    assert_eq!(r.sl, 0);
    assert_eq!(p.b.g.read(p.b.buf + 40, 256), sminfo.to_bytes().to_vec());
}

#[test]
fn sma_mad_hands_an_smp_to_the_ports_own_agent() {
    let mut p = LinkedPair::start(PairOptions::default());
    let g = &mut p.a.g;
    let (mad, reply) = (p.a.buf, p.a.buf + 4096);
    // A directed-route Get to the port itself, as the MAD layer hands it
    // over after its send-side step (hop count 0, hop pointer 1).
    let mut smp = Smp::new(SmpRoute::Directed, method::GET, id::NODE_INFO, 0);
    smp.hop_ptr = 1;
    smp.tid = 0x77;
    g.write(mad, &smp.to_bytes());
    let cmd = CmdMad {
        mad: mad.into(),
        reply: reply.into(),
        ..Default::default()
    };
    assert_eq!(g.cmd(CMD_SMA_MAD, cmd.as_slice()).unwrap().0, 1, "answered");
    let answer = Smp::parse(&g.read(reply, 256)).unwrap();
    assert_eq!((answer.method, answer.tid), (method::GET_RESP, 0x77));
    assert!(answer.direction, "on its way back");
    assert_eq!(NodeInfo::decode(&answer.data).node_guid, GUID_A);
    // LID-routed to its own LID too.
    let smp = Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0);
    g.write(mad, &smp.to_bytes());
    assert_eq!(g.cmd(CMD_SMA_MAD, cmd.as_slice()).unwrap().0, 1);
    // SMInfo: the agent gives no answer.
    let smp = Smp::new(SmpRoute::Lid, method::GET, id::SM_INFO, 0);
    g.write(mad, &smp.to_bytes());
    assert_eq!(g.cmd(CMD_SMA_MAD, cmd.as_slice()).unwrap().0, 0);
    // Unmapped memory and reserved bytes: errors, the device serves on.
    let far = CmdMad {
        mad: (1u64 << 40).into(),
        ..cmd
    };
    assert_eq!(g.cmd(CMD_SMA_MAD, far.as_slice()).unwrap_err().0, 14);
    let mut rsvd = cmd;
    rsvd.rsvd[0] = 1;
    assert_eq!(g.cmd(CMD_SMA_MAD, rsvd.as_slice()).unwrap_err().0, 22);
    assert_eq!(g.cmd(CMD_SMA_MAD, cmd.as_slice()).unwrap().0, 0);
}

/// A raw link peer sends a UD datagram on VL15 to a data QP: dropped and
/// counted (data never uses VL15, IBA 7.6.5); the same on VL0 lands.
#[test]
fn data_on_vl15_is_dropped_and_counted() {
    let dir = TempDir::new("ud-vl15");
    let path = dir.join("dev.link");
    let cfg = ibtca_device::instance::InstanceConfig {
        lid: 7,
        link: Some(ibtca_device::link::LinkEndpoint::Listen(path.clone())),
        ..Default::default()
    };
    let server = TestServer::start_instance(dir, cfg);
    let peer = SmClient::start(ibtca_device::link::LinkEndpoint::Connect(path), 1);
    let mut g = SimGuest::new(&server.socket, 4 << 20);
    let pd = g.create_pd();
    let buf = g.alloc(1 << 16, 4096);
    let (lkey, _) = g.reg_mr(pd, buf, 1 << 16, ACCESS_LOCAL_WRITE);
    let mut cq = g.create_cq(6);
    let mut qp = g.create_datagram_qp(pd, &cq, 4, QPT_UD).unwrap();
    g.datagram_ready(&qp, QKEY).unwrap();
    g.post_recv(&mut qp, &recv_wqe(1, buf, 4096, lkey));
    g.client.read32(0, ibtca_device::regs::MAGIC);
    for vl in [15, 0] {
        let mut p = ibtca_protocol::Packet::new(ibtca_protocol::Opcode::UdSendOnly);
        (p.lrh.vl, p.lrh.slid, p.lrh.dlid) = (vl, 1, 7);
        p.bth.dest_qp = qp.qpn;
        p.ext.deth = Some(ibtca_protocol::headers::Deth {
            qkey: QKEY,
            src_qp: 0x55,
        });
        p.payload = vec![vl + 1; 32];
        peer.link.send(p.build().unwrap()).unwrap();
    }
    let c = g.poll_cq(&mut cq, T).expect("the VL0 datagram");
    assert_eq!((c.status, c.src_qp.to_native()), (WC_SUCCESS, 0x55));
    assert_eq!(g.read(buf + 40, 32), vec![1; 32], "the VL0 one, not VL15's");
    drop(g);
    let stats = server.stop_engine();
    assert_eq!(stats.ud.rx_vl15_data, 1);
    assert_eq!(stats.ud.transport.delivered, 1);
}

/// The capability mask in the port's PortInfo as its own agent answers a
/// Get (SMA_MAD; the SMP and its answer in the side's buffer at `buf`).
fn port_info_caps(g: &mut SimGuest, buf: u64) -> u32 {
    let (mad, reply) = (buf, buf + 4096);
    let smp = Smp::new(SmpRoute::Lid, method::GET, id::PORT_INFO, 1);
    g.write(mad, &smp.to_bytes());
    let cmd = CmdMad {
        mad: mad.into(),
        reply: reply.into(),
        ..Default::default()
    };
    assert_eq!(g.cmd(CMD_SMA_MAD, cmd.as_slice()).unwrap().0, 1);
    PortInfo::decode(&Smp::parse(&g.read(reply, 256)).unwrap().data).capability_mask
}

/// QUERY_PORT's cap_mask (the driver's port_cap_flags).
fn query_caps(g: &mut SimGuest) -> u32 {
    let a: PortAttr = g.query(CMD_QUERY_PORT).unwrap();
    a.cap_mask.to_native()
}

/// SET_PORT_CAPS's parameters.
fn port_caps(set: u32, clear: u32) -> CmdPortCaps {
    CmdPortCaps {
        set: set.into(),
        clear: clear.into(),
        ..Default::default()
    }
}

/// The host's IsSM bit (the driver's modify_port for an SM in the guest)
/// shows in the port's PortInfo, as the SM's peers read it; other bits are
/// the device's and stay. QUERY_PORT's cap_mask (the driver's
/// port_cap_flags, what `ibstat` shows) is always that PortInfo's.
#[test]
fn set_port_caps_sets_is_sm_in_the_ports_port_info() {
    let mut p = LinkedPair::start(PairOptions::default());
    let buf = p.a.buf;
    let g = &mut p.a.g;
    let port_info = |g: &mut SimGuest| port_info_caps(g, buf);
    let before = port_info(g);
    assert_eq!(
        before,
        cap::IS_TRAP_SUPPORTED
            | cap::IS_SYSTEM_IMAGE_GUID_SUPPORTED
            | cap::IS_CM_SUPPORTED
            | cap::IS_CLIENT_REREGISTRATION_SUPPORTED,
        "a CA port's capabilities"
    );
    assert_eq!(query_caps(g), before);
    // IsSM, and a bit the host does not own (IsCM), which stays as it was.
    let c = port_caps(
        cap::IS_SM | cap::IS_SL_MAPPING_SUPPORTED,
        cap::IS_CM_SUPPORTED,
    );
    let out = g.cmd(CMD_SET_PORT_CAPS, c.as_slice()).unwrap().0;
    assert_eq!(out, before | cap::IS_SM);
    assert_eq!(port_info(g), before | cap::IS_SM);
    assert_eq!(query_caps(g), before | cap::IS_SM, "QUERY_PORT agrees");
    let c = port_caps(0, cap::IS_SM);
    assert_eq!(g.cmd(CMD_SET_PORT_CAPS, c.as_slice()).unwrap().0, before);
    assert_eq!(port_info(g), before);
    assert_eq!(query_caps(g), before);
    let mut bad = port_caps(cap::IS_SM, 0);
    bad.rsvd[3] = 1;
    assert_eq!(g.cmd(CMD_SET_PORT_CAPS, bad.as_slice()).unwrap_err().0, 22);
    assert_eq!(port_info(g), before, "a refused command changes nothing");
}

/// The host's IsDeviceManagementSupported bit (ib_srpt's modify_port when
/// it registers its Device Management agent) shows in the port's PortInfo
/// and QUERY_PORT, beside IsSM, until the host clears it: srp_daemon finds
/// SRP targets by this bit in the SA's PortInfoRecords.
#[test]
fn set_port_caps_sets_is_device_management_supported() {
    let mut p = LinkedPair::start(PairOptions::default());
    let buf = p.a.buf;
    let g = &mut p.a.g;
    let port_info = |g: &mut SimGuest| port_info_caps(g, buf);
    let dm = cap::IS_DEVICE_MANAGEMENT_SUPPORTED;
    let before = port_info(g);
    assert_eq!(before & dm, 0, "no Device Management agent yet");
    let c = port_caps(dm, 0);
    assert_eq!(
        g.cmd(CMD_SET_PORT_CAPS, c.as_slice()).unwrap().0,
        before | dm
    );
    assert_eq!(port_info(g), before | dm);
    assert_eq!(query_caps(g), before | dm, "QUERY_PORT agrees");
    // IsSM beside it, then IsSM alone cleared: the other bit stays.
    let c = port_caps(cap::IS_SM, 0);
    assert_eq!(
        g.cmd(CMD_SET_PORT_CAPS, c.as_slice()).unwrap().0,
        before | dm | cap::IS_SM
    );
    let c = port_caps(0, cap::IS_SM);
    assert_eq!(
        g.cmd(CMD_SET_PORT_CAPS, c.as_slice()).unwrap().0,
        before | dm
    );
    let c = port_caps(0, dm);
    assert_eq!(g.cmd(CMD_SET_PORT_CAPS, c.as_slice()).unwrap().0, before);
    assert_eq!(port_info(g), before);
    assert_eq!(query_caps(g), before);
}

/// A send queue of 3000 datagrams rung at once, looped back to the
/// device's own LID (the device flushes them in runs, never holding the
/// whole queue): every one lands, in order, byte for byte.
#[test]
fn a_long_send_queue_of_datagrams_to_the_own_lid_lands_in_order() {
    const N: u64 = 3000;
    let mut p = LinkedPair::start(PairOptions {
        cq_log: 13,
        ..Default::default()
    });
    let s = &mut p.a;
    let mut tx = s.g.create_datagram_qp(s.pd, &s.cq, 12, QPT_UD).unwrap();
    let mut rx = s.g.create_datagram_qp(s.pd, &s.cq, 12, QPT_UD).unwrap();
    s.g.datagram_ready(&tx, QKEY).unwrap();
    s.g.datagram_ready(&rx, QKEY).unwrap();
    let data = pattern(256, 9);
    s.g.write(s.buf, &data);
    let recvs: Vec<_> = (0..N)
        .map(|i| recv_wqe(i, s.buf + 4096 + 300 * i, 296, s.lkey))
        .collect();
    s.g.post_recv_batch(&mut rx, &recvs);
    s.g.client.read32(0, ibtca_device::regs::MAGIC);
    let sends: Vec<_> = (0..N)
        .map(|i| {
            let mut w = ud_send_wqe(i, (s.buf + i % 40, 256, s.lkey), 1, rx.qpn, QKEY);
            w.flags = 0; // unsignaled: only the receives complete
            let mut raw = SendWqe::default();
            raw.as_mut_slice().copy_from_slice(w.as_slice());
            raw
        })
        .collect();
    s.g.post_send_batch(&mut tx, &sends);
    for i in 0..N {
        let c =
            s.g.poll_cq(&mut s.cq, T)
                .unwrap_or_else(|| panic!("receive {i}"));
        assert_eq!((c.wr_id.to_native(), c.status), (i, WC_SUCCESS), "in order");
        let at = s.buf + 4096 + 300 * i + 40;
        let off = (i % 40) as usize;
        let want: Vec<u8> = (0..256)
            .map(|k| data.get(off + k).copied().unwrap_or(0))
            .collect();
        assert_eq!(s.g.read(at, 256), want, "datagram {i}");
    }
}
