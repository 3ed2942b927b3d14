//! The CRC-32 routine and the header parsers against packets captured from
//! the Linux rxe driver (see `data/rxe_roce_capture.rs`).

#[path = "data/rxe_roce_capture.rs"]
mod capture;
mod common;

use common::hex;
use ibtca_protocol::crc::Crc32;
use ibtca_protocol::headers::{AckKind, Aeth, Bth, Reth};
use ibtca_protocol::Opcode;

/// RoCEv2 (IPv4) ICRC: 8 bytes of ones for the missing LRH, then the IP
/// packet with TOS, TTL, header checksum, UDP checksum and BTH resv8a as
/// ones, up to the ICRC. Used only here: ibtca itself speaks native IB.
fn roce_v2_icrc(ip: &[u8]) -> u32 {
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let mut masked = ip[..ip.len() - 4].to_vec();
    masked[1] = 0xff; // TOS
    masked[8] = 0xff; // TTL
    masked[10..12].fill(0xff); // IP checksum
    masked[ihl + 6..ihl + 8].fill(0xff); // UDP checksum
    masked[ihl + 8 + 4] = 0xff; // BTH resv8a
    Crc32::new().update(&[0xff; 8]).update(&masked).finish()
}

fn carried_icrc(ip: &[u8]) -> u32 {
    u32::from_le_bytes(ip[ip.len() - 4..].try_into().unwrap())
}

/// IPv4 (20) + UDP (8): where the BTH starts in these packets.
const BTH_AT: usize = 28;

#[test]
fn crc32_matches_kernel_icrc() {
    for (name, h) in [
        ("WRITE FIRST", capture::WRITE_FIRST),
        ("WRITE MIDDLE", capture::WRITE_MIDDLE),
        ("WRITE LAST", capture::WRITE_LAST),
        ("ACK", capture::ACK),
    ] {
        let ip = hex(h);
        assert_eq!(roce_v2_icrc(&ip), carried_icrc(&ip), "{name}");
        // And a flipped payload bit is noticed.
        let mut bad = ip.clone();
        let at = bad.len() - 5;
        bad[at] ^= 1;
        assert_ne!(roce_v2_icrc(&bad), carried_icrc(&bad), "{name}");
    }
}

#[test]
fn write_first_headers() {
    let ip = hex(capture::WRITE_FIRST);
    let bth = Bth::parse(&ip[BTH_AT..]).unwrap();
    assert_eq!(bth.opcode, Opcode::RcRdmaWriteFirst);
    assert_eq!(
        (bth.se, bth.mig, bth.pad_cnt, bth.tver),
        (false, false, 0, 0)
    );
    assert_eq!(bth.pkey, 0xffff);
    assert_eq!(bth.dest_qp, 0x11);
    assert!(!bth.ack_req);
    assert_eq!(bth.psn, 0x4c_24b5);
    let reth = Reth::parse(&ip[BTH_AT + Bth::LEN..]).unwrap();
    assert_eq!(
        reth,
        Reth {
            va: 0x0000_55ea_272a_4000,
            rkey: 0x27a,
            dma_len: 0x1000
        }
    );
    // Payload: the RDMA MTU.
    let payload = ip.len() - BTH_AT - Bth::LEN - Reth::LEN - 4;
    assert_eq!(payload, 1024);
    // Our encoder writes the same bytes back.
    let mut out = Vec::new();
    bth.write(&mut out);
    reth.write(&mut out);
    assert_eq!(out, ip[BTH_AT..BTH_AT + 28]);
}

#[test]
fn middle_last_and_ack_headers() {
    let mid = hex(capture::WRITE_MIDDLE);
    let bth = Bth::parse(&mid[BTH_AT..]).unwrap();
    assert_eq!(
        (bth.opcode, bth.psn, bth.ack_req),
        (Opcode::RcRdmaWriteMiddle, 0x4c_24b6, false)
    );

    let last = hex(capture::WRITE_LAST);
    let bth = Bth::parse(&last[BTH_AT..]).unwrap();
    assert_eq!(
        (bth.opcode, bth.psn, bth.ack_req),
        (Opcode::RcRdmaWriteLast, 0x4c_24b8, true)
    );

    let ack = hex(capture::ACK);
    let bth = Bth::parse(&ack[BTH_AT..]).unwrap();
    assert_eq!(bth.opcode, Opcode::RcAcknowledge);
    assert_eq!((bth.dest_qp, bth.psn), (0x11, 0x4c_24b8));
    let aeth = Aeth::parse(&ack[BTH_AT + Bth::LEN..]).unwrap();
    assert_eq!(
        aeth,
        Aeth {
            syndrome: 0x1f,
            msn: 1
        }
    );
    assert_eq!(aeth.kind(), AckKind::Ack { credit_code: 31 });
    assert_eq!(aeth.credits(), None);
    let mut out = Vec::new();
    aeth.write(&mut out);
    assert_eq!(out, ack[BTH_AT + 12..BTH_AT + 16]);
}
