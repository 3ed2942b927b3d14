//! The soak's report: what ran, the counts per pair, RSS, and the verdict.

#![allow(clippy::wildcard_imports)]

use super::*;

pub(crate) fn report(
    s: &Soak,
    v: &check::Verdict,
    stats: &[(String, String)],
    logs: &[(String, String)],
) {
    let killed = s
        .killed
        .map(|i| s.plan.nodes[i].name.clone())
        .unwrap_or_else(|| "none".into());
    println!();
    println!("## ibtca soak");
    println!();
    println!(
        "- {} nodes on one switch ({}), every switch port dropping, duplicating, reordering and corrupting 1 % of what it sends",
        s.plan.nodes.len(),
        s.opts.topology.display()
    );
    println!(
        "- soak {} s per guest; node killed and restarted: {killed} (at {:.0} % of the run)",
        s.opts.seconds,
        s.opts.kill_at * 100.0
    );
    println!("- wall time {:.0} s", s.t0.elapsed().as_secs_f64());
    println!();
    println!("Events:");
    for e in &s.events {
        println!("- {e}");
    }
    let stalls = s.stalls.list();
    match stalls.iter().map(|&(_, l)| l).fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.max(l)))) {
        None => println!("- the runner's 10 ms sleeps never woke more than 100 ms late"),
        Some(max) => println!(
            "- the runner's 10 ms sleeps woke more than 100 ms late {} times (host stalls), at most {:.0} ms: {}",
            stalls.len(),
            max * 1000.0,
            stalls
                .iter()
                .map(|(at, l)| format!("{:.0} ms at {at:.0} s", l * 1000.0))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
    println!();
    println!("| from → to | posted | written ok | write errors | retry exceeded | flushed | reconnects | received | verified | mismatched | out of order |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &v.rows {
        let s_ = |k: &str| r.sent.get(k).copied().unwrap_or(0);
        let g = |k: &str| r.got.get(k).copied().unwrap_or(0);
        println!(
            "| {} → {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.from,
            r.to,
            s_("posted"),
            s_("written_ok"),
            s_("write_errors"),
            s_("retry_exceeded"),
            s_("flushed"),
            s_("reconnects"),
            g("received"),
            g("verified"),
            g("mismatched"),
            g("out_of_order")
        );
    }
    println!();
    println!("| process | samples | RssAnon min (MiB) | RssAnon max (MiB) | VmRSS max (MiB) |");
    println!("|---|---:|---:|---:|---:|");
    for r in &s.rss {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.name,
            r.samples,
            if r.samples > 0 {
                mib(r.anon_min)
            } else {
                "-".into()
            },
            mib(r.anon_max),
            mib(r.rss_max)
        );
    }
    println!();
    println!("Device RssAnon bound: {} MiB.", s.opts.rss_bound_mib);
    println!();
    for (name, text) in logs {
        let line = |key: &str| {
            text.lines()
                .rev()
                .find(|l| l.contains(key))
                .map(|l| l.split_once(key).map_or(l, |(_, r)| r).trim().to_owned())
        };
        println!(
            "- {name}: {} lines, {} WARN, {} ERROR, {} \"QP enters the error state\"{}{}",
            text.lines().count(),
            count(text, " WARN "),
            count(text, " ERROR "),
            count(text, "QP enters the error state"),
            line("engine counters")
                .map(|l| format!("; engine {l}"))
                .unwrap_or_default(),
            line("switch counters")
                .map(|l| format!("; {l}"))
                .unwrap_or_default(),
        );
    }
    for (name, reply) in stats {
        println!("- switch {name} stats: {reply}");
    }
    println!();
    if s.failures.is_empty() {
        println!("SOAK PASSED");
    } else {
        println!("SOAK FAILED:");
        for f in &s.failures {
            println!("  - {f}");
        }
    }
}
