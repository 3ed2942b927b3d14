//! One connection, on the supervisor thread: send our `Hello`, check the
//! peer's, start the writer, pass frames to the sink, and tear down. Frames
//! from the socket are read into a receive buffer and walked there; frames
//! from the peer's ring are walked in the ring (`walk.rs`).

use crate::socket::LinkSocket;
use std::io::{self, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use ibtca_protocol::encoded;
use ibtca_protocol::link::{
    split_frame, Frame, FrameError, Hello, LinkState, FEATURE_SHARED_RING, FRAME_HEADER_LEN,
    LINK_PROTOCOL_VERSION,
};

mod walk;

use super::pipe::{self, AcceptError, OfferError, RingRx, RxPipe, TxPipe};
use super::queue::run_writer;
use super::shared::{Shared, Sink};
use super::stats::{add, bump};
use super::vl::{NUM_VLS, VL15, VL15_BUFFERS};
use super::{BufferPool, LinkEvent, LinkRx, LocalPort, PacketBatch, RxCredits, MAX_BODY};

/// Bytes asked of one `read` (at least; the buffer always has room for a
/// whole frame after a partial one).
const READ_CHUNK: usize = 128 * 1024;

/// Packet bytes from which one read's packets are handed over in the
/// receive buffer itself instead of copied (`Session::deliver`).
const HANDOVER_MIN: usize = 16 * 1024;

/// Asks for a send buffer of `bytes` (0: leave the default) and logs what
/// the kernel granted (it caps the request at `net.core.wmem_max` and
/// reports twice the usable size); a failure only costs speed.
fn size_send_buffer(stream: &LinkSocket, bytes: usize) {
    if bytes == 0 {
        return;
    }
    let socket: &socket2::Socket = stream;
    match socket.set_send_buffer_size(bytes) {
        Ok(()) => tracing::debug!(
            asked = bytes,
            granted = socket.send_buffer_size().unwrap_or_default(),
            "link socket send buffer"
        ),
        Err(e) => {
            tracing::warn!(error = %e, asked = bytes, "cannot size the link socket send buffer")
        }
    }
}

/// Runs one connection until it ends; true if it came up.
pub(super) fn run(shared: &Arc<Shared>, stream: LinkSocket, sink: &mut Sink) -> bool {
    size_send_buffer(&stream, shared.config.send_buffer);
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
        auto_return: shared
            .config
            .flow_control
            .as_ref()
            .is_some_and(|f| f.auto_return),
        buffers: shared
            .config
            .flow_control
            .as_ref()
            .map(|f| u32::from(f.credits)),
        conn: 0,
        grants: [0; NUM_VLS],
        taken: [0; NUM_VLS],
        overrun_logged: false,
        pool: Arc::default(),
        input: RxPipe::default(),
        switch: None,
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
        // Logged once the sink has the event: whoever reads the line and
        // then asks the port's owner (a device's engine, a switch) finds
        // the link down there too.
        (session.sink)(LinkRx::Event(LinkEvent::Down {
            reason: reason.clone(),
        }));
        tracing::info!(%reason, "link down");
    }
    shared.control().active = None;
    up
}

struct Session<'a> {
    shared: &'a Arc<Shared>,
    sink: &'a mut Sink,
    stream: &'a LinkSocket,
    /// The writer thread; present once the link is up.
    writer: Option<JoinHandle<()>>,
    /// Receive buffers are freed (credits returned) when the batch of
    /// their packets is dropped (`FlowControl::auto_return`).
    auto_return: bool,
    /// Receive buffers per VL granted to the peer (`FlowControl::credits`);
    /// `None` without flow control.
    buffers: Option<u32>,
    /// The connection's number in the send queue (`TxQueue::open`).
    conn: u64,
    /// Credits the peer granted in the frames of the current read.
    grants: [u32; NUM_VLS],
    /// Receive buffers taken by packets not yet passed to the sink.
    taken: [u16; NUM_VLS],
    /// The peer was seen sending beyond its credits (logged once).
    overrun_logged: bool,
    /// Receive buffers handed over with packets, back for reuse.
    pool: Arc<BufferPool>,
    /// Where the peer's frames come from: the socket, then the ring it
    /// offers, if it does (`pipe.rs`).
    input: RxPipe,
    /// The peer's ring, from its `RingOffer`, to read from once the
    /// socket's bytes so far are used.
    switch: Option<RingRx>,
}

impl Session<'_> {
    /// This end announces shared rings in its `Hello` (and so may be sent a
    /// `RingOffer`): it has them on, has not failed to map one, and the
    /// connection can carry the ring's files (a Unix socket, not TCP).
    fn takes_rings(&self) -> bool {
        self.shared.config.shared_ring > 0
            && self.stream.carries_files()
            && !self.shared.rx_rings_refused.load(Ordering::Relaxed)
    }

    /// Exchanges `Hello`s and reads frames; the error is why it ended.
    fn serve(&mut self) -> Result<(), String> {
        let config = &self.shared.config;
        let local = self.shared.local;
        let hello = Frame::Hello(Hello {
            version: LINK_PROTOCOL_VERSION,
            node_guid: local.node_guid,
            port: local.port,
            lid: local.lid,
            features: if self.takes_rings() {
                FEATURE_SHARED_RING
            } else {
                0
            },
        });
        let io_err = |what: &str, e: io::Error| format!("{what}: {e}");
        let bytes = hello.to_bytes().map_err(|e| e.to_string())?;
        self.stream
            .set_write_timeout(Some(config.hello_timeout))
            .and_then(|()| self.stream.write_all(&bytes))
            .and_then(|()| self.stream.set_write_timeout(None))
            .and_then(|()| self.stream.set_read_timeout(Some(config.hello_timeout)))
            .map_err(|e| io_err("sending Hello", e))?;

        // Frames are walked in place in `buf`: bytes `start..end` are read
        // and not yet used (at most part of one frame between reads).
        let mut buf = vec![0u8; READ_CHUNK.max(FRAME_HEADER_LEN + MAX_BODY)];
        let (mut start, mut end) = (0, 0);
        loop {
            if start > 0 {
                buf.copy_within(start..end, 0);
                (start, end) = (0, end - start);
            }
            let room = buf.get_mut(end..).unwrap_or_default();
            let n = match self.input.recv(self.stream, room) {
                Ok(0) if end > 0 => return Err("peer closed mid-frame".into()),
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
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    // A broken ring or bytes where none belong.
                    bump(&self.shared.counters.rx_bad_frames);
                    tracing::warn!(error = %e, "link peer broke its ring; dropping it");
                    return Err(io_err("read", e));
                }
                Err(e) => return Err(io_err("read", e)),
            };
            end += n;
            let (used, spans) = self.consume(&buf, start, end)?;
            start += used;
            self.deliver(&mut buf, spans, &mut start, &mut end);
            self.settle_credits();
            if let Some(mut ring) = self.switch.take() {
                if start != end {
                    bump(&self.shared.counters.rx_bad_frames);
                    return Err("peer wrote to the socket after its RingOffer".into());
                }
                bump(&self.shared.counters.rx_rings);
                // Logged once counted: whoever reads the line sees the ring
                // in `rx_rings`.
                tracing::info!(
                    kib = ring.reader().capacity() / 1024,
                    "link peer writes to us through a shared ring"
                );
                if walk::can_walk(&mut ring) {
                    return self.serve_ring(ring);
                }
                self.input = RxPipe::Ring(ring);
            }
        }
    }

    /// Applies the credits of one read at once (so that grants that came
    /// together are arbitrated together).
    fn settle_credits(&mut self) {
        if self.grants.iter().any(|g| *g > 0) {
            let shared = self.shared;
            shared.queue.add_credits(&self.grants, &shared.counters);
            self.grants = [0; NUM_VLS];
        }
    }

    /// A packet on `vl` arrived: true if it takes a free receive buffer,
    /// false if the peer had no credit for it (it ignores flow control):
    /// the packet is dropped and counted, logged once per connection.
    /// Buffers held by packets with the sink are freed only when it is
    /// done with them, so this bounds what waits for the sink.
    fn admit(&mut self, vl: u8) -> bool {
        let Some(buffers) = self.buffers else {
            return true;
        };
        if vl == VL15 {
            return self.admit_vl15();
        }
        let Some(taken) = self.taken.get_mut(usize::from(vl)) else {
            return false;
        };
        if self.shared.queue.rx_held(vl) + u32::from(*taken) < buffers {
            *taken += 1;
            return true;
        }
        bump(&self.shared.counters.rx_credit_overruns);
        if !self.overrun_logged {
            self.overrun_logged = true;
            tracing::warn!(
                vl,
                buffers,
                "link peer sends beyond its credits; dropping such packets (counted in rx_credit_overruns)"
            );
        }
        false
    }

    /// A VL15 packet (outside flow control) takes one of the
    /// [`VL15_BUFFERS`] management buffers, or is dropped and counted.
    fn admit_vl15(&mut self) -> bool {
        let Some(taken) = self.taken.get_mut(usize::from(VL15)) else {
            return false;
        };
        if self.shared.queue.rx_held(VL15) + u32::from(*taken) < VL15_BUFFERS {
            *taken += 1;
            return true;
        }
        bump(&self.shared.counters.rx_vl15_dropped);
        false
    }

    /// Readies `batch` for the sink: its CRCs computed if the sink wants
    /// them, the receive buffers taken so far handed to it (freed when it
    /// is dropped, with auto return; otherwise by the owner).
    fn ready(&mut self, batch: &mut PacketBatch) {
        if self.shared.config.rx_crcs {
            batch.compute_crcs();
        }
        let taken = std::mem::take(&mut self.taken);
        if self.buffers.is_none() || taken.iter().all(|n| *n == 0) {
            return;
        }
        self.shared.queue.hold_rx(&taken);
        if self.auto_return {
            batch.hold(RxCredits::new(Arc::clone(self.shared), self.conn, taken));
        }
    }

    /// Handles the whole frames in `buf[start..end]`; returns the bytes
    /// they took and where in `buf` the packets not yet passed to the sink
    /// are (for [`Self::deliver`]). Packets go to the sink in stream order
    /// with the other events: before a `Hello`, `LinkState` or bad frame,
    /// those so far are passed on as copies. Credits (applied after the
    /// read) need no such care.
    fn consume(
        &mut self,
        buf: &[u8],
        start: usize,
        end: usize,
    ) -> Result<(usize, Vec<(usize, usize)>), String> {
        let bytes = buf.get(start..end).unwrap_or_default();
        let mut used = 0;
        let mut spans = Vec::new();
        // Counted once per read, not per packet (the counters are atomics
        // that other threads touch too).
        let (mut packets, mut packet_bytes) = (0u64, 0u64);
        let result = loop {
            let rest = bytes.get(used..).unwrap_or_default();
            let (frame, len) = match split_frame(rest, MAX_BODY) {
                Ok(Some(split)) => split,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let body_at = start + used + (len - frame.body.len());
            used += len;
            if frame.is_packet() && self.writer.is_some() {
                packets += 1;
                packet_bytes += frame.body.len() as u64;
                tracing::trace!(len = frame.body.len(), "link rx");
                if self.admit(encoded::vl(frame.body).unwrap_or(0)) {
                    spans.push((body_at, body_at + frame.body.len()));
                }
                continue;
            }
            let decoded = frame.decode();
            if !matches!(decoded, Ok(Frame::Credit { .. })) {
                self.count_rx(&mut packets, &mut packet_bytes);
                self.pass_copies(buf, &mut spans);
            }
            self.handle(decoded)?;
            if self.switch.is_some() {
                // The rest of the stream is in the ring.
                break Ok(());
            }
        };
        self.count_rx(&mut packets, &mut packet_bytes);
        match result {
            Ok(()) => Ok((used, spans)),
            // Rejects the peer (counted, logged): always an error.
            Err(e) => {
                self.pass_copies(buf, &mut spans);
                self.handle(Err(e)).map(|()| (used, Vec::new()))
            }
        }
    }

    /// Passes the packets at `spans` in `buf` to the sink as copies.
    fn pass_copies(&mut self, buf: &[u8], spans: &mut Vec<(usize, usize)>) {
        if spans.is_empty() {
            return;
        }
        let total = spans.iter().map(|(s, e)| e - s).sum();
        let mut batch = PacketBatch::with_capacity(total);
        for (s, e) in spans.drain(..) {
            batch.push(buf.get(s..e).unwrap_or_default());
        }
        self.ready(&mut batch);
        (self.sink)(LinkRx::Packets(batch));
    }

    /// Passes the packets at `spans` in `buf` to the sink: a read with many
    /// packet bytes hands the buffer itself over (no copy) and goes on in
    /// a spare one from the pool, which starts with the partial frame
    /// `buf[start..end]` (moved to `0..end - start`); a small read copies
    /// its packets (a whole receive buffer per ACK would pin much memory
    /// for little).
    fn deliver(
        &mut self,
        buf: &mut Vec<u8>,
        mut spans: Vec<(usize, usize)>,
        start: &mut usize,
        end: &mut usize,
    ) {
        let total: usize = spans.iter().map(|(s, e)| e - s).sum();
        if total < HANDOVER_MIN {
            self.pass_copies(buf, &mut spans);
            return;
        }
        let len = buf.len();
        let mut next = self.pool.take(len).unwrap_or_else(|| vec![0u8; len]);
        let tail = buf.get(*start..*end).unwrap_or_default();
        if let Some(head) = next.get_mut(..tail.len()) {
            head.copy_from_slice(tail);
        }
        (*start, *end) = (0, tail.len());
        let full = std::mem::replace(buf, next);
        let mut batch = PacketBatch::from_buffer(full, spans, Arc::clone(&self.pool));
        self.ready(&mut batch);
        (self.sink)(LinkRx::Packets(batch));
    }

    /// Adds packets received to the counters (before the sink sees them).
    fn count_rx(&self, packets: &mut u64, bytes: &mut u64) {
        if *packets > 0 {
            let counters = &self.shared.counters;
            add(&counters.rx_packets, std::mem::take(packets));
            add(&counters.rx_bytes, std::mem::take(bytes));
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
                if self.admit(encoded::vl(&packet).unwrap_or(0)) {
                    let mut batch = PacketBatch::default();
                    batch.push(&packet);
                    self.ready(&mut batch);
                    (self.sink)(LinkRx::Packets(batch));
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
            Ok(Frame::RingOffer { capacity }) => {
                if !self.takes_rings() {
                    return reject("RingOffer, but we did not announce shared rings".into());
                }
                if self.input.is_ring() {
                    return reject("second RingOffer".into());
                }
                let fds = self.input.take_fds();
                match pipe::accept(
                    capacity,
                    fds,
                    self.shared.config.rx_spin,
                    Arc::clone(&self.shared.counters),
                ) {
                    Ok(ring) => {
                        self.switch = Some(ring);
                        Ok(())
                    }
                    Err(AcceptError::Peer(e)) => reject(format!("bad RingOffer: {e}")),
                    Err(AcceptError::Local(e)) => {
                        // Not the peer's fault: from the next connection on
                        // we announce no rings, and it writes to the socket.
                        self.shared.rx_rings_refused.store(true, Ordering::Relaxed);
                        tracing::warn!(error = %e, "cannot map the peer's shared ring; reconnecting with its frames on the socket");
                        Err(format!("cannot map the peer's ring: {e}"))
                    }
                }
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
        let capacity = self.shared.config.shared_ring;
        // We offer a ring if the peer takes one; one comes to us only if we
        // announced that we take one.
        let rings = capacity > 0
            && self.stream.carries_files()
            && hello.features & FEATURE_SHARED_RING != 0;
        if !self.takes_rings() {
            // No offer can come: the socket's control messages (and the
            // buffer `recvmsg` allocates for them) are of no use.
            self.input = RxPipe::Plain;
        }
        let output = if rings {
            // Before anything else goes out: the peer reads the rest of our
            // stream from the ring.
            match pipe::offer(self.stream, capacity, Arc::clone(&self.shared.counters)) {
                Ok(ring) => {
                    bump(&self.shared.counters.tx_rings);
                    tracing::debug!(
                        kib = capacity / 1024,
                        "link writes to the peer through a shared ring"
                    );
                    ring
                }
                // A side that does not offer writes to the socket, which
                // the peer reads until an offer comes (none will).
                Err(OfferError::Local(e)) => {
                    tracing::warn!(error = %e, "cannot make a shared ring; the link writes to the socket");
                    TxPipe::Socket(stream)
                }
                Err(e @ OfferError::Send(_)) => return Err(e.to_string()),
            }
        } else {
            TxPipe::Socket(stream)
        };
        let output = Arc::new(output);
        let shared = Arc::clone(self.shared);
        // Senders write directly while the writer sleeps.
        self.conn = self.shared.queue.open(Some(Arc::clone(&output)));
        let writer = thread::Builder::new()
            .name("ibtca-link-tx".into())
            .spawn(move || {
                crate::thread_hook::thread_started(crate::LinkThread::Writer);
                run_writer(&shared.queue, output, &shared.counters)
            });
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
        // Logged once the sink has the event: whoever reads the line and
        // then asks the port's owner (a device's engine, a switch) finds
        // the link up there too.
        (self.sink)(LinkRx::Event(LinkEvent::Up { peer }));
        tracing::info!(
            guid = format_args!("{:#018x}", peer.node_guid),
            port = peer.port,
            lid = peer.lid,
            "link up"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_buffer(s: &LinkSocket) -> usize {
        s.send_buffer_size().unwrap()
    }

    #[test]
    fn the_send_buffer_is_what_the_config_asks_up_to_the_system_cap() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let a = LinkSocket::unix(a);
        let default = send_buffer(&a);
        size_send_buffer(&a, 0);
        assert_eq!(send_buffer(&a), default, "0 keeps the default");
        let Some(cap) = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
        else {
            return;
        };
        size_send_buffer(&a, super::super::SEND_BUFFER);
        // Linux grants min(asked, wmem_max) and reports twice that.
        assert_eq!(send_buffer(&a), 2 * super::super::SEND_BUFFER.min(cap));
    }
}
