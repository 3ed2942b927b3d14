//! Guests hand each other files through the shared directory (`/share`,
//! `ibtca-fabric up --share`): one guest writes a file, the other polls
//! for it and reads it at once. A file a peer reads must appear whole, so
//! the guest scripts write it under another name and rename it: a plain
//! `echo X >/share/F` creates F empty first, and a peer that sees it in
//! that moment reads nothing (how `vm_storage`'s n1 once judged its
//! peer's passed step a failure).

use std::path::Path;

/// The `/share/...` path a shell word names, without quotes and the
/// characters after it (`)`, `;`).
fn share_path(word: &str) -> Option<String> {
    let w = word.trim_start_matches(['"', '\'']);
    let p = w.strip_prefix("/share/")?;
    let end = p.find(['"', '\'', ')', ';', ' ']).unwrap_or(p.len());
    Some(format!("/share/{}", &p[..end]))
}

/// The files under /share the script reads with `cat`, and the ones it
/// writes with a redirection, each with its line number.
fn reads_and_writes(script: &str) -> (Vec<String>, Vec<(usize, String)>) {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for (i, line) in script.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for (j, w) in words.iter().enumerate() {
            if w.ends_with("cat") {
                if let Some(p) = words.get(j + 1).and_then(|n| share_path(n)) {
                    reads.push(p);
                }
            }
            if let Some(target) = w.split_once('>').map(|(_, t)| t) {
                let target = if target.is_empty() {
                    words.get(j + 1).copied().unwrap_or("")
                } else {
                    target
                };
                if let Some(p) = share_path(target) {
                    writes.push((i + 1, p));
                }
            }
        }
    }
    (reads, writes)
}

/// The lines of SCRIPT that write a file a peer reads in place.
fn writes_read_in_place(script: &str) -> Vec<String> {
    let (reads, writes) = reads_and_writes(script);
    writes
        .into_iter()
        .filter(|(_, p)| reads.contains(p))
        .map(|(n, p)| format!("line {n}: {p}"))
        .collect()
}

#[test]
fn a_file_a_peer_reads_is_written_whole_then_renamed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts");
    let mut checked = 0;
    let mut bad = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sh") {
            continue;
        }
        let script = std::fs::read_to_string(&path).unwrap();
        if !script.contains("/share/") {
            continue;
        }
        checked += 1;
        for w in writes_read_in_place(&script) {
            bad.push(format!("{}: {w}", path.display()));
        }
    }
    assert!(checked >= 2, "found the guest scripts in {}", dir.display());
    assert!(
        bad.is_empty(),
        "written in place, read by a peer:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_sees_an_in_place_write_of_a_file_that_is_read() {
    let in_place = "echo $rc >\"/share/$1.rc\"\nx=$(cat \"/share/$1.rc\")\n";
    assert_eq!(writes_read_in_place(in_place), ["line 1: /share/$1.rc"]);
    let renamed = "echo $rc >\"/share/$1.rc.new\" && mv \"/share/$1.rc.new\" \"/share/$1.rc\"\n\
                   x=$(cat \"/share/$1.rc\")\n";
    assert!(writes_read_in_place(renamed).is_empty());
    let spaced = "port_guid > /share/n2-guid\nacl=$(cat /share/n2-guid)\n";
    assert_eq!(writes_read_in_place(spaced), ["line 1: /share/n2-guid"]);
    // A flag file nobody reads may be written in place.
    assert!(writes_read_in_place("echo 1 >/share/done\n").is_empty());
}
