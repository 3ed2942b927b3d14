//! DRDMA from a simulated guest: submit a range, fill it with stores and
//! drain it with loads of mixed sizes (as an I/O controller bursting on the
//! bus would), read the ARRs, and build direct work requests.

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;

use crate::sim_guest::{remote, send_wqe, SimGuest};
use crate::XorShift;

/// vfio region of the DRDMA window.
pub const WINDOW: u32 = regs::DRDMA_WINDOW_BAR;
/// Bytes per range.
pub const RANGE: u64 = 4096;

/// Writes DRDMA_SUBMIT (one posted 8-byte write, as a driver's `writeq`).
pub fn submit(g: &mut SimGuest, arr: u32, write: bool, ttl: u32, pmb: Option<u32>) {
    let mut lo = arr;
    if write {
        lo |= regs::DRDMA_SUBMIT_WRITE;
    }
    if let Some(p) = pmb {
        lo |= regs::DRDMA_SUBMIT_PMB | (p << 24);
    }
    let v = u64::from(lo) | (u64::from(ttl) << 32);
    g.client.post_write(0, regs::DRDMA_SUBMIT, &v.to_le_bytes());
}

/// DRDMA_SUBMIT as the guest driver writes it: the posted write, then a
/// read of ARR_CTRL, which flushes it (a store into the mapped window must
/// not overtake the submit that zeroes the range's PMB). Returns ARR_CTRL.
pub fn submit_flushed(g: &mut SimGuest, arr: u32, write: bool, ttl: u32, pmb: Option<u32>) -> u32 {
    submit(g, arr, write, ttl, pmb);
    arr_reg(g, arr, regs::ARR_CTRL)
}

/// DRDMA_SUBMIT of a WRITE range of `ttl` bytes for doorbell page
/// `owner` (as the kernel submits a user context's range), then ARR_CTRL
/// without the PMB number.
pub fn submit_for(g: &mut SimGuest, arr: u32, owner: u32, ttl: u32) -> u32 {
    let lo = arr | regs::DRDMA_SUBMIT_WRITE | (owner << regs::DRDMA_SUBMIT_OWNER_SHIFT);
    let v = u64::from(lo) | (u64::from(ttl) << 32);
    g.client.post_write(0, regs::DRDMA_SUBMIT, &v.to_le_bytes());
    arr_bits(g, arr)
}

/// Reads field `field` (regs::ARR_*) of ARR `arr`.
pub fn arr_reg(g: &mut SimGuest, arr: u32, field: u64) -> u32 {
    g.client.read32(
        0,
        regs::DRDMA_ARR_BASE + u64::from(arr) * regs::DRDMA_ARR_STRIDE + field,
    )
}

/// ARR_CTRL of `arr` without the PMB number.
pub fn arr_bits(g: &mut SimGuest, arr: u32) -> u32 {
    arr_reg(g, arr, regs::ARR_CTRL) & 0xff
}

/// PMB number in ARR_CTRL of `arr`.
pub fn arr_pmb(g: &mut SimGuest, arr: u32) -> u32 {
    arr_reg(g, arr, regs::ARR_CTRL) >> regs::ARR_PMB_SHIFT
}

/// (DRDMA_ERRORS, DRDMA_LAST_ERROR).
pub fn errors(g: &mut SimGuest) -> (u32, u32) {
    (
        g.client.read32(0, regs::DRDMA_ERRORS),
        g.client.read32(0, regs::DRDMA_LAST_ERROR),
    )
}

/// The DRDMA_LAST_ERROR value for `code` on `arr`.
pub fn last_error(code: u32, arr: u32) -> u32 {
    code | (arr << 8)
}

/// Window offset of byte `offset` of range `arr`.
pub fn addr(arr: u32, offset: u64) -> u64 {
    u64::from(arr) * RANGE + offset
}

/// Cuts `len` bytes into accesses of 1, 2, 4 and 8 bytes, each naturally
/// aligned, chosen by `rng`.
pub fn mixed_accesses(len: u64, rng: &mut XorShift) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < len {
        let mut size = 1 << (rng.next_u64() % 4);
        while size > 1 && (at % size != 0 || at + size > len) {
            size /= 2;
        }
        out.push((at, size));
        at += size;
    }
    out
}

/// Stores `data` into range `arr` from offset 0 with mixed-size posted
/// writes in a shuffled order.
pub fn store_mixed(g: &mut SimGuest, arr: u32, data: &[u8], seed: u64) {
    let mut rng = XorShift(seed | 1);
    let mut acc = mixed_accesses(data.len() as u64, &mut rng);
    for i in (1..acc.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        acc.swap(i, j);
    }
    for (off, size) in acc {
        let bytes = &data[off as usize..(off + size) as usize];
        g.client.post_write(WINDOW, addr(arr, off), bytes);
    }
}

/// Stores `data` at `offset` of range `arr` in one write (a memcpy_toio
/// burst that QEMU forwards whole).
pub fn store_burst(g: &mut SimGuest, arr: u32, offset: u64, data: &[u8]) {
    g.client.post_write(WINDOW, addr(arr, offset), data);
}

/// Loads `len` bytes of range `arr` from offset 0, in order, with mixed
/// sizes.
pub fn load_mixed(g: &mut SimGuest, arr: u32, len: u64, seed: u64) -> Vec<u8> {
    let mut rng = XorShift(seed | 1);
    let mut out = Vec::with_capacity(len as usize);
    for (off, size) in mixed_accesses(len, &mut rng) {
        let b = g
            .client
            .read(WINDOW, addr(arr, off), size as u32)
            .expect("window load");
        out.extend_from_slice(&b);
    }
    out
}

/// One load of `size` bytes at `offset` of range `arr`.
pub fn load(g: &mut SimGuest, arr: u32, offset: u64, size: u32) -> Vec<u8> {
    g.client
        .read(WINDOW, addr(arr, offset), size)
        .expect("window load")
}

/// A DRDMA work request (`WR_DRDMA_WRITE` or `WR_DRDMA_READ`) of `len`
/// bytes through range `arr`, to or from `raddr` under `rkey`.
pub fn direct_wqe(opcode: u8, wr_id: u64, arr: u32, len: u32, raddr: u64, rkey: u32) -> SendWqe {
    remote(
        send_wqe(opcode, wr_id, 0, len, SGE_DIRECT | arr),
        raddr,
        rkey,
    )
}

/// The mapped window as QEMU maps it: asks for the region info with room
/// for its sparse-mmap capability, takes the file that comes with it and
/// maps the one area (ranges × 4 KiB at offset 0). `None` if the window is
/// not mappable.
pub fn map_window(g: &mut SimGuest) -> Option<vm_memory::GuestMemoryMmap> {
    use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};
    let (r, file) = g.client.region_info_fd(WINDOW, 256);
    let le64 = |at: usize| u64::from_le_bytes(r[at..at + 8].try_into().unwrap());
    let file = file?;
    let (fd_offset, area_size) = (le64(24), le64(56));
    let region: MmapRegion =
        MmapRegion::from_file(FileOffset::new(file, fd_offset), area_size as usize).ok()?;
    GuestMemoryMmap::from_regions(vec![GuestRegionMmap::new(region, GuestAddress(0))?]).ok()
}

/// DRDMA_SUBMIT_MASK: submits ranges `base + i` for each bit `i` of `mask`.
/// `posted` chooses a posted write (trapped window) or a synchronous one
/// (what QEMU does once a region is mmappable).
pub fn submit_mask(g: &mut SimGuest, base: u32, mask: u32, write: bool, ttl: u32, posted: bool) {
    let mut v = u64::from(mask) | (u64::from(ttl & 0x1fff) << 32) | (u64::from(base) << 48);
    if write {
        v |= regs::DRDMA_MASK_WRITE;
    }
    write64(g, regs::DRDMA_SUBMIT_MASK, v, posted);
}

/// DRDMA_COMMIT_MASK: every WRITE range `base + i` in `mask` counts its
/// remaining bytes as stored.
pub fn commit_mask(g: &mut SimGuest, base: u32, mask: u32, posted: bool) {
    let v = u64::from(mask) | (u64::from(base) << 48);
    write64(g, regs::DRDMA_COMMIT_MASK, v, posted);
}

fn write64(g: &mut SimGuest, off: u64, v: u64, posted: bool) {
    if posted {
        g.client.post_write(0, off, &v.to_le_bytes());
    } else {
        g.client
            .write(0, off, &v.to_le_bytes())
            .expect("BAR0 8-byte write");
    }
}

/// How a transfer started by [`submit_or_bounce`] moves its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrdmaPath {
    /// Through window range `.0` (the device took the submit).
    Direct(u32),
    /// Double-buffered through guest memory at `addr` (L_Key `lkey`): no
    /// dedicated PMB was free.
    Bounce {
        /// Guest address of the bounce buffer.
        addr: u64,
        /// Its L_Key.
        lkey: u32,
    },
}

/// The driver's DRDMA submit with the seed's fallback (Fig 17, Fig 18a
/// step 1804: with every DRDMA-dedicated PMB allocated, the CPU does the
/// I/O "as a conventional double buffered" one). Submits range `arr`
/// (posted, as a driver's `writeq`) and reads ARR_CTRL back, which also
/// flushes the submit. A busy range is the direct path; a range the device
/// left free with DRDMA_LAST_ERROR = NO_PMB on it falls back to `bounce`
/// (guest address, L_Key): the I/O controller's bytes go through that
/// buffer in guest memory and an ordinary RDMA WRITE or READ moves them
/// ([`path_wqe`], [`path_store`], [`path_load`]). Any other refusal panics.
pub fn submit_or_bounce(
    g: &mut SimGuest,
    arr: u32,
    write: bool,
    len: u32,
    bounce: (u64, u32),
) -> DrdmaPath {
    submit(g, arr, write, len, None);
    if arr_reg(g, arr, regs::ARR_CTRL) & regs::ARR_BUSY != 0 {
        return DrdmaPath::Direct(arr);
    }
    let last = g.client.read32(0, regs::DRDMA_LAST_ERROR);
    assert_eq!(
        last,
        last_error(regs::DRDMA_ERR_NO_PMB, arr),
        "DRDMA submit of range {arr} refused for another reason than no free PMB"
    );
    DrdmaPath::Bounce {
        addr: bounce.0,
        lkey: bounce.1,
    }
}

/// The work request of a transfer on `path`: WR_DRDMA_WRITE/READ with a
/// direct SGE, or WR_RDMA_WRITE/READ from or into the bounce buffer.
pub fn path_wqe(
    path: DrdmaPath,
    write: bool,
    wr_id: u64,
    len: u32,
    raddr: u64,
    rkey: u32,
) -> SendWqe {
    match (path, write) {
        (DrdmaPath::Direct(arr), true) => direct_wqe(WR_DRDMA_WRITE, wr_id, arr, len, raddr, rkey),
        (DrdmaPath::Direct(arr), false) => direct_wqe(WR_DRDMA_READ, wr_id, arr, len, raddr, rkey),
        (DrdmaPath::Bounce { addr, lkey }, w) => {
            let op = if w { WR_RDMA_WRITE } else { WR_RDMA_READ };
            remote(send_wqe(op, wr_id, addr, len, lkey), raddr, rkey)
        }
    }
}

/// The I/O controller's stores of a WRITE transfer: into the window range
/// (mixed sizes, shuffled), or into the bounce buffer.
pub fn path_store(g: &mut SimGuest, path: DrdmaPath, data: &[u8], seed: u64) {
    match path {
        DrdmaPath::Direct(arr) => store_mixed(g, arr, data, seed),
        DrdmaPath::Bounce { addr, .. } => g.write(addr, data),
    }
}

/// The I/O controller's loads of a READ transfer: from the window range
/// (mixed sizes, in order), or from the bounce buffer, which holds the
/// bytes once the RDMA READ has completed (the caller polls first).
pub fn path_load(g: &mut SimGuest, path: DrdmaPath, len: u64, seed: u64) -> Vec<u8> {
    match path {
        DrdmaPath::Direct(arr) => load_mixed(g, arr, len, seed),
        DrdmaPath::Bounce { addr, .. } => g.read(addr, len as usize),
    }
}
