//! Prints a C header generated from the device's single sources of truth:
//! `ibtca-regs-header` → `guest-driver/ibtca_regs.h` (BAR0 register map),
//! `ibtca-regs-header abi` → `guest-driver/ibtca_abi.h` (verbs ABI).

fn main() {
    match std::env::args().nth(1).as_deref() {
        None | Some("regs") => print!("{}", ibtca_device::regs::c_header()),
        Some("abi") => print!("{}", ibtca_device::verbs::abi::c_header()),
        Some(other) => {
            eprintln!("unknown header '{other}': use 'regs' or 'abi'");
            std::process::exit(2);
        }
    }
}
