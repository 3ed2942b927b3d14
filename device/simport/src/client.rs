//! A client of a host port as Debian's libumad2sim makes one: a data and a
//! control socket in the abstract namespace named after its process
//! (`BASE:inPID`, `BASE:ctlPID`), a CONNECT on the port's control socket,
//! then MADs in [`SimRequest`] envelopes on the data socket, connected to
//! the slot the CONNECT's answer names (`BASE:outSLOT`). The tests of the
//! port and of the hive drive a port with it; one client per process and
//! base name at a time, as the socket names allow.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use ibtca_protocol::mad::Smp;

use crate::sockets::abstract_addr;
use crate::wire::{ClientInfo, Ctl, CtlType, SimRequest, REQUEST_LEN};

/// An attached client: its data socket, connected to its slot's.
pub struct SimClient {
    data: UnixDatagram,
    slot: u32,
}

impl SimClient {
    /// Attaches to the port of base name `base` as this process, not as
    /// an SM; waits up to `wait` for the CONNECT's answer, and each
    /// [`SimClient::recv`] as long. The port must be served meanwhile (by
    /// another thread or process).
    pub fn connect(base: &str, wait: Duration) -> io::Result<SimClient> {
        let pid = std::process::id();
        let data = UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:in{pid}"))?)?;
        let ctl = UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:ctl{pid}"))?)?;
        ctl.set_read_timeout(Some(wait))?;
        let connect = Ctl::connect(&ClientInfo {
            id: pid,
            qp: 0,
            issm: false,
            node_id: String::new(),
        });
        ctl.send_to_addr(&connect.to_bytes(), &abstract_addr(&format!("{base}:ctl"))?)?;
        let mut buf = [0u8; 1024];
        let n = ctl.recv(&mut buf)?;
        let answer = Ctl::parse(&buf[..n])
            .ok_or_else(|| invalid(format!("a CONNECT answer of {n} bytes")))?;
        if answer.kind != CtlType::Connect.to_wire() {
            return Err(invalid(format!(
                "CONNECT answered with type {}",
                answer.kind
            )));
        }
        data.connect_addr(&abstract_addr(&format!("{base}:out{}", answer.client_id))?)?;
        data.set_read_timeout(Some(wait))?;
        Ok(SimClient {
            data,
            slot: answer.client_id,
        })
    }

    /// The slot the port gave this client.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The data socket, connected to the slot's.
    pub fn data(&self) -> &UnixDatagram {
        &self.data
    }

    /// Sends `smp` to `dlid` (the permissive LID for a directed route).
    pub fn send_smp(&self, dlid: u16, smp: &Smp) -> io::Result<()> {
        let req = SimRequest::smp(dlid, smp.to_bytes());
        self.data.send(&req.to_bytes())?;
        Ok(())
    }

    /// The next envelope the port sends this client (an answer, or a
    /// timed-out request with its status), waiting as long as
    /// [`SimClient::connect`] said.
    pub fn recv(&self) -> io::Result<SimRequest> {
        let mut buf = [0u8; 1024];
        let n = self.data.recv(&mut buf)?;
        if n != REQUEST_LEN {
            return Err(invalid(format!("an envelope of {n} bytes")));
        }
        SimRequest::parse(&buf[..n])
            .ok_or_else(|| invalid("an envelope that does not parse".into()))
    }
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}
