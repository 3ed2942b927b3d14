//! The RC QP state machine (IBA 10.3.1, the subset ibtca implements):
//! RESET → INIT → RTR → RTS, INIT → INIT and RTS → RTS to change access
//! rights, any state → ERR, any state → RESET. Each transition says which
//! MODIFY_QP attributes it requires and which it allows; anything else,
//! and every other transition, is `EINVAL`.

use super::abi::{
    QPS_ERR, QPS_INIT, QPS_RESET, QPS_RTR, QPS_RTS, QP_ATTR_ACCESS, QP_ATTR_ACK_POLICY,
    QP_ATTR_DEST_QPN, QP_ATTR_DEST_RD_ATOMIC, QP_ATTR_MSN, QP_ATTR_PATH, QP_ATTR_PKEY_INDEX,
    QP_ATTR_RETRY, QP_ATTR_RQ_PSN, QP_ATTR_SQ_PSN, QP_ATTR_STATE,
};
use super::VerbsError;

/// A QP state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Just created or reset: no traffic, queues empty.
    Reset,
    /// Receives may be posted; nothing is processed.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Error: work requests are completed with a flush error.
    Err,
}

impl QpState {
    /// The state for an IBTCA_QPS_* value.
    pub fn from_abi(v: u8) -> Option<QpState> {
        Some(match v {
            QPS_RESET => QpState::Reset,
            QPS_INIT => QpState::Init,
            QPS_RTR => QpState::Rtr,
            QPS_RTS => QpState::Rts,
            QPS_ERR => QpState::Err,
            _ => return None,
        })
    }

    /// The IBTCA_QPS_* value.
    pub fn to_abi(self) -> u8 {
        match self {
            QpState::Reset => QPS_RESET,
            QpState::Init => QPS_INIT,
            QpState::Rtr => QPS_RTR,
            QpState::Rts => QPS_RTS,
            QpState::Err => QPS_ERR,
        }
    }
}

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

/// (required, optional) attributes of `from → to`, or `None` if illegal.
pub fn transition(from: QpState, to: QpState) -> Option<(u32, u32)> {
    if to == Q::Reset || to == Q::Err {
        return Some((0, 0));
    }
    TRANSITIONS
        .iter()
        .find(|(f, t, _, _)| *f == from && *t == to)
        .map(|&(_, _, req, opt)| (req, opt))
}

/// Checks a MODIFY_QP of a QP in `from` with `attr_mask` and IBTCA_QPS_*
/// `state` (used only with QP_ATTR_STATE; without it the QP stays where it
/// is) and returns the target state.
pub fn check_modify(from: QpState, attr_mask: u32, state: u8) -> Result<QpState, VerbsError> {
    let to = if attr_mask & QP_ATTR_STATE != 0 {
        QpState::from_abi(state).ok_or(VerbsError::Invalid)?
    } else {
        from
    };
    let (required, optional) = transition(from, to).ok_or(VerbsError::Invalid)?;
    let attrs = attr_mask & !QP_ATTR_STATE;
    if attrs & required != required || attrs & !(required | optional) != 0 {
        return Err(VerbsError::Invalid);
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use QpState::{Err, Init, Reset, Rtr, Rts};

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
                let got = check_modify(*from, S | req(*from, *to), to.to_abi());
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
            check_modify(Init, S | QP_ATTR_PATH | QP_ATTR_DEST_QPN, QPS_RTR),
            e
        );
        assert_eq!(
            check_modify(Init, S | QP_ATTR_PATH | QP_ATTR_RQ_PSN, QPS_RTR),
            e
        );
        assert_eq!(check_modify(Rtr, S | QP_ATTR_SQ_PSN, QPS_RTS), e);
        assert_eq!(check_modify(Rtr, S | QP_ATTR_RETRY, QPS_RTS), e);
        assert_eq!(
            check_modify(Reset, S | QP_ATTR_PATH, QPS_INIT),
            e,
            "not allowed at INIT"
        );
        assert_eq!(
            check_modify(Rts, S | QP_ATTR_ACCESS, QPS_ERR),
            e,
            "ERR takes nothing"
        );
        assert_eq!(check_modify(Rts, S | 1 << 20, QPS_RTS), e, "unknown bit");
        assert_eq!(check_modify(Reset, S, 4), e, "SQD is not implemented");
        assert_eq!(check_modify(Reset, S, 0xff), e);
        let rtr = S | req(Init, Rtr) | QP_ATTR_RETRY | QP_ATTR_ACCESS;
        assert_eq!(check_modify(Init, rtr, QPS_RTR), Ok(Rtr));
    }

    #[test]
    fn without_state_the_qp_stays() {
        assert_eq!(check_modify(Rts, QP_ATTR_ACCESS, 0xff), Ok(Rts));
        assert_eq!(check_modify(Init, QP_ATTR_ACCESS, 0), Ok(Init));
        assert_eq!(
            check_modify(Rtr, QP_ATTR_ACCESS, 0),
            Result::Err(VerbsError::Invalid)
        );
        assert_eq!(check_modify(Err, 0, 0), Ok(Err));
    }
}
