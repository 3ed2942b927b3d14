//! What a hive hosts, from its JSON file: switches and guestless CAs, and
//! where each port's wire goes.
//!
//! ```json
//! { "switches": [ { "name": "sw0", "guid": 1297036692699414529, "ports":
//!       ["hive:h1:1", "listen:/run/f/sw0-p2.link", null] } ],
//!   "cas": [ { "name": "h1", "guid": 1297036692682702849, "port": "hive:sw0:1" } ],
//!   "sm_managed": true }
//! ```
//!
//! A wire is `hive:NODE:PORT` (a port of another node of the same hive,
//! carried in memory; the other end must name this one back),
//! `listen:PATH` or `connect:PATH` (the Unix-socket link protocol, to a
//! node outside the hive), or `null` (nothing attached). A node's
//! NodeDescription is its `description`, else its name. A CA with
//! `"sim": "NAME"` is a host port (`sim.rs`): host programs own it through
//! ibsim's sockets of base name NAME.

use std::collections::HashMap;

use ibtca_link::LinkEndpoint;
use serde::Deserialize;

/// Where one port's wire goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireSpec {
    /// Nothing attached.
    None,
    /// A port of a node of the same hive: (node name, port).
    Hive(String, u8),
    /// A Unix-socket link to a node outside.
    Socket(LinkEndpoint),
}

impl WireSpec {
    fn parse(text: Option<&str>) -> Result<WireSpec, String> {
        let Some(text) = text else {
            return Ok(WireSpec::None);
        };
        if let Some(rest) = text.strip_prefix("hive:") {
            let (node, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| format!("wire `{text}`: hive:NODE:PORT"))?;
            let port: u8 = port
                .parse()
                .map_err(|_| format!("wire `{text}`: port `{port}` is not 1-254"))?;
            if port == 0 || port == u8::MAX {
                return Err(format!("wire `{text}`: port {port} is not 1-254"));
            }
            return Ok(WireSpec::Hive(node.to_owned(), port));
        }
        text.parse()
            .map(WireSpec::Socket)
            .map_err(|e| format!("wire `{text}`: {e} (or hive:NODE:PORT)"))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    guid: u64,
    #[serde(default)]
    lid: u16,
    ports: Vec<Option<String>>,
    #[serde(default)]
    routes: Vec<(u16, u8)>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    guid: u64,
    #[serde(default)]
    port_guid: Option<u64>,
    #[serde(default)]
    lid: u16,
    port: Option<String>,
    #[serde(default)]
    sim: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HiveFile {
    #[serde(default)]
    switches: Vec<SwitchFile>,
    #[serde(default)]
    cas: Vec<CaFile>,
    #[serde(default)]
    sm_managed: bool,
}

/// One hosted switch.
#[derive(Debug, Clone)]
pub struct SwitchSpec {
    /// Name (wires name it).
    pub name: String,
    /// NodeDescription (default: the name).
    pub description: String,
    /// Node GUID.
    pub guid: u64,
    /// LID without an SM (0: none).
    pub lid: u16,
    /// Ports 1..=N.
    pub ports: Vec<WireSpec>,
    /// Explicit routes (LID, port), as `ibtca-switch --route`.
    pub routes: Vec<(u16, u8)>,
}

/// One hosted CA (one port).
#[derive(Debug, Clone)]
pub struct CaSpec {
    /// Name (wires name it).
    pub name: String,
    /// NodeDescription (default: the name).
    pub description: String,
    /// Node GUID.
    pub guid: u64,
    /// Port GUID (default: the node GUID).
    pub port_guid: u64,
    /// LID without an SM.
    pub lid: u16,
    /// Port 1's wire.
    pub port: WireSpec,
    /// A host port: host programs own it through ibsim's client protocol
    /// on sockets of this base name (`IBSIM_SOCKNAME`), as
    /// `ibtca-simport --sockname`.
    pub sim: Option<String>,
}

/// Everything a hive hosts.
#[derive(Debug, Clone, Default)]
pub struct HiveConfig {
    /// Switches.
    pub switches: Vec<SwitchSpec>,
    /// CAs.
    pub cas: Vec<CaSpec>,
    /// An SM brings every hosted node up (as `--sm-managed`).
    pub sm_managed: bool,
}

impl HiveConfig {
    /// Parses and checks a hive file: unique names, in-memory wires that
    /// name each other back.
    pub fn parse(json: &str) -> Result<HiveConfig, String> {
        let file: HiveFile = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let mut cfg = HiveConfig {
            sm_managed: file.sm_managed,
            ..HiveConfig::default()
        };
        for s in file.switches {
            let ports = s
                .ports
                .iter()
                .map(|p| WireSpec::parse(p.as_deref()))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("switch {}: {e}", s.name))?;
            cfg.switches.push(SwitchSpec {
                description: s.description.unwrap_or_else(|| s.name.clone()),
                name: s.name,
                guid: s.guid,
                lid: s.lid,
                ports,
                routes: s.routes,
            });
        }
        for c in file.cas {
            let port =
                WireSpec::parse(c.port.as_deref()).map_err(|e| format!("CA {}: {e}", c.name))?;
            cfg.cas.push(CaSpec {
                port_guid: c.port_guid.unwrap_or(c.guid),
                description: c.description.unwrap_or_else(|| c.name.clone()),
                name: c.name,
                guid: c.guid,
                lid: c.lid,
                port,
                sim: c.sim,
            });
        }
        cfg.check()?;
        Ok(cfg)
    }

    /// Each node's wires: (node name, its ports' wires).
    pub fn nodes(&self) -> impl Iterator<Item = (&str, &[WireSpec])> {
        self.switches
            .iter()
            .map(|s| (s.name.as_str(), s.ports.as_slice()))
            .chain(
                self.cas
                    .iter()
                    .map(|c| (c.name.as_str(), std::slice::from_ref(&c.port))),
            )
    }

    fn check(&self) -> Result<(), String> {
        let mut ports: HashMap<&str, &[WireSpec]> = HashMap::new();
        for (name, wires) in self.nodes() {
            if ports.insert(name, wires).is_some() {
                return Err(format!("two nodes are named `{name}`"));
            }
        }
        for (name, wires) in self.nodes() {
            for (i, wire) in wires.iter().enumerate() {
                let WireSpec::Hive(other, port) = wire else {
                    continue;
                };
                let back = ports
                    .get(other.as_str())
                    .and_then(|w| w.get(usize::from(*port) - 1));
                let me = WireSpec::Hive(name.to_owned(), u8::try_from(i + 1).unwrap_or(0));
                if back != Some(&me) {
                    return Err(format!(
                        "{name} port {}: hive:{other}:{port} does not name it back",
                        i + 1
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wires_must_name_each_other_back() {
        let good = r#"{"switches":[{"name":"s","guid":1,"ports":["hive:c:1",null]}],
                       "cas":[{"name":"c","guid":2,"port":"hive:s:1"}]}"#;
        let cfg = HiveConfig::parse(good).unwrap();
        assert_eq!(cfg.cas[0].port, WireSpec::Hive("s".into(), 1));
        assert_eq!(cfg.switches[0].ports[1], WireSpec::None);
        let bad = good.replace("hive:s:1", "hive:s:2");
        assert!(HiveConfig::parse(&bad)
            .unwrap_err()
            .contains("does not name it back"));
        let dup = good.replace("\"name\":\"c\"", "\"name\":\"s\"");
        assert!(HiveConfig::parse(&dup).unwrap_err().contains("two nodes"));
        assert!(HiveConfig::parse(&good.replace("hive:c:1", "sock:x"))
            .unwrap_err()
            .contains("listen:PATH"));
    }
}
