#!/usr/bin/env bash
# Time from `ibtca-fabric up FILE --guests` to OpenSM's "SUBNET UP" in the
# SM node's guest (BENCHMARKS.md, "Subnet management with OpenSM"). For each run it prints
#   up->SUBNET UP   seconds from starting `up` until the SM node's console
#                   says `IBTCA-SM SUBNET UP` (the guest polls OpenSM's log
#                   once a second, so up to a second late);
#   opensm sweep    seconds between OpenSM's "Entering DISCOVERING state"
#                   and "SUBNET UP" in its own log (its first sweep alone).
#
#   scripts/bench-subnet-up.sh FILE [RUNS]     # as root, after cargo build --release
#
# Needs the VM stack (scripts/setup-vm-stack.sh) and the guest
# (scripts/build-guest.sh, into $IBTCA_GUEST_DIR or $IBTCA_CACHE/guest).
# The release binaries are taken from $CARGO_TARGET_DIR (or target/);
# $IBTCA_FABRIC names another ibtca-fabric. Only the SM node boots a guest
# (`up --guests` with an "sm" boots the SM's and the `--run` nodes' only):
# the other nodes are devices whose agents OpenSM configures.
set -euo pipefail
cd "$(dirname "$0")/.."

file=${1:?usage: scripts/bench-subnet-up.sh FILE [RUNS]}
runs=${2:-1}
cache=${IBTCA_CACHE:-$HOME/.cache/ibtca}
guest=${IBTCA_GUEST_DIR:-$cache/guest}
chroot=$(readlink -f "$cache/chroot")
fabric=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-target}/release/ibtca-fabric}
sm=$(sed -n 's/.*"sm": *"\([^"]*\)".*/\1/p' "$file")
[ -n "$sm" ] || { echo "$file names no \"sm\" node" >&2; exit 1; }
[ -x "$fabric" ] || { echo "$fabric missing: cargo build --release" >&2; exit 1; }

# Seconds since midnight of an OpenSM log line ("Nov 25 22:21:42 373896 [...]").
log_time() {
	awk '{ split($3, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] + $4 / 1e6; exit }'
}

for i in $(seq "$runs"); do
	run=$chroot/tmp/bench-subnet-up.$$
	"$fabric" down --run-dir "$run" >/dev/null 2>&1 || true
	rm -rf "$run"
	t0=$(date +%s.%N)
	"$fabric" up "$file" --run-dir "$run" --guests --guest-timeout 900 \
		--kernel "$guest/vmlinuz" --initrd "$guest/initramfs.cpio.gz" \
		--run-vm scripts/run-vm.sh \
		--run "$sm=for i in \$(seq 600); do grep -q 'SUBNET UP' /ibtca/opensm.log && exit 0; sleep 1; done; exit 1" \
		>"$run.up.log" 2>&1 &
	up=$!
	until grep -q 'IBTCA-SM SUBNET UP' "$run/$sm.console" 2>/dev/null; do
		if [ -n "$up" ] && ! kill -0 "$up" 2>/dev/null; then
			# `up` returns once the guests are booting; a failure is final.
			wait "$up" || { cat "$run.up.log" >&2; exit 1; }
			up=
		fi
		if awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { exit !(a - b > 900) }'; then
			echo "no SUBNET UP after 900 s" >&2
			exit 1
		fi
		sleep 0.1
	done
	t1=$(date +%s.%N)
	[ -z "$up" ] || wait "$up" || true
	log=$run/$sm.guest/opensm.log
	d0=$(grep -m1 'Entering DISCOVERING state' "$log" | log_time)
	d1=$(grep -m1 'SUBNET UP' "$log" | log_time)
	awk -v f="$(basename "$file")" -v i="$i" -v t0="$t0" -v t1="$t1" -v d0="$d0" -v d1="$d1" \
		'BEGIN { printf "%s run %d: up->SUBNET UP %.1f s, opensm sweep %.2f s\n", f, i, t1 - t0, d1 - d0 }'
	# OpenSM's errors, if any, for a look (the run directory goes away).
	grep ' ERR ' "$log" | sed 's/^/  opensm: /' | head -20 || true
	"$fabric" down --run-dir "$run" >/dev/null
	rm -rf "$run" "$run.up.log"
done
