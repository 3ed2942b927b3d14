//! PCI configuration space: type-0 header, BAR sizing, the capability list
//! (PCI Express, MSI-X) and per-byte write masks.
//!
//! The space is 4 KiB (PCIe extended configuration); the extended part holds
//! no capabilities, so its first header reads as zero. Accesses of any size
//! and alignment inside the space are served, as the kernel's vfio-pci serves
//! them: split into naturally aligned dwords, words and bytes. No register
//! here has side effects on access, so the split is a byte-wise copy through
//! the write masks.

use crate::pci::PciError;
use crate::regs;

/// Size of the configuration space (PCIe extended).
pub const CONFIG_SPACE_SIZE: usize = 4096;

const COMMAND: usize = 0x04;
const STATUS: usize = 0x06;
const BAR0: usize = 0x10;
const CAP_PTR: usize = 0x34;
const INTERRUPT_LINE: usize = 0x3c;

/// Offset of the PCI Express capability.
pub const PCIE_CAP_OFFSET: usize = 0x40;
/// Offset of the MSI-X capability.
pub const MSIX_CAP_OFFSET: usize = 0x80;

const CAP_ID_PCIE: u8 = 0x10;
const CAP_ID_MSIX: u8 = 0x11;
const STATUS_CAP_LIST: u16 = 1 << 4;

/// Command register: memory space enable.
pub const COMMAND_MEMORY: u16 = 1 << 1;
/// Command register: bus master enable.
pub const COMMAND_BUS_MASTER: u16 = 1 << 2;
/// Command register bits the guest may change (I/O, memory, bus master,
/// parity, SERR, INTx disable).
const COMMAND_WRITABLE: u16 = 0x0547;

/// MSI-X message control: function mask.
pub const MSIX_CTRL_MASKALL: u16 = 1 << 14;
/// MSI-X message control: MSI-X enable.
pub const MSIX_CTRL_ENABLE: u16 = 1 << 15;

/// One BAR as configured by the device.
#[derive(Debug, Clone, Copy)]
pub struct BarSpec {
    /// Size in bytes (a power of two, at least 16), or 0 when absent.
    pub size: u64,
}

/// The device's configuration space.
#[derive(Debug, Clone)]
pub struct ConfigSpace {
    bytes: [u8; CONFIG_SPACE_SIZE],
    /// Bits the guest may change, per byte.
    writable: [u8; CONFIG_SPACE_SIZE],
    bars: [BarSpec; 6],
}

impl ConfigSpace {
    /// Builds the power-on configuration space for ibtca with the given BARs.
    pub fn new(bars: [BarSpec; 6], msix_vectors: u16) -> Self {
        let mut c = ConfigSpace {
            bytes: [0; CONFIG_SPACE_SIZE],
            writable: [0; CONFIG_SPACE_SIZE],
            bars,
        };
        c.put16(0x00, regs::PCI_VENDOR_ID);
        c.put16(0x02, regs::PCI_DEVICE_ID);
        c.put16(STATUS, STATUS_CAP_LIST);
        c.bytes[0x08] = regs::PCI_REVISION;
        c.bytes[0x09] = (regs::PCI_CLASS_CODE & 0xff) as u8;
        c.bytes[0x0a] = ((regs::PCI_CLASS_CODE >> 8) & 0xff) as u8;
        c.bytes[0x0b] = ((regs::PCI_CLASS_CODE >> 16) & 0xff) as u8;
        c.put16(0x2c, regs::PCI_VENDOR_ID); // subsystem vendor
        c.put16(0x2e, regs::PCI_DEVICE_ID); // subsystem
        c.bytes[CAP_PTR] = PCIE_CAP_OFFSET as u8;
        c.writable[COMMAND..COMMAND + 2].copy_from_slice(&COMMAND_WRITABLE.to_le_bytes());
        c.writable[INTERRUPT_LINE] = 0xff;
        // Interrupt pin 0: no INTx, MSI-X only.

        for (i, bar) in bars.iter().enumerate() {
            if bar.size != 0 {
                assert!(bar.size.is_power_of_two() && bar.size >= 16 && bar.size <= 1 << 31);
                let mask = !(bar.size as u32 - 1);
                c.writable[BAR0 + 4 * i..BAR0 + 4 * i + 4].copy_from_slice(&mask.to_le_bytes());
                // 32-bit, non-prefetchable memory BAR: type bits are zero.
            }
        }

        // PCI Express capability, version 2, endpoint, x1 at 2.5 GT/s.
        let p = PCIE_CAP_OFFSET;
        c.bytes[p] = CAP_ID_PCIE;
        c.bytes[p + 1] = MSIX_CAP_OFFSET as u8;
        c.put16(p + 0x02, 0x0002);
        c.put32(p + 0x04, 0x0000_8000); // DevCap: role-based error reporting
        c.writable[p + 0x08] = 0xff; // DevCtl
        c.writable[p + 0x09] = 0x7f;
        c.put32(p + 0x0c, 0x0000_0011); // LinkCap: x1, 2.5 GT/s
        c.put16(p + 0x12, 0x0011); // LinkSta: x1, 2.5 GT/s

        // MSI-X capability, table and PBA in the MSI-X BAR.
        let m = MSIX_CAP_OFFSET;
        c.bytes[m] = CAP_ID_MSIX;
        c.bytes[m + 1] = 0; // end of list
        c.put16(m + 2, msix_vectors - 1);
        c.writable[m + 3] = 0xc0; // enable, function mask
        c.put32(m + 4, regs::MSIX_TABLE_OFFSET as u32 | regs::MSIX_BAR);
        c.put32(m + 8, regs::MSIX_PBA_OFFSET as u32 | regs::MSIX_BAR);
        c
    }

    fn put16(&mut self, off: usize, v: u16) {
        self.bytes[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn put32(&mut self, off: usize, v: u32) {
        self.bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn get16(&self, off: usize) -> u16 {
        u16::from_le_bytes([self.bytes[off], self.bytes[off + 1]])
    }

    /// The start of `len` bytes at `offset`, when they lie inside the space.
    fn check(offset: u64, len: usize) -> Result<usize, PciError> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= CONFIG_SPACE_SIZE as u64 => Ok(offset as usize),
            _ => Err(PciError::OutOfRange { offset, len }),
        }
    }

    /// Reads `data.len()` bytes at `offset`, any size and alignment inside
    /// the space (vfio clients read the whole space at once; vfio-pci lets
    /// a user read 3 bytes at an odd offset and so does this).
    pub fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), PciError> {
        let off = Self::check(offset, data.len())?;
        data.copy_from_slice(&self.bytes[off..off + data.len()]);
        Ok(())
    }

    /// Writes `data` at `offset`, any size and alignment inside the space;
    /// read-only bits keep their value.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), PciError> {
        let off = Self::check(offset, data.len())?;
        for (i, &b) in data.iter().enumerate() {
            let m = self.writable[off + i];
            self.bytes[off + i] = (self.bytes[off + i] & !m) | (b & m);
        }
        Ok(())
    }

    /// The command register.
    pub fn command(&self) -> u16 {
        self.get16(COMMAND)
    }

    /// True when the guest let the device master the bus.
    pub fn bus_master(&self) -> bool {
        self.command() & COMMAND_BUS_MASTER != 0
    }

    /// The MSI-X message control register.
    pub fn msix_control(&self) -> u16 {
        self.get16(MSIX_CAP_OFFSET + 2)
    }

    /// The address programmed into BAR `i` (type bits cleared).
    pub fn bar_address(&self, i: usize) -> u32 {
        u32::from_le_bytes(
            self.bytes[BAR0 + 4 * i..BAR0 + 4 * i + 4]
                .try_into()
                .unwrap(),
        ) & !0xf
    }

    /// The BAR sizes this space was built with.
    pub fn bars(&self) -> &[BarSpec; 6] {
        &self.bars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> ConfigSpace {
        let mut bars = [BarSpec { size: 0 }; 6];
        bars[0].size = 0x1_0000;
        bars[1].size = 0x1000;
        ConfigSpace::new(bars, 32)
    }

    fn r32(c: &ConfigSpace, off: u64) -> u32 {
        let mut b = [0; 4];
        c.read(off, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    #[test]
    fn ids_and_class() {
        let c = space();
        assert_eq!(r32(&c, 0), 0x7ca0_1234);
        assert_eq!(r32(&c, 8) >> 8, 0x0c0600);
    }

    #[test]
    fn bar_sizing_returns_size_mask() {
        let mut c = space();
        c.write(0x10, &[0xff; 4]).unwrap();
        assert_eq!(r32(&c, 0x10), 0xffff_0000);
        c.write(0x14, &[0xff; 4]).unwrap();
        assert_eq!(r32(&c, 0x14), 0xffff_f000);
        c.write(0x18, &[0xff; 4]).unwrap();
        assert_eq!(r32(&c, 0x18), 0, "absent BAR reads zero");
        c.write(0x10, &0xfebc_1234u32.to_le_bytes()).unwrap();
        assert_eq!(c.bar_address(0), 0xfebc_0000);
    }

    #[test]
    fn read_only_fields_stay() {
        let mut c = space();
        c.write(0, &[0; 4]).unwrap();
        assert_eq!(r32(&c, 0), 0x7ca0_1234);
        c.write(4, &0xffffu16.to_le_bytes()).unwrap();
        assert_eq!(c.command(), COMMAND_WRITABLE);
    }

    #[test]
    fn capability_chain() {
        let c = space();
        assert_eq!(c.bytes[CAP_PTR], 0x40);
        assert_eq!(c.bytes[0x40], CAP_ID_PCIE);
        assert_eq!(c.bytes[0x41] as usize, MSIX_CAP_OFFSET);
        assert_eq!(c.bytes[MSIX_CAP_OFFSET], CAP_ID_MSIX);
        assert_eq!(c.msix_control() & 0x7ff, 31);
        assert_eq!(r32(&c, 0x100), 0, "no extended capabilities");
    }

    #[test]
    fn msix_enable_and_mask_writable_size_not() {
        let mut c = space();
        c.write(MSIX_CAP_OFFSET as u64 + 2, &0xffffu16.to_le_bytes())
            .unwrap();
        assert_eq!(c.msix_control(), 0xc000 | 31);
    }

    #[test]
    fn odd_sizes_and_alignments_are_served_inside_the_space() {
        let mut c = space();
        let mut all = [0u8; CONFIG_SPACE_SIZE];
        c.read(0, &mut all).unwrap();
        assert_eq!(all[0..2], regs::PCI_VENDOR_ID.to_le_bytes());
        // 3 bytes at 0, 4 at 2, 8 at 2, 7 at 0x3d: what the whole-space read saw.
        for (off, len) in [(0usize, 3usize), (2, 4), (2, 8), (0x3d, 7), (4095, 1)] {
            let mut b = vec![0; len];
            c.read(off as u64, &mut b).unwrap();
            assert_eq!(b, all[off..off + len], "{len} bytes at {off:#x}");
        }
        // An 8-byte write over BAR0 and BAR1 sizes both, as two dwords would.
        c.write(BAR0 as u64, &[0xff; 8]).unwrap();
        assert_eq!(r32(&c, BAR0 as u64), !(regs::REGS_BAR_SIZE as u32 - 1));
        assert_eq!(r32(&c, BAR0 as u64 + 4), !(regs::MSIX_BAR_SIZE as u32 - 1));
        // A 3-byte write at an odd offset keeps read-only bits (device ID).
        c.write(1, &[0, 0, 0]).unwrap();
        assert_eq!(
            r32(&c, 0),
            all[0..4]
                .iter()
                .rev()
                .fold(0, |v, &b| v << 8 | u32::from(b))
        );
        // Outside the space, or wrapping: refused, nothing changes.
        let mut b4 = [0; 4];
        for (off, len) in [(4094u64, 4usize), (4096, 1), (u64::MAX, 2)] {
            assert!(matches!(
                c.read(off, &mut b4[..len]),
                Err(PciError::OutOfRange { .. })
            ));
            assert!(matches!(
                c.write(off, &b4[..len]),
                Err(PciError::OutOfRange { .. })
            ));
        }
    }
}
