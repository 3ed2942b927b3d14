use ibtca_tests::console::{client, tagged};
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::vm::VmStack;

const TOPOLOGY: &str = r#"{
  "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 } ],
  "links": [ { "a": "n1", "b": "n2" } ],
  "guest": { "mem": "512M" }
}"#;

#[test]
#[ignore = "vm"]
fn readstress() {
    let stack = VmStack::get();
    let dir = stack.scratch("readstress");
    let run = std::path::PathBuf::from("/root/.cache/ibtca/chroot/tmp/readstress/run");
    let _ = std::fs::remove_dir_all(&run);
    std::fs::create_dir_all(run.parent().unwrap()).unwrap();
    let _down = Down(run.clone());
    let run_s = run.display().to_string();
    let topo = dir.join("two.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let mut n1 = vec![];
    let mut n2 = vec![];
    let n: usize = std::env::var("RS_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    for i in 0..n {
        for (tag, cmd) in [
            ("WB", "ib_write_bw -d ibtca0 -D 2"),
            ("SB", "ib_send_bw -d ibtca0 -D 2"),
            ("RB", "ib_read_bw -d ibtca0 -D 2"),
        ] {
            n1.push(tagged(&format!("{tag}{i}-SERVER"), cmd));
            n2.push(client(
                &format!("{tag}{i}-CLIENT"),
                &format!("sleep 2; {cmd} n1"),
                120,
            ));
        }
    }
    let mut args = stack.guests_up(&topo.display().to_string(), &run_s);
    args.extend(["--guest-timeout", "1500", "--wait"].map(String::from));
    for (node, cmds) in [("n1", &n1), ("n2", &n2)] {
        for c in cmds.iter() {
            args.push("--run".into());
            args.push(format!("{node}={c}"));
        }
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fabric(&argv);
    eprintln!("{}", text(&out));
    assert!(
        out.status.success(),
        "{}",
        ibtca_tests::console::failure_digest(&run, &["n1", "n2"], 40)
    );
}
