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
use vm_memory::{ByteValued, Le16, Le32};
use vmm_sys_util::eventfd::EventFd;

use crate::qp_retry::Retry;
use crate::{eventfd, irq, Client, GuestRam};

mod objects;
mod poll;
mod post;
mod ram_map;
mod record;
mod wqe;

pub use poll::PollWait;
pub use wqe::{local_inv_wqe, recv_wqe, remote, send_wqe};

use ram_map::RamMap;

/// Guest-physical address where the simulated RAM starts.
pub const RAM_BASE: u64 = 0x4000_0000;
const CMDQ_LOG: u32 = 6;

/// Where a QP's or CQ's doorbells are rung.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DbRoute {
    /// BAR0's DB_SQ, DB_RQ and DB_CQ (the kernel's, as page 0).
    #[default]
    Bar0,
    /// A page of the doorbell BAR (`regs::DB_BAR`).
    Page(u32),
}

/// A created CQ.
#[derive(Debug, Clone, Copy)]
pub struct Cq {
    /// CQ number.
    pub cqn: u32,
    /// Where its doorbells go (change it to ring from elsewhere).
    pub db: DbRoute,
    gpa: u64,
    log: u8,
    ci: u32,
}

/// A created QP.
#[derive(Debug, Clone, Copy)]
pub struct Qp {
    /// QP number.
    pub qpn: u32,
    /// Where its doorbells go (change it to ring from elsewhere).
    pub db: DbRoute,
    pub(crate) sq: u64,
    pub(crate) rq: u64,
    /// Guest-physical address of its quasi-WQE ring (as many entries as
    /// its SQ).
    pub quasi: u64,
    pub(crate) log: u8,
    /// log2 of its RQ's stride (IBTCA_RECV_LOG_STRIDE: 128-byte WQEs).
    pub(crate) rq_log_stride: u8,
    /// log2 of its SQ's stride (IBTCA_RECV_LOG_STRIDE: 128-byte WQEs).
    pub(crate) sq_log_stride: u8,
    pub(crate) sq_pi: u32,
    pub(crate) rq_pi: u32,
}

impl Qp {
    /// Guest address of its SQ (128-byte WQEs).
    pub fn sq_addr(&self) -> u64 {
        self.sq
    }

    /// Guest address of its RQ (128-byte WQEs unless created with a
    /// larger stride).
    pub fn rq_addr(&self) -> u64 {
        self.rq
    }

    /// Bytes of one SQ slot.
    pub fn sq_stride(&self) -> u64 {
        1 << self.sq_log_stride
    }

    /// Bytes of one RQ slot.
    pub fn rq_stride(&self) -> u64 {
        1 << self.rq_log_stride
    }
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
    map: RamMap,
    poll_wait: PollWait,
    /// ACK timeout and retry count [`SimGuest::connect`] gives a QP.
    pub retry: Retry,
    /// P_Key index [`SimGuest::connect`] and [`SimGuest::datagram_ready`]
    /// give a QP (0: left to the device's default, index 0).
    pub pkey_index: u16,
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
        let map = RamMap::new(&ram.file, ram_size);
        let mut g = SimGuest {
            client,
            ram,
            next_free: RAM_BASE,
            cmdq: 0,
            cmd_pi: 0,
            cq_irq,
            map,
            poll_wait: PollWait::default(),
            retry: Retry::default(),
            pkey_index: 0,
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
        self.cmd_entry(opcode, params)
            .map(|e| (e.out0.to_native(), e.out1.to_native()))
    }

    /// Runs a query (no parameters); returns its reply (written over the
    /// parameters) or the device's status.
    pub fn query<T: ByteValued + Default>(&mut self, opcode: u8) -> Result<T, CmdFailed> {
        let e = self.cmd_entry(opcode, &[])?;
        let mut t = T::default();
        let n = t.as_slice().len();
        t.as_mut_slice().copy_from_slice(&e.params[..n]);
        Ok(t)
    }

    /// Runs one command; returns the completed entry or the device's status.
    pub fn cmd_entry(&mut self, opcode: u8, params: &[u8]) -> Result<CmdEntry, CmdFailed> {
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
        // A hang guard: the engine runs a command in microseconds.
        let deadline = Instant::now() + Duration::from_secs(30);
        let status_at = slot + std::mem::offset_of!(CmdEntry, status) as u64;
        loop {
            // The status, loaded at once, then the entry it published.
            let st = self.map.load_u16(status_at);
            if st != CMD_ST_PENDING {
                let done: CmdEntry = self.read_obj(slot);
                return if st == CMD_ST_OK {
                    Ok(done)
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
}

/// The doorbell page a route stands for.
fn db_page(db: DbRoute) -> u32 {
    match db {
        DbRoute::Bar0 => 0,
        DbRoute::Page(k) => k,
    }
}
