//! Whole native IB packets:
//!
//! ```text
//! LRH (8) [GRH (40) if LNH = IBA global] BTH (12) [extended headers per
//! opcode] payload pad (PadCnt: 0..=3 bytes to a 4-byte multiple)
//! ICRC (4) VCRC (2)
//! ```
//!
//! LRH PktLen counts 4-byte words from the LRH through the ICRC; GRH PayLen
//! counts bytes from after the GRH through the ICRC. CRC parameters and
//! masking are described in [`crate::crc`].

use crate::crc::{icrc, vcrc};
use crate::error::{BuildError, ParseError};
use crate::headers::{Bth, ExtHeaders, Grh, Lnh, Lrh};
use crate::opcode::{Opcode, OpcodeInfo};
use crate::reader::Reader;

/// ICRC length in bytes.
pub const ICRC_LEN: usize = 4;
/// VCRC length in bytes.
pub const VCRC_LEN: usize = 2;
/// Largest packet in bytes, VCRC included (PktLen is 11 bits).
pub const MAX_PACKET_LEN: usize = Lrh::MAX_PKT_LEN as usize * 4 + VCRC_LEN;

/// An owned IB packet to build. [`Packet::build`] derives LRH LNH and
/// PktLen, GRH IPVer, PayLen and NxtHdr, and BTH PadCnt; every other field is
/// written as given (LVer and TVer included, so that tests can make bad
/// packets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Local route header.
    pub lrh: Lrh,
    /// Global route header, if the packet is routed.
    pub grh: Option<Grh>,
    /// Base transport header; its opcode chooses the extended headers.
    pub bth: Bth,
    /// Extended transport headers; must match the opcode's table entry.
    pub ext: ExtHeaders,
    /// Payload (without pad).
    pub payload: Vec<u8>,
}

impl Packet {
    /// A local packet with `opcode`, default headers and no payload.
    pub fn new(opcode: Opcode) -> Self {
        Self {
            lrh: Lrh::default(),
            grh: None,
            bth: Bth::new(opcode),
            ext: ExtHeaders::default(),
            payload: Vec::new(),
        }
    }

    /// The opcode's table entry.
    pub fn info(&self) -> &'static OpcodeInfo {
        self.bth.opcode.info()
    }

    /// Bytes from the LRH through the last pad byte (what the ICRC covers).
    fn covered_len(&self) -> usize {
        let grh = if self.grh.is_some() { Grh::LEN } else { 0 };
        let padded = self.payload.len().saturating_add(3) & !3;
        (Lrh::LEN + grh + Bth::LEN + self.info().ext_len()).saturating_add(padded)
    }

    /// Bytes [`Self::build`] will produce.
    pub fn wire_len(&self) -> usize {
        self.covered_len().saturating_add(ICRC_LEN + VCRC_LEN)
    }

    /// The headers with the derived fields filled in, after checking that
    /// the packet can be encoded.
    fn derived_headers(&self) -> Result<(Lrh, Option<Grh>, Bth), BuildError> {
        let opcode = self.bth.opcode;
        self.ext.check(opcode)?;
        if !self.info().payload && !self.payload.is_empty() {
            return Err(BuildError::UnexpectedPayload {
                opcode,
                len: self.payload.len(),
            });
        }
        let through_icrc = self.covered_len().saturating_add(ICRC_LEN);
        let max = usize::from(Lrh::MAX_PKT_LEN) * 4;
        let too_long = BuildError::TooLong {
            bytes: through_icrc,
            max,
        };
        if through_icrc > max {
            return Err(too_long);
        }
        let mut lrh = self.lrh;
        lrh.pkt_len = u16::try_from(through_icrc / 4).map_err(|_| too_long.clone())?;
        lrh.lnh = if self.grh.is_some() {
            Lnh::IbaGlobal
        } else {
            Lnh::IbaLocal
        };
        let grh = match self.grh {
            Some(mut grh) => {
                let after = through_icrc.saturating_sub(Lrh::LEN + Grh::LEN);
                grh.pay_len = u16::try_from(after).map_err(|_| too_long.clone())?;
                grh.ip_ver = Grh::IP_VERSION;
                grh.next_header = Grh::NEXT_HEADER_IBA;
                Some(grh)
            }
            None => None,
        };
        let mut bth = self.bth;
        bth.pad_cnt = ((4 - self.payload.len() % 4) % 4) as u8;
        Ok((lrh, grh, bth))
    }

    /// Fills in the derived fields (what [`Self::build`] would write), so
    /// that a packet can be compared with what parsing its bytes gives.
    pub fn finalize(&mut self) -> Result<(), BuildError> {
        (self.lrh, self.grh, self.bth) = self.derived_headers()?;
        Ok(())
    }

    /// Encodes the packet with its PktLen, PadCnt, ICRC and VCRC.
    pub fn build(&self) -> Result<Vec<u8>, BuildError> {
        let (lrh, grh, bth) = self.derived_headers()?;
        let mut out = Vec::with_capacity(self.wire_len());
        lrh.write(&mut out);
        if let Some(grh) = grh {
            grh.write(&mut out);
        }
        bth.write(&mut out);
        self.ext.write(bth.opcode, &mut out);
        out.extend_from_slice(&self.payload);
        out.resize(out.len() + usize::from(bth.pad_cnt), 0);
        let icrc = icrc(&out);
        out.extend_from_slice(&icrc.to_le_bytes());
        let vcrc = vcrc(&out);
        out.extend_from_slice(&vcrc.to_le_bytes());
        Ok(out)
    }
}

/// A parsed, fully checked packet borrowing its payload from the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketView<'a> {
    /// Local route header.
    pub lrh: Lrh,
    /// Global route header (present when LNH is IBA global).
    pub grh: Option<Grh>,
    /// Base transport header.
    pub bth: Bth,
    /// Extended transport headers the opcode carries.
    pub ext: ExtHeaders,
    /// Payload, pad excluded.
    pub payload: &'a [u8],
    /// The ICRC the packet carries (it matched).
    pub icrc: u32,
    /// The VCRC the packet carries (it matched).
    pub vcrc: u16,
    bytes: &'a [u8],
}

impl<'a> PacketView<'a> {
    /// Parses and checks one packet that fills `buf` exactly: LRH LVer and
    /// LNH, PktLen against the buffer, VCRC, GRH (IPVer, NxtHdr, PayLen),
    /// BTH TVer and opcode, the extended headers the opcode needs, PadCnt,
    /// payload presence, and ICRC.
    pub fn parse(buf: &'a [u8]) -> Result<Self, ParseError> {
        let lrh = Lrh::parse(buf)?;
        if lrh.lver != 0 {
            return Err(ParseError::LinkVersion(lrh.lver));
        }
        if !matches!(lrh.lnh, Lnh::IbaLocal | Lnh::IbaGlobal) {
            return Err(ParseError::LinkNextHeader(lrh.lnh.bits()));
        }
        let length_error = ParseError::PacketLength {
            words: lrh.pkt_len,
            len: buf.len(),
        };
        if usize::from(lrh.pkt_len) * 4 + VCRC_LEN != buf.len() {
            return Err(length_error);
        }
        let (body, vcrc_found) = buf.split_last_chunk::<VCRC_LEN>().ok_or(length_error)?;
        let vcrc_found = u16::from_le_bytes(*vcrc_found);
        let computed = vcrc(body);
        if computed != vcrc_found {
            return Err(ParseError::Vcrc {
                found: vcrc_found,
                computed,
            });
        }
        let (covered, icrc_found) =
            body.split_last_chunk::<ICRC_LEN>()
                .ok_or(ParseError::Truncated {
                    needed: ICRC_LEN,
                    available: body.len(),
                })?;
        let icrc_found = u32::from_le_bytes(*icrc_found);

        let mut r = Reader::new(covered);
        r.bytes(Lrh::LEN)?;
        let grh = if lrh.lnh == Lnh::IbaGlobal {
            let grh = Grh::read(&mut r)?;
            check_grh(&grh, body.len())?;
            Some(grh)
        } else {
            None
        };
        let bth = Bth::read(&mut r)?;
        if bth.tver != 0 {
            return Err(ParseError::TransportVersion(bth.tver));
        }
        let ext = ExtHeaders::read(bth.opcode, &mut r)?;
        let rest = r.bytes(r.remaining())?;
        if !bth.opcode.info().payload && !rest.is_empty() {
            return Err(ParseError::UnexpectedPayload {
                opcode: bth.opcode,
                len: rest.len(),
            });
        }
        let pad = ParseError::Pad {
            pad: bth.pad_cnt,
            available: rest.len(),
        };
        let payload_len = rest
            .len()
            .checked_sub(usize::from(bth.pad_cnt))
            .ok_or(pad.clone())?;
        let payload = rest.get(..payload_len).ok_or(pad)?;
        let computed = icrc(covered);
        if computed != icrc_found {
            return Err(ParseError::Icrc {
                found: icrc_found,
                computed,
            });
        }
        Ok(Self {
            lrh,
            grh,
            bth,
            ext,
            payload,
            icrc: icrc_found,
            vcrc: vcrc_found,
            bytes: buf,
        })
    }

    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        self.bth.opcode
    }

    /// The opcode's table entry.
    pub fn info(&self) -> &'static OpcodeInfo {
        self.bth.opcode.info()
    }

    /// The whole packet as parsed, VCRC included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// An owned copy.
    pub fn to_packet(&self) -> Packet {
        Packet {
            lrh: self.lrh,
            grh: self.grh,
            bth: self.bth,
            ext: self.ext,
            payload: self.payload.to_vec(),
        }
    }
}

/// Parses and checks one packet; the same as [`PacketView::parse`].
pub fn parse(buf: &[u8]) -> Result<PacketView<'_>, ParseError> {
    PacketView::parse(buf)
}

/// Checks GRH IPVer, NxtHdr and PayLen; `through_icrc` is the packet length
/// without the VCRC.
fn check_grh(grh: &Grh, through_icrc: usize) -> Result<(), ParseError> {
    if grh.ip_ver != Grh::IP_VERSION {
        return Err(ParseError::GrhVersion(grh.ip_ver));
    }
    if grh.next_header != Grh::NEXT_HEADER_IBA {
        return Err(ParseError::GrhNextHeader(grh.next_header));
    }
    let expected = through_icrc.saturating_sub(Lrh::LEN + Grh::LEN);
    if usize::from(grh.pay_len) != expected {
        return Err(ParseError::GrhPayloadLength {
            expected: u16::try_from(expected).unwrap_or(u16::MAX),
            found: grh.pay_len,
        });
    }
    Ok(())
}
