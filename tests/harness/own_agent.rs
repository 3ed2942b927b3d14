//! A simulated guest's SMPs to its own port's agent (SMA_MAD), as a local
//! SM's `process_mad` sends them: Get and Set PortInfo and the P_Key
//! table without an SM on the wire.

use ibtca_device::verbs::abi::{CmdMad, CMD_SMA_MAD};
use ibtca_protocol::mad::attr::{id, PKeyTable, PortInfo};
use ibtca_protocol::mad::{method, MadStatus, Smp, SmpRoute};
use vm_memory::ByteValued;

use crate::pair::Side;

/// Entries of one P_KeyTable block.
pub const PKEY_BLOCK: usize = 32;

impl Side {
    /// Sends `smp` to the side's own port agent (SMA_MAD, through the
    /// side's buffer at 8 KiB and 12 KiB); the answer.
    pub fn own_agent(&mut self, smp: &Smp) -> Smp {
        let (mad, reply) = (self.buf + 8192, self.buf + 12288);
        self.g.write(mad, &smp.to_bytes());
        let cmd = CmdMad {
            mad: mad.into(),
            reply: reply.into(),
            ..Default::default()
        };
        let answered = self.g.cmd(CMD_SMA_MAD, cmd.as_slice()).unwrap().0;
        assert_eq!(answered, 1, "the agent answered");
        Smp::parse(&self.g.read(reply, 256)).unwrap()
    }

    /// The port's PortInfo.
    pub fn port_info(&mut self) -> PortInfo {
        let mut get = Smp::new(SmpRoute::Directed, method::GET, id::PORT_INFO, 1);
        get.hop_ptr = 1;
        PortInfo::decode(&self.own_agent(&get).data)
    }

    /// Sets PortInfo (a Set of `info`); the PortInfo the agent answers.
    pub fn set_port_info(&mut self, info: &PortInfo) -> PortInfo {
        let mut set = Smp::new(SmpRoute::Directed, method::SET, id::PORT_INFO, 1);
        set.hop_ptr = 1;
        set.data = info.encode();
        let r = self.own_agent(&set);
        assert_eq!(r.status, MadStatus::OK, "PortInfo Set");
        PortInfo::decode(&r.data)
    }

    /// Sets the port's first P_Key table block to `keys` (the rest of the
    /// block 0), as an SM does.
    pub fn set_pkeys(&mut self, keys: &[u16]) {
        let mut block = [0u16; PKEY_BLOCK];
        block[..keys.len()].copy_from_slice(keys);
        let mut set = Smp::new(SmpRoute::Directed, method::SET, id::P_KEY_TABLE, 0);
        set.hop_ptr = 1;
        set.data = PKeyTable(block).encode();
        let r = self.own_agent(&set);
        assert_eq!(
            (r.status, PKeyTable::decode(&r.data).0),
            (MadStatus::OK, block),
            "P_KeyTable Set"
        );
    }
}
