//! Bodies of the coverage-guided fuzz targets for the wire format.
//!
//! The `fuzz/` crate at the repository root (cargo-fuzz, `scripts/fuzz.sh`)
//! hands libFuzzer's inputs to these functions; the unit test below
//! replays every file of the committed corpus (`fuzz/corpus/<target>/`)
//! through the same functions. Each target takes arbitrary bytes and asserts
//! invariants with `assert!`: a panic here is a bug found, in the code under
//! test or in the invariant.
//!
//! Compiled for tests and with the `fuzzing` feature only.

mod atm;
mod input;
mod link;
mod mad;
mod packet;

pub use atm::atm_cells;
pub use input::Input;
pub use link::link_frames;
pub use mad::mad;
pub use packet::ib_packet;

/// Runs `target` on every file of `fuzz/corpus/<name>/` (relative to the
/// workspace root `manifest_dir/..`); returns how many files it replayed.
/// Panics if the directory is missing or empty, so that a lost corpus fails
/// the test instead of passing it.
pub fn replay_corpus(manifest_dir: &str, name: &str, target: fn(&[u8])) -> usize {
    let dir = std::path::Path::new(manifest_dir)
        .join("../fuzz/corpus")
        .join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    for file in &files {
        let data = std::fs::read(file).expect("corpus file");
        // Name the input before a failing assertion reports it.
        eprintln!("replaying {}", file.display());
        target(&data);
    }
    files.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ib_packet_corpus_replays() {
        assert!(replay_corpus(env!("CARGO_MANIFEST_DIR"), "ib_packet", ib_packet) > 0);
    }

    #[test]
    fn atm_cells_corpus_replays() {
        assert!(replay_corpus(env!("CARGO_MANIFEST_DIR"), "atm_cells", atm_cells) > 0);
    }

    #[test]
    fn mad_corpus_replays() {
        assert!(replay_corpus(env!("CARGO_MANIFEST_DIR"), "mad", mad) > 0);
    }

    /// The `mad` target's invariants over deterministic mutations of its
    /// corpus (directed-route fields, hop pointers and counts, DrSLID and
    /// DrDLID, PM data), without a fuzzer.
    #[test]
    fn mad_target_holds_under_corpus_mutations() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/mad");
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for entry in std::fs::read_dir(dir).expect("corpus") {
            let base = std::fs::read(entry.expect("entry").path()).expect("file");
            for _ in 0..2000 {
                let mut data = base.clone();
                for _ in 0..1 + next() % 4 {
                    if data.is_empty() {
                        break;
                    }
                    // Mostly the knobs and the header/DR fields.
                    let at = (next() % (data.len().min(48) as u64)) as usize;
                    data[at] = next() as u8;
                }
                mad(&data);
            }
        }
    }

    #[test]
    fn link_frames_corpus_replays() {
        assert!(replay_corpus(env!("CARGO_MANIFEST_DIR"), "link_frames", link_frames) > 0);
    }
}
