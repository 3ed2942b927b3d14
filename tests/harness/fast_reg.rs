//! Fast registration from a simulated guest: ALLOC_MR, and the
//! IBTCA_WR_REG_MR work request that maps a page list into the region.

use ibtca_device::verbs::abi::*;
use vm_memory::ByteValued;

use crate::sim_guest::SimGuest;

/// ALLOC_MR of a region of up to `max_pages` pages in `pd`; returns its
/// key (lkey and rkey alike).
pub fn alloc_mr(g: &mut SimGuest, pd: u32, max_pages: u32) -> u32 {
    let p = CmdAllocMr {
        pdn: pd.into(),
        max_pages: max_pages.into(),
        ..Default::default()
    };
    let (key, key2) = g.cmd(CMD_ALLOC_MR, p.as_slice()).expect("ALLOC_MR");
    assert_eq!(key, key2, "one key, lkey and rkey alike");
    key
}

/// Where and what an IBTCA_WR_REG_MR maps: `npages` 4 KiB pages listed
/// at `table`, the region starting `first` bytes into the first page.
pub struct FastReg {
    pub key: u32,
    pub table: u64,
    pub npages: u32,
    pub first: u32,
    pub iova: u64,
    pub len: u64,
}

/// A signaled fast-registration WQE (local write, remote read and write)
/// as the send queue holds it.
pub fn reg_mr_wqe(wr_id: u64, r: &FastReg) -> SendWqe {
    let w = RegMrWqe {
        wr_id: wr_id.into(),
        opcode: WR_REG_MR,
        flags: WQE_F_SIGNALED,
        access: (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ).into(),
        iova: r.iova.into(),
        key: r.key.into(),
        npages: r.npages.into(),
        length: r.len.into(),
        page_table: r.table.into(),
        first_offset: r.first.into(),
        ..Default::default()
    };
    let mut s = SendWqe::default();
    s.as_mut_slice().copy_from_slice(w.as_slice());
    s
}
