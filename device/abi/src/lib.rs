//! The ABI the ibtca device shares with its guest driver, and nothing that
//! needs a device: the BAR0 register map ([`regs`]), the verbs structures
//! the driver lays out in guest memory (command entries, WQEs, CQEs,
//! quasi-WQEs: [`verbs`]; the commands' parameter blocks: [`params`]) with the layout description the C headers are
//! generated from ([`layout`]), and the QP types and states as the ABI
//! numbers them ([`qp`]), and a receive and a send WQE of any stride as
//! the device reads them ([`recv`], [`send`]). `ibtca-regs-header`
//! renders [`regs`] and [`verbs`] as `guest-driver/include/ibtca_regs.h` and `ibtca_abi.h`.
#![deny(missing_docs)]

pub mod layout;
pub mod params;
pub mod qp;
pub mod recv;
pub mod regs;
pub mod send;
pub mod verbs;
