#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers and the RC transport (libFuzzer,
# the cargo-fuzz crate layout) on the stable toolchain. Runs every target of
# fuzz/ for SECONDS (default 60) one after the other, prints each target's
# execution count and rate, and fails if any finds a crash.
#
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 600        # 10 min per target
#   scripts/fuzz.sh 30 rc_responder link_frames   # only these targets
#   IBTCA_FUZZ_ARGS=-runs=10000000 scripts/fuzz.sh 1800   # 10M executions
#   scripts/fuzz.sh --changed-longer 45 15   # CI: 15 s each, 45 s for a
#                                            # target whose code changed
#
# --changed-longer S: a target whose sources (fuzz/long-runs.tsv) changed
# since its last long run, or that has none, runs S seconds instead. Hunks
# whose lines are all `//` comments or blank do not count as a change.
#
# The targets build with plain cargo and the instrumentation cargo-fuzz
# 0.13 passes rustc for `-s none` (sancov, a stable -C option; `--cfg
# fuzzing`; debug assertions and overflow checks on), into the directory
# cargo-fuzz uses (fuzz/target/TRIPLE/release/), so `cargo fuzz run
# TARGET` works beside this script and nothing has to be installed first.
# RUSTC_BOOTSTRAP=1 lets IBTCA_FUZZ_RUSTFLAGS carry -Z options on stable;
# the targets are safe Rust, no sanitizer, and the invariants are checked
# by assertions.
#
# New inputs go to fuzz/work/<target>/ (not committed), libFuzzer's output
# to fuzz/work/<target>.log; the committed seeds in fuzz/corpus/<target>/
# are read, never written. A crash leaves its input in
# fuzz/artifacts/<target>/: add it to fuzz/corpus/<target>/ once fixed, so
# that `cargo test` replays it from then on.
#
# Each run ends as one of: "no crash" (libFuzzer's time or -runs limit);
# "crash", "timeout" or "out of memory" (libFuzzer wrote a crash-,
# timeout- or oom- input to fuzz/artifacts/<target>/); "stopped" (the run
# was interrupted by hand: SIGINT or SIGTERM, libFuzzer's "run
# interrupted", no input written); "failed (exit N)" for anything else.
# The script exits 1 if any run crashed, timed out, ran out of memory or
# failed; "stopped" runs are listed but are no failure. A SIGINT or
# SIGTERM to the script itself stops it after the current target (which
# gets the signal too when it comes from the terminal or a process-group
# kill) and makes it exit 130.
# Environment: IBTCA_FUZZ_RUSTFLAGS adds rustc options (e.g.
# "-Zsanitizer=address" for an ASan build); IBTCA_FUZZ_ARGS adds libFuzzer
# options. Targets run one at a time. IBTCA_FUZZ_BIN_DIR: run the fuzzer
# binaries found there instead of building them (tests of this script).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	echo "usage: $0 [--changed-longer SECONDS] [SECONDS] [TARGET...]" >&2
	exit 2
}
longer=""
if [ "${1:-}" = --changed-longer ]; then
	longer="${2:-}"
	shift 2 || usage
	case "$longer" in '' | *[!0-9]*) usage ;; esac
fi
seconds="${1:-60}"
shift || true
case "$seconds" in
'' | *[!0-9]*) usage ;;
esac

# A line that is blank or only a `//` comment. git matches -I against each
# line with its newline, under REG_NEWLINE: a pattern that can match empty
# at the end (`...$`) would match every line, so this one ends in the
# newline itself.
comment_or_blank=$'^[[:blank:]]*(//.*)?\n'

# seconds_for TARGET: the base time, or the longer one when the target's
# sources changed since the commit of its last long run (or it has none).
seconds_for() {
	local t=$1 row commit
	[ -n "$longer" ] || { echo "$seconds"; return; }
	row=$(awk -F '\t' -v t="$t" '$1 == t { print; exit }' fuzz/long-runs.tsv)
	commit=$(printf '%s' "$row" | cut -f2)
	# shellcheck disable=SC2046 # the sources are a list of paths
	if [ -n "$row" ] && [ "$commit" != - ] &&
		git cat-file -e "$commit^{commit}" 2>/dev/null &&
		git diff --quiet -I "$comment_or_blank" "$commit" HEAD -- $(printf '%s' "$row" | cut -f3); then
		echo "$seconds"
	else
		echo "fuzz: $t changed since its last long run (${commit:-none}): ${longer}s" >&2
		echo "$longer"
	fi
}

targets=("$@")
if [ "${#targets[@]}" = 0 ]; then
	# The [[bin]] names of fuzz/Cargo.toml, in file order.
	mapfile -t targets < <(awk '/^\[\[bin\]\]/ { b = 1; next } /^\[/ { b = 0 }
		b && /^name *=/ { gsub(/^name *= *"|"$/, ""); print }' fuzz/Cargo.toml)
fi

declare -A run_seconds
for t in "${targets[@]}"; do
	run_seconds[$t]=$(seconds_for "$t")
done

cd fuzz
if [ -n "${IBTCA_FUZZ_BIN_DIR:-}" ]; then
	bin=$IBTCA_FUZZ_BIN_DIR
else
	export RUSTC_BOOTSTRAP=1
	triple=$(rustc -vV | sed -n 's/^host: //p')
	# One build for every target: they share the instrumented dependencies.
	# The flags apply to the target only (--target), not to build scripts.
	RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cllvm-args=-sanitizer-coverage-stack-depth \
-Cdebug-assertions -Coverflow-checks ${IBTCA_FUZZ_RUSTFLAGS:-}" \
		cargo build --release --bins --target "$triple"
	bin="target/$triple/release"
fi

# run_result RC LOG: how the run ended (see the header). The input
# libFuzzer wrote ("Test unit written to artifacts/TARGET/crash-...")
# names the failure; with none, libFuzzer's exit code for an interrupted
# run (72, after "run interrupted") means stopped by hand.
run_result() {
	local rc=$1 log=$2 unit
	[ "$rc" = 0 ] && { echo "no crash"; return; }
	unit=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
	case "${unit##*/}" in
	crash-* | leak-*) echo "crash" ;;
	timeout-*) echo "timeout" ;;
	oom-*) echo "out of memory" ;;
	'')
		if [ "$rc" = 72 ] && grep -q 'libFuzzer: run interrupted' "$log"; then
			echo "stopped"
		else
			echo "failed (exit $rc)"
		fi
		;;
	*) echo "failed (exit $rc, $unit)" ;;
	esac
}

interrupted=""
trap 'interrupted=1' INT TERM
failed=()
stopped=()
for t in "${targets[@]}"; do
	[ -z "$interrupted" ] || break
	echo "== fuzz $t for ${run_seconds[$t]}s"
	mkdir -p "work/$t" "artifacts/$t"
	log="work/$t.log"
	start=$(date +%s)
	rc=0
	# shellcheck disable=SC2086 # IBTCA_FUZZ_ARGS is a list of options
	"$bin/$t" -artifact_prefix="artifacts/$t/" "work/$t" "corpus/$t" \
		-max_total_time="${run_seconds[$t]}" -print_final_stats=1 ${IBTCA_FUZZ_ARGS:-} >"$log" 2>&1 || rc=$?
	result=$(run_result "$rc" "$log")
	case "$result" in
	"no crash") ;;
	stopped) stopped+=("$t") ;;
	*)
		failed+=("$t")
		tail -n 40 "$log"
		;;
	esac
	elapsed=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	corpus=$(find "work/$t" -type f | wc -l)
	echo "fuzz: $t: ${execs:-?} executions in ${elapsed} s (${rate:-?}/s)," \
		"$corpus inputs in fuzz/work/$t, $result (log: fuzz/$log)"
done
if [ "${#stopped[@]}" != 0 ]; then
	echo "fuzz: stopped by hand (no input written): ${stopped[*]}" >&2
fi
if [ "${#failed[@]}" != 0 ]; then
	echo "fuzz: crashes, timeouts or invariant violations in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
	exit 1
fi
if [ -n "$interrupted" ]; then
	echo "fuzz: interrupted; targets after the current one did not run" >&2
	exit 130
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each${longer:+ (${longer}s if changed)}, no crash"
