//! Prints the guest driver's C register header generated from
//! `ibtca_device::regs` (see `guest-driver/ibtca_regs.h`).

fn main() {
    print!("{}", ibtca_device::regs::c_header());
}
