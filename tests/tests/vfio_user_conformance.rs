//! vfio-user conformance: the harness drives the server the way QEMU does,
//! and sends malformed messages whose exact errno is checked. After every
//! bad message the server must still answer.

use std::os::fd::AsRawFd;
use std::time::Duration;

use ibtca_device::regs;
use ibtca_tests::*;

const BAR0: u32 = 0;
const BAR1: u32 = 1;

fn still_alive(c: &mut Client) {
    assert_eq!(
        c.read32(BAR0, regs::MAGIC),
        regs::MAGIC_VALUE,
        "server stopped answering"
    );
}

#[test]
fn version_negotiation() {
    let s = TestServer::start();
    let mut c = Client::connect_raw(&s.socket).unwrap();
    let r = c.version(r#"{"capabilities":{"max_msg_fds":8}}"#).ok();
    assert_eq!(&r[0..4], &[0, 0, 0, 0], "version 0.0");
    assert_eq!(*r.last().unwrap(), 0, "NUL-terminated");
    let json: serde_json::Value = serde_json::from_slice(&r[4..r.len() - 1]).unwrap();
    assert_eq!(json["capabilities"]["max_data_xfer_size"], 1 << 20);
    assert_eq!(json["capabilities"]["max_msg_fds"], 16);
    assert!(
        r.len() < 200,
        "QEMU reads the reply into a buffer the size of its request"
    );
}

#[test]
fn version_errors() {
    let s = TestServer::start();
    let mut c = Client::connect_raw(&s.socket).unwrap();
    // Anything before VERSION.
    let r = c.request(
        cmd::DEVICE_GET_INFO,
        &[16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    assert_eq!(r.errno(), Some(libc::EINVAL));
    // Major version 1.
    let r = c.request(cmd::VERSION, b"\x01\x00\x00\x00{}\0");
    assert_eq!(r.errno(), Some(libc::ENOTSUP));
    // No NUL, bad JSON, short.
    assert_eq!(
        c.request(cmd::VERSION, b"\0\0\0\0{}").errno(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        c.request(cmd::VERSION, b"\0\0\0\0{oops\0").errno(),
        Some(libc::EINVAL)
    );
    assert_eq!(c.request(cmd::VERSION, b"\0\0").errno(), Some(libc::EINVAL));
    // And then a good one.
    assert!(c.version("{}").errno().is_none());
    still_alive(&mut c);
}

#[test]
fn device_region_and_irq_info() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(
        c.device_info(),
        (2 | 1, 9, 5),
        "PCI|RESET, 9 regions, 5 IRQ indexes"
    );
    assert_eq!(c.region_flags_size(0), (3, regs::REGS_BAR_SIZE));
    assert_eq!(c.region_flags_size(1), (3, regs::MSIX_BAR_SIZE));
    assert_eq!(c.region_flags_size(2), (3, 128 * 1024), "DRDMA window");
    assert_eq!(
        c.region_flags_size(regs::DB_BAR),
        (3, u64::from(regs::DB_PAGES) * regs::DB_PAGE_SIZE),
        "doorbell pages: read/write, trapped (no MMAP flag)"
    );
    for absent in [3, 5, 6, 8] {
        assert_eq!(c.region_flags_size(absent), (0, 0), "region {absent}");
    }
    assert_eq!(c.region_flags_size(CONFIG), (3, 4096));
    assert_eq!(c.region_info(9).errno(), Some(libc::EINVAL));
    assert_eq!(c.region_info(u32::MAX).errno(), Some(libc::EINVAL));
    // argsz smaller than the struct.
    let mut p = 16u32.to_le_bytes().to_vec();
    p.resize(32, 0);
    assert_eq!(
        c.request(cmd::DEVICE_GET_REGION_INFO, &p).errno(),
        Some(libc::EINVAL)
    );

    assert_eq!(
        c.irq_info(irq::MSIX).unwrap().1,
        u32::from(regs::MSIX_VECTORS)
    );
    assert_eq!(c.irq_info(0).unwrap().1, 0, "no INTx");
    assert_eq!(c.irq_info(3).unwrap().1, 1, "ERR index");
    assert_eq!(c.irq_info(5), Err(libc::EINVAL));
    still_alive(&mut c);
}

#[test]
fn config_space_reads_like_qemu_and_sizes_bars() {
    let s = TestServer::start();
    let mut c = s.client();
    // QEMU reads the whole space in one access.
    let cfg = c.read(CONFIG, 0, 4096).unwrap();
    assert_eq!(u16::from_le_bytes([cfg[0], cfg[1]]), regs::PCI_VENDOR_ID);
    assert_eq!(u16::from_le_bytes([cfg[2], cfg[3]]), regs::PCI_DEVICE_ID);
    assert_eq!(
        [cfg[0xb], cfg[0xa], cfg[0x9]],
        [0x0c, 0x06, 0x00],
        "InfiniBand controller"
    );
    assert_eq!(cfg[0x3d], 0, "no INTx pin");
    assert_ne!(cfg[6] & 0x10, 0, "capability list");
    // Walk the capabilities: PCIe then MSI-X.
    let mut caps = vec![];
    let mut p = cfg[0x34] as usize;
    while p != 0 {
        caps.push((cfg[p], p));
        p = cfg[p + 1] as usize;
    }
    assert_eq!(caps.iter().map(|c| c.0).collect::<Vec<_>>(), [0x10, 0x11]);
    let msix = caps[1].1;
    let table = u32::from_le_bytes(cfg[msix + 4..msix + 8].try_into().unwrap());
    let pba = u32::from_le_bytes(cfg[msix + 8..msix + 12].try_into().unwrap());
    assert_eq!(table, regs::MSIX_BAR, "table at offset 0 of BAR1");
    assert_eq!(pba, regs::MSIX_PBA_OFFSET as u32 | regs::MSIX_BAR);
    // BAR sizing.
    c.write32(CONFIG, 0x10, 0xffff_ffff);
    assert_eq!(c.read32(CONFIG, 0x10), !(regs::REGS_BAR_SIZE as u32 - 1));
    c.write32(CONFIG, 0x14, 0xffff_ffff);
    assert_eq!(c.read32(CONFIG, 0x14), !(regs::MSIX_BAR_SIZE as u32 - 1));
    c.write32(CONFIG, 0x18, 0xffff_ffff);
    assert_eq!(
        c.read32(CONFIG, 0x18),
        !(128 * 1024 - 1),
        "DRDMA window BAR2"
    );
    c.write32(CONFIG, 0x1c, 0xffff_ffff);
    assert_eq!(c.read32(CONFIG, 0x1c), 0);
    c.write32(CONFIG, 0x20, 0xffff_ffff);
    assert_eq!(
        c.read32(CONFIG, 0x20),
        !((u64::from(regs::DB_PAGES) * regs::DB_PAGE_SIZE) as u32 - 1),
        "doorbell BAR4"
    );
    c.write32(CONFIG, 0x30, 0xffff_f800);
    assert_eq!(c.read32(CONFIG, 0x30), 0, "no expansion ROM");
    // Read-only IDs.
    c.write32(CONFIG, 0, 0);
    assert_eq!(c.read32(CONFIG, 0), 0x7ca0_1234);
    // Odd sizes and alignments are served as vfio-pci serves them (split
    // into aligned pieces): the same bytes as the whole-space read.
    assert_eq!(c.read(CONFIG, 1, 2).unwrap(), cfg[1..3], "misaligned word");
    assert_eq!(c.read(CONFIG, 0, 3).unwrap(), cfg[0..3], "3 bytes");
    assert_eq!(c.read(CONFIG, 0x3d, 7).unwrap(), cfg[0x3d..0x44]);
    // An 8-byte write over BAR0 and BAR1 sizes both.
    c.write(CONFIG, 0x10, &[0xff; 8]).unwrap();
    assert_eq!(c.read32(CONFIG, 0x10), !(regs::REGS_BAR_SIZE as u32 - 1));
    assert_eq!(c.read32(CONFIG, 0x14), !(regs::MSIX_BAR_SIZE as u32 - 1));
    assert_eq!(c.read(CONFIG, 4094, 4), Err(libc::EINVAL), "past the end");
    assert_eq!(c.read(CONFIG, 4096, 1), Err(libc::EINVAL));
    still_alive(&mut c);
}

#[test]
fn bar0_registers_and_access_rules() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.read32(BAR0, regs::MAGIC), regs::MAGIC_VALUE);
    assert_eq!(c.read32(BAR0, regs::VERSION), regs::VERSION_VALUE);
    assert_eq!(
        c.read32(BAR0, regs::NUM_VECTORS),
        u32::from(regs::MSIX_VECTORS)
    );
    assert_eq!(c.read32(BAR0, regs::PORT_STATE), regs::PORT_DOWN);
    c.write32(BAR0, regs::SCRATCH, 0x1234_5678);
    assert_eq!(c.read32(BAR0, regs::SCRATCH), 0x1234_5678);
    // A posted write (QEMU's default for BARs) is applied before the next read.
    c.post_write(BAR0, regs::SCRATCH, &0xcafe_f00du32.to_le_bytes());
    assert_eq!(c.read32(BAR0, regs::SCRATCH), 0xcafe_f00d);
    // 8-byte access covers two registers.
    let d = c.read(BAR0, regs::MAGIC, 8).unwrap();
    assert_eq!(
        u64::from_le_bytes(d.try_into().unwrap()),
        u64::from(regs::VERSION_VALUE) << 32 | u64::from(regs::MAGIC_VALUE)
    );
    // Refused: sizes, alignment, outside BAR, absent BAR, writes to RO.
    assert_eq!(c.read(BAR0, regs::SCRATCH, 2), Err(libc::EINVAL));
    assert_eq!(c.read(BAR0, 2, 4), Err(libc::EINVAL));
    assert_eq!(c.read(BAR0, regs::REGS_BAR_SIZE, 4), Err(libc::EINVAL));
    assert_eq!(c.read(BAR0, regs::REGS_BAR_SIZE - 2, 4), Err(libc::EINVAL));
    assert_eq!(c.read(BAR0, u64::MAX - 1, 4), Err(libc::EINVAL));
    assert_eq!(c.read(3, 0, 4), Err(libc::EINVAL));
    assert_eq!(c.read(9, 0, 4), Err(libc::EINVAL));
    // A load from a free DRDMA range is refused by its ARR, not by vfio-user:
    // all-ones and a DRDMA error.
    assert_eq!(c.read(2, 0, 4), Ok(vec![0xff; 4]));
    assert_eq!(c.read32(BAR0, regs::DRDMA_ERRORS), 1);
    assert_eq!(c.write(BAR0, regs::SCRATCH, &[1]), Err(libc::EINVAL));
    c.write32(BAR0, regs::MAGIC, 0);
    // Size/alignment faults and writes to read-only registers inside BAR0
    // are counted; accesses outside a region never reach a register.
    assert_eq!(
        c.read32(BAR0, regs::ERROR_COUNT),
        4,
        "refused BAR0 accesses are counted"
    );
    assert_eq!(
        c.read32(BAR0, regs::SCRATCH),
        0xcafe_f00d,
        "nothing else changed"
    );
    // Reset register and DEVICE_RESET clear state.
    c.write32(BAR0, regs::RESET, regs::RESET_VALUE);
    assert_eq!(c.read32(BAR0, regs::SCRATCH), 0);
    c.write32(BAR0, regs::SCRATCH, 7);
    c.enable_bus_master();
    assert!(c.request(cmd::DEVICE_RESET, &[]).errno().is_none());
    assert_eq!(c.read32(BAR0, regs::SCRATCH), 0);
    assert_eq!(
        c.read32(CONFIG, 4) & 0xffff,
        0,
        "function reset clears the command register"
    );
    assert_eq!(
        c.request(cmd::DEVICE_RESET, &[0]).errno(),
        Some(libc::EINVAL)
    );
}

fn dma_test(c: &mut Client, addr: u64, len: u32, cmd: u32, seed: u32) -> (u32, u32) {
    c.write32(BAR0, regs::DMA_ADDR_LO, addr as u32);
    c.write32(BAR0, regs::DMA_ADDR_HI, (addr >> 32) as u32);
    c.write32(BAR0, regs::DMA_LEN, len);
    c.write32(BAR0, regs::DMA_SEED, seed);
    c.write32(BAR0, regs::DMA_CMD, cmd);
    (
        c.read32(BAR0, regs::DMA_STATUS),
        c.read32(BAR0, regs::DMA_RESULT),
    )
}

fn fnv(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[test]
fn dma_map_memfd_and_device_writes_guest_memory() {
    let s = TestServer::start();
    let mut c = s.client();
    let ram = GuestRam::new(4 << 20);
    // Guest RAM at 1 GiB, memfd offset 0; a second map from offset 2 MiB.
    c.dma_map(0x4000_0000, 2 << 20, Some(&ram.file), 0).unwrap();
    c.dma_map(0x8000_0000, 2 << 20, Some(&ram.file), 2 << 20)
        .unwrap();
    assert_eq!(
        c.read32(BAR0, regs::STATUS) & regs::STATUS_DMA_MAPPED,
        regs::STATUS_DMA_MAPPED
    );
    // Without Bus Master the device must not DMA.
    assert_eq!(
        dma_test(&mut c, 0x4000_1000, 4096, regs::DMA_CMD_FILL, 0x5a).0,
        regs::DMA_ST_FAULT
    );
    assert_eq!(ram.read(0x1000, 4), [0; 4]);
    c.enable_bus_master();
    assert_eq!(
        dma_test(&mut c, 0x4000_1000, 4096, regs::DMA_CMD_FILL, 0x5a).0,
        regs::DMA_ST_OK
    );
    let want: Vec<u8> = (0..4096u32).map(|i| (0x5a + i) as u8).collect();
    assert_eq!(ram.read(0x1000, 4096), want, "bytes landed in the memfd");
    // Second map lands at its file offset.
    assert_eq!(
        dma_test(&mut c, 0x8000_0010, 16, regs::DMA_CMD_FILL, 1).0,
        regs::DMA_ST_OK
    );
    assert_eq!(ram.read((2 << 20) + 0x10, 2), [1, 2]);
    // Device reads what the guest wrote.
    ram.write(0x3000, b"guest data for the device");
    let (st, sum) = dma_test(&mut c, 0x4000_3000, 25, regs::DMA_CMD_SUM, 0);
    assert_eq!(
        (st, sum),
        (regs::DMA_ST_OK, fnv(b"guest data for the device"))
    );
    // Outside every map, straddling the end, huge length, bad command.
    assert_eq!(
        dma_test(&mut c, 0x1000, 16, regs::DMA_CMD_FILL, 0).0,
        regs::DMA_ST_FAULT
    );
    assert_eq!(
        dma_test(&mut c, 0x4020_0000 - 8, 16, regs::DMA_CMD_FILL, 0).0,
        regs::DMA_ST_FAULT
    );
    assert_eq!(
        ram.read((2 << 20) - 8, 8),
        [0; 8],
        "no partial write at the edge"
    );
    assert_eq!(
        dma_test(&mut c, u64::MAX - 4, 16, regs::DMA_CMD_SUM, 0).0,
        regs::DMA_ST_FAULT
    );
    assert_eq!(
        dma_test(
            &mut c,
            0x4000_0000,
            regs::DMA_TEST_MAX + 1,
            regs::DMA_CMD_FILL,
            0
        )
        .0,
        regs::DMA_ST_INVALID
    );
    assert_eq!(
        dma_test(&mut c, 0x4000_0000, 16, 99, 0).0,
        regs::DMA_ST_INVALID
    );
    still_alive(&mut c);
}

/// A client that shrinks the memfd it mapped as guest memory (QEMU seals
/// its own; this one does not) makes the device's next DMA there fail, not
/// kill the device with SIGBUS; the client can map fresh memory and go on.
#[test]
fn a_client_shrinking_its_memory_gets_dma_errors_not_a_dead_device() {
    let s = TestServer::start();
    let mut c = s.client();
    c.enable_bus_master();
    let ram = GuestRam::new(1 << 20);
    c.dma_map(0x4000_0000, 1 << 20, Some(&ram.file), 0).unwrap();
    assert_eq!(
        dma_test(&mut c, 0x4000_1000, 4096, regs::DMA_CMD_FILL, 1).0,
        regs::DMA_ST_OK
    );
    ram.file.set_len(0).unwrap();
    for cmd in [regs::DMA_CMD_FILL, regs::DMA_CMD_SUM] {
        assert_eq!(
            dma_test(&mut c, 0x4000_2000, 4096, cmd, 2).0,
            regs::DMA_ST_FAULT,
            "DMA into the shrunk map (command {cmd})"
        );
    }
    still_alive(&mut c);
    c.dma_unmap(0x4000_0000, 1 << 20, 0).unwrap();
    let fresh = GuestRam::new(1 << 20);
    c.dma_map(0x4000_0000, 1 << 20, Some(&fresh.file), 0)
        .unwrap();
    assert_eq!(
        dma_test(&mut c, 0x4000_2000, 16, regs::DMA_CMD_FILL, 3).0,
        regs::DMA_ST_OK
    );
    assert_eq!(fresh.read(0x2000, 2), [3, 4], "bytes landed in the new map");
}

/// The VERSION reply offers `max_dma_maps`, and the device holds to it.
#[test]
fn dma_maps_are_bounded_by_what_the_version_reply_offers() {
    let s = TestServer::start();
    let mut c = Client::connect_raw(&s.socket).unwrap();
    let r = c.version(r#"{"capabilities":{"max_msg_fds":8}}"#).ok();
    let json: serde_json::Value = serde_json::from_slice(&r[4..r.len() - 1]).unwrap();
    let max = json["capabilities"]["max_dma_maps"].as_u64().unwrap();
    assert_eq!(max, 1024);
    for i in 0..max {
        c.dma_map(i << 12, 4096, None, 0).unwrap();
    }
    assert_eq!(c.dma_map(max << 12, 4096, None, 0), Err(libc::ENOSPC));
    c.dma_unmap(0, 4096, 0).unwrap();
    c.dma_map(max << 12, 4096, None, 0).unwrap();
    still_alive(&mut c);
}

#[test]
fn dma_map_errors_and_partial_unmap() {
    let s = TestServer::start();
    let mut c = s.client();
    c.enable_bus_master();
    let ram = GuestRam::new(1 << 20);
    c.dma_map(0x10_0000, 1 << 20, Some(&ram.file), 0).unwrap();
    assert_eq!(
        c.dma_map(0x18_0000, 0x1000, Some(&ram.file), 0),
        Err(libc::EEXIST),
        "overlap"
    );
    assert_eq!(
        c.dma_map(0x0f_f000, 0x2000, Some(&ram.file), 0),
        Err(libc::EEXIST),
        "overlap at start"
    );
    assert_eq!(
        c.dma_map(0x40_0000, 0, Some(&ram.file), 0),
        Err(libc::EINVAL),
        "zero size"
    );
    assert_eq!(
        c.dma_map(0x40_0000, 2 << 20, Some(&ram.file), 0),
        Err(libc::EINVAL),
        "past end of memfd"
    );
    assert_eq!(
        c.dma_map(u64::MAX - 0xfff, 0x2000, None, 0),
        Err(libc::EINVAL),
        "wraps"
    );
    // Two fds.
    let mut p = Vec::new();
    for v in [32u32, 3] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    for v in [0u64, 0x50_0000, 0x1000] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    let r = c.request_with_fds(
        cmd::DMA_MAP,
        &p,
        &[ram.file.as_raw_fd(), ram.file.as_raw_fd()],
    );
    assert_eq!(r.errno(), Some(libc::EINVAL));
    // Wrong argsz and wrong size.
    let mut bad = p.clone();
    bad[0] = 24;
    assert_eq!(c.request(cmd::DMA_MAP, &bad).errno(), Some(libc::EINVAL));
    assert_eq!(
        c.request(cmd::DMA_MAP, &p[..24]).errno(),
        Some(libc::EINVAL)
    );
    // A map without fd (ROM, or RAM without share=on) is accepted but unreachable.
    c.dma_map(0x60_0000, 0x1000, None, 0).unwrap();
    assert_eq!(
        dma_test(&mut c, 0x60_0000, 16, regs::DMA_CMD_FILL, 0).0,
        regs::DMA_ST_FAULT
    );
    // Unmap a hole in the middle, as QEMU does around PAM.
    c.dma_unmap(0x14_0000, 0x4_0000, 0).unwrap();
    assert_eq!(
        dma_test(&mut c, 0x14_0000, 16, regs::DMA_CMD_FILL, 3).0,
        regs::DMA_ST_FAULT
    );
    assert_eq!(ram.read(0x4_0000, 16), [0; 16]);
    assert_eq!(
        dma_test(&mut c, 0x18_0000, 4, regs::DMA_CMD_FILL, 3).0,
        regs::DMA_ST_OK
    );
    assert_eq!(
        ram.read(0x8_0000, 4),
        [3, 4, 5, 6],
        "tail keeps its file offset"
    );
    // Map into the hole again, then unmap everything.
    c.dma_map(0x14_0000, 0x4_0000, Some(&ram.file), 0x4_0000)
        .unwrap();
    assert_eq!(
        dma_test(&mut c, 0x14_0000, 2, regs::DMA_CMD_FILL, 9).0,
        regs::DMA_ST_OK
    );
    assert_eq!(ram.read(0x4_0000, 2), [9, 10]);
    assert_eq!(c.dma_unmap(0, 0, 1), Err(libc::ENOTSUP), "dirty bitmap");
    assert_eq!(
        c.dma_unmap(0x1000, 0x1000, 2),
        Err(libc::EINVAL),
        "ALL with a range"
    );
    assert_eq!(c.dma_unmap(0, 0, 0), Err(libc::EINVAL), "zero size");
    c.dma_unmap(0, 0, 2).unwrap();
    assert_eq!(
        dma_test(&mut c, 0x18_0000, 4, regs::DMA_CMD_FILL, 3).0,
        regs::DMA_ST_FAULT
    );
    assert_eq!(c.read32(BAR0, regs::STATUS) & regs::STATUS_DMA_MAPPED, 0);
}

fn setup_msix(c: &mut Client, vector: u32) -> vmm_sys_util::eventfd::EventFd {
    let e = eventfd();
    c.set_irqs(
        irq::MSIX,
        irq::DATA_EVENTFD | irq::ACTION_TRIGGER,
        vector,
        1,
        &[],
        &[e.as_raw_fd()],
    )
    .unwrap();
    e
}

fn pba(c: &mut Client) -> u64 {
    u64::from_le_bytes(
        c.read(BAR1, regs::MSIX_PBA_OFFSET, 8)
            .unwrap()
            .try_into()
            .unwrap(),
    )
}

#[test]
fn msix_interrupt_round_trip() {
    let s = TestServer::start();
    let mut c = s.client();
    let e = setup_msix(&mut c, 3);
    // MSI-X disabled in the capability: nothing is delivered or held.
    c.write32(BAR0, regs::IRQ_TEST, 3);
    assert_eq!(wait_eventfd(&e, Duration::from_millis(50)), None);
    assert_eq!(pba(&mut c), 0);
    c.enable_msix();
    c.write32(BAR0, regs::IRQ_TEST, 3);
    assert_eq!(wait_eventfd(&e, Duration::from_secs(5)), Some(1));
    assert_eq!(c.read32(BAR0, regs::IRQ_TEST_COUNT), 2);
    // Posted IRQ_TEST (the guest's writel) works the same.
    c.post_write(BAR0, regs::IRQ_TEST, &3u32.to_le_bytes());
    assert_eq!(wait_eventfd(&e, Duration::from_secs(5)), Some(1));
    // A vector that does not exist is counted as an error.
    let errs = c.read32(BAR0, regs::ERROR_COUNT);
    c.write32(BAR0, regs::IRQ_TEST, 32);
    assert_eq!(c.read32(BAR0, regs::ERROR_COUNT), errs + 1);
    // SET_IRQS trigger from the client side.
    c.set_irqs(
        irq::MSIX,
        irq::DATA_NONE | irq::ACTION_TRIGGER,
        3,
        1,
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(wait_eventfd(&e, Duration::from_secs(5)), Some(1));
    // De-assign (EVENTFD with no fds), then nothing arrives.
    c.set_irqs(
        irq::MSIX,
        irq::DATA_EVENTFD | irq::ACTION_TRIGGER,
        3,
        1,
        &[],
        &[],
    )
    .unwrap();
    c.write32(BAR0, regs::IRQ_TEST, 3);
    assert_eq!(wait_eventfd(&e, Duration::from_millis(50)), None);
}

/// A client's interrupt triggers must be eventfds: a pipe nobody reads, a
/// directory or a memfd is refused with EINVAL and changes nothing, and an
/// eventfd whose counter the client filled costs interrupts, never the
/// device's request thread.
#[test]
fn interrupt_triggers_must_be_eventfds_and_never_block_the_device() {
    use std::os::fd::FromRawFd;
    let s = TestServer::start();
    let mut c = s.client();
    let good = setup_msix(&mut c, 0);
    c.enable_msix();
    let mut p = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `p`.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh descriptors, each owned by one File.
    let (_r, w) = unsafe {
        (
            std::fs::File::from_raw_fd(p[0]),
            std::fs::File::from_raw_fd(p[1]),
        )
    };
    let dir = std::fs::File::open("/").unwrap();
    let ram = GuestRam::new(4096);
    let trig = irq::DATA_EVENTFD | irq::ACTION_TRIGGER;
    for (what, fd) in [
        ("pipe", w.as_raw_fd()),
        ("directory", dir.as_raw_fd()),
        ("memfd", ram.file.as_raw_fd()),
    ] {
        assert_eq!(
            c.set_irqs(irq::MSIX, trig, 0, 1, &[], &[fd]),
            Err(libc::EINVAL),
            "{what} as MSI-X trigger"
        );
        assert_eq!(
            c.set_irqs(irq::ERR, trig, 0, 1, &[], &[fd]),
            Err(libc::EINVAL),
            "{what} as error trigger"
        );
    }
    // Vector 0 still has the eventfd it had.
    c.write32(BAR0, regs::IRQ_TEST, 0);
    assert_eq!(wait_eventfd(&good, Duration::from_secs(5)), Some(1));
    // A blocking eventfd whose counter the client fills to the top: the
    // device's write would block forever unless it made it non-blocking.
    let full = vmm_sys_util::eventfd::EventFd::new(0).unwrap();
    c.set_irqs(irq::MSIX, trig, 1, 1, &[], &[full.as_raw_fd()])
        .unwrap();
    full.write(u64::MAX - 1).unwrap();
    for _ in 0..100 {
        c.write32(BAR0, regs::IRQ_TEST, 1);
    }
    assert_eq!(c.read32(BAR0, regs::IRQ_TEST_COUNT), 101);
    assert_eq!(full.read().unwrap(), u64::MAX - 1, "nothing was added");
    still_alive(&mut c);
}

#[test]
fn msix_masking_and_pba() {
    let s = TestServer::start();
    let mut c = s.client();
    let e = setup_msix(&mut c, 5);
    c.enable_msix();
    // SET_IRQS mask: held pending, PBA bit 5 set; unmask delivers it.
    c.set_irqs(irq::MSIX, irq::DATA_NONE | irq::ACTION_MASK, 5, 1, &[], &[])
        .unwrap();
    c.write32(BAR0, regs::IRQ_TEST, 5);
    assert_eq!(wait_eventfd(&e, Duration::from_millis(50)), None);
    assert_eq!(pba(&mut c), 1 << 5);
    c.set_irqs(
        irq::MSIX,
        irq::DATA_NONE | irq::ACTION_UNMASK,
        5,
        1,
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(wait_eventfd(&e, Duration::from_secs(5)), Some(1));
    assert_eq!(pba(&mut c), 0);
    // Table vector-control mask (for clients that do not shadow the table).
    c.write32(BAR1, 5 * 16 + 12, 1);
    c.write32(BAR0, regs::IRQ_TEST, 5);
    assert_eq!(wait_eventfd(&e, Duration::from_millis(50)), None);
    assert_eq!(pba(&mut c), 1 << 5);
    c.write32(BAR1, 5 * 16 + 12, 0);
    assert_eq!(wait_eventfd(&e, Duration::from_secs(5)), Some(1));
    // Function mask in the capability.
    c.write(CONFIG, 0x82, &0xc000u16.to_le_bytes()).unwrap();
    c.write32(BAR0, regs::IRQ_TEST, 5);
    assert_eq!(wait_eventfd(&e, Duration::from_millis(50)), None);
    c.write(CONFIG, 0x82, &0x8000u16.to_le_bytes()).unwrap();
    assert_eq!(wait_eventfd(&e, Duration::from_secs(5)), Some(1));
    // Table entries read back; PBA writes are ignored.
    c.write32(BAR1, 16 * 2, 0xfee0_1000);
    assert_eq!(c.read32(BAR1, 16 * 2), 0xfee0_1000);
    c.write(BAR1, regs::MSIX_PBA_OFFSET, &u64::MAX.to_le_bytes())
        .unwrap();
    assert_eq!(pba(&mut c), 0);
    assert_eq!(
        c.read(BAR1, 2, 4),
        Err(libc::EINVAL),
        "misaligned table access"
    );
}

#[test]
fn set_irqs_errors() {
    let s = TestServer::start();
    let mut c = s.client();
    let e1 = eventfd();
    let e2 = eventfd();
    let fds = [e1.as_raw_fd(), e2.as_raw_fd()];
    let trig = irq::DATA_EVENTFD | irq::ACTION_TRIGGER;
    assert_eq!(
        c.set_irqs(irq::MSIX, trig, 0, 1, &[], &fds),
        Err(libc::EINVAL),
        "2 fds for 1 vector"
    );
    assert_eq!(
        c.set_irqs(irq::MSIX, trig, 31, 2, &[], &fds),
        Err(libc::EINVAL),
        "past the table"
    );
    assert_eq!(
        c.set_irqs(irq::MSIX, trig, u32::MAX, 2, &[], &fds),
        Err(libc::EINVAL),
        "wraps"
    );
    assert_eq!(
        c.set_irqs(9, trig, 0, 1, &[], &fds[..1]),
        Err(libc::EINVAL),
        "bad index"
    );
    assert_eq!(
        c.set_irqs(
            irq::MSIX,
            irq::DATA_NONE | irq::DATA_EVENTFD | irq::ACTION_TRIGGER,
            0,
            1,
            &[],
            &[]
        ),
        Err(libc::EINVAL),
        "two data types"
    );
    assert_eq!(
        c.set_irqs(irq::MSIX, irq::DATA_NONE, 0, 1, &[], &[]),
        Err(libc::EINVAL),
        "no action"
    );
    assert_eq!(
        c.set_irqs(
            irq::MSIX,
            irq::DATA_NONE | irq::ACTION_TRIGGER,
            0,
            1,
            &[],
            &fds[..1]
        ),
        Err(libc::EINVAL),
        "fd with DATA_NONE"
    );
    assert_eq!(
        c.set_irqs(
            irq::MSIX,
            irq::DATA_BOOL | irq::ACTION_TRIGGER,
            0,
            2,
            &[1],
            &[]
        ),
        Err(libc::EINVAL),
        "short bool data"
    );
    assert_eq!(
        c.set_irqs(0, trig, 0, 1, &[], &fds[..1]),
        Err(libc::EINVAL),
        "INTx has no vectors"
    );
    // Disable-all on any index is fine; DATA_BOOL works.
    c.set_irqs(0, irq::DATA_NONE | irq::ACTION_TRIGGER, 0, 0, &[], &[])
        .unwrap();
    c.set_irqs(irq::MSIX, trig, 0, 2, &[], &fds).unwrap();
    c.enable_msix();
    c.set_irqs(
        irq::MSIX,
        irq::DATA_BOOL | irq::ACTION_TRIGGER,
        0,
        2,
        &[0, 1],
        &[],
    )
    .unwrap();
    assert_eq!(wait_eventfd(&e2, Duration::from_secs(5)), Some(1));
    assert_eq!(e1.read().ok(), None);
    c.set_irqs(
        irq::MSIX,
        irq::DATA_NONE | irq::ACTION_TRIGGER,
        0,
        0,
        &[],
        &[],
    )
    .unwrap();
    c.write32(BAR0, regs::IRQ_TEST, 1);
    assert_eq!(
        wait_eventfd(&e2, Duration::from_millis(50)),
        None,
        "disabled"
    );
    still_alive(&mut c);
}

#[test]
fn malformed_messages_get_exact_errors() {
    let s = TestServer::start();
    let mut c = s.client();
    // Unknown and unsupported commands.
    assert_eq!(c.request(99, &[]).errno(), Some(libc::ENOSYS));
    assert_eq!(c.request(0, &[]).errno(), Some(libc::ENOSYS));
    assert_eq!(
        c.request(cmd::DMA_READ, &[0; 16]).errno(),
        Some(libc::ENOTSUP)
    );
    // Wrong payload sizes.
    assert_eq!(
        c.request(cmd::DEVICE_GET_INFO, &[16, 0, 0, 0]).errno(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        c.request(cmd::DEVICE_GET_REGION_INFO, &[0; 31]).errno(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        c.request(cmd::DEVICE_GET_IRQ_INFO, &[0; 8]).errno(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        c.request(cmd::DEVICE_SET_IRQS, &[0; 12]).errno(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        c.request(cmd::REGION_READ, &[0; 15]).errno(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        c.request(cmd::DMA_UNMAP, &[0; 40]).errno(),
        Some(libc::EINVAL)
    );
    // REGION_READ with data, REGION_WRITE whose count disagrees with its data.
    let mut p = Vec::new();
    p.extend_from_slice(&regs::SCRATCH.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&4u32.to_le_bytes());
    let mut rd = p.clone();
    rd.extend_from_slice(&[0; 4]);
    assert_eq!(c.request(cmd::REGION_READ, &rd).errno(), Some(libc::EINVAL));
    let mut wr = p.clone();
    wr.extend_from_slice(&[1, 2]);
    assert_eq!(
        c.request(cmd::REGION_WRITE, &wr).errno(),
        Some(libc::EINVAL)
    );
    // Huge transfers.
    assert_eq!(c.read(CONFIG, 0, (1 << 20) + 1), Err(libc::E2BIG));
    assert_eq!(c.read(BAR0, 0, u32::MAX), Err(libc::E2BIG));
    // A message type other than command.
    let mut raw = header(77, cmd::DEVICE_RESET, 16, 1);
    c.send_raw(&raw, &[]).unwrap();
    let r = c.recv().unwrap();
    assert_eq!((r.id, r.errno()), (77, Some(libc::EINVAL)));
    // fds on a command that takes none are refused (and closed).
    let e = eventfd();
    let r = c.request_with_fds(cmd::DEVICE_RESET, &[], &[e.as_raw_fd()]);
    assert_eq!(r.errno(), Some(libc::EINVAL));
    // A message larger than the server accepts: E2BIG, body skipped, stream in sync.
    raw = header(78, cmd::REGION_WRITE, (2 << 20) + 16, 0);
    raw.extend_from_slice(&vec![0xab; 2 << 20]);
    c.send_raw(&raw, &[]).unwrap();
    let r = c.recv().unwrap();
    assert_eq!((r.id, r.errno()), (78, Some(libc::E2BIG)));
    still_alive(&mut c);
    assert_eq!(
        c.read32(BAR0, regs::SCRATCH),
        0,
        "the skipped body was not applied"
    );
}

#[test]
fn no_reply_messages_never_get_replies() {
    let s = TestServer::start();
    let mut c = s.client();
    // Bad NO_REPLY messages: no reply may come back, or QEMU would misparse it.
    c.post(cmd::REGION_WRITE, &[0; 3]);
    c.post(99, &[]);
    c.post_write(BAR0, regs::REGS_BAR_SIZE, &[0; 4]);
    c.post(cmd::VERSION, b"\0\0\0\0{}\0");
    // The next reply is the one for this request.
    assert_eq!(c.read32(BAR0, regs::MAGIC), regs::MAGIC_VALUE);
}

#[test]
fn unframeable_header_drops_the_client_not_the_server() {
    let s = TestServer::start();
    let mut c = s.client();
    c.send_raw(&header(5, cmd::REGION_READ, 8, 0), &[]).unwrap();
    let r = c.recv().unwrap();
    assert_eq!((r.id, r.errno()), (5, Some(libc::EINVAL)));
    // The server closes this connection...
    let mut buf = [0u8; 1];
    use std::io::Read;
    assert_eq!(c.stream().read(&mut buf).unwrap(), 0, "connection closed");
    // ...and serves the next client.
    let mut c2 = s.client();
    still_alive(&mut c2);
    assert!(s.alive());
}

#[test]
fn random_messages_do_not_hurt_the_server() {
    let s = TestServer::start();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15u64);
    let mut next = move || rng.next_u64();
    for round in 0..20 {
        let mut c = s.client();
        for _ in 0..200 {
            let command = (next() % 17) as u16;
            if command == cmd::DEVICE_RESET && next() % 2 == 0 {
                continue;
            }
            let len = (next() % 64) as usize;
            let mut payload: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Keep some messages plausible so deeper paths run.
            if command == cmd::REGION_READ || command == cmd::REGION_WRITE {
                payload.resize(16, 0);
                payload[8] = (next() % 10) as u8;
                payload[12] = [1, 2, 4, 8][(next() % 4) as usize];
                payload[0] = (next() % 0x80) as u8 & !3;
                if command == cmd::REGION_WRITE {
                    payload.extend_from_slice(&vec![0; payload[12] as usize]);
                }
            }
            let r = c.request(command, &payload);
            assert_eq!(
                r.flags & 0xf,
                1,
                "round {round}: every command gets a reply"
            );
        }
        still_alive(&mut c);
    }
    assert!(s.alive());
}

#[test]
fn next_client_gets_a_clean_device() {
    let s = TestServer::start();
    let ram = GuestRam::new(1 << 20);
    {
        let mut c = s.client();
        c.enable_bus_master();
        c.dma_map(0x10_0000, 1 << 20, Some(&ram.file), 0).unwrap();
        c.write32(BAR0, regs::SCRATCH, 42);
        let _e = setup_msix(&mut c, 0);
    } // client vanishes without unmapping anything
    let mut c = s.client();
    assert_eq!(c.read32(BAR0, regs::SCRATCH), 0, "reset between clients");
    c.enable_bus_master();
    assert_eq!(
        dma_test(&mut c, 0x10_0000, 4, regs::DMA_CMD_FILL, 1).0,
        regs::DMA_ST_FAULT,
        "old maps dropped"
    );
    assert_eq!(ram.read(0, 4), [0; 4]);
}

#[test]
fn rust_vmm_vfio_user_client_interoperates() {
    // An independent client implementation (rust-vmm's vfio_user crate).
    let s = TestServer::start();
    let mut client = vfio_user::Client::new(&s.socket).expect("rust-vmm client negotiates");
    let mut magic = [0u8; 4];
    client.region_read(0, regs::MAGIC, &mut magic).unwrap();
    assert_eq!(u32::from_le_bytes(magic), regs::MAGIC_VALUE);
    client
        .region_write(0, regs::SCRATCH, &9u32.to_le_bytes())
        .unwrap();
    let mut v = [0u8; 4];
    client.region_read(0, regs::SCRATCH, &mut v).unwrap();
    assert_eq!(u32::from_le_bytes(v), 9);
    assert_eq!(client.region(7).map(|r| r.size), Some(4096));
    // (Client::resettable() is not checked: vfio_user 0.1.7 inverts the
    // RESET flag when it parses DEVICE_GET_INFO; device_region_and_irq_info
    // checks the flag on the wire.)
    client.reset().unwrap();
    client.region_read(0, regs::SCRATCH, &mut v).unwrap();
    assert_eq!(u32::from_le_bytes(v), 0);
}

#[test]
fn random_byte_streams_do_not_hurt_the_server() {
    // Not even framed: random sizes, truncated headers, garbage, then hang up.
    let s = TestServer::start();
    let mut rng = XorShift(0x2545_f491_4f6c_dd1du64);
    let mut next = move || rng.next_u64();
    for _ in 0..100 {
        let mut c = Client::connect(&s.socket).unwrap();
        let len = (next() % 300) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len >= 8 && next() % 2 == 0 {
            // A plausible command number and a size that may lie.
            bytes[2] = (next() % 16) as u8;
            bytes[3] = 0;
            bytes[4..8].copy_from_slice(&((next() % 400) as u32).to_le_bytes());
        }
        c.send_raw(&bytes, &[]).unwrap();
    }
    let mut c = s.client();
    still_alive(&mut c);
    assert!(s.alive());
}
