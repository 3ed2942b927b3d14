#!/usr/bin/env bash
# Guestless fat trees at rest, measured (BENCHMARKS.md, "Guestless nodes in
# one process"; docs/hive.md, "Measured"). One of:
#
#   scripts/bench-fabric-up.sh [--process-per-node] [--idle S] RADIX [PODS]
#       `ibtca-fabric up --net` of `scripts/fat-tree-net.sh RADIX [PODS]`
#       (no SM, no guests; `up` returns once every port is up): the wall
#       seconds of `up`, and at the end those of `down`;
#   scripts/bench-fabric-up.sh --hive [--routes] [--idle S] RADIX
#       one `ibtca-hive --config` of `scripts/fat-tree-hive.sh RADIX` (every
#       node hosted, leaf1's port 1 listening for an SM that never comes;
#       --routes: ROUTES=1, every switch's forwarding table as full as an
#       SM makes it), measured once it logs "hive started";
#
# and then, for either, one line: the processes and their threads
# (/proc/PID/status), idle CPU (utime+stime of every process over S
# seconds with no traffic, default 30) and RSS and PSS summed over the
# processes' /proc/PID/smaps_rollup at the end of those seconds.
#
#   scripts/bench-fabric-up.sh 36                       # 648 CAs, one hive
#   scripts/bench-fabric-up.sh --process-per-node 36    # 702 processes
#   scripts/bench-fabric-up.sh --hive --routes 152      # 11,551 CAs
#
# The binaries come from $CARGO_TARGET_DIR/release (or target/release),
# or IBTCA_FABRIC and IBTCA_HIVE: `cargo build --release` first.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
bad() {
	echo "bench-fabric-up.sh: error: $*" >&2
	echo "usage: scripts/bench-fabric-up.sh [--process-per-node | --hive [--routes]] [--idle S] RADIX [PODS] (--help)" >&2
	exit 2
}

ppn=() hive='' routes='' idle=30
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	--process-per-node) ppn=(--process-per-node); shift ;;
	--hive) hive=1; shift ;;
	--routes) routes=1; shift ;;
	--idle)
		[ $# -ge 2 ] || bad "--idle needs seconds"
		idle=$2
		shift 2
		;;
	-*) bad "unknown option '$1'" ;;
	*) break ;;
	esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then bad "RADIX [PODS]"; fi
radix=$1 pods=${2:-}
[[ $radix =~ ^[0-9]+$ ]] || bad "RADIX must be a number, not '$radix'"
if ! [[ $idle =~ ^[0-9]+$ ]] || [ "$idle" -eq 0 ]; then
	bad "--idle must be a positive number of seconds, not '$idle'"
fi
[ -z "$pods" ] || [[ $pods =~ ^[0-9]+$ ]] || bad "PODS must be a number, not '$pods'"
if [ -n "$hive" ]; then
	[ ${#ppn[@]} = 0 ] || bad "--hive and --process-per-node exclude each other"
	[ -z "$pods" ] || bad "--hive takes no PODS (fat-tree-hive.sh makes two levels)"
else
	[ -z "$routes" ] || bad "--routes goes with --hive"
fi

release=$(readlink -m "${CARGO_TARGET_DIR:-target}/release")
fabric=${IBTCA_FABRIC:-$release/ibtca-fabric}
hive_bin=${IBTCA_HIVE:-$release/ibtca-hive}
if [ -n "$hive" ]; then bin=$hive_bin; else bin=$fabric; fi
[ -x "$bin" ] || command -v "$bin" >/dev/null || { echo "bench-fabric-up.sh: no $bin: cargo build --release" >&2; exit 1; }

# A short directory: Unix socket paths are short.
work=$(mktemp -d /tmp/bench-fabric-up.XXXXXX)
hive_pid=
cleanup() {
	if [ -n "$hive_pid" ]; then
		kill "$hive_pid" 2>/dev/null || true
		wait "$hive_pid" 2>/dev/null || true
	fi
	if [ -z "$hive" ] && [ -e "$work/run/fabric-state.json" ]; then
		"$fabric" down --run-dir "$work/run" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# utime+stime, in clock ticks, of the processes $@ (each with all its
# threads, /proc/PID/stat fields 14 and 15 after the command's name).
ticks() {
	local t=0 pid f
	for pid in "$@"; do
		f=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
		# shellcheck disable=SC2086
		set -- $f
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}

# Sum of field $1 (kB) of /proc/PID/FILE ($2) over the processes $3...
sum_kb() {
	local key=$1 file=$2 kb=0 pid v
	shift 2
	for pid in "$@"; do
		v=$(awk -v k="$key:" '$1 == k { print $2; exit }' "/proc/$pid/$file" 2>/dev/null || true)
		kb=$((kb + ${v:-0}))
	done
	echo "$kb"
}

if [ -n "$hive" ]; then
	ROUTES=${routes:-0} bash scripts/fat-tree-hive.sh "$radix" "$work/sm.link" >"$work/hive.json"
	switches=$(grep -c '"ports"' "$work/hive.json" || true)
	cas=$(grep -c '"port": ' "$work/hive.json" || true)
	what="ibtca-hive --config (fat-tree-hive.sh $radix${routes:+, ROUTES=1}): $cas CAs, $switches switches"
	"$hive_bin" --config "$work/hive.json" >"$work/hive.log" 2>&1 &
	hive_pid=$!
	until grep -qs 'hive started' "$work/hive.log"; do
		kill -0 "$hive_pid" 2>/dev/null || { cat "$work/hive.log" >&2; echo "bench-fabric-up.sh: ibtca-hive exited" >&2; exit 1; }
		sleep 0.2
	done
	pids=("$hive_pid")
	timing=''
else
	bash scripts/fat-tree-net.sh "$radix" ${pods:+"$pods"} >"$work/ft.net"
	switches=$(grep -c '^Switch' "$work/ft.net" || true)
	cas=$(grep -c '^Ca' "$work/ft.net" || true)
	what="ibtca-fabric up --net (fat-tree-net.sh $radix${pods:+ $pods}${ppn[*]:+, ${ppn[*]}}): $cas CAs, $switches switches"
	t0=$(now)
	"$fabric" up --net "$work/ft.net" --run-dir "$work/run" "${ppn[@]}" >"$work/up.log" 2>&1 ||
		{ cat "$work/up.log" >&2; echo "bench-fabric-up.sh: up failed" >&2; exit 1; }
	t1=$(now)
	mapfile -t pids < <(grep -o '"pid": *[0-9]*' "$work/run/fabric-state.json" | grep -o '[0-9]*$')
	timing="up $(secs "$t0" "$t1") s, "
fi

c0=$(ticks "${pids[@]}")
sleep "$idle"
c1=$(ticks "${pids[@]}")
threads=$(sum_kb Threads status "${pids[@]}")
rss=$(sum_kb Rss smaps_rollup "${pids[@]}")
pss=$(sum_kb Pss smaps_rollup "${pids[@]}")
hz=$(getconf CLK_TCK)

if [ -z "$hive" ]; then
	t0=$(now)
	"$fabric" down --run-dir "$work/run" >/dev/null
	t1=$(now)
	timing="$timing$(printf 'down %s s, ' "$(secs "$t0" "$t1")")"
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v what="$what" -v timing="$timing" -v n=${#pids[@]} -v th="$threads" \
	-v rss="$rss" -v pss="$pss" -v c="$((c1 - c0))" -v hz="$hz" -v idle="$idle" 'BEGIN {
	printf "%s: %sprocesses %d, threads %d, RSS %.1f MiB, PSS %.1f MiB, idle CPU %.2f s over %d s (%.1f %% of one CPU)\n",
		what, timing, n, th, rss / 1024, pss / 1024, c / hz, idle, 100 * c / hz / idle
}'
