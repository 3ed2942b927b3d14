//! Allow-lists as data: a system call, optionally with conditions on its
//! arguments, and their compilation into a `seccompiler` BPF program whose
//! every other call traps (see `sigsys`).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// A test on one argument of a system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// Argument `.0` equals `.1`.
    Eq(u8, u64),
    /// Argument `.0` has none of the bits of `.1` set.
    Clear(u8, u64),
    /// Argument `.0` has every bit of `.1` set.
    Set(u8, u64),
}

/// One allowed system call: unconditionally (`when` empty), or when all
/// the conditions of any one of `when`'s entries hold.
#[derive(Debug, Clone, Copy)]
pub struct Allow {
    /// The system call number (`libc::SYS_*`).
    pub nr: i64,
    /// Alternatives, each a list of conditions that must all hold.
    pub when: &'static [&'static [Cond]],
}

/// `nr`, whatever its arguments.
pub const fn any(nr: i64) -> Allow {
    Allow { nr, when: &[] }
}

/// `nr` when one of `when`'s condition lists holds.
pub const fn when(nr: i64, when: &'static [&'static [Cond]]) -> Allow {
    Allow { nr, when }
}

/// The union of `groups`: a call allowed unconditionally by one group is
/// allowed unconditionally; conditional alternatives add up. `None` is
/// "whatever its arguments".
pub fn merge(groups: &[&[Allow]]) -> BTreeMap<i64, Option<Vec<&'static [Cond]>>> {
    let mut calls: BTreeMap<i64, Option<Vec<&'static [Cond]>>> = BTreeMap::new();
    for allow in groups.iter().flat_map(|g| g.iter()) {
        let entry = calls.entry(allow.nr).or_insert_with(|| Some(Vec::new()));
        match (entry.as_mut(), allow.when.is_empty()) {
            (_, true) => *entry = None,
            (Some(alternatives), false) => alternatives.extend_from_slice(allow.when),
            (None, false) => {}
        }
    }
    calls
}

fn condition(c: Cond) -> Result<SeccompCondition, seccompiler::BackendError> {
    let (arg, op, value) = match c {
        Cond::Eq(arg, v) => (arg, SeccompCmpOp::Eq, v),
        Cond::Clear(arg, mask) => (arg, SeccompCmpOp::MaskedEq(mask), 0),
        Cond::Set(arg, mask) => (arg, SeccompCmpOp::MaskedEq(mask), mask),
    };
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
}

/// Compiles the union of `groups` for this machine: allowed calls pass,
/// every other call traps.
pub fn compile(groups: &[&[Allow]]) -> Result<BpfProgram, seccompiler::Error> {
    let mut rules = BTreeMap::new();
    for (nr, alternatives) in merge(groups) {
        let chain = match alternatives {
            None => Vec::new(),
            Some(alternatives) => alternatives
                .into_iter()
                .map(|conds| {
                    SeccompRule::new(
                        conds
                            .iter()
                            .map(|&c| condition(c))
                            .collect::<Result<_, _>>()?,
                    )
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        rules.insert(nr, chain);
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let filter = SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, arch)?;
    Ok(filter.try_into()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &[Allow] = &[any(1), when(2, &[&[Cond::Eq(0, 7)]])];
    const B: &[Allow] = &[
        when(1, &[&[Cond::Eq(0, 3)]]),
        when(2, &[&[Cond::Clear(2, 4)]]),
    ];

    #[test]
    fn unconditional_wins_and_alternatives_add_up() {
        let m = merge(&[A, B]);
        assert_eq!(m[&1], None);
        assert_eq!(
            m[&2],
            Some(vec![&[Cond::Eq(0, 7)][..], &[Cond::Clear(2, 4)][..]])
        );
    }

    #[test]
    fn groups_compile() {
        let program = compile(&[A, B]).unwrap();
        assert!(!program.is_empty());
    }
}
