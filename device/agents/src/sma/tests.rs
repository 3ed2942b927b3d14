//! The device's agent, SMP by SMP: every attribute's Get and Set, the
//! statuses of bad requests, the M_Key levels, directed routes.

use ibtca_protocol::mad::attr::{
    id, GuidInfo, NodeDescription, NodeInfo, NodeType, PKeyTable, PortInfo, PortState,
};
use ibtca_protocol::mad::{
    directed, method, smp_of_packet, smp_packet, MadStatus, Smp, SmpRoute, PERMISSIVE_LID,
};
use ibtca_protocol::PacketView;

use super::DeviceSma;

const SM_LID: u16 = 9;

fn sma(managed: bool) -> DeviceSma {
    let mut s = DeviceSma::new(
        0x1200_0000_0000_0011,
        0x1200_0000_0000_0012,
        "n1",
        5,
        4,
        managed,
    );
    s.link_changed(true);
    s
}

/// Sends `smp` LID-routed from the SM; the reply, if any.
fn ask(s: &mut DeviceSma, smp: &Smp) -> Option<Smp> {
    let bytes = smp_packet(smp, SM_LID, s.lid()).build().unwrap();
    let out = s.on_packet(&PacketView::parse(&bytes).unwrap());
    let reply = out.reply?;
    let view = PacketView::parse(&reply).expect("the reply is a valid packet");
    assert_eq!((view.lrh.vl, view.bth.dest_qp), (15, 0));
    if smp.route == SmpRoute::Lid {
        assert_eq!((view.lrh.slid, view.lrh.dlid), (s.lid(), SM_LID));
    }
    let r = smp_of_packet(&view).unwrap();
    assert_eq!(
        (r.method, r.tid, r.attr_id),
        (method::GET_RESP, smp.tid, smp.attr_id)
    );
    Some(r)
}

fn get(attr: u16, modifier: u32) -> Smp {
    let mut smp = Smp::new(SmpRoute::Lid, method::GET, attr, modifier);
    smp.tid = 0x77;
    smp
}

fn set(attr: u16, modifier: u32, data: [u8; 64]) -> Smp {
    let mut smp = Smp::new(SmpRoute::Lid, method::SET, attr, modifier);
    smp.data = data;
    smp
}

fn port_info(s: &mut DeviceSma) -> PortInfo {
    PortInfo::decode(&ask(s, &get(id::PORT_INFO, 1)).unwrap().data)
}

#[test]
fn node_info_and_description() {
    let mut s = sma(false);
    let r = ask(&mut s, &get(id::NODE_INFO, 0)).unwrap();
    assert_eq!(r.status, MadStatus::OK);
    let n = NodeInfo::decode(&r.data);
    assert_eq!(
        (n.node_type, n.num_ports, n.local_port_num),
        (NodeType::Ca, 1, 1)
    );
    assert_eq!(
        (n.node_guid, n.port_guid),
        (0x1200_0000_0000_0011, 0x1200_0000_0000_0012)
    );
    assert_eq!(n.partition_cap, 64);
    let r = ask(&mut s, &get(id::NODE_DESCRIPTION, 0)).unwrap();
    assert_eq!(NodeDescription::decode(&r.data).0, "n1");
}

#[test]
fn port_info_without_an_sm_is_active_with_its_lid() {
    let mut s = sma(false);
    let p = port_info(&mut s);
    assert_eq!(
        (p.lid, p.port_state, p.phys_state),
        (5, PortState::Active as u8, 5)
    );
    assert_eq!((p.mtu_cap, p.neighbor_mtu, p.link_width_active), (5, 5, 2));
    assert_eq!(p.local_port_num, 1);
    s.link_changed(false);
    let p = port_info(&mut s);
    assert_eq!((p.port_state, p.phys_state), (PortState::Down as u8, 2));
}

#[test]
fn the_sm_gives_the_lid_and_walks_the_port_to_active() {
    let mut s = sma(true);
    assert_eq!(port_info(&mut s).port_state, PortState::Init as u8);
    let mut p = port_info(&mut s);
    p.lid = 0x21;
    p.master_sm_lid = SM_LID;
    p.master_sm_sl = 3;
    p.lmc = 1;
    p.port_state = PortState::Active as u8;
    let r = ask(&mut s, &set(id::PORT_INFO, 1, p.encode())).unwrap();
    assert_eq!(
        r.status,
        MadStatus::INVALID_ATTR_VALUE,
        "Init → Active skips Armed"
    );
    assert_eq!(s.lid(), 5, "a refused Set changes nothing");
    p.port_state = PortState::Armed as u8;
    let r = ask(&mut s, &set(id::PORT_INFO, 1, p.encode())).unwrap();
    assert_eq!(r.status, MadStatus::OK);
    let got = PortInfo::decode(&r.data);
    assert_eq!(
        (got.lid, got.master_sm_lid, got.master_sm_sl, got.lmc),
        (0x21, SM_LID, 3, 1)
    );
    assert_eq!(s.state(), PortState::Armed);
    p.port_state = PortState::Active as u8;
    let r = ask(&mut s, &set(id::PORT_INFO, 0, p.encode())).unwrap();
    assert_eq!((r.status, s.state()), (MadStatus::OK, PortState::Active));
    // Down: the link trains again, to Init.
    p.port_state = PortState::Down as u8;
    ask(&mut s, &set(id::PORT_INFO, 1, p.encode())).unwrap();
    assert_eq!(s.state(), PortState::Init);
    for (field, bad) in [("phys", 3u8), ("mtu", 6), ("width", 0x10)] {
        let mut q = port_info(&mut s);
        match field {
            "phys" => q.phys_state = bad,
            "mtu" => q.neighbor_mtu = bad,
            _ => q.link_width_enabled = bad,
        }
        let r = ask(&mut s, &set(id::PORT_INFO, 1, q.encode())).unwrap();
        assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE, "{field} {bad}");
    }
    let mut q = port_info(&mut s);
    q.lid = 0xc000;
    let r = ask(&mut s, &set(id::PORT_INFO, 1, q.encode())).unwrap();
    assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE, "a multicast LID");
}

/// A device's VLHighLimit is the SM's: Set, kept, read back, and a
/// refused Set leaves it alone; both VLArbitrationTables hold 64 entries.
#[test]
fn vl_high_limit_is_set_and_read_back() {
    let mut s = sma(true);
    let mut p = port_info(&mut s);
    assert_eq!(
        (p.vl_high_limit, p.vl_arb_high_cap, p.vl_arb_low_cap),
        (0, 64, 64)
    );
    p.vl_high_limit = 7;
    p.port_state = PortState::NoChange as u8;
    let r = ask(&mut s, &set(id::PORT_INFO, 1, p.encode())).unwrap();
    assert_eq!(
        (r.status, PortInfo::decode(&r.data).vl_high_limit),
        (MadStatus::OK, 7)
    );
    assert_eq!(port_info(&mut s).vl_high_limit, 7);
    p.vl_high_limit = 9;
    p.neighbor_mtu = 6;
    let r = ask(&mut s, &set(id::PORT_INFO, 1, p.encode())).unwrap();
    assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE);
    assert_eq!(
        port_info(&mut s).vl_high_limit,
        7,
        "the whole Set or nothing"
    );
}

#[test]
fn bad_requests_get_the_right_status() {
    let mut s = sma(false);
    let cases = [
        (get(0x00ff, 0), MadStatus::UNSUPPORTED_METHOD_ATTR),
        (get(id::SWITCH_INFO, 0), MadStatus::UNSUPPORTED_METHOD_ATTR),
        (
            set(id::NODE_INFO, 0, [0; 64]),
            MadStatus::UNSUPPORTED_METHOD_ATTR,
        ),
        (get(id::PORT_INFO, 2), MadStatus::INVALID_ATTR_VALUE),
        (get(id::NODE_INFO, 1), MadStatus::INVALID_ATTR_VALUE),
        (get(id::P_KEY_TABLE, 2), MadStatus::INVALID_ATTR_VALUE),
        (get(id::GUID_INFO, 1), MadStatus::INVALID_ATTR_VALUE),
    ];
    for (smp, status) in cases {
        let r = ask(&mut s, &smp).unwrap();
        assert_eq!(r.status, status, "{:#x}/{}", smp.attr_id, smp.attr_mod);
        assert_eq!(r.data, smp.data, "an error answer echoes the data");
    }
    let mut send = get(id::NODE_INFO, 0);
    send.method = method::SEND;
    assert_eq!(
        ask(&mut s, &send).unwrap().status,
        MadStatus::UNSUPPORTED_METHOD
    );
    let mut v2 = get(id::NODE_INFO, 0);
    v2.class_version = 2;
    assert_eq!(ask(&mut s, &v2).unwrap().status, MadStatus::BAD_VERSION);
    // SMInfo and responses are the SM's: no answer, counted.
    assert!(ask(&mut s, &get(id::SM_INFO, 0)).is_none());
    let mut resp = get(id::NODE_INFO, 0);
    resp.method = method::GET_RESP;
    assert!(ask(&mut s, &resp).is_none());
    assert_eq!(s.stats().for_sm, 2);
}

#[test]
fn m_key_protection_levels() {
    const KEY: u64 = 0x1234_5678_9abc_def0;
    let mut s = sma(false);
    let mut p = port_info(&mut s);
    p.m_key = KEY;
    p.m_key_protect = 1;
    p.m_key_lease_period = 60;
    assert_eq!(
        ask(&mut s, &set(id::PORT_INFO, 1, p.encode()))
            .unwrap()
            .status,
        MadStatus::OK
    );
    // Level 1: a Get with a wrong key is answered, the key hidden.
    let hidden = port_info(&mut s);
    assert_eq!(
        (
            hidden.m_key,
            hidden.m_key_protect,
            hidden.m_key_lease_period
        ),
        (0, 1, 60)
    );
    let mut right = get(id::PORT_INFO, 1);
    right.m_key = KEY;
    assert_eq!(
        PortInfo::decode(&ask(&mut s, &right).unwrap().data).m_key,
        KEY
    );
    // A Set with a wrong key: no answer, nothing changed, a violation.
    let mut q = hidden;
    q.lid = 77;
    assert!(ask(&mut s, &set(id::PORT_INFO, 1, q.encode())).is_none());
    assert_eq!(s.lid(), 5);
    assert_eq!(port_info(&mut s).m_key_violations, 1);
    // Level 2: even Gets need the key.
    let mut keyed = set(id::PORT_INFO, 1, {
        let mut r = PortInfo::decode(&ask(&mut s, &right).unwrap().data);
        r.m_key_protect = 2;
        r.encode()
    });
    keyed.m_key = KEY;
    assert_eq!(ask(&mut s, &keyed).unwrap().status, MadStatus::OK);
    assert!(ask(&mut s, &get(id::NODE_INFO, 0)).is_none());
    assert!(ask(&mut s, &right).is_some());
}

#[test]
fn p_key_matching_full_and_limited_members() {
    use super::pkey_held;
    let table = [0xffff, 0x0123, 0x8456, 0, 0, 0];
    // The default partition: a full member admits both memberships.
    assert!(pkey_held(&table, 0xffff) && pkey_held(&table, 0x7fff));
    // Limited 0x0123 talks only to full members.
    assert!(pkey_held(&table, 0x8123));
    assert!(!pkey_held(&table, 0x0123), "two limited members");
    // Full 0x8456 admits both.
    assert!(pkey_held(&table, 0x0456) && pkey_held(&table, 0x8456));
    // Not in the table, and the invalid base 0 (which empty entries hold).
    assert!(!pkey_held(&table, 0x8999));
    assert!(!pkey_held(&table, 0x8000) && !pkey_held(&table, 0x0000));
    let mut s = sma(false);
    assert!(s.admit_pkey(&PacketView::parse(&ud_packet(0xffff)).unwrap()));
    assert!(!s.admit_pkey(&PacketView::parse(&ud_packet(0x8001)).unwrap()));
    assert_eq!(port_info(&mut s).p_key_violations, 1);
}

/// A UD SEND from LID 3 QP 0x33 to QP 0x44 at LID 5, SL 2, P_Key `pkey`.
fn ud_packet(pkey: u16) -> Vec<u8> {
    use ibtca_protocol::headers::Deth;
    use ibtca_protocol::Packet;
    let deth = Deth {
        qkey: 7,
        src_qp: 0x33,
    };
    let mut p = Packet::datagram(3, 5, 0x44, deth, Vec::new());
    (p.lrh.sl, p.bth.pkey) = (2, pkey);
    p.build().unwrap()
}

#[test]
fn a_p_key_violation_is_trap_257_to_the_sm_once_it_is_known() {
    use ibtca_protocol::mad::attr::{trap, KeyViolation, Notice};
    let mut s = sma(false);
    let bad = ud_packet(0x8001);
    s.p_key_violation(&PacketView::parse(&bad).unwrap());
    let now = std::time::Instant::now;
    assert!(s.due_trap(now()).is_none(), "no SM known: no trap");
    let mut p = port_info(&mut s);
    p.master_sm_lid = SM_LID;
    assert_eq!(
        ask(&mut s, &set(id::PORT_INFO, 1, p.encode()))
            .unwrap()
            .status,
        MadStatus::OK
    );
    s.p_key_violation(&PacketView::parse(&bad).unwrap());
    let packet = s.due_trap(now()).expect("trap 257 due");
    let view = PacketView::parse(&packet).unwrap();
    assert_eq!((view.lrh.slid, view.lrh.dlid), (5, SM_LID));
    let smp = smp_of_packet(&view).unwrap();
    assert_eq!((smp.method, smp.attr_id), (method::TRAP, id::NOTICE));
    let n = Notice::decode(&smp.data);
    assert_eq!((n.trap_number, n.issuer_lid), (trap::BAD_P_KEY, 5));
    let want = KeyViolation {
        slid: 3,
        dlid: 5,
        key: 0x8001,
        sl: 2,
        src_qp: 0x33,
        dest_qp: 0x44,
        ..KeyViolation::default()
    };
    assert_eq!(n.key_violation(), want);
    assert_eq!(port_info(&mut s).p_key_violations, 2);
}

#[test]
fn p_key_table_and_guid_info() {
    let mut s = sma(false);
    let r = ask(&mut s, &get(id::P_KEY_TABLE, 0)).unwrap();
    assert_eq!(PKeyTable::decode(&r.data).0[0], 0xffff);
    let mut keys = [0u16; 32];
    keys[3] = 0x8123;
    let r = ask(&mut s, &set(id::P_KEY_TABLE, 1, PKeyTable(keys).encode())).unwrap();
    assert_eq!(
        (r.status, PKeyTable::decode(&r.data).0),
        (MadStatus::OK, keys)
    );
    assert_eq!(s.pkeys()[32 + 3], 0x8123);
    assert_eq!(s.pkeys()[0], 0xffff, "block 0 untouched");
    let r = ask(
        &mut s,
        &set(
            id::GUID_INFO,
            0,
            GuidInfo([1, 2, 3, 4, 5, 6, 7, 8]).encode(),
        ),
    )
    .unwrap();
    let g = GuidInfo::decode(&r.data).0;
    assert_eq!(
        g,
        [0x1200_0000_0000_0012, 2, 3, 4, 5, 6, 7, 8],
        "index 0 is the port GUID"
    );
}

#[test]
fn a_directed_smp_is_answered_back_along_its_path() {
    let mut s = sma(true);
    // The SM is one switch away: out of its port 1, the switch's 3.
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 3]).unwrap();
    directed::begin(&mut smp).unwrap();
    assert_eq!(
        directed::on_receive(&mut smp, true, 6, 8),
        directed::DrStep::Forward(3)
    );
    let bytes = smp_packet(&smp, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    let reply = s
        .on_packet(&PacketView::parse(&bytes).unwrap())
        .reply
        .unwrap();
    let view = PacketView::parse(&reply).unwrap();
    assert_eq!(
        (view.lrh.slid, view.lrh.dlid),
        (PERMISSIVE_LID, PERMISSIVE_LID)
    );
    let mut r = smp_of_packet(&view).unwrap();
    assert!(r.direction);
    assert_eq!((r.hop_ptr, r.return_path[1], r.return_path[2]), (2, 6, 1));
    assert_eq!(NodeInfo::decode(&r.data).node_type, NodeType::Ca);
    assert_eq!(
        directed::on_receive(&mut r, true, 3, 8),
        directed::DrStep::Forward(6)
    );
    // A CA is never in the middle of a path.
    let mut mid = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 1, 2]).unwrap();
    directed::begin(&mut mid).unwrap();
    let bytes = smp_packet(&mid, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    assert!(s
        .on_packet(&PacketView::parse(&bytes).unwrap())
        .reply
        .is_none());
    assert_eq!(s.stats().dropped, 1);
}

/// A VLArbitrationTable Set or a new VLHighLimit changes the port's
/// arbitration, and the outcome says so; Gets and other Sets do not.
#[test]
fn vl_arbitration_sets_change_the_port_s_arbitration() {
    use ibtca_link::HighPriority;
    let mut s = sma(false);
    s.set_vl_weights(&[4, 0, 2]);
    assert_eq!(s.low_priority(), [(0, 4), (2, 2)], "the configured weights");
    assert_eq!(s.high_priority(), HighPriority::default());
    let changed = |s: &mut DeviceSma, smp: &Smp| {
        let bytes = smp_packet(smp, SM_LID, s.lid()).build().unwrap();
        s.on_packet(&PacketView::parse(&bytes).unwrap())
            .arbitration_changed
    };
    assert!(!changed(&mut s, &get(id::VL_ARB_TABLE, (1 << 16) | 1)));
    let mut block = [0u8; 64];
    block[..4].copy_from_slice(&[5, 8, 1, 0]);
    assert!(changed(&mut s, &set(id::VL_ARB_TABLE, 3 << 16, block)));
    assert_eq!(s.high_priority().entries, [(5, 8)], "port 0: this port");
    assert!(
        !changed(&mut s, &set(id::VL_ARB_TABLE, 3 << 16, block)),
        "the same again"
    );
    let mut p = port_info(&mut s);
    p.vl_high_limit = 4;
    p.port_state = PortState::NoChange as u8;
    assert!(changed(&mut s, &set(id::PORT_INFO, 1, p.encode())));
    assert_eq!(s.high_priority().limit, 4);
    // Block 5, port 2: refused, nothing changed.
    for bad in [(5 << 16) | 1, (2 << 16) | 2] {
        let r = ask(&mut s, &set(id::VL_ARB_TABLE, bad, [1; 64])).unwrap();
        assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE, "{bad:#x}");
    }
    assert_eq!(s.low_priority(), [(0, 4), (2, 2)]);
}
