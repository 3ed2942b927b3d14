//! The host programs attached to the port, and the requests they wait on.
//!
//! A client is a slot (its id, 0..[`MAX_CLIENTS`]) holding the pid it
//! connected with and whether it is the port's SM. A request a client sends
//! to the fabric is kept under the TID it goes out with: its top 16 bits
//! name the slot (as ibsim does), so the response finds its way back to
//! the client, with the client's own TID restored. A request whose answer
//! does not come in time goes back to its client with status ETIMEDOUT, as
//! the kernel's MAD layer returns a send that got no response: OpenSM and
//! the diagnostics rely on it to give up on a port.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::wire::REQUEST_LEN;

/// Clients one port holds at once (ibsim's `IBSIM_MAX_CLIENTS`).
pub const MAX_CLIENTS: usize = 10;

/// One attached client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    /// The pid it gave at CONNECT (its socket names carry it).
    pub pid: u32,
    /// It is the port's SM: requests to QP0 and QP1 from the fabric go
    /// to it.
    pub issm: bool,
}

/// A request on its way, waiting for its response.
#[derive(Debug, Clone, Copy)]
struct Pending {
    slot: usize,
    /// The client's own TID.
    client_tid: u64,
    deadline: Instant,
    /// Where the request as the client sent it lies in
    /// [`Clients::requests`] (returned on timeout).
    kept: u32,
    /// It left the owner's reach (to a node outside, or to a client):
    /// only its response or its deadline ends it. See
    /// [`Clients::stranded`].
    left: bool,
}

/// The slots and the requests in flight.
#[derive(Debug)]
pub struct Clients {
    slots: [Option<Client>; MAX_CLIENTS],
    /// By the TID a request went out with. The clients choose the TIDs,
    /// so the hash is seeded per process (`foldhash`; with the standard
    /// SipHash, `answered` took 220 instructions a MAD in the hive, with
    /// it 70: callgrind, docs/host-sm.md).
    pending: HashMap<u64, Pending, foldhash::fast::RandomState>,
    /// The requests as their clients sent them, each where its
    /// [`Pending::kept`] says; an answer frees its place without moving
    /// the request (`free`), which a later one takes.
    requests: Vec<[u8; REQUEST_LEN]>,
    free: Vec<u32>,
    timeout: Duration,
}

/// The TID a client's request goes out with: slot `slot` in bits 63:48.
pub fn wire_tid(tid: u64, slot: usize) -> u64 {
    (tid & 0x0000_ffff_ffff_ffff) | ((slot as u64 & 0xffff) << 48)
}

/// The slot a response's TID names.
pub fn slot_of(tid: u64) -> usize {
    (tid >> 48) as usize
}

impl Clients {
    /// No clients; a request waits `timeout` for its response.
    pub fn new(timeout: Duration) -> Self {
        Clients {
            slots: [None; MAX_CLIENTS],
            pending: HashMap::default(),
            requests: Vec::new(),
            free: Vec::new(),
            timeout,
        }
    }

    /// The client in `slot`, if one is attached.
    pub fn get(&self, slot: usize) -> Option<Client> {
        self.slots.get(slot).copied().flatten()
    }

    /// Slots a client holds.
    pub fn attached(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// The slot of the port's SM client.
    pub fn sm(&self) -> Option<usize> {
        self.slots.iter().position(|c| c.is_some_and(|c| c.issm))
    }

    /// Takes a free slot for `client`; `gone(pid)` says whether an
    /// attached client's process has ended, so that its slot is freed
    /// when all are taken (a client killed before DISCONNECT).
    pub fn attach(&mut self, client: Client, gone: impl Fn(u32) -> bool) -> Option<usize> {
        if !self.slots.iter().any(Option::is_none) {
            for slot in 0..MAX_CLIENTS {
                if self.get(slot).is_some_and(|c| gone(c.pid)) {
                    tracing::info!(slot, "client process gone: slot freed");
                    self.detach(slot);
                }
            }
        }
        let slot = self.slots.iter().position(Option::is_none)?;
        self.slots[slot] = Some(client);
        Some(slot)
    }

    /// Frees `slot` and forgets its requests; returns the client it held.
    pub fn detach(&mut self, slot: usize) -> Option<Client> {
        let c = self.slots.get_mut(slot)?.take();
        let free = &mut self.free;
        self.pending.retain(|_, p| {
            if p.slot == slot {
                free.push(p.kept);
            }
            p.slot != slot
        });
        c
    }

    /// Sets whether `slot`'s client is the SM.
    pub fn set_issm(&mut self, slot: usize, issm: bool) {
        if let Some(Some(c)) = self.slots.get_mut(slot) {
            c.issm = issm;
        }
    }

    /// Records `request`, a datagram as the client in `slot` sent it (TID
    /// `client_tid`), as sent with TID `tid` at `now`; `left`: it went
    /// where the owner cannot see it answered or dropped (to another
    /// client).
    pub fn sent(
        &mut self,
        tid: u64,
        slot: usize,
        client_tid: u64,
        request: &[u8; REQUEST_LEN],
        now: Instant,
        left: bool,
    ) {
        let kept = match self.free.pop() {
            Some(i) => {
                if let Some(r) = self.requests.get_mut(i as usize) {
                    r.copy_from_slice(request);
                }
                i
            }
            None => {
                self.requests.push(*request);
                u32::try_from(self.requests.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let pending = Pending {
            slot,
            client_tid,
            deadline: now + self.timeout,
            kept,
            left,
        };
        if let Some(old) = self.pending.insert(tid, pending) {
            // The client reused a TID still in flight: the new request
            // takes its place, the old one's is free.
            self.free.push(old.kept);
        }
    }

    /// How long a request waits for its response from now on.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The request sent with TID `tid`, if one waits, has left the
    /// owner's reach (to a node outside, or to a client).
    pub fn mark_left(&mut self, tid: u64) {
        if let Some(p) = self.pending.get_mut(&tid) {
            p.left = true;
        }
    }

    /// Requests that never left the owner's reach and are unanswered:
    /// each goes back to its slot with status ETIMEDOUT now. An owner
    /// that carries every packet to every node it hosts within one turn
    /// (the hive) calls this at the end of a turn: such a request was
    /// dropped on its way (a link down, a switch that refused it) and
    /// can never be answered, so its client need not wait out the
    /// timeout (as ibsim answers a MAD it cannot deliver at once).
    /// Each is handed to `back` with its slot, as its client sent it.
    pub fn stranded(&mut self, mut back: impl FnMut(usize, &[u8; REQUEST_LEN])) {
        if self.pending.values().all(|p| p.left) {
            return;
        }
        let (requests, free) = (&self.requests, &mut self.free);
        self.pending.retain(|_, p| {
            if p.left {
                return true;
            }
            if let Some(r) = requests.get(p.kept as usize) {
                back(p.slot, r);
            }
            free.push(p.kept);
            false
        });
    }

    /// The response with TID `tid` arrived: the slot that waits for it and
    /// the client's own TID, if one does.
    pub fn answered(&mut self, tid: u64) -> Option<(usize, u64)> {
        let p = self.pending.remove(&tid)?;
        self.free.push(p.kept);
        Some((p.slot, p.client_tid))
    }

    /// Requests whose time ran out by `now`: each goes back to its slot
    /// with status ETIMEDOUT, handed to `back` with its slot, as its
    /// client sent it.
    pub fn expire(&mut self, now: Instant, mut back: impl FnMut(usize, &[u8; REQUEST_LEN])) {
        let (requests, free) = (&self.requests, &mut self.free);
        self.pending.retain(|_, p| {
            if p.deadline > now {
                return true;
            }
            if let Some(r) = requests.get(p.kept as usize) {
                back(p.slot, r);
            }
            free.push(p.kept);
            false
        });
    }

    /// When the next request runs out of time.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SimRequest;

    fn request() -> [u8; REQUEST_LEN] {
        request_of(0)
    }

    /// A request whose MAD's first byte is `tag`.
    fn request_of(tag: u8) -> [u8; REQUEST_LEN] {
        let mut mad = [0; ibtca_protocol::mad::MAD_LEN];
        mad[0] = tag;
        SimRequest::smp(5, mad).to_bytes()
    }

    fn expired(c: &mut Clients, now: Instant) -> Vec<(usize, [u8; REQUEST_LEN])> {
        let mut out = Vec::new();
        c.expire(now, |slot, r| out.push((slot, *r)));
        out
    }

    fn stranded(c: &mut Clients) -> Vec<(usize, [u8; REQUEST_LEN])> {
        let mut out = Vec::new();
        c.stranded(|slot, r| out.push((slot, *r)));
        out
    }

    #[test]
    fn slots_fill_and_dead_clients_make_room() {
        let mut c = Clients::new(Duration::from_millis(10));
        for i in 0..MAX_CLIENTS {
            let pid = 100 + i as u32;
            assert_eq!(c.attach(Client { pid, issm: false }, |_| false), Some(i));
        }
        assert_eq!(
            c.attach(
                Client {
                    pid: 1,
                    issm: false
                },
                |_| false
            ),
            None
        );
        // Pid 103 has exited: its slot is reused.
        assert_eq!(
            c.attach(Client { pid: 1, issm: true }, |p| p == 103),
            Some(3)
        );
        assert_eq!(c.sm(), Some(3));
        assert_eq!(c.detach(3).map(|c| c.pid), Some(1));
        assert_eq!(c.sm(), None);
    }

    #[test]
    fn responses_find_their_slot_and_the_rest_time_out() {
        let mut c = Clients::new(Duration::from_millis(10));
        let t0 = Instant::now();
        let tid = wire_tid(0xabcd_0000_1234_5678, 7);
        assert_eq!(slot_of(tid), 7);
        c.sent(tid, 7, 0xabcd_0000_1234_5678, &request(), t0, true);
        c.sent(wire_tid(1, 2), 2, 1, &request(), t0, true);
        assert_eq!(c.answered(tid), Some((7, 0xabcd_0000_1234_5678)));
        assert_eq!(c.answered(tid), None, "one response per request");
        assert!(expired(&mut c, t0).is_empty());
        assert_eq!(c.next_deadline(), Some(t0 + Duration::from_millis(10)));
        let out = expired(&mut c, t0 + Duration::from_millis(10));
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].0, out[0].1), (2, request()));
        assert_eq!(c.in_flight(), 0);
    }

    #[test]
    fn only_requests_that_never_left_are_stranded() {
        let mut c = Clients::new(Duration::from_secs(3600));
        let t0 = Instant::now();
        c.sent(wire_tid(1, 0), 0, 1, &request(), t0, false);
        c.sent(wire_tid(2, 0), 0, 2, &request(), t0, false);
        c.sent(wire_tid(3, 1), 1, 3, &request(), t0, true);
        c.mark_left(wire_tid(2, 0));
        let out = stranded(&mut c);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].0, out[0].1), (0, request()));
        assert_eq!(c.in_flight(), 2);
        assert!(stranded(&mut c).is_empty());
        assert_eq!(c.answered(wire_tid(2, 0)), Some((0, 2)));
    }

    #[test]
    fn an_answered_requests_place_is_taken_by_the_next_and_each_returns_as_sent() {
        let mut c = Clients::new(Duration::from_millis(10));
        let t0 = Instant::now();
        c.sent(wire_tid(1, 0), 0, 1, &request_of(1), t0, true);
        c.sent(wire_tid(2, 1), 1, 2, &request_of(2), t0, true);
        assert_eq!(c.answered(wire_tid(1, 0)), Some((0, 1)));
        // The third takes the first's place; the second is where it was.
        c.sent(wire_tid(3, 2), 2, 3, &request_of(3), t0, true);
        assert_eq!(c.requests.len(), 2, "the answered one's place reused");
        // A TID sent again replaces its request, whose place is freed.
        c.sent(wire_tid(2, 1), 1, 2, &request_of(4), t0, true);
        let mut out = expired(&mut c, t0 + Duration::from_millis(10));
        out.sort_by_key(|(slot, _)| *slot);
        assert_eq!(out, vec![(1, request_of(4)), (2, request_of(3))]);
        assert_eq!(c.free.len(), 3);
    }
}
