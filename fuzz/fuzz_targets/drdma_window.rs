//! libFuzzer entry point; the target body and its invariants are
//! `ibtca_device::fuzz_targets::drdma_window`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ibtca_device::fuzz_targets::drdma_window(data));
