//! `ibtca-bench drdma`, second table: DRDMA through the mapped window
//! against an ordinary RDMA WRITE or READ work request of the same size,
//! between the same two in-process devices, in one run.
//!
//! Both paths start from the same place: the payload is in the producer's
//! hands and must reach B (WRITE), or B's bytes must reach the consumer
//! (READ).
//!
//! - RDMA WRITE: the guest copies the payload into its registered buffer,
//!   posts the WQEs (one doorbell) and the device gathers the bytes by DMA.
//! - DRDMA WRITE: one DRDMA_SUBMIT_MASK, the WQEs (one doorbell), a store of
//!   the payload into each range's mapped PMB page, one DRDMA_COMMIT_MASK.
//! - RDMA READ: the WQEs, the completions, then the guest copies the bytes
//!   out of its buffer.
//! - DRDMA READ: one DRDMA_SUBMIT_MASK (READ), the WQEs, then per range:
//!   read ARR_CTRL until the response is shown (PCI Valid), load the bytes
//!   from the mapped page, DRDMA_COMMIT of the count; then the completions.
//!
//! Every BAR0 access is a synchronous vfio-user message, as QEMU makes them
//! once the window is mmappable. "rate" keeps [`DEPTH`] transfers in flight
//! per round (one per range); "QD 1" times single transfers from the first
//! store or copy to the completion (a round trip: request and ACK or
//! response), median.

use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::drdma::{self as d, direct_wqe};
use ibtca_tests::pair::LinkedPair;
use ibtca_tests::sim_guest::{remote, send_wqe};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

/// Transfers in flight per round of the rate runs: 16 ranges (the device
/// answers up to 16 RDMA READs at once), the same depth for both paths.
const DEPTH: u32 = 16;
/// Transfer sizes; one DRDMA range holds at most 4 KiB.
const SIZES: [usize; 4] = [64, 256, 1024, 4096];

/// Which way the bytes go and by which path.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Write { direct: bool },
    Read { direct: bool },
}

struct Bench {
    p: LinkedPair,
    window: GuestMemoryMmap,
    data: Vec<u8>,
}

impl Bench {
    fn new() -> Self {
        let mut p = super::drdma::pair(true);
        let window = d::map_window(&mut p.a.g).expect("mapped window");
        let data: Vec<u8> = (0..d::RANGE as usize).map(|i| (i * 13) as u8).collect();
        // B's side of the READs.
        for arr in 0..DEPTH {
            p.b.g.write(p.b.buf + u64::from(arr) * d::RANGE, &data);
        }
        Bench { p, window, data }
    }

    /// One round of `n` transfers of `size` bytes (ranges 0..n, B's
    /// buffer at 4 KiB steps), up to the last completion.
    fn round(&mut self, op: Op, n: u32, size: usize) {
        let p = &mut self.p;
        let payload = &self.data[..size];
        let all = u32::MAX >> (32 - n);
        let raddr = |arr: u32| p.b.buf + u64::from(arr) * d::RANGE;
        let wqes: Vec<SendWqe> = (0..n)
            .map(|arr| {
                let id = u64::from(arr);
                let local = p.a.buf + u64::from(arr) * d::RANGE;
                let len = size as u32;
                match op {
                    Op::Write { direct: true } => {
                        direct_wqe(WR_DRDMA_WRITE, id, arr, len, raddr(arr), p.b.rkey)
                    }
                    Op::Read { direct: true } => {
                        direct_wqe(WR_DRDMA_READ, id, arr, len, raddr(arr), p.b.rkey)
                    }
                    Op::Write { direct: false } => remote(
                        send_wqe(WR_RDMA_WRITE, id, local, len, p.a.lkey),
                        raddr(arr),
                        p.b.rkey,
                    ),
                    Op::Read { direct: false } => remote(
                        send_wqe(WR_RDMA_READ, id, local, len, p.a.lkey),
                        raddr(arr),
                        p.b.rkey,
                    ),
                }
            })
            .collect();
        match op {
            Op::Write { direct: false } => {
                for arr in 0..n {
                    p.a.g.write(p.a.buf + u64::from(arr) * d::RANGE, payload);
                }
                p.a.g.post_send_batch(&mut p.a.qp, &wqes);
            }
            Op::Write { direct: true } => {
                d::submit_mask(&mut p.a.g, 0, all, true, size as u32, false);
                p.a.g.post_send_batch(&mut p.a.qp, &wqes);
                for arr in 0..n {
                    let at = GuestAddress(u64::from(arr) * d::RANGE);
                    self.window.write_slice(payload, at).expect("window store");
                }
                d::commit_mask(&mut p.a.g, 0, all, false);
            }
            Op::Read { direct: false } => p.a.g.post_send_batch(&mut p.a.qp, &wqes),
            Op::Read { direct: true } => {
                d::submit_mask(&mut p.a.g, 0, all, false, size as u32, false);
                p.a.g.post_send_batch(&mut p.a.qp, &wqes);
                let mut got = vec![0u8; size];
                for arr in 0..n {
                    wait_shown(p, arr);
                    let at = GuestAddress(u64::from(arr) * d::RANGE);
                    self.window.read_slice(&mut got, at).expect("window load");
                    let commit = arr | ((size as u32) << 16);
                    p.a.g.client.write32(0, regs::DRDMA_COMMIT, commit);
                    assert_eq!(got, payload, "DRDMA READ bytes of range {arr}");
                }
            }
        }
        super::drdma::successes(p, n);
        if op == (Op::Read { direct: false }) {
            for arr in 0..n {
                let got = p.a.g.read(p.a.buf + u64::from(arr) * d::RANGE, size);
                assert_eq!(got, payload, "RDMA READ bytes of transfer {arr}");
            }
        }
    }

    /// Transfers per second at [`DEPTH`] in flight, over `secs`.
    fn rate(&mut self, op: Op, size: usize, secs: f64) -> f64 {
        self.round(op, DEPTH, size);
        let start = Instant::now();
        let mut done = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            self.round(op, DEPTH, size);
            done += u64::from(DEPTH);
        }
        let rate = done as f64 / start.elapsed().as_secs_f64();
        if let Op::Write { .. } = op {
            let got = self.p.b.g.read(self.p.b.buf, size);
            assert_eq!(got, self.data[..size], "WRITE bytes in B");
        }
        rate
    }

    /// Median µs of one transfer alone, over `secs`.
    fn qd1_us(&mut self, op: Op, size: usize, secs: f64) -> f64 {
        self.round(op, 1, size);
        let start = Instant::now();
        let mut samples = Vec::new();
        while start.elapsed().as_secs_f64() < secs {
            let t = Instant::now();
            self.round(op, 1, size);
            samples.push(t.elapsed().as_nanos() as u64);
        }
        super::median_ns(samples) / 1000.0
    }
}

/// Reads ARR_CTRL of `arr` until the device shows a read response in it.
fn wait_shown(p: &mut LinkedPair, arr: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while d::arr_bits(&mut p.a.g, arr) & regs::ARR_PCI_VALID == 0 {
        assert!(Instant::now() < deadline, "no read response in range {arr}");
        std::hint::spin_loop();
    }
}

/// Runs both paths at every size and prints the comparison table.
pub fn run(secs: f64) {
    let mut b = Bench::new();
    let mut rows = Vec::new();
    for (name, wqe, direct) in [
        (
            "WRITE",
            Op::Write { direct: false },
            Op::Write { direct: true },
        ),
        (
            "READ",
            Op::Read { direct: false },
            Op::Read { direct: true },
        ),
    ] {
        for size in SIZES {
            let label = super::fmt_size(size as f64);
            eprintln!("[bench] {name} {label}: RDMA and DRDMA, rate and QD 1, {secs} s each");
            let (r_rate, d_rate) = (b.rate(wqe, size, secs), b.rate(direct, size, secs));
            let (r_us, d_us) = (b.qd1_us(wqe, size, secs), b.qd1_us(direct, size, secs));
            rows.push(vec![
                name.to_string(),
                label,
                super::fmt_rate(r_rate),
                super::fmt_rate(d_rate),
                format!("{:.2}", d_rate / r_rate),
                super::fmt_us(r_us),
                super::fmt_us(d_us),
                format!("{:.2}", d_us / r_us),
            ]);
        }
    }
    println!();
    println!(
        "DRDMA (mapped window) against an ordinary RDMA work request, same two devices, \
         path MTU 4096, {secs} s per cell; rate: {DEPTH} transfers in flight per round; \
         QD 1: one transfer from first store to completion, median. Ratios are DRDMA / RDMA \
         (rate: higher is better for DRDMA; µs: lower is)."
    );
    super::print_grid(
        &[
            "op",
            "size",
            "RDMA msg/s",
            "DRDMA msg/s",
            "rate ×",
            "RDMA QD1 µs",
            "DRDMA QD1 µs",
            "µs ×",
        ],
        &rows,
        &[2, 3, 4, 5, 6, 7],
    );
}
