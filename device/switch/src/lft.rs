//! The linear forwarding table: destination LID → output port.
//!
//! Entries come from three places: routes given explicitly (the launcher
//! computes them for multi-switch paths), routes learned from the `Hello`
//! of a directly attached device, and LFT blocks the subnet manager sets
//! (`sma.rs`), which replace both. An explicit route wins over a learned
//! one, since the topology is the authority; a learned route stays after its link
//! goes down (packets to it are then dropped as "link down", as a real
//! switch keeps its LFT until the subnet manager's next sweep).

use std::sync::RwLock;

/// Highest unicast LID; 0 is reserved and 0xc000.. are multicast.
pub const MAX_UNICAST_LID: u16 = 0xbfff;

/// LinearFDBCap: the entries the table holds, LIDs 0..=[`MAX_UNICAST_LID`]
/// (SwitchInfo reports it). The table is a flat array indexed by LID, as
/// a switch's LFT is; it grows to the highest LID routed, never past this.
pub const LINEAR_FDB_CAP: u16 = MAX_UNICAST_LID + 1;

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

/// The table, shared by every port's reader thread: `routes[lid]`, two
/// bytes an entry, as long as the highest LID that ever had a route
/// plus one (at most [`LINEAR_FDB_CAP`] entries).
#[derive(Debug, Default)]
pub struct Lft {
    routes: RwLock<Vec<Option<Route>>>,
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
        routes
            .get(usize::from(dlid))
            .copied()
            .flatten()
            .map(|r| r.port)
    }

    /// Puts `route` at `lid` (a unicast LID: others are ignored) unless
    /// `keep` says the entry there stays; returns true if it was put.
    fn put_unless(&self, lid: u16, route: Option<Route>, keep: impl Fn(Route) -> bool) -> bool {
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        put_in(&mut routes, lid, route, keep)
    }

    fn put(&self, lid: u16, route: Option<Route>) {
        self.put_unless(lid, route, |_| false);
    }

    /// Sets the subnet manager's routes of the LFT block of 64 LIDs from
    /// `first`: port `ports[i]` for LID `first + i`, none where it is
    /// `none`, replacing any entry (LID 0 is left alone), under one lock.
    pub fn set_sm_block(&self, first: u16, ports: &[u8; 64], none: u8) {
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        // The block's unicast LIDs: LID 0 and LIDs past the last unicast
        // one are left alone.
        let start = usize::from(first.max(1));
        let end = (usize::from(first) + ports.len()).min(usize::from(MAX_UNICAST_LID) + 1);
        if end <= start {
            return;
        }
        let Some(ports) = ports.get(start - usize::from(first)..end - usize::from(first)) else {
            return;
        };
        if let Some(last) = ports.iter().rposition(|&p| p != none) {
            // Whole LFT blocks of 64 LIDs, as the SM sets them, up to the
            // highest LID routed.
            let len = (start + last) / 64 * 64 + 64;
            let have = routes.len();
            if have < len {
                routes.reserve_exact(len - have);
                routes.resize(len, None);
            }
        }
        // Past the table's end every entry is none already.
        let stop = routes.len().clamp(start, end);
        let Some(slots) = routes.get_mut(start..stop) else {
            return;
        };
        for (slot, &port) in slots.iter_mut().zip(ports) {
            *slot = (port != none).then_some(Route {
                port,
                source: RouteSource::Sm,
            });
        }
    }

    /// The output ports of the 64 LIDs from `first`, as [`Lft::lookup`]
    /// gives each, under one lock.
    pub fn block(&self, first: u16) -> [Option<u8>; 64] {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        let mut block = [None; 64];
        let first = usize::from(first);
        let held = routes.get(first..).unwrap_or_default();
        for (port, route) in block.iter_mut().zip(held) {
            *port = route.map(|r| r.port);
        }
        block
    }

    /// Sets an explicit route (replacing any entry for `lid`).
    pub fn set_static(&self, lid: u16, port: u8) {
        let source = RouteSource::Static;
        self.put(lid, Some(Route { port, source }));
    }

    /// Sets the subnet manager's route for `lid` (replacing any entry).
    pub fn set_sm(&self, lid: u16, port: u8) {
        let source = RouteSource::Sm;
        self.put(lid, Some(Route { port, source }));
    }

    /// Removes the entry for `lid` (the SM set no route for it).
    pub fn remove(&self, lid: u16) {
        self.put(lid, None);
    }

    /// LinearFDBTop: what the SM set, or the highest LID with a route.
    pub fn top(&self) -> u16 {
        if let Some(top) = *self.top.read().unwrap_or_else(|e| e.into_inner()) {
            return top;
        }
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        let highest = routes.iter().rposition(Option::is_some).unwrap_or(0);
        u16::try_from(highest).unwrap_or(MAX_UNICAST_LID)
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
        let learned = Route {
            port,
            source: RouteSource::Learned,
        };
        self.put_unless(lid, Some(learned), |r| {
            r.source != RouteSource::Learned || r == learned
        })
    }

    /// Every entry, sorted by LID.
    pub fn entries(&self) -> Vec<(u16, Route)> {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        (0..=MAX_UNICAST_LID)
            .zip(routes.iter())
            .filter_map(|(lid, r)| r.map(|r| (lid, r)))
            .collect()
    }

    /// Bytes the table's entries occupy (its capacity).
    pub fn footprint(&self) -> usize {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        routes.capacity() * std::mem::size_of::<Option<Route>>()
    }
}

/// Puts `route` at `lid` in `routes` (a unicast LID: others are ignored)
/// unless `keep` says the entry there stays; returns true if it was put.
fn put_in(
    routes: &mut Vec<Option<Route>>,
    lid: u16,
    route: Option<Route>,
    keep: impl Fn(Route) -> bool,
) -> bool {
    if lid > MAX_UNICAST_LID {
        return false;
    }
    let i = usize::from(lid);
    if i >= routes.len() {
        if route.is_none() {
            return false;
        }
        // Whole LFT blocks of 64 LIDs, as the SM sets them.
        let len = (i / 64 + 1) * 64;
        let have = routes.len();
        routes.reserve_exact(len - have);
        routes.resize(len, None);
    }
    if routes[i].is_some_and(keep) {
        return false;
    }
    routes[i] = route;
    true
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
    fn the_table_is_as_long_as_the_highest_routed_lid_and_no_longer() {
        let lft = Lft::new();
        assert_eq!(lft.footprint(), 0);
        lft.set_sm(13_000, 3);
        assert_eq!(lft.lookup(13_000), Some(3));
        assert_eq!((lft.lookup(12_999), lft.lookup(13_001)), (None, None));
        // Two bytes a LID up to the end of LID 13,000's 64-LID block.
        assert_eq!(lft.footprint(), 2 * 13_056);
        // Removing or routing below the end allocates nothing more.
        lft.remove(20_000);
        lft.set_static(7, 1);
        assert_eq!(lft.footprint(), 2 * 13_056);
        assert_eq!(
            lft.entries()
                .iter()
                .map(|(l, r)| (*l, r.port))
                .collect::<Vec<_>>(),
            [(7, 1), (13_000, 3)]
        );
    }

    #[test]
    fn lids_beyond_the_linear_fdb_cap_are_not_stored() {
        let lft = Lft::new();
        lft.set_static(MAX_UNICAST_LID, 2);
        assert_eq!(lft.lookup(MAX_UNICAST_LID), Some(2));
        for lid in [LINEAR_FDB_CAP, 0xc001, u16::MAX] {
            lft.set_static(lid, 1);
            lft.set_sm(lid, 1);
            assert_eq!(lft.lookup(lid), None, "LID {lid:#x}");
        }
        assert_eq!(lft.footprint(), 2 * usize::from(LINEAR_FDB_CAP));
        assert_eq!(lft.top(), MAX_UNICAST_LID);
    }

    #[test]
    fn top_is_the_highest_lid_still_routed() {
        let lft = Lft::new();
        assert_eq!(lft.top(), 0);
        lft.set_sm(100, 1);
        lft.set_sm(200, 2);
        assert_eq!(lft.top(), 200);
        lft.remove(200);
        assert_eq!(lft.top(), 100);
    }

    #[test]
    fn an_sm_block_sets_its_64_lids_as_sets_one_by_one_do() {
        let (block, one_by_one) = (Lft::new(), Lft::new());
        for lft in [&block, &one_by_one] {
            lft.set_static(70, 3);
            assert!(lft.learn(71, 2));
            lft.set_static(5, 1);
        }
        let mut ports = [255u8; 64];
        (ports[6], ports[10], ports[63]) = (4, 2, 1);
        block.set_sm_block(64, &ports, 255);
        for (lid, &port) in (64..).zip(&ports) {
            match port {
                255 => one_by_one.remove(lid),
                _ => one_by_one.set_sm(lid, port),
            }
        }
        assert_eq!(block.entries(), one_by_one.entries());
        let looked_up: Vec<Option<u8>> = (64..128).map(|lid| block.lookup(lid)).collect();
        assert_eq!(block.block(64)[..], looked_up[..]);
        assert_eq!(block.block(64)[6..8], [Some(4), None]);
        // Block 0: LID 0 is left alone; the last block's LIDs all stored.
        block.set_sm_block(0, &[2; 64], 255);
        assert_eq!(
            (block.lookup(0), block.lookup(1), block.lookup(5)),
            (None, Some(2), Some(2))
        );
        block.set_sm_block(MAX_UNICAST_LID - 63, &[3; 64], 255);
        assert_eq!(block.block(MAX_UNICAST_LID - 63), [Some(3); 64]);
    }

    #[test]
    fn a_block_anywhere_stores_and_grows_the_table_as_sets_one_by_one_do() {
        let firsts = [0u16, 10, 64, 100, 1000, 0xbfc0, 0xbff0, 0xc000, 0xffc0];
        for (k, &first) in firsts.iter().enumerate() {
            for pattern in 0..4usize {
                let (block, one_by_one) = (Lft::new(), Lft::new());
                for lft in [&block, &one_by_one] {
                    lft.set_static(3, 1);
                    lft.set_static(first.saturating_add(2), 2);
                }
                let ports: [u8; 64] = std::array::from_fn(|i| match pattern {
                    0 => 255,
                    1 => (i % 5) as u8,
                    2 if i < 8 => 7,
                    3 if (i + k) % 9 == 0 => 4,
                    _ => 255,
                });
                block.set_sm_block(first, &ports, 255);
                for (lid, &port) in (first..=u16::MAX).zip(&ports).filter(|(l, _)| *l != 0) {
                    match port {
                        255 => one_by_one.remove(lid),
                        _ => one_by_one.set_sm(lid, port),
                    }
                }
                let case = format!("first {first:#x}, pattern {pattern}");
                assert_eq!(block.entries(), one_by_one.entries(), "{case}");
                assert_eq!(block.footprint(), one_by_one.footprint(), "{case}");
            }
        }
    }

    #[test]
    fn reserved_and_multicast_lids_are_not_learned() {
        let lft = Lft::new();
        assert!(!lft.learn(0, 1));
        assert!(!lft.learn(0xc000, 1));
        assert!(lft.entries().is_empty());
    }
}
