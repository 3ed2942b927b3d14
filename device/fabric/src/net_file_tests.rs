//! The net file parser and its import: ibnetdiscover's annotations,
//! ibsim's options and GUID numbering, and every error with its line.

use super::net_file::{parse, LinkSpeed, NetNodeKind, CA_GUID_BASE, SWITCH_GUID_BASE};
use super::net_import::import;

/// ibnetdiscover's output for one switch and two HCAs (its layout, with
/// made-up GUIDs and descriptions).
const DISCOVERED: &str = r#"#
# Topology file: generated on Sun Nov 29 05:00:00 2026
#
# Initiated from node 0002c90300001000 port 0002c90300001001

vendid=0x2c9
devid=0xbd36
sysimgguid=0x2c90200005000
switchguid=0x2c90200005000(2c90200005000)
Switch	8 "S-0002c90200005000"		# "leaf one" base port 0 lid 5 lmc 0
[1]	"H-0002c90300001000"[1](2c90300001001) 		# "node one mlx4_0" lid 1 4xQDR
[3]	"H-0002c90300002000"[2](2c90300002002) 		# "node two mlx4_0" lid 2 1xSDR

vendid=0x2c9
devid=0x673c
sysimgguid=0x2c90300001003
caguid=0x2c90300001000
Ca	2 "H-0002c90300001000"		# "node one mlx4_0"
[1](2c90300001001) 	"S-0002c90200005000"[1]		# lid 1 lmc 0 "leaf one" lid 5 4xQDR

caguid=0x2c90300002000
Ca	2 "H-0002c90300002000"		# "node two mlx4_0"
[2](2c90300002002) 	"S-0002c90200005000"[3]		# lid 2 lmc 0 "leaf one" lid 5 1xSDR
"#;

#[test]
fn ibnetdiscover_output_keeps_guids_lids_descriptions_and_rates() {
    let net = parse(DISCOVERED).unwrap();
    assert_eq!(net.nodes.len(), 3);
    let sw = &net.nodes[0];
    assert_eq!(
        (sw.kind, sw.id.as_str(), sw.ports, sw.node_guid, sw.line),
        (
            NetNodeKind::Switch,
            "S-0002c90200005000",
            8,
            0x2c90200005000,
            10
        )
    );
    assert_eq!(sw.description, "leaf one");
    assert_eq!(sw.lid, Some(5));
    assert_eq!(sw.system_guid, Some(0x2c90200005000));
    assert_eq!((sw.vendor_id, sw.device_id), (Some(0x2c9), Some(0xbd36)));
    assert_eq!(sw.links.len(), 2);
    let l = &sw.links[1];
    assert_eq!(
        (l.port, l.remote.as_str(), l.remote_port, l.line),
        (3, "H-0002c90300002000", 2, 12)
    );
    assert_eq!((l.width, l.speed), (Some(1), Some(LinkSpeed::Sdr)));
    let ca = &net.nodes[2];
    assert_eq!((ca.kind, ca.node_guid), (NetNodeKind::Ca, 0x2c90300002000));
    assert_eq!(ca.description, "node two mlx4_0");
    assert_eq!(ca.system_guid, None, "sysimgguid= applies to one node");
    let p = &ca.links[0];
    assert_eq!(
        (p.port, p.port_guid, p.lid, p.width, p.speed),
        (
            2,
            Some(0x2c90300002002),
            Some(2),
            Some(1),
            Some(LinkSpeed::Sdr)
        )
    );
}

#[test]
fn import_makes_one_device_per_ca_port_with_the_files_identity() {
    let imported = import(&parse(DISCOVERED).unwrap()).unwrap();
    let t = &imported.topology;
    assert_eq!(t["switches"][0]["name"], "S-0002c90200005000");
    assert_eq!(t["switches"][0]["guid"], "0x2c90200005000");
    assert_eq!(t["switches"][0]["ports"], 8);
    assert_eq!(t["switches"][0]["description"], "leaf one");
    let two = &t["nodes"][1];
    assert_eq!(two["name"], "H-0002c90300002000");
    assert_eq!(two["node_guid"], "0x2c90300002000");
    assert_eq!(two["port_guid"], "0x2c90300002002");
    assert_eq!(two["lid"], 2);
    assert_eq!(two["description"], "node two mlx4_0");
    let links = t["links"].as_array().unwrap();
    assert_eq!(
        links.len(),
        2,
        "each link once, though listed from both ends"
    );
    assert_eq!(links[1]["a"], "S-0002c90200005000:3");
    assert_eq!(links[1]["b"], "H-0002c90300002000");
    let w = imported.warnings.join("\n");
    for dropped in [
        "widths and speeds",
        "system image GUIDs",
        "vendor",
        "switch LIDs",
        "1 CA port",
    ] {
        assert!(w.contains(dropped), "no warning about {dropped}: {w}");
    }
    let topo = crate::parse(&t.to_string()).unwrap();
    let plan = crate::plan(&topo, std::path::Path::new("/tmp/r")).unwrap();
    assert_eq!(plan.nodes[0].description, "node one mlx4_0");
    assert_eq!(plan.switches[0].description, "leaf one");
    assert_eq!(plan.nodes[1].port_guid, 0x2c90300002002);
}

#[test]
fn ibsim_numbering_options_and_multi_port_cas() {
    let text = "Switch 4 \"sw\"\n[1] \"h\"[1] w=2 s=4\n[2] \"h\"[2]\n\n\
                Hca 2 \"h\"\n[1] \"sw\"[1]\n[2] \"sw\"[2]\n\n\
                switchguid=0x500\nSwitch 2 \"sw2\"\n\nSwitch 2 \"sw3\" # \"big one\"\n";
    let net = parse(text).unwrap();
    let guids: Vec<u64> = net.nodes.iter().map(|n| n.node_guid).collect();
    assert_eq!(guids, [SWITCH_GUID_BASE, CA_GUID_BASE, 0x500, 0x501]);
    assert_eq!(net.nodes[0].links[0].width, Some(4));
    assert_eq!(net.nodes[0].links[0].speed, Some(LinkSpeed::Qdr));
    assert_eq!(net.nodes[1].description, "h", "no description: the id");
    assert_eq!(net.nodes[3].description, "big one");
    let imported = import(&net).unwrap();
    let nodes = imported.topology["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["h-p1", "h-p2"]);
    assert_eq!(nodes[0]["node_guid"], "0x100000");
    assert_eq!(nodes[0]["port_guid"], "0x100001");
    assert_eq!(nodes[1]["node_guid"], "0x100002");
    assert_eq!(nodes[1]["lid"], 2);
    assert!(imported
        .warnings
        .iter()
        .any(|w| w.contains("becomes h-p1, h-p2")));
}

#[test]
fn every_error_is_reported_with_its_line() {
    let text = "Switch 4 \"a\"\n[5] \"c\"[1]\n[1] \"nobody\"[1]\n\n\
                Hca 0 \"b\"\n[1] \"a\"\n\n\
                include other.net\nwidth=99\n\
                Hca 1 \"c\"\n[1](xyz) \"a\"[2]\n[1] \"a\"[3] # lid 1 lmc 0 \"a\" lid 3 4xWHAT\n\n\
                [2] \"a\"[1]\nHca 1 \"a\"\n";
    let errors = parse(text).unwrap_err().0;
    let got: Vec<(usize, &str)> = errors
        .iter()
        .map(|e| (e.line, e.message.as_str()))
        .collect();
    let expect: &[(usize, &str)] = &[
        (2, "port 5 but \"a\" has 4 ports"),
        (3, "no node has the id \"nobody\""),
        (5, "number of ports"),
        (6, "outside a node record"),
        (8, "`include` extension is not supported"),
        (9, "not a width mask"),
        (11, "is not hex"),
        (12, "unknown speed `WHAT`"),
        (14, "outside a node record"),
        (15, "node id \"a\" is also at line 1"),
    ];
    assert_eq!(got.len(), expect.len(), "{errors:#?}");
    for ((line, msg), (want_line, want)) in got.iter().zip(expect) {
        assert_eq!(line, want_line, "{msg}");
        assert!(msg.contains(want), "line {line}: `{msg}` lacks `{want}`");
    }
}

#[test]
fn links_that_disagree_are_errors() {
    let text = "Switch 4 \"s\"\n[1] \"c\"[1]\n\nHca 1 \"c\"\n[1] \"s\"[2]\n";
    let errors = parse(text).unwrap_err().0;
    let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [2], "{errors:?}");
    assert!(errors[0].message.contains("that port names"));
}

#[test]
fn routers_are_refused_at_import() {
    let net = parse("Rt 2 \"r\"\n").unwrap();
    let e = import(&net).unwrap_err().0;
    assert_eq!((e[0].line, e.len()), (1, 1));
    assert!(e[0].message.contains("router"));
}

/// Lines a net file is made of, whole or cut short, for the property test.
const PIECES: &[&str] = &[
    "Switch 4 \"s\"",
    "Switch 255 \"s\" # \"d\" enhanced port 0 lid 70000 lmc 0",
    "Ca 2 \"c\"",
    "Hca 1 \"h\" # plain text lid 3",
    "Rt 2 \"r\"",
    "[1] \"s\"[2]",
    "[2](ffffffffffffffff) \"c\"[1] w=31 s=0 e=15 # lid 65535 lmc 0 \"x\" lid 1 12xNDR",
    "[3] \"h\" # \"s\" lid 2 4xFDR10",
    "[0] \"s\"[0]",
    "switchguid=0xffffffffffffffff(1)",
    "caguid=0x10",
    "sysimgguid=0x1",
    "vendid=0x2c9",
    "width=8",
    "speed=7",
    "extspeed=16",
    "# comment",
    "",
    "Non-Chassis Nodes",
];

proptest::proptest! {
    /// Any text: no panic; errors name lines of the text; what parses
    /// imports without panic into JSON the topology parser takes, and
    /// planning it does not panic.
    #[test]
    fn any_text_parses_or_reports_lines(
        picks in proptest::collection::vec((0..PIECES.len(), 0usize..1000, proptest::bool::ANY), 0..40),
        noise in ".{0,200}",
    ) {
        let mut text = String::new();
        for (i, cut, whole) in picks {
            let piece = PIECES[i];
            let end = if whole { piece.len() } else { cut % (piece.len() + 1) };
            text.push_str(piece.get(..end).unwrap_or(piece));
            text.push('\n');
        }
        text.push_str(&noise);
        let lines = text.lines().count().max(1);
        match parse(&text) {
            Err(e) => {
                proptest::prop_assert!(!e.0.is_empty());
                for err in &e.0 {
                    proptest::prop_assert!((1..=lines).contains(&err.line), "{err} of {lines}");
                }
            }
            Ok(net) => {
                if let Ok(imported) = import(&net) {
                    let topo = crate::parse(&imported.topology.to_string());
                    proptest::prop_assert!(topo.is_ok(), "{topo:?}");
                    let _ = crate::plan(&topo.unwrap(), std::path::Path::new("/tmp/r"));
                }
            }
        }
    }
}

/// A consistent net: `kinds` (true: switch) with 4 ports each, and links
/// between free ports chosen by `pairs`, each listed from both ends or
/// (`one_sided`) only the first; with ibnetdiscover's annotations.
fn render(kinds: &[bool], pairs: &[(usize, usize)], one_sided: bool) -> (String, usize) {
    let mut free: Vec<Vec<u8>> = kinds.iter().map(|_| (1..=4).rev().collect()).collect();
    let mut ports: Vec<Vec<(u8, usize, u8)>> = vec![Vec::new(); kinds.len()];
    let mut links = 0;
    for &(a, b) in pairs {
        let (a, b) = (a % kinds.len(), b % kinds.len());
        if a == b || free[a].is_empty() || free[b].is_empty() {
            continue;
        }
        let (pa, pb) = (free[a].pop().unwrap(), free[b].pop().unwrap());
        ports[a].push((pa, b, pb));
        if !one_sided {
            ports[b].push((pb, a, pa));
        }
        links += 1;
    }
    let mut text = String::from("# generated\n");
    for (i, &switch) in kinds.iter().enumerate() {
        let (word, guid) = if switch {
            ("switchguid", "0x5")
        } else {
            ("caguid", "0x7")
        };
        text += &format!("\n{word}={guid}{i:02}\nsysimgguid=0x9{i}\n");
        let kind = if switch { "Switch" } else { "Ca" };
        text += &format!("{kind}\t4 \"n{i}\"\t\t# \"desc {i}\" base port 0 lid {i} lmc 0\n");
        for &(p, r, rp) in &ports[i] {
            text += &format!(
                "[{p}](7{i}0{p})\t\"n{r}\"[{rp}]\t\t# lid {} lmc 0 \"desc {r}\" lid {r} 4xEDR\n",
                100 + i
            );
        }
    }
    (text, links)
}

proptest::proptest! {
    /// Consistent nets parse and import with one link per pair; with one
    /// byte changed anywhere, parsing, importing and planning never panic.
    #[test]
    fn generated_nets_import_and_corrupted_ones_do_not_panic(
        kinds in proptest::collection::vec(proptest::bool::ANY, 1..8),
        pairs in proptest::collection::vec((0usize..8, 0usize..8), 0..12),
        one_sided in proptest::bool::ANY,
        at in 0usize..5000,
        byte in 0u8..128,
    ) {
        let (text, links) = render(&kinds, &pairs, one_sided);
        let net = parse(&text);
        proptest::prop_assert!(net.is_ok(), "{text}\n{net:?}");
        let imported = import(&net.unwrap()).unwrap();
        let json = imported.topology.to_string();
        proptest::prop_assert_eq!(imported.topology["links"].as_array().unwrap().len(), links);
        let _ = crate::plan(&crate::parse(&json).unwrap(), std::path::Path::new("/tmp/r"));
        let mut bytes = text.into_bytes();
        let at = at % bytes.len();
        bytes[at] = byte;
        let text = String::from_utf8(bytes).unwrap();
        if let Ok(net) = parse(&text) {
            if let Ok(imported) = import(&net) {
                let topo = crate::parse(&imported.topology.to_string());
                proptest::prop_assert!(topo.is_ok(), "{topo:?}");
                let _ = crate::plan(&topo.unwrap(), std::path::Path::new("/tmp/r"));
            }
        }
    }
}
