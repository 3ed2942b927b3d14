//! Tests of `qp.rs`: creation limits, MODIFY_QP values, doorbells, WQE and
//! quasi-WQE rings in guest memory.

use vm_memory::{Le16, Le32, Le64};

use super::super::abi::{SendWqe, QPS_ERR, QPS_INIT, QPS_RESET, QPS_RTR, QPS_RTS, QP_ATTR_STATE};
use super::super::db_record::{DoorbellRecord, RecordQueue};
use super::super::testmem::TestMem;
use super::*;

const SQ: u64 = 0x1_0000;
const RQ: u64 = 0x2_0000;
const QUASI: u64 = 0x3_0000;

fn create(log: u8) -> CmdCreateQp {
    CmdCreateQp {
        pdn: Le32::from(0x401),
        send_cqn: Le32::from(0x402),
        recv_cqn: Le32::from(0x403),
        log_sizes: [log, log, log, 0],
        sq: Le64::from(SQ),
        rq: Le64::from(RQ),
        quasi: Le64::from(QUASI),
        ..Default::default()
    }
}

fn modify(mask: u32, state: u8) -> CmdModifyQp {
    CmdModifyQp {
        attr_mask: Le32::from(mask | QP_ATTR_STATE),
        state,
        path_mtu: MTU_4096,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic: 3,
        dest_qpn: Le32::from(0x1234),
        dlid: Le16::from(2),
        sq_psn: Le32::from(100),
        rq_psn: Le32::from(200),
        access: Le32::from(ACCESS_REMOTE),
        ..Default::default()
    }
}

/// A QP brought to RTS.
fn rts(log: u8) -> Qp {
    let mut qp = Qp::new(&create(log)).unwrap();
    qp.modify(&modify(QP_ATTR_ACCESS, QPS_INIT)).unwrap();
    qp.modify(&modify(
        QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN,
        QPS_RTR,
    ))
    .unwrap();
    qp.modify(&modify(QP_ATTR_SQ_PSN | QP_ATTR_RETRY, QPS_RTS))
        .unwrap();
    qp
}

#[test]
fn create_validates_rings() {
    assert!(
        Qp::new(&create(MAX_WQ_LOG)).is_err(),
        "2^15 * 128 B rings overlap"
    );
    let mut big = create(MAX_WQ_LOG);
    big.rq = Le64::from(0x100_0000);
    big.quasi = Le64::from(0x200_0000);
    assert!(Qp::new(&big).is_ok());
    for log in [MAX_WQ_LOG + 1, 31, 255] {
        assert_eq!(Qp::new(&create(log)).err(), Some(VerbsError::Invalid));
    }
    let mut c = create(2);
    c.sq = Le64::from(SQ + 8);
    assert_eq!(Qp::new(&c).err(), Some(VerbsError::Invalid), "misaligned");
    let mut c = create(2);
    c.rq = Le64::from(SQ + 128);
    assert_eq!(
        Qp::new(&c).err(),
        Some(VerbsError::Invalid),
        "SQ and RQ overlap"
    );
    let mut c = create(2);
    c.quasi = Le64::from(u64::MAX - 31);
    assert_eq!(Qp::new(&c).err(), Some(VerbsError::Invalid), "wraps");
    let mut c = create(2);
    c.log_sizes[3] = 4;
    assert_eq!(Qp::new(&c).err(), Some(VerbsError::Invalid), "no such type");
}

#[test]
fn modify_walks_the_state_machine_and_keeps_attrs() {
    let qp = rts(2);
    assert_eq!(qp.state(), QpState::Rts);
    let a = qp.attrs();
    assert_eq!(
        (a.dest_qpn, a.dlid, a.sq_psn, a.rq_psn),
        (0x1234, 2, 100, 200)
    );
    assert_eq!((a.path_mtu, a.retry_cnt, a.max_rd_atomic), (MTU_4096, 7, 3));
    assert_eq!(a.access, ACCESS_REMOTE);
    let mut qp = qp;
    qp.modify(&modify(0, QPS_ERR)).unwrap();
    assert_eq!(qp.modify(&modify(0, QPS_RTS)), Err(VerbsError::Invalid));
    qp.modify(&modify(0, QPS_RESET)).unwrap();
    assert_eq!(qp.state(), QpState::Reset);
    assert_eq!(*qp.attrs(), QpAttrs::default());
}

#[test]
fn modify_rejects_bad_values_and_changes_nothing() {
    let mut qp = Qp::new(&create(2)).unwrap();
    qp.modify(&modify(0, QPS_INIT)).unwrap();
    let rtr = QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
    let bad: [fn(&mut CmdModifyQp); 9] = [
        |m| m.sl = MAX_SL + 1,
        |m| m.path_mtu = 0,
        |m| m.path_mtu = 6,
        |m| m.dlid = Le16::from(0),
        |m| m.dlid = Le16::from(0xc000),
        |m| m.dest_qpn = Le32::from(1 << 24),
        |m| m.rq_psn = Le32::from(u32::MAX),
        |m| m.access = Le32::from(1),
        |m| m.retry_cnt = 8,
    ];
    for (i, f) in bad.iter().enumerate() {
        let mut m = modify(rtr | QP_ATTR_ACCESS | QP_ATTR_RETRY, QPS_RTR);
        f(&mut m);
        assert_eq!(qp.modify(&m), Err(VerbsError::Invalid), "case {i}");
        assert_eq!(qp.state(), QpState::Init);
        assert_eq!(*qp.attrs(), QpAttrs::default());
    }
    let mut m = modify(rtr, QPS_RTR);
    m.sl = 3;
    qp.modify(&m).unwrap();
    assert_eq!(qp.attrs().sl, 3, "the path's service level");
    for f in [
        |m: &mut CmdModifyQp| m.timeout = 32,
        |m: &mut CmdModifyQp| m.rnr_retry = 8,
        |m: &mut CmdModifyQp| m.min_rnr_timer = 32,
        |m: &mut CmdModifyQp| m.max_rd_atomic = MAX_INIT_RD_ATOMIC + 1,
        |m: &mut CmdModifyQp| m.sq_psn = Le32::from(1 << 24),
    ] {
        let mut m = modify(QP_ATTR_SQ_PSN | QP_ATTR_RETRY, QPS_RTS);
        f(&mut m);
        assert_eq!(qp.modify(&m), Err(VerbsError::Invalid));
        assert_eq!(qp.state(), QpState::Rtr);
    }
}

/// The IB CM's passive side: RTS with the REQ's responder resources as
/// initiator depth (IPoIB's connected mode asks 4) and no responder
/// resources of its own: the initiator depth does not depend on them.
#[test]
fn rts_takes_an_initiator_depth_without_responder_resources() {
    for depth in [4, MAX_INIT_RD_ATOMIC] {
        let mut qp = Qp::new(&create(2)).unwrap();
        qp.modify(&modify(0, QPS_INIT)).unwrap();
        let mut m = modify(
            QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN | QP_ATTR_DEST_RD_ATOMIC,
            QPS_RTR,
        );
        m.max_dest_rd_atomic = 0;
        qp.modify(&m).unwrap();
        let mut m = modify(QP_ATTR_SQ_PSN | QP_ATTR_RETRY, QPS_RTS);
        (m.retry_cnt, m.rnr_retry, m.max_rd_atomic) = (0, 0, depth);
        qp.modify(&m).unwrap();
        assert_eq!(qp.state(), QpState::Rts);
        assert_eq!(qp.attrs().max_rd_atomic, depth);
    }
}

#[test]
fn seed_002_attributes_msn_start_and_ack_policy() {
    let seed = QP_ATTR_MSN | QP_ATTR_ACK_POLICY;
    let rtr = QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
    let mut qp = Qp::new(&create(2)).unwrap();
    // Not while the QP is in INIT alone.
    let mut m = modify(seed, QPS_INIT);
    assert_eq!(qp.modify(&m), Err(VerbsError::Invalid));
    qp.modify(&modify(0, QPS_INIT)).unwrap();
    assert_eq!(qp.attrs().initial_msn, 0, "IBA's start by default");
    let bad: [fn(&mut CmdModifyQp); 5] = [
        |m| m.initial_msn = Le32::from(1 << 24),
        |m| m.ack_mode = 3,
        |m| m.ack_mode = ACK_COALESCED,
        |m| m.window = Le16::from(MAX_WINDOW + 1),
        |m| m.window = Le16::from(u16::MAX),
    ];
    for (i, f) in bad.iter().enumerate() {
        m = modify(rtr | seed, QPS_RTR);
        f(&mut m);
        assert_eq!(qp.modify(&m), Err(VerbsError::Invalid), "case {i}");
        assert_eq!(*qp.attrs(), QpAttrs::default());
    }
    m = modify(rtr | seed, QPS_RTR);
    (m.initial_msn, m.ack_mode) = (Le32::from(0xff_ffff), ACK_COALESCED);
    (m.ack_every, m.window) = (Le16::from(8), Le16::from(1));
    qp.modify(&m).unwrap();
    let a = qp.attrs();
    assert_eq!(
        (a.initial_msn, a.ack_mode, a.ack_every, a.window),
        (0xff_ffff, ACK_COALESCED, 8, 1)
    );
    // And on the way to RTS; without the bit the values stay.
    m = modify(QP_ATTR_SQ_PSN | QP_ATTR_RETRY | QP_ATTR_ACK_POLICY, QPS_RTS);
    m.ack_mode = ACK_PER_PACKET;
    m.initial_msn = Le32::from(5);
    qp.modify(&m).unwrap();
    let a = qp.attrs();
    assert_eq!(
        (a.initial_msn, a.ack_mode, a.window),
        (0xff_ffff, ACK_PER_PACKET, 0)
    );
}

#[test]
fn send_wqes_come_from_guest_memory_in_order() {
    let m = TestMem::new(0x4_0000);
    let mut qp = rts(2);
    for i in 0..4u64 {
        let w = SendWqe {
            wr_id: Le64::from(i),
            ..Default::default()
        };
        m.write_obj(SQ + 128 * i, &w);
    }
    assert_eq!(qp.next_send_wqe(&m.mem), Ok(None), "no doorbell yet");
    qp.sq_doorbell(3).unwrap();
    assert_eq!(qp.sq_pending(), 3);
    for i in 0..3 {
        let w = qp.next_send_wqe(&m.mem).unwrap().unwrap();
        assert_eq!(w.wr_id.to_native(), i);
    }
    assert_eq!(qp.next_send_wqe(&m.mem), Ok(None));
    qp.sq_doorbell(7).unwrap(); // 3 + 4 = wraps the 4-entry ring once
    let w = qp.next_send_wqe(&m.mem).unwrap().unwrap();
    assert_eq!(w.wr_id.to_native(), 3);
    let w = qp.next_send_wqe(&m.mem).unwrap().unwrap();
    assert_eq!(w.wr_id.to_native(), 0, "slot 0 again");
}

#[test]
fn doorbell_overrun_puts_the_qp_in_error() {
    let mut qp = rts(2);
    assert_eq!(qp.sq_doorbell(5), Err(QpError::Overrun));
    assert_eq!(qp.state(), QpState::Err);
    let mut qp = rts(2);
    qp.rq_doorbell(4).unwrap();
    assert_eq!(
        qp.rq_doorbell(3),
        Err(QpError::Overrun),
        "producer went back"
    );
    let mut qp = rts(2);
    assert_eq!(qp.sq_doorbell(u32::MAX), Err(QpError::Overrun));
    let mut qp = Qp::new(&create(2)).unwrap();
    assert_eq!(qp.sq_doorbell(1), Err(QpError::Reset));
    assert_eq!(qp.state(), QpState::Reset);
}

#[test]
fn with_a_record_old_doorbells_are_ignored_however_late() {
    const REC: u64 = 0x3_8000;
    let m = TestMem::new(0x4_0000);
    let mut qp = rts(2);
    qp.set_db_record(DoorbellRecord::new(REC, &m.mem).unwrap());
    // The record runs 10 rings ahead of a doorbell still on its way; each
    // step the device reads what the record says.
    for pi in 1..=40u32 {
        m.write_obj(REC, &pi.to_le());
        qp.from_record(&m.mem, RecordQueue::Sq).unwrap();
        assert!(qp.next_send_wqe(&m.mem).unwrap().is_some());
    }
    assert_eq!(qp.sq_doorbell(1), Ok(()), "40 ahead of it: old news");
    assert_eq!(qp.sq_doorbell(40), Ok(()));
    assert_eq!(qp.state(), QpState::Rts);
    assert_eq!(qp.sq_pending(), 0);
    // Ahead by more than the ring is still an overrun.
    assert_eq!(qp.sq_doorbell(45), Err(QpError::Overrun));
    assert_eq!(qp.state(), QpState::Err);
}

#[test]
fn receive_wqes_need_rtr_and_mapped_memory() {
    let m = TestMem::new(0x4_0000);
    let mut qp = Qp::new(&create(2)).unwrap();
    qp.modify(&modify(0, QPS_INIT)).unwrap();
    qp.rq_doorbell(1).unwrap();
    assert_eq!(qp.next_recv_wqe(&m.mem), Ok(None), "INIT does not receive");
    qp.modify(&modify(
        QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN,
        QPS_RTR,
    ))
    .unwrap();
    assert!(qp.next_recv_wqe(&m.mem).unwrap().is_some());
    // An RQ outside guest memory.
    let mut c = create(2);
    c.rq = Le64::from(0x100_0000);
    let mut qp = Qp::new(&c).unwrap();
    qp.modify(&modify(0, QPS_INIT)).unwrap();
    qp.modify(&modify(
        QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN,
        QPS_RTR,
    ))
    .unwrap();
    qp.rq_doorbell(1).unwrap();
    assert_eq!(qp.next_recv_wqe(&m.mem), Err(QpError::Dma));
    assert_eq!(qp.state(), QpState::Err);
}

#[test]
fn quasi_ring_owner_bits_full_and_corruption() {
    let m = TestMem::new(0x4_0000);
    let mut qp = rts(1);
    let q = |psn: u32| QuasiWqe {
        psn: Le32::from(psn),
        ..Default::default()
    };
    qp.push_quasi(&m.mem, &q(1)).unwrap();
    qp.push_quasi(&m.mem, &q(2)).unwrap();
    assert_eq!(qp.push_quasi(&m.mem, &q(3)), Err(QpError::Full));
    let in_ring: QuasiWqe = m.read_obj(QUASI);
    assert_eq!((in_ring.psn.to_native(), in_ring.owner), (1, 1));
    assert_eq!(qp.pop_quasi(&m.mem).unwrap().unwrap().psn.to_native(), 1);
    qp.push_quasi(&m.mem, &q(3)).unwrap();
    let in_ring: QuasiWqe = m.read_obj(QUASI);
    assert_eq!(
        (in_ring.psn.to_native(), in_ring.owner),
        (3, 0),
        "second pass"
    );
    assert_eq!(qp.pop_quasi(&m.mem).unwrap().unwrap().psn.to_native(), 2);
    // The guest scribbles over the pending entry (index 2: pass 1, owner 0).
    let forged = QuasiWqe { owner: 1, ..q(9) };
    m.write_obj(QUASI, &forged);
    assert_eq!(qp.pop_quasi(&m.mem), Err(QpError::Corrupt));
    assert_eq!(qp.state(), QpState::Err);
}

#[test]
fn reset_empties_the_rings() {
    let m = TestMem::new(0x4_0000);
    let mut qp = rts(2);
    qp.sq_doorbell(2).unwrap();
    qp.push_quasi(&m.mem, &QuasiWqe::default()).unwrap();
    qp.modify(&modify(0, QPS_RESET)).unwrap();
    assert_eq!(qp.sq_pending(), 0);
    assert_eq!(qp.pop_quasi(&m.mem), Ok(None));
}

#[test]
fn the_p_key_index_is_checked_and_kept() {
    use super::super::abi::{PKEY_TABLE_LEN, QP_ATTR_PKEY_INDEX};
    let mut qp = Qp::new(&create(2)).unwrap();
    let mut m = modify(QP_ATTR_PKEY_INDEX, QPS_INIT);
    m.pkey_index = Le16::from(PKEY_TABLE_LEN as u16);
    assert_eq!(qp.modify(&m), Err(VerbsError::Invalid), "past the table");
    assert_eq!(qp.state(), QpState::Reset);
    m.pkey_index = Le16::from(3);
    qp.modify(&m).unwrap();
    assert_eq!(qp.attrs().pkey_index, 3);
    // Not an RTR-to-RTS attribute.
    let mut m = modify(QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN, QPS_RTR);
    qp.modify(&m).unwrap();
    m = modify(QP_ATTR_SQ_PSN | QP_ATTR_RETRY | QP_ATTR_PKEY_INDEX, QPS_RTS);
    assert_eq!(qp.modify(&m), Err(VerbsError::Invalid));
    assert_eq!(qp.attrs().pkey_index, 3);
}

#[test]
fn a_datagram_qps_qkey_travels_in_access() {
    use super::super::abi::{GSI_QKEY, QPT_GSI, QPT_UD, QP_ATTR_PKEY_INDEX};
    let mut p = create(2);
    p.log_sizes[3] = QPT_UD;
    let mut qp = Qp::new(&p).unwrap();
    let mut m = modify(QP_ATTR_QKEY | QP_ATTR_PKEY_INDEX, QPS_INIT);
    m.access = Le32::from(0x1234_5678);
    m.pkey_index = Le16::from(2);
    qp.modify(&m).unwrap();
    assert_eq!((qp.attrs().qkey, qp.attrs().pkey_index), (0x1234_5678, 2));
    // Remote access rights mean nothing to a datagram QP: refused.
    let m = modify(QP_ATTR_ACCESS, QPS_INIT);
    assert_eq!(qp.modify(&m), Err(VerbsError::Invalid));
    assert_eq!(qp.attrs().qkey, 0x1234_5678);
    // An RC QP's access stays its rights, and it takes no Q_Key.
    let mut rc = Qp::new(&create(2)).unwrap();
    assert_eq!(
        rc.modify(&modify(QP_ATTR_QKEY, QPS_INIT)),
        Err(VerbsError::Invalid)
    );
    // QP1's Q_Key is fixed: only GSI_QKEY passes.
    p.log_sizes[3] = QPT_GSI;
    let mut gsi = Qp::new(&p).unwrap();
    let mut m = modify(QP_ATTR_QKEY, QPS_INIT);
    m.access = Le32::from(7);
    assert_eq!(gsi.modify(&m), Err(VerbsError::Invalid));
    m.access = Le32::from(GSI_QKEY);
    gsi.modify(&m).unwrap();
    assert_eq!(gsi.attrs().qkey, GSI_QKEY);
}
