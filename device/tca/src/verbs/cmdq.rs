//! The command queue: a ring of `struct ibtca_cmd` in guest memory, set up
//! through BAR0 (CMDQ_BASE_LO/HI, then CMDQ_LOG_SIZE, which (re)starts it
//! at index 0) and fed through CMDQ_DB with the driver's producer index.
//!
//! For each new entry the device reads it whole, runs it (`commands.rs`),
//! writes `out0`/`out1` (a query also its reply over the parameters), then
//! `status` (a positive errno or 0), and raises
//! MSI-X vector 0 once per batch if any completed entry asked for it with
//! IBTCA_CMD_F_IRQ. An entry the device cannot read or write is logged,
//! counted and skipped. A doorbell more than a ring's worth ahead of the
//! device (or behind it) is logged, counted and ignored.

use std::sync::atomic::{fence, Ordering};

use vm_memory::ByteValued;

use super::abi::{CmdEntry, CMD_F_IRQ};
use super::commands::{execute, status_of, EngineCommands, NoEngineCommands};
use super::ring::Ring;
use super::Verbs;
use crate::dma::GuestMemory;

/// Largest log2 number of command entries.
pub const MAX_CMDQ_LOG: u8 = 12;

/// The MSI-X vector of the command queue.
pub const CMDQ_VECTOR: u8 = 0;

const STATUS_OFFSET: u64 = std::mem::offset_of!(CmdEntry, status) as u64;
const OUT_OFFSET: usize = std::mem::offset_of!(CmdEntry, out0);
const PARAMS_OFFSET: usize = std::mem::offset_of!(CmdEntry, params);

/// Counters for tests and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmdqStats {
    /// Commands that completed with status 0.
    pub ok: u64,
    /// Commands that completed with an errno.
    pub failed: u64,
    /// Entries that could not be read or written.
    pub faults: u64,
    /// Doorbells ignored (queue not set up, index out of range).
    pub bad_doorbells: u64,
}

/// The command queue's registers and indexes.
#[derive(Debug, Default)]
pub struct CmdQueue {
    base_lo: u32,
    base_hi: u32,
    log_size: u32,
    ring: Option<Ring>,
    pi: u32,
    ci: u32,
    stats: CmdqStats,
}

impl CmdQueue {
    /// A queue that is not set up.
    pub fn new() -> Self {
        Self::default()
    }

    /// CMDQ_BASE_LO.
    pub fn base_lo(&self) -> u32 {
        self.base_lo
    }

    /// CMDQ_BASE_HI.
    pub fn base_hi(&self) -> u32 {
        self.base_hi
    }

    /// CMDQ_LOG_SIZE.
    pub fn log_size(&self) -> u32 {
        self.log_size
    }

    /// Writes CMDQ_BASE_LO (takes effect at the next CMDQ_LOG_SIZE write).
    pub fn write_base_lo(&mut self, v: u32) {
        self.base_lo = v;
    }

    /// Writes CMDQ_BASE_HI (takes effect at the next CMDQ_LOG_SIZE write).
    pub fn write_base_hi(&mut self, v: u32) {
        self.base_hi = v;
    }

    /// Writes CMDQ_LOG_SIZE: (re)starts the queue at index 0 with the
    /// current base. A size above 2^[`MAX_CMDQ_LOG`], or a base that is not
    /// 64-byte aligned or runs the ring off the address space, leaves the
    /// queue stopped (false).
    pub fn write_log_size(&mut self, v: u32) -> bool {
        self.log_size = v;
        (self.pi, self.ci) = (0, 0);
        let base = u64::from(self.base_hi) << 32 | u64::from(self.base_lo);
        let log = u8::try_from(v).unwrap_or(u8::MAX);
        self.ring = Ring::new(base, log, size_of::<CmdEntry>() as u64, MAX_CMDQ_LOG).ok();
        if self.ring.is_none() {
            crate::guest_warn!(base, log = v, "command queue set-up refused");
        }
        self.ring.is_some()
    }

    /// True when the queue is set up.
    pub fn is_running(&self) -> bool {
        self.ring.is_some()
    }

    /// Counters.
    pub fn stats(&self) -> CmdqStats {
        self.stats
    }

    /// CMDQ_DB: the driver's new producer index.
    pub fn doorbell(&mut self, pi: u32) {
        let ok = self.ring.is_some_and(|r| {
            let outstanding = pi.wrapping_sub(self.ci);
            outstanding <= r.entries() && pi.wrapping_sub(self.pi) <= outstanding
        });
        if ok {
            self.pi = pi;
        } else {
            self.stats.bad_doorbells += 1;
            crate::guest_warn!(pi, old = self.pi, ci = self.ci, "command doorbell ignored");
        }
    }

    /// Runs every command between the consumer and producer index; returns
    /// the MSI-X vectors to raise.
    pub fn process(&mut self, mem: &GuestMemory, verbs: &mut Verbs) -> Vec<u8> {
        self.process_with(mem, verbs, &mut NoEngineCommands)
    }

    /// [`Self::process`], with the commands that need more than the verbs
    /// objects run by `engine` (see [`EngineCommands`]).
    pub fn process_with(
        &mut self,
        mem: &GuestMemory,
        verbs: &mut Verbs,
        engine: &mut dyn EngineCommands,
    ) -> Vec<u8> {
        let Some(ring) = self.ring else {
            return Vec::new();
        };
        let mut irq = false;
        while self.ci != self.pi {
            let addr = ring.slot_addr(self.ci);
            self.ci = self.ci.wrapping_add(1);
            let mut e = CmdEntry::default();
            if let Err(err) = mem.read(addr, e.as_mut_slice()) {
                self.stats.faults += 1;
                crate::guest_warn!(addr, error = %err, "command entry unreadable, skipped");
                continue;
            }
            let (status, reply) = match engine.run(mem, e.opcode, &e.params) {
                Some(res) => status_of(res),
                None => {
                    let (status, mut reply) = execute(verbs, mem, e.opcode, &e.params);
                    if let Some(r) = reply.as_mut() {
                        engine.amend(e.opcode, &e.params, r);
                    }
                    (status, reply)
                }
            };
            if status == 0 {
                self.stats.ok += 1;
            } else {
                self.stats.failed += 1;
            }
            let reply = reply.unwrap_or_default();
            e.out0 = reply.out0.into();
            e.out1 = reply.out1.into();
            // A query's reply goes over the parameters, with the
            // out-parameters, in one write before the status.
            let from = match reply.data {
                Some(data) => {
                    e.params = data;
                    PARAMS_OFFSET
                }
                None => OUT_OFFSET,
            };
            let res = mem.write(addr + from as u64, &e.as_slice()[from..]);
            // The driver polls status: it must not see it before out0/out1.
            fence(Ordering::Release);
            let res = res.and_then(|()| mem.store_u16(addr + STATUS_OFFSET, status));
            if let Err(err) = res {
                self.stats.faults += 1;
                crate::guest_warn!(addr, error = %err, "command result not written");
                continue;
            }
            irq |= e.flags & CMD_F_IRQ != 0;
        }
        if irq {
            vec![CMDQ_VECTOR]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
#[path = "cmdq_tests.rs"]
mod tests;
