//! Prints a C header generated from the device's single sources of truth:
//! `ibtca-regs-header` → `guest-driver/include/ibtca_regs.h` (BAR0 register map),
//! `ibtca-regs-header abi` → `guest-driver/include/ibtca_abi.h` (verbs ABI).

use clap::{Parser, ValueEnum};
use ibtca_device::cli;

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-regs-header";

/// Prints a C header of the device's interface.
///
/// Generated from the Rust definitions the device itself uses.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Which header: `regs` (BAR0 register map, guest-driver/include/ibtca_regs.h)
    /// or `abi` (verbs ABI, guest-driver/include/ibtca_abi.h).
    #[arg(value_enum, default_value_t = Header::Regs)]
    header: Header,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Header {
    Regs,
    Abi,
}

fn main() {
    let args: Args = cli::parse(NAME);
    match args.header {
        Header::Regs => print!("{}", ibtca_abi::regs::c_header()),
        Header::Abi => print!("{}", ibtca_abi::verbs::c_header()),
    }
}
