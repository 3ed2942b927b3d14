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

use crate::crc::{packet_crcs, vcrc, PacketCrcs};
use crate::error::{BuildError, ParseError};
use crate::headers::{Bth, Deth, ExtHeaders, Grh, Lnh, Lrh};
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

    /// A local UD SEND Only datagram from `slid` to QP `dest_qp` at `dlid`,
    /// with `deth` (Q_Key and source QP) and `payload`; SL and VL 0, the
    /// default P_Key and every other field as [`Self::new`] leaves it. A
    /// caller sets the rest (SL, VL, P_Key, a GRH) on the packet returned.
    pub fn datagram(slid: u16, dlid: u16, dest_qp: u32, deth: Deth, payload: Vec<u8>) -> Self {
        let mut p = Self::new(Opcode::UdSendOnly);
        (p.lrh.slid, p.lrh.dlid) = (slid, dlid);
        p.bth.dest_qp = dest_qp;
        p.ext.deth = Some(deth);
        p.payload = payload;
        p
    }

    /// The opcode's table entry.
    pub fn info(&self) -> &'static OpcodeInfo {
        self.bth.opcode.info()
    }

    /// Bytes of the headers (LRH through the extended headers).
    fn header_len(&self) -> usize {
        let grh = if self.grh.is_some() { Grh::LEN } else { 0 };
        Lrh::LEN + grh + Bth::LEN + self.info().ext_len()
    }

    /// Bytes from the LRH through the last pad byte (what the ICRC covers)
    /// with a payload of `payload_len` bytes.
    fn covered_len(&self, payload_len: usize) -> usize {
        let padded = payload_len.saturating_add(3) & !3;
        self.header_len().saturating_add(padded)
    }

    /// Bytes [`Self::build`] will produce.
    pub fn wire_len(&self) -> usize {
        self.covered_len(self.payload.len())
            .saturating_add(ICRC_LEN + VCRC_LEN)
    }

    /// Bytes [`Self::build_into`] adds with `extra` more payload bytes (the
    /// length [`Self::build_in_place`] needs).
    pub fn wire_len_with(&self, extra: usize) -> usize {
        self.covered_len(self.payload.len().saturating_add(extra))
            .saturating_add(ICRC_LEN + VCRC_LEN)
    }

    /// The headers with the derived fields filled in for a payload of
    /// `payload_len` bytes, after checking that the packet can be encoded.
    fn derived_headers(&self, payload_len: usize) -> Result<(Lrh, Option<Grh>, Bth), BuildError> {
        let opcode = self.bth.opcode;
        self.ext.check(opcode)?;
        if !self.info().payload && payload_len != 0 {
            return Err(BuildError::UnexpectedPayload {
                opcode,
                len: payload_len,
            });
        }
        let through_icrc = self.covered_len(payload_len).saturating_add(ICRC_LEN);
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
        bth.pad_cnt = ((4 - payload_len % 4) % 4) as u8;
        Ok((lrh, grh, bth))
    }

    /// Fills in the derived fields (what [`Self::build`] would write), so
    /// that a packet can be compared with what parsing its bytes gives.
    pub fn finalize(&mut self) -> Result<(), BuildError> {
        (self.lrh, self.grh, self.bth) = self.derived_headers(self.payload.len())?;
        Ok(())
    }

    /// Encodes the packet with its PktLen, PadCnt, ICRC and VCRC.
    pub fn build(&self) -> Result<Vec<u8>, BuildError> {
        let mut out = Vec::with_capacity(self.wire_len());
        match self.build_into(&mut out, 0, |_| Ok::<(), std::convert::Infallible>(())) {
            Ok(()) => Ok(out),
            Err(FillError::Build(e)) => Err(e),
            Err(FillError::Fill(never)) => match never {},
        }
    }

    /// Encodes the packet like [`Self::build`], appended to `out`, with
    /// `extra` more payload bytes after `payload` that `fill` writes in
    /// place (e.g. gathered straight from memory: no payload buffer of its
    /// own). On an error `out` is left as it was.
    pub fn build_into<E>(
        &self,
        out: &mut Vec<u8>,
        extra: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<(), FillError<E>> {
        self.build_appending(out, extra, |out| {
            let at = out.len();
            out.resize(at + extra, 0);
            fill(out.get_mut(at..).unwrap_or_default())
        })
    }

    /// Like [`Self::build_into`], but `fill` appends the `extra` payload
    /// bytes to `out` itself, so they are written once (not zero-filled
    /// first). Appending any other number of bytes is
    /// [`BuildError::FillLength`]. On an error `out` is left as it was.
    pub fn build_appending<E>(
        &self,
        out: &mut Vec<u8>,
        extra: usize,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), FillError<E>> {
        let payload_len = self.payload.len().saturating_add(extra);
        let (lrh, grh, bth) = self
            .derived_headers(payload_len)
            .map_err(FillError::Build)?;
        let start = out.len();
        out.reserve(self.covered_len(payload_len) + ICRC_LEN + VCRC_LEN);
        lrh.write(out);
        if let Some(grh) = grh {
            grh.write(out);
        }
        bth.write(out);
        self.ext.write(bth.opcode, out);
        out.extend_from_slice(&self.payload);
        let at = out.len();
        if let Err(e) = fill(out) {
            out.truncate(start);
            return Err(FillError::Fill(e));
        }
        if out.len() != at + extra {
            let got = out.len().saturating_sub(at);
            out.truncate(start);
            return Err(FillError::Build(BuildError::FillLength {
                expected: extra,
                got,
            }));
        }
        out.resize(at + extra + usize::from(bth.pad_cnt), 0);
        let crcs = packet_crcs(out.get(start..).unwrap_or_default(), None);
        out.extend_from_slice(&crcs.icrc.to_le_bytes());
        out.extend_from_slice(&crcs.vcrc.to_le_bytes());
        Ok(())
    }
}

impl Packet {
    /// Encodes the packet like [`Self::build_into`], into `out` instead of
    /// a `Vec` (say a slot of a shared ring): `out` must be exactly
    /// [`Self::wire_len_with`]`(extra)` bytes, else
    /// [`BuildError::BufferLength`]; `fill` writes the `extra` payload
    /// bytes in place, and the CRCs are computed over `out` as it is then.
    /// On an error `out` holds nothing of use.
    pub fn build_in_place<E>(
        &self,
        out: &mut [u8],
        extra: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<(), FillError<E>> {
        let payload_len = self.payload.len().saturating_add(extra);
        let (lrh, grh, bth) = self
            .derived_headers(payload_len)
            .map_err(FillError::Build)?;
        let expected = self.wire_len_with(extra);
        let got = out.len();
        let wrong_length = || FillError::Build(BuildError::BufferLength { expected, got });
        if out.len() != expected {
            return Err(wrong_length());
        }
        let mut head = Vec::with_capacity(self.header_len() + self.payload.len());
        lrh.write(&mut head);
        if let Some(grh) = grh {
            grh.write(&mut head);
        }
        bth.write(&mut head);
        self.ext.write(bth.opcode, &mut head);
        head.extend_from_slice(&self.payload);
        // LRH..payload, the payload `fill` writes, the pad, ICRC and VCRC:
        // exactly `expected` bytes, so none of these splits can fail.
        let covered = expected - ICRC_LEN - VCRC_LEN;
        let Some((headers, rest)) = out.split_at_mut_checked(head.len()) else {
            return Err(wrong_length());
        };
        headers.copy_from_slice(&head);
        let Some((payload, rest)) = rest.split_at_mut_checked(extra) else {
            return Err(wrong_length());
        };
        fill(payload).map_err(FillError::Fill)?;
        let Some((pad, _)) = rest.split_at_mut_checked(usize::from(bth.pad_cnt)) else {
            return Err(wrong_length());
        };
        pad.fill(0);
        let crcs = packet_crcs(out.get(..covered).unwrap_or_default(), None);
        let mut trailer = [0u8; ICRC_LEN + VCRC_LEN];
        trailer[..ICRC_LEN].copy_from_slice(&crcs.icrc.to_le_bytes());
        trailer[ICRC_LEN..].copy_from_slice(&crcs.vcrc.to_le_bytes());
        if let Some(t) = out.get_mut(covered..) {
            t.copy_from_slice(&trailer);
        }
        Ok(())
    }
}

/// Why [`Packet::build_into`] produced nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FillError<E> {
    /// The packet cannot be encoded.
    Build(BuildError),
    /// The payload's `fill` failed.
    Fill(E),
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
        Self::parse_checked(buf, None)
    }

    /// [`Self::parse`] with the CRCs of `buf` computed beforehand by
    /// [`ReceivedCrcs::of`] (say by a link reader while the bytes are still
    /// in its cache): every check is the same, only the pass over the
    /// bytes is skipped. CRCs of other bytes (a length that differs) are
    /// not trusted: they are computed again here.
    pub fn parse_with(buf: &'a [u8], crcs: &ReceivedCrcs) -> Result<Self, ParseError> {
        Self::parse_checked(buf, Some(crcs).filter(|c| c.len == buf.len()))
    }

    /// [`Self::parse`], with `known` the CRCs of `buf` if they were
    /// computed already; otherwise they are computed once the packet's
    /// length is known to be right (a packet that fails the cheaper
    /// checks costs no pass over its bytes).
    fn parse_checked(buf: &'a [u8], known: Option<&ReceivedCrcs>) -> Result<Self, ParseError> {
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
        let computed;
        let crcs = match known {
            Some(known) => known,
            None => {
                computed = ReceivedCrcs::of(buf);
                &computed
            }
        };
        let (Some((covered, icrc_found)), Some(crcs)) =
            (body.split_last_chunk::<ICRC_LEN>(), crcs.crcs)
        else {
            let computed = vcrc(body);
            return Err(if computed != vcrc_found {
                ParseError::Vcrc {
                    found: vcrc_found,
                    computed,
                }
            } else {
                ParseError::Truncated {
                    needed: ICRC_LEN,
                    available: body.len(),
                }
            });
        };
        let icrc_found = u32::from_le_bytes(*icrc_found);
        // The VCRC is checked first, as a link checks it before anything
        // else.
        if crcs.vcrc != vcrc_found {
            return Err(ParseError::Vcrc {
                found: vcrc_found,
                computed: crcs.vcrc,
            });
        }

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
        if crcs.icrc != icrc_found {
            return Err(ParseError::Icrc {
                found: icrc_found,
                computed: crcs.icrc,
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

/// Both CRCs of a received packet's bytes (LRH through VCRC), computed in
/// one pass for [`PacketView::parse_with`]; the checks against what the
/// packet carries are made there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceivedCrcs {
    /// Length of the bytes they were computed over.
    len: usize,
    /// The ICRC of the covered bytes and the VCRC through the carried
    /// ICRC; `None` when the bytes are too short to hold both CRCs.
    crcs: Option<PacketCrcs>,
}

impl ReceivedCrcs {
    /// The CRCs of the packet in `buf` (never panics, whatever `buf` is).
    pub fn of(buf: &[u8]) -> Self {
        let crcs = buf
            .len()
            .checked_sub(VCRC_LEN + ICRC_LEN)
            .and_then(|covered| {
                let icrc = buf.get(covered..covered + ICRC_LEN)?;
                let carried = u32::from_le_bytes(icrc.try_into().ok()?);
                Some(packet_crcs(buf.get(..covered)?, Some(carried)))
            });
        ReceivedCrcs {
            len: buf.len(),
            crcs,
        }
    }

    /// The CRCs `buf` carries, taken for computed ones without a pass over
    /// its bytes: [`PacketView::parse_with`] and [`Self::match_carried`]
    /// then find them right. Only for a packet this process built itself
    /// (or checked with [`Self::of`] when it came in, and kept since);
    /// bytes read from outside the process are checked with [`Self::of`].
    pub fn trusted(buf: &[u8]) -> Self {
        let crcs = buf
            .len()
            .checked_sub(VCRC_LEN + ICRC_LEN)
            .and_then(|covered| {
                let (icrc, vcrc) = buf.get(covered..)?.split_first_chunk::<ICRC_LEN>()?;
                Some(PacketCrcs {
                    icrc: u32::from_le_bytes(*icrc),
                    vcrc: u16::from_le_bytes(*vcrc.first_chunk::<VCRC_LEN>()?),
                })
            });
        ReceivedCrcs {
            len: buf.len(),
            crcs,
        }
    }

    /// True if these are the CRCs of bytes as long as `buf` and both equal
    /// the ICRC and VCRC `buf` carries.
    pub fn match_carried(&self, buf: &[u8]) -> bool {
        let carried = Self::trusted(buf);
        self.len == buf.len() && self.crcs.is_some() && self.crcs == carried.crcs
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_parses_back_with_its_addresses_deth_and_payload() {
        let deth = Deth {
            qkey: 0x8001_0000,
            src_qp: 0x33,
        };
        let p = Packet::datagram(3, 5, 0x44, deth, b"hello".to_vec());
        let bytes = p.build().unwrap();
        let view = PacketView::parse(&bytes).unwrap();
        assert_eq!(view.opcode(), Opcode::UdSendOnly);
        assert_eq!((view.lrh.slid, view.lrh.dlid), (3, 5));
        assert_eq!((view.lrh.sl, view.lrh.vl, view.grh), (0, 0, None));
        assert_eq!(view.bth.pkey, Bth::DEFAULT_PKEY);
        assert_eq!(view.bth.dest_qp, 0x44);
        assert_eq!(view.ext.deth, Some(deth));
        assert_eq!(view.payload, b"hello");
    }
}
