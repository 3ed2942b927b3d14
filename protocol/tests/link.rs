//! Link framing: known bytes, chunking, and every `FrameError`.

use ibtca_protocol::link::{Hello, LinkState, DEFAULT_MAX_BODY, LINK_PROTOCOL_VERSION};
use ibtca_protocol::{Frame, FrameDecoder, FrameError};

fn sample_frames() -> Vec<Frame> {
    vec![
        Frame::Hello(Hello {
            version: LINK_PROTOCOL_VERSION,
            node_guid: 0x1200_0000_0000_1234,
            port: 1,
            lid: 5,
            features: 1,
        }),
        Frame::LinkState(LinkState::Up),
        Frame::Packet((0..100u8).collect()),
        Frame::Packet(Vec::new()),
        Frame::Credit {
            vl: 3,
            credits: 0x1234,
        },
        Frame::LinkState(LinkState::Down),
        Frame::RingOffer { capacity: 4 << 20 },
    ]
}

fn stream(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        f.encode(&mut out).unwrap();
    }
    out
}

fn decode_chunks(chunks: &[&[u8]]) -> Result<Vec<Frame>, FrameError> {
    let mut d = FrameDecoder::default();
    let mut out = Vec::new();
    for chunk in chunks {
        for f in d.feed(chunk) {
            out.push(f?);
        }
    }
    d.finish()?;
    Ok(out)
}

#[test]
fn known_bytes() {
    let hello = Frame::Hello(Hello {
        version: 1,
        node_guid: 0x0102_0304_0506_0708,
        port: 2,
        lid: 0x0a0b,
        features: 0x81,
    });
    assert_eq!(
        hello.to_bytes().unwrap(),
        [0, 0, 0, 14, 1, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 2, 0x0a, 0x0b, 0x81]
    );
    assert_eq!(
        Frame::RingOffer {
            capacity: 0x0102_0304_0506_0708
        }
        .to_bytes()
        .unwrap(),
        [0, 0, 0, 8, 5, 1, 2, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(
        Frame::Packet(vec![0xaa, 0xbb]).to_bytes().unwrap(),
        [0, 0, 0, 2, 2, 0xaa, 0xbb]
    );
    assert_eq!(
        Frame::LinkState(LinkState::Up).to_bytes().unwrap(),
        [0, 0, 0, 1, 3, 1]
    );
    assert_eq!(
        Frame::Credit {
            vl: 1,
            credits: 0x0203
        }
        .to_bytes()
        .unwrap(),
        [0, 0, 0, 3, 4, 1, 2, 3]
    );
    let (frame, used) = Frame::decode(&[0, 0, 0, 1, 3, 0, 99], 16).unwrap();
    assert_eq!((frame, used), (Frame::LinkState(LinkState::Down), 6));
    assert_eq!(hello.frame_type(), 1);
}

#[test]
fn split_at_every_boundary() {
    let frames = sample_frames();
    let bytes = stream(&frames);
    assert_eq!(decode_chunks(&[&bytes]).unwrap(), frames);
    for cut in 0..=bytes.len() {
        let (a, b) = bytes.split_at(cut);
        assert_eq!(decode_chunks(&[a, b]).unwrap(), frames, "cut at {cut}");
        for cut2 in cut..=bytes.len() {
            let (b1, b2) = b.split_at(cut2 - cut);
            assert_eq!(decode_chunks(&[a, b1, b2]).unwrap(), frames);
        }
    }
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(decode_chunks(&bytewise).unwrap(), frames);
}

#[test]
fn oversize_is_rejected_before_buffering() {
    let mut d = FrameDecoder::new(64);
    let header = [0, 0, 0, 65, 2];
    let got: Vec<_> = d.feed(&header).collect();
    assert_eq!(got, [Err(FrameError::TooLarge { len: 65, max: 64 })]);
    assert_eq!(d.buffered(), 5);
    // The decoder stays failed.
    let again: Vec<_> = d.feed(&[0; 10]).collect();
    assert_eq!(again, [Err(FrameError::TooLarge { len: 65, max: 64 })]);
    assert_eq!(d.finish(), Err(FrameError::TooLarge { len: 65, max: 64 }));
    assert!(d.error().is_some());
    // u32::MAX announced: refused, nothing allocated for it.
    let mut d = FrameDecoder::default();
    let got: Vec<_> = d.feed(&[0xff, 0xff, 0xff, 0xff, 2]).collect();
    assert_eq!(
        got,
        [Err(FrameError::TooLarge {
            len: u32::MAX as usize,
            max: DEFAULT_MAX_BODY
        })]
    );
    // One-shot decoding has the same limit; exactly the limit is fine.
    assert!(Frame::decode(&[0, 0, 0, 65, 2], 64).is_err());
    let mut ok = vec![0, 0, 0, 64, 2];
    ok.resize(5 + 64, 7);
    assert_eq!(Frame::decode(&ok, 64).unwrap().1, 69);
}

#[test]
fn unknown_type_bad_lengths_bad_state() {
    assert_eq!(
        decode_chunks(&[&[0, 0, 0, 0, 9]]),
        Err(FrameError::UnknownType(9))
    );
    assert_eq!(
        decode_chunks(&[&[0, 0, 0, 0, 0]]),
        Err(FrameError::UnknownType(0))
    );
    assert_eq!(
        decode_chunks(&[&[0, 0, 0, 2, 3, 1, 1]]),
        Err(FrameError::BadBodyLength {
            frame_type: 3,
            len: 2,
            expected: 1
        })
    );
    assert_eq!(
        Frame::decode(&[0, 0, 0, 13, 1], 100),
        Err(FrameError::BadBodyLength {
            frame_type: 1,
            len: 13,
            expected: 14
        })
    );
    assert_eq!(
        decode_chunks(&[&[0, 0, 0, 4, 5, 0, 0, 0, 1]]),
        Err(FrameError::BadBodyLength {
            frame_type: 5,
            len: 4,
            expected: 8
        })
    );
    assert_eq!(
        decode_chunks(&[&[0, 0, 0, 1, 3, 2]]),
        Err(FrameError::BadLinkState(2))
    );
    // Frames before the bad one are still delivered.
    let mut bytes = stream(&sample_frames()[..2]);
    bytes.extend_from_slice(&[0, 0, 0, 0, 0x7f]);
    let mut d = FrameDecoder::default();
    let got: Vec<_> = d.feed(&bytes).collect();
    assert_eq!(got.len(), 3);
    assert!(got[0].is_ok() && got[1].is_ok());
    assert_eq!(got[2], Err(FrameError::UnknownType(0x7f)));
}

#[test]
fn truncated() {
    let bytes = stream(&sample_frames());
    for cut in 1..bytes.len() {
        let whole_frames_end = [0usize, 19, 25, 130, 135, 143, 149, 162];
        let result = decode_chunks(&[&bytes[..cut]]);
        if whole_frames_end.contains(&cut) {
            assert!(result.is_ok(), "cut {cut}");
        } else {
            assert!(
                matches!(result, Err(FrameError::Truncated { .. })),
                "cut {cut}: {result:?}"
            );
        }
    }
    assert_eq!(
        decode_chunks(&[&[0, 0]]),
        Err(FrameError::Truncated {
            needed: 5,
            available: 2
        })
    );
    assert_eq!(
        decode_chunks(&[&[0, 0, 0, 4, 2, 1]]),
        Err(FrameError::Truncated {
            needed: 9,
            available: 6
        })
    );
    assert_eq!(
        Frame::decode(&[0, 0, 0, 4, 2, 1], 100),
        Err(FrameError::Truncated {
            needed: 9,
            available: 6
        })
    );
    assert_eq!(
        Frame::decode(&[0, 0], 100),
        Err(FrameError::Truncated {
            needed: 5,
            available: 2
        })
    );
}

#[test]
fn split_frame_walks_a_buffer_like_the_decoder() {
    use ibtca_protocol::link::split_frame;
    let frames = [
        Frame::Hello(Hello {
            version: LINK_PROTOCOL_VERSION,
            node_guid: 7,
            port: 1,
            lid: 2,
            features: 0,
        }),
        Frame::Packet(vec![1, 2, 3, 4]),
        Frame::Packet(Vec::new()),
        Frame::LinkState(LinkState::Up),
        Frame::Credit { vl: 1, credits: 9 },
        Frame::RingOffer { capacity: 4096 },
    ];
    let mut stream = Vec::new();
    for f in &frames {
        f.encode(&mut stream).unwrap();
    }
    // Every prefix: whole frames come out, a partial one is `None`.
    for cut in 0..=stream.len() {
        let mut rest = &stream[..cut];
        let mut got = Vec::new();
        while let Some((raw, used)) = split_frame(rest, 64).unwrap() {
            assert_eq!(
                raw.is_packet(),
                matches!(raw.decode(), Ok(Frame::Packet(_)))
            );
            got.push(raw.decode().unwrap());
            rest = &rest[used..];
        }
        let mut decoder = FrameDecoder::new(64);
        let want: Vec<Frame> = decoder.feed(&stream[..cut]).map(Result::unwrap).collect();
        assert_eq!(got, want, "cut at {cut}");
    }
    // The same checks as the decoder: unknown type, oversize body.
    assert_eq!(
        split_frame(&[0, 0, 0, 1, 9, 0], 64),
        Err(FrameError::UnknownType(9))
    );
    assert!(matches!(
        split_frame(&[0, 0, 1, 0, 2], 64),
        Err(FrameError::TooLarge { len: 256, max: 64 })
    ));
    assert!(matches!(
        split_frame(&[0, 0, 0, 2, 3, 1, 1], 64),
        Err(FrameError::BadBodyLength { .. })
    ));
}
