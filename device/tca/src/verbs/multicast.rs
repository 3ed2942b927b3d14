//! The device's multicast groups: which UD QPs are attached to which group
//! (ATTACH_MCAST, DETACH_MCAST). A group is named by its MGID, as the HCA
//! matches a datagram's GRH DGID (IBA 10.5.2.1); its MLID is kept as the
//! first attach gave it. Both dimensions are bounded
//! ([`MAX_MCAST_GROUPS`], [`MAX_MCAST_QPS`]): a guest attaching without
//! end gets ENOMEM, never more device memory.

pub use ibtca_protocol::headers::is_multicast_lid;

use super::abi::{CmdMcast, MAX_MCAST_GROUPS, MAX_MCAST_QPS};
use super::qp::QpType;
use super::{Verbs, VerbsError};

/// The destination QP of every multicast datagram (IBA 10.5.2.3).
pub const MULTICAST_QPN: u32 = 0xff_ffff;

/// True for a multicast GID (IBA 4.1.1: the first byte is 0xFF).
pub fn is_multicast_gid(gid: &[u8; 16]) -> bool {
    gid[0] == 0xff
}

/// One multicast group and the QPs attached to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastGroup {
    /// The group's GID.
    pub mgid: [u8; 16],
    /// Its LID, as the first attach gave it.
    pub mlid: u16,
    /// Attached QPs, in attach order, each once.
    pub qps: Vec<u32>,
}

/// Every multicast group of one device.
#[derive(Debug, Default)]
pub struct McastTable {
    groups: Vec<McastGroup>,
}

impl McastTable {
    /// The groups, for inspection.
    pub fn groups(&self) -> &[McastGroup] {
        &self.groups
    }

    /// True if no QP is attached anywhere.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The QPs attached to the group `mgid` (empty if there is none).
    pub fn members(&self, mgid: &[u8; 16]) -> &[u32] {
        self.groups
            .iter()
            .find(|g| &g.mgid == mgid)
            .map_or(&[], |g| &g.qps)
    }

    /// Attaches `qpn` to `mgid` (a second attach of the same QP is a
    /// no-op): ENOMEM when the table or the group is full.
    pub fn attach(&mut self, mgid: [u8; 16], mlid: u16, qpn: u32) -> Result<(), VerbsError> {
        let group = match self.groups.iter().position(|g| g.mgid == mgid) {
            Some(i) => &mut self.groups[i],
            None if self.groups.len() >= MAX_MCAST_GROUPS as usize => {
                return Err(VerbsError::NoMemory)
            }
            None => {
                self.groups.push(McastGroup {
                    mgid,
                    mlid,
                    qps: Vec::new(),
                });
                self.groups.last_mut().expect("just pushed")
            }
        };
        if group.qps.contains(&qpn) {
            return Ok(());
        }
        if group.qps.len() >= MAX_MCAST_QPS as usize {
            return Err(VerbsError::NoMemory);
        }
        group.qps.push(qpn);
        Ok(())
    }

    /// Detaches `qpn` from `mgid`; EINVAL if it is not attached. A group
    /// goes with its last QP.
    pub fn detach(&mut self, mgid: &[u8; 16], qpn: u32) -> Result<(), VerbsError> {
        let i = self
            .groups
            .iter()
            .position(|g| &g.mgid == mgid && g.qps.contains(&qpn))
            .ok_or(VerbsError::Invalid)?;
        self.groups[i].qps.retain(|&q| q != qpn);
        if self.groups[i].qps.is_empty() {
            self.groups.swap_remove(i);
        }
        Ok(())
    }

    /// Detaches `qpn` from every group (its QP is destroyed).
    pub fn detach_qp(&mut self, qpn: u32) {
        for g in &mut self.groups {
            g.qps.retain(|&q| q != qpn);
        }
        self.groups.retain(|g| !g.qps.is_empty());
    }
}

/// The checked QP number, MGID and MLID of ATTACH_MCAST or DETACH_MCAST.
fn checked(p: &CmdMcast) -> Result<(u32, [u8; 16], u16), VerbsError> {
    let mlid = p.mlid.to_native();
    if p.rsvd0 != [0; 2] || p.rsvd != [0; 24] || !is_multicast_gid(&p.mgid) {
        return Err(VerbsError::Invalid);
    }
    if !is_multicast_lid(mlid) {
        return Err(VerbsError::Invalid);
    }
    Ok((p.qpn.to_native(), p.mgid, mlid))
}

impl Verbs {
    /// ATTACH_MCAST: a live UD QP joins group `p.mgid`.
    pub fn attach_mcast(&mut self, p: &CmdMcast) -> Result<(), VerbsError> {
        let (qpn, mgid, mlid) = checked(p)?;
        if self.qps.get(qpn).ok_or(VerbsError::NotFound)?.qp_type != QpType::Ud {
            return Err(VerbsError::Invalid);
        }
        self.mcast.attach(mgid, mlid, qpn)
    }

    /// DETACH_MCAST: QP `p.qpn` leaves group `p.mgid`.
    pub fn detach_mcast(&mut self, p: &CmdMcast) -> Result<(), VerbsError> {
        let (qpn, mgid, _) = checked(p)?;
        self.mcast.detach(&mgid, qpn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mgid(n: u32) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[0] = 0xff;
        g[1] = 0x12;
        g[12..].copy_from_slice(&n.to_be_bytes());
        g
    }

    #[test]
    fn attach_is_idempotent_and_detach_drops_empty_groups() {
        let mut t = McastTable::default();
        t.attach(mgid(1), 0xc000, 5).unwrap();
        t.attach(mgid(1), 0xc000, 5).unwrap();
        t.attach(mgid(1), 0xc000, 6).unwrap();
        assert_eq!(t.members(&mgid(1)), [5, 6]);
        assert_eq!(t.detach(&mgid(1), 7), Err(VerbsError::Invalid));
        assert_eq!(t.detach(&mgid(2), 5), Err(VerbsError::Invalid));
        t.detach(&mgid(1), 5).unwrap();
        assert_eq!(t.members(&mgid(1)), [6]);
        t.detach(&mgid(1), 6).unwrap();
        assert!(t.is_empty());
    }

    #[test]
    fn the_group_cap_and_the_per_group_qp_cap_are_enomem() {
        let mut t = McastTable::default();
        for n in 0..MAX_MCAST_GROUPS {
            t.attach(mgid(n), 0xc000, 1).unwrap();
        }
        let full = t.attach(mgid(MAX_MCAST_GROUPS), 0xc000, 1);
        assert_eq!(full.unwrap_err().errno(), 12, "ENOMEM");
        // An existing group still takes QPs, up to its own cap.
        for q in 2..=MAX_MCAST_QPS {
            t.attach(mgid(0), 0xc000, q).unwrap();
        }
        assert_eq!(t.members(&mgid(0)).len(), MAX_MCAST_QPS as usize);
        assert_eq!(t.attach(mgid(0), 0xc000, 1000), Err(VerbsError::NoMemory));
        // A QP's destruction frees its place everywhere.
        t.detach_qp(1);
        assert_eq!(t.groups().len(), 1, "only group 0 has other QPs");
        t.attach(mgid(0), 0xc000, 1000).unwrap();
    }

    #[test]
    fn lids_and_gids_outside_the_multicast_ranges_are_einval() {
        let mut p = CmdMcast {
            qpn: 1.into(),
            mlid: 0xbfff.into(),
            mgid: mgid(1),
            ..Default::default()
        };
        assert_eq!(checked(&p), Err(VerbsError::Invalid));
        p.mlid = 0xffff.into();
        assert_eq!(checked(&p), Err(VerbsError::Invalid));
        p.mlid = 0xfffe.into();
        assert_eq!(checked(&p), Ok((1, mgid(1), 0xfffe)));
        p.mgid[0] = 0xfe;
        assert_eq!(checked(&p), Err(VerbsError::Invalid));
    }
}
