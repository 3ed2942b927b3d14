//! An SMP on the wire: a UD SEND ONLY to QP0 (DETH Q_Key 0, source QP 0)
//! on VL15, its 256-byte MAD the payload (IBA vol 1 §14.2.1, §13.5.3).

use super::smp::Smp;
use super::MadError;
use crate::headers::Deth;
use crate::opcode::Opcode;
use crate::packet::{Packet, PacketView};

/// The subnet management QP.
pub const QP0: u32 = 0;
/// The management VL.
const VL15: u8 = 15;

/// The packet carrying `smp` from `slid` to `dlid` (the permissive LID for
/// a directed-route SMP's wire hops).
pub fn smp_packet(smp: &Smp, slid: u16, dlid: u16) -> Packet {
    let mut p = Packet::new(Opcode::UdSendOnly);
    p.lrh.vl = VL15;
    p.lrh.sl = 0;
    p.lrh.slid = slid;
    p.lrh.dlid = dlid;
    p.bth.dest_qp = QP0;
    p.ext.deth = Some(Deth {
        qkey: 0,
        src_qp: QP0,
    });
    p.payload = smp.to_bytes().to_vec();
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
