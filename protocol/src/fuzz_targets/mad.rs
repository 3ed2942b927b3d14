//! The `mad` target: bytes as a MAD, an SMP, every SMP attribute, a PM
//! MAD and its attributes, directed-route steps at a node, a response
//! written over its request, and a TrapRepress's TID.

use crate::mad::attr::{
    GuidInfo, LftBlock, MftBlock, NodeDescription, NodeInfo, Notice, PKeyTable, PortInfo,
    Sl2VlTable, SwitchInfo, VlArbBlock,
};
use crate::mad::directed::{self, DrStep};
use crate::mad::{MadHeader, Smp, SmpRoute, MAD_LEN, SMP_DATA_LEN};

/// Checks, beyond "no panic": an SMP re-encodes to bytes that decode to the
/// same SMP; every attribute decoded from any block re-encodes to a block
/// that decodes the same; a DR step never leaves the hop pointer past the
/// hop count + 1, forwards only through a port the node has, and hands a
/// request to the SMA only at the end of its path.
pub fn mad(data: &[u8]) {
    let (knobs, rest) = data.split_at(data.len().min(3));
    let mut mad = [0u8; MAD_LEN];
    let n = rest.len().min(MAD_LEN);
    mad[..n].copy_from_slice(&rest[..n]);
    let _ = MadHeader::parse(rest);
    let _ = Smp::parse(rest);
    let header = MadHeader::read(&mad);
    let mut reencoded = mad;
    header.write(&mut reencoded);
    assert_eq!(MadHeader::read(&reencoded), header);

    let mut block = [0u8; SMP_DATA_LEN];
    block.copy_from_slice(&mad[..SMP_DATA_LEN]);
    macro_rules! round_trip {
        ($($t:ty),*) => {$(
            let v = <$t>::decode(&block);
            assert_eq!(<$t>::decode(&v.encode()), v, stringify!($t));
        )*};
    }
    round_trip!(
        NodeInfo, PortInfo, SwitchInfo, PKeyTable, GuidInfo, LftBlock, MftBlock, Sl2VlTable,
        VlArbBlock, Notice
    );
    pma(&mad);
    let desc = NodeDescription::decode(&block);
    let again = NodeDescription::decode(&desc.encode());
    assert!(desc.0.starts_with(&again.0), "{desc:?} then {again:?}");

    // A response written over the request's bytes: the decoded request's
    // response encoded (status and data from the knobs and the MAD).
    let status = crate::mad::MadStatus(u16::from_be_bytes([
        knobs.first().copied().unwrap_or(0),
        knobs.get(1).copied().unwrap_or(0),
    ]));
    let data = (knobs.get(2).is_some_and(|k| k & 2 == 2)).then_some(&block);
    let mut answered = mad;
    let responded = crate::mad::respond_in_place(&mut answered, status, data);
    let Ok(smp) = Smp::parse(&mad) else {
        assert!(!responded && answered == mad, "no SMP: untouched");
        return;
    };
    assert_eq!(Smp::parse(&smp.to_bytes()).as_ref(), Ok(&smp));
    let mut response = smp.clone();
    response.make_response(status);
    if let Some(d) = data {
        response.data = *d;
    }
    assert!(responded);
    assert_eq!(answered, response.to_bytes(), "a response in place");
    // A TrapRepress names the TID it came with, and only a TrapRepress of
    // a Notice names one.
    match Notice::repressed_tid(&smp) {
        Some(tid) => assert_eq!(
            (tid, smp.method, smp.attr_id),
            (
                smp.tid,
                crate::mad::method::TRAP_REPRESS,
                crate::mad::attr::id::NOTICE
            )
        ),
        None => assert!(
            smp.method != crate::mad::method::TRAP_REPRESS
                || smp.attr_id != crate::mad::attr::id::NOTICE
                || smp.base_version != 1
                || smp.class_version != 1
        ),
    }
    if smp.route != SmpRoute::Directed {
        return;
    }
    let is_switch = knobs.first().is_some_and(|k| k & 1 == 1);
    let in_port = knobs.get(1).copied().unwrap_or(1);
    let ports = knobs.get(2).copied().unwrap_or(1);
    let mut s = smp.clone();
    let step = directed::on_receive(&mut s, is_switch, in_port, ports);
    check_step(&smp, &s, step, ports);
    // The same hop taken in the MAD's bytes, in place: the same step, and
    // the bytes the decoded SMP's step writes back.
    let mut bytes = mad;
    let in_place = directed::on_receive(
        &mut directed::DrBytes(&mut bytes),
        is_switch,
        in_port,
        ports,
    );
    assert_eq!(in_place, step);
    let mut written = mad;
    s.write_route(&mut written);
    assert_eq!(bytes, written);
    // Planned first: the bytes untouched, then the same once applied.
    let mut planned = mad;
    let (planned_step, edit) =
        directed::plan(&directed::DrBytes(&mut planned), is_switch, in_port, ports);
    assert_eq!(planned_step, step);
    assert_eq!(planned, mad);
    edit.apply(&mut directed::DrBytes(&mut planned));
    assert_eq!(planned, written);
    if step == DrStep::Deliver && !smp.direction {
        assert_eq!(s.hop_ptr, s.hop_cnt + 1, "request delivered mid-path");
        s.make_response(crate::mad::MadStatus::OK);
        let before = s.clone();
        let back = directed::respond(&mut s, ports);
        check_step(&before, &s, back, ports);
        // The same first step back taken in the response's bytes.
        let mut back_bytes = before.to_bytes();
        let in_place = directed::respond(&mut directed::DrBytes(&mut back_bytes), ports);
        assert_eq!(in_place, back);
        assert_eq!(back_bytes, s.to_bytes(), "a step back in place");
    }
}

/// The PM codec: a PM MAD re-encodes to bytes that decode the same, and
/// so does every PM attribute decoded from any block.
fn pma(mad: &[u8; MAD_LEN]) {
    use crate::mad::pma::{ClassPortInfo, PmaMad, PortCounters, PortCountersExt, PMA_DATA_LEN};
    let mut block = [0u8; PMA_DATA_LEN];
    block.copy_from_slice(&mad[MAD_LEN - PMA_DATA_LEN..]);
    let c = PortCounters::decode(&block);
    assert_eq!(PortCounters::decode(&c.encode()), c);
    let e = PortCountersExt::decode(&block);
    assert_eq!(PortCountersExt::decode(&e.encode()), e);
    let i = ClassPortInfo::decode(&block);
    assert_eq!(ClassPortInfo::decode(&i.encode()), i);
    if let Ok(m) = PmaMad::parse(mad) {
        assert_eq!(PmaMad::parse(&m.to_bytes()).as_ref(), Ok(&m));
    }
}

fn check_step(before: &Smp, after: &Smp, step: DrStep, ports: u8) {
    match step {
        DrStep::Forward(p) => assert!(p >= 1 && p <= ports, "forward through port {p} of {ports}"),
        DrStep::ForwardByLid(lid) => assert!(
            lid == before.dr_slid || lid == before.dr_dlid,
            "LID-routed only to DrSLID or DrDLID"
        ),
        DrStep::Deliver | DrStep::BackToSource | DrStep::Discard(_) => {}
    }
    if !matches!(step, DrStep::Discard(_)) {
        assert!(after.hop_ptr <= after.hop_cnt + 1);
        assert_eq!(after.hop_cnt, before.hop_cnt);
        assert_eq!(after.initial_path, before.initial_path);
    }
}
