//! The textual forms of switch options, shared by the `ibtca-switch`
//! command line and the fabric launcher that writes it:
//!
//! - route: `LID=PORT` or `FIRST-LAST=PORT` (unicast LIDs, decimal or `0x`
//!   hex: [`ibtca_cli::ids`]);
//! - faults: `PORT=drop:N,dup:N,reorder:N,corrupt:N,seed:N` with rates in
//!   per-mille (10 = 1 %), any subset, in any order;
//! - capture: `PORT=FILE`;
//! - delay: `PORT=MICROSECONDS`;
//! - SL → VL table: `PORT=VL,VL,...` (16 VLs, SL0 first), VL weights:
//!   `PORT=W,W,...` (one per data VL, VL0 first): see [`crate::vl_config`].

use std::path::PathBuf;

use ibtca_link::FaultRates;

/// Why an option's text is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The `=` is missing.
    #[error("`{0}`: expected KEY=VALUE")]
    MissingEquals(String),
    /// A number does not parse or is out of range.
    #[error("`{text}`: bad {what}")]
    BadNumber {
        /// The whole option.
        text: String,
        /// Which number.
        what: &'static str,
    },
    /// An IB identifier (LID, ...) that does not parse or is out of range.
    #[error("`{text}`: {error}")]
    Id {
        /// The whole option.
        text: String,
        /// What is wrong ([`ibtca_cli::ids`]).
        error: String,
    },
    /// A bad SL → VL table or weight list.
    #[error("`{text}`: {error}")]
    Vl {
        /// The whole option.
        text: String,
        /// What is wrong.
        error: ibtca_agents::vl_config::VlConfigError,
    },
    /// A fault name other than drop, dup, reorder, corrupt or seed.
    #[error("`{0}`: unknown fault (drop, dup, reorder, corrupt, seed)")]
    UnknownFault(String),
}

fn split(text: &str) -> Result<(&str, &str), SpecError> {
    text.split_once('=')
        .ok_or_else(|| SpecError::MissingEquals(text.to_owned()))
}

fn number(text: &str, field: &str, what: &'static str) -> Result<u64, SpecError> {
    let bad = || SpecError::BadNumber {
        text: text.to_owned(),
        what,
    };
    match field.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| bad()),
        None => field.parse().map_err(|_| bad()),
    }
}

fn port(text: &str, field: &str) -> Result<u8, SpecError> {
    let p = number(text, field, "port")?;
    u8::try_from(p)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(SpecError::BadNumber {
            text: text.to_owned(),
            what: "port",
        })
}

/// Parses a route option into (LID, port) pairs.
pub fn parse_route(text: &str) -> Result<Vec<(u16, u8)>, SpecError> {
    let (lids, p) = split(text)?;
    let p = port(text, p)?;
    let lid = |s: &str| {
        ibtca_cli::ids::lid(s).map_err(|error| SpecError::Id {
            text: text.to_owned(),
            error,
        })
    };
    let (first, last) = match lids.split_once('-') {
        Some((a, b)) => (lid(a)?, lid(b)?),
        None => (lid(lids)?, lid(lids)?),
    };
    if first > last {
        return Err(SpecError::BadNumber {
            text: text.to_owned(),
            what: "LID range",
        });
    }
    Ok((first..=last).map(|l| (l, p)).collect())
}

/// Parses a faults option into (port, rates).
pub fn parse_faults(text: &str) -> Result<(u8, FaultRates), SpecError> {
    let (p, list) = split(text)?;
    let p = port(text, p)?;
    let mut rates = FaultRates::default();
    for item in list.split(',').filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once(':')
            .ok_or_else(|| SpecError::UnknownFault(item.to_owned()))?;
        let v = number(text, value, "fault rate")?;
        let per_mille = || {
            u16::try_from(v)
                .ok()
                .filter(|v| *v <= 1000)
                .ok_or(SpecError::BadNumber {
                    text: text.to_owned(),
                    what: "rate (0..=1000 per mille)",
                })
        };
        match name {
            "drop" => rates.drop = per_mille()?,
            "dup" => rates.duplicate = per_mille()?,
            "reorder" => rates.reorder = per_mille()?,
            "corrupt" => rates.corrupt = per_mille()?,
            "seed" => rates.seed = v,
            _ => return Err(SpecError::UnknownFault(item.to_owned())),
        }
    }
    Ok((p, rates))
}

/// Writes rates in the form [`parse_faults`] reads (after `PORT=`).
pub fn format_faults(rates: &FaultRates) -> String {
    format!(
        "drop:{},dup:{},reorder:{},corrupt:{},seed:{}",
        rates.drop, rates.duplicate, rates.reorder, rates.corrupt, rates.seed
    )
}

/// Parses a delay option, `PORT=MICROSECONDS`, into (port, delay).
pub fn parse_delay(text: &str) -> Result<(u8, std::time::Duration), SpecError> {
    let (p, us) = split(text)?;
    let us = number(text, us, "delay (µs)")?;
    Ok((port(text, p)?, std::time::Duration::from_micros(us)))
}

/// Parses an SL → VL option into (port, table).
pub fn parse_sl2vl(text: &str) -> Result<(u8, [u8; 16]), SpecError> {
    let (p, list) = split(text)?;
    let table = ibtca_agents::vl_config::parse_sl2vl(list).map_err(|error| SpecError::Vl {
        text: text.to_owned(),
        error,
    })?;
    Ok((port(text, p)?, table))
}

/// Parses a VL weights option into (port, weights).
pub fn parse_vl_weights(text: &str) -> Result<(u8, Vec<u8>), SpecError> {
    let (p, list) = split(text)?;
    let weights = ibtca_agents::vl_config::parse_weights(list).map_err(|error| SpecError::Vl {
        text: text.to_owned(),
        error,
    })?;
    Ok((port(text, p)?, weights))
}

/// Parses a capture option into (port, file).
pub fn parse_capture(text: &str) -> Result<(u8, PathBuf), SpecError> {
    let (p, file) = split(text)?;
    if file.is_empty() {
        return Err(SpecError::MissingEquals(text.to_owned()));
    }
    Ok((port(text, p)?, PathBuf::from(file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(parse_route("5=2"), Ok(vec![(5, 2)]));
        assert_eq!(parse_route("0x10-0x12=1").unwrap().len(), 3);
        assert!(parse_route("5").is_err());
        assert!(parse_route("5=0").is_err());
        assert!(parse_route("5=300").is_err());
        assert!(parse_route("9-5=1").is_err());
        assert!(parse_route("70000=1").is_err());
        assert_eq!(
            parse_route("0xc000=1").unwrap_err().to_string(),
            "`0xc000=1`: LID 0xc000 is out of range 1–0xbfff"
        );
    }

    #[test]
    fn faults_round_trip() {
        let (p, r) = parse_faults("3=drop:10,corrupt:5,seed:9").unwrap();
        assert_eq!(
            (p, r.drop, r.corrupt, r.seed, r.duplicate),
            (3, 10, 5, 9, 0)
        );
        let again = parse_faults(&format!("3={}", format_faults(&r))).unwrap();
        assert_eq!(again, (3, r));
        assert!(parse_faults("3=drop:1001").is_err());
        assert!(parse_faults("3=lose:1").is_err());
        assert!(parse_faults("3=drop").is_err());
    }

    #[test]
    fn delays() {
        assert_eq!(
            parse_delay("1=2500"),
            Ok((1, std::time::Duration::from_micros(2500)))
        );
        assert!(parse_delay("1=-3").is_err());
        assert!(parse_delay("0=3").is_err());
    }

    #[test]
    fn captures() {
        assert_eq!(
            parse_capture("2=/tmp/x.pcap"),
            Ok((2, "/tmp/x.pcap".into()))
        );
        assert!(parse_capture("2=").is_err());
    }
}
