//! The control socket of a running device (`ibtca-device --control
//! PATH`): one command per line, one reply line each (`ok ...` or
//! `error ...`), as the switch's (`switch/control.rs`), on the same line
//! server (`control_socket.rs`):
//!
//! ```text
//! port       ok {"state":"Active","lid":1,"sm_lid":0,...}
//! counters   ok {"PortXmitData":N,...} (IBA names: pma::iba_json)
//! qps        ok {"count":N,"qps":[{"qpn":N,"type":"RC","state":"RTS",...}]}
//! inspect    ok {"port":{...},"counters":{...},"engine":{...,"inbox":{...}},"qps":{...}}
//! ```
//!
//! Every answer comes from one [`DeviceSnapshot`] the engine builds
//! between two bursts of events when asked ([`EngineEvent::Inspect`]):
//! the control thread takes no lock the data path holds. It asks at most
//! once per [`MIN_INTERVAL`] (later commands within it reuse the last
//! snapshot), so a client that keeps asking costs the engine one
//! snapshot per interval, and it waits at most [`ENGINE_WAIT`] for the
//! answer (a stopping engine: an error reply).

use std::cell::RefCell;
use std::io;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::control_socket::LineServer;
use crate::engine::{DeviceSnapshot, EngineEvent, EngineHandle};
use crate::pma::iba_json;
use crate::regs;
use crate::verbs::qp_state::{QpState, QpType};

/// Least time between two snapshots the control thread asks for.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Longest wait for the engine's snapshot.
pub const ENGINE_WAIT: Duration = Duration::from_secs(5);

/// The port state's name (IBA's: Down, Init, Armed, Active).
pub fn port_state_name(state: u32) -> &'static str {
    match state {
        regs::PORT_DOWN => "Down",
        regs::PORT_INIT => "Init",
        regs::PORT_ARMED => "Armed",
        regs::PORT_ACTIVE => "Active",
        _ => "Unknown",
    }
}

fn qp_type_name(t: QpType) -> &'static str {
    match t {
        QpType::Rc => "RC",
        QpType::Ud => "UD",
        QpType::Smi => "SMI",
        QpType::Gsi => "GSI",
    }
}

fn qp_state_name(s: QpState) -> &'static str {
    match s {
        QpState::Reset => "RESET",
        QpState::Init => "INIT",
        QpState::Rtr => "RTR",
        QpState::Rts => "RTS",
        QpState::Sqe => "SQE",
        QpState::Err => "ERR",
    }
}

/// The port's part of `s` as JSON.
pub fn port_json(s: &DeviceSnapshot) -> Value {
    json!({
        "state": port_state_name(s.port_state),
        "lid": s.lid,
        "sm_lid": s.sm_lid,
        "lmc": s.lmc,
        "node_guid": format!("{:#018x}", s.node_guid),
        "port_guid": format!("{:#018x}", s.port_guid),
        "sm_managed": s.sm_managed,
        "node_description": s.node_description,
    })
}

/// The QPs of `s` as JSON.
pub fn qps_json(s: &DeviceSnapshot) -> Value {
    let qps: Vec<Value> = s
        .qps
        .iter()
        .map(|q| {
            json!({
                "qpn": q.qpn,
                "type": qp_type_name(q.qp_type),
                "state": qp_state_name(q.state),
                "dest_qpn": q.dest_qpn,
                "dlid": q.dlid,
                "sq_psn": q.sq_psn,
                "rq_psn": q.rq_psn,
                "transport": q.transport,
                "send_wqes_in_flight": q.send_wqes_in_flight,
                "send_cqn": q.send_cqn,
                "recv_cqn": q.recv_cqn,
                "sq": { "pi": q.sq.pi, "ci": q.sq.ci },
                "rq": q.rq.map(|r| json!({ "pi": r.pi, "ci": r.ci })),
                "db_record": q.db_record.map(|r| json!({
                    "sq_pi": r.sq_pi, "sq_awake": r.sq_awake,
                    "rq_pi": r.rq_pi, "rq_awake": r.rq_awake,
                })),
            })
        })
        .collect();
    json!({ "count": s.qp_count, "qps": qps })
}

/// The CQs of `s` as JSON.
pub fn cqs_json(s: &DeviceSnapshot) -> Value {
    let cqs: Vec<Value> = s
        .cqs
        .iter()
        .map(|c| {
            json!({
                "cqn": c.cqn,
                "entries": c.entries,
                "pi": c.pi,
                "ci": c.ci,
                "record_ci": c.record_ci,
                "armed": c.armed,
                "error": c.error,
            })
        })
        .collect();
    json!({ "count": cqs.len(), "cqs": cqs })
}

/// The engine's own counters of `s` as JSON.
pub fn engine_json(s: &DeviceSnapshot) -> Value {
    let e = &s.engine;
    json!({
        "rx_packets": e.rx_packets,
        "tx_packets": e.tx_packets,
        "loopback": e.loopback,
        "rx_malformed": e.rx_malformed,
        "rx_no_qp": e.rx_no_qp,
        "rx_port_init": e.rx_port_init,
        "tx_port_inactive": e.tx_port_inactive,
        "rx_bad_pkey": e.rx_bad_pkey,
        "qp_errors": e.qp_errors,
        "retry_exceeded": e.retry_exceeded,
        "flushed_sends": e.flushed_sends,
        "flushed_recvs": e.flushed_recvs,
        "late_doorbells": e.late_doorbells,
        "late_cq_arms": e.late_cq_arms,
        "inbox": inbox_json(s),
    })
}

/// The engine inbox's counters of `s` (`engine/inbox.rs`).
fn inbox_json(s: &DeviceSnapshot) -> Value {
    let h = &s.handoffs;
    json!({
        "peak": h.inbox_peak,
        "link_backpressure": h.link_backpressure,
        "host_backpressure": h.host_backpressure,
        "doorbells_coalesced": h.doorbells_coalesced,
        "engine_wakes": h.engine_wakes,
        "timer_wakes": h.timer_wakes,
        "vfio_inline": h.vfio_inline,
        "vfio_by_owner": h.vfio_by_owner,
        "vfio_queued": h.vfio_queued,
        "link_inline": h.link_inline,
        "link_by_owner": h.link_by_owner,
        "link_queued": h.link_queued,
    })
}

/// Everything of `s` as JSON (the `inspect` command).
pub fn inspect_json(s: &DeviceSnapshot) -> Value {
    json!({
        "port": port_json(s),
        "counters": iba_json(&s.totals),
        "engine": engine_json(s),
        "qps": qps_json(s),
        "cqs": cqs_json(s),
    })
}

/// Asks the engine behind `engine` for snapshots, at most one per
/// [`MIN_INTERVAL`].
struct Snapshots {
    engine: EngineHandle,
    last: Option<(Instant, Box<DeviceSnapshot>)>,
}

impl Snapshots {
    fn get(&mut self) -> Result<&DeviceSnapshot, String> {
        let fresh = self
            .last
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < MIN_INTERVAL);
        if !fresh {
            let (tx, rx) = mpsc::sync_channel(1);
            self.engine
                .send(EngineEvent::Inspect(tx))
                .map_err(|_| "the engine has stopped".to_owned())?;
            let mut snap = rx
                .recv_timeout(ENGINE_WAIT)
                .map_err(|_| "the engine did not answer".to_owned())?;
            snap.handoffs = self.engine.handoffs();
            self.last = Some((Instant::now(), snap));
        }
        self.last
            .as_ref()
            .map(|(_, s)| s.as_ref())
            .ok_or_else(|| "no snapshot".to_owned())
    }
}

fn execute(snapshots: &mut Snapshots, line: &str) -> String {
    let view: fn(&DeviceSnapshot) -> Value = match line {
        "port" => port_json,
        "counters" => |s| iba_json(&s.totals),
        "qps" => qps_json,
        "cqs" => cqs_json,
        "inspect" => inspect_json,
        _ => {
            return format!("error unknown command `{line}` (port, counters, qps, cqs, inspect)");
        }
    };
    match snapshots.get() {
        Ok(s) => format!("ok {}", view(s)),
        Err(e) => format!("error {e}"),
    }
}

/// Serves the device's commands on the control socket at `path`, asking
/// the engine behind `engine` (`Instance::engine`).
pub fn serve(engine: EngineHandle, path: &Path) -> io::Result<LineServer> {
    let snapshots = RefCell::new(Snapshots { engine, last: None });
    LineServer::start(path, "ibtca-dev-control", move |line| {
        execute(&mut snapshots.borrow_mut(), line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineStats, Handoffs};
    use crate::pma::PortTotals;

    fn snapshot() -> DeviceSnapshot {
        DeviceSnapshot {
            port_state: regs::PORT_ACTIVE,
            lid: 7,
            sm_lid: 1,
            lmc: 0,
            node_guid: 0x11,
            port_guid: 0x12,
            sm_managed: true,
            node_description: "h ibtca0".into(),
            totals: PortTotals {
                xmit_bytes: 400,
                ..PortTotals::default()
            },
            engine: EngineStats::default(),
            handoffs: Handoffs {
                inbox_peak: 9,
                ..Handoffs::default()
            },
            qps: Vec::new(),
            qp_count: 0,
            cqs: Vec::new(),
        }
    }

    #[test]
    fn commands_answer_from_the_engines_snapshot_or_say_why_not() {
        let (tx, rx) = EngineHandle::channel();
        let engine = std::thread::spawn(move || {
            // Answers every Inspect until Stop, then stops (drops its
            // receiver): commands may be more than MIN_INTERVAL apart.
            while let Ok(EngineEvent::Inspect(reply)) = rx.recv() {
                reply.send(Box::new(snapshot())).unwrap();
            }
        });
        let mut s = Snapshots {
            engine: tx,
            last: None,
        };
        let port = execute(&mut s, "port");
        let v: Value = serde_json::from_str(port.strip_prefix("ok ").unwrap()).unwrap();
        assert_eq!(
            (&v["state"], &v["lid"], &v["sm_lid"]),
            (&"Active".into(), &7.into(), &1.into())
        );
        // The inbox's counters come from the handle, not the engine's
        // snapshot (whose are left zero).
        let v: Value = serde_json::from_str(&execute(&mut s, "inspect")[3..]).unwrap();
        assert_eq!(v["engine"]["inbox"]["peak"], 0);
        assert_eq!(v["engine"]["inbox"]["doorbells_coalesced"], 0);
        assert!(execute(&mut s, "bogus").starts_with("error unknown command `bogus`"));
        s.engine.send(EngineEvent::Stop).unwrap();
        engine.join().unwrap();
        // Past the interval the stopped engine is asked again: an error,
        // not a hang and not the old snapshot.
        std::thread::sleep(MIN_INTERVAL);
        assert_eq!(execute(&mut s, "counters"), "error the engine has stopped");
    }
}
