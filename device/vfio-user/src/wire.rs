//! vfio-user message layouts (QEMU `docs/interop/vfio-user.rst`), parsed
//! from and encoded to little-endian bytes with exact length checks. No
//! `unsafe`, no panics on any input: a payload of the wrong size is an error.
//! Flags that vfio-user takes from VFIO (`linux/vfio.h`) are the
//! `vfio-bindings` crate's.

use vfio_bindings::bindings::vfio;

use super::Errno;

/// Size of the message header.
pub const HEADER_SIZE: usize = 16;
/// DMA maps a client may hold at once (`max_dma_maps`); the device refuses
/// more with `ENOSPC`.
pub const MAX_DMA_MAPS: usize = 1024;
/// Largest data transfer we accept or offer (`max_data_xfer_size`).
pub const MAX_DATA_XFER: u32 = 1 << 20;
/// Largest file descriptor count per message (`max_msg_fds`).
pub const MAX_MSG_FDS: usize = 16;
/// Largest message we accept: a region write of `MAX_DATA_XFER` bytes.
pub const MAX_MSG_SIZE: u32 = MAX_DATA_XFER + 64;

/// Header flags: message type mask.
pub const FLAG_TYPE_MASK: u32 = 0xf;
/// Header flags: a command.
pub const FLAG_TYPE_COMMAND: u32 = 0;
/// Header flags: a reply.
pub const FLAG_TYPE_REPLY: u32 = 1;
/// Header flags: the sender wants no reply.
pub const FLAG_NO_REPLY: u32 = 0x10;
/// Header flags: the reply is an error; `error` holds the errno.
pub const FLAG_ERROR: u32 = 0x20;

/// vfio-user command numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
#[allow(missing_docs)]
pub enum Command {
    Version = 1,
    DmaMap = 2,
    DmaUnmap = 3,
    DeviceGetInfo = 4,
    DeviceGetRegionInfo = 5,
    DeviceGetRegionIoFds = 6,
    DeviceGetIrqInfo = 7,
    DeviceSetIrqs = 8,
    RegionRead = 9,
    RegionWrite = 10,
    DmaRead = 11,
    DmaWrite = 12,
    DeviceReset = 13,
    DirtyPages = 14,
    RegionWriteMulti = 15,
}

impl Command {
    /// The command for a wire number, if there is one.
    pub fn from_u16(v: u16) -> Option<Self> {
        use Command::*;
        Some(match v {
            1 => Version,
            2 => DmaMap,
            3 => DmaUnmap,
            4 => DeviceGetInfo,
            5 => DeviceGetRegionInfo,
            6 => DeviceGetRegionIoFds,
            7 => DeviceGetIrqInfo,
            8 => DeviceSetIrqs,
            9 => RegionRead,
            10 => RegionWrite,
            11 => DmaRead,
            12 => DmaWrite,
            13 => DeviceReset,
            14 => DirtyPages,
            15 => RegionWriteMulti,
            _ => return None,
        })
    }
}

/// The 16-byte header that starts every message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Header {
    /// Message ID, echoed in the reply.
    pub id: u16,
    /// Command number.
    pub command: u16,
    /// Size of the whole message, header included.
    pub size: u32,
    /// FLAG_* bits.
    pub flags: u32,
    /// errno of an error reply.
    pub error: u32,
}

impl Header {
    /// Parses a header from exactly 16 bytes.
    pub fn parse(b: &[u8; HEADER_SIZE]) -> Self {
        Header {
            id: u16::from_le_bytes([b[0], b[1]]),
            command: u16::from_le_bytes([b[2], b[3]]),
            size: le32(b, 4),
            flags: le32(b, 8),
            error: le32(b, 12),
        }
    }

    /// Appends the encoded header to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.command.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.error.to_le_bytes());
    }

    /// Writes the encoded header into the first 16 bytes of `out`.
    pub fn encode_into(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&self.id.to_le_bytes());
        out[2..4].copy_from_slice(&self.command.to_le_bytes());
        out[4..8].copy_from_slice(&self.size.to_le_bytes());
        out[8..12].copy_from_slice(&self.flags.to_le_bytes());
        out[12..16].copy_from_slice(&self.error.to_le_bytes());
    }

    /// True if the sender asked for no reply.
    pub fn no_reply(&self) -> bool {
        self.flags & FLAG_NO_REPLY != 0
    }
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes([
        b[at],
        b[at + 1],
        b[at + 2],
        b[at + 3],
        b[at + 4],
        b[at + 5],
        b[at + 6],
        b[at + 7],
    ])
}

fn need(p: &[u8], exact: Option<usize>, min: usize, what: &str) -> Result<(), Errno> {
    let ok = match exact {
        Some(n) => p.len() == n,
        None => p.len() >= min,
    };
    if ok {
        Ok(())
    } else {
        Err(Errno::inval(format!(
            "{what}: payload of {} bytes",
            p.len()
        )))
    }
}

/// VERSION request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Protocol major version.
    pub major: u16,
    /// Protocol minor version.
    pub minor: u16,
    /// JSON capabilities (without the NUL).
    pub json: String,
}

impl Version {
    /// Parses a VERSION payload.
    pub fn parse(p: &[u8]) -> Result<Self, Errno> {
        need(p, None, 4, "VERSION")?;
        let text = &p[4..];
        let json = match text.iter().position(|&c| c == 0) {
            Some(n) if n + 1 == text.len() => &text[..n],
            None if text.is_empty() => text,
            _ => {
                return Err(Errno::inval(
                    "VERSION: capabilities must be one NUL-terminated string",
                ))
            }
        };
        let json = std::str::from_utf8(json)
            .map_err(|_| Errno::inval("VERSION: capabilities are not UTF-8"))?
            .to_owned();
        Ok(Version {
            major: u16::from_le_bytes([p[0], p[1]]),
            minor: u16::from_le_bytes([p[2], p[3]]),
            json,
        })
    }

    /// Encodes a VERSION payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.major.to_le_bytes());
        out.extend_from_slice(&self.minor.to_le_bytes());
        out.extend_from_slice(self.json.as_bytes());
        out.push(0);
    }
}

/// DMA_MAP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaMap {
    /// Argument size (32).
    pub argsz: u32,
    /// DMA_MAP_FLAG_* bits.
    pub flags: u32,
    /// Offset of `address` in the passed file.
    pub offset: u64,
    /// Guest (IO virtual) address.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
}

/// DMA_MAP flag: the device may read.
pub const DMA_MAP_FLAG_READ: u32 = vfio::VFIO_DMA_MAP_FLAG_READ;
/// DMA_MAP flag: the device may write.
pub const DMA_MAP_FLAG_WRITE: u32 = vfio::VFIO_DMA_MAP_FLAG_WRITE;
/// DMA_UNMAP flag: dirty bitmap requested (unsupported).
pub const DMA_UNMAP_FLAG_GET_DIRTY_BITMAP: u32 = vfio::VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP;
/// DMA_UNMAP flag: unmap everything.
pub const DMA_UNMAP_FLAG_ALL: u32 = vfio::VFIO_DMA_UNMAP_FLAG_ALL;

impl DmaMap {
    /// Size of the payload.
    pub const SIZE: usize = 32;

    /// Parses a DMA_MAP payload.
    pub fn parse(p: &[u8]) -> Result<Self, Errno> {
        need(p, Some(Self::SIZE), 0, "DMA_MAP")?;
        let m = DmaMap {
            argsz: le32(p, 0),
            flags: le32(p, 4),
            offset: le64(p, 8),
            address: le64(p, 16),
            size: le64(p, 24),
        };
        if m.argsz as usize != Self::SIZE {
            return Err(Errno::inval(format!("DMA_MAP: argsz {}", m.argsz)));
        }
        Ok(m)
    }

    /// Encodes a DMA_MAP payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.argsz.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.address.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
    }
}

/// DMA_UNMAP request (and its reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaUnmap {
    /// Argument size (24).
    pub argsz: u32,
    /// DMA_UNMAP_FLAG_* bits.
    pub flags: u32,
    /// Guest address.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
}

impl DmaUnmap {
    /// Size of the payload without a dirty bitmap.
    pub const SIZE: usize = 24;

    /// Parses a DMA_UNMAP payload.
    pub fn parse(p: &[u8]) -> Result<Self, Errno> {
        need(p, Some(Self::SIZE), 0, "DMA_UNMAP")?;
        let m = DmaUnmap {
            argsz: le32(p, 0),
            flags: le32(p, 4),
            address: le64(p, 8),
            size: le64(p, 16),
        };
        if (m.argsz as usize) < Self::SIZE {
            return Err(Errno::inval(format!("DMA_UNMAP: argsz {}", m.argsz)));
        }
        Ok(m)
    }

    /// Encodes a DMA_UNMAP payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.argsz.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.address.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
    }
}

/// DEVICE_GET_INFO reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceInfo {
    /// VFIO_DEVICE_FLAGS_* bits.
    pub flags: u32,
    /// Number of regions.
    pub num_regions: u32,
    /// Number of IRQ indexes.
    pub num_irqs: u32,
}

/// VFIO_DEVICE_FLAGS_RESET.
pub const DEVICE_FLAGS_RESET: u32 = vfio::VFIO_DEVICE_FLAGS_RESET;
/// VFIO_DEVICE_FLAGS_PCI.
pub const DEVICE_FLAGS_PCI: u32 = vfio::VFIO_DEVICE_FLAGS_PCI;

impl DeviceInfo {
    /// Size of the payload.
    pub const SIZE: usize = 16;

    /// Parses the request's argsz.
    pub fn parse_request(p: &[u8]) -> Result<u32, Errno> {
        need(p, Some(Self::SIZE), 0, "DEVICE_GET_INFO")?;
        let argsz = le32(p, 0);
        if (argsz as usize) < Self::SIZE {
            return Err(Errno::inval(format!("DEVICE_GET_INFO: argsz {argsz}")));
        }
        Ok(argsz)
    }

    /// Parses a reply payload.
    pub fn parse(p: &[u8]) -> Result<Self, Errno> {
        need(p, Some(Self::SIZE), 0, "DEVICE_GET_INFO reply")?;
        Ok(DeviceInfo {
            flags: le32(p, 4),
            num_regions: le32(p, 8),
            num_irqs: le32(p, 12),
        })
    }

    /// Encodes the reply payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(Self::SIZE as u32).to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.num_regions.to_le_bytes());
        out.extend_from_slice(&self.num_irqs.to_le_bytes());
    }
}

/// `struct vfio_region_info` as carried by DEVICE_GET_REGION_INFO.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegionInfo {
    /// Argument size: the client's buffer, or the size needed in a reply.
    pub argsz: u32,
    /// REGION_FLAG_* bits.
    pub flags: u32,
    /// Region index.
    pub index: u32,
    /// Offset of the first capability from the start of this struct.
    pub cap_offset: u32,
    /// Size of the region in bytes.
    pub size: u64,
    /// mmap offset in the passed file.
    pub offset: u64,
}

/// Region flag: readable.
pub const REGION_FLAG_READ: u32 = vfio::VFIO_REGION_INFO_FLAG_READ;
/// Region flag: writable.
pub const REGION_FLAG_WRITE: u32 = vfio::VFIO_REGION_INFO_FLAG_WRITE;
/// Region flag: can be mmapped.
pub const REGION_FLAG_MMAP: u32 = vfio::VFIO_REGION_INFO_FLAG_MMAP;
/// Region flag: capabilities follow.
pub const REGION_FLAG_CAPS: u32 = vfio::VFIO_REGION_INFO_FLAG_CAPS;
/// Region capability id: sparse mmap areas (`VFIO_REGION_INFO_CAP_SPARSE_MMAP`;
/// 16 bits in the capability header).
pub const REGION_CAP_SPARSE_MMAP: u16 = vfio::VFIO_REGION_INFO_CAP_SPARSE_MMAP as u16;

/// Encodes a sparse-mmap capability (`struct vfio_region_info_cap_sparse_mmap`,
/// the last in its chain) listing `areas` as (offset, size) in the region.
pub fn sparse_mmap_cap(areas: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 16 * areas.len());
    out.extend_from_slice(&REGION_CAP_SPARSE_MMAP.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // version
    out.extend_from_slice(&0u32.to_le_bytes()); // next: none
    out.extend_from_slice(&(areas.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // reserved
    for &(offset, size) in areas {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
    }
    out
}

impl RegionInfo {
    /// Size of the struct.
    pub const SIZE: usize = 32;

    /// Parses the struct.
    pub fn parse(p: &[u8]) -> Result<Self, Errno> {
        need(p, Some(Self::SIZE), 0, "DEVICE_GET_REGION_INFO")?;
        let r = RegionInfo {
            argsz: le32(p, 0),
            flags: le32(p, 4),
            index: le32(p, 8),
            cap_offset: le32(p, 12),
            size: le64(p, 16),
            offset: le64(p, 24),
        };
        Ok(r)
    }

    /// Encodes the struct.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.argsz.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.cap_offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
    }
}

/// `struct vfio_irq_info` as carried by DEVICE_GET_IRQ_INFO.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IrqInfo {
    /// Argument size (16).
    pub argsz: u32,
    /// IRQ_INFO_* bits.
    pub flags: u32,
    /// IRQ index.
    pub index: u32,
    /// Number of vectors.
    pub count: u32,
}

/// IRQ info flag: eventfds can signal it.
pub const IRQ_INFO_EVENTFD: u32 = vfio::VFIO_IRQ_INFO_EVENTFD;
/// IRQ info flag: maskable.
pub const IRQ_INFO_MASKABLE: u32 = vfio::VFIO_IRQ_INFO_MASKABLE;
/// IRQ info flag: the count cannot change while enabled.
pub const IRQ_INFO_NORESIZE: u32 = vfio::VFIO_IRQ_INFO_NORESIZE;

impl IrqInfo {
    /// Size of the struct.
    pub const SIZE: usize = 16;

    /// Parses the struct.
    pub fn parse(p: &[u8]) -> Result<Self, Errno> {
        need(p, Some(Self::SIZE), 0, "DEVICE_GET_IRQ_INFO")?;
        let r = IrqInfo {
            argsz: le32(p, 0),
            flags: le32(p, 4),
            index: le32(p, 8),
            count: le32(p, 12),
        };
        if (r.argsz as usize) < Self::SIZE {
            return Err(Errno::inval(format!(
                "DEVICE_GET_IRQ_INFO: argsz {}",
                r.argsz
            )));
        }
        Ok(r)
    }

    /// Encodes the struct.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.argsz.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
    }
}

/// DEVICE_SET_IRQS request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetIrqs {
    /// Argument size.
    pub argsz: u32,
    /// IRQ_SET_* bits: one data type and one action.
    pub flags: u32,
    /// IRQ index.
    pub index: u32,
    /// First vector.
    pub start: u32,
    /// Number of vectors.
    pub count: u32,
    /// Inline data (one byte per vector for DATA_BOOL).
    pub data: Vec<u8>,
}

/// SET_IRQS: no data.
pub const IRQ_SET_DATA_NONE: u32 = vfio::VFIO_IRQ_SET_DATA_NONE;
/// SET_IRQS: one bool byte per vector follows.
pub const IRQ_SET_DATA_BOOL: u32 = vfio::VFIO_IRQ_SET_DATA_BOOL;
/// SET_IRQS: eventfds arrive as SCM_RIGHTS.
pub const IRQ_SET_DATA_EVENTFD: u32 = vfio::VFIO_IRQ_SET_DATA_EVENTFD;
/// SET_IRQS: mask.
pub const IRQ_SET_ACTION_MASK: u32 = vfio::VFIO_IRQ_SET_ACTION_MASK;
/// SET_IRQS: unmask.
pub const IRQ_SET_ACTION_UNMASK: u32 = vfio::VFIO_IRQ_SET_ACTION_UNMASK;
/// SET_IRQS: trigger / set eventfds.
pub const IRQ_SET_ACTION_TRIGGER: u32 = vfio::VFIO_IRQ_SET_ACTION_TRIGGER;

impl SetIrqs {
    /// Size of the fixed part.
    pub const SIZE: usize = 20;

    /// Parses a SET_IRQS payload.
    pub fn parse(p: &[u8]) -> Result<Self, Errno> {
        need(p, None, Self::SIZE, "DEVICE_SET_IRQS")?;
        let s = SetIrqs {
            argsz: le32(p, 0),
            flags: le32(p, 4),
            index: le32(p, 8),
            start: le32(p, 12),
            count: le32(p, 16),
            data: p[Self::SIZE..].to_vec(),
        };
        if s.argsz as usize != p.len() {
            return Err(Errno::inval(format!(
                "DEVICE_SET_IRQS: argsz {} for {} bytes",
                s.argsz,
                p.len()
            )));
        }
        Ok(s)
    }

    /// Encodes a SET_IRQS payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.argsz.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.start.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.data);
    }
}

/// REGION_READ / REGION_WRITE fixed part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionAccess {
    /// Offset in the region.
    pub offset: u64,
    /// Region index.
    pub region: u32,
    /// Number of bytes.
    pub count: u32,
}

impl RegionAccess {
    /// Size of the fixed part.
    pub const SIZE: usize = 16;

    /// Parses the fixed part; returns it and the data after it.
    pub fn parse(p: &[u8]) -> Result<(Self, &[u8]), Errno> {
        need(p, None, Self::SIZE, "REGION access")?;
        let a = RegionAccess {
            offset: le64(p, 0),
            region: le32(p, 8),
            count: le32(p, 12),
        };
        Ok((a, &p[Self::SIZE..]))
    }

    /// Encodes the fixed part.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.region.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_from_vfio_have_the_values_of_the_vfio_user_spec() {
        let dma = (DMA_MAP_FLAG_READ, DMA_MAP_FLAG_WRITE);
        let unmap = (DMA_UNMAP_FLAG_GET_DIRTY_BITMAP, DMA_UNMAP_FLAG_ALL);
        assert_eq!((dma, unmap), ((1, 2), (1, 2)));
        assert_eq!((DEVICE_FLAGS_RESET, DEVICE_FLAGS_PCI), (1, 2));
        let region = (REGION_FLAG_READ, REGION_FLAG_WRITE, REGION_FLAG_MMAP);
        assert_eq!(
            (region, REGION_FLAG_CAPS, REGION_CAP_SPARSE_MMAP),
            ((1, 2, 4), 8, 1)
        );
        let irq = (IRQ_INFO_EVENTFD, IRQ_INFO_MASKABLE, IRQ_INFO_NORESIZE);
        assert_eq!(irq, (1, 2, 8));
        let data = (IRQ_SET_DATA_NONE, IRQ_SET_DATA_BOOL, IRQ_SET_DATA_EVENTFD);
        let action = (
            IRQ_SET_ACTION_MASK,
            IRQ_SET_ACTION_UNMASK,
            IRQ_SET_ACTION_TRIGGER,
        );
        assert_eq!((data, action), ((1, 2, 4), (8, 16, 32)));
    }

    #[test]
    fn header_layout_matches_the_spec() {
        // id 0x0102, command 9, size 0x20, flags NO_REPLY, error 0
        let raw = [2, 1, 9, 0, 0x20, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0];
        let h = Header::parse(&raw);
        assert_eq!(
            h,
            Header {
                id: 0x102,
                command: 9,
                size: 0x20,
                flags: 0x10,
                error: 0
            }
        );
        let mut out = Vec::new();
        h.encode(&mut out);
        assert_eq!(out, raw);
    }

    #[test]
    fn region_access_layout() {
        let mut p = vec![];
        p.extend_from_slice(&0x1234u64.to_le_bytes());
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(&4u32.to_le_bytes());
        p.extend_from_slice(&[1, 2, 3, 4]);
        let (a, data) = RegionAccess::parse(&p).unwrap();
        assert_eq!(
            a,
            RegionAccess {
                offset: 0x1234,
                region: 7,
                count: 4
            }
        );
        assert_eq!(data, [1, 2, 3, 4]);
        assert!(RegionAccess::parse(&p[..15]).is_err());
    }

    #[test]
    fn version_needs_one_nul_terminated_string() {
        let mut p = vec![0, 0, 0, 0];
        p.extend_from_slice(b"{}\0");
        assert_eq!(Version::parse(&p).unwrap().json, "{}");
        assert!(Version::parse(&p[..4]).is_ok(), "no capabilities at all");
        let mut bad = vec![0, 0, 0, 0];
        bad.extend_from_slice(b"{}");
        assert!(Version::parse(&bad).is_err());
        bad.extend_from_slice(b"\0x\0");
        assert!(Version::parse(&bad).is_err());
        assert!(Version::parse(&[0, 0, 0, 0, 0xff, 0]).is_err());
        assert!(Version::parse(&[0, 0]).is_err());
    }

    #[test]
    fn fixed_size_payloads_are_exact() {
        assert!(DmaMap::parse(&[0; 31]).is_err());
        assert!(DmaMap::parse(&[0; 33]).is_err());
        let mut ok = Vec::new();
        DmaMap {
            argsz: 32,
            flags: 3,
            offset: 0,
            address: 0x1000,
            size: 0x1000,
        }
        .encode(&mut ok);
        assert_eq!(DmaMap::parse(&ok).unwrap().address, 0x1000);
        assert!(DmaUnmap::parse(&[0; 23]).is_err());
        assert!(RegionInfo::parse(&[0; 16]).is_err());
        assert!(IrqInfo::parse(&[0; 16]).is_err(), "argsz 0");
        assert!(SetIrqs::parse(&[0; 19]).is_err());
    }

    #[test]
    fn command_numbers() {
        for n in 1..=15u16 {
            assert_eq!(Command::from_u16(n).unwrap() as u16, n);
        }
        assert_eq!(Command::from_u16(0), None);
        assert_eq!(Command::from_u16(16), None);
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Version::parse(&bytes);
            let _ = DmaMap::parse(&bytes);
            let _ = DmaUnmap::parse(&bytes);
            let _ = DeviceInfo::parse_request(&bytes);
            let _ = DeviceInfo::parse(&bytes);
            let _ = RegionInfo::parse(&bytes);
            let _ = IrqInfo::parse(&bytes);
            let _ = SetIrqs::parse(&bytes);
            let _ = RegionAccess::parse(&bytes);
            if bytes.len() >= HEADER_SIZE {
                let _ = Header::parse(bytes[..HEADER_SIZE].try_into().unwrap());
            }
        }

        #[test]
        fn dma_map_round_trips(flags: u32, offset: u64, address: u64, size: u64) {
            let m = DmaMap { argsz: 32, flags, offset, address, size };
            let mut b = Vec::new();
            m.encode(&mut b);
            prop_assert_eq!(DmaMap::parse(&b).unwrap(), m);
        }

        #[test]
        fn set_irqs_round_trips(flags: u32, index: u32, start: u32, data in proptest::collection::vec(any::<u8>(), 0..40)) {
            let s = SetIrqs { argsz: 20 + data.len() as u32, flags, index, start, count: data.len() as u32, data };
            let mut b = Vec::new();
            s.encode(&mut b);
            prop_assert_eq!(SetIrqs::parse(&b).unwrap(), s);
        }

        #[test]
        fn region_info_round_trips(flags: u32, index: u32, size: u64, offset: u64) {
            let r = RegionInfo { argsz: 32, flags, index, cap_offset: 0, size, offset };
            let mut b = Vec::new();
            r.encode(&mut b);
            prop_assert_eq!(RegionInfo::parse(&b).unwrap(), r);
        }

        #[test]
        fn version_round_trips(major: u16, minor: u16, json in "[ -~]{0,100}") {
            let v = Version { major, minor, json };
            let mut b = Vec::new();
            v.encode(&mut b);
            prop_assert_eq!(Version::parse(&b).unwrap(), v);
        }
    }
}
