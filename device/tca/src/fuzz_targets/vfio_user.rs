//! `vfio_user_wire`: a stream of arbitrary vfio-user messages through the
//! server's framing rules and command handler, against a recording backend
//! or the real device.

use std::fs::File;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ibtca_protocol::fuzz_targets::Input;

use crate::bar0::PortIdentity;
use crate::drdma::{Drdma, DrdmaConfig};
use crate::tca::Tca;
use crate::vfio_user::server::handle;
use crate::vfio_user::wire::{self, Command, Header, HEADER_SIZE};
use crate::vfio_user::{Backend, Errno, RegionMmap};

/// Regions and IRQ indexes the backend has.
const REGIONS: u32 = 9;
const IRQS: u32 = 5;

/// Input: messages one after the other, each a control byte and a 16-byte
/// header; with control bit 0 the header's size is replaced by 16 plus a
/// payload length read next (so the fuzzer need not learn the framing);
/// control bits 1-2 attach that many file descriptors; then the payload.
/// The first byte's bit 0 starts the connection already negotiated; its
/// bit 1 puts the real device ([`Tca`], no engine) behind the handler
/// instead of the recording backend, so that region accesses reach config
/// space, BAR0, the MSI-X table, the DRDMA window and the doorbell pages.
///
/// Invariants: every error is one of the errnos the server documents;
/// nothing but VERSION succeeds before VERSION; a successful command's
/// reply has exactly the size its command defines (with the recording
/// backend, a region read returns the bytes the backend produced, and the
/// backend only sees accesses of the size the client announced, within
/// the transfer limit); every message struct that parses encodes back to
/// the same bytes.
pub fn vfio_user_wire(data: &[u8]) {
    let mut input = Input::new(data);
    let first = input.u8();
    let mut negotiated = first & 1 != 0;
    let mut recorder = Recorder::default();
    let mut tca = (first & 2 != 0).then(device);
    while !input.is_empty() {
        let control = input.u8();
        let raw: [u8; HEADER_SIZE] = header_bytes(input.bytes(HEADER_SIZE));
        let mut header = Header::parse(&raw);
        check_header_round_trip(&header, &raw);
        if control & 1 != 0 {
            header.size = (HEADER_SIZE as u32) + u32::from(input.u16() % 2048);
        }
        // The server's framing (`Connection::next_message`).
        if (header.size as usize) < HEADER_SIZE {
            return; // the connection is dropped
        }
        let payload = input.bytes(header.size as usize - HEADER_SIZE);
        if header.size > wire::MAX_MSG_SIZE {
            continue; // E2BIG, the message is skipped
        }
        if payload.len() + HEADER_SIZE < header.size as usize {
            return; // the stream ends inside the message
        }
        check_structs(payload);
        let fds = (0..(control >> 1) & 3).map(|_| dup_null()).collect();
        let was_negotiated = negotiated;
        let mut out = Vec::new();
        Header::default().encode(&mut out);
        let mut reply_fd = None;
        recorder.last = None;
        let backend: &mut dyn Backend = match tca.as_mut() {
            Some(tca) => tca,
            None => &mut recorder,
        };
        let result = handle(
            backend,
            &header,
            payload,
            fds,
            &mut out,
            &mut negotiated,
            &mut reply_fd,
        );
        let recorder = tca.is_none().then_some(&recorder);
        check_result(&header, payload, &result, &out, was_negotiated, recorder);
    }
    if let Some(tca) = tca.as_mut() {
        // The client goes away: the device resets for the next one.
        tca.disconnected();
    }
}

/// The device as `ibtca-device` builds it, minus the engine thread, with
/// a short DRDMA load timeout (nothing will ever answer a read range).
fn device() -> Tca {
    let cfg = DrdmaConfig {
        ranges: 4,
        pmbs: 8,
        mapped: false,
        load_timeout: Duration::from_micros(100),
    };
    let drdma = Drdma::new(cfg).expect("DRDMA packet memory");
    Tca::with_parts(PortIdentity::default(), drdma)
}

fn header_bytes(b: &[u8]) -> [u8; HEADER_SIZE] {
    let mut raw = [0; HEADER_SIZE];
    raw[..b.len()].copy_from_slice(b);
    raw
}

fn check_header_round_trip(h: &Header, raw: &[u8; HEADER_SIZE]) {
    let mut out = Vec::new();
    h.encode(&mut out);
    assert_eq!(out, raw);
    let mut into = [0; HEADER_SIZE];
    h.encode_into(&mut into);
    assert_eq!(&into, raw);
}

/// Every payload parser: what parses encodes back to the same bytes.
fn check_structs(p: &[u8]) {
    if let Ok(v) = wire::Version::parse(p) {
        let mut out = Vec::new();
        v.encode(&mut out);
        // A VERSION without capabilities has no NUL; encoding adds one.
        let expected = if p.len() == 4 {
            [p, &[0]].concat()
        } else {
            p.to_vec()
        };
        assert_eq!(out, expected, "VERSION");
    }
    macro_rules! round_trip {
        ($ty:ty) => {
            if let Ok(m) = <$ty>::parse(p) {
                let mut out = Vec::new();
                m.encode(&mut out);
                assert_eq!(out, p, stringify!($ty));
            }
        };
    }
    round_trip!(wire::DmaMap);
    round_trip!(wire::DmaUnmap);
    round_trip!(wire::RegionInfo);
    round_trip!(wire::IrqInfo);
    round_trip!(wire::SetIrqs);
    if let Ok((a, rest)) = wire::RegionAccess::parse(p) {
        let mut out = Vec::new();
        a.encode(&mut out);
        out.extend_from_slice(rest);
        assert_eq!(out, p, "RegionAccess");
    }
    if let Ok(argsz) = wire::DeviceInfo::parse_request(p) {
        assert!(argsz as usize >= wire::DeviceInfo::SIZE);
    }
    if let Ok(info) = wire::DeviceInfo::parse(p) {
        let mut out = Vec::new();
        info.encode(&mut out);
        assert_eq!(out[4..], p[4..], "DeviceInfo");
    }
}

fn check_result(
    header: &Header,
    p: &[u8],
    result: &Result<(), Errno>,
    out: &[u8],
    was_negotiated: bool,
    recorder: Option<&Recorder>,
) {
    let command = Command::from_u16(header.command);
    let is_command = header.flags & wire::FLAG_TYPE_MASK == wire::FLAG_TYPE_COMMAND;
    let e = match result {
        Err(e) => e,
        Ok(()) => {
            let cmd = command.expect("only known commands succeed");
            assert!(is_command, "only commands succeed");
            assert!(
                was_negotiated || cmd == Command::Version,
                "{cmd:?} before VERSION"
            );
            check_reply(cmd, header, p, &out[HEADER_SIZE..], recorder);
            return;
        }
    };
    let documented = [
        libc::EINVAL,
        libc::E2BIG,
        libc::EEXIST,
        libc::ENOSYS,
        libc::ENOTSUP,
    ];
    assert!(documented.contains(&e.errno), "undocumented errno: {e}");
    if !is_command {
        assert_eq!(e.errno, libc::EINVAL);
    } else if command.is_none() {
        assert_eq!(e.errno, libc::ENOSYS);
    }
}

/// The reply payload of a successful command; with the recording backend,
/// its contents too.
fn check_reply(cmd: Command, header: &Header, p: &[u8], reply: &[u8], recorder: Option<&Recorder>) {
    match cmd {
        Command::Version => {
            assert!(!header.no_reply());
            let v = wire::Version::parse(reply).expect("our VERSION reply parses");
            assert_eq!(v.major, 0);
            assert!(serde_json::from_str::<serde_json::Value>(&v.json).is_ok());
        }
        Command::DmaMap | Command::DeviceSetIrqs | Command::DeviceReset => {
            assert!(reply.is_empty())
        }
        Command::DmaUnmap => assert_eq!(reply, p),
        Command::DeviceGetInfo => assert_eq!(reply.len(), wire::DeviceInfo::SIZE),
        Command::DeviceGetIrqInfo => {
            let info = wire::IrqInfo::parse(reply).expect("IRQ info reply parses");
            assert!(recorder.is_none() || info.index < IRQS);
        }
        Command::DeviceGetRegionInfo => {
            let info = wire::RegionInfo::parse(&reply[..wire::RegionInfo::SIZE.min(reply.len())])
                .expect("region info reply parses");
            assert!(recorder.is_none() || info.index < REGIONS);
            let caps = reply.len() - wire::RegionInfo::SIZE;
            assert!(caps == 0 || info.argsz as usize == reply.len());
        }
        Command::RegionRead => {
            let (a, data) = wire::RegionAccess::parse(reply).expect("read reply parses");
            assert_eq!(data.len(), a.count as usize);
            if let Some(backend) = recorder {
                assert_eq!(
                    Some(Access::Read(a.region, a.offset, a.count)),
                    backend.last
                );
                assert!(data
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == fill(a.offset, i)));
            }
        }
        Command::RegionWrite => {
            let (a, _) = wire::RegionAccess::parse(reply).expect("write reply parses");
            assert_eq!(reply.len(), wire::RegionAccess::SIZE);
            if let Some(backend) = recorder {
                assert_eq!(
                    Some(Access::Write(a.region, a.offset, a.count)),
                    backend.last
                );
            }
        }
        other => panic!("{other:?} is not supported but succeeded"),
    }
}

/// A file to pass as a descriptor (and to offer for mmap).
fn null() -> &'static Arc<File> {
    static NULL: OnceLock<Arc<File>> = OnceLock::new();
    NULL.get_or_init(|| Arc::new(File::open("/dev/null").expect("/dev/null")))
}

fn dup_null() -> File {
    null().try_clone().expect("dup /dev/null")
}

/// The byte a region read returns at `offset + i`.
fn fill(offset: u64, i: usize) -> u8 {
    (offset.wrapping_add(i as u64) % 251) as u8
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read(u32, u64, u32),
    Write(u32, u64, u32),
}

/// A backend with nine 64 KiB regions and five IRQ indexes, DMA maps kept
/// in a list; it records the last region access.
#[derive(Debug, Default)]
struct Recorder {
    maps: Vec<(u64, u64)>,
    last: Option<Access>,
}

impl Recorder {
    fn region(&self, region: u32, offset: u64, len: usize) -> Result<(), Errno> {
        assert!(len <= wire::MAX_DATA_XFER as usize, "access of {len} bytes");
        let end = offset.checked_add(len as u64);
        if region >= REGIONS || end.is_none_or(|end| end > 1 << 16) {
            return Err(Errno::inval("outside the region"));
        }
        Ok(())
    }
}

impl Backend for Recorder {
    fn device_info(&self) -> wire::DeviceInfo {
        wire::DeviceInfo {
            flags: wire::DEVICE_FLAGS_RESET | wire::DEVICE_FLAGS_PCI,
            num_regions: REGIONS,
            num_irqs: IRQS,
        }
    }

    fn region_info(&self, index: u32) -> Result<wire::RegionInfo, Errno> {
        if index >= REGIONS {
            return Err(Errno::inval("no such region"));
        }
        Ok(wire::RegionInfo {
            flags: wire::REGION_FLAG_READ | wire::REGION_FLAG_WRITE,
            size: 1 << 16,
            ..Default::default()
        })
    }

    fn irq_info(&self, index: u32) -> Result<wire::IrqInfo, Errno> {
        if index >= IRQS {
            return Err(Errno::inval("no such IRQ index"));
        }
        Ok(wire::IrqInfo {
            flags: wire::IRQ_INFO_EVENTFD,
            count: 1,
            ..Default::default()
        })
    }

    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> Result<(), Errno> {
        self.region(region, offset, data.len())?;
        for (i, b) in data.iter_mut().enumerate() {
            *b = fill(offset, i);
        }
        self.last = Some(Access::Read(region, offset, data.len() as u32));
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> Result<(), Errno> {
        self.region(region, offset, data.len())?;
        self.last = Some(Access::Write(region, offset, data.len() as u32));
        Ok(())
    }

    fn dma_map(&mut self, map: &wire::DmaMap, _fd: Option<File>) -> Result<(), Errno> {
        let end = map
            .address
            .checked_add(map.size)
            .filter(|_| map.size > 0)
            .ok_or_else(|| Errno::inval("bad DMA range"))?;
        if self.maps.iter().any(|&(a, e)| map.address < e && a < end) {
            return Err(Errno::new(libc::EEXIST, "overlap"));
        }
        if self.maps.len() < 64 {
            self.maps.push((map.address, end));
        }
        Ok(())
    }

    fn dma_unmap(&mut self, unmap: &wire::DmaUnmap) -> Result<(), Errno> {
        if unmap.flags & wire::DMA_UNMAP_FLAG_ALL != 0 {
            self.maps.clear();
            return Ok(());
        }
        let end = unmap.address.wrapping_add(unmap.size);
        let before = self.maps.len();
        self.maps.retain(|&(a, e)| (a, e) != (unmap.address, end));
        if self.maps.len() == before {
            return Err(Errno::inval("no such mapping"));
        }
        Ok(())
    }

    fn set_irqs(&mut self, _req: &wire::SetIrqs, fds: Vec<File>) -> Result<(), Errno> {
        assert!(fds.len() <= wire::MAX_MSG_FDS);
        Ok(())
    }

    fn reset(&mut self) -> Result<(), Errno> {
        self.maps.clear();
        Ok(())
    }

    fn disconnected(&mut self) {}

    fn region_mmap(&self, index: u32) -> Option<RegionMmap> {
        (index == 0).then(|| RegionMmap {
            file: null().clone(),
            areas: vec![(0, 4096), (8192, 4096)],
        })
    }
}
