//! What a hosted host port counts of its clients' traffic, and the line
//! the hive logs of it when a client detaches and at exit: the MADs the
//! clients sent (by class, attribute and method), where they went, the
//! answers, the system calls that read the MADs and that sent the
//! answers (and how many MADs each `sendmmsg(2)` carried), and what was
//! lost and why. `scripts/bench-host-sm.sh` reads the line after each OpenSM
//! sweep.

use std::collections::BTreeMap;
use std::fmt::{self, Write};

use ibtca_simport::port::PortCounts;

/// The batch sizes [`ClientSends::batches`] counts: 1, 2, 3, 4, 5-8 and
/// more than 8 MADs in one system call.
pub const BATCH_BUCKETS: [&str; 6] = ["1", "2", "3", "4", "5-8", ">8"];

/// What the port read from its clients' data sockets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientReads {
    /// Datagrams read.
    pub mads: u64,
    /// `recvmmsg(2)` calls that read them (one per readable socket a
    /// turn, or an empty one).
    pub calls: u64,
    /// Of the datagrams, those read right after an answer to the client,
    /// without a `poll(2)` (`HostedSim::read_ahead`).
    pub ahead: u64,
}

/// What the port sent its clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientSends {
    /// MADs the clients' sockets took.
    pub mads: u64,
    /// System calls that carried them.
    pub calls: u64,
    /// System calls by how many MADs they were given ([`BATCH_BUCKETS`]).
    pub batches: [u64; 6],
    /// MADs for a client that it never got: its socket full and no room
    /// left to keep them, or kept for it when it left.
    pub lost: u64,
}

impl ClientSends {
    /// One system call given `offered` MADs, of which the socket took
    /// `taken`.
    pub fn record(&mut self, offered: usize, taken: usize) {
        self.calls += 1;
        self.mads += taken as u64;
        let bucket = match offered {
            0..=4 => offered.saturating_sub(1),
            5..=8 => 4,
            _ => 5,
        };
        self.batches[bucket] += 1;
    }
}

/// The counters of one host port, as the log line shows them.
pub struct Counters<'a> {
    /// The port's own counters.
    pub port: PortCounts,
    /// What was read from the clients.
    pub reads: ClientReads,
    /// What went to the clients.
    pub sends: ClientSends,
    /// The clients' MADs by (class, attribute, method).
    pub kinds: &'a BTreeMap<(u8, u16, u8), u64>,
}

/// `requests=N to_link=N local=N answers=N timed_out=N undeliverable=N
/// dropped=N received=N recvs=N ahead=N sent=N
/// sends=N lost=N batches=1:N,2:N,3:N,4:N,5-8:N,>8:N
/// kinds=CLASS/ATTR/METHOD:N,...[,other:N]` (hex class, attribute and
/// method; `other`: kinds past the port's table, `MAX_REQUEST_KINDS`).
impl fmt::Display for Counters<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (p, r, s) = (&self.port, &self.reads, &self.sends);
        write!(
            f,
            "requests={} to_link={} local={} answers={} timed_out={} undeliverable={} \
             dropped={} received={} recvs={} ahead={} sent={} sends={} lost={} batches=",
            p.requests,
            p.to_link,
            p.local,
            p.to_clients,
            p.timed_out,
            p.undeliverable,
            p.dropped,
            r.mads,
            r.calls,
            r.ahead,
            s.mads,
            s.calls,
            s.lost
        )?;
        for (i, (name, n)) in BATCH_BUCKETS.iter().zip(s.batches).enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{name}:{n}")?;
        }
        f.write_str(" kinds=")?;
        let mut kinds = String::new();
        for ((class, attr, method), n) in self.kinds {
            let sep = if kinds.is_empty() { "" } else { "," };
            let _ = write!(kinds, "{sep}{class:02x}/{attr:04x}/{method:02x}:{n}");
        }
        if self.port.other_kinds > 0 {
            let sep = if kinds.is_empty() { "" } else { "," };
            let _ = write!(kinds, "{sep}other:{}", self.port.other_kinds);
        }
        f.write_str(if kinds.is_empty() { "-" } else { &kinds })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_fall_in_their_buckets_and_the_line_names_each() {
        let mut s = ClientSends::default();
        for n in [1, 2, 3, 4, 4, 5, 8, 9, 40] {
            s.record(n, n);
        }
        s.record(40, 11);
        assert_eq!(s.batches, [1, 1, 1, 2, 2, 3]);
        assert_eq!((s.calls, s.mads), (10, 76 + 11));
        let mut kinds = BTreeMap::new();
        kinds.insert((0x81, 0x11, 0x01), 7);
        kinds.insert((0x81, 0x15, 0x02), 3);
        let line = Counters {
            port: PortCounts {
                requests: 10,
                ..PortCounts::default()
            },
            reads: ClientReads {
                mads: 9,
                calls: 4,
                ahead: 2,
            },
            sends: s,
            kinds: &kinds,
        }
        .to_string();
        assert!(line.starts_with("requests=10 to_link=0 "), "{line}");
        assert!(
            line.contains(
                " received=9 recvs=4 ahead=2 sent=87 sends=10 lost=0 batches=1:1,2:1,3:1,4:2,5-8:2,>8:3 "
            ),
            "{line}"
        );
        assert!(line.ends_with(" kinds=81/0011/01:7,81/0015/02:3"), "{line}");
        let capped = Counters {
            port: PortCounts {
                other_kinds: 5,
                ..PortCounts::default()
            },
            reads: ClientReads {
                mads: 9,
                calls: 4,
                ahead: 2,
            },
            sends: s,
            kinds: &kinds,
        }
        .to_string();
        assert!(
            capped.ends_with(" kinds=81/0011/01:7,81/0015/02:3,other:5"),
            "{capped}"
        );
    }
}
