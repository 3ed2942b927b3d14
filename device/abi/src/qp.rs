//! The QP's type and state as the ABI names them (IBTCA_QPT_*, IBTCA_QPS_*).
//! The state machine over them is the device's (`verbs/qp_state.rs`).

use crate::verbs::{
    QPS_ERR, QPS_INIT, QPS_RESET, QPS_RTR, QPS_RTS, QPS_SQE, QPT_GSI, QPT_RC, QPT_SMI, QPT_UD,
};

/// What kind of QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable datagram.
    Ud,
    /// The port's QP0.
    Smi,
    /// The port's QP1.
    Gsi,
}

impl QpType {
    /// The type for an IBTCA_QPT_* value.
    pub fn from_abi(v: u8) -> Option<QpType> {
        Some(match v {
            QPT_RC => QpType::Rc,
            QPT_UD => QpType::Ud,
            QPT_SMI => QpType::Smi,
            QPT_GSI => QpType::Gsi,
            _ => return None,
        })
    }

    /// The IBTCA_QPT_* value.
    pub fn to_abi(self) -> u8 {
        match self {
            QpType::Rc => QPT_RC,
            QpType::Ud => QPT_UD,
            QpType::Smi => QPT_SMI,
            QpType::Gsi => QPT_GSI,
        }
    }

    /// Whether the QP sends and receives datagrams (UD, SMI, GSI).
    pub fn is_datagram(self) -> bool {
        self != QpType::Rc
    }
}

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
    /// Send queue error (a UD QP whose send work request failed, IBA
    /// 10.3.1): later send work requests complete with a flush error,
    /// receives go on; MODIFY_QP to RTS resumes sending.
    Sqe,
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
            QPS_SQE => QpState::Sqe,
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
            QpState::Sqe => QPS_SQE,
            QpState::Err => QPS_ERR,
        }
    }

    /// Whether inbound messages reach the QP's receive queue (RTR, RTS,
    /// SQE: a send queue error leaves receiving alone).
    pub fn receives(self) -> bool {
        matches!(self, QpState::Rtr | QpState::Rts | QpState::Sqe)
    }

    /// Whether the device takes the QP's send WQEs: to send them (RTS) or
    /// to flush them (SQE, ERR).
    pub fn takes_sends(self) -> bool {
        matches!(self, QpState::Rts | QpState::Sqe | QpState::Err)
    }
}
