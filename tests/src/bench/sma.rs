//! `ibtca-bench sma`: the sweep rate of subnet management agents, in SMPs
//! per second: a test SM on a bare link asks NodeInfo (what a sweep asks
//! first) of a device next to it, of a device behind two switches by
//! directed route, and LID-routed, and of the switches' own agents (port
//! 0) one and two hops away; one SMP at a time (round trips) and with 4
//! in flight (OpenSM's default `max_wire_smps`). Every answer is checked
//! (its TID and status). The baseline of the same run: the same 256-byte
//! SMP sent back untouched by a bare link end (no agent, no engine), so
//! each row's cost over it is the agent's and the hops'.

use std::process::ExitCode;
use std::time::Instant;

use ibtca_device::instance::{Instance, InstanceConfig};
use ibtca_device::link::{LinkConfig, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_protocol::mad::attr::id;
use ibtca_protocol::mad::{method, MadStatus, Smp, SmpRoute};
use ibtca_switch::{PortConfig, Switch, SwitchConfig};
use ibtca_tests::links::start_link;
use ibtca_tests::sm_client::SmClient;
use ibtca_tests::TempDir;

/// SMPs kept in flight in the windowed runs.
const WINDOW: usize = 4;

fn switch(name: &str, ports: Vec<PortConfig>) -> Switch {
    Switch::start(SwitchConfig {
        name: name.into(),
        guid: 0x1200_0000_0000_f000,
        lid: 0,
        ports,
        routes: Vec::new(),
        link: LinkConfig::default(),
        sm_managed: false,
    })
    .expect("switch starts")
}

/// Runs `n` requests made by `make`, `window` in flight; SMPs per second.
fn rate(sm: &mut SmClient, n: u64, window: usize, dlid: u16, make: &dyn Fn() -> Smp) -> f64 {
    let start = Instant::now();
    let mut sent = 0u64;
    let mut tids = std::collections::VecDeque::new();
    while sent < n || !tids.is_empty() {
        while sent < n && tids.len() < window {
            let mut smp = make();
            sm.send(&mut smp, dlid);
            tids.push_back(smp.tid);
            sent += 1;
        }
        let (reply, _, _, _) = sm.next_smp();
        assert_eq!(Some(reply.tid), tids.pop_front(), "answers in order");
        assert_eq!(reply.status, MadStatus::OK);
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// A bare link end at `path` that sends every packet back as it came:
/// the round trip with no agent (its thread ends with the link).
fn echo(path: std::path::PathBuf) {
    let local = LocalPort {
        node_guid: 0x1200_0000_0000_ec00,
        port: 1,
        lid: 9,
    };
    let (link, rx) = start_link(LinkEndpoint::Listen(path), local, LinkConfig::default());
    std::thread::spawn(move || {
        while let Ok(ev) = rx.recv() {
            if let LinkEvent::Packet(p) = ev {
                if link.send(p).is_err() {
                    return;
                }
            }
        }
    });
}

/// Prints the rates for `smps` SMPs per row.
pub(super) fn run(smps: u64) -> ExitCode {
    let dir = TempDir::new("bench-sma");
    // SM ── echo: the baseline.
    echo(dir.join("echo.link"));
    let mut echo_sm = SmClient::start(LinkEndpoint::Connect(dir.join("echo.link")), 1);
    // SM ── device (LID 5).
    let direct = dir.join("direct.link");
    let _device = Instance::start(&InstanceConfig {
        lid: 5,
        link: Some(LinkEndpoint::Listen(direct.clone())),
        ..InstanceConfig::default()
    })
    .expect("device starts");
    let mut sm = SmClient::start(LinkEndpoint::Connect(direct), 1);
    // SM ── sw1 ── sw2 ── device (LID 6).
    let p = |n: &str| dir.join(n);
    let _sw1 = switch(
        "sw1",
        vec![
            PortConfig::new(LinkEndpoint::Listen(p("sw1-1"))),
            PortConfig::new(LinkEndpoint::Listen(p("sw1-2"))),
        ],
    );
    let _sw2 = switch(
        "sw2",
        vec![
            PortConfig::new(LinkEndpoint::Connect(p("sw1-2"))),
            PortConfig::new(LinkEndpoint::Listen(p("sw2-2"))),
        ],
    );
    let _far = Instance::start(&InstanceConfig {
        lid: 6,
        link: Some(LinkEndpoint::Connect(p("sw2-2"))),
        ..InstanceConfig::default()
    })
    .expect("device starts");
    let mut far_sm = SmClient::start(LinkEndpoint::Connect(p("sw1-1")), 1);
    // Answers come only once the whole path is up.
    far_sm.ask(
        Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 2, 2]).expect("path"),
        0,
    );

    println!("ibtca-bench sma: NodeInfo Gets answered by the SMA, {smps} per row");
    println!("{:<48} {:>12} {:>12}", "path", "1 in flight", "4 in flight");
    type Make = fn() -> Smp;
    // Which SM: 0 the echo's, 1 the device's, 2 the switches'.
    let rows: [(&str, usize, u16, Make); 6] = [
        (
            "baseline: raw link round trip (echo, no agent)",
            0,
            5,
            || Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0),
        ),
        ("device, LID-routed", 1, 5, || {
            Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0)
        }),
        ("device, directed (1 hop)", 1, 0, || {
            Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).expect("path")
        }),
        ("switch port 0, directed (1 hop)", 2, 0, || {
            Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).expect("path")
        }),
        ("switch behind a switch, directed (2 hops)", 2, 0, || {
            Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 2]).expect("path")
        }),
        (
            "device behind two switches, directed (3 hops)",
            2,
            0,
            || Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 2, 2]).expect("path"),
        ),
    ];
    for (name, which, dlid, make) in rows {
        let client = match which {
            0 => &mut echo_sm,
            1 => &mut sm,
            _ => &mut far_sm,
        };
        let one = rate(client, smps, 1, dlid, &make);
        let four = rate(client, smps, WINDOW, dlid, &make);
        println!("{name:<48} {one:>10.0}/s {four:>10.0}/s");
    }
    ExitCode::SUCCESS
}
