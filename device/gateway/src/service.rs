//! ATM service classes and the SL each rides on the IB side.
//!
//! CBR and rt-VBR are delay-sensitive: by default they get SLs 1 and 2,
//! nrt-VBR SL3, UBR SL0, and the gateway's own VL weights (see
//! [`default_vl_weights`]) favour the first two. The gateway also serves
//! its queues in class order ([`Service::ALL`], highest first).

use std::fmt;
use std::str::FromStr;

/// An ATM service category (ATM Forum TM 4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    /// Constant bit rate.
    Cbr,
    /// Real-time variable bit rate.
    RtVbr,
    /// Non-real-time variable bit rate.
    NrtVbr,
    /// Unspecified bit rate.
    Ubr,
}

impl Service {
    /// Every class, highest priority first.
    pub const ALL: [Service; 4] = [Service::Cbr, Service::RtVbr, Service::NrtVbr, Service::Ubr];

    /// The class's rank: 0 is served first.
    pub fn rank(self) -> usize {
        self as usize
    }

    /// The name in maps and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Service::Cbr => "cbr",
            Service::RtVbr => "rt-vbr",
            Service::NrtVbr => "nrt-vbr",
            Service::Ubr => "ubr",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Service {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Service::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown service `{s}`: cbr, rt-vbr, nrt-vbr or ubr"))
    }
}

/// The SL of each service class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceSl([u8; 4]);

impl Default for ServiceSl {
    /// CBR on SL1, rt-VBR on SL2, nrt-VBR on SL3, UBR on SL0.
    fn default() -> Self {
        ServiceSl([1, 2, 3, 0])
    }
}

/// VL weights the gateway's port uses unless told otherwise (with
/// [`default_sl2vl`]), in IBA's 64-byte units per arbitration turn: VL0
/// (UBR) 1 KiB, VL1 (CBR) 8 KiB, VL2 (rt-VBR) 4 KiB, VL3 (nrt-VBR) 2 KiB,
/// so the shares stay 1:8:4:2 for packets up to 1 KiB.
pub fn default_vl_weights() -> Vec<u8> {
    vec![16, 128, 64, 32]
}

/// The gateway port's SL → VL table unless told otherwise: SL0..SL3 on
/// VL0..VL3, SL4..SL14 on VL0, SL15 on VL15.
pub fn default_sl2vl() -> [u8; 16] {
    let mut t = [0u8; 16];
    for (sl, vl) in t.iter_mut().enumerate().take(4) {
        *vl = sl as u8;
    }
    t[15] = 15;
    t
}

impl ServiceSl {
    /// The SL of `service`.
    pub fn sl(&self, service: Service) -> u8 {
        self.0[service.rank()]
    }

    /// Changes the table by `CLASS=SL[,CLASS=SL...]` (SL 0..=14: SL15 is
    /// the management SL).
    pub fn apply(&mut self, text: &str) -> Result<(), String> {
        for item in text.split(',').filter(|s| !s.is_empty()) {
            let (class, sl) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}`: expected CLASS=SL, e.g. cbr=1"))?;
            let class: Service = class.trim().parse()?;
            let sl: u8 = sl
                .trim()
                .parse()
                .ok()
                .filter(|sl| *sl < 15)
                .ok_or_else(|| format!("`{item}`: an SL is 0..=14 (SL15 is for management)"))?;
            self.0[class.rank()] = sl;
        }
        Ok(())
    }
}

impl FromStr for ServiceSl {
    type Err = String;

    /// The default table changed by `CLASS=SL,...`.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut t = ServiceSl::default();
        t.apply(s)?;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let t = ServiceSl::default();
        assert_eq!(Service::ALL.map(|s| t.sl(s)), [1, 2, 3, 0]);
        let t: ServiceSl = "ubr=5,cbr=7".parse().unwrap();
        assert_eq!(Service::ALL.map(|s| t.sl(s)), [7, 2, 3, 5]);
        assert_eq!(
            "abr=1".parse::<ServiceSl>().unwrap_err(),
            "unknown service `abr`: cbr, rt-vbr, nrt-vbr or ubr"
        );
        assert!("cbr=15"
            .parse::<ServiceSl>()
            .unwrap_err()
            .contains("0..=14"));
        assert!("cbr".parse::<ServiceSl>().unwrap_err().contains("CLASS=SL"));
    }
}
