//! Framing for the Unix-socket tunnel between ibtca device instances.
//!
//! A stream of frames, each `length: u32 BE` (bytes of body), `type: u8`,
//! then `length` bytes of body:
//!
//! | type | frame       | body |
//! |------|-------------|------|
//! | 1    | `Hello`     | version u16, node GUID u64, port u8, LID u16, features u8 (14 bytes) |
//! | 2    | `Packet`    | one IB packet, from the LRH through the VCRC |
//! | 3    | `LinkState` | 0 down, 1 up (1 byte) |
//! | 4    | `Credit`    | VL u8, credits u16 (3 bytes): the sender frees that many more receive buffers (packets) on that VL |
//! | 5    | `RingOffer` | data capacity u64 (8 bytes): from here on the sender's frames go through a shared-memory ring, passed with the frame (`SCM_RIGHTS`: the ring's control and data memfds, then the eventfds "data" and "room") |
//!
//! All integers are big-endian. A framing error leaves the stream unusable
//! (there is no way to find the next frame boundary), so [`FrameDecoder`]
//! stays failed after its first error.

mod decoder;

pub use decoder::{FrameDecoder, Frames};

/// Version carried in [`Hello`]; bump on incompatible changes. Version 2:
/// both ends run per-VL credit flow control (`Credit` frames grant
/// packets; a sender waits for them). Version 3: `Hello` carries feature
/// bits, and a peer that sets [`FEATURE_SHARED_RING`] may be sent a
/// `RingOffer`. Version 4: a ring is two files (a control page both ends
/// write, and data only its writer can write), so a `RingOffer` comes with
/// four.
pub const LINK_PROTOCOL_VERSION: u16 = 4;
/// [`Hello::features`] bit: the sender accepts a `RingOffer` (it can map a
/// shared-memory ring passed over the Unix socket and read frames from it).
pub const FEATURE_SHARED_RING: u8 = 1;
/// Bytes before the body: length (4) and type (1).
pub const FRAME_HEADER_LEN: usize = 5;
/// A default body limit: room for the largest IB packet (8190 bytes) twice.
pub const DEFAULT_MAX_BODY: usize = 16 * 1024;

const TYPE_HELLO: u8 = 1;
const TYPE_PACKET: u8 = 2;
const TYPE_LINK_STATE: u8 = 3;
const TYPE_CREDIT: u8 = 4;
const TYPE_RING_OFFER: u8 = 5;
const HELLO_LEN: usize = 14;
const RING_OFFER_LEN: usize = 8;
const LINK_STATE_LEN: usize = 1;
const CREDIT_LEN: usize = 3;

/// Why bytes are not a valid frame stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The body is longer than the decoder's limit (or than a u32 can say).
    #[error("frame body of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Announced (or attempted) body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The type byte names no frame type.
    #[error("unknown frame type {0}")]
    UnknownType(u8),
    /// A fixed-size frame announces a body of the wrong size.
    #[error("frame type {frame_type} needs a {expected}-byte body, got {len}")]
    BadBodyLength {
        /// The frame type.
        frame_type: u8,
        /// Announced body length.
        len: usize,
        /// The size that type has.
        expected: usize,
    },
    /// A LinkState body other than 0 (down) or 1 (up).
    #[error("invalid link state {0}")]
    BadLinkState(u8),
    /// The input ends inside a frame.
    #[error("truncated frame: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes there are.
        available: usize,
    },
}

/// First frame each side sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hello {
    /// [`LINK_PROTOCOL_VERSION`] of the sender.
    pub version: u16,
    /// Node GUID of the sending device.
    pub node_guid: u64,
    /// Port number on the sending device.
    pub port: u8,
    /// LID of that port.
    pub lid: u16,
    /// Feature bits ([`FEATURE_SHARED_RING`]); unknown bits are ignored.
    pub features: u8,
}

/// Physical link state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkState {
    /// Link down.
    Down,
    /// Link up.
    Up,
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Frame {
    /// Identification, sent first.
    Hello(Hello),
    /// A raw IB packet, LRH through VCRC.
    Packet(Vec<u8>),
    /// The sender's port went up or down.
    LinkState(LinkState),
    /// Link-level flow-control credits: `credits` more packets may be sent
    /// on `vl`.
    Credit {
        /// Virtual lane.
        vl: u8,
        /// Credits granted.
        credits: u16,
    },
    /// The sender's later frames go through the shared-memory ring whose
    /// files ride along with this frame (out of band, `SCM_RIGHTS`); it
    /// sends nothing more on the socket. Only to a peer that announced
    /// [`FEATURE_SHARED_RING`].
    RingOffer {
        /// Data bytes of the ring (the file is one header page more).
        capacity: u64,
    },
}

impl Frame {
    /// The type byte.
    pub fn frame_type(&self) -> u8 {
        match self {
            Frame::Hello(_) => TYPE_HELLO,
            Frame::Packet(_) => TYPE_PACKET,
            Frame::LinkState(_) => TYPE_LINK_STATE,
            Frame::Credit { .. } => TYPE_CREDIT,
            Frame::RingOffer { .. } => TYPE_RING_OFFER,
        }
    }

    fn body_len(&self) -> usize {
        match self {
            Frame::Hello(_) => HELLO_LEN,
            Frame::Packet(p) => p.len(),
            Frame::LinkState(_) => LINK_STATE_LEN,
            Frame::Credit { .. } => CREDIT_LEN,
            Frame::RingOffer { .. } => RING_OFFER_LEN,
        }
    }

    /// Appends the encoded frame to `out`. Fails only for a body longer than
    /// `u32::MAX` bytes.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        let len = self.body_len();
        let len32 = u32::try_from(len).map_err(|_| FrameError::TooLarge {
            len,
            max: u32::MAX as usize,
        })?;
        out.reserve(FRAME_HEADER_LEN + len);
        out.extend_from_slice(&len32.to_be_bytes());
        out.push(self.frame_type());
        match self {
            Frame::Hello(h) => {
                out.extend_from_slice(&h.version.to_be_bytes());
                out.extend_from_slice(&h.node_guid.to_be_bytes());
                out.push(h.port);
                out.extend_from_slice(&h.lid.to_be_bytes());
                out.push(h.features);
            }
            Frame::Packet(p) => out.extend_from_slice(p),
            Frame::LinkState(s) => out.push(u8::from(*s == LinkState::Up)),
            Frame::Credit { vl, credits } => {
                out.push(*vl);
                out.extend_from_slice(&credits.to_be_bytes());
            }
            Frame::RingOffer { capacity } => out.extend_from_slice(&capacity.to_be_bytes()),
        }
        Ok(())
    }

    /// The encoded frame.
    pub fn to_bytes(&self) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(out)
    }

    /// Decodes the frame at the start of `buf`; returns it and the bytes it
    /// used. `max_body` limits the body length.
    pub fn decode(buf: &[u8], max_body: usize) -> Result<(Frame, usize), FrameError> {
        let header: [u8; FRAME_HEADER_LEN] =
            buf.first_chunk().copied().ok_or(FrameError::Truncated {
                needed: FRAME_HEADER_LEN,
                available: buf.len(),
            })?;
        let (len, frame_type) = check_header(header, max_body)?;
        let end = FRAME_HEADER_LEN + len;
        let body = buf
            .get(FRAME_HEADER_LEN..end)
            .ok_or(FrameError::Truncated {
                needed: end,
                available: buf.len(),
            })?;
        Ok((from_body(frame_type, body.to_vec())?, end))
    }
}

/// A whole frame borrowed from a buffer, undecoded: see [`split_frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame<'a> {
    /// The type byte (checked to name a frame type).
    pub frame_type: u8,
    /// The body (its length checked against the type and the limit).
    pub body: &'a [u8],
}

impl RawFrame<'_> {
    /// A `Packet` frame: `body` is the IB packet.
    pub fn is_packet(&self) -> bool {
        self.frame_type == TYPE_PACKET
    }

    /// The decoded frame (copies the body of a `Packet`).
    pub fn decode(&self) -> Result<Frame, FrameError> {
        from_body(self.frame_type, self.body.to_vec())
    }
}

/// Splits the first frame off `buf` without copying: the frame and the
/// bytes it takes, or `None` if `buf` holds only part of a frame. The header
/// is checked as [`FrameDecoder`] checks it (type, fixed body sizes,
/// `max_body`), so a reader can walk a receive buffer in place and decode
/// only what it needs.
pub fn split_frame(
    buf: &[u8],
    max_body: usize,
) -> Result<Option<(RawFrame<'_>, usize)>, FrameError> {
    let Some(header) = buf.first_chunk::<FRAME_HEADER_LEN>() else {
        return Ok(None);
    };
    let (len, frame_type) = check_header(*header, max_body)?;
    let end = FRAME_HEADER_LEN + len;
    Ok(buf
        .get(FRAME_HEADER_LEN..end)
        .map(|body| (RawFrame { frame_type, body }, end)))
}

/// Validates a frame header as [`split_frame`] does (type, fixed body
/// sizes, `max_body`); returns the body length and type. For a reader
/// that walks frames where it cannot borrow them (a shared ring).
pub fn check_header(
    header: [u8; FRAME_HEADER_LEN],
    max_body: usize,
) -> Result<(usize, u8), FrameError> {
    let [l0, l1, l2, l3, frame_type] = header;
    let len = u32::from_be_bytes([l0, l1, l2, l3]);
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let expected = match frame_type {
        TYPE_HELLO => Some(HELLO_LEN),
        TYPE_PACKET => None,
        TYPE_LINK_STATE => Some(LINK_STATE_LEN),
        TYPE_CREDIT => Some(CREDIT_LEN),
        TYPE_RING_OFFER => Some(RING_OFFER_LEN),
        other => return Err(FrameError::UnknownType(other)),
    };
    match expected {
        Some(expected) if len != expected => Err(FrameError::BadBodyLength {
            frame_type,
            len,
            expected,
        }),
        _ if len > max_body => Err(FrameError::TooLarge { len, max: max_body }),
        _ => Ok((len, frame_type)),
    }
}

/// Builds a frame from a complete body whose length `check_header` accepted.
pub(crate) fn from_body(frame_type: u8, body: Vec<u8>) -> Result<Frame, FrameError> {
    let bad_len = |expected| FrameError::BadBodyLength {
        frame_type,
        len: body.len(),
        expected,
    };
    match frame_type {
        TYPE_HELLO => {
            let b: [u8; HELLO_LEN] = body.as_slice().try_into().map_err(|_| bad_len(HELLO_LEN))?;
            let [v0, v1, g0, g1, g2, g3, g4, g5, g6, g7, port, l0, l1, features] = b;
            Ok(Frame::Hello(Hello {
                version: u16::from_be_bytes([v0, v1]),
                node_guid: u64::from_be_bytes([g0, g1, g2, g3, g4, g5, g6, g7]),
                port,
                lid: u16::from_be_bytes([l0, l1]),
                features,
            }))
        }
        TYPE_PACKET => Ok(Frame::Packet(body)),
        TYPE_LINK_STATE => match body.as_slice() {
            [0] => Ok(Frame::LinkState(LinkState::Down)),
            [1] => Ok(Frame::LinkState(LinkState::Up)),
            [other] => Err(FrameError::BadLinkState(*other)),
            _ => Err(bad_len(LINK_STATE_LEN)),
        },
        TYPE_CREDIT => match body.as_slice() {
            [vl, c0, c1] => Ok(Frame::Credit {
                vl: *vl,
                credits: u16::from_be_bytes([*c0, *c1]),
            }),
            _ => Err(bad_len(CREDIT_LEN)),
        },
        TYPE_RING_OFFER => {
            let b: [u8; RING_OFFER_LEN] = body
                .as_slice()
                .try_into()
                .map_err(|_| bad_len(RING_OFFER_LEN))?;
            Ok(Frame::RingOffer {
                capacity: u64::from_be_bytes(b),
            })
        }
        other => Err(FrameError::UnknownType(other)),
    }
}
