//! A managed switch's port gates: what changes one port's state (its link,
//! a PortInfo Set naming it) re-gates that port and no other, and SMPs
//! pass through ports the SM has not made Active.

use std::sync::Arc;

use ibtca_link::{LinkEndpoint, LinkEvent, LocalPort};
use ibtca_protocol::headers::Deth;
use ibtca_protocol::mad::attr::{id, PortInfo, PortState, SwitchInfo};
use ibtca_protocol::mad::{method, smp_of_packet, smp_packet, MadStatus, Smp, PERMISSIVE_LID};
use ibtca_protocol::{Packet, PacketView};

use crate::collect_wires::CollectWires;
use crate::{Core, Origin, PortConfig, SwitchConfig, Wires};

/// LID routed to port 2 by the switch's configuration.
const LID_ON_2: u16 = 2;

/// A managed switch of 4 ports, every link up (ports Init, so no gate
/// open), LID 2 routed to port 2.
fn switch() -> (Core, Arc<CollectWires>) {
    let wires = Arc::new(CollectWires::default());
    let cfg = SwitchConfig {
        name: "sw".into(),
        guid: 0x100,
        lid: 0,
        ports: (0..4)
            .map(|_| PortConfig::new(LinkEndpoint::Listen("-".into())))
            .collect(),
        routes: vec![(LID_ON_2, 2)],
        link: Default::default(),
        sm_managed: true,
    };
    let core = Core::new(cfg, Arc::clone(&wires) as Arc<dyn Wires>).unwrap();
    for port in 1..=4u8 {
        core.on_event(port, LinkEvent::Up { peer: peer(port) });
    }
    wires.take();
    (core, wires)
}

fn peer(port: u8) -> LocalPort {
    LocalPort {
        node_guid: 0x200 + u64::from(port),
        port: 1,
        lid: 0,
    }
}

fn gates(core: &Core) -> Vec<bool> {
    core.slots.iter().map(|s| s.is_active()).collect()
}

/// The SM's directed SMP as it reaches the switch (its only hop) on
/// `in_port`; the switch's answer.
fn ask(core: &Core, wires: &CollectWires, in_port: u8, smp: &Smp) -> Smp {
    let mut smp = smp.clone();
    smp.hop_ptr = 1;
    let packet = smp_packet(&smp, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    core.on_packet(in_port, packet, Origin::Wire);
    let sent = wires.take();
    assert_eq!(sent.len(), 1, "one answer: {sent:?}");
    assert_eq!(sent[0].0, in_port, "back the way it came");
    smp_of_packet(&PacketView::parse(&sent[0].1).unwrap()).unwrap()
}

fn port_info(core: &Core, wires: &CollectWires, in_port: u8, port: u8) -> PortInfo {
    let get = Smp::directed(method::GET, id::PORT_INFO, port.into(), &[1]).unwrap();
    let r = ask(core, wires, in_port, &get);
    assert_eq!(r.status, MadStatus::OK);
    PortInfo::decode(&r.data)
}

/// Sets `port`'s state by a PortInfo Set (built from its Get) coming in
/// on `in_port`; the answer's status.
fn set_state(
    core: &Core,
    wires: &CollectWires,
    in_port: u8,
    port: u8,
    state: PortState,
) -> MadStatus {
    let mut info = port_info(core, wires, in_port, port);
    info.port_state = state as u8;
    let mut set = Smp::directed(method::SET, id::PORT_INFO, port.into(), &[1]).unwrap();
    set.data = info.encode();
    ask(core, wires, in_port, &set).status
}

/// A UD data packet to `dlid`, in on `in_port`: the ports it left by.
fn data(core: &Core, wires: &CollectWires, in_port: u8, dlid: u16) -> Vec<u8> {
    let deth = Deth {
        qkey: 1,
        src_qp: 0x22,
    };
    let p = Packet::datagram(9, dlid, 0x11, deth, vec![7; 32]);
    core.on_packet(in_port, p.build().unwrap(), Origin::Wire);
    wires.take().into_iter().map(|(port, _)| port).collect()
}

fn inactive_drops(core: &Core, port: u8) -> u64 {
    core.slot(port).unwrap().stats().drop_port_inactive
}

#[test]
fn a_port_info_set_re_gates_the_port_it_names_and_no_other() {
    let (core, wires) = switch();
    assert_eq!(gates(&core), [false; 4], "Init ports carry no data");
    assert!(data(&core, &wires, 1, LID_ON_2).is_empty());
    assert_eq!(inactive_drops(&core, 1), 1);
    // A witness: port 4's gate set against its state (Init). Whatever
    // re-gates every port closes it; re-gating one port at a time leaves
    // it open.
    core.slot(4).unwrap().set_active(true);
    // The SM comes in by port 3, which stays Init: SMPs pass all along.
    for state in [PortState::Armed, PortState::Active] {
        for port in [1, 2] {
            assert_eq!(set_state(&core, &wires, 3, port, state), MadStatus::OK);
        }
    }
    assert_eq!(gates(&core), [true, true, false, true]);
    assert_eq!(
        data(&core, &wires, 1, LID_ON_2),
        [2],
        "1 → 2 now carries data"
    );
    // A Set the port's state machine refuses changes no gate.
    assert_ne!(
        set_state(&core, &wires, 3, 3, PortState::Active),
        MadStatus::OK,
        "Init → Active is refused"
    );
    // Other Sets do not touch the ports' states: no gate moves.
    let mut sw_info = Smp::directed(method::SET, id::SWITCH_INFO, 0, &[1]).unwrap();
    sw_info.data = SwitchInfo::default().encode();
    assert_eq!(ask(&core, &wires, 3, &sw_info).status, MadStatus::OK);
    assert_eq!(gates(&core), [true, true, false, true]);
    // A later Get through another (Init) port is answered.
    let get = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    assert_eq!(ask(&core, &wires, 3, &get).status, MadStatus::OK);
    // Down from Active: the link trains again, to Init; port 2 closes.
    assert_eq!(
        set_state(&core, &wires, 3, 2, PortState::Down),
        MadStatus::OK
    );
    assert_eq!(gates(&core), [true, false, false, true]);
    assert!(data(&core, &wires, 1, LID_ON_2).is_empty());
    assert_eq!(inactive_drops(&core, 2), 1, "counted on the closed port");
}

#[test]
fn a_link_change_re_gates_its_port_and_no_other() {
    let (core, wires) = switch();
    for state in [PortState::Armed, PortState::Active] {
        for port in [1, 2] {
            assert_eq!(set_state(&core, &wires, 3, port, state), MadStatus::OK);
        }
    }
    core.slot(4).unwrap().set_active(true);
    let down = LinkEvent::Down {
        reason: "test".into(),
    };
    core.on_event(2, down);
    assert_eq!(gates(&core), [true, false, false, true]);
    assert!(data(&core, &wires, 1, LID_ON_2).is_empty());
    core.on_event(2, LinkEvent::Up { peer: peer(2) });
    assert_eq!(gates(&core), [true, false, false, true], "up again: Init");
    assert_eq!(
        port_info(&core, &wires, 3, 2).port_state,
        PortState::Init as u8
    );
}

/// A Set of `attr` for `modifier` with `data`, in on port 1: its status.
fn set(core: &Core, wires: &CollectWires, attr: u16, modifier: u32, data: [u8; 64]) -> MadStatus {
    let mut set = Smp::directed(method::SET, attr, modifier, &[1]).unwrap();
    set.data = data;
    ask(core, wires, 1, &set).status
}

#[test]
fn a_ports_arbitration_follows_port_info_and_table_sets_in_any_order() {
    use ibtca_protocol::mad::attr::{VlArbBlock, VlArbEntry};
    let (core, wires) = switch();
    let slot = core.slot(3).unwrap();
    let high_limit = |limit: u8| {
        let mut info = port_info(&core, &wires, 1, 3);
        info.vl_high_limit = limit;
        set(&core, &wires, id::PORT_INFO, 3, info.encode())
    };
    let table = |block: u32, vl: u8, weight: u8| {
        let mut entries = [VlArbEntry::default(); 32];
        entries[0] = VlArbEntry { vl, weight };
        let modifier = (block << 16) | 3;
        set(
            &core,
            &wires,
            id::VL_ARB_TABLE,
            modifier,
            VlArbBlock(entries).encode(),
        )
    };
    assert_eq!(high_limit(5), MadStatus::OK);
    assert_eq!(slot.high_priority().limit, 5);
    assert_eq!(high_limit(5), MadStatus::OK, "the same again");
    // A table Set after PortInfo Sets, and a PortInfo Set after it.
    assert_eq!(table(1, 0, 9), MadStatus::OK);
    assert_eq!(slot.low_priority(), [(0, 9)]);
    assert_eq!(high_limit(6), MadStatus::OK);
    assert_eq!(slot.high_priority().limit, 6);
    assert_eq!(table(3, 1, 4), MadStatus::OK);
    assert_eq!(slot.high_priority().entries, [(1, 4)]);
    assert_eq!(slot.high_priority().limit, 6);
    assert_eq!(slot.low_priority(), [(0, 9)]);
}
