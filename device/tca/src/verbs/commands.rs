//! The command table: what each IBTCA_CMD_* opcode does, as data. A handler
//! gets the 48 parameter bytes of the entry (untrusted, decoded into the
//! opcode's `struct ibtca_cmd_*`) and returns a [`Reply`] (`out0`, `out1`
//! and, for queries, a 48-byte structure written over the parameters) or
//! the error whose errno becomes the status.

use vm_memory::ByteValued;

use super::abi::{
    CmdAllocMr, CmdCreateCq, CmdCreateQp, CmdCreateSrq, CmdHandle, CmdModifyQp, CmdModifySrq,
    CmdRegMr, CmdResizeSrq, CMD_ALLOC_MR, CMD_ALLOC_MW, CMD_ALLOC_MW_TYPE1, CMD_CREATE_CQ,
    CMD_CREATE_PD, CMD_CREATE_QP, CMD_CREATE_SRQ, CMD_DEALLOC_MW, CMD_DEREG_MR, CMD_DESTROY_CQ,
    CMD_DESTROY_PD, CMD_DESTROY_QP, CMD_DESTROY_SRQ, CMD_MODIFY_QP, CMD_MODIFY_SRQ,
    CMD_QUERY_DEVICE, CMD_QUERY_PORT, CMD_QUERY_QP, CMD_QUERY_SRQ, CMD_REG_MR, CMD_RESIZE_SRQ,
    DEVICE_ATTR_EXT,
};
use super::abi::{CmdDbRecord, CMD_CQ_DB_RECORD, CMD_QP_DB_RECORD};
use super::abi::{CmdMcast, CMD_ATTACH_MCAST, CMD_DETACH_MCAST};
use super::abi::{CmdModifyCq, CMD_MODIFY_CQ};
use super::{Verbs, VerbsError};
use crate::dma::GuestMemory;

/// Raw command parameters.
pub type Params = [u8; 48];

/// What a command that succeeded returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reply {
    /// `out0`.
    pub out0: u32,
    /// `out1`.
    pub out1: u32,
    /// A structure the device writes over the entry's parameters (queries).
    pub data: Option<Params>,
}

impl From<(u32, u32)> for Reply {
    fn from((out0, out1): (u32, u32)) -> Self {
        Reply {
            out0,
            out1,
            data: None,
        }
    }
}

impl Reply {
    /// `out0` and `out1` with `data` over the parameters.
    fn with<T: ByteValued>(out: (u32, u32), data: &T) -> Self {
        let mut p = [0u8; 48];
        let s = data.as_slice();
        p[..s.len()].copy_from_slice(s);
        Reply {
            data: Some(p),
            ..out.into()
        }
    }
}

/// A command handler.
pub type Handler = fn(&mut Verbs, &GuestMemory, &Params) -> Result<Reply, VerbsError>;

/// One command.
pub struct CommandDef {
    /// IBTCA_CMD_* opcode.
    pub opcode: u8,
    /// Name for logs.
    pub name: &'static str,
    /// What it does.
    pub run: Handler,
}

/// Decodes the parameter bytes as `T`.
fn params<T: ByteValued + Default>(raw: &Params) -> T {
    let mut t = T::default();
    let dst = t.as_mut_slice();
    let n = dst.len().min(raw.len());
    dst[..n].copy_from_slice(&raw[..n]);
    t
}

/// The handle and record address of QP_DB_RECORD or CQ_DB_RECORD.
fn db_record(raw: &Params) -> Result<(u32, u64), VerbsError> {
    let r: CmdDbRecord = params(raw);
    if r.rsvd.to_native() != 0 || r.rsvd2 != [0; 32] {
        return Err(VerbsError::Invalid);
    }
    Ok((r.handle.to_native(), r.addr.to_native()))
}

fn handle(raw: &Params) -> u32 {
    params::<CmdHandle>(raw).handle.to_native()
}

/// The handle of a query naming one object: the reserved bytes must be
/// zero (`Invalid`).
fn checked_handle(raw: &Params) -> Result<u32, VerbsError> {
    let h: CmdHandle = params(raw);
    if h.rsvd != [0; 44] {
        return Err(VerbsError::Invalid);
    }
    Ok(h.handle.to_native())
}

/// A query takes no parameters: any non-zero byte is `Invalid` (so the
/// bytes can carry selectors later without old devices misreading them).
fn no_params(raw: &Params) -> Result<(), VerbsError> {
    if raw.iter().all(|&b| b == 0) {
        Ok(())
    } else {
        Err(VerbsError::Invalid)
    }
}

fn done(r: Result<(), VerbsError>) -> Result<Reply, VerbsError> {
    r.map(|()| Reply::default())
}

/// Every command the device implements.
pub const COMMANDS: &[CommandDef] = &[
    CommandDef {
        opcode: CMD_QUERY_PORT,
        name: "QUERY_PORT",
        run: |v, _, p| {
            no_params(p)?;
            Ok(Reply::with(v.query_port(), &v.port_attr()))
        },
    },
    CommandDef {
        opcode: CMD_QUERY_DEVICE,
        name: "QUERY_DEVICE",
        run: |v, _, p| match p.split_first() {
            Some((&DEVICE_ATTR_EXT, rest)) if rest.iter().all(|&b| b == 0) => {
                Ok(Reply::with((0, 0), &v.device_attr_ext()))
            }
            _ => {
                no_params(p)?;
                Ok(Reply::with((0, 0), &v.device_attr()))
            }
        },
    },
    CommandDef {
        opcode: CMD_CREATE_PD,
        name: "CREATE_PD",
        run: |v, _, _| Ok((v.create_pd()?, 0).into()),
    },
    CommandDef {
        opcode: CMD_DESTROY_PD,
        name: "DESTROY_PD",
        run: |v, _, p| done(v.destroy_pd(handle(p))),
    },
    CommandDef {
        opcode: CMD_REG_MR,
        name: "REG_MR",
        run: |v, mem, p| {
            let m: CmdRegMr = params(p);
            let (pdn, access, iova, length, gpa) = (
                m.pdn.to_native(),
                m.access.to_native(),
                m.iova.to_native(),
                m.length.to_native(),
                m.gpa.to_native(),
            );
            if m.rsvd != [0; 8] {
                return Err(VerbsError::Invalid);
            }
            match m.npages.to_native() {
                0 if m.first_offset.to_native() != 0 => Err(VerbsError::Invalid),
                0 => v.reg_mr(pdn, access, iova, length, gpa),
                n => v.reg_mr_pages(
                    mem,
                    pdn,
                    access,
                    iova,
                    length,
                    gpa,
                    n,
                    m.first_offset.to_native(),
                ),
            }
            .map(Reply::from)
        },
    },
    CommandDef {
        opcode: CMD_DEREG_MR,
        name: "DEREG_MR",
        run: |v, _, p| done(v.dereg_mr(handle(p))),
    },
    CommandDef {
        opcode: CMD_ALLOC_MW,
        name: "ALLOC_MW",
        run: |v, _, p| Ok((v.alloc_mw(handle(p), false)?, 0).into()),
    },
    CommandDef {
        opcode: CMD_ALLOC_MW_TYPE1,
        name: "ALLOC_MW_TYPE1",
        run: |v, _, p| Ok((v.alloc_mw(handle(p), true)?, 0).into()),
    },
    CommandDef {
        opcode: CMD_DEALLOC_MW,
        name: "DEALLOC_MW",
        run: |v, _, p| done(v.dealloc_mw(handle(p))),
    },
    CommandDef {
        opcode: CMD_ALLOC_MR,
        name: "ALLOC_MR",
        run: |v, _, p| {
            let a: CmdAllocMr = params(p);
            let key = v.alloc_mr(a.pdn.to_native(), a.max_pages.to_native())?;
            Ok((key, key).into())
        },
    },
    CommandDef {
        opcode: CMD_CREATE_CQ,
        name: "CREATE_CQ",
        run: |v, _, p| {
            let c: CmdCreateCq = params(p);
            if c.rsvd0 != [0; 2] || c.rsvd != [0; 32] {
                return Err(VerbsError::Invalid);
            }
            let (ring, db_page) = (c.ring.to_native(), c.db_page.to_native());
            Ok((v.create_cq(ring, c.log_entries, c.vector, db_page)?, 0).into())
        },
    },
    CommandDef {
        opcode: CMD_DESTROY_CQ,
        name: "DESTROY_CQ",
        run: |v, _, p| done(v.destroy_cq(handle(p))),
    },
    CommandDef {
        opcode: CMD_MODIFY_CQ,
        name: "MODIFY_CQ",
        run: |v, _, p| done(v.modify_cq(&params::<CmdModifyCq>(p))),
    },
    CommandDef {
        opcode: CMD_CREATE_QP,
        name: "CREATE_QP",
        run: |v, _, p| Ok((v.create_qp(&params::<CmdCreateQp>(p))?, 0).into()),
    },
    CommandDef {
        opcode: CMD_MODIFY_QP,
        name: "MODIFY_QP",
        run: |v, _, p| done(v.modify_qp(&params::<CmdModifyQp>(p))),
    },
    CommandDef {
        opcode: CMD_QUERY_QP,
        name: "QUERY_QP",
        run: |v, _, p| {
            let (out, attr) = v.query_qp(checked_handle(p)?)?;
            Ok(Reply::with(out, &attr))
        },
    },
    CommandDef {
        opcode: CMD_DESTROY_QP,
        name: "DESTROY_QP",
        run: |v, _, p| done(v.destroy_qp(handle(p))),
    },
    CommandDef {
        opcode: CMD_ATTACH_MCAST,
        name: "ATTACH_MCAST",
        run: |v, _, p| done(v.attach_mcast(&params::<CmdMcast>(p))),
    },
    CommandDef {
        opcode: CMD_DETACH_MCAST,
        name: "DETACH_MCAST",
        run: |v, _, p| done(v.detach_mcast(&params::<CmdMcast>(p))),
    },
    CommandDef {
        opcode: CMD_CREATE_SRQ,
        name: "CREATE_SRQ",
        run: |v, _, p| Ok((v.create_srq(&params::<CmdCreateSrq>(p))?, 0).into()),
    },
    CommandDef {
        opcode: CMD_MODIFY_SRQ,
        name: "MODIFY_SRQ",
        run: |v, _, p| done(v.modify_srq(&params::<CmdModifySrq>(p))),
    },
    CommandDef {
        opcode: CMD_RESIZE_SRQ,
        name: "RESIZE_SRQ",
        run: |v, mem, p| done(v.resize_srq(&params::<CmdResizeSrq>(p), mem)),
    },
    CommandDef {
        opcode: CMD_QUERY_SRQ,
        name: "QUERY_SRQ",
        run: |v, _, p| {
            let (out, attr) = v.query_srq(checked_handle(p)?)?;
            Ok(Reply::with(out, &attr))
        },
    },
    CommandDef {
        opcode: CMD_DESTROY_SRQ,
        name: "DESTROY_SRQ",
        run: |v, _, p| done(v.destroy_srq(handle(p))),
    },
    CommandDef {
        opcode: CMD_QP_DB_RECORD,
        name: "QP_DB_RECORD",
        run: |v, mem, p| {
            let (qpn, addr) = db_record(p)?;
            done(v.bind_db_record(qpn, addr, mem))
        },
    },
    CommandDef {
        opcode: CMD_CQ_DB_RECORD,
        name: "CQ_DB_RECORD",
        run: |v, mem, p| {
            let (cqn, addr) = db_record(p)?;
            done(v.bind_cq_db_record(cqn, addr, mem))
        },
    },
];

/// Commands the engine runs itself because they need more than the verbs
/// objects (SMA_MAD: the port's subnet management agent).
pub trait EngineCommands {
    /// Runs command `opcode` if it is one of the engine's (`None`
    /// otherwise: the command table runs it).
    fn run(
        &mut self,
        mem: &GuestMemory,
        opcode: u8,
        raw: &Params,
    ) -> Option<Result<Reply, VerbsError>>;

    /// Adds what the engine knows to the reply of a command the table ran
    /// (QUERY_QP: the transport's running PSNs). Nothing by default.
    fn amend(&mut self, _opcode: u8, _raw: &Params, _reply: &mut Reply) {}
}

/// No engine: every command goes to the table (tests, fuzzing).
pub struct NoEngineCommands;

impl EngineCommands for NoEngineCommands {
    fn run(&mut self, _: &GuestMemory, _: u8, _: &Params) -> Option<Result<Reply, VerbsError>> {
        None
    }
}

/// Decodes command parameters as `T` (for the engine's commands).
pub fn decode<T: ByteValued + Default>(raw: &Params) -> T {
    params(raw)
}

/// A command's status and, on success, its reply.
pub fn status_of(res: Result<Reply, VerbsError>) -> (u16, Option<Reply>) {
    match res {
        Ok(r) => (super::abi::CMD_ST_OK, Some(r)),
        Err(e) => (e.errno(), None),
    }
}

/// The command with `opcode`.
pub fn lookup(opcode: u8) -> Option<&'static CommandDef> {
    COMMANDS.iter().find(|c| c.opcode == opcode)
}

/// Runs one command: its status and, on success, its reply (`None` on
/// failure: the out-parameters are then 0 and the parameters stay).
pub fn execute(
    verbs: &mut Verbs,
    mem: &GuestMemory,
    opcode: u8,
    raw: &Params,
) -> (u16, Option<Reply>) {
    let res = lookup(opcode)
        .ok_or(VerbsError::NotSupported)
        .and_then(|c| {
            (c.run)(verbs, mem, raw)
                .inspect_err(|e| tracing::debug!(cmd = c.name, error = %e, "command failed"))
        });
    status_of(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_are_unique() {
        for (i, a) in COMMANDS.iter().enumerate() {
            for b in &COMMANDS[i + 1..] {
                assert_ne!(a.opcode, b.opcode, "{} and {}", a.name, b.name);
            }
        }
    }

    #[test]
    fn every_other_opcode_is_not_supported() {
        let mut v = Verbs::new(super::super::Limits::default(), Default::default(), 1);
        let m = super::super::testmem::TestMem::new(4096);
        for op in 0..=255u8 {
            if lookup(op).is_none() {
                assert_eq!(execute(&mut v, &m.mem, op, &[0xff; 48]), (95, None));
            }
        }
    }
}
