//! Table printing and number formats shared by the benchmarks.

pub(super) fn fmt_us(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

pub(super) fn fmt_rate(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub(super) fn print_grid(header: &[&str], rows: &[Vec<String>], numeric: &[usize]) {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, s) in width.iter_mut().zip(r) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in c.iter().zip(&width).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            if numeric.contains(&i) {
                s.push_str(&pad);
                s.push_str(cell);
            } else {
                s.push_str(cell);
                s.push_str(&pad);
            }
            s.push_str("  ");
        }
        println!("{}", s.trim_end());
    };
    line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    println!(
        "{}",
        "-".repeat(width.iter().sum::<usize>() + 2 * (width.len() - 1))
    );
    for r in rows {
        line(r);
    }
}

pub(super) fn fmt_size(bytes: f64) -> String {
    let b = bytes as u64;
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

pub(super) fn pass_miss(ok: bool) -> String {
    if ok { "PASS" } else { "MISS" }.into()
}

/// The last `n` lines of a console, for error reports.
pub(super) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
