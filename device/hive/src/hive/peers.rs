//! Where each hosted port's wire goes ([`Peers`]): one flat table of
//! 8-byte entries for every port of every node, port 1 of node 0 first.
//! Finding a hop's peer reads this one densely packed table (about 60 KB
//! for the 1,296-CA fat tree's 1,476 nodes, small enough to stay in
//! cache), not a heap block of its own per node.

use super::PortRef;

/// Where one port's wire goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Peer {
    /// Nowhere: what the port sends is dropped.
    None,
    /// A port of a hosted node.
    Hive(PortRef),
    /// A socket wire to a node outside (its index in the hive's list).
    Socket(usize),
}

/// A [`Peer`] as the table keeps it.
#[derive(Debug, Clone, Copy)]
enum Entry {
    None,
    Hive(u32, u8),
    Socket(u32),
}

/// Every hosted port's [`Peer`].
#[derive(Debug)]
pub(super) struct Peers {
    /// `first[node]`: the index in `table` of the node's port 1;
    /// `first[node + 1]` ends its ports.
    first: Vec<u32>,
    table: Vec<Entry>,
}

impl Default for Peers {
    fn default() -> Self {
        Peers {
            first: vec![0],
            table: Vec::new(),
        }
    }
}

fn index(i: usize) -> Result<u32, String> {
    u32::try_from(i).map_err(|_| format!("{i}: more nodes or ports than a hive holds"))
}

impl Peers {
    /// Adds the next node's ports, port 1 first.
    pub fn push_node(&mut self, ports: impl IntoIterator<Item = Peer>) -> Result<(), String> {
        for peer in ports {
            self.table.push(match peer {
                Peer::None => Entry::None,
                Peer::Hive(at) => Entry::Hive(index(at.node)?, at.port),
                Peer::Socket(i) => Entry::Socket(index(i)?),
            });
        }
        self.first.push(index(self.table.len())?);
        Ok(())
    }

    /// The entries of `node`'s ports (none for no such node).
    fn entries(&self, node: usize) -> &[Entry] {
        let start = self.first.get(node).map_or(0, |&i| i as usize);
        let end = self.first.get(node + 1).map_or(start, |&i| i as usize);
        self.table.get(start..end).unwrap_or_default()
    }

    /// How many ports `node` has.
    pub fn ports(&self, node: usize) -> usize {
        self.entries(node).len()
    }

    /// Where `node`'s `port` (1-based) leads: [`Peer::None`] for no such
    /// port.
    pub fn get(&self, node: usize, port: u8) -> Peer {
        let entry = self.entries(node).get(usize::from(port).wrapping_sub(1));
        match entry {
            None | Some(Entry::None) => Peer::None,
            Some(&Entry::Hive(node, port)) => Peer::Hive(PortRef {
                node: node as usize,
                port,
            }),
            Some(&Entry::Socket(i)) => Peer::Socket(i as usize),
        }
    }

    /// Every port of `node`, port 1 first.
    pub fn of(&self, node: usize) -> Vec<Peer> {
        (1..=self.ports(node))
            .map(|p| self.get(node, u8::try_from(p).unwrap_or(u8::MAX)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_port_finds_its_own_peer_and_no_port_finds_none() {
        let mut peers = Peers::default();
        let a = PortRef { node: 1, port: 3 };
        peers.push_node([Peer::Hive(a), Peer::None]).unwrap();
        peers.push_node([]).unwrap();
        peers
            .push_node([Peer::Socket(7), Peer::Hive(a), Peer::None])
            .unwrap();
        assert_eq!(
            (
                peers.ports(0),
                peers.ports(1),
                peers.ports(2),
                peers.ports(3)
            ),
            (2, 0, 3, 0)
        );
        assert_eq!(peers.get(0, 1), Peer::Hive(a));
        assert_eq!(peers.get(0, 2), Peer::None);
        assert_eq!(peers.get(0, 3), Peer::None, "node 0 has 2 ports");
        assert_eq!(peers.get(0, 0), Peer::None, "no port 0");
        assert_eq!(peers.get(1, 1), Peer::None);
        assert_eq!(peers.get(2, 1), Peer::Socket(7));
        assert_eq!(peers.get(2, 2), Peer::Hive(a));
        assert_eq!(peers.get(9, 1), Peer::None, "no node 9");
        assert_eq!(peers.of(2), [Peer::Socket(7), Peer::Hive(a), Peer::None]);
        assert_eq!(std::mem::size_of::<Entry>(), 8);
    }
}
