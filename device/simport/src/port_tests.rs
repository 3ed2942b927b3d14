//! The port between a client and the link, without sockets: a client's
//! SMPs served locally or sent with its slot in the TID, the response
//! back with the client's TID, an unanswered request back with ETIMEDOUT,
//! malformed envelopes dropped.

use std::time::{Duration, Instant};

use ibtca_agents::pma::PortTotals;
use ibtca_protocol::mad::attr::{id, NodeInfo};
use ibtca_protocol::mad::directed::{self, DrStep};
use ibtca_protocol::mad::{method, smp_of_packet, smp_packet, MadStatus, Smp, PERMISSIVE_LID};
use ibtca_protocol::PacketView;

use super::{PortSettings, Sends, SimPort};
use crate::wire::{ClientInfo, Ctl, CtlType, Envelope, SimRequest, CTL_DATA_LEN, STATUS_TIMED_OUT};
use crate::CtlOutcome;

const TIMEOUT: Duration = Duration::from_millis(100);

/// A port with one client attached (slot 0).
fn port() -> SimPort {
    let mut p = SimPort::new(
        PortSettings {
            node_guid: 0x11,
            port_guid: 0x12,
            description: "host".into(),
            lid: 0,
            managed: true,
            node_id: "host".into(),
        },
        TIMEOUT,
    );
    p.link_changed(true);
    let out = connect(&mut p, 4242, true, |_| false);
    assert_eq!(out.attached, Some((0, 4242)));
    assert_eq!(out.reply.kind, CtlType::Connect.to_wire());
    p
}

fn envelope(smp: &Smp) -> Vec<u8> {
    SimRequest::smp(PERMISSIVE_LID, smp.to_bytes())
        .to_bytes()
        .to_vec()
}

/// One thing the port sent, decoded for a test to match.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Out {
    Link(Vec<u8>),
    Client(usize, SimRequest),
}

/// What `sends` holds: its packets, then its MADs to clients.
fn outs(sends: Sends) -> Vec<Out> {
    let link = sends.link.into_iter().map(Out::Link);
    let clients = sends.clients.iter().map(|(slot, datagram)| {
        let r = SimRequest::parse(datagram).expect("a whole envelope");
        Out::Client(*slot, r)
    });
    link.chain(clients).collect()
}

fn client_out(out: &[Out]) -> (usize, SimRequest) {
    match out {
        [Out::Client(slot, r)] => (*slot, r.clone()),
        other => panic!("one MAD to a client expected: {other:?}"),
    }
}

/// What [`SimPort::on_client`] sends for `bytes` from `slot`.
fn from_client(p: &mut SimPort, slot: usize, bytes: &[u8], now: Instant) -> Vec<Out> {
    let mut out = Sends::new();
    p.on_client(slot, bytes, &PortTotals::default(), now, &mut out);
    outs(out)
}

/// What [`SimPort::on_link`] sends for `bytes`.
fn from_link(p: &mut SimPort, bytes: &[u8]) -> Vec<Out> {
    let mut out = Sends::new();
    p.on_link(bytes, &PortTotals::default(), &mut out);
    outs(out)
}

/// What [`SimPort::tick`] sends at `now`.
fn tick(p: &mut SimPort, now: Instant) -> Vec<Out> {
    let mut out = Sends::new();
    p.tick(now, &mut out);
    outs(out)
}

#[test]
fn a_directed_smp_of_no_hops_is_the_ports_own_agents() {
    let mut p = port();
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[]).unwrap();
    smp.tid = 0x1234;
    let out = from_client(&mut p, 0, &envelope(&smp), Instant::now());
    let (slot, r) = client_out(&out);
    assert_eq!((slot, r.envelope.status), (0, 0));
    let answer = Smp::parse(&r.mad).unwrap();
    assert_eq!(answer.tid, 0x1234);
    assert_eq!((answer.hop_cnt, answer.hop_ptr), (0, 0));
    let ni = NodeInfo::decode(&answer.data);
    assert_eq!((ni.node_guid, ni.port_guid), (0x11, 0x12));
}

#[test]
fn requests_go_out_with_the_slot_and_come_back_answered_or_timed_out() {
    let mut p = port();
    let t0 = Instant::now();
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 3]).unwrap();
    smp.tid = 0x0000_0007_0000_0042;
    let out = from_client(&mut p, 0, &envelope(&smp), t0);
    let [Out::Link(packet)] = out.as_slice() else {
        panic!("{out:?}")
    };
    let view = PacketView::parse(packet).unwrap();
    let mut sent = smp_of_packet(&view).unwrap();
    assert_eq!(
        (sent.hop_ptr, sent.tid),
        (1, smp.tid),
        "slot 0 in TID bits 63:48"
    );
    // The far end answers; the switch in between brings it back at hop 1.
    sent.hop_ptr = 3;
    sent.return_path[1] = 1;
    sent.return_path[2] = 5;
    sent.make_response(MadStatus::OK);
    assert_eq!(directed::respond(&mut sent, 8), DrStep::Forward(5));
    sent.hop_ptr = 1;
    let back = smp_packet(&sent, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    let (slot, r) = client_out(&from_link(&mut p, &back));
    assert_eq!((slot, r.envelope.status), (0, 0));
    assert_eq!(Smp::parse(&r.mad).unwrap().tid, smp.tid);
    assert!(
        tick(&mut p, t0 + TIMEOUT).is_empty(),
        "answered: nothing waits"
    );

    // A second request whose answer never comes.
    let mut lost = smp.clone();
    lost.tid = 0x99;
    assert_eq!(from_client(&mut p, 0, &envelope(&lost), t0).len(), 1);
    assert!(tick(&mut p, t0 + TIMEOUT / 2).is_empty());
    let (slot, r) = client_out(&tick(&mut p, t0 + TIMEOUT));
    let as_sent = SimRequest::parse(&envelope(&lost)).unwrap();
    assert_eq!(slot, 0);
    assert_eq!(
        r,
        SimRequest {
            envelope: Envelope {
                status: STATUS_TIMED_OUT,
                ..as_sent.envelope
            },
            ..as_sent
        },
        "back as the client sent it, its status ETIMEDOUT"
    );
    assert_eq!(p.counts().timed_out, 1);
}

#[test]
fn a_recycled_packets_buffer_carries_the_next_request() {
    let mut p = port();
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 3]).unwrap();
    let mut held = Vec::with_capacity(1024);
    held.extend_from_slice(&[0xa5; 300]);
    let at = held.as_ptr();
    p.recycle(held);
    smp.tid = 1;
    let out = from_client(&mut p, 0, &envelope(&smp), Instant::now());
    let [Out::Link(packet)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(packet.as_ptr(), at, "built in the recycled buffer");
    let view = PacketView::parse(packet).unwrap();
    assert_eq!(smp_of_packet(&view).unwrap().hop_ptr, 1, "the same packet");
    // None left: the next is built in a buffer of its own.
    smp.tid = 2;
    let out = from_client(&mut p, 0, &envelope(&smp), Instant::now());
    let [Out::Link(next)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_ne!(next.as_ptr(), at);
    assert_eq!(next.len(), packet.len());
}

#[test]
fn a_directed_response_whose_route_does_not_end_here_leaves_its_request_waiting() {
    let mut p = port();
    let t0 = Instant::now();
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 3]).unwrap();
    smp.tid = 0x42;
    let out = from_client(&mut p, 0, &envelope(&smp), t0);
    let [Out::Link(packet)] = out.as_slice() else {
        panic!("{out:?}")
    };
    let mut sent = smp_of_packet(&PacketView::parse(packet).unwrap()).unwrap();
    sent.make_response(MadStatus::OK);
    sent.direction = true;
    // Still a hop from here: dropped as the agent drops it, uncounted.
    sent.hop_ptr = 2;
    let early = smp_packet(&sent, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    assert!(from_link(&mut p, &early).is_empty());
    assert_eq!(p.counts().dropped, 0);
    // Its request still waits: the answer at its last hop reaches it.
    sent.hop_ptr = 1;
    let back = smp_packet(&sent, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    let (slot, r) = client_out(&from_link(&mut p, &back));
    assert_eq!((slot, Smp::parse(&r.mad).unwrap().tid), (0, 0x42));
    assert!(tick(&mut p, t0 + TIMEOUT).is_empty(), "answered");
}

#[test]
fn a_response_from_the_link_reaches_its_client_without_the_agent() {
    let mut p = port();
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    smp.tid = 0x77;
    let out = from_client(&mut p, 0, &envelope(&smp), Instant::now());
    let [Out::Link(packet)] = out.as_slice() else {
        panic!("{out:?}")
    };
    // The switch at hop 1 (the path's end) answers it back by its port 1.
    let mut answer = smp_of_packet(&PacketView::parse(packet).unwrap()).unwrap();
    assert_eq!(
        directed::on_receive(&mut answer, true, 1, 8),
        DrStep::Deliver
    );
    answer.make_response(MadStatus::OK);
    assert_eq!(directed::respond(&mut answer, 8), DrStep::Forward(1));
    let back = smp_packet(&answer, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    let seen = p.sma.stats().smps;
    // One whose directed route does not end here (its hop pointer one
    // short) is dropped, and the request still waits.
    let mut astray = answer.clone();
    astray.hop_ptr = 2;
    let astray = smp_packet(&astray, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    assert!(from_link(&mut p, &astray).is_empty());
    // A reserved byte the responder left set (MAD byte 40): the client
    // gets the MAD as it came, byte for byte, with its own TID.
    let mut back = back;
    let mad_at = back.len() - 6 - 256;
    back[mad_at + 40] = 0xee;
    ibtca_protocol::encoded::restamp_crcs(&mut back);
    let (slot, r) = client_out(&from_link(&mut p, &back));
    assert_eq!((slot, r.envelope.status), (0, 0));
    let mut expected = answer.to_bytes();
    expected[8..16].copy_from_slice(&0x77u64.to_be_bytes());
    expected[40] = 0xee;
    assert_eq!(r.mad, expected);
    let got = Smp::parse(&r.mad).unwrap();
    assert_eq!((got.tid, got.method), (0x77, method::GET_RESP));
    assert_eq!(p.sma.stats().smps, seen, "not the agent's");
    // A request from the link is still the agent's.
    let mut get = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    get.hop_ptr = 1;
    let get = smp_packet(&get, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    assert!(matches!(from_link(&mut p, &get).as_slice(), [Out::Link(_)]));
    assert_eq!(p.sma.stats().smps, seen + 1);
}

#[test]
fn malformed_envelopes_and_strangers_are_dropped() {
    let mut p = port();
    let now = Instant::now();
    let smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[]).unwrap();
    let good = envelope(&smp);
    for n in [0, 1, 287, 289, 1024] {
        let mut b = good.clone();
        b.resize(n, 0xa5);
        assert!(from_client(&mut p, 0, &b, now).is_empty(), "{n} bytes");
    }
    assert!(from_client(&mut p, 3, &good, now).is_empty(), "free slot");
    assert!(from_client(&mut p, 99, &good, now).is_empty(), "no slot");
    assert!(from_link(&mut p, &[0u8; 40]).is_empty());
    assert_eq!(p.counts().dropped, 8);
    // And it still serves.
    assert_eq!(from_client(&mut p, 0, &good, now).len(), 1);
}

fn connect(p: &mut SimPort, pid: u32, issm: bool, gone: impl Fn(u32) -> bool) -> CtlOutcome {
    let ctl = Ctl::connect(&ClientInfo {
        id: pid,
        qp: 0,
        issm,
        node_id: String::new(),
    });
    p.on_ctl(&ctl.to_bytes(), gone).unwrap()
}

#[test]
fn a_second_sm_is_refused_until_the_first_ones_process_is_gone() {
    let mut p = port();
    let error = CtlType::Error.to_wire();
    assert_eq!(connect(&mut p, 5000, true, |_| false).reply.kind, error);
    assert_eq!(
        connect(&mut p, 5000, false, |_| false).reply.kind,
        CtlType::Connect.to_wire()
    );
    // SET_ISSM from that second client: refused while 4242 lives.
    let mut data = [0u8; CTL_DATA_LEN];
    data[..4].copy_from_slice(&1i32.to_ne_bytes());
    let set = Ctl {
        client_id: 1,
        kind: CtlType::SetIsSm.to_wire(),
        len: 4,
        data,
    };
    assert_eq!(
        p.on_ctl(&set.to_bytes(), |_| false).unwrap().reply.kind,
        error
    );
    // 4242 was killed without DISCONNECT: the new SM takes over.
    let reply = p.on_ctl(&set.to_bytes(), |pid| pid == 4242).unwrap().reply;
    assert_eq!(reply.kind, CtlType::SetIsSm.to_wire());
    assert_eq!(p.clients.sm(), Some(1));
    assert!(p.clients.get(0).is_none(), "the dead SM's slot is free");
}

#[test]
fn a_client_cannot_grow_the_kinds_table_past_its_cap() {
    let mut p = port();
    let now = Instant::now();
    let extra = 44;
    for attr in 0..(super::MAX_REQUEST_KINDS as u16 + extra) {
        let smp = Smp::directed(method::GET, attr, 0, &[]).unwrap();
        from_client(&mut p, 0, &envelope(&smp), now);
    }
    let smp = Smp::directed(method::GET, 0, 0, &[]).unwrap();
    from_client(&mut p, 0, &envelope(&smp), now);
    assert_eq!(p.request_kinds().len(), super::MAX_REQUEST_KINDS);
    assert_eq!(
        p.request_kinds().values().sum::<u64>(),
        257,
        "a counted kind still counts"
    );
    assert_eq!(p.counts().other_kinds, u64::from(extra));
    assert_eq!(p.counts().requests, 301);
}

#[test]
fn a_packet_from_a_wire_is_crc_checked_and_one_built_in_process_is_taken_as_built() {
    let mut p = port();
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    smp.tid = 0x0000_0007_0000_0043;
    let out = from_client(&mut p, 0, &envelope(&smp), Instant::now());
    let [Out::Link(packet)] = out.as_slice() else {
        panic!("{out:?}")
    };
    let mut answer = smp_of_packet(&PacketView::parse(packet).unwrap()).unwrap();
    answer.hop_ptr = 2;
    answer.return_path[1] = 1;
    answer.make_response(MadStatus::OK);
    assert_eq!(directed::respond(&mut answer, 8), DrStep::Forward(1));
    answer.hop_ptr = 1;
    let mut back = smp_packet(&answer, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    // A MAD byte changed behind the CRCs: damage on a wire.
    back[100] ^= 0x10;
    assert!(
        from_link(&mut p, &back).is_empty(),
        "dropped: its ICRC fails"
    );
    // Built in this process, its PktLen one word short, or its LVer 1: a
    // parse refuses it, and so does the built response's own check.
    for (at, xor) in [(5, 0x01), (0, 0x01)] {
        let mut bad = back.clone();
        bad[at] ^= xor;
        let mut out = Sends::new();
        p.on_built_link(&bad, &PortTotals::default(), &mut out);
        assert!(out.is_empty(), "byte {at}: dropped");
    }
    let mut out = Sends::new();
    p.on_built_link(&back, &PortTotals::default(), &mut out);
    let (slot, r) = client_out(&outs(out));
    assert_eq!((slot, r.envelope.status), (0, 0));
    assert_eq!(Smp::parse(&r.mad).unwrap().tid, smp.tid);
    // Its MAD as it came (the damaged byte too), with the client's TID.
    let mut mad = answer.to_bytes();
    mad[100 - 28] ^= 0x10;
    mad[8..16].copy_from_slice(&smp.tid.to_be_bytes());
    assert_eq!(r.mad, mad);
    assert_eq!(
        (r.envelope.slid, r.envelope.sqp, r.envelope.dqp),
        (PERMISSIVE_LID, 0, 0)
    );
}

#[test]
fn unstamped_its_smps_leave_with_zero_crcs_and_its_agent_still_answers_its_clients() {
    let mut p = port();
    p.leave_crcs_unstamped();
    let stamped = |packet: &[u8]| {
        let mut p = packet.to_vec();
        ibtca_protocol::encoded::restamp_crcs(&mut p);
        p
    };
    // A client's request onto the link.
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    smp.tid = 0x0000_0007_0000_0044;
    let out = from_client(&mut p, 0, &envelope(&smp), Instant::now());
    let [Out::Link(packet)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(packet[packet.len() - 6..], [0; 6]);
    let sent = smp_of_packet(&PacketView::parse(&stamped(packet)).unwrap()).unwrap();
    assert_eq!((sent.hop_ptr, sent.tid), (1, smp.tid));
    // The agent's answer to a Get from the link.
    let mut get = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    get.hop_ptr = 1;
    let get = smp_packet(&get, PERMISSIVE_LID, PERMISSIVE_LID)
        .build()
        .unwrap();
    let out = from_link(&mut p, &get);
    let [Out::Link(answer)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(answer[answer.len() - 6..], [0; 6]);
    assert!(PacketView::parse(&stamped(answer)).is_ok());
    // A client's SMP to the port itself, answered by its agent.
    let mut own = Smp::directed(method::GET, id::NODE_INFO, 0, &[]).unwrap();
    own.tid = 0x1235;
    let (slot, r) = client_out(&from_client(&mut p, 0, &envelope(&own), Instant::now()));
    assert_eq!((slot, r.envelope.status), (0, 0));
    let answer = Smp::parse(&r.mad).unwrap();
    assert_eq!(answer.tid, 0x1235);
    assert_eq!(NodeInfo::decode(&answer.data).node_guid, 0x11);
}
