//! An `ibtca-gateway` process on a device's link, the device driven by a
//! simulated guest over vfio-user (no VM): the guest receives an AAL5
//! frame that a cell source wrote into the gateway's ATM socket as one
//! SEND, byte-exact; its SEND goes out of the ATM socket as the frame's
//! cells; its QPN reaches the gateway through the control socket at run
//! time, as a real guest's would. A hostile guest's RDMA WRITE to the
//! gateway fails with a remote access error and the gateway carries on
//! (its QP, which the NAK put in error, starts again).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use ibtca_device::instance::InstanceConfig;
use ibtca_device::link::LinkEndpoint;
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_protocol::atm::aal5::{self, Aal5Reassembler, MAX_SDU};
use ibtca_protocol::atm::cell::PTI_AUU;
use ibtca_protocol::atm::{Cell, Vc, CELL_LEN};
use ibtca_switch::control::request;
use ibtca_tests::pair::ALL_ACCESS;
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe, SimGuest};
use ibtca_tests::{workspace_bin, TempDir, TestServer};

const T: Duration = Duration::from_secs(30);
const VC: Vc = Vc { vpi: 0, vci: 32 };
const GW_LID: u16 = 10;
const GW_QPN: u32 = 16;

/// Kills the gateway when the test ends, however it ends.
struct Gw(Child);

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn retry<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + T;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not in {T:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn frame(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(11).wrapping_add(3))
        .collect()
}

#[test]
fn a_guest_exchanges_aal5_frames_with_a_cell_source_through_the_gateway() {
    let dir = TempDir::new("gw-guest");
    let link = dir.join("link");
    let server = TestServer::start_instance(
        TempDir::new("gw-guest-dev"),
        InstanceConfig {
            lid: 1,
            link: Some(LinkEndpoint::Listen(link.clone())),
            ..InstanceConfig::default()
        },
    );
    let map = dir.join("map.json");
    std::fs::write(
        &map,
        format!(
            r#"{{"vcs": [{{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
                "ib": {{"qp": "rc", "local_qpn": {GW_QPN}, "remote_lid": 1, "sq_psn": 100, "rq_psn": 100}}}}]}}"#
        ),
    )
    .unwrap();
    let (atm, control) = (dir.join("atm"), dir.join("control"));
    let gw = Gw(Command::new(workspace_bin("ibtca-gateway"))
        .args(["--lid", &GW_LID.to_string(), "--mtu", "4096"])
        .arg(format!("--link=connect:{}", link.display()))
        .arg(format!("--atm=listen:{}", atm.display()))
        .arg(format!("--map={}", map.display()))
        .arg(format!("--control={}", control.display()))
        .stderr(std::fs::File::create(dir.join("gateway.log")).unwrap())
        .spawn()
        .expect("ibtca-gateway starts"));

    let mut g = SimGuest::new(&server.socket, 8 << 20);
    retry("the device's port active", || {
        (g.client.read32(0, regs::PORT_STATE) == regs::PORT_ACTIVE).then_some(())
    });
    let pd = g.create_pd();
    let buf = g.alloc(1 << 20, 4096);
    let (lkey, _) = g.reg_mr(pd, buf, 1 << 20, ALL_ACCESS);
    let mut cq = g.create_cq(8);
    let mut qp = g.create_qp(pd, &cq, &cq, 6);
    // The guest learned its QPN only now: tell the gateway.
    let reply = retry("the control socket", || {
        request(&control, &format!("remote-qpn 0/32 {}", qp.qpn)).ok()
    });
    assert_eq!(
        reply,
        format!("ok VC 0/32: QP {GW_QPN} to LID 1 QP {}", qp.qpn)
    );
    g.connect(&qp, GW_LID, GW_QPN, MTU_4096, ALL_ACCESS);
    let recv_at = buf + (512 << 10);
    for i in 0..4 {
        g.post_recv(
            &mut qp,
            &recv_wqe(100 + i, recv_at + i * 0x1_0000, 0x1_0000, lkey),
        );
    }

    // ATM → guest: a 9,180-byte frame arrives as one SEND.
    let mut cells_in = retry("the ATM port", || UnixStream::connect(&atm).ok());
    let down = frame(9180);
    let mut cells = Vec::new();
    aal5::segment(VC, &down, 0, &mut cells).unwrap();
    cells_in
        .write_all(&cells.iter().flat_map(|c| c.bytes).collect::<Vec<u8>>())
        .unwrap();
    let c = g
        .poll_cq(&mut cq, T)
        .expect("the frame as a receive completion");
    assert_eq!(
        (c.status, c.opcode, c.wr_id.to_native()),
        (WC_SUCCESS, WC_RECV, 100),
        "{c:?}"
    );
    assert_eq!(c.byte_len.to_native(), 9180);
    assert_eq!(c.src_qp.to_native(), GW_QPN);
    assert!(
        g.read(recv_at, 9180) == down,
        "the frame, byte-exact in guest memory"
    );

    // Guest → ATM: a SEND goes out as the frame's cells.
    let up = frame(1500);
    g.write(buf, &up);
    g.post_send(&mut qp, &send_wqe(WR_SEND, 7, buf, 1500, lkey));
    let c = g.poll_cq(&mut cq, T).expect("the SEND completes");
    assert_eq!((c.status, c.wr_id.to_native()), (WC_SUCCESS, 7), "{c:?}");
    cells_in.set_read_timeout(Some(T)).unwrap();
    let mut r = Aal5Reassembler::new(MAX_SDU);
    let mut cell = [0u8; CELL_LEN];
    let got = loop {
        cells_in
            .read_exact(&mut cell)
            .expect("cells out of the gateway");
        let c = Cell::from_slice(&cell).unwrap();
        assert_eq!(c.header().vc(), VC);
        if let Some(f) = r.push(c.payload(), c.header().pti & PTI_AUU != 0, Instant::now()) {
            break f.expect("a good AAL5 frame").data;
        }
    };
    assert!(got == up, "the SEND, byte-exact as an AAL5 frame");

    // A hostile guest: RDMA WRITE into the gateway, which exposes no memory.
    g.post_send(
        &mut qp,
        &remote(send_wqe(WR_RDMA_WRITE, 8, buf, 64, lkey), 0x1000, 0x1234),
    );
    let c = g.poll_cq(&mut cq, T).expect("the WRITE completes");
    let stats = request(&control, "stats").expect("the gateway still answers");
    assert_eq!(
        (c.status, c.wr_id.to_native()),
        (WC_REM_ACCESS_ERR, 8),
        "{c:?} {stats}"
    );
    assert!(stats.contains("\"messages_from_ib\":1"), "{stats}");
    assert!(stats.contains("\"messages_sent\":1"), "{stats}");
    assert!(
        stats.contains("\"qp_restarts\":1"),
        "the QP the guest broke starts again: {stats}"
    );
    drop(gw);
}
