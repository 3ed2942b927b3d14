//! Failures a user makes at run time through the control socket: an
//! in-memory wire taken down and up (`link NODE PORT down|up`), and a
//! hosted switch powered off and on (`switch NODE down|up`).
//!
//! A switch without power is what its neighbours see of a real one that
//! lost power: every link of it goes down at once (each neighbour's port
//! goes Down; a neighbour switch sends trap 128, so the SM sweeps and
//! routes around it), it answers nothing, forwards nothing and sends no
//! trap, and it forgets everything the SM gave it. Powered on, it is the
//! switch the file describes as it starts (under an SM: no LID, no
//! routes, ports Init until the SM's next sweep), and its links come up
//! again, except those `link` had taken down before.

use ibtca_link::LinkEvent;
use ibtca_switch::Origin;

use super::{switch_node, Hive, Node, Peer, PortRef};

impl Hive {
    /// The hosted node named `node` (its index).
    fn node_index(&self, node: &str) -> Result<usize, String> {
        self.names
            .get(node)
            .copied()
            .ok_or(format!("no hosted node `{node}`"))
    }

    /// Takes the in-memory wire at `node`'s `port` down (both ends see
    /// `Down`; what either end sends on it is dropped) or up again (both
    /// see `Up`, as a wire coming up at start). Refused at a switch
    /// without power, or facing one.
    pub fn set_link(&mut self, node: &str, port: &str, up: bool) -> Result<(), String> {
        let n = self.node_index(node)?;
        let here = port
            .parse::<u8>()
            .ok()
            .filter(|&p| p >= 1 && usize::from(p) <= self.peers.ports(n))
            .map(|port| PortRef { node: n, port })
            .ok_or(format!("{node} has no port `{port}`"))?;
        let Peer::Hive(there) = self.peers.get(n, here.port) else {
            return Err(format!("{node}:{port} is not wired inside the hive"));
        };
        if let Some(&off) = [n, there.node].iter().find(|i| self.off.contains_key(i)) {
            return Err(format!(
                "{} is powered off (switch {} up)",
                self.node_names[off], self.node_names[off]
            ));
        }
        let (a, b) = ((here.node, here.port), (there.node, there.port));
        if self.cut.contains(&a) != up {
            return Ok(());
        }
        for (at, other) in [(here, there), (there, here)] {
            let ev = if up {
                self.cut.remove(&(at.node, at.port));
                LinkEvent::Up {
                    peer: self.local(other),
                }
            } else {
                self.cut.insert((at.node, at.port));
                LinkEvent::Down {
                    reason: "taken down by the control socket".to_owned(),
                }
            };
            self.work.push_back((at, ev, Origin::Process));
        }
        tracing::info!(?a, ?b, up, "link {node}:{port}");
        Ok(())
    }

    /// Powers the hosted switch `node` off (every link of it down at
    /// both ends, its state gone) or on again (a fresh switch, its links
    /// up). Powering a switch in the state it is in does nothing.
    pub fn set_switch_power(&mut self, node: &str, on: bool) -> Result<(), String> {
        let n = self.node_index(node)?;
        if !matches!(self.nodes[n], Node::Switch(..)) {
            return Err(format!("{node} is not a switch"));
        }
        if self.off.contains_key(&n) != on {
            return Ok(());
        }
        tracing::info!(node, on, "switch power");
        if on {
            self.power_on(n)
        } else {
            self.power_off(n)
        }
    }

    fn power_off(&mut self, n: usize) -> Result<(), String> {
        // What it knew (LID, forwarding tables, port states, traps) goes
        // with the power: the node is replaced by the switch as it starts.
        self.nodes[n] = switch_node(&self.switch_specs[n], self.sm_managed, &self.switch_sent)?;
        self.mark_in_process(n);
        self.trapping.remove(&n);
        let mut cut = Vec::new();
        for (i, peer) in self.peers.of(n).into_iter().enumerate() {
            let port = u8::try_from(i + 1).unwrap_or(u8::MAX);
            match peer {
                Peer::Hive(there) if !self.cut.contains(&(n, port)) => {
                    self.cut.insert((n, port));
                    self.cut.insert((there.node, there.port));
                    cut.push(port);
                    self.work.push_back((
                        there,
                        LinkEvent::Down {
                            reason: format!("{} powered off", self.node_names[n]),
                        },
                        Origin::Process,
                    ));
                }
                _ => {}
            }
        }
        for (at, wire) in &mut self.sockets {
            if at.node == n {
                wire.power_off();
            }
        }
        for up in &mut self.up[n] {
            *up = false;
        }
        if let Some((_, dirty)) = &mut self.status {
            *dirty = true;
        }
        self.off.insert(n, cut);
        Ok(())
    }

    /// Brings the switch's wires up again; a wire to a node outside that
    /// cannot listen again is the error (the others are up).
    fn power_on(&mut self, n: usize) -> Result<(), String> {
        let cut = self.off.remove(&n).unwrap_or_default();
        for port in cut {
            let here = PortRef { node: n, port };
            let Peer::Hive(there) = self.peers.get(n, port) else {
                continue;
            };
            self.cut.remove(&(n, port));
            self.cut.remove(&(there.node, there.port));
            let (to_here, to_there) = (self.local(there), self.local(here));
            self.work
                .push_back((here, LinkEvent::Up { peer: to_here }, Origin::Process));
            self.work
                .push_back((there, LinkEvent::Up { peer: to_there }, Origin::Process));
        }
        let sockets: Vec<usize> = (0..self.sockets.len())
            .filter(|&i| self.sockets[i].0.node == n)
            .collect();
        let mut failed = Vec::new();
        for i in sockets {
            let at = self.sockets[i].0;
            let local = self.local(at);
            if let Err(e) = self.sockets[i].1.power_on(local) {
                failed.push(format!("port {}: {e}", at.port));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join("; "))
        }
    }
}
