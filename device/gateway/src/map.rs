//! The VC map (`--map FILE`, or inline in a topology's gateway entry): one
//! entry per ATM virtual connection, naming its AAL, service class and the
//! IB QP it is joined to.
//!
//! ```json
//! {"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
//!           "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2, "remote_qpn": 16}}]}
//! ```
//!
//! `vpi` and `vci` are each a number or an inclusive range `[first, last]`
//! (seed 003: the gateway accepts the VPI/VCI ranges assigned to it): an
//! entry with ranges takes the cells of every VC in them, each VC
//! reassembled on its own, onto its one QP, and sends what that QP
//! receives on the entry's first VC. An entry covers at most
//! [`MAX_RANGE_VCS`] VCs; entries may not overlap. A cell on a VC no entry
//! covers is dropped and counted (`unknown_vc`).
//!
//! Optional: `blocks` (AAL1: 47-byte blocks per IB message, default 8),
//! `max_sdu` (AAL5: largest frame, default 65,535), `ib.remote_qpn` (set
//! at run time through the control socket when left out), `ib.sq_psn`
//! and `ib.rq_psn` (the first PSN the gateway's QP sends and expects, as
//! the peer's MODIFY_QP has them the other way round; default 0). The `ib`
//! numbers may also be strings, hex (`"0x10"`) or decimal. The whole map
//! is checked before anything starts; every problem is reported, each
//! naming its entry.

use std::collections::HashMap;
use std::fmt;

use ibtca_cli::ids;
use ibtca_protocol::atm::aal5::MAX_SDU;
use ibtca_protocol::atm::{Aal, Vc};
use serde::Deserialize;

use crate::service::Service;

/// Default AAL1 blocks per message.
pub const DEFAULT_AAL1_BLOCKS: usize = 8;
/// Most AAL1 blocks per message (one message stays within 65,535 bytes).
pub const MAX_AAL1_BLOCKS: usize = 1394;
/// Most VCs one entry's ranges cover.
pub const MAX_RANGE_VCS: u64 = 4096;
/// Largest QPN or PSN (24 bits).
const MAX_QPN: u64 = 0xff_ffff;
/// Largest unicast LID.
const MAX_UNICAST_LID: u64 = 0xbfff;

/// One connection of a checked map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VcEntry {
    /// VPI/VCI: the first of the entry's ranges, the VC what its QP
    /// receives is sent on.
    pub vc: Vc,
    /// The last VPI/VCI of the entry's ranges (`vc` for a single VC).
    pub last: Vc,
    /// The adaptation layer (with its parameters).
    pub aal: Aal,
    /// Service class.
    pub service: Service,
    /// The local RC QP's number.
    pub local_qpn: u32,
    /// The peer port's LID.
    pub remote_lid: u16,
    /// The peer QP, if known yet.
    pub remote_qpn: Option<u32>,
    /// First PSN the QP sends.
    pub sq_psn: u32,
    /// First PSN the QP expects.
    pub rq_psn: u32,
}

/// A checked VC map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VcMap {
    /// The connections, in file order.
    pub vcs: Vec<VcEntry>,
}

/// Why a map was refused: every problem found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct MapError(pub Vec<String>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMap {
    vcs: Vec<RawVc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVc {
    vpi: Span,
    vci: Span,
    aal: u64,
    service: String,
    #[serde(default)]
    blocks: Option<u64>,
    #[serde(default)]
    max_sdu: Option<u64>,
    ib: RawIb,
}

/// A VPI or VCI: one number or an inclusive `[first, last]`.
#[derive(Deserialize, Clone, Copy)]
#[serde(untagged)]
enum Span {
    One(u64),
    Range([u64; 2]),
}

impl Span {
    fn bounds(self) -> (u64, u64) {
        match self {
            Span::One(n) => (n, n),
            Span::Range([a, b]) => (a, b),
        }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Span::One(n) => write!(f, "{n}"),
            Span::Range([a, b]) => write!(f, "{a}..={b}"),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIb {
    qp: String,
    #[serde(deserialize_with = "ids::number_in_file")]
    local_qpn: u64,
    #[serde(deserialize_with = "ids::number_in_file")]
    remote_lid: u64,
    #[serde(default, deserialize_with = "ids::optional_number_in_file")]
    remote_qpn: Option<u64>,
    #[serde(default, deserialize_with = "ids::optional_number_in_file")]
    remote_qkey: Option<u64>,
    #[serde(default, deserialize_with = "ids::optional_number_in_file")]
    sq_psn: Option<u64>,
    #[serde(default, deserialize_with = "ids::optional_number_in_file")]
    rq_psn: Option<u64>,
}

impl VcEntry {
    /// Whether `vc` is in the entry's ranges.
    pub fn contains(&self, vc: Vc) -> bool {
        (self.vc.vpi..=self.last.vpi).contains(&vc.vpi)
            && (self.vc.vci..=self.last.vci).contains(&vc.vci)
    }

    /// Every VC of the entry's ranges, VPI-major.
    pub fn vcs(&self) -> impl Iterator<Item = Vc> + '_ {
        (self.vc.vpi..=self.last.vpi)
            .flat_map(move |vpi| (self.vc.vci..=self.last.vci).map(move |vci| Vc { vpi, vci }))
    }
}

impl VcMap {
    /// Parses and checks a map file's text.
    pub fn from_json(text: &str) -> Result<Self, MapError> {
        let raw: RawMap =
            serde_json::from_str(text).map_err(|e| MapError(vec![format!("not a VC map: {e}")]))?;
        Self::check(raw)
    }

    /// Checks a map given as a JSON value (a topology's inline map).
    pub fn from_value(value: serde_json::Value) -> Result<Self, MapError> {
        let raw: RawMap = serde_json::from_value(value)
            .map_err(|e| MapError(vec![format!("not a VC map: {e}")]))?;
        Self::check(raw)
    }

    /// The entry whose ranges hold `vc`.
    pub fn get(&self, vc: Vc) -> Option<&VcEntry> {
        self.vcs.iter().find(|e| e.contains(vc))
    }

    fn check(raw: RawMap) -> Result<Self, MapError> {
        let mut errors = Vec::new();
        if raw.vcs.is_empty() {
            errors.push("the map has no VCs (\"vcs\": [...] is empty)".to_string());
        }
        let mut vcs = Vec::new();
        let mut spans: Vec<((u64, u64), (u64, u64))> = Vec::new();
        let mut by_qpn: HashMap<u64, usize> = HashMap::new();
        for (i, v) in raw.vcs.iter().enumerate() {
            let mut err = |what: String| {
                errors.push(format!("vcs[{i}] (VPI/VCI {}/{}): {what}", v.vpi, v.vci))
            };
            let (vpi, vci) = (v.vpi.bounds(), v.vci.bounds());
            let meets = |a: (u64, u64), b: (u64, u64)| a.0 <= b.1 && b.0 <= a.1;
            if let Some(j) = spans
                .iter()
                .position(|(p, c)| meets(*p, vpi) && meets(*c, vci))
            {
                if spans[j] == (vpi, vci) && vpi.0 == vpi.1 && vci.0 == vci.1 {
                    err(format!("mapped twice (also vcs[{j}])"));
                } else {
                    err(format!("overlaps vcs[{j}]: a VC is mapped once"));
                }
            }
            spans.push((vpi, vci));
            for (name, (a, b)) in [("vpi", vpi), ("vci", vci)] {
                if a > b {
                    err(format!(
                        "{name} range [{a}, {b}] is empty: [first, last], first <= last"
                    ));
                }
            }
            let count = (vpi.1 + 1).saturating_sub(vpi.0) * (vci.1 + 1).saturating_sub(vci.0);
            if count > MAX_RANGE_VCS {
                err(format!(
                    "covers {count} VCs: an entry covers at most {MAX_RANGE_VCS}"
                ));
            }
            if let Some(j) = by_qpn.insert(v.ib.local_qpn, i) {
                err(format!(
                    "local_qpn {} is also vcs[{j}]'s: one QP per VC",
                    v.ib.local_qpn
                ));
            }
            if vpi.1 > 255 {
                err(format!(
                    "vpi {} is out of range: a UNI VPI has 8 bits (0..=255)",
                    v.vpi
                ));
            }
            if vci.1 > 0xffff {
                err(format!("vci {} is out of range: a VCI has 16 bits", v.vci));
            } else if vci.0 < 32 {
                err(format!(
                    "VCI {} is reserved: VCIs 0..=31 are for unassigned cells, signalling, \
                     OAM, resource management and ILMI (I.361, ATM Forum UNI); use 32 or above",
                    v.vci
                ));
            }
            let service = v.service.parse::<Service>().map_err(&mut err).ok();
            let aal = match v.aal {
                5 => Some(Aal::Aal5 {
                    max_sdu: match v.max_sdu {
                        None => MAX_SDU,
                        Some(n @ 1..=65_535) => n as usize,
                        Some(n) => {
                            err(format!("max_sdu {n}: an AAL5 frame has 1..=65535 bytes"));
                            MAX_SDU
                        }
                    },
                }),
                1 => Some(Aal::Aal1 {
                    blocks: match v.blocks {
                        None => DEFAULT_AAL1_BLOCKS,
                        Some(n) if (1..=MAX_AAL1_BLOCKS as u64).contains(&n) => n as usize,
                        Some(n) => {
                            err(format!(
                                "blocks {n}: 1..={MAX_AAL1_BLOCKS} 47-byte blocks per message"
                            ));
                            DEFAULT_AAL1_BLOCKS
                        }
                    },
                }),
                0 => Some(Aal::Aal0),
                n => {
                    err(format!(
                        "AAL {n} is not supported: aal is 5, 1 or 0 (raw cells)"
                    ));
                    None
                }
            };
            if v.blocks.is_some() && v.aal != 1 {
                err("`blocks` is for AAL1 only".into());
            }
            if v.max_sdu.is_some() && v.aal != 5 {
                err("`max_sdu` is for AAL5 only".into());
            }
            match v.ib.qp.as_str() {
                "rc" => {
                    if v.ib.remote_qkey.is_some() {
                        err("ib.remote_qkey is for UD QPs; this one is RC".into());
                    }
                }
                "ud" => err(
                    "ib.qp \"ud\" needs a UD transport, which ibtca does not have yet \
                     (the subnet management issue); use \"rc\""
                        .into(),
                ),
                other => err(format!(
                    "ib.qp \"{other}\" is unknown: \"rc\" (or \"ud\" once there is UD)"
                )),
            }
            if !(2..=MAX_QPN).contains(&v.ib.local_qpn) {
                err(format!(
                    "ib.local_qpn {} is out of range: 2..=0xffffff (QP0 and QP1 are the SMI and GSI)",
                    v.ib.local_qpn
                ));
            }
            if let Some(q) = v.ib.remote_qpn.filter(|q| !(2..=MAX_QPN).contains(q)) {
                err(format!("ib.remote_qpn {q} is out of range: 2..=0xffffff"));
            }
            for (name, psn) in [("sq_psn", v.ib.sq_psn), ("rq_psn", v.ib.rq_psn)] {
                if let Some(p) = psn.filter(|p| *p > MAX_QPN) {
                    err(format!("ib.{name} {p} is out of range: a PSN has 24 bits"));
                }
            }
            if !(1..=MAX_UNICAST_LID).contains(&v.ib.remote_lid) {
                err(format!(
                    "ib.remote_lid {} is not a unicast LID (1..=0xbfff)",
                    v.ib.remote_lid
                ));
            }
            if let (Some(service), Some(aal)) = (service, aal) {
                vcs.push(VcEntry {
                    vc: Vc {
                        vpi: vpi.0 as u8,
                        vci: vci.0 as u16,
                    },
                    last: Vc {
                        vpi: vpi.1 as u8,
                        vci: vci.1 as u16,
                    },
                    aal,
                    service,
                    local_qpn: v.ib.local_qpn as u32,
                    remote_lid: v.ib.remote_lid as u16,
                    remote_qpn: v.ib.remote_qpn.map(|q| q as u32),
                    sq_psn: (v.ib.sq_psn.unwrap_or(0) & MAX_QPN) as u32,
                    rq_psn: (v.ib.rq_psn.unwrap_or(0) & MAX_QPN) as u32,
                });
            }
        }
        if errors.is_empty() {
            Ok(VcMap { vcs })
        } else {
            Err(MapError(errors))
        }
    }
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
