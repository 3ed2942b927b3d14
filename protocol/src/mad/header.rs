//! The common MAD header (IBA vol 1 §13.4.2), the first 24 bytes of every
//! 256-byte management datagram: versions, class, method, status,
//! class-specific field, transaction ID, attribute ID and modifier.

use super::MadError;

/// Bytes of a MAD (every class ibtca serves: SMPs, PMA).
pub const MAD_LEN: usize = 256;
/// Bytes of the common header.
pub const MAD_HEADER_LEN: usize = 24;
/// The only MAD base version defined.
pub const BASE_VERSION: u8 = 1;

/// Management classes (IBA vol 1 Table 110).
pub mod class {
    /// Subnet management, LID-routed.
    pub const SUBN_LID_ROUTED: u8 = 0x01;
    /// Subnet management, directed route.
    pub const SUBN_DIRECTED_ROUTE: u8 = 0x81;
    /// Subnet administration (the SA, in the SM's node).
    pub const SUBN_ADM: u8 = 0x03;
    /// Performance management.
    pub const PERF: u8 = 0x04;
}

/// Methods (IBA vol 1 Table 111); bit 7 marks a response.
pub mod method {
    /// Get an attribute.
    pub const GET: u8 = 0x01;
    /// Set an attribute.
    pub const SET: u8 = 0x02;
    /// Response to a Get or Set.
    pub const GET_RESP: u8 = 0x81;
    /// Send (no response).
    pub const SEND: u8 = 0x03;
    /// Trap (unsolicited notice).
    pub const TRAP: u8 = 0x05;
    /// Report.
    pub const REPORT: u8 = 0x06;
    /// Response to a Report.
    pub const REPORT_RESP: u8 = 0x86;
    /// Trap repress.
    pub const TRAP_REPRESS: u8 = 0x07;
    /// The response bit.
    pub const RESPONSE: u8 = 0x80;
}

/// A MAD status (IBA vol 1 Table 112): bit 0 busy, bit 1 redirect,
/// bits 2-4 the invalid-field code, bits 8-14 class-specific.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MadStatus(pub u16);

impl MadStatus {
    /// Success.
    pub const OK: MadStatus = MadStatus(0);
    /// Busy: the request is discarded, try again.
    pub const BUSY: MadStatus = MadStatus(0x0001);
    /// Redirect required.
    pub const REDIRECT: MadStatus = MadStatus(0x0002);
    /// Bad base or class version.
    pub const BAD_VERSION: MadStatus = MadStatus(1 << 2);
    /// The method is not supported by the class.
    pub const UNSUPPORTED_METHOD: MadStatus = MadStatus(2 << 2);
    /// The method/attribute combination is not supported.
    pub const UNSUPPORTED_METHOD_ATTR: MadStatus = MadStatus(3 << 2);
    /// An attribute or attribute-modifier value is invalid.
    pub const INVALID_ATTR_VALUE: MadStatus = MadStatus(7 << 2);

    /// The invalid-field code (bits 2-4): 0 when every field was valid.
    pub fn invalid_field(self) -> u8 {
        ((self.0 >> 2) & 7) as u8
    }
}

impl std::fmt::Display for MadStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.invalid_field() {
            0 => "ok",
            1 => "bad version",
            2 => "unsupported method",
            3 => "unsupported method/attribute",
            7 => "invalid attribute value",
            _ => "reserved invalid-field code",
        };
        write!(f, "{:#06x} ({what})", self.0)
    }
}

/// The common MAD header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MadHeader {
    /// Base version (1).
    pub base_version: u8,
    /// Management class.
    pub mgmt_class: u8,
    /// Class version.
    pub class_version: u8,
    /// Method (bit 7: response).
    pub method: u8,
    /// Status; in a directed-route SMP bit 15 is the D bit.
    pub status: u16,
    /// Class-specific: a directed-route SMP's hop pointer and hop count.
    pub class_specific: u16,
    /// Transaction ID.
    pub tid: u64,
    /// Attribute ID.
    pub attr_id: u16,
    /// Attribute modifier.
    pub attr_mod: u32,
}

impl MadHeader {
    /// Parses the header at the start of a whole MAD (exactly
    /// [`MAD_LEN`] bytes).
    pub fn parse(mad: &[u8]) -> Result<Self, MadError> {
        let mad: &[u8; MAD_LEN] = mad.try_into().map_err(|_| MadError::Length(mad.len()))?;
        Ok(Self::read(mad))
    }

    /// Reads the header of a MAD (infallible: the length is the type's).
    pub fn read(mad: &[u8; MAD_LEN]) -> Self {
        MadHeader {
            base_version: mad[0],
            mgmt_class: mad[1],
            class_version: mad[2],
            method: mad[3],
            status: be16(mad, 4),
            class_specific: be16(mad, 6),
            tid: be64(mad, 8),
            attr_id: be16(mad, 16),
            attr_mod: be32(mad, 20),
        }
    }

    /// Writes the header into the first 24 bytes of `mad` (bytes 18-19,
    /// reserved, become zero).
    pub fn write(&self, mad: &mut [u8; MAD_LEN]) {
        mad[0] = self.base_version;
        mad[1] = self.mgmt_class;
        mad[2] = self.class_version;
        mad[3] = self.method;
        put16(mad, 4, self.status);
        put16(mad, 6, self.class_specific);
        put64(mad, 8, self.tid);
        put16(mad, 16, self.attr_id);
        put16(mad, 18, 0);
        put32(mad, 20, self.attr_mod);
    }

    /// True if the method is a response.
    pub fn is_response(&self) -> bool {
        self.method & method::RESPONSE != 0
    }
}

// Fixed-offset big-endian accessors over fixed-size arrays. Callers pass
// constant offsets inside the array; out-of-range reads give 0 and writes
// do nothing (never a panic).

/// Big-endian `u16` at `at`.
pub fn be16<const N: usize>(b: &[u8; N], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_be_bytes)
}

/// Big-endian `u32` at `at`.
pub fn be32<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

/// Big-endian `u64` at `at`.
pub fn be64<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// Writes `bytes` at `at`.
pub fn put<const N: usize>(b: &mut [u8; N], at: usize, bytes: &[u8]) {
    if let Some(s) = b.get_mut(at..at + bytes.len()) {
        s.copy_from_slice(bytes);
    }
}

/// Writes a big-endian `u16` at `at`.
pub fn put16<const N: usize>(b: &mut [u8; N], at: usize, v: u16) {
    put(b, at, &v.to_be_bytes());
}

/// Writes a big-endian `u32` at `at`.
pub fn put32<const N: usize>(b: &mut [u8; N], at: usize, v: u32) {
    put(b, at, &v.to_be_bytes());
}

/// Writes a big-endian `u64` at `at`.
pub fn put64<const N: usize>(b: &mut [u8; N], at: usize, v: u64) {
    put(b, at, &v.to_be_bytes());
}
