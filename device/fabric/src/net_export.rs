//! `ibtca-fabric export --net`: the running fabric as an ibnetdiscover /
//! ibsim net file (docs/topologies.md) that `up --net` loads back as the
//! same fabric: every switch and CA with its GUIDs, NodeDescription and
//! LID, and every link whose ports are up.
//!
//! The nodes, GUIDs, descriptions and links are the run directory's
//! topology (the plan `up` ran); what the agents report live overrides it:
//! a port's LID as the SM set it, and a link one of whose ports an agent
//! reports down is left out (and named in the notes). A port no agent
//! reported on (a process that does not answer) keeps its link.
//!
//! Layout, as ibnetdiscover writes it (tabs shown as two spaces):
//!
//! ```text
//! switchguid=0x20001
//! Switch  4 "leaf1"  # "leaf 1" base port 0 lid 9 lmc 0
//! [1]  "ca1-1"[1](100203)    # "host 1-1"
//!
//! caguid=0x100202
//! Ca  1 "ca1-1"  # "host 1-1"
//! [1](100203)  "leaf1"[1]    # lid 1 lmc 0 "leaf 1"
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;

use super::inspect::PortView;
use super::plan::{End, Plan};

/// The net file of `plan` with the live state of `ports`; and what was
/// left out, one line each.
pub fn net_file(plan: &Plan, ports: &[PortView]) -> (String, Vec<String>) {
    let live: HashMap<(&str, u8), &PortView> = ports
        .iter()
        .map(|p| ((p.name.as_str(), p.port), p))
        .collect();
    let end_name = |e: &End| -> (&str, u8) {
        match *e {
            End::Node(i) => (plan.nodes[i].name.as_str(), 1),
            End::Switch(i, port) => (plan.switches[i].name.as_str(), port),
        }
    };
    let mut notes = Vec::new();
    // Each end's peer, for links whose ends are both up (or unknown).
    let mut peer: HashMap<(&str, u8), &End> = HashMap::new();
    for (a, b) in &plan.links {
        let (ka, kb) = (end_name(a), end_name(b));
        let down = [ka, kb]
            .into_iter()
            .find(|k| live.get(k).is_some_and(|p| !p.up));
        if let Some((name, port)) = down {
            notes.push(format!(
                "link {}:{} - {}:{} left out: {name} port {port} is down",
                ka.0, ka.1, kb.0, kb.1
            ));
            continue;
        }
        peer.insert(ka, b);
        peer.insert(kb, a);
    }
    let lid_of = |name: &str, port: u8| {
        live.get(&(name, port))
            .and_then(|p| p.lid)
            .and_then(|l| u16::try_from(l).ok())
            .filter(|&l| l != 0)
    };
    // A port line's far end: `"id"[port]`, a CA's with its port GUID.
    let far = |e: &End| -> (String, String) {
        match *e {
            End::Node(i) => {
                let n = &plan.nodes[i];
                (
                    format!("\"{}\"[1]({:x})", n.name, n.port_guid),
                    quote(&n.description),
                )
            }
            End::Switch(i, port) => {
                let s = &plan.switches[i];
                (format!("\"{}\"[{port}]", s.name), quote(&s.description))
            }
        }
    };
    let mut out = format!(
        "# ibtca-fabric export: {} switches, {} CAs, {} links\n",
        plan.switches.len(),
        plan.nodes.len(),
        peer.len() / 2
    );
    for s in &plan.switches {
        let lid = lid_of(&s.name, 1)
            .map(|l| format!(" base port 0 lid {l} lmc 0"))
            .unwrap_or_default();
        let _ = write!(
            out,
            "\nswitchguid={:#x}\nSwitch\t{} \"{}\"\t# {}{lid}\n",
            s.guid,
            s.ports.len(),
            s.name,
            quote(&s.description)
        );
        for port in 1..=u8::try_from(s.ports.len()).unwrap_or(u8::MAX) {
            if let Some(e) = peer.get(&(s.name.as_str(), port)) {
                let (to, desc) = far(e);
                let _ = writeln!(out, "[{port}]\t{to}\t\t# {desc}");
            }
        }
    }
    for n in &plan.nodes {
        let _ = write!(
            out,
            "\ncaguid={:#x}\nCa\t1 \"{}\"\t# {}\n",
            n.node_guid,
            n.name,
            quote(&n.description)
        );
        let lid = lid_of(&n.name, 1).unwrap_or(n.lid);
        match peer.get(&(n.name.as_str(), 1)) {
            Some(e) => {
                let (to, desc) = far(e);
                let _ = writeln!(
                    out,
                    "[1]({:x})\t{to}\t\t# lid {lid} lmc 0 {desc}",
                    n.port_guid
                );
            }
            // An unlinked CA: the header only (its LID and port GUID are
            // not kept, as ibnetdiscover, which never sees it, would not).
            None => notes.push(format!("CA {} has no link: its port is not listed", n.name)),
        }
    }
    (out, notes)
}

/// `"text"`, with any `"` in it written as `'` (net files do not escape).
fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "'"))
}
