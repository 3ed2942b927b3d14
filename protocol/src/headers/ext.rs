//! The set of extended transport headers a packet carries, read and written
//! in the order the opcode table gives.

use super::{Aeth, AtomicAckEth, AtomicEth, Deth, Ieth, ImmDt, Reth};
use crate::error::{BuildError, ParseError};
use crate::opcode::{ExtHeader, Opcode};
use crate::reader::Reader;

/// Extended transport headers between the BTH and the payload. Which ones
/// are present is decided by the opcode ([`Opcode::info`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ExtHeaders {
    /// Datagram ETH.
    pub deth: Option<Deth>,
    /// RDMA ETH.
    pub reth: Option<Reth>,
    /// Atomic ETH.
    pub atomic_eth: Option<AtomicEth>,
    /// ACK ETH.
    pub aeth: Option<Aeth>,
    /// Atomic ACK ETH.
    pub atomic_ack_eth: Option<AtomicAckEth>,
    /// Immediate data.
    pub immdt: Option<ImmDt>,
    /// Invalidate ETH.
    pub ieth: Option<Ieth>,
}

impl ExtHeaders {
    /// Whether `header` is present.
    pub fn has(&self, header: ExtHeader) -> bool {
        match header {
            ExtHeader::Deth => self.deth.is_some(),
            ExtHeader::Reth => self.reth.is_some(),
            ExtHeader::AtomicEth => self.atomic_eth.is_some(),
            ExtHeader::Aeth => self.aeth.is_some(),
            ExtHeader::AtomicAckEth => self.atomic_ack_eth.is_some(),
            ExtHeader::ImmDt => self.immdt.is_some(),
            ExtHeader::Ieth => self.ieth.is_some(),
        }
    }

    /// Reads the headers `opcode` carries, in wire order.
    pub(crate) fn read(opcode: Opcode, r: &mut Reader<'_>) -> Result<Self, ParseError> {
        let mut ext = Self::default();
        for header in opcode.info().headers {
            match header {
                ExtHeader::Deth => ext.deth = Some(Deth::read(r)?),
                ExtHeader::Reth => ext.reth = Some(Reth::read(r)?),
                ExtHeader::AtomicEth => ext.atomic_eth = Some(AtomicEth::read(r)?),
                ExtHeader::Aeth => ext.aeth = Some(Aeth::read(r)?),
                ExtHeader::AtomicAckEth => ext.atomic_ack_eth = Some(AtomicAckEth::read(r)?),
                ExtHeader::ImmDt => ext.immdt = Some(ImmDt::read(r)?),
                ExtHeader::Ieth => ext.ieth = Some(Ieth::read(r)?),
            }
        }
        Ok(ext)
    }

    /// Parses the headers `opcode` carries from the start of `buf` (the
    /// bytes right after the BTH); returns them and the bytes consumed.
    pub fn parse(opcode: Opcode, buf: &[u8]) -> Result<(Self, usize), ParseError> {
        let mut r = Reader::new(buf);
        let ext = Self::read(opcode, &mut r)?;
        Ok((ext, r.position()))
    }

    /// Checks that exactly the headers `opcode` carries are present.
    pub fn check(&self, opcode: Opcode) -> Result<(), BuildError> {
        let info = opcode.info();
        for header in ALL {
            match (info.has(header), self.has(header)) {
                (true, false) => return Err(BuildError::MissingHeader { opcode, header }),
                (false, true) => return Err(BuildError::UnexpectedHeader { opcode, header }),
                _ => {}
            }
        }
        Ok(())
    }

    /// Appends the headers `opcode` carries, in wire order; headers the
    /// opcode does not carry are not written (see [`Self::check`]).
    pub fn write(&self, opcode: Opcode, out: &mut Vec<u8>) {
        for header in opcode.info().headers {
            match header {
                ExtHeader::Deth => self.deth.iter().for_each(|h| h.write(out)),
                ExtHeader::Reth => self.reth.iter().for_each(|h| h.write(out)),
                ExtHeader::AtomicEth => self.atomic_eth.iter().for_each(|h| h.write(out)),
                ExtHeader::Aeth => self.aeth.iter().for_each(|h| h.write(out)),
                ExtHeader::AtomicAckEth => self.atomic_ack_eth.iter().for_each(|h| h.write(out)),
                ExtHeader::ImmDt => self.immdt.iter().for_each(|h| h.write(out)),
                ExtHeader::Ieth => self.ieth.iter().for_each(|h| h.write(out)),
            }
        }
    }
}

const ALL: [ExtHeader; 7] = [
    ExtHeader::Deth,
    ExtHeader::Reth,
    ExtHeader::AtomicEth,
    ExtHeader::Aeth,
    ExtHeader::AtomicAckEth,
    ExtHeader::ImmDt,
    ExtHeader::Ieth,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_ack_order_and_check() {
        // AETH (ACK, MSN 3) then AtomicAckETH (orig 0x11).
        let bytes = [0x1f, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0x11];
        let (ext, used) = ExtHeaders::parse(Opcode::RcAtomicAcknowledge, &bytes).unwrap();
        assert_eq!(used, 12);
        assert_eq!(
            ext.aeth,
            Some(Aeth {
                syndrome: 0x1f,
                msn: 3
            })
        );
        assert_eq!(ext.atomic_ack_eth, Some(AtomicAckEth { orig: 0x11 }));
        assert_eq!(ext.check(Opcode::RcAtomicAcknowledge), Ok(()));
        assert_eq!(
            ext.check(Opcode::RcAcknowledge),
            Err(BuildError::UnexpectedHeader {
                opcode: Opcode::RcAcknowledge,
                header: ExtHeader::AtomicAckEth
            })
        );
        assert_eq!(
            ExtHeaders::default().check(Opcode::RcFetchAdd),
            Err(BuildError::MissingHeader {
                opcode: Opcode::RcFetchAdd,
                header: ExtHeader::AtomicEth
            })
        );
        let mut out = Vec::new();
        ext.write(Opcode::RcAtomicAcknowledge, &mut out);
        assert_eq!(out, bytes);
        assert!(ExtHeaders::parse(Opcode::RcAtomicAcknowledge, &bytes[..11]).is_err());
    }
}
