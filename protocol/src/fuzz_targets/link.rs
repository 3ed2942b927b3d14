//! `link_frames`: an arbitrary byte stream, cut into arbitrary chunks, fed
//! to the streaming [`FrameDecoder`].

use super::Input;
use crate::link::{split_frame, FRAME_HEADER_LEN};
use crate::{Frame, FrameDecoder, FrameError};

/// Body limits a decoder is built with (the device's link uses 64 KiB).
const LIMITS: [usize; 8] = [0, 1, 3, 13, 64, 300, 16 * 1024, 64 * 1024];

/// Input: a byte choosing the limit and how many chunk-length bytes follow
/// (0..=31), those lengths (used in turn, 0 meaning an empty chunk), then
/// the stream.
///
/// Invariants: the decoder never holds more than one header and one body
/// of the limit; it yields exactly the frames (and the error) that decoding
/// the whole stream at once with [`Frame::decode`] and walking it with
/// [`split_frame`] give, whatever the chunking; the frames re-encode to the
/// bytes they came from; after an error it stays failed with that error;
/// at the end, [`FrameDecoder::finish`] reports exactly the truncation the
/// one-shot decoder saw.
pub fn link_frames(data: &[u8]) {
    let mut input = Input::new(data);
    let cfg = input.u8();
    let max_body = LIMITS[usize::from(cfg & 7)];
    let lengths = input.bytes(usize::from(cfg >> 3));
    let stream = input.rest();

    // The streaming decoder, fed chunk by chunk.
    let mut decoder = FrameDecoder::new(max_body);
    let mut frames = Vec::new();
    let mut error = None;
    let mut at = 0;
    let mut turn = 0;
    while at < stream.len() {
        let want = match lengths.get(turn % lengths.len().max(1)) {
            Some(&l) => usize::from(l),
            None => stream.len(),
        };
        turn += 1;
        let chunk = &stream[at..(at + want).min(stream.len())];
        at += chunk.len();
        let mut items = decoder.feed(chunk);
        for item in items.by_ref() {
            match item {
                Ok(frame) if error.is_none() => frames.push(frame),
                Ok(frame) => panic!("{frame:?} after {error:?}"),
                Err(e) => {
                    // The first error, or the same one again on a later feed.
                    assert!(error.is_none() || error.as_ref() == Some(&e));
                    error = Some(e);
                }
            }
        }
        assert!(items.next().is_none(), "an ended iterator stays ended");
        assert!(
            decoder.buffered() <= FRAME_HEADER_LEN + max_body,
            "buffered {} with a limit of {max_body}",
            decoder.buffered()
        );
        assert_eq!(decoder.error(), error.as_ref());
        if turn > stream.len() + 2 * lengths.len() + 2 {
            // Only empty chunks: the rest of the stream in one go.
            let mut items = decoder.feed(&stream[at..]);
            for item in items.by_ref() {
                match item {
                    Ok(frame) => frames.push(frame),
                    Err(e) => error = Some(e),
                }
            }
            at = stream.len();
        }
    }

    // The same stream decoded in one piece.
    let mut expected = Vec::new();
    let mut end = Ok(());
    let mut pos = 0;
    while pos < stream.len() {
        match Frame::decode(&stream[pos..], max_body) {
            Ok((frame, used)) => {
                assert!(used >= FRAME_HEADER_LEN);
                // Re-encoding gives back the bytes.
                assert_eq!(
                    frame.to_bytes().as_deref(),
                    Ok(&stream[pos..pos + used]),
                    "frame re-encodes"
                );
                // split_frame finds the same frame without copying.
                let (raw, raw_used) = split_frame(&stream[pos..], max_body)
                    .expect("split_frame agrees with decode")
                    .expect("a whole frame");
                assert_eq!(raw_used, used);
                assert_eq!(raw.decode().as_ref(), Ok(&frame));
                assert_eq!(raw.is_packet(), matches!(frame, Frame::Packet(_)));
                expected.push(frame);
                pos += used;
            }
            Err(e) => {
                end = Err(e);
                break;
            }
        }
    }
    assert_eq!(frames, expected, "streaming and one-shot frames");
    match end {
        Ok(()) => {
            assert_eq!(error, None);
            assert_eq!(decoder.finish(), Ok(()));
        }
        Err(FrameError::Truncated { needed, available }) => {
            // The stream stopped inside a frame: not an error until the end.
            assert_eq!(error, None);
            assert_eq!(
                decoder.finish(),
                Err(FrameError::Truncated { needed, available })
            );
            assert!(matches!(split_frame(&stream[pos..], max_body), Ok(None)));
        }
        Err(e) => {
            assert_eq!(error.as_ref(), Some(&e), "streaming error");
            assert_eq!(decoder.finish(), Err(e.clone()));
            // Failed for good: more input gives the error again, once.
            let mut again = decoder.feed(&[0; 8]);
            assert_eq!(again.next(), Some(Err(e)));
            assert_eq!(again.next(), None);
        }
    }
}
