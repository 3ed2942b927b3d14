//! `ibtca-fabric` with gateway nodes, without VMs: the shipped
//! `guest-and-two-gateways.json` comes up (a device, two `ibtca-gateway`s,
//! a switch); an AAL5 frame written as cells into one gateway's ATM
//! socket comes out of the other's on its mapped VC, byte-exact, both
//! ways; a gateway's control socket sets a VC's remote QPN; a bad map is
//! refused, in the gateway's words, before anything starts; `restart`
//! brings a killed gateway back with its map and sockets.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use ibtca_fabric::state::State;
use ibtca_protocol::atm::aal5::{self, Aal5Reassembler, MAX_SDU};
use ibtca_protocol::atm::cell::PTI_AUU;
use ibtca_protocol::atm::{Cell, Vc, CELL_LEN};
use ibtca_tests::launcher::{alive, config, fabric, text, up, up_refused};
use ibtca_tests::TempDir;

const T: Duration = Duration::from_secs(30);
const VC: Vc = Vc { vpi: 0, vci: 32 };

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

/// Writes `data` as AAL5 cells on `VC`.
fn send(s: &mut UnixStream, data: &[u8]) {
    let mut cells = Vec::new();
    aal5::segment(VC, data, 0, &mut cells).unwrap();
    let bytes: Vec<u8> = cells.iter().flat_map(|c| c.bytes).collect();
    s.write_all(&bytes).unwrap();
}

/// Reads cells until one AAL5 frame on `VC` is whole.
fn receive(s: &mut UnixStream) -> Vec<u8> {
    s.set_read_timeout(Some(T)).unwrap();
    let mut r = Aal5Reassembler::new(MAX_SDU);
    let mut buf = [0u8; CELL_LEN];
    loop {
        s.read_exact(&mut buf).expect("a cell in time");
        let cell = Cell::from_slice(&buf).unwrap();
        assert_eq!(cell.header().vc(), VC);
        if let Some(f) = r.push(
            cell.payload(),
            cell.header().pti & PTI_AUU != 0,
            Instant::now(),
        ) {
            return f.expect("a good frame").data;
        }
    }
}

fn connect(p: &Path) -> UnixStream {
    UnixStream::connect(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn gateways_come_up_and_carry_frames_between_their_atm_sockets() {
    let dir = TempDir::new("fab-gw");
    let fab = up(&config("guest-and-two-gateways.json"), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    assert!(
        fab.stdout.contains("gateway: ATM listen:"),
        "{}",
        fab.stdout
    );
    let state = State::load(run).unwrap().expect("a state file");
    let exes: Vec<&str> = state.processes.iter().map(|p| p.exe.as_str()).collect();
    assert_eq!(
        exes.iter().filter(|e| **e == "ibtca-gateway").count(),
        2,
        "{exes:?}"
    );
    assert!(state.processes.iter().all(|p| alive(p.pid)));

    let (mut a, mut b) = (connect(&run.join("gw1.atm")), connect(&run.join("gw2.atm")));
    let there = frame(3000, 1);
    send(&mut a, &there);
    assert!(receive(&mut b) == there, "gw1 → gw2, byte-exact");
    let back = frame(77, 9);
    send(&mut b, &back);
    assert!(receive(&mut a) == back, "gw2 → gw1, byte-exact");

    let control = run.join("gw1.control");
    let reply = ibtca_switch::control::request(&control, "remote-qpn 0/33 0x20").unwrap();
    assert_eq!(reply, "ok VC 0/33: QP 17 to LID 1 QP 32");
    let stats = ibtca_switch::control::request(&control, "stats").unwrap();
    assert!(stats.contains("\"messages_sent\":1"), "{stats}");
    // `ibtca-fabric stats` shows the gateways' IB ports: the frames went
    // both ways over IB.
    let out = fabric(&["stats", "--run-dir", &run_s, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for gw in ["gw1", "gw2"] {
        let port = stats["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == gw)
            .unwrap_or_else(|| panic!("{gw} in {stats}"));
        assert_eq!(
            (&port["kind"], &port["up"]),
            (&"gateway".into(), &true.into())
        );
        for c in ["PortXmitPkts", "PortRcvPkts"] {
            assert!(
                port["counters"][c].as_u64().unwrap() >= 1,
                "{gw} {c}: {port}"
            );
        }
    }

    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success(), "down failed: {}", text(&out));
    assert!(state.processes.iter().all(|p| !alive(p.pid)));
    // The capture of gw1's ATM side holds both frames' cells.
    let pcap = std::fs::read(run.join("gw1-atm.pcap")).unwrap();
    let cells = aal5::cells_for(3000) + aal5::cells_for(77);
    assert_eq!(
        pcap.len(),
        24 + cells * (16 + 16 + 52),
        "pcap header, then one record per cell"
    );
}

#[test]
fn a_killed_gateway_restarts_and_carries_frames_again() {
    let dir = TempDir::new("fab-gw-restart");
    let fab = up(&config("guest-and-two-gateways.json"), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    let gw1 = |s: &State| {
        s.processes
            .iter()
            .find(|p| p.name == "gw1")
            .expect("gw1 in the state file")
            .pid
    };
    let old = gw1(&State::load(run).unwrap().unwrap());

    let out = fabric(&["restart", "--run-dir", &run_s, "gw1", "--guest-only"]);
    assert!(!out.status.success(), "a gateway has no guest");
    assert!(text(&out).contains("`gw1` has no guest"), "{}", text(&out));
    assert!(alive(old), "a refused restart leaves gw1 running");

    let out = fabric(&["restart", "--run-dir", &run_s, "gw1", "--kill"]);
    assert!(out.status.success(), "restart failed: {}", text(&out));
    let new = gw1(&State::load(run).unwrap().unwrap());
    assert!(
        text(&out).contains(&format!("restarted gw1 (pid {new})")),
        "{}",
        text(&out)
    );
    assert!(new != old && !alive(old) && alive(new), "{old} → {new}");
    assert!(run.join("gw1.log.1").exists(), "the old gateway's log kept");

    // The new gateway has its map, link, ATM and control sockets.
    let (mut a, mut b) = (connect(&run.join("gw1.atm")), connect(&run.join("gw2.atm")));
    let there = frame(9180, 3);
    send(&mut a, &there);
    assert!(receive(&mut b) == there, "gw1 → gw2 after the restart");
    let back = frame(48, 5);
    send(&mut b, &back);
    assert!(receive(&mut a) == back, "gw2 → gw1 after the restart");
    let stats = ibtca_switch::control::request(&run.join("gw1.control"), "stats").unwrap();
    assert!(
        stats.contains("\"messages_sent\":1") && stats.contains("\"messages_from_ib\":1"),
        "the new gateway's own counters: {stats}"
    );
}

#[test]
fn a_bad_gateway_map_starts_nothing() {
    let dir = TempDir::new("fab-gw-bad");
    let json = r#"{"nodes": [{"name": "gw", "lid": 10, "gateway": {"atm": "listen:gw.atm",
        "map": {"vcs": [{"vpi": 0, "vci": 7, "aal": 5, "service": "ubr",
                         "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 1}}]}}}]}"#;
    let err = up_refused(&dir, json);
    assert!(
        err.contains("gateway `gw` refused its options or map"),
        "{err}"
    );
    assert!(err.contains("VCI 7 is reserved"), "{err}");
    let out = fabric(&["check", &dir.join("bad.json").display().to_string()]);
    assert!(!out.status.success());
    assert!(text(&out).contains("VCI 7 is reserved"));
}
