//! The streaming frame decoder.

use std::mem;

use super::{check_header, from_body, Frame, FrameError, DEFAULT_MAX_BODY, FRAME_HEADER_LEN};

/// Streaming decoder: feed it byte chunks of any size, get whole frames.
///
/// It buffers at most one partial frame: a 5-byte header, then a body buffer
/// allocated once the header has been checked, never larger than the limit.
/// After the first error it stays failed and reports that error again.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_body: usize,
    header: [u8; FRAME_HEADER_LEN],
    header_len: usize,
    /// Type and length of the frame whose body is being collected.
    pending: Option<(u8, usize)>,
    body: Vec<u8>,
    failed: Option<FrameError>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BODY)
    }
}

impl FrameDecoder {
    /// A decoder that rejects bodies longer than `max_body` bytes.
    pub fn new(max_body: usize) -> Self {
        Self {
            max_body,
            header: [0; FRAME_HEADER_LEN],
            header_len: 0,
            pending: None,
            body: Vec::new(),
            failed: None,
        }
    }

    /// Decodes the frames that `input` completes. The iterator yields each
    /// frame, or one error and then nothing; it consumes all of `input` that
    /// belongs to frames (bytes of a frame still incomplete are buffered).
    pub fn feed<'d, 'i>(&'d mut self, input: &'i [u8]) -> Frames<'d, 'i> {
        Frames {
            decoder: self,
            input,
            done: false,
        }
    }

    /// Bytes of an incomplete frame held.
    pub fn buffered(&self) -> usize {
        self.header_len + self.body.len()
    }

    /// The error the decoder failed with, if any.
    pub fn error(&self) -> Option<&FrameError> {
        self.failed.as_ref()
    }

    /// Call at end of stream: an error if the stream ended inside a frame
    /// (or the decoder had failed).
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.pending {
            Some((_, len)) => Err(FrameError::Truncated {
                needed: FRAME_HEADER_LEN + len,
                available: self.buffered(),
            }),
            None if self.header_len > 0 => Err(FrameError::Truncated {
                needed: FRAME_HEADER_LEN,
                available: self.header_len,
            }),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: FrameError) -> Option<Result<Frame, FrameError>> {
        self.failed = Some(e.clone());
        self.body = Vec::new();
        Some(Err(e))
    }

    /// Consumes from `input` up to the end of the next frame.
    fn step(&mut self, input: &mut &[u8]) -> Option<Result<Frame, FrameError>> {
        if let Some(e) = &self.failed {
            return Some(Err(e.clone()));
        }
        let (frame_type, len) = match self.pending {
            Some(pending) => pending,
            None => {
                let want = FRAME_HEADER_LEN - self.header_len;
                let (take, rest) = input.split_at(want.min(input.len()));
                *input = rest;
                let slot = self
                    .header
                    .get_mut(self.header_len..)?
                    .get_mut(..take.len())?;
                slot.copy_from_slice(take);
                self.header_len += take.len();
                if self.header_len < FRAME_HEADER_LEN {
                    return None;
                }
                let (len, frame_type) = match check_header(self.header, self.max_body) {
                    Ok(ok) => ok,
                    Err(e) => return self.fail(e),
                };
                self.body = Vec::with_capacity(len);
                self.pending = Some((frame_type, len));
                (frame_type, len)
            }
        };
        let want = len.saturating_sub(self.body.len());
        let (take, rest) = input.split_at(want.min(input.len()));
        *input = rest;
        self.body.extend_from_slice(take);
        if self.body.len() < len {
            return None;
        }
        self.pending = None;
        self.header_len = 0;
        match from_body(frame_type, mem::take(&mut self.body)) {
            Ok(frame) => Some(Ok(frame)),
            Err(e) => self.fail(e),
        }
    }
}

/// Frames decoded from one chunk; see [`FrameDecoder::feed`].
#[derive(Debug)]
pub struct Frames<'d, 'i> {
    decoder: &'d mut FrameDecoder,
    input: &'i [u8],
    done: bool,
}

impl Iterator for Frames<'_, '_> {
    type Item = Result<Frame, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            let before = self.input.len();
            match self.decoder.step(&mut self.input) {
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Some(Ok(frame)) => return Some(Ok(frame)),
                // A zero-length body completes without input; otherwise stop
                // once the chunk is used up.
                None if self.input.is_empty() || self.input.len() == before => {
                    self.done = true;
                    return None;
                }
                None => {}
            }
        }
    }
}
