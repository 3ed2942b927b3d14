//! Full stack, the ATM gateway with a real guest (issue 24): the shipped
//! `qemu-configs/guest-and-gateway.json` (a device n1 with its guest, a
//! gateway gw1, one switch) comes up with `ibtca-fabric up --guests`, and
//! the guest runs `ibtca-verbs atm-echo`: an RC QP to each of gw1's two
//! VCs' QPs (16 for VC 0/32 UBR, 17 for 0/33 CBR), every message received
//! sent back on its QP with each byte XORed with 0x5a. This test is the
//! ATM cell source and sink on gw1's ATM socket:
//!
//! - it reads the guest's QPNs from its console and sets them with
//!   `remote-qpn VPI/VCI QPN` on gw1's control socket (no fixed QPN, no
//!   race with the guest's boot);
//! - it sends AAL5 frames of 1, 47, 48, 49, 1,500 and 9,180 bytes and a few
//!   random lengths on both VCs (at most `WINDOW` outstanding per VC), and
//!   checks that each comes back on its own VC, in order, as a good AAL5
//!   frame holding exactly the frame's bytes XORed by the guest, and that
//!   nothing else arrives;
//! - the guest's command passes (`--wait`) and its console reports every
//!   frame on the right QP, in order, with the right length;
//! - gw1's counters (`stats`) agree: every cell in and out, every message
//!   both ways, no error of any kind;
//! - the capture holds an ERF ATM record for every cell in and out.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ibtca_protocol::atm::aal5::{self, Aal5Reassembler, MAX_SDU};
use ibtca_protocol::atm::cell::PTI_AUU;
use ibtca_protocol::atm::{Cell, Vc, CELL_LEN};
use ibtca_switch::control::request;
use ibtca_tests::launcher::{config, Down};
use ibtca_tests::vm::VmStack;
use ibtca_tests::workspace_bin;

/// The guest's VCs (the topology's map: local QPNs 16 and 17).
const VCS: [Vc; 2] = [Vc { vpi: 0, vci: 32 }, Vc { vpi: 0, vci: 33 }];
/// What the guest XORs every byte with.
const XOR: u8 = 0x5a;
/// Frames in flight per VC (the guest posts 8 receives per QP).
const WINDOW: usize = 4;
/// Booting a TCG guest and echoing under TCG is slow: generous limits.
const BOOT: Duration = Duration::from_secs(900);
const ECHO: Duration = Duration::from_secs(300);

/// The frame lengths of one VC: the AAL5 edges (one cell's payload with
/// and without the trailer), an Ethernet frame, the IP-over-ATM MTU and
/// four pseudo-random lengths (seeded per VC, printed on failure).
fn lengths(seed: u32) -> Vec<usize> {
    let mut x = seed;
    let mut v = vec![1, 47, 48, 49, 1500, 9180];
    for _ in 0..4 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        v.push(1 + (x >> 8) as usize % 9180);
    }
    v
}

fn frame(vc: Vc, index: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ (vc.vci as u8) ^ (index as u8).wrapping_mul(29))
        .collect()
}

/// The console of `node` in `run`, empty until it exists.
fn console(run: &Path, node: &str) -> String {
    std::fs::read_to_string(run.join(format!("{node}.console"))).unwrap_or_default()
}

/// Waits for a console line holding `needle` while `up` runs.
fn wait_line(run: &Path, up: &mut Child, needle: &str) -> String {
    let deadline = Instant::now() + BOOT;
    loop {
        let c = console(run, "n1");
        if let Some(l) = c.lines().find(|l| l.contains(needle)) {
            return l.to_owned();
        }
        if let Ok(Some(st)) = up.try_wait() {
            panic!("`up` ended ({st}) before the guest said {needle:?}:\n{c}");
        }
        assert!(Instant::now() < deadline, "no {needle:?} in {BOOT:?}:\n{c}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The value of `key=` in a console line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

/// Writes `data` as AAL5 cells on `vc`; returns how many cells.
fn send(s: &mut UnixStream, vc: Vc, data: &[u8]) -> u64 {
    let mut cells = Vec::new();
    aal5::segment(vc, data, 0, &mut cells).unwrap();
    let bytes: Vec<u8> = cells.iter().flat_map(|c| c.bytes).collect();
    s.write_all(&bytes).expect("cells into the gateway");
    cells.len() as u64
}

/// What one VC of the exchange has sent and still expects.
struct VcSide {
    vc: Vc,
    frames: Vec<Vec<u8>>,
    next: usize,
    expected: VecDeque<(usize, Vec<u8>)>,
    reasm: Aal5Reassembler,
}

impl VcSide {
    fn new(vc: Vc) -> Self {
        let frames = lengths(vc.vci.into())
            .into_iter()
            .enumerate()
            .map(|(i, len)| frame(vc, i, len))
            .collect();
        VcSide {
            vc,
            frames,
            next: 0,
            expected: VecDeque::new(),
            reasm: Aal5Reassembler::new(MAX_SDU),
        }
    }

    /// Sends frames until `WINDOW` are outstanding; returns the cells sent.
    fn fill(&mut self, s: &mut UnixStream) -> u64 {
        let mut cells = 0;
        while self.expected.len() < WINDOW && self.next < self.frames.len() {
            let f = &self.frames[self.next];
            cells += send(s, self.vc, f);
            self.expected
                .push_back((self.next, f.iter().map(|b| b ^ XOR).collect()));
            self.next += 1;
        }
        cells
    }

    fn done(&self) -> bool {
        self.next == self.frames.len() && self.expected.is_empty()
    }
}

fn stat(stats: &serde_json::Value, key: &str) -> u64 {
    stats[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {key} in {stats}"))
}

/// ERF records in a pcap file (24-byte file header, 16-byte record headers).
fn pcap_records(path: &PathBuf) -> u64 {
    let b = std::fs::read(path).unwrap_or_default();
    let (mut at, mut n) = (24usize, 0);
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + incl;
        n += 1;
    }
    assert_eq!(at, b.len(), "{}: whole records", path.display());
    n
}

#[test]
#[ignore = "boots a QEMU guest; run by scripts/test.sh"]
fn a_guest_echoes_aal5_frames_from_a_cell_source_through_the_gateway() {
    let stack = VmStack::get();
    let dir = stack.scratch("gwvm");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let down = Down(run.clone());
    let total: usize = VCS.iter().map(|v| lengths(v.vci.into()).len()).sum();
    let echo = format!(
        "n1=ibtca-verbs atm-echo --peer-lid 10 --peer-qpn 16,17 --frames {total} --xor {XOR:#x}"
    );
    let mut args = stack.guests_up(&config("guest-and-gateway.json"), &run_s);
    args.extend(["--guest-timeout", "1500", "--run", &echo, "--wait"].map(String::from));
    let mut up = Command::new(workspace_bin("ibtca-fabric"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ibtca-fabric up");

    // The guest's QPNs, to the gateway.
    let ready = wait_line(&run, &mut up, "IBTCA-ATM-ECHO ready ");
    eprintln!("guest: {ready}");
    let qpns: Vec<u32> = field(&ready, "qpns=")
        .split(',')
        .map(|q| q.parse().expect("a QPN"))
        .collect();
    assert_eq!(qpns.len(), 2, "{ready}");
    assert_eq!(field(&ready, "peer_qpns="), "16,17", "{ready}");
    let control = run.join("gw1.control");
    for (vc, (qpn, gw_qpn)) in VCS.iter().zip(qpns.iter().zip([16, 17])) {
        let reply = request(&control, &format!("remote-qpn 0/{} {qpn}", vc.vci))
            .expect("gw1's control socket");
        assert_eq!(
            reply,
            format!("ok VC 0/{}: QP {gw_qpn} to LID 1 QP {qpn}", vc.vci)
        );
    }

    // The exchange: frames out on both VCs, echoes checked as they come.
    let mut atm = UnixStream::connect(run.join("gw1.atm")).expect("gw1's ATM socket");
    atm.set_read_timeout(Some(ECHO)).unwrap();
    let mut sides: Vec<VcSide> = VCS.iter().map(|&vc| VcSide::new(vc)).collect();
    let (mut cells_in, mut cells_out, mut bytes) = (0u64, 0u64, 0u64);
    for s in &mut sides {
        cells_in += s.fill(&mut atm);
    }
    let mut buf = [0u8; CELL_LEN];
    while !sides.iter().all(VcSide::done) {
        if let Err(e) = atm.read_exact(&mut buf) {
            panic!(
                "cells from gw1: {e}; sent {:?}, waiting for {:?}\nstats: {:?}\n{}",
                sides.iter().map(|s| s.next).collect::<Vec<_>>(),
                sides
                    .iter()
                    .map(|s| s.expected.iter().map(|e| e.0).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
                request(&control, "stats"),
                console(&run, "n1")
            );
        }
        cells_out += 1;
        let cell = Cell::from_slice(&buf).expect("a well-formed cell");
        let h = cell.header();
        let side = sides
            .iter_mut()
            .find(|s| s.vc == h.vc())
            .unwrap_or_else(|| panic!("a cell on VC {:?}, not the guest's", h.vc()));
        let Some(f) = side
            .reasm
            .push(cell.payload(), h.pti & PTI_AUU != 0, Instant::now())
        else {
            continue;
        };
        let got = f.expect("a good AAL5 frame (CRC, length)").data;
        let (index, want) = side.expected.pop_front().unwrap_or_else(|| {
            panic!(
                "VC {:?}: a frame of {} bytes nobody sent",
                side.vc,
                got.len()
            )
        });
        assert!(
            got == want,
            "VC {:?} frame {index} ({} bytes): {} bytes back, first difference at {:?}",
            side.vc,
            want.len(),
            got.len(),
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
        bytes += got.len() as u64;
        cells_in += side.fill(&mut atm);
    }

    // The guest's side: every frame, on its QP, and a clean exit.
    let out = up.wait_with_output().expect("`up --wait` ends");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let c = console(&run, "n1");
    assert!(
        out.status.success() && said.contains("guest n1: commands passed"),
        "{said}\n{c}"
    );
    let done = format!("IBTCA-ATM-ECHO done frames={total} bytes={bytes}");
    assert!(c.lines().any(|l| l.contains(&done)), "{done:?}:\n{c}");
    for (side, qpn) in sides.iter().zip(&qpns) {
        let got: Vec<usize> = c
            .lines()
            .filter(|l| l.contains("IBTCA-ATM-ECHO frame ") && l.contains(&format!("qpn={qpn} ")))
            .map(|l| field(l, "len=").parse().unwrap())
            .collect();
        let want: Vec<usize> = side.frames.iter().map(Vec::len).collect();
        assert_eq!(got, want, "VC {:?}'s frames on QP {qpn}:\n{c}", side.vc);
    }

    // The gateway's counters agree; nothing went wrong anywhere.
    let reply = request(&control, "stats").expect("gw1 still answers");
    let stats: serde_json::Value = serde_json::from_str(
        reply
            .strip_prefix("ok ")
            .unwrap_or_else(|| panic!("stats: {reply}")),
    )
    .expect("stats as JSON");
    eprintln!("gw1: {stats}");
    let n = total as u64;
    for (key, want) in [
        ("cells_in", cells_in),
        ("cells_out", cells_out),
        ("atm_messages_in", n),
        ("messages_to_ib", n),
        ("messages_sent", n),
        ("messages_from_ib", n),
    ] {
        assert_eq!(stat(&stats, key), want, "{key}: {stats}");
    }
    assert_eq!(cells_in, cells_out, "as many cells back as in");
    for key in [
        "hec_corrected",
        "hec_dropped",
        "unknown_vc",
        "atm_overrun_dropped",
        "aal5_crc_errors",
        "aal5_length_errors",
        "aal5_aborts",
        "aal5_oversize",
        "aal5_timeouts",
        "send_failures",
        "dropped_no_qp",
        "dropped_backlog",
        "segment_errors",
        "qp_restarts",
    ] {
        assert_eq!(stat(&stats, key), 0, "{key}: {stats}");
    }

    // Every cell in and out, captured (the gateway flushes at exit).
    drop(atm);
    drop(down);
    assert_eq!(
        pcap_records(&run.join("gw1-atm.pcap")),
        cells_in + cells_out,
        "ERF records in gw1-atm.pcap"
    );
}
