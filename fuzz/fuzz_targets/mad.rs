//! libFuzzer entry point; the target body and its invariants are
//! `ibtca_protocol::fuzz_targets::mad`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ibtca_protocol::fuzz_targets::mad(data));
