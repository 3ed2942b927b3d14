//! Bodies of the coverage-guided fuzz targets for the device (the
//! transport's, `rc_responder` and `ud_datagrams`, are `ibtca-transport`'s).
//!
//! The `fuzz/` crate at the repository root (cargo-fuzz, `scripts/fuzz.sh`)
//! hands libFuzzer's inputs to these functions; the unit tests below
//! replay every file of the committed corpus (`fuzz/corpus/<target>/`)
//! through the same functions. Each target takes arbitrary bytes and
//! asserts invariants: a panic here is a bug found, in the code under test
//! or in the invariant. The input cursor and the replay helper are the
//! protocol crate's (`ibtca_protocol::fuzz_targets`).
//!
//! Compiled for tests and with the `fuzzing` feature only.

mod drdma;
mod verbs;
mod vfio_user;

pub use drdma::drdma_window;
pub use verbs::verbs_commands;
pub use vfio_user::vfio_user_wire;

#[cfg(test)]
mod tests {
    use super::*;
    use ibtca_protocol::fuzz_targets::replay_corpus;

    #[test]
    fn vfio_user_wire_corpus_replays() {
        let n = replay_corpus(
            concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
            "vfio_user_wire",
            vfio_user_wire,
        );
        assert!(n > 0);
    }

    #[test]
    fn verbs_commands_corpus_replays() {
        let n = replay_corpus(
            concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
            "verbs_commands",
            verbs_commands,
        );
        assert!(n > 0);
    }

    #[test]
    fn drdma_window_corpus_replays() {
        let n = replay_corpus(
            concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
            "drdma_window",
            drdma_window,
        );
        assert!(n > 0);
    }
}
