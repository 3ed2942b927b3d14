//! Two device instances joined by a link, each with a simulated guest that
//! has a PD, one registered buffer, a CQ and an RC QP: the common set-up of
//! the two-device tests and the verbs benchmark.

use std::time::{Duration, Instant};

use ibtca_device::drdma::DrdmaConfig;
use ibtca_device::instance::InstanceConfig;
use ibtca_device::link::LinkEndpoint;
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_device::vfio_user::ServerConfig;

use crate::qp_retry::Retry;
use crate::sim_guest::{Cq, DbRoute, PollWait, Qp, SimGuest};
use crate::{TempDir, TestServer};

/// Every access right.
pub const ALL_ACCESS: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// One side: a simulated guest and its objects.
pub struct Side {
    /// The guest.
    pub g: SimGuest,
    /// Its protection domain.
    pub pd: u32,
    /// Guest-physical address of its registered buffer (iova = gpa).
    pub buf: u64,
    /// The buffer's L_Key.
    pub lkey: u32,
    /// The buffer's R_Key.
    pub rkey: u32,
    /// Send and receive CQ.
    pub cq: Cq,
    /// The RC QP.
    pub qp: Qp,
}

/// How to build a pair.
#[derive(Debug, Clone, Copy)]
pub struct PairOptions {
    /// Simulated RAM per guest.
    pub ram: u64,
    /// Registered buffer per guest.
    pub buf: u64,
    /// log2 CQ entries.
    pub cq_log: u8,
    /// log2 SQ/RQ entries.
    pub qp_log: u8,
    /// Rights of B's buffer (A's has all).
    pub b_access: u32,
    /// Busy-poll CQs (benchmarks) instead of sleeping between looks.
    pub spin: bool,
    /// Both devices' DRDMA windows.
    pub drdma: DrdmaConfig,
    /// Both devices' engine spin (`InstanceConfig::engine_spin`).
    pub engine_spin: Duration,
    /// CPUs for A's and B's threads (engine, link, vfio-user server), as
    /// two `ibtca-device --cpus` processes would have them; `None` leaves
    /// them where the scheduler puts them.
    pub cpus: Option<(usize, usize)>,
    /// Both links' shared ring (`InstanceConfig::link_ring`; 0: socket).
    pub link_ring: u64,
    /// Both link readers' spin (`InstanceConfig::link_spin`).
    pub link_spin: Duration,
    /// How long both vfio-user servers poll their socket after a message
    /// before they block (`ibtca-device --spin-us`; 0: they block at once).
    pub server_spin: Duration,
    /// Both devices' `InstanceConfig::run_to_completion`.
    pub run_to_completion: bool,
    /// Both guests' ACK timeout and retries ([`Retry::PROMPT`] for tests
    /// of retransmission).
    pub retry: Retry,
    /// Both devices' `InstanceConfig::record_sweep`.
    pub record_sweep: Option<Duration>,
}

impl Default for PairOptions {
    fn default() -> Self {
        PairOptions {
            ram: 8 << 20,
            buf: 1 << 20,
            cq_log: 8,
            qp_log: 6,
            b_access: ALL_ACCESS,
            spin: false,
            drdma: DrdmaConfig::default(),
            engine_spin: ibtca_device::engine::wait::DEFAULT_SPIN,
            cpus: None,
            link_ring: ibtca_device::link::SHARED_RING,
            link_spin: ibtca_device::link::RX_SPIN,
            server_spin: ServerConfig::default().spin,
            run_to_completion: true,
            retry: Retry::default(),
            record_sweep: Some(ibtca_device::engine::RECORD_SWEEP),
        }
    }
}

impl PairOptions {
    /// 4 MiB of simulated RAM, a `buf`-byte buffer, 2^`cq_log` CQ and
    /// 2^`qp_log` QP entries, the rest [`PairOptions::default`].
    pub fn sized(buf: u64, cq_log: u8, qp_log: u8) -> Self {
        PairOptions {
            ram: 4 << 20,
            buf,
            cq_log,
            qp_log,
            ..PairOptions::default()
        }
    }
}

/// Runs `start` on a helper thread bound to `cpu` (when given), so that
/// every thread it starts inherits that CPU; the caller's own affinity
/// stays as it was.
fn on_cpu<T: Send>(cpu: Option<usize>, start: impl FnOnce() -> T + Send) -> T {
    let Some(cpu) = cpu else {
        return start();
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let cpus = cpu.to_string().parse().expect("a CPU number");
            ibtca_device::sched::set_affinity(&cpus)
                .unwrap_or_else(|e| panic!("cannot bind to CPU {cpu}: {e}"));
            start()
        })
        .join()
        .expect("instance start-up thread")
    })
}

/// A (LID 1, listening) and B (LID 2, connecting), ports active, QPs not
/// yet connected.
pub struct LinkedPair {
    /// Side A.
    pub a: Side,
    /// Side B.
    pub b: Side,
    /// A's server (its link is `sa.link`).
    pub sa: TestServer,
    /// B's server; take it to make B vanish.
    pub sb: Option<TestServer>,
    b_access: u32,
    opts: PairOptions,
    _dir: TempDir,
}

fn side(server: &TestServer, o: &PairOptions, access: u32) -> Side {
    Side::new(&server.socket, o, access)
}

impl Side {
    /// A simulated guest of the device at `socket` with a PD, a buffer
    /// registered with `access`, a CQ and an RC QP (not connected).
    pub fn new(socket: &std::path::Path, o: &PairOptions, access: u32) -> Side {
        side_at(socket, o, access)
    }

    /// Waits until the device's port is active.
    pub fn wait_active(&mut self) {
        wait_active(self);
    }

    /// The next completion on the side's CQ within `timeout`, checked to
    /// be work request `wr_id` with `status` (named when it is not).
    pub fn expect_completion(&mut self, wr_id: u64, status: u8, timeout: Duration) -> Cqe {
        let c = self
            .g
            .poll_cq(&mut self.cq, timeout)
            .unwrap_or_else(|| panic!("no completion of wr_id {wr_id} in {timeout:?}"));
        assert_eq!(
            (c.wr_id.to_native(), c.status),
            (wr_id, status),
            "{} (wanted {})",
            wc_status_name(c.status),
            wc_status_name(status)
        );
        c
    }
}

/// A side at each of `sockets` (two devices of a launched fabric, LIDs
/// `lids`), buffers registered with every right, their RC QPs connected
/// to each other at `mtu` with `o.retry`.
pub fn connected_pair(
    sockets: [&std::path::Path; 2],
    lids: [u16; 2],
    mtu: u8,
    o: &PairOptions,
) -> (Side, Side) {
    let mut a = Side::new(sockets[0], o, ALL_ACCESS);
    let mut b = Side::new(sockets[1], o, ALL_ACCESS);
    a.g.connect(&a.qp, lids[1], b.qp.qpn, mtu, ALL_ACCESS);
    b.g.connect(&b.qp, lids[0], a.qp.qpn, mtu, ALL_ACCESS);
    (a, b)
}

fn side_at(socket: &std::path::Path, o: &PairOptions, access: u32) -> Side {
    let mut g = SimGuest::new(socket, o.ram);
    g.retry = o.retry;
    if o.spin {
        g.set_poll_wait(PollWait::Spin);
    }
    let pd = g.create_pd();
    let buf = g.alloc(o.buf, 4096);
    let (lkey, rkey) = g.reg_mr(pd, buf, o.buf, access);
    let cq = g.create_cq(o.cq_log);
    let qp = g.create_qp(pd, &cq, &cq, o.qp_log);
    Side {
        g,
        pd,
        buf,
        lkey,
        rkey,
        cq,
        qp,
    }
}

fn instance(o: &PairOptions, lid: u16, ep: LinkEndpoint) -> TestServer {
    let cfg = InstanceConfig {
        lid,
        node_guid: 0x1200_0000_0000_00a0 + u64::from(lid),
        port_guid: 0x1200_0000_0000_00a0 + u64::from(lid),
        link: Some(ep),
        drdma: o.drdma,
        vl: Default::default(),
        engine_spin: o.engine_spin,
        link_ring: o.link_ring,
        link_spin: o.link_spin,
        run_to_completion: o.run_to_completion,
        record_sweep: o.record_sweep,
        ..InstanceConfig::default()
    };
    let server = ServerConfig {
        spin: o.server_spin,
        ..ServerConfig::default()
    };
    TestServer::start_instance_with(TempDir::new("side"), cfg, server)
}

/// Waits until `s`'s port is active.
fn wait_active(s: &mut Side) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.g.client.read32(0, regs::PORT_STATE) != regs::PORT_ACTIVE {
        assert!(Instant::now() < deadline, "port never became active");
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl LinkedPair {
    /// Starts both instances and guests and waits for the link.
    pub fn start(o: PairOptions) -> Self {
        let dir = TempDir::new("pair");
        let link = dir.join("ab.link");
        let sa = on_cpu(o.cpus.map(|c| c.0), || {
            instance(&o, 1, LinkEndpoint::Listen(link.clone()))
        });
        let sb = on_cpu(o.cpus.map(|c| c.1), || {
            instance(&o, 2, LinkEndpoint::Connect(link))
        });
        let mut a = side(&sa, &o, ALL_ACCESS);
        let mut b = side(&sb, &o, o.b_access);
        for s in [&mut a, &mut b] {
            wait_active(s);
        }
        LinkedPair {
            a,
            b,
            sa,
            sb: Some(sb),
            b_access: o.b_access,
            opts: o,
            _dir: dir,
        }
    }

    /// Restarts B as a node restarts: its device (stopped first, if it
    /// still runs) and its guest start afresh on the same link, so B knows
    /// nothing of A's QPs; B's new objects (a new QP, not connected) are
    /// in `b`. Returns once both ports are active again.
    pub fn restart_b(&mut self) {
        drop(self.sb.take());
        let link = self._dir.join("ab.link");
        let sb = instance(&self.opts, 2, LinkEndpoint::Connect(link));
        self.b = side(&sb, &self.opts, self.b_access);
        self.sb = Some(sb);
        wait_active(&mut self.b);
        wait_active(&mut self.a);
    }

    /// Replaces B's guest as a QEMU that died and was started again
    /// would: B's client goes away (the device forgets every object and
    /// waits for the next client) and a new one sets up new objects (a
    /// new QP, not connected) in `b`.
    pub fn restart_b_guest(&mut self) {
        let sb = self.sb.as_ref().expect("B's device runs");
        // The old client's socket closes as a killed QEMU's does; the
        // device serves the next client once it has seen that.
        let _ = self.b.g.client.stream().shutdown(std::net::Shutdown::Both);
        self.b = side(sb, &self.opts, self.b_access);
        wait_active(&mut self.b);
    }

    /// Splits the pair: the sides, both servers, and the directory that holds
    /// the link socket (keep it alive as long as the servers).
    pub fn into_parts(self) -> (Side, Side, (TestServer, TestServer), TempDir) {
        let sb = self.sb.expect("B is still running");
        (self.a, self.b, (self.sa, sb), self._dir)
    }

    /// Connects A's and B's QPs (PSN 100 both ways) at path MTU code `mtu`.
    pub fn connect(&mut self, mtu: u8) {
        let (qa, qb) = (self.a.qp.qpn, self.b.qp.qpn);
        self.a.g.connect(&self.a.qp, 2, qb, mtu, ALL_ACCESS);
        self.b.g.connect(&self.b.qp, 1, qa, mtu, self.b_access);
    }
}

/// A pair whose side A has a CQ and a QP bound to doorbell page `page`
/// (a user context's), the QP connected to B's at MTU 4096.
pub fn paged_pair(page: u32) -> (LinkedPair, Qp, Cq) {
    let mut p = LinkedPair::start(PairOptions::default());
    let cq = p.a.g.create_cq_on(6, DbRoute::Page(page));
    let qp = p.a.g.create_qp_on(p.a.pd, &cq, &cq, 4, DbRoute::Page(page));
    p.a.g.connect(&qp, 2, p.b.qp.qpn, MTU_4096, ALL_ACCESS);
    p.b.g.connect(&p.b.qp, 1, qp.qpn, MTU_4096, ALL_ACCESS);
    (p, qp, cq)
}
