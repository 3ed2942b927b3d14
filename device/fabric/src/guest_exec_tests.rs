//! An exec session against fake agents, hostile ones included.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::*;
use crate::agent_frame::{encode, EXIT, STDERR, STDOUT};

fn opts(secs: u64) -> ExecOptions {
    ExecOptions {
        stdin: false,
        agent_timeout: Duration::from_secs(secs),
    }
}

/// Runs a session whose agent is `agent` (given its end of the socket
/// and the nonce the host sent); the result and what reached out and err.
fn run(
    secs: u64,
    agent: impl FnOnce(UnixStream, [u8; 8]) + Send + 'static,
) -> (Result<u8, ExecError>, Vec<u8>, Vec<u8>) {
    let (host, mut guest) = UnixStream::pair().unwrap();
    let request = agent_frame::exec_request(&["sh", "-c", "x"], false).unwrap();
    let want = request.clone();
    let t = std::thread::spawn(move || {
        let mut head = [0; 13];
        guest.read_exact(&mut head).unwrap();
        assert_eq!(&head[..5], &[HELLO, 0, 0, 0, 8]);
        let mut req = vec![0; want.len()];
        guest.read_exact(&mut req).unwrap();
        assert_eq!(req, want, "the request follows the hello byte for byte");
        let mut nonce = [0; 8];
        nonce.copy_from_slice(&head[5..]);
        agent(guest, nonce);
    });
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = session(host, "n1", &request, &opts(secs), &mut out, &mut err);
    t.join().unwrap();
    (r, out, err)
}

#[test]
fn output_and_status_after_an_abandoned_sessions_leftovers() {
    let (r, out, err) = run(30, |mut g, nonce| {
        // Leftovers of an earlier session, then the answer.
        g.write_all(&encode(STDOUT, b"old output")).unwrap();
        g.write_all(&[b'H', 0, 0]).unwrap();
        g.write_all(&encode(HELLO, &nonce)).unwrap();
        g.write_all(&encode(STDOUT, b"hi\n")).unwrap();
        g.write_all(&encode(STDERR, b"oops\n")).unwrap();
        g.write_all(&encode(STDOUT, b"more\n")).unwrap();
        g.write_all(&encode(EXIT, &[3])).unwrap();
    });
    assert_eq!(r.unwrap(), 3);
    assert_eq!(out, b"hi\nmore\n");
    assert_eq!(err, b"oops\n");
}

#[test]
fn an_agent_that_never_answers_is_named_after_the_bound() {
    // The fake agent holds the connection open and sends nothing, so the
    // bound is the only way out.
    let (r, _, _) = run(1, |mut g, _| {
        let mut rest = Vec::new();
        let _ = g.read_to_end(&mut rest);
    });
    let e = r.unwrap_err();
    assert!(matches!(e, ExecError::NoAnswer { secs: 1, .. }), "{e}");
    assert!(e.to_string().contains("did not answer within 1 s"), "{e}");
}

#[test]
fn a_hostile_frame_ends_the_session_with_a_clear_error() {
    let (r, out, _) = run(30, |mut g, nonce| {
        g.write_all(&encode(HELLO, &nonce)).unwrap();
        g.write_all(&encode(STDOUT, b"fine")).unwrap();
        // Bytes before the close are read before it: the error is the
        // header's, not the close's.
        g.write_all(&[STDOUT, 0xff, 0xff, 0xff, 0xff]).unwrap();
    });
    let e = r.unwrap_err();
    assert!(e.to_string().contains("frame of 4294967295 bytes"), "{e}");
    assert_eq!(out, b"fine");
}

#[test]
fn a_guest_that_goes_away_is_reported() {
    let (r, _, _) = run(30, |mut g, nonce| {
        g.write_all(&encode(HELLO, &nonce)).unwrap();
        g.write_all(&encode(STDOUT, b"partial")).unwrap();
    });
    let e = r.unwrap_err();
    assert!(matches!(e, ExecError::Closed { .. }), "{e}");
}
