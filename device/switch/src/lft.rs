//! The linear forwarding table: destination LID → output port.
//!
//! Entries come from three places: routes given explicitly (the launcher
//! computes them for multi-switch paths), routes learned from the `Hello`
//! of a directly attached device, and LFT blocks the subnet manager sets
//! (`sma.rs`), which replace both. An explicit route wins over a learned
//! one, since the topology is the authority; a learned route stays after its link
//! goes down (packets to it are then dropped as "link down", as a real
//! switch keeps its LFT until the subnet manager's next sweep).

use std::collections::HashMap;
use std::sync::RwLock;

/// Highest unicast LID; 0 is reserved and 0xc000.. are multicast.
pub const MAX_UNICAST_LID: u16 = 0xbfff;

/// Where an entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteSource {
    /// Given on the command line or through [`Lft::set_static`].
    Static,
    /// Learned from the `Hello` of the peer on that port.
    Learned,
    /// Set by the subnet manager (an LFT block): wins over both.
    Sm,
}

/// One forwarding entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Output port (1-based).
    pub port: u8,
    /// Where the entry came from.
    pub source: RouteSource,
}

/// The table, shared by every port's reader thread.
#[derive(Debug, Default)]
pub struct Lft {
    routes: RwLock<HashMap<u16, Route>>,
    /// LinearFDBTop as the SM set it; `None`: the highest routed LID.
    top: RwLock<Option<u16>>,
}

impl Lft {
    /// An empty table.
    pub fn new() -> Self {
        Lft::default()
    }

    /// The output port for `dlid`, if the table has one.
    pub fn lookup(&self, dlid: u16) -> Option<u8> {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        routes.get(&dlid).map(|r| r.port)
    }

    /// Sets an explicit route (replacing any entry for `lid`).
    pub fn set_static(&self, lid: u16, port: u8) {
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.insert(
            lid,
            Route {
                port,
                source: RouteSource::Static,
            },
        );
    }

    /// Sets the subnet manager's route for `lid` (replacing any entry).
    pub fn set_sm(&self, lid: u16, port: u8) {
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.insert(
            lid,
            Route {
                port,
                source: RouteSource::Sm,
            },
        );
    }

    /// Removes the entry for `lid` (the SM set no route for it).
    pub fn remove(&self, lid: u16) {
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.remove(&lid);
    }

    /// LinearFDBTop: what the SM set, or the highest LID with a route.
    pub fn top(&self) -> u16 {
        if let Some(top) = *self.top.read().unwrap_or_else(|e| e.into_inner()) {
            return top;
        }
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        routes.keys().max().copied().unwrap_or(0)
    }

    /// Records the SM's LinearFDBTop.
    pub fn set_top(&self, top: u16) {
        *self.top.write().unwrap_or_else(|e| e.into_inner()) = Some(top);
    }

    /// Learns that `lid` is behind `port`; an explicit or SM route for
    /// `lid` is kept. Returns true if the table changed.
    pub fn learn(&self, lid: u16, port: u8) -> bool {
        if lid == 0 || lid > MAX_UNICAST_LID {
            return false;
        }
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        let learned = Route {
            port,
            source: RouteSource::Learned,
        };
        match routes.get(&lid) {
            Some(r) if r.source != RouteSource::Learned || *r == learned => false,
            _ => {
                routes.insert(lid, learned);
                true
            }
        }
    }

    /// Every entry, sorted by LID.
    pub fn entries(&self) -> Vec<(u16, Route)> {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = routes.iter().map(|(l, r)| (*l, *r)).collect();
        all.sort_by_key(|(l, _)| *l);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_routes_win_over_learned_ones() {
        let lft = Lft::new();
        assert_eq!(lft.lookup(5), None);
        assert!(lft.learn(5, 1));
        assert!(!lft.learn(5, 1), "same entry again changes nothing");
        assert_eq!(lft.lookup(5), Some(1));
        lft.set_static(5, 3);
        assert!(!lft.learn(5, 2));
        assert_eq!(lft.lookup(5), Some(3));
        assert_eq!(lft.entries().len(), 1);
    }

    #[test]
    fn the_sm_replaces_given_and_learned_routes() {
        let lft = Lft::new();
        lft.set_static(5, 3);
        assert!(lft.learn(6, 1));
        lft.set_sm(5, 2);
        lft.remove(6);
        assert!(!lft.learn(5, 1), "the SM's route stays");
        assert_eq!((lft.lookup(5), lft.lookup(6)), (Some(2), None));
        assert_eq!(lft.top(), 5);
        lft.set_top(0x40);
        assert_eq!(lft.top(), 0x40);
    }

    #[test]
    fn reserved_and_multicast_lids_are_not_learned() {
        let lft = Lft::new();
        assert!(!lft.learn(0, 1));
        assert!(!lft.learn(0xc000, 1));
        assert!(lft.entries().is_empty());
    }
}
