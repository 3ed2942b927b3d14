//! Full stack, the RDMA core: a guest loads ib_core and ib_uverbs and the
//! ibtca module registers `ibtca0` with them. The devices are started from
//! a topology file (LIDs, node and port GUIDs, a link): the guest's node
//! first, its peer only once the module is loaded, so the port goes from
//! DOWN to ACTIVE under the RDMA core's eyes (an IB event, which the core's
//! cache logs). The guest's console must then show the file's identity
//! wherever the standard tools look: sysfs (/sys/class/infiniband/ibtca0),
//! iproute2's `rdma dev`, `rdma link` and `rdma resource` (the MAD layer's
//! QP0 and QP1), the uverbs device, and libibverbs through the ibtca
//! rdma-core provider (`ibv_devices`, `ibv_devinfo -v` with the device's
//! limits, and `ibtca-provider-test`: a user context, two PDs the RDMA core
//! tracks, a user CQ and QP, and the context refused with ENOSPC once every
//! doorbell page is taken; a user context of another ABI version refused
//! by the kernel (EPROTO, its log naming both versions) and by the
//! provider (a GET_CONTEXT answer of kernel ABI 99, faked by the test
//! program's ioctl: EPROTO and the provider's message on stderr);
//! loopback to its own LID, RDMA through the
//! `ibv_wr_*` API and extended CQs, and memory windows bound from user
//! space, and posts and polls that make no system call (a thread under a
//! seccomp filter trapping every one), a user UD QP refusing
//! `IBV_SEND_INLINE` as the kernel does, and a SEND and an RDMA WRITE of
//! 32 SGEs each into a receive of 32 (the provider's WQE strides); the
//! data path between guests:
//! `vm_uverbs.rs`). The module
//! unloads cleanly and neither the driver nor the RDMA core complains.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root for the chroot:
//! `scripts/test.sh` runs it; plain `cargo test` lists it as ignored.

use std::path::Path;
use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_device::verbs::{abi, Limits, PortAttrs, Verbs};
use ibtca_fabric::launch::device_args;
use ibtca_fabric::plan::{parse, plan};
use ibtca_tests::vm::{DeviceProcess, VmConfig, VmRun, VmStack};

const TOPOLOGY: &str = r#"{
  "nodes": [ { "name": "n1", "lid": 5,
               "node_guid": "0x1200000000a1b2c3", "port_guid": "0x1200000000a1b2c4" },
             { "name": "n2", "lid": 6 } ],
  "links": [ { "a": "n1", "b": "n2" } ] }"#;

/// Waits until the console log has a line containing `needle`; returns it.
fn wait_line(log: &Path, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.contains(needle)) {
            return l.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} on the console within {timeout:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value after `IBTCA-SYSFS NAME=` (the rest of the line).
fn sysfs(run: &VmRun, name: &str) -> String {
    let tag = format!("IBTCA-SYSFS {name}=");
    let line = run.expect_line(&tag);
    line[line.find(&tag).unwrap() + tag.len()..]
        .trim_end()
        .to_owned()
}

/// `ibv_devinfo -v`'s value for `key` (its first `key:` line), trimmed.
/// The extended verbs (`ibtca_provider_ext.c`), loopback on one device:
/// QPs from `ibv_create_qp_ex`, a CQ from `ibv_create_cq_ex`; the
/// `ibv_wr_*` requests land their bytes exactly and complete with the
/// fields the device gives; memory windows bound from user space answer
/// with the exact statuses; a completion channel outlives its CQ by
/// exactly one destroy.
fn provider_ext_steps(step: &dyn Fn(&str) -> String) {
    let expect = |name: &str, want: &str| {
        let line = step(name);
        assert!(line.contains(want), "{name}: no {want:?} in {line}");
    };
    expect(
        "ex_unsupported_op",
        &format!("(errno {})", libc::EOPNOTSUPP),
    );
    step("ex_setup");
    expect("ex_write", "err=0 completions=3 bytes match");
    // WRITE with immediate: the receive's opcode is IBV_WC_RECV_RDMA_WITH_IMM
    // (129), byte_len the WRITE's, slid the port's own LID (5).
    expect(
        "ex_write_imm_cqe",
        "status=0 opcode=129 imm=0x12345678 byte_len=1024 ",
    );
    expect("ex_write_imm_cqe", " slid=5");
    expect(
        "ex_send",
        "err=0 completions=4 byte_len=500,777 imm=0xabcdef01 bytes match",
    );
    expect("ex_read", "status=0 byte_len=1024 bytes match");
    expect("ex_atomics", "err=0 completions=2 old=100,555 word=600");
    // Batches that ibv_wr_complete refuses (EINVAL) and one ibv_wr_abort
    // dropped post nothing.
    expect(
        "ex_abort_refused",
        &format!(
            "refused {e},{e},{e}; next status=0; aborted target unchanged",
            e = libc::EINVAL
        ),
    );
    // ibv_wr_set_inline_data(_list): 64 bytes by WRITE and 10+20+30 by
    // SEND landed exactly, though the caller's buffers changed before
    // ibv_wr_complete; 65 bytes (ENOMEM, as mlx5) and inline data on a READ
    // (EINVAL) post nothing.
    expect(
        "ex_inline",
        "err=0 completions=3 write match recv byte_len=60 match",
    );
    expect(
        "ex_inline_too_long",
        &format!(
            "refused {m} (Cannot allocate memory),{m},{i}; next status=0; target unchanged",
            m = libc::ENOMEM,
            i = libc::EINVAL
        ),
    );
    // A type 1 window (ibv_bind_mw): neither LOCAL_INV nor a SEND with
    // Invalidate ends its binding; the WRITE after each still lands.
    step("mw1_alloc");
    expect("mw1_bind_write", "err=0 bind=0 write=0 rkey ");
    expect("mw1_bind_write", "bytes match");
    expect(
        "mw1_local_inv_refused",
        "local_inv=4 (local protection error), then write=0",
    );
    expect(
        "mw1_send_inv_refused",
        "send_inv=9 (remote invalid request error) recv=4, then write=0",
    );
    step("mw1_dealloc");
    step("mw_alloc");
    expect("mw_bind", "status=0 (success)");
    expect(
        "mw_write",
        "status=0 (success) window matches, around it unchanged",
    );
    expect("mw_read", "status=0 (success) bytes match");
    let access = "status=10 (remote access error) target unchanged";
    expect("mw_out_of_range", access);
    expect("mw_no_right", &format!("atomic {access}"));
    expect(
        "mw_bind_stale_key",
        "status=6 (memory management operation error)",
    );
    expect("mw_bind_post_send", "err=0 status=0 (success)");
    expect("mw_moved_old_key", access);
    expect("mw_local_inv", "status=0 (success)");
    expect("mw_local_inv_refused", access);
    expect("mw_send_inv", "bind=0 write=0 completions=2 invalidated=0x");
    expect("mw_send_inv_refused", access);
    expect("mw_dealloc_bound", "bind=0 dealloc=0 dereg_mr=0");
    // The extended CQ holds one reference on its completion channel.
    expect(
        "ex_cq_channel",
        &format!(
            "destroy with the CQ: {e} (EBUSY {e}), after it: 0",
            e = libc::EBUSY
        ),
    );
}

fn devinfo(run: &VmRun, key: &str) -> String {
    let tag = format!("{key}:");
    run.lines_with("IBTCA-IBV-DEVINFO ")
        .map(|l| l.split_once("IBTCA-IBV-DEVINFO ").unwrap().1.trim())
        .find_map(|l| l.strip_prefix(&tag).map(|v| v.trim().to_owned()))
        .unwrap_or_else(|| panic!("ibv_devinfo -v printed no {key:?}:\n{}", run.serial))
}

#[test]
#[ignore = "boots a QEMU guest; run by scripts/test.sh"]
fn guest_rdma_core_sees_ibtca0_with_the_topologys_identity() {
    let stack = VmStack::get();
    let dir = stack.scratch("ibdev");
    let p = plan(&parse(TOPOLOGY).unwrap(), &dir.0).unwrap();
    std::fs::create_dir_all(dir.join("links")).unwrap();
    // A node's ibtca-device arguments as ibtca-fabric gives them, but the
    // socket, which DeviceProcess adds.
    let start = |i: usize| {
        let args = device_args(&p.nodes[i]);
        assert_eq!(args[0], "--socket");
        let extra: Vec<&str> = args[2..].iter().map(String::as_str).collect();
        DeviceProcess::start(&p.nodes[i].socket, None, &extra)
    };
    let mut dev = start(0);
    let log = dir.join("console.log");
    let mut vm = VmConfig::new(&p.nodes[0].socket, "ibdev");
    vm.timeout = Duration::from_secs(300);
    vm.serial_log = Some(log.clone());
    let started = Instant::now();
    let (run, peer) = std::thread::scope(|s| {
        let guest = s.spawn(|| stack.boot(&vm));
        // The boot's wall time to the image's /init (BENCHMARKS.md, "Guest
        // boot"): printed, not asserted.
        wait_line(&log, "IBTCA-GUEST boot", Duration::from_secs(240));
        let to_init = started.elapsed();
        // ibtca0 is registered while its port waits for the peer.
        let loaded = wait_line(&log, "IBTCA-IBDEV-LOADED", Duration::from_secs(240));
        let peer = start(1);
        (guest.join().unwrap(), (peer, (loaded, to_init)))
    });
    let (mut peer, (loaded, to_init)) = peer;
    eprintln!(
        "ibdev: {:.1} s wall, {:.1} s from QEMU's start to /init; guest uptime at /init: {}",
        run.elapsed.as_secs_f64(),
        to_init.as_secs_f64(),
        run.expect_line("IBTCA-IBDEV-UPTIME")
            .trim_start_matches("IBTCA-IBDEV-UPTIME ")
    );
    let dump = format!("console:\n{}\ndevice log:\n{}", run.serial, dev.log_text());
    assert_eq!(
        run.status,
        Some(0),
        "QEMU did not power off cleanly\n{dump}"
    );
    for l in run.lines_with("IBTCA-") {
        eprintln!("{l}");
    }
    run.expect_line("IBTCA-INSMOD ok");
    run.expect_line("ibtca: probe ");
    run.expect_line("RDMA device ibtca0 node GUID 1200000000a1b2c3");
    // Registered with its port down; the peer's arrival reached the core as
    // an IB event (the core's cache logs the new state).
    assert!(loaded.contains("state=1: DOWN"), "{loaded}\n{dump}");
    run.expect_line("ibtca0: port event active");
    run.expect_line("ibtca0: Port: 1 Link ACTIVE");

    // sysfs: a CA with the file's GUIDs and LID, its port ACTIVE on IB.
    let expect = [
        ("node_type", "1: CA"),
        ("node_guid", "1200:0000:00a1:b2c3"),
        ("sys_image_guid", "1200:0000:00a1:b2c3"),
        (
            "fw_ver",
            &format!("{}.{}", regs::VERSION_MAJOR, regs::VERSION_MINOR),
        ),
        ("ports/1/state", "4: ACTIVE"),
        ("ports/1/phys_state", "5: LinkUp"),
        ("ports/1/lid", "0x5"),
        ("ports/1/sm_lid", "0x0"),
        ("ports/1/lid_mask_count", "0"),
        ("ports/1/rate", "40 Gb/sec (4X QDR)"),
        ("ports/1/link_layer", "InfiniBand"),
        // The port's GID: the default subnet prefix and the port GUID.
        ("ports/1/gids/0", "fe80:0000:0000:0000:1200:0000:00a1:b2c4"),
        ("ports/1/pkeys/0", "0xffff"),
    ];
    for (name, value) in expect {
        assert_eq!(sysfs(&run, name), value, "sysfs {name}\n{dump}");
    }
    let uverbs = run.expect_line("IBTCA-SYSFS uverbs=");
    assert!(
        uverbs.contains("uverbs=uverbs0 ibdev=ibtca0") && uverbs.contains("dev=uverbs0"),
        "ib_uverbs made /dev/infiniband/uverbs0 for ibtca0: {uverbs}\n{dump}"
    );

    // iproute2's rdma tool over the RDMA netlink interface.
    let dev_line = run.expect_line("IBTCA-RDMA-DEV ");
    for want in [
        "ibtca0: node_type ca",
        "protocol ib",
        "node_guid 1200:0000:00a1:b2c3",
        "sys_image_guid 1200:0000:00a1:b2c3",
    ] {
        assert!(dev_line.contains(want), "rdma dev: no {want:?}: {dev_line}");
    }
    let link = run.expect_line("IBTCA-RDMA-LINK ");
    for want in [
        "link ibtca0/1",
        "subnet_prefix fe80:0000:0000:0000",
        "lid 5 ",
        "state ACTIVE",
        "physical_state LINK_UP",
    ] {
        assert!(link.contains(want), "rdma link: no {want:?}: {link}");
    }

    // The RDMA core took ibtca0 for a kernel verbs provider: its MAD layer
    // made QP0 (SMI) and QP1 (GSI) on a PD and a CQ of ibtca0's and moved
    // them to RTS.
    let res = run.expect_line("IBTCA-RDMA-RES ");
    assert!(res.contains("ibtca0: pd 1 cq 1 qp 2 "), "{res}\n{dump}");
    for qp in ["lqpn 0 type SMI state RTS", "lqpn 1 type GSI state RTS"] {
        assert!(
            run.lines_with("IBTCA-RDMA-RES-QP link ibtca0/1 ")
                .any(|l| l.contains(qp)),
            "no {qp:?}\n{dump}"
        );
    }

    // libibverbs loads the ibtca provider for the uverbs device and lists
    // ibtca0 with the file's node GUID, without a warning.
    assert!(
        run.lines_with("IBTCA-IBV-DEVICES ").any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w[1..] == ["ibtca0", "1200000000a1b2c3"]
        }),
        "ibv_devices does not list ibtca0 1200000000a1b2c3\n{dump}"
    );
    assert!(
        !run.serial.contains("no userspace device-specific driver")
            && !run.serial.contains("couldn't load driver")
            && !run.serial.contains("does not support the kernel ABI"),
        "{dump}"
    );

    // ibv_devinfo -v through the provider: the identity, the port as the
    // file says, and the limits the device reports (QUERY_DEVICE of a
    // device with the default tables).
    let verbs = Verbs::new(Limits::default(), PortAttrs::default(), 0);
    let attr = verbs.device_attr();
    // The 128-byte WQE's SGEs, which the user context's response names
    // for a provider without strides.
    let wqe_sges = u32::from(attr.max_sge).min(ibtca_device::verbs::abi::MAX_SGE as u32);
    // The provider sizes its QPs' strides: max_sge holds both ways.
    let qp_sges = attr.max_sge.min(verbs.device_attr_ext().max_recv_sge);
    let fw = format!("{}.{}", regs::VERSION_MAJOR, regs::VERSION_MINOR);
    let init_rd_atom = verbs.device_attr_ext().max_qp_init_rd_atom;
    assert_eq!(init_rd_atom, ibtca_device::verbs::qp::MAX_INIT_RD_ATOMIC);
    let expect = [
        ("hca_id", "ibtca0".to_owned()),
        ("transport", "InfiniBand (0)".to_owned()),
        ("fw_ver", fw),
        ("node_guid", "1200:0000:00a1:b2c3".to_owned()),
        ("sys_image_guid", "1200:0000:00a1:b2c3".to_owned()),
        ("vendor_id", "0x1234".to_owned()),
        ("vendor_part_id", "31904".to_owned()),
        ("phys_port_cnt", "1".to_owned()),
        (
            "max_mr_size",
            format!("{:#x}", attr.max_mr_size.to_native()),
        ),
        ("max_qp", attr.max_qp.to_native().to_string()),
        ("max_qp_wr", attr.max_qp_wr.to_native().to_string()),
        ("max_sge", qp_sges.to_string()),
        // SRQs take the same receive strides as QPs.
        ("max_srq_sge", qp_sges.to_string()),
        ("max_cq", attr.max_cq.to_native().to_string()),
        ("max_cqe", attr.max_cqe.to_native().to_string()),
        ("max_mr", attr.max_mr.to_native().to_string()),
        ("max_pd", attr.max_pd.to_native().to_string()),
        ("max_qp_rd_atom", attr.max_qp_rd_atom.to_string()),
        // The initiator depth (16): QUERY_DEVICE's extension, as the
        // device's MODIFY_QP bounds max_rd_atomic.
        ("max_qp_init_rd_atom", init_rd_atom.to_string()),
        // The multicast limits (256 groups, 64 QPs each): the ABI's, which
        // the device's group table enforces and the driver reports.
        ("max_mcast_grp", abi::MAX_MCAST_GROUPS.to_string()),
        ("max_mcast_qp_attach", abi::MAX_MCAST_QPS.to_string()),
        (
            "max_total_mcast_qp_attach",
            (abi::MAX_MCAST_GROUPS * abi::MAX_MCAST_QPS).to_string(),
        ),
        ("atomic_cap", "ATOMIC_HCA (1)".to_owned()),
        ("port", "1".to_owned()),
        ("state", "PORT_ACTIVE (4)".to_owned()),
        ("max_mtu", "4096 (5)".to_owned()),
        ("active_mtu", "4096 (5)".to_owned()),
        ("sm_lid", "0".to_owned()),
        ("port_lid", "5".to_owned()),
        ("port_lmc", "0x00".to_owned()),
        ("link_layer", "InfiniBand".to_owned()),
        ("active_width", "4X (2)".to_owned()),
        ("active_speed", "10.0 Gbps (4)".to_owned()),
        ("phys_state", "LINK_UP (5)".to_owned()),
    ];
    for (key, value) in &expect {
        assert_eq!(&devinfo(&run, key), value, "ibv_devinfo -v {key}\n{dump}");
    }
    // The port GUID, as the port's GID.
    assert!(
        devinfo(&run, "GID[  0]").starts_with("fe80:0000:0000:0000:1200:0000:00a1:b2c4"),
        "{dump}"
    );

    // The provider's verbs: a user context with the provider's ABI, two PDs
    // on the device (the RDMA core tracks them for the test's process),
    // a user memory region (the kernel's reg_user_mr), a user CQ and QP,
    // and the doorbell pages running out.
    let step = |name: &str| {
        let tag = format!("IBTCA-PROVIDER {name} ");
        let line = run.expect_line(&tag).to_owned();
        assert!(line.contains(" PASS "), "{line}\n{dump}");
        line
    };
    let open = step("open");
    assert!(
        open.contains("ibtca0 node_guid=1200000000a1b2c3 opened"),
        "{open}"
    );
    let qd = step("query_device");
    for want in [
        format!(
            "vendor=0x1234 part=0x7ca0 max_qp={} ",
            attr.max_qp.to_native()
        ),
        format!("max_pd={} ", attr.max_pd.to_native()),
    ] {
        assert!(qd.contains(&want), "no {want:?}: {qd}");
    }
    let qp = step("query_port");
    assert!(
        qp.contains("state=active lid=5 active_mtu=5 link_layer=1 "),
        "{qp}"
    );
    // The kernel's user-context response: its ABI version and the
    // device's limits; a request of another ABI version is refused, and
    // the kernel says which versions met.
    let uctx = step("uctx_resp");
    let want = format!(
        "err=0 abi=2 max_qp={} max_qp_wr={} max_cq={} max_cqe={} max_mr={} max_pd={} max_sge={} max_qp_rd_atom={} max_mr_size={:#x}",
        attr.max_qp.to_native(),
        attr.max_qp_wr.to_native(),
        attr.max_cq.to_native(),
        attr.max_cqe.to_native(),
        attr.max_mr.to_native(),
        attr.max_pd.to_native(),
        wqe_sges,
        attr.max_qp_rd_atom,
        attr.max_mr_size.to_native(),
    );
    assert!(uctx.ends_with(&want), "{uctx}\nwant {want}");
    let other = step("uctx_other_abi");
    assert!(
        other.contains(&format!("(errno {})", libc::EPROTO)),
        "{other}"
    );
    let none = step("uctx_no_request");
    assert!(
        none.contains(&format!("(errno {})", libc::EPROTO)),
        "{none}"
    );
    // The provider's side of a mismatch: GET_CONTEXT answered with kernel
    // ABI 99 (ibtca-provider-test interposes ioctl for this one open):
    // the open fails with EPROTO and the provider names both versions.
    let abi = step("provider_abi_mismatch");
    assert!(
        abi.contains(&format!(
            "kernel answering ABI 99: open Protocol error (errno {})",
            libc::EPROTO
        )),
        "{abi}"
    );
    // The previous steps' refusals are logged by the kernel, and kernel
    // messages can land on the serial console between the tag and the
    // provider's message (which then starts a later line) or cut into the
    // message: take the first line from the tag on that has it (a few
    // lines at most), and compare the provider's words up to such a cut
    // (the message has no '[').
    let lines: Vec<&str> = run.serial.lines().collect();
    let tag = lines
        .iter()
        .position(|l| l.contains("IBTCA-PROVIDER-ABI "))
        .unwrap_or_else(|| panic!("no IBTCA-PROVIDER-ABI line\n{dump}"));
    let said = lines[tag..lines.len().min(tag + 8)]
        .iter()
        .find(|l| l.contains("ibtca: "))
        .unwrap_or_else(|| panic!("no provider message\n{dump}"));
    let want = ": the kernel driver speaks ABI 99; this provider speaks ABI 2: install the ibtca module and the ibtca provider from the same ibtca version";
    let own = said.split('[').next().unwrap_or_default();
    let own = &own[own
        .find(": the kernel driver speaks ABI 99; this provider speaks ABI 2")
        .unwrap_or_else(|| panic!("{said}"))..];
    assert!(want.starts_with(own.trim_end_matches('\r')), "{said}");
    for want in [
        "ibtca0: user context: provider ABI 3, driver ABI 2: install the module and the provider from the same ibtca version",
        "ibtca0: user context: a request of 0 bytes is no ibtca provider ABI 2 request; update the provider",
    ] {
        assert!(
            run.lines_with("IBTCA-UCTX-LOG ").any(|l| l.contains(want)),
            "no {want:?}\n{dump}"
        );
    }
    assert_eq!(
        run.lines_with("IBTCA-PROVIDER alloc_pd PASS").count(),
        2,
        "{dump}"
    );
    step("pd_distinct");
    // Both PDs belong to the test's process while it holds them.
    let pds: Vec<&str> = run
        .lines_with("IBTCA-PROVIDER-PD ")
        .filter(|l| l.contains("dev ibtca0") && l.contains("comm ibtca-provider"))
        .collect();
    assert_eq!(pds.len(), 2, "rdma resource show pd: {pds:?}\n{dump}");
    step("held_command");
    let mr = step("reg_mr");
    assert!(mr.contains("(registered)"), "{mr}");
    step("dereg_mr");
    // The data path's objects: a user CQ and QP with mapped rings.
    let cq = step("create_cq");
    assert!(cq.contains("created cqe="), "{cq}");
    step("poll_cq_empty");
    step("req_notify_cq");
    let qp = step("create_qp");
    assert!(qp.contains("created qpn="), "{qp}");
    step("query_qp");
    step("destroy_qp");
    step("destroy_cq");
    // The data path end to end (loopback to the device's own LID): an RDMA
    // WRITE lands byte for byte, inline too; one with a wrong R_Key reaches the
    // application as IBV_WC_REM_ACCESS_ERR and changes nothing.
    step("loopback_setup");
    let w = step("loopback_write");
    assert!(w.contains("status=0 bytes match"), "{w}");
    // Inline data: 64 bytes from memory no region covers land exactly (the
    // QP reports max_inline_data 64); 65 are refused at post with EINVAL.
    let inl = step("loopback_inline_write");
    assert!(
        inl.contains("status=0 max_inline_data=64 bytes match"),
        "{inl}"
    );
    let long = step("loopback_inline_too_long");
    assert!(
        long.contains("65 bytes: post EINVAL, target unchanged"),
        "{long}"
    );
    let bad = step("loopback_bad_rkey");
    assert!(
        bad.contains("(remote access error) target unchanged"),
        "{bad}"
    );
    // A user SRQ: two SENDs land in its receives 0 and 1 byte for byte,
    // the limit event reaches the context's async fd once, disarmed after.
    step("srq_setup");
    assert!(step("srq_recv").contains("byte for byte"));
    let lim = step("srq_limit_event");
    assert!(
        lim.contains("IBV_EVENT_SRQ_LIMIT_REACHED, then limit 0 max_wr 4"),
        "{lim}"
    );
    // Grown past its ring (4 to 16; past max_srq_wr: EINVAL): the receive
    // posted before stays first, eight more fit, nine SENDs land in order.
    let grow = step("srq_grow");
    assert!(
        grow.contains(&format!(
            "max_wr 1048576: {} (Invalid argument); 16: 0, then max_wr 16; 8 more posted; \
             nine SENDs in receives 2..10 in order, byte for byte",
            libc::EINVAL
        )),
        "{grow}"
    );
    step("destroy_srq");
    provider_ext_steps(&step);
    // Kernel bypass: 500 round trips (SEND into a posted receive, RDMA
    // WRITE) through ibv_post_recv, ibv_post_send and ibv_poll_cq on a
    // thread whose seccomp filter traps every system call make none; its
    // getppid() before them (x86-64 number 110) shows the trap catches one.
    let bypass = step("bypass_no_syscalls");
    for want in [
        "filter=0 control getppid trapped=1 nr=110; 500 of 500 round trips",
        "post_err=0 status=0): 0 system calls",
    ] {
        assert!(bypass.contains(want), "no {want:?}: {bypass}");
    }
    // A user UD QP, loopback: no inline data reported, even when asked;
    // IBV_SEND_INLINE refused (EINVAL, *bad_wr at it) as the kernel
    // refuses it, nothing of it sent; the same SEND from a registered
    // buffer is the only one that arrives.
    step("ud_setup");
    let cap = step("ud_no_inline_cap");
    assert!(
        cap.contains("max_inline_data=0; asking 16: created, max_inline_data=0"),
        "{cap}"
    );
    let refused = step("ud_inline_refused");
    assert!(
        refused.contains(&format!("ret={} (want", libc::EINVAL))
            && refused.contains("bad_wr at it"),
        "{refused}"
    );
    let sent = step("ud_send_after_refusal");
    assert!(
        sent.contains("send wr_id=2 status=0 recv wr_id=7 status=0 len=56")
            && sent.contains("bytes match"),
        "{sent}"
    );
    step("ud_nothing_more");
    step("ud_attach_mcast");
    let mcast = step("ud_mcast_loopback");
    assert!(
        mcast.contains("grh=1 dgid is the group bytes match"),
        "{mcast}"
    );
    let detach = step("ud_detach_mcast");
    assert!(
        detach.contains(&format!("detach ret=0, again ret={} ", libc::EINVAL)),
        "{detach}"
    );
    // 32 SGEs each way through the provider's strides (loopback): both
    // QPs report them, the SEND and the WRITE complete, every byte lands
    // in order over the receive's 32 pieces and the WRITE's range, and
    // nothing around them changes.
    for who in ["receiver", "sender"] {
        let q = step(&format!("sge_qp_{who}"));
        assert!(
            q.contains(&format!("max_sge={qp_sges} "))
                && q.contains("created cap.max_send_sge=32 cap.max_recv_sge=32"),
            "{q}"
        );
    }
    step("sge_post_recv");
    for s in ["sge_send", "sge_write"] {
        assert!(step(s).contains("32 SGEs, 3760 bytes: status=0"));
    }
    assert!(step("sge_recv").contains("byte_len=3760"));
    assert!(step("sge_recv_bytes").contains("in order; 0 bytes around them changed"));
    step("sge_write_bytes");
    step("sge_loopback");
    // One doorbell page per context: 63 for user space, then ENOSPC and a
    // line saying why; a closed context's page serves the next.
    let out = step("db_pages_run_out");
    assert!(
        out.contains("62 more contexts") && out.contains(&format!("(errno {})", libc::ENOSPC)),
        "{out}"
    );
    step("db_page_reused");
    assert!(
        run.lines_with("IBTCA-UCTX-LOG ").any(|l| l.contains(
            "user context: refused, all 63 doorbell pages are in use by other user contexts"
        )),
        "no doorbell-page log line\n{dump}"
    );
    assert_eq!(
        run.lines_with("IBTCA-PROVIDER dealloc_pd PASS").count(),
        2,
        "{dump}"
    );
    step("close");
    run.expect_line("IBTCA-PROVIDER result 0 failed");
    run.expect_line("IBTCA-PROVIDER-RC 0");

    // The ioctl interface serves beside the RDMA core.
    let info = run.expect_line("IBTCA-TOOL-INFO port_state:");
    assert!(info.contains("4 (active)"), "{info}");

    // User memory registered through the RDMA core (uverbs, no provider):
    // reg_user_mr's page tables passed the device's checks, for a region
    // starting mid-page and one of 1024 pages, and both deregistered.
    for check in [
        "context",
        "pd",
        "reg_unaligned",
        "reg_4MiB",
        "dereg_unaligned",
        "dereg_4MiB",
        "dealloc_pd",
    ] {
        let needle = format!("IBTCA-UVERBS-MR {check} ");
        let l = run.expect_line(&needle);
        assert!(l.contains(" PASS "), "{l}\n{dump}");
    }
    run.expect_line("IBTCA-UVERBS-MR done failed=0");

    // QEMU's vfio-user client gave the guest BAR4, the doorbell pages, at
    // its full size as a memory BAR (`start end flags` from sysfs).
    let bar4 = run.expect_line("IBTCA-PCI-BAR4 ");
    let f: Vec<u64> = bar4
        .split_whitespace()
        .skip(1)
        .map(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or(0))
        .collect();
    assert!(f.len() == 3 && f[0] != 0, "{bar4}\n{dump}");
    assert_eq!(
        f[1] - f[0] + 1,
        u64::from(regs::DB_PAGES) * regs::DB_PAGE_SIZE,
        "{bar4}"
    );
    assert_ne!(f[2] & 0x200, 0, "IORESOURCE_MEM: {bar4}");

    // Clean unload: ibtca0 gone, no complaint from the driver or the core
    // (the MAD layer's QP0/QP1, their CQ and the SA's AH came and went).
    run.expect_line("IBTCA-UNLOAD ok");
    assert!(
        run.lines_with("IBTCA-IBDEV-FAIL").next().is_none(),
        "{dump}"
    );
    let complaints: Vec<&str> = run.lines_with("IBTCA-DMESG ").collect();
    assert!(
        complaints.is_empty(),
        "kernel complained: {complaints:?}\n{dump}"
    );
    run.expect_line("IBTCA-IBDEV-DONE");
    run.expect_line("IBTCA-GUEST done");
    assert!(dev.alive(), "device died\n{dump}");
    assert!(dev.stop(), "ibtca-device did not exit cleanly on SIGTERM");
    assert!(peer.alive(), "the peer's device died\n{dump}");
    assert!(peer.stop(), "the peer's device did not exit cleanly");
}
