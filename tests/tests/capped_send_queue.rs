//! A send queue longer than the engine reads ahead
//! (`MAX_QUEUED_SEND_WQES`) whose room frees up without a packet for the
//! QP: the engine reads on from the ring by itself (`resume_capped`), so
//! every posted work request completes without another doorbell.
//!
//! The peer is a bare link (the test SM's), so the test writes the one
//! response itself: an RNR NAK that acknowledges the QP's only message.
//! Until its RNR wait ends the requester starts nothing, and with a send
//! window of one packet nothing behind the unacknowledged message was
//! started before either: the local work requests behind it (BIND_MWs)
//! stay queued in the transport, the rest in the guest's ring. When the
//! wait ends (a timer, no packet) the binds all run and complete at once,
//! which makes room; only the engine's resume reads the ring on.
//!
//! This is the one way room frees up without a drain of that QP: every
//! other event that completes send work (a response packet, a DRDMA
//! range drained, a QP put in error by a timer or the driver) reads the
//! QP's send queue right after, so the existing two-device tests of
//! `MAX_QUEUED_SEND_WQES` pass without the resume. An RNR NAK one PSN past
//! the last request sent (which IBA lets a NAK name) is how a peer puts
//! the requester here.

use std::time::Duration;

use ibtca_device::engine::MAX_QUEUED_SEND_WQES;
use ibtca_device::instance::InstanceConfig;
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_protocol::headers::Aeth;
use ibtca_protocol::{Opcode, Packet, PacketView};
use ibtca_tests::sim_guest::{send_wqe, SimGuest};
use ibtca_tests::sm_nodes::{sm_device_server, SM_LID};
use ibtca_tests::TempDir;
use vm_memory::ByteValued;

const LID: u16 = 7;
/// The peer's QP number (the bare link answers for it).
const PEER_QPN: u32 = 0x77;
const SQ_PSN: u32 = 200;
const T: Duration = Duration::from_secs(20);

#[test]
fn a_capped_send_queue_is_read_on_when_a_timer_makes_room() {
    // More binds than the transport takes, behind the SEND.
    const BINDS: usize = MAX_QUEUED_SEND_WQES + 100;
    let cfg = InstanceConfig {
        lid: LID,
        ..InstanceConfig::default()
    };
    let (server, sm) = sm_device_server(TempDir::new("capped-sq"), cfg);
    let mut g = SimGuest::new(&server.socket, 4 << 20);
    let pd = g.create_pd();
    let buf = g.alloc(64 << 10, 4096);
    let access = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_MW_BIND;
    let (lkey, _) = g.reg_mr(pd, buf, 64 << 10, access);
    let mut cq = g.create_cq(13);
    let mut qp = g.create_qp(pd, &cq, &cq, 12);
    let handle = CmdHandle {
        handle: pd.into(),
        ..Default::default()
    };
    let mw = g.cmd(CMD_ALLOC_MW, handle.as_slice()).unwrap().0;

    let rtr = CmdModifyQp {
        attr_mask: QP_ATTR_ACK_POLICY.into(),
        path_mtu: MTU_4096,
        dlid: SM_LID.into(),
        dest_qpn: PEER_QPN.into(),
        rq_psn: 100.into(),
        ack_mode: ACK_PER_MESSAGE,
        window: 1.into(), // stop-and-wait
        ..Default::default()
    };
    let rts = CmdModifyQp {
        sq_psn: SQ_PSN.into(),
        timeout: 20, // 4.3 s: the SEND is answered long before
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
        ..Default::default()
    };
    g.connect_with(&qp, 0, rtr, rts);

    // The SEND goes out and fills the window.
    g.post_send(&mut qp, &send_wqe(WR_SEND, 1, buf, 16, lkey));
    loop {
        let p = sm.next_packet();
        let v = PacketView::parse(&p).unwrap();
        if v.bth.opcode == Opcode::RcSendOnly {
            assert_eq!((v.bth.dest_qp, v.bth.psn), (PEER_QPN, SQ_PSN));
            break;
        }
    }
    // The binds, each of the window's current key; one doorbell. The
    // register read orders them before the NAK below.
    let key = |i: usize| (mw & !0xff) | (mw.wrapping_add(i as u32) & 0xff);
    let binds: Vec<_> = (0..BINDS)
        .map(|i| {
            let mut b = send_wqe(WR_BIND_MW, 10 + i as u64, 0, 0, lkey);
            b.rkey = key(i).into();
            b.compare_add = buf.into();
            b.swap = 4096.into();
            b.imm_data = ACCESS_REMOTE_READ.into();
            b
        })
        .collect();
    g.post_send_batch(&mut qp, &binds);
    g.client.read32(0, regs::MAGIC);

    // RNR NAK at the PSN after the SEND, MSN 1: the SEND was executed, the
    // next request must wait (timer code 1: 0.01 ms).
    let mut nak = Packet::new(Opcode::RcAcknowledge);
    (nak.lrh.slid, nak.lrh.dlid) = (SM_LID, LID);
    nak.bth.pkey = 0xffff;
    nak.bth.dest_qp = qp.qpn;
    nak.bth.psn = SQ_PSN + 1;
    nak.ext.aeth = Some(Aeth::rnr_nak(1, 1));
    sm.link.send(nak.build().unwrap()).unwrap();

    let c = g.poll_cq(&mut cq, T).expect("SEND completion");
    assert_eq!((c.wr_id.to_native(), c.status), (1, WC_SUCCESS));
    for i in 0..BINDS {
        let c = g
            .poll_cq(&mut cq, T)
            .unwrap_or_else(|| panic!("no completion for bind {i} of {BINDS}"));
        assert_eq!(
            (c.wr_id.to_native(), c.status, c.opcode),
            (10 + i as u64, WC_SUCCESS, WC_BIND_MW),
            "bind {i}"
        );
        assert_eq!(c.imm_data.to_native(), key(i + 1), "bind {i}'s new key");
    }
    assert_eq!(g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
}
