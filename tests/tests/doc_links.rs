//! The project's Markdown documents hold together: every relative link in
//! README.md, ARCHITECTURE.md, BENCHMARKS.md, RELIABILITY.md,
//! qemu-configs/README.md and docs/*.md names a file or directory that
//! exists, and a `#fragment` on a Markdown target (or alone) names a
//! heading of that document, spelled as GitHub spells heading anchors.
//! README.md and ARCHITECTURE.md stay within the sizes that keep them a
//! map (150 and 400 lines; the details belong in docs/).
//!
//! Links are `[text](target)` outside fenced code blocks and inline code;
//! targets with a scheme (`https:`, `mailto:`) are not checked.
//!
//! The sources point into BENCHMARKS.md too: a `.rs`, `.c`, `.h` or `.sh`
//! file that names BENCHMARKS.md and then, after a comma or a space, a
//! quoted section title names a heading of BENCHMARKS.md, spelled as the
//! heading is.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The documents whose links are checked, relative to the repository root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "RELIABILITY.md",
        "qemu-configs/README.md",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let mut topic: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.strip_prefix(root).expect("under the root").to_path_buf())
        .collect();
    topic.sort();
    docs.extend(topic);
    docs
}

/// The lines of `text` outside fenced code blocks, with their numbers
/// (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut in_fence = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            out.push((i + 1, line));
        }
    }
    out
}

/// `line` without its inline code spans (`` `...` ``).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the `[text](target)` links on one line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                out.push(after[..end].trim().to_string());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lower case, every character but
/// letters, digits, spaces, `-` and `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a document's headings, duplicates numbered as GitHub
/// numbers them (`name`, `name-1`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(title) = line.trim_start_matches('#').strip_prefix(' ') else {
            continue;
        };
        if !line.starts_with('#') {
            continue;
        }
        let base = slug(title.trim());
        let n = seen.entry(base.clone()).or_insert(0);
        let anchor = if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        *n += 1;
        out.insert(anchor);
    }
    out
}

fn has_scheme(target: &str) -> bool {
    match target.find(':') {
        Some(i) => target[..i]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')),
        None => false,
    }
}

/// Every broken relative link of `doc` (relative to `root`), as
/// "file:line: target (why)".
fn broken_links(root: &Path, doc: &Path) -> Vec<String> {
    let text = fs::read_to_string(root.join(doc)).expect("document readable");
    let dir = doc.parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for (n, line) in prose_lines(&text) {
        for target in link_targets(line) {
            if target.is_empty() || has_scheme(&target) {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.to_path_buf()
            } else {
                dir.join(path)
            };
            let full = root.join(&file);
            if !full.exists() {
                broken.push(format!("{}:{n}: {target} (no such file)", doc.display()));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if full.extension().is_some_and(|x| x == "md") {
                let there = fs::read_to_string(&full).expect("target readable");
                if !anchors(&there).contains(fragment) {
                    broken.push(format!(
                        "{}:{n}: {target} (no heading with that anchor)",
                        doc.display()
                    ));
                }
            }
        }
    }
    broken
}

/// The headings of a document as written, without their `#`s.
fn heading_titles(text: &str) -> BTreeSet<String> {
    prose_lines(text)
        .into_iter()
        .filter(|(_, line)| line.starts_with('#'))
        .filter_map(|(_, line)| line.trim_start_matches('#').strip_prefix(' '))
        .map(|title| title.trim().to_string())
        .collect()
}

/// The BENCHMARKS.md sections a source file names: after "BENCHMARKS.md"
/// (or "BENCHMARKS.md's"), a comma or a space and then a quoted title.
/// Comment leaders (`//`, `///`, `//!`, `*`, `#`) at the start of each line
/// and line breaks are folded into single spaces first, so a title may
/// run on to the next comment line.
fn benchmark_sections(source: &str) -> Vec<String> {
    let folded: Vec<&str> = source
        .lines()
        .map(|line| {
            let line = line.trim_start();
            ["//!", "///", "//", "/*", "*", "#"]
                .iter()
                .find_map(|leader| line.strip_prefix(leader))
                .unwrap_or(line)
        })
        .collect();
    let folded = folded.join(" ");
    let mut out = Vec::new();
    let mut rest = folded.as_str();
    while let Some(at) = rest.find("BENCHMARKS.md") {
        rest = &rest[at + "BENCHMARKS.md".len()..];
        let after = rest.strip_prefix("'s").unwrap_or(rest);
        if !after.starts_with([',', ' ']) {
            continue;
        }
        let Some(quoted) = after.trim_start_matches([',', ' ']).strip_prefix('"') else {
            continue;
        };
        if let Some(end) = quoted.find('"') {
            out.push(
                quoted[..end]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
    }
    out
}

/// The `.rs`, `.c`, `.h` and `.sh` files under `dir`, outside hidden
/// directories and `target/`.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("directory readable") {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                source_files(&path, out);
            }
        } else if path
            .extension()
            .is_some_and(|x| ["rs", "c", "h", "sh"].iter().any(|e| x == *e))
        {
            out.push(path);
        }
    }
}

#[test]
fn every_relative_link_resolves() {
    let root = repo_root();
    let docs = documents(&root);
    assert!(docs.len() > 5, "the docs/ pages were found: {docs:?}");
    let broken: Vec<String> = docs.iter().flat_map(|d| broken_links(&root, d)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn benchmark_sections_named_in_the_sources_exist() {
    let root = repo_root();
    let benchmarks = fs::read_to_string(root.join("BENCHMARKS.md")).expect("BENCHMARKS.md");
    let titles = heading_titles(&benchmarks);
    let mut files = Vec::new();
    source_files(&root, &mut files);
    files.sort();
    let mut named = 0;
    let mut missing = Vec::new();
    for file in &files {
        let text = String::from_utf8_lossy(&fs::read(file).expect("source readable")).into_owned();
        for title in benchmark_sections(&text) {
            named += 1;
            if !titles.contains(&title) {
                let rel = file.strip_prefix(&root).unwrap_or(file);
                missing.push(format!("{}: \"{title}\"", rel.display()));
            }
        }
    }
    // The pointers of device/, tests/ and scripts/ were read.
    assert!(
        named >= 8,
        "only {named} BENCHMARKS.md sections named in {} files",
        files.len()
    );
    assert!(
        missing.is_empty(),
        "BENCHMARKS.md has no heading of these titles:\n{}",
        missing.join("\n")
    );
}

#[test]
fn readme_and_architecture_stay_maps() {
    let root = repo_root();
    for (doc, max) in [("README.md", 150), ("ARCHITECTURE.md", 400)] {
        let lines = fs::read_to_string(root.join(doc))
            .expect("document readable")
            .lines()
            .count();
        assert!(
            lines <= max,
            "{doc} has {lines} lines, more than {max}: move detail to a docs/ page"
        );
    }
}

#[test]
fn the_checker_finds_what_it_must() {
    assert_eq!(
        link_targets("see [a](x.md#y) and `[b](not)` and [c](https://e)"),
        ["x.md#y", "https://e"]
    );
    assert_eq!(
        slug("`ib_write_lat`: one-way latency"),
        "ib_write_lat-one-way-latency"
    );
    assert_eq!(
        slug("Why the server is the project's own"),
        "why-the-server-is-the-projects-own"
    );
    let a = anchors("# T\n## A b\n```\n# not a heading\n```\n## A b\n");
    assert_eq!(
        a,
        ["t", "a-b", "a-b-1"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert!(has_scheme("https://x") && !has_scheme("docs/a.md#b"));
    assert_eq!(
        heading_titles("# B\n## `x`: y\n```\n## not\n```\n#no\n"),
        ["B", "`x`: y"].iter().map(|s| s.to_string()).collect()
    );
    let source = "// as measured (BENCHMARKS.md, \"Guest\n    // boot\"): printed\n\
                  /// BENCHMARKS.md \"Verbs (no VM)\")\n\
                  # BENCHMARKS.md's \"Subnet management\" table, BENCHMARKS.md's perftest\n\
                  let docs = [\"BENCHMARKS.md\", \"RELIABILITY.md\"]; // BENCHMARKS.md)\n";
    assert_eq!(
        benchmark_sections(source),
        ["Guest boot", "Verbs (no VM)", "Subnet management"]
    );
}
