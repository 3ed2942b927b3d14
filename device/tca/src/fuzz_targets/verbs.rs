//! `verbs_commands`: arbitrary command-queue commands (REG_MR in both
//! forms, ALLOC_MR, DEREG_MR, ALLOC_MW of both types, QUERY_DEVICE,
//! CREATE_CQ/QP with doorbell pages, MODIFY_CQ, QPs on SRQs,
//! CREATE/MODIFY/QUERY/DESTROY_SRQ, QUERY_QP, MODIFY_QP and DESTROY_QP of
//! the QPs made, ATTACH/DETACH_MCAST of them to a few groups or to
//! hundreds at once, and any other opcode), fast
//! registrations, window binds, invalidations, doorbells on any page (SRQ
//! doorbells too, each followed by receives taken from the SRQ), doorbell
//! records bound anywhere and read in any state, and local and remote
//! accesses, against one
//! device's verbs tables and 64 KiB of guest memory the input also writes
//! (page tables among it).
//!
//! Invariants: a command's status is 0 with a reply or one of the errnos
//! the device documents without one; QUERY_QP answers with the QP's own
//! state and type; every access a key check accepts
//! translates to ranges that add up to its length and agree, byte for
//! byte at each range's ends, with the region's own translation (its
//! guest-physical start, or the copied page list); the page budget the
//! table keeps equals what its live regions hold and never exceeds
//! `MAX_TOTAL_MR_PAGES`; an SRQ never holds more posted receives than
//! its max_wr, and its limit stays below max_wr; once the CQs due at a
//! time have fired, none that still holds completions is due then; the
//! multicast table holds at most `MAX_MCAST_GROUPS` groups, each a
//! multicast MGID and MLID held once with 1 to `MAX_MCAST_QPS` QPs, each
//! QP once and a live UD QP (a destroyed QP is attached nowhere);
//! ATTACH_MCAST leaves its QP in the group, or fails with the table
//! unchanged (ENOMEM only when the table or the group is full), and
//! DETACH_MCAST takes out an attached QP or fails with the table
//! unchanged. (With at most 4 QPs the input never fills a group's
//! `MAX_MCAST_QPS`; `verbs::multicast`'s unit tests and
//! `tests/tests/ud_multicast.rs` do.) The multicast invariants are checked
//! against a model of the table ([`mcast`]): each outcome against its
//! group, the whole table after each step that could change it.

mod mcast;

use std::cell::RefCell;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ibtca_protocol::fuzz_targets::Input;
use vm_memory::ByteValued;

use crate::dma::{DmaMaps, GuestMemory};
use crate::verbs::abi::*;
use crate::verbs::commands::{execute, Reply};
use crate::verbs::datapath::Doorbell;
use crate::verbs::db_record::RecordQueue;
use crate::verbs::mr::RemoteRight;
use crate::verbs::mw::BindRequest;
use crate::verbs::translate::{GpaRanges, MAX_TOTAL_MR_PAGES, PAGE_SIZE};
use crate::verbs::{Limits, PortAttrs, Verbs};
use mcast::McastModel;

/// Where the fuzzed guest memory starts (below it nothing is mapped).
const RAM: u64 = 0x1_0000;
const RAM_SIZE: u64 = 0x1_0000;

struct Ram {
    _maps: DmaMaps,
    mem: GuestMemory,
}

thread_local! {
    static MEMORY: RefCell<Option<Ram>> = const { RefCell::new(None) };
}

fn ram() -> Ram {
    let f = vmm_sys_util::tempfile::TempFile::new()
        .expect("temporary file")
        .into_file();
    f.set_len(RAM_SIZE).expect("size");
    let mut maps = DmaMaps::default();
    maps.map(RAM, RAM_SIZE, Some(f), 0).expect("map");
    let mem = maps.guest_memory();
    Ram { _maps: maps, mem }
}

/// The errnos a command may report.
const ERRNOS: [i32; 6] = [
    libc::EOPNOTSUPP,
    libc::EINVAL,
    libc::ENOENT,
    libc::EBUSY,
    libc::ENOMEM,
    libc::EFAULT,
];

/// See the module documentation.
pub fn verbs_commands(data: &[u8]) {
    MEMORY.with(|m| {
        let mut m = m.borrow_mut();
        let ram = m.get_or_insert_with(ram);
        ram.mem
            .write(RAM, &vec![0; RAM_SIZE as usize])
            .expect("zero");
        run(&mut Input::new(data), &ram.mem);
    });
}

/// Handles the input names: the PDs and keys made so far.
#[derive(Default)]
struct Made {
    pds: Vec<u32>,
    keys: Vec<u32>,
    cqs: Vec<u32>,
    qps: Vec<u32>,
    srqs: Vec<u32>,
}

impl Made {
    /// A handle the input picks among those made, or a raw one.
    fn pick(input: &mut Input, made: &[u32]) -> u32 {
        match input.u8() {
            b if (b as usize) < made.len() * 8 => made[b as usize % made.len()],
            _ => input.u32(),
        }
    }
}

/// Runs the input's steps over `mem`; the device's verbs tables at the end.
fn run(input: &mut Input, mem: &GuestMemory) -> Verbs {
    let limits = Limits {
        pds: 4,
        keys: 16,
        cqs: 4,
        qps: 4,
        srqs: 2,
    };
    let mut v = Verbs::new(limits, PortAttrs::default(), input.u64());
    let mut made = Made::default();
    let mut model = McastModel::default();
    while !input.is_empty() {
        let live_qps = v.qps.len();
        let mut mcast_step = false;
        match input.u8() % 9 {
            0 => mcast_step = command(input, mem, &mut v, &mut made, &mut model),
            1 => {
                let at = RAM + u64::from(input.u16());
                let n = usize::from(input.u8() % 64);
                let bytes = input.bytes(n);
                let _ = mem.write(at, bytes);
            }
            2 => page_table(input, mem),
            3 => {
                let mut w = RegMrWqe::default();
                let raw = input.bytes(128);
                w.as_mut_slice()[..raw.len()].copy_from_slice(raw);
                if input.bool() {
                    let key = Made::pick(input, &made.keys);
                    w.key = ((key & !0xff) | u32::from(input.u8())).into();
                    w.page_table = (RAM + u64::from(input.u16() & !7)).into();
                    w.npages = u32::from(input.u8() % 5).into();
                    w.first_offset = u32::from(input.u16() % 4100).into();
                }
                let pd = Made::pick(input, &made.pds);
                if let Ok(key) = v.mrs.fast_register(pd, mem, &w) {
                    made.keys.push(key);
                }
            }
            4 if input.bool() => bind(input, &mut v, &mut made),
            4 => {
                let (pd, key) = (Made::pick(input, &made.pds), Made::pick(input, &made.keys));
                let _ = v.mrs.invalidate(pd, key, &mut v.keys);
            }
            5 | 6 => access(input, &v, &made),
            7 => records(input, mem, &mut v, &made),
            _ => {
                let page = u32::from(input.u8()) % 70;
                let reg = input.pick(&[
                    crate::regs::DB_SQ,
                    crate::regs::DB_RQ,
                    crate::regs::DB_CQ,
                    crate::regs::DB_SRQ,
                ]);
                let handles = match reg {
                    crate::regs::DB_CQ => &made.cqs,
                    crate::regs::DB_SRQ => &made.srqs,
                    _ => &made.qps,
                };
                let handle = Made::pick(input, handles);
                let value = u64::from(handle) | u64::from(input.u32()) << 32;
                if let Some(db) = Doorbell::decode(reg, value) {
                    let _ = v.doorbell_on(page, db);
                }
                if let Some(Doorbell::Srq { srqn, .. }) = Doorbell::decode(reg, value) {
                    for _ in 0..input.u8() % 4 {
                        let _ = v.take_srq_recv(srqn, mem);
                    }
                }
            }
        }
        let held: u64 = v.mrs.regions().map(|mr| mr.reserved_pages()).sum();
        assert_eq!(v.mrs.pages_in_use(), held, "page budget");
        assert!(held <= MAX_TOTAL_MR_PAGES);
        for (_, srq) in v.srqs.iter() {
            let a = srq.attr();
            assert!(a.posted.to_native() <= a.max_wr.to_native(), "SRQ overrun");
            assert!(a.srq_limit.to_native() < a.max_wr.to_native(), "SRQ limit");
        }
        if mcast_step || v.qps.len() != live_qps || v.mcast.groups().len() != model.len() {
            model.check(&v);
        }
    }
    v
}

/// The MGID of group `n` of the few the input steers to.
fn mgid(n: u32) -> [u8; 16] {
    let mut g = [
        0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    g[12..].copy_from_slice(&n.to_be_bytes());
    g
}

/// Doorbell records: bound at any address of guest memory (or not),
/// their indexes read, awake words kept and receives and sends taken in
/// whatever state the QP is, and completions pushed into a CQ whose
/// record says anything.
fn records(input: &mut Input, mem: &GuestMemory, v: &mut Verbs, made: &Made) {
    let qpn = Made::pick(input, &made.qps);
    let cqn = Made::pick(input, &made.cqs);
    let q = if input.bool() {
        RecordQueue::Sq
    } else {
        RecordQueue::Rq
    };
    match input.u8() % 6 {
        0 => {
            let addr = RAM + u64::from(input.u16());
            let _ = v.bind_db_record(qpn, addr, mem);
            let _ = v.bind_cq_db_record(cqn, addr, mem);
        }
        1 => {
            if let Some(qp) = v.qps.get_mut(qpn) {
                let _ = qp.from_record(mem, q);
            }
        }
        2 => {
            if let Some(qp) = v.qps.get_mut(qpn) {
                let _ = qp.set_awake(mem, q, input.bool());
            }
        }
        3 => {
            if let Some(qp) = v.qps.get_mut(qpn) {
                let _ = qp.next_recv_wqe(mem);
                let _ = qp.next_send_wqe(mem);
            }
        }
        4 => {
            let _ = v.sync_db_records(mem);
        }
        _ => {
            // The fuzzer's clock: microseconds after a fixed start.
            static START: OnceLock<Instant> = OnceLock::new();
            let now =
                *START.get_or_init(Instant::now) + Duration::from_micros(u64::from(input.u16()));
            if input.bool() {
                let _ = v.complete(mem, cqn, &Cqe::default(), input.bool(), now);
            } else {
                let _ = v.expire_cqs(now);
                assert!(v.next_cq_deadline().is_none_or(|d| d > now));
            }
        }
    }
}

/// Writes a page table of up to 4 entries, each a page in guest memory,
/// outside it, or anything.
fn page_table(input: &mut Input, mem: &GuestMemory) {
    let at = RAM + u64::from(input.u16() & !7);
    for i in 0..u64::from(input.u8() % 5) {
        let page = match input.u8() % 3 {
            0 => RAM + u64::from(input.u8() % 16) * PAGE_SIZE,
            1 => (u64::from(input.u16()) + 1) << 32,
            _ => input.u64(),
        };
        let _ = mem.write(at + 8 * i, &page.to_le_bytes());
    }
}

/// One command (steered or not); true if it was ATTACH_MCAST,
/// DETACH_MCAST or DESTROY_QP, the commands that change the multicast
/// table (`model` follows their outcomes).
fn command(
    input: &mut Input,
    mem: &GuestMemory,
    v: &mut Verbs,
    made: &mut Made,
    model: &mut McastModel,
) -> bool {
    let raw_opcode = input.u8();
    let opcode = input.pick(&[
        CMD_REG_MR,
        CMD_REG_MR,
        CMD_ALLOC_MR,
        CMD_DEREG_MR,
        CMD_CREATE_PD,
        CMD_QUERY_DEVICE,
        CMD_ALLOC_MW,
        CMD_ALLOC_MW_TYPE1,
        CMD_CREATE_CQ,
        CMD_MODIFY_CQ,
        CMD_CREATE_QP,
        CMD_CREATE_SRQ,
        CMD_MODIFY_SRQ,
        CMD_RESIZE_SRQ,
        CMD_QUERY_SRQ,
        CMD_DESTROY_SRQ,
        raw_opcode,
        CMD_QUERY_QP,
        CMD_MODIFY_QP,
        CMD_DESTROY_QP,
        CMD_ATTACH_MCAST,
        CMD_ATTACH_MCAST,
        CMD_DETACH_MCAST,
    ]);
    let mut params = [0u8; 48];
    let raw = input.bytes(48);
    params[..raw.len()].copy_from_slice(raw);
    if input.bool() {
        // Steer the first handle (the PD, or the key of DEREG_MR) to a
        // live one, and a REG_MR's table into memory.
        let live = match opcode {
            CMD_DEREG_MR => Made::pick(input, &made.keys),
            CMD_MODIFY_SRQ | CMD_RESIZE_SRQ | CMD_QUERY_SRQ | CMD_DESTROY_SRQ => {
                Made::pick(input, &made.srqs)
            }
            CMD_QUERY_QP | CMD_MODIFY_QP | CMD_DESTROY_QP => Made::pick(input, &made.qps),
            CMD_ATTACH_MCAST | CMD_DETACH_MCAST => Made::pick(input, &made.qps),
            CMD_MODIFY_CQ => Made::pick(input, &made.cqs),
            _ => Made::pick(input, &made.pds),
        };
        params[..4].copy_from_slice(&live.to_le_bytes());
        if opcode == CMD_CREATE_QP && input.bool() {
            // On an SRQ: no RQ of its own.
            let mut q = CmdCreateQp::default();
            q.as_mut_slice().copy_from_slice(&params);
            q.srqn = Made::pick(input, &made.srqs).into();
            q.rq = 0.into();
            q.log_sizes[1] = 0;
            params.copy_from_slice(q.as_slice());
        } else if opcode == CMD_CREATE_QP && input.bool() {
            // A well-formed UD QP (multicast takes UD QPs only).
            let q = CmdCreateQp {
                pdn: live.into(),
                send_cqn: Made::pick(input, &made.cqs).into(),
                recv_cqn: Made::pick(input, &made.cqs).into(),
                log_sizes: [2, 2, 0, QPT_UD],
                sq: (RAM + 0x8000).into(),
                rq: (RAM + 0xc000).into(),
                ..Default::default()
            };
            params.copy_from_slice(q.as_slice());
        }
        if opcode == CMD_CREATE_CQ && input.bool() {
            let c = CmdCreateCq {
                ring: (RAM + 4096 * u64::from(input.u8() % 8)).into(),
                log_entries: input.u8() % 6,
                ..Default::default()
            };
            params.copy_from_slice(c.as_slice());
        }
        if matches!(opcode, CMD_ATTACH_MCAST | CMD_DETACH_MCAST) && input.bool() {
            // A well-formed group of a few; 1 in 16 attaches also joins
            // up to 510 more groups, past the device's cap.
            let mut p = CmdMcast {
                qpn: live.into(),
                mlid: (0xc000 | u16::from(input.u8() % 4)).into(),
                mgid: mgid(u32::from(input.u8() % 8)),
                ..Default::default()
            };
            if opcode == CMD_ATTACH_MCAST && input.u8() < 16 {
                for n in 0..u32::from(input.u8()) * 2 {
                    p.mgid = mgid(8 + n);
                    let bytes = p.as_slice().try_into().expect("48 bytes");
                    let (status, _) = execute(v, mem, opcode, bytes);
                    model.outcome(v, opcode, bytes, status);
                }
            }
            params.copy_from_slice(p.as_slice());
        }
        if opcode == CMD_RESIZE_SRQ && input.bool() {
            // A well-formed new ring in memory, of a few sizes.
            let mut r = CmdResizeSrq::default();
            r.as_mut_slice().copy_from_slice(&params);
            r.log_entries = input.u8() % 6;
            r.ring = (RAM + 4096 * u64::from(input.u8() % 4)).into();
            r.max_wr = u32::from(input.u8() % 40).into();
            (r.rsvd0, r.rsvd) = ([0; 3], [0; 28]);
            params.copy_from_slice(r.as_slice());
        }
        if opcode == CMD_REG_MR {
            let mut m = CmdRegMr::default();
            m.as_mut_slice().copy_from_slice(&params);
            m.gpa = (RAM + u64::from(input.u16() & !7)).into();
            m.npages = u32::from(input.u8() % 5).into();
            m.first_offset = u32::from(input.u16() % 4100).into();
            m.rsvd = [0; 8];
            params.copy_from_slice(m.as_slice());
        }
    }
    let (status, reply) = execute(v, mem, opcode, &params);
    if matches!(opcode, CMD_ATTACH_MCAST | CMD_DETACH_MCAST) {
        model.outcome(v, opcode, &params, status);
    }
    if opcode == CMD_DESTROY_QP && status == CMD_ST_OK {
        let qpn = u32::from_le_bytes([params[0], params[1], params[2], params[3]]);
        model.destroyed(v, qpn);
    }
    match reply {
        Some(r) => {
            assert_eq!(status, CMD_ST_OK);
            match opcode {
                CMD_CREATE_PD => made.pds.push(r.out0),
                CMD_REG_MR | CMD_ALLOC_MR => made.keys.extend([r.out0, r.out1]),
                CMD_ALLOC_MW | CMD_ALLOC_MW_TYPE1 => made.keys.push(r.out0),
                CMD_CREATE_CQ => made.cqs.push(r.out0),
                CMD_CREATE_QP => made.qps.push(r.out0),
                CMD_CREATE_SRQ => made.srqs.push(r.out0),
                CMD_QUERY_QP => query_qp_answer(v, &params, &r),
                _ => {}
            }
        }
        None => assert!(
            ERRNOS.contains(&i32::from(status)),
            "command {opcode:#x}: status {status}"
        ),
    }
    matches!(opcode, CMD_ATTACH_MCAST | CMD_DETACH_MCAST | CMD_DESTROY_QP)
}

/// QUERY_QP's answer is the QP's: its state in out0 and in the reply, a
/// state the device has, the reserved bytes zero.
fn query_qp_answer(v: &Verbs, params: &[u8; 48], r: &Reply) {
    let qpn = u32::from_le_bytes([params[0], params[1], params[2], params[3]]);
    let qp = v.qps.get(qpn).expect("QUERY_QP answered for a live QP");
    let mut a = QpAttr::default();
    let data = r.data.expect("QUERY_QP replies with struct ibtca_qp_attr");
    a.as_mut_slice()
        .copy_from_slice(&data[..size_of::<QpAttr>()]);
    assert_eq!(a.state, qp.state().to_abi(), "QUERY_QP state");
    assert_eq!(r.out0, u32::from(a.state), "QUERY_QP out0");
    assert_eq!(a.qp_type, qp.qp_type.to_abi());
    assert_eq!((a.rsvd0.to_native(), a.rsvd), (0, [0; 12]));
}

/// A window bind (IBTCA_WR_BIND_MW) of any key to any key, often inside
/// a live region; the window's new key joins the keys the input uses.
fn bind(input: &mut Input, v: &mut Verbs, made: &mut Made) {
    let pd = Made::pick(input, &made.pds);
    let (mw_rkey, lkey) = (Made::pick(input, &made.keys), Made::pick(input, &made.keys));
    let va = match v.mrs.mr(lkey) {
        Some(mr) if input.bool() => mr.iova.wrapping_add(u64::from(input.u16())),
        _ => input.u64(),
    };
    let req = BindRequest {
        mw_rkey,
        lkey,
        va,
        length: u64::from(input.u16()),
        access: u32::from(input.u8() & 0x1f),
    };
    if let Ok(key) = v.mrs.bind_mw(pd, req, &mut v.keys) {
        made.keys.push(key);
    }
}

/// A local or remote access through a key; if accepted, its ranges are
/// checked against the region's translation.
fn access(input: &mut Input, v: &Verbs, made: &Made) {
    let (pd, key) = (Made::pick(input, &made.pds), Made::pick(input, &made.keys));
    let va = if input.bool() {
        input.u64()
    } else {
        v.mrs
            .mr(key)
            .map_or(0, |mr| mr.iova)
            .wrapping_add(u64::from(input.u16()))
    };
    let len = u64::from(input.u16() % 0x3000);
    let got = if input.bool() {
        v.mrs.check_local(pd, key, va, len, input.bool())
    } else {
        let right = input.pick(&[RemoteRight::Read, RemoteRight::Write, RemoteRight::Atomic]);
        v.mrs.check_remote(pd, key, va, len, right)
    };
    let Ok(ranges) = got else { return };
    let total: u64 = ranges.iter().map(|r| r.len).sum();
    assert_eq!(total, len, "ranges add up to the access");
    // A region's key: check the ranges against its translation.
    if let Some(mr) = v.mrs.mr(key).or_else(|| v.mrs.mr_by_rkey(key)) {
        check_ranges(mr.translation(), va - mr.iova, &ranges);
    }
}

/// Each range starts and ends where `translate` puts those region bytes.
fn check_ranges(translate: impl Fn(u64) -> u64, mut off: u64, ranges: &GpaRanges) {
    for r in ranges.iter() {
        assert_eq!(r.gpa, translate(off), "range start");
        if r.len > 0 {
            assert_eq!(r.gpa + r.len - 1, translate(off + r.len - 1), "range end");
        }
        off += r.len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::qp::QpType;

    /// A step of the input: COMMAND (step 0) with the pick list's entry
    /// `pick`, zero parameters, then the steering bytes `steer`.
    fn command(input: &mut Vec<u8>, pick: u8, steer: &[u8]) {
        input.extend([0, 0, pick]);
        input.extend([0; 48]);
        input.extend(steer);
    }

    /// A PD, a CQ and a UD QP (its number 0 in the input's QP list).
    fn ud_qp() -> Vec<u8> {
        let mut input = vec![0; 8];
        command(&mut input, 4, &[0]); // CREATE_PD
        command(&mut input, 8, &[1, 0, 1, 0, 2]); // CREATE_CQ, well-formed
        command(&mut input, 10, &[1, 0, 0, 1, 0, 0]); // CREATE_QP, UD
        input
    }

    fn run_bytes(input: &[u8]) -> Verbs {
        let ram = ram();
        run(&mut Input::new(input), &ram.mem)
    }

    /// The steering reaches a live UD QP, attaches it to a group, and to
    /// hundreds until the table is full, and DESTROY_QP of it leaves
    /// every group empty: the invariants run on each step (remove the
    /// detach in `Verbs::destroy_qp` and this test fails on them).
    #[test]
    fn the_input_attaches_a_live_ud_qp_fills_the_table_and_destroys_it() {
        let mut input = ud_qp();
        command(&mut input, 20, &[1, 0, 1, 0, 3, 255]); // ATTACH to group 3
        let v = run_bytes(&input);
        let (qpn, qp) = v.qps.iter().next().expect("a QP");
        assert_eq!(qp.qp_type, QpType::Ud);
        assert_eq!(v.mcast.members(&mgid(3)), [qpn]);

        // Attaches to 2 * 200 more groups: the table fills and says ENOMEM.
        command(&mut input, 21, &[1, 0, 1, 1, 4, 0, 200]);
        let v = run_bytes(&input);
        assert_eq!(v.mcast.groups().len(), MAX_MCAST_GROUPS as usize);

        command(&mut input, 22, &[1, 0, 1, 0, 3]); // DETACH from group 3
        command(&mut input, 19, &[1, 0]); // DESTROY_QP
        let v = run_bytes(&input);
        assert!(v.qps.iter().next().is_none());
        assert!(v.mcast.is_empty());
    }
}
