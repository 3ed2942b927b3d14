//! ibsim's client protocol on the wire (ibsim's `include/ibsim.h`), as
//! Debian's `libumad2sim.so` speaks it: fixed-size datagrams in the host's
//! byte order, except where the client copies network-order values
//! through (the LIDs, QPNs, status and length of a MAD's envelope).
//!
//! - A control message ([`Ctl`], 80 bytes): magic `0xdeadbeef`, client id,
//!   type ([`CtlType`]), length, 64 bytes of data; the server answers each
//!   with the same layout, type [`CtlType::Error`] on refusal.
//! - CONNECT's data ([`ClientInfo`], 44 bytes): the client's pid (its
//!   socket names carry it), QP, IsSM, and the node it asks for.
//! - A MAD's envelope ([`SimRequest`], 288 bytes): destination and source
//!   LID (a network-order `u16` in a host-order `u32`), destination and
//!   source QP and status (network order), length (network-order `u64`),
//!   then the 256-byte MAD.
//!
//! Every parser takes any byte string and returns `None` for one of the
//! wrong length or magic: nothing here panics on input.

use ibtca_protocol::mad::MAD_LEN;

/// ibsim's magic at the start of every control message.
pub const SIM_MAGIC: u32 = 0xdead_beef;
/// Bytes of a control message's data.
pub const CTL_DATA_LEN: usize = 64;
/// Bytes of a control message.
pub const CTL_LEN: usize = 16 + CTL_DATA_LEN;
/// Bytes of a MAD's envelope (`struct sim_request`, its `u64` aligned).
pub const REQUEST_LEN: usize = 32 + MAD_LEN;
/// Bytes of CONNECT's data (`struct sim_client_info`).
pub const CLIENT_INFO_LEN: usize = 12 + NODE_ID_LEN;
/// Bytes of a node id in CONNECT's data.
pub const NODE_ID_LEN: usize = 32;
/// `status` of a MAD the server sends back unanswered: ETIMEDOUT, as the
/// kernel's MAD layer reports a send that got no response.
pub const STATUS_TIMED_OUT: u32 = 110;

/// A control message's type (`enum SIM_CTL_TYPES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtlType {
    /// The server's refusal.
    Error,
    /// Attach: [`ClientInfo`] in, the client id and node id out.
    Connect,
    /// Detach.
    Disconnect,
    /// The port's LID and state (`struct sim_port`).
    GetPort,
    /// Vendor, part, hardware and firmware version (`struct sim_vendor`).
    GetVendor,
    /// The port's GID.
    GetGid,
    /// The node GUID.
    GetGuid,
    /// NodeInfo as an SMP carries it.
    GetNodeInfo,
    /// PortInfo as an SMP carries it (data byte 0: the port, 0 for the
    /// client's).
    GetPortInfo,
    /// Sets or clears IsSM (data: a host-order `int`).
    SetIsSm,
    /// The first 32 P_Keys, network order.
    GetPKeys,
}

impl CtlType {
    /// The type of wire value `v`.
    pub fn from_wire(v: u32) -> Option<Self> {
        use CtlType::*;
        Some(match v {
            0 => Error,
            1 => Connect,
            2 => Disconnect,
            3 => GetPort,
            4 => GetVendor,
            5 => GetGid,
            6 => GetGuid,
            7 => GetNodeInfo,
            8 => GetPortInfo,
            9 => SetIsSm,
            10 => GetPKeys,
            _ => return None,
        })
    }

    /// The wire value.
    pub fn to_wire(self) -> u32 {
        self as u32
    }
}

fn ne32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_ne_bytes(w)
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be(ne32(b, at))
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ctl {
    /// The client id the server gave (any value in CONNECT).
    pub client_id: u32,
    /// The type, as sent (see [`CtlType::from_wire`]).
    pub kind: u32,
    /// The length the client gave its data (not trusted: the data is
    /// always 64 bytes).
    pub len: u32,
    /// The data.
    pub data: [u8; CTL_DATA_LEN],
}

impl Ctl {
    /// A CONNECT of the client `info` describes, as umad2sim sends it.
    pub fn connect(info: &ClientInfo) -> Self {
        let mut data = [0u8; CTL_DATA_LEN];
        info.write(&mut data);
        Ctl {
            client_id: 0,
            kind: CtlType::Connect.to_wire(),
            len: CLIENT_INFO_LEN as u32,
            data,
        }
    }

    /// Decodes a datagram: exactly [`CTL_LEN`] bytes with ibsim's magic.
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() != CTL_LEN || ne32(b, 0) != SIM_MAGIC {
            return None;
        }
        let mut data = [0u8; CTL_DATA_LEN];
        data.copy_from_slice(&b[16..]);
        Some(Ctl {
            client_id: ne32(b, 4),
            kind: ne32(b, 8),
            len: ne32(b, 12),
            data,
        })
    }

    /// Encodes it.
    pub fn to_bytes(&self) -> [u8; CTL_LEN] {
        let mut b = [0u8; CTL_LEN];
        b[0..4].copy_from_slice(&SIM_MAGIC.to_ne_bytes());
        b[4..8].copy_from_slice(&self.client_id.to_ne_bytes());
        b[8..12].copy_from_slice(&self.kind.to_ne_bytes());
        b[12..16].copy_from_slice(&self.len.to_ne_bytes());
        b[16..].copy_from_slice(&self.data);
        b
    }
}

/// CONNECT's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// In: the client's pid (its sockets are `NAME:ctlPID`, `NAME:inPID`);
    /// out: its client id.
    pub id: u32,
    /// The client's QP (0).
    pub qp: u32,
    /// The client is an SM (`SIM_SET_ISSM`).
    pub issm: bool,
    /// In: the node it asks for (`SIM_HOST`, may be empty); out: the
    /// node it got.
    pub node_id: String,
}

impl ClientInfo {
    /// Decodes it from a control message's data.
    pub fn parse(data: &[u8; CTL_DATA_LEN]) -> Self {
        let raw = &data[12..12 + NODE_ID_LEN];
        let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
        ClientInfo {
            id: ne32(data, 0),
            qp: ne32(data, 4),
            issm: ne32(data, 8) != 0,
            node_id: String::from_utf8_lossy(&raw[..end]).into_owned(),
        }
    }

    /// Encodes it into a control message's data (the node id cut to 31
    /// bytes, NUL-terminated).
    pub fn write(&self, data: &mut [u8; CTL_DATA_LEN]) {
        data[0..4].copy_from_slice(&self.id.to_ne_bytes());
        data[4..8].copy_from_slice(&self.qp.to_ne_bytes());
        data[8..12].copy_from_slice(&u32::from(self.issm).to_ne_bytes());
        let field = &mut data[12..12 + NODE_ID_LEN];
        field.fill(0);
        let name = self.node_id.as_bytes();
        let n = name.len().min(NODE_ID_LEN - 1);
        field[..n].copy_from_slice(&name[..n]);
    }
}

/// A MAD's envelope without the MAD: where it goes and came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// Destination LID (0xffff: permissive, a directed-route SMP).
    pub dlid: u16,
    /// Source LID (0 from a client: the port's own).
    pub slid: u16,
    /// Destination QP.
    pub dqp: u32,
    /// Source QP.
    pub sqp: u32,
    /// 0, or [`STATUS_TIMED_OUT`] on a request that got no answer.
    pub status: u32,
    /// The MAD's length as the client gave it (at most 256).
    pub length: u64,
}

/// Where a datagram's `status` lies (network order).
const STATUS_AT: std::ops::Range<usize> = 16..20;

impl Envelope {
    /// The envelope of `mad`, all 256 bytes of it, from `slid`/`sqp` to
    /// `dlid`/`dqp`, status 0.
    pub fn mad(dlid: u16, slid: u16, dqp: u32, sqp: u32) -> Self {
        Envelope {
            dlid,
            slid,
            dqp,
            sqp,
            status: 0,
            length: MAD_LEN as u64,
        }
    }

    /// Splits a datagram of exactly [`REQUEST_LEN`] bytes into its
    /// envelope and its MAD, which stays where it lies.
    pub fn split(b: &[u8]) -> Option<(Self, &[u8; MAD_LEN])> {
        let b: &[u8; REQUEST_LEN] = b.try_into().ok()?;
        let (head, mad) = b.split_first_chunk::<32>()?;
        let mad: &[u8; MAD_LEN] = mad.try_into().ok()?;
        let mut len = [0u8; 8];
        len.copy_from_slice(&head[24..32]);
        let envelope = Envelope {
            // ntohs() of the low 16 bits of a host-order u32.
            dlid: u16::from_be(ne32(head, 0) as u16),
            slid: u16::from_be(ne32(head, 4) as u16),
            dqp: be32(head, 8),
            sqp: be32(head, 12),
            status: be32(head, 16),
            length: u64::from_be_bytes(len),
        };
        Some((envelope, mad))
    }

    /// Writes the envelope of `mad`, and `mad`, into `b`.
    pub fn write(&self, mad: &[u8; MAD_LEN], b: &mut [u8; REQUEST_LEN]) {
        b[0..4].copy_from_slice(&u32::from(self.dlid.to_be()).to_ne_bytes());
        b[4..8].copy_from_slice(&u32::from(self.slid.to_be()).to_ne_bytes());
        b[8..12].copy_from_slice(&self.dqp.to_be_bytes());
        b[12..16].copy_from_slice(&self.sqp.to_be_bytes());
        b[STATUS_AT].copy_from_slice(&self.status.to_be_bytes());
        b[20..24].fill(0);
        b[24..32].copy_from_slice(&self.length.to_be_bytes());
        b[32..].copy_from_slice(mad);
    }
}

/// `request`, a datagram as a client sent it, with its status set to
/// [`STATUS_TIMED_OUT`]: how it goes back unanswered.
pub fn set_timed_out(request: &mut [u8; REQUEST_LEN]) {
    request[STATUS_AT].copy_from_slice(&STATUS_TIMED_OUT.to_be_bytes());
}

/// The MAD of `datagram`, a MAD's envelope.
pub fn mad_of(datagram: &mut [u8; REQUEST_LEN]) -> &mut [u8; MAD_LEN] {
    let (_, mad) = datagram.split_at_mut(REQUEST_LEN - MAD_LEN);
    mad.try_into()
        .unwrap_or_else(|_| unreachable!("REQUEST_LEN is 32 + MAD_LEN"))
}

/// A MAD and its envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRequest {
    /// Where it goes and came from.
    pub envelope: Envelope,
    /// The MAD.
    pub mad: [u8; MAD_LEN],
}

impl SimRequest {
    /// An SMP `mad` as a client sends it to `dlid`: from its own port
    /// (source LID 0), QP0 to QP0.
    pub fn smp(dlid: u16, mad: [u8; MAD_LEN]) -> Self {
        SimRequest {
            envelope: Envelope::mad(dlid, 0, 0, 0),
            mad,
        }
    }

    /// Decodes a datagram of exactly [`REQUEST_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let (envelope, mad) = Envelope::split(b)?;
        Some(SimRequest {
            envelope,
            mad: *mad,
        })
    }

    /// Encodes it.
    pub fn to_bytes(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        self.envelope.write(&self.mad, &mut b);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control message exactly as umad2sim's `sim_ctl()` builds it.
    fn client_ctl(kind: u32, client: u32, data: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0xdead_beefu32.to_ne_bytes());
        b.extend_from_slice(&client.to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&(data.len() as u32).to_ne_bytes());
        let mut d = [0u8; 64];
        d[..data.len()].copy_from_slice(data);
        b.extend_from_slice(&d);
        b
    }

    #[test]
    fn connect_as_umad2sim_sends_it() {
        let mut info = Vec::new();
        info.extend_from_slice(&4242u32.to_ne_bytes());
        info.extend_from_slice(&0u32.to_ne_bytes());
        info.extend_from_slice(&1u32.to_ne_bytes());
        let mut node = [0u8; 32];
        node[..3].copy_from_slice(b"ca1");
        info.extend_from_slice(&node);
        let raw = client_ctl(1, 0, &info);
        assert_eq!(raw.len(), CTL_LEN);
        let ctl = Ctl::parse(&raw).unwrap();
        assert_eq!(CtlType::from_wire(ctl.kind), Some(CtlType::Connect));
        assert_eq!(ctl.len, 44);
        let ci = ClientInfo::parse(&ctl.data);
        assert_eq!(
            ci,
            ClientInfo {
                id: 4242,
                qp: 0,
                issm: true,
                node_id: "ca1".into()
            }
        );
        let mut back = ctl.clone();
        ci.write(&mut back.data);
        assert_eq!(back.to_bytes().as_slice(), raw.as_slice());
    }

    #[test]
    fn request_fields_in_the_clients_byte_orders() {
        let mut b = vec![0u8; REQUEST_LEN];
        // req.dlid = umad->addr.lid (a __be16 LID 0x0102 in a u32).
        b[0..4].copy_from_slice(&u32::from(0x0102u16.to_be()).to_ne_bytes());
        b[4..8].copy_from_slice(&u32::from(0xffffu16.to_be()).to_ne_bytes());
        b[8..12].copy_from_slice(&1u32.to_be_bytes());
        b[12..16].copy_from_slice(&0u32.to_be_bytes());
        b[16..20].copy_from_slice(&110u32.to_be_bytes());
        b[24..32].copy_from_slice(&256u64.to_be_bytes());
        b[32] = 1;
        b[33] = 0x81;
        let r = SimRequest::parse(&b).unwrap();
        let e = r.envelope;
        assert_eq!((e.dlid, e.slid, e.dqp, e.sqp), (0x0102, 0xffff, 1, 0));
        assert_eq!((e.status, e.length), (STATUS_TIMED_OUT, 256));
        assert_eq!(&r.mad[..2], &[1, 0x81]);
        assert_eq!(r.to_bytes().as_slice(), b.as_slice());
    }

    #[test]
    fn wrong_lengths_and_magic_are_refused() {
        let good = client_ctl(3, 0, &[]);
        for n in 0..good.len() + 8 {
            let mut b = good.clone();
            b.resize(n, 0);
            assert_eq!(Ctl::parse(&b).is_some(), n == CTL_LEN, "ctl of {n} bytes");
        }
        let mut bad = good.clone();
        bad[0] ^= 1;
        assert_eq!(Ctl::parse(&bad), None);
        for n in 0..REQUEST_LEN + 8 {
            assert_eq!(
                SimRequest::parse(&vec![0xa5; n]).is_some(),
                n == REQUEST_LEN,
                "request of {n} bytes"
            );
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % (REQUEST_LEN as u64 + 16)) as usize;
            let b: Vec<u8> = (0..n).map(|i| (x >> (i % 56)) as u8).collect();
            if let Some(c) = Ctl::parse(&b) {
                let _ = CtlType::from_wire(c.kind);
                let _ = ClientInfo::parse(&c.data);
            }
            let _ = SimRequest::parse(&b);
        }
    }
}
