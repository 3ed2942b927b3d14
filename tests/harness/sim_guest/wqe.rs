//! Work queue entries as tests build them: a send or receive WQE with one
//! SGE, the remote address and key of an RDMA or atomic one, and a
//! LOCAL_INV.

use ibtca_device::verbs::abi::*;
use vm_memory::{Le32, Le64};

/// A send WQE with one SGE.
pub fn send_wqe(opcode: u8, wr_id: u64, addr: u64, len: u32, lkey: u32) -> SendWqe {
    let mut w = SendWqe {
        wr_id: wr_id.into(),
        opcode,
        flags: WQE_F_SIGNALED,
        num_sge: 1,
        ..Default::default()
    };
    w.sge[0] = Sge {
        addr: addr.into(),
        length: len.into(),
        lkey: lkey.into(),
    };
    w
}

/// A receive WQE with one SGE.
pub fn recv_wqe(wr_id: u64, addr: u64, len: u32, lkey: u32) -> RecvWqe {
    let mut w = RecvWqe {
        wr_id: wr_id.into(),
        num_sge: 1,
        ..Default::default()
    };
    w.sge[0] = Sge {
        addr: addr.into(),
        length: len.into(),
        lkey: lkey.into(),
    };
    w
}

/// Sets the remote address and key of an RDMA or atomic WQE.
pub fn remote(mut w: SendWqe, addr: u64, rkey: u32) -> SendWqe {
    w.remote_addr = Le64::from(addr);
    w.rkey = Le32::from(rkey);
    w
}

/// A signaled LOCAL_INV of `key` (an L_Key, R_Key or window key).
pub fn local_inv_wqe(wr_id: u64, key: u32) -> SendWqe {
    let mut w = send_wqe(WR_LOCAL_INV, wr_id, 0, 0, 0);
    w.num_sge = 0;
    w.imm_data = key.into();
    w
}
