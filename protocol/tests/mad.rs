//! MADs: the SMP layout against hand-written bytes, attributes at IBA's
//! offsets, directed routes hop by hop, SMPs in packets.

use ibtca_protocol::mad::attr::{
    self, GuidInfo, LftBlock, MftBlock, NodeDescription, NodeInfo, NodeType, PKeyTable, PortInfo,
    PortState, Sl2VlTable, SwitchInfo, VlArbBlock, VlArbEntry,
};
use ibtca_protocol::mad::directed::{self, DrDiscard, DrStep};
use ibtca_protocol::mad::{
    method, smp_of_packet, smp_packet, MadError, MadHeader, MadStatus, Smp, SmpRoute, MAD_LEN,
};
use ibtca_protocol::PacketView;

#[test]
fn a_directed_smp_sits_where_iba_says() {
    let mut smp = Smp::directed(method::GET, attr::id::PORT_INFO, 3, &[1, 7]).unwrap();
    smp.tid = 0x0102_0304_0506_0708;
    smp.m_key = 0x1112_1314_1516_1718;
    smp.hop_ptr = 2;
    smp.direction = true;
    smp.status = MadStatus::INVALID_ATTR_VALUE;
    smp.data[0] = 0xaa;
    smp.return_path[2] = 9;
    let b = smp.to_bytes();
    assert_eq!(&b[..4], &[1, 0x81, 1, 1]);
    assert_eq!(&b[4..6], &[0x80, 0x1c], "D bit over the status");
    assert_eq!(&b[6..8], &[2, 2], "hop pointer, hop count");
    assert_eq!(&b[8..16], &smp.tid.to_be_bytes());
    assert_eq!(&b[16..18], &[0, 0x15]);
    assert_eq!(&b[20..24], &[0, 0, 0, 3]);
    assert_eq!(&b[24..32], &smp.m_key.to_be_bytes());
    assert_eq!(&b[32..36], &[0xff; 4], "DrSLID, DrDLID permissive");
    assert_eq!(b[64], 0xaa);
    assert_eq!(&b[128..131], &[0, 1, 7]);
    assert_eq!(b[192 + 2], 9);
    assert_eq!(Smp::parse(&b), Ok(smp));
    let h = MadHeader::parse(&b).unwrap();
    assert_eq!((h.mgmt_class, h.attr_id, h.attr_mod), (0x81, 0x15, 3));
}

#[test]
fn lengths_and_classes_are_checked() {
    assert_eq!(Smp::parse(&[0; 255]), Err(MadError::Length(255)));
    assert_eq!(Smp::parse(&[0; 257]), Err(MadError::Length(257)));
    let mut b = [0u8; MAD_LEN];
    b[1] = 0x04;
    assert_eq!(Smp::parse(&b), Err(MadError::NotSmp(4)));
    b[1] = 0x01;
    let smp = Smp::parse(&b).unwrap();
    assert_eq!(smp.route, SmpRoute::Lid);
    assert_eq!(
        Smp::directed(1, 0x11, 0, &[1; 64]),
        None,
        "64 hops is too many"
    );
}

#[test]
fn port_info_fields_are_at_iba_offsets() {
    let mut b = [0u8; 64];
    b[16..18].copy_from_slice(&0x1234u16.to_be_bytes());
    b[18..20].copy_from_slice(&0x0007u16.to_be_bytes());
    b[20..24].copy_from_slice(&0x0200_0000u32.to_be_bytes());
    b[32] = 0x14; // LinkSpeedSupported SDR, PortState Active
    b[33] = 0x52; // LinkUp, default Polling
    b[34] = 0x83; // protect 2, LMC 3
    b[36] = 0x5f; // NeighborMTU 4096, SM SL 15
    b[41] = 0x15; // InitTypeReply 1, MTUCap 4096
    b[44..46].copy_from_slice(&9u16.to_be_bytes());
    let p = PortInfo::decode(&b);
    assert_eq!((p.lid, p.master_sm_lid), (0x1234, 7));
    assert_eq!(
        p.capability_mask,
        attr::cap::IS_CLIENT_REREGISTRATION_SUPPORTED
    );
    assert_eq!(
        (p.link_speed_supported, p.port_state),
        (1, PortState::Active as u8)
    );
    assert_eq!((p.phys_state, p.link_down_default_state), (5, 2));
    assert_eq!((p.m_key_protect, p.lmc), (2, 3));
    assert_eq!((p.neighbor_mtu, p.master_sm_sl), (5, 15));
    assert_eq!((p.init_type_reply, p.mtu_cap), (1, 5));
    assert_eq!(p.m_key_violations, 9);
    assert_eq!(p.encode(), b);
}

#[test]
fn node_info_and_description() {
    let n = NodeInfo {
        base_version: 1,
        class_version: 1,
        node_type: NodeType::Switch,
        num_ports: 8,
        system_image_guid: 1,
        node_guid: 0x1200_0000_0000_0042,
        port_guid: 0x1200_0000_0000_0042,
        partition_cap: 32,
        device_id: 0x7ca0,
        revision: 1,
        local_port_num: 3,
        vendor_id: 0x00_1234,
    };
    let b = n.encode();
    assert_eq!(b[2], 2);
    assert_eq!(&b[12..20], &0x1200_0000_0000_0042u64.to_be_bytes());
    assert_eq!(&b[36..40], &[3, 0, 0x12, 0x34]);
    assert_eq!(NodeInfo::decode(&b), n);
    let d = NodeDescription("sw0 ibtca switch".into());
    assert_eq!(NodeDescription::decode(&d.encode()), d);
    let long = NodeDescription("é".repeat(40));
    assert_eq!(NodeDescription::decode(&long.encode()).0, "é".repeat(32));
}

#[test]
fn tables_round_trip_at_their_offsets() {
    let mut s = SwitchInfo {
        linear_fdb_cap: 0xc000,
        linear_fdb_top: 0x20,
        port_state_change: true,
        life_time_value: 18,
        ..SwitchInfo::default()
    };
    let b = s.encode();
    assert_eq!(b[11], (18 << 3) | 4);
    assert_eq!(&b[6..8], &[0, 0x20]);
    assert_eq!(SwitchInfo::decode(&b), s);
    s.port_state_change = false;
    assert!(!SwitchInfo::decode(&s.encode()).port_state_change);

    let mut keys = [0u16; 32];
    keys[0] = 0xffff;
    keys[31] = 0x8001;
    let pk = PKeyTable(keys).encode();
    assert_eq!(&pk[62..64], &[0x80, 1]);
    assert_eq!(PKeyTable::decode(&pk).0, keys);
    let g = GuidInfo([7, 0, 0, 0, 0, 0, 0, 8]);
    assert_eq!(GuidInfo::decode(&g.encode()), g);
    let lft = LftBlock([0xff; 64]);
    assert_eq!(LftBlock::decode(&lft.encode()), lft);
    let mut masks = [0u16; 32];
    masks[1] = 0b110;
    assert_eq!(MftBlock::decode(&MftBlock(masks).encode()).0, masks);
    assert_eq!(MftBlock::select(0x2000_0003), (2, 3));
    let sl2vl = Sl2VlTable([0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 15]);
    let b = sl2vl.encode();
    assert_eq!(&b[..8], &[0x01, 0x23, 0x45, 0x67, 0x01, 0x23, 0x45, 0x6f]);
    assert_eq!(Sl2VlTable::decode(&b), sl2vl);
    let mut arb = [VlArbEntry::default(); 32];
    arb[0] = VlArbEntry { vl: 1, weight: 4 };
    let b = VlArbBlock(arb).encode();
    assert_eq!(&b[..2], &[1, 4]);
    assert_eq!(VlArbBlock::decode(&b).0, arb);
    assert_eq!(VlArbBlock::select(0x0003_0005), (3, 5));
}

/// SM (a CA) — port 2 of switch A, A's port 5 — port 1 of switch B, B's
/// port 4 — a CA: the request to the CA and its answer, hop by hop.
#[test]
fn directed_route_through_two_switches_and_back() {
    let mut smp = Smp::directed(method::GET, attr::id::NODE_INFO, 0, &[1, 5, 4]).unwrap();
    assert_eq!(directed::begin(&mut smp), Ok(1));
    assert_eq!(
        directed::on_receive(&mut smp, true, 2, 8),
        DrStep::Forward(5)
    );
    assert_eq!(
        directed::on_receive(&mut smp, true, 1, 8),
        DrStep::Forward(4)
    );
    assert_eq!(directed::on_receive(&mut smp, false, 1, 1), DrStep::Deliver);
    assert_eq!((smp.hop_ptr, &smp.return_path[1..4]), (4, &[2, 1, 1][..]));
    smp.make_response(MadStatus::OK);
    assert_eq!(directed::respond(&mut smp, 1), DrStep::Forward(1));
    assert_eq!(
        directed::on_receive(&mut smp, true, 4, 8),
        DrStep::Forward(1)
    );
    assert_eq!(
        directed::on_receive(&mut smp, true, 5, 8),
        DrStep::Forward(2)
    );
    assert_eq!(directed::on_receive(&mut smp, false, 1, 1), DrStep::Deliver);
    assert_eq!(smp.hop_ptr, 1);

    // A CA in the middle, a port the switch lacks, a LID-routed part.
    let mut smp = Smp::directed(method::GET, attr::id::NODE_INFO, 0, &[1, 5, 4]).unwrap();
    directed::begin(&mut smp).unwrap();
    assert_eq!(
        directed::on_receive(&mut smp.clone(), false, 1, 1),
        DrStep::Discard(DrDiscard::NotASwitch)
    );
    assert_eq!(
        directed::on_receive(&mut smp.clone(), true, 1, 4),
        DrStep::Discard(DrDiscard::BadPort)
    );
    // A LID-routed last part cannot start at a CA.
    let mut to_ca = Smp::directed(method::GET, attr::id::NODE_INFO, 0, &[1]).unwrap();
    directed::begin(&mut to_ca).unwrap();
    to_ca.dr_dlid = 5;
    assert_eq!(
        directed::on_receive(&mut to_ca, false, 1, 1),
        DrStep::Discard(DrDiscard::LidRoutedPart)
    );
}

/// SM (LID 1) ⇒ LID-routed ⇒ switch A ─5→ switch B ─4→ CA, and back: the
/// first part by LID (DrSLID 1), then directed; then a route whose last
/// part is by LID (DrDLID 9) from switch A.
#[test]
fn directed_routes_with_lid_routed_parts() {
    let mut smp = Smp::directed(method::GET, attr::id::NODE_INFO, 0, &[5, 4]).unwrap();
    smp.dr_slid = 1;
    assert_eq!(
        directed::begin(&mut smp.clone()),
        Err(DrDiscard::LidRoutedPart),
        "sent by LID, not from the requester's port"
    );
    // A CA never starts a directed part.
    assert_eq!(
        directed::on_receive(&mut smp.clone(), false, 1, 1),
        DrStep::Discard(DrDiscard::BadHopPointer)
    );
    assert_eq!(
        directed::on_receive(&mut smp, true, 3, 8),
        DrStep::Forward(5)
    );
    assert_eq!(
        directed::on_receive(&mut smp, true, 1, 8),
        DrStep::Forward(4)
    );
    assert_eq!(directed::on_receive(&mut smp, false, 1, 1), DrStep::Deliver);
    assert_eq!((smp.hop_ptr, &smp.return_path[..3]), (3, &[0, 1, 1][..]));
    smp.make_response(MadStatus::OK);
    assert_eq!(directed::respond(&mut smp, 1), DrStep::Forward(1));
    assert_eq!(
        directed::on_receive(&mut smp, true, 4, 8),
        DrStep::Forward(1)
    );
    assert_eq!(
        directed::on_receive(&mut smp, true, 5, 8),
        DrStep::ForwardByLid(1),
        "switch A sends it to DrSLID"
    );
    assert_eq!(smp.hop_ptr, 0);
    assert_eq!(directed::on_receive(&mut smp, false, 1, 1), DrStep::Deliver);

    // SM ─1→ switch A ⇒ LID-routed ⇒ LID 9 (a CA), and back.
    let mut smp = Smp::directed(method::GET, attr::id::NODE_INFO, 0, &[1]).unwrap();
    smp.dr_dlid = 9;
    directed::begin(&mut smp).unwrap();
    assert_eq!(
        directed::on_receive(&mut smp, true, 2, 8),
        DrStep::ForwardByLid(9)
    );
    assert_eq!((smp.hop_ptr, smp.return_path[1]), (2, 2));
    assert_eq!(directed::on_receive(&mut smp, false, 1, 1), DrStep::Deliver);
    smp.make_response(MadStatus::OK);
    assert_eq!(directed::respond(&mut smp, 1), DrStep::BackToSource);
    assert_eq!(
        directed::on_receive(&mut smp, true, 6, 8),
        DrStep::Forward(2),
        "switch A: back out of the port the request came in by"
    );
    assert_eq!(directed::on_receive(&mut smp, false, 1, 1), DrStep::Deliver);
    assert_eq!(smp.hop_ptr, 1);
}

#[test]
fn pm_mads_and_their_attributes_round_trip() {
    use ibtca_protocol::mad::pma::{
        gmp_packet, pma_id, pma_of_packet, reply_address, ClassPortInfo, GmpAddress, PmaMad,
        PortCounters, PortCountersExt, QP1, QP1_QKEY,
    };
    let c = PortCounters {
        port_select: 3,
        counter_select: 0xf00f,
        symbol_errors: 1,
        link_downed: 2,
        rcv_errors: 3,
        xmit_discards: 4,
        rcv_constraint_errors: 5,
        local_link_integrity_errors: 6,
        buffer_overrun_errors: 7,
        vl15_dropped: 8,
        xmit_data: 0x0102_0304,
        rcv_pkts: 9,
        xmit_wait: 10,
        ..PortCounters::default()
    };
    let b = c.encode();
    // The byte offsets of IBA vol 1 Table 227.
    assert_eq!(
        (b[1], b[2], b[3], b[7], b[17], b[19]),
        (3, 0xf0, 0x0f, 2, 5, 0x67)
    );
    assert_eq!(&b[24..28], &[1, 2, 3, 4]);
    assert_eq!(PortCounters::decode(&b), c);
    let e = PortCountersExt {
        port_select: 1,
        rcv_data: 0x1122_3344_5566_7788,
        multicast_rcv_pkts: 5,
        ..PortCountersExt::default()
    };
    let b = e.encode();
    assert_eq!(&b[16..24], &0x1122_3344_5566_7788u64.to_be_bytes());
    assert_eq!(PortCountersExt::decode(&b), e);
    let i = ClassPortInfo {
        base_version: 1,
        class_version: 1,
        capability_mask: 0x0300,
        capability_mask2: 0,
        resp_time_value: 18,
    };
    assert_eq!(&i.encode()[..8], &[1, 1, 3, 0, 0, 0, 0, 18]);

    let mut mad = PmaMad::new(method::GET, pma_id::PORT_COUNTERS, 0);
    mad.data = c.encode();
    let to = GmpAddress {
        slid: 1,
        dlid: 2,
        sl: 3,
        pkey: 0x8001,
        dest_qp: QP1,
    };
    let bytes = gmp_packet(&mad, &to).build().unwrap();
    let view = PacketView::parse(&bytes).unwrap();
    assert_eq!(
        (view.lrh.vl, view.bth.pkey, view.ext.deth.map(|d| d.qkey)),
        (3, 0x8001, Some(QP1_QKEY))
    );
    assert_eq!(pma_of_packet(&view), Ok(mad.clone()));
    assert_eq!(
        reply_address(&view, 2),
        GmpAddress {
            slid: 2,
            dlid: 1,
            ..to
        }
    );
    // Not a PM MAD: an SMP to QP0, or an SMP class to QP1.
    let smp = Smp::new(SmpRoute::Lid, method::GET, attr::id::NODE_INFO, 0);
    let smp_bytes = smp_packet(&smp, 1, 2).build().unwrap();
    assert!(pma_of_packet(&PacketView::parse(&smp_bytes).unwrap()).is_err());
    assert!(PmaMad::parse(&smp.to_bytes()).is_err());
    assert!(PmaMad::parse(&[0u8; 255]).is_err());
}

#[test]
fn an_smp_travels_as_a_ud_send_to_qp0_on_vl15() {
    let smp = Smp::new(SmpRoute::Lid, method::GET, attr::id::NODE_INFO, 0);
    let bytes = smp_packet(&smp, 1, 2).build().unwrap();
    let view = PacketView::parse(&bytes).unwrap();
    assert_eq!(
        (view.lrh.vl, view.bth.dest_qp, view.payload.len()),
        (15, 0, 256)
    );
    assert_eq!(smp_of_packet(&view), Ok(smp));
}

#[test]
fn a_trap_128_notice_sits_where_iba_says() {
    use ibtca_protocol::mad::attr::{notice_type, producer, trap, Notice};
    let n = Notice::link_state_change(0x1234);
    let smp = n.trap_smp(0x0a0b_0c0d_0e0f_1011);
    let b = smp.to_bytes();
    // LID-routed SubnTrap of a Notice, modifier 0.
    assert_eq!(&b[..4], &[1, 0x01, 1, 0x05]);
    assert_eq!(&b[8..16], &0x0a0b_0c0d_0e0f_1011u64.to_be_bytes());
    assert_eq!(&b[16..18], &[0, 0x02]);
    assert_eq!(&b[20..24], &[0; 4]);
    // IsGeneric, type Urgent; producer Switch; trap 128; issuer LID;
    // toggle and count 0; DataDetails: the switch's LID.
    assert_eq!(
        &b[64..76],
        &[0x81, 0, 0, 2, 0, 128, 0x12, 0x34, 0, 0, 0x12, 0x34]
    );
    assert!(b[76..128].iter().all(|x| *x == 0));
    let back = Notice::decode(&Smp::parse(&b).unwrap().data);
    assert_eq!(back, n);
    assert_eq!(
        (
            back.generic,
            back.notice_type,
            back.producer,
            back.trap_number,
            back.switch_lid()
        ),
        (
            true,
            notice_type::URGENT,
            producer::SWITCH,
            trap::LINK_STATE_CHANGE,
            0x1234
        )
    );
}

#[test]
fn trap_257_names_the_packet_at_ntc_257_258s_offsets() {
    use ibtca_protocol::mad::attr::{notice_type, producer, trap, KeyViolation, Notice};
    let v = KeyViolation {
        slid: 0x0102,
        dlid: 0x0304,
        key: 0x8001,
        sl: 0x15,
        src_qp: 0xab_cdef,
        dest_qp: 0x1_23456,
        sgid: [0x11; 16],
        dgid: [0x22; 16],
    };
    let b = Notice::bad_p_key(0x0304, producer::CA, &v).encode();
    assert_eq!(&b[..8], &[0x82, 0, 0, 1, 0x01, 0x01, 0x03, 0x04]);
    // DataDetails start at byte 10.
    assert_eq!(&b[12..16], &[1, 2, 3, 4], "LID1, LID2");
    assert_eq!(&b[16..20], &[0, 0, 0x80, 0x01], "the P_Key");
    assert_eq!(
        &b[20..24],
        &[0x50, 0xab, 0xcd, 0xef],
        "SL 5 (cut to 4 bits), QP1"
    );
    assert_eq!(&b[24..28], &[0, 0x12, 0x34, 0x56], "QP2");
    assert_eq!((&b[28..44], &b[44..60]), (&[0x11; 16][..], &[0x22; 16][..]));
    let n = Notice::decode(&b);
    assert_eq!(
        (n.notice_type, n.trap_number),
        (notice_type::SECURITY, trap::BAD_P_KEY)
    );
    assert_eq!(n.key_violation(), KeyViolation { sl: 5, ..v });
}

#[test]
fn notice_fields_keep_to_their_bits() {
    use ibtca_protocol::mad::attr::{producer, trap, Notice};
    let n = Notice::capability_mask_change(7, producer::CA, 0x0251_0a6a);
    let b = n.encode();
    assert_eq!(&b[..10], &[0x84, 0, 0, 1, 0, 144, 0, 7, 0, 0]);
    assert_eq!(&b[12..14], &[0, 7], "LIDADDR at DataDetails 2");
    assert_eq!(
        &b[16..20],
        &[0x02, 0x51, 0x0a, 0x6a],
        "mask at DataDetails 6"
    );
    assert_eq!(Notice::decode(&b).new_capability_mask(), 0x0251_0a6a);
    assert_eq!(Notice::decode(&b).trap_number, trap::LOCAL_CHANGES);
    // A vendor notice with toggle and a full count; over-wide fields cut.
    let v = Notice {
        generic: false,
        notice_type: 0xff,
        producer: 0xfe12_3456,
        trap_number: 0xbeef,
        issuer_lid: 1,
        toggle: true,
        count: 0xffff,
        ..Notice::default()
    };
    let b = v.encode();
    assert_eq!(
        &b[..10],
        &[0x7f, 0x12, 0x34, 0x56, 0xbe, 0xef, 0, 1, 0xff, 0xff]
    );
    let back = Notice::decode(&b);
    assert_eq!(
        (back.notice_type, back.producer, back.toggle, back.count),
        (0x7f, 0x12_3456, true, 0x7fff)
    );
}

#[test]
fn only_a_trap_repress_of_a_notice_names_a_tid() {
    use ibtca_protocol::mad::attr::Notice;
    let trap = Notice::link_state_change(5).trap_smp(42);
    assert_eq!(Notice::repressed_tid(&trap), None, "a trap is no repress");
    let mut repress = trap.clone();
    repress.method = method::TRAP_REPRESS;
    assert_eq!(Notice::repressed_tid(&repress), Some(42));
    let mut other = repress.clone();
    other.attr_id = attr::id::PORT_INFO;
    assert_eq!(Notice::repressed_tid(&other), None, "not a Notice");
    let mut old = repress.clone();
    old.class_version = 2;
    assert_eq!(Notice::repressed_tid(&old), None, "class version 2");
    let mut bad = repress.to_bytes();
    bad[0] = 2;
    assert_eq!(Notice::repressed_tid(&Smp::parse(&bad).unwrap()), None);
}
