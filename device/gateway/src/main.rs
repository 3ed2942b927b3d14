//! `ibtca-gateway`: see the crate documentation.
fn main() {}
