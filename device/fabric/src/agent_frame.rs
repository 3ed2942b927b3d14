//! The wire format between `ibtca-fabric exec` and the guest agent
//! (`guest-driver/initramfs/ibtca-agent.c`) on the guest's virtio-serial
//! port: frames of one type byte, a big-endian `u32` payload length of at
//! most [`MAX_PAYLOAD`], and the payload.
//!
//! Host to guest: [`HELLO`] (an 8-byte nonce), [`EXEC`] (a flags byte,
//! then each argument NUL-terminated), [`STDIN`] (a chunk of the
//! command's standard input; an empty one closes it). Guest to host:
//! [`HELLO`] (the same nonce back), [`STDOUT`], [`STDERR`], [`EXIT`] (one
//! byte: the exit status, 128 + N for signal N) and [`FAIL`] (the agent
//! could not run the command: a message).
//!
//! The host parses what a possibly hostile guest sends with [`Decoder`]:
//! a frame is never longer than [`MAX_PAYLOAD`], a type the host does not
//! expect from a guest is an error, and [`Decoder::sync`] skips whatever
//! came before the agent's answer to this session's nonce (output of an
//! earlier, abandoned session).

/// Largest payload of a frame, either way.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// Length of a frame's header.
pub const HEADER: usize = 5;

/// Session start (host) and its answer (guest): an 8-byte nonce.
pub const HELLO: u8 = b'H';
/// The command: flags, then NUL-terminated arguments.
pub const EXEC: u8 = b'E';
/// Standard input for the command; empty: end of input.
pub const STDIN: u8 = b'I';
/// Standard output of the command.
pub const STDOUT: u8 = b'O';
/// Standard error of the command.
pub const STDERR: u8 = b'R';
/// The command's exit status (one byte).
pub const EXIT: u8 = b'X';
/// The agent could not run the command (a message).
pub const FAIL: u8 = b'F';

/// [`EXEC`] flag: the host forwards standard input ([`STDIN`] frames);
/// without it the command's standard input is `/dev/null`.
pub const FLAG_STDIN: u8 = 1;

/// A frame from the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The agent's answer to [`HELLO`].
    Hello([u8; 8]),
    /// Output on the command's standard output.
    Stdout(Vec<u8>),
    /// Output on the command's standard error.
    Stderr(Vec<u8>),
    /// The command ended with this status.
    Exit(u8),
    /// The agent could not run the command.
    Fail(String),
}

/// What is wrong with the guest's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A header announcing more than [`MAX_PAYLOAD`] bytes.
    #[error("the agent announced a frame of {0} bytes (at most {MAX_PAYLOAD})")]
    TooLong(u32),
    /// A type byte the guest may not send.
    #[error("the agent sent a frame of unknown type 0x{0:02x}")]
    UnknownType(u8),
    /// A frame whose payload has the wrong size for its type.
    #[error("the agent sent a `{}` frame of {len} bytes", char::from(*kind))]
    BadLength {
        /// The type.
        kind: u8,
        /// Its payload length.
        len: usize,
    },
}

/// Encodes one frame. `payload` must not exceed [`MAX_PAYLOAD`].
pub fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() <= MAX_PAYLOAD, "frame payload too long");
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Why an [`EXEC`] request cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// No command.
    #[error("no command given")]
    Empty,
    /// An argument contains a NUL byte.
    #[error("argument {0} contains a NUL byte")]
    Nul(usize),
    /// The arguments are too long for one frame.
    #[error("the command's arguments take {0} bytes (at most {max})", max = MAX_PAYLOAD - 1)]
    TooLong(usize),
}

/// The [`EXEC`] frame of `argv`.
pub fn exec_request(argv: &[impl AsRef<[u8]>], stdin: bool) -> Result<Vec<u8>, RequestError> {
    if argv.is_empty() {
        return Err(RequestError::Empty);
    }
    let mut p = vec![if stdin { FLAG_STDIN } else { 0 }];
    for (i, a) in argv.iter().enumerate() {
        let a = a.as_ref();
        if a.contains(&0) {
            return Err(RequestError::Nul(i + 1));
        }
        p.extend_from_slice(a);
        p.push(0);
    }
    if p.len() > MAX_PAYLOAD {
        return Err(RequestError::TooLong(p.len() - 1));
    }
    Ok(encode(EXEC, &p))
}

/// The guest's answer to [`HELLO`] with `nonce`, byte for byte.
pub fn hello_reply(nonce: &[u8; 8]) -> Vec<u8> {
    encode(HELLO, nonce)
}

/// Parses the guest's byte stream into [`Reply`]s. Holds at most one
/// frame (plus what one read adds) in memory.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// A decoder with nothing buffered.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Adds bytes read from the guest.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered and not yet parsed.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Drops everything before the agent's answer to `nonce` and that
    /// answer itself: true once it was found. Until then keeps only the
    /// last bytes that may start it, so a guest that never answers cannot
    /// grow the buffer.
    pub fn sync(&mut self, nonce: &[u8; 8]) -> bool {
        let want = hello_reply(nonce);
        if let Some(at) = self.buf.windows(want.len()).position(|w| w == want) {
            self.buf.drain(..at + want.len());
            return true;
        }
        let keep = self.buf.len().min(want.len() - 1);
        self.buf.drain(..self.buf.len() - keep);
        false
    }

    /// The next complete frame, `None` if more bytes are needed.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, FrameError> {
        let Some(header) = self.buf.get(..HEADER) else {
            return Ok(None);
        };
        let kind = header[0];
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        if len as usize > MAX_PAYLOAD {
            return Err(FrameError::TooLong(len));
        }
        let len = len as usize;
        let fixed = match kind {
            HELLO => Some(8),
            EXIT => Some(1),
            STDOUT | STDERR | FAIL => None,
            other => return Err(FrameError::UnknownType(other)),
        };
        if fixed.is_some_and(|n| n != len) {
            return Err(FrameError::BadLength { kind, len });
        }
        if self.buf.len() < HEADER + len {
            return Ok(None);
        }
        let payload: Vec<u8> = self.buf.drain(..HEADER + len).skip(HEADER).collect();
        Ok(Some(match kind {
            HELLO => {
                let mut n = [0; 8];
                n.copy_from_slice(&payload);
                Reply::Hello(n)
            }
            EXIT => Reply::Exit(payload[0]),
            STDOUT => Reply::Stdout(payload),
            STDERR => Reply::Stderr(payload),
            _ => Reply::Fail(String::from_utf8_lossy(&payload).into_owned()),
        }))
    }
}

#[cfg(test)]
#[path = "agent_frame_tests.rs"]
mod tests;
