//! What the hive allocates per MAD of a host port's client, counted by a
//! global allocator on the hive's thread alone: a directed-route Get
//! through two hosted switches to a hosted CA, or to the second switch
//! itself, and its answer back to the client. Buffers the loop keeps
//! (the work queue, the switches' shared outbox buffer, the host port's
//! queues of what it sends, the descriptors polled, the control socket's
//! among them) are reused turn after turn; what is left is
//! the request's packet the host port builds and the answer's packet its
//! node builds, one allocation each, the MAD encoded straight into it
//! ([`MAX_PER_MAD`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ibtca_hive::{Hive, HiveConfig};
use ibtca_protocol::mad::attr::id;
use ibtca_protocol::mad::{method, Smp, PERMISSIVE_LID};
use ibtca_simport::client::SimClient;

/// Allocations a MAD may cost the hive: the request's packet and the
/// answer's.
const MAX_PER_MAD: u64 = 2;

/// Counts allocations made on threads that asked for it ([`COUNTED`]).
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's allocations are counted in [`ALLOCS`].
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to `System` unchanged; counting touches
// only an atomic and a `const` thread-local without a destructor (no
// allocation, no re-entry).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// How long the test waits for what must come; only a broken hive makes
/// it wait that long.
const WAIT: Duration = Duration::from_secs(120);

/// host (the host port) - sw0 - sw1 - h1: each switch's port 1 toward
/// the host port, port 2 away from it.
fn config(base: &str) -> HiveConfig {
    let text = format!(
        r#"{{ "switches": [
              {{ "name": "sw0", "guid": 256, "lid": 1, "ports": ["hive:host:1", "hive:sw1:1"] }},
              {{ "name": "sw1", "guid": 257, "lid": 2, "ports": ["hive:sw0:2", "hive:h1:1"] }} ],
            "cas": [ {{ "name": "host", "guid": 119, "lid": 5, "port": "hive:sw0:1", "sim": "{base}" }},
                     {{ "name": "h1", "guid": 17, "lid": 6, "port": "hive:sw1:2" }} ],
            "sm_managed": false }}"#
    );
    HiveConfig::parse(&text).unwrap()
}

/// Sends a directed NodeInfo Get along `path` and waits for its answer;
/// returns the answering node's GUID.
fn node_info(client: &SimClient, tid: u64, path: &[u8]) -> u64 {
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, path).unwrap();
    smp.tid = tid;
    client.send_smp(PERMISSIVE_LID, &smp).unwrap();
    let r = client.recv().expect("an answer");
    assert_eq!(r.envelope.status, 0, "answered, not timed out");
    let answer = Smp::parse(&r.mad).unwrap();
    assert_eq!((answer.tid, answer.method), (tid, method::GET_RESP));
    u64::from_be_bytes(answer.data[12..20].try_into().unwrap())
}

#[test]
fn a_mad_through_hosted_switches_costs_the_hive_only_its_two_packets() {
    let base = format!("ibtca-hive-allocs-{}", std::process::id());
    let mut hive = Hive::new(&config(&base)).unwrap();
    // As `ibtca-hive` runs it: with its control socket, which the loop
    // polls every turn.
    let control = std::env::temp_dir().join(format!("{base}.control"));
    let _ = std::fs::remove_file(&control);
    hive.set_control_socket(&control).unwrap();
    let (stop_rx, stop_tx) = UnixStream::pair().unwrap();
    let running = std::thread::spawn(move || {
        COUNTED.set(true);
        hive.run(stop_rx.as_raw_fd()).unwrap();
    });
    let client = SimClient::connect(&base, WAIT).unwrap();
    // To the CA behind both switches, and to the second switch itself.
    let paths: [(&[u8], u64); 2] = [(&[1, 2, 2], 17), (&[1, 2], 257)];
    let mut tid = 0;
    let mut round = |rounds: u64| {
        for _ in 0..rounds {
            for (path, guid) in paths {
                tid += 1;
                assert_eq!(node_info(&client, tid, path), guid);
            }
        }
    };
    // The loop's buffers grow to what a turn needs.
    round(32);
    let before = ALLOCS.load(Ordering::Relaxed);
    let rounds = 256;
    round(rounds);
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    let mads = rounds * paths.len() as u64;
    drop(stop_tx);
    running.join().unwrap();
    let _ = std::fs::remove_file(&control);
    eprintln!("{allocs} allocations for {mads} MADs");
    assert!(
        allocs <= MAX_PER_MAD * mads,
        "{allocs} allocations for {mads} MADs: more than {MAX_PER_MAD} a MAD"
    );
}
