//! Multicast on UD QPs between two device instances on a link (no VM),
//! each driven by a simulated guest: a datagram to a multicast LID with a
//! GRH naming the group reaches every QP attached to the group on both
//! ports (the sender's own port included, the sending QP only when it is
//! attached) and no other; detach and QP destruction take a QP out; the
//! group and per-group QP caps are ENOMEM; the arguments are checked.
//!
//! Absence is shown without waiting for nothing: after the multicast a
//! unicast "marker" datagram goes to each QP that must not have a copy,
//! and its one posted receive must complete with the marker's bytes.

use std::time::Duration;

use ibtca_device::verbs::abi::*;
use ibtca_tests::datagram::ud_send_wqe;
use ibtca_tests::pair::{LinkedPair, PairOptions, Side};
use ibtca_tests::sim_guest::{recv_wqe, CmdFailed, Qp};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(20);
const QKEY: u32 = 0x0b1b_0000;
const MLID: u16 = 0xc001;
/// IPoIB's IPv4 broadcast group in the default partition.
const MGID: [u8; 16] = [
    0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
];
const MULTICAST_QPN: u32 = 0xff_ffff;
/// Bytes each QP's receive buffer takes in its side's buffer.
const SLOT: u64 = 4096;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29) ^ seed)
        .collect()
}

fn ud_qp(s: &mut Side) -> Qp {
    let qp = s.g.create_datagram_qp(s.pd, &s.cq, 4, QPT_UD).unwrap();
    s.g.datagram_ready(&qp, QKEY).unwrap();
    qp
}

fn mcast(s: &mut Side, op: u8, qpn: u32, mgid: [u8; 16], mlid: u16) -> Result<(), CmdFailed> {
    let p = CmdMcast {
        qpn: qpn.into(),
        mlid: mlid.into(),
        mgid,
        ..Default::default()
    };
    s.g.cmd(op, p.as_slice()).map(|_| ())
}

fn attach(s: &mut Side, qp: &Qp) {
    mcast(s, CMD_ATTACH_MCAST, qp.qpn, MGID, MLID).unwrap();
}

/// Posts one receive into slot `slot` of the side's buffer (wr_id = slot).
fn post_recv(s: &mut Side, qp: &mut Qp, slot: u64) {
    let r = recv_wqe(slot, s.buf + slot * SLOT, SLOT as u32, s.lkey);
    s.g.post_recv(qp, &r);
    // A non-posted read: the device has taken the doorbell before the
    // datagram arrives.
    s.g.client.read32(0, ibtca_device::regs::MAGIC);
}

/// A signaled multicast datagram of `msg` (at the start of A's buffer
/// area `at`) to the group, with its GRH.
fn send_multicast(s: &mut Side, qp: &mut Qp, wr_id: u64, at: u64, msg: &[u8]) {
    s.g.write(at, msg);
    let mut w = ud_send_wqe(
        wr_id,
        (at, msg.len() as u32, s.lkey),
        MLID,
        MULTICAST_QPN,
        QKEY,
    );
    w.av_flags = UD_AV_F_GRH;
    w.hop_limit = 1;
    w.dgid = MGID;
    s.g.post_ud_send(qp, &w);
}

/// Receive completions on the side's CQ until `n` have come (send
/// completions are checked successful and skipped), sorted by wr_id.
fn receives(s: &mut Side, n: usize) -> Vec<Cqe> {
    let mut got = Vec::new();
    while got.len() < n {
        let c = s.g.poll_cq(&mut s.cq, T).expect("a completion");
        if c.opcode == WC_SEND {
            assert_eq!(c.status, WC_SUCCESS, "send {}", c.wr_id.to_native());
            continue;
        }
        got.push(c);
    }
    got.sort_by_key(|c| c.wr_id.to_native());
    got
}

/// A unicast marker datagram from `from` (on A) to each of `to` (QP
/// number, its side's LID), each of which must take it into its one
/// posted receive: proof that no multicast copy took that receive first.
fn markers(p: &mut LinkedPair, from: &mut Qp, to: &[(u32, u16)], seed: u8) {
    let msg = pattern(64, seed);
    let at = p.a.buf + 60 * SLOT;
    p.a.g.write(at, &msg);
    for (i, &(qpn, dlid)) in to.iter().enumerate() {
        let w = ud_send_wqe(900 + i as u64, (at, 64, p.a.lkey), dlid, qpn, QKEY);
        p.a.g.post_ud_send(from, &w);
    }
}

fn check_marker(s: &Side, c: &Cqe, qpn: u32, seed: u8) {
    assert_eq!((c.qpn.to_native(), c.status), (qpn, WC_SUCCESS));
    assert_eq!(c.flags & CQE_F_GRH, 0, "QP {qpn}: the marker, not a copy");
    let slot = c.wr_id.to_native();
    assert_eq!(s.g.read(s.buf + slot * SLOT + 40, 64), pattern(64, seed));
}

#[test]
fn a_multicast_datagram_reaches_every_attached_qp_on_both_ports_and_no_other() {
    let mut p = LinkedPair::start(PairOptions::default());
    // A: the sender (not attached), one attached QP, one never attached.
    let mut sender = ud_qp(&mut p.a);
    let mut a_in = ud_qp(&mut p.a);
    let mut a_out = ud_qp(&mut p.a);
    // B: two attached QPs, one attached and detached again.
    let mut b_in1 = ud_qp(&mut p.b);
    let mut b_in2 = ud_qp(&mut p.b);
    let mut b_out = ud_qp(&mut p.b);
    attach(&mut p.a, &a_in);
    attach(&mut p.b, &b_in1);
    attach(&mut p.b, &b_in2);
    attach(&mut p.b, &b_out);
    attach(&mut p.b, &b_out); // twice: a no-op
    mcast(&mut p.b, CMD_DETACH_MCAST, b_out.qpn, MGID, MLID).unwrap();
    post_recv(&mut p.a, &mut sender, 1);
    post_recv(&mut p.a, &mut a_in, 2);
    post_recv(&mut p.a, &mut a_out, 3);
    post_recv(&mut p.b, &mut b_in1, 1);
    post_recv(&mut p.b, &mut b_in2, 2);
    post_recv(&mut p.b, &mut b_out, 3);

    let msg = pattern(2044, 7);
    let at = p.a.buf + 50 * SLOT;
    send_multicast(&mut p.a, &mut sender, 77, at, &msg);
    let mut sgid = vec![0xfe, 0x80, 0, 0, 0, 0, 0, 0];
    sgid.extend_from_slice(&0x1200_0000_0000_00a1u64.to_be_bytes());
    for (side, want) in [
        (&mut p.a, vec![(2, a_in.qpn)]),
        (&mut p.b, vec![(1, b_in1.qpn), (2, b_in2.qpn)]),
    ] {
        let got = receives(side, want.len());
        for (c, (slot, qpn)) in got.iter().zip(want) {
            assert_eq!(
                (c.wr_id.to_native(), c.qpn.to_native(), c.status),
                (slot, qpn, WC_SUCCESS)
            );
            assert_eq!(c.flags & CQE_F_GRH, CQE_F_GRH, "the GRH is reported");
            assert_eq!(c.byte_len.to_native(), 40 + 2044);
            assert_eq!((c.src_qp.to_native(), c.slid.to_native()), (sender.qpn, 1));
            let base = side.buf + slot * SLOT;
            let grh = side.g.read(base, 40);
            assert_eq!(&grh[8..24], &sgid[..], "SGID: A's port");
            assert_eq!(&grh[24..40], &MGID[..], "DGID: the group");
            assert_eq!(side.g.read(base + 40, 2044), msg, "QP {qpn}: the bytes");
        }
    }
    // The sender, A's unattached QP and B's detached one got no copy.
    let (b_lid, a_lid) = (2, 1);
    let to = [(sender.qpn, a_lid), (a_out.qpn, a_lid), (b_out.qpn, b_lid)];
    markers(&mut p, &mut sender, &to, 9);
    let a_got = receives(&mut p.a, 2);
    check_marker(&p.a, &a_got[0], sender.qpn, 9);
    check_marker(&p.a, &a_got[1], a_out.qpn, 9);
    let b_got = receives(&mut p.b, 1);
    check_marker(&p.b, &b_got[0], b_out.qpn, 9);

    // Attached, the sending QP gets its own datagram (IBA 10.5.2.3: every
    // attached QP of the port), and a Q_Key mismatch is dropped at the QP.
    attach(&mut p.a, &sender);
    post_recv(&mut p.a, &mut sender, 4);
    post_recv(&mut p.a, &mut a_in, 5);
    send_multicast(&mut p.a, &mut sender, 78, at, &pattern(100, 3));
    let got = receives(&mut p.a, 2);
    assert_eq!(
        got.iter()
            .map(|c| (c.wr_id.to_native(), c.qpn.to_native(), c.flags & CQE_F_GRH))
            .collect::<Vec<_>>(),
        [(4, sender.qpn, CQE_F_GRH), (5, a_in.qpn, CQE_F_GRH)]
    );
    // B's two QPs took the second copy too (their receives were used up,
    // so it was counted as no_recv there); a marker behind it on the link
    // settles B's counts.
    post_recv(&mut p.b, &mut b_out, 4);
    markers(&mut p, &mut sender, &[(b_out.qpn, b_lid)], 11);
    let b_got = receives(&mut p.b, 1);
    check_marker(&p.b, &b_got[0], b_out.qpn, 11);
    let (_a, _b, (sa, sb), _dir) = p.into_parts();
    let (ea, eb) = (sa.stop_engine(), sb.stop_engine());
    assert_eq!((ea.multicast.delivered, ea.multicast.copies), (2, 3));
    assert_eq!((eb.multicast.delivered, eb.multicast.copies), (2, 4));
    assert_eq!(eb.ud.transport.no_recv, 2);
}

#[test]
fn detach_and_destroy_take_a_qp_out_and_sends_without_grh_are_refused() {
    let mut p = LinkedPair::start(PairOptions::default());
    let mut sender = ud_qp(&mut p.a);
    let mut b1 = ud_qp(&mut p.b);
    let b2 = ud_qp(&mut p.b);
    attach(&mut p.b, &b1);
    attach(&mut p.b, &b2);
    // B2 destroyed: it leaves the group; B1 detached: the group is gone.
    p.b.g
        .cmd(
            CMD_DESTROY_QP,
            CmdHandle {
                handle: b2.qpn.into(),
                ..Default::default()
            }
            .as_slice(),
        )
        .unwrap();
    mcast(&mut p.b, CMD_DETACH_MCAST, b1.qpn, MGID, MLID).unwrap();
    assert_eq!(
        mcast(&mut p.b, CMD_DETACH_MCAST, b1.qpn, MGID, MLID),
        Err(CmdFailed(22)),
        "not attached: EINVAL"
    );
    post_recv(&mut p.b, &mut b1, 1);
    let at = p.a.buf + 50 * SLOT;
    send_multicast(&mut p.a, &mut sender, 1, at, &pattern(64, 1));
    // Without a GRH a multicast datagram cannot name its group.
    let mut w = ud_send_wqe(2, (at, 64, p.a.lkey), MLID, MULTICAST_QPN, QKEY);
    w.av_flags = 0;
    p.a.g.post_ud_send(&mut sender, &w);
    let c1 = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
    let c2 = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
    assert_eq!(
        (
            c1.wr_id.to_native(),
            c1.status,
            c2.wr_id.to_native(),
            c2.status
        ),
        (1, WC_SUCCESS, 2, WC_LOC_QP_OP_ERR)
    );
    p.a.g.datagram_resume(&sender).unwrap(); // out of SQE
    markers(&mut p, &mut sender, &[(b1.qpn, 2)], 5);
    let got = receives(&mut p.b, 1);
    check_marker(&p.b, &got[0], b1.qpn, 5);
    let (_a, _b, (sa, sb), _dir) = p.into_parts();
    let (ea, eb) = (sa.stop_engine(), sb.stop_engine());
    assert_eq!(eb.multicast.no_group, 1, "B: the group had no QP left");
    assert_eq!(eb.multicast.copies, 0);
    assert_eq!(ea.ud.transport.sent, 2, "the multicast and the marker");
}

#[test]
fn the_group_and_per_group_qp_caps_are_enomem_and_bad_arguments_einval() {
    let mut p = LinkedPair::start(PairOptions::default());
    let s = &mut p.a;
    let qp = ud_qp(s);
    let mgid = |n: u32| {
        let mut g = MGID;
        g[12..].copy_from_slice(&n.to_be_bytes());
        g
    };
    for n in 0..MAX_MCAST_GROUPS {
        mcast(s, CMD_ATTACH_MCAST, qp.qpn, mgid(n), MLID).unwrap();
    }
    let over = mcast(s, CMD_ATTACH_MCAST, qp.qpn, mgid(MAX_MCAST_GROUPS), MLID);
    assert_eq!(over, Err(CmdFailed(12)), "group cap: ENOMEM");
    // Group 0 takes QPs up to its own cap (it has `qp` already).
    for _ in 1..MAX_MCAST_QPS {
        let q = s.g.create_datagram_qp(s.pd, &s.cq, 1, QPT_UD).unwrap();
        mcast(s, CMD_ATTACH_MCAST, q.qpn, mgid(0), MLID).unwrap();
    }
    let q = s.g.create_datagram_qp(s.pd, &s.cq, 1, QPT_UD).unwrap();
    let over = mcast(s, CMD_ATTACH_MCAST, q.qpn, mgid(0), MLID);
    assert_eq!(over, Err(CmdFailed(12)), "per-group QP cap: ENOMEM");
    // Detached from one group, `qp` makes room for a new group.
    mcast(s, CMD_DETACH_MCAST, qp.qpn, mgid(1), MLID).unwrap();
    mcast(s, CMD_ATTACH_MCAST, q.qpn, mgid(MAX_MCAST_GROUPS), MLID).unwrap();

    let rc = s.qp.qpn;
    let einval = Err(CmdFailed(22));
    assert_eq!(mcast(s, CMD_ATTACH_MCAST, rc, MGID, MLID), einval, "RC QP");
    assert_eq!(
        mcast(s, CMD_ATTACH_MCAST, q.qpn, MGID, 0xbfff),
        einval,
        "unicast LID"
    );
    assert_eq!(
        mcast(s, CMD_ATTACH_MCAST, q.qpn, MGID, 0xffff),
        einval,
        "permissive LID"
    );
    let mut unicast_gid = MGID;
    unicast_gid[0] = 0xfe;
    assert_eq!(
        mcast(s, CMD_ATTACH_MCAST, q.qpn, unicast_gid, MLID),
        einval,
        "unicast GID"
    );
    let raw = CmdMcast {
        qpn: q.qpn.into(),
        mlid: MLID.into(),
        mgid: MGID,
        rsvd: [1; 24],
        ..Default::default()
    };
    assert_eq!(
        s.g.cmd(CMD_ATTACH_MCAST, raw.as_slice()).map(|_| ()),
        einval,
        "reserved bytes"
    );
    assert_eq!(
        mcast(s, CMD_ATTACH_MCAST, 0x00ab_cdef, MGID, MLID),
        Err(CmdFailed(2)),
        "no QP"
    );
}
