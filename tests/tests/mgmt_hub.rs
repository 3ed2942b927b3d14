//! The management wire's hub (`ibtca-mgmt-hub`) as a process, with test
//! clients speaking QEMU's stream-netdev framing (4-byte big-endian length,
//! then the Ethernet frame) on its socket, as the guests' QEMUs do:
//! broadcasts reach every other client, unicasts only the port their MAC
//! was learnt on, unknown unicasts flood; a client sending a garbage
//! length is disconnected, a runt is dropped, a client dying mid-header or
//! never reading stalls nobody, and the hub keeps serving new clients;
//! frames split at random points arrive whole while other clients pour
//! random bytes onto the wire.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ibtca_tests::{workspace_bin, TempDir};

const BROADCAST: [u8; 6] = [0xff; 6];

struct Hub {
    child: Child,
}

impl Hub {
    fn start(socket: &Path, log: &Path) -> Hub {
        let child = Command::new(workspace_bin("ibtca-mgmt-hub"))
            .arg("--socket")
            .arg(socket)
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start ibtca-mgmt-hub");
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(socket).is_err() {
            assert!(Instant::now() < deadline, "the hub never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        Hub { child }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mac(n: u8) -> [u8; 6] {
    [0x52, 0x54, 0x00, 0x77, 0x00, n]
}

fn frame(dst: [u8; 6], src: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(payload);
    f
}

struct Port {
    s: UnixStream,
}

impl Port {
    fn connect(socket: &Path) -> Port {
        let s = UnixStream::connect(socket).expect("connect to the hub");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Port { s }
    }

    fn send(&mut self, f: &[u8]) {
        let mut wire = u32::try_from(f.len()).unwrap().to_be_bytes().to_vec();
        wire.extend_from_slice(f);
        self.s.write_all(&wire).expect("send a frame");
    }

    fn recv(&mut self) -> Vec<u8> {
        let mut len = [0u8; 4];
        self.s.read_exact(&mut len).expect("a frame's length");
        let mut f = vec![0u8; u32::from_be_bytes(len) as usize];
        self.s.read_exact(&mut f).expect("a frame");
        f
    }
}

#[test]
fn frames_go_to_the_learnt_port_and_broadcasts_to_all() {
    let dir = TempDir::new("mgmt-hub-switching");
    let socket = dir.join("mgmt.sock");
    let mut hub = Hub::start(&socket, &dir.join("hub.log"));
    let mut a = Port::connect(&socket);
    let mut b = Port::connect(&socket);
    let mut c = Port::connect(&socket);
    // c was accepted after a and b (one backlog): its frame reaches both.
    let hello_c = frame(BROADCAST, mac(3), b"hello from c");
    c.send(&hello_c);
    assert_eq!(a.recv(), hello_c);
    assert_eq!(b.recv(), hello_c);
    let hello_a = frame(BROADCAST, mac(1), b"hello from a");
    a.send(&hello_a);
    assert_eq!(b.recv(), hello_a);
    assert_eq!(c.recv(), hello_a);
    let hello_b = frame(BROADCAST, mac(2), b"hello from b");
    b.send(&hello_b);
    assert_eq!(a.recv(), hello_b);
    assert_eq!(c.recv(), hello_b);

    // Unicast to a learnt MAC: a alone; b's next frame is the marker.
    let to_a = frame(mac(1), mac(3), b"for a only");
    c.send(&to_a);
    let marker = frame(BROADCAST, mac(3), b"marker");
    c.send(&marker);
    assert_eq!(a.recv(), to_a);
    assert_eq!(a.recv(), marker);
    assert_eq!(b.recv(), marker, "b never sees a's unicast");
    // An unknown destination floods; a frame is never echoed to its sender.
    let unknown = frame(mac(9), mac(3), b"to nobody known");
    c.send(&unknown);
    assert_eq!(a.recv(), unknown);
    assert_eq!(b.recv(), unknown);
    let echo_check = frame(BROADCAST, mac(1), b"from a again");
    a.send(&echo_check);
    assert_eq!(c.recv(), echo_check);
    assert_eq!(b.recv(), echo_check);
    // A largest frame (64 KiB of payload) crosses intact.
    let big: Vec<u8> = (0..65536u32).map(|i| (i * 7) as u8).collect();
    let big = frame(mac(2), mac(1), &big);
    a.send(&big);
    assert_eq!(b.recv(), big);
    assert!(hub.running());
}

#[test]
fn hostile_and_dead_clients_stall_nobody() {
    let dir = TempDir::new("mgmt-hub-hostile");
    let socket = dir.join("mgmt.sock");
    let log = dir.join("hub.log");
    let mut hub = Hub::start(&socket, &log);
    let mut a = Port::connect(&socket);
    let mut b = Port::connect(&socket);
    let mut sleeper = Port::connect(&socket); // never reads
    let mut evil = Port::connect(&socket);

    // A garbage length: the hub hangs up on its sender.
    evil.s
        .write_all(&[0xff, 0xff, 0xff, 0xf0, 1, 2, 3])
        .unwrap();
    let mut buf = [0u8; 64];
    match evil.s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("the hub kept a client that sent a garbage length: {other:?}"),
    }
    // One that dies in the middle of a length.
    let mut half = Port::connect(&socket);
    half.s.write_all(&[0, 0]).unwrap();
    drop(half);
    // A runt (shorter than an Ethernet header) is dropped, not forwarded.
    a.send(&[1, 2, 3, 4, 5]);
    let ok = frame(BROADCAST, mac(1), b"after the garbage");
    a.send(&ok);
    assert_eq!(b.recv(), ok, "the runt was dropped; the wire still works");

    // 3000 frames of 1500 bytes (4.5 MB, past the sleeper's 1 MiB queue):
    // b gets every one, in order, while the sleeper reads nothing.
    let (tx, rx) = mpsc::channel::<u32>();
    let reader = std::thread::spawn(move || {
        for want in 0..3000u32 {
            let f = b.recv();
            assert_eq!(&f[14..18], &want.to_be_bytes(), "frame {want} in order");
            assert_eq!(f.len(), 14 + 1500);
            if want % 100 == 99 {
                tx.send(want).unwrap();
            }
        }
        b
    });
    for batch in 0..30u32 {
        for i in 0..100u32 {
            let mut payload = vec![0x5a; 1500];
            payload[..4].copy_from_slice(&(batch * 100 + i).to_be_bytes());
            a.send(&frame(BROADCAST, mac(1), &payload));
        }
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(60)),
            Ok(batch * 100 + 99),
            "b got batch {batch} although the sleeper reads nothing"
        );
    }
    let mut b = reader.join().unwrap();
    assert!(hub.running(), "the hub survived");

    // The sleeper finally reads: the oldest frames, then a gap (dropped).
    sleeper
        .s
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let first = sleeper.recv();
    assert_eq!(&first[..6], &BROADCAST);
    drop(sleeper);
    // A newcomer joins the wire and hears a and is heard by b.
    let mut d = Port::connect(&socket);
    let from_d = frame(BROADCAST, mac(4), b"new client");
    d.send(&from_d);
    assert_eq!(b.recv(), from_d);
    assert_eq!(a.recv(), from_d);
    let to_d = frame(mac(4), mac(1), b"to d");
    a.send(&to_d);
    assert_eq!(d.recv(), to_d);
    assert!(hub.running());
    drop((a, b, d));
    // The hub logged the refused length and the frames the sleeper lost.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lost = text
            .lines()
            .filter_map(|l| l.split("queue_full=").nth(1))
            .filter_map(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        if text.contains("frame length too large") && lost > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "hub log:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_second_hub_on_a_live_socket_is_refused() {
    let dir = TempDir::new("mgmt-hub-twice");
    let socket = dir.join("mgmt.sock");
    let _hub = Hub::start(&socket, &dir.join("hub.log"));
    let out = Command::new(workspace_bin("ibtca-mgmt-hub"))
        .arg("--socket")
        .arg(&socket)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is in use by another process"), "{err}");
}

/// xorshift64*: a fixed sequence of "random" numbers per seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn frames_split_anywhere_arrive_whole_beside_random_garbage() {
    let dir = TempDir::new("mgmt-hub-random");
    let socket = dir.join("mgmt.sock");
    let mut hub = Hub::start(&socket, &dir.join("hub.log"));
    let mut a = Port::connect(&socket);
    let mut b = Port::connect(&socket);
    let mut rng = Rng(0x1bca_77aa_5eed_0001);
    // Frames of random sizes, each written in random pieces; all of them
    // and all the garbage together stay under the hub's 1 MiB queue per
    // client, so however slowly b reads, nothing of a's may be dropped.
    let frames: Vec<Vec<u8>> = (0..150)
        .map(|i| {
            let len = 1 + rng.below(5000);
            let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let mut f = frame(mac(2), mac(1), &payload);
            f[14..16].copy_from_slice(&(i as u16).to_be_bytes());
            f
        })
        .collect();
    let want = frames.clone();
    let reader = std::thread::spawn(move || {
        let mut got = 0;
        while got < want.len() {
            let f = b.recv();
            // Garbage that parsed as frames may reach b too: keep a's.
            if f[6..12] == mac(1) {
                assert_eq!(f, want[got], "frame {got} arrived whole");
                got += 1;
            }
        }
    });
    // Hostile neighbours: random bytes from several clients at once.
    let garbage: Vec<std::thread::JoinHandle<()>> = (0..4u64)
        .map(|k| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (k + 1));
                for _ in 0..20 {
                    let Ok(mut s) = UnixStream::connect(&socket) else {
                        continue;
                    };
                    s.set_nonblocking(true).unwrap();
                    let n = 1 + rng.below(3000);
                    let bytes: Vec<u8> = (0..n)
                        .map(|i| {
                            // Small lengths now and then, so some parse.
                            if i % 1000 < 2 {
                                0
                            } else {
                                rng.next() as u8
                            }
                        })
                        .collect();
                    let _ = s.write(&bytes);
                }
            })
        })
        .collect();
    for f in &frames {
        let mut wire = u32::try_from(f.len()).unwrap().to_be_bytes().to_vec();
        wire.extend_from_slice(f);
        let mut at = 0;
        while at < wire.len() {
            let n = (1 + rng.below(700)).min(wire.len() - at);
            a.s.write_all(&wire[at..at + n]).unwrap();
            at += n;
        }
    }
    for g in garbage {
        g.join().unwrap();
    }
    reader.join().unwrap();
    assert!(hub.running(), "the hub survived the garbage");
}

#[test]
fn a_flood_of_source_macs_fills_the_table_and_unknowns_flood() {
    let dir = TempDir::new("mgmt-hub-macs");
    let socket = dir.join("mgmt.sock");
    let mut hub = Hub::start(&socket, &dir.join("hub.log"));
    let mut a = Port::connect(&socket);
    let mut b = Port::connect(&socket);
    let mut evil = Port::connect(&socket);
    // Learnt before the flood: b's MAC.
    let hello_b = frame(BROADCAST, mac(2), b"b");
    b.send(&hello_b);
    assert_eq!(a.recv(), hello_b);
    assert_eq!(evil.recv(), hello_b);
    // 5000 broadcasts from as many source MACs (past the table's 4096).
    let spoofed = |i: u32| {
        let [_, x, y, z] = i.to_be_bytes();
        frame(BROADCAST, [0x02, 0xee, 0, x, y, z], b"spoof")
    };
    // 5000 × 24 bytes queue within the hub's 1 MiB per client.
    for i in 0..5000u32 {
        evil.send(&spoofed(i));
    }
    for i in 0..5000u32 {
        assert_eq!(a.recv(), spoofed(i));
        assert_eq!(b.recv(), spoofed(i));
    }
    // The table is full: a's MAC, new, is not learnt, so a frame to it
    // floods (b sees it too); b's, learnt before, still goes to b alone.
    let hello_a = frame(BROADCAST, mac(1), b"a");
    a.send(&hello_a);
    assert_eq!(b.recv(), hello_a);
    assert_eq!(evil.recv(), hello_a);
    let to_a = frame(mac(1), mac(2), b"to a");
    b.send(&to_a);
    assert_eq!(a.recv(), to_a);
    assert_eq!(evil.recv(), to_a, "not learnt: flooded");
    let to_b = frame(mac(2), mac(1), b"to b");
    a.send(&to_b);
    assert_eq!(b.recv(), to_b);
    let marker = frame(BROADCAST, mac(1), b"marker");
    a.send(&marker);
    assert_eq!(evil.recv(), marker, "learnt before the flood: b alone");
    assert!(hub.running());
}
