//! The ATM cell at the UNI (ITU-T I.361 §2.2): a 5-byte header and 48
//! bytes of payload.
//!
//! ```text
//!  byte 0: GFC(4) VPI[7:4]      byte 1: VPI[3:0] VCI[15:12]
//!  byte 2: VCI[11:4]            byte 3: VCI[3:0] PTI(3) CLP(1)
//!  byte 4: HEC
//! ```
//!
//! The HEC (I.432.1 §4.3.2) is the remainder of the first four bytes,
//! times x^8, divided by x^8 + x^2 + x + 1, XORed with the coset 0x55.

/// Bytes in a cell.
pub const CELL_LEN: usize = 53;
/// Bytes of header.
pub const HEADER_LEN: usize = 5;
/// Bytes of payload.
pub const CELL_PAYLOAD_LEN: usize = 48;

/// The HEC's coset (I.432.1: added to the remainder before sending).
pub const HEC_COSET: u8 = 0x55;

/// PTI bit: 1 for OAM and resource-management cells (PTI 4–7).
pub const PTI_MANAGEMENT: u8 = 0b100;
/// PTI bit of a user-data cell: explicit forward congestion indication.
pub const PTI_EFCI: u8 = 0b010;
/// PTI bit of a user-data cell: ATM-user-to-ATM-user indication (AAL5's
/// end of frame).
pub const PTI_AUU: u8 = 0b001;

/// A virtual connection at the UNI: an 8-bit VPI and a 16-bit VCI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Vc {
    /// Virtual path identifier (8 bits at the UNI).
    pub vpi: u8,
    /// Virtual channel identifier.
    pub vci: u16,
}

impl std::fmt::Display for Vc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.vpi, self.vci)
    }
}

/// A UNI cell header's fields (the HEC is computed, never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CellHeader {
    /// Generic flow control (4 bits).
    pub gfc: u8,
    /// Virtual path identifier.
    pub vpi: u8,
    /// Virtual channel identifier.
    pub vci: u16,
    /// Payload type indicator (3 bits).
    pub pti: u8,
    /// Cell loss priority (1 bit).
    pub clp: bool,
}

impl CellHeader {
    /// A user-data header on `vc` with PTI `pti` (masked to 3 bits).
    pub fn user(vc: Vc, pti: u8) -> Self {
        Self {
            gfc: 0,
            vpi: vc.vpi,
            vci: vc.vci,
            pti: pti & 7,
            clp: false,
        }
    }

    /// The connection the header names.
    pub fn vc(&self) -> Vc {
        Vc {
            vpi: self.vpi,
            vci: self.vci,
        }
    }

    /// The five header bytes, HEC included; GFC and PTI are masked to
    /// their widths.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let b = [
            (self.gfc & 0x0f) << 4 | self.vpi >> 4,
            (self.vpi & 0x0f) << 4 | (self.vci >> 12) as u8,
            (self.vci >> 4) as u8,
            ((self.vci & 0x0f) as u8) << 4 | (self.pti & 7) << 1 | u8::from(self.clp),
        ];
        [b[0], b[1], b[2], b[3], hec(&b)]
    }

    /// The fields of four header bytes (the HEC is not looked at: see
    /// [`crate::atm::hec`]).
    pub fn decode(b: &[u8; 4]) -> Self {
        Self {
            gfc: b[0] >> 4,
            vpi: (b[0] & 0x0f) << 4 | b[1] >> 4,
            vci: u16::from(b[1] & 0x0f) << 12 | u16::from(b[2]) << 4 | u16::from(b[3] >> 4),
            pti: (b[3] >> 1) & 7,
            clp: b[3] & 1 != 0,
        }
    }

    /// Whether this is an idle or unassigned cell (VPI 0, VCI 0, PTI 0;
    /// I.361 Table 4), which carries nothing.
    pub fn is_unassigned(&self) -> bool {
        self.vpi == 0 && self.vci == 0 && self.pti & PTI_MANAGEMENT == 0
    }

    /// Whether this is an OAM or resource-management cell: PTI 4–7 (F5
    /// flows), or VCI 3, 4 (F4 OAM) and 6 (F4 RM) of any VP.
    pub fn is_management(&self) -> bool {
        self.pti & PTI_MANAGEMENT != 0 || matches!(self.vci, 3 | 4 | 6)
    }
}

/// CRC-8 with generator x^8 + x^2 + x + 1, MSB first, from zero.
pub fn crc8(bytes: &[u8]) -> u8 {
    bytes
        .iter()
        .fold(0u8, |crc, &b| CRC8_TABLE[usize::from(crc ^ b)])
}

/// The HEC of four header bytes (I.432.1: CRC-8 plus the coset 0x55).
pub fn hec(first4: &[u8; 4]) -> u8 {
    crc8(first4) ^ HEC_COSET
}

const CRC8_TABLE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u8;
        let mut k = 0;
        while k < 8 {
            c = if c & 0x80 != 0 { c << 1 ^ 0x07 } else { c << 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// A whole cell, header bytes as received (HEC included) and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// The 53 bytes.
    pub bytes: [u8; CELL_LEN],
}

impl Cell {
    /// A cell with `header` (HEC computed) and `payload`.
    pub fn new(header: &CellHeader, payload: &[u8; CELL_PAYLOAD_LEN]) -> Self {
        let mut bytes = [0u8; CELL_LEN];
        bytes[..HEADER_LEN].copy_from_slice(&header.encode());
        bytes[HEADER_LEN..].copy_from_slice(payload);
        Self { bytes }
    }

    /// The cell in the first [`CELL_LEN`] bytes of `b`, or `None` if `b`
    /// is shorter.
    pub fn from_slice(b: &[u8]) -> Option<Self> {
        let bytes: [u8; CELL_LEN] = b.get(..CELL_LEN)?.try_into().ok()?;
        Some(Self { bytes })
    }

    /// The header's five bytes.
    pub fn header_bytes(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&self.bytes[..HEADER_LEN]);
        h
    }

    /// The header's fields as received (HEC not checked).
    pub fn header(&self) -> CellHeader {
        let mut h = [0u8; 4];
        h.copy_from_slice(&self.bytes[..4]);
        CellHeader::decode(&h)
    }

    /// The 48 payload bytes.
    pub fn payload(&self) -> &[u8; CELL_PAYLOAD_LEN] {
        // A 53-byte array always has a 48-byte tail.
        self.bytes.last_chunk().unwrap_or(&[0; CELL_PAYLOAD_LEN])
    }
}
