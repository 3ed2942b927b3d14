//! The QP state machine (IBA 10.3.1, the subset ibtca implements):
//! RESET → INIT → RTR → RTS, INIT → INIT and RTS → RTS to change access
//! rights, any state → ERR, any state → RESET, and for a UD QP SQE → RTS
//! (the device moves it to SQE when a send work request fails). Each transition says which
//! MODIFY_QP attributes it requires and which it allows; anything else,
//! and every other transition, is `EINVAL`. Datagram QPs (UD, SMI, GSI)
//! take a Q_Key instead of a path: a UD QP needs one at INIT (QP0's and
//! QP1's are fixed), and RTR → RTS needs the SQ PSN.

pub use ibtca_abi::qp::{QpState, QpType};

use super::abi::{
    QP_ATTR_ACCESS, QP_ATTR_ACK_POLICY, QP_ATTR_DEST_QPN, QP_ATTR_DEST_RD_ATOMIC, QP_ATTR_MSN,
    QP_ATTR_PATH, QP_ATTR_PKEY_INDEX, QP_ATTR_QKEY, QP_ATTR_RETRY, QP_ATTR_RQ_PSN, QP_ATTR_SQ_PSN,
    QP_ATTR_STATE,
};
use super::VerbsError;

use QpState as Q;

/// The driver-specific connection attributes of seed 002 (MSN start, ACK
/// policy), set with the others on the way to RTR or RTS.
const SEED_002: u32 = QP_ATTR_MSN | QP_ATTR_ACK_POLICY;

/// Legal transitions other than "any → RESET" and "any → ERR" (which take
/// no attributes): (from, to, required attributes, optional attributes).
const TRANSITIONS: &[(QpState, QpState, u32, u32)] = &[
    (Q::Reset, Q::Init, 0, QP_ATTR_ACCESS | QP_ATTR_PKEY_INDEX),
    (Q::Init, Q::Init, 0, QP_ATTR_ACCESS | QP_ATTR_PKEY_INDEX),
    (
        Q::Init,
        Q::Rtr,
        QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN,
        QP_ATTR_ACCESS | QP_ATTR_RETRY | QP_ATTR_PKEY_INDEX | QP_ATTR_DEST_RD_ATOMIC | SEED_002,
    ),
    (
        Q::Rtr,
        Q::Rts,
        QP_ATTR_SQ_PSN | QP_ATTR_RETRY,
        QP_ATTR_ACCESS | SEED_002,
    ),
    (Q::Rts, Q::Rts, 0, QP_ATTR_ACCESS),
];

/// The same for a UD QP.
const UD_TRANSITIONS: &[(QpState, QpState, u32, u32)] = &[
    (Q::Reset, Q::Init, QP_ATTR_QKEY, QP_ATTR_PKEY_INDEX),
    (Q::Init, Q::Init, 0, QP_ATTR_QKEY | QP_ATTR_PKEY_INDEX),
    (Q::Init, Q::Rtr, 0, QP_ATTR_QKEY | QP_ATTR_PKEY_INDEX),
    (Q::Rtr, Q::Rts, QP_ATTR_SQ_PSN, QP_ATTR_QKEY),
    (Q::Rts, Q::Rts, 0, QP_ATTR_QKEY),
    (Q::Sqe, Q::Rts, 0, QP_ATTR_QKEY),
];

/// The same for QP0 and QP1 (their Q_Key may be given, as the MAD layer
/// does, but is fixed).
const SPECIAL_TRANSITIONS: &[(QpState, QpState, u32, u32)] = &[
    (Q::Reset, Q::Init, 0, QP_ATTR_QKEY | QP_ATTR_PKEY_INDEX),
    (Q::Init, Q::Init, 0, QP_ATTR_QKEY | QP_ATTR_PKEY_INDEX),
    (Q::Init, Q::Rtr, 0, QP_ATTR_QKEY | QP_ATTR_PKEY_INDEX),
    (Q::Rtr, Q::Rts, QP_ATTR_SQ_PSN, QP_ATTR_QKEY),
    (Q::Rts, Q::Rts, 0, QP_ATTR_QKEY),
];

/// (required, optional) attributes of `from → to` for an RC QP, or `None`
/// if illegal.
pub fn transition(from: QpState, to: QpState) -> Option<(u32, u32)> {
    transition_of(QpType::Rc, from, to)
}

/// (required, optional) attributes of `from → to` for a QP of type `t`.
pub fn transition_of(t: QpType, from: QpState, to: QpState) -> Option<(u32, u32)> {
    if to == Q::Reset || to == Q::Err {
        return Some((0, 0));
    }
    let table = match t {
        QpType::Rc => TRANSITIONS,
        QpType::Ud => UD_TRANSITIONS,
        QpType::Smi | QpType::Gsi => SPECIAL_TRANSITIONS,
    };
    table
        .iter()
        .find(|(f, t, _, _)| *f == from && *t == to)
        .map(|&(_, _, req, opt)| (req, opt))
}

/// Checks a MODIFY_QP of a QP in `from` with `attr_mask` and IBTCA_QPS_*
/// `state` (used only with QP_ATTR_STATE; without it the QP stays where it
/// is) and returns the target state.
pub fn check_modify(
    t: QpType,
    from: QpState,
    attr_mask: u32,
    state: u8,
) -> Result<QpState, VerbsError> {
    let to = if attr_mask & QP_ATTR_STATE != 0 {
        QpState::from_abi(state).ok_or(VerbsError::Invalid)?
    } else {
        from
    };
    let (required, optional) = transition_of(t, from, to).ok_or(VerbsError::Invalid)?;
    let attrs = attr_mask & !QP_ATTR_STATE;
    if attrs & required != required || attrs & !(required | optional) != 0 {
        return Err(VerbsError::Invalid);
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::abi::{QPS_ERR, QPS_INIT, QPS_RTR, QPS_RTS};
    use QpState::{Err, Init, Reset, Rtr, Rts, Sqe};

    const ALL: [QpState; 5] = [Reset, Init, Rtr, Rts, Err];
    const S: u32 = QP_ATTR_STATE;

    /// The attributes the transition needs (none for illegal ones).
    fn req(from: QpState, to: QpState) -> u32 {
        match (from, to) {
            (Init, Rtr) => QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN,
            (Rtr, Rts) => QP_ATTR_SQ_PSN | QP_ATTR_RETRY,
            _ => 0,
        }
    }

    #[test]
    fn transition_table() {
        // Rows: from; columns: to (Reset, Init, Rtr, Rts, Err).
        let legal = [
            [true, true, false, false, true],
            [true, true, true, false, true],
            [true, false, false, true, true],
            [true, false, false, true, true],
            [true, false, false, false, true],
        ];
        for (i, from) in ALL.iter().enumerate() {
            for (j, to) in ALL.iter().enumerate() {
                let got = check_modify(QpType::Rc, *from, S | req(*from, *to), to.to_abi());
                assert_eq!(got.is_ok(), legal[i][j], "{from:?} -> {to:?}");
                if let Ok(t) = got {
                    assert_eq!(t, *to);
                }
            }
        }
    }

    #[test]
    fn missing_or_extra_attributes_are_invalid() {
        let e = Result::Err(VerbsError::Invalid);
        assert_eq!(
            check_modify(
                QpType::Rc,
                Init,
                S | QP_ATTR_PATH | QP_ATTR_DEST_QPN,
                QPS_RTR
            ),
            e
        );
        assert_eq!(
            check_modify(QpType::Rc, Init, S | QP_ATTR_PATH | QP_ATTR_RQ_PSN, QPS_RTR),
            e
        );
        assert_eq!(
            check_modify(QpType::Rc, Rtr, S | QP_ATTR_SQ_PSN, QPS_RTS),
            e
        );
        assert_eq!(check_modify(QpType::Rc, Rtr, S | QP_ATTR_RETRY, QPS_RTS), e);
        assert_eq!(
            check_modify(QpType::Rc, Reset, S | QP_ATTR_PATH, QPS_INIT),
            e,
            "not allowed at INIT"
        );
        assert_eq!(
            check_modify(QpType::Rc, Rts, S | QP_ATTR_ACCESS, QPS_ERR),
            e,
            "ERR takes nothing"
        );
        assert_eq!(
            check_modify(QpType::Rc, Rts, S | 1 << 20, QPS_RTS),
            e,
            "unknown bit"
        );
        assert_eq!(
            check_modify(QpType::Rc, Reset, S, 4),
            e,
            "SQD is not implemented"
        );
        assert_eq!(check_modify(QpType::Rc, Reset, S, 0xff), e);
        let rtr = S | req(Init, Rtr) | QP_ATTR_RETRY | QP_ATTR_ACCESS;
        assert_eq!(check_modify(QpType::Rc, Init, rtr, QPS_RTR), Ok(Rtr));
    }

    #[test]
    fn ud_qps_take_a_qkey_instead_of_a_path() {
        let ud = |from, mask, to| check_modify(QpType::Ud, from, mask, to);
        let e = Result::Err(VerbsError::Invalid);
        assert_eq!(ud(Reset, S, QPS_INIT), e, "a UD QP needs its Q_Key");
        assert_eq!(ud(Reset, S | QP_ATTR_QKEY, QPS_INIT), Ok(Init));
        assert_eq!(ud(Init, S, QPS_RTR), Ok(Rtr));
        assert_eq!(ud(Init, S | QP_ATTR_PATH, QPS_RTR), e, "no path");
        assert_eq!(ud(Rtr, S, QPS_RTS), e, "RTS needs the SQ PSN");
        assert_eq!(ud(Rtr, S | QP_ATTR_SQ_PSN, QPS_RTS), Ok(Rts));
        assert_eq!(ud(Rts, QP_ATTR_QKEY, 0), Ok(Rts));
        assert_eq!(
            check_modify(QpType::Rc, Reset, S | QP_ATTR_QKEY, QPS_INIT),
            e
        );
        assert_eq!(check_modify(QpType::Gsi, Reset, S, QPS_INIT), Ok(Init));
    }

    #[test]
    fn a_ud_qp_leaves_sqe_for_rts_and_only_the_device_enters_it() {
        use crate::verbs::abi::{QPS_RESET, QPS_SQE};
        let ud = |from, mask, to| check_modify(QpType::Ud, from, mask, to);
        let e = Result::Err(VerbsError::Invalid);
        assert_eq!(ud(Sqe, S, QPS_RTS), Ok(Rts), "IPoIB's recovery");
        assert_eq!(ud(Sqe, S | QP_ATTR_QKEY, QPS_RTS), Ok(Rts));
        assert_eq!(ud(Sqe, S | QP_ATTR_SQ_PSN, QPS_RTS), e);
        assert_eq!(ud(Sqe, S, QPS_ERR), Ok(Err));
        assert_eq!(ud(Sqe, S, QPS_RESET), Ok(Reset));
        assert_eq!(ud(Sqe, S, QPS_RTR), e);
        assert_eq!(ud(Rts, S, QPS_SQE), e, "the device's transition");
        assert_eq!(check_modify(QpType::Rc, Sqe, S, QPS_RTS), e);
    }

    #[test]
    fn without_state_the_qp_stays() {
        assert_eq!(check_modify(QpType::Rc, Rts, QP_ATTR_ACCESS, 0xff), Ok(Rts));
        assert_eq!(check_modify(QpType::Rc, Init, QP_ATTR_ACCESS, 0), Ok(Init));
        assert_eq!(
            check_modify(QpType::Rc, Rtr, QP_ATTR_ACCESS, 0),
            Result::Err(VerbsError::Invalid)
        );
        assert_eq!(check_modify(QpType::Rc, Err, 0, 0), Ok(Err));
    }
}
