//! Bodies of the coverage-guided fuzz targets for the transport.
//!
//! The `fuzz/` crate at the repository root (cargo-fuzz, `scripts/fuzz.sh`)
//! hands libFuzzer's inputs to these functions; the unit tests below
//! replay every file of the committed corpus (`fuzz/corpus/<target>/`)
//! through the same functions. Each target takes arbitrary bytes and
//! asserts invariants: a panic here is a bug found, in the code under test
//! or in the invariant. The input cursor and the replay helper are the
//! protocol crate's (`ibtca_protocol::fuzz_targets`).

mod rc;
mod ud;

pub use rc::rc_responder;
pub use ud::ud_datagrams;

#[cfg(test)]
mod tests {
    use super::*;
    use ibtca_protocol::fuzz_targets::replay_corpus;

    #[test]
    fn ud_datagrams_corpus_replays() {
        let n = replay_corpus(
            concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
            "ud_datagrams",
            ud_datagrams,
        );
        assert!(n > 0);
    }

    #[test]
    fn rc_responder_corpus_replays() {
        let n = replay_corpus(
            concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
            "rc_responder",
            rc_responder,
        );
        assert!(n > 0);
    }
}
