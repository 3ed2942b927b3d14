//! A switch port's peer that speaks the link protocol itself: it grants
//! credits only when told, several VLs in one write (the switch applies
//! grants that come in one read together, and arbitrates between the VLs
//! they open), so a test sees the switch's arbitration order.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use ibtca_protocol::link::{Hello, LINK_PROTOCOL_VERSION};
use ibtca_protocol::{Frame, FrameDecoder, Opcode, Packet};

/// An RC SEND from LID 1 to `dlid` on service level `sl` (VL `sl`),
/// numbered `i` (32 bytes of payload).
pub fn raw_packet(sl: u8, dlid: u16, i: u16) -> Vec<u8> {
    sized_raw_packet(sl, dlid, i, 32)
}

/// [`raw_packet`] with `payload` bytes of payload (its number repeated;
/// `payload` even).
pub fn sized_raw_packet(sl: u8, dlid: u16, i: u16, payload: usize) -> Vec<u8> {
    let mut p = Packet::new(Opcode::RcSendOnly);
    p.lrh.sl = sl;
    p.lrh.vl = sl;
    p.lrh.dlid = dlid;
    p.lrh.slid = 1;
    p.payload = i.to_be_bytes().repeat(payload / 2);
    p.build().unwrap()
}

/// The link peer: connected, `Hello` sent, no credit granted.
pub struct RawPort {
    stream: UnixStream,
    decoder: FrameDecoder,
    packets: VecDeque<Vec<u8>>,
}

impl RawPort {
    /// Connects to the switch port listening at `path` as LID `lid`;
    /// reads wait at most `timeout`.
    pub fn connect(path: &Path, lid: u16, timeout: Duration) -> Self {
        let mut stream = UnixStream::connect(path).unwrap();
        stream.set_read_timeout(Some(timeout)).unwrap();
        let hello = Frame::Hello(Hello {
            version: LINK_PROTOCOL_VERSION,
            node_guid: 0x1200_0000_0000_0000 | u64::from(lid),
            port: 1,
            lid,
            // A raw peer: its frames stay on the socket.
            features: 0,
        });
        stream.write_all(&hello.to_bytes().unwrap()).unwrap();
        RawPort {
            stream,
            decoder: FrameDecoder::default(),
            packets: VecDeque::new(),
        }
    }

    /// Grants `n` credits on each of `vls` in one write.
    pub fn grant(&mut self, vls: &[u8], n: u16) {
        let mut buf = Vec::new();
        for &vl in vls {
            Frame::Credit { vl, credits: n }.encode(&mut buf).unwrap();
        }
        self.stream.write_all(&buf).unwrap();
    }

    /// Sends one packet (VL15 needs no credit; the peer grants its own).
    pub fn send(&mut self, packet: Vec<u8>) {
        let mut buf = Vec::new();
        Frame::Packet(packet).encode(&mut buf).unwrap();
        self.stream.write_all(&buf).unwrap();
    }

    /// The next packet the switch sends.
    pub fn packet(&mut self) -> Vec<u8> {
        loop {
            if let Some(p) = self.packets.pop_front() {
                return p;
            }
            let mut buf = [0u8; 65536];
            let n = self.stream.read(&mut buf).expect("a packet in time");
            assert!(n > 0, "the switch closed the link");
            for f in self.decoder.feed(&buf[..n]) {
                if let Frame::Packet(p) = f.expect("a valid frame") {
                    self.packets.push_back(p);
                }
            }
        }
    }
}
