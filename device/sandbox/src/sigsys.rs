//! What a forbidden system call does: the filter traps it (`SIGSYS`), and
//! this handler writes one line to stderr,
//!
//!   `PROGRAM: error: seccomp: forbidden system call NR (NAME) in thread ROLE`
//!
//! (a thread that has not entered its role yet runs under the filter of
//! the thread that started it, and the line says so)
//! and ends the process with [`EXIT_FORBIDDEN_CALL`]. The handler makes
//! only `write` and `exit_group`, which every role allows, and touches no
//! lock and no allocator (it may interrupt either).

use std::cell::Cell;
use std::io;
use std::sync::OnceLock;

use super::syscall_names;

/// Exit status of a process that made a forbidden system call: 128 +
/// `SIGSYS`, what a shell shows for a process the signal killed.
pub const EXIT_FORBIDDEN_CALL: i32 = 128 + libc::SIGSYS;

/// The program name the line starts with.
static PROGRAM: OnceLock<&'static str> = OnceLock::new();

thread_local! {
    /// The role whose filter this thread runs under ("" before one).
    static ROLE: Cell<&'static str> = const { Cell::new("") };
}

/// Records the calling thread's role for the line.
pub(super) fn set_thread_role(role: &'static str) {
    ROLE.with(|r| r.set(role));
}

/// The part of the kernel's `siginfo_t` a seccomp trap fills (`_sigsys`
/// in `<asm-generic/siginfo.h>`; 64-bit layout).
#[repr(C)]
struct SigsysInfo {
    signo: i32,
    errno: i32,
    code: i32,
    _pad: i32,
    call_addr: *mut libc::c_void,
    syscall: i32,
    arch: u32,
}

/// Installs the handler for the whole process; `program` starts the line.
pub(super) fn install(program: &'static str) -> io::Result<()> {
    let _ = PROGRAM.set(program);
    // SAFETY: a zeroed `sigaction` is a valid value (no flags, empty mask)
    // that is filled in below before use.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handle as *const () as libc::sighandler_t;
    action.sa_flags = libc::SA_SIGINFO;
    // SAFETY: `action.sa_mask` is a valid `sigset_t` owned by this frame.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: `action` is fully initialised and `handle` has the
    // three-argument signature SA_SIGINFO asks for.
    if unsafe { libc::sigaction(libc::SIGSYS, &action, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A byte buffer on the stack, for building the line without allocating.
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn push(&mut self, s: &[u8]) {
        for &b in s {
            if self.len < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
    }

    fn push_number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// Builds the line for system call `nr` trapped in thread `role`.
fn message(program: &str, nr: i64, role: &str, line: &mut Line) {
    line.push(program.as_bytes());
    line.push(b": error: seccomp: forbidden system call ");
    line.push_number(nr.unsigned_abs());
    line.push(b" (");
    line.push(syscall_names::name(nr).as_bytes());
    if role.is_empty() {
        line.push(b") in a new thread, under the filter of the thread that started it");
    } else {
        line.push(b") in thread ");
        line.push(role.as_bytes());
    }
    line.push(b"\n");
}

extern "C" fn handle(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO handlers,
    // and for SIGSYS its union holds `_sigsys`, laid out as `SigsysInfo`.
    let nr = unsafe { (*info.cast::<SigsysInfo>()).syscall };
    let program = PROGRAM.get().copied().unwrap_or("ibtca");
    // A const-initialised thread local without destructor: a plain read.
    let role = ROLE.with(Cell::get);
    let mut line = Line {
        buf: [0; 256],
        len: 0,
    };
    message(program, i64::from(nr), role, &mut line);
    // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer is
    // valid for `line.len` bytes.
    unsafe {
        libc::write(libc::STDERR_FILENO, line.buf.as_ptr().cast(), line.len);
        libc::_exit(EXIT_FORBIDDEN_CALL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_program_call_and_thread() {
        let mut line = Line {
            buf: [0; 256],
            len: 0,
        };
        message("ibtca-device", libc::SYS_execve, "engine", &mut line);
        assert_eq!(
            std::str::from_utf8(&line.buf[..line.len]).unwrap(),
            "ibtca-device: error: seccomp: forbidden system call 59 (execve) in thread engine\n"
        );
    }
}
