//! `ibtca-bench sma`: the sweep rate of subnet management agents, in SMPs
//! per second: a test SM on a bare link asks NodeInfo (what a sweep asks
//! first) of a device next to it, of a device behind two switches by
//! directed route, and LID-routed; one SMP at a time (round trips) and
//! with 4 in flight (OpenSM's default `max_wire_smps`). Every answer is
//! checked (its TID and status).

use std::process::ExitCode;
use std::time::Instant;

use ibtca_device::instance::{Instance, InstanceConfig};
use ibtca_device::link::{LinkConfig, LinkEndpoint};
use ibtca_device::switch::{PortConfig, Switch, SwitchConfig};
use ibtca_protocol::mad::attr::id;
use ibtca_protocol::mad::{method, MadStatus, Smp, SmpRoute};
use ibtca_tests::sm_client::SmClient;
use ibtca_tests::TempDir;

/// SMPs kept in flight in the windowed runs.
const WINDOW: usize = 4;

fn switch(name: &str, ports: Vec<PortConfig>) -> Switch {
    Switch::start(SwitchConfig {
        name: name.into(),
        guid: 0x0200_0000_0000_f000,
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

/// Prints the rates for `smps` SMPs per row.
pub(super) fn run(smps: u64) -> ExitCode {
    let dir = TempDir::new("bench-sma");
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
    let rows: [(&str, bool, u16, Make); 3] = [
        ("device, LID-routed", false, 5, || {
            Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0)
        }),
        ("device, directed (1 hop)", false, 0, || {
            Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).expect("path")
        }),
        (
            "device behind two switches, directed (3 hops)",
            true,
            0,
            || Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 2, 2]).expect("path"),
        ),
    ];
    for (name, far, dlid, make) in rows {
        let client = if far { &mut far_sm } else { &mut sm };
        let one = rate(client, smps, 1, dlid, &make);
        let four = rate(client, smps, WINDOW, dlid, &make);
        println!("{name:<48} {one:>10.0}/s {four:>10.0}/s");
    }
    ExitCode::SUCCESS
}
