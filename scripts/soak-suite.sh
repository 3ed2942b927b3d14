#!/usr/bin/env bash
# Runs the whole test suite (scripts/test.sh) several times in a row beside
# a CPU hog that keeps every CPU busy, and prints one row per run for
# RELIABILITY.md: the claim that no test flakes on a loaded machine.
#
#   scripts/soak-suite.sh                 # 5 runs, VM tests included
#   scripts/soak-suite.sh --runs 2 --no-vm
#   scripts/soak-suite.sh --help
#
# The hog is one `yes >/dev/null` per CPU at the niceness --hog-nice gives
# (19 by default: the guests' own, since scripts/run-vm.sh runs QEMU at
# nice 19 so that device threads preempt busy-polling guests; a hog above
# them leaves each guest about 1 % of a CPU, and the VM tests then measure
# the hog). Either way the CPUs never idle. Every run
# goes on after a failure (cargo test --no-fail-fast), so a run's row names
# every test that failed in it. Logs: --log-dir (default
# target/soak-suite), one file per run. Exit status: 0 when every run passed,
# 1 when one failed, 2 for a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
me=soak-suite.sh

usage() {
	cat <<EOF
usage: scripts/$me [--runs N] [--no-vm] [--hog-nice N] [--log-dir DIR]

Runs scripts/test.sh N times in a row beside one busy process per CPU and
prints a table row per run (start, duration, load average, result, the
tests that failed).

  --runs N        how many runs (default 5)
  --no-vm         only the no-VM tests (scripts/test.sh --no-vm)
  --hog-nice N    the hog's niceness, 0-19 (default 19: as the guests)
  --log-dir DIR   where each run's log goes (default target/soak-suite)
  -h, --help      this text
EOF
}

die_usage() {
	echo "$me: error: $*" >&2
	echo "try '$me --help'" >&2
	exit 2
}

runs=5
no_vm=()
hog_nice=19
log_dir=
while [ $# -gt 0 ]; do
	case $1 in
	--runs)
		[ $# -ge 2 ] || die_usage "--runs needs a number"
		[[ $2 =~ ^[1-9][0-9]*$ ]] || die_usage "--runs takes a positive number, not '$2'"
		runs=$2
		shift 2
		;;
	--no-vm)
		no_vm=(--no-vm)
		shift
		;;
	--hog-nice)
		[ $# -ge 2 ] || die_usage "--hog-nice needs a number"
		[[ $2 =~ ^[0-9]+$ ]] && [ "$2" -le 19 ] || die_usage "--hog-nice takes 0-19, not '$2'"
		hog_nice=$2
		shift 2
		;;
	--log-dir)
		[ $# -ge 2 ] || die_usage "--log-dir needs a directory"
		log_dir=$2
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) die_usage "unknown argument '$1'" ;;
	esac
done

[ -n "$log_dir" ] || log_dir=target/soak-suite
mkdir -p -- "$log_dir"

# The suite's command; IBTCA_SUITE_CMD replaces it (the script's own test
# runs a stand-in there).
suite=(bash scripts/test.sh "${no_vm[@]}")
if [ -n "${IBTCA_SUITE_CMD:-}" ]; then
	read -r -a suite <<<"$IBTCA_SUITE_CMD"
fi

hogs=()
stop_hogs() {
	local pid
	for pid in "${hogs[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${hogs[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

cpus=$(nproc)
for _ in $(seq "$cpus"); do
	nice -n "$hog_nice" yes >/dev/null &
	hogs+=($!)
done
echo "$me: $cpus CPU hog(s) at nice $hog_nice: pids ${hogs[*]}" >&2
echo "$me: logs in $log_dir" >&2

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
failed_runs=0
rows=()
for i in $(seq "$runs"); do
	log=$log_dir/run-$i.log
	start=$(date -u '+%Y-%m-%d %H:%M')
	t0=$SECONDS
	echo "$me: run $i of $runs started $start UTC (log $log)" >&2
	rc=0
	IBTCA_TEST_NO_FAIL_FAST=1 "${suite[@]}" >"$log" 2>&1 || rc=$?
	took=$((SECONDS - t0))
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	# libtest prints "test NAME ... FAILED" for each failed test.
	failures=$(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | sort -u | paste -sd, - | sed 's/,/, /g')
	if [ "$rc" = 0 ]; then
		result=passed
	else
		result="FAILED (exit $rc)"
		failed_runs=$((failed_runs + 1))
		[ -n "$failures" ] || failures="see $log"
	fi
	row="| $i | $start | $((took / 60))m$(printf '%02d' $((took % 60)))s | $load | $result | ${failures:--} |"
	rows+=("$row")
	echo "$me: $row" >&2
done
stop_hogs

what="the whole suite"
[ ${#no_vm[@]} = 0 ] || what="the no-VM tests"
echo "Commit $commit, $what, $cpus CPU hog(s) at nice $hog_nice."
echo
echo "| run | start (UTC) | duration | load average (1/5/15 min) at the end | result | failed tests |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "$failed_runs of $runs runs failed."
[ "$failed_runs" = 0 ]
