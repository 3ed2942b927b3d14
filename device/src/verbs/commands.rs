//! The command table: what each IBTCA_CMD_* opcode does, as data. A handler
//! gets the 48 parameter bytes of the entry (untrusted, decoded into the
//! opcode's `struct ibtca_cmd_*`) and returns `(out0, out1)` or the error
//! whose errno becomes the status.

use vm_memory::ByteValued;

use super::abi::{
    CmdCreateCq, CmdCreateQp, CmdHandle, CmdModifyQp, CmdRegMr, CMD_ALLOC_MW, CMD_CREATE_CQ,
    CMD_CREATE_PD, CMD_CREATE_QP, CMD_DEALLOC_MW, CMD_DEREG_MR, CMD_DESTROY_CQ, CMD_DESTROY_PD,
    CMD_DESTROY_QP, CMD_MODIFY_QP, CMD_QUERY_PORT, CMD_REG_MR,
};
use super::{Verbs, VerbsError};

/// Raw command parameters.
pub type Params = [u8; 48];

/// A command handler.
pub type Handler = fn(&mut Verbs, &Params) -> Result<(u32, u32), VerbsError>;

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

fn handle(raw: &Params) -> u32 {
    params::<CmdHandle>(raw).handle.to_native()
}

/// Every command the device implements.
pub const COMMANDS: &[CommandDef] = &[
    CommandDef {
        opcode: CMD_QUERY_PORT,
        name: "QUERY_PORT",
        run: |v, _| Ok(v.query_port()),
    },
    CommandDef {
        opcode: CMD_CREATE_PD,
        name: "CREATE_PD",
        run: |v, _| Ok((v.create_pd()?, 0)),
    },
    CommandDef {
        opcode: CMD_DESTROY_PD,
        name: "DESTROY_PD",
        run: |v, p| v.destroy_pd(handle(p)).map(|()| (0, 0)),
    },
    CommandDef {
        opcode: CMD_REG_MR,
        name: "REG_MR",
        run: |v, p| {
            let m: CmdRegMr = params(p);
            v.reg_mr(
                m.pdn.to_native(),
                m.access.to_native(),
                m.iova.to_native(),
                m.length.to_native(),
                m.gpa.to_native(),
            )
        },
    },
    CommandDef {
        opcode: CMD_DEREG_MR,
        name: "DEREG_MR",
        run: |v, p| v.dereg_mr(handle(p)).map(|()| (0, 0)),
    },
    CommandDef {
        opcode: CMD_ALLOC_MW,
        name: "ALLOC_MW",
        run: |v, p| Ok((v.alloc_mw(handle(p))?, 0)),
    },
    CommandDef {
        opcode: CMD_DEALLOC_MW,
        name: "DEALLOC_MW",
        run: |v, p| v.dealloc_mw(handle(p)).map(|()| (0, 0)),
    },
    CommandDef {
        opcode: CMD_CREATE_CQ,
        name: "CREATE_CQ",
        run: |v, p| {
            let c: CmdCreateCq = params(p);
            Ok((v.create_cq(c.ring.to_native(), c.log_entries, c.vector)?, 0))
        },
    },
    CommandDef {
        opcode: CMD_DESTROY_CQ,
        name: "DESTROY_CQ",
        run: |v, p| v.destroy_cq(handle(p)).map(|()| (0, 0)),
    },
    CommandDef {
        opcode: CMD_CREATE_QP,
        name: "CREATE_QP",
        run: |v, p| Ok((v.create_qp(&params::<CmdCreateQp>(p))?, 0)),
    },
    CommandDef {
        opcode: CMD_MODIFY_QP,
        name: "MODIFY_QP",
        run: |v, p| v.modify_qp(&params::<CmdModifyQp>(p)).map(|()| (0, 0)),
    },
    CommandDef {
        opcode: CMD_DESTROY_QP,
        name: "DESTROY_QP",
        run: |v, p| v.destroy_qp(handle(p)).map(|()| (0, 0)),
    },
];

/// The command with `opcode`.
pub fn lookup(opcode: u8) -> Option<&'static CommandDef> {
    COMMANDS.iter().find(|c| c.opcode == opcode)
}

/// Runs one command: `(status, out0, out1)`; out-parameters are 0 on
/// failure.
pub fn execute(verbs: &mut Verbs, opcode: u8, raw: &Params) -> (u16, u32, u32) {
    let res = lookup(opcode)
        .ok_or(VerbsError::NotSupported)
        .and_then(|c| {
            (c.run)(verbs, raw)
                .inspect_err(|e| tracing::debug!(cmd = c.name, error = %e, "command failed"))
        });
    match res {
        Ok((a, b)) => (super::abi::CMD_ST_OK, a, b),
        Err(e) => (e.errno(), 0, 0),
    }
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
        for op in 0..=255u8 {
            if lookup(op).is_none() {
                assert_eq!(execute(&mut v, op, &[0xff; 48]), (95, 0, 0));
            }
        }
    }
}
