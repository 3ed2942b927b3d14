//! The guests' management network (`up --guests`): one Ethernet wire that
//! joins every guest of a fabric, for the out-of-band exchange RDMA tools
//! make over TCP (perftest, `ibv_rc_pingpong`) and for soft-RoCE.
//!
//! The wire is `ibtca-mgmt-hub` ([`crate::mgmt_hub`]) on `mgmt.sock` in
//! the run directory, started before the guests, recorded in the state file
//! and stopped by `down`; each guest's virtio-net NIC reaches it through
//! QEMU's stream netdev. Nothing touches a host interface. Node number `i`
//! (0-based, in file order) is `10.77.x.y/16` with `x.y` = `i + 1`, and has
//! MAC `52:54:00:77:x:y`; every guest's `/etc/hosts` names them all.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::plan::NodePlan;

/// The hub's name in the state file and its log (`mgmt-hub.log`).
pub const HUB_NAME: &str = "mgmt-hub";
/// The hub's binary.
pub const HUB_EXE: &str = "ibtca-mgmt-hub";
/// Prefix length of the management subnet.
pub const PREFIX: u8 = 16;

/// The hub's socket in `run_dir`.
pub fn hub_socket(run_dir: &Path) -> PathBuf {
    run_dir.join("mgmt.sock")
}

/// One guest's place on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The node (its host name).
    pub node: String,
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// Its NIC's MAC, `52:54:00:77:x:y`.
    pub mac: String,
}

/// Why the management network cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// A node name that cannot be a host name.
    #[error("node `{0}` cannot be a host name on the management network (letters, digits, '-' and '.', not starting with '-')")]
    BadHostName(String),
    /// More nodes than the subnet holds.
    #[error("{0} nodes: the management subnet 10.77.0.0/16 holds at most 65534")]
    TooMany(usize),
}

fn host_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.starts_with(['-', '.'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

/// Every node's address, in the plan's order.
pub fn addresses(nodes: &[NodePlan]) -> Result<Vec<Address>, NetError> {
    if nodes.len() > 65534 {
        return Err(NetError::TooMany(nodes.len()));
    }
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if !host_name_ok(&n.name) {
                return Err(NetError::BadHostName(n.name.clone()));
            }
            let [_, _, x, y] = u32::try_from(i + 1).unwrap_or(u32::MAX).to_be_bytes();
            Ok(Address {
                node: n.name.clone(),
                ip: Ipv4Addr::new(10, 77, x, y),
                mac: format!("52:54:00:77:{x:02x}:{y:02x}"),
            })
        })
        .collect()
}

/// The `/etc/hosts` every guest gets.
pub fn hosts_file(all: &[Address]) -> String {
    let mut text = String::from("127.0.0.1\tlocalhost\n");
    for a in all {
        let _ = writeln!(text, "{}\t{}", a.ip, a.node);
    }
    text
}

/// The QEMU arguments of `a`'s NIC on the wire whose socket QEMU sees as
/// `socket_in_chroot`.
pub fn qemu_args(a: &Address, socket_in_chroot: &Path) -> Vec<String> {
    vec![
        "-netdev".into(),
        format!(
            "stream,id=mgmt,server=off,addr.type=unix,addr.path={}",
            socket_in_chroot.display()
        ),
        "-device".into(),
        format!("virtio-net-pci,netdev=mgmt,mac={}", a.mac),
    ]
}

/// Waits up to `timeout` until the hub accepts on `socket`.
pub fn wait_listening(socket: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, plan};

    #[test]
    fn nodes_get_addresses_by_position_and_hosts_name_them() {
        let topo = parse(
            r#"{ "nodes": [ { "name": "n1", "lid": 1 }, { "name": "b-2", "lid": 2 } ],
                 "links": [ { "a": "n1", "b": "b-2" } ] }"#,
        )
        .unwrap();
        let p = plan(&topo, Path::new("/tmp/r")).unwrap();
        let a = addresses(&p.nodes).unwrap();
        assert_eq!(a[0].ip, Ipv4Addr::new(10, 77, 0, 1));
        assert_eq!(a[1].ip, Ipv4Addr::new(10, 77, 0, 2));
        assert_eq!(a[1].mac, "52:54:00:77:00:02");
        assert_eq!(
            hosts_file(&a),
            "127.0.0.1\tlocalhost\n10.77.0.1\tn1\n10.77.0.2\tb-2\n"
        );
        assert_eq!(
            qemu_args(&a[0], Path::new("/tmp/r/mgmt.sock")),
            [
                "-netdev",
                "stream,id=mgmt,server=off,addr.type=unix,addr.path=/tmp/r/mgmt.sock",
                "-device",
                "virtio-net-pci,netdev=mgmt,mac=52:54:00:77:00:01"
            ]
        );
        let mut bad = p.nodes.clone();
        bad[1].name = "a b".into();
        assert_eq!(addresses(&bad), Err(NetError::BadHostName("a b".into())));
        for name in ["-x", "", "x\ny", "é"] {
            assert!(!host_name_ok(name), "{name:?}");
        }
    }
}
