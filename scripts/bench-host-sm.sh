#!/usr/bin/env bash
# OpenSM on the host, attached through Debian's libumad2sim, bringing up a
# fat tree (scripts/fat-tree-net.sh RADIX [PODS]: two levels, RADIX*RADIX/2
# CAs; three levels with PODS, PODS*(RADIX/2)^2 CAs) on ibtca
# (`ibtca-fabric up --net` with the net's first CA made a host port,
# docs/host-sm.md) and on ibsim with the same net file, one after the
# other in each run. For each it prints
#   sweep        seconds between OpenSM's "Entering DISCOVERING state" and
#                "SUBNET UP" in its log (`opensm -o`: one heavy sweep);
#   discover     wall seconds of one `ibnetdiscover` afterwards, and the
#                switches, CAs and port lines (two per link) it listed;
#   hwm          the fabric's peak resident memory after the sweep and the
#                discovery (VmHWM: the hive's, or every process's summed
#                with --process-per-node; ibsim's), and OpenSM's (maxrss);
#   up           (ibtca) wall seconds of `ibtca-fabric up --net`;
# and the run's ibtca/ibsim sweep ratio.
#
#   scripts/bench-host-sm.sh RADIX [RUNS] [PODS]   # after cargo build --release
#   PPN=1 scripts/bench-host-sm.sh 36 1            # ibtca --process-per-node
#
# Needs opensm, infiniband-diags, libumad2sim0 and ibsim-utils
# (scripts/host-tools.sh). The release binaries are taken from
# $CARGO_TARGET_DIR (or target/). ibsim attaches OpenSM to the net's
# first CA (SIM_HOST), ibtca makes that CA the host port.
set -euo pipefail
cd "$(dirname "$0")/.."

radix=${1:?usage: scripts/bench-host-sm.sh RADIX [RUNS] [PODS]}
runs=${2:-1}
pods=${3:-}
ppn=()
[ "${PPN:-0}" = 0 ] || ppn=(--process-per-node)
fabric=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-target}/release/ibtca-fabric}
umad2sim=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
[ -x "$fabric" ] || { echo "$fabric missing: cargo build --release" >&2; exit 1; }
for t in opensm ibnetdiscover ibsim; do
	command -v "$t" >/dev/null || { echo "$t missing: scripts/host-tools.sh" >&2; exit 1; }
done
[ -e "$umad2sim" ] || { echo "$umad2sim missing: scripts/host-tools.sh" >&2; exit 1; }

work=$(mktemp -d /tmp/bench-host-sm.XXXXXX)
net=$work/fat-tree.net
bash scripts/fat-tree-net.sh "$radix" $pods >"$net"
cas=$(grep -c '^Ca' "$net")
switches=$(grep -c '^Switch' "$net")
first_ca=$(awk -F'"' '/^Ca/ { print $2; exit }' "$net")
# ibsim's tables are fixed at start (2,048 nodes, 256 switches, 13,312
# ports by default): size them to the net.
ibsim_size=(-N $((cas + switches + 16)) -S $((switches + 16)) -P $((switches * (radix + 1) + cas * 2 + 64)))
sock=bench-host-sm-$$
ibsim_pid=

cleanup() {
	"$fabric" down --run-dir "$work/run" >/dev/null 2>&1 || true
	[ -z "$ibsim_pid" ] || kill "$ibsim_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# Seconds since midnight of an OpenSM log line ("Nov 25 22:21:42 373896 [...]").
log_time() {
	awk '{ split($3, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] + $4 / 1e6; exit }'
}

# One OpenSM sweep and one ibnetdiscover through the port named $1 (and
# SIM_HOST $2 for ibsim); prints "sweep S discover D switches N cas M".
measure() {
	local log=$work/opensm.log
	rm -f "$log"
	# libumad2sim makes its sysfs (sys-PID) in the working directory.
	cd "$work"
	IBSIM_SOCKNAME=$1 SIM_HOST=$2 LD_PRELOAD=$umad2sim /usr/bin/time -o "$work/opensm.rss" -f %M \
		timeout 900 opensm -o -f "$log" >/dev/null 2>&1 || { echo "opensm failed" >&2; tail -20 "$log" >&2; exit 1; }
	grep -q 'SUBNET UP' "$log" || { echo "no SUBNET UP" >&2; tail -20 "$log" >&2; exit 1; }
	local d0 d1 t0 t1 out
	d0=$(grep -m1 'Entering DISCOVERING state' "$log" | log_time)
	d1=$(grep -m1 'SUBNET UP' "$log" | log_time)
	grep ' ERR ' "$log" | sed 's/^/  opensm: /' | head -5 >&2 || true
	t0=$(date +%s.%N)
	out=$(IBSIM_SOCKNAME=$1 SIM_HOST=$2 LD_PRELOAD=$umad2sim timeout 900 ibnetdiscover 2>/dev/null)
	t1=$(date +%s.%N)
	awk -v d0="$d0" -v d1="$d1" -v t0="$t0" -v t1="$t1" \
		-v sw="$(grep -c '^Switch' <<<"$out")" -v ca="$(grep -c '^Ca' <<<"$out")" \
		-v ports="$(grep -c '^\[' <<<"$out")" -v smrss="$(tail -1 "$work/opensm.rss")" \
		'BEGIN { printf "sweep %.2f s, ibnetdiscover %.2f s (%d switches, %d CAs, %d port lines), opensm hwm %d MB", d1 - d0, t1 - t0, sw, ca, ports, smrss / 1024 }' |
		tee "$work/measured"
}

# Sum of VmHWM (MB) of the processes $@.
hwm_mb() {
	local kb=0 pid v
	for pid in "$@"; do
		v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
		kb=$((kb + ${v:-0}))
	done
	echo $((kb / 1024))
}

# PIDs of the processes `up` started (its state file).
fabric_pids() {
	grep -o '"pid": *[0-9]*' "$work/run/fabric-state.json" | grep -o '[0-9]*$'
}

echo "fat tree radix $radix${pods:+, $pods pods}: $cas CAs, $switches switches${ppn[*]:+ (${ppn[*]})}; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do
	t0=$(date +%s.%N)
	"$fabric" up --net "$net" --run-dir "$work/run" --timeout 600 \
		--sim-port "$first_ca=$sock" "${ppn[@]}" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
	t1=$(date +%s.%N)
	printf 'ibtca run %d: up %.1f s, %s' "$i" "$(echo "$t1 - $t0" | bc)" "$(measure "$sock" "")"
	ibtca_sweep=$(awk '{ print $2; exit }' "$work/measured")
	# shellcheck disable=SC2046
	printf ', fabric hwm %d MB\n' "$(hwm_mb $(fabric_pids))"
	"$fabric" down --run-dir "$work/run" >/dev/null

	IBSIM_SOCKNAME=$sock-ibsim ibsim -s "${ibsim_size[@]}" -n "$net" >"$work/ibsim.log" 2>&1 &
	ibsim_pid=$!
	# ibsim binds its sockets, then reads the net: wait for its banner.
	until grep -qs 'Network simulator ready' "$work/ibsim.log"; do
		kill -0 "$ibsim_pid" 2>/dev/null || { cat "$work/ibsim.log" >&2; exit 1; }
		sleep 0.1
	done
	printf 'ibsim run %d: %s' "$i" "$(measure "$sock-ibsim" "$first_ca")"
	ibsim_sweep=$(awk '{ print $2; exit }' "$work/measured")
	printf ', ibsim hwm %d MB\n' "$(hwm_mb "$ibsim_pid")"
	awk -v a="$ibtca_sweep" -v b="$ibsim_sweep" \
		'BEGIN { printf "run %d: sweep ibtca/ibsim %.2f\n", '"$i"', a / b }'
	kill "$ibsim_pid"
	wait "$ibsim_pid" 2>/dev/null || true
	ibsim_pid=
done
