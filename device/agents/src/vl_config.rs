//! A port's virtual-lane settings (seed 003): its SL → VL table, which
//! every egress port (device or switch port) applies to what it sends, and
//! the arbitration weights of its data VLs: IBA's 64-byte units per turn,
//! the port's low-priority VLArbitrationTable (VL n, weight n) until an SM
//! sets one (a packet starts while its VL's turn has weight left, so
//! weight 1 is one packet a turn, 64 is 4 KiB). The number of weights is
//! the number of data VLs the port runs (1..=15); VL15 (management) always
//! exists, is served first, and carries SL15 only.
//!
//! Text forms (command line of `ibtca-device` and `ibtca-switch`, written
//! by `ibtca-fabric`): a table is 16 comma-separated VLs, the VL of SL0
//! first (`0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,15`); weights are comma-separated
//! 64-byte units per turn, VL0 first (`4,1`).

use ibtca_protocol::encoded;

use ibtca_link::{FlowControl, VL15};

/// SL → VL table entries.
pub const SLS: usize = 16;
/// Most data VLs a port runs (VL0..=VL14).
pub const MAX_DATA_VLS: usize = 15;

/// The identity table: SL n on VL n.
pub const SL2VL_IDENTITY: [u8; SLS] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// Why a VL setting is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VlConfigError {
    /// A table without exactly 16 entries.
    #[error("an SL→VL table has 16 entries (SL0..SL15), not {0}")]
    TableLength(usize),
    /// Weights for none or more than 15 VLs.
    #[error("VL weights: one per data VL, 1..=15 of them, not {0}")]
    WeightCount(usize),
    /// A number that does not parse or is out of range.
    #[error("`{0}`: not a number 0..=255")]
    BadNumber(String),
    /// An SL mapped to a VL the port does not run.
    #[error("SL{sl} → VL{vl}, but the port runs data VLs 0..={last} (one weight each)")]
    VlOutOfRange {
        /// The SL.
        sl: usize,
        /// Its VL.
        vl: u8,
        /// Highest data VL.
        last: usize,
    },
    /// An SL mapped to a VL that arbitration never serves.
    #[error("SL{sl} → VL{vl}, whose weight is 0: its packets would never leave")]
    ZeroWeight {
        /// The SL.
        sl: usize,
        /// Its VL.
        vl: u8,
    },
    /// SL15 not on VL15.
    #[error("SL15 is the management SL: its entry must be 15 (VL15), not {0}")]
    Sl15(u8),
}

/// One port's VL settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlConfig {
    /// VL of each SL.
    pub sl2vl: [u8; SLS],
    /// Arbitration weight of each data VL (VL0 first) in 64-byte units per
    /// turn; their number is the port's number of data VLs.
    pub weights: Vec<u8>,
}

impl Default for VlConfig {
    /// 15 data VLs, SL n on VL n, every weight 1.
    fn default() -> Self {
        VlConfig {
            sl2vl: SL2VL_IDENTITY,
            weights: vec![1; MAX_DATA_VLS],
        }
    }
}

fn numbers(text: &str) -> Result<Vec<u8>, VlConfigError> {
    text.split(',')
        .map(|s| {
            let s = s.trim();
            s.parse::<u8>()
                .map_err(|_| VlConfigError::BadNumber(s.to_owned()))
        })
        .collect()
}

/// Parses an SL → VL table (16 VLs, SL0 first).
pub fn parse_sl2vl(text: &str) -> Result<[u8; SLS], VlConfigError> {
    let v = numbers(text)?;
    <[u8; SLS]>::try_from(v.as_slice()).map_err(|_| VlConfigError::TableLength(v.len()))
}

/// Parses VL weights (one per data VL, VL0 first).
pub fn parse_weights(text: &str) -> Result<Vec<u8>, VlConfigError> {
    let v = numbers(text)?;
    if v.is_empty() || v.len() > MAX_DATA_VLS {
        return Err(VlConfigError::WeightCount(v.len()));
    }
    Ok(v)
}

/// The text form of a table or of weights.
pub fn format_list(values: &[u8]) -> String {
    values
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl VlConfig {
    /// Checks the settings: 1..=15 weights; every data SL on a data VL
    /// the port runs whose weight is not 0; SL15 on VL15.
    pub fn validate(&self) -> Result<(), VlConfigError> {
        let n = self.weights.len();
        if n == 0 || n > MAX_DATA_VLS {
            return Err(VlConfigError::WeightCount(n));
        }
        for (sl, &vl) in self.sl2vl.iter().enumerate().take(SLS - 1) {
            match self.weights.get(usize::from(vl)) {
                None => {
                    return Err(VlConfigError::VlOutOfRange {
                        sl,
                        vl,
                        last: n - 1,
                    })
                }
                Some(0) => return Err(VlConfigError::ZeroWeight { sl, vl }),
                Some(_) => {}
            }
        }
        match self.sl2vl[SLS - 1] {
            VL15 => Ok(()),
            other => Err(VlConfigError::Sl15(other)),
        }
    }

    /// The VL a packet of service level `sl` leaves on.
    pub fn vl(&self, sl: u8) -> u8 {
        if sl >= VL15 {
            return VL15;
        }
        self.sl2vl.get(usize::from(sl)).copied().unwrap_or(0)
    }

    /// The link's arbitration weights (VLs the port does not run: 0).
    pub fn link_weights(&self) -> [u8; MAX_DATA_VLS] {
        let mut w = [0; MAX_DATA_VLS];
        for (dst, src) in w.iter_mut().zip(&self.weights) {
            *dst = *src;
        }
        w
    }

    /// `flow` with this port's weights.
    pub fn apply(&self, flow: &mut FlowControl) {
        flow.weights = self.link_weights();
    }
}

/// Sets the LRH VL of an encoded packet to what `cfg` maps its SL to, with
/// a fresh VCRC when the VL changes (the VL is a variant field: the ICRC
/// does not cover it).
pub fn remap(cfg: &VlConfig, packet: &mut [u8]) {
    let (Some(old), Some(sl)) = (encoded::vl(packet), encoded::sl(packet)) else {
        return;
    };
    if old == VL15 {
        // Subnet management stays on VL15 whatever its SL.
        return;
    }
    let vl = cfg.vl(sl);
    if old != vl {
        encoded::set_vl(packet, vl);
        encoded::restamp_vcrc(packet);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_round_trip_and_bad_ones_are_refused() {
        let t = parse_sl2vl("0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,15").unwrap();
        assert_eq!(t[1], 1);
        assert_eq!(
            format_list(&t),
            "0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,15".to_owned()
        );
        assert_eq!(parse_sl2vl("0,1"), Err(VlConfigError::TableLength(2)));
        assert_eq!(
            parse_sl2vl("0,x"),
            Err(VlConfigError::BadNumber("x".into()))
        );
        assert_eq!(parse_weights("4, 1").unwrap(), vec![4, 1]);
        assert_eq!(
            parse_weights(&["1"; 16].join(",")),
            Err(VlConfigError::WeightCount(16))
        );
    }

    #[test]
    fn a_table_must_fit_the_port_s_vls() {
        assert_eq!(VlConfig::default().validate(), Ok(()));
        let mut two = VlConfig {
            sl2vl: parse_sl2vl("0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,15").unwrap(),
            weights: vec![4, 1],
        };
        assert_eq!(two.validate(), Ok(()));
        assert_eq!((two.vl(0), two.vl(1), two.vl(15)), (0, 1, 15));
        assert_eq!(two.link_weights()[..3], [4, 1, 0]);
        two.sl2vl[3] = 2;
        assert_eq!(
            two.validate(),
            Err(VlConfigError::VlOutOfRange {
                sl: 3,
                vl: 2,
                last: 1
            })
        );
        two.sl2vl[3] = 1;
        two.weights[1] = 0;
        assert_eq!(
            two.validate(),
            Err(VlConfigError::ZeroWeight { sl: 1, vl: 1 })
        );
        two.weights[1] = 1;
        two.sl2vl[15] = 0;
        assert_eq!(two.validate(), Err(VlConfigError::Sl15(0)));
    }

    #[test]
    fn remap_moves_the_vl_and_keeps_the_packet_valid() {
        use ibtca_protocol::{Opcode, Packet};
        let mut p = Packet::new(Opcode::RcSendOnly);
        p.lrh.sl = 1;
        p.lrh.dlid = 2;
        p.lrh.slid = 1;
        p.payload = vec![7; 8];
        let mut bytes = p.build().unwrap();
        let cfg = VlConfig {
            sl2vl: parse_sl2vl("0,3,0,0,0,0,0,0,0,0,0,0,0,0,0,15").unwrap(),
            weights: vec![1, 1, 1, 1],
        };
        remap(&cfg, &mut bytes);
        let view = ibtca_protocol::PacketView::parse(&bytes).expect("VCRC and ICRC hold");
        assert_eq!((view.lrh.vl, view.lrh.sl, view.lrh.dlid), (3, 1, 2));
    }
}
