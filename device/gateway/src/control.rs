//! The gateway's control socket: one command per line, one reply line
//! each (`ok ...` or `error ...`), as the switch's:
//!
//! ```text
//! stats                      ok {"cells_in":...,"cells_out":...,...}
//! inspect                    ok {"ports":[{"port":1,"up":true,"counters":{...}}]}
//!                            (the IB port's counters under their IBA names)
//! remote-qpn VPI/VCI QPN     set a VC's peer QP (a guest learns its QPN
//!                            only when it creates the QP); restarts the
//!                            VC's QP from its first PSNs
//! ```
//!
//! `ibtca_agents::control_socket::request` is a client.

use std::io;
use std::path::Path;
use std::sync::Arc;

use ibtca_agents::control_socket::LineServer;

use ibtca_protocol::atm::Vc;

use crate::gateway::Gateway;

/// Parses `VPI/VCI`.
pub fn parse_vc(text: &str) -> Result<Vc, String> {
    let bad = || format!("`{text}` is not VPI/VCI (e.g. 0/32)");
    let (vpi, vci) = text.split_once('/').ok_or_else(bad)?;
    Ok(Vc {
        vpi: vpi.parse().map_err(|_| bad())?,
        vci: vci.parse().map_err(|_| bad())?,
    })
}

/// Runs one command line; returns the reply line.
pub fn execute(gw: &Gateway, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let result = match words.as_slice() {
        ["stats"] => Ok(gw.counters().to_json().to_string()),
        ["inspect"] => {
            let (totals, up) = gw.ib_port();
            Ok(serde_json::json!({"ports": [{
                "port": 1,
                "up": up,
                "counters": ibtca_agents::pma::iba_json(&totals),
            }]})
            .to_string())
        }
        ["remote-qpn", vc, qpn] => parse_vc(vc).and_then(|vc| {
            let qpn = ibtca_cli::ids::qpn(qpn)?;
            gw.set_remote_qpn(vc, qpn)
        }),
        _ => Err(format!(
            "unknown command `{}` (stats, inspect, remote-qpn VPI/VCI QPN)",
            line.trim()
        )),
    };
    match result {
        Ok(s) => format!("ok {s}"),
        Err(e) => format!("error {e}"),
    }
}

/// Serves `gw`'s commands on the control socket at `path`.
pub fn serve(gw: Arc<Gateway>, path: &Path) -> io::Result<LineServer> {
    LineServer::start(path, "ibtca-gw-control", move |line| execute(&gw, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcs_and_qpns_parse() {
        assert_eq!(parse_vc("0/32"), Ok(Vc { vpi: 0, vci: 32 }));
        assert_eq!(
            parse_vc("255/65535"),
            Ok(Vc {
                vpi: 255,
                vci: 65535
            })
        );
        assert!(parse_vc("256/32").is_err());
        assert!(parse_vc("0.32").unwrap_err().contains("VPI/VCI"));
    }
}
