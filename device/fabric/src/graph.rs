//! `ibtca-fabric graph`: the topology as a Graphviz DOT graph (devices as
//! ellipses, gateways as hexagons, switches as boxes, one edge per link
//! with its port numbers at its ends) and, with the fabric's live ports
//! (`inspect::ports`), its state: an edge with an end whose port is down
//! is red and dashed, and every edge is labelled with the bytes its two
//! ends sent since they started (PortXmitData × 4), its pen width growing
//! with them. SVG is Graphviz's `dot -Tsvg` of the DOT text.

use std::io::Write;
use std::process::{Command, Stdio};

use super::inspect::PortView;
use super::plan::{End, Plan};

/// `s` with DOT's string escapes (backslash, double quote).
fn escaped(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A quoted DOT identifier.
fn quoted(s: &str) -> String {
    format!("\"{}\"", escaped(s))
}

/// A two-line DOT label: `name`, then `detail`.
fn label(name: &str, detail: &str) -> String {
    format!("\"{}\\n{}\"", escaped(name), escaped(detail))
}

/// `n` bytes in the largest unit that keeps it at least 1.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// The name and port number of a link end.
fn end_port(plan: &Plan, end: End) -> (String, u8) {
    match end {
        End::Node(n) => (
            plan.nodes
                .get(n)
                .map(|x| x.name.clone())
                .unwrap_or_default(),
            1,
        ),
        End::Switch(s, p) => (
            plan.switches
                .get(s)
                .map(|x| x.name.clone())
                .unwrap_or_default(),
            p,
        ),
    }
}

/// The topology of `plan` as DOT; with `live` (every port's view of the
/// running fabric) its state and traffic.
pub fn dot(plan: &Plan, live: Option<&[PortView]>) -> String {
    let mut s = String::from("graph fabric {\n  graph [overlap=false];\n");
    for n in &plan.nodes {
        let lid = live
            .and_then(|ports| ports.iter().find(|p| p.name == n.name))
            .and_then(|p| p.lid)
            .map_or(format!("LID {}", n.lid), |l| format!("LID {l}"));
        let shape = if n.gateway.is_some() {
            "hexagon"
        } else {
            "ellipse"
        };
        s.push_str(&format!(
            "  {} [shape={shape}, label={}];\n",
            quoted(&n.name),
            label(&n.name, &lid)
        ));
    }
    for sw in &plan.switches {
        s.push_str(&format!(
            "  {} [shape=box, label={}];\n",
            quoted(&sw.name),
            label(&sw.name, &format!("{} ports", sw.ports.len()))
        ));
    }
    for &(a, b) in &plan.links {
        let (an, ap) = end_port(plan, a);
        let (bn, bp) = end_port(plan, b);
        let mut attrs = vec![
            format!("taillabel={}", quoted(&ap.to_string())),
            format!("headlabel={}", quoted(&bp.to_string())),
        ];
        if let Some(ports) = live {
            let find =
                |name: &str, port: u8| ports.iter().find(|p| p.name == name && p.port == port);
            let (pa, pb) = (find(&an, ap), find(&bn, bp));
            let down = [pa, pb].iter().any(|p| p.is_none_or(|p| !p.up));
            let bytes: u64 = [pa, pb]
                .iter()
                .flatten()
                .map(|p| p.counter("PortXmitData").saturating_mul(4))
                .sum();
            attrs.push(format!("label={}", quoted(&human_bytes(bytes))));
            let width = 1.0 + (bytes as f64 + 1.0).log10() / 2.0;
            attrs.push(format!("penwidth={:.1}", width.min(6.0)));
            if down {
                attrs.push("color=red, fontcolor=red, style=dashed".to_owned());
            } else {
                attrs.push("color=black".to_owned());
            }
        }
        s.push_str(&format!(
            "  {} -- {} [{}];\n",
            quoted(&an),
            quoted(&bn),
            attrs.join(", ")
        ));
    }
    s.push_str("}\n");
    s
}

/// `dot_text` rendered as SVG by Graphviz's `dot`.
pub fn svg(dot_text: &str) -> Result<Vec<u8>, String> {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "Graphviz's `dot` is not installed (Debian: apt-get install graphviz; \
                 scripts/host-tools.sh installs it)"
                    .to_owned()
            }
            _ => format!("cannot run `dot`: {e}"),
        })?;
    let mut stdin = child.stdin.take().ok_or("no stdin for `dot`")?;
    let text = dot_text.to_owned();
    // Written from a thread: `dot` may fill its stdout before it has read
    // all of its input.
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`dot`: {e}"))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(format!(
            "`dot` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_and_sizes_readable() {
        assert_eq!(quoted(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(label("n\"1", "LID 1"), r#""n\"1\nLID 1""#);
        assert_eq!(human_bytes(1000), "1000 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
