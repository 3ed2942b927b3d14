//! One connection, on the supervisor thread: send our `Hello`, check the
//! peer's, start the writer, pass frames to the sink, and tear down.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use ibtca_protocol::link::{
    Frame, FrameDecoder, FrameError, Hello, LinkState, LINK_PROTOCOL_VERSION,
};

use super::port::{Shared, Sink};
use super::queue::run_writer;
use super::stats::{add, bump};
use super::vl::{packet_vl, NUM_VLS};
use super::{LinkEvent, LocalPort, MAX_BODY};

/// Bytes asked of one `read`.
const READ_CHUNK: usize = 128 * 1024;

/// Runs one connection until it ends; true if it came up.
pub(super) fn run(shared: &Arc<Shared>, stream: UnixStream, sink: &mut Sink) -> bool {
    {
        let mut control = shared.control();
        if control.stopping {
            return false;
        }
        match stream.try_clone() {
            Ok(clone) => control.active = Some(clone),
            Err(e) => {
                tracing::warn!(error = %e, "cannot register the link connection");
                return false;
            }
        }
    }
    let mut session = Session {
        shared,
        sink,
        stream: &stream,
        writer: None,
        grants: [0; NUM_VLS],
        freed: [0; NUM_VLS],
    };
    let reason = session.serve().err().unwrap_or_default();
    let up = session.writer.is_some();
    if let Some(writer) = session.writer.take() {
        shared.queue.close(&shared.counters);
        // Wakes a writer blocked in `write`.
        let _ = stream.shutdown(Shutdown::Both);
        if writer.join().is_err() {
            tracing::error!("link writer thread panicked");
        }
        let reason = if shared.is_stopping() {
            "link stopped".to_owned()
        } else {
            reason
        };
        tracing::info!(%reason, "link down");
        (session.sink)(LinkEvent::Down { reason });
    }
    shared.control().active = None;
    up
}

struct Session<'a> {
    shared: &'a Arc<Shared>,
    sink: &'a mut Sink,
    stream: &'a UnixStream,
    /// The writer thread; present once the link is up.
    writer: Option<JoinHandle<()>>,
    /// Credits the peer granted in the frames of the current read.
    grants: [u32; NUM_VLS],
    /// Receive buffers freed (auto return) in the current read.
    freed: [u32; NUM_VLS],
}

impl Session<'_> {
    /// Exchanges `Hello`s and reads frames; the error is why it ended.
    fn serve(&mut self) -> Result<(), String> {
        let config = &self.shared.config;
        let local = self.shared.local;
        let hello = Frame::Hello(Hello {
            version: LINK_PROTOCOL_VERSION,
            node_guid: local.node_guid,
            port: local.port,
            lid: local.lid,
        });
        let io_err = |what: &str, e: io::Error| format!("{what}: {e}");
        let bytes = hello.to_bytes().map_err(|e| e.to_string())?;
        self.stream
            .set_write_timeout(Some(config.hello_timeout))
            .and_then(|()| self.stream.write_all(&bytes))
            .and_then(|()| self.stream.set_write_timeout(None))
            .and_then(|()| self.stream.set_read_timeout(Some(config.hello_timeout)))
            .map_err(|e| io_err("sending Hello", e))?;

        let mut buf = vec![0u8; READ_CHUNK];
        let mut decoder = FrameDecoder::new(MAX_BODY);
        loop {
            let n = match self.stream.read(&mut buf) {
                Ok(0) if decoder.buffered() > 0 => return Err("peer closed mid-frame".into()),
                Ok(0) => return Err("peer closed the connection".into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if self.writer.is_none()
                        && matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                {
                    bump(&self.shared.counters.hello_rejected);
                    tracing::warn!(timeout = ?config.hello_timeout, "link peer sent no Hello; dropping it");
                    return Err("no Hello".into());
                }
                Err(e) => return Err(io_err("read", e)),
            };
            for frame in decoder.feed(buf.get(..n).unwrap_or_default()) {
                self.handle(frame)?;
            }
            self.settle_credits();
        }
    }

    /// Applies the credits of one read at once (so that grants that came
    /// together are arbitrated together) and returns freed buffers.
    fn settle_credits(&mut self) {
        let queue = &self.shared.queue;
        if self.grants.iter().any(|g| *g > 0) {
            queue.add_credits(&self.grants);
            self.grants = [0; NUM_VLS];
        }
        for (vl, n) in self.freed.iter_mut().enumerate() {
            if *n > 0 {
                queue.return_credits(vl as u8, *n);
                *n = 0;
            }
        }
    }

    fn handle(&mut self, frame: Result<Frame, FrameError>) -> Result<(), String> {
        let counters = &self.shared.counters;
        let up = self.writer.is_some();
        let reject = |what: String| {
            bump(if up {
                &counters.rx_bad_frames
            } else {
                &counters.hello_rejected
            });
            tracing::warn!(peer_up = up, "{what}; dropping the link peer");
            Err(what)
        };
        match frame {
            Err(e) => reject(format!("bad frame: {e}")),
            Ok(Frame::Packet(packet)) if up => {
                bump(&counters.rx_packets);
                add(&counters.rx_bytes, packet.len() as u64);
                tracing::trace!(len = packet.len(), "link rx");
                let vl = usize::from(packet_vl(&packet));
                (self.sink)(LinkEvent::Packet(packet));
                let auto = self.shared.config.flow_control.as_ref();
                if auto.is_some_and(|f| f.auto_return) {
                    if let Some(n) = self.freed.get_mut(vl) {
                        *n += 1;
                    }
                }
                Ok(())
            }
            Ok(Frame::Hello(h)) if !up && h.version != LINK_PROTOCOL_VERSION => reject(format!(
                "peer speaks link protocol {}, we speak {LINK_PROTOCOL_VERSION}",
                h.version
            )),
            Ok(Frame::Hello(h)) if !up => self.come_up(h),
            Ok(Frame::Hello(_)) => reject("second Hello".into()),
            Ok(other) if !up => reject(format!(
                "first frame is type {}, not Hello",
                other.frame_type()
            )),
            Ok(Frame::LinkState(state)) => {
                tracing::debug!(up = state == LinkState::Up, "link peer reports port state");
                Ok(())
            }
            Ok(Frame::Credit { vl, credits }) => {
                bump(&counters.credit_frames_rx);
                tracing::trace!(vl, credits, "link credits");
                if let Some(g) = self.grants.get_mut(usize::from(vl)) {
                    *g = g.saturating_add(u32::from(credits));
                }
                Ok(())
            }
            // Unreachable: packets before `Up` are caught by the arm above.
            Ok(Frame::Packet(_)) => Ok(()),
        }
    }

    /// The peer's `Hello` is good: start the writer and report `Up`.
    fn come_up(&mut self, hello: Hello) -> Result<(), String> {
        let stream = self
            .stream
            .set_read_timeout(None)
            .and_then(|()| self.stream.try_clone())
            .map_err(|e| format!("preparing the connection: {e}"))?;
        let shared = Arc::clone(self.shared);
        self.shared.queue.open();
        let writer = thread::Builder::new()
            .name("ibtca-link-tx".into())
            .spawn(move || run_writer(&shared.queue, stream, &shared.counters));
        match writer {
            Ok(writer) => self.writer = Some(writer),
            Err(e) => {
                self.shared.queue.close(&self.shared.counters);
                return Err(format!("starting the writer thread: {e}"));
            }
        }
        bump(&self.shared.counters.connections);
        let peer = LocalPort {
            node_guid: hello.node_guid,
            port: hello.port,
            lid: hello.lid,
        };
        tracing::info!(
            guid = format_args!("{:#018x}", peer.node_guid),
            port = peer.port,
            lid = peer.lid,
            "link up"
        );
        (self.sink)(LinkEvent::Up { peer });
        Ok(())
    }
}
