#!/usr/bin/env bash
# Where NVMe-oF's time goes over ibtca (docs/ulp-benchmarks.md, "What
# bounds NVMe-oF"): the guests of scripts/ulp-bench.sh (n1 the nvmet-rdma
# target and OpenSM, n2 the nvme-rdma host; ibtca only, IPoIB on ib0), with
# linux-perf layered on their Debian root. n2 runs, one after the other,
# SECONDS each, with fio as the bench runs it:
#   4 KiB random reads at queue depth 16 and 128 KiB sequential reads at
#   queue depth 16, first on n2's own null_blk (/dev/nullb0, no fabric:
#   the guest's ceiling), then over NVMe-oF (namespace 1, null_blk in n1,
#   filled first), then over NVMe-oF again under `perf record -a -g -e
#   cpu-clock -F 1000`, while n1 records the same window.
# For each run it reports fio's IOPS, MB/s and mean latency, n2's and n1's
# vCPU busy share (/proc/stat: 1 - (idle + iowait) / all) and, measured on
# the host, the CPU each process of the fabric (the devices, the switch,
# each guest's QEMU with its threads) spent over the run, as a share of
# one CPU: which of them is saturated bounds the row. A perf run also
# keeps n1's and n2's `perf report --no-children --sort sym` and
# `--children` (top 60 lines each). n1 takes its window from n2's start
# marker in the share and lasts SECONDS; n2 waits for n1's report before
# the next run, so no report overlaps a measurement.
#
#   scripts/ulp-profile.sh [--seconds N] [--no-dim] [--scheduler S]
#                          [--commands DIR] [RUN_DIR]
#                                # as root, after cargo build --release
#
# --seconds N: each fio run's length (default 10).
# --no-dim: `rdma dev set ibtca0 adaptive-moderation off` in both guests
# (every armed CQ interrupts at its first completion; the ib core's DIM
# no longer moderates nvme-rdma's and nvmet-rdma's CQs).
# --scheduler S: n2's NVMe path devices' I/O scheduler (none,
# mq-deadline; default: the kernel's choice, as the bench keeps it).
# --commands DIR: write the guests' commands (DIR/n1.1, ..., n2.1, ...)
# and boot nothing.
# Results (RUN_DIR, default $IBTCA_CACHE/chroot/tmp/ulp-profile):
# summary.txt (one ULP-PROFILE line per run and value), the reports
# (n1-RUN.report, n2-RUN.report), host-RUN.cpu. IBTCA_FABRIC and
# IBTCA_GUEST_DIR override the launcher and the guest image.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/ulp-guest.sh"
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
FABRIC=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-$root/target}/release/ibtca-fabric}

# tree_ticks PID...: "PID TICKS" for each PID: the user and system clock
# ticks of it, its threads and every live descendant, from $PROC (default
# /proc) stat files (a guest's QEMU runs under its run-vm.sh).
tree_ticks() {
	local proc=${PROC:-/proc}
	# Processes come and go while cat reads: a vanished one is no error.
	{ cat "$proc"/[0-9]*/stat 2>/dev/null || true; } | awk -v roots="$*" '
	{
		pid = $1; r = $0
		# comm may hold spaces and parentheses: the fields follow the last ")".
		sub(/^.*\) /, "", r); split(r, f, " ")
		pp[pid] = f[2]; t[pid] = f[12] + f[13]
	}
	END {
		n = split(roots, R, " ")
		for (i = 1; i <= n; i++) is[R[i]] = 1
		for (p in t)
			for (q = p; q != "" && q > 0; q = (q in pp) ? pp[q] : "")
				if (q in is) s[q] += t[p]
		for (i = 1; i <= n; i++) print R[i], s[R[i]] + 0
	}'
}
[ "${ULP_PROFILE_LIB:-}" = 1 ] && return 0

seconds=10 commands= no_dim= scheduler=
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--seconds) [ $# -ge 2 ] || { echo "--seconds needs a number" >&2; exit 2; }; seconds=$2; shift 2 ;;
	--commands) [ $# -ge 2 ] || { echo "--commands needs a directory" >&2; exit 2; }; commands=$2; shift 2 ;;
	--scheduler) [ $# -ge 2 ] || { echo "--scheduler needs none or mq-deadline" >&2; exit 2; }; scheduler=$2; shift 2 ;;
	--no-dim) no_dim=1; shift ;;
	-*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
case $seconds in
'' | *[!0-9]* | 0*) echo "--seconds takes a whole number above 0, not '$seconds'" >&2; exit 2 ;;
esac
case $scheduler in
'' | none | mq-deadline) ;;
*) echo "--scheduler takes none or mq-deadline, not '$scheduler'" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "one RUN_DIR at most (see --help)" >&2; exit 2; }

# The runs, in order: NAME:FIO_ARGS:WHERE:PERF (WHERE local is n2's
# /dev/nullb0, nvme namespace 1; PERF 1 under perf record in both guests).
RUNS=(
	"local-randread-4k-qd16:--rw=randread --bs=4k --iodepth=16:local:0"
	"local-seqread-128k-qd16:--rw=read --bs=128k --iodepth=16:local:0"
	"nvme-randread-4k-qd16:--rw=randread --bs=4k --iodepth=16:nvme:0"
	"nvme-seqread-128k-qd16:--rw=read --bs=128k --iodepth=16:nvme:0"
	"perf-randread-4k-qd16:--rw=randread --bs=4k --iodepth=16:nvme:1"
	"perf-seqread-128k-qd16:--rw=read --bs=128k --iodepth=16:nvme:1"
)
P=/share/prof
PERF_REC="perf record -a -g -e cpu-clock -F 1000"
# busy FILE0 FILE1: the vCPU busy share between two /proc/stat cpu lines.
BUSY="cat \$1 \$2 | awk '{ t = 0; for (i = 2; i <= NF; i++) t += \$i; i = \$5 + \$6 }
	NR == 1 { t0 = t; i0 = i } NR == 2 && t > t0 { printf \"%.0f\", 100 * (1 - (i - i0) / (t - t0)) }'"
# reports DATA OUT: perf's two views of DATA, the first 60 lines of each.
REPORTS="{ perf report -i \$1 --no-children --sort sym --stdio 2>/dev/null | grep -v '^#' | sed -n '1,60p'
	echo '--- children'
	perf report -i \$1 --children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | sed -n '1,60p'; } >\$2"
# dim_off N: node N's commands for --no-dim.
dim_off() {
	[ -n "$no_dim" ] || return 0
	echo "rdma dev set ibtca0 adaptive-moderation off || exit 1"
	echo "echo \"ULP-PROFILE-DIM n$1 \$(rdma dev show ibtca0 | grep -o 'adaptive-moderation [a-z]*')\""
}

ulp_transport ibtca
# n1: a watcher in the background, one window per run in RUNS' order, up
# before the target; then the target until n2 is done.
n1=("$(ulp_setup 1)")
n1+=("$(
	ulp_funcs
	dim_off 1
	echo "busy() { $BUSY; }"
	echo "reports() { $REPORTS; }"
	echo "mkdir -p $P"
	echo "("
	for r in "${RUNS[@]}"; do
		IFS=: read -r name _ _ perf <<<"$r"
		echo "wait_for '[ -e $P/start-$name ]' 120000 || exit 1"
		echo "head -n 1 /proc/stat >/tmp/$name.s0"
		if [ "$perf" = 1 ]; then
			echo "$PERF_REC -o /tmp/$name.data -- sleep $seconds >/dev/null 2>&1"
		else
			echo "sleep $seconds"
		fi
		echo "head -n 1 /proc/stat >/tmp/$name.s1"
		echo "echo \"ULP-PROFILE $name n1-busy \$(busy /tmp/$name.s0 /tmp/$name.s1) %\" >$P/n1-$name.txt"
		[ "$perf" = 1 ] && echo "reports /tmp/$name.data $P/n1-$name.report"
		echo "touch $P/n1-$name.done"
	done
	echo ") >/tmp/prof-watch.log 2>&1 &"
)")
n1+=("$(ulp_target)")

# n2: fill namespace 1, then each run between its markers.
body=$(
	echo "busy() { $BUSY; }"
	echo "reports() { $REPORTS; }"
	echo "mkdir -p $P"
	if [ -n "$scheduler" ]; then
		echo "for q in /sys/block/nvme*c*n*/queue/scheduler; do echo $scheduler >\$q || rc=1; done"
	fi
	echo "echo \"ULP-PROFILE-SCHEDULER \$(cat /sys/block/nvme*c*n1/queue/scheduler)\""
	echo "fio --name=fill --filename=\$ns1 --ioengine=libaio --direct=1 --rw=write --bs=1M --size=64M >/dev/null || rc=1"
	for r in "${RUNS[@]}"; do
		IFS=: read -r name args where perf <<<"$r"
		dev='$ns1'
		[ "$where" = local ] && dev=/dev/nullb0
		rec=
		[ "$perf" = 1 ] && rec="$PERF_REC -o /tmp/$name.data -- "
		cat <<EOF
touch $P/start-$name
head -n 1 /proc/stat >/tmp/$name.s0
${rec}fio --name=$name --filename=$dev --ioengine=libaio --direct=1 --size=64M --time_based --runtime=$seconds --output-format=terse $args >/tmp/$name.terse 2>/tmp/$name.err || rc=1
head -n 1 /proc/stat >/tmp/$name.s1
touch $P/end-$name
awk -F';' 'NF > 40 { printf "ULP-PROFILE $name iops %s IOPS\\nULP-PROFILE $name mbs %.2f MB/s\\nULP-PROFILE $name usec %.0f usec\\n", \$8, \$7 * 1024 / 1e6, \$40 }' /tmp/$name.terse >$P/n2-$name.txt
echo "ULP-PROFILE $name n2-busy \$(busy /tmp/$name.s0 /tmp/$name.s1) %" >>$P/n2-$name.txt
EOF
		[ "$perf" = 1 ] && echo "reports /tmp/$name.data $P/n2-$name.report"
		echo "wait_for '[ -e $P/n1-$name.done ]' 36000 || rc=1"
	done
)
n2=("$(ulp_setup 2)")
n2+=("$(
	ulp_funcs
	dim_off 2
)")
n2+=("$(ulp_host "$body")")

if [ -n "$commands" ]; then
	ulp_write_commands "$commands"
	exit 0
fi

export ULP_GUEST_PACKAGES=linux-perf,iputils-ping
C=$(readlink -f "$CACHE/chroot")
RUN=${1:-$C/tmp/ulp-profile}
[ -x "$FABRIC" ] || { echo "no $FABRIC: cargo build --release (or set IBTCA_FABRIC)" >&2; exit 1; }
missing=$(ulp_missing "$GUEST")
[ -z "$missing" ] || { echo "ulp-profile: $missing" >&2; exit 1; }

"$FABRIC" down --run-dir "$RUN/fabric" >/dev/null 2>&1 || true
rm -rf -- "$RUN"
mkdir -p "$RUN"
share=$(mktemp -d "${TMPDIR:-/tmp}/ibtca-ulp-profile-share.XXXXXX")
mkdir -p "$share/prof"
watcher=
trap '[ -z "$watcher" ] || kill "$watcher" 2>/dev/null; "$FABRIC" down --run-dir "$RUN/fabric" >/dev/null 2>&1 || true; rm -rf -- "$share"' EXIT
trap 'exit 143' TERM INT

# The host's view of each run: every process of the fabric's CPU ticks
# at n2's start and end markers, as the share of one CPU over the run.
host_watch() {
	local state=$RUN/fabric/fabric-state.json hz r name pids t0 t1 s0 s1
	hz=$(getconf CLK_TCK)
	for r in "${RUNS[@]}"; do
		name=${r%%:*}
		until [ -e "$share/prof/start-$name" ]; do sleep 0.05; done
		# name and pid of each process `up` started: "n1 (guest)" is n1's
		# run-vm.sh, its QEMU below it.
		pids=$(python3 -c 'import json, sys
for p in json.load(open(sys.argv[1]))["processes"]:
    print(p["pid"], p["name"].replace(" ", "_"))' "$state")
		t0=$(date +%s%N)
		s0=$(tree_ticks $(awk '{ print $1 }' <<<"$pids"))
		until [ -e "$share/prof/end-$name" ]; do sleep 0.05; done
		t1=$(date +%s%N)
		s1=$(tree_ticks $(awk '{ print $1 }' <<<"$pids"))
		awk -v name="$name" -v hz="$hz" -v wall="$(((t1 - t0) / 1000000))" '
			FILENAME == "-" { who[$1] = $2; next }
			!seen[FILENAME]++ { f++ }
			f == 1 { a[$1] = $2; next }
			{ printf "ULP-PROFILE %s host-cpu/%s %.0f %% of a CPU\n", name, who[$1],
				100 * ($2 - a[$1]) / hz / (wall / 1000) }' \
			- <(echo "$s0") <(echo "$s1") <<<"$pids" >"$RUN/host-$name.cpu"
	done
}
host_watch &
watcher=$!

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
status=0
ulp_up "$FABRIC" "$RUN/fabric" "$GUEST" "$share" "${n1[@]}" -- "${n2[@]}" >"$RUN/up.log" 2>&1 || {
	status=1
	tail -n 20 "$RUN/up.log" >&2
	grep -ah 'ULP-MISSING\|WAIT-TIMEOUT' "$RUN"/fabric/n*.console >&2 || true
}
kill "$watcher" 2>/dev/null || true
watcher=
cp "$share"/prof/*.report "$RUN/" 2>/dev/null || true
for r in "${RUNS[@]}"; do
	name=${r%%:*}
	cat "$share/prof/n2-$name.txt" "$share/prof/n1-$name.txt" "$RUN/host-$name.cpu" 2>/dev/null || true
done | tee "$RUN/summary.txt"
grep -ah 'ULP-PROFILE-' "$RUN"/fabric/n*.console | tr -d '\r' | tee -a "$RUN/summary.txt" || true
echo "boot to power-off: $(($(date +%s) - start)) s; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "reports: $RUN/{n1,n2}-perf-*.report"
exit $status
