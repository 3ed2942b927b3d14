//! The multicast table `verbs_commands` expects: a model of it that each
//! ATTACH_MCAST, DETACH_MCAST and successful DESTROY_QP updates as its
//! outcome says, so that an outcome is checked against the group it names
//! (and the number of groups), and the whole table against the model and
//! the table's invariants once after each step that could change it.
//!
//! Only those three commands change the table, and only DESTROY_QP takes
//! a QP away (a QP's type is fixed when it is made): the table and its
//! invariants are checked after every step that could break them, and
//! after a step that changed the number of live QPs.

use std::collections::BTreeMap;

use vm_memory::ByteValued;

use crate::verbs::abi::*;
use crate::verbs::multicast::{is_multicast_gid, is_multicast_lid, McastGroup};
use crate::verbs::qp::QpType;
use crate::verbs::Verbs;

/// The groups the outcomes so far leave: by MGID, the MLID the first
/// attach gave and the QPs in attach order.
#[derive(Default)]
pub(super) struct McastModel {
    groups: BTreeMap<[u8; 16], (u16, Vec<u32>)>,
}

impl McastModel {
    /// The number of groups.
    pub(super) fn len(&self) -> usize {
        self.groups.len()
    }

    /// ATTACH_MCAST or DETACH_MCAST of `params` ended with `status` as
    /// the model says it must: an attach leaves its QP in the group
    /// (a second attach changes nothing), a detach takes out an attached
    /// QP, a failure changes nothing, and ENOMEM only when the table or
    /// the group is full. Updates the model with the outcome.
    pub(super) fn outcome(&mut self, v: &Verbs, opcode: u8, params: &[u8; 48], status: u16) {
        let mut p = CmdMcast::default();
        p.as_mut_slice()
            .copy_from_slice(&params[..size_of::<CmdMcast>()]);
        let qpn = p.qpn.to_native();
        let before = self.groups.get(&p.mgid).map(|(_, qps)| qps);
        let was = before.is_some_and(|qps| qps.contains(&qpn));
        let now = v.mcast.members(&p.mgid);
        match (opcode, status) {
            (CMD_ATTACH_MCAST, CMD_ST_OK) => {
                assert!(
                    now.contains(&qpn),
                    "ATTACH_MCAST succeeded: QP {qpn} in the group"
                );
                match self.groups.get_mut(&p.mgid) {
                    Some((_, qps)) if !was => qps.push(qpn),
                    Some(_) => {}
                    None => {
                        assert!(
                            self.groups.len() < MAX_MCAST_GROUPS as usize,
                            "ATTACH_MCAST made group {} of at most {MAX_MCAST_GROUPS}",
                            self.groups.len() + 1
                        );
                        self.groups.insert(p.mgid, (p.mlid.to_native(), vec![qpn]));
                    }
                }
            }
            (CMD_DETACH_MCAST, CMD_ST_OK) => {
                assert!(
                    was && !now.contains(&qpn),
                    "DETACH_MCAST took out an attached QP {qpn}"
                );
                let (_, qps) = self
                    .groups
                    .get_mut(&p.mgid)
                    .expect("an attached QP's group");
                qps.retain(|&q| q != qpn);
                if qps.is_empty() {
                    self.groups.remove(&p.mgid);
                }
            }
            _ => {
                if opcode == CMD_ATTACH_MCAST && i32::from(status) == libc::ENOMEM {
                    let full = match before {
                        Some(qps) => qps.len() == MAX_MCAST_QPS as usize,
                        None => self.groups.len() == MAX_MCAST_GROUPS as usize,
                    };
                    assert!(full, "ENOMEM with room in the table and the group");
                }
            }
        }
        let expected = self.groups.get(&p.mgid).map_or(&[][..], |(_, qps)| qps);
        assert_eq!(
            now, expected,
            "{opcode:#x} (status {status}): the group's QPs"
        );
        assert_eq!(
            v.mcast.groups().len(),
            self.groups.len(),
            "{opcode:#x} (status {status}): the number of groups"
        );
    }

    /// DESTROY_QP of `qpn` succeeded: it is in no group of the table, and
    /// leaves every group of the model.
    pub(super) fn destroyed(&mut self, v: &Verbs, qpn: u32) {
        assert!(
            v.mcast.groups().iter().all(|g| !g.qps.contains(&qpn)),
            "destroyed QP {qpn} is still attached to a group"
        );
        self.groups.retain(|_, (_, qps)| {
            qps.retain(|&q| q != qpn);
            !qps.is_empty()
        });
    }

    /// The table holds at most `MAX_MCAST_GROUPS` groups, each a
    /// multicast MGID and MLID held once with 1 to `MAX_MCAST_QPS` QPs,
    /// each QP once and a live UD QP; and it is the model, group for
    /// group (a failure changed nothing, a success only its group).
    pub(super) fn check(&self, v: &Verbs) {
        let mut groups: Vec<&McastGroup> = v.mcast.groups().iter().collect();
        assert!(
            groups.len() <= MAX_MCAST_GROUPS as usize,
            "{} multicast groups",
            groups.len()
        );
        groups.sort_unstable_by_key(|g| g.mgid);
        for (i, g) in groups.iter().enumerate() {
            assert!(
                groups.get(i + 1).is_none_or(|h| h.mgid != g.mgid),
                "two groups of one MGID"
            );
            assert!(is_multicast_gid(&g.mgid) && is_multicast_lid(g.mlid));
            assert!(
                (1..=MAX_MCAST_QPS as usize).contains(&g.qps.len()),
                "{} QPs in a group",
                g.qps.len()
            );
            for (i, &qpn) in g.qps.iter().enumerate() {
                assert!(!g.qps[i + 1..].contains(&qpn), "QP {qpn} attached twice");
                assert!(
                    v.qps.get(qpn).is_some_and(|qp| qp.qp_type == QpType::Ud),
                    "QP {qpn} attached to a group is no live UD QP"
                );
            }
        }
        assert_eq!(groups.len(), self.groups.len(), "the number of groups");
        for (g, (mgid, (mlid, qps))) in groups.iter().zip(&self.groups) {
            assert!(
                (&g.mgid, g.mlid, &g.qps) == (mgid, *mlid, qps),
                "group {g:x?}, where the outcomes left {mgid:x?}: MLID {mlid:#x}, QPs {qps:?}"
            );
        }
    }
}
