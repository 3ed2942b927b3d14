//! ibnetdiscover's topology output, which is also ibsim's net file format
//! (docs/net-files.md): node records (`Switch`/`Ca`/`Hca` headers, one
//! line per connected port), with the attribute lines before a header
//! (`switchguid=`, `caguid=`, `sysimgguid=`, `vendid=`, `devid=`,
//! `width=`, `speed=`, `extspeed=`) and the `# ...` comments ibnetdiscover
//! appends (descriptions, LIDs, link widths and speeds).
//!
//! Pure: [`parse`] reads text and returns every node it understood, or
//! every problem with its line number. Node GUIDs a record does not give
//! are numbered as ibsim numbers them ([`SWITCH_GUID_BASE`],
//! [`CA_GUID_BASE`]), so an ibsim user's file keeps ibsim's GUIDs.

use std::collections::HashMap;

/// First node GUID of switches whose file sets no `switchguid=`.
pub const SWITCH_GUID_BASE: u64 = 0x20_0000;
/// First node GUID of CAs whose file sets no `caguid=`.
pub const CA_GUID_BASE: u64 = 0x10_0000;

/// A node's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetNodeKind {
    /// `Switch`.
    Switch,
    /// `Ca` or `Hca`.
    Ca,
    /// `Rt`.
    Router,
}

/// A link's signalling rate per lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkSpeed {
    /// 2.5 Gb/s.
    Sdr,
    /// 5 Gb/s.
    Ddr,
    /// 10 Gb/s.
    Qdr,
    /// Mellanox's 10 Gb/s with 64b/66b.
    Fdr10,
    /// 14 Gb/s.
    Fdr,
    /// 25 Gb/s.
    Edr,
    /// 50 Gb/s.
    Hdr,
    /// 100 Gb/s.
    Ndr,
}

impl LinkSpeed {
    fn from_name(name: &str) -> Option<LinkSpeed> {
        Some(match name {
            "SDR" => LinkSpeed::Sdr,
            "DDR" => LinkSpeed::Ddr,
            "QDR" => LinkSpeed::Qdr,
            "FDR10" => LinkSpeed::Fdr10,
            "FDR" => LinkSpeed::Fdr,
            "EDR" => LinkSpeed::Edr,
            "HDR" => LinkSpeed::Hdr,
            "NDR" => LinkSpeed::Ndr,
            _ => return None,
        })
    }

    /// Its name as ibnetdiscover prints it (`QDR`).
    pub fn name(self) -> &'static str {
        match self {
            LinkSpeed::Sdr => "SDR",
            LinkSpeed::Ddr => "DDR",
            LinkSpeed::Qdr => "QDR",
            LinkSpeed::Fdr10 => "FDR10",
            LinkSpeed::Fdr => "FDR",
            LinkSpeed::Edr => "EDR",
            LinkSpeed::Hdr => "HDR",
            LinkSpeed::Ndr => "NDR",
        }
    }
}

/// Widths (lanes) a link may have.
pub const LINK_WIDTHS: [u8; 5] = [1, 2, 4, 8, 12];

/// One connected port of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPort {
    /// The port's number (from 1).
    pub port: u8,
    /// Its GUID, where the line gives one (`[1](2c90200402b51)`).
    pub port_guid: Option<u64>,
    /// The node id at the other end.
    pub remote: String,
    /// The port at the other end.
    pub remote_port: u8,
    /// The port's own LID (a CA port's `# lid N`).
    pub lid: Option<u16>,
    /// Link width in lanes (`4x`, `w=`), else the file's `width=`.
    pub width: Option<u8>,
    /// Link speed (`QDR`, `s=`/`e=`), else the file's `speed=`.
    pub speed: Option<LinkSpeed>,
    /// Line number (from 1).
    pub line: usize,
}

/// One node record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetNode {
    /// Its type.
    pub kind: NetNodeKind,
    /// The quoted id links name it by (`"S-0008f105001094d2"`, `"Sw1"`).
    pub id: String,
    /// Its number of ports.
    pub ports: u8,
    /// NodeDescription: the header's `# "..."`, else the id (as ibsim).
    pub description: String,
    /// Node GUID: `switchguid=`/`caguid=` or ibsim's numbering.
    pub node_guid: u64,
    /// System image GUID (`sysimgguid=`), if given.
    pub system_guid: Option<u64>,
    /// `vendid=`, if given.
    pub vendor_id: Option<u32>,
    /// `devid=`, if given.
    pub device_id: Option<u32>,
    /// A switch's port-0 LID (`# ... port 0 lid N`), if given.
    pub lid: Option<u16>,
    /// Its connected ports, in file order.
    pub links: Vec<NetPort>,
    /// Line number of the header (from 1).
    pub line: usize,
}

/// A problem at one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct NetError {
    /// Line number (from 1).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Every problem of a file, in line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetErrors(pub Vec<NetError>);

impl std::fmt::Display for NetErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NetErrors {}

/// The parsed file: its nodes in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetFile {
    /// Every node record.
    pub nodes: Vec<NetNode>,
}

/// Attribute lines that apply to what follows them.
struct Pending {
    switch_guid: u64,
    ca_guid: u64,
    router_guid: u64,
    system_guid: Option<u64>,
    vendor_id: Option<u32>,
    device_id: Option<u32>,
    width: Option<u8>,
    speed: Option<LinkSpeed>,
}

/// Parses a net file or ibnetdiscover output; every problem is reported,
/// with its line number.
pub fn parse(text: &str) -> Result<NetFile, NetErrors> {
    let mut errors = Vec::new();
    let mut nodes: Vec<NetNode> = Vec::new();
    let mut pending = Pending {
        switch_guid: SWITCH_GUID_BASE,
        ca_guid: CA_GUID_BASE,
        router_guid: 0,
        system_guid: None,
        vendor_id: None,
        device_id: None,
        width: None,
        speed: None,
    };
    // True while port lines belong to the last node.
    let mut in_record = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let mut err = |message: String| errors.push(NetError { line, message });
        let t = raw.trim();
        if t.starts_with('#') {
            continue;
        }
        if t.is_empty() {
            in_record = false;
            continue;
        }
        if t.starts_with('[') {
            match (in_record, nodes.last_mut()) {
                (true, Some(node)) => match port_line(t, node.kind, &pending) {
                    Ok(p) => node.links.push(NetPort { line, ..p }),
                    Err(m) => err(m),
                },
                _ => err("a port line outside a node record".into()),
            }
            continue;
        }
        in_record = false;
        let word: String = t.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        let kind = match word.as_str() {
            "Switch" => Some(NetNodeKind::Switch),
            "Ca" | "Hca" => Some(NetNodeKind::Ca),
            "Rt" => Some(NetNodeKind::Router),
            _ => None,
        };
        if let Some(kind) = kind {
            match header(&t[word.len()..], kind, &mut pending) {
                Ok(node) => {
                    nodes.push(NetNode { line, ..node });
                    in_record = true;
                }
                Err(m) => err(m),
            }
            continue;
        }
        if let Err(m) = attribute(&word, t, &mut pending) {
            err(m);
        }
    }
    check_links(&nodes, &mut errors);
    if errors.is_empty() {
        Ok(NetFile { nodes })
    } else {
        errors.sort_by_key(|e| e.line);
        Err(NetErrors(errors))
    }
}

/// A number in C's `strtoul(.., 0)` notation: `0x` hex, else decimal.
fn number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The value of `name=VALUE` up to a `(` (`switchguid=0x..(..)`).
fn value<'a>(name: &str, t: &'a str) -> Result<&'a str, String> {
    let v = t[name.len()..]
        .trim_start()
        .strip_prefix('=')
        .ok_or_else(|| format!("`{name}` without `=`"))?;
    Ok(v.split('(').next().unwrap_or_default().trim())
}

fn attribute(word: &str, t: &str, p: &mut Pending) -> Result<(), String> {
    let num = |name: &str| -> Result<u64, String> {
        let v = value(name, t)?;
        number(v).ok_or_else(|| format!("`{name}`: `{v}` is not a number"))
    };
    let id32 = |name: &str| -> Result<u32, String> {
        u32::try_from(num(name)?).map_err(|_| format!("`{name}` is above 32 bits"))
    };
    match word {
        "switchguid" => p.switch_guid = num(word)?,
        "caguid" | "hcaguids" => p.ca_guid = num(word)?,
        "rtguid" => p.router_guid = num(word)?,
        "sysimgguid" => p.system_guid = Some(num(word)?),
        "vendid" => p.vendor_id = Some(id32(word)?),
        "devid" => p.device_id = Some(id32(word)?),
        "width" => p.width = Some(width_mask(num(word)?)?),
        "speed" => p.speed = Some(speed_mask(num(word)?)?),
        "extspeed" => p.speed = ext_speed_mask(num(word)?)?.or(p.speed),
        // ibnetdiscover -g groups nodes under chassis headings.
        "Chassis" | "Non" if t.contains("Chassis") => {}
        "include" | "do" | "module" | "pdebug" => {
            return Err(format!("ibsim's `{word}` extension is not supported"))
        }
        _ => {
            let shown: String = t.chars().take(40).collect();
            return Err(format!("unrecognised line `{shown}`"));
        }
    }
    Ok(())
}

/// The widest width in a LinkWidthEnabled mask (`w=`, `width=`).
fn width_mask(mask: u64) -> Result<u8, String> {
    // Bits: 1x, 4x, 8x, 12x, 2x.
    let lanes = [(8, 12), (4, 8), (2, 4), (16, 2), (1, 1)];
    lanes
        .iter()
        .find(|(bit, _)| mask & bit != 0)
        .filter(|_| mask < 32)
        .map(|&(_, l)| l)
        .ok_or_else(|| format!("width {mask} is not a width mask 1-31"))
}

/// The fastest speed in a LinkSpeedEnabled mask (`s=`; 0 means QDR).
fn speed_mask(mask: u64) -> Result<LinkSpeed, String> {
    match mask {
        0 => Ok(LinkSpeed::Qdr),
        1 => Ok(LinkSpeed::Sdr),
        2..=3 => Ok(LinkSpeed::Ddr),
        4..=7 => Ok(LinkSpeed::Qdr),
        _ => Err(format!("speed {mask} is not a speed mask 0-7")),
    }
}

/// The fastest speed in a LinkSpeedExtEnabled mask (`e=`; 0: none).
fn ext_speed_mask(mask: u64) -> Result<Option<LinkSpeed>, String> {
    let fastest = [
        (8, LinkSpeed::Ndr),
        (4, LinkSpeed::Hdr),
        (2, LinkSpeed::Edr),
        (1, LinkSpeed::Fdr),
    ];
    if mask > 15 {
        return Err(format!("extended speed {mask} is not a mask 0-15"));
    }
    Ok(fastest
        .iter()
        .find(|(bit, _)| mask & bit != 0)
        .map(|&(_, s)| s))
}

/// `"TEXT"` at the start of `t` (after blanks): the text and the rest.
fn quoted(t: &str) -> Option<(&str, &str)> {
    let t = t.trim_start().strip_prefix('"')?;
    let end = t.find('"')?;
    Some((&t[..end], &t[end + 1..]))
}

/// `NAME N` in `t`'s words: N.
fn after_word(words: &[&str], name: &str) -> Option<u64> {
    let at = words.iter().position(|w| *w == name)?;
    words.get(at + 1).and_then(|w| number(w))
}

fn lid(n: Option<u64>) -> Result<Option<u16>, String> {
    n.map(|n| u16::try_from(n).map_err(|_| format!("LID {n} is above 0xffff")))
        .transpose()
}

/// A header after its type word: `N "id" [# "desc" ... port 0 lid L]`.
fn header(rest: &str, kind: NetNodeKind, p: &mut Pending) -> Result<NetNode, String> {
    let rest = rest.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let ports = digits
        .parse::<u64>()
        .ok()
        .filter(|n| (1..=255).contains(n))
        .ok_or_else(|| "a node header needs its number of ports, 1-255".to_owned())?;
    let (id, rest) = quoted(&rest[digits.len()..]).ok_or("a node header needs a quoted id")?;
    if id.is_empty() {
        return Err("a node id is empty".into());
    }
    let comment = match rest.trim_start() {
        "" => "",
        r => r.strip_prefix('#').ok_or("text after the node id")?,
    };
    let (description, tail) = match quoted(comment) {
        Some((d, tail)) => (Some(d.to_owned()), tail),
        None => {
            let c = comment.trim();
            let cut = [" enhanced port ", " base port ", " lid ", " lmc "]
                .iter()
                .filter_map(|m| c.find(m))
                .min()
                .unwrap_or(c.len());
            let d = c[..cut].trim();
            ((!d.is_empty()).then(|| d.to_owned()), &c[cut..])
        }
    };
    let words: Vec<&str> = tail.split_whitespace().collect();
    let guid = match kind {
        NetNodeKind::Switch => &mut p.switch_guid,
        NetNodeKind::Ca => &mut p.ca_guid,
        NetNodeKind::Router => &mut p.router_guid,
    };
    let node_guid = *guid;
    // As ibsim: a switch takes one GUID, a CA one plus one per port.
    let step = if kind == NetNodeKind::Switch {
        1
    } else {
        ports + 1
    };
    *guid = guid.wrapping_add(step);
    let node = NetNode {
        kind,
        id: id.to_owned(),
        ports: ports as u8,
        description: description.unwrap_or_else(|| id.to_owned()),
        node_guid,
        system_guid: p.system_guid.take(),
        vendor_id: p.vendor_id.take(),
        device_id: p.device_id.take(),
        lid: lid(after_word(&words, "lid"))?,
        links: Vec::new(),
        line: 0,
    };
    Ok(node)
}

/// `[N]` or `[N](GUID)` at the start of `t`: N, the GUID and the rest.
fn port_ref(t: &str) -> Result<(u8, Option<u64>, &str), String> {
    let t = t
        .trim_start()
        .strip_prefix('[')
        .ok_or("expected `[PORT]`")?;
    let end = t.find(']').ok_or("`[` without `]`")?;
    let port = t[..end]
        .trim()
        .parse::<u8>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("port `{}` is not 1-255", &t[..end]))?;
    let rest = &t[end + 1..];
    match rest.strip_prefix('(') {
        Some(g) => {
            let end = g.find(')').ok_or("`(` without `)`")?;
            let guid = u64::from_str_radix(g[..end].trim_start_matches("0x"), 16)
                .map_err(|_| format!("port GUID `{}` is not hex", &g[..end]))?;
            Ok((port, Some(guid), &g[end + 1..]))
        }
        None => Ok((port, None, rest)),
    }
}

/// A port line: `[P](GUID) "remote"[RP](GUID) w=.. # comment`.
fn port_line(t: &str, kind: NetNodeKind, p: &Pending) -> Result<NetPort, String> {
    let (port, port_guid, rest) = port_ref(t)?;
    let (remote, rest) = quoted(rest).ok_or("a port line needs the remote node's quoted id")?;
    let (remote_port, rest) = if rest.starts_with('[') {
        let (rp, _, rest) = port_ref(rest)?;
        (rp, rest)
    } else {
        (1, rest)
    };
    let (options, comment) = rest.split_once('#').unwrap_or((rest, ""));
    let mut width = p.width;
    let mut speed = p.speed;
    for opt in options.split_whitespace() {
        let (name, v) = opt
            .split_once('=')
            .ok_or_else(|| format!("unexpected `{opt}` on a port line"))?;
        let v = number(v).ok_or_else(|| format!("`{opt}`: not a number"))?;
        match name {
            "w" => width = Some(width_mask(v)?),
            "s" => speed = Some(speed_mask(v)?),
            "e" => speed = ext_speed_mask(v)?.or(speed),
            _ => return Err(format!("unknown port option `{name}=`")),
        }
    }
    // ibnetdiscover: a CA's `# lid L lmc M "remote desc" lid RL 4xQDR`,
    // a switch's `# "remote desc" lid RL 4xQDR`.
    let (own, far) = match comment.find('"') {
        Some(q) => (
            &comment[..q],
            &comment[comment.rfind('"').unwrap_or(q) + 1..],
        ),
        None => ("", comment),
    };
    let own: Vec<&str> = own.split_whitespace().collect();
    let lid_here = if kind == NetNodeKind::Switch {
        None
    } else {
        lid(after_word(&own, "lid"))?
    };
    if let Some(rate) = far.split_whitespace().find(|w| w.contains('x')) {
        if let Some((lanes, name)) = rate.split_once('x') {
            let lanes = lanes
                .parse::<u8>()
                .ok()
                .filter(|l| LINK_WIDTHS.contains(l))
                .ok_or_else(|| format!("link rate `{rate}`: width is not 1, 2, 4, 8 or 12"))?;
            let s = LinkSpeed::from_name(name)
                .ok_or_else(|| format!("link rate `{rate}`: unknown speed `{name}`"))?;
            width = Some(lanes);
            speed = Some(s);
        }
    }
    Ok(NetPort {
        port,
        port_guid,
        remote: remote.to_owned(),
        remote_port,
        lid: lid_here,
        width,
        speed,
        line: 0,
    })
}

/// Checks across records: unique ids, ports within range and listed
/// once, every remote node known, and both sides of a link agreeing.
fn check_links(nodes: &[NetNode], errors: &mut Vec<NetError>) {
    let mut by_id: HashMap<&str, &NetNode> = HashMap::new();
    for n in nodes {
        if let Some(first) = by_id.insert(&n.id, n) {
            errors.push(NetError {
                line: n.line,
                message: format!("node id \"{}\" is also at line {}", n.id, first.line),
            });
            by_id.insert(&first.id, first);
        }
    }
    let mut guids: HashMap<u64, &NetNode> = HashMap::new();
    for n in nodes {
        if let Some(first) = guids.insert(n.node_guid, n) {
            errors.push(NetError {
                line: n.line,
                message: format!(
                    "node GUID {:#x} of \"{}\" is also \"{}\"'s (line {})",
                    n.node_guid, n.id, first.id, first.line
                ),
            });
        }
    }
    let mut peers: HashMap<(&str, u8), (&str, u8)> = HashMap::new();
    for n in nodes {
        for l in &n.links {
            let mut err = |message: String| {
                errors.push(NetError {
                    line: l.line,
                    message,
                })
            };
            if l.port > n.ports {
                err(format!(
                    "port {} but \"{}\" has {} ports",
                    l.port, n.id, n.ports
                ));
            }
            if peers
                .insert((&n.id, l.port), (&l.remote, l.remote_port))
                .is_some()
            {
                err(format!("port {} of \"{}\" is listed twice", l.port, n.id));
            }
            match by_id.get(l.remote.as_str()) {
                None => err(format!("no node has the id \"{}\"", l.remote)),
                Some(r) if l.remote_port > r.ports => err(format!(
                    "port {} of \"{}\", which has {} ports",
                    l.remote_port, r.id, r.ports
                )),
                Some(r) if r.id == n.id && l.remote_port == l.port => {
                    err(format!("port {} is linked to itself", l.port))
                }
                Some(_) => {}
            }
        }
    }
    for n in nodes {
        for l in &n.links {
            if let Some(&(back, back_port)) = peers.get(&(l.remote.as_str(), l.remote_port)) {
                if (back, back_port) != (n.id.as_str(), l.port) {
                    errors.push(NetError {
                        line: l.line,
                        message: format!(
                            "\"{}\"[{}] names \"{}\"[{}] but that port names \"{back}\"[{back_port}]",
                            n.id, l.port, l.remote, l.remote_port
                        ),
                    });
                }
            }
        }
    }
}
