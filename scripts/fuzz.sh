#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers and the RC transport (libFuzzer
# through cargo-fuzz, nightly toolchain). Runs every target of fuzz/ for
# SECONDS (default 60) one after the other and fails if any finds a crash.
#
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 600        # 10 min per target
#   scripts/fuzz.sh 30 rc_responder link_frames   # only these targets
#
# New inputs go to fuzz/work/<target>/ (not committed); the committed seeds
# in fuzz/corpus/<target>/ are read, never written. A crash leaves its input
# in fuzz/artifacts/<target>/: add it to fuzz/corpus/<target>/ once fixed,
# so that `cargo test` (stable) replays it from then on.
# Environment: IBTCA_FUZZ_BUILD_ARGS adds cargo-fuzz build options (e.g.
# "-s none" for no AddressSanitizer: a faster build, as CI uses);
# IBTCA_FUZZ_ARGS adds libFuzzer options. Targets run one at a time.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
case "$seconds" in
'' | *[!0-9]*)
	echo "usage: $0 [SECONDS] [TARGET...]" >&2
	exit 2
	;;
esac

if ! cargo +nightly --version >/dev/null 2>&1; then
	echo "fuzz: no nightly toolchain (cargo +nightly fails); install one with" >&2
	echo "      rustup toolchain install nightly" >&2
	exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
	echo "fuzz: installing cargo-fuzz"
	# An unoptimised build of the tool: half the install time, and it only
	# drives cargo and libFuzzer.
	cargo install --locked --debug cargo-fuzz
fi

targets=("$@")
if [ "${#targets[@]}" = 0 ]; then
	mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

cd fuzz
# shellcheck disable=SC2206 # option lists
build_args=(${IBTCA_FUZZ_BUILD_ARGS:-})
# One build for every target: they share the instrumented dependencies.
cargo +nightly fuzz build "${build_args[@]}"
failed=()
for t in "${targets[@]}"; do
	echo "== fuzz $t for ${seconds}s"
	mkdir -p "work/$t"
	# shellcheck disable=SC2086 # IBTCA_FUZZ_ARGS is a list of options
	if ! cargo +nightly fuzz run "${build_args[@]}" "$t" "work/$t" "corpus/$t" -- \
		-max_total_time="$seconds" -print_final_stats=1 ${IBTCA_FUZZ_ARGS:-}; then
		failed+=("$t")
	fi
done
if [ "${#failed[@]}" != 0 ]; then
	echo "fuzz: crashes or invariant violations in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no crash"
