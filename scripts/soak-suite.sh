#!/usr/bin/env bash
# The "tests never flake" check: runs the whole suite (scripts/test.sh)
# N times in a row while a CPU hog keeps every CPU busy (one `yes` per
# CPU, at the tests' own priority), and counts the runs that failed.
#
#   scripts/soak-suite.sh            # 5 runs of scripts/test.sh
#   scripts/soak-suite.sh 3 --no-vm  # 3 runs of scripts/test.sh --no-vm
#
# Each run's output goes to $IBTCA_SOAK_DIR/run-K.log (default
# target/soak-suite); a line per run gives its result and time, then the
# count of failed runs and, for each failed run, its failing tests. The
# tries that failed before one passed (retries) are at the end of each log.
# Exit status: 0 if every run passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
step_name=soak-suite.sh
. scripts/steps.sh

runs=${1:-5}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [RUNS] [TEST.SH ARGS]" >&2; exit 2; }
shift $(($# > 0 ? 1 : 0))
out=${IBTCA_SOAK_DIR:-target/soak-suite}
mkdir -p "$out"

hogs=()
stop_hogs() {
	local p
	for p in "${hogs[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
}
trap stop_hogs EXIT
cpus=$(nproc)
for _ in $(seq "$cpus"); do
	yes >/dev/null &
	hogs+=($!)
done
say "$cpus CPU hogs running (pids ${hogs[*]}); $runs runs of scripts/test.sh $*"

failed=0
for k in $(seq "$runs"); do
	log=$out/run-$k.log
	t0=$SECONDS
	if bash scripts/test.sh "$@" >"$log" 2>&1; then
		result=passed
	else
		result=FAILED
		failed=$((failed + 1))
	fi
	say "run $k of $runs: $result in $(((SECONDS - t0) / 60))m$(((SECONDS - t0) % 60))s ($log)"
	if [ "$result" = FAILED ]; then
		grep -E '^test .* FAILED$|^    [a-z_:0-9]+$|panicked at' "$log" | head -20 >&2 || true
	fi
done
say "$failed of $runs runs failed (beside $cpus CPU hogs)"
[ "$failed" = 0 ]
