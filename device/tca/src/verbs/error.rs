//! The error of a verbs command, and the errno the command queue reports for
//! it in `CmdEntry::status`.

/// Why a verbs command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VerbsError {
    /// Unknown command opcode (EOPNOTSUPP).
    #[error("command not supported")]
    NotSupported,
    /// A parameter is out of range or inconsistent (EINVAL).
    #[error("invalid parameter")]
    Invalid,
    /// A handle names no live object (ENOENT).
    #[error("no such object")]
    NotFound,
    /// The object is still in use (EBUSY).
    #[error("object in use")]
    Busy,
    /// The table is full (ENOMEM).
    #[error("out of resources")]
    NoMemory,
    /// Guest memory the command names is not mapped (EFAULT).
    #[error("guest memory not mapped")]
    Fault,
}

impl VerbsError {
    /// The positive errno written to `CmdEntry::status`.
    pub fn errno(self) -> u16 {
        let e = match self {
            VerbsError::NotSupported => libc::EOPNOTSUPP,
            VerbsError::Invalid => libc::EINVAL,
            VerbsError::NotFound => libc::ENOENT,
            VerbsError::Busy => libc::EBUSY,
            VerbsError::NoMemory => libc::ENOMEM,
            VerbsError::Fault => libc::EFAULT,
        };
        e as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_are_the_linux_ones() {
        assert_eq!(VerbsError::NotSupported.errno(), 95);
        assert_eq!(VerbsError::Invalid.errno(), 22);
        assert_eq!(VerbsError::NotFound.errno(), 2);
        assert_eq!(VerbsError::Busy.errno(), 16);
        assert_eq!(VerbsError::NoMemory.errno(), 12);
        assert_eq!(VerbsError::Fault.errno(), 14);
    }
}
