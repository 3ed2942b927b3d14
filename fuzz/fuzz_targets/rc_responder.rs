//! libFuzzer entry point; the target body and its invariants are
//! `ibtca_transport::fuzz_targets::rc_responder`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ibtca_transport::fuzz_targets::rc_responder(data));
