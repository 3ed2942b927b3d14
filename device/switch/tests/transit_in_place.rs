//! A directed-route SMP in transit at a hosted switch, on its way out or
//! back, is passed on in the buffer it came in, and one its agent answers
//! goes back in it: after a warm-up neither allocates on the switch's
//! thread, and the bytes sent are those of the stepped SMP built anew. Passed on at once
//! (`HostedSwitch::pass_directed`), it is the packet the switch would
//! have sent, counted alike; any other packet is left as it came. A corrupted SMP from a socket wire is
//! still dropped as a CRC error. What a switch changes for a node in its
//! own process leaves with its CRCs as they came, and what it builds for
//! one with its CRCs zero; for a wire, stamped.
//!
//! The count is of this test binary's allocations on the calling thread
//! (a counting global allocator with a thread-local count), so tests
//! running beside it on other threads do not disturb it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use ibtca_link::{LinkEndpoint, LinkEvent, LocalPort};
use ibtca_protocol::encoded;
use ibtca_protocol::headers::{Deth, Grh};
use ibtca_protocol::mad::attr::id;
use ibtca_protocol::mad::{method, smp_packet, MadStatus, Smp, SmpRoute, PERMISSIVE_LID};
use ibtca_protocol::{Packet, PacketView};
use ibtca_switch::collect_wires::CollectWires;
use ibtca_switch::{HostedSwitch, PortConfig, SwitchConfig, Wires};

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting allocations (and reallocations) per
/// thread.
struct Counting;

fn count_one() {
    // A thread being torn down has no count any more: not counted.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every method hands its arguments to `System`, unchanged, and
// returns what it returns; counting touches a thread-local `Cell` only
// (const-initialised, no destructor: it never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: `ptr` came from `System` through this allocator; the
        // caller's contract for `realloc` is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// A hosted switch of 4 ports, every one up.
fn switch() -> (HostedSwitch, Arc<CollectWires>) {
    // The buffer is reserved beforehand: its growth would count as the
    // switch's allocations.
    let wires = Arc::new(CollectWires::with_capacity(64));
    let cfg = SwitchConfig {
        name: "sw".into(),
        guid: 0x100,
        lid: 1,
        ports: (0..4)
            .map(|_| PortConfig::new(LinkEndpoint::Listen("-".into())))
            .collect(),
        routes: Vec::new(),
        link: Default::default(),
        sm_managed: false,
    };
    let sw = HostedSwitch::new(cfg, Arc::clone(&wires) as Arc<dyn Wires>).unwrap();
    for port in 1..=4u8 {
        let peer = LocalPort {
            node_guid: 0x200 + u64::from(port),
            port: 1,
            lid: 10 + u16::from(port),
        };
        sw.on_event(port, LinkEvent::Up { peer });
    }
    wires.take();
    (sw, wires)
}

/// A DR NodeInfo Get from a requester whose port 1 leads to this switch's
/// port 1, on to port 2 (hop count 2), as it reaches this switch (hop 1).
fn request() -> Smp {
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 2]).unwrap();
    smp.tid = 0x1234_5678;
    smp.hop_ptr = 1;
    smp
}

/// `request`'s response on its way back, as it reaches this switch on
/// port 2 (hop pointer 2).
fn response() -> Smp {
    let mut smp = request();
    smp.return_path[1] = 1;
    smp.return_path[2] = 3;
    smp.hop_ptr = 2;
    smp.make_response(MadStatus::OK);
    smp.data[..4].copy_from_slice(&[1, 2, 3, 4]);
    smp
}

fn wire_bytes(smp: &Smp) -> Vec<u8> {
    smp_packet(smp, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap()
}

/// How a packet reaches the switch: from a socket wire, or built by a
/// node its owner hosts.
#[derive(Debug, Clone, Copy)]
enum Entry {
    Wire,
    Built,
}

fn send(sw: &HostedSwitch, entry: Entry, port: u8, packet: Vec<u8>) {
    match entry {
        Entry::Wire => sw.on_event(port, LinkEvent::Packet(packet)),
        Entry::Built => sw.on_built_packet(port, packet),
    }
}

/// Sends `smp` in on `in_port` twice (a warm-up, then counted); returns
/// the second's allocations and what the switch sent of the two.
fn through(entry: Entry, in_port: u8, smp: &Smp) -> (u64, Vec<(u8, Vec<u8>)>) {
    let (sw, wires) = switch();
    send(&sw, entry, in_port, wire_bytes(smp));
    let packet = wire_bytes(smp);
    let n = allocations(|| send(&sw, entry, in_port, packet));
    (n, wires.take())
}

#[test]
fn a_directed_smp_in_transit_is_forwarded_without_allocating() {
    let mut expected = request();
    expected.hop_ptr = 2;
    expected.return_path[1] = 1;
    for entry in [Entry::Wire, Entry::Built] {
        let (n, sent) = through(entry, 1, &request());
        assert_eq!(n, 0, "{entry:?}: allocations for one SMP in transit");
        assert_eq!(sent.len(), 2, "{entry:?}");
        for (port, bytes) in sent {
            assert_eq!(port, 2, "{entry:?}: out of initial_path[2]");
            assert_eq!(bytes, wire_bytes(&expected), "{entry:?}: built anew");
        }
    }
}

#[test]
fn a_directed_response_going_back_is_forwarded_without_allocating() {
    let mut expected = response();
    expected.hop_ptr = 1;
    for entry in [Entry::Wire, Entry::Built] {
        let (n, sent) = through(entry, 2, &response());
        assert_eq!(n, 0, "{entry:?}: allocations for one response in transit");
        assert_eq!(sent.len(), 2, "{entry:?}");
        for (port, bytes) in sent {
            assert_eq!(port, 1, "{entry:?}: out of return_path[1]");
            assert_eq!(bytes, wire_bytes(&expected), "{entry:?}: built anew");
        }
    }
}

#[test]
fn a_directed_get_the_switch_answers_goes_back_in_its_buffer_without_allocating() {
    // A NodeInfo Get whose path ends at this switch (one hop, in on
    // port 3).
    let mut get = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    (get.tid, get.hop_ptr) = (0x77, 1);
    for entry in [Entry::Wire, Entry::Built] {
        let (n, sent) = through(entry, 3, &get);
        assert_eq!(n, 0, "{entry:?}: allocations for one answer");
        assert_eq!(sent.len(), 2, "{entry:?}");
        for (port, bytes) in sent {
            assert_eq!(port, 3, "{entry:?}: back the way it came");
            let view = PacketView::parse(&bytes).unwrap();
            let answer = Smp::parse(view.payload).unwrap();
            assert_eq!((answer.tid, answer.method), (0x77, method::GET_RESP));
            assert!(answer.direction, "{entry:?}: on its way back");
            assert_eq!(&answer.data[12..20], &0x100u64.to_be_bytes(), "NodeGUID");
        }
    }
}

#[test]
fn an_answer_in_its_requests_buffer_carries_none_of_the_requests_other_bytes() {
    // The same NodeInfo Get, clean and with junk where an answer is
    // written anew: the LRH's SL, the BTH's PSN, the DETH's Q_Key, the
    // MAD's reserved bytes after DrDLID and its data.
    let mut get = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    (get.tid, get.hop_ptr) = (0x78, 1);
    let clean = wire_bytes(&get);
    let mut junk = clean.clone();
    let mad_at = encoded::smp_mad_at(&junk).unwrap();
    junk[1] |= 0x30;
    junk[8 + 9..8 + 12].copy_from_slice(&[0x12, 0x34, 0x56]);
    junk[8 + 12..8 + 16].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    junk[mad_at + 36..mad_at + 128].fill(0xa5);
    encoded::restamp_crcs(&mut junk);
    assert!(PacketView::parse(&junk).is_ok(), "a well-formed SMP still");
    for entry in [Entry::Wire, Entry::Built] {
        let answers: Vec<Vec<u8>> = [&clean, &junk]
            .into_iter()
            .map(|request| {
                let (sw, wires) = switch();
                send(&sw, entry, 3, request.clone());
                let mut sent = wires.take();
                assert_eq!(sent.len(), 1, "{entry:?}: one answer");
                sent.pop().unwrap().1
            })
            .collect();
        assert_eq!(answers[0], answers[1], "{entry:?}: the same answer");
        let answer = Smp::parse(PacketView::parse(&answers[1]).unwrap().payload).unwrap();
        assert_eq!((answer.tid, answer.method), (0x78, method::GET_RESP));
    }
}

#[test]
fn a_port_info_set_that_moves_only_vl_high_limit_allocates_nothing() {
    use ibtca_protocol::mad::attr::PortInfo;
    let (sw, wires) = switch();
    // A directed SMP to the switch (one hop, in on port 1): its answer.
    let ask = |smp: &mut Smp| {
        (smp.tid, smp.hop_ptr) = (smp.tid + 1, 1);
        let packet = wire_bytes(smp);
        let n = allocations(|| sw.on_built_packet(1, packet));
        let (_, bytes) = wires.take().pop().expect("an answer");
        let answer = Smp::parse(PacketView::parse(&bytes).unwrap().payload).unwrap();
        assert_eq!(answer.status, MadStatus::OK);
        (n, PortInfo::decode(&answer.data))
    };
    let mut get = Smp::directed(method::GET, id::PORT_INFO, 3, &[1]).unwrap();
    let (_, mut info) = ask(&mut get);
    // Port 3's VLHighLimit set, nothing else: from the limit the switch
    // started with (its slot holds the port's tables from the start), and
    // again.
    for limit in [5, 6] {
        info.vl_high_limit = limit;
        let mut set = Smp::directed(method::SET, id::PORT_INFO, 3, &[1]).unwrap();
        set.data = info.encode();
        let (n, now) = ask(&mut set);
        assert_eq!(now.vl_high_limit, limit);
        assert_eq!(n, 0, "allocations for a Set of VLHighLimit {limit} alone");
    }
}

#[test]
fn an_smp_to_the_switch_lid_leaves_between_permissive_lids() {
    // The slow way set both LIDs to the permissive LID on every directed
    // hop; the in-place step does too.
    let (sw, wires) = switch();
    let smp = request();
    let packet = smp_packet(&smp, 7, 1).build().unwrap();
    sw.on_event(1, LinkEvent::Packet(packet));
    let mut expected = request();
    expected.hop_ptr = 2;
    expected.return_path[1] = 1;
    assert_eq!(wires.take(), vec![(2, wire_bytes(&expected))]);
}

#[test]
fn a_corrupted_smp_from_a_socket_wire_is_dropped_as_crc_error() {
    let good = wire_bytes(&request());
    let icrc_at = good.len() - 6;
    // A flipped ICRC bit (the VCRC, which covers it, fails too), and a
    // flipped MAD bit behind a fresh VCRC (only the ICRC fails: what a
    // hostile peer can send).
    let mut bad_icrc = good.clone();
    bad_icrc[icrc_at] ^= 0x01;
    let mut bad_mad = good.clone();
    bad_mad[icrc_at - 100] ^= 0x10;
    encoded::restamp_vcrc(&mut bad_mad);
    assert!(encoded::vcrc_ok(&bad_mad));
    for (what, bad) in [("icrc", bad_icrc), ("mad", bad_mad)] {
        let (sw, wires) = switch();
        sw.on_event(1, LinkEvent::Packet(bad));
        let stats = sw.port_stats(1).unwrap();
        assert_eq!(stats.drop_crc_error, 1, "{what}: {stats:?}");
        assert!(wires.take().is_empty(), "{what}: nothing sent");
    }
}

/// `packet` with its last 6 bytes (ICRC, VCRC) flipped: CRCs no wire
/// would pass, which a node in this process never reads.
fn with_wrong_crcs(mut packet: Vec<u8>) -> Vec<u8> {
    let n = packet.len();
    for b in &mut packet[n - 6..] {
        *b ^= 0xa5;
    }
    packet
}

#[test]
fn crcs_are_stamped_for_a_wire_and_left_for_a_node_in_this_process() {
    let mut stepped = request();
    stepped.hop_ptr = 2;
    stepped.return_path[1] = 1;
    let good = wire_bytes(&stepped);
    // A UD SEND to LID 12, which the switch learned on port 2.
    let deth = Deth {
        qkey: 0x11,
        src_qp: 6,
    };
    let data = Packet::datagram(11, 12, 5, deth, vec![7; 64]);
    let data = data.build().unwrap();
    for in_process in [false, true] {
        let (sw, wires) = switch();
        if in_process {
            wires.set_in_process(2);
        }
        // Built in this process: the switch reads none of its CRCs.
        sw.on_built_packet(1, with_wrong_crcs(wire_bytes(&request())));
        sw.on_built_packet(1, with_wrong_crcs(data.clone()));
        let sent = wires.take();
        assert_eq!(sent.len(), 2, "in process {in_process}: {sent:?}");
        let (smp, forwarded) = (&sent[0], &sent[1]);
        assert_eq!((smp.0, forwarded.0), (2, 2), "in process {in_process}");
        if in_process {
            // The step and the LIDs are written; the CRCs are as they came.
            let came = with_wrong_crcs(wire_bytes(&request()));
            let n = good.len();
            assert_eq!(smp.1[..n - 6], good[..n - 6]);
            assert_eq!(smp.1[n - 6..], came[n - 6..]);
            assert_eq!(forwarded.1, with_wrong_crcs(data.clone()));
        } else {
            assert_eq!(smp.1, good, "both CRCs stamped anew");
            assert!(encoded::vcrc_ok(&forwarded.1), "VCRC stamped anew");
            let n = data.len();
            assert_eq!(
                forwarded.1[..n - 2],
                with_wrong_crcs(data.clone())[..n - 2],
                "ICRC kept"
            );
        }
    }
}

#[test]
fn the_switchs_own_answers_carry_crcs_for_a_wire_and_zeros_for_a_node_in_this_process() {
    // A DR NodeInfo Get to the switch itself (one hop, from port 1), and a
    // LID-routed one from LID 11, which the switch learned on port 1.
    let mut dr = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    dr.hop_ptr = 1;
    let lid = Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0);
    let requests = [wire_bytes(&dr), smp_packet(&lid, 11, 1).build().unwrap()];
    let mut answers = Vec::new();
    for in_process in [false, true] {
        let (sw, wires) = switch();
        if in_process {
            wires.set_in_process(1);
        }
        for request in &requests {
            sw.on_event(1, LinkEvent::Packet(request.clone()));
        }
        let sent = wires.take();
        assert_eq!(sent.len(), 2, "in process {in_process}: {sent:?}");
        for (port, bytes) in &sent {
            assert_eq!(*port, 1, "back where it came from");
            let n = bytes.len();
            if in_process {
                assert_eq!(bytes[n - 6..], [0; 6], "CRCs left zero");
            } else {
                assert!(PacketView::parse(bytes).is_ok(), "both CRCs stamped");
            }
        }
        answers.push(sent);
    }
    // The same answers, but for the CRCs.
    for ((_, wire), (_, built)) in answers[0].iter().zip(&answers[1]) {
        let mut stamped = built.clone();
        encoded::restamp_crcs(&mut stamped);
        assert_eq!(&stamped, wire);
    }
}

#[test]
fn an_smp_with_a_grh_is_parsed_in_full_and_served() {
    // A LID-routed NodeInfo Get to the switch's LID with a GRH (not an
    // SMP's usual shape, which its headers alone do not tell).
    let get = Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0);
    let mut packet = smp_packet(&get, 11, 1);
    packet.grh = Some(Grh::default());
    let (sw, wires) = switch();
    sw.on_event(1, LinkEvent::Packet(packet.build().unwrap()));
    let sent = wires.take();
    let [(1, answer)] = sent.as_slice() else {
        panic!("one answer back by port 1: {sent:?}")
    };
    let view = PacketView::parse(answer).unwrap();
    let smp = ibtca_protocol::mad::smp_of_packet(&view).unwrap();
    assert_eq!((smp.method, view.lrh.dlid), (method::GET_RESP, 11));
    assert_eq!(
        &smp.data[12..20],
        &0x100u64.to_be_bytes(),
        "the switch's NodeGUID"
    );
}

/// A switch as [`switch`] makes it whose every port leads to a node in
/// this process and takes a packet at once.
fn switch_passing_at_once() -> (HostedSwitch, Arc<CollectWires>) {
    let (sw, wires) = switch();
    for port in 1..=4 {
        wires.set_in_process(port);
        wires.set_passes_at_once(port);
    }
    (sw, wires)
}

/// Every port's counters and port 0's agent's.
fn counts(sw: &HostedSwitch) -> (Vec<ibtca_switch::PortStats>, (u64, u64, u64)) {
    let ports = (1..=4).map(|p| sw.port_stats(p).unwrap()).collect();
    (ports, sw.sma_counts())
}

#[test]
fn a_directed_smp_passed_at_once_is_the_one_sent_and_counted_alike() {
    // A request on its way out (in by 1, out by 2) and a response on its
    // way back (in by 2, out by 1), with CRCs a node in this process
    // never reads.
    for (in_port, smp) in [(1, request()), (2, response())] {
        let packet = with_wrong_crcs(wire_bytes(&smp));
        let (sent_by, wires) = switch_passing_at_once();
        sent_by.on_built_packet(in_port, packet.clone());
        let sent = wires.take();
        let (passer, wires) = switch_passing_at_once();
        let mut passed = packet;
        let mut out = None;
        let allocated = allocations(|| out = passer.pass_directed(in_port, &mut passed));
        let out = out.expect("passed on");
        assert_eq!(sent, vec![(out, passed)], "in by {in_port}");
        assert_eq!(allocated, 0, "in by {in_port}: allocations");
        assert!(wires.take().is_empty(), "in by {in_port}: nothing sent");
        assert_eq!(counts(&passer), counts(&sent_by), "in by {in_port}");
        assert_eq!(passer.sma_counts().0, 1, "served");
    }
}

#[test]
fn pass_directed_leaves_every_other_packet_as_it_came_and_counts_nothing() {
    let mut for_me = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    for_me.hop_ptr = 1;
    let lid_routed = Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0);
    let deth = Deth {
        qkey: 0x11,
        src_qp: 6,
    };
    let mut short = wire_bytes(&request());
    short.truncate(short.len() - 4);
    let mut bad_port = request();
    bad_port.initial_path[2] = 9;
    let cases = [
        ("for the switch's own agent", wire_bytes(&for_me)),
        (
            "LID-routed",
            smp_packet(&lid_routed, 11, 1).build().unwrap(),
        ),
        (
            "not VL15",
            Packet::datagram(11, 12, 5, deth, vec![7; 64])
                .build()
                .unwrap(),
        ),
        ("shorter than its LRH says", short),
        ("out by a port the switch lacks", wire_bytes(&bad_port)),
    ];
    for (what, packet) in cases {
        let (sw, wires) = switch_passing_at_once();
        let before = counts(&sw);
        let mut left = packet.clone();
        assert_eq!(sw.pass_directed(1, &mut left), None, "{what}");
        assert_eq!(left, packet, "{what}: unchanged");
        assert_eq!(counts(&sw), before, "{what}: nothing counted");
        assert!(wires.take().is_empty(), "{what}: nothing sent");
    }
    // A request in transit, but its way out is a wire, or a port that
    // does not take it at once: sent, not passed.
    for (in_process, at_once) in [(false, true), (true, false)] {
        let (sw, wires) = switch();
        if in_process {
            wires.set_in_process(2);
        }
        if at_once {
            wires.set_passes_at_once(2);
        }
        let packet = wire_bytes(&request());
        let mut left = packet.clone();
        assert_eq!(sw.pass_directed(1, &mut left), None);
        assert_eq!(left, packet, "in process {in_process}, at once {at_once}");
        assert_eq!(sw.port_stats(1).unwrap().rx_packets, 0);
    }
}
