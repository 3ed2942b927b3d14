//! `ud_datagrams`: a hostile guest and a hostile peer against one datagram
//! QP. Send WQEs of raw fuzzed bytes (any opcode, SGE count, lengths, SL,
//! DLID, Q_Key, GRH fields) go through `transport::ud::send`; inbound
//! packets (well-formed UD SENDs with fuzzed Q_Keys, GRHs, immediates and
//! payloads, or raw bytes) through `transport::ud::receive`, between
//! receives posted with fuzzed SGEs; the QP is UD, QP0 or QP1 by the input.
//!
//! Invariants: every send completes at most once (exactly once when
//! signaled or refused), and a packet it sends parses back with the
//! source QP, Q_Key and VL its QP type prescribes and at most an MTU of
//! payload; every inbound packet is counted exactly once, completes at
//! most one receive (only when it took one), and a successful receive
//! holds the payload byte for byte behind the 40-byte GRH area.

use ibtca_protocol::fuzz_targets::Input;
use ibtca_protocol::headers::{Deth, Grh, ImmDt};
use ibtca_protocol::opcode::Opcode;
use ibtca_protocol::{Packet, PacketView};
use vm_memory::ByteValued;

use crate::mock::{MockEnv, ALL_ACCESS};
use crate::ud::{self, port_gid, UdConfig, UdCounters, GRH_AREA};
use ibtca_abi::qp::QpType;
use ibtca_abi::recv::RecvWr;
use ibtca_abi::verbs::*;

const KEY: u32 = 0x100;
const VA: u64 = 0x10_0000;
const LEN: usize = 16 << 10;
const QKEY: u32 = 0x1111_2222;

fn config(t: u8) -> UdConfig {
    let qp_type = match t % 3 {
        0 => QpType::Ud,
        1 => QpType::Smi,
        _ => QpType::Gsi,
    };
    UdConfig {
        qpn: 0x401,
        qp_type,
        qkey: if qp_type == QpType::Gsi {
            GSI_QKEY
        } else {
            QKEY
        },
        pkey: 0xffff,
        slid: 3,
        sgid: port_gid(0x1200_0000_0000_0003),
        mtu: 256 << (t % 5),
    }
}

fn sge(inp: &mut Input<'_>) -> Sge {
    let off = u64::from(inp.u16()) % (LEN as u64 + 64);
    Sge {
        addr: (VA + off).into(),
        length: u32::from(inp.u16() % 5000).into(),
        lkey: if inp.u8() < 240 { KEY } else { 7 }.into(),
    }
}

fn post_recv(inp: &mut Input<'_>, env: &mut MockEnv) {
    let wr_id = u64::from(inp.u32());
    // Up to 6 SGEs, or a count past what the WQE's stride held.
    let n = usize::from(inp.u8() % 8);
    let sges: Vec<Sge> = (0..n).map(|_| sge(inp)).collect();
    let mut r = RecvWr::new(wr_id, &sges[..n.min(6)]);
    if n == 7 {
        r.num_sge = RecvWr::OVERSIZED;
    }
    env.rq.push_back(r);
}

fn send_one(inp: &mut Input<'_>, cfg: &UdConfig, env: &mut MockEnv) {
    let mut w = UdSendWqe::default();
    let raw = inp.bytes(64);
    w.as_mut_slice()[..raw.len()].copy_from_slice(raw);
    if inp.u8() < 200 {
        w.opcode = if inp.u8() & 1 == 0 {
            WR_UD_SEND
        } else {
            WR_UD_SEND_IMM
        };
        w.num_sge %= 5;
    }
    for s in &mut w.sge {
        *s = sge(inp);
    }
    let before = env.send_cq.len();
    let sent = ud::send(cfg, &w, inp.u32(), env).is_ok();
    let completions = env.send_cq.len() - before;
    assert!(completions <= 1, "one completion per send at most");
    let signaled = w.flags & WQE_F_SIGNALED != 0;
    if let Some(c) = env.send_cq.get(before) {
        assert_eq!(c.wr_id, w.wr_id);
        assert_eq!(c.status == WC_SUCCESS, sent, "success iff a packet left");
    } else {
        assert!(sent && !signaled, "errors and signaled sends complete");
    }
    if !sent {
        assert!(env.outbox.is_empty(), "a refused send sends nothing");
        return;
    }
    let out = env.take_outbox();
    assert_eq!(out.len(), 1, "one packet per datagram");
    let v = PacketView::parse(&out[0]).expect("a sent datagram parses");
    let deth = v.ext.deth.expect("a DETH");
    assert!(v.payload.len() <= cfg.mtu, "at most an MTU");
    assert_eq!(deth.src_qp, cfg.wire_qpn());
    match cfg.qp_type {
        QpType::Smi => assert_eq!((v.lrh.vl, deth.qkey), (15, 0)),
        _ => {
            assert!(v.lrh.sl <= 14 && v.lrh.vl != 15, "data never on VL15");
            let controlled = deth.qkey & 0x8000_0000 != 0;
            assert!(
                !controlled || deth.qkey == cfg.qkey,
                "a controlled Q_Key is the QP's own"
            );
        }
    }
}

fn inbound(inp: &mut Input<'_>) -> Vec<u8> {
    if inp.u8() < 32 {
        let n = usize::from(inp.u16() % 600);
        return inp.bytes(n).to_vec();
    }
    let imm = inp.u8() & 1 == 1;
    let mut p = Packet::new(if imm {
        Opcode::UdSendOnlyImm
    } else {
        Opcode::UdSendOnly
    });
    (p.lrh.slid, p.lrh.dlid, p.lrh.sl) = (inp.u16(), 3, inp.u8() & 15);
    p.bth.dest_qp = 0x401;
    p.bth.se = inp.u8() & 1 == 1;
    let qkey = match inp.u8() % 4 {
        0 => inp.u32(),
        1 => GSI_QKEY,
        _ => QKEY,
    };
    p.ext.deth = Some(Deth {
        qkey,
        src_qp: inp.u32() & 0xff_ffff,
    });
    if imm {
        p.ext.immdt = Some(ImmDt { data: inp.u32() });
    }
    if inp.u8() & 1 == 1 {
        p.grh = Some(Grh {
            hop_limit: inp.u8(),
            dgid: [inp.u8(); 16],
            ..Grh::default()
        });
    }
    let n = usize::from(inp.u16() % 4200);
    p.payload = inp.bytes(n).to_vec();
    p.build().unwrap_or_default()
}

fn receive_one(inp: &mut Input<'_>, cfg: &UdConfig, env: &mut MockEnv, c: &mut UdCounters) {
    let bytes = inbound(inp);
    let Ok(view) = PacketView::parse(&bytes) else {
        return;
    };
    let (before, posted) = (*c, env.rq.len());
    let head = env.rq.front().copied();
    let cqes = env.recv_cq.len();
    ud::receive(cfg, &view, env, c);
    let counted = (c.delivered - before.delivered)
        + (c.qkey_mismatch - before.qkey_mismatch)
        + (c.no_recv - before.no_recv)
        + (c.bad_opcode - before.bad_opcode);
    assert_eq!(counted, 1, "every datagram counted once");
    let took = posted - env.rq.len();
    assert_eq!(
        env.recv_cq.len() - cqes,
        took,
        "a completion per receive taken"
    );
    assert_eq!(took as u64, c.delivered - before.delivered);
    let (Some(r), Some(cqe)) = (head, env.recv_cq.get(cqes)) else {
        return;
    };
    assert_eq!(cqe.wr_id.to_native(), r.wr_id);
    if cqe.status != WC_SUCCESS {
        return;
    }
    assert_eq!(
        cqe.byte_len.to_native() as usize,
        GRH_AREA + view.payload.len()
    );
    // The payload is where the SGEs put it, after the GRH area (only the
    // bytes the datagram reached: the GRH area without a GRH, and SGEs
    // past the end, may name anything).
    let need = GRH_AREA + view.payload.len();
    let from = if view.grh.is_some() { 0 } else { GRH_AREA };
    let (mut pos, mut got) = (0, Vec::new());
    for s in &r.sge[..usize::from(r.num_sge)] {
        let take = (s.length.to_native() as usize).min(need - pos);
        let skip = from.saturating_sub(pos).min(take);
        if skip < take {
            let at = (s.addr.to_native() - VA) as usize + skip;
            got.extend_from_slice(&env.bytes(KEY)[at..at + take - skip]);
        }
        pos += take;
    }
    let got = &got[GRH_AREA - from..];
    assert!(got.len() >= view.payload.len());
    // Later SGEs may overlap earlier ones: compare only when they do not.
    let overlapping = r.sge[..usize::from(r.num_sge)]
        .iter()
        .enumerate()
        .any(|(i, a)| {
            r.sge[..i].iter().any(|b| {
                let (a0, b0) = (a.addr.to_native(), b.addr.to_native());
                a0 < b0 + u64::from(b.length.to_native())
                    && b0 < a0 + u64::from(a.length.to_native())
            })
        });
    if !overlapping {
        assert_eq!(&got[..view.payload.len()], view.payload, "payload landed");
    }
}

/// The `ud_datagrams` fuzz target (see the module documentation).
pub fn ud_datagrams(data: &[u8]) {
    let mut inp = Input::new(data);
    let cfg = config(inp.u8());
    let mut env = MockEnv::new();
    env.reg(KEY, VA, LEN, ALL_ACCESS);
    let mut counters = UdCounters::default();
    for _ in 0..64 {
        if inp.is_empty() {
            break;
        }
        match inp.u8() % 3 {
            0 => post_recv(&mut inp, &mut env),
            1 => send_one(&mut inp, &cfg, &mut env),
            _ => receive_one(&mut inp, &cfg, &mut env, &mut counters),
        }
    }
}
