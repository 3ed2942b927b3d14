//! Reading what infiniband-diags print in a guest (`ibstat`, `smpquery`,
//! `ibnetdiscover`, `ibroute`, `ibtracert`, `saquery`, `perfquery`): the
//! links, LIDs, routes, hops, node records and counters the OpenSM tests
//! compare with the topology file. Lines come from
//! `console::tagged_lines`, without their tag.

use std::collections::{BTreeMap, BTreeSet};

/// A (GUID, port) end of a link.
pub type PortEnd = (u64, u8);

/// A hexadecimal number, with or without `0x`.
pub fn hex(s: &str) -> Option<u64> {
    let s = s.trim().trim_start_matches("0x");
    u64::from_str_radix(s, 16).ok()
}

/// The value after `key` in a `key:....value` or `key: value` line.
pub fn field<'a>(lines: &[&'a str], key: &str) -> Option<&'a str> {
    lines
        .iter()
        .find_map(|l| l.trim_start().strip_prefix(key))
        .map(|v| v.trim_start_matches(['.', ':', ' ', '\t']).trim())
}

/// A link's two ends, the lesser first.
pub fn ordered(a: PortEnd, b: PortEnd) -> (PortEnd, PortEnd) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

/// ibnetdiscover's links and the LIDs it names (GUID → LID).
pub fn netdiscover(lines: &[&str]) -> (BTreeSet<(PortEnd, PortEnd)>, BTreeMap<u64, u16>) {
    let mut links = BTreeSet::new();
    let mut lids = BTreeMap::new();
    let mut current: Option<u64> = None;
    let guid_in = |s: &str| hex(s.split('"').nth(1)?.get(2..)?);
    let lid_after = |s: &str, word: &str| -> Option<u16> {
        let i = s.find(word)? + word.len();
        s[i..].split_whitespace().next()?.parse().ok()
    };
    for l in lines {
        if l.starts_with("Switch") || l.starts_with("Ca") {
            current = guid_in(l);
            if let (Some(g), Some(lid)) = (current, lid_after(l, "base port 0 lid ")) {
                lids.insert(g, lid);
            }
        } else if let (Some(me), true) = (current, l.starts_with('[')) {
            // "[1]\t"H-1200000000010001"[1](...)  # ..." (a switch port) or
            // "[1](1200000000010001) \t"S-1200000000ff0001"[1]  # lid 1 ..." (a CA's).
            let port: u8 = l[1..l.find(']').unwrap()].parse().unwrap();
            let Some(peer) = guid_in(l) else { continue };
            let after = &l[l.find(&format!("{peer:016x}\"")).unwrap() + 17..];
            let peer_port: u8 = after
                .strip_prefix('[')
                .and_then(|a| a.split(']').next())
                .and_then(|p| p.parse().ok())
                .unwrap();
            links.insert(ordered((me, port), (peer, peer_port)));
            // A CA's port line names its own LID first ("# lid 1 lmc 0").
            if let Some(lid) = lid_after(l, "# lid ") {
                lids.insert(me, lid);
            }
        }
    }
    (links, lids)
}

/// ibroute's tables: switch GUID → (LID → out port).
pub fn ibroute(lines: &[&str]) -> BTreeMap<u64, BTreeMap<u16, u8>> {
    let mut out: BTreeMap<u64, BTreeMap<u16, u8>> = BTreeMap::new();
    let mut current = None;
    for l in lines {
        if l.starts_with("Unicast lids") {
            current = l
                .split_whitespace()
                .skip_while(|w| *w != "guid")
                .nth(1)
                .and_then(hex);
        } else if let (Some(sw), Some(lid)) = (current, l.strip_prefix("0x")) {
            let mut w = lid.split_whitespace();
            let lid = u16::from_str_radix(w.next().unwrap(), 16).unwrap();
            let port: u8 = w.next().unwrap().parse().unwrap();
            out.entry(sw).or_default().insert(lid, port);
        }
    }
    out
}

/// ibtracert's hops: (out port, GUID, in port) after the source line.
pub fn tracert(lines: &[&str]) -> Vec<(u8, u64, u8)> {
    lines
        .iter()
        .filter(|l| l.starts_with('[') && l.contains("->"))
        .map(|l| {
            let out: u8 = l[1..l.find(']').unwrap()].parse().unwrap();
            let g = &l[l.find('{').unwrap() + 1..l.find('}').unwrap()];
            let rest = &l[l.find('}').unwrap() + 2..];
            let inp: u8 = rest[..rest.find(']').unwrap()].parse().unwrap();
            (out, hex(g).unwrap(), inp)
        })
        .collect()
}

/// saquery's node records: (LID, node GUID).
pub fn node_records(lines: &[&str]) -> BTreeSet<(u16, u64)> {
    let mut out = BTreeSet::new();
    let mut lid = None;
    for l in lines {
        let l = l.trim();
        if let Some(v) = l.strip_prefix("lid.") {
            lid = v.trim_start_matches('.').parse().ok();
        } else if let Some(v) = l.strip_prefix("node_guid.") {
            if let (Some(lid), Some(g)) = (lid.take(), hex(v.trim_start_matches('.'))) {
                out.insert((lid, g));
            }
        }
    }
    out
}

/// A counter perfquery printed.
pub fn counter(lines: &[&str], name: &str) -> u64 {
    field(lines, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {lines:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEFT: u64 = 0x2000_0000_00ff_0001;
    const RIGHT: u64 = 0x2000_0000_00ff_0002;
    const N1: u64 = 0x1200_0000_0001_0001;

    fn lines(text: &str) -> Vec<&str> {
        text.lines().collect()
    }

    #[test]
    fn ibnetdiscover_gives_links_from_both_ends_and_lids() {
        let out = "#\n# Topology file: generated on Thu Nov 26 01:00:00 2026\n#\n\
vendid=0x0\ndevid=0x0\nsysimgguid=0x2000000000ff0001\n\
switchguid=0x2000000000ff0001(2000000000ff0001)\n\
Switch\t3 \"S-2000000000ff0001\"\t\t# \"left\" base port 0 lid 10 lmc 0\n\
[1]\t\"H-1200000000010001\"[1](1200000000010002) \t\t# \"n1 ibtca\" lid 1 4xSDR\n\
[3]\t\"S-2000000000ff0002\"[3]\t\t# \"right\" lid 11 4xSDR\n\
\n\
vendid=0x0\ndevid=0x0\nsysimgguid=0x1200000000010001\ncaguid=0x1200000000010001\n\
Ca\t1 \"H-1200000000010001\"\t\t# \"n1 ibtca\"\n\
[1](1200000000010002) \t\"S-2000000000ff0001\"[1]\t\t# lid 1 lmc 0 \"left\" lid 10 4xSDR\n";
        let (links, lids) = netdiscover(&lines(out));
        assert_eq!(
            links,
            BTreeSet::from([((N1, 1), (LEFT, 1)), ((LEFT, 3), (RIGHT, 3))])
        );
        assert_eq!(lids, BTreeMap::from([(N1, 1), (LEFT, 10)]));
    }

    #[test]
    fn ibroute_gives_each_switchs_lid_to_port_table() {
        let out = "Unicast lids [0x0-0xb] of switch DR path slid 0; dlid 0; 0,1 guid 0x2000000000ff0001 (left):\n\
  Lid  Out   Destination\n       Port     Info \n\
0x0001 001 : (Channel Adapter portguid 0x1200000000010002: 'n1 ibtca')\n\
0x000a 000 : (Switch portguid 0x2000000000ff0001: 'left')\n\
0x000b 003 : (Switch portguid 0x2000000000ff0002: 'right')\n\
3 valid lids dumped \n";
        let tables = ibroute(&lines(out));
        assert_eq!(
            tables,
            BTreeMap::from([(LEFT, BTreeMap::from([(1, 1), (10, 0), (11, 3)]))])
        );
    }

    #[test]
    fn ibtracert_gives_the_hops_between_the_end_lines() {
        let out = "From ca {0x1200000000010001} portnum 1 lid 1-1 \"n1 ibtca\"\n\
[1] -> switch port {0x2000000000ff0001}[1] lid 10-10 \"left\"\n\
[3] -> switch port {0x2000000000ff0002}[3] lid 11-11 \"right\"\n\
[2] -> ca port {0x1200000000040002}[1] lid 4-4 \"n4 ibtca\"\n\
To ca {0x1200000000040001} portnum 1 lid 4-4 \"n4 ibtca\"\n";
        assert_eq!(
            tracert(&lines(out)),
            [(1, LEFT, 1), (3, RIGHT, 3), (2, 0x1200_0000_0004_0002, 1)]
        );
    }

    #[test]
    fn saquery_node_records_pair_each_lid_with_its_node_guid() {
        let out = "NodeRecord dump:\n\t\tlid.....................1\n\
\t\treserved................0x0\n\t\tbase_version............0x1\n\
\t\tnode_guid...............0x1200000000010001\n\
NodeRecord dump:\n\t\tlid.....................10\n\
\t\tnode_guid...............0x2000000000ff0001\n";
        assert_eq!(
            node_records(&lines(out)),
            BTreeSet::from([(1, N1), (10, LEFT)])
        );
    }

    #[test]
    fn perfquery_counters_and_ibstat_fields_are_read_by_name() {
        let perf = "# Port counters: Lid 3 port 1 (CapMask: 0x1400)\n\
PortSelect:......................1\nCounterSelect:...................0x0000\n\
PortXmitData:....................1234\nPortRcvData:.....................567\n";
        let perf = lines(perf);
        assert_eq!(counter(&perf, "PortXmitData"), 1234);
        assert_eq!(counter(&perf, "PortRcvData"), 567);
        assert_eq!(field(&perf, "CounterSelect").and_then(hex), Some(0));
        let ibstat =
            lines("CA 'ibtca0'\n\tPort 1:\n\t\tState: Active\n\t\tBase lid: 3\n\t\tSM lid: 1\n");
        assert_eq!(
            (
                field(&ibstat, "State:"),
                field(&ibstat, "Base lid:"),
                field(&ibstat, "SM lid:")
            ),
            (Some("Active"), Some("3"), Some("1"))
        );
        assert_eq!(field(&ibstat, "Rate:"), None);
    }

    #[test]
    #[should_panic(expected = "PortXmitWait in")]
    fn a_missing_counter_panics_naming_it() {
        counter(&["PortXmitData:....1"], "PortXmitWait");
    }
}
