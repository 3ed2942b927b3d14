//! The host-side parser of the agent's frames against hostile input.

use proptest::prelude::*;

use super::*;

fn encode_reply(r: &Reply) -> Vec<u8> {
    match r {
        Reply::Hello(n) => encode(HELLO, n),
        Reply::Stdout(b) => encode(STDOUT, b),
        Reply::Stderr(b) => encode(STDERR, b),
        Reply::Exit(s) => encode(EXIT, &[*s]),
        Reply::Fail(m) => encode(FAIL, m.as_bytes()),
    }
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        any::<[u8; 8]>().prop_map(Reply::Hello),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Reply::Stdout),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Reply::Stderr),
        any::<u8>().prop_map(Reply::Exit),
        "[a-z ]{0,40}".prop_map(Reply::Fail),
    ]
}

/// Feeds `bytes` in pieces of `step` and collects replies until an error.
fn decode_all(bytes: &[u8], step: usize) -> (Vec<Reply>, Option<FrameError>, usize) {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    let mut most = 0;
    for chunk in bytes.chunks(step.max(1)) {
        d.push(chunk);
        most = most.max(d.buffered());
        loop {
            match d.next_reply() {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break,
                Err(e) => return (out, Some(e), most),
            }
        }
    }
    (out, None, most)
}

proptest! {
    #[test]
    fn replies_survive_any_split(replies in proptest::collection::vec(reply(), 0..20),
                                 step in 1usize..64) {
        let bytes: Vec<u8> = replies.iter().flat_map(encode_reply).collect();
        let (got, err, _) = decode_all(&bytes, step);
        prop_assert_eq!(err, None);
        prop_assert_eq!(got, replies);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_stay_bounded(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096), step in 1usize..512) {
        let (_, _, most) = decode_all(&bytes, step);
        prop_assert!(most <= HEADER + MAX_PAYLOAD + step);
    }

    #[test]
    fn sync_skips_an_abandoned_session(
        junk in proptest::collection::vec(any::<u8>(), 0..600),
        nonce in any::<[u8; 8]>(),
        after in proptest::collection::vec(reply(), 0..5),
        step in 1usize..64) {
        let hello = hello_reply(&nonce);
        prop_assume!(!junk.windows(hello.len()).any(|w| w == hello));
        let mut bytes = junk.clone();
        bytes.extend_from_slice(&hello);
        let rest: Vec<u8> = after.iter().flat_map(encode_reply).collect();
        bytes.extend_from_slice(&rest);
        let mut d = Decoder::new();
        let mut synced = false;
        let mut got = Vec::new();
        for chunk in bytes.chunks(step) {
            d.push(chunk);
            if !synced {
                synced = d.sync(&nonce);
                prop_assert!(d.buffered() <= step + hello.len());
            }
            if synced {
                loop {
                    match d.next_reply() {
                        Ok(Some(r)) => got.push(r),
                        Ok(None) => break,
                        Err(e) => return Err(TestCaseError::fail(e.to_string())),
                    }
                }
            }
        }
        prop_assert!(synced);
        prop_assert_eq!(got, after);
    }
}

#[test]
fn a_guest_that_never_answers_cannot_grow_the_buffer() {
    let mut d = Decoder::new();
    let nonce = *b"12345678";
    for _ in 0..1000 {
        d.push(&[b'H'; 1000]);
        assert!(!d.sync(&nonce));
        assert!(d.buffered() < HEADER + 8, "{}", d.buffered());
    }
}

#[test]
fn hostile_headers_are_refused_by_name() {
    let mut d = Decoder::new();
    d.push(&[STDOUT, 0, 1, 0, 1]);
    assert_eq!(d.next_reply(), Err(FrameError::TooLong(65537)));
    let mut d = Decoder::new();
    d.push(&[b'Z', 0, 0, 0, 0]);
    assert_eq!(d.next_reply(), Err(FrameError::UnknownType(b'Z')));
    // The host's own request types are not replies either.
    let mut d = Decoder::new();
    d.push(&encode(EXEC, b"\0ls\0"));
    assert_eq!(d.next_reply(), Err(FrameError::UnknownType(EXEC)));
    let mut d = Decoder::new();
    d.push(&encode(EXIT, &[0, 0]));
    assert_eq!(
        d.next_reply(),
        Err(FrameError::BadLength { kind: EXIT, len: 2 })
    );
    // A header for the largest payload is fine and waits for its bytes.
    let mut d = Decoder::new();
    d.push(&[STDERR, 0, 1, 0, 0]);
    assert_eq!(d.next_reply(), Ok(None));
    d.push(&vec![7; MAX_PAYLOAD]);
    assert_eq!(
        d.next_reply(),
        Ok(Some(Reply::Stderr(vec![7; MAX_PAYLOAD])))
    );
}

#[test]
fn exec_requests_carry_argv_byte_for_byte() {
    let f = exec_request(&["sh", "-c", "echo 'a  b'; exit 3"], true).unwrap();
    let mut want = vec![EXEC, 0, 0, 0, 27, FLAG_STDIN];
    want.extend_from_slice(b"sh\0-c\0echo 'a  b'; exit 3\0");
    assert_eq!(f, want);
    let none: [&str; 0] = [];
    assert_eq!(exec_request(&none, false), Err(RequestError::Empty));
    assert_eq!(
        exec_request(&["a", "b\0c"], false),
        Err(RequestError::Nul(2))
    );
    let long = "x".repeat(MAX_PAYLOAD);
    assert!(matches!(
        exec_request(&[long.as_str()], false),
        Err(RequestError::TooLong(_))
    ));
}
