//! The layering of the workspace's Rust sources, checked from the source
//! files themselves (ARCHITECTURE.md, "Crates"):
//!
//! - no crate of the workspace depends on a crate of its own layer or of a
//!   layer above it ([`CRATE_LAYERS`]; Cargo itself refuses only cycles);
//! - no import cycle between two modules of a crate;
//! - in `device/tca/src`, no module uses a top-level module of a higher
//!   layer than its own ([`DEVICE_LAYERS`]);
//! - no source file holds more than [`MAX_LINES`] lines of non-test code.
//!
//! A module's imports are the paths it names that start with `crate::`,
//! `super::` or `self::` (in `use` trees and in code), each resolved to the
//! longest module it names; a path between a module and one of its own
//! ancestors (a file and its `mod.rs`) is not an import between modules.
//! Comments, string literals and test-only code (`#[cfg(test)]`, and
//! `#[cfg(any(test, feature = "fuzzing"))]` like the fuzz target bodies)
//! are left out. The module tree is walked from each crate root through its
//! `mod` declarations (`#[path]` included).
//!
//! `cargo test -p ibtca-tests --test layers -- --ignored --nocapture`
//! prints the import graph of `device/tca/src`'s top-level modules.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace's crates by layer, lowest first. A crate may depend (for
/// its code, its tests or its build) only on crates of the layers below its
/// own: the crates of one layer know nothing of each other.
const CRATE_LAYERS: &[(&str, &[&str])] = &[
    (
        "IB protocol and thread scheduling",
        &["ibtca-protocol", "ibtca-sched"],
    ),
    (
        "link layer, logging, command line and device ABI",
        &["ibtca-link", "ibtca-log", "ibtca-cli", "ibtca-abi"],
    ),
    (
        "sandbox and RC/UD transport",
        &["ibtca-sandbox", "ibtca-transport"],
    ),
    (
        "vfio-user server and port agents",
        &["ibtca-vfio-user", "ibtca-agents"],
    ),
    (
        "device, switch and host port",
        &["ibtca-device", "ibtca-switch", "ibtca-simport"],
    ),
    (
        "gateway and guestless-node hive",
        &["ibtca-gateway", "ibtca-hive"],
    ),
    ("fabric launcher", &["ibtca-fabric"]),
    ("tests and benchmarks", &["ibtca-tests"]),
];

/// `device/tca/src`'s top-level modules by layer, lowest first. A module
/// may use the modules of its own layer and of the layers below it, never
/// one above: the device core knows nothing of the one device instance
/// that runs it, and so on. Each module sits as low as what it uses allows.
/// Below them all are the crates of the lower [`CRATE_LAYERS`], which
/// `device/tca/src` re-exports under their old module names (`link` with
/// its `memfd`, `vfio_user`, `sma`, `pma`, `vl_config`, `control_socket`,
/// `guid`, `logging`, `guest_warn!`, `ibtca-abi`'s `regs`, `sched`, and
/// `transport` with verbs' `keys`, `remote_target` and `rkm_regs`).
const DEVICE_LAYERS: &[(&str, &[&str])] = &[
    ("helpers", &["client_fd"]),
    ("guest memory and PCI", &["fault_guard", "dma", "pci"]),
    ("verbs", &["verbs"]),
    ("DRDMA", &["drdma"]),
    ("engine", &["engine"]),
    ("PCI function", &["bar0", "tca"]),
    ("one device", &["instance", "device_control"]),
];

/// Most lines of non-test code in one source file (blank and comment
/// lines not counted).
const MAX_LINES: usize = 600;

/// A module path inside its crate (empty for the crate root).
type ModPath = Vec<String>;

/// One source file of a crate, as the compiler sees it.
struct Module {
    file: PathBuf,
    /// The file without comments and test-only code; string literals
    /// blanked.
    code: String,
    /// Lines of non-test code.
    lines: usize,
}

/// A crate's modules, and who imports whom (with the first path that does).
struct Crate {
    name: String,
    modules: BTreeMap<ModPath, Module>,
    edges: BTreeMap<(ModPath, ModPath), String>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds tests/")
        .to_path_buf()
}

/// Every crate root of the workspace (libraries and binaries).
fn roots() -> Vec<(String, PathBuf)> {
    let ws = workspace();
    let mut roots = vec![
        ("ibtca-device".to_string(), ws.join("device/tca/src/lib.rs")),
        (
            "ibtca-device bin".to_string(),
            ws.join("device/tca/src/main.rs"),
        ),
        ("ibtca-abi".to_string(), ws.join("device/abi/src/lib.rs")),
        (
            "ibtca-sched".to_string(),
            ws.join("device/sched/src/lib.rs"),
        ),
        (
            "ibtca-transport".to_string(),
            ws.join("device/transport/src/lib.rs"),
        ),
        (
            "ibtca-agents".to_string(),
            ws.join("device/agents/src/lib.rs"),
        ),
        ("ibtca-link".to_string(), ws.join("device/link/src/lib.rs")),
        ("ibtca-log".to_string(), ws.join("device/log/src/lib.rs")),
        ("ibtca-cli".to_string(), ws.join("device/cli/src/lib.rs")),
        (
            "ibtca-sandbox".to_string(),
            ws.join("device/sandbox/src/lib.rs"),
        ),
        (
            "ibtca-switch".to_string(),
            ws.join("device/switch/src/lib.rs"),
        ),
        (
            "ibtca-switch bin".to_string(),
            ws.join("device/switch/src/main.rs"),
        ),
        (
            "ibtca-vfio-user".to_string(),
            ws.join("device/vfio-user/src/lib.rs"),
        ),
        (
            "ibtca-fabric".to_string(),
            ws.join("device/fabric/src/lib.rs"),
        ),
        (
            "ibtca-fabric bin".to_string(),
            ws.join("device/fabric/src/main.rs"),
        ),
        (
            "ibtca-gateway".to_string(),
            ws.join("device/gateway/src/lib.rs"),
        ),
        (
            "ibtca-gateway bin".to_string(),
            ws.join("device/gateway/src/main.rs"),
        ),
        ("ibtca-protocol".to_string(), ws.join("protocol/src/lib.rs")),
        ("ibtca-tests".to_string(), ws.join("tests/harness/lib.rs")),
    ];
    for dir in [
        "device/tca/src/bin",
        "device/gateway/src/bin",
        "tests/src/bin",
    ] {
        let mut bins: Vec<PathBuf> = fs::read_dir(ws.join(dir))
            .expect("bin directory")
            .map(|e| e.expect("bin entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        bins.sort();
        for bin in bins {
            roots.push((format!("{dir}/{}", file_name(&bin)), bin));
        }
    }
    roots
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned())
}

/// Reads a crate from its root: every module reached through non-test
/// `mod` declarations, and the imports between them.
fn read_crate(name: &str, root: &Path) -> Crate {
    let mut modules = BTreeMap::new();
    let mut todo = vec![(ModPath::new(), root.to_path_buf())];
    while let Some((path, file)) = todo.pop() {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (code, with_strings) = strip_test_code(&text);
        // Children live next to a crate root or `mod.rs`, else in a
        // directory named after the file.
        let stem = file
            .file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into());
        let parent = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let dir = if path.is_empty() || stem == "mod" {
            parent.clone()
        } else {
            parent.join(&stem)
        };
        for (child, at) in mod_declarations(&with_strings) {
            let child_file = match at {
                Some(p) => parent.join(p),
                None if dir.join(format!("{child}.rs")).exists() => dir.join(format!("{child}.rs")),
                None => dir.join(&child).join("mod.rs"),
            };
            let mut child_path = path.clone();
            child_path.push(child);
            todo.push((child_path, child_file));
        }
        let lines = code.lines().filter(|l| !l.trim().is_empty()).count();
        modules.insert(path, Module { file, code, lines });
    }
    let macros = exported_macros(&modules);
    let mut edges = BTreeMap::new();
    for (from, module) in &modules {
        for path in paths(&module.code) {
            let Some(to) = resolve(&modules, &macros, from, &path) else {
                continue;
            };
            let related = to.starts_with(from) || from.starts_with(&to);
            if !related {
                edges
                    .entry((from.clone(), to))
                    .or_insert_with(|| path.join("::"));
            }
        }
    }
    Crate {
        name: name.to_string(),
        modules,
        edges,
    }
}

/// Removes comments and test-only items from `text`. Returns the code with
/// string and character literals blanked (for looking at paths) and the
/// same code with its strings kept (for `#[path]`).
fn strip_test_code(text: &str) -> (String, String) {
    let (blank, kept) = strip_comments(text);
    let chars: Vec<char> = blank.chars().collect();
    let mut cut = vec![false; chars.len()];
    let mut at = 0;
    while let Some(start) = find(&chars, at, "#[cfg(") {
        let Some(attr_end) = matching(&chars, start + 1) else {
            break;
        };
        let predicate: String = chars[start + 6..attr_end].iter().collect();
        if !test_only(&predicate) {
            at = attr_end;
            continue;
        }
        let end = item_end(&chars, attr_end + 1);
        cut[start..end].iter_mut().for_each(|c| *c = true);
        at = end;
    }
    let keep = |s: &str| -> String {
        s.chars()
            .zip(&cut)
            .map(|(c, &cut)| if cut && c != '\n' { ' ' } else { c })
            .collect()
    };
    (keep(&blank), keep(&kept))
}

/// Whether a `cfg` predicate compiles its item only for tests (or for the
/// fuzz targets, which are test code too).
fn test_only(predicate: &str) -> bool {
    let words: Vec<&str> = predicate
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    words.contains(&"test") && !words.contains(&"not")
}

/// Comments replaced by spaces (line breaks kept). Returns the text with
/// the contents of string and character literals blanked too, and the
/// text with them kept.
fn strip_comments(text: &str) -> (String, String) {
    let c: Vec<char> = text.chars().collect();
    let (mut blank, mut kept) = (String::new(), String::new());
    let mut i = 0;
    let push = |blank: &mut String, kept: &mut String, ch: char, literal: bool| {
        kept.push(ch);
        blank.push(if literal && ch != '\n' { ' ' } else { ch });
    };
    let ident = |i: usize| i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                push(&mut blank, &mut kept, ' ', false);
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    push(&mut blank, &mut kept, ' ', false);
                    push(&mut blank, &mut kept, ' ', false);
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    push(&mut blank, &mut kept, ' ', false);
                    push(&mut blank, &mut kept, ' ', false);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    let ch = if c[i] == '\n' { '\n' } else { ' ' };
                    push(&mut blank, &mut kept, ch, false);
                    i += 1;
                }
            }
        } else if c[i] == 'r' && !ident(i) && matches!(c.get(i + 1), Some('"' | '#')) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                push(&mut blank, &mut kept, c[i], false);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            for &ch in &c[i..=j] {
                push(&mut blank, &mut kept, ch, false);
            }
            i = j + 1;
            while i < c.len() {
                if c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    for &ch in &c[i..=i + hashes] {
                        push(&mut blank, &mut kept, ch, false);
                    }
                    i += hashes + 1;
                    break;
                }
                push(&mut blank, &mut kept, c[i], true);
                i += 1;
            }
        } else if c[i] == '"' {
            push(&mut blank, &mut kept, '"', false);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    push(&mut blank, &mut kept, c[i], true);
                    i += 1;
                }
                push(&mut blank, &mut kept, c[i], true);
                i += 1;
            }
            if i < c.len() {
                push(&mut blank, &mut kept, '"', false);
                i += 1;
            }
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime.
            let len = if c.get(i + 1) == Some(&'\\') {
                c.get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&ch| ch == '\''))
                    .map(|p| p + 4)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            match len {
                Some(n) => {
                    for (k, &ch) in c[i..i + n].iter().enumerate() {
                        push(&mut blank, &mut kept, ch, k > 0 && k < n - 1);
                    }
                    i += n;
                }
                None => {
                    push(&mut blank, &mut kept, '\'', false);
                    i += 1;
                }
            }
        } else {
            push(&mut blank, &mut kept, c[i], false);
            i += 1;
        }
    }
    (blank, kept)
}

/// Where `pat` next starts in `c` at or after `from`.
fn find(c: &[char], from: usize, pat: &str) -> Option<usize> {
    let p: Vec<char> = pat.chars().collect();
    (from..c.len().saturating_sub(p.len() - 1)).find(|&i| c[i..i + p.len()] == p[..])
}

/// The index of the bracket that closes the one at `open`.
fn matching(c: &[char], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, &ch) in c.iter().enumerate().skip(open) {
        match ch {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The end of the item (or statement, or field) that starts at `from`,
/// after its attributes: its `;`, or the `}` of its body (and a `;` right
/// after it), or the end of the enclosing brackets.
fn item_end(c: &[char], from: usize) -> usize {
    let mut depth = 0i32;
    let mut i = from;
    while i < c.len() {
        match c[i] {
            '#' if depth == 0 && c.get(i + 1) == Some(&'[') => {
                i = matching(c, i + 1).unwrap_or(c.len());
            }
            '(' | '[' => depth += 1,
            '{' => {
                if depth == 0 {
                    let close = matching(c, i).unwrap_or(c.len() - 1);
                    let mut end = close + 1;
                    let next = (end..c.len()).find(|&j| !c[j].is_whitespace());
                    if let Some(j) = next.filter(|&j| c[j] == ';') {
                        end = j + 1;
                    }
                    return end;
                }
                depth += 1;
            }
            ')' | ']' | '}' => {
                if depth == 0 {
                    return i;
                }
                depth -= 1;
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    c.len()
}

/// The `mod name;` declarations of a module (test-only ones already
/// gone), each with its `#[path]` if it has one.
fn mod_declarations(code: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut path_attr = None;
    for raw in code.split(';') {
        // The last statement before `;`, attributes included.
        let stmt = raw.rsplit(['{', '}']).next().unwrap_or("").trim();
        if let Some(p) = stmt.find("#[path") {
            let rest = &stmt[p..];
            path_attr = rest.split('"').nth(1).map(str::to_string);
        }
        let words: Vec<&str> = stmt
            .split(|c: char| c.is_whitespace() || c == ']')
            .filter(|w| !w.is_empty())
            .collect();
        if let [.., m, name] = words[..] {
            if m == "mod" && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                out.push((name.to_string(), path_attr.take()));
                continue;
            }
        }
        path_attr = None;
    }
    out
}

/// `#[macro_export]` macros by name, with the module that defines them.
fn exported_macros(modules: &BTreeMap<ModPath, Module>) -> BTreeMap<String, ModPath> {
    let mut out = BTreeMap::new();
    for (path, m) in modules {
        for part in m.code.split("macro_rules!").skip(1) {
            let name: String = part
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.insert(name, path.clone());
        }
    }
    out
}

/// Every `crate::`, `super::` or `self::` path in `code`, `use` trees
/// expanded, as segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        if !is_ident(c[i]) || (i > 0 && (is_ident(c[i - 1]) || c[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let word_end = (i..c.len()).find(|&j| !is_ident(c[j])).unwrap_or(c.len());
        let word: String = c[i..word_end].iter().collect();
        if word == "use" {
            let end = (word_end..c.len())
                .find(|&j| c[j] == ';')
                .unwrap_or(c.len());
            let tree: String = c[word_end..end].iter().collect();
            out.extend(expand_use(&tree).into_iter().filter(|p| {
                p.first()
                    .is_some_and(|s| matches!(s.as_str(), "crate" | "super" | "self"))
            }));
            i = end;
            continue;
        }
        if matches!(word.as_str(), "crate" | "super" | "self") {
            // A path: segments joined by `::` (a `{` ends it: a use tree,
            // expanded above).
            let mut segs = vec![word];
            let mut j = word_end;
            while c.get(j) == Some(&':') && c.get(j + 1) == Some(&':') {
                let s = j + 2;
                let e = (s..c.len()).find(|&k| !is_ident(c[k])).unwrap_or(c.len());
                if e == s {
                    break;
                }
                segs.push(c[s..e].iter().collect());
                j = e;
            }
            if segs.len() > 1 {
                out.push(segs);
            }
            i = j;
            continue;
        }
        i = word_end;
    }
    out
}

/// The paths of a `use` tree: `a::{b, c::{d, e}}` gives `a::b`,
/// `a::c::d`, `a::c::e`; `as` renames and `self` are dropped.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    let segments = |path: &str| -> Vec<String> {
        path.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "*")
            .map(str::to_string)
            .collect()
    };
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        // `path as name`: the path.
        return vec![segments(tree.split_whitespace().next().unwrap_or(""))];
    };
    let prefix = segments(&tree[..open]);
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let mut out = Vec::new();
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        for sub in expand_use(part) {
            let mut path = prefix.clone();
            path.extend(sub.into_iter().filter(|s| s != "self"));
            out.push(path);
        }
    }
    out
}

/// The module a path names (the longest module prefix), from module
/// `from`; `None` outside the crate.
fn resolve(
    modules: &BTreeMap<ModPath, Module>,
    macros: &BTreeMap<String, ModPath>,
    from: &ModPath,
    path: &[String],
) -> Option<ModPath> {
    let mut base = match path.first()?.as_str() {
        "crate" => ModPath::new(),
        "self" | "super" => from.clone(),
        _ => return None,
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        base.pop();
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
    }
    if base.is_empty() && rest.len() == 1 {
        if let Some(m) = macros.get(&rest[0]) {
            return Some(m.clone());
        }
    }
    let mut full = base;
    full.extend(rest.iter().cloned());
    (0..=full.len())
        .rev()
        .map(|n| full[..n].to_vec())
        .find(|p| modules.contains_key(p))
}

fn name(p: &ModPath) -> String {
    if p.is_empty() {
        "(root)".into()
    } else {
        p.join("::")
    }
}

/// Strongly connected components of more than one module.
fn cycles(krate: &Crate) -> Vec<Vec<ModPath>> {
    let nodes: Vec<&ModPath> = krate.modules.keys().collect();
    let index: BTreeMap<&ModPath, usize> = nodes.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    let mut next = vec![Vec::new(); nodes.len()];
    for (from, to) in krate.edges.keys() {
        next[index[from]].push(index[to]);
    }
    // Tarjan's algorithm, iteratively.
    let n = nodes.len();
    let (mut idx, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut counter) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if idx[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if *k == 0 && idx[v] == usize::MAX {
                idx[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = next[v].get(*k) {
                *k += 1;
                if idx[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(idx[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == idx[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out
}

fn crates() -> Vec<Crate> {
    roots()
        .iter()
        .map(|(name, root)| read_crate(name, root))
        .collect()
}

#[test]
fn no_import_cycles_between_modules() {
    let mut problems = Vec::new();
    for krate in crates() {
        for comp in cycles(&krate) {
            let members: BTreeSet<&ModPath> = comp.iter().collect();
            let arrows: Vec<String> = krate
                .edges
                .iter()
                .filter(|((f, t), _)| members.contains(f) && members.contains(t))
                .map(|((f, t), via)| format!("    {} -> {} ({via})", name(f), name(t)))
                .collect();
            problems.push(format!(
                "{}: cycle between {}:\n{}",
                krate.name,
                comp.iter().map(name).collect::<Vec<_>>().join(", "),
                arrows.join("\n")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The layer of each top-level module of `device/tca/src`.
fn device_layers() -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for (layer, (_, modules)) in DEVICE_LAYERS.iter().enumerate() {
        for m in *modules {
            assert!(out.insert(*m, layer).is_none(), "{m} listed twice");
        }
    }
    out
}

#[test]
fn device_modules_use_only_their_own_layer_and_those_below() {
    let layers = device_layers();
    let krate = read_crate("ibtca-device", &workspace().join("device/tca/src/lib.rs"));
    let mut problems = Vec::new();
    for top in krate.modules.keys().filter(|p| p.len() == 1) {
        if !layers.contains_key(top[0].as_str()) {
            problems.push(format!(
                "{}: not in DEVICE_LAYERS (tests/tests/layers.rs)",
                top[0]
            ));
        }
    }
    for ((from, to), via) in &krate.edges {
        let (Some(f), Some(t)) = (from.first(), to.first()) else {
            continue;
        };
        let (Some(&lf), Some(&lt)) = (layers.get(f.as_str()), layers.get(t.as_str())) else {
            continue;
        };
        if lt > lf {
            problems.push(format!(
                "{} ({}) uses {} ({}, above it) through {via}",
                name(from),
                DEVICE_LAYERS[lf].0,
                name(to),
                DEVICE_LAYERS[lt].0,
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The workspace's member directories (the root `Cargo.toml`'s `members`).
fn members() -> Vec<String> {
    let text = fs::read_to_string(workspace().join("Cargo.toml")).expect("workspace Cargo.toml");
    let start = text.find("members = [").expect("workspace members") + "members = [".len();
    let end = start + text[start..].find(']').expect("end of members");
    text[start..end]
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// A member's package name and the `ibtca-*` crates it depends on, in any
/// of its dependency tables.
fn manifest(dir: &str) -> (String, Vec<String>) {
    let file = workspace().join(dir).join("Cargo.toml");
    let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    parse_manifest(&text)
}

/// The package name and the `ibtca-*` dependencies of a `Cargo.toml`'s
/// text, in every form Cargo takes: a key of a dependency table
/// (`[dependencies]`, `[dev-dependencies]`, `[build-dependencies]`, each
/// also under `[target.'cfg(..)']`), such a table of its own
/// (`[dependencies.ibtca-x]`), and a crate renamed with `package =
/// "ibtca-x"` in either.
fn parse_manifest(text: &str) -> (String, Vec<String>) {
    fn value(line: &str) -> &str {
        line.split_once('=')
            .map_or("", |(_, v)| v.trim().trim_matches('"'))
    }
    let mut section = String::new();
    let mut name = String::new();
    let mut deps = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(['[', ']']).trim().to_string();
            // `dependencies.ibtca-x`: the table is the dependency.
            if let Some((_, dep)) = section.rsplit_once("dependencies.") {
                deps.push(dep.trim().trim_matches(['"', '\'']).to_string());
            }
            continue;
        }
        let key = line
            .split(|c: char| c == '.' || c == '=' || c.is_whitespace())
            .next()
            .unwrap_or_default()
            .trim_matches(['"', '\'']);
        if section == "package" && key == "name" {
            name = value(line).to_string();
        } else if section.ends_with("dependencies") && !key.is_empty() {
            // `alias = { package = "ibtca-x", .. }` depends on ibtca-x.
            let package = line.split_once("package").and_then(|(_, rest)| {
                let rest = rest.trim_start().strip_prefix('=')?.trim_start();
                rest.strip_prefix('"')?.split('"').next()
            });
            deps.push(package.unwrap_or(key).to_string());
        } else if section.contains("dependencies.") && key == "package" {
            deps.push(value(line).to_string());
        }
    }
    deps.retain(|d| d.starts_with("ibtca-"));
    (name, deps)
}

#[test]
fn crates_depend_only_on_the_layers_below_their_own() {
    let mut layers = BTreeMap::new();
    for (layer, (_, crates)) in CRATE_LAYERS.iter().enumerate() {
        for c in *crates {
            assert!(layers.insert(*c, layer).is_none(), "{c} listed twice");
        }
    }
    let mut problems = Vec::new();
    for dir in members() {
        let (krate, deps) = manifest(&dir);
        let Some(&lc) = layers.get(krate.as_str()) else {
            problems.push(format!(
                "{krate} ({dir}): not in CRATE_LAYERS (tests/tests/layers.rs)"
            ));
            continue;
        };
        for dep in deps {
            match layers.get(dep.as_str()) {
                None => problems.push(format!("{krate} uses {dep}, which is not in CRATE_LAYERS")),
                Some(&ld) if ld >= lc => problems.push(format!(
                    "{krate} ({}) uses {dep} ({}, not below it)",
                    CRATE_LAYERS[lc].0, CRATE_LAYERS[ld].0
                )),
                Some(_) => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every form of dependency Cargo reads is seen, so that a back-arrow
/// written as a table of its own or a renamed crate does not escape
/// `crates_depend_only_on_the_layers_below_their_own`.
#[test]
fn manifests_are_read_in_every_dependency_form() {
    let text = r#"
[package]
name = "ibtca-top"
version = "0.1.0"

[dependencies]
ibtca-a.workspace = true
ibtca-b = { path = "../b" }
"ibtca-c" = "0.1"
alias = { package = "ibtca-d", path = "../d" }
serde = "1"

[dependencies.ibtca-e]
workspace = true

[dev-dependencies.ibtca-f]
path = "../f"

[target.'cfg(unix)'.dependencies.ibtca-g]
workspace = true

[target.'cfg(unix)'.dev-dependencies]
ibtca-h.workspace = true

[dependencies.other]
package = "ibtca-i"
version = "0.1"

[build-dependencies]
ibtca-j = "0.1"

[features]
ibtca-feature = []

[[bin]]
name = "ibtca-bin"
"#;
    let (name, deps) = parse_manifest(text);
    assert_eq!(name, "ibtca-top");
    assert_eq!(
        deps,
        [
            "ibtca-a", "ibtca-b", "ibtca-c", "ibtca-d", "ibtca-e", "ibtca-f", "ibtca-g", "ibtca-h",
            "ibtca-i", "ibtca-j"
        ]
    );
}

#[test]
fn no_file_over_the_line_limit() {
    let mut problems = Vec::new();
    for krate in crates() {
        for m in krate.modules.values() {
            if m.lines > MAX_LINES {
                problems.push(format!(
                    "{}: {} lines of non-test code (at most {MAX_LINES}): split it by concept",
                    m.file.display(),
                    m.lines
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checker's own parsing, on small inputs.
#[test]
fn paths_use_trees_and_test_code_are_read_as_the_compiler_reads_them() {
    let src = r##"
use crate::a::{b, c::{self, d as e}};
use super::super::f;
use crate::fast_path as quick;
// use crate::commented;
/* use crate::block; */
fn x() { let s = "crate::in_a_string"; let c = ('"', '\''); crate::g::h(); }
fn y<'a>(v: &'a str) -> &'a str { let r = r#"crate::raw"#; self::k::l(v) }
#[cfg(test)]
mod tests { use crate::tested; }
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz_targets;
#[cfg(test)]
use crate::test_import;
#[path = "other.rs"]
mod renamed;
pub mod kept;
"##;
    let (code, with_strings) = strip_test_code(src);
    let got: Vec<String> = paths(&code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        got,
        [
            "crate::a::b",
            "crate::a::c",
            "crate::a::c::d",
            "super::super::f",
            "crate::fast_path",
            "crate::g::h",
            "self::k::l"
        ]
    );
    assert_eq!(
        mod_declarations(&with_strings),
        [
            ("renamed".to_string(), Some("other.rs".to_string())),
            ("kept".to_string(), None)
        ]
    );
    assert!(test_only("test") && test_only("any(test, feature = \"fuzzing\")"));
    assert!(!test_only("not(test)") && !test_only("feature = \"fuzzing\""));
    let lines = code.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(lines, 8, "{code}");
}

/// Prints `device/tca/src`'s import graph between top-level modules, by layer.
#[test]
#[ignore = "prints the device's module graph: -- --ignored --nocapture"]
fn print_device_graph() {
    let layers = device_layers();
    let krate = read_crate("ibtca-device", &workspace().join("device/tca/src/lib.rs"));
    let mut tops: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in krate.edges.keys() {
        if let (Some(f), Some(t)) = (from.first(), to.first()) {
            if f != t {
                tops.entry(f).or_default().insert(t);
            }
        }
    }
    for (layer, (what, modules)) in DEVICE_LAYERS.iter().enumerate() {
        println!("{layer} {what}");
        for m in *modules {
            let uses: Vec<String> = tops
                .get(m)
                .into_iter()
                .flatten()
                .map(|t| format!("{t} ({})", layers.get(t).map_or(-1, |&l| l as i64)))
                .collect();
            println!("    {m} -> {}", uses.join(", "));
        }
    }
    for ((f, t), via) in &krate.edges {
        println!("{} -> {} ({via})", name(f), name(t));
    }
}
