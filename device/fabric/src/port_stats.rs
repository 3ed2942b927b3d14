//! `ibtca-fabric stats`: every port of every device, switch and gateway
//! with its counters under their IBA names (PortCounters and
//! PortCountersExtended), as text or JSON, once or every few seconds
//! until SIGINT or SIGTERM.

use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::inspect::PortView;

/// The counters every text row shows; others are shown when not zero.
pub const MAIN_COUNTERS: [&str; 8] = [
    "PortXmitData",
    "PortRcvData",
    "PortXmitPkts",
    "PortRcvPkts",
    "PortRcvErrors",
    "PortXmitDiscards",
    "SymbolErrorCounter",
    "VL15Dropped",
];

/// Devices, switches and gateways without counters: name, kind, why
/// (`inspect::unreachable`).
pub type Unreachable = [(String, &'static str, String)];

/// The ports as text: a header per device, switch or gateway, a row per
/// port (`port  N up|down STATE COUNTER VALUE ...`), then a line for each
/// process whose agent did not answer. `traps` gives the extra header
/// text of a process (a switch's traps).
pub fn render_text(
    ports: &[PortView],
    missing: &Unreachable,
    traps: &dyn Fn(&str) -> Option<String>,
) -> String {
    let mut s = String::new();
    let mut last: Option<&str> = None;
    for p in ports {
        if last != Some(p.name.as_str()) {
            s.push_str(&format!("{} {}\n", p.kind, p.name));
            if let Some(t) = traps(&p.name) {
                s.push_str(&format!("  traps to the SM: {t}\n"));
            }
            last = Some(&p.name);
        }
        s.push_str(&format!(
            "  port {:>2} {:<4} {:<6}",
            p.port,
            if p.up { "up" } else { "down" },
            p.state.as_deref().unwrap_or("")
        ));
        let all = p.counters.as_object().cloned().unwrap_or_default();
        for name in MAIN_COUNTERS {
            s.push_str(&format!(" {name} {}", p.counter(name)));
        }
        for (name, v) in &all {
            if !MAIN_COUNTERS.contains(&name.as_str()) && v.as_u64().is_some_and(|n| n > 0) {
                s.push_str(&format!(" {name} {v}"));
            }
        }
        s.push('\n');
    }
    for (name, kind, why) in missing {
        s.push_str(&format!("{kind} {name}: no counters ({why})\n"));
    }
    s
}

/// The ports as JSON (docs/inspect.md): `{"time": UNIX_SECONDS,
/// "ports": [{"name", "kind", "port", "up", "state", "lid", "counters"}],
/// "unreachable": [{"name", "kind", "error"}]}`.
pub fn render_json(ports: &[PortView], missing: &Unreachable) -> Value {
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    json!({
        "time": time,
        "ports": ports.iter().map(|p| json!({
            "name": p.name,
            "kind": p.kind,
            "port": p.port,
            "up": p.up,
            "state": p.state,
            "lid": p.lid,
            "counters": p.counters,
        })).collect::<Vec<_>>(),
        "unreachable": missing.iter().map(|(name, kind, error)| json!({
            "name": name,
            "kind": kind,
            "error": error,
        })).collect::<Vec<_>>(),
    })
}

/// Runs `show` now and then every `interval` until SIGINT or SIGTERM
/// (then returns Ok) or `show` fails.
pub fn watch(
    interval: Duration,
    mut show: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(|e| format!("cannot handle signals: {e}"))?;
    let handle = signals.handle();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = tx.send(());
        }
    });
    let result = loop {
        if let Err(e) = show() {
            break Err(e);
        }
        match rx.recv_timeout(interval) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => break Ok(()),
        }
    };
    handle.close();
    let _ = waiter.join();
    result
}
