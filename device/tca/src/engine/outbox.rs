//! The engine's outbox: the packets a burst makes wait here until the
//! burst is flushed (long runs of data are streamed to the link while they
//! are made), and plain ACKs superseded within a burst are dropped.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use ibtca_protocol::encoded;
use ibtca_protocol::headers::{is_multicast_lid, AckKind, Lnh};
use ibtca_protocol::Opcode;

use super::qp_map::QpnHasher;
use super::PacketSink;

/// Packets the transport made during a burst, emptied packet buffers (back
/// from the link) to build the next ones in, and the link.
///
/// A burst of packets that all go to the link as they are (no loopback, no
/// ACK that a later one could supersede) is handed over every
/// [`STREAM_BYTES`] while it is still being made: the peer starts on the
/// first packets while the rest are built, instead of after the whole send
/// window (2 MiB at MTU 4096), and their buffers come back to be reused
/// while they are still in cache. Bursts of small packets (e.g. 128 SENDs
/// of 64 B) stay whole: one hand-over, one batch for the peer, coalesced
/// ACKs.
pub(super) struct Outbox {
    pub(super) packets: Vec<Vec<u8>>,
    pub(super) spare: Vec<Vec<u8>>,
    pub(super) link: Box<dyn PacketSink>,
    /// This device's LID: packets to it loop back, so they are never
    /// streamed.
    pub(super) own_lid: u16,
    /// The burst so far holds a packet that must wait for the flush (a
    /// loopback packet or a plain ACK): nothing more is streamed.
    pub(super) hold: bool,
    /// Bytes of the packets in `packets`.
    pub(super) bytes: usize,
    /// Packets streamed during the current burst.
    pub(super) streamed: u64,
    /// The port is neither Init nor Armed: data packets may leave (IBA
    /// vol 1 §7.2; before Active only VL15, the SMPs, does).
    pub(super) sends_data: bool,
    /// Data packets dropped because the port was Init or Armed.
    pub(super) dropped_inactive: u64,
    /// Packets of the burst being flushed that go to the link (kept for its
    /// allocation).
    pub(super) to_link: Vec<Vec<u8>>,
}

/// Emptied packet buffers the engine keeps at most.
pub(super) const SPARE_PACKETS: usize = 256;

/// Bytes of a burst handed to the link at a time while the burst is still
/// being made (32 packets at MTU 4096: they stay in L2 until the link has
/// copied them).
const STREAM_BYTES: usize = 128 << 10;

impl Outbox {
    /// Drops the packets of the burst (device reset).
    pub(super) fn clear(&mut self) {
        self.packets.clear();
        self.bytes = 0;
    }

    pub(super) fn new(link: Box<dyn PacketSink>, own_lid: u16) -> Self {
        Outbox {
            packets: Vec::new(),
            spare: Vec::new(),
            link,
            own_lid,
            hold: false,
            bytes: 0,
            streamed: 0,
            sends_data: true,
            dropped_inactive: 0,
            to_link: Vec::new(),
        }
    }
}

/// The management VL, the only one a port that is not Active sends on.
const VL15: u8 = 15;

impl PacketSink for Outbox {
    fn send(&mut self, packet: Vec<u8>) {
        if !self.sends_data && encoded::vl(&packet) != Some(VL15) {
            self.dropped_inactive += 1;
            keep_spare(&mut self.spare, packet);
            return;
        }
        // Loopback and multicast packets (the port's own attached QPs get
        // a copy) wait for the flush.
        self.hold |= encoded::dlid(&packet)
            .is_some_and(|d| d == self.own_lid || is_multicast_lid(d))
            || plain_ack_target(&packet).is_some();
        self.bytes += packet.len();
        self.packets.push(packet);
        if !self.hold && self.bytes >= STREAM_BYTES {
            self.streamed += self.packets.len() as u64;
            self.bytes = 0;
            self.link.send_all(&mut self.packets);
            self.link.reclaim(&mut self.spare, SPARE_PACKETS);
        }
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// In place only when nothing of the burst waits here (it would go
    /// after this packet) and the packet leaves the device.
    fn send_in_place(
        &mut self,
        len: usize,
        sl: u8,
        dlid: u16,
        build: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Option<bool> {
        if !self.packets.is_empty()
            || self.hold
            || dlid == self.own_lid
            || is_multicast_lid(dlid)
            || !self.sends_data
        {
            return None;
        }
        let sent = self.link.send_in_place(len, sl, dlid, build)?;
        self.streamed += u64::from(sent);
        Some(sent)
    }
}

/// The (DLID, destination QP) and PSN of a plain positive ACK without GRH,
/// read in place; `None` for anything else (NAKs, RNR NAKs, responses and
/// requests are never coalesced).
fn plain_ack_target(p: &[u8]) -> Option<((u16, u32), u32)> {
    if encoded::lnh(p)? != Lnh::IbaLocal || encoded::opcode(p)? != Opcode::RcAcknowledge {
        return None;
    }
    if !matches!(encoded::aeth(p)?.kind(), AckKind::Ack { .. }) {
        return None;
    }
    Some(((encoded::dlid(p)?, encoded::dest_qp(p)?), encoded::psn(p)?))
}

/// Keeps a packet buffer the engine is done with for the next packet.
pub(super) fn keep_spare(spare: &mut Vec<Vec<u8>>, mut packet: Vec<u8>) {
    if spare.len() < SPARE_PACKETS {
        packet.clear();
        spare.push(packet);
    }
}

/// ACKs are cumulative (seed 002): of several plain ACKs to the same QP in
/// one burst only the one with the highest PSN is needed (a re-ACK of a
/// duplicate may carry an older PSN). Returns how many were dropped; their
/// buffers go to `spare`.
pub(super) fn coalesce_acks(packets: &mut Vec<Vec<u8>>, spare: &mut Vec<Vec<u8>>) -> u64 {
    if packets.len() < 2 {
        return 0;
    }
    // Keyed by DLID and QP in one integer; nothing is allocated for a
    // burst without two ACKs to the same QP.
    let mut best: HashMap<u64, (usize, u32), BuildHasherDefault<QpnHasher>> = HashMap::default();
    let mut dropped = Vec::new();
    for (i, p) in packets.iter().enumerate() {
        let Some(((lid, qp), psn)) = plain_ack_target(p) else {
            continue;
        };
        let target = u64::from(lid) << 32 | u64::from(qp);
        match best.get(&target).copied() {
            // Newer or equal PSN (24-bit circular order): it supersedes.
            Some((j, old)) if (psn.wrapping_sub(old) & 0xff_ffff) < 0x80_0000 => {
                dropped.push(j);
                best.insert(target, (i, psn));
            }
            Some(_) => dropped.push(i),
            None => {
                best.insert(target, (i, psn));
            }
        }
    }
    if dropped.is_empty() {
        return 0;
    }
    let mut keep = vec![true; packets.len()];
    for &i in &dropped {
        keep[i] = false;
    }
    let mut at = 0;
    let superseded = packets.extract_if(.., |_| {
        let drop = !keep.get(at).copied().unwrap_or(true);
        at += 1;
        drop
    });
    for p in superseded {
        keep_spare(spare, p);
    }
    dropped.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibtca_protocol::headers::{Aeth, Deth};
    use ibtca_protocol::{Packet, PacketView};
    use std::sync::Arc;

    fn ack(dest_qp: u32, psn: u32, nak: bool) -> Vec<u8> {
        let mut p = Packet::new(Opcode::RcAcknowledge);
        p.lrh.dlid = 2;
        p.bth.dest_qp = dest_qp;
        p.bth.psn = psn;
        p.ext.aeth = Some(if nak {
            Aeth::nak(ibtca_protocol::headers::NakCode::PsnSequenceError, 0)
        } else {
            Aeth::ack(0x1f, 0)
        });
        p.build().unwrap()
    }

    #[test]
    fn only_the_newest_plain_ack_per_qp_survives() {
        let mut v = vec![
            ack(5, 10, false),
            ack(6, 3, false),
            ack(5, 12, false),
            ack(5, 11, false),
            ack(5, 9, true),
        ];
        assert_eq!(coalesce_acks(&mut v, &mut Vec::new()), 2);
        let kept: Vec<(u32, u32)> = v
            .iter()
            .map(|p| {
                let pv = PacketView::parse(p).unwrap();
                (pv.bth.dest_qp, pv.bth.psn)
            })
            .collect();
        assert_eq!(
            kept,
            [(6, 3), (5, 12), (5, 9)],
            "newest ACK of QP 5, QP 6's ACK, and the NAK stay in order"
        );
    }

    /// A link that records what it is handed.
    #[derive(Clone, Default)]
    struct Recorder(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

    impl PacketSink for Recorder {
        fn send(&mut self, packet: Vec<u8>) {
            self.0.lock().unwrap().push(packet);
        }
    }

    impl Recorder {
        fn psns(&self) -> Vec<u32> {
            let sent = self.0.lock().unwrap();
            sent.iter()
                .map(|p| PacketView::parse(p).unwrap().bth.psn)
                .collect()
        }
    }

    const OWN_LID: u16 = 1;

    fn data(dlid: u16, psn: u32, payload: usize) -> Vec<u8> {
        let mut p = Packet::new(Opcode::RcRdmaWriteMiddle);
        p.lrh.dlid = dlid;
        p.bth.dest_qp = 5;
        p.bth.psn = psn;
        p.payload = vec![0xa5; payload];
        p.build().unwrap()
    }

    /// Packets of an MTU-4096 burst per hand-over.
    fn per_stream() -> u32 {
        STREAM_BYTES.div_ceil(data(2, 0, 4096).len()) as u32
    }

    #[test]
    fn a_long_burst_of_data_goes_to_the_link_while_it_is_made() {
        let link = Recorder::default();
        let mut out = Outbox::new(Box::new(link.clone()), OWN_LID);
        let n = per_stream();
        assert_eq!(n, 32, "128 KiB of MTU-4096 packets");
        for psn in 0..n - 1 {
            out.send(data(2, psn, 4096));
        }
        assert!(link.psns().is_empty(), "held until {n} packets");
        out.send(data(2, n - 1, 4096));
        assert_eq!(link.psns(), (0..n).collect::<Vec<_>>(), "in order");
        assert!(out.packets.is_empty());
        for psn in n..2 * n + 3 {
            out.send(data(2, psn, 4096));
        }
        assert_eq!(link.psns(), (0..2 * n).collect::<Vec<_>>());
        assert_eq!((out.streamed, out.packets.len()), (2 * u64::from(n), 3));
    }

    #[test]
    fn a_burst_of_small_packets_stays_whole() {
        let link = Recorder::default();
        let mut out = Outbox::new(Box::new(link.clone()), OWN_LID);
        for psn in 0..1000 {
            out.send(data(2, psn, 64));
        }
        assert!(link.psns().is_empty());
        assert_eq!(out.packets.len(), 1000);
    }

    #[test]
    fn a_burst_with_a_plain_ack_or_a_loopback_packet_waits_for_the_flush() {
        let n = 2 * per_stream();
        for (what, first) in [
            ("ACK", ack(5, 9, false)),
            ("loopback", data(OWN_LID, 0, 64)),
        ] {
            let link = Recorder::default();
            let mut out = Outbox::new(Box::new(link.clone()), OWN_LID);
            out.send(first);
            for psn in 1..=n {
                out.send(data(2, psn, 4096));
            }
            assert!(link.psns().is_empty(), "{what}: nothing streamed");
            assert_eq!(out.packets.len(), 1 + n as usize, "{what}");
        }
        // A NAK is never coalesced: it does not hold the burst back.
        let link = Recorder::default();
        let mut out = Outbox::new(Box::new(link.clone()), OWN_LID);
        out.send(ack(5, 9, true));
        for psn in 1..=per_stream() {
            out.send(data(2, psn, 4096));
        }
        let sent = link.psns();
        assert_eq!(sent.first(), Some(&9), "the NAK first");
        assert_eq!(sent[1..], (1..sent.len() as u32).collect::<Vec<_>>()[..]);
        assert!(sent.len() >= per_stream() as usize);
    }

    #[test]
    fn a_port_not_active_sends_only_vl15() {
        let link = Recorder::default();
        let mut out = Outbox::new(Box::new(link.clone()), OWN_LID);
        out.sends_data = false;
        for psn in 0..2 * per_stream() {
            out.send(data(2, psn, 4096));
        }
        let mut smp = Packet::datagram(0, 2, 0, Deth::default(), Vec::new());
        (smp.lrh.vl, smp.bth.psn) = (VL15, 77);
        out.send(smp.build().unwrap());
        assert_eq!(out.dropped_inactive, 2 * u64::from(per_stream()));
        assert!(link.psns().is_empty(), "no data streamed");
        assert_eq!(out.packets.len(), 1, "the SMP waits for the flush");
        assert_eq!(PacketView::parse(&out.packets[0]).unwrap().bth.psn, 77);
        assert!(
            out.send_in_place(4096, 0, 2, &mut |_| true).is_none(),
            "no data built in place either"
        );
        out.sends_data = true;
        out.send(data(2, 1, 64));
        assert_eq!(out.packets.len(), 2, "data goes again once Active");
    }

    #[test]
    fn psn_order_is_circular() {
        let mut v = vec![ack(5, 0xff_fffe, false), ack(5, 1, false)];
        coalesce_acks(&mut v, &mut Vec::new());
        assert_eq!(PacketView::parse(&v[0]).unwrap().bth.psn, 1);
    }
}
