//! The kernel verbs tests' fabric (tests/tests/vm_kverbs.rs on the bundled
//! guest, tests/tests/vm_own_kernel.rs on an own kernel): two guests on
//! linked devices in `ibtca.mode=kverbs`, and their consoles.

use std::path::Path;
use std::process::Output;

use crate::launcher::text;

/// Server `a` (LID 1) and client `b` (LID 2), one link.
pub const TOPOLOGY: &str = r#"{
  "nodes": [
    { "name": "a", "lid": 1,
      "guest": { "append": "ibtca.mode=kverbs ibtca.role=server ibtca.peer_lid=2" } },
    { "name": "b", "lid": 2,
      "guest": { "append": "ibtca.mode=kverbs ibtca.role=client ibtca.peer_lid=1" } }
  ],
  "links": [ { "a": "a", "b": "b" } ],
  "guest": { "mem": "512M" }
}"#;

/// The server's and the client's consoles in `run`, and everything (`up`'s
/// output and both consoles) for assertion messages.
pub fn consoles(run: &Path, out: &Output) -> (String, String, String) {
    let console =
        |n: &str| std::fs::read_to_string(run.join(format!("{n}.console"))).unwrap_or_default();
    let (server, client) = (console("a"), console("b"));
    let all = format!(
        "{}\nserver console:\n{server}\nclient console:\n{client}",
        text(out)
    );
    (server, client, all)
}

/// Guest `who`'s console `c` says its first kernel verbs module loaded and
/// ran (`insmod` status 0), `ibtca.ko` unloaded cleanly, the kernel
/// complained of nothing and no check failed; `all` is every console, for
/// the message.
pub fn assert_ran_clean(who: &str, c: &str, all: &str) {
    assert!(c.contains("IBTCA-KVERBS-RC 0"), "{who}: insmod\n{all}");
    assert!(c.contains("IBTCA-UNLOAD ok"), "{who}: unload\n{all}");
    assert!(
        !c.contains("IBTCA-DMESG"),
        "{who}: kernel complaints\n{all}"
    );
    assert!(!c.contains(" FAIL"), "{who}: a check failed\n{all}");
}
