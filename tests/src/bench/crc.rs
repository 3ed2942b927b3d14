//! `ibtca-bench crc`: the packet CRCs on 4 KiB RDMA WRITE packets. It
//! prints MB/s for a memcpy of the same buffer (baseline), byte-at-a-time
//! table loops (the reference, kept here only), the protocol crate's
//! `icrc`/`vcrc`, the fused `packet_crcs`, and whole `Packet::build` /
//! `PacketView::parse`, all in the same run. The CRCs' correctness is the
//! protocol crate's unit tests'; this only checks that the table loops and
//! the protocol crate's routines agree on the packet measured.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ibtca_protocol::crc::{icrc, packet_crcs, vcrc};
use ibtca_protocol::headers::Reth;
use ibtca_protocol::{Opcode, Packet, PacketView};

const fn table32() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

const fn table16() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u16;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xd008
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static BYTEWISE_CRC32: [u32; 256] = table32();
static BYTEWISE_VCRC: [u16; 256] = table16();

/// The byte-at-a-time ICRC for a local packet: LRH.VL and BTH resv8a masked in a copy
/// of the 20 header bytes, then byte-at-a-time CRC-32.
fn bytewise_icrc_local(covered: &[u8]) -> u32 {
    let (head, rest) = covered.split_at(20);
    let mut masked = [0u8; 20];
    masked.copy_from_slice(head);
    masked[0] |= 0xf0;
    masked[12] = 0xff;
    let mut register = !0u32;
    for &b in masked.iter().chain(rest) {
        let index = (register ^ u32::from(b)) as u8;
        register = BYTEWISE_CRC32[usize::from(index)] ^ (register >> 8);
    }
    !register
}

fn bytewise_vcrc(bytes: &[u8]) -> u16 {
    let mut register: u16 = 0xffff;
    for &b in bytes {
        let index = (register ^ u16::from(b)) as u8;
        register = BYTEWISE_VCRC[usize::from(index)] ^ (register >> 8);
    }
    !register
}

/// Runs `f` over `bytes_per_call`-byte inputs for about `budget` (after a
/// warm-up) and returns MB/s (10^6 bytes per second), best of three rounds.
fn mbps(bytes_per_call: usize, mut f: impl FnMut()) -> f64 {
    let budget = Duration::from_millis(300);
    for _ in 0..1000 {
        f();
    }
    let mut best = 0f64;
    for _ in 0..3 {
        let start = Instant::now();
        let mut calls = 0u64;
        while start.elapsed() < budget {
            for _ in 0..256 {
                f();
            }
            calls += 256;
        }
        let rate = calls as f64 * bytes_per_call as f64 / start.elapsed().as_secs_f64() / 1e6;
        best = best.max(rate);
    }
    best
}

/// Measures and prints the table (module doc).
pub(super) fn run() -> ExitCode {
    let mut packet = Packet::new(Opcode::RcRdmaWriteFirst);
    packet.ext.reth = Some(Reth {
        va: 0x1000,
        rkey: 7,
        dma_len: 1 << 20,
    });
    packet.payload = (0..4096u32).map(|i| (i * 31 + 7) as u8).collect();
    let wire = packet.build().unwrap();
    let n = wire.len();
    let covered = &wire[..n - 6];
    let through_icrc = &wire[..n - 2];

    // The table loops give the same answers as the protocol crate.
    assert_eq!(bytewise_icrc_local(covered), icrc(covered));
    assert_eq!(bytewise_vcrc(through_icrc), vcrc(through_icrc));
    let crcs = packet_crcs(covered, None);
    assert_eq!(
        (crcs.icrc, crcs.vcrc),
        (bytewise_icrc_local(covered), bytewise_vcrc(through_icrc))
    );

    let mut copy = vec![0u8; n];
    let memcpy = mbps(n, || {
        copy.copy_from_slice(black_box(&wire));
        black_box(&copy);
    });
    let bytewise_i = mbps(covered.len(), || {
        black_box(bytewise_icrc_local(black_box(covered)));
    });
    let fast_i = mbps(covered.len(), || {
        black_box(icrc(black_box(covered)));
    });
    let bytewise_v = mbps(through_icrc.len(), || {
        black_box(bytewise_vcrc(black_box(through_icrc)));
    });
    let fast_v = mbps(through_icrc.len(), || {
        black_box(vcrc(black_box(through_icrc)));
    });
    // ICRC + VCRC of one packet, as build and parse each do.
    let bytewise_both = mbps(n, || {
        black_box(bytewise_icrc_local(black_box(covered)));
        black_box(bytewise_vcrc(black_box(through_icrc)));
    });
    let fast_both = mbps(n, || {
        black_box(icrc(black_box(covered)));
        black_box(vcrc(black_box(through_icrc)));
    });
    let fused = mbps(n, || {
        black_box(packet_crcs(black_box(covered), None));
    });
    let build = mbps(n, || {
        black_box(black_box(&packet).build().unwrap());
    });
    let parse = mbps(n, || {
        black_box(PacketView::parse(black_box(&wire)).unwrap());
    });

    println!("{n}-byte packet (4096-byte payload), MB/s = 10^6 bytes/s, best of 3");
    println!("  memcpy (baseline)      {memcpy:>9.0}");
    println!("  ICRC  byte-at-a-time   {bytewise_i:>9.0}");
    println!(
        "  ICRC  current         {fast_i:>9.0}  ({:.1}x)",
        fast_i / bytewise_i
    );
    println!("  VCRC  byte-at-a-time   {bytewise_v:>9.0}");
    println!(
        "  VCRC  folding/sliced   {fast_v:>9.0}  ({:.1}x)",
        fast_v / bytewise_v
    );
    println!("  ICRC+VCRC bytewise     {bytewise_both:>9.0}");
    println!(
        "  ICRC+VCRC current      {fast_both:>9.0}  ({:.1}x)",
        fast_both / bytewise_both
    );
    println!(
        "  ICRC+VCRC fused        {fused:>9.0}  ({:.1}x)",
        fused / bytewise_both
    );
    println!("  Packet::build          {build:>9.0}");
    println!("  PacketView::parse      {parse:>9.0}");
    ExitCode::SUCCESS
}
