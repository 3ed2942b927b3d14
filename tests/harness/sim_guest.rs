//! A simulated guest: drives a device's verbs interface through vfio-user
//! exactly as the guest driver would — memory the device maps from a memfd,
//! a command queue and rings in that memory, posted doorbell writes, MSI-X
//! eventfds — but from the test process, so two devices on a link can be
//! tested without QEMU.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use vm_memory::{ByteValued, Le16, Le32, Le64};
use vmm_sys_util::eventfd::EventFd;

use crate::{eventfd, irq, Client, GuestRam};

/// Guest-physical address where the simulated RAM starts.
pub const RAM_BASE: u64 = 0x4000_0000;
const CMDQ_LOG: u32 = 6;

/// A created CQ.
#[derive(Debug, Clone, Copy)]
pub struct Cq {
    /// CQ number.
    pub cqn: u32,
    gpa: u64,
    log: u8,
    ci: u32,
}

/// A created QP.
#[derive(Debug, Clone, Copy)]
pub struct Qp {
    /// QP number.
    pub qpn: u32,
    sq: u64,
    rq: u64,
    log: u8,
    sq_pi: u32,
    rq_pi: u32,
}

/// A failed command: the device's status (an errno).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmdFailed(pub u16);

/// The simulated guest.
pub struct SimGuest {
    /// vfio-user connection.
    pub client: Client,
    /// Guest RAM (the memfd the device maps).
    pub ram: GuestRam,
    next_free: u64,
    cmdq: u64,
    cmd_pi: u32,
    /// Eventfd of MSI-X vector 1 (CQ interrupts in these tests).
    pub cq_irq: EventFd,
}

impl SimGuest {
    /// Connects to the device at `socket`, maps `ram_size` bytes of RAM at
    /// [`RAM_BASE`], enables bus mastering and MSI-X, and starts the command
    /// queue.
    pub fn new(socket: &Path, ram_size: u64) -> Self {
        let mut client = Client::connect(socket).unwrap();
        let ram = GuestRam::new(ram_size);
        client
            .dma_map(RAM_BASE, ram_size, Some(&ram.file), 0)
            .unwrap();
        client.enable_bus_master();
        let cq_irq = eventfd();
        client
            .set_irqs(
                irq::MSIX,
                irq::DATA_EVENTFD | irq::ACTION_TRIGGER,
                1,
                1,
                &[],
                &[cq_irq.as_raw_fd()],
            )
            .unwrap();
        client.enable_msix();
        let mut g = SimGuest {
            client,
            ram,
            next_free: RAM_BASE,
            cmdq: 0,
            cmd_pi: 0,
            cq_irq,
        };
        g.cmdq = g.alloc(64 << CMDQ_LOG, 4096);
        g.client.write32(0, regs::CMDQ_BASE_LO, g.cmdq as u32);
        g.client
            .write32(0, regs::CMDQ_BASE_HI, (g.cmdq >> 32) as u32);
        g.client.write32(0, regs::CMDQ_LOG_SIZE, CMDQ_LOG);
        g
    }

    /// Allocates zeroed guest memory; returns its guest-physical address.
    pub fn alloc(&mut self, size: u64, align: u64) -> u64 {
        let at = self.next_free.div_ceil(align) * align;
        assert!(
            at + size <= RAM_BASE + self.ram.size,
            "simulated RAM exhausted"
        );
        self.next_free = at + size;
        at
    }

    /// Reads guest memory.
    pub fn read(&self, gpa: u64, len: usize) -> Vec<u8> {
        self.ram.read(gpa - RAM_BASE, len)
    }

    /// Writes guest memory.
    pub fn write(&self, gpa: u64, data: &[u8]) {
        self.ram.write(gpa - RAM_BASE, data)
    }

    fn write_obj<T: ByteValued>(&self, gpa: u64, v: &T) {
        self.write(gpa, v.as_slice());
    }

    fn read_obj<T: ByteValued + Default>(&self, gpa: u64) -> T {
        let mut v = T::default();
        let bytes = self.read(gpa, std::mem::size_of::<T>());
        v.as_mut_slice().copy_from_slice(&bytes);
        v
    }

    /// Runs one command; returns (out0, out1) or the device's status.
    pub fn cmd(&mut self, opcode: u8, params: &[u8]) -> Result<(u32, u32), CmdFailed> {
        let slot = self.cmdq + 64 * u64::from(self.cmd_pi & ((1 << CMDQ_LOG) - 1));
        let mut e = CmdEntry {
            opcode,
            status: Le16::from(CMD_ST_PENDING),
            token: Le32::from(self.cmd_pi),
            ..Default::default()
        };
        e.params[..params.len()].copy_from_slice(params);
        self.write_obj(slot, &e);
        self.cmd_pi = self.cmd_pi.wrapping_add(1);
        // Posted, like the driver's writel.
        self.client
            .post_write(0, regs::CMDQ_DB, &self.cmd_pi.to_le_bytes());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let done: CmdEntry = self.read_obj(slot);
            let st = done.status.to_native();
            if st != CMD_ST_PENDING {
                return if st == CMD_ST_OK {
                    Ok((done.out0.to_native(), done.out1.to_native()))
                } else {
                    Err(CmdFailed(st))
                };
            }
            assert!(
                Instant::now() < deadline,
                "command {opcode:#x} never completed"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// CREATE_PD.
    pub fn create_pd(&mut self) -> u32 {
        self.cmd(CMD_CREATE_PD, &[]).unwrap().0
    }

    /// REG_MR over `[gpa, gpa + len)` with iova = gpa; returns (lkey, rkey).
    pub fn reg_mr(&mut self, pdn: u32, gpa: u64, len: u64, access: u32) -> (u32, u32) {
        let p = CmdRegMr {
            pdn: pdn.into(),
            access: access.into(),
            iova: gpa.into(),
            length: len.into(),
            gpa: gpa.into(),
            ..Default::default()
        };
        self.cmd(CMD_REG_MR, p.as_slice()).unwrap()
    }

    /// CREATE_CQ with 2^log entries raising MSI-X vector 1.
    pub fn create_cq(&mut self, log: u8) -> Cq {
        let gpa = self.alloc(32 << log, 4096);
        let p = CmdCreateCq {
            ring: gpa.into(),
            log_entries: log,
            vector: 1,
            ..Default::default()
        };
        let cqn = self.cmd(CMD_CREATE_CQ, p.as_slice()).unwrap().0;
        Cq {
            cqn,
            gpa,
            log,
            ci: 0,
        }
    }

    /// CREATE_QP (RC) with 2^log SQ/RQ entries.
    pub fn create_qp(&mut self, pdn: u32, scq: &Cq, rcq: &Cq, log: u8) -> Qp {
        let sq = self.alloc(128 << log, 4096);
        let rq = self.alloc(128 << log, 4096);
        let quasi = self.alloc(32 << log, 4096);
        let p = CmdCreateQp {
            pdn: pdn.into(),
            send_cqn: scq.cqn.into(),
            recv_cqn: rcq.cqn.into(),
            log_sizes: [log, log, log, 0],
            sq: sq.into(),
            rq: rq.into(),
            quasi: quasi.into(),
            ..Default::default()
        };
        let qpn = self.cmd(CMD_CREATE_QP, p.as_slice()).unwrap().0;
        Qp {
            qpn,
            sq,
            rq,
            log,
            sq_pi: 0,
            rq_pi: 0,
        }
    }

    /// MODIFY_QP.
    pub fn modify_qp(&mut self, p: &CmdModifyQp) -> Result<(), CmdFailed> {
        self.cmd(CMD_MODIFY_QP, p.as_slice()).map(|_| ())
    }

    /// RESET → INIT → RTR → RTS towards (dlid, dest_qpn), allowing the
    /// remote rights in `access` (other bits are dropped).
    pub fn connect(&mut self, qp: &Qp, dlid: u16, dest_qpn: u32, mtu: u8, access: u32) {
        let access = access & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC);
        let base = CmdModifyQp {
            qpn: qp.qpn.into(),
            ..Default::default()
        };
        self.modify_qp(&CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
            state: QPS_INIT,
            access: access.into(),
            ..base
        })
        .unwrap();
        self.modify_qp(&CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN).into(),
            state: QPS_RTR,
            path_mtu: mtu,
            dlid: dlid.into(),
            dest_qpn: dest_qpn.into(),
            rq_psn: 100.into(),
            ..base
        })
        .unwrap();
        self.modify_qp(&CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_RETRY).into(),
            state: QPS_RTS,
            sq_psn: 100.into(),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 4,
            ..base
        })
        .unwrap();
    }

    /// Writes a send WQE and rings the SQ doorbell (one posted 8-byte write).
    pub fn post_send(&mut self, qp: &mut Qp, wqe: &SendWqe) {
        let slot = qp.sq + 128 * u64::from(qp.sq_pi & ((1 << qp.log) - 1));
        self.write_obj(slot, wqe);
        qp.sq_pi = qp.sq_pi.wrapping_add(1);
        let db = u64::from(qp.qpn) | (u64::from(qp.sq_pi) << 32);
        self.client.post_write(0, regs::DB_SQ, &db.to_le_bytes());
    }

    /// Writes a receive WQE and rings the RQ doorbell.
    pub fn post_recv(&mut self, qp: &mut Qp, wqe: &RecvWqe) {
        let slot = qp.rq + 128 * u64::from(qp.rq_pi & ((1 << qp.log) - 1));
        self.write_obj(slot, wqe);
        qp.rq_pi = qp.rq_pi.wrapping_add(1);
        let db = u64::from(qp.qpn) | (u64::from(qp.rq_pi) << 32);
        self.client.post_write(0, regs::DB_RQ, &db.to_le_bytes());
    }

    /// Waits up to `timeout` for the next CQE (polling guest memory as the
    /// driver does), then returns the slot to the device.
    pub fn poll_cq(&mut self, cq: &mut Cq, timeout: Duration) -> Option<Cqe> {
        let slot = cq.gpa + 32 * u64::from(cq.ci & ((1 << cq.log) - 1));
        let want = (((cq.ci >> cq.log) & 1) ^ 1) as u8;
        let deadline = Instant::now() + timeout;
        loop {
            let cqe: Cqe = self.read_obj(slot);
            if cqe.owner & 1 == want {
                cq.ci = cq.ci.wrapping_add(1);
                let db = u64::from(cq.cqn) | (u64::from(cq.ci) << 32);
                self.client.post_write(0, regs::DB_CQ, &db.to_le_bytes());
                return Some(cqe);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

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
