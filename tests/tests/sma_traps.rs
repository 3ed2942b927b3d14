//! Trap 128 from a switch to the SM (no VM). The fabric:
//!
//! ```text
//!  SM (LID 1) ── 1 sw 2 ── host (LID 2)
//!                   3 ── host (LID 3)
//! ```
//!
//! Once the SM gave the switch its LID and the SM's (port 0's PortInfo),
//! a link going down or up sends a SubnTrap of a Notice (generic, urgent,
//! producer switch, trap 128, the switch's LID) LID-routed on VL15 to the
//! SM, repeated every SubnetTimeOut until the SM's TrapRepress of its TID;
//! without the SM's LID nothing is sent; a TrapRepress that is malformed
//! or names another TID is ignored and counted, the trap goes on.
//!
//! A device whose host changes its capability mask (SET_PORT_CAPS: IsSM)
//! sends trap 144 (informational, producer CA, the new mask) the same way,
//! once the SM set its LID and the SM's.

use std::time::{Duration, Instant};

use ibtca_device::link::{Link, LinkConfig, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_protocol::mad::attr::{
    cap, id, notice_type, producer, trap, NodeInfo, Notice, PortInfo, PortState,
};
use ibtca_protocol::mad::{method, smp_of_packet, smp_packet, Smp, SmpRoute, QP0};
use ibtca_protocol::PacketView;
use ibtca_switch::{PortConfig, Switch, SwitchConfig, TrapCounts};
use ibtca_tests::links::start_link;
use ibtca_tests::sm_client::{SmClient, WAIT};
use ibtca_tests::TempDir;

const SW_GUID: u64 = 0x1200_0000_0000_f0a1;
const SW_LID: u16 = 0x30;
const SM_LID: u16 = 1;
/// Port 0's SubnetTimeOut in these tests: 4.096 µs × 2^14 ≈ 67 ms between
/// repeats.
const SUBNET_TIMEOUT: u8 = 14;
const INTERVAL: Duration = Duration::from_millis(68);

struct Fabric {
    sm: SmClient,
    sw: Switch,
    _hosts: Vec<(Link, std::sync::mpsc::Receiver<LinkEvent>)>,
    _dir: TempDir,
}

fn fabric(name: &str) -> Fabric {
    let dir = TempDir::new(name);
    let p = |n: &str| dir.join(n);
    let sw = Switch::start(SwitchConfig {
        name: "sw".into(),
        guid: SW_GUID,
        lid: 0,
        ports: (1..=3)
            .map(|i| PortConfig::new(LinkEndpoint::Listen(p(&format!("p{i}")))))
            .collect(),
        routes: Vec::new(),
        link: LinkConfig::default(),
        sm_managed: false,
    })
    .unwrap();
    let sm = SmClient::start(LinkEndpoint::Connect(p("p1")), SM_LID);
    let hosts = (2..=3u16)
        .map(|lid| {
            let local = LocalPort {
                node_guid: 0xa0 + u64::from(lid),
                port: 1,
                lid,
            };
            start_link(
                LinkEndpoint::Connect(p(&format!("p{lid}"))),
                local,
                LinkConfig::default(),
            )
        })
        .collect();
    // A port's reader counts its link's change in the trap counters (as
    // `no_sm`: no SM is known yet) after it shows the port up: wait for
    // the three counts too.
    let deadline = Instant::now() + WAIT;
    while !((1..=3).all(|port| sw.is_port_up(port))
        && sw.lft().lookup(SM_LID) == Some(1)
        && sw.trap_counts().no_sm == 3)
    {
        assert!(
            Instant::now() < deadline,
            "the fabric never came up: {:?}",
            sw.trap_counts()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Fabric {
        sm,
        sw,
        _hosts: hosts,
        _dir: dir,
    }
}

/// Sends `smp` (by directed route to the switch) and returns the answer,
/// skipping traps that were already on their way.
fn ask(sm: &mut SmClient, smp: Smp) -> Smp {
    ask_counting_traps(sm, smp).0
}

/// [`ask`], and how many traps it skipped.
fn ask_counting_traps(sm: &mut SmClient, mut smp: Smp) -> (Smp, u64) {
    sm.send(&mut smp, 0);
    let mut traps = 0;
    loop {
        let (reply, _, _, _) = sm.next_smp();
        if reply.method == method::TRAP {
            traps += 1;
            continue;
        }
        assert_eq!(reply.tid, smp.tid, "the answer to the request just sent");
        return (reply, traps);
    }
}

/// The SM gives the switch LID [`SW_LID`], its own LID as MasterSMLID and
/// SubnetTimeOut [`SUBNET_TIMEOUT`].
fn tell_the_switch_the_sm(f: &mut Fabric) {
    let get = Smp::directed(method::GET, id::PORT_INFO, 0, &[1]).unwrap();
    let mut p0 = PortInfo::decode(&ask(&mut f.sm, get).data);
    // Port 0 sends traps, and says so.
    assert_ne!(p0.capability_mask & cap::IS_TRAP_SUPPORTED, 0);
    p0.lid = SW_LID;
    p0.master_sm_lid = SM_LID;
    p0.subnet_timeout = SUBNET_TIMEOUT;
    p0.port_state = PortState::NoChange as u8;
    let mut set = Smp::directed(method::SET, id::PORT_INFO, 0, &[1]).unwrap();
    set.data = p0.encode();
    let r = ask(&mut f.sm, set);
    assert_eq!(r.status.0, 0);
    assert_eq!(f.sw.lid(), SW_LID);
}

/// The next packet for the SM, checked to be trap 128 from the switch
/// exactly as IBA lays it out; returns its TID.
fn next_trap(sm: &SmClient) -> u64 {
    let packet = sm.next_packet();
    let view = PacketView::parse(&packet).expect("a valid packet");
    assert_eq!(
        (view.lrh.vl, view.lrh.slid, view.lrh.dlid, view.bth.dest_qp),
        (15, SW_LID, SM_LID, QP0),
        "LID-routed on VL15 from the switch to the SM's QP0"
    );
    let deth = view.ext.deth.expect("a DETH");
    assert_eq!((deth.src_qp, deth.qkey), (QP0, 0));
    let smp = smp_of_packet(&view).expect("an SMP");
    assert_eq!(
        (
            smp.route,
            smp.method,
            smp.attr_id,
            smp.attr_mod,
            smp.status.0
        ),
        (SmpRoute::Lid, method::TRAP, id::NOTICE, 0, 0),
        "a SubnTrap of a Notice"
    );
    assert_eq!((smp.base_version, smp.class_version), (1, 1));
    let notice = Notice::decode(&smp.data);
    let mut details = [0u8; 54];
    details[..2].copy_from_slice(&SW_LID.to_be_bytes());
    assert_eq!(
        notice,
        Notice {
            generic: true,
            notice_type: notice_type::URGENT,
            producer: producer::SWITCH,
            trap_number: trap::LINK_STATE_CHANGE,
            issuer_lid: SW_LID,
            toggle: false,
            count: 0,
            details,
        }
    );
    smp.tid
}

/// Sends a TrapRepress of `tid` (from a trap's SMP, changed by `edit`) to
/// the switch's LID.
fn repress(sm: &SmClient, tid: u64, edit: impl FnOnce(&mut Smp)) {
    let mut smp = Notice::link_state_change(SW_LID).trap_smp(tid);
    smp.method = method::TRAP_REPRESS;
    edit(&mut smp);
    let bytes = smp_packet(&smp, SM_LID, SW_LID).build().unwrap();
    sm.link
        .send(bytes)
        .expect("the SM's link takes the repress");
}

fn wait_counts(sw: &Switch, what: &str, done: impl Fn(&TrapCounts) -> bool) -> TrapCounts {
    let deadline = Instant::now() + WAIT;
    loop {
        let c = sw.trap_counts();
        if done(&c) {
            return c;
        }
        assert!(Instant::now() < deadline, "{what}: {c:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// After a repress: the SM has read `read` of the `sent` traps of `tid`
/// the sender counted when the repress was counted. Waits for the others
/// (sent before the repress, still on their way: as many as a loaded
/// machine delayed; `WAIT` is a hang guard), each checked to carry `tid`;
/// then checks over ten more intervals that no trap arrives and that
/// `sent_now` stays `sent`: the repress stopped the repeats.
fn expect_no_repeat(
    sm: &SmClient,
    tid: u64,
    read: u64,
    sent: u64,
    mut sent_now: impl FnMut() -> u64,
) {
    assert!(read <= sent, "{read} traps read, {sent} sent");
    for _ in read..sent {
        let p = sm.next_packet();
        let s = smp_of_packet(&PacketView::parse(&p).unwrap()).unwrap();
        assert_eq!((s.method, s.tid), (method::TRAP, tid), "{s:?}");
    }
    // Absence over a span: a starved sender could only hide a repeat
    // here, never make this fail without one.
    std::thread::sleep(INTERVAL * 10);
    let late = sm.arrived_packets();
    assert!(late.is_empty(), "{} traps after the repress", late.len());
    assert_eq!(sent_now(), sent, "repressed: no repeat");
}

#[test]
fn a_link_change_sends_trap_128_until_the_sm_represses_it() {
    let mut f = fabric("trap-128");
    tell_the_switch_the_sm(&mut f);
    let start = f.sw.trap_counts();
    assert_eq!(start.sent, 0, "no change since the SM came");
    assert_eq!(start.no_sm, 3, "three links came up before the SM");
    f.sw.port_down(2).unwrap();
    let tid = next_trap(&f.sm);
    // Not repressed: sent again, the same trap.
    assert_eq!(next_trap(&f.sm), tid, "the repeat carries the same TID");
    repress(&f.sm, tid, |_| {});
    let c = wait_counts(&f.sw, "the repress counted", |c| c.repressed == 1);
    assert_eq!((c.stray_represses, c.unanswered), (0, 0));
    // No more repeats: the sends counted before the repress arrive (two
    // read above), then nothing.
    expect_no_repeat(&f.sm, tid, 2, c.sent, || f.sw.trap_counts().sent);

    // The link coming back is a new change: a new trap, a new TID.
    f.sw.port_up(2).unwrap();
    let again = next_trap(&f.sm);
    assert_ne!(again, tid);
    repress(&f.sm, again, |_| {});
    let c = wait_counts(&f.sw, "the second repress", |c| c.repressed == 2);
    assert_eq!((c.no_sm, c.unrouted), (start.no_sm, 0), "{c:?}");
    // The SM cleared nothing: PortStateChange is set.
    let info = ask(
        &mut f.sm,
        Smp::directed(method::GET, id::SWITCH_INFO, 0, &[1]).unwrap(),
    );
    assert!(ibtca_protocol::mad::attr::SwitchInfo::decode(&info.data).port_state_change);
    // The control socket's `traps` reports the same counters.
    let reply = ibtca_switch::control::execute(&f.sw, "traps");
    let json: serde_json::Value = serde_json::from_str(reply.strip_prefix("ok ").unwrap()).unwrap();
    let now = f.sw.trap_counts();
    assert_eq!(json["sent"], now.sent, "{reply}");
    assert_eq!(
        (json["repressed"].as_u64(), json["no_sm"].as_u64()),
        (Some(2), Some(3))
    );
}

#[test]
fn without_the_sms_lid_no_trap_is_sent() {
    let mut f = fabric("trap-no-sm");
    let before = f.sw.trap_counts();
    f.sw.port_down(3).unwrap();
    let c = wait_counts(&f.sw, "the change counted", |c| c.no_sm == before.no_sm + 1);
    assert_eq!(c.sent, 0);
    // The next packet the SM gets is the answer to its request, no trap.
    let mut get = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    f.sm.send(&mut get, 0);
    let (reply, _, _, _) = f.sm.next_smp();
    assert_eq!(
        (reply.method, reply.tid),
        (method::GET_RESP, get.tid),
        "{reply:?}"
    );
    assert_eq!(f.sw.trap_counts().sent, 0);
}

#[test]
fn a_malformed_trap_repress_is_ignored() {
    let mut f = fabric("trap-bad-repress");
    tell_the_switch_the_sm(&mut f);
    f.sw.port_down(3).unwrap();
    let tid = next_trap(&f.sm);
    repress(&f.sm, tid + 1, |_| {});
    repress(&f.sm, tid, |s| s.attr_id = id::PORT_INFO);
    repress(&f.sm, tid, |s| s.class_version = 2);
    repress(&f.sm, tid, |s| s.base_version = 7);
    // A TrapRepress cut short: not an SMP at all.
    let mut short = smp_packet(
        &Notice::link_state_change(SW_LID).trap_smp(tid),
        SM_LID,
        SW_LID,
    );
    short.payload[3] = method::TRAP_REPRESS;
    short.payload.truncate(100);
    f.sm.link.send(short.build().unwrap()).unwrap();
    let c = wait_counts(&f.sw, "four strays", |c| c.stray_represses == 4);
    assert_eq!(c.repressed, 0, "{c:?}");
    // The trap is still outstanding: repeated with its TID.
    let sent = c.sent;
    loop {
        let repeat = next_trap(&f.sm);
        assert_eq!(repeat, tid);
        if f.sw.trap_counts().sent > sent {
            break;
        }
    }
    // The switch still serves, and the right repress still ends the trap.
    let r = ask(
        &mut f.sm,
        Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap(),
    );
    assert_eq!(NodeInfo::decode(&r.data).node_guid, SW_GUID);
    repress(&f.sm, tid, |_| {});
    let c = wait_counts(&f.sw, "repressed", |c| c.repressed == 1);
    assert_eq!(c.stray_represses, 4);
}

#[test]
fn a_trap_repress_without_the_m_key_is_ignored() {
    const KEY: u64 = 0x5eed_0000_0000_0128;
    let mut f = fabric("trap-repress-mkey");
    tell_the_switch_the_sm(&mut f);
    // The SM protects the switch with an M_Key (protection level 0: Gets
    // still pass without it).
    let get = Smp::directed(method::GET, id::PORT_INFO, 0, &[1]).unwrap();
    let mut p0 = PortInfo::decode(&ask(&mut f.sm, get).data);
    p0.m_key = KEY;
    p0.port_state = PortState::NoChange as u8;
    let mut set = Smp::directed(method::SET, id::PORT_INFO, 0, &[1]).unwrap();
    set.data = p0.encode();
    assert_eq!(ask(&mut f.sm, set).status.0, 0);

    f.sw.port_down(3).unwrap();
    let tid = next_trap(&f.sm);
    repress(&f.sm, tid, |s| s.m_key = 0);
    repress(&f.sm, tid, |s| s.m_key = KEY ^ 1);
    // The switch served the represses before this Get (one port, in order).
    let r = ask(
        &mut f.sm,
        Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap(),
    );
    assert_eq!(NodeInfo::decode(&r.data).node_guid, SW_GUID);
    let c = f.sw.trap_counts();
    assert_eq!((c.repressed, c.stray_represses), (0, 0), "{c:?}");
    // Still outstanding: repeated with its TID.
    let sent = c.sent;
    while f.sw.trap_counts().sent == sent {
        assert_eq!(next_trap(&f.sm), tid);
    }
    // The holder of the M_Key ends it.
    repress(&f.sm, tid, |s| s.m_key = KEY);
    wait_counts(&f.sw, "repressed", |c| c.repressed == 1);
}

#[test]
fn an_unrepressed_trap_is_given_up_after_its_sends() {
    let mut f = fabric("trap-given-up");
    tell_the_switch_the_sm(&mut f);
    f.sw.port_down(2).unwrap();
    let tid = next_trap(&f.sm);
    let c = wait_counts(&f.sw, "given up", |c| c.unanswered == 1);
    assert_eq!(c.sent, u64::from(ibtca_switch::MAX_TRAP_SENDS), "{c:?}");
    // Every send reached the SM, then the switch goes quiet.
    let mut seen = 1;
    while seen < ibtca_switch::MAX_TRAP_SENDS {
        assert_eq!(next_trap(&f.sm), tid);
        seen += 1;
    }
    std::thread::sleep(INTERVAL * 3);
    assert!(f.sm.arrived_packets().is_empty());
    assert_eq!(f.sw.trap_counts().sent, c.sent);
}

/// The next packet for the SM, checked to be trap 144 from the device at
/// `lid` carrying capability mask `caps`; returns its TID.
fn next_trap_144(sm: &SmClient, lid: u16, caps: u32) -> u64 {
    let packet = sm.next_packet();
    let view = PacketView::parse(&packet).expect("a valid packet");
    assert_eq!(
        (view.lrh.vl, view.lrh.slid, view.lrh.dlid, view.bth.dest_qp),
        (15, lid, SM_LID, QP0)
    );
    let smp = smp_of_packet(&view).expect("an SMP");
    assert_eq!(
        (smp.route, smp.method, smp.attr_id, smp.attr_mod),
        (SmpRoute::Lid, method::TRAP, id::NOTICE, 0)
    );
    let mut details = [0u8; 54];
    details[2..4].copy_from_slice(&lid.to_be_bytes());
    details[6..10].copy_from_slice(&caps.to_be_bytes());
    assert_eq!(
        Notice::decode(&smp.data),
        Notice {
            generic: true,
            notice_type: notice_type::INFO,
            producer: producer::CA,
            trap_number: trap::LOCAL_CHANGES,
            issuer_lid: lid,
            toggle: false,
            count: 0,
            details,
        }
    );
    smp.tid
}

#[test]
fn a_capability_mask_change_at_a_device_sends_trap_144() {
    use ibtca_device::instance::InstanceConfig;
    use ibtca_device::regs;
    use ibtca_device::verbs::abi::{CmdPortCaps, CMD_SET_PORT_CAPS};
    use ibtca_tests::sim_guest::SimGuest;
    use ibtca_tests::TestServer;
    use vm_memory::ByteValued;
    const LID: u16 = 0x31;
    const KEY: u64 = 0x5eed_0000_0000_0144;
    let dir = TempDir::new("trap-144");
    let path = dir.join("dev.link");
    let cfg = InstanceConfig {
        lid: 7,
        sm_managed: true,
        node_guid: 0x1200_0000_0000_0a44,
        port_guid: 0x1200_0000_0000_0a44,
        link: Some(LinkEndpoint::Listen(path.clone())),
        ..InstanceConfig::default()
    };
    let server = TestServer::start_instance(dir, cfg);
    let mut sm = SmClient::start(LinkEndpoint::Connect(path), SM_LID);
    let mut g = SimGuest::new(&server.socket, 4 << 20);
    let set_caps = |g: &mut SimGuest, set: u32, clear: u32| {
        let c = CmdPortCaps {
            set: set.into(),
            clear: clear.into(),
            ..Default::default()
        };
        g.cmd(CMD_SET_PORT_CAPS, c.as_slice()).unwrap().0
    };
    let port_info = |sm: &mut SmClient| {
        let get = Smp::directed(method::GET, id::PORT_INFO, 1, &[1]).unwrap();
        PortInfo::decode(&ask(sm, get).data)
    };
    // No SM known yet: IsSM changes, no trap (the next packet the SM
    // gets is the answer to its Get).
    assert_eq!(g.client.read32(0, regs::TRAPS_SENT), 0);
    let with_sm = set_caps(&mut g, cap::IS_SM, 0);
    assert_ne!(with_sm & cap::IS_SM, 0);
    let mut get = Smp::directed(method::GET, id::PORT_INFO, 1, &[1]).unwrap();
    sm.send(&mut get, 0);
    let (reply, _, _, _) = sm.next_smp();
    assert_eq!((reply.method, reply.tid), (method::GET_RESP, get.tid));
    let mut p = PortInfo::decode(&reply.data);
    assert_ne!(p.capability_mask & cap::IS_TRAP_SUPPORTED, 0);
    (p.lid, p.master_sm_lid, p.subnet_timeout) = (LID, SM_LID, SUBNET_TIMEOUT);
    p.port_state = PortState::NoChange as u8;
    p.m_key = KEY;
    let mut set = Smp::directed(method::SET, id::PORT_INFO, 1, &[1]).unwrap();
    set.data = p.encode();
    assert_eq!(ask(&mut sm, set).status.0, 0);

    // The host's SM goes away: IsSM cleared, trap 144 with the new mask,
    // repeated with its TID until repressed.
    let without = set_caps(&mut g, 0, cap::IS_SM);
    assert_eq!(without, with_sm & !cap::IS_SM);
    let tid = next_trap_144(&sm, LID, without);
    assert_eq!(next_trap_144(&sm, LID, without), tid, "repeated");
    let mut r = Notice::decode(&[0; 64]).trap_smp(tid);
    r.method = method::TRAP_REPRESS;
    // Without the port's M_Key a repress is an M_Key violation and the
    // trap stays (the Get after it is served after it).
    sm.link
        .send(smp_packet(&r, SM_LID, LID).build().unwrap())
        .unwrap();
    let bar0 = |g: &mut SimGuest, reg| g.client.read32(0, reg);
    let get = Smp::directed(method::GET, id::PORT_INFO, 1, &[1]).unwrap();
    let (info, skipped) = ask_counting_traps(&mut sm, get);
    assert_eq!(PortInfo::decode(&info.data).m_key_violations, 1);
    assert_eq!(bar0(&mut g, regs::TRAPS_REPRESSED), 0);
    assert_eq!(next_trap_144(&sm, LID, without), tid, "still repeated");
    r.m_key = KEY;
    sm.link
        .send(smp_packet(&r, SM_LID, LID).build().unwrap())
        .unwrap();
    // BAR0 counts the device's traps.
    let deadline = Instant::now() + WAIT;
    while bar0(&mut g, regs::TRAPS_REPRESSED) != 1 {
        assert!(Instant::now() < deadline, "TRAPS_REPRESSED never 1");
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent = bar0(&mut g, regs::TRAPS_SENT);
    assert!(sent >= 2, "TRAPS_SENT {sent}");
    // The traps sent before the repress arrive (three read by
    // next_trap_144, `skipped` by the Get), then nothing.
    let sent_now = || u64::from(bar0(&mut g, regs::TRAPS_SENT));
    expect_no_repeat(&sm, tid, 3 + skipped, u64::from(sent), sent_now);
    assert_eq!(port_info(&mut sm).capability_mask, without);
    // The same mask again is no change: no trap.
    assert_eq!(set_caps(&mut g, 0, cap::IS_SM), without);
    assert_eq!(port_info(&mut sm).capability_mask, without);
    assert!(sm.arrived_packets().is_empty());
}
