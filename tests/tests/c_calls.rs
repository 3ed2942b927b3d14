//! The guest driver's C files call one way: no circle of files in one
//! folder (`guest-driver/tools/`, `tools/verbs/`, `provider/`, `kernel/`,
//! `tests/kernel/`, `tests/provider/`) through the functions and globals
//! they share (docs/guest-driver-layout.md, "Calls inside a folder").
//!
//! A file uses another when it names something the other defines and does
//! not keep `static`: a function with a body, or a global variable. The
//! test reads the sources as text (comments, strings, character constants
//! and preprocessor lines removed, then the top-level items split at `;`
//! and at the end of each brace-delimited body), so it needs no compiler
//! and sees what `nm` on the objects would show for plain C. A top-level
//! item with parentheses and no `=` before them and no body is a
//! prototype or a macro (`EXPORT_SYMBOL_GPL(f);`) and defines nothing.
//!
//! An ops table counts as its file naming every function it holds: the
//! file with `.create_qp = ibtca_create_qp` uses the file that defines
//! `ibtca_create_qp`, just as a call would, because that is where a reader
//! of the table goes to see what the operation does (and what the linker
//! resolves). A call through a table (`ops->create_qp(...)`) names a field,
//! not a function, and uses nothing. So a file holding an ops table sits
//! above every file whose functions the table names, and none of those
//! may call back into it: what they share goes into a file below both.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn guest_driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-driver")
}

/// `text` without comments, string and character literals (each replaced
/// by a space, line breaks kept) and without preprocessor lines.
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(c.len());
    let mut i = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            i += 2;
            while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
                if c[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
            out.push(' ');
        } else if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '"' || c[i] == '\'' {
            let q = c[i];
            i += 1;
            while i < c.len() && c[i] != q {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    // Preprocessor lines, with their continuations.
    let mut kept = String::with_capacity(out.len());
    let mut in_directive = false;
    for line in out.lines() {
        if in_directive || line.trim_start().starts_with('#') {
            in_directive = line.trim_end().ends_with('\\');
            kept.push('\n');
            continue;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .filter(|w| w.starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '_'))
}

/// The last identifier of `head` before its first `(`, `[` or `=`
/// (the declared name of a function or variable).
fn declared_name(head: &str) -> Option<String> {
    let end = head.find(['(', '[', '=']).unwrap_or(head.len());
    identifiers(&head[..end]).last().map(str::to_string)
}

/// What a stripped C file defines for other files: non-static functions
/// with a body and non-static, non-extern global variables.
fn definitions(code: &str) -> BTreeSet<String> {
    let mut defs = BTreeSet::new();
    let mut head = String::new();
    let mut depth = 0usize;
    for ch in code.chars() {
        match ch {
            '{' => {
                if depth == 0 {
                    let h = head.trim();
                    let is_fn = h.ends_with(')') && !h.contains('=');
                    let skip = h.starts_with("static") || h.starts_with("typedef");
                    if is_fn && !skip {
                        defs.extend(declared_name(h));
                    }
                }
                depth += 1;
            }
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    // A function body ends its item; an initializer or a
                    // type body continues to the `;`.
                    let h = head.trim();
                    if h.ends_with(')') && !h.contains('=') {
                        head.clear();
                        continue;
                    }
                    head.push_str(" {} ");
                }
            }
            ';' if depth == 0 => {
                let h = head.trim();
                // `int x = f(1);` is a variable, `int f(int);` and
                // `EXPORT_SYMBOL_GPL(f);` are not.
                let variable = match (h.find('('), h.find('=')) {
                    (None, _) => true,
                    (Some(paren), Some(eq)) => eq < paren,
                    (Some(_), None) => false,
                };
                let skip = ["static", "extern", "typedef", "struct", "union", "enum"]
                    .iter()
                    .any(|k| h.starts_with(k) && (*k != "struct" || h.contains("{}")));
                if variable && !skip && !h.is_empty() {
                    defs.extend(declared_name(h));
                }
                head.clear();
            }
            _ if depth == 0 => head.push(ch),
            _ => {}
        }
    }
    defs
}

/// The `.c` files of `dir`, stripped, by file name.
fn sources(dir: &Path) -> BTreeMap<String, String> {
    let mut code = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "c") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = fs::read_to_string(&path).unwrap();
            code.insert(name, strip(&text));
        }
    }
    code
}

/// For each file of `code` (stripped sources by name): the other files it
/// uses, with one name it uses from each.
fn uses(code: &BTreeMap<String, String>) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut owner = BTreeMap::new();
    for (file, text) in code {
        for d in definitions(text) {
            owner.entry(d).or_insert_with(|| file.clone());
        }
    }
    code.iter()
        .map(|(file, text)| {
            let mut to = BTreeMap::new();
            for w in identifiers(text) {
                if let Some(o) = owner.get(w).filter(|o| *o != file) {
                    to.entry(o.clone()).or_insert_with(|| w.to_string());
                }
            }
            (file.clone(), to)
        })
        .collect()
}

/// Every file that reaches itself again, with the circle it is on.
fn circles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(f) = stack.pop() {
            for g in graph.get(&f).into_iter().flat_map(|m| m.keys()) {
                if seen.insert(g.clone()) {
                    stack.push(g.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|f| (f, reach(f))).collect();
    let mut out: BTreeSet<Vec<String>> = BTreeSet::new();
    for (f, r) in &reached {
        if r.contains(*f) {
            let mut comp: Vec<String> = r
                .iter()
                .filter(|g| reached.get(g).is_some_and(|rg| rg.contains(*f)))
                .cloned()
                .collect();
            comp.sort();
            out.insert(comp);
        }
    }
    out.into_iter().collect()
}

/// Checks that `folder` of guest-driver/ has no circle (the message names
/// each circle's files and a name each uses of the next) and has the uses
/// `expected` (so the sources were read as meant).
fn assert_calls_one_way(folder: &str, expected: &[(&str, &str)]) {
    let graph = uses(&sources(&guest_driver().join(folder)));
    let found = circles(&graph);
    let mut report = String::new();
    for comp in &found {
        report.push_str(&format!("circle: {}\n", comp.join(", ")));
        for f in comp {
            for (g, name) in &graph[f] {
                if comp.contains(g) {
                    report.push_str(&format!("  {f} uses {g} ({name})\n"));
                }
            }
        }
    }
    assert!(found.is_empty(), "guest-driver/{folder}/:\n{report}");
    for (from, to) in expected {
        assert!(
            graph.get(*from).is_some_and(|m| m.contains_key(*to)),
            "guest-driver/{folder}/: {from} should use {to}: {graph:#?}"
        );
    }
}

#[test]
fn guest_tool_files_call_without_a_circle() {
    // The tool's commands and their shared helpers are where the reader
    // expects.
    assert_calls_one_way(
        "tools",
        &[
            ("ibtca-tool.c", "dev.c"),
            ("drdma.c", "verbs_lib.c"),
            ("verbs_lib.c", "report.c"),
            ("verbs_lib.c", "dev.c"),
        ],
    );
}

#[test]
fn libibverbs_tool_files_call_without_a_circle() {
    // ibtca-verbs: main over the commands, the commands over the guest
    // pair, the pair over the libibverbs helpers.
    assert_calls_one_way(
        "tools/verbs",
        &[
            ("ibtca-verbs.c", "bench.c"),
            ("bench.c", "bench_lat.c"),
            ("bench_lat.c", "bench_cq.c"),
            ("bench.c", "pair.c"),
            ("verbs.c", "pair.c"),
            ("soak.c", "soak_conn.c"),
            ("soak_conn.c", "soak_msg.c"),
            ("soak_conn.c", "rc.c"),
            ("pair.c", "rc.c"),
            ("pair.c", "report.c"),
        ],
    );
}

#[test]
fn provider_files_call_without_a_circle() {
    // The context's ops tables name each file's verbs from the top; the
    // send WQEs are built in post.c and a QP's memory freed in qp.c.
    assert_calls_one_way(
        "provider",
        &[
            ("ibtca.c", "verbs.c"),
            ("verbs.c", "qp.c"),
            ("mw.c", "post.c"),
            ("qp_ex.c", "post.c"),
            ("qp_ex.c", "qp.c"),
        ],
    );
}

#[test]
fn kernel_files_call_without_a_circle() {
    // ibtca_ib.c's ib_device_ops names the verbs of every ibtca_ib_*.c;
    // they reach the device through ibtca_ib_hw.c, below the table.
    assert_calls_one_way(
        "kernel",
        &[
            ("ibtca_ib.c", "ibtca_ib_qp.c"),
            ("ibtca_ib.c", "ibtca_uctx.c"),
            ("ibtca_ib_qp.c", "ibtca_ib_hw.c"),
            ("ibtca_ib_qp.c", "ibtca_qp_options.c"),
            ("ibtca_ib_drdma.c", "ibtca_uctx.c"),
        ],
    );
}

#[test]
fn kernel_test_files_call_without_a_circle() {
    // Each file is a module of its own (tests/kernel/Kbuild) over what
    // ibtca.ko exports; one that shared another's code would sit below it.
    assert_calls_one_way("tests/kernel", &[]);
    let files = sources(&guest_driver().join("tests/kernel"));
    for f in [
        "ibtca_kverbs_test.c",
        "ibtca_kverbs_srq.c",
        "ibtca_kverbs_dbrec.c",
        "ibtca_kverbs_seed.c",
    ] {
        assert!(
            files.contains_key(f),
            "guest-driver/tests/kernel/{f} was read"
        );
    }
}

#[test]
fn provider_test_files_call_without_a_circle() {
    // main runs each part; the parts share the steps of provider_lib.c.
    assert_calls_one_way(
        "tests/provider",
        &[
            ("ibtca_provider_test.c", "ibtca_provider_ext.c"),
            ("ibtca_provider_ext.c", "ibtca_provider_lib.c"),
        ],
    );
}

#[test]
fn definitions_and_circles_are_read_as_the_compiler_sees_them() {
    let a = strip(
        "#include \"b.h\"\n#define M(x) \\\n  b_fn(x)\nint a_count;\nstatic int hidden;\n\
         const char *a_path = \"/dev/x; b_fn()\";\nstruct s { int f; };\n\
         static struct s table[] = { { 1 } };\nextern int b_var;\n\
         int a_fn(int x)\n{\n\tif (x) { return b_fn('}'); }\n\treturn 0;\n}\n\
         static void a_local(void) { a_fn(0); }\nint a_arr[2] = { 1, 2 };\n",
    );
    let defs: Vec<String> = definitions(&a).into_iter().collect();
    assert_eq!(defs, ["a_arr", "a_count", "a_fn", "a_path"]);
    let graph: BTreeMap<String, BTreeMap<String, String>> = [
        ("a.c", vec![("b.c", "b_fn")]),
        ("b.c", vec![("c.c", "c_fn")]),
        ("c.c", vec![("a.c", "a_count")]),
        ("d.c", vec![("a.c", "a_fn")]),
    ]
    .into_iter()
    .map(|(f, to)| {
        let to = to
            .into_iter()
            .map(|(g, n)| (g.to_string(), n.to_string()))
            .collect();
        (f.to_string(), to)
    })
    .collect();
    assert_eq!(circles(&graph), [["a.c", "b.c", "c.c"]]);
    // Prototypes and macro calls define nothing; a prototype's name in
    // another file is no use of it.
    let b = strip("int a_fn(int x);\nEXPORT_SYMBOL_GPL(b_fn);\nint b_fn(void) { return 0; }\n");
    assert_eq!(definitions(&b).into_iter().collect::<Vec<_>>(), ["b_fn"]);
}

#[test]
fn an_ops_table_uses_the_files_of_the_functions_it_names() {
    let code = |files: &[(&str, &str)]| -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(f, t)| (f.to_string(), strip(t)))
            .collect()
    };
    // dev.c's table names qp.c's create_qp; qp.c calls dev.c's dev_cmd.
    let circle = code(&[
        (
            "dev.c",
            "int dev_cmd(int op) { return op; }\n\
             static const struct ops dev_ops = {\n\t.create_qp = create_qp,\n};\n",
        ),
        ("qp.c", "int create_qp(void) { return dev_cmd(1); }\n"),
    ]);
    let graph = uses(&circle);
    assert_eq!(graph["dev.c"]["qp.c"], "create_qp");
    assert_eq!(circles(&graph), [["dev.c", "qp.c"]]);
    // dev_cmd below both; a call through the table names only a field.
    let one_way = code(&[
        (
            "dev.c",
            "static const struct ops dev_ops = { .create_qp = create_qp };\n\
             int dev_open(void) { return dev_ops.create_qp(); }\n",
        ),
        ("cmd.c", "int dev_cmd(int op) { return op; }\n"),
        (
            "qp.c",
            "int create_qp(void) { return dev_cmd(1); }\n\
             int qp_count(const struct ops *o) { return o->create_qp(); }\n",
        ),
    ]);
    let graph = uses(&one_way);
    assert_eq!(graph["qp.c"].keys().collect::<Vec<_>>(), ["cmd.c"]);
    assert!(circles(&graph).is_empty(), "{graph:#?}");
}
