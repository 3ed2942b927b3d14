//! What a topology may do but probably does not mean, said as warnings
//! (`check` and `up` print them and go on): a node without a link, a
//! switch cabled to itself, and a fabric in parts that no link joins
//! (islands: their nodes cannot reach each other).

use super::plan::{End, Plan};

/// The warnings about `plan`, in file order.
pub fn warnings(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    for (i, n) in plan.nodes.iter().enumerate() {
        let linked = plan
            .links
            .iter()
            .any(|&(a, b)| a == End::Node(i) || b == End::Node(i));
        if !linked {
            out.push(format!("node `{}` has no link: it reaches no one", n.name));
        }
    }
    for &(a, b) in &plan.links {
        if let (End::Switch(s, p), End::Switch(t, q)) = (a, b) {
            if s == t {
                let name = plan.switches.get(s).map_or("?", |x| x.name.as_str());
                out.push(format!(
                    "switch `{name}` is cabled to itself (port {p} to port {q})"
                ));
            }
        }
    }
    let islands = islands(plan);
    if islands.len() > 1 {
        let parts: Vec<String> = islands
            .iter()
            .map(|m| format!("{{{}}}", m.join(", ")))
            .collect();
        out.push(format!(
            "the fabric is in {} islands no link joins: {}",
            islands.len(),
            parts.join(" ")
        ));
    }
    out
}

/// The parts of the fabric that links join, each as its members' names
/// (nodes, then switches), leaving out unlinked nodes and switches.
fn islands(plan: &Plan) -> Vec<Vec<String>> {
    let n = plan.nodes.len();
    let index = |e: End| match e {
        End::Node(i) => i,
        End::Switch(s, _) => n + s,
    };
    let total = n + plan.switches.len();
    let mut parent: Vec<usize> = (0..total).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut linked = vec![false; total];
    for &(a, b) in &plan.links {
        let (x, y) = (index(a), index(b));
        if x >= total || y >= total {
            continue;
        }
        linked[x] = true;
        linked[y] = true;
        let (rx, ry) = (root(&mut parent, x), root(&mut parent, y));
        parent[rx] = ry;
    }
    let mut parts: Vec<(usize, Vec<String>)> = Vec::new();
    for x in (0..total).filter(|&x| linked[x]) {
        let r = root(&mut parent, x);
        let name = if x < n {
            plan.nodes[x].name.clone()
        } else {
            plan.switches[x - n].name.clone()
        };
        match parts.iter_mut().find(|(pr, _)| *pr == r) {
            Some((_, members)) => members.push(name),
            None => parts.push((r, vec![name])),
        }
    }
    parts.into_iter().map(|(_, m)| m).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{parse, plan};
    use std::path::Path;

    fn warn(json: &str) -> Vec<String> {
        warnings(&plan(&parse(json).unwrap(), Path::new("/tmp/r")).unwrap())
    }

    #[test]
    fn islands_unlinked_nodes_and_self_cabled_switches() {
        let w = warn(
            r#"{ "nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2},
                           {"name": "c", "lid": 3}, {"name": "d", "lid": 4},
                           {"name": "e", "lid": 5}],
                 "switches": [{"name": "s1", "ports": 4}, {"name": "s2", "ports": 4}],
                 "links": [{"a": "a", "b": "s1:1"}, {"a": "b", "b": "s1:2"},
                           {"a": "s1:3", "b": "s1:4"},
                           {"a": "c", "b": "s2:1"}, {"a": "d", "b": "s2:2"}] }"#,
        );
        assert_eq!(
            w,
            [
                "node `e` has no link: it reaches no one",
                "switch `s1` is cabled to itself (port 3 to port 4)",
                "the fabric is in 2 islands no link joins: {a, b, s1} {c, d, s2}",
            ]
        );
    }

    #[test]
    fn a_joined_fabric_has_no_warnings() {
        let w = warn(
            r#"{ "nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2}],
                 "switches": [{"name": "s1", "ports": 2}, {"name": "s2", "ports": 2}],
                 "links": [{"a": "a", "b": "s1:1"}, {"a": "s1:2", "b": "s2:1"},
                           {"a": "s2:2", "b": "b"}] }"#,
        );
        assert!(w.is_empty(), "{w:?}");
        // A link with options gets a relay switch: still one part.
        let w = warn(
            r#"{ "nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2}],
                 "links": [{"a": "a", "b": "b", "delay_us": 5}] }"#,
        );
        assert!(w.is_empty(), "{w:?}");
    }
}
