//! Page-list memory regions and fast registration between two devices,
//! driven through vfio-user by simulated guests (no QEMU): REG_MR with a
//! translation table of scattered 4 KiB pages, accesses that cross page
//! boundaries checked byte by byte in the pages themselves, pages and
//! tables outside guest memory, the page-count limits, and
//! IBTCA_WR_REG_MR / LOCAL_INV on an ALLOC_MR region.

use std::time::Duration;

use ibtca_device::verbs::abi::*;
use ibtca_device::verbs::translate::{MAX_MR_PAGES, MAX_TOTAL_MR_PAGES};
use ibtca_tests::fast_reg::{alloc_mr, reg_mr_wqe, FastReg};
use ibtca_tests::pair::{LinkedPair, PairOptions, ALL_ACCESS};
use ibtca_tests::sim_guest::{local_inv_wqe, recv_wqe, remote, send_wqe, CmdFailed, SimGuest};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(10);
/// Path MTU code of 1024 bytes (IBTCA_MTU_256 is 1, each step doubles).
const MTU_1024: u8 = 3;
const PAGE: u64 = 4096;
const EINVAL: u16 = libc::EINVAL as u16;
const EFAULT: u16 = libc::EFAULT as u16;
const ENOMEM: u16 = libc::ENOMEM as u16;
/// A 4 KiB-aligned guest-physical address far above the simulated RAM.
const UNMAPPED_PAGE: u64 = 0x10_0000_0000;

/// `n` pages of guest memory, none next to another, in a shuffled order.
fn scattered_pages(g: &mut SimGuest, n: usize) -> Vec<u64> {
    let mut pages: Vec<u64> = (0..n)
        .map(|_| {
            let p = g.alloc(PAGE, PAGE);
            g.alloc(PAGE, PAGE); // a gap
            p
        })
        .collect();
    pages.reverse();
    if n > 2 {
        pages.swap(0, n / 2);
    }
    pages
}

/// Writes a translation table of `pages`; returns its address.
fn write_table(g: &mut SimGuest, pages: &[u64]) -> u64 {
    let table = g.alloc(8 * pages.len().max(1) as u64, 8);
    let bytes: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
    g.write(table, &bytes);
    table
}

/// REG_MR in page-list form with the table at `table`.
#[allow(clippy::too_many_arguments)]
fn reg_table(
    g: &mut SimGuest,
    pd: u32,
    table: u64,
    npages: u32,
    first: u32,
    iova: u64,
    length: u64,
    access: u32,
) -> Result<(u32, u32), CmdFailed> {
    let p = CmdRegMr {
        pdn: pd.into(),
        access: access.into(),
        iova: iova.into(),
        length: length.into(),
        gpa: table.into(),
        npages: npages.into(),
        first_offset: first.into(),
        ..Default::default()
    };
    g.cmd(CMD_REG_MR, p.as_slice())
}

/// REG_MR over `pages` (a table written for it).
fn reg_pages(
    g: &mut SimGuest,
    pd: u32,
    pages: &[u64],
    first: u32,
    iova: u64,
    length: u64,
) -> Result<(u32, u32), CmdFailed> {
    let table = write_table(g, pages);
    let n = pages.len() as u32;
    reg_table(g, pd, table, n, first, iova, length, ALL_ACCESS)
}

/// Where byte `k` of a region over `pages` starting `first` bytes into the
/// first page is.
fn byte_gpa(pages: &[u64], first: u64, k: u64) -> u64 {
    let pos = first + k;
    pages[(pos / PAGE) as usize] + pos % PAGE
}

/// The region's bytes, read from its pages.
fn region_bytes(g: &SimGuest, pages: &[u64], first: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len as usize);
    let mut k = 0;
    while k < len {
        let at = byte_gpa(pages, first, k);
        let n = (PAGE - at % PAGE).min(len - k);
        out.extend(g.read(at, n as usize));
        k += n;
    }
    out
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

fn expect(g: &mut SimGuest, cq: &mut ibtca_tests::sim_guest::Cq, wr_id: u64, op: u8, st: u8) {
    let c = g.poll_cq(cq, T).expect("a completion");
    assert_eq!(
        (c.wr_id.to_native(), c.opcode, c.status),
        (wr_id, op, st),
        "got {}",
        wc_status_name(c.status)
    );
}

fn pair(mtu: u8) -> LinkedPair {
    let mut p = LinkedPair::start(PairOptions {
        ram: 16 << 20,
        ..PairOptions::default()
    });
    p.connect(mtu);
    p
}

#[test]
fn rdma_write_and_read_cross_the_pages_of_a_scattered_region() {
    let mut p = pair(MTU_1024);
    // B: four scattered pages, the region starting 0x100 into the first
    // and ending 0x80 before the end of the last.
    let pages = scattered_pages(&mut p.b.g, 4);
    let first = 0x100;
    let len = 4 * PAGE - first - 0x80;
    let iova = 0x7000_0000_0100;
    let (_, rkey) = reg_pages(&mut p.b.g, p.b.pd, &pages, first as u32, iova, len).unwrap();

    // A writes it whole: 1 KiB packets, page boundaries in mid-packet.
    let data = pattern(len as usize, 7);
    p.a.g.write(p.a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, p.a.buf, len as u32, p.a.lkey),
        iova,
        rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 1, WC_RDMA_WRITE, WC_SUCCESS);
    assert!(
        region_bytes(&p.b.g, &pages, first, len) == data,
        "the bytes landed in B's pages, in region order"
    );
    // Nothing before the region's first byte or after its last changed.
    assert_eq!(
        p.b.g.read(pages[0], first as usize),
        vec![0; first as usize]
    );
    assert_eq!(p.b.g.read(pages[3] + PAGE - 0x80, 0x80), vec![0; 0x80]);

    // A reads 5000 bytes back from an odd offset, across two boundaries.
    let (off, n) = (PAGE - first - 3, 5000u64);
    let back = p.a.buf + 0x8_0000;
    let w = remote(
        send_wqe(WR_RDMA_READ, 2, back, n as u32, p.a.lkey),
        iova + off,
        rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 2, WC_RDMA_READ, WC_SUCCESS);
    assert!(p.a.g.read(back, n as usize) == data[off as usize..(off + n) as usize]);

    // A's own page-list region as the local buffer of a WRITE: gathered
    // across A's pages into B's contiguous buffer.
    let a_pages = scattered_pages(&mut p.a.g, 3);
    let a_first = 0xff0u64;
    let a_len = 2 * PAGE + 0x10;
    let a_data = pattern(a_len as usize, 99);
    for (k, chunk) in a_data.chunks(16).enumerate() {
        p.a.g
            .write(byte_gpa(&a_pages, a_first, 16 * k as u64), chunk);
    }
    let a_iova = 0x10_0000;
    let (a_lkey, _) =
        reg_pages(&mut p.a.g, p.a.pd, &a_pages, a_first as u32, a_iova, a_len).unwrap();
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 3, a_iova, a_len as u32, a_lkey),
        p.b.buf,
        p.b.rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 3, WC_RDMA_WRITE, WC_SUCCESS);
    assert!(p.b.g.read(p.b.buf, a_len as usize) == a_data);
}

#[test]
fn a_page_outside_guest_memory_fails_the_access_not_the_device() {
    let mut p = pair(MTU_4096);
    let good = p.b.g.alloc(PAGE, PAGE);
    let first = 0x800;
    let len = 2 * PAGE - first;
    let iova = 0x4000_0000;
    let (_, rkey) = reg_pages(
        &mut p.b.g,
        p.b.pd,
        &[good, UNMAPPED_PAGE],
        first as u32,
        iova,
        len,
    )
    .expect("an unmapped page is refused on access, not at registration");
    // One packet over both pages: refused whole, nothing written.
    p.a.g.write(p.a.buf, &pattern(PAGE as usize, 3));
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, p.a.buf, PAGE as u32, p.a.lkey),
        iova,
        rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 1, WC_RDMA_WRITE, WC_REM_OP_ERR);
    assert_eq!(p.b.g.read(good, PAGE as usize), vec![0; PAGE as usize]);
    // B's device still serves: a query and a new registration work.
    p.b.g.query::<PortAttr>(CMD_QUERY_PORT).unwrap();
    reg_pages(&mut p.b.g, p.b.pd, &[good], 0, 0, PAGE).unwrap();
}

#[test]
fn a_page_outside_guest_memory_as_a_local_buffer_is_a_protection_error() {
    let mut p = pair(MTU_4096);
    let (lkey, _) = reg_pages(&mut p.b.g, p.b.pd, &[UNMAPPED_PAGE], 0, 0, PAGE).unwrap();
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 2, 0x10, 64, lkey),
        p.a.buf,
        p.a.rkey,
    );
    p.b.g.post_send(&mut p.b.qp, &w);
    expect(&mut p.b.g, &mut p.b.cq, 2, WC_RDMA_WRITE, WC_LOC_PROT_ERR);
    p.b.g.query::<PortAttr>(CMD_QUERY_PORT).unwrap();
}

#[test]
fn registration_checks_the_table_the_pages_and_the_page_counts() {
    let mut p = LinkedPair::start(PairOptions {
        ram: 16 << 20,
        ..PairOptions::default()
    });
    let (g, pd) = (&mut p.a.g, p.a.pd);
    let ext: DeviceAttrExt = {
        let mut sel = [0u8; 48];
        sel[0] = DEVICE_ATTR_EXT;
        let e = g.cmd_entry(CMD_QUERY_DEVICE, &sel).unwrap();
        let mut t = DeviceAttrExt::default();
        t.as_mut_slice().copy_from_slice(&e.params);
        t
    };
    assert_eq!(ext.max_mr_pages.to_native(), MAX_MR_PAGES);
    assert_eq!(
        u64::from(ext.max_total_mr_pages.to_native()),
        MAX_TOTAL_MR_PAGES
    );
    assert_eq!(ext.page_size.to_native(), 4096);

    let page = g.alloc(PAGE, PAGE);
    let table = write_table(g, &[page, page + 1]);
    let fail = |g: &mut SimGuest, table, n, first, len| {
        reg_table(g, pd, table, n, first, 0, len, ALL_ACCESS)
            .unwrap_err()
            .0
    };
    assert_eq!(
        fail(g, UNMAPPED_PAGE, 1, 0, PAGE),
        EFAULT,
        "table outside guest memory"
    );
    assert_eq!(
        fail(g, table, 2, 0, 2 * PAGE),
        EINVAL,
        "a page not 4 KiB-aligned"
    );
    assert_eq!(
        fail(g, table + 4, 1, 0, PAGE),
        EINVAL,
        "a table not 8-byte aligned"
    );
    assert_eq!(
        fail(g, table, 1, 4096, 1),
        EINVAL,
        "first offset a page or more"
    );
    assert_eq!(
        fail(g, table, 1, 0, PAGE + 1),
        EINVAL,
        "too few pages for the length"
    );
    assert_eq!(
        fail(g, table, 2, 0, PAGE),
        EINVAL,
        "more pages than the length covers"
    );
    assert_eq!(fail(g, table, 1, 0, 0), EINVAL, "zero length");
    // Zero pages is the contiguous form, which takes no first offset.
    assert_eq!(
        fail(g, page, 0, 8, PAGE),
        EINVAL,
        "zero pages with an offset"
    );
    reg_table(g, pd, page, 0, 0, 0, PAGE, ALL_ACCESS).expect("the contiguous form");
    reg_table(g, pd, table, 1, 0xfff, 0, 1, ALL_ACCESS).expect("one byte at the end of a page");

    // The largest region: every entry the same page (aliases are allowed).
    let max = MAX_MR_PAGES as usize;
    let big = write_table(g, &vec![page; max + 1]);
    let len = |n: usize| n as u64 * PAGE;
    assert_eq!(
        fail(g, big, MAX_MR_PAGES + 1, 0, len(max + 1)),
        EINVAL,
        "oversize"
    );
    let budget = (MAX_TOTAL_MR_PAGES / u64::from(MAX_MR_PAGES)) as usize;
    let mut keys = vec![];
    for _ in 0..budget - 1 {
        keys.push(reg_table(g, pd, big, MAX_MR_PAGES, 0, 0, len(max), 0).unwrap());
    }
    // The one-page region above holds a page of the budget.
    assert_eq!(
        fail(g, big, MAX_MR_PAGES, 0, len(max)),
        ENOMEM,
        "device page budget"
    );
    let (l, _) = keys.pop().unwrap();
    g.cmd(CMD_DEREG_MR, &l.to_le_bytes()).unwrap();
    reg_table(g, pd, big, MAX_MR_PAGES, 0, 0, len(max), 0).expect("room again");
}

#[test]
fn fast_registration_then_access_then_invalidate_refuses() {
    let mut p = pair(MTU_1024);
    let key = alloc_mr(&mut p.b.g, p.b.pd, 4);
    let pages = scattered_pages(&mut p.b.g, 3);
    let table = write_table(&mut p.b.g, &pages);
    let (first, len, iova) = (0x10u64, 3 * PAGE - 0x30, 0xdead_0000_0010u64);
    let data = pattern(len as usize, 42);
    p.a.g.write(p.a.buf, &data);
    let write = |wr_id, rkey| {
        remote(
            send_wqe(WR_RDMA_WRITE, wr_id, p.a.buf, len as u32, p.a.lkey),
            iova,
            rkey,
        )
    };

    // The WQE gives the key a new low byte, as ib_update_fast_reg_key.
    let new_key = (key & !0xff) | (key.wrapping_add(1) & 0xff);
    let w = reg_mr_wqe(
        10,
        &FastReg {
            key: new_key,
            table,
            npages: 3,
            first: first as u32,
            iova,
            len,
        },
    );
    p.b.g.post_send(&mut p.b.qp, &w);
    expect(&mut p.b.g, &mut p.b.cq, 10, WC_REG_MR, WC_SUCCESS);
    // The table may change now: the device took its copy.
    p.b.g.write(table, &[0xffu8; 24]);

    p.a.g.post_send(&mut p.a.qp, &write(1, new_key));
    expect(&mut p.a.g, &mut p.a.cq, 1, WC_RDMA_WRITE, WC_SUCCESS);
    assert!(region_bytes(&p.b.g, &pages, first, len) == data);
    let back = p.a.buf + 0x8_0000;
    let w = remote(
        send_wqe(WR_RDMA_READ, 2, back, len as u32, p.a.lkey),
        iova,
        new_key,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 2, WC_RDMA_READ, WC_SUCCESS);
    assert!(p.a.g.read(back, len as usize) == data);

    // The key as an lkey on B: a SEND from the region into A.
    p.a.g
        .post_recv(&mut p.a.qp, &recv_wqe(3, back, 8192, p.a.lkey));
    let w = send_wqe(WR_SEND, 11, iova + 0xff0, 0x20, new_key);
    p.b.g.post_send(&mut p.b.qp, &w);
    expect(&mut p.b.g, &mut p.b.cq, 11, WC_SEND, WC_SUCCESS);
    expect(&mut p.a.g, &mut p.a.cq, 3, WC_RECV, WC_SUCCESS);
    assert_eq!(p.a.g.read(back, 0x20), data[0xff0..0x1010]);

    let inv = local_inv_wqe(12, new_key);
    p.b.g.post_send(&mut p.b.qp, &inv);
    expect(&mut p.b.g, &mut p.b.cq, 12, WC_LOCAL_INV, WC_SUCCESS);

    // Invalidated: A's write is refused and changes nothing.
    p.a.g.write(p.a.buf, &pattern(len as usize, 1));
    p.a.g.post_send(&mut p.a.qp, &write(4, new_key));
    expect(&mut p.a.g, &mut p.a.cq, 4, WC_RDMA_WRITE, WC_REM_ACCESS_ERR);
    assert!(region_bytes(&p.b.g, &pages, first, len) == data);

    // Freed with its current key.
    p.b.g.cmd(CMD_DEREG_MR, &new_key.to_le_bytes()).unwrap();
    assert_eq!(
        p.b.g.cmd(CMD_DEREG_MR, &new_key.to_le_bytes()),
        Err(CmdFailed(libc::ENOENT as u16))
    );
}

#[test]
fn fast_registration_from_a_table_outside_guest_memory_fails_the_work_request() {
    let mut p = pair(MTU_4096);
    let key = alloc_mr(&mut p.b.g, p.b.pd, 1);
    let new_key = (key & !0xff) | (key.wrapping_add(1) & 0xff);
    let w = reg_mr_wqe(
        1,
        &FastReg {
            key: new_key,
            table: UNMAPPED_PAGE,
            npages: 1,
            first: 0,
            iova: 0x1000,
            len: PAGE,
        },
    );
    p.b.g.post_send(&mut p.b.qp, &w);
    expect(&mut p.b.g, &mut p.b.cq, 1, WC_REG_MR, WC_LOC_PROT_ERR);
    // The driver's key (new low byte) and the device's (old) differ now:
    // DEREG_MR takes either, once.
    let dereg = |g: &mut SimGuest, k: u32| g.cmd(CMD_DEREG_MR, &k.to_le_bytes());
    dereg(&mut p.b.g, new_key).unwrap();
    assert_eq!(dereg(&mut p.b.g, key), Err(CmdFailed(libc::ENOENT as u16)));
    p.b.g.query::<PortAttr>(CMD_QUERY_PORT).unwrap();
}

#[test]
fn a_send_with_invalidate_frees_a_fast_registration_region() {
    let mut p = pair(MTU_4096);
    let key = alloc_mr(&mut p.b.g, p.b.pd, 2);
    let pages = scattered_pages(&mut p.b.g, 2);
    let table = write_table(&mut p.b.g, &pages);
    let iova = 0x9000_0800;
    let w = reg_mr_wqe(
        1,
        &FastReg {
            key,
            table,
            npages: 2,
            first: 0x800,
            iova,
            len: PAGE,
        },
    );
    p.b.g.post_send(&mut p.b.qp, &w);
    expect(&mut p.b.g, &mut p.b.cq, 1, WC_REG_MR, WC_SUCCESS);
    // A writes across B's two pages, then invalidates B's key with its SEND.
    let data = pattern(PAGE as usize, 5);
    p.a.g.write(p.a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 2, p.a.buf, PAGE as u32, p.a.lkey),
        iova,
        key,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 2, WC_RDMA_WRITE, WC_SUCCESS);
    assert!(region_bytes(&p.b.g, &pages, 0x800, PAGE) == data);
    let recv_buf = p.b.buf + 0x8_0000;
    p.b.g
        .post_recv(&mut p.b.qp, &recv_wqe(3, recv_buf, 64, p.b.lkey));
    let mut w = send_wqe(WR_SEND_INV, 4, p.a.buf, 16, p.a.lkey);
    w.imm_data = key.into();
    p.a.g.post_send(&mut p.a.qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 4, WC_SEND, WC_SUCCESS);
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("the receive");
    assert_eq!((c.wr_id.to_native(), c.status), (3, WC_SUCCESS));
    assert_ne!(c.flags & CQE_F_INV, 0, "the receive says it invalidated");
    assert_eq!(c.imm_data.to_native(), key);
    // The key is refused now.
    p.a.g.write(p.a.buf, &pattern(PAGE as usize, 6));
    let w = remote(send_wqe(WR_RDMA_WRITE, 5, p.a.buf, 8, p.a.lkey), iova, key);
    p.a.g.post_send(&mut p.a.qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 5, WC_RDMA_WRITE, WC_REM_ACCESS_ERR);
    assert!(region_bytes(&p.b.g, &pages, 0x800, PAGE) == data);
}
