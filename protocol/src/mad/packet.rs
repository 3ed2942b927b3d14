//! An SMP on the wire: a UD SEND ONLY to QP0 (DETH Q_Key 0, source QP 0)
//! on VL15, its 256-byte MAD the payload (IBA vol 1 §14.2.1, §13.5.3).

use std::convert::Infallible;

use super::smp::Smp;
use super::{MadError, MAD_LEN};
use crate::error::BuildError;
use crate::headers::Deth;
use crate::opcode::Opcode;
use crate::packet::{FillError, Packet, PacketView};

/// The subnet management QP.
pub const QP0: u32 = 0;
/// The management VL.
const VL15: u8 = 15;

/// The packet carrying `smp` from `slid` to `dlid` (the permissive LID for
/// a directed-route SMP's wire hops).
pub fn smp_packet(smp: &Smp, slid: u16, dlid: u16) -> Packet {
    let mut p = smp_headers(slid, dlid);
    p.payload = smp.to_bytes().to_vec();
    p
}

/// The bytes [`Packet::build`] makes of [`smp_packet`]`(smp, slid, dlid)`,
/// in one allocation: the MAD is encoded straight into the packet's
/// buffer, never into a payload buffer of its own.
pub fn smp_packet_bytes(smp: &Smp, slid: u16, dlid: u16) -> Result<Vec<u8>, BuildError> {
    let p = smp_headers(slid, dlid);
    let mut out = Vec::with_capacity(p.wire_len_with(MAD_LEN));
    let mad = smp.to_bytes();
    let fill = |out: &mut Vec<u8>| {
        out.extend_from_slice(&mad);
        Ok::<(), Infallible>(())
    };
    match p.build_appending(&mut out, MAD_LEN, fill) {
        Ok(()) => Ok(out),
        Err(FillError::Build(e)) => Err(e),
        Err(FillError::Fill(never)) => match never {},
    }
}

/// An SMP's packet from `slid` to `dlid` without its MAD.
fn smp_headers(slid: u16, dlid: u16) -> Packet {
    let deth = Deth {
        qkey: 0,
        src_qp: QP0,
    };
    let mut p = Packet::datagram(slid, dlid, QP0, deth, Vec::new());
    p.lrh.vl = VL15;
    p
}

/// The SMP a parsed packet carries, if it is one (UD SEND ONLY to QP0 with
/// a 256-byte SMP).
pub fn smp_of_packet(view: &PacketView<'_>) -> Result<Smp, MadError> {
    if view.opcode() != Opcode::UdSendOnly || view.bth.dest_qp != QP0 {
        return Err(MadError::NotQp0);
    }
    Smp::parse(view.payload)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::mad::attr::id;
    use crate::mad::{method, MadStatus, SmpRoute, PERMISSIVE_LID};

    /// A directed-route Get on its way, its answer and a LID-routed Set:
    /// SMPs whose every header field differs from a default one.
    pub(crate) fn sample_smps() -> [Smp; 3] {
        let mut get = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 3, 5]).unwrap();
        get.tid = 0x0102_0304_0506_0708;
        get.hop_ptr = 2;
        get.return_path[1] = 7;
        let mut answer = get.clone();
        answer.make_response(MadStatus::OK);
        answer.data[..4].copy_from_slice(&[9, 8, 7, 6]);
        let mut set = Smp::new(SmpRoute::Lid, method::SET, id::PORT_INFO, 3);
        set.m_key = 0xfeed;
        set.data = [0x5a; 64];
        [get, answer, set]
    }

    #[test]
    fn an_smps_bytes_are_its_packets_built() {
        for smp in sample_smps() {
            for (slid, dlid) in [(PERMISSIVE_LID, PERMISSIVE_LID), (1, 0x1234)] {
                let built = smp_packet(&smp, slid, dlid).build().unwrap();
                assert_eq!(smp_packet_bytes(&smp, slid, dlid).unwrap(), built);
            }
        }
    }
}
