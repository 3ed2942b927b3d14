//! QUERY_QP: a QP's state and attributes as the device has them. The
//! state is the device's own: an error completion, a responder error or a
//! bad doorbell moves a QP to ERR without a MODIFY_QP, and only this
//! command tells the driver so. The PSNs here are what MODIFY_QP set; the
//! engine puts the transport's running ones over them (`engine/`).

use super::abi::{QpAttr, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};
use super::qp::{Qp, MAX_RD_ATOMIC};
use super::{Verbs, VerbsError};

/// The remote rights an RC QP's `access` may hold.
const REMOTE_RIGHTS: u32 = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

impl Qp {
    /// QUERY_QP's reply for this QP.
    pub fn query(&self) -> QpAttr {
        let a = self.attrs();
        let datagram = self.qp_type.is_datagram();
        QpAttr {
            state: self.state().to_abi(),
            qp_type: self.qp_type.to_abi(),
            path_mtu: a.path_mtu,
            sl: a.sl,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            min_rnr_timer: a.min_rnr_timer,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic.unwrap_or(MAX_RD_ATOMIC),
            pkey_index: a.pkey_index.into(),
            dlid: a.dlid.into(),
            dest_qpn: a.dest_qpn.into(),
            sq_psn: a.sq_psn.into(),
            rq_psn: a.rq_psn.into(),
            access: if datagram {
                0
            } else {
                a.access & REMOTE_RIGHTS
            }
            .into(),
            qkey: if datagram { a.qkey } else { 0 }.into(),
            ..Default::default()
        }
    }
}

impl Verbs {
    /// QUERY_QP: `(state, 0)` and the reply; `NotFound` for a number that
    /// names no live QP.
    pub fn query_qp(&self, qpn: u32) -> Result<((u32, u32), QpAttr), VerbsError> {
        let qp = self.qps.get(qpn).ok_or(VerbsError::NotFound)?;
        let attr = qp.query();
        Ok(((u32::from(attr.state), 0), attr))
    }
}
