#!/usr/bin/env bash
# OpenSM on the host, attached through Debian's libumad2sim, bringing up a
# two-level fat tree (scripts/fat-tree-net.sh RADIX: RADIX*RADIX/2 CAs)
# twice: on ibtca (`ibtca-fabric up --net` with one CA made a host port,
# docs/host-sm.md) and on ibsim with the same net file. For each run it
# prints
#   sweep        seconds between OpenSM's "Entering DISCOVERING state" and
#                "SUBNET UP" in its log (`opensm -o`: one heavy sweep);
#   discover     wall seconds of one `ibnetdiscover` afterwards, and the
#                switches and CAs it listed;
#   up           (ibtca) wall seconds of `ibtca-fabric up --net`.
#
#   scripts/bench-host-sm.sh RADIX [RUNS]      # after cargo build --release
#
# Needs opensm, infiniband-diags, libumad2sim0 and ibsim-utils
# (scripts/host-tools.sh). The release binaries are taken from
# $CARGO_TARGET_DIR (or target/). ibsim attaches OpenSM to the net's
# first CA (SIM_HOST), ibtca makes that CA the host port.
set -euo pipefail
cd "$(dirname "$0")/.."

radix=${1:?usage: scripts/bench-host-sm.sh RADIX [RUNS]}
runs=${2:-1}
fabric=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-target}/release/ibtca-fabric}
umad2sim=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
[ -x "$fabric" ] || { echo "$fabric missing: cargo build --release" >&2; exit 1; }
for t in opensm ibnetdiscover ibsim; do
	command -v "$t" >/dev/null || { echo "$t missing: scripts/host-tools.sh" >&2; exit 1; }
done
[ -e "$umad2sim" ] || { echo "$umad2sim missing: scripts/host-tools.sh" >&2; exit 1; }

work=$(mktemp -d /tmp/bench-host-sm.XXXXXX)
net=$work/fat-tree.net
bash scripts/fat-tree-net.sh "$radix" >"$net"
cas=$((radix * radix / 2))
switches=$((radix + radix / 2))
first_ca=ca1-1
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
	IBSIM_SOCKNAME=$1 SIM_HOST=$2 LD_PRELOAD=$umad2sim \
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
		'BEGIN { printf "sweep %.2f s, ibnetdiscover %.2f s (%d switches, %d CAs)", d1 - d0, t1 - t0, sw, ca }'
}

echo "fat tree radix $radix: $cas CAs, $switches switches; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do
	t0=$(date +%s.%N)
	"$fabric" up --net "$net" --run-dir "$work/run" --timeout 600 \
		--sim-port "$first_ca=$sock" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
	t1=$(date +%s.%N)
	printf 'ibtca run %d: up %.1f s, %s\n' "$i" "$(echo "$t1 - $t0" | bc)" "$(measure "$sock" "")"
	"$fabric" down --run-dir "$work/run" >/dev/null

	IBSIM_SOCKNAME=$sock-ibsim ibsim -s -n "$net" >"$work/ibsim.log" 2>&1 &
	ibsim_pid=$!
	# ibsim binds its sockets, then reads the net: wait for its banner.
	until grep -qs 'Network simulator ready' "$work/ibsim.log"; do
		kill -0 "$ibsim_pid" 2>/dev/null || { cat "$work/ibsim.log" >&2; exit 1; }
		sleep 0.1
	done
	printf 'ibsim run %d: %s\n' "$i" "$(measure "$sock-ibsim" "$first_ca")"
	kill "$ibsim_pid"
	wait "$ibsim_pid" 2>/dev/null || true
	ibsim_pid=
done
