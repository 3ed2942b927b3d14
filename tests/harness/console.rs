//! Guest commands whose output the host reads back from a console: each
//! command's lines tagged `TAG `, its exit status as `TAG exit=N`, and the
//! tagged lines found again in the console text (kernel messages may
//! share a line with them, so a tag is looked for anywhere in a line).

/// Runs `cmd` once, its output on the console with every line tagged
/// `TAG `; fails as `cmd` does.
pub fn tagged(tag: &str, cmd: &str) -> String {
    format!(
        "out=$({cmd} 2>&1); st=$?; echo \"$out\" | sed 's/^/{tag} /'; \
         echo \"{tag} exit=$st\"; exit $st"
    )
}

/// A client: `cmd` until the server (started meanwhile in another guest)
/// answers, at most `tries` times a second apart; a failure after
/// connecting (the output names the remote address) is final.
pub fn client(tag: &str, cmd: &str, tries: u32) -> String {
    format!(
        "for i in $(seq {tries}); do out=$({cmd} 2>&1); st=$?; \
         if [ $st = 0 ] || echo \"$out\" | grep -q 'remote address'; then \
         echo \"$out\" | sed 's/^/{tag} /'; echo \"{tag} exit=$st\"; exit $st; fi; sleep 1; done; \
         echo \"$out\" | sed 's/^/{tag} /'; echo \"{tag} exit=failed\"; exit 1"
    )
}

/// The lines of `console` tagged `tag`, without the tag (and without a
/// trailing carriage return).
pub fn tagged_lines<'a>(console: &'a str, tag: &str) -> Vec<&'a str> {
    let t = format!("{tag} ");
    console
        .lines()
        .filter_map(|l| l.find(&t).map(|i| l[i + t.len()..].trim_end_matches('\r')))
        .collect()
}
