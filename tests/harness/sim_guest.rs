//! A simulated guest: drives a device's verbs interface through vfio-user
//! exactly as the guest driver would — memory the device maps from a memfd,
//! a command queue and rings in that memory, posted doorbell writes, MSI-X
//! eventfds — but from the test process, so two devices on a link can be
//! tested without QEMU.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use vm_memory::{ByteValued, Le16, Le32, Le64};
use vmm_sys_util::eventfd::EventFd;

use crate::qp_retry::Retry;
use crate::{eventfd, irq, Client, GuestRam};

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
    pub(crate) sq_pi: u32,
    pub(crate) rq_pi: u32,
}

impl Qp {
    /// Guest address of its SQ (128-byte WQEs).
    pub fn sq_addr(&self) -> u64 {
        self.sq
    }

    /// Guest address of its RQ (128-byte WQEs).
    pub fn rq_addr(&self) -> u64 {
        self.rq
    }
}

/// How [`SimGuest::poll_cq`] waits between two looks at an empty CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollWait {
    /// Sleep this long (the default: 200 µs, kind to a loaded test machine).
    Sleep(Duration),
    /// Look again at once, yielding the CPU in between (`sched_yield`), as a
    /// busy-polling driver or benchmark does.
    Spin,
}

impl Default for PollWait {
    fn default() -> Self {
        PollWait::Sleep(Duration::from_micros(200))
    }
}

/// The simulated RAM mapped into this process, as a guest sees its RAM: the
/// fast paths ([`SimGuest::try_poll_cq`], [`SimGuest::post_send_batch`], …)
/// load and store through it instead of `pread`/`pwrite` on the memfd.
struct RamMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; nothing in
// it is tied to the thread that created it.
unsafe impl Send for RamMap {}

impl RamMap {
    fn new(file: &std::fs::File, len: u64) -> Self {
        let len = usize::try_from(len).expect("RAM size fits in usize");
        // SAFETY: a fresh shared mapping of `len` bytes of a memfd we own
        // (sized to `len`); the kernel picks the address. Checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert!(
            ptr != libc::MAP_FAILED,
            "mmap of the simulated RAM: {}",
            std::io::Error::last_os_error()
        );
        RamMap {
            ptr: ptr.cast(),
            len,
        }
    }

    /// Pointer to `size` bytes at guest-physical `gpa` (bounds checked).
    fn at(&self, gpa: u64, size: usize) -> *mut u8 {
        let off = gpa
            .checked_sub(RAM_BASE)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|&o| o.checked_add(size).is_some_and(|end| end <= self.len))
            .unwrap_or_else(|| panic!("{gpa:#x}+{size} outside the simulated RAM"));
        // SAFETY: `off + size <= len`, inside the mapping.
        unsafe { self.ptr.add(off) }
    }

    fn store<T: ByteValued>(&self, gpa: u64, v: &T) {
        let bytes = v.as_slice();
        let dst = self.at(gpa, bytes.len());
        // SAFETY: `dst` has room for `bytes` (checked by `at`); the device
        // may read the same memory concurrently, as real hardware would, but
        // not before the doorbell that follows this store.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
    }

    /// Volatile load of the byte at `gpa` (the device writes it concurrently).
    fn load_u8(&self, gpa: u64) -> u8 {
        // SAFETY: in bounds (checked by `at`); a byte load is always aligned.
        unsafe { std::ptr::read_volatile(self.at(gpa, 1)) }
    }

    /// One 16-bit load at the even `gpa` with acquire ordering: a field the
    /// device stores at once (a command's status) is seen whole.
    fn load_u16(&self, gpa: u64) -> u16 {
        assert!(gpa.is_multiple_of(2), "{gpa:#x} is odd");
        let p = self.at(gpa, 2).cast::<u16>();
        // SAFETY: in bounds (checked by `at`) and 2-byte aligned (the map
        // is page-aligned and `gpa` even); the device stores this field with
        // one atomic store, so an atomic load of it is the right pair.
        let v = unsafe { std::sync::atomic::AtomicU16::from_ptr(p) }
            .load(std::sync::atomic::Ordering::Acquire);
        u16::from_le(v)
    }

    fn load<T: ByteValued + Default>(&self, gpa: u64) -> T {
        let mut v = T::default();
        let out = v.as_mut_slice();
        let src = self.at(gpa, out.len());
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: `src + i` is in bounds (checked by `at`); volatile
            // because the device writes this memory behind our back.
            *b = unsafe { std::ptr::read_volatile(src.add(i)) };
        }
        v
    }
}

impl Drop for RamMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; no reference
        // into it outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
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
        let deadline = Instant::now() + Duration::from_secs(10);
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
        self.create_cq_on(log, DbRoute::Bar0)
    }

    /// CREATE_CQ bound to the doorbell page of `db` (BAR0: page 0).
    pub fn create_cq_on(&mut self, log: u8, db: DbRoute) -> Cq {
        let gpa = self.alloc(32 << log, 4096);
        let p = CmdCreateCq {
            ring: gpa.into(),
            log_entries: log,
            vector: 1,
            db_page: db_page(db).into(),
            ..Default::default()
        };
        let cqn = self.cmd(CMD_CREATE_CQ, p.as_slice()).unwrap().0;
        Cq {
            cqn,
            db,
            gpa,
            log,
            ci: 0,
        }
    }

    /// CREATE_QP (RC) with 2^log SQ/RQ entries.
    pub fn create_qp(&mut self, pdn: u32, scq: &Cq, rcq: &Cq, log: u8) -> Qp {
        self.create_qp_on(pdn, scq, rcq, log, DbRoute::Bar0)
    }

    /// CREATE_QP bound to the doorbell page of `db` (BAR0: page 0).
    pub fn create_qp_on(&mut self, pdn: u32, scq: &Cq, rcq: &Cq, log: u8, db: DbRoute) -> Qp {
        self.create_qp_with(pdn, scq, rcq, log, db, 0)
            .expect("CREATE_QP")
    }

    /// CREATE_QP taking its receives from SRQ `srqn` (no RQ of its own).
    pub fn create_qp_on_srq(
        &mut self,
        pdn: u32,
        scq: &Cq,
        rcq: &Cq,
        log: u8,
        srqn: u32,
    ) -> Result<Qp, CmdFailed> {
        self.create_qp_with(pdn, scq, rcq, log, DbRoute::Bar0, srqn)
    }

    fn create_qp_with(
        &mut self,
        pdn: u32,
        scq: &Cq,
        rcq: &Cq,
        log: u8,
        db: DbRoute,
        srqn: u32,
    ) -> Result<Qp, CmdFailed> {
        let sq = self.alloc(128 << log, 4096);
        let (rq, rq_log) = match srqn {
            0 => (self.alloc(128 << log, 4096), log),
            _ => (0, 0),
        };
        let quasi = self.alloc(32 << log, 4096);
        let p = CmdCreateQp {
            pdn: pdn.into(),
            send_cqn: scq.cqn.into(),
            recv_cqn: rcq.cqn.into(),
            log_sizes: [log, rq_log, log, 0],
            sq: sq.into(),
            rq: rq.into(),
            quasi: quasi.into(),
            db_page: db_page(db).into(),
            srqn: srqn.into(),
        };
        let qpn = self.cmd(CMD_CREATE_QP, p.as_slice())?.0;
        Ok(Qp {
            qpn,
            db,
            sq,
            rq,
            quasi,
            log,
            sq_pi: 0,
            rq_pi: 0,
        })
    }

    /// MODIFY_QP.
    pub fn modify_qp(&mut self, p: &CmdModifyQp) -> Result<(), CmdFailed> {
        self.cmd(CMD_MODIFY_QP, p.as_slice()).map(|_| ())
    }

    /// RESET → INIT → RTR → RTS towards (dlid, dest_qpn), allowing the
    /// remote rights in `access` (other bits are dropped); ACK timeout
    /// and retries from [`SimGuest::retry`].
    pub fn connect(&mut self, qp: &Qp, dlid: u16, dest_qpn: u32, mtu: u8, access: u32) {
        self.connect_on_sl(qp, dlid, dest_qpn, mtu, access, 0);
    }

    /// [`SimGuest::connect`] with the path on service level `sl`.
    pub fn connect_on_sl(
        &mut self,
        qp: &Qp,
        dlid: u16,
        dest_qpn: u32,
        mtu: u8,
        access: u32,
        sl: u8,
    ) {
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
        .unwrap_or_else(|e| panic!("QP {:#x} to INIT: device status {}", qp.qpn, e.0));
        self.modify_qp(&CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN).into(),
            state: QPS_RTR,
            path_mtu: mtu,
            dlid: dlid.into(),
            sl,
            dest_qpn: dest_qpn.into(),
            rq_psn: 100.into(),
            ..base
        })
        .unwrap();
        self.modify_qp(&CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_RETRY).into(),
            state: QPS_RTS,
            sq_psn: 100.into(),
            timeout: self.retry.timeout,
            retry_cnt: self.retry.retry_cnt,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 3,
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
        self.ring(qp.db, regs::DB_SQ, db);
    }

    /// Writes a receive WQE and rings the RQ doorbell.
    pub fn post_recv(&mut self, qp: &mut Qp, wqe: &RecvWqe) {
        let slot = qp.rq + 128 * u64::from(qp.rq_pi & ((1 << qp.log) - 1));
        self.write_obj(slot, wqe);
        qp.rq_pi = qp.rq_pi.wrapping_add(1);
        let db = u64::from(qp.qpn) | (u64::from(qp.rq_pi) << 32);
        self.ring(qp.db, regs::DB_RQ, db);
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
                self.ring(cq.db, regs::DB_CQ, db);
                return Some(cqe);
            }
            if Instant::now() >= deadline {
                return None;
            }
            match self.poll_wait {
                PollWait::Sleep(d) => std::thread::sleep(d),
                PollWait::Spin => std::thread::yield_now(),
            }
        }
    }

    /// How [`SimGuest::poll_cq`] waits between looks (default: sleep 200 µs).
    pub fn set_poll_wait(&mut self, wait: PollWait) {
        self.poll_wait = wait;
    }

    /// Like [`SimGuest::poll_cq`] but spinning (reading the mapped RAM,
    /// yielding between looks) whatever [`SimGuest::set_poll_wait`] says.
    pub fn poll_cq_spin(&mut self, cq: &mut Cq, timeout: Duration) -> Option<Cqe> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(c) = self.try_poll_cq(cq) {
                return Some(c);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// The next CQE if there is one (one look at the mapped RAM, no
    /// waiting); returns its slot to the device with a CQ doorbell.
    pub fn try_poll_cq(&mut self, cq: &mut Cq) -> Option<Cqe> {
        let c = self.take_cqe(cq)?;
        self.ring_cq(cq);
        Some(c)
    }

    /// Moves up to `max` ready CQEs into `out` (one look, no waiting) and
    /// returns their slots with one CQ doorbell, as a driver's `poll_cq`
    /// with a batch does; returns how many it moved.
    pub fn poll_cq_batch(&mut self, cq: &mut Cq, max: usize, out: &mut Vec<Cqe>) -> usize {
        let mut n = 0;
        while n < max {
            let Some(c) = self.take_cqe(cq) else { break };
            out.push(c);
            n += 1;
        }
        if n > 0 {
            self.ring_cq(cq);
        }
        n
    }

    /// Whether the device has written the CQE at `cq`'s consumer index (a
    /// look, consuming nothing).
    pub fn cqe_ready(&self, cq: &Cq) -> bool {
        let slot = cq.gpa + 32 * u64::from(cq.ci & ((1 << cq.log) - 1));
        let want = (((cq.ci >> cq.log) & 1) ^ 1) as u8;
        self.map.load_u8(slot + CQE_OWNER_OFFSET) & 1 == want
    }

    /// Consumes the CQE at the consumer index if the device has written it.
    fn take_cqe(&mut self, cq: &mut Cq) -> Option<Cqe> {
        let slot = cq.gpa + 32 * u64::from(cq.ci & ((1 << cq.log) - 1));
        let want = (((cq.ci >> cq.log) & 1) ^ 1) as u8;
        // The device writes the owner byte last (after a release fence).
        if self.map.load_u8(slot + CQE_OWNER_OFFSET) & 1 != want {
            return None;
        }
        fence(Ordering::Acquire);
        let cqe: Cqe = self.map.load(slot);
        cq.ci = cq.ci.wrapping_add(1);
        Some(cqe)
    }

    /// Arms `cq` for its next completion (the CQ doorbell with
    /// IBTCA_CQ_ARM_NEXT and the consumer index), as `ibv_req_notify_cq`
    /// does. The device fires at once if completions past the consumer index
    /// are already written, so arming and then waiting never misses one.
    pub fn arm_cq(&mut self, cq: &Cq) {
        let db = u64::from(cq.cqn) | (u64::from(CQ_ARM_NEXT) << 24) | (u64::from(cq.ci) << 32);
        self.ring(cq.db, regs::DB_CQ, db);
    }

    /// Blocks until the CQ interrupt (MSI-X vector 1) fires or `timeout`
    /// passes, and consumes it; returns whether it fired.
    pub fn wait_cq_irq(&self, timeout: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.cq_irq.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        n > 0 && self.cq_irq.read().is_ok()
    }

    fn ring_cq(&mut self, cq: &Cq) {
        let db = u64::from(cq.cqn) | (u64::from(cq.ci) << 32);
        self.ring(cq.db, regs::DB_CQ, db);
    }

    /// Writes doorbell `value` of BAR0 register `reg` (DB_SQ, DB_RQ,
    /// DB_CQ or DB_SRQ) there or at the same doorbell of a doorbell page.
    pub fn ring(&mut self, route: DbRoute, reg: u64, value: u64) {
        let bytes = value.to_le_bytes();
        match route {
            DbRoute::Bar0 => self.client.post_write(0, reg, &bytes),
            DbRoute::Page(k) => {
                let within = match reg {
                    regs::DB_SQ => regs::DB_PAGE_SQ,
                    regs::DB_RQ => regs::DB_PAGE_RQ,
                    regs::DB_SRQ => regs::DB_PAGE_SRQ,
                    _ => regs::DB_PAGE_CQ,
                };
                let at = u64::from(k) * regs::DB_PAGE_SIZE + within;
                self.client.post_write(regs::DB_BAR, at, &bytes);
            }
        }
    }

    /// Writes `wqes` into the SQ through the mapped RAM and rings the SQ
    /// doorbell once for all of them (a driver's `post_send` with a chain of
    /// work requests). The caller keeps the SQ from overflowing.
    pub fn post_send_batch(&mut self, qp: &mut Qp, wqes: &[SendWqe]) {
        if wqes.is_empty() {
            return;
        }
        for w in wqes {
            let slot = qp.sq + 128 * u64::from(qp.sq_pi & ((1 << qp.log) - 1));
            self.map.store(slot, w);
            qp.sq_pi = qp.sq_pi.wrapping_add(1);
        }
        // The doorbell is a socket write (a syscall): the WQE stores are
        // visible to the device before it sees the doorbell.
        let db = u64::from(qp.qpn) | (u64::from(qp.sq_pi) << 32);
        self.ring(qp.db, regs::DB_SQ, db);
    }

    /// Writes `wqes` into the RQ through the mapped RAM and rings the RQ
    /// doorbell once. The caller keeps the RQ from overflowing.
    pub fn post_recv_batch(&mut self, qp: &mut Qp, wqes: &[RecvWqe]) {
        if wqes.is_empty() {
            return;
        }
        for w in wqes {
            let slot = qp.rq + 128 * u64::from(qp.rq_pi & ((1 << qp.log) - 1));
            self.map.store(slot, w);
            qp.rq_pi = qp.rq_pi.wrapping_add(1);
        }
        let db = u64::from(qp.qpn) | (u64::from(qp.rq_pi) << 32);
        self.ring(qp.db, regs::DB_RQ, db);
    }
}

/// The doorbell page a route stands for.
fn db_page(db: DbRoute) -> u32 {
    match db {
        DbRoute::Bar0 => 0,
        DbRoute::Page(k) => k,
    }
}

/// Offset of the owner byte in a [`Cqe`].
const CQE_OWNER_OFFSET: u64 = std::mem::offset_of!(Cqe, owner) as u64;

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
