//! The UD transport against the mock environment: packets as the wire
//! carries them, landings byte for byte, every refusal.

use ibtca_protocol::headers::Grh;
use ibtca_protocol::opcode::Opcode;
use ibtca_protocol::PacketView;

use super::*;
use crate::mock::{MockEnv, ALL_ACCESS};
use ibtca_abi::verbs::{Sge, GSI_QKEY, WC_LOC_LEN_ERR, WC_LOC_QP_OP_ERR};

const KEY: u32 = 0x100;
const VA: u64 = 0x10_000;

fn cfg(qp_type: QpType) -> UdConfig {
    UdConfig {
        qpn: 0x401,
        qp_type,
        qkey: 0x1111_2222,
        pkey: 0xffff,
        slid: 5,
        sgid: port_gid(0x1200_0000_0000_0001),
        mtu: 1024,
    }
}

fn env() -> MockEnv {
    let mut e = MockEnv::new();
    e.reg(KEY, VA, 8192, ALL_ACCESS);
    e
}

fn sge(off: u64, len: u32) -> Sge {
    Sge {
        addr: (VA + off).into(),
        length: len.into(),
        lkey: KEY.into(),
    }
}

fn wqe(len: u32) -> UdSendWqe {
    let mut w = UdSendWqe {
        wr_id: 77.into(),
        opcode: WR_UD_SEND,
        flags: WQE_F_SIGNALED,
        num_sge: 1,
        dlid: 9.into(),
        sl: 3,
        dest_qpn: 0x555.into(),
        qkey: 0x1234_5678.into(),
        ..UdSendWqe::default()
    };
    w.sge[0] = sge(0, len);
    w
}

#[test]
fn a_send_is_one_ud_packet_with_deth_and_completes() {
    let (c, mut e) = (cfg(QpType::Ud), env());
    e.bytes_mut(KEY)[..100].copy_from_slice(&[0xab; 100]);
    let mut w = wqe(100);
    w.opcode = WR_UD_SEND_IMM;
    w.imm_data = 0xdead_beef.into();
    assert_eq!(send(&c, &w, 42, &mut e), Ok(()));
    let out = e.take_outbox();
    let v = PacketView::parse(&out[0]).expect("a valid packet");
    assert_eq!(v.opcode(), Opcode::UdSendOnlyImm);
    assert_eq!((v.lrh.dlid, v.lrh.slid, v.lrh.sl), (9, 5, 3));
    assert_eq!((v.bth.dest_qp, v.bth.psn), (0x555, 42));
    let deth = v.ext.deth.expect("DETH");
    assert_eq!((deth.qkey, deth.src_qp), (0x1234_5678, 0x401));
    assert_eq!(v.ext.immdt.map(|i| i.data), Some(0xdead_beef));
    assert_eq!(v.payload, &[0xab; 100][..]);
    assert!(v.grh.is_none());
    let cqe = e.send_cq[0];
    assert_eq!((cqe.wr_id.to_native(), cqe.status), (77, WC_SUCCESS));
}

#[test]
fn a_qkey_with_the_high_bit_means_the_qps_own_and_qp1_sends_as_qp1() {
    let mut e = env();
    let sent_qkey = |c: &UdConfig, wqe_qkey: u32, e: &mut MockEnv| {
        let mut w = wqe(8);
        w.qkey = wqe_qkey.into();
        send(c, &w, 0, e).unwrap();
        let p = e.take_outbox();
        let deth = PacketView::parse(&p[0]).unwrap().ext.deth.unwrap();
        (deth.qkey, deth.src_qp)
    };
    let ud = cfg(QpType::Ud);
    assert_eq!(sent_qkey(&ud, 0x8000_0000, &mut e).0, 0x1111_2222);
    assert_eq!(sent_qkey(&ud, 0x7fff_ffff, &mut e).0, 0x7fff_ffff);
    // A UD QP cannot send QP1's controlled Q_Key (no forged GMPs).
    assert_eq!(sent_qkey(&ud, GSI_QKEY, &mut e).0, 0x1111_2222);
    // QP1's own Q_Key is the well-known one its GMPs carry.
    let gsi = UdConfig {
        qkey: GSI_QKEY,
        ..cfg(QpType::Gsi)
    };
    assert_eq!(sent_qkey(&gsi, GSI_QKEY, &mut e), (GSI_QKEY, 1));
    assert_eq!(sent_qkey(&gsi, 0x8000_0000, &mut e), (GSI_QKEY, 1));
}

#[test]
fn datagrams_carry_the_qps_pkey_but_qp0_the_default() {
    let mut e = env();
    for (t, want) in [
        (QpType::Ud, 0x8005),
        (QpType::Gsi, 0x8005),
        (QpType::Smi, 0xffff),
    ] {
        let c = UdConfig {
            pkey: 0x8005,
            ..cfg(t)
        };
        assert_eq!(send(&c, &wqe(8), 0, &mut e), Ok(()));
        let p = e.take_outbox();
        assert_eq!(PacketView::parse(&p[0]).unwrap().bth.pkey, want, "{t:?}");
    }
}

#[test]
fn qp0_sends_on_vl15_as_qp0_and_may_use_the_permissive_lid() {
    let mut e = env();
    let mut w = wqe(256);
    w.dlid = 0xffff.into();
    w.sl = 15;
    assert_eq!(send(&cfg(QpType::Smi), &w, 0, &mut e), Ok(()));
    let p = e.take_outbox();
    let v = PacketView::parse(&p[0]).unwrap();
    assert_eq!((v.lrh.vl, v.lrh.sl, v.lrh.dlid), (15, 0, 0xffff));
    assert_eq!(
        v.lrh.slid, 0xffff,
        "a directed SMP's hop: permissive both ways"
    );
    let deth = v.ext.deth.unwrap();
    assert_eq!((deth.qkey, deth.src_qp), (0, 0));
}

#[test]
fn a_grh_goes_out_with_the_ports_gid() {
    let mut e = env();
    let mut w = wqe(16);
    w.av_flags = UD_AV_F_GRH;
    w.hop_limit = 64;
    w.traffic_class = 7;
    w.flow_label = 0x12345.into();
    w.dgid = [0x11; 16];
    send(&cfg(QpType::Ud), &w, 0, &mut e).unwrap();
    let p = e.take_outbox();
    let g = PacketView::parse(&p[0]).unwrap().grh.expect("a GRH");
    assert_eq!(
        (g.hop_limit, g.traffic_class, g.flow_label),
        (64, 7, 0x12345)
    );
    assert_eq!(g.sgid, port_gid(0x1200_0000_0000_0001));
    assert_eq!(g.dgid, [0x11; 16]);
}

/// What is wrong, how to make a WQE so, the status it completes with.
type Case = (&'static str, fn(&mut UdSendWqe), u8);

#[test]
fn refused_sends_complete_in_error_and_send_nothing() {
    let c = cfg(QpType::Ud);
    let cases: [Case; 6] = [
        (
            "over the MTU",
            |w| w.sge[0].length = 1025.into(),
            WC_LOC_LEN_ERR,
        ),
        ("SL 15 on a data QP", |w| w.sl = 15, WC_LOC_QP_OP_ERR),
        ("LID 0", |w| w.dlid = 0.into(), WC_LOC_QP_OP_ERR),
        ("permissive", |w| w.dlid = 0xffff.into(), WC_LOC_QP_OP_ERR),
        ("an RC opcode", |w| w.opcode = 2, WC_LOC_QP_OP_ERR),
        ("bad key", |w| w.sge[0].lkey = 7.into(), WC_LOC_PROT_ERR),
    ];
    for (what, edit, status) in cases {
        let mut e = env();
        let mut w = wqe(1024);
        w.flags = 0; // errors complete even unsignaled
        edit(&mut w);
        assert_eq!(send(&c, &w, 0, &mut e), Err(status), "{what}");
        assert!(e.outbox.is_empty(), "{what}");
        assert_eq!(e.send_cq[0].status, status, "{what}");
    }
}

/// A datagram from `src_qp` at LID 9 with Q_Key `qkey` to QP 0x401.
fn datagram(qkey: u32, payload: &[u8], grh: bool) -> Vec<u8> {
    let deth = Deth {
        qkey,
        src_qp: 0x777,
    };
    let mut p = Packet::datagram(9, 5, 0x401, deth, payload.to_vec());
    p.lrh.sl = 2;
    if grh {
        p.grh = Some(Grh {
            hop_limit: 1,
            dgid: [3; 16],
            ..Grh::default()
        });
    }
    p.build().unwrap()
}

#[test]
fn a_datagram_lands_behind_the_grh_area_with_its_sender() {
    let (c, mut e) = (cfg(QpType::Ud), env());
    let mut counters = UdCounters::default();
    e.post_recv(5, &[sge(0, 40 + 300)]);
    let bytes = datagram(0x1111_2222, &[0x5a; 300], false);
    receive(
        &c,
        &PacketView::parse(&bytes).unwrap(),
        &mut e,
        &mut counters,
    );
    assert_eq!(&e.bytes(KEY)[..40], &[0; 40][..], "no GRH: area untouched");
    assert_eq!(&e.bytes(KEY)[40..340], &[0x5a; 300][..]);
    let q = e.recv_cq[0];
    assert_eq!((q.status, q.byte_len.to_native()), (WC_SUCCESS, 340));
    assert_eq!(
        (q.src_qp.to_native(), q.slid.to_native(), q.sl),
        (0x777, 9, 2)
    );
    assert_eq!(q.flags & CQE_F_GRH, 0);
    // With a GRH: its 40 bytes first, and the flag.
    e.post_recv(6, &[sge(1000, 40 + 300)]);
    let bytes = datagram(0x1111_2222, &[0x5b; 300], true);
    let v = PacketView::parse(&bytes).unwrap();
    receive(&c, &v, &mut e, &mut counters);
    let mut grh = Vec::new();
    v.grh.unwrap().write(&mut grh);
    assert_eq!(&e.bytes(KEY)[1000..1040], &grh[..]);
    assert_eq!(&e.bytes(KEY)[1040..1340], &[0x5b; 300][..]);
    assert_ne!(e.recv_cq[1].flags & CQE_F_GRH, 0);
    assert_eq!(counters.delivered, 2);
}

#[test]
fn a_wrong_qkey_or_no_receive_drops_and_counts() {
    let (c, mut e) = (cfg(QpType::Ud), env());
    let mut counters = UdCounters::default();
    let bytes = datagram(0x1111_2222, &[1; 8], false);
    receive(
        &c,
        &PacketView::parse(&bytes).unwrap(),
        &mut e,
        &mut counters,
    );
    assert_eq!(counters.no_recv, 1);
    e.post_recv(5, &[sge(0, 100)]);
    let bytes = datagram(0x1111_2223, &[1; 8], false);
    receive(
        &c,
        &PacketView::parse(&bytes).unwrap(),
        &mut e,
        &mut counters,
    );
    assert_eq!(counters.qkey_mismatch, 1);
    assert!(e.recv_cq.is_empty(), "no completion for a dropped datagram");
    assert_eq!(e.rq.len(), 1, "the receive is still posted");
    assert_eq!(e.bytes(KEY)[40], 0);
}

#[test]
fn a_datagram_longer_than_the_receive_completes_it_with_a_length_error() {
    let (c, mut e) = (cfg(QpType::Ud), env());
    let mut counters = UdCounters::default();
    e.post_recv(5, &[sge(0, 40 + 99)]);
    let bytes = datagram(0x1111_2222, &[1; 100], false);
    receive(
        &c,
        &PacketView::parse(&bytes).unwrap(),
        &mut e,
        &mut counters,
    );
    assert_eq!(e.recv_cq[0].status, WC_LOC_LEN_ERR);
    assert!(
        e.bytes(KEY)[..200].iter().all(|&b| b == 0),
        "nothing written"
    );
}
