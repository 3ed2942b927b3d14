//! The raw Unix-socket baselines measured in the same run as the device
//! rows: a stream, small messages and a ping-pong between two threads.
//! Both threads play the guests' part, so they take the run's guest
//! placement (`placement.rs`: niceness, CPUs) as the guests do.

use super::*;

/// Binds the calling thread to `cpu` (`--split`), if given.
fn bind(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        let cpus = cpu.to_string().parse().expect("a CPU number");
        ibtca_device::sched::set_affinity(&cpus)
            .unwrap_or_else(|e| panic!("cannot bind to CPU {cpu}: {e}"));
    }
}

/// Raw `UnixStream` throughput: one thread writes `chunk`-byte buffers
/// (one `write_all` each) for `secs`, the other reads them with `read_exact`
/// of `chunk` bytes; counted at the reader. Both at the guests' placement;
/// with `--split` the writer runs on CPU 0 and the reader on CPU 1, like
/// the two devices.
pub(super) fn raw_stream(chunk: usize, secs: f64) -> Rate {
    let split = split_cpus();
    on_guest_thread("raw-reader", 1, move || raw_stream_here(chunk, secs, split))
}

/// [`raw_stream`] with the reader on the calling thread (bound to the
/// second CPU of `split`, the writer to the first).
fn raw_stream_here(chunk: usize, secs: f64, split: Option<(usize, usize)>) -> Rate {
    bind(split.map(|c| c.1));
    let (mut w, mut r) = UnixStream::pair().expect("socketpair");
    let cpu0 = cpu_snapshot();
    let writer = guest_thread("raw-writer", 0, move || {
        bind(split.map(|c| c.0));
        let buf = vec![0x5au8; chunk];
        let end = Instant::now() + Duration::from_secs_f64(secs);
        // Check the clock every 64 writes: a clock read costs as much as a
        // small write.
        'outer: loop {
            for _ in 0..64 {
                if w.write_all(&buf).is_err() {
                    break 'outer;
                }
            }
            if Instant::now() >= end {
                break;
            }
        }
    });
    let mut buf = vec![0u8; chunk];
    r.read_exact(&mut buf).expect("first chunk");
    let t = Instant::now();
    let mut msgs = 0u64;
    while r.read_exact(&mut buf).is_ok() {
        msgs += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    // The writer's time before it exits; the reader is this thread.
    let cpu = cpu_delta(&cpu0, &cpu_snapshot());
    writer.join().expect("raw writer");
    Rate {
        msgs,
        bytes: msgs * chunk as u64,
        secs,
        link: None,
        cpu: Some(cpu),
    }
}

/// Spawns a named thread (the name is what [`cpu_delta`] classifies by).
pub(super) fn named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawn a bench thread")
}

/// Raw `UnixStream` ping-pong of `size` bytes each way between two threads
/// at the guests' placement; µs per one-way trip (round trip / 2).
pub(super) fn raw_pingpong(size: usize, secs: f64) -> PingPong {
    raw_pingpong_placed(size, secs, true)
}

/// [`raw_pingpong`], its two threads at the guests' placement (`placed`)
/// or where the bench's main thread is (nice 0 unless the bench was
/// started niced, not pinned).
pub(super) fn raw_pingpong_placed(size: usize, secs: f64, placed: bool) -> PingPong {
    let (a, mut b) = UnixStream::pair().expect("socketpair");
    let echo_loop = move || {
        let mut m = vec![0u8; size];
        while b.read_exact(&mut m).is_ok() {
            if b.write_all(&m).is_err() {
                break;
            }
        }
    };
    let (echo, p) = if placed {
        let echo = guest_thread("raw-echo", 1, echo_loop);
        (
            echo,
            on_guest_thread("raw-ping", 0, || ping_loop(a, size, secs)),
        )
    } else {
        let echo = named("raw-echo", echo_loop);
        (
            echo,
            named("raw-ping", move || ping_loop(a, size, secs))
                .join()
                .expect("raw ping"),
        )
    };
    echo.join().expect("raw echo");
    p
}

/// The timed side of a raw ping-pong on `a`; hangs up when done.
fn ping_loop(mut a: UnixStream, size: usize, secs: f64) -> PingPong {
    let mut m = vec![0xa5u8; size];
    let mut samples = Vec::new();
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        let t = Instant::now();
        a.write_all(&m).unwrap();
        a.read_exact(&mut m).unwrap();
        samples.push(t.elapsed().as_nanos() as u64);
    }
    drop(a);
    PingPong::from_round_trips(samples)
}

pub(super) fn median_ns(mut ns: Vec<u64>) -> f64 {
    ns.sort_unstable();
    ns.get(ns.len() / 2).copied().unwrap_or(0) as f64
}
