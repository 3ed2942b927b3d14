//! The unreliable datagram transport (IBA vol 1 §9.8), sans-I/O like the
//! RC one: a send work request becomes one UD SEND ONLY packet (LRH, GRH
//! when the address vector asks for one, BTH, DETH, ImmDt), an inbound
//! datagram lands in the next receive WQE behind its 40-byte GRH area.
//! No acknowledgements, no retries, no state between packets but the PSN.
//!
//! The same path serves UD QPs and the port's QP0 and QP1, which differ
//! only in the source QP on the wire, the Q_Key rules and, for QP0, VL15.

use ibtca_protocol::headers::{is_multicast_lid, Deth, Grh, ImmDt};
use ibtca_protocol::opcode::Opcode;
use ibtca_protocol::{Packet, PacketView};

use super::{CqKind, QpEnv};
use ibtca_abi::qp::QpType;
use ibtca_abi::verbs::{
    Cqe, Sge, UdSendWqe, CQE_F_GRH, CQE_F_IMM, CQE_F_SOLICITED, UD_AV_F_GRH, WC_LOC_LEN_ERR,
    WC_LOC_PROT_ERR, WC_LOC_QP_OP_ERR, WC_RECV, WC_SEND, WC_SUCCESS, WQE_F_SIGNALED,
    WQE_F_SOLICITED, WR_UD_SEND, WR_UD_SEND_IMM,
};

/// Bytes at the start of every UD receive buffer for the GRH (IBA
/// 11.4.1.1: present or not, the payload starts after them).
pub const GRH_AREA: usize = 40;
/// The management VL, QP0's.
const VL15: u8 = 15;
/// The permissive LID (directed-route SMPs' wire hops).
const PERMISSIVE_LID: u16 = 0xffff;
/// Largest data SL: SL15 maps to VL15, which is for management only.
const MAX_DATA_SL: u8 = 14;
/// The default partition's P_Key, QP0's (IBA 10.9.3).
const DEFAULT_PKEY: u16 = 0xffff;
/// A Q_Key with this bit set is a controlled one; in a work request it
/// means the QP's own.
const QKEY_USE_QP: u32 = 1 << 31;

/// What the transport needs to know of a datagram QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdConfig {
    /// The device's number for the QP (completions name it).
    pub qpn: u32,
    /// UD, SMI or GSI.
    pub qp_type: QpType,
    /// The QP's Q_Key.
    pub qkey: u32,
    /// The P_Key at the QP's P_Key index (QP0 always sends with the
    /// default P_Key, 0xFFFF).
    pub pkey: u16,
    /// The port's LID.
    pub slid: u16,
    /// The port's GID (fe80::/64 and the port GUID), a GRH's source.
    pub sgid: [u8; 16],
    /// Largest message in bytes: the port's active MTU.
    pub mtu: usize,
}

impl UdConfig {
    /// The QP number on the wire: 0 and 1 for QP0 and QP1.
    pub fn wire_qpn(&self) -> u32 {
        match self.qp_type {
            QpType::Smi => 0,
            QpType::Gsi => 1,
            _ => self.qpn,
        }
    }
}

/// Counters of one port's datagram traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdCounters {
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams delivered into a receive WQE (errors included).
    pub delivered: u64,
    /// Dropped: the DETH's Q_Key is not the QP's (IBA 10.2.4.3, C9-?).
    pub qkey_mismatch: u64,
    /// Dropped: no receive WQE posted.
    pub no_recv: u64,
    /// Dropped: not a UD SEND (another transport's opcode).
    pub bad_opcode: u64,
}

/// The GID of a port with `port_guid`: the link-local prefix and the GUID.
pub fn port_gid(port_guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8..].copy_from_slice(&port_guid.to_be_bytes());
    g
}

/// Why a send work request failed: its completion status.
fn check_send(cfg: &UdConfig, w: &UdSendWqe, sges: Option<&[Sge]>) -> Result<usize, u8> {
    if w.opcode != WR_UD_SEND && w.opcode != WR_UD_SEND_IMM {
        return Err(WC_LOC_QP_OP_ERR);
    }
    // More SGEs than the WQE's stride held (or the device's most).
    let Some(sges) = sges else {
        return Err(WC_LOC_LEN_ERR);
    };
    let len: u64 = sges.iter().map(|s| u64::from(s.length.to_native())).sum();
    if len > cfg.mtu as u64 {
        return Err(WC_LOC_LEN_ERR);
    }
    let dlid = w.dlid.to_native();
    let smi = cfg.qp_type == QpType::Smi;
    // LID 0 is reserved; the permissive LID is for directed SMPs only.
    if dlid == 0 || (dlid == PERMISSIVE_LID && !smi) {
        return Err(WC_LOC_QP_OP_ERR);
    }
    // A multicast datagram names its group by the GRH's DGID (IBA 8.4.1).
    if is_multicast_lid(dlid) && w.av_flags & UD_AV_F_GRH == 0 {
        return Err(WC_LOC_QP_OP_ERR);
    }
    if !smi && w.sl > MAX_DATA_SL {
        return Err(WC_LOC_QP_OP_ERR);
    }
    Ok(len as usize)
}

/// The packet a send work request makes (its payload not yet gathered).
fn packet_of(cfg: &UdConfig, w: &UdSendWqe, psn: u32) -> Packet {
    let imm = w.opcode == WR_UD_SEND_IMM;
    let mut p = Packet::new(if imm {
        Opcode::UdSendOnlyImm
    } else {
        Opcode::UdSendOnly
    });
    let smi = cfg.qp_type == QpType::Smi;
    // QP0's packets travel on VL15 at SL0; the egress maps the rest by SL.
    (p.lrh.vl, p.lrh.sl) = if smi { (VL15, 0) } else { (0, w.sl) };
    p.lrh.dlid = w.dlid.to_native();
    // A directed-route SMP's wire hops are permissive both ways (IBA
    // 14.2.2), whether or not the port has a LID yet.
    p.lrh.slid = if smi && p.lrh.dlid == PERMISSIVE_LID {
        PERMISSIVE_LID
    } else {
        cfg.slid | u16::from(w.src_path_bits)
    };
    if w.av_flags & UD_AV_F_GRH != 0 {
        p.grh = Some(Grh {
            traffic_class: w.traffic_class,
            flow_label: w.flow_label.to_native() & 0xf_ffff,
            hop_limit: w.hop_limit,
            sgid: cfg.sgid,
            dgid: w.dgid,
            ..Grh::default()
        });
    }
    p.bth.pkey = if smi { DEFAULT_PKEY } else { cfg.pkey };
    p.bth.dest_qp = w.dest_qpn.to_native() & 0xff_ffff;
    p.bth.psn = psn & 0xff_ffff;
    p.bth.se = w.flags & WQE_F_SOLICITED != 0;
    let wqe_qkey = w.qkey.to_native();
    // A controlled Q_Key (bit 31) is never the work request's to give
    // (IBA vol 1 §10.2.4): the QP's own goes out instead, so only a QP
    // its privileged owner gave a controlled Q_Key sends one. QP1's own
    // is GSI_QKEY, which its GMPs carry.
    let qkey = match cfg.qp_type {
        QpType::Smi => 0,
        _ if wqe_qkey & QKEY_USE_QP != 0 => cfg.qkey,
        _ => wqe_qkey,
    };
    p.ext.deth = Some(Deth {
        qkey,
        src_qp: cfg.wire_qpn(),
    });
    if imm {
        p.ext.immdt = Some(ImmDt {
            data: w.imm_data.to_native(),
        });
    }
    p
}

/// Sends one datagram for work request `w` (its own 4 SGEs at most) with
/// PSN `psn` and completes it on the send CQ (when signaled, or with its
/// error). `Ok` when a packet left; otherwise the error completion's
/// status, after which IBA (10.3.1) moves a UD QP to the send queue error
/// state (the caller's part: the QP's state is not the transport's).
pub fn send(cfg: &UdConfig, w: &UdSendWqe, psn: u32, env: &mut dyn QpEnv) -> Result<(), u8> {
    send_with_sges(cfg, w, w.sge.get(..usize::from(w.num_sge)), psn, env)
}

/// [`send`] for a WQE whose SGE list is `sges` (read at its SQ's stride;
/// `None`: more than it held, which fails with IBTCA_WC_LOC_LEN_ERR).
pub fn send_with_sges(
    cfg: &UdConfig,
    w: &UdSendWqe,
    sges: Option<&[Sge]>,
    psn: u32,
    env: &mut dyn QpEnv,
) -> Result<(), u8> {
    let status = check_send(cfg, w, sges).and_then(|len| {
        let mut p = packet_of(cfg, w, psn);
        p.payload = vec![0; len];
        env.gather(sges.unwrap_or(&[]), 0, &mut p.payload)
            .map_err(|_| WC_LOC_PROT_ERR)?;
        p.build().map_err(|_| WC_LOC_LEN_ERR)
    });
    let sent = status.map(|bytes| env.send_packet(bytes));
    let status = sent.err().unwrap_or(WC_SUCCESS);
    if w.flags & WQE_F_SIGNALED != 0 || status != WC_SUCCESS {
        env.complete(
            CqKind::Send,
            Cqe {
                wr_id: w.wr_id,
                qpn: cfg.qpn.into(),
                opcode: WC_SEND,
                status,
                ..Cqe::default()
            },
        );
    }
    sent
}

/// Whether an inbound datagram may enter a QP with `cfg`: a UD SEND whose
/// Q_Key is the QP's (QP0 takes any: SMPs carry 0).
fn accepts(cfg: &UdConfig, view: &PacketView<'_>, c: &mut UdCounters) -> Option<Deth> {
    if !matches!(view.opcode(), Opcode::UdSendOnly | Opcode::UdSendOnlyImm) {
        c.bad_opcode += 1;
        return None;
    }
    let deth = view.ext.deth?;
    if cfg.qp_type != QpType::Smi && deth.qkey != cfg.qkey {
        c.qkey_mismatch += 1;
        return None;
    }
    Some(deth)
}

/// Bytes SGEs hold.
fn capacity(sges: &[Sge]) -> u64 {
    sges.iter().map(|s| u64::from(s.length.to_native())).sum()
}

/// Delivers an inbound datagram to the QP with `cfg`: checked (opcode,
/// Q_Key), into the next receive WQE (GRH area first), completed on the
/// receive CQ with the sender's QP, LID and SL. A datagram with a bad
/// Q_Key or none posted to take it is dropped and counted in `c`; one that
/// does not fit its WQE completes it with WC_LOC_LEN_ERR (the QP goes on).
pub fn receive(cfg: &UdConfig, view: &PacketView<'_>, env: &mut dyn QpEnv, c: &mut UdCounters) {
    let Some(deth) = accepts(cfg, view, c) else {
        return;
    };
    let Some(r) = env.next_recv() else {
        c.no_recv += 1;
        return;
    };
    c.delivered += 1;
    let total = GRH_AREA + view.payload.len();
    let mut flags = 0;
    let fits = r.sges().filter(|s| capacity(s) >= total as u64);
    let status = if let Some(sges) = fits {
        let mut written = Ok(());
        if let Some(grh) = &view.grh {
            let mut bytes = Vec::with_capacity(GRH_AREA);
            grh.write(&mut bytes);
            written = env.scatter(sges, 0, &bytes);
            flags |= CQE_F_GRH;
        }
        match written.and_then(|()| env.scatter(sges, GRH_AREA as u64, view.payload)) {
            Ok(()) => WC_SUCCESS,
            Err(_) => WC_LOC_PROT_ERR,
        }
    } else {
        WC_LOC_LEN_ERR
    };
    let imm = view.ext.immdt.map(|i| i.data);
    if imm.is_some() {
        flags |= CQE_F_IMM;
    }
    if view.bth.se {
        flags |= CQE_F_SOLICITED;
    }
    env.complete(
        CqKind::Recv,
        Cqe {
            wr_id: r.wr_id.into(),
            byte_len: (total as u32).into(),
            qpn: cfg.qpn.into(),
            imm_data: imm.unwrap_or(0).into(),
            src_qp: deth.src_qp.into(),
            opcode: WC_RECV,
            status,
            flags: if status == WC_SUCCESS { flags } else { 0 },
            slid: view.lrh.slid.into(),
            sl: view.lrh.sl,
            dlid_path_bits: 0,
            ..Cqe::default()
        },
    );
}

#[cfg(test)]
#[path = "ud_tests.rs"]
mod tests;
