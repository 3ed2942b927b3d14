//! A test subnet manager on a bare link: it sends SMPs (LID-routed or
//! directed) as UD SENDs to QP0 on VL15 and reads the answers, and sends
//! and receives plain data packets.

use std::sync::mpsc::Receiver;
use std::time::Duration;

use ibtca_device::link::{Link, LinkConfig, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_protocol::mad::pma::{
    gmp_packet, pma_id, pma_of_packet, GmpAddress, PmaMad, PortCounters, QP1,
};
use ibtca_protocol::mad::{
    directed, method, smp_of_packet, smp_packet, Smp, SmpRoute, PERMISSIVE_LID,
};
use ibtca_protocol::{Packet, PacketView};

use crate::links::start_link;

/// How long the client waits for one packet: generous (debug builds).
pub const WAIT: Duration = Duration::from_secs(20);

/// The test SM's end of a link.
pub struct SmClient {
    pub link: Link,
    rx: Receiver<LinkEvent>,
    /// The SM's LID (the SLID of its LID-routed SMPs).
    pub lid: u16,
    tid: u64,
}

impl SmClient {
    /// Connects (or listens) at `endpoint` as LID `lid` and waits for the
    /// link to come up.
    pub fn start(endpoint: LinkEndpoint, lid: u16) -> Self {
        let local = LocalPort {
            node_guid: 0x1200_0000_0000_5000 + u64::from(lid),
            port: 1,
            lid,
        };
        let (link, rx) = start_link(endpoint, local, LinkConfig::default());
        match rx.recv_timeout(WAIT) {
            Ok(LinkEvent::Up { .. }) => {}
            other => panic!("the SM's link did not come up: {other:?}"),
        }
        SmClient {
            link,
            rx,
            lid,
            tid: 0,
        }
    }

    /// Sends `smp` (a fresh TID; a directed one from its first hop), to
    /// `dlid` if LID-routed.
    pub fn send(&mut self, smp: &mut Smp, dlid: u16) {
        self.tid += 1;
        smp.tid = 0x5a00_0000 + self.tid;
        let (slid, dlid) = match smp.route {
            SmpRoute::Lid => (self.lid, dlid),
            SmpRoute::Directed => {
                directed::begin(smp).expect("a directed route to send");
                (PERMISSIVE_LID, PERMISSIVE_LID)
            }
        };
        let bytes = smp_packet(smp, slid, dlid).build().unwrap();
        self.link.send(bytes).expect("the SM's link takes the SMP");
    }

    /// The next packet that arrives (panics after [`WAIT`]).
    pub fn next_packet(&self) -> Vec<u8> {
        self.try_next_packet()
            .unwrap_or_else(|| panic!("no packet for the SM in {WAIT:?}"))
    }

    /// The next packet that arrives, or `None` after [`WAIT`].
    pub fn try_next_packet(&self) -> Option<Vec<u8>> {
        loop {
            match self.rx.recv_timeout(WAIT) {
                Ok(LinkEvent::Packet(p)) => return Some(p),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }

    /// The packets that arrived and wait unread (never blocks).
    pub fn arrived_packets(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Ok(ev) = self.rx.try_recv() {
            if let LinkEvent::Packet(p) = ev {
                out.push(p);
            }
        }
        out
    }

    /// The next SMP that arrives, with the LRH's VL, SLID and DLID.
    pub fn next_smp(&self) -> (Smp, u8, u16, u16) {
        let p = self.next_packet();
        let view = PacketView::parse(&p).expect("a valid packet");
        let smp = smp_of_packet(&view).expect("an SMP");
        (smp, view.lrh.vl, view.lrh.slid, view.lrh.dlid)
    }

    /// Sends `smp` with a LID-routed first part: LID-routed from the SM
    /// (DrSLID its LID) to `first` (the switch where the directed part
    /// starts), hop pointer 0.
    pub fn send_from_lid(&mut self, smp: &mut Smp, first: u16) {
        self.tid += 1;
        smp.tid = 0x5a00_0000 + self.tid;
        smp.dr_slid = self.lid;
        smp.hop_ptr = 0;
        let bytes = smp_packet(smp, self.lid, first).build().unwrap();
        self.link.send(bytes).expect("the SM's link takes the SMP");
    }

    /// Sends a PM MAD from QP1 to `dlid` with BTH P_Key `pkey` (SL 0).
    pub fn send_pma(&mut self, mad: &mut PmaMad, dlid: u16, pkey: u16) {
        self.tid += 1;
        mad.header.tid = 0x9a00_0000 + self.tid;
        let to = GmpAddress {
            slid: self.lid,
            dlid,
            sl: 0,
            pkey,
            dest_qp: QP1,
        };
        let bytes = gmp_packet(mad, &to).build().unwrap();
        self.link.send(bytes).expect("the SM's link takes the MAD");
    }

    /// Sends a PM MAD and returns the answer (the next packet must be it)
    /// with its LRH SLID.
    pub fn ask_pma(&mut self, mut mad: PmaMad, dlid: u16, pkey: u16) -> (PmaMad, u16) {
        self.send_pma(&mut mad, dlid, pkey);
        let p = self.next_packet();
        let view = PacketView::parse(&p).expect("a valid packet");
        assert_ne!(view.lrh.vl, 15, "GMPs travel on data VLs");
        let reply = pma_of_packet(&view).expect("a PM MAD");
        assert_eq!(
            reply.header.tid, mad.header.tid,
            "the answer to the request just sent"
        );
        (reply, view.lrh.slid)
    }

    /// PortCounters of `port` at `dlid` (a Get in partition `pkey`),
    /// checked to succeed.
    pub fn port_counters(&mut self, dlid: u16, port: u8, pkey: u16) -> PortCounters {
        let (r, _) = self.ask_pma(port_counters_mad(method::GET, port, 0), dlid, pkey);
        assert_eq!(r.header.status, 0, "PortCounters Get of port {port}");
        PortCounters::decode(&r.data)
    }

    /// Sends `smp` and returns the answer (the next SMP must be it).
    pub fn ask(&mut self, mut smp: Smp, dlid: u16) -> Smp {
        self.send(&mut smp, dlid);
        let (reply, vl, _, _) = self.next_smp();
        assert_eq!(vl, 15, "SMPs travel on VL15");
        assert_eq!(reply.tid, smp.tid, "the answer to the request just sent");
        reply
    }
}

/// A PortCounters MAD: method `m` (Get, or Set to reset) of `port`, with
/// CounterSelect `select`.
pub fn port_counters_mad(m: u8, port: u8, select: u16) -> PmaMad {
    let mut mad = PmaMad::new(m, pma_id::PORT_COUNTERS, 0);
    mad.data = PortCounters {
        port_select: port,
        counter_select: select,
        ..PortCounters::default()
    }
    .encode();
    mad
}

/// A UD SEND ONLY from `slid` to `dlid` on `sl` (and VL `sl`) carrying
/// `tag`: a data packet to watch a forwarding table with.
pub fn data_packet(slid: u16, dlid: u16, sl: u8, tag: u8) -> Vec<u8> {
    data_packet_with_pkey(slid, dlid, sl, tag, 0xffff)
}

/// [`data_packet`] with BTH P_Key `pkey`.
pub fn data_packet_with_pkey(slid: u16, dlid: u16, sl: u8, tag: u8, pkey: u16) -> Vec<u8> {
    let deth = ibtca_protocol::headers::Deth {
        qkey: 1,
        src_qp: 0x22,
    };
    let mut p = Packet::datagram(slid, dlid, 0x11, deth, vec![tag; 32]);
    (p.lrh.sl, p.lrh.vl, p.bth.pkey) = (sl, sl, pkey);
    p.build().unwrap()
}
